//! The thresholds, and the assembly of the verdict: every rule scores its class 0–1 with
//! its evidence and advice; the rules that explain one another are reconciled; the best
//! is the verdict, the rest are ranked candidates. `docs/diagnosis.md` gives the source
//! of every threshold.

use super::view::{self, Host};
use super::{cc, cpu, loss, queue, tcp, traffic, udp, waits};
use super::{Bottleneck, Candidate, Confidence, Diagnosis, EvidenceItem};
use crate::spec::Protocol;
use crate::RunResult;

/// Goodput at this share of the wire model or more: the wire is the limit.
pub const WIRE_EFFICIENCY: f64 = 0.97;
/// Near the wire: from this share the wire is still the verdict (at medium confidence),
/// and light loss is taken as the sender finding the link's rate (our own margin).
pub const NEAR_WIRE_EFFICIENCY: f64 = 0.93;
/// A stream thread at this share of one core or more is saturated (% of a core).
pub const THREAD_SATURATED_PERCENT: f64 = 90.0;
/// ... and from this share on, the evidence is as strong as it gets.
pub const THREAD_FULL_PERCENT: f64 = 97.0;
/// The sending host's busiest core at this share or more is saturated.
pub const CORE_SATURATED_PERCENT: f64 = 95.0;
/// A thread that wanted a CPU (ran + waited) this share of its window...
pub const STARVED_DEMAND_PERCENT: f64 = 80.0;
/// ... and waited at least this share of it, was starved of CPU.
pub const STARVED_WAIT_PERCENT: f64 = 20.0;
/// The cgroup was throttled for at least this share of the window.
pub const THROTTLED_PERCENT: f64 = 10.0;
/// A thread whose run share reaches this fraction of a sub-core quota used it all.
pub const QUOTA_USED_RATIO: f64 = 0.9;
/// A receive core this busy (% of the core)...
pub const SOFTIRQ_CORE_BUSY_PERCENT: f64 = 90.0;
/// ... with at least this much of it in softirq...
pub const SOFTIRQ_SHARE_PERCENT: f64 = 50.0;
/// ... while another core is below this, is a receive-interrupt bottleneck.
pub const IDLE_CORE_PERCENT: f64 = 50.0;
/// NDT's BUFFER_LIMITED: limited by the receiver's window or the sender's buffer for this
/// share of the sender's busy time (tcp_chrono) or more.
pub const BUFFER_LIMITED_PERCENT: f64 = 15.0;
/// Real loss rate (real retransmits ÷ segments sent) that counts as loss.
pub const LOSS_RATE: f64 = 1e-4;
/// ... or this many real retransmits per second (NDT's heuristic).
pub const RETRANSMITS_PER_S: f64 = 2.0;
/// When the Mathis bound exceeds the goodput this many times, the loss was too rare to
/// be what held the rate.
pub const MATHIS_SLACK: f64 = 3.0;
/// A congestion control that does not take loss as congestion (bbr) moving this many
/// times the Mathis bound shows the loss did not set its rate. Measured in the lab (50
/// Mbit/s, 20 ms, 0.5 % loss): cubic moved 1.2× its bound, bbr 4.4×.
pub const NOT_LOSS_BOUND: f64 = 2.0;
/// A sender's smoothed RTT this many times its minimum ...
pub const QUEUE_RTT_RATIO: f64 = 2.0;
/// ... and at least this much above it, ms, is a queue that filled on the path (a deep
/// queue at 20 Mbit/s in the lab: 409.6 ms against 10.2 ms; bbr on it: 15.8 against 10.2).
pub const QUEUE_MIN_MS: f64 = 5.0;
/// Real loss of one segment in a hundred: heavy enough to hold any sender back, so the
/// Mathis slack above is not applied (our own margin).
pub const HEAVY_LOSS: f64 = 0.01;
/// Both ends on one host (loopback) and the host busy over all cores from this share:
/// the CPU is the limit even when no single thread is (our own margin, like the core rule).
pub const SHARED_HOST_BUSY_PERCENT: f64 = 90.0;
/// ... or from this share when a stream thread waited for a CPU at least
/// [`STARVED_WAIT_PERCENT`] of its window: the cores were contended, if not all full
/// (measured: ends apart on a loaded 2-core host, 88-89 % busy, waited 9-48 %).
pub const SHARED_HOST_BUSY_WAITED_PERCENT: f64 = 75.0;
/// Two ends on one host take turns when each runs under this share of a core (measured:
/// see docs/diagnosis.md, "Where the thresholds come from") ...
pub const TURN_RUN_PERCENT: f64 = 70.0;
/// ... each sleeps in its socket calls at least this share of the window (score 0.7) ...
pub const TURN_ASLEEP_PERCENT: f64 = 20.0;
/// ... (score 1 from this share) ...
pub const TURN_ASLEEP_FULL: f64 = 35.0;
/// ... and the host is at least this busy over all cores: not idle, so the ends had work
/// to do and waited on each other, not on a quiet network.
pub const TURN_HOST_BUSY_PERCENT: f64 = 50.0;
/// Two ends pinned to one CPU take it in turns: each one's wait for it is the other's run.
/// They are its main users from this share of it between them (score 0.7; 1 from
/// [`ONE_CORE_FULL`]): below, other work held the core more than the test did.
pub const ONE_CORE_SHARE_PERCENT: f64 = 50.0;
pub const ONE_CORE_FULL: f64 = 80.0;
/// An interface that carried more than this many times the test's bytes (beyond
/// [`PACKET_HEADER_ALLOWANCE`] a packet) carried other traffic too.
pub const OTHER_TRAFFIC_RATIO: f64 = 2.0;
/// Bytes of headers allowed per packet on an interface (Ethernet, IPv6 and TCP with
/// options come to under 100): tiny writes must not look like other traffic.
pub const PACKET_HEADER_ALLOWANCE: u64 = 128;
/// The busiest-core rule counts only when the sending thread itself ran at least this
/// share of a core (our own margin): otherwise the busy core is someone else's work.
pub const CORE_RULE_THREAD_PERCENT: f64 = 50.0;
/// The congestion control's own limit: a sender busy (data in flight) at least this share
/// of its window ...
pub const CC_BUSY_PERCENT: f64 = 90.0;
/// ... that still reached less than this share of the wire model (our own margins).
pub const CC_EFFICIENCY: f64 = 0.5;
/// Share of retransmits reported as duplicates (DSACK) that makes them spurious.
pub const SPURIOUS_SHARE: f64 = 0.5;
/// Paced runs that reach this share of their target rate are limited by the pacing.
pub const PACED_SHARE: f64 = 0.95;
/// Paced runs at their target that still lost datagrams (over [`UDP_LOSS_PERCENT`]):
/// the pacing stays a candidate, the place of the loss is the verdict.
pub const PACED_WITH_LOSS_SCORE: f64 = 0.55;
/// Sends refused with ENOBUFS, as a share of send attempts (percent), that held the rate.
pub const ENOBUFS_PERCENT: f64 = 1.0;
/// UDP loss above this (percent) asks where the datagrams were lost.
pub const UDP_LOSS_PERCENT: f64 = 0.1;
/// A place that accounts for this share of the lost datagrams is where they were lost.
pub const UDP_LOCATION_SHARE: f64 = 0.5;
/// Tests shorter than this (counted seconds) are thin evidence.
pub const MIN_SECONDS: f64 = 1.0;
/// A candidate at or above this score crossed its threshold.
pub const SUPPORT_SCORE: f64 = 0.5;
/// A verdict at or above this score, alone above [`SUPPORT_SCORE`], is decisive.
pub const DECISIVE_SCORE: f64 = 0.8;
/// The score given to a class another explains (a symptom), or one that stands only
/// because nothing else does: a candidate, never a verdict.
pub const SYMPTOM_SCORE: f64 = 0.4;

