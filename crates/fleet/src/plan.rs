//! Plan files: which agents, which pairs, what test, how often. Parsing, validation and the
//! expansion into tests are pure (the clock is an argument), so every rule is unit-tested.
//!
//! ```toml
//! name = "mesh"                      # 1 to 32 of a-z 0-9 _ -
//! db = "postgres:///wirerate?host=/run/postgresql"   # queue and results; --db overrides
//! port = 5350                        # agents' port where an address has none
//!
//! [hosts]                            # agents (wirerate serve --allow-third-party)
//! a = "10.77.0.1"
//! b = "10.77.0.2:5350"
//!
//! [matrix]
//! kind = "mesh"                      # mesh | pairs | star
//! # hosts = ["a", "b"]               # mesh: these hosts only (default: all)
//! # pairs = [["a", "b"]]             # pairs: each is FROM, TO
//! # center = "a"                     # star: the center and every other host
//! # both_ways = true                 # pairs and star: the reverse of each pair too
//!
//! [test]
//! seconds = 10
//! udp = false
//! parallel = 1
//! # bitrate = "10M"                  # per stream (UDP default 1M)
//! # reverse = false
//! # omit = 0
//!
//! [auth]                             # agents that run serve --tls (docs/fleet.md)
//! # tls = true
//! # user = "fleet"                   # log in; the password from WIRERATE_PASSWORD
//! # fingerprint = "…"                # every agent's key (else remembered on first use)
//! # known_servers = "…"              # where remembered keys are kept
//! # [auth.fingerprints]              # one agent's key, by host name
//! # a = "…"
//!
//! [schedule]
//! repeat = 1                         # each pair this many times per run
//! runs = 1                           # one-shot by default
//! # every_min = 60                   # between the starts of runs (runs > 1)
//! # window = "08:00-18:00"           # UTC: tests begin only inside it
//! # every = "R/PT4H"                 # plan run: a round every 4 h, for ever (R6/PT4H: six)
//! # slip = "PT10M"                   # each round starts at a random moment in its first 10 min
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;
use wirerate_core::spec::{TestArgs, DEFAULT_PORT, ETHERNET_UDP_PAYLOAD};
use wirerate_core::units::BitRate;
use wirerate_core::TestSpec;

use crate::FleetError;

/// The most hosts a plan names, and the most tests one plan run may hold.
pub const MAX_HOSTS: usize = 256;
pub const MAX_TESTS: usize = 100_000;
/// The longest default lease, seconds.
pub const MAX_DEFAULT_LEASE_S: f64 = 120.0;
/// The shortest lease `--lease` takes, seconds: three renewals must fit in it.
pub const MIN_LEASE_S: f64 = 3.0;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlan {
    name: String,
    db: Option<String>,
    port: Option<u16>,
    hosts: BTreeMap<String, String>,
    matrix: Option<RawMatrix>,
    #[serde(default)]
    test: RawTest,
    #[serde(default)]
    schedule: RawSchedule,
    #[serde(default)]
    auth: RawAuth,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawAuth {
    tls: Option<bool>,
    user: Option<String>,
    fingerprint: Option<String>,
    fingerprints: Option<BTreeMap<String, String>>,
    known_servers: Option<String>,
}

/// How the controller reaches the agents: TLS, the agents' keys, and a login. The
/// password is never in the plan (WIRERATE_PASSWORD).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PlanAuth {
    pub tls: bool,
    pub user: Option<String>,
    /// Every agent's key, unless `fingerprints` names the agent's own.
    pub fingerprint: Option<String>,
    /// By host name.
    pub fingerprints: BTreeMap<String, String>,
    pub known_servers: Option<std::path::PathBuf>,
}

impl PlanAuth {
    /// The fingerprint the agent `host` must show, if the plan pins one.
    pub fn fingerprint_of(&self, host: &str) -> Option<&str> {
        self.fingerprints
            .get(host)
            .or(self.fingerprint.as_ref())
            .map(String::as_str)
    }
}

