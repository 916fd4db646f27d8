//! Works a plan's queue: a few worker threads, each with its own database connection, claim
//! due tests whose hosts are free, ask the FROM agent to run them towards TO, store the
//! result, and record the outcome. Idle workers sleep on `LISTEN` until another test ends
//! (or a lease may have expired); they leave when the plan run has nothing queued or
//! running.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use postgres::fallible_iterator::FallibleIterator;
use postgres::Client;
use wirerate_proto::agent::AgentOutcome;
use wirerate_store::Store;

use crate::plan::Plan;
use crate::queue::{self, Claim, Finish, Progress};
use crate::FleetError;

/// How a controller works.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// PostgreSQL URL of the queue and the results.
    pub db_url: String,
    /// Tests this controller runs at once (each needs two free hosts).
    pub workers: usize,
    /// This controller's name in `claimed_by` (workers add `/N`).
    pub me: String,
    /// How long an agent may stay silent.
    pub idle: Duration,
    /// The longest an idle worker sleeps before looking again (expired leases wake no one).
    pub poll: Duration,
    /// How long a claim lasts before another controller may take the test over; None:
    /// [`Plan::lease_s`].
    pub lease_s: Option<f64>,
    /// How each agent (by host name) is reached: TLS and a login (the plan's `[auth]`);
    /// plain where a host has none.
    pub auth: std::collections::BTreeMap<String, wirerate_server::agent::CallerAuth>,
    /// Once set (a signal), workers claim no more tests: the running ones end and are
    /// recorded, the rest stay queued for the next `plan run`.
    pub stop: Option<&'static std::sync::atomic::AtomicBool>,
}

/// What a controller did.
#[derive(Debug, Clone, Default)]
pub struct RunReport {
    pub epoch: i32,
    /// This controller queued the run (false: it joined one already queued).
    pub queued_it: bool,
    /// Tests this controller ran, and how many of those failed.
    pub ran: usize,
    pub failed: usize,
    /// The plan run as the queue says at the end.
    pub progress: Progress,
}

/// The default controller name: host name and process id.
pub fn controller_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "host".into());
    format!("{host}:{}", std::process::id())
}

fn connect(url: &str) -> Result<Client, FleetError> {
    wirerate_store::pg::connect(url).map_err(|e| FleetError::Queue(wirerate_engine::chain(&e)))
}

fn now_unix_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Queues (or joins) the plan's run and works it until nothing is left to run. `say`
/// hears one line per test started and ended.
pub fn run_plan(
    plan: &Plan,
    cfg: &RunnerConfig,
    say: &(dyn Fn(String) + Sync),
) -> Result<RunReport, FleetError> {
    let mut c = connect(&cfg.db_url)?;
    queue::ensure_schema(&mut c)?;
    // the results layout is made (or checked) once, before the workers store into it
    Store::open_url(&cfg.db_url).map_err(|e| FleetError::Store(wirerate_engine::chain(&e)))?;
    let (epoch, queued_it) = queue::enqueue(&mut c, plan, now_unix_s())?;
    say(format!(
        "plan {}: {} run {epoch} ({} test(s), {} worker(s) as {})",
        plan.name,
        if queued_it { "queued" } else { "joined" },
        plan.pairs.len() * (plan.repeat * plan.runs) as usize,
        cfg.workers.max(1),
        cfg.me
    ));
    let results: Vec<Result<(usize, usize), FleetError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.workers.max(1))
            .map(|i| {
                let me = format!("{}/{}", cfg.me, i + 1);
                s.spawn(move || worker(plan, cfg, epoch, &me, say))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(FleetError::Queue("a worker panicked".into())))
            })
            .collect()
    });
    let mut report = RunReport {
        epoch,
        queued_it,
        ..Default::default()
    };
    for r in results {
        let (ran, failed) = r?;
        report.ran += ran;
        report.failed += failed;
    }
    report.progress = queue::progress(&mut c, &plan.name, epoch)?;
    Ok(report)
}

