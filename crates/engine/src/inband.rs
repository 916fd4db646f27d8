//! In-band requests on the loaded TCP flows (`wirerate_core::inband` holds the rule): one
//! thread per side beside the data workers, so their loops keep their cost.
//!
//! On the flows this side receives it writes a 4-byte sequence number on the idle
//! direction at the spec's rate (round robin over the flows), notes when, and samples the
//! flows' received-byte counters every [`SAMPLE_EVERY`] (where they moved). On the flows
//! this side sends it waits for those requests and notes, as each is read, the bytes the
//! flow's sender had written. Neither touches the bulk byte stream: the requests travel the
//! way only ACKs travel, and a sender's count is the one its worker keeps anyway.

use std::net::TcpStream;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use wirerate_core::inband::{InbandFlow, REQUEST_BYTES};
use wirerate_core::side_report::Role;
use wirerate_core::spec::Flow;

use crate::tally::Counters;

/// How often a requester samples its flows' received bytes (at the least: long tests with
/// many flows sample less often, so a timeline stays within [`MAX_SAMPLES`]).
pub const SAMPLE_EVERY: Duration = Duration::from_millis(1);

/// The most timeline samples a side keeps over all its flows.
const MAX_SAMPLES: f64 = 200_000.0;

/// One loaded connection as the in-band thread sees it: its own descriptor of the socket
/// and the worker's counters.
pub struct Conn {
    pub flow: Flow,
    pub id: u32,
    pub role: Role,
    pub sock: TcpStream,
    pub counters: Arc<Counters>,
}

/// The running thread; dropped unfinished, it stops by itself.
pub struct Inband {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Vec<InbandFlow>>>,
}

impl Drop for Inband {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A connection of a TCP worker, on a descriptor of the in-band thread's own.
pub fn conn(
    flow: Flow,
    id: u32,
    role: Role,
    fd: std::os::fd::BorrowedFd<'_>,
    counters: &Arc<Counters>,
) -> Option<Conn> {
    let sock = TcpStream::from(fd.try_clone_to_owned().ok()?);
    Some(Conn {
        flow,
        id,
        role,
        sock,
        counters: counters.clone(),
    })
}

impl Inband {
    /// Starts the thread for `conns` (TCP flows only) at `rate_hz` requests a second over
    /// the flows this side receives; `test_s` bounds the timeline's size. None when there
    /// is nothing to do or the thread cannot start.
    pub fn start(rate_hz: f64, test_s: f64, conns: Vec<Conn>, start: Instant) -> Option<Inband> {
        if conns.is_empty() || !(rate_hz.is_finite() && rate_hz > 0.0) {
            return None;
        }
        let receiving = conns.iter().filter(|c| c.role == Role::Receiver).count();
        let every = SAMPLE_EVERY.max(Duration::from_secs_f64(
            test_s.max(0.0) * receiving as f64 / MAX_SAMPLES,
        ));
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("wr-inband".into())
            .spawn(move || run(conns, rate_hz, every, start, &flag))
            .ok()?;
        Some(Inband {
            stop,
            handle: Some(handle),
        })
    }

    /// Stops the thread: what it noted per flow.
    pub fn finish(mut self) -> Vec<InbandFlow> {
        self.stop.store(true, Ordering::Relaxed);
        let h = self.handle.take();
        h.and_then(|h| h.join().ok()).unwrap_or_default()
    }
}

/// A flow this side receives: it sends the requests.
struct Requester {
    conn: Conn,
    note: InbandFlow,
    /// The last sample taken while the count stood still (kept only before a move).
    held: Option<(f64, u64)>,
    last: u64,
    open: bool,
}

impl Requester {
    fn sample(&mut self, at_s: f64) {
        let bytes = self.conn.counters.bytes.load(Ordering::Relaxed);
        if bytes == self.last && !self.note.timeline.is_empty() {
            self.held = Some((at_s, bytes));
            return;
        }
        self.note.timeline.extend(self.held.take());
        self.note.timeline.push((at_s, bytes));
        self.last = bytes;
    }

