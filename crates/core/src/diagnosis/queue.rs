//! A queue that filled on the path: the senders' smoothed RTT under load far above their
//! minimum RTT. Not a bottleneck of the rate (a full queue still drains at the link's rate)
//! but the delay every packet of the path waited behind the test's own data: bufferbloat.

use super::rules::{Analysis, QUEUE_MIN_MS, QUEUE_RTT_RATIO};
use super::text::{rate, size};
use super::view;
use crate::spec::Flow;
use crate::{Protocol, RunResult};

/// One note per flow whose senders waited on a queue: RTT under load against the
/// minimum, the queue's time and the bytes it held at the flow's goodput, and what keeps
/// it short.
pub(super) fn note(r: &RunResult, a: &mut Analysis) {
    if r.spec.protocol != Protocol::Tcp || !r.spec.test.is_stream() {
        return;
    }
    for &flow in view::flows(r) {
        if let Some(text) = flow_note(r, flow) {
            a.note(text);
        }
    }
}

fn flow_note(r: &RunResult, flow: Flow) -> Option<String> {
    let infos: Vec<_> = view::streams_of(r, flow)
        .filter_map(|s| s.tcp_sender.as_ref())
        .collect();
    let pairs: Vec<(f64, f64)> = infos
        .iter()
        .filter_map(|t| Some((t.rtt_us? as f64 / 1e3, t.min_rtt_us? as f64 / 1e3)))
        .filter(|(rtt, min)| *min > 0.0 && rtt.is_finite())
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let n = pairs.len() as f64;
    let loaded = pairs.iter().map(|p| p.0).sum::<f64>() / n;
    let idle = pairs.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let queued_ms = loaded - idle;
    if loaded < QUEUE_RTT_RATIO * idle || queued_ms < QUEUE_MIN_MS {
        return None;
    }
    let goodput: f64 = view::streams_of(r, flow)
        .map(|s| s.goodput_bps)
        .filter(|g| g.is_finite() && *g > 0.0)
        .sum();
    let held = goodput / 8.0 * queued_ms / 1e3;
    let cc = infos
        .iter()
        .find_map(|t| t.congestion.clone())
        .unwrap_or_default();
    Some(format!(
        "{}: RTT under load {loaded:.1} ms against {idle:.1} ms at least: {queued_ms:.1} ms of \
         queue on the path, about {} at {} ({}): a deep queue at the bottleneck (bufferbloat); \
         every other flow there waits as long. An AQM (fq_codel, cake), a smaller buffer, or \
         a sender that does not fill queues (bbr, pacing) keeps it short",
        flow.name(),
        size(held),
        rate(goodput),
        if cc.is_empty() {
            "TCP_INFO".to_string()
        } else {
            format!("{cc}, TCP_INFO")
        }
    ))
}
