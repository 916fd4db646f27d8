use super::*;

fn at(values: &[f64]) -> Vec<Sample> {
    values
        .iter()
        .enumerate()
        .map(|(i, &ms)| Sample {
            at_s: i as f64 * 0.1,
            ms,
        })
        .collect()
}

#[test]
fn trimmed_mean_leaves_out_the_highest_twentieth() {
    // 20 samples: 1..=19 and one outlier of 1000; floor(20/20) = 1 left out: mean of 1..=19
    let mut v: Vec<f64> = (1..=19).map(f64::from).collect();
    v.push(1000.0);
    assert_eq!(trimmed_mean(&at(&v)), Some(10.0));
    // 19 samples: none left out (floor(19/20) = 0): (1+...+18 + 1000) / 19 = 1171 / 19
    let v19: Vec<f64> = v[1..].to_vec();
    let expect = (2..=19).sum::<i32>() as f64 + 1000.0;
    assert_eq!(trimmed_mean(&at(&v19)), Some(expect / 19.0));
    assert_eq!(trimmed_mean(&[]), None);
}

#[test]
fn percentiles_are_nearest_rank() {
    let v: Vec<f64> = (1..=10).map(f64::from).collect();
    assert_eq!(percentile(&v, 50.0), Some(5.0));
    assert_eq!(percentile(&v, 90.0), Some(9.0));
    assert_eq!(percentile(&v, 99.0), Some(10.0));
    assert_eq!(percentile(&v, 0.0), Some(1.0));
    assert_eq!(percentile(&[], 50.0), None);
    let s = LatencyStats::of(&at(&[4.0, 2.0, 8.0, 6.0])).unwrap();
    assert_eq!(
        (s.min_ms, s.p50_ms, s.p90_ms, s.max_ms),
        (2.0, 4.0, 8.0, 8.0)
    );
    assert_eq!(s.trimmed_mean_ms, 5.0);
    assert_eq!(s.samples, 4);
}

#[test]
fn rpm_weighs_foreign_and_self_half_each() {
    // foreign: (20 + 40) / 2 = 30 ms; self 90 ms; 0.5*30 + 0.5*90 = 60 ms -> 1000 RPM
    assert_eq!(rpm(Some(20.0), Some(40.0), Some(90.0)), Some(1000.0));
    // idle: the foreign part alone, 60 000 / 30 = 2000
    assert_eq!(rpm(Some(20.0), Some(40.0), None), Some(2000.0));
    // one foreign kind: 0.5*100 + 0.5*200 = 150 ms -> 400 RPM
    assert_eq!(rpm(Some(100.0), None, Some(200.0)), Some(400.0));
    assert_eq!(rpm(None, None, None), None);
    assert_eq!(rpm(Some(0.0), None, None), None);
}

#[test]
fn queue_is_added_time_times_rate() {
    // 400 ms at 20 Mbit/s = 0.4 * 20e6 / 8 = 1 000 000 bytes
    assert_eq!(queue_bytes(400.0, 20e6), 1_000_000);
    assert_eq!(queue_bytes(-3.0, 20e6), 0);
    assert_eq!(queue_bytes(10.0, 0.0), 0);
}

fn steady(n: usize, ms: f64, secs: f64) -> Vec<Sample> {
    (0..n)
        .map(|i| Sample {
            at_s: secs * (i as f64 + 0.5) / n as f64,
            ms,
        })
        .collect()
}

#[test]
fn steady_samples_are_high_confidence_and_drifting_ones_low() {
    let s = PhaseSamples {
        connect: steady(50, 10.0, 5.0),
        request: steady(50, 12.0, 5.0),
        loaded_rtt: steady(50, 30.0, 5.0),
        inband: vec![],
    };
    assert_eq!(confidence(&s, 0.0, 5.0, 5), Confidence::High);
    // too few foreign samples
    let few = PhaseSamples {
        connect: steady(10, 10.0, 5.0),
        ..Default::default()
    };
    assert_eq!(confidence(&few, 0.0, 5.0, 5), Confidence::Low);
    // a latency that doubles every second: the growing-window figures never settle
    let drifting: Vec<Sample> = (0..50)
        .map(|i| {
            let t = i as f64 * 0.1;
            Sample {
                at_s: t,
                ms: 2f64.powf(t),
            }
        })
        .collect();
    let d = PhaseSamples {
        connect: drifting,
        ..Default::default()
    };
    assert_eq!(confidence(&d, 0.0, 5.0, 5), Confidence::Low);
}

