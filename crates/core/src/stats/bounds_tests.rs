//! Intervals held to what a figure can be, and verdicts that agree with their intervals.

use proptest::prelude::*;

use super::*;

#[test]
fn a_goodput_interval_never_goes_below_zero() {
    // two runs far apart: the t interval of the mean reaches below zero
    let raw = Summary::of(&[2e9, 48e9]).unwrap();
    assert!(raw.ci95_low.unwrap() < 0.0);
    let s = raw.clipped(Metric::Goodput.bounds());
    assert_eq!(s.ci95_low, Some(0.0));
    assert_eq!(s.ci95_high, raw.ci95_high);
    // the half-width is the t interval's still: --until-ci judges the spread
    assert_eq!(s.ci95_half_width, raw.ci95_half_width);
}

#[test]
fn a_cpu_interval_stays_within_0_and_100_percent() {
    let s = Summary::of(&[70.0, 99.0, 100.0])
        .unwrap()
        .clipped(Metric::Cpu.bounds());
    assert_eq!(s.ci95_high, Some(100.0));
    assert!(s.ci95_low.unwrap() >= 0.0);
    let c = compare_metric(Metric::Cpu, &[20.0, 90.0, 30.0], &[99.0, 100.0, 97.0, 98.0]);
    let hi = c.diff_ci95_high.unwrap_or(0.0);
    assert!(c.a.unwrap().mean + hi <= 100.0 + 1e-9, "{c:?}");
}

#[test]
fn a_change_is_never_below_minus_100_percent() {
    let c = compare_metric(
        Metric::Goodput,
        &[10e9, 11e9, 9e9, 10.5e9, 9.5e9],
        &[0.5e9, 19e9, 1e9, 18e9, 2e9],
    );
    let lo = c.change_ci95_low_percent.unwrap();
    assert!(lo >= -100.0, "{lo}");
    // unclipped, the same samples give an impossible bound
    let raw = compare(
        &[10e9, 11e9, 9e9, 10.5e9, 9.5e9],
        &[0.5e9, 19e9, 1e9, 18e9, 2e9],
    );
    assert!(raw.change_ci95_low_percent.unwrap() < -100.0, "{raw:?}");
}

#[test]
fn no_significant_change_is_never_shown_beside_an_interval_without_zero() {
    // three runs against three: Welch's interval leaves out zero, but the rank test the
    // samples call for cannot reach p < 0.05, so the verdict is "no significant change"
    let (a, b) = ([100.0, 101.0, 102.0], [110.0, 111.0, 112.0]);
    let w = welch(&a, &b).unwrap();
    assert!(w.ci95_low > 0.0);
    let c = compare(&a, &b);
    assert_eq!(c.change, Change::NoSignificantChange);
    assert_eq!((c.diff_ci95_low, c.change_ci95_low_percent), (None, None));
    // five against five can: the interval is the rank test's and leaves out zero
    let c = compare(
        &[100.0, 101.0, 102.0, 103.0, 104.0],
        &[110.0, 111.0, 112.0, 113.0, 150.0],
    );
    assert_eq!(c.test.unwrap().kind, TestKind::MannWhitney);
    assert_eq!(c.change, Change::Higher);
    assert!(c.diff_ci95_low.unwrap() > 0.0, "{c:?}");
}

#[test]
fn a_handful_of_retransmits_gets_counts_not_percent() {
    // 2 retransmits in A against 35 in B: "+1650 %" of almost nothing
    let a = [0.0, 1.0, 0.0, 0.0, 1.0];
    let b = [5.0, 8.0, 6.0, 7.0, 9.0];
    let c = compare_metric(Metric::Retransmits, &a, &b);
    assert_eq!(c.change, Change::Higher);
    assert_eq!(c.change_percent, None);
    assert_eq!(c.change_ci95_high_percent, None);
    assert!(compare(&a, &b).change_percent.unwrap() > 1000.0);
    // a handful on both sides: no verdict at all
    let c = compare_metric(Metric::Retransmits, &a, &[1.0, 2.0, 0.0, 3.0, 1.0]);
    assert_eq!(c.change, Change::Untestable);
    assert!(c.test.is_some());
    // enough on A's side: a change in percent as for any metric
    let c = compare_metric(Metric::Retransmits, &[9.0, 10.0, 11.0], &[30.0, 31.0, 29.0]);
    assert!(c.change_percent.is_some());
}

