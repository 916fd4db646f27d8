//! Helpers for the fleet tests: agents (`wirerate serve`) ended by PID, plan files, and
//! what a plan left in its database.

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::bin;
use super::lab::Lab;
use super::run;

/// A `wirerate serve` started by this test, ended by its PID on drop.
pub struct Agent {
    pub child: Child,
}

impl Agent {
    /// `serve -B ip -p port extra…` on loopback, once it accepts connections.
    pub fn loopback(ip: &str, port: u16, extra: &[&str]) -> Agent {
        let p = port.to_string();
        let mut args = vec!["serve", "-B", ip, "-p", &p];
        args.extend_from_slice(extra);
        let child = Command::new(bin())
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn serve");
        let addr: SocketAddr = format!("{ip}:{port}").parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
            assert!(Instant::now() < deadline, "agent on {addr} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Agent { child }
    }

    /// `serve` on a lab host (lab exec becomes the command, so the PID is serve's own).
    pub fn in_lab(lab: &Lab, host: &str, extra: &[&str]) -> Agent {
        let mut args = lab.exec_args(host, &[bin(), "serve", "-p", "5350"]);
        args.extend_from_slice(extra);
        let child = Command::new(bin())
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn serve in the lab");
        lab.wait_listening(host, 5350);
        Agent { child }
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
        }
    }
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub const LOOP_TARGETS: &str = "--third-party-targets=127.0.0.0/8";

/// A plan file in a temporary directory.
pub fn plan_file(dir: &tempfile::TempDir, text: &str) -> PathBuf {
    let p = dir.path().join("plan.toml");
    std::fs::write(&p, text).unwrap();
    p
}

pub fn plan_status(url: &str, name: &str) -> Value {
    let out = run(
        &["plan", "status", "--plan", name, "--db", url, "--json"],
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = super::json(&out);
    // every status document follows its schema
    let schema: Value =
        serde_json::from_str(include_str!("../../../../schema/plan-status.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    doc
}

/// No two tests that share a host ran at the same time (pScheduler's rule).
pub fn assert_no_host_overlap(tests: &[Value]) {
    let span = |t: &Value| {
        (
            t["started_unix_s"].as_f64().unwrap(),
            t["finished_unix_s"].as_f64().unwrap(),
        )
    };
    for (i, a) in tests.iter().enumerate() {
        for b in &tests[i + 1..] {
            let hosts = [&a["from"], &a["to"]];
            if !(hosts.contains(&&b["from"]) || hosts.contains(&&b["to"])) {
                continue;
            }
            let ((s1, e1), (s2, e2)) = (span(a), span(b));
            assert!(e1 <= s2 || e2 <= s1, "tests overlap on a host: {a} and {b}");
        }
    }
}

/// Stored runs with the plan's label: (count, distinct pairs, distinct ids in the queue).
pub fn stored(url: &str, name: &str) -> (i64, i64) {
    let mut c = wirerate_store::pg::connect(url).unwrap();
    let label = format!("plan:{name}");
    let row = c
        .query_one(
            "SELECT count(*), count(DISTINCT repeat_group) FROM runs WHERE label = $1",
            &[&label],
        )
        .unwrap();
    (row.get(0), row.get(1))
}