#[test]
fn summary_names_the_queue_of_the_worst_phase() {
    let idle = PhaseSamples {
        connect: steady(40, 2.0, 4.0),
        request: steady(40, 2.0, 4.0),
        loaded_rtt: vec![],
        inband: vec![],
    };
    let loaded = PhaseSamples {
        connect: steady(40, 402.0, 4.0),
        request: steady(40, 402.0, 4.0),
        loaded_rtt: steady(40, 400.0, 4.0),
        inband: vec![],
    };
    let phases = vec![
        phase_result(Phase::Idle, 4.0, 0.0, &idle, (None, None), 0),
        phase_result(Phase::Download, 4.0, 0.0, &loaded, (Some(20e6), None), 0),
    ];
    let r = summarize(phases);
    // no bidirectional phase: the lowest loaded one; 0.5*402 + 0.5*400 = 401 ms
    assert_eq!(r.rpm, Some(60_000.0 / 401.0));
    assert_eq!(r.idle_rpm, Some(30_000.0));
    let q = r.queueing.unwrap();
    assert_eq!(
        (q.phase, q.added_ms, q.queue_bytes),
        (Phase::Download, 400.0, 1_000_000)
    );
    assert!(r.verdict.contains("responsiveness low"), "{}", r.verdict);
    assert!(r.verdict.contains("400.0 ms"), "{}", r.verdict);
    assert!(r.verdict.contains("server to client"), "{}", r.verdict);
    assert!(r.advice.is_some());
}

#[test]
fn warmup_samples_are_left_out() {
    let mut s = PhaseSamples {
        connect: steady(40, 5.0, 4.0),
        ..Default::default()
    };
    s.connect.push(Sample {
        at_s: 0.01,
        ms: 5000.0,
    });
    let p = phase_result(Phase::Upload, 4.0, 0.5, &s, (None, Some(1e6)), 2);
    let c = p.connect.unwrap();
    assert_eq!(c.max_ms, 5.0);
    assert_eq!(c.samples, 35);
    // the series keeps the warm-up, in time order: the outlier at 0.01 s comes first
    assert_eq!(p.connect_series.len(), 41);
    assert_eq!(p.connect_series[0], [0.01, 5000.0]);
    assert!(p.loaded_rtt_series.is_empty());
    assert_eq!(p.probes_failed, 2);
}

#[test]
fn spec_bounds() {
    let ok = RpmSpec {
        phase_s: 5.0,
        warmup_s: 1.0,
        probe_rate_hz: 20.0,
        load_dscp: Some(46),
        probe_dscp: None,
        load_dscp_down: Some(8),
        probe_dscp_down: None,
        window_bytes: None,
        sndbuf_bytes: None,
        inband: true,
    };
    assert!(ok.validate().is_ok());
    for bad in [
        RpmSpec {
            probe_rate_hz: 51.0,
            ..ok.clone()
        },
        RpmSpec {
            warmup_s: 5.0,
            ..ok.clone()
        },
        RpmSpec {
            phase_s: f64::NAN,
            ..ok.clone()
        },
        RpmSpec {
            load_dscp_down: Some(64),
            ..ok.clone()
        },
        RpmSpec {
            probe_dscp: Some(64),
            ..ok.clone()
        },
        RpmSpec {
            probe_dscp_down: Some(64),
            ..ok.clone()
        },
    ] {
        assert!(bad.validate().is_err(), "{bad:?}");
    }
}

