//! Latency under load (`wirerate rpm`): the figures of an idle phase and of loaded phases
//! (download, upload, both), and responsiveness in round trips per minute as the IETF draft
//! "Responsiveness under Working Conditions" (draft-ietf-ippm-responsiveness) defines it.
//!
//! Pure: samples in, figures out. The engine takes the samples; this module only counts.
//!
//! - A **foreign** probe runs on a connection of its own, beside the load: its TCP connect
//!   time (the handshake's round trip) and a 1-byte request/response on that new connection.
//! - **Self** (in-band) samples come from the loaded connections: an application-level
//!   request/response on the loaded flows themselves (`crate::inband`: how long a response
//!   written behind the bulk takes to arrive, socket buffers included, as the draft's
//!   HTTP/2 probes on the load-generating connections), and the senders' smoothed RTT from
//!   TCP_INFO (the kernel's view of the loaded path, without the data waiting in the
//!   sender's socket buffer). The self part of the RPM is the request/response's where the
//!   phase has it, else the TCP_INFO RTT's.
//! - `TM(x)` is the 95 % trimmed mean: the samples sorted, the highest `floor(n / 20)` left
//!   out, the mean of the rest.
//! - RPM = 60 000 / (½ · mean(TM(connect), TM(request/response)) + ½ · TM(self)): the
//!   draft's weighting (foreign probes and self probes count half each, the foreign kinds
//!   equally among themselves), without its TLS handshake, which wirerate's data plane has
//!   not. A phase without self samples (idle) takes the foreign part alone.

use serde::{Deserialize, Serialize};

/// The settings of an rpm run, stored in its spec (`spec.test.kind = "rpm"`). The phases
/// run as ordinary tests, so a server never receives this kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpmSpec {
    /// Seconds of each phase (idle, download, upload, both).
    pub phase_s: f64,
    /// Seconds at the start of each loaded phase that are loaded but not counted (ramp-up).
    pub warmup_s: f64,
    /// Foreign probes per second of each kind: TCP (each a new connection) and UDP.
    pub probe_rate_hz: f64,
    /// DSCP of the loaded flows (both sides' data sockets) and of the probes (the client's
    /// side, from the SYN on); None leaves the sockets unmarked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_dscp: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_dscp: Option<u8>,
    /// DSCP of the loaded flows' packets server → client where it differs from
    /// `load_dscp` (`--dscp UP/DOWN`): the server's data sockets carry it, the client's
    /// `load_dscp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_dscp_down: Option<u8>,
    /// DSCP of the server's answers to the probes where it differs from `probe_dscp`
    /// (`--probe-dscp UP/DOWN`); without it the answers carry `probe_dscp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_dscp_down: Option<u8>,
    /// Socket buffers of the loaded flows (`-w`, both) and of their senders alone
    /// (`--sndbuf`); None leaves the kernel's autotuning on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sndbuf_bytes: Option<u64>,
    /// In-band requests on the loaded flows (`crate::inband`), unless `--no-inband`.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub inband: bool,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// What an rpm phase asks of the server besides serving its streams (`TestSpec::rpm_server`;
/// a server that does not know the field serves the streams alone).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpmServer {
    /// The TOS byte of the server's answers to latency probes beside the test: its UDP
    /// probe replies and the bytes it echoes on a TCP probe connection. None: unmarked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_tos: Option<u8>,
    /// The server reads its egress qdisc toward the client over the test and reports it
    /// (`HostEvidence::egress_qdisc`).
    #[serde(default)]
    pub egress_qdisc: bool,
}

/// The most foreign probes per second of each kind (TCP, UDP) an rpm run may send: both
/// together stay within the draft's cap of 100.
pub const MAX_PROBE_RATE_HZ: f64 = 50.0;

