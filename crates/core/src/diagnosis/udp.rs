//! UDP rules: where lost datagrams were lost (the receiving socket, the receiving host
//! below the socket, the sender's queues, or the path), and pacing at the asked rate.

use super::rules::{
    item, ramp, Analysis, Fig, Finding, ENOBUFS_PERCENT, PACED_SHARE, PACED_WITH_LOSS_SCORE,
    UDP_LOCATION_SHARE, UDP_LOSS_PERCENT,
};
use super::text::{flag_size, pct, rate};
use super::view::{self, counter, sum_seen, Host};
use super::{Bottleneck, EvidenceItem};
use crate::result::UdpSummary;
use crate::spec::Flow;
use crate::RunResult;

/// Drops counted at each place, None where the place could not be seen.
#[derive(Debug, Default)]
struct Drops {
    socket: Option<u64>,
    below_socket: Option<u64>,
    below_parts: Vec<(&'static str, u64)>,
    enobufs: u64,
    sender_queue: Option<u64>,
}

fn receiving_counts(r: &RunResult, u: &UdpSummary, d: &mut Drops) {
    let hosts = view::hosts(r, false);
    let rcvbuf = u.receiver_rcvbuf_errors.or_else(|| {
        sum_seen(
            hosts
                .iter()
                .map(|h| h.evidence(r).and_then(|e| counter(&e.udp, "RcvbufErrors"))),
        )
    });
    d.socket = match (u.socket_drops, rcvbuf) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).max(b.unwrap_or(0))),
    };
    let mut below = Vec::new();
    for h in hosts {
        let Some(e) = h.evidence(r) else { continue };
        if let Some(sn) = &e.softnet {
            below.push(("softnet backlog", sn.iter().map(|c| c.dropped).sum()));
        }
        if !e.nic.is_empty() {
            below.push(("NIC", e.nic.iter().map(|n| n.rx_drops()).sum()));
        }
        if let Some(n) = counter(&e.ip, "InDiscards") {
            below.push(("Ip InDiscards", n));
        }
    }
    d.below_socket = sum_seen(below.iter().map(|(_, n)| Some(*n)));
    d.below_parts = below;
}

fn drops(r: &RunResult, u: &UdpSummary) -> Drops {
    let mut d = Drops {
        enobufs: u.sender_enobufs,
        ..Default::default()
    };
    receiving_counts(r, u, &mut d);
    // a datagram the qdisc drops is counted by both Udp SndbufErrors and Ip OutDiscards:
    // take the larger per host, never their sum
    d.sender_queue = sum_seen(view::hosts(r, true).into_iter().map(|h| {
        let e = h.evidence(r);
        let a = e.and_then(|e| counter(&e.udp, "SndbufErrors"));
        let b = e.and_then(|e| counter(&e.ip, "OutDiscards"));
        match (a, b) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, y) => x.or(y),
        }
    }));
    d
}

