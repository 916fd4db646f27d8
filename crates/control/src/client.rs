//! The client's control driver: connect, send the spec, open the data streams, run this
//! side's workers, and collect both sides' reports.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wirerate_core::evidence::TcpSample;
use wirerate_core::result::Interval;
use wirerate_core::side_report::{Role, SideReport};
use wirerate_core::spec::{stream_order, Side};
use wirerate_core::sweep::SweepPoint;
use wirerate_core::{Protocol, TestSpec};
use wirerate_proto::data::DataHello;
use wirerate_proto::msg::UdpProof;
use wirerate_proto::{ClientEvent, ClientSession, Token};

use crate::control::{Control, Input};
use crate::driver::{drive, Handler, Peer};
use crate::login::Login;
use wirerate_engine::net::connect;
use wirerate_engine::side::{Attached, DataSock, RunContext, SideRun};
use wirerate_engine::udp::client_setup;
use wirerate_engine::EngineError;

#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// How long the server may stay silent when it owes an answer.
    pub idle: Duration,
    pub connect_timeout: Duration,
    /// Local address for every connection.
    pub bind: Option<IpAddr>,
    /// Set (by a Ctrl-C handler, say) to end a running test early: both sides stop sending
    /// and report what they measured until then.
    pub interrupt: Option<&'static AtomicBool>,
    /// `--cport`: the data streams' local ports, from this one upwards.
    pub cport: Option<u16>,
    /// `-A`: the CPU this side's stream threads are pinned to.
    pub cpu: Option<u32>,
    /// `-F`: the file the client's senders send, or its receivers write to.
    pub file: Option<Arc<PathBuf>>,
    /// TLS on the control connection, and the server key it accepts.
    pub tls: Option<crate::tls::ClientTls>,
    /// `-T`: data workers of a many-stream TCP test; None: one per CPU.
    pub threads: Option<usize>,
    /// Log in as this user with this password (the server runs `serve --users`).
    pub login: Option<Login>,
    /// The data sockets' client-only options (-L, -m, --dont-fragment).
    pub data: wirerate_engine::dataopts::DataOpts,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            idle: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            bind: None,
            interrupt: None,
            cport: None,
            cpu: None,
            file: None,
            tls: None,
            login: None,
            threads: None,
            data: Default::default(),
        }
    }
}

/// Hears about the test as it runs.
pub trait Observer {
    fn started(&mut self) {}
    fn interval(&mut self, _interval: &Interval) {}
    /// A TCP sample this side's senders took over an interval; the peer's intervals of
    /// the same flow, stream and start carry the bytes.
    fn tcp_sample(&mut self, _sample: &TcpSample) {}
    /// The session's data token, when the test starts: what latency probes beside the test
    /// present (`wirerate rpm`).
    fn session(&mut self, _token: &wirerate_proto::Token) {}
    /// Called about every 20 ms while the test runs.
    fn tick(&mut self, _elapsed_s: f64) {}
    /// A sweep finished a size (each size once, in order).
    fn sweep_point(&mut self, _point: &SweepPoint) {}
}

/// Both sides' measurements.
pub struct ClientOutcome {
    pub local: SideReport,
    pub remote: SideReport,
    pub server_addr: SocketAddr,
    /// Loss and jitter of UDP flows, where the driver measured them (iperf3 UDP tests).
    pub udp: Option<wirerate_core::result::UdpSummary>,
    /// The test was ended early through [`ClientConfig::interrupt`].
    pub interrupted: bool,
}

impl ClientConfig {
    /// Whether the test has been asked to end early.
    pub fn interrupted(&self) -> bool {
        self.interrupt.is_some_and(|f| f.load(Ordering::Relaxed))
    }
}

