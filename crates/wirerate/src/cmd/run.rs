//! `wirerate run [HOST]`: one test against a server, or against an embedded loopback server
//! when no HOST is given.

use std::io::{IsTerminal, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use clap::ValueEnum;
use wirerate_core::assemble::{assemble, Context};
use wirerate_core::spec::{
    End, Flow, RecvMode, SendMode, DEFAULT_PORT, DEFAULT_UDP_RATE_BPS, ETHERNET_UDP_PAYLOAD,
};
use wirerate_core::units::{BitRate, Bytes};
use wirerate_core::{Direction, Protocol, RunResult, TestSpec};
use wirerate_engine::EngineError;
use wirerate_engine::{run_test, ClientConfig, Observer, Server, ServerConfig};
use wirerate_proto::ProtoError;
use wirerate_render::export::{self, Output};
use wirerate_render::text;

use crate::cmd::habits::{ClientArgs, OutputArgs};
use crate::cmd::live::Printer;
use crate::cmd::results::{open_store, store_and_say, StoreArgs};
use crate::exit::usage;
use crate::link::link_facts;
use wirerate_store::Store;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Human report with interval lines and a summary table
    Text,
    /// One JSON document following the result schema
    Json,
    /// Classic ttcp report lines (ttcp-t and ttcp-r), for comparison with old logs
    Ttcp,
}

impl From<Format> for export::Format {
    fn from(f: Format) -> export::Format {
        match f {
            Format::Text => export::Format::Text,
            Format::Json => export::Format::Json,
            Format::Ttcp => export::Format::Ttcp,
        }
    }
}

