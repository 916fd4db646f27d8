//! Client and server sessions as state machines. They own no socket and read no clock: the
//! driver feeds received bytes and the current time, attaches data streams, and sends what
//! `poll_transmit` yields. Deadlines come out of `poll_timeout` and are enforced by
//! `handle_timeout`, so a silent peer is detected the same way in tests and in production.

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

use wirerate_core::result::Interval;
use wirerate_core::side_report::SideReport;
use wirerate_core::spec::Flow;
use wirerate_core::TestSpec;

use crate::auth::{AuthError, ClientFirst, ScramClient, ScramServer};
use crate::data::{token_eq, DataHello};
use crate::frame::{
    encode, Channel, FrameDecoder, Preamble, ProtoError, MAGIC, MAX_CLIENT_FRAME, MAX_SERVER_FRAME,
    PREAMBLE_LEN,
};
use crate::msg::{token_from_hex, token_hex, Msg, UdpProof};
use crate::parts::report_frames;
use crate::Token;

/// The set of (flow, stream id) a spec asks for.
pub fn expected_streams(spec: &TestSpec) -> HashSet<(Flow, u32)> {
    wirerate_core::spec::stream_order(spec)
        .into_iter()
        .collect()
}

/// What a client whose login failed is told, whatever the reason: it does not say whether
/// the user exists.
pub const LOGIN_FAILED: &str = "login failed: unknown user or wrong password";

/// Bytes a server sends a client it cannot serve now, then closes.
pub fn busy_reply(retry_after_s: f64) -> Vec<u8> {
    let mut out = Preamble::new(Channel::Control).emit().to_vec();
    out.extend(encode(&Msg::Busy { retry_after_s }));
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ServerState {
    /// A login is required: waiting for the client's first login message.
    AwaitLogin,
    /// The driver is looking up the user's verifier.
    LoginLookup,
    /// The challenge has gone; waiting for the client's proof.
    AwaitProof,
    AwaitSpec,
    Preparing,
    AwaitStreams,
    Running,
    Failed,
}

impl ServerState {
    fn name(self) -> &'static str {
        match self {
            ServerState::AwaitLogin => "waiting for the login",
            ServerState::LoginLookup => "looking up the user",
            ServerState::AwaitProof => "waiting for the login proof",
            ServerState::AwaitSpec => "waiting for the test spec",
            ServerState::Preparing => "preparing the test",
            ServerState::AwaitStreams => "waiting for data streams",
            ServerState::Running => "running the test",
            ServerState::Failed => "failed",
        }
    }
}

/// What the server driver must act on.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerEvent {
    /// A client logs in as this user: find its verifier (or make one up for an unknown
    /// user), then call `challenge`.
    Login(String),
    /// The client proved it knows the user's password.
    LoggedIn(String),
    /// A valid spec arrived: prepare the streams, then call `accept` (or `refuse`).
    Spec(Box<TestSpec>),
    /// The client's answers to the UDP challenges: check them, then attach the streams.
    UdpProof(Vec<UdpProof>),
    /// Every data stream is attached and `Start` is queued: start the workers.
    Start,
    /// The client's final measurements.
    PeerReport(Box<SideReport>),
    /// The client ends the test early: stop sending; the reports follow as usual.
    Stop,
    /// The client's UDP receivers have taken this many bytes so far (`feedback::Breaker`).
    UdpFeedback(u64),
}

/// The server's half of one control connection, after its preamble was read.
#[derive(Debug)]
pub struct ServerSession {
    c: Common<ServerState>,
    dec: FrameDecoder,
    idle: Duration,
    token: Token,
    expected: HashSet<(Flow, u32)>,
    attached: HashSet<(Flow, u32)>,
    spec: Option<TestSpec>,
    /// A `refused` has been queued: the client is told once.
    told: bool,
    /// Whether a login is required, and the exchange while it runs.
    login_required: bool,
    login: Option<Box<ClientFirst>>,
    scram: Option<Box<ScramServer>>,
    /// The data token is derived by both sides (TLS) and not sent in `accepted`.
    derived_token: bool,
    /// The login of a third-party request (`for_agent`), not of a test.
    pub(crate) agent: bool,
    /// The client promised `udp_feedback` in its spec, and `accepted` asked for it.
    feedback: (bool, bool),
}

