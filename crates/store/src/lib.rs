//! Results history of wirerate, kept in SQLite (a file, the default) or PostgreSQL (a
//! `postgres://` URL, shared by many hosts).
//!
//! Promises:
//! - a run is stored whole or not at all: one transaction per run, and the full `RunResult`
//!   is checked to read back before it is written;
//! - what [`Store::insert_run`] acknowledged survives a crash of the process, and of the
//!   machine (WAL with `synchronous = FULL`);
//! - storing the same result again (a retry after an unknown outcome) returns the first id
//!   and adds nothing: each run has a unique key derived from its full JSON;
//! - a database written by a newer wirerate is refused, never rewritten.
//!
//! Both backends give the same answers: the same columns, ids in storing order, text
//! compared byte by byte.

mod key;
pub mod pg;
mod rows;
mod schema;
mod spool;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior};
use wirerate_core::RunResult;

pub use key::{new_group_id, run_key};
pub use rows::{RunFilter, RunRow, StoredRun};
pub use schema::SCHEMA_VERSION;
pub use spool::{Flushed, Spool};

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    // SQLite's errors give their text again as their source, so the cause is said here
    // and not chained: once
    #[error("cannot open results database {path}: {cause}")]
    Open {
        path: String,
        cause: rusqlite::Error,
    },
    #[error("results database {path}: journal mode stays '{mode}', WAL could not be enabled")]
    NoWal { path: String, mode: String },
    #[error("no results database at {0}")]
    Missing(String),
    #[error("cannot read results database {path}")]
    Unreadable {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create directory {path}")]
    CreateDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "results database {path} has layout version {found}; this wirerate reads up to {known}"
    )]
    TooNew {
        path: String,
        found: i64,
        known: i64,
    },
    #[error("results database: {0}")]
    Sqlite(rusqlite::Error),
    #[error("results database {0} holds no runs yet (it has no wirerate tables)")]
    Empty(String),
    #[error(
        "results database {path} has layout version {found}; a command that stores a run \
         brings it up to date"
    )]
    TooOld { path: String, found: i64 },
    #[error("result cannot be stored as JSON: {0}")]
    Encode(String),
    #[error("bad PostgreSQL URL {url}: {cause}")]
    BadUrl { url: String, cause: String },
    /// The URL's `sslrootcert` cannot be trusted.
    #[error("bad PostgreSQL URL {url}: {source}")]
    RootCert {
        url: String,
        source: crate::pg::RootCertError,
    },
    #[error("cannot connect to results database {url}: {cause}")]
    Connect { url: String, cause: String },
    #[error("results database {url}: {cause}")]
    Postgres { url: String, cause: String },
    #[error("cannot keep the run in the spool at {path}")]
    Spool {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("stored run {id} is not a readable wirerate result")]
    Decode {
        id: i64,
        #[source]
        source: serde_json::Error,
    },
}

impl StoreError {
    /// The database could not be reached (a PostgreSQL server down or unreachable): what a
    /// later attempt may get past, so a run's result is worth keeping in the spool.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, StoreError::Connect { .. })
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> StoreError {
        StoreError::Sqlite(e)
    }
}

/// How long a writer waits for another process's write to finish before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// What storing a run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    pub id: i64,
    /// False when the same run was already stored (the id is the earlier one's).
    pub new: bool,
}

/// An open results database.
pub struct Store {
    backend: Backend,
    path: PathBuf,
    shown: String,
}

enum Backend {
    Sqlite(Connection),
    Postgres(Box<pg::Pg>),
}

impl Store {
    fn sqlite(conn: Connection, path: &Path) -> Store {
        Store {
            backend: Backend::Sqlite(conn),
            path: path.to_path_buf(),
            shown: path.display().to_string(),
        }
    }

    fn postgres(db: pg::Pg) -> Store {
        Store {
            path: PathBuf::from(&db.shown),
            shown: db.shown.clone(),
            backend: Backend::Postgres(Box::new(db)),
        }
    }

