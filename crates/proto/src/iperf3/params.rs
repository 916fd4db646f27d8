//! The parameter document an iperf3 client sends after `PARAM_EXCHANGE`, to and from
//! wirerate's [`TestSpec`]. One mapping serves both roles, so what the client writes and what
//! the server reads cannot drift apart.

use serde_json::{json, Map, Value};
use wirerate_core::spec::{Direction, End, Protocol, RecvMode, SendMode, TestSpec};

use super::json::{count, number};
use super::{errno, Iperf3Error};

/// iperf3's limits, which its servers enforce on what a client asks.
pub const MAX_BLOCKSIZE: u64 = 1 << 20;
pub const MAX_MSS: u32 = 9 * 1024;
pub const MAX_WINDOW: u64 = 512 << 20;
pub const MAX_STREAMS: u32 = 128;
/// iperf3's own default TCP block, used when a client names none.
pub const DEFAULT_TCP_BLOCK: u64 = 128 << 10;
/// iperf3's UDP datagram size when it cannot learn the path's MSS.
pub const DEFAULT_UDP_BLOCK: u64 = 1460;

/// What a server learns from a client's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    pub spec: TestSpec,
    /// The client asked for the server's report inside the results.
    pub get_server_output: bool,
    pub udp_counters_64bit: bool,
    pub client_version: Option<String>,
}

/// What iperf3's protocol cannot express of a spec (the user's flag to change is named).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Inexpressible {
    #[error("UDP datagrams for iperf3 must be 16 to 65507 bytes (-l)")]
    UdpLength,
    #[error("UDP with --iperf3 needs a rate (-b)")]
    UdpRate,
    #[error("--omit is not supported for UDP with --iperf3")]
    UdpOmit,
    #[error("iperf3 servers cannot discard received data; drop --discard")]
    Discard,
    #[error("iperf3 counts blocks over all streams; use -t or -n with --iperf3")]
    Blocks,
    #[error("iperf3 takes whole seconds for --omit")]
    OmitFraction,
    #[error("--omit with --iperf3 needs a time-based test (-t)")]
    OmitUntimed,
    #[error("iperf3 servers take at most 1 MiB per write (-l)")]
    Length,
    #[error("iperf3 servers take at most {MAX_STREAMS} streams")]
    Streams,
    #[error("iperf3 servers take an MSS of at most {MAX_MSS} bytes")]
    Mss,
    #[error("iperf3 servers take a window of at most 512 MiB")]
    Window,
}

/// Whether iperf3's protocol can express this spec. A client checks before connecting.
pub fn check_spec(spec: &TestSpec) -> Result<(), Inexpressible> {
    use Inexpressible as No;
    if spec.protocol == Protocol::Udp {
        if !(super::udp::MIN_DATAGRAM as u64..=super::udp::MAX_DATAGRAM as u64)
            .contains(&spec.len_bytes)
        {
            return Err(No::UdpLength);
        }
        if spec.rate_bps.is_none() {
            return Err(No::UdpRate);
        }
        if spec.omit_s > 0.0 {
            return Err(No::UdpOmit);
        }
    }
    if spec.recv_mode != RecvMode::Copy {
        return Err(No::Discard);
    }
    if matches!(spec.end, End::Blocks { .. }) {
        return Err(No::Blocks);
    }
    if spec.omit_s.fract() != 0.0 {
        return Err(No::OmitFraction);
    }
    if spec.omit_s > 0.0 && !matches!(spec.end, End::Time { .. }) {
        return Err(No::OmitUntimed);
    }
    if spec.protocol == Protocol::Tcp && spec.len_bytes > MAX_BLOCKSIZE {
        return Err(No::Length);
    }
    if spec.parallel > MAX_STREAMS {
        return Err(No::Streams);
    }
    if spec.mss_bytes.is_some_and(|m| m > MAX_MSS) {
        return Err(No::Mss);
    }
    if spec.window_bytes.is_some_and(|w| w > MAX_WINDOW) {
        return Err(No::Window);
    }
    Ok(())
}

