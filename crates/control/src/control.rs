//! The control connection as the drivers see it: write what the session queued, read what
//! arrived within a short wait, and report a close.

use std::io::{self, Read};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::tls::Tls;

/// A control connection's first read buffer, and the most one read takes.
const READ_MIN: usize = 4 << 10;
const READ_MAX: usize = 64 << 10;

/// The result of one bounded read.
pub enum Input {
    Bytes(usize),
    Nothing,
    Closed,
}

pub struct Control {
    pub sock: TcpStream,
    /// TLS over `sock`, when the control connection has it.
    pub tls: Option<Box<Tls>>,
    /// Where reads land: small while the connection logs in or waits for its spec (a
    /// thousand such connections may be held at once), grown to [`READ_MAX`] when a read
    /// fills it (reports of many streams).
    buf: Vec<u8>,
    /// What arrived while a write waited for room: both peers may write large reports at
    /// once (thousands of streams), and neither may wait on the other without reading.
    stash: std::collections::VecDeque<u8>,
    /// The peer closed while a write waited.
    stash_closed: bool,
}

impl Control {
    pub fn new(sock: TcpStream) -> Control {
        let _ = sock.set_nodelay(true);
        Control {
            sock,
            tls: None,
            buf: vec![0u8; READ_MIN],
            stash: std::collections::VecDeque::new(),
            stash_closed: false,
        }
    }

    /// A control connection whose TLS handshake is done.
    pub fn with_tls(sock: TcpStream, tls: Tls) -> Control {
        let mut c = Control::new(sock);
        c.tls = Some(Box::new(tls));
        c
    }

    /// Writes `data` (through TLS if on) within `timeout`.
    pub fn write_all(&mut self, data: &[u8], timeout: Duration) -> io::Result<()> {
        self.sock.set_write_timeout(Some(timeout))?;
        match &mut self.tls {
            Some(t) => t.write_all_reading(
                &self.sock,
                data,
                Instant::now() + timeout,
                &mut self.stash,
                &mut self.stash_closed,
            ),
            None => self.write_reading(data, timeout),
        }
    }

    /// Writes `data` within `timeout`, taking in what the peer sends meanwhile whenever
    /// the socket is full.
    fn write_reading(&mut self, data: &[u8], timeout: Duration) -> io::Result<()> {
        let fd = self.sock.as_raw_fd();
        let deadline = Instant::now() + timeout;
        let mut off = 0;
        while off < data.len() {
            let rest = &data[off..];
            // SAFETY: send reads at most rest.len() bytes from a live slice.
            let n = unsafe {
                libc::send(
                    fd,
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
            if n > 0 {
                off += n as usize;
                continue;
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => {}
                _ if n == 0 => return Err(io::ErrorKind::WriteZero.into()),
                _ => return Err(e),
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLOUT | if self.stash_closed { 0 } else { libc::POLLIN },
                revents: 0,
            };
            let ms = libc::c_int::try_from(left.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
            // SAFETY: one live pollfd and a count of one.
            if unsafe { libc::poll(&mut pfd, 1, ms) } > 0 && pfd.revents & libc::POLLIN != 0 {
                self.take_in(fd);
            }
        }
        Ok(())
    }

    /// Reads what is queued into the stash, without waiting.
    fn take_in(&mut self, fd: libc::c_int) {
        loop {
            // SAFETY: recv writes at most buf.len() bytes into our buffer.
            let n = unsafe {
                libc::recv(
                    fd,
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            match n {
                0 => {
                    self.stash_closed = true;
                    return;
                }
                n if n > 0 => {
                    self.stash.extend(&self.buf[..n as usize]);
                    if n as usize == self.buf.len() {
                        self.buf.resize(READ_MAX, 0);
                    }
                }
                _ => {
                    if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                        return;
                    }
                }
            }
        }
    }

    /// Writes every queued frame.
    pub fn flush(
        &mut self,
        mut next: impl FnMut() -> Option<Vec<u8>>,
        timeout: Duration,
    ) -> io::Result<()> {
        while let Some(frame) = next() {
            self.write_all(&frame, timeout)?;
        }
        Ok(())
    }

    /// Waits up to `wait` for bytes; they are in `self.bytes(n)` afterwards.
    pub fn read(&mut self, wait: Duration) -> io::Result<Input> {
        if !self.stash.is_empty() {
            let n = self.stash.len().min(self.buf.len());
            for (b, s) in self.buf.iter_mut().zip(self.stash.drain(..n)) {
                *b = s;
            }
            return Ok(Input::Bytes(n));
        }
        if self.stash_closed {
            return Ok(Input::Closed);
        }
        self.sock
            .set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
        let got = match &mut self.tls {
            Some(t) => t.read(&mut self.sock, &mut self.buf[..]),
            None => self.sock.read(&mut self.buf[..]),
        };
        match got {
            Ok(0) => Ok(Input::Closed),
            Ok(n) => {
                if n == self.buf.len() && n < READ_MAX {
                    // the next read may take more at once; what was read stays in place
                    self.buf.resize(READ_MAX, 0);
                }
                Ok(Input::Bytes(n))
            }
            // the read timeout; not TCP giving up on the peer (ETIMEDOUT), which is an error
            Err(e) if !crate::breaker::gave_up(&e) && wirerate_engine::net::transient(&e) => {
                Ok(Input::Nothing)
            }
            // a TLS peer that closes without close_notify: a close all the same
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::UnexpectedEof
                ) =>
            {
                Ok(Input::Closed)
            }
            Err(e) => Err(e),
        }
    }

    /// Whether nothing waits to be read: nothing stashed, no close seen, no plaintext TLS
    /// has decrypted and not handed out, nothing TLS has to send, no bytes on the socket.
    /// Only a quiet connection may wait for its socket to turn readable.
    pub fn quiet(&mut self) -> bool {
        if !self.stash.is_empty() || self.stash_closed {
            return false;
        }
        if self.tls.as_mut().is_some_and(|t| !t.quiet()) {
            return false;
        }
        !wirerate_engine::net::wait_readable(&self.sock, Duration::ZERO)
    }

    pub fn bytes(&self, n: usize) -> &[u8] {
        &self.buf[..n]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Both ends write a frame far larger than the socket buffers at the same moment, as two
    /// final reports of thousands of streams do: each takes in the other's while it waits,
    /// and hands it on whole afterwards.
    #[test]
    fn two_ends_writing_large_frames_at_once_both_finish_and_lose_nothing() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        let frame = |seed: u8| -> Vec<u8> {
            (0..8 << 20)
                .map(|i: u32| (i as u8).wrapping_mul(seed))
                .collect()
        };
        let ends: Vec<_> = [(a, 3u8, 5u8), (b, 5, 3)]
            .into_iter()
            .map(|(sock, mine, theirs)| {
                std::thread::spawn(move || {
                    let mut c = Control::new(sock);
                    c.write_all(&frame(mine), Duration::from_secs(20))
                        .expect("the write completes");
                    let want = frame(theirs);
                    let mut got = Vec::new();
                    while got.len() < want.len() {
                        match c.read(Duration::from_secs(5)).expect("read") {
                            Input::Bytes(n) => got.extend_from_slice(c.bytes(n)),
                            Input::Nothing | Input::Closed => break,
                        }
                    }
                    got == want
                })
            })
            .collect();
        for e in ends {
            assert!(e.join().unwrap(), "a frame arrived damaged or short");
        }
    }
}
