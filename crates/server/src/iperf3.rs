//! iperf3 clients of `wirerate serve`. A connection whose first bytes look like an iperf3
//! cookie comes here: if the cookie is the running iperf3 test's, it is one of its data
//! streams; otherwise it is a new client, asked for its parameters while it counts as
//! pending, then served when the test slot is free and answered with `ACCESS_DENIED`
//! (iperf3's "server is busy") when not.

use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

use socket2::SockRef;
use wirerate_core::metrics::bps;
use wirerate_core::result::Interval;
use wirerate_core::side_report::{Role, SideReport};
use wirerate_core::spec::{End, Flow, Protocol};
use wirerate_core::TestSpec;
use wirerate_proto::iperf3::map::Side;
use wirerate_proto::iperf3::{
    state, Cookie, Params, Results, ServerEvent, ServerSession, StreamMap, COOKIE_LEN,
};

use crate::guard::Watchdog;
use crate::limits::{Admission, Policy};
use crate::logline::{Decision, Event, Kind, SpecShort, TestNote};
use crate::server::{peer, Active, Pending, Shared, SlotGuard};
use wirerate_control::control::Control;
use wirerate_control::driver::{drive, Handler, Peer, ROUND};
use wirerate_control::iperf3::SentClock;
use wirerate_engine::net::{apply_options, batch_receive, random_token, read_exact_by};
use wirerate_engine::side::{Attached, DataSock, SideRun};
use wirerate_engine::EngineError;

use wirerate_engine::iperf3::udp::{add_udp_figures, UdpAcceptor, UdpOutcome, UdpRun, UdpStream};

/// Where the data streams of the running iperf3 test go.
pub(crate) struct Route {
    cookie: Cookie,
    tx: Sender<(Instant, TcpStream)>,
}

/// After `TEST_END`, received data still in flight is read until the streams have been quiet
/// this long (or for at most `DRAIN_MAX`), so a byte-count test reports every byte.
const DRAIN_QUIET: Duration = Duration::from_millis(20);
const DRAIN_MAX: Duration = Duration::from_millis(250);

