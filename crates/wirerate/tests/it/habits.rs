//! End-to-end tests of iperf3's habits: interval lines per stream with a `[SUM]` line and
//! Retr/Cwnd columns, and iperf3's spellings of options (`-c`, `-s`, `-J`, `-1`, `-D`, `-I`,
//! `--logfile`, `-T`, `--timestamps`, `-S`, `--cport`, `-A`, `-b` for TCP, `-F`,
//! `--connect-timeout`). Every test runs the real binary over loopback, bounded in time.

use crate::common;

use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, json, run, stderr, stdout, wait_bounded, wr, ServerProc};

const LIMIT: Duration = Duration::from_secs(30);

#[test]
fn parallel_streams_print_a_line_each_and_a_sum_with_retr_and_cwnd() {
    let out = run(&["run", "-t", "2.2", "-P", "3", "--no-store"], LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let header = text.lines().find(|l| l.starts_with("flow")).unwrap();
    for col in ["[ ID]", "Retr", "Cwnd"] {
        assert!(header.contains(col), "{header}");
    }
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("client→server") && l.contains(" s "))
        .collect();
    for span in ["0.00-1.00 s", "1.00-2.00 s"] {
        let group: Vec<&str> = lines.iter().copied().filter(|l| l.contains(span)).collect();
        let ids: Vec<&str> = group.iter().map(|l| &l[18..23]).collect();
        assert_eq!(ids, ["[  0]", "[  1]", "[  2]", "[SUM]"], "{text}");
        for l in &group[..3] {
            // … 12.3 Gbit/s   Retr   Cwnd: a count, then a size with its unit
            let t: Vec<&str> = l.split_whitespace().rev().take(3).collect();
            assert!(["B", "KiB", "MiB", "GiB"].contains(&t[0]), "{l}");
            assert!(t[1].parse::<f64>().is_ok(), "{l}");
            assert!(t[2].parse::<u64>().is_ok(), "retransmits: {l}");
        }
        let sum = group[3].split_whitespace().last().unwrap();
        assert!(sum.parse::<u64>().is_ok(), "the sum's Retr: {}", group[3]);
    }
}

