//! TCP rules: the wire, the receiver's window and the sender's buffer (the kernel's
//! tcp_chrono shares of busy time). Loss is in `loss`.

use super::rules::{
    item, ramp, Fig, Finding, BUFFER_LIMITED_PERCENT, NEAR_WIRE_EFFICIENCY, WIRE_EFFICIENCY,
};
use super::text::{flag_size, micros, pct, rate, size};
use super::view::{self, percent, Host};
use super::{Bottleneck, EvidenceItem};
use crate::result::{StreamResult, TcpInfo};
use crate::spec::Flow;
use crate::RunResult;

/// Wire: goodput at 97 % of the wire model or more.
pub(super) fn wire(r: &RunResult) -> Option<Finding> {
    let w = &r.summary.wire;
    let eff = w.efficiency.filter(|e| e.is_finite() && *e > 0.0)?;
    // UDP offered above the wire loses the excess: where it is lost is the finding that
    // asks for action, so the wire ranks just below a loss location at full score
    let udp_loss = r
        .summary
        .udp
        .as_ref()
        .is_some_and(|u| u.loss_percent > super::rules::UDP_LOSS_PERCENT);
    let full = if udp_loss { 0.9 } else { 1.0 };
    let score = if eff >= WIRE_EFFICIENCY {
        (0.85 + 0.15 * ((eff - WIRE_EFFICIENCY) / 0.02).clamp(0.0, 1.0)).min(full)
    } else if eff >= NEAR_WIRE_EFFICIENCY {
        // near the wire: a verdict, but not a confident one
        (0.6 + 0.2 * (eff - NEAR_WIRE_EFFICIENCY) / (WIRE_EFFICIENCY - NEAR_WIRE_EFFICIENCY))
            .min(full)
    } else if eff >= 0.9 {
        0.2 + 0.3 * (eff - 0.9) / (WIRE_EFFICIENCY - 0.9)
    } else {
        0.0
    };
    let link = w.link_bps.map_or("the link".to_string(), |l| {
        let src = w
            .link_source
            .as_deref()
            .map_or(String::new(), |s| format!(", from {s}"));
        format!("a {} link{src}", rate(l))
    });
    let model = w
        .model_goodput_bps
        .map_or(String::new(), |m| format!("'s {}", rate(m)));
    let headline = format!(
        "goodput {} is {} of what {link} can carry",
        rate(r.summary.goodput_bps),
        pct(eff * 100.0)
    );
    let mut f = Finding::new(Bottleneck::Wire, score, headline);
    f.evidence.push(item(
        Bottleneck::Wire,
        "path",
        "goodput over the wire model",
        Fig {
            value: eff,
            unit: "ratio",
            threshold: Some(WIRE_EFFICIENCY),
        },
        "wire model",
        format!(
            "path: goodput {} = {} of the wire model{model} for {link} (wire-bound from {})",
            rate(r.summary.goodput_bps),
            pct(eff * 100.0),
            pct(WIRE_EFFICIENCY * 100.0)
        ),
    ));
    f.advice = vec![
        "nothing to gain on this link: only a faster link or a larger MTU (jumbo frames) \
         raises the ceiling"
            .into(),
    ];
    Some(f)
}

/// Busy time and one of its limited parts, summed over a flow's senders.
#[derive(Debug, Clone, Copy)]
struct Limited {
    flow: Flow,
    share: f64,
    busy_us: u64,
}

fn limited(r: &RunResult, part: fn(&TcpInfo) -> Option<u64>) -> Option<Limited> {
    let mut best: Option<Limited> = None;
    for &flow in view::flows(r) {
        let (mut busy, mut lim, mut seen) = (0u64, 0u64, false);
        for t in view::streams_of(r, flow).filter_map(|s| s.tcp_sender.as_ref()) {
            if let (Some(b), Some(p)) = (t.busy_time_us, part(t)) {
                busy = busy.saturating_add(b);
                lim = lim.saturating_add(p.min(b));
                seen = true;
            }
        }
        let Some(share) = percent(lim as f64, busy as f64).filter(|_| seen) else {
            continue;
        };
        if best.is_none_or(|b| share > b.share) {
            best = Some(Limited {
                flow,
                share,
                busy_us: busy,
            });
        }
    }
    best
}

