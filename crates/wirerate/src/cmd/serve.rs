//! `wirerate serve`: a long-running server.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use wirerate_engine::{Server, ServerConfig};

use crate::cmd::run::DEFAULT_PORT;
use crate::exit::usage;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "One test runs at a time; a second client is told at once that the server is busy \
and for how long. A client that stalls, vanishes or sends junk is dropped within the idle timeout.\n\n\
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
    pub output: crate::cmd::habits::OutputArgs,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    if !(a.idle_timeout.is_finite() && (0.1..=3600.0).contains(&a.idle_timeout)) {
        return usage("--idle-timeout must be 0.1 to 3600 seconds");
    }
    if let Some(path) = &a.output.logfile {
        crate::cmd::habits::redirect_output(path)?;
    }
    let (ended_tx, ended) = std::sync::mpsc::channel();
    let cfg = ServerConfig {
        idle: Duration::from_secs_f64(a.idle_timeout),
        on_test_end: a.one_off.then_some(ended_tx),
        ..Default::default()
    };
    let server = match a.bind {
        Some(ip) => Server::bind(SocketAddr::new(ip, a.port), cfg)?,
        // dual-stack where the host has IPv6, else IPv4 only
        None => Server::bind(
            SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), a.port),
            cfg.clone(),
        )
        .or_else(|_| Server::bind(SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), a.port), cfg))?,
    };
    eprintln!("wirerate serve: listening on {}", server.local_addr()?);
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
