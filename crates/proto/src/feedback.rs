//! The UDP circuit breaker, sans IO (RFC 8085 §3.1.10, RFC 8084; the rule and its constants
//! are `wirerate_core::breaker`): a sender fed its receiver's reports of what it received
//! says when it must stop.

use std::time::{Duration, Instant};

use wirerate_core::TestSpec;

/// Watches a UDP sender's receiver through its reports (`udp_feedback`): trips once the
/// sender has sent more since the last sign of progress and the breaker's time has passed
/// without another.
#[derive(Debug, Clone)]
pub struct Breaker {
    window: Duration,
    /// The most the receiver has said it received.
    received: u64,
    /// What this side had sent when that progress was heard.
    sent_then: u64,
    /// When progress was last heard (the start, before any).
    since: Instant,
    /// Whether any report came at all.
    reported: bool,
    /// What this side had sent at the last check, and when that last grew.
    sent_last: u64,
    sending_at: Instant,
}

impl Breaker {
    /// A breaker for the senders of `spec`, which start at `now`.
    pub fn new(spec: &TestSpec, now: Instant) -> Breaker {
        Breaker {
            window: Duration::from_secs_f64(spec.breaker_after_s()),
            received: 0,
            sent_then: 0,
            since: now,
            reported: false,
            sent_last: 0,
            sending_at: now,
        }
    }

    /// A report: the receiver has taken `received` bytes so far; this side had sent `sent`.
    pub fn feedback(&mut self, received: u64, sent: u64, now: Instant) {
        self.reported = true;
        if received > self.received {
            self.received = received;
            self.sent_then = sent;
            self.since = now;
        }
    }

    /// Whether the senders, having sent `sent` bytes by `now`, may go on; the error says why
    /// not, for the log and the peer. A sender that has sent nothing since the last progress,
    /// or nothing for the breaker's time (its test is over), is never stopped.
    pub fn check(&mut self, sent: u64, now: Instant) -> Result<(), Tripped> {
        if sent > self.sent_last {
            self.sent_last = sent;
            self.sending_at = now;
        }
        let quiet = now.saturating_duration_since(self.since);
        let sending = now.saturating_duration_since(self.sending_at) < self.window;
        if sent <= self.sent_then || quiet < self.window || !sending {
            return Ok(());
        }
        let what = if self.reported {
            "the client's UDP receivers reported nothing new received"
        } else {
            "no report from the client's UDP receivers"
        };
        Err(Tripped {
            what,
            quiet_s: quiet.as_secs_f64(),
        })
    }
}

/// The breaker stopped the senders: what the client's receivers said (or did not), and for
/// how long.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("circuit breaker: {what} for {quiet_s:.1} s; stopped sending to it")]
pub struct Tripped {
    pub what: &'static str,
    pub quiet_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirerate_core::spec::{Direction, Protocol};

    fn spec() -> TestSpec {
        TestSpec {
            protocol: Protocol::Udp,
            direction: Direction::Reverse,
            rate_bps: Some(1e6),
            len_bytes: 1250,
            ..Default::default()
        }
    }

    fn at(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn progress_each_second_keeps_the_sender_going() {
        let t0 = Instant::now();
        let mut b = Breaker::new(&spec(), t0);
        for s in 1..=20u64 {
            b.feedback(s * 125_000, s * 125_000, at(t0, s * 1000));
            assert!(b.check(s * 125_000 + 1, at(t0, s * 1000 + 999)).is_ok());
        }
    }

    #[test]
    fn a_silent_receiver_trips_the_breaker_after_three_intervals() {
        let t0 = Instant::now();
        let mut b = Breaker::new(&spec(), t0);
        assert!(b.check(1 << 20, at(t0, 2999)).is_ok());
        let e = b.check(1 << 20, at(t0, 3000)).unwrap_err().to_string();
        assert!(e.contains("no report") && e.contains("3.0 s"), "{e}");
        // reports that say nothing new count as none
        b.feedback(5000, 6000, at(t0, 1000));
        for s in 2..=3 {
            b.feedback(5000, 6000 * s, at(t0, 1000 * s));
        }
        assert!(b.check(1 << 20, at(t0, 3999)).is_ok());
        let e = b.check(1 << 20, at(t0, 4000)).unwrap_err().to_string();
        assert!(e.contains("nothing new"), "{e}");
    }

    #[test]
    fn a_sender_that_has_finished_is_never_stopped() {
        let t0 = Instant::now();
        let mut b = Breaker::new(&spec(), t0);
        b.feedback(1_000_000, 1_000_000, at(t0, 8000));
        // the last report covered all that was sent: nothing more goes out
        assert!(b.check(1_000_000, at(t0, 60_000)).is_ok());
        // the last datagrams were lost, and the sender has stopped since
        let mut b = Breaker::new(&spec(), t0);
        b.feedback(900_000, 900_000, at(t0, 8000));
        assert!(b.check(1_000_000, at(t0, 9000)).is_ok());
        assert!(b.check(1_000_000, at(t0, 12_000)).is_ok());
        assert!(b.check(1_000_000, at(t0, 60_000)).is_ok());
    }
}
