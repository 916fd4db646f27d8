//! `wirerate serve --metrics ADDR`: the server's own counters and gauges on `/metrics`, read
//! from the server's figures (`wirerate_server::stats`) at each scrape.

use std::net::SocketAddr;
use std::sync::Arc;

use wirerate_prom::http::{Handler, Request, Response, Server};
use wirerate_prom::{Exposition, Kind};
use wirerate_server::stats::{ServerStats, Snapshot};

/// Binds the metrics listener (before the server detaches, so a bad address is said at
/// once); [`Server::spawn`] starts it.
pub fn bind(addr: SocketAddr, stats: ServerStats) -> anyhow::Result<Server> {
    let started = super::exporter::now_unix_s();
    let handler: Handler = Arc::new(move |req: &Request| match req.path.as_str() {
        "/metrics" => Response::metrics(exposition(&stats.snapshot(), started)),
        _ => Response::text(404, "not found: the server's metrics are on /metrics"),
    });
    Server::bind(addr, handler).map_err(|e| anyhow::anyhow!("--metrics {addr}: {e}"))
}

/// The families of one snapshot.
pub fn exposition(s: &Snapshot, started_unix_s: f64) -> String {
    let mut out = Exposition::new();
    let n = |v: u64| v as f64;
    let c = Kind::Counter;
    out.single(
        "wirerate_server_connections_accepted_total",
        c,
        "Connections given the test slot.",
        Some(n(s.accepted)),
    );
    out.single(
        "wirerate_server_tests_served_total",
        c,
        "Tests that ran to their end.",
        Some(n(s.served)),
    );
    out.single(
        "wirerate_server_tests_failed_total",
        c,
        "Tests that started and did not end well (a stream broke, a peer went silent).",
        Some(n(s.failed)),
    );
    let mut refused = out.family(
        "wirerate_server_refused_total",
        c,
        "Connections and tests turned away, by reason: busy, pending (--max-startups), \
         handshake, tls, login, limits (a cap or rule), data_stream, third_party, other.",
    );
    for (why, count) in &s.refused {
        refused.sample(&[("reason", why.name())], n(*count));
    }
    out.single(
        "wirerate_server_test_bytes_total",
        c,
        "Bytes the tests served moved, as their receivers counted them.",
        Some(n(s.bytes)),
    );
    out.single(
        "wirerate_server_logins_failed_total",
        c,
        "Logins that failed: a wrong password or unknown user, a login that broke off, a \
         certificate that names no user.",
        Some(n(s.logins_failed)),
    );
    let g = Kind::Gauge;
    out.single(
        "wirerate_server_active_tests",
        g,
        "Tests running now.",
        Some(n(s.active_tests)),
    );
    out.single(
        "wirerate_server_test_slots",
        g,
        "Tests the server runs at once.",
        Some(n(s.slots)),
    );
    out.single(
        "wirerate_server_pending_connections",
        g,
        "Connections accepted that have not yet said what they are.",
        Some(n(s.pending)),
    );
    out.single(
        "wirerate_server_start_time_seconds",
        g,
        "When the server started, seconds since the Unix epoch.",
        Some(started_unix_s),
    );
    out.info(
        "wirerate_server_build_info",
        "The server's version.",
        &[("version", env!("CARGO_PKG_VERSION"))],
    );
    out.finish()
}
