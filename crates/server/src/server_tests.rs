use std::sync::atomic::AtomicBool;

use wirerate_core::spec::End;

use super::*;
use wirerate_control::client::{run_test, ClientConfig, Observer};

/// A server of this name panics in its first session: a fault that no error path handles.
const PANIC_ONCE: &str = "test: panic in the first session";
static PANICKED: AtomicBool = AtomicBool::new(false);

/// A server of this name panics in its first session once the workers run.
const PANIC_RUNNING: &str = "test: panic while the test runs";
/// The same, in a session with an iperf3 client.
const PANIC_RUNNING_IPERF3: &str = "test: panic while the iperf3 test runs";

/// The fault names that have fired: each fires once per test binary.
static FIRED: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

/// Panics in a session of a server named `fault`, the first time only.
pub(crate) fn maybe_panic(shared: &Shared, fault: &'static str) {
    if shared.cfg.name != fault {
        return;
    }
    let first = {
        let mut fired = FIRED.lock().unwrap_or_else(|p| p.into_inner());
        let first = !fired.contains(&fault);
        fired.push(fault);
        first
    };
    if first {
        if fault == PANIC_ONCE {
            PANICKED.store(true, Ordering::SeqCst);
        }
        panic!("injected panic: {fault}");
    }
}

/// Where the injected faults go: before the session, and while its test runs.
pub(crate) const AT_START: &str = PANIC_ONCE;
pub(crate) const WHILE_RUNNING: &str = PANIC_RUNNING;
pub(crate) const WHILE_RUNNING_IPERF3: &str = PANIC_RUNNING_IPERF3;

struct Quiet;
impl Observer for Quiet {}

#[test]
fn the_slot_is_free_again_after_a_panic_in_a_session() {
    let (addr, shared, ended) = panicking_server(PANIC_ONCE);
    let spec = spec_of(End::Bytes { bytes: 1 << 20 });
    let cfg = client_config();
    // the first session panics: its client sees the connection end, not a result
    assert!(run_test(addr, &spec, &cfg, &mut Quiet).is_err());
    assert!(PANICKED.load(Ordering::SeqCst));
    // the unwinding session reported a failed test and left the slot free
    assert_slot_freed(&shared, &ended);
    // and the next client is served, not told the server is busy
    let out = run_test(addr, &spec, &cfg, &mut Quiet).expect("the second test runs");
    let moved: u64 = out.remote.streams.iter().map(|s| s.bytes).sum();
    assert_eq!(moved, 1 << 20);
    assert_eq!(ended.recv_timeout(Duration::from_secs(5)), Ok(true));
    assert!(shared.active().is_none());
}

/// A server named for a fault (it panics in its first session, where the fault says); returns
/// its address, its shared state and the channel that hears of each test's end.
fn panicking_server(name: &str) -> (SocketAddr, Arc<Shared>, Receiver<bool>) {
    let (ended_tx, ended) = mpsc::channel();
    let server = Server::bind(
        "127.0.0.1:0".parse().unwrap(),
        ServerConfig {
            quiet: true,
            name: name.into(),
            idle: Duration::from_secs(3),
            on_test_end: Some(ended_tx),
            ..Default::default()
        },
    )
    .unwrap();
    let addr = server.local_addr().unwrap();
    let shared = server.shared.clone();
    server.spawn().unwrap();
    (addr, shared, ended)
}

/// The test a client asks for: its end, the rest default.
fn spec_of(end: End) -> TestSpec {
    TestSpec {
        end,
        ..Default::default()
    }
}

/// The clients' settings: a short idle limit, so that a broken session ends them soon.
fn client_config() -> ClientConfig {
    ClientConfig {
        idle: Duration::from_secs(3),
        ..Default::default()
    }
}

/// After a session that panicked: its test was reported failed, and the slot is free.
fn assert_slot_freed(shared: &Shared, ended: &Receiver<bool>) {
    assert_eq!(ended.recv_timeout(Duration::from_secs(5)), Ok(false));
    assert!(shared.active().is_none());
    assert_eq!(shared.pending.load(Ordering::SeqCst), 0);
}

#[test]
fn a_panic_while_the_workers_run_frees_the_slot_and_stops_them() {
    let (addr, shared, ended) = panicking_server(PANIC_RUNNING);
    let spec = spec_of(End::Time { seconds: 30.0 });
    let cfg = client_config();
    let t0 = Instant::now();
    // the server's workers are stopped as the panic unwinds: the client's stream breaks
    // long before the 30 s it asked for
    assert!(run_test(addr, &spec, &cfg, &mut Quiet).is_err());
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    assert_slot_freed(&shared, &ended);
    let short = spec_of(End::Bytes { bytes: 1 << 20 });
    let out = run_test(addr, &short, &cfg, &mut Quiet).expect("the second test runs");
    let moved: u64 = out.remote.streams.iter().map(|s| s.bytes).sum();
    assert_eq!(moved, 1 << 20);
    assert_eq!(ended.recv_timeout(Duration::from_secs(5)), Ok(true));
}

