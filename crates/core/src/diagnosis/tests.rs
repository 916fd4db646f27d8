//! Scenarios for the rules: each a result as a real test of that kind would assemble it,
//! with the verdict, confidence and evidence it must give.

use std::collections::BTreeMap;

use super::{diagnose, differences, interval_bottlenecks, Bottleneck, Confidence, Diagnosis};
use crate::evidence::{CgroupCpu, CoreLoad, HostEvidence, IntervalTcp, IrqDelta};
use crate::result::{
    CpuSide, CpuSummary, Env, Evidence, HostEnv, InterfaceDelta, Interval, IoSummary, StreamResult,
    StreamSide, Summary, TcpInfo, TcpSummary, Tool, WireSummary, SCHEMA_VERSION,
};
use crate::spec::{Direction, Flow};
use crate::{RunResult, TestSpec};

/// Per-core load of `n` cores: (busy %, softirq %) for the first ones, 10 % busy after.
pub(super) fn cores(n: u32, loads: &[(f64, f64)]) -> Vec<CoreLoad> {
    (0..n)
        .map(|i| {
            let (busy, soft) = loads.get(i as usize).copied().unwrap_or((10.0, 1.0));
            CoreLoad {
                core: i,
                user_percent: (busy - soft).max(0.0) / 2.0,
                system_percent: (busy - soft).max(0.0) / 2.0,
                softirq_percent: soft,
                idle_percent: 100.0 - busy,
                ..Default::default()
            }
        })
        .collect()
}

/// What a host sees: its key, four quiet cores, and counter tables that are readable.
pub(super) fn host(key: &str) -> HostEvidence {
    let table = |names: &[&str]| -> Option<BTreeMap<String, Option<u64>>> {
        Some(names.iter().map(|n| (n.to_string(), Some(0))).collect())
    };
    HostEvidence {
        host_key: Some(key.into()),
        window_s: 10.0,
        cores: cores(4, &[]),
        tcp_ext: table(crate::evidence::TCP_EXT_COUNTERS),
        ip: table(crate::evidence::IP_COUNTERS),
        tcp: table(crate::evidence::TCP_COUNTERS),
        udp: table(crate::evidence::UDP_COUNTERS),
        softnet: Some(Vec::new()),
        ..Default::default()
    }
}

pub(super) fn set(table: &mut Option<BTreeMap<String, Option<u64>>>, name: &str, v: u64) {
    if let Some(t) = table.as_mut() {
        t.insert(name.into(), Some(v));
    }
}

/// A stream side that used `cpu_s` of CPU over a ten-second window.
pub(super) fn side(cpu_s: f64) -> StreamSide {
    StreamSide {
        bytes: 1 << 30,
        counted_bytes: 1 << 30,
        calls: 1024,
        counted_calls: None,
        opened_s: None,
        seconds: 10.0,
        user_s: cpu_s * 0.2,
        sys_s: cpu_s * 0.8,
        run_s: Some(cpu_s),
        wait_s: Some(0.1),
        sleeps: None,
        worker: None,
        pinned_cpu: None,
    }
}

/// The sender's TCP_INFO of a clean ten-second stream.
pub(super) fn sender_info() -> TcpInfo {
    TcpInfo {
        retransmits_total: Some(0),
        segs_out: Some(1_000_000),
        rtt_us: Some(100),
        min_rtt_us: Some(80),
        snd_cwnd: Some(100),
        snd_mss: Some(1448),
        busy_time_us: Some(10_000_000),
        rwnd_limited_us: Some(0),
        sndbuf_limited_us: Some(0),
        dsack_dups: Some(0),
        snd_wnd: Some(4 << 20),
        ..Default::default()
    }
}

