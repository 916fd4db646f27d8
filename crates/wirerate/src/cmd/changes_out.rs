//! How `wirerate changes` prints what it found: a short table per series that changed, one
//! line per series that did not. JSON is the report itself (schema/changes.schema.json).

use std::fmt::Write as _;

use wirerate_core::units::{format_bps, utc};

use super::changes::{ChangesReport, SeriesChanges};

/// What the runs were chosen by, for headings and errors: " labelled 'x' from h1 to h2".
pub fn described(r: &ChangesReport) -> String {
    let mut s = String::new();
    if let Some(l) = &r.label {
        let _ = write!(s, " labelled '{l}'");
    }
    if let Some(h) = &r.client_host {
        let _ = write!(s, " from {h}");
    }
    if let Some(h) = &r.server_host {
        let _ = write!(s, " to {h}");
    }
    s
}

/// A value of the report's figure with its unit.
fn value(metric: &str, v: f64) -> String {
    match metric {
        "goodput_bps" => format_bps(v),
        "rtt_us" | "rtt_p99_us" => format!("{v:.1} us"),
        "jitter_ms" => format!("{v:.3} ms"),
        "cpu_percent" | "loss_percent" => format!("{v:.2} %"),
        "tps" => format!("{v:.0}/s"),
        _ => format!("{v:.4}"),
    }
}

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |p| format!("{p:+.1} %"))
}

fn series_name(s: &SeriesChanges) -> String {
    let label = s
        .label
        .as_ref()
        .map_or("no label".to_string(), |l| format!("label '{l}'"));
    format!("{label}, {} -> {}", s.client_host, s.server_host)
}

/// The report as text.
pub fn text(r: &ChangesReport) -> String {
    let mut out = String::new();
    let runs: usize = r.series.iter().map(|s| s.runs).sum();
    let _ = writeln!(
        out,
        "level shifts in {} ({} is better){}: {} series, {runs} runs; a change stands at \
         p < {} (Mann-Whitney, times the places it could have been), {} runs a side at least",
        r.metric,
        if r.higher_is_better {
            "higher"
        } else {
            "lower"
        },
        described(r),
        r.series.len(),
        r.alpha,
        r.min_segment_runs
    );
    for s in &r.series {
        let span = format!("{} .. {} UTC", utc(s.first_unix_s), utc(s.last_unix_s));
        if s.changes.is_empty() {
            let _ = writeln!(
                out,
                "{}: no change in {} runs ({span})",
                series_name(s),
                s.runs
            );
            continue;
        }
        let _ = writeln!(out, "{}: {} runs ({span})", series_name(s), s.runs);
        let mut rows = vec![[
            "run".to_string(),
            "started (UTC)".into(),
            "before".into(),
            "after".into(),
            "change".into(),
            "95 % CI".into(),
            "p-value".into(),
        ]];
        for c in &s.changes {
            let p = &c.point;
            let ci = match (p.change_ci95_low_percent, p.change_ci95_high_percent) {
                (Some(lo), Some(hi)) => format!("{lo:+.1} .. {hi:+.1} %"),
                _ => "-".into(),
            };
            rows.push([
                c.run_id.to_string(),
                utc(c.started_unix_s),
                format!("{} ({})", value(r.metric, p.median_before), p.runs_before),
                format!("{} ({})", value(r.metric, p.median_after), p.runs_after),
                pct(p.change_percent),
                ci,
                wirerate_render::stats::format_p(p.p_value),
            ]);
        }
        table(&mut out, &rows);
    }
    let _ = writeln!(
        out,
        "(before, after: the median since the previous change and up to the next, with its \
         run count; p-value: corrected for the places a change could have been)"
    );
    out
}

/// Rows as columns, left-aligned, indented by two.
fn table(out: &mut String, rows: &[[String; 7]]) {
    let widths: Vec<usize> = (0..7)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(out, "  {}", line.join("  ").trim_end());
    }
}
