//! The evidence one host gathers over the counted window of a test: the kernel's own
//! counters and the CPU split per core, the raw material of the diagnosis
//! ([`crate::diagnosis`]). Everything the host could not read is `None` (null in JSON),
//! never 0, so "not seen" is never mistaken for "did not happen".
//!
//! The names of the kernel counters kept are listed here, once: the probe reads exactly
//! these, the schema documents them, and the rules look them up by these names.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::result::TcpInfo;

/// TcpExt counters of `/proc/net/netstat` kept as evidence (the kernel's names).
pub const TCP_EXT_COUNTERS: &[&str] = &[
    // retransmits that were not loss: the receiver reported the segment twice (DSACK)
    "TCPDSACKRecv",
    "TCPDSACKOfoRecv",
    "TCPDSACKUndo",
    "TCPSpuriousRTOs",
    "TCPSpuriousRtxHostQueues",
    // the sender saw reordering
    "TCPSACKReorder",
    "TCPTSReorder",
    "TCPRenoReorder",
    // real loss recovery
    "TCPLostRetransmit",
    "TCPFastRetrans",
    "TCPSlowStartRetrans",
    "TCPTimeouts",
    "TCPLossProbes",
    "TCPLossProbeRecovery",
    // the receiver: out of order, duplicates reported, drops for want of memory
    "TCPOFOQueue",
    "TCPOFODrop",
    "TCPDSACKOldSent",
    "TCPDSACKOfoSent",
    "TCPBacklogDrop",
    "TCPRcvQDrop",
    "TCPZeroWindowDrop",
    "PruneCalled",
    "RcvPruned",
    "OfoPruned",
    "TCPRcvCollapsed",
    "TCPMemoryPressures",
    "TCPWantZeroWindowAdv",
    "TCPToZeroWindowAdv",
    // the listener
    "ListenOverflows",
    "ListenDrops",
];

/// `Ip:` counters of `/proc/net/snmp` kept as evidence.
pub const IP_COUNTERS: &[&str] = &[
    "InReceives",
    "InDiscards",
    "InDelivers",
    "OutRequests",
    "OutDiscards",
    "OutNoRoutes",
    "ReasmFails",
    "FragFails",
];

/// `Tcp:` counters of `/proc/net/snmp` kept as evidence.
pub const TCP_COUNTERS: &[&str] = &["InSegs", "OutSegs", "RetransSegs", "InErrs", "OutRsts"];

/// `Udp:` counters of `/proc/net/snmp` kept as evidence.
pub const UDP_COUNTERS: &[&str] = &[
    "InDatagrams",
    "NoPorts",
    "InErrors",
    "OutDatagrams",
    "RcvbufErrors",
    "SndbufErrors",
    "InCsumErrors",
    "MemErrors",
];

/// Kernel counters by name, over the window (after minus before). A name the running
/// kernel does not have maps to None.
pub type Counters = BTreeMap<String, Option<u64>>;

/// What one host saw over the counted window.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct HostEvidence {
    /// Which kernel and network namespace the counters come from (boot id and netns
    /// inode). Two sides with the same key read the same host-wide counters, so they are
    /// not added twice.
    pub host_key: Option<String>,
    /// The window the deltas cover, seconds.
    pub window_s: f64,
    /// CPU per core, split by kind of work.
    pub cores: Vec<CoreLoad>,
    /// CPU quota and throttling of the cgroup this side ran in, where it has one.
    pub cgroup: Option<CgroupCpu>,
    /// CPU cycles this side's process used in the window (perf_event_open), None where
    /// the processor's counters cannot be read (as in most virtual machines).
    pub cycles: Option<u64>,
    /// `/proc/net/netstat` TcpExt, see [`TCP_EXT_COUNTERS`]. None: unreadable.
    pub tcp_ext: Option<Counters>,
    /// `/proc/net/snmp` Ip, Tcp and Udp, see [`IP_COUNTERS`] and the others.
    pub ip: Option<Counters>,
    pub tcp: Option<Counters>,
    pub udp: Option<Counters>,
    /// `/proc/net/softnet_stat`, per core.
    pub softnet: Option<Vec<SoftnetDelta>>,
    /// NET_RX and NET_TX softirqs per core (`/proc/softirqs`), index = core.
    pub net_rx_softirqs: Option<Vec<u64>>,
    pub net_tx_softirqs: Option<Vec<u64>>,
    /// Hardware interrupts of the test interfaces, per line and core (`/proc/interrupts`).
    pub irqs: Vec<IrqDelta>,
    /// The NIC's own statistics (`ethtool -S`, read with the ioctl), per interface.
    pub nic: Vec<NicStats>,
    /// This host's egress qdisc toward the peer over the test, where the test asked for it
    /// (an rpm phase's server: `TestSpec::rpm_server`); None where not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress_qdisc: Option<crate::qdisc::PhaseQdisc>,
}

