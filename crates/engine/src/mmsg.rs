//! Batched datagram I/O: `sendmmsg` and `recvmmsg` over a fixed set of slots, so a UDP stream
//! moves up to [`MAX_BATCH`] datagrams per system call. The slots are one contiguous buffer
//! owned by the batch; the kernel's headers are rebuilt before each call, so no pointer
//! outlives the borrow it was taken from.

use std::io;
use std::mem::MaybeUninit;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

/// The most datagrams one call moves.
pub const MAX_BATCH: usize = 32;
/// Slots of one batch together stay under this, so large datagrams take fewer slots.
const BATCH_BYTES: usize = 1 << 20;

/// How many slots of `len` bytes a batch holds: up to [`MAX_BATCH`], at least one.
pub fn batch_for(len: usize) -> usize {
    (BATCH_BYTES / len.max(1)).clamp(1, MAX_BATCH)
}

/// `linux/udp.h`: the segment size of a GSO send, and GRO on a receiving socket.
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;
/// What one GSO send may carry: one UDP datagram's worth of payload.
const GSO_BYTES: usize = 65_000;
/// A receive slot of a GRO socket: the largest coalesced datagram.
pub const GRO_SLOT: usize = 65_535;

/// How many datagrams of `len` bytes one GSO send carries: up to [`MAX_BATCH`], at least
/// one.
pub fn gso_batch_for(len: usize) -> usize {
    (GSO_BYTES / len.max(1)).clamp(1, MAX_BATCH)
}

fn set_udp_opt(sock: &UdpSocket, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: a pointer to a live int and its size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_UDP,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sends in GSO segments of `len` bytes (UDP_SEGMENT).
pub fn enable_gso(sock: &UdpSocket, len: usize) -> io::Result<()> {
    let len = libc::c_int::try_from(len).map_err(|_| io::ErrorKind::InvalidInput)?;
    set_udp_opt(sock, UDP_SEGMENT, len)
}

/// Receives coalesced datagrams (UDP_GRO).
pub fn enable_gro(sock: &UdpSocket) -> io::Result<()> {
    set_udp_opt(sock, UDP_GRO, 1)
}

/// `count` slots of `len` bytes each, in one buffer.
struct Slots {
    data: Vec<u8>,
    len: usize,
    count: usize,
}

impl Slots {
    fn new(count: usize, len: usize) -> Slots {
        Slots {
            data: vec![0u8; count * len],
            len,
            count,
        }
    }

    fn slot_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.data[i * self.len..(i + 1) * self.len]
    }

    fn slot(&self, i: usize) -> &[u8] {
        &self.data[i * self.len..(i + 1) * self.len]
    }
}

/// The sending side: slots filled from a template, sent on a connected socket.
pub struct SendBatch {
    slots: Slots,
}

impl SendBatch {
    /// `count` slots, each a copy of `template`.
    pub fn new(count: usize, template: &[u8]) -> SendBatch {
        let count = count.clamp(1, MAX_BATCH);
        let mut slots = Slots::new(count, template.len());
        for i in 0..count {
            slots.slot_mut(i).copy_from_slice(template);
        }
        SendBatch { slots }
    }

    pub fn capacity(&self) -> usize {
        self.slots.count
    }

    pub fn slot_mut(&mut self, i: usize) -> &mut [u8] {
        self.slots.slot_mut(i)
    }

    /// Sends the first `lens.len()` slots, slot i cut to `lens[i]` bytes; returns how many
    /// datagrams the kernel took (it stops at the first one it refuses and reports that
    /// refusal as the error when it took none).
    pub fn send(&mut self, sock: &UdpSocket, lens: &[usize]) -> io::Result<usize> {
        let n = lens.len().min(self.slots.count);
        if n == 0 {
            return Ok(0);
        }
        let mut iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; MAX_BATCH];
        // SAFETY: mmsghdr is plain data; all-zero is a valid value (null pointers, lengths 0).
        let mut hdrs: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
        for i in 0..n {
            let slot = self.slots.slot_mut(i);
            iov[i] = libc::iovec {
                iov_base: slot.as_mut_ptr().cast(),
                iov_len: lens[i].min(slot.len()),
            };
            hdrs[i].msg_hdr.msg_iov = &mut iov[i];
            hdrs[i].msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: the first n headers point at n live iovecs, each at a live slot of at least
        // iov_len bytes; the socket is connected, so no address is given. Nothing is kept
        // past the call.
        let r = unsafe { libc::sendmmsg(sock.as_raw_fd(), hdrs.as_mut_ptr(), n as u32, 0) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r as usize)
    }
}

