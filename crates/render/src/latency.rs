//! Reports of request/response tests and sweeps: the text report, interval lines, and the
//! sweep's CSV and NetPIPE (`np.out`) formats. Figures come from the result model as they are.

use std::fmt::Write;

use wirerate_core::latency::RttStats;
use wirerate_core::result::Interval;
use wirerate_core::rr::{RrInterval, RrSummary};
use wirerate_core::spec::{End, TestKind};
use wirerate_core::sweep::SweepResult;
use wirerate_core::text::count;
use wirerate_core::units::{format_bps, format_bytes};
use wirerate_core::{RunResult, TestSpec};

/// The line before an rr test or a sweep starts.
pub fn header(spec: &TestSpec, target: &str) -> Option<String> {
    match &spec.test {
        TestKind::Stream | TestKind::Rpm(_) => None,
        TestKind::Rr(rr) => {
            let end = match spec.end {
                End::Blocks { blocks } => format!("{blocks} transactions per flow"),
                End::Time { seconds } => format!("{seconds} s"),
                End::Bytes { bytes } => format_bytes(bytes),
            };
            let load = rr.rate_tps.map_or_else(
                || "closed loop".to_string(),
                |r| format!("open loop at {r} transactions/s"),
            );
            Some(format!(
                "wirerate rr: {} to {target}, {} B request, {} B response, {}, burst {}, {load}, {end}",
                rr.mode.name().to_uppercase(),
                rr.request_bytes,
                rr.response_bytes,
                count(u64::from(spec.parallel), "flow"),
                rr.burst
            ))
        }
        TestKind::Sweep(sw) => Some(format!(
            "wirerate sweep: {} to {target}, {} to {}, {} of about {} s per size{}",
            if sw.stream { "stream" } else { "ping-pong" },
            format_bytes(sw.min_bytes),
            format_bytes(sw.max_bytes),
            count(u64::from(sw.trials), "trial"),
            sw.point_time_s,
            spec.congestion
                .as_ref()
                .map_or_else(String::new, |c| format!(", congestion control {c}"))
        )),
    }
}

/// The column header of rr interval lines.
pub fn rr_interval_header() -> String {
    format!(
        "{:>15} {:>12} {:>12} {:>10} {:>10} {:>10}",
        "interval", "trans", "trans/s", "p50 µs", "p99 µs", "max µs"
    )
}

/// One rr interval line.
pub fn rr_interval(iv: &Interval, rr: &RrInterval) -> String {
    let (p50, p99, max) = rr.rtt.map_or((f64::NAN, f64::NAN, f64::NAN), |r| {
        (r.rtt_p50_us, r.rtt_p99_us, r.rtt_max_us)
    });
    format!(
        "{:>15} {:>12} {:>12.0} {:>10.1} {:>10.1} {:>10.1}",
        format!("{:.2}-{:.2} s", iv.start_s, iv.end_s),
        rr.transactions,
        rr.tps,
        p50,
        p99,
        max
    )
}

fn rtt_lines(out: &mut String, what: &str, r: &RttStats) {
    let _ = writeln!(
        out,
        "  {what:<23}min {:.1}  mean {:.1}  p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}  stddev {:.1}",
        r.rtt_min_us,
        r.rtt_mean_us,
        r.rtt_p50_us,
        r.rtt_p90_us,
        r.rtt_p99_us,
        r.rtt_p999_us,
        r.rtt_max_us,
        r.rtt_stddev_us
    );
}

