//! The four sessions driven through the one trait, as the engine's driver drives them.

use std::time::{Duration, Instant};

use wirerate_core::TestSpec;

use super::Session;
use crate::frame::PREAMBLE_LEN;
use crate::iperf3::{self, Cookie, COOKIE_LEN};
use crate::session::{ClientEvent, ClientSession, ServerEvent, ServerSession};

const IDLE: Duration = Duration::from_secs(10);

/// Moves every frame `from` has queued into `to`, as a driver would; returns `to`'s events.
fn shuttle<A: Session, B: Session>(
    from: &mut A,
    to: &mut B,
    skip: usize,
    now: Instant,
) -> Result<Vec<B::Event>, B::Error> {
    let mut bytes = Vec::new();
    while let Some(f) = from.poll_transmit() {
        bytes.extend(f);
    }
    to.handle_input(&bytes[skip.min(bytes.len())..], now)
}

/// A session's deadline fails it at that instant, not before, and a failed session takes
/// no more input.
fn expires_at_its_deadline<S: Session>(mut s: S, now: Instant) {
    let d = s
        .poll_timeout()
        .expect("a session waiting on its peer has a deadline");
    assert!(d > now);
    assert!(s.handle_timeout(d - Duration::from_millis(1)).is_ok());
    assert!(!s.is_failed());
    let e = s.handle_timeout(d).expect_err("past the deadline");
    assert!(e.to_string().contains("silent"), "{e}");
    assert!(s.is_failed());
    assert!(!s.is_finished());
    assert!(s.handle_input(b"x", d).is_err());
}

fn wirerate_pair(now: Instant) -> (ClientSession, ServerSession) {
    let mut c = ClientSession::new(&TestSpec::default(), now, IDLE);
    let mut s = ServerSession::new(now, IDLE, [7; 16], "test");
    // the engine reads the preamble before it makes the server's session
    let ev = shuttle(&mut c, &mut s, PREAMBLE_LEN, now).unwrap();
    assert!(matches!(ev.as_slice(), [ServerEvent::Spec(_)]), "{ev:?}");
    s.accept(Vec::new(), now);
    let ev = shuttle(&mut s, &mut c, 0, now).unwrap();
    assert!(
        matches!(ev.as_slice(), [ClientEvent::Accepted(t, _)] if *t == [7; 16]),
        "{ev:?}"
    );
    (c, s)
}

fn iperf3_pair(now: Instant) -> (iperf3::ClientSession, iperf3::ServerSession) {
    let cookie = Cookie::from_random(&[1; COOKIE_LEN - 1]);
    let params = iperf3::params_json(&TestSpec::default(), "test");
    let mut c = iperf3::ClientSession::new(&cookie, params, now, IDLE);
    // the engine reads the cookie before it makes the server's session
    let first = c.poll_transmit().unwrap();
    assert_eq!(first, cookie.bytes().to_vec());
    let mut s = iperf3::ServerSession::new(now, IDLE);
    assert!(shuttle(&mut s, &mut c, 0, now).unwrap().is_empty());
    let ev = shuttle(&mut c, &mut s, 0, now).unwrap();
    assert!(
        matches!(ev.as_slice(), [iperf3::ServerEvent::Params(_, 1)]),
        "{ev:?}"
    );
    let ev = shuttle(&mut s, &mut c, 0, now).unwrap();
    assert_eq!(ev, vec![iperf3::ClientEvent::CreateStreams]);
    (c, s)
}

#[test]
fn both_protocols_handshake_through_the_trait() {
    let now = Instant::now();
    let (c, s) = wirerate_pair(now);
    assert!(!c.is_failed() && !s.is_failed());
    let (c, s) = iperf3_pair(now);
    assert!(!Session::is_failed(&c) && !Session::is_failed(&s));
}

#[test]
fn every_session_expires_at_its_deadline() {
    let now = Instant::now();
    expires_at_its_deadline(ClientSession::new(&TestSpec::default(), now, IDLE), now);
    expires_at_its_deadline(ServerSession::new(now, IDLE, [1; 16], "t"), now);
    let cookie = Cookie::from_random(&[2; COOKIE_LEN - 1]);
    let params = iperf3::params_json(&TestSpec::default(), "test");
    expires_at_its_deadline(iperf3::ClientSession::new(&cookie, params, now, IDLE), now);
    expires_at_its_deadline(iperf3::ServerSession::new(now, IDLE), now);
}

#[test]
fn an_abort_reaches_the_peer_as_a_failure() {
    let now = Instant::now();
    // wirerate: the reason travels
    let (mut c, mut s) = wirerate_pair(now);
    Session::abort(&mut c, "disk on fire");
    assert!(Session::is_failed(&c));
    let e = shuttle(&mut c, &mut s, 0, now).unwrap_err();
    assert!(e.to_string().contains("disk on fire"), "{e}");
    assert!(Session::is_failed(&s));

    let (mut c, mut s) = wirerate_pair(now);
    Session::abort(&mut s, "no more room");
    let e = shuttle(&mut s, &mut c, 0, now).unwrap_err();
    assert!(e.to_string().contains("no more room"), "{e}");

    // iperf3: the protocol's own byte, no reason
    let (mut c, mut s) = iperf3_pair(now);
    Session::abort(&mut c, "ignored");
    assert_eq!(
        shuttle(&mut c, &mut s, 0, now).unwrap_err(),
        iperf3::Iperf3Error::ClientTerminated
    );
    let (mut c, mut s) = iperf3_pair(now);
    Session::abort(&mut s, "ignored");
    assert_eq!(
        shuttle(&mut s, &mut c, 0, now).unwrap_err(),
        iperf3::Iperf3Error::ServerTerminated
    );
    assert!(Session::is_failed(&c) && Session::is_failed(&s));
}

#[test]
fn a_close_before_the_end_fails_every_session() {
    let now = Instant::now();
    let (mut c, mut s) = wirerate_pair(now);
    assert!(Session::handle_close(&mut c).is_err());
    assert!(Session::handle_close(&mut s).is_err());
    assert!(Session::is_failed(&c) && Session::is_failed(&s));
    let (mut c, mut s) = iperf3_pair(now);
    assert!(Session::handle_close(&mut c).is_err());
    assert!(Session::handle_close(&mut s).is_err());
    assert!(Session::is_failed(&c) && Session::is_failed(&s));
}

/// Feeds `chunks` to `s` as a hostile peer would; an error must leave the session failed,
/// and a failed session must refuse anything more.
fn swallow<S: Session>(mut s: S, chunks: &[Vec<u8>], now: Instant) {
    for c in chunks {
        match s.handle_input(c, now) {
            Ok(_) => assert!(!s.is_failed()),
            Err(_) => {
                assert!(s.is_failed());
                assert!(s.handle_input(c, now).is_err());
                return;
            }
        }
    }
}

proptest::proptest! {
    #[test]
    fn no_session_panics_on_junk_and_an_error_always_fails_it(
        chunks in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..64), 0..8),
    ) {
        let now = Instant::now();
        swallow(ClientSession::new(&TestSpec::default(), now, IDLE), &chunks, now);
        swallow(ServerSession::new(now, IDLE, [3; 16], "t"), &chunks, now);
        let cookie = Cookie::from_random(&[4; COOKIE_LEN - 1]);
        let params = iperf3::params_json(&TestSpec::default(), "test");
        swallow(iperf3::ClientSession::new(&cookie, params, now, IDLE), &chunks, now);
        swallow(iperf3::ServerSession::new(now, IDLE), &chunks, now);
    }
}
