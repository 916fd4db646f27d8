//! Histories that come from elsewhere: imported files with hostile text or impossible
//! figures, and large histories moved between databases through `history --json`,
//! `history --ndjson` and `history migrate`. Real SQLite files and the real binary.

use crate::common;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::outcome;
use wirerate_core::{synth, RunResult};
use wirerate_store::{RunFilter, Store, ToStore};

/// The binary with no database of its own (each test names one), bounded in time.
fn wirerate(args: &[&str]) -> Output {
    common::run_bare(args, LIMIT)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Whether the bytes hold a character a terminal acts on: C0 but line feed and tab, DEL, C1.
fn raw_control(bytes: &[u8]) -> Option<char> {
    String::from_utf8_lossy(bytes)
        .chars()
        .find(|&c| wirerate_core::text::is_control(c) && c != '\n' && c != '\t')
}

const LIMIT: Duration = Duration::from_secs(60);
const TITLE_ATTACK: &str = "\u{1b}]0;PWNED\u{7}\u{1b}[41mred\u{1b}[0m";

#[test]
fn hostile_text_of_an_imported_file_never_reaches_the_terminal_raw() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let mut r = synth::run(1, 1e9, 3);
    r.env.client.hostname = Some(format!("client{TITLE_ATTACK}"));
    r.env.server.hostname = Some("server\u{9b}31m".into());
    r.env.client.kernel = Some("6.8\u{7f}\r\n-evil".into());
    let entry = serde_json::json!({"label": "lab\u{1b}[2J", "result": r});
    let file = dir.path().join("peer.json");
    std::fs::write(&file, serde_json::to_string(&entry).unwrap()).unwrap();
    let (code, _, err) = outcome(&wirerate(&["import", s(&file), "--db", s(&db)]));
    assert_eq!(code, 0, "{err}");

    for args in [
        vec!["history", "--db", s(&db)],
        vec!["history", "--csv", "--db", s(&db)],
        vec!["show", "1", "--db", s(&db)],
        vec!["compare", "id:1", "id:1", "--db", s(&db)],
        vec!["compare", "--matrix", "--db", s(&db)],
    ] {
        let o = wirerate(&args);
        let (code, out, err) = outcome(&o);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert_eq!(raw_control(&o.stdout), None, "{args:?}: {out:?}");
        assert_eq!(raw_control(&o.stderr), None, "{args:?}: {err:?}");
        if args[1] != "id:1" {
            assert!(out.contains("\\x1b]0;PWNED\\x07"), "{args:?}: {out}");
        }
    }
    let show = outcome(&wirerate(&["show", "1", "--db", s(&db)])).1;
    assert!(show.contains("server\\u009b31m"), "{show}");
    assert!(show.contains("6.8\\u007f\\x0d\\x0a-evil"), "{show}");
    // the JSON outputs keep the text as it was stored
    for args in [
        vec!["show", "1", "--json", "--db", s(&db)],
        vec!["history", "--json", "--db", s(&db)],
    ] {
        let o = wirerate(&args);
        assert_eq!(raw_control(&o.stdout), None, "{args:?}");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let doc = v.get(0).map_or(&v, |e| &e["result"]);
        assert_eq!(doc["env"]["server"]["hostname"], "server\u{9b}31m");
        assert_eq!(
            doc["env"]["client"]["hostname"],
            format!("client{TITLE_ATTACK}")
        );
    }
}

#[test]
fn import_refuses_unbounded_fields_with_one_line_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let good = synth::run(1, 1e9, 3);
    let mut jitter = good.clone();
    jitter.summary.udp = Some(wirerate_core::result::UdpSummary {
        jitter_ms: Some(1e300),
        ..Default::default()
    });
    let mut host = good.clone();
    host.env.server.hostname = Some("h".repeat(10 << 20));
    let mut cpu = good.clone();
    cpu.summary.cpu.remote.as_mut().unwrap().steal_percent = Some(400.0);
    let cases: [(&RunResult, &str); 3] = [
        (
            &jitter,
            "summary.udp.jitter_ms: 1e+300 is outside 0 to 1e12",
        ),
        (&host, "env.server.hostname: 10485760 bytes of text"),
        (&cpu, "summary.cpu.remote.steal_percent: 400"),
    ];
    for (bad, field) in cases {
        // the bad run second: nothing of the file is stored
        let file = dir.path().join("bad.json");
        std::fs::write(&file, serde_json::to_string(&[&good, bad]).unwrap()).unwrap();
        let (code, out, err) = outcome(&wirerate(&["import", s(&file), "--db", s(&db)]));
        assert_eq!(code, 1, "{out}{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.len() < 300, "{err}");
        assert!(err.contains(&format!("run 2: {field}")), "{err}");
    }
    let label = serde_json::json!({"label": "x".repeat(300), "result": good});
    let file = dir.path().join("label.json");
    std::fs::write(&file, label.to_string()).unwrap();
    let (code, _, err) = outcome(&wirerate(&["import", s(&file), "--db", s(&db)]));
    assert_eq!(code, 1);
    assert!(err.contains("run 1: label: longer than 256 bytes"), "{err}");
    assert!(
        !db.exists()
            || Store::open(&db)
                .unwrap()
                .list_rows(&RunFilter::default())
                .unwrap()
                .is_empty()
    );
}

