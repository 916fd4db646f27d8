//! An interface's root egress qdisc counters, as iproute2's `tc -s -j qdisc show dev IF`
//! prints them (one subprocess per reading: a few per second at most).
//!
//! Promise: no `tc`, a failed call, or output without a root qdisc → None.

use std::process::Command;

use wirerate_core::qdisc::QdiscReading;

/// The root qdisc of `tc -s -j qdisc show` output: the entry marked `root`, else the first.
pub fn parse(json: &str) -> Option<QdiscReading> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let list = v.as_array()?;
    let root = list
        .iter()
        .find(|q| q.get("root").and_then(|r| r.as_bool()) == Some(true))
        .or_else(|| list.first())?;
    let n = |k: &str| root.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
    Some(QdiscReading {
        kind: root.get("kind")?.as_str()?.to_string(),
        backlog_bytes: n("backlog"),
        backlog_packets: n("qlen"),
        drops: n("drops"),
        requeues: n("requeues"),
        overlimits: n("overlimits"),
    })
}

/// Reads `iface`'s root qdisc now.
pub fn read(iface: &str) -> Option<QdiscReading> {
    let out = Command::new("tc")
        .args(["-s", "-j", "qdisc", "show", "dev", iface])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    parse(std::str::from_utf8(&out.stdout).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from `tc -s -j qdisc show dev wr0` under load: tbf at the root, its
    /// bfifo child.
    const TBF: &str = r#"[{"kind":"tbf","handle":"8001:","root":true,"refcnt":2,"options":{"rate":2500000,"burst":5000,"lat":400000},"bytes":7345522,"packets":4872,"drops":37,"overlimits":5103,"requeues":2,"backlog":991232,"qlen":655},{"kind":"bfifo","handle":"0:","parent":"8001:1","options":{"limit":1000000},"bytes":7345522,"packets":4872,"drops":37,"overlimits":0,"requeues":0,"backlog":991232,"qlen":655}]"#;

    #[test]
    fn the_root_qdisc_is_read() {
        let r = parse(TBF).unwrap();
        assert_eq!(r.kind, "tbf");
        assert_eq!(
            (
                r.backlog_bytes,
                r.backlog_packets,
                r.drops,
                r.requeues,
                r.overlimits
            ),
            (991_232, 655, 37, 2, 5103)
        );
        let lo = r#"[{"kind":"noqueue","handle":"0:","root":true,"refcnt":2,"options":{},"bytes":0,"packets":0,"drops":0,"overlimits":0,"requeues":0,"backlog":0,"qlen":0}]"#;
        assert!(parse(lo).unwrap().is_noqueue());
        assert_eq!(parse(""), None);
        assert_eq!(parse("[]"), None);
        assert_eq!(parse(r#"{"kind":"x"}"#), None);
    }

    #[test]
    fn loopback_reads_as_a_qdisc_or_none() {
        // where tc is installed, lo answers; without it, None rather than a panic
        if let Some(r) = read("lo") {
            assert!(!r.kind.is_empty());
        }
        assert_eq!(read("no-such-if0"), None);
    }
}
