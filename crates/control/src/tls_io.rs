//! TLS over a blocking socket with deadlines: every read and write waits only for the time
//! left, so a peer that sends a byte at a time cannot stretch a handshake or a record past
//! its deadline; and writes that take in what the peer sends meanwhile.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use super::{Tls, TlsError};

/// Runs a handshake to its end by `deadline`: a total bound, as every read and write waits
/// only for the time left (a peer that sends its hello a byte at a time gains nothing).
pub(super) fn handshake(
    sock: &mut TcpStream,
    conn: &mut Tls,
    deadline: Instant,
) -> Result<(), TlsError> {
    let failed = |e: io::Error| match e.kind() {
        _ if wirerate_engine::net::timed_out(&e) => TlsError::HandshakeTimedOut,
        io::ErrorKind::UnexpectedEof => TlsError::HandshakeClosed,
        _ => TlsError::Handshake(e),
    };
    loop {
        match conn {
            Tls::Server(c) => flush_by(c, sock, deadline),
            Tls::Client(c) => flush_by(c, sock, deadline),
        }
        .map_err(failed)?;
        if !conn.is_handshaking() {
            return Ok(());
        }
        match conn {
            Tls::Server(c) => take_in_by(c, sock, deadline),
            Tls::Client(c) => take_in_by(c, sock, deadline),
        }
        .map_err(failed)?;
    }
}

/// Writes what TLS has queued, by `deadline`.
fn flush_by<D: rustls::SideData>(
    c: &mut rustls::ConnectionCommon<D>,
    sock: &mut TcpStream,
    deadline: Instant,
) -> io::Result<()> {
    while c.wants_write() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        sock.set_write_timeout(Some(left))?;
        match c.write_tls(sock) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One read from the socket, waiting no later than `deadline`, and the records it completes
/// processed: Ok(false) at the end of the stream. A record TLS refuses queues an alert,
/// which is sent (if the socket takes it) before the error is returned.
fn take_in_by<D: rustls::SideData>(
    c: &mut rustls::ConnectionCommon<D>,
    sock: &mut TcpStream,
    deadline: Instant,
) -> io::Result<bool> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::ErrorKind::TimedOut.into());
    }
    sock.set_read_timeout(Some(left))?;
    let n = match c.read_tls(sock) {
        Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
        Ok(n) => n,
        Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(true),
        Err(e) => return Err(e),
    };
    if let Err(e) = c.process_new_packets() {
        let _ = flush_by(
            c,
            sock,
            Instant::now() + std::time::Duration::from_millis(100),
        );
        return Err(io::Error::new(io::ErrorKind::InvalidData, e));
    }
    Ok(n > 0)
}

/// Plaintext by `deadline`: Ok(0) when the peer closed the session, TimedOut when nothing
/// arrived in time. Every read waits only for the time left, so a record sent a byte at a
/// time ends at the deadline too.
pub(super) fn read_by<D: rustls::SideData>(
    c: &mut rustls::ConnectionCommon<D>,
    sock: &mut TcpStream,
    buf: &mut [u8],
    deadline: Instant,
) -> io::Result<usize> {
    loop {
        match c.reader().read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        match take_in_by(c, sock, deadline) {
            // the end of the stream: the reader says whether the peer closed cleanly
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                return c.reader().read(buf).map_err(|e| match e.kind() {
                    io::ErrorKind::WouldBlock => io::ErrorKind::UnexpectedEof.into(),
                    _ => e,
                })
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(io::ErrorKind::TimedOut.into())
            }
            Err(e) => return Err(e),
            Ok(_) => {}
        }
        // key updates and the like, answered as they come
        flush_by(c, sock, deadline)?;
    }
}

/// The socket without waiting: reads and writes that would block say so.
struct DontWait<'a>(&'a TcpStream);

impl Read for DontWait<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        // SAFETY: recv writes at most buf.len() bytes into buf.
        let n = unsafe {
            libc::recv(
                self.0.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

impl Write for DontWait<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        // SAFETY: send reads at most buf.len() bytes from buf.
        let n = unsafe {
            libc::send(
                self.0.as_raw_fd(),
                buf.as_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

pub(super) fn write_reading<D: rustls::SideData>(
    c: &mut rustls::ConnectionCommon<D>,
    sock: &TcpStream,
    data: &[u8],
    deadline: Instant,
    stash: &mut std::collections::VecDeque<u8>,
    closed: &mut bool,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut off = 0;
    loop {
        if off < data.len() {
            off += c.writer().write(&data[off..])?;
        }
        if !c.wants_write() {
            if off == data.len() {
                return Ok(());
            }
            continue;
        }
        match c.write_tls(&mut DontWait(sock)) {
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let mut pfd = libc::pollfd {
            fd: sock.as_raw_fd(),
            events: libc::POLLOUT | if *closed { 0 } else { libc::POLLIN },
            revents: 0,
        };
        let ms = libc::c_int::try_from(left.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
        // SAFETY: one live pollfd and a count of one.
        if unsafe { libc::poll(&mut pfd, 1, ms) } <= 0 || pfd.revents & libc::POLLIN == 0 {
            continue;
        }
        loop {
            match c.read_tls(&mut DontWait(sock)) {
                Ok(0) => {
                    *closed = true;
                    break;
                }
                Ok(_) => {
                    c.process_new_packets()
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                    let mut buf = [0u8; 16 * 1024];
                    loop {
                        match c.reader().read(&mut buf) {
                            Ok(0) => {
                                *closed = true;
                                break;
                            }
                            Ok(n) => stash.extend(&buf[..n]),
                            Err(_) => break,
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
    }
}
