//! Request/response workers (`wirerate rr`): one thread per flow on each side.
//!
//! The client times each transaction from the moment its request leaves (closed loop) or
//! from its scheduled send time (open loop, `--rate`), to the last byte of its response, and
//! records it in an HDR histogram: nothing is allocated per transaction, the buffers are
//! reused and TCP_NODELAY is on. The server answers each whole request with one response and
//! counts what it sent, so both sides' counts can be compared. Open loop also records how
//! late each request left and its round trip from the actual send. CRR lives in `crr`.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wirerate_core::latency::{LatencyHistogram, OpenLoopHistograms};
use wirerate_core::rr::{RrCounts, RrSpec};
use wirerate_core::side_report::StreamReport;
use wirerate_core::sweep::SweepSide;
use wirerate_probe::cpu::ThreadTimes;

use crate::stream::{Plan, Tally};

pub use crate::crr::{run_crr_anchor, run_crr_client, serve_crr, serve_crr_at_once, CrrRoute};

/// What rr and sweep workers hand the side's control thread.
pub enum SideMsg {
    /// One flow's round trips over interval `index`, which ended at `end_s` (the last,
    /// partial interval ends at the flow's last transaction).
    Interval {
        index: u64,
        end_s: f64,
        transactions: u64,
        hist: Box<LatencyHistogram>,
    },
    /// One flow's round trips over the whole test, and in open loop its send lateness and
    /// round trips from the actual sends.
    Total {
        rtt: Box<LatencyHistogram>,
        open_loop: Option<Box<OpenLoopHistograms>>,
    },
    /// The client's sweep figures.
    Sweep(SweepSide),
}

pub(crate) fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(13)).collect()
}

/// Waits until `fd` is readable or `timeout` passes; true when readable.
pub(crate) fn wait_readable(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: timeout.subsec_nanos().into(),
    };
    // SAFETY: one pollfd and one timespec, both alive across the call; no signal mask.
    let rc = unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
    match rc {
        n if n > 0 => Ok(true),
        0 => Ok(false),
        _ => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            }
        }
    }
}

/// Open loop: this thread's timers fire when asked, not up to 50 µs later (Linux's
/// default timer slack, which would make every sleeping send that late).
fn fine_timers() {
    // SAFETY: PR_SET_TIMERSLACK takes a number and changes only the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// How long before a send the client stops sleeping and spins. A client that slept until
/// 50 µs before each send took 5.2 µs for a round trip that took 4.0 when it spun the
/// whole gap (open loop at 10 000 a second on a 2-core VM, medians of 5; sockperf, which
/// always spins, 4.5). So gaps up to this long (schedules of 5 000 a second and more per
/// flow) are spun whole, and longer ones cost at most this much CPU per send.
pub(crate) const SPIN_BEFORE_SEND: Duration = Duration::from_micros(200);

/// Sleeps until `t`: the last [`SPIN_BEFORE_SEND`] by spinning, so an open-loop schedule is
/// kept to a few microseconds (what the client adds to a latency timed from the schedule)
/// and the thread is running, not waking, when its response comes.
pub(crate) fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now + SPIN_BEFORE_SEND {
        std::thread::sleep(t - now - SPIN_BEFORE_SEND);
    }
    while Instant::now() < t {
        std::hint::spin_loop();
    }
}

/// The rr settings of a plan (a worker is only started for an rr spec).
pub(crate) fn rr_of(plan: &Plan) -> RrSpec {
    plan.spec.test.rr().cloned().unwrap_or_default()
}

/// When a flow stops sending, and (open loop) when its next request is due.
pub(crate) struct Pace {
    end_at: Option<Instant>,
    count: Option<u64>,
    sent: u64,
    period: Option<Duration>,
    next: Instant,
    stop: Arc<AtomicBool>,
}

impl Pace {
    pub(crate) fn new(plan: &Plan, rr: &RrSpec) -> Pace {
        let period = rr.period_s(plan.spec.parallel).map(Duration::from_secs_f64);
        if period.is_some() {
            fine_timers();
        }
        Pace {
            end_at: plan
                .spec
                .send_seconds()
                .filter(|_| RrSpec::count_per_flow(&plan.spec).is_none())
                .map(|s| plan.start + Duration::from_secs_f64(s)),
            count: RrSpec::count_per_flow(&plan.spec),
            sent: 0,
            period,
            next: plan.start,
            stop: plan.stop.clone(),
        }
    }

    /// True while the flow may still send requests.
    fn open(&self, now: Instant) -> bool {
        self.count.is_none_or(|c| self.sent < c)
            && self.end_at.is_none_or(|e| now < e)
            && !self.stop.load(Ordering::Relaxed)
    }

