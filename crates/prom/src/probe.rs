//! The metrics of one probe: whether it succeeded, how long it took, and what the test
//! measured, in base units (bytes, seconds; bits as bytes), ratios 0–1, and the facts
//! (protocol, direction, the diagnosis' verdict) as `_info` metrics. A figure the result
//! does not have (RTT of a UDP test) is left out, never written as zero.

use serde::Serialize;
use wirerate_core::result::CpuSide;
use wirerate_core::RunResult;

use crate::expo::{Exposition, Kind};

/// Writes a probe's metrics: `result` is None when the test did not run or failed before
/// it measured anything.
pub fn write(out: &mut Exposition, result: Option<&RunResult>, success: bool, duration_s: f64) {
    out.single(
        "wirerate_probe_success",
        Kind::Gauge,
        "Whether the probe's test ran to its end without error (1) or not (0).",
        Some(if success { 1.0 } else { 0.0 }),
    );
    out.single(
        "wirerate_probe_duration_seconds",
        Kind::Gauge,
        "How long the probe took, connecting and reporting included.",
        Some(duration_s),
    );
    if let Some(r) = result {
        // an rpm probe's figures are its phases': the last phase's test alone would mislead
        match &r.rpm {
            Some(rpm) => crate::rpm::write(out, rpm),
            None => write_result(out, r),
        }
    }
}

fn write_result(out: &mut Exposition, r: &RunResult) {
    let s = &r.summary;
    let g = Kind::Gauge;
    out.single(
        "wirerate_goodput_bytes_per_second",
        g,
        "Bytes the receiving application got per second of the receivers' window (goodput).",
        Some(s.goodput_bps / 8.0),
    );
    let mut flows = out.family(
        "wirerate_flow_goodput_bytes_per_second",
        g,
        "Goodput of each direction of a bidirectional test.",
    );
    for f in &s.flows {
        flows.sample(&[("flow", &word(&f.flow))], f.goodput_bps / 8.0);
    }
    out.single(
        "wirerate_sender_bytes_per_second",
        g,
        "Bytes the senders wrote per second of the senders' window.",
        Some(s.sender_bps / 8.0),
    );
    out.single(
        "wirerate_sent_bytes",
        g,
        "Bytes the senders wrote in the probe's test (after the omitted warm-up).",
        Some(s.sender_bytes as f64),
    );
    out.single(
        "wirerate_received_bytes",
        g,
        "Bytes the receivers got in the probe's test (after the omitted warm-up).",
        Some(s.bytes as f64),
    );
    out.single(
        "wirerate_test_window_seconds",
        g,
        "The receivers' measuring window of the probe's test.",
        Some(s.seconds),
    );
    let tcp = s.tcp.as_ref();
    out.single(
        "wirerate_tcp_retransmitted_segments",
        g,
        "Segments the TCP senders retransmitted in the probe's test.",
        tcp.and_then(|t| t.retransmits).map(|n| n as f64),
    );
    out.single(
        "wirerate_tcp_rtt_seconds",
        g,
        "Mean of the TCP senders' smoothed round-trip times.",
        tcp.and_then(|t| t.rtt_us).map(|us| us / 1e6),
    );
    let udp = s.udp.as_ref();
    out.single(
        "wirerate_udp_loss_ratio",
        g,
        "Share of the UDP datagrams sent that did not arrive, 0 to 1.",
        udp.map(|u| u.loss_percent / 100.0),
    );
    out.single(
        "wirerate_udp_jitter_seconds",
        g,
        "RFC 3550 interarrival jitter of the UDP streams, their mean.",
        udp.and_then(|u| u.jitter_ms).map(|ms| ms / 1000.0),
    );
    out.single(
        "wirerate_udp_lost_datagrams",
        g,
        "UDP datagrams sent that did not arrive in the probe's test.",
        udp.map(|u| u.lost as f64),
    );
    write_cpu(out, r);
    out.single(
        "wirerate_wire_efficiency_ratio",
        g,
        "Goodput as a share of what the wire model says the link can carry, 0 to 1 (above 1 \
         only where the link's rate is wrong).",
        s.wire.efficiency,
    );
    out.single(
        "wirerate_link_bytes_per_second",
        g,
        "The link's rate the wire model used, in bytes per second.",
        s.wire.link_bps.map(|b| b / 8.0),
    );
    let parallel = r.spec.parallel.to_string();
    out.info(
        "wirerate_test_info",
        "The probe's test: protocol, direction and streams per direction.",
        &[
            ("protocol", &word(&r.spec.protocol)),
            ("direction", &word(&r.spec.direction)),
            ("parallel", &parallel),
        ],
    );
    if let Some(d) = &s.diagnosis {
        out.info(
            "wirerate_diagnosis_info",
            "Why the transfer is not faster: the diagnosis' bottleneck and its confidence.",
            &[
                ("bottleneck", &word(&d.bottleneck)),
                ("confidence", &word(&d.confidence)),
            ],
        );
    }
}

