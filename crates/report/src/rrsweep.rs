//! The charts of request/response runs (round-trip percentiles, transactions per second,
//! round trips over time and their distribution) and of message-size sweeps (throughput
//! and one-way time per size, with Hockney's fit), in place of goodput and PI, which say
//! nothing about either.

use wirerate_core::latency::RttStats;
use wirerate_core::rr::RrSummary;
use wirerate_core::sweep::SweepResult;
use wirerate_core::units::{format_bps, format_bytes};
use wirerate_core::RunResult;

use crate::html::{Cell, Figure, Table};
use crate::svg::{Mark, Series, XyChart};
use crate::RateUnit;

/// One line on an rr run, for the section's opening paragraph.
pub fn describe_rr(rr: &RrSummary) -> String {
    let mut o = format!(
        "Request/response ({}), {} B requests and {} B responses: {} transactions in {:.2} s, \
         {:.0} transactions/s",
        rr.mode.name(),
        rr.request_bytes,
        rr.response_bytes,
        rr.transactions,
        rr.seconds,
        rr.tps
    );
    if let Some(r) = &rr.rtt {
        o.push_str(&format!(
            "; round trip p50 {:.1} µs, p90 {:.1} µs, p99 {:.1} µs, p99.9 {:.1} µs",
            r.rtt_p50_us, r.rtt_p90_us, r.rtt_p99_us, r.rtt_p999_us
        ));
    }
    if rr.lost > 0 {
        o.push_str(&format!(", {} lost ({:.3} %)", rr.lost, rr.loss_percent));
    }
    o.push('.');
    o
}

/// One line on a sweep, for the section's opening paragraph.
pub fn describe_sweep(sw: &SweepResult) -> String {
    let sizes = match (sw.points.first(), sw.points.last()) {
        (Some(a), Some(b)) => format!(
            "{} sizes from {} to {}",
            sw.points.len(),
            format_bytes(a.bytes),
            format_bytes(b.bytes)
        ),
        _ => "no sizes".to_string(),
    };
    let mut o = format!("Message-size sweep ({}), {sizes}", sw.mode);
    if let Some(f) = &sw.fit {
        o.push_str(&format!(
            "; Hockney's fit r∞ {}, n½ {:.0} B, t0 {:.2} µs (R² {:.3})",
            format_bps(f.r_inf_bps),
            f.n_half_bytes,
            f.t0_us,
            f.r_squared
        ));
    }
    if sw.stopped_early {
        o.push_str("; stopped before the largest size (a trial took too long)");
    }
    o.push('.');
    o
}

fn us(v: f64) -> String {
    format!("{v:.1}")
}

fn rtt_cells(r: Option<&RttStats>) -> Vec<Cell> {
    let f = |g: fn(&RttStats) -> f64| Cell::num(r.map(g), us);
    vec![
        f(|r| r.rtt_min_us),
        f(|r| r.rtt_p50_us),
        f(|r| r.rtt_p90_us),
        f(|r| r.rtt_p99_us),
        f(|r| r.rtt_p999_us),
        f(|r| r.rtt_max_us),
    ]
}

const RTT_HEAD: [&str; 6] = [
    "min (µs)",
    "p50 (µs)",
    "p90 (µs)",
    "p99 (µs)",
    "p99.9 (µs)",
    "max (µs)",
];

/// The figures of an rr run: percentiles per interval with transactions/s, and the
/// distribution of the round trips from the summary's percentiles.
pub fn rr_figures(run: &RunResult, rr: &RrSummary, id: &str) -> Vec<Figure> {
    let mut figures = Vec::new();
    figures.extend(rr_over_time(run, id));
    figures.extend(rr_distribution(rr, id));
    figures
}

