//! Plain figures of one classic ttcp transfer: what the engine measured and the ttcp
//! renderer prints. The clock and resource-usage readings are kept as the seconds and
//! microseconds the operating system gave, because the classic report does its arithmetic
//! on those parts (it truncates each part separately), and old logs carry that arithmetic.
//!
//! Promise: data and arithmetic only, no IO, no clock. The arithmetic is ttcp's, quirks
//! included (see `figures` and `usage_figures`); the ttcp renderer only formats it.

use serde::{Deserialize, Serialize};

/// A time split into whole seconds and microseconds, like a C `struct timeval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Timeval {
    pub sec: i64,
    pub usec: i64,
}

impl Timeval {
    /// Splits non-negative seconds into whole seconds and microseconds, rounded to the
    /// nearest microsecond; negative, NaN and infinite inputs give zero.
    pub fn from_secs_f64(s: f64) -> Timeval {
        let s = if s.is_finite() && s > 0.0 { s } else { 0.0 };
        let total_us = (s * 1e6).round() as i64;
        Timeval {
            sec: total_us / 1_000_000,
            usec: total_us % 1_000_000,
        }
    }

    pub fn as_secs_f64(self) -> f64 {
        self.sec as f64 + self.usec as f64 / 1e6
    }
}

/// One reading of the process's resource usage (`getrusage(RUSAGE_SELF)`), in the
/// kernel's own units: `maxrss_kib` in KiB as Linux reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub user: Timeval,
    pub sys: Timeval,
    pub maxrss_kib: i64,
    pub ixrss: i64,
    pub idrss: i64,
    pub isrss: i64,
    pub minor_faults: i64,
    pub major_faults: i64,
    pub voluntary_csw: i64,
    pub involuntary_csw: i64,
}

/// A clock reading and a usage reading taken together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Sample {
    pub clock: Timeval,
    pub usage: Usage,
}

/// What one ttcp side counted between its start and end samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Transfer {
    /// Payload bytes moved (sentinel datagrams not included).
    pub bytes: u64,
    /// Every read, write, sendto and recvfrom on the network, sentinels included.
    pub calls: u64,
    pub start: Sample,
    pub end: Sample,
}

/// The unit of ttcp's rate figure, chosen by its `-f` letter. Every prefix is a power of
/// 1024, for bits as well as bytes (ttcp never had a decimal unit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum RateUnit {
    Kbit,
    #[default]
    KByte,
    Mbit,
    MByte,
    Gbit,
    GByte,
}

impl RateUnit {
    /// The unit for a `-f` letter: `k`/`m`/`g` bits, `K`/`M`/`G` bytes.
    pub fn from_letter(c: char) -> Option<RateUnit> {
        Some(match c {
            'k' => RateUnit::Kbit,
            'K' => RateUnit::KByte,
            'm' => RateUnit::Mbit,
            'M' => RateUnit::MByte,
            'g' => RateUnit::Gbit,
            'G' => RateUnit::GByte,
            _ => return None,
        })
    }

    /// The name ttcp prints after the number.
    pub fn name(self) -> &'static str {
        match self {
            RateUnit::Kbit => "Kbit",
            RateUnit::KByte => "KB",
            RateUnit::Mbit => "Mbit",
            RateUnit::MByte => "MB",
            RateUnit::Gbit => "Gbit",
            RateUnit::GByte => "GB",
        }
    }

    /// Bytes per second expressed in this unit: ×8 for bits, ÷1024 per prefix step.
    pub fn scale(self, bytes_per_s: f64) -> f64 {
        let (bits, power) = match self {
            RateUnit::Kbit => (true, 1),
            RateUnit::KByte => (false, 1),
            RateUnit::Mbit => (true, 2),
            RateUnit::MByte => (false, 2),
            RateUnit::Gbit => (true, 3),
            RateUnit::GByte => (false, 3),
        };
        let v = if bits { bytes_per_s * 8.0 } else { bytes_per_s };
        v / 1024f64.powi(power)
    }
}

/// The figures of ttcp's rate and calls lines, with ttcp's arithmetic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    /// Real seconds, at least 0.001.
    pub real_s: f64,
    /// User + system seconds, at least 0.00001.
    pub cpu_s: f64,
    pub bytes_per_real_s: f64,
    pub bytes_per_cpu_s: f64,
    /// 1024 × real seconds ÷ calls: ttcp's factor is 1024, not 1000 (infinite for 0 calls).
    pub msec_per_call: f64,
    pub calls_per_s: f64,
}

/// `t1 - t0` with a borrow from the seconds, as a C `timeval` subtraction.
pub fn tv_sub(t1: Timeval, t0: Timeval) -> Timeval {
    let mut d = Timeval {
        sec: t1.sec - t0.sec,
        usec: t1.usec - t0.usec,
    };
    if d.usec < 0 {
        d.sec -= 1;
        d.usec += 1_000_000;
    }
    d
}

/// Hundredths of a second between two readings, the seconds and microsecond parts truncated
/// separately: ttcp computes both its CPU and its elapsed hundredths this way.
fn hundredths(t1: Timeval, t0: Timeval) -> i64 {
    (t1.sec - t0.sec) * 100 + (t1.usec - t0.usec) / 10_000
}

