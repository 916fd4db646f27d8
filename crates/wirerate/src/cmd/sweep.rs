//! `wirerate sweep [HOST]`: NetPIPE-style message-size sweep, ping-pong (one-way latency =
//! half the round trip) or one-way streaming, with Hockney's fit.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use clap::ValueEnum;
use wirerate_control::Observer;
use wirerate_core::spec::{End, TestKind};
use wirerate_core::sweep::{
    SweepPoint, SweepSpec, DEFAULT_MAX_BYTES, DEFAULT_PERTURBATION_BYTES, DEFAULT_POINT_TIME_S,
    DEFAULT_TRIALS,
};
use wirerate_core::units::format_bps;
use wirerate_core::TestSpec;
use wirerate_render::{latency, text};

use super::results::StoreArgs;
use super::results::{open_store, store_and_say};
use super::run::{execute, parse_size, target_for, Net, Silent};
use crate::exit::usage;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A table per size and the fit
    Text,
    /// One JSON document following the result schema
    Json,
    /// One row per size with a header row
    Csv,
    /// NetPIPE's np.out columns: bytes, Mbit/s (2^20 bits), one-way seconds
    Netpipe,
}

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Sizes follow NetPIPE's schedule: from 1, powers of two and 1.5 × powers of \
two (1, 2, 3, 4, 6, 8, 12, 16, 24 …); from --min SIZE, steps of SIZE/2 that double every \
second size (1024, 1536, 2048, 3072, 4096 …), as NetPIPE's -l. Each size whose step to the \
next exceeds --perturbation + 1 is measured with the sizes --perturbation bytes below and \
above it (NetPIPE's -p; 0: none). Sizes stay within --min … --max.\n\n\
Each size runs --trials trials (default 3) of about --point-time seconds (default 0.1; at \
least 3 messages each), NetPIPE's defaults; the sweep stops early after a trial takes over \
40 × the point time. A line per size goes to stderr while it runs (text format).\n\n\
Latency is one-way (fields one_way_*_us): half a ping-pong's round trip, or with --stream \
the time per message. Throughput is bytes × 8 ÷ one-way time. Hockney's fit and the \
netpipe format use each size's best trial (NetPIPE's rule); the fit sets aside sizes far off \
the curve the others draw (a busy machine slowed them) and says how many; a fit whose n½ lies \
outside the sizes measured is not given, and the output says why. --fit FILE fits an np.out \
file (NetPIPE's or --format netpipe's) by the same rule, without a test.\n\n\
Sizes take K, M as powers of 1024 (8M = 8388608 bytes).\n\n\
Exit status: 0 success, 1 the test failed, 2 bad usage."
)]
pub struct Args {
    #[command(flatten)]
    pub net: Net,
    /// One-way streaming instead of ping-pong
    #[arg(long)]
    pub stream: bool,
    /// The largest message, in bytes (at most 64M)
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value_t = DEFAULT_MAX_BYTES)]
    pub max: u64,
    /// The smallest message, where the schedule starts (NetPIPE's -l)
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value_t = 1)]
    pub min: u64,
    /// Also measure this many bytes below and above each size (NetPIPE's -p; 0 to 1024)
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_PERTURBATION_BYTES)]
    pub perturbation: u64,
    /// Seconds each trial of a size aims at
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = DEFAULT_POINT_TIME_S,
        allow_negative_numbers = true
    )]
    pub point_time: f64,
    /// Trials per size (the fit and the netpipe format use the best)
    #[arg(long, value_name = "N", default_value_t = DEFAULT_TRIALS)]
    pub trials: u32,
    /// Congestion control of both ends (e.g. cubic, bbr; default: the host's). Under BBR,
    /// sizes past about 1 MiB depend on when the connection left BBR's start-up
    #[arg(short = 'C', long, value_name = "ALGO")]
    pub congestion: Option<String>,
    /// Print JSON (same as --format json)
    #[arg(long, conflicts_with_all = ["csv", "format"])]
    pub json: bool,
    /// Print CSV (same as --format csv)
    #[arg(long, conflicts_with = "format")]
    pub csv: bool,
    /// Output format
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Fit Hockney's model to an np.out file (NetPIPE's, or --format netpipe) by the sweep's
    /// own rule and print it (text or --json); no test runs
    #[arg(long, value_name = "FILE")]
    pub fit: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub store: StoreArgs,
}

pub fn spec_from(a: &Args) -> anyhow::Result<TestSpec> {
    if !(a.net.idle_timeout.is_finite() && (0.1..=3600.0).contains(&a.net.idle_timeout)) {
        return usage("--idle-timeout must be 0.1 to 3600 seconds");
    }
    let sw = SweepSpec {
        stream: a.stream,
        max_bytes: a.max,
        min_bytes: a.min,
        point_time_s: a.point_time,
        trials: a.trials,
        perturbation_bytes: a.perturbation,
    };
    let spec = TestSpec {
        end: End::Time {
            seconds: sw.longest_s(),
        },
        len_bytes: a.max.max(1),
        parallel: 1,
        nodelay: true,
        congestion: a.congestion.clone(),
        interval_s: 0.0,
        test: TestKind::Sweep(sw),
        ..Default::default()
    };
    if let Err(e) = spec.validate() {
        return usage(e.to_string());
    }
    Ok(spec)
}

