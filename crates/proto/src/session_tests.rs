//! Two in-memory peers shuttling frames, with time passed in by hand.

use super::*;
use crate::data::DataHello;
use wirerate_core::side_report::SideReport;
use wirerate_core::spec::{Direction, Flow};

const IDLE: Duration = Duration::from_secs(10);
const TOKEN: Token = [9; 16];

fn drain(out: &mut dyn FnMut() -> Option<Vec<u8>>) -> Vec<u8> {
    let mut all = Vec::new();
    while let Some(b) = out() {
        all.extend(b);
    }
    all
}

/// Connects a client and a server up to `Accepted`; returns both and the client's token.
fn handshake(spec: &TestSpec, now: Instant) -> (ClientSession, ServerSession, Token) {
    let mut c = ClientSession::new(spec, now, IDLE);
    let bytes = drain(&mut || c.poll_transmit());
    // the engine reads and checks the preamble before it makes a session
    let pre = Preamble::parse(&bytes).unwrap();
    assert_eq!(pre.channel, Channel::Control);
    let mut s = ServerSession::new(now, IDLE, TOKEN, "test");
    let ev = s.handle_input(&bytes[PREAMBLE_LEN..], now).unwrap();
    assert!(matches!(ev.as_slice(), [ServerEvent::Spec(_)]));
    s.accept(Vec::new(), now);
    let reply = drain(&mut || s.poll_transmit());
    let ev = c.handle_input(&reply, now).unwrap();
    let [ClientEvent::Accepted(token, _)] = ev.as_slice() else {
        panic!("expected Accepted, got {ev:?}");
    };
    (c, s, *token)
}

#[test]
fn full_session_forward_two_streams() {
    let now = Instant::now();
    let spec = TestSpec {
        parallel: 2,
        ..Default::default()
    };
    let (mut c, mut s, token) = handshake(&spec, now);
    assert_eq!(token, TOKEN);
    let h0 = DataHello {
        token,
        flow: Flow::ClientToServer,
        stream_id: 0,
    };
    assert_eq!(s.attach_stream(&h0, now).unwrap(), None);
    // the same stream twice is refused
    assert!(s.attach_stream(&h0, now).is_err());
    let h1 = DataHello { stream_id: 1, ..h0 };
    assert_eq!(s.attach_stream(&h1, now).unwrap(), Some(ServerEvent::Start));
    let ev = c
        .handle_input(&drain(&mut || s.poll_transmit()), now)
        .unwrap();
    assert_eq!(ev, vec![ClientEvent::Start]);
    // quiet for an hour while running: no timeout on either side
    let later = now + Duration::from_secs(3600);
    s.handle_timeout(later).unwrap();
    c.handle_timeout(later).unwrap();
    c.local_report(SideReport::default(), later);
    let ev = s
        .handle_input(&drain(&mut || c.poll_transmit()), later)
        .unwrap();
    assert!(matches!(ev.as_slice(), [ServerEvent::PeerReport(_)]));
    s.local_report(SideReport::default(), later);
    let ev = c
        .handle_input(&drain(&mut || s.poll_transmit()), later)
        .unwrap();
    assert!(matches!(ev.as_slice(), [ClientEvent::PeerReport(_)]));
    assert!(c.is_finished() && s.is_finished());
    assert!(c.handle_close().is_ok() && s.handle_close().is_ok());
}

#[test]
fn wrong_token_and_unknown_stream_are_refused() {
    let now = Instant::now();
    let spec = TestSpec {
        direction: Direction::Reverse,
        ..Default::default()
    };
    let (_c, mut s, token) = handshake(&spec, now);
    let bad = DataHello {
        token: [1; 16],
        flow: Flow::ServerToClient,
        stream_id: 0,
    };
    assert_eq!(s.attach_stream(&bad, now), Err(ProtoError::BadToken));
    let wrong_flow = DataHello {
        token,
        flow: Flow::ClientToServer,
        stream_id: 0,
    };
    assert!(s.attach_stream(&wrong_flow, now).is_err());
    let wrong_id = DataHello {
        token,
        flow: Flow::ServerToClient,
        stream_id: 5,
    };
    assert!(s.attach_stream(&wrong_id, now).is_err());
}

