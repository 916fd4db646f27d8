//! The test settings and host facts in which two sets of runs differ, as `compare` lists
//! them under its sides' names and a multi-run report lists them for each group.

use std::collections::{BTreeMap, BTreeSet};

use crate::units::format_bps;
use crate::RunResult;

/// One setting or host fact and its values on each side (values joined by ", ").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub what: String,
    pub a: String,
    pub b: String,
}

/// The test settings and host facts in which A and B differ: the first thing to know when
/// judging a difference (seed 000 compares kernels with everything else held equal).
pub fn differences(a: &[RunResult], b: &[RunResult]) -> Vec<Difference> {
    fn facts(r: &RunResult) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = match serde_json::to_value(&r.spec) {
            Ok(serde_json::Value::Object(m)) => m
                .into_iter()
                .map(|(k, v)| (format!("spec.{k}"), v.to_string()))
                .collect(),
            _ => Vec::new(),
        };
        let env = [
            ("client kernel", &r.env.client.kernel),
            ("server kernel", &r.env.server.kernel),
            ("client CPU", &r.env.client.cpu_model),
            ("server CPU", &r.env.server.cpu_model),
            ("client host", &r.env.client.hostname),
            ("server host", &r.env.server.hostname),
        ];
        v.extend(
            env.into_iter()
                .map(|(k, x)| (k.to_string(), x.clone().unwrap_or_else(|| "-".into()))),
        );
        let wire = &r.summary.wire;
        v.push((
            "link rate".into(),
            wire.link_bps.map_or("-".into(), format_bps),
        ));
        v.push((
            "MTU".into(),
            wire.mtu_bytes.map_or("-".into(), |m| m.to_string()),
        ));
        v
    }
    fn values(runs: &[RunResult]) -> BTreeMap<String, BTreeSet<String>> {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for r in runs {
            for (k, v) in facts(r) {
                m.entry(k).or_default().insert(v);
            }
        }
        m
    }
    let (va, vb) = (values(a), values(b));
    let join = |s: Option<&BTreeSet<String>>| {
        s.map_or("-".to_string(), |s| {
            s.iter().map(String::as_str).collect::<Vec<_>>().join(", ")
        })
    };
    let keys: BTreeSet<&String> = va.keys().chain(vb.keys()).collect();
    keys.into_iter()
        .filter(|k| va.get(*k) != vb.get(*k))
        .map(|k| Difference {
            what: k.clone(),
            a: join(va.get(k)),
            b: join(vb.get(k)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth;

    #[test]
    fn only_the_facts_that_differ_are_listed_with_each_sides_values() {
        let a = vec![synth::run(1, 1e9, 2), synth::run(2, 1e9, 2)];
        let mut b = vec![synth::run(3, 1e9, 2)];
        assert!(differences(&a, &b).is_empty());
        b[0].spec.parallel = 4;
        b[0].env.server.kernel = Some("6.9.0".into());
        let d = differences(&a, &b);
        let what: Vec<&str> = d.iter().map(|d| d.what.as_str()).collect();
        assert_eq!(what, ["server kernel", "spec.parallel"]);
        assert_eq!((d[0].a.as_str(), d[0].b.as_str()), ("6.8.0-test", "6.9.0"));
        assert_eq!((d[1].a.as_str(), d[1].b.as_str()), ("1", "4"));
    }
}
