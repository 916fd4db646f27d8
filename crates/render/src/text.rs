//! The human report: a header, interval lines while the test runs, and a summary table.

use std::fmt::Write;

use wirerate_core::diagnosis::{Confidence, Diagnosis};
use wirerate_core::evidence::HostEvidence;
use wirerate_core::result::{CpuSide, InterfaceDelta, Interval, IoStats, StreamResult, TcpInfo};
use wirerate_core::spec::{Direction, End, Protocol, RecvMode, SendMode};
use wirerate_core::text::count;
use wirerate_core::units::{format_bps, format_bytes};
use wirerate_core::{RunResult, TestSpec};

/// One line describing the test before it starts.
pub fn header(spec: &TestSpec, target: &str) -> String {
    if let Some(h) = crate::latency::header(spec, target) {
        return h;
    }
    let dir = spec.direction.describe();
    let end = match spec.end {
        End::Time { seconds } => format!("{seconds} s"),
        End::Bytes { bytes } => format_bytes(bytes),
        End::Blocks { blocks } => count(blocks, "block"),
    };
    let omit = if spec.omit_s > 0.0 {
        format!(" after {} s warm-up", spec.omit_s)
    } else {
        String::new()
    };
    let mut streams = count(u64::from(spec.parallel), "stream");
    if spec.direction == Direction::Bidir {
        streams.push_str(" each way");
    }
    let io = match (spec.protocol, spec.rate_bps) {
        (Protocol::Tcp, rate) => format!(
            "TCP to {target}, {dir}, {streams}, {end}{omit}, {}{} per write{}",
            if spec.fit_writes {
                "whole segments up to "
            } else {
                ""
            },
            format_bytes(spec.len_bytes),
            rate.map_or_else(String::new, |r| format!(
                ", paced by the kernel at {} per stream",
                format_bps(r)
            ))
        ),
        (Protocol::Udp, rate) => format!(
            "UDP to {target}, {dir}, {streams}, {end}{omit}, {} B datagrams{}, {}",
            spec.len_bytes,
            spec.datagram
                .map_or_else(String::new, |d| format!(" ({})", d.describe())),
            rate.map_or_else(
                || "unpaced".into(),
                |r| format!("paced at {} per stream", format_bps(r))
            )
        ),
    };
    let modes = match (spec.send_mode, spec.recv_mode) {
        (SendMode::Copy, RecvMode::Copy) => "",
        (SendMode::Splice, RecvMode::Copy) => " (zero-copy sender)",
        (SendMode::Copy, RecvMode::Discard) => " (receiver discards: a sink)",
        (SendMode::Splice, RecvMode::Discard) => " (zero-copy sender, receiver discards: a sink)",
    };
    format!("wirerate: {io}{modes}")
}

/// One interval line: an rr interval as `rr` prints it, else as [`crate::intervals::line`]
/// without stream or TCP columns.
pub fn interval(iv: &Interval) -> String {
    if let Some(rr) = &iv.rr {
        return crate::latency::rr_interval(iv, rr);
    }
    let c = crate::intervals::Columns {
        udp: iv.packets.is_some(),
        ..Default::default()
    };
    crate::intervals::line(iv, c)
}

fn io_line(name: &str, io: Option<&IoStats>, verb: &str) -> String {
    let Some(io) = io else {
        return format!("  {name:<22} n/a (the peer does not count its {verb})");
    };
    format!(
        "  {name:<22} {} {verb}, {:.1}/s, {} per call",
        io.calls,
        io.calls_per_s,
        format_bytes(io.bytes_per_call as u64)
    )
}

fn opt_pct(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), |x| format!("{x:.1} %"))
}

fn cpu_line(name: &str, c: Option<&CpuSide>) -> String {
    let Some(c) = c else {
        return format!("  {name:<22} n/a");
    };
    let busiest = match (c.busiest_core, c.busiest_core_percent) {
        (Some(n), Some(p)) => format!(", busiest core {n} at {p:.0} %"),
        _ => String::new(),
    };
    let cost = c.bps_per_busy_core.map_or_else(String::new, |b| {
        format!("; {} per busy core", format_bps(b))
    });
    format!(
        "  {name:<22} user {:.2} s, sys {:.2} s ({:.0} % of a core); host busy {} (softirq+irq {}{busiest}){cost}",
        c.user_s,
        c.sys_s,
        c.process_percent,
        opt_pct(c.system_percent),
        opt_pct(c.softirq_percent),
    )
}

