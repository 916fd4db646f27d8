//! `wirerate rr` and `wirerate sweep` end to end over loopback: exact transaction counts on
//! both sides, ordered percentiles, the open-loop schedule under a server stall, CRR
//! connections, UDP loss, the sweep schedule and its formats, usage errors, and a server that
//! frees itself from a silent rr client.

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{f, json, run, stderr, wait_bounded, wr, ServerProc};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(60);

fn rr_json(args: &[&str]) -> Value {
    let mut a = vec!["rr", "--json", "--no-store"];
    a.extend_from_slice(args);
    let out = run(&a, LIMIT);
    assert!(out.status.success(), "rr failed: {}", stderr(&out));
    json(&out)
}

fn assert_ordered(rr: &Value) {
    let keys = [
        "rtt_min_us",
        "rtt_p50_us",
        "rtt_p90_us",
        "rtt_p99_us",
        "rtt_p999_us",
        "rtt_max_us",
    ];
    let v: Vec<f64> = keys.iter().map(|k| f(&rr[*k])).collect();
    assert!(v.windows(2).all(|w| w[0] <= w[1]), "not ordered: {v:?}");
    assert!(v[0] > 0.0);
    let mean = f(&rr["rtt_mean_us"]);
    assert!(v[0] <= mean && mean <= v[5], "mean {mean} outside {v:?}");
}

#[test]
fn tcp_rr_counts_agree_on_both_sides_and_percentiles_are_ordered() {
    let srv = ServerProc::start(&[]);
    let p = srv.port.to_string();
    let j = rr_json(&[
        "127.0.0.1",
        "-p",
        &p,
        "-n",
        "3000",
        "-P",
        "2",
        "--burst",
        "3",
        "--request",
        "100",
        "--response",
        "2K",
        "-i",
        "0.1",
    ]);
    let rr = &j["summary"]["rr"];
    assert_eq!(rr["transactions"], 6000);
    assert_eq!(rr["server_transactions"], 6000);
    assert_eq!(rr["flows"].as_array().unwrap().len(), 2);
    for fl in rr["flows"].as_array().unwrap() {
        assert_eq!(fl["transactions"], 3000);
        assert_eq!(fl["server_transactions"], 3000);
        assert_ordered(fl);
    }
    assert_ordered(rr);
    assert_eq!(j["spec"]["test"]["kind"], "rr");
    // the server received every request byte
    assert_eq!(j["summary"]["bytes"], 6000 * 100);
    let in_intervals: u64 = j["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|iv| iv["rr"]["transactions"].as_u64().unwrap())
        .sum();
    assert!(in_intervals <= 6000 && in_intervals > 0, "{in_intervals}");
}

#[test]
fn embedded_server_serves_rr_by_time() {
    let j = rr_json(&["-t", "0.5", "-i", "0"]);
    let rr = &j["summary"]["rr"];
    assert!(rr["transactions"].as_u64().unwrap() > 10);
    assert_eq!(rr["transactions"], rr["server_transactions"]);
    assert!(f(&rr["seconds"]) >= 0.45 && f(&rr["seconds"]) < 5.0);
    assert!(f(&rr["tps"]) > 0.0);
    assert!(j["env"]["embedded_server"].as_bool().unwrap());
}

#[test]
fn crr_opens_a_connection_per_transaction() {
    let srv = ServerProc::start(&[]);
    let p = srv.port.to_string();
    let j = rr_json(&[
        "127.0.0.1",
        "-p",
        &p,
        "--mode",
        "crr",
        "-n",
        "150",
        "-P",
        "2",
    ]);
    let rr = &j["summary"]["rr"];
    assert_eq!(rr["transactions"], 300);
    assert_eq!(rr["connections"], 300);
    assert_eq!(rr["server_transactions"], 300);
    assert_ordered(rr);
}

/// User and system clock ticks of a process, from /proc/PID/stat (its threads, living and
/// ended, together).
fn proc_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // the fields after the command name, which ends at the last ')'
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name and state
    f[11] + f[12]
}

