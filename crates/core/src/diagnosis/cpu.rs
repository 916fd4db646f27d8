//! CPU rules: a saturated sending or receiving thread, a receiver starved of CPU or
//! throttled by its cgroup, and one receive core drowned in softirq work while others idle.

use super::rules::{
    item, ramp, Fig, Finding, CORE_RULE_THREAD_PERCENT, CORE_SATURATED_PERCENT, IDLE_CORE_PERCENT,
    QUOTA_USED_RATIO, SHARED_HOST_BUSY_PERCENT, SHARED_HOST_BUSY_WAITED_PERCENT,
    SOFTIRQ_CORE_BUSY_PERCENT, SOFTIRQ_SHARE_PERCENT, STARVED_DEMAND_PERCENT, STARVED_WAIT_PERCENT,
    SYMPTOM_SCORE, THREAD_FULL_PERCENT, THREAD_SATURATED_PERCENT, THROTTLED_PERCENT,
};
use super::text::pct;
use super::view::{self, percent, thread_load, Host, ThreadLoad};
use super::{Bottleneck, EvidenceItem};
use crate::evidence::CoreLoad;
use crate::result::StreamSide;
use crate::spec::{Protocol, RecvMode, SendMode};
use crate::RunResult;

/// The busiest stream thread, or data worker, on one end of the streams, and the host it ran
/// on.
fn busiest_thread(r: &RunResult, sending: bool) -> Option<(ThreadLoad, Host)> {
    let mut best: Option<(ThreadLoad, Host)> = None;
    let end = |s: &'_ crate::result::StreamResult| {
        if sending {
            s.sender
        } else {
            s.receiver
        }
    };
    for &flow in view::flows(r) {
        let host = if sending {
            Host::sending(flow)
        } else {
            Host::receiving(flow)
        };
        let n = view::streams_of(r, flow).count().max(1);
        let ends: Vec<StreamSide> = view::streams_of(r, flow).map(end).collect();
        for t in view::worker_loads(ends.iter()) {
            if best.is_none_or(|(b, _)| t.percent > b.percent) {
                best = Some((t, host));
            }
        }
        for side in ends.iter().filter(|s| s.worker.is_none()) {
            // a side that does not measure its threads: its process's CPU over its streams
            // (iperf3 reports the process only)
            let t = thread_load(side).or_else(|| {
                host.cpu(r)
                    .map(|c| c.process_percent / n as f64)
                    .filter(|p| p.is_finite() && *p > 0.0)
                    .map(|p| ThreadLoad {
                        percent: p.min(100.0),
                        source: "the peer's process CPU",
                        worker: None,
                    })
            });
            if let Some(t) = t {
                if best.is_none_or(|(b, _)| t.percent > b.percent) {
                    best = Some((t, host));
                }
            }
        }
    }
    best
}

fn thread_item(
    b: Bottleneck,
    t: ThreadLoad,
    host: Host,
    role: &str,
    r: &RunResult,
) -> EvidenceItem {
    let of = match t.worker {
        Some(w) if w.workers > 1 => format!(
            " (the busiest of {}, serving {})",
            w.workers,
            crate::text::count(w.streams as u64, "stream")
        ),
        Some(w) => format!(
            " (serving {})",
            crate::text::count(w.streams as u64, "stream")
        ),
        None if r.spec.parallel > 1 => format!(" (the busiest of {})", r.spec.parallel),
        None => String::new(),
    };
    let noun = t.noun();
    item(
        b,
        host.name(),
        &format!("{role} thread CPU"),
        Fig {
            value: t.percent,
            unit: "percent",
            threshold: Some(THREAD_SATURATED_PERCENT),
        },
        t.source,
        format!(
            "{}: {role} {noun}{of} at {} of a core (saturated from {})",
            host.name(),
            pct(t.percent),
            pct(THREAD_SATURATED_PERCENT)
        ),
    )
}

/// The busiest core of a host: the CPU summary's, else the per-core evidence's.
fn busiest_core(r: &RunResult, host: Host) -> Option<(f64, Option<u32>)> {
    let from_summary = host
        .cpu(r)
        .and_then(|c| c.busiest_core_percent.map(|p| (p, c.busiest_core)));
    let from_cores = || {
        host.evidence(r)?
            .cores
            .iter()
            .max_by(|a, b| a.busy_percent().total_cmp(&b.busy_percent()))
            .map(|c| (c.busy_percent(), Some(c.core)))
    };
    from_summary
        .or_else(from_cores)
        .filter(|(p, _)| p.is_finite())
}

