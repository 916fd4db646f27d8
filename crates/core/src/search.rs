//! The search for the highest offered rate whose loss stays within a limit, in the manner of
//! RFC 2544's throughput test: try the top of the range, then halve the interval between the
//! highest rate that passed and the lowest that failed until it is narrow enough; then try
//! the rate found again, [`CONFIRM`] more times. One lucky trial is not a result: a rate that
//! fails a confirmation becomes the lowest failing rate and the search goes on below it, so
//! the rate reported is one that passed every time it was tried at the end.

use serde::{Deserialize, Serialize};

use crate::stats::Summary;

/// Trials of the rate found after the bisection, each of which must pass as well.
pub const CONFIRM: usize = 2;

/// Why a trial was run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// A step of the bisection.
    #[default]
    Search,
    /// A repeat of the lowest failing rate once the bisection is narrow: one burst of loss
    /// at a low rate must not cap the search.
    Recheck,
    /// A repeat of the rate the bisection found.
    Confirm,
}

/// One trial of the search. Rates are per stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The target rate asked of the sender; None for an unpaced trial.
    pub offered_bps: Option<f64>,
    /// What the sender actually put out (None where it is not known, as in searches
    /// recorded before it was reported).
    #[serde(default)]
    pub sent_bps: Option<f64>,
    /// What the receiver got.
    pub goodput_bps: f64,
    pub loss_percent: f64,
    pub pass: bool,
    #[serde(default)]
    pub phase: Phase,
}

/// A trial whose sender put out less than this share of its offered rate did not offer it:
/// it counts at the rate it sent. Pacing that misses its target by a few percent stays
/// above it (the search runs over offered rates, and reports what was sent beside them); a
/// sender that cannot produce the rate at all (its CPU) falls below it.
pub const UNREACHED: f64 = 0.8;

#[derive(Debug, Clone)]
pub struct RateSearch {
    loss_limit: f64,
    /// Stop when the gap between pass and fail is below this share of the fail rate.
    resolution: f64,
    max_steps: usize,
    pass: Option<f64>,
    fail: Option<f64>,
    /// Confirmation trials of the current candidate that passed.
    confirmed: usize,
    /// The failing rate that was tried a second time (or failed a confirmation).
    rechecked: Option<f64>,
    /// The rate each step counts at, beside `steps`.
    rates: Vec<f64>,
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

/// How far a search's answer can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Confidence {
    /// The lowest rate that failed (None when none did): the answer lies between the rate
    /// found and this one.
    pub lowest_fail_bps: Option<f64>,
    /// Trials at the rate found (its bisection step and its confirmations) and how many
    /// of them passed.
    pub trials: usize,
    pub passed: usize,
    /// The rate found passed its bisection step and all [`CONFIRM`] confirmations; false
    /// when the search's trial limit came first.
    #[serde(default)]
    pub confirmed: bool,
    /// Goodput per stream over the passing trials at the rate found: its spread.
    pub goodput: Option<Summary>,
    /// What the sender put out in those trials, per stream.
    #[serde(default)]
    pub sent: Option<Summary>,
}

impl RateSearch {
    /// A search with [`CONFIRM`] confirmation trials.
    pub fn new(loss_limit_percent: f64, resolution: f64, max_steps: usize) -> RateSearch {
        RateSearch {
            loss_limit: loss_limit_percent,
            resolution,
            max_steps,
            pass: None,
            fail: None,
            confirmed: 0,
            rechecked: None,
            rates: Vec::new(),
            steps: Vec::new(),
        }
    }

    /// Whether the bisection is over: the gap between pass and fail is narrow, or the top
    /// passed, or nothing passed.
    fn bracketed(&self) -> bool {
        match (self.pass, self.fail) {
            (Some(_), None) | (None, None) => true,
            (p, Some(f)) => f <= 0.0 || (f - p.unwrap_or(0.0)) / f <= self.resolution,
        }
    }

    /// The lowest failing rate, when the bisection is narrow and it has not been tried again.
    fn recheck_due(&self) -> Option<f64> {
        let due = !self.steps.is_empty() && self.pass.is_some() && self.bracketed();
        self.fail
            .filter(|f| due && self.confirmed == 0 && self.rechecked != Some(*f))
    }