#[test]
fn crr_server_cpu_per_transaction_is_what_proc_says() {
    // the transactions are served by the listener's threads, not the flow's own: their CPU
    // must reach the report (it once counted 0.5 µs per transaction where /proc said 40)
    let srv = ServerProc::start(&[]);
    let p = srv.port.to_string();
    let pid = srv.child.id();
    let before = proc_ticks(pid);
    let j = rr_json(&[
        "127.0.0.1",
        "-p",
        &p,
        "--mode",
        "crr",
        "-t",
        "2",
        "-P",
        "2",
        "-i",
        "0",
    ]);
    let after = proc_ticks(pid);
    // SAFETY: sysconf reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let rr = &j["summary"]["rr"];
    let n = rr["transactions"].as_u64().unwrap() as f64;
    assert!(n > 500.0, "{rr}");
    let proc_us = (after - before) as f64 / hz * 1e6 / n;
    let reported = f(&rr["cpu_us_per_transaction_remote"]);
    assert!(
        (0.8..=1.2).contains(&(reported / proc_us)),
        "server CPU per transaction: reported {reported:.2} µs, /proc {proc_us:.2} µs"
    );
}

#[test]
fn open_loop_reports_send_lateness_and_both_round_trips() {
    let j = rr_json(&["--rate", "2000", "-t", "1", "-i", "0"]);
    let rr = &j["summary"]["rr"];
    let o = &rr["open_loop"];
    let late: Vec<f64> = ["p50", "p99", "max"]
        .iter()
        .map(|k| f(&o[format!("send_lateness_{k}_us")]))
        .collect();
    assert!(late.windows(2).all(|w| w[0] <= w[1]), "{o}");
    assert!(f(&o["send_lateness_mean_us"]) <= late[2], "{o}");
    let un = &o["uncorrected"];
    assert_ordered(un);
    // each transaction's time from its schedule is at least its time from its send
    for k in ["rtt_min_us", "rtt_p50_us", "rtt_p99_us", "rtt_max_us"] {
        assert!(f(&rr[k]) >= f(&un[k]), "{k}: corrected {rr}");
    }
    // and at most that plus how late it left
    assert!(
        f(&rr["rtt_max_us"]) <= f(&un["rtt_max_us"]) + late[2] + 1.0,
        "{rr}"
    );
    // closed loop has no schedule to be late for
    let closed = rr_json(&["-n", "100", "-i", "0"]);
    assert!(closed["summary"]["rr"].get("open_loop").is_none());
    // the text says the same
    let out = run(
        &["rr", "--rate", "2000", "-n", "200", "-i", "0", "--no-store"],
        LIMIT,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    for line in ["scheduled send", "from actual send", "send lateness (µs)"] {
        assert!(text.contains(line), "no '{line}' in:\n{text}");
    }
}

#[test]
fn history_names_rr_tests_and_lists_their_process_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let db = db.to_str().unwrap();
    for mode in ["tcp", "crr", "udp"] {
        let out = run(
            &["rr", "--mode", mode, "-n", "200", "-i", "0", "--db", db],
            LIMIT,
        );
        assert!(out.status.success(), "{mode}: {}", stderr(&out));
    }
    let out = run(&["history", "--db", db], LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    let out = run(&["history", "--db", db, "--json"], LIMIT);
    let runs = json(&out);
    let rows: Vec<&str> = table.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "{table}");
    for ((row, name), run) in rows
        .iter()
        .zip(["tcp_rr x1", "tcp_crr x1", "udp_rr x1"])
        .zip(runs.as_array().unwrap())
    {
        assert!(row.contains(name), "{name} not in: {row}");
        // the CPU column is the busier wirerate process's own, not the host's
        let cpu = &run["result"]["summary"]["cpu"];
        let own = f(&cpu["local"]["process_percent"]).max(f(&cpu["remote"]["process_percent"]));
        assert!(
            row.split_whitespace().any(|w| w == format!("{own:.1}")),
            "{own:.1} not in: {row}"
        );
    }
}

#[test]
fn udp_rr_counts_lost_transactions_and_goes_on() {
    // responses far larger than the client's receive buffer holds, many in flight: the
    // client's socket drops some; each is timed out, counted, and the test completes
    let j = rr_json(&[
        "--mode",
        "udp",
        "--response",
        "60000",
        "--burst",
        "200",
        "-t",
        "1",
        "--loss-timeout",
        "0.05",
        "-i",
        "0",
    ]);
    let rr = &j["summary"]["rr"];
    let done = rr["transactions"].as_u64().unwrap();
    let lost = rr["lost"].as_u64().unwrap();
    assert!(done > 0, "{rr}");
    assert!(lost > 0, "expected loss: {rr}");
    assert!(rr["server_transactions"].as_u64().unwrap() >= done);
    let pct = f(&rr["loss_percent"]);
    assert!(pct > 0.0 && pct < 100.0);
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: sends a signal to a child process this test started, by its PID.
    let rc = unsafe { libc::kill(pid as i32, sig) };
    assert_eq!(rc, 0, "kill({pid}, {sig})");
}

