//! `wirerate exporter` and `serve --metrics` end to end: real servers and exporters on
//! loopback, their answers checked by `promtool`, and a real Prometheus scraping /probe and
//! storing the series. Needs Debian's `prometheus` package (promtool and prometheus); the
//! tests that use it skip with a message when it is missing, unless
//! WIRERATE_REQUIRE_PROMETHEUS is set (CI sets it, having installed the package).

mod common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, run, wait_listening, wr, ServerProc};

/// A child process killed by PID when the test ends, however it ends.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `wirerate exporter` on a free loopback port.
fn exporter(allow: &str, extra: &[&str]) -> (Proc, SocketAddr) {
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let listen = addr.to_string();
    let child = wr()
        .args(["exporter", "--listen", &listen, "--allow", allow])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn exporter");
    let p = Proc(child);
    wait_listening(addr, "exporter");
    (p, addr)
}

/// One GET; the status and the body.
fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    // HTTP/1.0: the answer is never chunked, and ends with the connection
    let mut req = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read the answer");
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {out:?}"));
    let body = out
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

/// The value of one series (name and labels as written) in an exposition.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.parse().expect("a number"))
}

/// The family names an exposition declares.
fn families(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect()
}

/// Whether Prometheus' tools are here; false (with a message) when a test should skip.
fn have_prometheus(test: &str) -> bool {
    let found = ["promtool", "prometheus"].iter().all(|p| {
        Command::new(p)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok()
    });
    if !found {
        assert!(
            std::env::var_os("WIRERATE_REQUIRE_PROMETHEUS").is_none(),
            "{test}: WIRERATE_REQUIRE_PROMETHEUS is set but promtool or prometheus is missing"
        );
        eprintln!(
            "SKIPPED {test}: Prometheus is not installed (Debian: apt-get install prometheus)"
        );
    }
    found
}

