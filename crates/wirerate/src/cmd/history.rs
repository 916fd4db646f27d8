//! `wirerate history`: the stored runs, as a table, as CSV or as JSON. The JSON export (an
//! array, or one run a line) is what `compare` and `import` read back, so a history can be
//! saved, moved and compared elsewhere.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use wirerate_core::rr::RrMode;
use wirerate_core::text::safe;
use wirerate_core::units::format_bps;
use wirerate_store::{RunFilter, RunRow, StoredRun};

use super::results::{open_existing, utc, DB_HELP};

#[derive(clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "The table's CPU % is the busier host's busy share over all its cores for \
stream runs, and for rr runs (test tcp_rr, tcp_crr, udp_rr) the busier side's wirerate process \
alone, in % of one core; rr runs have no PI (\"-\"). seconds is the receivers' measuring \
window; a run stopped early (Ctrl-C) says \"1.97 of 10\" and interrupted \"yes\". loss % and \
jitter ms are UDP's.\n\n\
Exit status: 0 listed (possibly nothing), 1 the database could not be \
read, 2 bad usage."
)]
pub struct Args {
    /// Only runs stored with this label
    #[arg(long, value_name = "NAME")]
    pub label: Option<String>,
    /// Only runs of this repeat group (one `run --repeat` set)
    #[arg(long, value_name = "ID")]
    pub group: Option<String>,
    /// Only the newest N runs
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// JSON array, one element per run: id, run_key, label, group, stored_unix_s and the full
    /// result (what `compare` and `import` read back). Written a run at a time: memory stays
    /// small however long the history
    #[arg(long, conflicts_with_all = ["csv", "ndjson"])]
    pub json: bool,
    /// `--json`'s elements one per line (newline-delimited JSON), for exports of any size
    /// that `import` reads back a run at a time
    #[arg(long, conflicts_with = "csv")]
    pub ndjson: bool,
    /// CSV with a header row: one line per run, the stored summary columns
    #[arg(long)]
    pub csv: bool,
    #[arg(long, value_name = "PATH|URL", help = DB_HELP)]
    pub db: Option<PathBuf>,
    #[command(subcommand)]
    pub action: Option<Action>,
}

