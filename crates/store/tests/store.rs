//! The store's promises: round trip, WAL, no duplicate on retry, filters, refusal of what it
//! cannot read.

use wirerate_core::synth as common;

use wirerate_store::{RunFilter, Store, StoreError};

#[test]
fn round_trip_keeps_the_whole_result_and_its_columns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub").join("results.db");
    let mut store = Store::open(&path).unwrap();
    assert_eq!(store.journal_mode().unwrap(), "wal");
    let r = common::run(1, 9.4e9, 10);
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
    assert_eq!(store.get(id + 1).unwrap(), None);
    drop(store);
    // reopening finds the same run (and does not migrate twice)
    let store = Store::open_existing(&path).unwrap();
    assert!(store.get(id).unwrap().unwrap().result().unwrap() == r);
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
fn a_retry_of_the_same_result_is_not_a_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let r = common::run(7, 1e9, 3);
    let first = store.insert_run(&r, Some("a"), None).unwrap();
    let again = store.insert_run(&r, Some("a"), None).unwrap();
    let relabelled = store.insert_run(&r, Some("b"), None).unwrap();
    assert_eq!((first, again, relabelled), (first, first, first));
    let other = store
        .insert_run(&common::run(8, 1e9, 3), Some("a"), None)
        .unwrap();
    assert_ne!(other, first);
    assert_eq!(store.list(&RunFilter::default()).unwrap().len(), 2);
    assert_eq!(store.labels().unwrap(), vec![("a".to_string(), 2)]);
}

#[test]
fn list_filters_by_label_and_group_and_keeps_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    for n in 0..6 {
        let label = if n % 2 == 0 { "even" } else { "odd" };
        let group = if n < 3 { "first" } else { "second" };
        store
            .insert_run(&common::run(n, 1e9 + n as f64, 1), Some(label), Some(group))
            .unwrap();
    }
    store
        .insert_run(&common::run(99, 1e9, 1), None, None)
        .unwrap();
    // the documents and the columns list the same runs
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

#[test]
fn what_it_cannot_read_is_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.db");
    let e = Store::open_existing(&missing).err().unwrap();
    assert!(matches!(e, StoreError::Missing(_)), "{e}");
    assert!(!missing.exists(), "reading must not create a database");

    let junk = dir.path().join("junk.db");
    std::fs::write(
        &junk,
        b"this is not a database, just some text long enough to read",
    )
    .unwrap();
    let e = Store::open(&junk).err().unwrap();
    assert!(e.to_string().contains("junk.db"), "{e}");

    let newer = dir.path().join("newer.db");
    drop(Store::open(&newer).unwrap());
    let c = rusqlite::Connection::open(&newer).unwrap();
    c.execute_batch("PRAGMA user_version = 99").unwrap();
    drop(c);
    let e = Store::open(&newer).err().unwrap();
    assert!(matches!(e, StoreError::TooNew { found: 99, .. }), "{e}");
}

#[test]
fn a_result_json_cannot_carry_is_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let mut r = common::run(1, 1e9, 1);
    r.summary.goodput_bps = f64::NAN;
    assert!(matches!(
        store.insert_run(&r, None, None),
        Err(StoreError::Encode(_))
    ));
    assert!(store.list(&RunFilter::default()).unwrap().is_empty());
}
