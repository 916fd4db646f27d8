//! Final reports in bounded frames. A report carries every interval of a test and every TCP
//! sample, so it grows with the test's length; one frame would outgrow the peer's frame cap
//! (a bidirectional test at `-i 0.01` passes the server's 256 KiB cap within seconds). A
//! report that does not fit is sent as `report_part` frames carrying its intervals and TCP
//! samples, each well under the cap, then the `report` frame with the rest. A report that
//! fits goes in one frame, as before parts existed, so short tests still work between
//! versions.
//!
//! The receiver takes parts only while the test runs and before the peer's report, and no
//! more intervals than the time since the start allows, so a peer cannot make it hold more
//! than a real test of that length would.

use std::time::Instant;

use wirerate_core::evidence::TcpSample;
use wirerate_core::result::Interval;
use wirerate_core::side_report::SideReport;
use wirerate_core::TestSpec;

use crate::frame::{encode, ProtoError};
use crate::msg::Msg;

/// The frames of one final report: one `report` frame when it fits in `max_frame`, else
/// `report_part` frames of at most a quarter of `max_frame` each, then the `report`.
pub fn report_frames(mut report: SideReport, max_frame: usize) -> Vec<Vec<u8>> {
    let items = report.intervals.len() + report.tcp_samples.len();
    // every interval or sample takes more than this much JSON: a report with more items
    // than the frame could hold at this size is split without encoding it whole first
    const MIN_ITEM_BYTES: usize = 48;
    if items.saturating_mul(MIN_ITEM_BYTES) <= max_frame {
        let msg = Msg::Report {
            report: Box::new(report),
        };
        let whole = encode(&msg);
        let Msg::Report { report: back } = msg else {
            return vec![whole];
        };
        if whole.len() <= max_frame + 4 {
            return vec![whole];
        }
        report = *back;
    }
    let budget = (max_frame / 4).max(1);
    let mut frames = Vec::new();
    part_frames(
        "intervals",
        std::mem::take(&mut report.intervals),
        budget,
        &mut frames,
    );
    let samples = std::mem::take(&mut report.tcp_samples);
    part_frames("tcp_samples", samples, budget, &mut frames);
    frames.push(encode(&Msg::Report {
        report: Box::new(report),
    }));
    frames
}

/// Appends `report_part` frames carrying `items` in the list `field`, each body at most
/// `budget` bytes (an item larger than that goes alone). Each item is serialized once, and
/// the part's JSON is put together around them: `{"type":"report_part","FIELD":[…]}`.
fn part_frames<T: serde::Serialize>(
    field: &str,
    items: Vec<T>,
    budget: usize,
    frames: &mut Vec<Vec<u8>>,
) {
    let head = format!("{{\"type\":\"report_part\",\"{field}\":[");
    let mut body: Vec<u8> = Vec::new();
    let flush = |body: &mut Vec<u8>, frames: &mut Vec<Vec<u8>>| {
        if !body.is_empty() {
            body.extend_from_slice(b"]}");
            let mut frame = Vec::with_capacity(4 + body.len());
            frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
            frame.append(body);
            frames.push(frame);
        }
    };
    for item in items {
        // serializing our own types to a Vec cannot fail (see `encode`)
        let json = serde_json::to_vec(&item).unwrap_or_default();
        if !body.is_empty() && body.len() + json.len() + 3 > budget {
            flush(&mut body, frames);
        }
        if body.is_empty() {
            body.extend_from_slice(head.as_bytes());
        } else {
            body.push(b',');
        }
        body.extend_from_slice(&json);
    }
    flush(&mut body, frames);
}

/// The parts of the peer's report received so far.
#[derive(Debug, Default)]
pub(crate) struct Parts {
    intervals: Vec<Interval>,
    samples: Vec<TcpSample>,
    interval_s: f64,
    /// Intervals per interval tick: one per flow, and one per stream where streams report
    /// their own.
    flows: usize,
    started: Option<Instant>,
}

