//! `wirerate rpm [HOST]`: latency under load. An idle phase, then download, upload and both
//! at once, each an ordinary test against the server, with latency probes on connections of
//! their own beside it and the loaded connections' TCP_INFO RTT inside it; RPM by the IETF
//! responsiveness draft (crates/core/src/rpm.rs holds the arithmetic).

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use wirerate_control::Observer;
use wirerate_core::owd::{self, OneWay, Stamps};
use wirerate_core::result::Interval;
use wirerate_core::rpm::{self, LatencyStats, Phase, PhaseResult, PhaseSamples, RpmSpec, Sample};
use wirerate_core::rr::{RrMode, RrSpec};
use wirerate_core::spec::{Direction, End, Flow, TestKind};
use wirerate_core::{Protocol, RunResult, TestSpec};
use wirerate_engine::qdisc_watch::QdiscWatch;
use wirerate_engine::rpm_probe::{ProbeLog, Prober};
use wirerate_engine::udp_probe::UdpProbeLog;

use super::results::{open_store, store_and_say, StoreArgs};
use super::run::{execute, target_for, Net, Target};
use crate::exit::usage;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Phases, each -t seconds: idle (a 10-per-second request/response on one \
connection, to hold the session), download (-P flows server to client), upload (-P flows \
client to server), both (-P each way). All through, latency probes on new connections \
(--probe-rate a second): the TCP connect time and a 1-byte request/response; and as many \
UDP probes to the server's port, whose stamps give the delay each direction adds over the \
run's base (one-way, each host on its own clock, drift fitted out). Inside the loaded \
phases, the senders' TCP_INFO smoothed RTT every 0.1 s, the client's egress qdisc on \
the route's interface (tc -s qdisc) every 0.2 s: backlog, drops, requeues, overlimits; and \
an in-band request/response on the loaded flows themselves (--probe-rate a second in all, \
half each way in both): the receiving side writes a 4-byte request on the idle direction, \
the sending side notes how much it had written when it read it, and the in-band latency is \
when the receiver got that far: how long a response queued behind the bulk (socket \
buffers included) takes.\n\n\
RPM = 60 000 / (1/2 x the foreign probes' 95 % trimmed mean + 1/2 x the in-band \
request/response's, or the TCP_INFO RTT's where there is none), in ms, as the IETF draft \"Responsiveness under Working Conditions\" defines it; the \
headline is the bidirectional phase's. Confidence (low, medium, high) is the draft's \
stability rule: the figure over the last four seconds agrees within 5 % (high) or 15 % \
(medium). Loaded minus idle connect time is queueing; times the phase's rate, the queue.\n\n\
Exit status: 0 success, 1 the test failed, 2 bad usage."
)]
pub struct Args {
    #[command(flatten)]
    pub net: Net,
    /// Flows each way in the loaded phases
    #[arg(short = 'P', long, value_name = "N", default_value_t = 4)]
    pub parallel: u32,
    /// Seconds of each phase (four phases)
    #[arg(
        short = 't',
        long,
        value_name = "SECONDS",
        default_value_t = 5.0,
        allow_negative_numbers = true
    )]
    pub time: f64,
    /// Seconds at the start of each loaded phase not counted (the load ramps up); counting
    /// starts later where throughput is not yet stable (its moving average over 4 intervals
    /// within 5 %, 4 times in a row: the phase's ramp-up) [default: 1, at most a quarter of -t]
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub warmup: Option<f64>,
    /// Latency probes a second of each kind: TCP (each a new connection) and UDP (1 to 50)
    #[arg(
        long,
        value_name = "HZ",
        default_value_t = 20.0,
        allow_negative_numbers = true
    )]
    pub probe_rate: f64,
    /// DSCP class of the loaded flows (BE, BK, LE, CS0-CS7, AF11-AF43, EF, or 0-63; RRUL
    /// marks its flows BE, BK, CS5 and EF); UP/DOWN (e.g. CS1/EF) marks the packets client →
    /// server with UP and server → client with DOWN: each end marks what it sends
    /// [default: unmarked]
    #[arg(long, value_name = "CLASS[/CLASS]", value_parser = wirerate_core::dscp::parse_pair)]
    pub dscp: Option<(u8, u8)>,
    /// DSCP class of the latency probes: this side's packets from the SYN on, and the
    /// server's answers (its UDP replies, the bytes it echoes); UP/DOWN marks the answers
    /// with DOWN [default: unmarked]
    #[arg(long, value_name = "CLASS[/CLASS]", value_parser = wirerate_core::dscp::parse_pair)]
    pub probe_dscp: Option<(u8, u8)>,
    /// Socket buffers of the loaded flows (SO_SNDBUF/SO_RCVBUF, both ends); turns
    /// autotuning off. What a sender's buffer holds, an in-band response waits behind
    #[arg(short = 'w', long, value_name = "SIZE", value_parser = super::run::parse_size)]
    pub window: Option<u64>,
    /// The loaded senders' socket buffer alone (SO_SNDBUF)
    #[arg(long, value_name = "SIZE", value_parser = super::run::parse_size)]
    pub sndbuf: Option<u64>,
    /// Send no in-band requests on the loaded flows: their self part is then the TCP_INFO
    /// RTT alone
    #[arg(long)]
    pub no_inband: bool,
    /// Print one JSON document (the result, its `rpm` section per schema/rpm.schema.json)
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// The validated settings, or a usage error naming the flag.
pub fn spec_from(a: &Args) -> anyhow::Result<RpmSpec> {
    if !(a.time.is_finite() && a.time > 0.0) {
        return usage("-t must be positive");
    }
    if a.parallel == 0 || a.parallel > wirerate_core::spec::limits::MAX_PARALLEL {
        return usage(format!(
            "-P must be 1 to {}",
            wirerate_core::spec::limits::MAX_PARALLEL
        ));
    }
    let s = RpmSpec {
        phase_s: a.time,
        warmup_s: a.warmup.unwrap_or((a.time / 4.0).min(1.0)),
        probe_rate_hz: a.probe_rate,
        load_dscp: a.dscp.map(|d| d.0),
        load_dscp_down: a.dscp.filter(|d| d.1 != d.0).map(|d| d.1),
        probe_dscp: a.probe_dscp.map(|d| d.0),
        probe_dscp_down: a.probe_dscp.filter(|d| d.1 != d.0).map(|d| d.1),
        window_bytes: a.window,
        sndbuf_bytes: a.sndbuf,
        inband: !a.no_inband,
    };
    if let Err(e) = s.validate() {
        return usage(e);
    }
    Ok(s)
}

