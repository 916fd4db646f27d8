//! A side's interval clock: cuts what its receivers took in into interval reports on the
//! run's schedule ([`Schedule`]). Warm-up intervals carry the bytes read; counted ones the
//! bytes of the streams' counted windows, so a flow's counted intervals add up to its
//! summary: the first starts where the flow's first window opened, the last ends at its
//! last byte, and a last one that is empty or a tail ([`window::is_tail`]) is folded into
//! the one before it.

use std::time::{Duration, Instant};

use wirerate_core::metrics::bps;
use wirerate_core::result::Interval;
use wirerate_core::spec::Flow;
use wirerate_core::window::{self, Schedule};

/// What the receivers of one flow (or one stream) have taken in so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Received {
    pub flow: Flow,
    /// A stream's own count, or None for the flow's sum.
    pub stream: Option<u32>,
    /// Bytes read, the warm-up's included.
    pub bytes: u64,
    /// UDP: unique datagrams and the sequence span.
    pub packets: u64,
    pub span: u64,
    /// UDP: the streams' jitter (nanoseconds, summed) and how many streams have one.
    pub jitter_ns: u64,
    pub jittered: u32,
    /// Bytes of the counted windows, where the first of them opened (seconds from the
    /// side's start) and, at the end, where the last of them closed.
    pub counted: u64,
    pub opened: Option<f64>,
    pub end: Option<f64>,
}

impl Received {
    /// Adds another stream's counts to a flow's sum.
    pub fn add(&mut self, r: &Received) {
        self.bytes += r.bytes;
        self.packets += r.packets;
        self.span += r.span;
        self.jitter_ns += r.jitter_ns;
        self.jittered += r.jittered;
        self.counted += r.counted;
        self.opened = min_opt(self.opened, r.opened);
        self.end = match (self.end, r.end) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
}

fn min_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A row's counts where its last interval ended.
#[derive(Debug, Clone, Copy)]
struct Mark {
    flow: Flow,
    stream: Option<u32>,
    bytes: u64,
    packets: u64,
    span: u64,
    /// Counted bytes given to intervals so far.
    counted: u64,
    /// Whether the row has had a counted interval.
    started: bool,
}

pub(crate) struct IntervalClock {
    start: Instant,
    pub schedule: Schedule,
    pub next: Option<Instant>,
    /// The interval cut next.
    pub index: u64,
    /// Each row's counts where the last interval ended, and where the one before it did.
    last: Vec<Mark>,
    prev: Vec<Mark>,
    /// Every interval cut so far, in order.
    pub done: Vec<Interval>,
}

impl IntervalClock {
    /// A clock of `period` seconds from `start` (none for 0) with `omit_s` of warm-up.
    pub fn new(start: Instant, period: f64, omit_s: f64) -> IntervalClock {
        let schedule = Schedule::new(period, omit_s);
        IntervalClock {
            start,
            schedule,
            next: (period > 0.0).then(|| start + Duration::from_secs_f64(schedule.end(0))),
            index: 0,
            last: Vec::new(),
            prev: Vec::new(),
            done: Vec::new(),
        }
    }

    pub fn period(&self) -> f64 {
        self.schedule.period
    }

    fn mark_of(&self, marks: &[Mark], r: &Received) -> Mark {
        marks
            .iter()
            .find(|m| m.flow == r.flow && m.stream == r.stream)
            .copied()
            .unwrap_or(Mark {
                flow: r.flow,
                stream: r.stream,
                bytes: 0,
                packets: 0,
                span: 0,
                counted: 0,
                started: false,
            })
    }

    /// One row's interval `index` from mark `m` to the counts `r`, over `start_s..end_s`.
    fn interval(&self, index: u64, m: &Mark, r: &Received, start_s: f64, end_s: f64) -> Interval {
        let omitted = self.schedule.omitted(index);
        let bytes = if omitted {
            r.bytes.saturating_sub(m.bytes)
        } else {
            r.counted.saturating_sub(m.counted)
        };
        let udp = (r.span > 0).then(|| {
            let packets = r.packets.saturating_sub(m.packets);
            let expected = r.span.saturating_sub(m.span);
            (packets, wirerate_core::udp::loss(expected, packets).1)
        });
        Interval {
            flow: r.flow,
            stream: r.stream,
            start_s,
            end_s,
            bytes,
            bps: bps(bytes, end_s - start_s),
            omitted,
            packets: udp.map(|u| u.0),
            loss_percent: udp.map(|u| u.1),
            jitter_ms: (r.span > 0 && r.jittered > 0)
                .then(|| r.jitter_ns as f64 / f64::from(r.jittered) / 1e6),
            tcp: None,
            bottleneck: None,
            rr: None,
        }
    }

