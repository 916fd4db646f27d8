//! Rows of the `runs` table: the summary columns taken from a result, and reading rows back.

use rusqlite::{params, Connection, OptionalExtension, Row, Transaction};
use serde::Serialize;
use wirerate_core::result::HostEnv;
use wirerate_core::RunResult;

use crate::StoreError;

/// Which runs to list.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    pub label: Option<String>,
    pub group: Option<String>,
    /// Only the newest this many.
    pub limit: Option<u64>,
}

/// The summary columns of one stored run: enough for lists, filters and CSV, without
/// reading its full document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRow {
    pub id: i64,
    pub run_key: String,
    pub label: Option<String>,
    pub group: Option<String>,
    pub stored_unix_s: f64,
    pub started_unix_s: f64,
    pub tool_version: String,
    pub protocol: String,
    pub direction: String,
    pub parallel: u32,
    pub goodput_bps: Option<f64>,
    pub sender_bps: Option<f64>,
    pub cpu_local_percent: Option<f64>,
    pub cpu_remote_percent: Option<f64>,
    pub pi: Option<f64>,
    pub retransmits: Option<i64>,
    pub client_host: Option<String>,
    pub server_host: Option<String>,
    pub client_kernel: Option<String>,
    pub server_kernel: Option<String>,
    pub client_cpu_model: Option<String>,
    pub server_cpu_model: Option<String>,
    /// Names of the client's interfaces that carried the test, comma-separated.
    pub interfaces: Option<String>,
    pub mtu_bytes: Option<u32>,
    pub link_bps: Option<f64>,
    /// "stream", "rr" or "sweep" (read from the document: older runs are streams).
    pub kind: String,
    /// rr runs: transactions per second and the 99th percentile round trip.
    pub tps: Option<f64>,
    pub rtt_p99_us: Option<f64>,
    /// rpm runs: responsiveness in round trips per minute (the document's `rpm.rpm`).
    pub rpm: Option<f64>,
    /// rr runs: "tcp", "crr" or "udp".
    pub rr_mode: Option<String>,
    /// Each side's own process CPU (user + system), % of one core.
    pub process_local_percent: Option<f64>,
    pub process_remote_percent: Option<f64>,
    /// The receivers' measuring window, seconds, and the time the test asked for (None
    /// for a test of bytes or blocks).
    pub seconds: Option<f64>,
    pub asked_seconds: Option<f64>,
    /// UDP runs: datagrams lost in %, and the receivers' interarrival jitter.
    pub udp_loss_percent: Option<f64>,
    pub udp_jitter_ms: Option<f64>,
    /// The run was stopped early (Ctrl-C); its figures cover what was measured until then.
    pub interrupted: bool,
}

/// One stored run: its columns, and the full result document as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRun {
    pub row: RunRow,
    pub result_json: String,
}

impl StoredRun {
    /// The full result, parsed.
    pub fn result(&self) -> Result<RunResult, StoreError> {
        serde_json::from_str(&self.result_json).map_err(|source| StoreError::Decode {
            id: self.row.id,
            source,
        })
    }
}

/// The summary columns, in [`RunRow`]'s order; `result_json` follows them when asked for.
const COLUMNS: &str = "id, run_key, label, repeat_group, stored_unix_s, started_unix_s, \
    tool_version, protocol, direction, parallel, goodput_bps, sender_bps, cpu_local_percent, \
    cpu_remote_percent, pi, retransmits, client_host, server_host, client_kernel, \
    server_kernel, client_cpu_model, server_cpu_model, interfaces, mtu_bytes, link_bps, \
    coalesce(json_extract(result_json, '$.spec.test.kind'), 'stream'), \
    json_extract(result_json, '$.summary.rr.tps'), \
    json_extract(result_json, '$.summary.rr.rtt_p99_us'), \
    json_extract(result_json, '$.summary.rr.mode'), \
    json_extract(result_json, '$.summary.cpu.local.process_percent'), \
    json_extract(result_json, '$.summary.cpu.remote.process_percent'), \
    json_extract(result_json, '$.summary.seconds'), \
    json_extract(result_json, '$.spec.end.seconds'), \
    json_extract(result_json, '$.summary.udp.loss_percent'), \
    json_extract(result_json, '$.summary.udp.jitter_ms'), \
    coalesce(json_extract(result_json, '$.interrupted'), 0), \
    json_extract(result_json, '$.rpm.rpm')";
const JSON_INDEX: usize = 37;

fn stored_from(r: &Row<'_>) -> rusqlite::Result<StoredRun> {
    Ok(StoredRun {
        row: row_from(r)?,
        result_json: r.get(JSON_INDEX)?,
    })
}

