//! Which iperf3 stream is which. iperf3 numbers streams in the order the client opens them
//! (and the server accepts them): 1, then 3, 4, 5 … (2 is never used). A client opens its
//! sending streams first, then its receiving ones; wirerate names each stream by its flow and
//! its index within the flow.

use wirerate_core::spec::{Direction, Flow};

/// Which side of the test a report comes from (the rule lives in `core`).
pub use wirerate_core::spec::Side;

/// One stream: its iperf3 id, its flow and its index within that flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub iperf_id: u32,
    pub flow: Flow,
    pub index: u32,
}

/// Every stream of a test, in the order the client opens them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamMap {
    pub entries: Vec<Entry>,
}

/// iperf3's id of the `n`-th stream opened (from 0).
pub fn iperf_id(n: usize) -> u32 {
    let n = u32::try_from(n).unwrap_or(u32::MAX - 2);
    if n == 0 {
        1
    } else {
        n + 2
    }
}

impl StreamMap {
    pub fn new(direction: Direction, parallel: u32) -> StreamMap {
        // the stream order lists client-to-server first, which is the client's sending side
        let entries = direction
            .stream_order(parallel)
            .enumerate()
            .map(|(n, (flow, index))| Entry {
                iperf_id: iperf_id(n),
                flow,
                index,
            })
            .collect();
        StreamMap { entries }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn by_id(&self, iperf_id: u32) -> Option<Entry> {
        self.entries
            .iter()
            .copied()
            .find(|e| e.iperf_id == iperf_id)
    }

    pub fn by_stream(&self, flow: Flow, index: u32) -> Option<Entry> {
        self.entries
            .iter()
            .copied()
            .find(|e| e.flow == flow && e.index == index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirerate_core::side_report::Role;

    #[test]
    fn ids_skip_two_and_senders_come_first() {
        let m = StreamMap::new(Direction::Bidir, 2);
        let ids: Vec<u32> = m.entries.iter().map(|e| e.iperf_id).collect();
        assert_eq!(ids, vec![1, 3, 4, 5]);
        assert_eq!(m.entries[1].flow, Flow::ClientToServer);
        assert_eq!(m.entries[2].flow, Flow::ServerToClient);
        assert_eq!(m.entries[2].index, 0);
        assert_eq!(m.by_id(5).unwrap().index, 1);
        assert_eq!(m.by_id(2), None);
        assert_eq!(Side::Server.role(Flow::ClientToServer), Role::Receiver);
    }
}
