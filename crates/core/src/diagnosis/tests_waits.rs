//! Where each end waited, two ends taking turns on one host, the host's CPU named as the
//! host's (never as one end's), and other traffic on the test's interface: each scenario
//! is a table of figures measured on a 2-core VM (docs/diagnosis.md) or reported from one.

use super::tests::{has_candidate, sender, side, tcp_run};
use super::{diagnose, Bottleneck, Confidence, Diagnosis};
use crate::result::{InterfaceDelta, StreamSide};
use crate::RunResult;

/// One end over a ten-second window: `run` and `queue` in percent of it, and its sleeps.
fn end(run: f64, queue: f64, sleeps: u64) -> StreamSide {
    StreamSide {
        run_s: Some(run / 10.0),
        wait_s: Some(queue / 10.0),
        user_s: run / 10.0 * 0.1,
        sys_s: run / 10.0 * 0.9,
        sleeps: Some(sleeps),
        ..side(0.0)
    }
}

/// A default loopback run on one host of two cores, `busy` % over all cores, with the
/// sending and receiving ends given.
fn loopback(busy: f64, tx: StreamSide, rx: StreamSide) -> RunResult {
    let mut r = tcp_run();
    r.env.embedded_server = true;
    r.evidence.server = r.evidence.client.clone();
    for c in [r.summary.cpu.local.as_mut(), r.summary.cpu.remote.as_mut()]
        .into_iter()
        .flatten()
    {
        c.system_percent = Some(busy);
        c.cores = Some(2);
    }
    r.streams[0].sender = tx;
    r.streams[0].receiver = rx;
    r
}

fn text(d: &Diagnosis) -> String {
    let mut lines = vec![d.verdict.clone()];
    lines.extend(d.evidence.iter().map(|e| e.text.clone()));
    lines.extend(d.notes.iter().cloned());
    lines.join("\n")
}

#[test]
fn two_ends_taking_turns_on_one_host_is_named_with_where_each_waited() {
    // the report from a 2-vCPU VM: both ends 59-68 % of a core, the host 72 % busy, no
    // window or buffer limit, the sender asleep most of the time it was not running
    let mut r = loopback(72.0, end(62.0, 3.0, 29_000), end(60.0, 4.0, 31_000));
    sender(&mut r).sndbuf_limited_us = Some(40_000);
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::TurnTaking, "{d:#?}");
    assert_eq!(d.confidence, Confidence::High, "{d:#?}");
    assert!(
        d.verdict.starts_with(
            "the two ends taking turns on one host: the sender slept on its full send buffer \
             35 % of the time and the receiver waited for data 36 %"
        ),
        "{}",
        d.verdict
    );
    let t = text(&d);
    assert!(
        t.contains(
            "client: sending thread ran 62 % of a core, waited for a CPU 3.0 %, slept on its \
             full send buffer 35 % (2900 times a second, 121 µs each)"
        ),
        "{t}"
    );
    assert!(
        t.contains("server: receiving thread ran 60 % of a core, waited for a CPU 4.0 %, slept waiting for data 36 %"),
        "{t}"
    );
    assert!(t.contains("72 % busy over all cores"), "{t}");
    // the kernel's own send-buffer share is shown beside the sleep, not taken for it
    assert!(
        t.contains("TCP_INFO counted 0.4 % of the sender's busy time"),
        "{t}"
    );
    let e = &d.evidence[0];
    assert_eq!(
        (e.what.as_str(), e.unit.as_str(), e.threshold),
        ("sender send-buffer wait", "percent", Some(20.0))
    );
    assert!(d.advice[0].contains("-P 2"), "{:?}", d.advice);
    assert_eq!(has_candidate(&d, Bottleneck::SenderCpu), None, "{d:#?}");
    // 72 % busy is a near miss of the host rule at most
    assert!(
        has_candidate(&d, Bottleneck::HostCpu).is_none_or(|s| s < 0.5),
        "{d:#?}"
    );
}