/// The test of one phase: a quiet rr session for idle, TCP bulk flows for the others.
fn phase_spec(phase: Phase, s: &RpmSpec, parallel: u32) -> TestSpec {
    let base = TestSpec {
        protocol: Protocol::Tcp,
        tos: s.load_dscp.map(wirerate_core::dscp::tos),
        server_tos: s.load_dscp_down.map(wirerate_core::dscp::tos),
        rpm_server: Some(s.server_asks(phase)),
        end: End::Time { seconds: s.phase_s },
        ..Default::default()
    };
    let direction = match phase {
        Phase::Idle => {
            return TestSpec {
                len_bytes: 1,
                parallel: 1,
                nodelay: true,
                interval_s: 0.0,
                test: TestKind::Rr(RrSpec {
                    mode: RrMode::Tcp,
                    request_bytes: 1,
                    response_bytes: 1,
                    burst: 1,
                    rate_tps: Some(10.0),
                    loss_timeout_s: 0.2,
                }),
                ..base
            }
        }
        Phase::Download => Direction::Reverse,
        Phase::Upload => Direction::Forward,
        Phase::Bidir => Direction::Bidir,
    };
    // in-band requests: the probe rate over each phase's loaded flows, half each way when
    // both directions load
    let per_way = if phase == Phase::Bidir { 0.5 } else { 1.0 };
    TestSpec {
        direction,
        parallel,
        window_bytes: s.window_bytes,
        sndbuf_bytes: s.sndbuf_bytes,
        inband_hz: s.inband.then_some(s.probe_rate_hz * per_way),
        // the warm-up is part of the phase: a test's omitted seconds come before its time
        end: End::Time {
            seconds: s.phase_s - s.warmup_s,
        },
        omit_s: s.warmup_s,
        interval_s: 0.1,
        fit_writes: true,
        ..base
    }
}

