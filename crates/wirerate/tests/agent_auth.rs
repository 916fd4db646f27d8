//! Third-party tests behind TLS and the login, with real processes on loopback: a caller
//! authenticated to the agent (SCRAM or a client certificate) gets a full result; a wrong
//! password, a plain request, and a user the rules do not allow are refused with the reason
//! and no test is run; an agent tests against a server that requires a login with its own
//! credentials, and without them says what it lacks. Every process is ended by its PID.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, wait_bounded, wr};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(60);

/// A `wirerate serve` on 127.0.0.1 logging JSON to its own file, ended by PID on drop.
struct Serve {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Serve {
    fn start(dir: &Path, name: &str, extra: &[&str], env: &[(&str, &str)]) -> Serve {
        let port = free_port();
        let log = dir.join(format!("{name}.log"));
        let state = dir.join(format!("{name}-state"));
        let p = port.to_string();
        let mut c = wr();
        c.args(["serve", "-B", "127.0.0.1", "-p", &p, "--log-format", "json"])
            .args(["--logfile", log.to_str().unwrap()])
            .args(["--state-dir", state.to_str().unwrap()])
            .args(extra)
            .env_remove("WIRERATE_AGENT_PASSWORD")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (k, v) in env {
            c.env(k, v);
        }
        let child = c.spawn().expect("spawn serve");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
            assert!(Instant::now() < deadline, "serve {name} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Serve { child, port, log }
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn log(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    }

    /// The log once `pred` holds of it, or after a few seconds.
    fn log_until(&self, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let log = self.log();
            if pred(&log) || Instant::now() > deadline {
                return log;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The tests the server ran (its `test` events).
    fn tests(&self) -> Vec<Value> {
        self.log()
            .into_iter()
            .filter(|v| v["event"] == "test")
            .collect()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn add_user(users: &Path, name: &str, password: &str) {
    let out = wr()
        .args(["user", "add", name, "--users", users.to_str().unwrap()])
        .args(["--iterations", "4096"])
        .env("WIRERATE_PASSWORD", password)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `run --from A --to B -n 2M --json --no-store extra…` with WIRERATE_PASSWORD = `password`.
fn third_party(from: &str, to: &str, password: &str, extra: &[&str]) -> Output {
    let mut c = wr();
    c.args(["run", "--from", from, "--to", to, "-n", "2M", "--json", "--no-store"])
        .args(extra)
        .env("WIRERATE_PASSWORD", password)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    wait_bounded(c.spawn().unwrap(), LIMIT)
}

/// A refusal: exit 1, one line, containing every one of `words`.
fn refused(out: &Output, words: &[&str]) -> String {
    let e = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "one line: {e}");
    for w in words {
        assert!(e.contains(w), "{w:?} not in: {e}");
    }
    e
}

#[test]
fn an_authenticated_caller_gets_its_test_and_others_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let users = d.join("users");
    add_user(&users, "fleet", "fleet pw");
    add_user(&users, "bob", "bob pw");
    let limits = d.join("limits.toml");
    std::fs::write(
        &limits,
        "[[rule]]\nname = \"fleet-only\"\nusers = [\"fleet\"]\nthird_party = true\n\
         third_party_targets = [\"127.0.0.0/8\"]\n\n\
         [default]\nname = \"others\"\nthird_party = false\n",
    )
    .unwrap();
    let b = Serve::start(d, "b", &[], &[]);
    let a = Serve::start(
        d,
        "a",
        &[
            "--tls",
            "--users",
            users.to_str().unwrap(),
            "--limits",
            limits.to_str().unwrap(),
        ],
        &[],
    );
    let known = d.join("known_servers");
    let tls = ["--tls", "--known-servers", known.to_str().unwrap()];
    let with = |user: &'static str| -> Vec<&str> {
        let mut v = tls.to_vec();
        v.extend(["--user", user]);
        v
    };

    // the user the rule allows: a full result from the agent, over TLS after the login
    let ok = third_party(&a.addr(), &b.addr(), "fleet pw", &with("fleet"));
    assert!(ok.status.success(), "{}", stderr(&ok));
    let v: Value = serde_json::from_slice(&ok.stdout).unwrap();
    let s = &v["summary"];
    assert!(s["bytes"].as_u64().unwrap() >= 2 << 20, "{s}");
    assert!(s["goodput_bps"].as_f64().unwrap() > 0.0, "{s}");
    assert!(
        s["cpu"]["local"].is_object() && s["cpu"]["remote"].is_object(),
        "{s}"
    );
    assert_eq!(v["env"]["server_addr"].as_str(), Some(b.addr().as_str()));
    // the agent's key was remembered on first use
    let k = std::fs::read_to_string(&known).unwrap();
    assert!(k.starts_with(&a.addr()), "{k}");
    // the agent's log names the user
    let log = a.log_until(|l| l.iter().any(|v| v["event"] == "test"));
    let test = log.iter().find(|v| v["event"] == "test").unwrap();
    assert_eq!(test["user"], "fleet", "{log:?}");
    assert!(
        test["reason"].as_str().unwrap().contains("third-party"),
        "{test}"
    );
    let ran = b.log_until(|l| l.iter().any(|v| v["event"] == "test"));
    assert_eq!(ran.iter().filter(|v| v["event"] == "test").count(), 1);

    // a wrong password: refused, and B sees no test
    let wrong = third_party(&a.addr(), &b.addr(), "not it", &with("fleet"));
    refused(&wrong, &["refused", "login failed"]);
    // a user the rules do not allow: refused, naming the rule
    let bob = third_party(&a.addr(), &b.addr(), "bob pw", &with("bob"));
    refused(&bob, &["not allowed", "rule 'others'"]);
    // a plain request, and a TLS request without a login: told what to pass
    let plain = third_party(&a.addr(), &b.addr(), "", &[]);
    refused(&plain, &["only over TLS", "--tls --user NAME"]);
    let anon = third_party(&a.addr(), &b.addr(), "", &tls);
    refused(&anon, &["requires a login", "--user NAME"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(b.tests().len(), 1, "B ran a test it should not: {:?}", b.log());
    // the agent logged each refusal, with the user where it was known
    let log = a.log();
    let refusals: Vec<&Value> = log.iter().filter(|v| v["decision"] == "refused").collect();
    assert!(
        refusals
            .iter()
            .any(|v| v["user"] == "fleet" && v["reason"].as_str().unwrap().contains("login")),
        "{refusals:?}"
    );
    assert!(
        refusals
            .iter()
            .any(|v| v["user"] == "bob" && v["reason"].as_str().unwrap().contains("others")),
        "{refusals:?}"
    );
    // no password in any log
    let text = std::fs::read_to_string(&a.log).unwrap();
    assert!(!text.contains("fleet pw") && !text.contains("not it"));
}

#[test]
fn the_agent_uses_its_own_credentials_towards_a_target_that_requires_a_login() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let b_users = d.join("b-users");
    add_user(&b_users, "agent-a", "a's own");
    add_user(&b_users, "fleet", "fleet pw");
    let b = Serve::start(
        d,
        "b",
        &["--tls", "--users", b_users.to_str().unwrap()],
        &[],
    );
    let allow = ["--allow-third-party", "--third-party-targets=127.0.0.0/8"];
    let a_known = d.join("a_known");
    let mut with_creds = allow.to_vec();
    with_creds.extend([
        "--agent-user",
        "agent-a",
        "--agent-known-servers",
        a_known.to_str().unwrap(),
    ]);
    let a = Serve::start(d, "a", &with_creds, &[("WIRERATE_AGENT_PASSWORD", "a's own")]);
    let ok = third_party(&a.addr(), &b.addr(), "", &[]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    let v: Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert!(v["summary"]["bytes"].as_u64().unwrap() >= 2 << 20);
    // B saw the agent's user; A remembered B's key
    let log = b.log_until(|l| l.iter().any(|v| v["event"] == "test"));
    let test = log.iter().find(|v| v["event"] == "test").unwrap();
    assert_eq!(test["user"], "agent-a", "{log:?}");
    let k = std::fs::read_to_string(&a_known).unwrap();
    assert!(k.starts_with(&b.addr()), "{k}");

    // an agent without credentials of its own: the failure says what it lacks
    let bare = Serve::start(d, "bare", &allow, &[]);
    let out = third_party(&bare.addr(), &b.addr(), "", &[]);
    refused(&out, &["requires TLS", "--agent-tls", "--agent-user"]);
    // with TLS but no login: likewise
    let mut tls_only = allow.to_vec();
    tls_only.extend(["--agent-tls", "--agent-known-servers", a_known.to_str().unwrap()]);
    let half = Serve::start(d, "half", &tls_only, &[]);
    let out = third_party(&half.addr(), &b.addr(), "", &[]);
    refused(&out, &["requires a login", "--agent-user NAME"]);
    // a wrong password of its own: B refuses the agent, and the caller hears it
    let wrong = Serve::start(
        d,
        "wrong",
        &with_creds,
        &[("WIRERATE_AGENT_PASSWORD", "not it")],
    );
    let out = third_party(&wrong.addr(), &b.addr(), "", &[]);
    refused(&out, &["login failed"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(b.tests().len(), 1, "{:?}", b.log());

    // --agent-user without its password in the environment: refused at start
    let out = wait_bounded(
        Command::new(common::bin())
            .args(["serve", "-p", "0", "--agent-user", "agent-a"])
            .env_remove("WIRERATE_AGENT_PASSWORD")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("WIRERATE_AGENT_PASSWORD"),
        "{}",
        stderr(&out)
    );
}
