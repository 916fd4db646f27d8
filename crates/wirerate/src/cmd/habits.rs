//! iperf3's spellings that `run` and `serve` take as well: output to a log file, a title
//! and timestamps on output lines, the data sockets' TOS, client ports, CPU affinity, a
//! connect timeout and a file to send or to write what is received to. `-c HOST`, `-s`
//! and `-J` are spelled in `main` and `run`.

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use wirerate_control::ClientConfig;
use wirerate_core::spec::limits;

use crate::exit::usage;

/// Output options `run` and `serve` share.
#[derive(clap::Args, Debug, Default)]
pub struct OutputArgs {
    /// Append all output (errors too) to FILE instead of the terminal (iperf3's --logfile)
    #[arg(long, value_name = "FILE")]
    pub logfile: Option<PathBuf>,
}

/// Client options in iperf3's spelling.
#[derive(clap::Args, Debug, Default)]
pub struct ClientArgs {
    /// Prefix every output line of the text report with STR (iperf3's -T)
    #[arg(short = 'T', long, value_name = "STR")]
    pub title: Option<String>,
    /// Prefix the live lines (header and intervals) with the local wall-clock time
    #[arg(long)]
    pub timestamps: bool,
    /// IP type of service of the data sockets, both sides, 0-255: decimal, 0x hex or 0
    /// octal (DSCP EF is 0xb8)
    #[arg(short = 'S', long, value_name = "N", value_parser = parse_tos)]
    pub tos: Option<u8>,
    /// Local ports of the data streams, from PORT upwards, one per stream
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub cport: Option<u16>,
    /// Pin this side's stream threads to CPU N, and the server's to M
    #[arg(short = 'A', long, value_name = "N[,M]", value_parser = parse_affinity)]
    pub affinity: Option<Affinity>,
    /// Milliseconds to wait for each connection to the server [default: 5000]
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub connect_timeout: Option<u64>,
    /// Send FILE's bytes instead of a pattern (from its start again at its end; with
    /// neither -t nor -n, the file once); with -R, write what is received to FILE
    #[arg(short = 'F', long, value_name = "FILE", conflicts_with_all = ["udp", "zerocopy", "discard", "bidir", "iperf3"])]
    pub file: Option<PathBuf>,
    /// IPv6 flow label of the TCP data streams, 1-1048575 (0xfffff), decimal or 0x hex
    #[arg(short = 'L', long, value_name = "N", value_parser = parse_flowlabel, conflicts_with = "udp")]
    pub flowlabel: Option<u32>,
    /// UDP: datagrams carry don't-fragment (IP_MTU_DISCOVER=IP_PMTUDISC_DO); one larger
    /// than the path's MTU fails to send instead of being fragmented
    #[arg(long, requires = "udp")]
    pub dont_fragment: bool,
    /// The TCP data streams are MPTCP sockets (net.mptcp.enabled must be 1); with a server
    /// that does not listen for MPTCP they fall back to plain TCP
    #[arg(short = 'm', long, conflicts_with = "udp")]
    pub mptcp: bool,
    /// Accepted for iperf3's scripts: the server's figures are always part of the result
    #[arg(long)]
    pub get_server_output: bool,
    /// Accepted for iperf3's scripts: every output line is written out as it is made
    #[arg(long)]
    pub forceflush: bool,
}

/// `-A N[,M]`: this side's CPU and the server's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Affinity {
    pub local: u32,
    pub server: Option<u32>,
}

fn parse_cpu(s: &str) -> Result<u32, String> {
    s.trim()
        .parse::<u32>()
        .ok()
        .filter(|&c| c <= limits::MAX_CPU)
        .ok_or_else(|| format!("'{s}' is not a CPU number (0 to {})", limits::MAX_CPU))
}

fn parse_affinity(s: &str) -> Result<Affinity, String> {
    let (local, server) = match s.split_once(',') {
        Some((a, b)) => (parse_cpu(a)?, Some(parse_cpu(b)?)),
        None => (parse_cpu(s)?, None),
    };
    Ok(Affinity { local, server })
}

/// A TOS byte as iperf3 takes it: decimal, `0x` hex or leading-zero octal.
fn parse_flowlabel(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => t.parse::<u32>(),
    };
    v.ok()
        .filter(|v| (1..=wirerate_engine::dataopts::MAX_FLOWLABEL).contains(v))
        .ok_or_else(|| format!("'{s}' is not a flow label: 1 to 1048575 (0xfffff)"))
}

fn parse_tos(s: &str) -> Result<u8, String> {
    let t = s.trim();
    let v = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u32::from_str_radix(h, 16)
    } else if t.len() > 1 && t.starts_with('0') {
        u32::from_str_radix(&t[1..], 8)
    } else {
        t.parse::<u32>()
    };
    v.ok()
        .and_then(|v| u8::try_from(v).ok())
        .ok_or_else(|| format!("'{s}' is not a TOS value: 0 to 255 (0xff)"))
}

