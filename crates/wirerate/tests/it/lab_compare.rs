//! `compare` on the lab: repeated runs over two emulated links of different rates, stored
//! under two labels, compared by label. The slower link must come out slower, significantly,
//! and trip `--fail-if-slower`.
//!
//! Needs root (network namespaces, veth, tc) and skips with a message otherwise. Each lab has
//! its own name and is removed when the test ends, however it ends; only processes this test
//! started are ended, by PID; traffic goes only to addresses inside the test's namespaces.

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::ok;

const BIN: &str = env!("CARGO_BIN_EXE_wirerate");
/// Host a's address in a lab.
const SERVER: &str = "10.77.0.1";
const PORT: &str = "5350";
const RUNS: usize = 5;

/// Runs the binary, ending it (by PID) and failing when it outlives `limit`.
fn wirerate(args: &[&str], limit: Duration) -> Output {
    common::run_cmd(Command::new(BIN), args, limit)
}

/// A lab, removed when dropped; its server too.
struct Lab {
    name: String,
    server: Option<Child>,
}

impl Lab {
    fn up(tag: &str, rate: &str) -> Lab {
        let name = format!("{tag}{}", std::process::id() % 100_000);
        let mut lab = Lab { name, server: None };
        let up = ["lab", "up", "--name", &lab.name, "--rate", rate];
        ok(&wirerate(&up, Duration::from_secs(30)), "lab up");
        let server = Command::new(BIN)
            .args(["lab", "exec", "--name", &lab.name, "a", "--"])
            .args([BIN, "serve", "-p", PORT])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the server");
        lab.server = Some(server);
        lab.wait_listening();
        lab
    }

    fn wait_listening(&self) {
        let filter = format!("sport = :{PORT}");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            let ss = [
                "lab", "exec", "--name", &self.name, "a", "--", "ss", "-Hltn", &filter,
            ];
            let out = wirerate(&ss, Duration::from_secs(5));
            if !String::from_utf8_lossy(&out.stdout).trim().is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the server in lab {} does not listen", self.name);
    }

    /// `RUNS` half-second runs from host b, their JSON documents appended one after another.
    fn runs(&self) -> String {
        let mut all = String::new();
        for _ in 0..RUNS {
            let args = [
                "lab", "exec", "--name", &self.name, "b", "--", BIN, "run", SERVER, "-p", PORT,
                "-t", "0.5", "-i", "0", "--json",
            ];
            all.push_str(&ok(&wirerate(&args, Duration::from_secs(30)), "run"));
        }
        all
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut s) = self.server.take() {
            let _ = s.kill();
            let _ = s.wait();
        }
        let _ = Command::new(BIN)
            .args(["lab", "down", "--name", &self.name])
            .output();
    }
}

fn import(db: &Path, file: &Path, text: &str, label: &str) {
    std::fs::write(file, text).unwrap();
    let (db, file) = (db.to_str().unwrap(), file.to_str().unwrap());
    let args = ["import", file, "--label", label, "--db", db];
    ok(&wirerate(&args, Duration::from_secs(10)), "import");
}

#[test]
fn lab_compare_sees_the_slower_wire() {
    let _heavy = common::heavy();
    if !wirerate_lab::is_root() {
        eprintln!("SKIPPED lab_compare_sees_the_slower_wire: lab tests need root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    // one lab at a time: both use the same addresses
    let fast = Lab::up("cf", "10M").runs();
    import(&db, &dir.path().join("fast.json"), &fast, "10M");
    let slow = Lab::up("cs", "5M").runs();
    import(&db, &dir.path().join("slow.json"), &slow, "5M");

    let db = db.to_str().unwrap();
    let limit = Duration::from_secs(10);
    let out = ok(
        &wirerate(&["compare", "10M", "5M", "--json", "--db", db], limit),
        "compare",
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let change = v["change_percent"].as_f64().unwrap();
    // half the wire rate, half the goodput: the model's overhead is the same at both rates
    assert!((-53.0..-47.0).contains(&change), "{out}");
    assert!(v["p_value"].as_f64().unwrap() < 0.01, "{out}");
    let verdict = v["verdict"].as_str().unwrap();
    assert!(
        verdict.starts_with("B is ") && verdict.contains("% slower than A (p"),
        "{out}"
    );
    assert_eq!(v["a"]["runs"], RUNS);
    // where the runs know their link, the rates are named as the difference
    let link = v["differences"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["what"] == "link rate");
    if let Some(d) = link {
        assert_eq!(
            (d["a"].as_str(), d["b"].as_str()),
            (Some("10.00 Mbit/s"), Some("5.00 Mbit/s"))
        );
    }

    let text = wirerate(&["compare", "10M", "5M", "--db", db], limit);
    println!("{}", ok(&text, "compare"));

    let gate = wirerate(
        &["compare", "10M", "5M", "--fail-if-slower", "20", "--db", db],
        limit,
    );
    assert_eq!(gate.status.code(), Some(3));
    let pass = wirerate(
        &["compare", "5M", "10M", "--fail-if-slower", "20", "--db", db],
        limit,
    );
    assert_eq!(pass.status.code(), Some(0), "faster passes the gate");
}
