//! A pacing timer: a timerfd armed at an absolute time on the monotonic clock, in an epoll
//! set. A paced sender waits on it for the next batch's slot instead of sleeping a relative
//! time, so a late wake-up does not push the next one later, and the same set can hold the
//! sockets a worker also waits on.

use std::io;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use rustix::event::epoll;
use rustix::time::{
    clock_gettime, timerfd_create, timerfd_settime, ClockId, Itimerspec, TimerfdClockId,
    TimerfdFlags, TimerfdTimerFlags, Timespec,
};

pub struct Timer {
    ep: OwnedFd,
    tfd: OwnedFd,
    /// The monotonic clock and the `Instant` read together, to turn one into the other.
    base_ts: Timespec,
    base: Instant,
    events: Vec<epoll::Event>,
}

impl Timer {
    pub fn new() -> io::Result<Timer> {
        let tfd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::CLOEXEC | TimerfdFlags::NONBLOCK,
        )?;
        let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        epoll::add(
            &ep,
            &tfd,
            epoll::EventData::new_u64(0),
            epoll::EventFlags::IN,
        )?;
        Ok(Timer {
            ep,
            tfd,
            base_ts: clock_gettime(ClockId::Monotonic),
            base: Instant::now(),
            events: Vec::with_capacity(4),
        })
    }

    /// `at` on the monotonic clock.
    fn timespec(&self, at: Instant) -> Timespec {
        let ahead = at.saturating_duration_since(self.base);
        let nanos = u128::try_from(self.base_ts.tv_nsec).unwrap_or(0) + ahead.as_nanos();
        let secs = i128::from(self.base_ts.tv_sec) + (nanos / 1_000_000_000) as i128;
        Timespec {
            tv_sec: secs.try_into().unwrap_or(i64::MAX),
            tv_nsec: (nanos % 1_000_000_000) as _,
        }
    }

    /// The timer's descriptor, for a worker that waits on it in its own epoll set with
    /// [`Timer::arm`] and [`Timer::clear`].
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.tfd.as_fd()
    }

    /// Makes the descriptor readable at `at`; false if the kernel refused.
    pub fn arm(&self, at: Instant) -> bool {
        timerfd_settime(
            &self.tfd,
            TimerfdTimerFlags::ABSTIME,
            &Itimerspec {
                it_interval: Timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: self.timespec(at),
            },
        )
        .is_ok()
    }

    /// Clears an expiry, so the descriptor is not readable until it is armed again.
    pub fn clear(&self) {
        let mut count = [0u8; 8];
        let _ = rustix::io::read(&self.tfd, &mut count);
    }

    /// Waits until `at`, or returns at once if it has passed; the time then.
    pub fn wait_until(&mut self, at: Instant) -> Instant {
        loop {
            let now = Instant::now();
            if now >= at {
                return now;
            }
            if !self.arm(at) {
                std::thread::sleep(at - now);
                continue;
            }
            self.events.clear();
            // a bound on the wait, should the timer never fire
            let bound = (at - now + Duration::from_millis(100)).min(Duration::from_secs(1));
            let ts = Timespec {
                tv_sec: bound.as_secs() as _,
                tv_nsec: bound.subsec_nanos() as _,
            };
            let _ = epoll::wait(
                &self.ep,
                rustix::buffer::spare_capacity(&mut self.events),
                Some(&ts),
            );
            // clears the expiry count, so the next wait is not woken by this one
            self.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_until_the_time_and_not_much_longer() {
        let mut t = Timer::new().expect("a timerfd");
        let start = Instant::now();
        for i in 1..=20u32 {
            let at = start + Duration::from_millis(5) * i;
            let woke = t.wait_until(at);
            assert!(woke >= at, "woke before its time");
        }
        // twenty absolute deadlines 5 ms apart: the last wake is at 100 ms, not 100 ms plus
        // twenty oversleeps (a generous bound for a loaded machine)
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(100), "{took:?}");
        assert!(took < Duration::from_millis(600), "{took:?}");
        // a time that has passed returns at once
        let now = Instant::now();
        assert!(t.wait_until(now - Duration::from_millis(1)) >= now);
    }
}