fn us(v: Option<u64>) -> String {
    v.map_or_else(|| "n/a".into(), |x| format!("{:.3} s", x as f64 / 1e6))
}

fn n(v: Option<u64>) -> String {
    v.map_or_else(|| "n/a".into(), |x| x.to_string())
}

fn tcp_stream_line(label: &str, t: &TcpInfo) -> String {
    format!(
        "    {label:<8} retrans {}, segs out {} in {}, rtt {} µs, cwnd {}, mss {}, busy {}, rwnd-limited {}, sndbuf-limited {}",
        n(t.retransmits_total),
        n(t.segs_out),
        n(t.segs_in),
        n(t.rtt_us),
        t.cwnd_bytes().map_or_else(|| "n/a".into(), format_bytes),
        n(t.snd_mss),
        us(t.busy_time_us),
        us(t.rwnd_limited_us),
        us(t.sndbuf_limited_us),
    )
}

fn udp_lines(u: &wirerate_core::result::UdpSummary) -> String {
    let target = u.target_bps.map_or_else(
        || "unpaced".into(),
        |t| format!("paced at {} per stream", format_bps(t)),
    );
    let mut o = format!(
        "  {:<22} {} sent ({target}), {} received, lost {} ({:.3} %), out of order {}, duplicates {}, jitter {}",
        "UDP",
        count(u.packets, "datagram"),
        u.received,
        u.lost,
        u.loss_percent,
        u.out_of_order,
        u.duplicates,
        u.jitter_ms.map_or_else(|| "n/a".into(), |j| format!("{j:.3} ms")),
    );
    let where_ = match (u.lost_in_receiver, u.lost_on_path) {
        (Some(r), Some(p)) if u.lost > 0 => format!(
            "{r} dropped in the receiving host's buffers (socket overflow {}, host RcvbufErrors {}), {p} on the path",
            n(u.socket_drops),
            n(u.receiver_rcvbuf_errors)
        ),
        _ if u.lost > 0 => "not known (no kernel drop counters)".into(),
        _ => "no loss".into(),
    };
    let _ = write!(o, "\n  {:<22} {where_}", "UDP loss location");
    if u.sent_pps.is_some() || u.received_pps.is_some() {
        let pps = |p: Option<f64>| p.map_or_else(|| "n/a".into(), format_pps);
        let _ = write!(
            o,
            "\n  {:<22} {} sent, {} received",
            "UDP packets/s",
            pps(u.sent_pps),
            pps(u.received_pps)
        );
    }
    if u.sender_enobufs > 0 || u.foreign_datagrams > 0 {
        let _ = write!(
            o,
            "\n  {:<22} sender ENOBUFS {}, foreign datagrams dropped {}",
            "UDP other", u.sender_enobufs, u.foreign_datagrams
        );
    }
    o
}

/// Packets per second with an SI prefix: "812.4 kpps", "1.23 Mpps".
fn format_pps(p: f64) -> String {
    if p >= 1e6 {
        format!("{:.3} Mpps", p / 1e6)
    } else if p >= 1e3 {
        format!("{:.1} kpps", p / 1e3)
    } else {
        format!("{p:.1} pps")
    }
}

fn iface_line(side: &str, i: &InterfaceDelta) -> String {
    format!(
        "  {:<22} {}: rx {} pkts {}, tx {} pkts {}, drops {}/{}, errors {}/{}, overruns {}",
        format!("interface ({side})"),
        i.name,
        n(i.rx_packets),
        i.rx_bytes.map_or_else(|| "n/a".into(), format_bytes),
        n(i.tx_packets),
        i.tx_bytes.map_or_else(|| "n/a".into(), format_bytes),
        n(i.rx_dropped),
        n(i.tx_dropped),
        n(i.rx_errors),
        n(i.tx_errors),
        n(i.rx_over_errors.zip(i.rx_fifo_errors).map(|(a, b)| a + b)),
    )
}

