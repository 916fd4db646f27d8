//! `wirerate show RUN`: one stored run in full, as text or as its stored JSON.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use wirerate_core::result::HostEnv;
use wirerate_core::text::safe;
use wirerate_core::units::{format_bps, format_bytes};
use wirerate_core::RunResult;
use wirerate_render::latency;
use wirerate_store::RunRow;

use super::results::{open_existing, utc, DB_HELP};
use crate::exit;

#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 shown, 1 no such run or the database could not be \
read, 2 bad usage."
)]
pub struct Args {
    /// The run's id (see `wirerate history`)
    #[arg(value_name = "RUN")]
    pub run: String,
    /// Print the stored result document (the JSON contract) instead of text
    #[arg(long)]
    pub json: bool,
    #[arg(long, value_name = "PATH|URL", help = DB_HELP)]
    pub db: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let id: i64 = match args.run.trim_start_matches("id:").parse() {
        Ok(id) => id,
        Err(_) => return exit::usage(format!("'{}' is not a run id", args.run)),
    };
    let store = open_existing(args.db)?;
    let row = store
        .get(id)?
        .with_context(|| format!("no run with id {id} in {}", store.location()))?;
    let mut out = crate::exit::stdout();
    if args.json {
        let v: serde_json::Value = serde_json::from_str(&row.result_json)?;
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        let result = row.result()?;
        out.write_all(details(&row.row, &result).as_bytes())?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn host_line(h: &HostEnv) -> String {
    let mut s = h.hostname.clone().unwrap_or_else(|| "-".to_string());
    if let Some(k) = &h.kernel {
        let _ = write!(s, ", kernel {k}");
    }
    if let Some(c) = &h.cpu_model {
        let _ = write!(s, ", {c}");
    }
    if let Some(n) = h.cores {
        let _ = write!(s, " ({n} cores)");
    }
    for i in &h.interfaces {
        let _ = write!(s, ", {}", i.name);
        if let Some(m) = i.mtu_bytes {
            let _ = write!(s, " mtu {m}");
        }
        if let Some(b) = i.speed_bps {
            let _ = write!(s, " {}", format_bps(b));
        }
    }
    // the names are the hosts' own words: a peer's or a file's
    safe(&s).into_owned()
}

fn details(row: &RunRow, r: &RunResult) -> String {
    let s = &r.summary;
    let mut o = String::new();
    let _ = writeln!(o, "run          {}", row.id);
    let _ = writeln!(
        o,
        "label        {}",
        safe(row.label.as_deref().unwrap_or("-"))
    );
    let _ = writeln!(
        o,
        "group        {}",
        safe(row.group.as_deref().unwrap_or("-"))
    );
    let _ = writeln!(o, "started      {} UTC", utc(r.started_unix_s));
    let _ = writeln!(
        o,
        "test         {} {}, {} stream{}, {} per call",
        row.protocol,
        row.direction,
        r.spec.parallel,
        if r.spec.parallel == 1 { "" } else { "s" },
        format_bytes(r.spec.len_bytes)
    );
    // request/response runs and sweeps: their own figures, as `rr` and `sweep` print them
    if let Some(rr) = &s.rr {
        o.push_str(&latency::rr_summary(r, rr));
    } else if let Some(sw) = &r.sweep {
        let _ = writeln!(o, "sweep        {}", sw.mode);
        o.push_str(&latency::sweep_summary(sw));
    } else {
        throughput(&mut o, r);
    }
    let _ = writeln!(o, "client       {}", host_line(&r.env.client));
    let _ = writeln!(o, "server       {}", host_line(&r.env.server));
    let tool = format!("{} {}", r.tool.name, r.tool.version);
    let _ = writeln!(o, "tool         {}", safe(&tool));
    o
}

/// The largest congestion window the run saw: the senders' (segments) and the intervals'
/// (bytes, as an iperf3 file has it).
fn cwnd(r: &RunResult) -> String {
    let segs = r
        .streams
        .iter()
        .filter_map(|s| s.tcp_sender.as_ref()?.snd_cwnd)
        .max();
    let bytes = r
        .intervals
        .iter()
        .filter_map(|i| i.tcp.as_ref()?.snd_cwnd_bytes)
        .max();
    match (segs, bytes) {
        (Some(s), Some(b)) => format!("{s} segments ({})", format_bytes(b)),
        (Some(s), None) => format!("{s} segments"),
        (None, Some(b)) => format_bytes(b),
        (None, None) => "-".to_string(),
    }
}

fn throughput(o: &mut String, r: &RunResult) {
    let s = &r.summary;
    let _ = writeln!(
        o,
        "goodput      {} ({} in {:.2} s; sender {})",
        format_bps(s.goodput_bps),
        format_bytes(s.bytes),
        s.seconds,
        format_bps(s.sender_bps)
    );
    for (name, side) in [("local", &s.cpu.local), ("remote", &s.cpu.remote)] {
        if let Some(c) = side {
            let sys = c
                .system_percent
                .map_or("-".to_string(), |p| format!("{p:.1} %"));
            let _ = writeln!(
                o,
                "CPU {name:<8} system {sys}, process {:.1} % (user {:.2} s, sys {:.2} s)",
                c.process_percent, c.user_s, c.sys_s
            );
        }
    }
    if let Some(pi) = s.pi {
        let _ = writeln!(o, "PI           {pi:.2}");
    }
    if let Some(t) = &s.tcp {
        let retr = t.retransmits.map_or("-".to_string(), |n| n.to_string());
        let _ = writeln!(o, "retransmits  {retr}");
        let _ = writeln!(o, "largest cwnd {}", cwnd(r));
    }
    if let Some(u) = &s.udp {
        let _ = writeln!(
            o,
            "UDP loss     {:.3} % ({} of {})",
            u.loss_percent, u.lost, u.packets
        );
    }
    if let Some(l) = s.wire.link_bps {
        let eff = s.wire.efficiency.map_or(String::new(), |e| {
            format!(", efficiency {:.1} %", e * 100.0)
        });
        let _ = writeln!(o, "link         {}{eff}", format_bps(l));
    }
}
