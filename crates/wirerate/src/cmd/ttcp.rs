//! `wirerate ttcp`: a drop-in for the classic ttcp binary. Same single-letter flags with the
//! same meanings and defaults, same wire behaviour (raw TCP bytes; UDP with 4-byte sentinels),
//! same report lines and arithmetic, so new figures sit beside old logs line for line.
//!
//! The arguments are validated into an engine `Config` here; the engine moves the bytes and
//! the renderer writes the lines.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::ArgAction;
use wirerate_core::spec::limits;
use wirerate_core::Bytes;
use wirerate_engine::ttcp::{self as engine, Config, Ends, Family, Mode};
use wirerate_render::ttcp::{self as lines, Headline, RateUnit, Report, Side, UsageFields};

use crate::exit;

const LONG_ABOUT: &str = "\
Classic ttcp, flag for flag. One side listens, the other connects and sends; nothing but the
data crosses the connection, so either side may be an old ttcp, or any program that writes
or reads a plain socket.

  wirerate ttcp -r [options] [> out]         receive (the default when neither -t nor -r)
  wirerate ttcp -t [options] HOST [< in]     transmit

Without -s the transmitter sends its standard input and the receiver writes what it gets to
its standard output, so the pair copies a file. With -s the transmitter sends a pattern
(the printable ASCII characters, repeated) nbuf times and the receiver discards the data.

