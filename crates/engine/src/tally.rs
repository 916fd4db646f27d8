//! A stream's tallies: its counts, and the one window every figure of it is counted in
//! (see `wirerate_core::window`), shared with the side's interval clock through
//! [`Counters`].

use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use wirerate_core::side_report::StreamReport;
use wirerate_probe::cpu::ThreadTimes;

use crate::stream::{Held, Plan};

/// Progress of one stream, shared with the control thread.
#[derive(Debug, Default)]
pub struct Counters {
    pub bytes: AtomicU64,
    pub calls: AtomicU64,
    /// UDP receivers: unique datagrams, and the highest sequence number + 1.
    pub packets: AtomicU64,
    pub span: AtomicU64,
    /// UDP receivers: the interarrival jitter so far, nanoseconds plus one (0: none yet).
    pub jitter_ns: AtomicU64,
    /// The counted window, once open: nanoseconds from the side's start to its opening,
    /// plus one (0 while it is shut), and the bytes before it (see [`Counters::counted`]).
    pub opened_ns: AtomicU64,
    pub counted_from: AtomicU64,
}

impl Counters {
    /// The bytes counted so far and where the window opened (seconds from the side's
    /// start), or None while the window is shut: what interval reports are cut from.
    pub fn counted(&self) -> Option<(u64, f64)> {
        let opened = self.opened_ns.load(Ordering::Acquire).checked_sub(1)?;
        let from = self.counted_from.load(Ordering::Relaxed);
        let bytes = self.bytes.load(Ordering::Relaxed);
        Some((bytes.saturating_sub(from), opened as f64 / 1e9))
    }

    fn publish(&self, o: &Opening, start: Instant) {
        let ns = u64::try_from(o.at.saturating_duration_since(start).as_nanos()).unwrap_or(0);
        self.counted_from.store(o.counted_from, Ordering::Relaxed);
        self.opened_ns
            .store(ns.saturating_add(1), Ordering::Release);
    }
}

/// Where a counted window opens: the bytes and calls before it, its time and the thread's
/// CPU times.
#[derive(Clone, Copy)]
struct Opening {
    counted_from: u64,
    calls_from: u64,
    at: Instant,
    times: Option<ThreadTimes>,
}

/// Running tallies, turned into a report at the end. Every figure of a stream (bytes,
/// calls, seconds, CPU) is counted in one window: from its opening after the warm-up (or the
/// test's start without one) to the stream's last call.
pub struct Tally {
    bytes: u64,
    calls: u64,
    start: Instant,
    omit_end: Instant,
    /// The counted window, once open.
    window: Option<Opening>,
    /// A receiver's window opened at a read that found segments held behind a hole; a later
    /// read without one may still move it (see [`Tally::add_received`]).
    provisional: bool,
    /// Where the sender's data ends, for a timed test.
    end: Option<Instant>,
    last: Instant,
    /// Whether the window's opening reads this thread's CPU times (a worker serving many
    /// flows keeps its own times instead).
    thread_times: bool,
    /// This thread's times when its last call returned ([`Tally::close`]), so what it does
    /// after the window (a sender waiting for its peer to close) is not charged to it.
    closed_times: Option<ThreadTimes>,
}

impl Tally {
    pub fn new(plan: &Plan) -> Tally {
        let omit_end = plan.start + Duration::from_secs_f64(plan.spec.omit_s);
        let window = (plan.spec.omit_s <= 0.0).then_some(Opening {
            counted_from: 0,
            calls_from: 0,
            at: plan.start,
            times: None,
        });
        if let Some(o) = &window {
            plan.counters.publish(o, plan.start);
        }
        Tally {
            bytes: 0,
            calls: 0,
            start: plan.start,
            omit_end,
            window,
            provisional: false,
            end: plan
                .spec
                .send_seconds()
                .map(|s| plan.start + Duration::from_secs_f64(s)),
            last: plan.start,
            thread_times: true,
            closed_times: None,
        }
    }

    /// A tally of one flow among many on a worker thread: no CPU times of its own.
    pub fn pooled(plan: &Plan) -> Tally {
        Tally {
            thread_times: false,
            ..Tally::new(plan)
        }
    }