#[test]
fn stream_intervals_add_up_to_their_flow_in_json() {
    let out = run(
        &[
            "run",
            "-t",
            "1.5",
            "-i",
            "0.5",
            "-P",
            "3",
            "-J",
            "--no-store",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let j = json(&out);
    assert_eq!(j["spec"]["stream_intervals"], true);
    let ivs = j["intervals"].as_array().unwrap();
    let sums: Vec<&serde_json::Value> = ivs.iter().filter(|i| i.get("stream").is_none()).collect();
    assert!(sums.len() >= 3, "{ivs:?}");
    let full = sums.iter().filter(|s| s["end_s"].as_f64().unwrap() <= 1.5);
    for sum in full {
        let start = sum["start_s"].as_f64().unwrap();
        let own: Vec<&serde_json::Value> = ivs
            .iter()
            .filter(|i| i.get("stream").is_some() && i["start_s"].as_f64() == Some(start))
            .collect();
        assert_eq!(own.len(), 3, "at {start}: {own:?}");
        let bytes: u64 = own.iter().map(|i| i["bytes"].as_u64().unwrap()).sum();
        assert_eq!(bytes, sum["bytes"].as_u64().unwrap(), "at {start}");
        let retr: u64 = own
            .iter()
            .map(|i| i["tcp"]["retransmits"].as_u64().unwrap())
            .sum();
        assert_eq!(retr, sum["tcp"]["retransmits"].as_u64().unwrap());
        assert!(own
            .iter()
            .all(|i| i["tcp"]["snd_cwnd_bytes"].as_u64() > Some(0)));
    }
    // one stream: the intervals are the flow's, as before
    let one = json(&run(&["run", "-t", "1", "-J", "--no-store"], LIMIT));
    assert!(one["spec"].get("stream_intervals").is_none());
    let ivs = one["intervals"].as_array().unwrap();
    assert!(!ivs.is_empty() && ivs.iter().all(|i| i.get("stream").is_none()));
}

/// `wirerate -s … -1` serves one test and exits; `wirerate -c HOST … -J` runs it.
#[test]
fn dash_c_and_dash_s_run_and_serve_one_test() {
    let port = free_port();
    let p = port.to_string();
    let server = wr()
        .args(["-s", "-B", "127.0.0.1", "-p", &p, "-1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "server did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = run(
        &["-c", "127.0.0.1", "-p", &p, "-t", "0.5", "-J", "--no-store"],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(json(&out)["summary"]["goodput_bps"].as_f64().unwrap() > 0.0);
    // the one-off server ends by itself, successfully, after the test
    let done = wait_bounded(server, Duration::from_secs(10));
    assert!(done.status.success(), "{}", stderr(&done));
    assert!(TcpListener::bind(("127.0.0.1", port)).is_ok());
}

#[test]
fn daemon_writes_its_pid_and_one_off_ends_it() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("wr.pid");
    let port = free_port();
    let p = port.to_string();
    let pf = pidfile.to_str().unwrap();
    let args = ["serve", "-B", "127.0.0.1", "-p", &p, "-D", "-1", "-I", pf];
    let parent = run(&args, Duration::from_secs(10));
    assert!(parent.status.success(), "{}", stderr(&parent));
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let proc_dir = std::path::PathBuf::from(format!("/proc/{pid}"));
    assert!(proc_dir.exists(), "the daemon {pid} is not running");
    let out = run(
        &["run", "127.0.0.1", "-p", &p, "-t", "0.5", "--no-store"],
        LIMIT,
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while pidfile.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if pidfile.exists() {
        // it outlived its one test: end the process this test started, by its id
        let _ = Command::new("kill").arg(pid.to_string()).status();
    }
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!pidfile.exists(), "the one-off daemon did not end");
}

/// A daemon's pid file was left behind after SIGTERM: the signal now ends the accept loop
/// and the file goes with the process (SIGINT likewise, for a server in the foreground).
#[test]
fn sigterm_or_sigint_removes_the_pid_file() {
    for (daemon, signal) in [(true, libc::SIGTERM), (false, libc::SIGINT)] {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("wr.pid");
        let p = free_port().to_string();
        let pf = pidfile.to_str().unwrap();
        let mut args = vec!["serve", "-B", "127.0.0.1", "-p", &p, "-I", pf];
        let child = if daemon {
            args.push("-D");
            let parent = run(&args, Duration::from_secs(10));
            assert!(parent.status.success(), "{}", stderr(&parent));
            None
        } else {
            Some(common::spawn_quiet(&args))
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !pidfile.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let pid: libc::pid_t = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // SAFETY: kill on the PID of the server this test started (read from its pid file).
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
        let deadline = Instant::now() + Duration::from_secs(5);
        let proc_dir = std::path::PathBuf::from(format!("/proc/{pid}"));
        // the child in the foreground stays a zombie until waited for below
        while (pidfile.exists() || (daemon && proc_dir.exists())) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !pidfile.exists(),
            "daemon {daemon}: the pid file is still there"
        );
        if let Some(c) = child {
            let out = wait_bounded(c, Duration::from_secs(5));
            assert_eq!(out.status.code(), Some(0), "the server did not end cleanly");
        } else {
            assert!(!proc_dir.exists(), "the daemon {pid} is still running");
        }
    }
}

#[test]
fn logfile_title_and_timestamps_prefix_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("out.log");
    let l = log.to_str().unwrap();
    let args = [
        "run",
        "-t",
        "1.2",
        "--no-store",
        "--logfile",
        l,
        "-T",
        "lab7",
        "--timestamps",
    ];
    for _ in 0..2 {
        let out = run(&args, LIMIT);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(out.stdout.is_empty() && out.stderr.is_empty());
    }
    let text = std::fs::read_to_string(&log).unwrap();
    // appended: two reports
    assert_eq!(text.matches("lab7:  Summary").count(), 2, "{text}");
    for line in text.lines().filter(|l| !l.is_empty()) {
        assert!(line.starts_with("lab7:  "), "{line}");
    }
    let interval = text
        .lines()
        .find(|l| l.contains("client→server") && l.contains("0.00-1.00 s"))
        .unwrap();
    // lab7:  2026-11-05 10:11:12.345 client→server …
    let stamp = &interval["lab7:  ".len()..];
    assert!(
        stamp.as_bytes()[4] == b'-' && stamp.as_bytes()[13] == b':',
        "{interval}"
    );
}

/// Two ports next to each other that were free a moment ago.
fn free_port_pair() -> u16 {
    loop {
        let p = free_port();
        if p < u16::MAX && TcpListener::bind(("127.0.0.1", p + 1)).is_ok() {
            return p;
        }
    }
}

#[test]
fn tos_and_cport_reach_the_data_sockets() {
    let server = ServerProc::start(&[]);
    let cport = free_port_pair();
    let (sp, cp) = (server.port.to_string(), cport.to_string());
    let child = wr()
        .args(["-c", "127.0.0.1", "-p", &sp, "-t", "3", "-P", "2"])
        .args(["-S", "0xb8", "--cport", &cp, "--no-store"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn client");
    let filter = format!("( sport = :{cport} or sport = :{} )", cport + 1);
    let deadline = Instant::now() + Duration::from_millis(2500);
    let mut seen = String::new();
    while Instant::now() < deadline {
        let ss = Command::new("ss")
            .args(["-tnH", "--tos", "state", "established", &filter])
            .output();
        let Ok(ss) = ss else {
            eprintln!("skipped the socket check: ss is not installed");
            break;
        };
        seen = stdout(&ss);
        if seen.lines().count() == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = wait_bounded(child, LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    if !seen.is_empty() {
        assert_eq!(seen.lines().count(), 2, "{seen}");
        assert!(
            seen.lines().all(|l| l.contains("tos:0xb8")),
            "both data streams carry TOS 0xb8: {seen}"
        );
    }
}

#[test]
fn tcp_bitrate_paces_each_stream() {
    let out = run(
        // a second of warm-up: the paced streams' ramp is not what is checked
        &[
            "run",
            "-t",
            "3",
            "-O",
            "1",
            "-b",
            "50M",
            "-P",
            "2",
            "-J",
            "--no-store",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let j = json(&out);
    assert_eq!(j["spec"]["rate_bps"].as_f64(), Some(5e7));
    let g = j["summary"]["goodput_bps"].as_f64().unwrap();
    // two streams of 50 Mbit/s: far below what loopback carries unpaced
    assert!((75e6..=110e6).contains(&g), "goodput {g}");
    assert_eq!(j["summary"]["diagnosis"]["bottleneck"], "app_pacing");
}

#[test]
fn file_is_sent_as_it_is_and_received_into_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.bin");
    let size = (3 << 20) + 123;
    let data: Vec<u8> = (0..size).map(|i: usize| (i * 7 % 251) as u8).collect();
    std::fs::write(&src, &data).unwrap();
    // no -t or -n: the file once
    let out = run(
        &["run", "-F", src.to_str().unwrap(), "-J", "--no-store"],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(json(&out)["summary"]["bytes"].as_u64(), Some(size as u64));
    // -R: what the server sends is written to the file
    let dst = dir.path().join("dst.bin");
    let out = run(
        &[
            "run",
            "-R",
            "-n",
            "2M",
            "-F",
            dst.to_str().unwrap(),
            "--no-store",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let got = std::fs::read(&dst).unwrap();
    assert_eq!(got.len(), 2 << 20);
    assert!(got.iter().any(|&b| b != 0));
    // seed 004's "ftp get" into /dev/null
    let out = run(
        &["run", "-R", "-t", "0.5", "-F", "/dev/null", "--no-store"],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // a file that is not there is a usage error, before any test
    let out = run(&["run", "-F", "/nonexistent/x", "--no-store"], LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn affinity_pins_the_threads_or_says_why_not() {
    let out = run(
        &["run", "-t", "0.5", "-A", "0,0", "-J", "--no-store"],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(json(&out)["spec"]["server_cpu"], 0);
    // a CPU this host does not have: refused before the test, in one line
    let out = run(&["run", "-t", "0.5", "-A", "1023", "--no-store"], LIMIT);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("no such CPU") && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn bad_iperf3_spellings_are_usage_errors() {
    for args in [
        vec!["run", "-A", "5000"],
        vec!["run", "-S", "256"],
        vec!["run", "-S", "0x100"],
        vec!["run", "--cport", "0"],
        vec!["run", "--cport", "65535", "-P", "2"],
        vec!["run", "--connect-timeout", "0"],
        vec!["run", "-F", "x", "-u"],
        vec!["run", "127.0.0.1", "--iperf3", "--cport", "5000"],
    ] {
        let out = run(&args, LIMIT);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert_eq!(stderr(&out).lines().count(), 1, "{args:?}");
    }
}

#[test]
fn connect_timeout_bounds_a_refused_connection() {
    let port = free_port().to_string();
    let t0 = Instant::now();
    let out = run(
        &[
            "-c",
            "127.0.0.1",
            "-p",
            &port,
            "--connect-timeout",
            "300",
            "--no-store",
        ],
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(t0.elapsed() < Duration::from_secs(5));
}

#[test]
fn options_before_dash_c_and_iperf3_spellings_are_taken() {
    let server = ServerProc::start(&[]);
    let port = server.port.to_string();
    // iperf3 takes options before -c; -k (blocks), --skip-rx-copy, --rcv-timeout (ms),
    // --get-server-output and --forceflush are its spellings
    let out = run(
        &[
            "-p",
            &port,
            "-c",
            "127.0.0.1",
            "-k",
            "64",
            "-l",
            "64K",
            "--skip-rx-copy",
            "--rcv-timeout",
            "5000",
            "--get-server-output",
            "--forceflush",
            "-J",
            "--no-store",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = json(&out);
    assert_eq!(doc["summary"]["bytes"], 64 * 65536, "{doc}");
    assert_eq!(doc["spec"]["recv_mode"], "discard", "{}", doc["spec"]);
}

#[test]
fn a_refused_connection_says_what_to_do_and_json_gets_an_error_document() {
    let port = free_port().to_string();
    let out = run(&["-c", "127.0.0.1", "-p", &port, "-t", "1", "-J"], LIMIT);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("wirerate serve") && err.contains("-p"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON document");
    let msg = doc["error"].as_str().unwrap_or_default();
    assert!(msg.contains("cannot connect to 127.0.0.1"), "{doc}");
}

#[test]
fn a_rate_in_bytes_is_refused_with_the_rate_in_bits() {
    let out = run(&["run", "-b", "10MB", "-t", "1", "--no-store"], LIMIT);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("bits per second") && err.contains("80M"),
        "{err}"
    );
}

#[test]
fn a_cpu_that_is_not_there_is_refused_before_the_test() {
    for a in ["99", "0,99"] {
        let started = Instant::now();
        let out = run(&["run", "-t", "3", "-A", a, "--no-store"], LIMIT);
        assert_eq!(out.status.code(), Some(2), "-A {a}: {}", stderr(&out));
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "-A {a} ran the test first"
        );
        assert!(out.stdout.is_empty(), "-A {a} printed a report");
        let err = stderr(&out);
        assert!(err.contains("-A 99: no such CPU"), "{err}");
    }
}

#[test]
fn a_server_cpu_that_is_not_there_is_refused_before_the_test() {
    // the far server checks the CPU `-A N,M` asks of it before any stream is made
    let server = ServerProc::start(&[]);
    let at = format!("127.0.0.1:{}", server.port);
    let started = Instant::now();
    let out = run(&["run", &at, "-t", "3", "-A", "0,99", "--no-store"], LIMIT);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "-A 0,99 ran the test first"
    );
    assert!(!stdout(&out).contains("Summary"), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("refused")
            && err.contains("the server has no CPU 99")
            && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn a_host_takes_its_port_after_a_colon() {
    let server = ServerProc::start(&[]);
    let at = format!("127.0.0.1:{}", server.port);
    let out = run(&["run", &at, "-n", "1M", "-J", "--no-store"], LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(json(&out)["summary"]["bytes"], 1 << 20);
    let rr = run(&["rr", &at, "-t", "0.5", "--json", "--no-store"], LIMIT);
    assert!(rr.status.success(), "{}", stderr(&rr));
    let twice = run(&["run", &at, "-p", "1", "-t", "1", "--no-store"], LIMIT);
    assert_eq!(twice.status.code(), Some(2));
    assert!(
        stderr(&twice).contains("the port is given twice"),
        "{}",
        stderr(&twice)
    );
    let bad = run(&["run", "127.0.0.1:http", "-t", "1", "--no-store"], LIMIT);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
}

/// A process group's Ctrl-C or `timeout -s INT` can deliver SIGINT twice at once: the second
/// must not end the process before the result is printed.
#[test]
fn a_doubled_ctrl_c_still_prints_the_result() {
    for _ in 0..3 {
        let child = wr()
            .args(["run", "-t", "10", "--json", "--no-store"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1200));
        let pid = libc::pid_t::try_from(child.id()).unwrap();
        for _ in 0..2 {
            // SAFETY: kill on the PID of a child this test started and has not reaped yet.
            assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = wait_bounded(child, Duration::from_secs(5));
        assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
        assert_eq!(json(&out)["interrupted"], true);
    }
}
