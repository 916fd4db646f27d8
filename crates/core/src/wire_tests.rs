//! Golden tables for the wire-rate model, worked out by hand, and its invariants.

use super::*;
use proptest::prelude::*;

fn params(link_bps: f64, mtu: u32, proto: WireProto) -> WireParams {
    WireParams {
        mtu,
        ..WireParams::ethernet(link_bps, proto)
    }
}

fn close(got: f64, want: f64, what: &str) {
    let tol = want.abs() * 1e-9;
    assert!((got - want).abs() <= tol, "{what}: got {got}, want {want}");
}

/// Seed 001: 10 Mb/s, full frames. 8 + 6 + 6 + 2 + 1500 + 4 + 12 = 1538 bytes = 12 304 bits
/// = 1230.4 µs at 100 ns per bit; 1 / 1230.4 µs = 812.74382 frames/s.
#[test]
fn seed_001_tcp_without_options() {
    let p = WireParams {
        tcp_timestamps: false,
        ..params(10e6, 1500, WireProto::Tcp)
    };
    let m = model(&p).unwrap();
    assert_eq!(m.wire_bytes_per_frame, 1538);
    assert_eq!(m.payload_bytes_per_frame, 1460);
    assert_eq!(m.mss_bytes, Some(1460));
    assert_eq!(format!("{:.1}", m.frame_time_s * 1e6), "1230.4");
    assert_eq!(format!("{:.5}", m.frames_per_s), "812.74382");
    assert_eq!(format!("{:.2}", m.frames_per_s), "812.74");
    // 1460 × 812.74382 = 1 186 606 B/s.
    assert_eq!(format!("{:.0}", m.goodput_bytes_per_s), "1186606");
    close(m.goodput_bps, 1460.0 * 8.0 * 1e7 / 12304.0, "goodput");
}

/// Seed 001: UDP carries 1500 − 20 − 8 = 1472 bytes: 1472 × 812.74382 = 1 196 358.9 B/s.
#[test]
fn seed_001_udp() {
    let m = model(&params(10e6, 1500, WireProto::Udp)).unwrap();
    assert_eq!(m.payload_bytes_per_frame, 1472);
    assert_eq!(format!("{:.1}", m.goodput_bytes_per_s), "1196358.9");
}

/// Seed 001: the whole 1500-byte data field, 1500 × 812.74382 = 1 219 115.7 B/s.
#[test]
fn seed_001_raw_data_field() {
    let m = model(&params(10e6, 1500, WireProto::Raw)).unwrap();
    assert_eq!(m.payload_bytes_per_frame, 1500);
    assert_eq!(format!("{:.1}", m.goodput_bytes_per_s), "1219115.7");
}

struct Golden {
    what: &'static str,
    p: WireParams,
    wire: u32,
    payload: u32,
    padding: u32,
    frames_per_s: f64,
    goodput_bps: f64,
}

