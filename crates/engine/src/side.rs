//! One side of a running test: its stream threads, its CPU window, its interface counters
//! and its interval clock. Both the client and the server drive one of these.

use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use socket2::SockRef;
use wirerate_core::evidence::{interval_tcp, TcpSample};
use wirerate_core::metrics::bps;
use wirerate_core::report::{Role, SideReport, StreamReport};
use wirerate_core::result::Interval;
use wirerate_core::result::TcpInfo;
use wirerate_core::spec::{Flow, Side};
use wirerate_core::TestSpec;
use wirerate_probe::cpu::{CpuWindow, ThreadTimes};
use wirerate_probe::evidence::EvidenceWindow;
use wirerate_probe::host::host_env;
use wirerate_probe::iface::{interface_for, IfaceSnapshot};
use wirerate_probe::tcpinfo::tcp_info;

use wirerate_core::udp::UdpHostDrops;
use wirerate_probe::snmp;
use wirerate_proto::Token;

use crate::error::EngineError;
use crate::intervals::{IntervalClock, Received};
use crate::rr::{self, CrrRoute, SideMsg};
use crate::stream::{run_receiver, run_sender, Counters, Plan};
use crate::sweep;
use crate::udp::{run_udp_receiver, run_udp_sender};
use std::collections::BTreeMap;
use std::sync::mpsc::{self, Receiver, Sender};
use wirerate_core::latency::{LatencyHistogram, OpenLoopHistograms};
use wirerate_core::rr::{RrInterval, RrMode};
use wirerate_core::spec::TestKind;
use wirerate_core::sweep::{SweepPoint, SweepSide};
use wirerate_core::window;

/// The socket of a stream.
pub enum DataSock {
    Tcp(TcpStream),
    /// A UDP socket, the session token its datagrams carry, and (for a server receiver) the
    /// one address its datagrams may come from.
    Udp(UdpSocket, Token, Option<SocketAddr>),
}

impl DataSock {
    /// The TCP socket, if this is one.
    pub fn tcp(&self) -> Option<&TcpStream> {
        match self {
            DataSock::Tcp(t) => Some(t),
            DataSock::Udp(..) => None,
        }
    }
}

/// What request/response and sweep workers need besides their stream.
#[derive(Clone, Default)]
pub struct RunContext {
    /// The session token (a CRR client presents it on every connection).
    pub token: Option<Token>,
    /// The server's routing of CRR connections.
    pub crr: Option<Arc<CrrRoute>>,
    /// The client: the CPU its stream threads are pinned to (the server takes its own
    /// from the spec).
    pub cpu: Option<u32>,
    /// The client: a file its senders send instead of the pattern, or its receivers write
    /// what they receive to.
    pub file: Option<Arc<std::path::PathBuf>>,
    /// Data workers of a many-stream TCP test (`-T`); None: one per CPU.
    pub threads: Option<usize>,
}

/// Round trips the rr workers reported for one interval, merged over flows.
struct RrPending {
    end_s: f64,
    transactions: u64,
    flows: usize,
    hist: LatencyHistogram,
}

/// A stream ready to run on this side.
pub struct Attached {
    pub flow: Flow,
    pub id: u32,
    pub role: Role,
    pub sock: DataSock,
}

struct Worker {
    flow: Flow,
    id: u32,
    role: Role,
    counters: Arc<Counters>,
    handle: Option<JoinHandle<StreamReport>>,
    /// The stream's socket: to shut it down on abort, and to read TCP_INFO of a sending
    /// stream at each interval.
    sock: Option<StreamFd>,
    tcp: bool,
    /// Served by a data worker of the pool, which reports it.
    pooled: bool,
}

