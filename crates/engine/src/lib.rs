//! wirerate's data plane: the code that moves a test's bytes over sockets and measures one
//! side of it (its streams, request/response and sweep loops, latency probes, intervals and
//! tallies). It knows nothing of control connections, TLS, logins or a server's operators:
//! `wirerate-control` drives it from a control connection, `wirerate-server` admits the tests.
//!
//! Threads, not a runtime: a single data stream has its own thread on each side, the streams
//! of a many-stream TCP test share a fixed pool of epoll workers (`pool`). The data path
//! writes from and reads into user memory with large I/O sizes and receive batching
//! (`SO_RCVLOWAT`), with no allocation per block.
//!
//! Promise: a peer never makes a side die or hang. Every read is bounded in size and time; a
//! peer that stalls or vanishes ends the side with an error within its idle timeout.

mod crr;
pub mod dataopts;
mod error;
mod inband;
mod intervals;
pub mod iperf3;
mod kind;
mod mmsg;
pub mod net;
pub mod pool;
pub mod qdisc_watch;
pub mod rpm_probe;
pub mod rr;
pub mod side;
pub mod stream;
mod sweep;
mod tally;
mod timer;
pub mod ttcp;
pub mod udp;
mod udp_pool;
pub mod udp_probe;
mod zerocopy;

pub use error::{chain, CertRefusal, EngineError};
