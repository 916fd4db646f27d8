//! `wirerate changes`: where the level of a figure shifted in the stored history, per label
//! and host pair (a plan's label holds many pairs, and one pair's difference from another is
//! not a change). The search is `wirerate_core::stats::run_changes`; this file selects the
//! runs and hands the series over; `changes_out` prints them.
//!
//! [`scan`] is the whole job without printing, for anything that publishes change points
//! (a metrics exporter): a store and a [`Selection`] in, a [`ChangesReport`] out.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;
use wirerate_core::stats::{
    run_changes, ChangeOptions, Metric, RunChange, SeriesRun, Summary, CHANGE_ALPHA,
    MIN_SEGMENT_RUNS, UNKNOWN_HOST,
};
use wirerate_core::RunResult;
use wirerate_store::{RunFilter, Store, StoreError};

use super::results::{open_existing, DB_HELP};
use crate::exit;

#[derive(clap::Args)]
#[command(
    after_help = "Each series is one label and one host pair (the host names each \
run recorded, env.client.hostname -> env.server.hostname), its runs in order of start time. \
A change is where the level shifted and stayed: the series is split where the Mann-Whitney \
test finds its two sides most different, and the split stands when that p-value times the \
number of places the split could have gone is below 0.01; each side is searched again. \
Every side has 3 runs at least (--min-runs). For each change: the run that began the new \
level, the medians before and after (since the previous change, up to the next), the \
change in % with its 95 % confidence interval (Hodges-Lehmann) and the corrected p-value. \
See docs/statistics.md.\n\nExit status: 0 searched (changes or not), 1 no runs matched or \
the database could not be read, 2 bad usage."
)]
pub struct Args {
    /// Only runs stored with this label (a plan's runs: plan:NAME) [default: every label]
    #[arg(long, value_name = "NAME")]
    pub label: Option<String>,
    /// Only this host pair, FROM->TO (client and server host names as the runs recorded)
    #[arg(long, value_name = "FROM->TO", conflicts_with_all = ["from", "to"])]
    pub pair: Option<String>,
    /// Only runs whose client was this host
    #[arg(long, value_name = "HOST")]
    pub from: Option<String>,
    /// Only runs whose server was this host
    #[arg(long, value_name = "HOST")]
    pub to: Option<String>,
    /// The figure whose level is followed
    #[arg(long, value_enum, default_value_t = Figure::Goodput)]
    pub metric: Figure,
    /// Fewest runs on each side of a change (3 at least)
    #[arg(long, value_name = "N", default_value_t = MIN_SEGMENT_RUNS)]
    pub min_runs: usize,
    /// Print the changes as JSON (schema/changes.schema.json)
    #[arg(long)]
    pub json: bool,
    #[arg(long, value_name = "PATH|URL", help = DB_HELP)]
    pub db: Option<PathBuf>,
}

/// The figures a history can be followed by.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    /// summary.goodput_bps (not rr runs)
    Goodput,
    /// summary.tcp.rtt_us: the senders' smoothed round trip, microseconds
    Rtt,
    /// summary.rr.rtt_p99_us: an rr run's 99th percentile round trip
    RttP99,
    /// summary.rr.tps: an rr run's transactions per second
    Tps,
    /// summary.tcp.retransmits
    Retransmits,
    /// the larger system_percent of the two hosts
    Cpu,
    /// summary.pi
    Pi,
    /// summary.udp.loss_percent
    Loss,
    /// summary.udp.jitter_ms
    Jitter,
}

impl Figure {
    fn metric(self) -> Option<Metric> {
        Some(match self {
            Figure::Goodput => Metric::Goodput,
            Figure::Rtt => return None,
            Figure::RttP99 => Metric::RttP99,
            Figure::Tps => Metric::Tps,
            Figure::Retransmits => Metric::Retransmits,
            Figure::Cpu => Metric::Cpu,
            Figure::Pi => Metric::Pi,
            Figure::Loss => Metric::UdpLoss,
            Figure::Jitter => Metric::UdpJitter,
        })
    }

    /// Its name in JSON, with its unit.
    pub fn key(self) -> &'static str {
        self.metric().map_or("rtt_us", Metric::key)
    }

    /// Whether a rise is an improvement.
    pub fn higher_is_better(self) -> bool {
        self.metric().is_some_and(Metric::higher_is_better)
    }

    /// This figure of one run; None where the run does not know it.
    pub fn of(self, r: &RunResult) -> Option<f64> {
        match self.metric() {
            Some(m) => m.of(r),
            None => r.summary.tcp.as_ref().and_then(|t| t.rtt_us),
        }
        .filter(|v| v.is_finite())
    }
}

/// Which runs make the series, and how changes are searched for.
#[derive(Debug, Clone)]
pub struct Selection {
    pub label: Option<String>,
    /// Client and server host names; None: any.
    pub from: Option<String>,
    pub to: Option<String>,
    pub figure: Figure,
    pub options: ChangeOptions,
}

impl Default for Selection {
    /// Every label and pair, goodput, the default search.
    fn default() -> Selection {
        Selection {
            label: None,
            from: None,
            to: None,
            figure: Figure::Goodput,
            options: ChangeOptions::default(),
        }
    }
}

/// One series (a label and a host pair) and its changes, oldest first.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesChanges {
    pub label: Option<String>,
    pub client_host: String,
    pub server_host: String,
    /// Runs with the figure, and the start of the first and the last.
    pub runs: usize,
    pub first_unix_s: f64,
    pub last_unix_s: f64,
    /// The level the series is at now: the median since the last change, else of every run.
    pub level: f64,
    /// Oldest first: the last is the level the series is at now.
    pub changes: Vec<RunChange>,
}

