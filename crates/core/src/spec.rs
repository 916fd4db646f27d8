//! The test specification: what the user asked for, validated. The same type travels to the
//! server in the control protocol, so both ends read one definition.

use serde::{Deserialize, Serialize};

mod args;
mod flow;
mod pace;
pub use args::{LowerError, Param, TestArgs, DEFAULT_SEARCH_SECONDS, DEFAULT_SECONDS};
pub use flow::{stream_order, Side};
pub use pace::{
    default_datagram, DatagramChoice, DatagramRule, DEFAULT_DATAGRAMS_PER_S, MAX_DATAGRAM,
    MIN_DEFAULT_DATAGRAM, TCP_PACED_BURST,
};

/// Transport under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    #[default]
    Tcp,
    Udp,
}

/// Which way the data flows, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Client sends, server receives (iperf3's default, ttcp -t on the client).
    #[default]
    Forward,
    /// Server sends, client receives (`-R`).
    Reverse,
    /// Both at once, on separate streams (`--bidir`).
    Bidir,
}

/// One direction of a data stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flow {
    ClientToServer,
    ServerToClient,
}

impl Direction {
    /// The flows a test of this direction runs, each on `parallel` streams.
    pub fn flows(self) -> &'static [Flow] {
        match self {
            Direction::Forward => &[Flow::ClientToServer],
            Direction::Reverse => &[Flow::ServerToClient],
            Direction::Bidir => &[Flow::ClientToServer, Flow::ServerToClient],
        }
    }
}

/// When the senders stop.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum End {
    /// Send for this long (after the omitted warm-up).
    Time { seconds: f64 },
    /// Send this many bytes in all, over all streams of a flow.
    Bytes { bytes: u64 },
    /// Make this many write calls of `len` bytes per stream (ttcp's nbuf).
    Blocks { blocks: u64 },
}

/// Limits that keep a peer's spec from asking a server for absurd work.
pub mod limits {
    /// Streams per flow of request/response and sweep tests.
    pub const MAX_PARALLEL: u32 = 128;
    /// Streams per flow of a bulk test, TCP or UDP (served by a fixed pool of data workers).
    pub const MAX_PARALLEL_BULK: u32 = 10_000;
    /// Data workers one side may run (`-T`); a TCP bulk test of many streams needs buffers
    /// for at most this many, whatever its stream count.
    pub const MAX_WORKERS: u32 = 256;
    pub const MAX_LEN: u64 = 64 << 20;
    pub const MAX_SECONDS: f64 = 86_400.0;
    /// The longest test `wirerate serve` grants by default: five minutes, so no client books
    /// a public server for long, and a default sweep (1 B to 8 MiB, its bound about 134 s)
    /// still fits.
    pub const DEFAULT_SERVER_MAX_SECONDS: f64 = 300.0;
    pub const MAX_WINDOW: u64 = 1 << 30;
    pub const MAX_CONGESTION_NAME: usize = 16;
    /// Buffer memory one test may ask each side for (streams × length × flows).
    pub const MAX_BUFFERS: u64 = 1 << 30;
    /// The fastest rate a spec may ask of one stream: 1 Tbit/s.
    pub const MAX_RATE_BPS: f64 = 1e12;
    /// The fastest link a spec may state: 10 Tbit/s.
    pub const MAX_LINK_BPS: f64 = 1e13;
    /// Streams per flow that get interval reports of their own and a line each in the text
    /// summary; a test of more streams reports each flow's sums only, and its summary the
    /// slowest and fastest streams (every stream stays in the JSON), so reports stay bounded.
    pub const MAX_STREAM_INTERVALS: u32 = 128;
    /// The highest CPU number a spec may pin threads to.
    pub const MAX_CPU: u32 = 1023;
}

