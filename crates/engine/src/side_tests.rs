use std::cell::Cell;
use std::net::TcpListener;

use super::*;

thread_local! {
    /// The stream whose thread `spawn_stream` refuses to start, on this thread only.
    pub(crate) static FAIL_SPAWN_OF: Cell<Option<u32>> = const { Cell::new(None) };
}

/// `n` connected loopback pairs: this side's receiving ends, and the peers' ends.
fn pairs(n: u32) -> (Vec<Attached>, Vec<TcpStream>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let mut mine = Vec::new();
    let mut theirs = Vec::new();
    for id in 0..n {
        theirs.push(TcpStream::connect(addr).unwrap());
        let (s, _) = l.accept().unwrap();
        mine.push(Attached {
            flow: Flow::ClientToServer,
            id,
            role: Role::Receiver,
            sock: DataSock::Tcp(s),
        });
    }
    (mine, theirs)
}

#[test]
fn a_stream_thread_that_cannot_start_fails_the_side_and_stops_the_others() {
    let spec = TestSpec {
        parallel: 3,
        ..Default::default()
    };
    let (mine, theirs) = pairs(3);
    FAIL_SPAWN_OF.with(|c| c.set(Some(2)));
    let r = SideRun::start(
        &spec,
        mine,
        None,
        Duration::from_secs(5),
        // one data worker per stream, so the third is the one that fails
        RunContext {
            threads: Some(3),
            ..Default::default()
        },
    );
    FAIL_SPAWN_OF.with(|c| c.set(None));
    let Err(e) = r else {
        panic!("the side started without stream 2")
    };
    let text = e.full();
    assert!(
        text.starts_with("cannot start the thread of stream 2 (client to server)"),
        "{text}"
    );
    assert!(text.contains("the 2 stream thread(s) already started were stopped"));
    assert!(text.ends_with("injected thread start failure"), "{text}");
    // the two receivers that had started were shut down and joined: their peers see the end
    for mut t in theirs.into_iter().take(2) {
        t.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut b = [0u8; 1];
        assert_eq!(std::io::Read::read(&mut t, &mut b).unwrap_or(0), 0);
    }
}

#[test]
fn every_stream_starts_when_nothing_fails() {
    let spec = TestSpec {
        end: wirerate_core::spec::End::Bytes { bytes: 0 },
        ..Default::default()
    };
    let (mine, theirs) = pairs(2);
    let side = SideRun::start(
        &spec,
        mine,
        None,
        Duration::from_secs(5),
        Default::default(),
    )
    .expect("threads start");
    drop(theirs);
    let report = side.finish();
    assert_eq!(report.streams.len(), 2);
}
