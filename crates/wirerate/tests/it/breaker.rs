//! The UDP circuit breaker of `wirerate serve` (docs/server.md, "UDP senders stop when the
//! client gives no sign of life"): a server sending UDP (`-u -R`) stops soon after its
//! client stops reporting what it receives, or after its client's path is cut, on the
//! wirerate and iperf3 paths alike; a client that keeps receiving, or one from before the
//! reports, gets its whole test.
//!
//! The tests over loopback speak the protocol by hand, so the client can go silent while
//! still counting what arrives. The lab test (root, network namespaces; skipped otherwise)
//! cuts a real client's return path with a blackhole route and counts what the server's
//! interface still sent; it removes its lab however it ends.

use crate::common;

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::lab::{skip_unless_root, Lab, Proc, BIN};
use common::ServerProc;
use wirerate_core::spec::{Direction, End, Flow, Protocol};
use wirerate_core::TestSpec;
use wirerate_proto::datagram::{Header, Kind, HEADER_LEN};
use wirerate_proto::msg::UdpProof;
use wirerate_proto::{ClientEvent, ClientSession, ProtoError};

/// The rate of the tests' reverse UDP streams, bit/s.
const RATE: f64 = 20e6;

fn reverse_udp(seconds: f64) -> TestSpec {
    TestSpec {
        protocol: Protocol::Udp,
        direction: Direction::Reverse,
        end: End::Time { seconds },
        len_bytes: 1250,
        rate_bps: Some(RATE),
        ..Default::default()
    }
}

/// A client speaking the protocol by hand over loopback, with one reverse UDP stream.
struct Raw {
    ctl: TcpStream,
    sess: ClientSession,
    udp: UdpSocket,
}

impl Raw {
    /// Connects, sends the spec (promising `udp_feedback`, or as a client from before it),
    /// proves its UDP address and waits for `start`.
    fn start(port: u16, spec: &TestSpec, promise: bool) -> Raw {
        let mut ctl = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut sess = ClientSession::new(spec, Instant::now(), Duration::from_secs(10));
        let mut opening = Vec::new();
        while let Some(b) = sess.poll_transmit() {
            opening.extend(b);
        }
        if !promise {
            // the preamble, then the spec as such a client writes it
            opening.truncate(wirerate_proto::frame::PREAMBLE_LEN);
            let json = format!(
                r#"{{"type":"spec","spec":{}}}"#,
                serde_json::to_string(spec).unwrap()
            );
            opening.extend((json.len() as u32).to_be_bytes());
            opening.extend(json.as_bytes());
        }
        ctl.write_all(&opening).unwrap();
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut raw = Raw { ctl, sess, udp };
        let (token, ports) = loop {
            if let Some(ClientEvent::Accepted(t, p)) = raw.poll().unwrap().into_iter().next() {
                break (t, p);
            }
        };
        raw.udp.connect(("127.0.0.1", ports[0])).unwrap();
        raw.udp
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut hello = [0u8; HEADER_LEN];
        Header {
            kind: Kind::Hello,
            stream_id: 0,
            seq: 0,
            send_ns: 0,
            token,
        }
        .emit(&mut hello);
        let mut buf = [0u8; 2048];
        let nonce = loop {
            raw.udp.send(&hello).unwrap();
            if let Ok(n) = raw.udp.recv(&mut buf) {
                let h = Header::parse(&buf[..n]).unwrap();
                assert_eq!(h.kind, Kind::Challenge);
                break h.seq;
            }
        };
        let proof = UdpProof {
            flow: Flow::ServerToClient,
            stream_id: 0,
            nonce,
        };
        raw.sess.udp_proof(vec![proof]);
        raw.flush();
        while !raw.poll().unwrap().contains(&ClientEvent::Start) {}
        raw.udp
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        raw
    }

    fn flush(&mut self) {
        while let Some(b) = self.sess.poll_transmit() {
            self.ctl.write_all(&b).unwrap();
        }
    }

