//! `wirerate report`: one self-contained HTML page of charts from stored results, and each
//! chart as an SVG of its own.
//!
//! Promise: pure. The input is the result model (runs in named groups, find-max searches);
//! the output is text. No IO, no clock, no network reference in the output: the page has
//! inline CSS and SVG, a few lines of inline script that only add hovering, and a
//! Content-Security-Policy that forbids fetching anything. Every chart has a title, axis
//! names with units, a legend, a caption and a table of the numbers it draws; every
//! number in a table carries the stored figure it shows (`data-value`, in the unit of the
//! field it comes from: bit/s, percent, microseconds …).
//!
//! Which charts appear follows from what the inputs hold: one run gets its time series,
//! CPU per core, streams and verdict; several runs or groups get box plots and the A/B
//! statistics of `wirerate compare`; find-max searches get their loss curve.

mod findmax;
mod groups;
pub mod html;
mod matrix;
mod rpm;
mod rrsweep;
mod single;
pub mod svg;

use serde::Deserialize;
use wirerate_core::diagnosis::Bottleneck;
use wirerate_core::search::Step;
use wirerate_core::RunResult;

/// Runs that belong together: a label, a run, a file.
#[derive(Debug, Clone)]
pub struct Group {
    /// How the group was named ("label 'k6.8'", "run 12").
    pub name: String,
    pub runs: Vec<RunResult>,
    /// A name per run for tables ("run 12, 2026-11-23 10:52:24"); missing ones are
    /// numbered.
    pub run_names: Vec<String>,
}

/// A `run --find-max --json` document.
#[derive(Debug, Clone, Deserialize)]
pub struct FindMax {
    #[serde(default)]
    pub loss_limit_percent: f64,
    pub max_rate_bps: Option<f64>,
    pub steps: Vec<Step>,
    #[serde(default)]
    pub step_bottlenecks: Vec<Option<Bottleneck>>,
    /// Absent from searches saved before it was reported.
    #[serde(default)]
    pub confidence: Option<wirerate_core::search::Confidence>,
}

/// What a report is made of.
#[derive(Debug, Clone, Default)]
pub struct Input {
    pub groups: Vec<Group>,
    /// Searches, each with the name of the file it came from.
    pub find_max: Vec<(String, FindMax)>,
    /// The host-pair matrix, and what its runs are (" labelled 'plan:nightly'", or empty).
    pub matrix: Option<(wirerate_core::stats::PairMatrix, String)>,
}

/// One chart of a report, for `--svg DIR`.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Unique in the report; the file name without `.svg`.
    pub id: String,
    pub title: String,
    pub svg: String,
}

/// The rendered report.
#[derive(Debug, Clone)]
pub struct Report {
    pub title: String,
    pub html: String,
    pub charts: Vec<Chart>,
}

/// Why no report could be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportError {
    Empty,
}

impl std::fmt::Display for ReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReportError::Empty => f.write_str("nothing to report: no runs and no find-max search"),
        }
    }
}

impl std::error::Error for ReportError {}