/// Sizes take K, M, G, T as powers of 1024 (128K = 131072 bytes); rates take K, M, G, T as
/// powers of 1000 (10M = 10000000 bit/s).
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Sizes (-n, -l, -w) take K, M, G, T as powers of 1024: 128K = 131072 bytes.\n\
Rates (-b, --link) take K, M, G, T as powers of 1000: 10M = 10000000 bit/s.\n\
Goodput is what the receiving application got, over the receiver's window.\n\n\
iperf3's spellings: `wirerate -c HOST ...` is `wirerate run HOST ...`; -J is --json.\n\n\
Exit status: 0 success, 1 the test failed (peer refused, unreachable, silent, or a stream broke; or the result could not be stored), 2 bad usage, 130 interrupted (Ctrl-C: the figures until then are printed and stored)."
)]
pub struct Args {
    /// Server to test against; with none, an embedded server on loopback is used
    pub host: Option<String>,
    /// Third-party test: ask the agent on this host (a `wirerate serve
    /// --allow-third-party`, HOST or HOST:PORT) to run the test against --to and send back
    /// the result, which is printed and stored as if it ran here; --tls, --user and
    /// --client-cert authenticate to the agent (never passed on to --to)
    #[arg(long, value_name = "HOST[:PORT]", requires = "to", conflicts_with_all = ["host", "iperf3", "find_max", "repeat", "until_ci"])]
    pub from: Option<String>,
    /// The server the --from agent tests against (HOST or HOST:PORT, as the agent reaches it)
    #[arg(long, value_name = "HOST[:PORT]", requires = "from")]
    pub to: Option<String>,
    /// Server port [default: 5350; 5201 with --iperf3]
    #[arg(short = 'p', long)]
    pub port: Option<u16>,
    /// Speak iperf3's protocol: test against an iperf3 server (TCP or UDP, -t or -n)
    #[arg(long, requires = "host", conflicts_with_all = ["find_max", "blocks"])]
    pub iperf3: bool,
    /// Seconds to send (default 10)
    #[arg(short = 't', long, value_name = "SECONDS", conflicts_with_all = ["bytes", "blocks"], allow_negative_numbers = true)]
    pub time: Option<f64>,
    /// Bytes to send in all, split over the streams (e.g. 1G)
    #[arg(short = 'n', long, value_name = "SIZE", value_parser = parse_size, conflicts_with = "blocks")]
    pub bytes: Option<u64>,
    /// Write calls per stream, each of --len bytes (ttcp's nbuf; iperf3's -k)
    #[arg(short = 'k', long, visible_alias = "blockcount", value_name = "N")]
    pub blocks: Option<u64>,
    /// Bytes per write call, written as given (TCP default: 1M cut to whole offload segments
    /// of the connection, e.g. 16 × 65 483 on loopback); for UDP the datagram size (default:
    /// the largest that is not fragmented on the path, at most 1/100 s of the rate, 64 at
    /// least)
    #[arg(short = 'l', long, value_name = "SIZE", value_parser = parse_size)]
    pub len: Option<u64>,
    /// UDP instead of TCP
    #[arg(short = 'u', long)]
    pub udp: bool,
    /// Search for the highest UDP rate whose loss stays within --loss (RFC 2544 style),
    /// judging each rate by the median loss of its trials: two, a third when they disagree
    /// (five at most), and the rate found tried once more at the end; 32 trials at most,
    /// each -t seconds (default 2), each stored as a run with --label, the search's trials
    /// under one group
    #[arg(long)]
    pub find_max: bool,
    /// Loss limit in percent for --find-max
    #[arg(long, value_name = "PCT", default_value_t = 0.1, requires = "find_max")]
    pub loss: f64,
    /// Target rate of each stream. UDP: paced evenly (default 1M; 0 unpaced). TCP: the
    /// kernel paces each stream (SO_MAX_PACING_RATE; default unpaced)
    #[arg(short = 'b', long, value_name = "RATE", value_parser = parse_rate_or_zero)]
    pub bitrate: Option<f64>,
    /// iperf3's per-stream fair-queue pacing: in wirerate that is TCP's -b (the kernel
    /// paces each stream with SO_MAX_PACING_RATE), so this is the same as -b RATE
    #[arg(long, value_name = "RATE", value_parser = parse_rate_or_zero, conflicts_with_all = ["bitrate", "udp"])]
    pub fq_rate: Option<f64>,
    /// Zero-copy sending: vmsplice the buffer into a pipe and splice it to the socket
    /// instead of write() (TCP; reported in the result's spec.send_mode)
    #[arg(short = 'Z', long, conflicts_with = "udp")]
    pub zerocopy: bool,
    /// Receivers discard data in the kernel (recv MSG_TRUNC) instead of copying it: a sink,
    /// not what applications see (TCP; reported as spec.recv_mode)
    #[arg(long, visible_alias = "skip-rx-copy", conflicts_with = "udp")]
    pub discard: bool,
    /// Parallel streams per flow, up to 10000. The streams of a test of more than one stream
    /// share a fixed pool of data workers on each side (--threads); -Z and -F streams have
    /// a thread each. Past 256 TCP streams the default write size shrinks (to 128 KiB at
    /// least)
    #[arg(short = 'P', long, value_name = "N", default_value_t = 1)]
    pub parallel: u32,
    /// Data workers on this side (and the embedded server's) for a test of more than one
    /// stream, 1 to 256; default one per CPU (half the CPUs when the server is on this host,
    /// up to 64 streams per worker), or one per stream for a few streams that would not share
    /// the workers evenly. With the server on this host and 64 streams or more per worker,
    /// worker N of each side runs on the Nth CPU, so both ends of a stream share a core
    /// (-A pins them instead; -T is iperf3's --title)
    #[arg(long, value_name = "N", value_parser = parse_threads)]
    pub threads: Option<usize>,
    /// UDP senders hand the kernel one buffer of up to 32 datagrams per call, cut into
    /// datagrams late in the stack (UDP GSO, UDP_SEGMENT; Linux 4.18+)
    #[arg(long, requires = "udp")]
    pub gso: bool,
    /// UDP receivers take datagrams coalesced by the kernel, many per copy (UDP GRO,
    /// UDP_GRO; Linux 5.0+)
    #[arg(long, requires = "udp")]
    pub gro: bool,
    /// Reverse: the server sends, the client receives
    #[arg(short = 'R', long, conflicts_with = "bidir")]
    pub reverse: bool,
    /// Both directions at once, on separate streams
    #[arg(long)]
    pub bidir: bool,
    /// Socket buffer size (SO_SNDBUF/SO_RCVBUF); turns autotuning off
    #[arg(short = 'w', long, value_name = "SIZE", value_parser = parse_size)]
    pub window: Option<u64>,
    /// The senders' socket buffer alone (SO_SNDBUF), e.g. to see a send-buffer limit
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub sndbuf: Option<u64>,
    /// The receivers' socket buffer alone (SO_RCVBUF): bounds the window they advertise
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub rcvbuf: Option<u64>,
    /// TCP maximum segment size
    #[arg(short = 'M', long, value_name = "BYTES")]
    pub mss: Option<u32>,
    /// Disable Nagle's algorithm (TCP_NODELAY)
    #[arg(short = 'N', long)]
    pub nodelay: bool,
    /// Congestion control algorithm (e.g. cubic, bbr)
    #[arg(short = 'C', long, value_name = "ALGO")]
    pub congestion: Option<String>,
    /// Use IPv4 only
    #[arg(short = '4', conflicts_with = "ipv6")]
    pub ipv4: bool,
    /// Use IPv6 only
    #[arg(short = '6')]
    pub ipv6: bool,
    /// Local address to bind to
    #[arg(short = 'B', long, value_name = "ADDR")]
    pub bind: Option<IpAddr>,
    #[command(flatten)]
    pub tls: crate::cmd::tls::ClientTlsArgs,
    /// Seconds of warm-up sent at the start and not counted; what crossed during it and is
    /// read later (held behind a loss, or queued) is not counted either. Every figure,
    /// intervals and I/O calls included, counts the same window after it
    #[arg(
        short = 'O',
        long,
        value_name = "SECONDS",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    pub omit: f64,
    /// Seconds between interval reports; 0 for none. A last interval shorter than a tenth
    /// of this is folded into the one before
    #[arg(
        short = 'i',
        long,
        value_name = "SECONDS",
        default_value_t = 1.0,
        allow_negative_numbers = true
    )]
    pub interval: f64,
    /// The link's bit rate, where it cannot be detected (e.g. 10G)
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub link: Option<f64>,
    /// Print one JSON document instead of the human report
    #[arg(short = 'J', long, conflicts_with = "format")]
    pub json: bool,
    /// Print one JSON object per line as the test runs (iperf3's --json-stream): a start
    /// event, one per interval, and an end event holding the whole result
    #[arg(long, conflicts_with_all = ["json", "format", "repeat", "until_ci", "find_max", "from"])]
    pub json_stream: bool,
    /// Output format
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// The full text report: I/O calls, per-core CPU, the Performance Index, TCP_INFO per
    /// stream, socket buffers, interfaces, the wire and every line of the Why (the default
    /// is a short summary with the Why's verdict and first advice)
    #[arg(short = 'V', long)]
    pub verbose: bool,
    /// Seconds a silent peer is waited for before the test fails
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 10.0,
        allow_negative_numbers = true
    )]
    pub idle_timeout: f64,
    /// The idle timeout in milliseconds, as iperf3 spells it (sets --idle-timeout)
    #[arg(long, value_name = "MS", conflicts_with = "idle_timeout")]
    pub rcv_timeout: Option<u64>,
    /// Run the test N times, each on fresh connections, and summarize them (min, median,
    /// mean, max, standard deviation, 95 % confidence interval)
    #[arg(long, value_name = "N", conflicts_with_all = ["until_ci", "find_max"])]
    pub repeat: Option<u32>,
    /// Repeat until the 95 % confidence half-width of goodput is within PCT % of the mean
    #[arg(long, value_name = "PCT", conflicts_with = "find_max")]
    pub until_ci: Option<f64>,
    /// The most runs --until-ci makes
    #[arg(long, value_name = "N", default_value_t = 30, requires = "until_ci")]
    pub max_runs: u32,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub habits: ClientArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `--threads`: 1 to the most data workers a side may run.
