//! Message-size sweeps (`wirerate sweep`), NetPIPE's method: the size schedule, the figures
//! of each size, and Hockney's model fitted to them.
//!
//! Latency here is one-way: half the round trip of a ping-pong (as NetPIPE reports it), or,
//! with `--stream`, the time per message of a one-way stream. Field names say `one_way_`.

use serde::{Deserialize, Serialize};

use crate::spec::{invalid, End, Protocol, SpecError, TestSpec};

/// Settings of a sweep. The spec's `end` is `Time` with the longest the sweep may take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SweepSpec {
    /// One-way streaming instead of ping-pong.
    pub stream: bool,
    /// The largest message.
    pub max_bytes: u64,
    /// The smallest message: the schedule starts there (NetPIPE's `-l`).
    pub min_bytes: u64,
    /// The time each trial of a size aims at.
    pub point_time_s: f64,
    /// Trials per size.
    pub trials: u32,
    /// Sizes b − p and b + p are measured beside each size b of the schedule whose step to
    /// the next size exceeds p + 1 (NetPIPE's `-p`).
    pub perturbation_bytes: u64,
}

impl Default for SweepSpec {
    fn default() -> Self {
        SweepSpec {
            stream: false,
            max_bytes: DEFAULT_MAX_BYTES,
            min_bytes: 1,
            point_time_s: DEFAULT_POINT_TIME_S,
            trials: DEFAULT_TRIALS,
            perturbation_bytes: DEFAULT_PERTURBATION_BYTES,
        }
    }
}

impl SweepSpec {
    /// The sizes this sweep measures: NetPIPE's schedule within its bounds.
    pub fn sizes(&self) -> Vec<u64> {
        let max = self.max_bytes.clamp(1, 1 << 30);
        schedule(
            self.min_bytes.clamp(1, max),
            max,
            self.perturbation_bytes.min(1 << 20),
        )
    }

    /// The longest the sweep may take, what its spec asks of a server: every trial cut at
    /// twice its point time, and a minute for the rest (capped at the spec's own limit).
    pub fn longest_s(&self) -> f64 {
        let points = self.sizes().len() as f64;
        let s = points * f64::from(self.trials.max(1)) * self.point_time_s.abs() * 2.0 + 60.0;
        if s.is_finite() {
            s.min(crate::spec::limits::MAX_SECONDS)
        } else {
            60.0
        }
    }
}

pub const DEFAULT_MAX_BYTES: u64 = 8 << 20;
/// NetPIPE's defaults as it is built: 3 trials of about 0.1 s, ±3 bytes.
pub const DEFAULT_POINT_TIME_S: f64 = 0.1;
pub const DEFAULT_TRIALS: u32 = 3;
pub const DEFAULT_PERTURBATION_BYTES: u64 = 3;

/// Limits of sweeps.
pub mod limits {
    /// Largest message (and so the buffer each side allocates).
    pub const MAX_BYTES: u64 = 64 << 20;
    pub const MAX_TRIALS: u32 = 100;
    pub const MAX_POINT_TIME_S: f64 = 10.0;
    /// Repetitions of one trial, at most.
    pub const MAX_REPEATS: u32 = 10_000_000;
}

impl SweepSpec {
    pub fn validate(&self, spec: &TestSpec) -> Result<(), SpecError> {
        if !(1..=limits::MAX_BYTES).contains(&self.max_bytes) {
            return Err(invalid(format!(
                "the largest message must be 1 byte to {} MiB",
                limits::MAX_BYTES >> 20
            )));
        }
        if !(1..=self.max_bytes).contains(&self.min_bytes) {
            return Err(invalid(
                "the smallest message must be 1 byte to the largest message",
            ));
        }
        if !(self.point_time_s.is_finite()
            && (0.001..=limits::MAX_POINT_TIME_S).contains(&self.point_time_s))
        {
            return Err(invalid("point time must be 0.001 to 10 seconds"));
        }
        if !(1..=limits::MAX_TRIALS).contains(&self.trials) {
            return Err(invalid(format!(
                "trials must be 1 to {}",
                limits::MAX_TRIALS
            )));
        }
        if self.perturbation_bytes > 1024 {
            return Err(invalid("perturbation must be 0 to 1024 bytes"));
        }
        if spec.parallel != 1 || spec.protocol != Protocol::Tcp || spec.omit_s != 0.0 {
            return Err(invalid("a sweep runs one TCP stream with no warm-up"));
        }
        if !matches!(spec.end, End::Time { .. }) {
            return Err(invalid("a sweep's spec ends by time"));
        }
        Ok(())
    }

