//! Paths with delay, loss and deep queues, as the lab's delay line made them
//! (docs/diagnosis.md, "Scenarios on emulated paths"): a queue that filled is named with its
//! time and size, and loss that a bbr sender moved far past is no verdict.

use super::tests::{sender, tcp_run};
use super::{diagnose, Bottleneck};
use crate::result::WireSummary;
use crate::RunResult;

/// One stream over a lab path: `goodput` against the link's model, `cc` its congestion
/// control, `rtt`/`min_rtt` in ms, `retrans` of 36 564 segments.
fn lab_run(goodput: f64, model: f64, cc: &str, rtt: f64, min_rtt: f64, retrans: u64) -> RunResult {
    let mut r = tcp_run();
    r.summary.goodput_bps = goodput;
    r.streams[0].goodput_bps = goodput;
    r.summary.wire = WireSummary {
        link_bps: Some(model / 0.9415),
        model_goodput_bps: Some(model),
        efficiency: Some(goodput / model),
        mtu_bytes: Some(1500),
        link_source: Some("lab wan".into()),
        ..Default::default()
    };
    let t = sender(&mut r);
    t.congestion = Some(cc.into());
    t.rtt_us = Some((rtt * 1e3) as u64);
    t.min_rtt_us = Some((min_rtt * 1e3) as u64);
    t.retransmits_total = Some(retrans);
    t.segs_out = Some(36_564);
    r
}

#[test]
fn a_queue_that_filled_is_named_with_its_time_and_size() {
    // 20 Mbit/s, 5 ms each way, 400 ms of queue, cubic: measured 409.6 ms against 10.2 ms
    let r = lab_run(18.83e6, 18.83e6, "cubic", 409.6, 10.2, 34);
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::Wire, "{d:#?}");
    let note = d
        .notes
        .iter()
        .find(|n| n.contains("bufferbloat"))
        .expect("a queue note");
    assert!(note.contains("409.6 ms against 10.2 ms"), "{note}");
    assert!(note.contains("399.4 ms of queue"), "{note}");
    // 399.4 ms at 18.83 Mbit/s is 0.94 MB
    assert!(note.contains("MiB") || note.contains("KiB"), "{note}");
    // bbr on the same path kept it short: 15.8 ms against 10.2 (under twice the minimum)
    let r = lab_run(18.49e6, 18.83e6, "bbr", 15.8, 10.2, 0);
    assert!(diagnose(&r)
        .notes
        .iter()
        .all(|n| !n.contains("bufferbloat")));
    // a loopback RTT doubling by microseconds is no queue on a path
    let r = lab_run(5e9, 10e9, "cubic", 0.4, 0.1, 0);
    assert!(diagnose(&r)
        .notes
        .iter()
        .all(|n| !n.contains("bufferbloat")));
}

#[test]
fn loss_a_bbr_sender_moved_far_past_did_not_set_its_rate() {
    // 50 Mbit/s, 10 ms each way, 0.5 % loss: bbr moved 42.07 Mbit/s with 186 real
    // retransmits, its Mathis bound about 9.6 Mbit/s
    let r = lab_run(42.07e6, 47.07e6, "bbr", 20.8, 20.1, 186);
    let d = diagnose(&r);
    assert_ne!(d.bottleneck, Bottleneck::Congestion, "{d:#?}");
    let note = d
        .notes
        .iter()
        .find(|n| n.contains("does not take loss"))
        .expect("a note");
    assert!(
        note.contains("bbr") && note.contains("Mathis bound"),
        "{note}"
    );
    // cubic on the same path moved 10.54 Mbit/s with 38 of 8 524: loss set its rate
    let mut r = lab_run(10.54e6, 47.07e6, "cubic", 24.9, 20.1, 38);
    sender(&mut r).segs_out = Some(8_524);
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::Congestion, "{d:#?}");
    assert!(d.notes.iter().all(|n| !n.contains("does not take loss")));
}

