//! UDP streams: the paced sender, the receiver with its sequence and drop accounting, and the
//! address validation both ends run before a test (hello, challenge, proof over control).

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use socket2::SockRef;
use wirerate_core::report::StreamReport;
use wirerate_core::spec::Flow;
use wirerate_core::udp::{RecvStats, UdpStreamStats};
use wirerate_probe::cpu::ThreadTimes;
use wirerate_proto::data::token_eq;
use wirerate_proto::datagram::{Header, Kind, HEADER_LEN};
use wirerate_proto::msg::UdpProof;
use wirerate_proto::Token;

use crate::error::EngineError;
use crate::mmsg::{self, RecvBatch, SendBatch};
use crate::stream::{Plan, Tally};

/// How many end markers a sender sends, and how far apart.
const END_MARKERS: u32 = 3;
const END_GAP: Duration = Duration::from_millis(5);
/// A receiver wakes this often to check whether the test is over.
const POLL: Duration = Duration::from_millis(50);
/// Catch-up after a late wake-up is limited to this much debt, so pacing never bursts.
const MAX_DEBT: Duration = Duration::from_millis(5);

/// Sends datagrams of `len` bytes, evenly paced at the spec's rate (or unpaced), then the end
/// markers. Every datagram that is due goes out in one `sendmmsg`, so a high rate costs one
/// wake-up per batch instead of one per datagram.
pub fn run_udp_sender(sock: UdpSocket, token: Token, plan: Plan) -> StreamReport {
    let t0 = ThreadTimes::now();
    let spec = &plan.spec;
    let len = spec.len_bytes.max(HEADER_LEN as u64) as usize;
    let mut template = vec![0u8; len];
    for (i, b) in template.iter_mut().enumerate().skip(HEADER_LEN) {
        *b = (i as u8).wrapping_mul(31).wrapping_add(7);
    }
    Header {
        kind: Kind::Data,
        stream_id: plan.id,
        seq: 0,
        send_ns: 0,
        token,
    }
    .emit(&mut template);
    let mut error = None;
    let count = if spec.gso {
        if let Err(e) = mmsg::enable_gso(&sock, len) {
            error = Some(format!(
                "UDP GSO (UDP_SEGMENT) is not available on this host: {e}"
            ));
        }
        mmsg::gso_batch_for(len)
    } else {
        mmsg::batch_for(len)
    };
    let mut batch = SendBatch::new(count, &template);
    drop(template);
    let mut pace = spec.rate_bps.map(|r| Pacer::new(plan.start, 8.0 / r));
    // the slots are waited for on a timer at absolute times (a sleep, should the kernel
    // refuse a timerfd)
    let mut timer = pace.as_ref().and_then(|_| crate::timer::Timer::new().ok());
    let end_at = spec
        .send_seconds()
        .map(|s| plan.start + Duration::from_secs_f64(s));
    let mut remaining = spec.bytes_per_stream(plan.id).unwrap_or(u64::MAX);
    if error.is_some() {
        remaining = 0;
    }
    let mut t = Tally::new(&plan);
    let mut stats = UdpStreamStats::default();
    let mut seq = 0u64;
    let mut lens = [0usize; mmsg::MAX_BATCH];
    let _ = sock.set_write_timeout(Some(plan.idle));
    while remaining > 0 && !plan.stop.load(Ordering::Relaxed) {
        let mut now = Instant::now();
        if end_at.is_some_and(|e| now >= e) {
            break;
        }
        // the sizes of the datagrams that go out now: a short last one takes a short slot
        let size = |left: u64| (len as u64).min(left).max(HEADER_LEN as u64) as usize;
        let count = match pace.as_mut() {
            Some(p) => {
                now = p.wait_for_first(size(remaining), now, timer.as_mut());
                if end_at.is_some_and(|e| now >= e) {
                    break;
                }
                p.due(now, remaining, size, &mut lens[..batch.capacity()])
            }
            None => {
                let mut left = remaining;
                let mut k = 0;
                while k < batch.capacity() && left > 0 {
                    lens[k] = size(left);
                    left = left.saturating_sub(lens[k] as u64);
                    k += 1;
                }
                k
            }
        };
        let send_ns = now.saturating_duration_since(plan.start).as_nanos() as u64;
        for (i, s) in (0..count).zip(seq..) {
            Header::stamp(batch.slot_mut(i), s, send_ns);
        }
        let sent = if spec.gso {
            batch.send_gso(&sock, &lens[..count])
        } else {
            batch.send(&sock, &lens[..count])
        };
        match sent {
            Ok(k) => {
                let bytes: usize = lens[..k].iter().sum();
                seq += k as u64;
                remaining = remaining.saturating_sub(bytes as u64);
                t.add(bytes, now, &plan.counters);
                if let Some(p) = pace.as_mut() {
                    p.advance(&lens[..k.max(1)]);
                }
            }
            Err(e) => {
                if e.raw_os_error() == Some(libc::ENOBUFS) {
                    stats.enobufs += 1;
                }
                // a refused datagram (ENOBUFS, or ICMP unreachable from the receiver's
                // port) still takes its slot, so pacing keeps its rate
                if let Some(p) = pace.as_mut() {
                    p.advance(&lens[..1]);
                }
            }
        }
    }
    stats.packets = seq;
    send_end_markers(&sock, token, plan.id, seq);
    let mut report = t.report(&plan, t0, error);
    report.udp = Some(stats);
    report
}