/// The summary of an rr test.
pub fn rr_summary(r: &RunResult, rr: &RrSummary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Summary ({} rr)", rr.mode.name());
    let _ = writeln!(
        out,
        "  transactions           {} in {:.2} s: {:.1} per second (server sent {})",
        rr.transactions, rr.seconds, rr.tps, rr.server_transactions
    );
    match (rr.rtt.as_ref(), rr.open_loop.as_ref()) {
        (Some(s), Some(o)) => {
            // open loop: what the schedule asked, what the client's own sends did, and the
            // round trips timed both ways
            rtt_lines(&mut out, "round trip (µs)", s);
            let _ = writeln!(
                out,
                "    timed from each request's scheduled send (corrected for the client's lateness)"
            );
            rtt_lines(&mut out, "  from actual send", &o.uncorrected);
            let _ = writeln!(
                out,
                "  send lateness (µs)     p50 {:.1}  p99 {:.1}  max {:.1}  mean {:.1}",
                o.send_lateness_p50_us,
                o.send_lateness_p99_us,
                o.send_lateness_max_us,
                o.send_lateness_mean_us
            );
        }
        (Some(s), None) => rtt_lines(&mut out, "round trip (µs)", s),
        (None, _) => {
            let _ = writeln!(out, "  round trip             none completed");
        }
    }
    if rr.connections > 0 {
        // unlike a bare connect/request/response/close loop, each connection first names
        // its test: the server must tell it from other clients'
        let _ = writeln!(
            out,
            "  connections            {} (each request rides with wirerate's data hello)",
            rr.connections
        );
    }
    if rr.mode == wirerate_core::rr::RrMode::Udp {
        let _ = writeln!(
            out,
            "  lost                   {} ({:.3} % of requests)",
            rr.lost, rr.loss_percent
        );
    }
    let cpu = |c: Option<f64>| c.map_or_else(|| "n/a".into(), |v| format!("{v:.1} µs"));
    let _ = writeln!(
        out,
        "  CPU per transaction    client {}, server {} (each wirerate process)",
        cpu(rr.cpu_us_per_transaction_local),
        cpu(rr.cpu_us_per_transaction_remote)
    );
    let pct = |c: Option<&wirerate_core::result::CpuSide>| {
        c.and_then(|c| c.system_percent)
            .map_or_else(|| "n/a".into(), |p| format!("{p:.1} %"))
    };
    let _ = writeln!(
        out,
        "  host CPU               client {}, server {}",
        pct(r.summary.cpu.local.as_ref()),
        pct(r.summary.cpu.remote.as_ref())
    );
    if rr.flows.len() > 1 {
        for f in &rr.flows {
            let _ = writeln!(
                out,
                "  flow {:<4}              {} transactions, {:.1}/s, p50 {:.1} µs, p99 {:.1} µs",
                f.id,
                f.transactions,
                f.tps,
                f.rtt.map_or(f64::NAN, |s| s.rtt_p50_us),
                f.rtt.map_or(f64::NAN, |s| s.rtt_p99_us)
            );
        }
    }
    out
}

/// The summary of a sweep: one row per size, then the fit.
pub fn sweep_summary(sw: &SweepResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>10} {:>14} {:>14} {:>14} {:>12} {:>12} {:>10}",
        "bytes", "mean", "min", "max", "one-way µs", "best µs", "messages"
    );
    for p in &sw.points {
        let _ = writeln!(
            out,
            "{:>10} {:>14} {:>14} {:>14} {:>12.2} {:>12.2} {:>10}",
            p.bytes,
            format_bps(p.bps_mean),
            format_bps(p.bps_min),
            format_bps(p.bps_max),
            p.one_way_mean_us,
            p.one_way_min_us,
            p.messages
        );
    }
    out.push_str(&sweep_fit(sw));
    if sw.stopped_early {
        let _ = writeln!(
            out,
            "(stopped early: a trial took over 40 × the point time)"
        );
    }
    out
}

/// The fit line of a sweep: Hockney's figures, or why there are none.
pub fn sweep_fit(sw: &SweepResult) -> String {
    match &sw.fit {
        Some(f) => {
            let aside = match f.set_aside {
                0 => String::new(),
                1 => ", 1 size set aside as disturbed".into(),
                n => format!(", {n} sizes set aside as disturbed"),
            };
            format!(
                "Hockney fit (best trials): r∞ {}, n½ {:.0} B, t0 {:.2} µs (one-way), R² {:.4}{aside}\n",
                format_bps(f.r_inf_bps),
                f.n_half_bytes,
                f.t0_us,
                f.r_squared
            )
        }
        None => {
            let why = sw.fit_note.as_deref().unwrap_or("not enough sizes to fit");
            format!("Hockney fit: none, {why}\n")
        }
    }
}

