//! End-to-end tests of third-party tests (`run --from A --to B`) and plans (`plan run`,
//! `plan status`): real agents (`wirerate serve`), a real throwaway PostgreSQL, and for the
//! lab tests a real four-host lab on a bridge.
//!
//! Loopback tests use 127.0.0.0/8 only. Lab tests need root and skip with a message
//! otherwise; each makes its own uniquely named lab and removes it however the test ends.
//! Plan tests skip (with the reason) where the PostgreSQL server binaries are missing.
//! Every process a test starts is ended by its PID.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::lab::{skip_unless_root, Lab};
use common::{bin, free_port, run, wait_bounded};
use serde_json::Value;
use wirerate_testpg::Cluster;

/// A `wirerate serve` started by this test, ended by its PID on drop.
struct Agent {
    child: Child,
}

impl Agent {
    /// `serve -B ip -p port extra…` on loopback, once it accepts connections.
    fn loopback(ip: &str, port: u16, extra: &[&str]) -> Agent {
        let p = port.to_string();
        let mut args = vec!["serve", "-B", ip, "-p", &p];
        args.extend_from_slice(extra);
        let child = Command::new(bin())
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn serve");
        let addr: SocketAddr = format!("{ip}:{port}").parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
            assert!(Instant::now() < deadline, "agent on {addr} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Agent { child }
    }

    /// `serve` on a lab host (lab exec becomes the command, so the PID is serve's own).
    fn in_lab(lab: &Lab, host: &str, extra: &[&str]) -> Agent {
        let mut args = lab.exec_args(host, &[bin(), "serve", "-p", "5350"]);
        args.extend_from_slice(extra);
        let child = Command::new(bin())
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn serve in the lab");
        lab.wait_listening(host, 5350);
        Agent { child }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
        }
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const LOOP_TARGETS: &str = "--third-party-targets=127.0.0.0/8";

#[test]
fn a_third_party_test_on_loopback_returns_a_full_result() {
    let (pa, pb) = (free_port(), free_port());
    let _a = Agent::loopback("127.0.0.1", pa, &["--allow-third-party", LOOP_TARGETS]);
    let _b = Agent::loopback("127.0.0.2", pb, &[]);
    let from = format!("127.0.0.1:{pa}");
    let to = format!("127.0.0.2:{pb}");
    let out = run(
        &[
            "run",
            "--from",
            &from,
            "--to",
            &to,
            "-t",
            "1",
            "--json",
            "--no-store",
        ],
        Duration::from_secs(30),
    );
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
    let db = std::env::temp_dir().join(format!("wirerate-fleet-{}.db", std::process::id()));
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
        t.contains("run by the agent on 127.0.0.1") && t.contains("0.00-1.00 s"),
        "{t}"
    );
    let hist = run(
        &["history", "--db", &db_s, "--json"],
        Duration::from_secs(10),
    );
    let h = stdout(&hist);
    assert!(h.contains("\"tp\""), "{h}");
    let _ = std::fs::remove_file(&db);
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
        let out = run(
            &["run", "--from", &from, "--to", &to, "-t", "1", "--no-store"],
            Duration::from_secs(20),
        );
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
    let ok = run(
        &[
            "run",
            "--from",
            &from,
            "--to",
            &format!("127.0.0.2:{pb}"),
            "-t",
            "1",
            "--json",
            "--no-store",
        ],
        Duration::from_secs(30),
    );
    assert!(ok.status.success(), "{}", stderr(&ok));
    // the rule's other limits hold too
    let long = run(
        &[
            "run",
            "--from",
            &from,
            "--to",
            &format!("127.0.0.2:{pb}"),
            "-t",
            "9",
            "--no-store",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(long.status.code(), Some(1));
    assert!(stderr(&long).contains("rule 'mesh'"), "{}", stderr(&long));
    // a target outside the rule's list: the agent itself
    let out = run(
        &[
            "run",
            "--from",
            &from,
            "--to",
            &from,
            "-t",
            "1",
            "--no-store",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("rule 'mesh'"), "{}", stderr(&out));
}

/// A plan file in a temporary directory.
fn plan_file(dir: &tempfile::TempDir, text: &str) -> PathBuf {
    let p = dir.path().join("plan.toml");
    std::fs::write(&p, text).unwrap();
    p
}

fn plan_status(url: &str, name: &str) -> Value {
    let out = run(
        &["plan", "status", "--plan", name, "--db", url, "--json"],
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    common::json(&out)
}

/// No two tests that share a host ran at the same time (pScheduler's rule).
fn assert_no_host_overlap(tests: &[Value]) {
    let span = |t: &Value| {
        (
            t["started_unix_s"].as_f64().unwrap(),
            t["finished_unix_s"].as_f64().unwrap(),
        )
    };
    for (i, a) in tests.iter().enumerate() {
        for b in &tests[i + 1..] {
            let hosts = [&a["from"], &a["to"]];
            if !(hosts.contains(&&b["from"]) || hosts.contains(&&b["to"])) {
                continue;
            }
            let ((s1, e1), (s2, e2)) = (span(a), span(b));
            assert!(e1 <= s2 || e2 <= s1, "tests overlap on a host: {a} and {b}");
        }
    }
}

/// Stored runs with the plan's label: (count, distinct pairs, distinct ids in the queue).
fn stored(url: &str, name: &str) -> (i64, i64) {
    let mut c = wirerate_store::pg::connect(url).unwrap();
    let label = format!("plan:{name}");
    let row = c
        .query_one(
            "SELECT count(*), count(DISTINCT repeat_group) FROM runs WHERE label = $1",
            &[&label],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

#[test]
fn two_controllers_on_one_plan_run_each_test_once() {
    let test = "two_controllers_on_one_plan_run_each_test_once";
    let Some(cluster) = Cluster::shared(test) else {
        return;
    };
    let url = cluster.fresh_database();
    let ports: Vec<u16> = (0..4).map(|_| free_port()).collect();
    let _agents: Vec<Agent> = ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            Agent::loopback(
                &format!("127.0.0.{}", i + 1),
                *p,
                &["--allow-third-party", LOOP_TARGETS],
            )
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let mut text = "name = \"duo\"\n[hosts]\n".to_string();
    for (i, p) in ports.iter().enumerate() {
        text += &format!("h{} = \"127.0.0.{}:{p}\"\n", i + 1, i + 1);
    }
    text += "[test]\nseconds = 1\nbitrate = \"200M\"\n";
    let plan = plan_file(&dir, &text);
    let plan_s = plan.display().to_string();
    let start = || {
        Command::new(bin())
            .args(["plan", "run", &plan_s, "--db", &url, "--workers", "2"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn plan run")
    };
    let (one, two) = (start(), start());
    let (one, two) = (
        wait_bounded(one, Duration::from_secs(90)),
        wait_bounded(two, Duration::from_secs(90)),
    );
    println!(
        "first controller:\n{}\nsecond:\n{}",
        stdout(&one),
        stdout(&two)
    );
    assert!(one.status.success(), "{}{}", stdout(&one), stderr(&one));
    assert!(two.status.success(), "{}{}", stdout(&two), stderr(&two));
    let st = plan_status(&url, "duo");
    let tests = st["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 12);
    for t in tests {
        assert_eq!(t["status"], "done", "{t}");
        assert_eq!(t["attempts"], 1, "run once: {t}");
        assert!(t["result_id"].is_i64(), "{t}");
    }
    let mut ids: Vec<i64> = tests
        .iter()
        .map(|t| t["result_id"].as_i64().unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 12, "one result per test");
    assert_eq!(stored(&url, "duo"), (12, 12));
    assert_no_host_overlap(tests);
    let claimers: std::collections::BTreeSet<String> = tests
        .iter()
        .filter_map(|t| t["claimed_by"].as_str())
        .map(|c| c.rsplit_once('/').map_or(c, |(who, _)| who).to_string())
        .collect();
    println!("controllers that ran tests: {claimers:?}");
    // both said which run they worked: one queued it, the other joined it
    let said = stdout(&one) + &stdout(&two);
    assert!(
        said.contains("queued run 1") && said.contains("joined run 1"),
        "{said}"
    );
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
    let cluster = Cluster::shared(test)?;
    let url = cluster.fresh_database();
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
        Command::new(bin())
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn plan run")
    }
}

#[test]
fn a_full_mesh_plan_on_a_four_host_lab_stores_every_pair_once() {
    let test = "a_full_mesh_plan_on_a_four_host_lab_stores_every_pair_once";
    let Some(m) = mesh_lab("fm", test) else {
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

#[test]
fn a_busy_agent_says_so_and_holds_its_slot_while_it_runs() {
    let (pa, pb, pc) = (free_port(), free_port(), free_port());
    let _a = Agent::loopback("127.0.0.1", pa, &["--allow-third-party", LOOP_TARGETS]);
    let _b = Agent::loopback("127.0.0.2", pb, &[]);
    let _c = Agent::loopback("127.0.0.3", pc, &[]);
    let from = format!("127.0.0.1:{pa}");
    let long = Command::new(bin())
        .args([
            "run",
            "--from",
            &from,
            "--to",
            &format!("127.0.0.2:{pb}"),
            "-t",
            "3",
            "-b",
            "100M",
        ])
        .args(["--json", "--no-store"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn run");
    std::thread::sleep(Duration::from_millis(800));
    // another third-party request, and a direct test, meet the agent's slot taken
    let out = run(
        &[
            "run",
            "--from",
            &from,
            "--to",
            &format!("127.0.0.3:{pc}"),
            "-t",
            "1",
            "--no-store",
        ],
        Duration::from_secs(20),
    );
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
    let again = run(
        &[
            "run",
            "--from",
            &from,
            "--to",
            &format!("127.0.0.3:{pc}"),
            "-t",
            "1",
            "--no-store",
        ],
        Duration::from_secs(20),
    );
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

#[test]
fn plan_files_are_checked_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let good = plan_file(
        &dir,
        "name = \"p\"\n[hosts]\na = \"127.0.0.1\"\nb = \"127.0.0.2:6000\"\nc = \"127.0.0.3\"\n\
         [matrix]\nkind = \"star\"\ncenter = \"a\"\n[test]\nseconds = 1\n",
    );
    let good_s = good.display().to_string();
    let out = run(&["plan", "check", &good_s], Duration::from_secs(10));
    assert!(out.status.success(), "{}", stderr(&out));
    let t = stdout(&out);
    assert!(
        t.contains("3 host(s), 4 pair(s)") && t.contains("test b -> a"),
        "{t}"
    );
    assert!(t.contains("agent 127.0.0.2:6000"), "{t}");
    // a plan needs PostgreSQL for its queue: a file path is bad usage, said in one line
    let out = run(
        &["plan", "run", &good_s, "--db", "/tmp/results.db"],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("postgres://"), "{}", stderr(&out));
    // bad files: the field and the reason, exit 2
    let bad = dir.path().join("bad.toml");
    for (text, want) in [
        ("name = \"p\"\n[hosts]\na = \"x\"\n", "2 to"),
        (
            "name = \"p\"\n[hosts]\na = \"x\"\nb = \"y\"\n[matrix]\nkind = \"ring\"\n",
            "ring",
        ),
        ("name = \"p\"\nhosts = 3\n", "line 2"),
    ] {
        std::fs::write(&bad, text).unwrap();
        let out = run(
            &[
                "plan",
                "run",
                &bad.display().to_string(),
                "--db",
                "postgres:///x",
            ],
            Duration::from_secs(10),
        );
        assert_eq!(out.status.code(), Some(2), "{text}");
        let e = stderr(&out);
        assert!(
            e.contains(want) && e.trim().lines().count() == 1,
            "{text}: {e}"
        );
    }
    let out = run(
        &["plan", "check", "/nonexistent/plan.toml"],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn plan_status_of_a_plan_that_never_ran_says_so() {
    let test = "plan_status_of_a_plan_that_never_ran_says_so";
    let Some(cluster) = Cluster::shared(test) else {
        return;
    };
    let url = cluster.fresh_database();
    let out = run(
        &["plan", "status", "--plan", "nope", "--db", &url],
        Duration::from_secs(20),
    );
    assert_eq!(out.status.code(), Some(1));
    let e = stderr(&out);
    assert!(e.contains("plan 'nope' has not run"), "{e}");
}

#[test]
fn a_scheduled_plan_starts_each_run_on_time() {
    let test = "a_scheduled_plan_starts_each_run_on_time";
    let Some(cluster) = Cluster::shared(test) else {
        return;
    };
    let url = cluster.fresh_database();
    let (pa, pb) = (free_port(), free_port());
    let _a = Agent::loopback("127.0.0.1", pa, &["--allow-third-party", LOOP_TARGETS]);
    let _b = Agent::loopback("127.0.0.2", pb, &["--allow-third-party", LOOP_TARGETS]);
    let dir = tempfile::tempdir().unwrap();
    // two runs 3 s apart, each pair both ways twice
    let plan = plan_file(
        &dir,
        &format!(
            "name = \"sched\"\n[hosts]\na = \"127.0.0.1:{pa}\"\nb = \"127.0.0.2:{pb}\"\n\
             [matrix]\nkind = \"pairs\"\npairs = [[\"a\", \"b\"]]\nboth_ways = true\n\
             [test]\nseconds = 0.5\nbitrate = \"100M\"\n\
             [schedule]\nrepeat = 2\nruns = 2\nevery_min = 0.05\n"
        ),
    );
    let out = run(
        &["plan", "run", &plan.display().to_string(), "--db", &url],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let st = plan_status(&url, "sched");
    let tests = st["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 8);
    assert!(tests.iter().all(|t| t["status"] == "done"), "{st}");
    let first = |run: i64, key: &str| {
        tests
            .iter()
            .filter(|t| t["run"] == run)
            .map(|t| t[key].as_f64().unwrap())
            .fold(f64::INFINITY, f64::min)
    };
    // the second run is due 3 s after the first and none of its tests starts before that
    let due = first(1, "due_unix_s") - first(0, "due_unix_s");
    assert!((due - 3.0).abs() < 0.01, "{due}");
    assert!(first(1, "started_unix_s") >= first(1, "due_unix_s"));
    assert_no_host_overlap(tests);
    assert_eq!(stored(&url, "sched"), (8, 2));
}

#[test]
fn a_killed_controllers_tests_are_taken_over_when_their_lease_expires() {
    let test = "a_killed_controllers_tests_are_taken_over_when_their_lease_expires";
    let Some(cluster) = Cluster::shared(test) else {
        return;
    };
    let url = cluster.fresh_database();
    let ports: Vec<u16> = (0..4).map(|_| free_port()).collect();
    let _agents: Vec<Agent> = ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            Agent::loopback(
                &format!("127.0.0.{}", i + 1),
                *p,
                &["--allow-third-party", LOOP_TARGETS],
            )
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let mut text = "name = \"crash\"\n[hosts]\n".to_string();
    for (i, p) in ports.iter().enumerate() {
        text += &format!("h{} = \"127.0.0.{}:{p}\"\n", i + 1, i + 1);
    }
    text += "[test]\nseconds = 1\nbitrate = \"100M\"\n";
    let plan = plan_file(&dir, &text).display().to_string();
    let controller = || {
        Command::new(bin())
            .args(["plan", "run", &plan, "--db", &url, "--lease", "4"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn plan run")
    };
    // the first controller dies (SIGKILL) while it holds claims
    let mut first = controller();
    let mut c = wirerate_store::pg::connect(&url).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let held: Vec<i64> = loop {
        let ids: Vec<i64> = c
            .query(
                "SELECT id FROM plan_tests WHERE status = 'running' ORDER BY id",
                &[],
            )
            .map(|rows| rows.iter().map(|r| r.get(0)).collect())
            .unwrap_or_default();
        if !ids.is_empty() {
            break ids;
        }
        assert!(
            Instant::now() < deadline,
            "the first controller claimed nothing"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    first.kill().unwrap();
    let _ = first.wait();
    let started = Instant::now();
    let second = wait_bounded(controller(), Duration::from_secs(90));
    println!("{}", stdout(&second));
    assert!(
        second.status.success(),
        "{}{}",
        stdout(&second),
        stderr(&second)
    );
    let st = plan_status(&url, "crash");
    let tests = st["tests"].as_array().unwrap();
    assert!(tests.iter().all(|t| t["status"] == "done"), "{st}");
    for id in &held {
        let t = tests.iter().find(|t| t["id"] == *id).unwrap();
        assert_eq!(t["attempts"], 2, "taken over once: {t}");
        assert!(!t["claimed_by"].as_str().unwrap().is_empty());
    }
    // the taken-over tests waited for the lease (4 s) of the dead controller
    println!(
        "second controller finished after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let (runs, pairs) = stored(&url, "crash");
    assert_eq!(pairs, 12, "every pair stored");
    assert!(runs >= 12, "{runs}");
    // a lease shorter than a test is refused
    let out = run(
        &["plan", "run", &plan, "--db", &url, "--lease", "2"],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--lease"), "{}", stderr(&out));
}
