//! What a lab that exists looks like, where it is recorded, and how a process finds out
//! that it runs inside one.
//!
//! `up` writes one JSON file per lab, `/run/wirerate/lab/NAME.json` ([`STATE_DIR`]);
//! `down` removes it. A process started with `wirerate lab exec` (or `ip netns exec`) finds
//! its namespace's name by matching its own `/proc/self/ns/net` against the files under
//! `/run/netns`, and from the name, the lab and its link rate.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::path::PathSpec;
use crate::spec::{parse_netns, LabSpec};
use crate::LabError;

/// Where `up` records each lab.
pub const STATE_DIR: &str = "/run/wirerate/lab";
/// Where `ip netns add` keeps the namespaces it names.
pub const NETNS_DIR: &str = "/run/netns";

/// A lab as made: its spec, what the shaper was given, and each host.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LabState {
    pub name: String,
    /// Line rate of the link in each direction, bit/s.
    pub link_bps: f64,
    pub mtu: u32,
    /// tbf `limit`: queue at each egress, bytes.
    pub buffer_bytes: u64,
    /// tbf `burst`, bytes.
    pub burst_bytes: u64,
    /// tbf `overhead`: bytes charged per packet beyond its length.
    pub overhead_bytes: u32,
    /// tbf `mpu`: the least a packet is charged, bytes.
    pub mpu_bytes: u32,
    pub hosts: Vec<LabHost>,
    /// The namespace of the bridge the hosts meet on, for a lab of three or more hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch_netns: Option<String>,
    /// What the delay line between the two hosts applies, when the lab has one.
    #[serde(default, skip_serializing_if = "PathSpec::is_plain")]
    pub path: PathSpec,
    /// Hosts of a bridged lab whose link has its own delay, µs each way.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub link_delay_us: std::collections::BTreeMap<String, u64>,
    /// The delay line's process, which `down` ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_line_pid: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LabHost {
    pub name: String,
    pub netns: String,
    pub ifname: String,
    pub ipv4: String,
    pub ipv6: String,
}

/// What a process inside a lab host learns about its link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LabLink {
    pub lab: LabState,
    /// This host's entry in `lab.hosts`.
    pub host: LabHost,
}

impl LabState {
    pub fn spec(&self) -> Option<LabSpec> {
        Some(LabSpec {
            name: self.name.clone(),
            hosts: self.hosts.iter().map(|h| h.name.clone()).collect(),
            link_bps: self.link_bps,
            buffer_bytes: self.buffer_bytes,
            mtu: self.mtu,
            path: self.path,
            link_delay_us: self.link_delay_us.clone(),
        })
    }

    /// The other host, for a host of this lab.
    pub fn peer_of(&self, host: &str) -> Option<&LabHost> {
        if !self.hosts.iter().any(|h| h.name == host) {
            return None;
        }
        self.hosts.iter().find(|h| h.name != host)
    }
}

pub fn state_path(dir: &Path, lab: &str) -> PathBuf {
    dir.join(format!("{lab}.json"))
}

