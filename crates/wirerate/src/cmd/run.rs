//! `wirerate run [HOST]`: one test against a server, or against an embedded loopback server
//! when no HOST is given.

use std::io::{IsTerminal, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use clap::ValueEnum;
use wirerate_core::assemble::{assemble, Context};
use wirerate_core::result::{Interval, WireSummary};
use wirerate_core::spec::{End, DEFAULT_TCP_LEN};
use wirerate_core::units::{BitRate, Bytes};
use wirerate_core::{Direction, Protocol, RunResult, TestSpec};
use wirerate_engine::{run_test, ClientConfig, Observer, Server, ServerConfig};
use wirerate_render::text;

use crate::exit::usage;

pub const DEFAULT_PORT: u16 = 5350;
/// UDP payload per datagram unless -l says otherwise: fits a 1500-byte Ethernet MTU.
const DEFAULT_UDP_LEN: u64 = 1460;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Human report with interval lines and a summary table
    Text,
    /// One JSON document following the result schema
    Json,
}

/// Sizes take K, M, G, T as powers of 1024 (128K = 131072 bytes); rates take K, M, G, T as
/// powers of 1000 (10M = 10000000 bit/s).
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Sizes (-n, -l, -w) take K, M, G, T as powers of 1024: 128K = 131072 bytes.\n\
Rates (--link) take K, M, G, T as powers of 1000: 10M = 10000000 bit/s.\n\
Goodput is what the receiving application got, over the receiver's window.\n\n\
Exit status: 0 success, 1 the test failed (peer refused, unreachable, silent, or a stream broke), 2 bad usage."
)]
pub struct Args {
    /// Server to test against; with none, an embedded server on loopback is used
    pub host: Option<String>,
    /// Server port [default: 5350; 5201 with --iperf3]
    #[arg(short = 'p', long)]
    pub port: Option<u16>,
    /// Speak iperf3's protocol: test against an iperf3 server (-t or -n)
    #[arg(long, requires = "host")]
    pub iperf3: bool,
    /// UDP instead of TCP (for now with --iperf3 only)
    #[arg(short = 'u', long, requires = "iperf3")]
    pub udp: bool,
    /// UDP send rate per stream, bit/s (e.g. 100M; default 1M, as iperf3)
    #[arg(short = 'b', long, value_name = "RATE", value_parser = parse_rate, requires = "udp")]
    pub bitrate: Option<f64>,
    /// Seconds to send (default 10)
    #[arg(short = 't', long, value_name = "SECONDS", conflicts_with_all = ["bytes", "blocks"])]
    pub time: Option<f64>,
    /// Bytes to send in all, split over the streams (e.g. 1G)
    #[arg(short = 'n', long, value_name = "SIZE", value_parser = parse_size, conflicts_with = "blocks")]
    pub bytes: Option<u64>,
    /// Write calls per stream, each of --len bytes (ttcp's nbuf)
    #[arg(long, value_name = "N")]
    pub blocks: Option<u64>,
    /// Bytes per write call (default 1M for TCP)
    #[arg(short = 'l', long, value_name = "SIZE", value_parser = parse_size)]
    pub len: Option<u64>,
    /// Parallel streams, each on its own thread on each side
    #[arg(short = 'P', long, value_name = "N", default_value_t = 1)]
    pub parallel: u32,
    /// Reverse: the server sends, the client receives
    #[arg(short = 'R', long, conflicts_with = "bidir")]
    pub reverse: bool,
    /// Both directions at once, on separate streams
    #[arg(long)]
    pub bidir: bool,
    /// Socket buffer size (SO_SNDBUF/SO_RCVBUF); turns autotuning off
    #[arg(short = 'w', long, value_name = "SIZE", value_parser = parse_size)]
    pub window: Option<u64>,
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
    /// Seconds of warm-up sent at the start and not counted
    #[arg(short = 'O', long, value_name = "SECONDS", default_value_t = 0.0)]
    pub omit: f64,
    /// Seconds between interval reports; 0 for none
    #[arg(short = 'i', long, value_name = "SECONDS", default_value_t = 1.0)]
    pub interval: f64,
    /// The link's bit rate, where it cannot be detected (e.g. 10G)
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub link: Option<f64>,
    /// Print one JSON document instead of the human report
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Output format
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Seconds a silent peer is waited for before the test fails
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub idle_timeout: f64,
}

fn parse_size(s: &str) -> Result<u64, String> {
    Bytes::parse(s).map(|b| b.0).map_err(|e| e.to_string())
}

fn parse_rate(s: &str) -> Result<f64, String> {
    BitRate::parse(s).map(|b| b.0).map_err(|e| e.to_string())
}

