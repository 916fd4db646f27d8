//! Request/response (`wirerate rr`: TCP_RR, UDP_RR, TCP_CRR): the client's and the server's
//! loop for each flow, and intervals made from the round trips the client's flows report,
//! merged over flows once every flow has reported one (the byte counts make none).

use std::collections::BTreeMap;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Instant;

use wirerate_core::latency::{LatencyHistogram, OpenLoopHistograms};
use wirerate_core::metrics::bps;
use wirerate_core::result::Interval;
use wirerate_core::rr::{RrInterval, RrMode};
use wirerate_core::side_report::{Role, SideReport};
use wirerate_core::spec::Flow;
use wirerate_core::window;
use wirerate_core::TestSpec;

use super::{KindRun, Side, Work};
use crate::rr::{self, SideMsg};
use crate::side::workers::Workers;
use crate::side::{DataSock, RunContext};

/// Round trips the rr workers reported for one interval, merged over flows.
struct Pending {
    end_s: f64,
    transactions: u64,
    flows: usize,
    hist: LatencyHistogram,
}

pub(crate) struct RoundTrips {
    mode: RrMode,
    /// Seconds an interval lasts, and the bytes of a request.
    period: f64,
    request: u64,
    /// What the client's workers send, and where the side takes it in.
    tx: Sender<SideMsg>,
    msgs: Receiver<SideMsg>,
    pending: BTreeMap<u64, Pending>,
    /// The last interval made, by index: a last one too short to be a rate joins it.
    made: Option<(u64, Pending)>,
    /// Every interval made, in order.
    done: Vec<Interval>,
    total: Option<LatencyHistogram>,
    open_loop: Option<OpenLoopHistograms>,
    /// How many flows report intervals (the client's workers).
    flows: usize,
}

impl RoundTrips {
    pub fn new(spec: &TestSpec) -> RoundTrips {
        let (tx, msgs) = mpsc::channel();
        let rr = spec.test.rr();
        RoundTrips {
            mode: rr.map_or(RrMode::default(), |r| r.mode),
            period: spec.interval_s,
            request: rr.map_or(0, |r| r.request_bytes),
            tx,
            msgs,
            pending: BTreeMap::new(),
            made: None,
            done: Vec::new(),
            total: None,
            open_loop: None,
            flows: 0,
        }
    }

    /// Takes in what the workers sent; returns the intervals every flow has now reported
    /// (all of them when `all`).
    fn drain(&mut self, all: bool) -> Vec<Interval> {
        while let Ok(m) = self.msgs.try_recv() {
            self.take(m);
        }
        let period = self.period;
        let mut out = Vec::new();
        while let Some(entry) = self.pending.first_entry() {
            if !all && entry.get().flows < self.flows {
                break;
            }
            let index = *entry.key();
            let p = entry.remove();
            let span = p.end_s - index as f64 * period;
            // a last, partial interval of a sliver of the period (the final response
            // arriving just after a boundary) is no rate: it joins the interval before it
            if let (true, Some((made, prev))) = (window::is_tail(span, period), self.made.as_mut())
            {
                prev.transactions += p.transactions;
                prev.hist.merge(&p.hist);
                prev.end_s = prev.end_s.max(p.end_s);
                let iv = interval(*made, prev, period, self.request);
                if let Some(slot) = self.done.iter_mut().rev().find(|x| x.rr.is_some()) {
                    *slot = iv;
                }
                continue;
            }
            let iv = interval(index, &p, period, self.request);
            self.done.push(iv.clone());
            out.push(iv);
            self.made = Some((index, p));
        }
        out
    }

    /// One message of a worker.
    fn take(&mut self, m: SideMsg) {
        match m {
            SideMsg::Interval {
                index,
                end_s,
                transactions,
                hist,
            } => {
                let p = self.pending.entry(index).or_insert_with(|| Pending {
                    end_s,
                    transactions: 0,
                    flows: 0,
                    hist: LatencyHistogram::new(),
                });
                p.end_s = p.end_s.max(end_s);
                p.transactions += transactions;
                p.flows += 1;
                p.hist.merge(&hist);
            }
            SideMsg::Total { rtt, open_loop } => {
                match self.total.as_mut() {
                    Some(t) => t.merge(&rtt),
                    None => self.total = Some(*rtt),
                }
                if let Some(o) = open_loop {
                    match self.open_loop.as_mut() {
                        Some(t) => t.merge(&o),
                        None => self.open_loop = Some(*o),
                    }
                }
            }
            // rr workers send no sweep figures
            SideMsg::Sweep(_) => {}
        }
    }
}

