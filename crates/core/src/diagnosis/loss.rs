//! Loss: retransmits told apart into real loss and spurious ones, the real loss rate held
//! to NDT's thresholds and the Mathis bound, and reordering: a note where it cost little,
//! the verdict where the sender took a path's reordering for loss.
//!
//! Spurious retransmits are counted two ways, and the larger count is kept: the duplicates
//! the receiver reported (DSACK), and the segments' own account, when both ends' TCP_INFO
//! is known: the segments the senders sent that never reached the receivers are the real
//! loss, and the retransmits beyond them arrived twice. DSACK alone misses most of them on
//! a reordering path (a receiver reports one duplicate block an acknowledgement).

use super::rules::{
    item, Analysis, Fig, Finding, HEAVY_LOSS, LOSS_RATE, MATHIS_SLACK, NEAR_WIRE_EFFICIENCY,
    NOT_LOSS_BOUND, RETRANSMITS_PER_S, SPURIOUS_SHARE, SUPPORT_SCORE, SYMPTOM_SCORE,
    WIRE_EFFICIENCY,
};
use super::text::{micros, pct, rate};
use super::view::{self, counter, percent, Host};
use super::{Bottleneck, EvidenceItem};
use crate::result::TcpInfo;
use crate::spec::Flow;
use crate::text::count;
use crate::RunResult;

/// Retransmits of one flow: all, those the receiver reported as duplicates, and where
/// the duplicates were counted.
struct FlowLoss {
    flow: Flow,
    retrans: u64,
    segs: u64,
    spurious: u64,
    spurious_source: &'static str,
    /// Data segments the senders sent that the receivers never counted, when both ends'
    /// TCP_INFO is known.
    never_arrived: Option<u64>,
    /// The senders' reordering evidence: times they saw reordering (tcpi_reord_seen) and
    /// the largest reordering degree they came to (tcpi_reordering, 3 at the start).
    reord_seen: Option<u64>,
    reordering: Option<u64>,
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
    let (mut spurious, mut spurious_source) =
        match view::sum_seen(infos.iter().map(|t| t.dsack_dups)) {
            Some(d) => (d, "TCP_INFO"),
            None => match counter(&ext, "TCPDSACKRecv").or_else(|| counter(&ext, "TCPDSACKUndo")) {
                Some(d) => (d, "TcpExt"),
                None => (0, ""),
            },
        };
    let never_arrived = never_arrived(r, flow);
    if let Some(twice) = never_arrived.map(|n| retrans.saturating_sub(n)) {
        if twice > spurious {
            (spurious, spurious_source) = (twice, ACCOUNT_SOURCE);
        }
    }
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
        never_arrived,
        reord_seen: view::sum_seen(infos.iter().map(|t| t.reord_seen)),
        reordering: infos.iter().filter_map(|t| t.reordering).max(),
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

/// Where a spurious count from the segments' own account comes from.
const ACCOUNT_SOURCE: &str = "TCP_INFO of both ends";

/// Data segments a flow's senders sent (retransmits included) less those its receivers
/// received (duplicates included): the segments the path lost. None unless every stream
/// has both counts. The sender reads its count after the receiver closed, the receiver at
/// its end of data, so only retransmits still in flight then are counted lost.
fn never_arrived(r: &RunResult, flow: Flow) -> Option<u64> {
    let (mut out, mut inn) = (0u64, 0u64);
    for s in view::streams_of(r, flow) {
        out = out.saturating_add(s.tcp_sender.as_ref()?.data_segs_out?);
        inn = inn.saturating_add(s.tcp_receiver.as_ref()?.data_segs_in?);
    }
    (out > 0).then(|| out.saturating_sub(inn))
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
    a.note(reordering_note(l, one_host));
    let h = Host::sending(l.flow);
    let score = reordering_score(r, l, mostly, one_host);
    let mut f = Finding::new(
        Bottleneck::Reordering,
        score,
        format!(
            "{} of {} retransmits were spurious{}",
            l.spurious,
            l.retrans,
            l.never_arrived.map_or(String::new(), |n| format!(
                " (the path lost {})",
                if n == 0 {
                    "none".to_string()
                } else {
                    count(n, "segment")
                }
            ))
        ),
    );
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
            "{}: {} of {} retransmits {} (spurious from {})",
            h.name(),
            l.spurious,
            l.retrans,
            if l.spurious_source == ACCOUNT_SOURCE {
                format!(
                    "reached the receiver twice: it received all but {} of the segments sent",
                    l.never_arrived.unwrap_or(0)
                )
            } else {
                "reported as duplicates".into()
            },
            pct(SPURIOUS_SHARE * 100.0)
        ),
    ));
    if score >= SUPPORT_SCORE {
        f.evidence.push(reordering_seen_item(h, l, reorder));
    }
    f.advice = reordering_advice(l, one_host);
    a.add(Some(f));
}

