//! iperf3 interoperability: a client driver for `wirerate run --iperf3` against iperf3
//! servers, and the handler `wirerate serve` gives connections that open with an iperf3
//! cookie. The protocol itself lives in `wirerate_proto::iperf3`; the data streams run on
//! the same workers as wirerate's own tests.

mod client;
mod sent;
pub(crate) mod server;
mod udp;

pub use client::run_client;

use wirerate_proto::iperf3::{Cookie, COOKIE_LEN};

use crate::error::EngineError;
use crate::net::random_token;

/// A fresh cookie from the kernel's random numbers.
fn new_cookie() -> Result<Cookie, EngineError> {
    let mut random = [0u8; COOKIE_LEN - 1];
    for chunk in random.chunks_mut(16) {
        let t = random_token()?;
        chunk.copy_from_slice(&t[..chunk.len()]);
    }
    Ok(Cookie::from_random(&random))
}
