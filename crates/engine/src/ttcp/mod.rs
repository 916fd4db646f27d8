//! Classic ttcp on the wire: raw bytes over one TCP connection and nothing else, or UDP
//! datagrams framed by ttcp's 4-byte start and end sentinels, so any classic ttcp or a plain
//! socket is a peer.
//!
//! Promises: no control channel and no framing on TCP; every network call is counted the way
//! ttcp counts it; the clock and resource usage are read where ttcp reads them (after
//! connect or accept, and again at the UDP start sentinel); a peer that vanishes ends the run
//! with a [`TtcpError`], never a panic. Formatting is not done here.

mod tcp;
mod udp;

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use socket2::{Domain, Socket, Type};
use wirerate_core::ttcp::{Sample, Timeval, Transfer, Usage};

/// Which end of the transfer this process is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// `-t HOST`: connect (or send datagrams) to the host.
    Transmit { host: String },
    /// `-r`: listen on the port and take what comes.
    Receive,
}

/// Address family the user allows (`-4`, `-6`, or either).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Family {
    #[default]
    Any,
    V4,
    V6,
}

/// A validated ttcp run.
#[derive(Debug, Clone)]
pub struct Config {
    pub mode: Mode,
    pub port: u16,
    pub family: Family,
    pub udp: bool,
    /// Bytes per read or write (`-l`); at least 5 for UDP so data outgrows the sentinels.
    pub buflen: usize,
    /// Buffers the transmitter writes in sink mode (`-n`); the receiver only prints it.
    pub nbuf: u64,
    /// `-s`: source a pattern / discard the data, instead of stdin → network → stdout.
    pub sink: bool,
    /// `-b`: SO_SNDBUF on the transmitter, SO_RCVBUF on the receiver.
    pub sockbuf: Option<usize>,
    /// `-D`: TCP_NODELAY on the transmitter.
    pub nodelay: bool,
    /// `-d`: SO_DEBUG.
    pub debug: bool,
    /// `-A`/`-O`: the buffer starts `offset` bytes past a multiple of `align` (0: anywhere).
    pub align: usize,
    pub offset: usize,
    /// `-B`: the TCP receiver reads until a whole buffer is full (or EOF).
    pub full_blocks: bool,
    /// `-T`: the TCP receiver reads every byte it received.
    pub touch: bool,
    /// UDP receiver: after the start sentinel, give up when nothing arrives for this long.
    /// None waits for ever, as classic ttcp does.
    pub udp_idle: Option<Duration>,
}

/// What a run measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub transfer: Transfer,
    /// Where the aligned buffer starts (`-v` prints it).
    pub buffer_addr: usize,
    /// The UDP receiver stopped on its idle limit, not on an end sentinel; the transfer
    /// ends at the last datagram.
    pub idle_timeout: bool,
}

/// Why a run failed. The OS error is part of the message, not a source, so a broken pipe
/// on the network is reported as an error and never mistaken for a closed stdout.
#[derive(Debug, thiserror::Error)]
pub enum TtcpError {
    #[error("{what}: {cause}")]
    Io {
        what: &'static str,
        cause: io::Error,
    },
    #[error("bad hostname '{host}': {detail}")]
    Resolve { host: String, detail: String },
}

fn io_err(what: &'static str) -> impl FnOnce(io::Error) -> TtcpError {
    move |cause| TtcpError::Io { what, cause }
}

/// Where the data comes from and goes to when not in sink mode, and where progress lines
/// (`socket`, `connect`, `accept from …`) are announced.
pub struct Ends<'a> {
    pub input: &'a mut dyn Read,
    pub output: &'a mut dyn Write,
    pub progress: &'a mut dyn FnMut(&str),
}

