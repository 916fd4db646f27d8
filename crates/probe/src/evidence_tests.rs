use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use super::*;

#[test]
fn host_key_from_boot_id_and_netns_inode() {
    assert_eq!(
        make_host_key("0e2f-11\n", "net:[4026531840]"),
        Some("0e2f-11:4026531840".into())
    );
    assert_eq!(make_host_key("x", "net:[abc]"), None);
    assert_eq!(make_host_key("x", "mnt:[1]"), None);
    assert_eq!(make_host_key("  \n", "net:[1]"), None);
    assert_eq!(make_host_key("x", "net:[1"), None);
}

/// Sends `bytes` over a loopback TCP connection and waits until all were read.
fn loopback_transfer(bytes: usize) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        let mut buf = vec![0u8; 128 * 1024];
        let mut got = 0;
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            got += n;
        }
        got
    });
    let mut s = TcpStream::connect(addr).expect("connect");
    let chunk = vec![7u8; 128 * 1024];
    let mut sent = 0;
    while sent < bytes {
        let n = chunk.len().min(bytes - sent);
        s.write_all(&chunk[..n]).expect("write");
        sent += n;
    }
    drop(s);
    assert_eq!(reader.join().expect("reader"), bytes);
}

#[test]
fn a_loopback_transfer_moves_the_counters() {
    let mut w = EvidenceWindow::start(&["lo".to_string()]);
    std::thread::sleep(std::time::Duration::from_millis(5));
    w.restart();
    loopback_transfer(50 << 20);
    let t = Instant::now();
    let e = w.finish();
    println!("finish took {:?}\n{e:#?}", t.elapsed());

    assert!(e.window_s > 0.0);
    assert!(e.host_key.is_some());
    let tcp = e.tcp.as_ref().expect("Tcp counters");
    for name in ["InSegs", "OutSegs"] {
        assert!(tcp[name].is_some_and(|v| v > 0), "{name}: {tcp:?}");
    }
    assert_eq!(tcp.len(), TCP_COUNTERS.len());
    assert!(e.tcp_ext.is_some() && e.ip.is_some() && e.udp.is_some());
    assert!(!e.cores.is_empty());
    for c in &e.cores {
        let parts = [
            c.user_percent,
            c.system_percent,
            c.softirq_percent,
            c.irq_percent,
            c.steal_percent,
            c.idle_percent,
        ];
        assert!(parts.iter().all(|p| (0.0..=100.0).contains(p)), "{c:?}");
        assert!((parts.iter().sum::<f64>() - 100.0).abs() < 1e-6, "{c:?}");
    }
    // loopback traffic is received in NET_RX softirqs on some core
    assert!(e.softnet.is_some());
    let rx = e.net_rx_softirqs.as_ref().expect("NET_RX");
    assert!(rx.iter().sum::<u64>() > 0, "{rx:?}");
    // loopback has no driver statistics and no interrupt line
    assert!(e.nic.is_empty());
    assert!(e.irqs.is_empty());
}

#[test]
fn restart_starts_the_window_again() {
    let mut w = EvidenceWindow::start(&[]);
    std::thread::sleep(std::time::Duration::from_millis(50));
    w.restart();
    let e = w.finish();
    assert!(e.window_s < 0.05, "{}", e.window_s);
    if let Some(c) = e.cgroup {
        assert!(c.nr_throttled.is_some());
    }
}

#[test]
fn unknown_interfaces_are_simply_absent() {
    let e = EvidenceWindow::start(&["no-such-if0".into(), String::new()]).finish();
    assert!(e.nic.is_empty() && e.irqs.is_empty());
}
