//! The Mann–Whitney U test (Wilcoxon rank-sum): whether values of B tend to be larger or
//! smaller than values of A, without assuming a distribution. Exact for small samples without
//! ties; otherwise the normal approximation with tie and continuity corrections.

use serde::{Deserialize, Serialize};

use statrs::distribution::{ContinuousCDF, Normal};

use super::{finite, normal_two_sided_p, ALPHA};

/// Largest nA + nB for which the exact distribution of U is computed (its counts stay far
/// inside i128 and the work is a few thousand operations).
pub const EXACT_MAX_N: usize = 60;

/// Outcome of the Mann–Whitney test of B against A.
///
/// `u_b` counts the pairs (a, b) with b > a, ties counting one half; `u_a` the reverse, and
/// `u_a + u_b = nA × nB`. `z` is the normal statistic when the approximation was used (sign:
/// positive when B tends higher).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MannWhitney {
    pub n_a: usize,
    pub n_b: usize,
    pub u_a: f64,
    pub u_b: f64,
    pub z: Option<f64>,
    pub p_value: f64,
    pub exact: bool,
    pub ties: bool,
}

/// Mann–Whitney U on the finite values of two samples; None unless each has one value.
///
/// Two-sided p-value: exact (twice the smaller tail of U's distribution) when there are no
/// ties and nA + nB ≤ [`EXACT_MAX_N`]; otherwise the normal approximation with the variance
/// corrected for ties and a continuity correction of one half.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    let a = finite(a);
    let b = finite(b);
    let (na, nb) = (a.len(), b.len());
    if na == 0 || nb == 0 {
        return None;
    }
    let (ranks_b_sum, tie_term) = rank_sum_of_second(&a, &b);
    let nbf = nb as f64;
    let u_b = ranks_b_sum - nbf * (nbf + 1.0) / 2.0;
    let pairs = (na * nb) as f64;
    let u_a = pairs - u_b;
    let ties = tie_term > 0.0;
    if !ties && na + nb <= EXACT_MAX_N {
        let p = exact_two_sided_p(na, nb, u_a.min(u_b).round() as usize)?;
        return Some(MannWhitney {
            n_a: na,
            n_b: nb,
            u_a,
            u_b,
            z: None,
            p_value: p,
            exact: true,
            ties,
        });
    }
    let (z, p) = normal_approx(na, nb, u_b, tie_term)?;
    Some(MannWhitney {
        n_a: na,
        n_b: nb,
        u_a,
        u_b,
        z: Some(z),
        p_value: p,
        exact: false,
        ties,
    })
}

/// The normal approximation of U's distribution: z (positive when B tends higher) and the
/// two-sided p-value, with the variance corrected for ties (`tie_term` is Σ(t³ − t) over
/// groups of t equal values in the pooled sample) and a continuity correction of one half.
pub(super) fn normal_approx(na: usize, nb: usize, u_b: f64, tie_term: f64) -> Option<(f64, f64)> {
    let pairs = (na * nb) as f64;
    let n = (na + nb) as f64;
    let mu = pairs / 2.0;
    let var = pairs / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
    if var > 0.0 {
        let dev = ((u_b - mu).abs() - 0.5).max(0.0);
        let z = dev.copysign(u_b - mu) / var.sqrt();
        Some((z, normal_two_sided_p(z)?))
    } else {
        // every value is the same: nothing tells the samples apart
        Some((0.0, 1.0))
    }
}

/// Mid-ranks (1-based) of the values in their order, and the tie term Σ(t³ − t): what the
/// test needs of a pooled sample, computed once for every way of splitting it in two.
pub(super) fn midranks(v: &[f64]) -> (Vec<f64>, f64) {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&x, &y| v[x].total_cmp(&v[y]));
    let mut ranks = vec![0.0; v.len()];
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && v[order[j + 1]] == v[order[i]] {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        for &k in &order[i..=j] {
            ranks[k] = rank;
        }
        i = j + 1;
    }
    (ranks, tie_term)
}

/// Whether an exact rank test on samples of these sizes can reach p < `alpha` at all: its
/// smallest two-sided p-value is 2 / C(nA + nB, nA). Two runs against two never can (1/3);
/// four against four can (2/70).
pub fn rank_test_can_reach(n_a: usize, n_b: usize, alpha: f64) -> bool {
    if n_a == 0 || n_b == 0 {
        return false;
    }
    // C(nA + nB, k) grows past 2/alpha quickly; stop as soon as it does
    let k = n_a.min(n_b);
    let n = n_a + n_b;
    let mut c = 1.0f64;
    for i in 0..k {
        c = c * (n - i) as f64 / (i + 1) as f64;
        if 2.0 / c < alpha {
            return true;
        }
    }
    2.0 / c < alpha
}

/// Most pairs (nA × nB) for which [`shift_interval`] sorts every difference.
pub const SHIFT_MAX_PAIRS: usize = 250_000;

