//! The charts of one run: goodput over time with retransmits (or UDP loss), RTT and cwnd
//! over time, CPU per core of each host, goodput per stream with Jain's fairness index,
//! and the diagnosis as the section's verdict.

use wirerate_core::diagnosis::Confidence;
use wirerate_core::evidence::CoreLoad;
use wirerate_core::metrics::jain_fairness;
use wirerate_core::result::{CpuSide, Interval};
use wirerate_core::spec::Flow;
use wirerate_core::units::format_bps;
use wirerate_core::{Protocol, RunResult};

use crate::html::{Block, Cell, Figure, Section, Table};
use crate::rrsweep;
use crate::svg::{self, Mark, RefLine, Series, StackedBars, XyChart, PALETTE};
use crate::RateUnit;

/// The section of one run; `id` prefixes its charts' ids. A last interval too short to be
/// a rate (a result saved before intervals were folded, or made by a peer) is charted
/// folded into the one before it.
pub fn section(run: &RunResult, name: &str, id: &str) -> Section {
    let mut folded = run.clone();
    wirerate_core::window::fold_tails(&mut folded.intervals, run.spec.interval_s);
    let run = &folded;
    let s = &run.summary;
    let verdict = s.diagnosis.as_ref().map(|d| d.verdict.clone());
    let mut blocks = vec![Block::Para(describe(run))];
    match &s.diagnosis {
        Some(d) => {
            let confidence = match d.confidence {
                Confidence::Low => "low",
                Confidence::Medium => "medium",
                Confidence::High => "high",
            };
            blocks.push(Block::Styled(
                "verdict",
                format!("Why: {} (confidence {confidence})", d.verdict),
            ));
            let evidence = d.evidence.iter().map(|e| e.text.clone()).collect();
            blocks.push(Block::List("Evidence".into(), evidence));
            blocks.push(Block::List("Advice".into(), d.advice.clone()));
            blocks.push(Block::List("Notes".into(), d.notes.clone()));
            blocks.push(Block::List("Not seen".into(), d.unseen.clone()));
        }
        None => blocks.push(Block::Para("This result carries no diagnosis.".into())),
    }
    let caption = verdict.unwrap_or_else(|| "no diagnosis".to_string());
    // request/response runs and sweeps are judged by round trips and sizes, not goodput;
    // rpm runs by their latency under load
    let mut figures = if let Some(r) = &run.rpm {
        blocks.insert(0, Block::Styled("verdict", crate::rpm::describe(r)));
        let mut f = crate::rpm::figures(r, id);
        f.push(goodput_chart(run, &caption, id));
        f
    } else if let Some(rr) = &s.rr {
        rrsweep::rr_figures(run, rr, id)
    } else if let Some(sw) = &run.sweep {
        rrsweep::sweep_figures(sw, id)
    } else {
        let mut f = vec![goodput_chart(run, &caption, id)];
        f.extend(tcp_chart(run, id));
        f
    };
    figures.extend(cpu_chart(run, id));
    if s.rr.is_none() && run.sweep.is_none() {
        figures.extend(streams_chart(run, id));
    }
    Section {
        heading: name.to_string(),
        blocks,
        figures,
    }
}

fn describe(run: &RunResult) -> String {
    let s = &run.summary;
    if let Some(rr) = &s.rr {
        return rrsweep::describe_rr(rr);
    }
    if let Some(sw) = &run.sweep {
        return rrsweep::describe_sweep(sw);
    }
    let spec = &run.spec;
    let proto = match spec.protocol {
        Protocol::Tcp => "TCP",
        Protocol::Udp => "UDP",
    };
    let flows: Vec<&str> = spec
        .direction
        .flows()
        .iter()
        .map(|f| f.describe())
        .collect();
    let mut o = format!(
        "{proto}, {}, {} stream{} per flow: {} in {:.2} s",
        flows.join(" and "),
        spec.parallel,
        svg::plural(spec.parallel as usize),
        format_bps(s.goodput_bps),
        s.seconds
    );
    if let Some(e) = s.wire.efficiency {
        o.push_str(&format!(
            ", {:.1} % of what the wire model carries",
            e * 100.0
        ));
    }
    if let Some(pi) = s.pi {
        o.push_str(&format!(", PI {pi:.2}"));
    }
    o.push('.');
    o
}

