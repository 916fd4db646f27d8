//! `serve --log-format json` and SIGHUP: log lines that parse and carry the decision and the
//! rule, and a reload of the limits file that changes the next test, not the running one.

use crate::common;

use std::time::{Duration, Instant};

use common::{json_lines, log_until, run, stderr, wr, ServerProc};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(30);

fn client(port: u16, extra: &[&str]) -> std::process::Output {
    let p = port.to_string();
    let mut args = vec!["run", "127.0.0.1", "-p", &p, "--json"];
    args.extend_from_slice(extra);
    run(&args, LIMIT)
}

fn tests_of(log: &[Value]) -> Vec<&Value> {
    log.iter().filter(|v| v["event"] == "test").collect()
}

/// The log file's lines once it holds `tests` test lines (the server writes a test's line
/// just after its client has its result), or whatever it holds after a few seconds.
fn log_with_tests(file: &std::path::Path, tests: usize) -> Vec<Value> {
    log_until(file, |l| tests_of(l).len() >= tests)
}

#[test]
fn json_log_lines_carry_the_decision_and_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("limits.toml");
    std::fs::write(
        &file,
        "[[rule]]\nname = \"guests\"\nfrom = [\"127.0.0.0/8\"]\nmax_duration_s = 2\n",
    )
    .unwrap();
    let logfile = dir.path().join("serve.log");
    let srv = ServerProc::start(&[
        "--log-format",
        "json",
        "--limits",
        file.to_str().unwrap(),
        "--logfile",
        logfile.to_str().unwrap(),
    ]);
    let ok = client(srv.port, &["-n", "1M"]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    let refused = client(srv.port, &["-t", "5", "-P", "2"]);
    assert_eq!(refused.status.code(), Some(1));
    let log = log_with_tests(&logfile, 2);
    drop(srv);
    assert_eq!(log[0]["event"], "notice");
    // the readiness probe of the test harness sent nothing: refused; the two clients got in
    let conns: Vec<_> = log.iter().filter(|v| v["event"] == "connection").collect();
    let accepted = conns.iter().filter(|c| c["decision"] == "accepted").count();
    assert_eq!(accepted, 2, "{log:?}");
    let tests = tests_of(&log);
    assert_eq!(tests.len(), 2, "{log:?}");
    let (a, r) = (tests[0], tests[1]);
    assert_eq!(a["decision"], "accepted");
    assert_eq!(a["rule"], "guests");
    assert_eq!(a["spec"]["protocol"], "tcp");
    assert_eq!(a["spec"]["bytes"], 1 << 20);
    assert!(a["error"].is_null(), "{a}");
    assert!(a["user"].is_null());
    assert!(a["result"]["bytes"].as_u64().unwrap() >= 1 << 20, "{a}");
    assert!(a["result"]["goodput_bps"].as_f64().unwrap() > 0.0, "{a}");
    assert!(a["peer"].as_str().unwrap().starts_with("127.0.0.1:"));
    assert!(a["time"].as_str().unwrap().ends_with('Z'));
    assert_eq!(r["decision"], "refused");
    assert_eq!(r["rule"], "guests");
    assert_eq!(r["spec"]["seconds"], 5.0);
    assert_eq!(r["spec"]["parallel"], 2);
    assert!(
        r["reason"]
            .as_str()
            .unwrap()
            .contains("exceeds the 2 s limit of rule 'guests'"),
        "{r}"
    );
}

#[test]
fn json_rejections_are_rate_limited_too() {
    use std::io::Write;
    let srv = ServerProc::start(&["--log-format", "json"]);
    for _ in 0..40 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        let _ = s.write_all(b"GET / HTTP/1.0\r\n\r\n");
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut s, &mut sink);
    }
    std::thread::sleep(Duration::from_millis(200));
    let log = json_lines(&srv.stop());
    let refused = log
        .iter()
        .filter(|v| v["event"] == "connection" && v["decision"] == "refused")
        .count();
    assert!((1..=10).contains(&refused), "{refused} lines: {log:?}");
}

