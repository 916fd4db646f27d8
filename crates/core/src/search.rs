//! The search for the highest offered rate whose loss stays within a limit, in the manner of
//! RFC 2544's throughput test, with a verdict per rate instead of per trial.
//!
//! Near a path's limit one trial passes or fails by chance (loss comes in bursts: one stall
//! of the receiver drops thousands of datagrams, then none for a while), so a search that
//! believes each trial ends wherever its luck ran out. Here a rate is judged by the median
//! loss of its trials: it passes when most of them kept within the limit. Each rate is tried
//! twice, and a third time only when the two disagree ([`TRIALS_PER_RATE`]); a later trial
//! that ties the count is broken by one more, up to [`MAX_TRIALS_PER_RATE`]. The bisection
//! halves the interval between the highest rate that passed and the lowest that failed
//! until it is narrow, and the search ends on the rate found: when its last trial was at
//! another rate, the rate found is tried once more (a confirmation, which joins its median).
//!
//! The unit of evidence is the trial, not the datagram: a binomial bound over datagrams
//! would treat a burst of a thousand as a thousand independent draws and call a rate safe
//! after one lucky trial. How far the answer can be trusted is given by [`Confidence`].

use serde::{Deserialize, Serialize};

use crate::stats::Summary;

/// Trials whose median decides a rate: the third is run only when the first two disagree.
pub const TRIALS_PER_RATE: usize = 3;
/// Trials of one rate at most: a confirmation that ties the count is broken by one more
/// (an odd number, so the count never ties at the cap).
pub const MAX_TRIALS_PER_RATE: usize = 5;

/// Why a trial was run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The first trial of a rate: a step of the bisection.
    #[default]
    Search,
    /// A further trial of a rate whose trials do not yet decide it.
    Repeat,
    /// A trial of the rate found, once the bisection is narrow.
    Confirm,
    /// A repeat of the lowest failing rate (searches recorded before the median rule).
    Recheck,
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
    /// The trial's loss kept within the limit.
    pub pass: bool,
    #[serde(default)]
    pub phase: Phase,
}

/// A trial whose sender put out less than this share of its offered rate did not offer it:
/// it fails, whatever its loss, and the rates above what it sent ÷ this share are out of
/// the sender's reach. Pacing that misses its target by a few percent stays above it
/// (the search runs over offered rates, and reports what was sent beside them).
pub const UNREACHED: f64 = 0.8;

/// The trials of one offered rate.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Rate {
    bps: f64,
    /// Trials within the loss limit whose sender reached the rate, and the others.
    good: usize,
    bad: usize,
    /// Trials whose sender fell short of this rate: while there are any, the rates above
    /// what senders put out are out of reach.
    short: usize,
}

impl Rate {
    /// Some(true) when most trials passed, Some(false) when most failed, None while the
    /// count is open.
    fn verdict(&self) -> Option<bool> {
        let n = self.good + self.bad;
        let need = TRIALS_PER_RATE / 2 + 1;
        if self.good >= need && self.good > self.bad {
            Some(true)
        } else if self.bad >= need && self.bad > self.good {
            Some(false)
        } else if n >= MAX_TRIALS_PER_RATE {
            Some(self.good > self.bad)
        } else {
            None
        }
    }
}

