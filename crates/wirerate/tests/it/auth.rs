//! `serve --users` and `run --user`: the login over TLS with real processes on loopback.
//! A right password runs the test under the user's rule; a wrong password and an unknown
//! user are refused with the same words; iperf3 is refused with its own error; SIGHUP
//! reloads the users during a test; a flood of clients that never log in does not stop an
//! authenticated test.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{add_user, log_lines, log_until, run, stderr, wait_bounded, wr, ServerProc};
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
    c.args([
        "run",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "--json",
        "--tls",
    ])
    .args(["--known-servers", s.known.to_str().unwrap(), "--user", user])
    .args(extra)
    .env("WIRERATE_PASSWORD", password)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    c
}

fn client(
    s: &Setup,
    port: u16,
    user: &str,
    password: &str,
    extra: &[&str],
) -> std::process::Output {
    wait_bounded(
        client_cmd(s, port, user, password, extra).spawn().unwrap(),
        LIMIT,
    )
}

/// A 1 MiB test over TLS against the server on `port`, trusting the setup's known servers,
/// `extra` added (a certificate, say), logging in as nobody.
fn tls_run(s: &Setup, port: u16, extra: &[&str]) -> std::process::Output {
    let p = port.to_string();
    let mut args = vec![
        "run",
        "127.0.0.1",
        "-p",
        &p,
        "-n",
        "1M",
        "--tls",
        "--known-servers",
        s.known.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    run(&args, LIMIT)
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
    assert!(stderr(&long).contains("rule 'alices'"), "{}", stderr(&long));

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
    let plain = tls_run(&s, srv.port, &[]);
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
    assert_eq!(
        why("alice").as_deref(),
        Some("login failed: wrong password")
    );
    assert_eq!(
        why("mallory").as_deref(),
        Some("login failed: unknown user")
    );
}

#[test]
fn serve_users_without_tls_is_refused_and_a_bad_users_file_names_its_line() {
    let s = setup();
    let out = run(
        &[
            "serve",
            "--users",
            "/nonexistent",
            "-p",
            "0",
            "-B",
            "127.0.0.1",
        ],
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--users needs --tls"),
        "{}",
        stderr(&out)
    );
    std::fs::write(
        &s.users,
        "# users\nalice SCRAM-SHA-256$4096:AAAA$AAAA:AAAA\n",
    )
    .unwrap();
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
    assert!(
        stderr(&out).contains("line 2: StoredKey"),
        "{}",
        stderr(&out)
    );
    // user list/remove read the same file and say the same
    let out = run(
        &["user", "list", "--users", s.users.to_str().unwrap()],
        LIMIT,
    );
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
    assert!(
        stderr(&again).contains("no user 'alice'"),
        "{}",
        stderr(&again)
    );
    let list = run(&["user", "list", "--users", f], LIMIT);
    assert_eq!(
        String::from_utf8_lossy(&list.stdout),
        "bob\t4096 iterations\n"
    );
    // no terminal and no WIRERATE_PASSWORD: a clear error
    let out = run(&["user", "add", "carol", "--users", f], LIMIT);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("WIRERATE_PASSWORD"),
        "{}",
        stderr(&out)
    );
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
    let log = log_until(&s.log, |l| l.iter().any(|v| v["decision"] == "refused"));
    assert!(
        log.iter()
            .any(|v| v["decision"] == "refused"
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
    srv.hangup();
    let out = wait_bounded(running, LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(r["summary"]["seconds"].as_f64().unwrap() > 2.5, "{r}");
    let bob = client(&s, srv.port, "bob", "pw-b", &["-n", "1M"]);
    assert!(bob.status.success(), "{}", stderr(&bob));
    // a file that fails to load keeps the users in force
    std::fs::write(&s.users, "bob nonsense\n").unwrap();
    srv.hangup();
    std::thread::sleep(Duration::from_millis(600));
    let bob = client(&s, srv.port, "bob", "pw-b", &["-n", "1M"]);
    assert!(bob.status.success(), "{}", stderr(&bob));
    let log = log_lines(&s.log);
    let reloads: Vec<_> = log.iter().filter(|v| v["event"] == "reload").collect();
    assert_eq!(reloads.len(), 2, "{log:?}");
    assert!(reloads[0]["reason"].as_str().unwrap().contains("2 user(s)"));
    assert!(
        reloads[1]["error"]
            .as_str()
            .unwrap()
            .contains("the old users stay: ")
            && reloads[1]["error"].as_str().unwrap().contains("line 1")
    );
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
    let flood: Vec<_> = (0..6)
        .map(|i| {
            std::thread::spawn(move || {
                let mut n = 0;
                while Instant::now() < stop {
                    if let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) {
                        let _ = c.set_read_timeout(Some(Duration::from_millis(200)));
                        match i % 3 {
                            // TLS asked for, then junk for a handshake
                            0 => {
                                let _ = c.write_all(b"WRRT\x00\x01\x02\x00garbage");
                            }
                            // a plain control connection with a spec and no login
                            1 => {
                                let _ = c.write_all(b"WRRT\x00\x01\x00\x00\x00\x00\x00\x02{}");
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
        .map(|_| {
            client_cmd(s2, port, "alice", "nope", &["-n", "1M"])
                .spawn()
                .unwrap()
        })
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

/// A control connection driven by hand, plain or TLS, with the proto session.
mod by_hand {
    use super::*;
    use std::net::SocketAddr;
    use std::sync::Arc;
    use wirerate_control::tls::{ClientTls, ServerTls, Tls};
    use wirerate_proto::auth::{Binding, ScramClient, Verifier, DATA_TOKEN_LABEL};
    use wirerate_proto::frame::PREAMBLE_LEN;
    use wirerate_proto::{Channel, ClientEvent, ClientSession, DataHello, Preamble};
    use wirerate_server::users::{UserDb, Users};
    use wirerate_server::{Server, ServerConfig};

    pub struct Conn {
        pub sock: TcpStream,
        pub tls: Option<Tls>,
    }

    impl Conn {
        pub fn open(addr: SocketAddr, tls: bool) -> Conn {
            let mut sock = TcpStream::connect(addr).unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            if !tls {
                return Conn { sock, tls: None };
            }
            sock.write_all(&Preamble::new(Channel::TlsControl).emit())
                .unwrap();
            let mut pre = [0u8; PREAMBLE_LEN];
            sock.read_exact(&mut pre).unwrap();
            let t = ClientTls::default()
                .connect(&mut sock, Instant::now() + Duration::from_secs(5))
                .unwrap();
            Conn { sock, tls: Some(t) }
        }

        pub fn send(&mut self, b: &[u8]) {
            match &mut self.tls {
                Some(t) => t.write_all(&mut self.sock, b).unwrap(),
                None => self.sock.write_all(b).unwrap(),
            }
        }

        /// Some bytes, or none at a close or after the read timeout.
        pub fn recv(&mut self) -> Vec<u8> {
            let mut buf = vec![0u8; 65536];
            let n = match &mut self.tls {
                Some(t) => t.read(&mut self.sock, &mut buf),
                None => self.sock.read(&mut buf),
            };
            buf.truncate(n.unwrap_or(0));
            buf
        }
    }

    pub fn server(tls: Option<ServerTls>) -> SocketAddr {
        let mut users = Users::default();
        users
            .set("alice", Verifier::derive("pw", b"alices-salt", 4096))
            .unwrap();
        let cfg = ServerConfig {
            quiet: true,
            tls,
            users: Some(Arc::new(UserDb::new(users).unwrap())),
            idle: Duration::from_secs(3),
            ..Default::default()
        };
        let s = Server::bind("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
        let addr = s.local_addr().unwrap();
        s.spawn().unwrap();
        addr
    }

    fn spec() -> wirerate_core::TestSpec {
        wirerate_core::TestSpec::default()
    }

    /// A recorded login, replayed byte for byte on a new connection, is refused: the server
    /// picked a new nonce, so the recorded proof proves nothing.
    #[test]
    fn a_replayed_login_is_refused() {
        let addr = server(None);
        let scram = ScramClient::new("alice", "pw", "recorded-nonce", Binding::None).unwrap();
        let mut sess = ClientSession::with_login(&spec(), Instant::now(), LIMIT, scram);
        let mut c = Conn::open(addr, false);
        // preamble and login; the challenge makes the session queue its proof
        let mut first = Vec::new();
        while let Some(f) = sess.poll_transmit() {
            first.extend_from_slice(&f);
        }
        c.send(&first);
        let mut proof = Vec::new();
        while proof.is_empty() {
            let got = c.recv();
            assert!(!got.is_empty(), "the server closed before its challenge");
            sess.handle_input(&got, Instant::now()).unwrap();
            while let Some(f) = sess.poll_transmit() {
                proof.extend_from_slice(&f);
            }
        }
        c.send(&proof);
        // the genuine login succeeds: the client checks the server's signature and sends
        // its spec
        let mut spec_sent = false;
        while !spec_sent {
            let got = c.recv();
            assert!(!got.is_empty(), "the genuine login was refused");
            sess.handle_input(&got, Instant::now()).unwrap();
            spec_sent = sess.poll_transmit().is_some();
        }
        drop(c);
        // the replay
        let mut r = Conn::open(addr, false);
        r.send(&first);
        let mut challenge = Vec::new();
        while !String::from_utf8_lossy(&challenge).contains("login_challenge") {
            let got = r.recv();
            assert!(!got.is_empty(), "no challenge");
            challenge.extend(got);
        }
        r.send(&proof);
        let mut answer = Vec::new();
        loop {
            let got = r.recv();
            if got.is_empty() {
                break;
            }
            answer.extend(got);
        }
        let text = String::from_utf8_lossy(&answer);
        assert!(
            text.contains("login failed: unknown user or wrong password"),
            "{text}"
        );
        assert!(!text.contains("login_ok"), "{text}");
    }

    /// A server that does not hold the user's verifier cannot sign the exchange: the client
    /// gives up at its `login_ok` and never sends its spec.
    #[test]
    fn the_client_refuses_a_server_that_cannot_prove_it_knows_the_verifier() {
        use wirerate_proto::frame::{encode, FrameDecoder};
        use wirerate_proto::msg::Msg;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        // an impostor: it answers the login with a challenge of its own making and then
        // claims success
        let impostor = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut pre = [0u8; PREAMBLE_LEN];
            c.read_exact(&mut pre).unwrap();
            let mut out = Preamble::new(Channel::Control).emit().to_vec();
            out.extend(encode(&Msg::Welcome {
                server: "impostor".into(),
            }));
            c.write_all(&out).unwrap();
            let mut dec = FrameDecoder::new(1 << 20);
            let mut heard = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let n = match c.read(&mut buf) {
                    Ok(0) | Err(_) => return heard,
                    Ok(n) => n,
                };
                dec.push(&buf[..n]).unwrap();
                while let Ok(Some(m)) = dec.next_msg() {
                    let reply = match &m {
                        Msg::Login { scram } => {
                            let nonce = scram.split("r=").nth(1).unwrap().to_string();
                            Some(Msg::LoginChallenge {
                                scram: format!("r={nonce}xyz,s=c2FsdA==,i=4096"),
                            })
                        }
                        Msg::LoginProof { .. } => Some(Msg::LoginOk {
                            scram: "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=".into(),
                        }),
                        _ => None,
                    };
                    heard.push(m.name());
                    if let Some(r) = reply {
                        c.write_all(&encode(&r)).unwrap();
                    }
                }
            }
        });
        let cfg = wirerate_control::ClientConfig {
            login: Some(wirerate_control::Login {
                user: "alice".into(),
                password: "pw".into(),
            }),
            idle: Duration::from_secs(5),
            ..Default::default()
        };
        let mut obs = Quiet;
        let e = match wirerate_control::run_test(addr, &spec(), &cfg, &mut obs) {
            Ok(_) => panic!("the impostor was believed"),
            Err(e) => e.full(),
        };
        assert!(e.contains("could not prove"), "{e}");
        let heard = impostor.join().unwrap();
        assert!(!heard.contains(&"spec"), "{heard:?}");
        assert!(heard.contains(&"login_proof"), "{heard:?}");
    }

    struct Quiet;
    impl wirerate_control::Observer for Quiet {}

    /// Over TLS the data token is derived from the TLS session: `accepted` carries none, a
    /// data stream with another session's token is refused, and the session's own works.
    #[test]
    fn a_data_stream_with_another_sessions_token_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let addr = server(Some(ServerTls::load_or_create(dir.path()).unwrap()));
        // another TLS session's token: what someone else's control connection would derive
        let other = Conn::open(addr, true);
        let mut other_token = [0u8; 16];
        other
            .tls
            .as_ref()
            .unwrap()
            .export(DATA_TOKEN_LABEL, &mut other_token)
            .unwrap();
        drop(other);

        let mut c = Conn::open(addr, true);
        let t = c.tls.as_ref().unwrap();
        let mut cb = [0u8; 32];
        t.export(wirerate_proto::auth::CHANNEL_BINDING_LABEL, &mut cb)
            .unwrap();
        let mut token = [0u8; 16];
        t.export(DATA_TOKEN_LABEL, &mut token).unwrap();
        assert_ne!(token, other_token);
        let scram = ScramClient::new("alice", "pw", "n0nce", Binding::TlsExporter).unwrap();
        let mut sess = ClientSession::with_login(&spec(), Instant::now(), LIMIT, scram);
        sess.set_channel_binding(cb.to_vec());
        sess.set_data_token(token);
        // run the exchange until `accepted`, keeping what the server said
        let mut heard = Vec::new();
        let accepted = loop {
            let mut out = Vec::new();
            while let Some(f) = sess.poll_transmit() {
                out.extend_from_slice(&f);
            }
            if !out.is_empty() {
                c.send(&out);
            }
            let got = c.recv();
            assert!(
                !got.is_empty(),
                "closed: {}",
                String::from_utf8_lossy(&heard)
            );
            heard.extend_from_slice(&got);
            let ev = sess.handle_input(&got, Instant::now()).unwrap();
            if let Some(ClientEvent::Accepted(t, _)) = ev.first() {
                break *t;
            }
        };
        assert_eq!(accepted, token);
        let text = String::from_utf8_lossy(&heard);
        assert!(
            text.contains("\"accepted\"") && !text.contains("token"),
            "{text}"
        );
        // the other session's token: the server drops the stream
        let hello = |t| {
            DataHello {
                token: t,
                flow: wirerate_core::spec::Flow::ClientToServer,
                stream_id: 0,
            }
            .emit()
        };
        let mut intruder = TcpStream::connect(addr).unwrap();
        intruder
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        intruder.write_all(&hello(other_token)).unwrap();
        let mut b = [0u8; 16];
        assert!(matches!(intruder.read(&mut b), Ok(0) | Err(_)));
        // the session's own: the test starts
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.write_all(&hello(token)).unwrap();
        let started = loop {
            let got = c.recv();
            if got.is_empty() {
                break false;
            }
            let ev = sess.handle_input(&got, Instant::now()).unwrap();
            if ev.contains(&ClientEvent::Start) {
                break true;
            }
        };
        assert!(started);
    }
}

/// `serve --client-ca`: mutual TLS, the certificate's CN is the user.
mod mutual_tls {
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    };

    struct Ca {
        cert: rcgen::Certificate,
        key: KeyPair,
    }

    fn ca(name: &str) -> Ca {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, name);
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    /// A client certificate for `cn` signed by `ca`, written as PEM; returns (cert, key). Its
    /// serial number is the sum of the name's bytes.
    fn client_cert(dir: &Path, ca: &Ca, cn: &str) -> (String, String) {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.serial_number = Some(serial(cn));
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &ca.cert, &ca.key).unwrap();
        let c = dir.join(format!("{cn}-cert.pem"));
        let k = dir.join(format!("{cn}-key.pem"));
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (c.to_str().unwrap().into(), k.to_str().unwrap().into())
    }

    fn serial(cn: &str) -> rcgen::SerialNumber {
        rcgen::SerialNumber::from(cn.bytes().map(u64::from).sum::<u64>())
    }

    #[test]
    fn a_revoked_certificate_is_refused_and_others_of_the_ca_are_not() {
        let s = setup();
        let dir = s.users.parent().unwrap().to_path_buf();
        let ca = ca("wirerate test CA");
        let ca_file = dir.join("crl-ca.pem");
        std::fs::write(&ca_file, ca.cert.pem()).unwrap();
        let crl = rcgen::CertificateRevocationListParams {
            this_update: rcgen::date_time_ymd(2025, 1, 1),
            next_update: rcgen::date_time_ymd(2099, 1, 1),
            crl_number: rcgen::SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: vec![rcgen::RevokedCertParams {
                serial_number: serial("dave"),
                revocation_time: rcgen::date_time_ymd(2025, 6, 1),
                reason_code: Some(rcgen::RevocationReason::KeyCompromise),
                invalidity_date: None,
            }],
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        }
        .signed_by(&ca.cert, &ca.key)
        .unwrap();
        let crl_file = dir.join("revoked.crl.pem");
        std::fs::write(&crl_file, crl.pem().unwrap()).unwrap();
        let srv = ServerProc::start(&[
            "--tls",
            "--state-dir",
            s.state.to_str().unwrap(),
            "--client-ca",
            ca_file.to_str().unwrap(),
            "--client-crl",
            crl_file.to_str().unwrap(),
        ]);
        let with_cert = |cn: &str| {
            let (c, k) = client_cert(&dir, &ca, cn);
            tls_run(&s, srv.port, &["--client-cert", &c, "--client-key", &k])
        };
        let ok = with_cert("erin");
        assert!(ok.status.success(), "{}", stderr(&ok));
        let revoked = with_cert("dave");
        assert_eq!(revoked.status.code(), Some(1), "{}", stderr(&revoked));
        assert!(
            !stderr(&revoked).contains("goodput"),
            "{}",
            stderr(&revoked)
        );
        // a file that holds no list is refused at start, naming it
        let bad = run(
            &[
                "serve",
                "--tls",
                "--state-dir",
                s.state.to_str().unwrap(),
                "--client-ca",
                ca_file.to_str().unwrap(),
                "--client-crl",
                ca_file.to_str().unwrap(),
                "-p",
                "0",
            ],
            LIMIT,
        );
        assert_ne!(bad.status.code(), Some(0), "{}", stderr(&bad));
        assert!(stderr(&bad).contains("crl-ca.pem"), "{}", stderr(&bad));
    }

    #[test]
    fn a_certificate_from_the_ca_names_the_user_and_others_are_refused() {
        let s = setup();
        let dir = s.users.parent().unwrap().to_path_buf();
        let good = ca("wirerate test CA");
        let ca_file = dir.join("ca.pem");
        std::fs::write(&ca_file, good.cert.pem()).unwrap();
        let srv = ServerProc::start(&[
            "--tls",
            "--state-dir",
            s.state.to_str().unwrap(),
            "--client-ca",
            ca_file.to_str().unwrap(),
            "--log-format",
            "json",
            "--logfile",
            s.log.to_str().unwrap(),
        ]);
        let (c, k) = client_cert(&dir, &good, "carol");
        let ok = tls_run(
            &s,
            srv.port,
            &["--json", "--client-cert", &c, "--client-key", &k],
        );
        assert!(ok.status.success(), "{}", stderr(&ok));
        // no certificate: told in words; one from another CA: refused in the TLS handshake
        let none = tls_run(&s, srv.port, &["--json"]);
        assert_eq!(none.status.code(), Some(1), "{}", stderr(&none));
        assert!(
            stderr(&none).contains("requires a client certificate"),
            "{}",
            stderr(&none)
        );
        let other = ca("someone else");
        let (c2, k2) = client_cert(&dir, &other, "mallory");
        let bad = tls_run(
            &s,
            srv.port,
            &["--json", "--client-cert", &c2, "--client-key", &k2],
        );
        assert_eq!(bad.status.code(), Some(1), "{}", stderr(&bad));
        assert!(!stderr(&bad).contains("goodput"), "{}", stderr(&bad));
        assert!(
            stderr(&bad).contains("not signed by its CA"),
            "{}",
            stderr(&bad)
        );
        let log = log_until(&s.log, |l| l.iter().any(|v| v["event"] == "test"));
        let test = log.iter().find(|v| v["event"] == "test").unwrap();
        assert_eq!(test["user"], "carol", "{log:?}");
        assert!(!log.iter().any(|v| v["user"] == "mallory"), "{log:?}");
        // --users and --client-ca together: refused at start
        let both = run(
            &[
                "serve",
                "--tls",
                "--client-ca",
                ca_file.to_str().unwrap(),
                "--users",
                "x",
                "-p",
                "0",
            ],
            LIMIT,
        );
        assert_eq!(both.status.code(), Some(2));
        assert!(stderr(&both).contains("choose one"), "{}", stderr(&both));
    }
}