/// A side's hold on a stream's socket: a duplicate (a stream thread owns the socket), or a
/// share of it (a pool worker serves it; no second descriptor per stream).
enum StreamFd {
    Dup(OwnedFd),
    Shared(Arc<TcpStream>),
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

pub struct SideRun {
    spec: Arc<TestSpec>,
    start: Instant,
    workers: Vec<Worker>,
    /// The data workers of a pooled side; each returns the reports of its flows.
    pool: Vec<JoinHandle<Vec<StreamReport>>>,
    stop: Arc<AtomicBool>,
    peer_done: Arc<AtomicBool>,
    udp_before: Option<UdpHostDrops>,
    cpu: CpuWindow,
    ctl_t0: ThreadTimes,
    /// Where the CPU window starts: the test's start, or the end of the warm-up.
    cpu_from: Instant,
    iface: Option<IfaceSnapshot>,
    clock: IntervalClock,
    evidence: EvidenceWindow,
    /// TCP_INFO of each worker's socket at the last interval boundary (senders only).
    tcp_prev: Vec<Option<TcpInfo>>,
    /// The same, one boundary earlier: to fold a last, short sample into the one before.
    tcp_before_last: Vec<Option<TcpInfo>>,
    tcp_samples: Vec<TcpSample>,
    /// TCP samples already handed out by [`SideRun::new_tcp_samples`].
    samples_given: usize,
    /// What rr and sweep workers send: interval and whole-test histograms, sweep figures.
    msgs: Receiver<SideMsg>,
    rr_pending: BTreeMap<u64, RrPending>,
    /// The last rr interval made, by index: a last one too short to be a rate joins it.
    rr_made: Option<(u64, RrPending)>,
    rr_total: Option<LatencyHistogram>,
    rr_open_loop: Option<OpenLoopHistograms>,
    sweep: Option<SweepSide>,
    /// Sweep sizes handed out as progress.
    sweep_given: usize,
    /// rr: how many flows report intervals (the client's workers).
    rr_flows: usize,
    /// In-band requests on the loaded flows (`spec.inband_hz`).
    inband: Option<crate::inband::Inband>,
}

impl SideRun {
    /// Starts every stream's thread. `local_ip` names the interface whose counters are kept.
    /// A thread that cannot start fails the whole side: the threads already started are
    /// stopped and joined, and the error names the stream, so no stream is silently missing
    /// from the result.
    pub fn start(
        spec: &TestSpec,
        streams: Vec<Attached>,
        local_ip: Option<IpAddr>,
        idle: Duration,
        ctx: RunContext,
    ) -> Result<SideRun, EngineError> {
        let (msg_tx, msgs) = mpsc::channel();
        let spec = Arc::new(spec.clone());
        let ifname = local_ip.and_then(interface_for);
        let iface = ifname.as_deref().and_then(IfaceSnapshot::read);
        // before any data thread exists, so the cycle counter follows them
        let evidence = EvidenceWindow::start(ifname.as_slice());
        let cpu = CpuWindow::start();
        let ctl_t0 = ThreadTimes::now();
        let stop = Arc::new(AtomicBool::new(false));
        let peer_done = Arc::new(AtomicBool::new(false));
        let udp_before = (spec.protocol == wirerate_core::Protocol::Udp)
            .then(snmp::udp_snmp)
            .flatten();
        let start = Instant::now();
        let mut workers = Vec::new();
        let mut streams = streams;
        let mut pool = Vec::new();
        // the plan of one stream's worker, pooled or on a thread of its own
        let plan_of = |a: &Attached, counters: &Arc<Counters>, file| Plan {
            id: a.id,
            flow: a.flow,
            role: a.role,
            spec: spec.clone(),
            start,
            idle,
            counters: counters.clone(),
            stop: stop.clone(),
            peer_done: peer_done.clone(),
            file,
        };
        if pooled(&spec, &streams, &ctx) {
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
                .and_then(|a| pinned_cpu(&spec, &ctx, a.flow, a.role));
            let placement = crate::pool::placement(cpu, streams.len(), threads, on_this_host);
            let mut tcp_flows = Vec::new();
            let mut udp_flows = Vec::new();
            for a in streams {
                let counters = Arc::new(Counters::default());
                let plan = plan_of(&a, &counters, None);
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
                Ok(h) => pool = h,
                Err(e) => {
                    stop_all(&stop, &workers);
                    for h in e.started {
                        let _ = h.join();
                    }
                    let w = workers.iter().find(|w| w.id == e.stream);
                    return Err(EngineError::StreamThread {
                        stream: e.stream,
                        flow: w.map_or(Flow::ClientToServer, |w| w.flow),
                        started: e.flows_started,
                        source: e.source,
                    });
                }
            }
            streams = Vec::new();
        }
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
            let plan = plan_of(&a, &counters, ctx.file.clone());
            let sock = a.sock;
            let (tx, ctx) = (msg_tx.clone(), ctx.clone());
            let name = format!("wr-{:?}-{}", a.role, a.id).to_lowercase();
            let handle = match spawn_stream(a.id, name, move || work(plan, sock, tx, ctx)) {
                Ok(h) => Some(h),
                Err(source) => {
                    stop_all(&stop, &workers);
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
        let tcp_prev = vec![None; workers.len()];
        // rr intervals come from the workers' histograms, not from byte counts
        let byte_period = if spec.test.is_stream() {
            spec.interval_s
        } else {
            0.0
        };
        let clock = IntervalClock::new(start, byte_period, spec.omit_s);
        let rr_flows = if spec.test.rr().is_some() {
            workers.iter().filter(|w| w.role == Role::Sender).count()
        } else {
            0
        };
        let inband = spec.inband_hz.and_then(|hz| {
            let conns = workers
                .iter()
                .filter(|w| w.tcp)
                .filter_map(|w| {
                    let fd = std::os::fd::AsFd::as_fd(w.sock.as_ref()?);
                    crate::inband::conn(w.flow, w.id, w.role, fd, &w.counters)
                })
                .collect();
            let secs = spec.send_seconds().unwrap_or(0.0);
            crate::inband::Inband::start(hz, secs, conns, start)
        });
        Ok(SideRun {
            inband,
            spec,
            start,
            workers,
            pool,
            stop,
            peer_done,
            udp_before,
            cpu,
            ctl_t0,
            cpu_from: start,
            iface,
            clock,
            evidence,
            tcp_before_last: tcp_prev.clone(),
            tcp_prev,
            tcp_samples: Vec::new(),
            samples_given: 0,
            msgs,
            rr_pending: BTreeMap::new(),
            rr_made: None,
            rr_total: None,
            rr_open_loop: None,
            sweep: None,
            sweep_given: 0,
            rr_flows,
        })
    }

    /// Takes in what the rr and sweep workers sent; returns the rr intervals every flow has
    /// now reported (all of them when `all`).
    fn rr_drain(&mut self, all: bool) -> Vec<Interval> {
        while let Ok(m) = self.msgs.try_recv() {
            match m {
                SideMsg::Interval {
                    index,
                    end_s,
                    transactions,
                    hist,
                } => {
                    let p = self.rr_pending.entry(index).or_insert_with(|| RrPending {
                        end_s,
                        transactions: 0,
                        flows: 0,
                        hist: LatencyHistogram::new(),
                    });
                    p.end_s = p.end_s.max(end_s);
                    p.transactions += transactions;
                    p.flows += 1;
                    p.hist.merge(&hist);
                }
                SideMsg::Total { rtt, open_loop } => {
                    match self.rr_total.as_mut() {
                        Some(t) => t.merge(&rtt),
                        None => self.rr_total = Some(*rtt),
                    }
                    if let Some(o) = open_loop {
                        match self.rr_open_loop.as_mut() {
                            Some(t) => t.merge(&o),
                            None => self.rr_open_loop = Some(*o),
                        }
                    }
                }
                SideMsg::Sweep(s) => self.sweep = Some(s),
            }
        }
        let period = self.spec.interval_s;
        let request = self.spec.test.rr().map_or(0, |r| r.request_bytes);
        let mut out = Vec::new();
        while let Some(entry) = self.rr_pending.first_entry() {
            if !all && entry.get().flows < self.rr_flows {
                break;
            }
            let index = *entry.key();
            let p = entry.remove();
            let span = p.end_s - index as f64 * period;
            // a last, partial interval of a sliver of the period (the final response
            // arriving just after a boundary) is no rate: it joins the interval before it
            if let (true, Some((made, prev))) =
                (window::is_tail(span, period), self.rr_made.as_mut())
            {
                prev.transactions += p.transactions;
                prev.hist.merge(&p.hist);
                prev.end_s = prev.end_s.max(p.end_s);
                let iv = rr_interval(*made, prev, period, request);
                if let Some(slot) = self.clock.done.iter_mut().rev().find(|x| x.rr.is_some()) {
                    *slot = iv;
                }
                continue;
            }
            let iv = rr_interval(index, &p, period, request);
            self.clock.done.push(iv.clone());
            out.push(iv);
            self.rr_made = Some((index, p));
        }
        out
    }

    /// The sweep sizes the client's worker finished since the last call (progress).
    pub fn new_sweep_points(&mut self) -> Vec<SweepPoint> {
        if self.spec.test.sweep().is_none() {
            return Vec::new();
        }
        // a sweep has no rr flows: the drain only takes in the sweep's figures
        let _ = self.rr_drain(false);
        let Some(sw) = &self.sweep else {
            return Vec::new();
        };
        let new = sw
            .points
            .get(self.sweep_given..)
            .unwrap_or_default()
            .to_vec();
        self.sweep_given = sw.points.len();
        new
    }

    /// True once every stream thread has returned.
    pub fn is_done(&self) -> bool {
        self.workers
            .iter()
            .all(|w| w.handle.as_ref().is_none_or(|h| h.is_finished()))
            && self.pool.iter().all(JoinHandle::is_finished)
    }

    /// The next moment an interval ends, if intervals are on.
    pub fn next_tick(&self) -> Option<Instant> {
        self.clock.next
    }

    /// Interval reports due by `now`, for the flows this side receives. Also moves the CPU
    /// window's start to the end of the warm-up, so only the counted time is charged.
    pub fn poll_intervals(&mut self, now: Instant) -> Vec<Interval> {
        let omit_end = self.start + Duration::from_secs_f64(self.spec.omit_s);
        if self.spec.omit_s > 0.0 && self.cpu_from == self.start && now >= omit_end {
            self.cpu = CpuWindow::start();
            self.ctl_t0 = ThreadTimes::now();
            self.cpu_from = now;
            self.evidence.restart();
        }
        if self.rr_flows > 0 {
            return self.rr_drain(false);
        }
        let received = self.received_by_flow(|w| match w.counters.counted() {
            Some((counted, opened)) => (counted, Some(opened), None),
            None => (0, None, None),
        });
        let index = self.clock.index;
        let out = self.clock.poll(now, &received);
        if self.clock.index != index {
            let s = self.clock.schedule;
            self.sample_tcp(s.start(index), s.end(index));
        }
        out
    }

    /// How many TCP samples [`SideRun::new_tcp_samples`] handed out.
    pub fn given_tcp_samples(&self) -> usize {
        self.samples_given
    }

    /// TCP samples taken since the last call: what a live report joins to its intervals.
    pub fn new_tcp_samples(&mut self) -> Vec<TcpSample> {
        let new = self.tcp_samples[self.samples_given.min(self.tcp_samples.len())..].to_vec();
        self.samples_given = self.tcp_samples.len();
        new
    }

    /// TCP_INFO of this side's sending streams over one interval, one sample per flow
    /// and, where streams report their own intervals, one per stream.
    fn sample_tcp(&mut self, start_s: f64, end_s: f64) {
        let now: Vec<Option<TcpInfo>> = self
            .workers
            .iter()
            .map(|w| match (&w.sock, w.tcp && w.role == Role::Sender) {
                (Some(fd), true) => tcp_info(fd),
                _ => None,
            })
            .collect();
        if self.spec.per_stream_intervals() {
            for (i, w) in self.workers.iter().enumerate() {
                if let Some(after) = &now[i] {
                    let before = self.tcp_prev.get(i).cloned().flatten();
                    self.tcp_samples.push(TcpSample {
                        flow: w.flow,
                        stream: Some(w.id),
                        start_s,
                        end_s,
                        tcp: interval_tcp(&[before], std::slice::from_ref(&Some(after.clone()))),
                    });
                }
            }
        }
        for &flow in self.spec.direction.flows() {
            let of_flow = |v: &[Option<TcpInfo>]| -> Vec<Option<TcpInfo>> {
                self.workers
                    .iter()
                    .zip(v)
                    .filter(|(w, _)| w.flow == flow)
                    .map(|(_, t)| t.clone())
                    .collect()
            };
            let after = of_flow(&now);
            if after.iter().all(Option::is_none) {
                continue;
            }
            self.tcp_samples.push(TcpSample {
                flow,
                stream: None,
                start_s,
                end_s,
                tcp: interval_tcp(&of_flow(&self.tcp_prev), &after),
            });
        }
        self.tcp_before_last = std::mem::replace(&mut self.tcp_prev, now);
    }

    /// The senders' last TCP sample: from the last boundary to their last write, or, where
    /// that is a tail, the sample before it grown to their last write.
    fn sample_last_tcp(&mut self, streams: &[StreamReport]) {
        let period = self.clock.period();
        let sent_end = streams
            .iter()
            .filter(|s| s.role == Role::Sender)
            .filter_map(|s| s.opened_s.map(|o| o + s.seconds))
            .fold(None, |m: Option<f64>, e| Some(m.map_or(e, |m| m.max(e))));
        let (Some(end), true) = (sent_end, period > 0.0) else {
            return;
        };
        let (schedule, index) = (self.clock.schedule, self.clock.index);
        let from = schedule.start(index);
        if index > 0 && !schedule.omitted(index - 1) && window::is_tail(end - from, period) {
            let before = schedule.start(index - 1);
            self.tcp_samples
                .retain(|t| (t.start_s - before).abs() > 1e-9);
            self.tcp_prev = std::mem::take(&mut self.tcp_before_last);
            self.sample_tcp(before, end.max(before));
        } else if end > from + 1e-3 {
            self.sample_tcp(from, end);
        }
    }

    /// What each flow's receivers took in, summed; where streams report their own
    /// intervals, each stream's count comes first, then its flow's sum. `window` gives a
    /// receiving worker's counted bytes, where its window opened and where it closed.
    fn received_by_flow(
        &self,
        window: impl Fn(&Worker) -> (u64, Option<f64>, Option<f64>),
    ) -> Vec<Received> {
        let per_stream = self.spec.per_stream_intervals();
        let mut streams: Vec<Received> = Vec::new();
        let mut out: Vec<Received> = Vec::new();
        for w in self.workers.iter().filter(|w| w.role == Role::Receiver) {
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

    /// The peer's senders are done: UDP receivers stop once their socket goes quiet.
    pub fn peer_done(&self) {
        self.peer_done.store(true, Ordering::Relaxed);
    }

    /// Bytes moved so far by this side's streams of one role (sent or received).
    pub fn moved(&self, role: Role) -> u64 {
        self.workers
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
        stop_all(&self.stop, &self.workers);
    }

    /// Joins the threads and builds this side's report, with a last partial interval.
    pub fn finish(mut self) -> SideReport {
        let mut streams = Vec::new();
        let mut threads = ThreadTimes::now().since(self.ctl_t0);
        let mut from_pool: std::collections::HashMap<(bool, u32), StreamReport> =
            std::collections::HashMap::new();
        for (n, h) in std::mem::take(&mut self.pool).into_iter().enumerate() {
            // a worker that panicked leaves its flows without reports: they are named below
            for mut r in h.join().unwrap_or_default() {
                r.worker = u32::try_from(n).ok();
                from_pool.insert((r.flow == Flow::ClientToServer, r.id), r);
            }
        }
        for w in &mut self.workers {
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
                // a stream whose thread died stays in the result, with what it moved and why
                // it has no report of its own
                Err(_) => streams.push(lost_stream(w, self.start)),
            }
        }
        let cpu = self
            .cpu
            .finish(threads, self.cpu_from.elapsed().as_secs_f64());
        let inband = self.inband.take().map(|i| i.finish()).unwrap_or_default();
        self.sample_last_tcp(&streams);
        let received = self.received_by_flow(|w| {
            streams
                .iter()
                .find(|s| s.role == Role::Receiver && s.flow == w.flow && s.id == w.id)
                .map_or((0, None, None), |s| {
                    (
                        s.counted_bytes,
                        s.opened_s,
                        s.opened_s.map(|o| o + s.seconds),
                    )
                })
        });
        self.rr_drain(true);
        let intervals = self.clock.close(&received);
        let mut host = host_env();
        let asked = (self.spec.window_bytes)
            .or(self.spec.sndbuf_bytes)
            .or(self.spec.rcvbuf_bytes);
        host.socket_buffers = asked.and_then(|w| {
            let sock = SockRef::from(self.workers.iter().find_map(|w| w.sock.as_ref())?);
            Some(crate::net::socket_buffers(&sock, w))
        });
        if let Some(before) = &self.iface {
            if let Some(after) = IfaceSnapshot::read(&before.name) {
                host.interfaces.push(after.delta(before));
            }
        }
        let udp_host = self
            .udp_before
            .zip(snmp::udp_snmp())
            .map(|(b, a)| snmp::delta(b, a));
        let evidence = self.evidence.finish();
        SideReport {
            streams,
            intervals,
            cpu: Some(cpu),
            host,
            udp_host,
            evidence: Some(evidence),
            tcp_samples: self.tcp_samples,
            rr_rtt: self.rr_total.as_ref().and_then(LatencyHistogram::stats),
            rr_open_loop: self
                .rr_open_loop
                .as_ref()
                .and_then(OpenLoopHistograms::stats),
            sweep: self.sweep.take(),
            inband,
        }
    }
}

/// The rr interval `index` of `period` seconds: its transactions over all flows and their
/// round trips, to where its last flow reported it.
fn rr_interval(index: u64, p: &RrPending, period: f64, request: u64) -> Interval {
    let start_s = index as f64 * period;
    let span = p.end_s - start_s;
    let bytes = p.transactions * request;
    Interval {
        flow: Flow::ClientToServer,
        stream: None,
        start_s,
        end_s: p.end_s,
        bytes,
        bps: bps(bytes, span),
        omitted: false,
        packets: None,
        loss_percent: None,
        jitter_ms: None,
        tcp: None,
        bottleneck: None,
        rr: Some(Box::new(RrInterval {
            transactions: p.transactions,
            tps: if span > 0.0 {
                p.transactions as f64 / span
            } else {
                0.0
            },
            rtt: p.hist.stats(),
        })),
    }
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
    if tests::FAIL_SPAWN_OF.with(|c| c.get()) == Some(id) {
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

/// Runs one stream's worker: the bulk, rr or sweep worker its test and role call for.
fn work(plan: Plan, sock: DataSock, tx: Sender<SideMsg>, ctx: RunContext) -> StreamReport {
    let spec = plan.spec.clone();
    let cpu = pinned_cpu(&spec, &ctx, plan.flow, plan.role);
    if let Some(cpu) = cpu {
        if let Err(e) = pin_thread(cpu) {
            // the stream closes unused: its peer ends at once, and the test fails saying why
            let t0 = ThreadTimes::now();
            let side = if Side::Client.role(plan.flow) == plan.role {
                "client"
            } else {
                "server"
            };
            let msg = format!("cannot pin the {side}'s stream thread to CPU {cpu}: {e}");
            return crate::stream::Tally::new(&plan).report(&plan, t0, Some(msg));
        }
    }
    match (&spec.test, plan.role, sock) {
        (TestKind::Rr(rr), Role::Sender, DataSock::Tcp(s)) => match (rr.mode, ctx.token) {
            (RrMode::Crr, Some(token)) => rr::run_crr_client(s, token, plan, tx),
            _ => rr::run_tcp_client(s, plan, tx),
        },
        (TestKind::Rr(rr), Role::Receiver, DataSock::Tcp(s)) => match (rr.mode, ctx.crr) {
            (RrMode::Crr, Some(route)) => rr::run_crr_anchor(s, route, plan),
            _ => rr::run_tcp_server(s, plan),
        },
        (TestKind::Rr(_), Role::Sender, DataSock::Udp(s, ..)) => rr::run_udp_client(s, plan, tx),
        (TestKind::Rr(_), Role::Receiver, DataSock::Udp(s, _, peer)) => {
            rr::run_udp_server(s, peer, plan)
        }
        (TestKind::Sweep(_), Role::Sender, DataSock::Tcp(s)) => sweep::run_client(s, plan, tx),
        (TestKind::Sweep(_), Role::Receiver, DataSock::Tcp(s)) => sweep::run_server(s, plan),
        (_, Role::Sender, DataSock::Tcp(s)) => run_sender(s, plan),
        (_, Role::Receiver, DataSock::Tcp(s)) => run_receiver(s, plan),
        (_, Role::Sender, DataSock::Udp(s, token, _)) => run_udp_sender(s, token, plan),
        (_, Role::Receiver, DataSock::Udp(s, token, peer)) => {
            run_udp_receiver(s, token, peer, plan)
        }
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

#[cfg(test)]
#[path = "side_tests.rs"]
pub(crate) mod tests;