fn auth_of(raw: RawAuth, hosts: &BTreeMap<String, String>) -> Result<PlanAuth, FleetError> {
    let tls = raw.tls.unwrap_or(false);
    let needs_tls = raw.user.is_some()
        || raw.fingerprint.is_some()
        || raw.fingerprints.is_some()
        || raw.known_servers.is_some();
    if needs_tls && !tls {
        return Err(bad(
            "auth: user, fingerprints and known_servers need tls = true",
        ));
    }
    if let Some(u) = &raw.user {
        wirerate_proto::auth::check_user(u).map_err(|e| bad(format!("auth: user: {e}")))?;
    }
    let norm = |what: &str, fp: &str| {
        wirerate_control::tls::normalize_fingerprint(fp)
            .map_err(|e| bad(format!("auth: {what}: {e}")))
    };
    let fingerprint = raw
        .fingerprint
        .as_deref()
        .map(|f| norm("fingerprint", f))
        .transpose()?;
    let mut fingerprints = BTreeMap::new();
    for (host, fp) in raw.fingerprints.unwrap_or_default() {
        if !hosts.contains_key(&host) {
            return Err(bad(format!(
                "auth.fingerprints: '{host}' is not a host of the plan"
            )));
        }
        let fp = norm(&format!("fingerprint of '{host}'"), &fp)?;
        fingerprints.insert(host, fp);
    }
    Ok(PlanAuth {
        tls,
        user: raw.user,
        fingerprint,
        fingerprints,
        known_servers: raw.known_servers.map(Into::into),
    })
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawMatrix {
    kind: Option<String>,
    hosts: Option<Vec<String>>,
    pairs: Option<Vec<[String; 2]>>,
    center: Option<String>,
    both_ways: Option<bool>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTest {
    seconds: Option<f64>,
    udp: Option<bool>,
    parallel: Option<u32>,
    bitrate: Option<String>,
    reverse: Option<bool>,
    omit: Option<f64>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSchedule {
    repeat: Option<u32>,
    runs: Option<u32>,
    every_min: Option<f64>,
    window: Option<String>,
    every: Option<String>,
    slip: Option<String>,
}

/// A plan run round after round (`[schedule] every`): each round is one run of the plan.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rounds {
    pub every_s: f64,
    /// Each round starts at a random moment in its first `slip_s` seconds.
    pub slip_s: f64,
    /// At most this many rounds (`R6/…`); None: until stopped.
    pub count: Option<u64>,
}

/// A time-of-day window, UTC, in seconds since midnight; `start > end` wraps midnight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub start_s: u32,
    pub end_s: u32,
}

/// A validated plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub name: String,
    pub db: Option<String>,
    /// Host name → agent address (`HOST:PORT`), sorted by name.
    pub hosts: BTreeMap<String, String>,
    /// Ordered pairs (FROM, TO) by host name.
    pub pairs: Vec<(String, String)>,
    pub spec: TestSpec,
    pub repeat: u32,
    pub runs: u32,
    pub every_s: f64,
    pub window: Option<Window>,
    /// Rounds on a repeating schedule (not part of what a round tests: not in the
    /// fingerprint, so a controller with another interval still joins a running round).
    pub rounds: Option<Rounds>,
    /// How the agents are reached (not part of what is tested: not in the fingerprint).
    pub auth: PlanAuth,
}

/// One test of a plan run, before it is queued.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedTest {
    pub run: u32,
    pub rep: u32,
    pub from: String,
    pub to: String,
    pub from_addr: String,
    pub to_addr: String,
    /// Unix seconds from which it may start.
    pub due_unix_s: f64,
}

fn bad(msg: impl Into<String>) -> FleetError {
    FleetError::Plan(msg.into())
}

fn check_name(what: &str, s: &str, max: usize) -> Result<(), FleetError> {
    let ok = !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(bad(format!(
            "{what} '{s}' must be 1 to {max} of a-z, 0-9, '_' and '-'"
        )))
    }
}

/// `HOST`, `HOST:PORT`, `[V6]:PORT` or a bare IPv6 address, as `HOST:PORT`.
pub fn agent_address(s: &str, port: u16) -> Result<String, FleetError> {
    let s = s.trim();
    if s.is_empty() || s.len() > 255 || s.chars().any(|c| c.is_whitespace() || c == '/') {
        return Err(bad(format!(
            "'{s}' is not an agent address (HOST or HOST:PORT)"
        )));
    }
    if let Ok(ip) = s.parse::<std::net::IpAddr>() {
        return Ok(std::net::SocketAddr::new(ip, port).to_string());
    }
    if s.parse::<std::net::SocketAddr>().is_ok() {
        return Ok(s.to_string());
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && !h.is_empty() => match p.parse::<u16>() {
            Ok(n) if n > 0 => Ok(s.to_string()),
            _ => Err(bad(format!("'{s}': the port must be 1 to 65535"))),
        },
        Some(_) => Err(bad(format!(
            "'{s}' is not an agent address (HOST or HOST:PORT)"
        ))),
        None => Ok(format!("{s}:{port}")),
    }
}

