//! The control messages through both session state machines: what a client may send a
//! server, and what a server may send a client, with time moving on.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use wirerate_core::TestSpec;
use wirerate_proto::{ClientSession, ServerSession};

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let now = Instant::now();
    let idle = Duration::from_secs(10);
    let mut s = ServerSession::new(now, idle, [7; 16], "fuzz");
    let mut c = ClientSession::new(&TestSpec::default(), now, idle);
    for (i, chunk) in rest.chunks(usize::from(cut).max(1)).enumerate() {
        let t = now + Duration::from_millis(i as u64 * 100);
        if let Ok(events) = s.handle_input(chunk, t) {
            for ev in events {
                if let wirerate_proto::ServerEvent::Spec(_) = ev {
                    s.accept(Vec::new(), t);
                }
            }
        }
        let _ = c.handle_input(chunk, t);
        let _ = s.handle_timeout(t);
        while s.poll_transmit().is_some() {}
        while c.poll_transmit().is_some() {}
    }
    s.refuse("end");
    let _ = s.handle_close();
});
