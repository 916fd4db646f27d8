//! The result model: one serializable document per run. Every renderer reads it; nothing
//! is computed outside `metrics`. Field names carry their units; renames bump
//! [`SCHEMA_VERSION`].

use serde::{Deserialize, Serialize};

use crate::diagnosis::{Bottleneck, Diagnosis};
use crate::evidence::{HostEvidence, IntervalTcp};
use crate::rr::{RrInterval, RrSummary};
use crate::spec::{Flow, TestSpec};
use crate::sweep::SweepResult;

/// Version of the JSON contract. Additions keep it; renames and removals bump it.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub schema_version: u32,
    pub tool: Tool,
    /// Wall-clock start of the test, seconds since the Unix epoch.
    pub started_unix_s: f64,
    pub spec: TestSpec,
    pub summary: Summary,
    pub intervals: Vec<Interval>,
    pub streams: Vec<StreamResult>,
    pub env: Env,
    /// What each host's kernel counted over the window: the diagnosis's raw material.
    #[serde(default)]
    pub evidence: Evidence,
    /// The test was stopped early (Ctrl-C): the figures cover what was measured until then.
    #[serde(default)]
    pub interrupted: bool,
    /// Message-size sweeps: the figures per size and Hockney's fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepResult>,
    /// Latency under load (`wirerate rpm`): the phases, RPM and the queue they reveal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm: Option<Box<crate::rpm::RpmResult>>,
    /// In-band request/response latencies of the loaded flows (`crate::inband`), for the
    /// rpm figures; not part of the document.
    #[serde(skip)]
    pub inband: Vec<crate::inband::InbandSample>,
}

/// Evidence of both hosts; None for a side that could not be seen (an iperf3 peer).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Evidence {
    pub client: Option<HostEvidence>,
    pub server: Option<HostEvidence>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Bytes the receiving applications got ÷ the receivers' measuring window. The headline.
    pub goodput_bps: f64,
    /// Bytes the senders wrote ÷ the senders' window, labelled as such.
    pub sender_bps: f64,
    /// Bytes received and counted (after the omitted warm-up).
    pub bytes: u64,
    pub sender_bytes: u64,
    /// The receivers' measuring window.
    pub seconds: f64,
    pub sender_seconds: f64,
    pub io: IoSummary,
    pub cpu: CpuSummary,
    /// Performance Index, T/C × T/P (see `metrics::performance_index`).
    pub pi: Option<f64>,
    pub tcp: Option<TcpSummary>,
    pub udp: Option<UdpSummary>,
    pub wire: WireSummary,
    /// Per direction, for bidirectional tests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowSummary>,
    /// Why the transfer is not faster (see `diagnosis`).
    #[serde(default)]
    pub diagnosis: Option<Diagnosis>,
    /// Request/response tests: transactions and their round trips.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rr: Option<RrSummary>,
    /// How evenly the streams shared the path, for tests of more than one stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fairness: Option<Fairness>,
}