impl ServerSession {
    pub fn new(now: Instant, idle: Duration, token: Token, server_name: &str) -> ServerSession {
        let mut out = VecDeque::new();
        out.push_back(Preamble::new(Channel::Control).emit().to_vec());
        out.push_back(encode(&Msg::Welcome {
            server: server_name.to_string(),
        }));
        ServerSession {
            c: Common::new(ServerState::AwaitSpec, out, Some(now + idle)),
            dec: FrameDecoder::new(MAX_CLIENT_FRAME),
            idle,
            token,
            expected: HashSet::new(),
            attached: HashSet::new(),
            spec: None,
            told: false,
            login_required: false,
            login: None,
            scram: None,
            derived_token: false,
            agent: false,
            feedback: (false, false),
        }
    }

    /// Feeds bytes from the control connection.
    pub fn handle_input(
        &mut self,
        bytes: &[u8],
        now: Instant,
    ) -> Result<Vec<ServerEvent>, ProtoError> {
        self.check_live()?;
        if let Err(e) = self.dec.push(bytes) {
            return Err(self.fail(e));
        }
        let mut events = Vec::new();
        loop {
            let msg = match self.dec.next_msg() {
                Ok(Some(m)) => m,
                Ok(None) => break,
                Err(e) => return Err(self.fail(e)),
            };
            match self.on_msg(msg, now) {
                Ok(ev) => events.extend(ev),
                Err(e) => return Err(self.fail(e)),
            }
        }
        Ok(events)
    }

    /// Fails the session on bad input, telling the client why before the close (unless
    /// the reason came from the client, or was already sent).
    fn fail(&mut self, e: ProtoError) -> ProtoError {
        // a caller without a login sends its agent request at once: say what it lacks
        let e = match e {
            ProtoError::BadMessage(_) if self.agent && self.c.state == ServerState::AwaitLogin => {
                ProtoError::LoginRequired
            }
            e => e,
        };
        if !matches!(e, ProtoError::Refused(_)) && !self.told {
            self.c.out.push_back(encode(&Msg::Refused {
                reason: e.to_string(),
            }));
        }
        self.told = true;
        self.c.state = ServerState::Failed;
        e
    }

    fn on_msg(&mut self, msg: Msg, now: Instant) -> Result<Option<ServerEvent>, ProtoError> {
        if let Msg::ReportPart {
            intervals,
            tcp_samples,
        } = msg
        {
            return match self.c.take_part(intervals, tcp_samples, now, self.idle) {
                Ok(()) => Ok(None),
                Err(e) => {
                    self.c.state = ServerState::Failed;
                    Err(e)
                }
            };
        }
        self.on_whole_msg(msg, now).map(Some)
    }