/// Starts the probes when the session hands out its token; stops them as the phase ends.
struct Probing {
    addr: SocketAddr,
    rate_hz: f64,
    tos: Option<u8>,
    phase_s: f64,
    prober: Option<Prober>,
}

impl Observer for Probing {
    fn session(&mut self, token: &wirerate_proto::Token) {
        self.prober = Some(Prober::start(
            self.addr,
            *token,
            self.rate_hz,
            Instant::now(),
            self.tos,
        ));
    }

    fn tick(&mut self, elapsed_s: f64) {
        if elapsed_s >= self.phase_s {
            if let Some(p) = &self.prober {
                p.stop();
            }
        }
    }

    fn interval(&mut self, _iv: &Interval) {}
}

/// The loaded connections' smoothed RTT samples, from each flow's interval sums.
fn loaded_rtt(r: &RunResult) -> Vec<Sample> {
    r.intervals
        .iter()
        .filter(|iv| iv.stream.is_none() && !iv.omitted)
        .filter_map(|iv| {
            let rtt_us = iv.tcp.as_ref()?.rtt_us?;
            Some(Sample {
                at_s: iv.end_s,
                ms: rtt_us / 1000.0,
            })
        })
        .collect()
}

/// Each interval's end and goodput over every flow (both directions summed in the
/// bidirectional phase), warm-up included, in time order: what the ramp-up is read from.
fn goodput_steps(r: &RunResult) -> Vec<(f64, f64)> {
    // the two sides' intervals of one tick end within a few ms of each other
    let tick = |end_s: f64| (end_s / r.spec.interval_s.max(1e-3)).round() as i64;
    let mut by_tick: std::collections::BTreeMap<i64, (f64, f64)> = Default::default();
    for iv in r.intervals.iter().filter(|iv| iv.stream.is_none()) {
        let e = by_tick.entry(tick(iv.end_s)).or_insert((iv.end_s, 0.0));
        e.0 = e.0.max(iv.end_s);
        e.1 += iv.bps;
    }
    by_tick.into_values().collect()
}

/// The median over counted intervals of what the loaded senders had written but not sent.
fn unsent(r: &RunResult) -> Option<u64> {
    let v = r
        .intervals
        .iter()
        .filter(|iv| iv.stream.is_none() && !iv.omitted)
        .filter_map(|iv| iv.tcp.as_ref()?.unsent_bytes)
        .collect();
    rpm::median_bytes(v)
}

/// Goodput server → client and client → server of a phase's result.
fn rates(phase: Phase, r: &RunResult) -> (Option<f64>, Option<f64>) {
    let flow = |f: Flow| {
        r.summary
            .flows
            .iter()
            .find(|x| x.flow == f)
            .map(|x| x.goodput_bps)
    };
    match phase {
        Phase::Idle => (None, None),
        Phase::Download => (Some(r.summary.goodput_bps), None),
        Phase::Upload => (None, Some(r.summary.goodput_bps)),
        Phase::Bidir => (flow(Flow::ServerToClient), flow(Flow::ClientToServer)),
    }
}