/// Renders the report: sections chosen by what the input holds.
pub fn render(input: &Input) -> Result<Report, ReportError> {
    let groups: Vec<&Group> = input.groups.iter().filter(|g| !g.runs.is_empty()).collect();
    let matrix = input.matrix.as_ref().filter(|(m, _)| !m.cells.is_empty());
    if groups.is_empty() && input.find_max.is_empty() && matrix.is_none() {
        return Err(ReportError::Empty);
    }
    let mut sections = Vec::new();
    if let Some((m, what)) = matrix {
        sections.push(matrix::section(m, what));
    }
    let total_runs: usize = groups.iter().map(|g| g.runs.len()).sum();
    let title = match groups.as_slice() {
        [] if input.find_max.is_empty() => "wirerate report: host pairs".to_string(),
        [] => "wirerate report: find-max".to_string(),
        [g] => format!("wirerate report: {}", g.name),
        [a, b] => format!("wirerate report: {} against {}", b.name, a.name),
        [a, ..] => format!(
            "wirerate report: {} groups against {}",
            groups.len() - 1,
            a.name
        ),
    };
    if groups.len() > 1 || total_runs > 1 {
        sections.push(groups::section(&groups));
    }
    // the detail of single runs: the one run, or the latest of each group
    for g in &groups {
        if let Some(run) = g.runs.last() {
            let name = if g.runs.len() == 1 {
                g.name.clone()
            } else {
                format!("{}: the latest of its {} runs", g.name, g.runs.len())
            };
            sections.push(single::section(run, &name, &prefix(&g.name)));
        }
    }
    for (name, fm) in &input.find_max {
        sections.push(findmax::section(name, fm, &prefix(name)));
    }
    dedupe_ids(&mut sections);
    let mut parts = Vec::new();
    if total_runs > 0 {
        parts.push(format!(
            "{total_runs} run{} in {} group{}",
            svg::plural(total_runs),
            groups.len(),
            svg::plural(groups.len())
        ));
    }
    if let Some((m, _)) = matrix {
        let n = m.cells.len();
        parts.push(format!("{n} host pair{}", svg::plural(n)));
    }
    if !input.find_max.is_empty() {
        let n = input.find_max.len();
        parts.push(format!(
            "{n} find-max search{}",
            if n == 1 { "" } else { "es" }
        ));
    }
    let subtitle = format!(
        "{}; made by wirerate {}. Every chart has its numbers in a table under it; hover a \
         mark for its value.",
        parts.join(", "),
        env!("CARGO_PKG_VERSION")
    );
    let html = html::page(&title, &subtitle, &sections);
    let charts = sections
        .iter()
        .flat_map(|s| s.figures.iter())
        .map(|f| Chart {
            id: f.id.clone(),
            title: f.title.clone(),
            svg: f.svg.clone(),
        })
        .collect();
    Ok(Report {
        title,
        html,
        charts,
    })
}

/// A name as an id prefix: lower-case letters, digits and dashes.
fn prefix(name: &str) -> String {
    let mut o = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            o.push(c.to_ascii_lowercase());
        } else if !o.ends_with('-') {
            o.push('-');
        }
    }
    let o = o.trim_matches('-').chars().take(40).collect::<String>();
    if o.is_empty() {
        "x".to_string()
    } else {
        o
    }
}

/// Two groups with the same short name would give two charts one id: number the later.
/// The SVG's inner ids are renamed with its figure.
fn dedupe_ids(sections: &mut [html::Section]) {
    let mut seen = std::collections::BTreeSet::new();
    for f in sections.iter_mut().flat_map(|s| s.figures.iter_mut()) {
        let mut id = f.id.clone();
        let mut n = 2;
        while !seen.insert(id.clone()) {
            id = format!("{}-{n}", f.id);
            n += 1;
        }
        if id != f.id {
            f.svg = f
                .svg
                .replace(&format!("\"{}-t", f.id), &format!("\"{id}-t"))
                .replace(&format!("\"{}-d", f.id), &format!("\"{id}-d"))
                .replace(&format!(" {}-d\"", f.id), &format!(" {id}-d\""));
            f.id = id;
        }
    }
}

/// A rate unit for an axis whose largest value is `max` bit/s.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RateUnit {
    pub div: f64,
    pub name: &'static str,
}

impl RateUnit {
    pub fn for_max(max: f64) -> RateUnit {
        let (div, name) = if max >= 1e12 {
            (1e12, "Tbit/s")
        } else if max >= 1e9 {
            (1e9, "Gbit/s")
        } else if max >= 1e6 {
            (1e6, "Mbit/s")
        } else if max >= 1e3 {
            (1e3, "kbit/s")
        } else {
            (1.0, "bit/s")
        };
        RateUnit { div, name }
    }

    pub fn of(values: impl Iterator<Item = f64>) -> RateUnit {
        RateUnit::for_max(values.filter(|v| v.is_finite()).fold(0.0, f64::max))
    }

    pub fn show(self, bps: f64) -> String {
        format!("{:.2}", bps / self.div)
    }
}

#[cfg(test)]
mod tests;