/// The socket buffers a side's sockets asked for (`-w`, `--sndbuf`, `--rcvbuf`) and what the
/// kernel set (Linux doubles a request and has a minimum): the send buffer where the side
/// sends, the receive buffer where it receives. None when the side asked for neither.
fn buffers_line(
    side: &str,
    spec: &TestSpec,
    b: &wirerate_core::result::SocketBuffers,
) -> Option<String> {
    let client = side == "client";
    let flows = spec.direction.flows();
    let sends = flows.iter().any(|f| f.sender_is_client() == client);
    let receives = flows.iter().any(|f| f.sender_is_client() != client);
    let size = |v: Option<u64>| v.map_or_else(|| "n/a".into(), format_bytes);
    let asked = |own: Option<u64>, flag: &str| match (own, spec.window_bytes) {
        (Some(x), _) => Some((x, flag.to_string())),
        (None, Some(w)) => Some((w, "-w".to_string())),
        _ => None,
    };
    let mut parts = Vec::new();
    if let Some((x, flag)) = asked(spec.sndbuf_bytes, "--sndbuf").filter(|_| sends) {
        parts.push(format!(
            "send buffer {} asked ({flag}), kernel set {}",
            format_bytes(x),
            size(b.send_bytes)
        ));
    }
    if let Some((x, flag)) = asked(spec.rcvbuf_bytes, "--rcvbuf").filter(|_| receives) {
        parts.push(format!(
            "receive buffer {} asked ({flag}), kernel set {}",
            format_bytes(x),
            size(b.receive_bytes)
        ));
    }
    (!parts.is_empty())
        .then(|| format!("  {:<22} {}", format!("buffers ({side})"), parts.join("; ")))
}

