//! End-to-end tests of `wirerate wire`, the wire-rate calculator: the seed's figures to
//! the digit, the JSON contract, and one-line usage errors.

use crate::common;

use std::process::{Command, Output};

use common::ok;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_wirerate");

fn wire(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("wire")
        .args(args)
        .output()
        .expect("run the wirerate binary")
}

#[test]
fn seed_001_tcp_breakdown() {
    let text = ok(&wire(&["--link", "10M", "--no-timestamps"]), "wire");
    for want in [
        "preamble+SFD",
        "6.4 µs",
        "4.8 µs",
        "1.6 µs",
        "1200.0 µs",
        "3.2 µs",
        "9.6 µs",
        "1230.4 µs",
        "frames/s     812.7\n",
        "1460 B",
        "1186606 B/s",
        "1219116 B/s",
    ] {
        assert!(text.contains(want), "{want:?} missing from\n{text}");
    }
    // no more digits than a link rate given as "10M" justifies
    assert!(!text.contains("812.74"), "{text}");
}

#[test]
fn seed_001_udp_goodput() {
    let text = ok(&wire(&["--link", "10M", "--proto", "udp"]), "wire");
    assert!(text.contains("1472 B × 812.7/s = 1196359 B/s"), "{text}");
}

#[test]
fn json_carries_the_contract_fields() {
    let v: Value = serde_json::from_str(&ok(&wire(&["--link", "10M", "--json"]), "wire")).unwrap();
    assert_eq!(v["wire_bytes_per_frame"], 1538);
    assert_eq!(v["payload_bytes_per_frame"], 1448);
    assert_eq!(v["params"]["proto"], "tcp");
    assert_eq!(v["params"]["tcp_timestamps"], true);
    let f = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} missing"));
    assert!((f("frame_time_s") - 1230.4e-6).abs() < 1e-12);
    assert!((f("frames_per_s") - 812.743_823_146_944).abs() < 1e-9);
    assert!((f("goodput_bps") - 1e7 * 1448.0 / 1538.0).abs() < 1e-6);
    assert!((f("efficiency") - 1448.0 / 1538.0).abs() < 1e-12);
}

#[test]
fn jumbo_ipv6_vlan_and_payload() {
    let v: Value = serde_json::from_str(&ok(
        &wire(&[
            "--link",
            "10G",
            "--mtu",
            "9000",
            "--ipv6",
            "--vlan",
            "--proto",
            "udp",
            "--payload",
            "8K",
            "--json",
        ]),
        "wire",
    ))
    .unwrap();
    // 8 + 14 + 4 + (40 + 8 + 8192) + 4 + 12 = 8282 bytes on the wire.
    assert_eq!(v["wire_bytes_per_frame"], 8282);
    assert_eq!(v["payload_bytes_per_frame"], 8192);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for args in [
        &["--link", "fast"][..],
        &[],
        &["--link", "0"],
        &["--link", "-5M"],
        &["--link", "10M", "--mtu", "60"],
        &["--link", "10M", "--mtu", "1200", "--ipv6"],
        &["--link", "10M", "--proto", "udp", "--payload", "1473"],
        &["--link", "10M", "--payload", "0"],
        &["--link", "10M", "--mtu", "99999999999T"],
    ] {
        let out = wire(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
}

#[test]
fn an_interface_without_a_speed_needs_link() {
    // Loopback has an MTU but no link speed.
    let out = wire(&["--dev", "lo"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("give --link") && err.lines().count() == 1,
        "{err}"
    );
    let v: Value = serde_json::from_str(&ok(
        &wire(&["--dev", "lo", "--link", "10G", "--mtu", "9000", "--json"]),
        "wire",
    ))
    .unwrap();
    assert_eq!(v["params"]["mtu"], 9000);
}

#[test]
fn help_explains_units() {
    let text = ok(&wire(&["--help"]), "wire");
    assert!(
        text.contains("powers of 1000") && text.contains("powers of 1024"),
        "{text}"
    );
}
