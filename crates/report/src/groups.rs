//! Several runs: per-group box plots of goodput, CPU, PI (and fairness, for runs of several
//! streams; transactions per second and the p99 round trip, for rr runs), with the verdicts and p-values of `wirerate compare` (each group against the
//! first), and the A/B table of every metric.

use wirerate_core::diagnosis::{differences, Diagnosis};
use wirerate_core::facts;
use wirerate_core::metrics::jain_fairness;
use wirerate_core::stats::{compare_metric, Change, Comparison, Metric};
use wirerate_core::RunResult;
use wirerate_render::stats::{format_p, metric_name, verdict};

use crate::html::{Block, Cell, Figure, Section, Table};
use crate::svg::{BoxChart, Category};
use crate::{Group, RateUnit};

/// One figure per run, for the box plot of one quantity.
struct Quantity {
    id: &'static str,
    title: &'static str,
    /// The metric `compare` tests, when it is one.
    metric: Option<Metric>,
    of: fn(&RunResult) -> Option<f64>,
}

fn fairness(r: &RunResult) -> Option<f64> {
    if r.streams.len() < 2 {
        return None;
    }
    jain_fairness(&r.streams.iter().map(|s| s.goodput_bps).collect::<Vec<_>>())
}

const QUANTITIES: [Quantity; 6] = [
    Quantity {
        id: "tps",
        title: "Transactions per second by group",
        metric: Some(Metric::Tps),
        of: |r| Metric::Tps.of(r),
    },
    Quantity {
        id: "rtt-p99",
        title: "p99 round trip by group",
        metric: Some(Metric::RttP99),
        of: |r| Metric::RttP99.of(r),
    },
    Quantity {
        id: "goodput",
        title: "Goodput by group",
        metric: Some(Metric::Goodput),
        of: |r| Metric::Goodput.of(r),
    },
    Quantity {
        id: "cpu",
        title: "CPU by group (the busier host)",
        metric: Some(Metric::Cpu),
        of: |r| Metric::Cpu.of(r),
    },
    Quantity {
        id: "pi",
        title: "Performance Index by group",
        metric: Some(Metric::Pi),
        of: |r| Metric::Pi.of(r),
    },
    Quantity {
        id: "fairness",
        title: "Fairness between streams by group",
        metric: None,
        of: fairness,
    },
];

/// The comparison of each later group with the first, metric by metric.
fn comparisons(groups: &[&Group]) -> Vec<(usize, Vec<(Metric, Comparison)>)> {
    let Some(base) = groups.first() else {
        return Vec::new();
    };
    groups
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, g)| {
            let rows = Metric::ALL
                .into_iter()
                .map(|m| {
                    (
                        m,
                        compare_metric(m, &m.values(&base.runs), &m.values(&g.runs)),
                    )
                })
                .filter(|(_, c)| c.a.is_some() || c.b.is_some())
                .collect();
            (i, rows)
        })
        .collect()
}

pub fn section(groups: &[&Group]) -> Section {
    let cmp = comparisons(groups);
    let mut blocks = Vec::new();
    let names: Vec<String> = groups
        .iter()
        .map(|g| {
            format!(
                "{} ({} run{})",
                g.name,
                g.runs.len(),
                crate::svg::plural(g.runs.len())
            )
        })
        .collect();
    blocks.push(Block::Para(format!("Groups: {}.", names.join("; "))));
    if let Some(base) = groups.first() {
        for (i, rows) in &cmp {
            let g = groups[*i];
            // compare's headline: RPM for rpm runs, goodput, or for rr runs transactions
            // per second
            let head = rows
                .iter()
                .find(|(m, _)| *m == Metric::Rpm)
                .or_else(|| rows.iter().find(|(m, _)| *m == Metric::Goodput))
                .or_else(|| rows.iter().find(|(m, _)| *m == Metric::Tps))
                .map_or("no goodput to compare".to_string(), |(m, c)| verdict(*m, c));
            blocks.push(Block::Styled(
                "verdict",
                format!("A = {}, B = {}: {head}", base.name, g.name),
            ));
            // the same list `compare` prints under its sides' names
            let settings = facts::differences(&base.runs, &g.runs)
                .into_iter()
                .map(|d| format!("{}: A {}, B {}", d.what, d.a, d.b))
                .collect();
            blocks.push(Block::List(
                "Settings and host facts in which they differ".into(),
                settings,
            ));
            let why = why_differences(base, g);
            blocks.push(Block::List("How their diagnoses differ".into(), why));
        }
    }
    let mut figures = Vec::new();
    for q in &QUANTITIES {
        if let Some(f) = box_figure(groups, q, &cmp) {
            figures.push(f);
        }
    }
    for (i, rows) in &cmp {
        if let (Some(a), Some(b)) = (groups.first(), groups.get(*i)) {
            blocks.push(Block::Table(ab_table(a, b, rows)));
        }
    }
    Section {
        heading: if groups.len() > 1 {
            "Comparison".into()
        } else {
            "Distribution of the runs".into()
        },
        blocks,
        figures,
    }
}

fn why_differences(a: &Group, b: &Group) -> Vec<String> {
    fn of(g: &Group) -> Vec<&Diagnosis> {
        g.runs
            .iter()
            .filter_map(|r| r.summary.diagnosis.as_ref())
            .collect()
    }
    differences(&of(a), &of(b))
}

fn run_name(g: &Group, k: usize) -> String {
    g.run_names
        .get(k)
        .cloned()
        .unwrap_or_else(|| format!("run {}", k + 1))
}

