//! `wirerate serve`: one listener for control and data connections. A new connection waits
//! for its first bytes in the waiting room (one thread for all), then gets a short-lived
//! thread that reads its preamble within the handshake timeout and routes it; one test runs
//! at a time, and a second client is told at once that the server is busy.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use wirerate_core::text::{safe, safe_lines};

use socket2::SockRef;
use wirerate_core::assemble::{assemble, Context};
use wirerate_core::rr::RrMode;
use wirerate_core::side_report::Role;
use wirerate_core::side_report::SideReport;
use wirerate_core::spec::{stream_order, Flow, Side};
use wirerate_core::{Protocol, TestSpec};
use wirerate_probe::cpu::ThreadTimes;
use wirerate_proto::data::{token_eq, DataHello, DATA_HELLO_LEN};
use wirerate_proto::frame::PREAMBLE_LEN;
use wirerate_proto::msg::UdpProof;
use wirerate_proto::{Channel, Preamble, ServerEvent, ServerSession, Token};

use crate::guard::{target_bytes, Caps, Watchdog};
use crate::limits::Reload;
use crate::limits::{Admission, Policy};
use crate::logline::{Decision, Event, Kind, LogFormat, ResultShort, SpecShort, TestNote};
pub(crate) use crate::startups::Pending;
use wirerate_control::control::Control;
use wirerate_control::driver::{drive, Handler, Peer, ROUND};
use wirerate_control::iperf3::SentClock;
use wirerate_engine::net::{apply_options, read_exact_by};
use wirerate_engine::rr::{serve_crr, serve_crr_at_once, CrrRoute};
use wirerate_engine::side::{Attached, DataSock, RunContext, SideRun};
use wirerate_engine::stream::STALLED;
use wirerate_engine::udp::Binder;
use wirerate_engine::EngineError;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// How long any peer may stay silent before it is dropped.
    pub idle: Duration,
    /// How long a new connection has to say what it is (preamble, data hello, cookie).
    pub handshake: Duration,
    /// Connections that have not yet said who they are: refused at random beyond
    /// `start`, all beyond `full` (`--max-startups`).
    pub startups: crate::startups::Startups,
    /// Of those, at most this many from one address.
    pub max_pending_per_source: usize,
    /// The caps on any one test.
    pub caps: Caps,
    /// The operator's rules by client address and user (`--limits`).
    pub policy: Arc<Policy>,
    /// No log lines (the embedded server).
    pub quiet: bool,
    /// Text sentences or one JSON object per line.
    pub log_format: LogFormat,
    /// Reload the limits file when SIGHUP has set this flag.
    pub reload: Option<Reload>,
    /// TLS on the control connection, required of every wirerate client when set.
    pub tls: Option<wirerate_control::tls::ServerTls>,
    /// Users who must log in before a test (`--users`); iperf3 clients are then refused.
    pub users: Option<Arc<crate::users::UserDb>>,
    pub name: String,
    /// Told when a test ends (true: it completed), after its slot is free (`serve -1`).
    pub on_test_end: Option<std::sync::mpsc::Sender<bool>>,
    /// Third-party requests: who may ask, and where their tests may go.
    pub agent: crate::agent::AgentConfig,
    /// `-T`: data workers of a many-stream TCP test; None: one per CPU.
    pub threads: Option<usize>,
    /// [`Server::serve`] returns soon after this flag is set (SIGTERM, with a pid file).
    pub shutdown: Option<&'static std::sync::atomic::AtomicBool>,
    /// Shown each interval of the test being served, as it ends (text logs only).
    pub intervals: Option<IntervalSink>,
}

/// What `serve` does with an interval of the test it serves (prints a line, as iperf3's
/// server does); the flag is true for the first interval of a test.
#[derive(Clone)]
pub struct IntervalSink(pub Arc<IntervalFn>);

/// [`IntervalSink`]'s function: an interval, and whether it is its test's first.
pub type IntervalFn = dyn Fn(&wirerate_core::result::Interval, bool) + Send + Sync;

impl std::fmt::Debug for IntervalSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IntervalSink")
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            idle: Duration::from_secs(10),
            handshake: Duration::from_secs(2),
            startups: Default::default(),
            max_pending_per_source: 8,
            caps: Caps::default(),
            policy: Arc::new(Policy::default()),
            quiet: false,
            log_format: LogFormat::Text,
            reload: None,
            tls: None,
            users: None,
            name: format!("wirerate {}", env!("CARGO_PKG_VERSION")),
            on_test_end: None,
            agent: Default::default(),
            threads: None,
            shutdown: None,
            intervals: None,
        }
    }
}

pub(crate) struct Active {
    pub(crate) token: Token,
    pub(crate) tx: Sender<(DataHello, TcpStream)>,
    pub(crate) free_at: Instant,
    /// Set while an iperf3 client holds the slot: where its data streams go.
    pub(crate) iperf3: Option<crate::iperf3::Route>,
    /// Set while a CRR test runs: its per-transaction connections are served at once.
    pub(crate) crr: Option<Arc<CrrRoute>>,
    /// The running test's client: its data streams (and CRR connections) arrive in bursts
    /// from this address and are not held to the per-address pending limit.
    pub(crate) peer_ip: Option<IpAddr>,
    /// The TOS of the answers to latency probes beside the running test (its spec's
    /// `rpm_server`); None: unmarked.
    pub(crate) probe_tos: Option<u8>,
}

/// The listener's accept queue (the kernel caps it at net.core.somaxconn).
const ACCEPT_BACKLOG: i32 = 4096;

