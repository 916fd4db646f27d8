//! The commands of labs whose links run through the delay line.

use super::*;

#[test]
fn a_delayed_lab_runs_its_link_through_the_switch_unshaped() {
    let s = LabSpec {
        name: "d1".into(),
        hosts: vec!["a".into(), "b".into()],
        link_bps: 50e6,
        buffer_bytes: 1 << 20,
        mtu: 1500,
        path: crate::path::PathSpec {
            ab: crate::path::PathDir {
                delay_us: 25_000,
                ..Default::default()
            },
            ..Default::default()
        },
        link_delay_us: Default::default(),
    };
    assert!(s.validate().is_ok() && s.delayed());
    let cmds = s.delayed_commands();
    let lines: Vec<String> = cmds
        .iter()
        .map(|(p, a)| format!("{p} {}", a.join(" ")))
        .collect();
    // the bottleneck is the delay line's: no end is shaped
    assert!(lines.iter().all(|l| !l.contains("tbf")), "{lines:#?}");
    for want in [
        "ip netns add wrs-d1",
        "ip link add wr0 netns wr-d1-a type veth peer name pa netns wrs-d1",
        "ip link add wr0 netns wr-d1-b type veth peer name pb netns wrs-d1",
        "ip netns exec wr-d1-a ethtool -K wr0 tx off",
        "ip netns exec wrs-d1 ethtool -K pb tso off gso off gro off tx off",
    ] {
        assert!(lines.iter().any(|l| l == want), "{want}: {lines:#?}");
    }
    let links: Vec<(String, String)> = s
        .delay_line_links()
        .into_iter()
        .map(|l| (l.a, l.b))
        .collect();
    assert_eq!(links, [("pa".to_string(), "pb".to_string())]);
    assert!(lines.iter().all(|l| !l.contains("bridge")), "{lines:#?}");
}

#[test]
fn a_bridged_lab_with_a_path_has_a_delay_line_on_every_host_link() {
    let s = LabSpec {
        name: "d3".into(),
        hosts: vec!["a".into(), "b".into(), "c".into()],
        link_bps: 50e6,
        buffer_bytes: 1 << 20,
        mtu: 1500,
        path: crate::path::PathSpec {
            ab: crate::path::PathDir {
                delay_us: 5_000,
                ..Default::default()
            },
            ..Default::default()
        },
        link_delay_us: Default::default(),
    };
    assert!(s.validate().is_ok() && s.delayed() && s.bridged());
    let lines: Vec<String> = s
        .delayed_commands()
        .iter()
        .map(|(p, a)| format!("{p} {}", a.join(" ")))
        .collect();
    assert!(lines.iter().all(|l| !l.contains("tbf")), "{lines:#?}");
    for h in ["a", "b", "c"] {
        for want in [
            format!("ip link add wr0 netns wr-d3-{h} type veth peer name p{h} netns wrs-d3"),
            format!("ip -n wrs-d3 link add d{h} type veth peer name q{h}"),
            format!("ip -n wrs-d3 link set q{h} master br0"),
            format!("ip netns exec wrs-d3 ethtool -K d{h} tso off gso off gro off tx off"),
        ] {
            assert!(lines.contains(&want), "{want}: {lines:#?}");
        }
        // the host's side of the delay line is never on the bridge
        assert!(!lines
            .iter()
            .any(|l| l.contains(&format!("set p{h} master"))));
    }
    let links: Vec<(String, String)> = ["a", "b", "c"]
        .iter()
        .map(|h| (format!("p{h}"), format!("d{h}")))
        .collect();
    let got: Vec<(String, String)> = s
        .delay_line_links()
        .into_iter()
        .map(|l| (l.a, l.b))
        .collect();
    assert_eq!(got, links);
}

#[test]
fn a_host_of_a_bridged_lab_can_have_its_own_link_delay() {
    let mut s = LabSpec {
        name: "d4".into(),
        hosts: vec!["a".into(), "b".into(), "c".into()],
        link_bps: 50e6,
        buffer_bytes: 1 << 20,
        mtu: 1500,
        path: crate::path::PathSpec::default(),
        link_delay_us: [("c".to_string(), 20_000)].into(),
    };
    assert!(s.validate().is_ok() && s.delayed());
    assert_eq!(s.link_path(2).ab.delay_us, 20_000);
    assert_eq!(s.link_path(2).ba.delay_us, 20_000);
    assert!(s.link_path(0).is_plain());
    s.path.ab.jitter_us = 1_000;
    s.path.ab.delay_us = 5_000;
    // the jitter may not exceed a link's delay, the host's own included
    s.link_delay_us.insert("b".into(), 500);
    assert!(s.validate().is_err());
    s.link_delay_us.remove("b");
    s.link_delay_us.insert("x".into(), 1_000);
    assert!(s.validate().is_err());
    s.link_delay_us.remove("x");
    assert!(s.validate().is_ok());
    let two = LabSpec {
        hosts: vec!["a".into(), "c".into()],
        ..s
    };
    assert!(two.validate().is_err());
}
