//! A lab for end-to-end tests: two namespaces joined by a shaped veth, removed when the
//! test ends however it ends, and processes started in it, ended by PID.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_wirerate");

pub fn skip_unless_root(test: &str) -> bool {
    if wirerate_lab::is_root() {
        return false;
    }
    eprintln!("SKIPPED {test}: lab tests need root (network namespaces, veth, tc)");
    true
}

pub fn skip_without(program: &str, test: &str) -> bool {
    let found = Command::new(program).arg("--version").output().is_ok();
    if !found {
        eprintln!("SKIPPED {test}: '{program}' is not installed");
    }
    !found
}

pub fn wirerate(args: &[&str]) -> Output {
    Command::new(BIN)
        .env(
            "WIRERATE_DB",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("results.db"),
        )
        .args(args)
        .output()
        .expect("run the wirerate binary")
}

/// A lab that is removed when the test ends, however it ends. The labs of the test binary
/// exist one at a time, and beside no other heavy test ([`super::heavy`]): their flows
/// measured at once on two shared cores drift from the model (a find-max step lost at 6 of
/// 9.6 Mbit/s; a receiver counted more than its link carried), and what these tests check
/// is the model.
pub struct Lab {
    pub name: String,
    /// The test's files ([`Lab::temp`]), removed with the lab.
    dir: tempfile::TempDir,
    // released after Drop has taken the lab down
    _one: super::Heavy,
}

impl Lab {
    /// Waits until no other lab (nor other heavy test) of the test binary runs; the turn
    /// goes to [`Lab::adopt`] (or is taken by [`Lab::up`]).
    pub fn turn() -> super::Heavy {
        super::heavy()
    }

    /// A lab the test brought up itself, in its turn: removed when the test ends.
    pub fn adopt(name: String, turn: super::Heavy) -> Lab {
        let dir = tempfile::Builder::new()
            .prefix(&format!("wirerate-test-{name}-"))
            .tempdir()
            .expect("a directory for the lab's files");
        Lab {
            name,
            dir,
            _one: turn,
        }
    }

    pub fn up(tag: &str, extra: &[&str]) -> Lab {
        let one = Self::turn();
        let name = format!("{tag}{}", std::process::id() % 100_000);
        let lab = Self::adopt(name, one);
        let mut args = vec!["lab", "up", "--name", lab.name.as_str()];
        args.extend_from_slice(extra);
        let out = wirerate(&args);
        assert!(
            out.status.success(),
            "lab up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        lab
    }

    /// `wirerate lab exec --name NAME HOST -- ARGS…`
    pub fn exec_args<'a>(&'a self, host: &'a str, cmd: &[&'a str]) -> Vec<&'a str> {
        let mut v = vec!["lab", "exec", "--name", self.name.as_str(), host, "--"];
        v.extend_from_slice(cmd);
        v
    }

    pub fn exec(&self, host: &str, cmd: &[&str]) -> Output {
        wirerate(&self.exec_args(host, cmd))
    }

    /// A file of the test's own, in a directory removed when the lab is.
    pub fn temp(&self, what: &str) -> PathBuf {
        self.dir.path().join(what)
    }

    /// Waits until something listens on `port` in `host`.
    /// Starts `wirerate serve -p 5350` on `host`, its output to `out`, and waits until it
    /// listens.
    #[allow(dead_code)]
    pub fn serve(&self, host: &str, out: &Path) -> Proc {
        let p = Proc::spawn(
            &self.exec_args(host, &[BIN, "serve", "-p", "5350"]),
            &out.to_path_buf(),
        );
        self.wait_listening(host, 5350);
        p
    }

    pub fn wait_listening(&self, host: &str, port: u16) {
        let filter = format!("sport = :{port}");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            let out = self.exec(host, &["ss", "-Hltn", &filter]);
            if !String::from_utf8_lossy(&out.stdout).trim().is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("nothing listens on port {port} in host {host} after 5 s");
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new(BIN)
            .args(["lab", "down", "--name", &self.name])
            .output();
        // the directory of the test's files goes with the field, after the lab
    }
}

/// A process this test started; ended by its PID if it is still running when dropped.
pub struct Proc {
    pub child: Child,
}

impl Proc {
    /// Starts `wirerate ARGS…` with stdout into `out`. `lab exec` becomes the command, so
    /// the PID is the command's own.
    pub fn spawn(args: &[&str], out: &PathBuf) -> Proc {
        let file = File::create(out).expect("create output file");
        let child = Command::new(BIN)
            .env(
                "WIRERATE_DB",
                Path::new(env!("CARGO_TARGET_TMPDIR")).join("results.db"),
            )
            .args(args)
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        Proc { child }
    }

    /// Waits at most `limit`; ends the process and fails the test when it takes longer.
    pub fn wait(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "process {} ran over {limit:?}",
                self.child.id()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn read_json(path: &PathBuf) -> Value {
    let text = std::fs::read_to_string(path).expect("read JSON output");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad JSON ({e}): {text}"))
}

/// Runs `wirerate run` from host b against `wirerate serve` on host a; returns the JSON.
pub fn wirerate_in_lab(lab: &Lab, extra: &[&str]) -> Value {
    let (srv_out, cli_out) = (lab.temp("wr-server.log"), lab.temp("wr-client.json"));
    let _server = Proc::spawn(&lab.exec_args("a", &[BIN, "serve", "-p", "5350"]), &srv_out);
    lab.wait_listening("a", 5350);
    let mut args = vec![BIN, "run", "10.77.0.1", "-p", "5350", "--json"];
    args.extend_from_slice(extra);
    let mut client = Proc::spawn(&lab.exec_args("b", &args), &cli_out);
    assert!(
        client.wait(Duration::from_secs(40)).success(),
        "wirerate run failed"
    );
    read_json(&cli_out)
}
