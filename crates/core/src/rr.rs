//! Request/response tests (`wirerate rr`): their settings, their limits, and the summary
//! built from both sides' counts.
//!
//! A transaction is one request of `request_bytes` from the client and one response of
//! `response_bytes` from the server. Its latency is the full round trip, measured by the
//! client (as netperf, neper and `sockperf --full-rtt` report it): field names say `rtt_`.

use serde::{Deserialize, Serialize};

use crate::latency::{OpenLoopStats, RttStats};
use crate::result::CpuSummary;
use crate::side_report::{Role, SideReport};
use crate::spec::{invalid, Direction, End, Protocol, SpecError, TestSpec};

/// How transactions travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RrMode {
    /// One persistent TCP connection per flow (netperf's TCP_RR).
    #[default]
    Tcp,
    /// A new TCP connection per transaction: connect, request, response, close (TCP_CRR).
    Crr,
    /// One UDP datagram each way (UDP_RR); a lost one is counted after a timeout and the
    /// test goes on.
    Udp,
}

impl RrMode {
    pub fn name(self) -> &'static str {
        match self {
            RrMode::Tcp => "tcp",
            RrMode::Crr => "crr",
            RrMode::Udp => "udp",
        }
    }

    /// The test's name in lists, netperf's in lower case: `tcp_rr`, `tcp_crr`, `udp_rr`.
    pub fn test_name(self) -> &'static str {
        match self {
            RrMode::Tcp => "tcp_rr",
            RrMode::Crr => "tcp_crr",
            RrMode::Udp => "udp_rr",
        }
    }

    /// The mode of a `name()`, as stored.
    pub fn from_name(name: &str) -> Option<RrMode> {
        [RrMode::Tcp, RrMode::Crr, RrMode::Udp]
            .into_iter()
            .find(|m| m.name() == name)
    }
}

/// Settings of a request/response test. The spec's `parallel` is the number of flows and
/// its `end` says when they stop: `Time`, or `Blocks` read as transactions per flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RrSpec {
    pub mode: RrMode,
    pub request_bytes: u64,
    pub response_bytes: u64,
    /// Transactions in flight per flow (1: one at a time).
    pub burst: u32,
    /// Open loop: transactions per second over all flows, sent on a fixed schedule and
    /// timed from their scheduled send time. None: closed loop.
    pub rate_tps: Option<f64>,
    /// UDP: how long a request waits for its response before it is counted lost.
    pub loss_timeout_s: f64,
}

impl Default for RrSpec {
    fn default() -> Self {
        RrSpec {
            mode: RrMode::Tcp,
            request_bytes: 1,
            response_bytes: 1,
            burst: 1,
            rate_tps: None,
            loss_timeout_s: 0.2,
        }
    }
}

/// Limits of request/response tests.
pub mod limits {
    /// Largest request or response over TCP.
    pub const MAX_MESSAGE: u64 = 16 << 20;
    /// Largest UDP payload.
    pub const MAX_UDP_MESSAGE: u64 = 65_507;
    /// A UDP request or response carries its 8-byte sequence number.
    pub const MIN_UDP_MESSAGE: u64 = 8;
    pub const MAX_BURST: u32 = 1024;
    pub const MAX_RATE_TPS: f64 = 10_000_000.0;
    /// Open loop: the slowest schedule, so a flow sends within any idle timeout.
    pub const MIN_RATE_TPS: f64 = 1.0;
}

