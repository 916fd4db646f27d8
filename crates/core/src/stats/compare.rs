//! Comparison of two sets of runs, metric by metric: the change of the mean in percent, the
//! 95 % confidence interval of the difference, a p-value from the test the data call for, and
//! whether B is higher, lower or not distinguishable from A.

use serde::{Deserialize, Serialize};

use super::{mann_whitney, shift_interval, skewness, welch, Summary, ALPHA};
use crate::metrics::max_opt;
use crate::result::RunResult;

/// The figures `compare` and the repeat summary look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// `summary.goodput_bps`.
    Goodput,
    /// The larger `system_percent` of the two hosts (the C of the Performance Index).
    Cpu,
    /// `summary.pi`.
    Pi,
    /// `summary.tcp.retransmits`.
    Retransmits,
    /// `summary.udp.loss_percent`.
    UdpLoss,
    /// `summary.udp.jitter_ms`.
    UdpJitter,
    /// `summary.rr.tps`: transactions per second of an rr run.
    Tps,
    /// `summary.rr.rtt_p99_us`: the 99th percentile round trip of an rr run.
    RttP99,
    /// `rpm.rpm`: responsiveness of an rpm run, round trips per minute.
    Rpm,
    /// The median connect time of an rpm run's headline phase (`rpm.phases[…].connect.p50_ms`):
    /// its latency under load.
    LoadedP50,
    /// The median in-band request/response of an rpm run's headline phase
    /// (`rpm.phases[…].inband.p50_ms`): what an application's request waits behind the load.
    InbandP50,
}

impl Metric {
    pub const ALL: [Metric; 11] = [
        Metric::Rpm,
        Metric::LoadedP50,
        Metric::InbandP50,
        Metric::Tps,
        Metric::RttP99,
        Metric::Goodput,
        Metric::Cpu,
        Metric::Pi,
        Metric::Retransmits,
        Metric::UdpLoss,
        Metric::UdpJitter,
    ];

    /// Name in JSON output, with its unit.
    pub fn key(self) -> &'static str {
        match self {
            Metric::Goodput => "goodput_bps",
            Metric::Cpu => "cpu_percent",
            Metric::Pi => "pi",
            Metric::Retransmits => "retransmits",
            Metric::UdpLoss => "loss_percent",
            Metric::UdpJitter => "jitter_ms",
            Metric::Tps => "tps",
            Metric::RttP99 => "rtt_p99_us",
            Metric::Rpm => "rpm",
            Metric::LoadedP50 => "loaded_p50_ms",
            Metric::InbandP50 => "inband_p50_ms",
        }
    }

    /// Whether a larger value is an improvement.
    pub fn higher_is_better(self) -> bool {
        matches!(
            self,
            Metric::Goodput | Metric::Pi | Metric::Tps | Metric::Rpm
        )
    }

    /// This metric of one run; None where the run does not know it.
    pub fn of(self, r: &RunResult) -> Option<f64> {
        let s = &r.summary;
        match self {
            // an rr run's bytes are its requests: its headline is transactions per second
            Metric::Goodput => Some(s.goodput_bps).filter(|_| s.rr.is_none()),
            Metric::Tps => s.rr.as_ref().map(|r| r.tps),
            Metric::RttP99 => s.rr.as_ref().and_then(|r| r.rtt).map(|r| r.rtt_p99_us),
            Metric::Cpu => max_opt(
                s.cpu.local.as_ref().and_then(|c| c.system_percent),
                s.cpu.remote.as_ref().and_then(|c| c.system_percent),
            ),
            Metric::Pi => s.pi,
            Metric::Retransmits => s.tcp.as_ref().and_then(|t| t.retransmits).map(|n| n as f64),
            Metric::UdpLoss => s.udp.as_ref().map(|u| u.loss_percent),
            Metric::UdpJitter => s.udp.as_ref().and_then(|u| u.jitter_ms),
            Metric::Rpm => r.rpm.as_ref().and_then(|x| x.rpm),
            Metric::LoadedP50 => r.rpm.as_ref().and_then(|x| x.loaded_p50_ms()),
            Metric::InbandP50 => r.rpm.as_ref().and_then(|x| x.inband_p50_ms()),
        }
        .filter(|v| v.is_finite())
    }

    /// What the metric can be: every one is at least 0; CPU (`system_percent`, busy time
    /// over all cores) and UDP loss are at most 100 %.
    pub fn bounds(self) -> (f64, Option<f64>) {
        match self {
            Metric::Cpu | Metric::UdpLoss => (0.0, Some(100.0)),
            _ => (0.0, None),
        }
    }

    /// The known values of this metric over runs.
    pub fn values(self, runs: &[RunResult]) -> Vec<f64> {
        runs.iter().filter_map(|r| self.of(r)).collect()
    }
}

