//! What keeps one client from holding the server: the operator's caps on a spec, checked
//! before anything is allocated, and the watchdog that ends a running test that stalls,
//! crawls or outlives its time bound (docs/server.md, "Stalls and bounds").

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use wirerate_core::spec::{End, Protocol, TestKind};
use wirerate_core::units::format_bps;
use wirerate_core::TestSpec;

/// Why the watchdog ends a running test; the message is what the client and the log are told.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Stop {
    #[error("the test ran past the server's maximum duration of {max_s} s")]
    PastMaxDuration { max_s: f64 },
    #[error("the test moved {total} bytes, over the {max}-byte limit of {rule}")]
    OverByteLimit { total: u64, max: u64, rule: String },
    #[error("stalled: no data moved for {quiet_s:.1} s")]
    Silent { quiet_s: f64 },
    #[error(
        "stalled: {rate:.0} B/s over the last {span_s:.0} s, below the minimum of {min:.0} B/s"
    )]
    Crawling { rate: f64, span_s: f64, min: f64 },
}

impl From<Stop> for wirerate_engine::EngineError {
    fn from(stop: Stop) -> Self {
        wirerate_engine::EngineError::Stopped(Box::new(stop))
    }
}

/// Below this many bytes per second over two idle timeouts, a bulk test is stalled.
pub const MIN_PROGRESS_BYTES_PER_S: f64 = 1024.0;

/// The operator's caps on any one test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Caps {
    /// The longest a test may run, warm-up included; byte- and block-count tests too.
    pub max_duration: Duration,
    /// The fastest rate a spec may ask of one stream, in bit/s.
    pub max_rate_bps: f64,
    /// Buffer memory one test may make the server allocate (streams × buffer size).
    pub max_test_memory: u64,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            max_duration: Duration::from_secs(86_400),
            max_rate_bps: wirerate_core::spec::limits::MAX_RATE_BPS,
            max_test_memory: 256 << 20,
        }
    }
}

/// The UDP receive buffer every UDP receiver allocates, whatever the datagram size.
const UDP_RECV_BUFFER: u64 = 65_536;

/// The buffer memory a test makes this server allocate: one buffer per stream.
pub fn test_memory(spec: &TestSpec) -> u64 {
    let per_stream = match &spec.test {
        TestKind::Stream => match spec.protocol {
            Protocol::Tcp => spec.len_bytes,
            Protocol::Udp => spec.len_bytes.max(UDP_RECV_BUFFER),
        },
        TestKind::Rr(rr) => rr.request_bytes.max(rr.response_bytes).max(UDP_RECV_BUFFER),
        TestKind::Sweep(sw) => sw.max_bytes.max(spec.len_bytes),
        TestKind::Rpm(_) => spec.len_bytes,
    };
    per_stream.saturating_mul(spec.buffered_streams())
}

/// Two amounts as a refusal says them (`asked` over `max`): rounded by `round`, unless
/// rounding makes them look alike ("2.5 s exceeds 2 s", not "2 s exceeds 2 s"), then
/// `exact`.
pub(crate) fn apart(
    asked: f64,
    max: f64,
    round: impl Fn(f64) -> String,
    exact: impl Fn(f64) -> String,
) -> (String, String) {
    let (a, m) = (round(asked), round(max));
    if a == m {
        (exact(asked), exact(max))
    } else {
        (a, m)
    }
}

/// A rate in bit/s, every digit of it.
pub(crate) fn exact_bps(bps: f64) -> String {
    format!("{bps} bit/s")
}