fn write_cpu(out: &mut Exposition, r: &RunResult) {
    let cpu = &r.summary.cpu;
    let sides: [(&str, Option<&CpuSide>); 2] = [
        ("client", cpu.local.as_ref()),
        ("server", cpu.remote.as_ref()),
    ];
    let mut busy = out.family(
        "wirerate_cpu_busy_ratio",
        Kind::Gauge,
        "Busy share of each end's host over all its cores during the test, 0 to 1 (softirq and \
         irq included).",
    );
    for (end, side) in sides {
        if let Some(p) = side.and_then(|c| c.system_percent) {
            busy.sample(&[("end", end)], p / 100.0);
        }
    }
    let mut spent = out.family(
        "wirerate_process_cpu_seconds",
        Kind::Gauge,
        "CPU time (user and system) each end's test threads spent during the test.",
    );
    for (end, side) in sides {
        if let Some(c) = side {
            spent.sample(&[("end", end)], c.user_s + c.sys_s);
        }
    }
}

/// An enum's name as the JSON result spells it ("sender_cpu", "reverse").
pub(crate) fn word<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirerate_core::diagnosis::{Bottleneck, Confidence, Diagnosis};
    use wirerate_core::result::UdpSummary;

    fn value(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .map(|v| v.parse().unwrap())
    }

    #[test]
    fn a_tcp_result_is_written_in_base_units() {
        let mut r = wirerate_core::synth::run(1, 8e9, 0);
        r.summary.tcp.as_mut().unwrap().rtt_us = Some(250.0);
        r.summary.wire.efficiency = Some(0.85);
        r.summary.diagnosis = Some(Diagnosis {
            bottleneck: Bottleneck::SenderCpu,
            confidence: Confidence::High,
            verdict: String::new(),
            evidence: vec![],
            advice: vec![],
            candidates: vec![],
            notes: vec![],
            unseen: vec![],
        });
        let mut e = Exposition::new();
        write(&mut e, Some(&r), true, 10.4);
        let t = e.finish();
        assert_eq!(value(&t, "wirerate_probe_success"), Some(1.0));
        assert_eq!(value(&t, "wirerate_probe_duration_seconds"), Some(10.4));
        assert_eq!(value(&t, "wirerate_goodput_bytes_per_second"), Some(1e9));
        assert_eq!(value(&t, "wirerate_received_bytes"), Some(1e10));
        assert_eq!(value(&t, "wirerate_tcp_rtt_seconds"), Some(0.00025));
        assert_eq!(value(&t, "wirerate_tcp_retransmitted_segments"), Some(1.0));
        assert_eq!(value(&t, "wirerate_wire_efficiency_ratio"), Some(0.85));
        assert_eq!(value(&t, "wirerate_link_bytes_per_second"), Some(1.25e9));
        assert_eq!(
            value(&t, "wirerate_cpu_busy_ratio{end=\"client\"}"),
            Some(0.21)
        );
        assert_eq!(
            value(&t, "wirerate_cpu_busy_ratio{end=\"server\"}"),
            Some(0.25)
        );
        assert_eq!(
            value(
                &t,
                "wirerate_diagnosis_info{bottleneck=\"sender_cpu\",confidence=\"high\"}"
            ),
            Some(1.0)
        );
        assert!(t.contains(
            "wirerate_test_info{protocol=\"tcp\",direction=\"forward\",parallel=\"1\"} 1\n"
        ));
        // a TCP test has no UDP figures: left out, not zero
        assert!(!t.contains("wirerate_udp_"), "{t}");
        assert!(t.contains("# TYPE wirerate_goodput_bytes_per_second gauge\n"));
    }

    #[test]
    fn udp_loss_is_a_ratio_and_jitter_in_seconds() {
        let mut r = wirerate_core::synth::run(0, 1e6, 0);
        r.summary.tcp = None;
        r.summary.udp = Some(UdpSummary {
            packets: 1000,
            lost: 25,
            loss_percent: 2.5,
            jitter_ms: Some(0.5),
            ..Default::default()
        });
        let mut e = Exposition::new();
        write(&mut e, Some(&r), true, 2.0);
        let t = e.finish();
        assert_eq!(value(&t, "wirerate_udp_loss_ratio"), Some(0.025));
        assert_eq!(value(&t, "wirerate_udp_jitter_seconds"), Some(0.0005));
        assert_eq!(value(&t, "wirerate_udp_lost_datagrams"), Some(25.0));
        assert!(!t.contains("wirerate_tcp_"));
        assert!(!t.contains("wirerate_flow_"), "one direction: no flows");
    }

    #[test]
    fn a_bidirectional_test_has_each_flow_goodput() {
        use wirerate_core::result::FlowSummary;
        use wirerate_core::spec::Flow;
        let mut r = wirerate_core::synth::run(0, 3e9, 0);
        r.summary.flows = [(Flow::ClientToServer, 2e9), (Flow::ServerToClient, 1e9)]
            .map(|(flow, bps)| FlowSummary {
                flow,
                goodput_bps: bps,
                bytes: 0,
                seconds: 1.0,
                sender_bps: bps,
            })
            .to_vec();
        let mut e = Exposition::new();
        write(&mut e, Some(&r), true, 1.0);
        let t = e.finish();
        let flow = |f: &str| {
            value(
                &t,
                &format!("wirerate_flow_goodput_bytes_per_second{{flow=\"{f}\"}}"),
            )
        };
        assert_eq!(flow("client_to_server"), Some(2.5e8));
        assert_eq!(flow("server_to_client"), Some(1.25e8));
    }

    #[test]
    fn a_failed_probe_says_so_and_nothing_else() {
        let mut e = Exposition::new();
        write(&mut e, None, false, 0.3);
        let t = e.finish();
        assert_eq!(value(&t, "wirerate_probe_success"), Some(0.0));
        assert_eq!(t.lines().filter(|l| !l.starts_with('#')).count(), 2, "{t}");
    }
}
