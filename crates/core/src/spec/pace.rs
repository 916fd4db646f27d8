//! The rules of paced tests, defined once: the size of a UDP test's default datagram, which
//! fits the asked rate as well as the path, the least time a test must last for one datagram
//! to go out, and how long a paced stream may go without moving a byte before it counts as
//! stalled.

use serde::{Deserialize, Serialize};

use super::{Protocol, TestSpec, UDP_MIN_LEN};

/// A UDP test's default datagram carries at most a hundredth of a second of its stream's
/// rate, so a paced stream sends at least this many datagrams a second: enough for loss,
/// reordering and jitter to mean something in every one-second interval, and for a short
/// test to send more than a handful.
pub const DEFAULT_DATAGRAMS_PER_S: f64 = 100.0;

/// The smallest default datagram, however slow the rate: wirerate's header and a little
/// payload. Below a rate of 51.2 kbit/s a stream of these sends fewer than 100 a second.
pub const MIN_DEFAULT_DATAGRAM: u64 = 64;

/// The largest UDP payload, on any path.
pub const MAX_DATAGRAM: u64 = 65_507;

/// What a paced TCP stream moves at once: the kernel paces whole offload segments, up to
/// 64 KiB each (one 65 483-byte segment every 2.6 s at 200 kbit/s over loopback), so a
/// stream may be silent for that long between two arrivals while keeping its pace.
pub const TCP_PACED_BURST: u64 = 65_536;

/// How many of its own gaps a paced stream may be silent before it counts as stalled.
const GAPS_BEFORE_STALL: f64 = 3.0;

/// Why a UDP test's datagram has its size when the user gave none (`-l`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DatagramRule {
    /// The largest that crosses the path unfragmented.
    Path,
    /// Smaller than the path allows, so the stream's rate sends
    /// [`DEFAULT_DATAGRAMS_PER_S`] a second (or [`MIN_DEFAULT_DATAGRAM`] at the slowest).
    Rate,
}

/// How a UDP test's default datagram was chosen: the rule that decided and the payload the
/// path carries unfragmented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatagramChoice {
    pub rule: DatagramRule,
    pub path_bytes: u32,
}

impl DatagramChoice {
    /// Words for the text header.
    pub fn describe(&self) -> String {
        match self.rule {
            DatagramRule::Path => "default: the largest the path carries".into(),
            DatagramRule::Rate => format!(
                "default: 1/{DEFAULT_DATAGRAMS_PER_S:.0} s of the rate, {MIN_DEFAULT_DATAGRAM} B at least; the path carries {} B",
                self.path_bytes
            ),
        }
    }
}

/// The default datagram of a UDP stream paced at `rate_bps` (None: unpaced) over a path that
/// carries `path_bytes` unfragmented: the path's size, cut to a hundredth of a second of the
/// rate, never under [`MIN_DEFAULT_DATAGRAM`].
pub fn default_datagram(path_bytes: u64, rate_bps: Option<f64>) -> (u64, DatagramChoice) {
    let path = path_bytes.clamp(UDP_MIN_LEN, MAX_DATAGRAM);
    let by_rate = rate_bps
        .filter(|r| r.is_finite() && *r > 0.0)
        .map(|r| ((r / 8.0 / DEFAULT_DATAGRAMS_PER_S) as u64).max(MIN_DEFAULT_DATAGRAM));
    let (len, rule) = match by_rate {
        Some(l) if l < path => (l, DatagramRule::Rate),
        _ => (path, DatagramRule::Path),
    };
    let choice = DatagramChoice {
        rule,
        path_bytes: path as u32,
    };
    (len, choice)
}

impl TestSpec {
    /// Seconds one paced unit takes at a stream's rate: a UDP datagram, or the burst a paced
    /// TCP stream moves at once ([`TCP_PACED_BURST`], or the whole write when smaller);
    /// None when the streams are not paced.
    pub fn pace_gap_s(&self) -> Option<f64> {
        let rate = self.rate_bps.filter(|r| r.is_finite() && *r > 0.0)?;
        let unit = match self.protocol {
            Protocol::Udp => self.len_bytes,
            Protocol::Tcp => self.len_bytes.min(TCP_PACED_BURST),
        };
        Some(unit as f64 * 8.0 / rate)
    }

    /// Seconds a stream may go without moving a byte before it counts as stalled, given the
    /// idle timeout: the idle timeout, or three gaps of a slowly paced stream (at most an
    /// hour). A stream keeping its pace is never stalled; one that stops still is.
    pub fn stall_after_s(&self, idle_s: f64) -> f64 {
        let gaps = self
            .pace_gap_s()
            .map_or(0.0, |g| (GAPS_BEFORE_STALL * g).min(3600.0));
        idle_s.max(gaps)
    }