/// The flows' sums per interval (not one stream's share), warm-up left out.
fn counted(run: &RunResult) -> impl Iterator<Item = &Interval> {
    run.intervals
        .iter()
        .filter(|i| !i.omitted && i.stream.is_none())
}

/// Streams drawn as thin lines of their own under their flow's sum; past this many they
/// would hide the sum, and the table and the per-stream chart hold them.
const STREAM_LINES: usize = 4;

/// One stream's intervals (those with a `stream` id), warm-up left out.
fn stream_intervals(run: &RunResult, flow: Flow, stream: u32) -> Vec<(f64, f64)> {
    run.intervals
        .iter()
        .filter(|i| !i.omitted && i.flow == flow && i.stream == Some(stream))
        .map(|i| (i.end_s, i.bps))
        .collect()
}

/// The stream ids with intervals of their own, per flow.
fn stream_ids(run: &RunResult, flow: Flow) -> Vec<u32> {
    let mut ids: Vec<u32> = Vec::new();
    for i in run.intervals.iter().filter(|i| i.flow == flow) {
        if let Some(s) = i.stream.filter(|s| !ids.contains(s)) {
            ids.push(s);
        }
    }
    ids
}

fn flows(run: &RunResult) -> Vec<Flow> {
    let mut f: Vec<Flow> = Vec::new();
    for i in &run.intervals {
        if !f.contains(&i.flow) {
            f.push(i.flow);
        }
    }
    f
}

/// Goodput per interval per flow (and in all for two flows), with the wire's ceiling, and
/// retransmits or UDP loss on the right axis. Runs without intervals show their total as
/// one point over the whole window.
fn goodput_chart(run: &RunResult, caption: &str, id: &str) -> Figure {
    let s = &run.summary;
    let unit = RateUnit::of(
        counted(run)
            .map(|i| i.bps)
            .chain([s.goodput_bps])
            .chain(s.wire.model_goodput_bps),
    );
    let udp = run.spec.protocol == Protocol::Udp;
    let mut series = Vec::new();
    let fl = flows(run);
    for (k, f) in fl.iter().enumerate() {
        let pts = counted(run)
            .filter(|i| i.flow == *f)
            .map(|i| (i.end_s, i.bps / unit.div))
            .collect();
        let ids = stream_ids(run, *f);
        let name = if ids.is_empty() {
            f.describe().to_string()
        } else {
            format!("{}, sum of {} streams", f.describe(), ids.len())
        };
        series.push(Series::new(name, pts, Mark::Line, k));
        if ids.len() <= STREAM_LINES {
            for s in ids {
                let pts = stream_intervals(run, *f, s)
                    .into_iter()
                    .map(|(x, y)| (x, y / unit.div))
                    .collect();
                series.push(
                    Series::new(format!("{} stream {s}", f.short()), pts, Mark::Line, k).thin(),
                );
            }
        }
    }
    if fl.len() > 1 {
        // both directions at once: their sum per interval (intervals of the flows share
        // their starts)
        let mut sums: Vec<(f64, f64, f64)> = Vec::new();
        for i in counted(run) {
            match sums.iter_mut().find(|s| (s.0 - i.start_s).abs() < 1e-6) {
                Some(s) => s.2 += i.bps,
                None => sums.push((i.start_s, i.end_s, i.bps)),
            }
        }
        let pts = sums.iter().map(|s| (s.1, s.2 / unit.div)).collect();
        series.push(Series::new("both flows", pts, Mark::Line, 6).dashed());
    }
    if series.is_empty() {
        series.push(Series::new(
            "whole run",
            vec![(s.seconds, s.goodput_bps / unit.div)],
            Mark::Points,
            0,
        ));
    }
    let mut right_name = None;
    for (k, f) in fl.iter().enumerate() {
        let pts: Vec<(f64, f64)> = counted(run)
            .filter(|i| i.flow == *f)
            .filter_map(|i| {
                let v = if udp {
                    i.loss_percent
                } else {
                    i.tcp.as_ref()?.retransmits.map(|r| r as f64)
                };
                Some((i.end_s, v?))
            })
            .collect();
        if !pts.is_empty() {
            let what = if udp { "loss" } else { "retransmits" };
            right_name = Some(if udp {
                "loss (%)"
            } else {
                "retransmits (per interval)"
            });
            series.push(
                Series::new(format!("{what}, {}", f.short()), pts, Mark::Bars, k + 4).on_right(),
            );
        }
    }
    let mut lines = Vec::new();
    if let Some(m) = s.wire.model_goodput_bps {
        let eff = s.wire.efficiency.map_or(String::new(), |e| {
            format!(", efficiency {:.1} %", e * 100.0)
        });
        lines.push(RefLine {
            label: format!("wire model ceiling {}{eff}", format_bps(m)),
            value: m / unit.div,
            vertical: false,
            color: PALETTE[6],
        });
    }
    let chart = XyChart {
        title: "Goodput per interval".into(),
        desc: format!("Goodput over time per flow. {caption}"),
        x_name: "time since the start (s)".into(),
        y_name: format!("goodput ({})", unit.name),
        y2_name: right_name.map(str::to_string),
        series,
        lines,
        y_from_zero: true,
        x_from_zero: true,
    };
    let cid = format!("{id}-goodput");
    let mut notes = Vec::new();
    let omitted = run.intervals.iter().filter(|i| i.omitted).count();
    if omitted > 0 {
        notes.push(format!(
            "{omitted} warm-up interval(s) not counted are left out of the chart."
        ));
    }
    if let (Some(l), Some(src)) = (s.wire.link_bps, &s.wire.link_source) {
        notes.push(format!("link rate {} (from {src})", format_bps(l)));
    }
    Figure {
        svg: chart.svg(&cid),
        id: cid,
        title: chart.title,
        caption: caption.to_string(),
        notes,
        table: interval_table(run, unit, udp),
    }
}

