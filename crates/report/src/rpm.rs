//! The charts of an rpm run: latency over time through the phases (probes' connect times
//! and the loaded connections' RTT), the distribution of connect times idle against each
//! loaded phase, and throughput and RPM per phase.

use wirerate_core::rpm::{Confidence, LatencyStats, PhaseResult, RpmResult};
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
    let mut f = vec![over_time(r, id), distribution(r, id), per_phase(r, id)];
    // results from before the UDP probes' series have neither
    f.extend(udp_over_time(r, id));
    f.extend(one_way_over_time(r, id));
    f
}

/// A vertical line where each phase after the first begins.
fn phase_lines(r: &RpmResult, starts: &[f64]) -> Vec<RefLine> {
    starts
        .iter()
        .zip(&r.phases)
        .skip(1)
        .map(|(at, p)| RefLine {
            value: *at,
            label: p.phase.name().into(),
            vertical: true,
            color: "#999999",
        })
        .collect()
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
    let lines = phase_lines(r, &starts);
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
    let rows = r
        .phases
        .iter()
        .map(|p| {
            let c = p.connect.as_ref();
            let mut row = stats_cells(p, c);
            row.push(Cell::num(c.map(|c| c.trimmed_mean_ms), ms));
            row
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

/// A phase's row of a latency table: its name, the samples and the p50, p90 and p99 in ms.
fn stats_cells(p: &PhaseResult, s: Option<&LatencyStats>) -> Vec<Cell> {
    vec![
        Cell::text(p.phase.name()),
        Cell::num(s.map(|s| s.samples as f64), |v| format!("{v:.0}")),
        Cell::num(s.map(|s| s.p50_ms), ms),
        Cell::num(s.map(|s| s.p90_ms), ms),
        Cell::num(s.map(|s| s.p99_ms), ms),
    ]
}

fn ms(v: f64) -> String {
    format!("{v:.2}")
}

/// The UDP probes' round trips through the phases (points per phase, as the connect times),
/// with their statistics per phase; None where no phase kept them.
fn udp_over_time(r: &RpmResult, id: &str) -> Option<Figure> {
    if r.phases.iter().all(|p| p.udp_series.is_empty()) {
        return None;
    }
    let starts = offsets(&r.phases);
    let series = r
        .phases
        .iter()
        .zip(&starts)
        .enumerate()
        .map(|(i, (p, at))| {
            let pts = p.udp_series.iter().map(|[t, ms]| (at + t, *ms)).collect();
            Series::new(format!("{} UDP", p.phase.name()), pts, Mark::Points, i)
        })
        .collect();
    let chart = XyChart {
        title: "UDP round trips through the phases".into(),
        desc: "Each UDP probe's round trip (a datagram to the server's port and its reply), \
               phase after phase"
            .into(),
        x_name: "time since the start (s)".into(),
        y_name: "round trip (ms)".into(),
        y2_name: None,
        series,
        lines: phase_lines(r, &starts),
        y_from_zero: true,
        x_from_zero: true,
    };
    let rows = r
        .phases
        .iter()
        .map(|p| {
            let mut row = stats_cells(p, p.udp.as_ref());
            row.push(Cell::num(Some(p.udp_failed as f64), |v| format!("{v:.0}")));
            row
        })
        .collect();
    let cid = format!("{id}-rpm-udp");
    Some(Figure {
        svg: chart.svg(&cid),
        id: cid,
        title: chart.title,
        caption: "No handshake and no retransmission: a UDP probe waits in the same queues \
                  as the load's packets, or is lost (unanswered)."
            .into(),
        notes: vec![],
        table: Table {
            caption: "UDP round trips per phase, counted samples (data-value: ms)".into(),
            head: vec![
                "phase".into(),
                "probes".into(),
                "p50".into(),
                "p90".into(),
                "p99".into(),
                "unanswered".into(),
            ],
            rows,
        },
    })
}

/// The delay each UDP probe met above its direction's base, upstream and downstream,
/// through the phases; None where no phase kept it.
fn one_way_over_time(r: &RpmResult, id: &str) -> Option<Figure> {
    if r.phases.iter().all(|p| p.one_way_series.is_empty()) {
        return None;
    }
    let starts = offsets(&r.phases);
    let way = |k: usize| -> Vec<(f64, f64)> {
        r.phases
            .iter()
            .zip(&starts)
            .flat_map(|(p, at)| p.one_way_series.iter().map(move |v| (at + v[0], v[k])))
            .collect()
    };
    let chart = XyChart {
        title: "One-way delay added, each direction".into(),
        desc: "The delay each UDP probe met above its direction's base (each host's clock, \
               offset and drift fitted out): client to server and server to client"
            .into(),
        x_name: "time since the start (s)".into(),
        y_name: "added one-way delay (ms)".into(),
        y2_name: None,
        series: vec![
            Series::new("upstream (client to server)", way(1), Mark::Points, 0),
            Series::new("downstream (server to client)", way(2), Mark::Points, 1),
        ],
        lines: phase_lines(r, &starts),
        y_from_zero: true,
        x_from_zero: true,
    };
    let rows = r
        .phases
        .iter()
        .map(|p| {
            let w = p.one_way.as_ref();
            vec![
                Cell::text(p.phase.name()),
                Cell::num(w.map(|w| w.samples as f64), |v| format!("{v:.0}")),
                Cell::num(w.map(|w| w.up_p50_ms), ms),
                Cell::num(w.map(|w| w.up_p90_ms), ms),
                Cell::num(w.map(|w| w.down_p50_ms), ms),
                Cell::num(w.map(|w| w.down_p90_ms), ms),
            ]
        })
        .collect();
    let cid = format!("{id}-rpm-owd");
    let caption = r.queueing.as_ref().and_then(|q| q.direction).map_or_else(
        || "Neither direction's added delay reached 5 ms in the worst phase.".to_string(),
        |d| format!("The worst phase's queue sits {}.", d.words()),
    );
    Some(Figure {
        svg: chart.svg(&cid),
        id: cid,
        title: chart.title,
        caption,
        notes: vec![],
        table: Table {
            caption: "Added one-way delay per phase, counted samples (data-value: ms)".into(),
            head: vec![
                "phase".into(),
                "probes".into(),
                "up p50".into(),
                "up p90".into(),
                "down p50".into(),
                "down p90".into(),
            ],
            rows,
        },
    })
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

    #[test]
    fn udp_round_trips_and_one_way_delays_are_charted_through_the_phases() {
        let idle = PhaseSamples {
            connect: at(8, 1.0),
            ..Default::default()
        };
        let mut phases = vec![
            phase_result(Phase::Idle, 2.0, 0.0, &idle, (None, None), 0),
            phase_result(Phase::Upload, 2.0, 0.5, &idle, (None, Some(2e7)), 0),
        ];
        phases[0].udp_series = vec![[0.1, 0.3], [0.6, 0.4]];
        phases[1].udp_series = vec![[0.2, 80.0], [0.7, 90.0], [1.2, 95.0]];
        phases[1].udp = wirerate_core::rpm::LatencyStats::of(&at(3, 90.0));
        phases[1].udp_failed = 4;
        let added = [(78.0, 0.2), (88.5, 0.1)];
        phases[1].one_way_series = wirerate_core::owd::series(&[0.7, 1.2], &added);
        phases[1].one_way = wirerate_core::owd::OneWay::of(&added);
        let r = summarize(phases);
        let f = figures(&r, "x");
        let ids: Vec<&str> = f.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "x-rpm-time",
                "x-rpm-cdf",
                "x-rpm-phases",
                "x-rpm-udp",
                "x-rpm-owd"
            ]
        );
        // every UDP probe a point, the upload's after the idle phase's 2 s
        assert_eq!(f[3].svg.matches("<circle").count(), 5, "{}", f[3].svg);
        assert!(f[3].svg.contains("upload UDP"), "{}", f[3].svg);
        assert_eq!(f[3].table.rows.len(), 2);
        // each probe twice: up and down
        assert_eq!(f[4].svg.matches("<circle").count(), 4, "{}", f[4].svg);
        assert!(f[4].svg.contains("downstream (server to client)"));
        assert!(
            f[4].caption.contains("upstream (client to server)"),
            "{}",
            f[4].caption
        );
        // a result without the series (stored before them) keeps its three charts
        let mut old = r.clone();
        for p in &mut old.phases {
            p.udp_series.clear();
            p.one_way_series.clear();
        }
        assert_eq!(figures(&old, "x").len(), 3);
    }
}
