//! What a lab is made of, validated, and the names and commands derived from it. Pure:
//! nothing here touches the system, so every rule is unit-tested.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use wirerate_core::wire::{
    INTER_FRAME_GAP_BYTES, MAC_HEADER_BYTES, MAX_MTU, MIN_FRAME_BYTES, MIN_MTU_IPV4,
    PER_FRAME_OVERHEAD_BYTES, PREAMBLE_SFD_BYTES,
};

use crate::path::PathSpec;
use crate::LabError;

/// Every namespace a lab makes starts with this, then `NAME-HOST`.
pub const NETNS_PREFIX: &str = "wr-";
/// The veth end inside each host's namespace.
pub const IFNAME: &str = "wr0";
/// The lowest and highest link rates the shaper is asked for, bit/s.
pub const MIN_RATE_BPS: f64 = 64e3;
pub const MAX_RATE_BPS: f64 = 100e9;
/// What tbf adds to each packet's length (MAC header included): preamble, FCS and gap.
pub const TBF_OVERHEAD_BYTES: u32 = PER_FRAME_OVERHEAD_BYTES;
/// The least tbf charges a packet: a minimum frame plus preamble and gap.
pub const TBF_MPU_BYTES: u32 = MIN_FRAME_BYTES + PREAMBLE_SFD_BYTES + INTER_FRAME_GAP_BYTES;

/// The least default queue, bytes: at 10 Mbit/s it lets TCP reach the wire model.
pub const DEFAULT_BUFFER_BYTES: u64 = 64 * 1024;
/// The default queue holds at least this long at the link rate (from 131 Mbit/s up it is
/// more than [`DEFAULT_BUFFER_BYTES`]), so fast links get a queue that TCP can fill.
pub const DEFAULT_BUFFER_MS: f64 = 4.0;

/// The most hosts a lab has: addresses stay in one /24 and a bridge stays small.
pub const MAX_HOSTS: usize = 16;
/// The bridge inside a lab's switch namespace.
pub const BRIDGE: &str = "br0";
/// Prefix of a lab's switch namespace (`wrs-LAB`): not `wr-`, so it is never read as a host.
pub const SWITCH_PREFIX: &str = "wrs-";

/// A lab as asked for: two hosts joined by one full-duplex shaped link, or three to
/// [`MAX_HOSTS`] hosts, each joined by its own shaped link to a bridge in a switch namespace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LabSpec {
    pub name: String,
    pub hosts: Vec<String>,
    pub link_bps: f64,
    /// Queue limit at each egress, bytes of packets (MAC header included).
    pub buffer_bytes: u64,
    pub mtu: u32,
    /// Delay, jitter, loss and reordering, applied by the delay line: to the link of a
    /// two-host lab, or to each host's link to the bridge of a bridged one.
    #[serde(default, skip_serializing_if = "PathSpec::is_plain")]
    pub path: PathSpec,
    /// In a bridged lab, hosts whose link has its own one-way delay, µs, each way (in
    /// place of `path`'s delays).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub link_delay_us: BTreeMap<String, u64>,
}

