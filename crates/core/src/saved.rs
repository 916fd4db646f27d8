//! Saved results read back from files (`run --json` output, arrays of it, documents appended
//! one after another, `history --json` exports). A file is untrusted input: each run is
//! turned into a result as soon as it is read, so a huge array of junk fails at its first
//! element instead of being held whole in memory, and nothing here panics on any input.

use crate::RunResult;

/// The runs in a saved file's text, with their labels where an export carried them.
pub fn parse_entries(text: &str) -> Result<Vec<Entry>, String> {
    // one document, an array, or a stream of documents (JSON lines, or pretty documents
    // appended one after another by `run --json >> file`). Each run is turned into a result
    // as soon as it is read, so a huge array of junk fails at its first element instead of
    // being held whole in memory.
    let mut out = Vec::new();
    for (i, doc) in serde_json::Deserializer::from_str(text)
        .into_iter::<Docs>()
        .enumerate()
    {
        match doc {
            Ok(Docs(entries)) => out.extend(entries),
            Err(e) if i == 0 => return Err(e.to_string()),
            Err(e) => return Err(format!("document {}: {e}", i + 1)),
        }
    }
    Ok(out)
}

/// Reads saved runs from a stream and gives each to `each` as soon as it is read, so memory
/// holds one run at a time however long the stream is: the forms of [`parse_entries`], and
/// `history --ndjson` (one export entry a line). No single run may take more than
/// `max_run_bytes` of the stream. Returns how many runs were read; stops at `each`'s first
/// error. Errors name the document (and the run within an array) by number.
pub fn each_entry<R: std::io::Read>(
    reader: R,
    max_run_bytes: u64,
    mut each: impl FnMut(Entry) -> Result<(), String>,
) -> Result<u64, String> {
    let used = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let limited = Limited {
        inner: reader,
        used: used.clone(),
        max: max_run_bytes,
    };
    let mut de = serde_json::Deserializer::from_reader(limited);
    let mut seed = EachSeed {
        each: &mut each,
        used,
        runs: 0,
        failed: None,
    };
    let mut doc = 0u64;
    // `end` is Ok only at the end of the input (whitespace aside)
    while de.end().is_err() {
        doc += 1;
        let before = seed.runs;
        let read = serde::de::DeserializeSeed::deserialize(&mut seed, &mut de);
        if let Some(e) = seed.failed.take() {
            return Err(e);
        }
        if let Err(e) = read {
            return Err(if doc == 1 && before == 0 {
                e.to_string()
            } else {
                format!("document {doc}: {e}")
            });
        }
    }
    Ok(seed.runs)
}

/// A reader that fails once more than `max` bytes were read since `used` was last reset.
struct Limited<R> {
    inner: R,
    used: std::rc::Rc<std::cell::Cell<u64>>,
    max: u64,
}

impl<R: std::io::Read> std::io::Read for Limited<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let used = self.used.get() + n as u64;
        self.used.set(used);
        if used > self.max {
            return Err(std::io::Error::other(format!(
                "a run is longer than the {} MiB one run may take",
                self.max >> 20
            )));
        }
        Ok(n)
    }
}

/// The runs of one top-level document, each handed on as it is read.
struct EachSeed<'f> {
    each: &'f mut dyn FnMut(Entry) -> Result<(), String>,
    used: std::rc::Rc<std::cell::Cell<u64>>,
    runs: u64,
    /// `each`'s error, kept apart from parse errors so it is reported as it was said.
    failed: Option<String>,
}

impl EachSeed<'_> {
    fn take<E: serde::de::Error>(&mut self, v: serde_json::Value, n: Option<u64>) -> Result<(), E> {
        self.used.set(0);
        let e = entry(v).map_err(|e| match n {
            Some(n) => E::custom(format!("run {n}: {e}")),
            None => E::custom(e),
        })?;
        self.runs += 1;
        if let Err(e) = (self.each)(e) {
            self.failed = Some(e);
            return Err(E::custom("stopped"));
        }
        Ok(())
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for &mut EachSeed<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for &mut EachSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a result or an array of results")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut n = 0;
        self.used.set(0);
        while let Some(v) = seq.next_element::<serde_json::Value>()? {
            n += 1;
            self.take(v, Some(n))?;
        }
        Ok(())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        use serde::Deserialize;
        let v = serde_json::Value::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
        self.take(v, None)
    }
}

