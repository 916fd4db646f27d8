//! The UDP circuit breaker's rule, defined once (RFC 8085 §3.1.10, RFC 8084): a UDP sender
//! must stop when its receiver gives no sign of receiving. UDP has no acknowledgements, so a
//! server sending to a client whose path died would go on until the test's end; the
//! receiving client reports what it received every [`FEEDBACK_INTERVAL_S`], and a sender
//! that has gone [`MISSED_FEEDBACK`] of those intervals without a report of progress stops.

use crate::spec::{Flow, Protocol, TestSpec};

/// How often a UDP receiver reports what it has received to the sender's side.
pub const FEEDBACK_INTERVAL_S: f64 = 1.0;

/// How many feedback intervals a UDP sender may go without a sign of progress before the
/// breaker stops it.
pub const MISSED_FEEDBACK: f64 = 3.0;

impl TestSpec {
    /// Whether the server sends UDP datagrams at its own pace in this test: a UDP bulk test
    /// with a server-to-client flow (`-u -R`, `-u --bidir`). rr answers only what it is asked.
    pub fn server_sends_udp(&self) -> bool {
        self.protocol == Protocol::Udp
            && self.test.is_stream()
            && self.direction.flows().contains(&Flow::ServerToClient)
    }

    /// Seconds a UDP sender may go without a sign that its receiver receives before it stops:
    /// [`MISSED_FEEDBACK`] feedback intervals, or longer for a slowly paced stream, whose
    /// receiver may rightly see nothing for three of its pace's gaps (the stall rule).
    pub fn breaker_after_s(&self) -> f64 {
        self.stall_after_s(MISSED_FEEDBACK * FEEDBACK_INTERVAL_S)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Direction;

    fn udp(direction: Direction, rate_bps: f64, len_bytes: u64) -> TestSpec {
        TestSpec {
            protocol: Protocol::Udp,
            direction,
            rate_bps: Some(rate_bps),
            len_bytes,
            ..Default::default()
        }
    }

    #[test]
    fn the_breaker_waits_three_intervals_or_three_gaps_of_a_slow_pace() {
        // 1 Mbit/s of 1250-byte datagrams: a datagram every 10 ms, so three intervals
        assert_eq!(udp(Direction::Reverse, 1e6, 1250).breaker_after_s(), 3.0);
        // 2 kbit/s of 1000-byte datagrams: one every 4 s, so three gaps
        let slow = udp(Direction::Reverse, 2e3, 1000).breaker_after_s();
        assert!((slow - 12.0).abs() < 1e-9, "{slow}");
    }

    #[test]
    fn only_a_server_that_sends_udp_needs_the_breaker() {
        assert!(udp(Direction::Reverse, 1e6, 1250).server_sends_udp());
        assert!(udp(Direction::Bidir, 1e6, 1250).server_sends_udp());
        assert!(!udp(Direction::Forward, 1e6, 1250).server_sends_udp());
        let tcp = TestSpec {
            direction: Direction::Reverse,
            ..Default::default()
        };
        assert!(!tcp.server_sends_udp());
    }
}
