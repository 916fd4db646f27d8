//! Text for statistics: the summary of repeated runs, the A/B comparison table and its
//! one-line verdicts. The figures come from `wirerate_core::stats`; this module only lays
//! them out and words them.

use std::fmt::Write as _;

use wirerate_core::stats::{
    rank_test_can_reach, summarize_runs, Change, Comparison, Metric, Summary, TestKind, ALPHA,
    RETRANSMIT_MIN_COUNT,
};
use wirerate_core::RunResult;

/// The unit a metric's values are shown in: a divisor and its name.
fn scale(metric: Metric, typical: f64) -> (f64, &'static str) {
    match metric {
        Metric::Goodput => {
            let t = typical.abs();
            if t >= 1e12 {
                (1e12, "Tbit/s")
            } else if t >= 1e9 {
                (1e9, "Gbit/s")
            } else if t >= 1e6 {
                (1e6, "Mbit/s")
            } else if t >= 1e3 {
                (1e3, "kbit/s")
            } else {
                (1.0, "bit/s")
            }
        }
        Metric::Cpu | Metric::UdpLoss => (1.0, "%"),
        Metric::UdpJitter => (1.0, "ms"),
        Metric::Tps => (1.0, "tr/s"),
        Metric::RttP99 => (1.0, "µs"),
        Metric::Rpm => (1.0, "RPM"),
        Metric::LoadedP50 | Metric::InbandP50 => (1.0, "ms"),
        Metric::Pi | Metric::Retransmits => (1.0, ""),
    }
}

/// A metric's name in tables.
pub fn metric_name(metric: Metric) -> &'static str {
    match metric {
        Metric::Goodput => "goodput",
        Metric::Cpu => "CPU",
        Metric::Pi => "PI",
        Metric::Retransmits => "retransmits",
        Metric::UdpLoss => "UDP loss",
        Metric::UdpJitter => "jitter",
        Metric::Tps => "transactions/s",
        Metric::RttP99 => "p99 round trip",
        Metric::Rpm => "responsiveness",
        Metric::LoadedP50 => "loaded p50 latency",
        Metric::InbandP50 => "in-band p50 latency",
    }
}

/// The decimals of a row of figures of `metric` (already divided by its unit), one count
/// for the whole row so its columns read alike: none from 1000 up (and for counts that are
/// whole), two from 1, three below; a retransmit mean gets one from 10.
fn decimals(metric: Metric, values: &[f64]) -> usize {
    let top = values.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    let whole = values.iter().all(|v| v.fract() == 0.0);
    if top >= 1000.0 || (metric == Metric::Retransmits && whole) {
        0
    } else if metric == Metric::Retransmits && top >= 10.0 {
        1
    } else if top >= 1.0 || top == 0.0 {
        2
    } else {
        3
    }
}

/// A row's figures of `metric`, each divided by `div`, with one count of decimals.
fn row(metric: Metric, values: &[f64], div: f64) -> Vec<String> {
    let scaled: Vec<f64> = values.iter().map(|v| v / div).collect();
    let d = decimals(metric, &scaled);
    scaled.iter().map(|x| format!("{x:.d$}")).collect()
}

/// The summary of repeated runs for `run --repeat` / `--until-ci`: min, median, mean, max,
/// standard deviation and the 95 % confidence interval of the mean, for goodput, CPU (the
/// larger `system_percent` of the two hosts) and PI. Metrics no run knows are left out.
pub fn repeat_table(samples: &[RunResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}",
        wirerate_core::text::count(samples.len() as u64, "run")
    );
    let _ = writeln!(
        out,
        "{:<14} {:>8} {:>8} {:>8} {:>8} {:>8}  95 % CI of the mean",
        "", "min", "median", "mean", "max", "stddev"
    );
    for (metric, summary) in summarize_runs(samples) {
        if let Some(s) = summary {
            out.push_str(&summary_row(metric, &s));
            out.push('\n');
        }
    }
    out
}

