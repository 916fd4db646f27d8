//! Data workers: a fixed pool of threads per side, each running one epoll loop over many
//! TCP bulk flows with non-blocking sockets. A worker owns its buffers (one send pattern,
//! one receive buffer), so memory does not grow with the number of flows beyond the
//! sockets' own state. Each flow keeps what a stream thread keeps: its counters, its
//! deadline, idle rule and report.
//!
//! Flows are dealt to workers in (flow, stream id) order, round robin, on both sides. Where
//! the workers run is [`placement`]'s rule: free, except on `-A` and for busy workers of a
//! peer on this host.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::epoll;
use socket2::SockRef;
use wirerate_core::side_report::{Role, StreamReport};
use wirerate_core::spec::{End, RecvMode};
use wirerate_probe::cpu::ThreadTimes;
use wirerate_probe::tcpinfo::tcp_info;

use crate::stream::{describe, held, Batching, Deadline, PageBuf, Plan, Tally};

/// The most data workers one side may run (`-T`).
pub const MAX_THREADS: usize = wirerate_core::spec::limits::MAX_WORKERS as usize;

/// The default number of workers for `flows` flows: one per CPU this process may run on, or
/// one per CPU of half of them when the peer runs on this host too (loopback, or an address
/// of this host) and the workers would often sleep. Fewer flows than that get a worker each;
/// so do a few flows that would not divide evenly over the workers (3 flows on 2 workers
/// would move 1:1:2), up to four per CPU.
///
/// Measured over loopback on a 2-core host: `-P 2` on one worker per side moved 0.95× one
/// stream, on two per side 0.70×, since four threads on two cores sleep and are woken twice
/// as often per byte. A worker of many flows rarely sleeps, and then every CPU per side is
/// better: `-P 1000` moved 54–68 Gbit/s on two workers per side, 45 on one.
pub fn default_threads(flows: usize, peer_on_this_host: bool) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    threads_for(flows, cpus, peer_on_this_host)
}

fn threads_for(flows: usize, cpus: usize, peer_on_this_host: bool) -> usize {
    let half = (cpus / 2).max(1);
    let n = if peer_on_this_host && flows <= BUSY_FLOWS * half {
        half
    } else {
        cpus
    }
    .clamp(1, MAX_THREADS);
    let flows = flows.max(1);
    if flows <= n || (flows <= 4 * n && !flows.is_multiple_of(n)) {
        flows.min(MAX_THREADS)
    } else {
        n
    }
}

/// Flows per worker above which a worker rarely sleeps (see [`default_threads`]).
const BUSY_FLOWS: usize = 64;

/// Where a side's data workers run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Wherever the scheduler puts them.
    Free,
    /// All on one CPU (`-A`).
    On(u32),
    /// Worker `w` on the `w`-th CPU of the list, round robin.
    Spread(Vec<u32>),
}

impl Placement {
    /// The CPU worker `w` is pinned to, if any.
    pub fn cpu(&self, w: usize) -> Option<u32> {
        match self {
            Placement::Free => None,
            Placement::On(c) => Some(*c),
            Placement::Spread(cpus) => (!cpus.is_empty()).then(|| cpus[w % cpus.len()]),
        }
    }

    /// Whether a worker that cannot be pinned fails its flows: when the user asked (`-A`);
    /// a spread worker that cannot be pinned runs free.
    fn required(&self) -> bool {
        matches!(self, Placement::On(_))
    }
}

