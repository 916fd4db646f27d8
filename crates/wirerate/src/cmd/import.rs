//! `wirerate import FILE...`: stores saved results (`run --json` output, `history --json`
//! exports from another machine) in the results database. Importing the same run twice
//! stores it once.

use std::path::PathBuf;
use std::process::ExitCode;

use wirerate_store::new_group_id;

use super::results::{open_for_write, read_entries, DB_HELP};

#[derive(clap::Args)]
#[command(
    after_help = "Each file holds one result, a JSON array of results, results \
appended one after another, or a `history --json` export (whose labels and groups are kept \
unless --label is given).\n\nExit status: 0 all stored (or already present), 1 a file could \
not be read or the database written (files before it stay stored), 2 bad usage."
)]
pub struct Args {
    /// Saved result files
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Label for the imported runs (replaces the labels of an export)
    #[arg(long, value_name = "NAME")]
    pub label: Option<String>,
    #[arg(long, value_name = "PATH", help = DB_HELP)]
    pub db: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // read every file first, so a bad one stores nothing from the files after it either
    let mut per_file = Vec::new();
    for f in &args.files {
        per_file.push(read_entries(f)?);
    }
    let mut store = open_for_write(args.db)?;
    let (mut new, mut old) = (0u64, 0u64);
    for entries in per_file {
        // runs of one file without a group of their own form one group, like a repeat set
        let file_group = new_group_id();
        for e in entries {
            let label = args.label.as_deref().or(e.label.as_deref());
            let group = e.group.as_deref().unwrap_or(&file_group);
            if store.store_run(&e.result, label, Some(group))?.new {
                new += 1;
            } else {
                old += 1;
            }
        }
    }
    crate::say!(
        "stored {new} run{} in {}{}",
        if new == 1 { "" } else { "s" },
        store.path().display(),
        if old > 0 {
            format!(" ({old} already there)")
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}
