//! `wirerate serve`: a long-running server.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use wirerate_engine::guard::Caps;
use wirerate_engine::limits::{Limits, Policy, Reload};
use wirerate_engine::logline::{Event, Kind, LogFormat};
use wirerate_engine::{Server, ServerConfig};

use crate::cmd::run::{parse_rate, parse_size, DEFAULT_PORT};
use crate::exit::usage;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "One test runs at a time; a second client is told at once that the server is busy \
and for how long. A client that stalls, vanishes or sends junk is dropped within the idle timeout; \
a test that moves no data for the idle timeout, or less than 1 KiB/s over two idle timeouts, is \
ended as stalled. Every test is bounded in time (--max-duration, byte-count tests too), rate \
(--max-rate per stream) and buffer memory (--max-test-memory, streams × buffer size). \
A new connection has --handshake-timeout to say what it is; at most 8 may wait from one address.\n\n\
SIGHUP reloads the --limits file; running tests keep the rules they were admitted with, and a \
file that fails to load keeps the old rules (one log line says why).\n\n\
iperf3 clients (TCP and UDP) are served on the same port: `iperf3 -c HOST -p PORT`.\n\n\
`wirerate -s ...` is `wirerate serve ...`, as in iperf3."
)]
pub struct Args {
    /// Port to listen on (control and data connections)
    #[arg(short = 'p', long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Address to listen on (default: every address, IPv6 and IPv4)
    #[arg(short = 'B', long, value_name = "ADDR")]
    pub bind: Option<IpAddr>,
    /// Seconds a silent client is waited for before it is dropped
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub idle_timeout: f64,
    /// Seconds a new connection has to send its opening bytes
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub handshake_timeout: f64,
    /// Longest test served, warm-up included; tests that end by byte or block count are
    /// ended when they reach it
    #[arg(long, value_name = "SECONDS", default_value_t = 86_400.0)]
    pub max_duration: f64,
    /// Fastest rate a client may ask of one stream (SI: 10G = 10 000 000 000 bit/s)
    #[arg(long, value_name = "RATE", value_parser = parse_rate, default_value = "1T")]
    pub max_rate: f64,
    /// Buffer memory one test may take on the server: streams × buffer size (IEC: 256M =
    /// 268 435 456 bytes)
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "256M")]
    pub max_test_memory: u64,
    /// Data workers for a TCP test of more than one stream, 1 to 256; default one per CPU
    /// (one per stream up to four streams per CPU)
    #[arg(long, value_name = "N", value_parser = crate::cmd::run::parse_threads)]
    pub threads: Option<usize>,
    /// Rules by client address range and user: who may test how much (TOML; docs/server.md)
    #[arg(long, value_name = "FILE")]
    pub limits: Option<PathBuf>,
    /// Log lines: text sentences, or one JSON object per connection and per test
    /// (docs/server.md)
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = LogFormatArg::Text)]
    pub log_format: LogFormatArg,
    /// Check a limits file, print its rules and exit
    #[arg(long, value_name = "FILE", exclusive = true)]
    pub check_limits: Option<PathBuf>,
    /// Serve one test, then exit (0 if it completed, 1 if it failed)
    #[arg(short = '1', long)]
    pub one_off: bool,
    /// Run in the background, detached from the terminal (output to --logfile, if given)
    #[arg(short = 'D', long)]
    pub daemon: bool,
    /// Write the server's process id to FILE (removed when -1 ends the server)
    #[arg(short = 'I', long, value_name = "FILE")]
    pub pidfile: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub tls: crate::cmd::tls::ServerTlsArgs,
    #[command(flatten)]
    pub output: crate::cmd::habits::OutputArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormatArg {
    Text,
    Json,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    if let Some(path) = &a.check_limits {
        return match Limits::load(path) {
            Ok(l) => {
                print!("{}", l.describe());
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                eprintln!("wirerate serve: {e}");
                Ok(ExitCode::from(1))
            }
        };
    }
    let limits = match &a.limits {
        Some(path) => Limits::load(path).map_err(anyhow::Error::msg)?,
        None => Limits::default(),
    };
    if !(a.idle_timeout.is_finite() && (0.1..=3600.0).contains(&a.idle_timeout)) {
        return usage("--idle-timeout must be 0.1 to 3600 seconds");
    }
    if !(a.handshake_timeout.is_finite() && (0.1..=3600.0).contains(&a.handshake_timeout)) {
        return usage("--handshake-timeout must be 0.1 to 3600 seconds");
    }
    if !(a.max_duration.is_finite() && (1.0..=86_400.0).contains(&a.max_duration)) {
        return usage("--max-duration must be 1 to 86400 seconds");
    }
    if a.max_test_memory < 1 << 20 {
        return usage("--max-test-memory must be at least 1M");
    }
    if let Some(path) = &a.output.logfile {
        crate::cmd::habits::redirect_output(path)?;
    }
    let tls = a.tls.server()?;
    let (ended_tx, ended) = std::sync::mpsc::channel();
    let cfg = ServerConfig {
        idle: Duration::from_secs_f64(a.idle_timeout),
        on_test_end: a.one_off.then_some(ended_tx),
        handshake: Duration::from_secs_f64(a.handshake_timeout),
        caps: Caps {
            max_duration: Duration::from_secs_f64(a.max_duration),
            max_rate_bps: a.max_rate,
            max_test_memory: a.max_test_memory,
        },
        policy: Arc::new(Policy::new(limits)),
        log_format: match a.log_format {
            LogFormatArg::Text => LogFormat::Text,
            LogFormatArg::Json => LogFormat::Json,
        },
        reload: Some(Reload {
            flag: crate::interrupt::install_reload(),
            limits: a.limits.clone(),
        }),
        tls: tls.clone(),
        threads: a.threads,
        ..Default::default()
    };
    // every stream of a test takes two descriptors on this side: room for the largest -P
    let _ = wirerate_engine::net::raise_open_files(1 << 16);
    let server = match a.bind {
        Some(ip) => Server::bind(SocketAddr::new(ip, a.port), cfg)?,
        // dual-stack where the host has IPv6, else IPv4 only
        None => Server::bind(
            SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), a.port),
            cfg.clone(),
        )
        .or_else(|_| Server::bind(SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), a.port), cfg))?,
    };
    let mut listening = format!("listening on {}", server.local_addr()?);
    if let Some(t) = &tls {
        listening.push_str(&format!(", TLS key fingerprint SHA256:{}", t.fingerprint));
    }
    match a.log_format {
        LogFormatArg::Text => eprintln!("wirerate serve: {listening}"),
        LogFormatArg::Json => eprintln!(
            "{}",
            Event::new(Kind::Notice, None).reason(listening).to_json()
        ),
    }
    // before any thread exists: fork keeps only the calling thread
    if a.daemon {
        super::daemon::detach(a.pidfile.as_deref(), a.output.logfile.is_some())?;
    } else if let Some(p) = &a.pidfile {
        super::daemon::write_pidfile(p, std::process::id())?;
    }
    if !a.one_off {
        server.serve();
        return Ok(ExitCode::SUCCESS);
    }
    server.spawn()?;
    let ok = ended.recv().unwrap_or(false);
    if let Some(p) = &a.pidfile {
        let _ = std::fs::remove_file(p);
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
