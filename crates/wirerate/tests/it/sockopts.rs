//! iperf3's data-socket options on real sockets over loopback: an IPv6 flow label (`-L`,
//! on ::1), MPTCP sockets (`-m`), don't-fragment on UDP (`--dont-fragment`) and fair-queue
//! pacing (`--fq-rate`, the same as TCP's `-b`).

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{free_port, json, run, stderr, wait_bounded};

const LIMIT: Duration = Duration::from_secs(30);

/// `wirerate serve` on ::1, killed by PID when dropped.
struct V6Server(std::process::Child, u16);

impl V6Server {
    fn start() -> V6Server {
        let port = free_port();
        let child = common::spawn_quiet(&["serve", "-B", "::1", "-p", &port.to_string()]);
        let s = V6Server(child, port);
        common::wait_listening(SocketAddr::from(([0, 0, 0, 0, 0, 0, 0, 1], port)), "server");
        s
    }
}

impl Drop for V6Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The kernel's table of flow labels in use: (label in hex, users) towards ::1.
fn labels_to_loopback() -> Vec<(String, u32)> {
    let t = std::fs::read_to_string("/proc/net/ip6_flowlabel").unwrap_or_default();
    t.lines()
        .skip(1)
        .filter_map(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            let to_lo = c.get(6)? == &"00000000000000000000000000000001";
            to_lo.then(|| Some((c[0].to_string(), c.get(3)?.parse().ok()?)))?
        })
        .collect()
}

#[test]
fn flowlabel_is_taken_for_every_tcp_stream_on_ipv6() {
    let srv = V6Server::start();
    let p = srv.1.to_string();
    let args = [
        "run", "::1", "-p", &p, "-t", "3", "-P", "2", "-L", "0x2a5c1", "--json",
    ];
    let child = common::spawn_piped(&args);
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut seen = None;
    while seen.is_none() && Instant::now() < deadline {
        seen = labels_to_loopback()
            .into_iter()
            .find(|(l, _)| l.eq_ignore_ascii_case("2a5c1"));
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = wait_bounded(child, LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let (_, users) = seen.expect("the flow label 2a5c1 never appeared in /proc/net/ip6_flowlabel");
    assert!(
        users >= 2,
        "{users} sockets hold the label, not the two streams"
    );
    assert!(json(&out)["summary"]["goodput_bps"].as_f64().unwrap() > 0.0);
    // an IPv4 server cannot carry one; a label has 20 bits
    let v4 = run(&["run", "-t", "1", "-L", "5", "--no-store"], LIMIT);
    assert_eq!(v4.status.code(), Some(1), "{}", stderr(&v4));
    assert!(stderr(&v4).contains("needs an IPv6"), "{}", stderr(&v4));
    for bad in ["0", "0x100000", "x"] {
        let out = run(&["run", "::1", "-p", &p, "-L", bad], LIMIT);
        assert_eq!(out.status.code(), Some(2), "-L {bad}: {}", stderr(&out));
    }
}

/// One MPTCP counter of the host (`/proc/net/netstat`, MPTcpExt).
fn mptcp_counter(name: &str) -> u64 {
    let t = std::fs::read_to_string("/proc/net/netstat").unwrap_or_default();
    let rows: Vec<&str> = t.lines().filter(|l| l.starts_with("MPTcpExt:")).collect();
    let (Some(h), Some(v)) = (rows.first(), rows.get(1)) else {
        return 0;
    };
    h.split_whitespace()
        .zip(v.split_whitespace())
        .find(|(k, _)| *k == name)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn mptcp_streams_open_mptcp_sockets() {
    let enabled = std::fs::read_to_string("/proc/sys/net/mptcp/enabled").unwrap_or_default();
    if enabled.trim() != "1" {
        // the refusal is what there is to test here
        let out = run(&["run", "-t", "1", "-m", "--no-store"], LIMIT);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        return;
    }
    let before = mptcp_counter("MPCapableSYNTX");
    let out = run(
        &["run", "-t", "1", "-P", "2", "-m", "--json", "--no-store"],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(json(&out)["summary"]["goodput_bps"].as_f64().unwrap() > 0.0);
    // each data stream's SYN offered MPTCP (the server, plain TCP, declined it)
    let sent = mptcp_counter("MPCapableSYNTX") - before;
    assert!(sent >= 2, "{sent} MP_CAPABLE SYNs for two streams");
    let udp = run(&["run", "-u", "-m"], LIMIT);
    assert_eq!(udp.status.code(), Some(2), "{}", stderr(&udp));
}

#[test]
fn dont_fragment_and_fq_rate_are_taken() {
    let out = run(
        &[
            "run",
            "-u",
            "-b",
            "20M",
            "-l",
            "1400",
            "-t",
            "1",
            "--dont-fragment",
            "--json",
            "--no-store",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(json(&out)["summary"]["udp"]["received"].as_u64().unwrap() > 100);
    let tcp = run(&["run", "--dont-fragment", "-t", "1"], LIMIT);
    assert_eq!(tcp.status.code(), Some(2), "--dont-fragment is for UDP");
    // --fq-rate is TCP's -b: the kernel paces each stream
    let out = run(
        &["run", "-t", "2", "--fq-rate", "40M", "--json", "--no-store"],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let j = json(&out);
    assert_eq!(j["spec"]["rate_bps"].as_f64(), Some(40e6), "{}", j["spec"]);
    let goodput = j["summary"]["goodput_bps"].as_f64().unwrap();
    assert!(goodput < 80e6, "paced at 40 Mbit/s, yet {goodput} bit/s");
    for clash in [
        &["-u", "--fq-rate", "1M"][..],
        &["-b", "1M", "--fq-rate", "1M"][..],
    ] {
        let out = run(&[&["run"][..], clash].concat(), LIMIT);
        assert_eq!(out.status.code(), Some(2), "{clash:?}: {}", stderr(&out));
    }
}