    /// The start time of the next request if it may go now: now (closed loop) or its
    /// scheduled time once that has come (open loop).
    pub(crate) fn take(&mut self, now: Instant) -> Option<Instant> {
        if !self.open(now) {
            return None;
        }
        match self.period {
            None => {
                self.sent += 1;
                Some(now)
            }
            Some(p) if now >= self.next => {
                let t = self.next;
                self.next += p;
                self.sent += 1;
                Some(t)
            }
            Some(_) => None,
        }
    }

    /// When a request taken at `now` actually leaves: `now` in closed loop, a fresh reading
    /// in open loop, where several due requests go out one after another.
    #[inline]
    pub(crate) fn send_time(&self, now: Instant) -> Instant {
        if self.period.is_some() {
            Instant::now()
        } else {
            now
        }
    }

    /// Open loop: the next scheduled send, if the flow may still send.
    pub(crate) fn due(&self, now: Instant) -> Option<Instant> {
        self.period.filter(|_| self.open(now)).map(|_| self.next)
    }
}

/// The client's round-trip recorder: the whole test and the current interval.
pub(crate) struct Recorder {
    total: LatencyHistogram,
    open_loop: Option<Box<OpenLoopHistograms>>,
    interval: LatencyHistogram,
    interval_tx: u64,
    index: u64,
    period: Option<Duration>,
    next_cut: Option<Instant>,
    start: Instant,
    last: Instant,
    tx: Sender<SideMsg>,
    pub(crate) counts: RrCounts,
}

impl Recorder {
    pub(crate) fn new(plan: &Plan, tx: Sender<SideMsg>) -> Recorder {
        let period =
            (plan.spec.interval_s > 0.0).then(|| Duration::from_secs_f64(plan.spec.interval_s));
        let open = rr_of(plan).rate_tps.is_some();
        Recorder {
            total: LatencyHistogram::new(),
            open_loop: open.then(Box::default),
            interval: LatencyHistogram::new(),
            interval_tx: 0,
            index: 0,
            period,
            next_cut: period.map(|p| plan.start + p),
            start: plan.start,
            last: plan.start,
            tx,
            counts: RrCounts::default(),
        }
    }

    /// Records a transaction scheduled at `began` (closed loop: when it was sent), sent at
    /// `sent` and answered at `now`.
    #[inline]
    pub(crate) fn record(&mut self, began: Instant, sent: Instant, now: Instant) {
        self.cut_until(now);
        let ns = ns_between(began, now);
        self.total.record_ns(ns);
        self.interval.record_ns(ns);
        if let Some(o) = self.open_loop.as_mut() {
            o.record(ns_between(began, sent), ns_between(sent, now));
        }
        self.interval_tx += 1;
        self.counts.transactions += 1;
        self.last = now;
    }

    /// Sends every interval that ended by `now` (empty ones too, so the side can tell
    /// when all flows have reported an interval).
    fn cut_until(&mut self, now: Instant) {
        while let (Some(cut), Some(p)) = (self.next_cut, self.period) {
            if now < cut {
                break;
            }
            self.send_interval(cut.duration_since(self.start).as_secs_f64());
            self.next_cut = Some(cut + p);
        }
    }

    fn send_interval(&mut self, end_s: f64) {
        let hist = Box::new(self.interval.clone());
        let _ = self.tx.send(SideMsg::Interval {
            index: self.index,
            end_s,
            transactions: self.interval_tx,
            hist,
        });
        self.interval.reset();
        self.interval_tx = 0;
        self.index += 1;
    }

    /// The last, partial interval, the whole-test histogram, and this flow's counts.
    pub(crate) fn finish(mut self) -> (RrCounts, f64) {
        let last = self.last;
        self.cut_until(last);
        let seconds = last.saturating_duration_since(self.start).as_secs_f64();
        if self.period.is_some() {
            self.send_interval(seconds);
        }
        self.counts.rtt = self.total.stats();
        let _ = self.tx.send(SideMsg::Total {
            rtt: Box::new(self.total),
            open_loop: self.open_loop,
        });
        (self.counts, seconds)
    }
}

fn ns_between(a: Instant, b: Instant) -> u64 {
    u64::try_from(b.saturating_duration_since(a).as_nanos()).unwrap_or(u64::MAX)
}

pub(crate) fn report(
    plan: &Plan,
    t0: ThreadTimes,
    tally: &Tally,
    counts: RrCounts,
    seconds: f64,
    error: Option<String>,
) -> StreamReport {
    let mut r = tally.report(plan, t0, error);
    r.seconds = seconds;
    r.rr = Some(counts);
    r
}

pub(crate) fn describe(e: &io::Error, what: &str) -> String {
    match e.kind() {
        _ if crate::net::timed_out(e) => {
            format!("{what}: the peer was silent for the idle timeout")
        }
        io::ErrorKind::UnexpectedEof => format!("{what}: the peer closed the connection"),
        _ => format!("{what}: {e}"),
    }
}

