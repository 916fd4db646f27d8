//! Statistics of repeated runs: summaries with Student's t confidence intervals, Welch's
//! t-test, the Mann–Whitney U test, the rule that picks between them, and the comparison of
//! two sets of runs metric by metric, and the change points of a history.
//!
//! Promise: pure functions of their arguments (no IO, no clock, no randomness) that never
//! panic, whatever the samples hold. Non-finite values (an unknown figure) are dropped before
//! anything is computed, so one NaN never poisons a mean. Distributions come from `statrs`.

mod changes;
mod compare;
mod matrix;
mod rank;
mod welch;

pub use changes::{
    change_points, run_changes, ChangeOptions, ChangePoint, RunChange, SeriesRun, CHANGE_ALPHA,
    MIN_SEGMENT_RUNS,
};
pub use compare::{
    choose_test, compare, compare_metric, summarize_runs, Change, Comparison, Metric, TestKind,
    TestResult, RETRANSMIT_MIN_COUNT, SKEW_LIMIT, WELCH_MIN_N,
};
pub use matrix::{pair_matrix, PairCell, PairMatrix, PairRun, UNKNOWN_HOST};
pub use rank::{mann_whitney, rank_test_can_reach, shift_interval, MannWhitney};
pub use welch::{welch, Welch};

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// Confidence level of every interval this module reports.
pub const CONFIDENCE: f64 = 0.95;

/// Significance level of every verdict: a difference is called real when p < `ALPHA`.
pub const ALPHA: f64 = 0.05;

/// Five-number-style summary of one figure over repeated runs, with the 95 % confidence
/// interval of the mean (Student's t, n − 1 degrees of freedom).
///
/// `stddev` is the sample standard deviation (divisor n − 1). It and the interval need two
/// values at least, so they are None for a single run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    pub median: f64,
    pub mean: f64,
    pub max: f64,
    pub stddev: Option<f64>,
    pub ci95_low: Option<f64>,
    pub ci95_high: Option<f64>,
    pub ci95_half_width: Option<f64>,
}

impl Summary {
    /// Summarises the finite values of `samples`; None when there are none.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        let mut v = finite(samples);
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let m = mean(&v);
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let stddev = variance(&v).map(f64::sqrt);
        let half = stddev.and_then(|s| {
            let t = t_quantile(0.5 + CONFIDENCE / 2.0, (n - 1) as f64)?;
            Some(t * s / (n as f64).sqrt())
        });
        Some(Summary {
            n,
            min: v[0],
            median,
            mean: m,
            max: v[n - 1],
            stddev,
            ci95_low: half.map(|h| m - h),
            ci95_high: half.map(|h| m + h),
            ci95_half_width: half,
        })
    }

    /// The summary with its interval clipped to what the figure can be, `lo` up to `hi` (no
    /// limit when None): the mean of values that are never negative is never negative, so
    /// neither is a bound of its interval. The half-width stays the t interval's, so
    /// [`until_ci_reached`] judges the spread and not where it was cut.
    pub fn clipped(mut self, (lo, hi): (f64, Option<f64>)) -> Summary {
        let clip = |x: f64| hi.map_or(x, |h| x.min(h)).max(lo);
        self.ci95_low = self.ci95_low.map(clip);
        self.ci95_high = self.ci95_high.map(clip);
        self
    }

    /// The half-width of the interval as a percentage of the mean's magnitude; None when
    /// there is no interval or the mean is zero.
    pub fn ci95_half_width_percent(&self) -> Option<f64> {
        let h = self.ci95_half_width?;
        (self.mean != 0.0).then(|| h / self.mean.abs() * 100.0)
    }
}

/// True once the 95 % confidence half-width of the mean of `samples` is at most `pct` percent
/// of the mean: the stopping rule of `run --until-ci PCT`. Needs two finite values at least;
/// a zero mean or a non-finite or negative `pct` never satisfies it.
pub fn until_ci_reached(samples: &[f64], pct: f64) -> bool {
    if !(pct.is_finite() && pct >= 0.0) {
        return false;
    }
    Summary::of(samples)
        .and_then(|s| s.ci95_half_width_percent())
        .is_some_and(|p| p <= pct)
}

/// The `p` quantile of Student's t with `df` degrees of freedom; None for p outside (0, 1) or
/// df not positive. Very large df (over 1e7) use the normal quantile, which it equals to
/// within 1e-7.
pub fn t_quantile(p: f64, df: f64) -> Option<f64> {
    if p.is_nan() || p <= 0.0 || p >= 1.0 || df.is_nan() || df <= 0.0 {
        return None;
    }
    if df > 1e7 {
        return Normal::new(0.0, 1.0).ok().map(|n| n.inverse_cdf(p));
    }
    StudentsT::new(0.0, 1.0, df).ok().map(|t| t.inverse_cdf(p))
}

/// Two-sided p-value of a t statistic with `df` degrees of freedom.
pub fn t_two_sided_p(t: f64, df: f64) -> Option<f64> {
    if t.is_nan() || df.is_nan() || df <= 0.0 {
        return None;
    }
    if t.is_infinite() {
        return Some(0.0);
    }
    if df > 1e7 {
        return normal_two_sided_p(t);
    }
    let d = StudentsT::new(0.0, 1.0, df).ok()?;
    Some((2.0 * d.sf(t.abs())).clamp(0.0, 1.0))
}

/// Two-sided p-value of a standard normal statistic.
pub fn normal_two_sided_p(z: f64) -> Option<f64> {
    if z.is_nan() {
        return None;
    }
    let n = Normal::new(0.0, 1.0).ok()?;
    Some((2.0 * n.sf(z.abs())).clamp(0.0, 1.0))
}

/// Adjusted Fisher–Pearson sample skewness G1; None below three values or with no spread.
pub fn skewness(samples: &[f64]) -> Option<f64> {
    let v = finite(samples);
    let n = v.len();
    if n < 3 {
        return None;
    }
    let m = mean(&v);
    let nf = n as f64;
    let m2 = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / nf;
    let m3 = v.iter().map(|x| (x - m).powi(3)).sum::<f64>() / nf;
    if m2 <= 0.0 {
        return None;
    }
    let g1 = m3 / m2.powf(1.5);
    Some(g1 * (nf * (nf - 1.0)).sqrt() / (nf - 2.0))
}

/// The finite values of a sample, in order.
pub(crate) fn finite(samples: &[f64]) -> Vec<f64> {
    samples.iter().copied().filter(|x| x.is_finite()).collect()
}

/// Arithmetic mean; 0 for an empty slice (callers check the length first).
pub(crate) fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.iter().sum::<f64>() / v.len() as f64
}

/// Sample variance (divisor n − 1), by the two-pass formula for accuracy with large,
/// close values such as 1e10 bit/s ± 1e8; None below two values.
pub(crate) fn variance(v: &[f64]) -> Option<f64> {
    if v.len() < 2 {
        return None;
    }
    let m = mean(v);
    let ss: f64 = v.iter().map(|x| (x - m).powi(2)).sum();
    Some(ss / (v.len() - 1) as f64)
}

#[cfg(test)]
mod bounds_tests;
#[cfg(test)]
mod tests;
