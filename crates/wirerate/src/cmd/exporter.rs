//! `wirerate exporter`: Prometheus' multi-target pattern. `GET /probe?target=HOST[:PORT]&…`
//! runs one test against the `wirerate serve` at HOST, as `wirerate run` would, and answers
//! its figures in the text exposition format; `GET /metrics` answers the exporter's own
//! counters. Only the targets given with --allow are probed (an open /probe would aim
//! tests at anyone), and one probe per target runs at a time.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wirerate_prom::http::{Handler, Request, Response, Server};
use wirerate_prom::{Exposition, Kind, MetricSource};
use wirerate_store::Store;

use super::changes::Figure;
use super::exporter_changes::ChangesSource;
use super::probe::{self, Module, Probe, Refused};
use super::run::split_host_port;
use crate::exit::usage;

#[derive(clap::Args, Debug)]
#[command(after_help = "Endpoints:\n  \
/probe?target=HOST[:PORT]&seconds=S&reverse=BOOL&udp=BOOL&bidir=BOOL&bitrate=RATE&parallel=N&window=SIZE&congestion=ALGO&link=RATE&module=NAME\n    \
one test against the wirerate server at HOST; it lasts `seconds` (else the module's, else 5; \
at most --max-seconds), cut to Prometheus' scrape timeout (X-Prometheus-Scrape-Timeout-Seconds) less --timeout-margin\n  \
/probe?target=HOST[:PORT]&kind=rpm&seconds=S&parallel=N\n    \
latency under load as `wirerate rpm` measures it, its four phases a quarter of `seconds` each \
(at least 2 s in all), cut to the scrape timeout less --timeout-margin for each phase: RPM, latency per phase, goodput per phase, the queue\n  \
/metrics   the exporter's own counters; with --db also the change points of the stored history \
(per label, host pair and --changes-metric: its level now and its last change)\n\n\
Answers: 200 with wirerate_probe_success 0 or 1; 400 bad parameters (one line says which); \
403 a target not in --allow; 429 a probe of that target is already running; 503 --max-probes are.\n\
Setup, metrics, alert rules and a dashboard: docs/monitoring.md.")]
pub struct Args {
    /// Address to serve /probe and /metrics on (e.g. 127.0.0.1:9350)
    #[arg(long, value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Targets that may be probed, comma-separated: HOST (any port) or HOST:PORT
    #[arg(
        long,
        value_name = "HOST[,HOST...]",
        value_delimiter = ',',
        required = true
    )]
    pub allow: Vec<String>,
    /// Modules: named sets of probe parameters (TOML, `[modules.NAME]`; docs/monitoring.md)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Store each probe's result in this results database, as `run --db` does (labelled
    /// with the probe's module, else with its kind and parameters: "probe:udp b=20M"); /metrics then also exports the change points of
    /// its history (--changes-metric)
    #[arg(long, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,
    /// The longest test a probe may ask for, in seconds
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub max_seconds: f64,
    /// Seconds of the scrape timeout kept for connecting and the reports: the test gets
    /// the rest
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    pub timeout_margin: f64,
    /// Probes (of different targets) that may run at once; more are answered 503
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub max_probes: u16,
    /// With --db: the figures whose change points over the stored history /metrics
    /// exports, per label and host pair, as `wirerate changes --metric` finds them
    #[arg(
        long,
        value_enum,
        value_name = "FIGURE[,FIGURE...]",
        value_delimiter = ',',
        default_value = "goodput"
    )]
    pub changes_metric: Vec<Figure>,
    /// With --db: search the history for changes again at most this often, and only when
    /// it changed (a run stored, imported or relabelled)
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub changes_every: f64,
}

/// One allowed target: a host, and its port if the entry gave one.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Allowed {
    host: String,
    port: Option<u16>,
}

/// Hosts compare without case and without IPv6 brackets.
fn host_key(h: &str) -> String {
    h.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

fn parse_allow(list: &[String]) -> anyhow::Result<Vec<Allowed>> {
    let mut out = Vec::new();
    for entry in list.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let (host, port) =
            split_host_port(entry).map_err(|e| crate::exit::UsageError(format!("--allow: {e}")))?;
        out.push(Allowed {
            host: host_key(&host),
            port,
        });
    }
    if out.is_empty() {
        return usage("--allow names no target");
    }
    Ok(out)
}

/// Whether `target` (HOST or HOST:PORT, as the probe gives it) is allowed; the key that
/// marks it busy when it is.
fn allowed(allow: &[Allowed], target: &str) -> Option<String> {
    let (host, port) = split_host_port(target).ok()?;
    let host = host_key(&host);
    allow
        .iter()
        .any(|a| a.host == host && (a.port.is_none() || a.port == port))
        .then(|| {
            format!(
                "{host}:{}",
                port.unwrap_or(wirerate_core::spec::DEFAULT_PORT)
            )
        })
}