/// The runs of one top-level document: a result, an export entry, or an array of them.
struct Docs(Vec<Entry>);

impl<'de> serde::Deserialize<'de> for Docs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DocsVisitor)
    }
}

struct DocsVisitor;

impl<'de> serde::de::Visitor<'de> for DocsVisitor {
    type Value = Docs;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a result or an array of results")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Docs, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element::<serde_json::Value>()? {
            let n = out.len() + 1;
            out.push(entry(v).map_err(|e| serde::de::Error::custom(format!("run {n}: {e}")))?);
        }
        Ok(Docs(out))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Docs, A::Error> {
        use serde::Deserialize;
        let v = serde_json::Value::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
        Ok(Docs(vec![entry(v).map_err(serde::de::Error::custom)?]))
    }
}

/// One run read from a file, with the label and group a `history --json` export gave it.
pub struct Entry {
    pub result: RunResult,
    pub label: Option<String>,
    pub group: Option<String>,
}

fn entry(v: serde_json::Value) -> Result<Entry, String> {
    if crate::saved_iperf3::is_iperf3(&v) {
        let result = crate::saved_iperf3::to_result(&v)
            .map_err(|e| format!("an iperf3 -J document: {e}"))?;
        return Ok(Entry {
            result,
            label: None,
            group: None,
        });
    }
    let parse = |v| serde_json::from_value(v).map_err(|e: serde_json::Error| e.to_string());
    match v {
        serde_json::Value::Object(mut m)
            if !m.contains_key("summary") && m.contains_key("result") =>
        {
            let text = |m: &mut serde_json::Map<String, serde_json::Value>, k: &str| {
                m.remove(k).and_then(|v| v.as_str().map(str::to_string))
            };
            let (label, group) = (text(&mut m, "label"), text(&mut m, "group"));
            let result = parse(m.remove("result").unwrap_or_default())?;
            Ok(Entry {
                result,
                label,
                group,
            })
        }
        other => Ok(Entry {
            result: parse(other)?,
            label: None,
            group: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(text: &str, max: u64) -> Result<u64, String> {
        let mut seen = 0;
        let n = each_entry(text.as_bytes(), max, |_| {
            seen += 1;
            Ok(())
        })?;
        assert_eq!(n, seen);
        Ok(n)
    }

    #[test]
    fn a_stream_gives_every_form_one_run_at_a_time() {
        let one = serde_json::to_string(&crate::synth::run(1, 1e9, 2)).unwrap();
        let entry = format!("{{\"id\": 1, \"label\": \"x\", \"result\": {one}}}");
        assert_eq!(count(&one, 1 << 20).unwrap(), 1);
        assert_eq!(count(&format!("[{one},{one}]"), 1 << 20).unwrap(), 2);
        assert_eq!(
            count(&format!("{entry}\n{entry}\n\n{one}\n"), 1 << 20).unwrap(),
            3
        );
        assert_eq!(
            count(&format!("[{entry}, {entry}]\n[{one}]"), 1 << 20).unwrap(),
            3
        );
        assert_eq!(count("  \n", 1 << 20).unwrap(), 0);
        // the cap is per run, not per stream
        let many = format!("[{}]", vec![one.as_str(); 40].join(","));
        assert!(many.len() as u64 > 8 * one.len() as u64);
        assert_eq!(count(&many, 2 * one.len() as u64).unwrap(), 40);
        let e = count(&format!("[{one}]"), one.len() as u64 / 2).unwrap_err();
        assert!(e.contains("longer than"), "{e}");
        let e = count(&format!("{one}\n{{\"a\": 1}}"), 1 << 20).unwrap_err();
        assert!(e.starts_with("document 2: "), "{e}");
        let e = count(&format!("[{one}, 5]"), 1 << 20).unwrap_err();
        assert!(e.contains("run 2: "), "{e}");
        assert!(count("not json", 1 << 20).is_err());
    }

    #[test]
    fn the_callers_error_stops_the_stream_and_is_said_as_it_was() {
        let one = serde_json::to_string(&crate::synth::run(1, 1e9, 2)).unwrap();
        let mut n = 0;
        let e = each_entry(format!("[{one},{one},{one}]").as_bytes(), 1 << 20, |_| {
            n += 1;
            if n == 2 {
                Err("full".to_string())
            } else {
                Ok(())
            }
        })
        .unwrap_err();
        assert_eq!((e.as_str(), n), ("full", 2));
    }
}
