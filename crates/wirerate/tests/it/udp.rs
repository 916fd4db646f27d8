//! End-to-end UDP tests over loopback: pacing, loss attribution, forged datagrams.

use crate::common;

use std::net::UdpSocket;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{json, run, stderr, wait_bounded, ServerProc};

const LIMIT: Duration = Duration::from_secs(30);

#[test]
fn paced_rate_holds_its_target() {
    let out = run(
        &["run", "-u", "-b", "40M", "-l", "1400", "-t", "2", "--json"],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let j = json(&out);
    let s = &j["summary"];
    let sent = s["sender_bps"].as_f64().unwrap();
    // the goal is ±1 %; a loaded test machine gets a little more slack
    assert!((sent / 40e6 - 1.0).abs() < 0.03, "sender at {sent} bit/s");
    let u = &s["udp"];
    assert_eq!(u["target_bps"], 40e6);
    // 7 143 datagrams at the asked rate; the same slack as the rate's above
    assert!(u["packets"].as_u64().unwrap() > 6900, "{u}");
    let loss = u["loss_percent"].as_f64().unwrap();
    assert!((0.0..=100.0).contains(&loss));
    assert!(u["jitter_ms"].as_f64().is_some());
    // 40 Mbit/s of 1400-byte datagrams is 3571 datagrams per second
    let pps = u["sent_pps"].as_f64().unwrap();
    assert!((pps / 3571.4 - 1.0).abs() < 0.03, "sent {pps} datagrams/s");
    let rx_pps = u["received_pps"].as_f64().unwrap();
    let rx = u["received"].as_f64().unwrap();
    let secs = s["seconds"].as_f64().unwrap();
    assert!(
        (rx_pps * secs - rx).abs() < 1.0,
        "{rx_pps} × {secs} s vs {rx}"
    );
    for iv in j["intervals"].as_array().unwrap() {
        let l = iv["loss_percent"].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&l), "{iv}");
    }
}

