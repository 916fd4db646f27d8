//! One `/probe` of `wirerate exporter`: its parameters (from the query and a module) turned
//! into the flags of `wirerate run`, so a probe is checked and run exactly as that command
//! would run it (the same spec rules, the same engine call), bounded in time by what the
//! scrape allows. `kind=rpm` runs `wirerate rpm`'s four phases instead, through that
//! command's own code, the probe's seconds split between them.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use clap::Parser;
use serde::Deserialize;
use wirerate_core::RunResult;
use wirerate_prom::http::Request;

use super::rpm;
use super::run::{self, Silent};
use crate::exit::UsageError;

/// Seconds of test a probe runs when neither the query nor its module says.
pub const DEFAULT_SECONDS: f64 = 5.0;
/// The shortest test worth running: below it the scrape timeout leaves no room.
pub const MIN_SECONDS: f64 = 0.5;
/// An rpm probe's phases: four tests, each with its own connecting and reports.
const RPM_PHASES: f64 = 4.0;
/// The shortest rpm probe: four phases of `wirerate rpm`'s shortest.
pub const MIN_RPM_SECONDS: f64 = RPM_PHASES * 0.5;
/// The longest a silent server is waited for within a probe.
const MAX_IDLE_S: f64 = 10.0;
/// The longest a probe waits for a server still busy, at most a quarter of the margin: the
/// server frees its slot a moment after the reports of the test before (a probe of another
/// module of the same target, scraped just before); a test of someone else's is not waited
/// out.
const MAX_BUSY_WAIT_S: f64 = 0.25;
/// The longest a connection is waited for within a scrape: `run`'s own default (5 s) or half
/// the scrape's budget, whichever is less.
const MAX_CONNECT_MS: f64 = 5000.0;

/// A named set of probe parameters (`[modules.NAME]` in `--config`); the query's own
/// parameters override it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Module {
    /// What the probe measures: a test as `wirerate run` runs it, or latency under load as
    /// `wirerate rpm` measures it.
    pub kind: Option<ProbeKind>,
    /// The test's seconds; for rpm, of its four phases together.
    pub seconds: Option<f64>,
    pub reverse: Option<bool>,
    pub udp: Option<bool>,
    /// A rate as `run -b` takes it ("100M").
    pub bitrate: Option<String>,
    pub parallel: Option<u32>,
    /// The socket buffer, as `run -w` takes it ("4M").
    pub window: Option<String>,
    pub congestion: Option<String>,
    pub bidir: Option<bool>,
    /// The link's rate, as `run --link` takes it, where it cannot be detected: the wire
    /// efficiency needs it.
    pub link: Option<String>,
}

/// What a probe measures (`kind=`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeKind {
    #[default]
    Run,
    Rpm,
}

impl ProbeKind {
    fn parse(v: &str) -> Result<ProbeKind, Refused> {
        match v.to_ascii_lowercase().as_str() {
            "run" => Ok(ProbeKind::Run),
            "rpm" => Ok(ProbeKind::Rpm),
            _ => Err(bad(format!("kind: '{v}' is not run or rpm"))),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    modules: BTreeMap<String, Module>,
}

/// Reads the modules of a config file.
pub fn load_modules(path: &Path) -> anyhow::Result<BTreeMap<String, Module>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("--config {}: {e}", path.display())))?;
    let file: ConfigFile = toml::from_str(&text).map_err(|e| {
        let msg = e.message().to_string();
        UsageError(format!("--config {}: {msg}", path.display()))
    })?;
    for (name, m) in &file.modules {
        m.check().map_err(|e| {
            UsageError(format!("--config {}: module '{name}': {e}", path.display()))
        })?;
    }
    Ok(file.modules)
}

