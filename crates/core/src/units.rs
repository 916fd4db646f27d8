//! Quantities with their units: sizes in bytes (IEC suffixes, `128K` = 131 072) and bit rates
//! (SI suffixes, `10M` = 10 000 000 bit/s). The two never share a parser, so `K` can never
//! mean 1024 in one place and 1000 in another.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a size or a rate did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("'{0}' is empty")]
    Empty(String),
    #[error("'{0}' is not a number with an optional K, M, G or T suffix")]
    Malformed(String),
    #[error("'{0}' is too large")]
    Overflow(String),
    #[error("'{0}' must be positive")]
    NotPositive(String),
    #[error("'{given}' is in bytes per second (B); rates are in bits per second: write {bits}")]
    BytesPerSecond { given: String, bits: String },
}

/// A count of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Bytes(pub u64);

/// A bit rate in bits per second.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BitRate(pub f64);

fn split_suffix(s: &str) -> (&str, Option<char>) {
    match s.chars().last() {
        Some(c) if c.is_ascii_alphabetic() => (&s[..s.len() - 1], Some(c.to_ascii_uppercase())),
        _ => (s, None),
    }
}

fn suffix_power(c: Option<char>, original: &str) -> Result<u32, UnitError> {
    match c {
        None => Ok(0),
        Some('K') => Ok(1),
        Some('M') => Ok(2),
        Some('G') => Ok(3),
        Some('T') => Ok(4),
        Some(_) => Err(UnitError::Malformed(original.to_string())),
    }
}

/// Drops a trailing `B`/`iB` that follows a K/M/G/T prefix (`4KB`, `4KiB`) or a digit (`100B`).
fn strip_byte_suffix(t: &str) -> &str {
    if let Some(rest) = t.strip_suffix("iB").or_else(|| t.strip_suffix("ib")) {
        return rest;
    }
    match t.strip_suffix('B').or_else(|| t.strip_suffix('b')) {
        Some(rest) if rest.ends_with(|c: char| c.is_ascii_alphanumeric()) => rest,
        _ => t,
    }
}

impl Bytes {
    /// Parses a size: a number with an optional suffix K, M, G or T meaning powers of 1024.
    /// A trailing `B` or `iB` is accepted (`4KiB`, `4KB`). Fractions are allowed (`1.5M`) and
    /// rounded down to whole bytes.
    pub fn parse(s: &str) -> Result<Bytes, UnitError> {
        let t = s.trim();
        if t.is_empty() {
            return Err(UnitError::Empty(s.to_string()));
        }
        let t = strip_byte_suffix(t);
        let (num, suffix) = split_suffix(t);
        let power = suffix_power(suffix, s)?;
        let mult = 1024f64.powi(power as i32);
        if let Ok(n) = num.parse::<u64>() {
            let m = 1024u64.pow(power);
            return n
                .checked_mul(m)
                .map(Bytes)
                .ok_or_else(|| UnitError::Overflow(s.to_string()));
        }
        let x: f64 = num
            .parse()
            .map_err(|_| UnitError::Malformed(s.to_string()))?;
        if !x.is_finite() || x < 0.0 {
            return Err(UnitError::Malformed(s.to_string()));
        }
        let v = x * mult;
        if v >= u64::MAX as f64 {
            return Err(UnitError::Overflow(s.to_string()));
        }
        Ok(Bytes(v as u64))
    }

    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Bytes {
    /// Exact IEC rendering when the value is a whole multiple, otherwise bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(&str, u64); 4] = [
            ("TiB", 1 << 40),
            ("GiB", 1 << 30),
            ("MiB", 1 << 20),
            ("KiB", 1 << 10),
        ];
        for (name, m) in UNITS {
            if self.0 >= m && self.0.is_multiple_of(m) {
                return write!(f, "{} {}", self.0 / m, name);
            }
        }
        write!(f, "{} B", self.0)
    }
}

