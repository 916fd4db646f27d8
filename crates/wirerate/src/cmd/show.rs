//! `wirerate show RUN`: one stored run in full, as text or as its stored JSON.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use wirerate_core::result::HostEnv;
use wirerate_core::text::safe;
use wirerate_core::units::format_bps;
use wirerate_core::RunResult;
use wirerate_render::{intervals, text};
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

/// The whole stored run: its id, label, group and start, then the report `run -V` printed
/// (header, interval lines, the full summary and Why), then both hosts and the tool.
fn details(row: &RunRow, r: &RunResult) -> String {
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
    if let Some(words) = wirerate_render::brief::interrupted(r) {
        let _ = writeln!(o, "interrupted  {words}");
    }
    let _ = writeln!(o, "client       {}", host_line(&r.env.client));
    let _ = writeln!(o, "server       {}", host_line(&r.env.server));
    let tool = format!("{} {}", r.tool.name, r.tool.version);
    let _ = writeln!(o, "tool         {}", safe(&tool));
    let target = safe(&r.env.server_addr).into_owned();
    let _ = writeln!(o, "\n{}", text::header(&r.spec, &target));
    o.push_str(&intervals::all(r));
    if let Some(sw) = &r.sweep {
        let _ = writeln!(o, "\nsweep        {}", sw.mode);
    }
    o.push_str(&text::summary(r));
    o
}
