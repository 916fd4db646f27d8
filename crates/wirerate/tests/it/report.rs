//! `wirerate report` over real stored runs: a small results database made by running the
//! binary over loopback, then reports checked for their structure (every chart, the numbers
//! in the tables equal to the stored results, nothing fetched from outside), and opened in
//! a real browser (Debian's chromium, headless) that must draw them without a console
//! error.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use common::{f, stderr, succeeded as ok, wait_bounded, ServerProc};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(60);

/// The test database and its runs, made once for every test of this file.
struct Fixture {
    dir: PathBuf,
    db: PathBuf,
    /// `history --json` of each label: the stored runs with their ids.
    p1: Vec<Value>,
    p2: Vec<Value>,
}

fn wr(db: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(common::bin());
    cmd.env("WIRERATE_DB", db);
    common::run_cmd(cmd, args, LIMIT)
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-tests");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("results.db");
        for (label, p) in [("p1", "1"), ("p1", "1"), ("p2", "2"), ("p2", "2")] {
            let args = ["run", "-t", "1", "-i", "0.25", "-P", p, "--label", label];
            ok(wr(&db, &args), "a loopback run");
        }
        let history = |label: &str| -> Vec<Value> {
            let out = ok(wr(&db, &["history", "--json", "--label", label]), "history");
            serde_json::from_slice::<Value>(&out.stdout)
                .unwrap()
                .as_array()
                .unwrap()
                .clone()
        };
        Fixture {
            p1: history("p1"),
            p2: history("p2"),
            dir,
            db,
        }
    })
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The ids of the charts in a page.
fn chart_ids(html: &str) -> Vec<String> {
    html.split("<figure class=\"chart\" id=\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap_or("").to_string())
        .collect()
}

/// The exact values of a chart's table (its `data-value` attributes, in order).
fn table_values(html: &str, chart: &str) -> Vec<f64> {
    let start = html
        .find(&format!("<figure class=\"chart\" id=\"{chart}\""))
        .unwrap_or_else(|| panic!("no chart {chart}"));
    let fig = &html[start..];
    let fig = &fig[..fig.find("</figure>").unwrap()];
    let table = &fig[fig.find("<table>").unwrap()..];
    table
        .split("data-value=\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap().parse().unwrap())
        .collect()
}

/// Self-contained: no address but the SVG namespace, no script or style from a file.
fn assert_self_contained(html: &str) {
    let urls = html.matches("http://").count() + html.matches("https://").count();
    let ns = html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count();
    assert_eq!(urls, ns, "an address other than the SVG namespace");
    for bad in ["<script src", "<link", "@import", "url(", "<iframe", "<img"] {
        assert!(!html.contains(bad), "{bad}");
    }
    assert!(
        html.contains("default-src 'none'"),
        "the page forbids fetching"
    );
}

/// Text as the page escapes it.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[test]
fn one_stored_run_has_every_chart_and_the_stored_numbers() {
    let fx = fixture();
    let entry = &fx.p2[0];
    let id = entry["id"].as_i64().unwrap().to_string();
    let run = &entry["result"];
    let html_path = fx.dir.join("one.html");
    let svg_dir = fx.dir.join("one-svg");
    let out = wr(
        &fx.db,
        &[
            "report",
            &id,
            "-o",
            html_path.to_str().unwrap(),
            "--svg",
            svg_dir.to_str().unwrap(),
        ],
    );
    let out = ok(out, "report of one run");
    let html = read(&html_path);
    assert!(String::from_utf8_lossy(&out.stdout).contains("(4 charts)"));
    let p = format!("run-{id}");
    let ids = chart_ids(&html);
    let want: Vec<String> = ["goodput", "tcp", "cpu", "streams"]
        .iter()
        .map(|c| format!("{p}-{c}"))
        .collect();
    assert_eq!(ids, want);
    assert!(html.contains(&format!("<title>wirerate report: run {id}</title>")));
    // the verdict is the caption of the goodput chart
    let verdict = run["summary"]["diagnosis"]["verdict"].as_str().unwrap();
    assert!(
        html.contains(&format!("<figcaption>{}</figcaption>", esc(verdict))),
        "{verdict}"
    );
    // goodput per interval: the table holds each interval's start, end and rate as stored
    let intervals = run["intervals"].as_array().unwrap();
    let values = table_values(&html, &format!("{p}-goodput"));
    let stored: Vec<f64> = intervals
        .iter()
        .flat_map(|i| {
            let mut v = vec![f(&i["start_s"]), f(&i["end_s"]), f(&i["bps"])];
            v.extend(i["tcp"]["retransmits"].as_f64());
            v
        })
        .collect();
    assert_eq!(values, stored);
    // -P 2: the flow's sum is one line through the sum intervals, each stream a thin line
    // of its own, never one line zig-zagging between streams and sum
    let sums = intervals
        .iter()
        .filter(|i| i.get("stream").is_none() && i["omitted"] == false)
        .count();
    assert!(
        sums > 1 && sums < intervals.len(),
        "{sums} of {}",
        intervals.len()
    );
    let svg = read(&svg_dir.join(format!("{p}-goodput.svg")));
    let lines: Vec<usize> = svg
        .split("<polyline points=\"")
        .skip(1)
        .map(|l| l[..l.find('"').unwrap()].split(' ').count())
        .collect();
    assert_eq!(lines.len(), 3, "the sum and two streams: {lines:?}");
    // the sum first; a stream may lack an interval its flow's sum has
    assert_eq!(lines[0], sums, "{lines:?}");
    assert!(
        lines[1..].iter().all(|n| *n > 1 && *n <= sums),
        "{lines:?} against {sums}"
    );
    assert!(html.contains("<th scope=\"col\">stream</th>"));
    // units as the captions say them, cores by host, no Markdown marks
    assert!(html.contains("<th scope=\"col\">RTT (µs)</th>"));
    assert!(!html.contains("RTT (ms)</th>"));
    assert!(html.contains("client CPU ") || html.contains("client+server CPU "));
    assert!(!html.contains("host 0"));
    assert!(!html.contains('`'), "a literal backtick");
    // per core: the stored loads of the host
    let cores = run["evidence"]["client"]["cores"].as_array().unwrap();
    let cpu = table_values(&html, &format!("{p}-cpu"));
    assert_eq!(cpu[0], f(&cores[0]["user_percent"]));
    assert_eq!(cpu[1], f(&cores[0]["system_percent"]));
    assert_eq!(cpu[2], f(&cores[0]["softirq_percent"]));
    // the streams' goodput, and the fairness of the two
    let streams = table_values(&html, &format!("{p}-streams"));
    let rates: Vec<f64> = run["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| f(&s["goodput_bps"]))
        .collect();
    assert_eq!(rates.len(), 2);
    assert!(streams.contains(&rates[0]) && streams.contains(&rates[1]));
    assert!(html.contains("Jain's fairness index"));
    assert_self_contained(&html);
    // --svg: one file per chart, standalone
    for id in &ids {
        let svg = read(&svg_dir.join(format!("{id}.svg")));
        assert!(svg.starts_with("<?xml version=\"1.0\""));
        assert!(svg.contains("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
    }
    assert_eq!(std::fs::read_dir(&svg_dir).unwrap().count(), ids.len());
}

#[test]
fn two_labels_get_box_plots_with_the_compare_verdict_and_table() {
    let fx = fixture();
    let out = ok(
        wr(&fx.db, &["report", "p1", "p2", "-o", "-"]),
        "report p1 p2",
    );
    let html = String::from_utf8(out.stdout).unwrap();
    let ids = chart_ids(&html);
    for want in [
        "compare-goodput",
        "compare-cpu",
        "compare-pi",
        "p1-goodput",
        "p2-goodput",
    ] {
        assert!(ids.iter().any(|i| i == want), "{want} in {ids:?}");
    }
    // the verdict `compare` gives is the report's
    let cmp = ok(wr(&fx.db, &["compare", "p1", "p2", "--json"]), "compare");
    let cmp: Value = serde_json::from_slice(&cmp.stdout).unwrap();
    let verdict = esc(cmp["verdict"].as_str().unwrap());
    assert!(
        html.contains(&format!("A = p1, B = p2: {verdict}")),
        "{verdict}"
    );
    assert!(html.contains("A/B: A = p1, B = p2"));
    // the settings in which the sides differ, as `compare` lists them (-P 1 against -P 2)
    let diffs = cmp["differences"].as_array().unwrap();
    assert!(
        diffs.iter().any(|d| d["what"] == "spec.parallel"),
        "{diffs:?}"
    );
    for d in diffs {
        let line = format!(
            "{}: A {}, B {}",
            d["what"].as_str().unwrap(),
            d["a"].as_str().unwrap(),
            d["b"].as_str().unwrap()
        );
        assert!(html.contains(&format!("<li>{}</li>", esc(&line))), "{line}");
    }
    // each run's goodput is in the box plot's table, in the order stored
    let stored: Vec<f64> = fx
        .p1
        .iter()
        .chain(&fx.p2)
        .map(|e| f(&e["result"]["summary"]["goodput_bps"]))
        .collect();
    let mut shown = table_values(&html, "compare-goodput");
    let mut want = stored.clone();
    shown.sort_by(f64::total_cmp);
    want.sort_by(f64::total_cmp);
    assert_eq!(shown, want);
    assert_self_contained(&html);
}

#[test]
fn a_find_max_search_and_an_iperf3_file_are_reported() {
    let fx = fixture();
    let out = wr(
        &fx.db,
        &[
            "run",
            "-u",
            "--find-max",
            "-t",
            "0.3",
            "--json",
            "--no-store",
        ],
    );
    let fm_path = fx.dir.join("findmax.json");
    std::fs::write(&fm_path, &out.stdout).unwrap();
    let fm: Value = serde_json::from_slice(&out.stdout).unwrap();
    // an iperf3 client against wirerate serve writes a real -J document
    let srv = ServerProc::start(&[]);
    let ip = Command::new("iperf3")
        .args([
            "-c",
            "127.0.0.1",
            "-p",
            &srv.port.to_string(),
            "-t",
            "1",
            "-J",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map(|c| wait_bounded(c, LIMIT));
    drop(srv);
    let html_path = fx.dir.join("fm.html");
    let mut args = vec!["report", fm_path.to_str().unwrap()];
    let ip_path = fx.dir.join("iperf3.json");
    let ip_doc = match ip {
        Ok(o) if o.status.success() => {
            std::fs::write(&ip_path, &o.stdout).unwrap();
            args.push(ip_path.to_str().unwrap());
            Some(serde_json::from_slice::<Value>(&o.stdout).unwrap())
        }
        _ => {
            eprintln!(
                "iperf3 is not installed: the iperf3 -J part is skipped (.ci/run installs it)"
            );
            None
        }
    };
    args.extend(["-o", html_path.to_str().unwrap()]);
    ok(wr(&fx.db, &args), "report of a find-max and an iperf3 file");
    let html = read(&html_path);
    let ids = chart_ids(&html);
    assert!(ids.iter().any(|i| i == "findmax-json-findmax"), "{ids:?}");
    let steps = fm["steps"].as_array().unwrap();
    let values = table_values(&html, "findmax-json-findmax");
    for s in steps {
        assert!(values.contains(&f(&s["goodput_bps"])));
        assert!(values.contains(&f(&s["loss_percent"])));
    }
    if let Some(found) = fm["max_rate_bps"].as_f64() {
        assert!(html.contains("found: "), "the found rate is marked");
        assert!(found > 0.0);
    }
    if let Some(doc) = ip_doc {
        let intervals: Vec<f64> = doc["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| f(&i["sum"]["bits_per_second"]))
            .collect();
        let shown = table_values(&html, "iperf3-json-goodput");
        for bps in intervals {
            assert!(shown.contains(&bps), "{bps} in {shown:?}");
        }
        // the file's windows (bytes) reach the TCP table, largest stream per interval
        let cwnd: Vec<f64> = doc["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|i| {
                i["streams"]
                    .as_array()?
                    .iter()
                    .filter_map(|s| s["snd_cwnd"].as_f64())
                    .reduce(f64::max)
            })
            .collect();
        assert!(!cwnd.is_empty(), "iperf3 -J has snd_cwnd");
        let tcp = table_values(&html, "iperf3-json-tcp");
        for c in &cwnd {
            assert!(tcp.contains(c), "cwnd {c} in {tcp:?}");
        }
        // imported and shown: the largest window, not "-"
        let db = fx.dir.join("iperf3.db");
        let _ = std::fs::remove_file(&db);
        ok(
            wr(&db, &["import", ip_path.to_str().unwrap()]),
            "import of iperf3 -J",
        );
        let out = ok(wr(&db, &["history", "--json"]), "history");
        let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
        let id = rows[0]["id"].as_i64().unwrap().to_string();
        let out = ok(wr(&db, &["show", &id]), "show of an iperf3 import");
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.contains("largest cwnd"))
            .unwrap_or_else(|| panic!("no cwnd line: {text}"));
        assert!(!line.ends_with(" n/a"), "{line}");
        let max = cwnd.iter().copied().fold(0.0, f64::max) as u64;
        let want = wirerate_core::units::format_bytes(max);
        assert!(line.contains(&want), "{line} should hold {want}");
    }
    assert_self_contained(&html);
}

#[test]
fn rr_and_sweep_runs_get_their_own_charts_and_show() {
    let fx = fixture();
    let db = fx.dir.join("rr-sweep.db");
    ok(
        wr(&db, &["rr", "-t", "1", "-i", "0.25", "--label", "rr"]),
        "an rr run",
    );
    let sweep = [
        "sweep",
        "--max",
        "4096",
        "--point-time",
        "0.002",
        "--trials",
        "2",
        "--label",
        "sw",
    ];
    ok(wr(&db, &sweep), "a sweep");
    let entry = |label: &str| -> Value {
        let out = ok(wr(&db, &["history", "--json", "--label", label]), "history");
        serde_json::from_slice::<Value>(&out.stdout).unwrap()[0].clone()
    };
    // rr: percentiles and transactions per second, not goodput
    let rr = entry("rr");
    let id = rr["id"].as_i64().unwrap().to_string();
    let html_path = fx.dir.join("rr.html");
    ok(
        wr(&db, &["report", &id, "-o", html_path.to_str().unwrap()]),
        "report of an rr run",
    );
    let html = read(&html_path);
    let p = format!("run-{id}");
    assert_eq!(
        chart_ids(&html),
        [
            format!("{p}-rr-time"),
            format!("{p}-rr-cdf"),
            format!("{p}-cpu")
        ]
    );
    let sum = &rr["result"]["summary"]["rr"];
    let cdf = table_values(&html, &format!("{p}-rr-cdf"));
    for k in ["rtt_p50_us", "rtt_p90_us", "rtt_p99_us", "rtt_p999_us"] {
        assert!(cdf.contains(&f(&sum[k])), "{k} in {cdf:?}");
    }
    assert!(cdf.contains(&f(&sum["tps"])));
    assert_self_contained(&html);
    let out = ok(wr(&db, &["show", &id]), "show of an rr run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("p99.9") && text.contains("per second"),
        "{text}"
    );
    assert!(!text.contains("goodput") && !text.contains("PI "), "{text}");
    // sweep: the size curves and the fit
    let sw = entry("sw");
    let id = sw["id"].as_i64().unwrap().to_string();
    let html_path = fx.dir.join("sweep.html");
    ok(
        wr(&db, &["report", &id, "-o", html_path.to_str().unwrap()]),
        "report of a sweep",
    );
    let html = read(&html_path);
    let p = format!("run-{id}");
    let ids = chart_ids(&html);
    assert!(ids.starts_with(&[format!("{p}-sweep-rate"), format!("{p}-sweep-latency")]));
    let values = table_values(&html, &format!("{p}-sweep-rate"));
    for pt in sw["result"]["sweep"]["points"].as_array().unwrap() {
        assert!(values.contains(&f(&pt["bytes"])));
        assert!(values.contains(&f(&pt["one_way_mean_us"])));
    }
    let fit = &sw["result"]["sweep"]["fit"];
    if !fit.is_null() {
        assert!(html.contains("Hockney"));
    }
    let out = ok(wr(&db, &["show", &id]), "show of a sweep");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("one-way") && text.contains("Hockney fit"),
        "{text}"
    );
    assert!(!text.contains("goodput"), "{text}");
}

/// An rpm run over loopback (1 s phases, one flow each way), its JSON document in `path`.
fn rpm_json(path: &Path) -> Value {
    let fx = fixture();
    let args = ["rpm", "-t", "1", "-P", "1", "--json", "--no-store"];
    let out = ok(wr(&fx.db, &args), "an rpm run");
    std::fs::write(path, &out.stdout).unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn an_rpm_run_charts_its_udp_round_trips_and_one_way_delays() {
    let fx = fixture();
    let file = fx.dir.join("rpm.json");
    let doc = rpm_json(&file);
    let page = fx.dir.join("rpm.html");
    ok(
        wr(
            &fx.db,
            &[
                "report",
                file.to_str().unwrap(),
                "-o",
                page.to_str().unwrap(),
            ],
        ),
        "report of an rpm run",
    );
    let html = read(&page);
    let ids = chart_ids(&html);
    let id = |suffix: &str| {
        ids.iter()
            .find(|i| i.ends_with(suffix))
            .unwrap_or_else(|| panic!("no {suffix} chart: {ids:?}"))
            .clone()
    };
    let (udp, owd) = (id("-rpm-udp"), id("-rpm-owd"));
    // the tables hold the stored figures exactly: each phase's UDP percentiles and its
    // added delay each way
    let (udp_values, owd_values) = (table_values(&html, &udp), table_values(&html, &owd));
    for ph in doc["rpm"]["phases"].as_array().unwrap() {
        for k in ["samples", "p50_ms", "p90_ms", "p99_ms"] {
            let v = f(&ph["udp"][k]);
            assert!(udp_values.contains(&v), "{k} {v} not in {udp_values:?}");
        }
        for k in ["up_p50_ms", "up_p90_ms", "down_p50_ms", "down_p90_ms"] {
            let v = f(&ph["one_way"][k]);
            assert!(owd_values.contains(&v), "{k} {v} not in {owd_values:?}");
        }
    }
    // a point per UDP probe kept, and one each way per counted probe
    let chart = |cid: &str| {
        let start = html
            .find(&format!("<figure class=\"chart\" id=\"{cid}\""))
            .unwrap();
        let fig = &html[start..];
        fig[..fig.find("</figure>").unwrap()].to_string()
    };
    let count = |k: &str| -> usize {
        doc["rpm"]["phases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[k].as_array().map_or(0, Vec::len))
            .sum()
    };
    assert!(count("udp_series") >= 8, "{doc}");
    assert_eq!(chart(&udp).matches("<circle").count(), count("udp_series"));
    assert_eq!(
        chart(&owd).matches("<circle").count(),
        2 * count("one_way_series")
    );
    assert!(html.contains("One-way delay added, each direction"));
    assert_self_contained(&html);
}

#[test]
fn bad_operands_are_one_line_errors() {
    let fx = fixture();
    let db = fx.db.to_str().unwrap();
    let missing = fx.dir.join("nothing-here.json");
    let cases: [(&[&str], i32); 5] = [
        (&["report", "--db", db, "999999", "-o", "-"], 1),
        (&["report", "--db", db, "no-such-label", "-o", "-"], 1),
        (&["report", missing.to_str().unwrap(), "-o", "-"], 1),
        (&["report", "--db", db, "", "-o", "-"], 2),
        (&["report", "--db", db, "p1", "--svg", db, "-o", "-"], 2),
    ];
    for (args, code) in cases {
        let out = wr(&fx.db, args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("wirerate: "), "{err}");
        assert!(!err.contains("panicked"));
    }
    let out = wr(&fx.db, &["report"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn compare_json_of_stored_runs_validates_against_its_schema() {
    let fx = fixture();
    let schema: Value =
        serde_json::from_str(include_str!("../../../../schema/compare.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let p1_id = fx.p1[0]["id"].as_i64().unwrap().to_string();
    let cases: [&[&str]; 3] = [
        &["compare", "p1", "p2", "--json"],
        &["compare", "p1", "p2", "--json", "--fail-if-slower", "50"],
        &["compare", &p1_id, "p2", "--json"],
    ];
    for args in cases {
        let out = wr(&fx.db, args);
        assert!(
            matches!(out.status.code(), Some(0 | 3)),
            "{args:?}: {}",
            stderr(&out)
        );
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&doc)
            .map(|e| format!("{e} at {}", e.instance_path))
            .collect();
        assert!(errors.is_empty(), "{args:?}: {errors:#?}");
        assert!(doc["metrics"]["goodput_bps"].is_object());
        // strict enough to catch a broken document
        for (path, bad) in [
            ("/p_value", serde_json::json!(1.5)),
            ("/change", serde_json::json!("faster")),
            ("/metrics/goodput_bps/a/n", serde_json::json!("two")),
            ("/metrics/speed", serde_json::json!({})),
        ] {
            let mut broken = doc.clone();
            let (parent, key) = path.rsplit_once('/').unwrap();
            broken.pointer_mut(parent).unwrap()[key] = bad;
            assert!(!validator.is_valid(&broken), "{path} accepted");
        }
    }
}

mod browser {
    //! The report in Debian's chromium, headless: a screenshot that shows charts, and a
    //! DOM in which the page's own script ran and counted them, with no console message.

    use super::*;

    fn chromium() -> Option<PathBuf> {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .flat_map(|d| [d.join("chromium"), d.join("chromium-browser")])
            .find(|p| p.is_file())
    }

    /// Runs chromium headless on `page` with `extra` arguments, in a fresh profile, killed
    /// by PID after a minute.
    fn headless(browser: &Path, page: &Path, extra: &[&str]) -> Output {
        let profile = tempfile::tempdir().unwrap();
        let url = format!("file://{}", page.display());
        let child = Command::new(browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-quic",
                "--enable-logging=stderr",
                "--v=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(extra)
            .arg(&url)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn chromium");
        wait_bounded(child, LIMIT)
    }

    /// What the page printed to its console (chromium logs each as a CONSOLE line).
    fn console(out: &Output) -> Vec<String> {
        stderr(out)
            .lines()
            .filter(|l| l.contains(":CONSOLE"))
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn chromium_draws_the_report_without_a_console_message() {
        let Some(browser) = chromium() else {
            eprintln!(
                "SKIPPED: chromium is not installed (apt-get install chromium; .ci/run installs it)"
            );
            return;
        };
        let fx = fixture();
        let page = fx.dir.join("browser.html");
        ok(
            wr(
                &fx.db,
                &["report", "p1", "p2", "-o", page.to_str().unwrap()],
            ),
            "report for the browser",
        );
        let html = read(&page);
        let charts = chart_ids(&html).len();
        assert!(charts >= 5);

        // the DOM after the page's script ran: the title, and the charts it counted
        let dom = headless(&browser, &page, &["--dump-dom"]);
        let text = String::from_utf8_lossy(&dom.stdout);
        assert!(
            text.contains("<title>wirerate report: p2 against p1</title>"),
            "{text:.300}"
        );
        assert!(
            text.contains(&format!("data-charts-ready=\"{charts}\"")),
            "the page's script did not run or counted differently; stderr: {}",
            stderr(&dom)
        );
        assert_eq!(console(&dom), Vec::<String>::new());

        // the screenshot: the expected size, and charts in it, not a blank page
        let png = fx.dir.join("browser.png");
        let shot = headless(
            &browser,
            &page,
            &[
                &format!("--screenshot={}", png.display()),
                "--window-size=1200,2000",
            ],
        );
        assert!(png.is_file(), "no screenshot: {}", stderr(&shot));
        let decoder =
            png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&png).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (1200, 2000));
        let channels = info.color_type.samples();
        let pixels: Vec<&[u8]> = buf[..info.buffer_size()].chunks(channels).collect();
        let mut colours: Vec<[u8; 3]> = pixels.iter().map(|p| [p[0], p[1], p[2]]).collect();
        let not_white = colours.iter().filter(|c| **c != [255, 255, 255]).count();
        colours.sort_unstable();
        colours.dedup();
        assert!(
            colours.len() >= 16,
            "{} colours: a blank page",
            colours.len()
        );
        // text, axes and marks cover a few percent of the page at least
        assert!(
            not_white * 100 >= pixels.len() * 2,
            "{not_white} of {} pixels drawn",
            pixels.len()
        );
        // the palette's first colour (A's marks) is somewhere on the page
        assert!(
            pixels
                .iter()
                .any(|p| p[0] == 0x00 && p[1] == 0x72 && p[2] == 0xB2),
            "no mark in the first series' colour"
        );
    }

    #[test]
    fn chromium_draws_rr_and_sweep_reports_without_a_console_message() {
        let Some(browser) = chromium() else {
            eprintln!("SKIPPED: chromium is not installed");
            return;
        };
        let fx = fixture();
        let rr = fx.dir.join("browser-rr.json");
        let out = ok(
            wr(&fx.db, &["rr", "-t", "0.5", "--json", "--no-store"]),
            "an rr run",
        );
        std::fs::write(&rr, &out.stdout).unwrap();
        let sweep = fx.dir.join("browser-sweep.json");
        let args = [
            "sweep",
            "--max",
            "1024",
            "--point-time",
            "0.002",
            "--trials",
            "2",
            "--json",
            "--no-store",
        ];
        let out = ok(wr(&fx.db, &args), "a sweep");
        std::fs::write(&sweep, &out.stdout).unwrap();
        let page = fx.dir.join("browser-rr.html");
        let args = [
            "report",
            rr.to_str().unwrap(),
            sweep.to_str().unwrap(),
            "-o",
            page.to_str().unwrap(),
        ];
        ok(wr(&fx.db, &args), "report of an rr run and a sweep");
        let ids = chart_ids(&read(&page));
        assert!(ids.iter().any(|i| i.ends_with("-rr-cdf")), "{ids:?}");
        assert!(ids.iter().any(|i| i.ends_with("-sweep-latency")), "{ids:?}");
        let dom = headless(&browser, &page, &["--dump-dom"]);
        let text = String::from_utf8_lossy(&dom.stdout);
        assert!(
            text.contains(&format!("data-charts-ready=\"{}\"", ids.len())),
            "the page's script did not run; stderr: {}",
            stderr(&dom)
        );
        assert_eq!(console(&dom), Vec::<String>::new());
    }

    #[test]
    fn chromium_draws_an_rpm_report_without_a_console_message() {
        let Some(browser) = chromium() else {
            eprintln!("SKIPPED: chromium is not installed");
            return;
        };
        let fx = fixture();
        let file = fx.dir.join("browser-rpm.json");
        rpm_json(&file);
        let page = fx.dir.join("browser-rpm.html");
        let args = [
            "report",
            file.to_str().unwrap(),
            "-o",
            page.to_str().unwrap(),
        ];
        ok(wr(&fx.db, &args), "report of an rpm run");
        let ids = chart_ids(&read(&page));
        for suffix in [
            "-rpm-time",
            "-rpm-cdf",
            "-rpm-phases",
            "-rpm-udp",
            "-rpm-owd",
        ] {
            assert!(ids.iter().any(|i| i.ends_with(suffix)), "{suffix}: {ids:?}");
        }
        let dom = headless(&browser, &page, &["--dump-dom"]);
        let text = String::from_utf8_lossy(&dom.stdout);
        assert!(
            text.contains(&format!("data-charts-ready=\"{}\"", ids.len())),
            "the page's script did not run; stderr: {}",
            stderr(&dom)
        );
        assert_eq!(console(&dom), Vec::<String>::new());
    }

    #[test]
    fn the_console_check_sees_a_script_error() {
        let Some(browser) = chromium() else {
            eprintln!("SKIPPED: chromium is not installed");
            return;
        };
        let page = fixture().dir.join("broken.html");
        std::fs::write(
            &page,
            "<!DOCTYPE html><html><head><title>t</title></head><body>\
             <script>notDefinedAnywhere();</script></body></html>",
        )
        .unwrap();
        let out = headless(&browser, &page, &["--dump-dom"]);
        let lines = console(&out);
        assert!(
            lines.iter().any(|l| l.contains("notDefinedAnywhere")),
            "chromium's log no longer shows console errors: {}",
            stderr(&out)
        );
    }
}
