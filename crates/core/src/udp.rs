//! UDP receive accounting, pure: sequence bookkeeping (new, duplicate, out of order), RFC 3550
//! interarrival jitter, and loss that always stays within 0–100 %.

use serde::{Deserialize, Serialize};

/// How far back duplicates are recognised, in sequence numbers.
const WINDOW: u64 = 1 << 16;

/// What became of one received datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    InOrder,
    /// New, but after a higher sequence number had arrived.
    Late,
    Duplicate,
}

/// Per-stream receive statistics. Counters are u64 and never wrap in practice.
#[derive(Debug, Clone)]
pub struct RecvStats {
    pub packets: u64,
    pub duplicates: u64,
    pub out_of_order: u64,
    /// Highest sequence number seen, if any.
    pub max_seq: Option<u64>,
    jitter_s: f64,
    last_transit_s: Option<f64>,
    seen: Vec<u64>,
}

impl Default for RecvStats {
    fn default() -> Self {
        RecvStats {
            packets: 0,
            duplicates: 0,
            out_of_order: 0,
            max_seq: None,
            jitter_s: 0.0,
            last_transit_s: None,
            seen: vec![0; (WINDOW / 64) as usize],
        }
    }
}

impl RecvStats {
    fn bit(&mut self, seq: u64) -> (&mut u64, u64) {
        let i = seq % WINDOW;
        (&mut self.seen[(i / 64) as usize], 1u64 << (i % 64))
    }

    fn clear_range(&mut self, from: u64, to_inclusive: u64) {
        if to_inclusive.saturating_sub(from) >= WINDOW {
            self.seen.iter_mut().for_each(|w| *w = 0);
            return;
        }
        for s in from..=to_inclusive {
            let (w, m) = self.bit(s);
            *w &= !m;
        }
    }

    /// Records a data datagram: its sequence number, the sender's timestamp and the arrival
    /// time on the receiver's clock (any epochs; only differences are used).
    pub fn on_data(&mut self, seq: u64, send_s: f64, arrival_s: f64) -> Arrival {
        let outcome = match self.max_seq {
            None => {
                self.clear_range(0, seq.min(WINDOW - 1));
                self.max_seq = Some(seq);
                Arrival::InOrder
            }
            Some(max) if seq > max => {
                self.clear_range(max + 1, seq);
                self.max_seq = Some(seq);
                Arrival::InOrder
            }
            Some(max) if max - seq >= WINDOW => Arrival::Late,
            Some(_) => {
                let (w, m) = self.bit(seq);
                if *w & m != 0 {
                    Arrival::Duplicate
                } else {
                    Arrival::Late
                }
            }
        };
        match outcome {
            Arrival::Duplicate => {
                self.duplicates += 1;
                return outcome;
            }
            Arrival::Late => self.out_of_order += 1,
            Arrival::InOrder => {}
        }
        let (w, m) = self.bit(seq);
        *w |= m;
        self.packets += 1;
        let transit = arrival_s - send_s;
        if let Some(last) = self.last_transit_s {
            let d = (transit - last).abs();
            self.jitter_s += (d - self.jitter_s) / 16.0;
        }
        self.last_transit_s = Some(transit);
        outcome
    }

    pub fn jitter_ms(&self) -> Option<f64> {
        (self.packets >= 2).then_some(self.jitter_s * 1e3)
    }
}

/// Lost datagrams and the loss share, kept inside 0–100 %: `expected` is what the sender
/// sent (or the sequence span), `received` the unique datagrams that arrived.
pub fn loss(expected: u64, received: u64) -> (u64, f64) {
    let lost = expected.saturating_sub(received);
    let pct = if expected == 0 {
        0.0
    } else {
        lost as f64 * 100.0 / expected as f64
    };
    (lost, pct)
}

/// UDP figures of one stream on one side.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UdpStreamStats {
    /// Sender: datagrams sent. Receiver: unique data datagrams received.
    pub packets: u64,
    pub out_of_order: u64,
    pub duplicates: u64,
    pub jitter_ms: Option<f64>,
    /// Datagrams the kernel dropped on this socket for want of buffer (SO_RXQ_OVFL).
    pub socket_drops: Option<u64>,
    /// Sends refused with ENOBUFS (the sender's own queue was full).
    pub enobufs: u64,
    /// Datagrams from another address or with a wrong token, dropped.
    pub foreign: u64,
}

/// Host-wide UDP counters from /proc/net/snmp over the test, as deltas.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct UdpHostDrops {
    pub in_errors: u64,
    pub rcvbuf_errors: u64,
    pub sndbuf_errors: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reordered_duplicated_and_lost() {
        let mut s = RecvStats::default();
        // 0 1 3 2 3 5: one late (2), one duplicate (3), one missing (4)
        for (i, seq) in [0u64, 1, 3, 2, 3, 5].iter().enumerate() {
            s.on_data(*seq, i as f64, i as f64);
        }
        assert_eq!(s.packets, 5);
        assert_eq!(s.out_of_order, 1);
        assert_eq!(s.duplicates, 1);
        assert_eq!(s.max_seq, Some(5));
        assert_eq!(loss(6, s.packets), (1, 100.0 / 6.0));
    }

    #[test]
    fn loss_stays_in_range_even_with_more_received_than_expected() {
        assert_eq!(loss(10, 12), (0, 0.0));
        assert_eq!(loss(0, 0), (0, 0.0));
        assert_eq!(loss(10, 0), (10, 100.0));
    }

    #[test]
    fn jitter_follows_rfc3550() {
        let mut s = RecvStats::default();
        // constant transit: no jitter
        for i in 0..10 {
            s.on_data(i, i as f64 * 0.001, i as f64 * 0.001 + 0.0005);
        }
        assert!(s.jitter_ms().unwrap().abs() < 1e-9);
        // one datagram 16 ms late moves the estimate by 16/16 = 1 ms
        s.on_data(10, 0.010, 0.010 + 0.0005 + 0.016);
        assert!((s.jitter_ms().unwrap() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn huge_sequence_jumps_and_very_old_datagrams() {
        let mut s = RecvStats::default();
        s.on_data(0, 0.0, 0.0);
        s.on_data(u64::MAX - 1, 0.0, 0.0);
        assert_eq!(s.max_seq, Some(u64::MAX - 1));
        // far older than the window: counted as late, never as a duplicate
        assert_eq!(s.on_data(5, 0.0, 0.0), Arrival::Late);
        assert_eq!(s.on_data(u64::MAX - 1, 0.0, 0.0), Arrival::Duplicate);
        assert_eq!(s.packets, 3);
    }
}