/// Handles a connection that opened with `first`, the start of an iperf3 cookie.
pub(crate) fn handle_conn(
    mut sock: TcpStream,
    first: &[u8],
    accepted_at: Instant,
    shared: &Shared,
    pending: Pending,
) {
    let who = peer(&sock);
    let ip = sock.peer_addr().ok().map(|a| a.ip());
    let deadline = Instant::now() + shared.cfg.handshake;
    let mut buf = [0u8; COOKIE_LEN];
    let n = first.len().min(COOKIE_LEN);
    buf[..n].copy_from_slice(&first[..n]);
    let cookie = read_exact_by(&mut sock, &mut buf[n..], deadline)
        .map_err(|e| format!("no iperf3 cookie: {e}"))
        .and_then(|()| Cookie::parse(&buf).map_err(|e| e.to_string()));
    let cookie = match cookie {
        Ok(c) => c,
        Err(reason) => {
            drop(pending);
            let ev = Event::new(Kind::Connection, Some(who.clone()))
                .decided(Decision::Refused, Some(reason.clone()));
            return shared.log_rejected(ip, ev, format_args!("rejected {who}: {reason}"));
        }
    };
    if shared.cfg.users.is_some() || shared.cfg.tls.as_ref().is_some_and(|t| t.client_certs) {
        drop(pending);
        // iperf3 has no login wirerate can check: its own "test authorization failed"
        refuse_auth(&mut sock);
        let reason = "iperf3 client: this server requires authentication, which iperf3 cannot do";
        let ev = Event::new(Kind::Connection, Some(who.clone()))
            .decided(Decision::Refused, Some(reason.into()));
        return shared.log_rejected(ip, ev, format_args!("refused {who}: {reason}"));
    }
    // a data stream of the running iperf3 test, or a client the server is too busy for
    let running = shared.active().as_ref().map(|a| {
        a.iperf3
            .as_ref()
            .filter(|r| r.cookie == cookie)
            .map(|r| r.tx.clone())
    });
    if let Some(route) = running {
        drop(pending);
        return match route {
            Some(stream_tx) => {
                if let Err(mpsc::SendError((_, mut late))) = stream_tx.send((accepted_at, sock)) {
                    deny(&mut late);
                }
            }
            None => busy(sock, shared, &who),
        };
    }
    let token = match random_token() {
        Ok(t) => t,
        Err(e) => return shared.log(format_args!("{}", e.full())),
    };
    // the slot is claimed only once the parameters are here: a client that sends its
    // cookie and goes quiet holds none, and stays counted as pending until then
    let mut ctl = Control::new(sock);
    let mut sess = ServerSession::new(Instant::now(), shared.cfg.idle);
    let early = match await_params(&mut ctl, &mut sess, shared.cfg.handshake) {
        Ok(ev) => ev,
        Err(reason) => {
            drop(pending);
            let ev = Event::new(Kind::Connection, Some(who.clone()))
                .decided(Decision::Refused, Some(reason.clone()));
            return shared.log_rejected(ip, ev, format_args!("rejected {who}: {reason}"));
        }
    };
    drop(pending);
    let (tx, rx) = mpsc::channel();
    {
        let mut slot = shared.active();
        if slot.is_some() {
            drop(slot);
            return busy(ctl.sock, shared, &who);
        }
        // wirerate data streams can never match this token; the channel is unused
        let (unused, _) = mpsc::channel();
        *slot = Some(Active {
            token,
            tx: unused,
            free_at: Instant::now() + shared.cfg.idle,
            iperf3: Some(Route { cookie, tx }),
            crr: None,
            peer_ip: ip,
            probe_tos: None,
        });
    }
    shared.record(
        &Event::new(Kind::Connection, Some(who.clone()))
            .decided(Decision::Accepted, Some("iperf3 client".into())),
        None,
    );
    let mut slot = SlotGuard::new(shared);
    let mut note = TestNote::default();
    let outcome = run_session(ctl, sess, early, rx, shared, &mut note);
    if outcome.is_ok() {
        slot.completed();
    }
    let ev = note.event(&who, outcome.as_ref().err().map(EngineError::full));
    let text = |msg: std::fmt::Arguments<'_>| shared.record(&ev, Some(msg));
    match outcome {
        Ok((p, goodput)) => text(format_args!(
            "served iperf3 client {who} ({}): {} {}, {}, goodput {}",
            p.client_version.as_deref().unwrap_or("unknown version"),
            match p.spec.protocol {
                Protocol::Tcp => "TCP",
                Protocol::Udp => "UDP",
            },
            p.spec.direction.words(),
            wirerate_core::text::count(u64::from(p.spec.parallel), "stream"),
            goodput.map_or_else(|| "n/a".into(), wirerate_core::units::format_bps)
        )),
        Err(e) => text(format_args!("ended iperf3 test with {who}: {}", e.full())),
    }
    drop(slot);
}

/// Tells an iperf3 client the server is busy, and logs it.
fn busy(mut sock: TcpStream, shared: &Shared, who: &str) {
    deny(&mut sock);
    let ev = Event::new(Kind::Connection, Some(who.into()))
        .decided(Decision::Busy, Some("iperf3 client".into()));
    shared.record(&ev, Some(format_args!("busy: denied iperf3 client {who}")));
}

/// Asks for the parameters and reads them within `wait`: the events that came with them.
fn await_params(
    ctl: &mut Control,
    sess: &mut ServerSession,
    wait: Duration,
) -> Result<Vec<ServerEvent>, String> {
    use wirerate_control::control::Input;
    let deadline = Instant::now() + wait;
    loop {
        ctl.flush(|| sess.poll_transmit(), wait)
            .map_err(|e| format!("iperf3 client: writing: {e}"))?;
        let now = Instant::now();
        if now >= deadline {
            return Err(format!(
                "iperf3 client: no parameters within {} s",
                wait.as_secs_f64()
            ));
        }
        let events = match ctl.read(deadline - now) {
            Ok(Input::Bytes(n)) => sess.handle_input(ctl.bytes(n), Instant::now()),
            Ok(Input::Closed) => sess.handle_close().map(|()| Vec::new()),
            Ok(Input::Nothing) => Ok(Vec::new()),
            Err(e) => return Err(format!("iperf3 client: {e}")),
        }
        .map_err(|e| format!("iperf3 client: {e}"))?;
        if events.iter().any(|e| matches!(e, ServerEvent::Params(..))) {
            return Ok(events);
        }
    }
}