/// A path that reorders 2 % of its frames (100 Mbit/s, 5 ms each way): the sender took the
/// gaps for loss and retransmitted half its segments, the receiver reported few of them as
/// duplicates (DSACK), but it received every segment the sender sent but `lost`.
fn reordered_run(lost: u64) -> RunResult {
    let mut r = lab_run(24.1e6, 94.15e6, "cubic", 11.2, 10.1, 34_483);
    let t = sender(&mut r);
    t.segs_out = Some(67_063);
    t.data_segs_out = Some(67_063);
    t.dsack_dups = Some(552);
    t.reord_seen = Some(1_310);
    t.reordering = Some(40);
    r.streams[0].tcp_receiver.as_mut().unwrap().data_segs_in = Some(67_063 - lost);
    r
}

#[test]
fn reordering_the_sender_took_for_loss_is_named_reordering() {
    let d = diagnose(&reordered_run(3));
    assert_eq!(d.bottleneck, Bottleneck::Reordering, "{d:#?}");
    assert!(
        d.verdict.contains("the path lost 3 segments"),
        "{}",
        d.verdict
    );
    assert!(
        d.evidence
            .iter()
            .any(|e| e.text.contains("tcpi_reord_seen") && e.text.contains("tcpi_reordering")),
        "{d:#?}"
    );
    // the real loss is what never arrived: no congestion candidate past its threshold
    assert!(d
        .candidates
        .iter()
        .all(|c| c.bottleneck != Bottleneck::Congestion || c.score < 0.5));
    // the same retransmits where the receiver did miss the segments: loss, as before
    let d = diagnose(&reordered_run(34_000));
    assert_eq!(d.bottleneck, Bottleneck::Congestion, "{d:#?}");
    // without the receiver's count, DSACK alone cannot tell (552 of 34 483): still loss
    let mut r = reordered_run(3);
    r.streams[0].tcp_receiver = None;
    assert_eq!(diagnose(&r).bottleneck, Bottleneck::Congestion);
    // a sender that never saw reordering is not told it reordered: a candidate only
    let mut r = reordered_run(3);
    let t = sender(&mut r);
    (t.reord_seen, t.reordering) = (Some(0), Some(3));
    assert_ne!(diagnose(&r).bottleneck, Bottleneck::Reordering);
}

#[test]
fn reordering_beside_a_starved_receiver_is_only_a_note() {
    // in a lab whose receiver shared its core with a busy process, the two busy cores
    // reordered the flow: the receiver's CPU is the verdict, the reordering a note
    let mut r = reordered_run(3);
    r.streams[0].receiver.run_s = Some(1.0);
    r.streams[0].receiver.wait_s = Some(8.0);
    let d = diagnose(&r);
    assert_eq!(d.bottleneck, Bottleneck::ReceiverCpu, "{d:#?}");
    assert!(d
        .candidates
        .iter()
        .all(|c| c.bottleneck != Bottleneck::Reordering));
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("of them spurious, arriving twice")),
        "{:?}",
        d.notes
    );
}

/// Issue 23, item 11: a path that lost nothing read "every segment sent but the 0 the path
/// lost", and one segment was "1 segments".
#[test]
fn reordering_words_count_the_segments_the_path_lost() {
    for (lost, words) in [
        (0, "received every segment sent)"),
        (1, "but the 1 segment the path lost)"),
        (3, "but the 3 segments the path lost)"),
    ] {
        let mut r = reordered_run(lost);
        r.streams[0].receiver.run_s = Some(1.0);
        r.streams[0].receiver.wait_s = Some(8.0);
        let d = diagnose(&r);
        let note = d.notes.iter().find(|n| n.contains("arriving twice"));
        assert!(
            note.is_some_and(|n| n.contains(words)),
            "{lost}: {:?}",
            d.notes
        );
    }
    for (lost, words) in [
        (0, "(the path lost none)"),
        (1, "(the path lost 1 segment)"),
    ] {
        let d = diagnose(&reordered_run(lost));
        assert!(d.verdict.contains(words), "{lost}: {}", d.verdict);
    }
}