/// A ten-second single-stream TCP run between two hosts, nothing limiting it.
pub(super) fn tcp_run() -> RunResult {
    let goodput = 5e9;
    let cpu = || {
        Some(CpuSide {
            process_percent: 30.0,
            system_percent: Some(10.0),
            cores: Some(4),
            ..Default::default()
        })
    };
    let env = |name: &str| HostEnv {
        hostname: Some(name.into()),
        cores: Some(4),
        interfaces: vec![InterfaceDelta {
            name: "eth0".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    RunResult {
        schema_version: SCHEMA_VERSION,
        tool: Tool {
            name: "wirerate".into(),
            version: "0".into(),
        },
        started_unix_s: 0.0,
        spec: TestSpec::default(),
        summary: Summary {
            goodput_bps: goodput,
            sender_bps: goodput,
            bytes: 6_250_000_000,
            sender_bytes: 6_250_000_000,
            seconds: 10.0,
            sender_seconds: 10.0,
            io: IoSummary::default(),
            cpu: CpuSummary {
                local: cpu(),
                remote: cpu(),
            },
            pi: None,
            tcp: Some(TcpSummary::default()),
            udp: None,
            wire: WireSummary::default(),
            flows: Vec::new(),
            diagnosis: None,
            rr: None,
            fairness: None,
        },
        intervals: Vec::new(),
        streams: vec![StreamResult {
            id: 0,
            flow: Flow::ClientToServer,
            sender: side(3.0),
            receiver: side(2.5),
            goodput_bps: goodput,
            tcp_sender: Some(sender_info()),
            tcp_receiver: Some(TcpInfo {
                rcv_wnd: Some(4 << 20),
                ..Default::default()
            }),
        }],
        env: Env {
            client: env("alpha"),
            server: env("beta"),
            embedded_server: false,
            server_addr: "192.0.2.2:5350".into(),
        },
        interrupted: false,
        sweep: None,
        rpm: None,
        inband: Vec::new(),
        evidence: Evidence {
            client: Some(host("alpha")),
            server: Some(host("beta")),
        },
    }
}

pub(super) fn sender(r: &mut RunResult) -> &mut TcpInfo {
    r.streams[0].tcp_sender.get_or_insert_with(TcpInfo::default)
}

pub(super) fn server(r: &mut RunResult) -> &mut HostEvidence {
    r.evidence.server.get_or_insert_with(HostEvidence::default)
}

pub(super) fn has_candidate(d: &Diagnosis, b: Bottleneck) -> Option<f64> {
    has(d, b)
}

fn has(d: &Diagnosis, b: Bottleneck) -> Option<f64> {
    d.candidates
        .iter()
        .find(|c| c.bottleneck == b)
        .map(|c| c.score)
}

fn evidence_text(d: &Diagnosis) -> String {
    d.evidence
        .iter()
        .map(|e| e.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every deciding figure says what it was held to.
fn assert_thresholds(d: &Diagnosis) {
    assert!(!d.evidence.is_empty(), "{d:#?}");
    let deciding = d
        .evidence
        .iter()
        .filter(|e| e.supports == d.bottleneck)
        .collect::<Vec<_>>();
    assert!(!deciding.is_empty(), "{d:#?}");
    assert!(deciding[0].threshold.is_some(), "{d:#?}");
}

#[test]
fn loopback_default_is_sender_cpu_and_explains_spurious_retransmits() {
    let mut r = tcp_run();
    r.env.embedded_server = true;
    r.evidence.server = Some(host("alpha"));
    r.summary.goodput_bps = 38e9;
    r.streams[0].sender = side(9.8);
    r.streams[0].receiver = side(3.7);
    let t = sender(&mut r);
    t.retransmits_total = Some(180);
    t.dsack_dups = Some(172);
    t.segs_out = Some(800_000);
    t.rtt_us = Some(25);
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::SenderCpu, "{d:#?}");
    assert_eq!(d.confidence, Confidence::High, "{d:#?}");
    assert_eq!(
        d.verdict,
        "sender CPU: the sending thread ran 98 % of a core"
    );
    assert_thresholds(&d);
    assert_eq!(d.evidence[0].threshold, Some(90.0));
    assert!(
        d.notes.iter().any(|n| n
            .contains("180 retransmits, 172 reported as duplicates by the receiver (DSACK")
            && n.contains("they are not loss")),
        "{:?}",
        d.notes
    );
    assert_eq!(has(&d, Bottleneck::ReceiverWindow), None);
    assert_eq!(has(&d, Bottleneck::Congestion), None);
    assert_eq!(
        has(&d, Bottleneck::Reordering),
        None,
        "explained by the CPU"
    );
    assert!(d.advice[0].contains("-P 2"), "{:?}", d.advice);
    assert!(d.advice.len() <= 3);
    assert!(d.unseen.is_empty(), "{:?}", d.unseen);
}

#[test]
fn on_one_host_of_two_cores_the_advice_is_not_more_streams() {
    let mut r = tcp_run();
    r.env.embedded_server = true;
    r.summary.goodput_bps = 60e9;
    r.streams[0].sender = side(9.8);
    if let Some(c) = r.summary.cpu.local.as_mut() {
        c.cores = Some(2);
    }
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::SenderCpu, "{d:#?}");
    assert!(d.advice[0].contains("two hosts"), "{:?}", d.advice);
    assert!(!d.advice.iter().any(|a| a.contains("-P")), "{:?}", d.advice);
}

#[test]
fn wire_rate_is_the_wire() {
    let mut r = tcp_run();
    r.summary.goodput_bps = 941e6;
    r.summary.wire = WireSummary {
        link_bps: Some(1e9),
        model_goodput_bps: Some(949e6),
        efficiency: Some(0.99),
        mtu_bytes: Some(1500),
        link_source: Some("driver".into()),
        ..Default::default()
    };
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::Wire, "{d:#?}");
    assert_eq!(d.confidence, Confidence::High);
    assert_thresholds(&d);
    assert_eq!(d.evidence[0].threshold, Some(0.97));
    assert!(d
        .verdict
        .starts_with("the wire: goodput 941.00 Mbit/s is 99 %"));
    assert!(evidence_text(&d).contains("1.00 Gbit/s link, from driver"));
}

#[test]
fn small_window_shows_the_bandwidth_delay_product() {
    let mut r = tcp_run();
    r.summary.goodput_bps = 45e6;
    r.streams[0].goodput_bps = 45e6;
    r.summary.wire = WireSummary {
        link_bps: Some(1e9),
        efficiency: Some(0.047),
        link_source: Some("lab".into()),
        ..Default::default()
    };
    let t = sender(&mut r);
    t.rwnd_limited_us = Some(8_000_000);
    t.snd_wnd = Some(5734);
    t.min_rtt_us = Some(1000);
    t.rtt_us = Some(1100);
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::ReceiverWindow, "{d:#?}");
    assert_eq!(d.confidence, Confidence::High, "{d:#?}");
    assert_thresholds(&d);
    assert_eq!(d.evidence[0].threshold, Some(15.0));
    let text = evidence_text(&d);
    assert!(
        text.contains(
            "server: window 5.60 KiB advertised < BDP 134.28 KiB (1.00 Gbit/s link × 1.1 ms \
             RTT): at most window/RTT = 41.70 Mbit/s"
        ),
        "{text}"
    );
    assert!(
        text.contains("rwnd-limited 80 % of its busy time"),
        "{text}"
    );
    assert!(d.advice[0].starts_with("`-w 512K`"), "{:?}", d.advice);
    assert!(d.advice[1].contains("net.ipv4.tcp_rmem") && d.advice[1].contains("net.core.rmem_max"));
    // the smoothed RTT (1.1 ms), not the minimum: the window must cover the RTT under load
    assert!(d.verdict.contains("at most 41.70 Mbit/s"), "{}", d.verdict);
}

#[test]
fn full_send_buffer_is_the_senders_buffer() {
    let mut r = tcp_run();
    r.spec.window_bytes = Some(16 << 10);
    sender(&mut r).sndbuf_limited_us = Some(4_000_000);
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::SenderBuffer, "{d:#?}");
    assert_eq!(d.confidence, Confidence::High, "{d:#?}");
    assert_thresholds(&d);
    assert!(
        d.advice[0].contains("16.00 KiB asked is too small"),
        "{:?}",
        d.advice
    );
    assert!(d.advice[1].contains("net.ipv4.tcp_wmem") && d.advice[1].contains("net.core.wmem_max"));
}

