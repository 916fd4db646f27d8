//! Both ends of wirerate's control connection: the connection itself (plain or TLS), the
//! one loop that drives a sans-IO session from `wirerate-proto` over it (`driver`, the same
//! for wirerate's and iperf3's protocols, as client and as server), the client's login, and
//! the client that runs a test against a server (wirerate's or iperf3's) with the data plane
//! of `wirerate-engine`.
//!
//! Promise: every read on a control connection is bounded in size and time; a peer that
//! stalls or vanishes ends the connection within the idle timeout, never a hang.

pub mod breaker;
pub mod client;
pub mod control;
pub mod driver;
pub mod iperf3;
mod link;
pub mod login;
pub mod measure;
pub mod tls;
mod tls_error;

pub use client::{run_test, ClientConfig, ClientOutcome, Observer};
pub use login::Login;
pub use measure::{measure, Measured, Target};
