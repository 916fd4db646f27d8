//! The server's log lines. Each decision (a connection let in, refused or told busy; a test
//! served, refused or failed) is one [`Event`]; `--log-format json` writes it as one JSON
//! line, text keeps the human sentence. Lines about rejected connections are rate-limited:
//! a prober must not be able to fill the operator's disk. Each source may log a few lines a
//! second, and all sources together a few more; the rest are counted and the count is
//! logged with the next line let through.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use wirerate_core::spec::{Direction, End, Protocol};
use wirerate_core::units::rfc3339;
use wirerate_core::TestSpec;

/// Lines per source per second that are always logged.
pub const LINES_PER_SECOND: u32 = 5;
/// Lines per second of all sources together: many addresses (a botnet, or one host with an
/// IPv6 prefix) do not multiply the per-source budget.
pub const ALL_LINES_PER_SECOND: u32 = 20;
/// Sources tracked at once; beyond that the table is cleared (a flood of addresses).
const MAX_SOURCES: usize = 4096;

#[derive(Debug, Default)]
pub struct RateLimit {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    by_source: HashMap<Option<IpAddr>, Window>,
    all: Option<Window>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    start: Instant,
    lines: u32,
    suppressed: u64,
}

impl Window {
    fn new(now: Instant) -> Window {
        Window {
            start: now,
            lines: 0,
            suppressed: 0,
        }
    }

    /// Counts a line in this second's window: false when it is over `max`.
    fn take(&mut self, now: Instant, max: u32) -> bool {
        if now.saturating_duration_since(self.start) >= Duration::from_secs(1) {
            self.start = now;
            self.lines = 0;
        }
        if self.lines >= max {
            self.suppressed += 1;
            return false;
        }
        self.lines += 1;
        true
    }
}

impl RateLimit {
    /// Some(suppressed lines so far) when this line may be logged, None when it is counted.
    pub fn admit(&self, from: Option<IpAddr>, now: Instant) -> Option<u64> {
        let from = from.map(crate::limits::source_of);
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let State { by_source, all } = &mut *state;
        let map = by_source;
        if map.len() >= MAX_SOURCES && !map.contains_key(&from) {
            map.retain(|_, w| now.saturating_duration_since(w.start) < Duration::from_secs(1));
            if map.len() >= MAX_SOURCES {
                map.clear();
            }
        }
        let w = map.entry(from).or_insert(Window::new(now));
        if !w.take(now, LINES_PER_SECOND) {
            return None;
        }
        let all = all.get_or_insert(Window::new(now));
        if !all.take(now, ALL_LINES_PER_SECOND) {
            return None;
        }
        Some(std::mem::take(&mut w.suppressed) + std::mem::take(&mut all.suppressed))
    }
}

/// How the server writes its log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// What a log line is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A new connection and what became of it.
    Connection,
    /// A test: refused, served, or failed.
    Test,
    /// The limits (or users) file reloaded on SIGHUP, or kept because the new one is bad.
    Reload,
    /// Anything else the server has to say (an accept failure and the like).
    Notice,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Accepted,
    Refused,
    Busy,
}

/// A test's spec in short.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpecShort {
    pub protocol: Protocol,
    pub direction: Direction,
    pub parallel: u32,
    pub seconds: Option<f64>,
    pub bytes: Option<u64>,
}

impl SpecShort {
    pub fn of(spec: &TestSpec) -> SpecShort {
        let (seconds, bytes) = match spec.end {
            End::Time { seconds } => (Some(seconds), None),
            End::Bytes { bytes } => (None, Some(bytes)),
            End::Blocks { blocks } => (
                None,
                Some(
                    blocks
                        .saturating_mul(spec.len_bytes)
                        .saturating_mul(u64::from(spec.parallel)),
                ),
            ),
        };
        SpecShort {
            protocol: spec.protocol,
            direction: spec.direction,
            parallel: spec.parallel,
            seconds,
            bytes,
        }
    }
}

/// A served test's result in short, as the client will see it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResultShort {
    pub goodput_bps: f64,
    pub bytes: u64,
    pub seconds: f64,
}

/// One log line. Every field is written, null when it does not apply, so a reader can rely
/// on the shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    pub time: String,
    pub event: Kind,
    pub peer: Option<String>,
    pub user: Option<String>,
    pub decision: Option<Decision>,
    pub rule: Option<String>,
    pub reason: Option<String>,
    pub spec: Option<SpecShort>,
    pub result: Option<ResultShort>,
    pub error: Option<String>,
}