impl LabSpec {
    /// Checks names, rate, MTU and buffer; the error says which and why.
    pub fn validate(&self) -> Result<(), LabError> {
        check_ident("lab name", &self.name, 16)?;
        if !(2..=MAX_HOSTS).contains(&self.hosts.len()) {
            return Err(invalid(format!(
                "a lab has 2 to {MAX_HOSTS} hosts, not {}",
                self.hosts.len()
            )));
        }
        for (i, h) in self.hosts.iter().enumerate() {
            check_ident("host name", h, 12)?;
            if self.hosts[..i].contains(h) {
                return Err(invalid(format!("host names must differ, '{h}' is twice")));
            }
        }
        if !(self.link_bps.is_finite() && (MIN_RATE_BPS..=MAX_RATE_BPS).contains(&self.link_bps)) {
            return Err(invalid(format!(
                "rate {} bit/s is outside {MIN_RATE_BPS} to {MAX_RATE_BPS} bit/s",
                self.link_bps
            )));
        }
        if !(MIN_MTU_IPV4..=MAX_MTU).contains(&self.mtu) {
            return Err(invalid(format!(
                "MTU {} is outside {MIN_MTU_IPV4} to {MAX_MTU}",
                self.mtu
            )));
        }
        let least = min_buffer_bytes(self.mtu);
        if self.buffer_bytes < least {
            return Err(invalid(format!(
                "buffer {} bytes is below {least}, the least queue at MTU {}: the shaper's \
                 bucket of one frame plus one frame waiting",
                self.buffer_bytes, self.mtu
            )));
        }
        if self.buffer_bytes > u64::from(u32::MAX) {
            return Err(invalid(format!(
                "buffer {} bytes is too large",
                self.buffer_bytes
            )));
        }
        self.path.validate().map_err(|e| invalid(e.to_string()))?;
        if !self.link_delay_us.is_empty() && !self.bridged() {
            return Err(invalid(
                "--link-delay is for a lab of three or more hosts; two take --delay AB/BA"
                    .to_string(),
            ));
        }
        for host in self.link_delay_us.keys() {
            let Some(i) = self.hosts.iter().position(|h| h == host) else {
                return Err(invalid(format!(
                    "--link-delay: the lab has no host '{host}'"
                )));
            };
            let p = self.link_path(i);
            p.validate()
                .map_err(|e| invalid(format!("--link-delay {host}: {e}")))?;
        }
        Ok(())
    }

    /// The delay line's links as (port of the host's side, port of the far side), both in
    /// the switch namespace: one between hosts a and b, or in a bridged lab one per host,
    /// from its link's end `pHOST` to `dHOST`, whose veth peer `qHOST` is the bridge's port.
    pub fn delay_line_links(&self) -> Vec<crate::delayline::LineLink> {
        let link = |a, b, i: usize| crate::delayline::LineLink {
            a,
            b,
            host: self.hosts[i].clone(),
            path: self.link_path(i),
        };
        if self.bridged() {
            (0..self.hosts.len())
                .map(|i| link(port_name(&self.hosts[i]), line_port_name(&self.hosts[i]), i))
                .collect()
        } else {
            vec![link(
                port_name(&self.hosts[0]),
                port_name(&self.hosts[1]),
                0,
            )]
        }
    }

    /// Whether the hosts' link runs through the delay line (a path was asked for).
    pub fn delayed(&self) -> bool {
        !self.path.is_plain() || !self.link_delay_us.is_empty()
    }

    /// What the delay line applies on host `i`'s link to the bridge (`ab` from the host to
    /// the switch): the lab's path, with the host's own delay each way when it has one.
    pub fn link_path(&self, i: usize) -> PathSpec {
        let mut p = self.path;
        if let Some(&d) = self.hosts.get(i).and_then(|h| self.link_delay_us.get(h)) {
            (p.ab.delay_us, p.ba.delay_us) = (d, d);
        }
        p
    }

    pub fn netns(&self, host_index: usize) -> String {
        netns_name(&self.name, &self.hosts[host_index])
    }

    /// Whether the hosts meet on a bridge (three or more) rather than one veth pair.
    pub fn bridged(&self) -> bool {
        self.hosts.len() > 2
    }

    /// The switch namespace of a bridged lab.
    pub fn switch_netns(&self) -> String {
        switch_netns_name(&self.name)
    }

