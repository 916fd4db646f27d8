//! `history`, `show` and `compare` through the real binary, on a temporary database filled
//! with synthetic runs and on saved JSON files.

use crate::common;

use wirerate_core::synth;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::outcome;
use wirerate_core::RunResult;
use wirerate_store::Store;

const GBIT: f64 = 1e9;
const LIMIT: Duration = Duration::from_secs(60);

/// The binary with no database of its own (each test names one), bounded in time.
fn wirerate(args: &[&str]) -> Output {
    common::run_bare(args, LIMIT)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A database with label "old" ~ N(100, 5) Gbit/s, "new" ~ N(75, 5) (12 runs each, on
/// another client kernel) and "again" ~ N(100, 5) (10 runs, another seed).
fn lab_db(dir: &Path) -> PathBuf {
    let path = dir.join("results.db");
    let mut store = Store::open(&path).unwrap();
    let mut new = synth::sample(100, 12, 75.0 * GBIT, 5.0 * GBIT, 2);
    for r in &mut new {
        r.env.client.kernel = Some("6.9.0-test".into());
    }
    let sets = [
        ("old", synth::sample(0, 12, 100.0 * GBIT, 5.0 * GBIT, 1)),
        ("new", new),
        ("again", synth::sample(200, 10, 100.0 * GBIT, 5.0 * GBIT, 3)),
    ];
    for (label, runs) in &sets {
        for r in runs {
            store.insert_run(r, Some(label), Some(label)).unwrap();
        }
    }
    path
}

fn json_of(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

#[test]
fn compare_sees_a_quarter_slower_with_p_below_a_thousandth() {
    let dir = tempfile::tempdir().unwrap();
    let db = lab_db(dir.path());
    let db = db.to_str().unwrap();
    let (code, out, _) = outcome(&wirerate(&["compare", "old", "new", "--db", db]));
    assert_eq!(code, 0, "{out}");
    let last = out.lines().last().unwrap();
    assert!(
        last.starts_with("verdict: B is ") && last.ends_with("% slower than A (p < 0.001)"),
        "{out}"
    );
    assert!(out.contains("Mann-Whitney U"), "{out}");
    assert!(
        out.contains("client kernel: A 6.8.0-test, B 6.9.0-test"),
        "{out}"
    );

    let (code, out, _) = outcome(&wirerate(&["compare", "old", "new", "--json", "--db", db]));
    assert_eq!(code, 0);
    let v = json_of(&out);
    let change = v["change_percent"].as_f64().unwrap();
    assert!((-30.0..-20.0).contains(&change), "{change}");
    assert!(v["p_value"].as_f64().unwrap() < 0.001);
    assert!(v["verdict"].as_str().unwrap().contains("slower than A"));
    assert_eq!(v["a"]["runs"], 12);
    assert_eq!(v["differences"][0]["what"], "client kernel");
    assert_eq!(v["differences"].as_array().unwrap().len(), 1, "{out}");
    let g = &v["metrics"]["goodput_bps"];
    // seed 2 draws one low outlier (|skewness| 1.09), so the rank test is the one chosen
    assert_eq!(g["test"]["kind"], "mann_whitney");
    assert_eq!(g["test"]["exact"], true);
    assert!(g["change_ci95_low_percent"].as_f64().unwrap() < change);
    assert!(g["change_ci95_high_percent"].as_f64().unwrap() > change);
    for m in ["cpu_percent", "pi", "retransmits"] {
        assert!(v["metrics"][m]["verdict"].is_string(), "{m} missing: {out}");
    }
}

#[test]
fn compare_same_distribution_finds_no_significant_difference() {
    let dir = tempfile::tempdir().unwrap();
    let db = lab_db(dir.path());
    let (code, out, _) = outcome(&wirerate(&[
        "compare",
        "old",
        "again",
        "--db",
        db.to_str().unwrap(),
    ]));
    assert_eq!(code, 0);
    let last = out.lines().last().unwrap();
    assert!(
        last.starts_with("verdict: no significant difference in goodput"),
        "{out}"
    );
}

#[test]
fn fail_if_slower_gates_with_exit_status_3() {
    let dir = tempfile::tempdir().unwrap();
    let db = lab_db(dir.path());
    let db = db.to_str().unwrap();
    let run = |a: &str, b: &str, pct: &str| {
        outcome(&wirerate(&[
            "compare",
            a,
            b,
            "--fail-if-slower",
            pct,
            "--db",
            db,
        ]))
    };
    let (code, _, err) = run("old", "new", "10");
    assert_eq!(code, 3);
    assert!(
        err.starts_with("wirerate: B is slower than A by more than 10 %"),
        "{err}"
    );
    assert_eq!(
        run("old", "new", "40").0,
        0,
        "a 25 % slowdown passes a 40 % gate"
    );
    assert_eq!(run("new", "old", "0").0, 0, "faster passes");
    assert_eq!(run("old", "again", "0").0, 0, "noise passes");
    assert_eq!(run("old", "new", "-1").0, 2);
    // one run against one cannot be decided: a gate must not pass it silently
    assert_eq!(run("id:1", "id:13", "5").0, 1);
}

#[test]
fn compare_reads_saved_files_without_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let a = synth::sample(0, 8, 10.0 * GBIT, 0.3 * GBIT, 11);
    let b = synth::sample(50, 8, 9.0 * GBIT, 0.3 * GBIT, 12);
    let a_path = dir.path().join("a.json");
    // documents appended one after another, as `run --json >> a.json` leaves them
    let docs: Vec<String> = a
        .iter()
        .map(|r| serde_json::to_string_pretty(r).unwrap())
        .collect();
    std::fs::write(&a_path, docs.join("\n")).unwrap();
    let b_path = dir.path().join("b.jsonl");
    let lines: Vec<String> = b
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
    std::fs::write(&b_path, lines.join("\n")).unwrap();
    let one = dir.path().join("one.json");
    std::fs::write(&one, serde_json::to_string(&a[0]).unwrap()).unwrap();

    let (code, out, err) = outcome(&wirerate(&[
        "compare",
        a_path.to_str().unwrap(),
        b_path.to_str().unwrap(),
        "--db",
        "/nonexistent/never-opened.db",
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("slower than A (p < 0.001)"), "{out}");
    assert!(out.contains("Welch's t-test"), "{out}");

    let (code, out, _) = outcome(&wirerate(&[
        "compare",
        one.to_str().unwrap(),
        a_path.to_str().unwrap(),
    ]));
    assert_eq!(code, 0);
    assert!(out.contains("cannot test goodput: A has 1 value"), "{out}");
}

#[test]
fn history_exports_what_compare_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = lab_db(dir.path());
    let db = db.to_str().unwrap();
    let (code, out, _) = outcome(&wirerate(&["history", "--db", db]));
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 1 + 34, "{out}");
    assert!(out.contains("again") && out.contains("Gbit/s"), "{out}");

    let (_, out, _) = outcome(&wirerate(&[
        "history", "--label", "new", "--json", "--db", db,
    ]));
    let v = json_of(&out);
    let items = v.as_array().unwrap();
    assert_eq!(items.len(), 12);
    assert_eq!(items[0]["label"], "new");
    let saved = dir.path().join("new.json");
    std::fs::write(&saved, &out).unwrap();
    let (code, out, _) = outcome(&wirerate(&[
        "compare",
        "old",
        saved.to_str().unwrap(),
        "--db",
        db,
    ]));
    assert_eq!(code, 0);
    assert!(
        out.contains("B: file ") && out.contains("(12 runs)"),
        "{out}"
    );

    let (_, out, _) = outcome(&wirerate(&["history", "--csv", "--limit", "3", "--db", db]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4);
    assert!(lines[0].starts_with("id,run_key,label,group,started_unix_s"));
    assert!(lines[3].starts_with("34,"), "{out}");
}

#[test]
fn show_prints_one_run_and_its_json() {
    let dir = tempfile::tempdir().unwrap();
    let db = lab_db(dir.path());
    let db = db.to_str().unwrap();
    let (code, out, _) = outcome(&wirerate(&["show", "13", "--db", db]));
    assert_eq!(code, 0);
    assert!(
        out.contains("label        new") && out.contains("Gbit/s"),
        "{out}"
    );
    assert!(out.contains("kernel 6.8.0-test"), "{out}");
    // issue 23, item 9: "in full" was a 13-line digest; it is the whole stored run: the
    // header, every interval line and the full summary
    let (_, json_out, _) = outcome(&wirerate(&["show", "13", "--json", "--db", db]));
    let r: RunResult = serde_json::from_str(&json_out).unwrap();
    assert!(out.contains("\nwirerate: TCP to "), "{out}");
    let lines = out
        .lines()
        .filter(|l| l.starts_with("client→server "))
        .count();
    assert_eq!(lines, r.intervals.len(), "{out}");
    for needle in [
        "\nSummary\n",
        "goodput (receiver)",
        "CPU client",
        "PI = T/C × T/P",
    ] {
        assert!(out.contains(needle), "{needle}: {out}");
    }
    let out = json_out;
    let r: RunResult = serde_json::from_str(&out).unwrap();
    assert_eq!(r.env.client.hostname.as_deref(), Some("alpha"));
    assert_eq!(outcome(&wirerate(&["show", "999", "--db", db])).0, 1);
    assert_eq!(outcome(&wirerate(&["show", "twelve", "--db", db])).0, 2);
}

#[test]
fn broken_inputs_give_one_line_and_a_failure_status() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "{ not json").unwrap();
    let other = dir.path().join("other.json");
    std::fs::write(&other, "{\"hello\": \"world\"}").unwrap();
    let not_db = dir.path().join("not.db");
    std::fs::write(
        &not_db,
        "plain text, not SQLite, long enough to be read as a header",
    )
    .unwrap();
    let missing_db = dir.path().join("missing.db");
    let cases: Vec<Vec<&str>> = vec![
        vec!["compare", junk.to_str().unwrap(), other.to_str().unwrap()],
        vec!["compare", other.to_str().unwrap(), other.to_str().unwrap()],
        vec!["compare", "gone.json", "gone.json"],
        vec!["history", "--db", not_db.to_str().unwrap()],
        vec!["history", "--db", missing_db.to_str().unwrap()],
        vec!["compare", "x", "y", "--db", missing_db.to_str().unwrap()],
    ];
    for args in cases {
        let (code, _, err) = outcome(&wirerate(&args));
        assert_eq!(code, 1, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("wirerate: "), "{err}");
    }
    assert!(!missing_db.exists(), "a reading command created a database");
}

#[test]
fn the_wirerate_db_variable_names_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = lab_db(dir.path());
    let mut cmd = common::bare();
    cmd.env("WIRERATE_DB", &db);
    let out = common::run_cmd(cmd, &["history", "--label", "again"], LIMIT);
    let (code, out, _) = outcome(&out);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 11, "{out}");
}

