//! UDP latency probes beside a running test (`wirerate rpm`): the server's socket on its own
//! port that answers them, and the client's prober (docs/protocol.md, "Latency probes"; the
//! datagrams are `wirerate_proto::udp_probe`'s).

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use wirerate_proto::udp_probe::{self, PROBE_LEN};
use wirerate_proto::Token;

/// Nanoseconds on this process's monotonic clock, from its first use: the clock both ends
/// stamp probes with (each host its own; only differences on one host mean anything).
pub fn clock_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// How often the server's probe socket wakes to see whether it should stop.
const WAKE: Duration = Duration::from_millis(250);

/// Binds the server's UDP probe socket on the listener's address and port. Shared with
/// the iperf3 front end's UDP streams, which bind that port too (both set SO_REUSEADDR;
/// the newest, more specific binding takes their datagrams).
pub fn bind_server(local: SocketAddr) -> io::Result<UdpSocket> {
    let s = crate::net::bind_udp_shared(local)?;
    s.set_read_timeout(Some(WAKE))?;
    Ok(s)
}

/// Answers probes that carry the running test's token and come from its client's address,
/// until `stop` says so. `active` is the running test: its client's address (when known),
/// its token and the TOS its probe answers carry.
pub fn serve(
    sock: UdpSocket,
    stop: impl Fn() -> bool,
    active: impl Fn() -> Option<(Option<IpAddr>, Token, Option<u8>)>,
) {
    let mut buf = [0u8; 2 * PROBE_LEN];
    // the TOS the socket's replies carry now (0: unmarked)
    let mut marked = 0u8;
    while !stop() {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        let recv_ns = clock_ns();
        let session = active().filter(|(peer_ip, _, _)| same_host(*peer_ip, from.ip()));
        let token = session.map(|s| s.1);
        if let Some(reply) = udp_probe::answer(&buf[..n], token.as_ref(), recv_ns, clock_ns()) {
            mark(&sock, &mut marked, session.and_then(|s| s.2));
            let _ = sock.send_to(&reply, from);
        }
    }
}

/// Sets the socket's TOS to the running test's class for probe answers (unmarked: 0) where
/// it carries another: one socket answers every test's probes, one test at a time.
fn mark(sock: &UdpSocket, marked: &mut u8, want: Option<u8>) {
    let want = want.unwrap_or(0);
    if *marked != want && crate::net::set_tos(&socket2::SockRef::from(sock), want).is_ok() {
        *marked = want;
    }
}

fn same_host(client: Option<IpAddr>, from: IpAddr) -> bool {
    client.is_none_or(|c| c.to_canonical() == from.to_canonical())
}

/// One UDP probe's times: sent (seconds from the prober's epoch), its round trip, and the
/// four stamps (seconds; the client's on [`clock_ns`], the server's on its own clock).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UdpProbeSample {
    pub at_s: f64,
    pub rtt_ms: f64,
    pub stamps: wirerate_core::owd::Stamps,
}

/// What a UDP prober gathered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UdpProbeLog {
    pub samples: Vec<UdpProbeSample>,
    /// Probes never answered (lost, refused, or a server without UDP probes).
    pub failed: u64,
}

/// How long a probe's answer is waited for after the prober is told to stop.
const LINGER: Duration = Duration::from_secs(1);

/// Sends a UDP probe every `period` on a thread until [`UdpProber::finish`].
pub struct UdpProber {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<UdpProbeLog>,
}

impl UdpProber {
    pub fn start(
        addr: SocketAddr,
        token: Token,
        period: Duration,
        epoch: Instant,
        tos: Option<u8>,
    ) -> UdpProber {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let sock = match open(addr, tos) {
                Ok(s) => s,
                Err(_) => return UdpProbeLog::default(),
            };
            run(&sock, token, period, epoch, &flag)
        });
        UdpProber { stop, handle }
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Stops sending; waits at most [`LINGER`] for answers still out.
    pub fn finish(self) -> UdpProbeLog {
        self.stop();
        self.handle.join().unwrap_or_default()
    }
}

fn open(addr: SocketAddr, tos: Option<u8>) -> io::Result<UdpSocket> {
    let local: SocketAddr = match addr {
        SocketAddr::V4(_) => (IpAddr::from([0u8; 4]), 0).into(),
        SocketAddr::V6(_) => (IpAddr::from([0u16; 8]), 0).into(),
    };
    let sock = UdpSocket::bind(local)?;
    if let Some(tos) = tos {
        let _ = crate::net::set_tos(&socket2::SockRef::from(&sock), tos);
    }
    sock.connect(addr)?;
    Ok(sock)
}