    /// Reads the control connection for up to 50 ms.
    fn poll(&mut self) -> Result<Vec<ClientEvent>, ProtoError> {
        self.ctl
            .set_read_timeout(Some(Duration::from_millis(50)))
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

    /// Datagram bytes that arrive within 50 ms.
    fn take(&mut self) -> usize {
        let mut buf = [0u8; 2048];
        self.udp.recv(&mut buf).unwrap_or(0)
    }
}

/// A client that reports for `alive`, then goes silent on its control connection (still
/// open, still acknowledged by its kernel) while it goes on counting what arrives: returns
/// the seconds from the silence to the last datagram and the bytes that came after it.
fn silent_after(raw: &mut Raw, alive: Duration, limit: Duration) -> (f64, u64) {
    let t0 = Instant::now();
    let mut received = 0u64;
    while t0.elapsed() < alive {
        received += raw.take() as u64;
        raw.sess.udp_feedback(received, Instant::now());
        raw.poll().expect("the test runs while the client reports");
    }
    let silent = Instant::now();
    let (mut last, mut after) = (silent, 0u64);
    while last.elapsed() < Duration::from_secs(2) && silent.elapsed() < limit {
        let n = raw.take();
        if n > 0 {
            last = Instant::now();
            after += n as u64;
        }
    }
    (last.duration_since(silent).as_secs_f64(), after)
}

#[test]
fn a_receiver_that_stops_reporting_is_sent_at_most_a_few_seconds_more() {
    let _heavy = common::heavy();
    let srv = ServerProc::start(&[]);
    let mut raw = Raw::start(srv.port, &reverse_udp(30.0), true);
    let (secs, after) = silent_after(&mut raw, Duration::from_secs(2), Duration::from_secs(20));
    // the last report came within the second before the silence; the breaker waits three
    let per_s = RATE / 8.0;
    assert!(
        (1.5..4.5).contains(&secs),
        "sending went on {secs:.2} s after the silence"
    );
    assert!(
        (after as f64) < 4.5 * per_s,
        "{after} bytes sent after the silence"
    );
    let reason = loop {
        match raw.poll() {
            Err(ProtoError::Refused(r)) => break r,
            Err(e) => panic!("{e}"),
            Ok(_) => {}
        }
    };
    assert!(reason.contains("circuit breaker"), "{reason}");
    let log = srv.stop_after("stopped sending");
    assert!(
        log.contains("circuit breaker") && log.contains("stopped sending"),
        "{log}"
    );
    eprintln!("sending stopped {secs:.2} s after the silence; {after} bytes after it");
}

#[test]
fn a_client_from_before_the_reports_still_gets_its_whole_test() {
    let _heavy = common::heavy();
    let srv = ServerProc::start(&[]);
    let mut raw = Raw::start(srv.port, &reverse_udp(5.0), false);
    // it never reports: its test runs to its end all the same
    let (secs, after) = silent_after(&mut raw, Duration::ZERO, Duration::from_secs(10));
    assert!(secs > 4.5, "sending stopped {secs:.2} s into a 5 s test");
    assert!(after as f64 > 4.0 * RATE / 8.0, "{after} bytes");
}

#[test]
fn reverse_udp_tests_run_to_their_end_with_the_reports() {
    let _heavy = common::heavy();
    // long enough for several reports, and a pace of one datagram every 4 s, slower than
    // the breaker's three seconds: its three gaps are the limit then
    for (args, t) in [
        (["-b", "20M", "-l", "1250"], "6"),
        (["-b", "2K", "-l", "1000"], "9"),
    ] {
        let srv = ServerProc::start(&[]);
        let p = srv.port.to_string();
        let mut all = vec!["run", "127.0.0.1", "-p", &p, "-u", "-R", "-t", t, "--json"];
        all.extend_from_slice(&args);
        let out = common::run(&all, Duration::from_secs(40));
        assert!(out.status.success(), "{args:?}: {}", common::stderr(&out));
        let j = common::json(&out);
        let u = &j["summary"]["udp"];
        let (sent, got) = (
            u["packets"].as_u64().unwrap(),
            u["received"].as_u64().unwrap(),
        );
        assert!(
            got > 0 && got + got / 100 >= sent,
            "{args:?}: {got} of {sent}"
        );
        let secs = j["summary"]["seconds"].as_f64().unwrap();
        let asked: f64 = t.parse().unwrap();
        assert!(secs > 0.6 * asked, "{args:?}: {secs} s of {asked}");
        let log = srv.stop();
        assert!(!log.contains("circuit breaker"), "{log}");
    }
}

/// `iperf3 -c 127.0.0.1 -p PORT ARGS…`, its output dropped. iperf3 must be on PATH (CI
/// installs it).
fn iperf3_client(port: u16, args: &[&str]) -> std::process::Child {
    Command::new("iperf3")
        .args(["-c", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 is not on PATH: these tests need it (apt-get install iperf3)")
}

/// Whether the process has a UDP sending thread (`wr-udp-sender-N`, iperf3's path).
fn sends_udp(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|t| {
        std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with("wr-udp-sender"))
    })
}

/// Waits (10 s at most) until the server's UDP sending thread exists: the test has begun.
fn wait_until_sending(pid: u32) {
    let t0 = Instant::now();
    while !sends_udp(pid) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the test never started"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn an_iperf3_receiver_killed_mid_test_stops_the_server_at_once() {
    let _heavy = common::heavy();
    // the default idle timeout (10 s): what frees the server is the close
    let srv = ServerProc::start(&[]);
    let mut client = iperf3_client(srv.port, &["-u", "-R", "-b", "20M", "-t", "30"]);
    let pid = srv.child.id();
    wait_until_sending(pid);
    std::thread::sleep(Duration::from_secs(1));
    // SIGKILL, by PID
    client.kill().unwrap();
    client.wait().unwrap();
    let killed = Instant::now();
    while sends_udp(pid) {
        assert!(
            killed.elapsed() < Duration::from_secs(3),
            "still sending 3 s after the kill"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "sending stopped {:.2} s after the kill",
        killed.elapsed().as_secs_f64()
    );
    // the test's end is logged once its senders have stopped and its control connection
    // is closed: a moment after the last sending thread goes, on a busy host
    std::thread::sleep(Duration::from_secs(1));
    let log = srv.stop_after("ended iperf3 test");
    assert!(log.contains("ended iperf3 test"), "{log}");
}

#[test]
fn a_frozen_iperf3_receiver_is_sent_nothing_past_the_breakers_grace() {
    let _heavy = common::heavy();
    let srv = ServerProc::start(&[]);
    let mut client = iperf3_client(srv.port, &["-u", "-R", "-b", "5M", "-t", "2"]);
    let pid = srv.child.id();
    wait_until_sending(pid);
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: a signal to our own child, by its PID: its sockets stay open, its kernel
    // acknowledges, and it never ends the test
    unsafe {
        libc::kill(client.id() as i32, libc::SIGSTOP);
    }
    while sends_udp(pid) {
        assert!(
            started.elapsed() < Duration::from_secs(9),
            "still sending 9 s into a 2 s test"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let secs = started.elapsed().as_secs_f64();
    let _ = client.kill();
    let _ = client.wait();
    // the test's 2 s and the breaker's 3 (before, the idle timeout's 10: 12 s), with room
    // for a busy host's scheduling above
    assert!(
        (4.5..8.0).contains(&secs),
        "sending stopped {secs:.2} s into a 2 s test"
    );
}

/// Bytes the lab's host a has put on its link.
fn tx_bytes(lab: &Lab) -> u64 {
    let ns = format!("wr-{}-a", lab.name);
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns,
            "cat",
            "/sys/class/net/wr0/statistics/tx_bytes",
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// Runs `client` on host b against a server on host a, cuts b's return path after 2 s and
/// watches a's link: the seconds until it went quiet and the bytes sent after the cut. The
/// server's log is returned too.
fn cut_mid_test(lab: &Lab, client: &[&str]) -> (f64, u64, String) {
    let log = lab.temp("breaker-server.log");
    let srv = Command::new(BIN)
        .args(lab.exec_args("a", &[BIN, "serve", "-p", "5350"]))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let _srv = Proc { child: srv };
    lab.wait_listening("a", 5350);
    let _client = Proc::spawn(&lab.exec_args("b", client), &lab.temp("breaker-client.out"));
    std::thread::sleep(Duration::from_secs(2));
    let cut = lab.exec("b", &["ip", "route", "add", "blackhole", "10.77.0.1/32"]);
    assert!(
        cut.status.success(),
        "{}",
        String::from_utf8_lossy(&cut.stderr)
    );
    let (t0, b0) = (Instant::now(), tx_bytes(lab));
    let (mut last, mut quiet_since) = (b0, t0);
    while quiet_since.elapsed() < Duration::from_secs(2) && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
        let b = tx_bytes(lab);
        // keepalive probes and neighbour queries are a few hundred bytes
        if b - last > 4096 {
            quiet_since = Instant::now();
        }
        last = b;
    }
    let _ = lab.exec("b", &["ip", "route", "del", "blackhole", "10.77.0.1/32"]);
    let secs = quiet_since.duration_since(t0).as_secs_f64();
    (
        secs,
        last - b0,
        std::fs::read_to_string(&log).unwrap_or_default(),
    )
}

fn assert_bounded(what: &str, (secs, after, log): &(f64, u64, String)) {
    eprintln!("{what}: sending stopped {secs:.2} s after the cut; {after} bytes after it");
    assert!(
        *secs < 4.5,
        "{what}: still sending {secs:.2} s after the cut; log: {log}"
    );
    assert!(
        (*after as f64) < 4.5 * RATE / 8.0,
        "{what}: {after} bytes after the cut"
    );
    assert!(log.contains("circuit breaker"), "{what}: {log}");
}

#[test]
fn a_cut_return_path_stops_the_server_on_both_protocols() {
    let _heavy = common::heavy();
    if skip_unless_root("a_cut_return_path_stops_the_server_on_both_protocols") {
        return;
    }
    let lab = Lab::up("brk", &["--rate", "1G", "--buffer", "4M"]);
    let rate = format!("{}", RATE as u64);
    let wr = cut_mid_test(
        &lab,
        &[
            BIN,
            "run",
            "10.77.0.1",
            "-p",
            "5350",
            "-u",
            "-R",
            "-b",
            &rate,
            "-t",
            "30",
        ],
    );
    assert_bounded("wirerate client", &wr);
    let ip = cut_mid_test(
        &lab,
        &[
            "iperf3",
            "-c",
            "10.77.0.1",
            "-p",
            "5350",
            "-u",
            "-R",
            "-b",
            &rate,
            "-t",
            "30",
        ],
    );
    assert_bounded("iperf3 client", &ip);
    assert!(ip.2.contains("acknowledged nothing"), "{}", ip.2);
}
