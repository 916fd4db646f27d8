//! Where each end of a stream spent its window: on a CPU, runnable but waiting for one (the
//! scheduler's run queue), or asleep inside its socket calls (a sender on its full send
//! buffer, a receiver waiting for data). From these, the rule that names two ends taking
//! turns on one host: each sleeps while the other runs, neither uses a core, and neither
//! waits for a CPU.

use super::rules::{
    item, ramp, Analysis, Fig, Finding, ONE_CORE_FULL, ONE_CORE_SHARE_PERCENT,
    STARVED_WAIT_PERCENT, SUPPORT_SCORE, SYMPTOM_SCORE, TURN_ASLEEP_FULL, TURN_ASLEEP_PERCENT,
    TURN_HOST_BUSY_PERCENT, TURN_RUN_PERCENT,
};
use super::text::{micros, pct};
use super::view::{self, percent, Host};
use super::{Bottleneck, EvidenceItem};
use crate::result::{StreamResult, StreamSide};
use crate::spec::Protocol;
use crate::RunResult;

/// One end's window split three ways, each in percent of the window, and its sleeps.
#[derive(Debug, Clone, Copy)]
pub(super) struct EndWaits {
    pub run: f64,
    pub queue: f64,
    pub asleep: f64,
    /// Sleeps per second, where the kernel counted them.
    pub sleeps_per_s: Option<f64>,
    /// The mean length of one sleep, microseconds.
    pub mean_sleep_us: Option<f64>,
    /// The one CPU the end was allowed to run on.
    pub cpu: Option<u32>,
}

/// The split of one end with a thread of its own; None for a shared data worker or where
/// the scheduler's figures are missing. Asleep is what the window leaves after run and
/// run-queue time: a stream thread sleeps nowhere but in its socket calls.
pub(super) fn end_waits(s: &StreamSide) -> Option<EndWaits> {
    if s.worker.is_some() {
        return None;
    }
    let (run_s, wait_s) = (s.run_s?, s.wait_s?);
    let run = percent(run_s, s.seconds)?.min(100.0);
    let queue = percent(wait_s, s.seconds)?.min(100.0 - run);
    let asleep_s = (s.seconds - run_s - wait_s).max(0.0);
    let asleep = (100.0 - run - queue).max(0.0);
    let sleeps = s.sleeps.filter(|&n| n > 0);
    Some(EndWaits {
        run,
        queue,
        asleep,
        sleeps_per_s: sleeps.map(|n| n as f64 / s.seconds),
        mean_sleep_us: sleeps.map(|n| asleep_s / n as f64 * 1e6),
        cpu: s.pinned_cpu,
    })
}

/// Both ends of one stream, and the hosts they ran on.
struct Pair<'a> {
    stream: &'a StreamResult,
    tx: EndWaits,
    rx: EndWaits,
    tx_host: Host,
    rx_host: Host,
}

fn pairs(r: &RunResult) -> impl Iterator<Item = Pair<'_>> {
    view::flows(r).iter().flat_map(move |&flow| {
        view::streams_of(r, flow).filter_map(move |s| {
            Some(Pair {
                stream: s,
                tx: end_waits(&s.sender)?,
                rx: end_waits(&s.receiver)?,
                tx_host: Host::sending(flow),
                rx_host: Host::receiving(flow),
            })
        })
    })
}

/// What one end slept on, in words.
fn slept_on(sending: bool) -> &'static str {
    if sending {
        "slept on its full send buffer"
    } else {
        "slept waiting for data"
    }
}

/// "client: sending thread ran 62 % of a core, waited for a CPU 3 %, slept on its full
/// send buffer 35 % (2900 times a second, 120 µs each)".
fn split_text(host: Host, sending: bool, w: &EndWaits) -> String {
    let turns = match (w.sleeps_per_s, w.mean_sleep_us) {
        (Some(n), Some(us)) => format!(" ({n:.0} times a second, {} each)", micros(us)),
        _ => String::new(),
    };
    format!(
        "{}: {} thread ran {} of a core, waited for a CPU {}, {} {}{turns}",
        host.name(),
        if sending { "sending" } else { "receiving" },
        pct(w.run),
        pct(w.queue),
        slept_on(sending),
        pct(w.asleep)
    )
}

/// The longest any end with a thread of its own waited for a CPU, percent of its window.
pub(super) fn longest_queue(r: &RunResult) -> f64 {
    pairs(r)
        .map(|p| p.tx.queue.max(p.rx.queue))
        .fold(0.0, f64::max)
}

/// The run-queue waits of the stream whose ends waited longest for a CPU: what other work
/// on a busy host took from them.
pub(super) fn queue_items(r: &RunResult) -> Vec<EvidenceItem> {
    let Some(p) =
        pairs(r).max_by(|a, b| (a.tx.queue + a.rx.queue).total_cmp(&(b.tx.queue + b.rx.queue)))
    else {
        return Vec::new();
    };
    [(true, p.tx_host, p.tx), (false, p.rx_host, p.rx)]
        .into_iter()
        .map(|(sending, h, w)| {
            let role = if sending { "sending" } else { "receiving" };
            item(
                Bottleneck::HostCpu,
                h.name(),
                &format!("{role} thread waiting for a CPU"),
                Fig {
                    value: w.queue,
                    unit: "percent",
                    threshold: None,
                },
                "schedstat",
                split_text(h, sending, &w),
            )
        })
        .collect()
}