/// Where `threads` workers over `flows` flows run: on the CPU `-A` names; else, when the
/// peer runs on this host and every worker is busy (at least [`BUSY_FLOWS`] flows each),
/// worker `w` of each side on the `w`-th CPU this process may use, so that both ends of a
/// flow share a core (both sides deal flows to workers in the same order and, by the same
/// rule, choose as many workers); else free.
///
/// Measured over loopback on a 2-core host with 1000 flows on two workers per side: free
/// workers moved 42–64 Gbit/s, the scheduler moving four busy threads about two cores and
/// splitting each flow's two ends between them; spread, 73–78. A few flows per worker are better free: a worker then often
/// sleeps, and both ends of one flow on one core cap the flow at that core.
pub fn placement(
    affinity: Option<u32>,
    flows: usize,
    threads: usize,
    peer_on_this_host: bool,
) -> Placement {
    place(affinity, flows, threads, peer_on_this_host, allowed_cpus)
}

fn place(
    affinity: Option<u32>,
    flows: usize,
    threads: usize,
    peer_on_this_host: bool,
    cpus: impl FnOnce() -> Vec<u32>,
) -> Placement {
    if let Some(c) = affinity {
        return Placement::On(c);
    }
    if !peer_on_this_host || threads < 2 || flows < BUSY_FLOWS * threads {
        return Placement::Free;
    }
    let cpus = cpus();
    if cpus.len() < 2 {
        Placement::Free
    } else {
        Placement::Spread(cpus)
    }
}

/// When a stream thread of this process cannot be pinned to `cpu` (`-A`): the CPUs it may
/// run on instead, as ranges; None when it can, or when the kernel will not say.
pub fn cpus_instead(cpu: u32) -> Option<String> {
    let allowed = allowed_cpus();
    (!allowed.is_empty() && !allowed.contains(&cpu)).then(|| cpu_list(&allowed))
}

/// CPU numbers as ranges: `0-2,5,7-8`.
pub fn cpu_list(cpus: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// The CPUs this process may run on, in order; empty when the kernel will not say.
pub fn allowed_cpus() -> Vec<u32> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .filter_map(|c| u32::try_from(c).ok())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// One flow handed to the pool: its plan and its socket, shared with the side (which reads
/// its TCP_INFO at interval boundaries and shuts it down on abort).
pub struct PoolFlow {
    pub plan: Plan,
    pub sock: Arc<TcpStream>,
}

/// A worker that could not start.
pub struct StartError {
    /// The workers already started, for the caller to stop and join.
    pub started: Vec<JoinHandle<Vec<StreamReport>>>,
    /// How many flows those serve.
    pub flows_started: usize,
    /// The first stream the failed worker would have served.
    pub stream: u32,
    pub source: io::Error,
}

/// Starts `threads` workers (at most one per flow) over `flows`, each on the CPU
/// `placement` gives it. A worker that cannot start is an error naming the first stream it
/// would have served.
pub fn start(
    flows: Vec<PoolFlow>,
    threads: usize,
    placement: &Placement,
) -> Result<Vec<JoinHandle<Vec<StreamReport>>>, StartError> {
    start_workers(flows, threads, placement, |f| f.plan.id, run_worker)
}

/// Deals `flows` round robin to `threads` workers (at most one per flow), each running
/// `run` over its share; `first_id` names a share's first stream for a start error.
pub(crate) fn start_workers<T: Send + 'static>(
    flows: Vec<T>,
    threads: usize,
    placement: &Placement,
    first_id: fn(&T) -> u32,
    run: fn(Vec<T>, Option<u32>) -> Vec<StreamReport>,
) -> Result<Vec<JoinHandle<Vec<StreamReport>>>, StartError> {
    let n = threads.clamp(1, flows.len().max(1));
    let mut shares: Vec<Vec<T>> = (0..n).map(|_| Vec::new()).collect();
    for (i, f) in flows.into_iter().enumerate() {
        shares[i % n].push(f);
    }
    let mut handles = Vec::new();
    let mut flows_started = 0;
    for (w, share) in shares.into_iter().enumerate() {
        let first = share.first().map_or(0, first_id);
        let count = share.len();
        let cpu = placement.cpu(w);
        let required = placement.required();
        let spawned = spawn_worker(first, format!("wr-worker-{w}"), move || {
            if required {
                run(share, cpu)
            } else {
                if let Some(c) = cpu {
                    // best effort: an unpinned worker measures as well, only less steadily
                    let _ = crate::side::pin_thread(c);
                }
                run(share, None)
            }
        });
        match spawned {
            Ok(h) => {
                handles.push(h);
                flows_started += count;
            }
            Err(source) => {
                return Err(StartError {
                    started: handles,
                    flows_started,
                    stream: first,
                    source,
                })
            }
        }
    }
    Ok(handles)
}