fn rr_over_time(run: &RunResult, id: &str) -> Option<Figure> {
    let ivs: Vec<_> = run
        .intervals
        .iter()
        .filter(|i| !i.omitted && i.stream.is_none())
        .filter_map(|i| Some((i, i.rr.as_deref()?)))
        .collect();
    if ivs.is_empty() {
        return None;
    }
    let pick = |g: fn(&RttStats) -> f64| -> Vec<(f64, f64)> {
        ivs.iter()
            .filter_map(|(i, r)| Some((i.end_s, g(r.rtt.as_ref()?))))
            .collect()
    };
    let series = vec![
        Series::new("p50 round trip", pick(|r| r.rtt_p50_us), Mark::Line, 0),
        Series::new("p99 round trip", pick(|r| r.rtt_p99_us), Mark::Line, 1),
        Series::new("p99.9 round trip", pick(|r| r.rtt_p999_us), Mark::Line, 3).dashed(),
        Series::new(
            "transactions/s",
            ivs.iter().map(|(i, r)| (i.end_s, r.tps)).collect(),
            Mark::Bars,
            4,
        )
        .on_right(),
    ];
    let chart = XyChart {
        title: "Round trips and transactions per interval".into(),
        desc: "Round-trip percentiles (left) and transactions per second (right) per interval"
            .into(),
        x_name: "time since the start (s)".into(),
        y_name: "round trip (µs)".into(),
        y2_name: Some("transactions/s".into()),
        series,
        lines: vec![],
        y_from_zero: true,
        x_from_zero: true,
    };
    let mut head = vec!["end (s)".to_string(), "transactions/s".into()];
    head.extend(RTT_HEAD.iter().map(|h| h.to_string()));
    let rows = ivs
        .iter()
        .map(|(i, r)| {
            let mut row = vec![
                Cell::num(Some(i.end_s), |v| format!("{v:.2}")),
                Cell::num(Some(r.tps), |v| format!("{v:.0}")),
            ];
            row.extend(rtt_cells(r.rtt.as_ref()));
            row
        })
        .collect();
    let cid = format!("{id}-rr-time");
    Some(Figure {
        svg: chart.svg(&cid),
        id: cid,
        title: chart.title,
        caption: "A tail that rises while the median holds is queueing or scheduling, not the \
                  path."
            .into(),
        notes: vec![],
        table: Table {
            caption: "Round trips per interval, all flows (data-value: µs; transactions/s)".into(),
            head,
            rows,
        },
    })
}

fn rr_distribution(rr: &RrSummary, id: &str) -> Option<Figure> {
    let r = rr.rtt.as_ref()?;
    let pts = vec![
        (r.rtt_min_us, 0.0),
        (r.rtt_p50_us, 50.0),
        (r.rtt_p90_us, 90.0),
        (r.rtt_p99_us, 99.0),
        (r.rtt_p999_us, 99.9),
        (r.rtt_max_us, 100.0),
    ];
    let chart = XyChart {
        title: "Distribution of the round trips".into(),
        desc: "Share of transactions at or under each round trip, from the run's percentiles"
            .into(),
        x_name: "round trip (µs)".into(),
        y_name: "transactions at or under (%)".into(),
        y2_name: None,
        series: vec![Series::new("all flows", pts, Mark::Line, 0)],
        lines: vec![],
        y_from_zero: true,
        x_from_zero: false,
    };
    let mut head = vec!["over".to_string(), "transactions/s".into()];
    head.extend(RTT_HEAD.iter().map(|h| h.to_string()));
    let mut all = vec![
        Cell::text("all flows"),
        Cell::num(Some(rr.tps), |v| format!("{v:.0}")),
    ];
    all.extend(rtt_cells(Some(r)));
    let mut rows = vec![all];
    for f in rr.flows.iter().filter(|_| rr.flows.len() > 1) {
        let mut row = vec![
            Cell::text(format!("flow {}", f.id)),
            Cell::num(Some(f.tps), |v| format!("{v:.0}")),
        ];
        row.extend(rtt_cells(f.rtt.as_ref()));
        rows.push(row);
    }
    let cid = format!("{id}-rr-cdf");
    Some(Figure {
        svg: chart.svg(&cid),
        id: cid,
        title: chart.title,
        caption: format!(
            "p50 {:.1} µs, p99 {:.1} µs, p99.9 {:.1} µs at {:.0} transactions/s",
            r.rtt_p50_us, r.rtt_p99_us, r.rtt_p999_us, rr.tps
        ),
        notes: vec!["Points at the percentiles the run kept, joined by lines.".into()],
        table: Table {
            caption: "Round-trip percentiles (data-value: µs; transactions/s)".into(),
            head,
            rows,
        },
    })
}

/// Sizes are drawn on a log2 axis: 10 is 1 KiB, 20 is 1 MiB.
fn log2(bytes: f64) -> f64 {
    bytes.max(1.0).log2()
}

const SIZE_AXIS: &str = "message size (log2 of bytes: 10 = 1 KiB, 20 = 1 MiB)";

