use super::*;

/// A small deterministic generator, so a noisy path is the same path every run.
struct Lcg(u64);

impl Lcg {
    fn unit(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Runs a search against `loss(step index, rate)`; unpaced trials send 1/0.7 of `cap` and
/// get `cap` through.
fn drive(upper: Option<f64>, cap: f64, mut loss: impl FnMut(usize, f64) -> f64) -> RateSearch {
    let mut s = RateSearch::new(0.1, 0.01, 40);
    loop {
        let i = s.steps.len();
        match s.next(upper) {
            Next::Done => return s,
            Next::Unpaced => s.record(None, Some(cap / 0.7), cap, 30.0),
            Next::Rate(r) => {
                let l = loss(i, r);
                s.record(Some(r), Some(r), r.min(cap) * (1.0 - l / 100.0), l);
            }
        }
    }
}

/// A path that loses everything above `cap`, and whose trials listed in `flukes` (by
/// index) lose 1 % whatever their rate.
fn simulate(cap: f64, upper: Option<f64>, flukes: &[usize]) -> RateSearch {
    drive(upper, cap, |i, r| {
        let loss = if r > cap { (r - cap) / r * 100.0 } else { 0.0 };
        if flukes.contains(&i) {
            loss.max(1.0)
        } else {
            loss
        }
    })
}

/// The rate of the search's last trial.
fn last_rate(s: &RateSearch) -> Option<f64> {
    s.steps.last().and_then(|t| t.offered_bps)
}

#[test]
fn converges_below_the_capacity_within_the_resolution_and_ends_on_the_rate_found() {
    // capacities where the bisection's last rate passes, and where it fails (then the rate
    // found is confirmed)
    let mut confirmed = 0;
    for cap in [9.5e6, 9.4e6, 9.45e6] {
        let s = simulate(cap, Some(12e6), &[]);
        let r = s.result().unwrap();
        assert!(r <= cap * 1.001 && r > cap * 0.98, "{cap}: {r}");
        let c = s.confidence();
        assert!(c.confirmed, "{s:?}");
        assert_eq!(last_rate(&s), Some(r));
        let confirm = s.steps.last().unwrap().phase == Phase::Confirm;
        confirmed += usize::from(confirm);
        // every rate was tried twice (the two agreed), the rate found once more when the
        // bisection ended elsewhere
        assert_eq!(c.trials, 2 + usize::from(confirm), "{cap}: {s:?}");
        assert_eq!(c.passed, c.trials);
        let fail = c.lowest_fail_bps.unwrap();
        assert!(fail > r && (fail - r) / fail <= 0.01, "{r} .. {fail}");
        assert_eq!((c.fail_trials, c.fail_failed), (2, 2));
        assert_eq!(c.loss_median_percent, Some(0.0));
        assert!(c.fail_loss_median_percent.unwrap() > 0.1);
        let level = if confirm { 87.5 * 0.75 } else { 75.0 * 0.75 };
        assert!((c.level_percent.unwrap() - level).abs() < 1e-9, "{c:?}");
        assert_eq!(c.goodput.unwrap().n, c.trials);
        assert!(s.steps.iter().all(|t| t.phase != Phase::Recheck));
    }
    assert!(confirmed > 0 && confirmed < 3, "{confirmed}");
    // without a link the search starts unpaced: what its receiver got tops the range, and
    // is tried itself once the bisection reaches it
    let s = simulate(9.5e6, None, &[]);
    assert_eq!(s.steps[0].offered_bps, None);
    assert_eq!(s.result(), Some(9.5e6));
    let c = s.confidence();
    assert!(c.confirmed && c.lowest_fail_bps.is_none(), "{c:?}");
    assert_eq!((c.trials, c.passed), (2, 2));
}

#[test]
fn one_unlucky_trial_does_not_fail_a_rate_and_one_lucky_trial_does_not_pass_one() {
    let clean = simulate(9.5e6, Some(12e6), &[]);
    let found = clean.result().unwrap();
    // the second trial (12 Mbit/s, the top, failing) and the fourth (6 Mbit/s, the first
    // trial of a passing rate) are swapped by luck: the second passes, the fourth fails
    let s = drive(Some(12e6), 9.5e6, |i, r| match i {
        1 => 0.0,
        2 => 1.0,
        _ if r > 9.5e6 => (r - 9.5e6) / r * 100.0,
        _ => 0.0,
    });
    assert_eq!(s.steps[1].offered_bps, Some(12e6));
    assert!(s.steps[1].pass && !s.steps[2].pass);
    // 12 Mbit/s passed once of three, 6 Mbit/s twice of three
    assert_eq!(s.steps[2].offered_bps, Some(12e6));
    assert_eq!(s.steps[2].phase, Phase::Repeat);
    assert_eq!(s.result(), Some(found), "{s:?}");
    assert!(s.confidence().confirmed);
}

#[test]
fn a_rate_found_that_fails_its_confirmation_is_not_reported() {
    // 9.4 Mbit/s: the bisection ends on a failing rate, so the rate found is confirmed
    let clean = simulate(9.4e6, Some(12e6), &[]);
    let found = clean.result().unwrap();
    let at: Vec<usize> = (0..clean.steps.len())
        .filter(|i| clean.steps[*i].offered_bps == Some(found))
        .collect();
    assert_eq!(clean.steps[at[2]].phase, Phase::Confirm);
    // one failing confirmation of a rate that passed two of two does not overturn it
    let s = simulate(9.4e6, Some(12e6), &[at[2]]);
    assert_eq!(s.result(), Some(found));
    assert_eq!((s.confidence().trials, s.confidence().passed), (3, 2));
    // the rate found passes two of three, then its confirmation and the trial that breaks
    // the tie fail: it is not reported
    let s = simulate(9.4e6, Some(12e6), &[at[1], at[2] + 1, at[2] + 2]);
    let r = s.result().unwrap();
    assert!(r < found, "{r} !< {found}");
    assert!(r > 9.4e6 * 0.97, "{r}");
    assert_eq!(s.steps[at[2] + 2].phase, Phase::Repeat);
    let c = s.confidence();
    assert_eq!(c.lowest_fail_bps, Some(found));
    assert_eq!((c.fail_trials, c.fail_failed), (5, 3), "{s:?}");
    assert!(c.confirmed);
}

#[test]
fn a_rate_the_sender_never_reached_is_not_reported() {
    // offered 20 Gbit/s, a CPU-bound sender put out 1.6 and all of it arrived
    let mut s = RateSearch::new(0.1, 0.01, 30);
    s.record(Some(20e9), Some(1.6e9), 1.6e9, 0.0);
    assert!(!s.steps[0].pass || s.result().is_none());
    assert_eq!(s.result(), None);
    // the rate is tried again (one short trial may be the host's, not the sender's), then
    // the rate it did reach, and the rates tried stay under what was sent ÷ 0.8
    assert_eq!(s.next(Some(20e9)), Next::Rate(20e9));
    s.record(Some(20e9), Some(1.6e9), 1.6e9, 0.0);
    assert_eq!(s.next(Some(20e9)), Next::Rate(1.6e9));
    let mut top = 0.0_f64;
    while let Next::Rate(r) = s.next(Some(20e9)) {
        top = top.max(r);
        // the sender reaches 1.7 Gbit/s at most
        let sent = r.min(1.7e9);
        s.record(Some(r), Some(sent), sent, 0.0);
    }
    let r = s.result().unwrap();
    assert!(
        (1.7e9 * 0.99..=1.7e9 / UNREACHED).contains(&r),
        "{r}: {s:?}"
    );
    // a few trials above the sender's reach (÷ 0.8): the top, and the rate just above the
    // one found
    let above = s
        .steps
        .iter()
        .filter(|t| t.offered_bps > Some(1.7e9 / UNREACHED));
    assert!(above.count() <= 4, "{s:?}");
    assert!(s.steps.len() <= 20, "{} trials, top {top}", s.steps.len());
    assert!(s.confidence().confirmed);
    // two failing trials short of their rate fail it and cap the range
    let mut s = RateSearch::new(0.1, 0.01, 20);
    s.record(Some(35.77e9), Some(22.1e9), 20.54e9, 7.2);
    assert_eq!(s.confidence().lowest_fail_bps, None);
    assert_eq!(s.next(None), Next::Rate(35.77e9));
    s.record(Some(35.77e9), Some(22.3e9), 20.6e9, 7.0);
    assert_eq!(s.confidence().lowest_fail_bps, Some(35.77e9));
    assert_eq!(s.next(None), Next::Rate(22.3e9 / UNREACHED / 2.0));
    // one trial short of a rate that passed twice does not overturn it
    let mut s = RateSearch::new(0.1, 0.01, 20);
    s.record(Some(5e9), Some(5e9), 5e9, 0.0);
    s.record(Some(5e9), Some(5e9), 5e9, 0.0);
    s.record(Some(5e9), Some(3e9), 3e9, 0.0);
    assert_eq!(s.result(), Some(5e9));
    assert_eq!((s.confidence().trials, s.confidence().passed), (3, 2));
    // a pacer a few percent short keeps the offered rate: the search runs over offered
    // rates, with what was sent reported beside them
    let mut s = RateSearch::new(0.1, 0.01, 20);
    s.record(Some(7.2e9), Some(6.9e9), 6.9e9, 0.0);
    s.record(Some(7.2e9), Some(6.8e9), 6.8e9, 0.0);
    assert_eq!(s.result(), Some(7.2e9));
    assert_eq!(s.confidence().sent.unwrap().median, 6.85e9);
}

#[test]
fn a_passing_top_is_tried_twice_then_ends() {
    let mut s = RateSearch::new(0.1, 0.01, 20);
    s.record(Some(10e6), Some(10e6), 10e6, 0.0);
    assert_eq!(s.next(Some(10e6)), Next::Rate(10e6));
    s.record(Some(10e6), Some(10e6), 10e6, 0.05);
    assert_eq!(s.next(Some(10e6)), Next::Done);
    assert_eq!(s.result(), Some(10e6));
    assert_eq!(s.steps[1].phase, Phase::Repeat);
    let c = s.confidence();
    assert!(c.confirmed);
    assert_eq!(c.loss_median_percent, Some(0.025));
    assert_eq!(c.lowest_fail_bps, None);
    assert!((c.level_percent.unwrap() - 75.0).abs() < 1e-9);
    // an unpaced trial that passes counts for what it sent, then that rate is tried paced;
    // an unpaced sender slowed by other work must not top the search, so twice the rate
    // found is tried next, and the search goes on from the first rate that fails
    let mut s = RateSearch::new(0.1, 0.01, 30);
    s.record(None, Some(3e9), 2.9e9, 0.0);
    assert_eq!(s.next(None), Next::Rate(3e9));
    s.record(Some(3e9), Some(3e9), 3e9, 0.0);
    assert_eq!(s.confidence().trials, 2);
    assert_eq!(s.next(None), Next::Rate(6e9));
    while let Next::Rate(r) = s.next(None) {
        let loss = if r > 10e9 { 5.0 } else { 0.0 };
        s.record(Some(r), Some(r), r, loss);
    }
    let r = s.result().unwrap();
    assert!(r > 9.9e9 && r <= 10e9, "{r}: {s:?}");
    assert!(s.confidence().confirmed);
}

#[test]
fn nothing_passing_ends_without_a_result() {
    let mut s = RateSearch::new(0.1, 0.01, 8);
    while let Next::Rate(r) = s.next(Some(1e6)) {
        s.record(Some(r), Some(r), r * 0.5, 50.0);
    }
    assert_eq!(s.result(), None);
    assert_eq!(s.steps.len(), 8);
    let c = s.confidence();
    assert_eq!((c.trials, c.level_percent, c.confirmed), (0, None, false));
}

#[test]
fn sign_confidence_is_the_binomial_tail() {
    assert_eq!(sign_confidence(2, 2), 0.75);
    assert_eq!(sign_confidence(2, 3), 0.5);
    assert_eq!(sign_confidence(3, 3), 0.875);
    assert_eq!(sign_confidence(3, 4), 1.0 - 5.0 / 16.0);
    assert_eq!(sign_confidence(0, 3), 0.0);
    assert_eq!(sign_confidence(1, 0), 0.0);
}

/// A path whose trials pass at random near its limit: at rate r a trial passes with a
/// chance falling from 1 to 0 over ±`width` around `mid` (a logistic). 400 searches:
/// each ends within its trial limit, reports a rate whose trials passed by their median
/// and a lowest failing rate above it, and the found rates of the median rule cluster
/// tighter than those of one trial a rate would.
#[test]
fn on_a_path_that_passes_at_random_the_found_rates_cluster_and_stay_consistent() {
    let (mid, width) = (10e9, 0.05);
    let chance = |r: f64| 1.0 / (1.0 + ((r / mid - 1.0) / (width / 4.0)).exp());
    let mut found = Vec::new();
    let mut rng = Lcg(7);
    let mut trials = Vec::new();
    for _ in 0..400 {
        let s = drive(Some(20e9), 20e9, |_, r| {
            if rng.unit() < chance(r) {
                0.0
            } else {
                0.5
            }
        });
        let r = s.result().expect("a rate passes");
        let c = s.confidence();
        assert!(c.passed * 2 > c.trials, "{c:?}");
        if let Some(f) = c.lowest_fail_bps {
            assert!(f > r && c.fail_failed * 2 > c.fail_trials, "{c:?}");
        }
        assert!(s.steps.len() <= 40);
        trials.push(s.steps.len());
        found.push(r);
    }
    let spread = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() * 9 / 10] / v[v.len() / 10]
    };
    // the same path judged by one trial a rate: a plain bisection
    let mut single = Vec::new();
    for _ in 0..400 {
        let (mut lo, mut hi) = (0.0, 20e9);
        while (hi - lo) / hi > 0.01 {
            let r = (lo + hi) / 2.0;
            if rng.unit() < chance(r) {
                lo = r
            } else {
                hi = r
            }
        }
        single.push(lo);
    }
    let (median_rule, one_trial) = (spread(&mut found), spread(&mut single));
    assert!(median_rule < one_trial, "{median_rule} !< {one_trial}");
    trials.sort_unstable();
    eprintln!(
        "10th..90th percentile of the rate found: median rule {median_rule:.4}×, one trial \
         {one_trial:.4}×; trials median {}",
        trials[trials.len() / 2]
    );
}

