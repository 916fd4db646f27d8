//! The counting window of a run and the intervals cut from it: where each interval ends,
//! which ones are the warm-up, and the one rule for a last interval too short to be a rate.
//!
//! Every figure of a run is counted in one window per stream: from the moment it opened
//! after the warm-up (`-O`) to the stream's last byte. Interval reports are cut from the
//! same counts, so the counted intervals of a flow add up to its summary, bytes and seconds.

use crate::metrics::bps;
use crate::result::Interval;

/// A last interval shorter than this share of the interval period is a tail: it is folded
/// into the interval before it (its bytes and seconds added to that one), never shown as a
/// rate of its own. A rate over a few milliseconds says nothing (one transaction in 3 µs is
/// "342 114 trans/s").
pub const TAIL_SHARE: f64 = 0.1;

/// Whether an interval of `span_s` seconds, cut by a clock of `period_s`, is a tail.
pub fn is_tail(span_s: f64, period_s: f64) -> bool {
    period_s > 0.0 && span_s < TAIL_SHARE * period_s
}

/// Where the intervals of a run end, in seconds from a side's start: every `period` through
/// the warm-up, at the warm-up's end, then every `period` from there. A warm-up interval
/// that would end within a tail of the warm-up's end runs to it instead. Without a warm-up
/// the intervals end every `period` from the start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    pub period: f64,
    pub omit: f64,
}

impl Schedule {
    pub fn new(period: f64, omit: f64) -> Schedule {
        Schedule {
            period,
            omit: omit.max(0.0),
        }
    }

    /// How many intervals the warm-up has.
    pub fn warm_up_intervals(&self) -> u64 {
        if self.omit <= 0.0 || self.period <= 0.0 {
            return 0;
        }
        let n = ((self.omit / self.period).ceil() as u64).max(1);
        let last = self.omit - (n - 1) as f64 * self.period;
        if n > 1 && is_tail(last, self.period) {
            n - 1
        } else {
            n
        }
    }

    /// Where interval `index` (from 0) ends.
    pub fn end(&self, index: u64) -> f64 {
        let warm = self.warm_up_intervals();
        if index + 1 == warm {
            self.omit
        } else if index < warm {
            (index + 1) as f64 * self.period
        } else {
            self.omit + (index + 1 - warm) as f64 * self.period
        }
    }

    /// Where interval `index` starts.
    pub fn start(&self, index: u64) -> f64 {
        match index {
            0 => 0.0,
            i => self.end(i - 1),
        }
    }

    /// Whether interval `index` is part of the warm-up.
    pub fn omitted(&self, index: u64) -> bool {
        index < self.warm_up_intervals()
    }
}

/// Whether a sample taken over `from_s..to_s` (a TCP sample of the sending side) belongs to
/// the interval `iv` of the receiving side: its midpoint lies inside. The sides cut on the
/// same schedule, but a counted interval starts where its window opened and the last ends
/// at the last byte, so the edges differ a little.
pub fn covers(iv: &Interval, from_s: f64, to_s: f64) -> bool {
    let mid = (from_s + to_s) / 2.0;
    iv.start_s <= mid && mid <= iv.end_s
}

/// Adds `tail` (a later interval of the same flow and stream) to `into`: its bytes,
/// datagrams, transactions and seconds; rates are made anew over the longer span. The TCP
/// sample and round trips stay those of `into`, which covers all but a tail of the span.
pub fn absorb(into: &mut Interval, tail: &Interval) {
    into.bytes += tail.bytes;
    into.end_s = into.end_s.max(tail.end_s);
    let span = into.end_s - into.start_s;
    into.bps = bps(into.bytes, span);
    if let (Some(a), Some(b)) = (into.packets, tail.packets) {
        // each side's expected datagrams, from what arrived and its loss
        let expected = |p: u64, loss: Option<f64>| {
            let l = loss.unwrap_or(0.0).clamp(0.0, 100.0);
            if l >= 100.0 {
                p as f64
            } else {
                p as f64 / (1.0 - l / 100.0)
            }
        };
        let e = expected(a, into.loss_percent) + expected(b, tail.loss_percent);
        let got = (a + b) as f64;
        into.packets = Some(a + b);
        into.loss_percent = Some(if e > 0.0 {
            ((e - got) / e * 100.0).clamp(0.0, 100.0)
        } else {
            0.0
        });
    }
    // jitter is a running estimate: the tail's is the later one
    into.jitter_ms = tail.jitter_ms.or(into.jitter_ms);
    if let (Some(a), Some(b)) = (into.rr.as_mut(), tail.rr.as_ref()) {
        a.transactions += b.transactions;
        a.tps = if span > 0.0 {
            a.transactions as f64 / span
        } else {
            0.0
        };
    }
}

