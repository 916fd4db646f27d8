//! One side of a running test: its stream workers, the probes that watch them (CPU,
//! interface counters, evidence, TCP samples) and its test kind, which picks the workers'
//! loops and makes the intervals ([`crate::kind`]). Both the client and the server drive
//! one of these.

use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wirerate_core::evidence::TcpSample;
use wirerate_core::result::Interval;
use wirerate_core::side_report::{Role, SideReport};
use wirerate_core::spec::Flow;
use wirerate_core::sweep::SweepPoint;
use wirerate_core::TestSpec;
use wirerate_proto::Token;

use crate::error::EngineError;
use crate::kind::{self, KindRun};
use crate::rr::CrrRoute;

pub(crate) mod probes;
pub(crate) mod workers;

pub(crate) use workers::pin_thread;

use probes::Probes;
use workers::Workers;

/// The socket of a stream.
pub enum DataSock {
    Tcp(TcpStream),
    /// A UDP socket, the session token its datagrams carry, and (for a server receiver) the
    /// one address its datagrams may come from.
    Udp(UdpSocket, Token, Option<SocketAddr>),
}

impl DataSock {
    /// The TCP socket, if this is one.
    pub fn tcp(&self) -> Option<&TcpStream> {
        match self {
            DataSock::Tcp(t) => Some(t),
            DataSock::Udp(..) => None,
        }
    }
}

/// What request/response and sweep workers need besides their stream.
#[derive(Clone, Default)]
pub struct RunContext {
    /// The session token (a CRR client presents it on every connection).
    pub token: Option<Token>,
    /// The server's routing of CRR connections.
    pub crr: Option<Arc<CrrRoute>>,
    /// The client: the CPU its stream threads are pinned to (the server takes its own
    /// from the spec).
    pub cpu: Option<u32>,
    /// The client: a file its senders send instead of the pattern, or its receivers write
    /// what they receive to.
    pub file: Option<Arc<std::path::PathBuf>>,
    /// Data workers of a many-stream TCP test (`-T`); None: one per CPU.
    pub threads: Option<usize>,
}

/// A stream ready to run on this side.
pub struct Attached {
    pub flow: Flow,
    pub id: u32,
    pub role: Role,
    pub sock: DataSock,
}

pub struct SideRun {
    spec: Arc<TestSpec>,
    start: Instant,
    workers: Workers,
    probes: Probes,
    kind: Box<dyn KindRun>,
    /// In-band requests on the loaded flows (`spec.inband_hz`).
    inband: Option<crate::inband::Inband>,
}

impl SideRun {
    /// Starts every stream's worker. `local_ip` names the interface whose counters are kept.
    /// A worker that cannot start fails the whole side: the ones already started are
    /// stopped and joined, and the error names the stream, so no stream is silently missing
    /// from the result.
    pub fn start(
        spec: &TestSpec,
        streams: Vec<Attached>,
        local_ip: Option<IpAddr>,
        idle: Duration,
        ctx: RunContext,
    ) -> Result<SideRun, EngineError> {
        let spec = Arc::new(spec.clone());
        let probes = Probes::start(&spec, local_ip);
        let start = Instant::now();
        let mut kind = kind::pick(&spec, start);
        let workers = Workers::start(&spec, streams, start, idle, &ctx, kind.as_ref())?;
        kind.started(&workers);
        let inband = spec.inband_hz.and_then(|hz| {
            let conns = workers
                .list()
                .iter()
                .filter(|w| w.tcp)
                .filter_map(|w| {
                    let fd = std::os::fd::AsFd::as_fd(w.sock.as_ref()?);
                    crate::inband::conn(w.flow, w.id, w.role, fd, &w.counters)
                })
                .collect();
            let secs = spec.send_seconds().unwrap_or(0.0);
            crate::inband::Inband::start(hz, secs, conns, start)
        });
        Ok(SideRun {
            inband,
            spec,
            start,
            workers,
            probes,
            kind,
        })
    }

    /// The sweep sizes the client's worker finished since the last call (progress).
    pub fn new_sweep_points(&mut self) -> Vec<SweepPoint> {
        self.kind.new_sweep_points()
    }

    /// When the side started: where its intervals are counted from.
    pub fn started(&self) -> Instant {
        self.start
    }

    /// True once every stream thread has returned.
    pub fn is_done(&self) -> bool {
        self.workers.is_done()
    }

    /// The next moment an interval ends, if intervals are on.
    pub fn next_tick(&self) -> Option<Instant> {
        self.kind.next_tick()
    }

    /// Interval reports due by `now`, for the flows this side receives. Also moves the CPU
    /// window's start to the end of the warm-up, so only the counted time is charged.
    pub fn poll_intervals(&mut self, now: Instant) -> Vec<Interval> {
        (self.probes).poll(now, self.start, self.spec.omit_s);
        let side = kind::Side {
            spec: &self.spec,
            workers: &self.workers,
            probes: &mut self.probes,
        };
        self.kind.poll(now, side)
    }

    /// How many TCP samples [`SideRun::new_tcp_samples`] handed out.
    pub fn given_tcp_samples(&self) -> usize {
        self.probes.given_tcp_samples()
    }

    /// TCP samples taken since the last call: what a live report joins to its intervals.
    pub fn new_tcp_samples(&mut self) -> Vec<TcpSample> {
        self.probes.new_tcp_samples()
    }

    /// The peer's senders are done: UDP receivers stop once their socket goes quiet.
    pub fn peer_done(&self) {
        self.workers.peer_done();
    }

    /// Bytes moved so far by this side's streams of one role (sent or received).
    pub fn moved(&self, role: Role) -> u64 {
        self.workers.moved(role)
    }

    /// Asks the senders to stop after their current write; receivers keep reading until
    /// `abort` or the end of their streams.
    pub fn stop_sending(&self) {
        self.workers.stop_sending();
    }

    /// Stops every stream now: the test is being abandoned.
    pub fn abort(&self) {
        self.workers.abort();
    }

    /// Joins the threads and builds this side's report, with a last partial interval.
    pub fn finish(mut self) -> SideReport {
        let control = self.probes.control_times();
        let (streams, threads) = self.workers.join(control);
        let inband = self.inband.take().map(|i| i.finish()).unwrap_or_default();
        let mut report = SideReport {
            streams,
            cpu: Some(self.probes.cpu(threads, self.start)),
            inband,
            ..SideReport::default()
        };
        let side = kind::Side {
            spec: &self.spec,
            workers: &self.workers,
            probes: &mut self.probes,
        };
        self.kind.finish(side, &mut report);
        self.probes
            .finish(&self.spec, self.workers.list(), &mut report);
        report
    }
}

#[cfg(test)]
#[path = "side_tests.rs"]
pub(crate) mod tests;