fn row_from(r: &Row<'_>) -> rusqlite::Result<RunRow> {
    Ok(RunRow {
        id: r.get(0)?,
        run_key: r.get(1)?,
        label: r.get(2)?,
        group: r.get(3)?,
        stored_unix_s: r.get(4)?,
        started_unix_s: r.get(5)?,
        tool_version: r.get(6)?,
        protocol: r.get(7)?,
        direction: r.get(8)?,
        parallel: r.get(9)?,
        goodput_bps: r.get(10)?,
        sender_bps: r.get(11)?,
        cpu_local_percent: r.get(12)?,
        cpu_remote_percent: r.get(13)?,
        pi: r.get(14)?,
        retransmits: r.get(15)?,
        client_host: r.get(16)?,
        server_host: r.get(17)?,
        client_kernel: r.get(18)?,
        server_kernel: r.get(19)?,
        client_cpu_model: r.get(20)?,
        server_cpu_model: r.get(21)?,
        interfaces: r.get(22)?,
        mtu_bytes: r.get(23)?,
        link_bps: r.get(24)?,
        kind: r.get(25)?,
        tps: r.get(26)?,
        rtt_p99_us: r.get(27)?,
        rr_mode: r.get(28)?,
        process_local_percent: r.get(29)?,
        process_remote_percent: r.get(30)?,
        seconds: r.get(31)?,
        asked_seconds: r.get(32)?,
        udp_loss_percent: r.get(33)?,
        udp_jitter_ms: r.get(34)?,
        interrupted: r.get(35)?,
        rpm: r.get(36)?,
    })
}

