//! A find-max search: the loss at each offered rate, passing and failing steps apart, the
//! loss limit and the rate found marked.

use wirerate_core::search::Phase;
use wirerate_core::units::format_bps;

use crate::html::{Block, Cell, Figure, Section, Table};
use crate::svg::{Mark, RefLine, Series, XyChart, PALETTE};
use crate::{FindMax, RateUnit};

pub fn section(name: &str, fm: &FindMax, id: &str) -> Section {
    let unit = RateUnit::of(
        fm.steps
            .iter()
            .flat_map(|s| [s.offered_bps.unwrap_or(0.0), s.goodput_bps]),
    );
    let point = |pass: bool| -> Vec<(f64, f64)> {
        fm.steps
            .iter()
            .filter(|s| s.pass == pass)
            .filter_map(|s| Some((s.offered_bps? / unit.div, s.loss_percent)))
            .collect()
    };
    let mut by_rate: Vec<(f64, f64)> = fm
        .steps
        .iter()
        .filter_map(|s| Some((s.offered_bps? / unit.div, s.goodput_bps / unit.div)))
        .collect();
    by_rate.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut lines = vec![RefLine {
        label: format!("loss limit {} %", fm.loss_limit_percent),
        value: fm.loss_limit_percent,
        vertical: false,
        color: PALETTE[6],
    }];
    let found = match fm.max_rate_bps {
        Some(r) => {
            lines.push(RefLine {
                label: format!("found: {}", format_bps(r)),
                value: r / unit.div,
                vertical: true,
                color: PALETTE[2],
            });
            let trust = fm.confidence.map_or_else(String::new, |c| {
                let fail = c.lowest_fail_bps.map_or_else(String::new, |f| {
                    format!("; lowest failing rate {}", format_bps(f))
                });
                let level = c
                    .level_percent
                    .map_or_else(String::new, |l| format!("; confidence {l:.0} %"));
                format!(
                    " (passed {} of {} trials at that rate{fail}{level})",
                    c.passed, c.trials
                )
            });
            format!(
                "Highest rate with loss ≤ {} %: {} per stream, after {} steps{trust}",
                fm.loss_limit_percent,
                format_bps(r),
                fm.steps.len()
            )
        }
        None => format!(
            "No rate tried kept loss ≤ {} % ({} steps)",
            fm.loss_limit_percent,
            fm.steps.len()
        ),
    };
    let chart = XyChart {
        title: "Loss against offered rate".into(),
        desc: found.clone(),
        x_name: format!("offered rate per stream ({})", unit.name),
        y_name: "loss (%)".into(),
        y2_name: Some(format!("received per stream ({})", unit.name)),
        series: vec![
            Series::new("passed", point(true), Mark::Points, 2),
            Series::new("failed", point(false), Mark::Points, 1),
            Series::new("received", by_rate, Mark::Line, 0)
                .on_right()
                .dashed(),
        ],
        lines,
        y_from_zero: true,
        x_from_zero: false,
    };
    let rows = fm
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let why = fm
                .step_bottlenecks
                .get(i)
                .copied()
                .flatten()
                .map_or("", |b| b.words());
            vec![
                Cell::text(format!("step {}", i + 1)),
                match s.offered_bps {
                    Some(_) => Cell::num(s.offered_bps, |v| unit.show(v)),
                    None => Cell::text("unpaced"),
                },
                Cell::num(s.sent_bps, |v| unit.show(v)),
                Cell::num(Some(s.goodput_bps), |v| unit.show(v)),
                Cell::num(Some(s.loss_percent), |v| format!("{v:.3}")),
                Cell::text(match (s.pass, s.phase) {
                    (true, Phase::Confirm) => "pass (confirmation)",
                    (false, Phase::Confirm) => "fail (confirmation)",
                    (true, Phase::Recheck) => "pass (recheck)",
                    (false, Phase::Recheck) => "fail (recheck)",
                    (true, Phase::Repeat) => "pass (repeat)",
                    (false, Phase::Repeat) => "fail (repeat)",
                    (true, Phase::Search) => "pass",
                    (false, Phase::Search) => "fail",
                }),
                Cell::text(why),
            ]
        })
        .collect();
    let cid = format!("{id}-findmax");
    let unpaced = fm.steps.iter().filter(|s| s.offered_bps.is_none()).count();
    let notes = if unpaced > 0 {
        vec![format!(
            "{unpaced} unpaced step(s) (no offered rate) are in the table, not the chart."
        )]
    } else {
        vec![]
    };
    Section {
        heading: format!("Find-max: {name}"),
        blocks: vec![Block::Styled("verdict", found.clone())],
        figures: vec![Figure {
            svg: chart.svg(&cid),
            id: cid,
            title: chart.title,
            caption: found,
            notes,
            table: Table {
                caption: "Steps of the search (data-value: bit/s, loss in percent)".into(),
                head: vec![
                    "step".into(),
                    format!("offered ({})", unit.name),
                    format!("sent ({})", unit.name),
                    format!("received ({})", unit.name),
                    "loss (%)".into(),
                    "result".into(),
                    "bottleneck".into(),
                ],
                rows,
            },
        }],
    }
}