/// Runs one test against the server at `addr`.
pub fn run_test(
    addr: SocketAddr,
    spec: &TestSpec,
    cfg: &ClientConfig,
    obs: &mut dyn Observer,
) -> Result<ClientOutcome, EngineError> {
    let bind = cfg.bind.map(|ip| SocketAddr::new(ip, 0));
    let sock = connect(addr, bind, None, cfg.connect_timeout)?;
    let local_ip = sock.local_addr().ok().map(|a| a.ip());
    let mut sess =
        crate::login::client_session(spec, cfg.login.as_ref(), cfg.tls.is_some(), cfg.idle)?;
    let mut ctl = match &cfg.tls {
        Some(tls) => start_tls(sock, tls, cfg.idle, &mut sess)?,
        None => Control::new(sock),
    };
    crate::login::bind_to_tls(&ctl, &mut sess)?;
    let mut run = ClientRun {
        addr,
        bind,
        spec,
        cfg,
        obs,
        local_ip,
        side: None,
        local: None,
        remote: None,
        started: None,
        streams: Vec::new(),
        session_token: None,
        shown: 0,
        asked: false,
        interrupted: false,
    };
    drive(&mut ctl, &mut sess, &mut run)?;
    match (run.local, run.remote) {
        (Some(local), Some(remote)) => Ok(ClientOutcome {
            local,
            remote,
            server_addr: addr,
            udp: None,
            interrupted: run.interrupted,
        }),
        _ => Err(EngineError::ResultsMissing(
            "the test ended without both reports",
        )),
    }
}

/// The client's part of the control loop: open the streams when accepted, start the
/// workers when told, show intervals, and send this side's report when they are done.
struct ClientRun<'a> {
    addr: SocketAddr,
    bind: Option<SocketAddr>,
    spec: &'a TestSpec,
    cfg: &'a ClientConfig,
    obs: &'a mut dyn Observer,
    local_ip: Option<IpAddr>,
    side: Option<SideRun>,
    local: Option<SideReport>,
    remote: Option<SideReport>,
    started: Option<Instant>,
    streams: Vec<Attached>,
    session_token: Option<Token>,
    /// Intervals of this side already shown; the last, partial one comes with the report.
    shown: usize,
    /// Ctrl-C seen, and whether it cut the test short.
    asked: bool,
    interrupted: bool,
}