#[test]
fn silent_client_times_out_at_each_stage() {
    let now = Instant::now();
    let mut s = ServerSession::new(now, IDLE, TOKEN, "t");
    assert!(s.handle_timeout(now + Duration::from_secs(9)).is_ok());
    assert!(matches!(
        s.handle_timeout(now + IDLE),
        Err(ProtoError::TimedOut(_))
    ));
    // after the spec, the streams must come within the idle timeout too
    let (_c, mut s, _) = handshake(&TestSpec::default(), now);
    assert_eq!(s.poll_timeout(), Some(now + IDLE));
    assert!(s
        .handle_timeout(now + IDLE + Duration::from_millis(1))
        .is_err());
}

#[test]
fn an_iperf3_server_is_recognised_by_its_first_byte() {
    let now = Instant::now();
    let mut c = ClientSession::new(&TestSpec::default(), now, IDLE);
    // iperf3 takes the opening as its cookie and asks for parameters (state 9)
    assert_eq!(
        c.handle_input(&[9], now).unwrap_err(),
        ProtoError::Iperf3Server(9)
    );
    let mut c = ClientSession::new(&TestSpec::default(), now, IDLE);
    assert_eq!(
        c.handle_input(&[0xff], now).unwrap_err(),
        ProtoError::Iperf3Server(-1)
    );
    let mut c = ClientSession::new(&TestSpec::default(), now, IDLE);
    assert_eq!(
        c.handle_input(b"HTTP", now).unwrap_err(),
        ProtoError::BadMagic
    );
    // wirerate's own preamble, a byte at a time, is not mistaken for one
    let mut c = ClientSession::new(&TestSpec::default(), now, IDLE);
    for b in crate::frame::Preamble::new(crate::frame::Channel::Control).emit() {
        assert!(c.handle_input(&[b], now).is_ok());
    }
}

#[test]
fn truncated_frame_waits_and_close_is_an_error() {
    let now = Instant::now();
    let mut s = ServerSession::new(now, IDLE, TOKEN, "t");
    let frame = encode(&Msg::Spec {
        spec: TestSpec::default(),
        feedback: false,
    });
    let ev = s.handle_input(&frame[..frame.len() - 3], now).unwrap();
    assert!(ev.is_empty());
    assert!(matches!(s.handle_close(), Err(ProtoError::Closed(_))));
}

#[test]
fn oversized_and_junk_frames_fail_the_session() {
    let now = Instant::now();
    let mut s = ServerSession::new(now, IDLE, TOKEN, "t");
    assert!(matches!(
        s.handle_input(&[0xff, 0xff, 0xff, 0xff], now),
        Err(ProtoError::FrameTooLarge(..))
    ));
    let mut s = ServerSession::new(now, IDLE, TOKEN, "t");
    let mut junk = 5u32.to_be_bytes().to_vec();
    junk.extend(b"{{{{{");
    assert!(matches!(
        s.handle_input(&junk, now),
        Err(ProtoError::BadMessage(_))
    ));
    // and a failed session takes nothing more
    assert!(s.handle_input(b"x", now).is_err());
}

#[test]
fn messages_out_of_order_are_rejected() {
    let now = Instant::now();
    // a report before any spec
    let mut s = ServerSession::new(now, IDLE, TOKEN, "t");
    let f = encode(&Msg::Report {
        report: Box::default(),
    });
    assert!(matches!(
        s.handle_input(&f, now),
        Err(ProtoError::Unexpected { got: "report", .. })
    ));
    // a client told Start before Accepted
    let mut c = ClientSession::new(&TestSpec::default(), now, IDLE);
    let mut bytes = Preamble::new(Channel::Control).emit().to_vec();
    bytes.extend(encode(&Msg::Welcome { server: "x".into() }));
    bytes.extend(encode(&Msg::Start));
    assert!(matches!(
        c.handle_input(&bytes, now),
        Err(ProtoError::Unexpected { got: "start", .. })
    ));
}