impl RrSpec {
    /// Checks the settings against the limits and the spec they ride in.
    pub fn validate(&self, spec: &TestSpec) -> Result<(), SpecError> {
        let (lo, hi) = match self.mode {
            RrMode::Udp => (limits::MIN_UDP_MESSAGE, limits::MAX_UDP_MESSAGE),
            _ => (1, limits::MAX_MESSAGE),
        };
        for (what, v) in [
            ("request", self.request_bytes),
            ("response", self.response_bytes),
        ] {
            if !(lo..=hi).contains(&v) {
                return Err(invalid(match self.mode {
                    RrMode::Udp => format!(
                        "a UDP {what} must be {lo} to {hi} bytes (it carries an 8-byte sequence number)"
                    ),
                    _ => format!("a {what} must be 1 byte to {} MiB", hi >> 20),
                }));
            }
        }
        if self.burst == 0 || self.burst > limits::MAX_BURST {
            return Err(invalid(format!(
                "burst must be 1 to {} transactions in flight",
                limits::MAX_BURST
            )));
        }
        if self.mode == RrMode::Crr && self.burst != 1 {
            return Err(invalid(
                "crr runs one transaction per connection at a time: burst must be 1",
            ));
        }
        if let Some(r) = self.rate_tps {
            let per_flow = r / f64::from(spec.parallel.max(1));
            if !(r.is_finite() && r <= limits::MAX_RATE_TPS && per_flow >= limits::MIN_RATE_TPS) {
                return Err(invalid(format!(
                    "rate must be at least 1 transaction per second per flow and at most {} in all",
                    limits::MAX_RATE_TPS
                )));
            }
        }
        if !(self.loss_timeout_s.is_finite() && (0.001..=60.0).contains(&self.loss_timeout_s)) {
            return Err(invalid("loss timeout must be 0.001 to 60 seconds"));
        }
        let want = match self.mode {
            RrMode::Udp => Protocol::Udp,
            _ => Protocol::Tcp,
        };
        if spec.protocol != want || spec.direction != Direction::Forward {
            return Err(invalid(
                "an rr test's protocol follows its mode, and its direction is forward",
            ));
        }
        if matches!(spec.end, End::Bytes { .. }) {
            return Err(invalid("an rr test ends by time or by transaction count"));
        }
        if spec.omit_s != 0.0 {
            return Err(invalid("an rr test has no warm-up to omit"));
        }
        Ok(())
    }

    /// Transactions per flow when the test ends by count.
    pub fn count_per_flow(spec: &TestSpec) -> Option<u64> {
        match spec.end {
            End::Blocks { blocks } => Some(blocks),
            _ => None,
        }
    }

    /// Open loop: seconds between two scheduled requests of one flow.
    pub fn period_s(&self, parallel: u32) -> Option<f64> {
        self.rate_tps
            .filter(|r| *r > 0.0)
            .map(|r| f64::from(parallel.max(1)) / r)
    }
}

/// What one side counted on one flow of an rr test.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RrCounts {
    /// Client: responses received whole. Server: responses sent.
    pub transactions: u64,
    /// UDP, client: requests whose response did not come within the loss timeout.
    pub lost: u64,
    /// UDP, client: responses that came after their request was counted lost.
    pub late: u64,
    /// CRR: connections opened (client) or served (server).
    pub connections: u64,
    /// Client: round-trip times of this flow's transactions.
    pub rtt: Option<RttStats>,
}

/// One flow of an rr test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RrFlow {
    pub id: u32,
    pub transactions: u64,
    pub server_transactions: u64,
    pub seconds: f64,
    pub tps: f64,
    pub lost: u64,
    pub connections: u64,
    #[serde(flatten)]
    pub rtt: Option<RttStats>,
}

/// The rr section of a result's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RrSummary {
    pub mode: RrMode,
    pub request_bytes: u64,
    pub response_bytes: u64,
    pub burst: u32,
    /// Open loop target over all flows; null for closed loop.
    pub rate_tps: Option<f64>,
    /// Transactions completed, as the client counted them (responses received whole).
    pub transactions: u64,
    /// Responses the server sent. Equal to `transactions` over TCP; over UDP it also counts
    /// responses lost on the way back.
    pub server_transactions: u64,
    /// The client's window: from the first request to the last response.
    pub seconds: f64,
    pub tps: f64,
    /// UDP: requests without a response within the loss timeout, and the share of all
    /// requests they are (0–100).
    pub lost: u64,
    pub loss_percent: f64,
    /// CRR: connections the client opened.
    pub connections: u64,
    /// Round trips over all flows, from one histogram. Open loop: timed from each request's
    /// scheduled send time ("corrected").
    #[serde(flatten)]
    pub rtt: Option<RttStats>,
    /// Open loop only: how late the client's sends left, and the round trips timed from
    /// the actual sends ("uncorrected").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<OpenLoopStats>,
    /// CPU time (user + system) of each side's process per transaction, microseconds.
    pub cpu_us_per_transaction_local: Option<f64>,
    pub cpu_us_per_transaction_remote: Option<f64>,
    pub flows: Vec<RrFlow>,
}

/// One interval of an rr test, over all flows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RrInterval {
    pub transactions: u64,
    pub tps: f64,
    #[serde(flatten)]
    pub rtt: Option<RttStats>,
}

