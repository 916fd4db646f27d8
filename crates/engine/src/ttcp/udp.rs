//! ttcp over UDP: a 4-byte start sentinel, the data datagrams, then end sentinels. The
//! receiver takes any datagram of at most 4 bytes as a sentinel: the first starts its clock,
//! the next one ends the run. Nothing is acknowledged or retransmitted.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use socket2::{Domain, Socket, Type};
use wirerate_core::ttcp::Transfer;

use super::{
    bound_socket, fill, io_err, monotonic, pattern, resolve, sample, set_debug, Buffer, Config,
    Ends, TtcpError,
};

/// Bytes of a sentinel datagram; a datagram this short or shorter is never data.
pub const SENTINEL_LEN: usize = 4;

/// End sentinels sent after the clock stops, on top of the one sent before it, so that one
/// lost datagram does not leave the receiver waiting.
const LATE_SENTINELS: usize = 4;

/// Pause before each late end sentinel. Classic ttcp sends them back to back, and a receiver
/// whose buffer overflowed under the data then loses all of them and waits for ever; spaced
/// out, at least one finds room. The pause is after the clock stopped, so no figure moves.
const LATE_SENTINEL_PAUSE: Duration = Duration::from_millis(10);

/// How long ttcp waits when the kernel has no buffer for a datagram (ENOBUFS).
const NOBUFS_PAUSE: Duration = Duration::from_millis(18);

/// One sendto as ttcp makes it: on ENOBUFS wait 18 ms and try again, each try counted.
fn send_counted(
    sock: &UdpSocket,
    data: &[u8],
    to: SocketAddr,
    calls: &mut u64,
) -> Result<usize, TtcpError> {
    loop {
        *calls += 1;
        match sock.send_to(data, to) {
            Ok(n) => return Ok(n),
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => std::thread::sleep(NOBUFS_PAUSE),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err("sendto")(e)),
        }
    }
}

/// `-t -u`: start sentinel, `nbuf` pattern datagrams (or stdin in whole buffers), one end
/// sentinel; the clock stops; four more end sentinels, 10 ms apart. All sends are counted as
/// calls.
pub(super) fn transmit(
    cfg: &Config,
    host: &str,
    buf: &mut Buffer,
    ends: &mut Ends<'_>,
) -> Result<Transfer, TtcpError> {
    let to = *resolve(host, cfg.port, cfg.family)?
        .first()
        .ok_or_else(|| io_err("socket")(io::Error::from(io::ErrorKind::AddrNotAvailable)))?;
    let sock = Socket::new(Domain::for_address(to), Type::DGRAM, None).map_err(io_err("socket"))?;
    (ends.progress)("socket");
    if let Some(size) = cfg.sockbuf {
        sock.set_send_buffer_size(size)
            .map_err(io_err("setsockopt: sndbuf"))?;
        (ends.progress)("sndbuf");
    }
    set_debug(&sock, cfg.debug)?;
    let sock: UdpSocket = sock.into();
    let data = buf.bytes();
    let mut bytes = 0u64;
    let mut calls = 0u64;
    let start = sample();
    if cfg.sink {
        pattern(data);
    }
    send_counted(&sock, &data[..SENTINEL_LEN], to, &mut calls)?;
    if cfg.sink {
        for _ in 0..cfg.nbuf {
            if send_counted(&sock, data, to, &mut calls)? != data.len() {
                break;
            }
            bytes += data.len() as u64;
        }
    } else {
        // Whole buffers, so that only the last datagram of the input can be short.
        loop {
            let (n, _) = fill(ends.input, data).map_err(io_err("read stdin"))?;
            if n == 0 {
                break;
            }
            send_counted(&sock, &data[..n], to, &mut calls)?;
            bytes += n as u64;
        }
    }
    send_counted(&sock, &data[..SENTINEL_LEN], to, &mut calls)?;
    let end = sample();
    for _ in 0..LATE_SENTINELS {
        std::thread::sleep(LATE_SENTINEL_PAUSE);
        send_counted(&sock, &data[..SENTINEL_LEN], to, &mut calls)?;
    }
    Ok(Transfer {
        bytes,
        calls,
        start,
        end,
    })
}

/// `-r -u`: counts (and with no `-s` copies) every datagram longer than a sentinel. The
/// clock starts when the socket is ready and starts again at the first sentinel; the
/// second sentinel, or an empty datagram, ends the run. Datagrams longer than the buffer
/// are cut to it. Returns the transfer and whether the idle limit ended it.
pub(super) fn receive(
    cfg: &Config,
    buf: &mut Buffer,
    ends: &mut Ends<'_>,
) -> Result<(Transfer, bool), TtcpError> {
    let sock = bound_socket(cfg, Type::DGRAM)?;
    (ends.progress)("socket");
    if let Some(size) = cfg.sockbuf {
        sock.set_recv_buffer_size(size)
            .map_err(io_err("setsockopt: rcvbuf"))?;
        (ends.progress)("rcvbuf");
    }
    set_debug(&sock, cfg.debug)?;
    let sock: UdpSocket = sock.into();
    let data = buf.bytes();
    let (mut bytes, mut calls) = (0u64, 0u64);
    let mut going = false;
    let mut idle = false;
    let mut start = sample();
    let mut last_data = start.clock;
    loop {
        let n = match sock.recv_from(data) {
            Ok((n, _)) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if going && crate::net::timed_out(&e) => {
                idle = true;
                break;
            }
            Err(e) => return Err(io_err("recvfrom")(e)),
        };
        calls += 1;
        if n == 0 {
            break;
        }
        if n <= SENTINEL_LEN {
            if going {
                break;
            }
            going = true;
            start = sample();
            last_data = start.clock;
            sock.set_read_timeout(cfg.udp_idle)
                .map_err(io_err("setsockopt: rcvtimeo"))?;
            continue;
        }
        bytes += n as u64;
        last_data = monotonic();
        if !cfg.sink {
            ends.output
                .write_all(&data[..n])
                .map_err(io_err("write stdout"))?;
        }
    }
    let mut end = sample();
    if idle {
        end.clock = last_data;
    }
    if !cfg.sink {
        ends.output.flush().map_err(io_err("write stdout"))?;
    }
    Ok((
        Transfer {
            bytes,
            calls,
            start,
            end,
        },
        idle,
    ))
}
