//! `serve --users` and `run --user`: the login over TLS with real processes on loopback.
//! A right password runs the test under the user's rule; a wrong password and an unknown
//! user are refused with the same words; iperf3 is refused with its own error; SIGHUP
//! reloads the users during a test; a flood of clients that never log in does not stop an
//! authenticated test.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{run, stderr, wait_bounded, wr, ServerProc};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(60);

struct Setup {
    _dir: tempfile::TempDir,
    users: std::path::PathBuf,
    state: std::path::PathBuf,
    known: std::path::PathBuf,
    log: std::path::PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    Setup {
        users: p.join("users"),
        state: p.join("state"),
        known: p.join("known_servers"),
        log: p.join("serve.log"),
        _dir: dir,
    }
}

/// `wirerate user add NAME` with the password from the environment.
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

fn serve(s: &Setup, extra: &[&str]) -> ServerProc {
    let mut args = vec![
        "--tls",
        "--state-dir",
        s.state.to_str().unwrap(),
        "--users",
        s.users.to_str().unwrap(),
        "--log-format",
        "json",
        "--logfile",
        s.log.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    ServerProc::start(&args)
}

fn client_cmd(s: &Setup, port: u16, user: &str, password: &str, extra: &[&str]) -> Command {
    let mut c = wr();
    c.args(["run", "127.0.0.1", "-p", &port.to_string(), "--json", "--tls"])
        .args(["--known-servers", s.known.to_str().unwrap(), "--user", user])
        .args(extra)
        .env("WIRERATE_PASSWORD", password)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn client(s: &Setup, port: u16, user: &str, password: &str, extra: &[&str]) -> std::process::Output {
    wait_bounded(
        client_cmd(s, port, user, password, extra).spawn().unwrap(),
        LIMIT,
    )
}

fn log_lines(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The log's lines once `pred` holds of them, or after a few seconds.
fn log_until(file: &Path, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let log = log_lines(file);
        if pred(&log) || Instant::now() > deadline {
            return log;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn hangup(srv: &ServerProc) {
    let pid = libc::pid_t::try_from(srv.child.id()).unwrap();
    // SAFETY: sends a signal to our own child, by its id.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
}

#[test]
fn the_right_password_runs_under_the_users_rule_and_failures_say_the_same() {
    let s = setup();
    add_user(&s.users, "alice", "correct horse");
    let limits = s.users.with_file_name("limits.toml");
    std::fs::write(
        &limits,
        "[[rule]]\nname = \"alices\"\nusers = [\"alice\"]\nmax_duration_s = 5\n",
    )
    .unwrap();
    let srv = serve(&s, &["--limits", limits.to_str().unwrap()]);
    // the users file holds no password
    let text = std::fs::read_to_string(&s.users).unwrap();
    assert!(!text.contains("correct horse") && text.contains("alice SCRAM-SHA-256$4096:"));

    let ok = client(&s, srv.port, "alice", "correct horse", &["-n", "4M"]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    let result: Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert!(result["summary"]["bytes"].as_u64().unwrap() >= 4 << 20);
    // the user's rule applies: a test longer than it allows is refused
    let long = client(&s, srv.port, "alice", "correct horse", &["-t", "9"]);
    assert!(
        stderr(&long).contains("rule 'alices'"),
        "{}",
        stderr(&long)
    );

    let wrong = client(&s, srv.port, "alice", "wrong horse", &["-n", "1M"]);
    let unknown = client(&s, srv.port, "mallory", "correct horse", &["-n", "1M"]);
    for out in [&wrong, &unknown] {
        assert_eq!(out.status.code(), Some(1));
        assert!(
            stderr(out).contains("login failed: unknown user or wrong password"),
            "{}",
            stderr(out)
        );
    }
    // a client that does not log in is told to
    let p = srv.port.to_string();
    let plain = run(
        &[
            "run",
            "127.0.0.1",
            "-p",
            &p,
            "-n",
            "1M",
            "--tls",
            "--known-servers",
            s.known.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert!(
        stderr(&plain).contains("requires a login: run with --user NAME"),
        "{}",
        stderr(&plain)
    );

    let log = log_until(&s.log, |l| {
        l.iter()
            .filter(|v| v["event"] == "connection" && v["decision"] == "refused")
            .count()
            >= 3
    });
    drop(srv);
    let tests: Vec<_> = log.iter().filter(|v| v["event"] == "test").collect();
    assert_eq!(tests[0]["user"], "alice", "{log:?}");
    assert_eq!(tests[0]["rule"], "alices");
    assert_eq!(tests[0]["decision"], "accepted");
    let refused: Vec<_> = log
        .iter()
        .filter(|v| v["event"] == "connection" && v["decision"] == "refused")
        .collect();
    let why = |user: &str| {
        refused
            .iter()
            .find(|v| v["user"] == user)
            .map(|v| v["reason"].as_str().unwrap().to_string())
    };
    assert_eq!(why("alice").as_deref(), Some("login failed: wrong password"));
    assert_eq!(why("mallory").as_deref(), Some("login failed: unknown user"));
}

#[test]
fn serve_users_without_tls_is_refused_and_a_bad_users_file_names_its_line() {
    let s = setup();
    let out = run(
        &["serve", "--users", "/nonexistent", "-p", "0", "-B", "127.0.0.1"],
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--users needs --tls"), "{}", stderr(&out));
    std::fs::write(&s.users, "# users\nalice SCRAM-SHA-256$4096:AAAA$AAAA:AAAA\n").unwrap();
    let out = run(
        &[
            "serve",
            "--tls",
            "--state-dir",
            s.state.to_str().unwrap(),
            "--users",
            s.users.to_str().unwrap(),
            "-p",
            "0",
        ],
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("line 2: StoredKey"), "{}", stderr(&out));
    // user list/remove read the same file and say the same
    let out = run(&["user", "list", "--users", s.users.to_str().unwrap()], LIMIT);
    assert!(stderr(&out).contains("line 2"), "{}", stderr(&out));
}

#[test]
fn user_add_list_remove_and_the_file_mode() {
    use std::os::unix::fs::PermissionsExt;
    let s = setup();
    add_user(&s.users, "alice", "pw1");
    add_user(&s.users, "bob", "pw2");
    let mode = std::fs::metadata(&s.users).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let f = s.users.to_str().unwrap();
    let list = run(&["user", "list", "--users", f], LIMIT);
    assert_eq!(
        String::from_utf8_lossy(&list.stdout),
        "alice\t4096 iterations\nbob\t4096 iterations\n"
    );
    let rm = run(&["user", "remove", "alice", "--users", f], LIMIT);
    assert!(rm.status.success(), "{}", stderr(&rm));
    let again = run(&["user", "remove", "alice", "--users", f], LIMIT);
    assert_eq!(again.status.code(), Some(1));
    assert!(stderr(&again).contains("no user 'alice'"), "{}", stderr(&again));
    let list = run(&["user", "list", "--users", f], LIMIT);
    assert_eq!(String::from_utf8_lossy(&list.stdout), "bob\t4096 iterations\n");
    // no terminal and no WIRERATE_PASSWORD: a clear error
    let out = run(&["user", "add", "carol", "--users", f], LIMIT);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("WIRERATE_PASSWORD"), "{}", stderr(&out));
    let bad = run(&["user", "add", "a b", "--users", f], LIMIT);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn iperf3_is_refused_with_its_own_error() {
    if Command::new("iperf3").arg("--version").output().is_err() {
        eprintln!("iperf3 is not installed; skipping");
        return;
    }
    let s = setup();
    add_user(&s.users, "alice", "pw");
    let srv = serve(&s, &[]);
    let child = Command::new("iperf3")
        .args(["-c", "127.0.0.1", "-p", &srv.port.to_string(), "-t", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_bounded(child, LIMIT);
    assert!(!out.status.success());
    let said = format!("{}{}", stderr(&out), String::from_utf8_lossy(&out.stdout));
    assert!(said.contains("test authorization failed"), "{said}");
    let log = log_until(&s.log, |l| {
        l.iter().any(|v| v["decision"] == "refused")
    });
    assert!(
        log.iter().any(|v| v["decision"] == "refused"
            && v["reason"].as_str().unwrap_or("").contains("iperf3")),
        "{log:?}"
    );
}

#[test]
fn sighup_reloads_the_users_while_a_test_runs() {
    let s = setup();
    add_user(&s.users, "alice", "pw-a");
    let srv = serve(&s, &[]);
    let running = client_cmd(&s, srv.port, "alice", "pw-a", &["-t", "3"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    add_user(&s.users, "bob", "pw-b");
    hangup(&srv);
    let out = wait_bounded(running, LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(r["summary"]["seconds"].as_f64().unwrap() > 2.5, "{r}");
    let bob = client(&s, srv.port, "bob", "pw-b", &["-n", "1M"]);
    assert!(bob.status.success(), "{}", stderr(&bob));
    // a file that fails to load keeps the users in force
    std::fs::write(&s.users, "bob nonsense\n").unwrap();
    hangup(&srv);
    std::thread::sleep(Duration::from_millis(600));
    let bob = client(&s, srv.port, "bob", "pw-b", &["-n", "1M"]);
    assert!(bob.status.success(), "{}", stderr(&bob));
    let log = log_lines(&s.log);
    let reloads: Vec<_> = log.iter().filter(|v| v["event"] == "reload").collect();
    assert_eq!(reloads.len(), 2, "{log:?}");
    assert!(reloads[0]["reason"].as_str().unwrap().contains("2 user(s)"));
    assert!(reloads[1]["error"]
        .as_str()
        .unwrap()
        .contains("the old users stay: ")
        && reloads[1]["error"].as_str().unwrap().contains("line 1"));
}

/// Connections that never log in: silent ones, junk, a TLS client with no login, and
/// failed logins, from many threads, while an authenticated test runs.
#[test]
fn a_flood_of_unauthenticated_clients_does_not_stop_an_authenticated_test() {
    let s = setup();
    add_user(&s.users, "alice", "pw");
    let srv = serve(&s, &[]);
    let port = srv.port;
    let running = client_cmd(&s, port, "alice", "pw", &["-t", "3"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let stop = Instant::now() + Duration::from_secs(2);
    let flood: Vec<_> = (0..4)
        .map(|i| {
            std::thread::spawn(move || {
                let mut n = 0;
                while Instant::now() < stop {
                    if let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) {
                        let _ = c.set_read_timeout(Some(Duration::from_millis(200)));
                        match i % 2 {
                            0 => {
                                let _ = c.write_all(b"WRRT\x00\x01\x02\x00garbage");
                            }
                            _ => {
                                let _ = c.write_all(b"GET / HTTP/1.0\r\n\r\n");
                            }
                        }
                        let _ = c.read(&mut [0u8; 64]);
                        n += 1;
                    }
                }
                n
            })
        })
        .collect();
    // failed logins, through the real client
    let s2 = &s;
    let bad: Vec<_> = (0..3)
        .map(|_| client_cmd(s2, port, "alice", "nope", &["-n", "1M"]).spawn().unwrap())
        .collect();
    let made: usize = flood.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(made > 10, "{made} connections");
    for b in bad {
        let out = wait_bounded(b, LIMIT);
        assert_eq!(out.status.code(), Some(1));
        let e = stderr(&out);
        assert!(
            e.contains("login failed") || e.contains("busy") || e.contains("too many"),
            "{e}"
        );
    }
    let out = wait_bounded(running, LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(r["summary"]["seconds"].as_f64().unwrap() > 2.5, "{r}");
}

#[test]
fn too_many_failed_logins_from_one_address_are_refused_for_a_while() {
    let s = setup();
    add_user(&s.users, "alice", "pw");
    let srv = serve(&s, &[]);
    for _ in 0..5 {
        let out = client(&s, srv.port, "alice", "nope", &["-n", "1M"]);
        assert!(stderr(&out).contains("login failed"), "{}", stderr(&out));
    }
    // the right password too, now: the address waits out the minute
    let out = client(&s, srv.port, "alice", "pw", &["-n", "1M"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("too many failed logins"),
        "{}",
        stderr(&out)
    );
}
