//! OS counters for wirerate: CPU time (getrusage per thread, /proc/stat per core), TCP_INFO,
//! interface counters, link facts and host facts; and the evidence of a window
//! ([`evidence::EvidenceWindow`]): kernel protocol counters, softnet, interrupts, NIC
//! driver statistics, per-core CPU split, cgroup throttling and CPU cycles.
//!
//! Promise: what the OS does not report is `None`, never 0. Nothing here panics on what the
//! kernel returns; short or odd data yields fewer fields.

pub mod cgroup;
pub mod cpu;
pub mod ethtool;
pub mod evidence;
pub mod host;
pub mod iface;
pub mod interrupts;
pub mod link;
pub mod netstat;
pub mod perf;
pub mod qdisc;
pub mod sched;
pub mod snmp;
pub mod softnet;
pub mod tcpinfo;
