//! Options of the client's data sockets that only the client sets, under iperf3's names:
//! an IPv6 flow label (`-L`), MPTCP sockets (`-m`), and don't-fragment on UDP
//! (`--dont-fragment`).

use std::io;
use std::net::SocketAddrV6;
use std::os::fd::AsRawFd;

use socket2::SockRef;

/// What the client's data sockets get besides the spec's options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DataOpts {
    /// `-L`: the IPv6 flow label of the TCP data streams (20 bits).
    pub flowlabel: Option<u32>,
    /// `-m`: TCP data streams are MPTCP sockets.
    pub mptcp: bool,
    /// `--dont-fragment`: UDP datagrams carry DF (IP_PMTUDISC_DO).
    pub dont_fragment: bool,
}

/// The largest IPv6 flow label.
pub const MAX_FLOWLABEL: u32 = 0xF_FFFF;

/// netinet/in.h: the protocol number of MPTCP sockets.
pub const IPPROTO_MPTCP: i32 = 262;

/// Whether the kernel makes MPTCP sockets (`net.mptcp.enabled`); None when it has no
/// MPTCP at all.
pub fn mptcp_enabled() -> Option<bool> {
    let v = std::fs::read_to_string("/proc/sys/net/mptcp/enabled").ok()?;
    Some(v.trim() != "0")
}

// linux/in6.h
const IPV6_FLOWLABEL_MGR: i32 = 32;
const IPV6_FLOWINFO_SEND: i32 = 33;
const IPV6_FL_A_GET: u8 = 0;
const IPV6_FL_F_CREATE: u16 = 1;
const IPV6_FL_S_ANY: u8 = 255;

/// linux/in6.h `struct in6_flowlabel_req`.
#[repr(C)]
struct FlowlabelReq {
    dst: libc::in6_addr,
    label: u32,
    action: u8,
    share: u8,
    flags: u16,
    expires: u16,
    linger: u16,
    pad: u32,
}

/// Takes flow label `label` towards `dst` for this socket and has the kernel send the
/// flow information given at connect; the connect address then carries the label
/// ([`with_flowlabel`]).
pub(crate) fn set_flowlabel(sock: &SockRef<'_>, dst: &SocketAddrV6, label: u32) -> io::Result<()> {
    let req = FlowlabelReq {
        dst: libc::in6_addr {
            s6_addr: dst.ip().octets(),
        },
        label: (label & MAX_FLOWLABEL).to_be(),
        action: IPV6_FL_A_GET,
        // streams of one test share the label towards the one server
        share: IPV6_FL_S_ANY,
        flags: IPV6_FL_F_CREATE,
        expires: 0,
        linger: 0,
        pad: 0,
    };
    // SAFETY: passes a pointer to a live, fully initialized repr(C) request and its size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_IPV6,
            IPV6_FLOWLABEL_MGR,
            (&req as *const FlowlabelReq).cast(),
            std::mem::size_of::<FlowlabelReq>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    crate::net::set_int_opt(sock, libc::IPPROTO_IPV6, IPV6_FLOWINFO_SEND, 1)
}

/// `dst` with the flow label in its flow information, as connect wants it (network order).
pub(crate) fn with_flowlabel(dst: SocketAddrV6, label: u32) -> SocketAddrV6 {
    SocketAddrV6::new(
        *dst.ip(),
        dst.port(),
        (label & MAX_FLOWLABEL).to_be(),
        dst.scope_id(),
    )
}

/// Don't fragment: datagrams larger than the path's MTU fail to send instead of being
/// fragmented. A dual-stack IPv6 socket gets both families' option; the other one is
/// best effort.
pub fn set_dont_fragment(sock: &SockRef<'_>) -> io::Result<()> {
    let v4 = crate::net::set_int_opt(
        sock,
        libc::IPPROTO_IP,
        libc::IP_MTU_DISCOVER,
        libc::IP_PMTUDISC_DO,
    );
    let v6 = crate::net::set_int_opt(
        sock,
        libc::IPPROTO_IPV6,
        libc::IPV6_MTU_DISCOVER,
        libc::IPV6_PMTUDISC_DO,
    );
    v4.or(v6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    fn get_int(sock: &UdpSocket, level: i32, name: i32) -> i32 {
        let mut v: i32 = -1;
        let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
        // SAFETY: passes a live i32 and its size for the kernel to write.
        let rc = unsafe {
            libc::getsockopt(
                sock.as_raw_fd(),
                level,
                name,
                (&mut v as *mut i32).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
        v
    }

    #[test]
    fn dont_fragment_sets_pmtudisc_do_on_both_families() {
        let v4 = UdpSocket::bind("127.0.0.1:0").unwrap();
        set_dont_fragment(&SockRef::from(&v4)).unwrap();
        let got = get_int(&v4, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER);
        assert_eq!(got, libc::IP_PMTUDISC_DO);
        let v6 = UdpSocket::bind("[::1]:0").unwrap();
        set_dont_fragment(&SockRef::from(&v6)).unwrap();
        let got = get_int(&v6, libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER);
        assert_eq!(got, libc::IPV6_PMTUDISC_DO);
    }
}