impl RpmSpec {
    /// Checks the settings; the message names what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.phase_s.is_finite() && (0.5..=300.0).contains(&self.phase_s)) {
            return Err("rpm phases must be 0.5 to 300 seconds".into());
        }
        if !(self.warmup_s.is_finite() && self.warmup_s >= 0.0 && self.warmup_s < self.phase_s) {
            return Err("rpm warm-up must be at least 0 and shorter than a phase".into());
        }
        if !(self.probe_rate_hz.is_finite()
            && self.probe_rate_hz >= 1.0
            && self.probe_rate_hz <= MAX_PROBE_RATE_HZ)
        {
            return Err(format!(
                "rpm probes must be 1 to {MAX_PROBE_RATE_HZ} per second (of each kind, TCP and UDP)"
            ));
        }
        if self
            .load_dscp
            .into_iter()
            .chain(self.probe_dscp)
            .chain(self.load_dscp_down)
            .chain(self.probe_dscp_down)
            .any(|d| d > 63)
        {
            return Err("a DSCP is 0 to 63".into());
        }
        Ok(())
    }

    /// What each phase asks of the server beside its streams: its answers to the probes
    /// carry the probes' class server → client, and it reads its egress qdisc in the loaded
    /// phases.
    pub fn server_asks(&self, phase: Phase) -> RpmServer {
        RpmServer {
            probe_tos: self
                .probe_dscp_down
                .or(self.probe_dscp)
                .map(crate::dscp::tos),
            egress_qdisc: phase != Phase::Idle,
        }
    }
}

/// One latency sample: when it was taken (seconds from its phase's start) and its value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub at_s: f64,
    pub ms: f64,
}

/// The samples of one phase, by kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PhaseSamples {
    pub connect: Vec<Sample>,
    pub request: Vec<Sample>,
    pub loaded_rtt: Vec<Sample>,
    /// In-band request/response on the loaded flows (`crate::inband`).
    pub inband: Vec<Sample>,
}

impl PhaseSamples {
    /// The self samples the RPM counts: the in-band request/response where there are any,
    /// else the loaded connections' TCP_INFO RTT.
    pub fn self_samples(&self) -> &[Sample] {
        if self.inband.is_empty() {
            &self.loaded_rtt
        } else {
            &self.inband
        }
    }
}

/// The phases, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Idle,
    Download,
    Upload,
    Bidir,
}

impl Phase {
    pub const ALL: [Phase; 4] = [Phase::Idle, Phase::Download, Phase::Upload, Phase::Bidir];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Download => "download",
            Phase::Upload => "upload",
            Phase::Bidir => "both",
        }
    }
}

/// Statistics of one kind of sample over a phase, in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    pub samples: u64,
    pub min_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// The 95 % trimmed mean (the highest 5 % left out).
    pub trimmed_mean_ms: f64,
}

impl LatencyStats {
    /// None for no samples; non-finite values are left out.
    pub fn of(samples: &[Sample]) -> Option<LatencyStats> {
        let mut v = sorted(samples);
        let (&min_ms, &max_ms) = (v.first()?, v.last()?);
        let stats = LatencyStats {
            samples: v.len() as u64,
            min_ms,
            p50_ms: percentile(&v, 50.0)?,
            p90_ms: percentile(&v, 90.0)?,
            p99_ms: percentile(&v, 99.0)?,
            max_ms,
            trimmed_mean_ms: trimmed_mean_sorted(&mut v)?,
        };
        Some(stats)
    }
}

/// How far the figure can be trusted: the draft's stability idea (see [`confidence`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

