//! The PostgreSQL backend: the same runs table as SQLite's, shared by many hosts.
//!
//! Promises, as for SQLite: a run is one transaction (one `INSERT`), the unique run key makes a
//! second store of the same result return the first id (`ON CONFLICT DO NOTHING`, then the
//! existing row), and a commit is acknowledged only once the server has it. Many writers on
//! many hosts may store at once: the key's unique index is what decides, not the writers.
//!
//! The connection is plain (no TLS): a Unix socket, a loopback address or a trusted network.
//! A password in the URL is never shown: every message names the database by [`redact`]'s
//! form of its URL.

use std::cell::RefCell;
use std::time::Duration;

use postgres::{Client, GenericClient, NoTls, Row};

use crate::rows::{self, Columns, NewRun, RunFilter, RunRow, StoredRun};
use crate::{StoreError, Stored, SCHEMA_VERSION};

mod pages;

/// How long connecting may take when the URL does not say (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The advisory lock that serialises migrations between hosts ("wirerate" in ASCII).
const MIGRATION_LOCK: i64 = 0x7769_7265_7261_7465;

/// Whether a `--db` value is a PostgreSQL URL rather than a file path.
pub fn is_url(s: &str) -> bool {
    let lower = s.get(..13).unwrap_or(s).to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// The URL with its password (in the user part or a `password=` parameter) replaced by
/// `***`, for messages.
pub fn redact(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => (&url[..i + 3], &url[i + 3..]),
        None => return url.to_string(),
    };
    // the user part ends at the last '@' before the parameters: a password with an unencoded
    // '/' or '@' in it is still hidden (a database name with '@' in it is hidden too: better
    // too much than too little)
    let params_at = rest.find(['?', '#']).unwrap_or(rest.len());
    let (authority, tail) = match rest[..params_at].rfind('@') {
        Some(at) => {
            let (user, host) = rest.split_at(at);
            let user = match user.find(':') {
                Some(c) => format!("{}:***", &user[..c]),
                None => user.to_string(),
            };
            (user, host)
        }
        None => (String::new(), rest),
    };
    let tail = match tail.find('?') {
        Some(q) => {
            let (path, query) = tail.split_at(q + 1);
            let params: Vec<String> = query
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => p.to_string(),
                })
                .collect();
            format!("{path}{}", params.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{scheme}{authority}{tail}")
}

/// One line for a PostgreSQL error: the server's message when it sent one, else the client's.
pub(crate) fn cause(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => {
            let mut s = e.to_string();
            let mut src = std::error::Error::source(e);
            while let Some(inner) = src {
                let t = inner.to_string();
                if !s.contains(&t) {
                    s = format!("{s}: {t}");
                }
                src = inner.source();
            }
            s
        }
    }
}

/// Connects to the server a URL names (`postgres://` or `postgresql://`), with a 10 s
/// connect timeout unless the URL sets `connect_timeout`. The errors name the database by its
/// redacted URL. Other programs of the project (a work queue, say) reach the results database
/// through this.
///
/// `sslmode=require` speaks TLS and checks the server's certificate, its chain and its host
/// name, against the CA certificates of `sslrootcert=FILE` in the URL (or the
/// `PGSSLROOTCERT` environment variable, as libpq reads it); without either it is refused. Any
/// other mode connects without TLS.
pub fn connect(url: &str) -> Result<Client, StoreError> {
    let shown = redact(url);
    if !is_url(url) {
        return Err(StoreError::BadUrl {
            url: shown,
            cause: "a PostgreSQL URL starts with postgres:// or postgresql://".into(),
        });
    }
    let (url, root_cert) = take_param(url, "sslrootcert");
    let mut config: postgres::Config =
        url.parse()
            .map_err(|e: postgres::Error| StoreError::BadUrl {
                url: shown.clone(),
                cause: cause(&e),
            })?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("wirerate");
    }
    if config.get_password().is_none() {
        if let Some(pw) = pgpass_password(&config) {
            config.password(pw);
        }
    }
    let connected = if config.get_ssl_mode() == postgres::config::SslMode::Require {
        let root_cert = root_cert
            .or_else(|| {
                std::env::var("PGSSLROOTCERT")
                    .ok()
                    .filter(|v| !v.is_empty())
            })
            .ok_or_else(|| StoreError::BadUrl {
                url: shown.clone(),
                cause: "sslmode=require needs the CA certificate that signed the server's: \
                        sslrootcert=FILE in the URL, or PGSSLROOTCERT"
                    .into(),
            })?;
        let tls = tls_connector(&root_cert).map_err(|source| StoreError::RootCert {
            url: shown.clone(),
            source,
        })?;
        config.connect(tls)
    } else {
        config.connect(NoTls)
    };
    connected.map_err(|e| StoreError::Connect {
        url: shown,
        cause: cause(&e),
    })
}