/// What one rule found: its class, how strongly the evidence supports it (0–1), the
/// verdict's wording after the class, the figures, and what to do.
#[derive(Debug, Clone)]
pub(super) struct Finding {
    pub bottleneck: Bottleneck,
    pub score: f64,
    pub headline: String,
    pub evidence: Vec<EvidenceItem>,
    pub advice: Vec<String>,
}

impl Finding {
    pub(super) fn new(bottleneck: Bottleneck, score: f64, headline: String) -> Finding {
        Finding {
            bottleneck,
            score: clean(score).clamp(0.0, 1.0),
            headline,
            evidence: Vec::new(),
            advice: Vec::new(),
        }
    }
}

/// Everything the rules found, and the notes that explain figures without being the limit.
#[derive(Debug, Default)]
pub(super) struct Analysis {
    pub findings: Vec<Finding>,
    pub notes: Vec<String>,
}

impl Analysis {
    pub(super) fn add(&mut self, f: Option<Finding>) {
        if let Some(f) = f {
            self.findings.push(f);
        }
    }

    pub(super) fn score(&self, b: Bottleneck) -> f64 {
        self.findings
            .iter()
            .filter(|f| f.bottleneck == b)
            .map(|f| f.score)
            .fold(0.0, f64::max)
    }

    pub(super) fn cap(&mut self, b: Bottleneck, to: f64) {
        for f in self.findings.iter_mut().filter(|f| f.bottleneck == b) {
            f.score = f.score.min(to);
        }
    }

