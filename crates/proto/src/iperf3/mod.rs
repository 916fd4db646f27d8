//! iperf3's control protocol, sans IO, so wirerate can test against iperf3 servers and serve
//! iperf3 clients. See `docs/iperf3.md` for the protocol as observed and the mapping.
//!
//! The control connection carries two kinds of unit: a single signed state byte, and a JSON
//! document behind a 4-byte big-endian length. Which one comes next depends only on the
//! state, so the sessions here parse exactly what they expect and nothing else.
//!
//! Promise, as for the rest of this crate: never panics on peer input; every length is
//! checked against a cap before anything is reserved for it.

pub mod client;
pub mod json;
pub mod map;
pub mod params;
pub mod results;
pub mod server;
pub mod udp;

#[cfg(test)]
mod tests;

pub use client::{ClientEvent, ClientSession};
pub use map::StreamMap;
pub use params::{check_spec, params_json, spec_from_params, Inexpressible, Params};
pub use results::{Results, StreamResults};
pub use server::{ServerEvent, ServerSession};

/// iperf3's well-known port.
pub const DEFAULT_PORT: u16 = 5201;

/// Cookie length on the wire: 36 characters and a NUL.
pub const COOKIE_LEN: usize = 37;

/// Largest parameter document a server accepts (iperf3 3.18+ stops at 8 KiB; titles and
/// extra data are the only long fields).
pub const MAX_PARAMS_JSON: usize = 64 << 10;
/// Largest results document a server accepts from a client (128 streams fit in ~30 KiB).
pub const MAX_CLIENT_RESULTS_JSON: usize = 1 << 20;
/// Largest results document a client accepts from a server: `server_output_json` can carry
/// a whole report with every interval.
pub const MAX_SERVER_RESULTS_JSON: usize = 16 << 20;

/// The state byte values iperf3 writes on the control connection.
pub mod state {
    pub const TEST_START: i8 = 1;
    pub const TEST_RUNNING: i8 = 2;
    pub const TEST_END: i8 = 4;
    pub const PARAM_EXCHANGE: i8 = 9;
    pub const CREATE_STREAMS: i8 = 10;
    pub const SERVER_TERMINATE: i8 = 11;
    pub const CLIENT_TERMINATE: i8 = 12;
    pub const EXCHANGE_RESULTS: i8 = 13;
    pub const DISPLAY_RESULTS: i8 = 14;
    pub const IPERF_DONE: i8 = 16;
    /// Sent to a client when another test runs (and to a data stream with a wrong cookie).
    pub const ACCESS_DENIED: i8 = -1;
    /// Followed by two big-endian i32: iperf3's error number and the OS errno.
    pub const SERVER_ERROR: i8 = -2;
}

/// iperf3 error numbers a server sends after `SERVER_ERROR`; the client prints its own text
/// for each.
pub mod errno {
    /// "not implemented yet"
    pub const UNIMPLEMENTED: i32 = 13;
    /// "unable to receive parameters from client"
    pub const RECV_PARAMS: i32 = 114;
    /// "protocol does not exist"
    pub const PROTOCOL: i32 = 131;
    /// "test authorization failed"
    pub const AUTH: i32 = 142;
}

/// Why an iperf3 exchange failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Iperf3Error {
    #[error("the iperf3 server is busy running a test; try again later")]
    AccessDenied,
    #[error("the iperf3 server refused the test: error {code} (errno {os_errno})")]
    ServerError { code: i32, os_errno: i32 },
    #[error("the iperf3 server terminated the test")]
    ServerTerminated,
    #[error("the iperf3 client terminated the test")]
    ClientTerminated,
    #[error("unexpected iperf3 state byte {got} while {state}")]
    UnexpectedState { got: i8, state: &'static str },
    #[error("iperf3 JSON message of {0} bytes exceeds the limit of {1} bytes")]
    TooLarge(usize, usize),
    #[error("malformed iperf3 JSON: {0}")]
    BadJson(String),
    #[error("unsupported iperf3 test: {0}")]
    Unsupported(String),
    #[error("UDP datagram shorter than iperf3's header")]
    BadDatagram,
    #[error("not an iperf3 cookie")]
    BadCookie,
    #[error("iperf3 peer was silent for too long while {0}")]
    TimedOut(&'static str),
    #[error("iperf3 peer closed the connection while {0}")]
    Closed(&'static str),
    #[error("{0}")]
    Local(String),
    /// The spec asks for what iperf3's protocol cannot say.
    #[error(transparent)]
    Inexpressible(#[from] params::Inexpressible),
}

/// The 37-byte token an iperf3 client sends first on its control connection and on every
/// data stream of the test.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Cookie([u8; COOKIE_LEN]);

impl std::fmt::Debug for Cookie {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Cookie({})",
            String::from_utf8_lossy(&self.0[..COOKIE_LEN - 1])
        )
    }
}

const COOKIE_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

fn is_cookie_char(b: u8) -> bool {
    // Current clients use lowercase base32; 3.0.x built cookies from host name, time and a
    // random number, so any visible ASCII character is accepted.
    b.is_ascii_graphic()
}

impl Cookie {
    /// A fresh cookie from 36 random bytes (the caller reads them from the OS).
    pub fn from_random(random: &[u8; COOKIE_LEN - 1]) -> Cookie {
        let mut c = [0u8; COOKIE_LEN];
        for (dst, r) in c.iter_mut().zip(random) {
            *dst = COOKIE_ALPHABET[usize::from(r & 31)];
        }
        Cookie(c)
    }

    /// Checks 37 received bytes: 36 visible ASCII characters and a NUL.
    pub fn parse(bytes: &[u8]) -> Result<Cookie, Iperf3Error> {
        let b: [u8; COOKIE_LEN] = bytes.try_into().map_err(|_| Iperf3Error::BadCookie)?;
        if b[COOKIE_LEN - 1] != 0 || !b[..COOKIE_LEN - 1].iter().all(|&c| is_cookie_char(c)) {
            return Err(Iperf3Error::BadCookie);
        }
        Ok(Cookie(b))
    }

    pub fn bytes(&self) -> &[u8; COOKIE_LEN] {
        &self.0
    }
}

/// True when the first bytes of a connection could open an iperf3 cookie and are not
/// wirerate's own magic. A server peeks this to route the connection.
pub fn is_cookie_prefix(first: &[u8]) -> bool {
    !first.is_empty()
        && !first.starts_with(b"WRRT")
        && first
            .iter()
            .take(COOKIE_LEN - 1)
            .all(|&c| is_cookie_char(c))
}

/// The timeout rule both iperf3 sessions share: once `deadline` has passed, the session
/// fails with the name of the state it was waiting in.
fn expire<S: Copy>(
    deadline: Option<std::time::Instant>,
    now: std::time::Instant,
    st: &mut S,
    failed: S,
    name: fn(S) -> &'static str,
) -> Result<(), Iperf3Error> {
    match deadline {
        Some(d) if now >= d => {
            let what = name(*st);
            *st = failed;
            Err(Iperf3Error::TimedOut(what))
        }
        _ => Ok(()),
    }
}
