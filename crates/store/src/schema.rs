//! The database layout and its migrations. `PRAGMA user_version` holds the layout's version;
//! each step from one version to the next runs in the same transaction as the version bump,
//! so a database is always at one whole version.

use rusqlite::{Connection, TransactionBehavior};

use crate::StoreError;

/// The layout this build writes and reads.
pub const SCHEMA_VERSION: i64 = 1;

/// Version 1: one row per run. The summary columns are copies of fields of `result_json`
/// (the full `RunResult`), kept so lists and filters need not parse JSON; `result_json` is the
/// record of truth.
const V1: &str = "
CREATE TABLE runs (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    run_key            TEXT NOT NULL UNIQUE,
    label              TEXT,
    repeat_group       TEXT,
    stored_unix_s      REAL NOT NULL,
    started_unix_s     REAL NOT NULL,
    result_schema      INTEGER NOT NULL,
    tool_version       TEXT NOT NULL,
    protocol           TEXT NOT NULL,
    direction          TEXT NOT NULL,
    parallel           INTEGER NOT NULL,
    goodput_bps        REAL,
    sender_bps         REAL,
    cpu_local_percent  REAL,
    cpu_remote_percent REAL,
    pi                 REAL,
    retransmits        INTEGER,
    client_host        TEXT,
    server_host        TEXT,
    client_kernel      TEXT,
    server_kernel      TEXT,
    client_cpu_model   TEXT,
    server_cpu_model   TEXT,
    interfaces         TEXT,
    mtu_bytes          INTEGER,
    link_bps           REAL,
    result_json        TEXT NOT NULL CHECK (json_valid(result_json))
);
CREATE INDEX runs_by_label ON runs (label, id);
CREATE INDEX runs_by_group ON runs (repeat_group, id);
";

/// Brings the database to [`SCHEMA_VERSION`], or refuses one written by a newer wirerate.
pub(crate) fn migrate(conn: &mut Connection, path: &str) -> Result<(), StoreError> {
    // IMMEDIATE takes the write lock first, so two processes opening a new database at once
    // cannot both create the tables.
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_string(),
            found,
            known: SCHEMA_VERSION,
        });
    }
    if found < 1 {
        tx.execute_batch(V1)?;
    }
    // later versions: `if found < 2 { tx.execute_batch(V2)?; }` and so on
    if found < SCHEMA_VERSION {
        tx.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))?;
    }
    tx.commit()?;
    Ok(())
}

/// Checks that a database opened read-only has a layout this build reads, without changing
/// it: a reader never migrates.
pub(crate) fn check_readable(conn: &Connection, path: &str) -> Result<(), StoreError> {
    let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_string(),
            found,
            known: SCHEMA_VERSION,
        });
    }
    if found < 1 {
        return Err(StoreError::Empty(path.to_string()));
    }
    if found < SCHEMA_VERSION {
        return Err(StoreError::TooOld {
            path: path.to_string(),
            found,
        });
    }
    Ok(())
}