    pub(super) fn note(&mut self, s: String) {
        if !self.notes.contains(&s) {
            self.notes.push(s);
        }
    }
}

/// A value and its unit, and the threshold it was held to.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fig {
    pub value: f64,
    pub unit: &'static str,
    pub threshold: Option<f64>,
}

/// One evidence line.
pub(super) fn item(
    supports: Bottleneck,
    side: &str,
    what: &str,
    fig: Fig,
    source: &str,
    text: String,
) -> EvidenceItem {
    EvidenceItem {
        supports,
        side: side.into(),
        what: what.into(),
        value: clean(fig.value),
        unit: fig.unit.into(),
        threshold: fig.threshold.map(clean),
        source: source.into(),
        text,
    }
}

/// JSON has no NaN: a figure that is not a number is never emitted as one.
fn clean(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        0.0
    }
}

/// The score of a figure held to a threshold, growing with the figure: 0.7 at the
/// threshold, 1 at `full`; near misses (from three quarters of the threshold) get
/// 0.2–0.5 so they are listed as candidates but never decide.
pub(super) fn ramp(value: f64, threshold: f64, full: f64) -> f64 {
    if !(value.is_finite() && threshold > 0.0) {
        return 0.0;
    }
    if value >= threshold {
        let span = (full - threshold).max(f64::EPSILON);
        0.7 + 0.3 * ((value - threshold) / span).clamp(0.0, 1.0)
    } else if value >= 0.75 * threshold {
        0.2 + 0.3 * (value - 0.75 * threshold) / (0.25 * threshold)
    } else {
        0.0
    }
}

/// The verdict of one run.
pub fn diagnose(r: &RunResult) -> Diagnosis {
    let mut a = Analysis::default();
    a.add(tcp::wire(r));
    a.add(cpu::sender(r));
    a.add(cpu::receiver(r));
    a.add(cpu::host(r));
    a.add(waits::turn_taking(r));
    a.add(cpu::softirq(r));
    match r.spec.protocol {
        Protocol::Tcp => {
            a.add(tcp::receiver_window(r));
            a.add(tcp::sender_buffer(r));
            a.add(cc::limited(r));
            loss::loss(r, &mut a);
        }
        Protocol::Udp => udp::loss(r, &mut a),
    }
    udp::pacing(r, &mut a);
    reconcile(&mut a);
    waits::on_one_core(r, &mut a);
    waits::note(r, &mut a);
    traffic::note(r, &mut a);
    queue::note(r, &mut a);
    finish(r, a)
}