    /// Where a row's interval `index` starts: on the schedule, but its first counted one
    /// where its window opened (None while it is shut).
    fn start_of(&self, index: u64, m: &Mark, r: &Received) -> Option<f64> {
        if self.schedule.omitted(index) || m.started {
            Some(self.schedule.start(index))
        } else {
            r.opened
        }
    }

    /// The row's mark after an interval up to `r`; `counted` whether the interval was a
    /// counted one.
    fn mark(m: &Mark, r: &Received, counted: bool) -> Mark {
        Mark {
            bytes: r.bytes,
            packets: r.packets,
            span: r.span,
            counted: if counted {
                m.counted.max(r.counted)
            } else {
                m.counted
            },
            started: m.started || counted,
            ..*m
        }
    }

    /// Interval reports due by `now`, one interval at most.
    pub fn poll(&mut self, now: Instant, received: &[Received]) -> Vec<Interval> {
        match self.next {
            Some(next) if now >= next => {}
            _ => return Vec::new(),
        }
        let index = self.index;
        let end_s = self.schedule.end(index);
        let omitted = self.schedule.omitted(index);
        let mut out = Vec::with_capacity(received.len());
        let mut marks = Vec::with_capacity(received.len());
        for r in received {
            let m = self.mark_of(&self.last, r);
            match self.start_of(index, &m, r) {
                // a window that opened a tail before the boundary: its first interval runs
                // to the next one
                Some(start_s) if omitted || !window::is_tail(end_s - start_s, self.period()) => {
                    out.push(self.interval(index, &m, r, start_s, end_s));
                    marks.push(Self::mark(&m, r, !omitted));
                }
                _ => marks.push(Self::mark(&m, r, false)),
            }
        }
        self.prev = std::mem::replace(&mut self.last, marks);
        self.index += 1;
        self.next = Some(self.start + Duration::from_secs_f64(self.schedule.end(self.index)));
        self.done.extend(out.iter().cloned());
        out
    }

