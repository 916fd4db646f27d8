//! A side's stream workers: a thread per stream, or the pool of data workers a many-stream
//! bulk test shares; their counters, their sockets (to shut on abort, to read TCP_INFO
//! from) and the reports they return. Which loop a thread runs is its test kind's choice
//! ([`crate::kind`]); this module starts, stops and joins them whatever the kind.

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use socket2::SockRef;
use wirerate_core::side_report::{Role, StreamReport};
use wirerate_core::spec::{Flow, Side};
use wirerate_core::TestSpec;
use wirerate_probe::cpu::ThreadTimes;

use super::{Attached, DataSock, RunContext};
use crate::error::EngineError;
use crate::intervals::Received;
use crate::kind::KindRun;
use crate::stream::{Counters, Plan};

pub(crate) struct Worker {
    pub flow: Flow,
    pub id: u32,
    pub role: Role,
    pub counters: Arc<Counters>,
    handle: Option<JoinHandle<StreamReport>>,
    /// The stream's socket: to shut it down on abort, and to read TCP_INFO of a sending
    /// stream at each interval.
    pub sock: Option<StreamFd>,
    pub tcp: bool,
    /// Served by a data worker of the pool, which reports it.
    pooled: bool,
}

/// A side's hold on a stream's socket: a duplicate (a stream thread owns the socket), or a
/// share of it (a pool worker serves it; no second descriptor per stream).
pub(crate) enum StreamFd {
    Dup(OwnedFd),
    Shared(Arc<std::net::TcpStream>),
}

impl AsRawFd for StreamFd {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        match self {
            StreamFd::Dup(f) => f.as_raw_fd(),
            StreamFd::Shared(s) => s.as_raw_fd(),
        }
    }
}

impl std::os::fd::AsFd for StreamFd {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            StreamFd::Dup(f) => f.as_fd(),
            StreamFd::Shared(s) => s.as_fd(),
        }
    }
}

/// Whether a side's streams run on the pool of data workers: bulk tests of more than one
/// stream, UDP or TCP, unless they send or write a file or send zero-copy (those keep a
/// thread per stream). A single stream keeps its blocking thread: the fastest path for one
/// flow.
fn pooled(spec: &TestSpec, streams: &[Attached], ctx: &RunContext) -> bool {
    spec.pooled() && ctx.file.is_none() && streams.len() > 1
}

/// Whether a data socket's peer runs on this host: its address is a loopback one or the
/// socket's own (a connection to one of this host's addresses).
fn peer_on_this_host(
    peer: std::io::Result<SocketAddr>,
    local: std::io::Result<SocketAddr>,
) -> bool {
    match (peer, local) {
        (Ok(p), Ok(l)) => {
            let peer = p.ip().to_canonical();
            peer.is_loopback() || peer == l.ip().to_canonical()
        }
        _ => false,
    }
}

/// What every worker of a side shares: its spec, its start, its flags.
struct Shared<'a> {
    spec: &'a Arc<TestSpec>,
    start: Instant,
    idle: Duration,
    stop: &'a Arc<AtomicBool>,
    peer_done: &'a Arc<AtomicBool>,
}

impl Shared<'_> {
    /// The plan of one stream's worker, pooled or on a thread of its own.
    fn plan(
        &self,
        a: &Attached,
        counters: &Arc<Counters>,
        file: Option<Arc<std::path::PathBuf>>,
    ) -> Plan {
        Plan {
            id: a.id,
            flow: a.flow,
            role: a.role,
            spec: self.spec.clone(),
            start: self.start,
            idle: self.idle,
            counters: counters.clone(),
            stop: self.stop.clone(),
            peer_done: self.peer_done.clone(),
            file,
        }
    }
}

/// The data workers of a pooled side; each returns the reports of its flows.
type PoolThreads = Vec<JoinHandle<Vec<StreamReport>>>;

/// The running workers of one side.
pub(crate) struct Workers {
    start: Instant,
    list: Vec<Worker>,
    pool: PoolThreads,
    stop: Arc<AtomicBool>,
    peer_done: Arc<AtomicBool>,
}