pub fn save(dir: &Path, state: &LabState) -> Result<(), LabError> {
    let io = |source| LabError::State {
        path: dir.display().to_string(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let path = state_path(dir, &state.name);
    let text = serde_json::to_string_pretty(state).map_err(|e| LabError::Invalid(e.to_string()))?;
    let tmp = dir.join(format!(".{}.json.tmp", state.name));
    std::fs::write(&tmp, text + "\n").map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)
}

/// The recorded state of a lab; None when there is no record or it does not parse.
pub fn load(dir: &Path, lab: &str) -> Option<LabState> {
    let text = std::fs::read_to_string(state_path(dir, lab)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Removes a lab's record; a record already gone is fine.
pub fn remove(dir: &Path, lab: &str) -> Result<(), LabError> {
    match std::fs::remove_file(state_path(dir, lab)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(LabError::State {
            path: state_path(dir, lab).display().to_string(),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// Names of the namespaces under `dir` that a lab made (`wr-LAB-HOST`), sorted.
pub fn lab_namespaces(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| parse_netns(n).is_some())
        .collect();
    names.sort();
    names
}

/// The name of the network namespace this process runs in, when it is one `ip netns`
/// named; None in the initial namespace or an unnamed one.
pub fn current_netns_name() -> Option<String> {
    netns_name_of(Path::new("/proc/self/ns/net"), Path::new(NETNS_DIR))
}

/// Matches the namespace file `ns` against the named namespaces under `dir`.
pub fn netns_name_of(ns: &Path, dir: &Path) -> Option<String> {
    let me = std::fs::metadata(ns).ok()?;
    std::fs::read_dir(dir).ok()?.find_map(|e| {
        let e = e.ok()?;
        let m = std::fs::metadata(e.path()).ok()?;
        (m.dev() == me.dev() && m.ino() == me.ino()).then(|| e.file_name().into_string().ok())?
    })
}

/// The lab link a namespace belongs to, from the lab's record.
pub fn lab_for_netns(netns: &str, state_dir: &Path) -> Option<LabLink> {
    let (lab, host) = parse_netns(netns)?;
    let state = load(state_dir, lab)?;
    let entry = state
        .hosts
        .iter()
        .find(|h| h.name == host && h.netns == netns)?
        .clone();
    Some(LabLink {
        lab: state,
        host: entry,
    })
}

/// The link rate, bit/s, of the lab whose host is namespace `netns`.
pub fn lab_rate_for_netns(netns: &str) -> Option<f64> {
    lab_for_netns(netns, Path::new(STATE_DIR)).map(|l| l.lab.link_bps)
}

/// The lab link this process runs on, when it was started inside a lab host.
pub fn current_lab() -> Option<LabLink> {
    lab_for_netns(&current_netns_name()?, Path::new(STATE_DIR))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{ipv4_cidr, ipv6_cidr, IFNAME};

    fn tempdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("wirerate-lab-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn state() -> LabState {
        let host = |i: usize, n: &str| LabHost {
            name: n.into(),
            netns: format!("wr-x1-{n}"),
            ifname: IFNAME.into(),
            ipv4: ipv4_cidr(i),
            ipv6: ipv6_cidr(i),
        };
        LabState {
            name: "x1".into(),
            link_bps: 10e6,
            mtu: 1500,
            buffer_bytes: 65536,
            burst_bytes: 3076,
            overhead_bytes: 24,
            mpu_bytes: 84,
            hosts: vec![host(0, "a"), host(1, "b")],
            switch_netns: None,
            path: PathSpec::default(),
            link_delay_us: Default::default(),
            delay_line_pid: None,
        }
    }

    #[test]
    fn records_round_trip_and_name_the_rate() {
        let dir = tempdir("state");
        let s = state();
        save(&dir, &s).unwrap();
        assert_eq!(load(&dir, "x1"), Some(s.clone()));
        let link = lab_for_netns("wr-x1-b", &dir).unwrap();
        assert_eq!(link.lab.link_bps, 10e6);
        assert_eq!(link.host.ipv4, "10.77.0.2/24");
        assert_eq!(s.peer_of("b").map(|h| h.name.as_str()), Some("a"));
        assert!(s.peer_of("c").is_none());
        assert!(lab_for_netns("wr-x1-c", &dir).is_none());
        assert!(lab_for_netns("wr-x2-a", &dir).is_none());
        assert!(lab_for_netns("other", &dir).is_none());
        remove(&dir, "x1").unwrap();
        remove(&dir, "x1").unwrap();
        assert!(load(&dir, "x1").is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn namespace_listing_keeps_only_lab_names() {
        let dir = tempdir("netns");
        for n in ["wr-x1-b", "wr-x1-a", "blue", "wr-bad"] {
            std::fs::write(dir.join(n), "").unwrap();
        }
        assert_eq!(lab_namespaces(&dir), ["wr-x1-a", "wr-x1-b"]);
        assert!(lab_namespaces(&dir.join("absent")).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_initial_namespace_has_no_lab() {
        let dir = tempdir("ident");
        std::fs::write(dir.join("wr-x1-a"), "").unwrap();
        assert_eq!(netns_name_of(Path::new("/proc/self/ns/net"), &dir), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