#[derive(Debug, Clone)]
pub struct RateSearch {
    loss_limit: f64,
    /// Stop when the gap between pass and fail is below this share of the fail rate.
    resolution: f64,
    max_steps: usize,
    /// Every rate tried, in the order first tried.
    rates: Vec<Rate>,
    /// The rate each step counts for (an index into `rates`), beside `steps`; None for an
    /// unpaced trial that failed.
    at: Vec<Option<usize>>,
    /// The top of the range from a failing unpaced trial: what its receiver got. No trial
    /// decided it: it is tried itself when the bisection comes near.
    ceiling: Option<f64>,
    /// A rate a sender short of its target did reach within the loss limit: tried next
    /// when it lies inside the bracket.
    hint: Option<f64>,
    /// An unpaced trial passed (its sender, not the path, was the limit then): a rate that
    /// passes with none above it known to fail is a floor, and twice it is tried next.
    unbounded: bool,
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

/// How far a search's answer can be trusted: the bracket, each end's trials, and the
/// confidence their counts give.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Confidence {
    /// The lowest rate that failed (None when none did): the answer lies between the rate
    /// found and this one.
    pub lowest_fail_bps: Option<f64>,
    /// Trials at the rate found and how many of them passed.
    pub trials: usize,
    pub passed: usize,
    /// The search ended on its rule: the bracket narrow, the rate found passing by the
    /// median of its trials and its last trial at it; false when the trial limit came first.
    #[serde(default)]
    pub confirmed: bool,
    /// Goodput per stream over the passing trials at the rate found: its spread.
    pub goodput: Option<Summary>,
    /// What the sender put out in those trials, per stream.
    #[serde(default)]
    pub sent: Option<Summary>,
    /// The median loss of the trials at the rate found, percent.
    #[serde(default)]
    pub loss_median_percent: Option<f64>,
    /// Trials at the lowest failing rate and how many of them failed ...
    #[serde(default)]
    pub fail_trials: usize,
    #[serde(default)]
    pub fail_failed: usize,
    /// ... of which this many because their sender fell short of the rate ([`UNREACHED`]).
    #[serde(default)]
    pub fail_short: usize,
    /// The median loss of the trials at the lowest failing rate, percent.
    #[serde(default)]
    pub fail_loss_median_percent: Option<f64>,
    /// How sure the counts make the bracket, percent: for each end, one less the chance
    /// that trials passing (or failing) only half the time would agree as often as these
    /// did (a sign test), the two ends multiplied. Two agreeing trials at each end give
    /// 56 %, three at each 77 %; None when no rate passed.
    #[serde(default)]
    pub level_percent: Option<f64>,
    /// How far the path's capacity moved between the trials at the boundary: the most any
    /// of them received over the least a failing one received ([`capacity_spread`]). None
    /// when no trial at the boundary failed (nothing measured the capacity).
    #[serde(default)]
    pub capacity_spread: Option<f64>,
    /// The answer's grade: low when the capacity moved more than [`STABLE_SPREAD`] between
    /// trials (the maximum is not stable there) or the search ended at its trial limit;
    /// else high from a [`Confidence::level_percent`] of 75 %, medium from 50 %, low below.
    #[serde(default)]
    pub grade: Option<Grade>,
}

/// A search's grade, in the words the diagnosis uses.
pub type Grade = crate::diagnosis::Confidence;

/// The spread of capacity between trials within which a search's answer stands: a stable
/// path's trials at the boundary differ by the bisection's resolution (1 %) and the loss
/// of a failing trial; 5 % is also how closely two searches of a stable path agree.
pub const STABLE_SPREAD: f64 = 1.05;

/// One less the chance of at least `agree` heads in `n` tosses of a fair coin: how sure
/// `agree` trials of `n` agreeing make their rate's verdict, as a share.
pub fn sign_confidence(agree: usize, n: usize) -> f64 {
    if n == 0 || agree == 0 {
        return 0.0;
    }
    let n = n.min(60);
    let mut choose = 1.0_f64;
    let mut tail = 0.0;
    for k in 0..=n {
        if k >= agree {
            tail += choose;
        }
        choose = choose * (n - k) as f64 / (k + 1) as f64;
    }
    (1.0 - tail / 2f64.powi(n as i32)).clamp(0.0, 1.0)
}

impl RateSearch {
    /// A search whose bisection stops at `resolution` (a share of the failing rate) and
    /// which runs `max_steps` trials at most.
    pub fn new(loss_limit_percent: f64, resolution: f64, max_steps: usize) -> RateSearch {
        RateSearch {
            loss_limit: loss_limit_percent,
            resolution,
            max_steps,
            rates: Vec::new(),
            at: Vec::new(),
            ceiling: None,
            hint: None,
            unbounded: false,
            steps: Vec::new(),
        }
    }

    fn passing(&self) -> impl Iterator<Item = &Rate> {
        self.rates.iter().filter(|r| r.verdict() == Some(true))
    }

    /// The highest rate whose trials passed.
    fn pass(&self) -> Option<&Rate> {
        self.passing().max_by(|a, b| a.bps.total_cmp(&b.bps))
    }

    /// The lowest rate whose trials failed above the rate found (anywhere when none passed).
    fn fail(&self) -> Option<&Rate> {
        let floor = self.pass().map_or(f64::NEG_INFINITY, |p| p.bps);
        self.rates
            .iter()
            .filter(|r| r.verdict() == Some(false) && r.bps > floor)
            .min_by(|a, b| a.bps.total_cmp(&b.bps))
    }

    /// The rate of the last trial, while its trials do not decide it.
    fn open(&self) -> Option<f64> {
        let last = (*self.at.last()?)?;
        let r = self.rates[last];
        r.verdict().is_none().then_some(r.bps)
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
        self.plan()
    }

