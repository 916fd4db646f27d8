//! A host's egress qdisc over a test (`wirerate rpm`): the root qdisc of the interface
//! toward the peer, read before, during (every [`QDISC_EVERY`]) and after. The client reads
//! its own for each loaded phase; the server its own toward the client where the spec asks
//! (`TestSpec::rpm_server`), and reports it in its evidence.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use wirerate_core::qdisc::{PhaseQdisc, QdiscReading};

/// Readings of the qdisc this often while the watch runs.
pub const QDISC_EVERY: Duration = Duration::from_millis(200);

/// The readings of one interface's root qdisc, taken on a thread of their own; dropped
/// unfinished (a test that failed), the thread stops too.
pub struct QdiscWatch {
    iface: String,
    before: QdiscReading,
    stop: StopOnDrop,
    during: JoinHandle<Vec<(f64, QdiscReading)>>,
}

struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl QdiscWatch {
    /// Starts reading the qdisc of the interface that leads to `peer`: the one holding
    /// `peer` (loopback) or a subnet of it. None where no interface does or `tc` does not
    /// answer.
    pub fn start(peer: IpAddr) -> Option<QdiscWatch> {
        let iface = wirerate_probe::iface::interface_for(peer)?;
        let before = wirerate_probe::qdisc::read(&iface)?;
        let stop = Arc::new(AtomicBool::new(false));
        let (name, flag) = (iface.clone(), stop.clone());
        let during = std::thread::Builder::new()
            .name("wr-qdisc".into())
            .spawn(move || {
                let t0 = Instant::now();
                let mut v = Vec::new();
                while !flag.load(Ordering::Relaxed) {
                    if let Some(r) = wirerate_probe::qdisc::read(&name) {
                        v.push((t0.elapsed().as_secs_f64(), r));
                    }
                    std::thread::sleep(QDISC_EVERY);
                }
                v
            })
            .ok()?;
        Some(QdiscWatch {
            iface,
            before,
            stop: StopOnDrop(stop),
            during,
        })
    }

    /// Stops reading; the figures, readings of the first `warmup_s` seconds left out.
    pub fn finish(self, warmup_s: f64) -> Option<PhaseQdisc> {
        self.stop.0.store(true, Ordering::Relaxed);
        let during: Vec<QdiscReading> = self
            .during
            .join()
            .ok()?
            .into_iter()
            .filter(|(at, _)| *at >= warmup_s)
            .map(|(_, r)| r)
            .collect();
        let after = wirerate_probe::qdisc::read(&self.iface)?;
        Some(PhaseQdisc::of(&self.iface, &self.before, &during, &after))
    }
}
