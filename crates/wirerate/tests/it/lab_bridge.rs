//! End-to-end tests of labs of more than two hosts: a bridge in a switch namespace, each
//! host with its own shaped link. They need root and skip with a message otherwise; each
//! lab is removed when its test ends, however it ends, and only processes the test started
//! are ended, by PID.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::lab::{read_json, skip_unless_root, wirerate, Lab, Proc, BIN};

fn netns_list() -> String {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn lab_of_five_hosts_on_a_bridge_up_status_down() {
    let test = "lab_of_five_hosts_on_a_bridge_up_status_down";
    if skip_unless_root(test) {
        return;
    }
    let lab = Lab::up("br", &["--hosts", "a,b,c,d,e", "--rate", "20M"]);
    let out = wirerate(&["lab", "status", "--name", &lab.name, "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let hosts = v[0]["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 5);
    for (i, h) in hosts.iter().enumerate() {
        let addrs = h["addresses"].to_string();
        assert!(addrs.contains(&format!("10.77.0.{}/24", i + 1)), "{addrs}");
        assert!(h["qdisc"].as_str().unwrap().starts_with("qdisc tbf"), "{h}");
        let port = &h["switch_port"];
        assert_eq!(port["ifname"], format!("p{}", ["a", "b", "c", "d", "e"][i]));
        assert!(
            port["qdisc"].as_str().unwrap().starts_with("qdisc tbf"),
            "{h}"
        );
    }
    let sw = format!("wrs-{}", lab.name);
    assert_eq!(v[0]["state"]["switch_netns"].as_str(), Some(sw.as_str()));
    // the bridge's port towards each host is shaped too
    for h in ["a", "b", "c", "d", "e"] {
        let q = Command::new("tc")
            .args(["-n", &sw, "qdisc", "show", "dev", &format!("p{h}")])
            .output()
            .unwrap();
        let q = String::from_utf8_lossy(&q.stdout);
        assert!(q.contains("tbf") && q.contains("rate 20Mbit"), "{q}");
    }
    // host e reaches host a across the bridge, and no faster than its link
    let srv = lab.temp("server.json");
    let _server = lab.serve("a", &srv);
    let cli = lab.temp("client.json");
    let mut client = Proc::spawn(
        &lab.exec_args(
            "e",
            &[BIN, "run", "10.77.0.1", "-t", "2", "--json", "--no-store"],
        ),
        &cli,
    );
    assert!(client.wait(Duration::from_secs(30)).success());
    let g = read_json(&cli)["summary"]["goodput_bps"].as_f64().unwrap();
    println!(
        "e -> a across the bridge at 20 Mbit/s: {:.2} Mbit/s",
        g / 1e6
    );
    assert!(g > 1e6 && g <= 20e6, "{g}");
    // down removes the hosts and the switch
    let name = lab.name.clone();
    drop(_server);
    drop(lab);
    let left = netns_list();
    assert!(
        !left.contains(&format!("wr-{name}-")) && !left.contains(&sw),
        "{left}"
    );
    // a second up of the same name after a failed one is not blocked by leftovers
    let out = wirerate(&["lab", "up", "--name", &name, "--count", "17"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!netns_list().contains(&name));
}

#[test]
fn lab_disjoint_pairs_on_a_bridge_each_have_their_own_wire() {
    let test = "lab_disjoint_pairs_on_a_bridge_each_have_their_own_wire";
    if skip_unless_root(test) {
        return;
    }
    let lab = Lab::up("bp", &["--count", "4", "--rate", "10M"]);
    let mut servers = Vec::new();
    for h in ["h1", "h3"] {
        servers.push(lab.serve(h, &lab.temp(&format!("{h}-server.log"))));
    }
    // h2 -> h1 and h4 -> h3 at once: two disjoint paths through one bridge
    let run = |from: &str, to: &str| {
        let out = lab.temp(&format!("{from}-client.json"));
        let p = Proc::spawn(
            &lab.exec_args(
                from,
                &[BIN, "run", to, "-t", "3", "-O", "1", "--json", "--no-store"],
            ),
            &out,
        );
        (p, out)
    };
    let (mut c1, o1) = run("h2", "10.77.0.1");
    let (mut c2, o2) = run("h4", "10.77.0.3");
    assert!(c1.wait(Duration::from_secs(30)).success());
    assert!(c2.wait(Duration::from_secs(30)).success());
    let g1 = read_json(&o1)["summary"]["goodput_bps"].as_f64().unwrap();
    let g2 = read_json(&o2)["summary"]["goodput_bps"].as_f64().unwrap();
    println!(
        "at once over one bridge, 10 Mbit/s links: h2->h1 {:.3} Mbit/s, h4->h3 {:.3} Mbit/s \
         (model 9.415 each; sum {:.3})",
        g1 / 1e6,
        g2 / 1e6,
        (g1 + g2) / 1e6
    );
    // each pair has its own wire: together they carry more than one link could
    assert!(g1 <= 10e6 && g2 <= 10e6);
    assert!(
        g1 + g2 > 10e6,
        "the two pairs shared one shaper: {g1} + {g2}"
    );
    drop(servers);
    for f in [o1, o2, lab.temp("h1-server.log"), lab.temp("h3-server.log")] {
        let _ = std::fs::remove_file(f);
    }
}

#[test]
fn lab_bridged_path_delays_every_host_link() {
    let test = "lab_bridged_path_delays_every_host_link";
    if skip_unless_root(test) {
        return;
    }
    // 5 ms on each host's link each way: h2 -> h1 and back crosses four links, 20 ms; h3's
    // link has 20 ms of its own, so h3 -> h1 and back is 50 ms
    let lab = Lab::up(
        "bd",
        &[
            "--count",
            "3",
            "--delay",
            "5ms",
            "--loss",
            "0/1%",
            "--link-delay",
            "h3=20ms",
        ],
    );
    let _server = lab.serve("h1", &lab.temp("server.log"));
    let cli = lab.temp("client.json");
    let rr = |from: &str| {
        let args = [
            BIN,
            "rr",
            "10.77.0.1",
            "-p",
            "5350",
            "-t",
            "2",
            "--json",
            "--no-store",
        ];
        let mut client = Proc::spawn(&lab.exec_args(from, &args), &cli);
        assert!(client.wait(Duration::from_secs(30)).success());
        let r = read_json(&cli);
        let p50_ms = r["summary"]["rr"]["rtt_p50_us"].as_f64().unwrap() / 1e3;
        (r, p50_ms)
    };
    let (r3, p50_ms) = rr("h3");
    println!("h3 -> h1 -> h3 over links of 20 and 5 ms: rr p50 {p50_ms:.2} ms");
    assert!((49.0..62.0).contains(&p50_ms), "{p50_ms} ms");
    let path3 = &r3["summary"]["wire"]["path"];
    assert_eq!(path3["client_to_server"]["delay_ms"], 25.0, "{path3}");
    assert_eq!(path3["server_to_client"]["delay_ms"], 25.0, "{path3}");
    let (r, p50_ms) = rr("h2");
    println!("h2 -> h1 -> h2 over two 5 ms links: rr p50 {p50_ms:.2} ms");
    assert!((19.0..30.0).contains(&p50_ms), "{p50_ms} ms");
    // the result records the path between the two hosts: both links
    let path = &r["summary"]["wire"]["path"];
    for dir in ["client_to_server", "server_to_client"] {
        assert_eq!(path[dir]["delay_ms"], 10.0, "{path}");
        let loss = path[dir]["loss_percent"].as_f64().unwrap();
        assert!((loss - 1.0).abs() < 1e-9, "{path}");
    }
    // status reports each host's link, both ways
    let out = wirerate(&["lab", "status", "--name", &lab.name, "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let links = v[0]["path"]["links"].as_array().expect("path.links");
    let hosts: Vec<&str> = links.iter().map(|l| l["host"].as_str().unwrap()).collect();
    assert_eq!(hosts, ["h1", "h2", "h3"]);
    for l in &links[..2] {
        assert!(l["up"]["forwarded"].as_u64().unwrap() > 40, "{l}");
        assert!(l["down"]["forwarded"].as_u64().unwrap() > 40, "{l}");
        let p50 = l["down"]["delay"].clone();
        assert!(!p50.is_null(), "{l}");
    }
    assert_eq!(links[2]["up"]["dropped_loss"], 0);
    assert!(
        links[2]["up"]["forwarded"].as_u64().unwrap() > 15,
        "{}",
        links[2]
    );
    let _ = std::fs::remove_file(cli);
}