#[test]
fn compare_reads_what_run_json_writes() {
    // two short loopback runs per side, appended to one file each, as a user would
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for side in ["a", "b"] {
        let path = dir.path().join(format!("{side}.json"));
        let mut all = String::new();
        for _ in 0..2 {
            let (code, out, err) = outcome(&wirerate(&["run", "-t", "0.2", "-i", "0", "--json"]));
            assert_eq!(code, 0, "{err}");
            all.push_str(&out);
        }
        std::fs::write(&path, all).unwrap();
        files.push(path);
    }
    let (a, b) = (files[0].to_str().unwrap(), files[1].to_str().unwrap());
    let (code, out, err) = outcome(&wirerate(&["compare", a, b, "--json"]));
    assert_eq!(code, 0, "{err}");
    let v = json_of(&out);
    assert_eq!(
        (v["a"]["runs"].as_u64(), v["b"]["runs"].as_u64()),
        (Some(2), Some(2))
    );
    assert!(v["change_percent"].is_f64(), "{out}");
    // two runs a side: the exact rank test cannot reach p < 0.05, and says so
    assert_eq!(v["metrics"]["goodput_bps"]["test"]["kind"], "mann_whitney");
    assert!(v["verdict"].as_str().unwrap().contains("run more"), "{out}");
}

