//! The PostgreSQL backend against a real throwaway server: the same promises as SQLite's
//! (round trip, no duplicate on retry, a run whole or not at all, a newer layout refused),
//! migrations that two hosts may start at once, and one-line errors that never show a
//! password. Each test takes its own database in one cluster per test process.

use std::path::Path;

use crate::shared;

use wirerate_core::synth as common;
use wirerate_store::{RunFilter, Store, StoreError};
use wirerate_testpg::Cluster;

fn db(test: &str) -> Option<String> {
    Cluster::shared(test).map(Cluster::fresh_database)
}

#[test]
fn round_trip_keeps_the_whole_result_and_its_columns() {
    let Some(url) = db("round_trip") else { return };
    let mut store = Store::connect(Path::new(&url)).unwrap();
    assert_eq!(store.backend_name(), "postgresql");
    assert_eq!(
        store.journal_mode().unwrap(),
        "postgresql synchronous_commit=on"
    );
    let (id, r) = shared::assert_round_trip(&mut store);
    assert_eq!(id, 1);
    drop(store);
    let store = Store::connect_existing(Path::new(&url)).unwrap();
    assert!(store.get(id).unwrap().unwrap().result().unwrap() == r);
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
fn a_retry_of_the_same_result_is_not_a_duplicate() {
    let Some(url) = db("retry") else { return };
    let mut store = Store::open_url(&url).unwrap();
    let r = common::run(7, 1e9, 3);
    let first = store.store_run(&r, Some("a"), None).unwrap();
    assert!(first.new);
    let again = store.store_run(&r, Some("a"), None).unwrap();
    let relabelled = store.insert_run(&r, Some("b"), None).unwrap();
    assert_eq!(
        (again.id, again.new, relabelled),
        (first.id, false, first.id)
    );
    // a second connection (another host) storing the same run gets the same id
    let mut other = Store::open_url(&url).unwrap();
    assert_eq!(other.insert_run(&r, None, None).unwrap(), first.id);
    let second = store
        .insert_run(&common::run(8, 1e9, 3), Some("a"), None)
        .unwrap();
    // the retries took no id: ids follow storing order as in SQLite
    assert_eq!(second, first.id + 1);
    assert_eq!(store.list(&RunFilter::default()).unwrap().len(), 2);
    assert_eq!(store.labels().unwrap(), vec![("a".to_string(), 2)]);
    assert!(store.set_label(second, Some("z"), Some("g")).unwrap());
    assert!(!store.set_label(999, Some("z"), None).unwrap());
    assert_eq!(
        store.labels().unwrap(),
        vec![("a".to_string(), 1), ("z".to_string(), 1)]
    );
}

#[test]
fn list_filters_by_label_and_group_and_keeps_the_newest() {
    let Some(url) = db("list") else { return };
    let mut store = Store::open_url(&url).unwrap();
    shared::assert_list_filters(&mut store);
    shared::assert_named_key_stores_once(&mut store);
}

#[test]
fn a_run_is_stored_whole_or_not_at_all() {
    let Some(url) = db("all_or_nothing") else {
        return;
    };
    let cluster = Cluster::shared("all_or_nothing").unwrap();
    let mut store = Store::open_url(&url).unwrap();
    // a result that would not read back is refused before anything is written
    let mut nan = common::run(1, 1e9, 1);
    nan.summary.goodput_bps = f64::NAN;
    assert!(matches!(
        store.insert_run(&nan, None, None),
        Err(StoreError::Encode(_))
    ));
    // a failure after the row is written, inside the same transaction, leaves nothing
    let dbname = url.split('?').next().unwrap().rsplit('/').next().unwrap();
    let mut admin = cluster.client(dbname).unwrap();
    admin
        .batch_execute(
            "CREATE FUNCTION fail_after() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN RAISE EXCEPTION 'injected failure after the insert'; END $$; \
             CREATE TRIGGER fail_after AFTER INSERT ON runs \
             FOR EACH ROW EXECUTE FUNCTION fail_after();",
        )
        .unwrap();
    let r = common::run(2, 2e9, 50);
    let e = store.insert_run(&r, Some("x"), None).err().unwrap();
    let msg = e.to_string();
    assert!(msg.contains("injected failure"), "{msg}");
    assert!(!msg.contains('\n'), "{msg}");
    assert!(store.list(&RunFilter::default()).unwrap().is_empty());
    admin
        .batch_execute("DROP TRIGGER fail_after ON runs")
        .unwrap();
    // the same connection goes on, and the run now stores once
    let id = store.insert_run(&r, Some("x"), None).unwrap();
    assert!(store.get(id).unwrap().unwrap().result().unwrap() == r);
    assert_eq!(store.list(&RunFilter::default()).unwrap().len(), 1);
}

#[test]
fn a_newer_layout_is_refused_and_a_reader_changes_nothing() {
    let Some(url) = db("newer") else { return };
    let cluster = Cluster::shared("newer").unwrap();
    let dbname = url.split('?').next().unwrap().rsplit('/').next().unwrap();
    // a reader finds no tables and creates none
    let e = Store::open_url_existing(&url).err().unwrap();
    assert!(matches!(e, StoreError::Empty(_)), "{e}");
    let mut admin = cluster.client(dbname).unwrap();
    let tables: i64 = admin
        .query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(tables, 0);
    drop(Store::open_url(&url).unwrap());
    // a reader's session cannot write
    let mut reader = Store::open_url_existing(&url).unwrap();
    let e = reader.insert_run(&common::run(1, 1e9, 1), None, None).err();
    assert!(
        e.as_ref()
            .is_some_and(|e| e.to_string().contains("read-only")),
        "{e:?}"
    );
    admin
        .batch_execute(
            "INSERT INTO wirerate_schema (version, applied_unix_s, tool_version) \
             VALUES (99, 0, 'future')",
        )
        .unwrap();
    for e in [
        Store::open_url(&url).err().unwrap(),
        Store::open_url_existing(&url).err().unwrap(),
    ] {
        assert!(matches!(e, StoreError::TooNew { found: 99, .. }), "{e}");
    }
}

#[test]
fn hosts_starting_at_once_migrate_once() {
    let Some(url) = db("migrate_race") else {
        return;
    };
    let handles: Vec<_> = (0..8)
        .map(|n| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut s = Store::open_url(&url).unwrap();
                s.insert_run(&common::run(n, 1e9, 1), None, None).unwrap()
            })
        })
        .collect();
    let mut ids: Vec<i64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    ids.sort();
    assert_eq!(ids, (1..=8).collect::<Vec<_>>());
    let cluster = Cluster::shared("migrate_race").unwrap();
    let dbname = url.split('?').next().unwrap().rsplit('/').next().unwrap();
    let versions: i64 = cluster
        .client(dbname)
        .unwrap()
        .query_one("SELECT count(*) FROM wirerate_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(versions, 1);
}