/// Where UDP datagrams were lost, when more than 0.1 % were; and sends the sender's
/// kernel refused (ENOBUFS), which are never sent, so never among the lost.
pub(super) fn loss(r: &RunResult, a: &mut Analysis) {
    let Some(u) = &r.summary.udp else { return };
    let d = drops(r, u);
    if d.enobufs > 0 {
        a.add(Some(refused(r, u, &d)));
    }
    if u.loss_percent.is_nan() || u.loss_percent <= UDP_LOSS_PERCENT || u.lost == 0 {
        return;
    }
    let lost = u.lost as f64;
    let lab = r.summary.wire.is_lab();
    // in a lab the sending host's egress qdisc is the emulated link: its drops are path
    // loss unless the application itself was refused (ENOBUFS)
    let queue_is_path = lab && d.enobufs == 0;
    let first = view::flows(r)
        .first()
        .copied()
        .unwrap_or(Flow::ClientToServer);
    let (rx, tx) = (Host::receiving(first), Host::sending(first));
    if let Some(n) = d.socket {
        a.add(Some(receiver_buffer(r, u, n, rx)));
    }
    if let Some(n) = d.below_socket {
        a.add(Some(receiver_host(r, u, n, &d, rx)));
    }
    if d.sender_queue.unwrap_or(0) > 0 && !queue_is_path {
        a.add(Some(sender_queue(r, u, &d, tx)));
    }
    let accounted = d.socket.unwrap_or(0)
        + d.below_socket.unwrap_or(0)
        + if queue_is_path {
            0
        } else {
            d.sender_queue.unwrap_or(0)
        };
    let unaccounted = u.lost.saturating_sub(accounted);
    let receiver_seen = d.socket.is_some() || d.below_socket.is_some();
    let mut f = Finding::new(
        Bottleneck::UdpPath,
        ramp(unaccounted as f64 / lost, UDP_LOCATION_SHARE, 1.0),
        format!(
            "{} of the datagrams were lost, {} of them on the path",
            pct(u.loss_percent),
            pct(unaccounted as f64 / lost * 100.0)
        ),
    );
    if !receiver_seen {
        f.score = f.score.min(0.6);
    }
    if queue_is_path && d.sender_queue.unwrap_or(0) > 0 {
        f.evidence
            .push(lab_queue_item(tx, d.sender_queue.unwrap_or(0)));
    }
    f.evidence.push(path_item(u, unaccounted, receiver_seen));
    f.advice = vec![
        format!("lower the rate: `-b {}`", flag_rate(r, u)),
        "`--find-max`: the highest rate the path carries within a loss limit".into(),
        "find the link that drops: interface and qdisc counters along the path".into(),
    ];
    a.add(Some(f));
}

/// A per-stream rate a little under what arrived, for `-b`.
fn flag_rate(r: &RunResult, u: &UdpSummary) -> String {
    let streams = (r.spec.parallel.max(1) as usize * view::flows(r).len()) as f64;
    let per = r.summary.goodput_bps / streams * 0.9;
    let per = if per.is_finite() && per > 0.0 {
        per
    } else {
        u.target_bps.unwrap_or(1e6) / 2.0
    };
    let (v, s) = if per >= 1e9 {
        (per / 1e9, "G")
    } else if per >= 1e6 {
        (per / 1e6, "M")
    } else {
        (per / 1e3, "K")
    };
    format!("{}{s}", (v * 10.0).floor() / 10.0)
}

fn share_text(n: u64, u: &UdpSummary) -> String {
    format!(
        "{n} of {} lost datagrams ({})",
        u.lost,
        pct(n as f64 / u.lost.max(1) as f64 * 100.0)
    )
}

fn location_item(
    b: Bottleneck,
    side: &str,
    what: &str,
    n: u64,
    u: &UdpSummary,
    source: &str,
    text: String,
) -> EvidenceItem {
    item(
        b,
        side,
        what,
        Fig {
            value: n as f64 / u.lost.max(1) as f64 * 100.0,
            unit: "percent",
            threshold: Some(UDP_LOCATION_SHARE * 100.0),
        },
        source,
        text,
    )
}

fn receiver_buffer(r: &RunResult, u: &UdpSummary, n: u64, h: Host) -> Finding {
    let share = n as f64 / u.lost as f64;
    let mut f = Finding::new(
        Bottleneck::UdpReceiverBuffer,
        ramp(share, UDP_LOCATION_SHARE, 1.0),
        format!(
            "{} of the datagrams were lost, {} of them in the receiving socket's buffer",
            pct(u.loss_percent),
            pct(share.min(1.0) * 100.0)
        ),
    );
    f.evidence.push(location_item(
        Bottleneck::UdpReceiverBuffer,
        h.name(),
        "dropped in the receiving socket's buffer",
        n,
        u,
        "SO_RXQ_OVFL, Udp RcvbufErrors",
        format!(
            "{}: {} overflowed the receiving socket's buffer (the place from {} of the loss)",
            h.name(),
            share_text(n, u),
            pct(UDP_LOCATION_SHARE * 100.0)
        ),
    ));
    let want = flag_size(r.spec.window_bytes.map_or(4e6, |w| w as f64 * 4.0));
    f.advice = vec![
        format!("`-w {want}`: a larger receive buffer"),
        format!("raise `net.core.rmem_max` (the ceiling for `-w`) and `net.core.rmem_default` to at least {want}"),
        format!("or a lower rate: `-b {}`", flag_rate(r, u)),
    ];
    f
}

