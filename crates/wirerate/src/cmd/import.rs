//! `wirerate import FILE...`: stores saved results (`run --json` output, `history --json`
//! exports from another machine) in the results database. Importing the same run twice
//! stores it once.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use wirerate_store::{new_group_id, Store};

use super::results::{open_for_write, read_entries_within, Entry, DB_HELP};

/// The largest file `import` reads.
pub const MAX_IMPORT_BYTES: u64 = 64 << 20;

#[derive(clap::Args)]
#[command(
    after_help = "Each file holds one result, a JSON array of results, results \
appended one after another, or a `history --json` export (whose labels and groups are kept \
unless --label is given). Runs already stored (`run` stores each run it makes) are \
given the label named here or by the export.\n\nA file may hold at most 64 MiB. Every \
run is checked before anything is stored: a known schema_version, a valid spec (parallel ≥ 1 \
and the rest), and rates, times and loss a measurement can produce.\n\nExit status: 0 all stored (or already present), 1 a file could \
not be read or the database written (files before it stay stored), 2 bad usage."
)]
pub struct Args {
    /// Saved result files
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Label for the imported runs (replaces the labels of an export)
    #[arg(long, value_name = "NAME")]
    pub label: Option<String>,
    #[arg(long, value_name = "PATH|URL", help = DB_HELP)]
    pub db: Option<PathBuf>,
    /// Print each run's id on stdout as soon as it is committed, one line each: `ID new`,
    /// or `ID stored` for a run that was already there (for scripts that must know what is
    /// safely stored if the import is cut short)
    #[arg(long)]
    pub ids: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // read every file first, so a bad one stores nothing from the files after it either
    let mut per_file = Vec::new();
    for f in &args.files {
        let entries = read_entries_within(f, MAX_IMPORT_BYTES)?;
        check_entries(f, &entries)?;
        per_file.push(entries);
    }
    let mut store = open_for_write(args.db)?;
    let (mut new, mut relabelled, mut old) = (0u64, 0u64, 0u64);
    for entries in per_file {
        // runs of one file without a group of their own form one group, like a repeat set
        let file_group = new_group_id();
        for e in entries {
            let label = args.label.as_deref().or(e.label.as_deref());
            let group = e.group.as_deref().unwrap_or(&file_group);
            let stored = store.store_run(&e.result, label, Some(group))?;
            if args.ids {
                let state = if stored.new { "new" } else { "stored" };
                let mut out = crate::exit::stdout();
                writeln!(out, "{} {state}", stored.id)?;
                out.flush()?;
            }
            if stored.new {
                new += 1;
            } else if relabel(
                &mut store,
                stored.id,
                label,
                e.group.as_deref(),
                &file_group,
            )? {
                relabelled += 1;
            } else {
                old += 1;
            }
        }
    }
    let runs = |n: u64| format!("{n} run{}", if n == 1 { "" } else { "s" });
    let mut line = format!("stored {} in {}", runs(new), store.location());
    if relabelled > 0 {
        let label = args
            .label
            .as_deref()
            .map_or(String::new(), |l| format!(" '{l}'"));
        line.push_str(&format!(
            "; labelled{label} {} already stored",
            runs(relabelled)
        ));
    }
    if old > 0 {
        line.push_str(&format!(" ({old} already there)"));
    }
    crate::say!("{line}");
    Ok(ExitCode::SUCCESS)
}

/// Refuses a file with a run that no measurement could have produced.
fn check_entries(path: &std::path::Path, entries: &[Entry]) -> anyhow::Result<()> {
    for (i, e) in entries.iter().enumerate() {
        if let Err(why) = e.result.check_plausible() {
            let run = if entries.len() > 1 {
                format!("run {}: ", i + 1)
            } else {
                String::new()
            };
            anyhow::bail!("{}: {run}{why}", path.display());
        }
    }
    Ok(())
}

/// Gives a run that was already stored (`run --json >> file` stores each run as it goes) the
/// label the import names, and a group: the file's own, else the run's, else the file's.
/// False when the run already has that label, or no label is named.
fn relabel(
    store: &mut Store,
    id: i64,
    label: Option<&str>,
    entry_group: Option<&str>,
    file_group: &str,
) -> anyhow::Result<bool> {
    let Some(label) = label else {
        return Ok(false);
    };
    let Some(row) = store.get(id)?.map(|r| r.row) else {
        return Ok(false);
    };
    if row.label.as_deref() == Some(label) {
        return Ok(false);
    }
    let group = entry_group.or(row.group.as_deref()).unwrap_or(file_group);
    Ok(store.set_label(id, Some(label), Some(group))?)
}