#[test]
fn ends_that_wait_for_a_cpu_are_not_taking_turns_the_host_is_busy() {
    // measured here with five compilers beside the test: each end waited for a CPU about
    // half its window, the host 100 % busy
    let r = loopback(100.0, end(27.0, 45.0, 4_770), end(27.0, 51.0, 5_160));
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::HostCpu, "{d:#?}");
    assert_eq!(d.confidence, Confidence::Medium);
    assert!(
        d.verdict
            .starts_with("the host's CPU (both ends share it): every core of the host was busy (100 % over all cores)"),
        "{}",
        d.verdict
    );
    let t = text(&d);
    assert!(
        t.contains("client: sending thread ran 27 % of a core, waited for a CPU 45 %"),
        "{t}"
    );
    assert!(
        t.contains("server: receiving thread ran 27 % of a core, waited for a CPU 51 %"),
        "{t}"
    );
    assert!(d.advice[0].contains("other work"), "{:?}", d.advice);
    assert_eq!(has_candidate(&d, Bottleneck::TurnTaking), None);
    assert_eq!(has_candidate(&d, Bottleneck::SenderCpu), None, "{d:#?}");
}

#[test]
fn no_sender_cpu_close_behind_when_the_sending_thread_hardly_ran() {
    // the report: "with sender CPU close behind ... sender CPU (70 %)" while the sending
    // thread used 1.1 % of a core; the 70 was the host, 90 % busy
    let mut r = loopback(90.5, end(1.1, 0.5, 900), end(20.0, 1.0, 900));
    r.summary.goodput_bps = 20e6;
    sender(&mut r).rwnd_limited_us = Some(6_000_000);
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::ReceiverWindow, "{d:#?}");
    assert_eq!(has_candidate(&d, Bottleneck::SenderCpu), None, "{d:#?}");
    assert!(!d.verdict.contains("sender CPU"), "{}", d.verdict);
    // what was busy is named: the host
    assert!(
        d.verdict.starts_with(
            "the receiver's window, with the host's CPU (both ends share it) close behind"
        ),
        "{}",
        d.verdict
    );
    assert!(
        !d.evidence
            .iter()
            .any(|e| e.supports == Bottleneck::SenderCpu),
        "{d:#?}"
    );
}

#[test]
fn turns_forced_by_a_small_window_are_its_symptom() {
    // measured here with -w 128K and no other load: both ends near two thirds of a core,
    // asleep a third, and the kernel counted the window as the limit 42 % of busy time
    let mut r = loopback(100.0, end(68.0, 0.3, 67_000), end(67.0, 0.4, 94_000));
    let t = sender(&mut r);
    t.rwnd_limited_us = Some(4_200_000);
    t.snd_wnd = Some(131_072);
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::ReceiverWindow, "{d:#?}");
    assert_eq!(
        has_candidate(&d, Bottleneck::TurnTaking),
        Some(0.4),
        "{d:#?}"
    );
    assert!(
        d.notes
            .iter()
            .any(|n| n.starts_with("the two ends took turns because the receiver's window")),
        "{:?}",
        d.notes
    );
}

#[test]
fn a_saturated_sender_is_not_taking_turns_and_the_waits_are_a_note() {
    // measured here with the test's threads ahead of all other work: the sender ran 96 %,
    // the receiver 83 % and slept 17 % in 2 500 short sleeps a second
    let r = loopback(100.0, end(96.0, 3.0, 140), end(83.0, 0.5, 25_000));
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::SenderCpu, "{d:#?}");
    assert_eq!(d.confidence, Confidence::High, "{d:#?}");
    assert_eq!(has_candidate(&d, Bottleneck::TurnTaking), None);
    // the busy host is the saturated sender's doing, not a second cause
    assert_eq!(has_candidate(&d, Bottleneck::HostCpu), Some(0.4), "{d:#?}");
    let note = d
        .notes
        .iter()
        .find(|n| n.starts_with("where the ends waited: "))
        .unwrap_or_else(|| panic!("no waits note: {:?}", d.notes));
    assert!(
        note.contains("server: receiving thread ran 83 % of a core, waited for a CPU 0.5 %, slept waiting for data 16 % (2500 times a second, 66 µs each)"),
        "{note}"
    );
}

