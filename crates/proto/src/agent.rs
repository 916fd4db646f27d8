//! The agent exchange: a caller asks a `wirerate serve` (the agent, host A) to run a test
//! against another server (host B) and to send back the result (third-party mode, like
//! nuttcp's). It is its own small exchange on its own channel, beside the control session:
//!
//! ```text
//! caller → agent   preamble (channel 3), frame Request { to: "HOST:PORT", spec }
//! agent  → caller  frame Started                     (the agent took its slot and began)
//! agent  → caller  frame Done { result } | Failed { reason } | Busy { retry_s } (B was busy)
//!     or at once   frame Refused { reason } | Busy { retry_s }
//! ```
//!
//! Over TLS (the agent runs `serve --tls`, and then plain requests are refused):
//!
//! ```text
//! caller → agent   preamble (channel 2, TLS), agent → caller the same; TLS 1.3 handshake
//! caller → agent   preamble (channel 3) [, frame login]        (inside TLS from here on)
//! agent  → caller  preamble (channel 3) [, login_challenge]    (with `serve --users`)
//! caller → agent   [login_proof]
//! agent  → caller  [login_ok | refused]
//! caller → agent   frame Request, and the exchange goes on as above
//! ```
//!
//! The login frames are the control channel's (`crate::session_login`); with mutual TLS the
//! certificate names the user and there are none.
//!
//! Frames are the control channel's: a u32 big-endian length, then JSON. Sans IO and
//! without a clock: bytes in, frames out, time as an argument. Never panics on peer input:
//! lengths are checked against a cap before anything is kept, JSON nesting is bounded.

use std::time::{Duration, Instant};

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use wirerate_core::{RunResult, TestSpec};

use crate::frame::{Channel, Preamble, ProtoError, PREAMBLE_LEN};

/// The largest request an agent reads: a spec and an address are small.
pub const MAX_REQUEST_FRAME: usize = 64 << 10;
/// The largest answer a caller reads: a result carries every interval and stream.
pub const MAX_REPLY_FRAME: usize = crate::frame::MAX_SERVER_FRAME;
/// The longest `to` a caller may send (a host name and a port).
pub const MAX_TARGET_LEN: usize = 300;
/// Time an agent gets beyond the test itself to connect, collect reports and answer.
pub const AGENT_MARGIN: Duration = Duration::from_secs(20);

/// What a caller asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentRequest {
    /// The server to test against, as `HOST:PORT` (the agent resolves it and checks it
    /// against its rules).
    pub to: String,
    pub spec: TestSpec,
}

/// Every frame of the exchange.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum AgentMsg {
    Request(Box<AgentRequest>),
    Started,
    Done { result: Box<RunResult> },
    Failed { reason: String },
    Refused { reason: String },
    Busy { retry_s: f64 },
}

impl AgentMsg {
    fn name(&self) -> &'static str {
        match self {
            AgentMsg::Request(_) => "request",
            AgentMsg::Started => "started",
            AgentMsg::Done { .. } => "done",
            AgentMsg::Failed { .. } => "failed",
            AgentMsg::Refused { .. } => "refused",
            AgentMsg::Busy { .. } => "busy",
        }
    }
}

/// How an exchange ended, for the caller.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentOutcome {
    Done(Box<RunResult>),
    /// The agent ran the test and it failed (B refused, unreachable, a stream broke).
    Failed(String),
    /// The agent will not run it for this caller (not allowed, target not permitted).
    Refused(String),
    /// The agent (or B) is busy with another test.
    Busy(f64),
}