/// iperf3's answer to a client it will not serve now: one `ACCESS_DENIED` byte, then close.
fn deny(sock: &mut TcpStream) {
    let _ = sock.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = sock.write_all(&[state::ACCESS_DENIED as u8]);
}

/// iperf3's answer to a client on a server that requires a login: `SERVER_ERROR` with
/// iperf3's error number for a failed authorization, which the client prints as its own text.
fn refuse_auth(sock: &mut TcpStream) {
    let mut b = vec![state::SERVER_ERROR as u8];
    b.extend_from_slice(&wirerate_proto::iperf3::errno::AUTH.to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes());
    let _ = sock.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = sock.write_all(&b);
}

/// What the session holds while the test runs; the workers are stopped if it is dropped.
#[derive(Default)]
struct Run {
    params: Option<Params>,
    map: Option<StreamMap>,
    pending: Vec<(Instant, TcpStream)>,
    /// Clones of the data sockets, to stop senders and flush batched reads at the end.
    socks: Vec<(Role, TcpStream)>,
    side: Option<SideRun>,
    udp_acceptor: Option<UdpAcceptor>,
    udp_pending: Vec<UdpStream>,
    udp: Option<UdpRun>,
    udp_outcomes: Vec<UdpOutcome>,
    /// The running test must end by then (time-based tests, or once every stream ended).
    end_by: Option<Instant>,
    drain: Option<Drain>,
    local: Option<SideReport>,
    peer: Option<Results>,
    replied: bool,
    watch: Option<Watchdog>,
    admission: Option<(Admission, std::sync::Arc<Policy>)>,
    note: TestNote,
    /// The server shows the intervals of the TCP streams it serves: how many it has shown.
    shown: Option<usize>,
    /// Intervals cut from the bytes this side moved in one role: what it sends, and a UDP
    /// upload (a TCP upload's are the side's own).
    clocks: Vec<(Role, SentClock)>,
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some((a, policy)) = self.admission.take() {
            policy.release(&a);
        }
        if let Some(side) = self.side.take() {
            side.abort();
            let _ = side.finish();
        }
        if let Some(u) = self.udp.take() {
            let _ = u.finish();
        }
    }
}

struct Drain {
    began: Instant,
    quiet_since: Instant,
    last: u64,
}

/// The control connection's two ends: where UDP streams are accepted, and from whom.
struct Addrs {
    local: Option<SocketAddr>,
    peer: Option<IpAddr>,
}

fn run_session(
    mut ctl: Control,
    mut sess: ServerSession,
    early: Vec<ServerEvent>,
    rx: Receiver<(Instant, TcpStream)>,
    shared: &Shared,
    note: &mut TestNote,
) -> Result<(Params, Option<f64>), EngineError> {
    let addrs = Addrs {
        local: ctl.sock.local_addr().ok(),
        peer: ctl.sock.peer_addr().ok().map(|a| a.ip()),
    };
    let mut run = Run::default();
    run.shown = shared.cfg.intervals.as_ref().map(|_| 0);
    // an iperf3 client says nothing while it receives: TCP watches the connection
    if let Some(p) = early.iter().find_map(|e| match e {
        ServerEvent::Params(p, _) if p.spec.server_sends_udp() => Some(p),
        _ => None,
    }) {
        wirerate_control::breaker::watch_control(&ctl.sock, &p.spec);
    }
    // the parameters first, before `CREATE_STREAMS` goes: a UDP test's port must be bound
    // before the client sends to it
    let mut result = early
        .into_iter()
        .try_for_each(|ev| on_event(ev, &mut run, &addrs, shared, Instant::now()));
    if result.is_err() {
        sess.terminate();
        let _ = ctl.flush(|| sess.poll_transmit(), Duration::from_secs(1));
    } else {
        result = drive(
            &mut ctl,
            &mut sess,
            &mut ServerRun {
                run: &mut run,
                rx: &rx,
                addrs: &addrs,
                shared,
            },
        );
    }
    if let Err(e) = result {
        *note = std::mem::take(&mut run.note);
        return Err(e);
    }
    let params = run
        .params
        .take()
        .ok_or_else(|| EngineError::Setup("no parameters".into()))?;
    let goodput = goodput(&params.spec, &run);
    *note = std::mem::take(&mut run.note);
    if let (Some(g), Some(local)) = (goodput, &run.local) {
        let bytes = local.streams.iter().map(|s| s.bytes).sum();
        let seconds = local.streams.iter().map(|s| s.seconds).fold(0.0, f64::max);
        note.result = Some(crate::logline::ResultShort {
            goodput_bps: g,
            bytes,
            seconds,
        });
    }
    Ok((params, goodput))
}

