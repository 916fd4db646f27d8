//! Figures derived from raw counts. The only place arithmetic on results happens, so every
//! renderer shows the same numbers.

use crate::result::IoStats;

/// Bits per second for `bytes` moved in `seconds`; 0 for an empty window.
pub fn bps(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 && seconds.is_finite() {
        bytes as f64 * 8.0 / seconds
    } else {
        0.0
    }
}

/// I/O call statistics for one side.
pub fn io_stats(calls: u64, bytes: u64, seconds: f64) -> IoStats {
    IoStats {
        calls,
        bytes,
        calls_per_s: if seconds > 0.0 {
            calls as f64 / seconds
        } else {
            0.0
        },
        bytes_per_call: if calls > 0 {
            bytes as f64 / calls as f64
        } else {
            0.0
        },
    }
}

/// The Performance Index of the 2004 adapter reviews, `PI = T/C × T/P`: T the goodput in
/// Mbit/s, C the CPU load in percent (the larger `system_percent` of the two hosts), P the
/// link rate in Mbit/s (1000 when unknown, the original gigabit definition). None when the
/// CPU load is unknown or zero.
pub fn performance_index(
    goodput_bps: f64,
    cpu_percent: Option<f64>,
    link_bps: Option<f64>,
) -> Option<f64> {
    let c = cpu_percent?;
    if !(c > 0.0 && c.is_finite()) {
        return None;
    }
    let t = goodput_bps / 1e6;
    let p = link_bps.filter(|l| *l > 0.0).map_or(1000.0, |l| l / 1e6);
    Some(t / c * t / p)
}

/// The larger of two optional values.
pub fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Jain's fairness index of per-flow rates, (Σx)² ÷ (n · Σx²): 1 when every flow got the
/// same, 1/n when one flow got everything (Jain, Chiu and Hawe, 1984). Non-finite and
/// negative values are left out; None without a positive rate.
pub fn jain_fairness(rates: &[f64]) -> Option<f64> {
    let v: Vec<f64> = rates
        .iter()
        .copied()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .collect();
    let sum: f64 = v.iter().sum();
    let squares: f64 = v.iter().map(|x| x * x).sum();
    (sum > 0.0).then(|| (sum * sum / (v.len() as f64 * squares)).clamp(0.0, 1.0))
}

/// Jain's index and the min / median / max of per-stream goodputs; None for fewer than two
/// streams or when nothing moved.
pub fn fairness(rates: &[f64]) -> Option<crate::result::Fairness> {
    let mut v: Vec<f64> = rates.iter().copied().filter(|x| x.is_finite()).collect();
    if v.len() < 2 {
        return None;
    }
    let jain_index = jain_fairness(&v)?;
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median_bps = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(crate::result::Fairness {
        streams: u32::try_from(n).unwrap_or(u32::MAX),
        jain_index,
        min_bps: v[0],
        median_bps,
        max_bps: v[n - 1],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pi_matches_the_review_definition() {
        // 900 Mbit/s at 30 % CPU on a gigabit link: 900/30 × 900/1000 = 27
        let pi = performance_index(900e6, Some(30.0), None).unwrap();
        assert!((pi - 27.0).abs() < 1e-9);
        // same numbers with the link stated as 10 Gbit/s: 30 × 0.09 = 2.7
        let pi = performance_index(900e6, Some(30.0), Some(10e9)).unwrap();
        assert!((pi - 2.7).abs() < 1e-9);
        assert_eq!(performance_index(900e6, None, None), None);
        assert_eq!(performance_index(900e6, Some(0.0), None), None);
    }

    #[test]
    fn fairness_spread_and_index() {
        let f = fairness(&[4.0, 1.0, 3.0]).unwrap();
        assert_eq!(
            (f.streams, f.min_bps, f.median_bps, f.max_bps),
            (3, 1.0, 3.0, 4.0)
        );
        // 8² / (3 × 26)
        assert!((f.jain_index - 64.0 / 78.0).abs() < 1e-12);
        let f = fairness(&[2.0, 6.0, 4.0, 8.0]).unwrap();
        assert_eq!(f.median_bps, 5.0);
        assert_eq!(fairness(&[5.0]), None);
        assert_eq!(fairness(&[0.0, 0.0]), None);
    }

    #[test]
    fn jain_index_bounds() {
        assert_eq!(jain_fairness(&[5.0, 5.0, 5.0, 5.0]), Some(1.0));
        // one of four flows got everything: 1/n
        let one = jain_fairness(&[8.0, 0.0, 0.0, 0.0]).unwrap();
        assert!((one - 0.25).abs() < 1e-12);
        // 1 and 3: 16 / (2 × 10) = 0.8
        assert!((jain_fairness(&[1.0, 3.0]).unwrap() - 0.8).abs() < 1e-12);
        assert_eq!(jain_fairness(&[]), None);
        assert_eq!(jain_fairness(&[0.0, f64::NAN]), None);
    }

    #[test]
    fn rates_and_calls() {
        assert_eq!(bps(1_000_000, 1.0), 8e6);
        assert_eq!(bps(5, 0.0), 0.0);
        let io = io_stats(2048, 16_777_216, 5.40);
        assert!((io.calls_per_s - 379.259).abs() < 0.01);
        assert_eq!(io.bytes_per_call, 8192.0);
    }
}