#[test]
fn turns_need_one_host_and_a_host_that_is_not_idle() {
    let turns = || (end(62.0, 3.0, 29_000), end(60.0, 4.0, 31_000));
    // two hosts: the ends wait on the network between them, not on each other's turn
    let (tx, rx) = turns();
    let mut r = loopback(72.0, tx, rx);
    r.env.embedded_server = false;
    r.evidence.server = Some(super::tests::host("beta"));
    assert_eq!(has_candidate(&diagnose(&r), Bottleneck::TurnTaking), None);
    // an idle host: a near miss at most
    let (tx, rx) = turns();
    let d = diagnose(&loopback(30.0, tx, rx));
    assert_eq!(
        has_candidate(&d, Bottleneck::TurnTaking),
        Some(0.4),
        "{d:#?}"
    );
    assert_eq!(d.bottleneck, Bottleneck::Unknown);
    // a paced test sleeps by design
    let (tx, rx) = turns();
    let mut r = loopback(72.0, tx, rx);
    r.spec.rate_bps = Some(1e9);
    assert_eq!(has_candidate(&diagnose(&r), Bottleneck::TurnTaking), None);
    // without the scheduler's figures nothing is said about turns
    let (mut tx, rx) = turns();
    tx.run_s = None;
    assert_eq!(
        has_candidate(&diagnose(&loopback(72.0, tx, rx)), Bottleneck::TurnTaking),
        None
    );
}

fn lo(bytes: u64, packets: u64) -> InterfaceDelta {
    InterfaceDelta {
        name: "lo".into(),
        rx_bytes: Some(bytes),
        tx_bytes: Some(bytes),
        rx_packets: Some(packets),
        tx_packets: Some(packets),
        ..Default::default()
    }
}

#[test]
fn an_interface_that_carried_far_more_than_the_test_says_so() {
    // the report: lo 8.90 GiB during a 23.8 MiB test
    let mut r = loopback(40.0, end(5.0, 0.1, 100), end(5.0, 0.1, 100));
    let moved = 23_800 * 1024;
    r.streams[0].sender.bytes = moved;
    r.streams[0].receiver.bytes = moved;
    r.env.client.interfaces = vec![lo(9_556_302_643, 150_000)];
    let d = diagnose(&r);
    let note = d
        .notes
        .iter()
        .find(|n| n.contains("other traffic"))
        .unwrap_or_else(|| panic!("no note: {:?}", d.notes));
    assert_eq!(
        note,
        "client: lo carried 8.90 GiB while the test moved 23.24 MiB (392×): other traffic \
         shared the interface, so its packet, drop and error counts are not the test's alone"
    );
    let j = serde_json::to_value(&d).unwrap_or_default();
    assert!(j["notes"]
        .to_string()
        .contains("other traffic shared the interface"));
    // the test's own bytes and their headers are no other traffic
    r.env.client.interfaces = vec![lo(moved + moved / 10, 20_000)];
    assert!(!diagnose(&r)
        .notes
        .iter()
        .any(|n| n.contains("other traffic")));
    // nor are the headers of many tiny segments: 1-byte writes in 100 000 packets
    r.streams[0].sender.bytes = 100_000;
    r.env.client.interfaces = vec![lo(100_000 + 100_000 * 66, 100_000)];
    assert!(!diagnose(&r)
        .notes
        .iter()
        .any(|n| n.contains("other traffic")));
    // a peer's interface name reaches the note printable only
    let mut odd = lo(9_556_302_643, 150_000);
    odd.name = "eth\u{1b}[2J0".into();
    r.env.client.interfaces = vec![odd];
    let d = diagnose(&r);
    assert!(
        d.notes
            .iter()
            .any(|n| n.starts_with("client: eth[2J0 carried")),
        "{:?}",
        d.notes
    );
    // unknown counters say nothing
    r.env.client.interfaces = vec![InterfaceDelta {
        name: "lo".into(),
        ..Default::default()
    }];
    assert!(!diagnose(&r)
        .notes
        .iter()
        .any(|n| n.contains("other traffic")));
}