impl Module {
    /// What the exporter checks of a module when it starts (`run`'s own checks follow at
    /// each probe).
    fn check(&self) -> Result<(), String> {
        if self.seconds.is_some_and(|s| !(s.is_finite() && s > 0.0)) {
            return Err("seconds must be a positive number".into());
        }
        if self.parallel == Some(0) {
            return Err("parallel must be 1 or more".into());
        }
        for (name, v) in [("bitrate", &self.bitrate), ("link", &self.link)] {
            if let Some(v) = v {
                run::parse_rate(v).map_err(|e| format!("{name}: {e}"))?;
            }
        }
        if let Some(w) = &self.window {
            run::parse_size(w).map_err(|e| format!("window: {e}"))?;
        }
        self.rpm_takes()
    }

    fn is_rpm(&self) -> bool {
        self.kind == Some(ProbeKind::Rpm)
    }

    /// An rpm probe loads both directions with TCP itself: the run-only parameters are
    /// refused rather than ignored.
    fn rpm_takes(&self) -> Result<(), String> {
        if !self.is_rpm() {
            return Ok(());
        }
        let set = [
            ("reverse", self.reverse.is_some()),
            ("udp", self.udp.is_some()),
            ("bidir", self.bidir.is_some()),
            ("bitrate", self.bitrate.is_some()),
            ("window", self.window.is_some()),
            ("congestion", self.congestion.is_some()),
            ("link", self.link.is_some()),
        ];
        match set.iter().find(|(_, on)| *on) {
            Some((name, _)) => Err(format!(
                "kind=rpm takes no {name} (it runs idle, download, upload and both over TCP; \
                 it takes seconds and parallel)"
            )),
            None => Ok(()),
        }
    }
}

/// A probe's parameters, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    pub target: String,
    pub module: Option<String>,
    pub seconds: f64,
    /// How long the whole probe may take (the scrape's timeout less the margin), if bounded.
    pub budget: Option<f64>,
    /// How long a busy server is retried (within the margin).
    pub busy_wait_s: f64,
    pub params: Module,
}

/// Why a probe is not run: the HTTP status and a one-line reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub u16, pub String);

fn bad(msg: impl ToString) -> Refused {
    Refused(400, msg.to_string())
}

/// `true`/`false`, `1`/`0`, `yes`/`no`.
fn parse_bool(name: &str, v: &str) -> Result<bool, Refused> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(bad(format!("{name}: '{v}' is not true or false"))),
    }
}

/// The query's parameters over the module's; the test's length bounded by the scrape's
/// timeout less `margin`, and by `max_seconds`.
pub fn parse(
    req: &Request,
    modules: &BTreeMap<String, Module>,
    max_seconds: f64,
    margin: f64,
) -> Result<Probe, Refused> {
    if let Some((k, _)) = req.query.iter().find(|(k, _)| !KNOWN.contains(&k.as_str())) {
        return Err(bad(format!(
            "unknown parameter '{k}' (known: {})",
            KNOWN.join(", ")
        )));
    }
    let target = match req.param("target").map_err(bad)? {
        Some(t) if !t.trim().is_empty() => t.trim().to_string(),
        _ => return Err(bad("target is missing (target=HOST or HOST:PORT)")),
    };
    let module = req.param("module").map_err(bad)?.map(str::to_string);
    let mut params = match &module {
        Some(m) => modules
            .get(m)
            .cloned()
            .ok_or_else(|| bad(format!("no module '{m}' in the config")))?,
        None => Module::default(),
    };
    override_params(req, &mut params)?;
    params.rpm_takes().map_err(bad)?;
    let (seconds, budget) = length(req, &params, max_seconds, margin)?;
    Ok(Probe {
        target,
        module,
        seconds,
        budget,
        busy_wait_s: (margin / 4.0).min(MAX_BUSY_WAIT_S),
        params,
    })
}

/// The query's parameters.
const KNOWN: [&str; 12] = [
    "target",
    "module",
    "kind",
    "seconds",
    "reverse",
    "udp",
    "bidir",
    "bitrate",
    "parallel",
    "window",
    "congestion",
    "link",
];