impl BitRate {
    /// Parses a bit rate: a number with an optional suffix K, M, G or T meaning powers of
    /// 1000, in bits per second. `bps`, `bit/s` and `b` after the suffix are accepted
    /// (`10Mbps`, `1Gbit/s`).
    pub fn parse(s: &str) -> Result<BitRate, UnitError> {
        let t = s.trim();
        if t.is_empty() {
            return Err(UnitError::Empty(s.to_string()));
        }
        bytes_per_second(t, s)?;
        let lower = t.to_ascii_lowercase();
        let stripped = ["bit/s", "bps", "b/s", "bit", "b"]
            .iter()
            .find_map(|suf| lower.strip_suffix(suf))
            .unwrap_or(&lower);
        let (num, suffix) = split_suffix(stripped);
        let power = suffix_power(suffix, s)?;
        let x: f64 = num
            .parse()
            .map_err(|_| UnitError::Malformed(s.to_string()))?;
        if !x.is_finite() || x < 0.0 {
            return Err(UnitError::Malformed(s.to_string()));
        }
        if x == 0.0 {
            return Err(UnitError::NotPositive(s.to_string()));
        }
        Ok(BitRate(x * 1000f64.powi(power as i32)))
    }

    pub fn bps(self) -> f64 {
        self.0
    }
}

/// A rate written in bytes (`10MB`, `10MB/s`, `1GBps`: a capital `B` that does not begin
/// `Bit`) is refused, naming the rate in bits it would be, rather than read as bits.
fn bytes_per_second(t: &str, original: &str) -> Result<(), UnitError> {
    let Some(at) = t.rfind(|c: char| c.is_ascii_digit() || c == '.') else {
        return Ok(());
    };
    let unit = &t[at + 1..];
    let unit = unit
        .strip_prefix(['k', 'K', 'm', 'M', 'g', 'G', 't', 'T'])
        .unwrap_or(unit);
    if !unit.starts_with('B') || unit.to_ascii_lowercase().starts_with("bit") {
        return Ok(());
    }
    let bytes_form = format!("{}{}", &t[..=at], &t[at + 1..t.len() - unit.len()]);
    let bits = match BitRate::parse(&bytes_form) {
        Ok(r) => format_rate_arg(r.0 * 8.0),
        Err(_) => "the rate in bits (e.g. 80M for 10 MB/s)".to_string(),
    };
    Err(UnitError::BytesPerSecond {
        given: original.trim().to_string(),
        bits,
    })
}

/// A rate as an argument would spell it: the largest SI prefix that keeps it whole-ish.
fn format_rate_arg(bps: f64) -> String {
    for (p, m) in [("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)] {
        if bps >= m {
            let v = bps / m;
            return format!("{}{p}", trim_float(v));
        }
    }
    trim_float(bps)
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl fmt::Display for BitRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_bps(self.0))
    }
}

/// Formats a rate with an SI prefix and three significant decimals: `37.12 Gbit/s`.
pub fn format_bps(bps: f64) -> String {
    let (v, unit) = if bps >= 1e12 {
        (bps / 1e12, "Tbit/s")
    } else if bps >= 1e9 {
        (bps / 1e9, "Gbit/s")
    } else if bps >= 1e6 {
        (bps / 1e6, "Mbit/s")
    } else if bps >= 1e3 {
        (bps / 1e3, "kbit/s")
    } else {
        (bps, "bit/s")
    };
    format!("{v:.2} {unit}")
}

