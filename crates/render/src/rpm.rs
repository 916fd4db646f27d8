//! The human report of `wirerate rpm`: a line per phase as it ends, then a table of the
//! phases, the RPM with its confidence, the queue and the verdict.

use std::fmt::Write as _;

use wirerate_core::rpm::{Confidence, LatencyStats, PhaseResult, RpmResult};
use wirerate_core::units::format_bps;
use wirerate_core::RunResult;

fn rate(bps: Option<f64>) -> String {
    bps.map_or_else(|| "-".into(), format_bps)
}

fn ms(x: f64) -> String {
    if x < 10.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.1}")
    }
}

/// "p50/p90/p99" in ms, or "-".
fn trio(s: Option<&LatencyStats>) -> String {
    s.map_or_else(
        || "-".into(),
        |s| format!("{}/{}/{}", ms(s.p50_ms), ms(s.p90_ms), ms(s.p99_ms)),
    )
}

fn confidence(c: Option<Confidence>) -> &'static str {
    match c {
        Some(Confidence::High) => "high",
        Some(Confidence::Medium) => "medium",
        Some(Confidence::Low) => "low",
        None => "-",
    }
}

fn rpm(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |x| format!("{x:.0}"))
}

/// "p50/p90" of one direction's added delay in ms, or "-".
fn duo(x: Option<(f64, f64)>) -> String {
    x.map_or_else(|| "-".into(), |(a, b)| format!("{}/{}", ms(a), ms(b)))
}

/// The UDP probes' round trips and the one-way delay each direction added over the base.
fn one_way_table(out: &mut String, r: &RpmResult) {
    let _ = writeln!(
        out,
        "\n{:<8} {:>20} {:>20} {:>20} {:>6}",
        "phase", "udp rtt p50/90/99", "added up p50/90", "added down p50/90", "lost"
    );
    for p in &r.phases {
        let w = p.one_way.as_ref();
        let _ = writeln!(
            out,
            "{:<8} {:>20} {:>20} {:>20} {:>6}",
            p.phase.name(),
            trio(p.udp.as_ref()),
            duo(w.map(|w| (w.up_p50_ms, w.up_p90_ms))),
            duo(w.map(|w| (w.down_p50_ms, w.down_p90_ms))),
            p.udp_failed,
        );
    }
}

/// A host's egress qdisc per loaded phase (`host`: client or server; `of` picks its
/// figures): backlog median/peak, drops, requeues, overlimits; "no qdisc" for a device
/// without one. Nothing where no phase read it.
fn qdisc_table(
    out: &mut String,
    r: &RpmResult,
    host: &str,
    of: fn(&PhaseResult) -> Option<&wirerate_core::qdisc::PhaseQdisc>,
) {
    let read: Vec<_> = r
        .phases
        .iter()
        .filter_map(|p| Some((p.phase, of(p)?)))
        .collect();
    let Some((_, first)) = read.first() else {
        return;
    };
    let _ = writeln!(out, "\n{host} egress qdisc on {}:", first.interface);
    let count = |x: Option<u64>| x.map_or_else(|| "-".into(), |x| x.to_string());
    let bytes = |x: Option<u64>| x.map_or_else(|| "-".into(), wirerate_core::units::format_bytes);
    for (phase, q) in read {
        if !q.queued {
            let _ = writeln!(out, "{:<8} no qdisc ({})", phase.name(), q.kind);
            continue;
        }
        let _ = writeln!(
            out,
            "{:<8} {} backlog p50 {} peak {}  drops {}  requeues {}  overlimits {}",
            phase.name(),
            q.kind,
            bytes(q.median_backlog_bytes),
            bytes(q.peak_backlog_bytes),
            count(q.drops),
            count(q.requeues),
            count(q.overlimits),
        );
    }
}

/// One line as a phase ends.
pub fn phase_line(p: &PhaseResult) -> String {
    let ramp = p
        .ramp_up_s
        .map_or_else(String::new, |s| format!("  ramp-up {s:.1} s"));
    format!(
        "{:<8} down {:>12}  up {:>12}  connect p50 {} ms  in-band p50 {} ms  udp p50 {} ms  RPM {} ({} confidence){ramp}",
        p.phase.name(),
        rate(p.download_bps),
        rate(p.upload_bps),
        p.connect
            .as_ref()
            .map_or_else(|| "-".into(), |c| ms(c.p50_ms)),
        p.inband.as_ref().map_or_else(|| "-".into(), |c| ms(c.p50_ms)),
        p.udp.as_ref().map_or_else(|| "-".into(), |c| ms(c.p50_ms)),
        rpm(p.rpm),
        confidence(p.confidence),
    )
}

/// The table of phases and the verdict; empty for a result without an `rpm` section.
pub fn summary(r: &RunResult) -> String {
    r.rpm.as_deref().map_or_else(String::new, table)
}