#[derive(clap::Subcommand)]
pub enum Action {
    /// Store the runs that wait in the local spool for this database (runs that ended while
    /// it could not be reached)
    Flush(super::spool::FlushArgs),
    /// Copy every run into another database (SQLite to PostgreSQL, say), keeping labels,
    /// groups and order
    Migrate(super::migrate::MigrateArgs),
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.action {
        Some(Action::Flush(a)) => return super::spool::flush(a),
        Some(Action::Migrate(a)) => return super::migrate::run(a),
        None => {}
    }
    let filtered = args.label.is_some() || args.group.is_some();
    let store = open_existing(args.db)?;
    let filter = RunFilter {
        label: args.label,
        group: args.group,
        limit: args.limit,
    };
    let mut out = std::io::BufWriter::new(crate::exit::stdout());
    if args.json || args.ndjson {
        write_json(&mut out, &store, &filter, args.ndjson)?;
    } else {
        // the columns suffice: the documents stay unread
        let rows = store.list_rows(&filter)?;
        if args.csv {
            write_csv(&mut out, &rows)?;
        } else if rows.is_empty() {
            writeln!(out, "no runs {}", if filtered { "match" } else { "stored" })?;
        } else {
            write_table(&mut out, &rows)?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The export, a run at a time: a JSON array (elements pretty-printed), or with `lines` one
/// compact element per line.
fn write_json(
    out: &mut impl std::io::Write,
    store: &wirerate_store::Store,
    filter: &RunFilter,
    lines: bool,
) -> anyhow::Result<()> {
    let mut first = true;
    if !lines {
        out.write_all(b"[")?;
    }
    store.each_run(filter, |r: StoredRun| -> anyhow::Result<()> {
        let item = export_entry(&r)?;
        // through a string, so a closed pipe shows as an io::Error (a clean exit)
        if lines {
            out.write_all(serde_json::to_string(&item)?.as_bytes())?;
            out.write_all(b"\n")?;
        } else {
            out.write_all(if first { b"\n  " } else { b",\n  " })?;
            // indented one level, as an element of the array
            let text = serde_json::to_string_pretty(&item)?;
            out.write_all(text.replace('\n', "\n  ").as_bytes())?;
        }
        first = false;
        Ok(())
    })?;
    if !lines {
        out.write_all(if first { b"]\n" } else { b"\n]\n" })?;
    }
    Ok(())
}

/// One run as exported: its columns and the full result, kept as a generic value so a
/// result written by a newer wirerate still exports.
fn export_entry(r: &StoredRun) -> Result<serde_json::Value, serde_json::Error> {
    let result: serde_json::Value = serde_json::from_str(&r.result_json)?;
    let c = &r.row;
    Ok(serde_json::json!({
        "id": c.id,
        "run_key": c.run_key,
        "label": c.label,
        "group": c.group,
        "stored_unix_s": c.stored_unix_s,
        "result": result,
    }))
}

/// The CSV columns, in order (new ones are added at the end, so scripts that read columns
/// by position keep working).
const CSV_HEADER: [&str; 33] = [
    "id",
    "run_key",
    "label",
    "group",
    "started_unix_s",
    "started_utc",
    "protocol",
    "direction",
    "parallel",
    "goodput_bps",
    "sender_bps",
    "cpu_local_percent",
    "cpu_remote_percent",
    "pi",
    "retransmits",
    "client_host",
    "server_host",
    "client_kernel",
    "server_kernel",
    "client_cpu_model",
    "server_cpu_model",
    "interfaces",
    "mtu_bytes",
    "link_bps",
    "kind",
    "tps",
    "rtt_p99_us",
    "rr_mode",
    "seconds",
    "asked_seconds",
    "udp_loss_percent",
    "udp_jitter_ms",
    "interrupted",
];

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn o<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map_or_else(String::new, T::to_string)
}

fn write_csv(out: &mut impl std::io::Write, rows: &[RunRow]) -> anyhow::Result<()> {
    writeln!(out, "{}", CSV_HEADER.join(","))?;
    for r in rows {
        let fields = [
            r.id.to_string(),
            r.run_key.clone(),
            o(&r.label),
            o(&r.group),
            r.started_unix_s.to_string(),
            utc(r.started_unix_s),
            r.protocol.clone(),
            r.direction.clone(),
            r.parallel.to_string(),
            o(&r.goodput_bps),
            o(&r.sender_bps),
            o(&r.cpu_local_percent),
            o(&r.cpu_remote_percent),
            o(&pi(r)),
            o(&r.retransmits),
            o(&r.client_host),
            o(&r.server_host),
            o(&r.client_kernel),
            o(&r.server_kernel),
            o(&r.client_cpu_model),
            o(&r.server_cpu_model),
            o(&r.interfaces),
            o(&r.mtu_bytes),
            o(&r.link_bps),
            r.kind.clone(),
            o(&r.tps),
            o(&r.rtt_p99_us),
            o(&rr_name(r)),
            o(&r.seconds),
            o(&r.asked_seconds),
            o(&r.udp_loss_percent),
            o(&r.udp_jitter_ms),
            r.interrupted.to_string(),
        ];
        let line: Vec<String> = fields.iter().map(|f| csv_field(&safe(f))).collect();
        writeln!(out, "{}", line.join(","))?;
    }
    Ok(())
}

/// The figure a run is listed by: goodput, for rr runs transactions per second, for rpm
/// runs responsiveness.
fn headline(r: &RunRow) -> String {
    match (r.kind.as_str(), r.tps) {
        ("rr", Some(t)) => format!("{t:.0} tr/s"),
        ("rpm", _) if r.rpm.is_some() => format!("{:.0} RPM", r.rpm.unwrap_or_default()),
        _ => r.goodput_bps.map_or("-".to_string(), format_bps),
    }
}

/// The CPU a run is listed by: the hosts' busy share for streams (what the Performance Index
/// uses), each wirerate process's own for rr runs, whose few bytes leave the host near idle
/// and whose cost is the tool's own.
fn cpu_columns(r: &RunRow) -> (Option<f64>, Option<f64>) {
    match r.kind.as_str() {
        "rr" => (r.process_local_percent, r.process_remote_percent),
        _ => (r.cpu_local_percent, r.cpu_remote_percent),
    }
}

/// The Performance Index of stream runs; an rr run's few bytes make it meaningless (0.00),
/// so it has none.
fn pi(r: &RunRow) -> Option<f64> {
    r.pi.filter(|_| r.kind != "rr")
}

/// An rr run's test in netperf's names: `tcp_rr`, `tcp_crr`, `udp_rr`.
fn rr_name(r: &RunRow) -> Option<&'static str> {
    let mode = r.rr_mode.as_deref().and_then(RrMode::from_name)?;
    (r.kind == "rr").then(|| mode.test_name())
}

/// The seconds a run covered; an interrupted one's of what it asked: "1.97 of 10".
fn duration(r: &RunRow) -> String {
    let Some(s) = r.seconds else {
        return "-".to_string();
    };
    match r.asked_seconds.filter(|_| r.interrupted) {
        Some(asked) => format!("{s:.2} of {asked}"),
        None => format!("{s:.2}"),
    }
}

/// What the test column says: the protocol for streams, netperf's names for rr runs
/// (`tcp_rr`, `tcp_crr`, `udp_rr`), the kind for the rest; and the flows.
fn test_name(r: &RunRow) -> String {
    match (r.kind.as_str(), rr_name(r)) {
        ("stream", _) => format!("{} x{}", r.protocol, r.parallel),
        (_, Some(name)) => format!("{name} x{}", r.parallel),
        (k, _) => format!("{k} {} x{}", r.protocol, r.parallel),
    }
}

fn write_table(out: &mut impl std::io::Write, rows: &[RunRow]) -> anyhow::Result<()> {
    writeln!(
        out,
        "{:>5}  {:<19}  {:<16}  {:>13}  {:>6}  {:>8}  {:>6}  {:>7}  {:>9}  {:>10}  {:<11}  {:<13}  {:<9}  kernel / hosts",
        "id",
        "started (UTC)",
        "label",
        "goodput",
        "CPU %",
        "PI",
        "retr",
        "loss %",
        "jitter ms",
        "seconds",
        "interrupted",
        "test",
        "direction"
    )?;
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_string());
    for r in rows {
        let cpu = match cpu_columns(r) {
            (Some(a), Some(b)) => format!("{:.1}", a.max(b)),
            (Some(x), None) | (None, Some(x)) => format!("{x:.1}"),
            (None, None) => "-".to_string(),
        };
        let hosts = match (&r.client_host, &r.server_host) {
            (Some(c), Some(s)) => format!("{c} -> {s}"),
            (Some(c), None) => c.clone(),
            _ => String::new(),
        };
        writeln!(
            out,
            "{:>5}  {:<19}  {:<16}  {:>13}  {:>6}  {:>8}  {:>6}  {:>7}  {:>9}  {:>10}  {:<11}  {:<13}  {:<9}  {} {}",
            r.id,
            utc(r.started_unix_s),
            safe(r.label.as_deref().unwrap_or("-")),
            headline(r),
            cpu,
            or_dash(pi(r).map(|p| format!("{p:.2}"))),
            or_dash(r.retransmits.map(|n| n.to_string())),
            or_dash(r.udp_loss_percent.map(|l| format!("{l:.3}"))),
            or_dash(r.udp_jitter_ms.map(|j| format!("{j:.3}"))),
            duration(r),
            if r.interrupted { "yes" } else { "-" },
            test_name(r),
            r.direction,
            safe(r.client_kernel.as_deref().unwrap_or("-")),
            safe(&hosts)
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_only_what_needs_it() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