/// `promtool check metrics` over an exposition: its lint findings fail the test.
fn promtool_check(text: &str, what: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn promtool");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = common::wait_bounded(child, Duration::from_secs(30));
    assert!(
        out.status.success(),
        "promtool check metrics on {what}: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const SCRAPE: (&str, &str) = ("X-Prometheus-Scrape-Timeout-Seconds", "10");

#[test]
fn a_probe_measures_an_allowed_server_and_answers_valid_metrics() {
    let server = ServerProc::start(&[]);
    let target = format!("127.0.0.1:{}", server.port);
    let (_e, addr) = exporter(&target, &[]);
    let (status, tcp) = get(
        addr,
        &format!("/probe?target={target}&seconds=1"),
        &[SCRAPE],
    );
    assert_eq!(status, 200, "{tcp}");
    assert_eq!(value(&tcp, "wirerate_probe_success"), Some(1.0), "{tcp}");
    assert!(value(&tcp, "wirerate_goodput_bytes_per_second").unwrap() > 0.0);
    assert!(value(&tcp, "wirerate_received_bytes").unwrap() > 0.0);
    assert!(value(&tcp, "wirerate_tcp_rtt_seconds").unwrap() > 0.0);
    assert!(
        tcp.contains("wirerate_test_info{protocol=\"tcp\",direction=\"forward\",parallel=\"1\"} 1")
    );
    let path = format!("/probe?target={target}&seconds=1&udp=true&bitrate=50M&reverse=1");
    let (status, udp) = get(addr, &path, &[SCRAPE]);
    assert_eq!(status, 200, "{udp}");
    assert_eq!(value(&udp, "wirerate_probe_success"), Some(1.0), "{udp}");
    let loss = value(&udp, "wirerate_udp_loss_ratio").unwrap();
    assert!((0.0..=1.0).contains(&loss));
    assert!(udp.contains("direction=\"reverse\""));
    let (status, own) = get(addr, "/metrics", &[]);
    assert_eq!(status, 200);
    assert_eq!(
        value(&own, "wirerate_exporter_probes_total{result=\"success\"}"),
        Some(2.0),
        "{own}"
    );
    if have_prometheus("a_probe_measures_an_allowed_server_and_answers_valid_metrics") {
        promtool_check(&tcp, "a TCP probe");
        promtool_check(&udp, "a UDP probe");
        promtool_check(&own, "the exporter's /metrics");
    }
}

#[test]
fn disallowed_targets_and_bad_parameters_are_refused_with_one_line() {
    let allowed = format!("127.0.0.1:{}", free_port());
    let (_e, addr) = exporter(&allowed, &["--max-seconds", "30"]);
    let (status, body) = get(addr, "/probe?target=192.0.2.1&seconds=1", &[]);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("not allowed"));
    // another port of an allowed host is another target
    let (status, _) = get(addr, "/probe?target=127.0.0.1:1", &[]);
    assert_eq!(status, 403);
    for (q, words) in [
        (
            format!("target={allowed}&seconds=-1"),
            "not a positive number",
        ),
        (
            format!("target={allowed}&seconds=abc"),
            "not a positive number",
        ),
        (format!("target={allowed}&seconds=31"), "--max-seconds"),
        (format!("target={allowed}&parallel=many"), "parallel"),
        (format!("target={allowed}&window=lots"), "lots"),
        (format!("target={allowed}&module=wan"), "no module 'wan'"),
        ("seconds=1".to_string(), "target is missing"),
    ] {
        let (status, body) = get(addr, &format!("/probe?{q}"), &[]);
        assert_eq!(status, 400, "{q}: {body}");
        assert!(body.contains(words), "{q}: {body}");
        assert_eq!(body.trim_end().lines().count(), 1, "{q}: {body}");
    }
    // a scrape timeout that leaves no time for a test
    let (status, body) = get(
        addr,
        &format!("/probe?target={allowed}"),
        &[("X-Prometheus-Scrape-Timeout-Seconds", "1")],
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("scrape_timeout"), "{body}");
    assert_eq!(get(addr, "/nothing", &[]).0, 404);
    let (_, own) = get(addr, "/metrics", &[]);
    let refused = |r: &str| {
        value(
            &own,
            &format!("wirerate_exporter_probes_refused_total{{reason=\"{r}\"}}"),
        )
    };
    assert_eq!(refused("forbidden"), Some(2.0), "{own}");
    assert_eq!(refused("bad_request"), Some(8.0), "{own}");
}

#[test]
fn a_probe_of_a_silent_target_fails_as_a_metric() {
    let target = format!("127.0.0.1:{}", free_port());
    let (_e, addr) = exporter(&target, &[]);
    let started = Instant::now();
    let (status, body) = get(
        addr,
        &format!("/probe?target={target}&seconds=1"),
        &[SCRAPE],
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(value(&body, "wirerate_probe_success"), Some(0.0), "{body}");
    assert!(!body.contains("wirerate_goodput"), "{body}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let (_, own) = get(addr, "/metrics", &[]);
    assert_eq!(
        value(&own, "wirerate_exporter_probes_total{result=\"failure\"}"),
        Some(1.0)
    );
}

#[test]
fn one_probe_per_target_runs_at_a_time() {
    let server = ServerProc::start(&[]);
    let target = format!("127.0.0.1:{}", server.port);
    let (_e, addr) = exporter(&target, &[]);
    let first = {
        let path = format!("/probe?target={target}&seconds=3");
        std::thread::spawn(move || get(addr, &path, &[]))
    };
    // the second asks while the first runs (its test lasts 3 s)
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut second = (0, String::new());
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        second = get(addr, &format!("/probe?target={target}&seconds=1"), &[]);
        if second.0 == 429 {
            break;
        }
    }
    assert_eq!(second.0, 429, "{}", second.1);
    assert!(second.1.contains("already running"));
    let (status, body) = first.join().unwrap();
    assert_eq!(
        (status, value(&body, "wirerate_probe_success")),
        (200, Some(1.0)),
        "{body}"
    );
    // free again once it ended
    let (status, body) = get(addr, &format!("/probe?target={target}&seconds=0.5"), &[]);
    assert_eq!(
        (status, value(&body, "wirerate_probe_success")),
        (200, Some(1.0)),
        "{body}"
    );
}

#[test]
fn the_scrape_timeout_bounds_the_test() {
    let server = ServerProc::start(&[]);
    let target = format!("127.0.0.1:{}", server.port);
    let (_e, addr) = exporter(&target, &["--timeout-margin", "1.5"]);
    let (status, body) = get(
        addr,
        &format!("/probe?target={target}&seconds=30"),
        &[("X-Prometheus-Scrape-Timeout-Seconds", "2.5")],
    );
    assert_eq!(status, 200, "{body}");
    let window = value(&body, "wirerate_test_window_seconds").unwrap();
    // 2.5 s less the 1.5 s margin: a 1 s test, not 30
    assert!(window > 0.5 && window < 1.5, "{window}");
}

#[test]
fn with_a_db_and_a_module_each_probe_is_stored_under_the_module() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("probes.db");
    let config = dir.path().join("exporter.toml");
    std::fs::write(&config, "[modules.short]\nseconds = 0.5\nparallel = 2\n").unwrap();
    let server = ServerProc::start(&[]);
    let target = format!("127.0.0.1:{}", server.port);
    let (_e, addr) = exporter(
        &target,
        &[
            "--db",
            db.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
    );
    let (status, body) = get(addr, &format!("/probe?target={target}&module=short"), &[]);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("parallel=\"2\""), "{body}");
    let out = run(
        &[
            "history",
            "--db",
            db.to_str().unwrap(),
            "--label",
            "short",
            "--json",
        ],
        Duration::from_secs(30),
    );
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["result"]["spec"]["parallel"], 2);
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[modules.x]\nsecnds = 1\n").unwrap();
    let out = run(
        &[
            "exporter",
            "--listen",
            "127.0.0.1:0",
            "--allow",
            "h",
            "--config",
            bad.to_str().unwrap(),
        ],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        common::stderr(&out).contains("secnds"),
        "{}",
        common::stderr(&out)
    );
}