#[test]
fn throttled_receiver_is_receiver_cpu_not_the_window() {
    let mut r = tcp_run();
    r.summary.goodput_bps = 2e9;
    r.streams[0].receiver = side(4.8);
    sender(&mut r).rwnd_limited_us = Some(7_000_000);
    server(&mut r).cgroup = Some(CgroupCpu {
        limit_cores: Some(0.5),
        nr_throttled: Some(95),
        throttled_s: Some(3.0),
    });
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::ReceiverCpu, "{d:#?}");
    assert_thresholds(&d);
    assert_eq!(d.evidence[0].threshold, Some(10.0));
    assert!(
        d.verdict.contains(
            "the server's CPU quota of 0.50 cores throttled its receiving end 30 % of the window, in 95 periods"
        ),
        "{}",
        d.verdict
    );
    let window = has(&d, Bottleneck::ReceiverWindow).unwrap_or(0.0);
    assert!(
        window > 0.0 && window < 0.5,
        "a candidate, not the verdict: {window}"
    );
    assert!(
        d.notes.iter().any(|n| n.contains("symptom")),
        "{:?}",
        d.notes
    );
    assert!(d.advice[0].contains("cpu.max"), "{:?}", d.advice);
}

#[test]
fn throttled_sender_is_named_by_its_quota() {
    // a sending thread at 45 % of a core looks starved, not saturated: the quota is why
    let mut r = tcp_run();
    r.summary.goodput_bps = 2e9;
    r.streams[0].sender = side(4.5);
    r.evidence.client.as_mut().unwrap().cgroup = Some(CgroupCpu {
        limit_cores: Some(0.5),
        nr_throttled: Some(98),
        throttled_s: Some(4.0),
    });
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::SenderCpu, "{d:#?}");
    assert!(
        d.verdict
            .contains("the client's CPU quota of 0.50 cores throttled its sending end 40 %"),
        "{}",
        d.verdict
    );
    assert_eq!(d.evidence[0].source, "cgroup cpu.stat");
    assert!(d.evidence[0].text.contains("in 98 periods"), "{d:#?}");
    assert!(d.advice[1].contains("sending end"), "{:?}", d.advice);
    // the same thread with no quota is no sender CPU verdict
    r.evidence.client.as_mut().unwrap().cgroup = None;
    assert_ne!(diagnose(&r).bottleneck, Bottleneck::SenderCpu);
}

