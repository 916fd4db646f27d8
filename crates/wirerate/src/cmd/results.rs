//! What `history`, `show` and `compare` share: where the results database is, how a set of
//! runs is named on the command line (label, run id or saved JSON file), and UTC times.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use wirerate_core::RunResult;
use wirerate_store::Store;

use crate::exit;
use std::io::Write as _;
use wirerate_render::brief::Storage;

/// Help text of every `--db` option.
pub const DB_HELP: &str = "Results database: a SQLite file, or a PostgreSQL URL \
(postgres://USER[:PASSWORD]@HOST[:PORT]/DB, or postgres:///DB?host=/SOCKET/DIR; no TLS) \
shared by many hosts [default: $WIRERATE_DB, else $XDG_DATA_HOME/wirerate/results.db, else \
~/.local/share/wirerate/results.db]";

/// The database path: `--db` when given, else the default.
pub fn db_path(db: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match db.or_else(Store::default_path) {
        Some(p) => Ok(p),
        None => exit::usage("no results database: pass --db PATH|URL or set WIRERATE_DB"),
    }
}

/// Opens an existing database for reading commands.
pub fn open_existing(db: Option<PathBuf>) -> anyhow::Result<Store> {
    let path = db_path(db)?;
    Ok(Store::connect_existing(&path)?)
}

/// Opens (creating when absent) the database for writing commands. The default database's
/// directory is made when missing; a database the user named (`--db`, `WIRERATE_DB`) must
/// be in a directory that exists, so a mistyped path makes no directory tree.
pub fn open_for_write(db: Option<PathBuf>) -> anyhow::Result<Store> {
    let named = db.is_some() || std::env::var_os("WIRERATE_DB").is_some_and(|v| !v.is_empty());
    let path = db_path(db)?;
    if named && !Store::is_url(&path) {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = dir.filter(|d| !d.is_dir()) {
            anyhow::bail!(
                "results database {} is in a directory that does not exist: create {} first",
                path.display(),
                dir.display()
            );
        }
    }
    Ok(Store::connect(&path)?)
}

/// The storing options of a measuring command (`run`), to flatten into its arguments.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct StoreArgs {
    /// Store the run(s) under this label (compare by label later)
    #[arg(long, value_name = "NAME")]
    pub label: Option<String>,
    #[arg(long, value_name = "PATH|URL", help = DB_HELP)]
    pub db: Option<PathBuf>,
    /// Do not store the result in the results database
    #[arg(long, conflicts_with_all = ["label", "db"])]
    pub no_store: bool,
}

impl StoreArgs {
    /// The database to store into, or None under `--no-store`.
    pub fn open(&self) -> anyhow::Result<Option<Store>> {
        if self.no_store {
            return Ok(None);
        }
        open_for_write(self.db.clone()).map(Some)
    }
}

/// Largest saved result file `compare` reads.
const MAX_FILE_BYTES: u64 = 256 << 20;

/// A set of runs named on the command line, and how to describe it.
pub struct Sample {
    pub description: String,
    pub runs: Vec<RunResult>,
}

/// How an operand names its runs.
#[derive(Debug, PartialEq)]
pub enum Operand {
    File(PathBuf),
    Id(i64),
    Label(String),
}

impl Operand {
    /// `file:PATH`, `id:N` and `label:NAME` say it outright; otherwise an existing file is a
    /// file, a whole number is a run id, a name ending in .json or .jsonl is a (missing)
    /// file, and anything else is a label.
    pub fn parse(s: &str) -> anyhow::Result<Operand> {
        if let Some(p) = s.strip_prefix("file:") {
            return Ok(Operand::File(PathBuf::from(p)));
        }
        if let Some(n) = s.strip_prefix("id:") {
            return match n.parse() {
                Ok(id) => Ok(Operand::Id(id)),
                Err(_) => exit::usage(format!("'{s}': a run id is a whole number")),
            };
        }
        if let Some(l) = s.strip_prefix("label:") {
            return Ok(Operand::Label(l.to_string()));
        }
        if s.is_empty() {
            return exit::usage("an empty name is neither a label, a run id nor a file");
        }
        if Path::new(s).is_file() {
            return Ok(Operand::File(PathBuf::from(s)));
        }
        if let Ok(id) = s.parse::<i64>() {
            return Ok(Operand::Id(id));
        }
        if s.ends_with(".json") || s.ends_with(".jsonl") {
            return Ok(Operand::File(PathBuf::from(s)));
        }
        Ok(Operand::Label(s.to_string()))
    }

    pub fn needs_db(&self) -> bool {
        !matches!(self, Operand::File(_))
    }

    /// Loads the runs; `store` must be Some when [`Operand::needs_db`].
    pub fn load(&self, store: Option<&Store>) -> anyhow::Result<Sample> {
        match (self, store) {
            (Operand::File(p), _) => load_file(p),
            (Operand::Id(id), Some(store)) => {
                let run = store
                    .get(*id)?
                    .with_context(|| format!("no run with id {id} in {}", store.location()))?;
                Ok(Sample {
                    description: format!("run {id}"),
                    runs: vec![run.result()?],
                })
            }
            (Operand::Label(l), Some(store)) => load_label(store, l),
            (_, None) => anyhow::bail!("a results database is needed to look up runs"),
        }
    }
}

