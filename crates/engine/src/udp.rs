//! UDP streams: the paced sender, the receiver with its sequence and drop accounting, and the
//! address validation both ends run before a test (hello, challenge, proof over control).

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use socket2::SockRef;
use wirerate_core::side_report::StreamReport;
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
pub(crate) const END_MARKERS: u32 = 3;
pub(crate) const END_GAP: Duration = Duration::from_millis(5);
/// A receiver wakes this often to check whether the test is over.
const POLL: Duration = Duration::from_millis(50);
/// Catch-up after a late wake-up is limited to this much debt, so pacing never bursts.
const MAX_DEBT: Duration = Duration::from_millis(5);
/// A paced sender wakes at most this often and sends every datagram whose slot has ended in
/// one call. Waking for each datagram's slot (45 000 wake-ups a second for 500 Mbit/s of
/// 1400-byte datagrams) cost 8.8 µs of CPU per datagram over loopback, four times iperf3's;
/// at 250 µs it cost 2.0, at 500 µs 1.9 and at 1 ms 1.5 (iperf3: 2.0-2.1; medians of three
/// 3 s runs, `bench/udp.sh`). The slots stay
/// where they were, so the rate is kept; a burst is at most the quantum's worth of the rate
/// (22 datagrams at 500 Mbit/s).
const WAKE_QUANTUM: Duration = Duration::from_micros(500);

/// A UDP sender's state: its pacing schedule, what is left to send, its counts. The stream
/// thread ([`run_udp_sender`]) and the data workers (`udp_pool`) drive it the same way.
pub(crate) struct UdpTx {
    pub plan: Plan,
    token: Token,
    len: usize,
    gso: bool,
    pace: Option<Pacer>,
    end_at: Option<Instant>,
    /// When the last send call that left nothing due was made: a paced sender's next wake is
    /// a quantum after it.
    last_send: Option<Instant>,
    remaining: u64,
    seq: u64,
    stats: UdpStreamStats,
    tally: Tally,
    error: Option<String>,
}

/// What one [`UdpTx::send`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxStep {
    Sent,
    /// The socket's buffer is full (a non-blocking socket, or a blocking one's timeout).
    Full,
}

impl UdpTx {
    pub fn new(plan: Plan, token: Token, sock: &UdpSocket, pooled: bool) -> UdpTx {
        let spec = plan.spec.clone();
        let len = spec.len_bytes.max(HEADER_LEN as u64) as usize;
        let mut error = None;
        if spec.gso {
            if let Err(e) = mmsg::enable_gso(sock, len) {
                error = Some(format!(
                    "UDP GSO (UDP_SEGMENT) is not available on this host: {e}"
                ));
            }
        }
        let remaining = if error.is_some() {
            0
        } else {
            spec.bytes_per_stream(plan.id).unwrap_or(u64::MAX)
        };
        UdpTx {
            token,
            len,
            gso: spec.gso,
            pace: spec.rate_bps.map(|r| Pacer::new(plan.start, 8.0 / r)),
            end_at: spec
                .send_seconds()
                .map(|s| plan.start + Duration::from_secs_f64(s)),
            last_send: None,
            remaining,
            seq: 0,
            stats: UdpStreamStats::default(),
            tally: if pooled {
                Tally::pooled(&plan)
            } else {
                Tally::new(&plan)
            },
            error,
            plan,
        }
    }

    /// The datagrams one call may send.
    pub fn batch_count(&self) -> usize {
        if self.gso {
            mmsg::gso_batch_for(self.len)
        } else {
            mmsg::batch_for(self.len)
        }
    }

    /// A datagram of this stream: its header, then the pattern.
    pub fn template(&self) -> Vec<u8> {
        let mut t = vec![0u8; self.len];
        for (i, b) in t.iter_mut().enumerate().skip(HEADER_LEN) {
            *b = (i as u8).wrapping_mul(31).wrapping_add(7);
        }
        self.header(0, 0).emit(&mut t);
        t
    }

    fn header(&self, seq: u64, send_ns: u64) -> Header {
        Header {
            kind: Kind::Data,
            stream_id: self.plan.id,
            seq,
            send_ns,
            token: self.token,
        }
    }

    pub fn paced(&self) -> bool {
        self.pace.is_some()
    }

    /// The size of the datagram that goes out when `left` bytes are left: a short last one
    /// takes a short slot.
    fn size(&self, left: u64) -> usize {
        (self.len as u64).min(left).max(HEADER_LEN as u64) as usize
    }

    /// When a paced stream's next datagram is due; None for an unpaced one.
    pub fn due_at(&self) -> Option<Instant> {
        let p = self.pace.as_ref()?;
        Some(p.next + p.slot(self.size(self.remaining)))
    }

