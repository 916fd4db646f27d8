//! The header that opens each trial of a sweep on its data stream: the message size, how
//! many messages, and whether they stream one way or ping-pong. A zero size ends the sweep.
//!
//! Layout (16 bytes, big endian): size u64, repeats u32, flags u32 (bit 0: stream).

use crate::frame::ProtoError;

pub const SWEEP_HEADER_LEN: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepHeader {
    pub size: u64,
    pub repeats: u32,
    pub stream: bool,
}

impl SweepHeader {
    /// The header that ends a sweep.
    pub const END: SweepHeader = SweepHeader {
        size: 0,
        repeats: 0,
        stream: false,
    };

    pub fn emit(&self) -> [u8; SWEEP_HEADER_LEN] {
        let mut b = [0u8; SWEEP_HEADER_LEN];
        b[..8].copy_from_slice(&self.size.to_be_bytes());
        b[8..12].copy_from_slice(&self.repeats.to_be_bytes());
        b[12..16].copy_from_slice(&u32::from(self.stream).to_be_bytes());
        b
    }

    /// Parses a header and checks it against the limits the server agreed to: sizes up to
    /// `max_size`, at most `max_repeats` messages, no unknown flags.
    pub fn parse(b: &[u8], max_size: u64, max_repeats: u32) -> Result<SweepHeader, ProtoError> {
        let (Some(size), Some(repeats), Some(flags)) = (
            b.get(..8)
                .and_then(|s| s.try_into().ok())
                .map(u64::from_be_bytes),
            b.get(8..12)
                .and_then(|s| s.try_into().ok())
                .map(u32::from_be_bytes),
            b.get(12..16)
                .and_then(|s| s.try_into().ok())
                .map(u32::from_be_bytes),
        ) else {
            return Err(ProtoError::BadMessage("short sweep header".into()));
        };
        if flags > 1 {
            return Err(ProtoError::BadMessage("unknown sweep flags".into()));
        }
        if size > max_size || repeats > max_repeats || (size > 0 && repeats == 0) {
            return Err(ProtoError::BadMessage(format!(
                "sweep trial of {repeats} × {size} bytes is outside the agreed limits"
            )));
        }
        Ok(SweepHeader {
            size,
            repeats,
            stream: flags == 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_limits() {
        let h = SweepHeader {
            size: 4096,
            repeats: 77,
            stream: true,
        };
        assert_eq!(SweepHeader::parse(&h.emit(), 4096, 100).unwrap(), h);
        assert!(SweepHeader::parse(&h.emit(), 4095, 100).is_err());
        assert!(SweepHeader::parse(&h.emit(), 4096, 76).is_err());
        assert!(SweepHeader::parse(&h.emit()[..15], 4096, 100).is_err());
        let mut bad = h.emit();
        bad[15] = 2;
        assert!(SweepHeader::parse(&bad, 4096, 100).is_err());
        assert_eq!(
            SweepHeader::parse(&SweepHeader::END.emit(), 1, 1).unwrap(),
            SweepHeader::END
        );
    }
}