/// Sends standard output and standard error to the end of `path` from now on.
pub fn redirect_output(path: &std::path::Path) -> anyhow::Result<()> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| crate::exit::UsageError(format!("--logfile {}: {e}", path.display())))?;
    for target in [libc::STDOUT_FILENO, libc::STDERR_FILENO] {
        // SAFETY: dup2 of a descriptor we hold open onto the standard ones; both stay
        // valid, and the file's own descriptor is closed when `f` drops.
        if unsafe { libc::dup2(f.as_raw_fd(), target) } < 0 {
            anyhow::bail!("--logfile: {}", std::io::Error::last_os_error());
        }
    }
    Ok(())
}

impl ClientArgs {
    /// Sets up output: the title and timestamps of lines.
    pub fn apply_output(&self) {
        crate::exit::set_prefix(self.title.clone(), self.timestamps);
    }

    /// What the client driver takes from these options.
    pub fn apply_client(&self, cfg: &mut ClientConfig) {
        if let Some(ms) = self.connect_timeout {
            cfg.connect_timeout = Duration::from_millis(ms);
        }
        cfg.cport = self.cport;
        cfg.cpu = self.affinity.map(|a| a.local);
        cfg.file = self.file.clone().map(Arc::new);
        cfg.data = wirerate_engine::dataopts::DataOpts {
            flowlabel: self.flowlabel,
            mptcp: self.mptcp,
            dont_fragment: self.dont_fragment,
        };
    }

    /// Checks before the test that the kernel makes the sockets asked for (`-m`).
    pub fn check_sockets(&self) -> anyhow::Result<()> {
        if !self.mptcp {
            return Ok(());
        }
        match wirerate_engine::dataopts::mptcp_enabled() {
            Some(true) => Ok(()),
            Some(false) => usage("-m: MPTCP is off here: sysctl net.mptcp.enabled=1 turns it on"),
            None => usage("-m: this kernel has no MPTCP"),
        }
    }

    /// Checks before the test that `-A` names CPUs this process may run on: this side's
    /// always, the server's when the server runs here (the embedded one). An empty answer
    /// from the kernel checks nothing.
    pub fn check_cpus(&self, server_here: bool) -> anyhow::Result<()> {
        let Some(a) = self.affinity else {
            return Ok(());
        };
        let asked = std::iter::once(a.local).chain(a.server.filter(|_| server_here));
        for cpu in asked {
            if let Some(cpus) = wirerate_engine::pool::cpus_instead(cpu) {
                return usage(format!(
                    "-A {cpu}: no such CPU here; wirerate may run on CPUs {cpus}"
                ));
            }
        }
        Ok(())
    }

    /// Checks what needs the spec: the ports --cport needs, and that a file to write to
    /// can be made (it is emptied, as a download overwrites). `receives`: the client
    /// receives the test's data (-R).
    pub fn check(&self, streams: u32, receives: bool, parallel: u32) -> anyhow::Result<()> {
        if let Some(p) = self.cport {
            if u32::from(p) + streams - 1 > u32::from(u16::MAX) {
                return usage(format!(
                    "--cport {p}: {streams} streams need ports up to {}, above 65535",
                    u32::from(p) + streams - 1
                ));
            }
        }
        if let Some(path) = &self.file {
            if receives {
                if parallel > 1 {
                    return usage("-F with -R writes one stream to the file: drop -P");
                }
                std::fs::File::create(path)
                    .map_err(|e| crate::exit::UsageError(format!("-F {}: {e}", path.display())))?;
            } else {
                std::fs::File::open(path)
                    .map_err(|e| crate::exit::UsageError(format!("-F {}: {e}", path.display())))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tos_takes_iperf3_spellings() {
        assert_eq!(parse_tos("184"), Ok(184));
        assert_eq!(parse_tos("0xb8"), Ok(0xb8));
        assert_eq!(parse_tos("0270"), Ok(0o270));
        assert_eq!(parse_tos("0"), Ok(0));
        assert!(parse_tos("256").is_err());
        assert!(parse_tos("-1").is_err());
        assert!(parse_tos("0x1ff").is_err());
    }

    #[test]
    fn affinity_is_one_or_two_cpus() {
        assert_eq!(
            parse_affinity("1,0"),
            Ok(Affinity {
                local: 1,
                server: Some(0)
            })
        );
        assert_eq!(parse_affinity("3").map(|a| a.server), Ok(None));
        assert!(parse_affinity("1,").is_err());
        assert!(parse_affinity("99999").is_err());
    }
}