/// Runs a search against a path whose capacity at trial `i` is `cap(i)`: a trial loses what
/// it offered above it, and its receiver gets the rest.
fn on_capacity(cap: impl Fn(usize) -> f64) -> RateSearch {
    drive(Some(60e9), 60e9, |i, r| {
        let c = cap(i);
        if r > c {
            (r - c) / r * 100.0
        } else {
            0.0
        }
    })
}

#[test]
fn a_stable_capacity_grades_the_answer_by_its_trials_and_says_no_spread() {
    let s = on_capacity(|_| 20e9);
    let c = s.confidence();
    let r = s.result().unwrap();
    assert!(r <= 20e9 && r > 19.6e9, "{r}");
    // the failing trials at the boundary received the capacity, the passing ones their rate
    let spread = c.capacity_spread.expect("a trial at the boundary failed");
    assert!((1.0..=STABLE_SPREAD).contains(&spread), "{spread}");
    // two or three agreeing trials at each end: a medium grade, not a low one
    assert_eq!(c.grade, Some(Grade::Medium), "{c:?}");
}

#[test]
fn a_capacity_that_moves_between_trials_is_named_and_graded_low() {
    // a loopback whose capacity halves on some trials (another program took the CPU):
    // 40 Gbit/s on most, 19 on every third
    let s = on_capacity(|i| if i % 3 == 2 { 19e9 } else { 40e9 });
    let c = s.confidence();
    assert!(s.result().is_some(), "{s:?}");
    let spread = c.capacity_spread.expect("a trial at the boundary failed");
    assert!(spread > 1.5, "{spread}: {c:?}\n{:?}", s.steps);
    assert_eq!(c.grade, Some(Grade::Low), "{c:?}");
    // a stubbed sequence at the boundary: passes at 35 Gbit/s, a failure there that
    // received 16.7, a failure at 35.4 that received 35.2
    let at = |offered: f64, got: f64, pass: bool| Step {
        offered_bps: Some(offered),
        sent_bps: Some(offered),
        goodput_bps: got,
        loss_percent: if pass {
            0.0
        } else {
            100.0 * (1.0 - got / offered)
        },
        pass,
        phase: Phase::Search,
    };
    let steps = [
        at(35e9, 35e9, true),
        at(35e9, 16.7e9, false),
        at(35e9, 35e9, true),
        at(35.4e9, 35.2e9, false),
    ];
    let spread = capacity_spread(&steps.iter().collect::<Vec<_>>()).unwrap();
    assert!((spread - 35.2 / 16.7).abs() < 1e-9, "{spread}");
    // nothing failed: nothing measured the capacity
    assert_eq!(capacity_spread(&[&steps[0], &steps[2]]), None);
    // the same rule grades: within the spread and confirmed by the counts, not low
    assert_eq!(grade(80.0, true, Some(1.02)), Grade::High);
    assert_eq!(grade(80.0, true, Some(2.1)), Grade::Low);
    assert_eq!(grade(80.0, false, Some(1.0)), Grade::Low);
    assert_eq!(grade(56.25, true, None), Grade::Medium);
}