    /// A trial that takes longer than this ends the sweep after its size (NetPIPE stops
    /// once one message takes a second; a trial here is at least 3 messages).
    pub fn stop_after_s(&self) -> f64 {
        self.point_time_s * 40.0
    }
}

/// NetPIPE's schedule from `min` to `max`. From 1 it runs 1, 2, 3, 4, 6, 8, 12, 16, 24 …
/// (powers of two and 1.5 × powers of two); from any other start `min` it steps by `min` / 2,
/// then by a step that doubles every second size (1024, 1536, 2048, 3072, 4096 …). Each size
/// whose step to the next exceeds `perturb` + 1 is measured with the sizes `perturb` below
/// and above it. Sizes stay within `min` … `max` (NetPIPE measures its start − p and its
/// end + p too), in increasing order, and `max` ends the
/// schedule when it is not on it.
pub fn schedule(min: u64, max: u64, perturb: u64) -> Vec<u64> {
    let min = min.max(1);
    let mut out: Vec<u64> = Vec::new();
    let mut push = |s: u64| {
        if (min..=max).contains(&s) {
            out.push(s);
        }
    };
    let (mut len, mut step, mut n) = if min > 1 {
        (min, min / 2, 1u32)
    } else {
        (1, 1, 0)
    };
    while len <= max {
        if n > 2 && n % 2 == 1 {
            step = step.saturating_mul(2);
        }
        if perturb > 0 && step > perturb.saturating_add(1) {
            push(len.saturating_sub(perturb));
            push(len);
            push(len.saturating_add(perturb));
        } else {
            push(len);
        }
        len = match len.checked_add(step) {
            Some(l) => l,
            None => break,
        };
        n += 1;
    }
    // a perturbation wider than half a step puts b + p past the next b − p: measured all
    // the same, in order
    out.sort_unstable();
    out.dedup();
    if out.last().is_some_and(|&l| l < max) {
        out.push(max);
    }
    out
}

/// The figures of one message size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    pub bytes: u64,
    pub trials: u32,
    /// Messages (ping-pongs, or streamed messages) over all trials.
    pub messages: u64,
    /// Throughput of a trial, bytes × 8 ÷ one-way time: the mean, smallest and largest.
    pub bps_mean: f64,
    pub bps_min: f64,
    pub bps_max: f64,
    /// One-way time per message, microseconds: the mean over trials and the best trial.
    pub one_way_mean_us: f64,
    pub one_way_min_us: f64,
}

impl SweepPoint {
    /// The point from each trial's one-way time per message (seconds).
    pub fn from_trials(bytes: u64, messages: u64, one_way_s: &[f64]) -> Option<SweepPoint> {
        let t: Vec<f64> = one_way_s
            .iter()
            .copied()
            .filter(|x| x.is_finite() && *x > 0.0)
            .collect();
        if t.is_empty() {
            return None;
        }
        let bps: Vec<f64> = t.iter().map(|s| bytes as f64 * 8.0 / s).collect();
        let n = t.len() as f64;
        Some(SweepPoint {
            bytes,
            trials: t.len() as u32,
            messages,
            bps_mean: bps.iter().sum::<f64>() / n,
            bps_min: bps.iter().copied().fold(f64::INFINITY, f64::min),
            bps_max: bps.iter().copied().fold(0.0, f64::max),
            one_way_mean_us: t.iter().sum::<f64>() / n * 1e6,
            one_way_min_us: t.iter().copied().fold(f64::INFINITY, f64::min) * 1e6,
        })
    }
}

/// Hockney's model fitted to a sweep: T(N) = t0 + N / r∞, so n½ = t0 · r∞ is the size that
/// reaches half the asymptotic rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HockneyFit {
    /// The asymptotic rate r∞.
    pub r_inf_bps: f64,
    /// The half-performance message size n½.
    pub n_half_bytes: f64,
    /// The start-up time t0 (one-way).
    pub t0_us: f64,
    /// The fit's coefficient of determination, in the relative terms it was fitted in.
    pub r_squared: f64,
    /// Sizes set aside as too far off the curve the others draw (the machine slowed them).
    #[serde(default)]
    pub set_aside: u32,
}