Flags are single letters as in ttcp: values may follow with or without a space (-l 8192,
-l8192) and flags may be grouped (-tsu). A flag given twice keeps its last value, except -s,
which flips the mode each time (ttcp's toggle). Sizes for -l, -b, -A and -O take K, M, G as
powers of 1024 (-l 1M = 1048576 bytes).

The headline and the closing figures go to standard output, or to standard error when the
received data goes to standard output (-r without -s). Progress lines (socket, connect,
accept from ...) always go to standard error.";

const QUIRKS: &str = "\
Arithmetic and behaviour kept from classic ttcp (docs/ttcp.md has the details):
  * Rate = bytes / real seconds, in units of 1024: -f K is KB/sec = bytes/s / 1024, -f k is
    Kbit/sec = bytes/s * 8 / 1024, M and G divide by 1024 again per step. There is no
    decimal (1000) unit.
  * msec/call = 1024 * real seconds / calls. The factor is 1024, not 1000, so the figure
    reads 2.4 % high as milliseconds; it is kept so old and new logs compare.
  * calls/sec = calls / real seconds. Calls are every network read, write, sendto and
    recvfrom, including UDP sentinels and every partial read under -B.
  * Real seconds below 0.001 count as 0.001; CPU seconds below 0.00001 as 0.00001.
  * Usage line: %Uuser %Ssys %Ereal %P %Xi+%Dd %Mmaxrss %F+%Rpf %Ccsw. User and system
    time are cut (not rounded) to tenths, elapsed time to whole seconds (m:ss, h:mm:ss).
    The percentage is CPU hundredths * 100 / elapsed hundredths, each hundredth count
    truncated from its seconds and microseconds parts separately. i and d are 0 on Linux;
    maxrss is the kernel's KiB figure halved; pf is major+minor faults; csw is
    voluntary+involuntary context switches.
  * The transmitter's clock runs from connect to the return of its last write, so data
    still in socket buffers counts as sent. The TCP receiver's clock starts at accept, not
    at the first byte, and stops at end of file.
  * -n only matters to a transmitter with -s; the receiver prints it and reads to the end.
  * UDP: the transmitter sends a 4-byte start sentinel, the data, one end sentinel, stops
    its clock, then sends four more. The receiver treats every datagram of 4 bytes or less
    as a sentinel (the first restarts its clock, the next ends the run), ends at an empty
    datagram, cuts datagrams longer than -l to -l, and counts data that arrives before the
    start sentinel. -l below 5 becomes 5 with -u. A lost sentinel is not recovered:
    --udp-idle bounds the wait (classic ttcp waits for ever).
  * -T reads back every received byte over TCP only, as in ttcp. -B and -T apply to the
    receiver; -D to the transmitter; -b sets SO_SNDBUF on the transmitter, SO_RCVBUF on the
    receiver, and the headline prints the requested size.

Differences from classic ttcp, each fixing a failure and none changing a figure: an unknown
-f letter or a malformed number is an error (ttcp used KB and 0); the report goes to
standard error when data goes to standard output (ttcp appended it to the copied file); the
receiver sets SO_REUSEADDR so runs can follow each other on one port; the receiver listens
on IPv6 and IPv4 unless -4 or -6; the four late UDP end sentinels are sent 10 ms apart so a
receiver whose buffer overflowed still sees one; the UDP transmitter sends the start
sentinel also when copying standard input, and sends standard input in whole buffers; the
clock is monotonic.";

#[derive(clap::Args)]
#[command(before_long_help = LONG_ABOUT, after_long_help = QUIRKS)]
#[command(arg_required_else_help = true, args_override_self = true)]
pub struct Args {
    /// Transmit to HOST
    #[arg(short = 't', overrides_with = "receive")]
    transmit: bool,
    /// Receive (the default)
    #[arg(short = 'r', overrides_with = "transmit")]
    receive: bool,
    /// Length of each network read or write in bytes [default: 8192]
    #[arg(short = 'l', value_name = "BUFLEN", value_parser = parse_size)]
    buflen: Option<u64>,
    /// Number of buffers the transmitter sends with -s
    #[arg(short = 'n', value_name = "NBUF", default_value_t = 2048)]
    nbuf: u64,
    /// Port to send to or listen at
    #[arg(short = 'p', value_name = "PORT", default_value_t = 5001)]
    port: u16,
    /// Use UDP instead of TCP
    #[arg(short = 'u')]
    udp: bool,
    /// -t: source a pattern; -r: discard the data (each -s flips the mode)
    #[arg(short = 's', action = ArgAction::Count)]
    sink: u8,
    /// Socket buffer size: SO_SNDBUF (-t) or SO_RCVBUF (-r)
    #[arg(short = 'b', value_name = "SIZE", value_parser = parse_size)]
    sockbuf: Option<u64>,
    /// Set TCP_NODELAY (-t)
    #[arg(short = 'D')]
    nodelay: bool,
    /// Set SO_DEBUG
    #[arg(short = 'd')]
    debug: bool,
    /// Rate unit: k, m, g kilo/mega/gigabits; K, M, G kilo/mega/gigabytes (all 1024-based)
    #[arg(short = 'f', value_name = "X", default_value = "K", value_parser = parse_unit)]
    unit: RateUnit,
    /// Verbose: add the CPU-rate and buffer-address lines
    #[arg(short = 'v')]
    verbose: bool,
    /// Align the buffer start to this modulus (0: no alignment)
    #[arg(short = 'A', value_name = "ALIGN", default_value = "16384", value_parser = parse_size)]
    align: u64,
    /// Start the buffer this many bytes past the modulus
    #[arg(short = 'O', value_name = "OFFSET", default_value = "0", value_parser = parse_size)]
    offset: u64,
    /// -r: fill whole buffers before counting a read (every partial read is still a call)
    #[arg(short = 'B')]
    full_blocks: bool,
    /// -r: touch every byte read (TCP only)
    #[arg(short = 'T')]
    touch: bool,
    /// IPv4 only
    #[arg(short = '4', conflicts_with = "ipv6")]
    ipv4: bool,
    /// IPv6 only
    #[arg(short = '6')]
    ipv6: bool,
    /// UDP receiver: after the start sentinel, stop when nothing arrives for this many
    /// seconds and exit 1 (0 waits for ever, as classic ttcp)
    #[arg(long = "udp-idle", value_name = "SECONDS", default_value_t = 10.0)]
    udp_idle: f64,
    /// Host to transmit to (-t only)
    #[arg(value_name = "HOST")]
    host: Option<String>,
}

fn parse_size(s: &str) -> Result<u64, String> {
    Bytes::parse(s).map(|b| b.get()).map_err(|e| e.to_string())
}

fn parse_unit(s: &str) -> Result<RateUnit, String> {
    let mut chars = s.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => RateUnit::from_letter(c),
        _ => None,
    }
    .ok_or_else(|| format!("'{s}' is not one of k, K, m, M, g, G"))
}