fn receiver_host(r: &RunResult, u: &UdpSummary, n: u64, d: &Drops, h: Host) -> Finding {
    let share = n as f64 / u.lost as f64;
    let parts: Vec<String> = d
        .below_parts
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let mut f = Finding::new(
        Bottleneck::UdpReceiverHost,
        ramp(share, UDP_LOCATION_SHARE, 1.0),
        format!(
            "{} of the datagrams were lost, {} of them in the receiving host below the socket",
            pct(u.loss_percent),
            pct(share.min(1.0) * 100.0)
        ),
    );
    f.evidence.push(location_item(
        Bottleneck::UdpReceiverHost,
        h.name(),
        "dropped below the socket",
        n,
        u,
        "softnet_stat, NIC, Ip",
        format!(
            "{}: {} dropped below the socket: {} (the place from {} of the loss)",
            h.name(),
            n,
            parts.join(", "),
            pct(UDP_LOCATION_SHARE * 100.0)
        ),
    ));
    let iface = h
        .env(r)
        .interfaces
        .first()
        .map_or("IFACE".to_string(), |i| i.name.clone());
    f.advice = vec![
        format!("larger NIC receive rings: `ethtool -G {iface} rx 4096`"),
        "a longer per-core backlog: `net.core.netdev_max_backlog=10000`".into(),
        "spread receive interrupts over cores (RSS, `/proc/irq/N/smp_affinity`, RPS `rps_cpus`)"
            .into(),
    ];
    f
}

/// Datagrams the sending host's queues dropped after the send succeeded (the kernel
/// counts them as Udp SndbufErrors or Ip OutDiscards; they are among the lost).
fn sender_queue(r: &RunResult, u: &UdpSummary, d: &Drops, h: Host) -> Finding {
    let n = d.sender_queue.unwrap_or(0);
    let share = n as f64 / u.lost as f64;
    let mut f = Finding::new(
        Bottleneck::UdpSenderQueue,
        ramp(share, UDP_LOCATION_SHARE, 1.0),
        format!(
            "{} of the datagrams were lost, {} of them in the sending host's queues",
            pct(u.loss_percent),
            pct(share.min(1.0) * 100.0)
        ),
    );
    f.evidence.push(location_item(
        Bottleneck::UdpSenderQueue,
        h.name(),
        "dropped in the sender's queues",
        n,
        u,
        "Udp SndbufErrors, Ip OutDiscards",
        format!(
            "{}: {} dropped by the sending host's queues (the larger of Udp SndbufErrors and Ip OutDiscards) \
             (the place from {} of the loss)",
            h.name(),
            share_text(n, u),
            pct(UDP_LOCATION_SHARE * 100.0)
        ),
    ));
    f.advice = queue_advice(r, u, h);
    f
}

fn queue_advice(r: &RunResult, u: &UdpSummary, h: Host) -> Vec<String> {
    let iface = h
        .env(r)
        .interfaces
        .first()
        .map_or("IFACE".to_string(), |i| i.name.clone());
    vec![
        format!("lower the rate: `-b {}`", flag_rate(r, u)),
        format!("a longer device queue: `ip link set {iface} txqueuelen 10000`"),
        "a larger send buffer: `-w 4M` (SO_SNDBUF)".into(),
    ]
}