    /// Sends the next request; a connection that will not take it is closed for requests.
    fn request(&mut self, at_s: f64) {
        let Ok(seq) = u32::try_from(self.note.sent_s.len()) else {
            self.open = false;
            return;
        };
        let sent = send_now(&self.conn.sock, &seq.to_be_bytes());
        if sent == Some(REQUEST_BYTES) {
            self.note.sent_s.push(at_s);
        } else {
            // closed, or a partial request the responder could not parse after
            self.open = false;
        }
    }
}

/// A flow this side sends: it reads the requests.
struct Responder {
    conn: Conn,
    note: InbandFlow,
    partial: Vec<u8>,
    open: bool,
}

impl Responder {
    /// Reads what is queued; each whole request notes the sender's bytes written now.
    fn read(&mut self) {
        let mut buf = [0u8; 256];
        loop {
            let Some(n) = recv_now(&self.conn.sock, &mut buf) else {
                return;
            };
            if n == 0 {
                self.open = false;
                return;
            }
            let written = self.conn.counters.bytes.load(Ordering::Relaxed);
            self.partial.extend_from_slice(&buf[..n]);
            let whole = self.partial.len() / REQUEST_BYTES * REQUEST_BYTES;
            for r in self.partial[..whole].chunks_exact(REQUEST_BYTES) {
                let seq = u32::from_be_bytes([r[0], r[1], r[2], r[3]]);
                self.note.offsets.push((seq, written));
            }
            self.partial.drain(..whole);
        }
    }
}

fn note(c: &Conn) -> InbandFlow {
    InbandFlow {
        flow: c.flow,
        id: c.id,
        sent_s: Vec::new(),
        timeline: Vec::new(),
        offsets: Vec::new(),
    }
}

fn run(
    conns: Vec<Conn>,
    rate_hz: f64,
    every: Duration,
    start: Instant,
    stop: &AtomicBool,
) -> Vec<InbandFlow> {
    let mut req = Vec::new();
    let mut resp = Vec::new();
    for c in conns {
        if c.role == Role::Receiver {
            // a request leaves at once, not behind the previous one's ACK
            let _ = c.sock.set_nodelay(true);
            req.push(Requester {
                note: note(&c),
                conn: c,
                held: None,
                last: 0,
                open: true,
            });
        } else {
            resp.push(Responder {
                note: note(&c),
                conn: c,
                partial: Vec::new(),
                open: true,
            });
        }
    }
    let gap = Duration::from_secs_f64(1.0 / rate_hz);
    let at = |t: Instant| t.saturating_duration_since(start).as_secs_f64();
    let (mut next_sample, mut next_req, mut turn) = (Instant::now(), Instant::now() + gap, 0);
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= next_sample {
            req.iter_mut().for_each(|r| r.sample(at(now)));
            next_sample = now + every;
        }
        if now >= next_req {
            let open: Vec<usize> = (0..req.len()).filter(|&i| req[i].open).collect();
            if let Some(&i) = open.get(turn % open.len().max(1)) {
                req[i].request(at(Instant::now()));
            }
            turn += 1;
            next_req = (next_req + gap).max(now);
        }
        let wake = if req.is_empty() {
            now + Duration::from_millis(20)
        } else {
            next_sample.min(next_req)
        };
        wait_requests(&mut resp, wake.saturating_duration_since(Instant::now()));
    }
    let end = at(Instant::now());
    req.iter_mut().for_each(|r| r.sample(end));
    resp.iter_mut().filter(|r| r.open).for_each(Responder::read);
    req.into_iter()
        .map(|r| r.note)
        .chain(resp.into_iter().map(|r| r.note))
        .collect()
}

/// Waits up to `wait` for requests on the open responders' sockets, and reads them.
fn wait_requests(resp: &mut [Responder], wait: Duration) {
    let open: Vec<usize> = (0..resp.len()).filter(|&i| resp[i].open).collect();
    if open.is_empty() {
        std::thread::sleep(wait);
        return;
    }
    let mut fds: Vec<PollFd> = open
        .iter()
        .map(|&i| PollFd::new(&resp[i].conn.sock, PollFlags::IN))
        .collect();
    let ts = Timespec {
        tv_sec: wait.as_secs().try_into().unwrap_or(0),
        tv_nsec: wait.subsec_nanos().into(),
    };
    if !matches!(poll(&mut fds, Some(&ts)), Ok(n) if n > 0) {
        return;
    }
    let ready: Vec<usize> = fds
        .iter()
        .zip(&open)
        .filter(|(f, _)| !f.revents().is_empty())
        .map(|(_, &i)| i)
        .collect();
    drop(fds);
    for i in ready {
        resp[i].read();
    }
}

/// Sends without waiting (the socket may be a blocking one a worker shares): the bytes
/// taken, None on an error.
fn send_now(sock: &TcpStream, data: &[u8]) -> Option<usize> {
    // SAFETY: send reads at most data.len() bytes from a live slice; the descriptor is
    // owned by `sock` for the call.
    let n = unsafe {
        libc::send(
            sock.as_fd().as_raw_fd(),
            data.as_ptr().cast(),
            data.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    usize::try_from(n).ok()
}

/// Receives without waiting: the bytes read (0: the peer closed), None when nothing is
/// queued or on an error.
fn recv_now(sock: &TcpStream, buf: &mut [u8]) -> Option<usize> {
    // SAFETY: recv writes at most buf.len() bytes into a live, exclusively borrowed slice.
    let n = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    };
    match usize::try_from(n) {
        Ok(n) => Some(n),
        Err(_) => {
            let e = std::io::Error::last_os_error();
            // a reset or closed socket has no more requests; nothing queued is no news
            (e.kind() != std::io::ErrorKind::WouldBlock
                && e.kind() != std::io::ErrorKind::Interrupted)
                .then_some(0)
        }
    }
}