/// Largest UDP payload over IPv4.
const MAX_UDP_PAYLOAD: u64 = 65_507;

/// Checks the arguments and turns them into the engine's configuration.
fn config(a: &Args) -> anyhow::Result<Config> {
    let mode = match (a.transmit, &a.host) {
        (true, Some(h)) => Mode::Transmit { host: h.clone() },
        (true, None) => return exit::usage("-t needs a HOST to send to"),
        (false, Some(h)) => return exit::usage(format!("unexpected '{h}': only -t takes a HOST")),
        (false, None) => Mode::Receive,
    };
    let mut buflen = a.buflen.unwrap_or(8192);
    if buflen == 0 || buflen > limits::MAX_LEN {
        return exit::usage(format!(
            "-l must be 1 byte to {} MiB",
            limits::MAX_LEN >> 20
        ));
    }
    if a.udp {
        buflen = buflen.max(5);
        if a.transmit && buflen > MAX_UDP_PAYLOAD {
            return exit::usage(format!(
                "-l with -u is at most {MAX_UDP_PAYLOAD} bytes (one datagram)"
            ));
        }
    }
    if a.sockbuf.is_some_and(|b| b == 0 || b > limits::MAX_WINDOW) {
        return exit::usage("-b must be 1 byte to 1 GiB");
    }
    if a.align > limits::MAX_LEN || a.offset > limits::MAX_LEN {
        return exit::usage(format!(
            "-A and -O must be at most {} MiB",
            limits::MAX_LEN >> 20
        ));
    }
    if !(a.udp_idle.is_finite() && (0.0..=limits::MAX_SECONDS).contains(&a.udp_idle)) {
        return exit::usage("--udp-idle must be 0 to 86400 seconds");
    }
    Ok(Config {
        mode,
        port: a.port,
        family: match (a.ipv4, a.ipv6) {
            (true, _) => Family::V4,
            (_, true) => Family::V6,
            _ => Family::Any,
        },
        udp: a.udp,
        buflen: buflen as usize,
        nbuf: a.nbuf,
        sink: a.sink % 2 == 1,
        sockbuf: a.sockbuf.map(|b| b as usize),
        nodelay: a.nodelay,
        debug: a.debug,
        align: a.align as usize,
        offset: a.offset as usize,
        full_blocks: a.full_blocks,
        touch: a.touch,
        udp_idle: (a.udp_idle > 0.0).then(|| Duration::from_secs_f64(a.udp_idle)),
    })
}

/// The first line, from the validated configuration.
fn headline(cfg: &Config, side: Side) -> String {
    let host = match &cfg.mode {
        Mode::Transmit { host } => Some(host.as_str()),
        Mode::Receive => None,
    };
    lines::headline(&Headline {
        side,
        buflen: cfg.buflen as u64,
        nbuf: cfg.nbuf,
        align: cfg.align as u64,
        offset: cfg.offset as u64,
        port: cfg.port,
        sockbufsize: cfg.sockbuf.map(|b| b as u64),
        udp: cfg.udp,
        host,
    })
}

