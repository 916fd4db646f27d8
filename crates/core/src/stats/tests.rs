//! Statistics against published values: t tables, R's documented `t.test` and `wilcox.test`
//! examples (Student's sleep data; Hollander & Wolfe's depression data).

use super::*;
use statrs::distribution::ContinuousCDF;

fn close(x: f64, want: f64, tol: f64) {
    assert!((x - want).abs() <= tol, "got {x}, want {want} ± {tol}");
}

/// Student's sleep data (Cushny and Peebles), extra hours of sleep under two drugs.
const SLEEP_1: [f64; 10] = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0];
const SLEEP_2: [f64; 10] = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4];

/// A sample of n values whose empirical distribution follows N(mean, sd): the normal
/// quantiles at (i − ½)/n. Order does not matter to any statistic here.
fn normal_like(n: usize, mean: f64, sd: f64) -> Vec<f64> {
    let z = statrs::distribution::Normal::new(0.0, 1.0).unwrap();
    (0..n)
        .map(|i| mean + sd * z.inverse_cdf((i as f64 + 0.5) / n as f64))
        .collect()
}

#[test]
fn t_quantiles_match_the_table() {
    for (df, want) in [
        (1.0, 12.706205),
        (2.0, 4.302653),
        (5.0, 2.570582),
        (9.0, 2.262157),
        (10.0, 2.228139),
        (30.0, 2.042272),
        (120.0, 1.979930),
        (1e9, 1.959964),
    ] {
        close(t_quantile(0.975, df).unwrap(), want, 1e-5);
    }
    assert_eq!(t_quantile(1.0, 5.0), None);
    assert_eq!(t_quantile(0.5, 0.0), None);
    close(t_two_sided_p(2.0, 5.0).unwrap(), 0.101939, 1e-6);
    close(normal_two_sided_p(1.959964).unwrap(), 0.05, 1e-6);
}

#[test]
fn summary_of_sleep_group_1() {
    let s = Summary::of(&SLEEP_1).unwrap();
    assert_eq!(s.n, 10);
    assert_eq!((s.min, s.max), (-1.6, 3.7));
    close(s.median, 0.35, 1e-12);
    close(s.mean, 0.75, 1e-12);
    close(s.stddev.unwrap(), 1.789010, 1e-6);
    close(s.ci95_low.unwrap(), -0.529780, 1e-6);
    close(s.ci95_high.unwrap(), 2.029780, 1e-6);
}

#[test]
fn summary_edges() {
    assert_eq!(Summary::of(&[]), None);
    assert_eq!(Summary::of(&[f64::NAN]), None);
    let one = Summary::of(&[5.0, f64::INFINITY]).unwrap();
    assert_eq!(
        (one.n, one.median, one.stddev, one.ci95_half_width),
        (1, 5.0, None, None)
    );
    let flat = Summary::of(&[3.0, 3.0, 3.0]).unwrap();
    assert_eq!(flat.ci95_half_width, Some(0.0));
    // two-pass variance keeps precision on large, close values
    let big = Summary::of(&[1e10 + 1.0, 1e10 + 2.0, 1e10 + 3.0]).unwrap();
    close(big.stddev.unwrap(), 1.0, 1e-6);
}

#[test]
fn welch_matches_r_on_sleep_data() {
    // R: t.test(extra ~ group, data = sleep): t = -1.8608, df = 17.776, p = 0.07939,
    // 95 % CI of group 1 − group 2: [-3.3654832, 0.2054832]. Here B − A, so signs flip.
    let w = welch(&SLEEP_1, &SLEEP_2).unwrap();
    close(w.t, 1.860813, 1e-6);
    close(w.df, 17.776474, 1e-6);
    close(w.p_value, 0.079394, 1e-6);
    close(w.ci95_low, -0.205483, 1e-6);
    close(w.ci95_high, 3.365483, 1e-6);
}

#[test]
fn welch_edges() {
    assert_eq!(welch(&[1.0], &[1.0, 2.0]), None);
    let same = welch(&[2.0, 2.0], &[2.0, 2.0]).unwrap();
    assert_eq!((same.p_value, same.t), (1.0, 0.0));
    let apart = welch(&[2.0, 2.0], &[1.0, 1.0, 1.0]).unwrap();
    assert_eq!(apart.p_value, 0.0);
    assert!(apart.t < 0.0);
}