/// `end` pinned to `cpu`.
fn pinned(mut s: StreamSide, cpu: u32) -> StreamSide {
    s.pinned_cpu = Some(cpu);
    s
}

#[test]
fn two_ends_pinned_to_one_cpu_take_it_in_turns_and_that_is_the_verdict() {
    // measured here with `-A 0,0` beside other builds (docs/diagnosis.md): the receiver
    // wanted the core 83-91 % of its window and the starvation rule named it; pinned
    // together, its wait is the sender's turn
    let r = loopback(
        95.0,
        pinned(end(45.0, 27.0, 3_000), 0),
        pinned(end(42.0, 44.0, 1_200), 0),
    );
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::TurnTaking, "{d:#?}");
    assert_eq!(d.confidence, Confidence::High, "{d:#?}");
    assert!(
        d.verdict.contains(
            "both ends were pinned to CPU 0 and took it in turns: the sending thread ran 45 % \
             of it and waited for it 27 %, the receiving thread ran 42 % and waited 44 %"
        ),
        "{}",
        d.verdict
    );
    let e = &d.evidence[0];
    assert_eq!((e.value, e.threshold), (87.0, Some(50.0)), "{e:#?}");
    let t = text(&d);
    assert!(t.contains("waited for a CPU 44 %"), "{t}");
    assert!(t.contains("(pinned to CPU 0)"), "{t}");
    // the starved receiver and the busy host are its symptoms, said in a note
    for b in [Bottleneck::ReceiverCpu, Bottleneck::HostCpu] {
        assert!(
            has_candidate(&d, b).is_none_or(|s| s < 0.5),
            "{b:?}: {d:#?}"
        );
    }
    assert!(t.contains("which both ends shared"), "{t}");
    assert!(d.advice[0].contains("-A 0,1"), "{:?}", d.advice);
}

#[test]
fn ends_pinned_to_different_cpus_or_one_end_pinned_are_not_one_core() {
    for (tx, rx) in [(Some(0), Some(1)), (Some(0), None)] {
        let mut a = end(45.0, 27.0, 3_000);
        let mut b = end(42.0, 44.0, 1_200);
        a.pinned_cpu = tx;
        b.pinned_cpu = rx;
        let d = diagnose(&loopback(95.0, a, b));
        assert_ne!(
            d.bottleneck,
            Bottleneck::TurnTaking,
            "{tx:?} {rx:?}: {d:#?}"
        );
        assert!(!text(&d).contains("pinned to CPU"), "{d:#?}");
    }
    // pinned together but the two ran a fifth of the core: other work held it
    let r = loopback(
        100.0,
        pinned(end(10.0, 60.0, 300), 1),
        pinned(end(9.0, 70.0, 300), 1),
    );
    let d = diagnose(&r);
    assert_ne!(d.bottleneck, Bottleneck::TurnTaking, "{d:#?}");
}

#[test]
fn a_host_short_of_full_whose_ends_waited_for_a_cpu_is_named_contended() {
    // measured here with the ends apart (`-A 0,1`) beside builds: the host 88-89 % busy,
    // under the 90 % rule, the ends waiting 9-48 % for a CPU: once not determined
    let r = loopback(88.0, end(43.0, 26.0, 3_000), end(34.0, 36.0, 2_000));
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::HostCpu, "{d:#?}");
    assert!(
        d.verdict.contains(
            "the host's cores were contended (88 % busy over all cores, and a stream thread \
             waited for a CPU 36 % of its window)"
        ),
        "{}",
        d.verdict
    );
    assert_eq!(d.evidence[0].threshold, Some(75.0), "{d:#?}");
    // without the waits, 88 % stays a near miss
    let r = loopback(88.0, end(60.0, 5.0, 3_000), end(55.0, 8.0, 2_000));
    let d = diagnose(&r);
    assert!(
        has_candidate(&d, Bottleneck::HostCpu).is_none_or(|s| s < 0.5),
        "{d:#?}"
    );
}