/// Runs matching the filter, oldest first, with or without their documents.
pub(crate) fn list<T>(
    conn: &Connection,
    f: &RunFilter,
    with_json: bool,
    map: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>, StoreError> {
    let limit = f.limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
    let json = if with_json { ", result_json" } else { "" };
    let sql = format!(
        "SELECT * FROM (SELECT {COLUMNS}{json} FROM runs \
         WHERE (?1 IS NULL OR label = ?1) AND (?2 IS NULL OR repeat_group = ?2) \
         ORDER BY id DESC LIMIT ?3) ORDER BY id"
    );
    let mut st = conn.prepare(&sql)?;
    let rows = st
        .query_map(params![f.label, f.group, limit], map)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub(crate) fn list_runs(conn: &Connection, f: &RunFilter) -> Result<Vec<StoredRun>, StoreError> {
    list(conn, f, true, stored_from)
}

pub(crate) fn list_rows(conn: &Connection, f: &RunFilter) -> Result<Vec<RunRow>, StoreError> {
    list(conn, f, false, row_from)
}

/// Where an export of the runs matching `f` starts and ends: the lowest and highest id, so
/// the pages after it hold the newest `limit` runs as they were when it began. None when no
/// run matches.
pub(crate) fn span(conn: &Connection, f: &RunFilter) -> Result<Option<(i64, i64)>, StoreError> {
    let limit = f.limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
    let sql = "SELECT min(id), max(id) FROM (SELECT id FROM runs \
         WHERE (?1 IS NULL OR label = ?1) AND (?2 IS NULL OR repeat_group = ?2) \
         ORDER BY id DESC LIMIT ?3)";
    let (lo, hi): (Option<i64>, Option<i64>) =
        conn.query_row(sql, params![f.label, f.group, limit], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
    Ok(lo.zip(hi))
}

/// One page of an export: up to `n` runs matching `f` with ids above `after`, up to `last`.
pub(crate) fn page(
    conn: &Connection,
    f: &RunFilter,
    after: i64,
    last: i64,
    n: u32,
) -> Result<Vec<StoredRun>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS}, result_json FROM runs \
         WHERE (?1 IS NULL OR label = ?1) AND (?2 IS NULL OR repeat_group = ?2) \
         AND id > ?3 AND id <= ?4 ORDER BY id LIMIT ?5"
    );
    let mut st = conn.prepare_cached(&sql)?;
    let rows = st
        .query_map(params![f.label, f.group, after, last, n], stored_from)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub(crate) fn get(conn: &Connection, id: i64) -> Result<Option<StoredRun>, StoreError> {
    let sql = format!("SELECT {COLUMNS}, result_json FROM runs WHERE id = ?1");
    Ok(conn.query_row(&sql, [id], stored_from).optional()?)
}

fn non_finite_to_none(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

fn host_name(h: &HostEnv) -> Option<&str> {
    h.hostname.as_deref()
}

/// The serde name of a unit enum (`"tcp"`, `"forward"`), for a text column.
fn enum_text<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// The summary columns of a result, as both backends write them.
pub(crate) struct Columns<'a> {
    pub started_unix_s: f64,
    pub result_schema: u32,
    pub tool_version: &'a str,
    pub protocol: String,
    pub direction: String,
    pub parallel: u32,
    pub goodput_bps: Option<f64>,
    pub sender_bps: Option<f64>,
    pub cpu_local_percent: Option<f64>,
    pub cpu_remote_percent: Option<f64>,
    pub pi: Option<f64>,
    pub retransmits: Option<i64>,
    pub client_host: Option<&'a str>,
    pub server_host: Option<&'a str>,
    pub client_kernel: Option<&'a str>,
    pub server_kernel: Option<&'a str>,
    pub client_cpu_model: Option<&'a str>,
    pub server_cpu_model: Option<&'a str>,
    pub interfaces: Option<String>,
    pub mtu_bytes: Option<u32>,
    pub link_bps: Option<f64>,
}

impl<'a> Columns<'a> {
    pub fn of(r: &'a RunResult) -> Columns<'a> {
        let s = &r.summary;
        let client = &r.env.client;
        let server = &r.env.server;
        let cpu = |side: &Option<wirerate_core::result::CpuSide>| {
            side.as_ref().and_then(|c| c.system_percent)
        };
        let names: Vec<&str> = client.interfaces.iter().map(|i| i.name.as_str()).collect();
        Columns {
            started_unix_s: r.started_unix_s,
            result_schema: r.schema_version,
            tool_version: &r.tool.version,
            protocol: enum_text(&r.spec.protocol),
            direction: enum_text(&r.spec.direction),
            parallel: r.spec.parallel,
            goodput_bps: non_finite_to_none(s.goodput_bps),
            sender_bps: non_finite_to_none(s.sender_bps),
            cpu_local_percent: cpu(&s.cpu.local),
            cpu_remote_percent: cpu(&s.cpu.remote),
            pi: s.pi.and_then(non_finite_to_none),
            retransmits: s
                .tcp
                .as_ref()
                .and_then(|t| t.retransmits)
                .map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
            client_host: host_name(client),
            server_host: host_name(server),
            client_kernel: client.kernel.as_deref(),
            server_kernel: server.kernel.as_deref(),
            client_cpu_model: client.cpu_model.as_deref(),
            server_cpu_model: server.cpu_model.as_deref(),
            interfaces: (!names.is_empty()).then(|| names.join(",")),
            mtu_bytes: client
                .interfaces
                .iter()
                .find_map(|i| i.mtu_bytes)
                .or(s.wire.mtu_bytes),
            link_bps: s
                .wire
                .link_bps
                .or(r.spec.link_bps)
                .or_else(|| client.interfaces.iter().find_map(|i| i.speed_bps)),
        }
    }
}

/// The columns of a run's row, in the order both backends bind their values.
const INSERT_COLUMNS: &str = "run_key, label, repeat_group, stored_unix_s, started_unix_s, \
     result_schema, tool_version, protocol, direction, parallel, goodput_bps, sender_bps, \
     cpu_local_percent, cpu_remote_percent, pi, retransmits, client_host, server_host, \
     client_kernel, server_kernel, client_cpu_model, server_cpu_model, interfaces, mtu_bytes, \
     link_bps, result_json";

/// The INSERT of a run's row, with the backend's numbered placeholders: `?1` (SQLite) or
/// `$1` (PostgreSQL).
pub(crate) fn insert_sql(sign: char) -> String {
    let values: Vec<String> = (1..=INSERT_COLUMNS.split(',').count())
        .map(|i| format!("{sign}{i}"))
        .collect();
    format!(
        "INSERT INTO runs ({INSERT_COLUMNS}) VALUES ({})",
        values.join(", ")
    )
}

/// A run on its way into a store: the result, its key, label and group, when it is stored,
/// and its JSON.
#[derive(Clone, Copy)]
pub(crate) struct NewRun<'a> {
    pub result: &'a RunResult,
    pub key: &'a str,
    pub label: Option<&'a str>,
    pub group: Option<&'a str>,
    pub stored_unix_s: f64,
    pub json: &'a str,
}

/// Writes the run's row: its key, label, group, the summary columns and the JSON.
pub(crate) fn insert(tx: &Transaction<'_>, run: &NewRun<'_>) -> Result<i64, StoreError> {
    let c = Columns::of(run.result);
    tx.execute(
        &insert_sql('?'),
        params![
            run.key,
            run.label,
            run.group,
            run.stored_unix_s,
            c.started_unix_s,
            c.result_schema,
            c.tool_version,
            c.protocol,
            c.direction,
            c.parallel,
            c.goodput_bps,
            c.sender_bps,
            c.cpu_local_percent,
            c.cpu_remote_percent,
            c.pi,
            c.retransmits,
            c.client_host,
            c.server_host,
            c.client_kernel,
            c.server_kernel,
            c.client_cpu_model,
            c.server_cpu_model,
            c.interfaces,
            c.mtu_bytes,
            c.link_bps,
            run.json,
        ],
    )?;
    Ok(tx.last_insert_rowid())
}
