//! UDP streams of an iperf3 test, client side: the greeting that opens each stream, a paced
//! sender that stamps iperf3's header on every datagram, and a receiver that counts loss,
//! reordering and jitter. One thread per stream, as for TCP.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use socket2::SockRef;
use wirerate_core::side_report::{Role, SideReport, StreamReport};
use wirerate_core::spec::Flow;
use wirerate_core::TestSpec;
use wirerate_probe::cpu::{CpuWindow, ThreadTimes};
use wirerate_probe::evidence::EvidenceWindow;
use wirerate_probe::host::host_env;
use wirerate_probe::iface::interface_for;
use wirerate_proto::iperf3::map::{Side, StreamMap};
use wirerate_proto::iperf3::udp::{is_reply, Header, RecvStats, HELLO, REPLY};
use wirerate_proto::iperf3::Results;

use crate::error::EngineError;

/// A connected UDP stream that has exchanged iperf3's greeting.
pub struct UdpStream {
    flow: Flow,
    index: u32,
    role: Role,
    sock: UdpSocket,
}

impl UdpStream {
    pub fn new(flow: Flow, index: u32, role: Role, sock: UdpSocket) -> UdpStream {
        if role == Role::Receiver {
            let _ = SockRef::from(&sock).set_recv_buffer_size(RCVBUF);
        }
        UdpStream {
            flow,
            index,
            role,
            sock,
        }
    }
}

/// The server's side of UDP stream set-up, as iperf3 does it on its port: a socket bound to
/// the port takes a client's greeting, is connected to that client and becomes the stream,
/// and a fresh socket is bound to the port for the next greeting. Only greetings from the
/// control connection's peer are answered.
pub struct UdpAcceptor {
    listener: UdpSocket,
    local: SocketAddr,
    peer: IpAddr,
}

fn bind_shared(local: SocketAddr) -> io::Result<UdpSocket> {
    // several sockets share the port: the connected streams and the next listener
    let s = crate::net::bind_udp_shared(local)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

impl UdpAcceptor {
    pub fn bind(local: SocketAddr, peer: IpAddr) -> Result<UdpAcceptor, EngineError> {
        Ok(UdpAcceptor {
            listener: bind_shared(local).map_err(EngineError::io("binding the UDP port"))?,
            local,
            peer: peer.to_canonical(),
        })
    }

    /// One greeting, if one arrived: returns the socket connected to that stream's sender,
    /// after answering it.
    pub fn poll(&mut self) -> Result<Option<UdpSocket>, EngineError> {
        let mut buf = [0u8; 64];
        let (n, from) = match self.listener.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(EngineError::io("receiving a UDP greeting")(e)),
        };
        // iperf3 does not check the greeting's value; its size and sender are checked here
        if n != HELLO.len() || from.ip().to_canonical() != self.peer {
            return Ok(None);
        }
        let next = bind_shared(self.local).map_err(EngineError::io("binding the UDP port"))?;
        let sock = std::mem::replace(&mut self.listener, next);
        sock.connect(from)
            .and_then(|()| sock.set_nonblocking(false))
            .and_then(|()| sock.send(&REPLY).map(|_| ()))
            .map_err(EngineError::io("answering a UDP greeting"))?;
        Ok(Some(sock))
    }
}

/// Receive buffer asked for on receiving streams, so bursts are not dropped by this host.
const RCVBUF: usize = 4 << 20;

/// Opens every stream in iperf3's order, one greeting at a time (the server opens a fresh
/// listening socket for the next stream only after answering).
pub fn open(
    addr: SocketAddr,
    bind: Option<IpAddr>,
    dont_fragment: bool,
    spec: &TestSpec,
    map: &StreamMap,
    idle: Duration,
) -> Result<Vec<UdpStream>, EngineError> {
    let mut out = Vec::with_capacity(map.len());
    for e in &map.entries {
        let local = bind.unwrap_or(match addr {
            SocketAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
            SocketAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
        });
        let sock = UdpSocket::bind(SocketAddr::new(local, 0))
            .map_err(EngineError::io("opening an iperf3 UDP stream"))?;
        sock.connect(addr)
            .map_err(EngineError::io("connecting a UDP stream"))?;
        let role = Side::Client.role(e.flow);
        let sref = SockRef::from(&sock);
        if dont_fragment {
            crate::dataopts::set_dont_fragment(&sref)
                .map_err(EngineError::io("setting IP_MTU_DISCOVER"))?;
        }
        if let Some(w) = spec.window_bytes {
            let w = usize::try_from(w).unwrap_or(usize::MAX);
            let _ = sref.set_send_buffer_size(w);
            let _ = sref.set_recv_buffer_size(w);
        } else if role == Role::Receiver {
            // best effort: the kernel caps it at net.core.rmem_max
            let _ = sref.set_recv_buffer_size(RCVBUF);
        }
        greet(&sock, idle)?;
        out.push(UdpStream {
            flow: e.flow,
            index: e.index,
            role,
            sock,
        });
    }
    Ok(out)
}

