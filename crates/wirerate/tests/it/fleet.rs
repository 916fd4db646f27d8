//! End-to-end tests of third-party tests (`run --from A --to B`) and of plans on a real
//! four-host lab: real agents (`wirerate serve`), a real throwaway PostgreSQL, real
//! namespaces on a bridge.
//!
//! Loopback tests use 127.0.0.0/8 only. Lab tests need root and skip with a message
//! otherwise; each makes its own uniquely named lab and removes it however the test ends.
//! Plan tests skip (with the reason) where the PostgreSQL server binaries are missing.
//! Every process a test starts is ended by its PID.

use crate::common;

use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Output};
use std::time::{Duration, Instant};

use common::fleet::{
    assert_no_host_overlap, fresh_db, plan_file, plan_status, spawn_piped, stored, Agent,
    LOOP_TARGETS,
};
use common::lab::{skip_unless_root, Lab};
use common::{bin, free_port, run, stderr, stdout, wait_bounded};
use serde_json::Value;

/// `run --from FROM --to TO -t SECONDS --no-store extra…`, bounded in time.
fn third_party(from: &str, to: &str, seconds: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "run",
        "--from",
        from,
        "--to",
        to,
        "-t",
        seconds,
        "--no-store",
    ];
    args.extend_from_slice(extra);
    run(&args, Duration::from_secs(30))
}