#[test]
fn reverse_bidir_and_parallel_udp() {
    let out = run(
        &[
            "run", "-u", "-b", "10M", "-R", "-P", "2", "-t", "1", "--json",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let j = json(&out);
    assert_eq!(j["streams"].as_array().unwrap().len(), 2);
    assert_eq!(j["streams"][0]["flow"], "server_to_client");
    assert!(j["summary"]["goodput_bps"].as_f64().unwrap() > 15e6);

    let out = run(
        &["run", "-u", "-b", "10M", "--bidir", "-t", "1", "--json"],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let j = json(&out);
    assert_eq!(j["summary"]["flows"].as_array().unwrap().len(), 2);
}

#[test]
fn a_tiny_receive_buffer_loses_in_the_receiver_and_says_so() {
    let out = run(
        &[
            "run", "-u", "-b", "0", "-l", "8K", "-w", "16K", "-t", "1", "--json",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let u = json(&out)["summary"]["udp"].clone();
    let lost = u["lost"].as_u64().unwrap();
    assert!(lost > 0, "{u}");
    assert!(
        u["loss_location"].as_str().unwrap().starts_with("receiver"),
        "{u}"
    );
    assert!(u["lost_in_receiver"].as_u64().unwrap() > 0);
    assert!(u["socket_drops"].as_u64().unwrap() > 0);
    let pct = u["loss_percent"].as_f64().unwrap();
    assert!(pct > 0.0 && pct <= 100.0);
}

#[test]
fn exact_byte_count_arrives_without_loss_at_a_low_rate() {
    let out = run(
        &[
            "run", "-u", "-b", "20M", "-l", "1000", "-n", "500000", "--json",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let s = &json(&out)["summary"];
    assert_eq!(s["udp"]["packets"], 500);
    assert_eq!(s["udp"]["received"], 500);
    assert_eq!(s["bytes"], 500_000);
}

/// Local UDP ports of the sockets a process holds, from /proc.
fn udp_ports_of(pid: u32) -> Vec<u16> {
    let mut inodes = Vec::new();
    if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
        for e in rd.flatten() {
            if let Ok(l) = std::fs::read_link(e.path()) {
                let l = l.to_string_lossy().to_string();
                if let Some(i) = l.strip_prefix("socket:[").and_then(|x| x.strip_suffix(']')) {
                    inodes.push(i.to_string());
                }
            }
        }
    }
    let table = std::fs::read_to_string("/proc/net/udp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let inode = f.get(9)?;
            let port = f.get(1)?.split(':').nth(1)?;
            inodes
                .contains(&inode.to_string())
                .then(|| u16::from_str_radix(port, 16).ok())?
        })
        .collect()
}

#[test]
fn forged_datagrams_are_counted_and_dropped() {
    let srv = ServerProc::start(&[]);
    let p = srv.port.to_string();
    let client = common::wr()
        .args([
            "run",
            "127.0.0.1",
            "-p",
            &p,
            "-u",
            "-b",
            "5M",
            "-t",
            "2",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = srv.child.id();
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut ports = Vec::new();
    while ports.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        ports = udp_ports_of(pid);
    }
    assert!(!ports.is_empty(), "server opened no UDP socket");
    std::thread::sleep(Duration::from_millis(300));
    let forger = UdpSocket::bind("127.0.0.1:0").unwrap();
    // right magic and stream, wrong token; then plain junk
    let mut fake = vec![0u8; 100];
    fake[..4].copy_from_slice(b"Wd\x01\x00");
    for _ in 0..20 {
        for &port in &ports {
            let _ = forger.send_to(&fake, ("127.0.0.1", port));
            let _ = forger.send_to(b"junk", ("127.0.0.1", port));
        }
    }
    let out = wait_bounded(client, LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let u = json(&out)["summary"]["udp"].clone();
    assert!(u["foreign_datagrams"].as_u64().unwrap() >= 40, "{u}");
    assert_eq!(u["duplicates"], 0);
    assert_eq!(u["lost"], 0, "{u}");
}

#[test]
fn udp_flags_are_checked() {
    for args in [
        vec!["run", "-u", "-l", "20"],
        vec!["run", "-u", "-l", "70000"],
        // (-b without -u paces TCP: habits.rs)
        vec!["run", "-b", "10Q"],
        vec!["run", "-u", "-b", "fast"],
        // one 65 000-byte datagram takes 2.6 s at 200 kbit/s: a 2 s test would send nothing
        vec!["run", "-u", "-b", "200K", "-l", "65000", "-t", "2"],
    ] {
        let out = run(&args, LIMIT);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn find_max_reports_its_steps_and_a_rate_that_passed() {
    // a stated link bounds the search, and short trials keep it quick
    let out = run(
        &[
            "run",
            "-u",
            "--find-max",
            "--link",
            "200M",
            "-t",
            "0.3",
            "-l",
            "1400",
            "--json",
        ],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let j = json(&out);
    assert_eq!(j["kind"], "find_max");
    let steps = j["steps"].as_array().unwrap();
    assert!(!steps.is_empty());
    assert_eq!(steps[0]["offered_bps"], 200e6);
    let best = j["max_rate_bps"].as_f64().unwrap();
    // the best rate is one that was tried and passed
    assert!(steps
        .iter()
        .any(|s| s["pass"] == true && s["offered_bps"].as_f64() == Some(best)));
    for s in steps {
        let l = s["loss_percent"].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&l));
        assert_eq!(s["pass"] == true, l <= 0.1, "{s}");
    }
}

/// One offered rate's trials in a find-max search: passed (and the sender reached the
/// rate), failed (or fell more than 20 % short of it), and every trial's loss.
type RateTrials = (f64, usize, usize, Vec<f64>);

/// A search's steps recounted by offered rate, checking each step's own verdict.
fn trials_by_rate(steps: &[serde_json::Value], limit: f64) -> Vec<RateTrials> {
    let mut rates: Vec<RateTrials> = Vec::new();
    for s in steps {
        let offered = s["offered_bps"]
            .as_f64()
            .expect("paced: the link tops the search");
        let loss = s["loss_percent"].as_f64().unwrap();
        assert_eq!(s["pass"] == true, loss <= limit, "{s}");
        let reached = s["sent_bps"].as_f64().is_some_and(|x| x >= 0.8 * offered);
        let i = match rates.iter().position(|r| r.0 == offered) {
            Some(i) => i,
            None => {
                assert_eq!(s["phase"], "search", "a rate's first trial: {s}");
                rates.push((offered, 0, 0, Vec::new()));
                rates.len() - 1
            }
        };
        let r = &mut rates[i];
        if loss <= limit && reached {
            r.1 += 1;
        } else {
            r.2 += 1;
        }
        r.3.push(loss);
        assert!(r.1 + r.2 <= 5, "more than five trials at {offered}: {r:?}");
    }
    rates
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The sign test: one less the chance of at least `k` of `n` agreeing by a coin's toss.
fn sign(k: usize, n: usize) -> f64 {
    let choose = |n: usize, k: usize| (0..k).fold(1.0, |c, i| c * (n - i) as f64 / (i + 1) as f64);
    1.0 - (k..=n).map(|i| choose(n, i)).sum::<f64>() / 2f64.powi(n as i32)
}

/// Near loopback's limit one trial passes or fails by chance, and a search that believed
/// each trial ended anywhere (two searches found 35.07 and 18.86 Gbit/s). Each rate is now
/// judged by the median loss of its trials: the result's fields must agree with its trials,
/// recounted here from the steps.
#[test]
fn find_max_judges_each_rate_by_the_median_of_its_trials() {
    let limit = 0.1;
    let out = run(
        &[
            "run",
            "-u",
            "--find-max",
            "--link",
            "4G",
            "-t",
            "0.2",
            "-l",
            "1400",
            "--json",
            "--no-store",
        ],
        Duration::from_secs(120),
    );
    assert!(
        out.status.success() || out.status.code() == Some(1),
        "{}",
        stderr(&out)
    );
    let doc = json(&out);
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../../../schema/find-max.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    assert!(validator.is_valid(&doc), "{doc}");
    let steps = doc["steps"].as_array().unwrap();
    assert!(steps.len() <= 32, "{} trials", steps.len());
    let rates = trials_by_rate(steps, limit);
    let c = &doc["confidence"];
    let Some(found) = doc["max_rate_bps"].as_f64() else {
        assert_eq!(out.status.code(), Some(1));
        return;
    };
    // the rate found passed by most of its trials, and is the highest rate that did
    let at = rates.iter().find(|r| r.0 == found).expect("a rate tried");
    assert!(at.1 > at.2 && at.1 >= 2, "{at:?}");
    assert_eq!(c["trials"].as_u64().unwrap() as usize, at.1 + at.2);
    assert_eq!(c["passed"].as_u64().unwrap() as usize, at.1);
    let median_loss = c["loss_median_percent"].as_f64().unwrap();
    assert!((median_loss - median(&at.3)).abs() < 1e-9, "{c}");
    assert!(
        !rates.iter().any(|r| r.0 > found && r.1 > r.2 && r.1 >= 2),
        "{rates:?}"
    );
    let mut level = sign(at.1, at.1 + at.2);
    if let Some(fail) = c["lowest_fail_bps"].as_f64() {
        assert!(fail > found, "{c}");
        assert!(
            (fail - found) / fail <= 0.01 || c["confirmed"] == false,
            "{c}"
        );
        let f = rates.iter().find(|r| r.0 == fail).expect("a rate tried");
        assert_eq!(c["fail_trials"].as_u64().unwrap() as usize, f.1 + f.2);
        assert_eq!(c["fail_failed"].as_u64().unwrap() as usize, f.2);
        // failed by most of its trials (a trial whose sender fell short of it failed)
        assert!(f.2 > f.1, "{f:?}");
        // no rate between the two passed
        assert!(!rates
            .iter()
            .any(|r| r.0 > found && r.0 < fail && r.1 > r.2 && r.1 >= 2));
        level *= sign(f.2, f.1 + f.2);
    }
    let got = c["level_percent"].as_f64().unwrap();
    assert!(
        (got - level * 100.0).abs() < 1e-6,
        "{got} against {level}: {c}"
    );
    if c["confirmed"] == true {
        // a search that ended by its rule ended on the rate found
        assert_eq!(steps.last().unwrap()["offered_bps"].as_f64(), Some(found));
    }
}

#[test]
fn find_max_needs_udp() {
    let out = run(&["run", "--find-max"], LIMIT);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("-u"));
}

#[test]
fn unpaced_small_datagrams_report_packets_per_second() {
    let out = run(
        &["run", "-u", "-b", "0", "-l", "64", "-t", "1", "--json"],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let j = json(&out);
    let s = &j["summary"];
    let u = &s["udp"];
    let sent = u["packets"].as_f64().unwrap();
    let received = u["received"].as_f64().unwrap();
    assert!(received > 0.0 && received <= sent, "{u}");
    let sent_pps = u["sent_pps"].as_f64().unwrap();
    let sender_s = s["sender_seconds"].as_f64().unwrap();
    assert!((sent_pps * sender_s - sent).abs() < 1.0, "{u}");
    assert!(u["received_pps"].as_f64().unwrap() > 0.0);
    // every datagram is 64 bytes, so the byte count is the datagram count × 64
    assert_eq!(s["bytes"].as_f64().unwrap(), received * 64.0);

    let out = run(
        &["run", "-u", "-b", "0", "-l", "64", "-t", "1", "-V"],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("UDP packets/s"), "{text}");
    assert!(text.contains("pps sent,"), "{text}");
}

/// A find-max search used to be printed and forgotten, `--label` and all, and its "offered"
/// was only the target: now every trial is a stored run under the search's group and label,
/// and offered and sent are reported apart.
#[test]
fn find_max_stores_its_trials_with_the_label_and_reports_offered_and_sent() {
    let db = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("findmax-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&db);
    let db_s = db.to_str().unwrap();
    // a link of 40 Mbit/s tops the search: loopback carries it, so the top passes its two
    // trials, and the search ends there
    let out = run(
        &[
            "run",
            "-u",
            "--find-max",
            "--link",
            "40M",
            "-l",
            "1400",
            "-t",
            "0.4",
            "--label",
            "fm-it",
            "--db",
            db_s,
            "--json",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = json(&out);
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../../../schema/find-max.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "find-max JSON breaks its schema: {errors:?}\n{doc}"
    );
    assert_eq!(doc["kind"], "find_max");
    assert!(
        doc["group"].as_str().unwrap().starts_with("find-max-"),
        "{doc}"
    );
    assert_eq!(doc["label"], "fm-it");
    let group = doc["group"].as_str().expect("a group").to_string();
    let steps = doc["steps"].as_array().unwrap();
    let ids: Vec<i64> = doc["step_run_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().expect("every trial stored"))
        .collect();
    assert!(steps.len() >= 2, "{doc}");
    assert_eq!(ids.len(), steps.len());
    for s in steps {
        let offered = s["offered_bps"].as_f64().unwrap();
        let sent = s["sent_bps"].as_f64().unwrap();
        assert!(offered > 0.0 && offered <= 40e6, "{s}");
        // paced: the sender put out close to what was asked, and it is its own figure
        assert!((sent / offered - 1.0).abs() < 0.2, "{s}");
        assert_ne!(sent, offered, "{s}");
    }
    // each rate is judged by the median of two or three trials
    let repeats = steps.iter().filter(|s| s["phase"] == "repeat").count();
    assert!(repeats >= 1, "{doc}");
    let c = &doc["confidence"];
    assert!(c["trials"].as_u64().unwrap() >= 2, "{c}");
    assert!(c["passed"].as_u64().unwrap() <= c["trials"].as_u64().unwrap());
    if c["confirmed"] == true {
        assert!(
            c["passed"].as_u64().unwrap() * 2 > c["trials"].as_u64().unwrap(),
            "{c}"
        );
    }
    // history lists exactly the search's trials under its label, in its group
    let h = run(
        &["history", "--db", db_s, "--label", "fm-it", "--json"],
        LIMIT,
    );
    assert!(h.status.success(), "{}", stderr(&h));
    let rows = json(&h);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), steps.len());
    for (row, (id, step)) in rows.iter().zip(ids.iter().zip(steps)) {
        assert_eq!(row["id"].as_i64(), Some(*id));
        assert_eq!(row["group"], group.as_str());
        assert_eq!(row["result"]["spec"]["rate_bps"], step["offered_bps"]);
    }
    let h = run(&["history", "--db", db_s, "--group", &group], LIMIT);
    let listed = String::from_utf8_lossy(&h.stdout);
    assert_eq!(listed.matches("fm-it").count(), steps.len(), "{listed}");
    // compare takes a search by its trials at the rate found, not by every rate it tried
    let c = run(
        &["compare", "--db", db_s, "fm-it", "fm-it", "--json"],
        LIMIT,
    );
    assert!(c.status.success(), "{}", stderr(&c));
    let c = json(&c);
    let last = steps.last().unwrap()["offered_bps"].clone();
    let at_found = steps.iter().filter(|s| s["offered_bps"] == last).count();
    assert_eq!(c["a"]["runs"], at_found, "{c}");
    let source = c["a"]["source"].as_str().unwrap();
    assert!(source.contains("1 find-max search"), "{source}");
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{db_s}{ext}"));
    }
}

/// The default datagram fits the rate as well as the path: over loopback (65 507 bytes) a
/// 2 s test at 200 kbit/s sent nothing, one at 10 kbit/s ran 52 s, and one at the default
/// 1 Mbit/s sent 3 datagrams.
#[test]
fn slow_udp_tests_send_at_their_rate_and_end_on_time() {
    for (rate, bps, at_least) in [
        (Some("200K"), 200e3, 180),
        (Some("10K"), 10e3, 30),
        (None, 1e6, 180),
    ] {
        let mut args = vec!["run", "-u", "-t", "2", "-i", "0", "--json"];
        if let Some(r) = rate {
            args.extend(["-b", r]);
        }
        let t0 = Instant::now();
        let out = run(&args, LIMIT);
        let took = t0.elapsed();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert!(took < Duration::from_secs(6), "{args:?} took {took:?}");
        let j = json(&out);
        let spec = &j["spec"];
        assert_eq!(spec["datagram"]["rule"], "rate", "{spec}");
        assert!(
            spec["len_bytes"].as_u64().unwrap() < spec["datagram"]["path_bytes"].as_u64().unwrap()
        );
        let s = &j["summary"];
        let sent = s["sender_bps"].as_f64().unwrap();
        assert!(
            (sent / bps - 1.0).abs() < 0.1,
            "{args:?}: sender at {sent} bit/s"
        );
        let packets = s["udp"]["packets"].as_u64().unwrap();
        assert!(packets >= at_least, "{args:?}: {packets} datagrams");
        let secs = s["seconds"].as_f64().unwrap();
        assert!((1.8..2.5).contains(&secs), "{args:?}: {secs} s");
    }
}

/// A datagram given with -l is sent as given, and the spec says no rule chose it.
#[test]
fn a_given_datagram_is_sent_as_given() {
    let out = run(
        &[
            "run", "-u", "-b", "1M", "-l", "8000", "-t", "1", "-i", "0", "--json",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let spec = &json(&out)["spec"];
    assert_eq!(spec["len_bytes"], 8000);
    assert!(spec.get("datagram").is_none(), "{spec}");
}

#[test]
fn the_header_says_which_datagram_and_why() {
    let out = run(&["run", "-u", "-b", "200K", "-t", "1", "-i", "0"], LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("250 B datagrams (default: 1/100 s of the rate, 64 B at least; the path carries 65507 B)"),
        "{text}"
    );
}

/// Issue 23, item 7: UDP interval lines had Lost/Total but no Jitter, as iperf3's have.
/// Each interval now carries the receiver's jitter where it ends, and the last one is the
/// summary's.
#[test]
fn udp_intervals_carry_the_receivers_jitter() {
    let out = run(
        &[
            "run",
            "-u",
            "-b",
            "20M",
            "-t",
            "2",
            "-i",
            "0.5",
            "--json",
            "--no-store",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let j = json(&out);
    let ivs = j["intervals"].as_array().unwrap();
    assert!(ivs.len() >= 3, "{ivs:?}");
    for iv in ivs {
        let jm = iv["jitter_ms"].as_f64().unwrap_or_else(|| panic!("{iv}"));
        assert!((0.0..1000.0).contains(&jm), "{iv}");
    }
    let last = ivs.last().unwrap()["jitter_ms"].as_f64().unwrap();
    let total = j["summary"]["udp"]["jitter_ms"].as_f64().unwrap();
    assert!(
        (last - total).abs() <= 1e-3 + total * 0.01,
        "{last} against {total}"
    );
    let out = run(
        &[
            "run",
            "-u",
            "-b",
            "20M",
            "-t",
            "1",
            "-i",
            "0.5",
            "--no-store",
        ],
        LIMIT,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let header = text.lines().nth(1).unwrap();
    assert!(
        header.contains("Jitter") && header.contains("Lost/Total"),
        "{text}"
    );
    let line = text.lines().nth(2).unwrap();
    assert!(line.contains(" ms ") && line.ends_with("%)"), "{line}");
}
