//! The two units of iperf3's control connection: one signed state byte, or a JSON document
//! behind a 4-byte big-endian length. [`Inbox`] accumulates received bytes and hands out
//! whichever unit the session expects; a length over the cap is refused before the body is
//! waited for or stored.

use serde_json::Value;

use super::Iperf3Error;
use crate::depth::{nesting_within, MAX_DEPTH};

/// Encodes a JSON document with its length prefix.
pub fn encode(v: &Value) -> Vec<u8> {
    // Serializing a Value to a Vec has no failure mode besides allocation.
    let body = serde_json::to_vec(v).unwrap_or_default();
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Received bytes not yet consumed, bounded by `cap`.
#[derive(Debug)]
pub struct Inbox {
    buf: Vec<u8>,
    cap: usize,
}

impl Inbox {
    /// `cap` bounds what may wait here: the largest JSON document expected, plus slack.
    pub fn new(cap: usize) -> Inbox {
        Inbox {
            buf: Vec::new(),
            cap,
        }
    }

    /// Adds bytes; fails when more is buffered than any expected unit can explain.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), Iperf3Error> {
        if self.buf.len() + bytes.len() > self.cap + 4 + 64 {
            return Err(Iperf3Error::TooLarge(
                self.buf.len() + bytes.len(),
                self.cap,
            ));
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// The next byte, left in place.
    pub fn peek(&self) -> Option<i8> {
        self.buf.first().map(|&b| i8::from_ne_bytes([b]))
    }

    /// The next state byte, if one arrived.
    pub fn state(&mut self) -> Option<i8> {
        if self.buf.is_empty() {
            return None;
        }
        let b = self.buf.remove(0);
        Some(i8::from_ne_bytes([b]))
    }

    /// The next `N` raw bytes (the error numbers after `SERVER_ERROR`), if they arrived.
    pub fn raw<const N: usize>(&mut self) -> Option<[u8; N]> {
        let out: [u8; N] = self.buf.get(..N)?.try_into().ok()?;
        self.buf.drain(..N);
        Some(out)
    }

    /// The next JSON document of at most `max` bytes, if all of it arrived.
    pub fn json(&mut self, max: usize) -> Result<Option<Value>, Iperf3Error> {
        let Some(prefix) = self.buf.get(..4) else {
            return Ok(None);
        };
        let len = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
        if len > max {
            return Err(Iperf3Error::TooLarge(len, max));
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let body = &self.buf[4..4 + len];
        let parsed = if nesting_within(body, MAX_DEPTH) {
            serde_json::from_slice::<Value>(body).map_err(|e| Iperf3Error::BadJson(e.to_string()))
        } else {
            Err(Iperf3Error::BadJson(format!(
                "nested deeper than {MAX_DEPTH} levels"
            )))
        };
        self.buf.drain(..4 + len);
        match parsed? {
            v @ Value::Object(_) => Ok(Some(v)),
            _ => Err(Iperf3Error::BadJson("not a JSON object".into())),
        }
    }
}

/// A number field read leniently: iperf3 writes integers as JSON numbers that may carry a
/// fraction or an exponent.
pub fn number(v: &Value, key: &str) -> Option<f64> {
    v.get(key)?.as_f64().filter(|x| x.is_finite())
}

/// A count or byte total. "Not applicable" arrives as −1 or, from some builds, as −1 cast
/// to an unsigned 64-bit number (1.8446744073709552e19); both read as −1.
pub fn signed(v: &Value, key: &str) -> Option<i64> {
    let x = number(v, key)?;
    if !(-9.2e18..9.2e18).contains(&x) {
        Some(-1)
    } else {
        Some(x as i64)
    }
}

/// A non-negative count; negative or "not applicable" values read as None.
pub fn count(v: &Value, key: &str) -> Option<u64> {
    signed(v, key).and_then(|x| u64::try_from(x).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_round_trip_split_anywhere() {
        let v = json!({"tcp": true, "time": 10});
        let bytes = encode(&v);
        for cut in 0..bytes.len() {
            let mut inbox = Inbox::new(1024);
            inbox.push(&bytes[..cut]).unwrap();
            assert_eq!(inbox.json(1024).unwrap(), None, "cut {cut}");
            inbox.push(&bytes[cut..]).unwrap();
            assert_eq!(inbox.json(1024).unwrap(), Some(v.clone()));
            assert!(inbox.is_empty());
        }
    }

    #[test]
    fn oversized_length_is_refused_before_the_body() {
        let mut inbox = Inbox::new(1024);
        inbox.push(&u32::MAX.to_be_bytes()).unwrap();
        assert!(matches!(
            inbox.json(1024),
            Err(Iperf3Error::TooLarge(_, 1024))
        ));
        let mut inbox = Inbox::new(16);
        assert!(inbox.push(&[0u8; 200]).is_err());
    }

    #[test]
    fn junk_and_non_objects_are_errors() {
        for body in [&b"{not json"[..], b"[1,2]", b"\xff\xfe"] {
            let mut inbox = Inbox::new(1024);
            let mut bytes = (body.len() as u32).to_be_bytes().to_vec();
            bytes.extend_from_slice(body);
            inbox.push(&bytes).unwrap();
            assert!(inbox.json(1024).is_err(), "{body:?}");
        }
    }

    #[test]
    fn deep_nesting_is_refused_before_parsing() {
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(5000), "]".repeat(5000));
        let mut inbox = Inbox::new(1 << 20);
        inbox.push(&encode_raw(deep.as_bytes())).unwrap();
        assert!(matches!(inbox.json(1 << 20), Err(Iperf3Error::BadJson(_))));
    }

    fn encode_raw(body: &[u8]) -> Vec<u8> {
        let mut out = (body.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn not_applicable_numbers_read_as_minus_one() {
        let v = json!({"a": 1.8446744073709552e19, "b": -1, "c": 42, "d": "x"});
        assert_eq!(signed(&v, "a"), Some(-1));
        assert_eq!(signed(&v, "b"), Some(-1));
        assert_eq!(count(&v, "c"), Some(42));
        assert_eq!(count(&v, "a"), None);
        assert_eq!(number(&v, "d"), None);
    }

    #[test]
    fn state_bytes_are_signed() {
        let mut inbox = Inbox::new(16);
        inbox.push(&[0xff, 9]).unwrap();
        assert_eq!(inbox.state(), Some(-1));
        assert_eq!(inbox.state(), Some(9));
        assert_eq!(inbox.state(), None);
    }
}
