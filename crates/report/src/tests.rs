//! Structure of rendered reports from synthetic results; the real runs and the browser are
//! the binary's tests.

use wirerate_core::search::Step;
use wirerate_core::synth;

use super::*;
use crate::svg::esc;

fn group(name: &str, runs: Vec<RunResult>) -> Group {
    Group {
        name: name.into(),
        runs,
        run_names: vec![],
    }
}

/// Every `http://` or `https://` in the text is the SVG namespace.
fn only_the_svg_namespace(html: &str) -> bool {
    let total = html.matches("http://").count() + html.matches("https://").count();
    total == html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
}

fn figures(html: &str) -> usize {
    html.matches("<figure class=\"chart\"").count()
}

#[test]
fn nothing_to_report_is_an_error() {
    assert_eq!(render(&Input::default()).unwrap_err(), ReportError::Empty);
    let empty = Input {
        groups: vec![group("x", vec![])],
        find_max: vec![],
        matrix: None,
    };
    assert_eq!(render(&empty).unwrap_err(), ReportError::Empty);
}

#[test]
fn one_run_has_its_time_series_with_a_table_and_no_external_reference() {
    let run = synth::run(1, 9.4e9, 10);
    let r = render(&Input {
        groups: vec![group("run 1", vec![run.clone()])],
        find_max: vec![],
        matrix: None,
    })
    .unwrap();
    assert!(r.html.contains("<title>wirerate report: run 1</title>"));
    assert!(r.charts.iter().any(|c| c.id == "run-1-goodput"));
    assert_eq!(figures(&r.html), r.charts.len());
    assert!(r.html.contains(&format!(
        "<meta name=\"wirerate-charts\" content=\"{}\">",
        r.charts.len()
    )));
    // every chart: a title, a description, axis names with units, a legend, a table
    for c in &r.charts {
        assert!(c.svg.contains("<title id="), "{}", c.id);
        assert!(c.svg.contains("class=\"legend\""), "{}", c.id);
    }
    assert!(r.charts[0].svg.contains("goodput (Gbit/s)"));
    assert!(r.charts[0].svg.contains("time since the start (s)"));
    assert_eq!(r.html.matches("<caption>").count(), r.charts.len());
    // the stored interval rate is in the table exactly
    assert!(r
        .html
        .contains(&format!("data-value=\"{}\"", run.intervals[0].bps)));
    assert!(only_the_svg_namespace(&r.html));
    assert!(!r.html.contains("<script src"));
    assert!(!r.html.contains("NaN"));
}

#[test]
fn a_tail_interval_is_charted_folded_into_the_one_before() {
    let mut run = synth::run(1, 9.4e9, 3);
    let mut tail = run.intervals.last().unwrap().clone();
    let last_end = tail.end_s;
    tail.start_s = last_end;
    tail.end_s = last_end + 0.02;
    tail.bytes = 1_000_000;
    tail.bps = 4e8;
    run.intervals.push(tail);
    let r = render(&Input {
        groups: vec![group("run 1", vec![run.clone()])],
        find_max: vec![],
        matrix: None,
    })
    .unwrap();
    // the tail's own rate is nowhere; the interval before it ends where the tail ended
    assert!(!r.html.contains("data-value=\"400000000\""));
    let mut folded = run.intervals.clone();
    wirerate_core::window::fold_tails(&mut folded, run.spec.interval_s);
    assert_eq!(folded.len(), run.intervals.len() - 1);
    let grown = folded.last().unwrap();
    assert!(r.html.contains(&format!("data-value=\"{}\"", grown.bps)));
}

#[test]
fn streams_get_a_fairness_chart() {
    let mut run = synth::run(1, 2e9, 3);
    let stream = |id, bps| wirerate_core::result::StreamResult {
        id,
        flow: wirerate_core::spec::Flow::ClientToServer,
        sender: Default::default(),
        receiver: Default::default(),
        goodput_bps: bps,
        tcp_sender: None,
        tcp_receiver: None,
    };
    run.streams = vec![stream(0, 1e9), stream(1, 3e9)];
    let r = render(&Input {
        groups: vec![group("p2", vec![run])],
        find_max: vec![],
        matrix: None,
    })
    .unwrap();
    let streams = r.charts.iter().find(|c| c.id == "p2-streams").unwrap();
    assert!(streams.svg.contains("Jain"));
    // 1 and 3 Gbit/s: (4)² / (2 × 10) = 0.8
    assert!(r
        .html
        .contains("Jain's fairness index 0.800 over 2 streams"));
}