/// A validated description of one test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestSpec {
    pub protocol: Protocol,
    pub direction: Direction,
    pub end: End,
    /// Bytes per write and the size of the read buffer.
    pub len_bytes: u64,
    pub parallel: u32,
    /// SO_SNDBUF / SO_RCVBUF; None leaves the kernel's autotuning on.
    pub window_bytes: Option<u64>,
    /// SO_SNDBUF alone (the senders' buffer) and SO_RCVBUF alone (the receivers' buffer,
    /// which bounds the window they advertise); each overrides `window_bytes` for its side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sndbuf_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcvbuf_bytes: Option<u64>,
    pub mss_bytes: Option<u32>,
    pub nodelay: bool,
    pub congestion: Option<String>,
    /// Seconds at the start that are sent but not counted.
    pub omit_s: f64,
    /// Seconds between interval reports; 0 for none.
    pub interval_s: f64,
    /// The link's bit rate when the user states it.
    pub link_bps: Option<f64>,
    /// Target rate per stream for paced senders (UDP); None for as fast as possible.
    pub rate_bps: Option<f64>,
    /// How TCP senders hand data to the kernel, and what TCP receivers do with it.
    #[serde(default)]
    pub send_mode: SendMode,
    #[serde(default)]
    pub recv_mode: RecvMode,
    /// What kind of test: a bulk transfer (the default, and what older documents hold), a
    /// request/response test or a message-size sweep.
    #[serde(default, skip_serializing_if = "TestKind::is_stream")]
    pub test: TestKind,
    /// Interval reports per stream beside each flow's sum (tests of more than one stream,
    /// up to [`limits::MAX_STREAM_INTERVALS`]). Asked for by the client, so a peer that does
    /// not know the field sends sums only, as before.
    #[serde(default, skip_serializing_if = "is_false")]
    pub stream_intervals: bool,
    /// IP type of service (IPv4 TOS byte, IPv6 traffic class) of the data sockets, both
    /// sides; the DSCP is its upper six bits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tos: Option<u8>,
    /// The server's data sockets' TOS where it differs from the client's (`tos`): each side
    /// marks what it sends, so this is the class of the packets server → client. Absent:
    /// `tos` on both sides (a server from before the field uses `tos` on both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_tos: Option<u8>,
    /// What an rpm phase asks of the server beside its streams: the class of its answers to
    /// latency probes, its egress qdisc read over the test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm_server: Option<crate::rpm::RpmServer>,
    /// The CPU the server's stream threads are pinned to (`-A N,M`: M).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu: Option<u32>,
    /// UDP senders hand the kernel one buffer of many datagrams (UDP_SEGMENT, `--gso`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub gso: bool,
    /// UDP receivers take coalesced datagrams from the kernel (UDP_GRO, `--gro`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub gro: bool,
    /// TCP senders cut each write to whole offload segments of their connection (see
    /// [`fit_to_segments`]): set when the write size is the default, so a user's `-l` is
    /// written as given.
    #[serde(default, skip_serializing_if = "is_false")]
    pub fit_writes: bool,
    /// How a UDP test's datagram size was chosen when the user gave none (`-l`): the rule
    /// that decided and what the path carries (see [`default_datagram`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datagram: Option<DatagramChoice>,
    /// In-band requests a second on the TCP flows of each direction (`wirerate rpm`'s
    /// loaded phases; `crate::inband`): the receiving side of the flows sends them, the
    /// sending side notes where its data stood. None: no requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inband_hz: Option<f64>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The kind of test a spec asks for. Request/response and sweep tests carry their own
/// settings; the spec's common fields (parallel, end, socket options) still apply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum TestKind {
    /// Bulk transfer: `wirerate run`.
    #[default]
    Stream,
    /// Request/response transactions: `wirerate rr`.
    Rr(crate::rr::RrSpec),
    /// Message-size sweep: `wirerate sweep`.
    Sweep(crate::sweep::SweepSpec),
    /// Latency under load: `wirerate rpm`. Its phases run as stream and rr tests; this kind
    /// only labels the stored run, and a server refuses it.
    Rpm(crate::rpm::RpmSpec),
}

impl TestKind {
    pub fn is_stream(&self) -> bool {
        matches!(self, TestKind::Stream)
    }

    /// The request/response settings, for an rr test.
    pub fn rr(&self) -> Option<&crate::rr::RrSpec> {
        match self {
            TestKind::Rr(r) => Some(r),
            _ => None,
        }
    }

