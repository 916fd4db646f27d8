//! The pure model of wirerate: units, the test specification, the result model and the
//! figures derived from them.
//!
//! Promise: no IO and no clock. Everything here is a function of its arguments, so it is
//! tested with plain unit tests and property tests.

pub mod assemble;
pub mod breaker;
pub mod diagnosis;
pub mod dscp;
pub mod evidence;
pub mod facts;
pub mod inband;
pub mod latency;
pub mod metrics;
pub mod owd;
pub mod qdisc;
pub mod result;
mod result_check;
pub mod rpm;
pub mod rr;
pub mod saved;
pub mod saved_iperf3;
pub mod search;
pub mod side_report;
pub mod spec;
pub mod stats;
pub mod sweep;
#[cfg(any(feature = "synth", test))]
pub mod synth;
pub mod text;
pub mod ttcp;
pub mod udp;
pub mod units;
pub mod window;
pub mod wire;

pub use result::RunResult;
pub use spec::{Direction, Protocol, TestSpec};
pub use units::{BitRate, Bytes};