fn interval_table(run: &RunResult, unit: RateUnit, udp: bool) -> Table {
    let mut head = vec![
        "flow".to_string(),
        "stream".into(),
        "start (s)".into(),
        "end (s)".into(),
        format!("goodput ({})", unit.name),
    ];
    head.push(if udp { "loss (%)" } else { "retransmits" }.into());
    head.push("bottleneck from here".into());
    let rows = run
        .intervals
        .iter()
        .map(|i| {
            let extra = if udp {
                Cell::num(i.loss_percent, |v| format!("{v:.3}"))
            } else {
                Cell::num(
                    i.tcp.as_ref().and_then(|t| t.retransmits).map(|r| r as f64),
                    |v| format!("{v:.0}"),
                )
            };
            let flow = if i.omitted {
                format!("{} (warm-up)", i.flow.describe())
            } else {
                i.flow.describe().to_string()
            };
            let stream = i.stream.map_or("all".to_string(), |s| s.to_string());
            vec![
                Cell::text(flow),
                Cell::text(stream),
                Cell::num(Some(i.start_s), |v| format!("{v:.2}")),
                Cell::num(Some(i.end_s), |v| format!("{v:.2}")),
                Cell::num(Some(i.bps), |v| unit.show(v)),
                extra,
                Cell::text(i.bottleneck.map_or("", |b| b.words())),
            ]
        })
        .collect();
    Table {
        caption: "Goodput per interval; stream \"all\" is the flow's sum (data-value: bit/s)"
            .into(),
        head,
        rows,
    }
}