/// How evenly the streams of a test shared the path: Jain's index over the streams'
/// goodputs (1 when all are equal, 1/n when one stream got everything) and the spread.
/// With `--bidir` it covers the streams of both flows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fairness {
    pub streams: u32,
    pub jain_index: f64,
    pub min_bps: f64,
    pub median_bps: f64,
    pub max_bps: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowSummary {
    pub flow: Flow,
    pub goodput_bps: f64,
    pub bytes: u64,
    pub seconds: f64,
    pub sender_bps: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct IoStats {
    pub calls: u64,
    pub bytes: u64,
    pub calls_per_s: f64,
    pub bytes_per_call: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct IoSummary {
    /// None where the side's calls were not counted (an iperf3 peer does not report them).
    pub sender: Option<IoStats>,
    pub receiver: Option<IoStats>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CpuSummary {
    /// The client's host.
    pub local: Option<CpuSide>,
    /// The server's host.
    pub remote: Option<CpuSide>,
}

/// CPU one side spent during the test window.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CpuSide {
    /// User and system seconds of this side's threads (getrusage per thread).
    pub user_s: f64,
    pub sys_s: f64,
    /// (user + sys) ÷ window, in % of one core.
    pub process_percent: f64,
    /// Busy time of the whole host over all cores, softirq and irq included, 0–100.
    pub system_percent: Option<f64>,
    pub softirq_percent: Option<f64>,
    pub steal_percent: Option<f64>,
    /// The busiest core's busy share, 0–100, and which core.
    pub busiest_core_percent: Option<f64>,
    pub busiest_core: Option<u32>,
    pub cores: Option<u32>,
    /// Goodput per busy core of this host (system_percent × cores): what a core of this
    /// host moves, the cost side of the Performance Index.
    #[serde(default)]
    pub bps_per_busy_core: Option<f64>,
    /// Processor cycles of this side's process per byte moved (netperf's service demand),
    /// None where the processor's counters cannot be read.
    #[serde(default)]
    pub cycles_per_byte: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TcpSummary {
    /// Retransmitted segments over all sending streams.
    pub retransmits: Option<u64>,
    pub segs_out: Option<u64>,
    pub segs_in: Option<u64>,
    /// Mean of the senders' smoothed RTTs, microseconds.
    pub rtt_us: Option<f64>,
    pub snd_cwnd_max: Option<u64>,
    pub busy_time_us: Option<u64>,
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
    pub congestion: Option<String>,
    /// Shares of the senders' busy time spent limited by the receiver's window and by
    /// their own send buffer (TCP_INFO); the rest is congestion control or the path.
    #[serde(default)]
    pub rwnd_limited_percent: Option<f64>,
    #[serde(default)]
    pub sndbuf_limited_percent: Option<f64>,
    /// Of the retransmits, segments the receivers reported receiving twice (DSACK): the
    /// retransmit was spurious, not loss.
    #[serde(default)]
    pub dsack_dups: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct UdpSummary {
    /// Datagrams the senders sent.
    pub packets: u64,
    /// Unique datagrams the receivers got.
    pub received: u64,
    pub lost: u64,
    /// lost ÷ packets, always within 0–100.
    pub loss_percent: f64,
    pub out_of_order: u64,
    pub duplicates: u64,
    /// RFC 3550 interarrival jitter, the mean over streams.
    pub jitter_ms: Option<f64>,
    /// Of the lost datagrams, those the receiving host's kernel dropped for want of
    /// buffer (socket overflow counters), and the rest, lost on the path.
    pub lost_in_receiver: Option<u64>,
    pub lost_on_path: Option<u64>,
    /// Where the loss happened: "none", "receiver", "path" or "receiver and path".
    pub loss_location: String,
    /// SO_RXQ_OVFL over the receiving sockets.
    pub socket_drops: Option<u64>,
    /// Udp RcvbufErrors and InErrors of the receiving host (/proc/net/snmp, host-wide).
    pub receiver_rcvbuf_errors: Option<u64>,
    pub receiver_in_errors: Option<u64>,
    /// Sends the sender's kernel refused with ENOBUFS.
    pub sender_enobufs: u64,
    /// Datagrams from other addresses or with a wrong token, counted and dropped.
    pub foreign_datagrams: u64,
    /// Target rate per stream, when paced.
    pub target_bps: Option<f64>,
    /// Datagrams per second: sent over the senders' window, received (unique) over the
    /// receivers' window. None where the window is empty or the peer did not say.
    pub sent_pps: Option<f64>,
    pub received_pps: Option<f64>,
}

/// What the wire could carry and how close the test came. Null where unknown.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WireSummary {
    pub link_bps: Option<f64>,
    pub model_goodput_bps: Option<f64>,
    pub efficiency: Option<f64>,
    pub mtu_bytes: Option<u32>,
    pub link_source: Option<String>,
    /// The emulated path the test crossed (a lab's delay line); absent for any other link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<WirePath>,
    /// On such a path, what TCP can reach there: the wire model bounded by the window the
    /// receiver advertised over the round trip, and by the path's loss (Mathis, for a
    /// loss-based sender); absent without a path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_model: Option<PathModel>,
}

/// What TCP can reach on an emulated path, and what bounds it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PathModel {
    pub goodput_bps: f64,
    /// "wire", "window" or "loss": the lowest bound.
    pub limit: PathLimit,
    /// Goodput ÷ this model.
    pub efficiency: Option<f64>,
    /// The round trip the bounds use: the senders' minimum RTT, else the path's delays.
    pub rtt_ms: f64,
    pub window_bps: Option<f64>,
    pub loss_bps: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PathLimit {
    Wire,
    Window,
    Loss,
}

/// What a lab's delay line did to each direction of a test's path, as it was asked to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct WirePath {
    /// From the client's host to the server's.
    pub client_to_server: PathDirection,
    pub server_to_client: PathDirection,
}

/// One direction of an emulated path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PathDirection {
    pub delay_ms: f64,
    /// Each packet's delay moves by up to ± this, uniformly; order is kept.
    pub jitter_ms: f64,
    pub loss_percent: f64,
    pub reorder_percent: f64,
}

impl WirePath {
    /// The round trip the path adds, ms.
    pub fn added_rtt_ms(&self) -> f64 {
        self.client_to_server.delay_ms + self.server_to_client.delay_ms
    }
}

impl WireSummary {
    /// The link is an emulated one of `wirerate lab` (its source reads "lab NAME"), whose
    /// shaper queue sits on each host's egress.
    pub fn is_lab(&self) -> bool {
        self.link_source
            .as_deref()
            .is_some_and(|s| s == "lab" || s.starts_with("lab "))
    }
}

/// One interval report of received bytes (one flow).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub flow: Flow,
    /// One stream's share of the flow (its id), for tests of more than one stream; None
    /// (absent in JSON) for the flow's sum over its streams, the figure every reader of
    /// intervals sums or plots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<u32>,
    pub start_s: f64,
    pub end_s: f64,
    pub bytes: u64,
    pub bps: f64,
    /// True for intervals inside the warm-up that is not counted.
    pub omitted: bool,
    /// UDP: datagrams received and the loss within this interval (0–100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packets: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_percent: Option<f64>,
    /// UDP: the receivers' interarrival jitter (RFC 3550) where the interval ends, in ms; a
    /// flow's sum gives the mean over its streams (as iperf3's `[SUM]` does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_ms: Option<f64>,
    /// TCP: the flow's senders over this interval (TCP_INFO deltas and gauges).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<IntervalTcp>,
    /// The interval's bottleneck, given where it differs from the previous interval's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<Bottleneck>,
    /// Request/response tests: the interval's transactions and round trips, all flows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rr: Option<Box<RrInterval>>,
}

