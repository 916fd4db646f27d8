//! Monitoring end to end: `serve --metrics` counting what the server decides, the docs,
//! alert rules and dashboard naming metrics that exist, the alert rules' promtool unit
//! tests, and a real Prometheus scraping /probe and storing the series. Needs Debian's
//! `prometheus` package; the tests that use it skip with a message when it is missing,
//! unless WIRERATE_REQUIRE_PROMETHEUS is set (CI sets it, having installed the package).

use crate::common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::history::{step_started_unix_s, tx_history_shifted, AFTER_BPS, BEFORE_BPS};
use common::prom::{
    exporter, families, get, have_prometheus, promtool_check, repo, url_encode, value, Prometheus,
    SCRAPE,
};
use common::{free_port, run, wait_listening, ServerProc};

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
    let handshakes =
        |body: &str| value(body, "wirerate_server_refused_total{reason=\"handshake\"}");
    let deadline = Instant::now() + Duration::from_secs(5);
    let body = loop {
        let (status, body) = get(metrics, "/metrics", &[]);
        assert_eq!(status, 200);
        let served = value(&body, "wirerate_server_tests_served_total");
        let junk = handshakes(&body);
        if (served == Some(1.0) && junk == Some(2.0)) || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        value(&body, "wirerate_server_tests_served_total"),
        Some(1.0),
        "{body}"
    );
    // two handshakes refused: the check that the server listens (a connection closed
    // without a word) and the HTTP request, which is no preamble (not "other")
    assert_eq!(handshakes(&body), Some(2.0), "{body}");
    assert_eq!(
        value(&body, "wirerate_server_refused_total{reason=\"other\"}"),
        Some(0.0),
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
    // a link rate, so the link's figure is written; a bidirectional test, for its flows
    for q in [
        "seconds=0.5&link=100G",
        "seconds=0.5&udp=1&bitrate=20M&link=100G",
        "seconds=0.5&bidir=true",
        "seconds=2&kind=rpm",
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
    // the last change's families are written only for a series with a change, which three
    // probes are not: exporter.rs writes them from a history with one; an rpm probe's
    // qdisc families only where an end's interface has a qdisc (lo has none), which
    // wirerate-prom's unit tests cover
    let loopback_lacks = [
        "wirerate_diagnosis_info",
        "wirerate_wire_efficiency_ratio",
        "wirerate_rpm_client_qdisc_backlog_bytes",
        "wirerate_rpm_client_qdisc_drops",
        "wirerate_rpm_server_qdisc_backlog_bytes",
        "wirerate_rpm_server_qdisc_drops",
        "wirerate_history_last_change_ratio",
        "wirerate_history_last_change_ci95_low_ratio",
        "wirerate_history_last_change_ci95_high_ratio",
        "wirerate_history_last_change_p_value",
        "wirerate_history_last_change_timestamp_seconds",
        "wirerate_history_last_change_info",
    ];
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
        "wirerate_history_level",
        "wirerate_history_last_change_ratio",
        "wirerate_rpm",
        "wirerate_latency_seconds",
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
    let config = [
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
    .join("\n");
    let mut prometheus = Prometheus::start(dir.path(), &config);
    let web = prometheus.web;
    let found = prometheus.wait_for(
        "/api/v1/query?query=wirerate_probe_success",
        Duration::from_secs(60),
        |v| v["data"]["result"].as_array()?.first().cloned(),
    );
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

/// `serve --metrics` with users: a wrong password is a failed login and a `login` refusal, a
/// test over the duration cap a `limits` one; the right password's test is served.
#[test]
fn serve_metrics_counts_failed_logins_and_refusals_by_limits() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    common::add_user(&users, "ann", "right horse");
    let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let m = metrics.to_string();
    let state = dir.path().join("state");
    let server = ServerProc::start(&[
        "--tls",
        "--state-dir",
        state.to_str().unwrap(),
        "--users",
        users.to_str().unwrap(),
        "--max-duration",
        "2",
        "--metrics",
        &m,
    ]);
    wait_listening(metrics, "the server's metrics");
    let known = dir.path().join("known_servers");
    let client = |password: &str, seconds: &str| {
        let mut c = common::wr();
        c.args(["run", "127.0.0.1", "-p", &server.port.to_string(), "--tls"])
            .args(["--known-servers", known.to_str().unwrap(), "--user", "ann"])
            .args(["-t", seconds, "--no-store"])
            .env("WIRERATE_PASSWORD", password)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        common::wait_bounded(c.spawn().unwrap(), Duration::from_secs(60))
    };
    assert!(!client("wrong", "0.5").status.success());
    assert!(!client("right horse", "10").status.success());
    let ok = client("right horse", "0.5");
    assert!(ok.status.success(), "{}", common::stderr(&ok));
    let deadline = Instant::now() + Duration::from_secs(5);
    let body = loop {
        let body = get(metrics, "/metrics", &[]).1;
        if value(&body, "wirerate_server_tests_served_total") == Some(1.0)
            || Instant::now() > deadline
        {
            break body;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let refused = |r: &str| {
        value(
            &body,
            &format!("wirerate_server_refused_total{{reason=\"{r}\"}}"),
        )
    };
    assert_eq!(
        value(&body, "wirerate_server_logins_failed_total"),
        Some(1.0),
        "{body}"
    );
    assert_eq!(refused("login"), Some(1.0), "{body}");
    assert_eq!(refused("limits"), Some(1.0), "{body}");
    assert_eq!(
        value(&body, "wirerate_server_tests_served_total"),
        Some(1.0),
        "{body}"
    );
    assert_eq!(
        value(&body, "wirerate_server_tests_failed_total"),
        Some(0.0),
        "{body}"
    );
}

/// The chain of a level shift, end to end: a history whose goodput fell 26 % an hour ago
/// (imported), an exporter with --db on it, a real Prometheus scraping its /metrics with
/// monitoring/alerts.yml loaded: WirerateHistoryGoodputDrop fires for that pair, with the
/// ratio as its value, and not for the flat pair.
#[test]
fn prometheus_alerts_on_a_drop_in_the_stored_history() {
    if !have_prometheus("prometheus_alerts_on_a_drop_in_the_stored_history") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let db = db.to_str().unwrap();
    // the drop's first run started an hour ago
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let hour_ago = (now - 3600.0).floor();
    tx_history_shifted(dir.path(), db, hour_ago - step_started_unix_s());
    let (_e, addr) = exporter("127.0.0.1", &["--db", db]);
    let rules = repo().join("monitoring/alerts.yml");
    let config = [
        "global:",
        "  scrape_interval: 1s",
        "  evaluation_interval: 1s",
        "rule_files:",
        &format!("  - '{}'", rules.display()),
        "scrape_configs:",
        "  - job_name: wirerate-exporter",
        "    static_configs:",
        &format!("      - targets: ['{addr}']"),
    ]
    .join("\n");
    let mut prometheus = Prometheus::start(dir.path(), &config);
    let alert = prometheus.wait_for("/api/v1/alerts", Duration::from_secs(60), |v| {
        v["data"]["alerts"]
            .as_array()?
            .iter()
            .find(|a| a["labels"]["alertname"] == "WirerateHistoryGoodputDrop")
            .cloned()
    });
    let labels = &alert["labels"];
    assert_eq!(
        (
            &labels["client_host"],
            &labels["server_host"],
            &labels["label"]
        ),
        (&"alpha".into(), &"beta".into(), &"tx".into()),
        "{alert}"
    );
    assert_eq!(alert["state"], "firing", "{alert}");
    let ratio: f64 = alert["value"].as_str().unwrap().parse().unwrap();
    let want = AFTER_BPS / BEFORE_BPS - 1.0;
    assert!((ratio - want).abs() < 0.015, "{ratio} against {want}");
    let (_, all) = get(prometheus.web, "/api/v1/alerts", &[]);
    assert!(!all.contains("\"gamma\""), "{all}");
}
