//! The Prometheus text exposition format (version 0.0.4): each family once, with its HELP
//! and TYPE lines, then its samples; label values and help text escaped as the format says.
//! A family with no sample is not written at all, so an unknown figure (no RTT over UDP) is
//! absent rather than a made-up zero.

use std::fmt::Write as _;

/// The content type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A family's type. Info metrics (`_info`, value 1, the facts in labels) are gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        }
    }
}

/// Something that adds families to an exposition: the server's counters, the exporter's,
/// and whatever else a command exports (change points over the history, say).
pub trait MetricSource: Send + Sync {
    fn write(&self, out: &mut Exposition);
}

/// One exposition being written.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
    names: Vec<String>,
}

/// The family being written: its header goes out with its first sample.
pub struct Family<'a> {
    exp: &'a mut Exposition,
    name: &'a str,
    kind: Kind,
    help: &'a str,
    started: bool,
}

impl Exposition {
    pub fn new() -> Exposition {
        Exposition::default()
    }

    /// Starts a family. Names are the program's own: a bad or repeated one is a bug, caught
    /// here in tests and debug builds.
    pub fn family<'a>(&'a mut self, name: &'a str, kind: Kind, help: &'a str) -> Family<'a> {
        debug_assert!(valid_name(name), "bad metric name {name}");
        debug_assert!(
            kind != Kind::Counter || name.ends_with("_total"),
            "counter {name} without _total"
        );
        debug_assert!(
            !self.names.iter().any(|n| n == name),
            "family {name} written twice"
        );
        self.names.push(name.to_string());
        Family {
            exp: self,
            name,
            kind,
            help,
            started: false,
        }
    }

    /// A family of one sample without labels; None writes nothing.
    pub fn single(&mut self, name: &str, kind: Kind, help: &str, value: Option<f64>) {
        let mut f = self.family(name, kind, help);
        if let Some(v) = value {
            f.sample(&[], v);
        }
    }

    /// An `_info` family of one sample: value 1, the facts in its labels.
    pub fn info(&mut self, name: &str, help: &str, labels: &[(&str, &str)]) {
        debug_assert!(name.ends_with("_info"), "info metric {name} without _info");
        self.family(name, Kind::Gauge, help).sample(labels, 1.0);
    }

    pub fn as_str(&self) -> &str {
        &self.out
    }

    pub fn finish(self) -> String {
        self.out
    }
}

impl Family<'_> {
    /// One sample. Label names are the program's own; their values are escaped.
    pub fn sample(&mut self, labels: &[(&str, &str)], value: f64) -> &mut Self {
        let out = &mut self.exp.out;
        if !self.started {
            self.started = true;
            let _ = writeln!(out, "# HELP {} {}", self.name, escape_help(self.help));
            let _ = writeln!(out, "# TYPE {} {}", self.name, self.kind.word());
        }
        out.push_str(self.name);
        if !labels.is_empty() {
            out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                debug_assert!(valid_label(k), "bad label name {k}");
                if i > 0 {
                    out.push(',');
                }
                let _ = write!(out, "{k}=\"{}\"", escape_label(v));
            }
            out.push('}');
        }
        out.push(' ');
        out.push_str(&number(value));
        out.push('\n');
        self
    }
}

/// A sample value: integers without a fraction, very small values (a p-value) with an
/// exponent, NaN and the infinities as the format spells them.
pub fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v == v.trunc() && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else if v.abs() < 1e-4 {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// A label value: backslash, double quote and line feed escaped.
pub fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// Help text: backslash and line feed escaped.
pub fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

fn valid_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn valid_label(n: &str) -> bool {
    valid_name(n) && !n.contains(':') && !n.starts_with("__")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_family_has_help_and_type_once_then_its_samples() {
        let mut e = Exposition::new();
        e.family("x_requests_total", Kind::Counter, "Requests.")
            .sample(&[("code", "200")], 3.0)
            .sample(&[("code", "404")], 1.0);
        e.single("x_temperature_celsius", Kind::Gauge, "Heat.", Some(21.5));
        assert_eq!(
            e.finish(),
            "# HELP x_requests_total Requests.\n# TYPE x_requests_total counter\n\
             x_requests_total{code=\"200\"} 3\nx_requests_total{code=\"404\"} 1\n\
             # HELP x_temperature_celsius Heat.\n# TYPE x_temperature_celsius gauge\n\
             x_temperature_celsius 21.5\n"
        );
    }

    #[test]
    fn a_family_without_samples_is_not_written() {
        let mut e = Exposition::new();
        e.single("x_rtt_seconds", Kind::Gauge, "RTT.", None);
        e.family("x_info", Kind::Gauge, "Facts.");
        assert_eq!(e.finish(), "");
    }

    #[test]
    fn label_values_and_help_are_escaped() {
        let mut e = Exposition::new();
        e.info(
            "x_build_info",
            "Line one\nline \\two",
            &[("v", "a\"b\\c\nd")],
        );
        let text = e.finish();
        assert!(text.contains("# HELP x_build_info Line one\\nline \\\\two\n"));
        assert!(
            text.contains("x_build_info{v=\"a\\\"b\\\\c\\nd\"} 1\n"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 3);
    }

    #[test]
    fn numbers_are_written_as_the_format_reads_them() {
        assert_eq!(number(0.0), "0");
        assert_eq!(number(125_000_000.0), "125000000");
        assert_eq!(number(0.25), "0.25");
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(f64::INFINITY), "+Inf");
        assert_eq!(number(f64::NEG_INFINITY), "-Inf");
        assert_eq!(number(1.5e20).parse::<f64>(), Ok(1.5e20));
        assert_eq!(number(-3.0), "-3");
        assert_eq!(number(5.078e-10), "5.078e-10");
        assert_eq!(number(-1e-300).parse::<f64>(), Ok(-1e-300));
    }

    #[test]
    fn names_are_checked() {
        assert!(valid_name("wirerate_probe_success"));
        assert!(!valid_name("9lives"));
        assert!(!valid_name("a-b"));
        assert!(valid_label("end"));
        assert!(!valid_label("__name"));
    }

    #[test]
    #[should_panic(expected = "without _total")]
    #[cfg(debug_assertions)]
    fn a_counter_must_end_in_total() {
        Exposition::new().family("x_requests", Kind::Counter, "Requests.");
    }

    #[test]
    #[should_panic(expected = "written twice")]
    #[cfg(debug_assertions)]
    fn a_family_is_written_once() {
        let mut e = Exposition::new();
        e.single("x_a", Kind::Gauge, "A.", Some(1.0));
        e.single("x_a", Kind::Gauge, "A.", Some(2.0));
    }
}
