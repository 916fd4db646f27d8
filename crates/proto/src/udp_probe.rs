//! UDP latency probes (`wirerate rpm`): one datagram to the server's port and one back, beside
//! a running test (docs/protocol.md, "Latency probes"). Sans-IO: bytes and times in, bytes
//! out; never panics on peer input.
//!
//! ```text
//!  0                                       40                  48                  56
//!  +---------------------------------------+-------------------+-------------------+
//!  | datagram header (datagram.rs)         | server receive ns | server send ns    |
//!  +---------------------------------------+-------------------+-------------------+
//! ```
//! A probe is the header (kind `probe`, stream id [`PROBE_STREAM_ID`], the probe's number
//! in the sequence field, the client's send time in ns on its own clock, the running
//! session's token) and 16 zero bytes. The reply is the same 56 bytes with kind
//! `probe_reply` and the server's receive and send times in ns on the server's clock: never
//! larger than the probe it answers. Each host's times mean something only against its own;
//! the one-way delays come out of them after the fact (`wirerate_core::owd`).

use crate::data::{token_eq, PROBE_STREAM_ID};
use crate::datagram::{Header, Kind, HEADER_LEN};
use crate::Token;

/// The size of a probe and of its reply.
pub const PROBE_LEN: usize = HEADER_LEN + 16;

/// A probe: its number and the client's send time.
pub fn request(seq: u64, client_send_ns: u64, token: &Token) -> [u8; PROBE_LEN] {
    let mut b = [0u8; PROBE_LEN];
    Header {
        kind: Kind::Probe,
        stream_id: PROBE_STREAM_ID,
        seq,
        send_ns: client_send_ns,
        token: *token,
    }
    .emit(&mut b);
    b
}

/// A parsed probe reply: the four times of one round trip, two on each host's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub seq: u64,
    pub client_send_ns: u64,
    pub server_recv_ns: u64,
    pub server_send_ns: u64,
}

/// The server's answer to `b`, or None when it is not a probe of this size carrying
/// `token` (the running session's; None when no test runs). `recv_ns`, `send_ns`: the
/// server's clock when the probe arrived and now.
pub fn answer(
    b: &[u8],
    token: Option<&Token>,
    recv_ns: u64,
    send_ns: u64,
) -> Option<[u8; PROBE_LEN]> {
    let h = Header::parse(b).ok()?;
    let token = token?;
    if b.len() != PROBE_LEN
        || h.kind != Kind::Probe
        || h.stream_id != PROBE_STREAM_ID
        || !token_eq(&h.token, token)
    {
        return None;
    }
    let mut out = [0u8; PROBE_LEN];
    Header {
        kind: Kind::ProbeReply,
        ..h
    }
    .emit(&mut out);
    out[HEADER_LEN..HEADER_LEN + 8].copy_from_slice(&recv_ns.to_be_bytes());
    out[HEADER_LEN + 8..].copy_from_slice(&send_ns.to_be_bytes());
    Some(out)
}

/// A reply to one of this client's probes (its `token`), or None for anything else.
pub fn parse_reply(b: &[u8], token: &Token) -> Option<Reply> {
    let h = Header::parse(b).ok()?;
    let tail: &[u8; 16] = b.get(HEADER_LEN..)?.try_into().ok()?;
    if h.kind != Kind::ProbeReply || h.stream_id != PROBE_STREAM_ID || !token_eq(&h.token, token) {
        return None;
    }
    let u64_at = |o: usize| {
        let mut x = [0u8; 8];
        x.copy_from_slice(&tail[o..o + 8]);
        u64::from_be_bytes(x)
    };
    Some(Reply {
        seq: h.seq,
        client_send_ns: h.send_ns,
        server_recv_ns: u64_at(0),
        server_send_ns: u64_at(8),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_probe_is_answered_with_the_server_times() {
        let q = request(7, 1_000, &[3; 16]);
        let a = answer(&q, Some(&[3; 16]), 50, 60).unwrap();
        assert_eq!(a.len(), q.len());
        let r = parse_reply(&a, &[3; 16]).unwrap();
        assert_eq!(
            r,
            Reply {
                seq: 7,
                client_send_ns: 1_000,
                server_recv_ns: 50,
                server_send_ns: 60
            }
        );
        // a reply is not a probe, a probe not a reply
        assert_eq!(answer(&a, Some(&[3; 16]), 0, 0), None);
        assert_eq!(parse_reply(&q, &[3; 16]), None);
    }

    #[test]
    fn wrong_token_no_session_or_size_get_no_answer() {
        let q = request(1, 2, &[3; 16]);
        assert_eq!(answer(&q, Some(&[4; 16]), 0, 0), None);
        assert_eq!(answer(&q, None, 0, 0), None);
        assert_eq!(answer(&q[..HEADER_LEN], Some(&[3; 16]), 0, 0), None);
        let mut long = q.to_vec();
        long.push(0);
        assert_eq!(answer(&long, Some(&[3; 16]), 0, 0), None);
        let a = answer(&q, Some(&[3; 16]), 0, 0).unwrap();
        assert_eq!(parse_reply(&a, &[4; 16]), None);
        assert_eq!(parse_reply(&a[..PROBE_LEN - 1], &[3; 16]), None);
    }

    proptest! {
        #[test]
        fn never_panics_never_amplifies(b in proptest::collection::vec(any::<u8>(), 0..120)) {
            if let Some(a) = answer(&b, Some(&[0; 16]), 1, 2) {
                prop_assert!(a.len() <= b.len());
            }
            let _ = parse_reply(&b, &[0; 16]);
        }
    }
}
