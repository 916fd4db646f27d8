//! `serve --limits FILE`: who may test how much (pScheduler's model, simplified). A TOML file
//! of rules, each matched by client address range and/or user; the first rule that matches
//! decides, and `[default]` applies to everyone else. A refusal names the rule and the range
//! it matched, so an operator can find it and a client knows what to ask for.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Deserialize;
use wirerate_core::spec::{Direction, End, Protocol};
use wirerate_core::units::{format_bps, BitRate, Bytes};
use wirerate_core::TestSpec;

use crate::logline::{Event, Kind};

/// An address range: a network address and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    prefix: u8,
}

/// Why a text is not an address range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    #[error("'{0}' is not an address range")]
    NotRange(String),
    #[error("'{text}': the prefix must be 0 to {max}")]
    Prefix { text: String, max: u8 },
}

impl Cidr {
    pub fn parse(s: &str) -> Result<Cidr, CidrError> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let net: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| CidrError::NotRange(s.to_string()))?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&p| p <= max)
                .ok_or_else(|| CidrError::Prefix {
                    text: s.to_string(),
                    max,
                })?,
            None => max,
        };
        Ok(Cidr { net, prefix })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        // an IPv4 client on a dual-stack socket arrives as ::ffff:a.b.c.d
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.net, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => prefix_eq(&n.octets(), &a.octets(), self.prefix),
            (IpAddr::V6(n), IpAddr::V6(a)) => prefix_eq(&n.octets(), &a.octets(), self.prefix),
            _ => false,
        }
    }
}

fn prefix_eq(a: &[u8], b: &[u8], prefix: u8) -> bool {
    let (whole, bits) = (usize::from(prefix / 8), prefix % 8);
    if a[..whole] != b[..whole] {
        return false;
    }
    bits == 0 || {
        let mask = 0xffu8 << (8 - bits);
        a[whole] & mask == b[whole] & mask
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.net, self.prefix)
    }
}

/// A size or rate written as a number or as text with a unit ("100G", "1.5M").
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Amount {
    Number(f64),
    Text(String),
}

/// One rule as written in the file.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawRule {
    name: Option<String>,
    #[serde(default)]
    from: Vec<String>,
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    refuse: bool,
    max_duration_s: Option<f64>,
    max_bytes: Option<Amount>,
    max_rate: Option<Amount>,
    max_parallel: Option<u32>,
    protocols: Option<Vec<Protocol>>,
    directions: Option<Vec<Direction>>,
    tests_per_hour: Option<u32>,
    concurrent: Option<u32>,
    third_party: Option<bool>,
    #[serde(default)]
    third_party_targets: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    /// None when the file has no `[[rule]]`; `rule = []` says "no rules" on purpose.
    rule: Option<Vec<RawRule>>,
    default: Option<RawRule>,
}

/// One rule, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub name: String,
    pub from: Vec<Cidr>,
    pub users: Vec<String>,
    pub refuse: bool,
    pub max_duration_s: Option<f64>,
    pub max_bytes: Option<u64>,
    /// bit/s per stream
    pub max_rate_bps: Option<f64>,
    pub max_parallel: Option<u32>,
    pub protocols: Option<Vec<Protocol>>,
    pub directions: Option<Vec<Direction>>,
    pub tests_per_hour: Option<u32>,
    pub concurrent: Option<u32>,
    /// Whether matching callers may ask for third-party tests (None: the server's
    /// `--allow-third-party` decides).
    pub third_party: Option<bool>,
    /// Where their third-party tests may go; empty: the server's `--third-party-targets`.
    pub third_party_targets: Vec<Cidr>,
}

/// What the rules say about a caller's third-party requests.
#[derive(Debug, Clone, PartialEq)]
pub struct ThirdPartyRule {
    /// "rule 'mesh' for 10.0.0.0/8"
    pub of: String,
    pub allow: Option<bool>,
    pub targets: Vec<Cidr>,
}

/// A limits file, validated.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Limits {
    pub rules: Vec<Rule>,
    pub default: Option<Rule>,
}