/// Classes that explain one another: a starved receiver fills its buffer, so the window
/// is the symptom; a saturated sender's retransmits did not set its rate; DSACKed
/// retransmits are a candidate only when nothing else explains the rate.
fn reconcile(a: &mut Analysis) {
    let receiver = a.score(Bottleneck::ReceiverCpu);
    if receiver >= SUPPORT_SCORE {
        for (b, what) in [
            (
                Bottleneck::ReceiverWindow,
                "the sender waited on the receiver's window",
            ),
            (
                Bottleneck::UdpReceiverBuffer,
                "datagrams overflowed the receiver's socket buffer",
            ),
        ] {
            if a.score(b) >= SUPPORT_SCORE {
                a.cap(b, SYMPTOM_SCORE);
                a.note(format!(
                    "{what} because the receiving thread could not keep up: the buffer \
                     fills when the application does not drain it, so the window is the \
                     symptom and the receiver's CPU the cause"
                ));
            }
        }
    }
    // a window or a buffer that held the sender makes the ends wait on each other: the
    // turns are its symptom
    let held = [Bottleneck::ReceiverWindow, Bottleneck::SenderBuffer]
        .into_iter()
        .find(|&b| a.score(b) >= SUPPORT_SCORE);
    if let (Some(b), true) = (held, a.score(Bottleneck::TurnTaking) >= SUPPORT_SCORE) {
        a.cap(Bottleneck::TurnTaking, SYMPTOM_SCORE);
        a.note(format!(
            "the two ends took turns because {} held the sender: each waited on the other \
             through it",
            b.words()
        ));
    }
    if a.score(Bottleneck::SenderCpu) >= SUPPORT_SCORE
        && a.score(Bottleneck::Congestion) >= SUPPORT_SCORE
    {
        a.cap(Bottleneck::Congestion, SYMPTOM_SCORE);
        a.note(
            "there was real loss, but the sender's CPU was saturated: loss did not set the rate"
                .into(),
        );
    }
    // retransmits taken for loss where a CPU was the limit: the reordering came with the
    // rate, it did not set it (two busy cores of one kernel reorder a flow too)
    let cpu = [
        Bottleneck::SenderCpu,
        Bottleneck::ReceiverCpu,
        Bottleneck::HostCpu,
    ]
    .into_iter()
    .any(|b| a.score(b) >= SUPPORT_SCORE);
    if cpu {
        a.cap(Bottleneck::Reordering, SYMPTOM_SCORE);
    }
    let others = a
        .findings
        .iter()
        .filter(|f| f.bottleneck != Bottleneck::Reordering)
        .map(|f| f.score)
        .fold(0.0, f64::max);
    // reordering that made the sender back off stands on its own figures; the note-only kind
    // goes when anything else explains the rate
    if others >= SUPPORT_SCORE {
        a.findings
            .retain(|f| f.bottleneck != Bottleneck::Reordering || f.score >= SUPPORT_SCORE);
    }
}

fn finish(r: &RunResult, mut a: Analysis) -> Diagnosis {
    a.findings.sort_by(|x, y| y.score.total_cmp(&x.score));
    let (unseen, thin) = unseen(r, &mut a);
    let candidates: Vec<Candidate> = a
        .findings
        .iter()
        .filter(|f| f.score > 0.0)
        .map(|f| Candidate {
            bottleneck: f.bottleneck,
            score: (f.score * 100.0).round() / 100.0,
        })
        .collect();
    let supported: Vec<&Finding> = a
        .findings
        .iter()
        .filter(|f| f.score >= SUPPORT_SCORE)
        .collect();
    let Some(top) = supported.first() else {
        return undetermined(a.findings, a.notes, candidates, unseen);
    };
    let runner = supported.get(1);
    let confidence = if thin {
        Confidence::Low
    } else if top.score >= DECISIVE_SCORE && runner.is_none() {
        Confidence::High
    } else {
        Confidence::Medium
    };
    let verdict = match runner {
        Some(n) => format!(
            "{}, with {} close behind: {}",
            top.bottleneck.words(),
            n.bottleneck.words(),
            top.headline
        ),
        None => format!("{}: {}", top.bottleneck.words(), top.headline),
    };
    let mut advice = top.advice.clone();
    advice.truncate(3);
    Diagnosis {
        bottleneck: top.bottleneck,
        confidence,
        verdict,
        evidence: supported.iter().flat_map(|f| f.evidence.clone()).collect(),
        advice,
        candidates,
        notes: a.notes,
        unseen,
    }
}

