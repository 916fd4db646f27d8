//! One exporter per output format, behind one trait: what `run`, `run --repeat` and
//! `run --find-max` print at their end goes through here, so a format means the same thing
//! for every command, and a combination a format has no form for is refused before any
//! test runs instead of silently printing another format.
//!
//! The formats supply syntax only; the figures come from the model (`wirerate_core`).

use std::fmt::Write as _;

use serde::Serialize;
use wirerate_core::diagnosis::Bottleneck;
use wirerate_core::search::{Confidence, Step, STABLE_SPREAD};
use wirerate_core::units::format_bps;
use wirerate_core::{RunResult, TestSpec};

/// The output formats of the measuring commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Ttcp,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "json",
            Format::Ttcp => "ttcp",
        }
    }
}

/// What a command prints at its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// One run.
    Run,
    /// The runs of `--repeat` / `--until-ci`.
    Repeat,
    /// The result of a `--find-max` search.
    FindMax,
}

impl Output {
    fn words(self) -> &'static str {
        match self {
            Output::Run => "a run",
            Output::Repeat => "repeated runs",
            Output::FindMax => "a find-max search (ttcp has no rate search)",
        }
    }
}

/// A format that has no form for an output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    pub format: Format,
    pub output: Output,
}

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let others: Vec<&str> = [Format::Text, Format::Json, Format::Ttcp]
            .into_iter()
            .filter(|g| exporter(*g).supports(self.output))
            .map(Format::name)
            .collect();
        write!(
            f,
            "--format {} has no form for {}: use --format {}",
            self.format.name(),
            self.output.words(),
            others.join(" or ")
        )
    }
}

impl std::error::Error for Unsupported {}

/// The outcome of a find-max search, as `run -u --find-max` reports it. Its JSON is the
/// document `wirerate report` reads (`"kind": "find_max"`).
#[derive(Debug, Clone, Serialize)]
pub struct FindMaxResult<'a> {
    pub kind: &'static str,
    pub loss_limit_percent: f64,
    pub max_rate_bps: Option<f64>,
    /// The bracket around the rate found and the spread of the trials at it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<Confidence>,
    /// The repeat group and label the trials were stored under (None: not stored).
    pub group: Option<&'a str>,
    pub label: Option<&'a str>,
    pub steps: &'a [Step],
    /// Each trial's bottleneck, beside the steps: where a failing rate lost its excess.
    pub step_bottlenecks: &'a [Option<Bottleneck>],
    /// Each trial's id in the results database, beside the steps (None: not stored).
    pub step_run_ids: &'a [Option<i64>],
    pub spec: &'a TestSpec,
}

impl<'a> FindMaxResult<'a> {
    pub fn new(
        loss_limit_percent: f64,
        max_rate_bps: Option<f64>,
        steps: &'a [Step],
        step_bottlenecks: &'a [Option<Bottleneck>],
        spec: &'a TestSpec,
    ) -> Self {
        FindMaxResult {
            kind: "find_max",
            loss_limit_percent,
            max_rate_bps,
            confidence: None,
            group: None,
            label: None,
            steps,
            step_bottlenecks,
            step_run_ids: &[],
            spec,
        }
    }

    /// With the search's confidence and where its trials were stored.
    pub fn with_search(
        mut self,
        confidence: Confidence,
        group: Option<&'a str>,
        label: Option<&'a str>,
        step_run_ids: &'a [Option<i64>],
    ) -> Self {
        self.confidence = Some(confidence);
        self.group = group;
        self.label = label;
        self.step_run_ids = step_run_ids;
        self
    }
}

/// The text lines of a find-max outcome: the rate found, how it held up, where it is stored.
fn find_max_text(f: &FindMaxResult<'_>) -> String {
    let mut s = match f.max_rate_bps {
        Some(b) => format!(
            "highest rate with loss ≤ {} %: {} per stream\n",
            f.loss_limit_percent,
            format_bps(b)
        ),
        None => format!("no rate tried kept loss ≤ {} %\n", f.loss_limit_percent),
    };
    if let (Some(c), Some(_)) = (&f.confidence, f.max_rate_bps) {
        let range = |what: &str, s: Option<wirerate_core::stats::Summary>| {
            s.map_or_else(String::new, |s| {
                format!(", {what} {} .. {}", format_bps(s.min), format_bps(s.max))
            })
        };
        let spread = range("sent", c.sent) + &range("received", c.goodput);
        let median =
            |m: Option<f64>| m.map_or_else(String::new, |m| format!(", median loss {m:.3} %"));
        let _ = writeln!(
            s,
            "  passed {} of {} trials at that rate{}{spread}",
            c.passed,
            c.trials,
            median(c.loss_median_percent)
        );
        if !c.confirmed {
            let _ = writeln!(
                s,
                "  not confirmed: the search ended at its trial limit, before its rule did"
            );
        }
        if let Some(fail) = c.lowest_fail_bps {
            let short = match c.fail_short {
                0 => String::new(),
                n => format!(", {n} of them short of the rate"),
            };
            let _ = writeln!(
                s,
                "  lowest failing rate: {} (failed {} of {} trials{short}{})",
                format_bps(fail),
                c.fail_failed,
                c.fail_trials,
                median(c.fail_loss_median_percent)
            );
        }
        if let Some(spread) = c.capacity_spread.filter(|s| *s > STABLE_SPREAD) {
            let _ = writeln!(
                s,
                "  capacity varied {spread:.1}× between trials; the maximum is not stable here"
            );
        }
        if let Some(level) = c.level_percent {
            let grade = c.grade.map_or(String::new(), |g| {
                format!(" {}", crate::text::confidence_word(g))
            });
            let _ = writeln!(
                s,
                "  confidence{grade}: {level:.0} % that the limit lies {} (a sign test of the \
                 trials at each end)",
                if c.lowest_fail_bps.is_some() {
                    "between the two"
                } else {
                    "at or above it"
                }
            );
        }
    }
    if let Some(g) = f.group {
        let _ = writeln!(
            s,
            "{} trials stored as group {g}{}",
            f.steps.len(),
            f.label
                .map_or_else(String::new, |l| format!(", label '{l}'"))
        );
    }
    s
}

