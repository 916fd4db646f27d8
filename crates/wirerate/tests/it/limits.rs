//! `serve --limits`: rules by client address, first match wins, refusals that name the
//! rule, checked with real clients from different 127.0.0.x addresses.

use crate::common;

use std::time::Duration;

use common::{run, stderr, ServerProc};

const LIMIT: Duration = Duration::from_secs(30);

const RULES: &str = r#"
[[rule]]
name = "trusted"
from = ["127.0.0.2/32"]

[[rule]]
name = "guests"
from = ["127.0.0.0/8"]
max_duration_s = 2
max_parallel = 2
directions = ["forward", "reverse"]
tests_per_hour = 2
"#;

fn client(port: u16, from: &str, extra: &[&str]) -> std::process::Output {
    let p = port.to_string();
    let mut args = vec!["run", "127.0.0.1", "-p", &p, "-B", from, "--json"];
    args.extend_from_slice(extra);
    run(&args, LIMIT)
}

#[test]
fn rules_match_by_address_and_refusals_name_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("limits.toml");
    std::fs::write(&file, RULES).unwrap();
    let srv = ServerProc::start(&["--limits", file.to_str().unwrap()]);
    // a guest over the duration limit is told which rule, and why
    let out = client(srv.port, "127.0.0.3", &["-t", "5"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out)
            .contains("duration 5 s exceeds the 2 s limit of rule 'guests' for 127.0.0.0/8"),
        "{}",
        stderr(&out)
    );
    let out = client(srv.port, "127.0.0.3", &["-t", "1", "--bidir"]);
    assert!(stderr(&out).contains("direction bidir is not allowed by rule 'guests'"));
    let out = client(srv.port, "127.0.0.3", &["-t", "1", "-P", "4"]);
    assert!(stderr(&out).contains("4 streams exceed the limit of 2"));
    // within the limits: served, twice an hour
    for _ in 0..2 {
        let out = client(srv.port, "127.0.0.3", &["-n", "1M"]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let out = client(srv.port, "127.0.0.3", &["-n", "1M"]);
    assert!(stderr(&out).contains("2 tests per hour are the limit of rule 'guests'"));
    // the first matching rule wins: the trusted address has no limits
    let out = client(srv.port, "127.0.0.2", &["-t", "3", "-P", "4", "--bidir"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = srv.stop_after("rule 'guests'");
    assert!(log.contains("rule 'guests'"), "{log}");
}

#[test]
fn check_limits_prints_the_rules_or_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.toml");
    std::fs::write(&good, RULES).unwrap();
    let out = run(&["serve", "--check-limits", good.to_str().unwrap()], LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("2. 'guests'; from 127.0.0.0/8; duration ≤ 2 s"),
        "{text}"
    );
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[rule]]\nfrom = [\"127.0.0.0/99\"]\n").unwrap();
    let out = run(&["serve", "--check-limits", bad.to_str().unwrap()], LIMIT);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("prefix must be 0 to 32"),
        "{}",
        stderr(&out)
    );
}