/// The figures of a sweep: throughput per size and one-way time per size with the fit.
pub fn sweep_figures(sw: &SweepResult, id: &str) -> Vec<Figure> {
    if sw.points.is_empty() {
        return Vec::new();
    }
    let unit = RateUnit::of(sw.points.iter().map(|p| p.bps_max));
    let rate = |g: fn(&wirerate_core::sweep::SweepPoint) -> f64| -> Vec<(f64, f64)> {
        sw.points
            .iter()
            .map(|p| (log2(p.bytes as f64), g(p) / unit.div))
            .collect()
    };
    let mut lines = Vec::new();
    if let Some(f) = &sw.fit {
        lines.push(crate::svg::RefLine {
            label: format!("Hockney r∞ {}", format_bps(f.r_inf_bps)),
            value: f.r_inf_bps / unit.div,
            vertical: false,
            color: crate::svg::PALETTE[6],
        });
    }
    let tput = XyChart {
        title: "Throughput per message size".into(),
        desc: "Each size's throughput, bytes × 8 ÷ one-way time: mean, best and worst trial".into(),
        x_name: SIZE_AXIS.into(),
        y_name: format!("throughput ({})", unit.name),
        y2_name: None,
        series: vec![
            Series::new("mean", rate(|p| p.bps_mean), Mark::Line, 0),
            Series::new("best trial", rate(|p| p.bps_max), Mark::Points, 2),
            Series::new("worst trial", rate(|p| p.bps_min), Mark::Points, 1),
        ],
        lines,
        y_from_zero: true,
        x_from_zero: false,
    };
    let rows = sw
        .points
        .iter()
        .map(|p| {
            vec![
                Cell::text(format_bytes(p.bytes)),
                Cell::num(Some(p.bytes as f64), |v| format!("{v:.0}")),
                Cell::num(Some(f64::from(p.trials)), |v| format!("{v:.0}")),
                Cell::num(Some(p.bps_mean), |v| unit.show(v)),
                Cell::num(Some(p.bps_min), |v| unit.show(v)),
                Cell::num(Some(p.bps_max), |v| unit.show(v)),
                Cell::num(Some(p.one_way_mean_us), us),
                Cell::num(Some(p.one_way_min_us), us),
            ]
        })
        .collect();
    let table = Table {
        caption: "Per message size (data-value: bytes, bit/s, µs)".into(),
        head: vec![
            "size".into(),
            "bytes".into(),
            "trials".into(),
            format!("mean ({})", unit.name),
            format!("worst ({})", unit.name),
            format!("best ({})", unit.name),
            "one-way mean (µs)".into(),
            "one-way best (µs)".into(),
        ],
        rows,
    };
    let caption = describe_sweep(sw);
    let cid = format!("{id}-sweep-rate");
    let mut figures = vec![Figure {
        svg: tput.svg(&cid),
        id: cid,
        title: tput.title,
        caption: caption.clone(),
        notes: vec![],
        table: table.clone(),
    }];
    figures.push(latency_figure(sw, id, caption, table));
    figures
}

fn latency_figure(sw: &SweepResult, id: &str, caption: String, table: Table) -> Figure {
    let mut series = vec![
        Series::new(
            "one-way mean",
            sw.points
                .iter()
                .map(|p| (log2(p.bytes as f64), p.one_way_mean_us))
                .collect(),
            Mark::Line,
            0,
        ),
        Series::new(
            "one-way best trial",
            sw.points
                .iter()
                .map(|p| (log2(p.bytes as f64), p.one_way_min_us))
                .collect(),
            Mark::Points,
            2,
        ),
    ];
    if let Some(f) = &sw.fit {
        // the fitted T = t0 + n / r∞ at each measured size
        let pts = sw
            .points
            .iter()
            .map(|p| {
                let n = p.bytes as f64;
                (log2(n), f.t0_us + n * 8.0 / f.r_inf_bps * 1e6)
            })
            .collect();
        series.push(Series::new("Hockney fit t0 + n/r∞", pts, Mark::Line, 6).dashed());
    }
    let chart = XyChart {
        title: "One-way time per message size".into(),
        desc: "Each size's one-way time per message, and Hockney's fit where there is one".into(),
        x_name: SIZE_AXIS.into(),
        y_name: "one-way time (µs)".into(),
        y2_name: None,
        series,
        lines: vec![],
        y_from_zero: true,
        x_from_zero: false,
    };
    let cid = format!("{id}-sweep-latency");
    Figure {
        svg: chart.svg(&cid),
        id: cid,
        title: chart.title,
        caption,
        notes: vec![],
        table,
    }
}