/// The exporter's own counters.
#[derive(Default)]
struct Counters {
    succeeded: AtomicU64,
    failed: AtomicU64,
    forbidden: AtomicU64,
    bad_request: AtomicU64,
    busy: AtomicU64,
    unstored: AtomicU64,
    running: AtomicU64,
}

pub struct Exporter {
    allow: Vec<Allowed>,
    modules: BTreeMap<String, Module>,
    max_seconds: f64,
    margin: f64,
    max_probes: usize,
    store: Option<Arc<Mutex<Store>>>,
    /// Targets with a probe running.
    busy: Mutex<HashSet<String>>,
    counters: Counters,
    started_unix_s: f64,
    /// More families for /metrics ([`more_sources`]).
    sources: Vec<Box<dyn MetricSource>>,
}

/// Frees a target's place when its probe ends, however it ends.
struct Running<'a>(&'a Exporter, String);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        lock(&self.0.busy).remove(&self.1);
        self.0.counters.running.fetch_sub(1, Ordering::SeqCst);
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Exporter {
    fn handle(&self, req: &Request) -> Response {
        match req.path.as_str() {
            "/probe" => self.probe(req),
            "/metrics" => Response::metrics(self.metrics()),
            "/" => Response::html(LANDING.into()),
            _ => Response::text(404, "not found: the exporter serves /probe and /metrics"),
        }
    }

    fn refuse(&self, Refused(status, why): Refused) -> Response {
        let c = match status {
            403 => &self.counters.forbidden,
            429 | 503 => &self.counters.busy,
            _ => &self.counters.bad_request,
        };
        c.fetch_add(1, Ordering::Relaxed);
        let r = Response::text(status, why);
        match status {
            429 | 503 => r.with_header("Retry-After", "1"),
            _ => r,
        }
    }

    fn probe(&self, req: &Request) -> Response {
        let p = match probe::parse(req, &self.modules, self.max_seconds, self.margin) {
            Ok(p) => p,
            Err(r) => return self.refuse(r),
        };
        let Some(key) = allowed(&self.allow, &p.target) else {
            return self.refuse(Refused(
                403,
                format!("target '{}' is not allowed (see --allow)", p.target),
            ));
        };
        let _running = match self.claim(key, &p.target) {
            Ok(r) => r,
            Err(refused) => return self.refuse(refused),
        };
        let outcome = match p.execute() {
            Ok(o) => o,
            Err(r) => return self.refuse(r),
        };
        self.after(&p, &outcome);
        let mut out = Exposition::new();
        wirerate_prom::probe::write(
            &mut out,
            outcome.result.as_ref(),
            outcome.success,
            outcome.seconds,
        );
        Response::metrics(out.finish())
    }

    /// The target's place, while no other probe of it runs and fewer than --max-probes do.
    fn claim(&self, key: String, target: &str) -> Result<Running<'_>, Refused> {
        let mut busy = lock(&self.busy);
        if busy.contains(&key) {
            return Err(Refused(
                429,
                format!("a probe of '{target}' is already running"),
            ));
        }
        if busy.len() >= self.max_probes {
            return Err(Refused(
                503,
                format!(
                    "{} probes are running, the most at once (--max-probes)",
                    busy.len()
                ),
            ));
        }
        busy.insert(key.clone());
        self.counters.running.fetch_add(1, Ordering::SeqCst);
        Ok(Running(self, key))
    }

    /// Counts the probe, says why it failed, stores its result.
    fn after(&self, p: &Probe, o: &probe::Outcome) {
        let c = if o.success {
            &self.counters.succeeded
        } else {
            &self.counters.failed
        };
        c.fetch_add(1, Ordering::Relaxed);
        if let Some(e) = &o.error {
            eprintln!(
                "wirerate exporter: probe of {} failed: {}",
                wirerate_core::text::safe(&p.target),
                wirerate_core::text::safe(e)
            );
        }
        if let (Some(store), Some(r)) = (&self.store, &o.result) {
            if !super::results::save(&mut lock(store), r, Some(&p.history_label()), None) {
                self.counters.unstored.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn metrics(&self) -> String {
        let mut out = Exposition::new();
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        out.family(
            "wirerate_exporter_probes_total",
            Kind::Counter,
            "Probes run, by whether their test succeeded.",
        )
        .sample(&[("result", "success")], get(&c.succeeded))
        .sample(&[("result", "failure")], get(&c.failed));
        out.family(
            "wirerate_exporter_probes_refused_total",
            Kind::Counter,
            "Probes not run: a target not allowed (403), bad parameters (400), or busy: a probe of the target already running (429) or --max-probes of them (503).",
        )
        .sample(&[("reason", "forbidden")], get(&c.forbidden))
        .sample(&[("reason", "bad_request")], get(&c.bad_request))
        .sample(&[("reason", "busy")], get(&c.busy));
        out.single(
            "wirerate_exporter_probes_running",
            Kind::Gauge,
            "Probes running now.",
            Some(get(&c.running)),
        );
        if self.store.is_some() {
            out.single(
                "wirerate_exporter_results_unstored_total",
                Kind::Counter,
                "Probe results that could not be stored in the results database.",
                Some(get(&c.unstored)),
            );
        }
        out.single(
            "wirerate_exporter_start_time_seconds",
            Kind::Gauge,
            "When the exporter started, seconds since the Unix epoch.",
            Some(self.started_unix_s),
        );
        out.info(
            "wirerate_exporter_build_info",
            "The exporter's version.",
            &[("version", env!("CARGO_PKG_VERSION"))],
        );
        for s in &self.sources {
            s.write(&mut out);
        }
        out.finish()
    }
}

/// Families /metrics exports beside the exporter's counters, each a [`MetricSource`]: with
/// --db, the change points of the stored history.
fn more_sources(a: &Args, store: Option<&Arc<Mutex<Store>>>) -> Vec<Box<dyn MetricSource>> {
    let mut out: Vec<Box<dyn MetricSource>> = Vec::new();
    if let Some(store) = store {
        out.push(Box::new(ChangesSource::new(
            store.clone(),
            a.changes_metric.clone(),
            Duration::from_secs_f64(a.changes_every),
        )));
    }
    out
}

const LANDING: &str = "<!doctype html><title>wirerate exporter</title><h1>wirerate exporter</h1>\
<p><a href=\"/metrics\">/metrics</a>: the exporter's own counters (with --db, the history's change points too).</p>\
<p>/probe?target=HOST[:PORT]: one test against an allowed wirerate server (kind=rpm: latency under load).</p>\n";

pub fn now_unix_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    if !(a.max_seconds.is_finite() && a.max_seconds >= probe::MIN_SECONDS) {
        return usage(format!(
            "--max-seconds must be at least {}",
            probe::MIN_SECONDS
        ));
    }
    if !(a.timeout_margin.is_finite() && a.timeout_margin >= 0.0) {
        return usage("--timeout-margin must be 0 or more seconds");
    }
    if !(a.changes_every.is_finite() && (0.0..=1e9).contains(&a.changes_every)) {
        return usage("--changes-every must be 0 or more seconds");
    }
    let allow = parse_allow(&a.allow)?;
    let modules = match &a.config {
        Some(p) => probe::load_modules(p)?,
        None => BTreeMap::new(),
    };
    let store = match &a.db {
        Some(db) => Some(Arc::new(Mutex::new(super::results::open_for_write(Some(
            db.clone(),
        ))?))),
        None => None,
    };
    let sources = more_sources(&a, store.as_ref());
    let exporter = Arc::new(Exporter {
        allow,
        modules,
        max_seconds: a.max_seconds,
        margin: a.timeout_margin,
        max_probes: usize::from(a.max_probes),
        store,
        busy: Mutex::new(HashSet::new()),
        counters: Counters::default(),
        started_unix_s: now_unix_s(),
        sources,
    });
    let handler: Handler = {
        let e = exporter.clone();
        Arc::new(move |req: &Request| e.handle(req))
    };
    let server = Server::bind(a.listen, handler)
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", a.listen))?;
    eprintln!(
        "wirerate exporter: listening on {}, probing {}",
        server.local_addr()?,
        a.allow.join(", ")
    );
    server.serve();
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allowed_targets_are_probed() {
        let allow = parse_allow(&["Lab-A".into(), "10.0.0.2:5999".into(), "[::1]".into()]).unwrap();
        assert_eq!(allowed(&allow, "lab-a"), Some("lab-a:5350".into()));
        assert_eq!(allowed(&allow, "LAB-A:7000"), Some("lab-a:7000".into()));
        assert_eq!(
            allowed(&allow, "10.0.0.2:5999"),
            Some("10.0.0.2:5999".into())
        );
        assert_eq!(allowed(&allow, "10.0.0.2"), None);
        assert_eq!(allowed(&allow, "10.0.0.2:5350"), None);
        assert_eq!(allowed(&allow, "[::1]:5350"), Some("::1:5350".into()));
        assert_eq!(allowed(&allow, "lab-b"), None);
        assert_eq!(allowed(&allow, "lab-a:notaport"), None);
        assert!(parse_allow(&[" ".into()]).is_err());
    }
}
