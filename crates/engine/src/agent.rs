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
//! - the agent holds its own test slot while it runs, so it is busy for others.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use wirerate_core::assemble::{assemble, Context};
use wirerate_core::report::SideReport;
use wirerate_core::result::WireSummary;
use wirerate_core::{RunResult, TestSpec};
use wirerate_proto::agent::{
    encode, AgentClient, AgentMsg, AgentOutcome, AgentRequest, AgentServer,
};
use wirerate_proto::ProtoError;

use crate::client::{run_test, ClientConfig, Observer};
use crate::error::EngineError;
use crate::limits::{Cidr, ThirdPartyRule};
use crate::logline::{Decision, Event, Kind};
use crate::server::{Active, Pending, Shared, SlotGuard};

/// What the link under a test could carry, as the binary knows it (a lab, `--link`, sysfs).
pub type WireFacts = fn(&TestSpec, &SideReport) -> WireSummary;

/// The server's third-party settings.
#[derive(Debug, Clone, Default)]
pub struct AgentConfig {
    /// `--allow-third-party`: callers whose rule does not say otherwise may ask.
    pub allow: bool,
    /// `--third-party-targets`: where tests may go when the caller's rule names none.
    pub targets: Vec<Cidr>,
    pub wire: Option<WireFacts>,
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

/// Serves one agent connection (its preamble already read). Never panics on the caller's
/// input; every read is bounded in time.
/// The connection counts as pending (`pending`) until its request is read, like any
/// connection that has not yet said what it wants.
pub(crate) fn serve(mut sock: TcpStream, shared: &Shared, who: &str, pending: Pending) {
    let ip = sock.peer_addr().ok().map(|a| a.ip());
    let _ = sock.set_write_timeout(Some(shared.cfg.idle));
    let req = read_request(&mut sock, Instant::now() + shared.cfg.handshake);
    drop(pending);
    let req = match req {
        Ok(r) => r,
        Err(reason) => return refuse(sock, shared, who, ip, &reason),
    };
    let Some(ip) = ip else {
        return refuse(sock, shared, who, ip, "the caller's address is unknown");
    };
    let target = match resolve_permitted(shared, ip, &req.to) {
        Ok(t) => t,
        Err(reason) => return refuse(sock, shared, who, Some(ip), &reason),
    };
    // the agent's caps hold for the tests it runs as a client too (duration, rate, memory)
    if let Err(reason) = shared.cfg.caps.check(&req.spec) {
        return refuse(sock, shared, who, Some(ip), &reason);
    }
    let admission = match shared.cfg.policy.admit(ip, None, &req.spec, Instant::now()) {
        Ok(a) => a,
        Err(reason) => return refuse(sock, shared, who, Some(ip), &reason),
    };
    let reply = run_held(&mut sock, shared, who, target, &req.spec);
    shared.cfg.policy.release(&admission);
    if let Some(msg) = reply {
        let _ = sock.write_all(&encode(&msg));
    }
}

/// Claims the slot, runs the test towards `target` and returns the final answer (None when
/// the answer was already sent).
fn run_held(
    sock: &mut TcpStream,
    shared: &Shared,
    who: &str,
    target: SocketAddr,
    spec: &TestSpec,
) -> Option<AgentMsg> {
    let mut slot = match claim_slot(shared, spec) {
        Ok(s) => s,
        Err(retry_s) => {
            let ev = Event::new(Kind::Connection, Some(who.into()))
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
    if sock.write_all(&encode(&AgentMsg::Started)).is_err() {
        return None;
    }
    shared.record(
        &Event::new(Kind::Test, Some(who.into())).decided(
            Decision::Accepted,
            Some(format!("third-party test towards {target}")),
        ),
        Some(format_args!("third-party test for {who} towards {target}")),
    );
    let cfg = ClientConfig {
        idle: shared.cfg.idle,
        ..Default::default()
    };
    let started_unix_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let answer = match run_test(target, spec, &cfg, &mut Quiet) {
        Ok(out) => {
            slot.completed();
            let wire = shared
                .cfg
                .agent
                .wire
                .map(|f| f(spec, &out.local))
                .unwrap_or_default();
            let result = assemble(
                spec,
                &out.local,
                &out.remote,
                Context {
                    tool_version: env!("CARGO_PKG_VERSION").into(),
                    started_unix_s,
                    server_addr: target.to_string(),
                    embedded_server: false,
                    wire,
                    udp: out.udp.clone(),
                    interrupted: false,
                },
            );
            AgentMsg::Done {
                result: Box::new(result),
            }
        }
        Err(EngineError::Proto(ProtoError::Busy(retry_s))) => AgentMsg::Busy { retry_s },
        Err(e) => AgentMsg::Failed {
            reason: format!("the test towards {target} failed: {}", e.full()),
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
        token: crate::net::random_token().unwrap_or([0xa5; 16]),
        tx,
        free_at: Instant::now() + bound + shared.cfg.idle,
        iperf3: None,
        crr: None,
        peer_ip: None,
    });
    drop(slot);
    Ok(SlotGuard::new(shared))
}

/// The first address of `to` the caller may target.
fn resolve_permitted(shared: &Shared, caller: IpAddr, to: &str) -> Result<SocketAddr, String> {
    let rule = shared.cfg.policy.third_party(caller);
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

fn refuse(mut sock: TcpStream, shared: &Shared, who: &str, ip: Option<IpAddr>, reason: &str) {
    let ev = Event::new(Kind::Connection, Some(who.into()))
        .decided(Decision::Refused, Some(format!("third-party: {reason}")));
    shared.log_rejected(
        ip,
        ev,
        format_args!("refused third-party request from {who}: {reason}"),
    );
    let _ = sock.write_all(&encode(&AgentMsg::Refused {
        reason: reason.to_string(),
    }));
    let _ = sock.shutdown(std::net::Shutdown::Write);
}

fn read_request(sock: &mut TcpStream, deadline: Instant) -> Result<AgentRequest, String> {
    let mut server = AgentServer::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err("no request in time".into());
        }
        let _ = sock.set_read_timeout(Some(left));
        match sock.read(&mut buf) {
            Ok(0) => return Err("the caller closed before its request".into()),
            Ok(n) => {
                if let Some(req) = server.handle_input(&buf[..n]).map_err(|e| e.to_string())? {
                    return Ok(req);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err("no request in time".into())
            }
            Err(e) => return Err(format!("reading the request: {e}")),
        }
    }
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
) -> Result<AgentOutcome, EngineError> {
    let mut sock = crate::net::connect(agent, None, None, connect_timeout)?;
    let run_bound = spec.send_seconds().map_or(
        crate::guard::Caps::default().max_duration,
        Duration::from_secs_f64,
    );
    let req = AgentRequest {
        to: to.to_string(),
        spec: spec.clone(),
    };
    let mut c = AgentClient::new(req, Instant::now(), idle, run_bound);
    if let Some(bytes) = c.poll_transmit() {
        sock.write_all(&bytes)
            .map_err(EngineError::io("sending the request to the agent"))?;
    }
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let now = Instant::now();
        c.handle_timeout(now)?;
        let wait = c
            .poll_timeout()
            .saturating_duration_since(now)
            .max(Duration::from_millis(1));
        let _ = sock.set_read_timeout(Some(wait));
        match sock.read(&mut buf) {
            Ok(0) => {
                c.handle_close()?;
                return Err(EngineError::Setup("the agent closed the connection".into()));
            }
            Ok(n) => {
                if let Some(out) = c.handle_input(&buf[..n], Instant::now())? {
                    return Ok(out);
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) if c.started() => {
                return Err(EngineError::Io {
                    what: "the agent's connection broke while it ran the test",
                    source: e,
                })
            }
            Err(e) => {
                return Err(EngineError::Io {
                    what: "reading the agent's answer",
                    source: e,
                })
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
