//! The host-pair section: goodput per (client host, server host) as a grid of the latest
//! values with the change against the previous period, and a table of each pair's figures.

use wirerate_core::stats::{Change, PairCell, PairMatrix};
use wirerate_core::units::{format_bps, utc};
use wirerate_render::stats::format_p;

use crate::html::{Block, Cell, Section, Table};

fn change(c: &PairCell) -> String {
    match (c.current, c.previous, c.change_percent) {
        (None, _, _) => "no run in the period".into(),
        (Some(_), None, _) => "new".into(),
        (_, _, Some(p)) => {
            let mark = if matches!(c.change, Change::Higher | Change::Lower) {
                "*"
            } else {
                ""
            };
            format!("{p:+.1} %{mark}")
        }
        _ => "-".into(),
    }
}

/// A span in its largest whole unit.
fn span(s: f64) -> String {
    for (unit, per) in [("w", 604800.0), ("d", 86400.0), ("h", 3600.0), ("m", 60.0)] {
        if s >= per && (s / per).fract() == 0.0 {
            return format!("{}{unit}", s / per);
        }
    }
    format!("{s}s")
}

pub fn section(m: &PairMatrix, what: &str) -> Section {
    let p = span(m.period_s);
    let mut blocks = vec![Block::Para(format!(
        "Goodput per (client host, server host) pair{what}: each pair's latest run, and the \
         change of the mean over the last {p} against the {p} before (* significant at \
         p < 0.05). Periods end {} UTC, at the newest run.",
        utc(m.end_unix_s)
    ))];
    let mut head = vec!["client \\ server".to_string()];
    head.extend(m.servers.iter().cloned());
    let grid = m
        .clients
        .iter()
        .map(|client| {
            let mut row = vec![Cell::text(client.clone())];
            for server in &m.servers {
                row.push(match m.cell(client, server) {
                    Some(c) => Cell {
                        text: format!("{} ({})", format_bps(c.latest_goodput_bps), change(c)),
                        value: Some(c.latest_goodput_bps),
                    },
                    None => Cell::text("-"),
                });
            }
            row
        })
        .collect();
    blocks.push(Block::Table(Table {
        caption: "Latest goodput by host pair (bit/s), with the change of the period's mean".into(),
        head,
        rows: grid,
    }));
    let mean = |s: Option<wirerate_core::stats::Summary>| Cell::num(s.map(|s| s.mean), format_bps);
    let n = |s: Option<wirerate_core::stats::Summary>| {
        Cell::num(Some(s.map_or(0.0, |s| s.n as f64)), |v| format!("{v}"))
    };
    let rows = m
        .cells
        .iter()
        .map(|c| {
            vec![
                Cell::text(format!("{} → {}", c.client_host, c.server_host)),
                Cell::num(Some(c.latest_goodput_bps), format_bps),
                Cell::text(format!("{} UTC", utc(c.latest_unix_s))),
                mean(c.current),
                n(c.current),
                mean(c.previous),
                n(c.previous),
                Cell::num(c.change_percent, |v| format!("{v:+.1} %")),
                Cell::num(c.p_value, format_p),
            ]
        })
        .collect();
    blocks.push(Block::Table(Table {
        caption: format!("Each pair: latest run, and the last {p} against the {p} before"),
        head: [
            "pair",
            "latest goodput",
            "latest run",
            "mean, last period",
            "runs",
            "mean, period before",
            "runs",
            "change",
            "p",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    }));
    Section {
        heading: "Host pairs".into(),
        blocks,
        figures: Vec::new(),
    }
}
