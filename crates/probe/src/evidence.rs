//! The evidence of one host over a window: kernel counters (TcpExt, Ip/Tcp/Udp, softnet,
//! softirqs, the test interfaces' interrupts and NIC statistics), CPU per core split by
//! kind, the cgroup's CPU throttling, and the process's CPU cycles. Start the window before
//! the side's threads exist, on the thread that spawns them (so the cycle counter follows
//! them), restart it at the end of the warm-up, finish it when the side is done.
//!
//! Promise: each part is None (or left out) where it could not be read at both ends of
//! the window, never 0. Taking a snapshot reads a few small /proc files and makes one
//! ioctl pair per interface; nothing here blocks or panics.

use std::time::Instant;

use wirerate_core::evidence::{
    Counters, HostEvidence, IP_COUNTERS, TCP_COUNTERS, TCP_EXT_COUNTERS, UDP_COUNTERS,
};

use crate::cgroup::{self, CgroupDir, CgroupSample};
use crate::cpu::{self, StatSnapshot};
use crate::ethtool::{self, NicNames};
use crate::interrupts::{self, IrqTable};
use crate::netstat::{self, NetSnapshot};
use crate::perf;
use crate::softnet::{self, SoftnetLine};

/// Everything read at one end of the window.
#[derive(Debug, Clone)]
struct Snapshot {
    at: Instant,
    stat: Option<StatSnapshot>,
    net: NetSnapshot,
    softnet: Option<Vec<SoftnetLine>>,
    softirqs: Option<IrqTable>,
    interrupts: Option<IrqTable>,
    cgroup: Option<CgroupSample>,
    cycles: Option<u64>,
    /// Values of each interface in [`EvidenceWindow::nics`], in the same order.
    nic: Vec<Option<Vec<u64>>>,
}

/// What stays open over the window, and the snapshots at its start.
#[derive(Debug)]
pub struct EvidenceWindow {
    host_key: Option<String>,
    /// Names to look for in `/proc/interrupts`: the interfaces and their devices.
    irq_names: Vec<String>,
    nics: Vec<NicNames>,
    cgroup: Option<CgroupDir>,
    cycles: Option<perf::Counter>,
    before: Snapshot,
}

impl EvidenceWindow {
    /// Opens the counters and takes the first snapshots. `ifaces` are the interfaces that
    /// carry the test.
    pub fn start(ifaces: &[String]) -> EvidenceWindow {
        let mut w = EvidenceWindow {
            host_key: host_key(),
            irq_names: interrupts::irq_names(ifaces),
            nics: ifaces.iter().filter_map(|i| NicNames::read(i)).collect(),
            cgroup: cgroup::locate_self(),
            cycles: perf::Counter::cycles(),
            before: Snapshot::empty(),
        };
        w.before = w.snapshot();
        w
    }

    /// Takes new snapshots: the window starts again now (end of the warm-up). The cycle
    /// counter stays open; its value now is the new baseline.
    pub fn restart(&mut self) {
        self.before = self.snapshot();
    }

    /// The deltas since the window's start.
    pub fn finish(self) -> HostEvidence {
        let after = self.snapshot();
        let b = &self.before;
        let netstat = |prefix: &str, names: &[&str]| -> Option<Counters> {
            netstat::delta(
                b.net.netstat.as_ref(),
                after.net.netstat.as_ref(),
                prefix,
                names,
            )
        };
        let snmp = |prefix: &str, names: &[&str]| -> Option<Counters> {
            netstat::delta(b.net.snmp.as_ref(), after.net.snmp.as_ref(), prefix, names)
        };
        let softirq = |label: &str| {
            b.softirqs
                .as_ref()
                .zip(after.softirqs.as_ref())
                .and_then(|(b, a)| interrupts::softirq_delta(b, a, label))
        };
        HostEvidence {
            host_key: self.host_key.clone(),
            window_s: after.at.duration_since(b.at).as_secs_f64(),
            cores: b
                .stat
                .as_ref()
                .zip(after.stat.as_ref())
                .map(|(b, a)| cpu::core_loads(b, a))
                .unwrap_or_default(),
            cgroup: b
                .cgroup
                .as_ref()
                .zip(after.cgroup.as_ref())
                .map(|(b, a)| cgroup::delta(b, a)),
            cycles: b.cycles.zip(after.cycles).map(|(b, a)| a.saturating_sub(b)),
            tcp_ext: netstat("TcpExt", TCP_EXT_COUNTERS),
            ip: snmp("Ip", IP_COUNTERS),
            tcp: snmp("Tcp", TCP_COUNTERS),
            udp: snmp("Udp", UDP_COUNTERS),
            softnet: b
                .softnet
                .as_ref()
                .zip(after.softnet.as_ref())
                .map(|(b, a)| softnet::delta(b, a)),
            net_rx_softirqs: softirq("NET_RX"),
            net_tx_softirqs: softirq("NET_TX"),
            irqs: b
                .interrupts
                .as_ref()
                .zip(after.interrupts.as_ref())
                .map(|(b, a)| interrupts::irq_deltas(b, a, &self.irq_names))
                .unwrap_or_default(),
            nic: self
                .nics
                .iter()
                .zip(b.nic.iter().zip(&after.nic))
                .filter_map(|(names, (b, a))| {
                    let (b, a) = b.as_ref().zip(a.as_ref())?;
                    Some(ethtool::nic_delta(names, b, a))
                })
                .collect(),
            egress_qdisc: None,
        }
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            at: Instant::now(),
            stat: cpu::stat_snapshot(),
            net: NetSnapshot::now(),
            softnet: softnet::snapshot(),
            softirqs: interrupts::snapshot("/proc/softirqs"),
            interrupts: interrupts::snapshot("/proc/interrupts"),
            cgroup: self.cgroup.as_ref().map(CgroupDir::sample),
            cycles: self.cycles.as_ref().and_then(perf::Counter::read),
            nic: self.nics.iter().map(NicNames::values).collect(),
        }
    }
}

impl Snapshot {
    fn empty() -> Snapshot {
        Snapshot {
            at: Instant::now(),
            stat: None,
            net: NetSnapshot::default(),
            softnet: None,
            softirqs: None,
            interrupts: None,
            cgroup: None,
            cycles: None,
            nic: Vec::new(),
        }
    }
}

/// The kernel's boot id and the network namespace's inode: two processes with the same
/// key read the same host-wide network counters.
pub fn host_key() -> Option<String> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let ns = std::fs::read_link("/proc/self/ns/net").ok()?;
    make_host_key(&boot, &ns.to_string_lossy())
}

/// `boot_id` text and the `net:[4026531840]` link → `boot-id:4026531840`.
pub fn make_host_key(boot_id: &str, netns_link: &str) -> Option<String> {
    let boot = boot_id.trim();
    let inode: u64 = netns_link
        .strip_prefix("net:[")?
        .strip_suffix(']')?
        .parse()
        .ok()?;
    (!boot.is_empty()).then(|| format!("{boot}:{inode}"))
}

#[cfg(test)]
#[path = "evidence_tests.rs"]
mod tests;
