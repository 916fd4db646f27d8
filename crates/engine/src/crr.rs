//! TCP_CRR (`wirerate rr --mode crr`): a new connection per transaction. The client
//! connects, sends its data hello with the request, reads the response and the server's
//! close; the server serves each connection on its listening thread when the opening is
//! already queued, and counts the CPU that costs as the test's.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use socket2::{Domain, Socket, Type};
use wirerate_core::rr::{RrCounts, RrSpec};
use wirerate_core::side_report::StreamReport;
use wirerate_core::spec::Flow;
use wirerate_probe::cpu::ThreadTimes;
use wirerate_proto::data::{token_eq, DataHello, DATA_HELLO_LEN};
use wirerate_proto::frame::PREAMBLE_LEN;
use wirerate_proto::{Channel, Preamble, Token};

use crate::net::read_exact_by;
use crate::rr::{
    describe, pattern, report, rr_of, sleep_until, wait_readable, Pace, Recorder, SideMsg,
};
use crate::stream::{Plan, Tally};

/// Routes per-transaction connections of a CRR test to their flow's counter on the server.
#[derive(Debug)]
pub struct CrrRoute {
    pub token: Token,
    pub request_bytes: u64,
    pub response_bytes: u64,
    /// Transactions served, per flow id.
    pub served: Vec<AtomicU64>,
    /// Nanoseconds after `since` of the last connection served: the anchors' idle check.
    pub last_ns: AtomicU64,
    pub since: Instant,
    /// Set once every anchor stream is attached and the test has started.
    pub running: AtomicBool,
    /// CPU the listener's threads spent on this test's connections, nanoseconds: the
    /// accepting thread's time around each one, and the whole life of any connection thread.
    cpu_user_ns: AtomicU64,
    cpu_sys_ns: AtomicU64,
}

impl CrrRoute {
    pub fn new(token: Token, rr: &RrSpec, flows: u32) -> CrrRoute {
        CrrRoute {
            token,
            request_bytes: rr.request_bytes,
            response_bytes: rr.response_bytes,
            served: (0..flows).map(|_| AtomicU64::new(0)).collect(),
            last_ns: AtomicU64::new(0),
            since: Instant::now(),
            running: AtomicBool::new(false),
            cpu_user_ns: AtomicU64::new(0),
            cpu_sys_ns: AtomicU64::new(0),
        }
    }

    /// Adds CPU spent serving this test's connections outside its stream threads.
    pub fn charge(&self, t: ThreadTimes) {
        let ns = |s: f64| (s * 1e9) as u64;
        self.cpu_user_ns.fetch_add(ns(t.user_s), Ordering::Relaxed);
        self.cpu_sys_ns.fetch_add(ns(t.sys_s), Ordering::Relaxed);
    }

    /// Flow `id`'s share of the charged CPU (user, system seconds), by transactions served.
    fn cpu_share(&self, id: usize) -> (f64, f64) {
        let all: u64 = self.served.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        let mine = self.served.get(id).map_or(0, |c| c.load(Ordering::Relaxed));
        if all == 0 {
            return (0.0, 0.0);
        }
        let share = mine as f64 / all as f64 / 1e9;
        (
            self.cpu_user_ns.load(Ordering::Relaxed) as f64 * share,
            self.cpu_sys_ns.load(Ordering::Relaxed) as f64 * share,
        )
    }