#[test]
fn two_groups_are_compared_with_box_plots_and_the_ab_table() {
    let a = synth::sample(0, 8, 9.4e9, 0.05e9, 1);
    let b = synth::sample(10, 8, 7.0e9, 0.05e9, 2);
    let r = render(&Input {
        groups: vec![group("k6.8", a.clone()), group("k6.9", b)],
        find_max: vec![],
        matrix: None,
    })
    .unwrap();
    assert_eq!(r.title, "wirerate report: k6.9 against k6.8");
    for id in ["compare-goodput", "compare-cpu", "compare-pi"] {
        assert!(r.charts.iter().any(|c| c.id == id), "{id}");
    }
    assert!(
        r.html.contains("B is 25."),
        "the compare verdict is the caption"
    );
    assert!(r.html.contains("p &lt; 0.001"));
    assert!(r.html.contains("A/B: A = k6.8, B = k6.9"));
    // each run's goodput is in the box plot's table
    for run in &a {
        assert!(r
            .html
            .contains(&format!("data-value=\"{}\"", run.summary.goodput_bps)));
    }
    // the latest run of each group is shown in detail too
    assert!(r.charts.iter().any(|c| c.id == "k6-8-goodput"));
    assert!(r.charts.iter().any(|c| c.id == "k6-9-goodput"));
    assert!(only_the_svg_namespace(&r.html));
}

#[test]
fn groups_with_one_short_name_get_distinct_ids() {
    let r = render(&Input {
        groups: vec![
            group("a b", vec![synth::run(1, 1e9, 2)]),
            group("a-b", vec![synth::run(2, 1e9, 2)]),
        ],
        find_max: vec![],
        matrix: None,
    })
    .unwrap();
    let mut ids: Vec<&str> = r.charts.iter().map(|c| c.id.as_str()).collect();
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n);
    assert!(r
        .html
        .contains("aria-labelledby=\"a-b-goodput-2-t a-b-goodput-2-d\""));
}

#[test]
fn a_find_max_search_marks_the_rate_found() {
    let step = |offered: Option<f64>, loss: f64, pass| Step {
        offered_bps: offered,
        goodput_bps: offered.unwrap_or(900e6) * (1.0 - loss / 100.0),
        loss_percent: loss,
        pass,
        sent_bps: offered,
        phase: Default::default(),
    };
    let fm = FindMax {
        loss_limit_percent: 0.1,
        max_rate_bps: Some(500e6),
        steps: vec![
            step(None, 40.0, false),
            step(Some(900e6), 30.0, false),
            step(Some(450e6), 0.0, true),
            step(Some(500e6), 0.05, true),
        ],
        step_bottlenecks: vec![],
        confidence: Some(wirerate_core::search::Confidence {
            lowest_fail_bps: Some(900e6),
            trials: 3,
            passed: 3,
            confirmed: true,
            goodput: None,
            sent: None,
            ..Default::default()
        }),
    };
    let r = render(&Input {
        groups: vec![],
        find_max: vec![("fm.json".into(), fm)],
        matrix: None,
    })
    .unwrap();
    assert_eq!(r.charts.len(), 1);
    let svg = &r.charts[0].svg;
    assert!(svg.contains("found: 500.00 Mbit/s"));
    assert!(svg.contains("loss limit 0.1 %"));
    assert!(svg.contains("offered rate per stream (Mbit/s)"));
    assert!(r.html.contains("unpaced"));
    assert!(r.html.contains("data-value=\"900000000\""));
    assert!(
        r.html
            .contains("(passed 3 of 3 trials at that rate; lowest failing rate 900.00 Mbit/s)"),
        "the rate found says how far it is trusted"
    );
}

