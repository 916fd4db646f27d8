//! Random early drop of new connections, as OpenSSH's MaxStartups: beyond `start`
//! connections that have not yet said what they are, a new one is refused with probability
//! `rate` %, rising linearly to 100 % at `full`. A flood cannot hold the pending count at
//! the cap and take every place freed: its own new connections are dropped too, so the
//! count settles below the cap and a legitimate client keeps a chance. Here too: the count
//! of pending connections by source, and the guard that holds a place in it.

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::server::Shared;

/// `START:RATE:FULL` (`serve --max-startups`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Startups {
    pub start: usize,
    /// Percent refused at `start`.
    pub rate: u8,
    pub full: usize,
}

impl Default for Startups {
    fn default() -> Self {
        Startups {
            start: 100,
            rate: 30,
            full: 1000,
        }
    }
}

impl std::fmt::Display for Startups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.start, self.rate, self.full)
    }
}

impl Startups {
    /// `START:RATE:FULL`, or `FULL` alone (no early drop).
    pub fn parse(s: &str) -> Result<Startups, StartupsError> {
        let bad = || StartupsError::Shape(s.to_string());
        let n: Vec<usize> = s
            .split(':')
            .map(|p| p.trim().parse().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        let st = match n[..] {
            [full] => Startups {
                start: full,
                rate: 100,
                full,
            },
            [start, rate, full] => Startups {
                start,
                rate: u8::try_from(rate)
                    .ok()
                    .filter(|r| *r <= 100)
                    .ok_or(StartupsError::Rate)?,
                full,
            },
            _ => return Err(bad()),
        };
        if st.full == 0 || st.start > st.full {
            return Err(StartupsError::Order(s.to_string()));
        }
        Ok(st)
    }

    /// The chance (0 to 1) that a new connection is refused with `pending` already waiting.
    pub fn drop_chance(&self, pending: usize) -> f64 {
        if pending >= self.full {
            return 1.0;
        }
        if pending < self.start {
            return 0.0;
        }
        let r = f64::from(self.rate) / 100.0;
        let span = (self.full - self.start) as f64;
        r + (1.0 - r) * (pending - self.start) as f64 / span
    }

    /// Whether to refuse a new connection with `pending` waiting; `roll` is uniform in [0, 1).
    pub fn refuses(&self, pending: usize, roll: f64) -> bool {
        roll < self.drop_chance(pending)
    }
}

/// Pending connections the running test's own client may have beyond the per-address
/// limit: every data stream of the largest test at once.
const PENDING_FOR_THE_TESTER: usize = 2 * wirerate_core::spec::limits::MAX_PARALLEL_BULK as usize;

impl Shared {
    /// Counts a new connection as pending, unless its source or the server has too many:
    /// beyond the start of `--max-startups`, a new connection is refused at random (the
    /// running test's own client excepted, whose data streams arrive in bursts).
    pub(crate) fn claim_pending(
        self: &Arc<Self>,
        ip: Option<IpAddr>,
    ) -> Result<Pending, &'static str> {
        let tester = ip.is_some() && self.active().as_ref().is_some_and(|a| a.peer_ip == ip);
        if !tester && self.late.blocked(ip, Instant::now()).is_some() {
            return Err(HELD_TO_THE_DEADLINE);
        }
        let before = self.pending.fetch_add(1, Ordering::SeqCst);
        let startups = &self.cfg.startups;
        if before >= startups.full
            || (!tester
                && before >= startups.start
                && startups.refuses(before, crate::startups::roll()))
        {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            return Err("too many pending connections");
        }
        if let Some(ip) = ip {
            let limit =
                self.cfg.max_pending_per_source + if tester { PENDING_FOR_THE_TESTER } else { 0 };
            let mut by_ip = self.pending_by_ip.lock().unwrap_or_else(|p| p.into_inner());
            let n = by_ip.entry(crate::limits::source_of(ip)).or_insert(0);
            if *n >= limit {
                drop(by_ip);
                self.pending.fetch_sub(1, Ordering::SeqCst);
                return Err("too many pending connections from your address");
            }
            *n += 1;
        }
        Ok(Pending {
            shared: self.clone(),
            ip,
            since: Instant::now(),
        })
    }
}

/// Why a source is refused whose connections keep waiting until their handshake deadline.
pub(crate) const HELD_TO_THE_DEADLINE: &str =
    "too many pending connections from your address reached the handshake timeout; retry in a minute";

/// A connection counted as pending until it is routed (dropped). One still pending at its
/// handshake deadline (silent, crawling, or a login that went no further) is a strike
/// against its source: a source with 5 in a minute is refused for the rest of it
/// (`crate::strikes`), so addresses that hold places to the deadline and reconnect at once
/// cannot keep the count of pending connections at the cap.
pub(crate) struct Pending {
    shared: Arc<Shared>,
    pub(crate) ip: Option<IpAddr>,
    since: Instant,
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.since.elapsed() >= self.shared.cfg.handshake {
            self.shared.late.strike(self.ip, Instant::now());
        }
        self.shared.pending.fetch_sub(1, Ordering::SeqCst);
        if let Some(ip) = self.ip.map(crate::limits::source_of) {
            let mut by_ip = self
                .shared
                .pending_by_ip
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if let Some(n) = by_ip.get_mut(&ip) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    by_ip.remove(&ip);
                }
            }
        }
    }
}

/// A uniform number in [0, 1) from the kernel's random source (1 if it fails: admit).
pub(crate) fn roll() -> f64 {
    let mut b = [0u8; 8];
    if wirerate_engine::net::fill_random(&mut b).is_err() {
        return 1.0;
    }
    (u64::from_le_bytes(b) >> 11) as f64 / (1u64 << 53) as f64
}

/// Why a `--max-startups` value cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartupsError {
    #[error("'{0}' is not START:RATE:FULL (e.g. 100:30:1000) or FULL")]
    Shape(String),
    #[error("RATE is a percentage, 0 to 100")]
    Rate,
    #[error("'{0}': FULL must be at least 1 and START at most FULL")]
    Order(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_triple_is_read_and_checked() {
        let s = Startups::parse("10:30:100").unwrap();
        assert_eq!((s.start, s.rate, s.full), (10, 30, 100));
        assert_eq!(s.to_string(), "10:30:100");
        assert_eq!(Startups::parse("50").unwrap().drop_chance(49), 0.0);
        for bad in ["", "a:b:c", "10:30", "10:101:100", "200:30:100", "0"] {
            assert!(Startups::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_chance_rises_from_rate_at_start_to_all_at_full() {
        let s = Startups::parse("10:30:100").unwrap();
        assert_eq!(s.drop_chance(9), 0.0);
        assert!((s.drop_chance(10) - 0.3).abs() < 1e-9);
        assert!((s.drop_chance(55) - 0.65).abs() < 1e-9);
        assert_eq!(s.drop_chance(100), 1.0);
        // the kernel's rolls refuse about as often as the chance says
        let refused = (0..10_000).filter(|_| s.refuses(55, roll())).count();
        assert!((6000..=7000).contains(&refused), "{refused} of 10000");
    }
}