#[test]
fn mann_whitney_exact_matches_hollander_wolfe() {
    // R: wilcox.test(x, y, alternative = "greater") gives W = 35, p = 0.1272; two-sided 0.2544
    let x = [0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46];
    let y = [1.15, 0.88, 0.90, 0.74, 1.21];
    let m = mann_whitney(&y, &x).unwrap();
    assert!(m.exact && !m.ties);
    assert_eq!((m.u_b, m.u_a), (35.0, 15.0));
    close(m.p_value, 0.254412, 1e-6);
}

#[test]
fn mann_whitney_with_ties_matches_r_on_sleep_data() {
    // R: wilcox.test(extra ~ group, data = sleep): W = 25.5, p-value = 0.06933 (normal
    // approximation, tie and continuity corrections)
    let m = mann_whitney(&SLEEP_2, &SLEEP_1).unwrap();
    assert!(!m.exact && m.ties);
    assert_eq!(m.u_b, 25.5);
    close(m.p_value, 0.069328, 1e-6);
    let flat = mann_whitney(&[1.0, 1.0], &[1.0, 1.0, 1.0]).unwrap();
    assert_eq!(flat.p_value, 1.0);
}

#[test]
fn skewness_and_test_choice() {
    close(skewness(&SLEEP_1).unwrap(), 0.580921, 1e-6);
    assert_eq!(choose_test(&SLEEP_1, &SLEEP_2), TestKind::Welch);
    assert_eq!(
        choose_test(&[1.0, 2.0, 3.0, 4.0], &SLEEP_2),
        TestKind::MannWhitney
    );
    let skewed = [1.0, 1.1, 1.0, 1.2, 1.1, 1.0, 9.0];
    assert!(skewness(&skewed).unwrap() > SKEW_LIMIT);
    assert_eq!(choose_test(&skewed, &SLEEP_2), TestKind::MannWhitney);
}

#[test]
fn until_ci_stops_when_tight() {
    assert!(!until_ci_reached(&[100.0], 50.0));
    // mean 100, sd 1, n 10: half-width = 2.262157 × 1 / √10 = 0.7154 %
    let s = normal_like(10, 100.0, 1.0);
    let half = Summary::of(&s).unwrap().ci95_half_width_percent().unwrap();
    assert!(until_ci_reached(&s, half + 1e-9));
    assert!(!until_ci_reached(&s, half - 1e-9));
    assert!(!until_ci_reached(&s, f64::NAN));
    assert!(!until_ci_reached(&[0.0, 0.0], 1.0));
}

#[test]
fn compare_sees_a_quarter_slower() {
    let a = normal_like(12, 100e9, 5e9);
    let b = normal_like(12, 75e9, 5e9);
    let c = compare(&a, &b);
    assert_eq!(c.change, Change::Lower);
    close(c.change_percent.unwrap(), -25.0, 1e-9);
    let t = c.test.unwrap();
    assert_eq!(t.kind, TestKind::Welch);
    assert!(t.p_value < 0.001, "{}", t.p_value);
    assert!(c.change_ci95_low_percent.unwrap() < -25.0);
    assert!(c.change_ci95_high_percent.unwrap() > -25.0);
    assert!(c.change_ci95_high_percent.unwrap() < -20.0);
}

#[test]
fn compare_same_distribution_is_no_change() {
    let a = normal_like(10, 100.0, 5.0);
    let b = normal_like(13, 100.5, 5.5);
    let c = compare(&a, &b);
    assert_eq!(c.change, Change::NoSignificantChange);
    assert!(c.test.unwrap().p_value > 0.5);
}

#[test]
fn compare_with_one_run_is_untestable() {
    let c = compare(&[100.0], &[75.0, 76.0]);
    assert_eq!(c.change, Change::Untestable);
    close(c.change_percent.unwrap(), -24.5, 1e-9);
    assert_eq!(c.test, None);
    let c = compare(&[], &[]);
    assert_eq!(
        (c.change, c.a, c.change_percent),
        (Change::Untestable, None, None)
    );
}

#[test]
fn compare_few_runs_uses_exact_ranks() {
    // seed 000's two reported runs per kernel: too few to call, by an honest test
    let c = compare(&[1110.21, 1109.91], &[821.05, 820.79]);
    let t = c.test.unwrap();
    assert_eq!((t.kind, t.exact), (TestKind::MannWhitney, true));
    close(t.p_value, 1.0 / 3.0, 1e-12);
    assert_eq!(c.change, Change::NoSignificantChange);
    // four against four, fully separated, reaches p = 2/70
    let c = compare(&[10.0, 11.0, 12.0, 13.0], &[5.0, 6.0, 7.0, 8.0]);
    close(c.test.unwrap().p_value, 2.0 / 70.0, 1e-12);
    assert_eq!(c.change, Change::Lower);
}