/// The parameter document a client sends for `spec` (checked with [`check_spec`]).
pub fn params_json(spec: &TestSpec, client_version: &str) -> Value {
    let (time, num) = match spec.end {
        // the client ends the test itself, at the exact time; the server only needs a bound
        End::Time { seconds } => (seconds.ceil() as u64, 0),
        End::Bytes { bytes } => (0, bytes),
        End::Blocks { blocks } => (0, blocks.saturating_mul(spec.len_bytes)),
    };
    let mut m = Map::new();
    match spec.protocol {
        Protocol::Tcp => m.insert("tcp".into(), Value::Bool(true)),
        Protocol::Udp => m.insert("udp".into(), Value::Bool(true)),
    };
    if let Some(rate) = spec.rate_bps {
        // iperf3's -b: bits per second per stream
        m.insert("bandwidth".into(), json!(rate.round() as u64));
    }
    m.insert("omit".into(), json!(spec.omit_s as u64));
    m.insert("time".into(), json!(time));
    m.insert("num".into(), json!(num));
    m.insert("blockcount".into(), json!(0));
    if let Some(mss) = spec.mss_bytes {
        m.insert("MSS".into(), json!(mss));
    }
    if let Some(tos) = spec.tos {
        // iperf3's -S: the server sets it on its data sockets too
        m.insert("TOS".into(), json!(tos));
    }
    if spec.nodelay {
        m.insert("nodelay".into(), Value::Bool(true));
    }
    m.insert("parallel".into(), json!(spec.parallel));
    match spec.direction {
        Direction::Forward => {}
        Direction::Reverse => {
            m.insert("reverse".into(), Value::Bool(true));
        }
        Direction::Bidir => {
            m.insert("bidirectional".into(), Value::Bool(true));
        }
    }
    if let Some(w) = spec.window_bytes {
        m.insert("window".into(), json!(w));
    }
    m.insert("len".into(), json!(spec.len_bytes));
    if let Some(cc) = &spec.congestion {
        m.insert("congestion".into(), json!(cc));
    }
    m.insert("pacing_timer".into(), json!(1000));
    m.insert("client_version".into(), json!(client_version));
    Value::Object(m)
}

fn refuse(code: i32, msg: impl Into<String>) -> (i32, Iperf3Error) {
    (code, Iperf3Error::Unsupported(msg.into()))
}

fn flag(v: &Value, key: &str) -> bool {
    // iperf3 writes booleans as `true` and some options as numbers; presence is what counts
    // for the boolean ones, as in iperf3 itself.
    v.get(key).is_some_and(|x| !matches!(x, Value::Bool(false)))
}

/// When the test ends: `num` bytes, `blockcount` blocks of `len` (over all streams; for a
/// TCP sender that is a byte total), or `time` seconds.
fn end_from(v: &Value, len: u64) -> Result<End, (i32, Iperf3Error)> {
    let time = count(v, "time").unwrap_or(0);
    let num = count(v, "num").unwrap_or(0);
    let blocks = count(v, "blockcount").unwrap_or(0);
    if num > 0 {
        Ok(End::Bytes { bytes: num })
    } else if blocks > 0 {
        Ok(End::Bytes {
            bytes: blocks.saturating_mul(len),
        })
    } else if time > 0 {
        Ok(End::Time {
            seconds: time as f64,
        })
    } else {
        Err(refuse(errno::RECV_PARAMS, "no time, byte or block limit"))
    }
}

/// TCP or UDP; SCTP and contradictions are refused.
fn protocol_of(v: &Value) -> Result<Protocol, (i32, Iperf3Error)> {
    match (flag(v, "tcp"), flag(v, "udp"), flag(v, "sctp")) {
        (true, false, false) => Ok(Protocol::Tcp),
        (false, true, false) => Ok(Protocol::Udp),
        _ => Err(refuse(
            errno::PROTOCOL,
            "only TCP and UDP tests are served to iperf3 clients",
        )),
    }
}