/// Client of one TCP_RR flow: `burst` requests in flight on one connection.
pub fn run_tcp_client(mut sock: TcpStream, plan: Plan, tx: Sender<SideMsg>) -> StreamReport {
    let t0 = ThreadTimes::now();
    let rr = rr_of(&plan);
    let _ = sock.set_nodelay(true);
    let _ = sock.set_read_timeout(Some(plan.idle));
    let _ = sock.set_write_timeout(Some(plan.idle));
    let req = pattern(rr.request_bytes as usize);
    let resp = rr.response_bytes;
    let mut buf = vec![0u8; (resp as usize).clamp(4096, 1 << 20)];
    let burst = rr.burst as usize;
    // each request's scheduled and actual send times
    let mut inflight: VecDeque<(Instant, Instant)> = VecDeque::with_capacity(burst);
    let mut pace = Pace::new(&plan, &rr);
    let mut rec = Recorder::new(&plan, tx);
    let mut tally = Tally::new(&plan);
    let mut got = 0u64;
    let fd = sock.as_raw_fd();
    let result = (|| -> io::Result<()> {
        loop {
            let now = Instant::now();
            while inflight.len() < burst {
                let Some(began) = pace.take(now) else { break };
                let sent = pace.send_time(now);
                sock.write_all(&req)?;
                tally.add(req.len(), sent, &plan.counters);
                inflight.push_back((began, sent));
            }
            if inflight.is_empty() {
                match pace.due(now) {
                    Some(t) => {
                        sleep_until(t);
                        continue;
                    }
                    None => return Ok(()),
                }
            }
            // open loop: a due request must not wait behind a slow response
            if inflight.len() < burst {
                if let Some(t) = pace.due(now) {
                    if !wait_readable(fd, t.saturating_duration_since(now))? {
                        continue;
                    }
                }
            }
            let n = match sock.read(&mut buf) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let now = Instant::now();
            got += n as u64;
            while got >= resp {
                got -= resp;
                match inflight.pop_front() {
                    Some((began, sent)) => rec.record(began, sent, now),
                    None => {
                        return Err(io::Error::other(
                            "the server sent a response never asked for",
                        ))
                    }
                }
            }
        }
    })();
    let error = result.err().filter(|_| !plan.stop.load(Ordering::Relaxed));
    let _ = sock.shutdown(Shutdown::Write);
    if error.is_none() {
        // the server closes once it has read our end: wait for it, bounded by the idle time
        let _ = sock.read(&mut buf);
    }
    let (counts, seconds) = rec.finish();
    report(
        &plan,
        t0,
        &tally,
        counts,
        seconds,
        error.map(|e| describe(&e, "rr")),
    )
}

/// Server of one TCP_RR flow: a response for each whole request, until the client closes.
pub fn run_tcp_server(mut sock: TcpStream, plan: Plan) -> StreamReport {
    let t0 = ThreadTimes::now();
    let rr = rr_of(&plan);
    let _ = sock.set_nodelay(true);
    let _ = sock.set_read_timeout(Some(plan.idle));
    let _ = sock.set_write_timeout(Some(plan.idle));
    let resp = pattern(rr.response_bytes as usize);
    let req = rr.request_bytes;
    let mut buf = vec![0u8; (req as usize).clamp(4096, 1 << 20)];
    let mut tally = Tally::new(&plan);
    let mut counts = RrCounts::default();
    let mut got = 0u64;
    let result = (|| -> io::Result<()> {
        loop {
            let n = match sock.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            tally.add(n, Instant::now(), &plan.counters);
            got += n as u64;
            while got >= req {
                got -= req;
                counts.transactions += 1;
                sock.write_all(&resp)?;
            }
        }
    })();
    let error = result.err().filter(|_| !plan.stop.load(Ordering::Relaxed));
    let _ = sock.shutdown(Shutdown::Both);
    let seconds = plan.start.elapsed().as_secs_f64();
    report(
        &plan,
        t0,
        &tally,
        counts,
        seconds,
        error.map(|e| describe(&e, "rr")),
    )
}

/// Empties a socket of datagrams left from the address check.
fn drain(sock: &UdpSocket) {
    let mut b = [0u8; 2048];
    if sock.set_nonblocking(true).is_ok() {
        while sock.recv(&mut b).is_ok() {}
        let _ = sock.set_nonblocking(false);
    }
}