    fn on_whole_msg(&mut self, msg: Msg, now: Instant) -> Result<ServerEvent, ProtoError> {
        match (self.c.state, msg) {
            (ServerState::AwaitLogin, Msg::Login { scram }) => {
                let first = ClientFirst::parse(&scram).map_err(|e| self.login_failed(e))?;
                let user = first.user.clone();
                self.login = Some(Box::new(first));
                self.c.state = ServerState::LoginLookup;
                self.c.deadline = Some(now + self.idle);
                Ok(ServerEvent::Login(user))
            }
            (ServerState::AwaitProof, Msg::LoginProof { scram }) => {
                let Some(sc) = self.scram.take() else {
                    return Err(self.login_failed(AuthError::Malformed("no exchange".into())));
                };
                let fin = sc.finish(&scram).map_err(|e| self.login_failed(e))?;
                self.c.out.push_back(encode(&Msg::LoginOk { scram: fin }));
                self.c.state = ServerState::AwaitSpec;
                self.c.deadline = Some(now + self.idle);
                Ok(ServerEvent::LoggedIn(sc.user().to_string()))
            }
            (ServerState::AwaitLogin, Msg::Spec { .. }) => Err(ProtoError::LoginRequired),
            (ServerState::AwaitSpec, Msg::Login { .. }) if !self.login_required => {
                Err(ProtoError::NoLogin)
            }
            (ServerState::AwaitSpec, Msg::Spec { spec, feedback }) => {
                if let Err(e) = spec.validate() {
                    let reason = e.to_string();
                    self.c.out.push_back(encode(&Msg::Refused {
                        reason: reason.clone(),
                    }));
                    self.told = true;
                    self.c.state = ServerState::Failed;
                    return Err(ProtoError::Refused(reason));
                }
                self.expected = expected_streams(&spec);
                self.dec
                    .set_max_frame(crate::frame::client_frame_limit(&spec));
                self.spec = Some(spec.clone());
                self.feedback.0 = feedback;
                self.c.state = ServerState::Preparing;
                self.c.deadline = Some(now + self.idle);
                Ok(ServerEvent::Spec(Box::new(spec)))
            }
            (ServerState::AwaitStreams, Msg::UdpProof { proofs })
                if proofs.len() <= self.expected.len() =>
            {
                Ok(ServerEvent::UdpProof(proofs))
            }
            (ServerState::Running, Msg::Stop) => Ok(ServerEvent::Stop),
            (ServerState::Running, Msg::UdpFeedback { received }) if self.feedback.1 => {
                Ok(ServerEvent::UdpFeedback(received))
            }
            (ServerState::Running, Msg::Report { mut report }) if !self.c.peer_report => {
                self.c.peer_report = true;
                self.c.parts.complete(&mut report);
                self.update_deadline(now);
                Ok(ServerEvent::PeerReport(report))
            }
            (
                ServerState::Running | ServerState::AwaitStreams | ServerState::Preparing,
                Msg::Refused { reason },
            ) => {
                self.c.state = ServerState::Failed;
                Err(ProtoError::Refused(reason))
            }
            (state, msg) => {
                self.c.state = ServerState::Failed;
                Err(ProtoError::Unexpected {
                    got: msg.name(),
                    state: state.name(),
                })
            }
        }
    }

    /// Accepts the spec the last `Spec` event carried; `udp_ports` lists the server's port
    /// of each UDP stream (empty for TCP).
    pub fn accept(&mut self, udp_ports: Vec<u16>, now: Instant) {
        if self.c.state == ServerState::Preparing {
            self.feedback.1 = self.spec.as_ref().is_some_and(TestSpec::server_sends_udp);
            self.c.out.push_back(encode(&Msg::Accepted {
                token: if self.derived_token {
                    String::new()
                } else {
                    token_hex(&self.token)
                },
                udp_ports,
                feedback_s: self
                    .feedback
                    .1
                    .then_some(wirerate_core::breaker::FEEDBACK_INTERVAL_S),
            }));
            self.c.state = ServerState::AwaitStreams;
            self.c.deadline = Some(now + self.idle);
        }
    }

    /// A data connection presented this hello. Returns the `Start` event once the last
    /// expected stream is attached.
    pub fn attach_stream(
        &mut self,
        hello: &DataHello,
        now: Instant,
    ) -> Result<Option<ServerEvent>, ProtoError> {
        if self.c.state != ServerState::AwaitStreams {
            return Err(ProtoError::Unexpected {
                got: "data stream",
                state: self.c.state.name(),
            });
        }
        if !token_eq(&hello.token, &self.token) {
            return Err(ProtoError::BadToken);
        }
        let key = (hello.flow, hello.stream_id);
        if !self.expected.contains(&key) || !self.attached.insert(key) {
            return Err(ProtoError::BadMessage(format!(
                "stream {} of that flow is not expected",
                hello.stream_id
            )));
        }
        if self.attached.len() < self.expected.len() {
            return Ok(None);
        }
        self.c.out.push_back(encode(&Msg::Start));
        self.c.state = ServerState::Running;
        if let Some(spec) = &self.spec {
            self.c.parts.start(spec, now);
        }
        // While the test runs the control connection is quiet by design; the data streams
        // carry their own read timeouts.
        self.c.deadline = None;
        Ok(Some(ServerEvent::Start))
    }

