//! `wirerate serve`: a long-running server.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use wirerate_core::spec::DEFAULT_PORT;
use wirerate_server::guard::Caps;
use wirerate_server::limits::{Limits, Policy, Reload};
use wirerate_server::logline::{Event, Kind, LogFormat};
use wirerate_server::{Server, ServerConfig};

use crate::cmd::run::{parse_rate, parse_size};
use crate::exit::usage;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "One test runs at a time; a second client is told at once that the server is busy \
and for how long. The test slot is claimed only when a client's test spec has arrived (within \
--handshake-timeout of its opening bytes or its login): a connection that opens and goes quiet \
holds no slot. A client that stalls, vanishes or sends junk is dropped within the idle timeout; \
a test that moves no data for the idle timeout, or less than 1 KiB/s over two idle timeouts, is \
ended as stalled. Every test is bounded in time (--max-duration, byte-count tests too), rate \
(--max-rate per stream) and buffer memory (--max-test-memory, streams × buffer size). \
A new connection has --handshake-timeout in all (TLS included) to say what it is; at most 8 may \
wait from one address (an IPv6 /64 counts as one address here, for failed logins and for \
--limits' tests_per_hour), an address with 5 connections in a minute still waiting at their deadline is refused for the rest of the minute, and beyond the start of --max-startups new ones are refused at random. The defaults suit a server open to anyone: tests of at most 300 s, a \
2 s handshake, a 10 s idle timeout; raise --max-duration for long tests among trusted clients.\n\n\
SIGHUP reloads the --limits file; running tests keep the rules they were admitted with, and a \
file that fails to load keeps the old rules (one log line says why).\n\n\
With --users (and --tls), every client logs in first (SCRAM-SHA-256: the password never crosses \
the wire); a failed login is told only that it failed, and an address with 5 failures in a minute \
is refused for the rest of it. SIGHUP reloads the users file too.\n\n\
iperf3 clients (TCP and UDP) are served on the same port: `iperf3 -c HOST -p PORT`.\n\n\
With text logs, standard output shows the test being served as iperf3's server does: a line per \
interval of what this side receives, and of what it sends, counted as it wrote it (per second for \
iperf3 clients; a wirerate client's -i).\n\n\
With --allow-third-party (or a limits rule's third_party = true) the server is also an agent: \
`wirerate run --from THIS --to B` has it test towards B, within --third-party-targets (or the \
rule's third_party_targets), and send back the result (docs/fleet.md). With --tls it takes such \
requests only over TLS, from callers who log in (--users) or present a certificate (--client-ca), \
and the rules match their user; towards B it uses its own credentials (--agent-tls, --agent-user \
with WIRERATE_AGENT_PASSWORD, --agent-cert), never the caller's.\n\n\
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
    /// Connections that have not yet said what they are: beyond START, a new one is refused
    /// with probability RATE %, rising to all at FULL (as OpenSSH's MaxStartups); the
    /// running test's client is exempt. FULL alone: refuse only at FULL
    #[arg(long, value_name = "START:RATE:FULL", value_parser = parse_startups, default_value = "100:30:1000")]
    pub max_startups: wirerate_server::startups::Startups,
    /// Longest test served, warm-up included; tests that end by byte or block count are
    /// ended when they reach it
    #[arg(long, value_name = "SECONDS", default_value_t = wirerate_core::spec::limits::DEFAULT_SERVER_MAX_SECONDS)]
    pub max_duration: f64,
    /// Fastest rate a client may ask of one stream (SI: 10G = 10 000 000 000 bit/s)
    #[arg(long, value_name = "RATE", value_parser = parse_rate, default_value = "1T")]
    pub max_rate: f64,
    /// Buffer memory one test may take on the server: streams × buffer size (IEC: 256M =
    /// 268 435 456 bytes)
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "256M")]
    pub max_test_memory: u64,
    /// Data workers for a test of more than one stream, 1 to 256; default one per CPU (half
    /// the CPUs when the client is on this host, up to 64 streams per worker), or one per
    /// stream for a few streams that would not share the workers evenly. With the client on
    /// this host and 64 streams or more per worker, worker N runs on the Nth CPU, as the
    /// client's does
    #[arg(long, value_name = "N", value_parser = crate::cmd::run::parse_threads)]
    pub threads: Option<usize>,
    /// Rules by client address range and user: who may test how much (TOML; docs/server.md)
    #[arg(long, value_name = "FILE")]
    pub limits: Option<PathBuf>,
    /// Users who must log in before a test (`wirerate user add NAME --users FILE`); needs
    /// --tls. iperf3 clients are then refused
    #[arg(long, value_name = "FILE")]
    pub users: Option<PathBuf>,
    /// Log lines: text sentences, or one JSON object per connection and per test
    /// (docs/server.md)
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = LogFormatArg::Text)]
    pub log_format: LogFormatArg,
    /// Serve the server's own counters and gauges to Prometheus on ADDR/metrics (tests
    /// served, refusals by reason, bytes, the test slot, failed logins, pending
    /// connections; docs/monitoring.md)
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
    /// Check a limits file, print its rules and exit
    #[arg(long, value_name = "FILE", exclusive = true)]
    pub check_limits: Option<PathBuf>,
    /// Serve one test, then exit (0 if it completed, 1 if it failed)
    #[arg(short = '1', long)]
    pub one_off: bool,
    /// Run in the background, detached from the terminal (output to --logfile, if given)
    #[arg(short = 'D', long)]
    pub daemon: bool,
    /// Write the server's process id to FILE (removed when -1 ends the server, and on
    /// SIGTERM or SIGINT, which then end it cleanly)
    #[arg(short = 'I', long, value_name = "FILE")]
    pub pidfile: Option<std::path::PathBuf>,
    /// Act as an agent for third-party tests (`wirerate run --from THIS --to B`): run a
    /// caller's test towards B and send back the result. Off by default; a limits rule's
    /// `third_party` overrides it for the callers it matches (docs/fleet.md)
    #[arg(long)]
    pub allow_third_party: bool,
    /// Address ranges third-party tests may go to, comma-separated (e.g. 10.0.0.0/8);
    /// a limits rule's `third_party_targets` replaces it for its callers. With none, every
    /// target is refused: an agent is never a relay to arbitrary hosts
    #[arg(long, value_name = "CIDR,...", value_delimiter = ',')]
    pub third_party_targets: Vec<String>,
    /// Third-party tests: TLS towards the servers tested against (they run `serve --tls`);
    /// their keys are checked against --agent-known-servers, remembered on first contact
    #[arg(long)]
    pub agent_tls: bool,
    /// Third-party tests: log in to the servers tested against as NAME, with the password
    /// from WIRERATE_AGENT_PASSWORD (never a flag); implies --agent-tls. The callers' own
    /// credentials are never passed on
    #[arg(long, value_name = "NAME", conflicts_with = "agent_cert")]
    pub agent_user: Option<String>,
    /// Third-party tests: a certificate (PEM) to present to servers tested against that
    /// require one (`serve --client-ca`); implies --agent-tls
    #[arg(long, value_name = "FILE", requires = "agent_key")]
    pub agent_cert: Option<PathBuf>,
    /// The key of --agent-cert (PEM)
    #[arg(long, value_name = "FILE", requires = "agent_cert")]
    pub agent_key: Option<PathBuf>,
    /// Where the agent keeps the keys of the servers it tests against [default:
    /// ~/.config/wirerate/known_servers]
    #[arg(long, value_name = "FILE")]
    pub agent_known_servers: Option<PathBuf>,
    #[command(flatten)]
    pub tls: crate::cmd::tls::ServerTlsArgs,
    #[command(flatten)]
    pub output: crate::cmd::habits::OutputArgs,
}