#[test]
fn the_server_answers_probes_in_their_class_down_and_reads_its_qdisc_under_load() {
    let s = RpmSpec {
        phase_s: 5.0,
        warmup_s: 1.0,
        probe_rate_hz: 20.0,
        load_dscp: Some(8),
        probe_dscp: Some(40),
        load_dscp_down: Some(46),
        probe_dscp_down: None,
        window_bytes: None,
        sndbuf_bytes: None,
        inband: true,
    };
    // CS5 (40) both ways is TOS 0xa0; the load's own classes do not mark the probes
    let idle = s.server_asks(Phase::Idle);
    assert_eq!((idle.probe_tos, idle.egress_qdisc), (Some(0xa0), false));
    for p in [Phase::Download, Phase::Upload, Phase::Bidir] {
        assert!(s.server_asks(p).egress_qdisc, "{p:?}");
    }
    // CS5/EF: the answers carry EF (0xb8)
    let split = RpmSpec {
        probe_dscp_down: Some(46),
        ..s.clone()
    };
    assert_eq!(split.server_asks(Phase::Upload).probe_tos, Some(0xb8));
    let unmarked = RpmSpec {
        probe_dscp: None,
        ..s
    };
    assert_eq!(unmarked.server_asks(Phase::Idle).probe_tos, None);
}

#[test]
fn a_small_queue_is_named_without_advice_and_none_is_not_named() {
    let idle = PhaseSamples {
        connect: steady(40, 1.0, 4.0),
        ..Default::default()
    };
    let small = PhaseSamples {
        connect: steady(40, 9.0, 4.0),
        loaded_rtt: steady(40, 9.0, 4.0),
        ..Default::default()
    };
    let r = summarize(vec![
        phase_result(Phase::Idle, 4.0, 0.0, &idle, (None, None), 0),
        phase_result(Phase::Upload, 4.0, 0.0, &small, (None, Some(8e6)), 0),
    ]);
    // 60 000 / 9 ms: high; 8 ms added at 8 Mbit/s is 8 000 bytes, client to server
    assert!(
        r.verdict.starts_with("responsiveness high (6667 RPM)"),
        "{}",
        r.verdict
    );
    assert!(r.verdict.contains("client to server"), "{}", r.verdict);
    assert_eq!(r.queueing.as_ref().map(|q| q.queue_bytes), Some(8_000));
    assert_eq!(r.advice, None);
    let flat = PhaseSamples {
        connect: steady(40, 3.0, 4.0),
        ..Default::default()
    };
    let r = summarize(vec![
        phase_result(Phase::Idle, 4.0, 0.0, &idle, (None, None), 0),
        phase_result(Phase::Bidir, 4.0, 0.0, &flat, (Some(1e6), Some(1e6)), 0),
    ]);
    assert!(r.verdict.contains("no standing queue"), "{}", r.verdict);
}

#[test]
fn unsent_data_in_the_sender_is_named_beside_the_path_queue() {
    assert_eq!(median_bytes(vec![5, 1, 9, 7]), Some(5));
    assert_eq!(median_bytes(vec![3]), Some(3));
    assert_eq!(median_bytes(vec![]), None);
    let idle = PhaseSamples {
        connect: steady(40, 1.0, 4.0),
        ..Default::default()
    };
    let loaded = PhaseSamples {
        connect: steady(40, 101.0, 4.0),
        ..Default::default()
    };
    let mut up = phase_result(Phase::Upload, 4.0, 0.0, &loaded, (None, Some(8e6)), 0);
    // 250 000 bytes at 8 Mbit/s: 250 ms more in the sending host
    up.sender_unsent_bytes = Some(250_000);
    let r = summarize(vec![
        phase_result(Phase::Idle, 4.0, 0.0, &idle, (None, None), 0),
        up,
    ]);
    let q = r.queueing.as_ref().unwrap();
    assert_eq!(q.sender_ms, Some(250.0));
    assert!(
        r.verdict.contains("socket buffers (250 ms"),
        "{}",
        r.verdict
    );
}