fn spawn_worker(
    first: u32,
    name: String,
    f: impl FnOnce() -> Vec<StreamReport> + Send + 'static,
) -> io::Result<JoinHandle<Vec<StreamReport>>> {
    #[cfg(test)]
    if crate::side::tests::FAIL_SPAWN_OF.with(|c| c.get()) == Some(first) {
        return Err(io::Error::new(
            io::ErrorKind::OutOfMemory,
            "injected thread start failure",
        ));
    }
    let _ = first;
    std::thread::Builder::new().name(name).spawn(f)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Sending,
    /// A sender that has half-closed waits (bounded) for its peer's close, so its last
    /// TCP_INFO holds every acknowledgement.
    Closing(Instant),
    Receiving,
    Done,
}

/// One flow's state inside a worker.
struct Flow {
    plan: Plan,
    sock: Arc<TcpStream>,
    tally: Tally,
    state: State,
    remaining: u64,
    /// Progress inside the current block (only for --blocks).
    off: usize,
    /// Bytes per write.
    size: crate::net::WriteSize,
    blocks: bool,
    end_at: Option<Instant>,
    deadline: Deadline,
    last_progress: Instant,
    /// How long the flow may go without progress ([`Plan::stall_after`]).
    stall_after: Duration,
    /// A receiver of paced streams stops reading here ([`Plan::paced_receive_end`]).
    paced_end: Option<Instant>,
    error: Option<String>,
    batch: Option<Batching>,
    report: Option<StreamReport>,
}

/// What one worker shares among its flows.
struct Buffers {
    /// The send pattern, `len` bytes from a page boundary.
    send: PageBuf,
    len: usize,
    recv: Vec<u8>,
    discard: bool,
    /// Calls a ready flow makes per wake-up (see [`CALLS_PER_WAKE`]).
    calls: usize,
}

/// How long a worker sleeps at most between looks at its flows' clocks and stop flags.
pub(crate) const TICK: Duration = Duration::from_millis(20);

/// Calls a worker's flows make per wake-up, together, at most: a flow that is ready moves up
/// to this many buffers divided by the worker's flows (one at least) before the next flow's
/// turn. A worker of a few flows thus empties a socket per wake-up, as a blocking call would,
/// and sleeps (and is woken) half as often per byte as with one call per flow; a worker of
/// many keeps one call per flow per round, so that flows whose buffers autotuning grew first
/// do not take ever more of it (Jain's index 0.92 over 100 flows at 64 calls each).
pub(crate) const CALLS_PER_WAKE: usize = 64;

/// Waits up to `wait` (under a second) for ready sockets, into `events`; false when a signal
/// interrupted the wait (look again).
pub(crate) fn wait_ready(
    ep: &rustix::fd::OwnedFd,
    events: &mut Vec<epoll::Event>,
    wait: Duration,
) -> rustix::io::Result<bool> {
    let ts = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: wait.subsec_nanos().into(),
    };
    events.clear();
    match epoll::wait(ep, rustix::buffer::spare_capacity(events), Some(&ts)) {
        Ok(_) => Ok(true),
        Err(rustix::io::Errno::INTR) => Ok(false),
        Err(e) => Err(e),
    }
}

/// A data worker's CPU times: from its start, or from the end of the warm-up once that has
/// passed. At the end they are shared evenly by the worker's flows, which took turns on its
/// one thread.
pub(crate) struct WorkerTimes {
    t0: ThreadTimes,
    omit_end: Option<Instant>,
    window: Option<ThreadTimes>,
}