fn table(r: &RpmResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n{:<8} {:>12} {:>12} {:>20} {:>20} {:>20} {:>20} {:>7} {:>7} {:>6}",
        "phase",
        "download",
        "upload",
        "connect p50/90/99",
        "request p50/90/99",
        "in-band p50/90/99",
        "tcp rtt p50/90/99",
        "RPM",
        "conf.",
        "failed"
    );
    for p in &r.phases {
        let _ = writeln!(
            out,
            "{:<8} {:>12} {:>12} {:>20} {:>20} {:>20} {:>20} {:>7} {:>7} {:>6}",
            p.phase.name(),
            rate(p.download_bps),
            rate(p.upload_bps),
            trio(p.connect.as_ref()),
            trio(p.request.as_ref()),
            trio(p.inband.as_ref()),
            trio(p.loaded_rtt.as_ref()),
            rpm(p.rpm),
            confidence(p.confidence),
            p.probes_failed,
        );
    }
    one_way_table(&mut out, r);
    qdisc_table(&mut out, r, "client", |p| p.qdisc.as_ref());
    qdisc_table(&mut out, r, "server", |p| p.server_qdisc.as_ref());
    let _ = writeln!(out, "(latencies in ms)");
    let _ = writeln!(
        out,
        "RPM: {} ({} confidence); idle {}",
        rpm(r.rpm),
        confidence(r.confidence),
        rpm(r.idle_rpm)
    );
    let _ = writeln!(out, "Verdict: {}", r.verdict);
    if let Some(a) = &r.advice {
        let _ = writeln!(out, "Advice: {a}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirerate_core::rpm::{phase_result, summarize, Phase, PhaseSamples, Sample};

    fn steady(ms: f64) -> Vec<Sample> {
        (0..40)
            .map(|i| Sample {
                at_s: f64::from(i) * 0.1,
                ms,
            })
            .collect()
    }

    #[test]
    fn table_has_a_row_per_phase_and_the_verdict() {
        let idle = PhaseSamples {
            connect: steady(1.0),
            request: steady(1.5),
            loaded_rtt: vec![],
            inband: vec![],
        };
        let loaded = PhaseSamples {
            connect: steady(101.0),
            request: steady(101.0),
            loaded_rtt: steady(100.0),
            inband: steady(120.0),
        };
        let mut both = phase_result(Phase::Bidir, 4.0, 0.0, &loaded, (Some(1e7), Some(2e7)), 3);
        both.udp = wirerate_core::rpm::LatencyStats::of(&steady(99.0));
        both.udp_failed = 2;
        both.one_way = wirerate_core::owd::OneWay::of(&[(95.0, 0.5), (97.0, 1.5)]);
        let tc = |backlog, drops| wirerate_core::qdisc::QdiscReading {
            kind: "fq_codel".into(),
            backlog_bytes: backlog,
            backlog_packets: 1,
            drops,
            requeues: 0,
            overlimits: 0,
        };
        both.qdisc = Some(wirerate_core::qdisc::PhaseQdisc::of(
            "eth0",
            &tc(0, 5),
            &[tc(2048, 5), tc(4096, 6)],
            &tc(0, 12),
        ));
        // the server's: 1 000 B at 10 Mbit/s is under a millisecond, no standing queue
        both.server_qdisc = Some(wirerate_core::qdisc::PhaseQdisc::of(
            "wr0",
            &tc(0, 0),
            &[tc(1000, 0)],
            &tc(0, 1),
        ));
        both.ramp_up_s = Some(1.3);
        assert!(
            phase_line(&both).ends_with("ramp-up 1.3 s"),
            "{}",
            phase_line(&both)
        );
        let r = summarize(vec![
            phase_result(Phase::Idle, 4.0, 0.0, &idle, (None, None), 0),
            both,
        ]);
        let t = table(&r);
        // the UDP round trips, the added delay each way (p50/p90 of two: the lower, the
        // higher), the unanswered UDP probes; the idle phase had none
        let row = t
            .lines()
            .filter(|l| l.starts_with("both"))
            .nth(1)
            .unwrap_or_else(|| panic!("no one-way row: {t}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cells,
            ["both", "99.0/99.0/99.0", "95.0/97.0", "0.50/1.50", "2"],
            "{t}"
        );
        assert!(t.contains("upstream (client to server)"), "{t}");
        assert!(t.contains("idle"), "{t}");
        assert!(t.contains("1.00/1.00/1.00"), "{t}");
        assert!(t.contains("both"), "{t}");
        assert!(t.contains("101.0/101.0/101.0"), "{t}");
        // the in-band request/response beside the TCP_INFO RTT, and in the RPM's self part:
        // 60 000 / (0.5 * 101 + 0.5 * 120) = 543
        let row: Vec<&str> = t
            .lines()
            .find(|l| l.starts_with("both"))
            .map(|l| l.split_whitespace().collect())
            .unwrap_or_default();
        assert_eq!(
            row.get(7..9),
            Some(&["120.0/120.0/120.0", "100.0/100.0/100.0"][..]),
            "{t}"
        );
        assert!(t.contains("RPM: 543 (high confidence)"), "{t}");
        assert!(t.contains("Verdict: responsiveness medium"), "{t}");
        assert!(t.contains("Advice:"), "{t}");
        assert!(t.contains("client egress qdisc on eth0:"), "{t}");
        assert!(
            t.contains("both     fq_codel backlog p50 2.00 KiB peak 4.00 KiB  drops 7"),
            "{t}"
        );
        assert!(t.contains("server egress qdisc on wr0:"), "{t}");
        assert!(
            t.contains("(server egress: wr0's fq_codel qdisc holds"),
            "{t}"
        );
    }
}