#[test]
fn import_keeps_export_labels_and_stores_each_run_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = lab_db(dir.path());
    let (_, export, _) = outcome(&wirerate(&[
        "history",
        "--json",
        "--db",
        db.to_str().unwrap(),
    ]));
    let saved = dir.path().join("export.json");
    std::fs::write(&saved, export).unwrap();
    let other = dir.path().join("other.db");
    let other = other.to_str().unwrap();
    let saved = saved.to_str().unwrap();
    let (code, out, err) = outcome(&wirerate(&["import", saved, "--db", other]));
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("stored 34 runs in "), "{out}");
    let (_, out, _) = outcome(&wirerate(&["import", saved, saved, "--db", other]));
    assert!(
        out.starts_with("stored 0 runs") && out.contains("(68 already there)"),
        "{out}"
    );
    let (code, out, _) = outcome(&wirerate(&["compare", "old", "new", "--db", other]));
    assert_eq!(code, 0);
    assert!(out.contains("A: label 'old' (12 runs)"), "{out}");
    // a bad file stores nothing, not even the good files named before it
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "[1]").unwrap();
    let fresh = dir.path().join("fresh.db");
    let (code, _, err) = outcome(&wirerate(&[
        "import",
        saved,
        junk.to_str().unwrap(),
        "--label",
        "x",
        "--db",
        fresh.to_str().unwrap(),
    ]));
    assert_eq!(code, 1);
    assert!(err.contains("junk.json: not wirerate results"), "{err}");
    assert!(!fresh.exists());
}