    /// Every command that builds a bridged lab, in order, as (program, arguments). The
    /// namespaces are made first (`ip netns add`), one per host and then the switch's.
    /// Each host's link is a veth pair born with one end (`wr0`) in the host and the
    /// other (`pHOST`) in the switch, enslaved to the bridge; both ends are shaped, so
    /// each host has its own full-duplex wire to the switch.
    pub fn bridge_commands(&self) -> Vec<(&'static str, Vec<String>)> {
        let sw = self.switch_netns();
        let mtu = self.mtu.to_string();
        let mut cmds: Vec<(&'static str, Vec<String>)> = Vec::new();
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        for i in 0..self.hosts.len() {
            cmds.push(("ip", v(&["netns", "add", &self.netns(i)])));
        }
        cmds.push(("ip", v(&["netns", "add", &sw])));
        cmds.push(("ip", v(&["-n", &sw, "link", "set", "lo", "up"])));
        cmds.push(add_bridge(&sw));
        cmds.push(("ip", v(&["-n", &sw, "link", "set", BRIDGE, "mtu", &mtu])));
        for (i, host) in self.hosts.iter().enumerate() {
            let ns = self.netns(i);
            let port = port_name(host);
            cmds.push((
                "ip",
                v(&[
                    "link", "add", IFNAME, "netns", &ns, "type", "veth", "peer", "name", &port,
                    "netns", &sw,
                ]),
            ));
            cmds.extend(self.end_commands(&ns, IFNAME, Some(i), true));
            cmds.extend(self.end_commands(&sw, &port, None, true));
            cmds.push((
                "ip",
                v(&["-n", &sw, "link", "set", &port, "master", BRIDGE]),
            ));
        }
        for (i, host) in self.hosts.iter().enumerate() {
            cmds.push((
                "ip",
                v(&["-n", &self.netns(i), "link", "set", IFNAME, "up"]),
            ));
            cmds.push(("ip", v(&["-n", &sw, "link", "set", &port_name(host), "up"])));
        }
        cmds.push(("ip", v(&["-n", &sw, "link", "set", BRIDGE, "up"])));
        cmds
    }

    /// Every command that builds a lab whose links run through the delay line, in order.
    /// The switch namespace (`wrs-NAME`) holds no address: host a's link ends there in
    /// `pa`, host b's in `pb`, and the delay line forwards between the two; with three or
    /// more hosts, it forwards between each `pHOST` and `dHOST`, whose peer is on the
    /// bridge (see [`LabSpec::delay_line_links`]). No end is shaped: the delay line is the bottleneck (rate, queue, then delay, as
    /// a router and its line), so its queue fills as a router's does. Offloads are off on
    /// every end so the delay line reads frames, never merged super-frames.
    pub fn delayed_commands(&self) -> Vec<(&'static str, Vec<String>)> {
        let sw = self.switch_netns();
        let mtu = self.mtu.to_string();
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut cmds: Vec<(&'static str, Vec<String>)> = Vec::new();
        for i in 0..self.hosts.len() {
            cmds.push(("ip", v(&["netns", "add", &self.netns(i)])));
        }
        cmds.push(("ip", v(&["netns", "add", &sw])));
        cmds.push(("ip", v(&["-n", &sw, "link", "set", "lo", "up"])));
        // the switch's kernel has no address and must not answer or solicit on the ports
        cmds.push((
            "ip",
            v(&[
                "netns",
                "exec",
                &sw,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
            ]),
        ));
        cmds.push((
            "ip",
            v(&[
                "netns",
                "exec",
                &sw,
                "sysctl",
                "-qw",
                "net.ipv6.conf.default.disable_ipv6=1",
            ]),
        ));
        for (i, host) in self.hosts.iter().enumerate() {
            let ns = self.netns(i);
            let port = port_name(host);
            cmds.push((
                "ip",
                v(&[
                    "link", "add", IFNAME, "netns", &ns, "type", "veth", "peer", "name", &port,
                    "netns", &sw,
                ]),
            ));
            // the bottleneck is the delay line's, off the hosts: a queue on the sending host
            // is kept short by TCP's small-queue limit, so it could never fill as a router's
            cmds.extend(self.end_commands(&ns, IFNAME, Some(i), false));
            // the delay line passes frames on as they are: a checksum left to an offload
            // would reach the other host unfilled, so the hosts fill in their own
            cmds.push((
                "ip",
                v(&["netns", "exec", &ns, "ethtool", "-K", IFNAME, "tx", "off"]),
            ));
            cmds.push(("ip", v(&["-n", &sw, "link", "set", &port, "mtu", &mtu])));
            cmds.push((
                "ip",
                v(&[
                    "netns", "exec", &sw, "ethtool", "-K", &port, "tso", "off", "gso", "off",
                    "gro", "off", "tx", "off",
                ]),
            ));
        }
        if self.bridged() {
            cmds.extend(self.bridge_behind_delay_line());
        }
        for (i, host) in self.hosts.iter().enumerate() {
            cmds.push((
                "ip",
                v(&["-n", &self.netns(i), "link", "set", IFNAME, "up"]),
            ));
            cmds.push(("ip", v(&["-n", &sw, "link", "set", &port_name(host), "up"])));
        }
        cmds
    }

    /// A bridged lab with a path: the bridge, and for each host a veth pair inside the
    /// switch namespace from the delay line's far end (`dHOST`) to the bridge (`qHOST`).
    fn bridge_behind_delay_line(&self) -> Vec<(&'static str, Vec<String>)> {
        let sw = self.switch_netns();
        let mtu = self.mtu.to_string();
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut cmds: Vec<(&'static str, Vec<String>)> = vec![
            add_bridge(&sw),
            ("ip", v(&["-n", &sw, "link", "set", BRIDGE, "mtu", &mtu])),
        ];
        for host in &self.hosts {
            let (d, q) = (line_port_name(host), bridge_port_name(host));
            cmds.push((
                "ip",
                v(&[
                    "-n", &sw, "link", "add", &d, "type", "veth", "peer", "name", &q,
                ]),
            ));
            for dev in [&d, &q] {
                cmds.push(("ip", v(&["-n", &sw, "link", "set", dev, "mtu", &mtu])));
                cmds.push((
                    "ip",
                    v(&[
                        "netns", "exec", &sw, "ethtool", "-K", dev, "tso", "off", "gso", "off",
                        "gro", "off", "tx", "off",
                    ]),
                ));
            }
            cmds.push(("ip", v(&["-n", &sw, "link", "set", &q, "master", BRIDGE])));
            cmds.push(("ip", v(&["-n", &sw, "link", "set", &q, "up"])));
            cmds.push(("ip", v(&["-n", &sw, "link", "set", &d, "up"])));
        }
        cmds.push(("ip", v(&["-n", &sw, "link", "set", BRIDGE, "up"])));
        cmds
    }

    /// Settings of one veth end: MTU, offloads off, the shaper, and for a host's end its
    /// loopback and addresses (host index `host`).
    fn end_commands(
        &self,
        ns: &str,
        dev: &str,
        host: Option<usize>,
        shaped: bool,
    ) -> Vec<(&'static str, Vec<String>)> {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mtu = self.mtu.to_string();
        let mut cmds = Vec::new();
        if host.is_some() {
            cmds.push(("ip", v(&["-n", ns, "link", "set", "lo", "up"])));
        }
        cmds.push(("ip", v(&["-n", ns, "link", "set", dev, "mtu", &mtu])));
        cmds.push((
            "ip",
            v(&[
                "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off",
            ]),
        ));
        if let Some(i) = host {
            cmds.push((
                "ip",
                v(&["-n", ns, "addr", "add", &ipv4_cidr(i), "dev", dev]),
            ));
            cmds.push((
                "ip",
                v(&[
                    "-n",
                    ns,
                    "-6",
                    "addr",
                    "add",
                    &ipv6_cidr(i),
                    "dev",
                    dev,
                    "nodad",
                ]),
            ));
        }
        if shaped {
            cmds.push(("tc", self.tbf_args_dev(ns, dev)));
        }
        cmds
    }

    /// The token bucket: two full frames, or 1 ms of the rate when that is more, so fast
    /// links do not depend on sub-millisecond timers while slow ones stay close to a wire;
    /// but at most half the queue, and never less than one frame. A bucket near or above
    /// its queue starves TCP: at 1 Gbit/s a 125 000-byte bucket over a 64 KiB queue carried
    /// 1 Mbit/s, 64 000 bytes 900 Mbit/s, 67 000 bytes 395 Mbit/s.
    pub fn burst_bytes(&self) -> u64 {
        let one_frame = charged_frame_bytes(self.mtu);
        let one_ms = (self.link_bps / 8.0 / 1000.0).ceil() as u64;
        (2 * one_frame)
            .max(one_ms)
            .min(self.buffer_bytes / 2)
            .max(one_frame)
    }

    /// Arguments to `tc` that shape one egress like an Ethernet wire of this rate.
    pub fn tbf_args(&self, netns: &str) -> Vec<String> {
        self.tbf_args_dev(netns, IFNAME)
    }

    /// Arguments to `tc` that shape the egress of device `dev` in `netns`.
    pub fn tbf_args_dev(&self, netns: &str, dev: &str) -> Vec<String> {
        let rate = format!("{}bit", self.link_bps.round() as u64);
        [
            "-n",
            netns,
            "qdisc",
            "add",
            "dev",
            dev,
            "root",
            "tbf",
            "rate",
            &rate,
            "burst",
            &self.burst_bytes().to_string(),
            "limit",
            &self.buffer_bytes.to_string(),
            "overhead",
            &TBF_OVERHEAD_BYTES.to_string(),
            "mpu",
            &TBF_MPU_BYTES.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }
}

/// What tbf charges one full frame at this MTU: MAC header, preamble, FCS and gap.
fn charged_frame_bytes(mtu: u32) -> u64 {
    u64::from(mtu) + u64::from(MAC_HEADER_BYTES + TBF_OVERHEAD_BYTES)
}

/// The least queue a lab takes: the smallest bucket (one frame) and one frame waiting.
pub fn min_buffer_bytes(mtu: u32) -> u64 {
    charged_frame_bytes(mtu) + u64::from(mtu) + u64::from(MAC_HEADER_BYTES)
}

/// The queue when `--buffer` is not given: [`DEFAULT_BUFFER_BYTES`], or
/// [`DEFAULT_BUFFER_MS`] at the link rate when that is more, and never below four frames
/// (jumbo frames), so the bucket of two frames is at most half of it.
pub fn default_buffer_bytes(link_bps: f64, mtu: u32) -> u64 {
    let by_time = (link_bps / 8.0 * DEFAULT_BUFFER_MS / 1000.0).ceil() as u64;
    DEFAULT_BUFFER_BYTES
        .max(by_time)
        .max(4 * charged_frame_bytes(mtu))
}

/// Host `i`'s IPv4 address with its prefix. Each lab is its own pair of namespaces, so
/// every lab can use the same private addresses without meeting another.
pub fn ipv4_cidr(host_index: usize) -> String {
    format!("10.77.0.{}/24", host_index + 1)
}

/// Host `i`'s IPv6 address (unique local range) with its prefix.
pub fn ipv6_cidr(host_index: usize) -> String {
    format!("fd77::{}/64", host_index + 1)
}

/// The address part of a `addr/prefix` string.
pub fn addr_of(cidr: &str) -> &str {
    cidr.split('/').next().unwrap_or(cidr)
}

/// The switch's port towards `host` (at most 13 bytes, within the 15 of an interface name).
pub fn port_name(host: &str) -> String {
    format!("p{host}")
}

/// In a bridged lab with a path, the delay line's port on the bridge's side of `host`'s
/// link, and that port's veth peer on the bridge (13 bytes at most, as [`port_name`]).
pub fn line_port_name(host: &str) -> String {
    format!("d{host}")
}

pub fn bridge_port_name(host: &str) -> String {
    format!("q{host}")
}

pub fn switch_netns_name(lab: &str) -> String {
    format!("{SWITCH_PREFIX}{lab}")
}

pub fn netns_name(lab: &str, host: &str) -> String {
    format!("{NETNS_PREFIX}{lab}-{host}")
}

/// Splits `wr-LAB-HOST` into (LAB, HOST); None for names this crate did not make.
pub fn parse_netns(ns: &str) -> Option<(&str, &str)> {
    let rest = ns.strip_prefix(NETNS_PREFIX)?;
    let (lab, host) = rest.split_once('-')?;
    let ok = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    (ok(lab) && ok(host)).then_some((lab, host))
}

fn check_ident(what: &str, s: &str, max: usize) -> Result<(), LabError> {
    let ok = !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "{what} '{s}' must be 1 to {max} lowercase letters or digits"
        )))
    }
}