/// Figures of one stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    pub id: u32,
    pub flow: Flow,
    pub sender: StreamSide,
    pub receiver: StreamSide,
    pub goodput_bps: f64,
    pub tcp_sender: Option<TcpInfo>,
    pub tcp_receiver: Option<TcpInfo>,
}

/// One end of one stream.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct StreamSide {
    /// All bytes moved, warm-up included.
    pub bytes: u64,
    /// Bytes counted after the warm-up.
    pub counted_bytes: u64,
    pub calls: u64,
    /// Calls made in the counted window; None where the side did not count them apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted_calls: Option<u64>,
    /// Where the counted window opened, in seconds from the side's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opened_s: Option<f64>,
    /// From the counted window's opening to the last byte.
    pub seconds: f64,
    pub user_s: f64,
    pub sys_s: f64,
    /// The stream thread's time on a CPU and waiting for one (scheduler statistics).
    #[serde(default)]
    pub run_s: Option<f64>,
    #[serde(default)]
    pub wait_s: Option<f64>,
    /// Times the stream thread went to sleep in the window (voluntary context switches):
    /// each one a wait inside a socket call, for a full send buffer or for data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleeps: Option<u64>,
    /// The one CPU the stream thread was allowed to run on (its affinity held one: `-A`,
    /// `taskset -c N`); absent when it could run on more. Two ends on one host pinned to
    /// one CPU take it in turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_cpu: Option<u32>,
    /// The data worker that served this end (its number on its side) when the stream shared
    /// one; `user_s` and `sys_s` are then its even share of the worker's time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<u32>,
}