#[test]
fn errors_are_one_line_and_never_show_the_password() {
    let Some(cluster) = Cluster::shared("errors") else {
        return;
    };
    let check = |e: StoreError, want: &str| {
        let msg = e.to_string();
        assert!(msg.contains(want), "{msg}");
        assert!(!msg.contains('\n'), "{msg}");
        assert!(
            !msg.contains("wrongpass") && !msg.contains(cluster.password()),
            "{msg}"
        );
    };
    // a wrong password over TCP
    let e = Store::open_url(&cluster.tcp_url("postgres", "wrongpass"))
        .err()
        .unwrap();
    assert!(matches!(e, StoreError::Connect { .. }));
    check(e, "password authentication failed");
    // the right password works, and is not in the location shown
    let url = cluster.fresh_database();
    let dbname = url.split('?').next().unwrap().rsplit('/').next().unwrap();
    let s = Store::open_url(&cluster.tcp_url(dbname, cluster.password())).unwrap();
    assert!(s.location().contains(":***@"), "{}", s.location());
    assert!(!s.location().contains(cluster.password()));
    // nobody listening
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let e = Store::open_url(&format!("postgres://u:wrongpass@127.0.0.1:{port}/db"))
        .err()
        .unwrap();
    check(
        e,
        "cannot connect to results database postgres://u:***@127.0.0.1",
    );
    // a database that does not exist
    let e = Store::open_url_existing(&cluster.url("no_such_db"))
        .err()
        .unwrap();
    check(e, "does not exist");
    // TLS without a CA to check the server against is a clear refusal
    let tls = format!(
        "{}?sslmode=require",
        cluster.tcp_url(dbname, cluster.password())
    );
    if std::env::var_os("PGSSLROOTCERT").is_none() {
        let e = Store::open_url(&tls).err().unwrap();
        assert!(matches!(e, StoreError::BadUrl { .. }), "{e}");
        check(e, "sslrootcert=FILE");
    }
    // not a URL the client reads
    let e = Store::open_url("postgres://u:wrongpass@h:port/db")
        .err()
        .unwrap();
    check(e, "bad PostgreSQL URL");
}

#[test]
fn a_connection_the_server_dropped_is_opened_again_to_store() {
    let Some(url) = db("reconnect") else { return };
    let cluster = Cluster::shared("reconnect").unwrap();
    let dbname = url.split('?').next().unwrap().rsplit('/').next().unwrap();
    let mut store = Store::open_url(&url).unwrap();
    let first = store
        .insert_run(&common::run(1, 1e9, 1), None, None)
        .unwrap();
    // the server ends the session while a long test runs (an idle timeout, a restart)
    let mut admin = cluster.client(dbname).unwrap();
    let ended: i64 = admin
        .query_one(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND application_name = 'wirerate') AS t",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(ended, 1);
    let second = store
        .insert_run(&common::run(2, 1e9, 1), None, None)
        .unwrap();
    assert_eq!(second, first + 1);
    assert_eq!(store.list(&RunFilter::default()).unwrap().len(), 2);
}

/// A store moves to another thread (a writer thread of a lab driver, say).
#[test]
fn a_store_can_be_sent_to_another_thread() {
    fn send<T: Send>() {}
    send::<Store>();
    let Some(url) = db("send") else { return };
    let store = Store::open_url(&url).unwrap();
    let id = std::thread::spawn(move || {
        let mut store = store;
        store
            .insert_run(&common::run(3, 1e9, 1), None, None)
            .unwrap()
    })
    .join()
    .unwrap();
    assert_eq!(id, 1);
}
