//! Welch's t-test: the difference of two means without assuming equal variances, with the
//! Welch–Satterthwaite degrees of freedom, a two-sided p-value and the 95 % confidence
//! interval of the difference.

use serde::{Deserialize, Serialize};

use super::{finite, mean, t_quantile, t_two_sided_p, variance, CONFIDENCE};

/// Outcome of Welch's t-test of B against A. `diff` is mean(B) − mean(A), so a negative
/// difference means B is lower.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Welch {
    pub mean_a: f64,
    pub mean_b: f64,
    pub diff: f64,
    pub t: f64,
    pub df: f64,
    pub p_value: f64,
    pub ci95_low: f64,
    pub ci95_high: f64,
}

/// Welch's t-test on the finite values of two samples; None unless both have two values.
///
/// When neither sample varies at all the standard error is zero: equal means give p = 1 and
/// different means p = 0 (every run of A differs from every run of B by the same amount), with
/// df = nA + nB − 2 and an interval of zero width.
pub fn welch(a: &[f64], b: &[f64]) -> Option<Welch> {
    let a = finite(a);
    let b = finite(b);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (va, vb) = (variance(&a)?, variance(&b)?);
    let (ma, mb) = (mean(&a), mean(&b));
    let diff = mb - ma;
    let (qa, qb) = (va / na, vb / nb);
    let se = (qa + qb).sqrt();
    if se == 0.0 || !se.is_finite() {
        let (t, p) = if diff == 0.0 {
            (0.0, 1.0)
        } else {
            (diff.signum() * f64::INFINITY, 0.0)
        };
        return Some(Welch {
            mean_a: ma,
            mean_b: mb,
            diff,
            t,
            df: na + nb - 2.0,
            p_value: p,
            ci95_low: diff,
            ci95_high: diff,
        });
    }
    let t = diff / se;
    let df = (qa + qb).powi(2) / (qa * qa / (na - 1.0) + qb * qb / (nb - 1.0));
    let p_value = t_two_sided_p(t, df)?;
    let half = t_quantile(0.5 + CONFIDENCE / 2.0, df)? * se;
    Some(Welch {
        mean_a: ma,
        mean_b: mb,
        diff,
        t,
        df,
        p_value,
        ci95_low: diff - half,
        ci95_high: diff + half,
    })
}
