//! Joins the two sides' reports into one [`RunResult`]: pairs each stream's sender and
//! receiver, and derives every summary figure from the raw counts via [`crate::metrics`].

use std::collections::HashMap;

use crate::metrics::{bps, io_stats, max_opt, performance_index};
use crate::result::{
    CpuSummary, Env, Evidence, FlowSummary, IoSummary, RunResult, StreamResult, StreamSide,
    Summary, TcpInfo, TcpSummary, Tool, UdpSummary, WireSummary, SCHEMA_VERSION,
};
use crate::side_report::{Role, SideReport, StreamReport};
use crate::spec::{Direction, Flow, TestKind, TestSpec};
use crate::sweep::SweepResult;

/// What the caller knows besides the two reports.
#[derive(Debug, Clone, Default)]
pub struct Context {
    pub tool_version: String,
    pub started_unix_s: f64,
    pub server_addr: String,
    pub embedded_server: bool,
    /// The link as far as the caller knows it (rate, source, MTU); the model and the
    /// efficiency are completed here from what the streams used.
    pub wire: WireSummary,
    /// UDP figures a driver measured itself (an iperf3 peer's datagrams), used instead of
    /// the ones derived from the two reports.
    pub udp: Option<crate::result::UdpSummary>,
    /// The client stopped the test early (Ctrl-C).
    pub interrupted: bool,
}

fn side_of(report: &StreamReport) -> StreamSide {
    StreamSide {
        bytes: report.bytes,
        counted_bytes: report.counted_bytes,
        calls: report.calls,
        counted_calls: Some(report.counted_calls)
            .filter(|_| report.opened_s.is_some() || report.counted_calls > 0),
        opened_s: report.opened_s,
        seconds: report.seconds,
        user_s: report.user_s,
        sys_s: report.sys_s,
        run_s: report.sched.map(|s| s.run_s),
        wait_s: report.sched.map(|s| s.wait_s),
        sleeps: report.sched.and_then(|s| s.sleeps),
        pinned_cpu: report.sched.and_then(|s| s.pinned_cpu),
        worker: report.worker,
    }
}

/// Builds the result. `client` and `server` are the two sides' reports.
pub fn assemble(
    spec: &TestSpec,
    client: &SideReport,
    server: &SideReport,
    ctx: Context,
) -> RunResult {
    let mut streams = Vec::new();
    let mut flows = Vec::new();
    for &flow in spec.direction.flows() {
        let (tx, rx) = if flow.sender_is_client() {
            (client, server)
        } else {
            (server, client)
        };
        let senders = by_id(tx, flow, Role::Sender);
        let receivers = by_id(rx, flow, Role::Receiver);
        let mut ids: Vec<u32> = senders.keys().chain(receivers.keys()).copied().collect();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            let s = senders.get(&id).copied();
            let r = receivers.get(&id).copied();
            let receiver = r.map(side_of).unwrap_or_default();
            let mut sender = s.map(side_of).unwrap_or_default();
            if spec.protocol == crate::spec::Protocol::Tcp && spec.test.is_stream() {
                sender.counted_bytes = sent_in_window(&sender, &receiver);
            }
            streams.push(StreamResult {
                id,
                flow,
                sender,
                receiver,
                goodput_bps: bps(receiver.counted_bytes, receiver.seconds),
                tcp_sender: s.and_then(|x| x.tcp.clone()),
                tcp_receiver: r.and_then(|x| x.tcp.clone()),
            });
        }
        flows.push(flow_summary(flow, &streams));
    }
    let summary = summarize(spec, &streams, flows, client, server, ctx.wire.clone());
    let mut intervals: Vec<_> = client
        .intervals
        .iter()
        .chain(&server.intervals)
        .cloned()
        .collect();
    intervals.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    attach_tcp_samples(&mut intervals, client, server);
    let mut result = RunResult {
        schema_version: SCHEMA_VERSION,
        tool: Tool {
            name: "wirerate".into(),
            version: ctx.tool_version,
        },
        started_unix_s: ctx.started_unix_s,
        spec: spec.clone(),
        summary,
        intervals,
        streams,
        env: Env {
            client: client.host.clone(),
            server: server.host.clone(),
            embedded_server: ctx.embedded_server,
            server_addr: ctx.server_addr,
        },
        evidence: Evidence {
            client: client.evidence.clone(),
            server: server.evidence.clone(),
        },
        interrupted: ctx.interrupted,
        sweep: None,
        rpm: None,
        inband: crate::inband::join(&client.inband, &server.inband),
    };
    if let Some(udp) = ctx.udp {
        result.summary.udp = Some(udp);
    }
    crate::wire::complete(&mut result);
    add_cycles_per_byte(&mut result);
    match &spec.test {
        TestKind::Stream => {
            crate::diagnosis::interval_bottlenecks(&mut result);
            result.summary.diagnosis = Some(crate::diagnosis::diagnose(&result));
        }
        TestKind::Rr(rr) => {
            result.summary.rr = Some(crate::rr::summarize(
                rr,
                client,
                server,
                &result.summary.cpu,
            ));
        }
        TestKind::Sweep(sw) => {
            let side = client.sweep.clone().unwrap_or_default();
            result.sweep = Some(SweepResult::new(sw.stream, side.points, side.stopped_early));
        }
        // never run as one test: its phases are assembled one by one
        TestKind::Rpm(_) => {}
    }
    result
}