    /// Whether a timed, paced UDP stream has time for its first datagram: each datagram
    /// goes out when its slot at the rate ends, so a test shorter than one slot would send
    /// nothing. An error says what to change.
    pub fn check_datagram_fits_time(&self) -> Result<(), DatagramTooSlow> {
        let (Protocol::Udp, Some(seconds), Some(gap)) =
            (self.protocol, self.send_seconds(), self.pace_gap_s())
        else {
            return Ok(());
        };
        if gap > seconds {
            return Err(DatagramTooSlow {
                len_bytes: self.len_bytes,
                gap_s: gap,
                rate_bps: self.rate_bps.unwrap_or(0.0),
                seconds,
            });
        }
        Ok(())
    }
}

/// A timed, paced UDP test shorter than the slot of one datagram: it would send nothing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "a {len_bytes}-byte datagram takes {gap_s:.2} s at {}, longer than the {seconds} s test: nothing would be sent",
    crate::units::format_bps(*rate_bps)
)]
pub struct DatagramTooSlow {
    pub len_bytes: u64,
    pub gap_s: f64,
    pub rate_bps: f64,
    pub seconds: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::End;

    #[test]
    fn the_default_datagram_fits_the_rate_and_the_path() {
        // the path's size where the rate sends 100 a second of it
        assert_eq!(default_datagram(1472, Some(500e6)).0, 1472);
        assert_eq!(default_datagram(1472, None).0, 1472);
        assert_eq!(default_datagram(1472, None).1.rule, DatagramRule::Path);
        // loopback at the default 1 Mbit/s: 1250 B, 100 a second, not 65 507 B at 1.9
        let (len, c) = default_datagram(65_507, Some(1e6));
        assert_eq!(len, 1250);
        assert_eq!(c.rule, DatagramRule::Rate);
        assert_eq!(c.path_bytes, 65_507);
        assert_eq!(default_datagram(65_507, Some(200e3)).0, 250);
        // the floor at the slowest rates
        assert_eq!(default_datagram(65_507, Some(10e3)).0, MIN_DEFAULT_DATAGRAM);
        assert_eq!(default_datagram(65_507, Some(1.0)).0, MIN_DEFAULT_DATAGRAM);
        // a path that says nonsense still gives a datagram that carries the header
        assert_eq!(default_datagram(0, None).0, UDP_MIN_LEN);
        assert_eq!(default_datagram(1 << 20, None).0, MAX_DATAGRAM);
        assert!(c.describe().contains("65507 B"), "{}", c.describe());
    }

    fn paced(protocol: Protocol, len_bytes: u64, rate: f64) -> TestSpec {
        TestSpec {
            protocol,
            len_bytes,
            rate_bps: Some(rate),
            end: End::Time { seconds: 2.0 },
            ..TestSpec::default()
        }
    }

    #[test]
    fn a_paced_stream_may_be_silent_for_three_of_its_gaps() {
        // 1 MiB writes at 20 kbit/s: 64 KiB bursts 26.2 s apart
        let tcp = paced(Protocol::Tcp, 1 << 20, 20e3);
        assert!((tcp.pace_gap_s().unwrap() - 26.2144).abs() < 1e-9);
        assert!((tcp.stall_after_s(10.0) - 78.6432).abs() < 1e-9);
        // a fast pace leaves the idle timeout in charge; no pace has no gap
        assert_eq!(paced(Protocol::Tcp, 1 << 20, 1e9).stall_after_s(10.0), 10.0);
        assert_eq!(TestSpec::default().pace_gap_s(), None);
        assert_eq!(TestSpec::default().stall_after_s(2.5), 2.5);
        // UDP: one datagram; never more than an hour
        let udp = paced(Protocol::Udp, 1000, 8000.0);
        assert_eq!(udp.pace_gap_s(), Some(1.0));
        assert_eq!(paced(Protocol::Udp, 65_507, 1.0).stall_after_s(1.0), 3600.0);
    }

    #[test]
    fn a_test_shorter_than_one_datagram_slot_is_refused() {
        let e = paced(Protocol::Udp, 65_507, 200e3)
            .check_datagram_fits_time()
            .unwrap_err()
            .to_string();
        assert!(e.contains("2.62 s") && e.contains("nothing would"), "{e}");
        assert!(paced(Protocol::Udp, 250, 200e3)
            .check_datagram_fits_time()
            .is_ok());
        // unpaced, TCP and tests that end by count have no slot to miss
        let mut unpaced = paced(Protocol::Udp, 65_507, 200e3);
        unpaced.rate_bps = None;
        assert!(unpaced.check_datagram_fits_time().is_ok());
        assert!(paced(Protocol::Tcp, 1 << 20, 10.0)
            .check_datagram_fits_time()
            .is_ok());
        let mut count = paced(Protocol::Udp, 65_507, 200e3);
        count.end = End::Bytes { bytes: 1 << 20 };
        assert!(count.check_datagram_fits_time().is_ok());
    }
}
