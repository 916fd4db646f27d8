//! The client's own intervals of what it sends to an iperf3 server. An iperf3 server
//! reports what it received only in its final results, so these lines are the sender's
//! count (bytes written into the sockets), cut on the same schedule as received intervals.
//! A server cuts by the same clock an iperf3 client's UDP upload from what it received, and
//! the flow it sends from what it wrote.

use std::time::{Duration, Instant};

use wirerate_core::result::Interval;
use wirerate_core::spec::Flow;
use wirerate_core::TestSpec;

/// Cuts intervals of one flow from a running total of its bytes.
pub struct SentClock {
    flow: Flow,
    start: Instant,
    period: f64,
    omit_s: f64,
    index: u64,
    last_bytes: u64,
}

impl SentClock {
    /// A clock for a test whose client sends (`None` when it does not, or intervals are off).
    pub fn new(spec: &TestSpec, start: Instant) -> Option<SentClock> {
        SentClock::of(Flow::ClientToServer, spec, start)
    }

    /// A clock for `flow` of the test (`None` when the test has no such flow, or intervals
    /// are off).
    pub fn of(flow: Flow, spec: &TestSpec, start: Instant) -> Option<SentClock> {
        let has = spec.direction.flows().contains(&flow);
        (has && spec.interval_s > 0.0).then_some(SentClock {
            flow,
            start,
            period: spec.interval_s,
            omit_s: spec.omit_s,
            index: 0,
            last_bytes: 0,
        })
    }

    /// When the next interval ends.
    pub fn next(&self) -> Instant {
        self.start + Duration::from_secs_f64((self.index + 1) as f64 * self.period)
    }

    /// The intervals that ended by `now`, given the bytes sent so far. Bytes are read once
    /// per call: the first of several intervals one late call passes over takes them all.
    pub fn poll(&mut self, now: Instant, sent: u64) -> Vec<Interval> {
        let mut out = Vec::new();
        while now >= self.next() {
            let (start_s, end_s) = (
                self.index as f64 * self.period,
                (self.index + 1) as f64 * self.period,
            );
            let bytes = sent.saturating_sub(self.last_bytes);
            self.last_bytes += bytes;
            let omitted = end_s <= self.omit_s + 1e-9;
            out.push(interval(self.flow, start_s, end_s, bytes, omitted));
            self.index += 1;
        }
        out
    }

    /// The last interval, cut at `now` when the flow ended (what `poll` had not cut): none
    /// when nothing came since, or when it is a tail of the clock's period.
    pub fn close(&mut self, now: Instant, sent: u64) -> Option<Interval> {
        let start_s = self.index as f64 * self.period;
        let end_s = now.saturating_duration_since(self.start).as_secs_f64();
        let bytes = sent.saturating_sub(self.last_bytes);
        if bytes == 0 || wirerate_core::window::is_tail(end_s - start_s, self.period) {
            return None;
        }
        self.last_bytes += bytes;
        self.index += 1;
        let omitted = end_s <= self.omit_s + 1e-9;
        Some(interval(self.flow, start_s, end_s, bytes, omitted))
    }
}

fn interval(flow: Flow, start_s: f64, end_s: f64, bytes: u64, omitted: bool) -> Interval {
    Interval {
        flow,
        stream: None,
        start_s,
        end_s,
        bytes,
        bps: bytes as f64 * 8.0 / (end_s - start_s),
        omitted,
        packets: None,
        loss_percent: None,
        jitter_ms: None,
        tcp: None,
        bottleneck: None,
        rr: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirerate_core::spec::Direction;

    #[test]
    fn sent_bytes_are_cut_per_interval() {
        let mut spec = TestSpec {
            interval_s: 1.0,
            ..Default::default()
        };
        let t0 = Instant::now();
        let mut c = SentClock::new(&spec, t0).expect("forward sends");
        assert!(c.poll(t0 + Duration::from_millis(500), 10).is_empty());
        let a = c.poll(t0 + Duration::from_millis(1001), 1000);
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].bytes, a[0].start_s, a[0].end_s), (1000, 0.0, 1.0));
        assert_eq!(a[0].bps, 8000.0);
        let b = c.poll(t0 + Duration::from_millis(2001), 1500);
        assert_eq!(b[0].bytes, 500);
        spec.direction = Direction::Reverse;
        assert!(SentClock::new(&spec, t0).is_none());
        let mut back = SentClock::of(Flow::ServerToClient, &spec, t0).expect("reverse");
        let a = back.poll(t0 + Duration::from_millis(1001), 700);
        assert_eq!((a[0].flow, a[0].bytes), (Flow::ServerToClient, 700));
    }

    #[test]
    fn a_flow_that_ends_between_ticks_closes_its_last_interval() {
        let spec = TestSpec {
            interval_s: 1.0,
            ..Default::default()
        };
        let t0 = Instant::now();
        let mut c = SentClock::new(&spec, t0).expect("forward sends");
        assert_eq!(c.poll(t0 + Duration::from_millis(1001), 1000).len(), 1);
        let last = c
            .close(t0 + Duration::from_millis(1950), 1950)
            .expect("0.95 s");
        assert_eq!((last.bytes, last.start_s), (950, 1.0));
        assert!((last.end_s - 1.95).abs() < 1e-9, "{}", last.end_s);
        // nothing more came, or a tail of the period: no line
        assert!(c.close(t0 + Duration::from_millis(2500), 1950).is_none());
        let mut c = SentClock::new(&spec, t0).expect("forward sends");
        c.poll(t0 + Duration::from_millis(1001), 1000);
        assert!(c.close(t0 + Duration::from_millis(1050), 1100).is_none());
    }
}