#[test]
fn one_way_delays_place_the_queue_over_the_phase_guess() {
    let idle = PhaseSamples {
        connect: steady(40, 2.0, 4.0),
        request: vec![],
        loaded_rtt: vec![],
        inband: vec![],
    };
    let loaded = PhaseSamples {
        connect: steady(40, 102.0, 4.0),
        request: vec![],
        loaded_rtt: steady(40, 100.0, 4.0),
        inband: vec![],
    };
    let one_way = |up: f64, down: f64| crate::owd::OneWay::of(&[(up, down)]);
    let mut phases = vec![
        phase_result(Phase::Idle, 4.0, 0.0, &idle, (None, None), 0),
        phase_result(Phase::Bidir, 4.0, 0.0, &loaded, (Some(20e6), Some(20e6)), 0),
    ];
    phases[0].one_way = one_way(0.1, 0.0);
    // the bidirectional phase alone could not say which way: its one-way delays can
    phases[1].one_way = one_way(95.0, 2.0);
    let r = summarize(phases.clone());
    let q = r.queueing.as_ref().unwrap();
    assert_eq!(q.direction, Some(crate::owd::QueueDirection::Upstream));
    assert!(
        r.verdict
            .contains("upstream (client to server), by the one-way delays"),
        "{}",
        r.verdict
    );
    phases[1].one_way = one_way(3.0, 4.0);
    let r = summarize(phases.clone());
    assert_eq!(r.queueing.unwrap().direction, None);
    assert!(r.verdict.contains("one way or both"), "{}", r.verdict);
    phases[1].one_way = None;
    assert_eq!(summarize(phases).queueing.unwrap().direction, None);
}

fn reading(kind: &str, backlog: u64, drops: u64) -> crate::qdisc::QdiscReading {
    crate::qdisc::QdiscReading {
        kind: kind.into(),
        backlog_bytes: backlog,
        backlog_packets: backlog / 1000,
        drops,
        requeues: 0,
        overlimits: drops * 2,
    }
}

fn upload_with_qdisc(q: Option<crate::qdisc::PhaseQdisc>) -> RpmResult {
    let idle = PhaseSamples {
        connect: steady(40, 1.0, 4.0),
        ..Default::default()
    };
    let loaded = PhaseSamples {
        connect: steady(40, 101.0, 4.0),
        ..Default::default()
    };
    let mut up = phase_result(Phase::Upload, 4.0, 0.0, &loaded, (None, Some(8e6)), 0);
    up.qdisc = q;
    summarize(vec![
        phase_result(Phase::Idle, 4.0, 0.0, &idle, (None, None), 0),
        up,
    ])
}

#[test]
fn a_standing_backlog_in_the_client_qdisc_puts_the_queue_in_the_sending_host() {
    let during: Vec<_> = [90_000, 100_000, 110_000]
        .iter()
        .map(|b| reading("pfifo_fast", *b, 0))
        .collect();
    let pq = crate::qdisc::PhaseQdisc::of(
        "wr0",
        &reading("pfifo_fast", 0, 10),
        &during,
        &reading("pfifo_fast", 0, 52),
    );
    assert_eq!(
        (pq.median_backlog_bytes, pq.peak_backlog_bytes, pq.drops),
        (Some(100_000), Some(110_000), Some(42))
    );
    let r = upload_with_qdisc(Some(pq));
    let q = r.queueing.as_ref().unwrap();
    // 100 000 bytes at 8 Mbit/s: 100 ms in the host's qdisc
    assert_eq!(q.host_queue_ms, Some(100.0));
    assert!(r.verdict.contains("in the sending host"), "{}", r.verdict);
    assert!(r.verdict.contains("dropped 42 packets"), "{}", r.verdict);
    let advice = r.advice.unwrap();
    assert!(advice.contains("txqueuelen"), "{advice}");
    assert!(!advice.contains("at the bottleneck"), "{advice}");
}

#[test]
fn an_empty_client_qdisc_leaves_the_queue_on_the_path() {
    let pq = crate::qdisc::PhaseQdisc::of(
        "wr0",
        &reading("fq_codel", 0, 0),
        &[reading("fq_codel", 0, 0), reading("fq_codel", 1500, 0)],
        &reading("fq_codel", 0, 0),
    );
    let r = upload_with_qdisc(Some(pq));
    assert!(r.verdict.contains("client to server"), "{}", r.verdict);
    assert!(!r.verdict.contains("sending host"), "{}", r.verdict);
    assert!(r.advice.unwrap().contains("at the bottleneck"));
}

#[test]
fn noqueue_is_no_qdisc_not_zeros() {
    let n = reading("noqueue", 0, 0);
    let pq = crate::qdisc::PhaseQdisc::of("lo", &n, &[n.clone(), n.clone()], &n);
    assert!(!pq.queued);
    assert_eq!((pq.median_backlog_bytes, pq.drops), (None, None));
    let r = upload_with_qdisc(Some(pq));
    assert!(r.verdict.contains("lo has no qdisc"), "{}", r.verdict);
    // a qdisc replaced in between (counters restart) gives no delta
    let pq = crate::qdisc::PhaseQdisc::of("wr0", &reading("tbf", 0, 9), &[], &reading("tbf", 0, 3));
    assert_eq!((pq.drops, pq.median_backlog_bytes), (None, None));
}