    /// The next trial is a confirmation of the candidate.
    fn confirming(&self) -> bool {
        !self.steps.is_empty()
            && self.pass.is_some()
            && self.bracketed()
            && self.recheck_due().is_none()
    }

    /// `upper` is the link's rate per stream when known; without it the search starts with an
    /// unpaced trial.
    pub fn next(&self, upper: Option<f64>) -> Next {
        if self.steps.len() >= self.max_steps {
            return Next::Done;
        }
        if self.steps.is_empty() {
            return upper.map_or(Next::Unpaced, Next::Rate);
        }
        if !self.bracketed() {
            let lo = self.pass.unwrap_or(0.0);
            return self.fail.map_or(Next::Done, |f| Next::Rate((lo + f) / 2.0));
        }
        if let Some(f) = self.recheck_due() {
            return Next::Rate(f);
        }
        match self.pass {
            Some(p) if self.confirmed < CONFIRM => Next::Rate(p),
            _ => Next::Done,
        }
    }

    /// Records a trial: the rate offered (None: unpaced), what the sender put out (None:
    /// unknown), what the receiver got and the loss. A trial counts at its offered rate, or
    /// at what it sent when the sender fell clearly short of it (under [`UNREACHED`]), so
    /// the search never reports a rate no trial reached. A failing unpaced trial sets the top
    /// of the range to what the receiver got. A failing confirmation makes the candidate the
    /// lowest failing rate, and the highest rate that passed below it the new candidate.
    pub fn record(
        &mut self,
        offered: Option<f64>,
        sent: Option<f64>,
        goodput_bps: f64,
        loss_percent: f64,
    ) {
        let pass = loss_percent <= self.loss_limit;
        let sent_ok = sent.filter(|s| s.is_finite() && *s >= 0.0);
        let short = offered.zip(sent_ok).filter(|(o, s)| *s < UNREACHED * o);
        let rate = match (offered, short, sent_ok) {
            (Some(_), Some((_, s)), _) => s,
            (Some(o), None, _) => o,
            (None, _, Some(s)) if pass => s.max(goodput_bps),
            (None, _, _) => goodput_bps,
        };
        let recheck = self.recheck_due();
        let phase = if recheck.is_some() {
            Phase::Recheck
        } else if self.confirming() {
            Phase::Confirm
        } else {
            Phase::Search
        };
        self.rates.push(rate);
        self.steps.push(Step {
            offered_bps: offered,
            sent_bps: sent_ok,
            goodput_bps,
            loss_percent,
            pass,
            phase,
        });
        let lower_fail = |f: Option<f64>, r: f64| Some(f.map_or(r, |f| f.min(r)));
        match (phase, pass && short.is_none(), self.pass) {
            (Phase::Confirm, true, _) => self.confirmed += 1,
            // failed, or never reached the rate: the candidate is not confirmed
            (Phase::Confirm, false, Some(candidate)) => {
                self.fail = lower_fail(self.fail, candidate);
                self.pass = self.highest_pass_below(candidate);
                self.confirmed = 0;
                self.rechecked = Some(candidate);
            }
            // the lowest failing rate passes this time: the search goes on above it
            (Phase::Recheck, true, _) => {
                self.rechecked = recheck;
                self.pass = Some(self.pass.map_or(rate, |p| p.max(rate)));
                self.fail = self.lowest_fail_above(rate);
            }
            (Phase::Recheck, false, _) => self.rechecked = recheck,
            _ if pass => match (short, self.pass) {
                // short of the rate and below what passed already: the rate offered did not
                // pass either (else the search would offer it again and again)
                (Some((o, _)), Some(p)) if rate <= p => self.fail = lower_fail(self.fail, o),
                _ => self.pass = Some(self.pass.map_or(rate, |p| p.max(rate))),
            },
            _ => self.fail = lower_fail(self.fail, rate),
        }
    }

    fn lowest_fail_above(&self, limit: f64) -> Option<f64> {
        self.steps
            .iter()
            .zip(&self.rates)
            .filter(|(s, r)| !s.pass && **r > limit)
            .map(|(_, r)| *r)
            .min_by(f64::total_cmp)
    }

    fn highest_pass_below(&self, limit: f64) -> Option<f64> {
        self.steps
            .iter()
            .zip(&self.rates)
            .filter(|(s, r)| s.pass && **r < limit)
            .map(|(_, r)| *r)
            .max_by(f64::total_cmp)
    }