    /// The next trial by the search's rule, whatever its trial limit.
    fn plan(&self) -> Next {
        if let Some(r) = self.open() {
            return Next::Rate(r);
        }
        let pass = self.pass().map(|r| r.bps);
        let fail = self.fail().map(|r| r.bps);
        let lo = pass.unwrap_or(0.0);
        // the top of the range: the lowest failing rate, or a ceiling no trial decided yet
        let ceiling = [self.ceiling.filter(|c| *c > lo), self.reach(lo)]
            .into_iter()
            .flatten()
            .min_by(f64::total_cmp);
        let (top, decided) = match (fail, ceiling) {
            (Some(f), Some(c)) if c < f => (c, false),
            (Some(f), _) => (f, true),
            (None, Some(c)) => (c, false),
            // nothing above the rate found is known: twice it, without a link to top it
            (None, None) if self.unbounded && lo > 0.0 => return Next::Rate(lo * 2.0),
            // the top passed (or nothing was sent at all)
            (None, None) => return Next::Done,
        };
        if top <= 0.0 {
            return Next::Done;
        }
        if (top - lo) / top > self.resolution {
            if let Some(h) = self.hint.filter(|h| *h > lo && *h < top) {
                return Next::Rate(h);
            }
            return Next::Rate((lo + top) / 2.0);
        }
        if !decided {
            return Next::Rate(top);
        }
        match pass {
            // the search ends on the rate found
            Some(p) if self.at.last().copied().flatten().map(|i| self.rates[i].bps) != Some(p) => {
                Next::Rate(p)
            }
            _ => Next::Done,
        }
    }

    /// While a rate above `lo` was out of the sender's reach: the most it sent ÷
    /// [`UNREACHED`] (a rate above that would fall short too), or just above `lo` once a
    /// rate there passed.
    fn reach(&self, lo: f64) -> Option<f64> {
        if !self.rates.iter().any(|r| r.short > 0 && r.bps > lo) {
            return None;
        }
        let most = self
            .steps
            .iter()
            .filter(|s| s.offered_bps.is_some())
            .filter_map(|s| s.sent_bps)
            .fold(0.0, f64::max);
        Some((most / UNREACHED).max(lo * (1.0 + self.resolution.max(1e-3))))
    }

    /// The index of the trials of `bps`, made when new.
    fn rate_index(&mut self, bps: f64) -> usize {
        match self.rates.iter().position(|r| r.bps == bps) {
            Some(i) => i,
            None => {
                self.rates.push(Rate {
                    bps,
                    good: 0,
                    bad: 0,
                    short: 0,
                });
                self.rates.len() - 1
            }
        }
    }

    /// Records a trial: the rate offered (None: unpaced), what the sender put out (None:
    /// unknown), what the receiver got and the loss. A paced trial counts for its offered
    /// rate: a pass when its loss kept within the limit and its sender reached the rate. A
    /// sender that fell clearly short (under [`UNREACHED`]) did not offer it: the trial
    /// fails, and while such a rate stands above the rate found, the most any sender put
    /// out (÷ [`UNREACHED`]) caps the rates tried. An unpaced trial that passed counts for
    /// the rate it sent (a floor: twice it is tried next, unless a rate fails first); one
    /// that failed caps the range at what its receiver got.
    pub fn record(
        &mut self,
        offered: Option<f64>,
        sent: Option<f64>,
        goodput_bps: f64,
        loss_percent: f64,
    ) {
        let pass = loss_percent <= self.loss_limit;
        let sent_ok = sent.filter(|s| s.is_finite() && *s >= 0.0);
        let confirming = self.confirming(offered);
        self.unbounded |= offered.is_none() && pass;
        let (index, phase) = match offered {
            Some(o) => {
                let i = self.rate_index(o);
                let short = sent_ok.filter(|s| *s < UNREACHED * o);
                let r = &mut self.rates[i];
                let phase = match (r.good + r.bad, confirming) {
                    (_, true) => Phase::Confirm,
                    (0, _) => Phase::Search,
                    _ => Phase::Repeat,
                };
                if pass && short.is_none() {
                    r.good += 1;
                } else {
                    r.bad += 1;
                }
                if let Some(s) = short {
                    r.short += 1;
                    self.hint = pass.then_some(s);
                } else if self.hint == Some(o) {
                    self.hint = None;
                }
                (Some(i), phase)
            }
            None if pass => {
                let s = sent_ok.unwrap_or(goodput_bps).max(goodput_bps);
                let i = self.rate_index(s);
                self.rates[i].good += 1;
                (Some(i), Phase::Search)
            }
            None => {
                let g = goodput_bps.max(0.0);
                self.ceiling = Some(self.ceiling.map_or(g, |c| c.min(g)));
                (None, Phase::Search)
            }
        };
        self.at.push(index);
        self.steps.push(Step {
            offered_bps: offered,
            sent_bps: sent_ok,
            goodput_bps,
            loss_percent,
            pass,
            phase,
        });
    }

