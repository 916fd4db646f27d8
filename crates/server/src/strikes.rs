//! Strikes against a source address in a window of time: failed logins, and connections
//! held to their handshake deadline. A source with [`MAX_STRIKES`] within [`WINDOW`] is
//! refused until the window that began with its first strike has passed. An IPv6 /64 is one
//! source (`limits::source_of`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Strikes from one source allowed within [`WINDOW`]; more are refused until it has passed.
pub const MAX_STRIKES: u32 = 5;
pub const WINDOW: Duration = Duration::from_secs(60);
/// Sources remembered at most (a flood of many addresses forgets the oldest windows).
const MAX_SOURCES: usize = 4096;

/// Strikes by source: when the window began, and how many.
#[derive(Debug, Default)]
pub struct Strikes(Mutex<HashMap<IpAddr, (Instant, u32)>>);

impl Strikes {
    /// None if `ip` may go on; else how long until it may.
    pub fn blocked(&self, ip: Option<IpAddr>, now: Instant) -> Option<Duration> {
        let ip = crate::limits::source_of(ip?);
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let &(start, n) = map.get(&ip)?;
        let left = WINDOW.saturating_sub(now.saturating_duration_since(start));
        (n >= MAX_STRIKES && !left.is_zero()).then_some(left)
    }

    /// Counts a strike against `ip`.
    pub fn strike(&self, ip: Option<IpAddr>, now: Instant) {
        let Some(ip) = ip.map(crate::limits::source_of) else {
            return;
        };
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_SOURCES && !map.contains_key(&ip) {
            map.retain(|_, (start, _)| now.saturating_duration_since(*start) < WINDOW);
            if map.len() >= MAX_SOURCES {
                map.clear();
            }
        }
        let e = map.entry(ip).or_insert((now, 0));
        if now.saturating_duration_since(e.0) >= WINDOW {
            *e = (now, 0);
        }
        e.1 += 1;
    }
}