#[test]
fn a_host_pair_matrix_alone_makes_a_report_and_an_empty_one_does_not() {
    use wirerate_core::stats::{pair_matrix, PairRun};
    let run = |c: &str, t: f64, g: f64| PairRun {
        client_host: Some(c.into()),
        server_host: Some("srv".into()),
        started_unix_s: t,
        goodput_bps: Some(g),
    };
    let runs: Vec<PairRun> = (0..6)
        .flat_map(|i| {
            let i = f64::from(i);
            [
                run("a<b", 100.0 + i, 9e9 + i),
                run("a<b", 200.0 + i, 8e9 + i),
            ]
        })
        .collect();
    let m = pair_matrix(&runs, 100.0, 205.0);
    let r = render(&Input {
        groups: vec![],
        find_max: vec![],
        matrix: Some((m.clone(), " labelled 'plan:x'".into())),
    })
    .unwrap();
    assert_eq!(r.title, "wirerate report: host pairs");
    assert!(r.html.contains("<h2>Host pairs</h2>"));
    assert!(r.html.contains("labelled &#39;plan:x&#39;") || r.html.contains("labelled 'plan:x'"));
    // the client's name is escaped, the latest value carried exactly
    assert!(r.html.contains("a&lt;b → srv"));
    assert!(r.html.contains("data-value=\"8000000005\""));
    assert!(r.html.contains(" %*)"), "the significant drop is marked");
    let empty = pair_matrix(&[], 100.0, 0.0);
    assert_eq!(
        render(&Input {
            groups: vec![],
            find_max: vec![],
            matrix: Some((empty, String::new())),
        })
        .unwrap_err(),
        ReportError::Empty
    );
}

/// The points of the polyline of series `name` in `svg`.
fn line_points(svg: &str, name: &str) -> Option<usize> {
    let at = svg.find(&format!("data-series=\"{name}\"><polyline points=\""))?;
    let rest = &svg[at..];
    let start = rest.find("points=\"")? + 8;
    let end = start + rest[start..].find('"')?;
    Some(rest[start..end].split(' ').count())
}

/// A run of `streams` streams: each interval's sum and, per stream, its share.
fn with_streams(streams: u32) -> RunResult {
    let mut run = synth::run(1, 51e9, 3);
    let sums = run.intervals.clone();
    for i in &sums {
        for s in 0..streams {
            let mut one = i.clone();
            one.stream = Some(s);
            one.bps = i.bps / f64::from(streams);
            run.intervals.push(one);
        }
    }
    run.spec.parallel = streams;
    run
}

#[test]
fn stream_intervals_are_lines_of_their_own_under_the_sum() {
    let run = with_streams(4);
    let r = render(&Input {
        groups: vec![group("run 1", vec![run.clone()])],
        ..Input::default()
    })
    .unwrap();
    let g = &r
        .charts
        .iter()
        .find(|c| c.id == "run-1-goodput")
        .unwrap()
        .svg;
    // the sum is one line through its 3 intervals, not a zig-zag through 15 points
    let flow = wirerate_core::spec::Flow::ClientToServer;
    let sum = format!("{}, sum of 4 streams", flow.describe());
    assert_eq!(line_points(g, &esc(&sum)), Some(3), "{g}");
    for s in 0..4 {
        let name = format!("{} stream {s}", flow.short());
        assert_eq!(line_points(g, &esc(&name)), Some(3), "{name}");
    }
    assert_eq!(g.matches("stroke-opacity=\"0.5\"").count(), 4);
    // the table says which row is which
    assert!(r.html.contains("<th scope=\"col\">stream</th>"));
    assert_eq!(r.html.matches("<td>all</td>").count(), 3);
    // past a few streams only the sum is drawn
    let r = render(&Input {
        groups: vec![group("run 1", vec![with_streams(8)])],
        ..Input::default()
    })
    .unwrap();
    let g = &r
        .charts
        .iter()
        .find(|c| c.id == "run-1-goodput")
        .unwrap()
        .svg;
    let sum = format!("{}, sum of 8 streams", flow.describe());
    assert_eq!(line_points(g, &esc(&sum)), Some(3));
    assert!(!g.contains("stroke-opacity=\"0.5\""));
}