    /// Records one call; true when this call opened the counted window. A sender's window
    /// opens at its first call after the warm-up; the bytes of that call still belong to
    /// the warm-up.
    #[inline]
    pub fn add(&mut self, n: usize, now: Instant, c: &Counters) -> bool {
        self.count(n, now, c);
        let opened = self.window.is_none() && now >= self.omit_end;
        if opened {
            self.open(now, 0, c);
        }
        opened
    }

    /// Right after the call that opened the window: counts the last `n` bytes before the
    /// opening as the window's. A TCP sender gives what had not been acknowledged
    /// (SIOCOUTQ): its window opens at the byte offset its receiver had acknowledged, so the
    /// bytes still on their way are counted as the receiver counts them, and the sender
    /// never counts less than its receiver. A UDP sender gives the opening call's datagrams:
    /// stamped after the warm-up, its receiver counts them.
    pub fn include_before_opening(&mut self, n: u64, c: &Counters) {
        if let Some(o) = self.window.as_mut() {
            o.counted_from = o.counted_from.saturating_sub(n);
            c.publish(o, self.start);
        }
    }

    /// Records one call of a UDP receiver: `warm` bytes of datagrams its sender stamped
    /// inside the warm-up, `counted` bytes of ones stamped after it. The window opens at
    /// the first call with datagrams stamped after the warm-up, and counts those alone, so
    /// the receiver counts only datagrams its sender counted.
    #[inline]
    pub fn add_stamped(&mut self, warm: usize, counted: usize, now: Instant, c: &Counters) {
        self.count(warm + counted, now, c);
        match self.window.as_mut() {
            None if counted > 0 => {
                self.open(now, 0, c);
                self.include_before_opening(counted as u64, c);
            }
            Some(o) if warm > 0 => {
                // late datagrams of the warm-up
                o.counted_from += warm as u64;
                c.publish(o, self.start);
            }
            _ => {}
        }
    }

    /// Records one read of a TCP receiver. Its window opens at the first read after the
    /// warm-up that leaves no segment held behind a hole, with the bytes then readable left
    /// out: both arrived during the warm-up, and reading them later must not count them.
    ///
    /// On a path that keeps losing, that read may come late or never. The first read after
    /// the warm-up then opens the window for the time being, with all the receive memory
    /// then in use left out: a bound above the bytes held, so the figure errs low, never above
    /// what crossed. The first read without a hole moves it there if it comes in the first
    /// half of the window it would cut short (any time, when the end is not known); a later
    /// one leaves it. The choice is made as reads come, so the intervals cut from the
    /// window add up to it.
    #[inline]
    pub fn add_received(
        &mut self,
        n: usize,
        now: Instant,
        c: &Counters,
        held: impl FnOnce() -> Held,
    ) {
        self.count(n, now, c);
        if (self.window.is_none() || self.provisional) && now >= self.omit_end {
            let held = held();
            if !held.behind_a_hole() {
                if self.window.is_none() || self.moves_to(now) {
                    self.open(now, held.in_order, c);
                }
                self.provisional = false;
            } else if self.window.is_none() {
                self.open(now, held.in_order.max(held.memory), c);
                self.provisional = true;
            }
        }
    }

    /// Whether a provisional window should move to a read at `now`: the end of the test is
    /// unknown, or `now` lies in the first half of what is left of the window.
    fn moves_to(&self, now: Instant) -> bool {
        match (self.end, &self.window) {
            (Some(end), Some(o)) => {
                2 * end.saturating_duration_since(now) >= end.saturating_duration_since(o.at)
            }
            _ => true,
        }
    }

    #[inline]
    fn count(&mut self, n: usize, now: Instant, c: &Counters) {
        self.bytes += n as u64;
        self.calls += 1;
        self.last = now;
        c.bytes.fetch_add(n as u64, Ordering::Relaxed);
        c.calls.fetch_add(1, Ordering::Relaxed);
    }

    /// Opens the counted window when the call that ends at `now` returns, with `held` more
    /// bytes left out: that call may carry bytes that arrived (or left) during the warm-up,
    /// so it still belongs to the warm-up.
    fn open(&mut self, now: Instant, held: u64, c: &Counters) {
        let o = Opening {
            counted_from: self.bytes + held,
            calls_from: self.calls,
            at: now,
            times: self.thread_times.then(ThreadTimes::now),
        };
        c.publish(&o, self.start);
        self.window = Some(o);
    }

