//! `wirerate compare --matrix`: goodput per (client host, server host) pair from the results
//! database, the latest value of each pair and the change of the latest period against the
//! one before. The host names are the ones each run recorded (`env.client.hostname`,
//! `env.server.hostname`), so runs from many hosts stored in one shared database line up.

use std::fmt::Write as _;

use wirerate_core::stats::{pair_matrix, Change, PairMatrix, PairRun};
use wirerate_core::units::format_bps;
use wirerate_store::{RunFilter, RunRow, Store};

use super::results::utc;
use crate::exit;

/// What `--matrix` is asked for.
#[derive(Debug, Clone)]
pub struct MatrixArgs {
    pub label: Option<String>,
    pub since_s: Option<f64>,
    pub period_s: f64,
}

/// A span of time: a number with s, m, h, d or w (`90s`, `12h`, `7d`); a bare number is
/// seconds.
pub fn parse_span(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, unit) = match t.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let per = match unit {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        "w" => 7.0 * 86400.0,
        _ => return Err(format!("'{s}': a span takes s, m, h, d or w (7d, 12h)")),
    };
    match num.trim().parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 && n * per < 1e11 => Ok(n * per),
        _ => Err(format!(
            "'{s}': a span is a positive number of s, m, h, d or w"
        )),
    }
}

/// The runs the matrix looks at, and the matrix: periods end at the newest run's start.
pub fn build(store: &Store, args: &MatrixArgs) -> anyhow::Result<(PairMatrix, usize)> {
    let rows = store.list_rows(&RunFilter {
        label: args.label.clone(),
        ..RunFilter::default()
    })?;
    let rows: Vec<&RunRow> = rows.iter().filter(|r| r.goodput_bps.is_some()).collect();
    let end = rows
        .iter()
        .map(|r| r.started_unix_s)
        .filter(|t| t.is_finite())
        .fold(f64::NEG_INFINITY, f64::max);
    let runs: Vec<PairRun> = rows
        .iter()
        .filter(|r| args.since_s.is_none_or(|s| r.started_unix_s >= end - s))
        .map(|r| PairRun {
            client_host: r.client_host.clone(),
            server_host: r.server_host.clone(),
            started_unix_s: r.started_unix_s,
            goodput_bps: r.goodput_bps,
        })
        .collect();
    let n = runs.len();
    Ok((pair_matrix(&runs, args.period_s, end), n))
}

/// What the matrix's runs are, for headings: " labelled 'NAME'" or nothing.
pub fn described(args: &MatrixArgs) -> String {
    args.label
        .as_ref()
        .map_or(String::new(), |l| format!(" labelled '{l}'"))
}

/// The matrix as a JSON document.
pub fn json(m: &PairMatrix, args: &MatrixArgs, runs: usize) -> serde_json::Value {
    serde_json::json!({
        "kind": "pair_matrix",
        "metric": "goodput_bps",
        "label": args.label,
        "since_s": args.since_s,
        "runs": runs,
        "matrix": m,
    })
}

/// A span in its shortest unit: `1d`, `12h`, `90s`.
fn span(s: f64) -> String {
    for (unit, per) in [("w", 604800.0), ("d", 86400.0), ("h", 3600.0), ("m", 60.0)] {
        if s >= per && (s / per).fract() == 0.0 {
            return format!("{}{unit}", s / per);
        }
    }
    format!("{s}s")
}

/// The change of a cell: `+2.1 %`, with `*` when significant, `new` without a previous
/// period, `-` without a latest one.
fn change_text(c: &wirerate_core::stats::PairCell) -> String {
    match (c.current, c.previous, c.change_percent) {
        (None, _, _) => "-".into(),
        (Some(_), None, _) => "new".into(),
        (_, _, Some(p)) => {
            let mark = match c.change {
                Change::Higher | Change::Lower => "*",
                _ => "",
            };
            format!("{p:+.1} %{mark}")
        }
        _ => "?".into(),
    }
}

