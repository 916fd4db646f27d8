use std::sync::atomic::AtomicBool;

use wirerate_core::spec::End;

use super::*;
use crate::client::{run_test, ClientConfig, Observer};

/// A server of this name panics in its first session: a fault that no error path handles.
const PANIC_ONCE: &str = "test: panic in the first session";
static PANICKED: AtomicBool = AtomicBool::new(false);

pub(super) fn maybe_panic(shared: &Shared) {
    if shared.cfg.name == PANIC_ONCE && !PANICKED.swap(true, Ordering::SeqCst) {
        panic!("injected panic in a session");
    }
}

struct Quiet;
impl Observer for Quiet {}

#[test]
fn the_slot_is_free_again_after_a_panic_in_a_session() {
    let (ended_tx, ended) = mpsc::channel();
    let server = Server::bind(
        "127.0.0.1:0".parse().unwrap(),
        ServerConfig {
            quiet: true,
            name: PANIC_ONCE.into(),
            idle: Duration::from_secs(3),
            on_test_end: Some(ended_tx),
            ..Default::default()
        },
    )
    .unwrap();
    let addr = server.local_addr().unwrap();
    let shared = server.shared.clone();
    server.spawn().unwrap();
    let spec = TestSpec {
        end: End::Bytes { bytes: 1 << 20 },
        ..Default::default()
    };
    let cfg = ClientConfig {
        idle: Duration::from_secs(3),
        ..Default::default()
    };
    // the first session panics: its client sees the connection end, not a result
    assert!(run_test(addr, &spec, &cfg, &mut Quiet).is_err());
    assert!(PANICKED.load(Ordering::SeqCst));
    // the unwinding session reported a failed test and left the slot free
    assert_eq!(ended.recv_timeout(Duration::from_secs(5)), Ok(false));
    assert!(shared.active().is_none());
    assert_eq!(shared.pending.load(Ordering::SeqCst), 0);
    // and the next client is served, not told the server is busy
    let out = run_test(addr, &spec, &cfg, &mut Quiet).expect("the second test runs");
    let moved: u64 = out.remote.streams.iter().map(|s| s.bytes).sum();
    assert_eq!(moved, 1 << 20);
    assert_eq!(ended.recv_timeout(Duration::from_secs(5)), Ok(true));
    assert!(shared.active().is_none());
}