pub fn parse_threads(s: &str) -> Result<usize, String> {
    let max = wirerate_engine::pool::MAX_THREADS;
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("must be a whole number of workers, 1 to {max}")),
    }
}

pub fn parse_size(s: &str) -> Result<u64, String> {
    Bytes::parse(s).map(|b| b.0).map_err(|e| e.to_string())
}

fn parse_rate_or_zero(s: &str) -> Result<f64, String> {
    if s.trim() == "0" {
        return Ok(0.0);
    }
    parse_rate(s)
}

pub fn parse_rate(s: &str) -> Result<f64, String> {
    BitRate::parse(s).map(|b| b.0).map_err(|e| e.to_string())
}

/// Turns the arguments into a validated spec, or a usage error. `path_udp` is the largest
/// datagram that crosses the path unfragmented; the default datagram fits it and the rate
/// (`default_datagram`).
pub fn spec_from(a: &Args, path_udp: u64) -> anyhow::Result<TestSpec> {
    // said with the flag's name, before the spec's own check names the field (NaN fails too)
    if a.time.is_some_and(|t| t.is_nan() || t <= 0.0) {
        return usage("-t must be positive");
    }
    for (flag, v) in [("-i", a.interval), ("-O", a.omit)] {
        if v.is_nan() || v < 0.0 {
            return usage(format!("{flag} must be 0 or more"));
        }
    }
    let protocol = if a.udp { Protocol::Udp } else { Protocol::Tcp };
    let end = match (a.time, a.bytes, a.blocks, file_bytes(a)?) {
        (_, Some(bytes), _, _) => End::Bytes { bytes },
        (_, _, Some(blocks), _) => End::Blocks { blocks },
        (Some(seconds), _, _, _) => End::Time { seconds },
        // -F: the file once
        (_, _, _, Some(bytes)) => End::Bytes { bytes },
        _ => End::Time { seconds: 10.0 },
    };
    let rate_bps = match protocol {
        Protocol::Tcp => a.bitrate.filter(|&r| r > 0.0),
        Protocol::Udp => match a.bitrate {
            Some(0.0) => None,
            Some(r) => Some(r),
            None => Some(DEFAULT_UDP_RATE_BPS),
        },
    };
    // --find-max tries many rates with one datagram: the path's
    let (udp_len, datagram) =
        wirerate_core::spec::default_datagram(path_udp, rate_bps.filter(|_| !a.find_max));
    let spec = TestSpec {
        protocol,
        direction: if a.bidir {
            Direction::Bidir
        } else if a.reverse {
            Direction::Reverse
        } else {
            Direction::Forward
        },
        end,
        len_bytes: a.len.unwrap_or(match protocol {
            Protocol::Tcp => {
                wirerate_core::spec::default_tcp_len(a.parallel.saturating_mul(if a.bidir {
                    2
                } else {
                    1
                }))
            }
            Protocol::Udp => udp_len,
        }),
        parallel: a.parallel,
        window_bytes: a.window,
        sndbuf_bytes: a.sndbuf,
        rcvbuf_bytes: a.rcvbuf,
        mss_bytes: a.mss,
        nodelay: a.nodelay,
        congestion: a.congestion.clone(),
        omit_s: a.omit,
        interval_s: a.interval,
        link_bps: a.link,
        rate_bps,
        send_mode: if a.zerocopy {
            SendMode::Splice
        } else {
            SendMode::Copy
        },
        recv_mode: if a.discard {
            RecvMode::Discard
        } else {
            RecvMode::Copy
        },
        test: Default::default(),
        stream_intervals: a.parallel > 1,
        tos: a.habits.tos,
        server_tos: None,
        server_cpu: a.habits.affinity.and_then(|c| c.server),
        gso: a.gso,
        gro: a.gro,
        // the default write size is cut to whole offload segments; -l is written as given,
        // as are -n blocks of it (the blocks are the test) and -F files
        fit_writes: a.len.is_none()
            && protocol == Protocol::Tcp
            && !matches!(end, End::Blocks { .. })
            && a.habits.file.is_none(),
        datagram: (a.len.is_none() && protocol == Protocol::Udp).then_some(datagram),
        inband_hz: None,
    };
    if let Err(e) = spec.validate() {
        return usage(e.to_string());
    }
    if !a.find_max {
        if let Err(e) = spec.check_datagram_fits_time() {
            return usage(format!(
                "{e} (give a smaller -l, a higher -b or a longer -t)"
            ));
        }
    }
    if !(a.idle_timeout.is_finite() && (0.1..=3600.0).contains(&a.idle_timeout)) {
        return usage("--idle-timeout must be 0.1 to 3600 seconds");
    }
    if a.iperf3 {
        if a.sndbuf.is_some() || a.rcvbuf.is_some() {
            return usage("iperf3 servers take one buffer size for both: use -w");
        }
        if let Err(e) = wirerate_proto::iperf3::check_spec(&spec) {
            return usage(e);
        }
        let h = &a.habits;
        for (given, flag) in [(h.cport.is_some(), "--cport"), (h.affinity.is_some(), "-A")] {
            if given {
                return usage(format!("{flag} is not available with --iperf3"));
            }
        }
    }
    let streams = spec.streams();
    a.habits
        .check(streams, spec.direction == Direction::Reverse, a.parallel)?;
    a.habits.check_cpus(a.host.is_none() && a.from.is_none())?;
    a.habits.check_sockets()?;
    Ok(spec)
}