fn amount(a: &Amount, what: &'static str, rule: &str, rate: bool) -> Result<f64, LimitsError> {
    let v = match a {
        Amount::Number(n) => *n,
        Amount::Text(t) if rate => BitRate::parse(t).map(|b| b.0)?,
        Amount::Text(t) => Bytes::parse(t).map(|b| b.0 as f64)?,
    };
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(LimitsError::rule(rule, RuleProblem::NotPositive(what)))
    }
}

/// Why a limits file cannot be used; each names its line, its rule or the file.
#[derive(Debug, thiserror::Error)]
pub enum LimitsError {
    #[error("line {line}: {what}")]
    Toml { line: usize, what: String },
    #[error("no rules and no [default]; write `rule = []` to mean none")]
    NoRules,
    #[error("rule '{rule}': {problem}")]
    Rule { rule: String, problem: RuleProblem },
    /// A `max_bytes` or `max_rate` text that is not an amount.
    #[error(transparent)]
    Amount(#[from] wirerate_core::units::UnitError),
    #[error("{}: {source}", path.display())]
    File {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{}: larger than 1 MiB", .0.display())]
    TooLarge(std::path::PathBuf),
    #[error("{}: {source}", path.display())]
    InFile {
        path: std::path::PathBuf,
        source: Box<LimitsError>,
    },
}

impl LimitsError {
    fn rule(name: &str, problem: RuleProblem) -> LimitsError {
        LimitsError::Rule {
            rule: name.to_string(),
            problem,
        }
    }
}

/// What is wrong with one rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleProblem {
    #[error("a name is 1 to 64 characters")]
    Name,
    #[error("{0}")]
    From(CidrError),
    /// `max_duration_s`, `max_bytes` or `max_rate` (named) is zero or less.
    #[error("{0} must be positive")]
    NotPositive(&'static str),
    #[error("max_parallel must be at least 1")]
    Parallel,
    #[error("third_party_targets: {0}")]
    Targets(CidrError),
}

impl RawRule {
    fn validate(self, fallback: &str) -> Result<Rule, LimitsError> {
        let name = self.name.unwrap_or_else(|| fallback.to_string());
        let bad = |p: RuleProblem| LimitsError::rule(&name, p);
        if name.is_empty() || name.len() > 64 {
            return Err(bad(RuleProblem::Name));
        }
        let from = self
            .from
            .iter()
            .map(|s| Cidr::parse(s).map_err(|e| bad(RuleProblem::From(e))))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(d) = self.max_duration_s {
            if !(d.is_finite() && d > 0.0) {
                return Err(bad(RuleProblem::NotPositive("max_duration_s")));
            }
        }
        if self.max_parallel == Some(0) {
            return Err(bad(RuleProblem::Parallel));
        }
        let max_bytes = self
            .max_bytes
            .as_ref()
            .map(|a| amount(a, "max_bytes", &name, false).map(|v| v as u64))
            .transpose()?;
        let max_rate_bps = self
            .max_rate
            .as_ref()
            .map(|a| amount(a, "max_rate", &name, true))
            .transpose()?;
        let third_party_targets = self
            .third_party_targets
            .iter()
            .map(|s| Cidr::parse(s).map_err(|e| bad(RuleProblem::Targets(e))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Rule {
            third_party: self.third_party,
            third_party_targets,
            from,
            users: self.users,
            refuse: self.refuse,
            max_duration_s: self.max_duration_s,
            max_bytes,
            max_rate_bps,
            max_parallel: self.max_parallel,
            protocols: self.protocols,
            directions: self.directions,
            tests_per_hour: self.tests_per_hour,
            concurrent: self.concurrent,
            name,
        })
    }
}

impl Limits {
    pub fn parse(text: &str) -> Result<Limits, LimitsError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            // toml's own text spans lines with a drawing; one line says what and where
            let line = e.span().map_or(0, |s| {
                text[..s.start.min(text.len())].matches('\n').count() + 1
            });
            let what = e.message().lines().next().unwrap_or("").to_string();
            LimitsError::Toml { line, what }
        })?;
        if raw.rule.is_none() && raw.default.is_none() {
            // a file emptied by mistake (a failed copy, a truncated write) would lift every
            // limit and every `refuse` at the next SIGHUP
            return Err(LimitsError::NoRules);
        }
        let rules = raw
            .rule
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, r)| r.validate(&format!("rule {}", i + 1)))
            .collect::<Result<Vec<_>, _>>()?;
        let default = raw.default.map(|r| r.validate("default")).transpose()?;
        Ok(Limits { rules, default })
    }

    pub fn load(path: &std::path::Path) -> Result<Limits, LimitsError> {
        let file = |source| LimitsError::File {
            path: path.to_path_buf(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(file)?;
        if meta.len() > 1 << 20 {
            return Err(LimitsError::TooLarge(path.to_path_buf()));
        }
        let text = std::fs::read_to_string(path).map_err(file)?;
        Limits::parse(&text).map_err(|e| LimitsError::InFile {
            path: path.to_path_buf(),
            source: Box::new(e),
        })
    }

    /// The rule that applies to a client, and what it matched ("203.0.113.0/24",
    /// "user alice", "everyone").
    pub fn rule_for(&self, ip: IpAddr, user: Option<&str>) -> Option<(usize, &Rule, String)> {
        for (i, r) in self.rules.iter().enumerate() {
            let range = r.from.iter().find(|c| c.contains(ip));
            if !r.from.is_empty() && range.is_none() {
                continue;
            }
            if !r.users.is_empty() && !user.is_some_and(|u| r.users.iter().any(|x| x == u)) {
                continue;
            }
            let what = match (range, user.filter(|_| !r.users.is_empty())) {
                (Some(c), Some(u)) => format!("user {u} from {c}"),
                (Some(c), None) => c.to_string(),
                (None, Some(u)) => format!("user {u}"),
                (None, None) => "everyone".to_string(),
            };
            return Some((i, r, what));
        }
        self.default
            .as_ref()
            .map(|r| (usize::MAX, r, "everyone else".to_string()))
    }

    /// The rules in a few lines each, for `serve --check-limits`.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for (i, r) in self.rules.iter().enumerate() {
            out.push_str(&format!("{}. {}\n", i + 1, r.describe()));
        }
        match &self.default {
            Some(r) => out.push_str(&format!("default: {}\n", r.describe())),
            None => out.push_str("default: no limits beyond the server's own caps\n"),
        }
        out
    }
}