/// The byte-slot schedule of a paced sender: each datagram owns a slot as long as its bytes
/// take at the target rate and goes out when its slot ends, so n datagrams take n slots and a
/// short test's rate is not inflated by one datagram sent at time zero.
struct Pacer {
    /// Where the next datagram's slot begins.
    next: Instant,
    secs_per_byte: f64,
}

impl Pacer {
    fn new(start: Instant, secs_per_byte: f64) -> Pacer {
        Pacer {
            next: start,
            secs_per_byte,
        }
    }

    fn slot(&self, bytes: usize) -> Duration {
        Duration::from_secs_f64(bytes as f64 * self.secs_per_byte)
    }

    /// Waits until the first datagram (of `bytes`) is due and returns the time then. After a
    /// late wake-up the schedule keeps at most [`MAX_DEBT`] of debt, so pacing never bursts.
    fn wait_for_first(
        &mut self,
        bytes: usize,
        now: Instant,
        timer: Option<&mut crate::timer::Timer>,
    ) -> Instant {
        let due = self.next + self.slot(bytes);
        if now < due {
            return match timer {
                Some(t) => t.wait_until(due),
                None => {
                    std::thread::sleep(due - now);
                    Instant::now()
                }
            };
        }
        if now.duration_since(due) > MAX_DEBT {
            self.next = (now - MAX_DEBT)
                .checked_sub(self.slot(bytes))
                .unwrap_or(self.next);
        }
        now
    }

    /// Fills `lens` with the sizes of the datagrams whose slots have ended by `now` (at least
    /// one, at most `lens.len()`); returns how many.
    fn due(
        &self,
        now: Instant,
        mut left: u64,
        size: impl Fn(u64) -> usize,
        lens: &mut [usize],
    ) -> usize {
        let mut end = self.next;
        let mut k = 0;
        while k < lens.len() && left > 0 {
            let n = size(left);
            end += self.slot(n);
            if k > 0 && end > now {
                break;
            }
            lens[k] = n;
            left = left.saturating_sub(n as u64);
            k += 1;
        }
        k
    }

    /// The datagrams of `lens` have had their slots.
    fn advance(&mut self, lens: &[usize]) {
        for &n in lens {
            self.next += self.slot(n);
        }
    }
}

fn send_end_markers(sock: &UdpSocket, token: Token, id: u32, sent: u64) {
    let mut b = [0u8; HEADER_LEN];
    Header {
        kind: Kind::End,
        stream_id: id,
        seq: sent,
        send_ns: 0,
        token,
    }
    .emit(&mut b);
    for i in 0..END_MARKERS {
        if i > 0 {
            std::thread::sleep(END_GAP);
        }
        let _ = sock.send(&b);
    }
}