pub(crate) struct Shared {
    pub(crate) cfg: ServerConfig,
    active: Mutex<Option<Active>>,
    pub(crate) pending: AtomicUsize,
    /// Pending connections by source (an IPv6 /64 is one: `limits::source_of`).
    pub(crate) pending_by_ip: Mutex<HashMap<IpAddr, usize>>,
    pub(crate) log_limit: crate::logline::RateLimit,
    /// New connections that have sent nothing yet.
    pub(crate) waiting: crate::waiting::WaitingRoom,
    /// Connections still pending at their handshake deadline, by source.
    pub(crate) late: crate::strikes::Strikes,
    /// What `serve --metrics` reports: every recorded decision is counted.
    pub(crate) stats: crate::stats::Counters,
    /// The test whose intervals the sink was last given (its token).
    shown_test: Mutex<Option<Token>>,
}

impl Shared {
    /// A line that is not about a decision (an accept failure and the like).
    pub(crate) fn log(&self, msg: std::fmt::Arguments<'_>) {
        let ev = Event::new(Kind::Notice, None).reason(msg.to_string());
        self.record(&ev, Some(msg));
    }

    /// An interval of the test being served, to the sink (text logs only).
    pub(crate) fn interval(&self, iv: &wirerate_core::result::Interval) {
        if let (false, LogFormat::Text, Some(sink)) =
            (self.cfg.quiet, self.cfg.log_format, &self.cfg.intervals)
        {
            let test = self.active().as_ref().map(|a| a.token);
            let mut shown = self.shown_test.lock().unwrap_or_else(|p| p.into_inner());
            let first = *shown != test;
            *shown = test;
            (sink.0)(iv, first);
        }
    }

    /// A decision: the event as JSON, or the sentence (if any) as text.
    pub(crate) fn record(&self, ev: &Event, text: Option<std::fmt::Arguments<'_>>) {
        self.stats.count(ev);
        if self.cfg.quiet {
            return;
        }
        match (self.cfg.log_format, text) {
            // a log line may quote a peer's words: no control character reaches the terminal
            // (the JSON keeps its meaning)
            (LogFormat::Json, _) => eprintln!("{}", safe_lines(&ev.to_json())),
            (LogFormat::Text, Some(msg)) => eprintln!("wirerate serve: {}", safe(&msg.to_string())),
            (LogFormat::Text, None) => {}
        }
    }

    /// Logs a rejection: at most a few lines a second per source, then a count of the rest.
    pub(crate) fn log_rejected(
        &self,
        from: Option<IpAddr>,
        ev: Event,
        msg: std::fmt::Arguments<'_>,
    ) {
        if self.cfg.quiet {
            return self.stats.count(&ev);
        }
        let Some(suppressed) = self.log_limit.admit(from, Instant::now()) else {
            // not logged, but counted all the same
            return self.stats.count(&ev);
        };
        if suppressed > 0 {
            self.log(format_args!(
                "suppressed {suppressed} line(s) about rejected connections"
            ));
        }
        self.record(&ev, Some(msg));
    }

    pub(crate) fn test_ended(&self, ok: bool) {
        if let Some(tx) = &self.cfg.on_test_end {
            let _ = tx.send(ok);
        }
    }

    pub(crate) fn active(&self) -> MutexGuard<'_, Option<Active>> {
        // A panicking holder cannot leave the slot inconsistent: it is a plain Option.
        self.active.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The test slot, held by the one session running: dropping it (when the session ends, on
/// any error, or while a panic unwinds) frees the slot and tells `serve -1`, so no path
/// leaves the server busy.
pub(crate) struct SlotGuard<'a> {
    shared: &'a Shared,
    completed: bool,
}

impl<'a> SlotGuard<'a> {
    /// Takes charge of a slot the caller has just filled.
    pub(crate) fn new(shared: &'a Shared) -> SlotGuard<'a> {
        SlotGuard {
            shared,
            completed: false,
        }
    }

    /// The test completed; without this, its end is reported as failed.
    pub(crate) fn completed(&mut self) {
        self.completed = true;
    }
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        *self.shared.active() = None;
        wirerate_engine::net::trim_freed_memory();
        self.shared.test_ended(self.completed);
    }
}

pub struct Server {
    listener: TcpListener,
    /// UDP latency probes on the listener's port; None where it could not be bound (the
    /// server then answers only TCP probes).
    udp_probe: Option<std::net::UdpSocket>,
    shared: Arc<Shared>,
}

/// Answers UDP latency probes of the running test's client until the shutdown flag is set
/// (or forever, as the server).
fn serve_udp_probes(sock: std::net::UdpSocket, shared: &Shared) {
    wirerate_engine::udp_probe::serve(
        sock,
        || {
            shared
                .cfg
                .shutdown
                .is_some_and(|f| f.load(Ordering::SeqCst))
        },
        || {
            shared
                .active()
                .as_ref()
                .map(|a| (a.peer_ip, a.token, a.probe_tos))
        },
    );
}

impl Server {
    pub fn bind(addr: SocketAddr, cfg: ServerConfig) -> Result<Server, EngineError> {
        let listener = TcpListener::bind(addr).map_err(|source| EngineError::Listen {
            addr: addr.to_string(),
            source,
        })?;
        // a test's thousands of data streams connect faster than they are accepted: a deep
        // accept queue keeps their SYNs from being dropped (and retried a second later)
        let _ = SockRef::from(&listener).listen(ACCEPT_BACKLOG);
        wirerate_engine::net::return_freed_memory_promptly();
        let udp_probe = listener
            .local_addr()
            .and_then(wirerate_engine::udp_probe::bind_server)
            .ok();
        Ok(Server {
            listener,
            udp_probe,
            shared: Arc::new(Shared {
                cfg,
                active: Mutex::new(None),
                pending: AtomicUsize::new(0),
                pending_by_ip: Mutex::new(HashMap::new()),
                log_limit: crate::logline::RateLimit::default(),
                waiting: Default::default(),
                late: Default::default(),
                stats: Default::default(),
                shown_test: Mutex::new(None),
            }),
        })
    }