/// The query's test parameters over the module's, each checked as far as the exporter can
/// (`run`'s own checks follow, in [`Probe::run_args`]).
fn override_params(req: &Request, params: &mut Module) -> Result<(), Refused> {
    let p = |name: &str| req.param(name).map_err(bad);
    if let Some(v) = p("kind")? {
        params.kind = Some(ProbeKind::parse(v)?);
    }
    if let Some(v) = p("seconds")? {
        params.seconds = Some(
            v.parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s > 0.0)
                .ok_or_else(|| bad(format!("seconds: '{v}' is not a positive number")))?,
        );
    }
    for (name, field) in [
        ("reverse", &mut params.reverse),
        ("udp", &mut params.udp),
        ("bidir", &mut params.bidir),
    ] {
        if let Some(v) = p(name)? {
            *field = Some(parse_bool(name, v)?);
        }
    }
    for (name, field) in [("bitrate", &mut params.bitrate), ("link", &mut params.link)] {
        if let Some(v) = p(name)? {
            run::parse_rate(v).map_err(|e| bad(format!("{name}: {e}")))?;
            *field = Some(v.to_string());
        }
    }
    if let Some(v) = p("parallel")? {
        params.parallel = Some(
            v.parse::<u32>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| bad(format!("parallel: '{v}' is not a whole number from 1")))?,
        );
    }
    for (name, field) in [
        ("window", &mut params.window),
        ("congestion", &mut params.congestion),
    ] {
        if let Some(v) = p(name)? {
            *field = Some(v.to_string());
        }
    }
    Ok(())
}

/// The test's seconds and the probe's budget: the least of what was asked (or the
/// default), `max_seconds`, and the scrape's timeout less `margin`.
fn length(
    req: &Request,
    params: &Module,
    max_seconds: f64,
    margin: f64,
) -> Result<(f64, Option<f64>), Refused> {
    let budget = match req.header("X-Prometheus-Scrape-Timeout-Seconds") {
        Some(h) => {
            let t = h
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|t| t.is_finite() && *t > 0.0)
                .ok_or_else(|| {
                    bad(format!(
                        "X-Prometheus-Scrape-Timeout-Seconds: '{h}' is not a number of seconds"
                    ))
                })?;
            Some(t - margin)
        }
        None => None,
    };
    let asked = params.seconds.unwrap_or(DEFAULT_SECONDS);
    if asked > max_seconds {
        return Err(bad(format!(
            "seconds: {asked} is over the exporter's --max-seconds {max_seconds}"
        )));
    }
    // an rpm probe is four tests, each connecting and reporting: a margin for each
    let room = budget.map(|b| {
        if params.is_rpm() {
            b - (RPM_PHASES - 1.0) * margin
        } else {
            b
        }
    });
    let seconds = room.map_or(asked, |r| asked.min(r));
    if params.is_rpm() && seconds < MIN_RPM_SECONDS {
        return Err(bad(format!(
            "kind=rpm: {:.2} s left for the test (the scrape timeout after the {margin} s margin for each of its 4 phases, or seconds): its 4 phases need at least {MIN_RPM_SECONDS} s (raise scrape_timeout or seconds)",
            seconds
        )));
    }
    if seconds < MIN_SECONDS {
        return Err(bad(format!(
            "the scrape timeout leaves {:.2} s for the test after the {margin} s margin: at least {MIN_SECONDS} s are needed (raise scrape_timeout)",
            budget.unwrap_or(seconds)
        )));
    }
    Ok((seconds, budget))
}

/// `wirerate run`'s flags, alone, to parse a probe's flags with.
#[derive(Parser)]
#[command(name = "probe", no_binary_name = true)]
struct RunFlags {
    #[command(flatten)]
    run: run::Args,
}

/// `wirerate rpm`'s flags, alone.
#[derive(Parser)]
#[command(name = "probe", no_binary_name = true)]
struct RpmFlags {
    #[command(flatten)]
    rpm: rpm::Args,
}

