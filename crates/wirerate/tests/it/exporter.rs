//! `wirerate exporter` end to end: a real server and exporter on loopback, /probe's answers
//! and refusals, and every exposition checked by `promtool check metrics` (skipped with a
//! message when Prometheus' tools are missing, unless WIRERATE_REQUIRE_PROMETHEUS is set).

use crate::common;

use std::time::{Duration, Instant};

use common::history::{step_started_unix_s, tx_history, AFTER_BPS, BEFORE_BPS};
use common::prom::{exporter, get, have_prometheus, promtool_check, value, SCRAPE};
use common::{free_port, run, ServerProc};

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

/// A server busy with another client's test is not waited out: a probe, of either kind,
/// retries it a quarter of the margin (0.25 s) and fails, well inside the scrape.
#[test]
fn a_probe_of_a_server_busy_with_another_test_fails_within_the_margin() {
    let metrics = std::net::SocketAddr::from(([127, 0, 0, 1], free_port()));
    let m = metrics.to_string();
    let server = ServerProc::start(&["--metrics", &m]);
    common::wait_listening(metrics, "the server's metrics");
    let target = format!("127.0.0.1:{}", server.port);
    let (_e, addr) = exporter(&target, &[]);
    let p = server.port.to_string();
    let client = common::spawn_quiet(&["run", "127.0.0.1", "-p", &p, "-t", "6", "--no-store"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while value(
        &get(metrics, "/metrics", &[]).1,
        "wirerate_server_active_tests",
    ) != Some(1.0)
    {
        assert!(
            Instant::now() < deadline,
            "the client's test never held the slot"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, body) = get(
        addr,
        &format!("/probe?target={target}&seconds=1"),
        &[SCRAPE],
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(value(&body, "wirerate_probe_success"), Some(0.0), "{body}");
    let took = value(&body, "wirerate_probe_duration_seconds").unwrap();
    assert!((0.2..1.0).contains(&took), "{took}");
    // so does an rpm probe's first phase (its later ones wait for the slot their phase
    // before frees)
    let (status, body) = get(
        addr,
        &format!("/probe?target={target}&kind=rpm&seconds=2"),
        &[SCRAPE],
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(value(&body, "wirerate_probe_success"), Some(0.0), "{body}");
    let took = value(&body, "wirerate_probe_duration_seconds").unwrap();
    assert!((0.2..1.0).contains(&took), "{took}");
    let out = common::wait_bounded(client, Duration::from_secs(30));
    assert!(out.status.success(), "{}", common::stderr(&out));
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

/// An rpm probe is four tests, each connecting and reporting: the scrape timeout less a
/// margin for each bounds its phases, and the whole probe answers within the scrape.
#[test]
fn the_scrape_timeout_bounds_an_rpm_probe() {
    let _turn = common::heavy();
    let server = ServerProc::start(&[]);
    let target = format!("127.0.0.1:{}", server.port);
    let (_e, addr) = exporter(&target, &[]);
    let started = Instant::now();
    let (status, body) = get(
        addr,
        &format!("/probe?target={target}&kind=rpm&seconds=30"),
        &[("X-Prometheus-Scrape-Timeout-Seconds", "7")],
    );
    let took = started.elapsed().as_secs_f64();
    assert_eq!(status, 200, "{body}");
    assert_eq!(value(&body, "wirerate_probe_success"), Some(1.0), "{body}");
    // 7 s less a 1 s margin for each of the four phases: 3 s of phases, not 30
    let probe = value(&body, "wirerate_probe_duration_seconds").unwrap();
    assert!(probe >= 3.0, "{probe}");
    assert!(took < 7.0, "the probe took {took:.2} s of a 7 s scrape");
}

/// `kind=rpm`: `wirerate rpm`'s four phases against a real server, the probe's seconds
/// split between them, exported in base units; a budget under four phases' least is a 400.
#[test]
fn an_rpm_probe_exports_responsiveness_per_phase() {
    let server = ServerProc::start(&[]);
    let target = format!("127.0.0.1:{}", server.port);
    let (_e, addr) = exporter(&target, &[]);
    let started = Instant::now();
    let (status, body) = get(
        addr,
        &format!("/probe?target={target}&kind=rpm&seconds=2&parallel=2"),
        &[SCRAPE],
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(value(&body, "wirerate_probe_success"), Some(1.0), "{body}");
    assert!(
        value(&body, "wirerate_rpm").is_some_and(|r| r > 0.0),
        "{body}"
    );
    assert!(
        body.contains("wirerate_rpm_confidence_info{confidence=\""),
        "{body}"
    );
    // 4 phases of 0.5 s, connecting and reporting included
    let took = value(&body, "wirerate_probe_duration_seconds").unwrap();
    assert!((2.0..8.0).contains(&took), "{took}");
    assert!(started.elapsed() < Duration::from_secs(10));
    for phase in ["idle", "download", "upload", "both"] {
        let p50 = value(
            &body,
            &format!("wirerate_latency_seconds{{phase=\"{phase}\",kind=\"connect\",stat=\"p50\"}}"),
        );
        assert!(p50.is_some_and(|s| s > 0.0 && s < 1.0), "{phase}: {body}");
    }
    for (phase, dir) in [
        ("download", "download"),
        ("upload", "upload"),
        ("both", "upload"),
    ] {
        let rate = value(
            &body,
            &format!(
                "wirerate_rpm_goodput_bytes_per_second{{phase=\"{phase}\",direction=\"{dir}\"}}"
            ),
        );
        assert!(rate.is_some_and(|r| r > 0.0), "{phase} {dir}: {body}");
    }
    // an rpm probe's figures are its phases', not the last phase's test
    assert!(
        !body.contains("wirerate_goodput_bytes_per_second"),
        "{body}"
    );
    if have_prometheus("an_rpm_probe_exports_responsiveness_per_phase") {
        promtool_check(&body, "an rpm probe");
    }
    for (q, timeout, words) in [
        ("kind=rpm", "2.5", "4 phases need at least 2 s"),
        ("kind=rpm&seconds=1", "10", "4 phases need at least 2 s"),
        ("kind=rpm&udp=1", "10", "kind=rpm takes no udp"),
        ("kind=ping", "10", "not run or rpm"),
    ] {
        let (status, body) = get(
            addr,
            &format!("/probe?target={target}&{q}"),
            &[("X-Prometheus-Scrape-Timeout-Seconds", timeout)],
        );
        assert_eq!(status, 400, "{q}: {body}");
        assert!(body.contains(words), "{q}: {body}");
        assert_eq!(body.trim_end().lines().count(), 1, "{q}: {body}");
    }
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

#[test]
fn beyond_max_probes_another_target_waits_its_turn() {
    let (a, b) = (ServerProc::start(&[]), ServerProc::start(&[]));
    let (ta, tb) = (
        format!("127.0.0.1:{}", a.port),
        format!("127.0.0.1:{}", b.port),
    );
    let (_e, addr) = exporter(&format!("{ta},{tb}"), &["--max-probes", "1"]);
    let first = {
        let path = format!("/probe?target={ta}&seconds=3");
        std::thread::spawn(move || get(addr, &path, &[]))
    };
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut other = (0, String::new());
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        other = get(addr, &format!("/probe?target={tb}&seconds=0.5"), &[]);
        if other.0 == 503 {
            break;
        }
    }
    assert_eq!(other.0, 503, "{}", other.1);
    assert!(other.1.contains("--max-probes"), "{}", other.1);
    assert_eq!(first.join().unwrap().0, 200);
    let (status, body) = get(addr, &format!("/probe?target={tb}&seconds=0.5"), &[]);
    assert_eq!(
        (status, value(&body, "wirerate_probe_success")),
        (200, Some(1.0)),
        "{body}"
    );
    let (_, own) = get(addr, "/metrics", &[]);
    assert!(
        value(
            &own,
            "wirerate_exporter_probes_refused_total{reason=\"busy\"}"
        )
        .unwrap()
            >= 1.0
    );
}

/// With --db, /metrics shows the change points of the stored history: the seeds' 26 % Tx
/// drop (imported) with its sign, size, interval, p-value and start; the flat pair without
/// a change; the scan kept until a probe stores a run.
#[test]
fn with_a_db_metrics_show_the_historys_change_points() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let db = db.to_str().unwrap();
    let step_id = tx_history(dir.path(), db);
    let server = ServerProc::start(&[]);
    let target = format!("127.0.0.1:{}", server.port);
    let (_e, addr) = exporter(&target, &["--db", db, "--changes-every", "0"]);
    let (status, body) = get(addr, "/metrics", &[]);
    assert_eq!(status, 200);
    let series = |family: &str, client: &str| {
        let labels = format!(
            "{{label=\"tx\",client_host=\"{client}\",server_host=\"beta\",metric=\"goodput_bytes_per_second\"}}"
        );
        value(&body, &format!("wirerate_history_{family}{labels}"))
    };
    assert_eq!(series("runs", "alpha"), Some(40.0), "{body}");
    assert_eq!(series("changes", "alpha"), Some(1.0), "{body}");
    let ratio = series("last_change_ratio", "alpha").unwrap();
    let want = AFTER_BPS / BEFORE_BPS - 1.0;
    assert!((ratio - want).abs() < 0.015, "{ratio} against {want}");
    let (low, high) = (
        series("last_change_ci95_low_ratio", "alpha").unwrap(),
        series("last_change_ci95_high_ratio", "alpha").unwrap(),
    );
    assert!(
        low <= ratio && ratio <= high && high < 0.0,
        "{low} {ratio} {high}"
    );
    assert!(series("last_change_p_value", "alpha").unwrap() < 0.01);
    assert_eq!(
        series("last_change_timestamp_seconds", "alpha"),
        Some(step_started_unix_s())
    );
    // the level now: the median since the drop, in bytes per second
    let level = series("level", "alpha").unwrap();
    assert!((level / (AFTER_BPS / 8.0) - 1.0).abs() < 0.01, "{level}");
    assert!(
        body.contains(&format!(
            "server_host=\"beta\",metric=\"goodput_bytes_per_second\",run_id=\"{step_id}\"}} 1"
        )),
        "{body}"
    );
    // the flat pair: its level, no change, no last change
    assert_eq!(series("changes", "gamma"), Some(0.0));
    assert_eq!(series("last_change_ratio", "gamma"), None);
    let flat = series("level", "gamma").unwrap();
    assert!((flat / (BEFORE_BPS / 8.0) - 1.0).abs() < 0.02, "{flat}");
    if have_prometheus("with_a_db_metrics_show_the_historys_change_points") {
        promtool_check(&body, "the history's change points");
    }
    // nothing stored since: the scan is not made again
    let scans = |b: &str| value(b, "wirerate_history_scans_total");
    assert_eq!(scans(&body), Some(1.0));
    let (_, again) = get(addr, "/metrics", &[]);
    assert_eq!(scans(&again), Some(1.0), "{again}");
    // a probe stores a run (no module: labelled by its kind): the next scrape scans again
    // and shows its series
    let (status, probe) = get(
        addr,
        &format!("/probe?target={target}&seconds=0.5"),
        &[SCRAPE],
    );
    assert_eq!(
        (status, value(&probe, "wirerate_probe_success")),
        (200, Some(1.0))
    );
    let (_, after) = get(addr, "/metrics", &[]);
    assert_eq!(scans(&after), Some(2.0), "{after}");
    assert!(
        after.lines().any(
            |l| l.starts_with("wirerate_history_runs{label=\"probe:tcp\",") && l.ends_with(" 1")
        ),
        "{after}"
    );
    assert_eq!(value(&after, "wirerate_history_scan_success"), Some(1.0));
}