fn summary_row(metric: Metric, s: &Summary) -> String {
    let (div, unit) = scale(metric, s.mean);
    let name = if unit.is_empty() {
        metric_name(metric).to_string()
    } else {
        format!("{} {unit}", metric_name(metric))
    };
    let mut values = vec![s.min, s.median, s.mean, s.max];
    values.extend(s.stddev);
    let ci = s.ci95_low.zip(s.ci95_high);
    if let Some((lo, hi)) = ci {
        values.extend([lo, hi]);
    }
    let f = row(metric, &values, div);
    let stddev = if s.stddev.is_some() {
        f[4].clone()
    } else {
        "-".to_string()
    };
    let at = if s.stddev.is_some() { 5 } else { 4 };
    let ci = match (ci, s.ci95_half_width_percent()) {
        (Some(_), Some(pct)) => format!("{} .. {} (±{pct:.1} %)", f[at], f[at + 1]),
        (Some(_), None) => format!("{} .. {}", f[at], f[at + 1]),
        _ => "- (one run)".to_string(),
    };
    format!(
        "{:<14} {:>8} {:>8} {:>8} {:>8} {:>8}  {}",
        name, f[0], f[1], f[2], f[3], stddev, ci
    )
}

/// "p < 0.001", "p = 0.012", "p = 0.43".
pub fn format_p(p: f64) -> String {
    if p < 0.001 {
        "p < 0.001".to_string()
    } else if p < 0.1 {
        format!("p = {p:.3}")
    } else {
        format!("p = {p:.2}")
    }
}

fn signed_pct(x: f64) -> String {
    format!("{x:+.1} %")
}

/// The words for B's value being above or below A's.
fn words(metric: Metric) -> (&'static str, &'static str, &'static str) {
    match metric {
        // (subject, higher, lower)
        Metric::Goodput => ("B is", "faster than", "slower than"),
        Metric::Cpu => ("B uses", "more CPU than", "less CPU than"),
        Metric::Pi => ("B's PI is", "higher than", "lower than"),
        Metric::Retransmits => ("B has", "more retransmits than", "fewer retransmits than"),
        Metric::UdpLoss => ("B loses", "more datagrams than", "fewer datagrams than"),
        Metric::UdpJitter => ("B's jitter is", "higher than", "lower than"),
        Metric::Tps => (
            "B makes",
            "more transactions than",
            "fewer transactions than",
        ),
        Metric::RttP99 => ("B's p99 round trip is", "longer than", "shorter than"),
        Metric::Rpm => ("B is", "more responsive than", "less responsive than"),
        Metric::LoadedP50 => ("B's latency under load is", "longer than", "shorter than"),
        Metric::InbandP50 => (
            "B's in-band latency under load is",
            "longer than",
            "shorter than",
        ),
    }
}

/// The one-line verdict on one metric, e.g. "B is 25.9 % slower than A (p < 0.001)".
pub fn verdict(metric: Metric, c: &Comparison) -> String {
    let (subject, up, down) = words(metric);
    let change = c.change_percent;
    let p = c.test.map(|t| format_p(t.p_value));
    if metric == Metric::Retransmits {
        if let Some(v) = few_retransmits(c, p.as_deref()) {
            return v;
        }
    }
    match (c.change, change, p) {
        (Change::Higher, Some(ch), Some(p)) => format!("{subject} {:.1} % {up} A ({p})", ch.abs()),
        (Change::Lower, Some(ch), Some(p)) => format!("{subject} {:.1} % {down} A ({p})", ch.abs()),
        (Change::Higher | Change::Lower, _, Some(p)) => {
            format!(
                "{subject} {} A ({p})",
                if c.change == Change::Higher { up } else { down }
            )
        }
        (Change::NoSignificantChange, _, Some(p)) => {
            let detail = match change {
                Some(ch) => format!("change {}, {p}", signed_pct(ch)),
                None => p,
            };
            match (c.a, c.b, c.test) {
                (Some(a), Some(b), Some(t))
                    if t.kind == TestKind::MannWhitney && !rank_test_can_reach(a.n, b.n, ALPHA) =>
                {
                    format!(
                        "too few runs to tell a difference in {}: {} against {} cannot reach \
                         p < 0.05 in a rank test ({detail}); run more",
                        metric_name(metric),
                        a.n,
                        b.n
                    )
                }
                _ => format!(
                    "no significant difference in {} between A and B ({detail})",
                    metric_name(metric)
                ),
            }
        }
        _ => untestable(metric, c),
    }
}