/// The password libpq's password file gives this connection: `PGPASSFILE`, or `.pgpass` in
/// the home directory; lines `host:port:database:user:password`, `*` for any value, `\:` and
/// `\\` escaped, the first match wins. As libpq does, a file that others can read is ignored
/// (with a warning), and a Unix socket's host is `localhost`.
fn pgpass_password(config: &postgres::Config) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let path = match std::env::var_os("PGPASSFILE") {
        Some(p) if !p.is_empty() => std::path::PathBuf::from(p),
        _ => std::path::Path::new(&std::env::var_os("HOME")?).join(".pgpass"),
    };
    let meta = std::fs::metadata(&path).ok()?;
    if !meta.is_file() {
        return None;
    }
    if meta.permissions().mode() & 0o077 != 0 {
        eprintln!(
            "wirerate: warning: password file {} has group or world access; permissions \
             should be u=rw (0600) or less: it is not read",
            path.display()
        );
        return None;
    }
    let text = std::fs::read_to_string(&path).ok()?;
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "localhost".to_string(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user()?;
    let db = config.get_dbname().unwrap_or(user);
    pgpass_match(&text, [host.as_str(), port.as_str(), db, user])
}

/// The password of the first line of a password file that matches `wanted` (host, port,
/// database, user).
fn pgpass_match(text: &str, wanted: [&str; 4]) -> Option<String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .find_map(|line| {
            let mut fields = Vec::with_capacity(5);
            let mut cur = String::new();
            let mut chars = line.chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => cur.extend(chars.next()),
                    ':' if fields.len() < 4 => fields.push(std::mem::take(&mut cur)),
                    c => cur.push(c),
                }
            }
            fields.push(cur);
            let [h, p, d, u, pw] = <[String; 5]>::try_from(fields).ok()?;
            let matches = [h, p, d, u]
                .iter()
                .zip(wanted)
                .all(|(f, w)| f == "*" || f == w);
            matches.then_some(pw)
        })
}

/// Why the CA certificates of `sslrootcert` cannot be trusted.
#[derive(Debug, thiserror::Error)]
pub enum RootCertError {
    #[error("{path}: {source}")]
    File {
        path: String,
        source: rustls::pki_types::pem::Error,
    },
    #[error("{path}: not a CA certificate: {source}")]
    NotCa { path: String, source: rustls::Error },
    #[error("{0}: no certificate in it")]
    Empty(String),
    #[error("{0}")]
    Versions(#[source] rustls::Error),
}

/// A TLS connector that trusts the CA certificates of the PEM file `path`.
fn tls_connector(path: &str) -> Result<tokio_postgres_rustls::MakeRustlsConnect, RootCertError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let mut roots = rustls::RootCertStore::empty();
    let file = |source| RootCertError::File {
        path: path.to_string(),
        source,
    };
    let certs = CertificateDer::pem_file_iter(path).map_err(file)?;
    for c in certs {
        let c = c.map_err(file)?;
        roots.add(c).map_err(|source| RootCertError::NotCa {
            path: path.to_string(),
            source,
        })?;
    }
    if roots.is_empty() {
        return Err(RootCertError::Empty(path.to_string()));
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(RootCertError::Versions)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// The URL without the query parameter `name`, and that parameter's value (the last, if it
/// is given more than once), which the driver would refuse as unknown.
fn take_param(url: &str, name: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), None);
    };
    let mut value = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|kv| match kv.split_once('=') {
            Some((k, v)) if k == name => {
                value = Some(
                    percent_encoding::percent_decode_str(v)
                        .decode_utf8_lossy()
                        .into_owned(),
                );
                false
            }
            _ => true,
        })
        .collect();
    let url = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (url, value)
}