/// Runs one side of a classic ttcp transfer.
pub fn run(cfg: &Config, ends: &mut Ends<'_>) -> Result<Outcome, TtcpError> {
    // A UDP buffer must outgrow a sentinel, as in ttcp; no buffer may be empty.
    let buflen = if cfg.udp {
        cfg.buflen.max(udp::SENTINEL_LEN + 1)
    } else {
        cfg.buflen.max(1)
    };
    let mut buf = Buffer::new(buflen, cfg.align, cfg.offset);
    let buffer_addr = buf.addr();
    let (transfer, idle_timeout) = match (&cfg.mode, cfg.udp) {
        (Mode::Transmit { host }, false) => (tcp::transmit(cfg, host, &mut buf, ends)?, false),
        (Mode::Receive, false) => (tcp::receive(cfg, &mut buf, ends)?, false),
        (Mode::Transmit { host }, true) => (udp::transmit(cfg, host, &mut buf, ends)?, false),
        (Mode::Receive, true) => udp::receive(cfg, &mut buf, ends)?,
    };
    Ok(Outcome {
        transfer,
        buffer_addr,
        idle_timeout,
    })
}

/// The I/O buffer, placed inside a larger allocation the way ttcp places it: its start is
/// `offset` bytes past a multiple of `align` (wrapped modulo `align`).
pub(crate) struct Buffer {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl Buffer {
    pub(crate) fn new(len: usize, align: usize, offset: usize) -> Buffer {
        let storage = vec![0u8; len.saturating_add(align)];
        let base = storage.as_ptr() as usize;
        let start = if align == 0 {
            0
        } else {
            (align - base % align + offset % align) % align
        };
        Buffer {
            storage,
            start,
            len,
        }
    }

    pub(crate) fn addr(&self) -> usize {
        self.storage.as_ptr() as usize + self.start
    }

    pub(crate) fn bytes(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

/// ttcp's source pattern: the printable ASCII characters, space to tilde, over and over.
pub fn pattern(buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = b' ' + (i % 95) as u8;
    }
}

/// Reads the monotonic clock and the process's resource usage together.
pub fn sample() -> Sample {
    Sample {
        clock: monotonic(),
        usage: usage(),
    }
}

pub(crate) fn monotonic() -> Timeval {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into memory we own.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    Timeval {
        sec: ts.tv_sec,
        usec: ts.tv_nsec / 1000,
    }
}

fn usage() -> Usage {
    // SAFETY: an all-zero rusage is a valid value of that plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one rusage into memory we own; on failure it stays zero.
    unsafe {
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
    }
    let tv = |t: libc::timeval| Timeval {
        sec: t.tv_sec,
        usec: t.tv_usec,
    };
    Usage {
        user: tv(ru.ru_utime),
        sys: tv(ru.ru_stime),
        maxrss_kib: ru.ru_maxrss,
        ixrss: ru.ru_ixrss,
        idrss: ru.ru_idrss,
        isrss: ru.ru_isrss,
        minor_faults: ru.ru_minflt,
        major_faults: ru.ru_majflt,
        voluntary_csw: ru.ru_nvcsw,
        involuntary_csw: ru.ru_nivcsw,
    }
}

fn family_allows(family: Family, addr: &SocketAddr) -> bool {
    match family {
        Family::Any => true,
        Family::V4 => addr.is_ipv4(),
        Family::V6 => addr.is_ipv6(),
    }
}

/// The addresses of the transmitter's peer, in resolver order, of the allowed family.
pub(crate) fn resolve(host: &str, port: u16, family: Family) -> Result<Vec<SocketAddr>, TtcpError> {
    let bad = |detail: String| TtcpError::Resolve {
        host: host.to_string(),
        detail,
    };
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| bad(e.to_string()))?
        .filter(|a| family_allows(family, a))
        .collect();
    if addrs.is_empty() {
        return Err(bad("no address of the requested family".into()));
    }
    Ok(addrs)
}

/// Creates the receiver's socket bound to the port on every address of the allowed family:
/// `[::]` accepting IPv4 too when the family is open, falling back to `0.0.0.0` where the
/// host has no IPv6. SO_REUSEADDR lets runs follow each other on the same port.
pub(crate) fn bound_socket(cfg: &Config, ty: Type) -> Result<Socket, TtcpError> {
    let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), cfg.port);
    let v4 = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), cfg.port);
    let sock = match cfg.family {
        Family::V4 => Socket::new(Domain::IPV4, ty, None),
        Family::V6 => Socket::new(Domain::IPV6, ty, None),
        Family::Any => {
            Socket::new(Domain::IPV6, ty, None).or_else(|_| Socket::new(Domain::IPV4, ty, None))
        }
    }
    .map_err(io_err("socket"))?;
    let is_v6 = sock.domain().map_err(io_err("socket"))? == Domain::IPV6;
    if is_v6 {
        sock.set_only_v6(cfg.family == Family::V6)
            .map_err(io_err("setsockopt: ipv6only"))?;
    }
    sock.set_reuse_address(true)
        .map_err(io_err("setsockopt: reuseaddr"))?;
    let addr = if is_v6 { v6 } else { v4 };
    sock.bind(&addr.into()).map_err(io_err("bind"))?;
    Ok(sock)
}

