//! End-to-end tests of plans on loopback (`plan run`, `plan status`, `plan check`): real
//! agents on 127.0.0.1-4, a real throwaway PostgreSQL (skipped, with the reason, where its
//! server binaries are missing). Every process a test starts is ended by its PID.

use crate::common;

use std::time::{Duration, Instant};

use common::fleet::{
    assert_no_host_overlap, fresh_db, loopback_agents, loopback_hosts, pair_plan, plan_file,
    plan_status, spawn_piped, stored,
};
use common::{free_port, run, stderr, stdout, wait_bounded};

#[test]
fn two_controllers_on_one_plan_run_each_test_once() {
    let test = "two_controllers_on_one_plan_run_each_test_once";
    let Some(url) = fresh_db(test) else {
        return;
    };
    let ports: Vec<u16> = (0..4).map(|_| free_port()).collect();
    let _agents = loopback_agents(&ports);
    let dir = tempfile::tempdir().unwrap();
    let text = loopback_hosts("duo", &ports) + "[test]\nseconds = 1\nbitrate = \"200M\"\n";
    let plan = plan_file(&dir, &text);
    let plan_s = plan.display().to_string();
    let start = || spawn_piped(&["plan", "run", &plan_s, "--db", &url, "--workers", "2"]);
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
        &["plan", "run", &good_s, "--db", "results.db"],
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
    let Some(url) = fresh_db(test) else {
        return;
    };
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
    let Some(url) = fresh_db(test) else {
        return;
    };
    // two runs 3 s apart, each pair both ways twice
    let p = pair_plan(
        "sched",
        "[test]\nseconds = 0.5\nbitrate = \"100M\"\n\
         [schedule]\nrepeat = 2\nruns = 2\nevery_min = 0.05\n",
    );
    let out = run(
        &["plan", "run", &p.plan, "--db", &url],
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
    let Some(url) = fresh_db(test) else {
        return;
    };
    let ports: Vec<u16> = (0..4).map(|_| free_port()).collect();
    let _agents = loopback_agents(&ports);
    let dir = tempfile::tempdir().unwrap();
    let text = loopback_hosts("crash", &ports) + "[test]\nseconds = 1\nbitrate = \"100M\"\n";
    let plan = plan_file(&dir, &text).display().to_string();
    let controller = || spawn_piped(&["plan", "run", &plan, "--db", &url, "--lease", "4"]);
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
    // a lease too short to be renewed is refused
    let out = run(
        &["plan", "run", &plan, "--db", &url, "--lease", "1"],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--lease"), "{}", stderr(&out));
}

#[test]
fn a_test_longer_than_its_lease_keeps_its_claim_while_its_controller_lives() {
    let test = "a_test_longer_than_its_lease_keeps_its_claim_while_its_controller_lives";
    let Some(url) = fresh_db(test) else {
        return;
    };
    let p = pair_plan("long", "[test]\nseconds = 4\nbitrate = \"100M\"\n");
    // 4 s tests under a 3 s lease, with a second controller waiting to take over: only the
    // renewals keep each test with the controller that runs it
    let start = || spawn_piped(&["plan", "run", &p.plan, "--db", &url, "--lease", "3"]);
    let (one, two) = (start(), start());
    let one = wait_bounded(one, Duration::from_secs(60));
    let two = wait_bounded(two, Duration::from_secs(60));
    assert!(
        one.status.success() && two.status.success(),
        "{}{}",
        stderr(&one),
        stderr(&two)
    );
    let st = plan_status(&url, "long");
    for t in st["tests"].as_array().unwrap() {
        assert_eq!(t["status"], "done", "{t}");
        assert_eq!(t["attempts"], 1, "never taken over: {t}");
    }
    assert_eq!(stored(&url, "long"), (2, 2));
}
