//! What watches a side while its streams run, whatever the test kind: its CPU window, its
//! interface's counters, the kernel's evidence window, the host's UDP drops and the TCP
//! samples of its sending streams. None of it moves data; the kinds decide when TCP is
//! sampled (at their interval boundaries).

use std::net::IpAddr;
use std::time::{Duration, Instant};

use socket2::SockRef;
use wirerate_core::evidence::{interval_tcp, TcpSample};
use wirerate_core::result::CpuSide;
use wirerate_core::result::TcpInfo;
use wirerate_core::side_report::{Role, SideReport, StreamReport};
use wirerate_core::udp::UdpHostDrops;
use wirerate_core::window;
use wirerate_core::TestSpec;
use wirerate_probe::cpu::{CpuWindow, ThreadTimes};
use wirerate_probe::evidence::EvidenceWindow;
use wirerate_probe::host::host_env;
use wirerate_probe::iface::{interface_for, IfaceSnapshot};
use wirerate_probe::snmp;
use wirerate_probe::tcpinfo::tcp_info;

use super::workers::Worker;
use crate::intervals::IntervalClock;

/// The probes of one side.
pub(crate) struct Probes {
    udp_before: Option<UdpHostDrops>,
    cpu: CpuWindow,
    ctl_t0: ThreadTimes,
    /// Where the CPU window starts once the warm-up is over (None: the test's start).
    cpu_from: Option<Instant>,
    iface: Option<IfaceSnapshot>,
    evidence: EvidenceWindow,
    /// TCP_INFO of each worker's socket at the last interval boundary (senders only).
    tcp_prev: Vec<Option<TcpInfo>>,
    /// The same, one boundary earlier: to fold a last, short sample into the one before.
    tcp_before_last: Vec<Option<TcpInfo>>,
    tcp_samples: Vec<TcpSample>,
    /// TCP samples already handed out by [`Probes::new_tcp_samples`].
    samples_given: usize,
}

impl Probes {
    /// Starts watching, before any stream's thread exists (so the evidence window's cycle
    /// counter follows them). `local_ip` names the interface whose counters are kept.
    pub fn start(spec: &TestSpec, local_ip: Option<IpAddr>) -> Probes {
        let ifname = local_ip.and_then(interface_for);
        let iface = ifname.as_deref().and_then(IfaceSnapshot::read);
        let evidence = EvidenceWindow::start(ifname.as_slice());
        let cpu = CpuWindow::start();
        let ctl_t0 = ThreadTimes::now();
        let udp_before = (spec.protocol == wirerate_core::Protocol::Udp)
            .then(snmp::udp_snmp)
            .flatten();
        Probes {
            udp_before,
            cpu,
            ctl_t0,
            cpu_from: None,
            iface,
            evidence,
            tcp_prev: Vec::new(),
            tcp_before_last: Vec::new(),
            tcp_samples: Vec::new(),
            samples_given: 0,
        }
    }

    /// Moves the CPU and evidence windows' start to the end of the warm-up, once `now` is
    /// past it, so only the counted time is charged. `start` is the test's start.
    pub fn poll(&mut self, now: Instant, start: Instant, omit_s: f64) {
        let omit_end = start + Duration::from_secs_f64(omit_s);
        if omit_s > 0.0 && self.cpu_from.is_none() && now >= omit_end {
            self.cpu = CpuWindow::start();
            self.ctl_t0 = ThreadTimes::now();
            self.cpu_from = Some(now);
            self.evidence.restart();
        }
    }

    /// The control thread's CPU time over the window so far.
    pub fn control_times(&self) -> ThreadTimes {
        ThreadTimes::now().since(self.ctl_t0)
    }

    /// The CPU window, closed: `threads` is what the side's threads spent in it.
    pub fn cpu(&self, threads: ThreadTimes, start: Instant) -> CpuSide {
        let from = self.cpu_from.unwrap_or(start);
        self.cpu.finish(threads, from.elapsed().as_secs_f64())
    }

    /// How many TCP samples [`Probes::new_tcp_samples`] handed out.
    pub fn given_tcp_samples(&self) -> usize {
        self.samples_given
    }

    /// TCP samples taken since the last call: what a live report joins to its intervals.
    pub fn new_tcp_samples(&mut self) -> Vec<TcpSample> {
        let new = self.tcp_samples[self.samples_given.min(self.tcp_samples.len())..].to_vec();
        self.samples_given = self.tcp_samples.len();
        new
    }

