//! The UDP feedback's part of the session state machines: a server that sends UDP asks its
//! client for reports of what its receivers took (`udp_feedback`), and a client that
//! promised them in its spec sends one every interval the server named, while the test runs.
//! The server's circuit breaker reads them (`crate::feedback::Breaker`).

use std::time::{Duration, Instant};

use super::{ClientSession, ClientState, ServerSession};
use crate::frame::encode;
use crate::msg::Msg;

/// The interval a server asked for, as the client keeps it: a tenth of a second at the
/// least, a minute at the most, so no server makes a client flood it or fall silent.
pub(super) fn feedback_every(feedback_s: Option<f64>) -> Option<Duration> {
    let s = feedback_s.filter(|s| s.is_finite() && *s > 0.0)?;
    Some(Duration::from_secs_f64(s.clamp(0.1, 60.0)))
}

impl ServerSession {
    /// Whether the client reports what its UDP receivers take: it promised to in its spec,
    /// and `accepted` asked for it (the test's server sends UDP). Without, only the control
    /// connection's liveness says the client is there.
    pub fn client_gives_feedback(&self) -> bool {
        self.feedback == (true, true)
    }
}

impl ClientSession {
    /// Queues a report that this side's UDP receivers have taken `received` bytes, when the
    /// server asked for reports and one is due at `now`; only while the test runs and
    /// before this side's final report.
    pub fn udp_feedback(&mut self, received: u64, now: Instant) {
        if self.c.state != ClientState::Running || self.c.local_report {
            return;
        }
        let Some((every, Some(next))) = self.feedback.as_mut() else {
            return;
        };
        if now >= *next {
            *next = now + *every;
            self.c.out.push_back(encode(&Msg::UdpFeedback { received }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use crate::data::DataHello;
    use wirerate_core::spec::{Direction, Protocol};

    const IDLE: Duration = Duration::from_secs(10);
    const TOKEN: Token = [3; 16];

    fn drain(out: &mut dyn FnMut() -> Option<Vec<u8>>) -> Vec<u8> {
        std::iter::from_fn(out).flatten().collect()
    }

    /// A frame of JSON as a peer of another version writes it.
    fn frame(json: &str) -> Vec<u8> {
        let mut out = (json.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(json.as_bytes());
        out
    }

    fn udp_reverse() -> TestSpec {
        TestSpec {
            protocol: Protocol::Udp,
            direction: Direction::Reverse,
            len_bytes: 1250,
            rate_bps: Some(1e6),
            ..Default::default()
        }
    }

    /// A client and a server of `spec` up to `Start`, the client's opening bytes given as
    /// they are (a client from before the feedback may send other ones).
    fn running(
        spec: &TestSpec,
        opening: Option<Vec<u8>>,
        t0: Instant,
    ) -> (ClientSession, ServerSession) {
        let mut c = ClientSession::new(spec, t0, IDLE);
        let mine = drain(&mut || c.poll_transmit());
        let bytes = opening.unwrap_or_else(|| mine[PREAMBLE_LEN..].to_vec());
        let mut s = ServerSession::new(t0, IDLE, TOKEN, "t");
        s.handle_input(&bytes, t0).unwrap();
        s.accept(vec![4000], t0);
        c.handle_input(&drain(&mut || s.poll_transmit()), t0)
            .unwrap();
        let hello = DataHello {
            token: TOKEN,
            flow: spec.direction.flows()[0],
            stream_id: 0,
        };
        assert_eq!(
            s.attach_stream(&hello, t0).unwrap(),
            Some(ServerEvent::Start)
        );
        c.handle_input(&drain(&mut || s.poll_transmit()), t0)
            .unwrap();
        (c, s)
    }

    #[test]
    fn a_client_reports_each_interval_the_server_asked_for_while_the_test_runs() {
        let t0 = Instant::now();
        let (mut c, mut s) = running(&udp_reverse(), None, t0);
        assert!(s.client_gives_feedback());
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut heard = Vec::new();
        for ms in (0..=3500).step_by(20) {
            c.udp_feedback(ms * 100, at(ms));
            for ev in s
                .handle_input(&drain(&mut || c.poll_transmit()), at(ms))
                .unwrap()
            {
                heard.push(ev);
            }
        }
        // one a second from the start: at 1, 2 and 3 s
        assert_eq!(
            heard,
            vec![
                ServerEvent::UdpFeedback(100_000),
                ServerEvent::UdpFeedback(200_000),
                ServerEvent::UdpFeedback(300_000)
            ]
        );
        // none after this side's report
        c.local_report(SideReport::default(), at(3600));
        let _ = drain(&mut || c.poll_transmit());
        c.udp_feedback(1, at(9000));
        assert!(c.poll_transmit().is_none());
    }

    #[test]
    fn a_client_from_before_the_feedback_is_served_without_it() {
        let t0 = Instant::now();
        // what such a client sends: the spec without the field
        let old = frame(&format!(
            r#"{{"type":"spec","spec":{}}}"#,
            serde_json::to_string(&udp_reverse()).unwrap()
        ));
        let (_c, s) = running(&udp_reverse(), Some(old), t0);
        assert!(!s.client_gives_feedback());
    }

    #[test]
    fn a_server_from_before_the_feedback_is_sent_none() {
        let t0 = Instant::now();
        let mut c = ClientSession::new(&udp_reverse(), t0, IDLE);
        let _ = drain(&mut || c.poll_transmit());
        let mut answer = crate::frame::Preamble::new(crate::frame::Channel::Control)
            .emit()
            .to_vec();
        answer.extend(encode(&Msg::Welcome {
            server: "old".into(),
        }));
        answer.extend(frame(&format!(
            r#"{{"type":"accepted","token":"{}","udp_ports":[4000]}}"#,
            crate::msg::token_hex(&TOKEN)
        )));
        answer.extend(encode(&Msg::Start));
        c.handle_input(&answer, t0).unwrap();
        c.udp_feedback(5, t0 + Duration::from_secs(5));
        assert!(c.poll_transmit().is_none());
    }

    #[test]
    fn a_server_that_does_not_send_udp_asks_for_no_feedback_and_refuses_it() {
        let t0 = Instant::now();
        let spec = TestSpec {
            protocol: Protocol::Udp,
            ..udp_reverse()
        };
        let forward = TestSpec {
            direction: Direction::Forward,
            ..spec
        };
        let (mut c, mut s) = running(&forward, None, t0);
        assert!(!s.client_gives_feedback());
        c.udp_feedback(5, t0 + Duration::from_secs(5));
        assert!(c.poll_transmit().is_none());
        let e = s
            .handle_input(&encode(&Msg::UdpFeedback { received: 1 }), t0)
            .unwrap_err();
        assert!(
            matches!(
                e,
                ProtoError::Unexpected {
                    got: "udp_feedback",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn the_interval_a_server_names_is_bounded() {
        assert_eq!(feedback_every(Some(1e-9)), Some(Duration::from_millis(100)));
        assert_eq!(feedback_every(Some(1e9)), Some(Duration::from_secs(60)));
        assert_eq!(feedback_every(Some(f64::NAN)), None);
        assert_eq!(feedback_every(None), None);
        assert_eq!(feedback_every(Some(1.0)), Some(Duration::from_secs(1)));
    }
}
