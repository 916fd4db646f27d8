//! ttcp over TCP: one connection carrying raw bytes, no header, no trailer. The transmitter
//! writes and closes; the receiver reads until end of file.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};

use socket2::{Domain, SockAddr, Socket, Type};
use wirerate_core::ttcp::Transfer;

use super::{
    bound_socket, fill, io_err, pattern, resolve, sample, set_debug, Buffer, Config, Ends,
    TtcpError,
};

/// Opens the connection, announcing each step as ttcp does (`socket`, `sndbuf`, `nodelay`,
/// `connect`). Every resolved address is tried in turn; the steps are announced once.
fn connect(cfg: &Config, host: &str, ends: &mut Ends<'_>) -> Result<TcpStream, TtcpError> {
    let addrs = resolve(host, cfg.port, cfg.family)?;
    let mut last = None;
    for (i, addr) in addrs.iter().enumerate() {
        let say = |ends: &mut Ends<'_>, msg: &str| {
            if i == 0 {
                (ends.progress)(msg);
            }
        };
        let sock = Socket::new(Domain::for_address(*addr), Type::STREAM, None)
            .map_err(io_err("socket"))?;
        say(ends, "socket");
        if let Some(size) = cfg.sockbuf {
            sock.set_send_buffer_size(size)
                .map_err(io_err("setsockopt: sndbuf"))?;
            say(ends, "sndbuf");
        }
        set_debug(&sock, cfg.debug)?;
        if cfg.nodelay {
            sock.set_nodelay(true)
                .map_err(io_err("setsockopt: nodelay"))?;
            say(ends, "nodelay");
        }
        match sock.connect(&SockAddr::from(*addr)) {
            Ok(()) => {
                (ends.progress)("connect");
                return Ok(sock.into());
            }
            Err(e) => last = Some(e),
        }
    }
    Err(TtcpError::Io {
        what: "connect",
        cause: last.unwrap_or_else(|| io::Error::from(io::ErrorKind::AddrNotAvailable)),
    })
}

/// Writes all of `data`, counting every write call; interrupted calls are retried.
fn write_counted(stream: &mut TcpStream, data: &[u8], calls: &mut u64) -> Result<(), TtcpError> {
    let mut done = 0;
    while done < data.len() {
        *calls += 1;
        match stream.write(&data[done..]) {
            Ok(0) => {
                return Err(TtcpError::Io {
                    what: "write",
                    cause: io::Error::from(io::ErrorKind::WriteZero),
                })
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err("write")(e)),
        }
    }
    Ok(())
}

/// `-t` over TCP: the pattern `nbuf` times, or stdin until its end. The clock starts after
/// connect and stops after the last write returns (bytes may still sit in socket buffers).
pub(super) fn transmit(
    cfg: &Config,
    host: &str,
    buf: &mut Buffer,
    ends: &mut Ends<'_>,
) -> Result<Transfer, TtcpError> {
    let mut stream = connect(cfg, host, ends)?;
    let start = sample();
    let mut bytes = 0u64;
    let mut calls = 0u64;
    let data = buf.bytes();
    if cfg.sink {
        pattern(data);
        for _ in 0..cfg.nbuf {
            write_counted(&mut stream, data, &mut calls)?;
            bytes += data.len() as u64;
        }
    } else {
        loop {
            let n = match ends.input.read(data) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_err("read stdin")(e)),
            };
            write_counted(&mut stream, &data[..n], &mut calls)?;
            bytes += n as u64;
        }
    }
    let end = sample();
    Ok(Transfer {
        bytes,
        calls,
        start,
        end,
    })
}

/// Accepts one connection and announces its peer (`accept from 127.0.0.1`).
fn accept(cfg: &Config, ends: &mut Ends<'_>) -> Result<TcpStream, TtcpError> {
    let sock = bound_socket(cfg, Type::STREAM)?;
    (ends.progress)("socket");
    if let Some(size) = cfg.sockbuf {
        sock.set_recv_buffer_size(size)
            .map_err(io_err("setsockopt: rcvbuf"))?;
        (ends.progress)("rcvbuf");
    }
    sock.listen(1).map_err(io_err("listen"))?;
    set_debug(&sock, cfg.debug)?;
    let (conn, peer) = loop {
        match sock.accept() {
            Ok(c) => break c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err("accept")(e)),
        }
    };
    let ip = peer
        .as_socket()
        .map(|a: SocketAddr| a.ip().to_canonical().to_string())
        .unwrap_or_else(|| "unknown".into());
    (ends.progress)(&format!("accept from {ip}"));
    Ok(conn.into())
}

/// One network read as ttcp makes it: a single read, or with `-B` reads until the buffer is
/// full; with `-T` every byte is then read back. Returns the byte count (0 at the end).
fn read_counted(
    cfg: &Config,
    stream: &mut TcpStream,
    data: &mut [u8],
    calls: &mut u64,
) -> Result<usize, TtcpError> {
    let n = if cfg.full_blocks {
        let (n, c) = fill(stream, data).map_err(io_err("read"))?;
        *calls += c;
        n
    } else {
        loop {
            *calls += 1;
            match stream.read(data) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err("read")(e)),
            }
        }
    };
    if cfg.touch {
        let sum = data[..n].iter().fold(0u8, |s, b| s.wrapping_add(*b));
        std::hint::black_box(sum);
    }
    Ok(n)
}

/// `-r` over TCP: reads until the transmitter closes, discarding (`-s`) or copying to
/// stdout. The clock starts right after accept, so it includes the wait for the first byte.
pub(super) fn receive(
    cfg: &Config,
    buf: &mut Buffer,
    ends: &mut Ends<'_>,
) -> Result<Transfer, TtcpError> {
    let mut stream = accept(cfg, ends)?;
    let start = sample();
    let mut bytes = 0u64;
    let mut calls = 0u64;
    let data = buf.bytes();
    loop {
        let n = read_counted(cfg, &mut stream, data, &mut calls)?;
        if n == 0 {
            break;
        }
        if !cfg.sink {
            ends.output
                .write_all(&data[..n])
                .map_err(io_err("write stdout"))?;
        }
        bytes += n as u64;
    }
    let end = sample();
    if !cfg.sink {
        ends.output.flush().map_err(io_err("write stdout"))?;
    }
    Ok(Transfer {
        bytes,
        calls,
        start,
        end,
    })
}
