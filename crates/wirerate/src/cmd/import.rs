//! `wirerate import FILE...`: stores saved results (`run --json` output, `history --json`
//! exports from another machine) in the results database. Importing the same run twice
//! stores it once.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use wirerate_core::saved::each_entry;
use wirerate_store::{new_group_id, Store, ToStore};

use super::results::{open_for_write, Entry, DB_HELP};

/// The most one run of a file may take (a file may hold any number of runs).
pub const MAX_IMPORT_BYTES: u64 = 64 << 20;

#[derive(clap::Args)]
#[command(
    after_help = "Each file holds one result, a JSON array of results, results \
appended one after another, or a `history --json` or `history --ndjson` export (whose labels \
and groups are kept unless --label is given). Runs already stored (`run` stores each run it makes) are \
given the label named here or by the export.\n\nA file may hold any number of runs, read \
one at a time (one run may take at most 64 MiB) and stored 500 to a transaction. Every \
run is checked before anything is stored: a known schema_version, a valid spec (parallel ≥ 1 \
and the rest), rates, times and loss a measurement can produce, every figure within the \
range its unit allows and every text within its length (256 bytes for names, labels and \
groups).\n\nExit status: 0 all stored (or already present), 1 a file could \
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
    // check every file first, so a bad one stores nothing from the files after it either;
    // the files are read again to store them, a run at a time: memory holds one batch
    for f in &args.files {
        read_runs(f, |_| Ok(()))?;
    }
    let mut store = open_for_write(args.db.clone())?;
    let mut tally = Tally::default();
    for f in &args.files {
        // runs of one file without a group of their own form one group, like a repeat set
        let file_group = new_group_id();
        let mut batch = Vec::with_capacity(BATCH);
        read_runs(f, |e| {
            batch.push(e);
            if batch.len() == BATCH {
                store_batch(&mut store, &mut batch, &args, &file_group, &mut tally)
                    .map_err(|e| format!("{e:#}"))?;
            }
            Ok(())
        })?;
        store_batch(&mut store, &mut batch, &args, &file_group, &mut tally)?;
    }
    let runs = |n: u64| format!("{n} run{}", if n == 1 { "" } else { "s" });
    let mut line = format!("stored {} in {}", runs(tally.new), store.location());
    if tally.relabelled > 0 {
        let label = args
            .label
            .as_deref()
            .map_or(String::new(), |l| format!(" '{l}'"));
        line.push_str(&format!(
            "; labelled{label} {} already stored",
            runs(tally.relabelled)
        ));
    }
    if tally.old > 0 {
        line.push_str(&format!(" ({} already there)", tally.old));
    }
    crate::say!("{line}");
    Ok(ExitCode::SUCCESS)
}

/// Runs stored in one transaction: one sync for many runs.
const BATCH: usize = 500;

/// Longest text a label or group may have.
const MAX_LABEL_BYTES: usize = 256;

#[derive(Default)]
struct Tally {
    new: u64,
    relabelled: u64,
    old: u64,
}

/// Reads a file's runs one at a time, checks each (one line naming the file, the run and the
/// field when one is not possible), and gives it to `each`. An error when the file holds none.
fn read_runs(
    path: &std::path::Path,
    mut each: impl FnMut(Entry) -> Result<(), String>,
) -> anyhow::Result<()> {
    let shown = path.display();
    let file = std::fs::File::open(path).with_context(|| format!("cannot read {shown}"))?;
    let mut n = 0u64;
    // an error of the check or of storing, as against one of reading the file
    let mut refused = false;
    let read = each_entry(std::io::BufReader::new(file), MAX_IMPORT_BYTES, |e| {
        n += 1;
        refused = true;
        check_entry(&e).map_err(|why| format!("run {n}: {why}"))?;
        each(e)?;
        refused = false;
        Ok(())
    });
    match read {
        Ok(0) => anyhow::bail!("{shown}: holds no runs"),
        Ok(_) => Ok(()),
        Err(e) if refused => anyhow::bail!("{shown}: {e}"),
        Err(e) => anyhow::bail!("{shown}: not wirerate results: {e}"),
    }
}

/// Refuses a run that no measurement could have produced, or a label no one would type.
fn check_entry(e: &Entry) -> Result<(), String> {
    e.result.check_plausible().map_err(|e| e.to_string())?;
    for (name, v) in [("label", &e.label), ("group", &e.group)] {
        if v.as_ref().is_some_and(|s| s.len() > MAX_LABEL_BYTES) {
            return Err(format!("{name}: longer than {MAX_LABEL_BYTES} bytes"));
        }
    }
    Ok(())
}

/// Stores the batch in one transaction, then names what is already stored.
fn store_batch(
    store: &mut Store,
    batch: &mut Vec<Entry>,
    args: &Args,
    file_group: &str,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    let runs: Vec<ToStore<'_>> = batch
        .iter()
        .map(|e| ToStore {
            result: &e.result,
            label: args.label.as_deref().or(e.label.as_deref()),
            group: Some(e.group.as_deref().unwrap_or(file_group)),
        })
        .collect();
    let stored = store.store_runs(&runs)?;
    drop(runs);
    for (e, stored) in batch.drain(..).zip(stored) {
        if args.ids {
            let state = if stored.new { "new" } else { "stored" };
            let mut out = crate::exit::stdout();
            writeln!(out, "{} {state}", stored.id)?;
            out.flush()?;
        }
        let label = args.label.as_deref().or(e.label.as_deref());
        if stored.new {
            tally.new += 1;
        } else if relabel(store, stored.id, label, e.group.as_deref(), file_group)? {
            tally.relabelled += 1;
        } else {
            tally.old += 1;
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
