//! `run -u --find-max` repeated on a link whose capacity is set by a shaper (`wirerate lab`,
//! tbf, at 50 and 200 Mbit/s): two searches of the same link must find the same rate within
//! 5 %. (At 1 Gbit/s a debug build's sender, on a host busy with other work, fell short of
//! 727 Mbit/s: the search then measures the sender, which is not what this checks.) The capacity
//! is the shaper's, not the host's, so this checks the search's rule, not the host's speed.
//!
//! They need root (namespaces, veth, tc) and skip with a message otherwise. Each test
//! removes its lab when it ends and ends only the processes it started, by PID. Traffic goes
//! only to addresses inside the test's own namespaces.

mod common;

use std::time::Duration;

use common::lab::{read_json, skip_unless_root, Lab, Proc, BIN};
use serde_json::Value;
use wirerate_core::wire::{model, WireParams, WireProto};

/// How closely two searches of one shaped link must agree: max ÷ min.
const AGREEMENT: f64 = 1.05;

/// One search from host b against `wirerate serve` on host a, starting from `link`.
fn search(lab: &Lab, link: &str, run: usize) -> Value {
    let (srv_out, cli_out) = (
        lab.temp(&format!("fm-server-{run}.log")),
        lab.temp(&format!("fm-client-{run}.json")),
    );
    let _server = Proc::spawn(&lab.exec_args("a", &[BIN, "serve", "-p", "5350"]), &srv_out);
    lab.wait_listening("a", 5350);
    let args = [
        BIN,
        "run",
        "10.77.0.1",
        "-p",
        "5350",
        "--json",
        "--no-store",
        "-u",
        "--find-max",
        "--link",
        link,
        // 2 s trials: a sustained excess fills the queue, a burst of the pacer does not;
        // 32 trials at most, each with its setup, stay within the limit below
        "-t",
        "2",
        "--loss",
        "0.5",
    ];
    let mut client = Proc::spawn(&lab.exec_args("b", &args), &cli_out);
    assert!(
        client.wait(Duration::from_secs(150)).success(),
        "wirerate run --find-max failed"
    );
    read_json(&cli_out)
}

/// Two searches of a link shaped to `rate_bps` agree within [`AGREEMENT`], near the model's
/// UDP goodput. The queue holds 40 ms at the link's rate: a pacer's burst after its thread
/// waited for a CPU (a host busy with other work) is queued, not lost, so a trial loses
/// only what it offered above the link, for long enough to fill the queue.
fn two_searches_agree(tag: &str, rate: &str, rate_bps: f64) {
    let queue = format!("{}K", (rate_bps * 0.040 / 8.0 / 1000.0).round());
    let lab = Lab::up(tag, &["--rate", rate, "--buffer", &queue]);
    // the search starts a fifth above the link, as a user who knows the link would ask
    let link = format!("{}M", (rate_bps * 1.2 / 1e6).round());
    let m = model(&WireParams::ethernet(rate_bps, WireProto::Udp)).unwrap();
    let mut found = Vec::new();
    for run in 0..2 {
        let doc = search(&lab, &link, run);
        let c = &doc["confidence"];
        let best = doc["max_rate_bps"].as_f64().expect("a rate passed");
        println!(
            "{rate} search {run}: {:.2} Mbit/s (model {:.2}), lowest fail {}, {} trials, \
             spread {}, grade {}, level {}",
            best / 1e6,
            m.goodput_bps / 1e6,
            c["lowest_fail_bps"],
            doc["steps"].as_array().map_or(0, Vec::len),
            c["capacity_spread"],
            c["grade"],
            c["level_percent"]
        );
        // near the wire's goodput: the queue lets a trial a little above it pass
        assert!(best <= m.goodput_bps * 1.05, "{rate}: {best}");
        assert!(best >= m.goodput_bps * 0.9, "{rate}: {best}");
        found.push(best);
    }
    let ratio = found[0].max(found[1]) / found[0].min(found[1]);
    println!("{rate}: two searches {found:?}, ratio {ratio:.4}");
    assert!(
        ratio <= AGREEMENT,
        "{rate}: {found:?} differ by {ratio:.4}×"
    );
}

#[test]
fn lab_two_udp_searches_of_a_200m_link_agree() {
    if skip_unless_root("lab_two_udp_searches_of_a_200m_link_agree") {
        return;
    }
    two_searches_agree("fa", "200M", 200e6);
}

#[test]
fn lab_two_udp_searches_of_a_50m_link_agree() {
    if skip_unless_root("lab_two_udp_searches_of_a_50m_link_agree") {
        return;
    }
    two_searches_agree("fb", "50M", 50e6);
}
