//! DSCP classes by name (RFC 2474, 2597, 3246, 8622): what `--dscp` takes, as RRUL marks its
//! flows (BE, BK, CS5, EF).

/// The DSCP (0–63) of a class name or number: `BE` (= `CS0`), `BK` (background, = `CS1`
/// as RRUL uses it), `LE` (lower effort, RFC 8622), `CS0`–`CS7`, `AF11`–`AF43`, `EF`, or a
/// number 0–63. Case is ignored.
pub fn parse(s: &str) -> Result<u8, NotDscp> {
    let up = s.trim().to_ascii_uppercase();
    let bad = || NotDscp(s.to_string());
    let v = match up.as_str() {
        "BE" => 0,
        "BK" => 8,
        "LE" => 1,
        "EF" => 46,
        _ => {
            if let Some(n) = up.strip_prefix("CS") {
                match n.parse::<u8>() {
                    Ok(n) if n <= 7 => n << 3,
                    _ => return Err(bad()),
                }
            } else if let Some(n) = up.strip_prefix("AF") {
                let d: Vec<u8> = n.bytes().map(|b| b.wrapping_sub(b'0')).collect();
                match d[..] {
                    [class @ 1..=4, drop @ 1..=3] => (class << 3) | (drop << 1),
                    _ => return Err(bad()),
                }
            } else {
                match up.parse::<u8>() {
                    Ok(n) if n <= 63 => n,
                    _ => return Err(bad()),
                }
            }
        }
    };
    Ok(v)
}

/// `UP/DOWN` (e.g. `CS1/EF`): the class of the packets client → server, then of those
/// server → client; one class alone is both.
pub fn parse_pair(s: &str) -> Result<(u8, u8), NotDscp> {
    match s.split_once('/') {
        Some((up, down)) => Ok((parse(up)?, parse(down)?)),
        None => parse(s).map(|c| (c, c)),
    }
}

/// A text that names no DSCP class.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a DSCP class: BE, BK, LE, CS0-CS7, AF11-AF43, EF or 0-63")]
pub struct NotDscp(pub String);

/// The TOS byte (IPv4) or traffic class (IPv6) of a DSCP: the DSCP in its upper six bits,
/// ECN bits clear.
pub fn tos(dscp: u8) -> u8 {
    dscp << 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_by_name_and_number() {
        // RFC values: EF 46, AF11 10, AF41 34, AF43 38, CS5 40, CS1 8
        for (name, v) in [
            ("BE", 0),
            ("bk", 8),
            ("LE", 1),
            ("CS5", 40),
            ("cs7", 56),
            ("AF11", 10),
            ("AF41", 34),
            ("af43", 38),
            ("EF", 46),
            ("63", 63),
        ] {
            assert_eq!(parse(name), Ok(v), "{name}");
        }
        for bad in ["CS8", "AF51", "AF14", "AF1", "64", "", "ef1", "-1"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert_eq!(tos(46), 0xb8);
    }

    #[test]
    fn a_class_per_direction() {
        assert_eq!(parse_pair("CS1/EF"), Ok((8, 46)));
        assert_eq!(parse_pair("ef"), Ok((46, 46)));
        for bad in ["CS1/", "/EF", "CS1/EF/BE", "CS9/EF"] {
            assert!(parse_pair(bad).is_err(), "{bad}");
        }
    }
}