/// Sender CPU: a sending thread at 90 % of a core or more, or the sending host's busiest
/// core at 95 % or more (weaker: host-wide, and not used when both ends share the host).
pub(super) fn sender(r: &RunResult) -> Option<Finding> {
    let thread = busiest_thread(r, true);
    let core = if view::same_host(r) {
        None
    } else {
        view::hosts(r, true)
            .into_iter()
            .filter_map(|h| busiest_core(r, h).map(|c| (c, h)))
            .max_by(|a, b| a.0 .0.total_cmp(&b.0 .0))
    };
    if thread.is_none() && core.is_none() && starvation(r, true).is_none() {
        return None;
    }
    let t_score = thread.map_or(0.0, |(t, _)| {
        ramp(t.percent, THREAD_SATURATED_PERCENT, THREAD_FULL_PERCENT)
    });
    // a busy core says nothing about a sending thread that hardly ran: other work (or
    // another test on the machine) took it
    let thread_busy = thread.is_none_or(|(t, _)| t.percent >= CORE_RULE_THREAD_PERCENT);
    let c_score = core.filter(|_| thread_busy).map_or(0.0, |((p, _), _)| {
        ramp(p, CORE_SATURATED_PERCENT, 99.0).min(0.75)
    });
    let headline = match (thread, core) {
        (Some((t, _)), _) if t_score >= c_score => {
            format!("the sending {} ran {} of a core", t.noun(), pct(t.percent))
        }
        (_, Some(((p, _), h))) => format!("the {}'s busiest core was {} busy", h.name(), pct(p)),
        _ => String::new(),
    };
    let mut f = Finding::new(Bottleneck::SenderCpu, t_score.max(c_score), headline);
    if let Some((t, h)) = thread {
        f.evidence
            .push(thread_item(Bottleneck::SenderCpu, t, h, "sending", r));
    }
    if let Some(((p, idx), h)) = core.filter(|_| c_score > 0.0) {
        f.evidence.push(core_item(Bottleneck::SenderCpu, h, p, idx));
    }
    f.advice = cpu_advice(r, true);
    // UDP that lost datagrams sent more than got through: the sender's CPU did not set
    // the goodput, so where the datagrams were lost ranks first
    let udp_loss = r
        .summary
        .udp
        .as_ref()
        .is_some_and(|u| u.loss_percent > super::rules::UDP_LOSS_PERCENT);
    // a thread that wanted a whole core but had to wait for it is CPU-bound too
    if let Some((score, head, ev, advice)) = starvation(r, true) {
        if score > f.score {
            f.score = score;
            f.headline = head;
            f.advice = advice;
        }
        if score >= 0.5 {
            f.evidence.splice(0..0, ev);
        }
    }
    // a quota that bit is the cause a busy or starved thread only shows: it leads
    if let Some((score, head, ev, advice)) = throttling(r, thread, true)
        .into_iter()
        .filter(|p| p.0 >= 0.7)
        .max_by(|x, y| x.0.total_cmp(&y.0))
    {
        f.score = f.score.max(score);
        f.headline = head;
        f.advice = advice;
        f.evidence.splice(0..0, ev);
    }
    if udp_loss {
        f.score = f.score.min(0.9);
    }
    Some(f)
}