#[test]
fn tables_show_rtt_in_the_unit_of_their_caption_and_cores_by_host() {
    use wirerate_core::evidence::{CoreLoad, HostEvidence, IntervalTcp};
    let mut run = synth::run(1, 9e9, 3);
    for i in &mut run.intervals {
        i.tcp = Some(IntervalTcp {
            rtt_us: Some(1500.0),
            snd_cwnd: Some(100),
            ..IntervalTcp::default()
        });
    }
    let cores = vec![CoreLoad {
        core: 3,
        softirq_percent: 40.0,
        ..CoreLoad::default()
    }];
    for (side, key) in [
        (&mut run.evidence.client, "a"),
        (&mut run.evidence.server, "b"),
    ] {
        *side = Some(HostEvidence {
            host_key: Some(key.into()),
            cores: cores.clone(),
            ..HostEvidence::default()
        });
    }
    let r = render(&Input {
        groups: vec![group("run 1", vec![run])],
        ..Input::default()
    })
    .unwrap();
    assert!(r.html.contains("<th scope=\"col\">RTT (µs)</th>"));
    assert!(r.html.contains("data-value=\"1500\">1500</td>"));
    assert!(!r.html.contains("RTT (ms)</th>"));
    let cpu = &r.charts.iter().find(|c| c.id == "run-1-cpu").unwrap().svg;
    assert!(
        cpu.contains("client CPU 3") && cpu.contains("server CPU 3"),
        "{cpu}"
    );
    assert!(!cpu.contains("host 0") && !cpu.contains(">host 3<"));
}

/// Issue 23, item 11: the window was charted in segments for wirerate's runs and in KiB for
/// iperf3's, and printed in bytes elsewhere: it is in bytes (KiB) wherever they are known.
#[test]
fn the_window_is_charted_in_bytes_wherever_they_are_known() {
    use wirerate_core::evidence::IntervalTcp;
    let mut run = synth::run(1, 9e9, 3);
    for i in &mut run.intervals {
        i.tcp = Some(IntervalTcp {
            rtt_us: Some(1500.0),
            snd_cwnd: Some(100),
            snd_cwnd_bytes: Some(100 * 1448),
            ..IntervalTcp::default()
        });
    }
    let r = render(&Input {
        groups: vec![group("run 1", vec![run])],
        ..Input::default()
    })
    .unwrap();
    let tcp = &r.charts.iter().find(|c| c.id == "run-1-tcp").unwrap().svg;
    assert!(tcp.contains("congestion window (KiB)"), "{tcp}");
    assert!(!tcp.contains("(segments)"), "{tcp}");
}

fn rtt(base: f64) -> wirerate_core::latency::RttStats {
    wirerate_core::latency::RttStats {
        rtt_min_us: base * 0.8,
        rtt_mean_us: base * 1.1,
        rtt_p50_us: base,
        rtt_p90_us: base * 1.5,
        rtt_p99_us: base * 3.0,
        rtt_p999_us: base * 7.0,
        rtt_max_us: base * 20.0,
        rtt_stddev_us: base * 0.3,
    }
}

/// An rr run of 40000 transactions/s whose median round trip is `base` µs.
fn rr_run(n: u64, base: f64) -> RunResult {
    use wirerate_core::rr::{RrInterval, RrMode, RrSummary};
    let mut run = synth::run(n, 1e6, 4);
    for (k, i) in run.intervals.iter_mut().enumerate() {
        i.rr = Some(Box::new(RrInterval {
            transactions: 20_000,
            tps: 40_000.0 + k as f64,
            rtt: Some(rtt(20.0 + k as f64)),
        }));
    }
    run.summary.rr = Some(RrSummary {
        mode: RrMode::Tcp,
        request_bytes: 1,
        response_bytes: 1,
        burst: 1,
        rate_tps: None,
        transactions: 400_000,
        server_transactions: 400_000,
        seconds: 10.0,
        tps: 40_000.0,
        lost: 0,
        loss_percent: 0.0,
        connections: 0,
        rtt: Some(rtt(base)),
        cpu_us_per_transaction_local: None,
        cpu_us_per_transaction_remote: None,
        flows: vec![],
        open_loop: None,
    });
    run
}

