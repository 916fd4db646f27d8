//! CPU accounting: per-thread rusage for what our own threads cost, and /proc/stat for the
//! whole host (softirq and irq included, because network work is often not charged to the
//! process that caused it).

use wirerate_core::evidence::CoreLoad;
use wirerate_core::result::CpuSide;

/// User and system seconds of the calling thread, and its scheduler statistics: time on
/// a CPU and time runnable but waiting for one.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ThreadTimes {
    pub user_s: f64,
    pub sys_s: f64,
    pub run_s: Option<f64>,
    pub wait_s: Option<f64>,
    /// Times the thread went to sleep (voluntary context switches, [`crate::sched`]).
    pub sleeps: Option<u64>,
    /// The one CPU the thread may run on, when its affinity holds one ([`crate::sched`]).
    pub pinned_cpu: Option<u32>,
}

impl ThreadTimes {
    /// Reads RUSAGE_THREAD, `/proc/thread-self/schedstat` and the thread's sleep count;
    /// zeros if getrusage fails (it cannot for a valid `who`), None for what the kernel
    /// lacks.
    pub fn now() -> ThreadTimes {
        let (run_s, wait_s) = std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|t| parse_schedstat(&t))
            .unzip();
        ThreadTimes {
            run_s,
            wait_s,
            sleeps: crate::sched::thread_sleeps(),
            pinned_cpu: crate::sched::thread_pinned_cpu(),
            ..ThreadTimes::cpu_now()
        }
    }

    /// User and system seconds only: one getrusage call, cheap enough to take per
    /// connection (`now` also reads files). Zeros if getrusage fails.
    pub fn cpu_now() -> ThreadTimes {
        // SAFETY: rusage is plain data (integers and timevals): all zeros is a valid value.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a live, writable rusage that getrusage fills and nothing else holds.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
        if rc != 0 {
            return ThreadTimes::default();
        }
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        ThreadTimes {
            user_s: tv(ru.ru_utime),
            sys_s: tv(ru.ru_stime),
            run_s: None,
            wait_s: None,
            sleeps: None,
            pinned_cpu: None,
        }
    }

    pub fn since(self, earlier: ThreadTimes) -> ThreadTimes {
        let minus = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| (a - b).max(0.0));
        ThreadTimes {
            user_s: (self.user_s - earlier.user_s).max(0.0),
            sys_s: (self.sys_s - earlier.sys_s).max(0.0),
            run_s: minus(self.run_s, earlier.run_s),
            wait_s: minus(self.wait_s, earlier.wait_s),
            sleeps: self
                .sleeps
                .zip(earlier.sleeps)
                .map(|(a, b)| a.saturating_sub(b)),
            // where the thread was allowed to run at the end of the window
            pinned_cpu: self.pinned_cpu,
        }
    }

    /// The scheduler's part, when both figures were read.
    pub fn sched(&self) -> Option<wirerate_core::evidence::SchedTimes> {
        self.run_s
            .zip(self.wait_s)
            .map(|(run_s, wait_s)| wirerate_core::evidence::SchedTimes {
                run_s,
                wait_s,
                sleeps: self.sleeps,
                pinned_cpu: self.pinned_cpu,
            })
    }
}

/// `schedstat` of a thread: nanoseconds on a CPU, nanoseconds waiting on a run queue, and
/// time slices. Returns the first two in seconds.
pub fn parse_schedstat(text: &str) -> Option<(f64, f64)> {
    let mut it = text.split_ascii_whitespace().map(|v| v.parse::<u64>().ok());
    let run = it.next()??;
    let wait = it.next()??;
    Some((run as f64 / 1e9, wait as f64 / 1e9))
}

/// Tick counters of one core (or the total line) from /proc/stat.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoreTicks {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CoreTicks {
    fn total(&self) -> u64 {
        [
            self.user,
            self.nice,
            self.system,
            self.idle,
            self.iowait,
            self.irq,
            self.softirq,
            self.steal,
        ]
        .iter()
        .fold(0u64, |t, x| t.saturating_add(*x))
    }

    fn busy(&self) -> u64 {
        self.total()
            .saturating_sub(self.idle)
            .saturating_sub(self.iowait)
    }

    fn delta(&self, earlier: &CoreTicks) -> CoreTicks {
        CoreTicks {
            user: self.user.saturating_sub(earlier.user),
            nice: self.nice.saturating_sub(earlier.nice),
            system: self.system.saturating_sub(earlier.system),
            idle: self.idle.saturating_sub(earlier.idle),
            iowait: self.iowait.saturating_sub(earlier.iowait),
            irq: self.irq.saturating_sub(earlier.irq),
            softirq: self.softirq.saturating_sub(earlier.softirq),
            steal: self.steal.saturating_sub(earlier.steal),
        }
    }
}