/// The goodput the client will see, for the log line: both sides' reports joined as a
/// client joins them (the iperf3 client's results stand in for its side).
fn goodput(spec: &TestSpec, run: &Run) -> Option<f64> {
    let (local, peer, map) = (run.local.as_ref()?, run.peer.as_ref()?, run.map.as_ref()?);
    let window_s = local.streams.iter().map(|s| s.seconds).fold(0.0, f64::max);
    let client = peer.to_side(map, Side::Client, window_s);
    let ctx = wirerate_core::assemble::Context::default();
    Some(
        wirerate_core::assemble::assemble(spec, &client, local, ctx)
            .summary
            .goodput_bps,
    )
}

/// The server's part of the control loop for an iperf3 client: check the parameters, take
/// the data streams in the order they were accepted, watch the test, drain what is in flight
/// at its end, and answer the client's results with this side's.
struct ServerRun<'a> {
    run: &'a mut Run,
    rx: &'a Receiver<(Instant, TcpStream)>,
    addrs: &'a Addrs,
    shared: &'a Shared,
}

impl Handler<ServerSession> for ServerRun<'_> {
    const PEER: Peer = Peer {
        write: "writing to the iperf3 client",
        read: "reading from the iperf3 client",
    };

    fn idle(&self) -> Duration {
        self.shared.cfg.idle
    }

    fn read_error(e: std::io::Error) -> EngineError {
        wirerate_control::breaker::dead_control(e, Self::PEER.read)
    }

    fn max_wait(&self) -> Duration {
        if self.run.drain.is_some() || self.run.udp_acceptor.is_some() {
            Duration::from_millis(2)
        } else {
            ROUND
        }
    }

    fn before_read(&mut self, sess: &mut ServerSession) -> Result<bool, EngineError> {
        let (idle, shared) = (self.shared.cfg.idle, self.shared);
        let local_ip = self.addrs.local.map(|a| a.ip());
        // send CREATE_STREAMS' follow-up (TEST_START) without waiting on the control socket
        Ok(
            attach_streams(sess, self.run, self.rx, local_ip, idle, shared)?
                || attach_udp(sess, self.run, idle)?,
        )
    }

    fn on_event(&mut self, _sess: &mut ServerSession, ev: ServerEvent) -> Result<(), EngineError> {
        on_event(ev, self.run, self.addrs, self.shared, Instant::now())
    }

    fn after(&mut self, sess: &mut ServerSession, now: Instant) -> Result<(), EngineError> {
        let (run, idle) = (&mut *self.run, self.shared.cfg.idle);
        if sess.is_running() {
            #[cfg(test)]
            crate::server::tests::maybe_panic(
                self.shared,
                crate::server::tests::WHILE_RUNNING_IPERF3,
            );
            let udp_done = run.udp.as_ref().is_some_and(|u| u.is_done());
            if udp_done || run.side.as_ref().is_some_and(|s| s.is_done()) {
                // every stream ended: the client has idle to end the test
                run.end_by = Some(run.end_by.map_or(now + idle, |e| e.min(now + idle)));
            }
            if run.end_by.is_some_and(|e| now >= e) {
                return Err(EngineError::Setup(
                    "the iperf3 client did not end the test in time".into(),
                ));
            }
            watch(run, now, self.shared)?;
        }
        stop_when_drained(run, now);
        show_intervals(run, now, self.shared);
        reply_when_ready(sess, run, now);
        Ok(())
    }
}