/// An open PostgreSQL results database.
pub(crate) struct Pg {
    // the store's reading methods take &self; a client needs &mut for every query
    client: RefCell<Client>,
    pub shown: String,
    /// Kept to connect again when the server dropped the connection during a long test.
    url: String,
}

impl Pg {
    /// Connects and brings the layout up to date.
    pub fn open(url: &str) -> Result<Pg, StoreError> {
        let mut client = connect(url)?;
        let shown = redact(url);
        migrate(&mut client, &shown)?;
        Ok(Pg {
            client: RefCell::new(client),
            shown,
            url: url.to_string(),
        })
    }

    /// Connects for reading: no migration, and the session is read-only.
    pub fn open_existing(url: &str) -> Result<Pg, StoreError> {
        let mut client = connect(url)?;
        let shown = redact(url);
        check_readable(&mut client, &shown)?;
        client
            .batch_execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            .map_err(|e| err(&shown, &e))?;
        Ok(Pg {
            client: RefCell::new(client),
            shown,
            url: url.to_string(),
        })
    }

    fn err(&self, e: &postgres::Error) -> StoreError {
        err(&self.shown, e)
    }

    /// Stores a run. A connection the server closed while the test ran (an idle timeout, a
    /// restart) is opened again and the store tried once more: safe, since the run key makes
    /// a second store of a run that did commit return that run.
    pub(crate) fn store_run(&mut self, run: &NewRun<'_>) -> Result<Stored, StoreError> {
        if self.client.get_mut().is_closed() {
            self.reconnect()?;
        }
        let first = try_store(self.client.get_mut(), run);
        let result = match first {
            Err(e) if connection_lost(&e) => {
                self.reconnect()?;
                try_store(self.client.get_mut(), run)
            }
            other => other,
        };
        result.map_err(|e| self.err(&e))
    }

    fn reconnect(&mut self) -> Result<(), StoreError> {
        *self.client.get_mut() = connect(&self.url)?;
        Ok(())
    }

    pub fn set_label(
        &mut self,
        id: i64,
        label: Option<&str>,
        group: Option<&str>,
    ) -> Result<bool, StoreError> {
        let n = self
            .client
            .get_mut()
            .execute(
                "UPDATE runs SET label = $2, repeat_group = $3 WHERE id = $1",
                &[&id, &label, &group],
            )
            .map_err(|e| err(&self.shown, &e))?;
        Ok(n == 1)
    }

    fn query(
        &self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        self.client
            .borrow_mut()
            .query(sql, params)
            .map_err(|e| self.err(&e))
    }

    fn list_sql(with_json: bool) -> String {
        let json = if with_json { ", result_json" } else { "" };
        format!(
            "SELECT * FROM (SELECT {COLUMNS}{json} FROM runs \
             WHERE ($1::text IS NULL OR label = $1) AND ($2::text IS NULL OR repeat_group = $2) \
             ORDER BY id DESC LIMIT $3) AS newest ORDER BY id"
        )
    }

    pub fn list(&self, f: &RunFilter) -> Result<Vec<StoredRun>, StoreError> {
        let limit = f.limit.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
        self.query(&Self::list_sql(true), &[&f.label, &f.group, &limit])?
            .iter()
            .map(|r| self.stored_from(r))
            .collect()
    }

    pub fn list_rows(&self, f: &RunFilter) -> Result<Vec<RunRow>, StoreError> {
        let limit = f.limit.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
        self.query(&Self::list_sql(false), &[&f.label, &f.group, &limit])?
            .iter()
            .map(|r| self.row_from(r))
            .collect()
    }