#[test]
fn starved_receiver_is_receiver_cpu() {
    let mut r = tcp_run();
    r.streams[0].receiver.run_s = Some(6.0);
    r.streams[0].receiver.wait_s = Some(3.5);
    sender(&mut r).rwnd_limited_us = Some(5_000_000);
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::ReceiverCpu, "{d:#?}");
    assert!(d.verdict.contains("waited for a CPU 35 %"), "{}", d.verdict);
    assert_thresholds(&d);
}

#[test]
fn one_softirq_core_is_the_receivers_interrupts() {
    let mut r = tcp_run();
    let s = server(&mut r);
    s.cores = cores(4, &[(12.0, 2.0), (30.0, 5.0), (100.0, 80.0), (20.0, 2.0)]);
    s.irqs = vec![IrqDelta {
        irq: "45".into(),
        name: "eth0-rx-0".into(),
        per_core: vec![0, 0, 120_000, 0],
    }];
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::ReceiverSoftirq, "{d:#?}");
    assert_eq!(d.confidence, Confidence::High, "{d:#?}");
    assert_thresholds(&d);
    let advice = d.advice.join("\n");
    assert!(advice.contains("/proc/irq/45/smp_affinity"), "{advice}");
    assert!(advice.contains("rps_cpus"), "{advice}");
    assert!(d
        .verdict
        .contains("core 2 of the server was 100 % busy, 80 % of it softirq"));
}

#[test]
fn real_loss_is_congestion_with_the_mathis_bound() {
    let mut r = tcp_run();
    r.summary.goodput_bps = 24e6;
    r.streams[0].goodput_bps = 24e6;
    r.summary.wire = WireSummary {
        link_bps: Some(1e9),
        efficiency: Some(0.025),
        ..Default::default()
    };
    let t = sender(&mut r);
    t.retransmits_total = Some(800);
    t.dsack_dups = Some(10);
    t.rtt_us = Some(20_000);
    t.min_rtt_us = Some(18_000);
    let client = r.evidence.client.as_mut().map(|c| &mut c.tcp_ext);
    if let Some(ext) = client {
        set(ext, "TCPLostRetransmit", 5);
    }
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::Congestion, "{d:#?}");
    assert_eq!(d.confidence, Confidence::High, "{d:#?}");
    assert_thresholds(&d);
    let text = evidence_text(&d);
    assert!(
        text.contains("790 real retransmits (800 less 10 spurious)"),
        "{text}"
    );
    assert!(text.contains("Mathis bound MSS/(RTT·√p)·√1.5"), "{text}");
    assert!(text.contains("TcpExt TCPLostRetransmit 5"), "{text}");
    let m = d
        .evidence
        .iter()
        .find(|e| e.what == "Mathis bound")
        .map(|e| e.value);
    // 1448 B × 8 / (20 ms × √0.00079) × √1.5 ≈ 25.2 Mbit/s
    assert!(m.is_some_and(|m| (m - 25.24e6).abs() < 0.1e6), "{m:?}");
}