fn samples_of(log: &ProbeLog, rtt: Vec<Sample>, r: &RunResult) -> PhaseSamples {
    PhaseSamples {
        connect: log
            .samples
            .iter()
            .map(|p| Sample {
                at_s: p.at_s,
                ms: p.connect_ms,
            })
            .collect(),
        request: log
            .samples
            .iter()
            .filter_map(|p| {
                Some(Sample {
                    at_s: p.at_s,
                    ms: p.request_ms?,
                })
            })
            .collect(),
        loaded_rtt: rtt,
        inband: r
            .inband
            .iter()
            .map(|x| Sample {
                at_s: x.at_s,
                ms: x.ms,
            })
            .collect(),
    }
}

/// What one phase gave: its test's result, its figures, its errors, and the stamps of its
/// counted UDP probes (the one-way delays are fitted over the whole run).
struct PhaseRun {
    result: RunResult,
    figures: PhaseResult,
    errors: Vec<String>,
    stamps: Vec<Stamps>,
    /// When each of `stamps` was sent, seconds from the phase's start.
    sent_at: Vec<f64>,
}

/// The UDP probes' round trips and stamps, from the end of the warm-up on.
fn udp_counted(log: &UdpProbeLog, warmup_s: f64) -> (Vec<Sample>, Vec<Stamps>) {
    log.samples
        .iter()
        .filter(|p| p.at_s >= warmup_s)
        .map(|p| {
            let rtt = Sample {
                at_s: p.at_s,
                ms: p.rtt_ms,
            };
            (rtt, p.stamps)
        })
        .unzip()
}

/// How long a phase after the first waits for the server's slot: the server frees it a
/// moment after the previous phase's reports.
const BETWEEN_PHASES_WAIT: Duration = Duration::from_secs(5);

/// Runs one phase, waiting up to `busy_wait` for a busy server; its result and figures, or
/// why it failed.
fn run_phase(
    t: &Target,
    phase: Phase,
    s: &RpmSpec,
    parallel: u32,
    busy_wait: Duration,
) -> anyhow::Result<PhaseRun> {
    let spec = phase_spec(phase, s, parallel);
    let mut obs = Probing {
        addr: t.addr,
        rate_hz: s.probe_rate_hz,
        tos: s.probe_dscp.map(wirerate_core::dscp::tos),
        phase_s: s.phase_s,
        prober: None,
    };
    let watch = (phase != Phase::Idle)
        .then(|| QdiscWatch::start(t.addr.ip()))
        .flatten();
    let run = execute(t, &spec, &mut obs, busy_wait);
    // the probes stop with the phase; the qdisc's last reading may take a moment more
    let log = obs.prober.take().map(Prober::finish).unwrap_or_default();
    let qdisc = watch.and_then(|w| w.finish(s.warmup_s));
    let (result, errors) = run?;
    // a loaded phase counts from its warm-up's end or from when its throughput was stable,
    // whichever is later
    let ramp_up = (phase != Phase::Idle)
        .then(|| rpm::ramp_up_s(&goodput_steps(&result)))
        .flatten();
    let warmup = if phase == Phase::Idle {
        0.0
    } else {
        s.warmup_s.max(ramp_up.unwrap_or(0.0))
    };
    let samples = samples_of(&log, loaded_rtt(&result), &result);
    let mut figures = rpm::phase_result(
        phase,
        s.phase_s,
        warmup,
        &samples,
        rates(phase, &result),
        log.failed,
    );
    if phase != Phase::Idle {
        figures.ramp_up_s = ramp_up;
        figures.sender_unsent_bytes = unsent(&result);
        figures.qdisc = qdisc;
        // read by the server toward this host, sent in its report
        figures.server_qdisc = result
            .evidence
            .server
            .as_ref()
            .and_then(|e| e.egress_qdisc.clone());
    }
    let (udp, stamps) = udp_counted(&log.udp, warmup);
    figures.udp = LatencyStats::of(&udp);
    figures.udp_failed = log.udp.failed;
    // over time, every probe (the warm-up's too), as the connect times
    figures.udp_series = rpm::series(&udp_counted(&log.udp, f64::NEG_INFINITY).0);
    Ok(PhaseRun {
        result,
        figures,
        errors,
        stamps,
        sent_at: udp.iter().map(|s| s.at_s).collect(),
    })
}

