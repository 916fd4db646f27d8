//! Robustness of `wirerate serve`: junk, idle hordes, slot squatters, oversized frames,
//! forged data streams and killed clients never stop the server or block the next test for
//! longer than the idle timeout.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{json, quick_test, run, stderr, ServerProc};

const LIMIT: Duration = Duration::from_secs(30);

fn assert_serves(port: u16) {
    let out = quick_test(port);
    assert!(
        out.status.success(),
        "server did not serve: {}",
        stderr(&out)
    );
    assert_eq!(json(&out)["summary"]["bytes"], 4 << 20);
}

fn connect(port: u16) -> TcpStream {
    TcpStream::connect(("127.0.0.1", port)).expect("connect")
}

/// True when the server closes the connection within `limit`.
fn closed_within(mut s: TcpStream, limit: Duration) -> bool {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 4096];
    let t0 = Instant::now();
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
        if t0.elapsed() > limit {
            return false;
        }
    }
}

#[test]
fn junk_bytes_are_rejected_and_logged() {
    let srv = ServerProc::start(&["--idle-timeout", "2"]);
    let mut s = connect(srv.port);
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    assert!(closed_within(s, Duration::from_secs(3)));
    assert_serves(srv.port);
    let log = srv.stop_after("bad magic");
    assert!(
        log.contains("rejected") && log.contains("bad magic"),
        "{log}"
    );
}