impl Caps {
    /// Checks a valid spec against the caps; the error is one line for the client and the log.
    pub fn check(&self, spec: &TestSpec) -> Result<(), String> {
        let max_s = self.max_duration.as_secs_f64();
        if let Some(s) = spec.send_seconds() {
            if s > max_s + 1e-9 {
                let (s, max) = apart(s, max_s, |x| format!("{x:.0}"), |x| x.to_string());
                return Err(format!(
                    "duration {s} s exceeds the server's maximum of {max} s"
                ));
            }
        }
        if let Some(rate) = spec.rate_bps.filter(|&r| r > self.max_rate_bps) {
            let (rate, max) = apart(rate, self.max_rate_bps, format_bps, exact_bps);
            return Err(format!(
                "rate {rate} per stream exceeds the server's maximum of {max}"
            ));
        }
        let streams = spec.streams();
        let need = wirerate_engine::net::open_files_needed(streams, false, spec.pooled());
        if let Ok((soft, _)) = wirerate_engine::net::raise_open_files(need) {
            if soft < need {
                return Err(format!(
                    "{streams} streams need about {need} open files on the server; its limit is {soft}"
                ));
            }
        }
        let mem = test_memory(spec);
        if mem > self.max_test_memory {
            return Err(format!(
                "streams × buffer size would take {} MiB of server memory; the maximum is {} MiB",
                mem.div_ceil(1 << 20),
                self.max_test_memory >> 20
            ));
        }
        Ok(())
    }
}

/// Bytes a whole test moves when it ends by count, over every stream of every flow.
pub fn target_bytes(spec: &TestSpec) -> Option<u64> {
    if matches!(spec.end, End::Time { .. }) {
        return None;
    }
    let per_flow: u64 = (0..spec.parallel)
        .map(|i| spec.bytes_per_stream(i).unwrap_or(0))
        .fold(0u64, u64::saturating_add);
    Some(per_flow.saturating_mul(spec.direction.flows().len() as u64))
}

/// Watches a running test's progress (bytes moved by this side, both roles) and says when
/// it must end: no byte for the silence limit, less than the minimum rate over the window,
/// or past the time bound of a test that ends by count.
#[derive(Debug)]
pub struct Watchdog {
    silence: Duration,
    window: Duration,
    min_bytes_per_s: f64,
    /// Only bulk transfers have a rate rule; rr and sweep tests move few bytes by design.
    rate_rule: bool,
    hard_end: Option<Instant>,
    /// When a timed test's senders stop.
    planned_end: Option<Instant>,
    max_duration: Duration,
    started: Instant,
    samples: VecDeque<(Instant, u64)>,
    last_total: u64,
    last_change: Instant,
    /// A rule's byte limit on a timed test, and the rule's name.
    max_bytes: Option<(u64, String)>,
}

impl Watchdog {
    pub fn new(spec: &TestSpec, caps: &Caps, idle: Duration, now: Instant) -> Watchdog {
        // a slow paced test is judged against a quarter of what it asked for
        let asked = spec.rate_bps.map(|r| r / 8.0 * f64::from(spec.streams()));
        let min_bytes_per_s = asked.map_or(MIN_PROGRESS_BYTES_PER_S, |a| {
            MIN_PROGRESS_BYTES_PER_S.min(a / 4.0)
        });
        // a sender's counters move when a write returns, and a blocked write returns within
        // the idle timeout (its own stall rule, which ends the test sooner): twice that here;
        // a slowly paced stream may pause longer between its datagrams or bursts, by its
        // streams' own rule
        let paced = spec.stall_after_s(idle.as_secs_f64());
        let silence = (2 * idle).max(Duration::from_secs_f64(paced));
        let hard_end = match spec.end {
            End::Time { .. } => None,
            _ => Some(now + caps.max_duration),
        };
        Watchdog {
            silence,
            window: silence,
            min_bytes_per_s,
            rate_rule: spec.test.is_stream(),
            hard_end,
            planned_end: spec
                .send_seconds()
                .map(|s| now + Duration::from_secs_f64(s)),
            max_duration: caps.max_duration,
            started: now,
            samples: VecDeque::from([(now, 0)]),
            last_total: 0,
            last_change: now,
            max_bytes: None,
        }
    }

    /// Ends the test once this side has moved `max` bytes (a rule's limit).
    pub fn with_max_bytes(mut self, max: Option<(u64, String)>) -> Watchdog {
        self.max_bytes = max;
        self
    }