#[test]
fn loss_too_rare_to_explain_the_rate_is_not_congestion() {
    let mut r = tcp_run();
    let t = sender(&mut r);
    // 0.03 % at 20 µs: the Mathis bound is 41 Gbit/s, far above the 5 Gbit/s goodput
    t.retransmits_total = Some(300);
    t.dsack_dups = Some(0);
    t.rtt_us = Some(20);
    let d = diagnose(&r);
    assert_ne!(d.bottleneck, Bottleneck::Congestion, "{d:#?}");
    assert!(has(&d, Bottleneck::Congestion).is_some_and(|s| s < 0.5));
}

#[test]
fn dsack_from_tcp_ext_when_tcp_info_lacks_it() {
    let mut r = tcp_run();
    let t = sender(&mut r);
    t.retransmits_total = Some(650);
    t.dsack_dups = None;
    t.rtt_us = Some(25);
    if let Some(c) = r.evidence.client.as_mut() {
        set(&mut c.tcp_ext, "TCPDSACKRecv", 629);
        set(&mut c.tcp_ext, "TCPSACKReorder", 40);
    }
    let d = diagnose(&r);
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("650 retransmits, 629 reported")),
        "{:?}",
        d.notes
    );
    assert_eq!(d.bottleneck, Bottleneck::Unknown, "{d:#?}");
    assert!(has(&d, Bottleneck::Reordering).is_some_and(|s| s < 0.5));
    assert!(d.unseen.iter().any(|u| u.contains("no DSACK count")));
}

#[test]
fn iperf3_peer_is_never_high_confidence() {
    let mut r = tcp_run();
    r.evidence.server = None;
    r.summary.cpu.remote = None;
    r.streams[0].tcp_receiver = None;
    r.streams[0].sender = side(9.8);
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::SenderCpu);
    assert_ne!(d.confidence, Confidence::High);
    assert!(
        d.unseen
            .iter()
            .any(|u| u.starts_with("server: no kernel counters or per-core CPU")),
        "{:?}",
        d.unseen
    );
    assert!(d
        .unseen
        .iter()
        .any(|u| u == "server: receiver TCP_INFO not available"));
}

#[test]
fn missing_sender_tcp_info_is_thin() {
    let mut r = tcp_run();
    r.streams[0].tcp_sender = None;
    r.streams[0].sender = side(9.8);
    let d = diagnose(&r);
    assert_eq!(d.confidence, Confidence::Low);
    assert!(d
        .unseen
        .iter()
        .any(|u| u == "client: sender TCP_INFO not available"));
}

#[test]
fn mixed_evidence_is_medium_with_both_candidates() {
    let mut r = tcp_run();
    r.streams[0].sender = side(9.3);
    sender(&mut r).rwnd_limited_us = Some(4_500_000);
    let d = diagnose(&r);
    assert_eq!(d.confidence, Confidence::Medium, "{d:#?}");
    assert_eq!(d.bottleneck, Bottleneck::ReceiverWindow, "{d:#?}");
    assert!(
        d.verdict
            .starts_with("the receiver's window, with sender CPU close behind"),
        "{}",
        d.verdict
    );
    assert!(has(&d, Bottleneck::SenderCpu).is_some_and(|s| s >= 0.5));
    assert!(d
        .evidence
        .iter()
        .any(|e| e.supports == Bottleneck::SenderCpu));
}

#[test]
fn nothing_over_a_threshold_is_not_determined() {
    let mut r = tcp_run();
    sender(&mut r).rwnd_limited_us = Some(500_000);
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::Unknown);
    assert_eq!(d.confidence, Confidence::Low);
    assert_eq!(d.verdict, "not determined: no figure reached its threshold");
    assert!(d.evidence.iter().any(|e| e.what == "sending thread CPU"));
    assert!(d
        .evidence
        .iter()
        .filter(|e| e.unit == "percent")
        .all(|e| e.text.contains('%') && e.threshold.is_some()));
}

#[test]
fn short_test_is_low_confidence() {
    let mut r = tcp_run();
    r.summary.seconds = 0.4;
    r.streams[0].sender = side(9.8);
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::SenderCpu);
    assert_eq!(d.confidence, Confidence::Low);
    assert!(d.notes.iter().any(|n| n.contains("too short")));
}

