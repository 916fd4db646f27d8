//! Text that came from a peer or a file (hostnames, kernel strings, labels, a server's error
//! message) made safe for a terminal: control characters are shown as escapes instead of
//! being sent raw, so a peer cannot set the terminal's title, colours or cursor (OpenSSH and
//! git do the same). Ordinary Unicode is kept as it is.
//!
//! The escapes: a C0 control (U+0000–U+001F) is `\x1b`; DEL and the C1 controls
//! (U+007F–U+009F) are `\u009b`, which also reads back as the same character inside a JSON
//! string, so a filtered JSON document keeps its meaning.

use std::borrow::Cow;
use std::fmt::Write as _;

/// A character a terminal may act on rather than show: C0 controls, DEL and C1 controls.
pub fn is_control(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

fn push_escaped(out: &mut String, c: char) {
    let n = u32::from(c);
    let _ = if n < 0x20 {
        write!(out, "\\x{n:02x}")
    } else {
        write!(out, "\\u{n:04x}")
    };
}

fn escape_where(s: &str, escape: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if escape(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// One field (a hostname, a label, a message) safe to print: every control character
/// escaped, line breaks and tabs included, so the field stays on its line.
pub fn safe(s: &str) -> Cow<'_, str> {
    escape_where(s, is_control)
}

/// Lines of text safe to print: [`safe`], but line feeds and tabs are kept.
pub fn safe_lines(s: &str) -> Cow<'_, str> {
    escape_where(s, |c| is_control(c) && c != '\n' && c != '\t')
}

/// A count and its noun, singular for one: "1 stream", "2 streams", "0 datagrams". The
/// nouns the reports count take a plain "s".
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(count(1, "stream"), "1 stream");
        assert_eq!(count(0, "datagram"), "0 datagrams");
        assert_eq!(count(2, "retransmit"), "2 retransmits");
    }

    #[test]
    fn controls_are_escaped_and_unicode_kept() {
        let hostile = "\u{1b}]0;PWNED\u{7}\u{1b}[41mhost\u{9b}31m\u{7f}";
        assert_eq!(
            safe(hostile),
            "\\x1b]0;PWNED\\x07\\x1b[41mhost\\u009b31m\\u007f"
        );
        assert_eq!(safe("café ünïcødé 東京 ✓"), "café ünïcødé 東京 ✓");
        assert!(matches!(safe("plain-host"), Cow::Borrowed(_)));
        assert_eq!(safe("a\nb\tc\r"), "a\\x0ab\\x09c\\x0d");
        assert_eq!(safe_lines("a\nb\tc\r"), "a\nb\tc\\x0d");
    }

    #[test]
    fn escaped_c1_reads_back_inside_json() {
        let s = "x\u{9b}y\u{7f}";
        let json = serde_json::to_string(s).unwrap();
        let filtered = safe_lines(&json);
        assert!(!filtered.chars().any(is_control));
        let back: String = serde_json::from_str(&filtered).unwrap();
        assert_eq!(back, s);
    }
}
