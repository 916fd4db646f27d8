//! The server's UDP circuit breaker on the control connection (the rule is
//! `wirerate_core::breaker`, the feedback's state `wirerate_proto::feedback`). While a
//! server sends UDP, every client's control connection is watched by TCP itself: keepalive
//! probes each second, and a connection that has acknowledged nothing for the breaker's
//! time fails with ETIMEDOUT. That is the only sign of life an iperf3 client, or a wirerate
//! client from before `udp_feedback`, gives while it receives; a client whose path was cut
//! is dropped, and with it the test, within the same few seconds as a silent receiver.

use std::io;
use std::net::TcpStream;
use std::time::Duration;

use socket2::{SockRef, TcpKeepalive};
use wirerate_core::breaker::{FEEDBACK_INTERVAL_S, MISSED_FEEDBACK};
use wirerate_core::TestSpec;

use wirerate_engine::EngineError;

/// Makes TCP watch the control connection of a test whose server sends UDP: a probe after
/// a feedback interval of quiet and each interval after, and the connection fails once
/// nothing has been acknowledged for the breaker's time (TCP_USER_TIMEOUT, which also
/// covers frames the server wrote and the client never acknowledged). Best effort.
pub fn watch_control(sock: &TcpStream, spec: &TestSpec) {
    let s = SockRef::from(sock);
    let every = Duration::from_secs_f64(FEEDBACK_INTERVAL_S);
    let ka = TcpKeepalive::new()
        .with_time(every)
        .with_interval(every)
        .with_retries(MISSED_FEEDBACK as u32);
    let _ = s.set_tcp_keepalive(&ka);
    let _ = s.set_tcp_user_timeout(Some(Duration::from_secs_f64(spec.breaker_after_s())));
}

/// Whether a read or write of the control connection failed because TCP gave up on the
/// peer (no acknowledgement within the user timeout, or keepalive probes unanswered).
pub fn gave_up(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ETIMEDOUT)
}

/// The error of a control connection TCP gave up on: the breaker's words, for the log and
/// the peer.
pub fn dead_control(e: io::Error, peer_read: &'static str) -> EngineError {
    if gave_up(&e) {
        EngineError::Setup(
            "circuit breaker: the client acknowledged nothing on its control connection for \
             the breaker's time; stopped sending to it"
                .into(),
        )
    } else {
        EngineError::io(peer_read)(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn a_udp_sending_test_has_its_control_connection_watched_by_tcp() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let spec = TestSpec {
            protocol: wirerate_core::Protocol::Udp,
            direction: wirerate_core::Direction::Reverse,
            ..Default::default()
        };
        watch_control(&c, &spec);
        let s = SockRef::from(&c);
        assert!(s.keepalive().unwrap());
        assert_eq!(s.keepalive_time().unwrap(), Duration::from_secs(1));
        assert_eq!(s.keepalive_interval().unwrap(), Duration::from_secs(1));
        assert_eq!(s.keepalive_retries().unwrap(), 3);
        assert_eq!(s.tcp_user_timeout().unwrap(), Some(Duration::from_secs(3)));
        assert!(gave_up(&io::Error::from_raw_os_error(libc::ETIMEDOUT)));
        assert!(!gave_up(&io::Error::from(io::ErrorKind::WouldBlock)));
    }
}
