use super::*;

const FILE: &str = r#"
[[rule]]
name = "lab"
from = ["10.0.0.0/8", "fd00::/8"]

[[rule]]
name = "guests"
from = ["203.0.113.0/24"]
max_duration_s = 30
max_rate = "100M"
max_parallel = 4
protocols = ["tcp"]
directions = ["forward", "reverse"]
tests_per_hour = 2

[[rule]]
name = "blocked"
from = ["198.51.100.7"]
refuse = true

[default]
max_duration_s = 10
max_bytes = "1G"
"#;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn ranges_match_by_prefix() {
    let c = Cidr::parse("203.0.113.0/24").unwrap();
    assert!(c.contains(ip("203.0.113.200")));
    assert!(c.contains(ip("::ffff:203.0.113.9")));
    assert!(!c.contains(ip("203.0.114.1")));
    let c = Cidr::parse("10.128.0.0/9").unwrap();
    assert!(c.contains(ip("10.200.1.1")) && !c.contains(ip("10.1.1.1")));
    assert!(Cidr::parse("0.0.0.0/0").unwrap().contains(ip("1.2.3.4")));
    assert!(Cidr::parse("fd00::/8").unwrap().contains(ip("fd12::1")));
    for bad in ["10.0.0.0/33", "nonsense", "::/129", "1.2.3.4/x"] {
        assert!(Cidr::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn the_first_matching_rule_decides_and_names_itself() {
    let p = Policy::new(Limits::parse(FILE).unwrap());
    let now = Instant::now();
    let long = TestSpec {
        end: End::Time { seconds: 60.0 },
        ..Default::default()
    };
    let why = p.admit(ip("203.0.113.9"), None, &long, now).unwrap_err();
    assert_eq!(
        why,
        "duration 60 s exceeds the 30 s limit of rule 'guests' for 203.0.113.0/24"
    );
    // the lab has no limits
    assert!(p.admit(ip("10.1.2.3"), None, &long, now).is_ok());
    let why = p.admit(ip("198.51.100.7"), None, &long, now).unwrap_err();
    assert!(why.contains("not allowed by rule 'blocked'"), "{why}");
    // everyone else: the default
    let why = p.admit(ip("192.0.2.1"), None, &long, now).unwrap_err();
    assert!(why.contains("rule 'default' for everyone else"), "{why}");
    let huge = TestSpec {
        end: End::Bytes { bytes: 2 << 30 },
        ..Default::default()
    };
    assert!(p
        .admit(ip("192.0.2.1"), None, &huge, now)
        .unwrap_err()
        .contains("limit of rule 'default'"));
}

#[test]
fn every_kind_of_limit_refuses() {
    let p = Policy::new(Limits::parse(FILE).unwrap());
    let now = Instant::now();
    let guest = ip("203.0.113.9");
    let base = TestSpec {
        end: End::Time { seconds: 5.0 },
        direction: Direction::Reverse,
        ..Default::default()
    };
    for (spec, word) in [
        (
            TestSpec {
                parallel: 8,
                ..base.clone()
            },
            "streams",
        ),
        (
            TestSpec {
                protocol: Protocol::Udp,
                len_bytes: 1400,
                rate_bps: Some(1e6),
                ..base.clone()
            },
            "protocol udp",
        ),
        (
            TestSpec {
                direction: Direction::Bidir,
                ..base.clone()
            },
            "direction bidir",
        ),
        (
            TestSpec {
                direction: Direction::Forward,
                ..base.clone()
            },
            "unpaced upload",
        ),
    ] {
        let why = p.admit(guest, None, &spec, now).unwrap_err();
        assert!(why.contains(word), "{word}: {why}");
    }
    // two tests an hour, then the third waits
    let ok = p.admit(guest, None, &base, now).unwrap();
    assert_eq!(ok.pace_bps, Some(100e6));
    p.release(&ok);
    p.release(&p.admit(guest, None, &base, now).unwrap());
    let why = p.admit(guest, None, &base, now).unwrap_err();
    assert!(why.contains("2 tests per hour"), "{why}");
    assert!(p.admit(guest, None, &base, now + HOUR).is_ok());
}

#[test]
fn concurrent_tests_are_counted_until_released() {
    let p = Policy::new(Limits::parse("[default]\nconcurrent = 1\n").unwrap());
    let now = Instant::now();
    let a = p
        .admit(ip("192.0.2.1"), None, &TestSpec::default(), now)
        .unwrap();
    assert!(p
        .admit(ip("192.0.2.2"), None, &TestSpec::default(), now)
        .unwrap_err()
        .contains("concurrent"));
    p.release(&a);
    assert!(p
        .admit(ip("192.0.2.2"), None, &TestSpec::default(), now)
        .is_ok());
}

#[test]
fn users_select_rules() {
    let l = Limits::parse(
        "[[rule]]\nname = \"staff\"\nusers = [\"alice\"]\n\n[default]\nrefuse = true\n",
    )
    .unwrap();
    let p = Policy::new(l);
    let now = Instant::now();
    let s = TestSpec::default();
    assert!(p.admit(ip("192.0.2.1"), Some("alice"), &s, now).is_ok());
    assert!(p.admit(ip("192.0.2.1"), Some("bob"), &s, now).is_err());
    assert!(p.admit(ip("192.0.2.1"), None, &s, now).is_err());
}

#[test]
fn bad_files_say_what_is_wrong() {
    for (text, word) in [
        ("[[rule]]\nfrom = [\"10.0.0.0/40\"]\n", "prefix"),
        ("[[rule]]\nmax_duration_s = -1\n", "max_duration_s"),
        ("[[rule]]\nmax_rate = \"fast\"\n", ""),
        ("[[rule]]\nmax_parallel = 0\n", "max_parallel"),
        ("[[rule]]\nspeed = 3\n", "unknown field"),
        ("[[rule]]\nprotocols = [\"sctp\"]\n", ""),
        ("not toml at all [", ""),
    ] {
        let e = Limits::parse(text).unwrap_err().to_string();
        assert!(e.contains(word), "{text}: {e}");
        assert!(!e.contains('\n'), "{e}");
    }
}

#[test]
fn the_description_lists_every_rule() {
    let d = Limits::parse(FILE).unwrap().describe();
    assert!(d.contains("1. 'lab'; from 10.0.0.0/8, fd00::/8"), "{d}");
    assert!(d.contains("2 tests per client per hour"), "{d}");
    assert!(d.contains("default: 'default'; duration ≤ 10 s"), "{d}");
}

#[test]
fn rules_say_who_may_ask_for_third_party_tests_and_where_to() {
    let l = Limits::parse(
        "[[rule]]\nname = \"mesh\"\nfrom = [\"10.0.0.0/8\"]\nthird_party = true\n\
         third_party_targets = [\"10.77.0.0/24\", \"fd77::/64\"]\n\
         [default]\nthird_party = false\n",
    )
    .unwrap();
    let p = Policy::new(l.clone());
    let mesh = p.third_party(ip("10.1.1.1"), None).unwrap();
    assert_eq!(mesh.of, "rule 'mesh' for 10.0.0.0/8");
    assert_eq!(mesh.allow, Some(true));
    assert_eq!(mesh.targets.len(), 2);
    assert!(mesh.targets[1].contains(ip("fd77::9")));
    let other = p.third_party(ip("192.0.2.1"), None).unwrap();
    assert_eq!((other.allow, other.targets.len()), (Some(false), 0));
    assert!(Policy::default()
        .third_party(ip("10.1.1.1"), None)
        .is_none());
    let d = l.describe();
    assert!(
        d.contains("third-party tests allowed") && d.contains("10.77.0.0/24"),
        "{d}"
    );
    assert!(d.contains("no third-party tests"), "{d}");
    let e = Limits::parse("[[rule]]\nthird_party_targets = [\"10.0.0.0/33\"]\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("third_party_targets") && e.contains("prefix"),
        "{e}"
    );
    let e = Limits::parse("[[rule]]\nthird_party = \"yes\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 2"), "{e}");
}

#[test]
fn an_empty_file_is_refused_and_rule_list_empty_is_no_rules() {
    for text in ["", "\n# nothing yet\n"] {
        let e = Limits::parse(text).unwrap_err().to_string();
        assert!(e.contains("no rules"), "{e}");
    }
    let none = Limits::parse("rule = []\n").unwrap();
    assert!(none.rules.is_empty() && none.default.is_none());
}

#[test]
fn an_empty_file_on_reload_keeps_the_rules() {
    static FLAG: AtomicBool = AtomicBool::new(false);
    let dir = std::env::temp_dir().join(format!("wr-limits-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("limits.toml");
    std::fs::write(&path, FILE).unwrap();
    let policy = Policy::new(Limits::load(&path).unwrap());
    let blocked = ip("198.51.100.7");
    let spec = TestSpec::default();
    assert!(policy.admit(blocked, None, &spec, Instant::now()).is_err());
    std::fs::write(&path, "").unwrap();
    let r = Reload {
        flag: &FLAG,
        limits: Some(path),
        users: None,
    };
    FLAG.store(true, Ordering::SeqCst);
    let lines = r.reload_now(&policy);
    assert!(lines[0].1.contains("the old rules stay"), "{}", lines[0].1);
    assert!(lines[0].1.contains("no rules"), "{}", lines[0].1);
    // the `refuse` rule still holds
    let why = policy
        .admit(blocked, None, &spec, Instant::now())
        .unwrap_err();
    assert!(why.contains("not allowed"), "{why}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn refusals_say_the_figures_apart() {
    let l = Limits::parse("[default]\nmax_duration_s = 2\nmax_rate = \"100M\"\n").unwrap();
    let p = Policy::new(l);
    let now = Instant::now();
    let who = ip("192.0.2.1");
    let long = TestSpec {
        end: End::Time { seconds: 2.5 },
        direction: Direction::Reverse,
        ..Default::default()
    };
    let why = p.admit(who, None, &long, now).unwrap_err();
    assert!(
        why.contains("duration 2.5 s exceeds the 2 s limit"),
        "{why}"
    );
    let fast = TestSpec {
        protocol: Protocol::Udp,
        len_bytes: 1400,
        rate_bps: Some(100_001_000.0),
        end: End::Time { seconds: 1.0 },
        ..Default::default()
    };
    let why = p.admit(who, None, &fast, now).unwrap_err();
    assert!(
        why.contains("rate 100001000 bit/s per stream exceeds the 100000000 bit/s limit"),
        "{why}"
    );
    // figures far apart stay rounded
    let caps = crate::guard::Caps {
        max_duration: std::time::Duration::from_secs(60),
        ..Default::default()
    };
    let why = caps
        .check(&TestSpec {
            end: End::Time { seconds: 600.0 },
            ..Default::default()
        })
        .unwrap_err();
    assert!(
        why.contains("duration 600 s exceeds the server's maximum of 60 s"),
        "{why}"
    );
    let caps = crate::guard::Caps {
        max_duration: std::time::Duration::from_secs(2),
        ..Default::default()
    };
    let why = caps.check(&long).unwrap_err();
    assert!(
        why.contains("duration 2.5 s exceeds the server's maximum of 2 s"),
        "{why}"
    );
}

#[test]
fn an_ipv6_64_is_one_source_and_ipv4_addresses_stay_apart() {
    assert_eq!(source_of(ip("192.0.2.1")), ip("192.0.2.1"));
    assert_ne!(source_of(ip("192.0.2.1")), source_of(ip("192.0.2.2")));
    assert_eq!(source_of(ip("::ffff:192.0.2.1")), ip("192.0.2.1"));
    assert_eq!(source_of(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
    assert_eq!(
        source_of(ip("2001:db8:1:2:ffff:ffff:ffff:ffff")),
        source_of(ip("2001:db8:1:2::1"))
    );
    assert_ne!(
        source_of(ip("2001:db8:1:3::1")),
        source_of(ip("2001:db8:1:2::1"))
    );
}

#[test]
fn tests_per_hour_count_an_ipv6_64_as_one_client() {
    let p = Policy::new(Limits::parse("[default]\ntests_per_hour = 2\n").unwrap());
    let now = Instant::now();
    let s = TestSpec::default();
    for host in ["fd00::1", "fd00::2"] {
        p.release(&p.admit(ip(host), None, &s, now).unwrap());
    }
    let why = p.admit(ip("fd00::3"), None, &s, now).unwrap_err();
    assert!(why.contains("2 tests per hour"), "{why}");
    assert!(p.admit(ip("fd00:0:0:1::1"), None, &s, now).is_ok());
}
