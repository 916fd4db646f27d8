//! Saved iperf3 results (`iperf3 -J` output) read as wirerate results, so `report` and
//! `compare` take them beside wirerate's own. What iperf3 records maps onto the model:
//! goodput and bytes from the receiver's sum, the sender's beside it, the process CPU of
//! both sides, retransmits and RTT of the senders, UDP loss and jitter, intervals and
//! streams. What it does not record (per-core CPU, kernel counters, the wire, the stream
//! threads' CPU) stays None or zero, so no diagnosis is made from it: its rules would read
//! the missing figures as measured.

use crate::evidence::IntervalTcp;
use crate::result::{
    CpuSide, CpuSummary, Env, Interval, IoSummary, StreamResult, StreamSide, Summary, TcpInfo,
    TcpSummary, Tool, UdpSummary, WireSummary, SCHEMA_VERSION,
};
use crate::spec::{Direction, End, Flow, Protocol};
use crate::{RunResult, TestSpec};
use serde_json::Value;

/// An iperf3 `-J` document: `start`, `intervals` and `end` at the top.
pub fn is_iperf3(v: &Value) -> bool {
    v.get("start").is_some_and(Value::is_object)
        && v.get("end").is_some_and(Value::is_object)
        && v.get("summary").is_none()
}

fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64).filter(|x| x.is_finite())
}

fn count(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

/// Maps one iperf3 `-J` document; an error names what is missing.
pub fn to_result(v: &Value) -> Result<RunResult, String> {
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        return Err(format!("the iperf3 test failed: {e}"));
    }
    let start = &v["start"];
    let end = &v["end"];
    let ts = &start["test_start"];
    let udp = ts
        .get("protocol")
        .and_then(Value::as_str)
        .is_some_and(|p| p.eq_ignore_ascii_case("udp"));
    let reverse = count(ts, "reverse").unwrap_or(0) != 0;
    let flow = if reverse {
        Flow::ServerToClient
    } else {
        Flow::ClientToServer
    };
    let spec = TestSpec {
        protocol: if udp { Protocol::Udp } else { Protocol::Tcp },
        direction: if reverse {
            Direction::Reverse
        } else {
            Direction::Forward
        },
        end: End::Time {
            seconds: num(ts, "duration").unwrap_or(0.0),
        },
        len_bytes: count(ts, "blksize").unwrap_or(TestSpec::default().len_bytes),
        parallel: count(ts, "num_streams")
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(1)
            .max(1),
        omit_s: num(ts, "omit").unwrap_or(0.0),
        rate_bps: num(ts, "target_bitrate").filter(|r| *r > 0.0),
        ..TestSpec::default()
    };
    // TCP has sum_sent and sum_received; UDP (older iperf3) has one `sum`
    let received = end
        .get("sum_received")
        .or_else(|| end.get("sum"))
        .ok_or("no end.sum_received or end.sum")?;
    let sent = end.get("sum_sent").unwrap_or(received);
    let goodput_bps = num(received, "bits_per_second").ok_or("no received bits_per_second")?;
    let seconds = num(received, "seconds").unwrap_or(0.0);
    let sender_seconds = num(sent, "seconds").unwrap_or(seconds);
    let cpu = &end["cpu_utilization_percent"];
    let side = |total: &str, user: &str, system: &str| {
        let t = num(cpu, total)?;
        Some(CpuSide {
            user_s: num(cpu, user).unwrap_or(0.0) / 100.0 * seconds,
            sys_s: num(cpu, system).unwrap_or(0.0) / 100.0 * seconds,
            process_percent: t,
            ..CpuSide::default()
        })
    };
    // iperf3 gives windows in bytes; its default MSS turns them into segments
    let mss = count(start, "tcp_mss_default").filter(|m| *m > 0);
    let streams = streams(end, flow, mss);
    let rtts: Vec<f64> = streams
        .iter()
        .filter_map(|s| s.tcp_sender.as_ref()?.rtt_us.map(|r| r as f64))
        .collect();
    let summary = Summary {
        goodput_bps,
        sender_bps: num(sent, "bits_per_second").unwrap_or(goodput_bps),
        bytes: count(received, "bytes").unwrap_or(0),
        sender_bytes: count(sent, "bytes").unwrap_or(0),
        seconds,
        sender_seconds,
        io: IoSummary::default(),
        cpu: CpuSummary {
            local: side("host_total", "host_user", "host_system"),
            remote: side("remote_total", "remote_user", "remote_system"),
        },
        pi: None,
        tcp: (!udp).then(|| TcpSummary {
            retransmits: count(sent, "retransmits"),
            rtt_us: (!rtts.is_empty()).then(|| rtts.iter().sum::<f64>() / rtts.len() as f64),
            congestion: end
                .get("sender_tcp_congestion")
                .and_then(Value::as_str)
                .map(str::to_string),
            ..TcpSummary::default()
        }),
        // UDP loss and jitter are in `sum` (the receiver's figures, as the server reported)
        udp: udp.then(|| udp_summary(end.get("sum").unwrap_or(received), &spec)),
        wire: WireSummary::default(),
        flows: Vec::new(),
        diagnosis: None,
        rr: None,
        fairness: None,
    };
    Ok(RunResult {
        schema_version: SCHEMA_VERSION,
        tool: Tool {
            name: "iperf3".into(),
            version: start
                .get("version")
                .and_then(Value::as_str)
                .unwrap_or("iperf3")
                .to_string(),
        },
        started_unix_s: num(&start["timestamp"], "timesecs").unwrap_or(0.0),
        spec,
        summary,
        intervals: intervals(v, flow, udp, mss),
        streams,
        env: Env::default(),
        evidence: Default::default(),
        interrupted: false,
        sweep: None,
        rpm: None,
        inband: Vec::new(),
    })
}

