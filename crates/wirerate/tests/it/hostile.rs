//! Regressions of the hostile-client review of `wirerate serve`: silent and crawling clients,
//! tests without a time bound, absurd rates, handshake floods, memory that stayed held,
//! malformed frames without an answer, and imports of impossible results. Each test runs the
//! real binary over loopback and kills only the processes it started.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{connect_from, quick_test, run, stderr, threads, ServerProc};
use wirerate_core::spec::{Direction, End, Flow, Protocol};
use wirerate_core::TestSpec;
use wirerate_proto::data::DataHello;
use wirerate_proto::{ClientEvent, ClientSession, ProtoError, Token};

const LIMIT: Duration = Duration::from_secs(30);

/// Seconds until a quick test succeeds, polling every 100 ms up to `limit`.
fn seconds_until_served(port: u16, limit: Duration) -> f64 {
    let t0 = Instant::now();
    loop {
        let out = quick_test(port);
        if out.status.success() {
            return t0.elapsed().as_secs_f64();
        }
        assert!(
            t0.elapsed() < limit,
            "still not served after {limit:?}: {}",
            stderr(&out)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn spawn_client(args: &[&str]) -> Child {
    common::wr()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn client")
}

/// Freezes a child we started (a client whose cable was pulled: its sockets stay open).
fn freeze(c: &Child) {
    // SAFETY: a signal to our own child, by its PID.
    unsafe {
        libc::kill(c.id() as i32, libc::SIGSTOP);
    }
}

fn kill(mut c: Child) {
    let _ = c.kill();
    let _ = c.wait();
}

/// A client speaking the protocol by hand: connects and sends `spec` unchecked.
struct Raw {
    ctl: TcpStream,
    sess: ClientSession,
}

impl Raw {
    fn start(port: u16, spec: &TestSpec) -> Raw {
        let ctl = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut r = Raw {
            ctl,
            sess: ClientSession::new(spec, Instant::now(), Duration::from_secs(30)),
        };
        r.flush();
        r
    }

    fn flush(&mut self) {
        while let Some(b) = self.sess.poll_transmit() {
            let _ = self.ctl.write_all(&b);
        }
    }

    /// Reads the control connection for up to `wait`: the events, or the session's error.
    fn poll(&mut self, wait: Duration) -> Result<Vec<ClientEvent>, ProtoError> {
        self.ctl
            .set_read_timeout(Some(wait.max(Duration::from_millis(1))))
            .unwrap();
        let mut buf = [0u8; 65536];
        let r = match self.ctl.read(&mut buf) {
            Ok(0) => self.sess.handle_close().map(|()| Vec::new()),
            Ok(n) => self.sess.handle_input(&buf[..n], Instant::now()),
            Err(_) => Ok(Vec::new()),
        };
        self.flush();
        r
    }

    fn until_accepted(&mut self) -> Result<Token, ProtoError> {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            for ev in self.poll(Duration::from_millis(200))? {
                if let ClientEvent::Accepted(t, _) = ev {
                    return Ok(t);
                }
            }
        }
        panic!("no answer to the spec");
    }
}

fn reverse_spec(seconds: f64) -> TestSpec {
    TestSpec {
        direction: Direction::Reverse,
        end: End::Time { seconds },
        len_bytes: 128 << 10,
        ..Default::default()
    }
}

#[test]
fn a_silent_udp_uploader_frees_the_slot_within_the_idle_timeout() {
    let _heavy = common::heavy();
    let srv = ServerProc::start(&["--idle-timeout", "1"]);
    let p = srv.port.to_string();
    let client = spawn_client(&["run", "127.0.0.1", "-p", &p, "-u", "-b", "20M", "-t", "60"]);
    std::thread::sleep(Duration::from_millis(1500));
    freeze(&client);
    let waited = seconds_until_served(srv.port, Duration::from_secs(6));
    kill(client);
    // the idle timeout (1 s), and a little for the quick test itself
    assert!(
        waited < 3.0,
        "slot held {waited:.1} s after the client went silent"
    );
    let log = srv.stop_after("stalled");
    assert!(log.contains("stalled"), "{log}");
}

#[test]
fn a_reader_that_stops_reading_frees_the_slot_within_the_idle_timeout() {
    let _heavy = common::heavy();
    let srv = ServerProc::start(&["--idle-timeout", "1"]);
    let p = srv.port.to_string();
    let client = spawn_client(&["run", "127.0.0.1", "-p", &p, "-R", "-t", "60"]);
    std::thread::sleep(Duration::from_millis(1500));
    freeze(&client);
    let waited = seconds_until_served(srv.port, Duration::from_secs(6));
    kill(client);
    assert!(
        waited < 3.0,
        "slot held {waited:.1} s by a reader that stopped"
    );
}

/// A paced stream may be silent for three of its pace's gaps (64 KiB at 1 Mbit/s: 0.5 s),
/// but one that really stops is still a stall.
#[test]
fn a_paced_stream_whose_reader_stops_is_still_stalled() {
    let _heavy = common::heavy();
    let srv = ServerProc::start(&["--idle-timeout", "1"]);
    let p = srv.port.to_string();
    let client = spawn_client(&["run", "127.0.0.1", "-p", &p, "-R", "-b", "1M", "-t", "60"]);
    std::thread::sleep(Duration::from_millis(1500));
    freeze(&client);
    let waited = seconds_until_served(srv.port, Duration::from_secs(15));
    kill(client);
    // the reader's buffer fills at the pace, then the stall limit (1.57 s) and the
    // watchdog's two idle timeouts
    assert!(
        waited < 10.0,
        "slot held {waited:.1} s by a paced reader that stopped"
    );
    let log = srv.stop_after("stalled");
    assert!(log.contains("stalled"), "{log}");
}

#[test]
fn a_reverse_reader_at_760_bytes_per_second_is_ended_as_stalled() {
    let _heavy = common::heavy();
    let srv = ServerProc::start(&["--idle-timeout", "1"]);
    let mut raw = Raw::start(srv.port, &reverse_spec(60.0));
    let token = raw.until_accepted().unwrap();
    let mut data = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    let hello = DataHello {
        token,
        flow: Flow::ServerToClient,
        stream_id: 0,
    };
    data.write_all(&hello.emit()).unwrap();
    let t0 = Instant::now();
    let mut buf = [0u8; 190];
    let reason = loop {
        assert!(t0.elapsed() < Duration::from_secs(15), "never ended");
        let _ = data.read(&mut buf);
        match raw.poll(Duration::from_millis(250)) {
            Err(ProtoError::Refused(reason)) => break reason,
            Err(e) => panic!("unexpected end: {e}"),
            Ok(_) => {}
        }
    };
    assert!(reason.contains("stalled"), "{reason}");
    // two idle timeouts of crawling, after the socket buffers filled
    assert!(t0.elapsed() < Duration::from_secs(6), "{:?}", t0.elapsed());
    drop(data);
    seconds_until_served(srv.port, Duration::from_secs(3));
}

#[test]
fn a_byte_count_test_ends_at_the_max_duration_and_busy_tells_the_truth() {
    let _heavy = common::heavy();
    let srv = ServerProc::start(&["--idle-timeout", "1", "--max-duration", "3"]);
    let p = srv.port.to_string();
    let t0 = Instant::now();
    let child = common::wr()
        .args(["run", "127.0.0.1", "-p", &p, "-n", "1000T"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let busy = quick_test(srv.port);
    let err = stderr(&busy);
    let retry: f64 = err
        .split("retry in ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no retry time: {err}"));
    // about 2.2 s of the bound left, rounded up
    assert!((3.0..=4.0).contains(&retry), "retry in {retry} s: {err}");
    let out = common::wait_bounded(child, Duration::from_secs(15));
    let took = t0.elapsed();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("maximum duration of 3 s"),
        "{}",
        stderr(&out)
    );
    assert!(took < Duration::from_secs(6), "ran {took:?}");
    assert_eq!(busy.status.code(), Some(1));
}

#[test]
fn an_absurd_rate_is_refused_by_the_server() {
    let _heavy = common::heavy();
    let srv = ServerProc::start(&["--max-rate", "100M"]);
    let spec = TestSpec {
        protocol: Protocol::Udp,
        len_bytes: 1400,
        rate_bps: Some(1e15),
        ..Default::default()
    };
    let mut raw = Raw::start(srv.port, &spec);
    match raw.until_accepted() {
        Err(ProtoError::Refused(r)) => assert!(r.contains("rate"), "{r}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    // a real client over the operator's cap is told the cap
    let p = srv.port.to_string();
    let out = run(
        &["run", "127.0.0.1", "-p", &p, "-u", "-b", "200M", "-t", "1"],
        LIMIT,
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("exceeds the server's maximum of 100"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_flood_of_pending_connections_does_not_keep_another_address_out() {
    let _heavy = common::heavy();
    let srv = ServerProc::start(&["--idle-timeout", "5", "--handshake-timeout", "2"]);
    let flood: Vec<TcpStream> = (0..100)
        .map(|_| TcpStream::connect(("127.0.0.1", srv.port)).unwrap())
        .collect();
    // beyond 8 pending from one address, a connection is told why at once
    let mut last = flood.last().unwrap().try_clone().unwrap();
    last.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut answer = Vec::new();
    let _ = last.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.contains("too many pending connections from your address"),
        "{answer:?}"
    );
    // a client from another address gets its test done while the flood holds its slots
    let p = srv.port.to_string();
    let t0 = Instant::now();
    let out = run(
        &[
            "run",
            "127.0.0.1",
            "-p",
            &p,
            "-B",
            "127.0.0.2",
            "-n",
            "4M",
            "--json",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(t0.elapsed() < Duration::from_secs(2));
    drop(flood);
    let log = srv.stop();
    // rejected connections are logged a few lines a second, the rest counted
    let lines = log
        .lines()
        .filter(|l| l.contains("too many pending"))
        .count();
    assert!((1..=10).contains(&lines), "{lines} lines:\n{log}");
}

#[test]
fn junk_is_logged_at_a_bounded_rate() {
    let _heavy = common::heavy();
    let srv = ServerProc::start(&["--idle-timeout", "2"]);
    for _ in 0..40 {
        let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let mut sink = Vec::new();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let _ = s.read_to_end(&mut sink);
    }
    std::thread::sleep(Duration::from_millis(1100));
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let log = srv.stop_after("suppressed");
    let rejected = log.lines().filter(|l| l.contains("bad magic")).count();
    assert!(rejected <= 12, "{rejected} lines:\n{log}");
    assert!(log.contains("suppressed"), "{log}");
}

#[test]
fn a_malformed_frame_is_answered_with_a_reason() {
    let _heavy = common::heavy();
    let srv = ServerProc::start(&["--idle-timeout", "2"]);
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.write_all(b"WRRT\x00\x01\x00\x00").unwrap();
    s.write_all(&5u32.to_be_bytes()).unwrap();
    s.write_all(b"{oops").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    assert!(text.contains("\"refused\""), "{text:?}");
}

fn vm_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap()
}

#[test]
fn buffers_are_bounded_by_default_and_freed_after_the_test() {
    let _heavy = common::heavy();
    let srv = ServerProc::start(&["--idle-timeout", "2"]);
    let p = srv.port.to_string();
    // 128 streams of 8 MiB: 1 GiB, over the default 256 MiB
    let out = run(
        &[
            "run",
            "127.0.0.1",
            "-p",
            &p,
            "-R",
            "-P",
            "128",
            "-l",
            "8M",
            "-t",
            "1",
        ],
        LIMIT,
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("1024 MiB of server memory; the maximum is 256 MiB"),
        "{}",
        stderr(&out)
    );
    std::thread::sleep(Duration::from_millis(300));
    let base = vm_rss_kib(srv.child.id());
    // the largest test the default allows, twice (the second used to reuse held heaps)
    for _ in 0..2 {
        let out = run(
            &[
                "run",
                "127.0.0.1",
                "-p",
                &p,
                "-R",
                "-P",
                "32",
                "-l",
                "8M",
                "-t",
                "1",
            ],
            LIMIT,
        );
        assert!(out.status.success(), "{}", stderr(&out));
    }
    std::thread::sleep(Duration::from_millis(500));
    let after = vm_rss_kib(srv.child.id());
    assert!(
        after < base + 48 * 1024,
        "RSS {base} KiB before, {after} KiB after"
    );
}

#[test]
fn import_refuses_impossible_results_and_huge_files() {
    let _heavy = common::heavy();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let dbs = db.to_str().unwrap();
    let good = run(&["run", "-n", "1M", "--json", "--db", dbs], LIMIT);
    assert!(good.status.success(), "{}", stderr(&good));
    let doc: serde_json::Value = serde_json::from_slice(&good.stdout).unwrap();
    for (path, value, why) in [
        (
            "/summary/goodput_bps",
            serde_json::json!(-5.0),
            "goodput_bps",
        ),
        (
            "/summary/goodput_bps",
            serde_json::json!(1e308),
            "goodput_bps",
        ),
        ("/schema_version", serde_json::json!(999), "schema_version"),
        ("/spec/parallel", serde_json::json!(0), "parallel"),
    ] {
        let mut bad = doc.clone();
        *bad.pointer_mut(path).unwrap() = value;
        let f = dir.path().join("bad.json");
        std::fs::write(&f, serde_json::to_vec(&bad).unwrap()).unwrap();
        let out = run(&["import", f.to_str().unwrap(), "--db", dbs], LIMIT);
        assert_eq!(out.status.code(), Some(1), "{path}: {}", stderr(&out));
        assert!(stderr(&out).contains(why), "{path}: {}", stderr(&out));
    }
    // files are read a run at a time: 65 MiB of zeros is refused at its first byte, and one
    // run of over 64 MiB (a 65 MiB hostname) when it passes the cap, before it is held
    let big = dir.path().join("big.json");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(65 << 20).unwrap();
    let out = run(&["import", big.to_str().unwrap(), "--db", dbs], LIMIT);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not wirerate results"),
        "{}",
        stderr(&out)
    );
    let mut huge = String::from("{\"env\":{\"client\":{\"hostname\":\"");
    huge.push_str(&"x".repeat(65 << 20));
    huge.push_str("\"}}}");
    std::fs::write(&big, huge).unwrap();
    let out = run(&["import", big.to_str().unwrap(), "--db", dbs], LIMIT);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("64 MiB"), "{}", stderr(&out));
    // a big array of junk fails at its first element
    let junk = dir.path().join("junk.json");
    let mut text = String::from("[1");
    text.push_str(&",1".repeat(8 << 20));
    text.push(']');
    std::fs::write(&junk, text).unwrap();
    let t0 = Instant::now();
    let out = run(&["import", junk.to_str().unwrap(), "--db", dbs], LIMIT);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("run 1"), "{}", stderr(&out));
    assert!(t0.elapsed() < Duration::from_secs(5));
}

/// Connections that open TLS and then send a ClientHello a byte every 100 ms: seconds from
/// connect until the server closed each (None: still open at `limit`).
fn dribble_tls_hellos(port: u16, n: usize, limit: Duration) -> Vec<Option<f64>> {
    use wirerate_proto::{Channel, Preamble};
    let t0 = Instant::now();
    let mut socks = Vec::new();
    {
        for _ in 0..n {
            let mut s = connect_from("127.0.0.4", port);
            s.write_all(&Preamble::new(Channel::TlsControl).emit())
                .unwrap();
            // a handshake record of 512 bytes, and the start of a ClientHello in it
            s.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc])
                .unwrap();
            s.set_nonblocking(true).unwrap();
            socks.push((s, t0.elapsed(), None::<f64>));
        }
    }
    while t0.elapsed() < limit && socks.iter().any(|s| s.2.is_none()) {
        std::thread::sleep(Duration::from_millis(100));
        for (s, opened, closed) in socks.iter_mut().filter(|s| s.2.is_none()) {
            let mut buf = [0u8; 4096];
            let gone = match s.read(&mut buf) {
                Ok(0) => true,
                Ok(_) => false,
                Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
            } || s.write(&[0x03]).is_err();
            if gone {
                *closed = Some((t0.elapsed() - *opened).as_secs_f64());
            }
        }
    }
    socks.into_iter().map(|s| s.2).collect()
}

#[test]
fn a_tls_hello_sent_a_byte_at_a_time_is_closed_at_the_handshake_timeout() {
    let _heavy = common::heavy();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().to_str().unwrap();
    let srv = ServerProc::start(&["--tls", "--state-dir", state, "--handshake-timeout", "2"]);
    // as many as one address may have waiting, each sending a byte every 100 ms
    let closed = dribble_tls_hellos(srv.port, 8, Duration::from_secs(12));
    let mut held: Vec<f64> = closed
        .iter()
        .map(|c| c.unwrap_or_else(|| panic!("still open after 12 s: {closed:?}")))
        .collect();
    held.sort_by(f64::total_cmp);
    let (first, last) = (held[0], held[held.len() - 1]);
    // the timeout is a total deadline: each closed 2 s after it connected, give or take
    // the 100 ms between the checks and the server's scheduling
    assert!(
        first >= 1.9 && last <= 2.6,
        "closed after {first:.2}..{last:.2} s"
    );
    eprintln!(
        "{} dribbling TLS hellos closed after {first:.2}..{last:.2} s",
        held.len()
    );
}

#[test]
fn a_connection_that_sends_no_spec_holds_no_slot() {
    let _heavy = common::heavy();
    use wirerate_proto::{Channel, Preamble};
    let srv = ServerProc::start(&["--handshake-timeout", "2"]);
    // a preamble and silence, as many as one address may have waiting
    let t0 = Instant::now();
    let silent: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut s = connect_from("127.0.0.3", srv.port);
            s.write_all(&Preamble::new(Channel::Control).emit())
                .unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    // a client from another address is served at once, not told the server is busy
    let p = srv.port.to_string();
    let args = ["run", "127.0.0.1", "-p", &p, "-B", "127.0.0.2", "-n", "4M"];
    let served = Instant::now();
    let out = run(&args, LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let served = served.elapsed();
    assert!(served < Duration::from_secs(2), "served after {served:?}");
    // the silent ones are told why and closed at the handshake timeout
    for mut s in silent {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.contains("no test spec within 2 s"), "{answer:?}");
    }
    let held = t0.elapsed();
    assert!(held < Duration::from_secs(3), "held {held:?}");
    // nor can a spec book the server for a day: the default bound is 300 s
    let out = run(
        &[
            "run",
            "127.0.0.1",
            "-p",
            &p,
            "-R",
            "-b",
            "8K",
            "-t",
            "86400",
        ],
        LIMIT,
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("exceeds the server's maximum of 300 s"),
        "{}",
        stderr(&out)
    );
    eprintln!("another client served after {served:?}; silent connections closed by {held:?}");
}

#[test]
fn junk_from_many_addresses_is_logged_within_one_budget() {
    let _heavy = common::heavy();
    let srv = ServerProc::start(&["--idle-timeout", "2"]);
    let t0 = Instant::now();
    let mut sent = 0;
    // 2000 addresses (10 rounds of 200), a junk connection from each
    for round in 0..10 {
        let socks: Vec<TcpStream> = (0..200)
            .map(|i| {
                let mut s = connect_from(&format!("127.0.{}.{}", 10 + round, i + 1), srv.port);
                let _ = s.write_all(b"GET / HTTP/1.0\r\n\r\n");
                s
            })
            .collect();
        sent += socks.len();
        for mut s in socks {
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            let _ = s.read_to_end(&mut Vec::new());
        }
    }
    let took = t0.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(1100));
    let mut last = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    last.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let _ = last.read_to_end(&mut Vec::new());
    let log = srv.stop();
    let lines = log.lines().filter(|l| l.contains("bad magic")).count();
    // 20 lines a second in all, whatever the number of addresses
    let budget = 20.0 * (took + 2.0).ceil();
    assert!(
        (lines as f64) <= budget,
        "{lines} lines in {took:.1} s:\n{log}"
    );
    assert!(log.contains("suppressed"), "{log}");
    eprintln!("{sent} junk connections from 2000 addresses in {took:.1} s: {lines} lines logged");
}

#[test]
fn an_iperf3_cookie_without_parameters_holds_no_slot() {
    let _heavy = common::heavy();
    let srv = ServerProc::start(&["--handshake-timeout", "2"]);
    let t0 = Instant::now();
    // iperf3's opening: a 37-byte cookie, then nothing
    let mut silent = connect_from("127.0.0.5", srv.port);
    silent
        .write_all(b"abcdefghijklmnopqrstuvwxyz2345678901\0")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let p = srv.port.to_string();
    let out = run(
        &["run", "127.0.0.1", "-p", &p, "-B", "127.0.0.2", "-n", "4M"],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // it was asked for its parameters, and closed at the handshake timeout
    silent
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut answer = Vec::new();
    let _ = silent.read_to_end(&mut answer);
    let held = t0.elapsed();
    assert_eq!(answer.first(), Some(&9), "PARAM_EXCHANGE: {answer:?}");
    assert!(held < Duration::from_secs(3), "held {held:?}");
    let log = srv.stop_after("no parameters within 2 s");
    assert!(log.contains("no parameters within 2 s"), "{log}");
}

#[test]
fn silent_connections_wait_without_a_thread_each() {
    let _heavy = common::heavy();
    let srv = ServerProc::start(&["--handshake-timeout", "2"]);
    let before = threads(srv.child.id());
    // 96 connections from 12 addresses that say nothing
    let t0 = Instant::now();
    let silent: Vec<TcpStream> = (0..96)
        .map(|i| connect_from(&format!("127.0.6.{}", i / 8 + 1), srv.port))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let during = threads(srv.child.id());
    assert!(during <= before + 2, "{before} threads, then {during}");
    // a client that speaks is served meanwhile
    let p = srv.port.to_string();
    let out = run(
        &["run", "127.0.0.1", "-p", &p, "-B", "127.0.0.2", "-n", "4M"],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // and the silent ones are closed at the handshake timeout
    for mut s in silent {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.read_to_end(&mut Vec::new());
    }
    let held = t0.elapsed();
    assert!(held < Duration::from_secs(3), "held {held:?}");
    eprintln!("96 silent connections: {before} -> {during} threads, closed after {held:?}");
}
