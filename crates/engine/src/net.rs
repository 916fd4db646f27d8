//! Socket set-up shared by both sides: options from the spec, bounded reads, tokens.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockRef, Socket, Type};
use wirerate_core::result::SocketBuffers;
use wirerate_core::TestSpec;

use crate::dataopts::DataOpts;
use crate::error::EngineError;

/// Receive batching: wake the reader only when this much is queued (or at EOF). Large enough
/// to halve the wake-ups of a 1 MiB stream, small enough to keep small-window tests smooth;
/// the kernel caps it at half the receive buffer.
pub const MAX_RCVLOWAT: u64 = 512 << 10;

/// A blocking call's time ran out: a socket timeout (SO_RCVTIMEO or SO_SNDTIMEO) ends the
/// call with EAGAIN, which std calls WouldBlock; other waits say TimedOut. The one test of
/// "the peer was silent" for every read and write with a deadline.
pub fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Nothing is wrong yet: the call timed out ([`timed_out`]) or a signal cut it short. A
/// loop that checks its own deadline and end flag goes round again.
pub fn transient(e: &io::Error) -> bool {
    timed_out(e) || e.kind() == io::ErrorKind::Interrupted
}

/// Applies the spec's window, Nagle and congestion-control options to a data socket.
pub fn apply_options(sock: &SockRef<'_>, spec: &TestSpec) -> Result<(), EngineError> {
    let size = |w: u64| usize::try_from(w).unwrap_or(usize::MAX);
    if let Some(w) = spec.sndbuf_bytes.or(spec.window_bytes) {
        sock.set_send_buffer_size(size(w))
            .map_err(EngineError::io("setting SO_SNDBUF"))?;
    }
    if let Some(w) = spec.rcvbuf_bytes.or(spec.window_bytes) {
        sock.set_recv_buffer_size(size(w))
            .map_err(EngineError::io("setting SO_RCVBUF"))?;
    }
    if spec.nodelay {
        sock.set_nodelay(true)
            .map_err(EngineError::io("setting TCP_NODELAY"))?;
    }
    if let Some(cc) = &spec.congestion {
        set_congestion(sock, cc)?;
    }
    if let Some(tos) = spec.tos {
        set_tos(sock, tos).map_err(EngineError::io("setting IP_TOS"))?;
    }
    Ok(())
}

/// Sets the IP type of service (IPv4) and traffic class (IPv6) of a socket. A dual-stack
/// IPv6 socket carries IPv4 packets too, so it gets both; the option of the other family
/// is best effort.
pub fn set_tos(sock: &SockRef<'_>, tos: u8) -> io::Result<()> {
    let v4 = set_int_opt(sock, libc::IPPROTO_IP, libc::IP_TOS, i32::from(tos));
    let v6 = set_int_opt(sock, libc::IPPROTO_IPV6, libc::IPV6_TCLASS, i32::from(tos));
    v4.or(v6)
}

/// asm-generic/socket.h (x86, arm and the others but mips, parisc, sparc); the libc crate
/// does not export it.
const SO_MAX_PACING_RATE: i32 = 47;

