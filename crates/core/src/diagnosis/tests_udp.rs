//! UDP scenarios: where lost datagrams went, pacing, and the lab's emulated link.

use super::tests::{host, server, set, side, tcp_run};
use super::{diagnose, interval_bottlenecks, Bottleneck, Confidence, Diagnosis};
use crate::evidence::{NicStats, SoftnetDelta};
use crate::result::{Interval, UdpSummary};
use crate::spec::Flow;
use crate::{Protocol, RunResult};

/// A ten-second UDP run paced at 1 Gbit/s that lost `lost` of 1 000 000 datagrams and
/// whose counters saw none of it.
fn udp_run(lost: u64) -> RunResult {
    let mut r = tcp_run();
    r.spec.protocol = Protocol::Udp;
    r.spec.rate_bps = Some(1e9);
    r.summary.tcp = None;
    r.summary.goodput_bps = 1e9 * (1.0 - lost as f64 / 1e6);
    for s in &mut r.streams {
        s.tcp_sender = None;
        s.tcp_receiver = None;
    }
    r.summary.udp = Some(UdpSummary {
        packets: 1_000_000,
        received: 1_000_000 - lost,
        lost,
        loss_percent: lost as f64 / 1e4,
        socket_drops: Some(0),
        receiver_rcvbuf_errors: Some(0),
        target_bps: Some(1e9),
        ..Default::default()
    });
    r
}

fn udp(r: &mut RunResult) -> &mut UdpSummary {
    r.summary.udp.get_or_insert_with(UdpSummary::default)
}

fn text(d: &Diagnosis) -> String {
    d.evidence
        .iter()
        .map(|e| e.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn paced_at_the_target_is_app_pacing() {
    let mut r = udp_run(0);
    r.summary.goodput_bps = 0.995e9;
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::AppPacing, "{d:#?}");
    assert_eq!(d.confidence, Confidence::High);
    assert_eq!(d.evidence[0].threshold, Some(0.95));
    assert!(d.advice[0].contains("-b"), "{:?}", d.advice);
}

#[test]
fn paced_below_the_target_looks_for_the_cause() {
    let mut r = udp_run(0);
    r.summary.goodput_bps = 0.6e9;
    r.streams[0].receiver = side(9.9);
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::ReceiverCpu, "{d:#?}");
    assert!(
        d.notes.iter().any(|n| n.contains("reached only 60 %")),
        "{:?}",
        d.notes
    );
}

#[test]
fn socket_overflow_is_the_receivers_buffer() {
    let mut r = udp_run(100_000);
    r.spec.rate_bps = None;
    let u = udp(&mut r);
    u.socket_drops = Some(98_000);
    u.receiver_rcvbuf_errors = Some(98_500);
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::UdpReceiverBuffer, "{d:#?}");
    assert_eq!(d.confidence, Confidence::High, "{d:#?}");
    assert_eq!(d.evidence[0].threshold, Some(50.0));
    assert!(
        text(&d).contains("98500 of 100000 lost datagrams"),
        "{}",
        text(&d)
    );
    let advice = d.advice.join("\n");
    assert!(advice.contains("net.core.rmem_max") && advice.contains("net.core.rmem_default"));
}

#[test]
fn heavy_loss_in_the_socket_outranks_a_busy_unpaced_sender() {
    // unpaced UDP on a loaded host: the sending thread waited for its core, and most of
    // what it sent overflowed the receiver's buffer; the goodput was set by the buffer
    let mut r = udp_run(600_000);
    r.spec.rate_bps = None;
    for s in &mut r.streams {
        s.sender.run_s = Some(5.0);
        s.sender.wait_s = Some(5.0);
        s.sender.seconds = 10.0;
    }
    let u = udp(&mut r);
    u.socket_drops = Some(600_000);
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::UdpReceiverBuffer, "{d:#?}");
    assert!(super::tests::has_candidate(&d, Bottleneck::SenderCpu).is_some());
}

#[test]
fn softnet_and_nic_drops_are_the_receiving_host() {
    let mut r = udp_run(50_000);
    let s = server(&mut r);
    s.softnet = Some(vec![SoftnetDelta {
        core: 1,
        processed: 900_000,
        dropped: 30_000,
        time_squeeze: 400,
    }]);
    s.nic = vec![NicStats {
        iface: "eth0".into(),
        counters: [("rx_missed_errors".to_string(), 15_000)]
            .into_iter()
            .collect(),
    }];
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::UdpReceiverHost, "{d:#?}");
    let t = text(&d);
    assert!(t.contains("softnet backlog 30000, NIC 15000"), "{t}");
    assert!(d.advice[0].contains("ethtool -G eth0"), "{:?}", d.advice);
    assert!(d.advice.join(" ").contains("netdev_max_backlog"));
}