/// Raises the open-file limit to what the test's streams need, or says before starting that
/// the limit is too low and how to raise it.
pub fn ensure_open_files(spec: &TestSpec, embedded: bool) -> anyhow::Result<()> {
    let streams = spec.streams();
    let need = wirerate_engine::net::open_files_needed(streams, embedded, spec.pooled());
    match wirerate_engine::net::raise_open_files(need) {
        Ok((soft, _)) if soft >= need => Ok(()),
        Ok((soft, hard)) => anyhow::bail!(
            "{streams} streams need about {need} open files{}, but the limit is {soft} (hard limit {hard}): raise it with `ulimit -n {need}` (as root, or in limits.conf), or use fewer streams",
            if embedded { " (client and embedded server)" } else { "" }
        ),
        Err(e) => anyhow::bail!("cannot read or raise the open-file limit: {e}"),
    }
}

/// `-F` on a sending client with neither -t nor -n: the file's size, sent once.
fn file_bytes(a: &Args) -> anyhow::Result<Option<u64>> {
    let Some(path) = a.habits.file.as_ref().filter(|_| !a.reverse) else {
        return Ok(None);
    };
    let meta = std::fs::metadata(path)
        .map_err(|e| crate::exit::UsageError(format!("-F {}: {e}", path.display())))?;
    if !meta.is_file() || meta.len() == 0 {
        return usage(format!(
            "-F {}: not a file with data; with -t or -n any readable file is sent in a loop",
            path.display()
        ));
    }
    Ok(Some(meta.len()))
}

