//! The host-pair matrix: goodput per (client host, server host), the latest value of each
//! pair, and the change of the latest period's mean against the period before (with the same
//! test `compare` uses). Periods end at a given instant (the caller passes the newest run's
//! start, so the answer does not depend on the clock).

use serde::{Deserialize, Serialize};

use super::{compare_metric, Change, Metric, Summary};

/// One run as the matrix sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct PairRun {
    pub client_host: Option<String>,
    pub server_host: Option<String>,
    pub started_unix_s: f64,
    pub goodput_bps: Option<f64>,
}

/// The name a matrix gives a host that did not say its name.
pub const UNKNOWN_HOST: &str = "?";

/// One (client, server) pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairCell {
    pub client_host: String,
    pub server_host: String,
    /// The pair's newest run with a goodput, at or before the end.
    pub latest_goodput_bps: f64,
    pub latest_unix_s: f64,
    /// Goodput over the latest period, (end − period, end].
    pub current: Option<Summary>,
    /// Goodput over the period before, (end − 2·period, end − period].
    pub previous: Option<Summary>,
    /// (mean current − mean previous) ÷ mean previous × 100.
    pub change_percent: Option<f64>,
    pub p_value: Option<f64>,
    pub change: Change,
}

/// The matrix: its hosts in byte order and one cell per pair that has runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairMatrix {
    pub period_s: f64,
    pub end_unix_s: f64,
    pub clients: Vec<String>,
    pub servers: Vec<String>,
    pub cells: Vec<PairCell>,
}

impl PairMatrix {
    pub fn cell(&self, client: &str, server: &str) -> Option<&PairCell> {
        self.cells
            .iter()
            .find(|c| c.client_host == client && c.server_host == server)
    }
}

/// Builds the matrix of the runs started at or before `end_unix_s` with a finite goodput.
/// A period that is not positive and finite gives no cells.
pub fn pair_matrix(runs: &[PairRun], period_s: f64, end_unix_s: f64) -> PairMatrix {
    use std::collections::BTreeMap;
    let mut by_pair: BTreeMap<(String, String), Vec<(f64, f64)>> = BTreeMap::new();
    let usable = period_s.is_finite() && period_s > 0.0 && end_unix_s.is_finite();
    for r in runs.iter().filter(|_| usable) {
        let Some(g) = r.goodput_bps.filter(|g| g.is_finite()) else {
            continue;
        };
        if !(r.started_unix_s.is_finite() && r.started_unix_s <= end_unix_s) {
            continue;
        }
        let name = |h: &Option<String>| h.clone().unwrap_or_else(|| UNKNOWN_HOST.to_string());
        by_pair
            .entry((name(&r.client_host), name(&r.server_host)))
            .or_default()
            .push((r.started_unix_s, g));
    }
    let mut cells = Vec::new();
    for ((client, server), mut points) in by_pair {
        // newest last; equal start times keep their input order
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let Some(&(latest_unix_s, latest_goodput_bps)) = points.last() else {
            continue;
        };
        let in_period = |lo: f64, hi: f64| -> Vec<f64> {
            points
                .iter()
                .filter(|(t, _)| *t > lo && *t <= hi)
                .map(|&(_, g)| g)
                .collect()
        };
        let cur = in_period(end_unix_s - period_s, end_unix_s);
        let prev = in_period(end_unix_s - 2.0 * period_s, end_unix_s - period_s);
        let c = compare_metric(Metric::Goodput, &prev, &cur);
        cells.push(PairCell {
            client_host: client,
            server_host: server,
            latest_goodput_bps,
            latest_unix_s,
            current: c.b,
            previous: c.a,
            change_percent: c.change_percent,
            p_value: c.test.map(|t| t.p_value),
            change: c.change,
        });
    }
    let mut clients: Vec<String> = cells.iter().map(|c| c.client_host.clone()).collect();
    let mut servers: Vec<String> = cells.iter().map(|c| c.server_host.clone()).collect();
    for v in [&mut clients, &mut servers] {
        v.sort();
        v.dedup();
    }
    PairMatrix {
        period_s,
        end_unix_s,
        clients,
        servers,
        cells,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(c: &str, s: &str, t: f64, g: f64) -> PairRun {
        PairRun {
            client_host: Some(c.into()),
            server_host: Some(s.into()),
            started_unix_s: t,
            goodput_bps: Some(g),
        }
    }

    #[test]
    fn latest_value_and_change_against_the_previous_period() {
        let mut runs = Vec::new();
        // a→b: 10 runs at ~100 in the previous period, 10 at ~80 in the latest
        for i in 0..10 {
            let wobble = f64::from(i % 3);
            runs.push(run("a", "b", 1000.0 + f64::from(i), 100.0 + wobble));
            runs.push(run("a", "b", 2000.0 + f64::from(i), 80.0 + wobble));
        }
        // c→b: one old run only, and one run after the end (ignored)
        runs.push(run("c", "b", 500.0, 7.0));
        runs.push(run("c", "b", 5000.0, 9.0));
        runs.push(PairRun {
            goodput_bps: None,
            ..run("c", "d", 2000.0, 0.0)
        });
        let m = pair_matrix(&runs, 1000.0, 2500.0);
        assert_eq!(m.clients, vec!["a", "c"]);
        assert_eq!(m.servers, vec!["b"]);
        let ab = m.cell("a", "b").unwrap();
        assert_eq!(ab.latest_unix_s, 2009.0);
        assert_eq!(ab.latest_goodput_bps, 80.0);
        assert_eq!(ab.current.unwrap().n, 10);
        assert_eq!(ab.previous.unwrap().n, 10);
        let pct = ab.change_percent.unwrap();
        assert!((pct + 20.0).abs() < 1.0, "{pct}");
        assert_eq!(ab.change, Change::Lower);
        assert!(ab.p_value.unwrap() < 0.001);
        let cb = m.cell("c", "b").unwrap();
        assert_eq!((cb.latest_goodput_bps, cb.latest_unix_s), (7.0, 500.0));
        assert!(cb.current.is_none() && cb.previous.is_none());
        assert_eq!(cb.change, Change::Untestable);
        assert!(m.cell("c", "d").is_none());
    }

    #[test]
    fn nameless_hosts_and_bad_periods() {
        let r = PairRun {
            client_host: None,
            ..run("x", "y", 10.0, 5.0)
        };
        let m = pair_matrix(std::slice::from_ref(&r), 60.0, 10.0);
        assert_eq!(m.clients, vec![UNKNOWN_HOST]);
        for p in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(pair_matrix(std::slice::from_ref(&r), p, 10.0)
                .cells
                .is_empty());
        }
        assert!(pair_matrix(&[r], 60.0, f64::NAN).cells.is_empty());
    }
}