fn load_label(store: &Store, label: &str) -> anyhow::Result<Sample> {
    let rows = store.runs_for_label(label)?;
    if rows.is_empty() {
        let known: Vec<String> = store
            .labels()?
            .into_iter()
            .map(|(l, n)| format!("{l} ({n})"))
            .collect();
        let hint = if known.is_empty() {
            "it has no labelled runs".to_string()
        } else {
            format!("labels there: {}", known.join(", "))
        };
        anyhow::bail!(
            "no runs labelled '{label}' in {} ({hint})",
            store.location()
        );
    }
    // a find-max search's trials are at many rates: it is compared by those at the rate found
    let (rows, searches) = super::findmax::at_found_rates(rows);
    let runs = rows
        .iter()
        .map(|r| r.result())
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Sample {
        description: format!("label '{label}'{searches}"),
        runs,
    })
}

/// Reads a saved result: one `RunResult` object, a JSON array of them, a stream of them (JSON
/// lines, or documents appended one after another), `history --json` output (elements
/// holding a `result`), or iperf3 `-J` documents.
pub fn load_file(path: &Path) -> anyhow::Result<Sample> {
    let shown = path.display().to_string();
    let runs = read_entries(path)?.into_iter().map(|e| e.result).collect();
    Ok(Sample {
        description: format!("file {shown}"),
        runs,
    })
}

/// The entries of a saved file; an error when it holds none.
pub fn read_entries(path: &Path) -> anyhow::Result<Vec<Entry>> {
    read_entries_within(path, MAX_FILE_BYTES)
}

/// [`read_entries`] with a cap on the file's size, checked before it is read.
pub fn read_entries_within(path: &Path, max_bytes: u64) -> anyhow::Result<Vec<Entry>> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).with_context(|| format!("cannot read {shown}"))?;
    if meta.len() > max_bytes {
        anyhow::bail!(
            "{shown}: {} MiB is larger than the {} MiB a results file may hold",
            meta.len().div_ceil(1 << 20),
            max_bytes >> 20
        );
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {shown}"))?;
    let entries = parse_entries(&text)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("{shown}: not wirerate results"))?;
    if entries.is_empty() {
        anyhow::bail!("{shown}: holds no runs");
    }
    Ok(entries)
}

pub use wirerate_core::saved::{parse_entries, Entry};

/// The runs in a saved file's text (see [`load_file`]).
/// The results database, unless `--no-store`. A database named with `--db` must open; the
/// default one is skipped with a warning when it cannot be made (a read-only home, say).
pub fn open_store(args: &StoreArgs) -> anyhow::Result<Option<Store>> {
    if args.no_store {
        return Ok(None);
    }
    let explicit = args.db.is_some() || std::env::var_os("WIRERATE_DB").is_some();
    match args.open() {
        Ok(s) => Ok(s),
        Err(e) if !explicit => {
            eprintln!("wirerate: results will not be stored: {e:#}");
            Ok(None)
        }
        // the store's error names the database and the cause: said once
        Err(e) => Err(e),
    }
}

/// Stores one result, then the runs that waited in the spool for this database; false (and
/// the error said on stderr) when it could not be stored. A database that cannot be reached
/// keeps the run in the spool. The caller goes on, since the figures are printed, and exits
/// non-zero at the end.
#[must_use]
pub fn save(store: &mut Store, r: &RunResult, label: Option<&str>, group: Option<&str>) -> bool {
    !matches!(
        save_where(store, r, label, group),
        Storage::Failed { .. } | Storage::Spooled { .. }
    )
}

/// [`save`], saying where the run went.
fn save_where<'s>(
    store: &'s mut Store,
    r: &RunResult,
    label: Option<&str>,
    group: Option<&str>,
) -> Storage<'s> {
    match store.insert_run(r, label, group) {
        Ok(id) => {
            super::spool::flush_after_store(store);
            Storage::Stored {
                id,
                location: store.location(),
            }
        }
        // a PostgreSQL server that is down: the run waits in the local spool
        Err(e) if e.is_unreachable() => {
            super::spool::keep_unstored(store, r, label, group, &e);
            Storage::Spooled {
                location: store.location(),
            }
        }
        Err(e) => {
            eprintln!(
                "wirerate: result not stored: {}",
                wirerate_core::text::safe(&wirerate_engine::chain(&e))
            );
            Storage::Failed {
                location: store.location(),
            }
        }
    }
}

