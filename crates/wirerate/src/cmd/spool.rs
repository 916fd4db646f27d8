//! Results that could not reach their database wait in the local spool
//! ([`wirerate_store::Spool`]): kept when a store finds PostgreSQL unreachable, stored by
//! the next run that stores to that database or by `wirerate history flush`.

use std::path::PathBuf;
use std::process::ExitCode;

use wirerate_core::text::safe;
use wirerate_core::RunResult;
use wirerate_store::{Spool, Store, StoreError};

use super::results::{open_for_write, DB_HELP};

/// `wirerate history flush`: stores the runs waiting for a database.
#[derive(clap::Args)]
#[command(
    after_help = "A run whose database could not be reached when it ended (a PostgreSQL \
server down) waits in $XDG_DATA_HOME/wirerate/spool (else ~/.local/share/wirerate/spool); \
the next run that stores to that database stores it too, or this command does.\n\nExit \
status: 0 every waiting run stored (or none waited), 1 the database could not be reached or \
a waiting file could not be read back."
)]
pub struct FlushArgs {
    #[arg(long, value_name = "PATH|URL", help = DB_HELP)]
    pub db: Option<PathBuf>,
}

pub fn flush(args: FlushArgs) -> anyhow::Result<ExitCode> {
    let mut store = open_for_write(args.db)?;
    let Some(spool) = Spool::default_dir().map(Spool::at) else {
        anyhow::bail!("no spool directory: neither XDG_DATA_HOME nor HOME is set");
    };
    let done = spool.flush(&mut store)?;
    let runs = |n: u64| format!("{n} run{}", if n == 1 { "" } else { "s" });
    crate::say!(
        "stored {} that waited in {} in {}",
        runs(done.stored),
        spool.dir().display(),
        store.location()
    );
    if done.left > 0 {
        anyhow::bail!(
            "{} for {} in {} could not be read back",
            runs(done.left),
            store.location(),
            spool.dir().display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// After a run was stored: stores the runs that waited for this database, saying so.
pub fn flush_after_store(store: &mut Store) {
    let Some(spool) = Spool::default_dir().map(Spool::at) else {
        return;
    };
    match spool.flush(store) {
        Ok(d) if d.stored > 0 => eprintln!(
            "wirerate: stored {} run{} that waited in {}",
            d.stored,
            if d.stored == 1 { "" } else { "s" },
            spool.dir().display()
        ),
        Ok(_) => {}
        Err(e) => eprintln!(
            "wirerate: runs waiting in {} not stored yet: {}",
            spool.dir().display(),
            safe(&wirerate_engine::chain(&e))
        ),
    }
}

/// A run its database could not take because it could not be reached: kept in the spool,
/// and the one line that says so, where it waits and how it will be stored.
pub fn keep_unstored(
    store: &Store,
    r: &RunResult,
    label: Option<&str>,
    group: Option<&str>,
    e: &StoreError,
) {
    let why = wirerate_engine::chain(e);
    let kept = Spool::default_dir()
        .ok_or_else(|| "neither XDG_DATA_HOME nor HOME is set".to_string())
        .and_then(|d| {
            Spool::at(d)
                .keep(store.location(), r, label, group)
                .map_err(|e| wirerate_engine::chain(&e))
        });
    match kept {
        Ok(path) => eprintln!(
            "wirerate: result not stored yet: {}; it waits in {} and is stored by the next \
             run that stores to {} or by `wirerate history flush --db URL`",
            safe(&why),
            path.display(),
            store.location()
        ),
        Err(k) => eprintln!(
            "wirerate: result not stored: {}; not kept either: {}",
            safe(&why),
            safe(&k)
        ),
    }
}
