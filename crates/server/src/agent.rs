//! Third-party tests: `wirerate serve` as an agent that, asked by a permitted caller, runs
//! an ordinary client test towards another server and sends back the result
//! (`wirerate run --from A --to B`). The exchange is `wirerate_proto::agent`'s.
//!
//! Permission, so that an agent never becomes a relay to arbitrary hosts:
//! - off unless `serve --allow-third-party`, or the limits rule matching the caller says
//!   `third_party = true` (a rule's `third_party = false` refuses even with the flag);
//! - the target must resolve to an address inside the rule's `third_party_targets`, or
//!   else `--third-party-targets`; with neither, every target is refused;
//! - the test must pass the caller's rule like any test of the caller's own (duration,
//!   streams, rate, tests per hour) and the server's caps;
//! - the agent holds its own test slot while it runs, so it is busy for others;
//! - with `serve --tls`, requests come only inside TLS, after the same login (or client
//!   certificate) as a control connection, and the rules match the caller's user too.
//!
//! Towards the target the agent is an ordinary client with its own credentials
//! ([`AgentCredentials`]); the caller's are never passed on.

use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use wirerate_core::{RunResult, TestSpec};
use wirerate_proto::agent::{
    encode, AgentClient, AgentMsg, AgentOutcome, AgentRequest, AgentServer, MAX_REQUEST_FRAME,
};
use wirerate_proto::ProtoError;

use crate::limits::{Cidr, ThirdPartyRule};
use crate::logline::{Decision, Event, Kind};
use crate::server::{Active, Pending, Shared, SlotGuard};
use wirerate_control::control::{Control, Input};
use wirerate_control::tls::ClientTls;
use wirerate_control::{ClientConfig, Login, Observer};
use wirerate_engine::EngineError;

/// The TLS settings the agent uses towards a target (`HOST:PORT` as the caller named it):
/// the target's pinned or remembered key, and the agent's own certificate if it has one.
pub type TlsFor = Arc<dyn Fn(&str) -> Result<ClientTls, String> + Send + Sync>;

/// The agent's own credentials towards the servers it tests against (never the caller's).
#[derive(Clone, Default)]
pub struct AgentCredentials {
    /// TLS on the control connection to the target (`serve --agent-tls`).
    pub tls: Option<TlsFor>,
    /// Log in to the target as this user (`serve --agent-user`).
    pub login: Option<Login>,
}

impl std::fmt::Debug for AgentCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AgentCredentials(tls {}, {:?})",
            self.tls.is_some(),
            self.login
        )
    }
}

/// The server's third-party settings.
#[derive(Debug, Clone, Default)]
pub struct AgentConfig {
    /// `--allow-third-party`: callers whose rule does not say otherwise may ask.
    pub allow: bool,
    /// `--third-party-targets`: where tests may go when the caller's rule names none.
    pub targets: Vec<Cidr>,
    /// How the agent connects to its targets.
    pub credentials: AgentCredentials,
}

/// Whether a caller may have a test run towards `target`: Ok, or the one-line reason.
/// Pure, so every rule of the permission model is unit-tested.
pub fn permit(
    cfg: &AgentConfig,
    rule: Option<&ThirdPartyRule>,
    target: IpAddr,
) -> Result<(), String> {
    let allowed = rule.and_then(|r| r.allow).unwrap_or(cfg.allow);
    if !allowed {
        return Err(match rule {
            Some(r) if r.allow == Some(false) => {
                format!("third-party tests are not allowed by {}", r.of)
            }
            _ => "this agent does not run third-party tests (serve --allow-third-party, or \
                  third_party = true in a limits rule)"
                .to_string(),
        });
    }
    let (targets, whose) = match rule.filter(|r| !r.targets.is_empty()) {
        Some(r) => (&r.targets, r.of.clone()),
        None => (&cfg.targets, "--third-party-targets".to_string()),
    };
    if targets.is_empty() {
        return Err(
            "this agent permits no third-party targets (serve --third-party-targets, \
                    or third_party_targets in a limits rule)"
                .into(),
        );
    }
    if targets.iter().any(|c| c.contains(target)) {
        Ok(())
    } else {
        let list: Vec<String> = targets.iter().map(Cidr::to_string).collect();
        Err(format!(
            "target {target} is outside the third-party targets of {whose} ({})",
            list.join(", ")
        ))
    }
}

