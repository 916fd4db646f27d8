//! The Why where CPU sets the rate on one end: a receiver that shares its core with a busy
//! process (in a lab), and a receiver held by its cgroup's CPU quota. They need root (a lab,
//! a cgroup) and skip with a message otherwise; each removes what it made (the lab, the
//! cgroup) and ends only the processes it started, by PID. The verdicts are asserted, never
//! the rates.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::lab::{read_json, skip_unless_root, Lab, Proc, BIN};
use common::{run, ServerProc};
use serde_json::Value;
use wirerate_probe::cgroup::{locate_self, Version};

/// The tests of this file load the host's cores on purpose (a busy process, a quota), so
/// they never run at once, nor beside another heavy test: each would read the other's load
/// as its own verdict.
fn alone() -> common::Heavy {
    common::heavy()
}

fn diagnosis(r: &Value) -> &Value {
    &r["summary"]["diagnosis"]
}

/// The lab's receiver (`serve` in host a) and a busy shell share core 0, the busy one at
/// nice −19; the sender runs on core 1 in host b, at nice −19 too. The receiving thread gets about 1.4 % of
/// its core (the scheduler's weights: 1 024 against 71 755), so it waits for the CPU most
/// of the time it wants it.
#[test]
fn lab_a_receiver_sharing_its_core_with_a_busy_process_is_receiver_cpu() {
    let test = "lab_a_receiver_sharing_its_core_with_a_busy_process_is_receiver_cpu";
    let _alone = alone();
    if skip_unless_root(test) {
        return;
    }
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("SKIPPED {test}: needs two cores");
        return;
    }
    let lab = Lab::up("cbusy", &["--rate", "10G", "--buffer", "4M"]);
    let (srv_out, hog_out, cli_out) = (
        lab.temp("busy-server.log"),
        lab.temp("busy-hog.log"),
        lab.temp("busy-client.json"),
    );
    let _server = Proc::spawn(
        &lab.exec_args("a", &["taskset", "-c", "0", BIN, "serve", "-p", "5350"]),
        &srv_out,
    );
    lab.wait_listening("a", 5350);
    let hog = [
        "taskset",
        "-c",
        "0",
        "nice",
        "-n",
        "-19",
        "sh",
        "-c",
        "while :; do :; done",
    ];
    let _hog = Proc::spawn(&lab.exec_args("a", &hog), &hog_out);
    // the sender as far ahead of other work on its core as the busy shell is on the
    // receiver's: what it waits for is then the receiver, not the host's other load
    let args = [
        "taskset",
        "-c",
        "1",
        "nice",
        "-n",
        "-19",
        BIN,
        "run",
        "10.77.0.1",
        "-p",
        "5350",
        "-t",
        "4",
        "-O",
        "1",
        "--json",
        "--no-store",
    ];
    let mut client = Proc::spawn(&lab.exec_args("b", &args), &cli_out);
    assert!(
        client.wait(Duration::from_secs(40)).success(),
        "wirerate run failed"
    );
    let r = read_json(&cli_out);
    let d = diagnosis(&r);
    println!("{}", d["verdict"]);
    assert_eq!(d["bottleneck"], "receiver_cpu", "{d}");
    assert!(
        d["evidence"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("receiving thread") && t.contains("waited for a CPU")),
        "{d}"
    );
    for f in [srv_out, hog_out, cli_out] {
        let _ = std::fs::remove_file(f);
    }
}

/// A child cgroup with a CPU quota, removed on drop (after the processes in it ended).
struct QuotaCgroup {
    dir: PathBuf,
}

impl QuotaCgroup {
    /// A cgroup beside this process's own, at `cores` of CPU; None where there is no cpu
    /// controller or the cgroup cannot be made.
    fn new(cores: f64) -> Option<QuotaCgroup> {
        let own = locate_self()?;
        let dir = own
            .mount
            .join(format!("wirerate-test-quota-{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let cg = QuotaCgroup { dir };
        let quota = ((cores * 100_000.0) as u64).to_string();
        let set = |file: &str, v: &str| std::fs::write(cg.dir.join(file), v).is_ok();
        let ok = match own.version {
            Version::V1 => set("cpu.cfs_period_us", "100000") && set("cpu.cfs_quota_us", &quota),
            Version::V2 => {
                let _ = std::fs::write(own.mount.join("cgroup.subtree_control"), "+cpu");
                set("cpu.max", &format!("{quota} 100000"))
            }
        };
        ok.then_some(cg)
    }

    fn enter(&self, pid: u32) {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string()).expect("move into cgroup");
    }

    fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for QuotaCgroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("could not remove {}", self.dir.display());
    }
}