#[test]
fn a_third_party_test_on_loopback_returns_a_full_result() {
    let (pa, pb) = (free_port(), free_port());
    let _a = Agent::loopback("127.0.0.1", pa, &["--allow-third-party", LOOP_TARGETS]);
    let _b = Agent::loopback("127.0.0.2", pb, &[]);
    let from = format!("127.0.0.1:{pa}");
    let to = format!("127.0.0.2:{pb}");
    let out = third_party(&from, &to, "1", &["--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = common::json(&out);
    let s = &v["summary"];
    assert!(s["goodput_bps"].as_f64().unwrap() > 0.0, "{s}");
    assert!(s["bytes"].as_u64().unwrap() > 0);
    assert!(s["seconds"].as_f64().unwrap() > 0.5);
    // both ends measured: the agent's side and B's
    assert!(
        s["cpu"]["local"].is_object() && s["cpu"]["remote"].is_object(),
        "{s}"
    );
    assert_eq!(
        v["env"]["server_addr"].as_str(),
        Some(to.as_str()),
        "{}",
        v["env"]
    );
    assert!(!v["intervals"].as_array().unwrap().is_empty());
    // the text report, stored like any run
    // the store and its journal files go with the directory
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let db_s = db.display().to_string();
    let out = run(
        &[
            "run", "--from", &from, "--to", &to, "-t", "1", "--db", &db_s, "--label", "tp",
        ],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let t = stdout(&out);
    assert!(
        // one interval, to the last byte (a tail after 1 s is folded into it)
        t.contains("run by the agent on 127.0.0.1")
            && (t.contains("0.00-1.0") || t.contains("0.00-0.9")),
        "{t}"
    );
    let hist = run(
        &["history", "--db", &db_s, "--json"],
        Duration::from_secs(10),
    );
    let h = stdout(&hist);
    assert!(h.contains("\"tp\""), "{h}");
}

#[test]
fn third_party_tests_are_refused_unless_allowed_with_the_reason() {
    let (pa, pb, pc) = (free_port(), free_port(), free_port());
    let _plain = Agent::loopback("127.0.0.1", pa, &[]);
    let _b = Agent::loopback("127.0.0.2", pb, &[]);
    let _narrow = Agent::loopback(
        "127.0.0.1",
        pc,
        &["--allow-third-party", "--third-party-targets=127.0.0.3/32"],
    );
    let to = format!("127.0.0.2:{pb}");
    let refused = |from: u16| {
        let from = format!("127.0.0.1:{from}");
        let out = third_party(&from, &to, "1", &[]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let e = stderr(&out);
        assert_eq!(e.trim().lines().count(), 1, "one line: {e}");
        e
    };
    // off by default
    let e = refused(pa);
    assert!(
        e.contains("refused") && e.contains("--allow-third-party"),
        "{e}"
    );
    // allowed, but B is not among the permitted targets: no relay to other hosts
    let e = refused(pc);
    assert!(e.contains("127.0.0.2") && e.contains("127.0.0.3/32"), "{e}");
    // --to without --from is bad usage
    let out = run(&["run", "--to", &to, "--no-store"], Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn a_limits_rule_allows_third_party_tests_within_its_targets() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("limits.toml");
    std::fs::write(
        &rules,
        "[[rule]]\nname = \"mesh\"\nfrom = [\"127.0.0.0/8\"]\nthird_party = true\n\
         third_party_targets = [\"127.0.0.2/32\"]\nmax_duration_s = 5\n",
    )
    .unwrap();
    let (pa, pb) = (free_port(), free_port());
    let limits = rules.display().to_string();
    let _a = Agent::loopback("127.0.0.1", pa, &["--limits", &limits]);
    let _b = Agent::loopback("127.0.0.2", pb, &[]);
    let from = format!("127.0.0.1:{pa}");
    let to = format!("127.0.0.2:{pb}");
    let ok = third_party(&from, &to, "1", &["--json"]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    // the rule's other limits hold too
    let long = third_party(&from, &to, "9", &[]);
    assert_eq!(long.status.code(), Some(1));
    assert!(stderr(&long).contains("rule 'mesh'"), "{}", stderr(&long));
    // a target outside the rule's list: the agent itself
    let out = third_party(&from, &from, "1", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("rule 'mesh'"), "{}", stderr(&out));
}

#[test]
fn a_busy_agent_says_so_and_holds_its_slot_while_it_runs() {
    let (pa, pb, pc) = (free_port(), free_port(), free_port());
    let _a = Agent::loopback("127.0.0.1", pa, &["--allow-third-party", LOOP_TARGETS]);
    let _b = Agent::loopback("127.0.0.2", pb, &[]);
    let _c = Agent::loopback("127.0.0.3", pc, &[]);
    let from = format!("127.0.0.1:{pa}");
    let to_b = format!("127.0.0.2:{pb}");
    let long = spawn_piped(&[
        "run",
        "--from",
        &from,
        "--to",
        &to_b,
        "-t",
        "3",
        "-b",
        "100M",
        "--json",
        "--no-store",
    ]);
    std::thread::sleep(Duration::from_millis(800));
    // another third-party request, and a direct test, meet the agent's slot taken
    let to_c = format!("127.0.0.3:{pc}");
    let out = third_party(&from, &to_c, "1", &[]);
    assert_eq!(out.status.code(), Some(1));
    let e = stderr(&out);
    assert!(
        e.contains("is busy; retry in") && e.trim().lines().count() == 1,
        "{e}"
    );
    let direct = run(
        &[
            "run",
            "127.0.0.1",
            "-p",
            &pa.to_string(),
            "-t",
            "1",
            "--no-store",
        ],
        Duration::from_secs(20),
    );
    assert_eq!(direct.status.code(), Some(1));
    assert!(stderr(&direct).contains("busy"), "{}", stderr(&direct));
    let first = wait_bounded(long, Duration::from_secs(30));
    assert!(first.status.success(), "{}", stderr(&first));
    // and the slot is free again afterwards
    let again = third_party(&from, &to_c, "1", &[]);
    assert!(again.status.success(), "{}", stderr(&again));
}

#[test]
fn junk_or_silence_on_the_agent_channel_does_not_stop_the_agent() {
    use std::io::{Read, Write};
    let (pa, pb) = (free_port(), free_port());
    let _a = Agent::loopback("127.0.0.1", pa, &["--allow-third-party", LOOP_TARGETS]);
    let _b = Agent::loopback("127.0.0.2", pb, &[]);
    let addr: SocketAddr = format!("127.0.0.1:{pa}").parse().unwrap();
    let preamble = [b'W', b'R', b'R', b'T', 0, 1, 3, 0];
    // junk after the agent preamble: a refusal with the reason, then the close
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&preamble).unwrap();
    s.write_all(b"\x00\x00\x00\x05hello").unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    let text = String::from_utf8_lossy(&reply);
    assert!(
        text.contains("refused") && text.contains("malformed"),
        "{text}"
    );
    // a huge length prefix is refused before anything is read
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&preamble).unwrap();
    s.write_all(&u32::MAX.to_be_bytes()).unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    assert!(
        String::from_utf8_lossy(&reply).contains("exceeds"),
        "{reply:?}"
    );
    // a silent caller is dropped after the handshake timeout, and tests go on meanwhile
    let silent: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(&preamble).unwrap();
            s
        })
        .collect();
    let ok = run(
        &[
            "run",
            "--from",
            &addr.to_string(),
            "--to",
            &format!("127.0.0.2:{pb}"),
            "-t",
            "1",
            "--no-store",
        ],
        Duration::from_secs(30),
    );
    assert!(ok.status.success(), "{}", stderr(&ok));
    for mut s in silent {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let started = Instant::now();
        let mut reply = Vec::new();
        let _ = s.read_to_end(&mut reply);
        assert!(
            started.elapsed() < Duration::from_secs(9),
            "a silent caller was held"
        );
        assert!(String::from_utf8_lossy(&reply).contains("no request in time"));
    }
}

/// A lab of four hosts on a bridge, an agent on each, and a plan over them.
struct MeshLab {
    lab: Lab,
    agents: Vec<Agent>,
    url: String,
    dir: tempfile::TempDir,
}

fn mesh_lab(tag: &str, test: &str) -> Option<MeshLab> {
    if skip_unless_root(test) {
        return None;
    }
    let url = fresh_db(test)?;
    let lab = Lab::up(tag, &["--count", "4", "--rate", "100M"]);
    let agents = (1..=4)
        .map(|i| {
            Agent::in_lab(
                &lab,
                &format!("h{i}"),
                &[
                    "--allow-third-party",
                    "--third-party-targets",
                    "10.77.0.0/24",
                ],
            )
        })
        .collect();
    Some(MeshLab {
        lab,
        agents,
        url,
        dir: tempfile::tempdir().unwrap(),
    })
}

impl MeshLab {
    fn plan(&self, name: &str) -> String {
        let text = format!(
            "name = \"{name}\"\n[hosts]\nh1 = \"10.77.0.1\"\nh2 = \"10.77.0.2\"\n\
             h3 = \"10.77.0.3\"\nh4 = \"10.77.0.4:5350\"\n[matrix]\nkind = \"mesh\"\n\
             [test]\nseconds = 1\n"
        );
        plan_file(&self.dir, &text).display().to_string()
    }

    /// `plan run` on host h1 of the lab (the controller reaches every agent over the
    /// bridge, and PostgreSQL over its Unix socket).
    fn controller(&self, plan: &str) -> Child {
        let args = self
            .lab
            .exec_args("h1", &[bin(), "plan", "run", plan, "--db", &self.url]);
        spawn_piped(&args)
    }
}

#[test]
fn a_full_mesh_plan_on_a_four_host_lab_stores_every_pair_once() {
    let test = "a_full_mesh_plan_on_a_four_host_lab_stores_every_pair_once";
    let Some(m) = mesh_lab("mx", test) else {
        return;
    };
    let plan = m.plan("mesh");
    let started = Instant::now();
    let out = wait_bounded(m.controller(&plan), Duration::from_secs(90));
    println!("{}", stdout(&out));
    println!(
        "plan of 12 tests took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(stored(&m.url, "mesh"), (12, 12));
    let st = plan_status(&m.url, "mesh");
    assert_eq!(st["progress"]["done"], 12, "{st}");
    let mut pairs = Vec::new();
    assert_no_host_overlap(st["tests"].as_array().unwrap());
    for t in st["tests"].as_array().unwrap() {
        let g = t["goodput_bps"].as_f64().unwrap();
        // a 100 Mbit/s link each way: nothing carries more than the wire
        assert!(g > 1e6 && g < 100e6, "{t}");
        pairs.push(format!(
            "{}->{}",
            t["from"].as_str().unwrap(),
            t["to"].as_str().unwrap()
        ));
    }
    pairs.sort();
    pairs.dedup();
    assert_eq!(pairs.len(), 12);
    // each stored run is the pair's own: the agent on FROM tested towards TO's address
    let mut c = wirerate_store::pg::connect(&m.url).unwrap();
    for row in c
        .query(
            "SELECT r.repeat_group, t.dst_addr, r.result_json FROM runs r \
             JOIN plan_tests t ON t.result_id = r.id",
            &[],
        )
        .unwrap()
    {
        let (group, dst, json): (String, String, String) = (row.get(0), row.get(1), row.get(2));
        let v: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            v["env"]["server_addr"].as_str(),
            Some(dst.as_str()),
            "{group}"
        );
        assert!(group.starts_with("plan:mesh:h"), "{group}");
    }
    // the text status names every test
    let text = run(
        &["plan", "status", &plan, "--db", &m.url],
        Duration::from_secs(20),
    );
    let t = stdout(&text);
    assert!(t.contains("12 test(s): 12 done, 0 failed"), "{t}");
}

#[test]
fn an_agent_killed_mid_plan_fails_its_tests_and_the_rest_complete() {
    let test = "an_agent_killed_mid_plan_fails_its_tests_and_the_rest_complete";
    let Some(mut m) = mesh_lab("fk", test) else {
        return;
    };
    let plan = m.plan("kill");
    let child = m.controller(&plan);
    // wait for the first finished test, then kill h4's agent
    let mut c = wirerate_store::pg::connect(&m.url).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let done: i64 = c
            .query_one("SELECT count(*) FROM plan_tests WHERE status = 'done'", &[])
            .map(|r| r.get(0))
            .unwrap_or(0);
        if done > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "no test finished in 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    m.agents[3].kill();
    let out = wait_bounded(child, Duration::from_secs(90));
    println!("{}", stdout(&out));
    assert_eq!(
        out.status.code(),
        Some(1),
        "a failed test fails the plan: {}",
        stderr(&out)
    );
    let st = plan_status(&m.url, "kill");
    let tests = st["tests"].as_array().unwrap();
    let (mut done, mut failed) = (0, 0);
    for t in tests {
        let h4 = t["from"] == "h4" || t["to"] == "h4";
        match t["status"].as_str().unwrap() {
            "done" => done += 1,
            "failed" => {
                failed += 1;
                assert!(h4, "only h4's tests fail: {t}");
                let e = t["error"].as_str().unwrap();
                assert!(
                    e.contains("10.77.0.4"),
                    "the reason names the dead agent: {e}"
                );
            }
            other => panic!("test left {other}: {t}"),
        }
        if !h4 {
            assert_eq!(t["status"], "done", "{t}");
        }
    }
    assert!(failed >= 1, "{st}");
    assert_eq!(done + failed, 12);
    assert_eq!(stored(&m.url, "kill").0, done);
}

/// Runs in a loop from one lab host towards a server on another, each storing its result in
/// PostgreSQL; every third run is killed (SIGKILL) a moment after it starts, wherever it is
/// (the test, the store's transaction). Returns (runs that exited 0, runs killed).
fn writer(lab: &Lab, from: &str, to_ip: &str, url: &str, label: &str) -> (u32, u32) {
    let (mut acked, mut killed) = (0, 0);
    let end = Instant::now() + Duration::from_secs(3);
    let mut n = 0u32;
    while Instant::now() < end {
        n += 1;
        let cmd = [
            bin(),
            "run",
            to_ip,
            "-p",
            "5350",
            "-n",
            "256K",
            "--label",
            label,
            "--json",
            "--db",
            url,
        ];
        let mut child = spawn_piped(&lab.exec_args(from, &cmd));
        if n.is_multiple_of(3) {
            std::thread::sleep(Duration::from_millis(20 + u64::from(n % 7) * 15));
            // lab exec becomes the command: this is wirerate's own PID
            if child.kill().is_ok() {
                let status = child.wait().unwrap();
                if status.success() {
                    acked += 1;
                } else {
                    killed += 1;
                }
                continue;
            }
        }
        if wait_bounded(child, Duration::from_secs(20))
            .status
            .success()
        {
            acked += 1;
        }
    }
    (acked, killed)
}

#[test]
fn writers_in_several_namespaces_killed_at_random_lose_no_acknowledged_result() {
    let test = "writers_in_several_namespaces_killed_at_random_lose_no_acknowledged_result";
    if skip_unless_root(test) {
        return;
    }
    let Some(url) = fresh_db(test) else {
        return;
    };
    // three disjoint pairs on one bridge: h2 -> h1, h4 -> h3, h6 -> h5; the database is
    // reached over its Unix socket, which every network namespace shares
    let lab = Lab::up("fp", &["--count", "6", "--rate", "1G"]);
    let _servers: Vec<Agent> = ["h1", "h3", "h5"]
        .iter()
        .map(|h| Agent::in_lab(&lab, h, &[]))
        .collect();
    let label = "ns-writers";
    let results: Vec<(u32, u32)> = std::thread::scope(|s| {
        let handles: Vec<_> = [
            ("h2", "10.77.0.1"),
            ("h4", "10.77.0.3"),
            ("h6", "10.77.0.5"),
        ]
        .into_iter()
        .map(|(from, to)| {
            let (lab, url) = (&lab, url.as_str());
            s.spawn(move || writer(lab, from, to, url, label))
        })
        .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let acked: u32 = results.iter().map(|r| r.0).sum();
    let killed: u32 = results.iter().map(|r| r.1).sum();
    let mut c = wirerate_store::pg::connect(&url).unwrap();
    let row = c
        .query_one(
            "SELECT count(*), count(DISTINCT run_key) FROM runs WHERE label = $1",
            &[&label],
        )
        .unwrap();
    let (rows, keys): (i64, i64) = (row.get(0), row.get(1));
    println!(
        "{acked} runs acknowledged (exit 0), {killed} killed, {rows} stored, per writer {results:?}"
    );
    assert!(
        acked >= 3 && killed >= 1,
        "every writer ran, some were killed: {results:?}"
    );
    assert_eq!(rows, keys, "a run stored twice");
    // nothing acknowledged is lost; a killed run may or may not have committed
    assert!(
        rows >= i64::from(acked) && rows <= i64::from(acked + killed),
        "{rows} stored for {acked} acknowledged and {killed} killed"
    );
}

#[test]
fn an_agent_answers_alike_for_a_closed_port_and_another_service() {
    use std::io::Write;
    let pa = free_port();
    let _a = Agent::loopback("127.0.0.1", pa, &["--allow-third-party", LOOP_TARGETS]);
    let from = format!("127.0.0.1:{pa}");
    // another service: it greets and then waits, as SSH does
    let open = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    let open_port = open.local_addr().unwrap().port();
    let greeter = std::thread::spawn(move || {
        open.set_nonblocking(false).unwrap();
        if let Ok((mut s, _)) = open.accept() {
            let _ = s.write_all(b"SSH-2.0-OpenSSH_9.6\r\n");
            std::thread::sleep(Duration::from_secs(2));
        }
    });
    let closed_port = free_port();
    let ask = |port: u16| {
        let t0 = Instant::now();
        let out = third_party(&from, &format!("127.0.0.2:{port}"), "1", &[]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let said = stderr(&out).replace(&port.to_string(), "PORT");
        (said, t0.elapsed())
    };
    let (to_open, open_took) = ask(open_port);
    let (to_closed, closed_took) = ask(closed_port);
    greeter.join().unwrap();
    assert_eq!(to_open, to_closed);
    assert!(
        to_open.contains("no wirerate server answered there"),
        "{to_open}"
    );
    // and no sooner for the one than the other: both wait out the connect timeout
    for took in [open_took, closed_took] {
        assert!(took >= Duration::from_millis(4900), "{took:?}");
    }
    eprintln!("open port answered after {open_took:?}, closed after {closed_took:?}: {to_open}");
}