/// The two ends take turns on one host: TCP streams on one host, each end under
/// [`TURN_RUN_PERCENT`] of a core, waiting for a CPU less than [`STARVED_WAIT_PERCENT`]
/// and less than it slept, both asleep at least [`TURN_ASLEEP_PERCENT`] of the window, and
/// the host busy at least [`TURN_HOST_BUSY_PERCENT`] over its cores (it was not idle).
pub(super) fn turn_taking(r: &RunResult) -> Option<Finding> {
    if r.spec.protocol != Protocol::Tcp
        || !r.spec.test.is_stream()
        || r.spec.rate_bps.is_some()
        || !view::same_host(r)
    {
        return None;
    }
    if let Some(f) = one_core(r) {
        return Some(f);
    }
    let busy = r
        .summary
        .cpu
        .local
        .as_ref()
        .and_then(|c| c.system_percent)
        .filter(|p| p.is_finite())?;
    let takes_turns = |w: &EndWaits| {
        w.run < TURN_RUN_PERCENT && w.queue < STARVED_WAIT_PERCENT && w.queue < w.asleep
    };
    let p = pairs(r)
        .filter(|p| takes_turns(&p.tx) && takes_turns(&p.rx))
        .max_by(|a, b| {
            a.tx.asleep
                .min(a.rx.asleep)
                .total_cmp(&b.tx.asleep.min(b.rx.asleep))
        })?;
    let asleep = p.tx.asleep.min(p.rx.asleep);
    let mut score = ramp(asleep, TURN_ASLEEP_PERCENT, TURN_ASLEEP_FULL);
    if busy < TURN_HOST_BUSY_PERCENT {
        score = score.min(0.4);
    }
    if score <= 0.0 {
        return None;
    }
    let head = format!(
        "the sender slept on its full send buffer {} of the time and the receiver waited \
         for data {}, each while the other ran; neither used more than {} of a core",
        pct(p.tx.asleep),
        pct(p.rx.asleep),
        pct(p.tx.run.max(p.rx.run).ceil())
    );
    let mut f = Finding::new(Bottleneck::TurnTaking, score, head);
    f.evidence = turn_items(&p, busy);
    if let Some(e) = kernel_sndbuf_item(p.stream, p.tx_host) {
        f.evidence.push(e);
    }
    f.advice = turn_advice(r);
    Some(f)
}

/// The stream whose two ends were pinned to one CPU, with that CPU.
fn sharing_a_core(r: &RunResult) -> Option<(Pair<'_>, u32)> {
    pairs(r).find_map(|p| match (p.tx.cpu, p.rx.cpu) {
        (Some(a), Some(b)) if a == b => Some((p, a)),
        _ => None,
    })
}

/// The two ends of a stream pinned to one CPU take it in turns: each waits for it on the
/// run queue while the other runs, whatever the CPU figures of either end say. A verdict
/// from [`ONE_CORE_SHARE_PERCENT`] of the core run by the two between them.
fn one_core(r: &RunResult) -> Option<Finding> {
    let (p, cpu) = sharing_a_core(r)?;
    let share = p.tx.run + p.rx.run;
    let score = ramp(share, ONE_CORE_SHARE_PERCENT, ONE_CORE_FULL);
    if score <= 0.0 {
        return None;
    }
    let head = format!(
        "both ends were pinned to CPU {cpu} and took it in turns: the sending thread ran \
         {} of it and waited for it {}, the receiving thread ran {} and waited {}",
        pct(p.tx.run),
        pct(p.tx.queue),
        pct(p.rx.run),
        pct(p.rx.queue)
    );
    let mut f = Finding::new(Bottleneck::TurnTaking, score, head);
    f.evidence.push(item(
        Bottleneck::TurnTaking,
        "client",
        &format!("share of CPU {cpu} run by the two ends"),
        Fig {
            value: share,
            unit: "percent",
            threshold: Some(ONE_CORE_SHARE_PERCENT),
        },
        "schedstat",
        format!(
            "client and server (one host): the two stream threads ran {} of CPU {cpu} \
             between them, the one CPU each was allowed (its main users from {}): each \
             one's wait for it was the other's turn",
            pct(share),
            pct(ONE_CORE_SHARE_PERCENT)
        ),
    ));
    for (sending, h, w) in [(true, p.tx_host, p.tx), (false, p.rx_host, p.rx)] {
        f.evidence.push(item(
            Bottleneck::TurnTaking,
            h.name(),
            if sending {
                "sending thread waiting for its CPU"
            } else {
                "receiving thread waiting for its CPU"
            },
            Fig {
                value: w.queue,
                unit: "percent",
                threshold: None,
            },
            "schedstat",
            format!("{} (pinned to CPU {cpu})", split_text(h, sending, &w)),
        ));
    }
    f.advice = vec![
        format!(
            "the ends on two CPUs (`-A 0,1`, or without `taskset`): pinned to CPU {cpu} \
             together, each end's turn is the other's wait"
        ),
        "the two ends on two hosts: between hosts their turns overlap".into(),
    ];
    Some(f)
}

