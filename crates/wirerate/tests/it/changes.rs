//! `wirerate changes` through the real binary, on a history stored by `wirerate import`: the
//! seeds' ttcp Tx regression (1110 KB/s, then 821 KB/s: 26 % slower) found at the run
//! where it began, and a flat pair beside it where nothing is found.

use crate::common;

use common::history::{
    step_started_unix_s, text, tx_history as history, wirerate, AFTER_BPS, BEFORE_BPS,
};
use serde_json::Value;

fn schema_errors(doc: &Value) -> Vec<String> {
    let schema: Value =
        serde_json::from_str(include_str!("../../../../schema/changes.schema.json")).unwrap();
    let v = jsonschema::validator_for(&schema).expect("schema compiles");
    v.iter_errors(doc).map(|e| e.to_string()).collect()
}

#[test]
fn the_ttcp_tx_regression_is_found_at_the_run_where_it_began() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let db = db.to_str().unwrap();
    let want_id = history(dir.path(), db);

    let out = wirerate(&["changes", "--label", "tx", "--json", "--db", db]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let errors = schema_errors(&doc);
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(doc["metric"], "goodput_bps");
    let series = doc["series"].as_array().unwrap();
    assert_eq!(series.len(), 2, "{doc:#}");
    let pair = |client: &str| {
        series
            .iter()
            .find(|s| s["client_host"] == client && s["server_host"] == "beta")
            .unwrap_or_else(|| panic!("no series {client} -> beta: {doc:#}"))
    };
    let tx = pair("alpha");
    assert_eq!(tx["runs"], 40);
    let changes = tx["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{tx:#}");
    let c = &changes[0];
    assert_eq!(c["run_id"], want_id, "{c:#}");
    assert_eq!(c["index"], 20);
    assert_eq!(c["started_unix_s"].as_f64().unwrap(), step_started_unix_s());
    let pct = c["change_percent"].as_f64().unwrap();
    assert!((pct + 26.0).abs() < 1.5, "{pct}");
    let (lo, hi) = (
        c["change_ci95_low_percent"].as_f64().unwrap(),
        c["change_ci95_high_percent"].as_f64().unwrap(),
    );
    assert!(lo <= pct && pct <= hi && hi < 0.0, "{lo} {pct} {hi}");
    assert!(c["p_value"].as_f64().unwrap() < 0.01);
    let before = c["median_before"].as_f64().unwrap();
    assert!((before / BEFORE_BPS - 1.0).abs() < 0.01, "{before}");
    // the level now is the median since the change
    let level = tx["level"].as_f64().unwrap();
    assert_eq!(level, c["median_after"].as_f64().unwrap());
    assert!((level / AFTER_BPS - 1.0).abs() < 0.01, "{level}");
    let flat = pair("gamma")["level"].as_f64().unwrap();
    assert!((flat / BEFORE_BPS - 1.0).abs() < 0.02, "{flat}");
    assert!(pair("gamma")["changes"].as_array().unwrap().is_empty());

    // the text: one pair, its change at that run
    let out = wirerate(&["changes", "--pair", "alpha->beta", "--db", db]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    println!("{t}");
    assert!(t.contains("1 series, 40 runs"), "{t}");
    let row = t
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{want_id} ")))
        .unwrap_or_else(|| panic!("no row for run {want_id}: {t}"));
    assert!(
        row.contains("-26.") || row.contains("-25.") || row.contains("-27."),
        "{row}"
    );
    assert!(!t.contains("gamma"), "{t}");
    // the flat pair alone: no change
    let out = wirerate(&["changes", "--from", "gamma", "--db", db]);
    assert!(
        text(&out.stdout).contains("no change in 12 runs"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn a_shared_postgresql_history_gives_the_same_changes() {
    let test = "a_shared_postgresql_history_gives_the_same_changes";
    let Some(cluster) = wirerate_testpg::Cluster::shared(test) else {
        return;
    };
    let url = cluster.fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let want_id = history(dir.path(), &url);
    let sqlite = dir.path().join("results.db");
    history(dir.path(), sqlite.to_str().unwrap());
    let changes = |db: &str| {
        let out = wirerate(&["changes", "--label", "tx", "--json", "--db", db]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        doc["series"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["client_host"].clone(), s["changes"].clone()))
            .collect::<Vec<_>>()
    };
    let pg = changes(&url);
    assert_eq!(pg[0].1[0]["run_id"], want_id, "{pg:?}");
    // the same runs stored in SQLite: the same changes, figure for figure
    assert_eq!(pg, changes(sqlite.to_str().unwrap()));
}

#[test]
fn changes_refuses_what_it_cannot_search() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let db = db.to_str().unwrap();
    history(dir.path(), db);
    for (args, code, want) in [
        (vec!["--min-runs", "2"], 2, "--min-runs"),
        (vec!["--pair", "alpha"], 2, "FROM->TO"),
        (vec!["--pair", "a->b", "--to", "c"], 2, "--to"),
        (vec!["--metric", "speed"], 2, "speed"),
        (
            vec!["--label", "nope"],
            1,
            "no runs with goodput_bps labelled 'nope'",
        ),
        (vec!["--metric", "jitter"], 1, "no runs with jitter_ms"),
    ] {
        let mut all = vec!["changes", "--db", db];
        all.extend(args.iter());
        let out = wirerate(&all);
        let e = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {e}");
        assert!(e.contains(want), "{args:?}: {e}");
        assert!(!e.contains("panicked"), "{e}");
    }
    let missing = dir.path().join("none.db");
    let out = wirerate(&["changes", "--db", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn the_schema_refuses_what_is_not_a_changes_report() {
    let good = serde_json::json!({
        "kind": "changes", "metric": "goodput_bps", "higher_is_better": true, "alpha": 0.01,
        "min_segment_runs": 3, "label": null, "client_host": null, "server_host": null,
        "series": []
    });
    assert!(schema_errors(&good).is_empty());
    for (key, bad) in [
        ("kind", serde_json::json!("pair_matrix")),
        ("metric", serde_json::json!("speed")),
        ("min_segment_runs", serde_json::json!(2)),
        ("series", serde_json::json!([{"label": null}])),
    ] {
        let mut doc = good.clone();
        doc[key] = bad;
        assert!(!schema_errors(&doc).is_empty(), "{key}");
    }
}
