//! `serve --tls` and `run --tls`: the server's key made on first start and kept, a pinned
//! fingerprint, a wrong pin refused, trust on first use and a changed key refused after it.

use crate::common;

use std::time::Duration;

use common::{run, stderr, ServerProc};

const LIMIT: Duration = Duration::from_secs(30);

fn client(port: u16, extra: &[&str]) -> std::process::Output {
    let p = port.to_string();
    let mut args = vec!["run", "127.0.0.1", "-p", &p, "-n", "1M", "--json", "--tls"];
    args.extend_from_slice(extra);
    run(&args, LIMIT)
}

/// The fingerprint the server printed when it started.
fn fingerprint_of(state: &std::path::Path) -> String {
    let pem = std::fs::read_to_string(state.join("tls-cert.pem")).unwrap();
    let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let der = decode_base64(&b64);
    use sha2::Digest;
    sha2::Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn decode_base64(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=').map(val).collect();
    bytes
        .chunks(4)
        .flat_map(|c| {
            let n = c.iter().fold(0u32, |n, &v| n << 6 | u32::from(v)) << (6 * (4 - c.len()));
            let b = n.to_be_bytes();
            b[1..c.len()].to_vec()
        })
        .collect()
}

#[test]
fn a_pinned_fingerprint_works_and_a_wrong_pin_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let srv = ServerProc::start(&["--tls", "--state-dir", state.to_str().unwrap()]);
    let fp = fingerprint_of(&state);
    let ok = client(srv.port, &["--server-fingerprint", &fp]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    let last = if fp.ends_with('0') { '1' } else { '0' };
    let wrong = format!("{}{last}", &fp[..63]);
    let bad = client(srv.port, &["--server-fingerprint", &wrong]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stderr(&bad).contains(&format!(
            "the server's key is SHA256:{fp}, not SHA256:{wrong}"
        )),
        "{}",
        stderr(&bad)
    );
    // a plain client is told what the server wants
    let p = srv.port.to_string();
    let plain = run(&["run", "127.0.0.1", "-p", &p, "-n", "1M"], LIMIT);
    assert!(
        stderr(&plain).contains("requires TLS"),
        "{}",
        stderr(&plain)
    );
    let log = srv.stop();
    assert!(
        log.contains(&format!("TLS key fingerprint SHA256:{fp}")),
        "{log}"
    );
}

#[test]
fn a_key_met_first_is_remembered_and_a_changed_key_refused() {
    let dir = tempfile::tempdir().unwrap();
    let known = dir.path().join("known_servers");
    let ks = known.to_str().unwrap();
    let state = dir.path().join("a");
    let srv = ServerProc::start(&["--tls", "--state-dir", state.to_str().unwrap()]);
    let port = srv.port;
    let first = client(port, &["--known-servers", ks]);
    assert!(first.status.success(), "{}", stderr(&first));
    let fp = fingerprint_of(&state);
    let text = std::fs::read_to_string(&known).unwrap();
    assert_eq!(text, format!("127.0.0.1:{port} {fp}\n"));
    // the same server again: fine, and nothing more is written
    let again = client(port, &["--known-servers", ks]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(std::fs::read_to_string(&known).unwrap(), text);
    drop(srv);
    // another key on the same address: refused
    let other = dir.path().join("b");
    let srv = ServerProc::start_on(port, &["--tls", "--state-dir", other.to_str().unwrap()]);
    let changed = client(port, &["--known-servers", ks]);
    assert_eq!(changed.status.code(), Some(1));
    assert!(
        stderr(&changed).contains("the server's key has changed"),
        "{}",
        stderr(&changed)
    );
    assert!(!stderr(&changed).contains("goodput"));
    drop(srv);
}
