//! The results document both ends exchange after `EXCHANGE_RESULTS`, and its mapping to and
//! from wirerate's [`SideReport`]. iperf3 reports per stream the bytes this side moved (after
//! the omitted warm-up), the sender's retransmits, and the process CPU of the side.

use serde_json::{json, Map, Value};
use wirerate_core::result::{CpuSide, TcpInfo};
use wirerate_core::side_report::{Role, SideReport, StreamReport};

use super::json::{count, number, signed};
use super::map::{Side, StreamMap};
use super::Iperf3Error;

/// One side's results.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Results {
    /// Process CPU in % of one core over the test, and its user and system parts.
    pub cpu_util_total: f64,
    pub cpu_util_user: f64,
    pub cpu_util_system: f64,
    /// 1 when the sending streams carry retransmit counts, 0 when not, −1 when this side
    /// only received.
    pub sender_has_retransmits: i64,
    pub congestion_used: Option<String>,
    pub streams: Vec<StreamResults>,
    /// A server's own report, when the client asked for it.
    pub server_output_text: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamResults {
    pub id: u32,
    pub bytes: u64,
    /// −1 when not applicable (a receiving stream).
    pub retransmits: i64,
    pub jitter: f64,
    pub errors: i64,
    pub packets: i64,
    /// Errors and datagrams inside the omitted warm-up (3.14+). wirerate sends both as 0:
    /// a 3.14+ peer that finds them missing counts every datagram as omitted.
    pub omitted_errors: i64,
    pub omitted_packets: i64,
    /// Seconds from the stream's start; absent from servers older than 3.2.
    pub start_time: Option<f64>,
    pub end_time: Option<f64>,
}

fn required(v: &Value, key: &str) -> Result<f64, Iperf3Error> {
    number(v, key).ok_or_else(|| Iperf3Error::BadJson(format!("results lack '{key}'")))
}