struct Quiet;
impl Observer for Quiet {}

/// Serves one plain agent connection (its preamble already read). A server with TLS takes
/// requests only over TLS, where the caller is authenticated like a control client.
pub(crate) fn serve(sock: TcpStream, shared: &Shared, who: &str, pending: Pending) {
    if let Some(tls) = &shared.cfg.tls {
        drop(pending);
        let ip = sock.peer_addr().ok().map(|a| a.ip());
        let how = if tls.client_certs {
            "--tls --client-cert FILE --client-key FILE"
        } else if shared.cfg.users.is_some() {
            "--tls --user NAME"
        } else {
            "--tls"
        };
        let reason = format!("this agent takes third-party requests only over TLS (run {how})");
        let mut ctl = Control::new(sock);
        return refuse(&mut ctl, shared, who, ip, None, &reason);
    }
    serve_on(Control::new(sock), shared, who, pending, None);
}

/// Serves an agent connection inside TLS: the caller logs in (or its certificate names it)
/// exactly as a control client does, then asks.
pub(crate) fn serve_tls(mut ctl: Control, shared: &Shared, who: &str, pending: Pending) {
    let Some(pre) = crate::login::prepare(&mut ctl, shared, who, pending.ip, true) else {
        return;
    };
    let mut sess = pre.sess;
    // the agent's preamble, and the end of the login
    if ctl.flush(|| sess.poll_transmit(), shared.cfg.idle).is_err() {
        return;
    }
    serve_on(ctl, shared, who, pending, pre.user);
}

/// Serves one agent request. Never panics on the caller's input; every read is bounded in
/// time. The connection counts as pending (`pending`) until its request is read, like any
/// connection that has not yet said what it wants. `user`: who the caller proved to be.
fn serve_on(mut ctl: Control, shared: &Shared, who: &str, pending: Pending, user: Option<String>) {
    let ip = ctl.sock.peer_addr().ok().map(|a| a.ip());
    let user = user.as_deref();
    let req = read_request(&mut ctl, Instant::now() + shared.cfg.handshake);
    drop(pending);
    let req = match req {
        Ok(r) => r,
        Err(reason) => return refuse(&mut ctl, shared, who, ip, user, &reason),
    };
    let Some(ip) = ip else {
        return refuse(
            &mut ctl,
            shared,
            who,
            ip,
            user,
            "the caller's address is unknown",
        );
    };
    let target = match resolve_permitted(shared, ip, user, &req.to) {
        Ok(t) => t,
        Err(reason) => return refuse(&mut ctl, shared, who, Some(ip), user, &reason),
    };
    // the agent's caps hold for the tests it runs as a client too (duration, rate, memory)
    if let Err(reason) = shared.cfg.caps.check(&req.spec) {
        return refuse(&mut ctl, shared, who, Some(ip), user, &reason);
    }
    let admission = match shared.cfg.policy.admit(ip, user, &req.spec, Instant::now()) {
        Ok(a) => a,
        Err(reason) => return refuse(&mut ctl, shared, who, Some(ip), user, &reason),
    };
    let caller = Caller { who, user };
    let reply = run_held(&mut ctl, shared, &caller, &req.to, target, &req.spec);
    shared.cfg.policy.release(&admission);
    if let Some(msg) = reply {
        let _ = ctl.write_all(&encode(&msg), shared.cfg.idle);
    }
}