fn reordering_note(l: &FlowLoss, one_host: bool) -> String {
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
    let how = if l.spurious_source == ACCOUNT_SOURCE {
        let but = match l.never_arrived.unwrap_or(0) {
            0 => String::new(),
            n => format!(" but the {} the path lost", count(n, "segment")),
        };
        format!(
            "{} of them spurious, arriving twice (the receiver received every segment \
             sent{but})",
            l.spurious
        )
    } else {
        format!(
            "{} reported as duplicates by the receiver (DSACK, {})",
            l.spurious,
            if l.spurious_source.is_empty() {
                "TcpExt"
            } else {
                l.spurious_source
            }
        )
    };
    format!(
        "{} retransmits, {how}: segments arrived out of order{where_}; they are not loss",
        l.retrans
    )
}

/// Reordering is the verdict where the retransmits it caused would hold the rate as loss
/// (a spurious rate per segment of [`LOSS_RATE`] or more, not too rare for the Mathis
/// bound: the congestion rule's test, on the retransmits taken for loss), most were
/// spurious, the sender saw reordering, the rate is below the wire and the ends are on two
/// hosts (on one host it is the stack's own); otherwise a candidate.
fn reordering_score(r: &RunResult, l: &FlowLoss, mostly: bool, one_host: bool) -> f64 {
    // the sender saw reordering at least as often as it retransmitted for nothing, or
    // came to expect more than it starts with: a few sightings beside many spurious
    // retransmits (cores of one busy kernel reordering a flow) are not a reordering path
    let seen = l.reord_seen.is_some_and(|n| n > 0 && n >= l.spurious)
        || l.reordering.is_some_and(|d| d > DEFAULT_REORDERING);
    let p = if l.segs > 0 {
        l.spurious as f64 / l.segs as f64
    } else {
        0.0
    };
    let at_wire = r
        .summary
        .wire
        .efficiency
        .is_some_and(|e| e >= WIRE_EFFICIENCY);
    if one_host || !mostly || !seen || at_wire || p < LOSS_RATE || too_rare(l, p) {
        return SYMPTOM_SCORE;
    }
    0.7 + 0.3 * ((p / LOSS_RATE).log10() / 2.0).clamp(0.0, 1.0)
}

/// The degree of reordering a Linux sender assumes before it has seen any
/// (`net.ipv4.tcp_reordering`).
const DEFAULT_REORDERING: u64 = 3;

fn reordering_seen_item(h: Host, l: &FlowLoss, reorder: Option<u64>) -> EvidenceItem {
    let mut seen = Vec::new();
    if let Some(n) = l.reord_seen {
        seen.push(format!("saw reordering {n} times (tcpi_reord_seen)"));
    }
    if let Some(d) = l.reordering {
        seen.push(format!(
            "came to a reordering degree of {d} segments (tcpi_reordering, {DEFAULT_REORDERING} at the start)"
        ));
    }
    if let Some(n) = reorder {
        seen.push(format!(
            "TcpExt TCPSACKReorder + TCPTSReorder {n} (host-wide)"
        ));
    }
    item(
        Bottleneck::Reordering,
        h.name(),
        "reordering seen by the sender",
        Fig {
            value: l.reord_seen.or(reorder).unwrap_or(0) as f64,
            unit: "count",
            threshold: None,
        },
        "TCP_INFO",
        format!("{}: the senders {}", h.name(), seen.join("; ")),
    )
}

fn reordering_advice(l: &FlowLoss, one_host: bool) -> Vec<String> {
    if one_host {
        return vec![
            "reordering costs little with DSACK undo; on one host it comes from the stack, not a path"
                .into(),
        ];
    }
    let mut v = vec![
        "find what reorders the flow: a path that spreads one flow over links (ECMP, a bond, a \
         multipath tunnel) or a device that queues by packet rather than by flow"
            .into(),
        "let the sender wait longer before it takes a gap for loss: RACK \
         (`net.ipv4.tcp_recovery=1`) and a higher `net.ipv4.tcp_reordering` on the sender"
            .into(),
    ];
    if l.cc.as_deref().is_none_or(|c| !c.starts_with("bbr")) {
        v.push("`-C bbr`: its rate does not fall with each loss it thinks it saw".into());
    }
    v
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

/// The Mathis bound of a flow at a loss rate `p`, over its streams.
fn flow_bound(l: &FlowLoss, p: f64) -> Option<f64> {
    l.mss
        .zip(l.rtt_us)
        .and_then(|(m, rtt)| mathis_bps(m as f64, rtt, p))
        .map(|b| b * l.streams as f64)
}

/// Loss (or retransmits taken for it) too rare to hold the rate: light, and with a Mathis
/// bound well above the goodput (at a percent or more, loss holds any sender back, whatever
/// a tiny RTT makes of the bound).
fn too_rare(l: &FlowLoss, p: f64) -> bool {
    p < HEAVY_LOSS && flow_bound(l, p).is_some_and(|b| b > MATHIS_SLACK * l.goodput_bps)
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
    let bound = flow_bound(l, p);
    let rare = too_rare(l, p);
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