impl Workers {
    /// Starts every stream's worker: on the pool for a pooled side, else a thread each
    /// running the loop `kind` picks. A worker that cannot start fails the whole side: the
    /// ones already started are stopped and joined, and the error names the stream, so no
    /// stream is silently missing from the result.
    pub fn start(
        spec: &Arc<TestSpec>,
        mut streams: Vec<Attached>,
        start: Instant,
        idle: Duration,
        ctx: &RunContext,
        kind: &dyn KindRun,
    ) -> Result<Workers, EngineError> {
        let mut w = Workers {
            start,
            list: Vec::new(),
            pool: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            peer_done: Arc::new(AtomicBool::new(false)),
        };
        let shared = Shared {
            spec,
            start,
            idle,
            stop: &w.stop,
            peer_done: &w.peer_done,
        };
        if pooled(spec, &streams, ctx) {
            let (list, pool) = start_pool(&shared, std::mem::take(&mut streams), ctx)?;
            w.list = list;
            w.pool = pool;
        }
        w.list.extend(start_threads(&shared, streams, ctx, kind)?);
        Ok(w)
    }

    /// Every worker, in the order started.
    pub fn list(&self) -> &[Worker] {
        &self.list
    }

    /// The peer's senders are done: UDP receivers stop once their socket goes quiet.
    pub fn peer_done(&self) {
        self.peer_done.store(true, Ordering::Relaxed);
    }

    /// Bytes moved so far by this side's streams of one role (sent or received).
    pub fn moved(&self, role: Role) -> u64 {
        self.list
            .iter()
            .filter(|w| w.role == role)
            .map(|w| w.counters.bytes.load(Ordering::Relaxed))
            .sum()
    }