#[test]
fn a_panic_in_an_iperf3_session_frees_the_slot() {
    let (addr, shared, ended) = panicking_server(PANIC_RUNNING_IPERF3);
    let spec = spec_of(End::Time { seconds: 30.0 });
    let cfg = client_config();
    let t0 = Instant::now();
    assert!(wirerate_control::iperf3::run_client(addr, &spec, &cfg, &mut Quiet).is_err());
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    assert_slot_freed(&shared, &ended);
    // the next iperf3 client is served, not denied as busy
    let short = spec_of(End::Time { seconds: 1.0 });
    let out = wirerate_control::iperf3::run_client(addr, &short, &cfg, &mut Quiet)
        .expect("the second iperf3 test runs");
    assert!(out.remote.streams.iter().map(|s| s.bytes).sum::<u64>() > 0);
    assert_eq!(ended.recv_timeout(Duration::from_secs(5)), Ok(true));
    assert!(shared.active().is_none());
}

/// A data stream that carries the running session's token is refused when it comes from
/// another address than the session's control connection.
#[test]
fn a_data_stream_with_the_right_token_from_another_address_is_refused() {
    use wirerate_proto::{ClientEvent, ClientSession};
    let (addr, _shared, _ended) = panicking_server("test: no fault");
    let spec = spec_of(End::Time { seconds: 5.0 });
    let mut ctl = TcpStream::connect(addr).unwrap();
    ctl.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut sess = ClientSession::new(&spec, Instant::now(), Duration::from_secs(5));
    let mut token = None;
    let mut buf = [0u8; 4096];
    while token.is_none() {
        while let Some(b) = sess.poll_transmit() {
            ctl.write_all(&b).unwrap();
        }
        let n = ctl.read(&mut buf).unwrap();
        assert!(n > 0, "the server closed");
        for ev in sess.handle_input(&buf[..n], Instant::now()).unwrap() {
            if let ClientEvent::Accepted(t, _) = ev {
                token = Some(t);
            }
        }
    }
    let hello = DataHello {
        token: token.unwrap(),
        flow: wirerate_core::spec::Flow::ClientToServer,
        stream_id: 0,
    };
    let data_from = |ip: &str| {
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        let local: SocketAddr = format!("{ip}:0").parse().unwrap();
        sock.bind(&local.into()).unwrap();
        sock.connect(&addr.into()).unwrap();
        let mut s = TcpStream::from(sock);
        s.write_all(&hello.emit()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        s
    };
    // from another host on the path: closed at once
    let mut forged = data_from("127.0.0.2");
    let t0 = Instant::now();
    assert!(matches!(forged.read(&mut buf), Ok(0) | Err(_)));
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    // from the client's own address: attached, and the test starts
    let mut ok = data_from("127.0.0.1");
    let got = ok.read(&mut buf);
    assert!(
        matches!(&got, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "{got:?}"
    );
}

/// A server that is never connected to: its admission, driven directly.
fn admission_only(startups: &str) -> Arc<Shared> {
    let server = Server::bind(
        "127.0.0.1:0".parse().unwrap(),
        ServerConfig {
            quiet: true,
            startups: crate::startups::Startups::parse(startups).unwrap(),
            ..Default::default()
        },
    )
    .unwrap();
    server.shared.clone()
}

#[test]
fn pending_connections_of_one_ipv6_64_count_as_one_source() {
    let shared = admission_only("1000");
    // 130 addresses of one /64, 8 connections each: as many as one address may have
    let held: Vec<Pending> = (1..=130u16)
        .flat_map(|h| (0..8).map(move |_| h))
        .filter_map(|h| {
            let ip: IpAddr = format!("fd00::{h:x}").parse().unwrap();
            shared.claim_pending(Some(ip)).ok()
        })
        .collect();
    assert_eq!(held.len(), 8);
    assert_eq!(
        shared
            .claim_pending(Some("fd00::ffff".parse().unwrap()))
            .err(),
        Some("too many pending connections from your address")
    );
    // another /64, and IPv4 clients, still get in
    assert!(shared
        .claim_pending(Some("fd00:0:0:1::1".parse().unwrap()))
        .is_ok());
    assert!(shared
        .claim_pending(Some("192.0.2.1".parse().unwrap()))
        .is_ok());
    drop(held);
    assert_eq!(shared.pending.load(Ordering::SeqCst), 0);
    assert!(shared.pending_by_ip.lock().unwrap().is_empty());
}

#[test]
fn near_the_cap_new_connections_are_refused_at_random() {
    let shared = admission_only("10:30:100");
    let mut held = Vec::new();
    let mut refused_between = 0;
    // one connection from each of 2000 IPv4 addresses, held
    for i in 0..2000u32 {
        let ip = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i));
        let before = shared.pending.load(Ordering::SeqCst);
        match shared.claim_pending(Some(ip)) {
            Ok(p) => held.push(p),
            Err(_) if before < 100 => refused_between += 1,
            Err(_) => {}
        }
        assert!(before < 10 || held.len() <= 100);
        if before < 10 {
            assert_eq!(held.len(), before + 1, "refused below the start");
        }
    }
    assert_eq!(held.len(), 100);
    // between start and full, some were refused before the cap was reached
    assert!(
        refused_between > 20,
        "{refused_between} refused between 10 and 100"
    );
    // the running test's own client is not dropped at random, only at the cap
    held.truncate(50);
    let (tx, _rx) = mpsc::channel();
    let tester: IpAddr = "192.0.2.7".parse().unwrap();
    *shared.active() = Some(Active {
        token: [0; 16],
        tx,
        free_at: Instant::now(),
        iperf3: None,
        crr: None,
        peer_ip: Some(tester),
        probe_tos: None,
    });
    let streams: Vec<Pending> = (0..50)
        .map(|_| shared.claim_pending(Some(tester)).unwrap())
        .collect();
    assert!(shared.claim_pending(Some(tester)).is_err());
    drop(streams);
    *shared.active() = None;
}
