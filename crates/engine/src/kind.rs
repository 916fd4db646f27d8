//! Test kinds plug into a side through one trait, [`KindRun`], as a table of functions:
//! which loop each stream's thread runs, how the side's interval reports are made, and what
//! the kind adds to the side's report. A side ([`crate::side::SideRun`]) holds one of them
//! beside what every kind shares (the workers, the probes), and asks [`pick`] for it.
//!
//! A new kind is a variant of `wirerate_core::spec::TestKind`, a module here implementing
//! [`KindRun`] (its loops beside it or in a module of their own), and its arm in [`pick`].

use std::time::Instant;

use wirerate_core::result::Interval;
use wirerate_core::side_report::{Role, SideReport, StreamReport};
use wirerate_core::spec::TestKind;
use wirerate_core::sweep::SweepPoint;
use wirerate_core::TestSpec;

use crate::side::probes::Probes;
use crate::side::workers::Workers;
use crate::side::{DataSock, RunContext};
use crate::stream::Plan;

mod rr;
mod stream;
mod sweep;

/// The body of one stream's thread, given its plan on that thread.
pub(crate) type Work = Box<dyn FnOnce(Plan) -> StreamReport + Send>;

/// What a kind sees of its side: its spec, its workers, and the probes watching them.
pub(crate) struct Side<'a> {
    pub spec: &'a TestSpec,
    pub workers: &'a Workers,
    pub probes: &'a mut Probes,
}

/// One test kind's part of a side.
pub(crate) trait KindRun: Send {
    /// The loop a stream of `role` runs on its own thread, over `sock`. (Streams a bulk
    /// test deals to the pool of data workers run the pool's loops instead.)
    fn worker(&self, role: Role, sock: DataSock, ctx: &RunContext) -> Work;

    /// Every stream's worker has started.
    fn started(&mut self, _workers: &Workers) {}

    /// The next moment an interval of this kind's own clock ends, if it keeps one.
    fn next_tick(&self) -> Option<Instant> {
        None
    }

    /// Interval reports due by `now`.
    fn poll(&mut self, now: Instant, side: Side<'_>) -> Vec<Interval>;

    /// Sweep sizes finished since the last call (progress); none for other kinds.
    fn new_sweep_points(&mut self) -> Vec<SweepPoint> {
        Vec::new()
    }

    /// Once the workers are joined (`report.streams` holds their reports): the side's
    /// intervals and what else the kind measured, into `report`.
    fn finish(self: Box<Self>, side: Side<'_>, report: &mut SideReport);
}

/// The kind that runs `spec`'s test, on a side whose test started at `start`.
pub(crate) fn pick(spec: &TestSpec, start: Instant) -> Box<dyn KindRun> {
    match &spec.test {
        TestKind::Stream => Box::new(stream::Bulk::new(spec, start)),
        TestKind::Rr(_) => Box::new(rr::RoundTrips::new(spec)),
        TestKind::Sweep(_) => Box::new(sweep::Sizes::new()),
        // never sent as one test (its phases are stream and rr tests): a side that gets one
        // moves bulk data without an interval clock
        TestKind::Rpm(_) => Box::new(stream::Bulk::unclocked(spec, start)),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use wirerate_core::rr::RrSpec;
    use wirerate_core::sweep::SweepSpec;

    fn spec(test: TestKind) -> TestSpec {
        TestSpec {
            interval_s: 1.0,
            test,
            ..Default::default()
        }
    }

    #[test]
    fn only_bulk_streams_cut_intervals_on_the_sides_clock() {
        let t0 = Instant::now();
        let bulk = pick(&spec(TestKind::Stream), t0);
        assert_eq!(bulk.next_tick(), Some(t0 + Duration::from_secs(1)));
        // rr intervals come from the round trips its flows report, a sweep has none
        let rr = pick(&spec(TestKind::Rr(RrSpec::default())), t0);
        assert_eq!(rr.next_tick(), None);
        let sweep = pick(&spec(TestKind::Sweep(SweepSpec::default())), t0);
        assert_eq!(sweep.next_tick(), None);
    }
}