/// Builds the rr summary from the client's and the server's reports. The round trips over
/// all flows come from the client's merged histogram (`SideReport::rr_rtt`), since
/// per-flow percentiles cannot be merged.
pub fn summarize(
    rr: &RrSpec,
    client: &SideReport,
    server: &SideReport,
    cpu: &CpuSummary,
) -> RrSummary {
    let mut flows = Vec::new();
    for s in client.streams.iter().filter(|s| s.role == Role::Sender) {
        let c = s.rr.unwrap_or_default();
        let srv = server
            .streams
            .iter()
            .find(|x| x.id == s.id && x.role == Role::Receiver)
            .and_then(|x| x.rr)
            .unwrap_or_default();
        flows.push(RrFlow {
            id: s.id,
            transactions: c.transactions,
            server_transactions: srv.transactions,
            seconds: s.seconds,
            tps: rate(c.transactions, s.seconds),
            lost: c.lost,
            connections: c.connections,
            rtt: c.rtt,
        });
    }
    flows.sort_by_key(|f| f.id);
    let transactions: u64 = flows.iter().map(|f| f.transactions).sum();
    let lost: u64 = flows.iter().map(|f| f.lost).sum();
    let seconds = flows.iter().map(|f| f.seconds).fold(0.0, f64::max);
    let per_tx = |side: Option<&crate::result::CpuSide>| {
        side.filter(|_| transactions > 0)
            .map(|c| (c.user_s + c.sys_s) * 1e6 / transactions as f64)
    };
    RrSummary {
        mode: rr.mode,
        request_bytes: rr.request_bytes,
        response_bytes: rr.response_bytes,
        burst: rr.burst,
        rate_tps: rr.rate_tps,
        transactions,
        server_transactions: flows.iter().map(|f| f.server_transactions).sum(),
        seconds,
        tps: rate(transactions, seconds),
        lost,
        loss_percent: if transactions + lost > 0 {
            lost as f64 * 100.0 / (transactions + lost) as f64
        } else {
            0.0
        },
        connections: flows.iter().map(|f| f.connections).sum(),
        rtt: client.rr_rtt,
        open_loop: client.rr_open_loop.filter(|_| rr.rate_tps.is_some()),
        cpu_us_per_transaction_local: per_tx(cpu.local.as_ref()),
        cpu_us_per_transaction_remote: per_tx(cpu.remote.as_ref()),
        flows,
    }
}

fn rate(n: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::TestKind;

    fn spec(rr: RrSpec) -> TestSpec {
        TestSpec {
            protocol: if rr.mode == RrMode::Udp {
                Protocol::Udp
            } else {
                Protocol::Tcp
            },
            test: TestKind::Rr(rr),
            ..Default::default()
        }
    }

    #[test]
    fn defaults_are_valid_and_bad_values_are_refused() {
        spec(RrSpec::default()).validate().unwrap();
        let bad = [
            RrSpec {
                request_bytes: 0,
                ..Default::default()
            },
            RrSpec {
                response_bytes: limits::MAX_MESSAGE + 1,
                ..Default::default()
            },
            RrSpec {
                rate_tps: Some(-1.0),
                ..Default::default()
            },
            RrSpec {
                rate_tps: Some(f64::NAN),
                ..Default::default()
            },
            RrSpec {
                burst: 0,
                ..Default::default()
            },
            RrSpec {
                mode: RrMode::Crr,
                burst: 2,
                ..Default::default()
            },
            RrSpec {
                mode: RrMode::Udp,
                request_bytes: 1,
                ..Default::default()
            },
        ];
        for b in bad {
            let e = spec(b.clone()).validate().unwrap_err().to_string();
            assert!(!e.contains('\n') && !e.is_empty(), "{b:?}: {e}");
        }
    }

    #[test]
    fn older_specs_parse_as_stream_tests() {
        let mut v = serde_json::to_value(TestSpec::default()).unwrap();
        v.as_object_mut().unwrap().remove("test");
        let s: TestSpec = serde_json::from_value(v).unwrap();
        assert!(s.test.is_stream());
        let rr = spec(RrSpec {
            rate_tps: Some(1000.0),
            ..Default::default()
        });
        let back: TestSpec = serde_json::from_str(&serde_json::to_string(&rr).unwrap()).unwrap();
        assert_eq!(back, rr);
    }
}