impl Results {
    /// Reads a peer's results; the fields iperf3 itself requires must be present.
    pub fn parse(v: &Value) -> Result<Results, Iperf3Error> {
        let streams = v
            .get("streams")
            .and_then(Value::as_array)
            .ok_or_else(|| Iperf3Error::BadJson("results lack 'streams'".into()))?;
        let streams = streams
            .iter()
            .map(|s| {
                let id = count(s, "id")
                    .and_then(|i| u32::try_from(i).ok())
                    .ok_or_else(|| Iperf3Error::BadJson("stream without an id".into()))?;
                Ok(StreamResults {
                    id,
                    bytes: count(s, "bytes").unwrap_or(0),
                    retransmits: signed(s, "retransmits").unwrap_or(-1),
                    jitter: number(s, "jitter").unwrap_or(0.0),
                    errors: signed(s, "errors").unwrap_or(0),
                    packets: signed(s, "packets").unwrap_or(0),
                    omitted_errors: signed(s, "omitted_errors").unwrap_or(0),
                    omitted_packets: signed(s, "omitted_packets").unwrap_or(0),
                    start_time: number(s, "start_time"),
                    end_time: number(s, "end_time"),
                })
            })
            .collect::<Result<Vec<_>, Iperf3Error>>()?;
        Ok(Results {
            cpu_util_total: required(v, "cpu_util_total")?,
            cpu_util_user: required(v, "cpu_util_user")?,
            cpu_util_system: required(v, "cpu_util_system")?,
            sender_has_retransmits: signed(v, "sender_has_retransmits").ok_or_else(|| {
                Iperf3Error::BadJson("results lack 'sender_has_retransmits'".into())
            })?,
            congestion_used: v
                .get("congestion_used")
                .and_then(Value::as_str)
                .map(|s| s.chars().take(32).collect()),
            streams,
            server_output_text: v
                .get("server_output_text")
                .and_then(Value::as_str)
                .map(String::from),
        })
    }

    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("cpu_util_total".into(), json!(self.cpu_util_total));
        m.insert("cpu_util_user".into(), json!(self.cpu_util_user));
        m.insert("cpu_util_system".into(), json!(self.cpu_util_system));
        m.insert(
            "sender_has_retransmits".into(),
            json!(self.sender_has_retransmits),
        );
        if let Some(cc) = &self.congestion_used {
            m.insert("congestion_used".into(), json!(cc));
        }
        if let Some(text) = &self.server_output_text {
            m.insert("server_output_text".into(), json!(text));
        }
        let streams: Vec<Value> = self
            .streams
            .iter()
            .map(|s| {
                json!({
                    "id": s.id,
                    "bytes": s.bytes,
                    "retransmits": s.retransmits,
                    "jitter": s.jitter,
                    "errors": s.errors,
                    "packets": s.packets,
                    "omitted_errors": s.omitted_errors,
                    "omitted_packets": s.omitted_packets,
                    "start_time": s.start_time.unwrap_or(0.0),
                    "end_time": s.end_time.unwrap_or(0.0),
                })
            })
            .collect();
        m.insert("streams".into(), Value::Array(streams));
        Value::Object(m)
    }

    /// What a side tells its peer about the streams it ran. Streams not in `map` are left
    /// out: the peer would refuse an id it does not know.
    pub fn from_side(report: &SideReport, map: &StreamMap) -> Results {
        let mut streams = Vec::new();
        let mut retrans_known = false;
        let mut sends = false;
        for s in &report.streams {
            let Some(e) = map.by_stream(s.flow, s.id) else {
                continue;
            };
            let retransmits = match s.role {
                Role::Sender => {
                    sends = true;
                    let r = s.tcp.as_ref().and_then(|t| t.retransmits_total);
                    retrans_known |= r.is_some();
                    r.map_or(-1, |r| i64::try_from(r).unwrap_or(i64::MAX))
                }
                Role::Receiver => -1,
            };
            streams.push(StreamResults {
                id: e.iperf_id,
                bytes: s.counted_bytes,
                retransmits,
                start_time: Some(0.0),
                end_time: Some(s.seconds),
                ..Default::default()
            });
        }
        streams.sort_by_key(|s| s.id);
        let (total, user, system) = cpu_split(report.cpu.as_ref());
        Results {
            cpu_util_total: total,
            cpu_util_user: user,
            cpu_util_system: system,
            sender_has_retransmits: match (sends, retrans_known) {
                (false, _) => -1,
                (true, known) => i64::from(known),
            },
            congestion_used: report
                .streams
                .iter()
                .find_map(|s| s.tcp.as_ref().and_then(|t| t.congestion.clone())),
            streams,
            server_output_text: None,
        }
    }

    /// The peer's side as a wirerate report. `peer` is which side sent these results;
    /// `window_s` stands in for stream durations that pre-3.2 peers do not send.
    pub fn to_side(&self, map: &StreamMap, peer: Side, window_s: f64) -> SideReport {
        let mut streams = Vec::new();
        for s in &self.streams {
            let Some(e) = map.by_id(s.id) else {
                continue;
            };
            let role = peer.role(e.flow);
            let seconds = match (s.start_time, s.end_time) {
                (Some(a), Some(b)) if b > a => b - a,
                _ => window_s,
            };
            let retransmits = u64::try_from(s.retransmits).ok();
            let tcp = (role == Role::Sender && self.sender_has_retransmits == 1).then(|| TcpInfo {
                retransmits_total: retransmits,
                congestion: self.congestion_used.clone(),
                ..Default::default()
            });
            streams.push(StreamReport {
                id: e.index,
                flow: e.flow,
                role,
                bytes: s.bytes,
                counted_bytes: s.bytes,
                calls: 0,
                counted_calls: 0,
                opened_s: None,
                seconds,
                user_s: 0.0,
                sys_s: 0.0,
                tcp,
                udp: None,
                error: None,
                sched: None,
                worker: None,
                rr: None,
            });
        }
        let share = |pct: f64| (pct.max(0.0) / 100.0) * window_s;
        SideReport {
            streams,
            intervals: Vec::new(),
            cpu: Some(CpuSide {
                user_s: share(self.cpu_util_user),
                sys_s: share(self.cpu_util_system),
                process_percent: self.cpu_util_total.max(0.0),
                ..Default::default()
            }),
            host: Default::default(),
            udp_host: None,
            ..Default::default()
        }
    }
}

