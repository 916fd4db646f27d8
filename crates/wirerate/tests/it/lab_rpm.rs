//! `wirerate rpm` on an emulated 20 Mbit/s link (needs root, and no other lab test at the
//! same time): a deep bottleneck queue (400 ms) against a shallow one
//! (10 ms). Under load the round trips grow by about the queue's time, the RPM falls
//! several-fold, and the verdict names the queue.

use crate::common;

use std::time::Duration;

use common::f;
use common::lab::{read_json, skip_unless_root, Lab, Proc, BIN};
use serde_json::Value;

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

/// A percentile (`p50_ms`, `p90_ms`) of the connect times under a phase's load minus the
/// idle median, ms.
fn added_ms(rpm: &Value, name: &str, pct: &str) -> f64 {
    f(&phase(rpm, name)["connect"][pct]) - f(&phase(rpm, "idle")["connect"]["p50_ms"])
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
    let (deep_ms, shallow_ms) = (
        added_ms(&deep, "upload", "p90_ms"),
        added_ms(&shallow, "upload", "p90_ms"),
    );
    eprintln!(
        "added under upload (p90): deep {deep_ms:.1} ms, shallow {shallow_ms:.1} ms; RPM deep {}, shallow {}",
        deep["rpm"], shallow["rpm"]
    );
    // the client's senders fill the 400 ms queue at its end of the link, and each probe's
    // SYN waits behind it. A tail-drop queue under TCP fills, overflows and drains again, so
    // the median moves with the phase's timing; the 90th percentile is the queue near full
    // (three runs of 5 s phases: 351-355 ms). A download fills the far end's queue only as
    // fast as the client's receive window grows: the upload phase is the proof.
    assert!(
        (250.0..=600.0).contains(&deep_ms),
        "deep: {deep_ms} ms; {deep}"
    );
    for name in ["download", "upload", "bidir"] {
        let ms = added_ms(&shallow, name, "p90_ms");
        assert!(ms < 60.0, "shallow {name}: {ms} ms; {shallow}");
    }
    // the loaded flows' own RTT says the same
    let rtt = f(&phase(&deep, "upload")["loaded_rtt"]["p99_ms"]);
    assert!(
        (200.0..=700.0).contains(&rtt),
        "deep loaded RTT p99 {rtt} ms"
    );
    // the UDP probes' one-way delays put the upload phase's queue upstream (client to
    // server): up near the queue's time, down only what the ACKs' direction adds
    let ow = &phase(&deep, "upload")["one_way"];
    let ow_idle = &phase(&deep, "idle")["one_way"];
    for name in ["idle", "download", "upload", "bidir"] {
        eprintln!("one-way, deep {name}: {}", phase(&deep, name)["one_way"]);
        eprintln!(
            "ramp-up, {name}: deep {}, shallow {}",
            phase(&deep, name)["ramp_up_s"],
            phase(&shallow, name)["ramp_up_s"]
        );
    }
    eprintln!("verdict, deep: {}", deep["verdict"]);
    let (up, down) = (f(&ow["up_p90_ms"]), f(&ow["down_p90_ms"]));
    assert!(
        (150.0..=700.0).contains(&up),
        "upload: up p90 {up} ms; {ow}"
    );
    assert!(down < 60.0, "upload: down p90 {down} ms; {ow}");
    assert!(
        f(&ow["up_p50_ms"]) >= 2.0 * f(&ow["down_p50_ms"]).max(1.0),
        "upload: {ow}"
    );
    for dir in ["up_p50_ms", "down_p50_ms"] {
        let ms = f(&ow_idle[dir]);
        assert!(ms.abs() < 20.0, "idle {dir} {ms} ms: {ow_idle}");
    }
    // the in-band request/response on the loaded flows waits behind the queue and the
    // senders' socket buffers: near full, the deep queue's time and more; never under the
    // loaded connections' own RTT, which leaves the socket buffers out
    for (lab, which) in [(&deep, "deep"), (&shallow, "shallow")] {
        for name in ["download", "upload", "bidir"] {
            let ph = phase(lab, name);
            eprintln!("in-band, {which} {name}: {}", ph["inband"]);
            let (inband, rtt) = (f(&ph["inband"]["p50_ms"]), f(&ph["loaded_rtt"]["p50_ms"]));
            assert!(
                inband >= rtt,
                "{which} {name}: in-band {inband} ms, RTT {rtt} ms"
            );
        }
    }
    let deep_in = f(&phase(&deep, "upload")["inband"]["p90_ms"]);
    assert!(
        (250.0..=1500.0).contains(&deep_in),
        "deep upload in-band p90 {deep_in} ms"
    );
    // the medians: a shallow queue's tail holds a retransmission's wait (p90 786 ms once,
    // against a p50 of 90 ms)
    let (deep_p50, shallow_p50) = (
        f(&phase(&deep, "upload")["inband"]["p50_ms"]),
        f(&phase(&shallow, "upload")["inband"]["p50_ms"]),
    );
    assert!(
        deep_p50 > shallow_p50,
        "in-band p50 deep {deep_p50}, shallow {shallow_p50}"
    );
    // RPM falls several-fold. Its self part is the in-band request/response, which counts
    // the senders' socket buffers (about 100 ms at 20 Mbit/s with the shallow queue too):
    // two runs of 5 s phases, 187-204 against 824-877 (with the TCP_INFO RTT as the self
    // part, 288-313 against 3 773-4 303)
    let (d, s) = (f(&deep["rpm"]), f(&shallow["rpm"]));
    assert!(s >= 3.0 * d, "RPM shallow {s} vs deep {d}");
    let (dv, sv) = (
        deep["verdict"].as_str().unwrap(),
        shallow["verdict"].as_str().unwrap(),
    );
    assert!(!dv.starts_with("responsiveness high"), "{dv}");
    assert!(!sv.starts_with("responsiveness low"), "{sv}");
    // the verdict names the queue, and near full it holds about the queue's time
    assert!(dv.contains("a queue of about"), "{dv}");
    let added = f(&deep["queueing"]["added_p90_ms"]);
    assert!(
        (250.0..=900.0).contains(&added),
        "worst phase p90 added {added} ms"
    );
    let q = f(&deep["queueing"]["queue_bytes"]);
    assert!((100e3..=2.5e6).contains(&q), "queue {q} bytes");
    assert!(deep["advice"].as_str().unwrap().contains("AQM"), "{deep}");
    // the bottleneck queue is the tbf on the client's own wr0 (each host shapes its egress):
    // under upload its qdisc holds a standing backlog, and the verdict puts the queue there
    let qd = &phase(&deep, "upload")["qdisc"];
    eprintln!("client qdisc, deep upload: {qd}");
    eprintln!(
        "client qdisc, shallow upload: {}",
        phase(&shallow, "upload")["qdisc"]
    );
    assert_eq!(
        (qd["interface"].as_str(), qd["kind"].as_str()),
        (Some("wr0"), Some("tbf")),
        "{qd}"
    );
    assert_eq!(qd["queued"], true, "{qd}");
    // 400 ms at 20 Mbit/s is 1 MB: half of it at least, standing
    assert!(f(&qd["median_backlog_bytes"]) >= 300e3, "{qd}");
    assert!(
        f(&qd["peak_backlog_bytes"]) >= f(&qd["median_backlog_bytes"]),
        "{qd}"
    );
    let shallow_qd = &phase(&shallow, "upload")["qdisc"];
    assert!(f(&shallow_qd["peak_backlog_bytes"]) <= 60e3, "{shallow_qd}");
    // the download's queue is the tbf on the server's wr0, toward the client: the server
    // reads it and sends it in its report
    let sq = &phase(&deep, "download")["server_qdisc"];
    eprintln!("server qdisc, deep download: {sq}");
    eprintln!(
        "server qdisc, shallow download: {}",
        phase(&shallow, "download")["server_qdisc"]
    );
    assert_eq!(
        (sq["interface"].as_str(), sq["kind"].as_str(), &sq["queued"]),
        (Some("wr0"), Some("tbf"), &Value::Bool(true)),
        "{sq}"
    );
    // the download fills it as fast as the client's window grows: four runs, 129-258 KB
    assert!(f(&sq["median_backlog_bytes"]) >= 60e3, "{sq}");
    let shallow_sq = &phase(&shallow, "download")["server_qdisc"];
    assert!(f(&shallow_sq["peak_backlog_bytes"]) <= 60e3, "{shallow_sq}");
    // the upload phase leaves the server's queue to its ACKs
    let up_sq = &phase(&deep, "upload")["server_qdisc"];
    assert!(f(&up_sq["median_backlog_bytes"]) <= 30e3, "{up_sq}");
    // the worst phase may be "both", whose queue either end's qdisc can hold
    if deep["queueing"]["phase"] != "download" {
        assert!(dv.contains("wr0's tbf qdisc"), "{dv}");
        if dv.contains("in the sending host") {
            assert!(f(&deep["queueing"]["host_queue_ms"]) >= 150.0, "{deep}");
        }
    }
}