impl Handler<ClientSession> for ClientRun<'_> {
    const PEER: Peer = Peer {
        write: "writing to the server",
        read: "reading from the server",
    };

    fn read_error(e: std::io::Error) -> EngineError {
        crate::login::read_error(e)
    }

    fn idle(&self) -> Duration {
        self.cfg.idle
    }

    fn wake_at(&self) -> Option<Instant> {
        self.side.as_ref().and_then(|s| s.next_tick())
    }

    fn on_event(&mut self, sess: &mut ClientSession, ev: ClientEvent) -> Result<(), EngineError> {
        let (spec, cfg) = (self.spec, self.cfg);
        match ev {
            ClientEvent::Accepted(token, ports) => {
                self.session_token = Some(token);
                self.streams = match spec.protocol {
                    Protocol::Tcp => open_streams(self.addr, self.bind, spec, token, cfg)?,
                    Protocol::Udp => {
                        let (streams, proofs) =
                            open_udp_streams(self.addr, &ports, spec, token, cfg)?;
                        sess.udp_proof(proofs);
                        streams
                    }
                };
            }
            ClientEvent::Start => {
                self.started = Some(Instant::now());
                self.side = Some(SideRun::start(
                    spec,
                    std::mem::take(&mut self.streams),
                    self.local_ip,
                    cfg.idle,
                    RunContext {
                        token: self.session_token,
                        crr: None,
                        cpu: cfg.cpu,
                        file: cfg.file.clone(),
                        threads: cfg.threads,
                    },
                )?);
                if let Some(token) = &self.session_token {
                    self.obs.session(token);
                }
                self.obs.started();
            }
            ClientEvent::Interval(iv) => self.obs.interval(&iv),
            ClientEvent::PeerReport(r) => {
                self.remote = Some(*r);
                if let Some(s) = &self.side {
                    s.peer_done();
                }
            }
        }
        Ok(())
    }

    fn after(&mut self, sess: &mut ClientSession, now: Instant) -> Result<(), EngineError> {
        if self.cfg.interrupted() && !self.asked {
            self.asked = true;
            if let Some(s) = &self.side {
                // the server stops its senders, ours stop here; the reports follow
                if sess.stop() {
                    s.stop_sending();
                    self.interrupted = true;
                }
            } else if self.local.is_none() {
                return Err(EngineError::InterruptedBeforeStart);
            }
        }
        let Some(s) = self.side.as_mut() else {
            return Ok(());
        };
        // what this side's UDP receivers took, when the server sends UDP and asked for it
        sess.udp_feedback(s.moved(Role::Receiver), now);
        for iv in s.poll_intervals(now) {
            self.obs.interval(&iv);
            self.shown += 1;
        }
        for sample in s.new_tcp_samples() {
            self.obs.tcp_sample(&sample);
        }
        // done is read first: a sweep's last size is sent before its worker returns
        let done = s.is_done();
        for p in s.new_sweep_points() {
            self.obs.sweep_point(&p);
        }
        if let Some(t0) = self.started {
            self.obs.tick(now.duration_since(t0).as_secs_f64());
        }
        if done {
            let given = s.given_tcp_samples();
            if let Some(s) = self.side.take() {
                let report = s.finish();
                for sample in report.tcp_samples.iter().skip(given) {
                    self.obs.tcp_sample(sample);
                }
                for iv in report.intervals.iter().skip(self.shown) {
                    self.obs.interval(iv);
                }
                // the in-band notes are joined here, from the server's report: the
                // timelines stay on this side
                let wire = SideReport {
                    inband: Vec::new(),
                    ..report.clone()
                };
                sess.local_report(wire, Instant::now());
                self.local = Some(report);
            }
        }
        Ok(())
    }

    fn stop(&mut self) {
        if let Some(s) = self.side.take() {
            s.abort();
            let _ = s.finish();
        }
    }
}

/// The any-address of `addr`'s family.
fn unspecified(addr: SocketAddr) -> IpAddr {
    if addr.is_ipv4() {
        IpAddr::from([0u8; 4])
    } else {
        IpAddr::from([0u16; 8])
    }
}

fn open_streams(
    addr: SocketAddr,
    bind: Option<SocketAddr>,
    spec: &TestSpec,
    token: Token,
    cfg: &ClientConfig,
) -> Result<Vec<Attached>, EngineError> {
    let mut out = Vec::new();
    for (index, (flow, id)) in stream_order(spec).into_iter().enumerate() {
        let bind = match cfg.cport {
            Some(_) => Some(SocketAddr::new(
                bind.map_or(unspecified(addr), |b| b.ip()),
                wirerate_engine::net::data_port(cfg.cport, index)?,
            )),
            None => bind,
        };
        let mut sock = wirerate_engine::net::connect_with(
            addr,
            bind,
            Some(spec),
            &cfg.data,
            cfg.connect_timeout,
        )?;
        let hello = DataHello {
            token,
            flow,
            stream_id: id,
        };
        sock.set_write_timeout(Some(cfg.idle))
            .and_then(|()| sock.write_all(&hello.emit()))
            .map_err(EngineError::io("opening a data stream"))?;
        out.push(Attached {
            flow,
            id,
            role: Side::Client.role(flow),
            sock: DataSock::Tcp(sock),
        });
    }
    Ok(out)
}