/// One core's busy time over the window, each share 0–100 of that core's time.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct CoreLoad {
    pub core: u32,
    pub user_percent: f64,
    pub system_percent: f64,
    pub softirq_percent: f64,
    pub irq_percent: f64,
    pub steal_percent: f64,
    pub idle_percent: f64,
}

impl CoreLoad {
    /// Everything but idle (iowait counts as idle).
    pub fn busy_percent(&self) -> f64 {
        (100.0 - self.idle_percent).clamp(0.0, 100.0)
    }
}

/// The cgroup's CPU limit and how often it bit.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CgroupCpu {
    /// The quota in cores (quota ÷ period), None when unlimited.
    pub limit_cores: Option<f64>,
    /// Periods in which the cgroup was throttled, and the time it spent throttled.
    pub nr_throttled: Option<u64>,
    pub throttled_s: Option<f64>,
}

/// One core's line of `/proc/net/softnet_stat`, as deltas.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct SoftnetDelta {
    pub core: u32,
    pub processed: u64,
    /// Packets dropped because the core's backlog queue was full.
    pub dropped: u64,
    /// Times the NET_RX softirq ran out of budget or time with work left.
    pub time_squeeze: u64,
}

/// One interrupt line of a test interface, per core.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct IrqDelta {
    pub irq: String,
    pub name: String,
    pub per_core: Vec<u64>,
}

/// Counters the NIC driver reports (`ethtool -S`), as deltas; only the ones that moved,
/// and every one whose name speaks of drops, misses, errors or buffers.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NicStats {
    pub iface: String,
    pub counters: BTreeMap<String, u64>,
}

impl NicStats {
    /// Sum of the counters whose names say the NIC dropped or missed received packets.
    pub fn rx_drops(&self) -> u64 {
        self.counters
            .iter()
            .filter(|(k, _)| is_rx_drop_name(k))
            .map(|(_, v)| *v)
            .sum()
    }
}

/// A driver counter that counts received packets the NIC dropped or missed (names vary
/// by driver: `rx_missed_errors`, `rx_fifo_errors`, `rx_no_buffer_count`, `rx_dropped`,
/// `rx_queue_0_drops`, …).
pub fn is_rx_drop_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.contains("rx")
        && [
            "miss", "fifo", "no_buf", "nobuf", "drop", "overrun", "discard",
        ]
        .iter()
        .any(|k| n.contains(k))
}

/// Thread-level scheduling of one stream's thread over the counted window.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct SchedTimes {
    /// Time on a CPU, and time runnable but waiting for one (`/proc/thread-self/schedstat`).
    pub run_s: f64,
    pub wait_s: f64,
    /// Times the thread went to sleep (voluntary context switches): for a stream thread,
    /// each one a wait inside a socket call. None where the kernel does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleeps: Option<u64>,
    /// The one CPU the thread was allowed to run on (its affinity held one: `-A`, or a
    /// process started under `taskset -c N`); None when it could run on more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_cpu: Option<u32>,
}

/// TCP_INFO of a flow's senders over one interval, summed or combined over its streams.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct IntervalTcp {
    pub retransmits: Option<u64>,
    /// Segments the receiver reported receiving twice (DSACK): spurious retransmits.
    pub dsack_dups: Option<u64>,
    pub busy_us: Option<u64>,
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
    /// Largest congestion window (segments) and mean smoothed RTT at the interval's end.
    pub snd_cwnd: Option<u64>,
    /// The largest congestion window in bytes (segments × the sender's MSS), as iperf3's
    /// Cwnd column shows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snd_cwnd_bytes: Option<u64>,
    pub rtt_us: Option<f64>,
    /// Sum of the streams' delivery rates at the interval's end.
    pub delivery_rate_bps: Option<u64>,
    /// True when any stream's last delivery-rate sample was application limited.
    pub app_limited: Option<bool>,
    /// Bytes written but not yet sent, summed.
    pub unsent_bytes: Option<u64>,
    /// The peer's advertised window (the smallest over the streams), bytes.
    pub snd_wnd_bytes: Option<u64>,
}