/// Gives `host`'s tbf on `wr0` a queue of `limit` bytes, its rate and bucket kept (the lab
/// gives both ends the same queue).
fn set_queue(lab: &Lab, host: &str, limit: u64) {
    let out = lab.exec(host, &["tc", "-j", "qdisc", "show", "dev", "wr0"]);
    let now: Value = serde_json::from_slice(&out.stdout).expect("tc -j");
    let opts = &now[0]["options"];
    let (rate, burst) = (f(&opts["rate"]) * 8.0, f(&opts["burst"]));
    let args = [
        "tc",
        "qdisc",
        "replace",
        "dev",
        "wr0",
        "root",
        "tbf",
        "rate",
        &format!("{rate:.0}bit"),
        "burst",
        &format!("{burst:.0}"),
        "limit",
        &limit.to_string(),
        "overhead",
        &wirerate_lab::spec::TBF_OVERHEAD_BYTES.to_string(),
        "mpu",
        &wirerate_lab::spec::TBF_MPU_BYTES.to_string(),
    ];
    let out = lab.exec(host, &args);
    assert!(
        out.status.success(),
        "tc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn lab_rpm_a_deep_queue_at_the_server_is_named_in_its_qdisc() {
    if skip_unless_root("lab_rpm_a_deep_queue_at_the_server_is_named_in_its_qdisc") {
        return;
    }
    // 400 ms at the server's egress toward the client (host a), 10 ms (25 KB) at the
    // client's: only the download's direction queues deep
    let lab = Lab::up("rq", &["--rate", "20M", "--buffer", "400ms"]);
    set_queue(&lab, "b", 25_000);
    let r = rpm_across(&lab);
    let down = phase(&r, "download");
    eprintln!("server qdisc, download: {}", down["server_qdisc"]);
    eprintln!("client qdisc, download: {}", down["qdisc"]);
    eprintln!("one-way, download: {}", down["one_way"]);
    eprintln!("verdict: {}", r["verdict"]);
    let sq = &down["server_qdisc"];
    assert_eq!(
        (sq["interface"].as_str(), sq["kind"].as_str()),
        (Some("wr0"), Some("tbf")),
        "{sq}"
    );
    // a standing backlog at the server's egress, the client's own near empty
    assert!(f(&sq["median_backlog_bytes"]) >= 60e3, "{sq}");
    assert!(f(&down["qdisc"]["peak_backlog_bytes"]) <= 30e3, "{down}");
    // the worst phase loads the download's direction; its queue is named in the server
    let q = &r["queueing"];
    assert!(q["phase"] == "download" || q["phase"] == "bidir", "{q}");
    // two runs: 56 and 103 ms
    assert!(f(&q["server_queue_ms"]) >= 25.0, "{q}");
    let v = r["verdict"].as_str().unwrap();
    assert!(
        v.contains("in the server's qdisc, a standing backlog: wr0's tbf qdisc holds"),
        "{v}"
    );
    assert!(
        r["advice"].as_str().unwrap().contains("the server's qdisc"),
        "{r}"
    );
}
