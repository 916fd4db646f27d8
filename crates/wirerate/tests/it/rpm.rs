//! `wirerate rpm` end to end over loopback: the four phases in order, load where a phase
//! loads, probes answered in every phase, ordered percentiles, the JSON against both
//! schemas, the run stored as kind `rpm`, usage errors.

use crate::common;

use std::time::Duration;

use common::{f, json, run, stderr, ServerProc};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(90);

fn assert_stats(s: &Value, what: &str) {
    let v: Vec<f64> = ["min_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms"]
        .iter()
        .map(|k| f(&s[*k]))
        .collect();
    assert!(v.windows(2).all(|w| w[0] <= w[1]), "{what}: {v:?}");
    assert!(v[0] > 0.0, "{what}: {v:?}");
    let tm = f(&s["trimmed_mean_ms"]);
    assert!(
        v[0] <= tm && tm <= v[4],
        "{what}: trimmed mean {tm} outside {v:?}"
    );
}

#[test]
fn four_phases_load_probe_and_follow_the_schemas() {
    let _heavy = common::heavy();
    let srv = ServerProc::start(&[]);
    let p = srv.port.to_string();
    let out = run(
        &[
            "rpm",
            "127.0.0.1",
            "-p",
            &p,
            "-t",
            "1.5",
            "-P",
            "2",
            "--json",
            "--no-store",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "rpm failed: {}", stderr(&out));
    let doc = json(&out);
    let rpm = &doc["rpm"];
    let phases = rpm["phases"].as_array().expect("phases");
    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["idle", "download", "upload", "bidir"]);
    for ph in phases {
        let name = ph["phase"].as_str().unwrap();
        // 20 probes a second over 1.5 s, less the warm-up: every phase got answers
        let connect = &ph["connect"];
        assert!(f(&connect["samples"]) >= 5.0, "{name}: {connect}");
        assert_stats(connect, name);
        assert_stats(&ph["request"], name);
        // a probe still in flight when its phase's test ends is refused by the server and
        // counted failed; on a busy host one or two may: most must be answered
        assert!(
            f(&ph["probes_failed"]) <= f(&connect["samples"]) / 4.0,
            "{name}: {} of {} probes failed",
            ph["probes_failed"],
            connect["samples"]
        );
        // as many UDP probes, nearly all answered, and one-way delays with one host's clock
        // on both ends: near zero over loopback, each way
        let udp = &ph["udp"];
        assert!(f(&udp["samples"]) >= 5.0, "{name}: {udp}");
        assert_stats(udp, name);
        // a datagram may be lost beside four saturating flows on a busy host; most come back
        assert!(
            f(&ph["udp_failed"]) <= f(&udp["samples"]) / 4.0,
            "{name}: {} of {} UDP probes unanswered",
            ph["udp_failed"],
            udp["samples"]
        );
        let ow = &ph["one_way"];
        assert_eq!(ow["samples"], udp["samples"], "{name}: {ow}");
        for dir in ["up", "down"] {
            let (p50, p90) = (
                f(&ow[format!("{dir}_p50_ms")]),
                f(&ow[format!("{dir}_p90_ms")]),
            );
            assert!(p50 <= p90, "{name} {dir}: {ow}");
            assert!(p50.abs() < 20.0 && p90.abs() < 100.0, "{name} {dir}: {ow}");
        }
        assert!(f(&ph["rpm"]) > 0.0, "{name}");
        let (down, up) = (&ph["download_bps"], &ph["upload_bps"]);
        match name {
            "idle" => {
                assert!(down.is_null() && up.is_null());
                assert!(ph["loaded_rtt"].is_null(), "idle has no loaded flows");
            }
            "download" => assert!(f(down) > 1e6 && up.is_null(), "{down} {up}"),
            "upload" => assert!(f(up) > 1e6 && down.is_null(), "{down} {up}"),
            _ => assert!(f(down) > 1e6 && f(up) > 1e6, "{down} {up}"),
        }
        if name != "idle" {
            assert_stats(&ph["loaded_rtt"], name);
            // throughput settles within the phase (seven 0.1 s intervals at the earliest, an
            // interval's end a little early on a busy host), or is said never to have
            let ramp = &ph["ramp_up_s"];
            assert!(
                ramp.is_null() || (0.6..=1.5).contains(&f(ramp)),
                "{name}: ramp-up {ramp}"
            );
            assert_inband(ph, idle_round_trip(phases), name);
        } else {
            assert!(ph["ramp_up_s"].is_null(), "{ph}");
            assert!(ph["inband"].is_null(), "idle has no loaded flows: {ph}");
        }
        // the client's egress qdisc: loopback has none (noqueue), said so rather than zeros
        let q = &ph["qdisc"];
        if name == "idle" || !tc_answers() {
            assert!(q.is_null(), "{name}: {q}");
        } else {
            assert_eq!(
                (q["interface"].as_str(), q["kind"].as_str()),
                (Some("lo"), Some("noqueue")),
                "{name}: {q}"
            );
            assert_eq!(q["queued"], false, "{name}: {q}");
            assert!(f(&q["samples"]) >= 1.0, "{name}: {q}");
            for k in ["median_backlog_bytes", "peak_backlog_bytes", "drops"] {
                assert!(q.get(k).is_none(), "{name}: {k} in {q}");
            }
        }
    }
    // the headline is the bidirectional phase's
    assert_eq!(rpm["rpm"], phases[3]["rpm"]);
    assert_eq!(doc["spec"]["test"]["kind"], "rpm");
    assert!(rpm["verdict"]
        .as_str()
        .unwrap()
        .starts_with("responsiveness "));

    let result: Value =
        serde_json::from_str(include_str!("../../../../schema/result.schema.json")).unwrap();
    let result = jsonschema::validator_for(&result).expect("result schema compiles");
    let errors: Vec<String> = result.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    let section: Value =
        serde_json::from_str(include_str!("../../../../schema/rpm.schema.json")).unwrap();
    let section = jsonschema::validator_for(&section).expect("rpm schema compiles");
    let errors: Vec<String> = section.iter_errors(rpm).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    // the schema bites
    let mut bad = rpm.clone();
    bad["phases"][1]["connect"]["p50_ms"] = serde_json::json!(-1.0);
    assert!(!section.is_valid(&bad));
    let mut bad = rpm.clone();
    bad["confidence"] = serde_json::json!("certain");
    assert!(!section.is_valid(&bad));
    let mut bad = rpm.clone();
    bad["phases"][2]["inband"]["p90_ms"] = serde_json::json!("slow");
    assert!(!section.is_valid(&bad));
    let mut bad = rpm.clone();
    bad["phases"][3]["inband_series"][0] = serde_json::json!([0.5]);
    assert!(!section.is_valid(&bad));
    let mut bad = rpm.clone();
    bad["phases"][2]["one_way"]
        .as_object_mut()
        .unwrap()
        .remove("up_p50_ms");
    assert!(!section.is_valid(&bad));
    if tc_answers() {
        let mut bad = rpm.clone();
        bad["phases"][1]["qdisc"]
            .as_object_mut()
            .unwrap()
            .remove("queued");
        assert!(!section.is_valid(&bad));
    }
    // the server served every probe: it rejected no data connection
    let log = srv.stop();
    assert!(!log.contains("rejected data stream"), "{log}");
    assert!(!log.contains("latency probes"), "{log}");
}