/// Per-interval TCP samples a sending side took, matched to the receivers' intervals by
/// flow and start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TcpSample {
    pub flow: crate::spec::Flow,
    /// The one stream sampled, or None for the flow's senders together (as in
    /// [`crate::result::Interval::stream`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<u32>,
    pub start_s: f64,
    pub end_s: f64,
    pub tcp: IntervalTcp,
}

/// The TCP sample of one interval from the senders' TCP_INFO at its start (`before`, None
/// for a stream not yet sampled: counted from zero) and at its end (`after`). Counters
/// are deltas, gauges are read at the end.
pub fn interval_tcp(before: &[Option<TcpInfo>], after: &[Option<TcpInfo>]) -> IntervalTcp {
    let pairs = || {
        after.iter().enumerate().filter_map(|(i, a)| {
            a.as_ref()
                .map(|a| (before.get(i).and_then(Option::as_ref), a))
        })
    };
    let delta = |f: fn(&TcpInfo) -> Option<u64>| -> Option<u64> {
        pairs()
            .filter_map(|(b, a)| {
                let now = f(a)?;
                Some(now.saturating_sub(b.and_then(f).unwrap_or(0)))
            })
            .reduce(u64::saturating_add)
    };
    let gauges = |f: fn(&TcpInfo) -> Option<u64>| pairs().filter_map(move |(_, a)| f(a));
    let rtts: Vec<u64> = gauges(|t| t.rtt_us).collect();
    IntervalTcp {
        retransmits: delta(|t| t.retransmits_total),
        dsack_dups: delta(|t| t.dsack_dups),
        busy_us: delta(|t| t.busy_time_us),
        rwnd_limited_us: delta(|t| t.rwnd_limited_us),
        sndbuf_limited_us: delta(|t| t.sndbuf_limited_us),
        snd_cwnd: gauges(|t| t.snd_cwnd).max(),
        snd_cwnd_bytes: gauges(TcpInfo::cwnd_bytes).max(),
        rtt_us: (!rtts.is_empty()).then(|| rtts.iter().sum::<u64>() as f64 / rtts.len() as f64),
        delivery_rate_bps: gauges(|t| t.delivery_rate_bps).reduce(u64::saturating_add),
        app_limited: pairs()
            .filter_map(|(_, a)| a.app_limited)
            .reduce(|x, y| x || y),
        unsent_bytes: gauges(|t| t.notsent_bytes).reduce(u64::saturating_add),
        snd_wnd_bytes: gauges(|t| t.snd_wnd).min(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(retrans: u64, busy: u64, rwnd: u64, cwnd: u64, rtt: u64) -> TcpInfo {
        TcpInfo {
            retransmits_total: Some(retrans),
            busy_time_us: Some(busy),
            rwnd_limited_us: Some(rwnd),
            snd_cwnd: Some(cwnd),
            rtt_us: Some(rtt),
            snd_wnd: Some(cwnd * 1000),
            snd_mss: Some(1000),
            ..Default::default()
        }
    }

    #[test]
    fn interval_sample_is_deltas_and_end_gauges() {
        let before = [Some(info(10, 1_000, 100, 20, 50)), None];
        let after = [
            Some(info(15, 2_000, 400, 30, 70)),
            Some(info(1, 500, 0, 10, 30)),
        ];
        let s = interval_tcp(&before, &after);
        assert_eq!(s.retransmits, Some(6));
        assert_eq!(s.busy_us, Some(1_500));
        assert_eq!(s.rwnd_limited_us, Some(300));
        assert_eq!(s.sndbuf_limited_us, None);
        assert_eq!(s.snd_cwnd, Some(30));
        assert_eq!(s.snd_cwnd_bytes, Some(30_000));
        assert_eq!(s.rtt_us, Some(50.0));
        assert_eq!(s.snd_wnd_bytes, Some(10_000));
        // a counter that went backwards (a new socket) counts from zero, never negative
        let s = interval_tcp(&after, &before);
        assert_eq!(s.retransmits, Some(0));
        assert_eq!(interval_tcp(&[], &[]), IntervalTcp::default());
    }
}
