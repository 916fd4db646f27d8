use super::*;

fn gstrings_reply(names: &[&str]) -> Vec<u8> {
    let mut buf = Vec::new();
    buf.extend_from_slice(&ETHTOOL_GSTRINGS.to_ne_bytes());
    buf.extend_from_slice(&ETH_SS_STATS.to_ne_bytes());
    buf.extend_from_slice(&(names.len() as u32).to_ne_bytes());
    for n in names {
        let mut raw = [0u8; ETH_GSTRING_LEN];
        let b = n.as_bytes();
        let k = b.len().min(ETH_GSTRING_LEN);
        raw[..k].copy_from_slice(&b[..k]);
        buf.extend_from_slice(&raw);
    }
    buf
}

fn gstats_reply(values: &[u64]) -> Vec<u8> {
    let mut buf = Vec::new();
    buf.extend_from_slice(&ETHTOOL_GSTATS.to_ne_bytes());
    buf.extend_from_slice(&(values.len() as u32).to_ne_bytes());
    for v in values {
        buf.extend_from_slice(&v.to_ne_bytes());
    }
    buf
}

#[test]
fn replies_parse_with_length_checks() {
    let long = "x".repeat(40);
    let buf = gstrings_reply(&["rx_packets", "rx_missed_errors", &long]);
    let names = parse_strings(&buf, 3).unwrap();
    assert_eq!(names[0], "rx_packets");
    assert_eq!(names[1], "rx_missed_errors");
    // a name filling all 32 bytes has no NUL and is cut at 32
    assert_eq!(names[2], "x".repeat(32));
    assert_eq!(parse_strings(&buf, 2), None, "count changed");
    for cut in 0..buf.len() {
        assert_eq!(parse_strings(&buf[..cut], 3), None);
    }
    let buf = gstats_reply(&[1, u64::MAX, 0]);
    assert_eq!(parse_stats(&buf, 3), Some(vec![1, u64::MAX, 0]));
    assert_eq!(parse_stats(&buf, 4), None);
    for cut in 0..buf.len() {
        assert_eq!(parse_stats(&buf[..cut], 3), None);
    }
    // a header claiming a huge count over a short buffer
    let mut lie = gstats_reply(&[1]);
    lie[4..8].copy_from_slice(&u32::MAX.to_ne_bytes());
    assert_eq!(parse_stats(&lie, u32::MAX as usize), None);
    let mut lie = gstrings_reply(&["a"]);
    lie[8..12].copy_from_slice(&u32::MAX.to_ne_bytes());
    assert_eq!(parse_strings(&lie, u32::MAX as usize), None);
}

#[test]
fn keeps_what_moved_and_every_trouble_counter() {
    let names = NicNames {
        iface: "eth9".into(),
        names: [
            "rx_packets",
            "tx_packets",
            "rx_missed_errors",
            "tx_errors",
            "rx_fifo_errors",
            "link_up_count",
            "rx_queue_0_drops",
        ]
        .map(String::from)
        .to_vec(),
    };
    let before = [100, 50, 7, 1, 0, 3, 0];
    let after = [160, 90, 9, 1, 0, 3, 0];
    let d = nic_delta(&names, &before, &after);
    assert_eq!(d.iface, "eth9");
    let got: Vec<(&str, u64)> = d.counters.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(
        got,
        vec![
            ("rx_fifo_errors", 0),
            ("rx_missed_errors", 2),
            ("rx_packets", 60),
            ("rx_queue_0_drops", 0),
            ("tx_errors", 0),
            ("tx_packets", 40),
        ]
    );
    assert_eq!(d.rx_drops(), 2);
    // a counter that went back (driver reset) is 0, not a wrapped huge number
    let d = nic_delta(&names, &after, &before);
    assert_eq!(d.counters.get("rx_packets"), None);
    assert_eq!(d.counters.get("rx_missed_errors"), Some(&0));
    // mismatched lengths keep only the pairs present
    let d = nic_delta(&names, &before[..2], &after);
    assert_eq!(d.counters.len(), 2);
}

