//! End-to-end tests of the data workers: many TCP flows on a fixed pool of threads per side,
//! against a real `serve` process, and the `--threads` flag.

use crate::common;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{json, run, spawn_piped, spawn_quiet, stderr, wait_bounded, ServerProc};

const LIMIT: Duration = Duration::from_secs(120);

/// Threads of a process now (its `/proc/PID/task` entries); None once it has gone.
fn threads_of(pid: u32) -> Option<usize> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()
        .map(|d| d.count())
}

/// Resident memory of a process now, in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// What a sampled run saw of each side: thread counts every 50 ms, and the peak RSS (KiB).
#[derive(Default)]
struct Samples {
    threads: Vec<usize>,
    peak_rss_kib: u64,
}

impl Samples {
    fn take(&mut self, pid: u32) -> bool {
        let Some(n) = threads_of(pid) else {
            return false;
        };
        self.threads.push(n);
        self.peak_rss_kib = self.peak_rss_kib.max(rss_kib(pid).unwrap_or(0));
        true
    }
}

/// Runs a client to completion, sampling its own and the server's threads and memory every
/// 50 ms; returns its output and the samples (client, server).
fn run_sampled(server: &ServerProc, args: &[&str]) -> (std::process::Output, Samples, Samples) {
    let child: Child = spawn_piped(args);
    let cpid = child.id();
    let spid = server.child.id();
    let sampler = std::thread::spawn(move || {
        let (mut c, mut s) = (Samples::default(), Samples::default());
        let start = Instant::now();
        while c.take(cpid) {
            s.take(spid);
            if start.elapsed() > LIMIT {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        (c, s)
    });
    let out = wait_bounded(child, LIMIT);
    let (c, s) = sampler.join().expect("sampler");
    (out, c, s)
}

/// Whether this host's open-file hard limit lets each side hold 10 000 sockets (one per
/// stream); says why not when it does not.
fn ten_thousand_streams_fit() -> bool {
    let hard = std::process::Command::new("sh")
        .args(["-c", "ulimit -Hn"])
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse::<u64>()
                .ok()
        });
    let fit = hard.is_none_or(|h| h >= 10_100);
    if !fit {
        eprintln!("the open-file hard limit is {hard:?}: 10 000 streams cannot run here");
    }
    fit
}