/// A history of `n` synthetic runs, labelled by tens, stored in one transaction.
fn history_of(path: &Path, n: u64) -> Vec<RunResult> {
    let runs: Vec<RunResult> = synth::sample(0, n, 10e9, 1e9, 7);
    let labels: Vec<String> = (0..n).map(|i| format!("set{}", i / 10)).collect();
    let batch: Vec<ToStore<'_>> = runs
        .iter()
        .zip(&labels)
        .map(|(r, l)| ToStore {
            result: r,
            label: Some(l),
            group: Some(l),
        })
        .collect();
    let mut store = Store::open(path).unwrap();
    let stored = store.store_runs(&batch).unwrap();
    assert!(stored.iter().all(|s| s.new));
    drop(batch);
    runs
}

/// (run key, label, group) of every run, in storing order.
fn keys(path: &Path) -> Vec<(String, Option<String>, Option<String>)> {
    Store::open_existing(path)
        .unwrap()
        .list_rows(&RunFilter::default())
        .unwrap()
        .into_iter()
        .map(|r| (r.run_key, r.label, r.group))
        .collect()
}

#[test]
fn a_history_of_thousands_of_runs_moves_through_both_exports() {
    const RUNS: u64 = 2000;
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.db");
    history_of(&a, RUNS);
    let want = keys(&a);

    let nd = dir.path().join("a.ndjson");
    let o = wirerate(&["history", "--ndjson", "--db", s(&a)]);
    assert_eq!(outcome(&o).0, 0);
    std::fs::write(&nd, &o.stdout).unwrap();
    let lines: Vec<&[u8]> = o
        .stdout
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(lines.len() as u64, RUNS);
    for l in [lines[0], lines[lines.len() - 1]] {
        let v: serde_json::Value = serde_json::from_slice(l).unwrap();
        assert!(v["result"]["summary"]["goodput_bps"].is_number());
    }

    let js = dir.path().join("a.json");
    let o = wirerate(&["history", "--json", "--db", s(&a)]);
    assert_eq!(outcome(&o).0, 0);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len() as u64, RUNS);
    std::fs::write(&js, &o.stdout).unwrap();

    for (name, file) in [("b.db", &nd), ("c.db", &js)] {
        let db = dir.path().join(name);
        let (code, out, err) = outcome(&wirerate(&["import", s(file), "--db", s(&db)]));
        assert_eq!(code, 0, "{err}");
        assert!(out.starts_with(&format!("stored {RUNS} runs in ")), "{out}");
        assert_eq!(keys(&db), want, "{name}");
    }
    // a second import finds every run stored
    let b = dir.path().join("b.db");
    let (code, out, _) = outcome(&wirerate(&["import", s(&nd), "--db", s(&b)]));
    assert_eq!(code, 0);
    assert!(out.contains("stored 0 runs in "), "{out}");
    assert!(out.contains(&format!("({RUNS} already there)")), "{out}");

    // or database to database
    let d = dir.path().join("d.db");
    for said in [
        format!("copied {RUNS} runs from "),
        format!("({RUNS} already there)"),
    ] {
        let (code, out, err) = outcome(&wirerate(&[
            "history",
            "migrate",
            "--db",
            s(&a),
            "--to",
            s(&d),
        ]));
        assert_eq!(code, 0, "{err}");
        assert!(out.contains(&said), "{out}");
        assert_eq!(keys(&d), want);
    }

    // a limit and a label export the newest runs, oldest first
    let o = wirerate(&["history", "--ndjson", "--limit", "25", "--db", s(&a)]);
    let ids: Vec<i64> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(ids, ((RUNS as i64 - 24)..=RUNS as i64).collect::<Vec<_>>());
    let o = wirerate(&["history", "--json", "--label", "set7", "--db", s(&a)]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ids: Vec<i64> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, (71..=80).collect::<Vec<_>>());
    let o = wirerate(&["history", "--json", "--label", "none", "--db", s(&a)]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "[]\n");
}