fn box_figure(
    groups: &[&Group],
    q: &Quantity,
    cmp: &[(usize, Vec<(Metric, Comparison)>)],
) -> Option<Figure> {
    let raw: Vec<Vec<(usize, f64)>> = groups
        .iter()
        .map(|g| {
            g.runs
                .iter()
                .enumerate()
                .filter_map(|(k, r)| Some((k, (q.of)(r)?)))
                .collect()
        })
        .collect();
    if raw.iter().all(Vec::is_empty) {
        return None;
    }
    let (div, y_name, shown): (f64, String, Box<dyn Fn(f64) -> String>) = match q.id {
        "goodput" => {
            let u = RateUnit::of(raw.iter().flatten().map(|(_, v)| *v));
            (
                u.div,
                format!("goodput ({})", u.name),
                Box::new(move |v| u.show(v)),
            )
        }
        "cpu" => (
            1.0,
            "CPU, busier host (%)".into(),
            Box::new(|v| format!("{v:.1}")),
        ),
        "pi" => (
            1.0,
            "PI (T/C × T/P)".into(),
            Box::new(|v| format!("{v:.2}")),
        ),
        "tps" => (
            1.0,
            "transactions/s".into(),
            Box::new(|v| format!("{v:.0}")),
        ),
        "rtt-p99" => (
            1.0,
            "p99 round trip (µs)".into(),
            Box::new(|v| format!("{v:.1}")),
        ),
        _ => (
            1.0,
            "Jain's fairness index".into(),
            Box::new(|v| format!("{v:.3}")),
        ),
    };
    let chart = BoxChart {
        title: q.title.to_string(),
        desc: format!(
            "Box plot of {} per group, every run drawn beside its box",
            q.id
        ),
        x_name: "group".into(),
        y_name: y_name.clone(),
        groups: groups
            .iter()
            .zip(&raw)
            .map(|(g, v)| Category {
                name: g.name.clone(),
                values: v.iter().map(|(_, x)| x / div).collect(),
            })
            .collect(),
    };
    let mut notes = Vec::new();
    let verdicts: Vec<String> = match q.metric {
        Some(m) => cmp
            .iter()
            .filter_map(|(i, rows)| {
                let (_, c) = rows.iter().find(|(mm, _)| *mm == m)?;
                let p = c.test.map_or(String::new(), |t| {
                    format!(" [{}, {}]", t.kind.name(), format_p(t.p_value))
                });
                Some(format!("{}: {}{p}", groups[*i].name, verdict(m, c)))
            })
            .collect(),
        None => Vec::new(),
    };
    let caption = if verdicts.is_empty() {
        format!(
            "{} per run; the box spans the middle half, the bar is the median, whiskers reach \
             1.5 × the box's height",
            y_name
        )
    } else {
        verdicts.join("; ")
    };
    if !verdicts.is_empty() {
        notes.push(
            "Box: the middle half of the runs, bar at the median, whiskers to the furthest run \
             within 1.5 × the box's height; points: every run."
                .to_string(),
        );
    }
    let rows = groups
        .iter()
        .zip(&raw)
        .flat_map(|(g, v)| {
            v.iter().map(|(k, x)| {
                vec![
                    Cell::text(g.name.clone()),
                    Cell::text(run_name(g, *k)),
                    Cell::num(Some(*x), &shown),
                ]
            })
        })
        .collect();
    let cid = format!("compare-{}", q.id);
    Some(Figure {
        svg: chart.svg(&cid),
        id: cid,
        title: chart.title,
        caption,
        notes,
        table: Table {
            caption: format!("{} per run (data-value: the stored figure)", q.title),
            head: vec!["group".into(), "run".into(), y_name],
            rows,
        },
    })
}

/// The A/B table of `compare`: per metric the means, the change with its 95 % interval,
/// the p-value and the verdict.
fn ab_table(a: &Group, b: &Group, rows: &[(Metric, Comparison)]) -> Table {
    let body = rows
        .iter()
        .map(|(m, c)| {
            let mean = |s: Option<wirerate_core::stats::Summary>| s.map(|s| s.mean);
            let shown = |v: f64| match m {
                Metric::Goodput => wirerate_core::units::format_bps(v),
                _ => format!("{v:.2}"),
            };
            let ci = match (c.change_ci95_low_percent, c.change_ci95_high_percent) {
                (Some(l), Some(h)) => format!("{l:+.1} % to {h:+.1} %"),
                _ => "-".into(),
            };
            vec![
                Cell::text(metric_name(*m)),
                Cell::num(mean(c.a), shown),
                Cell::num(mean(c.b), shown),
                Cell::num(c.change_percent, |v| format!("{v:+.1} %")),
                Cell::text(ci),
                Cell::num(c.test.map(|t| t.p_value), format_p),
                Cell::text(c.test.map_or("-", |t| t.kind.name())),
                Cell::text(match c.change {
                    Change::Higher => "higher",
                    Change::Lower => "lower",
                    Change::NoSignificantChange => "no significant change",
                    Change::Untestable => "untestable",
                }),
                Cell::text(verdict(*m, c)),
            ]
        })
        .collect();
    Table {
        caption: format!(
            "A/B: A = {}, B = {} (means; change of B from A)",
            a.name, b.name
        ),
        head: vec![
            "metric".into(),
            "A mean".into(),
            "B mean".into(),
            "change".into(),
            "95 % CI of the change".into(),
            "p-value".into(),
            "test".into(),
            "B against A".into(),
            "verdict".into(),
        ],
        rows: body,
    }
}