#[test]
fn invalid_spec_is_refused_with_a_reason() {
    let now = Instant::now();
    let mut s = ServerSession::new(now, IDLE, TOKEN, "t");
    let spec = TestSpec {
        parallel: 0,
        ..Default::default()
    };
    let r = s.handle_input(
        &encode(&Msg::Spec {
            spec,
            feedback: false,
        }),
        now,
    );
    assert!(matches!(r, Err(ProtoError::Refused(_))));
    let mut c = ClientSession::new(&TestSpec::default(), now, IDLE);
    let reply = drain(&mut || s.poll_transmit());
    assert!(matches!(
        c.handle_input(&reply, now),
        Err(ProtoError::Refused(reason)) if reason.contains("parallel")
    ));
}

#[test]
fn busy_reply_reaches_the_client() {
    let now = Instant::now();
    let mut c = ClientSession::new(&TestSpec::default(), now, IDLE);
    let r = c.handle_input(&busy_reply(7.0), now);
    assert_eq!(r, Err(ProtoError::Busy(7.0)));
}

#[test]
fn client_times_out_waiting_for_the_server_report() {
    let now = Instant::now();
    let (mut c, mut s, token) = handshake(&TestSpec::default(), now);
    let h = DataHello {
        token,
        flow: Flow::ClientToServer,
        stream_id: 0,
    };
    s.attach_stream(&h, now).unwrap();
    c.handle_input(&drain(&mut || s.poll_transmit()), now)
        .unwrap();
    c.local_report(SideReport::default(), now);
    assert!(c.handle_timeout(now + Duration::from_secs(5)).is_ok());
    assert!(matches!(
        c.handle_timeout(now + Duration::from_secs(11)),
        Err(ProtoError::TimedOut("running the test"))
    ));
}

#[test]
fn udp_proofs_come_between_accepted_and_start() {
    let now = Instant::now();
    let spec = TestSpec {
        protocol: wirerate_core::Protocol::Udp,
        len_bytes: 1472,
        parallel: 2,
        ..Default::default()
    };
    let mut c = ClientSession::new(&spec, now, IDLE);
    let bytes = drain(&mut || c.poll_transmit());
    let mut s = ServerSession::new(now, IDLE, TOKEN, "t");
    s.handle_input(&bytes[PREAMBLE_LEN..], now).unwrap();
    s.accept(vec![4000, 4001], now);
    let ev = c
        .handle_input(&drain(&mut || s.poll_transmit()), now)
        .unwrap();
    assert_eq!(ev, vec![ClientEvent::Accepted(TOKEN, vec![4000, 4001])]);
    let proofs: Vec<crate::msg::UdpProof> = (0..2)
        .map(|i| crate::msg::UdpProof {
            flow: Flow::ClientToServer,
            stream_id: i,
            nonce: 77 + u64::from(i),
        })
        .collect();
    c.udp_proof(proofs.clone());
    let ev = s
        .handle_input(&drain(&mut || c.poll_transmit()), now)
        .unwrap();
    assert_eq!(ev, vec![ServerEvent::UdpProof(proofs)]);
    // more proofs than streams is refused
    let mut s2 = ServerSession::new(now, IDLE, TOKEN, "t");
    s2.handle_input(
        &encode(&Msg::Spec {
            spec: spec.clone(),
            feedback: false,
        }),
        now,
    )
    .unwrap();
    s2.accept(vec![1, 2], now);
    let many = encode(&Msg::UdpProof {
        proofs: vec![
            crate::msg::UdpProof {
                flow: Flow::ClientToServer,
                stream_id: 0,
                nonce: 1
            };
            3
        ],
    });
    assert!(s2.handle_input(&many, now).is_err());
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    /// Any valid message, serialized, so junk is mixed with frames that parse.
    fn frames() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(encode(&Msg::Start)),
            Just(encode(&Msg::Spec {
                spec: TestSpec::default(),
                feedback: true,
            })),
            Just(encode(&Msg::Report {
                report: Box::default()
            })),
            Just(encode(&Msg::Busy { retry_after_s: 1.0 })),
            Just(encode(&Msg::Accepted {
                token: "00".repeat(16),
                udp_ports: vec![1, 2],
                feedback_s: Some(1.0),
            })),
            Just(encode(&Msg::UdpFeedback { received: 7 })),
            proptest::collection::vec(any::<u8>(), 0..64),
        ]
    }

    proptest! {
        /// Random sequences of frames and junk, fed in random chunks with time jumping:
        /// neither session panics, and a failed session stays failed.
        #[test]
        fn sessions_never_panic(parts in proptest::collection::vec(frames(), 0..12), jumps in proptest::collection::vec(0u64..30, 0..12)) {
            let now = Instant::now();
            let mut s = ServerSession::new(now, IDLE, TOKEN, "t");
            let mut c = ClientSession::new(&TestSpec::default(), now, IDLE);
            let mut t = now;
            for (i, p) in parts.iter().enumerate() {
                t += Duration::from_secs(jumps.get(i).copied().unwrap_or(0));
                let _ = s.handle_input(p, t);
                let _ = s.handle_timeout(t);
                let _ = c.handle_input(p, t);
                let _ = c.handle_timeout(t);
                let hello = DataHello { token: TOKEN, flow: Flow::ClientToServer, stream_id: i as u32 };
                let _ = s.attach_stream(&hello, t);
                while s.poll_transmit().is_some() {}
                while c.poll_transmit().is_some() {}
            }
            let _ = s.handle_close();
            let _ = c.handle_close();
        }
    }
}