    /// The highest rate that passed. It passed every confirmation when
    /// [`RateSearch::confidence`] says all its trials passed.
    pub fn result(&self) -> Option<f64> {
        self.pass
    }

    /// The bracket around the result and the spread of the trials at it.
    pub fn confidence(&self) -> Confidence {
        let found = self.pass;
        // the trials at the rate found: the step that made it the candidate, and every
        // confirmation after the last failing one
        let last_reset = self
            .steps
            .iter()
            .rposition(|s| s.phase == Phase::Confirm && !s.pass)
            .map_or(0, |i| i + 1);
        let at_found: Vec<&Step> = self
            .steps
            .iter()
            .zip(&self.rates)
            .enumerate()
            .filter(|(i, (s, r))| {
                Some(**r) == found && s.phase != Phase::Confirm
                    || (s.phase == Phase::Confirm && *i >= last_reset)
            })
            .map(|(_, (s, _))| s)
            .collect();
        let passed: Vec<&&Step> = at_found.iter().filter(|s| s.pass).collect();
        let goodputs: Vec<f64> = passed.iter().map(|s| s.goodput_bps).collect();
        let sent: Vec<f64> = passed.iter().filter_map(|s| s.sent_bps).collect();
        let passed_n = at_found.iter().filter(|s| s.pass).count();
        Confidence {
            lowest_fail_bps: self.fail,
            trials: at_found.len(),
            passed: passed_n,
            confirmed: found.is_some() && self.confirmed >= CONFIRM,
            goodput: Summary::of(&goodputs),
            sent: Summary::of(&sent),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path that loses everything above `cap`, and whose trials listed in `flukes` (by
    /// index) lose 1 % whatever their rate.
    fn simulate(cap: f64, upper: Option<f64>, flukes: &[usize]) -> RateSearch {
        let mut s = RateSearch::new(0.1, 0.01, 30);
        loop {
            let fluke = flukes.contains(&s.steps.len());
            match s.next(upper) {
                Next::Done => return s,
                Next::Unpaced => s.record(None, Some(cap / 0.7), cap, 30.0),
                Next::Rate(r) => {
                    let loss = if r > cap { (r - cap) / r * 100.0 } else { 0.0 };
                    let loss = if fluke { loss.max(1.0) } else { loss };
                    s.record(Some(r), Some(r), r.min(cap) * (1.0 - loss / 100.0), loss);
                }
            }
        }
    }

    #[test]
    fn converges_below_the_capacity_within_the_resolution_and_confirms() {
        for upper in [None, Some(12e6)] {
            let s = simulate(9.5e6, upper, &[]);
            let r = s.result().unwrap();
            assert!(r <= 9.5e6 * 1.001 && r > 9.5e6 * 0.98, "{upper:?}: {r}");
            let confirms = s.steps.iter().filter(|t| t.phase == Phase::Confirm).count();
            assert_eq!(confirms, CONFIRM, "{upper:?}");
            let c = s.confidence();
            // without a link the unpaced trial failed at the capacity, which later passed
            assert_eq!(c.passed, CONFIRM + 1);
            assert_eq!(
                c.trials,
                CONFIRM + 1 + usize::from(upper.is_none()),
                "{s:?}"
            );
            assert!(c.confirmed);
            // (and then no rate above the one found is known to fail)
            if let Some(fail) = c.lowest_fail_bps {
                assert!(fail > r && (fail - r) / fail <= 0.01, "{r} .. {fail}");
            }
            assert_eq!(c.lowest_fail_bps.is_none(), upper.is_none());
            assert_eq!(c.goodput.unwrap().n, CONFIRM + 1);
        }
    }

    #[test]
    fn a_rate_that_fails_its_confirmation_is_not_reported() {
        let clean = simulate(9.5e6, Some(12e6), &[]);
        let found = clean.result().unwrap();
        let first_confirm = clean
            .steps
            .iter()
            .position(|t| t.phase == Phase::Confirm)
            .unwrap();
        // the same path, with the first confirmation unlucky
        let s = simulate(9.5e6, Some(12e6), &[first_confirm]);
        let r = s.result().unwrap();
        assert!(r < found, "{r} !< {found}");
        assert!(r > 9.5e6 * 0.97, "{r}");
        assert_eq!(s.confidence().lowest_fail_bps, Some(found));
        let c = s.confidence();
        assert_eq!((c.trials, c.passed), (CONFIRM + 1, CONFIRM + 1), "{s:?}");
    }

    #[test]
    fn one_burst_of_loss_at_a_low_rate_does_not_cap_the_search() {
        // the second trial (6 Mbit/s on a 9.5 Mbit/s path) loses once by bad luck
        let s = simulate(9.5e6, Some(12e6), &[1]);
        assert_eq!(s.steps[1].offered_bps, Some(6e6));
        assert!(!s.steps[1].pass);
        let r = s.result().unwrap();
        assert!(r <= 9.5e6 * 1.001 && r > 9.5e6 * 0.98, "{r}: {s:?}");
        assert!(s.confidence().confirmed);
        assert!(s.steps.iter().any(|t| t.phase == Phase::Recheck && t.pass));
    }

    #[test]
    fn a_rate_the_sender_never_reached_is_not_reported() {
        // offered 20 Gbit/s, a CPU-bound sender put out 1.6 and all of it arrived
        let mut s = RateSearch::new(0.1, 0.01, 20);
        s.record(Some(20e9), Some(1.6e9), 1.6e9, 0.0);
        assert_eq!(s.result(), Some(1.6e9));
        assert!(!s.confidence().confirmed, "not yet");
        // the next trials confirm it
        assert_eq!(s.next(Some(20e9)), Next::Rate(1.6e9));
        // ... and a confirmation that falls as short does not confirm it
        s.record(Some(1.6e9), Some(1.2e9), 1.2e9, 0.0);
        assert_eq!(s.result(), Some(1.2e9));
        assert_eq!(s.confidence().lowest_fail_bps, Some(1.6e9));
        // a failing trial counts at what was sent, not at what was asked
        let mut s = RateSearch::new(0.1, 0.01, 20);
        s.record(Some(35.77e9), Some(22.1e9), 20.54e9, 7.2);
        assert_eq!(s.confidence().lowest_fail_bps, Some(22.1e9));
        assert_eq!(s.next(None), Next::Rate(11.05e9));
        // a trial short of its rate and below what passed narrows the range from above
        let mut s = RateSearch::new(0.1, 0.01, 20);
        s.record(Some(10e9), Some(10e9), 8e9, 20.0);
        s.record(Some(5e9), Some(5e9), 5e9, 0.0);
        assert_eq!(s.next(None), Next::Rate(7.5e9));
        s.record(Some(7.5e9), Some(4e9), 4e9, 0.0);
        assert_eq!(s.next(None), Next::Rate(6.25e9));
        // a pacer a few percent short keeps the offered rate: the search runs over offered
        // rates, with what was sent reported beside them
        let mut s = RateSearch::new(0.1, 0.01, 20);
        s.record(Some(7.2e9), Some(6.9e9), 6.9e9, 0.0);
        assert_eq!(s.result(), Some(7.2e9));
        assert_eq!(s.confidence().sent.unwrap().mean, 6.9e9);
        // a paced trial that carried its rate keeps the offered figure
        let mut s = RateSearch::new(0.1, 0.01, 20);
        s.record(Some(10e6), Some(9.99e6), 9.98e6, 0.05);
        assert_eq!(s.result(), Some(10e6));
    }

    #[test]
    fn a_passing_top_is_confirmed_then_ends() {
        let mut s = RateSearch::new(0.1, 0.01, 20);
        s.record(Some(10e6), Some(10e6), 10e6, 0.0);
        for _ in 0..CONFIRM {
            assert_eq!(s.next(Some(10e6)), Next::Rate(10e6));
            s.record(Some(10e6), Some(10e6), 10e6, 0.0);
        }
        assert_eq!(s.next(Some(10e6)), Next::Done);
        assert_eq!(s.result(), Some(10e6));
        assert_eq!(s.steps[1].phase, Phase::Confirm);
    }

    #[test]
    fn nothing_passing_ends_without_a_result() {
        let mut s = RateSearch::new(0.1, 0.01, 8);
        while let Next::Rate(r) = s.next(Some(1e6)) {
            s.record(Some(r), Some(r), r * 0.5, 50.0);
        }
        assert_eq!(s.result(), None);
        assert_eq!(s.steps.len(), 8);
        assert_eq!(s.confidence().trials, 0);
    }
}
