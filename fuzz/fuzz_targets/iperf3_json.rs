//! iperf3's control connection as this server reads it: the state bytes and length-prefixed
//! JSON, the parameter document, and the results document.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use wirerate_proto::iperf3::params::spec_from_params;
use wirerate_proto::iperf3::{Cookie, Results, ServerSession};

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = spec_from_params(&v);
        let _ = Results::parse(&v);
    }
    let _ = Cookie::parse(data);
    let now = Instant::now();
    let mut s = ServerSession::new(now, Duration::from_secs(10));
    for (i, chunk) in data.chunks(7).enumerate() {
        let t = now + Duration::from_millis(i as u64);
        if s.handle_input(chunk, t).is_err() {
            break;
        }
        while s.poll_transmit().is_some() {}
    }
});
