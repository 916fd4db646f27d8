//! Why a transfer is not faster: pure rules over a [`RunResult`](crate::RunResult) and the
//! evidence both hosts gathered, naming one bottleneck with its evidence and advice, and
//! ranking the candidates when the evidence is mixed. Every threshold is a named constant
//! in [`rules`], documented in `docs/diagnosis.md` with where it comes from.

use serde::{Deserialize, Serialize};

mod cc;
mod compare;
mod cpu;
mod intervals;
mod loss;
mod queue;
pub mod rules;
mod tcp;
mod text;
mod traffic;
mod udp;
mod view;
mod waits;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_path;
#[cfg(test)]
mod tests_udp;
#[cfg(test)]
mod tests_waits;

pub use compare::differences;
pub use intervals::interval_bottlenecks;
pub use rules::diagnose;

/// The bottleneck classes. The JSON names are part of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bottleneck {
    /// Goodput is at the wire model's rate: nothing to gain.
    Wire,
    /// The sending thread, or the core it runs on, is saturated.
    SenderCpu,
    /// The receiving thread is saturated or starved of CPU.
    ReceiverCpu,
    /// Both ends share one host and every core of it was busy, while neither end's thread
    /// used a core: the host's CPU as a whole (other work included) set the rate.
    HostCpu,
    /// Both ends share one host and take turns: each sleeps while the other runs (the
    /// sender on its full send buffer, the receiver for data), neither uses a core, and
    /// neither waits for a CPU.
    TurnTaking,
    /// One core of the receiving host is saturated by softirq work while others idle.
    ReceiverSoftirq,
    /// The receiver's advertised window limits the sender.
    ReceiverWindow,
    /// The sender's own socket buffer limits it.
    SenderBuffer,
    /// The congestion window limits the sender, with real loss on the path.
    Congestion,
    /// The congestion control's window or pacing held a sender that lost nothing, had CPU
    /// to spare and was held by no window or buffer.
    CongestionControl,
    /// Retransmits that were not loss: the path reorders (DSACK).
    Reordering,
    /// The test's own pacing (UDP `-b`, or a TCP rate) sets the rate.
    AppPacing,
    /// UDP datagrams dropped in the receiving socket's buffer.
    UdpReceiverBuffer,
    /// UDP datagrams dropped by the receiving host below the socket: the NIC's ring or
    /// the per-core backlog (softnet).
    UdpReceiverHost,
    /// UDP datagrams lost between the hosts.
    UdpPath,
    /// UDP datagrams dropped in the sending host's queues (ENOBUFS, qdisc).
    UdpSenderQueue,
    /// The evidence names no bottleneck.
    Unknown,
}

impl Bottleneck {
    /// Short words for text output: "sender CPU", "receiver's window".
    pub fn words(self) -> &'static str {
        match self {
            Bottleneck::Wire => "the wire",
            Bottleneck::SenderCpu => "sender CPU",
            Bottleneck::ReceiverCpu => "receiver CPU",
            Bottleneck::HostCpu => "the host's CPU (both ends share it)",
            Bottleneck::TurnTaking => "the two ends taking turns on one host",
            Bottleneck::ReceiverSoftirq => "receiver softirq core",
            Bottleneck::ReceiverWindow => "the receiver's window",
            Bottleneck::SenderBuffer => "the sender's buffer",
            Bottleneck::Congestion => "congestion or loss on the path",
            Bottleneck::CongestionControl => "the congestion control's own window or pacing",
            Bottleneck::Reordering => "reordering (spurious retransmits)",
            Bottleneck::AppPacing => "the test's own pacing",
            Bottleneck::UdpReceiverBuffer => "the receiver's socket buffer",
            Bottleneck::UdpReceiverHost => "the receiving host below the socket (NIC, softnet)",
            Bottleneck::UdpPath => "loss on the path",
            Bottleneck::UdpSenderQueue => "the sender's queue",
            Bottleneck::Unknown => "not determined",
        }
    }
}

/// How sure the verdict is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

/// The verdict of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    pub bottleneck: Bottleneck,
    pub confidence: Confidence,
    /// One line, for people: "sender CPU: the sending thread ran 98 % of a core".
    pub verdict: String,
    /// The figures that support the verdict, each with the threshold it was held to.
    pub evidence: Vec<EvidenceItem>,
    /// What to do about it, most useful first.
    pub advice: Vec<String>,
    /// Every class with any support, strongest first (the verdict's first).
    pub candidates: Vec<Candidate>,
    /// Findings that explain figures but are not the bottleneck (spurious retransmits).
    #[serde(default)]
    pub notes: Vec<String>,
    /// What could not be seen, and on which side ("server: no kernel counters (iperf3)").
    #[serde(default)]
    pub unseen: Vec<String>,
}

/// One figure behind a verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvidenceItem {
    /// Which class it supports.
    pub supports: Bottleneck,
    /// "client", "server", "sender", "receiver" or "path".
    pub side: String,
    /// What was measured, in words: "sending thread CPU".
    pub what: String,
    pub value: f64,
    /// Unit of value and threshold: "percent", "bytes", "count", "bit/s", "ratio".
    pub unit: String,
    /// The threshold the value was held to, and which way it decides.
    pub threshold: Option<f64>,
    /// Where the figure comes from: "getrusage", "TCP_INFO", "TcpExt", "/proc/stat".
    pub source: String,
    /// The evidence line as printed.
    pub text: String,
}

/// A class and how strongly the evidence supports it, 0–1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub bottleneck: Bottleneck,
    pub score: f64,
}
