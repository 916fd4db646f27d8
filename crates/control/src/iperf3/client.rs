//! `wirerate run --iperf3`: drives an iperf3 server's control protocol, runs the data streams
//! on wirerate's workers (so TCP_INFO, thread CPU and interface counters are measured here),
//! and turns the server's results into the remote half of a wirerate result.

use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use wirerate_core::result::{Interval, UdpSummary};
use wirerate_core::side_report::{Role, SideReport};
use wirerate_core::spec::{End, Protocol};
use wirerate_core::TestSpec;
use wirerate_probe::tcpinfo::tcp_info;
use wirerate_proto::iperf3::map::Side;
use wirerate_proto::iperf3::{
    check_spec, params_json, ClientEvent, ClientSession, Cookie, Results, StreamMap,
};

use super::sent::SentClock;
use crate::client::{ClientConfig, ClientOutcome, Observer};
use crate::control::Control;
use crate::driver::{drive, Handler, Peer};
use wirerate_engine::iperf3::udp::{self, add_udp_figures, UdpOutcome, UdpRun, UdpStream};
use wirerate_engine::net::{connect, connect_with};
use wirerate_engine::side::{Attached, DataSock, SideRun};
use wirerate_engine::EngineError;

/// The running streams, TCP on wirerate's shared workers or UDP on iperf3-style ones.
enum Streams {
    Tcp(Box<SideRun>),
    Udp(Box<UdpRun>),
}

impl Streams {
    fn moved(&self, role: Role) -> u64 {
        match self {
            Streams::Tcp(s) => s.moved(role),
            Streams::Udp(u) => u.moved(role),
        }
    }

    fn is_done(&self) -> bool {
        match self {
            Streams::Tcp(s) => s.is_done(),
            Streams::Udp(u) => u.is_done(),
        }
    }

    fn intervals(&mut self, now: Instant) -> Vec<Interval> {
        match self {
            Streams::Tcp(s) => s.poll_intervals(now),
            Streams::Udp(_) => Vec::new(),
        }
    }

    fn next_tick(&self) -> Option<Instant> {
        match self {
            Streams::Tcp(s) => s.next_tick(),
            Streams::Udp(_) => None,
        }
    }

    /// Asks this side's senders to stop: the test is being ended early.
    fn stop_sending(&self) {
        match self {
            Streams::Tcp(s) => s.stop_sending(),
            Streams::Udp(u) => u.stop(),
        }
    }

    fn abort(self) {
        match self {
            Streams::Tcp(s) => {
                s.abort();
                let _ = s.finish();
            }
            Streams::Udp(u) => {
                let _ = u.finish();
            }
        }
    }
}

/// What the driver holds while the test runs.
#[derive(Default)]
struct Run {
    tcp: Vec<Attached>,
    udp: Vec<UdpStream>,
    /// Clones of the receiving TCP sockets, to read the kernel's count of received bytes.
    rx_socks: Vec<TcpStream>,
    /// Clones of the sending TCP sockets, to see that the server has acknowledged the bytes.
    tx_socks: Vec<TcpStream>,
    /// When the senders of a byte-count test had written everything.
    written_at: Option<Instant>,
    streams: Option<Streams>,
    started: Option<Instant>,
    ended: Option<Instant>,
    local: Option<SideReport>,
    udp_local: Vec<UdpOutcome>,
    remote: Option<Results>,
    /// Intervals already shown; the last, partial one comes with this side's report.
    shown: usize,
    /// The client's own intervals of what it sends (the server reports none live).
    sent: Option<SentClock>,
    /// Ctrl-C was seen (`asked`) and ended the running test (`interrupted`).
    asked: bool,
    interrupted: bool,
}

/// What the driver needs to know, in one place.
struct Ctx<'a> {
    addr: SocketAddr,
    spec: &'a TestSpec,
    cfg: &'a ClientConfig,
    cookie: Cookie,
    map: StreamMap,
}