/// The figures of one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    pub phase: Phase,
    pub seconds: f64,
    /// Goodput server → client and client → server; None where the phase had no such load.
    pub download_bps: Option<f64>,
    pub upload_bps: Option<f64>,
    /// Foreign probes: TCP connect time, and a request/response on the new connection.
    pub connect: Option<LatencyStats>,
    pub request: Option<LatencyStats>,
    /// In-band: the loaded connections' smoothed RTT (TCP_INFO), sampled per interval.
    pub loaded_rtt: Option<LatencyStats>,
    /// In-band: an application's request/response on the loaded connections themselves,
    /// the response queued behind the bulk (`crate::inband`); None where the phase had no
    /// load or the server does not answer in-band requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inband: Option<LatencyStats>,
    /// Foreign probes that failed (refused, timed out) or were skipped (too many in flight).
    pub probes_failed: u64,
    pub rpm: Option<f64>,
    pub confidence: Option<Confidence>,
    /// Every probe's connect time and every loaded-RTT sample as `[seconds from the phase's
    /// start, ms]`, warm-up included: latency over time and its distribution.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connect_series: Vec<[f64; 2]>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loaded_rtt_series: Vec<[f64; 2]>,
    /// Every in-band request/response as `[seconds from the phase's start, ms]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inband_series: Vec<[f64; 2]>,
    /// Median bytes written but not yet sent by the loaded senders (TCP_INFO notsent, summed
    /// over a flow's streams, per interval): the queue in the sending host's socket
    /// buffers, which the loaded RTT does not see. None where not sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_unsent_bytes: Option<u64>,
    /// Foreign UDP probes: one datagram to the server's port and one back (the full round
    /// trip); None where the server answered none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<LatencyStats>,
    /// UDP probes never answered (lost, or a server without UDP probes).
    #[serde(default)]
    pub udp_failed: u64,
    /// The delay added per direction over the test's base, from the UDP probes' stamps
    /// (`crate::owd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_way: Option<crate::owd::OneWay>,
    /// The client host's egress qdisc on the route's interface over the phase; None where
    /// not read (idle phase, no `tc`, no interface found).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qdisc: Option<crate::qdisc::PhaseQdisc>,
    /// The server host's egress qdisc toward the client over the phase (read by the server,
    /// sent in its report); None where not read (idle phase, no `tc` there, a server
    /// without the field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_qdisc: Option<crate::qdisc::PhaseQdisc>,
    /// Every UDP probe's round trip as `[seconds from the phase's start, ms]`, warm-up
    /// included: the UDP latency over time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub udp_series: Vec<[f64; 2]>,
    /// The one-way delay each counted UDP probe met above the base, as `[seconds from the
    /// phase's start, up ms, down ms]` (`crate::owd::series`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub one_way_series: Vec<[f64; 3]>,
    /// Seconds from the phase's start until its throughput was stable ([`ramp_up_s`]); the
    /// phase's latency is counted from this or the warm-up, whichever is later. None in the
    /// idle phase, or where throughput never settled (then the warm-up alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_up_s: Option<f64>,
}

/// The standing queue the load revealed, from the worst loaded phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Queueing {
    pub phase: Phase,
    /// Median connect time loaded minus idle: time spent waiting in queues.
    pub added_ms: f64,
    /// The 90th percentile loaded minus the idle median: the queue near its fullest (a
    /// tail-drop queue under TCP fills, overflows and drains again).
    #[serde(default)]
    pub added_p90_ms: f64,
    /// The queue that time implies at the phase's rate: added time × rate, in bytes.
    pub queue_bytes: u64,
    /// The rate used: the phase's faster direction.
    pub rate_bps: f64,
    /// Data waiting in the sending host's socket buffers in that phase (median) and the time
    /// it adds at the rate: a queue in the sender host, before the path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_unsent_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_ms: Option<f64>,
    /// Which way the phase's one-way delays put the queue; None without UDP probes or
    /// where neither way added [`QUEUE_NOTICE_MS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<crate::owd::QueueDirection>,
    /// The client's egress qdisc in that phase, and the time its median backlog adds at the
    /// phase's upload rate: a standing queue in the sending host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_qdisc: Option<crate::qdisc::PhaseQdisc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_queue_ms: Option<f64>,
    /// The server's egress qdisc toward the client in that phase, and the time its median
    /// backlog adds at the phase's download rate: a standing queue in the server host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_qdisc: Option<crate::qdisc::PhaseQdisc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_queue_ms: Option<f64>,
}