#[test]
fn capped_with_drops_first() {
    let mut all: Vec<String> = (0..300).map(|i| format!("rx_queue_{i}_packets")).collect();
    all.push("rx_no_buffer_count".into());
    all.push("tx_errors".into());
    let n = all.len();
    let names = NicNames {
        iface: "eth9".into(),
        names: all,
    };
    let before = vec![0u64; n];
    let mut after: Vec<u64> = (0..n as u64).collect();
    after[n - 1] = 0;
    let d = nic_delta(&names, &before, &after);
    assert_eq!(d.counters.len(), MAX_KEPT);
    assert!(d.counters.contains_key("rx_no_buffer_count"));
    // the largest movers win the remaining places; the unmoved error counter is last
    assert!(d.counters.contains_key("rx_queue_299_packets"));
    assert!(!d.counters.contains_key("rx_queue_1_packets"));
    assert!(!d.counters.contains_key("tx_errors"));
}

#[test]
fn trouble_names() {
    for n in [
        "rx_missed_errors",
        "tx_errors",
        "rx_fifo_errors",
        "rx_no_buffer_count",
    ] {
        assert!(is_trouble_name(n), "{n}");
    }
    for n in ["rx_packets", "tx_bytes", "peer_ifindex"] {
        assert!(!is_trouble_name(n), "{n}");
    }
}

#[test]
fn loopback_and_bad_names_have_no_statistics() {
    assert_eq!(NicNames::read("lo"), None);
    assert_eq!(NicNames::read(""), None);
    assert_eq!(NicNames::read("a-name-far-too-long-for-linux"), None);
    assert_eq!(NicNames::read("no-such-if0"), None);
    assert_eq!(NicNames::read("bad\0name"), None);
}

/// A network namespace made for the test, deleted on drop whatever happened.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.0])
            .status();
    }
}

fn ip(args: &[&str]) -> bool {
    std::process::Command::new("ip")
        .args(args)
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `f` on a thread that joined the namespace (setns affects only the calling thread).
fn in_netns<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{name}");
    std::thread::spawn(move || {
        let ns = std::fs::File::open(&path).expect("open the namespace");
        // SAFETY: the fd is an open namespace file for the duration of the call; setns
        // changes only this thread, which ends when `f` returns.
        let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns");
        f()
    })
    .join()
    .expect("the namespace thread")
}

#[test]
fn a_real_veth_has_statistics() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: making a network namespace needs root");
        return;
    }
    let name = format!("wrprobe-{}", std::process::id());
    if !ip(&["netns", "add", &name]) {
        println!("skipped: ip netns add failed");
        return;
    }
    let _ns = Netns(name.clone());
    assert!(ip(&[
        "-n", &name, "link", "add", "wra", "type", "veth", "peer", "name", "wrb"
    ]));
    assert!(ip(&["-n", &name, "link", "set", "wra", "up"]));
    assert!(ip(&["-n", &name, "link", "set", "wrb", "up"]));
    let (names, before, after, lo) = in_netns(&name, || {
        let names = NicNames::read("wra");
        let before = names.as_ref().and_then(|n| n.values());
        let after = names.as_ref().and_then(|n| n.values());
        (names, before, after, NicNames::read("lo"))
    });
    assert_eq!(lo, None, "loopback has no statistics");
    let names = names.expect("veth statistics");
    assert!(names.names.iter().any(|n| n == "peer_ifindex"), "{names:?}");
    let (before, after) = (before.expect("values"), after.expect("values"));
    assert_eq!(before.len(), names.names.len());
    let d = nic_delta(&names, &before, &after);
    println!("{d:?}");
    // nothing moved, but the drop counters are kept at 0 and the peer's index is not
    assert!(d.counters.keys().any(|k| is_rx_drop_name(k)), "{d:?}");
    assert!(!d.counters.contains_key("peer_ifindex"));
    assert!(d.counters.values().all(|v| *v == 0));
}