/// `wirerate serve` in a cgroup of 0.05 cores, a client outside it on the same host: the
/// verdict is the receiver's CPU, named by the quota, with the periods it was throttled in.
#[test]
fn a_cpu_quota_on_the_receiver_is_named_as_a_quota() {
    let test = "a_cpu_quota_on_the_receiver_is_named_as_a_quota";
    let _alone = alone();
    if skip_unless_root(test) {
        return;
    }
    let Some(cg) = QuotaCgroup::new(0.05) else {
        eprintln!("SKIPPED {test}: no cgroup with a cpu controller can be made here");
        return;
    };
    let server = ServerProc::start(&[]);
    cg.enter(server.child.id());
    let port = server.port.to_string();
    let out = run(
        &[
            "run",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "4",
            "-O",
            "1",
            "--json",
            "--no-store",
        ],
        Duration::from_secs(60),
    );
    drop(server);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let d = diagnosis(&r);
    println!("{} ({})", d["verdict"], cg.path().display());
    assert_eq!(d["bottleneck"], "receiver_cpu", "{d}");
    let verdict = d["verdict"].as_str().unwrap_or("");
    assert!(
        verdict.contains("CPU quota of 0.05 cores throttled its receiving end"),
        "{d}"
    );
    let cgroup = &r["evidence"]["server"]["cgroup"];
    assert!(cgroup["nr_throttled"].as_u64().unwrap_or(0) > 0, "{cgroup}");
    assert!(
        d["evidence"][0]["source"] == "cgroup cpu.stat"
            && d["evidence"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("periods")),
        "{d}"
    );
}

/// The same quota on a lab's receiver (0.1 cores, `serve` in host a): `ip netns exec` hides
/// the cgroup mounts under a sysfs of its own, so the server finds its cgroup through an
/// ancestor's root, and names the quota, not only the wait it causes.
#[test]
fn lab_a_cpu_quota_on_the_receiver_is_named_as_a_quota() {
    let test = "lab_a_cpu_quota_on_the_receiver_is_named_as_a_quota";
    let _alone = alone();
    if skip_unless_root(test) {
        return;
    }
    let lab = Lab::up("cquota", &["--rate", "10G", "--buffer", "4M"]);
    let Some(cg) = QuotaCgroup::new(0.1) else {
        eprintln!("SKIPPED {test}: no cgroup with a cpu controller can be made here");
        return;
    };
    let (srv_out, cli_out) = (lab.temp("quota-server.log"), lab.temp("quota-client.json"));
    let server = Proc::spawn(&lab.exec_args("a", &[BIN, "serve", "-p", "5350"]), &srv_out);
    lab.wait_listening("a", 5350);
    // `lab exec` becomes the command: the PID is the server's
    cg.enter(server.child.id());
    let args = [
        BIN,
        "run",
        "10.77.0.1",
        "-p",
        "5350",
        "-t",
        "4",
        "-O",
        "1",
        "--json",
        "--no-store",
    ];
    let mut client = Proc::spawn(&lab.exec_args("b", &args), &cli_out);
    assert!(
        client.wait(Duration::from_secs(40)).success(),
        "wirerate run failed"
    );
    drop(server);
    let r = read_json(&cli_out);
    let d = diagnosis(&r);
    println!("{} ({})", d["verdict"], cg.path().display());
    assert_eq!(d["bottleneck"], "receiver_cpu", "{d}");
    assert!(
        d["verdict"]
            .as_str()
            .is_some_and(|v| v.contains("CPU quota of 0.10 cores throttled its receiving end")),
        "{d}"
    );
    let cgroup = &r["evidence"]["server"]["cgroup"];
    assert!(cgroup["nr_throttled"].as_u64().unwrap_or(0) > 0, "{cgroup}");
}