/// The sending rate: required for UDP (iperf3's default 1 Mbit/s when absent), and for TCP
/// only where the client paces itself.
fn rate_of(
    v: &Value,
    protocol: Protocol,
    direction: Direction,
    len: u64,
) -> Result<Option<f64>, (i32, Iperf3Error)> {
    let mut rate = number(v, "bandwidth").filter(|&b| b > 0.0);
    if protocol == Protocol::Udp {
        // iperf3's UDP default, should a client leave the rate out
        rate = rate.or(Some(1e6));
        if count(v, "omit").unwrap_or(0) > 0 {
            return Err(refuse(
                errno::UNIMPLEMENTED,
                "--omit with UDP is not supported",
            ));
        }
        if !(super::udp::MIN_DATAGRAM as u64..=super::udp::MAX_DATAGRAM as u64).contains(&len) {
            return Err(refuse(errno::RECV_PARAMS, "UDP datagram size out of range"));
        }
    } else if rate.is_some() && direction != Direction::Forward {
        return Err(refuse(
            errno::UNIMPLEMENTED,
            "paced TCP sending (-b with -R or --bidir) is not supported",
        ));
    }
    Ok(rate)
}

/// Parameters that must be non-negative numbers when present.
const NUMBERS: [&str; 13] = [
    "time",
    "num",
    "blockcount",
    "len",
    "parallel",
    "window",
    "MSS",
    "omit",
    "bandwidth",
    "fqrate",
    "burst",
    "TOS",
    "pacing_timer",
];
/// Parameters that must be strings when present.
const STRINGS: [&str; 4] = ["congestion", "client_version", "title", "extra_data"];
/// Parameters that iperf3 writes as `true` or as a number.
const FLAGS: [&str; 11] = [
    "tcp",
    "udp",
    "sctp",
    "reverse",
    "bidirectional",
    "nodelay",
    "get_server_output",
    "udp_counters_64bit",
    "zerocopy",
    "repeating_payload",
    "dont_fragment",
];

/// Refuses a parameter of the wrong JSON type or a negative number, as iperf3 3.18+ does
/// (CVE-2024-53580, and the range checks after it), instead of reading it as absent.
fn check_types(v: &Value) -> Result<(), (i32, Iperf3Error)> {
    let Some(map) = v.as_object() else {
        return Err(refuse(
            errno::RECV_PARAMS,
            "parameters are not a JSON object",
        ));
    };
    for (key, x) in map {
        let ok = if NUMBERS.contains(&key.as_str()) {
            x.as_f64().is_some_and(|n| n.is_finite() && n >= 0.0)
        } else if STRINGS.contains(&key.as_str()) {
            x.is_string()
        } else if FLAGS.contains(&key.as_str()) {
            x.is_boolean() || x.as_f64().is_some_and(|n| n >= 0.0)
        } else {
            true
        };
        if !ok {
            let name: String = key.chars().take(32).collect();
            return Err(refuse(
                errno::RECV_PARAMS,
                format!("parameter '{name}' has the wrong type or a negative value"),
            ));
        }
    }
    Ok(())
}

