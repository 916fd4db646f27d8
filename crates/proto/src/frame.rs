//! Preamble and length-prefixed frames. The decoder is a byte accumulator: feed it whatever
//! arrived, pull out whole frames. Length prefixes are checked against the cap before the
//! decoder reserves anything.

use crate::msg::Msg;

pub const MAGIC: [u8; 4] = *b"WRRT";
pub const PREAMBLE_LEN: usize = 8;

/// Frames a server accepts from a client: specs and reports are small.
pub const MAX_CLIENT_FRAME: usize = 256 << 10;
/// Frames a client accepts from a server: final reports carry every interval.
pub const MAX_SERVER_FRAME: usize = 16 << 20;
/// Room a client's final report frame gets per stream of its test beyond
/// [`MAX_CLIENT_FRAME`]: a stream's figures with its TCP_INFO take under 1 KiB of JSON.
pub const CLIENT_REPORT_BYTES_PER_STREAM: usize = 2 << 10;

/// The largest frame a server takes from the client of `spec` once the spec is accepted:
/// the final report lists every stream, so a test of many streams needs more than the cap
/// that holds before the spec. Both ends compute it from the validated spec.
pub fn client_frame_limit(spec: &wirerate_core::TestSpec) -> usize {
    let streams = spec.streams() as usize;
    MAX_CLIENT_FRAME + streams.saturating_mul(CLIENT_REPORT_BYTES_PER_STREAM)
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProtoError {
    #[error("peer is not a wirerate endpoint (bad magic)")]
    BadMagic,
    /// The server's UDP circuit breaker stopped sending (`crate::feedback::Breaker`).
    #[error(transparent)]
    Breaker(#[from] crate::feedback::Tripped),
    /// A server that answered the client's opening with one of iperf3's state bytes.
    #[error("the server answered with iperf3's state byte {0}, so it looks like an iperf3 server: add --iperf3")]
    Iperf3Server(i8),
    #[error("peer speaks protocol version {0}, this build speaks {1}")]
    Version(u16, u16),
    #[error("unknown channel {0}")]
    BadChannel(u8),
    #[error("frame of {0} bytes exceeds the limit of {1} bytes")]
    FrameTooLarge(usize, usize),
    #[error("malformed message: {0}")]
    BadMessage(String),
    #[error("unexpected message '{got}' while {state}")]
    Unexpected {
        got: &'static str,
        state: &'static str,
    },
    #[error("peer was silent for too long while {0}")]
    TimedOut(&'static str),
    #[error("wrong session token")]
    BadToken,
    #[error("peer closed the connection while {0}")]
    Closed(&'static str),
    #[error("peer refused the test: {0}")]
    Refused(String),
    #[error("server is busy; retry in {0:.0} s")]
    Busy(f64),
    /// The login failed; the server's log says why, the client is told only that it did.
    #[error("login failed: {0}")]
    Login(#[from] crate::auth_error::AuthError),
    #[error("this server requires a login: run with --user NAME")]
    LoginRequired,
    #[error("this server has no users: run without --user")]
    NoLogin,
}

/// Which kind of connection a preamble opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Control,
    Data,
    /// A control connection that goes on in TLS 1.3: the server answers with the same
    /// preamble, then the TLS handshake starts, and inside it the control channel as usual.
    TlsControl,
    /// A third-party request to an agent: one request frame, then the agent's answers
    /// (see [`crate::agent`]).
    Agent,
}

/// The first 8 bytes of every connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preamble {
    pub version: u16,
    pub channel: Channel,
}

impl Preamble {
    pub fn new(channel: Channel) -> Preamble {
        Preamble {
            version: crate::VERSION,
            channel,
        }
    }

    pub fn emit(&self) -> [u8; PREAMBLE_LEN] {
        let v = self.version.to_be_bytes();
        let c = match self.channel {
            Channel::Control => 0,
            Channel::Data => 1,
            Channel::TlsControl => 2,
            Channel::Agent => 3,
        };
        [MAGIC[0], MAGIC[1], MAGIC[2], MAGIC[3], v[0], v[1], c, 0]
    }

    /// Parses and checks magic and version. `bytes` may be shorter than a preamble only if
    /// the caller passes what it has; that is an error here, so read all 8 bytes first.
    pub fn parse(bytes: &[u8]) -> Result<Preamble, ProtoError> {
        let b: &[u8; PREAMBLE_LEN] = bytes
            .get(..PREAMBLE_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(ProtoError::BadMagic)?;
        if b[..4] != MAGIC {
            return Err(ProtoError::BadMagic);
        }
        let version = u16::from_be_bytes([b[4], b[5]]);
        if version != crate::VERSION {
            return Err(ProtoError::Version(version, crate::VERSION));
        }
        let channel = match b[6] {
            0 => Channel::Control,
            1 => Channel::Data,
            2 => Channel::TlsControl,
            3 => Channel::Agent,
            c => return Err(ProtoError::BadChannel(c)),
        };
        Ok(Preamble { version, channel })
    }
}

/// Encodes one message as a frame.
pub fn encode(msg: &Msg) -> Vec<u8> {
    // Serializing our own types to a Vec cannot fail: no maps with non-string keys, no IO.
    let body = serde_json::to_vec(msg).unwrap_or_default();
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Accumulates bytes and yields whole frames.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    max_frame: usize,
}

impl FrameDecoder {
    pub fn new(max_frame: usize) -> FrameDecoder {
        FrameDecoder {
            buf: Vec::new(),
            max_frame,
        }
    }

    /// Changes the cap for frames not yet begun (a validated spec may allow larger ones).
    pub fn set_max_frame(&mut self, max_frame: usize) {
        self.max_frame = max_frame;
    }

    /// Adds received bytes. Fails as soon as a length prefix exceeds the cap, and never
    /// holds more than one maximal frame plus the chunk just pushed.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), ProtoError> {
        if self.buf.len() > self.max_frame + 4 {
            return Err(ProtoError::FrameTooLarge(self.buf.len(), self.max_frame));
        }
        self.buf.extend_from_slice(bytes);
        match self.pending_len() {
            Some(len) if len > self.max_frame => {
                Err(ProtoError::FrameTooLarge(len, self.max_frame))
            }
            _ => Ok(()),
        }
    }

    fn pending_len(&self) -> Option<usize> {
        let p: [u8; 4] = self.buf.get(..4)?.try_into().ok()?;
        Some(u32::from_be_bytes(p) as usize)
    }

    /// The next whole message, if one has arrived.
    pub fn next_msg(&mut self) -> Result<Option<Msg>, ProtoError> {
        let Some(len) = self.pending_len() else {
            return Ok(None);
        };
        if len > self.max_frame {
            return Err(ProtoError::FrameTooLarge(len, self.max_frame));
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let body = &self.buf[4..4 + len];
        let msg = if crate::depth::nesting_within(body, crate::depth::MAX_DEPTH) {
            serde_json::from_slice::<Msg>(body).map_err(|e| ProtoError::BadMessage(e.to_string()))
        } else {
            Err(ProtoError::BadMessage("JSON nested too deeply".into()))
        };
        self.buf.drain(..4 + len);
        msg.map(Some)
    }

    /// Bytes received but not yet consumed.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_spec_of_many_streams_allows_a_larger_client_report() {
        let one = wirerate_core::TestSpec::default();
        assert_eq!(client_frame_limit(&one), MAX_CLIENT_FRAME + 2048);
        let many = wirerate_core::TestSpec {
            parallel: 1024,
            direction: wirerate_core::Direction::Bidir,
            ..Default::default()
        };
        assert_eq!(client_frame_limit(&many), MAX_CLIENT_FRAME + 2048 * 2048);
        let mut d = FrameDecoder::new(MAX_CLIENT_FRAME);
        let big = (MAX_CLIENT_FRAME as u32 + 1).to_be_bytes();
        assert!(d.push(&big).is_err());
        let mut d = FrameDecoder::new(MAX_CLIENT_FRAME);
        d.set_max_frame(client_frame_limit(&many));
        assert!(d.push(&big).is_ok());
    }

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn preamble_round_trip_and_rejects() {
        let p = Preamble::new(Channel::Data);
        assert_eq!(Preamble::parse(&p.emit()).unwrap(), p);
        assert_eq!(Preamble::parse(b"GET / HT"), Err(ProtoError::BadMagic));
        assert_eq!(Preamble::parse(b"WRRT"), Err(ProtoError::BadMagic));
        let mut v = p.emit();
        v[5] = 9;
        assert!(matches!(
            Preamble::parse(&v),
            Err(ProtoError::Version(9, _))
        ));
        let mut c = p.emit();
        c[6] = 7;
        assert_eq!(Preamble::parse(&c), Err(ProtoError::BadChannel(7)));
    }

    #[test]
    fn oversized_prefix_is_refused_before_allocation() {
        let mut d = FrameDecoder::new(1024);
        assert!(matches!(
            d.push(&u32::MAX.to_be_bytes()),
            Err(ProtoError::FrameTooLarge(_, 1024))
        ));
        assert!(matches!(
            d.next_msg(),
            Err(ProtoError::FrameTooLarge(_, 1024))
        ));
    }

    #[test]
    fn frames_split_anywhere_reassemble() {
        let msg = Msg::Start;
        let bytes = [encode(&msg), encode(&Msg::Busy { retry_after_s: 3.0 })].concat();
        for cut in 0..bytes.len() {
            let mut d = FrameDecoder::new(1024);
            d.push(&bytes[..cut]).unwrap();
            let mut got = Vec::new();
            while let Some(m) = d.next_msg().unwrap() {
                got.push(m);
            }
            d.push(&bytes[cut..]).unwrap();
            while let Some(m) = d.next_msg().unwrap() {
                got.push(m);
            }
            assert_eq!(got.len(), 2, "cut at {cut}");
        }
    }

    #[test]
    fn deep_nesting_cannot_overflow_a_small_connection_stack() {
        // regression: serde_json recursed once per level and aborted the server process
        let mut body = br#"{"type":"spec","spec":"#.to_vec();
        body.extend(br#"{"a":"#.repeat(10_000));
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend(body);
        let t = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || {
                let mut d = FrameDecoder::new(MAX_CLIENT_FRAME);
                d.push(&frame).unwrap();
                d.next_msg().is_err()
            })
            .unwrap();
        assert!(t.join().unwrap());
    }

    proptest! {
        #[test]
        fn junk_never_panics(junk in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = Preamble::parse(&junk);
            let mut d = FrameDecoder::new(256);
            if d.push(&junk).is_ok() {
                while let Ok(Some(_)) = d.next_msg() {}
            }
        }
    }
}
