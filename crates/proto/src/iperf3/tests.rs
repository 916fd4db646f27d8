//! A wirerate iperf3 client and server session shuttling bytes in memory, with time passed
//! by hand; and what a hostile peer can throw at either.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use wirerate_core::side_report::{Role, SideReport, StreamReport};
use wirerate_core::spec::{Direction, End, Flow, TestSpec};

use super::map::Side;
use super::*;

const IDLE: Duration = Duration::from_secs(10);

fn drain(out: &mut dyn FnMut() -> Option<Vec<u8>>) -> Vec<u8> {
    let mut all = Vec::new();
    while let Some(b) = out() {
        all.extend(b);
    }
    all
}

fn report(map: &StreamMap, side: Side, bytes: u64) -> SideReport {
    SideReport {
        streams: map
            .entries
            .iter()
            .map(|e| StreamReport {
                id: e.index,
                flow: e.flow,
                role: side.role(e.flow),
                bytes,
                counted_bytes: bytes,
                calls: 1,
                counted_calls: 1,
                opened_s: None,
                seconds: 1.0,
                user_s: 0.0,
                sys_s: 0.0,
                tcp: None,
                udp: None,
                error: None,
                sched: None,
                worker: None,
                rr: None,
            })
            .collect(),
        ..Default::default()
    }
}

#[test]
fn a_whole_bidir_test_between_two_sessions() {
    let now = Instant::now();
    let spec = TestSpec {
        direction: Direction::Bidir,
        parallel: 2,
        end: End::Time { seconds: 1.0 },
        len_bytes: 128 << 10,
        interval_s: 0.0,
        ..Default::default()
    };
    let cookie = Cookie::from_random(&[7; 36]);
    let mut c = ClientSession::new(&cookie, params_json(&spec, "test"), now, IDLE);
    let hello = drain(&mut || c.poll_transmit());
    assert_eq!(Cookie::parse(&hello).unwrap(), cookie);
    let mut s = ServerSession::new(now, IDLE);
    // PARAM_EXCHANGE → params → CREATE_STREAMS
    assert!(c
        .handle_input(&drain(&mut || s.poll_transmit()), now)
        .unwrap()
        .is_empty());
    let ev = s
        .handle_input(&drain(&mut || c.poll_transmit()), now)
        .unwrap();
    let [ServerEvent::Params(p, 4)] = ev.as_slice() else {
        panic!("{ev:?}")
    };
    assert_eq!(p.spec, spec);
    let ev = c
        .handle_input(&drain(&mut || s.poll_transmit()), now)
        .unwrap();
    assert_eq!(ev, vec![ClientEvent::CreateStreams]);
    for last in [false, false, false, true] {
        assert_eq!(s.attach_stream(now).unwrap(), last);
    }
    assert!(s.attach_stream(now).is_err(), "a fifth stream is refused");
    let ev = c
        .handle_input(&drain(&mut || s.poll_transmit()), now)
        .unwrap();
    assert_eq!(ev, vec![ClientEvent::Start]);
    // an hour of quiet while running is no timeout for either session
    let later = now + Duration::from_secs(3600);
    c.handle_timeout(later).unwrap();
    s.handle_timeout(later).unwrap();
    c.end_test(later);
    let ev = s
        .handle_input(&drain(&mut || c.poll_transmit()), later)
        .unwrap();
    assert_eq!(ev, vec![ServerEvent::TestEnd]);
    let ev = c
        .handle_input(&drain(&mut || s.poll_transmit()), later)
        .unwrap();
    assert_eq!(ev, vec![ClientEvent::ExchangeResults]);
    let map = StreamMap::new(spec.direction, spec.parallel);
    let client_results = Results::from_side(&report(&map, Side::Client, 100), &map);
    c.local_results(&client_results, later);
    let ev = s
        .handle_input(&drain(&mut || c.poll_transmit()), later)
        .unwrap();
    assert_eq!(ev, vec![ServerEvent::PeerResults(Box::new(client_results))]);
    let server_results = Results::from_side(&report(&map, Side::Server, 90), &map);
    s.local_results(&server_results, later);
    let ev = c
        .handle_input(&drain(&mut || s.poll_transmit()), later)
        .unwrap();
    let [ClientEvent::PeerResults(r)] = ev.as_slice() else {
        panic!("{ev:?}")
    };
    let side = r.to_side(&map, Side::Server, 1.0);
    let received: u64 = side
        .streams
        .iter()
        .filter(|s| s.role == Role::Receiver && s.flow == Flow::ClientToServer)
        .map(|s| s.bytes)
        .sum();
    assert_eq!(received, 180);
    assert!(c.is_finished());
    s.handle_input(&drain(&mut || c.poll_transmit()), later)
        .unwrap();
    assert!(s.is_finished());
}