/// Retransmits too few on A's side for a change in percent (see `compare_metric`): the
/// verdict in counts, or no verdict when both sides are below the minimum.
fn few_retransmits(c: &Comparison, p: Option<&str>) -> Option<String> {
    let (a, b, p) = (c.a?, c.b?, p?);
    if c.change_percent.is_some() {
        return None;
    }
    let total = |s: Summary| (s.mean * s.n as f64).round();
    let counts = format!(
        "A {:.0} in {} runs, B {:.0} in {}",
        total(a),
        a.n,
        total(b),
        b.n
    );
    Some(match c.change {
        Change::Untestable => format!(
            "too few retransmits to judge a change ({counts}; {:.0} on a side are needed)",
            RETRANSMIT_MIN_COUNT
        ),
        Change::Higher => format!("B has more retransmits than A ({counts}; {p})"),
        Change::Lower => format!("B has fewer retransmits than A ({counts}; {p})"),
        Change::NoSignificantChange => {
            format!("no significant difference in retransmits between A and B ({counts}; {p})")
        }
    })
}

fn untestable(metric: Metric, c: &Comparison) -> String {
    let (na, nb) = (c.a.map_or(0, |s| s.n), c.b.map_or(0, |s| s.n));
    let mut s = format!(
        "cannot test {}: A has {na} value{}, B has {nb}; at least 2 per side are needed",
        metric_name(metric),
        if na == 1 { "" } else { "s" }
    );
    if let Some(ch) = c.change_percent {
        let _ = write!(s, " (change {})", signed_pct(ch));
    }
    s
}