/// `serve --metrics`: a test served, a junk connection refused, both counted.
#[test]
fn serve_metrics_counts_tests_bytes_and_refusals() {
    let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let m = metrics.to_string();
    let server = ServerProc::start(&["--metrics", &m, "--handshake-timeout", "0.5"]);
    wait_listening(metrics, "the server's metrics");
    let p = server.port.to_string();
    let out = run(
        &["run", "127.0.0.1", "-p", &p, "-n", "4M", "--no-store"],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    let mut junk = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    junk.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut sink = Vec::new();
    junk.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = junk.read_to_end(&mut sink);
    // the server logs (and counts) a test just after its client has the result
    let deadline = Instant::now() + Duration::from_secs(5);
    let body = loop {
        let (status, body) = get(metrics, "/metrics", &[]);
        assert_eq!(status, 200);
        let served = value(&body, "wirerate_server_tests_served_total");
        let junk = value(&body, "wirerate_server_refused_total{reason=\"handshake\"}");
        if (served == Some(1.0) && junk == Some(1.0)) || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        value(&body, "wirerate_server_tests_served_total"),
        Some(1.0),
        "{body}"
    );
    assert_eq!(
        value(&body, "wirerate_server_refused_total{reason=\"handshake\"}"),
        Some(1.0),
        "{body}"
    );
    assert!(value(&body, "wirerate_server_test_bytes_total").unwrap() >= f64::from(4u32 << 20));
    assert_eq!(value(&body, "wirerate_server_active_tests"), Some(0.0));
    assert_eq!(value(&body, "wirerate_server_test_slots"), Some(1.0));
    assert!(value(&body, "wirerate_server_pending_connections").is_some());
    if have_prometheus("serve_metrics_counts_tests_bytes_and_refusals") {
        promtool_check(&body, "serve --metrics");
    }
    drop(server);
}

/// Every family the exporter and the server write is in docs/monitoring.md, and every
/// `wirerate_` name the alert rules and the dashboard query is one of them.
#[test]
fn docs_alerts_and_dashboard_name_the_metrics_that_exist() {
    let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let m = metrics.to_string();
    let server = ServerProc::start(&["--metrics", &m]);
    wait_listening(metrics, "the server's metrics");
    let target = format!("127.0.0.1:{}", server.port);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("probes.db");
    let (_e, addr) = exporter(&target, &["--db", db.to_str().unwrap()]);
    let mut written = BTreeSet::new();
    // a link rate, so the wire model has one to compare with
    for q in [
        "seconds=0.5&link=100G",
        "seconds=0.5&udp=1&bitrate=20M&link=100G",
    ] {
        let (status, body) = get(addr, &format!("/probe?target={target}&{q}"), &[SCRAPE]);
        assert_eq!(status, 200, "{body}");
        written.extend(families(&body));
    }
    written.extend(families(&get(addr, "/metrics", &[]).1));
    written.extend(families(&get(metrics, "/metrics", &[]).1));
    let docs = std::fs::read_to_string(repo().join("docs/monitoring.md")).unwrap();
    let named = |text: &str| -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let b = text.as_bytes();
        let mut i = 0;
        while let Some(at) = text[i..].find("wirerate_") {
            let start = i + at;
            let end = start
                + b[start..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                    .count();
            out.insert(text[start..end].to_string());
            i = end;
        }
        out
    };
    let documented = named(&docs);
    for f in &written {
        assert!(
            documented.contains(f),
            "{f} is written but not in docs/monitoring.md"
        );
    }
    // written only with a verdict, and only where the wire model knows the path (not over
    // loopback's 64 KiB MTU): wirerate-prom's unit tests write them from a result that has them
    let loopback_lacks = ["wirerate_diagnosis_info", "wirerate_wire_efficiency_ratio"];
    let known: BTreeSet<String> = written
        .iter()
        .cloned()
        .chain(loopback_lacks.map(String::from))
        .collect();
    for (file, text) in [
        (
            "monitoring/alerts.yml",
            std::fs::read_to_string(repo().join("monitoring/alerts.yml")).unwrap(),
        ),
        (
            "monitoring/grafana-dashboard.json",
            std::fs::read_to_string(repo().join("monitoring/grafana-dashboard.json")).unwrap(),
        ),
        ("docs/monitoring.md", docs.clone()),
    ] {
        for n in named(&text) {
            assert!(
                known.contains(&n),
                "{file} names {n}, which no exporter writes"
            );
        }
    }
}

#[test]
fn the_dashboard_is_json_with_panels_on_probe_metrics() {
    let text = std::fs::read_to_string(repo().join("monitoring/grafana-dashboard.json")).unwrap();
    let d: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let panels = d["panels"].as_array().expect("panels");
    let exprs: Vec<String> = panels
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["expr"].as_str().map(str::to_string))
        .collect();
    for m in [
        "wirerate_goodput_bytes_per_second",
        "wirerate_tcp_rtt_seconds",
        "wirerate_udp_loss_ratio",
        "wirerate_probe_success",
    ] {
        assert!(exprs.iter().any(|e| e.contains(m)), "no panel queries {m}");
    }
    let notes = d["annotations"]["list"].as_array().expect("annotations");
    assert!(notes.iter().any(|a| a["expr"]
        .as_str()
        .is_some_and(|e| e.contains("wirerate_diagnosis_info"))));
}

