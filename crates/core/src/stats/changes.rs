//! Change points in a history: where the level of a figure shifted and stayed shifted (a
//! kernel that made every run a quarter slower from one day on), told apart from the noise
//! of single runs.
//!
//! Binary segmentation, as E-Divisive and Hunter do with their own statistics: the series is
//! split where the Mann–Whitney test finds its two sides most different; the split stands
//! when its p-value, multiplied by the number of places it could have been made
//! (Bonferroni: the best of many tries is not one try), is below the level asked; each side
//! is then searched the same way. Every change is finally judged again between its
//! neighbours (the previous and the next change), the weakest not significant one dropped
//! until all stand. Each segment has at least [`MIN_SEGMENT_RUNS`] runs: a shift seen in
//! fewer is an outlier, not a level.
//!
//! A flat series yields a change with probability at most the level (the first split is
//! the only chance, and its correction is conservative). Pure, deterministic, and it never
//! panics: non-finite values are skipped (an unknown figure is not a level).

use serde::{Deserialize, Serialize};

use super::rank::{midranks, normal_approx, EXACT_MAX_N, SHIFT_MAX_PAIRS};
use super::{mann_whitney, shift_interval, Summary};

/// Significance level of a change, stricter than a comparison's [`super::ALPHA`]: a
/// history is scanned again and again, over many labels and pairs, and a change point that
/// is not there costs someone an afternoon.
pub const CHANGE_ALPHA: f64 = 0.01;

/// Fewest runs on each side of a change.
pub const MIN_SEGMENT_RUNS: usize = 3;

/// How changes are searched for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChangeOptions {
    /// Fewest runs on each side of a change; below [`MIN_SEGMENT_RUNS`] counts as it.
    pub min_segment: usize,
    /// A change stands when its corrected p-value is below this (0 < alpha < 1).
    pub alpha: f64,
}

impl Default for ChangeOptions {
    fn default() -> ChangeOptions {
        ChangeOptions {
            min_segment: MIN_SEGMENT_RUNS,
            alpha: CHANGE_ALPHA,
        }
    }
}

/// One level shift.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ChangePoint {
    /// Position in the series of the first value of the new level.
    pub index: usize,
    /// Values since the previous change (or the start) and up to the next (or the end).
    pub runs_before: usize,
    pub runs_after: usize,
    pub median_before: f64,
    pub median_after: f64,
    /// (median after − median before) ÷ |median before| × 100.
    pub change_percent: Option<f64>,
    /// Hodges and Lehmann's 95 % interval of the shift (the one that goes with the
    /// Mann–Whitney test), in percent of |median before|; None where the sides are too
    /// small for it. Of sides longer than 500 runs, the 500 nearest the change are used.
    pub change_ci95_low_percent: Option<f64>,
    pub change_ci95_high_percent: Option<f64>,
    /// The Mann–Whitney p-value of before against after, times `split_positions`, at most 1.
    pub p_value: f64,
    /// The places a change between the neighbouring changes could have been put.
    pub split_positions: usize,
}

/// The changes of level in `values` (in time order). Indices are positions in `values`.
pub fn change_points(values: &[f64], opts: ChangeOptions) -> Vec<ChangePoint> {
    if !(opts.alpha > 0.0 && opts.alpha < 1.0) {
        return Vec::new();
    }
    let at: Vec<usize> = (0..values.len())
        .filter(|&i| values[i].is_finite())
        .collect();
    let v: Vec<f64> = at.iter().map(|&i| values[i]).collect();
    let m = opts.min_segment.max(MIN_SEGMENT_RUNS);
    let cuts = segment(&v, m, opts.alpha);
    settle(&v, cuts, m, opts.alpha)
        .into_iter()
        .map(|mut c| {
            c.index = at[c.index];
            c
        })
        .collect()
}

/// One run of a history.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeriesRun {
    pub id: i64,
    pub started_unix_s: f64,
    pub value: f64,
}

/// A level shift at a run: the run that began the new level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RunChange {
    pub run_id: i64,
    pub started_unix_s: f64,
    #[serde(flatten)]
    pub point: ChangePoint,
}

/// The changes of level over runs, taken in order of start time (then id, the storing
/// order, for runs that started together); runs without a finite value are left out.
pub fn run_changes(runs: &[SeriesRun], opts: ChangeOptions) -> Vec<RunChange> {
    let mut runs: Vec<SeriesRun> = runs
        .iter()
        .copied()
        .filter(|r| r.value.is_finite())
        .collect();
    runs.sort_by(|a, b| {
        a.started_unix_s
            .total_cmp(&b.started_unix_s)
            .then(a.id.cmp(&b.id))
    });
    let values: Vec<f64> = runs.iter().map(|r| r.value).collect();
    change_points(&values, opts)
        .into_iter()
        .map(|point| RunChange {
            run_id: runs[point.index].id,
            started_unix_s: runs[point.index].started_unix_s,
            point,
        })
        .collect()
}

/// Bonferroni: the p-value of the best of `positions` tries.
fn corrected(p: f64, positions: usize) -> f64 {
    (p * positions as f64).min(1.0)
}

