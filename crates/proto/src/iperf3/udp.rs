//! iperf3's UDP data path: the 4-byte greeting that opens a UDP stream, the header at the
//! start of every datagram, and the receiver's loss and jitter accounting. Typed views over
//! bytes with the length checked first; time is an argument.

use super::Iperf3Error;

/// What a client writes on a new UDP stream ("9876" on the wire; iperf3 writes a 32-bit
/// constant in host order, which is these bytes on little-endian hosts).
pub const HELLO: [u8; 4] = *b"9876";
/// The server's answer since 3.12.
pub const REPLY: [u8; 4] = *b"6789";
/// The answer of servers before 3.12: 987654321 as a host-order 32-bit number.
pub const LEGACY_REPLY: u32 = 987_654_321;

/// Smallest datagram that holds a header with a 64-bit counter.
pub const MIN_DATAGRAM: usize = 16;
/// Largest UDP payload over IPv4.
pub const MAX_DATAGRAM: usize = 65_507;

/// True when `b` is a server's answer to [`HELLO`], current or legacy, from either byte order.
pub fn is_reply(b: &[u8]) -> bool {
    b == REPLY || b == LEGACY_REPLY.to_le_bytes() || b == LEGACY_REPLY.to_be_bytes()
}

/// The header at the start of each datagram: the sender's wall clock and a sequence number
/// that starts at 1. The counter is 32 bits unless the client asked for 64
/// (`udp_counters_64bit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub sec: u32,
    pub usec: u32,
    pub seq: u64,
}

impl Header {
    pub fn len(counters_64bit: bool) -> usize {
        if counters_64bit {
            16
        } else {
            12
        }
    }

    /// Writes the header into the start of `buf`; false when `buf` is too short.
    pub fn emit(&self, buf: &mut [u8], counters_64bit: bool) -> bool {
        let Some(h) = buf.get_mut(..Header::len(counters_64bit)) else {
            return false;
        };
        h[..4].copy_from_slice(&self.sec.to_be_bytes());
        h[4..8].copy_from_slice(&self.usec.to_be_bytes());
        if counters_64bit {
            h[8..16].copy_from_slice(&self.seq.to_be_bytes());
        } else {
            h[8..12].copy_from_slice(&(self.seq as u32).to_be_bytes());
        }
        true
    }

    pub fn parse(buf: &[u8], counters_64bit: bool) -> Result<Header, Iperf3Error> {
        let h = buf
            .get(..Header::len(counters_64bit))
            .ok_or(Iperf3Error::BadDatagram)?;
        let word = |i: usize| u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let seq = if counters_64bit {
            (u64::from(word(8)) << 32) | u64::from(word(12))
        } else {
            u64::from(word(8))
        };
        Ok(Header {
            sec: word(0),
            usec: word(4),
            seq,
        })
    }

    /// The send time as seconds since the epoch.
    pub fn sent_s(&self) -> f64 {
        f64::from(self.sec) + f64::from(self.usec) / 1e6
    }
}

/// A receiver's accounting for one UDP stream, as iperf3 does it: a gap in the sequence
/// counts as loss, a number that goes backwards is out of order and takes back one loss,
/// and jitter is the smoothed change in transit time (RFC 3550, §6.4.1).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecvStats {
    pub bytes: u64,
    pub datagrams: u64,
    /// The highest sequence number seen.
    pub highest_seq: u64,
    pub lost: u64,
    pub out_of_order: u64,
    pub jitter_s: f64,
    prev_transit_s: Option<f64>,
}

impl RecvStats {
    /// Accounts one datagram of `len` bytes that arrived at `arrival_s` (wall clock).
    pub fn on_datagram(&mut self, h: &Header, len: usize, arrival_s: f64) {
        self.bytes += len as u64;
        self.datagrams += 1;
        if h.seq > self.highest_seq {
            self.lost += h.seq - self.highest_seq - 1;
            self.highest_seq = h.seq;
        } else {
            self.out_of_order += 1;
            self.lost = self.lost.saturating_sub(1);
        }
        let transit = arrival_s - h.sent_s();
        let prev = self.prev_transit_s.unwrap_or(transit);
        self.jitter_s += ((transit - prev).abs() - self.jitter_s) / 16.0;
        self.prev_transit_s = Some(transit);
    }

    pub fn loss_percent(&self) -> f64 {
        if self.highest_seq == 0 {
            0.0
        } else {
            self.lost as f64 * 100.0 / self.highest_seq as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_in_both_widths() {
        let h = Header {
            sec: 1_700_000_000,
            usec: 999_999,
            seq: 42,
        };
        for wide in [false, true] {
            let mut buf = [0u8; 64];
            assert!(h.emit(&mut buf, wide));
            assert_eq!(Header::parse(&buf, wide).unwrap(), h);
            assert!(Header::parse(&buf[..Header::len(wide) - 1], wide).is_err());
        }
        assert!(!h.emit(&mut [0u8; 8], false));
        let mut buf = [0u8; 16];
        let big = Header { seq: 1 << 40, ..h };
        big.emit(&mut buf, true);
        assert_eq!(Header::parse(&buf, true).unwrap().seq, 1 << 40);
    }

    #[test]
    fn greeting_bytes_match_what_iperf3_puts_on_the_wire() {
        assert_eq!(0x3637_3839u32.to_le_bytes(), HELLO);
        assert!(is_reply(&0x3938_3736u32.to_le_bytes()));
        assert!(is_reply(&[0xb1, 0x68, 0xde, 0x3a]));
        assert!(!is_reply(&HELLO));
        assert!(!is_reply(b"67890"));
    }

    #[test]
    fn loss_reordering_and_jitter() {
        let mut s = RecvStats::default();
        let at = |seq: u64, sent: f64| {
            (
                Header {
                    sec: sent as u32,
                    usec: ((sent.fract()) * 1e6).round() as u32,
                    seq,
                },
                sent,
            )
        };
        // 1, 2, 4 (3 lost), 3 (late: out of order, takes the loss back), 6 (5 lost)
        for (seq, extra) in [(1, 0.001), (2, 0.001), (4, 0.003), (3, 0.005), (6, 0.001)] {
            let (h, sent) = at(seq, 100.0 + seq as f64 * 0.01);
            s.on_datagram(&h, 1000, sent + extra);
        }
        assert_eq!((s.highest_seq, s.lost, s.out_of_order), (6, 1, 1));
        assert_eq!(s.bytes, 5000);
        assert!(s.jitter_s > 0.0 && s.jitter_s < 0.004, "{}", s.jitter_s);
        assert!((s.loss_percent() - 100.0 / 6.0).abs() < 1e-9);
    }
}