/// Parses `HH:MM-HH:MM`.
pub fn parse_window(s: &str) -> Result<Window, FleetError> {
    let hm = |t: &str| -> Option<u32> {
        let (h, m) = t.trim().split_once(':')?;
        let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
        (h < 24 && m < 60).then_some(h * 3600 + m * 60)
    };
    let parsed = s.split_once('-').and_then(|(a, b)| Some((hm(a)?, hm(b)?)));
    match parsed {
        Some((a, b)) if a != b => Ok(Window {
            start_s: a,
            end_s: b,
        }),
        _ => Err(bad(format!(
            "window '{s}' must be HH:MM-HH:MM (UTC) with two different times"
        ))),
    }
}

impl Window {
    fn contains(&self, day_s: u32) -> bool {
        if self.start_s < self.end_s {
            (self.start_s..self.end_s).contains(&day_s)
        } else {
            day_s >= self.start_s || day_s < self.end_s
        }
    }

    /// The first moment at or after `t` (Unix seconds) inside the window.
    pub fn next_open(&self, t: f64) -> f64 {
        let day_s = (t.rem_euclid(86_400.0)) as u32;
        if self.contains(day_s) {
            return t;
        }
        let midnight = t - t.rem_euclid(86_400.0);
        let start = midnight + f64::from(self.start_s);
        if start >= t {
            start
        } else {
            start + 86_400.0
        }
    }
}

impl Plan {
    pub fn parse(text: &str) -> Result<Plan, FleetError> {
        let raw: RawPlan = toml::from_str(text).map_err(|e| {
            let line = e.span().map_or(0, |s| {
                text[..s.start.min(text.len())].matches('\n').count() + 1
            });
            let what = e.message().lines().next().unwrap_or("").to_string();
            bad(format!("line {line}: {what}"))
        })?;
        check_name("plan name", &raw.name, 32)?;
        let port = raw.port.unwrap_or(DEFAULT_PORT);
        if port == 0 {
            return Err(bad("port must be 1 to 65535"));
        }
        if raw.hosts.len() < 2 || raw.hosts.len() > MAX_HOSTS {
            return Err(bad(format!(
                "[hosts] names 2 to {MAX_HOSTS} agents, not {}",
                raw.hosts.len()
            )));
        }
        let mut hosts = BTreeMap::new();
        for (name, addr) in &raw.hosts {
            check_name("host name", name, 32)?;
            let a = agent_address(addr, port).map_err(|e| bad(format!("host '{name}': {e}")))?;
            hosts.insert(name.clone(), a);
        }
        let pairs = pairs_of(raw.matrix.unwrap_or_default(), &hosts)?;
        let auth = auth_of(raw.auth, &hosts)?;
        let spec = spec_of(&raw.test)?;
        let s = raw.schedule;
        let repeat = s.repeat.unwrap_or(1);
        let runs = s.runs.unwrap_or(1);
        if !(1..=1000).contains(&repeat) || !(1..=100_000).contains(&runs) {
            return Err(bad("schedule: repeat is 1 to 1000 and runs 1 to 100000"));
        }
        let every_s = match (runs, s.every_min) {
            (1, None) => 0.0,
            (_, Some(m)) if m.is_finite() && m > 0.0 && m <= 525_600.0 => m * 60.0,
            (_, Some(_)) => return Err(bad("schedule: every_min must be above 0")),
            (_, None) => return Err(bad("schedule: runs above 1 need every_min")),
        };
        let window = s.window.as_deref().map(parse_window).transpose()?;
        let rounds = rounds_of(s.every.as_deref(), s.slip.as_deref(), runs)?;
        let total = pairs.len() * repeat as usize * runs as usize;
        if total > MAX_TESTS {
            return Err(bad(format!(
                "{total} tests in one plan; at most {MAX_TESTS} (fewer runs or pairs)"
            )));
        }
        Ok(Plan {
            name: raw.name,
            db: raw.db,
            hosts,
            pairs,
            spec,
            repeat,
            runs,
            every_s,
            window,
            rounds,
            auth,
        })
    }