/// Who asked: the address, and the user it proved to be.
struct Caller<'a> {
    who: &'a str,
    user: Option<&'a str>,
}

impl Caller<'_> {
    fn event(&self, kind: Kind) -> Event {
        let mut ev = Event::new(kind, Some(self.who.into()));
        ev.user = self.user.map(str::to_string);
        ev
    }

    /// "127.0.0.1:5000" or "127.0.0.1:5000 (user fleet)", for the text log.
    fn name(&self) -> String {
        match self.user {
            Some(u) => format!("{} (user {u})", self.who),
            None => self.who.to_string(),
        }
    }
}

/// Claims the slot, runs the test towards `target` and returns the final answer (None when
/// the answer was already sent).
fn run_held(
    ctl: &mut Control,
    shared: &Shared,
    caller: &Caller<'_>,
    to: &str,
    target: SocketAddr,
    spec: &TestSpec,
) -> Option<AgentMsg> {
    let who = &caller.name();
    let mut slot = match claim_slot(shared, spec) {
        Ok(s) => s,
        Err(retry_s) => {
            let ev = caller
                .event(Kind::Connection)
                .decided(Decision::Busy, Some(format!("retry in {retry_s:.0} s")));
            shared.record(
                &ev,
                Some(format_args!(
                    "busy: told third-party caller {who} to retry in {retry_s:.0} s"
                )),
            );
            return Some(AgentMsg::Busy { retry_s });
        }
    };
    let creds = &shared.cfg.agent.credentials;
    let tls = match creds.tls.as_ref().map(|f| f(to)).transpose() {
        Ok(t) => t,
        Err(e) => {
            return Some(AgentMsg::Failed {
                reason: format!("the agent's TLS settings towards {to}: {e}"),
            })
        }
    };
    if ctl
        .write_all(&encode(&AgentMsg::Started), shared.cfg.idle)
        .is_err()
    {
        return None;
    }
    shared.record(
        &caller.event(Kind::Test).decided(
            Decision::Accepted,
            Some(format!("third-party test towards {target}")),
        ),
        Some(format_args!("third-party test for {who} towards {target}")),
    );
    let towards = wirerate_control::measure::Target::new(
        target,
        ClientConfig {
            idle: shared.cfg.idle,
            tls,
            login: creds.login.clone(),
            ..Default::default()
        },
    );
    let began = Instant::now();
    let answer =
        match wirerate_control::measure::measure(&towards, spec, &mut Quiet, Duration::ZERO) {
            Ok(m) => {
                slot.completed();
                AgentMsg::Done {
                    result: Box::new(m.result),
                }
            }
            Err(EngineError::Proto(ProtoError::Busy(retry_s))) => AgentMsg::Busy { retry_s },
            Err(e) if before_wirerate(&e) => {
                // the log has the cause; the caller learns nothing of the port's state
                shared.log(format_args!(
                    "third-party test for {who} towards {target}: {}",
                    e.full()
                ));
                drop(slot);
                std::thread::sleep(towards.cfg.connect_timeout.saturating_sub(began.elapsed()));
                return Some(AgentMsg::Failed {
                    reason: format!("the test towards {target} failed: {NO_WIRERATE_THERE}"),
                });
            }
            Err(e) => AgentMsg::Failed {
                reason: format!(
                    "the test towards {target} failed: {}{}",
                    e.full(),
                    hint_credentials(creds, &e.full())
                ),
            },
        };
    let text = match &answer {
        AgentMsg::Done { result } => format!(
            "third-party test for {who} towards {target}: goodput {}",
            wirerate_core::units::format_bps(result.summary.goodput_bps)
        ),
        AgentMsg::Busy { .. } => format!("third-party test for {who}: {target} is busy"),
        AgentMsg::Failed { reason } => format!("third-party test for {who}: {reason}"),
        _ => String::new(),
    };
    shared.log(format_args!("{text}"));
    drop(slot);
    Some(answer)
}