/// Folds each flow's and stream's last interval into the one before it where it is a tail
/// of `period_s` (see [`is_tail`]): for intervals made elsewhere (a saved result, an
/// iperf3 peer) before they are shown or charted. Intervals wirerate cuts have none.
pub fn fold_tails(intervals: &mut Vec<Interval>, period_s: f64) {
    let mut i = intervals.len();
    while i > 0 {
        i -= 1;
        let iv = &intervals[i];
        let same = |x: &Interval| x.flow == iv.flow && x.stream == iv.stream;
        // only the last of its flow and stream
        if intervals[i + 1..].iter().any(same) || !is_tail(iv.end_s - iv.start_s, period_s) {
            continue;
        }
        let Some(prev) = intervals[..i]
            .iter()
            .rposition(|x| same(x) && x.omitted == iv.omitted)
        else {
            continue;
        };
        let tail = intervals.remove(i);
        absorb(&mut intervals[prev], &tail);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rr::RrInterval;
    use crate::spec::Flow;

    fn iv(start_s: f64, end_s: f64, bytes: u64) -> Interval {
        Interval {
            flow: Flow::ClientToServer,
            stream: None,
            start_s,
            end_s,
            bytes,
            bps: bps(bytes, end_s - start_s),
            omitted: false,
            packets: None,
            loss_percent: None,
            jitter_ms: None,
            tcp: None,
            bottleneck: None,
            rr: None,
        }
    }

    #[test]
    fn a_tenth_of_the_period_is_the_line() {
        assert!(is_tail(0.02, 1.0));
        assert!(is_tail(0.0, 1.0));
        assert!(!is_tail(0.1, 1.0));
        assert!(!is_tail(0.5, 1.0));
        assert!(is_tail(0.04, 0.5));
        // without intervals nothing is a tail
        assert!(!is_tail(0.0, 0.0));
    }

    #[test]
    fn the_schedule_restarts_at_the_end_of_the_warm_up() {
        let s = Schedule::new(1.0, 0.0);
        assert_eq!(s.warm_up_intervals(), 0);
        assert_eq!((s.start(0), s.end(0), s.end(2)), (0.0, 1.0, 3.0));
        assert!(!s.omitted(0));
        let s = Schedule::new(1.0, 2.0);
        assert_eq!(s.warm_up_intervals(), 2);
        assert_eq!(
            [s.end(0), s.end(1), s.end(2), s.end(3)],
            [1.0, 2.0, 3.0, 4.0]
        );
        assert!(s.omitted(1) && !s.omitted(2));
        // a warm-up that is not a whole number of intervals ends an interval of its own
        let s = Schedule::new(1.0, 1.5);
        assert_eq!([s.end(0), s.end(1), s.end(2)], [1.0, 1.5, 2.5]);
        assert!(s.omitted(1) && !s.omitted(2));
        // ... unless what is left is a tail: then the warm-up's last interval grows
        let s = Schedule::new(1.0, 1.05);
        assert_eq!(s.warm_up_intervals(), 1);
        assert_eq!([s.end(0), s.end(1)], [1.05, 2.05]);
        // a warm-up shorter than the period is one interval
        let s = Schedule::new(1.0, 0.3);
        assert_eq!([s.end(0), s.end(1)], [0.3, 1.3]);
        // rounding of the quotient does not make a tail
        let s = Schedule::new(0.1, 0.3);
        assert_eq!(s.warm_up_intervals(), 3);
        assert!((s.end(2) - 0.3).abs() < 1e-12);
    }

    #[test]
    fn a_tail_is_folded_into_the_interval_before_it() {
        let mut v = vec![iv(0.0, 1.0, 1000), iv(1.0, 2.0, 1000), iv(2.0, 2.02, 50)];
        fold_tails(&mut v, 1.0);
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].bytes, 1050);
        assert_eq!(v[1].end_s, 2.02);
        assert!((v[1].bps - 1050.0 * 8.0 / 1.02).abs() < 1e-9);
        // bytes and seconds are kept whole
        assert_eq!(v.iter().map(|i| i.bytes).sum::<u64>(), 2050);
        // a last interval of a tenth or more stays
        let mut v = vec![iv(0.0, 1.0, 1000), iv(1.0, 1.1, 100)];
        fold_tails(&mut v, 1.0);
        assert_eq!(v.len(), 2);
        // a lone interval has nothing to fold into
        let mut v = vec![iv(0.0, 0.01, 10)];
        fold_tails(&mut v, 1.0);
        assert_eq!(v.len(), 1);
    }

    #[test]
    fn each_flow_and_stream_folds_its_own_tail() {
        let mut b = iv(0.0, 1.0, 10);
        b.flow = Flow::ServerToClient;
        let mut b_tail = iv(1.0, 1.001, 1);
        b_tail.flow = Flow::ServerToClient;
        let mut s0 = iv(0.0, 1.0, 7);
        s0.stream = Some(0);
        let mut v = vec![iv(0.0, 1.0, 5), b, s0, iv(1.0, 1.5, 5), b_tail];
        fold_tails(&mut v, 1.0);
        assert_eq!(v.len(), 4);
        let back: Vec<_> = v
            .iter()
            .filter(|i| i.flow == Flow::ServerToClient)
            .collect();
        assert_eq!((back.len(), back[0].bytes, back[0].end_s), (1, 11, 1.001));
    }

    #[test]
    fn folding_keeps_datagrams_loss_and_transactions() {
        let mut a = iv(0.0, 1.0, 1000);
        a.packets = Some(90);
        a.loss_percent = Some(10.0);
        a.rr = Some(Box::new(RrInterval {
            transactions: 100,
            tps: 100.0,
            rtt: None,
        }));
        let mut t = iv(1.0, 1.05, 100);
        t.packets = Some(10);
        t.loss_percent = Some(0.0);
        t.rr = Some(Box::new(RrInterval {
            transactions: 5,
            tps: 100.0,
            rtt: None,
        }));
        let mut v = vec![a, t];
        fold_tails(&mut v, 1.0);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].packets, Some(100));
        // 100 expected + 10 expected, 100 arrived
        assert!((v[0].loss_percent.unwrap() - 10.0 / 110.0 * 100.0).abs() < 1e-9);
        let rr = v[0].rr.as_ref().unwrap();
        assert_eq!(rr.transactions, 105);
        assert!((rr.tps - 100.0).abs() < 1e-9);
    }

    #[test]
    fn a_sample_belongs_where_its_midpoint_lies() {
        // the first counted interval starts where the window opened, a little late
        let first = iv(1.0003, 2.0, 1);
        assert!(covers(&first, 1.0, 2.0));
        assert!(!covers(&first, 2.0, 3.0));
        assert!(!covers(&first, 0.0, 1.0));
    }
}