/// The repeat summary of a set of runs: goodput, CPU and PI, each summarised over the runs
/// that know it (None where none does).
pub fn summarize_runs(runs: &[RunResult]) -> Vec<(Metric, Option<Summary>)> {
    [Metric::Goodput, Metric::Cpu, Metric::Pi]
        .into_iter()
        .map(|m| {
            (
                m,
                Summary::of(&m.values(runs)).map(|s| s.clipped(m.bounds())),
            )
        })
        .collect()
}

/// Which significance test produced a p-value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestKind {
    Welch,
    MannWhitney,
}

impl TestKind {
    pub fn name(self) -> &'static str {
        match self {
            TestKind::Welch => "Welch's t-test",
            TestKind::MannWhitney => "Mann-Whitney U",
        }
    }
}

/// Smallest sample on either side for which Welch's t-test is trusted; below it the t-test
/// leans entirely on a normality nobody can check, so the rank test is used.
pub const WELCH_MIN_N: usize = 5;

/// Sample skewness (|G1|) above which a sample is called skewed and the rank test is used.
/// A normal sample of ten exceeds it about one time in seven; the rank test then loses little
/// (its efficiency against the t-test on normal data is about 95 %).
pub const SKEW_LIMIT: f64 = 1.0;

/// Picks the test for two samples of finite values: Welch's t-test when both have at least
/// [`WELCH_MIN_N`] values and neither is skewed beyond [`SKEW_LIMIT`]; Mann–Whitney otherwise.
pub fn choose_test(a: &[f64], b: &[f64]) -> TestKind {
    let few = a.len() < WELCH_MIN_N || b.len() < WELCH_MIN_N;
    let skewed = [a, b]
        .iter()
        .any(|s| skewness(s).is_some_and(|g| g.abs() > SKEW_LIMIT));
    if few || skewed {
        TestKind::MannWhitney
    } else {
        TestKind::Welch
    }
}

/// A significance test's outcome. `statistic` is t for Welch (B − A) and U of B for
/// Mann–Whitney; `df` is Welch's degrees of freedom.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    pub kind: TestKind,
    pub p_value: f64,
    pub statistic: f64,
    pub df: Option<f64>,
    pub exact: bool,
}

/// What the comparison concludes about B relative to A.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// B is higher, with p < [`ALPHA`].
    Higher,
    /// B is lower, with p < [`ALPHA`].
    Lower,
    /// p ≥ [`ALPHA`], or the test and the means point different ways.
    NoSignificantChange,
    /// Fewer than two values on a side: no test is possible.
    Untestable,
}

/// One metric of B compared with A.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub a: Option<Summary>,
    pub b: Option<Summary>,
    /// (mean B − mean A) ÷ |mean A| × 100.
    pub change_percent: Option<f64>,
    /// mean B − mean A, and the 95 % confidence interval of the difference that goes with
    /// the test: Welch's for Welch's t-test, Hodges and Lehmann's shift for Mann–Whitney.
    /// The interval leaves out 0 exactly when the change is higher or lower; where it would
    /// not agree with the change (ties, or a rank test and means that point different ways)
    /// there is none.
    pub diff: Option<f64>,
    pub diff_ci95_low: Option<f64>,
    pub diff_ci95_high: Option<f64>,
    /// The interval in percent of |mean A| (A's mean taken as exact).
    pub change_ci95_low_percent: Option<f64>,
    pub change_ci95_high_percent: Option<f64>,
    pub test: Option<TestResult>,
    pub change: Change,
}

/// Compares sample B with sample A (finite values only are used).
pub fn compare(a: &[f64], b: &[f64]) -> Comparison {
    let a = super::finite(a);
    let b = super::finite(b);
    let (sa, sb) = (Summary::of(&a), Summary::of(&b));
    let diff = sa.zip(sb).map(|(x, y)| y.mean - x.mean);
    let test = if a.len() < 2 || b.len() < 2 {
        None
    } else {
        run_test(choose_test(&a, &b), &a, &b)
    };
    let interval = match test.map(|t| t.kind) {
        Some(TestKind::Welch) => welch(&a, &b).map(|w| (w.ci95_low, w.ci95_high)),
        Some(TestKind::MannWhitney) => shift_interval(&a, &b),
        None => None,
    };
    let change = match (test, diff) {
        (Some(t), Some(d)) if t.p_value < ALPHA && d != 0.0 => {
            let test_says_higher = t.statistic > test_centre(&t, a.len(), b.len());
            match (test_says_higher, d > 0.0) {
                (true, true) => Change::Higher,
                (false, false) => Change::Lower,
                _ => Change::NoSignificantChange,
            }
        }
        (Some(_), _) => Change::NoSignificantChange,
        (None, _) => Change::Untestable,
    };
    let mut c = Comparison {
        a: sa,
        b: sb,
        change_percent: None,
        diff,
        diff_ci95_low: None,
        diff_ci95_high: None,
        change_ci95_low_percent: None,
        change_ci95_high_percent: None,
        test,
        change,
    };
    c.set_interval(interval);
    c
}

