//! Third-party tests behind TLS and the login, with real processes on loopback: a caller
//! authenticated to the agent (SCRAM or a client certificate) gets a full result; a wrong
//! password, a plain request, and a user the rules do not allow are refused with the reason
//! and no test is run; an agent tests against a server that requires a login with its own
//! credentials, and without them says what it lacks. Every process is ended by its PID.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::{add_user, free_port, stderr, wait_bounded, wr};
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
        common::wait_listening(
            format!("127.0.0.1:{port}").parse().unwrap(),
            &format!("serve {name}"),
        );
        Serve { child, port, log }
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn log(&self) -> Vec<Value> {
        common::log_lines(&self.log)
    }

    /// The log once `pred` holds of it, or after a few seconds.
    fn log_until(&self, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        common::log_until(&self.log, pred)
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

/// `run --from A --to B -n 2M --json --no-store extra…` with WIRERATE_PASSWORD = `password`.
fn third_party(from: &str, to: &str, password: &str, extra: &[&str]) -> Output {
    let mut c = wr();
    c.args([
        "run",
        "--from",
        from,
        "--to",
        to,
        "-n",
        "2M",
        "--json",
        "--no-store",
    ])
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
    assert_eq!(
        b.tests().len(),
        1,
        "B ran a test it should not: {:?}",
        b.log()
    );
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
    let a = Serve::start(
        d,
        "a",
        &with_creds,
        &[("WIRERATE_AGENT_PASSWORD", "a's own")],
    );
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
    tls_only.extend([
        "--agent-tls",
        "--agent-known-servers",
        a_known.to_str().unwrap(),
    ]);
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

/// The agent's key fingerprint, from its first log line.
fn fingerprint(s: &Serve) -> String {
    let log = s.log_until(|l| !l.is_empty());
    let line = log[0]["reason"].as_str().unwrap().to_string();
    let at = line.find("SHA256:").expect("a fingerprint") + 7;
    line[at..at + 64].to_string()
}

#[test]
fn a_caller_with_a_certificate_from_the_agents_ca_is_named_by_it() {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(DnType::CommonName, "test CA");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca = p.self_signed(&ca_key).unwrap();
    let ca_file = d.join("ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(DnType::CommonName, "fleet");
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, &ca, &ca_key).unwrap();
    let (c, k) = (d.join("fleet.pem"), d.join("fleet-key.pem"));
    std::fs::write(&c, cert.pem()).unwrap();
    std::fs::write(&k, key.serialize_pem()).unwrap();
    let limits = d.join("limits.toml");
    std::fs::write(
        &limits,
        "[[rule]]\nname = \"fleet-only\"\nusers = [\"fleet\"]\nthird_party = true\n\
         third_party_targets = [\"127.0.0.0/8\"]\n",
    )
    .unwrap();
    let b = Serve::start(d, "b", &[], &[]);
    let a = Serve::start(
        d,
        "a",
        &[
            "--tls",
            "--client-ca",
            ca_file.to_str().unwrap(),
            "--limits",
            limits.to_str().unwrap(),
        ],
        &[],
    );
    let fp = fingerprint(&a);
    let pinned = ["--tls", "--server-fingerprint", &fp];
    let mut with_cert = pinned.to_vec();
    with_cert.extend(["--client-cert", c.to_str().unwrap()]);
    with_cert.extend(["--client-key", k.to_str().unwrap()]);
    let ok = third_party(&a.addr(), &b.addr(), "", &with_cert);
    assert!(ok.status.success(), "{}", stderr(&ok));
    let log = a.log_until(|l| l.iter().any(|v| v["event"] == "test"));
    let test = log.iter().find(|v| v["event"] == "test").unwrap();
    assert_eq!(test["user"], "fleet", "{log:?}");
    // no certificate: told what to pass, and nothing runs
    let none = third_party(&a.addr(), &b.addr(), "", &pinned);
    refused(&none, &["requires a client certificate", "--client-cert"]);
    let plain = third_party(&a.addr(), &b.addr(), "", &[]);
    refused(&plain, &["only over TLS", "--client-cert FILE"]);
    // a wrong pin: the caller refuses the agent before anything is sent
    let zeros = "0".repeat(64);
    let mut wrong = vec!["--tls", "--server-fingerprint", zeros.as_str()];
    wrong.extend(["--client-cert", c.to_str().unwrap()]);
    wrong.extend(["--client-key", k.to_str().unwrap()]);
    let out = third_party(&a.addr(), &b.addr(), "", &wrong);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--server-fingerprint"),
        "{}",
        stderr(&out)
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(b.tests().len(), 1, "{:?}", b.log());

    // the agent's own certificate towards a target with --client-ca: that target names
    // the agent by it
    let b2 = Serve::start(
        d,
        "b2",
        &["--tls", "--client-ca", ca_file.to_str().unwrap()],
        &[],
    );
    let a2 = Serve::start(
        d,
        "a2",
        &[
            "--allow-third-party",
            "--third-party-targets=127.0.0.0/8",
            "--agent-cert",
            c.to_str().unwrap(),
            "--agent-key",
            k.to_str().unwrap(),
            "--agent-known-servers",
            d.join("a2-known").to_str().unwrap(),
        ],
        &[],
    );
    let ok = third_party(&a2.addr(), &b2.addr(), "", &[]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    let log = b2.log_until(|l| l.iter().any(|v| v["event"] == "test"));
    let test = log.iter().find(|v| v["event"] == "test").unwrap();
    assert_eq!(test["user"], "fleet", "{log:?}");
    // the agent said, in its JSON log, that it remembered b2's key
    let notes = a2.log();
    assert!(
        notes.iter().any(|v| v["reason"]
            .as_str()
            .is_some_and(|r| r.contains("first contact with") && r.contains(&b2.addr()))),
        "{notes:?}"
    );
}

#[test]
fn a_plan_reaches_agents_over_tls_with_its_user() {
    let test = "a_plan_reaches_agents_over_tls_with_its_user";
    let Some(cluster) = wirerate_testpg::Cluster::shared(test) else {
        return;
    };
    let url = cluster.fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let users = d.join("users");
    add_user(&users, "fleet", "fleet pw");
    let agents: Vec<Serve> = ["a", "b"]
        .iter()
        .map(|n| {
            Serve::start(
                d,
                n,
                &[
                    "--tls",
                    "--users",
                    users.to_str().unwrap(),
                    "--allow-third-party",
                    "--third-party-targets=127.0.0.0/8",
                    // each agent tests against the other, which requires a login too
                    "--agent-user",
                    "fleet",
                    "--agent-known-servers",
                    d.join(format!("{n}-known")).to_str().unwrap(),
                ],
                &[("WIRERATE_AGENT_PASSWORD", "fleet pw")],
            )
        })
        .collect();
    let plan = d.join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "name = \"tls\"\n[hosts]\na = \"{}\"\nb = \"{}\"\n[test]\nseconds = 1\n\
             bitrate = \"100M\"\n[auth]\ntls = true\nuser = \"fleet\"\n\
             [auth.fingerprints]\na = \"{}\"\nb = \"{}\"\n",
            agents[0].addr(),
            agents[1].addr(),
            fingerprint(&agents[0]),
            fingerprint(&agents[1])
        ),
    )
    .unwrap();
    let plan_run = |password: &str| {
        let mut c = wr();
        c.args(["plan", "run", plan.to_str().unwrap(), "--db", &url])
            .env("WIRERATE_PASSWORD", password)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        wait_bounded(c.spawn().unwrap(), Duration::from_secs(90))
    };
    let out = plan_run("fleet pw");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}{}", stderr(&out));
    assert!(text.contains("2 done, 0 failed"), "{text}");
    for a in &agents {
        let log = a.log_until(|l| l.iter().any(|v| v["event"] == "test"));
        assert!(
            log.iter()
                .any(|v| v["event"] == "test" && v["user"] == "fleet"),
            "{log:?}"
        );
    }
    // the plan file holds no password
    assert!(!std::fs::read_to_string(&plan).unwrap().contains("fleet pw"));
}