/// The matrix as text: clients down, servers across; each cell the latest goodput and the
/// change of the period's mean.
pub fn text(m: &PairMatrix, args: &MatrixArgs, runs: usize) -> String {
    let mut out = String::new();
    let what = described(args);
    if m.cells.is_empty() {
        let _ = writeln!(
            out,
            "no runs{what} with a goodput and host names to put in a matrix"
        );
        return out;
    }
    let p = span(m.period_s);
    let _ = writeln!(
        out,
        "goodput by host pair, {runs} run{}{what}: latest run, and the change of the last \
         {p}'s mean against the {p} before (periods end {} UTC, the newest run)",
        if runs == 1 { "" } else { "s" },
        utc(m.end_unix_s)
    );
    // host names are the hosts' own words: escaped, so widths count what is shown
    let name = |h: &String| wirerate_core::text::safe(h).into_owned();
    let mut grid: Vec<Vec<String>> = vec![std::iter::once("client \\ server".to_string())
        .chain(m.servers.iter().map(name))
        .collect()];
    for client in &m.clients {
        let mut row = vec![name(client)];
        for server in &m.servers {
            row.push(m.cell(client, server).map_or("-".into(), |c| {
                format!("{} {}", format_bps(c.latest_goodput_bps), change_text(c))
            }));
        }
        grid.push(row);
    }
    let cols = grid[0].len();
    let widths: Vec<usize> = (0..cols)
        .map(|i| grid.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for row in &grid {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    let _ = writeln!(
        out,
        "(* significant at p < 0.05; new: no run in the {p} before; -: no run in the last {p})"
    );
    out
}

/// The options that choose and split the runs of a host-pair matrix, for `compare --matrix`
/// and `report --matrix`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct MatrixOpts {
    /// With --matrix: only runs stored with this label (a plan's runs: plan:NAME)
    #[arg(long, value_name = "NAME")]
    pub label: Option<String>,
    /// With --matrix: only runs started within this span before the newest (90s, 30m, 12h,
    /// 7d, 2w)
    #[arg(long, value_name = "SPAN")]
    pub since: Option<String>,
    /// With --matrix: the length of a period, the latest compared with the one before
    /// [default: 1d]
    #[arg(long, value_name = "SPAN")]
    pub period: Option<String>,
}

impl MatrixOpts {
    /// Refuses --label, --since and --period without --matrix (clap's `requires` cannot
    /// see a flag's absence).
    pub fn only_with_matrix(&self, matrix: bool) -> anyhow::Result<()> {
        let given = [
            ("--label", &self.label),
            ("--since", &self.since),
            ("--period", &self.period),
        ]
        .into_iter()
        .find(|(_, v)| v.is_some());
        match given {
            Some((flag, _)) if !matrix => exit::usage(format!("{flag} goes with --matrix")),
            _ => Ok(()),
        }
    }

    /// Checks the spans given on the command line.
    pub fn args(&self) -> anyhow::Result<MatrixArgs> {
        let since_s = match self.since.as_deref().map(parse_span).transpose() {
            Ok(s) => s,
            Err(e) => return exit::usage(format!("--since {e}")),
        };
        let period_s = match parse_span(self.period.as_deref().unwrap_or("1d")) {
            Ok(p) => p,
            Err(e) => return exit::usage(format!("--period {e}")),
        };
        Ok(MatrixArgs {
            label: self.label.clone(),
            since_s,
            period_s,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans() {
        assert_eq!(parse_span("90"), Ok(90.0));
        assert_eq!(parse_span("90s"), Ok(90.0));
        assert_eq!(parse_span("30m"), Ok(1800.0));
        assert_eq!(parse_span("1.5h"), Ok(5400.0));
        assert_eq!(parse_span("7d"), Ok(604800.0));
        assert_eq!(parse_span("2w"), Ok(1209600.0));
        for bad in ["", "0", "-1d", "1y", "d", "nan", "1e300d"] {
            assert!(parse_span(bad).is_err(), "{bad}");
        }
        assert_eq!(span(86400.0), "1d");
        assert_eq!(span(5400.0), "90m");
        assert_eq!(span(45.0), "45s");
    }
}
