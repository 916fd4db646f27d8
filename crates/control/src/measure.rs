//! One measurement: run the test against a server, add what is known of the link under it,
//! assemble the result and its diagnosis. `wirerate run` (and its repeats and rate
//! searches), the exporter's probes and the third-party agent (so plans) all measure here.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use wirerate_core::assemble::{assemble, Context};
use wirerate_core::{RunResult, TestSpec};
use wirerate_proto::ProtoError;

use crate::client::{run_test, ClientConfig, Observer};
use crate::link::link_facts;
use wirerate_engine::EngineError;

/// Where a test goes and how the client connects.
#[derive(Debug, Clone)]
pub struct Target {
    pub addr: SocketAddr,
    /// The server is the client's own embedded one, on loopback.
    pub embedded: bool,
    pub cfg: ClientConfig,
    /// The server speaks iperf3's protocol.
    pub iperf3: bool,
}

impl Target {
    /// A wirerate server at `addr`, reached with `cfg`.
    pub fn new(addr: SocketAddr, cfg: ClientConfig) -> Target {
        Target {
            addr,
            embedded: false,
            cfg,
            iperf3: false,
        }
    }

    pub fn describe(&self) -> String {
        if self.embedded {
            format!("embedded server on {}", self.addr)
        } else {
            self.addr.to_string()
        }
    }
}

/// A measured test: its result, diagnosed, and the errors of streams that broke (each once,
/// with how many streams had it when more than one did).
#[derive(Debug, Clone)]
pub struct Measured {
    pub result: RunResult,
    pub errors: Vec<String>,
}

/// Runs one test towards `t` and builds its result. `busy_wait` is how long to keep
/// retrying a server that says it is busy: a run that follows another one gives the server
/// a moment to free its slot. A test that breaks is still a result (see
/// [`Measured::errors`]); an error is a test that could not run.
pub fn measure(
    t: &Target,
    spec: &TestSpec,
    obs: &mut dyn Observer,
    busy_wait: Duration,
) -> Result<Measured, EngineError> {
    let started_unix_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let give_up = Instant::now() + busy_wait;
    let outcome = loop {
        let attempt = if t.iperf3 {
            crate::iperf3::run_client(t.addr, spec, &t.cfg, obs)
        } else {
            run_test(t.addr, spec, &t.cfg, obs)
        };
        match attempt {
            Err(EngineError::Proto(ProtoError::Busy(_))) if Instant::now() < give_up => {
                std::thread::sleep(Duration::from_millis(50));
            }
            r => break r?,
        }
    };
    let facts = link_facts(spec, &outcome.local, Some(t.addr.ip()));
    let result = assemble(
        spec,
        &outcome.local,
        &outcome.remote,
        Context {
            tool_version: env!("CARGO_PKG_VERSION").into(),
            started_unix_s,
            server_addr: t.addr.to_string(),
            embedded_server: t.embedded,
            wire: facts.summary(),
            // an iperf3 peer's datagrams are counted by the iperf3 client driver
            udp: outcome.udp.clone(),
            interrupted: outcome.interrupted,
        },
    );
    let errors = distinct_errors(
        outcome
            .local
            .streams
            .iter()
            .chain(&outcome.remote.streams)
            .filter_map(|s| s.error.as_deref()),
    );
    Ok(Measured { result, errors })
}

/// The streams' errors, each once in the order first seen, with how many streams had it
/// when more than one did.
fn distinct_errors<'a>(errors: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for e in errors {
        match seen.iter_mut().find(|(s, _)| *s == e) {
            Some((_, n)) => *n += 1,
            None => seen.push((e, 1)),
        }
    }
    seen.into_iter()
        .map(|(e, n)| {
            if n > 1 {
                format!("{e} ({n} streams)")
            } else {
                e.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stream_error_is_said_once_with_its_count() {
        let errs = ["reset", "timed out", "reset", "reset"];
        assert_eq!(
            distinct_errors(errs.into_iter()),
            vec!["reset (3 streams)".to_string(), "timed out".to_string()]
        );
        assert!(distinct_errors(std::iter::empty()).is_empty());
    }
}
