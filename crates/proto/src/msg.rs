//! Control messages. One enum for both directions; the session state machines decide which
//! are acceptable when.

use serde::{Deserialize, Serialize};
use wirerate_core::evidence::TcpSample;
use wirerate_core::result::Interval;
use wirerate_core::side_report::SideReport;
use wirerate_core::spec::Flow;
use wirerate_core::TestSpec;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Msg {
    /// Server → client, first frame: ready for a spec.
    Welcome { server: String },
    /// Client → server, first when the client logs in: SCRAM's client-first-message
    /// (`auth.rs`).
    Login { scram: String },
    /// Server → client: SCRAM's server-first-message (nonce, salt, iterations).
    LoginChallenge { scram: String },
    /// Client → server: SCRAM's client-final-message (channel binding, nonce, proof).
    LoginProof { scram: String },
    /// Server → client: SCRAM's server-final-message (the server's signature); the client
    /// checks it, then sends its spec.
    LoginOk { scram: String },
    /// Server → client: another test is running; try again later.
    Busy { retry_after_s: f64 },
    /// Client → server: the test to run. `feedback`: this client reports what its UDP
    /// receivers take (`udp_feedback`) when the server asks for it in `accepted`; a client
    /// from before the field does not, and the server then relies on the control
    /// connection's liveness alone.
    Spec {
        spec: TestSpec,
        #[serde(default, skip_serializing_if = "is_false")]
        feedback: bool,
    },
    /// Server → client: spec accepted; data streams must present this token (hex), or,
    /// when the control connection is TLS, the token both sides derive from the TLS session
    /// (the field is then absent). For UDP, the server's port of each stream, flow by flow,
    /// stream id by stream id.
    Accepted {
        #[serde(default, skip_serializing_if = "String::is_empty")]
        token: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        udp_ports: Vec<u16>,
        /// When the server sends UDP (`-u -R`, `-u --bidir`): every how many seconds it
        /// wants `udp_feedback` while the test runs. Absent from a server from before it,
        /// which must not be sent any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        feedback_s: Option<f64>,
    },
    /// Client → server (UDP): the nonces the server's challenges carried, proving the client
    /// receives at the addresses its hellos came from.
    UdpProof { proofs: Vec<UdpProof> },
    /// Client → server, while a test whose server sends UDP runs, every `feedback_s` of
    /// `accepted`: the bytes this client's UDP receivers have taken so far. The server's
    /// circuit breaker stops its senders when these stop growing (`wirerate_core::breaker`).
    UdpFeedback { received: u64 },
    /// Either way: the test cannot go on, and why.
    Refused { reason: String },
    /// Server → client: every data stream is attached; the clock starts now.
    Start,
    /// Client → server: end the test now (the user interrupted it). Both sides' senders
    /// stop, and the reports follow as at a normal end.
    Stop,
    /// Server → client: an interval of a flow the server receives.
    Interval { interval: Interval },
    /// Either way, before `report`: some of this side's intervals and TCP samples, when the
    /// whole report would not fit in one frame (see `parts`).
    ReportPart {
        #[serde(default)]
        intervals: Vec<Interval>,
        #[serde(default)]
        tcp_samples: Vec<TcpSample>,
    },
    /// Either way: this side's final measurements (after its parts, if any).
    Report { report: Box<SideReport> },
}

impl Msg {
    pub fn name(&self) -> &'static str {
        match self {
            Msg::Welcome { .. } => "welcome",
            Msg::Login { .. } => "login",
            Msg::LoginChallenge { .. } => "login_challenge",
            Msg::LoginProof { .. } => "login_proof",
            Msg::LoginOk { .. } => "login_ok",
            Msg::Busy { .. } => "busy",
            Msg::Spec { .. } => "spec",
            Msg::Accepted { .. } => "accepted",
            Msg::UdpProof { .. } => "udp_proof",
            Msg::UdpFeedback { .. } => "udp_feedback",
            Msg::Refused { .. } => "refused",
            Msg::Start => "start",
            Msg::Stop => "stop",
            Msg::Interval { .. } => "interval",
            Msg::ReportPart { .. } => "report_part",
            Msg::Report { .. } => "report",
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One UDP stream's answer to its challenge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdpProof {
    pub flow: Flow,
    pub stream_id: u32,
    pub nonce: u64,
}

/// Hex of a token, for the `Accepted` message.
pub fn token_hex(t: &crate::Token) -> String {
    t.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses a token from hex; None unless exactly 32 hex digits.
pub fn token_from_hex(s: &str) -> Option<crate::Token> {
    if s.len() != 32 || !s.is_ascii() {
        return None;
    }
    let mut t = [0u8; 16];
    for (i, byte) in t.iter_mut().enumerate() {
        *byte = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_hex_round_trip() {
        let t = [0xab; 16];
        assert_eq!(token_from_hex(&token_hex(&t)), Some(t));
        assert_eq!(token_from_hex("zz"), None);
        assert_eq!(token_from_hex(&"é".repeat(16)), None);
    }
}
