//! iperf3 interoperability on the client's side: the driver of `wirerate run --iperf3`
//! against iperf3 servers. The protocol itself lives in `wirerate_proto::iperf3`, the data
//! streams in `wirerate_engine` (TCP on wirerate's own workers, UDP in its `iperf3` module).

mod client;
mod sent;

pub use client::run_client;
pub use sent::SentClock;
