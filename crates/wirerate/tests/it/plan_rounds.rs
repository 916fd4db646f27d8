//! `plan run` on a repeating schedule, end to end on loopback: real agents on 127.0.0.1 and
//! 127.0.0.2 and a real throwaway PostgreSQL (skipped, with the reason, where its server
//! binaries are missing). Every process a test starts is ended by its PID.

use crate::common;

use std::time::{Duration, Instant};

use common::fleet::fresh_db;
use common::fleet::{loopback_agents, loopback_hosts, plan_file, spawn_piped, stored};
use common::{free_port, run, stderr, stdout, wait_bounded};

/// A plan of one test, h1 -> h2, on two loopback agents (kept alive by the returned value).
fn one_way_plan(name: &str) -> (String, Vec<common::fleet::Agent>, tempfile::TempDir) {
    let ports = [free_port(), free_port()];
    let agents = loopback_agents(&ports);
    let dir = tempfile::tempdir().unwrap();
    let text = loopback_hosts(name, &ports)
        + "[matrix]\nkind = \"pairs\"\npairs = [[\"h1\", \"h2\"]]\n\
           [test]\nseconds = 0.2\nbitrate = \"50M\"\n";
    let plan = plan_file(&dir, &text).display().to_string();
    (plan, agents, dir)
}

/// When each round (plan run) of the plan was queued, in Unix seconds, and its tests'
/// statuses; none before the controller made the queue's tables.
fn rounds(url: &str, name: &str) -> Vec<(f64, Vec<String>)> {
    let mut c = wirerate_store::pg::connect(url).unwrap();
    c.query(
        "SELECT extract(epoch FROM r.started_at)::float8, \
                    array_agg(t.status ORDER BY t.id) \
             FROM plan_runs r JOIN plan_tests t USING (plan, epoch) \
             WHERE r.plan = $1 GROUP BY r.epoch, r.started_at ORDER BY r.epoch",
        &[&name],
    )
    .map(|rows| rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    .unwrap_or_default()
}

#[test]
fn every_second_three_times_makes_three_rounds_a_second_apart() {
    let test = "every_second_three_times_makes_three_rounds_a_second_apart";
    let Some(url) = fresh_db(test) else {
        return;
    };
    let (plan, _agents, _dir) = one_way_plan("tick");
    let started = Instant::now();
    let out = run(
        &[
            "plan", "run", &plan, "--db", &url, "--every", "PT1S", "--count", "3",
        ],
        Duration::from_secs(60),
    );
    let took = started.elapsed().as_secs_f64();
    println!("{}", stdout(&out));
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("3 round(s) until its count of rounds"),
        "{}",
        stdout(&out)
    );
    let r = rounds(&url, "tick");
    assert_eq!(r.len(), 3, "{r:?}");
    for (_, statuses) in &r {
        assert_eq!(statuses, &["done"], "{r:?}");
    }
    // the controller put each round in its own slot of a one-second grid: at the slot's
    // start, or later in it when the round before ran past that start (and in a later slot
    // when it ran past the whole slot)
    let planned: Vec<f64> = stdout(&out)
        .lines()
        .filter_map(|l| l.split_once(" at ")?.1.split_whitespace().next())
        .map(|t| wirerate_fleet::schedule::parse_instant(t).unwrap())
        .collect();
    assert_eq!(planned.len(), 3, "{}", stdout(&out));
    let slots: Vec<f64> = planned
        .iter()
        .map(|t| (t - planned[0] + 0.005).floor())
        .collect();
    assert!(slots.windows(2).all(|w| w[1] > w[0]), "{planned:?}");
    // and the rounds were queued so: never back to back (wide bounds: the first round also
    // makes the queue's tables, which delays it)
    let gaps: Vec<f64> = r.windows(2).map(|w| w[1].0 - w[0].0).collect();
    println!("planned {planned:?}; queued with gaps of {gaps:?} s; {took:.2} s in all");
    for g in &gaps {
        assert!((0.5..=3.2).contains(g), "{gaps:?}");
    }
    assert!(took >= 2.0, "three rounds a second apart took {took} s");
    assert_eq!(stored(&url, "tick"), (3, 1));
}

