//! The congestion control's own choice: a sender that always had data to send and was
//! held by neither window nor buffer, lost nothing, had CPU to spare, and still moved far
//! less than the wire carries. What is left is the congestion window or the pacing rate
//! its congestion control set (the kernel's busy time less the window- and buffer-limited
//! times: cwnd- or pacing-limited).

use super::rules::{
    item, Fig, Finding, BUFFER_LIMITED_PERCENT, CC_BUSY_PERCENT, CC_EFFICIENCY, LOSS_RATE,
};
use super::text::{micros, pct, rate};
use super::view::{self, percent, thread_load, Host};
use super::Bottleneck;
use crate::RunResult;

/// Congestion control: busy ≥ 90 % of the window, window- and buffer-limited < 15 % of
/// busy, real loss under the loss threshold, the sending threads under half a core, and
/// goodput under half the wire model (the link must be known).
pub(super) fn limited(r: &RunResult) -> Option<Finding> {
    let eff = r.summary.wire.efficiency.filter(|e| e.is_finite())?;
    if eff >= CC_EFFICIENCY {
        return None;
    }
    let mut best: Option<Finding> = None;
    for &flow in view::flows(r) {
        let streams: Vec<_> = view::streams_of(r, flow).collect();
        let infos: Vec<_> = streams
            .iter()
            .filter_map(|s| s.tcp_sender.as_ref())
            .collect();
        if infos.is_empty() || infos.len() != streams.len() {
            continue;
        }
        let sum = |f: fn(&crate::result::TcpInfo) -> Option<u64>| -> Option<u64> {
            infos.iter().copied().map(f).sum()
        };
        let (Some(busy), Some(rwnd), Some(sndbuf)) = (
            sum(|t| t.busy_time_us),
            sum(|t| t.rwnd_limited_us),
            sum(|t| t.sndbuf_limited_us),
        ) else {
            continue;
        };
        let window: f64 = streams.iter().map(|s| s.sender.seconds).sum();
        let busy_share = percent(busy as f64 / 1e6, window)?;
        let held = percent((rwnd + sndbuf) as f64, busy as f64).unwrap_or(100.0);
        let retrans = sum(|t| t.retransmits_total).unwrap_or(0);
        let spurious = sum(|t| t.dsack_dups).unwrap_or(0);
        let segs = sum(|t| t.segs_out).unwrap_or(0);
        let loss = percent(retrans.saturating_sub(spurious) as f64, segs as f64).unwrap_or(0.0);
        let cpu = streams
            .iter()
            .filter_map(|s| thread_load(&s.sender))
            .map(|t| t.percent)
            .fold(0.0, f64::max);
        if busy_share < CC_BUSY_PERCENT
            || held >= BUFFER_LIMITED_PERCENT
            || loss >= LOSS_RATE * 100.0
            || cpu >= 50.0
        {
            continue;
        }
        let h = Host::sending(flow);
        let first = infos[0];
        let cc = first.congestion.clone().unwrap_or_else(|| "its".into());
        let cwnd = infos.iter().filter_map(|t| t.snd_cwnd).max();
        let window_rate = match (cwnd, first.snd_mss, first.rtt_us) {
            (Some(c), Some(m), Some(rtt)) if rtt > 0 => format!(
                "; cwnd {c} × {m} B per {} RTT allows {}",
                micros(rtt as f64),
                rate((c * m) as f64 * 8.0 / (rtt as f64 / 1e6))
            ),
            _ => String::new(),
        };
        let pacing = infos
            .iter()
            .filter_map(|t| t.pacing_rate_bps)
            .reduce(u64::saturating_add)
            .map_or(String::new(), |p| {
                format!(", pacing rate {}", rate(p as f64))
            });
        let mut f = Finding::new(
            Bottleneck::CongestionControl,
            0.7,
            format!(
                "the congestion control ({cc}) held the sender at {} of the wire without loss",
                pct(eff * 100.0)
            ),
        );
        f.evidence.push(item(
            Bottleneck::CongestionControl,
            h.name(),
            "busy time neither window- nor buffer-limited",
            Fig {
                value: busy_share,
                unit: "percent",
                threshold: Some(CC_BUSY_PERCENT),
            },
            "TCP_INFO",
            format!(
                "{}: sending {} of the time, held by the receiver's window or the send buffer \
                 only {} of it, no loss ({} real retransmits), the sending thread at {} of a \
                 core{window_rate}{pacing}",
                h.name(),
                pct(busy_share.min(100.0)),
                pct(held),
                retrans.saturating_sub(spurious),
                pct(cpu)
            ),
        ));
        f.advice = vec![
            format!("`-C cubic` (or another algorithm): {cc} chose this rate on its own; compare"),
            "look at the pacing and the queue: `ss -ti` (pacing_rate, cwnd) and `tc -s qdisc`"
                .into(),
        ];
        if best.as_ref().is_none_or(|b| f.score > b.score) {
            best = Some(f);
        }
    }
    best
}