#[test]
fn a_busy_server_and_a_server_error_end_the_client() {
    let now = Instant::now();
    let cookie = Cookie::from_random(&[1; 36]);
    let mut c = ClientSession::new(&cookie, serde_json::json!({}), now, IDLE);
    assert_eq!(c.handle_input(&[0xff], now), Err(Iperf3Error::AccessDenied));
    let mut c = ClientSession::new(&cookie, serde_json::json!({}), now, IDLE);
    // the error arrives in pieces: nothing is reported until all 9 bytes are there
    let mut err = vec![0xfe];
    err.extend(131i32.to_be_bytes());
    err.extend(0i32.to_be_bytes());
    assert!(c.handle_input(&err[..4], now).unwrap().is_empty());
    assert_eq!(
        c.handle_input(&err[4..], now),
        Err(Iperf3Error::ServerError {
            code: 131,
            os_errno: 0
        })
    );
}

#[test]
fn a_server_refuses_bad_parameters_with_server_error() {
    let now = Instant::now();
    let mut s = ServerSession::new(now, IDLE);
    let _ = drain(&mut || s.poll_transmit());
    let params = json::encode(&serde_json::json!({"sctp": true, "time": 1}));
    assert!(s.handle_input(&params, now).is_err());
    let reply = drain(&mut || s.poll_transmit());
    assert_eq!(reply[0], state::SERVER_ERROR as u8);
    assert_eq!(reply.len(), 9);
}

#[test]
fn silence_and_oversized_lengths_fail_the_server_session() {
    let now = Instant::now();
    let mut s = ServerSession::new(now, IDLE);
    s.handle_timeout(now + IDLE / 2).unwrap();
    assert!(matches!(
        s.handle_timeout(now + IDLE),
        Err(Iperf3Error::TimedOut(_))
    ));
    let mut s = ServerSession::new(now, IDLE);
    assert!(matches!(
        s.handle_input(&u32::MAX.to_be_bytes(), now),
        Err(Iperf3Error::TooLarge(_, _))
    ));
    // closing mid-test is an error; after the results it is the normal end
    let mut s = ServerSession::new(now, IDLE);
    assert!(s.handle_close().is_err());
}

#[test]
fn cookies_are_checked() {
    let c = Cookie::from_random(&[200; 36]);
    assert!(c.bytes()[..36]
        .iter()
        .all(|b| b"abcdefghijklmnopqrstuvwxyz234567".contains(b)));
    assert!(Cookie::parse(c.bytes()).is_ok());
    assert!(Cookie::parse(&c.bytes()[..36]).is_err());
    let mut no_nul = *c.bytes();
    no_nul[36] = b'a';
    assert!(Cookie::parse(&no_nul).is_err());
    let mut ctl = *c.bytes();
    ctl[3] = b'\n';
    assert!(Cookie::parse(&ctl).is_err());
    assert!(is_cookie_prefix(b"abcdefgh"));
    assert!(!is_cookie_prefix(b"WRRT\x00\x01\x00\x00"));
    assert!(!is_cookie_prefix(b"GET / HT"));
}

proptest! {
    #[test]
    fn junk_never_panics_either_session(junk in proptest::collection::vec(any::<u8>(), 0..400)) {
        let now = Instant::now();
        let mut s = ServerSession::new(now, IDLE);
        let _ = s.handle_input(&junk, now);
        let mut c = ClientSession::new(&Cookie::from_random(&[0; 36]), serde_json::json!({}), now, IDLE);
        let _ = c.handle_input(&junk, now);
        let _ = Cookie::parse(&junk);
    }

    #[test]
    fn junk_after_valid_params_never_panics(junk in proptest::collection::vec(any::<u8>(), 0..400)) {
        let now = Instant::now();
        let mut s = ServerSession::new(now, IDLE);
        let spec = TestSpec { end: End::Time { seconds: 1.0 }, len_bytes: 1024, ..Default::default() };
        let mut bytes = json::encode(&params_json(&spec, "t"));
        bytes.extend(&junk);
        let _ = s.handle_input(&bytes, now);
        let _ = s.attach_stream(now);
        let _ = s.handle_input(&junk, now);
    }
}