impl Probe {
    /// The label its stored result goes under: the module's name, or else the probe's kind
    /// and the parameters that change what it measures ("probe:udp b=20M"), so probes of
    /// one target with different parameters make different series in the history.
    pub fn history_label(&self) -> String {
        if let Some(m) = &self.module {
            return m.clone();
        }
        let q = &self.params;
        let mut words = vec![if q.is_rpm() {
            "probe:rpm".to_string()
        } else if q.udp == Some(true) {
            "probe:udp".to_string()
        } else {
            "probe:tcp".to_string()
        }];
        if q.bidir == Some(true) {
            words.push("bidir".into());
        } else if q.reverse == Some(true) {
            words.push("reverse".into());
        }
        let named = [
            ("P", q.parallel.map(|n| n.to_string())),
            ("b", q.bitrate.clone()),
            ("w", q.window.clone()),
            ("cc", q.congestion.clone()),
        ];
        for (name, v) in named {
            if let Some(v) = v {
                words.push(format!("{name}={v}"));
            }
        }
        words.join(" ")
    }

    /// The `rpm` flags this probe stands for: its seconds split between the four phases.
    pub fn rpm_argv(&self) -> Vec<String> {
        let idle = self.budget.unwrap_or(MAX_IDLE_S).clamp(0.5, MAX_IDLE_S);
        let mut v = vec![
            format!("--time={}", self.seconds / 4.0),
            format!("--idle-timeout={idle}"),
            "--no-store".into(),
        ];
        if let Some(n) = self.params.parallel {
            v.push(format!("--parallel={n}"));
        }
        v.push("--".into());
        v.push(self.target.clone());
        v
    }

    /// Runs `wirerate rpm`'s phases as that command does, the result returned, not printed.
    fn execute_rpm(&self) -> Result<Outcome, Refused> {
        let started = Instant::now();
        let a = RpmFlags::try_parse_from(self.rpm_argv())
            .map(|f| f.rpm)
            .map_err(|e| bad(first_line(&e.to_string())))?;
        let s = rpm::spec_from(&a).map_err(|e| bad(wirerate_engine::chain(e.as_ref())))?;
        let run = || {
            let t = rpm::target(&a.net)?;
            let wait = Duration::from_secs_f64(self.busy_wait_s);
            rpm::measure(&t, &s, a.parallel, wait, &mut |_| {})
        };
        Ok(match run() {
            Ok((result, errors)) => Outcome {
                success: errors.is_empty() && !result.interrupted,
                error: (!errors.is_empty()).then(|| errors.join("; ")),
                result: Some(result),
                seconds: started.elapsed().as_secs_f64(),
            },
            Err(e) => Outcome {
                result: None,
                success: false,
                error: Some(wirerate_engine::chain(e.as_ref())),
                seconds: started.elapsed().as_secs_f64(),
            },
        })
    }

    /// The `run` flags this probe stands for. Values go after `=`, so none is read as a flag.
    pub fn argv(&self) -> Vec<String> {
        let m = &self.params;
        let idle = self.budget.unwrap_or(MAX_IDLE_S).clamp(0.5, MAX_IDLE_S);
        let mut v = vec![
            format!("--time={}", self.seconds),
            "--interval=0".into(),
            format!("--idle-timeout={idle}"),
            "--no-store".into(),
        ];
        if let Some(b) = self.budget {
            // a target that does not answer fails the probe within the scrape, not after it
            let ms = (b * 500.0).clamp(200.0, MAX_CONNECT_MS);
            v.push(format!("--connect-timeout={ms:.0}"));
        }
        let flags = [
            (m.reverse, "--reverse"),
            (m.udp, "--udp"),
            (m.bidir, "--bidir"),
        ];
        v.extend(
            flags
                .iter()
                .filter(|(on, _)| *on == Some(true))
                .map(|(_, f)| f.to_string()),
        );
        if let Some(b) = &m.bitrate {
            v.push(format!("--bitrate={b}"));
        }
        if let Some(n) = m.parallel {
            v.push(format!("--parallel={n}"));
        }
        if let Some(w) = &m.window {
            v.push(format!("--window={w}"));
        }
        if let Some(c) = &m.congestion {
            v.push(format!("--congestion={c}"));
        }
        if let Some(l) = &m.link {
            v.push(format!("--link={l}"));
        }
        v.push("--".into());
        v.push(self.target.clone());
        v
    }