#[test]
fn sighup_changes_the_next_test_and_the_running_one_completes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("limits.toml");
    std::fs::write(&file, "[[rule]]\nname = \"roomy\"\nmax_duration_s = 10\n").unwrap();
    let logfile = dir.path().join("serve.log");
    let srv = ServerProc::start(&[
        "--log-format",
        "json",
        "--limits",
        file.to_str().unwrap(),
        "--logfile",
        logfile.to_str().unwrap(),
    ]);
    let p = srv.port.to_string();
    let running = wr()
        .args(["run", "127.0.0.1", "-p", &p, "-t", "3", "--json"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    std::fs::write(&file, "[[rule]]\nname = \"tight\"\nmax_duration_s = 1\n").unwrap();
    srv.hangup();
    let started = Instant::now();
    let out = common::wait_bounded(running, LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(run["summary"]["seconds"].as_f64().unwrap() > 2.5, "{run}");
    assert!(started.elapsed() > Duration::from_secs(1));
    // the next test meets the new rule
    let next = client(srv.port, &["-t", "2"]);
    assert_eq!(next.status.code(), Some(1));
    assert!(
        stderr(&next).contains("exceeds the 1 s limit of rule 'tight'"),
        "{}",
        stderr(&next)
    );
    // a file that fails to load keeps the rules in force
    std::fs::write(&file, "[[rule]]\nmax_duration_s = \"soon\"\n").unwrap();
    srv.hangup();
    std::thread::sleep(Duration::from_millis(600));
    let again = client(srv.port, &["-t", "2"]);
    assert!(
        stderr(&again).contains("rule 'tight'"),
        "{}",
        stderr(&again)
    );
    let log = log_with_tests(&logfile, 3);
    drop(srv);
    let reloads: Vec<_> = log.iter().filter(|v| v["event"] == "reload").collect();
    assert_eq!(reloads.len(), 2, "{log:?}");
    assert!(reloads[0]["error"].is_null());
    assert!(reloads[1]["error"]
        .as_str()
        .unwrap()
        .contains("the old rules stay"));
    let tests = tests_of(&log);
    assert_eq!(tests[0]["decision"], "accepted");
    assert_eq!(tests[0]["rule"], "roomy");
    assert!(tests[0]["error"].is_null(), "{:?}", tests[0]);
    assert_eq!(tests[1]["decision"], "refused");
    assert_eq!(tests[1]["rule"], "tight");
}

/// A peer's words in a log line: a client that ends its test with a `refused` whose reason
/// holds a terminal title, colours, a bell, a C1 escape and a line break.
const HOSTILE: &str = "\u{1b}]0;PWNED\u{7}\u{1b}[41mred\u{9b}2J\nwirerate serve: forged line";

/// Connects by hand, sends a spec, and once it is accepted refuses with [`HOSTILE`].
fn refuse_with_hostile_words(port: u16) {
    use std::io::{Read, Write};
    use wirerate_proto::{ClientEvent, ClientSession};
    let mut ctl = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let spec = wirerate_core::TestSpec::default();
    let mut sess = ClientSession::new(&spec, Instant::now(), Duration::from_secs(10));
    let send = |sess: &mut ClientSession, ctl: &mut std::net::TcpStream| {
        while let Some(b) = sess.poll_transmit() {
            ctl.write_all(&b).unwrap();
        }
    };
    send(&mut sess, &mut ctl);
    ctl.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        let n = ctl.read(&mut buf).unwrap();
        assert!(n > 0, "closed before the spec was accepted");
        let ev = sess.handle_input(&buf[..n], Instant::now()).unwrap();
        if ev.iter().any(|e| matches!(e, ClientEvent::Accepted(..))) {
            break;
        }
    }
    sess.abort(HOSTILE);
    send(&mut sess, &mut ctl);
    // the server closes once it has logged the end of the test
    let _ = ctl.read(&mut buf);
}

#[test]
fn a_peers_control_characters_are_escaped_in_the_log() {
    let dir = tempfile::tempdir().unwrap();
    for format in ["text", "json"] {
        let logfile = dir.path().join(format!("serve-{format}.log"));
        let srv = ServerProc::start(&[
            "--log-format",
            format,
            "--logfile",
            logfile.to_str().unwrap(),
        ]);
        refuse_with_hostile_words(srv.port);
        let deadline = Instant::now() + Duration::from_secs(5);
        let log = loop {
            let log = std::fs::read_to_string(&logfile).unwrap_or_default();
            if log.contains("PWNED") || Instant::now() > deadline {
                break log;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        drop(srv);
        // nothing a terminal would act on, and the peer's line break did not make a line
        for c in ['\u{1b}', '\u{7}', '\u{9b}'] {
            assert!(!log.contains(c), "{format}: {c:?} reached the log: {log:?}");
        }
        let line = log
            .lines()
            .find(|l| l.contains("PWNED"))
            .unwrap_or_else(|| panic!("{format}: the reason was not logged: {log}"));
        assert!(
            !log.lines()
                .any(|l| l.starts_with("wirerate serve: forged line")),
            "{log}"
        );
        match format {
            "text" => assert!(
                line.contains("\\x1b]0;PWNED\\x07\\x1b[41mred\\u009b2J\\x0awirerate serve: forged"),
                "{line}"
            ),
            // the JSON keeps its meaning: the reason reads back as it was sent
            _ => {
                let v: Value = serde_json::from_str(line).unwrap();
                assert!(v["error"].as_str().unwrap().contains(HOSTILE), "{v}");
            }
        }
    }
}
