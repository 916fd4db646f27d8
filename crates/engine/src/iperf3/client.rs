//! `wirerate run --iperf3`: drives an iperf3 server's control protocol, runs the data streams
//! on wirerate's workers (so TCP_INFO, thread CPU and interface counters are measured here),
//! and turns the server's results into the remote half of a wirerate result.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use wirerate_core::report::{Role, SideReport};
use wirerate_core::spec::End;
use wirerate_core::TestSpec;
use wirerate_probe::tcpinfo::tcp_info;
use wirerate_proto::iperf3::map::Side;
use wirerate_proto::iperf3::{
    check_spec, params_json, ClientEvent, ClientSession, Cookie, Results, StreamMap,
};

use crate::client::{ClientConfig, ClientOutcome, Observer};
use crate::control::{Control, Input};
use crate::error::EngineError;
use crate::net::connect;
use crate::side::{Attached, SideRun};

/// What the driver holds while the test runs.
#[derive(Default)]
struct Run {
    streams: Vec<Attached>,
    /// Clones of the receiving sockets, to read the kernel's count of received bytes.
    rx_socks: Vec<TcpStream>,
    side: Option<SideRun>,
    started: Option<Instant>,
    ended: Option<Instant>,
    local: Option<SideReport>,
    remote: Option<Results>,
}

/// Runs one test against the iperf3 server at `addr`.
pub fn run_client(
    addr: SocketAddr,
    spec: &TestSpec,
    cfg: &ClientConfig,
    obs: &mut dyn Observer,
) -> Result<ClientOutcome, EngineError> {
    check_spec(spec).map_err(EngineError::Setup)?;
    let bind = cfg.bind.map(|ip| SocketAddr::new(ip, 0));
    let sock = connect(addr, bind, None, cfg.connect_timeout)?;
    let cookie = super::new_cookie()?;
    let version = concat!("wirerate-", env!("CARGO_PKG_VERSION"));
    let mut sess = ClientSession::new(
        &cookie,
        params_json(spec, version),
        Instant::now(),
        cfg.idle,
    );
    let map = StreamMap::new(spec.direction, spec.parallel);
    let mut ctl = Control::new(sock);
    let mut run = Run::default();
    let result = drive(
        &mut ctl, &mut sess, &mut run, addr, spec, cfg, &cookie, &map, obs,
    );
    if let Err(e) = result {
        if let Some(side) = run.side.take() {
            side.abort();
            let _ = side.finish();
        }
        sess.abort();
        let _ = ctl.flush(|| sess.poll_transmit(), Duration::from_secs(1));
        return Err(e);
    }
    let (Some(local), Some(remote)) = (run.local, run.remote) else {
        return Err(EngineError::Setup(
            "the iperf3 test ended without both sides' results".into(),
        ));
    };
    let window_s = match (run.started, run.ended) {
        (Some(a), Some(b)) => b.saturating_duration_since(a).as_secs_f64() - spec.omit_s,
        _ => 0.0,
    };
    Ok(ClientOutcome {
        remote: remote.to_side(&map, Side::Server, window_s.max(0.0)),
        local,
        server_addr: addr,
    })
}