/// Two ends pinned to one CPU: a thread saturated or starved there, and the host's busy
/// cores, are the turns seen from one end; they are capped to symptoms, with a note.
pub(super) fn on_one_core(r: &RunResult, a: &mut Analysis) {
    if a.score(Bottleneck::TurnTaking) < SUPPORT_SCORE {
        return;
    }
    let Some((_, cpu)) = sharing_a_core(r) else {
        return;
    };
    let mut capped = Vec::new();
    for b in [
        Bottleneck::SenderCpu,
        Bottleneck::ReceiverCpu,
        Bottleneck::HostCpu,
    ] {
        if a.score(b) >= SUPPORT_SCORE {
            a.cap(b, SYMPTOM_SCORE);
            capped.push(b.words());
        }
    }
    if !capped.is_empty() {
        a.note(format!(
            "{} the turns seen from one end: on CPU {cpu}, which both ends shared, one \
             end's time on it is the other's wait for it",
            match capped.len() {
                1 => format!("{} is", capped[0]),
                _ => format!("{} are", capped.join(", ")),
            }
        ));
    }
}

/// Each end's split held to the turn-taking thresholds, and the host's busy share.
fn turn_items(p: &Pair<'_>, busy: f64) -> Vec<EvidenceItem> {
    let mut out = Vec::new();
    for (sending, h, w) in [(true, p.tx_host, p.tx), (false, p.rx_host, p.rx)] {
        let what = if sending {
            "sender send-buffer wait"
        } else {
            "receiver receive wait"
        };
        out.push(item(
            Bottleneck::TurnTaking,
            h.name(),
            what,
            Fig {
                value: w.asleep,
                unit: "percent",
                threshold: Some(TURN_ASLEEP_PERCENT),
            },
            "schedstat",
            format!(
                "{} (taking turns from {} asleep, under {} running and {} waiting for a CPU)",
                split_text(h, sending, &w),
                pct(TURN_ASLEEP_PERCENT),
                pct(TURN_RUN_PERCENT),
                pct(STARVED_WAIT_PERCENT)
            ),
        ));
    }
    out.push(item(
        Bottleneck::TurnTaking,
        "client",
        "host busy over all cores",
        Fig {
            value: busy,
            unit: "percent",
            threshold: Some(TURN_HOST_BUSY_PERCENT),
        },
        "/proc/stat",
        format!(
            "client and server (one host): {} busy over all cores (not idle from {}): the \
             host had CPU to spare, the ends waited on each other",
            pct(busy),
            pct(TURN_HOST_BUSY_PERCENT)
        ),
    ));
    out
}

/// The kernel's own send-buffer-limited share beside the sleep, so the reader sees why the
/// buffer rule did not fire.
fn kernel_sndbuf_item(s: &StreamResult, h: Host) -> Option<EvidenceItem> {
    let t = s.tcp_sender.as_ref()?;
    let share = percent(t.sndbuf_limited_us? as f64, t.busy_time_us? as f64)?;
    Some(item(
        Bottleneck::TurnTaking,
        h.name(),
        "sndbuf-limited share of busy time",
        Fig {
            value: share,
            unit: "percent",
            threshold: None,
        },
        "TCP_INFO",
        format!(
            "{}: TCP_INFO counted {} of the sender's busy time as send-buffer limited: the \
             kernel counts that only while data waits unsent, and here the buffer held data \
             sent but not yet acknowledged by a receiver that was not running",
            h.name(),
            pct(share)
        ),
    ))
}

fn turn_advice(r: &RunResult) -> Vec<String> {
    let cores = r.summary.cpu.local.as_ref().and_then(|c| c.cores);
    vec![
        "`-P 2`: while one stream's ends wait on each other, the other stream's ends run".into(),
        format!(
            "the two ends on two hosts: on one host{} each end's turn is the other's wait, \
             and between hosts they overlap",
            cores.map_or(String::new(), |c| format!(" of {c} cores"))
        ),
    ]
}

/// Where each end waited, as a note, when no verdict already shows it.
pub(super) fn note(r: &RunResult, a: &mut Analysis) {
    if [Bottleneck::TurnTaking, Bottleneck::HostCpu]
        .iter()
        .any(|&b| a.score(b) >= SUPPORT_SCORE)
    {
        return;
    }
    let Some(p) = pairs(r).next() else { return };
    a.note(format!(
        "where the ends waited: {}; {}",
        split_text(p.tx_host, true, &p.tx),
        split_text(p.rx_host, false, &p.rx)
    ));
}