/// Caps a TCP sender's rate (SO_MAX_PACING_RATE, bytes per second): the kernel paces
/// the stream's packets, as `-b` does for TCP.
pub fn set_pacing_rate(sock: &SockRef<'_>, bits_per_s: f64) -> io::Result<()> {
    let bytes = (bits_per_s / 8.0).round();
    // 64-bit kernels read a u64 when given one (a 32-bit value caps near 34 Gbit/s)
    let v: u64 = if bytes >= u64::MAX as f64 {
        u64::MAX
    } else {
        bytes as u64
    };
    // SAFETY: passes a pointer to a live u64 and its exact size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_MAX_PACING_RATE,
            (&v as *const u64).cast(),
            std::mem::size_of::<u64>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The buffers the kernel set on a socket after `-w` asked for `asked` bytes.
pub fn socket_buffers(sock: &SockRef<'_>, asked: u64) -> SocketBuffers {
    let read = |v: io::Result<usize>| v.ok().and_then(|n| u64::try_from(n).ok());
    SocketBuffers {
        asked_bytes: asked,
        send_bytes: read(sock.send_buffer_size()),
        receive_bytes: read(sock.recv_buffer_size()),
    }
}

/// Keeps at most `bytes` unsent in the socket (TCP_NOTSENT_LOWAT): a writer waits for the
/// rest to drain.
pub fn set_notsent_lowat(sock: &SockRef<'_>, bytes: i32) -> io::Result<()> {
    set_int_opt(sock, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, bytes)
}

/// Turns on receive batching for a reader of `len`-byte buffers.
pub fn batch_receive(sock: &SockRef<'_>, len: u64) {
    let lowat = len.clamp(1, MAX_RCVLOWAT);
    // Best effort: a kernel without SO_RCVLOWAT support just wakes the reader more often.
    let _ = set_int_opt(sock, libc::SOL_SOCKET, libc::SO_RCVLOWAT, lowat as i32);
}

/// A UDP socket bound to `local` that shares its port (SO_REUSEADDR) with the server's
/// other UDP sockets on it: the iperf3 front end's connected streams and listeners, and
/// the latency probes' socket.
pub(crate) fn bind_udp_shared(local: SocketAddr) -> io::Result<std::net::UdpSocket> {
    let s = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    s.bind(&local.into())?;
    Ok(s.into())
}

pub(crate) fn set_int_opt(sock: &SockRef<'_>, level: i32, name: i32, v: i32) -> io::Result<()> {
    // SAFETY: passes a pointer to a live i32 and its exact size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&v as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn set_congestion(sock: &SockRef<'_>, cc: &str) -> Result<(), EngineError> {
    // SAFETY: passes the name's bytes and their length; the kernel copies them.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_ptr().cast(),
            cc.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(EngineError::Setup(format!(
            "congestion control '{cc}' is not available here ({}); see /proc/sys/net/ipv4/tcp_available_congestion_control",
            io::Error::last_os_error()
        )))
    }
}

/// Connects a TCP socket, with the spec's pre-connect options, an optional local address and
/// a timeout.
pub fn connect(
    addr: SocketAddr,
    bind: Option<SocketAddr>,
    spec: Option<&TestSpec>,
    timeout: Duration,
) -> Result<TcpStream, EngineError> {
    connect_with(addr, bind, spec, &DataOpts::default(), timeout)
}

/// [`connect`] for a data stream, with the client's own options: an MPTCP socket, an IPv6
/// flow label.
pub fn connect_with(
    addr: SocketAddr,
    bind: Option<SocketAddr>,
    spec: Option<&TestSpec>,
    opts: &DataOpts,
    timeout: Duration,
) -> Result<TcpStream, EngineError> {
    let err = |source| EngineError::Connect {
        addr: addr.to_string(),
        source,
    };
    let proto = if opts.mptcp {
        Protocol::from(crate::dataopts::IPPROTO_MPTCP)
    } else {
        Protocol::TCP
    };
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(proto)).map_err(err)?;
    let addr = match (opts.flowlabel, addr) {
        (None, a) => a,
        (Some(label), SocketAddr::V6(a)) => {
            crate::dataopts::set_flowlabel(&SockRef::from(&sock), &a, label)
                .map_err(EngineError::io("setting the IPv6 flow label"))?;
            SocketAddr::V6(crate::dataopts::with_flowlabel(a, label))
        }
        (Some(_), SocketAddr::V4(_)) => {
            return Err(EngineError::Setup(
                "a flow label (-L) needs an IPv6 server address".into(),
            ))
        }
    };
    if let Some(b) = bind {
        if b.port() != 0 {
            // a fixed port (--cport) is used again by the next test while the last one's
            // connections linger in TIME_WAIT
            sock.set_reuse_address(true).map_err(err)?;
        }
        sock.bind(&b.into()).map_err(err)?;
    }
    if let Some(spec) = spec {
        if let Some(mss) = spec.mss_bytes {
            sock.set_mss(mss)
                .map_err(EngineError::io("setting TCP_MAXSEG"))?;
        }
        // window before connect, so the window scale in the SYN matches it
        apply_options(&SockRef::from(&sock), spec)?;
    }
    sock.connect_timeout(&addr.into(), timeout).map_err(err)?;
    Ok(sock.into())
}