/// Formats a byte count with an IEC prefix and two decimals: `4.25 GiB`.
pub fn format_bytes(n: u64) -> String {
    let x = n as f64;
    if x >= (1u64 << 40) as f64 {
        format!("{:.2} TiB", x / (1u64 << 40) as f64)
    } else if x >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", x / (1u64 << 30) as f64)
    } else if x >= (1u64 << 20) as f64 {
        format!("{:.2} MiB", x / (1u64 << 20) as f64)
    } else if x >= 1024.0 {
        format!("{:.2} KiB", x / 1024.0)
    } else {
        format!("{n} B")
    }
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM:SS` in UTC; "-" when not a sane time.
pub fn utc(unix_s: f64) -> String {
    if !(unix_s.is_finite() && (0.0..253_402_300_800.0).contains(&unix_s)) {
        return "-".to_string();
    }
    let secs = unix_s as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_date(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The proleptic Gregorian date of a day count from 1970-01-01, via 400-year eras of
/// 146 097 days counted from 0000-03-01 (so the leap day ends each year).
fn civil_date(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Seconds since the epoch as RFC 3339 in UTC with milliseconds
/// (`2026-11-23T11:45:43.120Z`); "-" when not a sane time.
pub fn rfc3339(unix_s: f64) -> String {
    let day = utc(unix_s);
    if day == "-" {
        return day;
    }
    let ms = ((unix_s.fract() * 1000.0) as u32).min(999);
    format!("{}.{ms:03}Z", day.replacen(' ', "T", 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_rate_in_bytes_is_refused_with_its_rate_in_bits() {
        for (given, bits) in [
            ("10MB", "80M"),
            ("10MB/s", "80M"),
            ("1.5GBps", "12G"),
            ("100KB", "800K"),
            ("125B", "1K"),
        ] {
            match BitRate::parse(given) {
                Err(UnitError::BytesPerSecond { bits: b, .. }) => assert_eq!(b, bits, "{given}"),
                other => panic!("{given}: {other:?}"),
            }
        }
        let e = BitRate::parse("10MB").unwrap_err().to_string();
        assert!(e.contains("bits per second") && e.contains("80M"), "{e}");
    }

    #[test]
    fn sizes_are_iec() {
        assert_eq!(Bytes::parse("128K").unwrap(), Bytes(131_072));
        assert_eq!(Bytes::parse("1M").unwrap(), Bytes(1_048_576));
        assert_eq!(Bytes::parse("2g").unwrap(), Bytes(2 << 30));
        assert_eq!(Bytes::parse("4KiB").unwrap(), Bytes(4096));
        assert_eq!(Bytes::parse("4KB").unwrap(), Bytes(4096));
        assert_eq!(Bytes::parse("1.5K").unwrap(), Bytes(1536));
        assert_eq!(Bytes::parse("8192").unwrap(), Bytes(8192));
        assert_eq!(Bytes::parse("100B").unwrap(), Bytes(100));
    }

    #[test]
    fn rates_are_si() {
        assert_eq!(BitRate::parse("10M").unwrap().bps(), 10_000_000.0);
        assert_eq!(BitRate::parse("1G").unwrap().bps(), 1e9);
        assert_eq!(BitRate::parse("100k").unwrap().bps(), 100_000.0);
        assert_eq!(BitRate::parse("10Mbps").unwrap().bps(), 1e7);
        assert_eq!(BitRate::parse("2.5Gbit/s").unwrap().bps(), 2.5e9);
        assert_eq!(BitRate::parse("1GBit/s").unwrap().bps(), 1e9);
        assert_eq!(BitRate::parse("10Mb").unwrap().bps(), 1e7);
    }

    #[test]
    fn bad_units_are_errors() {
        for bad in ["", "abc", "10X", "-5", "1.2.3K", "K", "NaN", "inf"] {
            assert!(Bytes::parse(bad).is_err(), "size {bad:?}");
            assert!(BitRate::parse(bad).is_err(), "rate {bad:?}");
        }
        assert!(Bytes::parse("99999999999T").is_err());
        assert!(BitRate::parse("0").is_err());
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0.0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400.0), "2000-02-29 00:00:00");
        assert_eq!(utc(830_916_000.0), "1996-05-01 02:00:00");
        assert_eq!(utc(1_700_000_000.0), "2023-11-14 22:13:20");
        assert_eq!(utc(f64::NAN), "-");
        assert_eq!(rfc3339(1_700_000_000.25), "2023-11-14T22:13:20.250Z");
        assert_eq!(rfc3339(-1.0), "-");
    }

    #[test]
    fn display() {
        assert_eq!(Bytes(131_072).to_string(), "128 KiB");
        assert_eq!(Bytes(1000).to_string(), "1000 B");
        assert_eq!(format_bps(37_120_000_000.0), "37.12 Gbit/s");
        assert_eq!(format_bytes(1536), "1.50 KiB");
    }

    proptest! {
        #[test]
        fn size_round_trip(n in 0u64..(1u64 << 50)) {
            prop_assert_eq!(Bytes::parse(&n.to_string()).unwrap(), Bytes(n));
            prop_assert_eq!(Bytes::parse(&format!("{}K", n >> 10)).unwrap(), Bytes((n >> 10) << 10));
        }

        #[test]
        fn parsers_never_panic(s in "\\PC{0,12}") {
            let _ = Bytes::parse(&s);
            let _ = BitRate::parse(&s);
        }
    }
}