    /// How long ago the stream's last call moved data.
    pub fn since_last_call(&self) -> Duration {
        self.last.elapsed()
    }

    /// Ends the window's CPU and scheduler times now, at its last call.
    pub fn close(&mut self) {
        if self.thread_times {
            self.closed_times = Some(ThreadTimes::now());
        }
    }

    /// The stream's report; `t0` are the thread's CPU times when it started, and only the
    /// CPU spent inside the counted window is charged.
    pub fn report(&self, plan: &Plan, t0: ThreadTimes, error: Option<String>) -> StreamReport {
        let times = if self.thread_times {
            let end = self.closed_times.unwrap_or_else(ThreadTimes::now);
            end.since(self.window.and_then(|w| w.times).unwrap_or(t0))
        } else {
            ThreadTimes::default()
        };
        let w = self.window.as_ref();
        StreamReport {
            id: plan.id,
            flow: plan.flow,
            role: plan.role,
            bytes: self.bytes,
            counted_bytes: w.map_or(0, |w| self.bytes.saturating_sub(w.counted_from)),
            calls: self.calls,
            counted_calls: w.map_or(0, |w| self.calls - w.calls_from),
            opened_s: w.map(|w| w.at.saturating_duration_since(self.start).as_secs_f64()),
            seconds: w.map_or(0.0, |w| {
                self.last.saturating_duration_since(w.at).as_secs_f64()
            }),
            user_s: times.user_s,
            sys_s: times.sys_s,
            tcp: None,
            udp: None,
            error,
            sched: times.sched(),
            worker: None,
            rr: None,
        }
    }
}