/// Cases worked out by hand: wire = 8 + 14 [+ 4] + max(data, 46 [or 42 tagged]) + 4 + 12;
/// frames/s = rate ÷ (8 × wire); goodput = rate × payload ÷ wire.
fn golden() -> Vec<Golden> {
    let tcp = |rate, mtu| params(rate, mtu, WireProto::Tcp);
    let udp = |rate, mtu| params(rate, mtu, WireProto::Udp);
    let raw = |rate, mtu| params(rate, mtu, WireProto::Raw);
    vec![
        // 1500 − 20 − 20 − 12 = 1448; 1e7 × 1448 / 1538.
        Golden {
            what: "10M TCP timestamps",
            p: tcp(10e6, 1500),
            wire: 1538,
            payload: 1448,
            padding: 0,
            frames_per_s: 812.743_823_146_944_1,
            goodput_bps: 9_414_824.447_334_2,
        },
        // The familiar 941 Mbit/s of gigabit TCP: 1e9 × 1448 / 1538.
        Golden {
            what: "1G TCP timestamps",
            p: tcp(1e9, 1500),
            wire: 1538,
            payload: 1448,
            padding: 0,
            frames_per_s: 81_274.382_314_694_4,
            goodput_bps: 941_482_444.733_42,
        },
        // IPv6: 1500 − 40 − 32 = 1428; 1e9 × 1428 / 1538.
        Golden {
            what: "1G TCP IPv6",
            p: WireParams {
                ipv6: true,
                ..tcp(1e9, 1500)
            },
            wire: 1538,
            payload: 1428,
            padding: 0,
            frames_per_s: 81_274.382_314_694_4,
            goodput_bps: 928_478_543.563_069,
        },
        // Jumbo: 9000 − 52 = 8948 in 9038 wire bytes; 1e10 × 8948 / 9038.
        Golden {
            what: "10G TCP jumbo",
            p: tcp(1e10, 9000),
            wire: 9038,
            payload: 8948,
            padding: 0,
            frames_per_s: 138_304.934_720_070_8,
            goodput_bps: 9_900_420_447.001_549,
        },
        // A tag adds 4: 1542 wire bytes; 1e9 × 1472 / 1542.
        Golden {
            what: "1G UDP VLAN",
            p: WireParams {
                vlan: true,
                ..udp(1e9, 1500)
            },
            wire: 1542,
            payload: 1472,
            padding: 0,
            frames_per_s: 81_063.553_826_199_74,
            goodput_bps: 954_604_409.857_328_2,
        },
        // 1 byte: 20 + 8 + 1 = 29 in a 14 + 29 + 4 = 47-byte frame, padded by 17 to 64; 84 on
        // the wire: the 1.488 Mpps of gigabit line rate.
        Golden {
            what: "1G UDP 1 byte",
            p: WireParams {
                payload: Some(1),
                ..udp(1e9, 1500)
            },
            wire: 84,
            payload: 1,
            padding: 17,
            frames_per_s: 1_488_095.238_095_238,
            goodput_bps: 11_904_761.904_761_905,
        },
        // 18 bytes fill the 46-byte minimum data field exactly: no padding.
        Golden {
            what: "1G UDP 18 bytes",
            p: WireParams {
                payload: Some(18),
                ..udp(1e9, 1500)
            },
            wire: 84,
            payload: 18,
            padding: 0,
            frames_per_s: 1_488_095.238_095_238,
            goodput_bps: 214_285_714.285_714_3,
        },
        // Raw 46 bytes: the minimum frame, 46 / 84 of the line.
        Golden {
            what: "1G raw minimum",
            p: WireParams {
                payload: Some(46),
                ..raw(1e9, 1500)
            },
            wire: 84,
            payload: 46,
            padding: 0,
            frames_per_s: 1_488_095.238_095_238,
            goodput_bps: 547_619_047.619_047_6,
        },
        // Tagged minimum frame holds 42 data bytes; 41 needs 1 byte of padding.
        Golden {
            what: "1G raw tagged 41",
            p: WireParams {
                vlan: true,
                payload: Some(41),
                ..raw(1e9, 1500)
            },
            wire: 84,
            payload: 41,
            padding: 1,
            frames_per_s: 1_488_095.238_095_238,
            goodput_bps: 488_095_238.095_238_1,
        },
        // 100 Mb/s, TCP segments of 100 bytes without options: 8 + 14 + 140 + 4 + 12 = 178.
        Golden {
            what: "100M TCP 100-byte segments",
            p: WireParams {
                tcp_timestamps: false,
                payload: Some(100),
                ..tcp(1e8, 1500)
            },
            wire: 178,
            payload: 100,
            padding: 0,
            frames_per_s: 70_224.719_101_123_6,
            goodput_bps: 56_179_775.280_898_88,
        },
    ]
}

#[test]
fn golden_table() {
    for g in golden() {
        let m = model(&g.p).unwrap_or_else(|e| panic!("{}: {e}", g.what));
        assert_eq!(m.wire_bytes_per_frame, g.wire, "{}", g.what);
        assert_eq!(m.payload_bytes_per_frame, g.payload, "{}", g.what);
        assert_eq!(m.padding_bytes, g.padding, "{}", g.what);
        close(m.frames_per_s, g.frames_per_s, g.what);
        close(m.goodput_bps, g.goodput_bps, g.what);
        close(m.efficiency, g.goodput_bps / g.p.link_bps, g.what);
        close(m.frame_time_s, 1.0 / g.frames_per_s, g.what);
    }
}

#[test]
fn fields_add_up_to_the_frame() {
    for g in golden() {
        let m = model(&g.p).unwrap();
        let rows = fields(&g.p, &m);
        let top: u32 = rows.iter().filter(|r| !r.nested).map(|r| r.bytes).sum();
        let inner: u32 = rows.iter().filter(|r| r.nested).map(|r| r.bytes).sum();
        assert_eq!(top, m.wire_bytes_per_frame, "{}", g.what);
        assert_eq!(inner, m.data_field_bytes + m.padding_bytes, "{}", g.what);
        let t: f64 = rows.iter().filter(|r| !r.nested).map(|r| r.time_s).sum();
        close(t, m.frame_time_s, g.what);
    }
}

