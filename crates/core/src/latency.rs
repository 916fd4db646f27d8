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
}