/// Each phase's one-way delays, from a base fitted over all phases' UDP probes (`sent_at`:
/// each phase's probes' times in it).
fn one_way(phases: &mut [PhaseResult], stamps: &[Vec<Stamps>], sent_at: &[Vec<f64>]) {
    let all: Vec<Stamps> = stamps.iter().flatten().copied().collect();
    let mut added = owd::added_ms(&all).into_iter();
    for ((p, s), at) in phases.iter_mut().zip(stamps).zip(sent_at) {
        let mine: Vec<(f64, f64)> = added.by_ref().take(s.len()).collect();
        p.one_way = OneWay::of(&mine);
        p.one_way_series = owd::series(at, &mine);
    }
}

/// Runs the four phases against `t`: the last phase's result carrying the `rpm` section, and
/// the phases' errors. `each` sees every phase's figures as it ends. `wirerate rpm` prints
/// this; the exporter's `/probe?kind=rpm` exports it. `first_wait`: how long the first phase
/// waits for a server busy with another test (the later phases wait for the slot their
/// phase before frees).
pub fn measure(
    t: &Target,
    s: &RpmSpec,
    parallel: u32,
    first_wait: Duration,
    each: &mut dyn FnMut(&PhaseResult),
) -> anyhow::Result<(RunResult, Vec<String>)> {
    let mut phases = Vec::new();
    let mut errors = Vec::new();
    let mut stamps = Vec::new();
    let mut sent_at = Vec::new();
    let mut last = None;
    for phase in Phase::ALL {
        let wait = if phase == Phase::Idle {
            first_wait
        } else {
            BETWEEN_PHASES_WAIT
        };
        let run = run_phase(t, phase, s, parallel, wait)?;
        each(&run.figures);
        errors.extend(
            run.errors
                .into_iter()
                .map(|e| format!("{}: {e}", phase.name())),
        );
        phases.push(run.figures);
        stamps.push(run.stamps);
        sent_at.push(run.sent_at);
        last = Some(run.result);
    }
    one_way(&mut phases, &stamps, &sent_at);
    let Some(mut result) = last else {
        anyhow::bail!("no phase ran");
    };
    result.spec.test = TestKind::Rpm(s.clone());
    result.spec.parallel = parallel;
    result.rpm = Some(Box::new(rpm::summarize(phases)));
    Ok((result, errors))
}

/// The target of an rpm test, refused where it cannot answer probes.
pub fn target(net: &Net) -> anyhow::Result<Target> {
    let t = target_for(net)?;
    if t.iperf3 {
        return usage("rpm needs a wirerate server: an iperf3 server answers no latency probes");
    }
    Ok(t)
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let s = spec_from(&a)?;
    let mut store = open_store(&a.store)?;
    let t = target(&a.net)?;
    if !a.json {
        crate::say!(
            "wirerate rpm: {}, {} s per phase ({} s warm-up), {} each way, {} probes/s",
            t.describe(),
            s.phase_s,
            s.warmup_s,
            wirerate_core::text::count(u64::from(a.parallel), "flow"),
            s.probe_rate_hz
        );
    }
    let json = a.json;
    let (result, errors) = measure(&t, &s, a.parallel, BETWEEN_PHASES_WAIT, &mut |figures| {
        if !json {
            crate::say!("{}", wirerate_render::rpm::phase_line(figures));
        }
    })?;
    let mut out = crate::exit::stdout();
    if a.json {
        writeln!(out, "{}", wirerate_render::json::result(&result))?;
    } else {
        write!(out, "{}", wirerate_render::rpm::summary(&result))?;
    }
    out.flush()?;
    let stored = store_and_say(&a.store, store.as_mut(), &result, !a.json)?;
    // printed either way; a failed stream or a result that could not be stored fails
    Ok(super::results::finish(stored, &errors))
}