/// The whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpmResult {
    pub phases: Vec<PhaseResult>,
    /// The headline: the bidirectional phase's RPM (the draft loads both directions), or
    /// the lowest loaded phase's where that phase did not run.
    pub rpm: Option<f64>,
    pub confidence: Option<Confidence>,
    /// 60 000 / the idle phase's foreign trimmed mean: what the path gives without load.
    pub idle_rpm: Option<f64>,
    pub queueing: Option<Queueing>,
    /// One line: how responsive, and why.
    pub verdict: String,
    pub advice: Option<String>,
}

impl RpmResult {
    /// The phase the headline RPM comes from: both directions, or else the lowest RPM.
    pub fn headline_phase(&self) -> Option<&PhaseResult> {
        headline(&self.phases)
    }

    /// Median connect time of the headline phase, ms: latency under load, as `compare`
    /// compares it.
    pub fn loaded_p50_ms(&self) -> Option<f64> {
        self.headline_phase()?.connect.as_ref().map(|c| c.p50_ms)
    }

    /// Median in-band request/response of the headline phase, ms, as `compare` compares it.
    pub fn inband_p50_ms(&self) -> Option<f64> {
        self.headline_phase()?.inband.as_ref().map(|c| c.p50_ms)
    }
}

fn headline(phases: &[PhaseResult]) -> Option<&PhaseResult> {
    let loaded = || {
        phases
            .iter()
            .filter(|p| p.phase != Phase::Idle && p.rpm.is_some())
    };
    loaded()
        .find(|p| p.phase == Phase::Bidir)
        .or_else(|| loaded().min_by(|a, b| a.rpm.unwrap_or(0.0).total_cmp(&b.rpm.unwrap_or(0.0))))
}