/// Runs one side: headline, transfer, closing lines. The report goes to standard error
/// when the received data goes to standard output.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cfg = config(&args)?;
    let side = match cfg.mode {
        Mode::Transmit { .. } => Side::Transmit,
        Mode::Receive => Side::Receive,
    };
    // The report must never mix with data written to standard output.
    let report_to_stderr = side == Side::Receive && !cfg.sink;
    let mut report_out: Box<dyn Write> = if report_to_stderr {
        Box::new(std::io::stderr())
    } else {
        Box::new(crate::exit::stdout())
    };
    let head = headline(&cfg, side);
    report_out
        .write_all(head.as_bytes())
        .context("write report")?;
    report_out.flush().context("write report")?;

    // Raw descriptors: no line buffering on the data path, and reads of up to -l bytes.
    let mut input = File::from(
        std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .context("stdin")?,
    );
    let mut output = File::from(
        std::io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .context("stdout")?,
    );
    let mut progress = |msg: &str| eprint!("{}", lines::message(side, msg));
    let outcome = engine::run(
        &cfg,
        &mut Ends {
            input: &mut input,
            output: &mut output,
            progress: &mut progress,
        },
    )
    .map_err(|e| anyhow::anyhow!("{}: {e}", side.prefix()))?;

    let text = lines::report(&Report {
        side,
        transfer: outcome.transfer,
        unit: args.unit,
        verbose: args.verbose,
        buffer_addr: outcome.buffer_addr,
        fields: UsageFields::Bsd,
    });
    report_out
        .write_all(text.as_bytes())
        .context("write report")?;
    report_out.flush().context("write report")?;
    if outcome.idle_timeout {
        anyhow::bail!(
            "{}: no end-of-data datagram within {} s; the figures end at the last datagram",
            side.prefix(),
            args.udp_idle
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<Config, String> {
        let argv = ["wirerate", "ttcp"].iter().chain(args);
        let cli = crate::Cli::try_parse_from(argv).map_err(|e| e.kind().to_string())?;
        match cli.command {
            crate::Command::Ttcp(a) => config(&a).map_err(|e| e.to_string()),
            _ => Err("not ttcp".into()),
        }
    }

    #[test]
    fn classic_defaults() {
        let c = parse(&["-r"]).unwrap();
        assert_eq!(c.mode, Mode::Receive);
        assert_eq!((c.buflen, c.nbuf, c.port), (8192, 2048, 5001));
        assert_eq!((c.align, c.offset), (16384, 0));
        assert!(!c.sink && !c.udp && c.sockbuf.is_none());
        // neither -t nor -r receives, as in ttcp
        assert_eq!(parse(&["-s"]).unwrap().mode, Mode::Receive);
    }

    #[test]
    fn getopt_style_flags() {
        let c = parse(&[
            "-tsu",
            "-l1K",
            "-n",
            "10",
            "-p5002",
            "-b",
            "64K",
            "-D",
            "localhost",
        ])
        .unwrap();
        assert_eq!(
            c.mode,
            Mode::Transmit {
                host: "localhost".into()
            }
        );
        assert!(c.sink && c.udp && c.nodelay);
        assert_eq!(
            (c.buflen, c.nbuf, c.port, c.sockbuf),
            (1024, 10, 5002, Some(65536))
        );
        assert_eq!(parse(&["-r", "-l", "1M"]).unwrap().buflen, 1 << 20);
    }

    #[test]
    fn last_mode_wins_and_s_toggles() {
        assert_eq!(parse(&["-t", "-r"]).unwrap().mode, Mode::Receive);
        assert!(matches!(
            parse(&["-r", "-t", "h"]).unwrap().mode,
            Mode::Transmit { .. }
        ));
        assert!(!parse(&["-r", "-s", "-s"]).unwrap().sink);
        assert!(parse(&["-r", "-sss"]).unwrap().sink);
        assert_eq!(
            parse(&["-r", "-l", "100", "-l", "200"]).unwrap().buflen,
            200
        );
    }

    #[test]
    fn udp_buffers_outgrow_the_sentinel() {
        assert_eq!(parse(&["-r", "-u", "-l", "2"]).unwrap().buflen, 5);
        assert_eq!(parse(&["-r", "-l", "2"]).unwrap().buflen, 2);
    }

    #[test]
    fn families_and_idle() {
        assert_eq!(parse(&["-r", "-4"]).unwrap().family, Family::V4);
        assert_eq!(parse(&["-r", "-6"]).unwrap().family, Family::V6);
        assert_eq!(parse(&["-r", "--udp-idle", "0"]).unwrap().udp_idle, None);
        assert_eq!(
            parse(&["-r"]).unwrap().udp_idle,
            Some(Duration::from_secs(10))
        );
    }

    #[test]
    fn rejects_what_ttcp_misread() {
        for bad in [
            &["-r", "-f", "x"][..],
            &["-r", "-f", "KK"],
            &["-r", "-l", "-5"],
            &["-r", "-l", "0"],
            &["-r", "-b", "0"],
            &["-t"],
            &["-r", "host"],
            &["-r", "--udp-idle", "nan"],
            &["-r", "-A", "1G"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