/// Bytes written to a TCP socket and not yet acknowledged (SIOCOUTQ); 0 where the kernel
/// will not say.
pub fn unacked(sock: &TcpStream) -> u64 {
    use std::os::fd::AsRawFd;
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (TIOCOUTQ) writes one int into `n`.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
    if rc == 0 {
        u64::try_from(n).unwrap_or(0)
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::Held;
    use std::sync::Arc;
    use wirerate_core::side_report::Role;
    use wirerate_core::spec::{End, Flow};
    use wirerate_core::TestSpec;

    fn receiver_plan(omit_s: f64) -> Plan {
        Plan {
            id: 0,
            flow: Flow::ClientToServer,
            role: Role::Receiver,
            spec: Arc::new(TestSpec {
                omit_s,
                end: End::Time { seconds: 2.0 },
                ..TestSpec::default()
            }),
            start: Instant::now(),
            idle: Duration::from_secs(5),
            counters: Arc::default(),
            stop: Arc::default(),
            peer_done: Arc::default(),
            file: None,
        }
    }

    const CLEAN: Held = Held {
        in_order: 0,
        memory: 0,
    };
    /// Segments held out of order: nothing readable, 96 KiB of memory in use.
    const HOLE: Held = Held {
        in_order: 0,
        memory: 96 * 1024,
    };

    #[test]
    fn memory_that_readable_bytes_explain_is_no_hole() {
        assert!(!CLEAN.behind_a_hole());
        assert!(HOLE.behind_a_hole());
        // a reader behind on loopback: 3 MB readable in about as much memory
        let behind = Held {
            in_order: 3_000_000,
            memory: 3_300_000,
        };
        assert!(!behind.behind_a_hole());
        let both = Held {
            in_order: 14_480,
            memory: 166_768,
        };
        assert!(both.behind_a_hole());
    }

    #[test]
    fn a_receivers_window_waits_for_the_hole_to_be_filled() {
        let plan = receiver_plan(0.001);
        let mut t = Tally::new(&plan);
        let c = &plan.counters;
        let t1 = plan.start + Duration::from_millis(2);
        t.add_received(1000, plan.start, c, || unreachable!("inside the warm-up"));
        assert_eq!(c.counted(), None);
        // after the warm-up, segments wait behind a hole: the window opens for the time
        // being, without the memory held
        t.add_received(1000, t1, c, || HOLE);
        assert!(t.provisional);
        assert_eq!(c.counted().map(|(b, _)| b), Some(0));
        // the hole is filled: 50 000 bytes that crossed during the warm-up become readable
        // at once and are left out, with the read that found them
        let t2 = t1 + Duration::from_millis(100);
        t.add_received(8000, t2, c, || Held {
            in_order: 50_000,
            memory: 60_000,
        });
        assert!(!t.provisional);
        t.add_received(50_000, t2 + Duration::from_millis(1), c, || CLEAN);
        t.add_received(4000, t2 + Duration::from_secs(1), c, || unreachable!());
        let r = t.report(&plan, ThreadTimes::now(), None);
        assert_eq!(r.bytes, 64_000);
        assert_eq!(r.counted_bytes, 4000);
        // the opening read and those before it are the warm-up's
        assert_eq!((r.calls, r.counted_calls), (5, 2));
        assert!((r.seconds - 1.0).abs() < 1e-9, "{}", r.seconds);
        // what the interval clock reads is the report's window
        let (counted, opened) = c.counted().unwrap();
        assert_eq!(counted, r.counted_bytes);
        assert!((opened - r.opened_s.unwrap()).abs() < 1e-6);
        assert!((opened - 0.102).abs() < 1e-6, "{opened}");
    }

    #[test]
    fn holes_all_test_long_keep_the_window_at_the_first_read_without_what_was_held() {
        let plan = receiver_plan(0.001);
        let mut t = Tally::new(&plan);
        let c = &plan.counters;
        let t1 = plan.start + Duration::from_millis(2);
        t.add_received(1000, t1, c, || Held {
            in_order: 500,
            memory: 96 * 1024,
        });
        t.add_received(2000, t1 + Duration::from_millis(500), c, || HOLE);
        assert!(t.provisional);
        let r = t.report(&plan, ThreadTimes::now(), None);
        // the 96 KiB of memory in use at the first read are left out, more than was read since
        assert_eq!(r.counted_bytes, 0);
        assert!((r.seconds - 0.5).abs() < 1e-9, "{}", r.seconds);
        // a hole-free read in the second half of the test would cut the window short: it
        // stays where it was
        let end = t1 + Duration::from_secs(2);
        t.add_received(200_000, end - Duration::from_millis(10), c, || HOLE);
        t.add_received(1000, end, c, || CLEAN);
        assert!(!t.provisional);
        let r = t.report(&plan, ThreadTimes::now(), None);
        assert_eq!(r.counted_bytes, 204_000 - 1000 - 96 * 1024);
        assert!((r.seconds - 2.0).abs() < 1e-9, "{}", r.seconds);
        assert_eq!(c.counted().map(|(b, _)| b), Some(r.counted_bytes));
    }

    #[test]
    fn a_sender_opens_at_its_first_call_after_the_warm_up() {
        let plan = receiver_plan(0.001);
        let mut t = Tally::new(&plan);
        let c = Counters::default();
        assert!(!t.add(10, plan.start, &c));
        assert!(t.add(10, plan.start + Duration::from_millis(2), &c));
        assert!(!t.add(10, plan.start + Duration::from_millis(3), &c));
        let r = t.report(&plan, ThreadTimes::now(), None);
        assert_eq!((r.counted_bytes, r.counted_calls), (10, 1));
    }

    #[test]
    fn a_tcp_sender_counts_what_was_not_acknowledged_when_its_window_opened() {
        let plan = receiver_plan(0.001);
        let mut t = Tally::new(&plan);
        let c = Counters::default();
        t.add(100_000, plan.start, &c);
        // 60 000 of the 200 000 bytes written were not acknowledged at the opening
        assert!(t.add(100_000, plan.start + Duration::from_millis(2), &c));
        t.include_before_opening(60_000, &c);
        t.add(50_000, plan.start + Duration::from_millis(3), &c);
        let r = t.report(&plan, ThreadTimes::now(), None);
        assert_eq!(r.counted_bytes, 110_000);
        assert_eq!(r.counted_calls, 1);
    }

    #[test]
    fn without_a_warm_up_the_window_opens_at_the_start() {
        let plan = receiver_plan(0.0);
        let mut t = Tally::new(&plan);
        let c = &plan.counters;
        assert_eq!(c.counted(), Some((0, 0.0)));
        t.add_received(
            700,
            plan.start + Duration::from_millis(5),
            c,
            || unreachable!(),
        );
        let r = t.report(&plan, ThreadTimes::now(), None);
        assert_eq!(
            (r.counted_bytes, r.counted_calls, r.opened_s),
            (700, 1, Some(0.0))
        );
        assert_eq!(c.counted(), Some((700, 0.0)));
    }
}