/// Sends the greeting and waits for the answer. In a reverse test the server may already be
/// sending: a few data datagrams before the answer are skipped.
fn greet(sock: &UdpSocket, idle: Duration) -> Result<(), EngineError> {
    let err = EngineError::io("greeting the iperf3 server on a UDP stream");
    sock.send(&HELLO).map_err(err)?;
    sock.set_read_timeout(Some(idle))
        .map_err(EngineError::io("setting a UDP read timeout"))?;
    let mut buf = vec![0u8; 64 << 10];
    for _ in 0..3 {
        let n = sock.recv(&mut buf).map_err(EngineError::io(
            "waiting for the iperf3 server's UDP answer",
        ))?;
        if is_reply(&buf[..n]) {
            return Ok(());
        }
    }
    Err(EngineError::UdpUnanswered(
        "the iperf3 server did not answer the UDP greeting",
    ))
}

/// What a UDP worker leaves besides its stream report.
#[derive(Debug, Clone)]
pub struct UdpOutcome {
    pub flow: Flow,
    pub index: u32,
    /// Datagrams sent (sender) or the highest sequence number seen (receiver).
    pub packets: u64,
    pub stats: Option<RecvStats>,
}

type WorkerResult = (StreamReport, UdpOutcome);

struct Worker {
    role: Role,
    bytes: Arc<AtomicU64>,
    handle: Option<JoinHandle<WorkerResult>>,
}

/// The UDP streams of one side while they run.
pub struct UdpRun {
    start: Instant,
    workers: Vec<Worker>,
    stop: Arc<AtomicBool>,
    cpu: CpuWindow,
    ctl_t0: ThreadTimes,
    evidence: EvidenceWindow,
}

#[derive(Clone)]
struct Plan {
    spec: Arc<TestSpec>,
    start: Instant,
    idle: Duration,
    stop: Arc<AtomicBool>,
    bytes: Arc<AtomicU64>,
    /// 64-bit sequence numbers in the header (the client's `udp_counters_64bit`).
    wide: bool,
    flow: Flow,
    index: u32,
    role: Role,
}

impl UdpRun {
    /// Starts one thread per stream; if one cannot start, those already started are stopped
    /// and the error names the stream.
    pub fn start(
        spec: &TestSpec,
        streams: Vec<UdpStream>,
        idle: Duration,
        wide: bool,
    ) -> Result<UdpRun, EngineError> {
        let spec = Arc::new(spec.clone());
        let cpu = CpuWindow::start();
        let ctl_t0 = ThreadTimes::now();
        let ifname = streams
            .first()
            .and_then(|s| s.sock.local_addr().ok())
            .and_then(|a| interface_for(a.ip()));
        let evidence = EvidenceWindow::start(ifname.as_slice());
        let stop = Arc::new(AtomicBool::new(false));
        let start = Instant::now();
        let mut workers: Vec<Worker> = Vec::with_capacity(streams.len());
        for s in streams {
            let bytes = Arc::new(AtomicU64::new(0));
            let plan = Plan {
                spec: spec.clone(),
                start,
                idle,
                stop: stop.clone(),
                bytes: bytes.clone(),
                wide,
                flow: s.flow,
                index: s.index,
                role: s.role,
            };
            let sock = s.sock;
            let name = format!("wr-udp-{:?}-{}", s.role, s.index).to_lowercase();
            let spawned = spawn_stream(s.index, name, move || match plan.role {
                Role::Sender => send(sock, plan),
                Role::Receiver => receive(sock, plan),
            });
            match spawned {
                Ok(h) => workers.push(Worker {
                    role: s.role,
                    bytes,
                    handle: Some(h),
                }),
                Err(source) => {
                    // the streams already running stop within one receive timeout
                    stop.store(true, Ordering::Relaxed);
                    for w in &mut workers {
                        if let Some(h) = w.handle.take() {
                            let _ = h.join();
                        }
                    }
                    return Err(EngineError::StreamThread {
                        stream: s.index,
                        flow: s.flow,
                        started: workers.len(),
                        source,
                    });
                }
            }
        }
        Ok(UdpRun {
            start,
            workers,
            stop,
            cpu,
            ctl_t0,
            evidence,
        })
    }

    pub fn moved(&self, role: Role) -> u64 {
        self.workers
            .iter()
            .filter(|w| w.role == role)
            .map(|w| w.bytes.load(Ordering::Relaxed))
            .sum()
    }

