//! The counting window end to end over loopback: with and without a warm-up (`-O`), a
//! receiver never counts more than its sender, the counted intervals add up to the summary
//! (bytes and seconds), I/O calls are those of the window, and no interval is a tail.

use crate::common;

use std::time::Duration;

use common::{f, json, run, stderr, u};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(60);

/// `args` (a command first) with `--json --no-store`.
fn run_json(args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend_from_slice(&["--json", "--no-store"]);
    let out = run(&a, LIMIT);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    json(&out)
}

/// The intervals of one flow (and stream: None for the flow's sum), warm-up ones left out.
fn counted<'a>(j: &'a Value, flow: &str, stream: Option<u64>) -> Vec<&'a Value> {
    j["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["flow"] == flow && i["stream"].as_u64() == stream)
        .filter(|i| i["omitted"] == false)
        .collect()
}

fn span(i: &Value) -> f64 {
    f(&i["end_s"]) - f(&i["start_s"])
}

/// Every check of one run: `args` after `run`.
fn check(args: &[&str]) {
    let mut a = vec!["run"];
    a.extend_from_slice(args);
    let j = run_json(&a);
    let s = &j["summary"];
    let ctx = format!("{args:?}");
    let streams = j["streams"].as_array().unwrap();
    // received <= sent, stream by stream and in the summary
    for st in streams {
        let (rx, tx) = (
            u(&st["receiver"]["counted_bytes"]),
            u(&st["sender"]["counted_bytes"]),
        );
        assert!(rx <= tx, "{ctx}: stream received {rx} > sent {tx}");
        assert!(rx > 0, "{ctx}: {st}");
    }
    assert!(u(&s["bytes"]) <= u(&s["sender_bytes"]), "{ctx}: {s}");
    // the flows' counted intervals add up to their summary
    let flows: Vec<(String, u64, f64)> = match s["flows"].as_array().filter(|f| !f.is_empty()) {
        Some(fl) => fl
            .iter()
            .map(|x| {
                (
                    x["flow"].as_str().unwrap().to_string(),
                    u(&x["bytes"]),
                    f(&x["seconds"]),
                )
            })
            .collect(),
        None => {
            let flow = streams[0]["flow"].as_str().unwrap().to_string();
            vec![(flow, u(&s["bytes"]), f(&s["seconds"]))]
        }
    };
    for (flow, bytes, seconds) in &flows {
        let ivs = counted(&j, flow, None);
        assert!(ivs.len() >= 2, "{ctx}: {ivs:?}");
        let sum: u64 = ivs.iter().map(|i| u(&i["bytes"])).sum();
        let secs: f64 = ivs.iter().map(|i| span(i)).sum();
        assert_eq!(sum, *bytes, "{ctx}: {flow} intervals {ivs:?}");
        assert!(
            (secs - seconds).abs() < 1e-6,
            "{ctx}: {flow} {secs} s of intervals, {seconds} s"
        );
        // one after the other, no gap
        for w in ivs.windows(2) {
            assert!(
                (f(&w[0]["end_s"]) - f(&w[1]["start_s"])).abs() < 1e-9,
                "{ctx}: {w:?}"
            );
        }
    }
    // each stream's own intervals add up to its count
    for st in streams {
        let ivs = counted(&j, st["flow"].as_str().unwrap(), st["id"].as_u64());
        if !ivs.is_empty() {
            let sum: u64 = ivs.iter().map(|i| u(&i["bytes"])).sum();
            assert_eq!(
                sum,
                u(&st["receiver"]["counted_bytes"]),
                "{ctx}: stream {st}"
            );
        }
    }
    // I/O calls are those of the window, over its seconds
    for (side, seconds) in [
        ("sender", f(&s["sender_seconds"])),
        ("receiver", f(&s["seconds"])),
    ] {
        let io = &s["io"][side];
        let calls: u64 = streams.iter().map(|st| u(&st[side]["counted_calls"])).sum();
        let all: u64 = streams.iter().map(|st| u(&st[side]["calls"])).sum();
        assert_eq!(u(&io["calls"]), calls, "{ctx}: {io}");
        let bytes: u64 = streams.iter().map(|st| u(&st[side]["counted_bytes"])).sum();
        assert_eq!(u(&io["bytes"]), bytes, "{ctx}: {io}");
        let rate = calls as f64 / seconds;
        assert!(
            (f(&io["calls_per_s"]) - rate).abs() <= 1e-6 * rate,
            "{ctx}: {io}"
        );
        let warm_up = args.contains(&"-O");
        assert!(
            if warm_up { calls < all } else { calls == all },
            "{ctx}: {calls} of {all}"
        );
    }
    no_tails(&j, &ctx);
}

/// No interval is shorter than a tenth of the interval period.
fn no_tails(j: &Value, ctx: &str) {
    let period = f(&j["spec"]["interval_s"]);
    for i in j["intervals"].as_array().unwrap() {
        assert!(span(i) >= 0.1 * period, "{ctx}: a tail {i}");
    }
}

#[test]
fn a_warm_up_leaves_received_within_sent_and_intervals_adding_up() {
    check(&["-t", "2", "-O", "1"]);
    check(&["-t", "2", "-O", "1", "-R"]);
}

#[test]
fn without_a_warm_up_the_window_is_the_whole_test() {
    check(&["-t", "1.5"]);
}

#[test]
fn many_streams_and_both_directions_share_the_rule() {
    check(&["-t", "1.5", "-O", "0.5", "-P", "2"]);
    check(&["-t", "1.5", "-O", "0.5", "--bidir"]);
    check(&["-t", "1.5", "-O", "0.5", "-P", "64"]);
}

#[test]
fn udp_receivers_count_only_datagrams_sent_in_the_window() {
    check(&["-u", "-b", "200M", "-t", "1.5", "-O", "0.5"]);
    check(&[
        "-u", "-b", "200M", "-t", "1.5", "-O", "0.5", "-P", "2", "-R",
    ]);
}

#[test]
fn rr_intervals_have_no_tail() {
    for args in [["-t", "1.5", "-i", "0.5"], ["-t", "1", "-i", "1"]] {
        let mut a = vec!["rr"];
        a.extend_from_slice(&args);
        let j = run_json(&a);
        no_tails(&j, &format!("{args:?}"));
        // folded, not dropped: the intervals hold every transaction
        let sum: u64 = j["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| u(&i["rr"]["transactions"]))
            .sum();
        let total = u(&j["summary"]["rr"]["transactions"]);
        assert_eq!(sum, total, "{args:?}");
    }
}