/// One format's syntax for every output. Each method returns the whole text to print.
pub trait Exporter {
    fn supports(&self, output: Output) -> bool;
    fn run(&self, r: &RunResult) -> String;
    fn repeat(&self, runs: &[RunResult]) -> Result<String, Unsupported>;
    fn find_max(&self, f: &FindMaxResult<'_>) -> Result<String, Unsupported>;
}

/// The exporter of a format; text in its short form ([`exporter_with`] for `-V`'s).
pub fn exporter(format: Format) -> &'static dyn Exporter {
    exporter_with(format, false)
}

/// The exporter of a format; `verbose` asks for the full text report (`-V`).
pub fn exporter_with(format: Format, verbose: bool) -> &'static dyn Exporter {
    match format {
        Format::Text if verbose => &TextExporter { verbose: true },
        Format::Text => &TextExporter { verbose: false },
        Format::Json => &JsonExporter,
        Format::Ttcp => &TtcpExporter,
    }
}

/// Refuses a combination the format has no form for; to call before any test runs.
pub fn check(format: Format, output: Output) -> Result<(), Unsupported> {
    if exporter(format).supports(output) {
        Ok(())
    } else {
        Err(Unsupported { format, output })
    }
}

/// The human report: the short summary, or with `verbose` the full block.
pub struct TextExporter {
    pub verbose: bool,
}

impl Exporter for TextExporter {
    fn supports(&self, _: Output) -> bool {
        true
    }

    fn run(&self, r: &RunResult) -> String {
        if self.verbose {
            crate::text::summary(r)
        } else {
            crate::brief::summary(r)
        }
    }

    fn repeat(&self, runs: &[RunResult]) -> Result<String, Unsupported> {
        Ok(format!("\n{}\n", crate::stats::repeat_table(runs)))
    }

    fn find_max(&self, f: &FindMaxResult<'_>) -> Result<String, Unsupported> {
        Ok(find_max_text(f))
    }
}

/// JSON following the result schema: one document per run, an array for repeated runs
/// (which `compare` and `import` read), the find-max document.
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn supports(&self, _: Output) -> bool {
        true
    }

    fn run(&self, r: &RunResult) -> String {
        format!("{}\n", crate::json::result(r))
    }

    fn repeat(&self, runs: &[RunResult]) -> Result<String, Unsupported> {
        // the model serializes infallibly (string keys, no custom serializers)
        Ok(format!(
            "{}\n",
            serde_json::to_string_pretty(runs).unwrap_or_default()
        ))
    }

    fn find_max(&self, f: &FindMaxResult<'_>) -> Result<String, Unsupported> {
        Ok(format!(
            "{}\n",
            serde_json::to_string_pretty(f).unwrap_or_default()
        ))
    }
}

/// Classic ttcp report lines: each run as ttcp printed it, so repeated runs read like the
/// ttcp logs of seed 000. ttcp never searched rates, so a find-max has no ttcp form.
pub struct TtcpExporter;

impl Exporter for TtcpExporter {
    fn supports(&self, output: Output) -> bool {
        output != Output::FindMax
    }

    fn run(&self, r: &RunResult) -> String {
        crate::ttcp::run_result_lines(r)
    }

    fn repeat(&self, runs: &[RunResult]) -> Result<String, Unsupported> {
        Ok(runs.iter().map(crate::ttcp::run_result_lines).collect())
    }

    fn find_max(&self, _: &FindMaxResult<'_>) -> Result<String, Unsupported> {
        Err(Unsupported {
            format: Format::Ttcp,
            output: Output::FindMax,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttcp_refuses_a_find_max_and_names_what_works() {
        let e = check(Format::Ttcp, Output::FindMax).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--format ttcp has no form for a find-max search (ttcp has no rate search): use \
             --format text or json"
        );
        assert!(check(Format::Ttcp, Output::Repeat).is_ok());
        assert!(check(Format::Json, Output::FindMax).is_ok());
        let spec = TestSpec::default();
        let f = FindMaxResult::new(0.1, None, &[], &[], &spec);
        assert!(exporter(Format::Ttcp).find_max(&f).is_err());
    }

    #[test]
    fn find_max_json_is_the_document_report_reads() {
        let spec = TestSpec::default();
        let steps = [Step {
            offered_bps: Some(1e6),
            sent_bps: Some(0.99e6),
            goodput_bps: 0.98e6,
            loss_percent: 0.0,
            pass: true,
            phase: Default::default(),
        }];
        let f = FindMaxResult::new(0.1, Some(1e6), &steps, &[None], &spec);
        let text = exporter(Format::Json).find_max(&f).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["kind"], "find_max");
        assert_eq!(v["max_rate_bps"], 1e6);
        assert_eq!(v["steps"][0]["pass"], true);
        assert!(v["step_bottlenecks"][0].is_null());
        assert!(v["spec"].is_object());
        let t = exporter(Format::Text).find_max(&f).unwrap();
        assert!(t.starts_with("highest rate with loss ≤ 0.1 %: 1.00 Mbit/s"));
    }
}