/// Nothing crossed a threshold: say so, with the figures that were looked at.
fn undetermined(
    findings: Vec<Finding>,
    notes: Vec<String>,
    candidates: Vec<Candidate>,
    unseen: Vec<String>,
) -> Diagnosis {
    // each rule's main figure, the one its threshold was held to
    let evidence: Vec<EvidenceItem> = findings
        .into_iter()
        .filter_map(|f| f.evidence.into_iter().next())
        .collect();
    Diagnosis {
        bottleneck: Bottleneck::Unknown,
        confidence: Confidence::Low,
        verdict: format!(
            "{}: no figure reached its threshold",
            Bottleneck::Unknown.words()
        ),
        evidence,
        advice: Vec::new(),
        candidates,
        notes,
        unseen,
    }
}

/// What could not be seen, one line each, and whether that makes the evidence thin.
fn unseen(r: &RunResult, a: &mut Analysis) -> (Vec<String>, bool) {
    let mut lines: Vec<String> = Vec::new();
    let mut thin = false;
    let mut add = |s: String| {
        if !lines.contains(&s) {
            lines.push(s);
        }
    };
    for host in [Host::Client, Host::Server] {
        let n = host.name();
        match host.evidence(r) {
            None => {
                thin = true;
                add(format!(
                    "{n}: no kernel counters or per-core CPU (a peer that does not report \
                     them, such as iperf3)"
                ));
            }
            Some(e) => {
                if e.cores.is_empty() {
                    add(format!("{n}: per-core CPU not available"));
                }
                let table = match r.spec.protocol {
                    Protocol::Tcp => ("TcpExt", e.tcp_ext.is_none()),
                    Protocol::Udp => ("Udp", e.udp.is_none()),
                };
                if table.1 {
                    add(format!("{n}: {} counters not available", table.0));
                }
            }
        }
        if host.cpu(r).is_none() {
            add(format!("{n}: CPU time not available"));
        }
    }
    if r.streams.is_empty() {
        thin = true;
        add("no per-stream figures".into());
    } else if r
        .streams
        .iter()
        .all(|s| s.sender.run_s.is_none() && s.receiver.run_s.is_none())
    {
        add("the stream threads' scheduler run and wait times are not available".into());
    }
    if r.spec.protocol == Protocol::Tcp {
        thin |= tcp_info_unseen(r, &mut add);
    }
    if r.summary.seconds.is_nan() || r.summary.seconds < MIN_SECONDS {
        thin = true;
        a.note(format!(
            "the test counted {} s, less than {MIN_SECONDS} s: too short for a firm verdict",
            if r.summary.seconds.is_finite() {
                format!("{:.2}", r.summary.seconds)
            } else {
                "?".into()
            }
        ));
    }
    (lines, thin)
}

/// Missing TCP_INFO, per side; true when the sender's is missing (thin evidence).
fn tcp_info_unseen(r: &RunResult, add: &mut impl FnMut(String)) -> bool {
    let mut thin = false;
    for &flow in view::flows(r) {
        let (tx, rx) = (Host::sending(flow).name(), Host::receiving(flow).name());
        for s in view::streams_of(r, flow) {
            match &s.tcp_sender {
                None => {
                    thin = true;
                    add(format!("{tx}: sender TCP_INFO not available"));
                }
                Some(t) if t.busy_time_us.is_none() => {
                    thin = true;
                    add(format!(
                        "{tx}: sender TCP_INFO has no busy, rwnd-limited and \
                         sndbuf-limited times (kernel before 4.10)"
                    ));
                }
                Some(t) if t.dsack_dups.is_none() && t.retransmits_total.unwrap_or(0) > 0 => {
                    add(format!(
                        "{tx}: sender TCP_INFO has no DSACK count (older kernel): spurious \
                         retransmits are told from the host's TcpExt counters"
                    ));
                }
                Some(_) => {}
            }
            if s.tcp_receiver.is_none() {
                add(format!("{rx}: receiver TCP_INFO not available"));
            }
        }
    }
    thin
}
