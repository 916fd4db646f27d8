//! Classic ttcp report lines, with the classic arithmetic, so a new run can be set beside an
//! old ttcp log line for line.
//!
//! Promise: pure formatting, no IO and no clock; the same figures always give the same text
//! (the golden tests pin it against lines from old logs). The arithmetic, ttcp's own with its
//! quirks, is in `wirerate_core::ttcp`; this module only lays the figures out as ttcp did
//! (`%.2f`, `m:ss`, the field order of the usage line).

use std::fmt::Write as _;

use wirerate_core::result::CpuSide;
use wirerate_core::spec::{Flow, Protocol};
use wirerate_core::ttcp::{figures, usage_figures, Sample, Timeval, Transfer, Usage};
use wirerate_core::RunResult;

/// Which end of the transfer a line belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Transmit,
    Receive,
}

impl Side {
    /// The prefix of every line: `ttcp-t` or `ttcp-r`.
    pub fn prefix(self) -> &'static str {
        match self {
            Side::Transmit => "ttcp-t",
            Side::Receive => "ttcp-r",
        }
    }
}

pub use wirerate_core::ttcp::RateUnit;

/// A rate as ttcp prints it, without the trailing `/sec`: `3034.52 KB`.
pub fn rate(unit: RateUnit, bytes_per_s: f64) -> String {
    format!("{:.2} {}", unit.scale(bytes_per_s), unit.name())
}

/// The first line of a run: the parameters as ttcp prints them.
#[derive(Debug, Clone, PartialEq)]
pub struct Headline<'a> {
    pub side: Side,
    pub buflen: u64,
    pub nbuf: u64,
    pub align: u64,
    pub offset: u64,
    pub port: u16,
    /// Printed only when set, as ttcp does.
    pub sockbufsize: Option<u64>,
    pub udp: bool,
    /// The peer as the user wrote it; printed after `->` on the transmitter.
    pub host: Option<&'a str>,
}

/// `ttcp-t: buflen=8192, nbuf=2048, align=16384/0, port=5001  tcp  -> host`
pub fn headline(h: &Headline<'_>) -> String {
    let mut s = format!(
        "{}: buflen={}, nbuf={}, align={}/{}, port={}",
        h.side.prefix(),
        h.buflen,
        h.nbuf,
        h.align,
        h.offset,
        h.port
    );
    if let Some(b) = h.sockbufsize {
        let _ = write!(s, ", sockbufsize={b}");
    }
    let _ = write!(s, "  {}", if h.udp { "udp" } else { "tcp" });
    if let (Side::Transmit, Some(host)) = (h.side, h.host) {
        let _ = write!(s, "  -> {host}");
    }
    s.push('\n');
    s
}

/// A progress line such as `ttcp-t: connect` or `ttcp-r: accept from 127.0.0.1`.
pub fn message(side: Side, text: &str) -> String {
    format!("{}: {text}\n", side.prefix())
}

/// Which fields the usage line carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageFields {
    /// `%Uuser %Ssys %Ereal %P %Xi+%Dd %Mmaxrss %F+%Rpf %Ccsw` (BSD builds of ttcp).
    Bsd,
    /// `%Uuser %Ssys %Ereal %P` (System V builds of ttcp, which had only times()); used when
    /// page faults, context switches and memory are not known.
    SysV,
    /// No usage line at all, for a side whose CPU time was not measured.
    Omitted,
}

/// Everything the closing lines of one side need.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub side: Side,
    pub transfer: Transfer,
    pub unit: RateUnit,
    /// Adds the CPU-rate line and the buffer-address line (`-v`).
    pub verbose: bool,
    pub buffer_addr: usize,
    pub fields: UsageFields,
}

/// Elapsed whole seconds as `m:ss`, or `h:mm:ss` from one hour on.
fn elapsed(secs: i64) -> String {
    let hours = secs / 3600;
    let rest = secs % 3600;
    if hours != 0 {
        format!("{hours}:{:02}:{:02}", rest / 60, rest % 60)
    } else {
        format!("{}:{:02}", secs / 60, secs % 60)
    }
}

/// The usage line after its prefix, from two samples.
pub fn usage_line(start: &Sample, end: &Sample, fields: UsageFields) -> String {
    let u = usage_figures(start, end);
    let mut s = format!(
        "{}.{}user {}.{}sys {}real {}%",
        u.user_tenths / 10,
        u.user_tenths % 10,
        u.sys_tenths / 10,
        u.sys_tenths % 10,
        elapsed(u.elapsed_s),
        u.percent
    );
    if fields == UsageFields::Bsd {
        let _ = write!(
            s,
            " {}i+{}d {}maxrss {}+{}pf {}+{}csw",
            u.text,
            u.data,
            u.maxrss_half,
            u.major_faults,
            u.minor_faults,
            u.voluntary_csw,
            u.involuntary_csw
        );
    }
    s
}

/// The closing lines of one side: bytes and rate, I/O calls, usage, and with `-v` the CPU
/// rate and the buffer address.
pub fn report(r: &Report) -> String {
    let p = r.side.prefix();
    let t = &r.transfer;
    let f = figures(t);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{p}: {} bytes in {:.2} real seconds = {}/sec +++",
        t.bytes,
        f.real_s,
        rate(r.unit, f.bytes_per_real_s)
    );
    if r.verbose {
        let _ = writeln!(
            s,
            "{p}: {} bytes in {:.2} CPU seconds = {}/cpu sec",
            t.bytes,
            f.cpu_s,
            rate(r.unit, f.bytes_per_cpu_s)
        );
    }
    let _ = writeln!(
        s,
        "{p}: {} I/O calls, msec/call = {:.2}, calls/sec = {:.2}",
        t.calls, f.msec_per_call, f.calls_per_s
    );
    if r.fields != UsageFields::Omitted {
        let _ = writeln!(s, "{p}: {}", usage_line(&t.start, &t.end, r.fields));
    }
    if r.verbose {
        let _ = writeln!(s, "{p}: buffer address {:#x}", r.buffer_addr);
    }
    s
}