#[test]
fn a_client_stops_a_running_test_and_the_reports_still_follow() {
    let now = Instant::now();
    let spec = TestSpec::default();
    let (mut c, mut s, token) = handshake(&spec, now);
    // nothing to stop before the test runs
    assert!(!c.stop());
    assert!(drain(&mut || c.poll_transmit()).is_empty());
    let hello = DataHello {
        token,
        flow: Flow::ClientToServer,
        stream_id: 0,
    };
    assert_eq!(
        s.attach_stream(&hello, now).unwrap(),
        Some(ServerEvent::Start)
    );
    c.handle_input(&drain(&mut || s.poll_transmit()), now)
        .unwrap();
    assert!(c.stop());
    let ev = s
        .handle_input(&drain(&mut || c.poll_transmit()), now)
        .unwrap();
    assert_eq!(ev, vec![ServerEvent::Stop]);
    c.local_report(SideReport::default(), now);
    s.local_report(SideReport::default(), now);
    let ev = s
        .handle_input(&drain(&mut || c.poll_transmit()), now)
        .unwrap();
    assert!(matches!(ev.as_slice(), [ServerEvent::PeerReport(_)]));
    let ev = c
        .handle_input(&drain(&mut || s.poll_transmit()), now)
        .unwrap();
    assert!(matches!(ev.as_slice(), [ClientEvent::PeerReport(_)]));
    assert!(c.is_finished() && s.is_finished());
    // after its report, a client has nothing left to stop
    assert!(!c.stop());
}