fn on_event(
    ev: ServerEvent,
    run: &mut Run,
    addrs: &Addrs,
    shared: &Shared,
    now: Instant,
) -> Result<(), EngineError> {
    match ev {
        ServerEvent::Params(p, _) => {
            run.note.spec = Some(SpecShort::of(&p.spec));
            if let Err(reason) = shared.cfg.caps.check(&p.spec) {
                run.note.refused = Some(reason.clone());
                return Err(EngineError::Refused(reason));
            }
            if let Some(ip) = addrs.peer {
                let admitted = shared.cfg.policy.admit(ip, None, &p.spec, now);
                run.note.rule = shared.cfg.policy.rule_name(ip, None);
                let a = admitted.map_err(|reason| {
                    run.note.refused = Some(reason.clone());
                    EngineError::Refused(reason)
                })?;
                run.admission = Some((a, shared.cfg.policy.clone()));
            }
            let run_s = p
                .spec
                .send_seconds()
                .unwrap_or(shared.cfg.caps.max_duration.as_secs_f64());
            if let Some(a) = shared.active().as_mut() {
                // the test's end: see `set_free_at` in the server
                a.free_at = now + Duration::from_secs_f64(run_s);
            }
            if p.spec.protocol == Protocol::Udp {
                let (Some(local), Some(peer)) = (addrs.local, addrs.peer) else {
                    return Err(EngineError::Setup(
                        "control connection has no address".into(),
                    ));
                };
                run.udp_acceptor = Some(UdpAcceptor::bind(local, peer)?);
            }
            run.map = Some(StreamMap::new(p.spec.direction, p.spec.parallel));
            run.params = Some(*p);
        }
        ServerEvent::TestEnd => {
            clock_lines(run, now, true)
                .iter()
                .for_each(|iv| shared.interval(iv));
            if let Some(u) = run.udp.take() {
                // as iperf3 does for UDP: stop at once
                let (report, outcomes) = u.finish();
                run.local = Some(report);
                run.udp_outcomes = outcomes;
                return Ok(());
            }
            // as iperf3 does: stop sending at once (a write blocked on a full buffer ends
            // too), but let readers take what is still in flight
            if let Some(side) = run.side.as_ref() {
                side.stop_sending();
            }
            for (role, s) in &run.socks {
                match role {
                    Role::Sender => {
                        let _ = s.shutdown(std::net::Shutdown::Write);
                    }
                    // wake readers waiting for a full batch: no more is coming
                    Role::Receiver => batch_receive(&SockRef::from(s), 1),
                }
            }
            let last = run.side.as_ref().map_or(0, |s| s.moved(Role::Receiver));
            run.drain = Some(Drain {
                began: now,
                quiet_since: now,
                last,
            });
        }
        ServerEvent::PeerResults(r) => run.peer = Some(*r),
    }
    Ok(())
}

/// Answers UDP greetings; starts the workers once every stream is in. Returns true when it
/// took any.
fn attach_udp(
    sess: &mut ServerSession,
    run: &mut Run,
    idle: Duration,
) -> Result<bool, EngineError> {
    let Some(acceptor) = run.udp_acceptor.as_mut() else {
        return Ok(false);
    };
    let (Some(map), Some(p)) = (run.map.as_ref(), run.params.as_ref()) else {
        return Ok(false);
    };
    let mut took = false;
    while let Some(sock) = acceptor.poll()? {
        took = true;
        let Some(e) = map.entries.get(run.udp_pending.len()) else {
            continue;
        };
        let role = Side::Server.role(e.flow);
        run.udp_pending
            .push(UdpStream::new(e.flow, e.index, role, sock));
        if sess.attach_stream(Instant::now())? {
            run.udp_acceptor = None;
            let local = local_spec(&p.spec, idle);
            run.end_by = end_by(&p.spec, idle);
            let streams = std::mem::take(&mut run.udp_pending);
            run.udp = Some(UdpRun::start(&local, streams, idle, p.udp_counters_64bit)?);
            if run.shown.is_some() {
                // an iperf3 client does not send its -i: seconds, as iperf3's server shows
                let each_second = TestSpec {
                    interval_s: 1.0,
                    ..local
                };
                let t0 = Instant::now();
                let upload = SentClock::new(&each_second, t0);
                run.clocks.extend(upload.map(|c| (Role::Receiver, c)));
                start_sent_clock(run, &each_second, t0);
            }
            break;
        }
    }
    Ok(took)
}