    /// A trial at `offered` now would confirm the rate found: its trials already pass it.
    fn confirming(&self, offered: Option<f64>) -> bool {
        let Some(o) = offered else { return false };
        self.open().is_none() && self.pass().is_some_and(|p| p.bps == o) && !self.steps.is_empty()
    }

    /// The highest rate whose trials passed.
    pub fn result(&self) -> Option<f64> {
        self.pass().map(|r| r.bps)
    }

    /// The trials of the step indices that count for `rate`.
    fn steps_at(&self, rate: Option<&Rate>) -> Vec<&Step> {
        let Some(rate) = rate else { return Vec::new() };
        self.steps
            .iter()
            .zip(&self.at)
            .filter(|(_, i)| i.is_some_and(|i| self.rates[i].bps == rate.bps))
            .map(|(s, _)| s)
            .collect()
    }

    /// The trials at the boundary: those at the rate found and at the lowest failing rate,
    /// and those that contradict the bracket (a failure at or below the rate found, a pass
    /// at or above the lowest failing rate). Paced trials whose sender reached the rate only.
    fn boundary(&self, found: Option<&Rate>, fail: Option<&Rate>) -> Vec<&Step> {
        let (lo, hi) = (found.map(|r| r.bps), fail.map(|r| r.bps));
        self.steps
            .iter()
            .filter(|s| {
                let Some(o) = s.offered_bps else { return false };
                let reached = s.sent_bps.is_none_or(|x| x >= UNREACHED * o);
                let at_end = Some(o) == lo || Some(o) == hi;
                let contradicts = (!s.pass && lo.is_some_and(|l| o <= l))
                    || (s.pass && hi.is_some_and(|h| o >= h));
                reached && (at_end || contradicts)
            })
            .collect()
    }

    /// The bracket around the result, each end's trials and the spread at the rate found.
    pub fn confidence(&self) -> Confidence {
        let found = self.pass();
        let fail = self.fail();
        let at_found = self.steps_at(found);
        let at_fail = self.steps_at(fail);
        let passed: Vec<&&Step> = at_found.iter().filter(|s| s.pass).collect();
        let goodputs: Vec<f64> = passed.iter().map(|s| s.goodput_bps).collect();
        let sent: Vec<f64> = passed.iter().filter_map(|s| s.sent_bps).collect();
        let median_loss = |steps: &[&Step]| {
            Summary::of(&steps.iter().map(|s| s.loss_percent).collect::<Vec<_>>()).map(|s| s.median)
        };
        let level = found.map(|f| {
            let ends = sign_confidence(f.good, f.good + f.bad)
                * fail.map_or(1.0, |f| sign_confidence(f.bad, f.good + f.bad));
            ends * 100.0
        });
        let spread = capacity_spread(&self.boundary(found, fail));
        let confirmed = found.is_some() && self.plan() == Next::Done;
        Confidence {
            grade: level.map(|l| grade(l, confirmed, spread)),
            capacity_spread: spread,
            lowest_fail_bps: fail.map(|r| r.bps),
            trials: found.map_or(0, |r| r.good + r.bad),
            passed: found.map_or(0, |r| r.good),
            confirmed,
            goodput: Summary::of(&goodputs),
            sent: Summary::of(&sent),
            loss_median_percent: median_loss(&at_found),
            fail_trials: fail.map_or(0, |r| r.good + r.bad),
            fail_failed: fail.map_or(0, |r| r.bad),
            fail_short: fail.map_or(0, |r| r.short),
            fail_loss_median_percent: median_loss(&at_fail),
            level_percent: level,
        }
    }
}

/// How far capacity moved between `trials`: the most any of them received (the path
/// carried at least that then) over the least a failing one received (a failing trial's
/// receiver got what the path carried). None without a failing trial.
pub fn capacity_spread(trials: &[&Step]) -> Option<f64> {
    let least = trials
        .iter()
        .filter(|s| !s.pass)
        .map(|s| s.goodput_bps)
        .filter(|g| g.is_finite() && *g > 0.0)
        .min_by(f64::total_cmp)?;
    let most = trials
        .iter()
        .map(|s| s.goodput_bps)
        .filter(|g| g.is_finite())
        .fold(least, f64::max);
    Some(most / least)
}

/// The grade of an answer from its sign-test level, whether the search ended by its rule,
/// and the capacity's spread between trials.
fn grade(level_percent: f64, confirmed: bool, spread: Option<f64>) -> Grade {
    if !confirmed || spread.is_some_and(|s| s > STABLE_SPREAD) || level_percent < 50.0 {
        Grade::Low
    } else if level_percent < 75.0 {
        Grade::Medium
    } else {
        Grade::High
    }
}

#[cfg(test)]
#[path = "search_tests.rs"]
mod tests;