/// The local port of the `index`-th data stream: `--cport` upwards, or 0 (any).
pub fn data_port(cport: Option<u16>, index: usize) -> Result<u16, EngineError> {
    let Some(base) = cport else { return Ok(0) };
    u16::try_from(usize::from(base) + index)
        .map_err(|_| EngineError::Setup(format!("--cport {base}: stream {index} has no port left")))
}

/// Reads exactly `buf.len()` bytes, or fails once `deadline` passes.
pub fn read_exact_by(stream: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "peer was silent"));
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut buf[got..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if timed_out(&e) => {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "peer was silent"))
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// 16 random bytes from the kernel.
pub fn random_token() -> Result<[u8; 16], EngineError> {
    let mut t = [0u8; 16];
    fill_random(&mut t)?;
    Ok(t)
}

/// Fills `t` from the kernel's CSPRNG (getrandom(2)).
pub fn fill_random(t: &mut [u8]) -> Result<(), EngineError> {
    let mut filled = 0;
    while filled < t.len() {
        // SAFETY: writes at most the remaining length into our buffer.
        let n = unsafe { libc::getrandom(t[filled..].as_mut_ptr().cast(), t.len() - filled, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(EngineError::io("getrandom")(e));
        }
        filled += n as usize;
    }
    Ok(())
}

/// The largest UDP payload that crosses the path to `addr` unfragmented, from the route's
/// MTU as the kernel knows it; None when it cannot tell.
pub fn path_udp_payload(addr: SocketAddr) -> Option<u64> {
    let local: SocketAddr = if addr.is_ipv4() {
        "0.0.0.0:0".parse().ok()?
    } else {
        "[::]:0".parse().ok()?
    };
    let sock = std::net::UdpSocket::bind(local).ok()?;
    sock.connect(addr).ok()?;
    use wirerate_core::wire::{IPV4_HEADER_BYTES, IPV6_HEADER_BYTES, UDP_HEADER_BYTES};
    let (level, name, ip_header) = if addr.is_ipv4() {
        (libc::IPPROTO_IP, libc::IP_MTU, IPV4_HEADER_BYTES)
    } else {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU, IPV6_HEADER_BYTES)
    };
    let overhead = (ip_header + UDP_HEADER_BYTES) as libc::c_int;
    let mut mtu: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the kernel writes one int into `mtu`, bounded by `len`.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&mut mtu as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (rc == 0 && mtu > overhead).then(|| ((mtu - overhead) as u64).min(65_507))
}

/// Makes freed buffers go back to the system at once. glibc raises its mmap threshold each
/// time a large block is freed, after which later test buffers come from heaps that keep
/// their memory after the test; a fixed threshold keeps every large buffer a mapping of its
/// own, unmapped when the test ends.
pub fn return_freed_memory_promptly() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes the allocator's tuning; it is safe to call at any time.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 10);
    }
}

