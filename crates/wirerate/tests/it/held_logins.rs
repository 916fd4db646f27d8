//! Logins that stop after the server's challenge wait without a thread each: `serve --tls
//! --users` holds them in its waiting room until the client says more or the login's
//! deadline (the idle timeout, from the login's start) passes. Real processes on loopback.

use crate::common;

use std::io::Read;
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{add_user, connect_from, stderr, threads, wait_bounded, wr, ServerProc};
use wirerate_control::tls::{ClientTls, Tls};
use wirerate_proto::auth::{nonce_text, Binding, ScramClient, CHANNEL_BINDING_LABEL};
use wirerate_proto::frame::PREAMBLE_LEN;
use wirerate_proto::{Channel, ClientSession, Preamble};

const LIMIT: Duration = Duration::from_secs(60);

/// The names of a process's threads.
fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .collect()
}

/// A login stopped at the challenge: the connection, the client's session, what the server
/// said, and when.
struct Stopped {
    sock: TcpStream,
    tls: Tls,
    sess: ClientSession,
    said: Vec<u8>,
    at: Instant,
}

/// From `local`: TLS, the preamble inside it and SCRAM's first message as alice with
/// `password`, then reads until the server's challenge, and stops there.
fn stop_at_the_challenge(local: &str, port: u16, password: &str) -> Stopped {
    let mut sock = connect_from(local, port);
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut out = Preamble::new(Channel::TlsControl).emit().to_vec();
    std::io::Write::write_all(&mut sock, &out).unwrap();
    let mut pre = [0u8; PREAMBLE_LEN];
    sock.read_exact(&mut pre).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut tls = ClientTls::default().connect(&mut sock, deadline).unwrap();
    let mut cb = [0u8; 32];
    tls.export(CHANNEL_BINDING_LABEL, &mut cb).unwrap();
    let scram = ScramClient::new(
        "alice",
        password,
        &nonce_text(&[7; 18]),
        Binding::TlsExporter,
    )
    .unwrap();
    let spec = wirerate_core::TestSpec::default();
    let mut sess = ClientSession::with_login(&spec, Instant::now(), Duration::from_secs(20), scram);
    sess.set_channel_binding(cb.to_vec());
    out.clear();
    while let Some(f) = sess.poll_transmit() {
        out.extend(f);
    }
    tls.write_all(&mut sock, &out).unwrap();
    let mut said = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&said).contains("login_challenge") {
        let n = tls.read_by(&mut sock, &mut buf, deadline).unwrap();
        assert!(n > 0, "closed before the challenge: {said:?}");
        said.extend_from_slice(&buf[..n]);
    }
    Stopped {
        sock,
        tls,
        sess,
        said,
        at: Instant::now(),
    }
}

/// Waits until the server closes `sock`; how long after `since` it did.
fn closed_after(sock: &mut TcpStream, since: Instant) -> Duration {
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let _ = sock.read_to_end(&mut Vec::new());
    since.elapsed()
}

#[test]
fn logins_stopped_at_the_challenge_wait_without_a_thread_each_and_end_at_their_deadline() {
    let _heavy = common::heavy();
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    let state = dir.path().join("state");
    let known = dir.path().join("known_servers");
    add_user(&users, "alice", "correct horse");
    let srv = ServerProc::start(&[
        "--tls",
        "--state-dir",
        state.to_str().unwrap(),
        "--users",
        users.to_str().unwrap(),
        "--idle-timeout",
        "6",
        "--max-startups",
        "1000",
    ]);
    let pid = srv.child.id();
    let before = threads(pid);
    // 200 logins from 25 addresses (8 each, the per-address limit) stop at the challenge
    const N: usize = 200;
    let mut held: Vec<Stopped> = (0..N)
        .map(|i| stop_at_the_challenge(&format!("127.0.9.{}", i / 8 + 1), srv.port, "guess"))
        .collect();
    // the last ones are set aside after a short wait for their answer
    std::thread::sleep(Duration::from_millis(400));
    let during = threads(pid);
    assert!(
        during < before + 20,
        "{N} logins held: {before} threads, then {during}"
    );
    // a login that goes on is served meanwhile
    let ok = wait_bounded(
        wr().args(["run", "127.0.0.1", "-p", &srv.port.to_string(), "-n", "1M"])
            .args(["--tls", "--known-servers", known.to_str().unwrap()])
            .args(["--user", "alice", "-B", "127.0.0.2"])
            .env("WIRERATE_PASSWORD", "correct horse")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        LIMIT,
    );
    assert!(ok.status.success(), "{}", stderr(&ok));
    let first_challenged = held[0].at;
    // the held logins end at their deadline (6 s from the login's start), not before
    let h = &mut held[N - 1];
    let last = closed_after(&mut h.sock, h.at);
    assert!(
        last > Duration::from_secs(4) && last < Duration::from_secs(10),
        "the last held login ended {last:?} after its challenge"
    );
    for h in &mut held {
        closed_after(&mut h.sock, first_challenged);
    }
    let all = first_challenged.elapsed();
    let log = srv.stop_after("the login timed out");
    assert!(log.contains("the login timed out"), "{log}");
    eprintln!(
        "{N} logins held at the challenge: {before} -> {during} threads; the last ended \
         {last:?} after its challenge, all by {all:?}"
    );
}

#[test]
fn a_held_login_goes_on_when_the_client_answers() {
    let _heavy = common::heavy();
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    let state = dir.path().join("state");
    add_user(&users, "alice", "correct horse");
    let srv = ServerProc::start(&[
        "--tls",
        "--state-dir",
        state.to_str().unwrap(),
        "--users",
        users.to_str().unwrap(),
    ]);
    let pid = srv.child.id();
    let mut s = stop_at_the_challenge("127.0.0.1", srv.port, "correct horse");
    // long enough to be set aside: the connection has no thread now, the waiting room has it
    std::thread::sleep(Duration::from_millis(600));
    let names = thread_names(pid);
    assert!(
        names.iter().any(|n| n == "wr-waiting") && !names.iter().any(|n| n == "wr-conn"),
        "{names:?}"
    );
    // the proof goes out; the server's proof comes back and the client queues its spec
    s.sess.handle_input(&s.said, Instant::now()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut buf = [0u8; 4096];
    let mut rounds = 0;
    loop {
        let mut out = Vec::new();
        while let Some(f) = s.sess.poll_transmit() {
            out.extend(f);
        }
        if rounds == 1 && !out.is_empty() {
            break;
        }
        if !out.is_empty() {
            s.tls.write_all(&mut s.sock, &out).unwrap();
            rounds += 1;
        }
        let n = s.tls.read_by(&mut s.sock, &mut buf, deadline).unwrap();
        assert!(n > 0, "the server closed the held login");
        s.sess.handle_input(&buf[..n], Instant::now()).unwrap();
    }
    let log = srv.stop();
    assert!(!log.contains("refused"), "{log}");
}