/// What a caller is told when the target did not answer as a wirerate server.
const NO_WIRERATE_THERE: &str = "no wirerate server answered there";

/// Whether a failure came before the target spoke wirerate: nothing listening, a port that
/// drops packets, another service, a reset. The caller gets one answer for all of these,
/// and no sooner than the connect timeout, so an agent cannot be used to tell an open port
/// of its targets from a closed one.
fn before_wirerate(e: &EngineError) -> bool {
    const HELLO: &str = "waiting for the server's hello";
    match e {
        EngineError::Connect { .. } | EngineError::Io { .. } => true,
        EngineError::Proto(p) => match p {
            ProtoError::BadMagic
            | ProtoError::Iperf3Server(_)
            | ProtoError::Version(..)
            | ProtoError::BadChannel(_)
            | ProtoError::FrameTooLarge(..)
            | ProtoError::BadMessage(_) => true,
            ProtoError::TimedOut(state) | ProtoError::Closed(state) => *state == HELLO,
            _ => false,
        },
        _ => false,
    }
}

/// The server's one test slot, held for a third-party test: Err(seconds to retry) when busy.
fn claim_slot<'a>(shared: &'a Shared, spec: &TestSpec) -> Result<SlotGuard<'a>, f64> {
    let mut slot = shared.active();
    if let Some(a) = slot.as_ref() {
        return Err(a
            .free_at
            .saturating_duration_since(Instant::now())
            .as_secs_f64()
            .ceil()
            .max(1.0));
    }
    let bound = spec
        .send_seconds()
        .map_or(shared.cfg.caps.max_duration, Duration::from_secs_f64);
    // no data stream ever belongs to this slot: its token is random and its channel closed
    let (tx, _) = mpsc::channel();
    *slot = Some(Active {
        token: wirerate_engine::net::random_token().unwrap_or([0xa5; 16]),
        tx,
        free_at: Instant::now() + bound + shared.cfg.idle,
        iperf3: None,
        crr: None,
        peer_ip: None,
        probe_tos: None,
    });
    drop(slot);
    Ok(SlotGuard::new(shared))
}

/// When the target refused the agent for want of TLS or a login it has not got: what the
/// operator of the agent can give it (the caller's own credentials are never passed on).
fn hint_credentials(creds: &AgentCredentials, why: &str) -> &'static str {
    let wants_tls = why.contains("requires TLS");
    let wants_login = why.contains("requires a login") || why.contains("requires a client cert");
    if (wants_tls || wants_login) && creds.tls.is_none() {
        " (the agent has no credentials of its own towards it: serve --agent-tls, with \
         --agent-user NAME and WIRERATE_AGENT_PASSWORD, or --agent-cert/--agent-key)"
    } else if wants_login && creds.login.is_none() {
        " (the agent logs in to its targets only with serve --agent-user NAME and \
         WIRERATE_AGENT_PASSWORD, or --agent-cert/--agent-key)"
    } else {
        ""
    }
}

/// The first address of `to` the caller may target.
fn resolve_permitted(
    shared: &Shared,
    caller: IpAddr,
    user: Option<&str>,
    to: &str,
) -> Result<SocketAddr, String> {
    let rule = shared.cfg.policy.third_party(caller, user);
    let addrs: Vec<SocketAddr> = to
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve the target '{to}': {e}"))?
        .collect();
    let mut why = format!("the target '{to}' has no address");
    for a in addrs {
        match permit(&shared.cfg.agent, rule.as_ref(), a.ip()) {
            Ok(()) => return Ok(a),
            Err(e) => why = e,
        }
    }
    Err(why)
}

