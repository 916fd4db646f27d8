//! Bulk transfer (`wirerate run`), TCP or UDP: each stream's sender or receiver loop, and
//! intervals cut by the side's clock from what its receivers took in, with the senders'
//! TCP sampled at each boundary.

use std::time::Instant;

use wirerate_core::result::Interval;
use wirerate_core::side_report::{Role, SideReport};
use wirerate_core::TestSpec;

use super::{KindRun, Side, Work};
use crate::intervals::IntervalClock;
use crate::side::workers::Workers;
use crate::side::{DataSock, RunContext};
use crate::stream::{run_receiver, run_sender};
use crate::udp::{run_udp_receiver, run_udp_sender};

pub(crate) struct Bulk {
    clock: IntervalClock,
}

impl Bulk {
    pub fn new(spec: &TestSpec, start: Instant) -> Bulk {
        Bulk {
            clock: IntervalClock::new(start, spec.interval_s, spec.omit_s),
        }
    }

    /// Bulk streams with no intervals.
    pub fn unclocked(spec: &TestSpec, start: Instant) -> Bulk {
        Bulk {
            clock: IntervalClock::new(start, 0.0, spec.omit_s),
        }
    }
}

impl KindRun for Bulk {
    fn worker(&self, role: Role, sock: DataSock, _ctx: &RunContext) -> Work {
        match (role, sock) {
            (Role::Sender, DataSock::Tcp(s)) => Box::new(move |plan| run_sender(s, plan)),
            (Role::Receiver, DataSock::Tcp(s)) => Box::new(move |plan| run_receiver(s, plan)),
            (Role::Sender, DataSock::Udp(s, token, _)) => {
                Box::new(move |plan| run_udp_sender(s, token, plan))
            }
            (Role::Receiver, DataSock::Udp(s, token, peer)) => {
                Box::new(move |plan| run_udp_receiver(s, token, peer, plan))
            }
        }
    }

    fn next_tick(&self) -> Option<Instant> {
        self.clock.next
    }

    fn poll(&mut self, now: Instant, side: Side<'_>) -> Vec<Interval> {
        let received = side
            .workers
            .received_by_flow(side.spec, |w| match w.counters.counted() {
                Some((counted, opened)) => (counted, Some(opened), None),
                None => (0, None, None),
            });
        let index = self.clock.index;
        let out = self.clock.poll(now, &received);
        if self.clock.index != index {
            let s = self.clock.schedule;
            let workers = side.workers.list();
            (side.probes).sample_tcp(side.spec, workers, s.start(index), s.end(index));
        }
        out
    }

    fn finish(mut self: Box<Self>, side: Side<'_>, report: &mut SideReport) {
        let workers: &Workers = side.workers;
        (side.probes).sample_last_tcp(side.spec, workers.list(), &report.streams, &self.clock);
        let streams = &report.streams;
        let received = workers.received_by_flow(side.spec, |w| {
            streams
                .iter()
                .find(|s| s.role == Role::Receiver && s.flow == w.flow && s.id == w.id)
                .map_or((0, None, None), |s| {
                    (
                        s.counted_bytes,
                        s.opened_s,
                        s.opened_s.map(|o| o + s.seconds),
                    )
                })
        });
        report.intervals = self.clock.close(&received);
    }
}
