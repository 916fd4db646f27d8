//! The UDP ceiling of this host: a bare `sendmmsg` loop and a bare `recvmmsg` loop over
//! loopback, no headers, no pacing, no accounting beyond a count. `bench/engine.sh` compares
//! wirerate's UDP datagram rate with it.
//!
//!   cargo run --release --example udp_ceiling -- [SECONDS] [LEN]
//!
//! Prints the datagrams received per second.

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BATCH: usize = 32;

fn main() {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(3.0);
    let len: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(64);
    let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let tx = UdpSocket::bind("127.0.0.1:0").expect("bind");
    tx.connect(rx.local_addr().expect("address"))
        .expect("connect");
    // the same receive buffer wirerate's UDP receiver asks for
    set_int(&rx, libc::SOL_SOCKET, libc::SO_RCVBUF, 4 << 20);
    rx.set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut buf = vec![7u8; BATCH * len];
            while !stop.load(Ordering::Relaxed) {
                let _ = send_batch(&tx, &mut buf, len);
            }
        })
    };
    let mut buf = vec![0u8; BATCH * len];
    let mut got = 0u64;
    // the first datagram starts the clock, as a receiver's first read does
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    let end = Instant::now() + Duration::from_secs_f64(secs);
    while Instant::now() < end {
        let n = recv_batch(&rx, &mut buf, len);
        if n > 0 {
            last = Instant::now();
            first.get_or_insert(last);
            got += n as u64;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = sender.join();
    let span = first.map_or(0.0, |f| last.duration_since(f).as_secs_f64());
    println!("{:.0}", if span > 0.0 { got as f64 / span } else { 0.0 });
}

fn set_int(sock: &UdpSocket, level: i32, name: i32, v: i32) {
    // SAFETY: a pointer to a live int and its size.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&v as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        );
    }
}

/// Headers for `BATCH` slots of `len` bytes of `buf`.
fn headers(buf: &mut [u8], len: usize, iov: &mut [libc::iovec; BATCH]) -> [libc::mmsghdr; BATCH] {
    // SAFETY: mmsghdr is plain data; all-zero is a valid empty header.
    let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
    for (i, (m, v)) in msgs.iter_mut().zip(iov.iter_mut()).enumerate() {
        v.iov_base = buf[i * len..].as_mut_ptr().cast();
        v.iov_len = len;
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
    }
    msgs
}

fn send_batch(sock: &UdpSocket, buf: &mut [u8], len: usize) -> i32 {
    let mut iov = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; BATCH];
    let mut msgs = headers(buf, len, &mut iov);
    // SAFETY: BATCH headers, each pointing at one iovec inside `iov`, which points inside
    // `buf`; all live across the call.
    unsafe { libc::sendmmsg(sock.as_raw_fd(), msgs.as_mut_ptr(), BATCH as u32, 0) }
}

fn recv_batch(sock: &UdpSocket, buf: &mut [u8], len: usize) -> i32 {
    let mut iov = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; BATCH];
    let mut msgs = headers(buf, len, &mut iov);
    // SAFETY: as in send_batch; the kernel writes at most `len` bytes into each slot.
    let n = unsafe {
        libc::recvmmsg(
            sock.as_raw_fd(),
            msgs.as_mut_ptr(),
            BATCH as u32,
            libc::MSG_WAITFORONE,
            std::ptr::null_mut(),
        )
    };
    n.max(0)
}