    /// The sweep settings, for a sweep test.
    pub fn sweep(&self) -> Option<&crate::sweep::SweepSpec> {
        match self {
            TestKind::Sweep(s) => Some(s),
            _ => None,
        }
    }

    /// A word for lists: "stream", "rr" or "sweep".
    pub fn name(&self) -> &'static str {
        match self {
            TestKind::Stream => "stream",
            TestKind::Rr(_) => "rr",
            TestKind::Sweep(_) => "sweep",
            TestKind::Rpm(_) => "rpm",
        }
    }
}

/// How a TCP sender hands data to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SendMode {
    /// write() from user memory, as applications do.
    #[default]
    Copy,
    /// vmsplice() of the user buffer into a pipe, then splice() to the socket: the kernel
    /// takes page references instead of copying.
    Splice,
}

/// What a TCP receiver does with the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RecvMode {
    /// read() into user memory, as applications do.
    #[default]
    Copy,
    /// recv(MSG_TRUNC): the kernel frees the data without copying it to the application. A
    /// sink, not what applications experience.
    Discard,
}

impl Default for TestSpec {
    fn default() -> Self {
        TestSpec {
            protocol: Protocol::Tcp,
            direction: Direction::Forward,
            end: End::Time { seconds: 10.0 },
            len_bytes: crate::spec::DEFAULT_TCP_LEN,
            parallel: 1,
            window_bytes: None,
            sndbuf_bytes: None,
            rcvbuf_bytes: None,
            mss_bytes: None,
            nodelay: false,
            congestion: None,
            omit_s: 0.0,
            interval_s: 1.0,
            link_bps: None,
            rate_bps: None,
            send_mode: SendMode::Copy,
            recv_mode: RecvMode::Copy,
            test: TestKind::Stream,
            stream_intervals: false,
            tos: None,
            server_tos: None,
            rpm_server: None,
            server_cpu: None,
            gso: false,
            gro: false,
            fit_writes: false,
            datagram: None,
            inband_hz: None,
        }
    }
}

/// The smallest UDP datagram: wirerate's header (stream, sequence, time, token).
pub const UDP_MIN_LEN: u64 = 40;

/// Default rate of a UDP stream when none is given, as in iperf3.
pub const DEFAULT_UDP_RATE_BPS: f64 = 1e6;

/// The port a wirerate server listens on, and a client or a plan dials, when none is given.
pub const DEFAULT_PORT: u16 = 5350;

/// The UDP payload that crosses a 1500-byte Ethernet MTU unfragmented over IPv4: 1500 less
/// the IPv4 header (20) and the UDP header (8). The path's size where the path's own MTU
/// cannot be read (or is not asked).
pub const ETHERNET_UDP_PAYLOAD: u64 = 1500 - 20 - 8;

/// Default TCP I/O size: large enough that syscalls are not the limit.
pub const DEFAULT_TCP_LEN: u64 = 1 << 20;

/// Buffer memory the default TCP I/O size may take over all streams of a test on one side.
pub const DEFAULT_TCP_BUFFERS: u64 = 256 << 20;

/// The default TCP I/O size for a test of `streams` streams (over all flows): 1 MiB, less
/// when that many buffers would pass [`DEFAULT_TCP_BUFFERS`], but never under 128 KiB.
pub fn default_tcp_len(streams: u32) -> u64 {
    let share = DEFAULT_TCP_BUFFERS / u64::from(streams.max(1)) / 4096 * 4096;
    share.clamp(128 << 10, DEFAULT_TCP_LEN)
}

/// Room the kernel keeps for headers below an offload segment (about MAX_TCP_HEADER).
const SEGMENT_HEADER_ROOM: u64 = 320;

/// The largest offload segment (GSO) that one transmit of a connection of `mss` bytes per
/// segment builds on a default device (64 KiB GSO limit): as many whole segments as fit, one
/// at least. 65 160 bytes (45 × 1448) on Ethernet, one 65 483-byte segment on loopback.
pub fn offload_segment(mss: u64) -> u64 {
    let mss = mss.max(1);
    ((65_536 - 1 - SEGMENT_HEADER_ROOM) / mss).max(1) * mss
}

