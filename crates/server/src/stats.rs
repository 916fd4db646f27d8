//! The server's own counters, for `serve --metrics`: tests served and failed, refusals by
//! reason, bytes of the tests served, failed logins. Every decision the server makes is
//! already one log [`Event`]; each is counted here as it is recorded (before the log's rate
//! limit, so a flood of refusals is counted in full), and nothing else in the server has
//! to know about metrics. The gauges (the test slot, pending connections) are read from the
//! server's state when asked.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::logline::{Decision, Event, Kind};
use crate::server::Shared;

/// Why the server turned a connection or a test away: a small fixed set, so each is one
/// labelled series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Another test held the slot.
    Busy,
    /// Too many connections that had not said what they are (`--max-startups`, per source).
    Pending,
    /// No valid preamble, data hello, iperf3 cookie or spec in time.
    Handshake,
    /// TLS required, not offered, or its handshake failed.
    Tls,
    /// A login or client certificate that did not pass, or an address blocked for them.
    Login,
    /// The spec broke a cap or a limits rule.
    Limits,
    /// A data stream with a wrong or stale token, or from another address.
    DataStream,
    /// A third-party request refused.
    ThirdParty,
    Other,
}

impl Refusal {
    pub const ALL: [Refusal; 9] = [
        Refusal::Busy,
        Refusal::Pending,
        Refusal::Handshake,
        Refusal::Tls,
        Refusal::Login,
        Refusal::Limits,
        Refusal::DataStream,
        Refusal::ThirdParty,
        Refusal::Other,
    ];

    /// The label value.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::Busy => "busy",
            Refusal::Pending => "pending",
            Refusal::Handshake => "handshake",
            Refusal::Tls => "tls",
            Refusal::Login => "login",
            Refusal::Limits => "limits",
            Refusal::DataStream => "data_stream",
            Refusal::ThirdParty => "third_party",
            Refusal::Other => "other",
        }
    }

    /// The class of a connection refused for `reason` (the log line's words).
    pub fn of_reason(reason: &str) -> Refusal {
        let r = reason.to_ascii_lowercase();
        let has = |words: &[&str]| words.iter().any(|w| r.contains(w));
        if has(&["too many pending"]) {
            Refusal::Pending
        } else if has(&["login", "certificate", "authentication"]) {
            Refusal::Login
        } else if has(&["tls"]) {
            Refusal::Tls
        } else if r.starts_with("data stream") {
            Refusal::DataStream
        } else if r.starts_with("third-party") {
            Refusal::ThirdParty
        } else if has(&[
            "preamble",
            // bytes that are not a preamble: a scanner, an HTTP request (Preamble::parse)
            "not a wirerate endpoint",
            "unknown channel",
            "hello",
            "cookie",
            "spec",
            "version",
            "parameters",
        ]) {
            Refusal::Handshake
        } else {
            Refusal::Other
        }
    }
}

/// What one event adds to the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// A connection given the test slot.
    Accepted,
    Served {
        bytes: u64,
    },
    Failed,
    Refused(Refusal),
    /// Not a decision the counters keep (a notice, a reload, a third-party test's start).
    Nothing,
}

impl Counted {
    pub fn of(ev: &Event) -> Counted {
        let reason = ev.reason.as_deref().unwrap_or_default();
        match (ev.event, ev.decision) {
            (Kind::Connection, Some(Decision::Accepted)) => Counted::Accepted,
            (_, Some(Decision::Busy)) => Counted::Refused(Refusal::Busy),
            (Kind::Connection, Some(Decision::Refused)) => {
                Counted::Refused(Refusal::of_reason(reason))
            }
            (Kind::Test, Some(Decision::Refused)) => Counted::Refused(Refusal::Limits),
            (Kind::Test, Some(Decision::Accepted)) if ev.error.is_some() => Counted::Failed,
            (Kind::Test, Some(Decision::Accepted)) if reason.starts_with("third-party") => {
                Counted::Nothing
            }
            (Kind::Test, Some(Decision::Accepted)) => Counted::Served {
                bytes: ev.result.as_ref().map_or(0, |r| r.bytes),
            },
            // a test that ended before its spec was heard
            (Kind::Test, None) => Counted::Failed,
            _ => Counted::Nothing,
        }
    }
}

/// The counters, kept in the server's shared state.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    accepted: AtomicU64,
    served: AtomicU64,
    failed: AtomicU64,
    bytes: AtomicU64,
    refused: [AtomicU64; Refusal::ALL.len()],
    logins_failed: AtomicU64,
}

impl Counters {
    pub(crate) fn count(&self, ev: &Event) {
        let add = |c: &AtomicU64, n: u64| {
            c.fetch_add(n, Ordering::Relaxed);
        };
        match Counted::of(ev) {
            Counted::Accepted => add(&self.accepted, 1),
            Counted::Served { bytes } => {
                add(&self.served, 1);
                add(&self.bytes, bytes);
            }
            Counted::Failed => add(&self.failed, 1),
            Counted::Refused(why) => {
                let i = Refusal::ALL.iter().position(|r| *r == why).unwrap_or(0);
                add(&self.refused[i], 1);
                // a blocked address's refusals are not more failed logins
                let reason = ev.reason.as_deref().unwrap_or_default();
                if why == Refusal::Login && !reason.contains("too many failed logins") {
                    add(&self.logins_failed, 1);
                }
            }
            Counted::Nothing => {}
        }
    }
}