    pub fn get(&self, id: i64) -> Result<Option<StoredRun>, StoreError> {
        let sql = format!("SELECT {COLUMNS}, result_json FROM runs WHERE id = $1");
        self.query(&sql, &[&id])?
            .first()
            .map(|r| self.stored_from(r))
            .transpose()
    }

    pub fn labels(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.query(
            "SELECT label, COUNT(*) FROM runs WHERE label IS NOT NULL GROUP BY label \
             ORDER BY label",
            &[],
        )?
        .iter()
        .map(|r| {
            let n: i64 = r.try_get(1).map_err(|e| self.err(&e))?;
            Ok((
                r.try_get(0).map_err(|e| self.err(&e))?,
                u64::try_from(n).unwrap_or(0),
            ))
        })
        .collect()
    }

    /// "ok" when every stored document is the JSON its indexed copy was made from.
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        let rows = self.query(
            "SELECT count(*) FROM runs WHERE result IS NULL OR run_key !~ '^[0-9a-f]{32}$'",
            &[],
        )?;
        let bad: i64 = rows.first().map_or(0, |r| r.get(0));
        Ok(if bad == 0 {
            "ok".into()
        } else {
            format!("{bad} rows without a document or with a malformed run key")
        })
    }

    /// The server's commit durability, in the place of SQLite's journal mode.
    pub fn journal_mode(&self) -> Result<String, StoreError> {
        let rows = self.query("SHOW synchronous_commit", &[])?;
        let v: String = rows.first().map_or_else(String::new, |r| r.get(0));
        Ok(format!("postgresql synchronous_commit={v}"))
    }

    fn stored_from(&self, r: &Row) -> Result<StoredRun, StoreError> {
        Ok(StoredRun {
            row: self.row_from(r)?,
            result_json: r.try_get(JSON_INDEX).map_err(|e| self.err(&e))?,
        })
    }

    fn row_from(&self, r: &Row) -> Result<RunRow, StoreError> {
        row_from(r).map_err(|e| self.err(&e))
    }
}

/// Stores a run through `client` (a connection, or a transaction when runs are stored
/// together: then the run's own transaction is a savepoint).
fn try_store(client: &mut impl GenericClient, run: &NewRun<'_>) -> Result<Stored, postgres::Error> {
    // the common retry finds its run without taking an id from the sequence
    if let Some(row) = client.query_opt("SELECT id FROM runs WHERE run_key = $1", &[&run.key])? {
        return Ok(Stored {
            id: row.get(0),
            new: false,
        });
    }
    let c = Columns::of(run.result);
    let mut tx = client.transaction()?;
    let sql = format!(
        "{} ON CONFLICT (run_key) DO NOTHING RETURNING id",
        rows::insert_sql('$')
    );
    let inserted = tx.query_opt(
        &sql,
        &[
            &run.key,
            &run.label,
            &run.group,
            &run.stored_unix_s,
            &c.started_unix_s,
            &i64::from(c.result_schema),
            &c.tool_version,
            &c.protocol,
            &c.direction,
            &i64::from(c.parallel),
            &c.goodput_bps,
            &c.sender_bps,
            &c.cpu_local_percent,
            &c.cpu_remote_percent,
            &c.pi,
            &c.retransmits,
            &c.client_host,
            &c.server_host,
            &c.client_kernel,
            &c.server_kernel,
            &c.client_cpu_model,
            &c.server_cpu_model,
            &c.interfaces,
            &c.mtu_bytes.map(i64::from),
            &c.link_bps,
            &run.json,
        ],
    )?;
    let stored = match inserted {
        Some(row) => Stored {
            id: row.get(0),
            new: true,
        },
        // another writer stored the same run between the look-up and the insert; its
        // commit is visible to this next statement
        None => Stored {
            id: tx
                .query_one("SELECT id FROM runs WHERE run_key = $1", &[&run.key])?
                .get(0),
            new: false,
        },
    };
    tx.commit()?;
    Ok(stored)
}