/// A write of `len` bytes cut down to whole offload segments of a connection of `mss`
/// bytes per segment (`len` itself when it is smaller than one). A write that ends inside a
/// segment leaves a short one behind at every call; measured over loopback (MSS 65 483) one
/// stream moved 61–67 Gbit/s with 1 MiB writes and 77–83 with 16 segments (1 047 728 bytes),
/// and over a veth pair (MSS 1448) 17–29 Gbit/s with writes of 64, 128, 192 or 256 KiB and
/// 58–72 with 1, 2, 3 or 4 segments of 65 160.
pub fn fit_to_segments(len: u64, mss: u64) -> u64 {
    let unit = offload_segment(mss);
    if len < unit {
        len
    } else {
        len / unit * unit
    }
}

/// Why a spec is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    #[error("{0}")]
    Invalid(String),
}

pub(crate) fn invalid(msg: impl Into<String>) -> SpecError {
    SpecError::Invalid(msg.into())
}

impl TestSpec {
    /// Checks every field against sane bounds. A server runs this on what a peer sends, so it
    /// must reject anything that would make it allocate, wait or spawn without limit.
    /// The TOS byte `side`'s data sockets carry (see `server_tos`).
    pub fn tos_of(&self, side: Side) -> Option<u8> {
        match side {
            Side::Client => self.tos,
            Side::Server => self.server_tos.or(self.tos),
        }
    }

    pub fn validate(&self) -> Result<(), SpecError> {
        let max = self.max_parallel();
        if self.parallel == 0 || self.parallel > max {
            return Err(invalid(format!("parallel streams must be 1 to {max}")));
        }
        match &self.test {
            TestKind::Stream => self.validate_lengths()?,
            TestKind::Rr(rr) => rr.validate(self)?,
            TestKind::Sweep(sw) => sw.validate(self)?,
            TestKind::Rpm(_) => {
                return Err(invalid(
                    "an rpm run is a sequence of tests: it is never sent as one".to_string(),
                ))
            }
        }
        self.validate_common()
    }

    /// The most streams per flow this kind of test may ask for.
    pub fn max_parallel(&self) -> u32 {
        match (&self.test, self.protocol) {
            (TestKind::Stream, _) => limits::MAX_PARALLEL_BULK,
            _ => limits::MAX_PARALLEL,
        }
    }

    /// Whether a side serves this test's streams on a pool of data workers: a bulk test of
    /// more than one stream, UDP or TCP of copied writes (a client's `-F` keeps a thread per
    /// stream on its side).
    pub fn pooled(&self) -> bool {
        let protocol = match self.protocol {
            Protocol::Tcp => self.send_mode == SendMode::Copy,
            Protocol::Udp => true,
        };
        self.test.is_stream() && protocol && self.streams() > 1
    }

    /// The streams of the whole test: `parallel` in each flow of its direction, so twice
    /// that both ways (`--bidir`).
    pub fn streams(&self) -> u32 {
        let flows = self.direction.flows().len() as u32;
        self.parallel.saturating_mul(flows)
    }

    /// How many streams of a side hold a buffer of their own: every stream, except in a bulk
    /// test on data workers ([`TestSpec::pooled`]; at most [`limits::MAX_WORKERS`]), each of
    /// which holds one for all its streams.
    pub fn buffered_streams(&self) -> u64 {
        let streams = u64::from(self.streams());
        if self.pooled() {
            streams.min(u64::from(limits::MAX_WORKERS))
        } else {
            streams
        }
    }

    /// Write length and buffer memory of a bulk transfer.
    fn validate_lengths(&self) -> Result<(), SpecError> {
        if self.len_bytes == 0 || self.len_bytes > limits::MAX_LEN {
            return Err(invalid(format!(
                "length must be 1 byte to {} MiB",
                limits::MAX_LEN >> 20
            )));
        }
        let buffers = self.len_bytes * self.buffered_streams();
        if buffers > limits::MAX_BUFFERS {
            return Err(invalid(format!(
                "streams × length may use at most {} MiB of buffers",
                limits::MAX_BUFFERS >> 20
            )));
        }
        if self.protocol == Protocol::Udp && !(UDP_MIN_LEN..=MAX_DATAGRAM).contains(&self.len_bytes)
        {
            return Err(invalid(format!(
                "a UDP datagram must carry {UDP_MIN_LEN} to 65507 bytes"
            )));
        }
        Ok(())
    }

