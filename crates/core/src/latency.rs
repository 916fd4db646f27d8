//! Latency histograms and the statistics drawn from them. A thin layer over the
//! `hdrhistogram` crate: values are recorded in nanoseconds with three significant digits
//! (0.1 % resolution) up to an hour, and every statistic the result carries (min, mean,
//! percentiles, max, standard deviation) is read from the one histogram, so they agree.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The largest latency recorded as itself; longer ones are clamped to it (an hour).
pub const MAX_NS: u64 = 3_600_000_000_000;

/// A latency histogram in nanoseconds. Recording never allocates and never fails.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    h: Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram::new()
    }
}

impl LatencyHistogram {
    pub fn new() -> LatencyHistogram {
        // constant bounds within the crate's limits (checked by the tests): cannot fail
        let h = Histogram::new_with_bounds(1, MAX_NS, 3).expect("constant histogram bounds");
        LatencyHistogram { h }
    }

    /// Records one latency; 0 counts as 1 ns and anything beyond an hour as an hour.
    pub fn record_ns(&mut self, ns: u64) {
        let _ = self.h.record(ns.clamp(1, MAX_NS));
    }

    pub fn count(&self) -> u64 {
        self.h.len()
    }

    pub fn reset(&mut self) {
        self.h.reset();
    }

    /// Adds another histogram's counts to this one.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        let _ = self.h.add(&other.h);
    }

    /// The statistics of the recorded values; None when nothing was recorded.
    pub fn stats(&self) -> Option<RttStats> {
        if self.h.is_empty() {
            return None;
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        let q = |p: f64| us(self.h.value_at_quantile(p));
        Some(RttStats {
            rtt_min_us: us(self.h.min()),
            rtt_mean_us: self.h.mean() / 1000.0,
            rtt_p50_us: q(0.50),
            rtt_p90_us: q(0.90),
            rtt_p99_us: q(0.99),
            rtt_p999_us: q(0.999),
            rtt_max_us: us(self.h.max()),
            rtt_stddev_us: self.h.stdev() / 1000.0,
        })
    }
}

/// Open loop (`--rate`): what the client's own schedule did to the figures. Kept beside the
/// round trips timed from the schedule (the summary's `rtt_*`, "corrected" in HdrHistogram's
/// and wrk2's terms): how late each request left after its scheduled time, and the round
/// trips timed from the actual send ("uncorrected", what sockperf and closed-loop tools
/// report).
#[derive(Debug, Clone, Default)]
pub struct OpenLoopHistograms {
    pub send_lateness: LatencyHistogram,
    pub uncorrected: LatencyHistogram,
}

impl OpenLoopHistograms {
    /// Records one transaction: scheduled at 0, sent `late_ns` later, answered `rtt_ns`
    /// after it was sent.
    #[inline]
    pub fn record(&mut self, late_ns: u64, rtt_ns: u64) {
        self.send_lateness.record_ns(late_ns);
        self.uncorrected.record_ns(rtt_ns);
    }

    pub fn merge(&mut self, other: &OpenLoopHistograms) {
        self.send_lateness.merge(&other.send_lateness);
        self.uncorrected.merge(&other.uncorrected);
    }

    /// None when nothing was recorded.
    pub fn stats(&self) -> Option<OpenLoopStats> {
        let uncorrected = self.uncorrected.stats()?;
        let late = self.send_lateness.stats()?;
        Some(OpenLoopStats {
            send_lateness_p50_us: late.rtt_p50_us,
            send_lateness_p99_us: late.rtt_p99_us,
            send_lateness_max_us: late.rtt_max_us,
            send_lateness_mean_us: late.rtt_mean_us,
            uncorrected,
        })
    }
}

/// Open loop figures of an rr test, microseconds (see [`OpenLoopHistograms`]). A send on
/// time counts as 0.001 µs late (the histogram's smallest value).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct OpenLoopStats {
    pub send_lateness_p50_us: f64,
    pub send_lateness_p99_us: f64,
    pub send_lateness_max_us: f64,
    pub send_lateness_mean_us: f64,
    /// Round trips from the actual send of each request.
    pub uncorrected: RttStats,
}

/// Round-trip times of transactions, microseconds: from sending a request (or its scheduled
/// time, in open loop) to the last byte of its response.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct RttStats {
    pub rtt_min_us: f64,
    pub rtt_mean_us: f64,
    pub rtt_p50_us: f64,
    pub rtt_p90_us: f64,
    pub rtt_p99_us: f64,
    pub rtt_p999_us: f64,
    pub rtt_max_us: f64,
    pub rtt_stddev_us: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_ordered_and_near_the_values() {
        let mut h = LatencyHistogram::new();
        for v in 1..=10_000u64 {
            h.record_ns(v * 1000);
        }
        let s = h.stats().unwrap();
        assert!(s.rtt_min_us <= s.rtt_p50_us);
        assert!(s.rtt_p50_us <= s.rtt_p90_us);
        assert!(s.rtt_p90_us <= s.rtt_p99_us);
        assert!(s.rtt_p99_us <= s.rtt_p999_us);
        assert!(s.rtt_p999_us <= s.rtt_max_us);
        assert!((s.rtt_p50_us - 5000.0).abs() < 10.0, "{s:?}");
        assert!((s.rtt_p99_us - 9900.0).abs() < 15.0, "{s:?}");
        assert!((s.rtt_mean_us - 5000.5).abs() < 5.0, "{s:?}");
        assert_eq!(h.count(), 10_000);
    }

    #[test]
    fn merge_adds_counts_and_extremes_clamp() {
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        a.record_ns(0);
        b.record_ns(u64::MAX);
        a.merge(&b);
        assert_eq!(a.count(), 2);
        let s = a.stats().unwrap();
        assert!(s.rtt_min_us > 0.0 && s.rtt_max_us <= MAX_NS as f64 / 1000.0 * 1.001);
        assert!(LatencyHistogram::new().stats().is_none());
    }

    #[test]
    fn open_loop_lateness_and_uncorrected_add_up_to_the_corrected_round_trip() {
        let mut corrected = LatencyHistogram::new();
        let mut open = OpenLoopHistograms::default();
        assert!(open.stats().is_none());
        // every tenth send leaves 200 µs late; every round trip takes 20 µs once sent
        for i in 0..1000u64 {
            let late = if i % 10 == 0 { 200_000 } else { 0 };
            open.record(late, 20_000);
            corrected.record_ns(late + 20_000);
        }
        let o = open.stats().unwrap();
        let c = corrected.stats().unwrap();
        assert!(o.send_lateness_p50_us < 0.01, "{o:?}");
        assert!((o.send_lateness_p99_us - 200.0).abs() < 0.5, "{o:?}");
        assert!((o.uncorrected.rtt_p99_us - 20.0).abs() < 0.05, "{o:?}");
        assert!(c.rtt_p99_us >= o.uncorrected.rtt_p99_us + o.send_lateness_p99_us - 0.5);
        let mut both = open.clone();
        both.merge(&open);
        assert_eq!(both.uncorrected.count(), 2000);
    }
}