/// The summary table printed at the end of a run.
pub fn summary(r: &RunResult) -> String {
    if let Some(rr) = &r.summary.rr {
        return format!("\n{}", crate::latency::rr_summary(r, rr));
    }
    if let Some(sw) = &r.sweep {
        return format!("\n{}", crate::latency::sweep_summary(sw));
    }
    let s = &r.summary;
    let mut o = crate::brief::title(r);
    let line = crate::brief::rate_line;
    let _ = writeln!(
        o,
        "{}",
        line("goodput (receiver)", s.goodput_bps, s.bytes, s.seconds, "")
    );
    let sent = line(
        "sent (sender)",
        s.sender_bps,
        s.sender_bytes,
        s.sender_seconds,
        "",
    );
    let _ = writeln!(o, "{sent}");
    for f in &s.flows {
        let _ = writeln!(
            o,
            "{}",
            line(f.flow.name(), f.goodput_bps, f.bytes, f.seconds, "")
        );
    }
    let listed = listed_streams(r);
    if r.streams.len() > 1 {
        for st in &listed {
            let _ = writeln!(
                o,
                "  {:<22} {:>15}   {}",
                format!("stream {} {}", st.id, st.flow.name()),
                format_bps(st.goodput_bps),
                format_bytes(st.receiver.counted_bytes)
            );
        }
        if listed.len() < r.streams.len() {
            let _ = writeln!(
                o,
                "  {:<22} above, the {EXTREMES} slowest and {EXTREMES} fastest of {} streams; every stream is in the JSON (--json)",
                "",
                r.streams.len()
            );
        }
    }
    let _ = writeln!(
        o,
        "{}",
        io_line("I/O sender", s.io.sender.as_ref(), "writes")
    );
    let _ = writeln!(
        o,
        "{}",
        io_line("I/O receiver", s.io.receiver.as_ref(), "reads")
    );
    let _ = writeln!(o, "{}", cpu_line("CPU client", s.cpu.local.as_ref()));
    let _ = writeln!(o, "{}", cpu_line("CPU server", s.cpu.remote.as_ref()));
    for (name, e) in core_hosts(r) {
        let _ = writeln!(o, "{}", cores_line(name, e));
    }
    let _ = writeln!(
        o,
        "  {:<22} {}",
        "PI = T/C × T/P",
        s.pi.map_or_else(|| "n/a (CPU load unknown)".into(), |p| format!("{p:.2}"))
    );
    if let Some(t) = &s.tcp {
        let spurious = match (t.retransmits, t.dsack_dups) {
            (Some(r), Some(d)) if r > 0 => format!(" ({} reported spurious by DSACK)", d.min(r)),
            _ => String::new(),
        };
        let _ = writeln!(
            o,
            "  {:<22} retransmits {}{spurious}, congestion {}, mean rtt {}, largest cwnd {}",
            "TCP",
            n(t.retransmits),
            t.congestion.as_deref().unwrap_or("n/a"),
            t.rtt_us
                .map_or_else(|| "n/a".into(), |x| format!("{x:.0} µs")),
            largest_cwnd(r).map_or_else(|| "n/a".into(), format_bytes)
        );
        if let (Some(busy), Some(rw), Some(sb)) = (
            t.busy_time_us,
            t.rwnd_limited_percent,
            t.sndbuf_limited_percent,
        ) {
            let _ = writeln!(
                o,
                "  {:<22} busy {:.2} s, of it waiting on the receiver's window {rw:.1} %, on the send buffer {sb:.1} % (the cause is under Why)",
                "TCP send time",
                busy as f64 / 1e6
            );
        }
        for st in &listed {
            if let Some(ti) = &st.tcp_sender {
                // both ways at once: stream ids repeat, so the flow names the line
                let name = match (r.spec.direction, st.flow) {
                    (Direction::Bidir, f) => format!("s{} {}", st.id, f.short()),
                    _ => format!("s{} tx", st.id),
                };
                let _ = writeln!(o, "{}", tcp_stream_line(&name, ti));
            }
        }
    }
    if let Some(u) = &s.udp {
        let _ = writeln!(o, "{}", udp_lines(u));
    }
    if let Some(f) = &s.fairness {
        let _ = writeln!(o, "{}", fairness_line(f));
    }
    for i in &r.env.client.interfaces {
        let _ = writeln!(o, "{}", iface_line("client", i));
    }
    if !r.env.embedded_server {
        for i in &r.env.server.interfaces {
            let _ = writeln!(o, "{}", iface_line("server", i));
        }
    }
    for (side, h) in [("client", &r.env.client), ("server", &r.env.server)] {
        if let Some(line) = (h.socket_buffers.as_ref()).and_then(|b| buffers_line(side, &r.spec, b))
        {
            let _ = writeln!(o, "{line}");
        }
    }
    let w = &s.wire;
    let wire = match (w.link_bps, w.model_goodput_bps, w.efficiency) {
        (Some(l), Some(m), Some(e)) => format!(
            "link {}, model goodput {}, efficiency {:.1} %",
            format_bps(l),
            format_bps(m),
            e * 100.0
        ),
        (Some(l), _, _) => format!("link {}, no model for this test", format_bps(l)),
        _ => "link rate unknown (state it with --link RATE)".into(),
    };
    let _ = writeln!(o, "  {:<22} {wire}", "wire");
    if let Some(p) = &w.path {
        let _ = writeln!(o, "  {:<22} {}", "path", path_words(p));
    }
    if let Some(m) = &w.path_model {
        let _ = writeln!(o, "{}", path_model_line(m));
    }
    if let Some(d) = &s.diagnosis {
        o.push_str(&why(d));
        o.push_str(&interval_changes(&r.intervals));
    }
    o
}

/// The largest congestion window the run saw, in bytes: the senders' interval samples, or
/// where there are none (a peer that sent no samples) the streams' last.
fn largest_cwnd(r: &RunResult) -> Option<u64> {
    let sampled = (r.intervals.iter())
        .filter_map(|i| i.tcp.as_ref()?.snd_cwnd_bytes)
        .max();
    sampled.or_else(|| {
        (r.streams.iter())
            .filter_map(|s| s.tcp_sender.as_ref()?.cwnd_bytes())
            .max()
    })
}

/// How evenly the streams shared the path: Jain's index and the spread per stream.
pub(crate) fn fairness_line(f: &wirerate_core::result::Fairness) -> String {
    format!(
        "  {:<22} Jain's index {:.3} over {}; per stream min {}, median {}, max {}",
        "fairness",
        f.jain_index,
        count(u64::from(f.streams), "stream"),
        format_bps(f.min_bps),
        format_bps(f.median_bps),
        format_bps(f.max_bps)
    )
}