fn udp_summary(sum: &Value, spec: &TestSpec) -> UdpSummary {
    let packets = count(sum, "packets").unwrap_or(0);
    let lost = count(sum, "lost_packets").unwrap_or(0).min(packets);
    UdpSummary {
        packets,
        received: packets - lost,
        lost,
        loss_percent: num(sum, "lost_percent").unwrap_or(0.0).clamp(0.0, 100.0),
        out_of_order: count(sum, "out_of_order").unwrap_or(0),
        jitter_ms: num(sum, "jitter_ms"),
        loss_location: "unknown".into(),
        target_bps: spec.rate_bps,
        ..UdpSummary::default()
    }
}

fn intervals(v: &Value, flow: Flow, udp: bool, mss: Option<u64>) -> Vec<Interval> {
    let Some(list) = v.get("intervals").and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|i| {
            let sum = i.get("sum")?;
            let rtts: Vec<f64> = i
                .get("streams")
                .and_then(Value::as_array)
                .map(|s| s.iter().filter_map(|s| num(s, "rtt")).collect())
                .unwrap_or_default();
            // the largest window of the streams, as the model's intervals hold it
            let cwnd = i
                .get("streams")
                .and_then(Value::as_array)
                .and_then(|s| s.iter().filter_map(|s| count(s, "snd_cwnd")).max());
            let tcp = (!udp && sum.get("retransmits").is_some()).then(|| IntervalTcp {
                retransmits: count(sum, "retransmits"),
                snd_cwnd_bytes: cwnd,
                snd_cwnd: cwnd.zip(mss).map(|(c, m)| c / m),
                rtt_us: (!rtts.is_empty()).then(|| rtts.iter().sum::<f64>() / rtts.len() as f64),
                ..IntervalTcp::default()
            });
            Some(Interval {
                flow,
                start_s: num(sum, "start")?,
                end_s: num(sum, "end")?,
                bytes: count(sum, "bytes").unwrap_or(0),
                bps: num(sum, "bits_per_second")?,
                omitted: sum.get("omitted").and_then(Value::as_bool).unwrap_or(false),
                packets: if udp { count(sum, "packets") } else { None },
                loss_percent: if udp { num(sum, "lost_percent") } else { None },
                jitter_ms: if udp { num(sum, "jitter_ms") } else { None },
                rr: None,
                stream: None,
                tcp,
                bottleneck: None,
            })
        })
        .collect()
}

