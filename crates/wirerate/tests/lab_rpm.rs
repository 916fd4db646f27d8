//! `wirerate rpm` on an emulated 20 Mbit/s link (needs root: run under
//! `flock /tmp/wr-netns.lock`): a deep bottleneck queue (400 ms) against a shallow one
//! (10 ms). Under load the round trips grow by about the queue's time, the RPM falls
//! several-fold, and the verdict names the queue.

mod common;

use std::time::Duration;

use common::lab::{read_json, skip_unless_root, Lab, Proc, BIN};
use serde_json::Value;

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// `wirerate rpm` from host b against a server on host a; the `rpm` section.
fn rpm_across(lab: &Lab) -> Value {
    let (srv_out, cli_out) = (lab.temp("rpm-server.log"), lab.temp("rpm-client.json"));
    let _server = Proc::spawn(&lab.exec_args("a", &[BIN, "serve", "-p", "5350"]), &srv_out);
    lab.wait_listening("a", 5350);
    let args = [
        BIN,
        "rpm",
        "10.77.0.1",
        "-p",
        "5350",
        "-t",
        "3",
        "--warmup",
        "1",
        "--json",
        "--no-store",
    ];
    let mut client = Proc::spawn(&lab.exec_args("b", &args), &cli_out);
    assert!(
        client.wait(Duration::from_secs(90)).success(),
        "wirerate rpm failed"
    );
    let doc = read_json(&cli_out);
    doc["rpm"].clone()
}

fn phase<'a>(rpm: &'a Value, name: &str) -> &'a Value {
    rpm["phases"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["phase"] == name))
        .unwrap_or_else(|| panic!("no {name} phase: {rpm}"))
}

/// Median connect time under a phase's load minus idle, ms.
fn added_ms(rpm: &Value, name: &str) -> f64 {
    f(&phase(rpm, name)["connect"]["p50_ms"]) - f(&phase(rpm, "idle")["connect"]["p50_ms"])
}

#[test]
fn lab_rpm_a_deep_queue_adds_its_time_and_cuts_rpm() {
    if skip_unless_root("lab_rpm_a_deep_queue_adds_its_time_and_cuts_rpm") {
        return;
    }
    let deep = {
        let lab = Lab::up("rd", &["--rate", "20M", "--buffer", "400ms"]);
        rpm_across(&lab)
    };
    let shallow = {
        let lab = Lab::up("rs", &["--rate", "20M", "--buffer", "10ms"]);
        rpm_across(&lab)
    };
    let (deep_ms, shallow_ms) = (added_ms(&deep, "upload"), added_ms(&shallow, "upload"));
    eprintln!(
        "added under upload: deep {deep_ms:.1} ms, shallow {shallow_ms:.1} ms; RPM deep {}, shallow {}",
        deep["rpm"], shallow["rpm"]
    );
    // the client's senders fill the 400 ms queue at its end of the link, and each probe's
    // SYN waits behind it (wide bounds: TCP keeps the queue near full, not always full). A
    // download fills the far end's queue only as fast as the client's receive window grows,
    // which a phase of a few seconds may not see through: the upload phase is the proof.
    assert!(
        (250.0..=600.0).contains(&deep_ms),
        "deep: {deep_ms} ms; {deep}"
    );
    for name in ["download", "upload", "bidir"] {
        let ms = added_ms(&shallow, name);
        assert!(ms < 60.0, "shallow {name}: {ms} ms; {shallow}");
    }
    // the loaded flows' own RTT says the same
    let rtt = f(&phase(&deep, "upload")["loaded_rtt"]["p50_ms"]);
    assert!((200.0..=700.0).contains(&rtt), "deep loaded RTT {rtt} ms");
    // RPM falls several-fold
    let (d, s) = (f(&deep["rpm"]), f(&shallow["rpm"]));
    assert!(s >= 4.0 * d, "RPM shallow {s} vs deep {d}");
    for what in ["upload", "bidir"] {
        let p = f(&phase(&deep, what)["rpm"]);
        assert!(p < 300.0, "{what} RPM {p} on a 400 ms queue");
    }
    // the verdict names the queue: about 400 ms at 20 Mbit/s, 1 MB
    let v = deep["verdict"].as_str().unwrap();
    assert!(v.contains("a queue of about"), "{v}");
    let added = f(&deep["queueing"]["added_ms"]);
    assert!(
        (250.0..=900.0).contains(&added),
        "worst phase added {added} ms"
    );
    let q = f(&deep["queueing"]["queue_bytes"]);
    assert!((400e3..=2.5e6).contains(&q), "queue {q} bytes");
    assert!(deep["advice"].is_string());
    assert!(shallow["verdict"]
        .as_str()
        .unwrap()
        .contains("responsiveness"));
}