/// A download phase 100 ms over idle at 8 Mbit/s, with the server's egress qdisc `server`
/// and the client's `client`.
fn download_with_qdiscs(
    server: Option<crate::qdisc::PhaseQdisc>,
    client: Option<crate::qdisc::PhaseQdisc>,
) -> RpmResult {
    let idle = PhaseSamples {
        connect: steady(40, 1.0, 4.0),
        ..Default::default()
    };
    let loaded = PhaseSamples {
        connect: steady(40, 101.0, 4.0),
        ..Default::default()
    };
    let mut down = phase_result(Phase::Download, 4.0, 0.0, &loaded, (Some(8e6), None), 0);
    down.server_qdisc = server;
    down.qdisc = client;
    summarize(vec![
        phase_result(Phase::Idle, 4.0, 0.0, &idle, (None, None), 0),
        down,
    ])
}

#[test]
fn a_standing_backlog_in_the_server_qdisc_puts_a_download_queue_there() {
    let during: Vec<_> = [80_000, 95_000, 120_000]
        .iter()
        .map(|b| reading("tbf", *b, 0))
        .collect();
    let pq = crate::qdisc::PhaseQdisc::of(
        "eth1",
        &reading("tbf", 0, 3),
        &during,
        &reading("tbf", 0, 10),
    );
    // the client's own qdisc is empty: the ACKs alone leave by it
    let client = crate::qdisc::PhaseQdisc::of(
        "wr0",
        &reading("fq_codel", 0, 0),
        &[reading("fq_codel", 0, 0)],
        &reading("fq_codel", 0, 0),
    );
    let r = download_with_qdiscs(Some(pq), Some(client));
    let q = r.queueing.as_ref().unwrap();
    // 95 000 bytes at the download's 8 Mbit/s: 95 ms in the server's qdisc
    assert_eq!(q.server_queue_ms, Some(95.0));
    assert_eq!(q.host_queue_ms, None);
    assert!(server_queued(q) && !host_queued(q));
    assert!(
        r.verdict
            .contains("in the server's qdisc, a standing backlog: eth1's tbf qdisc holds"),
        "{}",
        r.verdict
    );
    assert!(r.verdict.contains("dropped 7 packets"), "{}", r.verdict);
    assert!(!r.verdict.contains("sending host"), "{}", r.verdict);
    let advice = r.advice.clone().unwrap();
    assert!(advice.contains("the server's qdisc"), "{advice}");
    assert!(!advice.contains("at the bottleneck"), "{advice}");
    // the same backlog in the JSON, with its time
    let doc = serde_json::to_value(&r).unwrap();
    assert_eq!(doc["queueing"]["server_queue_ms"], 95.0);
    assert_eq!(
        doc["phases"][1]["server_qdisc"]["median_backlog_bytes"],
        95_000
    );
}

#[test]
fn an_empty_server_qdisc_is_named_beside_the_path() {
    let pq = crate::qdisc::PhaseQdisc::of(
        "eth1",
        &reading("fq_codel", 0, 0),
        &[reading("fq_codel", 0, 0), reading("fq_codel", 1500, 0)],
        &reading("fq_codel", 0, 0),
    );
    let r = download_with_qdiscs(Some(pq), None);
    assert!(
        r.verdict.contains("on the path server to client"),
        "{}",
        r.verdict
    );
    assert!(
        r.verdict
            .contains("(server egress: eth1's fq_codel qdisc holds 0 B"),
        "{}",
        r.verdict
    );
    assert!(r.advice.unwrap().contains("at the bottleneck"));
    // a server that does not read its qdisc: nothing said of it
    let r = download_with_qdiscs(None, None);
    assert!(!r.verdict.contains("server egress"), "{}", r.verdict);
    assert_eq!(r.queueing.unwrap().server_queue_ms, None);
}