/// Whether an error means the session is gone (closed socket, the server ending it, a
/// connection exception, a reset or broken connection), so a new connection may succeed
/// where this one failed. A server that ends a session may reset the socket before its
/// last message is read: the client then sees an I/O error, not the server's FATAL.
fn connection_lost(e: &postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    let io = std::error::Error::source(e).and_then(|s| s.downcast_ref::<std::io::Error>());
    if io.is_some_and(|io| {
        matches!(
            io.kind(),
            std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::ConnectionAborted
                | std::io::ErrorKind::BrokenPipe
                | std::io::ErrorKind::UnexpectedEof
        )
    }) {
        return true;
    }
    e.as_db_error().is_some_and(|d| {
        let code = d.code().code();
        d.severity() == "FATAL" || code.starts_with("08") || code.starts_with("57P")
    })
}

fn err(shown: &str, e: &postgres::Error) -> StoreError {
    StoreError::Postgres {
        url: shown.to_string(),
        cause: cause(e),
    }
}

/// The summary columns in [`RunRow`]'s order, as SQLite's backend reads them: kind and the
/// rr figures come from the document.
const COLUMNS: &str = "id, run_key, label, repeat_group, stored_unix_s, started_unix_s, \
    tool_version, protocol, direction, parallel, goodput_bps, sender_bps, cpu_local_percent, \
    cpu_remote_percent, pi, retransmits, client_host, server_host, client_kernel, \
    server_kernel, client_cpu_model, server_cpu_model, interfaces, mtu_bytes, link_bps, \
    coalesce(result #>> '{spec,test,kind}', 'stream'), \
    (result #>> '{summary,rr,tps}')::float8, \
    (result #>> '{summary,rr,rtt_p99_us}')::float8, \
    result #>> '{summary,rr,mode}', \
    (result #>> '{summary,cpu,local,process_percent}')::float8, \
    (result #>> '{summary,cpu,remote,process_percent}')::float8, \
    (result #>> '{summary,seconds}')::float8, \
    (result #>> '{spec,end,seconds}')::float8, \
    (result #>> '{summary,udp,loss_percent}')::float8, \
    (result #>> '{summary,udp,jitter_ms}')::float8, \
    coalesce((result #>> '{interrupted}')::boolean, false), \
    (result #>> '{rpm,rpm}')::float8";
const JSON_INDEX: usize = 37;

fn row_from(r: &Row) -> Result<RunRow, postgres::Error> {
    let small = |i: usize| -> Result<Option<u32>, postgres::Error> {
        Ok(r.try_get::<_, Option<i64>>(i)?
            .and_then(|n| u32::try_from(n).ok()))
    };
    Ok(RunRow {
        id: r.try_get(0)?,
        run_key: r.try_get(1)?,
        label: r.try_get(2)?,
        group: r.try_get(3)?,
        stored_unix_s: r.try_get(4)?,
        started_unix_s: r.try_get(5)?,
        tool_version: r.try_get(6)?,
        protocol: r.try_get(7)?,
        direction: r.try_get(8)?,
        parallel: small(9)?.unwrap_or(0),
        goodput_bps: r.try_get(10)?,
        sender_bps: r.try_get(11)?,
        cpu_local_percent: r.try_get(12)?,
        cpu_remote_percent: r.try_get(13)?,
        pi: r.try_get(14)?,
        retransmits: r.try_get(15)?,
        client_host: r.try_get(16)?,
        server_host: r.try_get(17)?,
        client_kernel: r.try_get(18)?,
        server_kernel: r.try_get(19)?,
        client_cpu_model: r.try_get(20)?,
        server_cpu_model: r.try_get(21)?,
        interfaces: r.try_get(22)?,
        mtu_bytes: small(23)?,
        link_bps: r.try_get(24)?,
        kind: r.try_get(25)?,
        tps: r.try_get(26)?,
        rtt_p99_us: r.try_get(27)?,
        rr_mode: r.try_get(28)?,
        process_local_percent: r.try_get(29)?,
        process_remote_percent: r.try_get(30)?,
        seconds: r.try_get(31)?,
        asked_seconds: r.try_get(32)?,
        udp_loss_percent: r.try_get(33)?,
        udp_jitter_ms: r.try_get(34)?,
        interrupted: r.try_get(35)?,
        rpm: r.try_get(36)?,
    })
}