/// A snapshot of /proc/stat: the total line and each core.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatSnapshot {
    pub total: CoreTicks,
    pub cores: Vec<(u32, CoreTicks)>,
}

/// Parses the text of /proc/stat. Lines it does not understand are skipped.
pub fn parse_proc_stat(text: &str) -> Option<StatSnapshot> {
    let mut snap = StatSnapshot::default();
    let mut have_total = false;
    for line in text.lines() {
        let mut parts = line.split_ascii_whitespace();
        let Some(name) = parts.next() else { continue };
        let Some(rest) = name.strip_prefix("cpu") else {
            continue;
        };
        let v: Vec<u64> = parts.take(8).filter_map(|x| x.parse().ok()).collect();
        if v.len() < 4 {
            continue;
        }
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        let t = CoreTicks {
            user: at(0),
            nice: at(1),
            system: at(2),
            idle: at(3),
            iowait: at(4),
            irq: at(5),
            softirq: at(6),
            steal: at(7),
        };
        if rest.is_empty() {
            snap.total = t;
            have_total = true;
        } else if let Ok(n) = rest.parse::<u32>() {
            snap.cores.push((n, t));
        }
    }
    have_total.then_some(snap)
}

/// Reads /proc/stat now; None where it cannot be read.
pub fn stat_snapshot() -> Option<StatSnapshot> {
    parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// The host's CPU over a window, from two snapshots.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SystemCpu {
    pub system_percent: f64,
    pub softirq_percent: f64,
    pub steal_percent: f64,
    pub busiest_core_percent: f64,
    pub busiest_core: u32,
    pub cores: u32,
}

pub fn system_cpu(before: &StatSnapshot, after: &StatSnapshot) -> Option<SystemCpu> {
    let d = after.total.delta(&before.total);
    let total = d.total();
    if total == 0 {
        return None;
    }
    let pct = |x: u64| x as f64 * 100.0 / total as f64;
    let mut busiest = (0u32, 0.0f64);
    for (n, a) in &after.cores {
        if let Some((_, b)) = before.cores.iter().find(|(m, _)| m == n) {
            let dc = a.delta(b);
            if dc.total() > 0 {
                let p = dc.busy() as f64 * 100.0 / dc.total() as f64;
                if p > busiest.1 {
                    busiest = (*n, p);
                }
            }
        }
    }
    Some(SystemCpu {
        system_percent: pct(d.busy()),
        softirq_percent: pct(d.softirq + d.irq),
        steal_percent: pct(d.steal),
        busiest_core_percent: busiest.1,
        busiest_core: busiest.0,
        cores: after.cores.len() as u32,
    })
}

/// Each core's time over a window split by kind of work, shares 0–100 of that core's
/// ticks: user (with nice), system, softirq, irq, steal, idle (with iowait). Cores not in
/// both snapshots, or with no ticks between them, are left out.
pub fn core_loads(before: &StatSnapshot, after: &StatSnapshot) -> Vec<CoreLoad> {
    after
        .cores
        .iter()
        .filter_map(|(n, a)| {
            let (_, b) = before.cores.iter().find(|(m, _)| m == n)?;
            let d = a.delta(b);
            let total = d.total();
            if total == 0 {
                return None;
            }
            let pct = |x: u64| x as f64 * 100.0 / total as f64;
            Some(CoreLoad {
                core: *n,
                user_percent: pct(d.user + d.nice),
                system_percent: pct(d.system),
                softirq_percent: pct(d.softirq),
                irq_percent: pct(d.irq),
                steal_percent: pct(d.steal),
                idle_percent: pct(d.idle + d.iowait),
            })
        })
        .collect()
}

/// Measures one side's CPU over a window: start it when the test starts, finish it when the
/// side's workers have all returned their thread times.
#[derive(Debug, Clone)]
pub struct CpuWindow {
    stat: Option<StatSnapshot>,
}

impl CpuWindow {
    pub fn start() -> CpuWindow {
        CpuWindow {
            stat: stat_snapshot(),
        }
    }

