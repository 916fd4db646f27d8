//! The checks both backends' tests make in the same words: SQLite (`store.rs`) and
//! PostgreSQL (`pg.rs`) keep the same promises.

use wirerate_core::{synth, RunResult};
use wirerate_store::{RunFilter, Store};

/// Stores one run with a label and a group and reads it back: the whole result and its
/// summary columns. Returns its id and the run.
pub fn assert_round_trip(store: &mut Store) -> (i64, RunResult) {
    let r = synth::run(1, 9.4e9, 10);
    let id = store.insert_run(&r, Some("k6.8"), Some("g1")).unwrap();
    let stored = store.get(id).unwrap().unwrap();
    assert!(
        stored.result().unwrap() == r,
        "result differs after the round trip"
    );
    let got = &stored.row;
    assert_eq!(got.label.as_deref(), Some("k6.8"));
    assert_eq!(got.group.as_deref(), Some("g1"));
    assert_eq!(got.goodput_bps, Some(9.4e9));
    assert_eq!(
        (got.protocol.as_str(), got.direction.as_str()),
        ("tcp", "forward")
    );
    assert_eq!(got.cpu_remote_percent, Some(25.0));
    assert_eq!(got.retransmits, Some(1));
    assert_eq!(got.client_kernel.as_deref(), Some("6.8.0-test"));
    assert_eq!(got.interfaces.as_deref(), Some("veth0"));
    assert_eq!((got.mtu_bytes, got.link_bps), (Some(1500), Some(10e9)));
    assert_eq!(got.kind, "stream");
    assert_eq!(got.seconds, Some(r.summary.seconds));
    assert_eq!((got.udp_loss_percent, got.udp_jitter_ms), (None, None));
    assert!(!got.interrupted);
    assert_eq!(store.get(id + 1).unwrap(), None);
    assert_cut_udp_run_columns(store);
    (id, r)
}

/// A UDP run stopped after 1.97 of 10 s: its loss, jitter, seconds and the interruption are
/// columns, read from the document alike on both backends.
fn assert_cut_udp_run_columns(store: &mut Store) {
    let mut r = synth::run(2, 9.4e7, 2);
    r.spec.protocol = wirerate_core::Protocol::Udp;
    r.spec.end = wirerate_core::spec::End::Time { seconds: 10.0 };
    r.summary.seconds = 1.97;
    r.summary.udp = Some(wirerate_core::result::UdpSummary {
        packets: 2000,
        received: 1990,
        lost: 10,
        loss_percent: 0.5,
        jitter_ms: Some(0.125),
        ..Default::default()
    });
    r.interrupted = true;
    let id = store.insert_run(&r, None, None).unwrap();
    let got = store.get(id).unwrap().unwrap().row;
    assert_eq!(got.seconds, Some(1.97));
    assert_eq!(got.asked_seconds, Some(10.0));
    assert_eq!(got.udp_loss_percent, Some(0.5));
    assert_eq!(got.udp_jitter_ms, Some(0.125));
    assert!(got.interrupted);
}

/// Seven runs in an empty store, listed by label, group and count: the documents and the
/// columns list the same runs, the newest last.
pub fn assert_list_filters(store: &mut Store) {
    for n in 0..6 {
        let label = if n % 2 == 0 { "even" } else { "odd" };
        let group = if n < 3 { "first" } else { "second" };
        store
            .insert_run(&synth::run(n, 1e9 + n as f64, 1), Some(label), Some(group))
            .unwrap();
    }
    store
        .insert_run(&synth::run(99, 1e9, 1), None, None)
        .unwrap();
    let ids = |f: RunFilter| -> Vec<i64> {
        let ids: Vec<i64> = store.list(&f).unwrap().iter().map(|r| r.row.id).collect();
        let rows: Vec<i64> = store.list_rows(&f).unwrap().iter().map(|r| r.id).collect();
        assert_eq!(ids, rows);
        ids
    };
    assert_eq!(ids(RunFilter::default()), vec![1, 2, 3, 4, 5, 6, 7]);
    let even = store.runs_for_label("even").unwrap();
    assert_eq!(
        even.iter().map(|r| r.row.id).collect::<Vec<_>>(),
        vec![1, 3, 5]
    );
    let newest_two = RunFilter {
        limit: Some(2),
        ..Default::default()
    };
    assert_eq!(ids(newest_two), vec![6, 7]);
    let odd_second = RunFilter {
        label: Some("odd".into()),
        group: Some("second".into()),
        limit: None,
    };
    assert_eq!(ids(odd_second), vec![4, 6]);
    assert!(store.runs_for_label("none").unwrap().is_empty());
}

/// Two different results stored under one named key (a plan's test measured twice) are one
/// run: the second store returns the first one's id; a result's own key is not the name's.
pub fn assert_named_key_stores_once(store: &mut Store) {
    let (a, b) = (synth::run(21, 1e9, 3), synth::run(22, 2e9, 3));
    let first = store
        .store_run_keyed(&a, Some("plan:p"), None, Some("plan p test 7"))
        .unwrap();
    let again = store
        .store_run_keyed(&b, Some("plan:p"), None, Some("plan p test 7"))
        .unwrap();
    assert!(first.new && !again.new);
    assert_eq!(again.id, first.id);
    let kept = store.get(first.id).unwrap().unwrap().result().unwrap();
    assert!(kept == a, "the first measurement is the one kept");
    // the same result under its own key is another run
    let own = store.store_run(&b, Some("plan:p"), None).unwrap();
    assert!(own.new && own.id != first.id);
}