impl KindRun for RoundTrips {
    fn worker(&self, role: Role, sock: DataSock, ctx: &RunContext) -> Work {
        let tx = self.tx.clone();
        match (role, sock) {
            (Role::Sender, DataSock::Tcp(s)) => match (self.mode, ctx.token) {
                (RrMode::Crr, Some(token)) => {
                    Box::new(move |plan| rr::run_crr_client(s, token, plan, tx))
                }
                _ => Box::new(move |plan| rr::run_tcp_client(s, plan, tx)),
            },
            (Role::Receiver, DataSock::Tcp(s)) => match (self.mode, ctx.crr.clone()) {
                (RrMode::Crr, Some(route)) => {
                    Box::new(move |plan| rr::run_crr_anchor(s, route, plan))
                }
                _ => Box::new(move |plan| rr::run_tcp_server(s, plan)),
            },
            (Role::Sender, DataSock::Udp(s, ..)) => {
                Box::new(move |plan| rr::run_udp_client(s, plan, tx))
            }
            (Role::Receiver, DataSock::Udp(s, _, peer)) => {
                Box::new(move |plan| rr::run_udp_server(s, peer, plan))
            }
        }
    }

    fn started(&mut self, workers: &Workers) {
        self.flows = workers
            .list()
            .iter()
            .filter(|w| w.role == Role::Sender)
            .count();
    }

    fn poll(&mut self, _now: Instant, _side: Side<'_>) -> Vec<Interval> {
        // a side with no client flows (the server's) hears of no round trips
        if self.flows > 0 {
            return self.drain(false);
        }
        Vec::new()
    }

    fn finish(mut self: Box<Self>, _side: Side<'_>, report: &mut SideReport) {
        self.drain(true);
        report.intervals = std::mem::take(&mut self.done);
        report.rr_rtt = self.total.as_ref().and_then(LatencyHistogram::stats);
        report.rr_open_loop = self.open_loop.as_ref().and_then(OpenLoopHistograms::stats);
    }
}

/// The interval `index` of `period` seconds: its transactions over all flows and their
/// round trips, to where its last flow reported it.
fn interval(index: u64, p: &Pending, period: f64, request: u64) -> Interval {
    let start_s = index as f64 * period;
    let span = p.end_s - start_s;
    let bytes = p.transactions * request;
    Interval {
        flow: Flow::ClientToServer,
        stream: None,
        start_s,
        end_s: p.end_s,
        bytes,
        bps: bps(bytes, span),
        omitted: false,
        packets: None,
        loss_percent: None,
        jitter_ms: None,
        tcp: None,
        bottleneck: None,
        rr: Some(Box::new(RrInterval {
            transactions: p.transactions,
            tps: if span > 0.0 {
                p.transactions as f64 / span
            } else {
                0.0
            },
            rtt: p.hist.stats(),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirerate_core::rr::RrSpec;
    use wirerate_core::spec::TestKind;

    /// One flow's report of interval `index`, ended at `end_s`, of `n` round trips of `us`.
    fn report(index: u64, end_s: f64, n: u64, us: u64) -> SideMsg {
        let mut hist = LatencyHistogram::new();
        for _ in 0..n {
            hist.record_ns(us * 1000);
        }
        SideMsg::Interval {
            index,
            end_s,
            transactions: n,
            hist: Box::new(hist),
        }
    }

    fn two_flows() -> RoundTrips {
        let spec = TestSpec {
            interval_s: 1.0,
            test: TestKind::Rr(RrSpec {
                request_bytes: 100,
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut k = RoundTrips::new(&spec);
        k.flows = 2;
        k
    }

    #[test]
    fn an_interval_is_made_once_every_flow_has_reported_it() {
        let mut k = two_flows();
        k.tx.send(report(0, 0.99, 10, 50)).unwrap();
        assert!(k.drain(false).is_empty(), "one flow of two reported");
        k.tx.send(report(0, 1.0, 30, 150)).unwrap();
        let v = k.drain(false);
        assert_eq!(v.len(), 1);
        let rr = v[0].rr.as_ref().unwrap();
        assert_eq!((v[0].start_s, v[0].end_s, v[0].bytes), (0.0, 1.0, 4000));
        assert_eq!(rr.transactions, 40);
        assert!((rr.tps - 40.0).abs() < 1e-9);
        let rtt = rr.rtt.as_ref().unwrap();
        assert!(rtt.rtt_min_us < 51.0 && rtt.rtt_p99_us > 149.0, "{rtt:?}");
        assert_eq!(k.done.len(), 1);
    }

    #[test]
    fn a_last_sliver_of_an_interval_joins_the_one_before() {
        let mut k = two_flows();
        for m in [report(0, 1.0, 10, 50), report(0, 1.0, 10, 50)] {
            k.tx.send(m).unwrap();
        }
        assert_eq!(k.drain(false).len(), 1);
        // the final responses came 20 ms after the boundary, from one flow only
        k.tx.send(report(1, 1.02, 2, 50)).unwrap();
        assert!(k.drain(false).is_empty());
        assert!(k.drain(true).is_empty(), "a tail is no interval of its own");
        assert_eq!(k.done.len(), 1);
        let iv = &k.done[0];
        assert_eq!((iv.start_s, iv.end_s), (0.0, 1.02));
        assert_eq!(iv.rr.as_ref().unwrap().transactions, 22);
        assert_eq!(iv.bytes, 2200);
    }
}
