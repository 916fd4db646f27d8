//! A test's parameters as a user gives them, before any default: what `wirerate run`'s
//! flags and a plan's `[test]` table both fill. [`TestArgs::lower`] turns them into a
//! [`TestSpec`] and holds every default and every check of that step, so the command line
//! and plans cannot drift apart.

use super::{
    default_datagram, default_tcp_len, Direction, End, Protocol, RecvMode, SendMode, SpecError,
    TestSpec, DEFAULT_UDP_RATE_BPS,
};

/// Seconds a test runs when no end is given.
pub const DEFAULT_SECONDS: f64 = 10.0;

/// Seconds each trial of a rate search runs when no end is given.
pub const DEFAULT_SEARCH_SECONDS: f64 = 2.0;

/// The parameters of a bulk test, every one optional or off; `lower` fills in the rest.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TestArgs {
    /// UDP instead of TCP (`-u`).
    pub udp: bool,
    /// Seconds to send (`-t`).
    pub seconds: Option<f64>,
    /// Bytes to send in all (`-n`).
    pub bytes: Option<u64>,
    /// Write calls per stream (`-k`).
    pub blocks: Option<u64>,
    /// The size of the file a sending client sends (`-F` with neither -t, -n nor -k: the
    /// file once).
    pub file_bytes: Option<u64>,
    /// The data comes from a file (`-F`): writes are the file's, never cut to segments.
    pub from_file: bool,
    /// Bytes per write, or the UDP datagram (`-l`).
    pub len: Option<u64>,
    /// Target rate per stream in bit/s (`-b`); 0 asks for no pacing.
    pub bitrate: Option<f64>,
    /// Streams per flow (`-P`).
    pub parallel: Option<u32>,
    pub reverse: bool,
    pub bidir: bool,
    pub window: Option<u64>,
    pub sndbuf: Option<u64>,
    pub rcvbuf: Option<u64>,
    pub mss: Option<u32>,
    pub nodelay: bool,
    pub congestion: Option<String>,
    /// Seconds of warm-up not counted (`-O`).
    pub omit: Option<f64>,
    /// Seconds between interval reports (`-i`).
    pub interval: Option<f64>,
    /// The link's bit rate where it cannot be detected (`--link`).
    pub link: Option<f64>,
    /// Zero-copy sending (`-Z`).
    pub zerocopy: bool,
    /// Receivers discard the data in the kernel (`--discard`).
    pub discard: bool,
    pub gso: bool,
    pub gro: bool,
    /// The data sockets' TOS byte (`--tos`, `--dscp`).
    pub tos: Option<u8>,
    /// The CPU the server pins its streams to (`-A N,M`: M).
    pub server_cpu: Option<u32>,
    /// The rate is searched (`--find-max`): the datagram fits the path alone, a trial runs
    /// [`DEFAULT_SEARCH_SECONDS`] unless told, and one datagram need not fit in it at the
    /// starting rate.
    pub rate_search: bool,
}

/// A parameter a lowering may refuse by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    Seconds,
    Interval,
    Omit,
}

impl Param {
    /// The command line's flag.
    pub fn flag(self) -> &'static str {
        match self {
            Param::Seconds => "-t",
            Param::Interval => "-i",
            Param::Omit => "-O",
        }
    }

    /// A plan's key in `[test]`.
    pub fn key(self) -> &'static str {
        match self {
            Param::Seconds => "seconds",
            Param::Interval => "interval",
            Param::Omit => "omit",
        }
    }
}

/// Why arguments do not make a test; said with the command line's flags (see
/// [`LowerError::in_plan_words`] for a plan's keys).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LowerError {
    #[error("{} must be positive", .0.flag())]
    NotPositive(Param),
    #[error("{} must be 0 or more", .0.flag())]
    Negative(Param),
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// One datagram at the asked rate takes longer than the test.
    #[error("{0} (give a smaller -l, a higher -b or a longer -t)")]
    Unsendable(super::pace::DatagramTooSlow),
}

impl LowerError {
    /// The same refusal worded for a plan's `[test]` table.
    pub fn in_plan_words(&self) -> String {
        match self {
            LowerError::NotPositive(p) => format!("{} must be positive", p.key()),
            LowerError::Negative(p) => format!("{} must be 0 or more", p.key()),
            LowerError::Spec(e) => e.to_string(),
            LowerError::Unsendable(e) => format!("{e} (give a higher bitrate or more seconds)"),
        }
    }
}