/// RTT (left) and congestion window (right) of the senders per interval, from the
/// TCP_INFO samples; None when the run has none.
fn tcp_chart(run: &RunResult, id: &str) -> Option<Figure> {
    let with_tcp: Vec<&Interval> = counted(run).filter(|i| i.tcp.is_some()).collect();
    if with_tcp.is_empty() {
        return None;
    }
    // the window in bytes, the unit of every other report (an iperf3 file has only bytes);
    // segments only for a run that has no bytes of it
    let in_bytes = with_tcp
        .iter()
        .any(|i| i.tcp.as_ref().is_some_and(|t| t.snd_cwnd_bytes.is_some()));
    let mut series = Vec::new();
    for (k, f) in flows(run).iter().enumerate() {
        let rtt: Vec<(f64, f64)> = with_tcp
            .iter()
            .filter(|i| i.flow == *f)
            .filter_map(|i| Some((i.end_s, i.tcp.as_ref()?.rtt_us? / 1000.0)))
            .collect();
        let cwnd: Vec<(f64, f64)> = with_tcp
            .iter()
            .filter(|i| i.flow == *f)
            .filter_map(|i| Some((i.end_s, cwnd_of(i.tcp.as_ref()?, in_bytes)?)))
            .collect();
        series.push(Series::new(
            format!("RTT, {}", f.short()),
            rtt,
            Mark::Line,
            k,
        ));
        series.push(
            Series::new(format!("cwnd, {}", f.short()), cwnd, Mark::Line, k + 2)
                .on_right()
                .dashed(),
        );
    }
    series.retain(|s| !s.points.is_empty());
    if series.is_empty() {
        return None;
    }
    let chart = XyChart {
        title: "Round-trip time and congestion window per interval".into(),
        desc: "The senders' smoothed RTT and largest congestion window at each interval's end \
               (TCP_INFO)"
            .into(),
        x_name: "time since the start (s)".into(),
        y_name: "RTT (ms)".into(),
        y2_name: Some(
            if in_bytes {
                "congestion window (KiB)"
            } else {
                "congestion window (segments)"
            }
            .into(),
        ),
        series,
        lines: vec![],
        y_from_zero: true,
        x_from_zero: true,
    };
    let rows = with_tcp
        .iter()
        .filter_map(|i| {
            let t = i.tcp.as_ref()?;
            Some(vec![
                Cell::text(i.flow.describe()),
                Cell::num(Some(i.end_s), |v| format!("{v:.2}")),
                Cell::num(t.rtt_us, |v| format!("{v:.0}")),
                Cell::num(t.snd_cwnd.map(|c| c as f64), |v| format!("{v:.0}")),
                Cell::num(t.snd_cwnd_bytes.map(|c| c as f64), |v| format!("{v:.0}")),
                Cell::num(t.retransmits.map(|c| c as f64), |v| format!("{v:.0}")),
                Cell::num(t.delivery_rate_bps.map(|c| c as f64), format_bps),
            ])
        })
        .collect();
    let cid = format!("{id}-tcp");
    Some(Figure {
        svg: chart.svg(&cid),
        id: cid,
        title: chart.title,
        caption: "RTT rises when a queue fills; the window says how much the sender may have \
                  in flight."
            .into(),
        notes: vec![],
        table: Table {
            caption: "TCP_INFO of the senders per interval, the flows' sums (data-value: RTT \
                      in µs, cwnd in segments or bytes, delivery rate in bit/s)"
                .into(),
            head: vec![
                "flow".into(),
                "end (s)".into(),
                "RTT (µs)".into(),
                "cwnd (segments)".into(),
                "cwnd (bytes)".into(),
                "retransmits".into(),
                "delivery rate".into(),
            ],
            rows,
        },
    })
}

/// The window of an interval: segments, or KiB where only bytes are known.
fn cwnd_of(t: &wirerate_core::evidence::IntervalTcp, in_bytes: bool) -> Option<f64> {
    if in_bytes {
        t.snd_cwnd_bytes.map(|b| b as f64 / 1024.0)
    } else {
        t.snd_cwnd.map(|c| c as f64)
    }
}

/// The hosts whose per-core loads to draw: both, or one when both ends ran on one host
/// (same kernel and namespace key).
fn core_hosts(run: &RunResult) -> Vec<(&'static str, &[CoreLoad])> {
    let (c, s) = (&run.evidence.client, &run.evidence.server);
    let same = match (c, s) {
        (Some(c), Some(s)) => c.host_key.is_some() && c.host_key == s.host_key,
        _ => false,
    };
    let mut v = Vec::new();
    if let Some(c) = c.as_ref().filter(|c| !c.cores.is_empty()) {
        v.push((
            if same { "client+server" } else { "client" },
            c.cores.as_slice(),
        ));
    }
    if let Some(s) = s.as_ref().filter(|s| !s.cores.is_empty() && !same) {
        v.push(("server", s.cores.as_slice()));
    }
    v
}

