//! Other traffic on the test's interface: its counters cover everything that crossed it in
//! the window, so when it carried far more than the test moved, its packets, drops and
//! errors are not the test's alone, and the report says so.

use super::rules::{Analysis, OTHER_TRAFFIC_RATIO, PACKET_HEADER_ALLOWANCE};
use super::text::size;
use super::view::{self, Host};
use crate::RunResult;

/// What the test's streams moved, both directions, warm-up included (the interface
/// counters cover the whole test).
fn test_bytes(r: &RunResult) -> u64 {
    r.streams
        .iter()
        .map(|s| s.sender.bytes.max(s.receiver.bytes))
        .fold(0u64, u64::saturating_add)
}

/// A note for each interface that carried more than [`OTHER_TRAFFIC_RATIO`] times the
/// test's bytes, beyond a generous header allowance per packet (so small writes and their
/// headers never look like other traffic).
pub(super) fn note(r: &RunResult, a: &mut Analysis) {
    if !r.spec.test.is_stream() {
        return;
    }
    let moved = test_bytes(r);
    if moved == 0 {
        return;
    }
    let hosts: &[Host] = if view::same_host(r) {
        &[Host::Client]
    } else {
        &[Host::Client, Host::Server]
    };
    for &h in hosts {
        for i in &h.env(r).interfaces {
            let Some(bytes) = i.rx_bytes.max(i.tx_bytes) else {
                continue;
            };
            let packets = i.rx_packets.max(i.tx_packets).unwrap_or(0);
            let payload = bytes.saturating_sub(packets.saturating_mul(PACKET_HEADER_ALLOWANCE));
            if payload as f64 > OTHER_TRAFFIC_RATIO * moved as f64 {
                a.note(format!(
                    "{}: {} carried {} while the test moved {} ({:.0}×): other traffic shared \
                     the interface, so its packet, drop and error counts are not the test's \
                     alone",
                    h.name(),
                    // a peer's string: printable characters only, never raw to a terminal
                    i.name
                        .chars()
                        .filter(char::is_ascii_graphic)
                        .take(32)
                        .collect::<String>(),
                    size(bytes as f64),
                    size(moved as f64),
                    bytes as f64 / moved as f64
                ));
            }
        }
    }
}