#[test]
fn the_alert_rules_pass_promtool_and_their_unit_tests() {
    if !have_prometheus("the_alert_rules_pass_promtool_and_their_unit_tests") {
        return;
    }
    let dir = repo().join("monitoring");
    for args in [
        &["check", "rules", "alerts.yml"][..],
        &["test", "rules", "alerts_test.yml"],
    ] {
        let child = Command::new("promtool")
            .args(args)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = common::wait_bounded(child, Duration::from_secs(60));
        assert!(
            out.status.success(),
            "promtool {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A real Prometheus scrapes the exporter's /probe (relabelled as docs/monitoring.md
/// shows) and stores the series; its HTTP API returns them.
#[test]
fn prometheus_scrapes_a_probe_and_stores_its_series() {
    if !have_prometheus("prometheus_scrapes_a_probe_and_stores_its_series") {
        return;
    }
    let server = ServerProc::start(&[]);
    let target = format!("127.0.0.1:{}", server.port);
    let (_e, exporter_addr) = exporter(&target, &[]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        [
            "global:",
            "  scrape_interval: 5s",
            "  scrape_timeout: 4s",
            "scrape_configs:",
            "  - job_name: wirerate",
            "    metrics_path: /probe",
            "    params:",
            "      seconds: ['1']",
            "    static_configs:",
            &format!("      - targets: ['{target}']"),
            "    relabel_configs:",
            "      - source_labels: [__address__]",
            "        target_label: __param_target",
            "      - source_labels: [__param_target]",
            "        target_label: instance",
            "      - target_label: __address__",
            &format!("        replacement: '{exporter_addr}'"),
        ]
        .join("\n"),
    )
    .unwrap();
    let web = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let log_path = dir.path().join("prometheus.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={web}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn prometheus");
    let mut prometheus = Proc(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = String::new();
    let found = loop {
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            panic!("no wirerate_probe_success in Prometheus: {last}\nits log:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(500));
        if let Ok(Some(status)) = prometheus.0.try_wait() {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            panic!("prometheus exited ({status}):\n{log}");
        }
        if TcpStream::connect_timeout(&web, Duration::from_millis(200)).is_err() {
            continue;
        }
        let (status, body) = get(web, "/api/v1/query?query=wirerate_probe_success", &[]);
        last = body;
        if status != 200 {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&last).unwrap();
        if let Some(first) = v["data"]["result"].as_array().and_then(|r| r.first()) {
            break first.clone();
        }
    };
    assert_eq!(found["metric"]["instance"], target.as_str(), "{found}");
    assert_eq!(found["metric"]["job"], "wirerate");
    assert_eq!(found["value"][1], "1", "{found}");
    let (_, body) = get(
        web,
        "/api/v1/query?query=wirerate_goodput_bytes_per_second",
        &[],
    );
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let goodput: f64 = v["data"]["result"][0]["value"][1]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no goodput series: {body}"));
    assert!(goodput > 0.0, "{body}");
    // every query of the dashboard and its annotation is PromQL this Prometheus takes
    let text = std::fs::read_to_string(repo().join("monitoring/grafana-dashboard.json")).unwrap();
    let d: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut exprs: Vec<&str> = d["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap())
        .filter_map(|t| t["expr"].as_str())
        .collect();
    exprs.extend(
        d["annotations"]["list"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|a| a["expr"].as_str()),
    );
    for e in exprs {
        let q = e.replace("$job", "wirerate").replace("$instance", ".*");
        let (status, body) = get(web, &format!("/api/v1/query?query={}", url_encode(&q)), &[]);
        assert_eq!(status, 200, "{q}: {body}");
    }
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