    pub fn is_done(&self) -> bool {
        self.workers
            .iter()
            .all(|w| w.handle.as_ref().is_none_or(|h| h.is_finished()))
    }

    /// Stops every stream within one receive timeout.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub fn finish(mut self) -> (SideReport, Vec<UdpOutcome>) {
        self.stop();
        let mut streams = Vec::new();
        let mut outcomes = Vec::new();
        let mut threads = ThreadTimes::now().since(self.ctl_t0);
        for w in &mut self.workers {
            if let Some((r, o)) = w.handle.take().and_then(|h| h.join().ok()) {
                threads.user_s += r.user_s;
                threads.sys_s += r.sys_s;
                streams.push(r);
                outcomes.push(o);
            }
        }
        let cpu = self.cpu.finish(threads, self.start.elapsed().as_secs_f64());
        let report = SideReport {
            streams,
            intervals: Vec::new(),
            cpu: Some(cpu),
            host: host_env(),
            udp_host: None,
            evidence: Some(self.evidence.finish()),
            tcp_samples: Vec::new(),
            rr_rtt: None,
            rr_open_loop: None,
            sweep: None,
            inband: Vec::new(),
        };
        (report, outcomes)
    }
}

/// Starts one UDP stream's thread.
fn spawn_stream(
    index: u32,
    name: String,
    f: impl FnOnce() -> WorkerResult + Send + 'static,
) -> io::Result<JoinHandle<WorkerResult>> {
    #[cfg(test)]
    if tests::FAIL_SPAWN_OF.with(|c| c.get()) == Some(index) {
        return Err(io::Error::new(
            io::ErrorKind::OutOfMemory,
            "injected thread start failure",
        ));
    }
    let _ = index;
    std::thread::Builder::new().name(name).spawn(f)
}

fn wall_now() -> (u32, u32, f64) {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    // iperf3's header holds 32-bit seconds; it wraps in 2106
    (d.as_secs() as u32, d.subsec_micros(), d.as_secs_f64())
}

fn report(
    plan: &Plan,
    bytes: u64,
    calls: u64,
    last: Instant,
    t0: ThreadTimes,
    error: Option<String>,
) -> StreamReport {
    let times = ThreadTimes::now().since(t0);
    StreamReport {
        id: plan.index,
        flow: plan.flow,
        role: plan.role,
        bytes,
        counted_bytes: bytes,
        calls,
        counted_calls: calls,
        opened_s: None,
        seconds: last.saturating_duration_since(plan.start).as_secs_f64(),
        user_s: times.user_s,
        sys_s: times.sys_s,
        tcp: None,
        udp: None,
        error,
        sched: times.sched(),
        worker: None,
        rr: None,
    }
}