fn refuse(
    ctl: &mut Control,
    shared: &Shared,
    who: &str,
    ip: Option<IpAddr>,
    user: Option<&str>,
    reason: &str,
) {
    let caller = Caller { who, user };
    let ev = caller
        .event(Kind::Connection)
        .decided(Decision::Refused, Some(format!("third-party: {reason}")));
    shared.log_rejected(
        ip,
        ev,
        format_args!(
            "refused third-party request from {}: {reason}",
            caller.name()
        ),
    );
    let msg = encode(&AgentMsg::Refused {
        reason: reason.to_string(),
    });
    let _ = ctl.write_all(&msg, Duration::from_secs(1));
    let _ = ctl.sock.shutdown(std::net::Shutdown::Write);
    // what the caller sent and was not read (a request refused unread): read away, so the
    // close is orderly rather than a reset that could overtake the answer
    let _ = ctl.sock.set_read_timeout(Some(Duration::from_millis(100)));
    let mut sink = [0u8; 4096];
    for _ in 0..16 {
        match std::io::Read::read(&mut ctl.sock, &mut sink) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
}

fn read_request(ctl: &mut Control, deadline: Instant) -> Result<AgentRequest, String> {
    let mut server = AgentServer::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err("no request in time".into());
        }
        match ctl.read(left) {
            Ok(Input::Closed) => return Err("the caller closed before its request".into()),
            Ok(Input::Bytes(n)) => {
                if let Some(req) = server
                    .handle_input(ctl.bytes(n))
                    .map_err(|e| e.to_string())?
                {
                    return Ok(req);
                }
            }
            Ok(Input::Nothing) => {}
            Err(e) => return Err(format!("reading the request: {e}")),
        }
    }
}

/// How the caller reaches the agent: plain, or TLS with the agent's key checked, and
/// then a login or a client certificate (in `tls`).
#[derive(Debug, Clone, Default)]
pub struct CallerAuth {
    pub tls: Option<ClientTls>,
    pub login: Option<Login>,
}

/// The caller's side: asks the agent at `agent` to run `spec` towards `to` (HOST:PORT).
/// Refusals, busy answers and failures are outcomes, not errors; errors are the agent
/// unreachable, silent, or speaking out of turn.
pub fn request(
    agent: SocketAddr,
    to: &str,
    spec: &TestSpec,
    idle: Duration,
    connect_timeout: Duration,
    auth: &CallerAuth,
) -> Result<AgentOutcome, EngineError> {
    let sock = wirerate_engine::net::connect(agent, None, None, connect_timeout)?;
    let run_bound = spec.send_seconds().map_or(
        crate::guard::Caps::default().max_duration,
        Duration::from_secs_f64,
    );
    let req = AgentRequest {
        to: to.to_string(),
        spec: spec.clone(),
    };
    let mut c = AgentClient::new(req, Instant::now(), idle, run_bound);
    let mut ctl = match (&auth.tls, &auth.login) {
        (None, Some(_)) => {
            return Err(EngineError::Setup(
                "a login to an agent needs TLS (--tls)".into(),
            ))
        }
        (None, None) => Control::new(sock),
        (Some(tls), login) => {
            let mut ctl = connect_tls(sock, tls, idle)?;
            match login {
                Some(login) => {
                    if let Some(out) = log_in(&mut ctl, login, idle)? {
                        return Ok(out);
                    }
                    c = c.after_login();
                }
                None => c = c.expect_preamble(),
            }
            ctl
        }
    };
    if let Some(bytes) = c.poll_transmit() {
        ctl.write_all(&bytes, idle)
            .map_err(EngineError::io("sending the request to the agent"))?;
    }
    loop {
        let now = Instant::now();
        c.handle_timeout(now)?;
        let wait = c
            .poll_timeout()
            .saturating_duration_since(now)
            .max(Duration::from_millis(1));
        match ctl.read(wait) {
            Ok(Input::Closed) => {
                c.handle_close()?;
                return Err(EngineError::PeerClosed("the agent closed the connection"));
            }
            Ok(Input::Bytes(n)) => {
                if let Some(out) = c.handle_input(ctl.bytes(n), Instant::now())? {
                    return Ok(out);
                }
            }
            Ok(Input::Nothing) => {}
            Err(e) if c.started() => {
                return Err(EngineError::Io {
                    what: "the agent's connection broke while it ran the test",
                    source: e,
                })
            }
            Err(e) => return Err(wirerate_control::login::read_error(e)),
        }
    }
}

