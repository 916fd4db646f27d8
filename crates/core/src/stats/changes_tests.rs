//! Change points on synthetic series: seeded normal noise around levels the test chooses.

use super::*;
use crate::synth::Noise;

fn series(levels: &[(usize, f64)], sd_percent: f64, seed: u64) -> Vec<f64> {
    let mut noise = Noise::new(seed);
    levels
        .iter()
        .flat_map(|&(n, level)| vec![level; n])
        .map(|level| noise.normal(level, level * sd_percent / 100.0))
        .collect()
}

#[test]
fn a_clean_step_of_26_percent_is_found_where_it_began() {
    // the seeds' ttcp Tx regression: 1110 KB/s, then 821 KB/s, 1 % run-to-run noise
    let v = series(&[(20, 1110.0), (20, 821.0)], 1.0, 7);
    let c = change_points(&v, ChangeOptions::default());
    assert_eq!(c.len(), 1, "{c:#?}");
    let c = c[0];
    assert_eq!(c.index, 20);
    assert_eq!((c.runs_before, c.runs_after), (20, 20));
    let pct = c.change_percent.unwrap();
    assert!((pct + 26.0).abs() < 1.5, "{pct}");
    let (lo, hi) = (
        c.change_ci95_low_percent.unwrap(),
        c.change_ci95_high_percent.unwrap(),
    );
    assert!(lo <= pct && pct <= hi && hi < 0.0, "{lo} {pct} {hi}");
    // every run below every run before: the exact p is 2 / C(40, 20), times 35 places
    assert!(c.p_value < 1e-8, "{}", c.p_value);
    assert_eq!(c.split_positions, 35);
}

#[test]
fn flat_noisy_series_rarely_show_a_change() {
    // 200 series of 40 runs with 5 % noise and no change: a change in at most the level's
    // share of them (1 %, two expected); nine or more would happen by chance about once
    // in ten thousand at that rate
    let opts = ChangeOptions::default();
    let found = (0..200u64)
        .filter(|&seed| !change_points(&series(&[(40, 100.0)], 5.0, 1000 + seed), opts).is_empty())
        .count();
    println!("flat series with a change: {found} of 200");
    assert!(found <= 8, "{found} of 200 flat series had a change");
    // skewed noise (one slow run in eight) does not fool the rank test either
    let mut noise = Noise::new(5);
    let skewed = (0..200u64)
        .filter(|_| {
            let v: Vec<f64> = (0..40)
                .map(|i| {
                    let x = noise.normal(100.0, 2.0);
                    if i % 8 == 3 {
                        x * 0.6
                    } else {
                        x
                    }
                })
                .collect();
            !change_points(&v, opts).is_empty()
        })
        .count();
    assert!(
        skewed <= 8,
        "{skewed} of 200 skewed flat series had a change"
    );
    // long series take the normal approximation: no looser there
    let long = (0..200u64)
        .filter(|&seed| !change_points(&series(&[(300, 100.0)], 5.0, 5000 + seed), opts).is_empty())
        .count();
    println!("flat series of 300 runs with a change: {long} of 200");
    assert!(long <= 8, "{long} of 200 long flat series had a change");
}

#[test]
fn two_steps_are_both_found() {
    let v = series(&[(15, 100.0), (15, 74.0), (15, 90.0)], 2.0, 11);
    let c = change_points(&v, ChangeOptions::default());
    let at: Vec<usize> = c.iter().map(|c| c.index).collect();
    assert_eq!(at, [15, 30], "{c:#?}");
    assert!((c[0].change_percent.unwrap() + 26.0).abs() < 3.0);
    // the second change is measured between its neighbours: 74 -> 90
    assert!((c[1].change_percent.unwrap() - 21.6).abs() < 4.0, "{c:#?}");
    assert_eq!((c[1].runs_before, c[1].runs_after), (15, 15));
}