    fn touch(&self) {
        let ns = u64::try_from(self.since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last_ns.store(ns, Ordering::Relaxed);
    }
}

/// Requests and responses up to this size are served on the listener's own thread.
const AT_ONCE_MAX: u64 = 4096;
/// How long the listener waits for a CRR connection's opening before handing it to a thread.
const AT_ONCE_WAIT: Duration = Duration::from_millis(2);

/// Serves a CRR transaction on the listener's thread, without waiting, when its hello and
/// whole request are already queued (the client sends them at once, so they usually are):
/// a thread per connection would cost more than the transaction. Hands the socket back when
/// that is not so, or when it is not a data stream of this test, for the usual path.
pub fn serve_crr_at_once(sock: TcpStream, route: &CrrRoute) -> Option<TcpStream> {
    if route.request_bytes > AT_ONCE_MAX || route.response_bytes > AT_ONCE_MAX {
        return Some(sock);
    }
    let want = DATA_HELLO_LEN + route.request_bytes as usize;
    let mut buf = [0u8; DATA_HELLO_LEN + AT_ONCE_MAX as usize];
    // The listener often wakes between the client's connect and its first write: the
    // opening is waited for a moment, since a thread to wait for it costs more. A silent
    // connection holds the listener this long at most, and only during a CRR test.
    let until = Instant::now() + AT_ONCE_WAIT;
    loop {
        // SAFETY: recv writes at most `want` bytes into buf, which holds more; MSG_PEEK
        // leaves them queued.
        let n = unsafe {
            libc::recv(
                sock.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                want,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if usize::try_from(n).ok() == Some(want) {
            break;
        }
        let now = Instant::now();
        // 0: the peer closed; a partial opening waits for the rest like none at all
        if n == 0 || now >= until || !wait_readable(sock.as_raw_fd(), until - now).unwrap_or(false)
        {
            return Some(sock);
        }
    }
    let hello = Preamble::parse(&buf)
        .ok()
        .filter(|p| p.channel == Channel::Data)
        .and_then(|_| DataHello::parse_after_preamble(&buf[PREAMBLE_LEN..DATA_HELLO_LEN]).ok())
        .filter(|h| token_eq(&h.token, &route.token) && h.flow == Flow::ClientToServer);
    let counter = hello.and_then(|h| route.served.get(h.stream_id as usize));
    let Some(counter) = counter else {
        return Some(sock);
    };
    let mut sock = sock;
    // queued: this read takes what was peeked without waiting
    if sock.read_exact(&mut buf[..want]).is_err() {
        return None;
    }
    counter.fetch_add(1, Ordering::Relaxed);
    route.touch();
    let resp = pattern(route.response_bytes as usize);
    // SAFETY: send reads resp.len() bytes from resp, alive across the call.
    let sent = unsafe {
        libc::send(
            sock.as_raw_fd(),
            resp.as_ptr().cast(),
            resp.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    let sent = usize::try_from(sent).unwrap_or(0);
    if sent < resp.len() {
        // a send buffer smaller than a page: the rest is written off this thread
        let rest = resp[sent..].to_vec();
        let _ = std::thread::Builder::new()
            .name("wr-crr".into())
            .stack_size(64 << 10)
            .spawn(move || {
                let _ = sock.set_write_timeout(Some(Duration::from_secs(10)));
                let _ = sock.write_all(&rest);
            });
    }
    None
}

/// Serves one CRR transaction on a connection whose hello named a running CRR session:
/// reads the request, counts it, answers, and closes first (the TIME_WAIT stays here, not
/// on the client that opens thousands of connections).
pub fn serve_crr(mut sock: TcpStream, route: &CrrRoute, hello: &DataHello, idle: Duration) {
    let Some(counter) = route.served.get(hello.stream_id as usize) else {
        return;
    };
    if hello.flow != Flow::ClientToServer {
        return;
    }
    let _ = sock.set_nodelay(true);
    let mut req = vec![0u8; route.request_bytes as usize];
    if read_exact_by(&mut sock, &mut req, Instant::now() + idle).is_err() {
        return;
    }
    counter.fetch_add(1, Ordering::Relaxed);
    route.touch();
    let resp = pattern(route.response_bytes as usize);
    let _ = sock.set_write_timeout(Some(idle));
    let _ = sock.write_all(&resp);
    // a connection thread lives for one connection: all it used was this transaction's
    route.charge(ThreadTimes::cpu_now());
}

/// Client of one TCP_CRR flow: a new connection per transaction. `anchor` is the flow's
/// data stream: it stays open while the flow runs and tells the server when it is done.
pub fn run_crr_client(
    anchor: TcpStream,
    token: Token,
    plan: Plan,
    tx: Sender<SideMsg>,
) -> StreamReport {
    let t0 = ThreadTimes::now();
    let rr = rr_of(&plan);
    let mut pace = Pace::new(&plan, &rr);
    let mut rec = Recorder::new(&plan, tx);
    let mut tally = Tally::new(&plan);
    let hello = DataHello {
        token,
        flow: Flow::ClientToServer,
        stream_id: plan.id,
    };
    let mut opening = hello.emit().to_vec();
    opening.extend(pattern(rr.request_bytes as usize));
    let mut buf = vec![0u8; (rr.response_bytes as usize).clamp(4096, 1 << 20)];
    let server = anchor.peer_addr();
    let result = (|| -> io::Result<()> {
        let server: SocketAddr = server?;
        loop {
            let now = Instant::now();
            let Some(began) = pace.take(now) else {
                match pace.due(now) {
                    Some(t) => {
                        sleep_until(t);
                        continue;
                    }
                    None => return Ok(()),
                }
            };
            let sent = pace.send_time(now);
            let mut s = crr_connect(&server, plan.idle, opening.len())?;
            rec.counts.connections += 1;
            s.write_all(&opening)?;
            tally.add(opening.len(), sent, &plan.counters);
            let mut got = 0u64;
            loop {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        got += n as u64;
                        if got == rr.response_bytes {
                            // timed to the last byte of the response, as rr and udp are; the
                            // server's close follows
                            rec.record(began, sent, Instant::now());
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            if got != rr.response_bytes {
                return Err(io::Error::other(format!(
                    "a response of {got} bytes, not {}",
                    rr.response_bytes
                )));
            }
        }
    })();
    let error = result.err().filter(|_| !plan.stop.load(Ordering::Relaxed));
    let _ = anchor.shutdown(Shutdown::Write);
    let _ = (&anchor).read(&mut buf);
    let (counts, seconds) = rec.finish();
    report(
        &plan,
        t0,
        &tally,
        counts,
        seconds,
        error.map(|e| describe(&e, "crr")),
    )
}

/// Opens one CRR connection. A blocking connect bounded by the send timeout (Linux applies
/// SO_SNDTIMEO to connect): two system calls fewer per transaction than a non-blocking
/// connect and a poll, and no switch back to blocking.
///
/// An opening that fits one segment of the smallest MSS (536 bytes) leaves Nagle's algorithm
/// on, which never holds a connection's first segment: one system call fewer again.
fn crr_connect(server: &SocketAddr, idle: Duration, opening: usize) -> io::Result<TcpStream> {
    let s = Socket::new(Domain::for_address(*server), Type::STREAM, None)?;
    s.set_write_timeout(Some(idle))?;
    s.set_read_timeout(Some(idle))?;
    if opening > 536 {
        s.set_nodelay(true)?;
    }
    s.connect(&(*server).into())?;
    Ok(s.into())
}

/// Server of one CRR flow: holds the anchor stream until the client closes it, and fails
/// when no transaction came for the idle timeout. The transactions are served by the
/// listener's connection threads (`serve_crr`) and counted in the route.
pub fn run_crr_anchor(mut anchor: TcpStream, route: Arc<CrrRoute>, plan: Plan) -> StreamReport {
    let t0 = ThreadTimes::now();
    let tally = Tally::new(&plan);
    let _ = anchor.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = [0u8; 64];
    let idle_ns = u64::try_from(plan.idle.as_nanos()).unwrap_or(u64::MAX);
    let error = loop {
        if plan.stop.load(Ordering::Relaxed) {
            break None;
        }
        match anchor.read(&mut buf) {
            Ok(0) => break None,
            Ok(_) => {}
            Err(e) if crate::net::timed_out(&e) => {
                let since = u64::try_from(route.since.elapsed().as_nanos()).unwrap_or(u64::MAX);
                let last = route.last_ns.load(Ordering::Relaxed);
                if since.saturating_sub(last) > idle_ns {
                    break Some("crr: no transaction for the idle timeout".to_string());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => break Some(describe(&e, "crr")),
        }
    };
    let _ = anchor.shutdown(Shutdown::Both);
    let served = route
        .served
        .get(plan.id as usize)
        .map_or(0, |c| c.load(Ordering::Relaxed));
    let counts = RrCounts {
        transactions: served,
        connections: served,
        ..Default::default()
    };
    let seconds = plan.start.elapsed().as_secs_f64();
    let mut r = report(&plan, t0, &tally, counts, seconds, error);
    // the transactions were served by the listener's threads: their CPU is this flow's
    let (user_s, sys_s) = route.cpu_share(plan.id as usize);
    r.user_s += user_s;
    r.sys_s += sys_s;
    r
}