#[test]
fn an_rr_run_shows_round_trips_and_transactions_not_goodput() {
    let run = rr_run(1, 24.5);
    let r = render(&Input {
        groups: vec![group("run 1", vec![run])],
        ..Input::default()
    })
    .unwrap();
    let ids: Vec<&str> = r.charts.iter().map(|c| c.id.as_str()).collect();
    assert!(
        ids.contains(&"run-1-rr-time") && ids.contains(&"run-1-rr-cdf"),
        "{ids:?}"
    );
    assert!(!ids.contains(&"run-1-goodput"), "{ids:?}");
    for p in [
        "p50 (µs)",
        "p90 (µs)",
        "p99 (µs)",
        "p99.9 (µs)",
        "transactions/s",
    ] {
        assert!(
            r.html.contains(&format!("<th scope=\"col\">{p}</th>")),
            "{p}"
        );
    }
    // the summary's p99.9 and the interval's tps, exactly
    assert!(r.html.contains(&format!("data-value=\"{}\"", 24.5 * 7.0)));
    assert!(r.html.contains("data-value=\"40003\""));
    assert!(r.html.contains("40000 transactions/s"));
    assert!(!r.html.contains("PI "));
}

#[test]
fn a_sweep_shows_its_size_curves_and_the_fit() {
    use wirerate_core::sweep::{SweepPoint, SweepResult};
    // one-way T = 10 µs + n / (1 GB/s)
    let points = [64u64, 1024, 65_536, 1 << 20]
        .iter()
        .map(|&n| {
            let t = 10e-6 + n as f64 / 1e9;
            SweepPoint::from_trials(n, 1000, &[t, t * 1.01]).unwrap()
        })
        .collect();
    let mut run = synth::run(1, 1e9, 0);
    run.sweep = Some(SweepResult::new(false, points, false));
    let fit = run.sweep.as_ref().unwrap().fit.unwrap();
    let r = render(&Input {
        groups: vec![group("run 1", vec![run])],
        ..Input::default()
    })
    .unwrap();
    let ids: Vec<&str> = r.charts.iter().map(|c| c.id.as_str()).collect();
    assert!(
        ids.contains(&"run-1-sweep-rate") && ids.contains(&"run-1-sweep-latency"),
        "{ids:?}"
    );
    assert!(!ids.contains(&"run-1-goodput"), "{ids:?}");
    assert!(r.html.contains("Hockney&#39;s fit") || r.html.contains("Hockney's fit"));
    assert!(r.html.contains(&format!("n½ {:.0} B", fit.n_half_bytes)));
    assert!(r.html.contains(&format!("t0 {:.2} µs", fit.t0_us)));
    assert!(r.html.contains("data-value=\"1048576\""));
    let lat = &r
        .charts
        .iter()
        .find(|c| c.id == "run-1-sweep-latency")
        .unwrap()
        .svg;
    assert!(lat.contains("Hockney fit t0 + n/r∞"));
}

#[test]
fn rr_groups_are_compared_by_transactions_and_round_trips() {
    let a = (1..=3).map(|n| rr_run(n, 20.0 + n as f64)).collect();
    let b = (4..=6).map(|n| rr_run(n, 40.0 + n as f64)).collect();
    let r = render(&Input {
        groups: vec![group("a", a), group("b", b)],
        ..Input::default()
    })
    .unwrap();
    let ids: Vec<&str> = r.charts.iter().map(|c| c.id.as_str()).collect();
    assert!(
        ids.contains(&"compare-tps") && ids.contains(&"compare-rtt-p99"),
        "{ids:?}"
    );
    assert!(!ids.contains(&"compare-goodput"), "{ids:?}");
    assert!(!r.html.contains("no goodput to compare"));
}