/// The kernel's view of a TCP connection at the end of the test (TCP_INFO). Fields the
/// running kernel does not report are None.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TcpInfo {
    pub retransmits_total: Option<u64>,
    pub lost: Option<u64>,
    pub segs_out: Option<u64>,
    pub segs_in: Option<u64>,
    pub data_segs_out: Option<u64>,
    pub data_segs_in: Option<u64>,
    pub rtt_us: Option<u64>,
    pub rttvar_us: Option<u64>,
    pub snd_cwnd: Option<u64>,
    pub snd_mss: Option<u64>,
    pub rcv_mss: Option<u64>,
    pub pmtu: Option<u64>,
    pub reordering: Option<u64>,
    pub delivery_rate_bps: Option<u64>,
    pub busy_time_us: Option<u64>,
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
    pub bytes_acked: Option<u64>,
    pub bytes_received: Option<u64>,
    pub bytes_retrans: Option<u64>,
    pub timestamps: Option<bool>,
    pub congestion: Option<String>,
    /// Later additions of the kernel's struct; None where the kernel is older.
    #[serde(default)]
    pub min_rtt_us: Option<u64>,
    #[serde(default)]
    pub snd_ssthresh: Option<u64>,
    #[serde(default)]
    pub rcv_space: Option<u64>,
    #[serde(default)]
    pub notsent_bytes: Option<u64>,
    #[serde(default)]
    pub pacing_rate_bps: Option<u64>,
    /// The last delivery-rate sample was limited by the application, not the network.
    #[serde(default)]
    pub app_limited: Option<bool>,
    #[serde(default)]
    pub dsack_dups: Option<u64>,
    #[serde(default)]
    pub reord_seen: Option<u64>,
    #[serde(default)]
    pub rcv_ooopack: Option<u64>,
    /// The window the peer advertises to this socket, and the one this socket advertises.
    #[serde(default)]
    pub snd_wnd: Option<u64>,
    #[serde(default)]
    pub rcv_wnd: Option<u64>,
    #[serde(default)]
    pub total_rto: Option<u64>,
}

impl TcpInfo {
    /// The congestion window in bytes (segments × the sender's MSS): the one unit every
    /// report shows it in.
    pub fn cwnd_bytes(&self) -> Option<u64> {
        self.snd_cwnd?.checked_mul(self.snd_mss?)
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Env {
    pub client: HostEnv,
    pub server: HostEnv,
    /// True when the server ran inside the client's process (no HOST given).
    pub embedded_server: bool,
    pub server_addr: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HostEnv {
    pub hostname: Option<String>,
    pub kernel: Option<String>,
    pub cpu_model: Option<String>,
    pub cores: Option<u32>,
    /// Interfaces that carried the test, as deltas over the test.
    pub interfaces: Vec<InterfaceDelta>,
    /// The socket buffers the kernel set for the test's `-w`, where one was asked for.
    #[serde(default)]
    pub socket_buffers: Option<SocketBuffers>,
}

/// What `-w` asked for and what the kernel set, read back from a data socket (Linux doubles
/// the request for its bookkeeping and enforces a minimum).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct SocketBuffers {
    pub asked_bytes: u64,
    pub send_bytes: Option<u64>,
    pub receive_bytes: Option<u64>,
}

/// Counters of one interface over the test (after minus before).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct InterfaceDelta {
    pub name: String,
    /// The NIC driver (ethtool's name for it), where the device has one.
    #[serde(default)]
    pub driver: Option<String>,
    pub mtu_bytes: Option<u32>,
    pub speed_bps: Option<f64>,
    pub rx_packets: Option<u64>,
    pub tx_packets: Option<u64>,
    pub rx_bytes: Option<u64>,
    pub tx_bytes: Option<u64>,
    pub rx_dropped: Option<u64>,
    pub tx_dropped: Option<u64>,
    pub rx_errors: Option<u64>,
    pub tx_errors: Option<u64>,
    pub rx_over_errors: Option<u64>,
    pub rx_fifo_errors: Option<u64>,
}