    pub fn load(path: &std::path::Path) -> Result<Plan, FleetError> {
        let meta = std::fs::metadata(path)
            .map_err(|e| FleetError::Plan(format!("{}: {e}", path.display())))?;
        if meta.len() > 1 << 20 {
            return Err(bad(format!("{}: larger than 1 MiB", path.display())));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| FleetError::Plan(format!("{}: {e}", path.display())))?;
        Plan::parse(&text).map_err(|e| FleetError::Plan(format!("{}: {e}", path.display())))
    }

    /// Every test of the plan, the first run due at `start_unix_s`; each run `every_s`
    /// later, moved into the window when it falls outside.
    pub fn tests(&self, start_unix_s: f64) -> Vec<PlannedTest> {
        let mut out = Vec::new();
        for run in 0..self.runs {
            let mut due = start_unix_s + f64::from(run) * self.every_s;
            if let Some(w) = &self.window {
                due = w.next_open(due);
            }
            for rep in 0..self.repeat {
                for (from, to) in &self.pairs {
                    out.push(PlannedTest {
                        run,
                        rep,
                        from: from.clone(),
                        to: to.clone(),
                        from_addr: self.hosts[from].clone(),
                        to_addr: self.hosts[to].clone(),
                        due_unix_s: due,
                    });
                }
            }
        }
        out
    }

    /// How long a claim lasts unless renewed: twice the test's time plus room to connect
    /// and report, at most [`MAX_DEFAULT_LEASE_S`] (the runner renews it every third of
    /// the lease while the test runs, so a long test keeps its claim and a dead
    /// controller's claim expires soon).
    pub fn lease_s(&self) -> f64 {
        (2.0 * self.spec.send_seconds().unwrap_or(10.0) + 30.0).min(MAX_DEFAULT_LEASE_S)
    }

    /// The plan as the queue records it, to tell a second controller's file from the first.
    pub fn fingerprint(&self) -> String {
        format!(
            "{:?}|{:?}|{}|{}|{}|{:?}|{}",
            self.hosts,
            self.pairs,
            serde_json::to_string(&self.spec).unwrap_or_default(),
            self.repeat,
            self.runs,
            self.window,
            self.every_s
        )
    }
}

/// `[schedule] every` and `slip`: rounds on an ISO 8601 repeating interval.
fn rounds_of(
    every: Option<&str>,
    slip: Option<&str>,
    runs: u32,
) -> Result<Option<Rounds>, FleetError> {
    let Some(every) = every else {
        return match slip {
            Some(_) => Err(bad("schedule: slip goes with every")),
            None => Ok(None),
        };
    };
    if runs > 1 {
        return Err(bad(
            "schedule: every (rounds, one plan run each) or runs with every_min (runs queued \
             together), not both",
        ));
    }
    let wrap = |e: FleetError| {
        bad(format!(
            "schedule: {}",
            e.to_string().trim_start_matches("plan: ")
        ))
    };
    let (count, every_s) = crate::schedule::parse_repeat(every).map_err(wrap)?;
    let slip_s = slip
        .map(crate::schedule::parse_duration)
        .transpose()
        .map_err(wrap)?
        .unwrap_or(0.0);
    crate::schedule::Schedule::new(every_s, slip_s, count, None).map_err(wrap)?;
    Ok(Some(Rounds {
        every_s,
        slip_s,
        count,
    }))
}