/// One frame: length, then JSON.
pub fn encode(msg: &AgentMsg) -> Vec<u8> {
    // our own types serialize to a Vec without failing: no IO, no non-string map keys
    let body = serde_json::to_vec(msg).unwrap_or_default();
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Takes one whole frame off the front of `buf`, if one is there.
fn take_frame<T: DeserializeOwned>(buf: &mut Vec<u8>, max: usize) -> Result<Option<T>, ProtoError> {
    let Some(prefix) = buf.get(..4) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
    if len > max {
        return Err(ProtoError::FrameTooLarge(len, max));
    }
    if buf.len() < 4 + len {
        return Ok(None);
    }
    let body = &buf[4..4 + len];
    let msg = if crate::depth::nesting_within(body, crate::depth::MAX_DEPTH) {
        serde_json::from_slice(body).map_err(|e| ProtoError::BadMessage(e.to_string()))
    } else {
        Err(ProtoError::BadMessage("JSON nested too deeply".into()))
    };
    buf.drain(..4 + len);
    msg.map(Some)
}

/// Appends `bytes` to `buf` unless that would hold more than one maximal frame.
fn accumulate(buf: &mut Vec<u8>, bytes: &[u8], max: usize) -> Result<(), ProtoError> {
    if buf.len() + bytes.len() > max + 4 + PREAMBLE_LEN {
        return Err(ProtoError::FrameTooLarge(buf.len() + bytes.len(), max));
    }
    buf.extend_from_slice(bytes);
    Ok(())
}

/// The caller's side: sends the request, waits for `Started` within the idle time, then
/// for the outcome within the test's bound plus [`AGENT_MARGIN`].
#[derive(Debug)]
pub struct AgentClient {
    out: Option<Vec<u8>>,
    buf: Vec<u8>,
    deadline: Instant,
    /// How long the test may take once started.
    run_bound: Duration,
    started: bool,
    done: bool,
    /// Inside TLS the agent answers with its own preamble first: the bytes of it so far.
    preamble: Option<Vec<u8>>,
}

impl AgentClient {
    /// `run_bound`: the longest the test itself may take (its time, or a cap for tests
    /// bounded by bytes).
    pub fn new(req: AgentRequest, now: Instant, idle: Duration, run_bound: Duration) -> Self {
        let mut out = Preamble::new(Channel::Agent).emit().to_vec();
        out.extend(encode(&AgentMsg::Request(Box::new(req))));
        AgentClient {
            out: Some(out),
            buf: Vec::new(),
            deadline: now + idle,
            run_bound,
            started: false,
            done: false,
            preamble: None,
        }
    }

    /// Inside TLS without a login: the agent's answer starts with its preamble.
    pub fn expect_preamble(mut self) -> Self {
        self.preamble = Some(Vec::new());
        self
    }

    /// Inside TLS after a login: the preamble has been exchanged, only the request goes.
    pub fn after_login(mut self) -> Self {
        if let Some(out) = self.out.as_mut() {
            out.drain(..PREAMBLE_LEN);
        }
        self
    }

    /// Bytes to send (once).
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.out.take()
    }

    /// When the agent has said too little for too long.
    pub fn poll_timeout(&self) -> Instant {
        self.deadline
    }

    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtoError> {
        if now >= self.deadline && !self.done {
            return Err(ProtoError::TimedOut(if self.started {
                "the agent ran the test"
            } else {
                "waiting for the agent to start"
            }));
        }
        Ok(())
    }

    /// Whether the agent has begun the test.
    pub fn started(&self) -> bool {
        self.started
    }

    /// Bytes from the agent; the outcome once it is known.
    pub fn handle_input(
        &mut self,
        bytes: &[u8],
        now: Instant,
    ) -> Result<Option<AgentOutcome>, ProtoError> {
        if self.done {
            return Ok(None);
        }
        let mut bytes = bytes;
        if let Some(pre) = self.preamble.as_mut() {
            let n = (PREAMBLE_LEN - pre.len()).min(bytes.len());
            pre.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if pre.len() < PREAMBLE_LEN {
                return Ok(None);
            }
            let p = Preamble::parse(pre)?;
            if p.channel != Channel::Agent {
                return Err(ProtoError::BadMessage(
                    "the agent answered with a preamble that is not for third-party requests"
                        .into(),
                ));
            }
            self.preamble = None;
        }
        accumulate(&mut self.buf, bytes, MAX_REPLY_FRAME)?;
        loop {
            let Some(msg) = take_frame::<AgentMsg>(&mut self.buf, MAX_REPLY_FRAME)? else {
                return Ok(None);
            };
            let outcome = match msg {
                AgentMsg::Started if !self.started => {
                    self.started = true;
                    self.deadline = now + self.run_bound + AGENT_MARGIN;
                    continue;
                }
                AgentMsg::Done { result } if self.started => AgentOutcome::Done(result),
                AgentMsg::Failed { reason } if self.started => AgentOutcome::Failed(reason),
                AgentMsg::Refused { reason } if !self.started => AgentOutcome::Refused(reason),
                AgentMsg::Busy { retry_s } => AgentOutcome::Busy(if retry_s.is_finite() {
                    retry_s.clamp(0.0, 3600.0)
                } else {
                    1.0
                }),
                other => {
                    return Err(ProtoError::Unexpected {
                        got: other.name(),
                        state: if self.started {
                            "the agent ran the test"
                        } else {
                            "waiting for the agent to start"
                        },
                    })
                }
            };
            self.done = true;
            return Ok(Some(outcome));
        }
    }

    /// The connection closed: an error unless the outcome is known.
    pub fn handle_close(&self) -> Result<(), ProtoError> {
        if self.done {
            Ok(())
        } else if self.started {
            Err(ProtoError::Closed("the agent ran the test"))
        } else {
            Err(ProtoError::Closed("waiting for the agent to start"))
        }
    }
}