/// A TCP stream's sent bytes in the counted window. Both ends' windows open at a byte
/// offset of the stream: the receiver's where its window opened (what it had read and what
/// was readable then), the sender's at what the receiver had acknowledged when the
/// sender's window opened. The sender counts from the lower of the two, so it never counts
/// less than the receiver did. Both offsets are known only where both ends are wirerate's
/// (`opened_s` given); otherwise each end's count stands.
fn sent_in_window(sender: &StreamSide, receiver: &StreamSide) -> u64 {
    if sender.opened_s.is_none() || receiver.opened_s.is_none() {
        return sender.counted_bytes;
    }
    let received_from = receiver.bytes.saturating_sub(receiver.counted_bytes);
    sender
        .counted_bytes
        .max(sender.bytes.saturating_sub(received_from))
}

/// The span of one flow's counted windows on one side: from the first opening to the last
/// byte. Where the side does not say where its windows opened (an iperf3 peer), the longest
/// stream's seconds.
fn window_s<'a>(sides: impl Iterator<Item = &'a StreamSide> + Clone) -> f64 {
    let opened = sides
        .clone()
        .filter_map(|s| s.opened_s.map(|o| (o, o + s.seconds)));
    let first = opened.clone().map(|(o, _)| o).fold(f64::INFINITY, f64::min);
    let last = opened.map(|(_, e)| e).fold(f64::NEG_INFINITY, f64::max);
    if first.is_finite() && last.is_finite() {
        (last - first).max(0.0)
    } else {
        sides.map(|s| s.seconds).fold(0.0, f64::max)
    }
}

/// Gives each received interval the TCP sample its flow's sender took over the same span
/// (both sides cut intervals on the same schedule from their own start).
fn attach_tcp_samples(intervals: &mut [crate::result::Interval], a: &SideReport, b: &SideReport) {
    for s in a.tcp_samples.iter().chain(&b.tcp_samples) {
        if let Some(iv) = intervals.iter_mut().find(|iv| {
            iv.flow == s.flow
                && iv.stream == s.stream
                && crate::window::covers(iv, s.start_s, s.end_s)
        }) {
            iv.tcp = Some(s.tcp.clone());
        }
    }
}

