//! Stream workers: one thread per stream per side. The sender writes `len`-byte blocks from
//! one buffer; the receiver reads into one buffer. Per call they do one clock read and two
//! relaxed atomic adds, so the control thread can sample progress without locks.

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use socket2::SockRef;
use wirerate_core::side_report::{Role, StreamReport};
use wirerate_core::spec::{End, Flow, RecvMode, SendMode, TCP_PACED_BURST};
use wirerate_core::TestSpec;
use wirerate_probe::cpu::ThreadTimes;
use wirerate_probe::tcpinfo::tcp_info;

use crate::net::timed_out;
use crate::zerocopy::Splicer;

pub use crate::tally::{unacked, Counters, Tally};

/// What a worker needs to know.
#[derive(Clone)]
pub struct Plan {
    pub id: u32,
    pub flow: Flow,
    pub role: Role,
    pub spec: Arc<TestSpec>,
    /// The side's start of the test.
    pub start: Instant,
    pub idle: Duration,
    pub counters: Arc<Counters>,
    pub stop: Arc<AtomicBool>,
    /// Set when the peer has reported: its senders are done (UDP receivers drain and stop).
    pub peer_done: Arc<AtomicBool>,
    /// `-F`: a TCP sender sends this file's bytes (from its start, again at its end)
    /// instead of the pattern; a TCP receiver appends what it reads to it.
    pub file: Option<Arc<PathBuf>>,
}

impl Plan {
    /// How long this stream may go without moving a byte before it is stalled: the idle
    /// timeout, or three of its pace's gaps when it is paced slowly
    /// ([`TestSpec::stall_after_s`]). A stream keeping its pace is never stalled.
    pub fn stall_after(&self) -> Duration {
        Duration::from_secs_f64(self.spec.stall_after_s(self.idle.as_secs_f64()))
    }

    /// When a receiver of a timed test of paced TCP streams stops reading: the senders' end
    /// and [`PACED_TAIL`]. A paced sender's socket still holds a burst or more of its pace at
    /// the end (26 s of it at 20 kbit/s over loopback), and its end of stream comes after
    /// that; an unpaced stream's comes at once.
    pub fn paced_receive_end(&self) -> Option<Instant> {
        self.spec.rate_bps?;
        let s = self.spec.send_seconds()?;
        Some(self.start + Duration::from_secs_f64(s) + PACED_TAIL)
    }
}

/// How long after the senders' end a receiver of paced TCP streams keeps reading.
pub const PACED_TAIL: Duration = Duration::from_millis(500);

/// How often a receiver of paced TCP streams wakes, when nothing arrives, to look at its
/// clocks.
const PACED_POLL: Duration = Duration::from_millis(100);

/// What a TCP socket still holds for its reader after a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Held {
    /// Bytes readable now (FIONREAD).
    pub in_order: u64,
    /// Receive memory in use, backlog included (SO_MEMINFO): the readable bytes' buffers and
    /// those of segments held out of order.
    pub memory: u64,
}

impl Held {
    /// Whether the socket holds more memory than its readable bytes explain: segments that
    /// arrived after a loss wait out of order for the hole to be filled. A buffer costs the
    /// kernel less than twice its payload for full-sized segments.
    pub fn behind_a_hole(&self) -> bool {
        self.memory > 2 * self.in_order + 4096
    }
}

/// `len` bytes of the pattern starting on a page boundary (a large heap buffer starts 16
/// bytes past one): a zero-copy sender hands the kernel whole pages, and sweeps use their
/// buffers as NetPIPE aligns its own.
pub(crate) struct PageBuf {
    backing: Vec<u8>,
    at: usize,
    len: usize,
}

impl PageBuf {
    const PAGE: usize = 4096;

    pub(crate) fn new(len: usize) -> PageBuf {
        let backing = pattern(len + Self::PAGE);
        let at = backing.as_ptr().align_offset(Self::PAGE).min(Self::PAGE);
        PageBuf { backing, at, len }
    }