    /// Asks the senders to stop after their current write; receivers keep reading until
    /// `abort` or the end of their streams.
    pub fn stop_sending(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Stops every stream now: the test is being abandoned.
    pub fn abort(&self) {
        stop_all(&self.stop, &self.list);
    }

    /// True once every stream thread has returned.
    pub fn is_done(&self) -> bool {
        self.list
            .iter()
            .all(|w| w.handle.as_ref().is_none_or(|h| h.is_finished()))
            && self.pool.iter().all(JoinHandle::is_finished)
    }

    /// Joins every worker: the streams' reports (a stream whose worker died stays in them,
    /// with what it moved and why it has no report of its own), and `threads` (the control
    /// thread's CPU) with the CPU the workers spent added.
    pub fn join(&mut self, mut threads: ThreadTimes) -> (Vec<StreamReport>, ThreadTimes) {
        let mut streams = Vec::new();
        let mut from_pool: std::collections::HashMap<(bool, u32), StreamReport> =
            std::collections::HashMap::new();
        for (n, h) in std::mem::take(&mut self.pool).into_iter().enumerate() {
            // a worker that panicked leaves its flows without reports: they are named below
            for mut r in h.join().unwrap_or_default() {
                r.worker = u32::try_from(n).ok();
                from_pool.insert((r.flow == Flow::ClientToServer, r.id), r);
            }
        }
        for w in &mut self.list {
            if w.pooled {
                match from_pool.remove(&(w.flow == Flow::ClientToServer, w.id)) {
                    Some(r) => {
                        threads.user_s += r.user_s;
                        threads.sys_s += r.sys_s;
                        streams.push(r);
                    }
                    None => streams.push(lost_stream(w, self.start)),
                }
                continue;
            }
            let Some(h) = w.handle.take() else { continue };
            match h.join() {
                Ok(r) => {
                    threads.user_s += r.user_s;
                    threads.sys_s += r.sys_s;
                    streams.push(r);
                }
                Err(_) => streams.push(lost_stream(w, self.start)),
            }
        }
        (streams, threads)
    }

    /// What each flow's receivers took in, summed; where streams report their own
    /// intervals, each stream's count comes first, then its flow's sum. `window` gives a
    /// receiving worker's counted bytes, where its window opened and where it closed.
    pub fn received_by_flow(
        &self,
        spec: &TestSpec,
        window: impl Fn(&Worker) -> (u64, Option<f64>, Option<f64>),
    ) -> Vec<Received> {
        let per_stream = spec.per_stream_intervals();
        let mut streams: Vec<Received> = Vec::new();
        let mut out: Vec<Received> = Vec::new();
        for w in self.list.iter().filter(|w| w.role == Role::Receiver) {
            let c = &w.counters;
            let (counted, opened, end) = window(w);
            let r = Received {
                flow: w.flow,
                stream: None,
                bytes: c.bytes.load(Ordering::Relaxed),
                packets: c.packets.load(Ordering::Relaxed),
                span: c.span.load(Ordering::Relaxed),
                jitter_ns: c.jitter_ns.load(Ordering::Relaxed).saturating_sub(1),
                jittered: u32::from(c.jitter_ns.load(Ordering::Relaxed) > 0),
                counted,
                opened,
                end,
            };
            if per_stream {
                streams.push(Received {
                    stream: Some(w.id),
                    ..r
                });
            }
            match out.iter_mut().find(|x| x.flow == w.flow) {
                Some(x) => x.add(&r),
                None => out.push(r),
            }
        }
        if per_stream {
            // each flow's streams by id, then its sum: the order the lines are printed in
            streams.sort_by_key(|s| s.stream);
            let mut ordered = Vec::with_capacity(streams.len() + out.len());
            for sum in out {
                ordered.extend(streams.iter().filter(|s| s.flow == sum.flow).copied());
                ordered.push(sum);
            }
            return ordered;
        }
        out
    }
}

/// Deals the streams of a pooled side to the data workers; returns their workers and the
/// pool's threads.
fn start_pool(
    shared: &Shared<'_>,
    mut streams: Vec<Attached>,
    ctx: &RunContext,
) -> Result<(Vec<Worker>, PoolThreads), EngineError> {
    let spec = shared.spec;
    // both sides deal flows to workers in the same order (see pool.rs)
    streams.sort_by_key(|a| (a.flow != Flow::ClientToServer, a.id));
    let on_this_host = streams.first().is_some_and(|a| match &a.sock {
        DataSock::Tcp(t) => peer_on_this_host(t.peer_addr(), t.local_addr()),
        DataSock::Udp(u, _, peer) => {
            peer_on_this_host(peer.ok_or(()).or_else(|()| u.peer_addr()), u.local_addr())
        }
    });
    let threads = ctx
        .threads
        .unwrap_or_else(|| crate::pool::default_threads(streams.len(), on_this_host));
    let cpu = streams
        .first()
        .and_then(|a| pinned_cpu(spec, ctx, a.flow, a.role));
    let placement = crate::pool::placement(cpu, streams.len(), threads, on_this_host);
    let mut workers = Vec::new();
    let mut tcp_flows = Vec::new();
    let mut udp_flows = Vec::new();
    for a in streams {
        let counters = Arc::new(Counters::default());
        let plan = shared.plan(&a, &counters, None);
        let (sock, tcp) = match a.sock {
            DataSock::Tcp(t) => {
                let sock = Arc::new(t);
                tcp_flows.push(crate::pool::PoolFlow {
                    plan,
                    sock: sock.clone(),
                });
                (Some(StreamFd::Shared(sock)), true)
            }
            DataSock::Udp(u, token, peer) => {
                if let Some(tos) = spec.tos {
                    // best effort, as for a stream thread's socket
                    let _ = crate::net::set_tos(&SockRef::from(&u), tos);
                }
                // the worker alone holds the socket: a stop reaches it by its flag
                udp_flows.push(crate::udp_pool::UdpPoolFlow {
                    plan,
                    sock: u,
                    token,
                    peer,
                });
                (None, false)
            }
        };
        workers.push(Worker {
            flow: a.flow,
            id: a.id,
            role: a.role,
            counters,
            handle: None,
            sock,
            tcp,
            pooled: true,
        });
    }
    let started = if udp_flows.is_empty() {
        crate::pool::start(tcp_flows, threads, &placement)
    } else {
        crate::udp_pool::start(udp_flows, threads, &placement)
    };
    match started {
        Ok(pool) => Ok((workers, pool)),
        Err(e) => {
            stop_all(shared.stop, &workers);
            for h in e.started {
                let _ = h.join();
            }
            let w = workers.iter().find(|w| w.id == e.stream);
            Err(EngineError::StreamThread {
                stream: e.stream,
                flow: w.map_or(Flow::ClientToServer, |w| w.flow),
                started: e.flows_started,
                source: e.source,
            })
        }
    }
}

/// Starts a thread per stream, each running the loop `kind` picks for it.
fn start_threads(
    shared: &Shared<'_>,
    streams: Vec<Attached>,
    ctx: &RunContext,
    kind: &dyn KindRun,
) -> Result<Vec<Worker>, EngineError> {
    let spec = shared.spec;
    let mut workers: Vec<Worker> = Vec::new();
    for a in streams {
        let dup = match &a.sock {
            DataSock::Tcp(t) => t.try_clone().map(OwnedFd::from),
            DataSock::Udp(u, ..) => u.try_clone().map(OwnedFd::from),
        };
        let tcp = matches!(a.sock, DataSock::Tcp(_));
        if let (Some(tos), DataSock::Udp(u, ..)) = (spec.tos, &a.sock) {
            // TCP sockets had it before they connected; best effort, as the kernel
            // may refuse a class (a refusal shows in the packets, not here)
            let _ = crate::net::set_tos(&SockRef::from(u), tos);
        }
        let counters = Arc::new(Counters::default());
        let plan = shared.plan(&a, &counters, ctx.file.clone());
        let cpu = pinned_cpu(spec, ctx, a.flow, a.role);
        let body = kind.worker(a.role, a.sock, ctx);
        let name = format!("wr-{:?}-{}", a.role, a.id).to_lowercase();
        // pinned first, on the stream's own thread
        let run = move || match cpu.map(|c| (c, pin_thread(c))) {
            Some((cpu, Err(e))) => unpinned(&plan, cpu, &e),
            _ => body(plan),
        };
        let handle = match spawn_stream(a.id, name, run) {
            Ok(h) => Some(h),
            Err(source) => {
                stop_all(shared.stop, &workers);
                for w in &mut workers {
                    if let Some(h) = w.handle.take() {
                        let _ = h.join();
                    }
                }
                return Err(EngineError::StreamThread {
                    stream: a.id,
                    flow: a.flow,
                    started: workers.len(),
                    source,
                });
            }
        };
        workers.push(Worker {
            flow: a.flow,
            id: a.id,
            role: a.role,
            counters,
            handle,
            sock: dup.ok().map(StreamFd::Dup),
            tcp,
            pooled: false,
        });
    }
    Ok(workers)
}

/// The report of a stream whose thread could not be pinned to its CPU: the stream closes
/// unused, its peer ends at once, and the test fails saying why.
fn unpinned(plan: &Plan, cpu: u32, e: &std::io::Error) -> StreamReport {
    let t0 = ThreadTimes::now();
    let side = if Side::Client.role(plan.flow) == plan.role {
        "client"
    } else {
        "server"
    };
    let msg = format!("cannot pin the {side}'s stream thread to CPU {cpu}: {e}");
    crate::stream::Tally::new(plan).report(plan, t0, Some(msg))
}

/// Tells every worker to stop and shuts their sockets, which wakes blocked readers and
/// writers.
fn stop_all(stop: &AtomicBool, workers: &[Worker]) {
    stop.store(true, Ordering::Relaxed);
    for s in workers.iter().filter_map(|w| w.sock.as_ref()) {
        // SAFETY: shutdown on a descriptor we own.
        unsafe {
            libc::shutdown(s.as_raw_fd(), libc::SHUT_RDWR);
        }
    }
}

/// Starts one stream's thread.
fn spawn_stream(
    id: u32,
    name: String,
    f: impl FnOnce() -> StreamReport + Send + 'static,
) -> std::io::Result<JoinHandle<StreamReport>> {
    #[cfg(test)]
    if super::tests::FAIL_SPAWN_OF.with(|c| c.get()) == Some(id) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::OutOfMemory,
            "injected thread start failure",
        ));
    }
    let _ = id;
    std::thread::Builder::new().name(name).spawn(f)
}