    /// TCP_INFO of this side's sending streams over one interval, one sample per flow
    /// and, where streams report their own intervals, one per stream.
    pub fn sample_tcp(&mut self, spec: &TestSpec, workers: &[Worker], start_s: f64, end_s: f64) {
        let now: Vec<Option<TcpInfo>> = workers
            .iter()
            .map(|w| match (&w.sock, w.tcp && w.role == Role::Sender) {
                (Some(fd), true) => tcp_info(fd),
                _ => None,
            })
            .collect();
        if spec.per_stream_intervals() {
            for (i, w) in workers.iter().enumerate() {
                if let Some(after) = &now[i] {
                    let before = self.tcp_prev.get(i).cloned().flatten();
                    self.tcp_samples.push(TcpSample {
                        flow: w.flow,
                        stream: Some(w.id),
                        start_s,
                        end_s,
                        tcp: interval_tcp(&[before], std::slice::from_ref(&Some(after.clone()))),
                    });
                }
            }
        }
        for &flow in spec.direction.flows() {
            let of_flow = |v: &[Option<TcpInfo>]| -> Vec<Option<TcpInfo>> {
                workers
                    .iter()
                    .zip(v)
                    .filter(|(w, _)| w.flow == flow)
                    .map(|(_, t)| t.clone())
                    .collect()
            };
            let after = of_flow(&now);
            if after.iter().all(Option::is_none) {
                continue;
            }
            self.tcp_samples.push(TcpSample {
                flow,
                stream: None,
                start_s,
                end_s,
                tcp: interval_tcp(&of_flow(&self.tcp_prev), &after),
            });
        }
        self.tcp_before_last = std::mem::replace(&mut self.tcp_prev, now);
    }

    /// The senders' last TCP sample on `clock`'s schedule: from the last boundary to their
    /// last write, or, where that is a tail, the sample before it grown to their last write.
    pub fn sample_last_tcp(
        &mut self,
        spec: &TestSpec,
        workers: &[Worker],
        streams: &[StreamReport],
        clock: &IntervalClock,
    ) {
        let period = clock.period();
        let sent_end = streams
            .iter()
            .filter(|s| s.role == Role::Sender)
            .filter_map(|s| s.opened_s.map(|o| o + s.seconds))
            .fold(None, |m: Option<f64>, e| Some(m.map_or(e, |m| m.max(e))));
        let (Some(end), true) = (sent_end, period > 0.0) else {
            return;
        };
        let (schedule, index) = (clock.schedule, clock.index);
        let from = schedule.start(index);
        if index > 0 && !schedule.omitted(index - 1) && window::is_tail(end - from, period) {
            let before = schedule.start(index - 1);
            self.tcp_samples
                .retain(|t| (t.start_s - before).abs() > 1e-9);
            self.tcp_prev = std::mem::take(&mut self.tcp_before_last);
            self.sample_tcp(spec, workers, before, end.max(before));
        } else if end > from + 1e-3 {
            self.sample_tcp(spec, workers, from, end);
        }
    }

    /// Closes every probe into `report`: the host (with the socket buffers the spec asked
    /// for, read off a stream's socket), the interface's counters, the UDP drops, the
    /// evidence and the TCP samples.
    pub fn finish(self, spec: &TestSpec, workers: &[Worker], report: &mut SideReport) {
        let mut host = host_env();
        let asked = (spec.window_bytes)
            .or(spec.sndbuf_bytes)
            .or(spec.rcvbuf_bytes);
        host.socket_buffers = asked.and_then(|w| {
            let sock = SockRef::from(workers.iter().find_map(|w| w.sock.as_ref())?);
            Some(crate::net::socket_buffers(&sock, w))
        });
        if let Some(before) = &self.iface {
            if let Some(after) = IfaceSnapshot::read(&before.name) {
                host.interfaces.push(after.delta(before));
            }
        }
        report.host = host;
        report.udp_host = self
            .udp_before
            .zip(snmp::udp_snmp())
            .map(|(b, a)| snmp::delta(b, a));
        report.evidence = Some(self.evidence.finish());
        report.tcp_samples = self.tcp_samples;
    }
}