fn sorted(samples: &[Sample]) -> Vec<f64> {
    let mut v: Vec<f64> = samples
        .iter()
        .map(|s| s.ms)
        .filter(|x| x.is_finite())
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// Nearest-rank percentile of sorted values: the smallest value with at least p % of the
/// values at or below it.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=100.0).contains(&p) {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

fn trimmed_mean_sorted(sorted: &mut [f64]) -> Option<f64> {
    let keep = sorted.len() - sorted.len() / 20;
    let kept = sorted.get(..keep).filter(|k| !k.is_empty())?;
    Some(kept.iter().sum::<f64>() / kept.len() as f64)
}

/// The 95 % trimmed mean: the highest `floor(n / 20)` values left out.
pub fn trimmed_mean(samples: &[Sample]) -> Option<f64> {
    trimmed_mean_sorted(&mut sorted(samples))
}

/// RPM from the trimmed means (ms): foreign kinds averaged, then foreign and self half each.
pub fn rpm(connect_ms: Option<f64>, request_ms: Option<f64>, self_ms: Option<f64>) -> Option<f64> {
    let foreign: Vec<f64> = [connect_ms, request_ms].into_iter().flatten().collect();
    let foreign = (!foreign.is_empty()).then(|| foreign.iter().sum::<f64>() / foreign.len() as f64);
    let round_trip_ms = match (foreign, self_ms) {
        (Some(f), Some(s)) => 0.5 * f + 0.5 * s,
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => return None,
    };
    (round_trip_ms > 0.0).then(|| 60_000.0 / round_trip_ms)
}

/// The RPM of the samples taken before `until_s`.
fn rpm_until(s: &PhaseSamples, until_s: f64) -> Option<f64> {
    let before =
        |v: &[Sample]| -> Vec<Sample> { v.iter().filter(|x| x.at_s <= until_s).copied().collect() };
    rpm(
        trimmed_mean(&before(&s.connect)),
        trimmed_mean(&before(&s.request)),
        trimmed_mean(&before(s.self_samples())),
    )
}

/// Samples a phase needs before its figure can be more than Low.
pub const MIN_SAMPLES_FOR_CONFIDENCE: usize = 20;

/// The draft's stability rule, on one phase: the RPM is computed over the samples up to the
/// end of each of `windows` equal steps from `from_s` to `to_s` (a moving, growing window);
/// the last four of those figures must agree. High: their standard deviation is within 5 %
/// of their mean; Medium: within 15 %; Low: more, fewer than four steps, or fewer than
/// [`MIN_SAMPLES_FOR_CONFIDENCE`] foreign samples.
pub fn confidence(s: &PhaseSamples, from_s: f64, to_s: f64, windows: usize) -> Confidence {
    let foreign = s.connect.len().max(s.request.len());
    if windows < 4
        || foreign < MIN_SAMPLES_FOR_CONFIDENCE
        || to_s.partial_cmp(&from_s) != Some(std::cmp::Ordering::Greater)
    {
        return Confidence::Low;
    }
    let step = (to_s - from_s) / windows as f64;
    let figures: Vec<f64> = (windows - 3..=windows)
        .filter_map(|k| rpm_until(s, from_s + step * k as f64))
        .collect();
    if figures.len() < 4 {
        return Confidence::Low;
    }
    let mean = figures.iter().sum::<f64>() / 4.0;
    let var = figures.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 3.0;
    let rel = var.sqrt() / mean;
    if rel <= 0.05 {
        Confidence::High
    } else if rel <= 0.15 {
        Confidence::Medium
    } else {
        Confidence::Low
    }
}

/// The figures of one phase from its samples and throughput. Samples before `warmup_s`
/// are left out (the load was still ramping up).
pub fn phase_result(
    phase: Phase,
    seconds: f64,
    warmup_s: f64,
    samples: &PhaseSamples,
    rates: (Option<f64>, Option<f64>),
    probes_failed: u64,
) -> PhaseResult {
    let counted = |v: &[Sample]| -> Vec<Sample> {
        v.iter().filter(|x| x.at_s >= warmup_s).copied().collect()
    };
    let s = PhaseSamples {
        connect: counted(&samples.connect),
        request: counted(&samples.request),
        loaded_rtt: counted(&samples.loaded_rtt),
        inband: counted(&samples.inband),
    };
    let (connect, request, loaded_rtt, inband) = (
        LatencyStats::of(&s.connect),
        LatencyStats::of(&s.request),
        LatencyStats::of(&s.loaded_rtt),
        LatencyStats::of(&s.inband),
    );
    let tm = |x: &Option<LatencyStats>| x.as_ref().map(|x| x.trimmed_mean_ms);
    let own = if inband.is_some() {
        &inband
    } else {
        &loaded_rtt
    };
    let rpm = rpm(tm(&connect), tm(&request), tm(own));
    // one step per second of the counted time, at least four
    let windows = ((seconds - warmup_s).floor() as usize).max(4);
    PhaseResult {
        phase,
        seconds,
        download_bps: rates.0,
        upload_bps: rates.1,
        connect,
        request,
        loaded_rtt,
        inband,
        probes_failed,
        confidence: rpm.map(|_| confidence(&s, warmup_s, seconds, windows)),
        rpm,
        connect_series: series(&samples.connect),
        loaded_rtt_series: series(&samples.loaded_rtt),
        inband_series: series(&samples.inband),
        sender_unsent_bytes: None,
        udp: None,
        udp_failed: 0,
        one_way: None,
        qdisc: None,
        server_qdisc: None,
        udp_series: Vec::new(),
        one_way_series: Vec::new(),
        ramp_up_s: None,
    }
}

/// Intervals a moving average of throughput spans, and how many consecutive averages must
/// agree, for [`ramp_up_s`].
pub const RAMP_WINDOW: usize = 4;
/// How far each of those averages may lie from their mean: 5 %.
pub const RAMP_TOLERANCE: f64 = 0.05;

/// When a loaded phase's throughput became stable, as the draft's saturation rule has it: the
/// end of the first interval at which the moving averages of goodput over the last
/// [`RAMP_WINDOW`] intervals, at it and at the [`RAMP_WINDOW`] − 1 intervals before it, all
/// lie within [`RAMP_TOLERANCE`] of their mean. `goodput`: each interval's end (seconds from
/// the phase's start) and its goodput over every flow, in time order. None: never stable.
pub fn ramp_up_s(goodput: &[(f64, f64)]) -> Option<f64> {
    let k = RAMP_WINDOW;
    let averages: Vec<f64> = goodput
        .windows(k)
        .map(|w| w.iter().map(|x| x.1).sum::<f64>() / k as f64)
        .collect();
    // averages[j] spans intervals j to j + k - 1
    let j = averages.windows(k).position(|m| {
        let mean = m.iter().sum::<f64>() / k as f64;
        mean > 0.0 && m.iter().all(|x| (x - mean).abs() <= RAMP_TOLERANCE * mean)
    })?;
    goodput.get(j + 2 * k - 2).map(|x| x.0)
}

/// The median of byte counts (the lower middle of an even count); None for none.
pub fn median_bytes(mut v: Vec<u64>) -> Option<u64> {
    v.sort_unstable();
    v.get(v.len().checked_sub(1)? / 2).copied()
}

/// Samples as `[at_s, ms]` pairs, rounded to the microsecond, in time order.
pub fn series(v: &[Sample]) -> Vec<[f64; 2]> {
    let round = |x: f64| (x * 1e3).round() / 1e3;
    let mut out: Vec<[f64; 2]> = v
        .iter()
        .filter(|s| s.at_s.is_finite() && s.ms.is_finite())
        .map(|s| [round(s.at_s), round(s.ms)])
        .collect();
    out.sort_by(|a, b| a[0].total_cmp(&b[0]));
    out
}

/// Queueing delay above which the verdict names a queue: less is within what the probes'
/// own scheduling and a busy host add.
pub const QUEUE_NOTICE_MS: f64 = 5.0;

/// Joins the phases: the headline RPM, the queue the load revealed, and the verdict.
pub fn summarize(phases: Vec<PhaseResult>) -> RpmResult {
    let idle = phases.iter().find(|p| p.phase == Phase::Idle);
    let idle_rpm = idle.and_then(|p| {
        let tm = |x: &Option<LatencyStats>| x.as_ref().map(|x| x.trimmed_mean_ms);
        rpm(tm(&p.connect), tm(&p.request), None)
    });
    let idle_ms = idle.and_then(|p| p.connect.as_ref()).map(|c| c.p50_ms);
    let loaded = || phases.iter().filter(|p| p.phase != Phase::Idle);
    let head = headline(&phases);
    let queueing = idle_ms.and_then(|idle_ms| {
        loaded()
            .filter_map(|p| {
                let c = p.connect.as_ref()?;
                let added_ms = c.p50_ms - idle_ms;
                let rate_bps = p
                    .download_bps
                    .unwrap_or(0.0)
                    .max(p.upload_bps.unwrap_or(0.0));
                let unsent = p.sender_unsent_bytes;
                Some(Queueing {
                    phase: p.phase,
                    added_ms: added_ms.max(0.0),
                    added_p90_ms: (c.p90_ms - idle_ms).max(0.0),
                    queue_bytes: queue_bytes(added_ms, rate_bps),
                    rate_bps,
                    sender_unsent_bytes: unsent,
                    sender_ms: unsent
                        .filter(|_| rate_bps > 0.0)
                        .map(|b| b as f64 * 8.0 / rate_bps * 1000.0),
                    direction: p.one_way.as_ref().and_then(|o| o.queued(QUEUE_NOTICE_MS)),
                    host_qdisc: p.qdisc.clone(),
                    host_queue_ms: p
                        .qdisc
                        .as_ref()
                        .and_then(|q| q.standing_ms(p.upload_bps.unwrap_or(0.0))),
                    server_qdisc: p.server_qdisc.clone(),
                    server_queue_ms: p
                        .server_qdisc
                        .as_ref()
                        .and_then(|q| q.standing_ms(p.download_bps.unwrap_or(0.0))),
                })
            })
            .max_by(|a, b| a.added_ms.total_cmp(&b.added_ms))
    });
    let (mut verdict, advice) = verdict(head.and_then(|p| p.rpm), idle_ms, queueing.as_ref());
    // what an application on the loaded connections met: the queueing phase's in-band wait
    let waited = queueing
        .as_ref()
        .and_then(|q| phases.iter().find(|p| p.phase == q.phase))
        .or(head)
        .and_then(|p| Some((p.phase, p.inband.as_ref()?.p50_ms)));
    if let Some((phase, ms)) = waited {
        verdict.push_str(&format!(
            "; on the loaded connections themselves an application's request waited {ms:.1} ms \
             for its answer under {} load (in-band p50)",
            phase.name()
        ));
    }
    RpmResult {
        rpm: head.and_then(|p| p.rpm),
        confidence: head.and_then(|p| p.confidence),
        idle_rpm,
        queueing,
        verdict,
        advice,
        phases,
    }
}

/// The bytes a queue holds that delays by `added_ms` at `rate_bps` (0 for no delay).
pub fn queue_bytes(added_ms: f64, rate_bps: f64) -> u64 {
    if !(added_ms > 0.0 && rate_bps > 0.0) {
        return 0;
    }
    (added_ms / 1000.0 * rate_bps / 8.0).round() as u64
}

/// From this RPM on, responsiveness is rated high.
pub const HIGH_RPM: f64 = 1000.0;

/// The draft's rating words, by RPM: below 300 low, to 1000 medium, above high (the
/// thresholds Apple's networkQuality uses for its Low/Medium/High responsiveness).
pub fn rating(rpm: f64) -> &'static str {
    if rpm < 300.0 {
        "low"
    } else if rpm < HIGH_RPM {
        "medium"
    } else {
        "high"
    }
}