/// A line per size on stderr while the sweep runs: how far it is, and the size's best trial.
struct Progress {
    total: usize,
    done: usize,
    started: std::time::Instant,
}

impl Observer for Progress {
    fn sweep_point(&mut self, p: &SweepPoint) {
        self.done += 1;
        let best_bps = if p.one_way_min_us > 0.0 {
            p.bytes as f64 * 8.0 / (p.one_way_min_us / 1e6)
        } else {
            0.0
        };
        eprintln!(
            "wirerate: sweep {:>3}/{}: {:>9} B  one-way {:>10.2} µs  {:>15}  ({:.1} s)",
            self.done,
            self.total,
            p.bytes,
            p.one_way_min_us,
            format_bps(best_bps),
            self.started.elapsed().as_secs_f64()
        );
    }
}

/// `--fit FILE`: Hockney's fit of an np.out file, the sweep's rule on another tool's figures.
/// This host's default congestion control for new TCP sockets, if it can be read.
fn host_congestion() -> Option<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The line that says which congestion control a sweep without `-C` runs under, and, under
/// bbr and sizes past 1 MiB, that its start-up decides the sizes of a few MiB
/// (docs/latency.md).
fn default_congestion_line(cc: &Option<String>, max_bytes: u64) -> Option<String> {
    let cc = cc.as_deref()?;
    let mut line = format!(
        "congestion control: {} (this host's default; -C sets both ends')",
        wirerate_core::text::safe(cc)
    );
    if cc == "bbr" && max_bytes > 1 << 20 {
        line.push_str(
            "; under bbr, messages of about 1.5 to 4 MiB run at one of two speeds, by whether \
             the connection is still in bbr's start-up (docs/latency.md): -C cubic for steadier figures",
        );
    }
    Some(line)
}

fn fit_file(path: &std::path::Path, format: Format) -> anyhow::Result<ExitCode> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return usage(format!("--fit {}: {e}", path.display())),
    };
    let points = match wirerate_core::sweep::parse_netpipe(&text) {
        Ok(p) => p,
        Err(e) => return usage(format!("--fit {}: {e}", path.display())),
    };
    let sw = wirerate_core::sweep::SweepResult::new(false, points, false);
    let mut out = crate::exit::stdout();
    match format {
        Format::Json => writeln!(
            out,
            "{}",
            serde_json::json!({ "fit": sw.fit, "fit_note": sw.fit_note, "sizes": sw.points.len() })
        )?,
        Format::Text => write!(out, "{}", latency::sweep_fit(&sw))?,
        Format::Csv | Format::Netpipe => return usage("--fit prints text or JSON"),
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let format = match (a.json, a.csv, a.format) {
        (true, _, _) => Format::Json,
        (_, true, _) => Format::Csv,
        (_, _, f) => f.unwrap_or(Format::Text),
    };
    if let Some(path) = &a.fit {
        return fit_file(path, format);
    }
    let spec = spec_from(&a)?;
    let mut store = open_store(&a.store)?;
    let t = target_for(&a.net)?;
    if format == Format::Text {
        crate::say!("{}", text::header(&spec, &t.describe()));
        if spec.congestion.is_none() {
            if let Some(line) = default_congestion_line(
                &host_congestion(),
                spec.test.sweep().map_or(0, |sw| sw.max_bytes),
            ) {
                crate::say!("{line}");
            }
        }
    }
    let (result, errors) = if format == Format::Text {
        let total = spec.test.sweep().map_or(0, |sw| sw.sizes().len());
        let mut progress = Progress {
            total,
            done: 0,
            started: std::time::Instant::now(),
        };
        execute(&t, &spec, &mut progress, Duration::ZERO)?
    } else {
        execute(&t, &spec, &mut Silent, Duration::ZERO)?
    };
    let sweep = result
        .sweep
        .clone()
        .unwrap_or_else(|| wirerate_core::sweep::SweepResult::new(a.stream, Vec::new(), false));
    let mut out = crate::exit::stdout();
    match format {
        Format::Text => write!(out, "{}", latency::sweep_summary(&sweep))?,
        Format::Json => writeln!(out, "{}", wirerate_render::json::result(&result))?,
        Format::Csv => write!(out, "{}", latency::sweep_csv(&sweep))?,
        Format::Netpipe => write!(out, "{}", latency::sweep_netpipe(&sweep))?,
    }
    out.flush()?;
    let stored = store_and_say(&a.store, store.as_mut(), &result, format == Format::Text)?;
    // printed either way; a failed stream or a result that could not be stored fails
    Ok(super::results::finish(stored, &errors))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_without_c_names_the_hosts_congestion_control_and_warns_under_bbr() {
        assert_eq!(default_congestion_line(&None, 8 << 20), None);
        let cubic = default_congestion_line(&Some("cubic".into()), 8 << 20).unwrap();
        assert!(cubic.starts_with("congestion control: cubic (this host's default"));
        assert!(!cubic.contains("two speeds"), "{cubic}");
        let bbr = default_congestion_line(&Some("bbr".into()), 8 << 20).unwrap();
        assert!(
            bbr.contains("two speeds") && bbr.contains("-C cubic"),
            "{bbr}"
        );
        let small = default_congestion_line(&Some("bbr".into()), 1 << 20).unwrap();
        assert!(!small.contains("two speeds"), "{small}");
    }
}