/// HOST, HOST:PORT, [IPv6] or [IPv6]:PORT: the host and the port given with it. An IPv6
/// address without brackets is a host alone (its colons are not a port).
pub fn split_host_port(given: &str) -> anyhow::Result<(String, Option<u16>)> {
    let port_of = |p: &str| {
        p.parse::<u16>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| crate::exit::UsageError(format!("'{given}': '{p}' is not a port")))
    };
    if let Some(rest) = given.strip_prefix('[') {
        let Some((ip, after)) = rest.split_once(']') else {
            return usage(format!("'{given}': a '[' without its ']'"));
        };
        return match after.strip_prefix(':') {
            Some(p) => Ok((ip.to_string(), Some(port_of(p)?))),
            None if after.is_empty() => Ok((ip.to_string(), None)),
            None => usage(format!("'{given}': only ':PORT' may follow ']'")),
        };
    }
    match given.split_once(':') {
        Some((h, p)) if !p.contains(':') => Ok((h.to_string(), Some(port_of(p)?))),
        _ => Ok((given.to_string(), None)),
    }
}

fn resolve(host: &str, port: u16, v4: bool, v6: bool) -> anyhow::Result<SocketAddr> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve '{host}'"))?
        .collect();
    addrs
        .into_iter()
        .find(|a| (!v4 || a.is_ipv4()) && (!v6 || a.is_ipv6()))
        .with_context(|| {
            format!(
                "'{host}' has no {} address",
                if v4 { "IPv4" } else { "IPv6" }
            )
        })
}

/// Where the tests go: a resolved server, or the embedded one.
pub struct Target {
    pub addr: SocketAddr,
    pub embedded: bool,
    pub cfg: ClientConfig,
    /// The server speaks iperf3's protocol.
    pub iperf3: bool,
}

impl Target {
    pub fn describe(&self) -> String {
        if self.embedded {
            format!("embedded server on {}", self.addr)
        } else {
            self.addr.to_string()
        }
    }
}

/// Resolves HOST, or starts the embedded loopback server.
pub fn target(a: &Args) -> anyhow::Result<Target> {
    let (host, given_port) = match &a.host {
        Some(h) => {
            let (h, p) = split_host_port(h)?;
            (Some(h), p)
        }
        None => (None, None),
    };
    if let (Some(with_host), Some(flag)) = (given_port, a.port) {
        if with_host != flag {
            return usage(format!(
                "the port is given twice: {with_host} with the host and -p {flag}"
            ));
        }
    }
    let port = given_port.or(a.port).unwrap_or(if a.iperf3 {
        wirerate_proto::iperf3::DEFAULT_PORT
    } else {
        DEFAULT_PORT
    });
    let net = Net {
        host,
        port,
        ipv4: a.ipv4,
        ipv6: a.ipv6,
        bind: a.bind,
        idle_timeout: a.idle_timeout,
        tls: a.tls.clone(),
    };
    let mut t = target_with(&net, a.threads)?;
    t.iperf3 = a.iperf3;
    t.cfg.threads = a.threads;
    a.habits.apply_client(&mut t.cfg);
    Ok(t)
}

/// Where and how a client connects: what `run`, `rr` and `sweep` share (the last two take
/// it as their flags).
#[derive(clap::Args, Debug, Clone)]
pub struct Net {
    /// Server to test against; with none, an embedded server on loopback is used
    pub host: Option<String>,
    /// Server port
    #[arg(short = 'p', long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Use IPv4 only
    #[arg(short = '4', conflicts_with = "ipv6")]
    pub ipv4: bool,
    /// Use IPv6 only
    #[arg(short = '6')]
    pub ipv6: bool,
    /// Local address to bind to
    #[arg(short = 'B', long, value_name = "ADDR")]
    pub bind: Option<IpAddr>,
    /// Seconds a silent peer is waited for before the test fails
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 10.0,
        allow_negative_numbers = true
    )]
    pub idle_timeout: f64,
    #[command(flatten)]
    pub tls: crate::cmd::tls::ClientTlsArgs,
}

