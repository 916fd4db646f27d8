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