/// Turns the arguments into a validated spec, or a usage error.
pub fn spec_from(a: &Args) -> anyhow::Result<TestSpec> {
    let end = match (a.time, a.bytes, a.blocks) {
        (_, Some(bytes), _) => End::Bytes { bytes },
        (_, _, Some(blocks)) => End::Blocks { blocks },
        (Some(seconds), _, _) => End::Time { seconds },
        _ => End::Time { seconds: 10.0 },
    };
    let spec = TestSpec {
        protocol: if a.udp { Protocol::Udp } else { Protocol::Tcp },
        direction: if a.bidir {
            Direction::Bidir
        } else if a.reverse {
            Direction::Reverse
        } else {
            Direction::Forward
        },
        end,
        len_bytes: a.len.unwrap_or(if a.udp {
            DEFAULT_UDP_LEN
        } else {
            DEFAULT_TCP_LEN
        }),
        parallel: a.parallel,
        window_bytes: a.window,
        mss_bytes: a.mss,
        nodelay: a.nodelay,
        congestion: a.congestion.clone(),
        omit_s: a.omit,
        interval_s: a.interval,
        link_bps: a.link,
        rate_bps: a.udp.then(|| a.bitrate.unwrap_or(1e6)),
    };
    if let Err(e) = spec.validate() {
        return usage(e.to_string());
    }
    if !(a.idle_timeout.is_finite() && (0.1..=3600.0).contains(&a.idle_timeout)) {
        return usage("--idle-timeout must be 0.1 to 3600 seconds");
    }
    if a.iperf3 {
        if let Err(e) = wirerate_proto::iperf3::check_spec(&spec) {
            return usage(e);
        }
    }
    Ok(spec)
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

/// Prints interval lines (text) and a progress line on a terminal.
struct Printer {
    text: bool,
    progress: bool,
    total_s: Option<f64>,
    shown_progress: bool,
}

impl Observer for Printer {
    fn started(&mut self) {
        if self.text {
            println!("{}", text::interval_header());
        }
    }

    fn interval(&mut self, iv: &Interval) {
        if self.text {
            self.clear_progress();
            println!("{}", text::interval(iv));
        }
    }

    fn tick(&mut self, elapsed_s: f64) {
        if self.progress {
            let total = self
                .total_s
                .map_or_else(String::new, |t| format!(" of {t:.0} s"));
            eprint!("\r  running: {elapsed_s:.1} s{total}   ");
            let _ = std::io::stderr().flush();
            self.shown_progress = true;
        }
    }
}

impl Printer {
    fn clear_progress(&mut self) {
        if self.shown_progress {
            eprint!("\r{:40}\r", "");
            self.shown_progress = false;
        }
    }
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let spec = spec_from(&a)?;
    let format = if a.json {
        Format::Json
    } else {
        a.format.unwrap_or(Format::Text)
    };
    let idle = Duration::from_secs_f64(a.idle_timeout);
    let cfg = ClientConfig {
        idle,
        bind: a.bind,
        ..Default::default()
    };
    let port = a.port.unwrap_or(if a.iperf3 {
        wirerate_proto::iperf3::DEFAULT_PORT
    } else {
        DEFAULT_PORT
    });
    let (addr, embedded) = match &a.host {
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
                    ..Default::default()
                },
            )?;
            let addr = server.local_addr()?;
            server.spawn()?;
            (addr, true)
        }
    };
    let text_out = format == Format::Text;
    let target = if embedded {
        format!("embedded server on {addr}")
    } else {
        addr.to_string()
    };
    if text_out {
        println!("{}", text::header(&spec, &target));
    }
    let mut printer = Printer {
        text: text_out,
        progress: text_out && spec.interval_s == 0.0 && std::io::stderr().is_terminal(),
        total_s: spec.send_seconds(),
        shown_progress: false,
    };
    let started_unix_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let outcome = if a.iperf3 {
        wirerate_engine::iperf3::run_client(addr, &spec, &cfg, &mut printer)?
    } else {
        run_test(addr, &spec, &cfg, &mut printer)?
    };
    printer.clear_progress();
    let mut result = assemble(
        &spec,
        &outcome.local,
        &outcome.remote,
        Context {
            tool_version: env!("CARGO_PKG_VERSION").into(),
            started_unix_s,
            server_addr: addr.to_string(),
            embedded_server: embedded,
            wire: WireSummary {
                link_bps: spec.link_bps,
                link_source: spec.link_bps.map(|_| "--link".into()),
                ..Default::default()
            },
        },
    );
    if outcome.udp.is_some() {
        result.summary.udp = outcome.udp.clone();
    }
    emit(&result, format)?;
    Ok(exit_for(&outcome.local, &outcome.remote))
}

fn emit(r: &RunResult, format: Format) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match format {
        Format::Text => write!(out, "{}", text::summary(r))?,
        Format::Json => writeln!(out, "{}", wirerate_render::json::result(r))?,
    }
    out.flush()?;
    Ok(())
}

/// A stream that broke makes the run a failure, after its figures are shown.
fn exit_for(
    local: &wirerate_core::report::SideReport,
    remote: &wirerate_core::report::SideReport,
) -> ExitCode {
    let errors: Vec<&str> = local
        .streams
        .iter()
        .chain(&remote.streams)
        .filter_map(|s| s.error.as_deref())
        .collect();
    if errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("wirerate: {}", errors.join("; "));
        ExitCode::from(1)
    }
}