#[test]
fn hundreds_of_idle_connections_do_not_block_a_test() {
    let srv = ServerProc::start(&["--idle-timeout", "3"]);
    let idle: Vec<TcpStream> = (0..300).map(|_| connect(srv.port)).collect();
    let t0 = Instant::now();
    // from another address: the idle ones hold every pending place of theirs
    let p = srv.port.to_string();
    let out = run(
        &[
            "run",
            "127.0.0.1",
            "-p",
            &p,
            "-B",
            "127.0.0.3",
            "-n",
            "4M",
            "--json",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // from theirs, the client is told why at once
    let out = quick_test(srv.port);
    assert!(
        stderr(&out).contains("too many pending connections from your address"),
        "{}",
        stderr(&out)
    );
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "test waited for idle connections"
    );
    drop(idle);
}

#[test]
fn a_client_squatting_the_slot_is_dropped_after_the_idle_timeout() {
    let mut srv = ServerProc::start(&["--idle-timeout", "2"]);
    let mut squatter = connect(srv.port);
    // a valid preamble and spec, then silence: the server reserves the test slot (a
    // preamble alone holds none: hostile.rs)
    let spec = wirerate_core::TestSpec::default();
    let mut sess =
        wirerate_proto::ClientSession::new(&spec, Instant::now(), Duration::from_secs(30));
    while let Some(b) = sess.poll_transmit() {
        squatter.write_all(&b).unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    let out = quick_test(srv.port);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("busy"), "{}", stderr(&out));
    std::thread::sleep(Duration::from_millis(2200));
    assert_serves(srv.port);
    assert!(srv.alive());
}

#[test]
fn an_oversized_frame_is_refused_before_allocation() {
    let srv = ServerProc::start(&["--idle-timeout", "2"]);
    let mut s = connect(srv.port);
    s.write_all(b"WRRT\x00\x01\x00\x00").unwrap();
    s.write_all(&u32::MAX.to_be_bytes()).unwrap();
    assert!(closed_within(s, Duration::from_secs(3)));
    assert_serves(srv.port);
    let log = srv.stop_after("exceeds the limit");
    assert!(log.contains("exceeds the limit"), "{log}");
}

#[test]
fn a_data_stream_with_a_forged_token_is_rejected() {
    let srv = ServerProc::start(&["--idle-timeout", "2"]);
    let mut s = connect(srv.port);
    let mut hello = b"WRRT\x00\x01\x01\x00".to_vec();
    hello.extend([0xAAu8; 16]);
    hello.extend([0, 0, 0, 0, 0]);
    s.write_all(&hello).unwrap();
    assert!(closed_within(s, Duration::from_secs(3)));
    assert_serves(srv.port);
    let log = srv.stop_after("wrong or stale session token");
    assert!(log.contains("wrong or stale session token"), "{log}");
}

#[test]
fn a_client_killed_mid_test_frees_the_server() {
    for extra in [
        &[][..],
        &["-R"],
        &["-u", "-b", "50M"],
        &["-u", "-b", "50M", "-R"],
    ] {
        let mut srv = ServerProc::start(&["--idle-timeout", "2"]);
        let p = srv.port.to_string();
        let mut args = vec!["run", "127.0.0.1", "-p", &p, "-t", "30"];
        args.extend_from_slice(extra);
        let mut client = common::wr()
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1000));
        client.kill().unwrap();
        client.wait().unwrap();
        let t0 = Instant::now();
        // within the idle timeout (and a little), the next test runs
        loop {
            let out = quick_test(srv.port);
            if out.status.success() {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(4),
                "server still busy: {}",
                stderr(&out)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(srv.alive());
    }
}

#[test]
fn a_second_client_is_told_busy_at_once() {
    let srv = ServerProc::start(&[]);
    let p = srv.port.to_string();
    let mut first = common::wr()
        .args(["run", "127.0.0.1", "-p", &p, "-t", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let t0 = Instant::now();
    let out = quick_test(srv.port);
    assert_eq!(out.status.code(), Some(1));
    assert!(t0.elapsed() < Duration::from_secs(2));
    let err = stderr(&out);
    assert!(err.contains("busy") && err.contains("retry in"), "{err}");
    // the running test's remaining 2.5 s, not its length plus the idle timeout (10 s)
    let retry: f64 = err
        .split("retry in ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no retry time: {err}"));
    assert!((2.0..=3.0).contains(&retry), "retry in {retry} s: {err}");
    let status = common::wait_bounded(
        {
            let _ = first.stdout.take();
            first
        },
        LIMIT,
    )
    .status;
    assert!(status.success());
}

/// The server shows the intervals of the test it serves, as iperf3's does: a header and a
/// line per second of what it received; with JSON logs it prints none.
#[test]
fn serve_prints_the_interval_lines_of_the_test_it_serves() {
    for (extra, lines) in [(&[][..], true), (&["--log-format", "json"][..], false)] {
        let port = common::free_port();
        let p = port.to_string();
        let mut args = vec!["serve", "-B", "127.0.0.1", "-p", &p];
        args.extend_from_slice(extra);
        let mut srv = common::spawn_piped(&args);
        common::wait_listening(std::net::SocketAddr::from(([127, 0, 0, 1], port)), "server");
        let client = run(
            &[
                "run",
                "127.0.0.1",
                "-p",
                &p,
                "-t",
                "2",
                "-b",
                "50M",
                "--no-store",
            ],
            LIMIT,
        );
        assert!(client.status.success(), "{}", stderr(&client));
        let _ = srv.kill();
        let out = common::wait_bounded(srv, LIMIT);
        let text = String::from_utf8_lossy(&out.stdout);
        let shown: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("client→server") && l.contains(" s "))
            .collect();
        if lines {
            assert!(text.starts_with("flow "), "{text}");
            assert!(shown.len() >= 2, "{text}");
            assert!(
                shown[0].contains("0.00-1.00 s") && shown[0].contains("Mbit/s"),
                "{text}"
            );
        } else {
            assert!(shown.is_empty(), "{extra:?}: {text}");
        }
    }
}

/// What the server sends (`-R`, `--bidir`) is shown too, as iperf3's server shows it: a line
/// per interval of the bytes it wrote, under a note that says so; each test under its header.
#[test]
fn serve_prints_what_it_sends_under_a_note() {
    let port = common::free_port();
    let p = port.to_string();
    let mut srv = common::spawn_piped(&["serve", "-B", "127.0.0.1", "-p", &p]);
    common::wait_listening(std::net::SocketAddr::from(([127, 0, 0, 1], port)), "server");
    let tests: [&[&str]; 2] = [&["-R"], &["--bidir"]];
    for extra in tests {
        let mut args = vec![
            "run",
            "127.0.0.1",
            "-p",
            &p,
            "-t",
            "2.2",
            "-b",
            "50M",
            "--no-store",
        ];
        args.extend_from_slice(extra);
        let client = run(&args, LIMIT);
        assert!(client.status.success(), "{extra:?}: {}", stderr(&client));
    }
    let _ = srv.kill();
    let text = String::from_utf8_lossy(&common::wait_bounded(srv, LIMIT).stdout).into_owned();
    let shown: Vec<&str> = text.split("flow ").skip(1).collect();
    assert_eq!(shown.len(), 2, "{text}");
    for (extra, lines) in tests.iter().zip(&shown) {
        assert!(
            lines.contains("(server→client lines: the bytes this side sent)"),
            "{text}"
        );
        let sent: Vec<&str> = lines
            .lines()
            .filter(|l| l.starts_with("server→client"))
            .collect();
        assert!(sent.len() >= 2, "{extra:?}: {text}");
        assert!(
            sent[0].contains("0.00-1.00 s") && sent[0].ends_with("Mbit/s"),
            "{text}"
        );
        let received = lines
            .lines()
            .filter(|l| l.starts_with("client→server"))
            .count();
        assert_eq!(received > 0, *extra == ["--bidir"], "{extra:?}: {text}");
    }
}

/// docs/server.md's table of the caps gives each flag the default `serve --help` has.
#[test]
fn the_docs_table_of_caps_gives_the_defaults_serve_has() {
    let docs = std::fs::read_to_string(common::prom::repo().join("docs/server.md")).unwrap();
    let out = run(&["serve", "--help"], LIMIT);
    let help = String::from_utf8_lossy(&out.stdout).to_string();
    let mut checked = 0;
    for row in docs.lines().filter(|l| l.starts_with("| `--")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let flag = cells[1].trim_matches('`').split(' ').next().unwrap();
        let documented = cells[2];
        let at = help
            .find(&format!("{flag} <"))
            .unwrap_or_else(|| panic!("{flag} is not in serve --help"));
        // the flag's own text: up to the next line that starts another option
        let own: String = help[at..]
            .lines()
            .enumerate()
            .take_while(|(i, l)| *i == 0 || !l.trim_start().starts_with('-'))
            .map(|(_, l)| l.trim())
            .collect::<Vec<_>>()
            .join(" ");
        let default = own
            .split("[default: ")
            .nth(1)
            .and_then(|d| d.split(']').next())
            .unwrap_or_else(|| panic!("{flag} has no default in serve --help: {own}"));
        assert_eq!(documented, default, "docs/server.md's default of {flag}");
        checked += 1;
    }
    assert!(
        checked >= 6,
        "only {checked} rows of caps in docs/server.md"
    );
}
