//! The search for the highest offered rate whose loss stays within a limit, in the manner of
//! RFC 2544's throughput test: try the top of the range, then halve the interval between the
//! highest rate that passed and the lowest that failed until it is narrow enough.

use serde::{Deserialize, Serialize};

/// One trial of the search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Offered rate per stream; None for an unpaced trial.
    pub offered_bps: Option<f64>,
    pub goodput_bps: f64,
    pub loss_percent: f64,
    pub pass: bool,
}

/// A passing trial that carried less than this share of its offered rate did not offer it.
pub const UNREACHED: f64 = 0.95;

#[derive(Debug, Clone)]
pub struct RateSearch {
    loss_limit: f64,
    /// Stop when the gap between pass and fail is below this share of the fail rate.
    resolution: f64,
    max_steps: usize,
    pass: Option<f64>,
    fail: Option<f64>,
    pub steps: Vec<Step>,
}

/// What to try next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    /// A trial without pacing, to find the top of the range.
    Unpaced,
    Rate(f64),
    Done,
}

impl RateSearch {
    pub fn new(loss_limit_percent: f64, resolution: f64, max_steps: usize) -> RateSearch {
        RateSearch {
            loss_limit: loss_limit_percent,
            resolution,
            max_steps,
            pass: None,
            fail: None,
            steps: Vec::new(),
        }
    }

    /// `upper` is the link's rate per stream when known; without it the search starts with an
    /// unpaced trial.
    pub fn next(&self, upper: Option<f64>) -> Next {
        if self.steps.len() >= self.max_steps {
            return Next::Done;
        }
        match (self.steps.is_empty(), self.pass, self.fail) {
            (true, _, _) => upper.map_or(Next::Unpaced, Next::Rate),
            (false, Some(_), None) => Next::Done,
            (false, p, Some(f)) => {
                let lo = p.unwrap_or(0.0);
                if (f - lo) / f <= self.resolution {
                    Next::Done
                } else {
                    Next::Rate((lo + f) / 2.0)
                }
            }
            (false, None, None) => Next::Done,
        }
    }

    /// Records a trial. An unpaced trial that fails sets the top of the range to what the
    /// receiver got. A trial that passed but carried clearly less than it offered (under
    /// [`UNREACHED`] of it: the sender could not produce the rate) passes only at the rate it
    /// carried, so the search never reports a rate no trial reached.
    pub fn record(&mut self, offered: Option<f64>, goodput_bps: f64, loss_percent: f64) {
        let pass = loss_percent <= self.loss_limit;
        let carried = goodput_bps / (1.0 - loss_percent.clamp(0.0, 99.0) / 100.0);
        let rate = match offered {
            Some(o) if pass && carried.is_finite() && carried < UNREACHED * o => carried,
            Some(o) => o,
            None => goodput_bps,
        };
        if pass {
            self.pass = Some(self.pass.map_or(rate, |p| p.max(rate)));
        } else {
            self.fail = Some(self.fail.map_or(rate, |f| f.min(rate)));
        }
        self.steps.push(Step {
            offered_bps: offered,
            goodput_bps,
            loss_percent,
            pass,
        });
    }

    /// The highest rate that passed.
    pub fn result(&self) -> Option<f64> {
        self.pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path that loses everything above `cap`.
    fn simulate(cap: f64, upper: Option<f64>) -> RateSearch {
        let mut s = RateSearch::new(0.1, 0.01, 20);
        loop {
            match s.next(upper) {
                Next::Done => return s,
                Next::Unpaced => s.record(None, cap, 30.0),
                Next::Rate(r) => {
                    let loss = if r > cap { (r - cap) / r * 100.0 } else { 0.0 };
                    s.record(Some(r), r.min(cap), loss);
                }
            }
        }
    }

    #[test]
    fn converges_below_the_capacity_within_the_resolution() {
        for upper in [None, Some(12e6)] {
            let s = simulate(9.5e6, upper);
            let r = s.result().unwrap();
            assert!(r <= 9.5e6 * 1.001 && r > 9.5e6 * 0.98, "{upper:?}: {r}");
            assert!(s.steps.len() < 20);
        }
    }

    #[test]
    fn a_rate_the_sender_never_reached_is_not_reported() {
        // offered 20 Gbit/s, a CPU-bound sender carried 1.6 without loss
        let mut s = RateSearch::new(0.1, 0.01, 20);
        s.record(Some(20e9), 1.6e9, 0.0);
        assert_eq!(s.next(Some(20e9)), Next::Done);
        assert_eq!(s.result(), Some(1.6e9));
        // a paced trial that carried its rate keeps the offered figure
        let mut s = RateSearch::new(0.1, 0.01, 20);
        s.record(Some(10e6), 9.98e6, 0.05);
        assert_eq!(s.result(), Some(10e6));
    }

    #[test]
    fn a_passing_top_ends_at_once() {
        let mut s = RateSearch::new(0.1, 0.01, 20);
        s.record(Some(10e6), 10e6, 0.0);
        assert_eq!(s.next(Some(10e6)), Next::Done);
        assert_eq!(s.result(), Some(10e6));
    }
}