/// The agent's own credentials towards the servers it tests against.
fn agent_credentials(a: &Args) -> anyhow::Result<wirerate_server::agent::AgentCredentials> {
    let login = match &a.agent_user {
        Some(user) => {
            if let Err(e) = wirerate_proto::auth::check_user(user) {
                return usage(format!("--agent-user: {e}"));
            }
            let Some(pw) = std::env::var_os("WIRERATE_AGENT_PASSWORD") else {
                return usage("--agent-user needs its password in WIRERATE_AGENT_PASSWORD");
            };
            let password = pw
                .into_string()
                .map_err(|_| anyhow::anyhow!("WIRERATE_AGENT_PASSWORD is not UTF-8"))?;
            Some(wirerate_control::Login {
                user: user.clone(),
                password,
            })
        }
        None => None,
    };
    if !(a.agent_tls || login.is_some() || a.agent_cert.is_some()) {
        return Ok(Default::default());
    }
    let args = crate::cmd::tls::ClientTlsArgs {
        tls: true,
        known_servers: a.agent_known_servers.clone(),
        client_cert: a.agent_cert.clone(),
        client_key: a.agent_key.clone(),
        on_first_use: Some(match a.log_format {
            LogFormatArg::Text => {
                |line: &str| eprintln!("wirerate serve: {}", wirerate_core::text::safe(line))
            }
            LogFormatArg::Json => |line: &str| {
                eprintln!(
                    "{}",
                    Event::new(Kind::Notice, None).reason(line.into()).to_json()
                )
            },
        }),
        ..Default::default()
    };
    // a certificate that does not load is said at start, not at the first test
    args.client("check")
        .map_err(|e| anyhow::anyhow!("--agent-cert: {e:#}"))?;
    let tls: wirerate_server::agent::TlsFor = Arc::new(move |to: &str| {
        args.client(to)
            .map(Option::unwrap_or_default)
            .map_err(|e| format!("{e:#}"))
    });
    Ok(wirerate_server::agent::AgentCredentials {
        tls: Some(tls),
        login,
    })
}

