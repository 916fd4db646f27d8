//! Identities: the unique key of a stored run and fresh ids for repeat groups.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The unique key of a run: 128-bit FNV-1a of its full JSON, in hex. The same result always
/// gives the same key, so storing it twice is caught; two real runs differ at least in their
/// start time and counters. Not a defence against anyone forging results.
pub fn run_key(json: &str) -> String {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let h = json
        .bytes()
        .fold(OFFSET, |h, b| (h ^ u128::from(b)).wrapping_mul(PRIME));
    format!("{h:032x}")
}

/// A fresh id for one set of repeated runs: time in microseconds, process id and a counter,
/// so two processes, or two sets in one process, never share one.
pub fn new_group_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let us = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{us:x}-{:x}-{n:x}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_128_known_values() {
        // published FNV-1a 128-bit test vectors
        assert_eq!(run_key(""), "6c62272e07bb014262b821756295c58d");
        assert_eq!(run_key("a"), "d228cb696f1a8caf78912b704e4a8964");
    }

    #[test]
    fn group_ids_differ() {
        assert_ne!(new_group_id(), new_group_id());
    }
}