impl WorkerTimes {
    /// Pins the calling worker to `cpu` if one is given (`-A`), and starts its clock; the
    /// error says why it could not be pinned.
    pub fn start(plan: &Plan, cpu: Option<u32>) -> (WorkerTimes, Option<String>) {
        let t0 = ThreadTimes::now();
        let pin_error = cpu.and_then(|c| {
            crate::side::pin_thread(c)
                .err()
                .map(|e| format!("cannot pin a data worker to CPU {c}: {e}"))
        });
        let omit = plan.spec.omit_s;
        let times = WorkerTimes {
            t0,
            omit_end: (omit > 0.0).then(|| plan.start + Duration::from_secs_f64(omit)),
            window: None,
        };
        (times, pin_error)
    }

    /// The thread's times when it started.
    pub fn t0(&self) -> ThreadTimes {
        self.t0
    }

    /// Opens the counted window once the warm-up is over.
    pub fn at(&mut self, now: Instant) {
        if self.window.is_none() && self.omit_end.is_some_and(|e| now >= e) {
            self.window = Some(ThreadTimes::now());
        }
    }

    /// Gives each report its even share of the worker's CPU time.
    pub fn share(&self, reports: Vec<StreamReport>) -> Vec<StreamReport> {
        let times = ThreadTimes::now().since(self.window.unwrap_or(self.t0));
        let share = 1.0 / reports.len().max(1) as f64;
        reports
            .into_iter()
            .map(|mut r| {
                r.user_s = times.user_s * share;
                r.sys_s = times.sys_s * share;
                r.sched = None;
                r
            })
            .collect()
    }
}

fn run_worker(flows: Vec<PoolFlow>, cpu: Option<u32>) -> Vec<StreamReport> {
    let Some(first) = flows.first() else {
        return Vec::new();
    };
    let (mut clock, mut pin_error) = WorkerTimes::start(&first.plan, cpu);
    let spec = first.plan.spec.clone();
    let len = spec.len_bytes as usize;
    let mut bufs = Buffers {
        send: PageBuf::new(len),
        len,
        recv: vec![0u8; len.max(64 << 10)],
        discard: spec.recv_mode == RecvMode::Discard,
        calls: (CALLS_PER_WAKE / flows.len()).max(1),
    };
    let mut flows: Vec<Flow> = flows.into_iter().map(Flow::new).collect();
    let ep = match epoll::create(epoll::CreateFlags::CLOEXEC) {
        Ok(ep) => Some(ep),
        Err(e) => {
            pin_error.get_or_insert(format!("cannot create an epoll set: {e}"));
            None
        }
    };
    for (i, f) in flows.iter_mut().enumerate() {
        if let Some(e) = &pin_error {
            f.fail(e.clone());
            continue;
        }
        let Some(ep) = &ep else { continue };
        let interest = match f.state {
            State::Sending => epoll::EventFlags::OUT,
            _ => epoll::EventFlags::IN | epoll::EventFlags::RDHUP,
        };
        let set = f
            .sock
            .set_nonblocking(true)
            .and_then(|()| {
                epoll::add(ep, &*f.sock, epoll::EventData::new_u64(i as u64), interest)
                    .map_err(io::Error::from)
            })
            .and_then(|()| f.setup());
        if let Err(e) = set {
            f.fail(e.to_string());
        }
    }
    if let Some(ep) = &ep {
        for f in flows.iter().filter(|f| f.state == State::Done) {
            let _ = epoll::delete(ep, &*f.sock);
        }
    }
    let mut live = flows.iter().filter(|f| f.state != State::Done).count();
    let mut events: Vec<epoll::Event> = Vec::with_capacity(1024.min(flows.len().max(16)));
    let mut next_sweep = Instant::now();
    while live > 0 {
        let Some(ep) = &ep else { break };
        let now = Instant::now();
        let wait = next_sweep.saturating_duration_since(now).min(TICK);
        match wait_ready(ep, &mut events, wait) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                let msg = format!("waiting on the data sockets: {e}");
                for f in flows.iter_mut().filter(|f| f.state != State::Done) {
                    f.fail(msg.clone());
                }
                break;
            }
        }
        for ev in &events {
            let data = ev.data;
            let i = data.u64() as usize;
            let Some(f) = flows.get_mut(i) else { continue };
            let was = f.state;
            match was {
                State::Sending => f.send(&bufs),
                State::Closing(_) => f.drain_close(),
                State::Receiving => f.receive(&mut bufs),
                State::Done => {}
            }
            if f.state != was {
                f.moved(ep, i, &mut live);
            }
        }
        let now = Instant::now();
        clock.at(now);
        if now >= next_sweep {
            next_sweep = now + TICK;
            for (i, f) in flows.iter_mut().enumerate() {
                let was = f.state;
                if was == State::Done {
                    continue;
                }
                f.check(now);
                if f.state != was {
                    f.moved(ep, i, &mut live);
                }
            }
        }
    }
    let reports = flows
        .into_iter()
        .map(|mut f| f.report.take().unwrap_or_else(|| f.finish_report()))
        .collect();
    clock.share(reports)
}

