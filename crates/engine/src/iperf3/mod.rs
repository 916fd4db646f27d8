//! iperf3's data streams on wirerate's data plane: the UDP streams of both ends (iperf3's
//! datagram header and its start-of-stream greeting) and the cookie that names a test. The
//! protocol itself lives in `wirerate_proto::iperf3`; the client is `wirerate_control`'s, the
//! server's front end `wirerate_server`'s. TCP streams run on the same workers as wirerate's
//! own tests.

pub mod udp;

use wirerate_proto::iperf3::{Cookie, COOKIE_LEN};

use crate::error::EngineError;
use crate::net::random_token;

/// A fresh cookie from the kernel's random numbers.
pub fn new_cookie() -> Result<Cookie, EngineError> {
    let mut random = [0u8; COOKIE_LEN - 1];
    for chunk in random.chunks_mut(16) {
        let t = random_token()?;
        chunk.copy_from_slice(&t[..chunk.len()]);
    }
    Ok(Cookie::from_random(&random))
}
