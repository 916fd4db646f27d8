//! Results that could not reach their database (a PostgreSQL server down when the run
//! ended) wait in a local spool until it can be reached again: one file per run and
//! database, named by their key, written whole (a temporary file renamed into place, synced) and readable
//! only by its owner. Each file is a `history --json` element with the database it was
//! meant for (`db`, the URL without its password), so `import` reads it too.
//!
//! Storing a spooled run twice is harmless: the run key makes the second store return the
//! first. A file is removed only after its run is committed.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use wirerate_core::RunResult;

use crate::{run_key, Store, StoreError};

/// The most a spooled file may take when read back.
const MAX_SPOOLED_BYTES: u64 = 64 << 20;

/// A spool directory.
pub struct Spool {
    dir: PathBuf,
}

/// What a flush did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Flushed {
    /// Runs now stored (or found already stored) and removed from the spool.
    pub stored: u64,
    /// Runs for this database left in the spool: files that could not be read back.
    pub left: u64,
}

impl Spool {
    /// The spool beside the default database: `$XDG_DATA_HOME/wirerate/spool`, else
    /// `$HOME/.local/share/wirerate/spool`. None when neither is known.
    pub fn default_dir() -> Option<PathBuf> {
        crate::default_path_from(
            None,
            std::env::var_os("XDG_DATA_HOME"),
            std::env::var_os("HOME"),
        )
        .and_then(|p| p.parent().map(|d| d.join("spool")))
    }

    pub fn at(dir: impl Into<PathBuf>) -> Spool {
        Spool { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
        move |source| StoreError::Spool {
            path: path.display().to_string(),
            source,
        }
    }

    /// Keeps a run meant for the database `location` (as [`Store::location`] shows it) and
    /// returns the file it waits in.
    pub fn keep(
        &self,
        location: &str,
        result: &RunResult,
        label: Option<&str>,
        group: Option<&str>,
    ) -> Result<PathBuf, StoreError> {
        use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(Self::io_err(&self.dir))?;
        let json = serde_json::to_string(result).map_err(|e| StoreError::Encode(e.to_string()))?;
        let key = run_key(&json);
        let doc = serde_json::json!({
            "db": location,
            "run_key": key,
            "label": label,
            "group": group,
            "result": result,
        });
        // one file per run and database
        let name = run_key(&format!("{location}\n{key}"));
        let path = self.dir.join(format!("{name}.json"));
        let tmp = path.with_extension("tmp");
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(doc.to_string().as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            std::fs::File::open(&self.dir)?.sync_all()
        };
        write().map_err(Self::io_err(&path))?;
        Ok(path)
    }

    /// The spooled runs meant for `location`, oldest first by file time; files that are not
    /// spooled runs are skipped.
    pub fn waiting(&self, location: &str) -> Result<Vec<PathBuf>, StoreError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Self::io_err(&self.dir)(e)),
        };
        let mut found = Vec::new();
        for e in entries.flatten() {
            let path = e.path();
            if path.extension().is_none_or(|x| x != "json") {
                continue;
            }
            if read_db(&path).as_deref() == Some(location) {
                let at = e.metadata().and_then(|m| m.modified()).ok();
                found.push((at, path));
            }
        }
        found.sort();
        Ok(found.into_iter().map(|(_, p)| p).collect())
    }

    /// Stores every run waiting for `store`'s database and removes each file once its run
    /// is committed. A file that cannot be read back stays and is counted in `left`.
    pub fn flush(&self, store: &mut Store) -> Result<Flushed, StoreError> {
        let mut done = Flushed::default();
        for path in self.waiting(store.location())? {
            let Some(entry) = read_entry(&path) else {
                done.left += 1;
                continue;
            };
            store.store_run(
                &entry.result,
                entry.label.as_deref(),
                entry.group.as_deref(),
            )?;
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                // another flush took it first
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Self::io_err(&path)(e)),
            }
            done.stored += 1;
        }
        Ok(done)
    }
}

fn read_text(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.len() > MAX_SPOOLED_BYTES {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// The database a spooled file is meant for.
fn read_db(path: &Path) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Head {
        db: String,
    }
    let text = read_text(path)?;
    serde_json::from_str::<Head>(&text).ok().map(|h| h.db)
}

fn read_entry(path: &Path) -> Option<wirerate_core::saved::Entry> {
    let text = read_text(path)?;
    let mut entries = wirerate_core::saved::parse_entries(&text).ok()?;
    (entries.len() == 1).then(|| entries.remove(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirerate_core::synth;

    #[test]
    fn a_spooled_run_is_stored_once_and_its_file_removed() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::at(dir.path().join("spool"));
        let db = dir.path().join("r.db");
        let mut store = Store::open(&db).unwrap();
        let (a, b) = (synth::run(1, 1e9, 2), synth::run(2, 2e9, 2));
        // b is already stored: flushing it adds nothing
        store.insert_run(&b, None, None).unwrap();
        let fa = spool
            .keep(store.location(), &a, Some("x"), Some("g"))
            .unwrap();
        spool.keep(store.location(), &b, None, None).unwrap();
        spool
            .keep("postgres://elsewhere/db", &a, None, None)
            .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&fa).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(spool.waiting(store.location()).unwrap().len(), 2);
        let done = spool.flush(&mut store).unwrap();
        assert_eq!(done, Flushed { stored: 2, left: 0 });
        assert!(spool.waiting(store.location()).unwrap().is_empty());
        let rows = store.list_rows(&crate::RunFilter::default()).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].label.as_deref(), Some("x"));
        assert_eq!(
            store.list(&Default::default()).unwrap()[1]
                .result()
                .unwrap(),
            a
        );
        // the other database's run still waits
        assert_eq!(spool.waiting("postgres://elsewhere/db").unwrap().len(), 1);
        assert_eq!(spool.flush(&mut store).unwrap(), Flushed::default());
    }
}