    /// The flags checked as `run` checks them: a mistake is a 400 with `run`'s own words.
    pub fn run_args(&self) -> Result<run::Args, Refused> {
        RunFlags::try_parse_from(self.argv())
            .map(|f| f.run)
            .map_err(|e| bad(first_line(&e.to_string())))
    }

    /// Runs the test: the result (None if it did not get that far), whether it succeeded,
    /// and why not. A parameter that `run` refuses comes back as `Err`.
    pub fn execute(&self) -> Result<Outcome, Refused> {
        if self.params.is_rpm() {
            return self.execute_rpm();
        }
        let started = Instant::now();
        let a = self.run_args()?;
        // the same checks as `run`, before any connection (the datagram size comes after)
        let usage = |e: anyhow::Error| match e.downcast_ref::<UsageError>() {
            Some(u) => Err(bad(u.0.clone())),
            None => Ok(e),
        };
        run::spec_from(&a, 1472).map_err(|e| bad(wirerate_engine::chain(e.as_ref())))?;
        let failed = |e: anyhow::Error| Outcome {
            result: None,
            success: false,
            error: Some(wirerate_engine::chain(e.as_ref())),
            seconds: started.elapsed().as_secs_f64(),
        };
        let t = match run::target(&a) {
            Ok(t) => t,
            Err(e) => return usage(e).map(failed),
        };
        let path_udp = wirerate_engine::net::path_udp_payload(t.addr).unwrap_or(1472);
        let spec = match run::spec_from(&a, path_udp) {
            Ok(s) => s,
            Err(e) => return usage(e).map(failed),
        };
        // as `run` does: raise the open-file limit the streams need, or say why not
        if let Err(e) = run::ensure_open_files(&spec, false) {
            return Ok(failed(e));
        }
        let busy_wait = Duration::from_secs_f64(self.busy_wait_s);
        Ok(match run::execute(&t, &spec, &mut Silent, busy_wait) {
            Ok((result, errors)) => Outcome {
                success: errors.is_empty() && !result.interrupted,
                error: (!errors.is_empty()).then(|| errors.join("; ")),
                result: Some(result),
                seconds: started.elapsed().as_secs_f64(),
            },
            Err(e) => failed(e),
        })
    }
}

/// The first line of clap's message, without its "error: ".
fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("bad parameters");
    line.trim_start_matches("error: ").to_string()
}

/// What a probe's test came to.
#[derive(Debug)]
pub struct Outcome {
    pub result: Option<RunResult>,
    pub success: bool,
    pub error: Option<String>,
    pub seconds: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirerate_prom::http::parse_head;

    fn req(q: &str, timeout: Option<&str>) -> Request {
        let h = timeout.map_or(String::new(), |t| {
            format!("X-Prometheus-Scrape-Timeout-Seconds: {t}\r\n")
        });
        parse_head(format!("GET /probe?{q} HTTP/1.1\r\n{h}").as_bytes()).unwrap()
    }

    fn modules() -> BTreeMap<String, Module> {
        let file: ConfigFile =
            toml::from_str("[modules.udp_small]\nudp = true\nbitrate = \"10M\"\nseconds = 3\n")
                .unwrap();
        file.modules
    }

