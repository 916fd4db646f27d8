//! The control connection as the drivers see it: write what the session queued, read what
//! arrived within a short wait, and report a close.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::tls::Tls;

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
    buf: Box<[u8; 64 * 1024]>,
}

impl Control {
    pub fn new(sock: TcpStream) -> Control {
        let _ = sock.set_nodelay(true);
        Control {
            sock,
            tls: None,
            buf: Box::new([0u8; 64 * 1024]),
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
            Some(t) => t.write_all(&mut self.sock, data),
            None => self.sock.write_all(data),
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
        self.sock
            .set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
        let got = match &mut self.tls {
            Some(t) => t.read(&mut self.sock, &mut self.buf[..]),
            None => self.sock.read(&mut self.buf[..]),
        };
        match got {
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

    pub fn bytes(&self, n: usize) -> &[u8] {
        &self.buf[..n]
    }
}