/// The host's CPU: both ends share one host (loopback) and it was busy over all its cores
/// at 90 % or more. A CPU limit of the whole test even when no single thread is saturated,
/// so it is named by what was busy (the host, other work included), never by one end;
/// score at most 0.75, a medium verdict.
pub(super) fn host(r: &RunResult) -> Option<Finding> {
    if !view::same_host(r) {
        return None;
    }
    let busy = r
        .summary
        .cpu
        .local
        .as_ref()
        .and_then(|c| c.system_percent)
        .filter(|p| p.is_finite())?;
    // a stream thread that waited for a CPU a fifth of its window lowers the bar: the
    // cores were contended even where they were not all full
    let waited = super::waits::longest_queue(r) >= STARVED_WAIT_PERCENT;
    let threshold = if waited {
        SHARED_HOST_BUSY_WAITED_PERCENT
    } else {
        SHARED_HOST_BUSY_PERCENT
    };
    let mut score = ramp(busy, threshold, 99.0).min(0.75);
    // a saturated stream thread that no other work kept waiting made the host busy
    // itself: the host is then its symptom, not a second cause
    let saturated = [true, false]
        .into_iter()
        .filter_map(|sending| busiest_thread(r, sending))
        .any(|(t, _)| t.percent >= THREAD_SATURATED_PERCENT);
    if saturated && super::waits::longest_queue(r) < STARVED_WAIT_PERCENT {
        score = score.min(SYMPTOM_SCORE);
    }
    if score <= 0.0 {
        return None;
    }
    let head = if busy >= SHARED_HOST_BUSY_PERCENT {
        format!(
            "every core of the host was busy ({} over all cores)",
            pct(busy)
        )
    } else {
        format!(
            "the host's cores were contended ({} busy over all cores, and a stream thread \
             waited for a CPU {} of its window)",
            pct(busy),
            pct(super::waits::longest_queue(r))
        )
    };
    let mut f = Finding::new(Bottleneck::HostCpu, score, head);
    f.evidence.push(item(
        Bottleneck::HostCpu,
        "client",
        "host busy over all cores",
        Fig {
            value: busy,
            unit: "percent",
            threshold: Some(threshold),
        },
        "/proc/stat",
        format!(
            "client and server (one host): {} busy over all cores (saturated from {}{}); \
             the stream threads are only part of it",
            pct(busy),
            pct(threshold),
            if waited {
                " when a stream thread waited a fifth of its window for a CPU"
            } else {
                ""
            }
        ),
    ));
    // each end's split of its window (run, waiting for a CPU, asleep) where the scheduler
    // gave it; else each end's CPU share
    let split = super::waits::queue_items(r);
    if split.is_empty() {
        for sending in [true, false] {
            if let Some((t, h)) = busiest_thread(r, sending) {
                let (role, b) = if sending {
                    ("sending", Bottleneck::SenderCpu)
                } else {
                    ("receiving", Bottleneck::ReceiverCpu)
                };
                let mut e = thread_item(b, t, h, role, r);
                e.supports = Bottleneck::HostCpu;
                f.evidence.push(e);
            }
        }
    }
    f.evidence.extend(split);
    let mut advice = vec![
        "free the host of other work while testing: every core was busy, and the stream \
         threads had only part of them"
            .to_string(),
    ];
    advice.extend(cpu_advice(r, true).into_iter().take(2));
    f.advice = advice;
    Some(f)
}

fn core_item(b: Bottleneck, h: Host, p: f64, idx: Option<u32>) -> EvidenceItem {
    let which = idx.map_or("busiest core".to_string(), |i| format!("core {i}"));
    item(
        b,
        h.name(),
        "busiest core",
        Fig {
            value: p,
            unit: "percent",
            threshold: Some(CORE_SATURATED_PERCENT),
        },
        "/proc/stat",
        format!(
            "{}: {which} {} busy (saturated from {})",
            h.name(),
            pct(p),
            pct(CORE_SATURATED_PERCENT)
        ),
    )
}

/// Advice for a saturated thread: more streams first, then the copy.
fn cpu_advice(r: &RunResult, sending: bool) -> Vec<String> {
    let mut out = Vec::new();
    let cores = r.summary.cpu.local.as_ref().and_then(|c| c.cores);
    if view::same_host(r) && cores.is_some_and(|c| c <= 2) {
        // each end already has a core of its own: more streams add threads, not cores
        out.push(format!(
            "the two ends on two hosts, or a host of more cores: on one host of {} cores each \
             end has one, and more streams share them",
            cores.unwrap_or(2)
        ));
    } else if r.spec.parallel < 2 {
        out.push("`-P 2` or more: the streams spread over a data worker per core".into());
    } else {
        out.push(format!(
            "`-P {}`: more streams than the {} used, if the hosts have idle cores",
            r.spec.parallel.saturating_mul(2),
            r.spec.parallel
        ));
    }
    if r.spec.protocol == Protocol::Tcp {
        if sending && r.spec.send_mode == SendMode::Copy {
            out.push("`-Z`: zero-copy sending (splice) saves the copy from user memory".into());
        }
        if !sending && r.spec.recv_mode == RecvMode::Copy {
            out.push(
                "`--discard` shows the rate without the receive copy (a sink, not what \
                 applications see)"
                    .into(),
            );
        }
    }
    out.push(
        "check that no other work shares the core (`taskset`) and the CPU frequency governor"
            .into(),
    );
    out
}