/// Sends `len`-byte datagrams at the spec's rate (per stream) until the end of the test.
fn send(sock: UdpSocket, plan: Plan) -> WorkerResult {
    let t0 = ThreadTimes::now();
    let spec = &plan.spec;
    let len = spec.len_bytes as usize;
    let mut buf = vec![0u8; len];
    let rate_bytes_s = spec.rate_bps.unwrap_or(1e6) / 8.0;
    let end_at = spec
        .send_seconds()
        .map(|s| plan.start + Duration::from_secs_f64(s));
    let limit = spec.bytes_per_stream(plan.index).unwrap_or(u64::MAX);
    let (mut bytes, mut seq, mut last, mut error) = (0u64, 0u64, plan.start, None);
    while !plan.stop.load(Ordering::Relaxed) && bytes < limit {
        let now = Instant::now();
        if end_at.is_some_and(|e| now >= e) {
            break;
        }
        let due = plan.start + Duration::from_secs_f64(bytes as f64 / rate_bytes_s);
        if now < due {
            std::thread::sleep((due - now).min(Duration::from_millis(2)));
            continue;
        }
        let (sec, usec, _) = wall_now();
        Header {
            sec,
            usec,
            seq: seq + 1,
        }
        .emit(&mut buf, plan.wide);
        match sock.send(&buf) {
            Ok(n) => {
                seq += 1;
                bytes += n as u64;
                last = Instant::now();
                plan.bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
            // a full queue on this host: try the same datagram again shortly
            Err(e)
                if e.raw_os_error() == Some(libc::ENOBUFS)
                    || e.kind() == io::ErrorKind::WouldBlock =>
            {
                std::thread::sleep(Duration::from_micros(100));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                if !plan.stop.load(Ordering::Relaxed) {
                    error = Some(format!("sending: {e}"));
                }
                break;
            }
        }
    }
    let r = report(&plan, bytes, seq, last, t0, error);
    let o = UdpOutcome {
        flow: plan.flow,
        index: plan.index,
        packets: seq,
        stats: None,
    };
    (r, o)
}

/// Receives until stopped; a stream silent for the idle timeout ends with an error.
fn receive(sock: UdpSocket, plan: Plan) -> WorkerResult {
    let t0 = ThreadTimes::now();
    let mut buf = vec![0u8; 64 << 10];
    let _ = sock.set_read_timeout(Some(Duration::from_millis(50)));
    let mut stats = RecvStats::default();
    let (mut last, mut error) = (plan.start, None);
    let mut heard = Instant::now();
    while !plan.stop.load(Ordering::Relaxed) {
        match sock.recv(&mut buf) {
            Ok(n) => {
                let Ok(h) = Header::parse(&buf[..n], plan.wide) else {
                    continue;
                };
                let (_, _, arrival) = wall_now();
                stats.on_datagram(&h, n, arrival);
                last = Instant::now();
                heard = last;
                plan.bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if crate::net::transient(&e) || e.kind() == io::ErrorKind::ConnectionRefused => {
                if heard.elapsed() > plan.idle {
                    error = Some(
                        "stream stalled while receiving: no datagram within the idle timeout"
                            .into(),
                    );
                    break;
                }
            }
            Err(e) => {
                error = Some(format!("receiving: {e}"));
                break;
            }
        }
    }
    let r = report(&plan, stats.bytes, stats.datagrams, last, t0, error);
    let o = UdpOutcome {
        flow: plan.flow,
        index: plan.index,
        packets: stats.highest_seq,
        stats: Some(stats),
    };
    (r, o)
}

/// iperf3's per-stream UDP fields in a side's results: datagrams sent, or the receiver's
/// highest sequence number, loss and jitter.
pub fn add_udp_figures(results: &mut Results, outcomes: &[UdpOutcome], map: &StreamMap) {
    for o in outcomes {
        let Some(e) = map.by_stream(o.flow, o.index) else {
            continue;
        };
        if let Some(s) = results.streams.iter_mut().find(|s| s.id == e.iperf_id) {
            s.packets = i64::try_from(o.packets).unwrap_or(i64::MAX);
            if let Some(st) = &o.stats {
                s.errors = i64::try_from(st.lost).unwrap_or(i64::MAX);
                s.jitter = st.jitter_s;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    thread_local! {
        /// The stream whose thread `spawn_stream` refuses to start, on this thread only.
        pub static FAIL_SPAWN_OF: Cell<Option<u32>> = const { Cell::new(None) };
    }

    /// A receiving stream on loopback, and the socket that would send to it.
    fn receiver(index: u32) -> (UdpStream, UdpSocket) {
        let mine = UdpSocket::bind("127.0.0.1:0").unwrap();
        let theirs = UdpSocket::bind("127.0.0.1:0").unwrap();
        mine.connect(theirs.local_addr().unwrap()).unwrap();
        theirs.connect(mine.local_addr().unwrap()).unwrap();
        (
            UdpStream::new(Flow::ClientToServer, index, Role::Receiver, mine),
            theirs,
        )
    }

    #[test]
    fn a_udp_stream_thread_that_cannot_start_fails_the_test_and_stops_the_others() {
        let spec = TestSpec {
            protocol: wirerate_core::Protocol::Udp,
            parallel: 3,
            ..Default::default()
        };
        let (streams, _peers): (Vec<_>, Vec<_>) = (0..3).map(receiver).unzip();
        FAIL_SPAWN_OF.with(|c| c.set(Some(2)));
        let t0 = Instant::now();
        let r = UdpRun::start(&spec, streams, Duration::from_secs(30), false);
        FAIL_SPAWN_OF.with(|c| c.set(None));
        let Err(e) = r else {
            panic!("the UDP streams started without stream 2")
        };
        let text = e.full();
        assert!(
            text.starts_with("cannot start the thread of stream 2 (client to server)"),
            "{text}"
        );
        assert!(text.contains("the 2 stream thread(s) already started were stopped"));
        assert!(text.ends_with("injected thread start failure"), "{text}");
        // the two receivers that had started were stopped and joined, not left waiting for
        // datagrams until their idle timeout
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    }

    #[test]
    fn udp_streams_start_when_nothing_fails() {
        let spec = TestSpec {
            protocol: wirerate_core::Protocol::Udp,
            parallel: 2,
            ..Default::default()
        };
        let (streams, _peers): (Vec<_>, Vec<_>) = (0..2).map(receiver).unzip();
        let run = UdpRun::start(&spec, streams, Duration::from_secs(30), false).expect("started");
        let (report, outcomes) = run.finish();
        assert_eq!(report.streams.len(), 2);
        assert_eq!(outcomes.len(), 2);
    }
}