#[allow(clippy::too_many_arguments)]
fn drive(
    ctl: &mut Control,
    sess: &mut ClientSession,
    run: &mut Run,
    addr: SocketAddr,
    spec: &TestSpec,
    cfg: &ClientConfig,
    cookie: &Cookie,
    map: &StreamMap,
    obs: &mut dyn Observer,
) -> Result<(), EngineError> {
    let local_ip = ctl.sock.local_addr().ok().map(|a| a.ip());
    let end_at = |t0: Instant| spec.send_seconds().map(|s| t0 + Duration::from_secs_f64(s));
    loop {
        ctl.flush(|| sess.poll_transmit(), cfg.idle)
            .map_err(EngineError::io("writing to the iperf3 server"))?;
        if sess.is_finished() {
            return Ok(());
        }
        let mut wait = Duration::from_millis(20);
        if let Some(t) = run.side.as_ref().and_then(|s| s.next_tick()) {
            wait = wait.min(t.saturating_duration_since(Instant::now()));
        }
        if let Some(e) = run.started.and_then(end_at).filter(|_| sess.is_running()) {
            wait = wait.min(e.saturating_duration_since(Instant::now()));
        }
        let events = match ctl
            .read(wait)
            .map_err(EngineError::io("reading from the iperf3 server"))?
        {
            Input::Bytes(n) => sess.handle_input(ctl.bytes(n), Instant::now())?,
            Input::Closed => {
                sess.handle_close()?;
                Vec::new()
            }
            Input::Nothing => Vec::new(),
        };
        for ev in events {
            match ev {
                ClientEvent::CreateStreams => {
                    run.streams = open_streams(addr, spec, cfg, cookie, map)?;
                }
                ClientEvent::Start => {
                    let streams = std::mem::take(&mut run.streams);
                    run.rx_socks = streams
                        .iter()
                        .filter(|a| a.role == Role::Receiver)
                        .filter_map(|a| a.sock.try_clone().ok())
                        .collect();
                    run.side = Some(SideRun::start(spec, streams, local_ip, cfg.idle));
                    run.started = Some(Instant::now());
                    obs.started();
                }
                ClientEvent::ExchangeResults => {
                    let report = finish(run.side.take(), cfg.idle);
                    sess.local_results(&Results::from_side(&report, map), Instant::now());
                    run.local = Some(report);
                }
                ClientEvent::PeerResults(r) => run.remote = Some(*r),
            }
        }
        let now = Instant::now();
        sess.handle_timeout(now)?;
        let (Some(side), Some(t0)) = (run.side.as_mut(), run.started) else {
            continue;
        };
        for iv in side.poll_intervals(now) {
            obs.interval(&iv);
        }
        if sess.is_running() {
            obs.tick(now.duration_since(t0).as_secs_f64());
            let done = match spec.end {
                End::Time { .. } => end_at(t0).is_some_and(|e| now >= e),
                End::Bytes { bytes } => {
                    side.moved(Role::Sender) >= bytes || received(side, &run.rx_socks) >= bytes
                }
                End::Blocks { .. } => false,
            };
            // every stream already ended (broken): end the test rather than wait
            if done || side.is_done() {
                sess.end_test(now);
                run.ended = Some(now);
            }
        }
    }
}

/// Bytes that reached this host on the receiving streams. The kernel's count is used when
/// it has one: the workers read in large batches, and an iperf3 server that stops at the
/// byte count sends no end-of-stream to flush the last partial batch.
fn received(side: &SideRun, socks: &[TcpStream]) -> u64 {
    let kernel: Option<u64> = socks
        .iter()
        .map(|s| tcp_info(s).and_then(|t| t.bytes_received))
        .sum();
    kernel.unwrap_or_else(|| side.moved(Role::Receiver))
}

/// Connects every stream in iperf3's order and presents the cookie on each.
fn open_streams(
    addr: SocketAddr,
    spec: &TestSpec,
    cfg: &ClientConfig,
    cookie: &Cookie,
    map: &StreamMap,
) -> Result<Vec<Attached>, EngineError> {
    let bind = cfg.bind.map(|ip| SocketAddr::new(ip, 0));
    let mut out = Vec::with_capacity(map.len());
    for e in &map.entries {
        let mut sock = connect(addr, bind, Some(spec), cfg.connect_timeout)?;
        sock.set_write_timeout(Some(cfg.idle))
            .and_then(|()| sock.write_all(cookie.bytes()))
            .map_err(EngineError::io("opening an iperf3 data stream"))?;
        out.push(Attached {
            flow: e.flow,
            id: e.index,
            role: Side::Client.role(e.flow),
            sock,
        });
    }
    Ok(out)
}

/// The iperf3 server closes its data sockets at `TEST_END`, so the workers end on their own;
/// any still running after the idle timeout are stopped.
fn finish(side: Option<SideRun>, idle: Duration) -> SideReport {
    let Some(side) = side else {
        return SideReport::default();
    };
    let deadline = Instant::now() + idle;
    while !side.is_done() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    if !side.is_done() {
        side.abort();
    }
    side.finish()
}