/// Client of one UDP_RR flow: each request carries a sequence number its response echoes;
/// a request unanswered after the loss timeout is counted lost and the flow goes on.
pub fn run_udp_client(sock: UdpSocket, plan: Plan, tx: Sender<SideMsg>) -> StreamReport {
    let t0 = ThreadTimes::now();
    let rr = rr_of(&plan);
    drain(&sock);
    let mut req = pattern(rr.request_bytes as usize);
    let mut buf = vec![0u8; 65_536];
    let burst = rr.burst as usize;
    let timeout = Duration::from_secs_f64(rr.loss_timeout_s);
    let mut slots: Vec<(u64, Instant, Instant)> = Vec::with_capacity(burst);
    let mut pace = Pace::new(&plan, &rr);
    let mut rec = Recorder::new(&plan, tx);
    let mut tally = Tally::new(&plan);
    let mut seq = 0u64;
    let fd = sock.as_raw_fd();
    let result = (|| -> io::Result<()> {
        loop {
            let now = Instant::now();
            while slots.len() < burst {
                let Some(began) = pace.take(now) else { break };
                req[..8].copy_from_slice(&seq.to_be_bytes());
                let sent = pace.send_time(now);
                // a failed send (a full queue, or an ICMP error from an earlier datagram) is
                // a request lost like one dropped on the path: it times out
                if sock.send(&req).is_ok() {
                    tally.add(req.len(), sent, &plan.counters);
                }
                slots.push((seq, began, sent));
                seq += 1;
            }
            if slots.is_empty() {
                match pace.due(now) {
                    Some(t) => {
                        sleep_until(t);
                        continue;
                    }
                    None => return Ok(()),
                }
            }
            let oldest = slots.iter().map(|s| s.2).min().unwrap_or(now) + timeout;
            let mut wake = oldest;
            if slots.len() < burst {
                if let Some(t) = pace.due(now) {
                    wake = wake.min(t);
                }
            }
            if wait_readable(fd, wake.saturating_duration_since(now))? {
                match sock.recv(&mut buf) {
                    Ok(n) if n >= 8 => {
                        let now = Instant::now();
                        let mut s = [0u8; 8];
                        s.copy_from_slice(&buf[..8]);
                        let got = u64::from_be_bytes(s);
                        match slots.iter().position(|x| x.0 == got) {
                            Some(i) => {
                                let (_, began, sent) = slots.swap_remove(i);
                                rec.record(began, sent, now);
                            }
                            None => rec.counts.late += 1,
                        }
                    }
                    Ok(_) => {}
                    // ECONNREFUSED from an ICMP error, or an interrupted call: go on
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            let now = Instant::now();
            let before = slots.len();
            slots.retain(|s| now.saturating_duration_since(s.2) < timeout);
            rec.counts.lost += (before - slots.len()) as u64;
        }
    })();
    let error = result.err().filter(|_| !plan.stop.load(Ordering::Relaxed));
    let (counts, seconds) = rec.finish();
    report(
        &plan,
        t0,
        &tally,
        counts,
        seconds,
        error.map(|e| describe(&e, "udp rr")),
    )
}

/// Server of one UDP_RR flow: answers each request of the agreed size from the proven
/// peer, echoing its sequence number, until the client has reported.
pub fn run_udp_server(sock: UdpSocket, peer: Option<SocketAddr>, plan: Plan) -> StreamReport {
    let t0 = ThreadTimes::now();
    let rr = rr_of(&plan);
    let mut tally = Tally::new(&plan);
    let mut counts = RrCounts::default();
    let mut resp = pattern(rr.response_bytes as usize);
    let mut buf = vec![0u8; 65_536];
    let error = (|| -> Result<(), String> {
        let peer = peer.ok_or("udp rr: no proven peer address")?;
        sock.connect(peer)
            .map_err(|e| describe(&e, "udp rr: connecting"))?;
        drain(&sock);
        let _ = sock.set_read_timeout(Some(Duration::from_millis(50)));
        let mut last = Instant::now();
        loop {
            if plan.stop.load(Ordering::Relaxed) || plan.peer_done.load(Ordering::Relaxed) {
                return Ok(());
            }
            match sock.recv(&mut buf) {
                Ok(n) if n as u64 == rr.request_bytes => {
                    let now = Instant::now();
                    last = now;
                    tally.add(n, now, &plan.counters);
                    resp[..8].copy_from_slice(&buf[..8]);
                    counts.transactions += 1;
                    let _ = sock.send(&resp);
                }
                Ok(_) => {}
                Err(e)
                    if crate::net::transient(&e)
                        || e.kind() == io::ErrorKind::ConnectionRefused =>
                {
                    if last.elapsed() > plan.idle {
                        return Err("udp rr: the client was silent for the idle timeout".into());
                    }
                }
                Err(e) => return Err(describe(&e, "udp rr")),
            }
        }
    })()
    .err()
    .filter(|_| !plan.stop.load(Ordering::Relaxed));
    let seconds = plan.start.elapsed().as_secs_f64();
    report(&plan, t0, &tally, counts, seconds, error)
}
