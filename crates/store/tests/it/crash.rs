//! Crash safety: a writer process killed with SIGKILL in the middle of storing runs leaves a
//! database that passes SQLite's integrity check, holds every run it acknowledged, holds no
//! partial row, and takes the unacknowledged retry without a duplicate.
//!
//! The writer is this test binary itself, started again with `CHILD_ENV` set: it stores runs
//! in a loop and prints `ack <n> <id>` after each commit returns.

use wirerate_core::synth as common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use wirerate_store::{RunFilter, Store};

const CHILD_ENV: &str = "WIRERATE_STORE_CRASH_WRITER_DB";
/// Interval reports per result: makes each row tens of kilobytes, so writes take long
/// enough for the kill to land inside one.
const INTERVALS: usize = 300;

fn goodput(n: u64) -> f64 {
    1e9 + n as f64 * 1e6
}

/// The writer's side. Does nothing unless started by the test below.
#[test]
fn crash_writer_child() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let start: u64 = std::env::var("WIRERATE_STORE_CRASH_START")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // a file path or a postgres:// URL
    let mut store = Store::connect(std::path::Path::new(&path)).unwrap();
    for n in start..start + 100_000 {
        let r = common::run(n, goodput(n), INTERVALS);
        let id = store.insert_run(&r, Some("crash"), Some("writer")).unwrap();
        println!("ack {n} {id}");
    }
}

/// Starts a writer storing runs numbered from `start`.
fn spawn_writer(db: &Path, start: u64) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "crash::crash_writer_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, db)
        .env("WIRERATE_STORE_CRASH_START", start.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Reads a writer's acknowledgements until `acks` of them (or a minute) have come, then
/// kills it with SIGKILL (`Child::kill`: no destructor, no flush, no checkpoint) and returns
/// every (n, id) pair it acknowledged, including those still in the pipe when it died.
fn kill_after(mut child: Child, acks: usize) -> Vec<(u64, i64)> {
    let out = child.stdout.take().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let parse = |line: std::io::Result<String>| -> Option<(u64, i64)> {
        let line = line.unwrap();
        // the harness may print "test crash::crash_writer_child ... " on the first line's start
        let at = line.find("ack ")?;
        let mut f = line[at + 4..].split_whitespace();
        Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
    };
    // the pipe stays open until after the kill, so the writer never sees EPIPE and never
    // gets to unwind cleanly
    let mut lines = BufReader::new(out).lines();
    let mut acked = Vec::new();
    for line in lines.by_ref() {
        acked.extend(parse(line));
        if acked.len() >= acks || Instant::now() > deadline {
            break;
        }
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(9),
        "the writer must die by SIGKILL: {status}"
    );
    // what it printed before dying was acknowledged too
    acked.extend(lines.filter_map(parse));
    acked
}

/// Every acknowledged run is present and whole; every row reads whole and agrees with its
/// columns.
fn check_store(store: &Store, acked: &[(u64, i64)]) -> Vec<wirerate_store::StoredRun> {
    assert_eq!(store.integrity_check().unwrap(), "ok");
    let rows = store.list(&RunFilter::default()).unwrap();
    for &(n, id) in acked {
        let row = rows.iter().find(|r| r.row.id == id);
        let row = row.unwrap_or_else(|| panic!("acknowledged run {n} (id {id}) is missing"));
        let want = common::run(n, goodput(n), INTERVALS);
        assert!(
            row.result().unwrap() == want,
            "run {n} (id {id}) reads back different"
        );
    }
    for row in &rows {
        let r = row.result().unwrap();
        assert_eq!(
            r.intervals.len(),
            INTERVALS,
            "row {} is partial",
            row.row.id
        );
        assert_eq!(row.row.goodput_bps, Some(r.summary.goodput_bps));
        assert_eq!(row.row.label.as_deref(), Some("crash"));
    }
    rows
}

#[test]
fn two_writers_at_once_both_killed_lose_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("busy.db");
    // create the file first, so the two writers race on writes, not on creating tables
    drop(Store::open(&db).unwrap());
    let first = spawn_writer(&db, 0);
    let second = spawn_writer(&db, 1_000_000);
    let t = std::thread::spawn(move || kill_after(first, 20));
    let mut acked = kill_after(second, 20);
    acked.extend(t.join().unwrap());
    assert!(acked.len() >= 40, "a writer gave up waiting for the other");
    let store = Store::open(&db).unwrap();
    let rows = check_store(&store, &acked);
    assert!(rows.len() <= acked.len() + 2, "{} rows", rows.len());
}

#[test]
fn sigkill_during_writes_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crash.db");
    let mut acked = Vec::new();
    let mut next = 0;
    // three writers in turn, each killed mid-stream, each reopening what the last left
    for acks in [25, 40, 15] {
        let got = kill_after(spawn_writer(&db, next), acks);
        assert!(got.len() >= acks, "writer stopped early");
        next = got.last().unwrap().0 + 2; // skip the run that may have been in flight
        acked.extend(got);
    }

    let mut store = Store::open(&db).unwrap();
    let rows = check_store(&store, &acked);
    // at most one unacknowledged run per killed writer made it in
    assert!(rows.len() <= acked.len() + 3, "{} rows", rows.len());

    // retrying everything a writer attempted adds exactly the runs that were not stored
    let attempted: Vec<u64> = acked.iter().map(|a| a.0).chain([next - 1]).collect();
    for &n in &attempted {
        let id = store
            .insert_run(
                &common::run(n, goodput(n), INTERVALS),
                Some("crash"),
                Some("writer"),
            )
            .unwrap();
        if let Some(&(_, acked_id)) = acked.iter().find(|a| a.0 == n) {
            assert_eq!(id, acked_id, "a retry of run {n} got a new id");
        }
    }
    let after = store.list(&RunFilter::default()).unwrap();
    let mut keys: Vec<&str> = after.iter().map(|r| r.row.run_key.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), after.len(), "duplicate runs after retry");
    assert!(after.len() >= attempted.len());
}

#[test]
fn writers_on_postgres_killed_at_once_lose_nothing_acknowledged() {
    let Some(cluster) = wirerate_testpg::Cluster::shared("crash_pg") else {
        return;
    };
    let url = cluster.fresh_database();
    // the first writer creates the tables; the second starts on them, then both race
    let a = spawn_writer(Path::new(&url), 0);
    let b = spawn_writer(Path::new(&url), 1_000_000);
    let (ta, tb) = (
        std::thread::spawn(move || kill_after(a, 25)),
        std::thread::spawn(move || kill_after(b, 25)),
    );
    let mut acked = ta.join().unwrap();
    acked.extend(tb.join().unwrap());
    assert!(acked.len() >= 50, "{}", acked.len());
    let store = Store::open_url_existing(&url).unwrap();
    let rows = check_store(&store, &acked);
    // at most one commit per writer can have landed without its acknowledgement printed
    assert!(rows.len() <= acked.len() + 2, "{} rows", rows.len());
}