/// `--slip`: each round starts at a random moment in the first second of its 3 s slot, as
/// psconfig's slip spreads its tests; without it they would be exactly 3 s apart.
#[test]
fn a_slip_starts_each_round_at_a_random_moment_of_its_slot() {
    let test = "a_slip_starts_each_round_at_a_random_moment_of_its_slot";
    let Some(url) = fresh_db(test) else {
        return;
    };
    let (plan, _agents, _dir) = one_way_plan("slip");
    let out = run(
        &[
            "plan", "run", &plan, "--db", &url, "--every", "R3/PT3S", "--slip", "PT1S",
        ],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let planned: Vec<f64> = stdout(&out)
        .lines()
        .filter_map(|l| l.split_once(" at ")?.1.split_whitespace().next())
        .map(|t| wirerate_fleet::schedule::parse_instant(t).unwrap())
        .collect();
    assert_eq!(planned.len(), 3, "{}", stdout(&out));
    // round k is due at t0 + 3k + (its draw) x 1 s: off the grid of the first by less
    // than the slip, and not by the same amount each time (printed to the millisecond)
    let off: Vec<f64> = (1..3)
        .map(|k| planned[k] - planned[0] - 3.0 * k as f64)
        .collect();
    println!("planned {planned:?}: off the first round's grid by {off:?} s");
    assert!(off.iter().all(|d| d.abs() < 1.01), "{off:?}");
    assert!(off.iter().any(|d| d.abs() > 0.002), "{off:?}");
    assert_eq!(stored(&url, "slip"), (3, 1));
}

#[test]
fn until_ends_the_rounds_at_its_time() {
    let test = "until_ends_the_rounds_at_its_time";
    let Some(url) = fresh_db(test) else {
        return;
    };
    let (plan, _agents, _dir) = one_way_plan("until");
    // slots at 0, 1 and 2 s begin before the end, 2.5 s from now; the one at 3 s does not
    let out = run(
        &[
            "plan", "run", &plan, "--db", &url, "--every", "PT1S", "--until", "PT2.5S",
        ],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let said = stdout(&out);
    assert!(said.contains("until its end time"), "{said}");
    // three rounds, or two where a round ran past the next one's whole slot
    let r = rounds(&url, "until");
    assert!((2..=3).contains(&r.len()), "{r:?}");
    assert!(
        said.contains(&format!("{} round(s) until", r.len())),
        "{said}"
    );
}

#[test]
fn sigterm_stops_the_rounds_between_tests() {
    let test = "sigterm_stops_the_rounds_between_tests";
    let Some(url) = fresh_db(test) else {
        return;
    };
    let (plan, _agents, _dir) = one_way_plan("forever");
    // no count, no end: only the signal stops it
    let child = spawn_piped(&["plan", "run", &plan, "--db", &url, "--every", "R/PT1S"]);
    let pid = child.id() as libc::pid_t;
    let deadline = Instant::now() + Duration::from_secs(30);
    while rounds(&url, "forever")
        .iter()
        .filter(|(_, s)| s.iter().all(|s| s == "done"))
        .count()
        < 2
    {
        assert!(Instant::now() < deadline, "two rounds never ended");
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill(2) on the PID of the child this test spawned and has not reaped
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let out = wait_bounded(child, Duration::from_secs(20));
    println!("{}", stdout(&out));
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let said = stdout(&out);
    assert!(said.contains("until a signal"), "{said}");
    assert_eq!(
        said.matches("stopping: no test starts now").count(),
        1,
        "{said}"
    );
    // nothing was left half done: every test queued ended and its result is stored
    let r = rounds(&url, "forever");
    let done: usize = r
        .iter()
        .map(|(_, s)| s.iter().filter(|s| *s == "done").count())
        .sum();
    assert!(
        r.iter().all(|(_, s)| s.iter().all(|s| s != "running")),
        "{r:?}"
    );
    assert!(done >= 2);
    assert_eq!(stored(&url, "forever").0, done as i64);
}

#[test]
fn schedules_are_checked_before_anything_runs() {
    let (plan, _agents, _dir) = one_way_plan("bad");
    for (args, want) in [
        (vec!["--slip", "PT1M"], "go with a repeating schedule"),
        (vec!["--count", "2"], "go with a repeating schedule"),
        (vec!["--every", "P1M"], "years and months"),
        (vec!["--every", "4h"], "ISO 8601"),
        (
            vec!["--every", "PT1H", "--slip", "PT2H"],
            "shorter than the interval",
        ),
        (vec!["--every", "PT1H", "--count", "0"], "1 or more"),
        (vec!["--every", "PT1H", "--until", "tomorrow"], "--until"),
        (
            vec!["--every", "PT1H", "--until", "2020-01-01T00:00:00Z"],
            "has passed",
        ),
    ] {
        let mut all = vec!["plan", "run", plan.as_str(), "--db", "postgres:///nowhere"];
        all.extend(args.iter());
        let out = run(&all, Duration::from_secs(10));
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {e}");
        assert!(
            e.contains(want) && e.trim().lines().count() == 1,
            "{args:?}: {e}"
        );
    }
    // the plan file's own schedule, shown by check
    let dir = tempfile::tempdir().unwrap();
    let text = loopback_hosts("sched", &[5350, 5351])
        + "[schedule]\nevery = \"R6/PT4H\"\nslip = \"PT10M\"\n";
    let p = plan_file(&dir, &text).display().to_string();
    let out = run(&["plan", "check", &p], Duration::from_secs(10));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("a round every 14400 s, each within 600 s of its time, 6 rounds"),
        "{}",
        stdout(&out)
    );
}