/// Slack on the test's elapsed time in the bound on intervals: the peer's clock started a
/// moment apart from ours.
const SLACK_S: f64 = 2.0;

impl Parts {
    /// The test started now: from here on parts are taken, as many as its time allows.
    pub(crate) fn start(&mut self, spec: &TestSpec, now: Instant) {
        self.interval_s = spec.interval_s;
        let per_flow = if spec.per_stream_intervals() {
            1 + spec.parallel as usize
        } else {
            1
        };
        self.flows = spec.direction.flows().len() * per_flow;
        self.started = Some(now);
    }

    /// Intervals (and, apart, TCP samples) a report may carry by `now`: one per flow per
    /// interval since the start, with slack.
    fn allowed(&self, now: Instant) -> usize {
        let Some(t0) = self.started else { return 0 };
        if self.interval_s <= 0.0 {
            return 0;
        }
        let elapsed = now.saturating_duration_since(t0).as_secs_f64() + SLACK_S;
        let per_flow = (elapsed / self.interval_s).ceil() + 2.0;
        // a float above usize::MAX saturates
        (per_flow * self.flows as f64) as usize
    }

    /// Takes one `report_part`.
    pub(crate) fn add(
        &mut self,
        intervals: Vec<Interval>,
        samples: Vec<TcpSample>,
        now: Instant,
    ) -> Result<(), ProtoError> {
        let allowed = self.allowed(now);
        if self.intervals.len() + intervals.len() > allowed
            || self.samples.len() + samples.len() > allowed
        {
            return Err(ProtoError::BadMessage(format!(
                "report parts carry more than the {allowed} intervals the test's time allows"
            )));
        }
        self.intervals.extend(intervals);
        self.samples.extend(samples);
        Ok(())
    }

