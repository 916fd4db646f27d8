//! The change points of the stored history on the exporter's `/metrics` (with `--db`): per
//! series (a label and a host pair, for each figure followed) the level it is at now and
//! its last change, as `wirerate changes` finds them ([`super::changes::scan`]).
//!
//! A scan reads every run, so its answer is kept: a scrape searches again only when the
//! history changed (its newest run, or its labels' run counts) and the last scan is at least
//! `--changes-every` seconds old. Figures go out in base units: the change in percent as a
//! ratio, goodput in bytes per second, times in seconds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wirerate_prom::{Exposition, Kind, MetricSource};
use wirerate_store::{RunFilter, Store, StoreError};

use super::changes::{scan, ChangesReport, Figure, Selection};
use super::exporter::{lock, now_unix_s};

/// The exporter's figures for a followed figure: its name as the `metric` label (the probe
/// family it follows, less `wirerate_`) and the factor from its stored unit to base units.
pub fn base_unit(f: Figure) -> (&'static str, f64) {
    match f {
        Figure::Goodput => ("goodput_bytes_per_second", 1.0 / 8.0),
        Figure::Rtt => ("tcp_rtt_seconds", 1e-6),
        Figure::RttP99 => ("rr_rtt_p99_seconds", 1e-6),
        Figure::Tps => ("rr_transactions_per_second", 1.0),
        Figure::Retransmits => ("tcp_retransmitted_segments", 1.0),
        Figure::Cpu => ("cpu_busy_ratio", 0.01),
        Figure::Pi => ("pi", 1.0),
        Figure::Loss => ("udp_loss_ratio", 0.01),
        Figure::Jitter => ("udp_jitter_seconds", 1e-3),
    }
}

/// What the history looked like at a scan: its newest run and its labels' run counts.
type Fingerprint = (Option<(i64, f64)>, Vec<(String, u64)>);

struct Scanned {
    at: Instant,
    at_unix_s: f64,
    seconds: f64,
    fingerprint: Option<Fingerprint>,
    reports: Vec<(Figure, ChangesReport)>,
}

/// The [`MetricSource`] of the history's change points.
pub struct ChangesSource {
    store: Arc<Mutex<Store>>,
    figures: Vec<Figure>,
    every: Duration,
    last: Mutex<Option<Scanned>>,
    /// Whether the last attempt read the history.
    ok: Mutex<bool>,
    scans: AtomicU64,
}

impl ChangesSource {
    pub fn new(store: Arc<Mutex<Store>>, figures: Vec<Figure>, every: Duration) -> ChangesSource {
        ChangesSource {
            store,
            figures,
            every,
            last: Mutex::new(None),
            ok: Mutex::new(true),
            scans: AtomicU64::new(0),
        }
    }

    fn fingerprint(store: &Store) -> Result<Fingerprint, StoreError> {
        let newest = store.list_rows(&RunFilter {
            limit: Some(1),
            ..RunFilter::default()
        })?;
        let newest = newest.first().map(|r| (r.id, r.stored_unix_s));
        Ok((newest, store.labels()?))
    }

    /// Scans again when the history changed and the last scan is old enough.
    fn refresh(&self, last: &mut Option<Scanned>) {
        if last.as_ref().is_some_and(|s| s.at.elapsed() < self.every) {
            return;
        }
        let store = lock(&self.store);
        let fingerprint = Self::fingerprint(&store);
        let same =
            |s: &Scanned| matches!((&fingerprint, &s.fingerprint), (Ok(f), Some(g)) if f == g);
        if last.as_ref().is_some_and(same) {
            return;
        }
        let started = Instant::now();
        let reports: Result<Vec<_>, StoreError> = self
            .figures
            .iter()
            .map(|&figure| {
                let sel = Selection {
                    figure,
                    ..Selection::default()
                };
                scan(&store, &sel).map(|r| (figure, r))
            })
            .collect();
        let mut ok = lock(&self.ok);
        match (fingerprint, reports) {
            (Ok(f), Ok(reports)) => {
                self.scans.fetch_add(1, Ordering::Relaxed);
                *ok = true;
                *last = Some(Scanned {
                    at: started,
                    at_unix_s: now_unix_s(),
                    seconds: started.elapsed().as_secs_f64(),
                    fingerprint: Some(f),
                    reports,
                });
            }
            (Err(e), _) | (_, Err(e)) => {
                if *ok {
                    eprintln!(
                        "wirerate exporter: cannot search the history for changes: {}",
                        wirerate_core::text::safe(&e.to_string())
                    );
                }
                *ok = false;
            }
        }
    }
}

