//! Latency probes beside a running test (`wirerate rpm`): both ends of the probe
//! connection (docs/protocol.md, "Latency probes").
//!
//! A probe is a new TCP connection to the server's port whose data hello carries the running
//! session's token and the stream id [`PROBE_STREAM_ID`], followed by one byte; the server
//! answers each byte with one byte. The client times the connect (the handshake's round
//! trip) and, once the first byte has come back, a second 1-byte request/response on the new
//! connection (the first waits for the server to route the connection), then closes.

use std::io::Write as _;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use wirerate_core::spec::Flow;
use wirerate_proto::data::PROBE_STREAM_ID;
use wirerate_proto::{DataHello, Token};

use crate::net::read_exact_by;

/// Probe connections one server serves at once; more are closed at once.
pub const MAX_PROBES_SERVED: usize = 64;
/// Exchanges one probe connection may make (a probe makes one).
const MAX_EXCHANGES: u32 = 1000;
/// Probes one client keeps in flight; a probe due while this many wait is skipped.
pub const MAX_PROBES_IN_FLIGHT: usize = 48;
/// How long a probe waits for its connect and for its answer.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

static SERVED: AtomicUsize = AtomicUsize::new(0);

struct Slot;

impl Drop for Slot {
    fn drop(&mut self) {
        SERVED.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serves a probe connection on a thread of its own (the caller may be the listener); its
/// answers carry `tos` (the running test's class for probe answers).
pub fn serve_detached(sock: TcpStream, idle: Duration, tos: Option<u8>) -> Result<(), String> {
    if SERVED.fetch_add(1, Ordering::Relaxed) >= MAX_PROBES_SERVED {
        SERVED.fetch_sub(1, Ordering::Relaxed);
        return Err(format!(
            "more than {MAX_PROBES_SERVED} latency probes at once"
        ));
    }
    let slot = Slot;
    std::thread::Builder::new()
        .name("wr-probe".into())
        .spawn(move || {
            let _slot = slot;
            if let Some(tos) = tos {
                let _ = crate::net::set_tos(&socket2::SockRef::from(&sock), tos);
            }
            serve(sock, idle);
        })
        .map(drop)
        .map_err(|e| format!("no thread for a latency probe: {e}"))
}

/// Answers each byte with one byte until the client closes, goes silent for `idle`, or has
/// made [`MAX_EXCHANGES`].
fn serve(mut sock: TcpStream, idle: Duration) {
    let _ = sock.set_nodelay(true);
    let _ = sock.set_write_timeout(Some(idle));
    let mut b = [0u8; 1];
    for _ in 0..MAX_EXCHANGES {
        if read_exact_by(&mut sock, &mut b, Instant::now() + idle).is_err()
            || sock.write_all(&b).is_err()
        {
            return;
        }
    }
}

/// One probe's figures: when it started (seconds from the prober's epoch), its connect
/// time, and its request/response time (None when the answer never came).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeSample {
    pub at_s: f64,
    pub connect_ms: f64,
    pub request_ms: Option<f64>,
}

/// What a prober gathered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbeLog {
    pub samples: Vec<ProbeSample>,
    /// Probes that could not connect, got no answer, or were skipped (too many in flight).
    pub failed: u64,
    /// The UDP probes, sent at the same rate beside the TCP ones.
    pub udp: crate::udp_probe::UdpProbeLog,
}

/// Sends probes at a fixed rate on a thread until [`Prober::finish`]: a TCP probe and a
/// UDP probe (`crate::udp_probe`) each period.
pub struct Prober {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<ProbeLog>,
    udp: crate::udp_probe::UdpProber,
}

impl Prober {
    /// Starts probing `addr` with the session's `token`, `rate_hz` probes a second, the
    /// first at once; times are taken from `epoch`. `tos`: the probes' TOS byte.
    pub fn start(
        addr: SocketAddr,
        token: Token,
        rate_hz: f64,
        epoch: Instant,
        tos: Option<u8>,
    ) -> Prober {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let period = Duration::from_secs_f64(1.0 / rate_hz.clamp(0.1, 1000.0));
        let handle = std::thread::spawn(move || schedule(addr, token, period, epoch, tos, &flag));
        let udp = crate::udp_probe::UdpProber::start(addr, token, period, epoch, tos);
        Prober { stop, handle, udp }
    }

    /// Stops sending; the probes in flight go on.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.udp.stop();
    }

    /// Stops sending and returns what came back (waits for the probes in flight, at most
    /// twice [`PROBE_TIMEOUT`]).
    pub fn finish(self) -> ProbeLog {
        self.stop();
        let udp = self.udp.finish();
        ProbeLog {
            udp,
            ..self.handle.join().unwrap_or_default()
        }
    }
}

fn schedule(
    addr: SocketAddr,
    token: Token,
    period: Duration,
    epoch: Instant,
    tos: Option<u8>,
    stop: &AtomicBool,
) -> ProbeLog {
    let (tx, rx) = mpsc::channel();
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut log = ProbeLog::default();
    let mut threads = Vec::new();
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(20)));
            continue;
        }
        next += period;
        if in_flight.load(Ordering::Relaxed) >= MAX_PROBES_IN_FLIGHT {
            log.failed += 1;
            continue;
        }
        in_flight.fetch_add(1, Ordering::Relaxed);
        let (tx, busy) = (tx.clone(), in_flight.clone());
        threads.push(std::thread::spawn(move || {
            let r = probe(addr, token, epoch, tos);
            busy.fetch_sub(1, Ordering::Relaxed);
            let _ = tx.send(r);
        }));
    }
    drop(tx);
    for t in threads {
        let _ = t.join();
    }
    for r in rx {
        match r {
            Some(s) if s.request_ms.is_some() => log.samples.push(s),
            Some(s) => {
                log.samples.push(s);
                log.failed += 1;
            }
            None => log.failed += 1,
        }
    }
    log.samples.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    log
}