    /// `threads` are the summed thread times of this side; `window_s` the test window.
    pub fn finish(&self, threads: ThreadTimes, window_s: f64) -> CpuSide {
        let sys = self
            .stat
            .as_ref()
            .zip(stat_snapshot())
            .and_then(|(b, a)| system_cpu(b, &a));
        CpuSide {
            user_s: threads.user_s,
            sys_s: threads.sys_s,
            process_percent: if window_s > 0.0 {
                (threads.user_s + threads.sys_s) * 100.0 / window_s
            } else {
                0.0
            },
            system_percent: sys.map(|s| s.system_percent),
            softirq_percent: sys.map(|s| s.softirq_percent),
            steal_percent: sys.map(|s| s.steal_percent),
            busiest_core_percent: sys.map(|s| s.busiest_core_percent),
            busiest_core: sys.map(|s| s.busiest_core),
            cores: sys.map(|s| s.cores),
            bps_per_busy_core: None,
            cycles_per_byte: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "cpu  100 0 50 800 10 5 5 0 0 0\ncpu0 50 0 25 400 5 2 3 0 0 0\ncpu1 50 0 25 400 5 3 2 0 0 0\nintr 1 2 3\n";
    const B: &str = "cpu  200 0 150 850 10 10 25 0 0 0\ncpu0 140 0 95 410 5 4 16 0 0 0\ncpu1 60 0 55 440 5 6 9 0 0 0\n";

    #[test]
    fn system_percent_from_two_snapshots() {
        let a = parse_proc_stat(A).unwrap();
        let b = parse_proc_stat(B).unwrap();
        let s = system_cpu(&a, &b).unwrap();
        // deltas: user 100, system 100, idle 50, irq 5, softirq 20: busy 225 of 275
        assert!((s.system_percent - 225.0 / 275.0 * 100.0).abs() < 1e-9);
        assert!((s.softirq_percent - 25.0 / 275.0 * 100.0).abs() < 1e-9);
        assert_eq!(s.busiest_core, 0);
        // core 0: busy 90+70+2+13 = 175 of 185
        assert!((s.busiest_core_percent - 175.0 / 185.0 * 100.0).abs() < 1e-9);
        assert_eq!(s.cores, 2);
    }

    #[test]
    fn garbage_is_none_not_zero() {
        assert_eq!(parse_proc_stat("nonsense"), None);
        assert_eq!(parse_proc_stat(""), None);
        let a = parse_proc_stat(A).unwrap();
        assert_eq!(system_cpu(&a, &a), None);
    }

    #[test]
    fn schedstat_lines() {
        assert_eq!(
            parse_schedstat("2000000000 500000000 17\n"),
            Some((2.0, 0.5))
        );
        assert_eq!(parse_schedstat("x 1 2"), None);
        assert_eq!(parse_schedstat("5"), None);
    }

    #[test]
    fn thread_times_grow_with_work() {
        let t0 = ThreadTimes::now();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed().as_millis() < 30 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let d = ThreadTimes::now().since(t0);
        assert!(d.user_s + d.sys_s > 0.0);
        if let Some(run) = d.run_s {
            assert!(run > 0.01, "{run}");
        }
    }

    #[test]
    fn per_core_split_sums_to_100() {
        let a = parse_proc_stat(A).unwrap();
        let b = parse_proc_stat(B).unwrap();
        let loads = core_loads(&a, &b);
        assert_eq!(loads.len(), 2);
        // core 0: user 90, system 70, idle 10, irq 2, softirq 13: 185 ticks
        let c0 = loads[0];
        assert_eq!(c0.core, 0);
        assert!((c0.user_percent - 90.0 / 185.0 * 100.0).abs() < 1e-9);
        assert!((c0.softirq_percent - 13.0 / 185.0 * 100.0).abs() < 1e-9);
        assert!((c0.irq_percent - 2.0 / 185.0 * 100.0).abs() < 1e-9);
        assert!((c0.busy_percent() - 175.0 / 185.0 * 100.0).abs() < 1e-9);
        for l in &loads {
            let sum = l.user_percent
                + l.system_percent
                + l.softirq_percent
                + l.irq_percent
                + l.steal_percent
                + l.idle_percent;
            assert!((sum - 100.0).abs() < 1e-9, "{sum}");
        }
        assert!(core_loads(&a, &a).is_empty());
    }

    #[test]
    fn per_core_split_of_this_machine() {
        let a = stat_snapshot().expect("/proc/stat");
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed().as_millis() < 50 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let b = stat_snapshot().expect("/proc/stat");
        let loads = core_loads(&a, &b);
        assert!(!loads.is_empty());
        for l in loads {
            assert!((0.0..=100.0).contains(&l.user_percent));
            assert!((0.0..=100.0).contains(&l.idle_percent));
        }
    }

    #[test]
    fn huge_ticks_do_not_overflow() {
        let t = format!("cpu {m} {m} {m} {m}\ncpu0 {m} {m} {m} {m}\n", m = u64::MAX);
        let a = parse_proc_stat(&t).unwrap();
        let _ = core_loads(&a, &a);
        let _ = system_cpu(&a, &a);
    }
}