/// Binary segmentation: the positions (sorted) where a split stood.
fn segment(v: &[f64], m: usize, alpha: f64) -> Vec<usize> {
    let mut cuts = Vec::new();
    // an explicit stack: a long staircase must not run the call stack out
    let mut todo = vec![(0, v.len())];
    while let Some((lo, hi)) = todo.pop() {
        let Some(s) = best_split(&v[lo..hi], m) else {
            continue;
        };
        if corrected(s.p_value, s.positions) < alpha {
            cuts.push(lo + s.at);
            todo.push((lo, lo + s.at));
            todo.push((lo + s.at, hi));
        }
    }
    cuts.sort_unstable();
    cuts
}

/// Judges each cut between its neighbours and drops the weakest that does not stand, until
/// every one does.
fn settle(v: &[f64], mut cuts: Vec<usize>, m: usize, alpha: f64) -> Vec<ChangePoint> {
    loop {
        let points: Vec<Option<ChangePoint>> = cuts
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                let lo = if i == 0 { 0 } else { cuts[i - 1] };
                let hi = cuts.get(i + 1).copied().unwrap_or(v.len());
                describe(&v[lo..c], &v[c..hi], c, m)
            })
            .collect();
        // a change that cannot be judged counts as not significant
        let p =
            |x: &Option<ChangePoint>| x.map(|c| c.p_value).filter(|p| !p.is_nan()).unwrap_or(1.0);
        let weakest = (0..points.len())
            .filter(|&i| p(&points[i]) >= alpha)
            .max_by(|&a, &b| p(&points[a]).total_cmp(&p(&points[b])));
        match weakest {
            Some(i) => {
                cuts.remove(i);
            }
            None => return points.into_iter().flatten().collect(),
        }
    }
}

/// The change from `before` to `after`, the new level beginning at `index`.
fn describe(before: &[f64], after: &[f64], index: usize, m: usize) -> Option<ChangePoint> {
    let (sb, sa) = (Summary::of(before)?, Summary::of(after)?);
    let test = mann_whitney(before, after)?;
    let positions = (before.len() + after.len() + 1)
        .saturating_sub(2 * m)
        .max(1);
    let base = sb.median.abs();
    let pct = |x: f64| (base > 0.0).then(|| x / base * 100.0);
    // the interval sorts every difference of a run after and a run before: past
    // SHIFT_MAX_PAIRS of them, it is taken on the runs nearest the change
    let near = SHIFT_MAX_PAIRS.isqrt();
    let ci = shift_interval(
        &before[before.len().saturating_sub(near)..],
        &after[..after.len().min(near)],
    );
    Some(ChangePoint {
        index,
        runs_before: before.len(),
        runs_after: after.len(),
        median_before: sb.median,
        median_after: sa.median,
        change_percent: pct(sa.median - sb.median),
        change_ci95_low_percent: ci.and_then(|c| pct(c.0)),
        change_ci95_high_percent: ci.and_then(|c| pct(c.1)),
        p_value: corrected(test.p_value, positions),
        split_positions: positions,
    })
}

/// The best place to split a segment: the first value of the second part, the test's
/// p-value there (uncorrected) and how many places were tried.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Split {
    at: usize,
    p_value: f64,
    positions: usize,
}

/// Tries every split leaving `m` values a side and keeps the one with the smallest p-value
/// (of equal ones, the one whose sides overlap least). None when the segment is shorter than
/// two sides.
fn best_split(seg: &[f64], m: usize) -> Option<Split> {
    let n = seg.len();
    if m == 0 || n < 2 * m {
        return None;
    }
    // (at, p, how far U is from no difference, as a share of the pairs)
    let mut best: Option<(usize, f64, f64)> = None;
    let mut consider = |at: usize, p: f64, u_b: f64| {
        let effect = (u_b / (at * (n - at)) as f64 - 0.5).abs();
        let better = match best {
            None => true,
            Some((_, bp, be)) => p < bp || (p == bp && effect > be),
        };
        if better {
            best = Some((at, p, effect));
        }
    };
    if n <= EXACT_MAX_N {
        // small: the test itself, exact where it can be
        for at in m..=n - m {
            let t = mann_whitney(&seg[..at], &seg[at..])?;
            consider(at, t.p_value, t.u_b);
        }
    } else {
        // large: the pooled sample is the segment whatever the split, so its ranks and ties
        // are computed once and each split's U comes from a running sum (the test's own
        // normal approximation, as it would use at this size)
        let (ranks, tie_term) = midranks(seg);
        let total: f64 = ranks.iter().sum();
        let mut left = ranks[..m].iter().sum::<f64>();
        for at in m..=n - m {
            if at > m {
                left += ranks[at - 1];
            }
            let nb = (n - at) as f64;
            let u_b = (total - left) - nb * (nb + 1.0) / 2.0;
            let (_, p) = normal_approx(at, n - at, u_b, tie_term)?;
            consider(at, p, u_b);
        }
    }
    best.map(|(at, p_value, _)| Split {
        at,
        p_value,
        positions: n - 2 * m + 1,
    })
}

#[cfg(test)]
#[path = "changes_tests.rs"]
mod tests;