/// The idle phase's shortest round trip: a request/response on an idle connection.
fn idle_round_trip(phases: &[Value]) -> f64 {
    f(&phases[0]["request"]["min_ms"])
}

/// A loaded phase's in-band request/response: samples past the warm-up, ordered
/// percentiles, its series, and no faster than an idle round trip (the response waits behind
/// the bulk; a request and a response still cross the path).
fn assert_inband(ph: &Value, idle_ms: f64, name: &str) {
    let s = &ph["inband"];
    assert!(f(&s["samples"]) >= 3.0, "{name}: {s}");
    let v: Vec<f64> = ["min_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms"]
        .iter()
        .map(|k| f(&s[*k]))
        .collect();
    assert!(v.windows(2).all(|w| w[0] <= w[1]), "{name}: {v:?}");
    assert!(
        v[1] >= idle_ms,
        "{name}: in-band p50 {} ms under the idle round trip {idle_ms} ms",
        v[1]
    );
    let series = ph["inband_series"].as_array().expect("in-band series");
    assert!(series.len() as f64 >= f(&s["samples"]), "{name}: {s}");
}

/// One rpm run over loopback, its document. Phases of 3 s: a loaded phase counts its
/// latency from when its throughput settled (up to 1.5 s here), and each needs in-band
/// samples after that.
fn rpm_json(port: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "rpm",
        "127.0.0.1",
        "-p",
        port,
        "-t",
        "3",
        "-P",
        "2",
        "--json",
        "--no-store",
    ];
    args.extend_from_slice(extra);
    let out = run(&args, LIMIT);
    assert!(
        out.status.success(),
        "rpm {extra:?} failed: {}",
        stderr(&out)
    );
    json(&out)
}