#[test]
fn import_labels_runs_that_run_already_stored() {
    // the README's workflow: `run --json >> k.json` stores each run unlabelled as it goes,
    // then `import k.json --label k` must label them, not report "stored 0 runs"
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let file = dir.path().join("k.json");
    let mut all = String::new();
    for _ in 0..2 {
        let args = ["run", "-t", "0.2", "-i", "0", "--json", "--db", db];
        let (code, out, err) = outcome(&wirerate(&args));
        assert_eq!(code, 0, "{err}");
        all.push_str(&out);
    }
    std::fs::write(&file, all).unwrap();
    let file = file.to_str().unwrap();
    let (code, out, err) = outcome(&wirerate(&["import", file, "--label", "k", "--db", db]));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("stored 0 runs in ") && out.contains("labelled 'k' 2 runs already stored"),
        "{out}"
    );
    let (code, out, _) = outcome(&wirerate(&["history", "--label", "k", "--db", db]));
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 3, "header and two runs: {out}");
    let (_, out, _) = outcome(&wirerate(&[
        "history", "--label", "k", "--json", "--db", db,
    ]));
    let v = json_of(&out);
    let groups: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["group"].as_str().unwrap())
        .collect();
    assert!(
        groups.len() == 2 && groups[0] == groups[1],
        "one group: {out}"
    );
    // importing again changes nothing, and says so
    let (code, out, _) = outcome(&wirerate(&["import", file, "--label", "k", "--db", db]));
    assert_eq!(code, 0);
    assert!(
        out.contains("(2 already there)") && !out.contains("labelled"),
        "{out}"
    );
}