/// The strongest sign of a starved receiving thread: (run + wait) ÷ window and wait ÷
/// window, in percent, when the scheduler's figures are known.
fn starved(s: &StreamSide) -> Option<(f64, f64)> {
    let (run, wait) = (s.run_s?, s.wait_s?);
    // the thread's clock and the stream's byte window differ by a few ms: never over 100 %
    Some((
        percent(run + wait, s.seconds)?.min(100.0),
        percent(wait, s.seconds)?.min(100.0),
    ))
}

/// Receiver CPU: a receiving thread saturated, starved (runnable but waiting), or held by
/// its cgroup's quota.
pub(super) fn receiver(r: &RunResult) -> Option<Finding> {
    let mut parts: Vec<(f64, String, Vec<EvidenceItem>, Vec<String>)> = Vec::new();
    let thread = busiest_thread(r, false);
    if let Some((t, h)) = thread {
        let s = ramp(t.percent, THREAD_SATURATED_PERCENT, THREAD_FULL_PERCENT);
        let ev = vec![thread_item(Bottleneck::ReceiverCpu, t, h, "receiving", r)];
        let head = format!(
            "the receiving {} ran {} of a core",
            t.noun(),
            pct(t.percent)
        );
        parts.push((s, head, ev, cpu_advice(r, false)));
    }
    parts.extend(starvation(r, false));
    let first_quota = parts.len();
    parts.extend(throttling(r, thread, false));
    let best = parts
        .iter()
        .enumerate()
        .max_by(|a, b| a.1 .0.total_cmp(&b.1 .0).then(b.0.cmp(&a.0)))
        .map(|(i, _)| i)?;
    // a quota that bit is the cause a starved thread only shows: name it first
    let best = (first_quota..parts.len())
        .find(|&i| parts[i].0 >= 0.7)
        .unwrap_or(best);
    let (score, headline, _, advice) = parts[best].clone();
    let mut f = Finding::new(Bottleneck::ReceiverCpu, score, headline);
    f.advice = advice;
    // the deciding figures first, then the others that crossed their thresholds
    let mut order: Vec<usize> = vec![best];
    order.extend((0..parts.len()).filter(|&i| i != best && parts[i].0 >= 0.7));
    for i in order {
        f.evidence.extend(parts[i].2.iter().cloned());
    }
    Some(f)
}

type Part = (f64, String, Vec<EvidenceItem>, Vec<String>);

/// A stream thread on one end (`sending` or receiving) that was runnable nearly all the
/// time but spent a share of it waiting for a CPU: other work took its core.
fn starvation(r: &RunResult, sending: bool) -> Option<Part> {
    let mut best: Option<(f64, f64, Host)> = None;
    for &flow in view::flows(r) {
        for s in view::streams_of(r, flow) {
            let side = if sending { &s.sender } else { &s.receiver };
            if let Some((demand, wait)) = starved(side) {
                if demand >= STARVED_DEMAND_PERCENT && best.is_none_or(|b| wait > b.1) {
                    let h = if sending {
                        Host::sending(flow)
                    } else {
                        Host::receiving(flow)
                    };
                    best = Some((demand, wait, h));
                }
            }
        }
    }
    let (role, b) = if sending {
        ("sending", Bottleneck::SenderCpu)
    } else {
        ("receiving", Bottleneck::ReceiverCpu)
    };
    let (demand, wait, h) = best?;
    let score = if wait >= STARVED_WAIT_PERCENT {
        0.7 + 0.3 * ((wait - STARVED_WAIT_PERCENT) / 30.0).clamp(0.0, 1.0)
    } else {
        ramp(wait, STARVED_WAIT_PERCENT, 50.0)
    };
    let ev = item(
        b,
        h.name(),
        &format!("{role} thread waiting for a CPU"),
        Fig {
            value: wait,
            unit: "percent",
            threshold: Some(STARVED_WAIT_PERCENT),
        },
        "schedstat",
        format!(
            "{}: {role} thread runnable {} of the time but waited for a CPU {} \
             (starved from {} waiting)",
            h.name(),
            pct(demand),
            pct(wait),
            pct(STARVED_WAIT_PERCENT)
        ),
    );
    let head = format!(
        "the {role} thread waited for a CPU {} of its time",
        pct(wait)
    );
    let advice = vec![
        format!(
            "free a core for the {}: other work shared its core (`taskset`, fewer busy processes)",
            if sending { "sender" } else { "receiver" }
        ),
        format!(
            "`-P 2` or more, if the {} host has idle cores",
            if sending { "sending" } else { "receiving" }
        ),
    ];
    Some((score, head, vec![ev], advice))
}