#[test]
fn reverse_tests_look_at_the_server_sending() {
    let mut r = tcp_run();
    r.spec.direction = Direction::Reverse;
    r.streams[0].flow = Flow::ServerToClient;
    r.streams[0].receiver = side(9.9);
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::ReceiverCpu);
    assert!(
        d.evidence[0].text.starts_with("client: receiving thread"),
        "{d:#?}"
    );
}

#[test]
fn diagnosis_json_uses_the_contract_names() {
    let mut r = tcp_run();
    r.streams[0].sender = side(9.8);
    let d = diagnose(&r);
    let j = serde_json::to_value(&d).unwrap_or_default();
    assert_eq!(j["bottleneck"], "sender_cpu");
    assert_eq!(j["confidence"], "high");
    assert_eq!(j["candidates"][0]["bottleneck"], "sender_cpu");
    let back: Result<Diagnosis, _> = serde_json::from_value(j);
    assert_eq!(back.ok(), Some(d));
}

/// A result with nothing in it: no streams, no evidence, zero time.
fn empty() -> RunResult {
    let mut r = tcp_run();
    r.streams.clear();
    r.summary.goodput_bps = 0.0;
    r.summary.seconds = 0.0;
    r.summary.sender_seconds = 0.0;
    r.summary.cpu = CpuSummary::default();
    r.summary.tcp = None;
    r.evidence = Evidence::default();
    r
}

#[test]
fn empty_result_is_not_determined() {
    let d = diagnose(&empty());
    assert_eq!(d.bottleneck, Bottleneck::Unknown);
    assert_eq!(d.confidence, Confidence::Low);
    let mut u = empty();
    u.spec.protocol = crate::Protocol::Udp;
    u.spec.rate_bps = Some(1e6);
    u.summary.udp = Some(Default::default());
    let d = diagnose(&u);
    assert_eq!(d.bottleneck, Bottleneck::Unknown);
    interval_bottlenecks(&mut u);
}

#[test]
fn nan_and_zero_figures_never_panic_nor_leak_into_json() {
    let nan = f64::NAN;
    let mut r = tcp_run();
    r.summary.goodput_bps = nan;
    r.summary.seconds = nan;
    r.summary.sender_seconds = f64::INFINITY;
    r.summary.wire.efficiency = Some(nan);
    r.summary.wire.link_bps = Some(0.0);
    r.spec.rate_bps = Some(nan);
    r.streams[0].sender = StreamSide {
        user_s: nan,
        seconds: 0.0,
        run_s: Some(nan),
        wait_s: Some(f64::INFINITY),
        ..Default::default()
    };
    r.streams[0].receiver.seconds = nan;
    r.streams[0].goodput_bps = nan;
    let t = sender(&mut r);
    t.busy_time_us = Some(0);
    t.segs_out = Some(0);
    t.retransmits_total = Some(u64::MAX);
    t.dsack_dups = Some(u64::MAX);
    t.rtt_us = Some(0);
    let s = server(&mut r);
    s.window_s = nan;
    s.cores = vec![CoreLoad {
        idle_percent: nan,
        softirq_percent: nan,
        ..Default::default()
    }];
    s.cgroup = Some(CgroupCpu {
        limit_cores: Some(nan),
        nr_throttled: None,
        throttled_s: Some(nan),
    });
    let d = diagnose(&r);
    let j = serde_json::to_string(&d).unwrap_or_default();
    let back: Result<Diagnosis, _> = serde_json::from_str(&j);
    assert!(back.is_ok(), "{j}");
    assert!(d.candidates.iter().all(|c| c.score.is_finite()));
    interval_bottlenecks(&mut r);
}

#[test]
fn intervals_mark_where_the_limit_changes() {
    let mut r = tcp_run();
    r.streams[0].sender = side(9.8);
    let iv = |start: f64, omitted: bool, rwnd_us: u64| Interval {
        flow: Flow::ClientToServer,
        stream: None,
        start_s: start,
        end_s: start + 1.0,
        bytes: 1,
        bps: 8.0,
        omitted,
        packets: None,
        loss_percent: None,
        jitter_ms: None,
        rr: None,
        tcp: Some(IntervalTcp {
            busy_us: Some(1_000_000),
            rwnd_limited_us: Some(rwnd_us),
            sndbuf_limited_us: Some(0),
            retransmits: Some(0),
            dsack_dups: Some(0),
            ..Default::default()
        }),
        bottleneck: None,
    };
    r.intervals = vec![
        iv(0.0, true, 900_000),
        iv(1.0, false, 500_000),
        iv(2.0, false, 600_000),
        iv(3.0, false, 0),
        iv(4.0, false, 0),
    ];
    let mut back = iv(2.0, false, 0);
    back.flow = Flow::ServerToClient;
    r.intervals.insert(3, back);
    interval_bottlenecks(&mut r);
    let marks: Vec<_> = r.intervals.iter().map(|i| i.bottleneck).collect();
    assert_eq!(
        marks,
        vec![
            None,
            Some(Bottleneck::ReceiverWindow),
            None,
            Some(Bottleneck::SenderCpu),
            Some(Bottleneck::SenderCpu),
            None
        ]
    );
}

