//! Helpers for the fleet tests: agents (`wirerate serve`) ended by PID, plan files, and
//! what a plan left in its database.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::bin;
use super::lab::Lab;
use super::{run, stderr};

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
        let child = spawn_quiet(&args);
        super::wait_listening(format!("{ip}:{port}").parse().unwrap(), "agent");
        Agent { child }
    }

    /// `serve` on a lab host (lab exec becomes the command, so the PID is serve's own).
    pub fn in_lab(lab: &Lab, host: &str, extra: &[&str]) -> Agent {
        let mut args = lab.exec_args(host, &[bin(), "serve", "-p", "5350"]);
        args.extend_from_slice(extra);
        let child = spawn_quiet(&args);
        lab.wait_listening(host, 5350);
        Agent { child }
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `wirerate args…` with no input and its output dropped.
fn spawn_quiet(args: &[&str]) -> Child {
    Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {args:?}: {e}"))
}

/// `wirerate args…` with no input and its output piped, for `wait_bounded` (or a kill).
pub fn spawn_piped(args: &[&str]) -> Child {
    Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {args:?}: {e}"))
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
        }
    }
}

pub const LOOP_TARGETS: &str = "--third-party-targets=127.0.0.0/8";

/// Agents on 127.0.0.1, 127.0.0.2, … (one for each port) that run third-party tests towards
/// loopback.
pub fn loopback_agents(ports: &[u16]) -> Vec<Agent> {
    ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            Agent::loopback(
                &format!("127.0.0.{}", i + 1),
                *p,
                &["--allow-third-party", LOOP_TARGETS],
            )
        })
        .collect()
}

/// The start of a plan named `name` whose hosts h1, h2, … are the agents of
/// [`loopback_agents`] on these ports.
pub fn loopback_hosts(name: &str, ports: &[u16]) -> String {
    let mut text = format!("name = \"{name}\"\n[hosts]\n");
    for (i, p) in ports.iter().enumerate() {
        text += &format!("h{} = \"127.0.0.{}:{p}\"\n", i + 1, i + 1);
    }
    text
}

/// Two loopback agents and a plan file naming them: a (127.0.0.1) and b (127.0.0.2), tested
/// both ways. The agents stop when this is dropped.
pub struct PairPlan {
    pub plan: String,
    _agents: Vec<Agent>,
    _dir: tempfile::TempDir,
}

/// [`PairPlan`] of a plan named `name`, with `rest` (its [test] and other tables) after
/// its hosts and matrix.
pub fn pair_plan(name: &str, rest: &str) -> PairPlan {
    let (pa, pb) = (super::free_port(), super::free_port());
    let agents = loopback_agents(&[pa, pb]);
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "name = \"{name}\"\n[hosts]\na = \"127.0.0.1:{pa}\"\nb = \"127.0.0.2:{pb}\"\n\
         [matrix]\nkind = \"pairs\"\npairs = [[\"a\", \"b\"]]\nboth_ways = true\n{rest}"
    );
    PairPlan {
        plan: plan_file(&dir, &text).display().to_string(),
        _agents: agents,
        _dir: dir,
    }
}

/// A fresh database in this test process's throwaway cluster; None (the test skips, with
/// the reason printed) where there is no cluster.
pub fn fresh_db(test: &str) -> Option<String> {
    Some(wirerate_testpg::Cluster::shared(test)?.fresh_database())
}

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
    let schema: Value = serde_json::from_str(include_str!(
        "../../../../../schema/plan-status.schema.json"
    ))
    .unwrap();
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
