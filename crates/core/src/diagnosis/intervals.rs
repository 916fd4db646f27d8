//! The bottleneck of each interval, from the flow's TCP samples or UDP loss over that
//! interval, marked where it changes.

use super::rules::{diagnose, BUFFER_LIMITED_PERCENT, SUPPORT_SCORE, UDP_LOSS_PERCENT};
use super::view::percent;
use super::{Bottleneck, Diagnosis};
use crate::evidence::IntervalTcp;
use crate::spec::{Flow, Protocol};
use crate::RunResult;

/// Marks each interval's bottleneck where it differs from the previous interval of the
/// same flow (and on each flow's first counted interval); omitted intervals get none.
pub fn interval_bottlenecks(r: &mut RunResult) {
    let run = diagnose(r);
    let fallback = fallback(&run);
    let udp_class = udp_class(&run);
    let run_loss = run
        .candidates
        .iter()
        // loss that mattered to the run (the class had support), not a stray retransmit
        .any(|c| c.bottleneck == Bottleneck::Congestion && c.score >= SUPPORT_SCORE);
    let protocol = r.spec.protocol;
    let mut last: Vec<(Flow, Bottleneck)> = Vec::new();
    for iv in r.intervals.iter_mut() {
        // a stream's own interval is a share of its flow's: the flow's carries the mark
        if iv.omitted || iv.stream.is_some() {
            iv.bottleneck = None;
            continue;
        }
        let class = match protocol {
            Protocol::Tcp => iv
                .tcp
                .as_ref()
                .and_then(|t| tcp_class(t, run_loss))
                .unwrap_or(fallback),
            Protocol::Udp => {
                if iv.loss_percent.is_some_and(|l| l > UDP_LOSS_PERCENT) {
                    udp_class
                } else {
                    fallback
                }
            }
        };
        let prev = last.iter_mut().find(|(f, _)| *f == iv.flow);
        iv.bottleneck = match prev {
            Some((_, p)) if *p == class => None,
            Some((_, p)) => {
                *p = class;
                Some(class)
            }
            None => {
                last.push((iv.flow, class));
                Some(class)
            }
        };
    }
}

/// What an interval without a limit of its own carries: the run's bottleneck when that is
/// one interval samples cannot measure (CPU, the wire, pacing), else unknown.
fn fallback(run: &Diagnosis) -> Bottleneck {
    match run.bottleneck {
        Bottleneck::Wire
        | Bottleneck::SenderCpu
        | Bottleneck::ReceiverCpu
        | Bottleneck::HostCpu
        | Bottleneck::TurnTaking
        | Bottleneck::ReceiverSoftirq
        | Bottleneck::AppPacing => run.bottleneck,
        _ => Bottleneck::Unknown,
    }
}

/// Where the run lost its datagrams; the path when the run could not tell.
fn udp_class(run: &Diagnosis) -> Bottleneck {
    run.candidates
        .iter()
        .filter(|c| c.score >= SUPPORT_SCORE)
        .map(|c| c.bottleneck)
        .find(|b| {
            matches!(
                b,
                Bottleneck::UdpReceiverBuffer
                    | Bottleneck::UdpReceiverHost
                    | Bottleneck::UdpSenderQueue
                    | Bottleneck::UdpPath
            )
        })
        .unwrap_or(Bottleneck::UdpPath)
}

/// An interval's own limit: the receiver's window or the sender's buffer for 15 % of the
/// busy time, else congestion when it had real retransmits and the run showed real loss.
fn tcp_class(t: &IntervalTcp, run_loss: bool) -> Option<Bottleneck> {
    let share = |part: Option<u64>| {
        t.busy_us
            .zip(part)
            .and_then(|(b, p)| percent(p as f64, b as f64))
            .unwrap_or(0.0)
    };
    let (rwnd, sndbuf) = (share(t.rwnd_limited_us), share(t.sndbuf_limited_us));
    if rwnd.max(sndbuf) >= BUFFER_LIMITED_PERCENT {
        return Some(if rwnd >= sndbuf {
            Bottleneck::ReceiverWindow
        } else {
            Bottleneck::SenderBuffer
        });
    }
    let real = t
        .retransmits
        .map(|n| n.saturating_sub(t.dsack_dups.unwrap_or(0)));
    (run_loss && real.is_some_and(|n| n > 0)).then_some(Bottleneck::Congestion)
}