/// Cycles per byte moved, for each side whose processor counters could be read: the
/// bytes this side sent or received in the counted window.
fn add_cycles_per_byte(r: &mut RunResult) {
    let moved = |flows_sent: &[Flow], flows_received: &[Flow]| -> u64 {
        r.streams
            .iter()
            .map(|s| {
                let mut b = 0;
                if flows_sent.contains(&s.flow) {
                    b += s.sender.counted_bytes;
                }
                if flows_received.contains(&s.flow) {
                    b += s.receiver.counted_bytes;
                }
                b
            })
            .sum()
    };
    let c2s = [Flow::ClientToServer];
    let s2c = [Flow::ServerToClient];
    let client_bytes = moved(&c2s, &s2c);
    let server_bytes = moved(&s2c, &c2s);
    let per_byte = |cycles: Option<u64>, bytes: u64| {
        cycles
            .filter(|_| bytes > 0)
            .map(|c| c as f64 / bytes as f64)
    };
    let client_cycles = r.evidence.client.as_ref().and_then(|e| e.cycles);
    let server_cycles = r.evidence.server.as_ref().and_then(|e| e.cycles);
    if let Some(c) = r.summary.cpu.local.as_mut() {
        c.cycles_per_byte = per_byte(client_cycles, client_bytes);
    }
    if let Some(c) = r.summary.cpu.remote.as_mut() {
        c.cycles_per_byte = per_byte(server_cycles, server_bytes);
    }
}

fn by_id(side: &SideReport, flow: Flow, role: Role) -> HashMap<u32, &StreamReport> {
    side.streams
        .iter()
        .filter(|s| s.flow == flow && s.role == role)
        .map(|s| (s.id, s))
        .collect()
}

fn flow_summary(flow: Flow, streams: &[StreamResult]) -> FlowSummary {
    let of_flow = || streams.iter().filter(move |s| s.flow == flow);
    let bytes: u64 = of_flow().map(|s| s.receiver.counted_bytes).sum();
    let seconds = window_s(of_flow().map(|s| &s.receiver));
    let sent: u64 = of_flow().map(|s| s.sender.counted_bytes).sum();
    let sent_s = window_s(of_flow().map(|s| &s.sender));
    FlowSummary {
        flow,
        goodput_bps: bps(bytes, seconds),
        bytes,
        seconds,
        sender_bps: bps(sent, sent_s),
    }
}

fn summarize(
    spec: &TestSpec,
    streams: &[StreamResult],
    flows: Vec<FlowSummary>,
    client: &SideReport,
    server: &SideReport,
    wire: WireSummary,
) -> Summary {
    let goodput_bps: f64 = flows.iter().map(|f| f.goodput_bps).sum();
    let sender_bps: f64 = flows.iter().map(|f| f.sender_bps).sum();
    let seconds = flows.iter().map(|f| f.seconds).fold(0.0, f64::max);
    let sender_seconds = spec
        .direction
        .flows()
        .iter()
        .map(|&f| window_s(streams.iter().filter(|s| s.flow == f).map(|s| &s.sender)))
        .fold(0.0, f64::max);
    let sum = |f: fn(&StreamResult) -> u64| -> u64 { streams.iter().map(f).sum() };
    // calls and bytes of the counted window, over its seconds; bytes moved in no calls:
    // the side did not count its calls (an iperf3 peer)
    let known = |calls: u64, bytes: u64, s: f64| {
        (calls > 0 || bytes == 0).then(|| io_stats(calls, bytes, s))
    };
    let io = IoSummary {
        sender: known(
            sum(|s| s.sender.counted_calls.unwrap_or(0)),
            sum(|s| s.sender.counted_bytes),
            sender_seconds,
        ),
        receiver: known(
            sum(|s| s.receiver.counted_calls.unwrap_or(0)),
            sum(|s| s.receiver.counted_bytes),
            seconds,
        ),
    };
    let with_cost = |c: &Option<crate::result::CpuSide>| {
        c.clone().map(|mut c| {
            let busy_cores = c
                .system_percent
                .zip(c.cores)
                .map(|(p, n)| p / 100.0 * f64::from(n))
                .filter(|b| *b > 0.0);
            c.bps_per_busy_core = busy_cores.map(|b| goodput_bps / b);
            c
        })
    };
    let cpu = CpuSummary {
        local: with_cost(&client.cpu),
        remote: with_cost(&server.cpu),
    };
    let busiest = max_opt(
        cpu.local.as_ref().and_then(|c| c.system_percent),
        cpu.remote.as_ref().and_then(|c| c.system_percent),
    );
    let pi = performance_index(goodput_bps, busiest, wire.link_bps);
    let tcp = (spec.protocol == crate::spec::Protocol::Tcp).then(|| tcp_summary(streams));
    let udp = (spec.protocol == crate::spec::Protocol::Udp && spec.test.is_stream()).then(|| {
        let mut u = udp_summary(spec, client, server);
        u.sent_pps = per_second(u.packets, sender_seconds);
        u.received_pps = per_second(u.received, seconds);
        u
    });
    Summary {
        goodput_bps,
        sender_bps,
        bytes: flows.iter().map(|f| f.bytes).sum(),
        sender_bytes: sum(|s| s.sender.counted_bytes),
        seconds,
        sender_seconds,
        io,
        cpu,
        pi,
        tcp,
        udp,
        wire,
        flows: if spec.direction == Direction::Bidir {
            flows
        } else {
            Vec::new()
        },
        diagnosis: None,
        rr: None,
        fairness: crate::metrics::fairness(
            &streams.iter().map(|s| s.goodput_bps).collect::<Vec<_>>(),
        ),
    }
}