#[test]
fn seed_fields_in_microseconds() {
    let p = WireParams {
        tcp_timestamps: false,
        ..params(10e6, 1500, WireProto::Tcp)
    };
    let m = model(&p).unwrap();
    let us: Vec<String> = fields(&p, &m)
        .iter()
        .filter(|r| !r.nested)
        .map(|r| format!("{:.1}", r.time_s * 1e6))
        .collect();
    assert_eq!(us, ["6.4", "4.8", "4.8", "1.6", "1200.0", "3.2", "9.6"]);
}

#[test]
fn invalid_inputs_are_errors() {
    let ok = params(1e9, 1500, WireProto::Udp);
    for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(
            model(&WireParams {
                link_bps: rate,
                ..ok.clone()
            })
            .is_err(),
            "rate {rate}"
        );
    }
    assert!(matches!(
        model(&WireParams {
            mtu: 67,
            ..ok.clone()
        }),
        Err(WireError::MtuTooSmall { .. })
    ));
    assert!(matches!(
        model(&WireParams {
            mtu: 1279,
            ipv6: true,
            ..ok.clone()
        }),
        Err(WireError::MtuTooSmall { .. })
    ));
    assert!(matches!(
        model(&WireParams {
            mtu: 65_536,
            ..ok.clone()
        }),
        Err(WireError::MtuTooLarge { .. })
    ));
    assert!(matches!(
        model(&WireParams {
            payload: Some(0),
            ..ok.clone()
        }),
        Err(WireError::EmptyPayload)
    ));
    assert!(matches!(
        model(&WireParams {
            payload: Some(1473),
            ..ok.clone()
        }),
        Err(WireError::PayloadTooLarge { max: 1472, .. })
    ));
    let tcp = params(1e9, 1500, WireProto::Tcp);
    assert!(matches!(
        model(&WireParams {
            payload: Some(1449),
            ..tcp
        }),
        Err(WireError::PayloadTooLarge { max: 1448, .. })
    ));
    assert!(model(&params(1e9, 0, WireProto::Raw)).is_err());
}

#[test]
fn serde_names_are_lowercase() {
    let p = params(1e7, 1500, WireProto::Tcp);
    let v = serde_json::to_value(&p).unwrap();
    assert_eq!(v["proto"], "tcp");
    let back: WireParams = serde_json::from_value(v).unwrap();
    assert_eq!(back, p);
}

#[test]
fn run_summary_keeps_unknowns_null() {
    assert_eq!(
        run_summary(None, None, 9e6),
        crate::result::WireSummary::default()
    );
    let p = params(10e6, 1500, WireProto::Tcp);
    let s = run_summary(Some(&p), Some("lab"), 9_400_000.0);
    assert_eq!(s.link_bps, Some(10e6));
    assert_eq!(s.mtu_bytes, Some(1500));
    assert_eq!(s.link_source.as_deref(), Some("lab"));
    close(s.model_goodput_bps.unwrap(), 9_414_824.447_334_2, "model");
    close(
        s.efficiency.unwrap(),
        9_400_000.0 / 9_414_824.447_334_2,
        "efficiency",
    );
    let odd = WireParams {
        mtu: 20,
        ..p.clone()
    };
    let s = run_summary(Some(&odd), None, 1e6);
    assert_eq!((s.link_bps, s.model_goodput_bps), (Some(10e6), None));
    assert_eq!(run_summary(Some(&p), None, f64::NAN).efficiency, None);
    let bad = WireParams { link_bps: 0.0, ..p };
    assert_eq!(
        run_summary(Some(&bad), None, 1e6),
        crate::result::WireSummary::default()
    );
}

fn any_proto() -> impl Strategy<Value = WireProto> {
    prop_oneof![
        Just(WireProto::Tcp),
        Just(WireProto::Udp),
        Just(WireProto::Raw)
    ]
}