/// iperf3's three CPU figures from a side's CPU window: process CPU in % of one core,
/// split into user and system in proportion.
fn cpu_split(cpu: Option<&CpuSide>) -> (f64, f64, f64) {
    let Some(c) = cpu else {
        return (0.0, 0.0, 0.0);
    };
    let total = c.process_percent.max(0.0);
    let spent = c.user_s + c.sys_s;
    if spent > 0.0 {
        (total, total * c.user_s / spent, total * c.sys_s / spent)
    } else {
        (total, 0.0, 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirerate_core::spec::{Direction, Flow};

    fn stream(id: u32, flow: Flow, role: Role, bytes: u64) -> StreamReport {
        StreamReport {
            id,
            flow,
            role,
            bytes,
            counted_bytes: bytes,
            calls: 10,
            counted_calls: 10,
            opened_s: None,
            seconds: 1.5,
            user_s: 0.0,
            sys_s: 0.0,
            tcp: Some(TcpInfo {
                retransmits_total: Some(7),
                congestion: Some("cubic".into()),
                ..Default::default()
            }),
            udp: None,
            error: None,
            sched: None,
            worker: None,
            rr: None,
        }
    }

    #[test]
    fn a_server_report_round_trips_through_iperf3_results() {
        let map = StreamMap::new(Direction::Bidir, 1);
        let report = SideReport {
            streams: vec![
                stream(0, Flow::ClientToServer, Role::Receiver, 1000),
                stream(0, Flow::ServerToClient, Role::Sender, 2000),
            ],
            cpu: Some(CpuSide {
                user_s: 0.25,
                sys_s: 0.75,
                process_percent: 40.0,
                ..Default::default()
            }),
            ..Default::default()
        };
        let r = Results::from_side(&report, &map);
        assert_eq!(r.sender_has_retransmits, 1);
        assert_eq!((r.cpu_util_total, r.cpu_util_user), (40.0, 10.0));
        assert_eq!(r.streams[0].id, 1);
        assert_eq!(r.streams[0].retransmits, -1);
        assert_eq!(r.streams[1].id, 3);
        assert_eq!(r.streams[1].retransmits, 7);
        let back = Results::parse(&r.to_json()).unwrap();
        assert_eq!(back, r);
        let side = back.to_side(&map, Side::Server, 2.0);
        assert_eq!(side.streams.len(), 2);
        assert_eq!(side.streams[1].role, Role::Sender);
        assert_eq!(side.streams[1].seconds, 1.5);
        let tcp = side.streams[1].tcp.as_ref().unwrap();
        assert_eq!(tcp.retransmits_total, Some(7));
        assert!(side.streams[0].tcp.is_none());
    }

    #[test]
    fn results_as_iperf3_3_12_writes_them_are_read() {
        let v: Value = serde_json::from_str(
            r#"{"cpu_util_total":1.5,"cpu_util_user":0.5,"cpu_util_system":1.0,
                "sender_has_retransmits":1.8446744073709552e+19,
                "streams":[{"id":1,"bytes":123456,"retransmits":1.8446744073709552e+19,
                "jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":1.0001}]}"#,
        )
        .unwrap();
        let r = Results::parse(&v).unwrap();
        assert_eq!(r.sender_has_retransmits, -1);
        assert_eq!(r.streams[0].retransmits, -1);
        let side = r.to_side(&StreamMap::new(Direction::Forward, 1), Side::Server, 1.0);
        assert_eq!(side.streams[0].counted_bytes, 123456);
        assert_eq!(side.streams[0].role, Role::Receiver);
    }

    #[test]
    fn missing_required_fields_and_unknown_ids() {
        let v: Value = serde_json::from_str(r#"{"cpu_util_total":1,"streams":[]}"#).unwrap();
        assert!(Results::parse(&v).is_err());
        let v: Value = serde_json::from_str(
            r#"{"cpu_util_total":1,"cpu_util_user":1,"cpu_util_system":0,"sender_has_retransmits":0,
                "streams":[{"id":99,"bytes":5}]}"#,
        )
        .unwrap();
        let r = Results::parse(&v).unwrap();
        let side = r.to_side(&StreamMap::new(Direction::Forward, 1), Side::Server, 1.0);
        assert!(side.streams.is_empty());
    }
}