/// Hockney's model fitted to (bytes, one-way seconds): least squares of T = t0 + N/r∞, each
/// point weighted by 1/T² so small and large messages count alike (relative errors), made
/// robust to the sizes a busy machine slowed (Tukey's biweight on the relative residuals,
/// iterated): a size far off the curve that the others draw is set aside, so one disturbed
/// size does not tilt r∞ and t0. None with fewer than three usable points or a fit that is not
/// physical (r∞ or t0 not positive).
pub fn fit_hockney(points: &[(f64, f64)]) -> Option<HockneyFit> {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(n, t)| n.is_finite() && t.is_finite() && *n > 0.0 && *t > 0.0)
        .collect();
    if pts.len() < 3 {
        return None;
    }
    let mut keep = vec![1.0; pts.len()];
    let mut line = weighted_line(&pts, &keep)?;
    for _ in 0..ROBUST_ROUNDS {
        let next = robust_weights(&pts, line);
        if next.iter().zip(&keep).all(|(a, b)| (a - b).abs() < 1e-9) {
            break;
        }
        // a round that leaves too little to fit keeps the last line
        match weighted_line(&pts, &next) {
            Some(l) => (keep, line) = (next, l),
            None => break,
        }
    }
    let (t0, slope) = line;
    if !(slope > 0.0 && t0 > 0.0 && slope.is_finite() && t0.is_finite()) {
        return None;
    }
    let (mut sw, mut sy) = (0.0, 0.0);
    for (&(_, y), k) in pts.iter().zip(&keep) {
        sw += k / (y * y);
        sy += k / y;
    }
    let mean = sy / sw;
    let (mut ss_res, mut ss_tot) = (0.0, 0.0);
    for (&(x, y), k) in pts.iter().zip(&keep) {
        let w = k / (y * y);
        ss_res += w * (y - t0 - slope * x).powi(2);
        ss_tot += w * (y - mean).powi(2);
    }
    let r_inf = 1.0 / slope;
    Some(HockneyFit {
        r_inf_bps: r_inf * 8.0,
        n_half_bytes: t0 * r_inf,
        t0_us: t0 * 1e6,
        r_squared: if ss_tot > 0.0 {
            1.0 - ss_res / ss_tot
        } else {
            1.0
        },
        set_aside: keep.iter().filter(|&&k| k == 0.0).count() as u32,
    })
}

/// Reweighting rounds of the robust fit, at most (it settles in a few).
const ROBUST_ROUNDS: usize = 20;
/// Tukey's biweight constant (95 % efficiency on clean data), in robust standard deviations.
const BIWEIGHT_C: f64 = 4.685;
/// The smallest spread the biweight assumes: points within 1 % of the curve always count
/// in full, however tightly the rest fit.
const MIN_SPREAD: f64 = 0.01;

/// Weighted least squares of y = t0 + slope · x with weights `keep` / y²: (t0, slope).
fn weighted_line(pts: &[(f64, f64)], keep: &[f64]) -> Option<(f64, f64)> {
    let (mut sw, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for (&(x, y), k) in pts.iter().zip(keep) {
        let w = k / (y * y);
        sw += w;
        sx += w * x;
        sy += w * y;
        sxx += w * x * x;
        sxy += w * x * y;
    }
    let det = sw * sxx - sx * sx;
    // relative to its terms: points at one size alone leave no line
    if !(det.is_finite() && det > 1e-12 * sw * sxx) {
        return None;
    }
    let slope = (sw * sxy - sx * sy) / det;
    Some(((sy - slope * sx) / sw, slope))
}

/// Tukey's biweight of each point's relative residual from the line (t0, slope), its scale
/// the median absolute residual (as a normal standard deviation, at least [`MIN_SPREAD`]).
fn robust_weights(pts: &[(f64, f64)], (t0, slope): (f64, f64)) -> Vec<f64> {
    let rel: Vec<f64> = pts
        .iter()
        .map(|&(x, y)| {
            let f = t0 + slope * x;
            if f > 0.0 {
                (y - f) / f
            } else {
                f64::INFINITY
            }
        })
        .collect();
    let mut abs: Vec<f64> = rel.iter().map(|r| r.abs()).collect();
    abs.sort_by(f64::total_cmp);
    let mad = abs[abs.len() / 2];
    let cut = BIWEIGHT_C * (1.4826 * mad).max(MIN_SPREAD);
    rel.iter()
        .map(|r| {
            let u = r / cut;
            if u.abs() < 1.0 {
                (1.0 - u * u).powi(2)
            } else {
                0.0
            }
        })
        .collect()
}

/// The sweep section of a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepResult {
    /// "pingpong" or "stream".
    pub mode: String,
    pub points: Vec<SweepPoint>,
    /// Hockney's fit on each size's best trial, when it describes the sizes measured.
    pub fit: Option<HockneyFit>,
    /// Why there is no fit, in words (absent with a fit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit_note: Option<String>,
    /// The sweep ended before the largest size because a trial took too long.
    pub stopped_early: bool,
}