/// The sending or receiving hosts' cgroups: throttled for a share of the window, or a
/// quota under one core that the end's busiest thread used up.
fn throttling(r: &RunResult, thread: Option<(ThreadLoad, Host)>, sending: bool) -> Vec<Part> {
    let (role, b) = if sending {
        ("sending", Bottleneck::SenderCpu)
    } else {
        ("receiving", Bottleneck::ReceiverCpu)
    };
    let mut out = Vec::new();
    for h in view::hosts(r, sending) {
        let Some(e) = h.evidence(r) else { continue };
        let Some(cg) = e.cgroup else { continue };
        let window = view::window_s(r, e);
        if let Some(share) = cg.throttled_s.and_then(|t| percent(t, window)) {
            let score = ramp(share, THROTTLED_PERCENT, 30.0);
            let ev = item(
                b,
                h.name(),
                "cgroup throttled time",
                Fig {
                    value: share,
                    unit: "percent",
                    threshold: Some(THROTTLED_PERCENT),
                },
                "cgroup cpu.stat",
                format!(
                    "{}: CPU quota throttled the {role} side {} of the window{} \
                     (limiting from {})",
                    h.name(),
                    pct(share),
                    cg.nr_throttled
                        .map_or(String::new(), |n| format!(", in {n} periods")),
                    pct(THROTTLED_PERCENT)
                ),
            );
            let head = format!(
                "the {}'s CPU quota{} throttled its {role} end {} of the window{}",
                h.name(),
                cg.limit_cores
                    .map_or(String::new(), |l| format!(" of {l:.2} cores")),
                pct(share),
                cg.nr_throttled
                    .map_or(String::new(), |n| format!(", in {n} periods"))
            );
            out.push((score, head, vec![ev], quota_advice(h, cg.limit_cores, role)));
        }
        if let (Some(limit), Some((t, th))) = (cg.limit_cores, thread) {
            if limit > 0.0
                && limit < 1.0
                && th == h
                && t.percent / 100.0 >= QUOTA_USED_RATIO * limit
            {
                let ev = item(
                    b,
                    h.name(),
                    "cgroup CPU limit",
                    Fig {
                        value: limit,
                        unit: "cores",
                        threshold: Some(1.0),
                    },
                    "cgroup CPU quota",
                    format!(
                        "{}: CPU quota {limit:.2} cores, and the {role} thread used {} of a core",
                        h.name(),
                        pct(t.percent)
                    ),
                );
                let head = format!(
                    "the {role} thread used the {}'s whole CPU quota of {limit:.2} cores",
                    h.name()
                );
                out.push((0.8, head, vec![ev], quota_advice(h, Some(limit), role)));
            }
        }
    }
    out
}

fn quota_advice(h: Host, limit: Option<f64>, role: &str) -> Vec<String> {
    let now = limit.map_or(String::new(), |l| format!(" (now {l:.2} cores)"));
    vec![
        format!(
            "raise the CPU quota of the {}'s cgroup{now} to at least 2 cores \
             (`cpu.max`; a container's `--cpus`)",
            h.name()
        ),
        format!("or run the {role} end outside the limited cgroup"),
    ]
}

/// A core busy with softirq, and the least busy core of the same host.
fn softirq_core(cores: &[CoreLoad]) -> Option<(CoreLoad, CoreLoad)> {
    let hot = cores
        .iter()
        .filter(|c| c.softirq_percent >= SOFTIRQ_SHARE_PERCENT)
        .max_by(|a, b| a.busy_percent().total_cmp(&b.busy_percent()))?;
    let cold = cores
        .iter()
        .filter(|c| c.core != hot.core)
        .min_by(|a, b| a.busy_percent().total_cmp(&b.busy_percent()))?;
    Some((*hot, *cold))
}

