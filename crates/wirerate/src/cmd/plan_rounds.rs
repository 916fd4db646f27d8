//! `plan run` on a repeating schedule: the flags that set it (`--every`, `--slip`,
//! `--count`, `--until`, over the plan's `[schedule] every` and `slip`), and the run that
//! stops cleanly on SIGINT or SIGTERM (`wirerate_fleet::rounds`).

use std::process::ExitCode;

use wirerate_fleet::plan::Rounds;
use wirerate_fleet::rounds::{run_rounds, RoundsEnd};
use wirerate_fleet::runner::RunnerConfig;
use wirerate_fleet::schedule::{parse_duration, parse_instant, parse_repeat, Schedule};
use wirerate_fleet::Plan;

use crate::exit;

#[derive(clap::Args)]
pub struct RoundArgs {
    /// Run the plan round after round: an ISO 8601 repeating interval, R/PT4H (every 4
    /// hours until stopped), R6/PT4H (six rounds) or PT4H [default: the plan's [schedule]
    /// every; none: one run]
    #[arg(long, value_name = "R/DURATION")]
    every: Option<String>,
    /// Each round starts at a uniformly random moment in its first DURATION (ISO 8601:
    /// PT10M), shorter than the interval [default: the plan's slip, else none]
    #[arg(long, value_name = "DURATION")]
    slip: Option<String>,
    /// Stop after this many rounds
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// Start no round after this time (2026-11-26T18:00:00Z) or this long from now
    /// (ISO 8601 duration: PT8H)
    #[arg(long, value_name = "TIME|DURATION")]
    until: Option<String>,
}

fn now_unix_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl RoundArgs {
    /// The schedule the flags and the plan ask for; None: the plan runs once.
    pub fn schedule(&self, plan: &Plan) -> anyhow::Result<Option<Schedule>> {
        let bad = |flag: &str, e: wirerate_fleet::FleetError| {
            let e = e.to_string();
            exit::usage::<Option<Schedule>>(format!("{flag}: {}", e.trim_start_matches("plan: ")))
        };
        let (count, every_s) = match (&self.every, &plan.rounds) {
            (Some(e), _) => match parse_repeat(e) {
                Ok(r) => r,
                Err(e) => return bad("--every", e),
            },
            (None, Some(r)) => (r.count, r.every_s),
            (None, None) => {
                if self.slip.is_some() || self.count.is_some() || self.until.is_some() {
                    return exit::usage(
                        "--slip, --count and --until go with a repeating schedule: --every \
                         R/PT4H, or every = \"R/PT4H\" in the plan's [schedule]",
                    );
                }
                return Ok(None);
            }
        };
        if self.every.is_some() && plan.runs > 1 {
            return exit::usage(
                "--every runs the plan in rounds; this plan queues several runs at once \
                 (runs, every_min): one or the other",
            );
        }
        let slip_s = match (&self.slip, &plan.rounds) {
            (Some(s), _) => match parse_duration(s) {
                Ok(v) => v,
                Err(e) => return bad("--slip", e),
            },
            (None, Some(r)) => r.slip_s,
            (None, None) => 0.0,
        };
        let until = match self.until.as_deref() {
            None => None,
            Some(u) if u.trim_start().starts_with(['P', 'p']) => match parse_duration(u) {
                Ok(d) => Some(now_unix_s() + d),
                Err(e) => return bad("--until", e),
            },
            Some(u) => match parse_instant(u) {
                Ok(t) if t <= now_unix_s() => {
                    return exit::usage(format!("--until {u}: that time has passed"))
                }
                Ok(t) => Some(t),
                Err(e) => return bad("--until", e),
            },
        };
        let count = match (count, self.count) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match Schedule::new(every_s, slip_s, count, until) {
            Ok(s) => Ok(Some(s)),
            Err(e) => bad("--every/--slip/--count", e),
        }
    }
}

/// A plan's rounds in words, for `plan check`.
pub fn describe(r: &Rounds) -> String {
    format!(
        "a round every {} s{}{}",
        r.every_s,
        if r.slip_s > 0.0 {
            format!(", each within {} s of its time", r.slip_s)
        } else {
            String::new()
        },
        r.count
            .map_or(", until stopped".into(), |c| format!(", {c} rounds"))
    )
}

/// Runs the rounds; SIGINT and SIGTERM stop them between tests. Exit 0 when every test and
/// round passed, 1 otherwise.
pub fn run(
    plan: &Plan,
    cfg: &RunnerConfig,
    schedule: &Schedule,
    say: &(dyn Fn(String) + Sync),
) -> anyhow::Result<ExitCode> {
    let stop = crate::interrupt::install_shutdown();
    let r = run_rounds(plan, cfg, schedule, stop, say).map_err(super::plan::fleet_err)?;
    let why = match r.end {
        RoundsEnd::Count => "its count of rounds",
        RoundsEnd::Until => "its end time",
        RoundsEnd::Stopped => "a signal",
    };
    println!(
        "plan {}: {} round(s) until {why}{}; {} test(s) run here, {} failed; see: wirerate \
         history --label plan:{}",
        plan.name,
        r.rounds,
        if r.rounds_failed > 0 {
            format!(" ({} could not run)", r.rounds_failed)
        } else {
            String::new()
        },
        r.ran,
        r.failed,
        plan.name
    );
    Ok(if r.failed == 0 && r.rounds_failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