    /// Opens for writing the database `location` names: a PostgreSQL URL (`postgres://…` or
    /// `postgresql://…`) or else a SQLite file path ([`Store::open`]).
    pub fn connect(location: &Path) -> Result<Store, StoreError> {
        match location.to_str().filter(|s| pg::is_url(s)) {
            Some(url) => Self::open_url(url),
            None => Self::open(location),
        }
    }

    /// Opens for reading the database `location` names ([`Store::connect`]'s rule;
    /// [`Store::open_existing`] for a file).
    pub fn connect_existing(location: &Path) -> Result<Store, StoreError> {
        match location.to_str().filter(|s| pg::is_url(s)) {
            Some(url) => Self::open_url_existing(url),
            None => Self::open_existing(location),
        }
    }

    /// Connects to a PostgreSQL results database and brings its layout up to date (under an
    /// advisory lock, so hosts starting at once migrate once).
    pub fn open_url(url: &str) -> Result<Store, StoreError> {
        pg::Pg::open(url).map(Self::postgres)
    }

    /// Connects to a PostgreSQL results database for reading: nothing is created or migrated,
    /// and the session is read-only.
    pub fn open_url_existing(url: &str) -> Result<Store, StoreError> {
        pg::Pg::open_existing(url).map(Self::postgres)
    }

    /// Whether `location` (a `--db` value) is a PostgreSQL URL.
    pub fn is_url(location: &Path) -> bool {
        location.to_str().is_some_and(pg::is_url)
    }