fn invalid(msg: String) -> LabError {
    LabError::Invalid(msg)
}

/// The switch namespace's bridge, spanning tree off (a lab has no loops to break).
fn add_bridge(sw: &str) -> (&'static str, Vec<String>) {
    let args = [
        "-n",
        sw,
        "link",
        "add",
        BRIDGE,
        "type",
        "bridge",
        "stp_state",
        "0",
    ];
    ("ip", args.iter().map(|s| s.to_string()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> LabSpec {
        LabSpec {
            name: "t1".into(),
            hosts: vec!["a".into(), "b".into()],
            link_bps: 10e6,
            buffer_bytes: 65536,
            mtu: 1500,
            path: PathSpec::default(),
            link_delay_us: BTreeMap::new(),
        }
    }

    #[test]
    fn overhead_is_preamble_fcs_and_gap() {
        assert_eq!(TBF_OVERHEAD_BYTES, 24);
        assert_eq!(TBF_MPU_BYTES, 84);
    }

    #[test]
    fn tbf_arguments() {
        let s = spec();
        assert_eq!(s.burst_bytes(), 3076);
        assert_eq!(
            s.tbf_args("wr-t1-a").join(" "),
            "-n wr-t1-a qdisc add dev wr0 root tbf rate 10000000bit burst 3076 limit 65536 \
             overhead 24 mpu 84"
        );
        let fast = LabSpec {
            link_bps: 10e9,
            buffer_bytes: default_buffer_bytes(10e9, 1500),
            ..spec()
        };
        assert_eq!(fast.burst_bytes(), 1_250_000);
    }

    #[test]
    fn every_rate_gets_a_queue_above_its_bucket() {
        // 64 KiB up to 131 Mbit/s (at 10M the queue that lets TCP reach the model), then
        // 4 ms of the rate; jumbo frames raise the floor
        assert_eq!(default_buffer_bytes(10e6, 1500), 65536);
        assert_eq!(default_buffer_bytes(100e6, 1500), 65536);
        assert_eq!(default_buffer_bytes(1e9, 1500), 500_000);
        assert_eq!(default_buffer_bytes(10e9, 1500), 5_000_000);
        assert_eq!(default_buffer_bytes(64e3, 65535), 262_292);
        for mtu in [576, 1500, 9000, 65535] {
            for rate in [64e3, 1e6, 10e6, 100e6, 131e6, 500e6, 1e9, 10e9, 100e9] {
                let s = LabSpec {
                    link_bps: rate,
                    mtu,
                    buffer_bytes: default_buffer_bytes(rate, mtu),
                    ..spec()
                };
                assert!(s.validate().is_ok(), "{s:?}");
                // the full bucket of 1 ms or two frames, at most half the queue
                assert!(2 * s.burst_bytes() <= s.buffer_bytes, "{s:?}");
                let frames = 2 * charged_frame_bytes(mtu);
                assert!(s.burst_bytes() >= frames.min(s.buffer_bytes / 2), "{s:?}");
            }
        }
        // an explicit small queue keeps its size: the bucket shrinks to half of it
        let shallow = LabSpec {
            link_bps: 1e9,
            ..spec()
        };
        assert_eq!(shallow.burst_bytes(), 32768);
        let tiny = LabSpec {
            link_bps: 100e6,
            buffer_bytes: 3000,
            ..spec()
        };
        assert_eq!(tiny.burst_bytes(), 1538);
        assert_eq!(min_buffer_bytes(1500), 3052);
        assert!(tiny.validate().is_err());
        let least = LabSpec {
            buffer_bytes: 3052,
            ..tiny
        };
        assert!(least.validate().is_ok());
    }

    #[test]
    fn names_round_trip() {
        let s = spec();
        assert_eq!(s.netns(1), "wr-t1-b");
        assert_eq!(parse_netns("wr-t1-b"), Some(("t1", "b")));
        for other in [
            "t1-b",
            "wr-",
            "wr-t1",
            "wr-t1-",
            "wr-T1-b",
            "wr-t1-b-c",
            "wrx-t1-b",
        ] {
            assert_eq!(parse_netns(other), None, "{other}");
        }
        assert_eq!(addr_of(&ipv4_cidr(0)), "10.77.0.1");
        assert_eq!(addr_of(&ipv6_cidr(1)), "fd77::2");
    }

    #[test]
    fn bad_specs_are_refused() {
        let bad = [
            LabSpec {
                name: "".into(),
                ..spec()
            },
            LabSpec {
                name: "a-b".into(),
                ..spec()
            },
            LabSpec {
                name: "x".repeat(17),
                ..spec()
            },
            LabSpec {
                hosts: vec!["a".into(), "a".into()],
                ..spec()
            },
            LabSpec {
                hosts: vec!["a".into(), "B".into()],
                ..spec()
            },
            LabSpec {
                hosts: vec!["a".into()],
                ..spec()
            },
            LabSpec {
                hosts: vec!["a".into(), "b".into(), "c".into(), "a".into()],
                ..spec()
            },
            LabSpec {
                hosts: (0..17).map(|i| format!("h{i}")).collect(),
                ..spec()
            },
            LabSpec {
                link_bps: 0.0,
                ..spec()
            },
            LabSpec {
                link_bps: f64::NAN,
                ..spec()
            },
            LabSpec {
                link_bps: 1e12,
                ..spec()
            },
            LabSpec { mtu: 67, ..spec() },
            LabSpec {
                mtu: 70_000,
                ..spec()
            },
            LabSpec {
                buffer_bytes: 1000,
                ..spec()
            },
        ];
        for s in bad {
            assert!(s.validate().is_err(), "{s:?}");
        }
        assert!(spec().validate().is_ok());
        let sixteen = LabSpec {
            hosts: (0..16).map(|i| format!("h{i}")).collect(),
            ..spec()
        };
        assert!(sixteen.validate().is_ok());
    }

    #[test]
    fn a_bridged_lab_shapes_both_ends_of_every_host_link() {
        let s = LabSpec {
            hosts: vec!["a".into(), "b".into(), "c".into(), "d".into()],
            ..spec()
        };
        assert!(s.bridged() && !spec().bridged());
        assert_eq!(s.switch_netns(), "wrs-t1");
        // the switch namespace is never taken for a host
        assert_eq!(parse_netns(&s.switch_netns()), None);
        let lines: Vec<String> = s
            .bridge_commands()
            .iter()
            .map(|(p, a)| format!("{p} {}", a.join(" ")))
            .collect();
        let has = |l: &str| lines.iter().filter(|x| x.as_str() == l).count();
        for (i, h) in ["a", "b", "c", "d"].iter().enumerate() {
            assert_eq!(has(&format!("ip netns add wr-t1-{h}")), 1);
            assert_eq!(
                has(&format!(
                    "ip link add wr0 netns wr-t1-{h} type veth peer name p{h} netns wrs-t1"
                )),
                1
            );
            assert_eq!(
                has(&format!("ip -n wrs-t1 link set p{h} master br0")),
                1,
                "{h}"
            );
            assert_eq!(
                has(&format!(
                    "ip -n wr-t1-{h} addr add 10.77.0.{}/24 dev wr0",
                    i + 1
                )),
                1
            );
            let tbf = |ns: &str, dev: &str| {
                format!(
                    "tc -n {ns} qdisc add dev {dev} root tbf rate 10000000bit burst 3076 \
                     limit 65536 overhead 24 mpu 84"
                )
            };
            assert_eq!(has(&tbf(&format!("wr-t1-{h}"), "wr0")), 1);
            assert_eq!(has(&tbf("wrs-t1", &format!("p{h}"))), 1);
        }
        // namespaces first, the bridge up last
        assert!(lines[..5].iter().all(|l| l.starts_with("ip netns add")));
        assert_eq!(lines.last().unwrap(), "ip -n wrs-t1 link set br0 up");
        // every port goes up after it joins the bridge
        let pos = |l: &str| lines.iter().position(|x| x == l).unwrap();
        assert!(pos("ip -n wrs-t1 link set pd master br0") < pos("ip -n wrs-t1 link set pd up"));
        assert_eq!(port_name("abcdefghijkl").len(), 13);
    }
}

#[cfg(test)]
#[path = "spec_delayed_tests.rs"]
mod delayed_tests;
