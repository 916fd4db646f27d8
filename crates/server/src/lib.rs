//! The multi-user server behind `wirerate serve`: it admits one test at a time (the slot,
//! pending connections, startups), holds each to the operator's caps, limits and users (the
//! login's server side), logs its decisions, answers third-party requests (the agent),
//! routes iperf3 clients to its iperf3 front end and counts what it did (`--metrics`). The
//! control connection is `wirerate-control`'s; the data plane `wirerate-engine`'s.
//!
//! Promise: a server never dies or hangs because of a client. Every read is bounded in size
//! and time; a client that stalls or vanishes frees the server within the idle timeout.

pub mod agent;
pub mod guard;
mod iperf3;
pub mod limits;
mod login;
pub mod logline;
pub mod server;
pub mod startups;
pub mod stats;
pub mod strikes;
pub mod users;
mod waiting;

pub use server::{Server, ServerConfig};