impl Rule {
    fn describe(&self) -> String {
        let mut parts = vec![format!("'{}'", self.name)];
        if !self.from.is_empty() {
            let from: Vec<String> = self.from.iter().map(Cidr::to_string).collect();
            parts.push(format!("from {}", from.join(", ")));
        }
        if !self.users.is_empty() {
            parts.push(format!("users {}", self.users.join(", ")));
        }
        if self.refuse {
            parts.push("refused".into());
        }
        if let Some(d) = self.max_duration_s {
            parts.push(format!("duration ≤ {d} s"));
        }
        if let Some(b) = self.max_bytes {
            parts.push(format!("bytes ≤ {b}"));
        }
        if let Some(r) = self.max_rate_bps {
            parts.push(format!("rate ≤ {} per stream", format_bps(r)));
        }
        if let Some(p) = self.max_parallel {
            parts.push(format!("streams ≤ {p}"));
        }
        if let Some(p) = &self.protocols {
            parts.push(format!("protocols {p:?}").to_lowercase());
        }
        if let Some(d) = &self.directions {
            parts.push(format!("directions {d:?}").to_lowercase());
        }
        if let Some(n) = self.tests_per_hour {
            parts.push(format!("{n} tests per client per hour"));
        }
        match self.third_party {
            Some(true) => parts.push("third-party tests allowed".into()),
            Some(false) => parts.push("no third-party tests".into()),
            None => {}
        }
        if !self.third_party_targets.is_empty() {
            let t: Vec<String> = self
                .third_party_targets
                .iter()
                .map(Cidr::to_string)
                .collect();
            parts.push(format!("third-party targets {}", t.join(", ")));
        }
        if let Some(n) = self.concurrent {
            parts.push(format!("{n} concurrent"));
        }
        parts.join("; ")
    }