#[test]
fn ramp_up_ends_when_four_moving_averages_agree_within_five_percent() {
    // slow start: 0.1 s intervals doubling from 1 to 16 Mbit/s, then 20 give or take 2 %
    let mut g: Vec<(f64, f64)> = [1.0, 2.0, 4.0, 8.0, 16.0]
        .iter()
        .chain([20.0, 20.4, 19.6, 20.2, 19.8, 20.0, 20.3, 19.7, 20.0].iter())
        .enumerate()
        .map(|(i, m)| ((i + 1) as f64 * 0.1, m * 1e6))
        .collect();
    // averages from intervals 5-8 on: 19.0, 20.05, 20.0, 19.9 Mbit/s, each within 5 % of
    // their mean (19.74): stable at the end of interval 11, 1.1 s; the one before still
    // holds 16.1 (the 16 Mbit/s interval and the 8 before it)
    let at = ramp_up_s(&g).unwrap();
    assert!((at - 1.1).abs() < 1e-9, "{at}");
    // a rate that keeps climbing never settles
    for (i, x) in g.iter_mut().enumerate() {
        x.1 = 1e6 * 1.1f64.powi(i as i32);
    }
    assert_eq!(ramp_up_s(&g), None);
    // too few intervals, or nothing moved
    assert_eq!(ramp_up_s(&g[..6]), None);
    let zeros: Vec<(f64, f64)> = (0..10).map(|i| (f64::from(i), 0.0)).collect();
    assert_eq!(ramp_up_s(&zeros), None);
    // steady from the start: the earliest possible, the seventh interval's end
    let flat: Vec<(f64, f64)> = (1..=10).map(|i| (f64::from(i) * 0.1, 5e6)).collect();
    assert!((ramp_up_s(&flat).unwrap() - 0.7).abs() < 1e-9);
}

#[test]
fn the_in_band_request_response_is_the_self_part_where_a_phase_has_it() {
    let with = PhaseSamples {
        connect: steady(40, 10.0, 4.0),
        request: steady(40, 10.0, 4.0),
        loaded_rtt: steady(40, 20.0, 4.0),
        inband: steady(40, 50.0, 4.0),
    };
    let p = phase_result(Phase::Upload, 4.0, 1.0, &with, (None, Some(1e6)), 0);
    // 0.5 * 10 + 0.5 * 50 = 30 ms; the TCP_INFO RTT is reported beside it
    assert_eq!(p.rpm, Some(2000.0));
    assert_eq!(p.inband.as_ref().map(|x| x.p50_ms), Some(50.0));
    assert_eq!(p.loaded_rtt.as_ref().map(|x| x.p50_ms), Some(20.0));
    // the warm-up's samples are left out of the figures, kept in the series
    assert_eq!(p.inband.as_ref().map(|x| x.samples), Some(30));
    assert_eq!(p.inband_series.len(), 40);
    let without = PhaseSamples {
        inband: vec![],
        ..with
    };
    let p = phase_result(Phase::Upload, 4.0, 1.0, &without, (None, Some(1e6)), 0);
    assert_eq!(p.rpm, Some(4000.0));
    assert!(p.inband.is_none());
}

#[test]
fn the_verdict_says_what_an_application_on_the_loaded_connections_waited() {
    let idle = PhaseSamples {
        connect: steady(40, 1.0, 4.0),
        ..Default::default()
    };
    let loaded = PhaseSamples {
        connect: steady(40, 101.0, 4.0),
        inband: steady(40, 180.0, 4.0),
        ..Default::default()
    };
    let r = summarize(vec![
        phase_result(Phase::Idle, 4.0, 0.0, &idle, (None, None), 0),
        phase_result(Phase::Download, 4.0, 0.0, &loaded, (Some(8e6), None), 0),
    ]);
    assert!(
        r.verdict.contains(
            "an application's request waited 180.0 ms for its answer under download load"
        ),
        "{}",
        r.verdict
    );
    // no in-band figure, nothing said of it
    let loaded = PhaseSamples {
        inband: vec![],
        ..loaded
    };
    let r = summarize(vec![
        phase_result(Phase::Idle, 4.0, 0.0, &idle, (None, None), 0),
        phase_result(Phase::Download, 4.0, 0.0, &loaded, (Some(8e6), None), 0),
    ]);
    assert!(!r.verdict.contains("in-band"), "{}", r.verdict);
}