/// Where a phase's queue builds: in a host's own qdisc where one holds a standing backlog,
/// else where its one-way delays put it, or else the egress of the loaded direction's sender
/// side of the bottleneck.
fn where_queued(q: &Queueing) -> String {
    let client = q.host_qdisc.as_ref().filter(|_| host_queued(q));
    let server = q.server_qdisc.as_ref().filter(|_| server_queued(q));
    let (client_rate, server_rate) = (
        backlog_rate(q.host_queue_ms, q.host_qdisc.as_ref()),
        backlog_rate(q.server_queue_ms, q.server_qdisc.as_ref()),
    );
    match (client, server) {
        (Some(c), Some(s)) => {
            return format!(
                "in both hosts' qdiscs, standing backlogs: the client's {}; the server's {}",
                c.words(client_rate),
                s.words(server_rate)
            )
        }
        (Some(c), None) => return format!("in the sending host: {}", c.words(client_rate)),
        (None, Some(s)) => {
            return format!(
                "in the server's qdisc, a standing backlog: {}",
                s.words(server_rate)
            )
        }
        (None, None) => {}
    }
    let mut hosts = String::new();
    if let Some(h) = &q.host_qdisc {
        hosts.push_str(&format!(" (client egress: {})", h.words(client_rate)));
    }
    if let Some(h) = &q.server_qdisc {
        hosts.push_str(&format!(" (server egress: {})", h.words(server_rate)));
    }
    if let Some(d) = q.direction {
        return format!("{}, by the one-way delays{hosts}", d.words());
    }
    let path = match q.phase {
        Phase::Download => "on the path server to client",
        Phase::Upload => "on the path client to server",
        Phase::Bidir | Phase::Idle => "on the path, one way or both",
    };
    format!("{path}{hosts}")
}

