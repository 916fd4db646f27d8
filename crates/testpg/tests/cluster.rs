//! The helper itself: a cluster answers on its socket and (with the password) over TCP, each
//! fresh database is empty and its own, and dropping the cluster stops the server and removes
//! its directory.

use wirerate_testpg::Cluster;

#[test]
fn a_cluster_serves_then_is_gone_when_dropped() {
    let Some(c) = Cluster::start_or_skip("cluster") else {
        return;
    };
    let url = c.fresh_database();
    let other = c.fresh_database();
    assert_ne!(url, other);
    let db = Cluster::database_of(&url);
    assert!(db.starts_with('t'), "{db}");
    let mut client = c.client(db).unwrap();
    client.batch_execute("CREATE TABLE x (n int)").unwrap();
    // the other database does not see it
    let seen: i64 = c
        .client(Cluster::database_of(&other))
        .unwrap()
        .query_one("SELECT count(*) FROM pg_tables WHERE tablename = 'x'", &[])
        .unwrap()
        .get(0);
    assert_eq!(seen, 0);
    // TCP asks for the password
    let tcp = c.tcp_url_at("127.0.0.1", db, c.password());
    postgres::Client::connect(&tcp, postgres::NoTls).unwrap();
    let wrong = c.tcp_url(db, "not-it");
    assert!(postgres::Client::connect(&wrong, postgres::NoTls).is_err());
    let socket = c.socket_path();
    assert!(socket.exists());
    drop(client);
    drop(c);
    assert!(!socket.exists(), "the directory outlived the cluster");
    assert!(postgres::Client::connect(&url, postgres::NoTls).is_err());
}

#[test]
fn urls_name_their_database() {
    assert_eq!(
        Cluster::database_of("postgres:///abc?host=/s&port=1"),
        "abc"
    );
    assert_eq!(Cluster::database_of("postgres://u:p@h:5/db"), "db");
}