/// Runs one test against the iperf3 server at `addr`.
pub fn run_client(
    addr: SocketAddr,
    spec: &TestSpec,
    cfg: &ClientConfig,
    obs: &mut dyn Observer,
) -> Result<ClientOutcome, EngineError> {
    check_spec(spec).map_err(wirerate_proto::iperf3::Iperf3Error::from)?;
    let bind = cfg.bind.map(|ip| SocketAddr::new(ip, 0));
    let sock = connect(addr, bind, None, cfg.connect_timeout)?;
    let cx = Ctx {
        addr,
        spec,
        cfg,
        cookie: wirerate_engine::iperf3::new_cookie()?,
        map: StreamMap::new(spec.direction, spec.parallel),
    };
    let version = concat!("wirerate-", env!("CARGO_PKG_VERSION"));
    let params = params_json(spec, version);
    let mut sess = ClientSession::new(&cx.cookie, params, Instant::now(), cfg.idle);
    let local_ip = sock.local_addr().ok().map(|a| a.ip());
    let mut ctl = Control::new(sock);
    let mut run = Run::default();
    drive(
        &mut ctl,
        &mut sess,
        &mut ClientRun {
            run: &mut run,
            cx: &cx,
            obs,
            local_ip,
        },
    )?;
    let (Some(local), Some(remote)) = (run.local, run.remote) else {
        return Err(EngineError::ResultsMissing(
            "the iperf3 test ended without both sides' results",
        ));
    };
    let window_s = match (run.started, run.ended) {
        (Some(a), Some(b)) => b.saturating_duration_since(a).as_secs_f64() - spec.omit_s,
        _ => 0.0,
    };
    Ok(ClientOutcome {
        udp: (spec.protocol == Protocol::Udp)
            .then(|| udp_summary(spec, &remote, &run.udp_local, &cx.map)),
        remote: remote.to_side(&cx.map, Side::Server, window_s.max(0.0)),
        local,
        server_addr: addr,
        interrupted: run.interrupted,
    })
}

/// The client's part of the control loop: open the streams, start the workers, end the test
/// when it is over (time, bytes, or broken streams), and exchange the results.
struct ClientRun<'a> {
    run: &'a mut Run,
    cx: &'a Ctx<'a>,
    obs: &'a mut dyn Observer,
    local_ip: Option<IpAddr>,
}

impl ClientRun<'_> {
    /// When a timed test's senders stop.
    fn end_at(&self) -> Option<Instant> {
        let t0 = self.run.started?;
        let s = self.cx.spec.send_seconds()?;
        Some(t0 + Duration::from_secs_f64(s))
    }
}

impl ClientRun<'_> {
    /// Ctrl-C: the senders stop here and the test ends on both sides as if its time were
    /// up; the results are exchanged as usual and cover the time until now.
    fn on_interrupt(&mut self, sess: &mut ClientSession, now: Instant) -> Result<(), EngineError> {
        if self.run.asked || !self.cx.cfg.interrupted() {
            return Ok(());
        }
        self.run.asked = true;
        match self.run.streams.as_ref() {
            Some(streams) if sess.is_running() && self.run.ended.is_none() => {
                streams.stop_sending();
                sess.end_test(now);
                self.run.ended = Some(now);
                self.run.interrupted = true;
                Ok(())
            }
            // the test already ended: its results are on their way
            Some(_) => Ok(()),
            None => Err(EngineError::InterruptedBeforeStart),
        }
    }
}

