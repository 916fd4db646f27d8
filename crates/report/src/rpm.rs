//! The charts of an rpm run: latency over time through the phases (probes' connect times
//! and the loaded connections' RTT), the distribution of connect times idle against each
//! loaded phase, and throughput and RPM per phase.

use wirerate_core::rpm::{Confidence, PhaseResult, RpmResult};
use wirerate_core::units::format_bps;

use crate::html::{Cell, Figure, Table};
use crate::svg::{Mark, RefLine, Series, XyChart};

fn confidence(c: Option<Confidence>) -> &'static str {
    match c {
        Some(Confidence::High) => "high",
        Some(Confidence::Medium) => "medium",
        Some(Confidence::Low) => "low",
        None => "-",
    }
}

/// One line on an rpm run, for the section's opening paragraph.
pub fn describe(r: &RpmResult) -> String {
    let rpm = r
        .rpm
        .map_or_else(|| "no RPM".to_string(), |x| format!("{x:.0} RPM"));
    format!(
        "Latency under load over {} phases: {rpm} ({} confidence). {}",
        r.phases.len(),
        confidence(r.confidence),
        r.verdict
    )
}

/// Seconds from the run's start at which each phase began (phases run back to back).
fn offsets(phases: &[PhaseResult]) -> Vec<f64> {
    phases
        .iter()
        .scan(0.0, |t, p| {
            let at = *t;
            *t += p.seconds;
            Some(at)
        })
        .collect()
}

pub fn figures(r: &RpmResult, id: &str) -> Vec<Figure> {
    vec![over_time(r, id), distribution(r, id), per_phase(r, id)]
}

fn over_time(r: &RpmResult, id: &str) -> Figure {
    let starts = offsets(&r.phases);
    let mut series = Vec::new();
    for (i, (p, at)) in r.phases.iter().zip(&starts).enumerate() {
        let shift = |v: &[[f64; 2]]| v.iter().map(|[t, ms]| (at + t, *ms)).collect();
        series.push(Series::new(
            format!("{} connect", p.phase.name()),
            shift(&p.connect_series),
            Mark::Points,
            i,
        ));
        if !p.loaded_rtt_series.is_empty() {
            series.push(
                Series::new(
                    format!("{} TCP RTT", p.phase.name()),
                    shift(&p.loaded_rtt_series),
                    Mark::Line,
                    i,
                )
                .thin(),
            );
        }
        if !p.inband_series.is_empty() {
            series.push(Series::new(
                format!("{} in-band", p.phase.name()),
                shift(&p.inband_series),
                Mark::Line,
                i,
            ));
        }
    }
    let lines = starts
        .iter()
        .zip(&r.phases)
        .skip(1)
        .map(|(at, p)| RefLine {
            value: *at,
            label: p.phase.name().into(),
            vertical: true,
            color: "#999999",
        })
        .collect();
    let chart = XyChart {
        title: "Latency through the phases".into(),
        desc: "Each probe's TCP connect time (points), the in-band request/response on the \
               loaded connections (lines) and their smoothed RTT (thin lines), phase after \
               phase"
            .into(),
        x_name: "time since the start (s)".into(),
        y_name: "latency (ms)".into(),
        y2_name: None,
        series,
        lines,
        y_from_zero: true,
        x_from_zero: true,
    };
    let rows = r
        .phases
        .iter()
        .zip(&starts)
        .map(|(p, at)| {
            vec![
                Cell::text(p.phase.name()),
                Cell::num(Some(*at), |v| format!("{v:.1}")),
                Cell::num(Some(p.connect_series.len() as f64), |v| format!("{v:.0}")),
                Cell::num(Some(p.loaded_rtt_series.len() as f64), |v| {
                    format!("{v:.0}")
                }),
            ]
        })
        .collect();
    let cid = format!("{id}-rpm-time");
    Figure {
        svg: chart.svg(&cid),
        id: cid,
        title: chart.title,
        caption: "Latency that climbs when a load starts and stays up is a queue filling; \
                  the first second of each loaded phase (warm-up) is not counted."
            .into(),
        notes: vec![],
        table: Table {
            caption: "Phases and their samples".into(),
            head: vec![
                "phase".into(),
                "starts at (s)".into(),
                "probes".into(),
                "TCP RTT samples".into(),
            ],
            rows,
        },
    }
}