impl SendBatch {
    /// Sends the first `lens.len()` slots as one GSO buffer: the socket cuts it into
    /// datagrams of the slot length ([`enable_gso`]); all but the last must be whole slots.
    /// Returns how many datagrams went out.
    pub fn send_gso(&mut self, sock: &UdpSocket, lens: &[usize]) -> io::Result<usize> {
        let n = lens.len().min(self.slots.count);
        let Some(&last) = lens[..n].last() else {
            return Ok(0);
        };
        let total = (n - 1) * self.slots.len + last.min(self.slots.len);
        sock.send(&self.slots.data[..total])?;
        Ok(n)
    }
}

/// One received datagram: its bytes, its source, and the socket's cumulative drop count when
/// the kernel attached one (SO_RXQ_OVFL). On a GRO socket `data` may hold several
/// datagrams of `segment` bytes each (the last may be shorter).
pub struct Received<'a> {
    pub data: &'a [u8],
    pub src: Option<SocketAddr>,
    pub drops: Option<u32>,
    pub segment: Option<usize>,
}

/// 64 bytes, aligned for cmsghdr: room for the one u32 control message we ask for.
type Control = [u64; 8];

/// The receiving side: slots, source addresses and control buffers for one `recvmmsg`.
pub struct RecvBatch {
    slots: Slots,
    names: Vec<MaybeUninit<libc::sockaddr_storage>>,
    control: Vec<Control>,
    lens: Vec<usize>,
    name_lens: Vec<libc::socklen_t>,
    control_lens: Vec<usize>,
    filled: usize,
}

impl RecvBatch {
    /// `count` slots of `len` bytes; a longer datagram is cut to `len`.
    pub fn new(count: usize, len: usize) -> RecvBatch {
        let count = count.clamp(1, MAX_BATCH);
        RecvBatch {
            slots: Slots::new(count, len.max(1)),
            names: vec![MaybeUninit::zeroed(); count],
            control: vec![[0u64; 8]; count],
            lens: vec![0; count],
            name_lens: vec![0; count],
            control_lens: vec![0; count],
            filled: 0,
        }
    }