/// One probe: None when it could not connect.
fn probe(addr: SocketAddr, token: Token, epoch: Instant, tos: Option<u8>) -> Option<ProbeSample> {
    let s = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        None,
    )
    .ok()?;
    // marked from the SYN on, so the connect time is the class's own
    if let Some(tos) = tos {
        let _ = crate::net::set_tos(&socket2::SockRef::from(&s), tos);
    }
    let t0 = Instant::now();
    let connected = s.connect_timeout(&addr.into(), PROBE_TIMEOUT);
    let t1 = Instant::now();
    connected.ok()?;
    let mut sock = TcpStream::from(s);
    let _ = sock.set_nodelay(true);
    let hello = DataHello {
        token,
        flow: Flow::ClientToServer,
        stream_id: PROBE_STREAM_ID,
    };
    let mut out = hello.emit().to_vec();
    out.push(1);
    let mut b = [0u8; 1];
    // the first answer waits for the server to route the new connection (its accept, a
    // thread): untimed; the second is the path's round trip and a byte's echo
    let routed = sock.write_all(&out).is_ok()
        && read_exact_by(&mut sock, &mut b, Instant::now() + PROBE_TIMEOUT).is_ok();
    let t2 = Instant::now();
    let answered = routed
        && sock.write_all(&b).is_ok()
        && read_exact_by(&mut sock, &mut b, t2 + PROBE_TIMEOUT).is_ok();
    let t3 = Instant::now();
    Some(ProbeSample {
        at_s: t0.saturating_duration_since(epoch).as_secs_f64(),
        connect_ms: (t1 - t0).as_secs_f64() * 1e3,
        request_ms: answered.then(|| (t3 - t2).as_secs_f64() * 1e3),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;
    use std::net::TcpListener;
    use wirerate_proto::data::DATA_HELLO_LEN;

    /// A stand-in server: checks each probe's hello, then answers as `serve` does.
    fn echo_server(l: TcpListener, token: Token, stop: Arc<AtomicBool>) -> JoinHandle<u32> {
        l.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            let mut hellos = 0;
            while !stop.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((mut s, _)) => {
                        s.set_nonblocking(false).unwrap();
                        let mut h = [0u8; DATA_HELLO_LEN];
                        s.read_exact(&mut h).unwrap();
                        let hello = wirerate_proto::DataHello::parse_after_preamble(
                            &h[wirerate_proto::frame::PREAMBLE_LEN..],
                        )
                        .unwrap();
                        assert_eq!((hello.token, hello.stream_id), (token, PROBE_STREAM_ID));
                        hellos += 1;
                        std::thread::spawn(move || serve(s, Duration::from_secs(2)));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
            hellos
        })
    }

    #[test]
    fn probes_time_connect_and_a_second_exchange() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let server = echo_server(l, [5; 16], stop.clone());
        let p = Prober::start(addr, [5; 16], 50.0, Instant::now(), Some(0xb8));
        std::thread::sleep(Duration::from_millis(300));
        let log = p.finish();
        stop.store(true, Ordering::Relaxed);
        let hellos = server.join().unwrap();
        // 50 a second for 0.3 s: about 15, the first at once
        assert!((5..=25).contains(&log.samples.len()), "{log:?}");
        assert_eq!(log.failed, 0, "{log:?}");
        assert_eq!(hellos as usize, log.samples.len());
        assert!(log.samples.windows(2).all(|w| w[0].at_s <= w[1].at_s));
        for s in &log.samples {
            assert!(s.connect_ms > 0.0 && s.connect_ms < 1000.0, "{s:?}");
            assert!(s.request_ms.is_some_and(|r| r > 0.0 && r < 1000.0), "{s:?}");
        }
    }

    #[test]
    fn probes_to_nothing_are_counted_failed() {
        let addr = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        // the listener is gone: every connect is refused
        let p = Prober::start(addr, [1; 16], 50.0, Instant::now(), None);
        std::thread::sleep(Duration::from_millis(200));
        let log = p.finish();
        assert!(log.samples.is_empty(), "{log:?}");
        assert!(log.failed >= 3, "{log:?}");
    }

    #[test]
    fn a_server_that_closes_unanswered_counts_failed_with_its_connect() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            // like a server that does not know probes: reads the hello, closes
            let (mut s, _) = l.accept().unwrap();
            let mut h = [0u8; DATA_HELLO_LEN];
            let _ = s.read_exact(&mut h);
        });
        let log = {
            let p = Prober::start(addr, [1; 16], 1.0, Instant::now(), None);
            std::thread::sleep(Duration::from_millis(100));
            p.finish()
        };
        t.join().unwrap();
        assert_eq!(log.samples.len(), 1, "{log:?}");
        assert_eq!(log.samples[0].request_ms, None);
        assert_eq!(log.failed, 1);
    }
}
