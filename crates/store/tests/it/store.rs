//! The store's promises: round trip, WAL, no duplicate on retry, filters, refusal of what it
//! cannot read.

use crate::shared;

use wirerate_core::synth as common;

use wirerate_store::{RunFilter, Store, StoreError};

#[test]
fn round_trip_keeps_the_whole_result_and_its_columns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub").join("results.db");
    let mut store = Store::open(&path).unwrap();
    assert_eq!(store.journal_mode().unwrap(), "wal");
    let (id, r) = shared::assert_round_trip(&mut store);
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
fn a_named_key_stores_two_measurements_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    shared::assert_named_key_stores_once(&mut store);
}

#[test]
fn list_filters_by_label_and_group_and_keeps_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    shared::assert_list_filters(&mut store);
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