    /// Every interval, with each counted row's last one ending at its last byte (`end` of
    /// the final counts): a new interval, or, where that would be empty or a tail, the
    /// row's last interval grown (or shrunk) to it.
    pub fn close(&mut self, received: &[Received]) -> Vec<Interval> {
        if self.schedule.period <= 0.0 || self.schedule.omitted(self.index) {
            return std::mem::take(&mut self.done);
        }
        let index = self.index;
        for r in received {
            let m = self.mark_of(&self.last, r);
            let (Some(end_s), Some(start_s)) = (r.end, self.start_of(index, &m, r)) else {
                continue;
            };
            let fresh = self.interval(index, &m, r, start_s, end_s);
            let empty = fresh.bytes == 0 && fresh.packets.unwrap_or(0) == 0;
            let row_last = self
                .done
                .iter()
                .rposition(|iv| iv.flow == r.flow && iv.stream == r.stream && !iv.omitted);
            match row_last.filter(|_| m.started) {
                Some(i) if empty || window::is_tail(end_s - start_s, self.schedule.period) => {
                    let from = self.done[i].start_s;
                    let m = self.mark_of(&self.prev, r);
                    self.done[i] = self.interval(index - 1, &m, r, from, end_s.max(from));
                }
                _ if end_s > start_s => self.done.push(fresh),
                _ => {}
            }
        }
        std::mem::take(&mut self.done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rx(bytes: u64, counted: u64, opened: Option<f64>) -> Received {
        Received {
            flow: Flow::ClientToServer,
            stream: None,
            bytes,
            packets: 0,
            span: 0,
            jitter_ns: 0,
            jittered: 0,
            counted,
            opened,
            end: None,
        }
    }

    fn at(start: Instant, s: f64) -> Instant {
        start + Duration::from_secs_f64(s)
    }

    fn sums(v: &[Interval]) -> (u64, f64) {
        let counted = v.iter().filter(|i| !i.omitted);
        (
            counted.clone().map(|i| i.bytes).sum(),
            counted.map(|i| i.end_s - i.start_s).sum(),
        )
    }

    #[test]
    fn counted_intervals_add_up_to_the_window_with_a_warm_up() {
        let t0 = Instant::now();
        let mut c = IntervalClock::new(t0, 1.0, 1.0);
        // the poll at the warm-up's end comes late: the window opened before it
        let w = c.poll(at(t0, 1.01), &[rx(1000, 40, Some(1.002))]);
        assert_eq!((w.len(), w[0].bytes, w[0].omitted), (1, 1000, true));
        assert_eq!(w[0].end_s, 1.0);
        let a = c.poll(at(t0, 2.0), &[rx(3000, 2000, Some(1.002))]);
        // the first counted interval starts where the window opened and holds all it counted
        assert_eq!((a[0].start_s, a[0].end_s, a[0].bytes), (1.002, 2.0, 2000));
        c.poll(at(t0, 3.0), &[rx(5000, 4000, Some(1.002))]);
        // the last byte 20 ms after the last boundary: a tail, folded
        let mut last = rx(5100, 4100, Some(1.002));
        last.end = Some(3.02);
        let v = c.close(&[last]);
        assert_eq!(v.len(), 3);
        assert_eq!((v[2].start_s, v[2].end_s, v[2].bytes), (2.0, 3.02, 2100));
        let (bytes, seconds) = sums(&v);
        assert_eq!(bytes, 4100);
        assert!((seconds - (3.02 - 1.002)).abs() < 1e-9);
    }

    #[test]
    fn a_last_interval_of_more_than_a_tail_stands_and_one_cut_after_the_last_byte_shrinks() {
        let t0 = Instant::now();
        let mut c = IntervalClock::new(t0, 1.0, 0.0);
        c.poll(at(t0, 1.0), &[rx(100, 100, Some(0.0))]);
        let mut last = rx(150, 150, Some(0.0));
        last.end = Some(1.5);
        let v = c.close(&[last]);
        assert_eq!(v.len(), 2);
        assert_eq!((v[1].start_s, v[1].end_s, v[1].bytes), (1.0, 1.5, 50));

        // the poll at 2.0 came after the last byte, at 1.9995
        let mut c = IntervalClock::new(t0, 1.0, 0.0);
        c.poll(at(t0, 1.0), &[rx(100, 100, Some(0.0))]);
        c.poll(at(t0, 2.0), &[rx(200, 200, Some(0.0))]);
        let mut last = rx(200, 200, Some(0.0));
        last.end = Some(1.9995);
        let v = c.close(&[last]);
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].end_s, 1.9995);
        let (bytes, seconds) = sums(&v);
        assert_eq!(bytes, 200);
        assert!((seconds - 1.9995).abs() < 1e-9);
    }

    #[test]
    fn a_window_that_moved_back_is_carried_not_lost() {
        // a provisional opening left out more than the window it moved to: the counted
        // bytes fall between two polls, and the intervals still add up to the final count
        let t0 = Instant::now();
        let mut c = IntervalClock::new(t0, 1.0, 0.5);
        c.poll(at(t0, 0.5), &[rx(10, 0, None)]);
        c.poll(at(t0, 1.5), &[rx(5000, 3000, Some(0.6))]);
        c.poll(at(t0, 2.5), &[rx(9000, 2500, Some(0.6))]);
        let mut last = rx(12_000, 5500, Some(0.6));
        last.end = Some(3.0);
        let v = c.close(&[last]);
        assert_eq!(sums(&v).0, 5500);
    }

    #[test]
    fn a_window_opening_a_tail_before_a_boundary_starts_with_the_next_interval() {
        let t0 = Instant::now();
        let mut c = IntervalClock::new(t0, 1.0, 1.0);
        c.poll(at(t0, 1.0), &[rx(1000, 0, None)]);
        // opened at 1.95: no 0.05 s interval of its own
        assert!(c.poll(at(t0, 2.0), &[rx(2000, 100, Some(1.95))]).is_empty());
        let v = c.poll(at(t0, 3.0), &[rx(3000, 1100, Some(1.95))]);
        assert_eq!((v[0].start_s, v[0].end_s, v[0].bytes), (1.95, 3.0, 1100));
        // a window still shut at the end has no counted interval
        let mut c = IntervalClock::new(t0, 1.0, 1.0);
        c.poll(at(t0, 1.0), &[rx(1000, 0, None)]);
        assert!(c.poll(at(t0, 2.0), &[rx(2000, 0, None)]).is_empty());
        assert_eq!(sums(&c.close(&[rx(2000, 0, None)])), (0, 0.0));
    }
}