#[test]
fn in_band_latency_grows_with_the_socket_buffers() {
    let srv = ServerProc::start(&[]);
    let p = srv.port.to_string();
    // small buffers, then the kernel's autotuned ones (megabytes over loopback): the
    // response to an in-band request waits behind what the buffers hold
    let small = rpm_json(&p, &["-w", "32K"]);
    let large = rpm_json(&p, &[]);
    // with 32 KiB buffers the in-band wait is a fraction of a millisecond, within what a
    // busy host adds to the idle phase's round trips: the idle floor is checked on the
    // autotuned run only
    let p50s = |doc: &Value, floor: bool| -> Vec<f64> {
        let phases = doc["rpm"]["phases"].as_array().expect("phases");
        let idle = if floor { idle_round_trip(phases) } else { 0.0 };
        phases[1..]
            .iter()
            .map(|ph| {
                let name = ph["phase"].as_str().unwrap_or("?");
                assert_inband(ph, idle, name);
                f(&ph["inband"]["p50_ms"])
            })
            .collect()
    };
    let (s, l) = (p50s(&small, false), p50s(&large, true));
    let sum = |v: &[f64]| v.iter().sum::<f64>();
    assert!(
        sum(&l) > 2.0 * sum(&s),
        "in-band p50 per loaded phase: 32 KiB buffers {s:?} ms, autotuned {l:?} ms"
    );
    assert_eq!(small["spec"]["test"]["window_bytes"], 32768);
    // --no-inband sends none: the self part is the TCP_INFO RTT alone
    let none = rpm_json(&p, &["--no-inband"]);
    for ph in none["rpm"]["phases"].as_array().expect("phases") {
        assert!(ph["inband"].is_null(), "{ph}");
    }
    assert_eq!(none["spec"]["test"]["inband"], false);
    // a probe of one run may reach the server after that run ended (a stale token): any
    // other rejection is a fault
    let log = srv.stop();
    assert!(
        !log.lines()
            .any(|l| l.contains("rejected data stream")
                && !l.contains("wrong or stale session token")),
        "{log}"
    );
}

