//! The metrics of an rpm probe (`/probe?kind=rpm`): responsiveness in round trips per
//! minute, headline and per phase, with the draft's confidence as an `_info` metric; the
//! latency of each phase by kind and quantile in seconds; each phase's goodput in bytes per
//! second; the standing queue the load revealed, in bytes and seconds.

use wirerate_core::qdisc::PhaseQdisc;
use wirerate_core::rpm::{LatencyStats, PhaseResult, RpmResult};

use crate::expo::{Exposition, Kind};

/// Writes the figures of an rpm result.
pub fn write(out: &mut Exposition, r: &RpmResult) {
    let g = Kind::Gauge;
    out.single(
        "wirerate_rpm",
        g,
        "Responsiveness under load: round trips per minute of the bidirectional phase (the \
         IETF responsiveness draft's figure).",
        r.rpm,
    );
    if let Some(c) = r.confidence {
        out.info(
            "wirerate_rpm_confidence_info",
            "How far the headline RPM can be trusted: the draft's stability rule (low, medium, \
             high).",
            &[("confidence", &crate::probe::word(&c))],
        );
    }
    out.single(
        "wirerate_rpm_idle",
        g,
        "Round trips per minute without load (the idle phase's probes).",
        r.idle_rpm,
    );
    let mut per = out.family(
        "wirerate_rpm_phase",
        g,
        "Round trips per minute of each phase (idle, download, upload, both).",
    );
    for p in &r.phases {
        if let Some(v) = p.rpm {
            per.sample(&[("phase", p.phase.name())], v);
        }
    }
    write_latency(out, &r.phases);
    write_one_way(out, &r.phases);
    write_rates(out, &r.phases);
    let mut failed = out.family(
        "wirerate_rpm_probes_failed",
        g,
        "Latency probes of each phase that failed or were skipped.",
    );
    for p in &r.phases {
        failed.sample(&[("phase", p.phase.name())], p.probes_failed as f64);
    }
    let q = r.queueing.as_ref();
    out.single(
        "wirerate_rpm_queue_bytes",
        g,
        "The standing queue the load implies: connect time added under load times the \
         phase's rate, in bytes.",
        q.map(|q| q.queue_bytes as f64),
    );
    out.single(
        "wirerate_rpm_queueing_seconds",
        g,
        "Median connect time loaded minus idle: time spent waiting in queues.",
        q.map(|q| q.added_ms / 1000.0),
    );
    let mut unsent = out.family(
        "wirerate_rpm_sender_unsent_bytes",
        g,
        "Median bytes the loaded senders had written but not yet sent (the sending host's \
         socket buffers), per phase.",
    );
    for p in &r.phases {
        if let Some(b) = p.sender_unsent_bytes {
            unsent.sample(&[("phase", p.phase.name())], b as f64);
        }
    }
    write_qdisc(out, &r.phases);
}

/// Each end's egress qdisc per loaded phase: its backlog (p50 and peak over the phase's
/// readings) and the packets it dropped. Nothing for a device without a qdisc (noqueue), or
/// for a server that did not read its own.
fn write_qdisc(out: &mut Exposition, phases: &[PhaseResult]) {
    type QdiscOf = fn(&PhaseResult) -> Option<&PhaseQdisc>;
    let ends: [(&str, &str, QdiscOf); 2] = [
        ("client", "a standing queue in the sending host", |p| {
            p.qdisc.as_ref()
        }),
        (
            "server",
            "where a download's queue stands in the server's host",
            |p| p.server_qdisc.as_ref(),
        ),
    ];
    for (end, meaning, of) in ends {
        let queued = || {
            phases
                .iter()
                .filter_map(move |p| Some((p.phase.name(), of(p).filter(|q| q.queued)?)))
        };
        let (name, help) = (
            format!("wirerate_rpm_{end}_qdisc_backlog_bytes"),
            format!(
                "The {end}'s egress qdisc backlog toward its peer per loaded phase, by \
                 statistic (p50, peak over readings every 0.2 s): {meaning}."
            ),
        );
        let mut backlog = out.family(&name, Kind::Gauge, &help);
        for (phase, q) in queued() {
            for (stat, b) in [
                ("p50", q.median_backlog_bytes),
                ("peak", q.peak_backlog_bytes),
            ] {
                if let Some(b) = b {
                    backlog.sample(&[("phase", phase), ("stat", stat)], b as f64);
                }
            }
        }
        let (name, help) = (
            format!("wirerate_rpm_{end}_qdisc_drops"),
            format!("Packets the {end}'s egress qdisc dropped over each loaded phase."),
        );
        let mut drops = out.family(&name, Kind::Gauge, &help);
        for (phase, q) in queued() {
            if let Some(d) = q.drops {
                drops.sample(&[("phase", phase)], d as f64);
            }
        }
    }
}