/// Resolves the host, or starts the embedded loopback server.
pub fn target_for(a: &Net) -> anyhow::Result<Target> {
    target_with(a, None)
}

/// [`target_for`], with the embedded server's number of data workers.
fn target_with(a: &Net, threads: Option<usize>) -> anyhow::Result<Target> {
    if a.host.is_none() && a.tls.user.is_some() {
        return usage("--user needs a HOST to log in to (or --from AGENT)");
    }
    let idle = Duration::from_secs_f64(a.idle_timeout);
    let cfg = ClientConfig {
        idle,
        bind: a.bind,
        ..Default::default()
    };
    let (host, port) = match &a.host {
        Some(h) => {
            let (h, p) = split_host_port(h)?;
            (Some(h), p.unwrap_or(a.port))
        }
        None => (None, a.port),
    };
    let mut cfg = cfg;
    if let Some(h) = &host {
        cfg.tls = a.tls.client(&format!("{h}:{port}"))?;
        cfg.login = a.tls.login(h)?;
    }
    let (addr, embedded) = match &host {
        Some(h) => (resolve(h, port, a.ipv4, a.ipv6)?, false),
        None => {
            let ip: IpAddr = if a.ipv6 {
                Ipv6Addr::LOCALHOST.into()
            } else {
                Ipv4Addr::LOCALHOST.into()
            };
            let server = Server::bind(
                SocketAddr::new(ip, 0),
                ServerConfig {
                    quiet: true,
                    idle,
                    // the user's own machine: the spec's own bound on buffers is the limit
                    caps: wirerate_engine::guard::Caps {
                        max_test_memory: wirerate_core::spec::limits::MAX_BUFFERS,
                        ..Default::default()
                    },
                    threads,
                    ..Default::default()
                },
            )?;
            let addr = server.local_addr()?;
            server.spawn()?;
            (addr, true)
        }
    };
    Ok(Target {
        addr,
        embedded,
        cfg,
        iperf3: false,
    })
}

/// Runs one test and builds its result; the strings are errors of streams that broke.
/// `busy_wait` is how long to keep retrying a server that says it is busy: a run that
/// follows another one gives the server a moment to free its slot.
pub fn execute(
    t: &Target,
    spec: &TestSpec,
    obs: &mut dyn Observer,
    busy_wait: Duration,
) -> anyhow::Result<(RunResult, Vec<String>)> {
    let started_unix_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let give_up = std::time::Instant::now() + busy_wait;
    let outcome = loop {
        let attempt = if t.iperf3 {
            wirerate_engine::iperf3::run_client(t.addr, spec, &t.cfg, obs)
        } else {
            run_test(t.addr, spec, &t.cfg, obs)
        };
        match attempt {
            Err(EngineError::Proto(ProtoError::Busy(_))) if std::time::Instant::now() < give_up => {
                std::thread::sleep(Duration::from_millis(50));
            }
            r => break r.map_err(|e| iperf3_hint(e, t))?,
        }
    };
    let facts = link_facts(spec, &outcome.local, Some(t.addr.ip()));
    let result = assemble(
        spec,
        &outcome.local,
        &outcome.remote,
        Context {
            tool_version: env!("CARGO_PKG_VERSION").into(),
            started_unix_s,
            server_addr: t.addr.to_string(),
            embedded_server: t.embedded,
            wire: facts.summary(),
            // an iperf3 peer's datagrams are counted by the iperf3 client driver
            udp: outcome.udp.clone(),
            interrupted: outcome.interrupted,
        },
    );
    let errors = distinct_errors(
        outcome
            .local
            .streams
            .iter()
            .chain(&outcome.remote.streams)
            .filter_map(|s| s.error.as_deref()),
    );
    Ok((result, errors))
}

/// The streams' errors, each once in the order first seen, with how many streams had it
/// when more than one did.
fn distinct_errors<'a>(errors: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for e in errors {
        match seen.iter_mut().find(|(s, _)| *s == e) {
            Some((_, n)) => *n += 1,
            None => seen.push((e, 1)),
        }
    }
    seen.into_iter()
        .map(|(e, n)| {
            if n > 1 {
                format!("{e} ({n} streams)")
            } else {
                e.to_string()
            }
        })
        .collect()
}