/// Turns on the per-socket drop counter that recvmsg reports; false if the kernel refuses.
fn enable_rxq_ovfl(sock: &UdpSocket) -> bool {
    let one: libc::c_int = 1;
    // SAFETY: a pointer to a live int and its size.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RXQ_OVFL,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// Receives until the end markers arrive, the test is stopped, or the peer is done and the
/// socket has been quiet for a moment.
pub fn run_udp_receiver(
    sock: UdpSocket,
    token: Token,
    peer: Option<SocketAddr>,
    plan: Plan,
) -> StreamReport {
    let t0 = ThreadTimes::now();
    let counts_drops = enable_rxq_ovfl(&sock);
    let _ = SockRef::from(&sock).set_recv_buffer_size(
        plan.spec
            .rcvbuf_bytes
            .or(plan.spec.window_bytes)
            .unwrap_or(4 << 20) as usize,
    );
    let _ = sock.set_read_timeout(Some(POLL));
    let mut error = None;
    let slot = if plan.spec.gro {
        if let Err(e) = mmsg::enable_gro(&sock) {
            error = Some(format!(
                "UDP GRO (UDP_GRO) is not available on this host: {e}"
            ));
        }
        mmsg::GRO_SLOT
    } else {
        plan.spec.len_bytes.clamp(HEADER_LEN as u64, 65_536) as usize
    };
    let mut batch = RecvBatch::new(mmsg::batch_for(slot), slot);
    let mut t = Tally::new(&plan);
    let mut stats = RecvStats::default();
    let mut extra = UdpStreamStats::default();
    let mut last_drops: Option<u32> = None;
    let quiet_end = plan
        .spec
        .send_seconds()
        .map(|s| plan.start + Duration::from_secs_f64(s) + plan.idle);
    let mut last_heard = Instant::now();
    let silence = silence_limit(&plan);
    'recv: while error.is_none() {
        match batch.recv(&sock) {
            Ok(got) => {
                // one clock read per batch: its datagrams were queued together
                let now = Instant::now();
                let arrival = now.saturating_duration_since(plan.start).as_secs_f64();
                let mut bytes = 0usize;
                let mut ended = false;
                // a GRO read may hold several datagrams of one segment size each
                let datagrams = (0..got).filter_map(|i| batch.get(i)).flat_map(|d| {
                    let seg = d.segment.unwrap_or(d.data.len()).max(1);
                    let (src, drops) = (d.src, d.drops);
                    d.data.chunks(seg).map(move |data| (data, src, drops))
                });
                for (data, src, drops) in datagrams {
                    if drops.is_some() {
                        last_drops = drops;
                    }
                    let from_peer = peer.is_none_or(|p| src == Some(p));
                    match Header::parse(data) {
                        Ok(h)
                            if from_peer
                                && h.stream_id == plan.id
                                && token_eq(&h.token, &token) =>
                        {
                            match h.kind {
                                Kind::Data => {
                                    last_heard = now;
                                    let before = stats.packets;
                                    stats.on_data(h.seq, h.send_ns as f64 / 1e9, arrival);
                                    if stats.packets > before {
                                        bytes += data.len();
                                        plan.counters.packets.fetch_add(1, Ordering::Relaxed);
                                    }
                                }
                                Kind::End => {
                                    ended = true;
                                    break;
                                }
                                _ => extra.foreign += 1,
                            }
                        }
                        _ => extra.foreign += 1,
                    }
                }
                if bytes > 0 {
                    t.add(bytes, now, &plan.counters);
                    let span = stats.max_seq.map_or(0, |m| m.saturating_add(1));
                    plan.counters.span.store(span, Ordering::Relaxed);
                }
                if ended {
                    break 'recv;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            // ICMP errors from an earlier send, or the socket was shut down to stop us
            Err(_) => {}
        }
        let now = Instant::now();
        if plan.stop.load(Ordering::Relaxed) {
            break;
        }
        if plan.peer_done.load(Ordering::Relaxed) && now.duration_since(last_heard) >= POLL {
            break;
        }
        if quiet_end.is_some_and(|e| now >= e) {
            break;
        }
        // silence ends a timed test too: a sender that vanished (or whose cable was pulled)
        // must not hold the receiver for the rest of the requested time
        if now.duration_since(last_heard) > silence {
            if quiet_end.is_some() && !plan.stop.load(Ordering::Relaxed) {
                error = Some(format!(
                    "{} while receiving: no datagram for {:.1} s",
                    crate::stream::STALLED,
                    silence.as_secs_f64()
                ));
            }
            break;
        }
    }
    extra.packets = stats.packets;
    extra.out_of_order = stats.out_of_order;
    extra.duplicates = stats.duplicates;
    extra.jitter_ms = stats.jitter_ms();
    // SO_RXQ_OVFL is cumulative since the socket was made and only attached once nonzero, so
    // its last value is the total and its absence means none
    extra.socket_drops = counts_drops.then(|| u64::from(last_drops.unwrap_or(0)));
    let mut report = t.report(&plan, t0, error);
    report.udp = Some(extra);
    report
}

/// How long a UDP receiver waits for a datagram before it takes the sender for gone: the
/// idle timeout, or three datagram gaps of a slowly paced stream.
fn silence_limit(plan: &Plan) -> Duration {
    let gap = plan
        .spec
        .rate_bps
        .map_or(0.0, |r| plan.spec.len_bytes as f64 * 8.0 / r);
    plan.idle
        .max(Duration::from_secs_f64((3.0 * gap).min(3600.0)))
}

/// A client's UDP stream after validation: connected to its server port.
pub struct ClientUdp {
    pub flow: Flow,
    pub id: u32,
    pub sock: UdpSocket,
    pub nonce: u64,
}

/// Opens one UDP socket per stream, says hello to its server port until the challenge comes,
/// and returns the sockets with the nonces to prove over control.
pub fn client_setup(
    server: IpAddr,
    ports: &[u16],
    streams: &[(Flow, u32)],
    bind: Option<IpAddr>,
    cport: Option<u16>,
    token: Token,
    idle: Duration,
) -> Result<Vec<ClientUdp>, EngineError> {
    if ports.len() != streams.len() {
        return Err(EngineError::Setup(format!(
            "server offered {} UDP ports for {} streams",
            ports.len(),
            streams.len()
        )));
    }
    let mut out = Vec::new();
    for (i, (&(flow, id), &port)) in streams.iter().zip(ports).enumerate() {
        let local = bind.unwrap_or(if server.is_ipv4() {
            IpAddr::from([0u8; 4])
        } else {
            IpAddr::from([0u16; 8])
        });
        let local_port = crate::net::data_port(cport, i)?;
        let sock = UdpSocket::bind((local, local_port))
            .map_err(EngineError::io("binding a UDP socket"))?;
        sock.connect((server, port))
            .map_err(EngineError::io("connecting a UDP socket"))?;
        let nonce = hello_until_challenge(&sock, token, id, idle)?;
        out.push(ClientUdp {
            flow,
            id,
            sock,
            nonce,
        });
    }
    Ok(out)
}

fn hello_until_challenge(
    sock: &UdpSocket,
    token: Token,
    id: u32,
    idle: Duration,
) -> Result<u64, EngineError> {
    let mut hello = [0u8; HEADER_LEN];
    Header {
        kind: Kind::Hello,
        stream_id: id,
        seq: 0,
        send_ns: 0,
        token,
    }
    .emit(&mut hello);
    let deadline = Instant::now() + idle;
    let mut buf = [0u8; 512];
    let _ = sock.set_read_timeout(Some(Duration::from_millis(200)));
    while Instant::now() < deadline {
        let _ = sock.send(&hello);
        if let Ok(n) = sock.recv(&mut buf) {
            if let Ok(h) = Header::parse(&buf[..n]) {
                if h.kind == Kind::Challenge && h.stream_id == id && token_eq(&h.token, &token) {
                    return Ok(h.seq);
                }
            }
        }
    }
    Err(EngineError::Setup(
        "the server's UDP port did not answer (a firewall dropping UDP?)".into(),
    ))
}

/// The server's side of one UDP stream before the test: answers hellos from the control
/// peer's address with a challenge, at most one datagram per hello received (well under the
/// anti-amplification limit of 3× what the address sent).
pub struct Binder {
    pub flow: Flow,
    pub id: u32,
    pub sock: UdpSocket,
    pub port: u16,
    nonce: u64,
    peer: Option<SocketAddr>,
}

impl Binder {
    pub fn bind(local: IpAddr, flow: Flow, id: u32) -> Result<Binder, EngineError> {
        let sock = UdpSocket::bind((local, 0)).map_err(EngineError::io("binding a UDP socket"))?;
        let port = sock
            .local_addr()
            .map_err(EngineError::io("reading a UDP port"))?
            .port();
        let mut n = [0u8; 8];
        n.copy_from_slice(&crate::net::random_token()?[..8]);
        let _ = sock.set_nonblocking(true);
        Ok(Binder {
            flow,
            id,
            sock,
            port,
            nonce: u64::from_be_bytes(n),
            peer: None,
        })
    }

    /// Answers whatever hellos have arrived. `peer_ip` is the control connection's peer.
    pub fn poll(&mut self, token: &Token, peer_ip: IpAddr) {
        let mut buf = [0u8; 512];
        while let Ok((n, src)) = self.sock.recv_from(&mut buf) {
            let same_host = src.ip() == peer_ip || map_v4(src.ip()) == map_v4(peer_ip);
            let Ok(h) = Header::parse(&buf[..n]) else {
                continue;
            };
            if !same_host
                || h.kind != Kind::Hello
                || h.stream_id != self.id
                || !token_eq(&h.token, token)
            {
                continue;
            }
            let mut c = [0u8; HEADER_LEN];
            Header {
                kind: Kind::Challenge,
                stream_id: self.id,
                seq: self.nonce,
                send_ns: 0,
                token: *token,
            }
            .emit(&mut c);
            if n >= HEADER_LEN && self.sock.send_to(&c, src).is_ok() {
                self.peer = Some(src);
            }
        }
    }

    /// Checks a proof; on success the stream's peer address is known and proven.
    pub fn verify(&self, p: &UdpProof) -> Option<SocketAddr> {
        (p.flow == self.flow && p.stream_id == self.id && p.nonce == self.nonce)
            .then_some(self.peer)
            .flatten()
    }
}

fn map_v4(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1 µs per byte: a 100-byte datagram owns a 100 µs slot.
    fn pacer(start: Instant) -> Pacer {
        Pacer::new(start, 1e-6)
    }

    #[test]
    fn every_due_datagram_goes_in_one_batch() {
        let start = Instant::now();
        let p = pacer(start);
        let mut lens = [0usize; 8];
        let size = |left: u64| left.min(100) as usize;
        // 350 µs in: the slots ending at 100, 200 and 300 µs are due, not the one at 400
        let k = p.due(start + Duration::from_micros(350), 10_000, size, &mut lens);
        assert_eq!(k, 3);
        // the first slot goes out even when the clock reads a hair early
        assert_eq!(p.due(start, 10_000, size, &mut lens), 1);
        // never more than the batch, never past the bytes left (a short last datagram)
        let late = start + Duration::from_secs(1);
        assert_eq!(p.due(late, 10_000, size, &mut lens), 8);
        assert_eq!(p.due(late, 250, size, &mut lens), 3);
        assert_eq!(lens[..3], [100, 100, 50]);
    }

    #[test]
    fn sent_slots_move_the_schedule_and_debt_is_bounded() {
        let start = Instant::now();
        let mut p = pacer(start);
        p.advance(&[100, 100, 50]);
        assert_eq!(p.next, start + Duration::from_micros(250));
        // a wake-up 1 s late keeps only MAX_DEBT of debt: the next slot ends MAX_DEBT ago
        let now = start + Duration::from_secs(1);
        assert_eq!(p.wait_for_first(100, now, None), now);
        assert_eq!(p.next + p.slot(100), now - MAX_DEBT);
    }
}