/// An emulated path's settings: one direction's when both are alike, else each.
/// The path model's line: what an emulated path allows, its bound, and the goodput's share.
pub(crate) fn path_model_line(m: &wirerate_core::result::PathModel) -> String {
    let bound = match m.limit {
        wirerate_core::result::PathLimit::Wire => "the wire".to_string(),
        wirerate_core::result::PathLimit::Window => {
            format!("the advertised window over {:.1} ms", m.rtt_ms)
        }
        wirerate_core::result::PathLimit::Loss => {
            format!("the path's loss over {:.1} ms (Mathis)", m.rtt_ms)
        }
    };
    let eff = m.efficiency.map_or(String::new(), |e| {
        format!(", efficiency {:.1} %", e * 100.0)
    });
    format!(
        "  {:<22} {} at most, bounded by {bound}{eff}",
        "path model",
        format_bps(m.goodput_bps)
    )
}

fn path_words(p: &wirerate_core::result::WirePath) -> String {
    let dir = |d: &wirerate_core::result::PathDirection| {
        let mut parts = vec![format!("delay {} ms", trim(d.delay_ms))];
        if d.jitter_ms > 0.0 {
            parts.push(format!("jitter ±{} ms", trim(d.jitter_ms)));
        }
        if d.loss_percent > 0.0 {
            parts.push(format!("loss {} %", trim(d.loss_percent)));
        }
        if d.reorder_percent > 0.0 {
            parts.push(format!("reordering {} %", trim(d.reorder_percent)));
        }
        parts.join(", ")
    };
    if p.client_to_server == p.server_to_client {
        format!("{} each way (lab delay line)", dir(&p.client_to_server))
    } else {
        format!(
            "client→server {}; server→client {} (lab delay line)",
            dir(&p.client_to_server),
            dir(&p.server_to_client)
        )
    }
}

/// A figure with the decimals it needs, at most three.
fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Streams listed one by one in the summary: all of them, or in a test of more than
/// [`wirerate_core::spec::limits::MAX_STREAM_INTERVALS`] per flow the three slowest and the
/// three fastest, slowest first.
fn listed_streams(r: &RunResult) -> Vec<&StreamResult> {
    if r.spec.lists_each_stream() {
        return r.streams.iter().collect();
    }
    let mut by_rate: Vec<&StreamResult> = r.streams.iter().collect();
    by_rate.sort_by(|a, b| a.goodput_bps.total_cmp(&b.goodput_bps));
    if by_rate.len() > 2 * EXTREMES {
        by_rate.drain(EXTREMES..by_rate.len() - EXTREMES);
    }
    by_rate
}

/// Streams listed at each end of a test of too many to list them all.
const EXTREMES: usize = 3;

/// The hosts whose per-core load to print: one line per distinct host (a loopback test's
/// two sides read the same cores).
fn core_hosts(r: &RunResult) -> Vec<(&'static str, &HostEvidence)> {
    let (c, s) = (r.evidence.client.as_ref(), r.evidence.server.as_ref());
    let same =
        matches!((c, s), (Some(a), Some(b)) if a.host_key.is_some() && a.host_key == b.host_key);
    match (c, s) {
        (Some(c), Some(_)) if same => vec![("cores (both sides)", c)],
        (c, s) => [("cores (client)", c), ("cores (server)", s)]
            .into_iter()
            .filter_map(|(n, e)| e.map(|e| (n, e)))
            .collect(),
    }
    .into_iter()
    .filter(|(_, e)| !e.cores.is_empty())
    .collect()
}

fn cores_line(name: &str, e: &HostEvidence) -> String {
    let cores: Vec<String> = e
        .cores
        .iter()
        .map(|c| {
            format!(
                "{}: {:.0} % (user {:.0}, sys {:.0}, softirq {:.0}, irq {:.0})",
                c.core,
                c.busy_percent(),
                c.user_percent,
                c.system_percent,
                c.softirq_percent,
                c.irq_percent
            )
        })
        .collect();
    let cycles = e
        .cycles
        .map_or_else(String::new, |c| format!("; {c} cycles"));
    format!("  {name:<22} {}{cycles}", cores.join("; "))
}