/// The rate a qdisc's standing time was taken at (its median backlog over that time); 0
/// where unknown.
fn backlog_rate(ms: Option<f64>, q: Option<&crate::qdisc::PhaseQdisc>) -> f64 {
    match (ms, q.and_then(|h| h.median_backlog_bytes)) {
        (Some(ms), Some(b)) if ms > 0.0 => b as f64 * 8.0 / (ms / 1000.0),
        _ => 0.0,
    }
}

/// A standing backlog in the client's own egress qdisc: the queue is in the sending host.
pub fn host_queued(q: &Queueing) -> bool {
    q.host_queue_ms.is_some_and(|ms| ms >= QUEUE_NOTICE_MS)
}

/// A standing backlog in the server's egress qdisc toward the client: the queue is in the
/// server host, before the path.
pub fn server_queued(q: &Queueing) -> bool {
    q.server_queue_ms.is_some_and(|ms| ms >= QUEUE_NOTICE_MS)
}

/// What waits in the sending host, when it is worth a mention (over 5 ms at the rate).
fn sender_part(q: &Queueing) -> String {
    match (q.sender_unsent_bytes, q.sender_ms) {
        (Some(b), Some(ms)) if ms >= QUEUE_NOTICE_MS => format!(
            "; besides, {} waits unsent in the senders' socket buffers ({ms:.0} ms more for \
             an application's next write)",
            crate::units::format_bytes(b)
        ),
        _ => String::new(),
    }
}