/// Version 1 of the PostgreSQL layout: SQLite's `runs` table with the same columns, text in
/// byte order (`COLLATE "C"`, as SQLite compares) so lists sort alike on both, and the document
/// twice: `result_json`, the text as stored (the record of truth, read back bit for bit), and
/// `result`, its `jsonb` form for queries.
const V1: &str = r#"
CREATE TABLE runs (
    id                 bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    run_key            text COLLATE "C" NOT NULL UNIQUE,
    label              text COLLATE "C",
    repeat_group       text COLLATE "C",
    stored_unix_s      double precision NOT NULL,
    started_unix_s     double precision NOT NULL,
    result_schema      bigint NOT NULL,
    tool_version       text COLLATE "C" NOT NULL,
    protocol           text COLLATE "C" NOT NULL,
    direction          text COLLATE "C" NOT NULL,
    parallel           bigint NOT NULL,
    goodput_bps        double precision,
    sender_bps         double precision,
    cpu_local_percent  double precision,
    cpu_remote_percent double precision,
    pi                 double precision,
    retransmits        bigint,
    client_host        text COLLATE "C",
    server_host        text COLLATE "C",
    client_kernel      text COLLATE "C",
    server_kernel      text COLLATE "C",
    client_cpu_model   text COLLATE "C",
    server_cpu_model   text COLLATE "C",
    interfaces         text COLLATE "C",
    mtu_bytes          bigint,
    link_bps           double precision,
    result_json        text NOT NULL,
    result             jsonb GENERATED ALWAYS AS (result_json::jsonb) STORED
);
CREATE INDEX runs_by_label ON runs (label, id);
CREATE INDEX runs_by_group ON runs (repeat_group, id);
CREATE INDEX runs_by_pair ON runs (client_host, server_host, started_unix_s);
"#;

/// The version table: one row per layout version applied.
const VERSION_TABLE: &str = "CREATE TABLE IF NOT EXISTS wirerate_schema (
    version        integer PRIMARY KEY,
    applied_unix_s double precision NOT NULL,
    tool_version   text NOT NULL
)";

/// The layout version found: 0 when there is no version table yet.
fn found_version(
    client: &mut impl postgres::GenericClient,
    shown: &str,
) -> Result<i64, StoreError> {
    let e = |e: postgres::Error| err(shown, &e);
    let exists: bool = client
        .query_one("SELECT to_regclass('wirerate_schema') IS NOT NULL", &[])
        .map_err(e)?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let v: Option<i32> = client
        .query_one("SELECT max(version) FROM wirerate_schema", &[])
        .map_err(e)?
        .get(0);
    Ok(v.map_or(0, i64::from))
}

/// Brings the layout to [`SCHEMA_VERSION`] in one transaction under an advisory lock, so two
/// hosts starting at once apply it once; a layout newer than this build's is refused.
pub(crate) fn migrate(client: &mut Client, shown: &str) -> Result<(), StoreError> {
    let e = |e: postgres::Error| err(shown, &e);
    // the usual case reads the version and takes no lock
    if found_version(client, shown)? == SCHEMA_VERSION {
        return Ok(());
    }
    let mut tx = client.transaction().map_err(e)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(e)?;
    tx.batch_execute(VERSION_TABLE).map_err(e)?;
    let found = found_version(&mut tx, shown)?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: shown.to_string(),
            found,
            known: SCHEMA_VERSION,
        });
    }
    let applied = |tx: &mut postgres::Transaction<'_>, v: i32| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        tx.execute(
            "INSERT INTO wirerate_schema (version, applied_unix_s, tool_version) \
             VALUES ($1, $2, $3)",
            &[&v, &now, &env!("CARGO_PKG_VERSION")],
        )
    };
    if found < 1 {
        tx.batch_execute(V1).map_err(e)?;
        applied(&mut tx, 1).map_err(e)?;
    }
    // later versions: `if found < 2 { tx.batch_execute(V2)?; applied(&mut tx, 2)?; }`
    tx.commit().map_err(e)?;
    Ok(())
}