/// Fewest retransmits, over all of a side's runs, for a relative change in retransmits: by
/// Poisson counting alone a count of 20 varies by about ±22 %, and a change from 1 to 26 is
/// "+2500 %" of nothing. Below it on A's side the change is given in counts only; below it on
/// both sides there is no verdict.
pub const RETRANSMIT_MIN_COUNT: f64 = 20.0;

/// [`compare`] of one metric, with the intervals held to what the metric can be ([`Metric::
/// bounds`]): neither mean's interval leaves the bounds and B's mean cannot go below the
/// lower bound, so a change is never below −100 %. Retransmits are judged on their counts
/// ([`RETRANSMIT_MIN_COUNT`]).
pub fn compare_metric(metric: Metric, a: &[f64], b: &[f64]) -> Comparison {
    let mut c = compare(a, b);
    let bounds = metric.bounds();
    c.a = c.a.map(|s| s.clipped(bounds));
    c.b = c.b.map(|s| s.clipped(bounds));
    if let Some(ma) = c.a.map(|s| s.mean) {
        let (lo, hi) = bounds;
        let clip = |x: f64| hi.map_or(x, |h| x.min(h - ma)).max(lo - ma);
        let interval = c.diff_ci95_low.zip(c.diff_ci95_high);
        c.set_interval(interval.map(|(l, h)| (clip(l), clip(h))));
    }
    if metric == Metric::Retransmits {
        let total = |s: Option<Summary>| s.map_or(0.0, |s| s.mean * s.n as f64);
        let (ta, tb) = (total(c.a), total(c.b));
        if ta < RETRANSMIT_MIN_COUNT {
            c.change_percent = None;
            c.change_ci95_low_percent = None;
            c.change_ci95_high_percent = None;
            if tb < RETRANSMIT_MIN_COUNT && c.test.is_some() {
                c.change = Change::Untestable;
                c.diff_ci95_low = None;
                c.diff_ci95_high = None;
            }
        }
    }
    c
}

impl Comparison {
    /// Sets the change in percent and the interval of the difference (and its percent
    /// form), leaving the interval out when it does not agree with the change.
    fn set_interval(&mut self, interval: Option<(f64, f64)>) {
        let base = self.a.map(|s| s.mean.abs()).filter(|m| *m > 0.0);
        let pct = |v: Option<f64>| v.zip(base).map(|(v, m)| v / m * 100.0);
        let agrees = |&(lo, hi): &(f64, f64)| match self.change {
            Change::Higher => lo > 0.0,
            Change::Lower => hi < 0.0,
            Change::NoSignificantChange => lo <= 0.0 && hi >= 0.0,
            Change::Untestable => false,
        };
        let interval = interval.filter(|i| i.0 <= i.1 && agrees(i));
        self.change_percent = pct(self.diff);
        self.diff_ci95_low = interval.map(|i| i.0);
        self.diff_ci95_high = interval.map(|i| i.1);
        self.change_ci95_low_percent = pct(self.diff_ci95_low);
        self.change_ci95_high_percent = pct(self.diff_ci95_high);
    }
}

/// The value of the statistic under "no difference": 0 for t, nA·nB/2 for U.
fn test_centre(t: &TestResult, na: usize, nb: usize) -> f64 {
    match t.kind {
        TestKind::Welch => 0.0,
        TestKind::MannWhitney => (na * nb) as f64 / 2.0,
    }
}

fn run_test(kind: TestKind, a: &[f64], b: &[f64]) -> Option<TestResult> {
    match kind {
        TestKind::Welch => welch(a, b).map(|w| TestResult {
            kind,
            p_value: w.p_value,
            statistic: w.t,
            df: Some(w.df),
            exact: false,
        }),
        TestKind::MannWhitney => mann_whitney(a, b).map(|m| TestResult {
            kind,
            p_value: m.p_value,
            statistic: m.u_b,
            df: None,
            exact: m.exact,
        }),
    }
}