#[test]
fn errors_say_their_cause_once_true_and_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    // the cause was printed twice: "Connection refused (os error 111): Connection refused …"
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let (code, _, err) = outcome(&wirerate(&["run", "127.0.0.1", "-p", &port, "--no-store"]));
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.matches("Connection refused").count(), 1, "{err}");
    // "file is not a database: file is not a database"
    let not_db = dir.path().join("not.db");
    std::fs::write(
        &not_db,
        "plain text, not SQLite, long enough to be read as a header",
    )
    .unwrap();
    let (code, _, err) = outcome(&wirerate(&["history", "--db", not_db.to_str().unwrap()]));
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.matches("not a database").count(), 1, "{err}");
    // a named database in a missing directory: refused, and no directory tree made
    let deep = dir.path().join("no").join("such").join("r.db");
    let (code, _, err) = outcome(&wirerate(&[
        "run",
        "-t",
        "0.1",
        "--db",
        deep.to_str().unwrap(),
    ]));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("does not exist: create "), "{err}");
    assert!(!dir.path().join("no").exists(), "a directory tree was made");
    // negative numbers reach validation
    for (args, msg) in [
        (vec!["run", "-t", "-5"], "-t must be positive"),
        (vec!["run", "-i", "-2"], "-i must be 0 or more"),
    ] {
        let (code, _, err) = outcome(&wirerate(&args));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.trim(), format!("wirerate: {msg}"), "{args:?}");
    }
}

#[test]
fn a_database_that_exists_but_cannot_be_read_is_not_called_missing() {
    // needs an unprivileged user: root reads everything
    let setpriv = std::path::Path::new("/usr/bin/setpriv");
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root || !setpriv.exists() {
        eprintln!("SKIPPED: needs root and setpriv to run as an unprivileged user");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    Store::open(&db).unwrap();
    // the directory is closed to others: the file exists, and cannot be reached
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = Command::new(setpriv)
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_wirerate"))
        .args(["history", "--db", db.to_str().unwrap()])
        .env_remove("WIRERATE_DB")
        .output()
        .unwrap();
    let (code, _, err) = outcome(&out);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("cannot read results database") && err.contains("ermission denied"),
        "{err}"
    );
    assert!(!err.contains("no results database"), "{err}");
}

/// Runs the binary as user and group 65534 (nobody), or None where that cannot be done (not
/// root, or no setpriv): root writes everything, so read-only files need another user.
fn as_nobody(args: &[&str]) -> Option<Output> {
    let setpriv = Path::new("/usr/bin/setpriv");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !setpriv.exists() {
        eprintln!("SKIPPED: needs root and setpriv to run as an unprivileged user");
        return None;
    }
    let out = Command::new(setpriv)
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_wirerate"))
        .args(args)
        .env_remove("WIRERATE_DB")
        .env("HOME", "/nonexistent")
        .output()
        .unwrap();
    Some(out)
}

/// Defect 12: `history` on a read-only database in a read-only directory failed with
/// "attempt to write a readonly database"; reading needs no write.
#[test]
fn reading_commands_work_on_a_read_only_database_in_a_read_only_directory() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let db = lab_db(dir.path());
    // readable by all, writable by root alone: file and directory
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = std::fs::read(&db).unwrap();
    let d = db.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["history", "--db", d], "again"),
        (vec!["history", "--db", d, "--label", "old", "--csv"], "old"),
        (vec!["show", "1", "--db", d], "goodput"),
        (vec!["compare", "old", "new", "--db", d], "slower"),
    ];
    for (args, expect) in cases {
        let Some(out) = as_nobody(&args) else { return };
        let (code, out, err) = outcome(&out);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(out.contains(expect), "{args:?}: {out}");
    }
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "a reader changed the file"
    );
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "a reader left files beside the database");
    // storing into it is another matter: refused before the test, said once
    let Some(out) = as_nobody(&["run", "-t", "0.3", "--json", "--db", d]) else {
        return;
    };
    let (code, _, err) = outcome(&out);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("readonly"), "{err}");
    assert_eq!(err.matches("cannot open").count(), 1, "{err}");
}

