//! Addresses whose connections wait until their handshake deadline and reconnect at once:
//! each is a strike against its address, and an address with 5 in a minute is refused at
//! once for the rest of it, so such a flood cannot keep the count of waiting connections at
//! the cap and clients from other addresses are served.

use crate::common;

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{connect_from, run, stderr, ServerProc};

const LIMIT: Duration = Duration::from_secs(30);

/// What the server says before it closes `s` (up to `limit`).
fn answer(mut s: TcpStream, limit: Duration) -> String {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn addresses_that_hold_connections_to_the_deadline_are_refused_and_others_get_in() {
    let _heavy = common::heavy();
    // 16 waiting connections at most: two addresses with 8 each fill the server
    let srv = ServerProc::start(&["--handshake-timeout", "1", "--max-startups", "16"]);
    let p = srv.port.to_string();
    // the start's own probe of the port has gone
    std::thread::sleep(Duration::from_millis(500));
    let flooders = ["127.0.0.21", "127.0.0.22"];
    let silent: Vec<TcpStream> = flooders
        .iter()
        .flat_map(|a| (0..8).map(move |_| *a))
        .map(|a| connect_from(a, srv.port))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let client = ["run", "127.0.0.1", "-p", &p, "-B", "127.0.0.2", "-n", "4M"];
    let out = run(&client, LIMIT);
    assert!(
        !out.status.success(),
        "served while the server was full: {}",
        srv.log()
    );
    assert!(
        stderr(&out).contains("too many pending connections"),
        "{}",
        stderr(&out)
    );
    // held to the deadline, each closed there: 8 strikes against each address
    let t0 = Instant::now();
    for s in silent {
        answer(s, Duration::from_secs(5));
    }
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    // reconnecting at once is refused at once, saying why
    for a in flooders {
        let t = Instant::now();
        let said = answer(connect_from(a, srv.port), Duration::from_secs(5));
        assert!(
            said.contains("reached the handshake timeout"),
            "{a}: {said:?}"
        );
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{a}: {:?}",
            t.elapsed()
        );
    }
    // and the client from another address is served
    let out = run(&client, LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    // a real client from a struck address is told why
    let out = run(
        &["run", "127.0.0.1", "-p", &p, "-B", flooders[0], "-n", "4M"],
        LIMIT,
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("reached the handshake timeout; retry in a minute"),
        "{}",
        stderr(&out)
    );
}
