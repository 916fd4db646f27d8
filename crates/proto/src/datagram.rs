//! The UDP datagram header, as a typed view over bytes: parse checks the length and magic
//! before reading any field, emit writes into a caller's buffer. Every datagram wirerate sends
//! on a UDP stream starts with it, payload or not.
//!
//! ```text
//!  0      2     3     4          8                 16                24               40
//!  +------+-----+-----+----------+-----------------+-----------------+----------------+
//!  | "Wd" | ver | kind| stream id| sequence (u64)  | send time ns    | session token  |
//!  +------+-----+-----+----------+-----------------+-----------------+----------------+
//! ```
//! All integers big endian. The send time is nanoseconds on the sender's monotonic clock
//! since its test start: only differences between datagrams mean anything (jitter).

use crate::Token;

pub const HEADER_LEN: usize = 40;
const MAGIC: [u8; 2] = *b"Wd";
const VERSION: u8 = 1;

/// What a datagram is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Test payload.
    Data = 0,
    /// Client → server before the test: "this address is stream N's"; repeated until answered.
    Hello = 1,
    /// Server → client: a nonce in the sequence field, to prove the client receives here.
    Challenge = 2,
    /// Sender → receiver: no more data; the sequence field holds the count sent.
    End = 3,
    /// Client → server's port, beside a running test: a latency probe (`udp_probe.rs`).
    Probe = 4,
    /// Server → client: the answer to a probe, with the server's receive and send times.
    ProbeReply = 5,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DatagramError {
    #[error("datagram shorter than its header")]
    Short,
    #[error("not a wirerate datagram")]
    BadMagic,
    #[error("unknown datagram version or kind")]
    Unknown,
}

/// A parsed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub stream_id: u32,
    pub seq: u64,
    pub send_ns: u64,
    pub token: Token,
}

impl Header {
    pub fn parse(b: &[u8]) -> Result<Header, DatagramError> {
        let h: &[u8; HEADER_LEN] = b
            .get(..HEADER_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(DatagramError::Short)?;
        if h[..2] != MAGIC {
            return Err(DatagramError::BadMagic);
        }
        if h[2] != VERSION {
            return Err(DatagramError::Unknown);
        }
        let kind = match h[3] {
            0 => Kind::Data,
            1 => Kind::Hello,
            2 => Kind::Challenge,
            3 => Kind::End,
            4 => Kind::Probe,
            5 => Kind::ProbeReply,
            _ => return Err(DatagramError::Unknown),
        };
        let u64_at = |o: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&h[o..o + 8]);
            u64::from_be_bytes(x)
        };
        let mut token = [0u8; 16];
        token.copy_from_slice(&h[24..40]);
        Ok(Header {
            kind,
            stream_id: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
            seq: u64_at(8),
            send_ns: u64_at(16),
            token,
        })
    }

    /// Writes the header into the first 40 bytes of `out`; false if `out` is too short.
    pub fn emit(&self, out: &mut [u8]) -> bool {
        let Some(h) = out.get_mut(..HEADER_LEN) else {
            return false;
        };
        h[..2].copy_from_slice(&MAGIC);
        h[2] = VERSION;
        h[3] = self.kind as u8;
        h[4..8].copy_from_slice(&self.stream_id.to_be_bytes());
        h[8..16].copy_from_slice(&self.seq.to_be_bytes());
        h[16..24].copy_from_slice(&self.send_ns.to_be_bytes());
        h[24..40].copy_from_slice(&self.token);
        true
    }

    /// Rewrites only the sequence and time of an emitted data header (the hot path).
    #[inline]
    pub fn stamp(out: &mut [u8], seq: u64, send_ns: u64) {
        if out.len() >= 24 {
            out[8..16].copy_from_slice(&seq.to_be_bytes());
            out[16..24].copy_from_slice(&send_ns.to_be_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_and_stamp() {
        let h = Header {
            kind: Kind::Data,
            stream_id: 3,
            seq: 1 << 40,
            send_ns: 123_456_789,
            token: [5; 16],
        };
        let mut b = [0u8; 1200];
        assert!(h.emit(&mut b));
        assert_eq!(Header::parse(&b).unwrap(), h);
        Header::stamp(&mut b, 7, 8);
        let p = Header::parse(&b).unwrap();
        assert_eq!((p.seq, p.send_ns, p.token), (7, 8, [5; 16]));
        assert!(!h.emit(&mut [0u8; 39]));
    }

    #[test]
    fn rejects_short_foreign_and_unknown() {
        assert_eq!(Header::parse(&[0u8; 39]), Err(DatagramError::Short));
        assert_eq!(Header::parse(&[0u8; 40]), Err(DatagramError::BadMagic));
        let mut b = [0u8; 40];
        b[..2].copy_from_slice(b"Wd");
        b[2] = 1;
        b[3] = 9;
        assert_eq!(Header::parse(&b), Err(DatagramError::Unknown));
    }

    proptest! {
        #[test]
        fn never_panics(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = Header::parse(&b);
        }
    }
}

#[cfg(test)]
mod contract {
    #[test]
    fn header_length_is_the_spec_minimum() {
        assert_eq!(super::HEADER_LEN as u64, wirerate_core::spec::UDP_MIN_LEN);
    }
}