/// Defect 12: a result that could not be stored (here: garbled pages) exited 0 after
/// "result not stored"; the figures are printed, and the run fails.
#[test]
fn a_result_that_cannot_be_stored_is_printed_and_the_run_fails() {
    let dir = tempfile::tempdir().unwrap();
    let db = lab_db(dir.path());
    // every page after the first (the header, which still opens) overwritten with garbage
    let mut bytes = std::fs::read(&db).unwrap();
    let page = usize::from(u16::from_be_bytes([bytes[16], bytes[17]]));
    assert!(bytes.len() > page, "the database has one page only");
    for b in &mut bytes[page..] {
        *b = 0xA5;
    }
    std::fs::write(&db, &bytes).unwrap();
    for format in ["--json", "--format=text"] {
        let out = wirerate(&["run", "-t", "0.3", format, "--db", db.to_str().unwrap()]);
        let (code, out, err) = outcome(&out);
        assert_eq!(code, 1, "{format}: {err}");
        assert!(
            out.contains("goodput"),
            "{format}: the figures are printed: {out}"
        );
        assert!(err.contains("result not stored"), "{format}: {err}");
        assert_eq!(err.lines().count(), 1, "{format}: {err}");
    }
}

/// Issue 11 (smaller): forward, reverse and bidir runs all read `tcp x1` in `history`.
#[test]
fn history_says_each_run_s_direction() {
    use wirerate_core::Direction;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let mut store = Store::open(&db).unwrap();
    let runs = synth::sample(0, 3, 10.0 * GBIT, GBIT, 7);
    for (mut r, d) in
        runs.into_iter()
            .zip([Direction::Forward, Direction::Reverse, Direction::Bidir])
    {
        r.spec.direction = d;
        store.insert_run(&r, None, None).unwrap();
    }
    drop(store);
    let (code, out, err) = outcome(&wirerate(&["history", "--db", db.to_str().unwrap()]));
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].contains("direction"), "{out}");
    for (line, d) in lines[1..].iter().zip(["forward", "reverse", "bidir"]) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let at = cols
            .iter()
            .position(|c| *c == "x1")
            .expect("the test column");
        assert_eq!(cols.get(at + 1), Some(&d), "{d}: {line}");
    }
}