    /// The server's counters and gauges, for a metrics listener.
    pub fn stats(&self) -> crate::stats::ServerStats {
        crate::stats::ServerStats(self.shared.clone())
    }

    /// The flag that ends [`Server::serve`], if the configuration has one.
    pub fn shutdown_flag(&self) -> Option<&'static std::sync::atomic::AtomicBool> {
        self.shared.cfg.shutdown
    }

    pub fn local_addr(&self) -> Result<SocketAddr, EngineError> {
        self.listener
            .local_addr()
            .map_err(EngineError::io("reading the listening address"))
    }

    /// Accepts connections until the process ends, or the shutdown flag is set.
    pub fn serve(mut self) {
        if let Some(sock) = self.udp_probe.take() {
            let shared = self.shared.clone();
            let _ = std::thread::Builder::new()
                .name("wr-udp-probe".into())
                .spawn(move || serve_udp_probes(sock, &shared));
        }
        let cfg = &self.shared.cfg;
        let asked_to_stop = || cfg.shutdown.is_some_and(|f| f.load(Ordering::SeqCst));
        loop {
            if asked_to_stop() {
                return;
            }
            // before any wait: waking from one is part of what a connection costs
            let mark = ThreadTimes::cpu_now();
            if cfg.reload.is_some() || cfg.shutdown.is_some() {
                // wake now and then so a reload is done (and logged) soon after SIGHUP, and a
                // shutdown soon after its signal
                let ready =
                    wirerate_engine::net::wait_readable(&self.listener, Duration::from_millis(250));
                // before the new connection is heard, so it meets the reloaded rules
                self.reload_if_asked();
                if !ready {
                    continue;
                }
            }
            match self.listener.accept() {
                Ok((sock, _)) => {
                    // what accepting and routing a CRR test's connection cost this thread
                    // is the test's (the transaction itself may be served right here)
                    if let Some(route) = self.dispatch(sock) {
                        route.charge(ThreadTimes::cpu_now().since(mark));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // out of descriptors and the like: wait a moment instead of spinning
                    self.shared.log(format_args!("accept failed: {e}"));
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }

    /// Serves on a background thread.
    pub fn spawn(self) -> Result<JoinHandle<()>, EngineError> {
        std::thread::Builder::new()
            .name("wr-server".into())
            .spawn(move || self.serve())
            .map_err(EngineError::io("starting the server thread"))
    }

    /// SIGHUP: the limits file is read again; a file that fails to parse keeps the old
    /// rules. Running tests keep what they were admitted with.
    fn reload_if_asked(&self) {
        if let Some(r) = &self.shared.cfg.reload {
            for ev in r.reload_now(&self.shared.cfg.policy) {
                self.shared.record(&ev.0, Some(format_args!("{}", ev.1)));
            }
        }
    }

    /// Routes or serves a new connection; returns the CRR test it belonged to, if any.
    fn dispatch(&self, sock: TcpStream) -> Option<Arc<CrrRoute>> {
        let shared = self.shared.clone();
        let ip = sock.peer_addr().ok().map(|a| a.ip());
        let pending = match shared.claim_pending(ip) {
            Ok(p) => p,
            Err(reason) => {
                let who = peer(&sock);
                let ev = Event::new(Kind::Connection, Some(who.clone()))
                    .decided(Decision::Refused, Some(reason.into()));
                shared.log_rejected(ip, ev, format_args!("refused {who}: {reason}"));
                refuse_at_once(sock, reason);
                return None;
            }
        };
        let crr = shared
            .active()
            .as_ref()
            .and_then(|a| a.crr.clone())
            .filter(|r| r.running.load(Ordering::Relaxed));
        let sock = match &crr {
            Some(route) => match serve_crr_at_once(sock, route) {
                Some(sock) => sock,
                None => return crr,
            },
            None => sock,
        };
        // a test's data streams arrive in bursts with their hello already sent: routed here,
        // they need no thread of their own (10 000 streams would start 10 000 threads)
        let Some(sock) = route_at_once(sock, &shared, &pending) else {
            return crr;
        };
        let p = crate::waiting::Parked {
            sock,
            pending,
            accepted_at: Instant::now(),
        };
        // one that has said nothing yet waits without a thread of its own
        if crate::waiting::has_input(&p.sock) {
            start_conn_thread(p, &shared);
        } else if let Err(p) = shared.waiting.park(&shared, p) {
            start_conn_thread(p, &shared);
        }
        crr
    }
}

/// Hands a new connection that has something to say to a thread of its own.
pub(crate) fn start_conn_thread(p: crate::waiting::Parked, shared: &Arc<Shared>) {
    let moved = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("wr-conn".into())
        .stack_size(256 << 10)
        .spawn(move || handle_conn(p.sock, &moved, p.accepted_at, p.pending));
    if spawned.is_err() {
        // the thread's closure, and with it the connection, is dropped
        shared.log(format_args!("cannot start a connection thread"));
    }
}

/// Tells a connection the server will not hear it now, without waiting on it: the answer is
/// written only if the socket takes it at once, and what the client already sent is read
/// away so the close is orderly rather than a reset that could overtake the answer.
fn refuse_at_once(mut sock: TcpStream, reason: &str) {
    let _ = sock.set_nonblocking(true);
    let _ = sock.write_all(&refused_reply(reason));
    let _ = sock.shutdown(std::net::Shutdown::Write);
    let mut sink = [0u8; 4096];
    for _ in 0..16 {
        match sock.read(&mut sink) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
}

/// A wirerate preamble and a `refused` frame.
fn refused_reply(reason: &str) -> Vec<u8> {
    let mut out = Preamble::new(Channel::Control).emit().to_vec();
    out.extend(wirerate_proto::frame::encode(
        &wirerate_proto::msg::Msg::Refused {
            reason: reason.to_string(),
        },
    ));
    out
}

pub(crate) fn peer(sock: &TcpStream) -> String {
    sock.peer_addr()
        .map_or_else(|_| "unknown peer".into(), |a| a.to_string())
}

/// Routes a data stream whose whole hello has already arrived, without waiting; hands the
/// socket back when that is not so (nothing read yet, another kind of connection, a CRR
/// test running), for [`handle_conn`] on a thread of its own.
fn route_at_once(sock: TcpStream, shared: &Shared, pending: &Pending) -> Option<TcpStream> {
    use std::os::fd::AsRawFd;
    let mut pre = [0u8; DATA_HELLO_LEN];
    // SAFETY: recv writes at most pre.len() bytes into pre; MSG_PEEK leaves them queued.
    let n = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            pre.as_mut_ptr().cast(),
            pre.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if usize::try_from(n).ok() != Some(DATA_HELLO_LEN) {
        return Some(sock);
    }
    let data = Preamble::parse(&pre).is_ok_and(|p| p.channel == Channel::Data);
    let crr = shared.active().as_ref().is_some_and(|a| a.crr.is_some());
    let Some(hello) = data
        .then(|| DataHello::parse_after_preamble(&pre[PREAMBLE_LEN..]).ok())
        .flatten()
        .filter(|_| !crr)
    else {
        return Some(sock);
    };
    let mut sock = sock;
    // what was peeked is taken off the queue: the stream's data follows it
    if sock.read_exact(&mut pre).is_err() {
        return None;
    }
    let who = peer(&sock);
    if let Err(reason) = route_data(hello, sock, shared) {
        let ev = Event::new(Kind::Connection, Some(who.clone()))
            .decided(Decision::Refused, Some(format!("data stream: {reason}")));
        shared.log_rejected(
            pending.ip,
            ev,
            format_args!("rejected data stream from {who}: {reason}"),
        );
    }
    None
}

/// Reads the preamble and routes the connection. Counted as pending until routed.
/// `accepted_at` orders connections as the listener accepted them (iperf3 streams need it).
fn handle_conn(mut sock: TcpStream, shared: &Arc<Shared>, accepted_at: Instant, pending: Pending) {
    let who = peer(&sock);
    let ip = pending.ip;
    // from the accept: the time spent in the waiting room counts
    let deadline = accepted_at + shared.cfg.handshake;
    let mut pre = [0u8; DATA_HELLO_LEN];
    let routed = read_exact_by(&mut sock, &mut pre[..PREAMBLE_LEN], deadline)
        .map_err(|e| format!("no preamble: {e}"))
        .and_then(|()| Preamble::parse(&pre).map_err(|e| e.to_string()));
    if routed.is_err() && wirerate_proto::iperf3::is_cookie_prefix(&pre[..PREAMBLE_LEN]) {
        // the start of an iperf3 cookie: an iperf3 client (docs/iperf3.md)
        return crate::iperf3::handle_conn(
            sock,
            &pre[..PREAMBLE_LEN],
            accepted_at,
            shared,
            pending,
        );
    }
    match routed {
        Err(reason) => {
            drop(pending);
            let ev = Event::new(Kind::Connection, Some(who.clone()))
                .decided(Decision::Refused, Some(reason.clone()));
            shared.log_rejected(ip, ev, format_args!("rejected {who}: {reason}"));
            // a wirerate peer with the wrong version learns why; others see a short answer
            if pre.starts_with(&wirerate_proto::frame::MAGIC) {
                refuse_at_once(sock, &reason);
            }
        }
        Ok(p) if p.channel == Channel::Data => {
            let r = read_exact_by(&mut sock, &mut pre[PREAMBLE_LEN..], deadline)
                .map_err(|e| format!("short data hello: {e}"))
                .and_then(|()| {
                    DataHello::parse_after_preamble(&pre[PREAMBLE_LEN..]).map_err(|e| e.to_string())
                })
                .and_then(|hello| route_data(hello, sock, shared));
            drop(pending);
            if let Err(reason) = r {
                let ev = Event::new(Kind::Connection, Some(who.clone()))
                    .decided(Decision::Refused, Some(format!("data stream: {reason}")));
                shared.log_rejected(
                    ip,
                    ev,
                    format_args!("rejected data stream from {who}: {reason}"),
                );
            }
        }
        Ok(p) if p.channel == Channel::Agent => crate::agent::serve(sock, shared, &who, pending),
        Ok(p) if p.channel == Channel::TlsControl => match start_tls(sock, shared, deadline) {
            Ok((ctl, Channel::Agent)) => crate::agent::serve_tls(ctl, shared, &who, pending),
            Ok((ctl, _)) => control_conn(ctl, shared, &who, pending),
            Err(reason) => {
                let ev = Event::new(Kind::Connection, Some(who.clone()))
                    .decided(Decision::Refused, Some(reason.clone()));
                shared.log_rejected(ip, ev, format_args!("rejected {who}: {reason}"));
            }
        },
        Ok(_) if shared.cfg.tls.is_some() => {
            drop(pending);
            let reason = "this server requires TLS on the control connection (run --tls)";
            let ev = Event::new(Kind::Connection, Some(who.clone()))
                .decided(Decision::Refused, Some(reason.into()));
            shared.log_rejected(ip, ev, format_args!("refused {who}: {reason}"));
            refuse_at_once(sock, reason);
        }
        Ok(_) => control_conn(Control::new(sock), shared, &who, pending),
    }
}

/// The TLS handshake of a control (or agent) connection, and the preamble inside it.
fn start_tls(
    mut sock: TcpStream,
    shared: &Shared,
    deadline: Instant,
) -> Result<(Control, Channel), String> {
    let Some(tls) = &shared.cfg.tls else {
        let reason = "this server does not offer TLS";
        refuse_at_once(sock, reason);
        return Err(reason.into());
    };
    let _ = sock.set_write_timeout(Some(shared.cfg.handshake));
    sock.write_all(&Preamble::new(Channel::TlsControl).emit())
        .map_err(|e| format!("TLS: {e}"))?;
    let mut conn =
        wirerate_control::tls::accept(&mut sock, tls, deadline).map_err(|e| e.to_string())?;
    let mut pre = [0u8; PREAMBLE_LEN];
    conn.read_exact_by(&mut sock, &mut pre, deadline)
        .map_err(|e| format!("no preamble inside TLS: {e}"))?;
    match Preamble::parse(&pre) {
        Ok(p) if matches!(p.channel, Channel::Control | Channel::Agent) => {
            Ok((Control::with_tls(sock, conn), p.channel))
        }
        Ok(_) => Err("inside TLS, a preamble that is not for control or an agent".into()),
        Err(e) => Err(format!("inside TLS: {e}")),
    }
}

/// Hands a data stream to the session its token names. It must come from the address of
/// that session's control connection (as UDP streams must): a token seen on the path does
/// not let another host join a test.
fn route_data(hello: DataHello, sock: TcpStream, shared: &Shared) -> Result<(), String> {
    let (tx, crr, client, probe_tos) = match &*shared.active() {
        Some(a) if token_eq(&a.token, &hello.token) => {
            (a.tx.clone(), a.crr.clone(), a.peer_ip, a.probe_tos)
        }
        _ => return Err("wrong or stale session token".into()),
    };
    let from = sock.peer_addr().ok().map(|a| a.ip().to_canonical());
    if client.is_some_and(|c| Some(c.to_canonical()) != from) {
        return Err("the session's token from another address than its client's".into());
    }
    if hello.stream_id == wirerate_proto::data::PROBE_STREAM_ID {
        return wirerate_engine::rpm_probe::serve_detached(sock, shared.cfg.idle, probe_tos);
    }
    if let Some(route) = crr.filter(|r| r.running.load(Ordering::Relaxed)) {
        serve_crr(sock, &route, &hello, shared.cfg.idle);
        return Ok(());
    }
    tx.send((hello, sock))
        .map_err(|_| "the session has ended".to_string())
}

/// A control connection: the login first, if the server has users (while still counted as
/// pending), then the test. A login whose client has its challenge and has not answered
/// waits without a thread (`crate::login::hold`).
fn control_conn(mut ctl: Control, shared: &Arc<Shared>, who: &str, pending: Pending) {
    use crate::login::Begun;
    match crate::login::begin(&mut ctl, shared, who, pending.ip, false, true) {
        Begun::Ready(pre) => after_login(ctl, shared, who, pending, pre),
        Begun::Stalled(state) => {
            let held = crate::login::Held::new(ctl, state, pending, who);
            crate::login::hold(held, shared);
        }
        Begun::Refused => {}
    }
}

/// A control connection once its client has logged in (or needed not): its spec, then the
/// test.
pub(crate) fn after_login(
    mut ctl: Control,
    shared: &Shared,
    who: &str,
    pending: Pending,
    mut pre: crate::login::Prepared,
) {
    let early = crate::login::await_spec(&mut ctl, &mut pre, shared, who, pending.ip);
    drop(pending);
    if let Some(early) = early {
        control(ctl, shared, who, pre, early);
    }
}

/// Claims the test slot (or answers busy) and runs the session; `early`: the events that
/// came with the spec, the spec among them.
fn control(
    mut ctl: Control,
    shared: &Shared,
    who: &str,
    mut pre: crate::login::Prepared,
    early: Vec<ServerEvent>,
) {
    let token = pre.token;
    let (tx, rx) = mpsc::channel();
    {
        let mut slot = shared.active();
        if let Some(a) = slot.as_ref() {
            let retry = a
                .free_at
                .saturating_duration_since(Instant::now())
                .as_secs_f64()
                .ceil()
                .max(1.0);
            // the preamble and welcome (and a login's answers) have gone
            let _ = ctl.flush(|| pre.sess.poll_transmit(), Duration::from_secs(1));
            let busy = wirerate_proto::msg::Msg::Busy {
                retry_after_s: retry,
            };
            let _ = ctl.write_all(
                &wirerate_proto::frame::encode(&busy),
                Duration::from_secs(1),
            );
            drop(slot);
            let mut ev = Event::new(Kind::Connection, Some(who.into()))
                .decided(Decision::Busy, Some(format!("retry in {retry:.0} s")));
            ev.user = pre.user.clone();
            shared.record(
                &ev,
                Some(format_args!("busy: told {who} to retry in {retry:.0} s")),
            );
            return;
        }
        *slot = Some(Active {
            token,
            tx,
            free_at: Instant::now() + shared.cfg.idle,
            iperf3: None,
            crr: None,
            peer_ip: ctl.sock.peer_addr().ok().map(|a| a.ip()),
            probe_tos: None,
        });
    }
    let mut ev = Event::new(Kind::Connection, Some(who.into())).decided(Decision::Accepted, None);
    ev.user = pre.user.clone();
    shared.record(&ev, None);
    let mut slot = SlotGuard::new(shared);
    let mut note = TestNote::default();
    let outcome = run_session(ctl, pre, early, rx, shared, &mut note);
    if outcome.is_ok() {
        slot.completed();
    }
    let ev = note.event(who, outcome.as_ref().err().map(EngineError::full));
    let text = |msg: std::fmt::Arguments<'_>| shared.record(&ev, Some(msg));
    match outcome {
        Ok((spec, goodput)) => text(format_args!(
            "served {who}: {} {}, {}, goodput {}",
            match spec.protocol {
                Protocol::Tcp => "TCP",
                Protocol::Udp => "UDP",
            },
            spec.direction.words(),
            wirerate_core::text::count(u64::from(spec.parallel), "stream"),
            wirerate_core::units::format_bps(goodput)
        )),
        Err(e) => text(format_args!("ended test with {who}: {}", e.full())),
    }
    drop(slot);
}

/// When the slot should be free again, for the busy answer: the end of a timed test, a
/// count test's time bound (until its pace says sooner). The reports take a moment more,
/// which the answer's rounding up to whole seconds covers; the idle timeout is a worst case
/// a client should not be told to wait out.
fn set_free_at(shared: &Shared, until: Instant) {
    if let Some(a) = shared.active().as_mut() {
        a.free_at = until;
    }
}

fn run_bound(spec: &TestSpec, caps: &Caps) -> Duration {
    spec.send_seconds()
        .map_or(caps.max_duration, Duration::from_secs_f64)
}

struct Running {
    spec: Option<TestSpec>,
    pending: Vec<Attached>,
    side: Option<SideRun>,
    binders: Vec<Binder>,
    local_report: Option<SideReport>,
    peer_report: Option<SideReport>,
    token: Token,
    local_ip: Option<IpAddr>,
    peer_ip: Option<IpAddr>,
    idle: Duration,
    crr: Option<Arc<CrrRoute>>,
    watch: Option<Watchdog>,
    caps: Caps,
    /// The user the client logged in as.
    user: Option<String>,
    /// What the operator's rules let through; released when the test ends.
    admission: Option<(Admission, Arc<Policy>)>,
    /// What the log line about the test will say.
    note: TestNote,
    threads: Option<usize>,
    /// Stops the server's UDP senders when the client's reports stop (`-u -R`, `--bidir`).
    breaker: Option<wirerate_proto::feedback::Breaker>,
    /// The egress qdisc toward the client, read where the spec asks (an rpm phase).
    qdisc: Option<wirerate_engine::qdisc_watch::QdiscWatch>,
    /// The intervals the log shows of the flow this side sends, cut from what it wrote.
    sent: Option<SentClock>,
}

impl Running {
    fn start_side(&mut self) -> Result<(), EngineError> {
        if let Some(spec) = &self.spec {
            let max_bytes = self
                .admission
                .as_ref()
                .and_then(|(a, _)| Some((a.max_bytes?, a.rule.clone().unwrap_or_default())));
            self.watch = Some(
                Watchdog::new(spec, &self.caps, self.idle, Instant::now())
                    .with_max_bytes(max_bytes),
            );
            if let Some(r) = &self.crr {
                r.running.store(true, Ordering::Relaxed);
            }
            self.side = Some(SideRun::start(
                spec,
                std::mem::take(&mut self.pending),
                self.local_ip,
                self.idle,
                RunContext {
                    token: Some(self.token),
                    crr: self.crr.clone(),
                    threads: self.threads,
                    ..Default::default()
                },
            )?);
            // what this side sends, in the log's lines as iperf3's server shows it (the
            // lines of what it receives are the side's own intervals)
            let started = self.side.as_ref().map(SideRun::started);
            self.sent = (spec.test.is_stream() && spec.rpm_server.is_none())
                .then(|| SentClock::of(Flow::ServerToClient, spec, started?))
                .flatten();
        }
        Ok(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some((a, policy)) = self.admission.take() {
            policy.release(&a);
        }
        if let Some(side) = self.side.take() {
            side.abort();
            let _ = side.finish();
        }
    }
}

fn run_session(
    mut ctl: Control,
    pre: crate::login::Prepared,
    early: Vec<ServerEvent>,
    rx: Receiver<(DataHello, TcpStream)>,
    shared: &Shared,
    note: &mut TestNote,
) -> Result<(TestSpec, f64), EngineError> {
    #[cfg(test)]
    tests::maybe_panic(shared, tests::AT_START);
    let idle = shared.cfg.idle;
    let local_ip = ctl.sock.local_addr().ok().map(|a| a.ip());
    let peer_ip = ctl.sock.peer_addr().ok().map(|a| a.ip());
    let token = pre.token;
    let mut sess = pre.sess;
    if let Some(spec) = early.iter().find_map(|e| match e {
        ServerEvent::Spec(s) if s.server_sends_udp() => Some(s),
        _ => None,
    }) {
        wirerate_control::breaker::watch_control(&ctl.sock, spec);
    }
    let mut run = Running {
        spec: None,
        pending: Vec::new(),
        side: None,
        binders: Vec::new(),
        local_report: None,
        peer_report: None,
        token,
        local_ip,
        peer_ip,
        idle,
        crr: None,
        watch: None,
        caps: shared.cfg.caps,
        user: pre.user.clone(),
        admission: None,
        threads: shared.cfg.threads,
        breaker: None,
        qdisc: None,
        sent: None,
        note: TestNote {
            user: pre.user,
            ..Default::default()
        },
    };
    let result = drive(
        &mut ctl,
        &mut sess,
        &mut ServerRun {
            run: &mut run,
            early: early.into(),
            rx: &rx,
            shared,
        },
    );
    *note = std::mem::take(&mut run.note);
    result?;
    let spec = run
        .spec
        .take()
        .ok_or_else(|| EngineError::Setup("no spec".into()))?;
    // the figure the client will see, for the log line
    let goodput = match (&run.peer_report, &run.local_report) {
        (Some(client), Some(server)) => {
            let s = assemble(&spec, client, server, Context::default()).summary;
            note.result = Some(ResultShort {
                goodput_bps: s.goodput_bps,
                bytes: s.bytes,
                seconds: s.seconds,
            });
            s.goodput_bps
        }
        _ => 0.0,
    };
    Ok((spec, goodput))
}

/// The server's part of the control loop: check the spec against the caps and rules, bind
/// the UDP streams, attach the data streams as they arrive, watch the test's progress, and
/// send this side's report when the workers are done.
struct ServerRun<'a, 'b> {
    run: &'a mut Running,
    /// Events read before the slot was claimed (the spec), handled first.
    early: std::collections::VecDeque<ServerEvent>,
    rx: &'a Receiver<(DataHello, TcpStream)>,
    shared: &'b Shared,
}

impl Handler<ServerSession> for ServerRun<'_, '_> {
    const PEER: Peer = Peer {
        write: "writing to the client",
        read: "reading from the client",
    };

    fn idle(&self) -> Duration {
        self.run.idle
    }

    fn read_error(e: std::io::Error) -> EngineError {
        wirerate_control::breaker::dead_control(e, Self::PEER.read)
    }

    fn max_wait(&self) -> Duration {
        // UDP challenges are answered between rounds
        if self.run.binders.is_empty() {
            ROUND
        } else {
            Duration::from_millis(5)
        }
    }

    fn wake_at(&self) -> Option<Instant> {
        self.run.side.as_ref().and_then(|s| s.next_tick())
    }

    fn before_read(&mut self, sess: &mut ServerSession) -> Result<bool, EngineError> {
        if let Some(ev) = self.early.pop_front() {
            on_event(ev, sess, self.run, self.shared)?;
            return Ok(true);
        }
        let run = &mut *self.run;
        while let Ok((hello, sock)) = self.rx.try_recv() {
            attach_tcp(sess, run, hello, sock, self.shared)?;
        }
        for b in &mut run.binders {
            if let Some(ip) = run.peer_ip {
                b.poll(&run.token, ip);
            }
        }
        Ok(false)
    }

    fn on_event(&mut self, sess: &mut ServerSession, ev: ServerEvent) -> Result<(), EngineError> {
        on_event(ev, sess, self.run, self.shared)
    }

    fn after(&mut self, sess: &mut ServerSession, now: Instant) -> Result<(), EngineError> {
        let run = &mut *self.run;
        let Some(side) = run.side.as_mut() else {
            return Ok(());
        };
        #[cfg(test)]
        tests::maybe_panic(self.shared, tests::WHILE_RUNNING);
        for iv in side.poll_intervals(now) {
            self.shared.interval(&iv);
            sess.send_interval(iv);
        }
        if let Some(clock) = run.sent.as_mut() {
            let sent = side.moved(Role::Sender);
            let mut lines = clock.poll(now, sent);
            if side.is_done() {
                lines.extend(clock.close(now, sent));
                run.sent = None;
            }
            lines.iter().for_each(|iv| self.shared.interval(iv));
        }
        if let (Some(b), false) = (run.breaker.as_mut(), side.is_done()) {
            b.check(side.moved(Role::Sender), now)
                .map_err(wirerate_proto::ProtoError::from)?;
        }
        if let (Some(w), false) = (run.watch.as_mut(), side.is_done()) {
            let total = side.moved(Role::Sender) + side.moved(Role::Receiver);
            w.observe(now, total)?;
            let target = run.spec.as_ref().and_then(target_bytes);
            if let Some(end) = w.expected_end(now, target) {
                set_free_at(self.shared, end);
            }
        }
        if side.is_done() {
            if let Some(side) = run.side.take() {
                let mut report = side.finish();
                egress_qdisc(run, &mut report);
                // a stream that gave up for want of progress: the peer is stuck or gone, and
                // waiting for its report would hold the slot another idle timeout
                let mut errors = report.streams.iter().filter_map(|s| s.error.as_deref());
                if let Some(e) = errors.find(|e| e.starts_with(STALLED)) {
                    return Err(EngineError::StreamStalled(e.to_string()));
                }
                run.local_report = Some(report.clone());
                sess.local_report(report, Instant::now());
            }
        }
        Ok(())
    }

    /// The client is told the error alone; the workers stop when `Running` is dropped.
    fn abort_reason(&self, e: &EngineError) -> String {
        e.to_string()
    }
}

/// The egress qdisc toward the client over the test, into the report's evidence (the
/// warm-up's readings left out), where the spec asked for it.
fn egress_qdisc(run: &mut Running, report: &mut SideReport) {
    let warmup_s = run.spec.as_ref().map_or(0.0, |s| s.omit_s);
    if let Some(w) = run.qdisc.take() {
        let q = w.finish(warmup_s);
        report
            .evidence
            .get_or_insert_with(Default::default)
            .egress_qdisc = q;
    }
}

fn on_event(
    ev: ServerEvent,
    sess: &mut ServerSession,
    run: &mut Running,
    shared: &Shared,
) -> Result<(), EngineError> {
    match ev {
        ServerEvent::Spec(spec) => {
            run.note.spec = Some(SpecShort::of(&spec));
            // `-A N,M` naming a CPU this host lacks: refused before any stream is made
            let no_cpu = spec.server_cpu.and_then(|c| {
                let cpus = wirerate_engine::pool::cpus_instead(c)?;
                Some(format!(
                    "-A …,{c}: the server has no CPU {c}; it may run on CPUs {cpus}"
                ))
            });
            if let Some(reason) = no_cpu.map_or_else(|| shared.cfg.caps.check(&spec).err(), Some) {
                run.note.refused = Some(reason.clone());
                sess.refuse(&reason);
                return Err(EngineError::Refused(reason));
            }
            if let Some(ip) = run.peer_ip {
                let user = run.user.as_deref();
                let admitted = shared.cfg.policy.admit(ip, user, &spec, Instant::now());
                run.note.rule = shared.cfg.policy.rule_name(ip, user);
                match admitted {
                    Ok(a) => run.admission = Some((a, shared.cfg.policy.clone())),
                    Err(reason) => {
                        run.note.refused = Some(reason.clone());
                        sess.refuse(&reason);
                        return Err(EngineError::Refused(reason));
                    }
                }
            }
            set_free_at(shared, Instant::now() + run_bound(&spec, &shared.cfg.caps));
            let mut ports = Vec::new();
            if spec.protocol == Protocol::Udp {
                let ip = run
                    .local_ip
                    .ok_or_else(|| EngineError::Setup("no local address".into()))?;
                for (flow, id) in stream_order(&spec) {
                    let b = Binder::bind(ip, flow, id)?;
                    ports.push(b.port);
                    run.binders.push(b);
                }
            }
            if let Some(rr) = spec.test.rr().filter(|r| r.mode == RrMode::Crr) {
                let route = Arc::new(CrrRoute::new(run.token, rr, spec.parallel));
                if let Some(a) = shared.active().as_mut() {
                    a.crr = Some(route.clone());
                }
                run.crr = Some(route);
            }
            if let Some(asks) = spec.rpm_server {
                if let Some(a) = shared.active().as_mut() {
                    a.probe_tos = asks.probe_tos;
                }
                run.qdisc = run
                    .peer_ip
                    .filter(|_| asks.egress_qdisc)
                    .and_then(wirerate_engine::qdisc_watch::QdiscWatch::start);
            }
            // this side's data sockets carry the server's class (`server_tos`)
            let tos = spec.tos_of(Side::Server);
            run.spec = Some(TestSpec { tos, ..*spec });
            sess.accept(ports, Instant::now());
        }
        ServerEvent::UdpProof(proofs) => attach_udp(sess, run, &proofs)?,
        ServerEvent::PeerReport(r) => {
            if let Some(side) = &run.side {
                side.peer_done();
            }
            run.peer_report = Some(*r);
        }
        ServerEvent::Stop => {
            if let Some(side) = &run.side {
                side.stop_sending();
            }
        }
        ServerEvent::UdpFeedback(received) => {
            if let (Some(b), Some(side)) = (run.breaker.as_mut(), &run.side) {
                b.feedback(received, side.moved(Role::Sender), Instant::now());
            }
        }
        ServerEvent::Start | ServerEvent::Login(_) | ServerEvent::LoggedIn(_) => {}
    }
    Ok(())
}

fn attach_tcp(
    sess: &mut ServerSession,
    run: &mut Running,
    hello: DataHello,
    sock: TcpStream,
    shared: &Shared,
) -> Result<(), EngineError> {
    let Some(spec) = run.spec.as_ref() else {
        return Ok(());
    };
    if spec.protocol != Protocol::Tcp {
        shared.log(format_args!("rejected a TCP data stream for a UDP test"));
        return Ok(());
    }
    match sess.attach_stream(&hello, Instant::now()) {
        Ok(start) => {
            apply_options(&SockRef::from(&sock), spec)?;
            let pace = run.admission.as_ref().and_then(|(a, _)| a.pace_bps);
            if let (Some(bps), Role::Sender) = (pace, Side::Server.role(hello.flow)) {
                wirerate_engine::net::set_pacing(&SockRef::from(&sock), bps)?;
            }
            run.pending.push(Attached {
                flow: hello.flow,
                id: hello.stream_id,
                role: Side::Server.role(hello.flow),
                sock: DataSock::Tcp(sock),
            });
            if start == Some(ServerEvent::Start) {
                run.start_side()?;
            }
        }
        Err(e) => shared.log(format_args!("rejected a data stream: {e}")),
    }
    Ok(())
}

/// Checks every proof against the challenge its stream's binder sent, then attaches the
/// UDP streams. A wrong or missing proof ends the test.
fn attach_udp(
    sess: &mut ServerSession,
    run: &mut Running,
    proofs: &[UdpProof],
) -> Result<(), EngineError> {
    let binders = std::mem::take(&mut run.binders);
    if proofs.len() != binders.len() {
        return Err(EngineError::Setup(
            "UDP proofs do not match the streams".into(),
        ));
    }
    for b in binders {
        let peer = proofs.iter().find_map(|p| b.verify(p)).ok_or_else(|| {
            EngineError::Setup(format!("UDP stream {} failed its address check", b.id))
        })?;
        let _ = b.sock.set_nonblocking(false);
        let role = Side::Server.role(b.flow);
        let sock = match role {
            Role::Sender => {
                b.sock
                    .connect(peer)
                    .map_err(EngineError::io("connecting a UDP socket"))?;
                DataSock::Udp(b.sock, run.token, None)
            }
            Role::Receiver => DataSock::Udp(b.sock, run.token, Some(peer)),
        };
        let hello = DataHello {
            token: run.token,
            flow: b.flow,
            stream_id: b.id,
        };
        let start = sess.attach_stream(&hello, Instant::now())?;
        run.pending.push(Attached {
            flow: b.flow,
            id: b.id,
            role,
            sock,
        });
        if start == Some(ServerEvent::Start) {
            run.start_side()?;
            run.breaker = run
                .spec
                .as_ref()
                .filter(|s| s.server_sends_udp() && sess.client_gives_feedback())
                .map(|s| wirerate_proto::feedback::Breaker::new(s, Instant::now()));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "server_tests.rs"]
pub(crate) mod tests;