/// Where the bottleneck changed from one interval to the next.
fn interval_changes(intervals: &[Interval]) -> String {
    let marks: Vec<String> = intervals
        .iter()
        .filter_map(|iv| {
            iv.bottleneck.map(|b| {
                format!(
                    "{} {:.2}-{:.2} s: {}",
                    iv.flow.name(),
                    iv.start_s,
                    iv.end_s,
                    b.words()
                )
            })
        })
        .collect();
    if marks.len() < 2 {
        return String::new();
    }
    format!("  {:<9} {}\n", "intervals:", marks.join("; "))
}

/// The diagnosis's confidence in a word.
pub(crate) fn confidence(d: &Diagnosis) -> &'static str {
    confidence_word(d.confidence)
}

/// A confidence in a word (a verdict's, a find-max search's).
pub(crate) fn confidence_word(c: Confidence) -> &'static str {
    match c {
        Confidence::High => "high",
        Confidence::Medium => "medium",
        Confidence::Low => "low",
    }
}

/// The Why block: the verdict, the evidence behind it, notes, advice, and what could not
/// be seen.
pub fn why(d: &Diagnosis) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "\nWhy");
    let _ = writeln!(o, "  {} (confidence {})", d.verdict, confidence(d));
    for e in &d.evidence {
        let _ = writeln!(o, "    - {}", e.text);
    }
    let others: Vec<String> = d
        .candidates
        .iter()
        .filter(|c| c.bottleneck != d.bottleneck && c.score >= 0.5)
        // a score, not a share of anything: "sender CPU (70 %)" read as a CPU figure
        .map(|c| format!("{} (score {:.2})", c.bottleneck.words(), c.score))
        .collect();
    if !others.is_empty() {
        let _ = writeln!(o, "  {:<9} {}", "also:", others.join(", "));
    }
    for n in &d.notes {
        let _ = writeln!(o, "  {:<9} {n}", "note:");
    }
    for a in &d.advice {
        let _ = writeln!(o, "  {:<9} {a}", "advice:");
    }
    for u in &d.unseen {
        let _ = writeln!(o, "  {:<9} {u}", "unseen:");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirerate_core::spec::Flow;

    #[test]
    fn interval_line_has_units() {
        let iv = Interval {
            flow: Flow::ClientToServer,
            stream: None,
            start_s: 0.0,
            end_s: 1.0,
            bytes: 1 << 30,
            bps: 8.589934592e9,
            omitted: true,
            packets: None,
            loss_percent: None,
            jitter_ms: None,
            tcp: None,
            bottleneck: None,
            rr: None,
        };
        let l = interval(&iv);
        assert!(l.contains("1.00 GiB"), "{l}");
        assert!(l.contains("8.59 Gbit/s"), "{l}");
        assert!(l.contains("omitted"), "{l}");
    }

    #[test]
    fn a_stream_s_window_is_in_bytes_as_on_the_interval_lines() {
        let t = TcpInfo {
            snd_cwnd: Some(34),
            snd_mss: Some(65483),
            ..Default::default()
        };
        let l = tcp_stream_line("s0 tx", &t);
        assert!(l.contains("cwnd 2.12 MiB,"), "{l}");
    }

    #[test]
    fn header_names_the_test() {
        let h = header(&TestSpec::default(), "127.0.0.1:5350");
        assert!(
            h.starts_with("wirerate: TCP to 127.0.0.1:5350, client → server, 1 stream, 10 s"),
            "{h}"
        );
    }

    #[test]
    fn why_lists_runner_ups_by_score_not_as_a_percentage() {
        use wirerate_core::diagnosis::{Bottleneck, Candidate};
        let d = Diagnosis {
            bottleneck: Bottleneck::ReceiverWindow,
            confidence: Confidence::Medium,
            verdict: "the receiver's window, with the host's CPU (both ends share it) close \
                      behind: …"
                .into(),
            evidence: Vec::new(),
            advice: Vec::new(),
            candidates: vec![
                Candidate {
                    bottleneck: Bottleneck::ReceiverWindow,
                    score: 0.9,
                },
                Candidate {
                    bottleneck: Bottleneck::HostCpu,
                    score: 0.7,
                },
            ],
            notes: Vec::new(),
            unseen: Vec::new(),
        };
        let w = why(&d);
        assert!(
            w.contains("also:     the host's CPU (both ends share it) (score 0.70)"),
            "{w}"
        );
        assert!(!w.contains("70 %"), "{w}");
    }
}