#[test]
fn matrix_json_validates_against_its_schema() {
    let dir = tempfile::tempdir().unwrap();
    let db = lab_db(dir.path());
    let db = db.to_str().unwrap();
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../../../schema/matrix.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    for args in [
        &["compare", "--matrix", "--json", "--db", db][..],
        &[
            "compare", "--matrix", "--period", "3m", "--json", "--db", db,
        ],
        &[
            "compare", "--matrix", "--label", "none", "--json", "--db", db,
        ],
        &["compare", "--matrix", "--since", "1h", "--json", "--db", db],
    ] {
        let (code, out, err) = outcome(&wirerate(args));
        assert_eq!(code, 0, "{args:?}: {err}");
        let doc = json_of(&out);
        let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{args:?}: {errors:#?}");
    }
    // the runs of lab_db are all alpha → beta: old at 0-121 s, new at 1100-1221 s, again at
    // 2200-2299 s; 20-minute periods ending at 2299 s hold new and again, and old before
    let (_, out, _) = outcome(&wirerate(&[
        "compare", "--matrix", "--period", "20m", "--json", "--db", db,
    ]));
    let doc = json_of(&out);
    assert_eq!(doc["runs"], 34);
    assert_eq!(doc["matrix"]["cells"].as_array().unwrap().len(), 1);
    let cell = &doc["matrix"]["cells"][0];
    assert_eq!(
        (&cell["client_host"], &cell["server_host"]),
        (&"alpha".into(), &"beta".into())
    );
    let n = |s: &str| cell[s]["n"].as_u64().unwrap_or(0);
    assert_eq!((n("current"), n("previous")), (22, 12));
    assert_eq!(
        cell["change"], "lower",
        "new (75) and again (100) against old (100)"
    );
    // the schema is strict enough to catch a broken document
    let mut bad = doc.clone();
    bad["matrix"]["cells"][0]["change"] = "faster".into();
    assert!(!validator.is_valid(&bad));
    // an empty selection says so in text
    let (code, out, _) = outcome(&wirerate(&[
        "compare", "--matrix", "--label", "none", "--db", db,
    ]));
    assert_eq!(code, 0);
    assert!(out.starts_with("no runs labelled 'none'"), "{out}");
    // the matrix does not mix with A and B, nor with the gate
    for args in [
        &["compare", "--matrix", "old", "new", "--db", db][..],
        &["compare", "--matrix", "--fail-if-slower", "5", "--db", db],
        &["compare", "old", "new", "--period", "1d", "--db", db],
        &["compare", "--matrix", "--since", "soon", "--db", db],
    ] {
        let (code, _, err) = outcome(&wirerate(args));
        assert_eq!(code, 2, "{args:?}: {err}");
    }
}

/// Issue 23, item 9: `history` and CSV had no UDP loss, jitter, duration or interrupted
/// column, rr rows showed "PI 0.00", and CSV had no rr mode.
#[test]
fn history_and_csv_carry_udp_loss_jitter_seconds_interrupted_and_rr_modes() {
    use wirerate_core::result::UdpSummary;
    use wirerate_core::spec::End;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let dbs = db.to_str().unwrap();
    let mut store = Store::open(&db).unwrap();
    let mut runs = synth::sample(0, 2, 10.0 * GBIT, GBIT, 9);
    let udp = &mut runs[0];
    udp.spec.protocol = wirerate_core::Protocol::Udp;
    udp.summary.tcp = None;
    udp.summary.seconds = 2.0;
    udp.summary.udp = Some(UdpSummary {
        packets: 1000,
        received: 995,
        lost: 5,
        loss_percent: 0.5,
        jitter_ms: Some(0.042),
        ..Default::default()
    });
    let cut = &mut runs[1];
    cut.interrupted = true;
    cut.spec.end = End::Time { seconds: 10.0 };
    cut.summary.seconds = 1.97;
    for r in &runs {
        store.insert_run(r, None, None).unwrap();
    }
    drop(store);
    // a real rr run beside them
    let rr = wirerate(&["rr", "-t", "0.3", "-i", "0", "--db", dbs]);
    assert!(rr.status.success(), "{}", text(&rr.stderr));
    let (code, out, err) = outcome(&wirerate(&["history", "--db", dbs]));
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    for h in ["loss %", "jitter ms", "seconds", "interrupted"] {
        assert!(lines[0].contains(h), "{h}: {out}");
    }
    assert!(
        lines[1].contains(" 0.500 ") && lines[1].contains(" 0.042 ") && lines[1].contains(" 2.00 "),
        "{out}"
    );
    assert!(
        lines[2].contains(" 1.97 of 10 ") && lines[2].contains(" yes "),
        "{out}"
    );
    let rr_row: Vec<&str> = lines[3].split_whitespace().collect();
    assert!(
        lines[3].contains("tr/s") && lines[3].contains("tcp_rr x1"),
        "{out}"
    );
    // id, date, time, label, tps, "tr/s", CPU, PI
    assert_eq!(rr_row[7], "-", "rr has no PI: {out}");
    assert!(!lines[3].contains("0.00 "), "{out}");
    let (_, csv, _) = outcome(&wirerate(&["history", "--csv", "--db", dbs]));
    let mut rows = csv.lines().map(|l| l.split(',').collect::<Vec<&str>>());
    let header = rows.next().unwrap();
    let rows: Vec<Vec<&str>> = rows.collect();
    let col = |r: usize, name: &str| {
        let at = header.iter().position(|h| *h == name);
        rows[r][at.unwrap_or_else(|| panic!("no column {name}: {csv}"))].to_string()
    };
    assert_eq!(col(0, "udp_loss_percent"), "0.5");
    assert_eq!(col(0, "udp_jitter_ms"), "0.042");
    assert_eq!(col(0, "seconds"), "2");
    assert_eq!(col(0, "interrupted"), "false");
    assert_eq!(col(1, "interrupted"), "true");
    assert_eq!(col(1, "asked_seconds"), "10");
    assert_eq!(col(2, "rr_mode"), "tcp_rr");
    assert_eq!(col(2, "kind"), "rr");
    assert_eq!(col(2, "pi"), "", "{csv}");
    assert_eq!(col(0, "rr_mode"), "");
}