/// Asks the agent for TLS and does the handshake; inside it, the agent's preamble comes
/// later (after the caller's own).
fn connect_tls(sock: TcpStream, tls: &ClientTls, idle: Duration) -> Result<Control, EngineError> {
    let steps = (
        "asking the agent for TLS",
        "waiting for the agent's TLS answer",
    );
    match wirerate_control::client::ask_tls(sock, tls, idle, steps)? {
        wirerate_control::client::TlsAnswer::Agreed(ctl) => Ok(ctl),
        wirerate_control::client::TlsAnswer::Refused(..) => Err(EngineError::Setup(
            "the agent does not offer TLS (it runs without serve --tls): run without --tls".into(),
        )),
    }
}

/// The login inside TLS, with the control channel's frames: None once the agent has
/// proved it knows the user (then the request may go), or the agent's refusal.
fn log_in(
    ctl: &mut Control,
    login: &Login,
    idle: Duration,
) -> Result<Option<AgentOutcome>, EngineError> {
    use wirerate_proto::auth::{nonce_text, Binding, ScramClient, CHANNEL_BINDING_LABEL};
    use wirerate_proto::frame::{encode as frame, FrameDecoder, PREAMBLE_LEN};
    use wirerate_proto::msg::Msg;
    use wirerate_proto::{Channel, Preamble};
    let setup = |e: String| EngineError::Setup(e);
    let mut b = [0u8; 18];
    wirerate_engine::net::fill_random(&mut b)?;
    let mut scram = ScramClient::new(
        &login.user,
        &login.password,
        &nonce_text(&b),
        Binding::TlsExporter,
    )
    .map_err(|e| setup(e.to_string()))?;
    let mut cb = [0u8; 32];
    if let Some(t) = &ctl.tls {
        t.export(CHANNEL_BINDING_LABEL, &mut cb)
            .map_err(|e| setup(format!("TLS exporter: {e}")))?;
    }
    scram.set_channel_binding(cb.to_vec());
    let mut out = Preamble::new(Channel::Agent).emit().to_vec();
    out.extend(frame(&Msg::Login {
        scram: scram.first(),
    }));
    ctl.write_all(&out, idle)
        .map_err(EngineError::io("sending the login to the agent"))?;
    let deadline = Instant::now() + idle;
    let mut pre = Vec::with_capacity(PREAMBLE_LEN);
    let mut dec = FrameDecoder::new(MAX_REQUEST_FRAME);
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Err(ProtoError::TimedOut("logging in to the agent").into());
        }
        let n = match ctl
            .read(deadline - now)
            .map_err(wirerate_control::login::read_error)?
        {
            Input::Bytes(n) => n,
            Input::Nothing => continue,
            Input::Closed => {
                return Err(EngineError::PeerClosed(
                    "the agent closed the connection during the login",
                ))
            }
        };
        let mut bytes = ctl.bytes(n).to_vec();
        if pre.len() < PREAMBLE_LEN {
            let k = (PREAMBLE_LEN - pre.len()).min(bytes.len());
            pre.extend(bytes.drain(..k));
            if pre.len() < PREAMBLE_LEN {
                continue;
            }
            match Preamble::parse(&pre) {
                Ok(p) if p.channel == Channel::Agent => {}
                _ => {
                    return Err(EngineError::Setup(
                        "the agent does not take third-party requests over TLS".into(),
                    ))
                }
            }
        }
        dec.push(&bytes)?;
        while let Some(msg) = dec.next_msg()? {
            match msg {
                Msg::LoginChallenge { scram: s } => {
                    let proof = scram.answer(&s).map_err(ProtoError::Login)?;
                    ctl.write_all(&frame(&Msg::LoginProof { scram: proof }), idle)
                        .map_err(EngineError::io("sending the login to the agent"))?;
                }
                Msg::LoginOk { scram: s } => {
                    scram.verify(&s).map_err(ProtoError::Login)?;
                    return Ok(None);
                }
                Msg::Refused { reason } => return Ok(Some(AgentOutcome::Refused(reason))),
                other => {
                    return Err(ProtoError::Unexpected {
                        got: other.name(),
                        state: "logging in to the agent",
                    }
                    .into())
                }
            }
        }
    }
}