/// Validates each UDP stream's address with the server and returns the streams and the
/// proofs to send over control.
fn open_udp_streams(
    addr: SocketAddr,
    ports: &[u16],
    spec: &TestSpec,
    token: Token,
    cfg: &ClientConfig,
) -> Result<(Vec<Attached>, Vec<UdpProof>), EngineError> {
    let order = stream_order(spec);
    let set = client_setup(
        addr.ip(),
        ports,
        &order,
        cfg.bind,
        cfg.cport,
        token,
        cfg.idle,
    )?;
    if cfg.data.dont_fragment {
        for u in &set {
            wirerate_engine::dataopts::set_dont_fragment(&socket2::SockRef::from(&u.sock))
                .map_err(EngineError::io("setting IP_MTU_DISCOVER"))?;
        }
    }
    let proofs = set
        .iter()
        .map(|u| UdpProof {
            flow: u.flow,
            stream_id: u.id,
            nonce: u.nonce,
        })
        .collect();
    let streams = set
        .into_iter()
        .map(|u| Attached {
            flow: u.flow,
            id: u.id,
            role: Side::Client.role(u.flow),
            sock: DataSock::Udp(u.sock, token, None),
        })
        .collect();
    Ok((streams, proofs))
}

/// What a peer answered when asked for TLS on a fresh control connection.
pub enum TlsAnswer {
    /// It agreed, and the handshake is done.
    Agreed(Control),
    /// It refused: the socket and the preamble it answered with.
    Refused(
        std::net::TcpStream,
        [u8; wirerate_proto::frame::PREAMBLE_LEN],
    ),
}

/// Asks the peer for TLS and does the handshake when it agrees. `asking` and `waiting`
/// name the two steps in an error ("asking the server for TLS", …).
pub fn ask_tls(
    mut sock: std::net::TcpStream,
    tls: &crate::tls::ClientTls,
    idle: Duration,
    (asking, waiting): (&'static str, &'static str),
) -> Result<TlsAnswer, EngineError> {
    use wirerate_proto::{Channel, Preamble};
    let deadline = Instant::now() + idle;
    let _ = sock.set_write_timeout(Some(idle));
    sock.write_all(&Preamble::new(Channel::TlsControl).emit())
        .map_err(EngineError::io(asking))?;
    let mut pre = [0u8; wirerate_proto::frame::PREAMBLE_LEN];
    wirerate_engine::net::read_exact_by(&mut sock, &mut pre, deadline)
        .map_err(EngineError::io(waiting))?;
    match Preamble::parse(&pre) {
        Ok(p) if p.channel == Channel::TlsControl => {
            let conn = tls
                .connect(&mut sock, deadline)
                .map_err(|e| EngineError::Setup(e.to_string()))?;
            Ok(TlsAnswer::Agreed(Control::with_tls(sock, conn)))
        }
        _ => Ok(TlsAnswer::Refused(sock, pre)),
    }
}

/// Asks for TLS, and does the handshake when the server agrees. A server without TLS
/// answers with a refusal, which is returned as the session reads it.
fn start_tls(
    sock: std::net::TcpStream,
    tls: &crate::tls::ClientTls,
    idle: Duration,
    sess: &mut ClientSession,
) -> Result<Control, EngineError> {
    let steps = (
        "asking the server for TLS",
        "waiting for the server's TLS answer",
    );
    match ask_tls(sock, tls, idle, steps)? {
        TlsAnswer::Agreed(ctl) => Ok(ctl),
        TlsAnswer::Refused(sock, pre) => {
            // the server's refusal follows its preamble
            let mut ctl = Control::new(sock);
            sess.handle_input(&pre, Instant::now())?;
            let until = Instant::now() + Duration::from_secs(1);
            while Instant::now() < until {
                match ctl.read(Duration::from_millis(100)) {
                    Ok(Input::Bytes(n)) => {
                        sess.handle_input(ctl.bytes(n), Instant::now())?;
                    }
                    Ok(Input::Nothing) => {}
                    _ => break,
                }
            }
            Err(EngineError::Setup(
                "the server does not offer TLS on the control connection".into(),
            ))
        }
    }
}
