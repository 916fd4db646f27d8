//! Interoperability with the real iperf3 over loopback, both ways: `wirerate run --iperf3`
//! against `iperf3 -s`, and `iperf3 -c` against `wirerate serve`. iperf3 must be on PATH
//! (CI installs Debian's package); without it these tests fail and say so.

use crate::common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, json, run, stderr, u, wait_bounded, ServerProc};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(30);

fn iperf3() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("iperf3"))
        .find(|p| p.is_file())
        .expect("iperf3 is not on PATH: these interoperability tests need it (apt-get install iperf3; .ci/run installs it)")
}

/// True once something listens on `port` (checked without connecting: a one-off iperf3
/// server would take a probe connection for its one test).
fn listening(port: u16) -> bool {
    let hex = format!(":{port:04X} ");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|t| {
            t.lines().any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && format!("{} ", cols[1]).ends_with(&hex) && cols[3] == "0A"
            })
        })
    })
}

/// A one-off `iperf3 -s -1 -J` on 127.0.0.1, killed by PID on drop.
struct Iperf3Server {
    child: Option<Child>,
    port: u16,
}

impl Iperf3Server {
    fn start() -> Iperf3Server {
        let port = free_port();
        let child = Command::new(iperf3())
            .args(["-s", "-1", "-J", "-B", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn iperf3 -s");
        let deadline = Instant::now() + Duration::from_secs(5);
        while !listening(port) {
            assert!(
                Instant::now() < deadline,
                "iperf3 -s did not start listening"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Iperf3Server {
            child: Some(child),
            port,
        }
    }

    /// Waits for the one-off server to exit after its test and returns its JSON report.
    fn report(mut self) -> Value {
        let child = self.child.take().expect("child");
        let out = wait_bounded(child, Duration::from_secs(15));
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "iperf3 -s printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }
}

impl Drop for Iperf3Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn wirerate_client(port: u16, extra: &[&str]) -> Value {
    let p = port.to_string();
    let mut args = vec!["run", "127.0.0.1", "--iperf3", "-p", &p, "--json"];
    args.extend_from_slice(extra);
    let out = run(&args, LIMIT);
    assert!(out.status.success(), "{extra:?}: {}", stderr(&out));
    json(&out)
}

#[test]
fn wirerate_client_forward_matches_what_the_iperf3_server_received() {
    let srv = Iperf3Server::start();
    let port = srv.port;
    let j = wirerate_client(port, &["-t", "1"]);
    let ip = srv.report();
    let s = &j["summary"];
    assert!(s["goodput_bps"].as_f64().unwrap() > 1e8, "{s}");
    // the headline is the server's own count of received bytes
    assert_eq!(u(&s["bytes"]), u(&ip["end"]["sum_received"]["bytes"]));
    assert!(u(&s["sender_bytes"]) >= u(&s["bytes"]));
    // local measurements (TCP_INFO, CPU, interfaces) and the server's CPU are combined
    assert!(s["tcp"]["retransmits"].as_u64().is_some(), "{s}");
    assert!(j["streams"][0]["tcp_sender"]["segs_out"].as_u64().unwrap() > 0);
    assert!(s["cpu"]["local"]["system_percent"].as_f64().is_some());
    assert!(s["cpu"]["remote"]["process_percent"].as_f64().unwrap() > 0.0);
    assert!(s["pi"].as_f64().is_some());
    // the result is an ordinary wirerate document
    let schema: Value =
        serde_json::from_str(include_str!("../../../../schema/result.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator.iter_errors(&j).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn wirerate_client_reverse_counts_what_the_iperf3_server_sent() {
    let srv = Iperf3Server::start();
    let j = wirerate_client(srv.port, &["-t", "1", "-R"]);
    let ip = srv.report();
    let s = &j["summary"];
    assert_eq!(u(&s["sender_bytes"]), u(&ip["end"]["sum_sent"]["bytes"]));
    assert!(u(&s["bytes"]) > 0);
    // the iperf3 server's retransmits arrive as the sender's TCP figure
    assert!(s["tcp"]["retransmits"].as_u64().is_some(), "{s}");
    assert!(j["streams"][0]["tcp_receiver"]["segs_in"].as_u64().unwrap() > 0);
}

#[test]
fn wirerate_client_bidir_two_streams_each_way() {
    let srv = Iperf3Server::start();
    let j = wirerate_client(srv.port, &["-t", "1", "--bidir", "-P", "2"]);
    let ip = srv.report();
    assert_eq!(j["streams"].as_array().unwrap().len(), 4);
    let flows = j["summary"]["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2);
    assert!(flows.iter().all(|f| u(&f["bytes"]) > 0), "{flows:?}");
    assert_eq!(ip["end"]["streams"].as_array().unwrap().len(), 4);
}

#[test]
fn wirerate_client_parallel_with_socket_options() {
    let srv = Iperf3Server::start();
    let j = wirerate_client(
        srv.port,
        &["-t", "1", "-P", "2", "-w", "512K", "-M", "1400", "-N"],
    );
    let ip = srv.report();
    assert_eq!(j["streams"].as_array().unwrap().len(), 2);
    assert_eq!(
        u(&j["summary"]["bytes"]),
        u(&ip["end"]["sum_received"]["bytes"])
    );
    let mss = u(&j["streams"][0]["tcp_sender"]["snd_mss"]);
    assert!(mss <= 1400, "MSS {mss}");
}

#[test]
fn wirerate_client_byte_counts_both_ways() {
    let srv = Iperf3Server::start();
    let j = wirerate_client(srv.port, &["-n", "64M"]);
    let ip = srv.report();
    assert_eq!(u(&j["summary"]["sender_bytes"]), 64 << 20);
    // the client ends the test once the server has acknowledged the bytes, so an iperf3
    // server counts (nearly) all of them; iperf3's own client often loses a tenth here
    let received = u(&ip["end"]["sum_received"]["bytes"]);
    assert!(received >= (64 << 20) * 95 / 100, "{received}");
    assert_eq!(u(&j["summary"]["bytes"]), received);
    let srv = Iperf3Server::start();
    let t0 = Instant::now();
    let j = wirerate_client(srv.port, &["-n", "64M", "-R"]);
    // the client ends the test once 64 MiB arrived, not at a timeout
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert!(u(&j["summary"]["bytes"]) >= 64 << 20);
    drop(srv);
}

#[test]
fn wirerate_client_udp_forward_reverse_and_bidir() {
    let srv = Iperf3Server::start();
    let j = wirerate_client(srv.port, &["-u", "-b", "50M", "-t", "1"]);
    let ip = srv.report();
    let s = &j["summary"];
    let rx = &ip["end"]["sum_received"];
    // loss and jitter of the forward flow are the iperf3 server's own figures
    assert_eq!(u(&s["bytes"]), u(&rx["bytes"]));
    assert_eq!(u(&s["udp"]["packets"]), u(&rx["packets"]));
    assert_eq!(u(&s["udp"]["lost"]), u(&rx["lost_packets"]));
    let rate = s["goodput_bps"].as_f64().unwrap();
    assert!((40e6..=51e6).contains(&rate), "paced at 50 Mbit/s: {rate}");
    assert!(s["udp"]["jitter_ms"].as_f64().is_some());
    assert_eq!(s["udp"]["target_bps"].as_f64(), Some(50e6));
    assert!(s["tcp"].is_null());

    let srv = Iperf3Server::start();
    let j = wirerate_client(srv.port, &["-u", "-b", "50M", "-t", "1", "-R"]);
    let ip = srv.report();
    let s = &j["summary"];
    // wirerate counted what arrived; the server says what it sent
    assert_eq!(u(&s["sender_bytes"]), u(&ip["end"]["sum_sent"]["bytes"]));
    assert!(u(&s["bytes"]) > 0 && u(&s["bytes"]) <= u(&s["sender_bytes"]));
    assert!(u(&s["udp"]["packets"]) > 0);
    let loss = s["udp"]["loss_percent"].as_f64().unwrap();
    assert!((0.0..=100.0).contains(&loss));

    let srv = Iperf3Server::start();
    let j = wirerate_client(
        srv.port,
        &["-u", "-b", "20M", "-t", "1", "--bidir", "-P", "2"],
    );
    drop(srv);
    assert_eq!(j["streams"].as_array().unwrap().len(), 4);
    let flows = j["summary"]["flows"].as_array().unwrap();
    assert!(flows.iter().all(|f| u(&f["bytes"]) > 0), "{flows:?}");
}

#[test]
fn iperf3_udp_summary_says_paced_not_unpaced() {
    // the header said "paced at 100 Mbit/s" and the summary "datagrams sent (unpaced)"
    let srv = Iperf3Server::start();
    let p = srv.port.to_string();
    let args = [
        "run",
        "127.0.0.1",
        "--iperf3",
        "-p",
        &p,
        "-u",
        "-b",
        "100M",
        "-t",
        "1",
        "-V",
    ];
    let out = run(&args, LIMIT);
    drop(srv);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let udp = text
        .lines()
        .find(|l| l.trim_start().starts_with("UDP ") && l.contains("datagrams sent"))
        .unwrap_or_else(|| panic!("no UDP line: {text}"));
    assert!(udp.contains("(paced at 100.00 Mbit/s per stream)"), "{udp}");
}

#[test]
fn iperf3_forward_receiver_io_is_not_available_rather_than_zero() {
    // the iperf3 server does not count its reads: "0 reads, 0 B per call" was false
    let srv = Iperf3Server::start();
    let p = srv.port.to_string();
    let out = run(
        &[
            "run",
            "127.0.0.1",
            "--iperf3",
            "-p",
            &p,
            "-t",
            "1",
            "-V",
            "--no-store",
        ],
        LIMIT,
    );
    drop(srv);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let rx = text
        .lines()
        .find(|l| l.trim_start().starts_with("I/O receiver"))
        .unwrap_or_else(|| panic!("no I/O receiver line: {text}"));
    assert!(rx.contains("n/a") && !rx.contains("0 reads"), "{rx}");
    // no interval lines for what the server received, and one line that says why
    let notes = text
        .lines()
        .filter(|l| l.contains("gives no intervals"))
        .count();
    assert_eq!(notes, 1, "{text}");

    let srv = Iperf3Server::start();
    let j = wirerate_client(srv.port, &["-t", "1"]);
    drop(srv);
    assert!(
        j["summary"]["io"]["receiver"].is_null(),
        "{}",
        j["summary"]["io"]
    );
    assert!(u(&j["summary"]["io"]["sender"]["calls"]) > 0);
    let schema: Value =
        serde_json::from_str(include_str!("../../../../schema/result.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&j)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn a_plain_run_against_an_iperf3_server_says_add_iperf3_quickly() {
    let on_path = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|d| d.join("iperf3").is_file());
    if !on_path {
        eprintln!(
            "SKIPPED a_plain_run_against_an_iperf3_server_says_add_iperf3_quickly: no iperf3"
        );
        return;
    }
    // it waited the whole idle timeout (10 s) and said the peer was silent
    let srv = Iperf3Server::start();
    let p = srv.port.to_string();
    let t0 = Instant::now();
    let out = run(
        &["run", "127.0.0.1", "-p", &p, "-t", "1", "--no-store"],
        LIMIT,
    );
    let took = t0.elapsed();
    drop(srv);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("looks like an iperf3 server: add --iperf3"),
        "{err}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn iperf3_udp_clients_against_wirerate_serve() {
    let srv = ServerProc::start(&["--idle-timeout", "3"]);
    for extra in [
        &["-u", "-b", "50M", "-t", "1"][..],
        &["-u", "-b", "50M", "-t", "1", "-R", "--udp-counters-64bit"],
        &["-u", "-b", "20M", "-t", "1", "--bidir", "-P", "2"],
    ] {
        let end = iperf3_against_wirerate(&srv, extra);
        let rx = &end["sum_received"];
        let tx = &end["sum_sent"];
        assert!(u(&rx["bytes"]) > 0, "{extra:?}: {end}");
        // iperf3's loss figures come from whichever side received: they must add up
        assert!(
            u(&rx["packets"]) > 0 && u(&rx["packets"]) <= u(&tx["packets"]) + 1,
            "{end}"
        );
        assert!(u(&rx["lost_packets"]) <= u(&rx["packets"]), "{end}");
        assert!(rx["jitter_ms"].as_f64().is_some());
    }
    // what is not supported is refused in iperf3's terms, and the server goes on
    let out = iperf3_client(srv.port, &["-u", "-t", "1", "-O", "1"]);
    let j: Value = serde_json::from_slice(&out.stdout).expect("iperf3 -J output");
    assert!(j["error"].as_str().is_some(), "{j}");
    let end = iperf3_against_wirerate(&srv, &["-t", "1"]);
    assert!(u(&end["sum_received"]["bytes"]) > 0);
    let log = srv.stop_after("UDP both ways, 2 streams, goodput ");
    assert!(log.contains("UDP both ways, 2 streams, goodput "), "{log}");
}

#[test]
fn an_iperf3_client_killed_mid_test_frees_the_server() {
    for reverse in [false, true] {
        let mut srv = ServerProc::start(&["--idle-timeout", "1"]);
        let mut args = vec!["-c", "127.0.0.1", "-t", "30"];
        if reverse {
            args.push("-R");
        }
        let p = srv.port.to_string();
        let mut client = Command::new(iperf3())
            .args(&args)
            .args(["-p", &p])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(700));
        client.kill().unwrap();
        client.wait().unwrap();
        let t0 = Instant::now();
        loop {
            let out = iperf3_client(srv.port, &["-t", "1"]);
            let j: Value = serde_json::from_slice(&out.stdout).expect("iperf3 -J output");
            if j.get("error").is_none() {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(4), "still busy: {j}");
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(srv.alive());
    }
}

#[test]
fn a_killed_iperf3_server_fails_the_client_in_one_line() {
    let mut srv = Iperf3Server::start();
    let p = srv.port.to_string();
    let client = Command::new(common::bin())
        .args(["run", "127.0.0.1", "--iperf3", "-p", &p, "-t", "30"])
        .args(["--idle-timeout", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    if let Some(mut c) = srv.child.take() {
        c.kill().unwrap();
        c.wait().unwrap();
    }
    let out = wait_bounded(client, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.starts_with("wirerate: "), "{err}");
}

/// A fake iperf3 server that answers the cookie with `reply`, then holds the connection.
fn fake_server(reply: &'static [u8]) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = l.accept() {
            let mut cookie = [0u8; 37];
            let _ = s.read_exact(&mut cookie);
            let _ = s.write_all(reply);
            std::thread::sleep(Duration::from_secs(3));
        }
    });
    port
}

#[test]
fn a_bad_iperf3_server_is_one_line_and_exit_1() {
    let cases: [(&[u8], &str); 3] = [
        (b"\x09\xff\xff\xff\xff", ""),
        (b"\xff", "busy"),
        (b"\xfe\x00\x00\x00\x83\x00\x00\x00\x00", "error 131"),
    ];
    for (reply, want) in cases {
        let port = fake_server(reply);
        let p = port.to_string();
        let t0 = Instant::now();
        let out = run(
            &[
                "run",
                "127.0.0.1",
                "--iperf3",
                "-p",
                &p,
                "-t",
                "1",
                "--idle-timeout",
                "2",
            ],
            LIMIT,
        );
        assert_eq!(out.status.code(), Some(1), "{reply:?}");
        let err = stderr(&out);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
}

fn iperf3_client(port: u16, extra: &[&str]) -> Output {
    let child = Command::new(iperf3())
        .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-J"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn iperf3 -c");
    wait_bounded(child, LIMIT)
}

/// Runs `iperf3 -c … -J` against a wirerate server and returns iperf3's `end` section.
fn iperf3_against_wirerate(srv: &ServerProc, extra: &[&str]) -> Value {
    let out = iperf3_client(srv.port, extra);
    let j: Value = serde_json::from_slice(&out.stdout).expect("iperf3 -J output");
    assert!(
        out.status.success() && j.get("error").is_none(),
        "{extra:?}: {}",
        j["error"]
    );
    j["end"].clone()
}

#[test]
fn iperf3_client_forward_against_wirerate_serve() {
    let srv = ServerProc::start(&["--idle-timeout", "3"]);
    let end = iperf3_against_wirerate(&srv, &["-t", "1"]);
    let sent = u(&end["sum_sent"]["bytes"]);
    let received = u(&end["sum_received"]["bytes"]);
    assert!(received > 0 && received <= sent, "{end}");
    assert!(
        end["cpu_utilization_percent"]["remote_total"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    // a byte count arrives whole: the server reads what was in flight at TEST_END
    let end = iperf3_against_wirerate(&srv, &["-n", "32M"]);
    assert_eq!(u(&end["sum_received"]["bytes"]), 32 << 20);
    assert_eq!(u(&end["sum_sent"]["bytes"]), 32 << 20);
}

#[test]
fn iperf3_client_reverse_against_wirerate_serve() {
    let srv = ServerProc::start(&["--idle-timeout", "3"]);
    let end = iperf3_against_wirerate(&srv, &["-t", "1", "-R"]);
    assert!(u(&end["sum_received"]["bytes"]) > 0, "{end}");
    assert!(u(&end["sum_sent"]["bytes"]) >= u(&end["sum_received"]["bytes"]));
    // wirerate's sender reports its retransmits to iperf3
    assert!(end["sum_sent"]["retransmits"].as_u64().is_some(), "{end}");
    let end = iperf3_against_wirerate(&srv, &["-n", "32M", "-R"]);
    assert_eq!(u(&end["sum_received"]["bytes"]), 32 << 20);
}

/// The server shows an iperf3 client's test a line per second as iperf3's server does:
/// what it receives, UDP too (a UDP upload printed none), and what it sends (`-R`), under a
/// note that those are the bytes it wrote (a reverse test printed nothing).
#[test]
fn serve_prints_an_iperf3_clients_udp_and_reverse_tests_per_second() {
    let port = free_port();
    let p = port.to_string();
    let mut srv = common::spawn_piped(&["serve", "-B", "127.0.0.1", "-p", &p]);
    common::wait_listening(std::net::SocketAddr::from(([127, 0, 0, 1], port)), "server");
    // (iperf3 takes whole seconds; a paced TCP -R is refused by the server)
    let tests: [&[&str]; 3] = [
        &["-u", "-b", "10M", "-t", "3"],
        &["-u", "-b", "10M", "-t", "3", "-R"],
        &["-t", "3", "-R"],
    ];
    for extra in tests {
        let out = iperf3_client(port, extra);
        assert!(
            out.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let _ = srv.kill();
    let text = String::from_utf8_lossy(&wait_bounded(srv, LIMIT).stdout).into_owned();
    // one header a test, then its lines
    let shown: Vec<&str> = text.split("flow ").skip(1).collect();
    assert_eq!(shown.len(), 3, "{text}");
    for ((extra, lines), flow) in
        tests
            .iter()
            .zip(&shown)
            .zip(["client→server", "server→client", "server→client"])
    {
        let of_flow: Vec<&str> = lines
            .lines()
            .filter(|l| l.starts_with(flow) && l.contains(" s "))
            .collect();
        assert!(of_flow.len() >= 2, "{extra:?}: {text}");
        let sent_note = lines.contains("(server→client lines: the bytes this side sent)");
        assert_eq!(sent_note, flow == "server→client", "{extra:?}: {text}");
        for (l, span) in of_flow.iter().zip(["0.00-1.00 s", "1.00-2.00 s"]) {
            assert!(
                l.contains(span) && l.ends_with("bit/s"),
                "{extra:?}: {text}"
            );
            if extra.contains(&"-u") {
                // 10 Mbit/s paced: a second's line of that order (a busy host's pacer may
                // catch up a late burst within a second), neither bytes nor a tenth of it
                let rate: f64 = l.split_whitespace().rev().nth(1).unwrap().parse().unwrap();
                assert!(
                    l.ends_with("Mbit/s") && (2.0..40.0).contains(&rate),
                    "{extra:?}: {text}"
                );
            }
        }
    }
}

#[test]
fn iperf3_client_parallel_and_bidir_against_wirerate_serve() {
    let srv = ServerProc::start(&["--idle-timeout", "3"]);
    let end = iperf3_against_wirerate(&srv, &["-t", "1", "-P", "2"]);
    let streams = end["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 2);
    assert!(
        streams.iter().all(|s| u(&s["receiver"]["bytes"]) > 0),
        "{end}"
    );
    let end = iperf3_against_wirerate(&srv, &["-t", "1", "--bidir", "-P", "2"]);
    let streams = end["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 4);
    assert!(
        streams.iter().all(|s| u(&s["receiver"]["bytes"]) > 0),
        "{end}"
    );
    let log = srv.stop_after("served iperf3 client");
    assert!(log.contains("served iperf3 client"), "{log}");
}

#[test]
fn wirerate_speaks_iperf3_to_itself_with_every_byte_accounted() {
    let srv = ServerProc::start(&["--idle-timeout", "3"]);
    let j = wirerate_client(srv.port, &["-n", "48M", "--bidir", "-P", "2"]);
    let flows = j["summary"]["flows"].as_array().unwrap();
    assert!(flows.iter().all(|f| u(&f["bytes"]) > 0), "{flows:?}");
    // the client's flow ends at 48 MiB and the server drains what was in flight
    let c2s = flows
        .iter()
        .find(|f| f["flow"] == "client_to_server")
        .unwrap();
    assert_eq!(u(&c2s["bytes"]), 48 << 20);
    let j = wirerate_client(srv.port, &["-u", "-b", "40M", "-t", "1", "-R"]);
    let s = &j["summary"];
    // packets counts up to the highest sequence number, lost datagrams included
    let len = u(&j["spec"]["len_bytes"]);
    assert!(u(&s["udp"]["packets"]) * len >= u(&s["bytes"]), "{s}");
    assert!(u(&s["udp"]["lost"]) <= u(&s["udp"]["packets"]));
    assert!(u(&s["bytes"]) <= u(&s["sender_bytes"]));
}

#[test]
fn an_iperf3_client_is_told_busy_while_a_test_runs() {
    let srv = ServerProc::start(&[]);
    let p = srv.port.to_string();
    let first = Command::new(common::bin())
        .args(["run", "127.0.0.1", "-p", &p, "-t", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let out = iperf3_client(srv.port, &["-t", "1"]);
    // iperf3 3.12 exits 0 after a failure when -J is given; the error is in the document
    let j: Value = serde_json::from_slice(&out.stdout).expect("iperf3 -J output");
    let err = j["error"].as_str().unwrap_or_default();
    assert!(err.contains("busy"), "{j}");
    assert!(wait_bounded(first, LIMIT).status.success());
}

#[test]
fn an_iperf3_looking_client_sending_junk_does_not_stop_the_server() {
    let mut srv = ServerProc::start(&["--idle-timeout", "1"]);
    // a cookie then an absurd length; junk; JSON nested deep enough to overflow a recursive
    // parser's stack (a regression); then silence. One at a time: each holds the test slot
    // until it is dropped.
    let nested = "{\"a\":".repeat(10_000);
    let mut deep = (nested.len() as u32).to_be_bytes().to_vec();
    deep.extend(nested.as_bytes());
    let payloads: [&[u8]; 4] = [
        &[0xff, 0xff, 0xff, 0xff],
        b"\x00\x00\x00\x05{{{{{",
        &deep,
        b"",
    ];
    let mut held = Vec::new();
    for (i, junk) in payloads.into_iter().enumerate() {
        let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        s.write_all(&[b'a' + i as u8; 36]).unwrap();
        s.write_all(&[0]).unwrap();
        s.write_all(junk).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        held.push(s);
    }
    // a half cookie, never finished
    let mut half = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    half.write_all(b"abcdefghijkl").unwrap();
    std::thread::sleep(Duration::from_millis(1300));
    let end = iperf3_against_wirerate(&srv, &["-t", "1"]);
    assert!(u(&end["sum_received"]["bytes"]) > 0);
    assert!(srv.alive());
    let log = srv.stop_after("exceeds the limit");
    assert!(log.contains("exceeds the limit"), "{log}");
    drop(held);
}

/// Issue 11 (smaller): the serve log said "Tcp Forward" without goodput for iperf3 clients,
/// and `--get-server-output` showed `stream ClientToServer 0`.
#[test]
fn serve_logs_iperf3_goodput_and_server_output_names_streams_readably() {
    let srv = ServerProc::start(&["--idle-timeout", "3"]);
    let out = iperf3_client(srv.port, &["-t", "1", "--get-server-output"]);
    let j: Value = serde_json::from_slice(&out.stdout).expect("iperf3 -J output");
    assert!(out.status.success(), "{}", j["error"]);
    let text = j["server_output_text"].as_str().unwrap_or_default();
    assert!(text.contains("stream 0 client→server: received"), "{text}");
    assert!(!text.contains("ClientToServer"), "{text}");
    let log = srv.stop_after("served iperf3 client");
    let line = log
        .lines()
        .find(|l| l.contains("served iperf3 client"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        line.contains("TCP client to server, 1 stream, goodput ") && line.contains("bit/s"),
        "{line}"
    );
}

/// The iperf3 server reports what it received only at the end: the client's own sent bytes
/// are shown per interval, as they happen, and say whose count they are.
#[test]
fn iperf3_forward_shows_the_senders_intervals_live() {
    let srv = Iperf3Server::start();
    let p = srv.port.to_string();
    let out = run(
        &[
            "run",
            "127.0.0.1",
            "--iperf3",
            "-p",
            &p,
            "-t",
            "3",
            "-b",
            "20M",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("sent bytes"), "{text}");
    // three intervals before the summary, and bytes in them
    let live: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("Summary"))
        .filter(|l| l.starts_with("client→server") && l.contains(" s "))
        .collect();
    assert!(live.len() >= 3, "{text}");
    assert!(live.iter().any(|l| l.contains("MiB")), "{text}");
    srv.report();
}

/// Ctrl-C during an iperf3 test ends it on both sides; what was measured is printed and
/// the exit status is 130.
#[test]
fn ctrl_c_ends_an_iperf3_test_and_keeps_what_was_measured() {
    for extra in [&[][..], &["-R"][..]] {
        let srv = Iperf3Server::start();
        let p = srv.port.to_string();
        let child = common::wr()
            .args([
                "run",
                "127.0.0.1",
                "--iperf3",
                "-p",
                &p,
                "-t",
                "10",
                "--json",
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        let pid = libc::pid_t::try_from(child.id()).unwrap();
        // SAFETY: kill on the PID of a child this test started and has not reaped yet.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
        let out = wait_bounded(child, Duration::from_secs(5));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(130), "{extra:?}: {err}");
        let j = json(&out);
        assert_eq!(j["interrupted"], true, "{extra:?}");
        let seconds = j["summary"]["seconds"].as_f64().unwrap();
        assert!((1.0..3.0).contains(&seconds), "{extra:?}: {seconds} s");
        assert!(
            j["summary"]["goodput_bps"].as_f64().unwrap() > 0.0,
            "{extra:?}"
        );
        srv.report();
    }
}