impl Flow {
    fn new(p: PoolFlow) -> Flow {
        let plan = p.plan;
        let spec = plan.spec.clone();
        let (state, remaining) = match plan.role {
            Role::Sender => (
                State::Sending,
                spec.bytes_per_stream(plan.id).unwrap_or(u64::MAX),
            ),
            Role::Receiver => (State::Receiving, 0),
        };
        let end_at = spec
            .send_seconds()
            .map(|s| plan.start + Duration::from_secs_f64(s));
        Flow {
            tally: Tally::pooled(&plan),
            deadline: Deadline::new(plan.start, end_at, plan.idle),
            sock: p.sock,
            state,
            remaining,
            off: 0,
            size: crate::net::WriteSize::new(&spec),
            blocks: matches!(spec.end, End::Blocks { .. }),
            end_at,
            last_progress: Instant::now(),
            stall_after: plan.stall_after(),
            paced_end: plan.paced_receive_end(),
            error: None,
            batch: None,
            report: None,
            plan,
        }
    }

    /// What a stream thread sets before its first call: pacing, receive batching.
    fn setup(&mut self) -> io::Result<()> {
        match self.plan.role {
            Role::Sender => {
                if let Some(rate) = self.plan.spec.rate_bps {
                    if let Err(e) = crate::net::set_pacing_rate(&SockRef::from(&*self.sock), rate) {
                        self.fail(format!("cannot pace the stream (SO_MAX_PACING_RATE): {e}"));
                    }
                }
            }
            Role::Receiver => {
                let len = self.plan.spec.len_bytes.max(64 << 10);
                let len = Batching::max_for(&self.plan.spec, len);
                self.batch = Some(Batching::new(&self.sock, len));
            }
        }
        Ok(())
    }

    /// Ends the flow at once with an error.
    fn fail(&mut self, msg: String) {
        self.error.get_or_insert(msg);
        let _ = self.sock.shutdown(Shutdown::Both);
        self.done();
    }

    fn done(&mut self) {
        if self.state != State::Done {
            self.state = State::Done;
            self.report = Some(self.finish_report());
        }
    }

    fn finish_report(&mut self) -> StreamReport {
        let mut r = self
            .tally
            .report(&self.plan, ThreadTimes::default(), self.error.take());
        r.tcp = tcp_info(&*self.sock);
        if self.plan.role == Role::Receiver {
            let _ = self.sock.shutdown(Shutdown::Both);
        }
        r
    }