/// Runs rr against a server that is stopped for 100 ms once, 0.6 s into the test.
fn rr_with_stall(extra: &[&str]) -> Value {
    let mut srv = ServerProc::start(&[]);
    let p = srv.port.to_string();
    let mut args = vec![
        "rr",
        "127.0.0.1",
        "-p",
        &p,
        "-t",
        "1.5",
        "-i",
        "0",
        "--json",
        "--no-store",
    ];
    args.extend_from_slice(extra);
    let child = wr()
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    let pid = srv.child.id();
    signal(pid, libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(100));
    signal(pid, libc::SIGCONT);
    let out = wait_bounded(child, LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(srv.alive());
    json(&out)
}

#[test]
fn open_loop_shows_a_server_stall_that_closed_loop_hides() {
    let open = rr_with_stall(&["--rate", "2000"]);
    let closed = rr_with_stall(&[]);
    let (o, c) = (&open["summary"]["rr"], &closed["summary"]["rr"]);
    // both saw the stall as their longest transaction
    assert!(f(&o["rtt_max_us"]) >= 90_000.0, "{o}");
    assert!(f(&c["rtt_max_us"]) >= 90_000.0, "{c}");
    // open loop: the requests scheduled during the 100 ms (about 200 of 3000) waited, and
    // are timed from their schedule: several ms at the 99th percentile
    assert!(f(&o["rtt_p99_us"]) >= 10_000.0, "open loop p99: {o}");
    // closed loop: one slow transaction among tens of thousands
    assert!(
        f(&c["rtt_p99_us"]) * 4.0 < f(&o["rtt_p99_us"]),
        "closed {c} open {o}"
    );
    assert_ordered(o);
    // the schedule was kept: about 2000 per second over 1.5 s
    let n = o["transactions"].as_u64().unwrap();
    assert!((2700..=3100).contains(&n), "{n}");
}

#[test]
fn sweep_follows_the_schedule_in_every_format() {
    let _heavy = common::heavy();
    let args = |fmt: &'static str| {
        vec![
            "sweep",
            "--max",
            "100",
            "--point-time",
            "0.002",
            "--trials",
            "2",
            "--no-store",
            fmt,
        ]
    };
    let out = run(&args("--json"), LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let j = json(&out);
    let sizes: Vec<u64> = j["sweep"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(
        sizes,
        vec![
            1, 2, 3, 4, 6, 8, 12, 13, 16, 19, 21, 24, 27, 29, 32, 35, 45, 48, 51, 61, 64, 67, 93,
            96, 99, 100
        ]
    );
    for p in j["sweep"]["points"].as_array().unwrap() {
        assert_eq!(p["trials"], 2);
        assert!(f(&p["bps_min"]) <= f(&p["bps_mean"]) && f(&p["bps_mean"]) <= f(&p["bps_max"]));
        assert!(f(&p["one_way_min_us"]) <= f(&p["one_way_mean_us"]));
        assert!(p["messages"].as_u64().unwrap() >= 6);
    }
    assert_eq!(j["sweep"]["mode"], "pingpong");
    let np = run(&args("--format=netpipe"), LIMIT);
    assert!(np.status.success(), "{}", stderr(&np));
    let rows: Vec<Vec<f64>> = String::from_utf8_lossy(&np.stdout)
        .lines()
        .map(|l| l.split_whitespace().map(|x| x.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 26);
    assert!(rows
        .iter()
        .all(|r| r.len() == 3 && r[1] > 0.0 && r[2] > 0.0));
    let csv = run(&args("--csv"), LIMIT);
    let text = String::from_utf8_lossy(&csv.stdout);
    assert!(text.starts_with("bytes,trials,messages,"));
    assert_eq!(text.lines().count(), 27);
}

#[test]
fn stream_sweep_against_a_server() {
    let _heavy = common::heavy();
    let srv = ServerProc::start(&[]);
    let p = srv.port.to_string();
    let out = run(
        &[
            "sweep",
            "127.0.0.1",
            "-p",
            &p,
            "--stream",
            "--max",
            "64K",
            "--point-time",
            "0.005",
            "--trials",
            "1",
            "--json",
            "--no-store",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let j = json(&out);
    assert_eq!(j["sweep"]["mode"], "stream");
    let pts = j["sweep"]["points"].as_array().unwrap();
    assert_eq!(pts.last().unwrap()["bytes"], 65536);
}

// ---- sweep: --min, --perturbation, progress, the fit's n½ rule ----

/// A short sweep (2 ms trials) on the embedded server; its JSON document.
fn sweep_json(extra: &[&str]) -> Value {
    // a trial 40 times its point time long ends a sweep early: a loaded host cuts it short
    let _heavy = common::heavy();
    let mut a = vec!["sweep", "--point-time", "0.002", "--trials", "2"];
    a.extend_from_slice(extra);
    a.extend_from_slice(&["--json", "--no-store"]);
    let out = run(&a, LIMIT);
    assert!(out.status.success(), "sweep failed: {}", stderr(&out));
    json(&out)
}

fn sweep_sizes(j: &Value) -> Vec<u64> {
    j["sweep"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["bytes"].as_u64().unwrap())
        .collect()
}

/// `-C` sets both ends' congestion control: under BBR a ping-pong past about 1 MiB runs at
/// two speeds depending on when BBR left its start-up, so a sweep can name another.
#[test]
fn sweep_congestion_control_reaches_the_socket() {
    let j = sweep_json(&["--max", "4K", "-C", "reno"]);
    assert_eq!(j["spec"]["congestion"], "reno");
    assert_eq!(sweep_sizes(&j).last(), Some(&4096));
    // the text output's header says which one ran
    let out = run(
        &[
            "sweep",
            "--max",
            "1K",
            "--point-time",
            "0.002",
            "-C",
            "reno",
            "--no-store",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let head = String::from_utf8_lossy(&out.stdout);
    let head = head.lines().next().unwrap_or_default();
    assert!(head.ends_with(", congestion control reno"), "{head}");
    // the name goes to the data socket: the kernel refuses one it does not have
    let out = run(
        &["sweep", "--max", "4K", "-C", "nosuchalgo", "--no-store"],
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("nosuchalgo") && err.contains("not available"),
        "{err}"
    );
}

#[test]
fn sweep_min_starts_the_schedule_as_netpipe_l() {
    let j = sweep_json(&["--min", "1K", "--max", "8K", "--perturbation", "0"]);
    assert_eq!(
        sweep_sizes(&j),
        vec![1024, 1536, 2048, 3072, 4096, 6144, 8192]
    );
}

#[test]
fn sweep_perturbation_measures_the_sizes_around_each_step() {
    // ±5 where the step exceeds 6 bytes; 1024 − 5 lies below --min and is not measured
    let j = sweep_json(&["--min", "1K", "--max", "8K", "--perturbation", "5"]);
    assert_eq!(
        sweep_sizes(&j),
        vec![
            1024, 1029, 1531, 1536, 1541, 2043, 2048, 2053, 3067, 3072, 3077, 4091, 4096, 4101,
            6139, 6144, 6149, 8187, 8192
        ]
    );
    // from 1 byte, ±20 only once the step exceeds 21 (the step after 32 is 16, after 64 is 32)
    let j = sweep_json(&["--max", "100", "--perturbation", "20"]);
    assert_eq!(
        sweep_sizes(&j),
        vec![1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 44, 48, 64, 76, 84, 96, 100]
    );
}

#[test]
fn sweep_prints_a_progress_line_per_size_on_stderr() {
    let _heavy = common::heavy();
    let out = run(
        &[
            "sweep",
            "--max",
            "4K",
            "--min",
            "256",
            "--point-time",
            "0.002",
            "--trials",
            "1",
            "--no-store",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let e = stderr(&out);
    let lines: Vec<&str> = e
        .lines()
        .filter(|l| l.starts_with("wirerate: sweep "))
        .collect();
    // 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096 and their ±3
    let sizes = [
        256u64, 259, 381, 384, 387, 509, 512, 515, 765, 768, 771, 1021, 1024, 1027, 1533, 1536,
        1539, 2045, 2048, 2051, 3069, 3072, 3075, 4093, 4096,
    ];
    assert_eq!(lines.len(), sizes.len(), "{e}");
    for (i, (l, size)) in lines.iter().zip(sizes).enumerate() {
        let head = format!("wirerate: sweep {:>3}/{}: ", i + 1, sizes.len());
        assert!(l.starts_with(&head), "{l}");
        assert!(l.contains(&format!(" {size} B ")), "{l}");
    }
    // the report itself stays on stdout, once, after the sweep
    let o = String::from_utf8_lossy(&out.stdout);
    assert!(!o.contains("wirerate: sweep "), "{o}");
    assert!(o.contains("Hockney fit"), "{o}");
    // machine formats keep stderr quiet
    let j = run(
        &[
            "sweep",
            "--max",
            "64",
            "--point-time",
            "0.002",
            "--trials",
            "1",
            "--json",
            "--no-store",
        ],
        LIMIT,
    );
    assert!(j.status.success());
    assert!(!stderr(&j).contains("wirerate: sweep "), "{}", stderr(&j));
}

#[test]
fn sweep_gives_a_fit_only_with_n_half_among_the_sizes() {
    // whatever loopback's n½ is today: a fit lies within the sizes, or there is a reason
    for range in [
        ["--min", "1", "--max", "64K"],
        ["--min", "256K", "--max", "1M"],
    ] {
        let j = sweep_json(&range);
        let sizes = sweep_sizes(&j);
        let (lo, hi) = (sizes[0] as f64, *sizes.last().unwrap() as f64);
        let sw = &j["sweep"];
        match sw["fit"].as_object() {
            Some(fit) => {
                let n = f(&fit["n_half_bytes"]);
                assert!(lo <= n && n <= hi, "{range:?}: n½ {n} outside {lo}..{hi}");
                assert!(sw.get("fit_note").is_none());
            }
            None => {
                let why = sw["fit_note"].as_str().unwrap();
                assert!(!why.is_empty());
            }
        }
    }
}

#[test]
fn sweep_bad_min_and_perturbation_are_usage_errors() {
    for args in [
        vec!["sweep", "--min", "0"],
        vec!["sweep", "--min", "2K", "--max", "1K"],
        vec!["sweep", "--perturbation", "1025"],
        vec!["sweep", "--perturbation", "-1"],
    ] {
        let out = run(&args, LIMIT);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let e = stderr(&out);
        assert_eq!(e.trim_end().lines().count(), 1, "{args:?}: {e}");
        assert!(e.starts_with("wirerate: "), "{args:?}: {e}");
    }
}

// ---- end of the sweep block ----

#[test]
fn bad_values_get_one_line_usage_errors() {
    for args in [
        vec!["rr", "--request", "0"],
        vec!["rr", "--rate", "-1"],
        vec!["rr", "--request", "17M"],
        vec!["rr", "--mode", "udp", "--request", "4"],
        vec!["rr", "--mode", "crr", "--burst", "2"],
        vec!["rr", "--burst", "0"],
        vec!["rr", "-n", "0"],
        vec!["rr", "-t", "-1"],
        vec!["sweep", "--max", "65M"],
        vec!["sweep", "--point-time", "0"],
        vec!["sweep", "--trials", "0"],
    ] {
        let out = run(&args, LIMIT);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let e = stderr(&out);
        assert_eq!(e.trim_end().lines().count(), 1, "{args:?}: {e}");
        assert!(e.starts_with("wirerate: "), "{args:?}: {e}");
    }
}

#[test]
fn server_frees_itself_from_a_silent_rr_client() {
    let srv = ServerProc::start(&["--idle-timeout", "1"]);
    let p = srv.port.to_string();
    let silent = wr()
        .args([
            "rr",
            "127.0.0.1",
            "-p",
            &p,
            "-t",
            "60",
            "--no-store",
            "-i",
            "0",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let pid = silent.id();
    signal(pid, libc::SIGSTOP);
    let t0 = Instant::now();
    let served = loop {
        let out = run(
            &[
                "rr",
                "127.0.0.1",
                "-p",
                &p,
                "-n",
                "100",
                "--json",
                "--no-store",
            ],
            LIMIT,
        );
        if out.status.success() {
            break Some(json(&out));
        }
        if t0.elapsed() > Duration::from_secs(8) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    signal(pid, libc::SIGKILL);
    let _ = wait_bounded(silent, LIMIT);
    let j = served.expect("the server stayed busy with a silent client");
    assert_eq!(j["summary"]["rr"]["transactions"], 100);
    // the idle timeout is 1 s: the slot comes back within a few
    assert!(t0.elapsed() < Duration::from_secs(6), "{:?}", t0.elapsed());
}

#[test]
fn rr_and_sweep_json_follow_the_schema() {
    let _heavy = common::heavy();
    let schema: Value =
        serde_json::from_str(include_str!("../../../../schema/result.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let mut docs = vec![
        rr_json(&["-n", "200", "-i", "0.01"]),
        rr_json(&["--mode", "udp", "-n", "100", "-P", "2"]),
        rr_json(&["--rate", "1000", "-n", "100", "-i", "0"]),
    ];
    let out = run(
        &[
            "sweep",
            "--max",
            "64",
            "--point-time",
            "0.002",
            "--trials",
            "1",
            "--json",
            "--no-store",
        ],
        LIMIT,
    );
    docs.push(json(&out));
    for d in &docs {
        let errors: Vec<String> = validator.iter_errors(d).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{errors:?}");
    }
    // the schema bites: a negative transaction count is refused
    let mut bad = docs[0].clone();
    bad["summary"]["rr"]["transactions"] = serde_json::json!(-1);
    assert!(!validator.is_valid(&bad));
    let mut bad = docs[2].clone();
    bad["summary"]["rr"]["open_loop"]["send_lateness_p99_us"] = serde_json::json!(-3);
    assert!(!validator.is_valid(&bad));
    let mut bad = docs[3].clone();
    bad["sweep"]["points"][0]["one_way_mean_us"] = serde_json::json!("fast");
    assert!(!validator.is_valid(&bad));
}

/// An np.out of `points` (bytes, one-way seconds) in NetPIPE's columns, the time in full.
fn np_out(points: &[(u64, f64)]) -> String {
    points
        .iter()
        .map(|&(n, t)| format!("{n:>10} {:>14.6} {t:e}\n", n as f64 * 8.0 / t / 1_048_576.0))
        .collect()
}

#[test]
fn sweep_fit_reads_an_np_out_by_the_sweeps_own_rule() {
    let dir = tempfile::tempdir().unwrap();
    let fit_of = |name: &str, text: &str| -> Value {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let out = run(&["sweep", "--fit", path.to_str().unwrap(), "--json"], LIMIT);
        assert!(out.status.success(), "{}", stderr(&out));
        json(&out)
    };
    // a known curve: r∞ 40 Gbit/s, t0 2.5 µs (n½ 12 500 B), from 1 B to 8 MiB
    let sizes = [1u64, 16, 256, 1024, 4096, 16384, 65536, 1 << 20, 8 << 20];
    let curve: Vec<(u64, f64)> = sizes
        .iter()
        .map(|&n| (n, 2.5e-6 + n as f64 / 5e9))
        .collect();
    let j = fit_of("curve.out", &np_out(&curve));
    let fit = &j["fit"];
    assert!((f(&fit["r_inf_bps"]) / 4e10 - 1.0).abs() < 0.01, "{j}");
    assert!((f(&fit["t0_us"]) / 2.5 - 1.0).abs() < 0.01, "{j}");
    assert!(
        (f(&fit["n_half_bytes"]) / 12_500.0 - 1.0).abs() < 0.01,
        "{j}"
    );
    assert_eq!(j["sizes"], 9);
    // a sweep's own best trials, read back from NetPIPE's columns, give the sweep's own fit
    let sw = sweep_json(&["--max", "256K"]);
    let points: Vec<(u64, f64)> = sw["sweep"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["bytes"].as_u64().unwrap(), f(&p["one_way_min_us"]) / 1e6))
        .collect();
    let back = fit_of("sweep.out", &np_out(&points));
    match (sw["sweep"]["fit"].as_object(), back["fit"].as_object()) {
        (Some(a), Some(b)) => {
            for k in ["r_inf_bps", "t0_us", "n_half_bytes"] {
                assert!((f(&a[k]) / f(&b[k]) - 1.0).abs() < 0.01, "{k}: {a:?} {b:?}");
            }
        }
        (None, None) => assert!(back["fit_note"].is_string(), "{back}"),
        (a, b) => panic!("the sweep's fit {a:?} and --fit's {b:?} differ"),
    }
    // what is not an np.out is a usage error in one line
    let bad = dir.path().join("bad.out");
    std::fs::write(&bad, "1 2 0.1\nsome words\n").unwrap();
    for path in [bad, dir.path().join("missing.out")] {
        let out = run(&["sweep", "--fit", path.to_str().unwrap()], LIMIT);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let e = stderr(&out);
        assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    }
}