/// The comparison table: one row per metric with A's and B's means, the change, its 95 %
/// confidence interval, the p-value and the test used.
pub fn compare_table(rows: &[(Metric, Comparison)]) -> String {
    let mut out = format!(
        "{:<20} {:>10} {:>10} {:>9}  {:<20} {:<10} {}\n",
        "metric (mean)", "A", "B", "change", "95 % CI of change", "p", "test"
    );
    for (metric, c) in rows {
        let typical = c.a.or(c.b).map_or(0.0, |s| s.mean);
        let (div, unit) = scale(*metric, typical);
        let name = if unit.is_empty() {
            metric_name(*metric).to_string()
        } else {
            format!("{} {unit}", metric_name(*metric))
        };
        let ci = match (c.change_ci95_low_percent, c.change_ci95_high_percent) {
            (Some(lo), Some(hi)) => format!("{lo:+.1} .. {hi:+.1} %"),
            _ => "-".to_string(),
        };
        let (p, test) = c.test.map_or(("-".to_string(), "-"), |t| {
            let p = format_p(t.p_value);
            let p = p
                .trim_start_matches("p ")
                .trim_start_matches("= ")
                .to_string();
            (p, t.kind.name())
        });
        let means: Vec<f64> = [c.a, c.b].iter().flatten().map(|s| s.mean).collect();
        let mut f = row(*metric, &means, div).into_iter();
        let mut mean = |s: Option<Summary>| match s {
            Some(_) => f.next().unwrap_or_default(),
            None => "-".to_string(),
        };
        let (a, b) = (mean(c.a), mean(c.b));
        let _ = writeln!(
            out,
            "{:<20} {:>10} {:>10} {:>9}  {:<20} {:<10} {}",
            name,
            a,
            b,
            c.change_percent.map_or("-".to_string(), signed_pct),
            ci,
            p,
            test
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirerate_core::stats::compare;

    #[test]
    fn retransmits_print_as_counts_not_as_294_00() {
        let c = compare(&[290.0, 298.0, 294.0], &[10.0, 12.0, 14.0]);
        let t = compare_table(&[(Metric::Retransmits, c)]);
        let line = t.lines().nth(1).unwrap();
        assert!(line.contains(" 294 ") && line.contains(" 12 "), "{line}");
        assert!(!line.contains("294.00"), "{line}");
        let c = compare(&[290.0, 298.0, 294.0], &[10.0, 12.0, 11.5]);
        let line = compare_table(&[(Metric::Retransmits, c)])
            .lines()
            .nth(1)
            .unwrap()
            .to_string();
        // one count of decimals in the row: 294.0 beside 11.2
        assert!(
            line.contains(" 294.0 ") && line.contains(" 11.2 "),
            "{line}"
        );
        assert_eq!(row(Metric::Retransmits, &[2.5], 1.0), ["2.50"]);
        assert_eq!(row(Metric::Goodput, &[294.0], 1.0), ["294.00"]);
    }

    /// Issue 23, item 11: "PI 901.27 1358 1229 1429 286.29" mixed decimals in one row.
    #[test]
    fn a_row_has_one_count_of_decimals() {
        let s = Summary::of(&[901.27, 1358.0, 1229.0, 1429.0]).unwrap();
        let line = summary_row(Metric::Pi, &s);
        let figures: Vec<&str> = line.split_whitespace().skip(1).take(5).collect();
        assert!(figures.iter().all(|f| !f.contains('.')), "{line}");
        let s = Summary::of(&[0.5, 2.25, 3.0]).unwrap();
        let line = summary_row(Metric::Cpu, &s);
        let figures: Vec<&str> = line.split_whitespace().skip(2).take(5).collect();
        assert!(
            figures
                .iter()
                .all(|f| f.split('.').nth(1).map(str::len) == Some(2)),
            "{line}"
        );
    }

    #[test]
    fn verdicts_read_as_sentences() {
        let a = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2];
        let b = [75.0, 76.0, 74.0, 75.5, 74.5, 75.2];
        let c = compare(&a, &b);
        let v = verdict(Metric::Goodput, &c);
        assert!(
            v.starts_with("B is 25.0 % slower than A (p < 0.001)"),
            "{v}"
        );
        let v = verdict(Metric::Cpu, &compare(&b, &a));
        assert!(v.starts_with("B uses 33.3 % more CPU than A"), "{v}");
        let v = verdict(Metric::Goodput, &compare(&[1.0, 2.0], &[1.5, 2.5]));
        assert_eq!(
            v,
            "too few runs to tell a difference in goodput: 2 against 2 cannot reach p < 0.05 \
             in a rank test (change +33.3 %, p = 0.67); run more"
        );
        let v = verdict(
            Metric::Goodput,
            &compare(&[1.0, 2.0, 3.0, 4.0], &[1.5, 2.5, 3.5, 4.5]),
        );
        assert!(
            v.starts_with("no significant difference in goodput between A and B"),
            "{v}"
        );
        let v = verdict(Metric::Goodput, &compare(&[100.0], &[75.0, 76.0]));
        assert!(v.starts_with("cannot test goodput: A has 1 value"), "{v}");
    }

    #[test]
    fn p_values_are_rounded_for_reading() {
        assert_eq!(format_p(0.0004), "p < 0.001");
        assert_eq!(format_p(0.01234), "p = 0.012");
        assert_eq!(format_p(0.4321), "p = 0.43");
    }

    #[test]
    fn summary_row_shows_every_column() {
        let s = Summary::of(&[9.1e9, 9.3e9, 9.2e9]).unwrap();
        let row = summary_row(Metric::Goodput, &s);
        assert!(row.starts_with("goodput Gbit/s"), "{row}");
        for part in ["9.10", "9.20", "9.30", "0.10", "8.95 .. 9.45", "±2.7 %"] {
            assert!(row.contains(part), "{part} missing in {row}");
        }
    }
}