#[test]
fn interval_retransmits_count_only_when_the_run_saw_loss() {
    let mut r = tcp_run();
    r.streams[0].sender = side(9.8);
    r.intervals = vec![Interval {
        flow: Flow::ClientToServer,
        stream: None,
        start_s: 0.0,
        end_s: 1.0,
        bytes: 1,
        bps: 8.0,
        omitted: false,
        packets: None,
        loss_percent: None,
        jitter_ms: None,
        rr: None,
        tcp: Some(IntervalTcp {
            busy_us: Some(1_000_000),
            retransmits: Some(3),
            dsack_dups: Some(1),
            ..Default::default()
        }),
        bottleneck: None,
    }];
    interval_bottlenecks(&mut r);
    assert_eq!(r.intervals[0].bottleneck, Some(Bottleneck::SenderCpu));
    let t = sender(&mut r);
    t.retransmits_total = Some(900);
    t.segs_out = Some(100_000);
    // loss beside a saturated sender did not set the rate: still the CPU
    interval_bottlenecks(&mut r);
    assert_eq!(r.intervals[0].bottleneck, Some(Bottleneck::SenderCpu));
    // with CPU to spare, the same loss is the run's limit and the interval's
    r.streams[0].sender = side(3.0);
    interval_bottlenecks(&mut r);
    assert_eq!(r.intervals[0].bottleneck, Some(Bottleneck::Congestion));
}

fn verdict(b: Bottleneck, what: &str, value: f64) -> Diagnosis {
    Diagnosis {
        bottleneck: b,
        confidence: Confidence::High,
        verdict: String::new(),
        evidence: vec![super::EvidenceItem {
            supports: b,
            side: "server".into(),
            what: what.into(),
            value,
            unit: if b == Bottleneck::Wire {
                "ratio"
            } else {
                "percent"
            }
            .into(),
            threshold: None,
            source: String::new(),
            text: String::new(),
        }],
        advice: Vec::new(),
        candidates: Vec::new(),
        notes: Vec::new(),
        unseen: Vec::new(),
    }
}

#[test]
fn differences_name_each_groups_usual_verdict() {
    let wire = verdict(Bottleneck::Wire, "goodput over the wire model", 0.99);
    let soft = verdict(Bottleneck::ReceiverSoftirq, "receive core busy", 100.0);
    let cong = verdict(Bottleneck::Congestion, "real loss rate", 0.2);
    let a: Vec<&Diagnosis> = vec![&wire; 5];
    let b: Vec<&Diagnosis> = vec![&soft, &soft, &wire, &soft, &soft];
    assert_eq!(
        differences(&a, &b),
        vec!["A: wire-bound (5 of 5 runs); B: receiver softirq core at 100 % (4 of 5 runs)"]
    );
    assert!(differences(&a, &a).is_empty());
    assert!(differences(&a, &[]).is_empty());
    let c: Vec<&Diagnosis> = vec![&wire, &cong, &wire, &cong, &wire];
    assert_eq!(
        differences(&a, &c),
        vec!["B: also congestion or loss on the path (real loss rate 0 %) (2 of 5 runs)"]
    );
}

#[cfg(feature = "synth")]
#[test]
fn synthetic_runs_diagnose() {
    for mut r in crate::synth::sample(0, 5, 9e9, 1e8, 7) {
        let d = diagnose(&r);
        assert!(
            d.confidence == Confidence::Low,
            "no evidence in synthetic runs: {d:#?}"
        );
        interval_bottlenecks(&mut r);
    }
}