/// Sets SO_DEBUG when asked (`-d`).
pub(crate) fn set_debug(sock: &Socket, debug: bool) -> Result<(), TtcpError> {
    if !debug {
        return Ok(());
    }
    let one: libc::c_int = 1;
    // SAFETY: setsockopt reads one c_int from our stack for a socket we own.
    let rc = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(sock),
            libc::SOL_SOCKET,
            libc::SO_DEBUG,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(TtcpError::Io {
            what: "setsockopt",
            cause: io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Reads until `buf` is full or the input ends, retrying interrupted calls; returns the
/// bytes read and the read calls made.
pub(crate) fn fill(input: &mut dyn Read, buf: &mut [u8]) -> io::Result<(usize, u64)> {
    let mut got = 0;
    let mut calls = 0;
    while got < buf.len() {
        calls += 1;
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((got, calls))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_is_the_printable_ascii_cycle() {
        let mut b = [0u8; 200];
        pattern(&mut b);
        assert_eq!(b[0], b' ');
        assert_eq!(b[94], b'~');
        assert_eq!(b[95], b' ');
        assert!(b.iter().all(|c| (0x20..0x7f).contains(c)));
    }

    #[test]
    fn buffer_honours_alignment_and_offset() {
        for (align, offset) in [(16384, 0), (4096, 8), (64, 100), (0, 7)] {
            let mut b = Buffer::new(1000, align, offset);
            assert_eq!(b.bytes().len(), 1000);
            if align != 0 {
                assert_eq!(b.addr() % align, offset % align, "{align}/{offset}");
            }
        }
    }

    #[test]
    fn fill_stops_at_the_end_of_input() {
        let mut input: &[u8] = b"hello";
        let mut buf = [0u8; 8];
        let (n, calls) = fill(&mut input, &mut buf).unwrap();
        assert_eq!((n, &buf[..n]), (5, &b"hello"[..]));
        assert_eq!(calls, 2);
    }

    #[test]
    fn tiny_udp_buffer_still_carries_data_and_sentinels() {
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let cfg = Config {
            mode: Mode::Transmit {
                host: "127.0.0.1".into(),
            },
            port: rx.local_addr().unwrap().port(),
            family: Family::V4,
            udp: true,
            buflen: 1,
            nbuf: 1,
            sink: true,
            sockbuf: None,
            nodelay: false,
            debug: false,
            align: 0,
            offset: 0,
            full_blocks: false,
            touch: false,
            udp_idle: None,
        };
        let (mut input, mut output) = (io::empty(), io::sink());
        let out = run(
            &cfg,
            &mut Ends {
                input: &mut input,
                output: &mut output,
                progress: &mut |_| {},
            },
        )
        .unwrap();
        assert_eq!((out.transfer.bytes, out.transfer.calls), (5, 7));
        let mut b = [0u8; 64];
        let sizes: Vec<usize> = (0..3).map(|_| rx.recv(&mut b).unwrap()).collect();
        assert_eq!(sizes, [4, 5, 4]);
    }

    #[test]
    fn samples_move_forward() {
        let a = sample();
        let b = sample();
        assert!((b.clock.sec, b.clock.usec) >= (a.clock.sec, a.clock.usec));
    }
}
