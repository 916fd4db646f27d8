//! The wirerate control protocol, sans IO: typed messages, framing, and the client and server
//! session state machines. No sockets and no clock: bytes come in through `handle_input`,
//! frames go out through `poll_transmit`, and time is an argument.
//!
//! Promise: never panics on peer input. Every length is checked against a hard cap before any
//! allocation; a malformed frame is an error value, never a crash.
//!
//! # Wire format
//! Each connection starts with an 8-byte preamble: the magic `WRRT`, the protocol version
//! (u16, big endian), the channel (0 control, 1 data, 2 TLS control, 3 agent) and a zero
//! byte. On the control channel
//! frames follow: a u32 big-endian length, then that many bytes of JSON holding one
//! [`Msg`]. On a data channel the preamble is followed by the session token (16 bytes), the
//! flow (1 byte) and the stream id (u32 big endian); then the stream's raw payload.

//!
//! # Features
//! `login` (on by default): the control and agent sessions and their SCRAM login, which
//! need SHA-256, HMAC and PBKDF2. Without it the crate is the frames, the data-stream and
//! datagram formats and iperf3's messages: what a data plane parses.

#![forbid(unsafe_code)]

#[cfg(feature = "login")]
pub mod agent;
#[cfg(feature = "login")]
pub mod auth;
pub mod auth_error;
#[cfg(feature = "login")]
pub mod control;
pub mod data;
pub mod datagram;
pub mod depth;
pub mod feedback;
pub mod frame;
#[cfg(feature = "login")]
#[doc(hidden)]
pub mod fuzz_login;
pub mod iperf3;
pub mod msg;
#[cfg(feature = "login")]
pub mod parts;
#[cfg(feature = "login")]
pub mod session;
pub mod sweep;
pub mod udp_probe;

#[cfg(feature = "login")]
pub use control::Session;
pub use data::DataHello;
pub use frame::{Channel, FrameDecoder, Preamble, ProtoError};
pub use msg::Msg;
#[cfg(feature = "login")]
pub use session::{ClientEvent, ClientSession, ServerEvent, ServerSession};

/// The protocol version this build speaks.
pub const VERSION: u16 = 1;

/// A session token: 16 random bytes the server hands out, presented by every data stream.
pub type Token = [u8; 16];