proptest! {
    #[test]
    fn goodput_never_exceeds_the_link(
        link_bps in 1.0f64..1e13,
        mtu in 0u32..70_000,
        proto in any_proto(),
        ipv6: bool,
        vlan: bool,
        tcp_timestamps: bool,
        payload in proptest::option::of(0u32..70_000),
    ) {
        let p = WireParams { link_bps, mtu, proto, ipv6, vlan, tcp_timestamps, payload };
        if let Ok(m) = model(&p) {
            prop_assert!(m.goodput_bps <= link_bps);
            prop_assert!(m.efficiency > 0.0 && m.efficiency < 1.0);
            prop_assert!(m.wire_bytes_per_frame >= 84);
            prop_assert!(m.payload_bytes_per_frame <= m.max_payload_bytes);
            prop_assert!((m.frames_per_s * m.frame_time_s - 1.0).abs() < 1e-9);
        }
    }

    #[test]
    fn never_panics(link_bps: f64, mtu: u32, proto in any_proto(), ipv6: bool, vlan: bool,
                    tcp_timestamps: bool, payload: Option<u32>) {
        let p = WireParams { link_bps, mtu, proto, ipv6, vlan, tcp_timestamps, payload };
        if let Ok(m) = model(&p) {
            let _ = fields(&p, &m);
        }
    }
}

/// A run across a lab path: 50 Mbit/s, 25 ms each way, the sender's TCP_INFO given.
fn path_run(snd_wnd: u64, loss_percent: f64, cc: &str) -> crate::RunResult {
    use crate::result::{PathDirection, TcpInfo, WirePath};
    let mut r = crate::synth::run(1, 10e6, 1);
    let dir = PathDirection {
        delay_ms: 25.0,
        loss_percent,
        ..Default::default()
    };
    r.summary.goodput_bps = 10e6;
    r.summary.wire = WireSummary {
        link_bps: Some(50e6),
        link_source: Some("lab pw".into()),
        mtu_bytes: Some(1500),
        path: Some(WirePath {
            client_to_server: dir,
            server_to_client: PathDirection {
                loss_percent: 0.0,
                ..dir
            },
        }),
        ..Default::default()
    };
    r.streams = vec![crate::result::StreamResult {
        id: 0,
        flow: crate::spec::Flow::ClientToServer,
        sender: Default::default(),
        receiver: Default::default(),
        goodput_bps: 10e6,
        tcp_sender: Some(TcpInfo {
            snd_wnd: Some(snd_wnd),
            snd_mss: Some(1448),
            min_rtt_us: Some(50_000),
            congestion: Some(cc.into()),
            timestamps: Some(true),
            ..Default::default()
        }),
        tcp_receiver: None,
    }];
    r
}

#[test]
fn a_delayed_path_is_bounded_by_the_window_over_the_round_trip_and_by_its_loss() {
    use crate::result::PathLimit;
    // 64 KiB over 50 ms: 10.49 Mbit/s, under the wire's 47 Mbit/s
    let mut r = path_run(65_536, 0.0, "cubic");
    complete(&mut r);
    let m = r.summary.wire.path_model.expect("a path model");
    assert_eq!(m.limit, PathLimit::Window);
    close(m.goodput_bps, 65_536.0 * 8.0 / 0.05, "window bound");
    close(m.efficiency.unwrap(), 10e6 / m.goodput_bps, "efficiency");
    // a window of 4 MiB: the wire bounds it
    let mut r = path_run(4 << 20, 0.0, "cubic");
    complete(&mut r);
    let m = r.summary.wire.path_model.unwrap();
    assert_eq!(m.limit, PathLimit::Wire);
    close(
        m.goodput_bps,
        r.summary.wire.model_goodput_bps.unwrap(),
        "the wire model",
    );
    // 0.5 % loss, cubic: Mathis 1448 B × 8 / (50 ms × √0.005) × √1.5 = 4.01 Mbit/s
    let mut r = path_run(4 << 20, 0.5, "cubic");
    complete(&mut r);
    let m = r.summary.wire.path_model.unwrap();
    assert_eq!(m.limit, PathLimit::Loss);
    close(
        m.goodput_bps,
        1448.0 * 8.0 / (0.05 * 0.005f64.sqrt()) * 1.5f64.sqrt(),
        "Mathis",
    );
    // bbr does not take loss as congestion: no loss bound
    let mut r = path_run(4 << 20, 0.5, "bbr");
    complete(&mut r);
    assert_eq!(r.summary.wire.path_model.unwrap().limit, PathLimit::Wire);
    // no path, no path model
    let mut r = path_run(65_536, 0.0, "cubic");
    r.summary.wire.path = None;
    complete(&mut r);
    assert!(r.summary.wire.path_model.is_none());
}