    pub(crate) fn get(&self) -> &[u8] {
        &self.backing[self.at..self.at + self.len]
    }

    pub(crate) fn get_mut(&mut self) -> &mut [u8] {
        &mut self.backing[self.at..self.at + self.len]
    }
}

pub(crate) fn pattern(len: usize) -> Vec<u8> {
    // A non-trivial pattern, so nothing on the path can compress it to nothing.
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(7))
        .collect()
}

/// Writes until the spec's end, then half-closes and waits for the receiver to finish, so the
/// final TCP_INFO includes every acknowledgement.
pub fn run_sender(mut sock: TcpStream, plan: Plan) -> StreamReport {
    let t0 = ThreadTimes::now();
    let spec = &plan.spec;
    let len = spec.len_bytes as usize;
    let backing = PageBuf::new(len);
    let buf = backing.get();
    let mut size = crate::net::WriteSize::new(spec);
    let mut t = Tally::new(&plan);
    let end_at = spec
        .send_seconds()
        .map(|s| plan.start + Duration::from_secs_f64(s));
    let mut remaining = spec.bytes_per_stream(plan.id).unwrap_or(u64::MAX);
    let blocks = matches!(spec.end, End::Blocks { .. });
    // the send timeout is a quarter of the idle timeout, so a peer that stops reading is
    // noticed within about the idle timeout even when a write moved a little before it
    let _ = sock.set_write_timeout(Some(write_step(plan.idle)));
    let mut last_progress = Instant::now();
    let mut error = None;
    let mut splicer = match spec.send_mode {
        SendMode::Copy => None,
        SendMode::Splice => match Splicer::new(len) {
            Ok(s) => Some(s),
            Err(e) => {
                error = Some(format!("zero-copy sending is not available: {e}"));
                remaining = 0;
                None
            }
        },
    };
    if let (Some(rate), None) = (spec.rate_bps, &error) {
        if let Err(e) = crate::net::set_pacing_rate(&SockRef::from(&sock), rate) {
            error = Some(format!("cannot pace the stream (SO_MAX_PACING_RATE): {e}"));
            remaining = 0;
        }
    }
    let mut source = match plan.file.as_deref().map(|p| FileSource::open(p, len)) {
        None => None,
        Some(Ok(f)) => Some(f),
        Some(Err(e)) => {
            error = Some(e);
            remaining = 0;
            None
        }
    };
    let mut off = 0usize; // progress inside the current block (only for --blocks)
    let mut deadline = Deadline::new(plan.start, end_at, plan.idle);
    while remaining > 0 && !plan.stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if !deadline.arm(&sock, now) {
            break;
        }
        let max = usize::try_from(remaining).unwrap_or(usize::MAX);
        let data = match source.as_mut() {
            Some(f) => match f.next(max) {
                Ok(d) => d,
                Err(e) => {
                    error = Some(e);
                    break;
                }
            },
            None => &buf[off..off + (len - off).min(max).min(size.next(&sock))],
        };
        let written = match splicer.as_mut() {
            Some(s) => s.send(&sock, data),
            None => sock.write(data),
        };
        match written {
            Ok(0) => break,
            Ok(n) => {
                last_progress = Instant::now();
                if t.add(n, last_progress, &plan.counters) {
                    t.include_before_opening(unacked(&sock), &plan.counters);
                }
                remaining -= n as u64;
                if let Some(f) = source.as_mut() {
                    f.consumed(n);
                } else if blocks {
                    off = (off + n) % len;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if timed_out(&e)
                    && !plan.stop.load(Ordering::Relaxed)
                    && !deadline.cut(&e)
                    && last_progress.elapsed() < plan.stall_after() => {}
            Err(e) => {
                // a write cut short by an ordered stop (abort) or by the end time is the
                // end, not a failure
                if !plan.stop.load(Ordering::Relaxed) && !deadline.cut(&e) {
                    error = Some(describe(&e, "sending"));
                }
                break;
            }
        }
    }
    t.close();
    let _ = sock.shutdown(Shutdown::Write);
    if error.is_none() {
        wait_for_close(&mut sock, plan.idle);
    }
    let mut report = t.report(&plan, t0, error);
    report.tcp = tcp_info(&sock);
    report
}

/// Ends a timed sender's writes at the end time, even inside a large write on a slow path
/// (1 MiB takes 0.84 s at 10 Mbit/s, far longer behind a tiny window): within the last idle
/// timeout before the end, each write's send timeout (SO_SNDTIMEO) is what is left of the
/// test, renewed every [`Deadline::RENEW`], so no write outlasts the end by more than that.
///
/// What the socket buffer holds at the end still reaches the receiver after it, and an
/// autotuned buffer holds seconds of a slow path. So the unsent part is kept to what the
/// path drains in [`Deadline::TAIL`] (TCP_NOTSENT_LOWAT, from the rate acknowledged so
/// far), first after [`Deadline::FIRST`] of the test, while the backlog is still small, and
/// again in its last second with a better estimate: the writer waits while any excess
/// drains, and the pipe stays full (the writer is woken long before the tail runs dry). A
/// fast path (a tail over 64 MiB) is left alone.
pub(crate) struct Deadline {
    start: Instant,
    end: Option<Instant>,
    idle: Duration,
    /// When the send timeout was last set to what was left of the test.
    set_at: Option<Instant>,
    /// How often the unsent tail was limited (at most twice).
    tails: u8,
}

impl Deadline {
    const RENEW: Duration = Duration::from_millis(20);
    const FIRST: Duration = Duration::from_millis(250);
    const LAST: Duration = Duration::from_secs(1);
    const TAIL: f64 = 0.05;

    pub(crate) fn new(start: Instant, end: Option<Instant>, idle: Duration) -> Deadline {
        Deadline {
            start,
            end,
            idle,
            set_at: None,
            tails: 0,
        }
    }

    /// Sets the send timeout for the next write; false when the end time has come.
    fn arm(&mut self, sock: &TcpStream, now: Instant) -> bool {
        let Some(end) = self.end else {
            return true;
        };
        let left = end.saturating_duration_since(now);
        if left < Duration::from_millis(1) {
            return false;
        }
        self.tails(sock, now, left);
        let renew = self
            .set_at
            .is_none_or(|t| now.saturating_duration_since(t) >= Self::RENEW);
        if left < self.idle && renew {
            let _ = sock.set_write_timeout(Some(left.min(write_step(self.idle))));
            self.set_at = Some(now);
        }
        true
    }

    /// Limits the unsent tail when it is due (at most twice a test); `left` is what is left
    /// of the test. A non-blocking sender calls this alone: it needs no send timeout.
    pub(crate) fn tails(&mut self, sock: &TcpStream, now: Instant, left: Duration) {
        let ran = now.saturating_duration_since(self.start);
        let due = match self.tails {
            0 => ran >= Self::FIRST,
            1 => left <= Self::LAST && ran >= 4 * Self::FIRST,
            _ => false,
        };
        if due && self.limit_tail(sock, ran) {
            self.tails += 1;
        }
    }

    /// Keeps the unsent bytes to [`Deadline::TAIL`] of the rate acknowledged in the `ran`
    /// time so far (at least 16 KiB); false when the kernel does not count acknowledged
    /// bytes.
    fn limit_tail(&self, sock: &TcpStream, ran: Duration) -> bool {
        let ran = ran.as_secs_f64();
        let Some(acked) = tcp_info(sock).and_then(|t| t.bytes_acked) else {
            return false;
        };
        let tail = (acked as f64 / ran * Self::TAIL).max(16384.0);
        // a fast path drains any send buffer within the tail: nothing to limit
        if tail < f64::from(64u32 << 20) {
            let _ = crate::net::set_notsent_lowat(&SockRef::from(sock), tail as i32);
        }
        true
    }

    /// Whether this write error is the send timeout firing at the end time.
    fn cut(&self, e: &io::Error) -> bool {
        timed_out(e)
            && self
                .end
                .is_some_and(|end| Instant::now() + Self::RENEW >= end)
    }
}

/// The send timeout of one write: a quarter of the idle timeout (at least 1 ms).
fn write_step(idle: Duration) -> Duration {
    (idle / 4).max(Duration::from_millis(1))
}

/// `-F` on a sender: the file's bytes, read `len` at a time, from its start again after
/// its end (a test longer than the file sends it more than once).
struct FileSource {
    file: File,
    name: String,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl FileSource {
    fn open(path: &std::path::Path, len: usize) -> Result<FileSource, String> {
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| format!("cannot read {name}: {e}"))?;
        Ok(FileSource {
            file,
            name,
            buf: vec![0; len],
            start: 0,
            end: 0,
        })
    }

    /// The next bytes to send, at most `max`.
    fn next(&mut self, max: usize) -> Result<&[u8], String> {
        if self.start == self.end {
            self.start = 0;
            self.end = self.fill()?;
        }
        let end = self.end.min(self.start.saturating_add(max));
        Ok(&self.buf[self.start..end])
    }

    /// Reads the next block, rewinding once at the end of the file.
    fn fill(&mut self) -> Result<usize, String> {
        use std::io::Seek;
        for _ in 0..2 {
            match self.file.read(&mut self.buf) {
                Ok(0) => {
                    self.file
                        .rewind()
                        .map_err(|e| format!("cannot rewind {}: {e}", self.name))?;
                }
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("reading {}: {e}", self.name)),
            }
        }
        Err(format!("{} is empty: nothing to send", self.name))
    }

    fn consumed(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
    }
}