/// Sends refused with ENOBUFS: the sending host's queue was full and the datagram was
/// never sent, so the rate fell short of what was asked without any loss.
fn refused(r: &RunResult, u: &UdpSummary, d: &Drops) -> Finding {
    let first = view::flows(r)
        .first()
        .copied()
        .unwrap_or(Flow::ClientToServer);
    let h = Host::sending(first);
    let attempts = u.packets.saturating_add(d.enobufs);
    let share = d.enobufs as f64 / attempts.max(1) as f64 * 100.0;
    let mut f = Finding::new(
        Bottleneck::UdpSenderQueue,
        ramp(share, ENOBUFS_PERCENT, 10.0),
        format!(
            "the sending host refused {} of the sends (ENOBUFS): its queue was full",
            pct(share)
        ),
    );
    f.evidence.push(item(
        Bottleneck::UdpSenderQueue,
        h.name(),
        "sends refused with ENOBUFS",
        Fig {
            value: share,
            unit: "percent",
            threshold: Some(ENOBUFS_PERCENT),
        },
        "ENOBUFS",
        format!(
            "{}: {} of {attempts} sends refused with ENOBUFS = {} (limiting from {})",
            h.name(),
            d.enobufs,
            pct(share),
            pct(ENOBUFS_PERCENT)
        ),
    ));
    f.advice = queue_advice(r, u, h);
    f
}

fn lab_queue_item(h: Host, n: u64) -> EvidenceItem {
    item(
        Bottleneck::UdpPath,
        h.name(),
        "dropped by the emulated link's queue",
        Fig {
            value: n as f64,
            unit: "count",
            threshold: None,
        },
        "Udp SndbufErrors, Ip OutDiscards",
        format!(
            "{}: {n} datagrams dropped at the sending host's egress queue without ENOBUFS \
             reaching the sender: in a lab that queue is the emulated link's own (tbf), so \
             this is loss on the (emulated) path",
            h.name()
        ),
    )
}

fn path_item(u: &UdpSummary, unaccounted: u64, receiver_seen: bool) -> EvidenceItem {
    let caveat = if receiver_seen {
        "not counted by either host"
    } else {
        "not accounted for (the receiver's drop counters could not be read)"
    };
    location_item(
        Bottleneck::UdpPath,
        "path",
        "lost between the hosts",
        unaccounted,
        u,
        "sequence numbers less host counters",
        format!(
            "path: {} {caveat} (the place from {} of the loss)",
            share_text(unaccounted, u),
            pct(UDP_LOCATION_SHARE * 100.0)
        ),
    )
}

/// App pacing: a paced run that reached 95 % of its total target rate.
pub(super) fn pacing(r: &RunResult, a: &mut Analysis) {
    let Some(per) = r.spec.rate_bps.filter(|x| x.is_finite() && *x > 0.0) else {
        return;
    };
    let streams = r.spec.parallel.max(1) as usize * view::flows(r).len();
    let target = per * streams as f64;
    let share = r.summary.goodput_bps / target;
    if !share.is_finite() {
        return;
    }
    let asked = if streams > 1 {
        format!("{} ({} × {streams} streams)", rate(target), rate(per))
    } else {
        rate(target)
    };
    let reached = share >= PACED_SHARE;
    // paced, but losing datagrams: where they were lost is the finding that matters
    let lossy = r
        .summary
        .udp
        .as_ref()
        .is_some_and(|u| u.loss_percent > UDP_LOSS_PERCENT);
    let score = match (reached, lossy) {
        (false, _) => 0.0,
        (true, true) => PACED_WITH_LOSS_SCORE,
        (true, false) => 0.95,
    };
    let mut f = Finding::new(
        Bottleneck::AppPacing,
        score,
        format!(
            "goodput {} is {} of the {asked} asked",
            rate(r.summary.goodput_bps),
            pct(share * 100.0)
        ),
    );
    f.evidence.push(item(
        Bottleneck::AppPacing,
        "sender",
        "goodput over the asked rate",
        Fig {
            value: share,
            unit: "ratio",
            threshold: Some(PACED_SHARE),
        },
        "spec",
        format!(
            "sender: paced at {asked}; goodput {} = {} of it (pacing-bound from {})",
            rate(r.summary.goodput_bps),
            pct(share * 100.0),
            pct(PACED_SHARE * 100.0)
        ),
    ));
    f.advice = vec![
        "ask for more: a higher `-b`, or `-b 0` (unpaced) to find the limit".into(),
        "`--find-max`: the highest rate within a loss limit".into(),
    ];
    if !reached {
        a.note(format!(
            "goodput reached only {} of the {asked} asked: something else held it",
            pct(share * 100.0)
        ));
    }
    a.add(Some(f));
}