    /// The checks every kind of test shares: end, socket options, intervals, rates.
    fn validate_common(&self) -> Result<(), SpecError> {
        if (self.gso || self.gro) && !(self.protocol == Protocol::Udp && self.test.is_stream()) {
            return Err(invalid("GSO and GRO are for UDP stream tests (-u)"));
        }
        match self.end {
            End::Time { seconds } => {
                if !(seconds.is_finite() && seconds > 0.0 && seconds <= limits::MAX_SECONDS) {
                    return Err(invalid(
                        "time must be more than 0 and at most 86400 seconds",
                    ));
                }
            }
            End::Bytes { bytes } => {
                if bytes == 0 {
                    return Err(invalid("byte count must be positive"));
                }
            }
            End::Blocks { blocks } => {
                if blocks == 0 {
                    return Err(invalid("block count must be positive"));
                }
                if blocks.checked_mul(self.len_bytes).is_none() {
                    return Err(invalid("blocks × length overflows"));
                }
            }
        }
        for w in [self.window_bytes, self.sndbuf_bytes, self.rcvbuf_bytes]
            .into_iter()
            .flatten()
        {
            if w == 0 || w > limits::MAX_WINDOW {
                return Err(invalid("socket buffer sizes must be 1 byte to 1 GiB"));
            }
        }
        if let Some(m) = self.mss_bytes {
            if !(88..=65_535).contains(&m) {
                return Err(invalid("MSS must be 88 to 65535 bytes"));
            }
        }
        if let Some(c) = &self.congestion {
            if c.is_empty()
                || c.len() > limits::MAX_CONGESTION_NAME
                || !c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                return Err(invalid("congestion algorithm name is not valid"));
            }
        }
        if !(self.omit_s.is_finite() && (0.0..=limits::MAX_SECONDS).contains(&self.omit_s)) {
            return Err(invalid("omit must be 0 to 86400 seconds"));
        }
        if !(self.interval_s == 0.0
            || (self.interval_s.is_finite() && (0.01..=3600.0).contains(&self.interval_s)))
        {
            return Err(invalid("interval must be 0 (none) or 0.01 to 3600 seconds"));
        }
        if self.protocol == Protocol::Udp
            && (self.send_mode != SendMode::Copy || self.recv_mode != RecvMode::Copy)
        {
            return Err(invalid(
                "zero-copy sending and discarding receivers are for TCP",
            ));
        }
        if self.server_cpu.is_some_and(|c| c > limits::MAX_CPU) {
            return Err(invalid(format!("CPU numbers go to {}", limits::MAX_CPU)));
        }
        for (name, v, max) in [
            ("link rate", self.link_bps, limits::MAX_LINK_BPS),
            ("rate", self.rate_bps, limits::MAX_RATE_BPS),
        ] {
            if let Some(v) = v {
                if !(v.is_finite() && v > 0.0) {
                    return Err(invalid(format!("{name} must be positive")));
                }
                if v > max {
                    return Err(invalid(format!(
                        "{name} must be at most {} Tbit/s",
                        max / 1e12
                    )));
                }
            }
        }
        Ok(())
    }

    /// Total bytes one stream of a flow sends, when the test ends by count.
    pub fn bytes_per_stream(&self, stream_index: u32) -> Option<u64> {
        match self.end {
            End::Time { .. } => None,
            End::Blocks { blocks } => Some(blocks.saturating_mul(self.len_bytes)),
            End::Bytes { bytes } => {
                let n = u64::from(self.parallel.max(1));
                let base = bytes / n;
                // the remainder goes to the first streams, one byte each
                let extra = u64::from(u64::from(stream_index) < bytes % n);
                Some(base + extra)
            }
        }
    }

    /// Whether the streams of a flow report intervals of their own.
    pub fn per_stream_intervals(&self) -> bool {
        self.stream_intervals
            && self.parallel > 1
            && self.parallel <= limits::MAX_STREAM_INTERVALS
            && self.test.is_stream()
    }

    /// Whether the text summary lists every stream (see [`limits::MAX_STREAM_INTERVALS`]).
    pub fn lists_each_stream(&self) -> bool {
        self.parallel <= limits::MAX_STREAM_INTERVALS
    }

    /// Seconds the senders run, warm-up included, when the test ends by time.
    pub fn send_seconds(&self) -> Option<f64> {
        match self.end {
            End::Time { seconds } => Some(seconds + self.omit_s),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_fit_whole_offload_segments() {
        assert_eq!(offload_segment(1448), 45 * 1448);
        assert_eq!(offload_segment(65_483), 65_483);
        assert_eq!(offload_segment(0), 65_215);
        assert_eq!(fit_to_segments(1 << 20, 65_483), 16 * 65_483);
        assert_eq!(fit_to_segments(1 << 20, 1448), 16 * 65_160);
        assert_eq!(fit_to_segments(128 << 10, 1448), 2 * 65_160);
        // under one segment: as asked
        assert_eq!(fit_to_segments(4096, 1448), 4096);
        assert_eq!(fit_to_segments(65_000, 65_483), 65_000);
    }

    #[test]
    fn streams_are_parallel_in_each_flow() {
        let spec = |direction, parallel| TestSpec {
            direction,
            parallel,
            ..Default::default()
        };
        assert_eq!(spec(Direction::Forward, 4).streams(), 4);
        assert_eq!(spec(Direction::Reverse, 4).streams(), 4);
        assert_eq!(spec(Direction::Bidir, 4).streams(), 8);
        assert_eq!(spec(Direction::Bidir, u32::MAX).streams(), u32::MAX);
        // what an Ethernet path carries when its own MTU cannot be read
        assert_eq!(ETHERNET_UDP_PAYLOAD, 1472);
    }

    #[test]
    fn default_is_valid() {
        TestSpec::default().validate().unwrap();
    }

    #[test]
    fn bounds_are_enforced() {
        let bad = [
            TestSpec {
                parallel: 0,
                ..Default::default()
            },
            TestSpec {
                parallel: 100_000,
                ..Default::default()
            },
            TestSpec {
                len_bytes: 0,
                ..Default::default()
            },
            TestSpec {
                end: End::Time { seconds: f64::NAN },
                ..Default::default()
            },
            TestSpec {
                end: End::Blocks { blocks: u64::MAX },
                ..Default::default()
            },
            TestSpec {
                congestion: Some("bbr; rm -rf".into()),
                ..Default::default()
            },
            // 128 streams each way of 64 MiB buffers would be 16 GiB on each side
            TestSpec {
                parallel: 128,
                len_bytes: 64 << 20,
                direction: Direction::Bidir,
                ..Default::default()
            },
            TestSpec {
                interval_s: -1.0,
                ..Default::default()
            },
            // a rate no stream can reach: refused, not attempted
            TestSpec {
                rate_bps: Some(1e15),
                ..Default::default()
            },
        ];
        for s in bad {
            assert!(s.validate().is_err(), "{s:?}");
        }
    }

    #[test]
    fn bytes_split_over_streams_exactly() {
        let s = TestSpec {
            parallel: 3,
            end: End::Bytes { bytes: 10 },
            ..Default::default()
        };
        let per: Vec<u64> = (0..3).map(|i| s.bytes_per_stream(i).unwrap()).collect();
        assert_eq!(per, vec![4, 3, 3]);
    }

    #[test]
    fn spec_round_trips_through_json() {
        let s = TestSpec {
            direction: Direction::Bidir,
            congestion: Some("cubic".into()),
            window_bytes: Some(65536),
            ..Default::default()
        };
        let j = serde_json::to_string(&s).unwrap();
        let back: TestSpec = serde_json::from_str(&j).unwrap();
        assert_eq!(s, back);
    }
}
