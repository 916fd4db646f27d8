//! `wirerate rr [HOST]`: request/response latency and transaction rate (netperf's TCP_RR,
//! TCP_CRR and UDP_RR), against a server or the embedded loopback server.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use clap::ValueEnum;
use wirerate_control::Observer;
use wirerate_core::result::Interval;
use wirerate_core::rr::{RrMode, RrSpec};
use wirerate_core::spec::{End, TestKind};
use wirerate_core::{Protocol, TestSpec};
use wirerate_render::{latency, text};

use super::results::StoreArgs;
use super::results::{open_store, store_and_say};
use super::run::{execute, parse_size, target_for, Net};
use crate::exit::usage;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// One persistent TCP connection per flow (TCP_RR)
    Tcp,
    /// Connect, request, response, close for every transaction (TCP_CRR)
    Crr,
    /// One UDP datagram each way; a lost one is counted and timed out (UDP_RR)
    Udp,
}

#[derive(clap::Args, Debug)]
#[command(
    after_help = "A transaction is one request from the client and one response from \
the server. Latency is the full round trip (fields rtt_*_us), measured by the client from \
sending the request (or, with --rate, from its scheduled send time, so a stall of the \
server or the path shows instead of being hidden) to the last byte of the response. Open \
loop also reports the round trips from the actual sends, as sockperf times them, and the \
client's send lateness. CPU per transaction is each wirerate process's own.\n\n\
Sizes take K, M as powers of 1024 (4K = 4096 bytes).\n\n\
Exit status: 0 success, 1 the test failed, 2 bad usage."
)]
pub struct Args {
    #[command(flatten)]
    pub net: Net,
    /// How transactions travel
    #[arg(long, value_enum, default_value_t = Mode::Tcp)]
    pub mode: Mode,
    /// Request size in bytes [default: 1; 8 for udp, whose datagrams carry a sequence number]
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub request: Option<u64>,
    /// Response size in bytes [default: 1; 8 for udp]
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub response: Option<u64>,
    /// Flows, each on its own connection (or UDP socket) and thread on each side
    #[arg(short = 'P', long, value_name = "N", default_value_t = 1)]
    pub parallel: u32,
    /// Transactions in flight per flow (1: the next request waits for the response)
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub burst: u32,
    /// Open loop: transactions per second over all flows, sent on a fixed schedule; latency
    /// counts from each scheduled send time (corrected), and the result adds the round trips
    /// from the actual sends (uncorrected) and how late the sends left [default: closed loop]
    #[arg(long, value_name = "TPS", allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// Seconds to run
    #[arg(
        short = 't',
        long,
        value_name = "SECONDS",
        default_value_t = 10.0,
        allow_negative_numbers = true,
        conflicts_with = "count"
    )]
    pub time: f64,
    /// Transactions per flow, instead of a time
    #[arg(short = 'n', long, value_name = "COUNT")]
    pub count: Option<u64>,
    /// UDP: seconds a request waits for its response before it is counted lost
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 0.2,
        allow_negative_numbers = true
    )]
    pub loss_timeout: f64,
    /// Seconds between interval reports; 0 for none
    #[arg(
        short = 'i',
        long,
        value_name = "SECONDS",
        default_value_t = 1.0,
        allow_negative_numbers = true
    )]
    pub interval: f64,
    /// Print one JSON document instead of the human report
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// The validated spec, or a usage error naming the flag.
pub fn spec_from(a: &Args) -> anyhow::Result<TestSpec> {
    if !(a.time.is_finite() && a.time > 0.0) {
        return usage("-t must be positive");
    }
    if a.count == Some(0) {
        return usage("-n must be at least 1 transaction");
    }
    if let Some(r) = a.rate {
        if !(r.is_finite() && r > 0.0) {
            return usage("--rate must be a positive number of transactions per second");
        }
    }
    if a.request == Some(0) || a.response == Some(0) {
        return usage("--request and --response must be at least 1 byte");
    }
    if !(a.net.idle_timeout.is_finite() && (0.1..=3600.0).contains(&a.net.idle_timeout)) {
        return usage("--idle-timeout must be 0.1 to 3600 seconds");
    }
    let mode = match a.mode {
        Mode::Tcp => RrMode::Tcp,
        Mode::Crr => RrMode::Crr,
        Mode::Udp => RrMode::Udp,
    };
    let least = if mode == RrMode::Udp { 8 } else { 1 };
    let rr = RrSpec {
        mode,
        request_bytes: a.request.unwrap_or(least),
        response_bytes: a.response.unwrap_or(least),
        burst: a.burst,
        rate_tps: a.rate,
        loss_timeout_s: a.loss_timeout,
    };
    let spec = TestSpec {
        protocol: if mode == RrMode::Udp {
            Protocol::Udp
        } else {
            Protocol::Tcp
        },
        end: match a.count {
            Some(blocks) => End::Blocks { blocks },
            None => End::Time { seconds: a.time },
        },
        len_bytes: rr.request_bytes.max(rr.response_bytes),
        parallel: a.parallel,
        nodelay: true,
        interval_s: a.interval,
        rate_bps: None,
        test: TestKind::Rr(rr),
        ..Default::default()
    };
    if let Err(e) = spec.validate() {
        return usage(e.to_string());
    }
    Ok(spec)
}

/// Prints rr interval lines as they come.
struct Lines {
    text: bool,
}

impl Observer for Lines {
    fn started(&mut self) {
        if self.text {
            crate::say!("{}", latency::rr_interval_header());
        }
    }

    fn interval(&mut self, iv: &Interval) {
        if self.text && iv.rr.is_some() {
            crate::say!("{}", text::interval(iv));
        }
    }
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let spec = spec_from(&a)?;
    let mut store = open_store(&a.store)?;
    let t = target_for(&a.net)?;
    if !a.json {
        crate::say!("{}", text::header(&spec, &t.describe()));
    }
    let (result, errors) = execute(&t, &spec, &mut Lines { text: !a.json }, Duration::ZERO)?;
    let mut out = crate::exit::stdout();
    if a.json {
        writeln!(out, "{}", wirerate_render::json::result(&result))?;
    } else {
        write!(out, "{}", text::summary(&result))?;
    }
    out.flush()?;
    let stored = store_and_say(&a.store, store.as_mut(), &result, !a.json)?;
    // printed either way; a failed stream or a result that could not be stored fails
    Ok(super::results::finish(stored, &errors))
}
