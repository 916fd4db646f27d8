//! The default summary: as short as iperf3's (what arrived, what was sent, retransmits or
//! loss), with the CPU it cost, the verdict of the Why and its first advice. `-V` prints
//! the full block ([`crate::text::summary`]); both say the same figures the same way.

use std::fmt::Write as _;

use wirerate_core::diagnosis::Diagnosis;
use wirerate_core::result::CpuSide;
use wirerate_core::spec::End;
use wirerate_core::text::count;
use wirerate_core::units::{format_bps, format_bytes};
use wirerate_core::RunResult;

/// The short summary printed at the end of a run.
pub fn summary(r: &RunResult) -> String {
    if r.summary.rr.is_some() || r.sweep.is_some() {
        return crate::text::summary(r);
    }
    let s = &r.summary;
    let mut o = String::new();
    o.push_str(&title(r));
    let retr = s
        .tcp
        .as_ref()
        .and_then(|t| t.retransmits)
        .map_or_else(String::new, |n| format!(", {}", count(n, "retransmit")));
    let _ = writeln!(
        o,
        "{}",
        rate_line("goodput (receiver)", s.goodput_bps, s.bytes, s.seconds, "")
    );
    let _ = writeln!(
        o,
        "{}",
        rate_line(
            "sent (sender)",
            s.sender_bps,
            s.sender_bytes,
            s.sender_seconds,
            &retr
        )
    );
    for f in &s.flows {
        let _ = writeln!(
            o,
            "{}",
            rate_line(f.flow.name(), f.goodput_bps, f.bytes, f.seconds, "")
        );
    }
    if let Some(u) = &s.udp {
        let _ = writeln!(o, "  {:<22} {}", "UDP", udp_words(u));
    }
    if let Some(f) = &s.fairness {
        let _ = writeln!(o, "{}", crate::text::fairness_line(f));
    }
    if let Some(cpu) = cpu_words(s.cpu.local.as_ref(), s.cpu.remote.as_ref()) {
        let _ = writeln!(o, "  {:<22} {cpu}", "CPU");
    }
    let w = &s.wire;
    if let (Some(l), Some(e)) = (w.link_bps, w.efficiency) {
        let _ = writeln!(
            o,
            "  {:<22} {:.1} % of what a {} link carries",
            "wire",
            e * 100.0,
            format_bps(l)
        );
    }
    // on an emulated path (a lab's delay line) the wire alone says little: what the path
    // allows, beside it
    if let Some(m) = &w.path_model {
        let _ = writeln!(o, "{}", crate::text::path_model_line(m));
    }
    if let Some(d) = &s.diagnosis {
        o.push_str(&why(d));
    }
    let _ = writeln!(
        o,
        "  (-V: the full report: I/O calls, cores, PI, TCP_INFO per stream, buffers, interfaces, all evidence)"
    );
    o
}

/// "Summary", and when the test was cut short, by how much.
pub fn title(r: &RunResult) -> String {
    match interrupted(r) {
        Some(w) => format!("\nSummary: {w}; the figures cover what was measured until then\n"),
        None => "\nSummary\n".to_string(),
    }
}

/// A rate line: the figure, the bytes and the window, and what follows them.
pub(crate) fn rate_line(name: &str, bps: f64, bytes: u64, seconds: f64, tail: &str) -> String {
    format!(
        "  {name:<22} {:>15}   {} in {seconds:.2} s{tail}",
        format_bps(bps),
        format_bytes(bytes)
    )
}

/// "interrupted after 1.97 of 10 s" for a run stopped early (Ctrl-C); None for a whole one.
pub fn interrupted(r: &RunResult) -> Option<String> {
    if !r.interrupted {
        return None;
    }
    let s = &r.summary;
    Some(match r.spec.end {
        End::Time { seconds } => {
            format!("interrupted after {:.2} of {} s", s.seconds, trim(seconds))
        }
        End::Bytes { bytes } => format!(
            "interrupted after {} of {} ({:.2} s)",
            format_bytes(s.sender_bytes),
            format_bytes(bytes),
            s.seconds
        ),
        End::Blocks { blocks } => format!(
            "interrupted after {:.2} s, before the {} were written",
            s.seconds,
            count(blocks, "block")
        ),
    })
}

/// A figure with the decimals it needs: "10", "2.5".
fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// UDP's line: datagrams, loss and jitter.
pub(crate) fn udp_words(u: &wirerate_core::result::UdpSummary) -> String {
    format!(
        "{} sent, {} received, {} lost ({:.3} %), jitter {}",
        count(u.packets, "datagram"),
        u.received,
        u.lost,
        u.loss_percent,
        u.jitter_ms
            .map_or_else(|| "n/a".into(), |j| format!("{j:.3} ms")),
    )
}

/// Each side's own CPU and its host's load, in one line; None when neither side's is known.
fn cpu_words(client: Option<&CpuSide>, server: Option<&CpuSide>) -> Option<String> {
    let side = |name: &str, c: &CpuSide| {
        let host = c
            .system_percent
            .map_or_else(String::new, |h| format!(" (host {h:.1} % busy)"));
        format!("{name} {:.0} % of a core{host}", c.process_percent)
    };
    let parts: Vec<String> = [("client", client), ("server", server)]
        .into_iter()
        .filter_map(|(n, c)| c.map(|c| side(n, c)))
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// The Why in brief: the verdict and its first advice.
fn why(d: &Diagnosis) -> String {
    let mut o = format!(
        "\nWhy\n  {} (confidence {})\n",
        d.verdict,
        crate::text::confidence(d)
    );
    if let Some(a) = d.advice.first() {
        let _ = writeln!(o, "  {:<9} {a}", "advice:");
    }
    o
}

/// Where the result went: the summary's last line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage<'a> {
    /// Stored as run `id` in the database at `location` (a file, or a PostgreSQL URL without
    /// its password).
    Stored { id: i64, location: &'a str },
    /// The database could not be reached; the run waits in the spool for the next store.
    Spooled { location: &'a str },
    /// Storing failed (the error is said on stderr).
    Failed { location: &'a str },
    /// `--no-store`.
    Off,
    /// No database could be opened (the warning is said on stderr).
    Unavailable,
}

/// The line that says where the result was stored.
pub fn storage(s: Storage<'_>) -> String {
    match s {
        Storage::Stored { id, location } => format!("stored as run {id} in {location}"),
        Storage::Spooled { location } => {
            format!("not stored yet: {location} could not be reached; the run waits in the spool")
        }
        Storage::Failed { location } => format!("not stored in {location} (the error is above)"),
        Storage::Off => "not stored (--no-store)".to_string(),
        Storage::Unavailable => "not stored: no results database could be opened".to_string(),
    }
}