    /// Puts the parts in front of what the final report carries itself.
    pub(crate) fn complete(&mut self, report: &mut SideReport) {
        if !self.intervals.is_empty() {
            let rest = std::mem::take(&mut report.intervals);
            report.intervals = std::mem::take(&mut self.intervals);
            report.intervals.extend(rest);
        }
        if !self.samples.is_empty() {
            let rest = std::mem::take(&mut report.tcp_samples);
            report.tcp_samples = std::mem::take(&mut self.samples);
            report.tcp_samples.extend(rest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{FrameDecoder, MAX_CLIENT_FRAME, MAX_SERVER_FRAME};
    use std::time::Duration;
    use wirerate_core::evidence::IntervalTcp;
    use wirerate_core::spec::{Direction, Flow};

    /// A report of `n` intervals and `samples` TCP samples whose figures JSON carries
    /// exactly (quarters and whole numbers), so a round trip compares equal.
    fn report(n: usize, samples: usize) -> SideReport {
        let interval = |i: usize| Interval {
            flow: if i.is_multiple_of(2) {
                Flow::ClientToServer
            } else {
                Flow::ServerToClient
            },
            stream: None,
            start_s: i as f64 * 0.25,
            end_s: (i + 1) as f64 * 0.25,
            bytes: i as u64 * 1000,
            bps: i as f64 * 32000.0,
            omitted: false,
            packets: i.is_multiple_of(3).then_some(i as u64),
            loss_percent: i.is_multiple_of(3).then_some(0.5),
            jitter_ms: None,
            rr: None,
            tcp: None,
            bottleneck: None,
        };
        SideReport {
            intervals: (0..n).map(interval).collect(),
            tcp_samples: (0..samples)
                .map(|i| TcpSample {
                    flow: Flow::ClientToServer,
                    stream: None,
                    start_s: i as f64 * 0.25,
                    end_s: (i + 1) as f64 * 0.25,
                    tcp: IntervalTcp {
                        retransmits: Some(i as u64),
                        snd_cwnd: Some(10),
                        ..Default::default()
                    },
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_million_intervals_go_in_frames_under_the_cap_and_come_back_exactly() {
        for (n, samples, cap) in [
            (1_000_000, 1000, MAX_CLIENT_FRAME),
            (100_000, 50_000, MAX_SERVER_FRAME / 8),
        ] {
            let sent = report(n, samples);
            let frames = report_frames(sent.clone(), cap);
            assert!(frames.len() > 4, "cap {cap}: {} frames", frames.len());
            let spec = TestSpec {
                direction: Direction::Bidir,
                interval_s: 0.01,
                ..Default::default()
            };
            let t0 = Instant::now();
            let mut parts = Parts::default();
            parts.start(&spec, t0);
            // n intervals over two flows at 0.01 s: a test of n/200 s
            let now = t0 + Duration::from_secs(n as u64 / 200);
            let mut dec = FrameDecoder::new(cap);
            let mut got = None;
            for f in &frames {
                assert!(f.len() - 4 <= cap, "a frame of {} bytes", f.len());
                dec.push(f).unwrap();
                match dec.next_msg().unwrap() {
                    Some(Msg::ReportPart {
                        intervals,
                        tcp_samples,
                    }) => parts.add(intervals, tcp_samples, now).unwrap(),
                    Some(Msg::Report { mut report }) => {
                        parts.complete(&mut report);
                        got = Some(*report);
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
            assert!(
                got.as_ref() == Some(&sent),
                "cap {cap}: not reassembled exactly"
            );
        }
    }

    #[test]
    fn a_part_put_together_by_hand_is_what_serde_reads_and_writes() {
        let r = report(3, 0);
        let mut frames = Vec::new();
        part_frames("intervals", r.intervals.clone(), 1 << 20, &mut frames);
        let msg = Msg::ReportPart {
            intervals: r.intervals,
            tcp_samples: Vec::new(),
        };
        let mut dec = FrameDecoder::new(1 << 20);
        dec.push(&frames[0]).unwrap();
        assert_eq!(dec.next_msg().unwrap(), Some(msg));
    }

    #[test]
    fn a_report_that_fits_is_one_frame_as_before() {
        let small = report(100, 50);
        let frames = report_frames(small.clone(), MAX_CLIENT_FRAME);
        assert_eq!(frames.len(), 1);
        assert_eq!(
            frames[0],
            encode(&Msg::Report {
                report: Box::new(small)
            })
        );
    }

    #[test]
    fn parts_beyond_what_the_time_allows_are_refused() {
        let spec = TestSpec {
            interval_s: 1.0,
            ..Default::default()
        };
        let t0 = Instant::now();
        let mut parts = Parts::default();
        // before the start: none
        assert!(parts.add(report(1, 0).intervals, Vec::new(), t0).is_err());
        parts.start(&spec, t0);
        // 10 s in, one flow: about 14 at most
        let now = t0 + Duration::from_secs(10);
        assert!(parts.add(report(10, 0).intervals, Vec::new(), now).is_ok());
        assert!(parts.add(report(10, 0).intervals, Vec::new(), now).is_err());
        // without intervals, none at all
        let mut none = Parts::default();
        none.start(
            &TestSpec {
                interval_s: 0.0,
                ..Default::default()
            },
            t0,
        );
        assert!(none.add(report(1, 0).intervals, Vec::new(), now).is_err());
    }

    #[test]
    fn streams_with_their_own_intervals_may_send_one_per_stream_more() {
        let spec = TestSpec {
            interval_s: 1.0,
            parallel: 4,
            stream_intervals: true,
            ..Default::default()
        };
        let t0 = Instant::now();
        let now = t0 + Duration::from_secs(10);
        let mut parts = Parts::default();
        parts.start(&spec, t0);
        // 10 s in: about 14 ticks of four streams and their sum, 70 at most
        assert!(parts.add(report(60, 0).intervals, Vec::new(), now).is_ok());
        assert!(parts.add(report(20, 0).intervals, Vec::new(), now).is_err());
        // asked for, but one stream: sums only
        let mut one = Parts::default();
        one.start(
            &TestSpec {
                parallel: 1,
                ..spec
            },
            t0,
        );
        assert!(one.add(report(20, 0).intervals, Vec::new(), now).is_err());
    }
}