#[test]
fn enobufs_is_the_senders_queue() {
    // refused sends are never sent: the rate falls short without loss
    let mut r = udp_run(0);
    r.summary.goodput_bps = 0.95e9 * 0.95;
    udp(&mut r).sender_enobufs = 50_000;
    let d = diagnose(&r);
    assert!(
        text(&d).contains("50000 of 1050000 sends refused with ENOBUFS = 4.8 %"),
        "{}",
        text(&d)
    );
    assert_eq!(d.bottleneck, Bottleneck::UdpSenderQueue, "{d:#?}");
    assert!(d.advice.join(" ").contains("txqueuelen"));
}

#[test]
fn qdisc_drops_on_a_real_sender_are_the_senders_queue() {
    let mut r = udp_run(20_000);
    if let Some(c) = r.evidence.client.as_mut() {
        set(&mut c.udp, "SndbufErrors", 19_000);
    }
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::UdpSenderQueue, "{d:#?}");
}

#[test]
fn in_a_lab_the_senders_qdisc_is_the_emulated_path() {
    let mut r = udp_run(20_000);
    // as the binary names a lab's link
    r.summary.wire.link_source = Some("lab uw4321".into());
    if let Some(c) = r.evidence.client.as_mut() {
        // one drop counts in both; the larger is the number dropped
        set(&mut c.udp, "SndbufErrors", 12_000);
        set(&mut c.ip, "OutDiscards", 12_000);
    }
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::UdpPath, "{d:#?}");
    assert_eq!(
        super::tests::has_candidate(&d, Bottleneck::UdpSenderQueue),
        None
    );
    let t = text(&d);
    assert!(
        t.contains("12000 datagrams dropped at the sending host's egress queue"),
        "{t}"
    );
    assert!(t.contains("emulated link's own (tbf)"), "{t}");
}

#[test]
fn unaccounted_loss_is_the_path() {
    let d = diagnose(&udp_run(30_000));
    assert_eq!(d.bottleneck, Bottleneck::UdpPath, "{d:#?}");
    assert!(d.advice.iter().any(|a| a.contains("--find-max")));
    assert!(text(&d).contains("30000 of 30000 lost datagrams (100 %) not counted by either host"));
}

#[test]
fn path_loss_without_the_receivers_counters_is_hedged() {
    let mut r = udp_run(30_000);
    r.evidence.server = None;
    let u = udp(&mut r);
    u.socket_drops = None;
    u.receiver_rcvbuf_errors = None;
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::UdpPath);
    assert_eq!(d.confidence, Confidence::Low);
    assert!(text(&d).contains("could not be read"), "{}", text(&d));
}

#[test]
fn unpaced_udp_without_loss_is_the_busy_thread() {
    let mut r = udp_run(0);
    r.spec.rate_bps = None;
    r.streams[0].sender = side(10.0);
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::SenderCpu, "{d:#?}");
}

#[test]
fn loopback_udp_counts_host_counters_once() {
    let mut r = udp_run(10_000);
    r.env.embedded_server = true;
    r.evidence.server = Some(host("alpha"));
    if let Some(c) = r.evidence.client.as_mut() {
        set(&mut c.udp, "RcvbufErrors", 10_000);
    }
    r.evidence.server.clone_from(&r.evidence.client);
    let u = udp(&mut r);
    u.receiver_rcvbuf_errors = None;
    u.socket_drops = None;
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::UdpReceiverBuffer, "{d:#?}");
    assert!(text(&d).contains("10000 of 10000"), "{}", text(&d));
}

#[test]
fn udp_intervals_with_loss_carry_the_runs_location() {
    let mut r = udp_run(100_000);
    r.spec.rate_bps = None;
    udp(&mut r).socket_drops = Some(100_000);
    let iv = |start: f64, loss: f64| Interval {
        flow: Flow::ClientToServer,
        stream: None,
        start_s: start,
        end_s: start + 1.0,
        bytes: 1,
        bps: 8.0,
        omitted: false,
        packets: Some(1000),
        loss_percent: Some(loss),
        jitter_ms: None,
        rr: None,
        tcp: None,
        bottleneck: None,
    };
    r.intervals = vec![iv(0.0, 0.0), iv(1.0, 12.0), iv(2.0, 9.0)];
    interval_bottlenecks(&mut r);
    let marks: Vec<_> = r.intervals.iter().map(|i| i.bottleneck).collect();
    assert_eq!(
        marks,
        vec![
            Some(Bottleneck::Unknown),
            Some(Bottleneck::UdpReceiverBuffer),
            None
        ]
    );
}