    /// When a paced sender should wake next: when its next datagram is due, but no sooner
    /// than [`WAKE_QUANTUM`] after its last send; None for an unpaced one.
    pub fn next_wake(&self) -> Option<Instant> {
        let due = self.due_at()?;
        Some(self.last_send.map_or(due, |t| due.max(t + WAKE_QUANTUM)))
    }

    /// How long a paced sender may sleep from `now` towards `wake`: never past the test's
    /// end, and in steps short enough to see a stop.
    fn wait_until(&self, now: Instant, wake: Instant) -> Instant {
        let until = wake.min(now + POLL);
        self.end_at.map_or(until, |e| until.min(e))
    }

    /// Whether the stream has sent its last datagram: all its bytes, its time, or a stop.
    pub fn over(&self, now: Instant) -> bool {
        self.remaining == 0
            || self.plan.stop.load(Ordering::Relaxed)
            || self.end_at.is_some_and(|e| now >= e)
    }

    /// After a late wake-up the schedule keeps at most [`MAX_DEBT`] of debt, so pacing never
    /// bursts.
    pub fn catch_up(&mut self, now: Instant) {
        let size = self.size(self.remaining);
        if let Some(p) = self.pace.as_mut() {
            p.catch_up(size, now);
        }
    }

    /// Sends, at `now`, every datagram that is due (a paced stream: at least one) or a full
    /// batch (unpaced), from `batch`, whose slots are rewritten with this stream's headers.
    pub fn send(
        &mut self,
        sock: &UdpSocket,
        batch: &mut SendBatch,
        now: Instant,
        lens: &mut [usize; mmsg::MAX_BATCH],
    ) -> TxStep {
        let cap = batch.capacity().min(self.batch_count());
        let count = match self.pace.as_ref() {
            Some(p) => p.due(now, self.remaining, |l| self.size(l), &mut lens[..cap]),
            None => {
                let mut left = self.remaining;
                let mut k = 0;
                while k < cap && left > 0 {
                    lens[k] = self.size(left);
                    left = left.saturating_sub(lens[k] as u64);
                    k += 1;
                }
                k
            }
        };
        // a full batch may leave more due at once: the quantum counts from a call that
        // sent all there was
        self.last_send = (count < cap).then_some(now);
        let send_ns = now.saturating_duration_since(self.plan.start).as_nanos() as u64;
        for (i, s) in (0..count).zip(self.seq..) {
            self.header(s, send_ns).emit(batch.slot_mut(i));
        }
        let sent = if self.gso {
            batch.send_gso(sock, &lens[..count])
        } else {
            batch.send(sock, &lens[..count])
        };
        match sent {
            Ok(k) => {
                let bytes: usize = lens[..k].iter().sum();
                self.seq += k as u64;
                self.remaining = self.remaining.saturating_sub(bytes as u64);
                if self.tally.add(bytes, now, &self.plan.counters) {
                    // stamped after the warm-up: the receiver counts them
                    self.tally
                        .include_before_opening(bytes as u64, &self.plan.counters);
                }
                if let Some(p) = self.pace.as_mut() {
                    p.advance(&lens[..k.max(1)]);
                }
                TxStep::Sent
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => TxStep::Full,
            Err(e) => {
                if e.raw_os_error() == Some(libc::ENOBUFS) {
                    self.stats.enobufs += 1;
                }
                // a refused datagram (ENOBUFS, or ICMP unreachable from the receiver's
                // port) still takes its slot, so pacing keeps its rate
                self.skip_slot(lens[0]);
                TxStep::Sent
            }
        }
    }

    /// A datagram of `len` bytes gives up its slot.
    pub fn skip_slot(&mut self, len: usize) {
        if let Some(p) = self.pace.as_mut() {
            p.advance(&[len]);
        }
    }

    /// The end marker this stream sends (a few times) after its last datagram.
    pub fn end_marker(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        Header {
            kind: Kind::End,
            stream_id: self.plan.id,
            seq: self.seq,
            send_ns: 0,
            token: self.token,
        }
        .emit(&mut b);
        b
    }

    pub fn report(mut self, t0: ThreadTimes) -> StreamReport {
        self.stats.packets = self.seq;
        let mut report = self.tally.report(&self.plan, t0, self.error.take());
        report.udp = Some(self.stats);
        report
    }
}

/// Sends datagrams of `len` bytes, evenly paced at the spec's rate (or unpaced), then the end
/// markers. Every datagram that is due goes out in one `sendmmsg`, and a paced sender wakes
/// at most once a [`WAKE_QUANTUM`], so a high rate costs one wake-up per batch instead of one
/// per datagram. A slow one still ends at the test's end and sees a stop within [`POLL`].
pub fn run_udp_sender(sock: UdpSocket, token: Token, plan: Plan) -> StreamReport {
    let t0 = ThreadTimes::now();
    let mut tx = UdpTx::new(plan, token, &sock, false);
    let mut batch = SendBatch::new(tx.batch_count(), &tx.template());
    // the slots are waited for on a timer at absolute times (a sleep, should the kernel
    // refuse a timerfd)
    let mut timer = tx
        .paced()
        .then(|| crate::timer::Timer::new().ok())
        .flatten();
    let mut lens = [0usize; mmsg::MAX_BATCH];
    let _ = sock.set_write_timeout(Some(tx.plan.idle));
    loop {
        let mut now = Instant::now();
        if tx.over(now) {
            break;
        }
        if let Some(wake) = tx.next_wake() {
            if now < wake {
                let until = tx.wait_until(now, wake);
                now = match timer.as_mut() {
                    Some(t) => t.wait_until(until),
                    None => {
                        std::thread::sleep(until - now);
                        Instant::now()
                    }
                };
                // woken for the end or to look for a stop: the loop's top decides
                if now < wake || tx.over(now) {
                    continue;
                }
            } else {
                tx.catch_up(now);
            }
        }
        if tx.send(&sock, &mut batch, now, &mut lens) == TxStep::Full {
            // a blocking socket's timeout: the datagram still takes its slot
            tx.skip_slot(lens[0]);
        }
    }
    let marker = tx.end_marker();
    for i in 0..END_MARKERS {
        if i > 0 {
            std::thread::sleep(END_GAP);
        }
        let _ = sock.send(&marker);
    }
    tx.report(t0)
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

    /// After a late wake-up at `now`, with a datagram of `bytes` next, keeps at most
    /// [`MAX_DEBT`] of debt.
    fn catch_up(&mut self, bytes: usize, now: Instant) {
        let due = self.next + self.slot(bytes);
        if now.saturating_duration_since(due) > MAX_DEBT {
            self.next = (now - MAX_DEBT)
                .checked_sub(self.slot(bytes))
                .unwrap_or(self.next);
        }
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

/// A UDP receiver's state: its sequence and drop accounting and its clocks. The stream thread
/// ([`run_udp_receiver`]) and the data workers (`udp_pool`) drive it the same way.
pub(crate) struct UdpRx {
    pub plan: Plan,
    token: Token,
    peer: Option<SocketAddr>,
    counts_drops: bool,
    slot: usize,
    tally: Tally,
    stats: RecvStats,
    extra: UdpStreamStats,
    last_drops: Option<u32>,
    quiet_end: Option<Instant>,
    last_heard: Instant,
    silence: Duration,
    pub error: Option<String>,
}

impl UdpRx {
    pub fn new(
        plan: Plan,
        token: Token,
        peer: Option<SocketAddr>,
        sock: &UdpSocket,
        pooled: bool,
    ) -> UdpRx {
        let counts_drops = enable_rxq_ovfl(sock);
        let _ = SockRef::from(sock).set_recv_buffer_size(
            plan.spec
                .rcvbuf_bytes
                .or(plan.spec.window_bytes)
                .unwrap_or(4 << 20) as usize,
        );
        let mut error = None;
        let slot = if plan.spec.gro {
            if let Err(e) = mmsg::enable_gro(sock) {
                error = Some(format!(
                    "UDP GRO (UDP_GRO) is not available on this host: {e}"
                ));
            }
            mmsg::GRO_SLOT
        } else {
            plan.spec.len_bytes.clamp(HEADER_LEN as u64, 65_536) as usize
        };
        UdpRx {
            token,
            peer,
            counts_drops,
            slot,
            tally: if pooled {
                Tally::pooled(&plan)
            } else {
                Tally::new(&plan)
            },
            stats: RecvStats::default(),
            extra: UdpStreamStats::default(),
            last_drops: None,
            quiet_end: plan
                .spec
                .send_seconds()
                .map(|s| plan.start + Duration::from_secs_f64(s) + plan.idle),
            last_heard: Instant::now(),
            silence: plan.stall_after(),
            error,
            plan,
        }
    }

    /// The receive slot: one datagram, or a GRO segment train.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Counts the `got` datagrams of `batch` received at `now`; true when the end marker
    /// came.
    pub fn absorb(&mut self, batch: &RecvBatch, got: usize, now: Instant) -> bool {
        let plan = &self.plan;
        // one clock read per batch: its datagrams were queued together
        let arrival = now.saturating_duration_since(plan.start).as_secs_f64();
        // bytes of datagrams stamped inside the warm-up, and after it
        let omit_ns = plan.spec.omit_s * 1e9;
        let (mut warm, mut bytes) = (0usize, 0usize);
        let mut ended = false;
        // a GRO read may hold several datagrams of one segment size each
        let datagrams = (0..got).filter_map(|i| batch.get(i)).flat_map(|d| {
            let seg = d.segment.unwrap_or(d.data.len()).max(1);
            let (src, drops) = (d.src, d.drops);
            d.data.chunks(seg).map(move |data| (data, src, drops))
        });
        for (data, src, drops) in datagrams {
            if drops.is_some() {
                self.last_drops = drops;
            }
            let from_peer = self.peer.is_none_or(|p| src == Some(p));
            match Header::parse(data) {
                Ok(h) if from_peer && h.stream_id == plan.id && token_eq(&h.token, &self.token) => {
                    match h.kind {
                        Kind::Data => {
                            self.last_heard = now;
                            let before = self.stats.packets;
                            self.stats.on_data(h.seq, h.send_ns as f64 / 1e9, arrival);
                            if self.stats.packets > before && (h.send_ns as f64) < omit_ns {
                                warm += data.len();
                                plan.counters.packets.fetch_add(1, Ordering::Relaxed);
                            } else if self.stats.packets > before {
                                bytes += data.len();
                                plan.counters.packets.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Kind::End => {
                            ended = true;
                            break;
                        }
                        _ => self.extra.foreign += 1,
                    }
                }
                _ => self.extra.foreign += 1,
            }
        }
        if warm + bytes > 0 {
            self.tally.add_stamped(warm, bytes, now, &plan.counters);
            let span = self.stats.max_seq.map_or(0, |m| m.saturating_add(1));
            plan.counters.span.store(span, Ordering::Relaxed);
            if let Some(j) = self.stats.jitter_ms() {
                let ns = (j * 1e6).round() as u64;
                plan.counters
                    .jitter_ns
                    .store(ns.saturating_add(1), Ordering::Relaxed);
            }
        }
        ended
    }

    /// Whether the receiver is done at `now` without an end marker: the test was stopped,
    /// the peer is done and the socket quiet for a moment, the test's time is over, or the
    /// sender has been silent too long (an error for a timed test: a sender that vanished
    /// must not hold the receiver for the rest of the requested time).
    pub fn done(&mut self, now: Instant) -> bool {
        let plan = &self.plan;
        if plan.stop.load(Ordering::Relaxed)
            || (plan.peer_done.load(Ordering::Relaxed)
                && now.duration_since(self.last_heard) >= POLL)
            || self.quiet_end.is_some_and(|e| now >= e)
        {
            return true;
        }
        if now.duration_since(self.last_heard) > self.silence {
            if self.quiet_end.is_some() && !plan.stop.load(Ordering::Relaxed) {
                self.error = Some(format!(
                    "{} while receiving: no datagram for {:.1} s",
                    crate::stream::STALLED,
                    self.silence.as_secs_f64()
                ));
            }
            return true;
        }
        false
    }

    pub fn report(mut self, t0: ThreadTimes) -> StreamReport {
        let mut extra = self.extra;
        extra.packets = self.stats.packets;
        extra.out_of_order = self.stats.out_of_order;
        extra.duplicates = self.stats.duplicates;
        extra.jitter_ms = self.stats.jitter_ms();
        // SO_RXQ_OVFL is cumulative since the socket was made and only attached once
        // nonzero, so its last value is the total and its absence means none
        extra.socket_drops = self
            .counts_drops
            .then(|| u64::from(self.last_drops.unwrap_or(0)));
        let mut report = self.tally.report(&self.plan, t0, self.error.take());
        report.udp = Some(extra);
        report
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
    let mut rx = UdpRx::new(plan, token, peer, &sock, false);
    let _ = sock.set_read_timeout(Some(POLL));
    let mut batch = RecvBatch::new(mmsg::batch_for(rx.slot()), rx.slot());
    while rx.error.is_none() {
        // errors: a timeout, ICMP errors from an earlier send, or the socket was shut down
        // to stop us; the clocks below decide
        if let Ok(got) = batch.recv(&sock) {
            if rx.absorb(&batch, got, Instant::now()) {
                break;
            }
        }
        if rx.done(Instant::now()) {
            break;
        }
    }
    rx.report(t0)
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
    Err(EngineError::UdpUnanswered(
        "the server's UDP port did not answer (a firewall dropping UDP?)",
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
        p.catch_up(100, now);
        assert_eq!(p.next + p.slot(100), now - MAX_DEBT);
    }
}