fn run(
    sock: &UdpSocket,
    token: Token,
    period: Duration,
    epoch: Instant,
    stop: &AtomicBool,
) -> UdpProbeLog {
    let mut log = UdpProbeLog::default();
    // sequence number → client send time (ns), for the probes not yet answered
    let mut out: std::collections::BTreeMap<u64, u64> = Default::default();
    let mut seq = 0u64;
    let mut next = Instant::now();
    let mut stopped_at = None;
    let mut buf = [0u8; 2 * PROBE_LEN];
    let epoch_s = clock_ns_at(epoch) as f64 / 1e9;
    loop {
        let now = Instant::now();
        if stopped_at.is_none() && stop.load(Ordering::Relaxed) {
            stopped_at = Some(now);
        }
        match stopped_at {
            Some(at) if out.is_empty() || now >= at + LINGER => break,
            None if now >= next => {
                let sent = clock_ns();
                if sock.send(&udp_probe::request(seq, sent, &token)).is_ok() {
                    out.insert(seq, sent);
                } else {
                    log.failed += 1;
                }
                seq += 1;
                next += period;
                continue;
            }
            _ => {}
        }
        // waits for an answer until the next send (at most 20 ms: a stop is seen soon)
        let wait = next.saturating_duration_since(now);
        let _ = sock.set_read_timeout(Some(
            wait.clamp(Duration::from_millis(1), Duration::from_millis(20)),
        ));
        let n = match sock.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                // nothing listens there: the next probe will say the same
                std::thread::sleep(wait.min(Duration::from_millis(20)));
                continue;
            }
            Err(_) => continue,
        };
        let recv = clock_ns();
        let Some(r) = udp_probe::parse_reply(&buf[..n], &token) else {
            continue;
        };
        if out.remove(&r.seq) != Some(r.client_send_ns) {
            continue;
        }
        let s = |ns: u64| ns as f64 / 1e9;
        log.samples.push(UdpProbeSample {
            at_s: s(r.client_send_ns) - epoch_s,
            rtt_ms: recv.saturating_sub(r.client_send_ns) as f64 / 1e6,
            stamps: wirerate_core::owd::Stamps {
                client_send_s: s(r.client_send_ns),
                server_recv_s: s(r.server_recv_ns),
                server_send_s: s(r.server_send_ns),
                client_recv_s: s(recv),
            },
        });
    }
    log.failed += out.len() as u64;
    log.samples.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    log
}

/// [`clock_ns`] at an earlier instant.
fn clock_ns_at(t: Instant) -> u64 {
    clock_ns().saturating_sub(t.elapsed().as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in server answering as the real one does, for one token.
    fn echo(token: Token) -> (SocketAddr, Arc<AtomicBool>, JoinHandle<()>) {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let addr = sock.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let h = std::thread::spawn(move || {
            let mut b = [0u8; 128];
            while !flag.load(Ordering::Relaxed) {
                if let Ok((n, from)) = sock.recv_from(&mut b) {
                    let t = clock_ns();
                    if let Some(r) = udp_probe::answer(&b[..n], Some(&token), t, clock_ns()) {
                        sock.send_to(&r, from).unwrap();
                    }
                }
            }
        });
        (addr, stop, h)
    }

    #[test]
    fn probes_come_back_with_ordered_stamps() {
        let (addr, stop, h) = echo([9; 16]);
        let p = UdpProber::start(
            addr,
            [9; 16],
            Duration::from_millis(20),
            Instant::now(),
            None,
        );
        std::thread::sleep(Duration::from_millis(300));
        let log = p.finish();
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
        assert!((5..=25).contains(&log.samples.len()), "{log:?}");
        assert_eq!(log.failed, 0, "{log:?}");
        for s in &log.samples {
            let t = s.stamps;
            assert!(t.client_send_s <= t.server_recv_s && t.server_recv_s <= t.server_send_s);
            assert!(t.server_send_s <= t.client_recv_s, "{s:?}");
            assert!(
                s.rtt_ms > 0.0 && s.rtt_ms < 1000.0 && s.at_s >= 0.0,
                "{s:?}"
            );
        }
    }

    #[test]
    fn a_wrong_token_is_never_answered() {
        let (addr, stop, h) = echo([9; 16]);
        let p = UdpProber::start(
            addr,
            [8; 16],
            Duration::from_millis(20),
            Instant::now(),
            None,
        );
        std::thread::sleep(Duration::from_millis(100));
        let log = p.finish();
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
        assert!(log.samples.is_empty(), "{log:?}");
        assert!(log.failed >= 3, "{log:?}");
    }
}