#[test]
fn embedded_server_text_report_and_history_kind() {
    let _heavy = common::heavy();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let db = db.to_str().unwrap();
    let out = run(
        &[
            "rpm",
            "-t",
            "1",
            "-P",
            "1",
            "--dscp",
            "EF",
            "--probe-dscp",
            "cs5",
            "--db",
            db,
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    for word in [
        "idle",
        "download",
        "upload",
        "both",
        "in-band p50/90/99",
        "RPM:",
        "Verdict: ",
    ] {
        assert!(text.contains(word), "{word} missing: {text}");
    }
    let out = run(&["history", "--db", db, "--json"], LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let runs = json(&out);
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 1);
    let spec = &runs[0]["result"]["spec"];
    assert_eq!(spec["test"]["kind"], "rpm");
    // EF (46) on the loaded flows is TOS 0xb8; CS5 (40) on the probes
    assert_eq!(spec["tos"], 0xb8);
    assert_eq!(spec["test"]["load_dscp"], 46);
    assert_eq!(spec["test"]["probe_dscp"], 40);
    let out = run(&["history", "--db", db], LIMIT);
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(table.contains("rpm tcp x1"), "{table}");
    // listed by its responsiveness, as the document says it
    let rpm = runs[0]["result"]["rpm"]["rpm"].as_f64().unwrap();
    assert!(table.contains(&format!("{rpm:.0} RPM")), "{table}");
    // the report draws the phases
    let html = dir.path().join("r.html");
    let id = runs[0]["id"].to_string();
    let out = run(
        &[
            "report",
            &format!("id:{id}"),
            "--db",
            db,
            "-o",
            html.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    for title in [
        "Latency through the phases",
        "Connect times, idle against loaded",
        "Throughput and RPM per phase",
        "UDP round trips through the phases",
        "One-way delay added, each direction",
    ] {
        assert!(page.contains(title), "{title} missing");
    }
}

#[test]
fn bad_settings_are_usage_errors() {
    for args in [
        &["rpm", "--probe-rate", "500"][..],
        &["rpm", "-t", "0"],
        &["rpm", "-t", "2", "--warmup", "2"],
        &["rpm", "-P", "0"],
        &["rpm", "--dscp", "AF51"],
        &["rpm", "--probe-dscp", "64"],
        &["rpm", "-w", "lots"],
    ] {
        let out = run(args, LIMIT);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}

/// A probe's opening as docs/protocol.md lays it out: the data preamble, a token, flow 0,
/// stream id u32::MAX, one byte.
fn probe_opening(token: [u8; 16]) -> Vec<u8> {
    let mut v = b"WRRT".to_vec();
    v.extend_from_slice(&1u16.to_be_bytes());
    v.extend_from_slice(&[1, 0]);
    v.extend_from_slice(&token);
    v.push(0);
    v.extend_from_slice(&u32::MAX.to_be_bytes());
    v.push(7);
    v
}

#[test]
fn a_probe_without_a_running_test_is_refused_unanswered() {
    use std::io::{Read, Write};
    let srv = ServerProc::start(&[]);
    let mut s = std::net::TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&probe_opening([9; 16])).unwrap();
    let mut b = [0u8; 1];
    // closed without an answer (EOF or a reset), never echoed
    assert!(matches!(s.read(&mut b), Ok(0) | Err(_)), "answered {b:?}");
    // the server closes, then logs
    std::thread::sleep(Duration::from_millis(500));
    let log = srv.stop_after("wrong or stale session token");
    assert!(log.contains("wrong or stale session token"), "{log}");
}

/// A UDP probe as docs/protocol.md lays it out: the 40-byte datagram header (kind 4, stream
/// id u32::MAX, number, send time, token) and 16 zero bytes.
fn udp_probe(token: [u8; 16]) -> Vec<u8> {
    let mut v = b"Wd".to_vec();
    v.extend_from_slice(&[1, 4]);
    v.extend_from_slice(&u32::MAX.to_be_bytes());
    v.extend_from_slice(&7u64.to_be_bytes());
    v.extend_from_slice(&1234u64.to_be_bytes());
    v.extend_from_slice(&token);
    v.extend_from_slice(&[0; 16]);
    v
}

#[test]
fn a_udp_probe_without_a_running_test_is_not_answered() {
    let srv = ServerProc::start(&[]);
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.connect(("127.0.0.1", srv.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut b = [0u8; 128];
    for _ in 0..3 {
        s.send(&udp_probe([9; 16])).unwrap();
        // silence, not a refusal: the server's port is bound for probes, and drops this one
        let got = s.recv(&mut b);
        assert!(
            matches!(&got, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
                || e.kind() == std::io::ErrorKind::TimedOut),
            "{got:?}"
        );
    }
    srv.stop();
}

#[test]
fn compare_two_rpm_runs_on_rpm_and_loaded_latency() {
    let _heavy = common::heavy();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let db = db.to_str().unwrap();
    for label in ["a", "b"] {
        let out = run(
            &["rpm", "-t", "1", "-P", "1", "--label", label, "--db", db],
            LIMIT,
        );
        assert!(out.status.success(), "{label}: {}", stderr(&out));
    }
    let out = run(&["compare", "a", "b", "--json", "--db", db], LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = json(&out);
    let metrics = &doc["metrics"];
    for key in ["rpm", "loaded_p50_ms", "inband_p50_ms", "goodput_bps"] {
        assert!(metrics[key]["a"].is_object(), "{key}: {doc}");
    }
    let schema: Value =
        serde_json::from_str(include_str!("../../../../schema/compare.schema.json")).unwrap();
    let v = jsonschema::validator_for(&schema).expect("compare schema compiles");
    let errors: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    // the text verdict is about responsiveness
    let out = run(&["compare", "a", "b", "--db", db], LIMIT);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("responsiveness"), "{text}");
}

#[test]
fn probes_are_served_beside_a_tls_session() {
    let _heavy = common::heavy();
    // over TLS the data token is the session's exporter, never sent: the probes present it
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let srv = ServerProc::start(&["--tls", "--state-dir", state.to_str().unwrap()]);
    let p = srv.port.to_string();
    let known = dir.path().join("known");
    let out = run(
        &[
            "rpm",
            "127.0.0.1",
            "-p",
            &p,
            "--tls",
            "--known-servers",
            known.to_str().unwrap(),
            "-t",
            "1",
            "-P",
            "1",
            "--json",
            "--no-store",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = json(&out);
    for ph in doc["rpm"]["phases"].as_array().unwrap() {
        // as in the loopback test: most probes answered, one may meet its phase's end
        assert!(
            f(&ph["probes_failed"]) <= f(&ph["connect"]["samples"]) / 4.0,
            "{ph}"
        );
        assert!(f(&ph["request"]["samples"]) >= 3.0, "{ph}");
        assert!(f(&ph["udp"]["samples"]) >= 3.0, "{ph}");
    }
}

#[test]
fn dscp_up_down_marks_each_end_sending_sockets() {
    let _heavy = common::heavy();
    use std::process::{Command, Stdio};
    use std::time::Instant;
    let srv = ServerProc::start(&[]);
    let p = srv.port.to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_wirerate"))
        .args(["rpm", "127.0.0.1", "-p", &p, "-t", "2", "-P", "1"])
        .args(["--dscp", "CS1/EF", "--json", "--no-store"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn client");
    // the server's accepted sockets (source port its own) and the client's (its
    // destination), while the loaded phases run
    let (mut server_side, mut client_side) = (String::new(), String::new());
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut have_ss = true;
    while Instant::now() < deadline && child.try_wait().is_ok_and(|s| s.is_none()) {
        let ss = |filter: String| {
            Command::new("ss")
                .args(["-tnH", "--tos", "state", "established", &filter])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        };
        let (Ok(s), Ok(c)) = (
            ss(format!("( sport = :{p} )")),
            ss(format!("( dport = :{p} )")),
        ) else {
            eprintln!("skipped the socket check: ss is not installed");
            have_ss = false;
            break;
        };
        server_side.push_str(&s);
        client_side.push_str(&c);
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = json(&out);
    let spec = &doc["spec"];
    // CS1 (8) client → server is TOS 0x20, EF (46) server → client 0xb8
    assert_eq!(
        (&spec["tos"], &spec["server_tos"]),
        (&0x20.into(), &0xb8.into())
    );
    assert_eq!(spec["test"]["load_dscp"], 8);
    assert_eq!(spec["test"]["load_dscp_down"], 46);
    if have_ss {
        assert!(server_side.contains("tos:0xb8"), "{server_side}");
        assert!(!server_side.contains("tos:0x20"), "{server_side}");
        assert!(client_side.contains("tos:0x20"), "{client_side}");
        assert!(!client_side.contains("tos:0xb8"), "{client_side}");
    }
    srv.stop();
}

/// iproute2's `tc` is installed and reads loopback's qdisc.
fn tc_answers() -> bool {
    std::process::Command::new("tc")
        .args(["-s", "-j", "qdisc", "show", "dev", "lo"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// What a probe beside a running test saw of the server's answers: the TOS byte its UDP
/// replies arrived with (IP_RECVTOS), and `ss`'s view of the server's end of a TCP probe
/// connection held open.
#[derive(Debug, Default)]
struct Answers {
    udp_tos: Vec<u8>,
    tcp_server_side: String,
}

/// Starts a thread that probes the session once its token is known.
struct ProbeOnce {
    port: u16,
    seen: Option<std::thread::JoinHandle<Answers>>,
}

impl wirerate_control::Observer for ProbeOnce {
    fn session(&mut self, token: &[u8; 16]) {
        let (port, token) = (self.port, *token);
        self.seen = Some(std::thread::spawn(move || Answers {
            udp_tos: udp_reply_tos(port, token),
            tcp_server_side: tcp_probe_as_ss_sees_it(port, token),
        }));
    }
}

/// The TOS of each UDP probe reply, read from the datagram's IP_TOS control message.
fn udp_reply_tos(port: u16, token: [u8; 16]) -> Vec<u8> {
    use socket2::{Domain, MaybeUninitSlice, MsgHdrMut, Socket, Type};
    use std::mem::MaybeUninit;
    let s = Socket::new(Domain::IPV4, Type::DGRAM, None).unwrap();
    s.set_recv_tos(true).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let server: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    s.connect(&server.into()).unwrap();
    let mut seen = Vec::new();
    for _ in 0..5 {
        s.send(&udp_probe(token)).unwrap();
        let mut data = [MaybeUninit::new(0u8); 128];
        let mut control = [MaybeUninit::new(0u8); 64];
        let mut bufs = [MaybeUninitSlice::new(&mut data)];
        let mut msg = MsgHdrMut::new()
            .with_buffers(&mut bufs)
            .with_control(&mut control);
        if s.recvmsg(&mut msg, 0).is_err() {
            continue;
        }
        let len = msg.control_len();
        // SAFETY: every byte of `control` was initialized (to 0) before the call
        let control: Vec<u8> = control[..len]
            .iter()
            .map(|b| unsafe { b.assume_init() })
            .collect();
        if let Some(tos) = cmsg_tos(&control) {
            seen.push(tos);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    seen
}

/// The IP_TOS control message's byte in a recvmsg control buffer (struct cmsghdr: length,
/// level, type, then the data, each message aligned to the length's size).
fn cmsg_tos(control: &[u8]) -> Option<u8> {
    let (head, word) = (
        std::mem::size_of::<libc::cmsghdr>(),
        std::mem::size_of::<usize>(),
    );
    let mut at = 0;
    while at + head <= control.len() {
        let len = usize::from_ne_bytes(control[at..at + word].try_into().ok()?);
        let level = i32::from_ne_bytes(control[at + word..at + word + 4].try_into().ok()?);
        let kind = i32::from_ne_bytes(control[at + word + 4..at + word + 8].try_into().ok()?);
        if len < head {
            return None;
        }
        if level == libc::IPPROTO_IP && kind == libc::IP_TOS {
            return control.get(at + head).copied();
        }
        at += len.div_ceil(word) * word;
    }
    None
}

/// A TCP probe connection held open after its first answer, and what `ss` says of the
/// server's end of it (its TOS among the rest); empty without `ss`.
fn tcp_probe_as_ss_sees_it(port: u16, token: [u8; 16]) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s.write_all(&probe_opening(token)).unwrap();
    let mut b = [0u8; 1];
    s.read_exact(&mut b).expect("the probe's answer");
    let mine = s.local_addr().unwrap().port();
    let filter = format!("( sport = :{port} and dport = :{mine} )");
    std::process::Command::new("ss")
        .args(["-tnH", "--tos", "state", "established", &filter])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default()
}

/// A one-second test against `port` whose spec asks the server for `asks`, probed beside.
fn probed_test(
    port: u16,
    asks: Option<wirerate_core::rpm::RpmServer>,
) -> (Answers, wirerate_control::ClientOutcome) {
    use wirerate_core::spec::{End, TestSpec};
    let spec = TestSpec {
        end: End::Time { seconds: 1.0 },
        rpm_server: asks,
        ..Default::default()
    };
    let mut obs = ProbeOnce { port, seen: None };
    let addr = ([127, 0, 0, 1], port).into();
    let cfg = wirerate_control::ClientConfig::default();
    let outcome = wirerate_control::run_test(addr, &spec, &cfg, &mut obs).expect("the test");
    let seen = obs.seen.take().expect("a session token").join().unwrap();
    (seen, outcome)
}

#[test]
fn the_servers_probe_answers_carry_the_class_down_and_its_qdisc_comes_back() {
    let srv = ServerProc::start(&[]);
    // EF (46) is TOS 0xb8
    let asks = wirerate_core::rpm::RpmServer {
        probe_tos: Some(0xb8),
        egress_qdisc: true,
    };
    let (marked, outcome) = probed_test(srv.port, Some(asks));
    eprintln!("answers to probes marked EF: {marked:?}");
    assert!(marked.udp_tos.len() >= 3, "{marked:?}");
    assert!(marked.udp_tos.iter().all(|t| *t == 0xb8), "{marked:?}");
    if !marked.tcp_server_side.is_empty() {
        assert!(marked.tcp_server_side.contains("tos:0xb8"), "{marked:?}");
    }
    // the server read its egress toward the client: loopback, which has no qdisc
    let qdisc = outcome
        .remote
        .evidence
        .as_ref()
        .and_then(|e| e.egress_qdisc.clone());
    if tc_answers() {
        let q = qdisc.expect("the server's egress qdisc");
        assert_eq!((q.interface.as_str(), q.queued), ("lo", false), "{q:?}");
    }
    // the next test asks for nothing: the same socket's replies go unmarked again, and no
    // qdisc is read
    let (plain, outcome) = probed_test(srv.port, None);
    assert!(plain.udp_tos.len() >= 3, "{plain:?}");
    assert!(plain.udp_tos.iter().all(|t| *t == 0), "{plain:?}");
    if !plain.tcp_server_side.is_empty() {
        assert!(!plain.tcp_server_side.contains("tos:0xb8"), "{plain:?}");
    }
    let evidence = outcome.remote.evidence.unwrap_or_default();
    assert_eq!(evidence.egress_qdisc, None);
    srv.stop();
}