/// A reader's check: the layout is this build's, and nothing is changed.
fn check_readable(client: &mut Client, shown: &str) -> Result<(), StoreError> {
    let found = found_version(client, shown)?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: shown.to_string(),
            found,
            known: SCHEMA_VERSION,
        });
    }
    if found < 1 {
        return Err(StoreError::Empty(shown.to_string()));
    }
    if found < SCHEMA_VERSION {
        return Err(StoreError::TooOld {
            path: shown.to_string(),
            found,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_file_gives_the_first_matching_line() {
        let text = "# comment\n\
                    db.lab:5432:results:wr:first\n\
                    *:*:*:wr:any\\:thing\n\
                    db.lab:5432:*:other:no\n";
        let w = |h, p, d, u| pgpass_match(text, [h, p, d, u]);
        assert_eq!(
            w("db.lab", "5432", "results", "wr").as_deref(),
            Some("first")
        );
        assert_eq!(
            w("db.lab", "6000", "results", "wr").as_deref(),
            Some("any:thing")
        );
        assert_eq!(w("db.lab", "5432", "x", "other").as_deref(), Some("no"));
        assert_eq!(w("db.lab", "5432", "x", "nobody"), None);
        // a line of too few fields matches nothing
        assert_eq!(pgpass_match("h:5432:d:u\n", ["h", "5432", "d", "u"]), None);
    }

    #[test]
    fn the_ca_file_is_taken_out_of_the_url() {
        assert_eq!(
            take_param(
                "postgres://h/r?sslmode=require&sslrootcert=%2Fetc%2Fca%20x.pem",
                "sslrootcert"
            ),
            (
                "postgres://h/r?sslmode=require".to_string(),
                Some("/etc/ca x.pem".to_string())
            )
        );
        assert_eq!(
            take_param("postgres://h/r?sslrootcert=a.pem", "sslrootcert"),
            ("postgres://h/r".to_string(), Some("a.pem".to_string()))
        );
        assert_eq!(
            take_param("postgres://h/r?x=1", "sslrootcert"),
            ("postgres://h/r?x=1".to_string(), None)
        );
        assert_eq!(take_param("postgres://h/r", "sslrootcert").1, None);
    }

    #[test]
    fn urls_are_told_from_paths() {
        assert!(is_url("postgres://h/db"));
        assert!(is_url("PostgreSQL://h/db"));
        assert!(is_url("postgresql:///db?host=/run/pg"));
        assert!(!is_url("results.db"));
        assert!(!is_url("/var/postgres://x"));
        assert!(!is_url("pg"));
    }

    #[test]
    fn passwords_are_never_shown() {
        assert_eq!(
            redact("postgres://u:s3cret@db.example:5432/r"),
            "postgres://u:***@db.example:5432/r"
        );
        assert_eq!(
            redact("postgresql://u:p@ss@h/r?sslmode=disable"),
            "postgresql://u:***@h/r?sslmode=disable"
        );
        assert_eq!(
            redact("postgres:///r?host=/run&password=xyz&user=u"),
            "postgres:///r?host=/run&password=***&user=u"
        );
        assert_eq!(redact("postgres://u@h/r"), "postgres://u@h/r");
        assert_eq!(redact("postgres://u:a/b@h/r"), "postgres://u:***@h/r");
        assert_eq!(redact("postgres://h/r?x=a@b"), "postgres://h/r?x=a@b");
        assert_eq!(redact("postgres://h"), "postgres://h");
    }

    #[test]
    fn a_bad_url_is_one_line_without_its_password() {
        let e = connect("postgres://u:hunter2@h:notaport/db").err().unwrap();
        let msg = e.to_string();
        assert!(matches!(e, StoreError::BadUrl { .. }), "{msg}");
        assert!(!msg.contains("hunter2") && !msg.contains('\n'), "{msg}");
    }
}