/// The 95 % confidence interval of the shift of B against A that goes with the Mann–Whitney
/// test (Hodges and Lehmann's): the k-th smallest and the k-th largest of the nA × nB
/// differences b − a, where k is the count of U values in the test's rejection tail (from
/// U's exact distribution where the test uses it, else its normal approximation). The
/// interval leaves out 0 exactly when the test finds p < 0.05, ties aside. None when the
/// samples are too small for the test ever to reach p < 0.05 (the interval is unbounded),
/// or have more than [`SHIFT_MAX_PAIRS`] pairs.
pub fn shift_interval(a: &[f64], b: &[f64]) -> Option<(f64, f64)> {
    let a = finite(a);
    let b = finite(b);
    let (na, nb) = (a.len(), b.len());
    let pairs = na.checked_mul(nb)?;
    if pairs == 0 || pairs > SHIFT_MAX_PAIRS {
        return None;
    }
    let (_, tie_term) = rank_sum_of_second(&a, &b);
    let k = if tie_term == 0.0 && na + nb <= EXACT_MAX_N {
        exact_tail_count(na, nb)?
    } else {
        let n = (na + nb) as f64;
        let var = pairs as f64 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
        let z = Normal::new(0.0, 1.0).ok()?.inverse_cdf(1.0 - ALPHA / 2.0);
        let k = (pairs as f64 / 2.0 - z * var.max(0.0).sqrt() + 0.5).floor();
        if k < 1.0 {
            return None;
        }
        k as usize
    };
    if k == 0 || k > pairs {
        return None;
    }
    let mut d: Vec<f64> = b
        .iter()
        .flat_map(|y| a.iter().map(move |x| y - x))
        .collect();
    d.sort_by(f64::total_cmp);
    Some((d[k - 1], d[pairs - k]))
}

/// How many of the lowest U values the exact two-sided test rejects at [`ALPHA`]: the
/// count of u with 2·P(U ≤ u) < α.
fn exact_tail_count(m: usize, n: usize) -> Option<usize> {
    let counts = u_counts(m, n);
    let total: i128 = counts.iter().sum();
    if total <= 0 {
        return None;
    }
    let mut tail = 0i128;
    let mut k = 0;
    for c in &counts {
        tail += c;
        if 2.0 * tail as f64 / total as f64 >= ALPHA {
            break;
        }
        k += 1;
    }
    Some(k)
}

/// Sum of the ranks of `b` in the pooled sample (mid-ranks for ties) and the tie term
/// Σ(t³ − t) over groups of t equal values.
fn rank_sum_of_second(a: &[f64], b: &[f64]) -> (f64, f64) {
    let mut pooled: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, false))
        .chain(b.iter().map(|&x| (x, true)))
        .collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut sum_b = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < pooled.len() {
        let mut j = i;
        while j + 1 < pooled.len() && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        // positions i..=j (0-based) share the mean of ranks i+1..=j+1
        let rank = (i + j) as f64 / 2.0 + 1.0;
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        sum_b += rank * pooled[i..=j].iter().filter(|p| p.1).count() as f64;
        i = j + 1;
    }
    (sum_b, tie_term)
}

/// Two-sided exact p-value, 2·P(U ≤ u_min), capped at 1.
///
/// The counts of U over all C(m+n, m) arrangements are the coefficients of the Gaussian
/// binomial [m+n choose m]_q, built as the product over i = 1..m of (1 − q^(n+i)) / (1 − q^i);
/// after each step the partial product is itself a Gaussian binomial, so every division is
/// exact.
fn exact_two_sided_p(m: usize, n: usize, u_min: usize) -> Option<f64> {
    let poly = u_counts(m, n);
    let total: i128 = poly.iter().sum();
    if total <= 0 {
        return None;
    }
    let tail: i128 = poly.iter().take(u_min + 1).sum();
    Some((2.0 * tail as f64 / total as f64).min(1.0))
}

/// How many of the C(m+n, m) arrangements give each value of U, 0 to m·n.
fn u_counts(m: usize, n: usize) -> Vec<i128> {
    let (m, n) = (m.min(n), m.max(n));
    let deg = m * n;
    let mut poly = vec![0i128; deg + 1];
    poly[0] = 1;
    for i in 1..=m {
        // multiply by (1 − q^(n+i)), from the top so each coefficient is read before written
        let shift = n + i;
        for k in (shift..=deg).rev() {
            poly[k] -= poly[k - shift];
        }
        // divide by (1 − q^i): r[k] = p[k] + r[k − i]
        for k in i..=deg {
            poly[k] += poly[k - i];
        }
    }
    poly
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_counts_match_binomial_totals() {
        // C(8, 4) = 70 arrangements; P(U ≤ 0) = 1/70
        let p = exact_two_sided_p(4, 4, 0).unwrap();
        assert!((p - 2.0 / 70.0).abs() < 1e-15);
        // U for (3, 3) ranges 0..=9 with counts 1 1 2 3 3 3 3 2 1 1 (20 in all)
        let p = exact_two_sided_p(3, 3, 2).unwrap();
        assert!((p - 2.0 * 4.0 / 20.0).abs() < 1e-15);
        // the largest size allowed does not overflow
        let p = exact_two_sided_p(30, 30, 450).unwrap();
        assert!(p > 0.99 && p <= 1.0, "{p}");
    }

    #[test]
    fn smallest_reachable_p() {
        assert!(!rank_test_can_reach(2, 2, 0.05));
        assert!(!rank_test_can_reach(3, 3, 0.05)); // 2/20
        assert!(rank_test_can_reach(4, 4, 0.05)); // 2/70
        assert!(!rank_test_can_reach(2, 7, 0.05)); // 2/36
        assert!(rank_test_can_reach(2, 8, 0.05)); // 2/45
        assert!(!rank_test_can_reach(2, 5, 0.05)); // 2/21
        assert!(!rank_test_can_reach(0, 9, 0.05));
    }
}