impl Event {
    pub fn new(event: Kind, peer: Option<String>) -> Event {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        Event {
            time: rfc3339(now),
            event,
            peer,
            user: None,
            decision: None,
            rule: None,
            reason: None,
            spec: None,
            result: None,
            error: None,
        }
    }

    pub fn reason(mut self, reason: String) -> Event {
        self.reason = Some(reason);
        self
    }

    pub fn decided(mut self, d: Decision, reason: Option<String>) -> Event {
        self.decision = Some(d);
        self.reason = reason;
        self
    }

    /// The line as JSON; serializing plain data cannot fail, but if it did the line would
    /// still say something.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// What a test's log line will say, gathered while it is set up and run.
#[derive(Debug, Clone, Default)]
pub struct TestNote {
    pub spec: Option<SpecShort>,
    pub rule: Option<String>,
    pub user: Option<String>,
    /// Why the spec was refused (by a cap or a rule).
    pub refused: Option<String>,
    pub result: Option<ResultShort>,
}

impl TestNote {
    /// The test's line: refused with the reason, or accepted with its result or its error.
    /// A connection that never sent a spec has no decision, only its error.
    pub fn event(&self, peer: &str, error: Option<String>) -> Event {
        let mut ev = Event::new(Kind::Test, Some(peer.to_string()));
        ev.spec = self.spec.clone();
        ev.rule = self.rule.clone();
        ev.user = self.user.clone();
        match (&self.refused, &self.spec) {
            (Some(why), _) => ev.decided(Decision::Refused, Some(why.clone())),
            (None, Some(_)) => {
                ev.result = self.result.clone();
                ev.error = error;
                ev.decided(Decision::Accepted, None)
            }
            (None, None) => {
                ev.error = error;
                ev
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_cut_and_counted() {
        let r = RateLimit::default();
        let ip = Some(IpAddr::from([127, 0, 0, 1]));
        let t0 = Instant::now();
        let let_through = (0..100).filter(|_| r.admit(ip, t0).is_some()).count();
        assert_eq!(let_through, LINES_PER_SECOND as usize);
        // another source is not silenced by the first
        assert_eq!(r.admit(Some(IpAddr::from([127, 0, 0, 2])), t0), Some(0));
        assert_eq!(r.admit(ip, t0 + Duration::from_secs(1)), Some(95));
    }

    #[test]
    fn many_sources_share_one_budget() {
        let r = RateLimit::default();
        let t0 = Instant::now();
        // 200 addresses, 15 lines each within a second: 3000 lines asked for
        let let_through = (0..15u8)
            .flat_map(|_| 0..200u8)
            .filter(|&i| r.admit(Some(IpAddr::from([10, 0, 0, i])), t0).is_some())
            .count();
        assert_eq!(let_through, ALL_LINES_PER_SECOND as usize);
        // the next line let through says how many were held back in all (the sources'
        // own counts come with their next lines)
        let said = r.admit(
            Some(IpAddr::from([10, 0, 1, 1])),
            t0 + Duration::from_secs(1),
        );
        let held = said.unwrap();
        assert!(held > 0 && held < 3000, "{held}");
    }

    #[test]
    fn events_are_one_json_line_with_every_field() {
        let spec = TestSpec {
            end: End::Bytes { bytes: 1 << 20 },
            parallel: 2,
            ..Default::default()
        };
        let mut e = Event::new(Kind::Test, Some("127.0.0.1:4000".into()))
            .decided(Decision::Refused, Some("too \"big\"\n".into()));
        e.spec = Some(SpecShort::of(&spec));
        e.rule = Some("guests".into());
        let line = e.to_json();
        assert!(!line.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["event"], "test");
        assert_eq!(v["decision"], "refused");
        assert_eq!(v["rule"], "guests");
        assert_eq!(v["reason"], "too \"big\"\n");
        assert_eq!(v["spec"]["bytes"], 1 << 20);
        assert_eq!(v["spec"]["parallel"], 2);
        assert!(v["user"].is_null() && v["result"].is_null());
        assert!(v["time"].as_str().unwrap().ends_with('Z'));
    }
}