impl TestArgs {
    /// The spec these arguments ask for, with every default filled in. `path_udp` is the
    /// largest datagram that crosses the path unfragmented: the default datagram fits it
    /// and the rate ([`default_datagram`]).
    pub fn lower(&self, path_udp: u64) -> Result<TestSpec, LowerError> {
        // said with the parameter's name, before the spec's own check names the field (NaN
        // fails too)
        if self.seconds.is_some_and(|t| t.is_nan() || t <= 0.0) {
            return Err(LowerError::NotPositive(Param::Seconds));
        }
        for (p, v) in [(Param::Interval, self.interval), (Param::Omit, self.omit)] {
            if v.is_some_and(|v| v.is_nan() || v < 0.0) {
                return Err(LowerError::Negative(p));
            }
        }
        let protocol = if self.udp {
            Protocol::Udp
        } else {
            Protocol::Tcp
        };
        let rate_bps = match protocol {
            Protocol::Tcp => self.bitrate.filter(|&r| r > 0.0),
            Protocol::Udp => match self.bitrate {
                Some(0.0) => None,
                Some(r) => Some(r),
                None => Some(DEFAULT_UDP_RATE_BPS),
            },
        };
        // a rate search tries many rates with one datagram: the path's
        let (udp_len, datagram) =
            default_datagram(path_udp, rate_bps.filter(|_| !self.rate_search));
        let direction = if self.bidir {
            Direction::Bidir
        } else if self.reverse {
            Direction::Reverse
        } else {
            Direction::Forward
        };
        let parallel = self.parallel.unwrap_or(1);
        let end = self.end();
        let spec = TestSpec {
            protocol,
            direction,
            len_bytes: self.len.unwrap_or(match protocol {
                Protocol::Tcp => {
                    default_tcp_len(parallel.saturating_mul(if self.bidir { 2 } else { 1 }))
                }
                Protocol::Udp => udp_len,
            }),
            parallel,
            window_bytes: self.window,
            sndbuf_bytes: self.sndbuf,
            rcvbuf_bytes: self.rcvbuf,
            mss_bytes: self.mss,
            nodelay: self.nodelay,
            congestion: self.congestion.clone(),
            omit_s: self.omit.unwrap_or(0.0),
            interval_s: self.interval.unwrap_or(1.0),
            link_bps: self.link,
            rate_bps,
            send_mode: if self.zerocopy {
                SendMode::Splice
            } else {
                SendMode::Copy
            },
            recv_mode: if self.discard {
                RecvMode::Discard
            } else {
                RecvMode::Copy
            },
            test: Default::default(),
            stream_intervals: parallel > 1,
            tos: self.tos,
            server_tos: None,
            rpm_server: None,
            inband_hz: None,
            server_cpu: self.server_cpu,
            gso: self.gso,
            gro: self.gro,
            // the default write size is cut to whole offload segments; -l is written as
            // given, as are -k blocks of it (the blocks are the test) and -F files
            fit_writes: self.len.is_none()
                && protocol == Protocol::Tcp
                && !matches!(end, End::Blocks { .. })
                && !self.from_file,
            datagram: (self.len.is_none() && protocol == Protocol::Udp).then_some(datagram),
            end,
        };
        spec.validate()?;
        if !self.rate_search {
            spec.check_datagram_fits_time()
                .map_err(LowerError::Unsendable)?;
        }
        Ok(spec)
    }