    /// Queues an interval report of a flow this server receives.
    pub fn send_interval(&mut self, interval: Interval) {
        if self.c.state == ServerState::Running {
            self.c.out.push_back(encode(&Msg::Interval { interval }));
        }
    }

    /// Queues this side's final report; from now on the peer has `idle` to send its own.
    pub fn local_report(&mut self, report: SideReport, now: Instant) {
        if self.c.state == ServerState::Running && !self.c.local_report {
            self.c.local_report = true;
            self.c.out.extend(report_frames(report, MAX_SERVER_FRAME));
            self.update_deadline(now);
        }
    }

    /// Tells the client why the test ends early (once; a failed session whose client was
    /// not told yet, after a timeout, is told now).
    pub fn refuse(&mut self, reason: &str) {
        if !self.told {
            self.c.out.push_back(encode(&Msg::Refused {
                reason: reason.to_string(),
            }));
            self.told = true;
            self.c.state = ServerState::Failed;
        }
    }

    fn update_deadline(&mut self, now: Instant) {
        self.c.deadline = if self.is_finished() {
            None
        } else if self.c.local_report {
            Some(now + self.idle)
        } else {
            None
        };
    }

    fn check_live(&self) -> Result<(), ProtoError> {
        if self.c.state == ServerState::Failed {
            return Err(ProtoError::Unexpected {
                got: "input",
                state: "failed",
            });
        }
        Ok(())
    }

    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.c.out.pop_front()
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        self.c.deadline
    }

    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtoError> {
        self.c.handle_timeout(now)
    }

    /// The peer closed the control connection.
    pub fn handle_close(&mut self) -> Result<(), ProtoError> {
        self.c.handle_close()
    }

    pub fn is_finished(&self) -> bool {
        self.c.is_finished()
    }

    pub fn is_running(&self) -> bool {
        self.c.state == ServerState::Running
    }

    pub fn is_failed(&self) -> bool {
        self.c.state == ServerState::Failed
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientState {
    AwaitPreamble,
    AwaitWelcome,
    AwaitChallenge,
    AwaitLoginOk,
    AwaitAccepted,
    AwaitStart,
    Running,
    Failed,
}

impl ClientState {
    fn name(self) -> &'static str {
        match self {
            ClientState::AwaitPreamble | ClientState::AwaitWelcome => {
                "waiting for the server's hello"
            }
            ClientState::AwaitChallenge => "waiting for the server's login challenge",
            ClientState::AwaitLoginOk => "waiting for the server to accept the login",
            ClientState::AwaitAccepted => "waiting for the server to accept the spec",
            ClientState::AwaitStart => "waiting for the server to start the test",
            ClientState::Running => "running the test",
            ClientState::Failed => "failed",
        }
    }
}

/// What the client driver must act on.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// Open the data streams, presenting this token; for UDP, to these server ports.
    Accepted(Token, Vec<u16>),
    /// The test starts now.
    Start,
    Interval(Box<Interval>),
    PeerReport(Box<SideReport>),
}

/// The client's half of a control connection.
#[derive(Debug)]
pub struct ClientSession {
    c: Common<ClientState>,
    /// What the test's intervals are, to bound the server's report parts.
    spec: TestSpec,
    pre: Vec<u8>,
    dec: FrameDecoder,
    idle: Duration,
    /// The login exchange, when the client logs in.
    login: Option<Box<ScramClient>>,
    /// The data token both sides derive from the TLS session, if any.
    data_token: Option<Token>,
    /// How often the server wants `udp_feedback`, and when it is next due.
    feedback: Option<(Duration, Option<Instant>)>,
}

