//! `wirerate history migrate --db A --to B`: copies every run of one results database into
//! another (SQLite to PostgreSQL, say), a page at a time, keeping labels, groups and order.

use std::path::PathBuf;
use std::process::ExitCode;

use wirerate_store::{StoredRun, ToStore};

use super::results::{open_existing, open_for_write, DB_HELP};

/// Runs stored in one transaction.
const BATCH: usize = 500;

#[derive(clap::Args)]
#[command(
    after_help = "Reads the source a page of runs at a time and stores 500 runs to a \
transaction, so memory stays small however long the history. Runs already in the target \
(the same run key) are kept as they are, so a migration cut short is finished by running it \
again.\n\nExit status: 0 every run copied (or already there), 1 a database could not be read \
or written, 2 bad usage."
)]
pub struct MigrateArgs {
    #[arg(long, value_name = "PATH|URL", help = DB_HELP)]
    pub db: Option<PathBuf>,
    /// The database to copy the runs into: a SQLite file (made when absent) or a PostgreSQL
    /// URL
    #[arg(long, value_name = "PATH|URL", required = true)]
    pub to: PathBuf,
}

pub fn run(args: MigrateArgs) -> anyhow::Result<ExitCode> {
    let from = open_existing(args.db)?;
    let mut to = open_for_write(Some(args.to))?;
    if from.location() == to.location() {
        return crate::exit::usage("--db and --to name the same database");
    }
    let (mut new, mut old) = (0u64, 0u64);
    let mut batch: Vec<StoredRun> = Vec::with_capacity(BATCH);
    let mut store = |batch: &mut Vec<StoredRun>| -> anyhow::Result<()> {
        let results = batch
            .iter()
            .map(StoredRun::result)
            .collect::<Result<Vec<_>, _>>()?;
        let runs: Vec<ToStore<'_>> = batch
            .iter()
            .zip(&results)
            .map(|(s, r)| ToStore {
                result: r,
                label: s.row.label.as_deref(),
                group: s.row.group.as_deref(),
            })
            .collect();
        for s in to.store_runs(&runs)? {
            if s.new {
                new += 1;
            } else {
                old += 1;
            }
        }
        batch.clear();
        Ok(())
    };
    from.each_run(&Default::default(), |r| -> anyhow::Result<()> {
        batch.push(r);
        if batch.len() == BATCH {
            store(&mut batch)?;
        }
        Ok(())
    })?;
    store(&mut batch)?;
    let runs = |n: u64| format!("{n} run{}", if n == 1 { "" } else { "s" });
    let mut line = format!(
        "copied {} from {} to {}",
        runs(new),
        from.location(),
        to.location()
    );
    if old > 0 {
        line.push_str(&format!(" ({old} already there)"));
    }
    crate::say!("{line}");
    Ok(ExitCode::SUCCESS)
}