/// Waits (bounded) until the peer closes, so the kernel has seen every ACK.
fn wait_for_close(sock: &mut TcpStream, idle: Duration) {
    let _ = sock.set_read_timeout(Some(idle));
    let mut scratch = [0u8; 512];
    let deadline = Instant::now() + idle;
    while Instant::now() < deadline {
        match sock.read(&mut scratch) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Reads until EOF. A stream silent for longer than its stall limit (the idle timeout, or
/// longer for a slow pace: [`Plan::stall_after`]) ends with an error.
pub fn run_receiver(mut sock: TcpStream, plan: Plan) -> StreamReport {
    let t0 = ThreadTimes::now();
    let len = plan.spec.len_bytes.max(64 << 10) as usize;
    let mut buf = vec![0u8; len];
    let mut batch = Batching::new(&sock, Batching::max_for(&plan.spec, len as u64));
    let stall_after = plan.stall_after();
    let paced_end = plan.paced_receive_end();
    let _ = sock.set_read_timeout(Some(match paced_end {
        Some(_) => PACED_POLL.min(stall_after),
        None => stall_after,
    }));
    let mut t = Tally::new(&plan);
    let mut error = None;
    let discard = plan.spec.recv_mode == RecvMode::Discard;
    // -F: what is received is written to the file (opened, and emptied, by the client)
    let mut sink = match plan.file.as_deref() {
        None => None,
        Some(p) => match std::fs::OpenOptions::new().append(true).open(p) {
            Ok(f) => Some((f, p.display().to_string())),
            Err(e) => {
                error = Some(format!("cannot write {}: {e}", p.display()));
                None
            }
        },
    };
    while error.is_none() {
        let got = if discard {
            crate::zerocopy::discard(&sock, &mut buf)
        } else {
            sock.read(&mut buf)
        };
        match got {
            Ok(0) => break,
            Ok(n) => {
                let now = Instant::now();
                t.add_received(n, now, &plan.counters, || held(&sock));
                batch.after_read(&sock, n, now);
                if let Some((f, name)) = sink.as_mut() {
                    if let Err(e) = f.write_all(&buf[..n]) {
                        error = Some(format!("writing {name}: {e}"));
                        break;
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if timed_out(&e)
                    && paced_end.is_some_and(|end| Instant::now() < end)
                    && t.since_last_call() < stall_after => {}
            Err(e) => {
                let over = paced_end.is_some_and(|end| Instant::now() >= end);
                if !plan.stop.load(Ordering::Relaxed) && !over {
                    error = Some(describe(&e, "receiving"));
                }
                break;
            }
        }
    }
    let mut report = t.report(&plan, t0, error);
    report.tcp = tcp_info(&sock);
    let _ = sock.shutdown(Shutdown::Both);
    report
}

/// Adaptive receive batching: the reader asks to be woken only when `lowat` bytes are queued.
/// When data streams in, fewer and larger reads save wake-ups; when it trickles, a smaller
/// mark keeps reads (and interval reports) timely. The mark doubles when a full batch came in
/// under 2 ms and quarters when a read waited over 20 ms.
pub(crate) struct Batching {
    lowat: u64,
    max: u64,
    last: Instant,
}

impl Batching {
    const MIN: u64 = 16 << 10;

    /// The highest mark for a reader of `len`-byte reads: `len`, or for a slowly paced
    /// stream what its pace moves in 10 ms (at least one paced burst), so a read never
    /// waits longer for its mark than the stream may be silent ([`Plan::stall_after`]).
    pub(crate) fn max_for(spec: &TestSpec, len: u64) -> u64 {
        match spec.rate_bps {
            Some(r) => len.min(((r / 8.0 * 0.01) as u64).max(TCP_PACED_BURST)),
            None => len,
        }
    }

    pub(crate) fn new(sock: &TcpStream, len: u64) -> Batching {
        let max = len.clamp(1, super::net::MAX_RCVLOWAT);
        let lowat = max.min(64 << 10);
        super::net::batch_receive(&SockRef::from(sock), lowat);
        Batching {
            lowat,
            max,
            last: Instant::now(),
        }
    }

    #[inline]
    pub(crate) fn after_read(&mut self, sock: &TcpStream, n: usize, now: Instant) {
        let waited = now.saturating_duration_since(self.last);
        self.last = now;
        let next = if waited > Duration::from_millis(20) && self.lowat > Self::MIN {
            (self.lowat / 4).max(Self::MIN)
        } else if waited < Duration::from_millis(2)
            && n as u64 >= self.lowat
            && self.lowat < self.max
        {
            (self.lowat * 2).min(self.max)
        } else {
            return;
        };
        self.lowat = next;
        super::net::batch_receive(&SockRef::from(sock), next);
    }
}

/// What a TCP socket holds for its reader: FIONREAD, and SO_MEMINFO's receive memory and
/// backlog. What the kernel will not say counts as nothing held.
pub(crate) fn held(sock: &TcpStream) -> Held {
    use std::os::fd::AsRawFd;
    let fd = sock.as_raw_fd();
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int into `n`.
    let rc = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
    let in_order = if rc == 0 {
        u64::try_from(n).unwrap_or(0)
    } else {
        0
    };
    let mut mem = [0u32; libc::SK_MEMINFO_DROPS as usize + 1];
    let mut len = std::mem::size_of_val(&mem) as libc::socklen_t;
    // SAFETY: SO_MEMINFO writes at most `len` bytes into `mem` and the length it wrote into
    // `len`; both point at locals that outlive the call.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            mem.as_mut_ptr().cast(),
            &mut len,
        )
    };
    let memory = if rc == 0 {
        u64::from(mem[libc::SK_MEMINFO_RMEM_ALLOC as usize])
            + u64::from(mem[libc::SK_MEMINFO_BACKLOG as usize])
    } else {
        0
    };
    Held { in_order, memory }
}

/// How a stream's error begins when it ended for want of progress: the server then ends the
/// test at once instead of waiting for the peer's report.
pub const STALLED: &str = "stream stalled";

pub(crate) fn describe(e: &io::Error, what: &str) -> String {
    match e.kind() {
        _ if timed_out(e) => {
            format!("{STALLED} while {what}: no progress within the idle timeout")
        }
        _ => format!("{what}: {e}"),
    }
}