/// Data waiting in the senders above this long is worth its own advice.
pub const SENDER_NOTICE_MS: f64 = 20.0;

fn verdict(
    rpm: Option<f64>,
    idle_ms: Option<f64>,
    q: Option<&Queueing>,
) -> (String, Option<String>) {
    let Some(rpm) = rpm else {
        return ("no loaded phase gave a figure".into(), None);
    };
    let head = format!("responsiveness {} ({:.0} RPM)", rating(rpm), rpm);
    let (text, path_queue) = match (q, idle_ms) {
        (Some(q), Some(idle)) if q.added_ms >= QUEUE_NOTICE_MS => (
            format!(
                "{head}: under {} load round trips grow by {:.1} ms over idle ({idle:.1} ms; p90 {:.1} ms more): a queue of about {} at {} {}{}",
                q.phase.name(),
                q.added_ms,
                q.added_p90_ms,
                crate::units::format_bytes(q.queue_bytes),
                crate::units::format_bps(q.rate_bps),
                where_queued(q),
                sender_part(q),
            ),
            true,
        ),
        _ => (
            format!("{head}: round trips hold under load (no standing queue)"),
            false,
        ),
    };
    let mut advice = Vec::new();
    // a queue that still leaves the path highly responsive needs no change
    let in_a_host = q.is_some_and(|q| host_queued(q) || server_queued(q));
    if path_queue && rpm < HIGH_RPM && !in_a_host {
        advice.push(
            "shorten the queue at the bottleneck: an AQM (fq_codel or cake) there, a smaller \
             buffer, or senders that pace (fq with bbr)",
        );
    }
    if q.is_some_and(host_queued) {
        advice.push(
            "the queue is in this host's qdisc: an AQM there (fq_codel or cake) or fq with \
             senders that pace (bbr), a smaller txqueuelen or qdisc limit, TCP_NOTSENT_LOWAT",
        );
    }
    if q.is_some_and(server_queued) {
        advice.push(
            "the queue is in the server's qdisc: an AQM there (fq_codel or cake) or fq with \
             senders that pace (bbr), a smaller txqueuelen or qdisc limit",
        );
    }
    if q.and_then(|q| q.sender_ms)
        .is_some_and(|ms| ms >= SENDER_NOTICE_MS)
    {
        advice.push(
            "keep data in the application until the socket can send it: TCP_NOTSENT_LOWAT \
             (net.ipv4.tcp_notsent_lowat, e.g. 16 KiB) bounds what waits unsent",
        );
    }
    (text, (!advice.is_empty()).then(|| advice.join("; ")))
}

#[cfg(test)]
#[path = "rpm_tests.rs"]
mod tests;
