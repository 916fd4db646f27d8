//! The agent exchange (third-party tests) as both ends read it: an agent's request frames and
//! a caller's answers, fed in pieces of every size.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use wirerate_proto::agent::{AgentClient, AgentRequest, AgentServer};

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let step = usize::from(cut).max(1);
    let mut server = AgentServer::new();
    for chunk in rest.chunks(step) {
        match server.handle_input(chunk) {
            Ok(None) => {}
            Ok(Some(_)) | Err(_) => break,
        }
    }
    let now = Instant::now();
    let req = AgentRequest {
        to: "127.0.0.1:5350".into(),
        spec: Default::default(),
    };
    let mut client = AgentClient::new(req, now, Duration::from_secs(1), Duration::from_secs(1));
    let _ = client.poll_transmit();
    for chunk in rest.chunks(step) {
        match client.handle_input(chunk, now) {
            Ok(None) => {}
            Ok(Some(_)) | Err(_) => break,
        }
    }
    let _ = client.handle_close();
});
