//! The client host's egress qdisc during a loaded phase: what `tc -s qdisc` reports for the
//! root qdisc of the interface the test's route uses, read before, during and after the
//! phase. A standing backlog there is a queue in the sending host, before the path.
//!
//! Promise: a device without a queue (`noqueue`, as loopback has) is "no qdisc", never a
//! backlog of zero; counters that went backwards (the qdisc was replaced) give no delta.

use serde::{Deserialize, Serialize};

/// One reading of a root qdisc's counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QdiscReading {
    /// The qdisc's kind: `fq_codel`, `pfifo_fast`, `tbf`, `noqueue`...
    pub kind: String,
    pub backlog_bytes: u64,
    pub backlog_packets: u64,
    pub drops: u64,
    pub requeues: u64,
    pub overlimits: u64,
}

impl QdiscReading {
    /// A device that sends at once, with no queue of its own.
    pub fn is_noqueue(&self) -> bool {
        self.kind == "noqueue"
    }
}

/// A phase's figures from its client-side egress qdisc.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseQdisc {
    /// The interface the test's route leaves by.
    pub interface: String,
    pub kind: String,
    /// False where the device has no qdisc (`noqueue`): then no backlog figures.
    pub queued: bool,
    /// Readings taken during the phase (after its warm-up).
    pub samples: u32,
    /// Median and highest backlog over those readings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_backlog_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_backlog_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_backlog_packets: Option<u64>,
    /// Counted over the phase (after minus before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drops: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeues: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlimits: Option<u64>,
}

impl PhaseQdisc {
    /// The figures from the readings before and after the phase and those taken during it.
    pub fn of(
        interface: &str,
        before: &QdiscReading,
        during: &[QdiscReading],
        after: &QdiscReading,
    ) -> PhaseQdisc {
        let queued = !after.is_noqueue();
        let same = before.kind == after.kind;
        let delta = |f: fn(&QdiscReading) -> u64| {
            (queued && same)
                .then(|| f(after).checked_sub(f(before)))
                .flatten()
        };
        let mut backlog: Vec<u64> = during.iter().map(|r| r.backlog_bytes).collect();
        backlog.sort_unstable();
        let some = queued && !backlog.is_empty();
        PhaseQdisc {
            interface: interface.into(),
            kind: after.kind.clone(),
            queued,
            samples: during.len() as u32,
            median_backlog_bytes: some.then(|| backlog[(backlog.len() - 1) / 2]),
            peak_backlog_bytes: some.then(|| backlog[backlog.len() - 1]),
            peak_backlog_packets: some
                .then(|| during.iter().map(|r| r.backlog_packets).max())
                .flatten(),
            drops: delta(|r| r.drops),
            requeues: delta(|r| r.requeues),
            overlimits: delta(|r| r.overlimits),
        }
    }

    /// The time the median backlog holds a packet at `rate_bps`, ms.
    pub fn standing_ms(&self, rate_bps: f64) -> Option<f64> {
        let b = self.median_backlog_bytes?;
        (rate_bps > 0.0).then(|| b as f64 * 8.0 / rate_bps * 1000.0)
    }

    /// One phrase: the qdisc, its standing backlog and drops, for the verdict.
    pub fn words(&self, rate_bps: f64) -> String {
        if !self.queued {
            return format!("{} has no qdisc (noqueue)", self.interface);
        }
        let mut s = format!("{}'s {} qdisc", self.interface, self.kind);
        match (self.median_backlog_bytes, self.standing_ms(rate_bps)) {
            (Some(b), Some(ms)) => s.push_str(&format!(
                " holds {} standing ({ms:.0} ms at {})",
                crate::units::format_bytes(b),
                crate::units::format_bps(rate_bps)
            )),
            (Some(b), None) => s.push_str(&format!(" holds {}", crate::units::format_bytes(b))),
            _ => s.push_str(" was not sampled"),
        }
        if let Some(d) = self.drops.filter(|d| *d > 0) {
            s.push_str(&format!(", dropped {d} packets"));
        }
        s
    }
}
