//! End-to-end tests of many parallel streams: past the old cap of 128, the open-file limit,
//! and the fairness summary.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::{json, run, stderr, wait_bounded};

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn three_hundred_streams_deliver_every_byte_and_report_their_fairness() {
    let out = run(&["run", "-n", "30000017", "-P", "300", "--json"], LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let j = json(&out);
    let s = &j["summary"];
    assert_eq!(s["bytes"], 30_000_017);
    assert_eq!(j["streams"].as_array().unwrap().len(), 300);
    // 300 streams of 1 MiB would pass the default buffer budget: the write size shrank
    assert_eq!(j["spec"]["len_bytes"], (256u64 << 20) / 300 / 4096 * 4096);
    let f = &s["fairness"];
    assert_eq!(f["streams"], 300);
    let jain = f["jain_index"].as_f64().unwrap();
    assert!(jain > 0.0 && jain <= 1.0, "{f}");
    let (min, median, max) = (
        f["min_bps"].as_f64().unwrap(),
        f["median_bps"].as_f64().unwrap(),
        f["max_bps"].as_f64().unwrap(),
    );
    assert!(min > 0.0 && min <= median && median <= max, "{f}");
}

#[test]
fn one_stream_has_no_fairness_and_text_names_it_for_several() {
    let out = run(&["run", "-n", "1M", "--json"], LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(json(&out)["summary"].get("fairness").is_none());
    // the short summary keeps the fairness line; -V lists the streams too
    let out = run(&["run", "-n", "8M", "-P", "4"], LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Jain's index"), "{text}");
    assert!(text.contains("over 4 streams"), "{text}");
    assert_eq!(stream_lines(&text).len(), 0, "{text}");
    let out = run(&["run", "-n", "8M", "-P", "4", "-V"], LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("over 4 streams"), "{text}");
    assert_eq!(stream_lines(&text).len(), 4, "{text}");
}

/// The summary's lines of single streams: (stream id, goodput in bit/s).
fn stream_lines(text: &str) -> Vec<(u32, f64)> {
    text.lines()
        .filter_map(|l| {
            let rest = l.trim_start().strip_prefix("stream ")?;
            let id = rest.split_whitespace().next()?.parse().ok()?;
            let mut w = rest.split_whitespace().skip(2);
            let (v, unit) = (w.next()?.parse::<f64>().ok()?, w.next()?);
            let scale = match unit {
                "Gbit/s" => 1e9,
                "Mbit/s" => 1e6,
                "kbit/s" => 1e3,
                _ => 1.0,
            };
            Some((id, v * scale))
        })
        .collect()
}

#[test]
fn a_text_summary_of_many_streams_lists_the_slowest_and_fastest_and_the_json_all() {
    let out = run(&["run", "-n", "130M", "-P", "129", "--json"], LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let j = json(&out);
    assert_eq!(j["streams"].as_array().unwrap().len(), 129);
    let out = run(&["run", "-n", "130M", "-P", "129", "-V"], LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let listed = stream_lines(&text);
    assert_eq!(listed.len(), 6, "{text}");
    // slowest first, and the three fastest after the three slowest
    assert!(
        listed.windows(2).all(|w| w[0].1 <= w[1].1 * 1.001),
        "{listed:?}"
    );
    assert!(
        text.contains(
            "above, the 3 slowest and 3 fastest of 129 streams; every stream is in the JSON"
        ),
        "{text}"
    );
    // their TCP lines are the same streams'
    let tcp: Vec<u32> = text
        .lines()
        .filter_map(|l| {
            l.trim_start()
                .strip_prefix('s')?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(
        tcp,
        listed.iter().map(|l| l.0).collect::<Vec<_>>(),
        "{text}"
    );
    // 128 streams are listed each
    let out = run(&["run", "-n", "128M", "-P", "128", "-V"], LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stream_lines(&String::from_utf8_lossy(&out.stdout)).len(),
        128
    );
}

#[test]
fn stream_caps_are_10000_for_bulk_tests_and_128_for_request_response() {
    for udp in [false, true] {
        let mut args = vec!["run", "-P", "10001", "-n", "1M"];
        if udp {
            args.push("-u");
        }
        let out = run(&args, LIMIT);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("parallel streams must be 1 to 10000"));
    }
    let out = run(&["rr", "-P", "129", "-n", "10"], LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("parallel streams must be 1 to 128"));
}

#[test]
fn a_too_low_open_file_limit_is_said_before_the_test_starts() {
    // a hard limit of 200 cannot be raised by the program: 300 streams need more
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -Sn 200 && ulimit -Hn 200 && exec "$0" run -P 300 -n 1M --no-store"#)
        .arg(common::bin())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sh");
    let out = wait_bounded(child, LIMIT);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("300 streams need about 664 open files"),
        "{err}"
    );
    assert!(err.contains("the limit is 200 (hard limit 200)"), "{err}");
    assert!(err.contains("ulimit -n 664"), "{err}");
    // nothing was measured: no header, no result
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// The client's final report lists every stream: at 1024 streams it outgrew the server's
/// frame cap for client frames, and the server ended the test.
#[test]
fn the_cap_of_1024_streams_runs_and_its_report_reaches_the_server() {
    let out = run(&["run", "-n", "64M", "-P", "1024", "--json"], LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let j = json(&out);
    assert_eq!(j["summary"]["bytes"], 64 << 20);
    assert_eq!(j["streams"].as_array().unwrap().len(), 1024);
    assert_eq!(j["summary"]["fairness"]["streams"], 1024);
}
