//! Which host sends and which receives each flow, and the figures the rules read from
//! each side, with "not seen" kept apart from zero.

use crate::evidence::{Counters, HostEvidence};
use crate::result::{CpuSide, HostEnv, StreamResult, StreamSide};
use crate::spec::Flow;
use crate::RunResult;

/// One of the two hosts of a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Host {
    Client,
    Server,
}

impl Host {
    pub(super) fn name(self) -> &'static str {
        match self {
            Host::Client => "client",
            Host::Server => "server",
        }
    }

    /// The host that sends `flow`.
    pub(super) fn sending(flow: Flow) -> Host {
        if flow.sender_is_client() {
            Host::Client
        } else {
            Host::Server
        }
    }

    /// The host that receives `flow`.
    pub(super) fn receiving(flow: Flow) -> Host {
        match Host::sending(flow) {
            Host::Client => Host::Server,
            Host::Server => Host::Client,
        }
    }

    pub(super) fn cpu(self, r: &RunResult) -> Option<&CpuSide> {
        match self {
            Host::Client => r.summary.cpu.local.as_ref(),
            Host::Server => r.summary.cpu.remote.as_ref(),
        }
    }

    pub(super) fn evidence(self, r: &RunResult) -> Option<&HostEvidence> {
        match self {
            Host::Client => r.evidence.client.as_ref(),
            Host::Server => r.evidence.server.as_ref(),
        }
    }

    pub(super) fn env(self, r: &RunResult) -> &HostEnv {
        match self {
            Host::Client => &r.env.client,
            Host::Server => &r.env.server,
        }
    }
}

/// The flows the test ran.
pub(super) fn flows(r: &RunResult) -> &'static [Flow] {
    r.spec.direction.flows()
}

/// The streams of one flow.
pub(super) fn streams_of(r: &RunResult, flow: Flow) -> impl Iterator<Item = &StreamResult> {
    r.streams.iter().filter(move |s| s.flow == flow)
}

/// The hosts that send (or receive) some flow, each once; one when client and server
/// share a kernel, so host-wide counters are never added twice.
pub(super) fn hosts(r: &RunResult, sending: bool) -> Vec<Host> {
    let mut out: Vec<Host> = Vec::new();
    for &f in flows(r) {
        let h = if sending {
            Host::sending(f)
        } else {
            Host::receiving(f)
        };
        let shared_and_taken = same_host(r) && !out.is_empty();
        if !out.contains(&h) && !shared_and_taken {
            out.push(h);
        }
    }
    out
}

/// Client and server ran on one kernel and network namespace (loopback, an embedded
/// server): their host-wide counters and cores are the same ones.
pub(super) fn same_host(r: &RunResult) -> bool {
    if r.env.embedded_server {
        return true;
    }
    let key = |e: &Option<HostEvidence>| e.as_ref().and_then(|h| h.host_key.clone());
    matches!((key(&r.evidence.client), key(&r.evidence.server)), (Some(a), Some(b)) if a == b)
}

/// `part` as a percentage of `whole`; None when either is not a usable number.
pub(super) fn percent(part: f64, whole: f64) -> Option<f64> {
    let p = part / whole * 100.0;
    (part.is_finite() && whole.is_finite() && whole > 0.0 && p.is_finite()).then_some(p.max(0.0))
}

/// How much of a core one stream thread, or one data worker of many streams, used over its
/// window.
#[derive(Debug, Clone, Copy)]
pub(super) struct ThreadLoad {
    /// Percent of one core, 0–100.
    pub percent: f64,
    /// "getrusage" (user + system time) or "schedstat" (time on a CPU).
    pub source: &'static str,
    /// A data worker's load: the streams it served, and the workers on its side.
    pub worker: Option<WorkerShare>,
}

/// What a data worker served: `streams` of the `workers` on its side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct WorkerShare {
    pub streams: usize,
    pub workers: usize,
}

impl ThreadLoad {
    /// "thread" or "worker": what ran the streams.
    pub fn noun(&self) -> &'static str {
        if self.worker.is_some() {
            "worker"
        } else {
            "thread"
        }
    }
}

/// The load of each data worker among `sides` (the ends of one flow on one host): each
/// stream holds its even share of its worker's time, so a worker's time is their sum, over
/// the longest window of its streams. Ends without a worker are left out.
pub(super) fn worker_loads<'a>(sides: impl Iterator<Item = &'a StreamSide>) -> Vec<ThreadLoad> {
    let mut by_worker: std::collections::BTreeMap<u32, (f64, f64, usize)> = Default::default();
    for s in sides {
        if let Some(w) = s.worker {
            let e = by_worker.entry(w).or_default();
            e.0 += s.user_s + s.sys_s;
            e.1 = e.1.max(s.seconds);
            e.2 += 1;
        }
    }
    let workers = by_worker.len();
    by_worker
        .into_values()
        .filter_map(|(cpu_s, seconds, streams)| {
            percent(cpu_s, seconds).map(|p| ThreadLoad {
                percent: p.min(100.0),
                source: "getrusage",
                worker: Some(WorkerShare { streams, workers }),
            })
        })
        .collect()
}

/// The larger of the thread's user + system time and its scheduler run time, over the
/// stream's counted window, capped at one core.
pub(super) fn thread_load(s: &StreamSide) -> Option<ThreadLoad> {
    // a peer that does not measure its stream threads (iperf3) reports zeros: unknown, not
    // idle (a thread that moved data always used some CPU)
    if s.run_s.is_none() && s.user_s == 0.0 && s.sys_s == 0.0 {
        return None;
    }
    let cpu = percent(s.user_s + s.sys_s, s.seconds).map(|p| ThreadLoad {
        percent: p,
        source: "getrusage",
        worker: None,
    });
    let run = s
        .run_s
        .and_then(|x| percent(x, s.seconds))
        .map(|p| ThreadLoad {
            percent: p,
            source: "schedstat",
            worker: None,
        });
    let best = match (cpu, run) {
        (Some(a), Some(b)) if b.percent > a.percent => Some(b),
        (Some(a), _) => Some(a),
        (None, b) => b,
    };
    best.map(|t| ThreadLoad {
        percent: t.percent.min(100.0),
        ..t
    })
}

/// A kernel counter by name: None when the table or the name could not be read.
pub(super) fn counter(table: &Option<Counters>, name: &str) -> Option<u64> {
    table.as_ref()?.get(name).copied().flatten()
}

/// The sum of the counters that could be read; None when none could.
pub(super) fn sum_seen(values: impl IntoIterator<Item = Option<u64>>) -> Option<u64> {
    values.into_iter().fold(None, |acc, v| match (acc, v) {
        (a, None) => a,
        (None, Some(v)) => Some(v),
        (Some(a), Some(v)) => Some(a.saturating_add(v)),
    })
}

/// The window host-wide figures cover: the evidence's own, else the test's.
pub(super) fn window_s(r: &RunResult, e: &HostEvidence) -> f64 {
    if e.window_s.is_finite() && e.window_s > 0.0 {
        e.window_s
    } else {
        r.summary.seconds
    }
}