/// The agent's outcome as a result, or the one-line reason it is not one.
pub fn into_result(out: AgentOutcome, agent: SocketAddr) -> Result<RunResult, String> {
    match out {
        AgentOutcome::Done(r) => Ok(*r),
        AgentOutcome::Refused(reason) => Err(format!("agent {agent} refused: {reason}")),
        AgentOutcome::Busy(s) => Err(format!("agent {agent} is busy; retry in {s:.0} s")),
        AgentOutcome::Failed(reason) => Err(format!("agent {agent}: {reason}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn cidrs(list: &[&str]) -> Vec<Cidr> {
        list.iter().map(|s| Cidr::parse(s).unwrap()).collect()
    }

    /// An agent with TLS and users, in this process, and a plain server as its target.
    fn tls_agent(dir: &std::path::Path) -> (SocketAddr, SocketAddr, ClientTls) {
        use crate::users::{UserDb, Users};
        use wirerate_proto::auth::Verifier;
        let srv_tls = wirerate_control::tls::ServerTls::load_or_create(dir).unwrap();
        let pin = ClientTls {
            pin: Some((srv_tls.fingerprint.clone(), "test".into())),
            ..Default::default()
        };
        let mut users = Users::default();
        users
            .set("fleet", Verifier::derive("pw", b"0123456789abcdef", 4096))
            .unwrap();
        let agent = crate::Server::bind(
            "127.0.0.1:0".parse().unwrap(),
            crate::ServerConfig {
                quiet: true,
                tls: Some(srv_tls),
                users: Some(Arc::new(UserDb::new(users).unwrap())),
                agent: AgentConfig {
                    allow: true,
                    targets: cidrs(&["127.0.0.0/8"]),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .unwrap();
        let b = crate::Server::bind(
            "127.0.0.1:0".parse().unwrap(),
            crate::ServerConfig {
                quiet: true,
                ..Default::default()
            },
        )
        .unwrap();
        let (a_addr, b_addr) = (agent.local_addr().unwrap(), b.local_addr().unwrap());
        agent.spawn().unwrap();
        b.spawn().unwrap();
        (a_addr, b_addr, pin)
    }

    #[test]
    fn junk_inside_tls_is_refused_and_the_agent_serves_the_next_caller() {
        let dir = std::env::temp_dir().join(format!("wr-agent-tls-{}", std::process::id()));
        let (agent, b, pin) = tls_agent(&dir);
        let spec = TestSpec {
            end: wirerate_core::spec::End::Bytes { bytes: 256 << 10 },
            ..TestSpec::default()
        };
        let d = Duration::from_secs(10);
        let ask = |auth: &CallerAuth| request(agent, &b.to_string(), &spec, d, d, auth);
        // junk where the login or the request belongs, inside TLS, from a raw client
        for junk in [
            &b"\x00\x00\x00\x05{]]]]"[..],
            b"\xff\xff\xff\xff",
            b"GET / HTTP/1.0\r\n\r\n",
        ] {
            let sock = wirerate_engine::net::connect(agent, None, None, d).unwrap();
            let mut ctl = connect_tls(sock.try_clone().unwrap(), &pin, d).unwrap();
            let mut bytes = wirerate_proto::Preamble::new(wirerate_proto::Channel::Agent)
                .emit()
                .to_vec();
            bytes.extend_from_slice(junk);
            ctl.write_all(&bytes, d).unwrap();
            // the agent answers and closes within its idle time, whatever it was sent
            let until = Instant::now() + Duration::from_secs(15);
            loop {
                assert!(Instant::now() < until, "the agent hung on {junk:?}");
                match ctl.read(Duration::from_millis(100)) {
                    Ok(Input::Closed) | Err(_) => break,
                    _ => {}
                }
            }
            let _ = sock.shutdown(std::net::Shutdown::Both);
        }
        // a wrong password is refused; the right one gets its result
        let login = |pw: &str| CallerAuth {
            tls: Some(pin.clone()),
            login: Some(Login {
                user: "fleet".into(),
                password: pw.into(),
            }),
        };
        match ask(&login("not it")).unwrap() {
            AgentOutcome::Refused(r) => assert!(r.contains("login failed"), "{r}"),
            other => panic!("{other:?}"),
        }
        match ask(&login("pw")).unwrap() {
            AgentOutcome::Done(r) => assert!(r.summary.bytes >= 256 << 10),
            other => panic!("{other:?}"),
        }
        // a login without TLS is the caller's own error
        let e = ask(&CallerAuth {
            tls: None,
            ..login("pw")
        })
        .unwrap_err();
        assert!(e.to_string().contains("needs TLS"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn off_by_default_and_no_targets_without_a_list() {
        let off = AgentConfig::default();
        let e = permit(&off, None, ip("127.0.0.2")).unwrap_err();
        assert!(e.contains("--allow-third-party"), "{e}");
        let on = AgentConfig {
            allow: true,
            ..Default::default()
        };
        let e = permit(&on, None, ip("127.0.0.2")).unwrap_err();
        assert!(e.contains("no third-party targets"), "{e}");
    }

    #[test]
    fn targets_bound_the_relay() {
        let on = AgentConfig {
            allow: true,
            targets: cidrs(&["127.0.0.0/8", "fd77::/64"]),
            ..Default::default()
        };
        assert!(permit(&on, None, ip("127.0.0.2")).is_ok());
        assert!(permit(&on, None, ip("fd77::3")).is_ok());
        let e = permit(&on, None, ip("192.0.2.1")).unwrap_err();
        assert!(e.contains("192.0.2.1") && e.contains("127.0.0.0/8"), "{e}");
    }

    #[test]
    fn a_rule_overrides_the_flag_both_ways() {
        let rule = |allow, targets: &[&str]| ThirdPartyRule {
            of: "rule 'mesh' for 10.0.0.0/8".into(),
            allow,
            targets: cidrs(targets),
        };
        let off = AgentConfig::default();
        let on = AgentConfig {
            allow: true,
            targets: cidrs(&["0.0.0.0/0"]),
            ..Default::default()
        };
        // a rule allows where the flag does not, within its own targets
        let r = rule(Some(true), &["10.0.0.0/8"]);
        assert!(permit(&off, Some(&r), ip("10.1.2.3")).is_ok());
        let e = permit(&off, Some(&r), ip("11.1.2.3")).unwrap_err();
        assert!(e.contains("rule 'mesh'"), "{e}");
        // its targets narrow the flag's
        assert!(permit(&on, Some(&r), ip("192.0.2.1")).is_err());
        // a rule that refuses wins over the flag, and says so
        let e = permit(&on, Some(&rule(Some(false), &[])), ip("10.1.2.3")).unwrap_err();
        assert!(e.contains("not allowed by rule 'mesh'"), "{e}");
        // a rule that is silent leaves the flag and its targets in force
        assert!(permit(&on, Some(&rule(None, &[])), ip("192.0.2.1")).is_ok());
        assert!(permit(&off, Some(&rule(None, &["10.0.0.0/8"])), ip("10.1.2.3")).is_err());
    }
}