/// Stores the result (unless `--no-store`) and, for the text report, says where as its last
/// line; false when it could not be stored.
pub fn store_and_say(
    args: &StoreArgs,
    store: Option<&mut Store>,
    r: &RunResult,
    text: bool,
) -> anyhow::Result<bool> {
    let label = args.label.as_deref();
    let storage = match store {
        Some(store) => save_where(store, r, label, None),
        None if args.no_store => Storage::Off,
        None => Storage::Unavailable,
    };
    let stored = !matches!(storage, Storage::Failed { .. } | Storage::Spooled { .. });
    if text {
        let mut out = crate::exit::stdout();
        let line =
            wirerate_core::text::safe(&wirerate_render::brief::storage(storage)).into_owned();
        write!(out, "{}", crate::exit::with_title(&format!("{line}\n")))?;
        out.flush()?;
    }
    Ok(stored)
}

/// The end of a measuring command: the streams' errors on stderr, one line; exit 0 only
/// when no stream failed and the result was stored (or storing was not asked for). The
/// result itself is printed before, either way.
pub fn finish(stored: bool, errors: &[String]) -> ExitCode {
    if !errors.is_empty() {
        eprintln!(
            "wirerate: {}",
            wirerate_core::text::safe(&errors.join("; "))
        );
    }
    if errors.is_empty() && stored {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[cfg(test)]
pub fn parse_results(text: &str) -> anyhow::Result<Vec<RunResult>> {
    Ok(parse_entries(text)
        .map_err(anyhow::Error::msg)?
        .into_iter()
        .map(|e| e.result)
        .collect())
}

pub use wirerate_core::units::utc;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_args_open_or_skip() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("d").join("r.db");
        let named = StoreArgs {
            db: Some(db.clone()),
            ..Default::default()
        };
        // a named database's directory is never made
        assert!(named.open().is_err());
        assert!(!dir.path().join("d").exists());
        std::fs::create_dir(dir.path().join("d")).unwrap();
        let skip = StoreArgs {
            no_store: true,
            ..Default::default()
        };
        assert!(skip.open().unwrap().is_none());
        let keep = StoreArgs {
            db: Some(db.clone()),
            ..Default::default()
        };
        assert!(keep.open().unwrap().is_some());
        assert!(db.exists());
    }

    #[test]
    fn operands() {
        assert_eq!(Operand::parse("12").unwrap(), Operand::Id(12));
        assert_eq!(Operand::parse("id:7").unwrap(), Operand::Id(7));
        assert_eq!(
            Operand::parse("k6.8").unwrap(),
            Operand::Label("k6.8".into())
        );
        assert_eq!(
            Operand::parse("label:12").unwrap(),
            Operand::Label("12".into())
        );
        assert_eq!(
            Operand::parse("old.json").unwrap(),
            Operand::File("old.json".into())
        );
        assert!(Operand::parse("id:x").is_err());
        assert!(Operand::parse("").is_err());
    }

    #[test]
    fn every_saved_form_reads() {
        let r = RunResult {
            schema_version: 1,
            tool: wirerate_core::result::Tool {
                name: "wirerate".into(),
                version: "0".into(),
            },
            started_unix_s: 1.0,
            spec: wirerate_core::TestSpec::default(),
            summary: serde_json::from_value(serde_json::json!({
                "goodput_bps": 1e9, "sender_bps": 1e9, "bytes": 1, "sender_bytes": 1,
                "seconds": 1.0, "sender_seconds": 1.0,
                "io": {"sender": {"calls": 0, "bytes": 0, "calls_per_s": 0.0, "bytes_per_call": 0.0},
                       "receiver": {"calls": 0, "bytes": 0, "calls_per_s": 0.0, "bytes_per_call": 0.0}},
                "cpu": {"local": null, "remote": null}, "pi": null, "tcp": null, "udp": null,
                "wire": {"link_bps": null, "model_goodput_bps": null, "efficiency": null,
                         "mtu_bytes": null, "link_source": null}
            }))
            .unwrap(),
            intervals: vec![],
            streams: vec![],
            env: Default::default(),
            evidence: Default::default(),
            interrupted: false,
            sweep: None,
            rpm: None,
            inband: Vec::new(),
        };
        let one = serde_json::to_string(&r).unwrap();
        let pretty = serde_json::to_string_pretty(&r).unwrap();
        let forms = [
            (one.clone(), 1),
            (format!("[{one},{one}]"), 2),
            (format!("{one}\n{one}\n\n{one}\n"), 3),
            (format!("{pretty}\n{pretty}\n"), 2),
            (format!("[{{\"id\": 1, \"result\": {one}}}]"), 1),
        ];
        for (text, n) in forms {
            assert_eq!(parse_results(&text).unwrap().len(), n, "{text}");
        }
    }

    #[test]
    fn files_that_are_not_results_are_errors() {
        for bad in [
            "",
            "{}",
            "[1, 2]",
            "{\"a\": 1}\n{\"b\": 2}",
            "not json",
            "[{\"result\": 5}]",
        ] {
            assert!(
                parse_results(bad).map(|v| v.len()).unwrap_or(0) == 0,
                "{bad:?}"
            );
        }
    }
}
