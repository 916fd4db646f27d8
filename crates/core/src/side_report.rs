//! What one side of a test measured: the half-result each end builds from its own counters,
//! and the exchange format of the control protocol's final messages. `assemble` joins the
//! two halves into a [`RunResult`](crate::RunResult).

use serde::{Deserialize, Serialize};

use crate::evidence::{HostEvidence, SchedTimes, TcpSample};
use crate::latency::{OpenLoopStats, RttStats};
use crate::result::{CpuSide, HostEnv, Interval, TcpInfo};
use crate::rr::RrCounts;
use crate::spec::Flow;
use crate::sweep::SweepSide;
use crate::udp::{UdpHostDrops, UdpStreamStats};

/// Whether this side wrote or read a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Sender,
    Receiver,
}

/// One stream as seen by one side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamReport {
    pub id: u32,
    pub flow: Flow,
    pub role: Role,
    /// All bytes moved, warm-up included.
    pub bytes: u64,
    /// Bytes moved in the counted window (after the warm-up).
    pub counted_bytes: u64,
    pub calls: u64,
    /// Calls made in the counted window.
    #[serde(default)]
    pub counted_calls: u64,
    /// Seconds from the side's start to where the counted window opened; None where the
    /// window never opened (or the side does not say: an iperf3 peer).
    #[serde(default)]
    pub opened_s: Option<f64>,
    /// Seconds from the window's opening to this stream's last byte.
    pub seconds: f64,
    pub user_s: f64,
    pub sys_s: f64,
    pub tcp: Option<TcpInfo>,
    #[serde(default)]
    pub udp: Option<UdpStreamStats>,
    /// An error that ended the stream early, if any.
    pub error: Option<String>,
    /// The stream thread's scheduling over the counted window.
    #[serde(default)]
    pub sched: Option<SchedTimes>,
    /// Request/response tests: the transactions of this flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rr: Option<RrCounts>,
    /// The data worker that served the stream (its number on its side) when it shared one
    /// with other streams; `user_s` and `sys_s` are then its even share of that worker's time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<u32>,
}

/// Everything one side measured.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SideReport {
    pub streams: Vec<StreamReport>,
    /// Interval reports of the flows this side received.
    pub intervals: Vec<Interval>,
    pub cpu: Option<CpuSide>,
    pub host: HostEnv,
    /// Host-wide UDP drop counters over the test (UDP tests only).
    #[serde(default)]
    pub udp_host: Option<UdpHostDrops>,
    /// The kernel's counters and CPU split over the counted window.
    #[serde(default)]
    pub evidence: Option<HostEvidence>,
    /// Per-interval TCP samples of the flows this side sent.
    #[serde(default)]
    pub tcp_samples: Vec<TcpSample>,
    /// Request/response tests, client: round trips over all flows (one merged histogram).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rr_rtt: Option<RttStats>,
    /// Open-loop rr tests, client: send lateness and round trips from the actual sends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rr_open_loop: Option<OpenLoopStats>,
    /// Sweeps, client: the figures of each message size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepSide>,
    /// In-band requests of the loaded flows (`crate::inband`): what this side noted as
    /// requester and as responder.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inband: Vec<crate::inband::InbandFlow>,
}