/// One side of a wirerate run, gathered for the ttcp lines.
struct SideFigures {
    bytes: u64,
    calls: u64,
    seconds: f64,
    cpu: Option<CpuSide>,
}

/// Splits `host:port` or `[v6]:port` into the host and the port (0 when there is none).
fn split_addr(addr: &str) -> (String, u16) {
    match addr.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && (h.starts_with('[') || !h.contains(':')) => (
            h.trim_start_matches('[').trim_end_matches(']').to_string(),
            p.parse().unwrap_or(0),
        ),
        _ => (addr.to_string(), 0),
    }
}

/// The sender and receiver figures of one flow: the summary when the run has one flow,
/// otherwise the sums over that flow's streams.
fn flow_figures(r: &RunResult, flow: Flow, only_flow: bool) -> (SideFigures, SideFigures) {
    let (tx_cpu, rx_cpu) = if flow.sender_is_client() {
        (&r.summary.cpu.local, &r.summary.cpu.remote)
    } else {
        (&r.summary.cpu.remote, &r.summary.cpu.local)
    };
    if only_flow {
        let s = &r.summary;
        return (
            SideFigures {
                bytes: s.sender_bytes,
                calls: s.io.sender.map_or(0, |io| io.calls),
                seconds: s.sender_seconds,
                cpu: tx_cpu.clone(),
            },
            SideFigures {
                bytes: s.bytes,
                calls: s.io.receiver.map_or(0, |io| io.calls),
                seconds: s.seconds,
                cpu: rx_cpu.clone(),
            },
        );
    }
    let streams = r.streams.iter().filter(|st| st.flow == flow);
    let mut tx = SideFigures {
        bytes: 0,
        calls: 0,
        seconds: 0.0,
        cpu: tx_cpu.clone(),
    };
    let mut rx = SideFigures {
        bytes: 0,
        calls: 0,
        seconds: 0.0,
        cpu: rx_cpu.clone(),
    };
    for st in streams {
        tx.bytes += st.sender.counted_bytes;
        tx.calls += st.sender.counted_calls.unwrap_or(st.sender.calls);
        tx.seconds = tx.seconds.max(st.sender.seconds);
        rx.bytes += st.receiver.counted_bytes;
        rx.calls += st.receiver.counted_calls.unwrap_or(st.receiver.calls);
        rx.seconds = rx.seconds.max(st.receiver.seconds);
    }
    (tx, rx)
}

/// The closing lines of one side of a wirerate run.
fn side_lines(side: Side, f: &SideFigures) -> String {
    let clock = Timeval::from_secs_f64(f.seconds);
    let transfer = Transfer {
        bytes: f.bytes,
        calls: f.calls,
        start: Sample::default(),
        end: Sample {
            clock,
            usage: Usage {
                user: Timeval::from_secs_f64(f.cpu.as_ref().map_or(0.0, |c| c.user_s)),
                sys: Timeval::from_secs_f64(f.cpu.as_ref().map_or(0.0, |c| c.sys_s)),
                ..Usage::default()
            },
        },
    };
    report(&Report {
        side,
        transfer,
        unit: RateUnit::KByte,
        verbose: false,
        buffer_addr: 0,
        // Without CPU figures for this side a usage line would be invented: leave it out.
        fields: if f.cpu.is_some() {
            UsageFields::SysV
        } else {
            UsageFields::Omitted
        },
    })
}

/// Renders a wirerate run as ttcp would have reported it: for each flow a `ttcp-t` block
/// (the sender) and a `ttcp-r` block (the receiver), each a headline, the bytes-and-rate
/// line, the I/O-calls line and a System V style usage line (`%Uuser %Ssys %Ereal %P`;
/// memory, page faults and context switches are not in the result, so they are left out,
/// and the whole usage line is left out for a side whose CPU was not measured).
///
/// The headline's `nbuf` is the sender's bytes ÷ buflen rounded up, `align=0/0` because
/// wirerate does not align its buffers, and `port` comes from the server address. With
/// parallel streams the figures are sums over the streams of the flow.
pub fn run_result_lines(r: &RunResult) -> String {
    let (host, port) = split_addr(&r.env.server_addr);
    let flows = r.spec.direction.flows();
    let len = r.spec.len_bytes.max(1);
    let mut out = String::new();
    for &flow in flows {
        let (tx, rx) = flow_figures(r, flow, flows.len() == 1);
        for (side, fig) in [(Side::Transmit, &tx), (Side::Receive, &rx)] {
            out.push_str(&headline(&Headline {
                side,
                buflen: r.spec.len_bytes,
                nbuf: tx.bytes.div_ceil(len),
                align: 0,
                offset: 0,
                port,
                sockbufsize: r.spec.window_bytes,
                udp: r.spec.protocol == Protocol::Udp,
                host: Some(&host),
            }));
            out.push_str(&side_lines(side, fig));
        }
    }
    out
}

#[cfg(test)]
#[path = "ttcp_tests.rs"]
mod tests;
