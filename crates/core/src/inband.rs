//! In-band request/response latency on loaded TCP connections, without framing the bulk
//! byte stream.
//!
//! The side that receives a flow's bulk data (the requester) writes small requests on the
//! connection's idle direction, each a 4-byte sequence number, and keeps when it sent each
//! one and a timeline of the bytes it has received. The side that sends the bulk (the
//! responder) notes, as it reads each request, how many bytes it had written: the offset
//! `O` a response written right then would start at. After the test the requester is told
//! the offsets; request `i`'s latency is the time its received count passed `O_i + 1`
//! minus the time it was sent: what a response queued behind the bulk (in the sender's
//! socket buffer and every queue on the path) would have taken to arrive.
//!
//! Pure: the engine takes the stamps; this module joins them.

use serde::{Deserialize, Serialize};

use crate::spec::Flow;

/// Bytes of one in-band request: its sequence number, big-endian.
pub const REQUEST_BYTES: usize = 4;

/// What one side noted on one loaded connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InbandFlow {
    pub flow: Flow,
    pub id: u32,
    /// Requester: when request `k` was sent (seconds from the side's start), at index `k`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sent_s: Vec<f64>,
    /// Requester: `[seconds from the side's start, bytes received so far]`, in time order,
    /// sampled (only where the count moved, and the sample before each move).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<(f64, u64)>,
    /// Responder: `(request's sequence number, bytes written when it was read)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offsets: Vec<(u32, u64)>,
}

/// One in-band latency: the flow, when its request was sent (seconds from the requester's
/// start) and how long a response written behind the bulk took to arrive, ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InbandSample {
    pub flow: Flow,
    pub at_s: f64,
    pub ms: f64,
}

/// When the received count first reached `bytes`: linear between the samples around it
/// (the count moves steadily between two samples of a loaded flow); None if never.
pub fn time_reached(timeline: &[(f64, u64)], bytes: u64) -> Option<f64> {
    let i = timeline.partition_point(|&(_, b)| b < bytes);
    let &(t1, b1) = timeline.get(i)?;
    let Some(&(t0, b0)) = i.checked_sub(1).and_then(|j| timeline.get(j)) else {
        return Some(t1);
    };
    let part = (bytes - b0) as f64 / (b1 - b0) as f64;
    Some(t0 + part * (t1 - t0))
}

/// The latencies of one connection: the requester's stamps joined with the responder's
/// offsets. Requests never answered, or whose offset the requester never reached, give
/// none.
pub fn latencies(requester: &InbandFlow, offsets: &[(u32, u64)]) -> Vec<InbandSample> {
    offsets
        .iter()
        .filter_map(|&(seq, off)| {
            let sent = *requester.sent_s.get(seq as usize)?;
            let arrived = time_reached(&requester.timeline, off + 1)?;
            Some(InbandSample {
                flow: requester.flow,
                at_s: sent,
                ms: (arrived - sent).max(0.0) * 1000.0,
            })
        })
        .collect()
}

/// Every in-band latency of a test from both sides' notes: each side's requests joined
/// with the other side's offsets on the same connection. Times are on the requester's
/// clock, from its side's start.
pub fn join(client: &[InbandFlow], server: &[InbandFlow]) -> Vec<InbandSample> {
    let one_way = |req: &[InbandFlow], resp: &[InbandFlow]| -> Vec<InbandSample> {
        req.iter()
            .filter(|r| !r.sent_s.is_empty())
            .flat_map(|r| {
                let o = resp.iter().find(|o| o.flow == r.flow && o.id == r.id);
                latencies(r, o.map_or(&[][..], |o| &o.offsets))
            })
            .collect()
    };
    let mut v = one_way(client, server);
    v.extend(one_way(server, client));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requester(sent_s: Vec<f64>, timeline: Vec<(f64, u64)>) -> InbandFlow {
        InbandFlow {
            flow: Flow::ServerToClient,
            id: 1,
            sent_s,
            timeline,
            offsets: vec![],
        }
    }

    #[test]
    fn the_time_a_count_is_reached_is_interpolated_between_samples() {
        let t = [(1.0, 0), (1.0, 100), (2.0, 100), (3.0, 1100)];
        assert_eq!(time_reached(&t, 100), Some(1.0));
        assert_eq!(time_reached(&t, 101), Some(2.0 + 1.0 / 1000.0));
        assert_eq!(time_reached(&t, 600), Some(2.5));
        assert_eq!(time_reached(&t, 1100), Some(3.0));
        assert_eq!(time_reached(&t, 1101), None);
        assert_eq!(time_reached(&[], 1), None);
    }

    #[test]
    fn a_request_waits_for_the_bytes_written_before_it_was_read() {
        // 1 MB/s: the responder had written 50 000 bytes when it read request 0 (sent at
        // 0.01 s, when 10 000 had arrived): its answer arrives 40 ms later
        let timeline: Vec<(f64, u64)> = (0..100).map(|k| (k as f64 / 100.0, k * 10_000)).collect();
        let r = requester(vec![0.01, 0.5], timeline);
        let v = latencies(&r, &[(0, 49_999), (1, 900_000), (7, 10)]);
        assert_eq!(v.len(), 2, "seq 7 was never sent: {v:?}");
        assert!((v[0].ms - 40.0).abs() < 1e-6, "{v:?}");
        assert!((v[1].ms - 400.001).abs() < 1e-6, "{v:?}");
        assert_eq!(v[0].at_s, 0.01);
    }

    #[test]
    fn an_offset_beyond_what_arrived_gives_no_sample() {
        let r = requester(vec![0.0], vec![(0.0, 0), (1.0, 1000)]);
        assert!(latencies(&r, &[(0, 1000)]).is_empty());
        assert_eq!(latencies(&r, &[(0, 999)]).len(), 1);
    }

    #[test]
    fn each_side_s_requests_join_the_other_side_s_offsets() {
        let down = requester(vec![0.0], vec![(0.0, 0), (1.0, 1000)]);
        let up = InbandFlow {
            flow: Flow::ClientToServer,
            ..requester(vec![0.0, 0.1], vec![(0.0, 0), (2.0, 2000)])
        };
        let client = vec![
            down,
            InbandFlow {
                flow: Flow::ClientToServer,
                offsets: vec![(1, 999)],
                ..requester(vec![], vec![])
            },
        ];
        let server = vec![
            up,
            InbandFlow {
                offsets: vec![(0, 499)],
                ..requester(vec![], vec![])
            },
        ];
        let v = join(&client, &server);
        assert_eq!(v.len(), 2, "{v:?}");
        assert_eq!(v[0].flow, Flow::ServerToClient);
        assert!((v[0].ms - 500.0).abs() < 1e-6);
        assert_eq!(v[1].flow, Flow::ClientToServer);
        assert!((v[1].ms - 900.0).abs() < 1e-6);
    }
}