/// Hands memory freed by a finished test back to the system (what the heaps still hold).
pub fn trim_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; it is safe to call at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Paces a TCP sender to `bps` bit/s (SO_MAX_PACING_RATE; TCP paces itself without fq).
pub fn set_pacing(sock: &SockRef<'_>, bps: f64) -> Result<(), EngineError> {
    use std::os::fd::AsRawFd;
    let rate: u64 = (bps / 8.0).clamp(1.0, 1e18) as u64;
    // SAFETY: setsockopt with a pointer to a live u64 and its size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            (&rate as *const u64).cast(),
            std::mem::size_of::<u64>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(EngineError::io("setting SO_MAX_PACING_RATE")(
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Waits until `fd` is readable (a listener: a connection is waiting) or `timeout` passes.
/// Whether it became readable; an interrupted or failed wait counts as not yet.
pub fn wait_readable(fd: &impl std::os::fd::AsRawFd, timeout: Duration) -> bool {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one live pollfd and a count of one; poll only writes its `revents`.
    let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
    rc > 0 && pfd.revents & libc::POLLIN != 0
}

/// Raises this process's open-file limit (RLIMIT_NOFILE) to at least `want`, up to the hard
/// limit; returns the soft and hard limits then in force.
pub fn raise_open_files(want: u64) -> io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if lim.rlim_cur < want && lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: want.min(lim.rlim_max),
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit from the struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(io::Error::last_os_error());
        }
        lim = raised;
    }
    Ok((lim.rlim_cur, lim.rlim_max))
}

/// Descriptors a test of `streams` streams (over all flows) takes in one process: each
/// stream's socket, and the duplicate a stream thread's side keeps to stop it and read
/// TCP_INFO (`pooled` streams, served by data workers, share their socket instead), twice
/// over when the embedded server runs in the same process, plus room for the rest.
pub fn open_files_needed(streams: u32, embedded: bool, pooled: bool) -> u64 {
    let per_side = if pooled { 1 } else { 2 };
    let per_stream = if embedded { 2 * per_side } else { per_side };
    u64::from(streams) * per_stream + 64
}

/// The bytes a TCP sender writes per call: the spec's length, cut to whole offload
/// segments of the connection when the spec asks (`fit_writes`, the default write size; see
/// [`wirerate_core::spec::fit_to_segments`]).
pub struct WriteSize {
    full: u64,
    fit: bool,
    now: usize,
    looks: u8,
}

impl WriteSize {
    /// Writes the connection's segment size is read again for: the kernel caps it at half
    /// the largest window the peer has offered, which starts small (32 KiB on loopback
    /// before the first write, 65 483 bytes after).
    const LOOKS: u8 = 16;

    pub fn new(spec: &TestSpec) -> WriteSize {
        WriteSize {
            full: spec.len_bytes,
            fit: spec.fit_writes,
            now: usize::try_from(spec.len_bytes).unwrap_or(usize::MAX),
            looks: 0,
        }
    }

    /// The size of the next write on `sock`. Where the kernel will not say the segment
    /// size, the spec's length.
    pub fn next(&mut self, sock: &std::net::TcpStream) -> usize {
        if self.fit && self.looks < Self::LOOKS {
            self.looks += 1;
            if let Some(mss) = SockRef::from(sock).mss().ok().filter(|&m| m > 0) {
                let fitted = wirerate_core::spec::fit_to_segments(self.full, u64::from(mss));
                self.now = usize::try_from(fitted).unwrap_or(usize::MAX);
            }
        }
        self.now
    }
}

#[cfg(test)]
mod rlimit_tests {
    use super::*;

    #[test]
    fn the_open_file_limit_rises_to_what_is_asked_within_the_hard_limit() {
        let (soft, hard) = raise_open_files(0).unwrap();
        assert!(soft <= hard);
        let want = hard.min(soft.saturating_add(16)).min(1 << 20);
        let (now, _) = raise_open_files(want).unwrap();
        assert!(now >= want, "{now} < {want}");
        assert_eq!(open_files_needed(1024, true, false), 4160);
        assert_eq!(open_files_needed(2, false, false), 68);
        assert_eq!(open_files_needed(10_000, true, true), 20_064);
        assert_eq!(open_files_needed(10_000, false, true), 10_064);
    }
}