    #[test]
    fn a_module_is_checked_when_the_config_is_read() {
        let dir = tempfile::tempdir().unwrap();
        for (text, words) in [
            ("[modules.a]\nseconds = -1\n", "module 'a': seconds"),
            ("[modules.b]\nbitrate = \"fast\"\n", "module 'b': bitrate"),
            ("[modules.c]\nwindow = \"big\"\n", "module 'c': window"),
            ("[modules.d]\nparallel = 0\n", "module 'd': parallel"),
            ("[modules.e]\nsecnds = 1\n", "secnds"),
            ("[module.f]\n", "module"),
        ] {
            let path = dir.path().join("x.toml");
            std::fs::write(&path, text).unwrap();
            let e = load_modules(&path).unwrap_err().to_string();
            assert!(e.contains(words) && !e.contains('\n'), "{text}: {e}");
        }
        let path = dir.path().join("ok.toml");
        std::fs::write(
            &path,
            "[modules.wan]\nseconds = 8\nparallel = 4\nlink = \"10G\"\n",
        )
        .unwrap();
        assert_eq!(load_modules(&path).unwrap()["wan"].parallel, Some(4));
    }

    #[test]
    fn the_scrape_timeout_bounds_the_test() {
        let m = modules();
        let p = parse(&req("target=h&seconds=20", Some("10")), &m, 60.0, 1.0).unwrap();
        assert_eq!((p.seconds, p.budget), (9.0, Some(9.0)));
        // a server still freeing its slot is waited for within the margin
        assert_eq!(p.busy_wait_s, 0.25);
        let tight = parse(&req("target=h", Some("10")), &m, 60.0, 0.4).unwrap();
        assert_eq!(tight.busy_wait_s, 0.1);
        let argv = p.argv();
        assert!(argv.contains(&"--time=9".to_string()), "{argv:?}");
        assert!(argv.contains(&"--idle-timeout=9".to_string()), "{argv:?}");
        assert!(
            argv.contains(&"--connect-timeout=4500".to_string()),
            "{argv:?}"
        );
        let p = parse(&req("target=h", Some("15")), &m, 60.0, 1.0).unwrap();
        assert_eq!(p.seconds, DEFAULT_SECONDS);
        let p = parse(&req("target=h&seconds=2", None), &m, 60.0, 1.0).unwrap();
        assert_eq!((p.seconds, p.budget), (2.0, None));
        let e = parse(&req("target=h", Some("1.2")), &m, 60.0, 1.0).unwrap_err();
        assert!(e.0 == 400 && e.1.contains("raise scrape_timeout"), "{e:?}");
    }

    #[test]
    fn a_module_gives_defaults_the_query_overrides() {
        let m = modules();
        let p = parse(&req("target=h:5350&module=udp_small", None), &m, 60.0, 1.0).unwrap();
        assert_eq!(p.seconds, 3.0);
        assert_eq!(
            p.argv(),
            [
                "--time=3",
                "--interval=0",
                "--idle-timeout=10",
                "--no-store",
                "--udp",
                "--bitrate=10M",
                "--",
                "h:5350"
            ]
        );
        let p = parse(
            &req("target=h&module=udp_small&udp=false&seconds=1", None),
            &m,
            60.0,
            1.0,
        )
        .unwrap();
        assert_eq!(p.params.udp, Some(false));
        assert_eq!(p.seconds, 1.0);
        let e = parse(&req("target=h&module=nope", None), &m, 60.0, 1.0).unwrap_err();
        assert!(e.1.contains("no module 'nope'"));
    }

    #[test]
    fn bad_parameters_are_refused_with_one_line() {
        let m = modules();
        for (q, words) in [
            ("seconds=1", "target is missing"),
            ("target=h&seconds=-1", "not a positive number"),
            ("target=h&seconds=abc", "not a positive number"),
            ("target=h&seconds=100", "--max-seconds"),
            ("target=h&udp=maybe", "not true or false"),
            ("target=h&bitrate=fast", "bitrate:"),
            ("target=h&parallel=0", "parallel:"),
            ("target=h&target=g", "more than once"),
            ("target=h&colour=red", "unknown parameter 'colour'"),
        ] {
            let e = parse(&req(q, None), &m, 60.0, 1.0).unwrap_err();
            assert_eq!(e.0, 400, "{q}");
            assert!(e.1.contains(words) && !e.1.contains('\n'), "{q}: {}", e.1);
        }
    }

