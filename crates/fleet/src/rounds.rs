//! A plan run round after round on its schedule (`[schedule] every`, `plan run --every`):
//! each round is one run of the plan (queued, worked and recorded as `plan run` does once),
//! started at its time plus a random slip. A signal stops it between tests: the tests
//! running end and are recorded, no other starts, and no round begins after it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wirerate_core::units::rfc3339;

use crate::plan::Plan;
use crate::runner::{run_plan, RunnerConfig};
use crate::schedule::Schedule;
use crate::FleetError;

/// Why the rounds ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundsEnd {
    /// The count of rounds was run.
    Count,
    /// The next round would start after the end time.
    Until,
    /// A signal asked the controller to stop.
    Stopped,
}

/// What the rounds did.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundsReport {
    /// Rounds run (a round a signal cut short counts).
    pub rounds: u64,
    /// Rounds whose queue or store could not be reached (said, and the next one tried).
    pub rounds_failed: u64,
    /// Tests this controller ran over all rounds, and how many of those failed.
    pub ran: usize,
    pub failed: usize,
    pub end: RoundsEnd,
}

fn now_unix_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A uniform draw in [0, 1) from the kernel's random source (0.5 if it has none).
fn uniform() -> f64 {
    let mut b = [0u8; 8];
    match wirerate_engine::net::fill_random(&mut b) {
        Ok(()) => (u64::from_le_bytes(b) >> 11) as f64 / (1u64 << 53) as f64,
        Err(_) => 0.5,
    }
}

/// Sleeps until `t` (Unix seconds); false when `stop` was set first.
fn sleep_until(t: f64, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        let left = t - now_unix_s();
        if left <= 0.0 {
            return true;
        }
        std::thread::sleep(Duration::from_secs_f64(left.min(0.2)));
    }
}

/// Runs the plan's rounds on `schedule` from now until its count or end time, or until
/// `stop` is set. `say` hears each round's start and end and every test's line.
pub fn run_rounds(
    plan: &Plan,
    cfg: &RunnerConfig,
    schedule: &Schedule,
    stop: &'static AtomicBool,
    say: &(dyn Fn(String) + Sync),
) -> Result<RoundsReport, FleetError> {
    let finished = AtomicBool::new(false);
    let said = AtomicBool::new(false);
    let tell = || {
        if !said.swap(true, Ordering::SeqCst) {
            say(format!(
                "plan {}: stopping: no test starts now; those running end and are recorded",
                plan.name
            ));
        }
    };
    std::thread::scope(|s| {
        // the signal handler only sets a flag: this says what it means, once, while the
        // tests running end
        s.spawn(|| {
            while !finished.load(Ordering::SeqCst) {
                if stop.load(Ordering::SeqCst) {
                    tell();
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let r = rounds(plan, cfg, schedule, stop, say);
        if stop.load(Ordering::SeqCst) {
            tell();
        }
        finished.store(true, Ordering::SeqCst);
        r
    })
}

fn rounds(
    plan: &Plan,
    cfg: &RunnerConfig,
    schedule: &Schedule,
    stop: &'static AtomicBool,
    say: &(dyn Fn(String) + Sync),
) -> Result<RoundsReport, FleetError> {
    let cfg = RunnerConfig {
        stop: Some(stop),
        ..cfg.clone()
    };
    let t0 = now_unix_s();
    let mut r = RoundsReport {
        rounds: 0,
        rounds_failed: 0,
        ran: 0,
        failed: 0,
        end: RoundsEnd::Count,
    };
    let mut done: Option<u64> = None;
    loop {
        if !schedule.more(r.rounds) {
            r.end = RoundsEnd::Count;
            return Ok(r);
        }
        let Some(k) = schedule.next_round(t0, done, now_unix_s()) else {
            r.end = RoundsEnd::Until;
            return Ok(r);
        };
        let skipped = k - done.map_or(0, |d| d + 1);
        let start = schedule.start_of(t0, k, uniform()).max(now_unix_s());
        say(format!(
            "plan {}: round {} at {}{}",
            plan.name,
            r.rounds + 1,
            rfc3339(start),
            if skipped > 0 {
                format!(" ({skipped} round(s) skipped: the one before ran past their time)")
            } else {
                String::new()
            }
        ));
        if !sleep_until(start, stop) {
            r.end = RoundsEnd::Stopped;
            return Ok(r);
        }
        r.rounds += 1;
        done = Some(k);
        match run_plan(plan, &cfg, say) {
            Ok(rep) => {
                r.ran += rep.ran;
                r.failed += rep.failed;
                let p = &rep.progress;
                say(format!(
                    "plan {}: round {} (run {}) ended: {} done, {} failed, {} left queued",
                    plan.name, r.rounds, rep.epoch, p.done, p.failed, p.queued
                ));
            }
            Err(e) => {
                // the database may be back for the next round: a monitor keeps its times
                r.rounds_failed += 1;
                say(format!(
                    "plan {}: round {} failed: {e}",
                    plan.name, r.rounds
                ));
            }
        }
        if stop.load(Ordering::SeqCst) {
            r.end = RoundsEnd::Stopped;
            return Ok(r);
        }
    }
}
