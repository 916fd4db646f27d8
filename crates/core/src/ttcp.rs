//! Plain figures of one classic ttcp transfer: what the engine measured and the ttcp
//! renderer prints. The clock and resource-usage readings are kept as the seconds and
//! microseconds the operating system gave, because the classic report does its arithmetic
//! on those parts (it truncates each part separately), and old logs carry that arithmetic.
//!
//! Promise: data only, no IO, no clock.

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
        assert!(
            (Timeval {
                sec: 2,
                usec: 500_000
            }
            .as_secs_f64()
                - 2.5)
                .abs()
                < 1e-12
        );
    }
}