impl Handler<ClientSession> for ClientRun<'_> {
    const PEER: Peer = Peer {
        write: "writing to the iperf3 server",
        read: "reading from the iperf3 server",
    };

    fn idle(&self) -> Duration {
        self.cx.cfg.idle
    }

    fn wake_at(&self) -> Option<Instant> {
        let tick = self.run.streams.as_ref().and_then(|s| s.next_tick());
        let running = self.run.ended.is_none();
        let end = self.end_at().filter(|_| running);
        let sent = (self.run.sent.as_ref())
            .filter(|_| running)
            .map(SentClock::next);
        [tick, end, sent].into_iter().flatten().min()
    }

    fn on_event(&mut self, sess: &mut ClientSession, ev: ClientEvent) -> Result<(), EngineError> {
        on_event(ev, sess, self.run, self.cx, self.local_ip, self.obs)
    }

    fn after(&mut self, sess: &mut ClientSession, now: Instant) -> Result<(), EngineError> {
        self.on_interrupt(sess, now)?;
        let end_at = self.end_at();
        let (run, cx) = (&mut *self.run, self.cx);
        let (Some(streams), Some(t0)) = (run.streams.as_mut(), run.started) else {
            return Ok(());
        };
        for iv in streams.intervals(now) {
            self.obs.interval(&iv);
            run.shown += 1;
        }
        if let Some(clock) = run.sent.as_mut().filter(|_| run.ended.is_none()) {
            for iv in clock.poll(now, streams.moved(Role::Sender)) {
                self.obs.interval(&iv);
            }
        }
        if sess.is_running() {
            self.obs.tick(now.duration_since(t0).as_secs_f64());
            let done = match cx.spec.end {
                // the senders stop by themselves at the end time
                End::Time { .. } => {
                    end_at.is_some_and(|e| now >= e) && {
                        let written = streams.moved(Role::Sender);
                        delivered(streams, &run.tx_socks, written, &mut run.written_at, now)
                    }
                }
                End::Bytes { bytes } => {
                    (streams.moved(Role::Sender) >= bytes
                        && delivered(streams, &run.tx_socks, bytes, &mut run.written_at, now))
                        || received(streams, &run.rx_socks) >= bytes
                }
                End::Blocks { .. } => false,
            };
            // every stream already ended (broken): end the test rather than wait
            if done || streams.is_done() {
                sess.end_test(now);
                run.ended = Some(now);
            }
        }
        Ok(())
    }

    fn stop(&mut self) {
        if let Some(s) = self.run.streams.take() {
            s.abort();
        }
    }
}

fn on_event(
    ev: ClientEvent,
    sess: &mut ClientSession,
    run: &mut Run,
    cx: &Ctx<'_>,
    local_ip: Option<IpAddr>,
    obs: &mut dyn Observer,
) -> Result<(), EngineError> {
    let idle = cx.cfg.idle;
    match ev {
        ClientEvent::CreateStreams => match cx.spec.protocol {
            Protocol::Tcp => run.tcp = open_streams(cx)?,
            Protocol::Udp => {
                let df = cx.cfg.data.dont_fragment;
                run.udp = udp::open(cx.addr, cx.cfg.bind, df, cx.spec, &cx.map, idle)?;
            }
        },
        ClientEvent::Start => {
            let tcp = std::mem::take(&mut run.tcp);
            let clones = |role: Role| -> Vec<TcpStream> {
                tcp.iter()
                    .filter(|a| a.role == role)
                    .filter_map(|a| a.sock.tcp()?.try_clone().ok())
                    .collect()
            };
            run.rx_socks = clones(Role::Receiver);
            run.tx_socks = clones(Role::Sender);
            run.streams = Some(match cx.spec.protocol {
                Protocol::Tcp => Streams::Tcp(Box::new(SideRun::start(
                    cx.spec,
                    tcp,
                    local_ip,
                    idle,
                    Default::default(),
                )?)),
                Protocol::Udp => Streams::Udp(Box::new(UdpRun::start(
                    cx.spec,
                    std::mem::take(&mut run.udp),
                    idle,
                    false,
                )?)),
            });
            let t0 = Instant::now();
            run.started = Some(t0);
            run.sent = SentClock::new(cx.spec, t0);
            obs.started();
        }
        ClientEvent::ExchangeResults => {
            let mut results;
            match run.streams.take() {
                Some(Streams::Tcp(side)) => {
                    let report = finish_tcp(*side, idle);
                    for iv in report.intervals.iter().skip(run.shown) {
                        obs.interval(iv);
                    }
                    results = Results::from_side(&report, &cx.map);
                    run.local = Some(report);
                }
                Some(Streams::Udp(u)) => {
                    let (report, outcomes) = (*u).finish();
                    results = Results::from_side(&report, &cx.map);
                    add_udp_figures(&mut results, &outcomes, &cx.map);
                    run.local = Some(report);
                    run.udp_local = outcomes;
                }
                None => {
                    results = Results::from_side(&SideReport::default(), &cx.map);
                    run.local = Some(SideReport::default());
                }
            }
            sess.local_results(&results, Instant::now());
        }
        ClientEvent::PeerResults(r) => run.remote = Some(*r),
    }
    Ok(())
}