#[test]
fn the_shift_interval_is_hodges_lehmann_from_the_exact_distribution() {
    // 4 against 4: U's lower tail P(U ≤ 0) = 1/70 < 0.025 and P(U ≤ 1) = 2/70 > 0.025,
    // so k = 1: the interval runs from the smallest to the largest of the 16 differences
    let a = [1.0, 2.0, 3.0, 4.0];
    let b = [10.0, 20.0, 30.0, 40.0];
    assert_eq!(shift_interval(&a, &b), Some((6.0, 39.0)));
    // 3 against 3 can never reach p < 0.05: no interval
    assert_eq!(shift_interval(&a[..3], &b[..3]), None);
}

fn sample() -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(0.0f64..1000.0, 1..14)
}

proptest! {
    #[test]
    fn intervals_stay_possible_and_agree_with_the_verdict(a in sample(), b in sample(), k in 0usize..8) {
        let metric = Metric::ALL[k];
        // CPU and loss are percentages: scale the samples into 0..100
        let scale = if metric.bounds().1.is_some() { 0.1 } else { 1.0 };
        let a: Vec<f64> = a.iter().map(|x| x * scale).collect();
        let b: Vec<f64> = b.iter().map(|x| x * scale).collect();
        let c = compare_metric(metric, &a, &b);
        let (lo_bound, hi_bound) = metric.bounds();
        for s in [c.a, c.b].into_iter().flatten() {
            for x in [s.ci95_low, s.ci95_high].into_iter().flatten() {
                prop_assert!(x >= lo_bound && hi_bound.is_none_or(|h| x <= h), "{s:?}");
            }
        }
        if let Some(lo) = c.change_ci95_low_percent {
            prop_assert!(lo >= -100.0 - 1e-9, "{c:?}");
        }
        if let (Some(lo), Some(hi)) = (c.diff_ci95_low, c.diff_ci95_high) {
            let ok = match c.change {
                Change::Higher => lo > 0.0,
                Change::Lower => hi < 0.0,
                Change::NoSignificantChange => lo <= 0.0 && hi >= 0.0,
                Change::Untestable => false,
            };
            prop_assert!(ok, "{c:?}");
            let ma = c.a.unwrap().mean;
            prop_assert!(ma + lo >= lo_bound - 1e-9, "{c:?}");
            prop_assert!(hi_bound.is_none_or(|h| ma + hi <= h + 1e-9), "{c:?}");
        }
    }

    #[test]
    fn the_shift_interval_leaves_out_zero_exactly_when_the_exact_test_rejects(
        a in prop::collection::vec(0u32..10_000, 2..12),
        b in prop::collection::vec(0u32..10_000, 2..12),
    ) {
        let a: Vec<f64> = a.iter().map(|&x| f64::from(x)).collect();
        let b: Vec<f64> = b.iter().map(|&x| f64::from(x)).collect();
        let mut all: Vec<f64> = a.iter().chain(&b).copied().collect();
        all.sort_by(f64::total_cmp);
        all.dedup();
        prop_assume!(all.len() == a.len() + b.len());
        let m = mann_whitney(&a, &b).unwrap();
        prop_assert!(m.exact);
        let excludes = shift_interval(&a, &b).is_some_and(|(lo, hi)| lo > 0.0 || hi < 0.0);
        prop_assert_eq!(excludes, m.p_value < ALPHA, "{:?}", m);
    }
}