#[test]
fn a_lossless_idle_sender_far_below_the_wire_is_held_by_its_congestion_control() {
    // bbr on a shaped lab link: always data to send, no window or buffer limit, no loss,
    // an idle CPU, and 0.1 % of the wire
    let mut r = tcp_run();
    r.summary.goodput_bps = 1.24e6;
    r.summary.wire = WireSummary {
        link_bps: Some(1e9),
        model_goodput_bps: Some(941.48e6),
        efficiency: Some(1.24e6 / 941.48e6),
        mtu_bytes: Some(1500),
        link_source: Some("lab bb".into()),
        ..Default::default()
    };
    for s in &mut r.streams {
        s.sender = side(0.02);
        s.receiver = side(0.002);
        if let Some(t) = s.tcp_sender.as_mut() {
            t.snd_cwnd = Some(4);
            t.rtt_us = Some(39);
            t.congestion = Some("bbr".into());
        }
    }
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::CongestionControl, "{d:#?}");
    assert!(d.verdict.contains("bbr"), "{}", d.verdict);
    let t = evidence_text(&d);
    assert!(t.contains("cwnd 4 × 1448 B"), "{t}");
    assert!(d.advice[0].contains("-C cubic"), "{:?}", d.advice);
    // the same run near the wire is the wire, not the congestion control
    r.summary.wire.efficiency = Some(0.99);
    assert_eq!(diagnose(&r).bottleneck, Bottleneck::Wire);
}

#[test]
fn an_iperf3_peer_is_judged_by_its_process_cpu_not_by_zeros() {
    // an iperf3 server reports no per-stream CPU (zeros) but its process's: 98 % of a core
    let mut r = tcp_run();
    r.evidence.server = None;
    for s in &mut r.streams {
        s.receiver.user_s = 0.0;
        s.receiver.sys_s = 0.0;
        s.receiver.run_s = None;
        s.receiver.wait_s = None;
    }
    if let Some(c) = r.summary.cpu.remote.as_mut() {
        c.process_percent = 98.0;
    }
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::ReceiverCpu, "{d:#?}");
    // and a quiet one is not read as a thread at 0 %
    if let Some(c) = r.summary.cpu.remote.as_mut() {
        c.process_percent = 0.0;
    }
    let d = diagnose(&r);
    assert!(
        !evidence_text(&d).contains("receiving thread at 0 %"),
        "{}",
        evidence_text(&d)
    );
}

/// A two-host run of `n` streams whose sending ends each used `cpu_s`, served by the data
/// workers `workers[i]` (None: a thread each).
fn pooled_run(cpu_s: &[f64], workers: &[Option<u32>]) -> RunResult {
    let mut r = tcp_run();
    r.spec.parallel = cpu_s.len() as u32;
    let first = r.streams[0].clone();
    r.streams = cpu_s
        .iter()
        .zip(workers)
        .enumerate()
        .map(|(i, (&cpu, &worker))| {
            let mut s = first.clone();
            s.id = i as u32;
            s.sender = StreamSide {
                run_s: None,
                wait_s: None,
                worker,
                ..side(cpu)
            };
            s.receiver = StreamSide {
                worker,
                ..side(1.0)
            };
            s
        })
        .collect();
    r
}

#[test]
fn streams_sharing_a_worker_count_as_their_worker() {
    // two streams of one worker, each holding half of its 96 %
    let d = diagnose(&pooled_run(&[4.8, 4.8], &[Some(0), Some(0)]));
    assert_eq!(d.bottleneck, Bottleneck::SenderCpu, "{d:#?}");
    assert_eq!(
        d.verdict,
        "sender CPU: the sending worker ran 96 % of a core"
    );
    assert!(
        evidence_text(&d).contains("client: sending worker (serving 2 streams) at 96 % of a core"),
        "{}",
        evidence_text(&d)
    );
    // two workers of two streams each: the busier one, named among its side's workers
    let d = diagnose(&pooled_run(
        &[2.0, 4.7, 2.0, 4.7],
        &[Some(0), Some(1), Some(0), Some(1)],
    ));
    assert_eq!(
        d.verdict,
        "sender CPU: the sending worker ran 94 % of a core"
    );
    assert!(
        evidence_text(&d).contains("sending worker (the busiest of 2, serving 2 streams) at 94 %"),
        "{}",
        evidence_text(&d)
    );
    // the same shares on threads of their own: no thread near a core
    let d = diagnose(&pooled_run(&[4.8, 4.8], &[None, None]));
    assert_ne!(d.bottleneck, Bottleneck::SenderCpu, "{d:#?}");
}