fn share_item(b: Bottleneck, l: Limited, what: &str, kind: &str) -> EvidenceItem {
    let h = Host::sending(l.flow);
    item(
        b,
        h.name(),
        what,
        Fig {
            value: l.share,
            unit: "percent",
            threshold: Some(BUFFER_LIMITED_PERCENT),
        },
        "TCP_INFO",
        format!(
            "{}: the sender was {kind}-limited {} of its busy time ({} busy; limiting from {})",
            h.name(),
            pct(l.share),
            micros(l.busy_us as f64),
            pct(BUFFER_LIMITED_PERCENT)
        ),
    )
}

/// The window the receiver advertised, where it was read, and the path's RTT.
struct WindowFacts {
    window: Option<(u64, &'static str)>,
    rtt_us: Option<f64>,
    rate_bps: f64,
    rate_is_link: bool,
    streams: usize,
}

fn window_facts(r: &RunResult, flow: Flow) -> WindowFacts {
    let streams: Vec<&StreamResult> = view::streams_of(r, flow).collect();
    let senders = || streams.iter().filter_map(|s| s.tcp_sender.as_ref());
    let receivers = || streams.iter().filter_map(|s| s.tcp_receiver.as_ref());
    let window = senders()
        .filter_map(|t| t.snd_wnd)
        .min()
        .map(|w| (w, "the sender's TCP_INFO"))
        .or_else(|| {
            receivers()
                .filter_map(|t| t.rcv_wnd)
                .min()
                .map(|w| (w, "the receiver's TCP_INFO"))
        })
        .or_else(|| {
            receivers()
                .filter_map(|t| t.rcv_space)
                .min()
                .map(|w| (w, "the receiver's TCP_INFO (rcv_space)"))
        })
        .or_else(|| r.spec.window_bytes.map(|w| (w, "-w")))
        .filter(|(w, _)| *w > 0);
    // the smoothed RTT, the one the connection lived with under load: a window must cover
    // it, not only the empty path's minimum
    let rtt_us = senders()
        .filter_map(|t| t.rtt_us.or(t.min_rtt_us))
        .filter(|x| *x > 0)
        .min()
        .map(|x| x as f64);
    let n = streams.len().max(1);
    let link = r
        .summary
        .wire
        .link_bps
        .filter(|l| l.is_finite() && *l > 0.0);
    let flow_goodput: f64 = streams
        .iter()
        .map(|s| s.goodput_bps)
        .filter(|g| g.is_finite())
        .sum();
    let goodput = if flow_goodput > 0.0 {
        flow_goodput
    } else {
        r.summary.goodput_bps
    };
    WindowFacts {
        window,
        rtt_us,
        rate_bps: link.unwrap_or(goodput) / n as f64,
        rate_is_link: link.is_some(),
        streams: n,
    }
}

/// Receiver's window: the sender rwnd-limited for 15 % of its busy time or more (NDT),
/// with the bandwidth-delay product beside the advertised window.
pub(super) fn receiver_window(r: &RunResult) -> Option<Finding> {
    let l = limited(r, |t| t.rwnd_limited_us)?;
    let facts = window_facts(r, l.flow);
    let score = ramp(l.share, BUFFER_LIMITED_PERCENT, 50.0);
    let bdp = facts
        .rtt_us
        .map(|rtt| facts.rate_bps * rtt / 1e6 / 8.0)
        .filter(|b| b.is_finite() && *b > 0.0);
    let mut f = Finding::new(
        Bottleneck::ReceiverWindow,
        score,
        format!(
            "the sender waited on the receiver's window {} of its busy time",
            pct(l.share)
        ),
    );
    f.evidence.push(share_item(
        Bottleneck::ReceiverWindow,
        l,
        "rwnd-limited share of busy time",
        "rwnd",
    ));
    if let Some((w, src)) = facts.window {
        f.evidence.push(bdp_item(l.flow, w, src, bdp, &facts));
        if let (Some(b), Some(rtt)) = (bdp, facts.rtt_us) {
            let ceiling = w as f64 * 8.0 / (rtt / 1e6);
            f.headline = if (w as f64) < b {
                format!(
                    "{} advertised, less than the BDP {}: at most {}",
                    size(w as f64),
                    size(b),
                    rate(ceiling * facts.streams as f64)
                )
            } else {
                format!(
                    "the sender waited on a window of {} (≥ BDP {}) {} of its busy time: \
                     the receiver did not drain it",
                    size(w as f64),
                    size(b),
                    pct(l.share)
                )
            };
        }
    }
    f.advice = window_advice(r, bdp, facts.window.map(|w| w.0));
    Some(f)
}

fn bdp_item(flow: Flow, w: u64, src: &str, bdp: Option<f64>, facts: &WindowFacts) -> EvidenceItem {
    let h = Host::receiving(flow);
    let text = match (bdp, facts.rtt_us) {
        (Some(b), Some(rtt)) => {
            let cmp = if (w as f64) < b { "<" } else { "≥" };
            let per = if facts.streams > 1 { " per stream" } else { "" };
            let what = if facts.rate_is_link {
                "link"
            } else {
                "goodput"
            };
            format!(
                "{}: window {} advertised {cmp} BDP {} ({} {what}{per} × {} RTT): at most \
                 window/RTT = {}{per}",
                h.name(),
                size(w as f64),
                size(b),
                rate(facts.rate_bps),
                micros(rtt),
                rate(w as f64 * 8.0 / (rtt / 1e6))
            )
        }
        _ => format!(
            "{}: window {} advertised (no RTT to compare it with)",
            h.name(),
            size(w as f64)
        ),
    };
    item(
        Bottleneck::ReceiverWindow,
        h.name(),
        "advertised window",
        Fig {
            value: w as f64,
            unit: "bytes",
            threshold: bdp,
        },
        src,
        text,
    )
}

fn window_advice(r: &RunResult, bdp: Option<f64>, window: Option<u64>) -> Vec<String> {
    if let (Some(b), Some(w)) = (bdp, window) {
        // a window of twice the BDP leaves room for the queueing a busy path adds to the
        // base RTT; only a window beyond that points away from the window itself
        if w as f64 >= 2.0 * b {
            return vec![
                format!(
                    "the window ({}) holds twice the bandwidth-delay product: the receiving \
                     application did not read fast enough; look at its CPU and its core",
                    size(w as f64)
                ),
                "`--discard` shows the rate without the receive copy (a sink, not what \
                 applications see)"
                    .into(),
            ];
        }
    }
    let want = bdp.map_or_else(|| window.map_or(4e6, |w| w as f64 * 4.0), |b| b * 2.0);
    let flag = flag_size(want);
    let mut out = vec![format!(
        "`-w {flag}`: a buffer of about twice the bandwidth-delay product{}",
        r.spec
            .rcvbuf_bytes
            .or(r.spec.window_bytes)
            .map_or(String::new(), |w| format!(
                " (the {} asked is too small)",
                size(w as f64)
            ))
    )];
    out.push(format!(
        "let autotuning reach it: `net.ipv4.tcp_rmem` (its third, maximum figure) and \
         `net.core.rmem_max` at least {} on the receiver",
        size(flag_bytes(want))
    ));
    out
}

fn flag_bytes(want: f64) -> f64 {
    let w = if want.is_finite() {
        want.clamp(65_536.0, (1u64 << 30) as f64)
    } else {
        65_536.0
    };
    (w as u64).next_power_of_two() as f64
}

/// Sender's buffer: sndbuf-limited for 15 % of the busy time or more (NDT).
pub(super) fn sender_buffer(r: &RunResult) -> Option<Finding> {
    let l = limited(r, |t| t.sndbuf_limited_us)?;
    let mut f = Finding::new(
        Bottleneck::SenderBuffer,
        ramp(l.share, BUFFER_LIMITED_PERCENT, 50.0),
        format!(
            "the sender's socket buffer was full {} of its busy time",
            pct(l.share)
        ),
    );
    f.evidence.push(share_item(
        Bottleneck::SenderBuffer,
        l,
        "sndbuf-limited share of busy time",
        "sndbuf",
    ));
    let facts = window_facts(r, l.flow);
    let bdp = facts.rtt_us.map(|rtt| facts.rate_bps * rtt / 1e6 / 8.0);
    let want = bdp
        .filter(|b| b.is_finite() && *b > 0.0)
        .map_or(4e6, |b| b * 2.0);
    f.advice = vec![
        format!(
            "`-w {}`: a larger send buffer (SO_SNDBUF) on the sender{}",
            flag_size(want),
            r.spec.window_bytes.map_or(String::new(), |w| format!(
                "; the {} asked is too small",
                size(w as f64)
            ))
        ),
        format!(
            "let autotuning grow it: `net.ipv4.tcp_wmem` (its maximum) and `net.core.wmem_max` \
             at least {}",
            size(flag_bytes(want))
        ),
    ];
    Some(f)
}