/// What [`scan`] found.
#[derive(Debug, Clone, Serialize)]
pub struct ChangesReport {
    pub kind: &'static str,
    pub metric: &'static str,
    pub higher_is_better: bool,
    pub alpha: f64,
    pub min_segment_runs: usize,
    pub label: Option<String>,
    pub client_host: Option<String>,
    pub server_host: Option<String>,
    /// Every series with the figure, by label then pair.
    pub series: Vec<SeriesChanges>,
}

type Key = (Option<String>, String, String);

/// The change points of every series `sel` selects in `store`.
pub fn scan(store: &Store, sel: &Selection) -> Result<ChangesReport, StoreError> {
    let filter = RunFilter {
        label: sel.label.clone(),
        ..RunFilter::default()
    };
    let mut by_series: BTreeMap<Key, Vec<SeriesRun>> = BTreeMap::new();
    store.each_run(&filter, |run| {
        let result = run.result()?;
        let Some(value) = sel.figure.of(&result) else {
            return Ok::<(), StoreError>(());
        };
        let name = |h: &Option<String>| h.clone().unwrap_or_else(|| UNKNOWN_HOST.to_string());
        let (client, server) = (name(&run.row.client_host), name(&run.row.server_host));
        let wanted = |want: &Option<String>, host: &str| want.as_deref().is_none_or(|w| w == host);
        if wanted(&sel.from, &client) && wanted(&sel.to, &server) {
            by_series
                .entry((run.row.label.clone(), client, server))
                .or_default()
                .push(SeriesRun {
                    id: run.row.id,
                    started_unix_s: run.row.started_unix_s,
                    value,
                });
        }
        Ok(())
    })?;
    let series = by_series
        .into_iter()
        .map(|((label, client_host, server_host), runs)| {
            let starts = runs.iter().map(|r| r.started_unix_s);
            let changes = run_changes(&runs, sel.options);
            let values: Vec<f64> = runs.iter().map(|r| r.value).collect();
            let level = changes.last().map_or_else(
                || Summary::of(&values).map_or(f64::NAN, |s| s.median),
                |c| c.point.median_after,
            );
            SeriesChanges {
                label,
                client_host,
                server_host,
                runs: runs.len(),
                first_unix_s: starts.clone().fold(f64::INFINITY, f64::min),
                last_unix_s: starts.fold(f64::NEG_INFINITY, f64::max),
                level,
                changes,
            }
        })
        .collect();
    Ok(ChangesReport {
        kind: "changes",
        metric: sel.figure.key(),
        higher_is_better: sel.figure.higher_is_better(),
        alpha: sel.options.alpha,
        min_segment_runs: sel.options.min_segment.max(MIN_SEGMENT_RUNS),
        label: sel.label.clone(),
        client_host: sel.from.clone(),
        server_host: sel.to.clone(),
        series,
    })
}

/// `FROM->TO` (or `FROM→TO`) as two host names.
pub fn parse_pair(s: &str) -> Result<(String, String), String> {
    let split = s.split_once("->").or_else(|| s.split_once('→'));
    match split.map(|(a, b)| (a.trim(), b.trim())) {
        Some((a, b)) if !a.is_empty() && !b.is_empty() => Ok((a.to_string(), b.to_string())),
        _ => Err(format!("--pair '{s}': give FROM->TO, two host names")),
    }
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    if a.min_runs < MIN_SEGMENT_RUNS || a.min_runs > 1_000_000 {
        return exit::usage(format!(
            "--min-runs takes {MIN_SEGMENT_RUNS} or more: fewer runs than that make an outlier, \
             not a level"
        ));
    }
    let (from, to) = match a.pair.as_deref().map(parse_pair).transpose() {
        Ok(Some((f, t))) => (Some(f), Some(t)),
        Ok(None) => (a.from.clone(), a.to.clone()),
        Err(e) => return exit::usage(e),
    };
    let sel = Selection {
        label: a.label.clone(),
        from,
        to,
        figure: a.metric,
        options: ChangeOptions {
            min_segment: a.min_runs,
            alpha: CHANGE_ALPHA,
        },
    };
    let store = open_existing(a.db)?;
    let report = scan(&store, &sel)?;
    if report.series.is_empty() {
        anyhow::bail!(
            "no runs with {}{} in {}",
            report.metric,
            super::changes_out::described(&report),
            store.location()
        );
    }
    if a.json {
        crate::say!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        use std::io::Write as _;
        write!(exit::stdout(), "{}", super::changes_out::text(&report))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_take_an_arrow_either_way() {
        assert_eq!(parse_pair("a->b"), Ok(("a".into(), "b".into())));
        assert_eq!(parse_pair(" h1 → h2 "), Ok(("h1".into(), "h2".into())));
        for bad in ["a", "->b", "a->", "", "a-b"] {
            assert!(parse_pair(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn figures_have_units_and_directions() {
        assert_eq!(Figure::Goodput.key(), "goodput_bps");
        assert_eq!(Figure::Rtt.key(), "rtt_us");
        assert_eq!(Figure::Loss.key(), "loss_percent");
        assert!(Figure::Goodput.higher_is_better() && Figure::Tps.higher_is_better());
        assert!(!Figure::Rtt.higher_is_better() && !Figure::Retransmits.higher_is_better());
    }
}
