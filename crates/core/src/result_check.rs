//! Plausibility checks on a result document that came from a file, not from a measurement:
//! what `import` refuses to store. A live result passes them by construction.

use crate::result::{RunResult, SCHEMA_VERSION};

fn rate(name: &'static str, v: f64) -> Result<(), Implausible> {
    // faster than any link a spec may state is not a measurement
    if v.is_finite() && (0.0..=crate::spec::limits::MAX_LINK_BPS).contains(&v) {
        Ok(())
    } else {
        Err(Implausible::Rate { name, v })
    }
}

fn seconds(name: &'static str, v: f64) -> Result<(), Implausible> {
    if v.is_finite() && (0.0..=10.0 * crate::spec::limits::MAX_SECONDS).contains(&v) {
        Ok(())
    } else {
        Err(Implausible::Duration { name, v })
    }
}

/// What makes a result document one no measurement produced; fields are named by path
/// (`summary.udp.jitter_ms`).
#[derive(Debug, thiserror::Error)]
pub enum Implausible {
    #[error("schema_version {0} is not one this wirerate reads ({SCHEMA_VERSION})")]
    Schema(u32),
    #[error("the spec is not valid: {0}")]
    Spec(#[source] crate::spec::SpecError),
    /// An rpm run's own settings (their check says why in words).
    #[error("the spec is not valid: {0}")]
    Rpm(String),
    #[error("started_unix_s is not a time")]
    Started,
    #[error("{name} {v} is not a possible rate")]
    Rate { name: &'static str, v: f64 },
    #[error("{name} {v} is not a possible duration")]
    Duration { name: &'static str, v: f64 },
    #[error("loss {0} % is outside 0-100")]
    Loss(f64),
    #[error("{0}")]
    Encode(#[source] serde_json::Error),
    #[error("{path}: {len} bytes of text is longer than the {max} allowed")]
    Text {
        path: String,
        len: usize,
        max: usize,
    },
    #[error("{path}: {figure} is outside {lo} to {hi}")]
    Figure {
        path: String,
        figure: String,
        lo: String,
        hi: String,
    },
}

impl RunResult {
    /// Checks what `history` and `compare` rely on: a known schema, a valid spec, and rates,
    /// times and loss a measurement can produce.
    pub fn check_plausible(&self) -> Result<(), Implausible> {
        if self.schema_version != SCHEMA_VERSION {
            return Err(Implausible::Schema(self.schema_version));
        }
        // an rpm run's phases were ordinary tests: its spec is checked as its last phase's
        let mut spec = self.spec.clone();
        if let crate::spec::TestKind::Rpm(r) = &spec.test {
            r.validate().map_err(Implausible::Rpm)?;
            spec.test = crate::spec::TestKind::Stream;
        }
        spec.validate().map_err(Implausible::Spec)?;
        if !(self.started_unix_s.is_finite() && self.started_unix_s >= 0.0) {
            return Err(Implausible::Started);
        }
        let s = &self.summary;
        rate("goodput_bps", s.goodput_bps)?;
        rate("sender_bps", s.sender_bps)?;
        seconds("seconds", s.seconds)?;
        seconds("sender_seconds", s.sender_seconds)?;
        for f in &s.flows {
            rate("a flow's goodput_bps", f.goodput_bps)?;
            rate("a flow's sender_bps", f.sender_bps)?;
            seconds("a flow's seconds", f.seconds)?;
        }
        if let Some(u) = &s.udp {
            if !(u.loss_percent.is_finite() && (0.0..=100.0).contains(&u.loss_percent)) {
                return Err(Implausible::Loss(u.loss_percent));
            }
        }
        for i in &self.intervals {
            rate("an interval's bps", i.bps)?;
            seconds("an interval's start_s", i.start_s)?;
            seconds("an interval's end_s", i.end_s)?;
        }
        let doc = serde_json::to_value(self).map_err(Implausible::Encode)?;
        let mut path = String::new();
        check_fields(&doc, &mut path)
    }
}

/// The longest text a result may hold in a field that names something (a host, a kernel,
/// an interface), and in any other field (a diagnosis's advice).
pub const MAX_NAME_BYTES: usize = 256;
pub const MAX_TEXT_BYTES: usize = 4096;

/// Fields whose text names something: short, one line.
const NAME_FIELDS: [&str; 10] = [
    "hostname",
    "kernel",
    "cpu_model",
    "name",
    "driver",
    "congestion",
    "server_addr",
    "version",
    "link_source",
    "loss_location",
];

/// The largest magnitude any figure may have: no counter of a measurement passes 2^64.
const MAX_FIGURE: f64 = 18_446_744_073_709_551_616.0;
/// The longest duration a field may state, in seconds (longer than any host's uptime and any
/// sum of CPU time of a test): 1e9 s, about 32 years.
const MAX_DURATION_S: f64 = 1e9;

/// The range a field's name promises (units in names: `_percent`, `_bps`, `_s`, `_ms`,
/// `_us`), or None for figures bounded only by [`MAX_FIGURE`].
fn range_of(key: &str) -> Option<(f64, f64)> {
    use crate::spec::limits::MAX_LINK_BPS;
    Some(match key {
        // % of one core: more than 100 on a multi-core host
        "process_percent" => (0.0, 100.0 * 65_536.0),
        "started_unix_s" => (0.0, 1e11),
        // a fitted asymptote, not a measured rate
        "r_inf_bps" => (0.0, MAX_FIGURE),
        "bps" => (0.0, MAX_LINK_BPS),
        k if k.ends_with("_per_s") => return None,
        k if k.ends_with("_percent") => (0.0, 100.0),
        k if k.ends_with("_bps") => (0.0, MAX_LINK_BPS),
        k if k.ends_with("_s") => (0.0, MAX_DURATION_S),
        k if k.ends_with("_ms") => (0.0, MAX_DURATION_S * 1e3),
        k if k.ends_with("_us") => (0.0, MAX_DURATION_S * 1e6),
        _ => return None,
    })
}

/// Every field of a result document within bounds: text by length, figures finite and in
/// the range their names promise. The error names the field (`summary.udp.jitter_ms`).
fn check_fields(v: &serde_json::Value, path: &mut String) -> Result<(), Implausible> {
    use serde_json::Value;
    let key = path.rsplit(['.', ']']).next().unwrap_or("");
    match v {
        Value::String(s) => {
            let max = if NAME_FIELDS.contains(&key) {
                MAX_NAME_BYTES
            } else {
                MAX_TEXT_BYTES
            };
            if s.len() > max {
                return Err(Implausible::Text {
                    path: path.clone(),
                    len: s.len(),
                    max,
                });
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            let (lo, hi) = range_of(key).unwrap_or((-MAX_FIGURE, MAX_FIGURE));
            if !(x.is_finite() && (lo..=hi).contains(&x)) {
                let shown = |b: f64| {
                    if b.abs() >= 1e6 {
                        format!("{b:e}")
                    } else {
                        b.to_string()
                    }
                };
                return Err(Implausible::Figure {
                    path: path.clone(),
                    figure: n.to_string(),
                    lo: shown(lo),
                    hi: shown(hi),
                });
            }
        }
        Value::Array(items) => {
            let len = path.len();
            for (i, item) in items.iter().enumerate() {
                path.push_str(&format!("[{i}]"));
                check_fields(item, path)?;
                path.truncate(len);
            }
        }
        Value::Object(m) => {
            let len = path.len();
            for (k, item) in m {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                check_fields(item, path)?;
                path.truncate(len);
            }
        }
        Value::Null | Value::Bool(_) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::synth;

    #[test]
    fn impossible_values_are_caught() {
        let good = synth::run(1, 1e9, 3);
        good.check_plausible().unwrap();
        let mut r = good.clone();
        r.summary.goodput_bps = -5.0;
        assert!(r
            .check_plausible()
            .unwrap_err()
            .to_string()
            .contains("goodput"));
        let mut r = good.clone();
        r.summary.goodput_bps = 1e308;
        assert!(r.check_plausible().is_err());
        let mut r = good.clone();
        r.schema_version = 999;
        assert!(r
            .check_plausible()
            .unwrap_err()
            .to_string()
            .contains("schema_version"));
        let mut r = good;
        r.spec.parallel = 0;
        assert!(r
            .check_plausible()
            .unwrap_err()
            .to_string()
            .contains("parallel"));
    }

    #[test]
    fn every_field_is_bounded_and_named_when_not() {
        let good = synth::run(1, 1e9, 3);
        let mut r = good.clone();
        r.summary.udp = Some(crate::result::UdpSummary {
            jitter_ms: Some(1e300),
            ..Default::default()
        });
        let e = r.check_plausible().unwrap_err().to_string();
        assert!(
            e.starts_with("summary.udp.jitter_ms: 1e+300 is outside 0 to 1e12"),
            "{e}"
        );
        let mut r = good.clone();
        r.env.server.hostname = Some("h".repeat(10 << 20));
        let e = r.check_plausible().unwrap_err().to_string();
        assert!(e.starts_with("env.server.hostname: 10485760 bytes"), "{e}");
        let mut r = good.clone();
        r.summary.cpu.local.as_mut().unwrap().system_percent = Some(250.0);
        let e = r.check_plausible().unwrap_err().to_string();
        assert!(e.starts_with("summary.cpu.local.system_percent"), "{e}");
        let mut r = good.clone();
        r.intervals[2].bps = -1.0;
        assert!(r.check_plausible().unwrap_err().to_string().contains("bps"));
        let mut r = good;
        r.summary.tcp.as_mut().unwrap().rtt_us = Some(-3.0);
        let e = r.check_plausible().unwrap_err().to_string();
        assert!(e.starts_with("summary.tcp.rtt_us: -3"), "{e}");
    }
}
