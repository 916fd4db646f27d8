//! Classic ttcp report lines, with the classic arithmetic, so a new run can be set beside an
//! old ttcp log line for line.
//!
//! Promise: pure formatting of plain figures, no IO and no clock; the same figures always
//! give the same text (the golden tests below pin it).
//!
//! The arithmetic is ttcp's own, quirks included (docs/ttcp.md explains each):
//! - rate = bytes ÷ real seconds, scaled by 1024 per prefix for every `-f` letter, and
//!   ×8 for the bit letters (`k`, `m`, `g`);
//! - msec/call = **1024** × real seconds ÷ calls (not 1000);
//! - real and CPU seconds are clamped to 0.001 and 0.00001 so nothing divides by zero;
//! - the usage line truncates user and system time to tenths, elapsed time to whole
//!   seconds, and computes the percentage from hundredths truncated part by part;
//! - `maxrss` is the kernel's figure halved.

use std::fmt::Write as _;

use wirerate_core::result::CpuSide;
use wirerate_core::spec::{Flow, Protocol};
use wirerate_core::ttcp::{Sample, Timeval, Transfer, Usage};
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

/// The unit of the rate figure, chosen by ttcp's `-f` letter. Every prefix is a power of
/// 1024, for bits as well as bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RateUnit {
    Kbit,
    #[default]
    KByte,
    Mbit,
    MByte,
    Gbit,
    GByte,
}

impl RateUnit {
    /// The unit for a `-f` letter: `k`/`m`/`g` bits, `K`/`M`/`G` bytes.
    pub fn from_letter(c: char) -> Option<RateUnit> {
        Some(match c {
            'k' => RateUnit::Kbit,
            'K' => RateUnit::KByte,
            'm' => RateUnit::Mbit,
            'M' => RateUnit::MByte,
            'g' => RateUnit::Gbit,
            'G' => RateUnit::GByte,
            _ => return None,
        })
    }

    /// Formats bytes per second as ttcp does, without the trailing `/sec`: `3034.52 KB`.
    pub fn format(self, bytes_per_s: f64) -> String {
        let (bits, power, name) = match self {
            RateUnit::Kbit => (true, 1, "Kbit"),
            RateUnit::KByte => (false, 1, "KB"),
            RateUnit::Mbit => (true, 2, "Mbit"),
            RateUnit::MByte => (false, 2, "MB"),
            RateUnit::Gbit => (true, 3, "Gbit"),
            RateUnit::GByte => (false, 3, "GB"),
        };
        let scaled = if bits { bytes_per_s * 8.0 } else { bytes_per_s } / 1024f64.powi(power);
        format!("{scaled:.2} {name}")
    }
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

/// `t1 - t0` with a borrow from the seconds, as a C `timeval` subtraction.
fn tv_sub(t1: Timeval, t0: Timeval) -> Timeval {
    let mut d = Timeval {
        sec: t1.sec - t0.sec,
        usec: t1.usec - t0.usec,
    };
    if d.usec < 0 {
        d.sec -= 1;
        d.usec += 1_000_000;
    }
    d
}

/// Hundredths of a second between two readings, truncating the seconds and microsecond
/// parts separately (this is how ttcp computes both the CPU and the elapsed hundredths).
fn hundredths(t1: Timeval, t0: Timeval) -> i64 {
    (t1.sec - t0.sec) * 100 + (t1.usec - t0.usec) / 10_000
}

/// Real seconds of a transfer, clamped to 0.001 as ttcp does.
pub fn real_seconds(t: &Transfer) -> f64 {
    let r = tv_sub(t.end.clock, t.start.clock).as_secs_f64();
    if r <= 0.0 {
        0.001
    } else {
        r
    }
}

/// CPU (user + system) seconds of a transfer, clamped to 0.00001 as ttcp does.
pub fn cpu_seconds(t: &Transfer) -> f64 {
    let (u0, u1) = (t.start.usage, t.end.usage);
    let c = tv_sub(u1.user, u0.user).as_secs_f64() + tv_sub(u1.sys, u0.sys).as_secs_f64();
    if c < 0.00001 {
        0.00001
    } else {
        c
    }
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
    let (r0, r1): (&Usage, &Usage) = (&start.usage, &end.usage);
    let cpu = hundredths(r1.user, r0.user) + hundredths(r1.sys, r0.sys);
    let wall = hundredths(end.clock, start.clock);
    let user = tv_sub(r1.user, r0.user);
    let sys = tv_sub(r1.sys, r0.sys);
    let percent = cpu * 100 / if wall != 0 { wall } else { 1 };
    let mut s = format!(
        "{}.{}user {}.{}sys {}real {}%",
        user.sec,
        user.usec / 100_000,
        sys.sec,
        sys.usec / 100_000,
        elapsed(wall / 100),
        percent
    );
    if fields == UsageFields::Bsd {
        let per_tick = |d: i64| if cpu == 0 { 0 } else { d / cpu };
        let text = per_tick(r1.ixrss - r0.ixrss);
        let data = per_tick(r1.idrss + r1.isrss - (r0.idrss + r0.isrss));
        let _ = write!(
            s,
            " {text}i+{data}d {}maxrss {}+{}pf {}+{}csw",
            r1.maxrss_kib / 2,
            r1.major_faults - r0.major_faults,
            r1.minor_faults - r0.minor_faults,
            r1.voluntary_csw - r0.voluntary_csw,
            r1.involuntary_csw - r0.involuntary_csw
        );
    }
    s
}

/// The closing lines of one side: bytes and rate, I/O calls, usage, and with `-v` the CPU
/// rate and the buffer address.
pub fn report(r: &Report) -> String {
    let p = r.side.prefix();
    let t = &r.transfer;
    let realt = real_seconds(t);
    let cput = cpu_seconds(t);
    let bytes = t.bytes as f64;
    let calls = t.calls as f64;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{p}: {} bytes in {realt:.2} real seconds = {}/sec +++",
        t.bytes,
        r.unit.format(bytes / realt)
    );
    if r.verbose {
        let _ = writeln!(
            s,
            "{p}: {} bytes in {cput:.2} CPU seconds = {}/cpu sec",
            t.bytes,
            r.unit.format(bytes / cput)
        );
    }
    let _ = writeln!(
        s,
        "{p}: {} I/O calls, msec/call = {:.2}, calls/sec = {:.2}",
        t.calls,
        1024.0 * realt / calls,
        calls / realt
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
    let (tx_cpu, rx_cpu) = match flow {
        Flow::ClientToServer => (&r.summary.cpu.local, &r.summary.cpu.remote),
        Flow::ServerToClient => (&r.summary.cpu.remote, &r.summary.cpu.local),
    };
    if only_flow {
        let s = &r.summary;
        return (
            SideFigures {
                bytes: s.sender_bytes,
                calls: s.io.sender.calls,
                seconds: s.sender_seconds,
                cpu: tx_cpu.clone(),
            },
            SideFigures {
                bytes: s.bytes,
                calls: s.io.receiver.calls,
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
        tx.calls += st.sender.calls;
        tx.seconds = tx.seconds.max(st.sender.seconds);
        rx.bytes += st.receiver.counted_bytes;
        rx.calls += st.receiver.calls;
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