    /// "sqlite" or "postgresql".
    pub fn backend_name(&self) -> &'static str {
        match self.backend {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgresql",
        }
    }

    /// The database for messages: the file's path, or the URL without its password.
    pub fn location(&self) -> &str {
        &self.shown
    }

    /// Opens the database at `path`, creating it (and its parent directories) when absent,
    /// and brings its layout up to date.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                path: dir.display().to_string(),
                source,
            })?;
        }
        Self::open_with(path, OpenFlags::SQLITE_OPEN_CREATE)
    }

    /// Opens an existing database for reading only (SQLite's read-only mode: no journal
    /// change, no migration, nothing written), so a database in a directory or file the user
    /// cannot write still reads. A missing file is [`StoreError::Missing`] rather than a new
    /// empty history (what a reader with a mistyped path wants to hear).
    pub fn open_existing(path: &Path) -> Result<Store, StoreError> {
        match std::fs::metadata(path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::Missing(path.display().to_string()));
            }
            Err(source) => {
                return Err(StoreError::Unreadable {
                    path: path.display().to_string(),
                    source,
                })
            }
        }
        let shown = path.display().to_string();
        let first = Self::open_read_only(path, &shown, false);
        // A WAL database needs its -shm index; a reader that cannot create one (a read-only
        // directory) may only open the file as immutable. When neither -wal nor -shm exists,
        // no writer holds the database open, so that reads the last commit.
        let side = |ext: &str| {
            let mut p = path.as_os_str().to_owned();
            p.push(ext);
            PathBuf::from(p).exists()
        };
        match first {
            Err(StoreError::Open { .. }) if !side("-wal") && !side("-shm") => {
                Self::open_read_only(path, &shown, true).or(first)
            }
            other => other,
        }
    }

    fn open_read_only(path: &Path, shown: &str, immutable: bool) -> Result<Store, StoreError> {
        let open_err = |cause| StoreError::Open {
            path: shown.to_string(),
            cause,
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = if immutable {
            let uri = format!("file:{}?immutable=1", uri_path(path));
            Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)
        } else {
            Connection::open_with_flags(path, flags)
        }
        .map_err(open_err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
        schema::check_readable(&conn, shown).map_err(|e| match e {
            StoreError::Sqlite(cause) => open_err(cause),
            other => other,
        })?;
        Ok(Store::sqlite(conn, path))
    }

    fn open_with(path: &Path, extra: OpenFlags) -> Result<Store, StoreError> {
        let shown = path.display().to_string();
        let open_err = |cause| StoreError::Open {
            path: shown.clone(),
            cause,
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX | extra;
        let mut conn = Connection::open_with_flags(path, flags).map_err(open_err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
        // WAL: readers never block the writer and a crash mid-write leaves the last commit
        // intact. FULL syncs the WAL at every commit, so an acknowledged run survives power
        // loss too; a run is one small commit every few seconds, so the cost is not felt.
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(open_err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::NoWal { path: shown, mode });
        }
        conn.execute_batch("PRAGMA synchronous = FULL")
            .map_err(open_err)?;
        schema::migrate(&mut conn, &shown).map_err(|e| match e {
            StoreError::Sqlite(cause) => open_err(cause),
            other => other,
        })?;
        Ok(Store::sqlite(conn, path))
    }

    /// The database's location: `WIRERATE_DB` when set, else
    /// `$XDG_DATA_HOME/wirerate/results.db`, else `$HOME/.local/share/wirerate/results.db`.
    /// None when none of these is known. [`Store::open`] creates the parent directories.
    pub fn default_path() -> Option<PathBuf> {
        default_path_from(
            std::env::var_os("WIRERATE_DB"),
            std::env::var_os("XDG_DATA_HOME"),
            std::env::var_os("HOME"),
        )
    }

    /// The file's path; for PostgreSQL, the redacted URL ([`Store::location`]).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stores one run with its label and repeat group, in one transaction, and returns its
    /// id. When the same result (same JSON, so the same key) is already stored, returns that
    /// run's id and changes nothing: its first label and group stay.
    pub fn insert_run(
        &mut self,
        result: &RunResult,
        label: Option<&str>,
        group: Option<&str>,
    ) -> Result<i64, StoreError> {
        self.store_run(result, label, group).map(|s| s.id)
    }

    /// [`Store::insert_run`], also telling whether the run was new.
    pub fn store_run(
        &mut self,
        result: &RunResult,
        label: Option<&str>,
        group: Option<&str>,
    ) -> Result<Stored, StoreError> {
        self.store_run_keyed(result, label, group, None)
    }

    /// [`Store::store_run`] under a key the caller names instead of the result's own: a
    /// measurement that may be made twice (a plan's test run again after its controller
    /// died) is stored once, and the second store returns the first one's id.
    pub fn store_run_keyed(
        &mut self,
        result: &RunResult,
        label: Option<&str>,
        group: Option<&str>,
        key: Option<&str>,
    ) -> Result<Stored, StoreError> {
        let (json, key) = encode(result, key)?;
        let stored = now_unix_s();
        let run = rows::NewRun {
            result,
            key: &key,
            label,
            group,
            stored_unix_s: stored,
            json: &json,
        };
        let conn = match &mut self.backend {
            Backend::Sqlite(c) => c,
            Backend::Postgres(db) => return db.store_run(&run),
        };
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let stored = insert_once(&tx, &run)?;
        tx.commit()?;
        Ok(stored)
    }

    /// Gives a stored run a label and repeat group (an import naming runs that are already
    /// stored); false when there is no run with this id.
    pub fn set_label(
        &mut self,
        id: i64,
        label: Option<&str>,
        group: Option<&str>,
    ) -> Result<bool, StoreError> {
        let conn = match &mut self.backend {
            Backend::Sqlite(c) => c,
            Backend::Postgres(db) => return db.set_label(id, label, group),
        };
        let n = conn.execute(
            "UPDATE runs SET label = ?2, repeat_group = ?3 WHERE id = ?1",
            rusqlite::params![id, label, group],
        )?;
        Ok(n == 1)
    }

    /// Runs matching `filter` with their full documents, oldest first (the newest `limit`
    /// when a limit is set).
    pub fn list(&self, filter: &RunFilter) -> Result<Vec<StoredRun>, StoreError> {
        match &self.backend {
            Backend::Sqlite(c) => rows::list_runs(c, filter),
            Backend::Postgres(db) => db.list(filter),
        }
    }

    /// [`Store::list`] without the documents: the summary columns only, for long lists.
    pub fn list_rows(&self, filter: &RunFilter) -> Result<Vec<RunRow>, StoreError> {
        match &self.backend {
            Backend::Sqlite(c) => rows::list_rows(c, filter),
            Backend::Postgres(db) => db.list_rows(filter),
        }
    }

    /// Each run matching `filter` with its document, oldest first (the newest `limit` when a
    /// limit is set), read a page at a time: memory stays that of one page however many runs
    /// there are. Runs stored after the export began are not included. Stops at `each`'s
    /// first error and returns it.
    pub fn each_run<E: From<StoreError>>(
        &self,
        filter: &RunFilter,
        mut each: impl FnMut(StoredRun) -> Result<(), E>,
    ) -> Result<(), E> {
        const PAGE: u32 = 256;
        let span = match &self.backend {
            Backend::Sqlite(c) => rows::span(c, filter)?,
            Backend::Postgres(db) => db.span(filter)?,
        };
        let Some((first, last)) = span else {
            return Ok(());
        };
        let mut after = first - 1;
        loop {
            let page = match &self.backend {
                Backend::Sqlite(c) => rows::page(c, filter, after, last, PAGE)?,
                Backend::Postgres(db) => db.page(filter, after, last, PAGE)?,
            };
            let full = page.len() == PAGE as usize;
            for run in page {
                after = run.row.id;
                each(run)?;
            }
            if !full {
                return Ok(());
            }
        }
    }

    /// Stores runs together, in one transaction for all of them (one commit instead of one
    /// per run: an import of thousands of runs takes seconds, not minutes): all or none. A
    /// run already stored returns its id, as in [`Store::store_run`]; the answers are in the
    /// runs' order.
    pub fn store_runs(&mut self, runs: &[ToStore<'_>]) -> Result<Vec<Stored>, StoreError> {
        let mut prepared = Vec::with_capacity(runs.len());
        for r in runs {
            let (json, key) = encode(r.result, None)?;
            prepared.push((r, json, key));
        }
        let stored_unix_s = now_unix_s();
        fn new_run<'a>(p: &'a (&ToStore<'a>, String, String), at: f64) -> rows::NewRun<'a> {
            rows::NewRun {
                result: p.0.result,
                key: &p.2,
                label: p.0.label,
                group: p.0.group,
                stored_unix_s: at,
                json: &p.1,
            }
        }
        let conn = match &mut self.backend {
            Backend::Sqlite(c) => c,
            Backend::Postgres(db) => {
                let runs: Vec<rows::NewRun<'_>> =
                    prepared.iter().map(|p| new_run(p, stored_unix_s)).collect();
                return db.store_runs(&runs);
            }
        };
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut out = Vec::with_capacity(prepared.len());
        for p in &prepared {
            out.push(insert_once(&tx, &new_run(p, stored_unix_s))?);
        }
        tx.commit()?;
        Ok(out)
    }

    /// One run by id.
    pub fn get(&self, id: i64) -> Result<Option<StoredRun>, StoreError> {
        match &self.backend {
            Backend::Sqlite(c) => rows::get(c, id),
            Backend::Postgres(db) => db.get(id),
        }
    }

    /// Every run with this label, oldest first: the sample `compare` uses for a label.
    pub fn runs_for_label(&self, label: &str) -> Result<Vec<StoredRun>, StoreError> {
        self.list(&RunFilter {
            label: Some(label.to_string()),
            ..RunFilter::default()
        })
    }

    /// Labels in use with their run counts, by label.
    pub fn labels(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let conn = match &self.backend {
            Backend::Sqlite(c) => c,
            Backend::Postgres(db) => return db.labels(),
        };
        let mut st = conn.prepare(
            "SELECT label, COUNT(*) FROM runs WHERE label IS NOT NULL GROUP BY label ORDER BY label",
        )?;
        let out = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(out)
    }

    /// SQLite's `PRAGMA integrity_check`: "ok" or the problems it found. For PostgreSQL
    /// (whose server keeps its own pages whole), a check that every row has its document.
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        let conn = match &self.backend {
            Backend::Sqlite(c) => c,
            Backend::Postgres(db) => return db.integrity_check(),
        };
        let mut st = conn.prepare("PRAGMA integrity_check")?;
        let lines = st
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(lines.join("; "))
    }

    /// The journal mode in force ("wal"); for PostgreSQL, its commit durability.
    pub fn journal_mode(&self) -> Result<String, StoreError> {
        let conn = match &self.backend {
            Backend::Sqlite(c) => c,
            Backend::Postgres(db) => return db.journal_mode(),
        };
        Ok(conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?)
    }
}

/// One run for [`Store::store_runs`].
pub struct ToStore<'a> {
    pub result: &'a RunResult,
    pub label: Option<&'a str>,
    pub group: Option<&'a str>,
}

/// A result's JSON and its key (the caller's name for it, else its own JSON's), checked to
/// read back: a value JSON cannot carry (a NaN becomes null) would make the row unreadable.
fn encode(result: &RunResult, key: Option<&str>) -> Result<(String, String), StoreError> {
    let json = serde_json::to_string(result).map_err(|e| StoreError::Encode(e.to_string()))?;
    serde_json::from_str::<RunResult>(&json)
        .map_err(|e| StoreError::Encode(format!("it would not read back ({e})")))?;
    let key = key.map_or_else(|| run_key(&json), |k| run_key(&format!("named {k}")));
    Ok((json, key))
}

fn now_unix_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Inserts the run in SQLite unless its key is stored already (then its id is returned).
fn insert_once(
    tx: &rusqlite::Transaction<'_>,
    run: &rows::NewRun<'_>,
) -> Result<Stored, StoreError> {
    let existing: Option<i64> = tx
        .query_row("SELECT id FROM runs WHERE run_key = ?1", [run.key], |r| {
            r.get(0)
        })
        .optional()?;
    if let Some(id) = existing {
        return Ok(Stored { id, new: false });
    }
    let id = rows::insert(tx, run)?;
    Ok(Stored { id, new: true })
}

/// A path for a `file:` URI: every byte but the unreserved ones and `/` percent-encoded, so
/// `?`, `#` and `%` in a file name stay part of the name.
fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// [`Store::default_path`] from the variables' values (empty counts as unset; a relative
/// `XDG_DATA_HOME` is ignored, as the XDG rules say).
pub fn default_path_from(
    wirerate_db: Option<std::ffi::OsString>,
    xdg_data_home: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    let set = |v: Option<std::ffi::OsString>| v.filter(|s| !s.is_empty()).map(PathBuf::from);
    if let Some(p) = set(wirerate_db) {
        return Some(p);
    }
    let base = set(xdg_data_home)
        .filter(|p| p.is_absolute())
        .or_else(|| set(home).map(|h| h.join(".local").join("share")))?;
    Some(base.join("wirerate").join("results.db"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_paths_escape_what_a_uri_would_read_as_syntax() {
        assert_eq!(uri_path(Path::new("/a/b-c_d.db")), "/a/b-c_d.db");
        assert_eq!(
            uri_path(Path::new("/x y/r?1#%.db")),
            "/x%20y/r%3F1%23%25.db"
        );
    }

    #[test]
    fn default_path_prefers_the_variable_then_xdg_then_home() {
        let s = |x: &str| Some(std::ffi::OsString::from(x));
        assert_eq!(
            default_path_from(s("/x/r.db"), s("/d"), s("/h")),
            Some(PathBuf::from("/x/r.db"))
        );
        assert_eq!(
            default_path_from(s(""), s("/d"), s("/h")),
            Some(PathBuf::from("/d/wirerate/results.db"))
        );
        assert_eq!(
            default_path_from(None, s("relative"), s("/h")),
            Some(PathBuf::from("/h/.local/share/wirerate/results.db"))
        );
        assert_eq!(default_path_from(None, None, None), None);
    }
}