    #[test]
    fn an_rpm_probe_splits_its_seconds_between_four_phases() {
        let m = modules();
        // 12 s of scrape, a 1 s margin for each of the four tests: 8 s of phases
        let p = parse(
            &req("target=h&kind=rpm&seconds=20", Some("12")),
            &m,
            60.0,
            1.0,
        )
        .unwrap();
        assert_eq!((p.seconds, p.budget), (8.0, Some(11.0)));
        assert_eq!(
            p.rpm_argv(),
            ["--time=2", "--idle-timeout=10", "--no-store", "--", "h"]
        );
        let p = parse(
            &req("target=h&kind=rpm&seconds=6", Some("12")),
            &m,
            60.0,
            1.0,
        )
        .unwrap();
        assert_eq!(p.seconds, 6.0);
        let p = parse(&req("target=h&kind=RPM&parallel=2", None), &m, 60.0, 1.0).unwrap();
        assert!(p.rpm_argv().contains(&"--parallel=2".to_string()));
        for (q, timeout, words) in [
            (
                "target=h&kind=rpm",
                Some("5.9"),
                "4 phases need at least 2 s",
            ),
            (
                "target=h&kind=rpm&seconds=1.5",
                None,
                "4 phases need at least 2 s",
            ),
            (
                "target=h&kind=rpm&reverse=1",
                None,
                "kind=rpm takes no reverse",
            ),
            ("target=h&kind=rpm&module=udp_small", None, "takes no udp"),
            ("target=h&kind=tcp", None, "not run or rpm"),
        ] {
            let e = parse(&req(q, timeout), &m, 60.0, 1.0).unwrap_err();
            assert_eq!(e.0, 400, "{q}");
            assert!(e.1.contains(words) && !e.1.contains('\n'), "{q}: {}", e.1);
        }
        // rpm's own checks answer what the exporter does not know
        let p = parse(
            &req("target=h&kind=rpm&parallel=100000", None),
            &m,
            60.0,
            1.0,
        )
        .unwrap();
        assert!(p.execute().unwrap_err().1.contains("-P"));
    }

    #[test]
    fn a_value_cannot_pose_as_a_flag() {
        let m = modules();
        let p = parse(&req("target=--help&congestion=--udp", None), &m, 60.0, 1.0).unwrap();
        let a = p.run_args().unwrap();
        assert_eq!(a.host.as_deref(), Some("--help"));
        assert_eq!(a.congestion.as_deref(), Some("--udp"));
        assert!(!a.udp);
        // run's own checks answer what the exporter does not know
        let p = parse(&req("target=h&window=lots", None), &m, 60.0, 1.0).unwrap();
        assert!(p.run_args().unwrap_err().1.contains("lots"));
    }
    #[test]
    fn a_probe_without_a_module_is_stored_under_its_kind_and_parameters() {
        let m = modules();
        let label = |q: &str| parse(&req(q, None), &m, 60.0, 1.0).unwrap().history_label();
        assert_eq!(label("target=h"), "probe:tcp");
        assert_eq!(label("target=h&udp=1&bitrate=20M"), "probe:udp b=20M");
        assert_eq!(
            label("target=h&reverse=true&parallel=4"),
            "probe:tcp reverse P=4"
        );
        assert_eq!(label("target=h&kind=rpm&seconds=8"), "probe:rpm");
        assert_eq!(label("target=h&module=udp_small"), "udp_small");
        assert_ne!(label("target=h&seconds=2"), label("target=h&udp=1"));
    }
}
