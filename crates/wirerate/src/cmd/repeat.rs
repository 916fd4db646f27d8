//! `wirerate run --repeat N` and `--until-ci PCT`: the same test again on fresh connections,
//! every run stored under one group, then the statistics of the set.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use wirerate_core::stats::until_ci_reached;
use wirerate_core::units::format_bps;
use wirerate_core::{RunResult, TestSpec};
use wirerate_render::export::exporter;
use wirerate_store::{new_group_id, Store};

use super::results::save;
use super::run::{execute, Format, RepeatPlan, Silent, Target};

pub fn run(
    t: &Target,
    spec: &TestSpec,
    plan: RepeatPlan,
    format: Format,
    mut store: Option<&mut Store>,
    label: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let group = new_group_id();
    let max = match plan {
        RepeatPlan::Fixed(n) => n,
        RepeatPlan::UntilCi { max_runs, .. } => max_runs,
    };
    let text = format == Format::Text;
    let mut results: Vec<RunResult> = Vec::new();
    let mut failures = 0;
    let mut unstored = 0;
    for i in 1..=max {
        // Ctrl-C ends the set: the run it cut short is kept (marked), the rest not started
        if crate::interrupt::interrupted() {
            break;
        }
        // the server frees its slot a moment after the last run's reports
        let (r, errors) = match execute(t, spec, &mut Silent, Duration::from_secs(2)) {
            Err(_) if crate::interrupt::interrupted() && !results.is_empty() => break,
            other => other?,
        };
        if !errors.is_empty() {
            failures += 1;
            eprintln!(
                "wirerate: run {i}: {}",
                wirerate_core::text::safe(&errors.join("; "))
            );
        }
        if text {
            let cpu = wirerate_core::metrics::max_opt(
                r.summary.cpu.local.as_ref().and_then(|c| c.system_percent),
                r.summary.cpu.remote.as_ref().and_then(|c| c.system_percent),
            );
            crate::say!(
                "run {i:>3}: goodput {:>15}, CPU {}, PI {}, why: {}{}",
                format_bps(r.summary.goodput_bps),
                cpu.map_or_else(|| "n/a".into(), |c| format!("{c:.1} %")),
                r.summary
                    .pi
                    .map_or_else(|| "n/a".into(), |p| format!("{p:.2}")),
                r.summary
                    .diagnosis
                    .as_ref()
                    .map_or("n/a", |d| d.bottleneck.words()),
                if r.interrupted { " (interrupted)" } else { "" },
            );
        }
        if let Some(s) = store.as_deref_mut() {
            if !save(s, &r, label, Some(&group)) {
                unstored += 1;
            }
        }
        results.push(r);
        if let RepeatPlan::UntilCi { percent, .. } = plan {
            let goodputs: Vec<f64> = results.iter().map(|r| r.summary.goodput_bps).collect();
            if until_ci_reached(&goodputs, percent) {
                break;
            }
        }
    }
    let mut out = crate::exit::stdout();
    // the statistics (text), one array of results that `compare` reads (json), or each
    // run's ttcp lines
    write!(out, "{}", exporter(format.into()).repeat(&results)?)?;
    if text {
        if let Some(why) = verdicts(&results) {
            writeln!(out, "why: {why}")?;
        }
        if let RepeatPlan::UntilCi { percent, max_runs } = plan {
            let goodputs: Vec<f64> = results.iter().map(|r| r.summary.goodput_bps).collect();
            if !until_ci_reached(&goodputs, percent) {
                writeln!(
                    out,
                    "warning: after {max_runs} runs the 95 % confidence interval of goodput is still wider than ±{percent} % of the mean"
                )?;
            }
        }
        match store.as_deref() {
            Some(s) if unstored == 0 => writeln!(
                out,
                "stored as group {group}{} in {}",
                label.map_or_else(String::new, |l| format!(", label '{l}'")),
                wirerate_core::text::safe(s.location())
            )?,
            _ => {}
        }
    }
    out.flush()?;
    if unstored > 0 {
        eprintln!("wirerate: {unstored} of {} runs not stored", results.len());
    }
    if crate::interrupt::interrupted() {
        eprintln!(
            "wirerate: interrupted after {}",
            wirerate_core::text::count(results.len() as u64, "run")
        );
        return Ok(ExitCode::from(crate::interrupt::EXIT_INTERRUPTED));
    }
    Ok(if failures == 0 && unstored == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// How often each bottleneck was the verdict over the runs, most frequent first:
/// "sender CPU in 9 of 10 runs, the wire in 1".
fn verdicts(results: &[RunResult]) -> Option<String> {
    let mut counts: Vec<(&'static str, usize)> = Vec::new();
    for d in results.iter().filter_map(|r| r.summary.diagnosis.as_ref()) {
        let w = d.bottleneck.words();
        match counts.iter_mut().find(|(x, _)| *x == w) {
            Some(c) => c.1 += 1,
            None => counts.push((w, 1)),
        }
    }
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    let (first, rest) = counts.split_first()?;
    let mut s = format!("{} in {} of {} runs", first.0, first.1, results.len());
    for (w, n) in rest {
        s.push_str(&format!(", {w} in {n}"));
    }
    Some(s)
}