/// CPU per core of each host, split user / system / softirq / irq / steal; where no core
/// was seen, the hosts' totals from the summary.
fn cpu_chart(run: &RunResult, id: &str) -> Option<Figure> {
    let hosts = core_hosts(run);
    let cid = format!("{id}-cpu");
    let cpu = &run.summary.cpu;
    let sides = [
        ("client", cpu.local.as_ref()),
        ("server", cpu.remote.as_ref()),
    ];
    let summary_rows = sides.iter().filter_map(|(n, c)| c.map(|c| side_row(n, c)));
    if hosts.is_empty() {
        return process_cpu_chart(run, &cid);
    }
    let mut categories = Vec::new();
    let kinds = ["user", "system", "softirq", "irq", "steal"];
    let mut layers: Vec<(String, Vec<f64>)> =
        kinds.iter().map(|k| (k.to_string(), Vec::new())).collect();
    let mut rows = Vec::new();
    for (host, cores) in &hosts {
        for c in cores.iter() {
            categories.push(format!("{host} CPU {}", c.core));
            let vals = [
                c.user_percent,
                c.system_percent,
                c.softirq_percent,
                c.irq_percent,
                c.steal_percent,
            ];
            for (l, v) in layers.iter_mut().zip(vals) {
                l.1.push(v);
            }
            let mut row = vec![Cell::text(format!("{host} CPU {}", c.core))];
            row.extend(
                vals.iter()
                    .map(|v| Cell::num(Some(*v), |x| format!("{x:.1}"))),
            );
            row.push(Cell::num(Some(c.busy_percent()), |x| format!("{x:.1}")));
            rows.push(row);
        }
    }
    let chart = StackedBars {
        title: "CPU per core".into(),
        desc: "Busy share of each core over the test window, split by kind of work".into(),
        x_name: "host (client, server or both on one) and CPU".into(),
        y_name: "busy (% of the core)".into(),
        categories,
        layers,
        y_max: Some(100.0),
    };
    let notes: Vec<String> = summary_rows.collect();
    let mut head = vec!["core".to_string()];
    head.extend(kinds.iter().map(|k| format!("{k} (%)")));
    head.push("busy (%)".into());
    Some(Figure {
        svg: chart.svg(&cid),
        id: cid,
        title: chart.title,
        caption: "Where each host's cores spent the test: a core full of softirq is the \
                  receiving host's network work."
            .into(),
        notes,
        table: Table {
            caption: "CPU per core, percent of the core (/proc/stat)".into(),
            head,
            rows,
        },
    })
}

fn side_row(name: &str, c: &CpuSide) -> String {
    let host = c.system_percent.map_or("host busy n/a".to_string(), |p| {
        format!("host {p:.1} % busy")
    });
    format!(
        "{name}: process {:.2} s user + {:.2} s system ({:.1} % of a core); {host}",
        c.user_s, c.sys_s, c.process_percent
    )
}