impl MetricSource for ChangesSource {
    fn write(&self, out: &mut Exposition) {
        let mut last = lock(&self.last);
        self.refresh(&mut last);
        let ok = *lock(&self.ok);
        out.single(
            "wirerate_history_scan_success",
            Kind::Gauge,
            "Whether the last search of the results database for changes read it (1) or failed (0; the figures are those of the last search that read it).",
            Some(if ok { 1.0 } else { 0.0 }),
        );
        out.single(
            "wirerate_history_scans_total",
            Kind::Counter,
            "Searches of the results database for changes; a scrape searches again only when the history changed and the last search is older than --changes-every.",
            Some(self.scans.load(Ordering::Relaxed) as f64),
        );
        let Some(s) = last.as_ref() else {
            return;
        };
        out.single(
            "wirerate_history_scan_timestamp_seconds",
            Kind::Gauge,
            "When the figures' search of the results database was made, seconds since the Unix epoch.",
            Some(s.at_unix_s),
        );
        out.single(
            "wirerate_history_scan_duration_seconds",
            Kind::Gauge,
            "How long that search took.",
            Some(s.seconds),
        );
        write_series(out, &s.reports);
    }
}

/// One series' figures, in base units.
struct Row<'a> {
    labels: [(&'static str, &'a str); 4],
    runs: f64,
    level: f64,
    changes: f64,
    last: Option<Last>,
}

struct Last {
    ratio: Option<f64>,
    low: Option<f64>,
    high: Option<f64>,
    p_value: f64,
    started_unix_s: f64,
    run_id: String,
}

fn rows(reports: &[(Figure, ChangesReport)]) -> Vec<Row<'_>> {
    let mut out = Vec::new();
    for (figure, report) in reports {
        let (metric, scale) = base_unit(*figure);
        for s in &report.series {
            let ratio = |p: Option<f64>| p.map(|p| p / 100.0);
            out.push(Row {
                labels: [
                    ("label", s.label.as_deref().unwrap_or("")),
                    ("client_host", &s.client_host),
                    ("server_host", &s.server_host),
                    ("metric", metric),
                ],
                runs: s.runs as f64,
                level: s.level * scale,
                changes: s.changes.len() as f64,
                last: s.changes.last().map(|c| Last {
                    ratio: ratio(c.point.change_percent),
                    low: ratio(c.point.change_ci95_low_percent),
                    high: ratio(c.point.change_ci95_high_percent),
                    p_value: c.point.p_value,
                    started_unix_s: c.started_unix_s,
                    run_id: c.run_id.to_string(),
                }),
            });
        }
    }
    out
}

type Get = fn(&Row<'_>) -> Option<f64>;

/// The families of the series, each with its help; a series without the figure (no change
/// yet, an interval too small to compute) has no sample in that family.
const FAMILIES: [(&str, &str, Get); 8] = [
    (
        "wirerate_history_runs",
        "Stored runs of the series (label, client_host -> server_host) with the figure named by the metric label.",
        |r| Some(r.runs),
    ),
    (
        "wirerate_history_level",
        "The level the series is at now, in the base unit its metric label names: the median since the last change, else of every run.",
        |r| Some(r.level).filter(|v| v.is_finite()),
    ),
    (
        "wirerate_history_changes",
        "Changes of level found in the series (as `wirerate changes` finds them).",
        |r| Some(r.changes),
    ),
    (
        "wirerate_history_last_change_ratio",
        "The last change of level: (median after - median before) / |median before|; -0.26 is 26 % lower.",
        |r| r.last.as_ref()?.ratio,
    ),
    (
        "wirerate_history_last_change_ci95_low_ratio",
        "Low end of the last change's 95 % confidence interval (Hodges-Lehmann), as a ratio of the median before.",
        |r| r.last.as_ref()?.low,
    ),
    (
        "wirerate_history_last_change_ci95_high_ratio",
        "High end of the last change's 95 % confidence interval, as a ratio of the median before.",
        |r| r.last.as_ref()?.high,
    ),
    (
        "wirerate_history_last_change_p_value",
        "The last change's Mann-Whitney p-value, corrected for the places it could have been put.",
        |r| Some(r.last.as_ref()?.p_value),
    ),
    (
        "wirerate_history_last_change_timestamp_seconds",
        "When the first run of the new level started, seconds since the Unix epoch.",
        |r| Some(r.last.as_ref()?.started_unix_s),
    ),
];

fn write_series(out: &mut Exposition, reports: &[(Figure, ChangesReport)]) {
    let rows = rows(reports);
    for (name, help, get) in FAMILIES {
        let mut f = out.family(name, Kind::Gauge, help);
        for r in &rows {
            if let Some(v) = get(r) {
                f.sample(&r.labels, v);
            }
        }
    }
    let mut f = out.family(
        "wirerate_history_last_change_info",
        Kind::Gauge,
        "The stored run that began the series' last level (`wirerate show RUN_ID`).",
    );
    for r in &rows {
        if let Some(l) = &r.last {
            let mut labels = r.labels.to_vec();
            labels.push(("run_id", &l.run_id));
            f.sample(&labels, 1.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_figure_has_a_base_unit_name() {
        for f in [
            Figure::Goodput,
            Figure::Rtt,
            Figure::RttP99,
            Figure::Tps,
            Figure::Retransmits,
            Figure::Cpu,
            Figure::Pi,
            Figure::Loss,
            Figure::Jitter,
        ] {
            let (name, scale) = base_unit(f);
            assert!(!name.contains("percent") && !name.ends_with("_us") && scale > 0.0);
        }
        assert_eq!(base_unit(Figure::Goodput).1 * 8e6, 1e6);
    }
}
