//! TCP rules: the wire, the receiver's window, the sender's buffer (the kernel's
//! tcp_chrono shares of busy time), and loss, told apart from reordering by DSACK.

use super::rules::{
    item, ramp, Analysis, Fig, Finding, BUFFER_LIMITED_PERCENT, LOSS_RATE, MATHIS_SLACK,
    RETRANSMITS_PER_S, SPURIOUS_SHARE, SYMPTOM_SCORE, WIRE_EFFICIENCY,
};
use super::text::{flag_size, micros, pct, rate, size};
use super::view::{self, counter, percent, Host};
use super::{Bottleneck, EvidenceItem};
use crate::result::{StreamResult, TcpInfo};
use crate::spec::Flow;
use crate::RunResult;

/// Wire: goodput at 97 % of the wire model or more.
pub(super) fn wire(r: &RunResult) -> Option<Finding> {
    let w = &r.summary.wire;
    let eff = w.efficiency.filter(|e| e.is_finite() && *e > 0.0)?;
    let score = if eff >= WIRE_EFFICIENCY {
        0.85 + 0.15 * ((eff - WIRE_EFFICIENCY) / 0.02).clamp(0.0, 1.0)
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
            "{}: the sender was {kind}-limited {} of its busy time {} (limiting from {})",
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
    let rtt_us = senders()
        .filter_map(|t| t.min_rtt_us.or(t.rtt_us))
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
                    "window {} < BDP {}: at most {}",
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
    let want = bdp.map_or_else(|| window.map_or(4e6, |w| w as f64 * 4.0), |b| b * 2.0);
    let flag = flag_size(want);
    let mut out = vec![format!(
        "`-w {flag}`: a buffer of about twice the bandwidth-delay product{}",
        r.spec.window_bytes.map_or(String::new(), |w| format!(
            " (the {} asked is too small)",
            size(w as f64)
        ))
    )];
    out.push(format!(
        "let autotuning reach it: `net.ipv4.tcp_rmem` (its third, maximum figure) and \
         `net.core.rmem_max` at least {} on the receiver",
        size(flag_bytes(want))
    ));
    out.push(
        "if the window was already large: the receiving application did not read fast enough"
            .into(),
    );
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

/// Retransmits of one flow: all, those the receiver reported as duplicates, and where
/// the duplicates were counted.
struct FlowLoss {
    flow: Flow,
    retrans: u64,
    segs: u64,
    spurious: u64,
    spurious_source: &'static str,
    mss: Option<u64>,
    rtt_us: Option<f64>,
    streams: usize,
    goodput_bps: f64,
}

fn flow_loss(r: &RunResult, flow: Flow) -> Option<FlowLoss> {
    let infos: Vec<&TcpInfo> = view::streams_of(r, flow)
        .filter_map(|s| s.tcp_sender.as_ref())
        .collect();
    let retrans = view::sum_seen(infos.iter().map(|t| t.retransmits_total))?;
    let segs = view::sum_seen(infos.iter().map(|t| t.segs_out)).unwrap_or(0);
    let ext = Host::sending(flow)
        .evidence(r)
        .and_then(|e| e.tcp_ext.clone());
    let (spurious, spurious_source) = match view::sum_seen(infos.iter().map(|t| t.dsack_dups)) {
        Some(d) => (d, "TCP_INFO"),
        None => match counter(&ext, "TCPDSACKRecv").or_else(|| counter(&ext, "TCPDSACKUndo")) {
            Some(d) => (d, "TcpExt"),
            None => (0, ""),
        },
    };
    let rtts: Vec<f64> = infos
        .iter()
        .filter_map(|t| t.rtt_us.or(t.min_rtt_us))
        .map(|x| x as f64)
        .collect();
    let goodput: f64 = view::streams_of(r, flow)
        .map(|s| s.goodput_bps)
        .filter(|g| g.is_finite())
        .sum();
    Some(FlowLoss {
        flow,
        retrans,
        segs,
        spurious: spurious.min(retrans),
        spurious_source,
        mss: infos.iter().filter_map(|t| t.snd_mss).max(),
        rtt_us: (!rtts.is_empty()).then(|| rtts.iter().sum::<f64>() / rtts.len() as f64),
        streams: infos.len().max(1),
        goodput_bps: if goodput > 0.0 {
            goodput
        } else {
            r.summary.goodput_bps
        },
    })
}

/// Loss and reordering over every flow: a congestion finding for the worst flow, and a
/// note (and a weak candidate) where the retransmits were mostly spurious.
pub(super) fn loss(r: &RunResult, a: &mut Analysis) {
    let mut best: Option<Finding> = None;
    for &flow in view::flows(r) {
        let Some(l) = flow_loss(r, flow) else {
            continue;
        };
        reordering(r, &l, a);
        let f = congestion(r, &l);
        if best.as_ref().is_none_or(|b| f.score > b.score) {
            best = Some(f);
        }
    }
    a.add(best);
}

fn reordering(r: &RunResult, l: &FlowLoss, a: &mut Analysis) {
    let ext = Host::sending(l.flow)
        .evidence(r)
        .and_then(|e| e.tcp_ext.clone());
    let reorder = view::sum_seen([
        counter(&ext, "TCPSACKReorder"),
        counter(&ext, "TCPTSReorder"),
    ]);
    let dsack_moved = counter(&ext, "TCPDSACKRecv").unwrap_or(0) > 0;
    let mostly = l.retrans > 0 && l.spurious as f64 >= SPURIOUS_SHARE * l.retrans as f64;
    let seen_reorder = l.retrans > 0 && reorder.unwrap_or(0) > 0 && dsack_moved;
    if !(mostly || seen_reorder) {
        return;
    }
    let where_ = if view::same_host(r) {
        " (on one host, when the sender moves between cores)"
    } else {
        ""
    };
    a.note(format!(
        "{} retransmits, {} reported as duplicates by the receiver (DSACK, {}): the path \
         reordered segments{where_}; they are not loss",
        l.retrans,
        l.spurious,
        if l.spurious_source.is_empty() {
            "TcpExt"
        } else {
            l.spurious_source
        }
    ));
    let mut f = Finding::new(
        Bottleneck::Reordering,
        SYMPTOM_SCORE,
        format!("{} of {} retransmits were spurious", l.spurious, l.retrans),
    );
    let h = Host::sending(l.flow);
    f.evidence.push(item(
        Bottleneck::Reordering,
        h.name(),
        "spurious share of retransmits",
        Fig {
            value: percent(l.spurious as f64, l.retrans as f64).unwrap_or(0.0),
            unit: "percent",
            threshold: Some(SPURIOUS_SHARE * 100.0),
        },
        l.spurious_source,
        format!(
            "{}: {} of {} retransmits reported as duplicates (spurious from {})",
            h.name(),
            l.spurious,
            l.retrans,
            pct(SPURIOUS_SHARE * 100.0)
        ),
    ));
    f.advice = vec![
        "reordering costs little with DSACK undo; pin the sending thread (`taskset`) if it matters"
            .into(),
    ];
    a.add(Some(f));
}

/// The Mathis et al. bound for one stream: MSS / (RTT · √p) · √(3/2), bit/s.
pub(super) fn mathis_bps(mss: f64, rtt_us: f64, p: f64) -> Option<f64> {
    let b = mss * 8.0 / (rtt_us / 1e6 * p.sqrt()) * 1.5f64.sqrt();
    (b.is_finite() && b > 0.0).then_some(b)
}

fn congestion(r: &RunResult, l: &FlowLoss) -> Finding {
    let real = l.retrans - l.spurious;
    let p = if l.segs > 0 {
        real as f64 / l.segs as f64
    } else {
        0.0
    };
    let secs = if r.summary.sender_seconds > 0.0 {
        r.summary.sender_seconds
    } else {
        r.summary.seconds
    };
    let per_s = if secs > 0.0 && secs.is_finite() {
        real as f64 / secs
    } else {
        0.0
    };
    let mut score = if p >= LOSS_RATE {
        0.7 + 0.3 * ((p / LOSS_RATE).log10() / 2.0).clamp(0.0, 1.0)
    } else if per_s >= RETRANSMITS_PER_S {
        0.6
    } else {
        0.0
    };
    let bound = l
        .mss
        .zip(l.rtt_us)
        .and_then(|(m, rtt)| mathis_bps(m as f64, rtt, p))
        .map(|b| b * l.streams as f64);
    if bound.is_some_and(|b| b > MATHIS_SLACK * l.goodput_bps) {
        score = score.min(SYMPTOM_SCORE);
    }
    if r.summary
        .wire
        .efficiency
        .is_some_and(|e| e >= WIRE_EFFICIENCY)
    {
        score = score.min(SYMPTOM_SCORE);
    }
    let h = Host::sending(l.flow);
    let mut f = Finding::new(
        Bottleneck::Congestion,
        score,
        format!(
            "{real} real retransmits, a loss rate of {}{}",
            pct(p * 100.0),
            bound.map_or(String::new(), |b| format!(
                "; Mathis bound {} beside goodput {}",
                rate(b),
                rate(l.goodput_bps)
            ))
        ),
    );
    f.evidence.push(item(
        Bottleneck::Congestion,
        h.name(),
        "real loss rate",
        Fig {
            value: p * 100.0,
            unit: "percent",
            threshold: Some(LOSS_RATE * 100.0),
        },
        "TCP_INFO",
        format!(
            "{}: {real} real retransmits ({} less {} spurious) of {} segments = {} \
             ({:.1}/s; loss from {} or {RETRANSMITS_PER_S}/s)",
            h.name(),
            l.retrans,
            l.spurious,
            l.segs,
            pct(p * 100.0),
            per_s,
            pct(LOSS_RATE * 100.0)
        ),
    ));
    if let (Some(b), Some(m), Some(rtt)) = (bound, l.mss, l.rtt_us) {
        f.evidence.push(mathis_item(h, b, m, rtt, p, l));
    }
    let recovery = recovery_items(r, h);
    // lost retransmits and timeouts are loss the sender felt: they add to a finding
    // that already stands, never make one
    if !recovery.is_empty() && f.score >= 0.7 {
        f.score = (f.score + 0.05).min(1.0);
    }
    f.evidence.extend(recovery);
    f.advice = vec![
        "find the link or queue that drops: interface and qdisc drop counters along the path; \
         UDP `--find-max` measures the rate it carries without loss"
            .into(),
        "`-C bbr`: a congestion control that does not take each loss as congestion".into(),
        format!(
            "`-P {}`: streams back off one at a time",
            (l.streams * 4).min(128)
        ),
    ];
    f
}

fn mathis_item(h: Host, bound: f64, mss: u64, rtt: f64, p: f64, l: &FlowLoss) -> EvidenceItem {
    let per = if l.streams > 1 {
        format!(" × {} streams", l.streams)
    } else {
        String::new()
    };
    item(
        Bottleneck::Congestion,
        h.name(),
        "Mathis bound",
        Fig {
            value: bound,
            unit: "bit/s",
            threshold: Some(l.goodput_bps),
        },
        "Mathis et al. 1997",
        format!(
            "{}: Mathis bound MSS/(RTT·√p)·√1.5 = {mss} B/({}·√{p:.2e})·1.22{per} = {} against \
             goodput {}",
            h.name(),
            micros(rtt),
            rate(bound),
            rate(l.goodput_bps)
        ),
    )
}

/// The sending host's loss-recovery counters that moved: lost retransmits and timeouts.
fn recovery_items(r: &RunResult, h: Host) -> Vec<EvidenceItem> {
    let ext = h.evidence(r).and_then(|e| e.tcp_ext.clone());
    ["TCPLostRetransmit", "TCPTimeouts"]
        .iter()
        .filter_map(|name| counter(&ext, name).filter(|n| *n > 0).map(|n| (*name, n)))
        .map(|(name, n)| {
            item(
                Bottleneck::Congestion,
                h.name(),
                name,
                Fig {
                    value: n as f64,
                    unit: "count",
                    threshold: None,
                },
                "TcpExt",
                format!("{}: TcpExt {name} {n} (host-wide)", h.name()),
            )
        })
        .collect()
}
