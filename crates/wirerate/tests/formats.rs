//! `--format` means the same for every output of `run`: one run, repeated runs and a
//! find-max search each print in the format asked for, and a combination a format has no
//! form for is refused before any test runs.

mod common;

use std::time::{Duration, Instant};

use common::{run, stderr};

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn find_max_in_ttcp_lines_is_refused_before_testing() {
    let t0 = Instant::now();
    let out = run(
        &["run", "-u", "--find-max", "--format", "ttcp", "--no-store"],
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "{:?}: a test ran",
        t0.elapsed()
    );
    let err = stderr(&out);
    assert_eq!(
        err.trim_end(),
        "wirerate: --format ttcp has no form for a find-max search (ttcp has no rate search): \
         use --format text or json"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn repeated_runs_in_ttcp_lines_are_ttcp_lines_not_json() {
    let args = [
        "run",
        "--repeat",
        "2",
        "-t",
        "0.3",
        "--format",
        "ttcp",
        "--no-store",
    ];
    let out = run(&args, LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains('{'), "JSON in ttcp output: {text}");
    // each run: the sender's and the receiver's four lines
    let senders = text
        .lines()
        .filter(|l| l.contains(" real seconds = ") && l.starts_with("ttcp-t:"));
    assert_eq!(senders.count(), 2, "{text}");
    assert!(
        text.lines()
            .all(|l| l.starts_with("ttcp-t:") || l.starts_with("ttcp-r:")),
        "{text}"
    );
}

#[test]
fn repeated_runs_in_json_are_one_array() {
    let args = [
        "run",
        "--repeat",
        "2",
        "-t",
        "0.3",
        "--format",
        "json",
        "--no-store",
    ];
    let out = run(&args, LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.as_array().map(Vec::len), Some(2));
}