/// Whether the server has acknowledged the `bytes` the senders wrote (for TCP; or a second
/// has passed since they were written). An iperf3 server stops counting at `TEST_END`, so
/// ending the test while data is still in flight would lose it from the count.
fn delivered(
    streams: &Streams,
    socks: &[TcpStream],
    bytes: u64,
    written_at: &mut Option<Instant>,
    now: Instant,
) -> bool {
    let since = *written_at.get_or_insert(now);
    if matches!(streams, Streams::Udp(_)) || now.duration_since(since) > Duration::from_secs(1) {
        return true;
    }
    let acked: Option<u64> = socks
        .iter()
        .map(|s| tcp_info(s).and_then(|t| t.bytes_acked))
        .sum();
    acked.is_none_or(|a| a >= bytes)
}

/// Bytes that reached this host on the receiving streams. For TCP the kernel's count is used
/// when it has one: the workers read in large batches, and an iperf3 server that stops at
/// the byte count sends no end-of-stream to flush the last partial batch.
fn received(streams: &Streams, socks: &[TcpStream]) -> u64 {
    let kernel: Option<u64> = match streams {
        Streams::Tcp(_) => socks
            .iter()
            .map(|s| tcp_info(s).and_then(|t| t.bytes_received))
            .sum(),
        Streams::Udp(_) => None,
    };
    kernel.unwrap_or_else(|| streams.moved(Role::Receiver))
}

/// Connects every TCP stream in iperf3's order and presents the cookie on each.
fn open_streams(cx: &Ctx<'_>) -> Result<Vec<Attached>, EngineError> {
    let bind = cx.cfg.bind.map(|ip| SocketAddr::new(ip, 0));
    let mut out = Vec::with_capacity(cx.map.len());
    for e in &cx.map.entries {
        let timeout = cx.cfg.connect_timeout;
        let mut sock = connect_with(cx.addr, bind, Some(cx.spec), &cx.cfg.data, timeout)?;
        sock.set_write_timeout(Some(cx.cfg.idle))
            .and_then(|()| sock.write_all(cx.cookie.bytes()))
            .map_err(EngineError::io("opening an iperf3 data stream"))?;
        out.push(Attached {
            flow: e.flow,
            id: e.index,
            role: Side::Client.role(e.flow),
            sock: DataSock::Tcp(sock),
        });
    }
    Ok(out)
}

/// The iperf3 server closes its data sockets at `TEST_END`, so the workers end on their own;
/// any still running after the idle timeout are stopped.
fn finish_tcp(side: SideRun, idle: Duration) -> SideReport {
    let deadline = Instant::now() + idle;
    while !side.is_done() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    if !side.is_done() {
        side.abort();
    }
    side.finish()
}

/// Loss and jitter over every UDP flow: the server's figures for the flows it received,
/// this side's for the flows it received; the pacing target is the spec's.
fn udp_summary(
    spec: &TestSpec,
    remote: &Results,
    local: &[UdpOutcome],
    map: &StreamMap,
) -> UdpSummary {
    let (mut packets, mut lost, mut out_of_order) = (0u64, 0u64, 0u64);
    let mut jitters = Vec::new();
    for st in local.iter().filter_map(|o| o.stats.as_ref()) {
        packets += st.highest_seq;
        lost += st.lost;
        out_of_order += st.out_of_order;
        jitters.push(st.jitter_s);
    }
    for s in &remote.streams {
        let server_received = map
            .by_id(s.id)
            .is_some_and(|e| Side::Server.role(e.flow) == Role::Receiver);
        if server_received {
            packets += u64::try_from(s.packets).unwrap_or(0);
            lost += u64::try_from(s.errors).unwrap_or(0);
            jitters.push(s.jitter);
        }
    }
    UdpSummary {
        target_bps: spec.rate_bps,
        packets,
        lost,
        loss_percent: if packets > 0 {
            lost as f64 * 100.0 / packets as f64
        } else {
            0.0
        },
        received: packets.saturating_sub(lost),
        out_of_order,
        duplicates: 0,
        jitter_ms: (!jitters.is_empty())
            .then(|| jitters.iter().sum::<f64>() / jitters.len() as f64 * 1000.0),
        // an iperf3 peer reports no kernel drop counters
        loss_location: if lost == 0 { "none" } else { "unknown" }.into(),
        ..Default::default()
    }
}