/// `n` events over `seconds`, None for an empty window.
fn per_second(n: u64, seconds: f64) -> Option<f64> {
    (seconds > 0.0 && seconds.is_finite()).then(|| n as f64 / seconds)
}

fn udp_summary(spec: &TestSpec, client: &SideReport, server: &SideReport) -> UdpSummary {
    let mut u = UdpSummary {
        target_bps: spec.rate_bps,
        ..Default::default()
    };
    let mut jitters = Vec::new();
    let mut socket_drops: Option<u64> = None;
    let mut receiving_hosts: Vec<&SideReport> = Vec::new();
    for side in [client, server] {
        for st in &side.streams {
            let Some(x) = &st.udp else { continue };
            match st.role {
                Role::Sender => {
                    u.packets += x.packets;
                    u.sender_enobufs += x.enobufs;
                }
                Role::Receiver => {
                    u.received += x.packets;
                    u.out_of_order += x.out_of_order;
                    u.duplicates += x.duplicates;
                    u.foreign_datagrams += x.foreign;
                    jitters.extend(x.jitter_ms);
                    if let Some(d) = x.socket_drops {
                        socket_drops = Some(socket_drops.unwrap_or(0) + d);
                    }
                    if !receiving_hosts.iter().any(|h| std::ptr::eq(*h, side)) {
                        receiving_hosts.push(side);
                    }
                }
            }
        }
    }
    (u.lost, u.loss_percent) = crate::udp::loss(u.packets, u.received);
    u.jitter_ms = (!jitters.is_empty()).then(|| jitters.iter().sum::<f64>() / jitters.len() as f64);
    u.socket_drops = socket_drops;
    let host: Vec<_> = receiving_hosts.iter().filter_map(|h| h.udp_host).collect();
    if !host.is_empty() {
        u.receiver_rcvbuf_errors = Some(host.iter().map(|h| h.rcvbuf_errors).sum());
        u.receiver_in_errors = Some(host.iter().map(|h| h.in_errors).sum());
    }
    let in_receiver = match (socket_drops, u.receiver_rcvbuf_errors) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).max(b.unwrap_or(0)).min(u.lost)),
    };
    u.lost_in_receiver = in_receiver;
    u.lost_on_path = in_receiver.map(|r| u.lost - r);
    u.loss_location = match (u.lost, in_receiver) {
        (0, _) => "none",
        (_, None) => "unknown",
        (l, Some(r)) if r == l => "receiver",
        (_, Some(0)) => "path",
        _ => "receiver and path",
    }
    .into();
    u
}

fn sum_opt<'a>(
    infos: impl Iterator<Item = &'a TcpInfo>,
    f: fn(&TcpInfo) -> Option<u64>,
) -> Option<u64> {
    infos.map(f).fold(None, |acc, v| match (acc, v) {
        (None, v) => v,
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
        (a, None) => a,
    })
}

