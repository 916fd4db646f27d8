//! Rate limits for log lines about rejected connections: a prober must not be able to fill
//! the operator's disk. Each source may log a few lines a second; the rest are counted and
//! the count is logged with the next line that is let through.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lines per source per second that are always logged.
pub const LINES_PER_SECOND: u32 = 5;
/// Sources tracked at once; beyond that the table is cleared (a flood of addresses).
const MAX_SOURCES: usize = 4096;

#[derive(Debug, Default)]
pub struct RateLimit {
    by_source: Mutex<HashMap<Option<IpAddr>, Window>>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    start: Instant,
    lines: u32,
    suppressed: u64,
}

impl RateLimit {
    /// Some(suppressed lines so far) when this line may be logged, None when it is counted.
    pub fn admit(&self, from: Option<IpAddr>, now: Instant) -> Option<u64> {
        let mut map = self.by_source.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_SOURCES && !map.contains_key(&from) {
            map.retain(|_, w| now.saturating_duration_since(w.start) < Duration::from_secs(1));
            if map.len() >= MAX_SOURCES {
                map.clear();
            }
        }
        let w = map.entry(from).or_insert(Window {
            start: now,
            lines: 0,
            suppressed: 0,
        });
        if now.saturating_duration_since(w.start) >= Duration::from_secs(1) {
            w.start = now;
            w.lines = 0;
        }
        if w.lines >= LINES_PER_SECOND {
            w.suppressed += 1;
            return None;
        }
        w.lines += 1;
        Some(std::mem::take(&mut w.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_cut_and_counted() {
        let r = RateLimit::default();
        let ip = Some(IpAddr::from([127, 0, 0, 1]));
        let t0 = Instant::now();
        let let_through = (0..100).filter(|_| r.admit(ip, t0).is_some()).count();
        assert_eq!(let_through, LINES_PER_SECOND as usize);
        // another source is not silenced by the first
        assert_eq!(r.admit(Some(IpAddr::from([127, 0, 0, 2])), t0), Some(0));
        assert_eq!(r.admit(ip, t0 + Duration::from_secs(1)), Some(95));
    }
}