/// The agent's side, after the preamble: reads one request frame.
#[derive(Debug, Default)]
pub struct AgentServer {
    buf: Vec<u8>,
}

impl AgentServer {
    pub fn new() -> Self {
        AgentServer::default()
    }

    /// Whether the whole frame at the front is a control login (a caller with `--user`
    /// asking an agent that has no users).
    fn is_login(&self) -> bool {
        let Some(prefix) = self.buf.get(..4) else {
            return false;
        };
        let len = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
        match self.buf.get(4..4 + len.min(MAX_REQUEST_FRAME)) {
            Some(body) if len <= MAX_REQUEST_FRAME => {
                crate::depth::nesting_within(body, crate::depth::MAX_DEPTH)
                    && matches!(
                        serde_json::from_slice::<crate::msg::Msg>(body),
                        Ok(crate::msg::Msg::Login { .. })
                    )
            }
            _ => false,
        }
    }

    /// Bytes from the caller; the request once it is whole. Anything but a request, a
    /// target address that is empty or too long, or a spec that does not validate is an
    /// error.
    pub fn handle_input(&mut self, bytes: &[u8]) -> Result<Option<AgentRequest>, ProtoError> {
        accumulate(&mut self.buf, bytes, MAX_REQUEST_FRAME)?;
        if self.is_login() {
            return Err(ProtoError::NoLogin);
        }
        match take_frame::<AgentMsg>(&mut self.buf, MAX_REQUEST_FRAME)? {
            None => Ok(None),
            Some(AgentMsg::Request(req)) => {
                let req = *req;
                if req.to.is_empty() || req.to.len() > MAX_TARGET_LEN {
                    return Err(ProtoError::BadMessage(format!(
                        "the target must be HOST:PORT of 1 to {MAX_TARGET_LEN} bytes"
                    )));
                }
                req.spec
                    .validate()
                    .map_err(|e| ProtoError::BadMessage(e.to_string()))?;
                Ok(Some(req))
            }
            Some(other) => Err(ProtoError::Unexpected {
                got: other.name(),
                state: "waiting for a request",
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> AgentRequest {
        AgentRequest {
            to: "127.0.0.2:5350".into(),
            spec: TestSpec::default(),
        }
    }

    /// Shuttles the request to an agent in memory, byte by byte.
    fn deliver(client: &mut AgentClient) -> AgentRequest {
        let bytes = client.poll_transmit().unwrap();
        assert!(client.poll_transmit().is_none());
        let pre = Preamble::parse(&bytes).unwrap();
        assert_eq!(pre.channel, Channel::Agent);
        let mut server = AgentServer::new();
        let mut got = None;
        for b in &bytes[PREAMBLE_LEN..] {
            assert!(got.is_none());
            got = server.handle_input(&[*b]).unwrap();
        }
        got.unwrap()
    }

    #[test]
    fn a_request_runs_and_its_result_comes_back() {
        let t0 = Instant::now();
        let mut c = AgentClient::new(req(), t0, Duration::from_secs(5), Duration::from_secs(10));
        assert_eq!(deliver(&mut c), req());
        assert_eq!(c.poll_timeout(), t0 + Duration::from_secs(5));
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(
            c.handle_input(&encode(&AgentMsg::Started), t1).unwrap(),
            None
        );
        assert!(c.started());
        // the deadline moves to the test's bound plus the margin
        assert_eq!(
            c.poll_timeout(),
            t1 + Duration::from_secs(10) + AGENT_MARGIN
        );
        assert!(c.handle_timeout(t1 + Duration::from_secs(12)).is_ok());
        let result = wirerate_core::synth::run(1, 9.4e6, 3);
        let done = encode(&AgentMsg::Done {
            result: Box::new(result.clone()),
        });
        let (a, b) = done.split_at(7);
        assert_eq!(c.handle_input(a, t1).unwrap(), None);
        assert_eq!(
            c.handle_input(b, t1).unwrap(),
            Some(AgentOutcome::Done(Box::new(result)))
        );
        assert!(c.handle_close().is_ok());
    }

    #[test]
    fn refusals_and_busy_come_before_start() {
        let t0 = Instant::now();
        let d = Duration::from_secs(1);
        let mut c = AgentClient::new(req(), t0, d, d);
        let r = encode(&AgentMsg::Refused {
            reason: "no".into(),
        });
        assert_eq!(
            c.handle_input(&r, t0).unwrap(),
            Some(AgentOutcome::Refused("no".into()))
        );
        let mut c = AgentClient::new(req(), t0, d, d);
        let busy = encode(&AgentMsg::Busy { retry_s: -5.0 });
        assert_eq!(
            c.handle_input(&busy, t0).unwrap(),
            Some(AgentOutcome::Busy(0.0))
        );
        // a result before the start, or a refusal after it, is out of order
        let mut c = AgentClient::new(req(), t0, d, d);
        let done = encode(&AgentMsg::Done {
            result: Box::new(wirerate_core::synth::run(1, 1e6, 1)),
        });
        assert!(c.handle_input(&done, t0).is_err());
        let mut c = AgentClient::new(req(), t0, d, d);
        c.handle_input(&encode(&AgentMsg::Started), t0).unwrap();
        assert!(c.handle_input(&r, t0).is_err());
    }

    #[test]
    fn silence_and_closing_are_errors_with_a_reason() {
        let t0 = Instant::now();
        let d = Duration::from_secs(2);
        let mut c = AgentClient::new(req(), t0, d, d);
        assert!(c.handle_timeout(t0 + Duration::from_secs(1)).is_ok());
        let e = c.handle_timeout(t0 + d).unwrap_err();
        assert!(e.to_string().contains("agent to start"), "{e}");
        c.handle_input(&encode(&AgentMsg::Started), t0).unwrap();
        let e = c.handle_close().unwrap_err();
        assert!(e.to_string().contains("the agent ran the test"), "{e}");
    }

    #[test]
    fn inside_tls_the_agent_answers_with_its_preamble_first() {
        let t0 = Instant::now();
        let d = Duration::from_secs(5);
        // without a login: preamble and request at once; the answer starts with a preamble
        let mut c = AgentClient::new(req(), t0, d, d).expect_preamble();
        assert_eq!(deliver(&mut c), req());
        let mut answer = Preamble::new(Channel::Agent).emit().to_vec();
        answer.extend(encode(&AgentMsg::Refused {
            reason: "no".into(),
        }));
        let (a, b) = answer.split_at(3);
        assert_eq!(c.handle_input(a, t0).unwrap(), None);
        assert_eq!(
            c.handle_input(b, t0).unwrap(),
            Some(AgentOutcome::Refused("no".into()))
        );
        // a preamble for another channel is an error, not a misread frame
        let mut c = AgentClient::new(req(), t0, d, d).expect_preamble();
        let control = Preamble::new(Channel::Control).emit();
        assert!(c.handle_input(&control, t0).is_err());
        // after a login only the request goes
        let mut c = AgentClient::new(req(), t0, d, d).after_login();
        let bytes = c.poll_transmit().unwrap();
        assert_eq!(bytes, encode(&AgentMsg::Request(Box::new(req()))));
    }

    #[test]
    fn a_login_to_an_agent_without_users_is_told_so() {
        let login = crate::frame::encode(&crate::msg::Msg::Login {
            scram: "n,,n=alice,r=abc".into(),
        });
        let e = AgentServer::new().handle_input(&login).unwrap_err();
        assert_eq!(e, ProtoError::NoLogin);
        // half a login frame is waited for, not misjudged
        assert_eq!(
            AgentServer::new().handle_input(&login[..login.len() - 1]),
            Ok(None)
        );
    }

    #[test]
    fn an_agent_refuses_bad_requests() {
        let bad = |msg: &AgentMsg| AgentServer::new().handle_input(&encode(msg));
        assert!(bad(&AgentMsg::Started).is_err());
        let request = |r: AgentRequest| AgentMsg::Request(Box::new(r));
        assert!(bad(&request(AgentRequest {
            to: String::new(),
            ..req()
        }))
        .is_err());
        assert!(bad(&request(AgentRequest {
            to: "x".repeat(MAX_TARGET_LEN + 1),
            ..req()
        }))
        .is_err());
        assert!(bad(&request(AgentRequest {
            spec: TestSpec {
                parallel: 0,
                ..TestSpec::default()
            },
            ..req()
        }))
        .is_err());
        // a length over the cap is refused before anything is kept
        let mut s = AgentServer::new();
        let huge = ((MAX_REQUEST_FRAME + 1) as u32).to_be_bytes();
        assert!(matches!(
            s.handle_input(&huge),
            Err(ProtoError::FrameTooLarge(..))
        ));
        // deep nesting is refused without recursion
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let mut frame = (deep.len() as u32).to_be_bytes().to_vec();
        frame.extend(deep.as_bytes());
        assert!(AgentServer::new().handle_input(&frame).is_err());
        // garbage never panics
        for junk in [
            &b"\x00\x00\x00\x02{}"[..],
            b"\x00\x00\x00\x01\xff",
            b"\x00\x00",
        ] {
            let _ = AgentServer::new().handle_input(junk);
        }
    }
}