/// The sweep as CSV, one row per size, with a header row.
pub fn sweep_csv(sw: &SweepResult) -> String {
    let mut out = String::from(
        "bytes,trials,messages,bps_mean,bps_min,bps_max,one_way_mean_us,one_way_min_us\n",
    );
    for p in &sw.points {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{}",
            p.bytes,
            p.trials,
            p.messages,
            p.bps_mean,
            p.bps_min,
            p.bps_max,
            p.one_way_mean_us,
            p.one_way_min_us
        );
    }
    out
}

/// The sweep in NetPIPE's `np.out` columns: bytes, throughput in Mbit/s (NetPIPE's 2^20
/// bits), and the one-way time in seconds of the best trial, as NetPIPE keeps it, so
/// existing plots and scripts read it.
pub fn sweep_netpipe(sw: &SweepResult) -> String {
    let mut out = String::new();
    for p in &sw.points {
        let t = p.one_way_min_us / 1e6;
        let mbps = if t > 0.0 {
            p.bytes as f64 * 8.0 / t / 1_048_576.0
        } else {
            0.0
        };
        let _ = writeln!(out, "{:>10} {:>14.6} {:>14.9}", p.bytes, mbps, t);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirerate_core::sweep::SweepPoint;

    fn sweep() -> SweepResult {
        let pts = [1u64, 2, 3, 4, 6, 8]
            .iter()
            .map(|&b| SweepPoint::from_trials(b, 30, &[3e-6 + b as f64 / 1e6]).unwrap())
            .collect();
        SweepResult::new(false, pts, false)
    }

    #[test]
    fn csv_and_netpipe_have_a_row_per_size() {
        let s = sweep();
        let csv = sweep_csv(&s);
        assert_eq!(csv.lines().count(), 7);
        assert!(csv.starts_with("bytes,trials,"));
        let np = sweep_netpipe(&s);
        let first: Vec<f64> = np
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        assert_eq!(first[0], 1.0);
        // 8 bits in 4 µs, in NetPIPE's Mbit/s
        assert!((first[1] - 8.0 / 4e-6 / 1_048_576.0).abs() < 1e-3);
        assert!((first[2] - 4e-6).abs() < 1e-12);
        assert!(sweep_summary(&s).contains("Hockney fit (best trials): r∞"));
    }

    #[test]
    fn the_sweep_header_names_the_congestion_control_asked() {
        let mut spec = TestSpec {
            test: TestKind::Sweep(Default::default()),
            ..Default::default()
        };
        let plain = header(&spec, "h").unwrap();
        assert!(!plain.contains("congestion"), "{plain}");
        spec.congestion = Some("cubic".into());
        let asked = header(&spec, "h").unwrap();
        assert!(
            asked.ends_with(" per size, congestion control cubic"),
            "{asked}"
        );
    }

    #[test]
    fn the_fit_line_says_how_many_sizes_it_set_aside() {
        assert!(!sweep_fit(&sweep()).contains("set aside"));
        // the same curve with one size at ten times its time
        let pts = [1u64, 2, 3, 4, 6, 8, 12, 16]
            .iter()
            .map(|&b| {
                let t = 3e-6 + b as f64 / 1e6;
                let t = if b == 6 { 10.0 * t } else { t };
                SweepPoint::from_trials(b, 30, &[t]).unwrap()
            })
            .collect();
        let line = sweep_fit(&SweepResult::new(false, pts, false));
        assert!(
            line.ends_with(", 1 size set aside as disturbed\n"),
            "{line}"
        );
    }
}