/// The report of a stream whose thread panicked: the bytes its counters saw, and the error.
fn lost_stream(w: &Worker, start: Instant) -> StreamReport {
    let bytes = w.counters.bytes.load(Ordering::Relaxed);
    StreamReport {
        id: w.id,
        flow: w.flow,
        role: w.role,
        bytes,
        counted_bytes: bytes,
        calls: w.counters.calls.load(Ordering::Relaxed),
        counted_calls: 0,
        opened_s: None,
        seconds: start.elapsed().as_secs_f64(),
        user_s: 0.0,
        sys_s: 0.0,
        tcp: None,
        udp: None,
        error: Some(format!(
            "the {} thread of stream {} ended in a panic; its figures are incomplete",
            match w.role {
                Role::Sender => "sending",
                Role::Receiver => "receiving",
            },
            w.id
        )),
        sched: None,
        worker: None,
        rr: None,
    }
}

/// The CPU a stream's worker is pinned to: the client's own (`-A`), or the one the spec asks
/// of the server.
fn pinned_cpu(spec: &TestSpec, ctx: &RunContext, flow: Flow, role: Role) -> Option<u32> {
    if Side::Client.role(flow) == role {
        ctx.cpu
    } else {
        spec.server_cpu
    }
}

/// Pins the calling thread to one CPU (`-A`).
pub(crate) fn pin_thread(cpu: u32) -> std::io::Result<()> {
    let cpu = cpu as usize;
    if cpu >= rustix::thread::CpuSet::MAX_CPU {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    }
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).map_err(std::io::Error::from)
}
