//! UDP streams: the paced sender, the receiver with its sequence and drop accounting, and the
//! address validation both ends run before a test (hello, challenge, proof over control).

use std::io;
use std::mem::MaybeUninit;
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
use crate::stream::{Plan, Tally};

/// How many end markers a sender sends, and how far apart.
const END_MARKERS: u32 = 3;
const END_GAP: Duration = Duration::from_millis(5);
/// A receiver wakes this often to check whether the test is over.
const POLL: Duration = Duration::from_millis(50);
/// Catch-up after a late wake-up is limited to this much debt, so pacing never bursts.
const MAX_DEBT: Duration = Duration::from_millis(5);

/// Sends datagrams of `len` bytes, evenly paced at the spec's rate (or unpaced), then the end
/// markers.
pub fn run_udp_sender(sock: UdpSocket, token: Token, plan: Plan) -> StreamReport {
    let t0 = ThreadTimes::now();
    let spec = &plan.spec;
    let len = spec.len_bytes.max(HEADER_LEN as u64) as usize;
    let mut buf = vec![0u8; len];
    for (i, b) in buf.iter_mut().enumerate().skip(HEADER_LEN) {
        *b = (i as u8).wrapping_mul(31).wrapping_add(7);
    }
    let header = Header {
        kind: Kind::Data,
        stream_id: plan.id,
        seq: 0,
        send_ns: 0,
        token,
    };
    header.emit(&mut buf);
    // pacing is by bytes, so a short last datagram takes a short slot
    let secs_per_byte = spec.rate_bps.map(|r| 8.0 / r);
    let end_at = spec
        .send_seconds()
        .map(|s| plan.start + Duration::from_secs_f64(s));
    let mut remaining = spec.bytes_per_stream(plan.id).unwrap_or(u64::MAX);
    let mut t = Tally::new(&plan);
    let mut stats = UdpStreamStats::default();
    // Each datagram goes out at the end of its slot, so n datagrams take n slots and a short
    // test's rate is not inflated by one datagram sent at time zero.
    let mut next = plan.start;
    let mut seq = 0u64;
    let _ = sock.set_write_timeout(Some(plan.idle));
    while remaining > 0 && !plan.stop.load(Ordering::Relaxed) {
        let mut now = Instant::now();
        if end_at.is_some_and(|e| now >= e) {
            break;
        }
        let n = (len as u64).min(remaining).max(HEADER_LEN as u64) as usize;
        if let Some(spb) = secs_per_byte {
            let mut due = next + Duration::from_secs_f64(n as f64 * spb);
            if now < due {
                std::thread::sleep(due - now);
                now = Instant::now();
            } else if now.duration_since(due) > MAX_DEBT {
                due = now - MAX_DEBT;
            }
            next = due;
        }
        if end_at.is_some_and(|e| now >= e) {
            break;
        }
        let send_ns = now.saturating_duration_since(plan.start).as_nanos() as u64;
        Header::stamp(&mut buf, seq, send_ns);
        match sock.send(&buf[..n]) {
            Ok(sent) => {
                seq += 1;
                remaining = remaining.saturating_sub(sent as u64);
                t.add(sent, now, &plan.counters);
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => stats.enobufs += 1,
            // the receiver's port answered with ICMP unreachable, or a signal: keep pacing
            Err(_) => {}
        }
    }
    stats.packets = seq;
    send_end_markers(&sock, token, plan.id, seq);
    let mut report = t.report(&plan, t0, None);
    report.udp = Some(stats);
    report
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

/// One recvmsg: the datagram's length, its source, and the socket's cumulative drop count
/// when the kernel attached one.
fn recv_with_drops(
    sock: &UdpSocket,
    buf: &mut [u8],
) -> io::Result<(usize, Option<SocketAddr>, Option<u32>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut name = MaybeUninit::<libc::sockaddr_storage>::zeroed();
    let mut control = [0u64; 8]; // 64 bytes, aligned for cmsghdr
                                 // SAFETY: msghdr is plain data; every pointer in it refers to a live buffer above whose
                                 // length is given alongside it.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = name.as_mut_ptr().cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut drops = None;
    // SAFETY: the CMSG macros walk the control buffer the kernel filled, bounded by
    // msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SO_RXQ_OVFL {
                drops = Some(std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const u32));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    // SAFETY: the kernel wrote a sockaddr of msg_namelen bytes into `name`.
    let src = unsafe { socket2::SockAddr::new(name.assume_init(), msg.msg_namelen) }.as_socket();
    Ok((n as usize, src, drops))
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
    let mut buf = vec![0u8; 65_536];
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
    let mut error = None;
    loop {
        match recv_with_drops(&sock, &mut buf) {
            Ok((n, src, drops)) => {
                let now = Instant::now();
                if drops.is_some() {
                    last_drops = drops;
                }
                let from_peer = peer.is_none_or(|p| src == Some(p));
                match Header::parse(&buf[..n]) {
                    Ok(h) if from_peer && h.stream_id == plan.id && token_eq(&h.token, &token) => {
                        match h.kind {
                            Kind::Data => {
                                last_heard = now;
                                let arrival =
                                    now.saturating_duration_since(plan.start).as_secs_f64();
                                let before = stats.packets;
                                stats.on_data(h.seq, h.send_ns as f64 / 1e9, arrival);
                                if stats.packets > before {
                                    t.add(n, now, &plan.counters);
                                    plan.counters.packets.fetch_add(1, Ordering::Relaxed);
                                    let span = stats.max_seq.map_or(0, |m| m.saturating_add(1));
                                    plan.counters.span.store(span, Ordering::Relaxed);
                                }
                            }
                            Kind::End => break,
                            _ => extra.foreign += 1,
                        }
                    }
                    _ => extra.foreign += 1,
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