/// Regression (hostile-client review): a malformed frame closed the connection without a
/// word; the client is now told why, once.
#[test]
fn malformed_frames_are_refused_with_a_reason() {
    let now = Instant::now();
    for (bytes, why) in [
        (u32::MAX.to_be_bytes().to_vec(), "exceeds the limit"),
        ([&5u32.to_be_bytes()[..], b"{oops"].concat(), ""),
        (encode(&Msg::Start), "start"),
    ] {
        let mut s = ServerSession::new(now, IDLE, TOKEN, "t");
        assert!(s.handle_input(&bytes, now).is_err());
        let reply = drain(&mut || s.poll_transmit());
        let mut c = ClientSession::new(&TestSpec::default(), now, IDLE);
        match c.handle_input(&reply, now) {
            Err(ProtoError::Refused(reason)) => assert!(reason.contains(why), "{reason}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        // told once, even when the driver refuses again
        s.refuse("again");
        assert!(s.poll_transmit().is_none());
    }
}

/// A session that timed out tells the client so when the driver refuses it.
#[test]
fn a_timed_out_session_tells_the_client() {
    let now = Instant::now();
    let mut s = ServerSession::new(now, IDLE, TOKEN, "t");
    let _ = drain(&mut || s.poll_transmit());
    assert!(s.handle_timeout(now + IDLE).is_err());
    s.refuse("timed out waiting for the test spec");
    assert!(s.poll_transmit().is_some());
}

mod login {
    use super::*;
    use crate::auth::{Binding, ScramClient, Verifier};

    fn verifier() -> Verifier {
        Verifier::derive("pencil", b"salt-of-alice", 4096)
    }

    /// Runs a login of `password` for alice; returns the session pair and the client's
    /// login frames (as a recorder on the wire would see them).
    fn login(
        password: &str,
        server_nonce: &str,
    ) -> (
        ClientSession,
        ServerSession,
        Result<Vec<ServerEvent>, ProtoError>,
    ) {
        let now = Instant::now();
        let spec = TestSpec::default();
        let scram = ScramClient::new("alice", password, "client-nonce", Binding::None).unwrap();
        let mut c = ClientSession::with_login(&spec, now, IDLE, scram);
        let mut s = ServerSession::new(now, IDLE, TOKEN, "test").require_login();
        let bytes = drain(&mut || c.poll_transmit());
        let ev = s.handle_input(&bytes[PREAMBLE_LEN..], now).unwrap();
        assert_eq!(ev, vec![ServerEvent::Login("alice".into())]);
        s.challenge(verifier(), server_nonce, None).unwrap();
        let ev = c
            .handle_input(&drain(&mut || s.poll_transmit()), now)
            .unwrap();
        assert!(ev.is_empty());
        let proof = drain(&mut || c.poll_transmit());
        let r = s.handle_input(&proof, now);
        (c, s, r)
    }

    #[test]
    fn a_right_password_logs_in_then_the_spec_goes() {
        let now = Instant::now();
        let (mut c, mut s, r) = login("pencil", "server-nonce");
        assert_eq!(r.unwrap(), vec![ServerEvent::LoggedIn("alice".into())]);
        // the client checks the server's signature, then sends its spec
        c.handle_input(&drain(&mut || s.poll_transmit()), now)
            .unwrap();
        let ev = s
            .handle_input(&drain(&mut || c.poll_transmit()), now)
            .unwrap();
        assert!(matches!(ev.as_slice(), [ServerEvent::Spec(_)]));
    }

    #[test]
    fn a_wrong_password_is_refused_without_saying_why() {
        let now = Instant::now();
        let (mut c, mut s, r) = login("wrong", "server-nonce");
        assert_eq!(r, Err(ProtoError::Login(AuthError::BadProof)));
        let e = c
            .handle_input(&drain(&mut || s.poll_transmit()), now)
            .unwrap_err();
        assert_eq!(e, ProtoError::Refused(LOGIN_FAILED.into()));
    }

    #[test]
    fn a_recorded_login_replayed_to_a_new_session_is_refused() {
        let now = Instant::now();
        // record a good login's client bytes
        let scram = ScramClient::new("alice", "pencil", "client-nonce", Binding::None).unwrap();
        let mut c = ClientSession::with_login(&TestSpec::default(), now, IDLE, scram);
        let mut s = ServerSession::new(now, IDLE, TOKEN, "test").require_login();
        let first = drain(&mut || c.poll_transmit());
        s.handle_input(&first[PREAMBLE_LEN..], now).unwrap();
        s.challenge(verifier(), "nonce-one", None).unwrap();
        c.handle_input(&drain(&mut || s.poll_transmit()), now)
            .unwrap();
        let proof = drain(&mut || c.poll_transmit());
        assert!(s.handle_input(&proof, now).is_ok());
        // replay both to a new session, which picks a new nonce
        let mut s2 = ServerSession::new(now, IDLE, TOKEN, "test").require_login();
        s2.handle_input(&first[PREAMBLE_LEN..], now).unwrap();
        s2.challenge(verifier(), "nonce-two", None).unwrap();
        assert_eq!(
            s2.handle_input(&proof, now),
            Err(ProtoError::Login(AuthError::Replayed))
        );
    }

    #[test]
    fn an_agent_login_starts_with_an_agent_preamble_and_says_when_a_login_is_missing() {
        let now = Instant::now();
        let mut s = ServerSession::new(now, IDLE, TOKEN, "test")
            .require_login()
            .for_agent();
        let out = drain(&mut || s.poll_transmit());
        assert_eq!(out, crate::Preamble::new(Channel::Agent).emit().to_vec());
        // an agent request where the login should be: told to log in
        let req = crate::agent::encode(&crate::agent::AgentMsg::Started);
        assert_eq!(s.handle_input(&req, now), Err(ProtoError::LoginRequired));
        let reply = String::from_utf8_lossy(&drain(&mut || s.poll_transmit())).into_owned();
        assert!(reply.contains("run with --user NAME"), "{reply}");
        // a control session keeps its own answer to junk
        let mut s = ServerSession::new(now, IDLE, TOKEN, "test").require_login();
        let e = s.handle_input(&req, now).unwrap_err();
        assert!(matches!(e, ProtoError::BadMessage(_)), "{e:?}");
    }

    #[test]
    fn a_spec_without_a_login_and_a_login_without_users_are_refused() {
        let now = Instant::now();
        let mut c = ClientSession::new(&TestSpec::default(), now, IDLE);
        let mut s = ServerSession::new(now, IDLE, TOKEN, "test").require_login();
        let b = drain(&mut || c.poll_transmit());
        assert_eq!(
            s.handle_input(&b[PREAMBLE_LEN..], now),
            Err(ProtoError::LoginRequired)
        );
        let scram = ScramClient::new("alice", "pencil", "n", Binding::None).unwrap();
        let mut c = ClientSession::with_login(&TestSpec::default(), now, IDLE, scram);
        let mut s = ServerSession::new(now, IDLE, TOKEN, "test");
        let b = drain(&mut || c.poll_transmit());
        assert_eq!(
            s.handle_input(&b[PREAMBLE_LEN..], now),
            Err(ProtoError::NoLogin)
        );
    }

    #[test]
    fn a_server_that_does_not_know_the_verifier_is_refused_by_the_client() {
        let now = Instant::now();
        let scram = ScramClient::new("alice", "pencil", "client-nonce", Binding::None).unwrap();
        let mut c = ClientSession::with_login(&TestSpec::default(), now, IDLE, scram);
        let mut s = ServerSession::new(now, IDLE, TOKEN, "test").require_login();
        let b = drain(&mut || c.poll_transmit());
        s.handle_input(&b[PREAMBLE_LEN..], now).unwrap();
        s.challenge(verifier(), "sn", None).unwrap();
        c.handle_input(&drain(&mut || s.poll_transmit()), now)
            .unwrap();
        // a server that does not check the proof and makes up its signature
        let fake = crate::frame::encode(&Msg::LoginOk {
            scram: "v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=".into(),
        });
        assert_eq!(
            c.handle_input(&fake, now),
            Err(ProtoError::Login(AuthError::BadServerSignature))
        );
    }

    #[test]
    fn a_derived_token_is_not_sent() {
        let now = Instant::now();
        let mut c = ClientSession::new(&TestSpec::default(), now, IDLE);
        c.set_data_token([5; 16]);
        let mut s = ServerSession::new(now, IDLE, [5; 16], "test").derived_token();
        let b = drain(&mut || c.poll_transmit());
        s.handle_input(&b[PREAMBLE_LEN..], now).unwrap();
        s.accept(Vec::new(), now);
        let reply = drain(&mut || s.poll_transmit());
        assert!(!String::from_utf8_lossy(&reply).contains("token"));
        let ev = c.handle_input(&reply, now).unwrap();
        assert!(matches!(ev.as_slice(), [ClientEvent::Accepted(t, _)] if *t == [5; 16]));
    }
}
