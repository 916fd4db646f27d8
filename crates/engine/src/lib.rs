//! The only wirerate code that opens sockets: the client's control driver, the server, and
//! the stream workers that move the data.
//!
//! Threads, not a runtime: a single data stream has its own thread on each side, the streams
//! of a many-stream TCP test share a fixed pool of epoll workers (`pool`), and a control
//! thread per side drives the sans-IO session from `wirerate-proto` with the one loop in
//! `driver` (the same for wirerate's and iperf3's protocols, as client and as server). The
//! data path writes from and reads into user memory with large I/O sizes and receive
//! batching (`SO_RCVLOWAT`), with no allocation per block.
//!
//! Promise: a server never dies or hangs because of a client. Every read is bounded in size
//! and time; a client that stalls or vanishes frees the server within the idle timeout.

pub mod agent;
mod breaker;
pub mod client;
mod control;
mod crr;
pub mod dataopts;
mod driver;
mod error;
pub mod guard;
mod inband;
mod intervals;
pub mod iperf3;
pub mod limits;
mod login;
pub mod logline;
mod mmsg;
pub mod net;
pub mod pool;
pub mod rpm_probe;
pub mod rr;
pub mod server;
mod side;
pub mod startups;
pub mod stats;
mod stream;
mod sweep;
mod tally;
mod timer;
pub mod tls;
pub mod ttcp;
mod udp;
mod udp_pool;
pub mod udp_probe;
pub mod users;
mod waiting;
mod zerocopy;

pub use client::{run_test, ClientConfig, ClientOutcome, Login, Observer};
pub use error::{chain, CertRefusal, EngineError};
pub use server::{Server, ServerConfig};
