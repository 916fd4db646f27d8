//! The hello of a data connection: preamble, session token, flow and stream id, in a fixed
//! 29-byte layout parsed with its length checked first.

use wirerate_core::spec::Flow;

use crate::frame::{Channel, Preamble, ProtoError, PREAMBLE_LEN};
use crate::Token;

pub const DATA_HELLO_LEN: usize = PREAMBLE_LEN + 16 + 1 + 4;

/// The stream id of a latency probe (`wirerate rpm`): a short connection beside a running
/// test, client to server, that the server answers byte for byte (docs/protocol.md). No
/// test has this many streams, so the id never names one of a test's own.
pub const PROBE_STREAM_ID: u32 = u32::MAX;

/// What a data connection says before its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHello {
    pub token: Token,
    pub flow: Flow,
    pub stream_id: u32,
}

impl DataHello {
    pub fn emit(&self) -> [u8; DATA_HELLO_LEN] {
        let mut out = [0u8; DATA_HELLO_LEN];
        out[..PREAMBLE_LEN].copy_from_slice(&Preamble::new(Channel::Data).emit());
        out[PREAMBLE_LEN..PREAMBLE_LEN + 16].copy_from_slice(&self.token);
        out[PREAMBLE_LEN + 16] = match self.flow {
            Flow::ClientToServer => 0,
            Flow::ServerToClient => 1,
        };
        out[PREAMBLE_LEN + 17..].copy_from_slice(&self.stream_id.to_be_bytes());
        out
    }

    /// Parses the part after the preamble (token, flow, id): 21 bytes.
    pub fn parse_after_preamble(b: &[u8]) -> Result<DataHello, ProtoError> {
        if b.len() < DATA_HELLO_LEN - PREAMBLE_LEN {
            return Err(ProtoError::BadMessage("short data hello".into()));
        }
        let mut token = [0u8; 16];
        token.copy_from_slice(&b[..16]);
        let flow = match b[16] {
            0 => Flow::ClientToServer,
            1 => Flow::ServerToClient,
            x => return Err(ProtoError::BadMessage(format!("unknown flow {x}"))),
        };
        let stream_id = u32::from_be_bytes([b[17], b[18], b[19], b[20]]);
        Ok(DataHello {
            token,
            flow,
            stream_id,
        })
    }
}

/// Compares tokens without an early exit, so timing says nothing about how much matched.
pub fn token_eq(a: &Token, b: &Token) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let h = DataHello {
            token: [7; 16],
            flow: Flow::ServerToClient,
            stream_id: 42,
        };
        let b = h.emit();
        assert_eq!(Preamble::parse(&b).unwrap().channel, Channel::Data);
        assert_eq!(
            DataHello::parse_after_preamble(&b[PREAMBLE_LEN..]).unwrap(),
            h
        );
        assert!(DataHello::parse_after_preamble(&b[PREAMBLE_LEN..20]).is_err());
        assert!(token_eq(&[1; 16], &[1; 16]));
        assert!(!token_eq(&[1; 16], &[2; 16]));
    }
}