    /// Checks a spec against this rule; `of` names the rule and what it matched.
    fn check(&self, spec: &TestSpec, of: &str) -> Result<(), String> {
        if self.refuse {
            return Err(format!("tests are not allowed by {of}"));
        }
        let secs = spec.send_seconds();
        if let (Some(max), Some(s)) = (self.max_duration_s, secs) {
            if s > max + 1e-9 {
                let (s, max) =
                    crate::guard::apart(s, max, |x| format!("{x:.0}"), |x| x.to_string());
                return Err(format!("duration {s} s exceeds the {max} s limit of {of}"));
            }
        }
        if let (Some(max), false) = (self.max_bytes, matches!(spec.end, End::Time { .. })) {
            let asked = crate::guard::target_bytes(spec).unwrap_or(u64::MAX);
            if asked > max {
                return Err(format!("{asked} bytes exceed the {max}-byte limit of {of}"));
            }
        }
        if let Some(max) = self.max_parallel {
            if spec.parallel > max {
                return Err(format!(
                    "{} streams exceed the limit of {max} of {of}",
                    spec.parallel
                ));
            }
        }
        if let Some(p) = &self.protocols {
            if !p.contains(&spec.protocol) {
                return Err(format!(
                    "protocol {} is not allowed by {of}",
                    format!("{:?}", spec.protocol).to_lowercase()
                ));
            }
        }
        if let Some(d) = &self.directions {
            if !d.contains(&spec.direction) {
                return Err(format!(
                    "direction {} is not allowed by {of}",
                    format!("{:?}", spec.direction).to_lowercase()
                ));
            }
        }
        if let Some(max) = self.max_rate_bps {
            match spec.rate_bps {
                Some(r) if r > max => {
                    let (r, max) = crate::guard::apart(r, max, format_bps, crate::guard::exact_bps);
                    return Err(format!(
                        "rate {r} per stream exceeds the {max} limit of {of}"
                    ));
                }
                // the server paces what it sends; an unpaced upload it cannot hold back
                None if spec.protocol == Protocol::Udp || spec.direction != Direction::Reverse => {
                    return Err(format!(
                        "an unpaced upload exceeds the {} rate limit of {of}; ask for a rate",
                        format_bps(max)
                    ))
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// What a rule let through: the caps it puts on the running test.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Admission {
    /// "rule 'guests' for 203.0.113.0/24", or None when no rule applies.
    pub rule: Option<String>,
    /// A timed test's bytes are bounded while it runs.
    pub max_bytes: Option<u64>,
    /// The server's senders are paced to this (bit/s per stream).
    pub pace_bps: Option<f64>,
    /// Index of the rule for the concurrency count (usize::MAX for the default).
    index: Option<usize>,
}

/// The prefix an IPv6 client is counted by in every per-address limit: a host is commonly
/// given a whole /64, and would otherwise count as 2^64 clients (OpenSSH's
/// PerSourceNetBlockSize groups addresses the same way).
pub const V6_SOURCE_PREFIX: u32 = 64;

/// The source a per-address limit counts a client as (pending connections, failed logins,
/// log lines, tests per hour): an IPv4 address (IPv4-mapped ones too) as itself, an IPv6
/// address as its /64.
pub fn source_of(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let mask = u128::MAX << (128 - V6_SOURCE_PREFIX);
            IpAddr::V6((u128::from(v6) & mask).into())
        }
        v4 => v4,
    }
}

/// The limits in force and the counts they need: recent tests per client and rule, and
/// running tests per rule.
#[derive(Debug, Default)]
pub struct Policy {
    state: Mutex<PolicyState>,
}

#[derive(Debug, Default)]
struct PolicyState {
    limits: Limits,
    recent: HashMap<(usize, IpAddr), VecDeque<Instant>>,
    running: HashMap<usize, u32>,
}

/// Clients whose recent tests are remembered at most; beyond, the oldest hour is forgotten.
const MAX_REMEMBERED: usize = 100_000;
const HOUR: Duration = Duration::from_secs(3600);

impl Policy {
    pub fn new(limits: Limits) -> Policy {
        Policy {
            state: Mutex::new(PolicyState {
                limits,
                ..Default::default()
            }),
        }
    }

    /// Puts new limits in force (SIGHUP); running tests keep what they were admitted with.
    pub fn replace(&self, limits: Limits) {
        let mut st = self.lock();
        st.limits = limits;
        st.recent.clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PolicyState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits a test or says why not; an admitted test counts until [`Policy::release`].
    pub fn admit(
        &self,
        ip: IpAddr,
        user: Option<&str>,
        spec: &TestSpec,
        now: Instant,
    ) -> Result<Admission, String> {
        let mut st = self.lock();
        let Some((index, rule, what)) = st.limits.rule_for(ip, user) else {
            return Ok(Admission::default());
        };
        let rule = rule.clone();
        let of = format!("rule '{}' for {what}", rule.name);
        rule.check(spec, &of)?;
        if let Some(max) = rule.concurrent {
            if st.running.get(&index).copied().unwrap_or(0) >= max {
                return Err(format!("{max} concurrent test(s) are the limit of {of}"));
            }
        }
        if let Some(max) = rule.tests_per_hour {
            if st.recent.len() >= MAX_REMEMBERED {
                st.recent
                    .retain(|_, q| q.back().is_some_and(|&t| now.duration_since(t) < HOUR));
            }
            let q = st.recent.entry((index, source_of(ip))).or_default();
            while q
                .front()
                .is_some_and(|&t| now.saturating_duration_since(t) >= HOUR)
            {
                q.pop_front();
            }
            if q.len() >= max as usize {
                return Err(format!(
                    "{max} tests per hour are the limit of {of}; the next is allowed in {} s",
                    q.front()
                        .map_or(0, |&t| HOUR.saturating_sub(now.duration_since(t)).as_secs())
                ));
            }
            q.push_back(now);
        }
        *st.running.entry(index).or_insert(0) += 1;
        Ok(Admission {
            rule: Some(of),
            max_bytes: rule.max_bytes,
            pace_bps: rule.max_rate_bps,
            index: Some(index),
        })
    }

    /// What the rule that applies to `ip` says about third-party requests; None when no
    /// rule applies.
    pub fn third_party(&self, ip: IpAddr, user: Option<&str>) -> Option<ThirdPartyRule> {
        let st = self.lock();
        let (_, rule, what) = st.limits.rule_for(ip, user)?;
        Some(ThirdPartyRule {
            of: format!("rule '{}' for {what}", rule.name),
            allow: rule.third_party,
            targets: rule.third_party_targets.clone(),
        })
    }

    /// The name of the rule that applies to a client now, for the log.
    pub fn rule_name(&self, ip: IpAddr, user: Option<&str>) -> Option<String> {
        self.lock()
            .limits
            .rule_for(ip, user)
            .map(|(_, r, _)| r.name.clone())
    }

    /// The admitted test has ended.
    pub fn release(&self, a: &Admission) {
        if let Some(i) = a.index {
            let mut st = self.lock();
            if let Some(n) = st.running.get_mut(&i) {
                *n = n.saturating_sub(1);
            }
        }
    }
}

/// `serve` reloads its files when SIGHUP has set `flag` (the handler does nothing else).
#[derive(Debug, Clone)]
pub struct Reload {
    pub flag: &'static AtomicBool,
    pub limits: Option<PathBuf>,
    /// The users file, reloaded on the same signal.
    pub users: Option<std::sync::Arc<crate::users::UserDb>>,
}

impl Reload {
    /// When asked, reads the limits and users files again and puts them in force; a file
    /// that fails to load keeps what is in force. The log lines to write.
    pub fn reload_now(&self, policy: &Policy) -> Vec<(Event, String)> {
        if !self.flag.swap(false, Ordering::SeqCst) {
            return Vec::new();
        }
        let mut out: Vec<_> = self.reload_limits(policy).into_iter().collect();
        out.extend(self.users.as_ref().and_then(|u| u.reload()));
        out
    }

    fn reload_limits(&self, policy: &Policy) -> Option<(Event, String)> {
        let path = self.limits.as_ref()?;
        let ev = Event::new(Kind::Reload, None);
        Some(match Limits::load(path) {
            Ok(l) => {
                let n = l.rules.len();
                policy.replace(l);
                let text = format!("reloaded {}: {n} rule(s)", path.display());
                (ev.reason(text.clone()), text)
            }
            Err(e) => {
                let text = format!("reload failed, the old rules stay: {e}");
                let mut ev = ev;
                ev.error = Some(text.clone());
                (ev, text)
            }
        })
    }
}

#[cfg(test)]
#[path = "limits_tests.rs"]
mod tests;
