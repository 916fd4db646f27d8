//! `--format` means the same for every output of `run`: one run, repeated runs and a
//! find-max search each print in the format asked for, and a combination a format has no
//! form for is refused before any test runs.

use crate::common;

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

/// `--json-stream`, as iperf3 3.17 writes it: one JSON object a line, each an event with
/// its data; the intervals come as they happen, the end event holds the whole result.
#[test]
fn json_stream_prints_one_event_a_line() {
    let child = common::spawn_piped(&["run", "-t", "2", "--json-stream", "--no-store"]);
    let out = common::wait_bounded(child, LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let names: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    // two full intervals live, and the last, partial one the result adds
    assert_eq!(names.first(), Some(&"start"), "{text}");
    assert_eq!(names.last(), Some(&"end"), "{text}");
    let intervals = names.iter().filter(|n| **n == "interval").count();
    assert!(intervals >= 2 && intervals == names.len() - 2, "{text}");
    assert!(text.lines().all(|l| l.starts_with("{\"event\":")), "{text}");
    assert_eq!(events[0]["data"]["spec"]["interval_s"], 1.0);
    // a wirerate server counts what it receives: no interval is the sender's count
    let by_sender = &events[0]["data"]["intervals_counted_by_sender"];
    assert_eq!(by_sender.as_array().map(Vec::len), Some(0), "{by_sender}");
    assert!(events[1]["data"]["bytes"].as_u64().unwrap() > 0);
    let end = &events[events.len() - 1]["data"];
    assert!(
        end["summary"]["goodput_bps"].as_f64().unwrap() > 0.0,
        "{end}"
    );
    assert_eq!(end["intervals"].as_array().map(Vec::len), Some(intervals));
    // an error is an event too
    let out = run(&["run", "127.0.0.1", "-p", "1", "--json-stream"], LIMIT);
    assert_eq!(out.status.code(), Some(1));
    let err: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["event"], "error", "{err}");
    assert!(err["data"].as_str().unwrap().contains("127.0.0.1:1"));
}