/// Kills `client`; the server's workers see its test end and free the slot, so within
/// moments the next test (`args`) runs. A client that comes while the slot is still held is
/// told the server is busy, and tries again, for up to 20 s. The successful output.
fn next_test_runs_after_killing(mut client: Child, args: &[&str]) -> std::process::Output {
    client.kill().expect("kill the client");
    let _ = client.wait();
    let started = Instant::now();
    loop {
        let out = run(args, LIMIT);
        if out.status.success() {
            return out;
        }
        assert!(stderr(&out).contains("busy"), "{}", stderr(&out));
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the server is still busy 20 s after its client was killed"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn median(mut v: Vec<usize>) -> usize {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// The JSON of a successful run of `n` streams, each of which reported once.
fn every_flow_reports_once(out: &std::process::Output, n: usize) -> serde_json::Value {
    assert!(out.status.success(), "{}", stderr(out));
    let j = json(out);
    let streams = j["streams"].as_array().unwrap();
    assert_eq!(streams.len(), n);
    let mut ids: Vec<u64> = streams
        .iter()
        .map(|s| s["id"].as_u64().expect("a stream id"))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n, "every flow reports once");
    j
}

/// A test of 1000 flows, `extra` added to its arguments, against a server of two workers and
/// with two on the client: each flow reports once, and neither side runs more than 8 threads
/// while it runs (a thread per stream would be over a thousand). Returns the run's JSON.
fn thousand_flows_on_two_workers_per_side(extra: &[&str]) -> serde_json::Value {
    let srv = ServerProc::start(&["--threads", "2"]);
    let port = srv.port.to_string();
    let mut args = vec![
        "run",
        "127.0.0.1",
        "-p",
        &port,
        "-P",
        "1000",
        "-t",
        "3",
        "--threads",
        "2",
        "--json",
        "--no-store",
    ];
    args.extend_from_slice(extra);
    let (out, client, server) = run_sampled(&srv, &args);
    let j = every_flow_reports_once(&out, 1000);
    // the pool is two workers beside the control, accept and output threads
    assert!(!client.threads.is_empty() && !server.threads.is_empty());
    let (c, s) = (median(client.threads), median(server.threads));
    assert!(c <= 8, "client threads while running: {c}");
    assert!(s <= 8, "server threads while running: {s}");
    // each end names the worker that served it, and both workers of each side served
    for end in ["sender", "receiver"] {
        let mut workers: Vec<u64> = j["streams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|st| st[end]["worker"].as_u64().expect("a worker number"))
            .collect();
        workers.sort_unstable();
        workers.dedup();
        assert_eq!(workers, [0, 1], "{end}s' workers");
    }
    j
}

#[test]
fn a_thousand_flows_run_on_a_few_threads_per_side_with_a_report_per_flow() {
    let j = thousand_flows_on_two_workers_per_side(&[]);
    // every flow moved data: none was starved by the others on its worker
    for s in j["streams"].as_array().unwrap() {
        assert!(s["sender"]["bytes"].as_u64().unwrap() > 0, "{s}");
        assert!(s["receiver"]["bytes"].as_u64().unwrap() > 0, "{s}");
        assert!(s["goodput_bps"].as_f64().unwrap() > 0.0, "{s}");
    }
    assert_eq!(j["summary"]["fairness"]["streams"], 1000);
    assert!(j["summary"]["goodput_bps"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_thousand_paced_udp_flows_run_on_a_few_threads_and_each_keeps_its_rate() {
    let j = thousand_flows_on_two_workers_per_side(&["-u", "-b", "200K", "-l", "1400"]);
    for s in j["streams"].as_array().unwrap() {
        // each flow's own timer: its sender keeps 200 kbit/s. At 18 datagrams a second a
        // flow sends whole 1400-byte datagrams, one every 56 ms, so its count is held to
        // its schedule within two datagrams (3.7 % of a 3 s flow), not to a share of a rate
        let sent = s["sender"]["bytes"].as_f64().unwrap();
        let due = 200e3 / 8.0 * s["sender"]["seconds"].as_f64().unwrap();
        assert!(
            (sent - due).abs() <= 2.0 * 1400.0,
            "sender sent {sent} B where its schedule had {due:.0} B: {s}"
        );
        // 18 datagrams a second: the receiver's count is a few datagrams coarse
        let g = s["goodput_bps"].as_f64().unwrap();
        assert!((g / 200e3 - 1.0).abs() < 0.05, "received at {g} bit/s: {s}");
        assert!(
            s["error"].is_null() && s["receiver"]["error"].is_null(),
            "{s}"
        );
    }
    let total = j["summary"]["goodput_bps"].as_f64().unwrap();
    assert!((total / 200e6 - 1.0).abs() < 0.05, "{total}");
}

#[test]
fn a_server_serves_on_after_a_client_of_a_thousand_udp_flows_is_killed() {
    let srv = ServerProc::start(&[]);
    let port = srv.port.to_string();
    let client = spawn_quiet(&[
        "run",
        "127.0.0.1",
        "-p",
        &port,
        "-u",
        "-b",
        "1M",
        "-l",
        "1400",
        "-P",
        "1000",
        "-t",
        "30",
        "--no-store",
    ]);
    std::thread::sleep(Duration::from_secs(3));
    let out = next_test_runs_after_killing(
        client,
        &[
            "run",
            "127.0.0.1",
            "-p",
            &port,
            "-u",
            "-b",
            "10M",
            "-P",
            "2",
            "-t",
            "1",
            "--json",
            "--no-store",
        ],
    );
    let g = json(&out)["summary"]["goodput_bps"].as_f64().unwrap();
    assert!((g / 20e6 - 1.0).abs() < 0.05, "{g}");
}

#[test]
fn one_worker_serves_senders_and_receivers_of_both_directions_to_the_last_byte() {
    let out = run(
        &[
            "run",
            "--bidir",
            "-P",
            "6",
            "-n",
            "24000037",
            "--threads",
            "1",
            "--json",
            "--no-store",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let j = json(&out);
    let streams = j["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 12);
    // each direction delivered exactly what was asked, over its six streams
    for flow in ["client_to_server", "server_to_client"] {
        let received: u64 = streams
            .iter()
            .filter(|s| s["flow"] == flow)
            .map(|s| s["receiver"]["bytes"].as_u64().unwrap())
            .sum();
        assert_eq!(received, 24_000_037, "{flow}");
    }
    assert_eq!(j["summary"]["bytes"], 2 * 24_000_037u64, "{}", j["summary"]);
}

#[test]
fn reverse_flows_on_workers_deliver_every_byte() {
    let out = run(
        &[
            "run",
            "-R",
            "-P",
            "5",
            "-n",
            "10000019",
            "--json",
            "--no-store",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let j = json(&out);
    assert_eq!(j["summary"]["bytes"], 10_000_019u64);
    assert_eq!(j["streams"].as_array().unwrap().len(), 5);
}

#[test]
fn threads_outside_one_to_256_are_refused_with_one_line() {
    for bad in ["0", "257", "many"] {
        let out = run(&["run", "-P", "4", "-n", "1M", "--threads", bad], LIMIT);
        assert_eq!(
            out.status.code(),
            Some(2),
            "--threads {bad}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("1 to 256"),
            "--threads {bad}: {}",
            stderr(&out)
        );
        let out = run(&["serve", "--threads", bad], LIMIT);
        assert_eq!(out.status.code(), Some(2), "serve --threads {bad}");
        assert!(stderr(&out).contains("1 to 256"), "{}", stderr(&out));
    }
}

/// Ten thousand flows against a default `serve`: they connect, run and report within the
/// bounds on threads (under four per core) and memory (under 512 MiB per side). About 10 s
/// on a 2-core machine.
#[test]
fn ten_thousand_flows_against_a_default_server() {
    if !ten_thousand_streams_fit() {
        return;
    }
    let srv = ServerProc::start(&[]);
    let port = srv.port.to_string();
    let (out, client, server) = run_sampled(
        &srv,
        &[
            "run",
            "127.0.0.1",
            "-p",
            &port,
            "-P",
            "10000",
            "-t",
            "3",
            "--json",
            "--no-store",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let j = json(&out);
    assert_eq!(j["streams"].as_array().unwrap().len(), 10_000);
    assert_eq!(j["summary"]["fairness"]["streams"], 10_000);
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let (c, s) = (median(client.threads), median(server.threads));
    assert!(c < 4 * cores.max(2), "client threads: {c}");
    assert!(s < 4 * cores.max(2), "server threads: {s}");
    for (side, peak) in [
        ("client", client.peak_rss_kib),
        ("server", server.peak_rss_kib),
    ] {
        assert!(peak > 0 && peak < 512 << 10, "{side} peak RSS {peak} KiB");
    }
}

#[test]
fn udp_gso_and_gro_carry_every_datagram_and_show_in_the_spec() {
    // paced, so loopback drops nothing while GSO hands the kernel 32 datagrams per call and
    // GRO hands back coalesced ones to be cut apart again
    let out = run(
        &[
            "run",
            "-u",
            "--gso",
            "--gro",
            "-l",
            "1400",
            "-b",
            "200M",
            "-n",
            "2800000",
            "--json",
            "--no-store",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let j = json(&out);
    assert_eq!(j["spec"]["gso"], true);
    assert_eq!(j["spec"]["gro"], true);
    let u = &j["summary"]["udp"];
    assert_eq!(u["packets"], 2000, "{u}");
    assert!(u["received"].as_u64().unwrap() > 0, "{u}");
    assert_eq!(u["out_of_order"], 0, "{u}");
    // without them the spec says nothing of either
    let out = run(&["run", "-u", "-n", "14000", "--json", "--no-store"], LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(json(&out)["spec"].get("gso").is_none());
}

#[test]
fn gso_and_gro_without_udp_are_usage_errors() {
    for flag in ["--gso", "--gro"] {
        let out = run(&["run", flag, "-n", "1M"], LIMIT);
        assert_eq!(out.status.code(), Some(2), "{flag}: {}", stderr(&out));
        assert!(stderr(&out).contains("--udp"), "{flag}: {}", stderr(&out));
    }
}

#[test]
fn a_server_whose_open_file_limit_is_too_low_refuses_the_test_saying_why() {
    let port = common::free_port();
    let p = port.to_string();
    let mut srv = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -Sn 300 && ulimit -Hn 300 && exec "$0" serve -B 127.0.0.1 -p "$1""#)
        .arg(common::bin())
        .arg(&p)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn sh");
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "server did not start listening");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = run(
        &[
            "run",
            "127.0.0.1",
            "-p",
            &p,
            "-P",
            "1000",
            "-n",
            "1M",
            "--no-store",
        ],
        LIMIT,
    );
    let _ = srv.kill();
    let _ = srv.wait();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("1000 streams need about 1064 open files on the server; its limit is 300"),
        "{err}"
    );
}

/// The CPUs each data worker of a process may run on now (`Cpus_allowed_list`), by worker
/// thread name.
fn worker_cpus(pid: u32) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let comm = comm.trim();
        if !comm.starts_with("wr-worker-") {
            continue;
        }
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        if let Some(l) = status.lines().find(|l| l.starts_with("Cpus_allowed_list:")) {
            out.insert(
                comm.to_string(),
                l.split_whitespace().nth(1).unwrap_or("").into(),
            );
        }
    }
    out
}

/// Runs `-P flows` on two workers per side against a server of two, and returns where each
/// side's workers may run once both sides have their two workers going (client, server).
fn worker_cpus_of_a_run(
    flows: &str,
) -> (
    std::collections::BTreeMap<String, String>,
    std::collections::BTreeMap<String, String>,
) {
    let srv = ServerProc::start(&["--threads", "2"]);
    let port = srv.port.to_string();
    let args = [
        "run",
        "127.0.0.1",
        "-p",
        &port,
        "-P",
        flows,
        "-t",
        "2",
        "--threads",
        "2",
        "--json",
        "--no-store",
    ];
    let child = spawn_piped(&args);
    let (cpid, spid) = (child.id(), srv.child.id());
    let start = Instant::now();
    let mut seen = (Default::default(), Default::default());
    while start.elapsed() < Duration::from_secs(10) {
        let (c, s) = (worker_cpus(cpid), worker_cpus(spid));
        if c.len() == 2 && s.len() == 2 {
            // the workers pin themselves first thing: look once more after that
            std::thread::sleep(Duration::from_millis(200));
            seen = (worker_cpus(cpid), worker_cpus(spid));
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = wait_bounded(child, LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    seen
}

#[test]
fn busy_workers_of_both_sides_on_one_host_share_cores_pairwise_and_few_flows_run_free() {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    if cpus < 2 {
        eprintln!("skipped: one CPU, nothing to spread workers over");
        return;
    }
    // 128 flows on two workers: 64 each, busy
    let (client, server) = worker_cpus_of_a_run("128");
    assert_eq!(client.len(), 2, "client workers seen: {client:?}");
    assert_eq!(server.len(), 2, "server workers seen: {server:?}");
    for (name, cpu) in &client {
        assert!(
            cpu.parse::<u32>().is_ok(),
            "{name} runs on one CPU, not {cpu}"
        );
        assert_eq!(
            Some(cpu),
            server.get(name),
            "both ends of {name}'s flows on one core"
        );
    }
    assert_ne!(client["wr-worker-0"], client["wr-worker-1"]);
    // 4 flows on two workers: they sleep often, and the scheduler places them
    let (client, server) = worker_cpus_of_a_run("4");
    assert_eq!(
        (client.len(), server.len()),
        (2, 2),
        "{client:?} {server:?}"
    );
    for (name, cpu) in client.iter().chain(&server) {
        assert!(
            cpu.parse::<u32>().is_err(),
            "{name} is free, not pinned to {cpu}"
        );
    }
}

/// Open descriptors of a process now.
fn fds_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// A client of 10 000 TCP flows killed while they run: the server frees the slot and every
/// socket, and serves the next test.
#[test]
fn a_server_serves_on_after_a_client_of_ten_thousand_flows_vanishes() {
    if !ten_thousand_streams_fit() {
        return;
    }
    let srv = ServerProc::start(&[]);
    let spid = srv.child.id();
    let idle_fds = fds_of(spid);
    let port = srv.port.to_string();
    let client = spawn_quiet(&[
        "run",
        "127.0.0.1",
        "-p",
        &port,
        "-P",
        "10000",
        "-t",
        "30",
        "--no-store",
    ]);
    // kill it once the server holds most of the streams, and they have run a moment
    let start = Instant::now();
    while fds_of(spid) < idle_fds + 9_000 && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let held = fds_of(spid);
    assert!(
        held >= idle_fds + 9_000,
        "the server held {held} descriptors"
    );
    std::thread::sleep(Duration::from_secs(1));
    let out = next_test_runs_after_killing(
        client,
        &[
            "run",
            "127.0.0.1",
            "-p",
            &port,
            "-P",
            "2",
            "-t",
            "1",
            "--json",
            "--no-store",
        ],
    );
    assert!(json(&out)["summary"]["bytes"].as_u64().unwrap() > 0);
    // every socket of the killed test is closed (a few may belong to the test just ended)
    let after = fds_of(spid);
    assert!(
        after < idle_fds + 16,
        "{after} descriptors open, {idle_fds} when idle"
    );
}