/// Receiver softirq: one core of the receiving host at 90 % busy or more, at least half
/// of it softirq, while another core is under 50 %.
pub(super) fn softirq(r: &RunResult) -> Option<Finding> {
    let mut best: Option<(f64, Host, CoreLoad, CoreLoad)> = None;
    for h in view::hosts(r, false) {
        let Some(e) = h.evidence(r) else { continue };
        let Some((hot, cold)) = softirq_core(&e.cores) else {
            continue;
        };
        if cold.busy_percent() >= IDLE_CORE_PERCENT {
            continue;
        }
        let s = ramp(hot.busy_percent(), SOFTIRQ_CORE_BUSY_PERCENT, 99.0);
        if best.is_none_or(|b| s > b.0) {
            best = Some((s, h, hot, cold));
        }
    }
    let (mut score, h, hot, cold) = best?;
    let shared = view::same_host(r);
    if shared {
        score = score.min(SYMPTOM_SCORE);
    }
    let head = format!(
        "core {} of the {} was {} busy, {} of it softirq, while core {} was {} busy",
        hot.core,
        h.name(),
        pct(hot.busy_percent()),
        pct(hot.softirq_percent),
        cold.core,
        pct(cold.busy_percent())
    );
    let mut f = Finding::new(Bottleneck::ReceiverSoftirq, score, head);
    f.evidence = softirq_items(h, hot, cold, shared);
    f.advice = softirq_advice(r, h, hot.core);
    Some(f)
}

fn softirq_items(h: Host, hot: CoreLoad, cold: CoreLoad, shared: bool) -> Vec<EvidenceItem> {
    let b = Bottleneck::ReceiverSoftirq;
    let also = if shared {
        " (one host: the sending threads' cores run the receive softirq too)"
    } else {
        ""
    };
    vec![
        item(
            b,
            h.name(),
            "receive core busy",
            Fig {
                value: hot.busy_percent(),
                unit: "percent",
                threshold: Some(SOFTIRQ_CORE_BUSY_PERCENT),
            },
            "/proc/stat",
            format!(
                "{}: core {} {} busy, softirq {} of it (from {} busy with {} softirq){also}",
                h.name(),
                hot.core,
                pct(hot.busy_percent()),
                pct(hot.softirq_percent),
                pct(SOFTIRQ_CORE_BUSY_PERCENT),
                pct(SOFTIRQ_SHARE_PERCENT)
            ),
        ),
        item(
            b,
            h.name(),
            "least busy core",
            Fig {
                value: cold.busy_percent(),
                unit: "percent",
                threshold: Some(IDLE_CORE_PERCENT),
            },
            "/proc/stat",
            format!(
                "{}: core {} only {} busy (idle capacity below {})",
                h.name(),
                cold.core,
                pct(cold.busy_percent()),
                pct(IDLE_CORE_PERCENT)
            ),
        ),
    ]
}

/// Names the interrupt line that fired most on the hot core and the test interface.
fn softirq_advice(r: &RunResult, h: Host, core: u32) -> Vec<String> {
    let irq = h.evidence(r).and_then(|e| {
        e.irqs
            .iter()
            .filter_map(|q| q.per_core.get(core as usize).map(|n| (*n, q)))
            .filter(|(n, _)| *n > 0)
            .max_by_key(|(n, _)| *n)
            .map(|(_, q)| q.irq.clone())
    });
    let iface = h
        .env(r)
        .interfaces
        .first()
        .map_or("IFACE".to_string(), |i| i.name.clone());
    let affinity = irq.map_or("/proc/irq/N/smp_affinity".to_string(), |n| {
        format!("/proc/irq/{n}/smp_affinity")
    });
    vec![
        format!(
            "spread receive interrupts over cores: more RSS queues (`ethtool -L {iface} \
             combined N`), or move the busy line with `{affinity}`"
        ),
        format!(
            "or spread the protocol work in software: RPS (`/sys/class/net/{iface}/queues/rx-0/rps_cpus`) \
             and RFS (`net.core.rps_sock_flow_entries`)"
        ),
        format!(
            "with RSS on, `-P {}` spreads flows over more queues",
            r.spec.parallel.saturating_mul(2).max(4)
        ),
    ]
}
