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
        Metric::LoadedP50 => (1.0, "ms"),
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
    }
}

fn num(v: f64, div: f64) -> String {
    let x = v / div;
    if x.abs() >= 1000.0 {
        format!("{x:.0}")
    } else if x.abs() >= 1.0 || x == 0.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// A figure of `metric`: retransmits are counts, so whole numbers print whole and a mean
/// gets one decimal (three below 10); every other metric as [`num`].
fn figure(metric: Metric, v: f64, div: f64) -> String {
    if metric != Metric::Retransmits {
        return num(v, div);
    }
    if v.fract() == 0.0 || v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        num(v, 1.0)
    }
}

/// The summary of repeated runs for `run --repeat` / `--until-ci`: min, median, mean, max,
/// standard deviation and the 95 % confidence interval of the mean, for goodput, CPU (the
/// larger `system_percent` of the two hosts) and PI. Metrics no run knows are left out.
pub fn repeat_table(samples: &[RunResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} run{}",
        samples.len(),
        if samples.len() == 1 { "" } else { "s" }
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
    let ci = match (s.ci95_low, s.ci95_high, s.ci95_half_width_percent()) {
        (Some(lo), Some(hi), Some(pct)) => {
            let (lo, hi) = (figure(metric, lo, div), figure(metric, hi, div));
            format!("{lo} .. {hi} (±{pct:.1} %)")
        }
        (Some(lo), Some(hi), None) => {
            format!("{} .. {}", figure(metric, lo, div), figure(metric, hi, div))
        }
        _ => "- (one run)".to_string(),
    };
    format!(
        "{:<14} {:>8} {:>8} {:>8} {:>8} {:>8}  {}",
        name,
        figure(metric, s.min, div),
        figure(metric, s.median, div),
        figure(metric, s.mean, div),
        figure(metric, s.max, div),
        s.stddev
            .map_or_else(|| "-".to_string(), |x| figure(metric, x, div)),
        ci
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
        let _ = writeln!(
            out,
            "{:<20} {:>10} {:>10} {:>9}  {:<20} {:<10} {}",
            name,
            c.a.map_or_else(|| "-".into(), |s| figure(*metric, s.mean, div)),
            c.b.map_or_else(|| "-".into(), |s| figure(*metric, s.mean, div)),
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
        let c = compare(&[290.0, 298.0, 294.0], &[10.0, 12.0, 11.5]);
        let t = compare_table(&[(Metric::Retransmits, c)]);
        let row = t.lines().nth(1).unwrap();
        assert!(row.contains(" 294 ") && row.contains(" 11.2 "), "{row}");
        assert!(!row.contains("294.00"), "{row}");
        assert_eq!(figure(Metric::Retransmits, 2.5, 1.0), "2.50");
        assert_eq!(figure(Metric::Goodput, 294.0, 1.0), "294.00");
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