fn tcp_summary(streams: &[StreamResult]) -> TcpSummary {
    let senders = || streams.iter().filter_map(|s| s.tcp_sender.as_ref());
    let receivers = || streams.iter().filter_map(|s| s.tcp_receiver.as_ref());
    let rtts: Vec<f64> = senders()
        .filter_map(|t| t.rtt_us)
        .map(|r| r as f64)
        .collect();
    let busy = sum_opt(senders(), |t| t.busy_time_us).filter(|b| *b > 0);
    let share = |part: Option<u64>| {
        busy.zip(part)
            .map(|(b, p)| (p as f64 * 100.0 / b as f64).min(100.0))
    };
    TcpSummary {
        rwnd_limited_percent: share(sum_opt(senders(), |t| t.rwnd_limited_us)),
        sndbuf_limited_percent: share(sum_opt(senders(), |t| t.sndbuf_limited_us)),
        retransmits: sum_opt(senders(), |t| t.retransmits_total),
        segs_out: sum_opt(senders(), |t| t.segs_out),
        segs_in: sum_opt(receivers(), |t| t.segs_in),
        rtt_us: (!rtts.is_empty()).then(|| rtts.iter().sum::<f64>() / rtts.len() as f64),
        snd_cwnd_max: senders().filter_map(|t| t.snd_cwnd).max(),
        busy_time_us: sum_opt(senders(), |t| t.busy_time_us),
        rwnd_limited_us: sum_opt(senders(), |t| t.rwnd_limited_us),
        sndbuf_limited_us: sum_opt(senders(), |t| t.sndbuf_limited_us),
        congestion: senders().find_map(|t| t.congestion.clone()),
        dsack_dups: sum_opt(senders(), |t| t.dsack_dups),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::CpuSide;

    fn stream(id: u32, flow: Flow, role: Role, bytes: u64, seconds: f64) -> StreamReport {
        StreamReport {
            id,
            flow,
            role,
            bytes,
            counted_bytes: bytes,
            calls: bytes / 1000,
            counted_calls: bytes / 1000,
            opened_s: None,
            seconds,
            user_s: 0.1,
            sys_s: 0.5,
            tcp: Some(TcpInfo {
                retransmits_total: Some(2),
                rtt_us: Some(100),
                ..Default::default()
            }),
            udp: None,
            error: None,
            sched: None,
            worker: None,
            rr: None,
        }
    }

    #[test]
    fn forward_two_streams() {
        let spec = TestSpec {
            parallel: 2,
            ..Default::default()
        };
        let client = SideReport {
            streams: vec![
                stream(0, Flow::ClientToServer, Role::Sender, 1_000_000, 1.0),
                stream(1, Flow::ClientToServer, Role::Sender, 1_000_000, 1.0),
            ],
            cpu: Some(CpuSide {
                system_percent: Some(50.0),
                ..Default::default()
            }),
            ..Default::default()
        };
        let server = SideReport {
            streams: vec![
                stream(0, Flow::ClientToServer, Role::Receiver, 1_000_000, 2.0),
                stream(1, Flow::ClientToServer, Role::Receiver, 500_000, 1.0),
            ],
            cpu: Some(CpuSide {
                system_percent: Some(80.0),
                ..Default::default()
            }),
            ..Default::default()
        };
        let r = assemble(&spec, &client, &server, Context::default());
        // 1.5 MB over the 2 s receiver window
        assert_eq!(r.summary.bytes, 1_500_000);
        assert_eq!(r.summary.goodput_bps, 6e6);
        assert_eq!(r.summary.sender_bps, 16e6);
        assert_eq!(r.streams.len(), 2);
        assert_eq!(r.summary.tcp.as_ref().unwrap().retransmits, Some(4));
        // PI uses the busier host: 6/80 × 6/1000
        let pi = r.summary.pi.unwrap();
        assert!((pi - 6.0 / 80.0 * 6.0 / 1000.0).abs() < 1e-12);
        assert!(r.summary.flows.is_empty());
    }

    #[test]
    fn bidir_sums_both_flows() {
        let spec = TestSpec {
            direction: Direction::Bidir,
            ..Default::default()
        };
        let client = SideReport {
            streams: vec![
                stream(0, Flow::ClientToServer, Role::Sender, 1_000_000, 1.0),
                stream(0, Flow::ServerToClient, Role::Receiver, 2_000_000, 1.0),
            ],
            ..Default::default()
        };
        let server = SideReport {
            streams: vec![
                stream(0, Flow::ClientToServer, Role::Receiver, 1_000_000, 1.0),
                stream(0, Flow::ServerToClient, Role::Sender, 2_000_000, 1.0),
            ],
            ..Default::default()
        };
        let r = assemble(&spec, &client, &server, Context::default());
        assert_eq!(r.summary.goodput_bps, 24e6);
        assert_eq!(r.summary.flows.len(), 2);
        assert_eq!(r.summary.pi, None);
    }

    /// A stream end of wirerate's: `bytes` moved, `counted` of them in a window that
    /// opened at `opened_s` and lasted `seconds`, in `calls` calls of which `counted_calls`
    /// in the window.
    fn windowed(role: Role, bytes: u64, counted: u64, opened_s: f64, seconds: f64) -> StreamReport {
        StreamReport {
            counted_bytes: counted,
            calls: 100,
            counted_calls: 40,
            opened_s: Some(opened_s),
            ..stream(0, Flow::ClientToServer, role, bytes, seconds)
        }
    }

    #[test]
    fn a_sender_counts_from_the_lower_of_the_two_offsets() {
        let spec = TestSpec {
            omit_s: 1.0,
            ..Default::default()
        };
        // the receiver's window opened at offset 3000, before the sender's (at 5000)
        let client = SideReport {
            streams: vec![windowed(Role::Sender, 10_000, 5000, 1.0, 1.0)],
            ..Default::default()
        };
        let server = SideReport {
            streams: vec![windowed(Role::Receiver, 10_000, 7000, 1.0, 1.0)],
            ..Default::default()
        };
        let r = assemble(&spec, &client, &server, Context::default());
        assert_eq!(r.summary.bytes, 7000);
        assert_eq!(r.summary.sender_bytes, 7000);
        // a receiver whose window opened later leaves the sender's own count
        let server = SideReport {
            streams: vec![windowed(Role::Receiver, 10_000, 4000, 1.0, 1.0)],
            ..Default::default()
        };
        let r = assemble(&spec, &client, &server, Context::default());
        assert_eq!((r.summary.bytes, r.summary.sender_bytes), (4000, 5000));
        // an end that does not say where its window opened (an iperf3 peer) is taken as is
        let mut peer = server.clone();
        peer.streams[0].opened_s = None;
        peer.streams[0].counted_bytes = 10_000;
        let r = assemble(&spec, &client, &peer, Context::default());
        assert_eq!(r.summary.sender_bytes, 5000);
    }

    #[test]
    fn io_calls_and_bytes_are_those_of_the_window() {
        let spec = TestSpec::default();
        let client = SideReport {
            streams: vec![windowed(Role::Sender, 10_000, 4000, 1.0, 2.0)],
            ..Default::default()
        };
        let server = SideReport {
            streams: vec![windowed(Role::Receiver, 10_000, 4000, 1.0, 2.0)],
            ..Default::default()
        };
        let r = assemble(&spec, &client, &server, Context::default());
        let io = r.summary.io.sender.unwrap();
        assert_eq!((io.calls, io.bytes), (40, 4000));
        assert_eq!(io.calls_per_s, 20.0);
        assert_eq!(r.streams[0].sender.counted_calls, Some(40));
    }

    #[test]
    fn a_flows_seconds_run_from_its_first_opening_to_its_last_byte() {
        let spec = TestSpec {
            parallel: 2,
            ..Default::default()
        };
        let mut a = windowed(Role::Receiver, 1000, 1000, 1.0, 2.0);
        let mut b = windowed(Role::Receiver, 1000, 1000, 1.5, 1.6);
        b.id = 1;
        let server = SideReport {
            streams: vec![a.clone(), b.clone()],
            ..Default::default()
        };
        let r = assemble(&spec, &SideReport::default(), &server, Context::default());
        // 1.0 to 3.1, not the longest stream's 2.0
        assert!(
            (r.summary.seconds - 2.1).abs() < 1e-12,
            "{}",
            r.summary.seconds
        );
        // without openings (an iperf3 peer), the longest stream
        a.opened_s = None;
        b.opened_s = None;
        let server = SideReport {
            streams: vec![a, b],
            ..Default::default()
        };
        let r = assemble(&spec, &SideReport::default(), &server, Context::default());
        assert_eq!(r.summary.seconds, 2.0);
    }
}