/// `wirerate_latency_seconds{phase,kind,stat}`: a gauge may not carry a `quantile` label
/// (that is a summary's), so the statistic is named in `stat`.
fn write_latency(out: &mut Exposition, phases: &[PhaseResult]) {
    let mut lat = out.family(
        "wirerate_latency_seconds",
        Kind::Gauge,
        "Latency of each phase by kind (connect: a new connection's TCP handshake; request: a \
         1-byte request/response on it; udp: a UDP probe's round trip; loaded_rtt: the \
         loaded connections' smoothed RTT; inband: a request/response on the loaded \
         connections themselves, the response behind the bulk) and \
         statistic (min, p50, p90, p99, max, and trimmed_mean: the 95 % trimmed mean RPM is \
         computed from).",
    );
    for p in phases {
        let kinds: [(&str, Option<&LatencyStats>); 5] = [
            ("connect", p.connect.as_ref()),
            ("request", p.request.as_ref()),
            ("udp", p.udp.as_ref()),
            ("loaded_rtt", p.loaded_rtt.as_ref()),
            ("inband", p.inband.as_ref()),
        ];
        for (kind, stats) in kinds {
            let Some(s) = stats else { continue };
            for (stat, ms) in [
                ("min", s.min_ms),
                ("p50", s.p50_ms),
                ("p90", s.p90_ms),
                ("p99", s.p99_ms),
                ("max", s.max_ms),
                ("trimmed_mean", s.trimmed_mean_ms),
            ] {
                let labels = [("phase", p.phase.name()), ("kind", kind), ("stat", stat)];
                lat.sample(&labels, ms / 1000.0);
            }
        }
    }
}

/// `wirerate_rpm_one_way_added_seconds{phase,direction,stat}`: the delay each direction
/// added over the run's base (UDP probes' stamps).
fn write_one_way(out: &mut Exposition, phases: &[PhaseResult]) {
    let mut ow = out.family(
        "wirerate_rpm_one_way_added_seconds",
        Kind::Gauge,
        "Delay added per phase and direction (up: client to server; down: server to client) \
         over the run's base, from the UDP probes' one-way stamps (stat: p50, p90).",
    );
    for p in phases {
        let Some(w) = &p.one_way else { continue };
        for (dir, stat, ms) in [
            ("up", "p50", w.up_p50_ms),
            ("up", "p90", w.up_p90_ms),
            ("down", "p50", w.down_p50_ms),
            ("down", "p90", w.down_p90_ms),
        ] {
            let labels = [
                ("phase", p.phase.name()),
                ("direction", dir),
                ("stat", stat),
            ];
            ow.sample(&labels, ms / 1000.0);
        }
    }
}