/// iperf3's client ends a timed test; this side's senders run until then, bounded: TCP
/// senders by the idle timeout past the test's time, UDP senders, which nothing else stops,
/// by the circuit breaker's time (`wirerate_core::breaker`). A client whose `TEST_END` is that
/// late is silent or gone.
fn local_spec(spec: &TestSpec, idle: Duration) -> TestSpec {
    let mut local = spec.clone();
    let grace = match spec.protocol {
        Protocol::Udp => spec.breaker_after_s(),
        Protocol::Tcp => idle.as_secs_f64(),
    };
    if let End::Time { seconds } = local.end {
        local.end = End::Time {
            seconds: seconds + grace,
        };
    }
    local
}

/// When a timed test must have been ended by the client.
fn end_by(spec: &TestSpec, idle: Duration) -> Option<Instant> {
    spec.send_seconds()
        .map(|s| Instant::now() + idle + Duration::from_secs_f64(s))
}

/// Takes the data streams that presented the cookie; starts the workers once all are in.
/// Returns true when it took any.
fn attach_streams(
    sess: &mut ServerSession,
    run: &mut Run,
    rx: &Receiver<(Instant, TcpStream)>,
    local_ip: Option<IpAddr>,
    idle: Duration,
    shared: &Shared,
) -> Result<bool, EngineError> {
    let mut took = false;
    while let Ok((at, mut sock)) = rx.try_recv() {
        took = true;
        let Some(p) = run.params.as_ref() else {
            deny(&mut sock);
            continue;
        };
        match sess.attach_stream(Instant::now()) {
            Ok(all) => {
                apply_options(&SockRef::from(&sock), &p.spec)?;
                run.pending.push((at, sock));
                if all {
                    start(run, local_ip, idle)?;
                }
            }
            Err(e) => {
                deny(&mut sock);
                shared.log(format_args!("rejected an iperf3 data stream: {e}"));
            }
        }
    }
    Ok(took)
}

/// Assigns flows in the order the listener accepted the streams (the client's order) and
/// starts the workers.
fn start(run: &mut Run, local_ip: Option<IpAddr>, idle: Duration) -> Result<(), EngineError> {
    let (Some(p), Some(map)) = (run.params.as_ref(), run.map.as_ref()) else {
        return Ok(());
    };
    let mut pending = std::mem::take(&mut run.pending);
    pending.sort_by_key(|(at, _)| *at);
    let streams: Vec<Attached> = pending
        .into_iter()
        .zip(&map.entries)
        .map(|((_, sock), e)| Attached {
            flow: e.flow,
            id: e.index,
            role: Side::Server.role(e.flow),
            sock: DataSock::Tcp(sock),
        })
        .collect();
    if let Some(bps) = run.admission.as_ref().and_then(|(a, _)| a.pace_bps) {
        for a in streams.iter().filter(|a| a.role == Role::Sender) {
            if let Some(t) = a.sock.tcp() {
                let _ = wirerate_engine::net::set_pacing(&SockRef::from(t), bps);
            }
        }
    }
    run.socks = streams
        .iter()
        .filter_map(|a| Some((a.role, a.sock.tcp()?.try_clone().ok()?)))
        .collect();
    let mut local = local_spec(&p.spec, idle);
    if run.shown.is_some() {
        // an iperf3 client does not send its -i: this side shows seconds, as iperf3's does
        local.interval_s = 1.0;
    }
    run.end_by = end_by(&p.spec, idle);
    run.side = Some(SideRun::start(
        &local,
        streams,
        local_ip,
        idle,
        Default::default(),
    )?);
    if let (Some(_), Some(side)) = (run.shown, run.side.as_ref()) {
        start_sent_clock(run, &local, side.started());
    }
    Ok(())
}

/// Ends a test that stalls, crawls or outlives its time bound (`guard::Watchdog`); until
/// `TEST_END`, while the workers run.
fn watch(run: &mut Run, now: Instant, shared: &Shared) -> Result<(), EngineError> {
    if run.drain.is_some() {
        return Ok(());
    }
    let moved = match (&run.side, &run.udp) {
        (Some(s), _) if !s.is_done() => s.moved(Role::Sender) + s.moved(Role::Receiver),
        (_, Some(u)) if !u.is_done() => u.moved(Role::Sender) + u.moved(Role::Receiver),
        _ => return Ok(()),
    };
    let Some(p) = run.params.as_ref() else {
        return Ok(());
    };
    let max_bytes = run
        .admission
        .as_ref()
        .and_then(|(a, _)| Some((a.max_bytes?, a.rule.clone().unwrap_or_default())));
    let w = run.watch.get_or_insert_with(|| {
        Watchdog::new(&p.spec, &shared.cfg.caps, shared.cfg.idle, now).with_max_bytes(max_bytes)
    });
    Ok(w.observe(now, moved)?)
}