    /// The sender has written its last byte (or was told to stop): half-close, and wait
    /// for the peer's close unless the stream failed.
    fn close_sending(&mut self) {
        let _ = self.sock.shutdown(Shutdown::Write);
        if self.error.is_some() {
            self.done();
        } else {
            self.state = State::Closing(Instant::now() + self.plan.idle);
        }
    }

    /// Writes until the socket is full, the stream's end, or a stop.
    fn send(&mut self, b: &Buffers) {
        if self.plan.stop.load(Ordering::Relaxed) || self.remaining == 0 {
            return self.close_sending();
        }
        let mut now = Instant::now();
        for _ in 0..b.calls {
            if let Some(end) = self.end_at {
                let left = end.saturating_duration_since(now);
                if left < Duration::from_millis(1) {
                    return self.close_sending();
                }
                self.deadline.tails(&self.sock, now, left);
            }
            let max = usize::try_from(self.remaining)
                .unwrap_or(usize::MAX)
                .min(self.size.next(&self.sock));
            let off = self.off;
            let data = &b.send.get()[off..off + (b.len - off).min(max)];
            match (&*self.sock).write(data) {
                Ok(0) => return self.close_sending(),
                Ok(n) => {
                    now = Instant::now();
                    self.last_progress = now;
                    if self.tally.add(n, now, &self.plan.counters) {
                        let queued = crate::stream::unacked(&self.sock);
                        self.tally
                            .include_before_opening(queued, &self.plan.counters);
                    }
                    self.remaining -= n as u64;
                    if self.blocks {
                        self.off = (off + n) % b.len;
                    }
                    if self.remaining == 0 || self.plan.stop.load(Ordering::Relaxed) {
                        return self.close_sending();
                    }
                    if n < data.len() {
                        // the socket is full: epoll says when it has room again
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    if !self.plan.stop.load(Ordering::Relaxed) {
                        self.error = Some(describe(&e, "sending"));
                    }
                    return self.close_sending();
                }
            }
        }
    }

    /// A closing sender reads until the peer closes.
    fn drain_close(&mut self) {
        let mut scratch = [0u8; 512];
        loop {
            match (&*self.sock).read(&mut scratch) {
                Ok(0) => return self.done(),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => return self.done(),
            }
        }
    }

    /// Reads what is queued, a bounded number of times.
    fn receive(&mut self, b: &mut Buffers) {
        for _ in 0..b.calls {
            let got = if b.discard {
                crate::zerocopy::discard(&self.sock, &mut b.recv)
            } else {
                (&*self.sock).read(&mut b.recv)
            };
            match got {
                Ok(0) => return self.done(),
                Ok(n) => {
                    let now = Instant::now();
                    self.last_progress = now;
                    self.tally
                        .add_received(n, now, &self.plan.counters, || held(&self.sock));
                    if let Some(batch) = self.batch.as_mut() {
                        batch.after_read(&self.sock, n, now);
                    }
                    if n < b.recv.len() {
                        // a short read took all there was: epoll says when the next batch
                        // (the low-water mark) is queued, instead of reads of what trickles
                        // in meanwhile
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    if !self.plan.stop.load(Ordering::Relaxed) {
                        self.error = Some(describe(&e, "receiving"));
                    }
                    return self.done();
                }
            }
        }
    }

    /// The clocks: a sender's end time and stop flag, the idle rule on both roles, a
    /// closing sender's bound.
    fn check(&mut self, now: Instant) {
        let idle = now.saturating_duration_since(self.last_progress) >= self.stall_after;
        let stop = self.plan.stop.load(Ordering::Relaxed);
        match self.state {
            State::Sending => {
                let ended = self
                    .end_at
                    .is_some_and(|e| now + Duration::from_millis(1) >= e);
                if stop || ended {
                    self.close_sending();
                } else if idle {
                    self.error = Some(describe(&io::ErrorKind::TimedOut.into(), "sending"));
                    self.close_sending();
                }
            }
            State::Closing(until) if now >= until => self.done(),
            State::Receiving if self.paced_end.is_some_and(|e| now >= e) => {
                let _ = self.sock.shutdown(Shutdown::Both);
                self.done();
            }
            State::Receiving if idle => {
                if !stop {
                    self.error = Some(describe(&io::ErrorKind::TimedOut.into(), "receiving"));
                }
                let _ = self.sock.shutdown(Shutdown::Both);
                self.done();
            }
            _ => {}
        }
    }

    /// The flow changed state: change what epoll watches for it.
    fn moved(&mut self, ep: &impl std::os::fd::AsFd, i: usize, live: &mut usize) {
        match self.state {
            State::Done => {
                let _ = epoll::delete(ep, &*self.sock);
                *live -= 1;
            }
            State::Closing(_) => {
                let interest = epoll::EventFlags::IN | epoll::EventFlags::RDHUP;
                let data = epoll::EventData::new_u64(i as u64);
                if epoll::modify(ep, &*self.sock, data, interest).is_err() {
                    self.done();
                    let _ = epoll::delete(ep, &*self.sock);
                    *live -= 1;
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{cpu_list, place, threads_for, Placement};

    #[test]
    fn cpus_are_listed_as_ranges() {
        assert_eq!(cpu_list(&[0, 1]), "0-1");
        assert_eq!(cpu_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(cpu_list(&[3]), "3");
    }

    #[test]
    fn workers_by_flows_cpus_and_where_the_peer_runs() {
        // a peer on another host: one worker per CPU, one per flow for a few uneven flows
        assert_eq!(threads_for(2, 2, false), 2);
        assert_eq!(threads_for(3, 2, false), 3);
        assert_eq!(threads_for(4, 2, false), 2);
        assert_eq!(threads_for(9, 2, false), 2);
        assert_eq!(threads_for(1000, 16, false), 16);
        // the peer on this host: half the CPUs while a worker would have few flows
        assert_eq!(threads_for(2, 2, true), 1);
        assert_eq!(threads_for(64, 2, true), 1);
        assert_eq!(threads_for(65, 2, true), 2);
        assert_eq!(threads_for(3, 8, true), 3);
        assert_eq!(threads_for(6, 8, true), 6);
        assert_eq!(threads_for(8, 8, true), 4);
        assert_eq!(threads_for(300, 8, true), 8);
        assert_eq!(threads_for(2, 1, true), 1);
        assert_eq!(threads_for(0, 4, false), 1);
    }

    #[test]
    fn busy_workers_of_a_peer_on_this_host_are_spread_over_the_allowed_cpus() {
        let cpus = || vec![2, 3, 5];
        // -A wins
        assert_eq!(place(Some(1), 1000, 2, true, cpus), Placement::On(1));
        // busy workers, peer here: spread, round robin
        let spread = place(None, 1000, 2, true, cpus);
        assert_eq!(spread, Placement::Spread(vec![2, 3, 5]));
        assert_eq!(
            (0..4).map(|w| spread.cpu(w)).collect::<Vec<_>>(),
            [Some(2), Some(3), Some(5), Some(2)]
        );
        assert_eq!(
            place(None, 128, 2, true, cpus),
            Placement::Spread(vec![2, 3, 5])
        );
        // workers that would often sleep, a peer elsewhere, one worker, one CPU: free
        assert_eq!(place(None, 127, 2, true, cpus), Placement::Free);
        assert_eq!(place(None, 1000, 2, false, cpus), Placement::Free);
        assert_eq!(place(None, 1000, 1, true, cpus), Placement::Free);
        assert_eq!(place(None, 1000, 2, true, || vec![0]), Placement::Free);
        assert_eq!(Placement::Free.cpu(0), None);
        assert_eq!(Placement::On(7).cpu(3), Some(7));
    }
}