fn streams(end: &Value, flow: Flow, mss: Option<u64>) -> Vec<StreamResult> {
    let Some(list) = end.get("streams").and_then(Value::as_array) else {
        return Vec::new();
    };
    let side = |s: &Value| StreamSide {
        bytes: count(s, "bytes").unwrap_or(0),
        counted_bytes: count(s, "bytes").unwrap_or(0),
        seconds: num(s, "seconds").unwrap_or(0.0),
        ..StreamSide::default()
    };
    list.iter()
        .enumerate()
        .filter_map(|(i, s)| {
            // UDP streams hold one `udp` object instead of a sender and a receiver
            let snd = s.get("sender").or_else(|| s.get("udp"))?;
            let rcv = s.get("receiver").unwrap_or(snd);
            Some(StreamResult {
                id: u32::try_from(i).unwrap_or(u32::MAX),
                flow,
                sender: side(snd),
                receiver: side(rcv),
                goodput_bps: num(rcv, "bits_per_second")?,
                tcp_sender: snd.get("retransmits").map(|_| TcpInfo {
                    retransmits_total: count(snd, "retransmits"),
                    rtt_us: count(snd, "mean_rtt"),
                    snd_cwnd: count(snd, "max_snd_cwnd").zip(mss).map(|(c, m)| c / m),
                    snd_mss: mss,
                    ..TcpInfo::default()
                }),
                tcp_receiver: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> Value {
        serde_json::json!({
            "start": {"version": "iperf 3.12", "timestamp": {"timesecs": 1_700_000_000},
                      "tcp_mss_default": 1448,
                      "test_start": {"protocol": "TCP", "num_streams": 2, "blksize": 131072,
                                     "omit": 0, "duration": 2, "reverse": 0, "target_bitrate": 0}},
            "intervals": [
                {"streams": [{"rtt": 100, "snd_cwnd": 144800}, {"rtt": 300, "snd_cwnd": 289600}],
                 "sum": {"start": 0, "end": 1.0, "bytes": 1000, "bits_per_second": 8000.0,
                         "retransmits": 3, "omitted": false}}
            ],
            "end": {
                "streams": [
                    {"sender": {"bytes": 600, "seconds": 2.0, "bits_per_second": 2400.0,
                                "retransmits": 2, "mean_rtt": 150, "max_snd_cwnd": 434400},
                     "receiver": {"bytes": 590, "seconds": 2.0, "bits_per_second": 2360.0}},
                    {"sender": {"bytes": 400, "seconds": 2.0, "bits_per_second": 1600.0,
                                "retransmits": 1, "mean_rtt": 250},
                     "receiver": {"bytes": 400, "seconds": 2.0, "bits_per_second": 1600.0}}
                ],
                "sum_sent": {"bytes": 1000, "seconds": 2.0, "bits_per_second": 4000.0, "retransmits": 3},
                "sum_received": {"bytes": 990, "seconds": 2.0, "bits_per_second": 3960.0},
                "cpu_utilization_percent": {"host_total": 40.0, "host_user": 10.0, "host_system": 30.0,
                                            "remote_total": 20.0, "remote_user": 5.0, "remote_system": 15.0},
                "sender_tcp_congestion": "cubic"
            }
        })
    }

    #[test]
    fn an_iperf3_tcp_document_maps_onto_the_model() {
        let v = doc();
        assert!(is_iperf3(&v));
        let r = to_result(&v).unwrap();
        assert_eq!(r.tool.name, "iperf3");
        assert_eq!(r.summary.goodput_bps, 3960.0);
        assert_eq!(r.summary.sender_bps, 4000.0);
        assert_eq!(r.summary.bytes, 990);
        assert_eq!(r.spec.parallel, 2);
        let tcp = r.summary.tcp.as_ref().unwrap();
        assert_eq!(tcp.retransmits, Some(3));
        assert_eq!(tcp.rtt_us, Some(200.0));
        let local = r.summary.cpu.local.as_ref().unwrap();
        assert_eq!(local.process_percent, 40.0);
        assert!((local.sys_s - 0.6).abs() < 1e-9);
        assert_eq!(r.intervals.len(), 1);
        let itcp = r.intervals[0].tcp.as_ref().unwrap();
        assert_eq!(itcp.rtt_us, Some(200.0));
        // the larger stream's window, in bytes and in segments of the default MSS
        assert_eq!(itcp.snd_cwnd_bytes, Some(289600));
        assert_eq!(itcp.snd_cwnd, Some(200));
        let snd = r.streams[0].tcp_sender.as_ref().unwrap();
        assert_eq!((snd.snd_cwnd, snd.snd_mss), (Some(300), Some(1448)));
        assert_eq!(r.streams.len(), 2);
        assert_eq!(r.streams[1].goodput_bps, 1600.0);
        assert!(r.summary.diagnosis.is_none());
    }

    fn udp_doc() -> Value {
        serde_json::json!({
            "start": {"version": "iperf 3.12", "timestamp": {"timesecs": 1_700_000_000},
                      "test_start": {"protocol": "UDP", "num_streams": 1, "blksize": 32768,
                                     "omit": 0, "duration": 1, "reverse": 0,
                                     "target_bitrate": 50_000_000}},
            "intervals": [{"streams": [], "sum": {"start": 0, "end": 1.0, "bytes": 6225920,
                           "bits_per_second": 49792918.25, "packets": 190, "omitted": false}}],
            "end": {
                "streams": [{"udp": {"bytes": 6225920, "seconds": 1.0, "bits_per_second": 49792920.0,
                                     "jitter_ms": 0.14, "lost_packets": 2, "packets": 190,
                                     "lost_percent": 1.05, "out_of_order": 0}}],
                "sum": {"bytes": 6225920, "seconds": 1.0, "bits_per_second": 49792920.0,
                        "jitter_ms": 0.14, "lost_packets": 2, "packets": 190, "lost_percent": 1.05},
                "sum_sent": {"bytes": 6225920, "seconds": 1.0, "bits_per_second": 49792920.0},
                "sum_received": {"bytes": 6160384, "seconds": 1.0, "bits_per_second": 49268736.0},
                "cpu_utilization_percent": {"host_total": 3.0, "host_user": 1.0, "host_system": 2.0,
                                            "remote_total": 1.0, "remote_user": 0.5, "remote_system": 0.5}
            }
        })
    }

    #[test]
    fn an_iperf3_udp_document_keeps_its_loss_and_jitter() {
        let r = to_result(&udp_doc()).unwrap();
        let u = r.summary.udp.as_ref().unwrap();
        assert_eq!((u.packets, u.lost, u.received), (190, 2, 188));
        assert_eq!(u.loss_percent, 1.05);
        assert_eq!(u.jitter_ms, Some(0.14));
        assert_eq!(r.spec.rate_bps, Some(50e6));
        assert_eq!(r.summary.goodput_bps, 49268736.0);
        assert_eq!(r.streams.len(), 1);
    }

    #[test]
    fn mapped_iperf3_results_follow_the_result_schema() {
        let schema: Value =
            serde_json::from_str(include_str!("../../../schema/result.schema.json")).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        for d in [doc(), udp_doc()] {
            let v = serde_json::to_value(to_result(&d).unwrap()).unwrap();
            let errors: Vec<String> = validator
                .iter_errors(&v)
                .map(|e| format!("{e} at {}", e.instance_path))
                .collect();
            assert!(errors.is_empty(), "{errors:#?}");
        }
    }

    #[test]
    fn broken_iperf3_documents_are_errors_not_panics() {
        let failed = serde_json::json!({"start": {}, "end": {}, "error": "unable to connect"});
        assert!(to_result(&failed)
            .unwrap_err()
            .contains("unable to connect"));
        let empty = serde_json::json!({"start": {}, "end": {}});
        assert!(to_result(&empty).is_err());
        let odd = serde_json::json!({"start": {"test_start": 5}, "intervals": [1, {"sum": 2}],
                                     "end": {"sum": {"bits_per_second": 1.0}, "streams": [3]}});
        assert!(to_result(&odd).is_ok());
    }
}