fn distribution(r: &RpmResult, id: &str) -> Figure {
    let series = r
        .phases
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut v: Vec<f64> = p.connect_series.iter().map(|[_, ms]| *ms).collect();
            v.sort_by(f64::total_cmp);
            let n = v.len() as f64;
            let pts = v
                .iter()
                .enumerate()
                .map(|(k, ms)| (*ms, 100.0 * (k as f64 + 1.0) / n))
                .collect();
            Series::new(p.phase.name(), pts, Mark::Line, i)
        })
        .collect();
    let chart = XyChart {
        title: "Connect times, idle against loaded".into(),
        desc: "Share of probes whose connect took at most each time, per phase".into(),
        x_name: "connect time (ms)".into(),
        y_name: "probes at or under (%)".into(),
        y2_name: None,
        series,
        lines: vec![],
        y_from_zero: true,
        x_from_zero: true,
    };
    let ms = |v: f64| format!("{v:.2}");
    let rows = r
        .phases
        .iter()
        .map(|p| {
            let c = p.connect.as_ref();
            vec![
                Cell::text(p.phase.name()),
                Cell::num(c.map(|c| c.samples as f64), |v| format!("{v:.0}")),
                Cell::num(c.map(|c| c.p50_ms), ms),
                Cell::num(c.map(|c| c.p90_ms), ms),
                Cell::num(c.map(|c| c.p99_ms), ms),
                Cell::num(c.map(|c| c.trimmed_mean_ms), ms),
            ]
        })
        .collect();
    let cid = format!("{id}-rpm-cdf");
    Figure {
        svg: chart.svg(&cid),
        id: cid,
        title: chart.title,
        caption: r.queueing.as_ref().map_or_else(
            || "No phase's connect times rose over idle.".to_string(),
            |q| {
                format!(
                    "Under {} load the median grows by {:.1} ms: a queue of about {} B.",
                    q.phase.name(),
                    q.added_ms,
                    q.queue_bytes
                )
            },
        ),
        notes: vec![],
        table: Table {
            caption: "Connect times per phase, counted samples (data-value: ms)".into(),
            head: vec![
                "phase".into(),
                "probes".into(),
                "p50".into(),
                "p90".into(),
                "p99".into(),
                "95 % trimmed mean".into(),
            ],
            rows,
        },
    }
}

fn per_phase(r: &RpmResult, id: &str) -> Figure {
    let x = |i: usize| i as f64 + 1.0;
    let rpm = r
        .phases
        .iter()
        .enumerate()
        .filter_map(|(i, p)| Some((x(i), p.rpm?)))
        .collect();
    let mbps = |g: fn(&PhaseResult) -> Option<f64>| -> Vec<(f64, f64)> {
        r.phases
            .iter()
            .enumerate()
            .filter_map(|(i, p)| Some((x(i), g(p)? / 1e6)))
            .collect()
    };
    let chart = XyChart {
        title: "Throughput and RPM per phase".into(),
        desc: "RPM (bars, left) and goodput each way (points, right), phase 1 idle to 4 both"
            .into(),
        x_name: "phase (1 idle, 2 download, 3 upload, 4 both)".into(),
        y_name: "RPM".into(),
        y2_name: Some("goodput (Mbit/s)".into()),
        series: vec![
            Series::new("RPM", rpm, Mark::Bars, 0),
            Series::new("download", mbps(|p| p.download_bps), Mark::Points, 1).on_right(),
            Series::new("upload", mbps(|p| p.upload_bps), Mark::Points, 2).on_right(),
        ],
        lines: vec![],
        y_from_zero: true,
        x_from_zero: true,
    };
    let rows = r
        .phases
        .iter()
        .map(|p| {
            vec![
                Cell::text(p.phase.name()),
                Cell::text(p.download_bps.map_or("-".into(), format_bps)),
                Cell::text(p.upload_bps.map_or("-".into(), format_bps)),
                Cell::num(p.rpm, |v| format!("{v:.0}")),
                Cell::text(confidence(p.confidence)),
                Cell::num(Some(p.probes_failed as f64), |v| format!("{v:.0}")),
            ]
        })
        .collect();
    let cid = format!("{id}-rpm-phases");
    Figure {
        svg: chart.svg(&cid),
        id: cid,
        title: chart.title,
        caption: r.advice.clone().unwrap_or_else(|| r.verdict.clone()),
        notes: vec![],
        table: Table {
            caption: "Per phase".into(),
            head: vec![
                "phase".into(),
                "download".into(),
                "upload".into(),
                "RPM".into(),
                "confidence".into(),
                "failed probes".into(),
            ],
            rows,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirerate_core::rpm::{phase_result, summarize, Phase, PhaseSamples, Sample};

    fn at(n: usize, ms: f64) -> Vec<Sample> {
        (0..n)
            .map(|i| Sample {
                at_s: i as f64 * 0.25,
                ms,
            })
            .collect()
    }

    #[test]
    fn three_charts_with_every_probe_and_phase_starts() {
        let idle = PhaseSamples {
            connect: at(8, 1.0),
            ..Default::default()
        };
        let loaded = PhaseSamples {
            connect: at(8, 50.0),
            loaded_rtt: at(4, 45.0),
            ..Default::default()
        };
        let r = summarize(vec![
            phase_result(Phase::Idle, 2.0, 0.0, &idle, (None, None), 0),
            phase_result(Phase::Download, 2.0, 0.5, &loaded, (Some(2e7), None), 0),
        ]);
        assert_eq!(offsets(&r.phases), vec![0.0, 2.0]);
        let f = figures(&r, "x");
        let ids: Vec<&str> = f.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["x-rpm-time", "x-rpm-cdf", "x-rpm-phases"]);
        // 16 probes as points, and 4 RTT samples as a line's points
        assert_eq!(
            f[0].svg.matches("<circle").count(),
            8 + 8 + 4,
            "{}",
            f[0].svg
        );
        assert!(f[1].caption.contains("49.0 ms"), "{}", f[1].caption);
        assert_eq!(f[2].table.rows.len(), 2);
        assert!(describe(&r).contains("RPM"));
    }
}