/// Without per-core evidence (an iperf3 file): each side's process CPU, user and system,
/// in percent of one core.
fn process_cpu_chart(run: &RunResult, cid: &str) -> Option<Figure> {
    let cpu = &run.summary.cpu;
    let window = run.summary.seconds;
    if window <= 0.0 {
        return None;
    }
    let sides: Vec<(&str, &CpuSide)> = [
        ("client", cpu.local.as_ref()),
        ("server", cpu.remote.as_ref()),
    ]
    .into_iter()
    .filter_map(|(n, c)| Some((n, c?)))
    .collect();
    if sides.is_empty() {
        return None;
    }
    let pct = |s: f64| s / window * 100.0;
    let chart = StackedBars {
        title: "CPU of each side's process".into(),
        desc: "User and system time of each side's process over the window".into(),
        x_name: "side".into(),
        y_name: "CPU (% of one core)".into(),
        categories: sides.iter().map(|(n, _)| n.to_string()).collect(),
        layers: vec![
            (
                "user".into(),
                sides.iter().map(|(_, c)| pct(c.user_s)).collect(),
            ),
            (
                "system".into(),
                sides.iter().map(|(_, c)| pct(c.sys_s)).collect(),
            ),
        ],
        y_max: None,
    };
    let rows = sides
        .iter()
        .map(|(n, c)| {
            vec![
                Cell::text(*n),
                Cell::num(Some(c.user_s), |v| format!("{v:.3}")),
                Cell::num(Some(c.sys_s), |v| format!("{v:.3}")),
                Cell::num(Some(c.process_percent), |v| format!("{v:.1}")),
                Cell::num(c.system_percent, |v| format!("{v:.1}")),
            ]
        })
        .collect();
    Some(Figure {
        svg: chart.svg(cid),
        id: cid.to_string(),
        title: chart.title,
        caption: "No per-core figures in this result: each side's own process only.".into(),
        notes: vec![],
        table: Table {
            caption: "CPU per side".into(),
            head: vec![
                "side".into(),
                "user (s)".into(),
                "system (s)".into(),
                "process (% of a core)".into(),
                "host busy (%)".into(),
            ],
            rows,
        },
    })
}

/// Goodput per stream and Jain's fairness index per flow, for runs of several streams.
fn streams_chart(run: &RunResult, id: &str) -> Option<Figure> {
    if run.streams.len() < 2 {
        return None;
    }
    let unit = RateUnit::of(run.streams.iter().map(|s| s.goodput_bps));
    let fl: Vec<Flow> = {
        let mut f = Vec::new();
        for s in &run.streams {
            if !f.contains(&s.flow) {
                f.push(s.flow);
            }
        }
        f
    };
    let mut fairness = Vec::new();
    for f in &fl {
        let rates: Vec<f64> = run
            .streams
            .iter()
            .filter(|s| s.flow == *f)
            .map(|s| s.goodput_bps)
            .collect();
        if let Some(j) = jain_fairness(&rates) {
            fairness.push(format!(
                "{}: Jain's fairness index {j:.3} over {} streams",
                f.describe(),
                rates.len()
            ));
        }
    }
    let chart = StackedBars {
        title: "Goodput per stream".into(),
        desc: format!("How the streams shared the path. {}", fairness.join("; ")),
        x_name: "stream".into(),
        y_name: format!("goodput ({})", unit.name),
        categories: run
            .streams
            .iter()
            .map(|s| format!("{} {}", s.flow.short(), s.id))
            .collect(),
        layers: vec![(
            "goodput".into(),
            run.streams
                .iter()
                .map(|s| s.goodput_bps / unit.div)
                .collect(),
        )],
        y_max: None,
    };
    let rows = run
        .streams
        .iter()
        .map(|s| {
            let snd = s.tcp_sender.as_ref();
            vec![
                Cell::text(format!("{} stream {}", s.flow.describe(), s.id)),
                Cell::num(Some(s.goodput_bps), |v| unit.show(v)),
                Cell::num(
                    snd.and_then(|t| t.retransmits_total).map(|v| v as f64),
                    |v| format!("{v:.0}"),
                ),
                Cell::num(snd.and_then(|t| t.rtt_us).map(|v| v as f64), |v| {
                    format!("{v:.0}")
                }),
            ]
        })
        .collect();
    let cid = format!("{id}-streams");
    Some(Figure {
        svg: chart.svg(&cid),
        id: cid,
        title: chart.title,
        caption: format!(
            "{} (1 is an equal share for every stream, 1/n one stream taking all)",
            fairness.join("; ")
        ),
        notes: vec![],
        table: Table {
            caption: "Goodput per stream (data-value: bit/s; RTT in µs)".into(),
            head: vec![
                "stream".into(),
                format!("goodput ({})", unit.name),
                "retransmits".into(),
                "RTT (µs)".into(),
            ],
            rows,
        },
    })
}