fn parse_startups(
    s: &str,
) -> Result<wirerate_server::startups::Startups, wirerate_server::startups::StartupsError> {
    wirerate_server::startups::Startups::parse(s)
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
                eprintln!(
                    "wirerate serve: {}",
                    wirerate_core::text::safe(&e.to_string())
                );
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
    if a.users.is_some() && a.tls.client_ca.is_some() {
        return usage("--users and --client-ca are two ways to name users: choose one");
    }
    if a.users.is_some() && !a.tls.tls {
        return usage(
            "--users needs --tls: without it, a login could be hijacked after it succeeds",
        );
    }
    let tls = a.tls.server()?;
    let users = match &a.users {
        Some(path) => {
            let db = wirerate_server::users::UserDb::load(path)?;
            Some(Arc::new(match &tls {
                Some(t) => db.with_secret(t.lasting_secret(b"unknown users")),
                None => db,
            }))
        }
        None => None,
    };
    if users.as_ref().is_some_and(|u| u.is_empty()) {
        eprintln!("wirerate serve: warning: the users file has no users; every login will fail");
    }
    let mut targets = Vec::new();
    for t in &a.third_party_targets {
        match wirerate_server::limits::Cidr::parse(t) {
            Ok(c) => targets.push(c),
            Err(e) => return usage(format!("--third-party-targets: {e}")),
        }
    }
    let credentials = agent_credentials(&a)?;
    let (ended_tx, ended) = std::sync::mpsc::channel();
    let cfg = ServerConfig {
        idle: Duration::from_secs_f64(a.idle_timeout),
        on_test_end: a.one_off.then_some(ended_tx),
        handshake: Duration::from_secs_f64(a.handshake_timeout),
        startups: a.max_startups,
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
            users: users.clone(),
        }),
        tls: tls.clone(),
        users: users.clone(),
        agent: wirerate_server::agent::AgentConfig {
            allow: a.allow_third_party,
            targets,
            credentials,
        },
        threads: a.threads,
        shutdown: a.pidfile.is_some().then(crate::interrupt::install_shutdown),
        intervals: Some(interval_lines()),
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
    if let Some(u) = &users {
        listening.push_str(&format!(", {} user(s) must log in", u.len()));
    }
    if a.tls.client_ca.is_some() {
        listening.push_str(", clients must present a certificate");
    }
    let metrics = match a.metrics {
        Some(addr) => Some(super::server_metrics::bind(addr, server.stats())?),
        None => None,
    };
    if let Some(m) = &metrics {
        listening.push_str(&format!(", metrics on http://{}/metrics", m.local_addr()?));
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
    if let Some(m) = metrics {
        m.spawn()?;
    }
    let shutdown = server.shutdown_flag();
    let ok = if a.one_off {
        server.spawn()?;
        one_off_end(&ended, shutdown)
    } else {
        // returns only when SIGTERM or SIGINT came (handled so with a pid file)
        server.serve();
        true
    };
    if let Some(p) = &a.pidfile {
        let _ = std::fs::remove_file(p);
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `serve -1`: whether the one test completed; false too when a shutdown came first.
fn one_off_end(
    ended: &std::sync::mpsc::Receiver<bool>,
    shutdown: Option<&'static std::sync::atomic::AtomicBool>,
) -> bool {
    use std::sync::mpsc::RecvTimeoutError;
    loop {
        match ended.recv_timeout(Duration::from_millis(250)) {
            Ok(ok) => return ok,
            Err(RecvTimeoutError::Disconnected) => return false,
            Err(RecvTimeoutError::Timeout) => {
                if shutdown.is_some_and(|f| f.load(std::sync::atomic::Ordering::SeqCst)) {
                    return false;
                }
            }
        }
    }
}

/// The interval lines of the test being served, on standard output as iperf3's server
/// prints them: a header when a test's first interval comes, then a line per flow (what this
/// side receives, and what it sends, counted as it wrote it, under a note that says so).
fn interval_lines() -> wirerate_server::server::IntervalSink {
    use wirerate_core::spec::Flow;
    use wirerate_render::intervals::{header, line, Columns};
    /// What the lines of the test being shown have said so far.
    #[derive(Default)]
    struct Shown {
        cols: Columns,
        sent_note: bool,
    }
    let shown = std::sync::Mutex::new(Shown::default());
    wirerate_server::server::IntervalSink(Arc::new(move |iv, first| {
        let Ok(mut s) = shown.lock() else {
            return;
        };
        if iv.rr.is_some() {
            return;
        }
        if first {
            *s = Shown {
                cols: Columns {
                    udp: iv.packets.is_some(),
                    ..Default::default()
                },
                ..Default::default()
            };
            crate::say!("{}", header(s.cols));
        }
        if iv.stream.is_some() {
            return;
        }
        if iv.flow == Flow::ServerToClient && !s.sent_note {
            s.sent_note = true;
            crate::say!("({} lines: the bytes this side sent)", iv.flow.name());
        }
        crate::say!("{}", line(iv, s.cols));
    }))
}
