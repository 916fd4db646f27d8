use super::*;

/// The server's clock: 7.5 s ahead of the client's and running 200 ppm fast.
fn server_clock(t: f64) -> f64 {
    7.5 + t * (1.0 + 200e-6)
}

/// Probes sent once a second for 12 s, 2 ms up, 0.1 ms in the server, 3 ms down; `queued(i)`
/// is the delay added upstream to probe i.
fn probes(queued: impl Fn(usize) -> f64) -> Vec<Stamps> {
    (0..12)
        .map(|i| {
            let t = i as f64;
            let arrive = t + 0.002 + queued(i);
            let leave = arrive + 0.0001;
            Stamps {
                client_send_s: t,
                server_recv_s: server_clock(arrive),
                server_send_s: server_clock(leave),
                client_recv_s: leave + 0.003,
            }
        })
        .collect()
}

#[test]
fn a_constant_offset_and_a_drift_are_removed_whole() {
    let added = added_ms(&probes(|_| 0.0));
    assert_eq!(added.len(), 12);
    for (up, down) in added {
        assert!(up.abs() < 1e-6 && down.abs() < 1e-6, "{up} {down}");
    }
}

#[test]
fn a_queue_added_upstream_shows_only_upstream() {
    // 40 ms more upstream for probes 4..=7 (a third of the test): on the server's clock,
    // which runs 200 ppm fast, 40 × 1.0002 = 40.008 ms; downstream the probes leave the
    // server 40 ms later, which its drift turns into 40 ms × 200 ppm = 8 µs: under 0.01 ms
    let added = added_ms(&probes(|i| if (4..=7).contains(&i) { 0.040 } else { 0.0 }));
    for (i, (up, down)) in added.iter().enumerate() {
        let want = if (4..=7).contains(&i) { 40.008 } else { 0.0 };
        assert!((up - want).abs() < 1e-6, "probe {i}: up {up}, want {want}");
        assert!(down.abs() < 0.01, "probe {i}: down {down}");
    }
    let phase = OneWay::of(&added[4..=7]).unwrap();
    assert_eq!(phase.samples, 4);
    assert!((phase.up_p50_ms - 40.008).abs() < 1e-6, "{phase:?}");
    assert!(phase.down_p90_ms.abs() < 0.01, "{phase:?}");
    assert_eq!(phase.queued(5.0), Some(QueueDirection::Upstream));
    let idle = OneWay::of(&added[..4]).unwrap();
    assert_eq!(idle.queued(5.0), None);
}

#[test]
fn queue_direction_by_the_medians() {
    let of = |up: f64, down: f64| OneWay::of(&[(up, down)]).unwrap().queued(5.0);
    assert_eq!(of(1.0, 30.0), Some(QueueDirection::Downstream));
    assert_eq!(of(20.0, 15.0), Some(QueueDirection::Both));
    assert_eq!(of(20.0, -3.0), Some(QueueDirection::Upstream));
    assert_eq!(of(4.0, 1.0), None);
}

#[test]
fn percentiles_are_nearest_rank_over_the_phase() {
    // up 1..=10 ms: p50 the 5th value, p90 the 9th
    let v: Vec<(f64, f64)> = (1..=10).map(|i| (i as f64, 0.0)).collect();
    let o = OneWay::of(&v).unwrap();
    assert_eq!((o.up_p50_ms, o.up_p90_ms, o.samples), (5.0, 9.0, 10));
    assert_eq!(OneWay::of(&[]), None);
}

#[test]
fn a_probe_with_a_broken_time_is_left_out() {
    let mut p = probes(|_| 0.0);
    p[3].server_recv_s = f64::NAN;
    let added = added_ms(&p);
    assert!(added[3].0.is_nan() && added[3].1.is_nan());
    assert!(added
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3)
        .all(|(_, (u, d))| u.abs() < 1e-6 && d.abs() < 1e-6));
    assert!(added_ms(&[]).is_empty());
    // one probe: its own base
    assert_eq!(added_ms(&p[..1]), vec![(0.0, 0.0)]);
}

#[test]
fn the_series_pairs_each_probe_time_with_its_added_delays() {
    // probe 1 met 40 ms upstream; probe 2's stamps were not finite
    let added = [(0.01234, 0.02), (40.0004, 0.1), (f64::NAN, f64::NAN)];
    let s = series(&[2.5, 0.5, 1.0], &added);
    assert_eq!(s, vec![[0.5, 40.0, 0.1], [2.5, 0.012, 0.02]]);
    assert!(series(&[], &added).is_empty());
}
