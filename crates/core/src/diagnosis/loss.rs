//! Loss: retransmits told apart into real loss and spurious ones (DSACK), the real loss
//! rate held to NDT's thresholds and the Mathis bound, and reordering as a note.

use super::rules::{
    item, Analysis, Fig, Finding, HEAVY_LOSS, LOSS_RATE, MATHIS_SLACK, NEAR_WIRE_EFFICIENCY,
    NOT_LOSS_BOUND, RETRANSMITS_PER_S, SPURIOUS_SHARE, SYMPTOM_SCORE, WIRE_EFFICIENCY,
};
use super::text::{micros, pct, rate};
use super::view::{self, counter, percent, Host};
use super::{Bottleneck, EvidenceItem};
use crate::result::TcpInfo;
use crate::spec::Flow;
use crate::RunResult;

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
    /// The senders' congestion control, when TCP_INFO names it.
    cc: Option<String>,
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
        cc: infos.iter().find_map(|t| t.congestion.clone()),
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
        let mut f = congestion(r, &l);
        not_loss_bound(&l, &mut f, a);
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
    let one_host = view::same_host(r);
    // on one host a stream's segments leave from two cores, the sending thread's and the one
    // that processes the ACKs releasing more, through two backlog queues: measured over
    // loopback, a sender and receiver pinned to two cores still saw about 300 reorderings
    // (TcpExt TCPSACKReorder) and 960 spurious retransmits in 3 s
    let where_ = if one_host {
        " (on one host: the sending thread's core and the core that processes the ACKs both \
         send, each through its own queue)"
    } else {
        ""
    };
    a.note(format!(
        "{} retransmits, {} reported as duplicates by the receiver (DSACK, {}): segments \
         arrived out of order{where_}; they are not loss",
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
    f.advice = vec![if one_host {
        "reordering costs little with DSACK undo; on one host it comes from the stack, not a path"
            .into()
    } else {
        "reordering costs little with DSACK undo; a path that spreads one flow over links \
         (ECMP, a bond, a multipath tunnel) reorders it"
            .into()
    }];
    a.add(Some(f));
}

/// A sender whose congestion control does not take loss as congestion (bbr) and that moved
/// well past the Mathis bound: the loss was real but did not set its rate, so it is a
/// symptom, said in a note.
fn not_loss_bound(l: &FlowLoss, f: &mut Finding, a: &mut Analysis) {
    let Some(cc) = l.cc.as_deref().filter(|c| c.starts_with("bbr")) else {
        return;
    };
    let real = l.retrans.saturating_sub(l.spurious);
    let p = if l.segs > 0 {
        real as f64 / l.segs as f64
    } else {
        0.0
    };
    let Some(bound) = l
        .mss
        .zip(l.rtt_us)
        .and_then(|(m, rtt)| mathis_bps(m as f64, rtt, p))
        .map(|b| b * l.streams as f64)
    else {
        return;
    };
    if f.score < SYMPTOM_SCORE || l.goodput_bps < NOT_LOSS_BOUND * bound {
        return;
    }
    f.score = SYMPTOM_SCORE;
    a.note(format!(
        "{}: {} real loss, but {cc} does not take loss as congestion: it moved {} against the \
         {} a loss-based sender would (Mathis bound), so the loss did not set the rate",
        l.flow.name(),
        pct(p * 100.0),
        rate(l.goodput_bps),
        rate(bound)
    ));
}

/// The Mathis et al. bound for one stream: MSS / (RTT · √p) · √(3/2), bit/s.
pub(super) fn mathis_bps(mss: f64, rtt_us: f64, p: f64) -> Option<f64> {
    let b = mss * 8.0 / (rtt_us / 1e6 * p.sqrt()) * 1.5f64.sqrt();
    (b.is_finite() && b > 0.0).then_some(b)
}

/// The real loss of a flow: its rate per segment and per second, the Mathis bound for
/// it over the flow's streams, and the score they give.
struct RealLoss {
    real: u64,
    p: f64,
    per_s: f64,
    bound: Option<f64>,
    score: f64,
}

fn real_loss(r: &RunResult, l: &FlowLoss) -> RealLoss {
    let real = l.retrans.saturating_sub(l.spurious);
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
    // loss too rare to hold the rate, or a rate at the wire already: not the limit
    // (only for light loss: at a percent or more, loss holds any sender back, whatever a
    // tiny RTT makes of the bound)
    let rare = p < HEAVY_LOSS && bound.is_some_and(|b| b > MATHIS_SLACK * l.goodput_bps);
    // at (or within a few percent of) the wire, light loss is how a loss-based sender
    // finds the link's rate, not what holds it below it
    let at_wire = r
        .summary
        .wire
        .efficiency
        .is_some_and(|e| e >= WIRE_EFFICIENCY || (e >= NEAR_WIRE_EFFICIENCY && p < HEAVY_LOSS));
    if rare || at_wire {
        score = score.min(SYMPTOM_SCORE);
    }
    RealLoss {
        real,
        p,
        per_s,
        bound,
        score,
    }
}

fn congestion(r: &RunResult, l: &FlowLoss) -> Finding {
    let RealLoss {
        real,
        p,
        per_s,
        bound,
        score,
    } = real_loss(r, l);
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