fn worker(
    plan: &Plan,
    cfg: &RunnerConfig,
    epoch: i32,
    me: &str,
    say: &(dyn Fn(String) + Sync),
) -> Result<(usize, usize), FleetError> {
    let mut c = connect(&cfg.db_url)?;
    c.batch_execute(&format!("LISTEN {}", queue::CHANNEL))
        .map_err(|e| FleetError::Queue(e.to_string()))?;
    let mut store =
        Store::open_url(&cfg.db_url).map_err(|e| FleetError::Store(wirerate_engine::chain(&e)))?;
    // the claims of running tests are renewed on a connection of their own
    let mut renewer = Some(connect(&cfg.db_url)?);
    let (mut ran, mut failed) = (0, 0);
    let lease = cfg.lease_s.unwrap_or_else(|| plan.lease_s());
    let stopped = || {
        cfg.stop
            .is_some_and(|s| s.load(std::sync::atomic::Ordering::SeqCst))
    };
    loop {
        if stopped() {
            return Ok((ran, failed));
        }
        if let Some(claim) = queue::claim(&mut c, &plan.name, epoch, me, lease)? {
            say(format!(
                "{} -> {} (run {}, #{}): started by {me}",
                claim.src,
                claim.dst,
                claim.run + 1,
                claim.rep + 1
            ));
            let how = std::thread::scope(|s| {
                let (stop, stopped) = std::sync::mpsc::channel::<()>();
                let mut rc = renewer.take();
                let id = claim.id;
                let h = s.spawn(move || {
                    if let Some(c) = rc.as_mut() {
                        renew_until(c, id, me, lease, &stopped);
                    }
                    rc
                });
                let how = run_one(plan, &claim, &mut store, cfg);
                drop(stop);
                renewer = h.join().ok().flatten();
                how
            });
            if renewer.is_none() {
                renewer = connect(&cfg.db_url).ok();
            }
            let line = match &how {
                Finish::Done { goodput_bps, .. } => {
                    format!("done, {}", wirerate_core::units::format_bps(*goodput_bps))
                }
                Finish::Failed(reason) => format!("FAILED: {reason}"),
                Finish::Busy { retry_s, reason } => {
                    format!("{reason}; queued again in {retry_s:.0} s")
                }
            };
            ran += usize::from(!matches!(how, Finish::Busy { .. }));
            failed += usize::from(matches!(how, Finish::Failed(_)));
            let kept = queue::finish(&mut c, &plan.name, &claim, me, &how)?;
            say(format!(
                "{} -> {} (run {}, #{}): {line}{}",
                claim.src,
                claim.dst,
                claim.run + 1,
                claim.rep + 1,
                if kept {
                    ""
                } else {
                    " (its lease had expired and another controller took it over)"
                }
            ));
            continue;
        }
        let p = queue::progress(&mut c, &plan.name, epoch)?;
        if p.finished() {
            return Ok((ran, failed));
        }
        let wait = p
            .next_due_s
            .filter(|s| s.is_finite() && *s > 0.0)
            .map_or(cfg.poll, |s| Duration::from_secs_f64(s).min(cfg.poll))
            .max(Duration::from_millis(10));
        let mut n = c.notifications();
        // one wake-up is enough; the rest are drained so they do not pile up
        let woke = matches!(n.timeout_iter(wait).next(), Ok(Some(_)));
        if woke {
            while let Ok(Some(_)) = n.iter().next() {}
        }
    }
}

/// Renews a running test's claim every third of its lease until `stopped` says the test
/// ended, so a test that runs long is never taken over while this controller lives, and
/// a dead controller's claim expires after one lease whatever the test's length.
fn renew_until(
    c: &mut Client,
    id: i64,
    me: &str,
    lease_s: f64,
    stopped: &std::sync::mpsc::Receiver<()>,
) {
    let every = Duration::from_secs_f64(lease_s / 3.0);
    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
        // a failed renewal is retried at the next beat; the lease covers two of them
        if let Ok(false) = queue::renew(c, id, me, lease_s) {
            return;
        }
    }
}

/// Runs one claimed test through its FROM agent and stores its result.
fn run_one(plan: &Plan, claim: &Claim, store: &mut Store, cfg: &RunnerConfig) -> Finish {
    let agent = match resolve(&claim.src_addr) {
        Ok(a) => a,
        Err(e) => return Finish::Failed(format!("agent {} ({}): {e}", claim.src, claim.src_addr)),
    };
    let out = wirerate_server::agent::request(
        agent,
        &claim.dst_addr,
        &plan.spec,
        cfg.idle,
        Duration::from_secs(5),
        cfg.auth.get(&claim.src).unwrap_or(&Default::default()),
    );
    match out {
        Ok(AgentOutcome::Done(result)) => {
            let label = format!("plan:{}", plan.name);
            let group = format!("plan:{}:{}->{}", plan.name, claim.src, claim.dst);
            // the test's own key: run again after its controller died, it is stored once
            let key = format!(
                "plan {} run {} rep {} {}->{} test {}",
                plan.name, claim.run, claim.rep, claim.src, claim.dst, claim.id
            );
            match store.store_run_keyed(&result, Some(&label), Some(&group), Some(&key)) {
                Ok(stored) => Finish::Done {
                    result_id: stored.id,
                    goodput_bps: result.summary.goodput_bps,
                },
                Err(e) => Finish::Failed(format!(
                    "the result could not be stored: {}",
                    wirerate_engine::chain(&e)
                )),
            }
        }
        Ok(AgentOutcome::Refused(reason)) => {
            Finish::Failed(format!("agent {} refused: {reason}", claim.src))
        }
        Ok(AgentOutcome::Failed(reason)) => {
            Finish::Failed(format!("agent {}: {reason}", claim.src))
        }
        Ok(AgentOutcome::Busy(retry_s)) => Finish::Busy {
            retry_s: retry_s.clamp(1.0, 60.0),
            reason: format!("agent {} or {} is busy", claim.src, claim.dst),
        },
        Err(e) => Finish::Failed(format!(
            "agent {} ({}): {}",
            claim.src,
            claim.src_addr,
            e.full()
        )),
    }
}

fn resolve(hp: &str) -> Result<SocketAddr, ResolveError> {
    hp.to_socket_addrs()
        .map_err(ResolveError::Lookup)?
        .next()
        .ok_or(ResolveError::NoAddress)
}

/// Why an agent's `HOST:PORT` gave no address.
#[derive(Debug, thiserror::Error)]
enum ResolveError {
    #[error("cannot resolve: {0}")]
    Lookup(#[source] std::io::Error),
    #[error("no address")]
    NoAddress,
}