/// Reads a client's parameters into a validated spec. The error carries the iperf3 error
/// number to send back with `SERVER_ERROR`.
pub fn spec_from_params(v: &Value) -> Result<Params, (i32, Iperf3Error)> {
    check_types(v)?;
    let protocol = protocol_of(v)?;
    if v.get("authtoken").is_some() {
        return Err(refuse(
            errno::AUTH,
            "iperf3 authentication is not supported",
        ));
    }
    let direction = match (flag(v, "reverse"), flag(v, "bidirectional")) {
        (false, false) => Direction::Forward,
        (true, false) => Direction::Reverse,
        (false, true) => Direction::Bidir,
        (true, true) => return Err(refuse(errno::RECV_PARAMS, "reverse and bidirectional")),
    };
    let len = count(v, "len")
        .filter(|&l| l > 0)
        .unwrap_or(match protocol {
            Protocol::Tcp => DEFAULT_TCP_BLOCK,
            Protocol::Udp => DEFAULT_UDP_BLOCK,
        });
    let end = end_from(v, len)?;
    let rate = rate_of(v, protocol, direction, len)?;
    let spec = TestSpec {
        protocol,
        direction,
        end,
        len_bytes: len,
        parallel: count(v, "parallel")
            .and_then(|p| u32::try_from(p).ok())
            .unwrap_or(1),
        window_bytes: count(v, "window").filter(|&w| w > 0),
        sndbuf_bytes: None,
        rcvbuf_bytes: None,
        mss_bytes: count(v, "MSS")
            .filter(|&m| m > 0)
            .map(|m| u32::try_from(m).unwrap_or(u32::MAX)),
        nodelay: flag(v, "nodelay"),
        congestion: v
            .get("congestion")
            .and_then(Value::as_str)
            .map(String::from),
        omit_s: count(v, "omit").unwrap_or(0) as f64,
        interval_s: 0.0,
        link_bps: None,
        rate_bps: rate,
        // an iperf3 client's -Z: the sending side does not copy (sendfile in iperf3)
        send_mode: if flag(v, "zerocopy") && protocol == Protocol::Tcp {
            SendMode::Splice
        } else {
            SendMode::Copy
        },
        recv_mode: RecvMode::Copy,
        test: Default::default(),
        stream_intervals: false,
        // an iperf3 client's -S
        tos: count(v, "TOS").and_then(|t| u8::try_from(t).ok()),
        server_tos: None,
        rpm_server: None,
        server_cpu: None,
        gso: false,
        gro: false,
        // an iperf3 client's -l is written as given
        fit_writes: false,
        datagram: None,
        inband_hz: None,
    };
    spec.validate()
        .map_err(|e| refuse(errno::RECV_PARAMS, e.to_string()))?;
    if (protocol == Protocol::Tcp && spec.len_bytes > MAX_BLOCKSIZE) || spec.parallel > MAX_STREAMS
    {
        return Err(refuse(
            errno::RECV_PARAMS,
            "block size or streams out of range",
        ));
    }
    Ok(Params {
        spec,
        get_server_output: flag(v, "get_server_output"),
        udp_counters_64bit: flag(v, "udp_counters_64bit"),
        client_version: v
            .get("client_version")
            .and_then(Value::as_str)
            .map(|s| s.chars().take(32).collect()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_survives_the_round_trip() {
        let spec = TestSpec {
            direction: Direction::Bidir,
            end: End::Bytes { bytes: 10 << 20 },
            len_bytes: 128 << 10,
            parallel: 3,
            window_bytes: Some(1 << 20),
            mss_bytes: Some(1400),
            nodelay: true,
            congestion: Some("cubic".into()),
            interval_s: 0.0,
            ..Default::default()
        };
        check_spec(&spec).unwrap();
        let p = spec_from_params(&params_json(&spec, "wirerate-test")).unwrap();
        assert_eq!(p.spec, spec);
        assert_eq!(p.client_version.as_deref(), Some("wirerate-test"));
    }

    #[test]
    fn a_udp_spec_asks_for_udp_at_its_rate() {
        let spec = TestSpec {
            protocol: Protocol::Udp,
            len_bytes: 1460,
            rate_bps: Some(10e6),
            ..Default::default()
        };
        check_spec(&spec).unwrap();
        let v = params_json(&spec, "t");
        let back = spec_from_params(&v).unwrap().spec;
        assert_eq!(
            back,
            TestSpec {
                interval_s: 0.0,
                ..spec
            }
        );
        assert_eq!(v["udp"], true);
        assert!(v.get("tcp").is_none());
        assert_eq!(v["bandwidth"], 10_000_000);
        assert_eq!(v["len"], 1460);
    }

    #[test]
    fn what_iperf3_3_12_sends_is_understood() {
        let v: Value = serde_json::from_str(
            r#"{"tcp":true,"omit":0,"time":1,"num":0,"blockcount":0,"parallel":2,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#,
        )
        .unwrap();
        let p = spec_from_params(&v).unwrap();
        assert_eq!(p.spec.end, End::Time { seconds: 1.0 });
        assert_eq!(p.spec.parallel, 2);
        assert_eq!(p.spec.direction, Direction::Forward);
    }

    #[test]
    fn unsupported_and_absurd_parameters_are_refused_with_a_code() {
        let cases = [
            (r#"{"sctp":true,"time":1}"#, errno::PROTOCOL),
            (r#"{"tcp":true,"udp":true,"time":1}"#, errno::PROTOCOL),
            (r#"{"udp":true,"time":1,"len":8}"#, errno::RECV_PARAMS),
            (r#"{"tcp":true,"time":1,"authtoken":"x"}"#, errno::AUTH),
            (r#"{"tcp":true,"time":0}"#, errno::RECV_PARAMS),
            (
                r#"{"tcp":true,"time":1,"parallel":100000}"#,
                errno::RECV_PARAMS,
            ),
            (r#"{"tcp":true,"time":1e300}"#, errno::RECV_PARAMS),
            (
                r#"{"tcp":true,"time":1,"len":4294967296}"#,
                errno::RECV_PARAMS,
            ),
            (
                r#"{"tcp":true,"time":1,"reverse":true,"bidirectional":true}"#,
                errno::RECV_PARAMS,
            ),
            (
                r#"{"tcp":true,"time":1,"reverse":true,"bandwidth":1000}"#,
                errno::UNIMPLEMENTED,
            ),
            (
                r#"{"tcp":true,"time":1,"congestion":"x; rm"}"#,
                errno::RECV_PARAMS,
            ),
            // regression (hostile-client review): wrong types and negative values were read
            // as absent and replaced by defaults
            (r#"{"tcp":true,"time":1,"parallel":-1}"#, errno::RECV_PARAMS),
            (r#"{"tcp":true,"time":1,"len":[]}"#, errno::RECV_PARAMS),
            (
                r#"{"udp":true,"time":1,"len":1400,"bandwidth":{}}"#,
                errno::RECV_PARAMS,
            ),
            (r#"{"tcp":true,"time":"10"}"#, errno::RECV_PARAMS),
            (r#"{"tcp":"yes","time":1}"#, errno::RECV_PARAMS),
            (
                r#"{"tcp":true,"time":1,"congestion":5}"#,
                errno::RECV_PARAMS,
            ),
            (r#"[1,2]"#, errno::RECV_PARAMS),
            // no time bound is no excuse for an absurd rate
            (
                r#"{"udp":true,"num":1000,"len":1400,"bandwidth":1e15}"#,
                errno::RECV_PARAMS,
            ),
        ];
        for (text, code) in cases {
            let v: Value = serde_json::from_str(text).unwrap();
            let err = spec_from_params(&v).unwrap_err();
            assert_eq!(err.0, code, "{text}: {:?}", err.1);
        }
    }

    #[test]
    fn specs_iperf3_cannot_express_are_caught_early() {
        let bad = [
            TestSpec {
                end: End::Blocks { blocks: 3 },
                ..Default::default()
            },
            TestSpec {
                omit_s: 0.5,
                ..Default::default()
            },
            TestSpec {
                len_bytes: 4 << 20,
                ..Default::default()
            },
            TestSpec {
                protocol: Protocol::Udp,
                len_bytes: 1400,
                ..Default::default()
            },
            TestSpec {
                protocol: Protocol::Udp,
                len_bytes: 8,
                rate_bps: Some(1e6),
                ..Default::default()
            },
        ];
        for s in bad {
            assert!(check_spec(&s).is_err(), "{s:?}");
        }
    }
}
