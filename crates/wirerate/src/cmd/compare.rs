//! `wirerate compare A B`: is B different from A? Per metric the change in percent, the 95 %
//! confidence interval of the difference, a p-value and a one-line verdict; the headline is
//! goodput. `--fail-if-slower` turns it into a gate for CI pipelines.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use wirerate_core::diagnosis::Diagnosis;
use wirerate_core::facts::differences;
use wirerate_core::stats::{compare_metric, Change, Comparison, Metric};
use wirerate_render::stats::{compare_table, verdict};

use super::results::{open_existing, Operand, Sample, DB_HELP};
use crate::exit;

/// Exit status when `--fail-if-slower` trips.
pub const EXIT_SLOWER: u8 = 3;

#[derive(clap::Args)]
#[command(
    after_help = "A and B each name a set of runs: a label (all runs stored with it), \
a run id, or a saved JSON file (one result, a JSON array of results, results appended one \
after another as `run --json >> FILE` leaves them, or `history --json` output). Prefix with \
label:, id: or file: to say which.\n\nThe p-value comes from Welch's t-test when both sides \
have at least 5 runs and neither is skewed (|skewness| at most 1), otherwise from the \
Mann-Whitney U test (exact when small and without ties). A difference is called significant \
at p < 0.05. Settings and host facts in which A and B differ are listed under their names.\n\nExit status: 0 compared, 1 a side could not be loaded or \
the gate could not be decided, 2 bad usage, 3 --fail-if-slower tripped.\n\n--matrix instead \
shows goodput per (client host, server host) pair, from the host names each run recorded: \
each pair's latest run, and the change of the mean over the last --period against the \
period before, with the same test as A against B (* marks p < 0.05). Periods end at the \
newest run's start, not at the clock."
)]
pub struct Args {
    /// The baseline: a label, a run id or a saved JSON file
    #[arg(value_name = "A", required_unless_present = "matrix")]
    pub a: Option<String>,
    /// The candidate, compared with A
    #[arg(value_name = "B", required_unless_present = "matrix")]
    pub b: Option<String>,
    /// Goodput per (client host, server host) pair from the database: each pair's latest
    /// run and the change against the previous period (instead of A against B)
    #[arg(long, conflicts_with_all = ["a", "b", "fail_if_slower"])]
    pub matrix: bool,
    #[command(flatten)]
    pub matrix_opts: super::matrix::MatrixOpts,
    /// Print the comparison as JSON
    #[arg(long)]
    pub json: bool,
    /// Exit with status 3 when B's goodput is significantly lower than A's by more than PCT
    /// percent (0 trips on any significant slowdown)
    #[arg(long, value_name = "PCT")]
    pub fail_if_slower: Option<f64>,
    #[arg(long, value_name = "PATH|URL", help = DB_HELP)]
    pub db: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(p) = args.fail_if_slower {
        if !(p.is_finite() && (0.0..100.0).contains(&p)) {
            return exit::usage("--fail-if-slower takes a percentage from 0 to below 100");
        }
    }
    args.matrix_opts.only_with_matrix(args.matrix)?;
    let (Some(a), Some(b)) = (&args.a, &args.b) else {
        return matrix(args);
    };
    let a_op = Operand::parse(a)?;
    let b_op = Operand::parse(b)?;
    let store = if a_op.needs_db() || b_op.needs_db() {
        Some(open_existing(args.db)?)
    } else {
        None
    };
    let a = a_op.load(store.as_ref())?;
    let b = b_op.load(store.as_ref())?;
    let rows: Vec<(Metric, Comparison)> = Metric::ALL
        .into_iter()
        .map(|m| (m, compare_metric(m, &m.values(&a.runs), &m.values(&b.runs))))
        .filter(|(_, c)| c.a.is_some() || c.b.is_some())
        .collect();
    let gate = args.fail_if_slower.map(|pct| gate(pct, &rows));
    let report = if args.json {
        let doc = json_report(&a, &b, &rows, args.fail_if_slower, &gate);
        serde_json::to_string_pretty(&doc)? + "\n"
    } else {
        text_report(&a, &b, &rows)
    };
    let mut out = std::io::stdout().lock();
    match out.write_all(report.as_bytes()).and_then(|()| out.flush()) {
        // a reader that stops early must not turn a tripped gate into success
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        other => other?,
    }
    match gate {
        None | Some(Gate::Pass) => Ok(ExitCode::SUCCESS),
        Some(Gate::Slower(msg)) => {
            eprintln!("wirerate: {}", wirerate_core::text::safe(&msg));
            Ok(ExitCode::from(EXIT_SLOWER))
        }
        Some(Gate::Undecided(msg)) => anyhow::bail!("{msg}"),
    }
}