impl SweepResult {
    /// The result of the points measured, with Hockney's fit on their minimum times
    /// (NetPIPE keeps each size's best trial: the one the machine disturbed least).
    pub fn new(stream: bool, points: Vec<SweepPoint>, stopped_early: bool) -> SweepResult {
        let data: Vec<(f64, f64)> = points
            .iter()
            .map(|p| (p.bytes as f64, p.one_way_min_us / 1e6))
            .collect();
        let (fit, fit_note) = match judge_fit(&data) {
            Ok(f) => (Some(f), None),
            Err(why) => (None, Some(why)),
        };
        SweepResult {
            mode: if stream { "stream" } else { "pingpong" }.into(),
            fit,
            fit_note,
            points,
            stopped_early,
        }
    }
}

/// Hockney's fit of `points` when it describes them: n½ must lie within the sizes measured,
/// else t0 (and so n½) is an extrapolation the data cannot support, e.g. a sweep that starts
/// above n½ sees only the bandwidth-bound part of the curve. Otherwise why not, in words.
pub fn judge_fit(points: &[(f64, f64)]) -> Result<HockneyFit, String> {
    let sizes = points
        .iter()
        .map(|p| p.0)
        .filter(|n| n.is_finite() && *n > 0.0);
    let (lo, hi) = sizes.fold((f64::INFINITY, 0.0f64), |(l, h), n| (l.min(n), h.max(n)));
    let Some(f) = fit_hockney(points) else {
        return Err(if points.len() < 3 {
            "fewer than three sizes to fit".into()
        } else {
            "the times do not follow T = t0 + N / r∞ (the fit's t0 or r∞ is not positive)".into()
        });
    };
    if f.n_half_bytes < lo || f.n_half_bytes > hi {
        return Err(format!(
            "the fit's n½ ({:.0} B) lies outside the sizes measured ({lo:.0} to {hi:.0} B), so \
             its t0 and n½ are extrapolated: measure from smaller sizes (--min) or up to \
             larger ones (--max)",
            f.n_half_bytes
        ));
    }
    Ok(f)
}

/// The points of a NetPIPE `np.out` file (NetPIPE's own, or `--format netpipe`): a line per
/// size, `bytes  Mbit/s  seconds` (one-way, the best trial), further columns ignored, blank
/// lines skipped. Each becomes a size of one trial. Err names the first line it cannot read.
pub fn parse_netpipe(text: &str) -> Result<Vec<SweepPoint>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.is_empty() {
            continue;
        }
        let bytes = f.first().and_then(|b| b.parse::<f64>().ok());
        let secs = f.get(2).and_then(|t| t.parse::<f64>().ok());
        let point = match (bytes, secs) {
            (Some(b), Some(t)) if b >= 1.0 && b.fract() == 0.0 && b <= 1e15 => {
                SweepPoint::from_trials(b as u64, 1, &[t])
            }
            _ => None,
        };
        match point {
            Some(p) => out.push(p),
            None => {
                return Err(format!(
                    "line {}: not `bytes Mbps seconds` with a positive time: {}",
                    i + 1,
                    line.trim()
                ))
            }
        }
    }
    Ok(out)
}