/// The server's figures at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Connections given the test slot.
    pub accepted: u64,
    /// Tests that ran to their end, and those that did not.
    pub served: u64,
    pub failed: u64,
    /// Bytes the tests served moved (what their receivers counted).
    pub bytes: u64,
    /// Refusals by reason, every reason listed (zero included).
    pub refused: Vec<(Refusal, u64)>,
    pub logins_failed: u64,
    /// Tests running now (the server runs one at a time) and the slots there are.
    pub active_tests: u64,
    pub slots: u64,
    /// Connections accepted that have not yet said what they are.
    pub pending: u64,
}

/// A handle on a running server's figures (`Server::stats`), for a metrics listener.
#[derive(Clone)]
pub struct ServerStats(pub(crate) Arc<Shared>);

impl ServerStats {
    pub fn snapshot(&self) -> Snapshot {
        let c = &self.0.stats;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Snapshot {
            accepted: get(&c.accepted),
            served: get(&c.served),
            failed: get(&c.failed),
            bytes: get(&c.bytes),
            refused: Refusal::ALL
                .iter()
                .zip(&c.refused)
                .map(|(r, n)| (*r, get(n)))
                .collect(),
            logins_failed: get(&c.logins_failed),
            active_tests: u64::from(self.0.active().is_some()),
            slots: 1,
            pending: self.0.pending.load(Ordering::Relaxed) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logline::ResultShort;

    fn refused(reason: &str) -> Event {
        Event::new(Kind::Connection, None).decided(Decision::Refused, Some(reason.into()))
    }

    /// Bytes that are no preamble (a port scanner, an HTTP request) are a handshake refusal,
    /// in the words the server logs them with.
    #[test]
    fn a_peer_that_is_no_wirerate_endpoint_is_a_handshake_refusal() {
        use wirerate_proto::frame::{Preamble, ProtoError};
        for reason in [
            Preamble::parse(b"GET / HT").unwrap_err().to_string(),
            ProtoError::BadChannel(9).to_string(),
        ] {
            assert_eq!(
                Counted::of(&refused(&reason)),
                Counted::Refused(Refusal::Handshake),
                "{reason}"
            );
        }
    }

    #[test]
    fn refusals_fall_in_their_class() {
        for (reason, class) in [
            ("too many pending connections", Refusal::Pending),
            (
                "too many pending connections from this address",
                Refusal::Pending,
            ),
            (crate::startups::HELD_TO_THE_DEADLINE, Refusal::Pending),
            ("no preamble: peer was silent", Refusal::Handshake),
            ("no iperf3 cookie: timed out", Refusal::Handshake),
            ("no test spec within 2 s", Refusal::Handshake),
            ("login failed: wrong password", Refusal::Login),
            ("third-party: login failed: unknown user", Refusal::Login),
            (
                "this server requires a client certificate (run --client-cert FILE)",
                Refusal::Login,
            ),
            (
                "this server requires TLS on the control connection (run --tls)",
                Refusal::Tls,
            ),
            (
                "data stream: wrong or stale session token",
                Refusal::DataStream,
            ),
            (
                "third-party: tests towards 10.0.0.1 are not allowed",
                Refusal::ThirdParty,
            ),
            ("something new", Refusal::Other),
        ] {
            assert_eq!(
                Counted::of(&refused(reason)),
                Counted::Refused(class),
                "{reason}"
            );
        }
    }

    #[test]
    fn tests_are_counted_by_how_they_ended() {
        let mut served = Event::new(Kind::Test, None).decided(Decision::Accepted, None);
        served.result = Some(ResultShort {
            goodput_bps: 8e9,
            bytes: 10_000,
            seconds: 1.0,
        });
        let mut failed = served.clone();
        failed.error = Some("stream broke".into());
        let limits = Event::new(Kind::Test, None).decided(Decision::Refused, Some("cap".into()));
        let busy = Event::new(Kind::Connection, None).decided(Decision::Busy, None);
        let third = Event::new(Kind::Test, None).decided(
            Decision::Accepted,
            Some("third-party test towards x".into()),
        );
        let c = Counters::default();
        for ev in [
            &served,
            &served,
            &failed,
            &limits,
            &busy,
            &third,
            &refused("login failed: x"),
        ] {
            c.count(ev);
        }
        c.count(&refused(
            "too many failed logins from this address; retry in 3 s",
        ));
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        assert_eq!(
            (get(&c.served), get(&c.failed), get(&c.bytes)),
            (2, 1, 20_000)
        );
        let class =
            |r: Refusal| get(&c.refused[Refusal::ALL.iter().position(|x| *x == r).unwrap()]);
        assert_eq!(
            (
                class(Refusal::Limits),
                class(Refusal::Busy),
                class(Refusal::Login)
            ),
            (1, 1, 2)
        );
        assert_eq!(get(&c.logins_failed), 1);
    }
}