fn write_rates(out: &mut Exposition, phases: &[PhaseResult]) {
    let mut rate = out.family(
        "wirerate_rpm_goodput_bytes_per_second",
        Kind::Gauge,
        "Goodput of each loaded phase by direction (download: server to client; upload: client \
         to server).",
    );
    for p in phases {
        for (dir, bps) in [("download", p.download_bps), ("upload", p.upload_bps)] {
            if let Some(bps) = bps {
                rate.sample(&[("phase", p.phase.name()), ("direction", dir)], bps / 8.0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirerate_core::rpm::{phase_result, summarize, Phase, PhaseSamples, Sample};

    fn value(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .map(|v| v.parse().unwrap())
    }

    /// Every 0.1 s for 2 s, `ms` each: connect and request alike, the loaded RTT in the
    /// loaded phases.
    fn phase(p: Phase, ms: f64, rate_bps: Option<f64>) -> PhaseResult {
        let v: Vec<Sample> = (0..20)
            .map(|i| Sample {
                at_s: f64::from(i) * 0.1,
                ms,
            })
            .collect();
        let samples = PhaseSamples {
            connect: v.clone(),
            request: v.clone(),
            loaded_rtt: if p == Phase::Idle { vec![] } else { v },
            inband: vec![],
        };
        let rates = match p {
            Phase::Download => (rate_bps, None),
            Phase::Upload => (None, rate_bps),
            _ => (rate_bps, rate_bps),
        };
        phase_result(p, 2.0, 0.0, &samples, rates, 0)
    }

    #[test]
    fn rpm_latency_and_rates_are_written_in_base_units() {
        let mut upload = phase(Phase::Upload, 40.0, Some(8e6));
        upload.one_way = wirerate_core::owd::OneWay::of(&[(30.0, 0.5)]);
        upload.udp = LatencyStats::of(&[Sample {
            at_s: 1.0,
            ms: 41.0,
        }]);
        let tc = |kind: &str, backlog, drops| wirerate_core::qdisc::QdiscReading {
            kind: kind.into(),
            backlog_bytes: backlog,
            backlog_packets: 1,
            drops,
            requeues: 0,
            overlimits: 0,
        };
        let qd = |kind: &str| {
            let (before, after) = (tc(kind, 0, 5), tc(kind, 0, 12));
            wirerate_core::qdisc::PhaseQdisc::of("eth0", &before, &[tc(kind, 4096, 6)], &after)
        };
        upload.qdisc = Some(qd("fq_codel"));
        let mut download = phase(Phase::Download, 50.0, Some(8e6));
        download.qdisc = Some(qd("noqueue"));
        download.server_qdisc = Some(qd("tbf"));
        download.inband = LatencyStats::of(&[Sample {
            at_s: 2.0,
            ms: 250.0,
        }]);
        let r = summarize(vec![
            phase(Phase::Idle, 10.0, None),
            download,
            upload,
            phase(Phase::Bidir, 100.0, Some(8e6)),
        ]);
        let mut e = Exposition::new();
        write(&mut e, &r);
        let t = e.finish();
        // 100 ms each way of counting: 600 round trips a minute
        assert_eq!(value(&t, "wirerate_rpm"), Some(600.0), "{t}");
        assert_eq!(value(&t, "wirerate_rpm_idle"), Some(6000.0), "{t}");
        assert_eq!(
            value(&t, "wirerate_rpm_phase{phase=\"download\"}"),
            Some(1200.0)
        );
        assert_eq!(
            value(
                &t,
                "wirerate_latency_seconds{phase=\"both\",kind=\"connect\",stat=\"p50\"}"
            ),
            Some(0.1)
        );
        assert!(t.contains("stat=\"trimmed_mean\""), "{t}");
        assert_eq!(
            value(
                &t,
                "wirerate_latency_seconds{phase=\"upload\",kind=\"udp\",stat=\"p50\"}"
            ),
            Some(0.041)
        );
        assert_eq!(
            value(
                &t,
                "wirerate_rpm_one_way_added_seconds{phase=\"upload\",direction=\"up\",stat=\"p90\"}"
            ),
            Some(0.03)
        );
        assert!(!t.contains("one_way_added_seconds{phase=\"idle\""), "{t}");
        assert_eq!(
            value(
                &t,
                "wirerate_rpm_client_qdisc_backlog_bytes{phase=\"upload\",stat=\"peak\"}"
            ),
            Some(4096.0)
        );
        assert_eq!(
            value(&t, "wirerate_rpm_client_qdisc_drops{phase=\"upload\"}"),
            Some(7.0)
        );
        // a device without a qdisc exports nothing, not zeros
        assert!(!t.contains("client_qdisc_drops{phase=\"download\""), "{t}");
        // the server's own qdisc, where it read one
        assert_eq!(
            value(
                &t,
                "wirerate_rpm_server_qdisc_backlog_bytes{phase=\"download\",stat=\"peak\"}"
            ),
            Some(4096.0)
        );
        assert!(!t.contains("server_qdisc_drops{phase=\"upload\""), "{t}");
        assert_eq!(
            value(
                &t,
                "wirerate_latency_seconds{phase=\"download\",kind=\"inband\",stat=\"p50\"}"
            ),
            Some(0.25)
        );
        // the idle phase has no loaded connections
        assert!(!t.contains("phase=\"idle\",kind=\"loaded_rtt\""), "{t}");
        assert_eq!(
            value(
                &t,
                "wirerate_rpm_goodput_bytes_per_second{phase=\"download\",direction=\"download\"}"
            ),
            Some(1e6)
        );
        assert!(
            !t.contains("phase=\"download\",direction=\"upload\""),
            "{t}"
        );
        // the worst loaded phase: 90 ms added at 1 MB/s
        assert_eq!(value(&t, "wirerate_rpm_queueing_seconds"), Some(0.09));
        assert_eq!(value(&t, "wirerate_rpm_queue_bytes"), Some(90_000.0));
        assert!(
            !t.contains("quantile"),
            "a gauge has no quantile label: {t}"
        );
        assert!(
            t.contains("wirerate_rpm_confidence_info{confidence=\""),
            "{t}"
        );
    }
}