    /// Takes the bytes moved so far; an error says why the test must end now.
    pub fn observe(&mut self, now: Instant, total: u64) -> Result<(), Stop> {
        if self.hard_end.is_some_and(|e| now >= e) {
            return Err(Stop::PastMaxDuration {
                max_s: self.max_duration.as_secs_f64(),
            });
        }
        if let Some((max, rule)) = self.max_bytes.as_ref().filter(|(m, _)| total > *m) {
            return Err(Stop::OverByteLimit {
                total,
                max: *max,
                rule: rule.clone(),
            });
        }
        if self.last_total == 0 && total > 0 {
            // the rules start with the first byte: workers may take a while to fill large
            // buffers, and a stream that never moves a byte hits its own read or write
            // timeout within the idle timeout
            self.samples = VecDeque::from([(now, total)]);
        }
        if total != self.last_total {
            self.last_total = total;
            self.last_change = now;
        }
        if total == 0 {
            return Ok(());
        }
        let quiet = now.saturating_duration_since(self.last_change);
        if self.rate_rule && quiet >= self.silence {
            return Err(Stop::Silent {
                quiet_s: quiet.as_secs_f64(),
            });
        }
        if self
            .samples
            .back()
            .is_none_or(|&(t, _)| now.saturating_duration_since(t) >= Duration::from_millis(250))
        {
            self.samples.push_back((now, total));
        }
        let from = now.checked_sub(self.window).unwrap_or(now);
        while self.samples.len() >= 2 && self.samples[1].0 <= from {
            self.samples.pop_front();
        }
        let Some(&(t0, b0)) = self.samples.front() else {
            return Ok(());
        };
        let span = now.saturating_duration_since(t0);
        if self.rate_rule && span >= self.window {
            let rate = total.saturating_sub(b0) as f64 / span.as_secs_f64();
            if rate < self.min_bytes_per_s {
                return Err(Stop::Crawling {
                    rate,
                    span_s: span.as_secs_f64(),
                    min: self.min_bytes_per_s,
                });
            }
        }
        Ok(())
    }

