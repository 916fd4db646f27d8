//! The control connection as the drivers see it: write what the session queued, read what
//! arrived within a short wait, and report a close.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The result of one bounded read.
pub enum Input {
    Bytes(usize),
    Nothing,
    Closed,
}

pub struct Control {
    pub sock: TcpStream,
    buf: Box<[u8; 64 * 1024]>,
}

impl Control {
    pub fn new(sock: TcpStream) -> Control {
        let _ = sock.set_nodelay(true);
        Control {
            sock,
            buf: Box::new([0u8; 64 * 1024]),
        }
    }

    /// Writes every queued frame.
    pub fn flush(
        &mut self,
        mut next: impl FnMut() -> Option<Vec<u8>>,
        timeout: Duration,
    ) -> io::Result<()> {
        self.sock.set_write_timeout(Some(timeout))?;
        while let Some(frame) = next() {
            self.sock.write_all(&frame)?;
        }
        Ok(())
    }

    /// Waits up to `wait` for bytes; they are in `self.bytes(n)` afterwards.
    pub fn read(&mut self, wait: Duration) -> io::Result<Input> {
        self.sock
            .set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
        match self.sock.read(&mut self.buf[..]) {
            Ok(0) => Ok(Input::Closed),
            Ok(n) => Ok(Input::Bytes(n)),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                Ok(Input::Nothing)
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => Ok(Input::Closed),
            Err(e) => Err(e),
        }
    }

    pub fn bytes(&self, n: usize) -> &[u8] {
        &self.buf[..n]
    }
}
