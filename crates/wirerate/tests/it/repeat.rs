//! `run --repeat`, `--until-ci` and the storing of every run, end to end with a real SQLite
//! file.

use crate::common;

use std::path::PathBuf;
use std::time::Duration;

use common::{json, run, stderr};

const LIMIT: Duration = Duration::from_secs(60);

fn fresh_db(name: &str) -> PathBuf {
    let p = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{name}-{}.db", std::process::id()));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", p.display()));
    }
    p
}

#[test]
fn repeat_stores_every_run_under_one_group_and_summarizes() {
    let db = fresh_db("repeat");
    let d = db.to_str().unwrap();
    let out = run(
        &[
            "run", "-n", "2M", "--repeat", "3", "--label", "rep", "--db", d, "--json",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let runs = json(&out);
    assert_eq!(runs.as_array().unwrap().len(), 3);
    for r in runs.as_array().unwrap() {
        assert_eq!(r["summary"]["bytes"], 2 << 20);
    }
    let out = run(&["history", "--label", "rep", "--db", d, "--json"], LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows = json(&out);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 3);
    let group = &rows[0]["group"];
    assert!(group.is_string());
    assert!(rows
        .iter()
        .all(|r| &r["group"] == group && r["label"] == "rep"));

    let out = run(&["run", "-n", "2M", "--repeat", "3", "--db", d], LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "run   3", "median", "mean", "stddev", "95 %", "goodput", "PI",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}

#[test]
fn until_ci_stops_within_its_bounds() {
    let db = fresh_db("until");
    let d = db.to_str().unwrap();
    let out = run(
        &[
            "run",
            "-n",
            "1M",
            "--until-ci",
            "50",
            "--max-runs",
            "6",
            "--db",
            d,
            "--json",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let n = json(&out).as_array().unwrap().len();
    assert!((2..=6).contains(&n), "{n} runs");
    // a target no noisy machine meets runs to the cap and says so
    let out = run(
        &[
            "run",
            "-n",
            "1M",
            "--until-ci",
            "0.0001",
            "--max-runs",
            "3",
            "--db",
            d,
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("warning: after 3 runs"), "{text}");
}

#[test]
fn a_single_run_is_stored_and_no_store_stores_nothing() {
    let db = fresh_db("single");
    let d = db.to_str().unwrap();
    let out = run(&["run", "-n", "1M", "--label", "one", "--db", d], LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(&["history", "--label", "one", "--db", d, "--json"], LIMIT);
    assert_eq!(json(&out).as_array().unwrap().len(), 1);

    let none = fresh_db("none");
    let out = common::wr()
        .args(["run", "-n", "1M", "--no-store"])
        .env("WIRERATE_DB", &none)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!none.exists(), "--no-store created the database");
}

#[test]
fn repeat_flags_are_checked() {
    for args in [
        vec!["run", "--repeat", "0"],
        vec!["run", "--until-ci", "0"],
        vec!["run", "--until-ci", "5", "--max-runs", "1"],
        vec!["run", "--repeat", "3", "--until-ci", "5"],
        vec!["run", "--max-runs", "5"],
        vec!["run", "--no-store", "--label", "x"],
    ] {
        let out = run(&args, LIMIT);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn an_unusable_database_named_by_the_user_fails_before_the_test() {
    let out = run(
        &["run", "-t", "30", "--db", "/proc/no-such-dir/x.db"],
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("results database"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
