//! The Why block proven on real scenarios: each test makes a transfer slow for a known
//! reason (the CPU, a window, a buffer, a shaped wire, a dropping queue) and checks that the
//! verdict names that reason.
//!
//! Loopback scenarios run anywhere. The others need root (namespaces, veth, tc, cgroups)
//! and skip with a message otherwise; each removes what it made and ends only the processes
//! it started, by PID. Traffic goes only to loopback or to the test's own namespaces.

use crate::common;

use std::path::PathBuf;
use std::time::Duration;

/// Every run here is a few seconds; this bounds a hung one.
const LIMIT_LONG: Duration = Duration::from_secs(40);

/// One scenario at a time, beside no other heavy test: a CPU verdict must not be made by
/// another test's load.
fn alone() -> common::Heavy {
    common::heavy()
}

use common::lab::{skip_unless_root, wirerate_in_lab, Lab};
use common::{json, run, spawn_piped, ServerProc};
use serde_json::Value;

fn diagnosis(doc: &Value) -> &Value {
    let d = &doc["summary"]["diagnosis"];
    assert!(d.is_object(), "no diagnosis in {}", doc["summary"]);
    d
}

fn bottleneck(doc: &Value) -> String {
    diagnosis(doc)["bottleneck"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The evidence items that support the verdict's class, as printed.
fn evidence_texts(doc: &Value) -> Vec<String> {
    diagnosis(doc)["evidence"]
        .as_array()
        .map(|v| {
            v.iter()
                .filter_map(|e| e["text"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn loopback_default_run_has_a_cpu_or_turns_verdict_and_says_where_each_end_waited() {
    let _alone = alone();
    let out = run(&["run", "-t", "2", "--json", "--no-store"], LIMIT_LONG);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json(&out);
    let b = bottleneck(&doc);
    println!("loopback default: {}", diagnosis(&doc));
    // one host of any size: a saturated or starved end, every core busy, or the two ends
    // taking turns; never "not determined"
    assert!(
        ["sender_cpu", "receiver_cpu", "host_cpu", "turn_taking"].contains(&b.as_str()),
        "loopback is bound by a CPU or by the turns of its ends, not {b}"
    );
    let d = diagnosis(&doc);
    assert!(d["evidence"].as_array().is_some_and(|e| !e.is_empty()));
    assert!(d["evidence"][0]["threshold"].is_number(), "{d}");
    // where each end waited is measured and said, whatever the verdict
    let s = &doc["streams"][0];
    for end in ["sender", "receiver"] {
        assert!(s[end]["sleeps"].is_u64(), "{end}: {}", s[end]);
        assert!(s[end]["wait_s"].is_number(), "{end}: {}", s[end]);
    }
    let said = d.to_string();
    assert!(said.contains("slept on its full send buffer"), "{d}");
    assert!(said.contains("slept waiting for data"), "{d}");
    // an end is named only when its own figures back it: a sending thread that neither
    // ran half a core nor waited a fifth of its window for one is never "sender CPU"
    let share = |end: &str, key: &str| {
        s[end][key].as_f64().unwrap_or(0.0) / s[end]["seconds"].as_f64().unwrap_or(1.0) * 100.0
    };
    if d["verdict"]
        .as_str()
        .unwrap_or_default()
        .contains("sender CPU")
    {
        assert!(
            share("sender", "run_s") >= 50.0 || share("sender", "wait_s") >= 20.0,
            "sender CPU named for a sender that hardly ran: {d}\n{s}"
        );
    }
    // retransmits the receiver reported as duplicates are named as such, not left bare
    let tcp = &doc["summary"]["tcp"];
    let (retrans, dsack) = (tcp["retransmits"].as_u64(), tcp["dsack_dups"].as_u64());
    if let (Some(r), Some(s)) = (retrans, dsack) {
        if r > 0 && s * 2 >= r {
            let notes = d["notes"].to_string();
            assert!(
                notes.contains("DSACK") || notes.contains("spurious"),
                "{r} retransmits, {s} spurious, but no note: {d}"
            );
        }
    }
    // both hosts were seen: the embedded server shares the host
    assert!(
        doc["evidence"]["client"]["tcp_ext"].is_object(),
        "{}",
        doc["evidence"]
    );
    assert!(doc["evidence"]["server"]["cores"].is_array());
}

/// Checks a run whose two ends were pinned to CPU 0: each end's split is measured, the two
/// ran one core at most between them, one waited for it while the other ran, and the
/// verdict is the turns on that core (never a starved receiver or a busy host: those are
/// the turns seen from one end).
fn assert_turns_on_cpu_0(doc: &Value) {
    let s = &doc["streams"][0];
    let share =
        |end: &str, key: &str| Some(s[end][key].as_f64()? / s[end]["seconds"].as_f64()? * 100.0);
    let (Some(tx_run), Some(rx_run), Some(tx_wait), Some(rx_wait)) = (
        share("sender", "run_s"),
        share("receiver", "run_s"),
        share("sender", "wait_s"),
        share("receiver", "wait_s"),
    ) else {
        eprintln!("skipped: this kernel gives no scheduler figures (schedstat)");
        return;
    };
    for end in ["sender", "receiver"] {
        assert_eq!(s[end]["pinned_cpu"], 0, "{end}: {}", s[end]);
    }
    // the two ends together ran one core at most: they were on one
    assert!(tx_run + rx_run <= 110.0, "{tx_run} + {rx_run}: {s}");
    // and one waited for it while the other ran
    assert!(tx_wait.max(rx_wait) >= 10.0, "{tx_wait}, {rx_wait}: {s}");
    let d = diagnosis(doc);
    println!("one core: {tx_run:.0} + {rx_run:.0} % of it run by the ends: {d}");
    let b = bottleneck(doc);
    if tx_run + rx_run < 50.0 {
        // other work held the core more than the test: a CPU verdict, the turns a
        // candidate at most
        assert!(
            ["sender_cpu", "receiver_cpu", "host_cpu", "turn_taking"].contains(&b.as_str()),
            "{b}: {d}"
        );
        return;
    }
    assert_eq!(b, "turn_taking", "{d}");
    let verdict = d["verdict"].as_str().unwrap_or_default();
    assert!(
        verdict.contains("both ends were pinned to CPU 0 and took it in turns"),
        "{verdict}"
    );
    let e = &d["evidence"][0];
    let value = e["value"].as_f64().unwrap_or_default();
    assert!(
        (value - (tx_run + rx_run)).abs() < 0.5,
        "{e} vs {tx_run} + {rx_run}"
    );
    assert_eq!(e["threshold"], 50.0, "{e}");
    let said = evidence_texts(doc).join("\n");
    assert!(said.contains("waited for a CPU"), "{said}");
    assert!(said.contains("(pinned to CPU 0)"), "{said}");
}

/// Runs the binary with `args` after `prefix` (a command that runs it), under the
/// real-time FIFO policy at priority 1 where the test may set it (`chrt -f 1`): the two ends
/// are then the main users of their core even on a host busy with other work, and take it
/// in turns, each running until it sleeps in its socket call (the kernel still leaves 5 %
/// of each second to other work). Elsewhere they run at the normal policy.
fn run_favoured(prefix: &[&str], args: &[&str]) -> std::process::Output {
    let fifo = std::process::Command::new("chrt")
        .args(["-f", "1", "true"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let mut cmd = if fifo {
        let mut c = std::process::Command::new("chrt");
        c.args(["-f", "1"]).args(prefix);
        c
    } else if let Some((first, rest)) = prefix.split_first() {
        let mut c = std::process::Command::new(first);
        c.args(rest);
        c
    } else {
        return run(args, LIMIT_LONG);
    };
    let child = cmd
        .arg(common::bin())
        .args(args)
        .env("WIRERATE_DB", common::test_db())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the command starts");
    common::wait_bounded(child, LIMIT_LONG)
}

/// Both ends pinned to one core (`-A 0,0`): they take that core in turns. Before the ends'
/// CPUs were recorded, ten runs of a release build on a 2-core VM all gave `receiver_cpu`
/// (the receiving thread waited for the core 36–50 % of its window while the sender held
/// it), and a debug build `sender_cpu` or `host_cpu` too (docs/diagnosis.md).
#[test]
fn both_ends_on_one_core_take_it_in_turns_and_the_verdict_names_it() {
    let _alone = alone();
    let out = run_favoured(
        &[],
        &["run", "-t", "2", "-A", "0,0", "--json", "--no-store"],
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_turns_on_cpu_0(&json(&out));
}

/// The whole process confined to CPU 0 (`taskset -c 0`, no `-A`): the ends inherit it, and
/// the verdict is the same.
#[test]
fn a_process_confined_to_one_cpu_takes_it_in_turns() {
    let _alone = alone();
    let Ok(status) = std::process::Command::new("taskset")
        .args(["-c", "0", "true"])
        .status()
    else {
        eprintln!("skipped: no taskset here");
        return;
    };
    assert!(status.success(), "taskset -c 0 true: {status}");
    let out = run_favoured(
        &["taskset", "-c", "0"],
        &["run", "-t", "2", "--json", "--no-store"],
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_turns_on_cpu_0(&json(&out));
}

#[test]
fn other_traffic_on_lo_is_named_in_the_why() {
    let _alone = alone();
    // a bulk test moves gigabytes over lo while a paced one moves about 2.5 MB
    let bulk = spawn_piped(&["run", "-t", "4", "--json", "--no-store"]);
    std::thread::sleep(Duration::from_millis(800));
    let paced = run(
        &["run", "-b", "20M", "-t", "1", "-V", "--no-store"],
        LIMIT_LONG,
    );
    let bulk = common::wait_bounded(bulk, LIMIT_LONG);
    assert!(paced.status.success(), "{}", common::stderr(&paced));
    assert!(bulk.status.success(), "{}", common::stderr(&bulk));
    let text = String::from_utf8_lossy(&paced.stdout);
    let why = &text[text.rfind("\nWhy\n").expect("a Why block")..];
    let line = why
        .lines()
        .find(|l| l.contains("other traffic shared the interface"))
        .unwrap_or_else(|| panic!("no other-traffic note: {text}"));
    assert!(
        line.trim_start().starts_with("note:") && line.contains("client: lo carried"),
        "{line}"
    );
    // the bulk test's own bytes were most of what lo carried: nothing to say there
    let doc = json(&bulk);
    assert!(
        !diagnosis(&doc)["notes"]
            .to_string()
            .contains("other traffic"),
        "{}",
        diagnosis(&doc)
    );
}

#[test]
fn text_report_ends_with_the_why_block() {
    let _alone = alone();
    let out = run(&["run", "-t", "1", "--no-store"], LIMIT_LONG);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let why = text.rfind("\nWhy\n").expect("a Why block");
    let block = &text[why..];
    assert!(block.contains("confidence"), "{block}");
    assert!(
        !block.contains("not determined"),
        "a loopback run has a verdict: {block}"
    );
    // the window shares are reported as figures, not as the answer
    assert!(!text.contains("TCP limited by"), "{text}");
}

#[test]
fn udp_into_a_small_receive_buffer_loses_in_the_socket() {
    let _alone = alone();
    let out = run(
        &[
            "run",
            "-u",
            "-b",
            "0",
            "--rcvbuf",
            "8K",
            "-t",
            "1",
            "--json",
            "--no-store",
        ],
        LIMIT_LONG,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json(&out);
    let u = &doc["summary"]["udp"];
    println!("unpaced UDP into 8 KiB: loss {} %", u["loss_percent"]);
    assert!(u["loss_percent"].as_f64().unwrap() > 1.0, "{u}");
    assert_eq!(
        bottleneck(&doc),
        "udp_receiver_buffer",
        "{}",
        diagnosis(&doc)
    );
    let advice = diagnosis(&doc)["advice"].to_string();
    assert!(advice.contains("rmem"), "{advice}");
}

/// A CPU controller of this machine's cgroups (v2 or v1), for one child group that is
/// removed on drop.
struct CpuLimit {
    dir: PathBuf,
}

impl CpuLimit {
    /// A child group allowed `percent` % of one core, or None where no CPU controller can
    /// be written.
    fn new(percent: u32) -> Option<CpuLimit> {
        let name = format!("wirerate-diag-{}", std::process::id());
        let v2 = PathBuf::from("/sys/fs/cgroup");
        let v1 = PathBuf::from("/sys/fs/cgroup/cpu");
        if std::fs::read_to_string(v2.join("cgroup.controllers")).is_ok_and(|c| c.contains("cpu")) {
            let _ = std::fs::write(v2.join("cgroup.subtree_control"), "+cpu");
            let dir = v2.join(name);
            std::fs::create_dir(&dir).ok()?;
            let lim = CpuLimit { dir };
            std::fs::write(
                lim.dir.join("cpu.max"),
                format!("{} 100000", percent * 1000),
            )
            .ok()?;
            Some(lim)
        } else if v1.join("cpu.cfs_quota_us").exists() {
            let dir = v1.join(name);
            std::fs::create_dir(&dir).ok()?;
            let lim = CpuLimit { dir };
            std::fs::write(lim.dir.join("cpu.cfs_period_us"), "100000").ok()?;
            std::fs::write(
                lim.dir.join("cpu.cfs_quota_us"),
                (percent * 1000).to_string(),
            )
            .ok()?;
            Some(lim)
        } else {
            None
        }
    }

    fn add(&self, pid: u32) {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string()).expect("join the cgroup");
    }
}

impl Drop for CpuLimit {
    fn drop(&mut self) {
        // the group is empty once its processes are gone; give the kernel a moment
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn receiver_confined_to_a_tenth_of_a_core_is_receiver_cpu() {
    let _alone = alone();
    let test = "receiver_confined_to_a_tenth_of_a_core_is_receiver_cpu";
    if skip_unless_root(test) {
        return;
    }
    let Some(limit) = CpuLimit::new(10) else {
        eprintln!("SKIPPED {test}: no writable cgroup CPU controller");
        return;
    };
    let server = ServerProc::start(&[]);
    limit.add(server.child.id());
    let port = server.port;
    let out = run(
        &[
            "run",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            "3",
            "--json",
            "--no-store",
        ],
        LIMIT_LONG,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json(&out);
    println!("receiver at 10 % of a core: {}", diagnosis(&doc));
    let cg = &doc["evidence"]["server"]["cgroup"];
    assert!(
        (cg["limit_cores"].as_f64().unwrap_or(0.0) - 0.1).abs() < 0.01,
        "the server's cgroup limit is seen: {cg}"
    );
    assert_eq!(bottleneck(&doc), "receiver_cpu", "{}", diagnosis(&doc));
    // the quota is named as the cause, not only the thread's wait it causes
    let advice = diagnosis(&doc)["advice"].to_string();
    assert!(advice.contains("quota"), "{advice}");
}

#[test]
fn lab_10m_wire_is_the_bottleneck() {
    let _alone = alone();
    if skip_unless_root("lab_10m_wire_is_the_bottleneck") {
        return;
    }
    let lab = Lab::up("dw", &["--rate", "10M"]);
    // one second of warm-up: the verdict is about the steady state, not slow start
    let doc = wirerate_in_lab(&lab, &["-t", "4", "-O", "1", "-C", "cubic"]);
    println!("10 Mb/s: {}", diagnosis(&doc));
    assert_eq!(bottleneck(&doc), "wire", "{}", diagnosis(&doc));
    assert_ne!(diagnosis(&doc)["confidence"], "low");
}

#[test]
fn lab_tiny_receive_buffer_is_the_receivers_window() {
    let _alone = alone();
    if skip_unless_root("lab_tiny_receive_buffer_is_the_receivers_window") {
        return;
    }
    // a link much faster than a 4 KiB window can fill at loopback RTTs: at 1 Gbit/s a quiet
    // host's window bound (6 KiB over ~50 µs) came within 1 % of the wire, and the wire won
    let lab = Lab::up("dr", &["--rate", "10G"]);
    let doc = wirerate_in_lab(&lab, &["-t", "3", "-C", "cubic", "--rcvbuf", "4K"]);
    println!("10 Gb/s, 4 KiB receive buffer: {}", diagnosis(&doc));
    assert_eq!(bottleneck(&doc), "receiver_window", "{}", diagnosis(&doc));
    let texts = evidence_texts(&doc).join("\n");
    assert!(
        texts.contains("BDP"),
        "the bandwidth-delay arithmetic is shown: {texts}"
    );
    let advice = diagnosis(&doc)["advice"].to_string();
    assert!(
        advice.contains("tcp_rmem") || advice.contains("rmem_max"),
        "{advice}"
    );
}

#[test]
fn lab_udp_above_the_wire_rate_loses_on_the_path() {
    let _alone = alone();
    if skip_unless_root("lab_udp_above_the_wire_rate_loses_on_the_path") {
        return;
    }
    let lab = Lab::up("du", &["--rate", "10M", "--buffer", "64K"]);
    let doc = wirerate_in_lab(&lab, &["-u", "-b", "12M", "-t", "3"]);
    println!("12 Mbit/s into 10 Mb/s: {}", diagnosis(&doc));
    assert_eq!(bottleneck(&doc), "udp_path", "{}", diagnosis(&doc));
}

#[test]
fn lab_queue_that_drops_gives_real_loss_not_spurious() {
    let _alone = alone();
    if skip_unless_root("lab_queue_that_drops_gives_real_loss_not_spurious") {
        return;
    }
    // an 8 KiB queue on a 100 Mb/s wire 10 ms round trip long: cubic overruns it and the
    // queue drops. (Without the delay cubic fills the wire through that queue, and bbr,
    // which does not take loss as congestion, moves 57 Mbit/s through 41 % loss.)
    let lab = Lab::up(
        "dq",
        &["--rate", "100M", "--delay", "5ms", "--buffer", "8K"],
    );
    let doc = wirerate_in_lab(&lab, &["-t", "3", "-C", "cubic"]);
    let tcp = &doc["summary"]["tcp"];
    println!("100 Mb/s, 8 KiB queue: {tcp}\n{}", diagnosis(&doc));
    let retrans = tcp["retransmits"].as_u64().unwrap_or(0);
    let spurious = tcp["dsack_dups"].as_u64().unwrap_or(0);
    assert!(retrans > 0 && spurious * 2 < retrans, "{tcp}");
    assert_eq!(bottleneck(&doc), "congestion", "{}", diagnosis(&doc));
    let texts = evidence_texts(&doc).join("\n");
    assert!(texts.contains("Mathis"), "{texts}");
}

#[test]
fn json_diagnosis_follows_the_schema() {
    let _alone = alone();
    let schema: Value =
        serde_json::from_str(include_str!("../../../../schema/result.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let out = run(&["run", "-t", "0.5", "--json", "--no-store"], LIMIT_LONG);
    assert!(out.status.success());
    let doc = json(&out);
    let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let mut broken = doc.clone();
    broken["summary"]["diagnosis"]["bottleneck"] = Value::from("gremlins");
    assert!(!validator.is_valid(&broken));
    let mut broken = doc;
    broken["evidence"]["client"]["tcp_ext"]["TCPDSACKRecv"] = Value::from(-1);
    assert!(!validator.is_valid(&broken));
}

#[test]
fn compare_names_how_the_verdicts_differ() {
    let _alone = alone();
    // the store and its journal files go with the directory
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let db_arg = db.to_string_lossy().to_string();
    for (label, extra) in [
        ("paced", &["-u", "-b", "10M", "-t", "1"][..]),
        ("paced", &["-u", "-b", "10M", "-t", "1"][..]),
        ("sock", &["-u", "-b", "0", "--rcvbuf", "8K", "-t", "1"][..]),
        ("sock", &["-u", "-b", "0", "--rcvbuf", "8K", "-t", "1"][..]),
    ] {
        let mut args = vec!["run", "--db", &db_arg, "--label", label, "--json"];
        args.extend_from_slice(extra);
        let out = run(&args, LIMIT_LONG);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = run(
        &["compare", "paced", "sock", "--db", &db_arg, "--json"],
        LIMIT_LONG,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json(&out);
    let diffs = doc["diagnosis_differences"].to_string();
    println!("{diffs}");
    assert!(diffs.contains("A:") && diffs.contains("B:"), "{diffs}");
    assert!(
        diffs.contains("pacing") && diffs.contains("socket buffer"),
        "{diffs}"
    );
    let text = run(&["compare", "paced", "sock", "--db", &db_arg], LIMIT_LONG);
    assert!(String::from_utf8_lossy(&text.stdout).contains("why: A:"));
}

#[test]
fn ttcp_lines_stay_classic() {
    let _alone = alone();
    let out = run(
        &["run", "-t", "0.5", "--format", "ttcp", "--no-store"],
        LIMIT_LONG,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ttcp-r:"), "{text}");
    assert!(
        text.lines().all(|l| l.starts_with("ttcp-")),
        "only ttcp lines: {text}"
    );
}
