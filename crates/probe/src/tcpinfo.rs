//! TCP_INFO of a socket, parsed by offset from the length the kernel returns, so an older
//! kernel's shorter struct yields fewer fields instead of garbage. Offsets follow the Linux
//! UAPI `struct tcp_info`.

use std::os::fd::AsRawFd;

use wirerate_core::result::TcpInfo;

const TCPI_OPT_TIMESTAMPS: u8 = 1;

fn u32_at(b: &[u8], off: usize) -> Option<u64> {
    let s: [u8; 4] = b.get(off..off + 4)?.try_into().ok()?;
    Some(u64::from(u32::from_ne_bytes(s)))
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    let s: [u8; 8] = b.get(off..off + 8)?.try_into().ok()?;
    Some(u64::from_ne_bytes(s))
}

/// Parses the bytes the kernel filled in.
pub fn parse_tcp_info(b: &[u8]) -> TcpInfo {
    TcpInfo {
        timestamps: b.get(5).map(|o| o & TCPI_OPT_TIMESTAMPS != 0),
        snd_mss: u32_at(b, 16),
        rcv_mss: u32_at(b, 20),
        lost: u32_at(b, 32),
        pmtu: u32_at(b, 60),
        rtt_us: u32_at(b, 68),
        rttvar_us: u32_at(b, 72),
        snd_cwnd: u32_at(b, 80),
        reordering: u32_at(b, 88),
        retransmits_total: u32_at(b, 100),
        bytes_acked: u64_at(b, 120),
        bytes_received: u64_at(b, 128),
        segs_out: u32_at(b, 136),
        segs_in: u32_at(b, 140),
        data_segs_in: u32_at(b, 152),
        data_segs_out: u32_at(b, 156),
        delivery_rate_bps: u64_at(b, 160).map(|r| r.saturating_mul(8)),
        busy_time_us: u64_at(b, 168),
        rwnd_limited_us: u64_at(b, 176),
        sndbuf_limited_us: u64_at(b, 184),
        bytes_retrans: u64_at(b, 208),
        congestion: None,
        min_rtt_us: u32_at(b, 148),
        snd_ssthresh: u32_at(b, 76),
        rcv_space: u32_at(b, 96),
        notsent_bytes: u32_at(b, 144),
        pacing_rate_bps: u64_at(b, 104).map(|r| r.saturating_mul(8)),
        // the bit exists once delivery_rate does (Linux 4.9)
        app_limited: b.get(7).filter(|_| b.len() >= 168).map(|f| f & 1 != 0),
        dsack_dups: u32_at(b, 216),
        reord_seen: u32_at(b, 220),
        rcv_ooopack: u32_at(b, 224),
        snd_wnd: u32_at(b, 228),
        rcv_wnd: u32_at(b, 232),
        total_rto: b
            .get(240..242)
            .and_then(|s| <[u8; 2]>::try_from(s).ok())
            .map(|s| u64::from(u16::from_ne_bytes(s))),
    }
}

/// Reads TCP_INFO and the congestion control name of a connected TCP socket.
pub fn tcp_info(sock: &impl AsRawFd) -> Option<TcpInfo> {
    let fd = sock.as_raw_fd();
    let mut buf = [0u8; 512];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `buf` and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    let n = (len as usize).min(buf.len());
    let mut info = parse_tcp_info(&buf[..n]);
    info.congestion = congestion(sock);
    Some(info)
}

/// The congestion control algorithm of a TCP socket.
pub fn congestion(sock: &impl AsRawFd) -> Option<String> {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: as above, bounded by `len`.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    let raw = &buf[..(len as usize).min(buf.len())];
    let end = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
    std::str::from_utf8(&raw[..end]).ok().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn short_buffers_give_fewer_fields() {
        let info = parse_tcp_info(&[0u8; 104]);
        assert_eq!(info.retransmits_total, Some(0));
        assert_eq!(info.segs_out, None);
        assert_eq!(info.busy_time_us, None);
        assert_eq!(parse_tcp_info(&[]), TcpInfo::default());
    }

    #[test]
    fn real_socket_reports_segments_and_rtt() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(&[7u8; 100_000]).unwrap();
        let mut got = vec![0u8; 100_000];
        s.read_exact(&mut got).unwrap();
        let info = tcp_info(&c).unwrap();
        assert!(info.segs_out.unwrap() >= 1);
        assert!(info.rtt_us.is_some());
        assert_eq!(info.bytes_acked.map(|b| b >= 100_000), Some(true));
        assert_eq!(info.timestamps, Some(true));
        assert!(info.congestion.is_some_and(|c| !c.is_empty()));
        let rinfo = tcp_info(&s).unwrap();
        assert_eq!(rinfo.bytes_received, Some(100_000));
    }
}