fn pairs_of(
    m: RawMatrix,
    hosts: &BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, FleetError> {
    let known = |h: &String| -> Result<(), FleetError> {
        if hosts.contains_key(h) {
            Ok(())
        } else {
            Err(bad(format!("matrix: '{h}' is not in [hosts]")))
        }
    };
    let kind = m.kind.as_deref().unwrap_or("mesh");
    let mut pairs: Vec<(String, String)> = match kind {
        "mesh" => {
            let names: Vec<String> = match &m.hosts {
                Some(list) => list.clone(),
                None => hosts.keys().cloned().collect(),
            };
            for h in &names {
                known(h)?;
            }
            if m.pairs.is_some() || m.center.is_some() || m.both_ways.is_some() {
                return Err(bad("matrix: a mesh takes only hosts (every ordered pair)"));
            }
            let mut v = Vec::new();
            for a in &names {
                for b in &names {
                    if a != b {
                        v.push((a.clone(), b.clone()));
                    }
                }
            }
            v
        }
        "pairs" => {
            let list = m
                .pairs
                .as_ref()
                .ok_or_else(|| bad("matrix: kind = \"pairs\" needs pairs = [[FROM, TO], ...]"))?;
            let mut v = Vec::new();
            for [a, b] in list {
                known(a)?;
                known(b)?;
                if a == b {
                    return Err(bad(format!("matrix: pair '{a}' to '{a}' tests nothing")));
                }
                v.push((a.clone(), b.clone()));
                if m.both_ways.unwrap_or(false) {
                    v.push((b.clone(), a.clone()));
                }
            }
            v
        }
        "star" => {
            let c = m
                .center
                .as_ref()
                .ok_or_else(|| bad("matrix: kind = \"star\" needs center = HOST"))?;
            known(c)?;
            let mut v = Vec::new();
            for h in hosts.keys().filter(|h| *h != c) {
                v.push((c.clone(), h.clone()));
                if m.both_ways.unwrap_or(true) {
                    v.push((h.clone(), c.clone()));
                }
            }
            v
        }
        other => {
            return Err(bad(format!(
                "matrix: kind '{other}' is not mesh, pairs or star"
            )))
        }
    };
    let mut seen = std::collections::HashSet::new();
    pairs.retain(|p| seen.insert(p.clone()));
    if pairs.is_empty() {
        return Err(bad("matrix: no pairs to test"));
    }
    Ok(pairs)
}

/// The plan's test, lowered as `wirerate run` lowers its flags (a plan cannot ask the path:
/// Ethernet's datagram, fitted to the rate).
fn spec_of(t: &RawTest) -> Result<TestSpec, FleetError> {
    let bitrate = match &t.bitrate {
        Some(r) => Some(
            BitRate::parse(r)
                .map_err(|e| bad(format!("test: bitrate: {e}")))?
                .bps(),
        ),
        None => None,
    };
    let args = TestArgs {
        udp: t.udp.unwrap_or(false),
        seconds: t.seconds,
        bitrate,
        parallel: t.parallel,
        reverse: t.reverse.unwrap_or(false),
        omit: t.omit,
        ..TestArgs::default()
    };
    args.lower(ETHERNET_UDP_PAYLOAD)
        .map_err(|e| bad(format!("test: {}", e.in_plan_words())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirerate_core::spec::{Protocol, DEFAULT_TCP_LEN, DEFAULT_UDP_RATE_BPS};

    const FOUR: &str = r#"
name = "mesh4"
[hosts]
a = "10.77.0.1"
b = "10.77.0.2:5351"
c = "10.77.0.3"
d = "fd77::4"
[test]
seconds = 1
"#;

    #[test]
    fn a_mesh_of_four_is_twelve_ordered_pairs() {
        let p = Plan::parse(FOUR).unwrap();
        assert_eq!(p.pairs.len(), 12);
        assert!(p.pairs.contains(&("a".into(), "b".into())));
        assert!(p.pairs.contains(&("b".into(), "a".into())));
        assert_eq!(p.hosts["a"], "10.77.0.1:5350");
        assert_eq!(p.hosts["b"], "10.77.0.2:5351");
        assert_eq!(p.hosts["d"], "[fd77::4]:5350");
        assert_eq!(p.spec.send_seconds(), Some(1.0));
        assert_eq!((p.repeat, p.runs), (1, 1));
        let t = p.tests(1000.0);
        assert_eq!(t.len(), 12);
        assert!(t.iter().all(|t| t.due_unix_s == 1000.0 && t.run == 0));
        assert_eq!(p.lease_s(), 32.0);
        let long = Plan::parse(&FOUR.replace("seconds = 1", "seconds = 3600")).unwrap();
        assert_eq!(long.lease_s(), MAX_DEFAULT_LEASE_S);
    }

    #[test]
    fn pairs_and_stars() {
        let with = |m: &str| Plan::parse(&format!("{FOUR}\n[matrix]\n{m}\n"));
        let p = with("kind = \"pairs\"\npairs = [[\"a\", \"b\"], [\"c\", \"d\"]]").unwrap();
        assert_eq!(
            p.pairs,
            [("a".into(), "b".into()), ("c".into(), "d".into())]
        );
        let p = with("kind = \"pairs\"\npairs = [[\"a\", \"b\"]]\nboth_ways = true").unwrap();
        assert_eq!(p.pairs.len(), 2);
        let p = with("kind = \"star\"\ncenter = \"a\"").unwrap();
        assert_eq!(p.pairs.len(), 6);
        let p = with("kind = \"star\"\ncenter = \"a\"\nboth_ways = false").unwrap();
        assert!(p.pairs.iter().all(|(f, _)| f == "a"));
        let p = with("kind = \"mesh\"\nhosts = [\"a\", \"b\", \"c\"]").unwrap();
        assert_eq!(p.pairs.len(), 6);
        for bad in [
            "kind = \"pairs\"",
            "kind = \"pairs\"\npairs = [[\"a\", \"a\"]]",
            "kind = \"pairs\"\npairs = [[\"a\", \"zz\"]]",
            "kind = \"star\"",
            "kind = \"star\"\ncenter = \"q\"",
            "kind = \"ring\"",
            "kind = \"mesh\"\nhosts = [\"a\"]",
            "kind = \"mesh\"\ncenter = \"a\"",
        ] {
            assert!(with(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn auth_names_tls_a_user_and_the_agents_keys() {
        let fp = "ab".repeat(32);
        let p = Plan::parse(&format!(
            "{FOUR}\n[auth]\ntls = true\nuser = \"fleet\"\nfingerprint = \"{fp}\"\n\
             [auth.fingerprints]\nb = \"{}\"\n",
            "CD".repeat(32)
        ))
        .unwrap();
        assert!(p.auth.tls);
        assert_eq!(p.auth.user.as_deref(), Some("fleet"));
        assert_eq!(p.auth.fingerprint_of("a"), Some(fp.as_str()));
        assert_eq!(p.auth.fingerprint_of("b"), Some("cd".repeat(32).as_str()));
        // without [auth], plain; auth is not part of what the plan tests
        let plain = Plan::parse(FOUR).unwrap();
        assert_eq!(plain.auth, PlanAuth::default());
        assert_eq!(plain.fingerprint(), p.fingerprint());
        let bad = |a: &str| Plan::parse(&format!("{FOUR}\n[auth]\n{a}\n")).unwrap_err();
        let e = bad("user = \"fleet\"").to_string();
        assert!(e.contains("tls = true"), "{e}");
        let e = bad("tls = true\n[auth.fingerprints]\nz = \"00\"").to_string();
        assert!(e.contains("'z' is not a host"), "{e}");
        let e = bad("tls = true\nfingerprint = \"xyz\"").to_string();
        assert!(e.contains("fingerprint"), "{e}");
        let e = bad("tls = true\npassword = \"x\"").to_string();
        assert!(e.contains("password"), "{e}");
    }

    #[test]
    fn bad_plans_say_what_is_wrong() {
        let cases = [
            ("name = \"X\"\n[hosts]\na=\"h\"\nb=\"i\"", "plan name"),
            ("name = \"p\"\n[hosts]\na=\"h\"", "2 to"),
            ("name = \"p\"\n[hosts]\na=\"h:0\"\nb=\"i\"", "port"),
            ("name = \"p\"\n[hosts]\na=\"h x\"\nb=\"i\"", "agent address"),
            ("name = \"p\"\nfoo = 1\n[hosts]\na=\"h\"\nb=\"i\"", "line 2"),
            (
                "name = \"p\"\n[hosts]\na=\"h\"\nb=\"i\"\n[test]\nseconds = -1",
                "seconds",
            ),
            (
                "name = \"p\"\n[hosts]\na=\"h\"\nb=\"i\"\n[test]\nparallel = 0",
                "test:",
            ),
            (
                "name = \"p\"\n[hosts]\na=\"h\"\nb=\"i\"\n[test]\nbitrate = \"fast\"",
                "bitrate",
            ),
            (
                "name = \"p\"\n[hosts]\na=\"h\"\nb=\"i\"\n[schedule]\nruns = 3",
                "every_min",
            ),
            (
                "name = \"p\"\n[hosts]\na=\"h\"\nb=\"i\"\n[schedule]\nwindow = \"9-5\"",
                "window",
            ),
        ];
        for (text, want) in cases {
            let e = Plan::parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn schedules_space_runs_and_respect_the_window() {
        let text = format!(
            "{FOUR}\n[schedule]\nrepeat = 2\nruns = 3\nevery_min = 60\nwindow = \"08:00-18:00\"\n"
        );
        let p = Plan::parse(&text).unwrap();
        let day = 20_000.0 * 86_400.0;
        // starting at 07:00: the first run waits for 08:00, the next at 08:00 + 1 h ...
        let t = p.tests(day + 7.0 * 3600.0);
        assert_eq!(t.len(), 12 * 2 * 3);
        let due: Vec<f64> = [0, 1, 2]
            .iter()
            .map(|r| t.iter().find(|x| x.run == *r).unwrap().due_unix_s - day)
            .collect();
        assert_eq!(due, [8.0 * 3600.0, 8.0 * 3600.0, 9.0 * 3600.0]);
        // starting at 17:30: the third run (19:30) moves to 08:00 the next day
        let t = p.tests(day + 17.5 * 3600.0);
        let last = t.iter().find(|x| x.run == 2).unwrap().due_unix_s - day;
        assert_eq!(last, 86_400.0 + 8.0 * 3600.0);
        // a window across midnight
        let w = parse_window("22:00-02:00").unwrap();
        assert_eq!(w.next_open(day + 23.0 * 3600.0), day + 23.0 * 3600.0);
        assert_eq!(w.next_open(day + 3600.0), day + 3600.0);
        assert_eq!(w.next_open(day + 3.0 * 3600.0), day + 22.0 * 3600.0);
    }

    #[test]
    fn rounds_repeat_on_an_iso_8601_interval() {
        let with = |s: &str| Plan::parse(&format!("{FOUR}\n[schedule]\n{s}\n"));
        let p = with("every = \"R/PT4H\"\nslip = \"PT10M\"").unwrap();
        let r = p.rounds.unwrap();
        assert_eq!((r.every_s, r.slip_s, r.count), (14_400.0, 600.0, None));
        let p = with("every = \"R6/PT1H\"").unwrap();
        assert_eq!(p.rounds.unwrap().count, Some(6));
        assert_eq!(p.rounds.unwrap().slip_s, 0.0);
        // the schedule is how rounds are started, not what a round tests
        assert_eq!(p.fingerprint(), Plan::parse(FOUR).unwrap().fingerprint());
        assert_eq!(Plan::parse(FOUR).unwrap().rounds, None);
        for (bad, why) in [
            ("slip = \"PT1M\"", "slip goes with every"),
            (
                "every = \"PT1H\"\nslip = \"PT1H\"",
                "shorter than the interval",
            ),
            ("every = \"P1M\"", "years and months"),
            ("every = \"4h\"", "ISO 8601"),
            ("every = \"PT1H\"\nruns = 2\nevery_min = 5", "not both"),
        ] {
            let e = with(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
            assert_eq!(e.matches("plan:").count(), 1, "{e}");
        }
    }

    #[test]
    fn a_udp_plan_is_paced() {
        let p = Plan::parse(
            &format!("{FOUR}\n[test]\nudp = true\n").replace("[test]\nseconds = 1\n", ""),
        )
        .unwrap();
        assert_eq!(p.spec.protocol, Protocol::Udp);
        assert_eq!(p.spec.rate_bps, Some(DEFAULT_UDP_RATE_BPS));
    }

    #[test]
    fn a_plan_of_many_streams_gets_the_write_size_and_intervals_run_gives_them() {
        let p = Plan::parse(&format!("{FOUR}parallel = 300\n")).unwrap();
        assert_eq!(p.spec.parallel, 300);
        // 256 MiB of buffers over 300 streams, as `run -P 300` writes
        assert_eq!(p.spec.len_bytes, wirerate_core::spec::default_tcp_len(300));
        assert!(p.spec.len_bytes < DEFAULT_TCP_LEN);
        assert!(p.spec.fit_writes && p.spec.stream_intervals);
        let one = Plan::parse(FOUR).unwrap();
        assert_eq!(one.spec.len_bytes, DEFAULT_TCP_LEN);
        assert!(!one.spec.stream_intervals);
    }
}