/// The intervals of the running streams as they end, and the rest once the workers are done.
fn show_intervals(run: &mut Run, now: Instant, shared: &Shared) {
    let Some(shown) = run.shown.as_mut() else {
        return;
    };
    let new = match (run.side.as_mut(), run.local.as_ref()) {
        (Some(side), _) => side.poll_intervals(now),
        (None, None) => Vec::new(),
        (None, Some(local)) => {
            let rest = local.intervals.iter().skip(*shown).cloned().collect();
            run.shown = None;
            rest
        }
    };
    for iv in &new {
        shared.interval(iv);
    }
    if let Some(shown) = run.shown.as_mut() {
        *shown += new.len();
    }
    for iv in clock_lines(run, now, false) {
        shared.interval(&iv);
    }
}

/// The flow this side sends, shown as it wrote it, a line a second as iperf3's server does.
fn start_sent_clock(run: &mut Run, spec: &TestSpec, start: Instant) {
    let sent = SentClock::of(Flow::ServerToClient, spec, start);
    run.clocks.extend(sent.map(|c| (Role::Sender, c)));
}

/// The lines the clocks cut by `now` from the bytes this side moved; with `close` (at
/// `TEST_END`) the last ones too, cut there, and the clocks stop.
fn clock_lines(run: &mut Run, now: Instant, close: bool) -> Vec<Interval> {
    let mut out = Vec::new();
    for (role, clock) in &mut run.clocks {
        let moved = match (&run.side, &run.udp) {
            (Some(side), _) => side.moved(*role),
            (None, Some(udp)) => udp.moved(*role),
            (None, None) => continue,
        };
        out.extend(clock.poll(now, moved));
        if close {
            out.extend(clock.close(now, moved));
        }
    }
    if close {
        run.clocks.clear();
    }
    out
}

/// After `TEST_END`: once the received bytes stop growing, stop the workers.
fn stop_when_drained(run: &mut Run, now: Instant) {
    let (Some(d), Some(side)) = (run.drain.as_mut(), run.side.as_ref()) else {
        return;
    };
    let moved = side.moved(Role::Receiver);
    if moved != d.last {
        d.last = moved;
        d.quiet_since = now;
    }
    if now.duration_since(d.quiet_since) >= DRAIN_QUIET || now.duration_since(d.began) >= DRAIN_MAX
    {
        if let Some(side) = run.side.take() {
            side.abort();
            run.local = Some(side.finish());
        }
        run.drain = None;
    }
}

/// Sends this side's results once the client's are in and the workers are stopped.
fn reply_when_ready(sess: &mut ServerSession, run: &mut Run, now: Instant) {
    let (Some(local), Some(_), Some(map), Some(p)) = (
        run.local.as_ref(),
        run.peer.as_ref(),
        run.map.as_ref(),
        run.params.as_ref(),
    ) else {
        return;
    };
    if run.replied {
        return;
    }
    let mut results = Results::from_side(local, map);
    add_udp_figures(&mut results, &run.udp_outcomes, map);
    if p.get_server_output {
        results.server_output_text = Some(summary_text(local));
    }
    sess.local_results(&results, now);
    run.replied = true;
}

/// A short report of this side, for clients that ask for the server's output.
fn summary_text(local: &SideReport) -> String {
    let mut out = format!("wirerate {} server\n", env!("CARGO_PKG_VERSION"));
    for s in &local.streams {
        let verb = match s.role {
            Role::Sender => "sent",
            Role::Receiver => "received",
        };
        let flow = s.flow.name();
        out.push_str(&format!(
            "stream {} {flow}: {verb} {} bytes in {:.3} s, {:.2} Mbit/s\n",
            s.id,
            s.counted_bytes,
            s.seconds,
            bps(s.counted_bytes, s.seconds) / 1e6
        ));
    }
    out
}