fn matrix(args: Args) -> anyhow::Result<ExitCode> {
    let margs = args.matrix_opts.args()?;
    let store = open_existing(args.db)?;
    let (m, runs) = super::matrix::build(&store, &margs)?;
    let report = if args.json {
        serde_json::to_string_pretty(&super::matrix::json(&m, &margs, runs))? + "\n"
    } else {
        super::matrix::text(&m, &margs, runs)
    };
    let mut out = crate::exit::stdout();
    out.write_all(report.as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// What `--fail-if-slower` decides.
enum Gate {
    Pass,
    Slower(String),
    Undecided(String),
}

/// The row a verdict is about: RPM for rpm runs, goodput, or for rr runs transactions per
/// second.
fn headline(rows: &[(Metric, Comparison)]) -> Option<&(Metric, Comparison)> {
    rows.iter()
        .find(|(m, _)| *m == Metric::Rpm)
        .or_else(|| rows.iter().find(|(m, _)| *m == Metric::Goodput))
        .or_else(|| rows.iter().find(|(m, _)| *m == Metric::Tps))
}

fn gate(pct: f64, rows: &[(Metric, Comparison)]) -> Gate {
    let Some(&(metric, ref c)) = headline(rows) else {
        return Gate::Undecided("cannot decide --fail-if-slower: no goodput on a side".into());
    };
    match (c.change, c.change_percent) {
        (Change::Untestable, _) => Gate::Undecided(format!(
            "cannot decide --fail-if-slower: {}",
            verdict(metric, c)
        )),
        (Change::Lower, Some(ch)) if -ch > pct => Gate::Slower(format!(
            "B is slower than A by more than {pct} %: {}",
            verdict(metric, c)
        )),
        _ => Gate::Pass,
    }
}

fn runs(n: usize) -> String {
    format!("{n} run{}", if n == 1 { "" } else { "s" })
}

/// A setting or fact of the environment that is not the same for A and B, with each side's
/// values ("a, b" when a side mixes several).
fn text_report(a: &Sample, b: &Sample, rows: &[(Metric, Comparison)]) -> String {
    let mut o = format!(
        "A: {} ({})\nB: {} ({})\n",
        a.description,
        runs(a.runs.len()),
        b.description,
        runs(b.runs.len())
    );
    for d in differences(&a.runs, &b.runs) {
        o.push_str(&format!("   {}: A {}, B {}\n", d.what, d.a, d.b));
    }
    for line in why_differences(a, b) {
        o.push_str(&format!("   why: {line}\n"));
    }
    o.push('\n');
    o.push_str(&compare_table(rows));
    o.push('\n');
    for (m, c) in rows {
        let head = headline(rows).map(|h| h.0);
        if Some(*m) != head && matches!(c.change, Change::Higher | Change::Lower) {
            o.push_str(&format!("also: {}\n", verdict(*m, c)));
        }
    }
    match headline(rows) {
        Some((m, c)) => o.push_str(&format!("verdict: {}\n", verdict(*m, c))),
        None => o.push_str("verdict: no goodput to compare\n"),
    }
    o
}

fn json_report(
    a: &Sample,
    b: &Sample,
    rows: &[(Metric, Comparison)],
    fail_if_slower: Option<f64>,
    gate: &Option<Gate>,
) -> serde_json::Value {
    let metric_doc = |m: Metric, c: &Comparison| {
        let mut v = serde_json::to_value(c).unwrap_or_default();
        if let Some(obj) = v.as_object_mut() {
            obj.insert("p_value".into(), c.test.map(|t| t.p_value).into());
            obj.insert("verdict".into(), verdict(m, c).into());
        }
        v
    };
    let metrics: serde_json::Map<String, serde_json::Value> = rows
        .iter()
        .map(|(m, c)| (m.key().to_string(), metric_doc(*m, c)))
        .collect();
    let goodput = headline(rows);
    let headline = goodput.map(|(_, c)| c);
    serde_json::json!({
        "a": { "source": a.description, "runs": a.runs.len() },
        "b": { "source": b.description, "runs": b.runs.len() },
        "change_percent": headline.and_then(|c| c.change_percent),
        "change_ci95_low_percent": headline.and_then(|c| c.change_ci95_low_percent),
        "change_ci95_high_percent": headline.and_then(|c| c.change_ci95_high_percent),
        "p_value": headline.and_then(|c| c.test).map(|t| t.p_value),
        "test": headline.and_then(|c| c.test).map(|t| t.kind),
        "change": headline.map(|c| c.change),
        "verdict": goodput.map_or("no goodput to compare".to_string(), |(m, c)| verdict(*m, c)),
        "fail_if_slower_percent": fail_if_slower,
        "failed": gate.as_ref().map(|g| matches!(g, Gate::Slower(_))),
        "differences": differences(&a.runs, &b.runs)
            .into_iter()
            .map(|d| serde_json::json!({ "what": d.what, "a": d.a, "b": d.b }))
            .collect::<Vec<_>>(),
        "diagnosis_differences": why_differences(a, b),
        "metrics": metrics,
    })
}

/// How the two groups' diagnoses differ ("A: wire-bound (5 of 5 runs); B: …"); empty when
/// they agree or neither has one.
fn why_differences(a: &Sample, b: &Sample) -> Vec<String> {
    fn of(s: &Sample) -> Vec<&Diagnosis> {
        s.runs
            .iter()
            .filter_map(|r| r.summary.diagnosis.as_ref())
            .collect()
    }
    wirerate_core::diagnosis::differences(&of(a), &of(b))
}