#[test]
fn long_series_use_the_running_rank_sum_and_agree_with_the_test() {
    let v = series(&[(90, 100.0), (60, 93.0)], 3.0, 3);
    // the fast scan's p-value at any split is the test's own
    let (ranks, ties) = midranks(&v);
    for at in [3, 40, 90, 147] {
        let nb = (v.len() - at) as f64;
        let right: f64 = ranks[at..].iter().sum();
        let (_, p) = normal_approx(at, v.len() - at, right - nb * (nb + 1.0) / 2.0, ties).unwrap();
        let want = mann_whitney(&v[..at], &v[at..]).unwrap().p_value;
        assert!((p - want).abs() < 1e-12, "{at}: {p} {want}");
    }
    let c = change_points(&v, ChangeOptions::default());
    assert_eq!(c.len(), 1, "{c:#?}");
    assert!((88..=92).contains(&c[0].index), "{c:#?}");
    assert!((c[0].change_percent.unwrap() + 7.0).abs() < 2.0);
    // sides of 800 runs: the interval from the 500 nearest the change on each side
    let v = series(&[(800, 100.0), (800, 90.0)], 3.0, 8);
    let c = change_points(&v, ChangeOptions::default());
    assert_eq!(c.len(), 1, "{c:#?}");
    let (lo, hi) = (
        c[0].change_ci95_low_percent.unwrap(),
        c[0].change_ci95_high_percent.unwrap(),
    );
    assert!(lo < -9.5 && hi > -10.5 && hi - lo < 1.0, "{lo} {hi}");
}

#[test]
fn outliers_short_series_and_unknown_values() {
    // one slow run is not a level
    let mut v = vec![100.0; 30];
    v[12] = 50.0;
    v[13] = 51.0;
    assert!(change_points(&v, ChangeOptions::default()).is_empty());
    // too short to split at all
    assert!(change_points(&[1.0, 2.0, 3.0, 9.0, 9.0], ChangeOptions::default()).is_empty());
    assert!(change_points(&[], ChangeOptions::default()).is_empty());
    // a run with no figure is skipped; the index is the series' own
    let mut v = series(&[(12, 100.0), (12, 70.0)], 1.0, 9);
    v.insert(5, f64::NAN);
    v.insert(20, f64::INFINITY);
    let c = change_points(&v, ChangeOptions::default());
    assert_eq!(c.iter().map(|c| c.index).collect::<Vec<_>>(), [13]);
    // a level that is not one
    for alpha in [0.0, 1.0, f64::NAN] {
        let o = ChangeOptions {
            alpha,
            ..ChangeOptions::default()
        };
        assert!(change_points(&v, o).is_empty());
    }
    // longer minimum segments push a late change out of reach
    let v = series(&[(20, 100.0), (4, 60.0)], 1.0, 2);
    assert_eq!(change_points(&v, ChangeOptions::default()).len(), 1);
    let o = ChangeOptions {
        min_segment: 5,
        ..ChangeOptions::default()
    };
    assert!(change_points(&v, o).is_empty());
}

#[test]
fn runs_are_taken_in_time_order_and_named_by_id() {
    let v = series(&[(10, 100.0), (10, 70.0)], 1.0, 4);
    // stored out of order: ids count down while time counts up
    let runs: Vec<SeriesRun> = v
        .iter()
        .enumerate()
        .map(|(i, &value)| SeriesRun {
            id: 100 - i as i64,
            started_unix_s: 1000.0 + i as f64,
            value,
        })
        .rev()
        .collect();
    let c = run_changes(&runs, ChangeOptions::default());
    assert_eq!(c.len(), 1, "{c:#?}");
    assert_eq!((c[0].run_id, c[0].started_unix_s), (90, 1010.0));
    let json = serde_json::to_value(c[0]).unwrap();
    assert_eq!(json["run_id"], 90);
    assert_eq!(json["index"], 10);
    assert!(json["p_value"].as_f64().unwrap() < 0.01);
}