/// What the client's side of a sweep measured.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SweepSide {
    pub points: Vec<SweepPoint>,
    pub stopped_early: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_sweep_fits_a_default_server() {
        let longest = SweepSpec::default().longest_s();
        assert!(
            longest <= crate::spec::limits::DEFAULT_SERVER_MAX_SECONDS,
            "a default sweep asks {longest} s of a server that grants {}",
            crate::spec::limits::DEFAULT_SERVER_MAX_SECONDS
        );
    }

    #[test]
    fn schedule_follows_netpipe() {
        let s = schedule(1, 131, 3);
        assert_eq!(
            s,
            vec![
                1, 2, 3, 4, 6, 8, 12, 13, 16, 19, 21, 24, 27, 29, 32, 35, 45, 48, 51, 61, 64, 67,
                93, 96, 99, 125, 128, 131
            ]
        );
        // strictly increasing, ends at the maximum, no perturbation without a step
        let big = schedule(1, 8 << 20, 3);
        assert!(big.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(*big.last().unwrap(), 8 << 20);
        assert_eq!(schedule(1, 1, 3), vec![1]);
        assert_eq!(schedule(1, 5, 3), vec![1, 2, 3, 4, 5]);
        assert_eq!(schedule(1, 16, 0), vec![1, 2, 3, 4, 6, 8, 12, 16]);
    }

    #[test]
    fn schedule_starts_at_the_minimum_as_netpipe_l() {
        // NetPIPE -l 1024: steps of 512, then doubling every second size
        assert_eq!(
            schedule(1024, 8192, 0),
            vec![1024, 1536, 2048, 3072, 4096, 6144, 8192]
        );
        assert_eq!(
            schedule(1024, 2048, 3),
            vec![1024, 1027, 1533, 1536, 1539, 2045, 2048]
        );
        // a start off the powers of two keeps its own steps
        assert_eq!(schedule(1000, 4000, 0), vec![1000, 1500, 2000, 3000, 4000]);
        // nothing below the minimum, even a perturbation
        assert!(schedule(16, 1 << 20, 3).iter().all(|&s| s >= 16));
        assert_eq!(schedule(7, 7, 3), vec![7]);
    }

    #[test]
    fn perturbation_needs_a_step_above_it() {
        // ±10 only where the step to the next size exceeds 11 bytes (16 and 24 step by 8,
        // 32 and 48 by 16, 64 by 32); 32 + 10 passes 48 − 10, and both are measured
        let s = schedule(1, 64, 10);
        assert_eq!(
            s,
            vec![1, 2, 3, 4, 6, 8, 12, 16, 22, 24, 32, 38, 42, 48, 54, 58, 64]
        );
        // the default ±3 appears where the step exceeds 4 (the step after 16 is 8)
        assert!(schedule(1, 32, 3).starts_with(&[1, 2, 3, 4, 6, 8, 12, 13, 16, 19]));
        assert_eq!(schedule(1, 32, 0).len(), 10);
    }

    #[test]
    fn a_fit_whose_n_half_lies_outside_the_sizes_is_refused() {
        // t0 = 10 µs, r∞ = 1 GB/s: n½ = 10 000 B
        let curve = |sizes: &[u64]| -> Vec<(f64, f64)> {
            sizes
                .iter()
                .map(|&n| (n as f64, 10e-6 + n as f64 / 1e9))
                .collect()
        };
        let inside = judge_fit(&curve(&schedule(1, 1 << 20, 3))).unwrap();
        assert!((inside.n_half_bytes / 10_000.0 - 1.0).abs() < 1e-6);
        let above = judge_fit(&curve(&schedule(65536, 1 << 20, 3))).unwrap_err();
        assert!(above.contains("outside the sizes measured"), "{above}");
        let below = judge_fit(&curve(&schedule(1, 1024, 3))).unwrap_err();
        assert!(below.contains("n½ (10000 B)"), "{below}");
        assert!(judge_fit(&curve(&[1, 2]))
            .unwrap_err()
            .contains("fewer than three"));
        // the result keeps the reason in place of the fit
        let pts: Vec<SweepPoint> = curve(&schedule(65536, 1 << 20, 0))
            .iter()
            .map(|&(n, t)| SweepPoint::from_trials(n as u64, 3, &[t]).unwrap())
            .collect();
        let r = SweepResult::new(false, pts, false);
        assert!(r.fit.is_none() && r.fit_note.is_some());
    }

    #[test]
    fn the_fit_uses_each_sizes_best_trial() {
        // every size has a clean trial and one twice as slow: the fit follows the clean ones
        let pts: Vec<SweepPoint> = schedule(1, 1 << 20, 3)
            .into_iter()
            .map(|n| {
                let t = 5e-6 + n as f64 / 2.5e9;
                SweepPoint::from_trials(n, 6, &[2.0 * t, t, 2.0 * t]).unwrap()
            })
            .collect();
        let f = SweepResult::new(false, pts, false).fit.unwrap();
        assert!((f.t0_us - 5.0).abs() < 1e-6, "{f:?}");
        assert!((f.r_inf_bps / 2e10 - 1.0).abs() < 1e-9, "{f:?}");
    }

    #[test]
    fn fit_recovers_a_synthetic_curve() {
        // r∞ = 1.25 GB/s (10 Gbit/s), t0 = 12 µs: n½ = 15 000 bytes
        let (r_inf, t0) = (1.25e9, 12e-6);
        let clean: Vec<(f64, f64)> = schedule(1, 8 << 20, 3)
            .into_iter()
            .map(|n| (n as f64, t0 + n as f64 / r_inf))
            .collect();
        let f = fit_hockney(&clean).unwrap();
        assert!((f.r_inf_bps / 1e10 - 1.0).abs() < 1e-9, "{f:?}");
        assert!((f.n_half_bytes / 15_000.0 - 1.0).abs() < 1e-9, "{f:?}");
        assert!((f.t0_us - 12.0).abs() < 1e-6 && f.r_squared > 0.999_999);
        // ±0.3 % deterministic noise: still within 1 %
        let noisy: Vec<(f64, f64)> = clean
            .iter()
            .enumerate()
            .map(|(i, &(n, t))| (n, t * (1.0 + 0.003 * ((i * 7 % 5) as f64 - 2.0) / 2.0)))
            .collect();
        let f = fit_hockney(&noisy).unwrap();
        assert!((f.r_inf_bps / 1e10 - 1.0).abs() < 0.01, "{f:?}");
        assert!((f.n_half_bytes / 15_000.0 - 1.0).abs() < 0.01, "{f:?}");
    }

    #[test]
    fn the_fit_sets_aside_sizes_the_machine_slowed() {
        // t0 = 2.5 µs, r∞ = 5 GB/s (40 Gbit/s): n½ = 12 500 B. Every fifth size took twice
        // its time (a busy host), as single sizes of a loaded sweep do
        let (r_inf, t0) = (5e9, 2.5e-6);
        let sizes = schedule(1, 8 << 20, 3);
        let slowed = sizes.len().div_ceil(5) as u32;
        let pts: Vec<(f64, f64)> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let t = t0 + n as f64 / r_inf;
                (n as f64, if i % 5 == 2 { 2.0 * t } else { t })
            })
            .collect();
        let f = fit_hockney(&pts).unwrap();
        assert!((f.r_inf_bps / 4e10 - 1.0).abs() < 0.01, "{f:?}");
        assert!((f.t0_us / 2.5 - 1.0).abs() < 0.01, "{f:?}");
        assert!((f.n_half_bytes / 12_500.0 - 1.0).abs() < 0.01, "{f:?}");
        assert_eq!(f.set_aside, slowed, "{f:?}");
        // the plain weighted least squares would have been pulled off by them: the robust
        // rule is what keeps r∞ within 1 %
        let plain = weighted_line(&pts, &vec![1.0; pts.len()]).unwrap();
        assert!((8.0 / plain.1 / 4e10 - 1.0).abs() > 0.05, "{plain:?}");
        // a clean curve loses no size
        let clean: Vec<(f64, f64)> = sizes
            .iter()
            .map(|&n| (n as f64, t0 + n as f64 / r_inf))
            .collect();
        assert_eq!(fit_hockney(&clean).unwrap().set_aside, 0);
    }

    #[test]
    fn netpipe_output_reads_back_into_points() {
        // NetPIPE's three columns, and a fourth some builds add
        let text = "       1 3.415 0.00000223\n\n    1024 3410.84 0.00000229 0.51\n";
        let pts = parse_netpipe(text).unwrap();
        assert_eq!(pts.len(), 2);
        assert_eq!((pts[0].bytes, pts[1].bytes), (1, 1024));
        assert!((pts[1].one_way_min_us - 2.29).abs() < 1e-9);
        let bad = parse_netpipe("1 2 0.1\n2048 x\n").unwrap_err();
        assert!(bad.starts_with("line 2:"), "{bad}");
        assert!(parse_netpipe("1.5 2 0.1").is_err());
        assert!(parse_netpipe("16 2 0").is_err());
    }

    #[test]
    fn fit_refuses_too_few_or_unphysical_points() {
        assert!(fit_hockney(&[(1.0, 1.0), (2.0, 2.0)]).is_none());
        assert!(fit_hockney(&[(1.0, 3.0), (2.0, 2.0), (3.0, 1.0)]).is_none());
        assert!(fit_hockney(&[(f64::NAN, 1.0), (1.0, 0.0), (2.0, -1.0)]).is_none());
    }

    #[test]
    fn point_from_trials() {
        let p = SweepPoint::from_trials(1000, 30, &[1e-5, 2e-5, 0.0]).unwrap();
        assert_eq!(p.trials, 2);
        assert!((p.bps_max - 8e8).abs() < 1.0 && (p.bps_min - 4e8).abs() < 1.0);
        assert!((p.one_way_min_us - 10.0).abs() < 1e-9);
        assert!(SweepPoint::from_trials(1, 1, &[]).is_none());
    }
}