    /// Waits for one datagram (as long as the socket's read timeout allows), then takes
    /// whatever else is already queued, up to the batch; returns how many arrived.
    pub fn recv(&mut self, sock: &UdpSocket) -> io::Result<usize> {
        self.filled = 0;
        let n = self.slots.count;
        let mut iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; MAX_BATCH];
        // SAFETY: mmsghdr is plain data; all-zero is a valid value (null pointers, lengths 0).
        let mut hdrs: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
        let slot_len = self.slots.len;
        for i in 0..n {
            iov[i] = libc::iovec {
                iov_base: self.slots.data[i * slot_len..].as_mut_ptr().cast(),
                iov_len: slot_len,
            };
            let h = &mut hdrs[i].msg_hdr;
            h.msg_iov = &mut iov[i];
            h.msg_iovlen = 1;
            h.msg_name = self.names[i].as_mut_ptr().cast();
            h.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_control = self.control[i].as_mut_ptr().cast();
            h.msg_controllen = std::mem::size_of::<Control>();
        }
        // SAFETY: each of the n headers points at a live slot of slot_len bytes, a live
        // sockaddr_storage and a live control buffer, with their sizes; the kernel writes only
        // within them. MSG_WAITFORONE blocks for the first datagram only.
        let r = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                hdrs.as_mut_ptr(),
                n as u32,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let got = (r as usize).min(n);
        for (i, h) in hdrs.iter().enumerate().take(got) {
            self.lens[i] = (h.msg_len as usize).min(slot_len);
            self.name_lens[i] = h.msg_hdr.msg_namelen;
            self.control_lens[i] = h.msg_hdr.msg_controllen;
        }
        self.filled = got;
        Ok(got)
    }

    /// Datagram `i` of the last [`RecvBatch::recv`], or None past what arrived.
    pub fn get(&self, i: usize) -> Option<Received<'_>> {
        if i >= self.filled {
            return None;
        }
        let data = &self.slots.slot(i)[..self.lens[i]];
        let name_len = self.name_lens[i];
        let src = (name_len > 0
            && name_len as usize <= std::mem::size_of::<libc::sockaddr_storage>())
        .then(|| {
            // SAFETY: the buffer started zeroed and the kernel wrote a sockaddr of name_len
            // bytes (checked to fit) into it.
            unsafe { socket2::SockAddr::new(self.names[i].assume_init(), name_len) }.as_socket()
        })
        .flatten();
        let (drops, segment) = self.control_info(i);
        Some(Received {
            data,
            src,
            drops,
            segment,
        })
    }

    /// The drop count (SO_RXQ_OVFL) and the GRO segment size (UDP_GRO) the kernel
    /// attached to datagram `i`.
    fn control_info(&self, i: usize) -> (Option<u32>, Option<usize>) {
        let controllen = self.control_lens[i].min(std::mem::size_of::<Control>());
        if controllen == 0 {
            return (None, None);
        }
        // SAFETY: msghdr is plain data; only its control pointer and length are set, to a
        // buffer we own that the kernel filled with `controllen` bytes.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = self.control[i].as_ptr() as *mut libc::c_void;
        msg.msg_controllen = controllen;
        let (mut drops, mut segment) = (None, None);
        // SAFETY: the CMSG macros walk the control buffer, bounded by msg_controllen; each
        // header they return lies inside it; SO_RXQ_OVFL carries one u32, UDP_GRO one int.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SO_RXQ_OVFL {
                    drops = Some(std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const u32));
                }
                if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == UDP_GRO {
                    let s = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::c_int);
                    segment = usize::try_from(s).ok().filter(|&s| s > 0);
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        (drops, segment)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_sizes_stay_within_bounds() {
        assert_eq!(batch_for(64), MAX_BATCH);
        assert_eq!(batch_for(65_507), 16);
        assert_eq!(batch_for(0), MAX_BATCH);
        assert_eq!(batch_for(4 << 20), 1);
    }

    #[test]
    fn a_batch_crosses_loopback_whole_and_in_order() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        let mut s = SendBatch::new(8, &[7u8; 100]);
        for i in 0..8 {
            s.slot_mut(i)[0] = i as u8;
        }
        let lens = [100, 100, 100, 100, 100, 100, 100, 30];
        assert_eq!(s.send(&tx, &lens).unwrap(), 8);
        let mut r = RecvBatch::new(MAX_BATCH, 80);
        let mut seen = Vec::new();
        while seen.len() < 8 {
            let n = r.recv(&rx).unwrap();
            for i in 0..n {
                let d = r.get(i).unwrap();
                assert_eq!(d.src, Some(tx.local_addr().unwrap()));
                seen.push((d.data[0], d.data.len()));
            }
            assert!(r.get(n).is_none());
        }
        // longer datagrams are cut to the slot; the short last one keeps its length
        let want: Vec<(u8, usize)> = (0..8).map(|i| (i, if i == 7 { 30 } else { 80 })).collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn a_gso_buffer_arrives_as_datagrams_or_coalesced_with_its_segment_size() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        if enable_gso(&tx, 100).is_err() || enable_gro(&rx).is_err() {
            eprintln!("this kernel has no UDP GSO or GRO: nothing to test");
            return;
        }
        let mut s = SendBatch::new(8, &[7u8; 100]);
        for i in 0..8 {
            s.slot_mut(i)[0] = i as u8;
        }
        let lens = [100, 100, 100, 100, 100, 100, 100, 30];
        assert_eq!(s.send_gso(&tx, &lens).unwrap(), 8);
        let mut r = RecvBatch::new(4, GRO_SLOT);
        let mut seen = Vec::new();
        while seen.iter().map(|(_, n)| n).sum::<usize>() < 730 {
            let n = r.recv(&rx).unwrap();
            for i in 0..n {
                let d = r.get(i).unwrap();
                let seg = d.segment.unwrap_or(d.data.len());
                for part in d.data.chunks(seg) {
                    seen.push((part[0], part.len()));
                }
            }
        }
        // whether or not the kernel coalesced them, the eight datagrams come out whole
        let want: Vec<(u8, usize)> = (0..8).map(|i| (i, if i == 7 { 30 } else { 100 })).collect();
        assert_eq!(seen, want);
    }
}