/// The rate and calls figures of a transfer.
pub fn figures(t: &Transfer) -> Figures {
    let real = tv_sub(t.end.clock, t.start.clock).as_secs_f64();
    let real_s = if real <= 0.0 { 0.001 } else { real };
    let (u0, u1) = (t.start.usage, t.end.usage);
    let cpu = tv_sub(u1.user, u0.user).as_secs_f64() + tv_sub(u1.sys, u0.sys).as_secs_f64();
    let cpu_s = if cpu < 0.00001 { 0.00001 } else { cpu };
    let bytes = t.bytes as f64;
    let calls = t.calls as f64;
    Figures {
        real_s,
        cpu_s,
        bytes_per_real_s: bytes / real_s,
        bytes_per_cpu_s: bytes / cpu_s,
        msec_per_call: 1024.0 * real_s / calls,
        calls_per_s: calls / real_s,
    }
}

/// The figures of ttcp's usage line (`%U %S %E %P %X %D %M %F %R %C`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UsageFigures {
    /// User and system time in tenths of a second, truncated.
    pub user_tenths: i64,
    pub sys_tenths: i64,
    /// Elapsed whole seconds, truncated.
    pub elapsed_s: i64,
    /// CPU hundredths × 100 ÷ elapsed hundredths, in integers.
    pub percent: i64,
    /// Average shared text and data+stack sizes per CPU hundredth (0 on Linux).
    pub text: i64,
    pub data: i64,
    /// The peak resident size as the kernel gives it, halved.
    pub maxrss_half: i64,
    pub major_faults: i64,
    pub minor_faults: i64,
    pub voluntary_csw: i64,
    pub involuntary_csw: i64,
}

/// The usage-line figures between two samples.
pub fn usage_figures(start: &Sample, end: &Sample) -> UsageFigures {
    let (r0, r1) = (&start.usage, &end.usage);
    let cpu = hundredths(r1.user, r0.user) + hundredths(r1.sys, r0.sys);
    let wall = hundredths(end.clock, start.clock);
    let tenths = |t: Timeval| t.sec * 10 + t.usec / 100_000;
    let per_tick = |d: i64| if cpu == 0 { 0 } else { d / cpu };
    UsageFigures {
        user_tenths: tenths(tv_sub(r1.user, r0.user)),
        sys_tenths: tenths(tv_sub(r1.sys, r0.sys)),
        elapsed_s: wall / 100,
        percent: cpu * 100 / if wall != 0 { wall } else { 1 },
        text: per_tick(r1.ixrss - r0.ixrss),
        data: per_tick(r1.idrss + r1.isrss - (r0.idrss + r0.isrss)),
        maxrss_half: r1.maxrss_kib / 2,
        major_faults: r1.major_faults - r0.major_faults,
        minor_faults: r1.minor_faults - r0.minor_faults,
        voluntary_csw: r1.voluntary_csw - r0.voluntary_csw,
        involuntary_csw: r1.involuntary_csw - r0.involuntary_csw,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeval_splits_and_joins() {
        let t = Timeval::from_secs_f64(5.399206);
        assert_eq!(t.sec, 5);
        assert!((t.usec - 399_206).abs() <= 1);
        assert_eq!(Timeval::from_secs_f64(-1.0), Timeval::default());
        assert_eq!(Timeval::from_secs_f64(f64::NAN), Timeval::default());
        let half = Timeval {
            sec: 2,
            usec: 500_000,
        };
        assert!((half.as_secs_f64() - 2.5).abs() < 1e-12);
    }

    fn at(sec: i64, usec: i64) -> Timeval {
        Timeval { sec, usec }
    }

    #[test]
    fn calls_use_1024_and_times_are_clamped() {
        let mut t = Transfer {
            bytes: 16_777_216,
            calls: 2048,
            ..Transfer::default()
        };
        t.end.clock = at(1, 580_000);
        let f = figures(&t);
        assert!((f.msec_per_call - 1024.0 * 1.58 / 2048.0).abs() < 1e-12);
        assert!((f.calls_per_s - 2048.0 / 1.58).abs() < 1e-9);
        assert_eq!(f.cpu_s, 0.00001);
        let empty = figures(&Transfer::default());
        assert_eq!(empty.real_s, 0.001);
        assert!(empty.msec_per_call.is_infinite());
        assert_eq!(empty.calls_per_s, 0.0);
    }

    #[test]
    fn usage_parts_truncate_separately() {
        let mut start = Sample::default();
        start.usage.user = at(1, 995_000);
        let mut end = start;
        end.usage.user = at(2, 3_000);
        end.usage.sys = at(0, 190_000);
        end.clock = at(3725, 990_000);
        end.usage.maxrss_kib = 4001;
        let u = usage_figures(&start, &end);
        // 8 ms of user time: 0 tenths, but 1 hundredth when the parts are cut apart
        assert_eq!((u.user_tenths, u.sys_tenths), (0, 1));
        assert_eq!(u.elapsed_s, 3725);
        assert_eq!(u.percent, 20 * 100 / 372_599);
        assert_eq!(u.maxrss_half, 2000);
        assert_eq!(tv_sub(at(2, 3_000), at(1, 995_000)), at(0, 8_000));
    }

    #[test]
    fn rate_units_are_1024_based() {
        let mib = 1_048_576.0;
        assert_eq!(RateUnit::KByte.scale(mib), 1024.0);
        assert_eq!(RateUnit::Kbit.scale(mib), 8192.0);
        assert_eq!(RateUnit::Mbit.scale(mib), 8.0);
        assert_eq!(RateUnit::GByte.scale(mib * 1024.0), 1.0);
        assert_eq!(RateUnit::from_letter('g'), Some(RateUnit::Gbit));
        assert_eq!(RateUnit::from_letter('x'), None);
        assert_eq!(RateUnit::default().name(), "KB");
    }
}