/// A wirerate client that finds silence on iperf3's port is most likely talking to an
/// iperf3 server that waits for more of its cookie: say what to add. A peer that answers
/// with something else is named by the address it was reached at.
fn iperf3_hint(e: EngineError, t: &Target) -> anyhow::Error {
    let iperf3_port = t.addr.port() == wirerate_proto::iperf3::DEFAULT_PORT;
    match e {
        EngineError::Proto(ProtoError::BadMagic) => {
            anyhow::Error::from(e).context(format!("connected to {}", t.addr))
        }
        EngineError::Proto(ProtoError::TimedOut(_)) if iperf3_port && !t.iperf3 => {
            let e = e.full();
            anyhow::anyhow!("{e}: port 5201 is iperf3's; for an iperf3 server, add --iperf3")
        }
        e => e.into(),
    }
}

/// An observer that prints nothing.
pub struct Silent;
impl Observer for Silent {}

pub fn run(mut a: Args) -> anyhow::Result<ExitCode> {
    if let Some(ms) = a.rcv_timeout {
        a.idle_timeout = ms as f64 / 1000.0;
    }
    if let Some(rate) = a.fq_rate {
        a.bitrate = Some(rate);
    }
    if let Some(path) = &a.output.logfile {
        crate::cmd::habits::redirect_output(path)?;
    }
    a.habits.apply_output();
    // validate flags before touching the network; the datagram size is settled below
    spec_from(&a, ETHERNET_UDP_PAYLOAD)?;
    if a.find_max && !a.udp {
        return usage("--find-max searches UDP rates: add -u");
    }
    let format = if a.json || a.json_stream {
        Format::Json
    } else {
        a.format.unwrap_or(Format::Text)
    };
    let repeat = repeat_plan(&a)?;
    let output = match (a.find_max, &repeat) {
        (true, _) => Output::FindMax,
        (false, Some(_)) => Output::Repeat,
        (false, None) => Output::Run,
    };
    if let Err(e) = export::check(format.into(), output) {
        return usage(e.to_string());
    }
    let mut store = open_store(&a.store)?;
    if let (Some(from), Some(to)) = (&a.from, &a.to) {
        return third_party(&a, from, to, format, store.as_mut());
    }
    let mut t = target(&a)?;
    if !a.find_max {
        // Ctrl-C ends the test early and reports it (--find-max has no partial answer:
        // there Ctrl-C ends the process)
        t.cfg.interrupt = Some(crate::interrupt::install());
    }
    let path_udp = wirerate_engine::net::path_udp_payload(t.addr).unwrap_or(ETHERNET_UDP_PAYLOAD);
    let mut spec = spec_from(&a, path_udp)?;
    ensure_open_files(&spec, t.embedded)?;
    if a.find_max {
        if a.time.is_none() && a.bytes.is_none() && a.blocks.is_none() {
            spec.end = End::Time { seconds: 2.0 };
        }
        return super::findmax::run(
            &t,
            spec,
            a.loss,
            format,
            store.as_mut(),
            a.store.label.as_deref(),
        );
    }
    let text_out = format == Format::Text;
    if text_out {
        crate::say!("{}", text::header(&spec, &t.describe()));
    }
    if let Some(plan) = repeat {
        return super::repeat::run(
            &t,
            &spec,
            plan,
            format,
            store.as_mut(),
            a.store.label.as_deref(),
        );
    }
    let progress = text_out && spec.interval_s == 0.0 && std::io::stderr().is_terminal();
    let mut printer = Printer::new(&spec, text_out, progress, !t.iperf3).with_note(
        (t.iperf3 && spec.direction != Direction::Reverse && spec.interval_s > 0.0).then(|| {
            format!(
                "(the iperf3 server gives no intervals of what it receives: the {} lines are this side's sent bytes)",
                Flow::ClientToServer.name()
            )
        }),
    );
    if a.json_stream {
        // an iperf3 server reports no intervals of what it receives: those the client sends
        // are the client's count of what it wrote
        let by_sender: Vec<Flow> = (spec.direction.flows().iter())
            .filter(|f| t.iperf3 && f.sender_is_client())
            .copied()
            .collect();
        printer = printer.with_json_stream(serde_json::json!({
            "version": concat!("wirerate ", env!("CARGO_PKG_VERSION")),
            "server": t.describe(),
            "spec": &spec,
            "intervals_counted_by_sender": by_sender,
        }));
    }
    let (result, errors) = execute(&t, &spec, &mut printer, Duration::ZERO)?;
    printer.clear_progress();
    printer.finish(&result);
    if !a.json_stream {
        emit(&result, format, a.verbose)?;
    }
    let stored = store_and_say(&a.store, store.as_mut(), &result, text_out)?;
    if !errors.is_empty() {
        eprintln!(
            "wirerate: {}",
            wirerate_core::text::safe(&errors.join("; "))
        );
    }
    if let Some(words) = wirerate_render::brief::interrupted(&result) {
        eprintln!("wirerate: {words}: the figures cover what was measured until then");
        return Ok(ExitCode::from(crate::interrupt::EXIT_INTERRUPTED));
    }
    Ok(if errors.is_empty() && stored {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `run --from A --to B`: the agent on A runs the test towards B; its result is printed
/// and stored here.
fn third_party(
    a: &Args,
    from: &str,
    to: &str,
    format: Format,
    store: Option<&mut Store>,
) -> anyhow::Result<ExitCode> {
    let port = a.port.unwrap_or(DEFAULT_PORT);
    let hp = |flag: &str, s: &str| -> anyhow::Result<String> {
        match wirerate_fleet::plan::agent_address(s, port) {
            Ok(a) => Ok(a),
            Err(e) => usage(format!(
                "{flag}: {}",
                e.to_string().trim_start_matches("plan: ")
            )),
        }
    };
    let (from, to) = (hp("--from", from)?, hp("--to", to)?);
    let agent = resolve_hostport(&from, a.ipv4, a.ipv6)?;
    let spec = spec_from(a, ETHERNET_UDP_PAYLOAD)?;
    if format == Format::Text {
        crate::say!(
            "{}",
            text::header(&spec, &format!("{to}, run by the agent on {agent}"))
        );
    }
    let idle = Duration::from_secs_f64(a.idle_timeout);
    // the caller's credentials are for the agent alone: they never go on to B
    let host = from.rsplit_once(':').map_or(from.as_str(), |(h, _)| h);
    let auth = wirerate_engine::agent::CallerAuth {
        tls: a.tls.client(&from)?,
        login: a
            .tls
            .login(host.trim_start_matches('[').trim_end_matches(']'))?,
    };
    let out =
        wirerate_engine::agent::request(agent, &to, &spec, idle, Duration::from_secs(5), &auth)
            .with_context(|| format!("third-party test from {from} to {to}"))?;
    let result = match wirerate_engine::agent::into_result(out, agent) {
        Ok(r) => r,
        Err(reason) => anyhow::bail!("{reason}"),
    };
    // the intervals arrive with the result: printed then, as a local run prints them live
    let mut printer = Printer::new(&spec, format == Format::Text, false, false);
    printer.started();
    printer.finish(&result);
    emit(&result, format, a.verbose)?;
    let stored = store_and_say(&a.store, store, &result, format == Format::Text)?;
    Ok(if stored {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn resolve_hostport(hp: &str, v4: bool, v6: bool) -> anyhow::Result<SocketAddr> {
    let addrs: Vec<SocketAddr> = hp
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve '{hp}'"))?
        .collect();
    addrs
        .into_iter()
        .find(|a| (!v4 || a.is_ipv4()) && (!v6 || a.is_ipv6()))
        .with_context(|| format!("'{hp}' has no usable address"))
}

/// How many runs `--repeat` or `--until-ci` asks for.
#[derive(Debug, Clone, Copy)]
pub enum RepeatPlan {
    Fixed(u32),
    UntilCi { percent: f64, max_runs: u32 },
}

fn repeat_plan(a: &Args) -> anyhow::Result<Option<RepeatPlan>> {
    match (a.repeat, a.until_ci) {
        (Some(n), _) if !(1..=1000).contains(&n) => usage("--repeat takes 1 to 1000 runs"),
        (Some(n), _) => Ok(Some(RepeatPlan::Fixed(n))),
        (None, Some(p)) if !(p.is_finite() && p > 0.0 && p < 100.0) => {
            usage("--until-ci takes a percentage above 0 and below 100")
        }
        (None, Some(_)) if !(2..=1000).contains(&a.max_runs) => usage("--max-runs takes 2 to 1000"),
        (None, Some(percent)) => Ok(Some(RepeatPlan::UntilCi {
            percent,
            max_runs: a.max_runs,
        })),
        (None, None) => Ok(None),
    }
}

/// Prints a run's result in `format`; `verbose`: the full text report (`-V`).
pub fn emit(r: &RunResult, format: Format, verbose: bool) -> anyhow::Result<()> {
    let mut out = crate::exit::stdout();
    let text = export::exporter_with(format.into(), verbose).run(r);
    match format {
        Format::Json => write!(out, "{text}")?,
        // -T prefixes every line of the human and ttcp reports
        Format::Text | Format::Ttcp => write!(out, "{}", crate::exit::with_title(&text))?,
    }
    out.flush()?;
    Ok(())
}