impl ClientSession {
    /// Queues the preamble and the spec at once: one round trip to the server's answer.
    pub fn new(spec: &TestSpec, now: Instant, idle: Duration) -> ClientSession {
        let mut out = VecDeque::new();
        out.push_back(Preamble::new(Channel::Control).emit().to_vec());
        out.push_back(encode(&Msg::Spec {
            spec: spec.clone(),
            feedback: true,
        }));
        ClientSession {
            c: Common::new(ClientState::AwaitPreamble, out, Some(now + idle)),
            spec: spec.clone(),
            pre: Vec::with_capacity(PREAMBLE_LEN),
            dec: FrameDecoder::new(MAX_SERVER_FRAME),
            idle,
            login: None,
            data_token: None,
            feedback: None,
        }
    }

    pub fn handle_input(
        &mut self,
        mut bytes: &[u8],
        now: Instant,
    ) -> Result<Vec<ClientEvent>, ProtoError> {
        if self.c.state == ClientState::Failed {
            return Err(ProtoError::Unexpected {
                got: "input",
                state: "failed",
            });
        }
        if self.c.state == ClientState::AwaitPreamble {
            let take = (PREAMBLE_LEN - self.pre.len()).min(bytes.len());
            self.pre.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            // an iperf3 server takes the opening as its cookie and answers one state byte
            // (PARAM_EXCHANGE, or ACCESS_DENIED when busy), then waits: say so at once
            if let Some(&b) = self.pre.first().filter(|&&b| b != MAGIC[0]) {
                self.c.state = ClientState::Failed;
                return Err(match b as i8 {
                    s @ (9 | -1 | -2) => ProtoError::Iperf3Server(s),
                    _ => ProtoError::BadMagic,
                });
            }
            if self.pre.len() < PREAMBLE_LEN {
                return Ok(Vec::new());
            }
            let p =
                Preamble::parse(&self.pre).inspect_err(|_| self.c.state = ClientState::Failed)?;
            if p.channel != Channel::Control {
                self.c.state = ClientState::Failed;
                return Err(ProtoError::BadChannel(1));
            }
            self.c.state = ClientState::AwaitWelcome;
        }
        self.dec
            .push(bytes)
            .inspect_err(|_| self.c.state = ClientState::Failed)?;
        let mut events = Vec::new();
        loop {
            match self.dec.next_msg() {
                Ok(Some(m)) => {
                    if let Some(ev) = self
                        .on_msg(m, now)
                        .inspect_err(|_| self.c.state = ClientState::Failed)?
                    {
                        events.push(ev);
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    self.c.state = ClientState::Failed;
                    return Err(e);
                }
            }
        }
        Ok(events)
    }

    fn on_msg(&mut self, msg: Msg, now: Instant) -> Result<Option<ClientEvent>, ProtoError> {
        match (self.c.state, msg) {
            (
                _,
                Msg::ReportPart {
                    intervals,
                    tcp_samples,
                },
            ) => {
                self.c.take_part(intervals, tcp_samples, now, self.idle)?;
                Ok(None)
            }
            (_, Msg::Busy { retry_after_s }) => Err(ProtoError::Busy(retry_after_s)),
            (_, Msg::Refused { reason }) => Err(ProtoError::Refused(reason)),
            (ClientState::AwaitWelcome, Msg::Welcome { .. }) => {
                self.c.state = if self.login.is_some() {
                    ClientState::AwaitChallenge
                } else {
                    ClientState::AwaitAccepted
                };
                Ok(None)
            }
            (ClientState::AwaitChallenge, Msg::LoginChallenge { scram }) => {
                let l = self
                    .login
                    .as_mut()
                    .ok_or(ProtoError::Login(AuthError::Malformed("no login".into())))?;
                let proof = l.answer(&scram)?;
                self.c
                    .out
                    .push_back(encode(&Msg::LoginProof { scram: proof }));
                self.c.state = ClientState::AwaitLoginOk;
                self.c.deadline = Some(now + self.idle);
                Ok(None)
            }
            (ClientState::AwaitLoginOk, Msg::LoginOk { scram }) => {
                let l = self
                    .login
                    .take()
                    .ok_or(ProtoError::Login(AuthError::Malformed("no login".into())))?;
                l.verify(&scram)?;
                self.c.out.push_back(encode(&Msg::Spec {
                    spec: self.spec.clone(),
                    feedback: true,
                }));
                self.c.state = ClientState::AwaitAccepted;
                self.c.deadline = Some(now + self.idle);
                Ok(None)
            }
            (
                ClientState::AwaitAccepted,
                Msg::Accepted {
                    token,
                    udp_ports,
                    feedback_s,
                },
            ) => {
                let t = match (token.is_empty(), self.data_token) {
                    (true, Some(t)) => t,
                    (true, None) => {
                        return Err(ProtoError::BadMessage(
                            "no token, and none derived from TLS".into(),
                        ))
                    }
                    (false, _) => token_from_hex(&token).ok_or_else(|| {
                        ProtoError::BadMessage("token is not 32 hex digits".into())
                    })?,
                };
                self.feedback = feedback_every(feedback_s).map(|every| (every, None));
                self.c.state = ClientState::AwaitStart;
                self.c.deadline = Some(now + self.idle);
                Ok(Some(ClientEvent::Accepted(t, udp_ports)))
            }
            (ClientState::AwaitStart, Msg::Start) => {
                self.c.state = ClientState::Running;
                if let Some((every, next)) = self.feedback.as_mut() {
                    *next = Some(now + *every);
                }
                self.c.parts.start(&self.spec, now);
                self.c.deadline = None;
                Ok(Some(ClientEvent::Start))
            }
            (ClientState::Running, Msg::Interval { interval }) => {
                Ok(Some(ClientEvent::Interval(Box::new(interval))))
            }
            (ClientState::Running, Msg::Report { mut report }) if !self.c.peer_report => {
                self.c.peer_report = true;
                self.c.parts.complete(&mut report);
                self.c.deadline = None;
                Ok(Some(ClientEvent::PeerReport(report)))
            }
            (state, msg) => Err(ProtoError::Unexpected {
                got: msg.name(),
                state: state.name(),
            }),
        }
    }

    /// Sends the nonces of the UDP challenges (after `Accepted`, before `Start`).
    pub fn udp_proof(&mut self, proofs: Vec<UdpProof>) {
        if self.c.state == ClientState::AwaitStart {
            self.c.out.push_back(encode(&Msg::UdpProof { proofs }));
        }
    }

    /// Queues this side's final report; the server then has `idle` to send its own.
    pub fn local_report(&mut self, report: SideReport, now: Instant) {
        if self.c.state == ClientState::Running && !self.c.local_report {
            self.c.local_report = true;
            let max = crate::frame::client_frame_limit(&self.spec);
            self.c.out.extend(report_frames(report, max));
            if !self.c.peer_report {
                self.c.deadline = Some(now + self.idle);
            }
        }
    }

    /// Ends a running test early: asks the server to stop sending. The reports follow as at
    /// a normal end. Nothing is sent before the test runs or after this side's report.
    pub fn stop(&mut self) -> bool {
        let running = self.c.state == ClientState::Running && !self.c.local_report;
        if running {
            self.c.out.push_back(encode(&Msg::Stop));
        }
        running
    }

    /// Gives up on the test and tells the server.
    pub fn abort(&mut self, reason: &str) {
        if self.c.state != ClientState::Failed {
            self.c.out.push_back(encode(&Msg::Refused {
                reason: reason.to_string(),
            }));
            self.c.state = ClientState::Failed;
        }
    }

    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.c.out.pop_front()
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        self.c.deadline
    }

    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtoError> {
        self.c.handle_timeout(now)
    }

    /// The peer closed the control connection.
    pub fn handle_close(&mut self) -> Result<(), ProtoError> {
        self.c.handle_close()
    }

    pub fn is_finished(&self) -> bool {
        self.c.is_finished()
    }

    pub fn is_failed(&self) -> bool {
        self.c.state == ClientState::Failed
    }
}

#[path = "session_common.rs"]
mod common;
use common::Common;

#[path = "session_login.rs"]
mod login;

#[path = "session_feedback.rs"]
mod udp_feedback;
use udp_feedback::feedback_every;

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