    /// When the test should be over, for the busy answer: a timed test's end; the time bound
    /// of a count test, or sooner when the pace so far says it will end sooner.
    pub fn expected_end(&self, now: Instant, target: Option<u64>) -> Option<Instant> {
        if self.planned_end.is_some() {
            return self.planned_end;
        }
        let bound = self.hard_end?;
        let elapsed = now.saturating_duration_since(self.started).as_secs_f64();
        let estimate = target.and_then(|t| {
            let rate = self.last_total as f64 / elapsed;
            (rate > 0.0 && elapsed >= 0.5).then(|| {
                let left = t.saturating_sub(self.last_total) as f64 / rate;
                now + Duration::from_secs_f64(left.min(1e7))
            })
        });
        Some(estimate.map_or(bound, |e| e.min(bound)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(end: End) -> TestSpec {
        TestSpec {
            end,
            ..Default::default()
        }
    }

    #[test]
    fn caps_refuse_long_fast_and_large_tests() {
        let caps = Caps {
            max_duration: Duration::from_secs(30),
            max_rate_bps: 1e9,
            max_test_memory: 256 << 20,
        };
        let long = spec(End::Time { seconds: 60.0 });
        assert!(caps.check(&long).unwrap_err().contains("maximum of 30 s"));
        let fast = TestSpec {
            protocol: Protocol::Udp,
            len_bytes: 1400,
            rate_bps: Some(2e9),
            ..Default::default()
        };
        assert!(caps.check(&fast).unwrap_err().contains("rate"));
        let big = TestSpec {
            parallel: 128,
            len_bytes: 8 << 20,
            ..Default::default()
        };
        assert!(caps.check(&big).unwrap_err().contains("1024 MiB"));
        assert!(caps.check(&TestSpec::default()).is_ok());
    }

    #[test]
    fn a_silent_test_stalls_after_two_idle_timeouts() {
        let t0 = Instant::now();
        let idle = Duration::from_secs(2);
        let mut w = Watchdog::new(&TestSpec::default(), &Caps::default(), idle, t0);
        // nothing moved yet: the streams' own timeouts judge that
        assert!(w.observe(t0 + Duration::from_secs(30), 0).is_ok());
        assert!(w.observe(t0 + Duration::from_secs(31), 1 << 20).is_ok());
        assert!(w.observe(t0 + Duration::from_secs(34), 1 << 20).is_ok());
        assert!(w
            .observe(t0 + Duration::from_millis(35100), 1 << 20)
            .is_err());
    }

    #[test]
    fn a_crawling_test_stalls_over_the_window() {
        let t0 = Instant::now();
        let idle = Duration::from_secs(1);
        let mut w = Watchdog::new(&TestSpec::default(), &Caps::default(), idle, t0);
        // a burst at the start (socket buffers), then 760 B/s
        let mut total = 4 << 20;
        let mut ended = None;
        for i in 1..=40u64 {
            total += 190;
            if w.observe(t0 + Duration::from_millis(250 * i), total)
                .is_err()
            {
                ended = Some(i);
                break;
            }
        }
        let i = ended.expect("stalled");
        assert!((9..=13).contains(&i), "ended at step {i}");
    }

    #[test]
    fn a_fast_test_never_stalls_and_count_tests_are_bounded() {
        let t0 = Instant::now();
        let caps = Caps {
            max_duration: Duration::from_secs(5),
            ..Default::default()
        };
        let s = spec(End::Bytes { bytes: u64::MAX });
        let mut w = Watchdog::new(&s, &caps, Duration::from_secs(1), t0);
        for i in 1..20u64 {
            assert!(w
                .observe(t0 + Duration::from_millis(250 * i), i * 1_000_000)
                .is_ok());
        }
        let end = w.expected_end(t0 + Duration::from_secs(4), target_bytes(&s));
        assert_eq!(end, Some(t0 + Duration::from_secs(5)));
        assert!(w
            .observe(t0 + Duration::from_secs(5), 30_000_000)
            .unwrap_err()
            .to_string()
            .contains("maximum duration"));
    }

    #[test]
    fn a_paced_tcp_test_may_pause_between_bursts_but_not_stop() {
        let t0 = Instant::now();
        let s = TestSpec {
            len_bytes: 1 << 20,
            rate_bps: Some(20e3),
            ..Default::default()
        };
        let mut w = Watchdog::new(&s, &Caps::default(), Duration::from_secs(2), t0);
        // the kernel's unpaced first segments, then one 64 KiB burst every 26.2 s
        let mut total = 458_374;
        assert!(w.observe(t0, total).is_ok());
        let burst = |i: u64| t0 + Duration::from_millis(26_214 * i);
        for i in 1..=8u64 {
            assert!(w
                .observe(burst(i) - Duration::from_millis(100), total)
                .is_ok());
            total += 65_483;
            assert!(w.observe(burst(i), total).is_ok(), "burst {i}");
        }
        // then nothing: stalled after three bursts' time, not after an hour
        assert!(w.observe(burst(8) + Duration::from_secs(70), total).is_ok());
        let e = w
            .observe(burst(8) + Duration::from_secs(79), total)
            .unwrap_err();
        assert!(matches!(e, Stop::Silent { .. }), "{e}");
        assert!(e.to_string().contains("stalled"), "{e}");
    }

    #[test]
    fn a_slow_paced_test_is_judged_by_its_own_rate() {
        let t0 = Instant::now();
        let s = TestSpec {
            protocol: Protocol::Udp,
            len_bytes: 100,
            rate_bps: Some(800.0),
            ..Default::default()
        };
        // 100 B/s asked: one datagram a second is progress enough
        let mut w = Watchdog::new(&s, &Caps::default(), Duration::from_secs(1), t0);
        for i in 1..30u64 {
            assert!(w
                .observe(t0 + Duration::from_millis(250 * i), i / 4 * 100)
                .is_ok());
        }
    }
}