    /// How the test ends: the bytes, the blocks or the seconds given, else a file once,
    /// else a time.
    fn end(&self) -> End {
        match (self.seconds, self.bytes, self.blocks, self.file_bytes) {
            (_, Some(bytes), _, _) => End::Bytes { bytes },
            (_, _, Some(blocks), _) => End::Blocks { blocks },
            (Some(seconds), _, _, _) => End::Time { seconds },
            _ if self.rate_search => End::Time {
                seconds: DEFAULT_SEARCH_SECONDS,
            },
            (_, _, _, Some(bytes)) => End::Bytes { bytes },
            _ => End::Time {
                seconds: DEFAULT_SECONDS,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{DatagramRule, DEFAULT_TCP_LEN, ETHERNET_UDP_PAYLOAD};

    #[test]
    fn nothing_given_is_ten_seconds_of_one_tcp_stream() {
        let s = TestArgs::default().lower(ETHERNET_UDP_PAYLOAD).unwrap();
        assert_eq!(s.end, End::Time { seconds: 10.0 });
        assert_eq!((s.protocol, s.parallel), (Protocol::Tcp, 1));
        assert_eq!(s.len_bytes, DEFAULT_TCP_LEN);
        assert!(s.fit_writes && !s.stream_intervals);
        assert_eq!((s.interval_s, s.omit_s, s.rate_bps), (1.0, 0.0, None));
    }

    #[test]
    fn udp_is_paced_and_its_datagram_fits_the_path_and_the_rate() {
        let udp = TestArgs {
            udp: true,
            ..Default::default()
        };
        let s = udp.lower(1472).unwrap();
        assert_eq!(s.rate_bps, Some(DEFAULT_UDP_RATE_BPS));
        // 1 Mbit/s sends 100 datagrams a second of 1250 bytes
        assert_eq!(s.len_bytes, 1250);
        assert_eq!(s.datagram.map(|d| d.rule), Some(DatagramRule::Rate));
        let unpaced = TestArgs {
            bitrate: Some(0.0),
            ..udp.clone()
        };
        assert_eq!(unpaced.lower(1472).unwrap().rate_bps, None);
        // a search keeps the path's datagram and tries its trials for 2 s
        let search = TestArgs {
            rate_search: true,
            ..udp
        };
        let s = search.lower(1472).unwrap();
        assert_eq!((s.len_bytes, s.end), (1472, End::Time { seconds: 2.0 }));
        // TCP takes a rate of 0 as none
        let tcp = TestArgs {
            bitrate: Some(0.0),
            ..Default::default()
        };
        assert_eq!(tcp.lower(1472).unwrap().rate_bps, None);
    }

    #[test]
    fn many_streams_shrink_the_default_write_and_ask_for_stream_intervals() {
        let many = TestArgs {
            parallel: Some(1000),
            bidir: true,
            ..Default::default()
        };
        let s = many.lower(1472).unwrap();
        assert_eq!(s.len_bytes, default_tcp_len(2000));
        assert!(s.len_bytes < DEFAULT_TCP_LEN && s.stream_intervals);
    }

    #[test]
    fn ends_in_order_bytes_blocks_seconds_then_a_file() {
        let a = TestArgs {
            seconds: Some(3.0),
            file_bytes: Some(500),
            from_file: true,
            ..Default::default()
        };
        let s = a.lower(1472).unwrap();
        assert_eq!(s.end, End::Time { seconds: 3.0 });
        assert!(!s.fit_writes, "a file's writes are its own");
        let once = TestArgs {
            seconds: None,
            ..a.clone()
        };
        assert_eq!(once.lower(1472).unwrap().end, End::Bytes { bytes: 500 });
        let blocks = TestArgs {
            blocks: Some(4),
            from_file: false,
            ..a
        };
        let s = blocks.lower(1472).unwrap();
        assert_eq!(s.end, End::Blocks { blocks: 4 });
        assert!(!s.fit_writes, "blocks are written as given");
    }

    #[test]
    fn refusals_name_the_parameter_each_way() {
        let e = TestArgs {
            seconds: Some(-1.0),
            ..Default::default()
        }
        .lower(1472)
        .unwrap_err();
        assert_eq!(e, LowerError::NotPositive(Param::Seconds));
        assert_eq!(e.to_string(), "-t must be positive");
        assert_eq!(e.in_plan_words(), "seconds must be positive");
        let e = TestArgs {
            interval: Some(f64::NAN),
            ..Default::default()
        }
        .lower(1472)
        .unwrap_err();
        assert_eq!(e.to_string(), "-i must be 0 or more");
        let e = TestArgs {
            parallel: Some(0),
            ..Default::default()
        }
        .lower(1472)
        .unwrap_err();
        assert!(matches!(e, LowerError::Spec(_)), "{e:?}");
        // one 65 507-byte datagram at 200 kbit/s takes 2.6 s: not in a 1 s test
        let e = TestArgs {
            udp: true,
            len: Some(65_507),
            bitrate: Some(200e3),
            seconds: Some(1.0),
            ..Default::default()
        }
        .lower(1472)
        .unwrap_err();
        assert!(e.to_string().contains("-l"), "{e}");
        assert!(e.in_plan_words().contains("bitrate"), "{e}");
    }
}
