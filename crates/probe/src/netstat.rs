//! The kernel's protocol counters of `/proc/net/netstat` (TcpExt, IpExt, …) and
//! `/proc/net/snmp` (Ip, Tcp, Udp, …), which share one layout: pairs of lines
//! `Prefix: name name …` / `Prefix: value value …`.
//!
//! Promise: parsing is pure and never panics. A value that is not a counter (negative, such
//! as `Tcp: MaxConn -1`, or not a number) is left out, so its name reads as missing. Over a
//! window a name present in both snapshots is `Some(after − before)` (saturating), a
//! missing one `None`; a file that could not be read, or a prefix it lacks, gives no map.

use std::collections::BTreeMap;

use wirerate_core::evidence::Counters;

/// The counters of one file, by prefix (`TcpExt`, `Tcp`, …) and then by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sections {
    by_prefix: BTreeMap<String, BTreeMap<String, u64>>,
}

impl Sections {
    /// The counters under `prefix` (without the colon), if the file had that section.
    pub fn get(&self, prefix: &str) -> Option<&BTreeMap<String, u64>> {
        self.by_prefix.get(prefix)
    }

    /// One counter.
    pub fn value(&self, prefix: &str, name: &str) -> Option<u64> {
        self.get(prefix)?.get(name).copied()
    }
}

/// Parses the text of `/proc/net/netstat` or `/proc/net/snmp`. A header line is paired
/// with the next line of the same prefix; names and values are matched by position, and a
/// truncated value line keeps the names it reaches. A prefix seen twice keeps the first.
pub fn parse(text: &str) -> Sections {
    let mut sections = Sections::default();
    let mut lines = text.lines();
    while let Some(header) = lines.next() {
        let Some((prefix, names)) = header.split_once(':') else {
            continue;
        };
        let Some(values_line) = lines.next() else {
            break;
        };
        let Some((vprefix, values)) = values_line.split_once(':') else {
            continue;
        };
        if vprefix != prefix || sections.by_prefix.contains_key(prefix) {
            continue;
        }
        let map = names
            .split_ascii_whitespace()
            .zip(values.split_ascii_whitespace())
            .filter_map(|(n, v)| v.parse::<u64>().ok().map(|v| (n.to_string(), v)))
            .collect();
        sections.by_prefix.insert(prefix.to_string(), map);
    }
    sections
}

/// Both files at one instant; a file that could not be read is None.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetSnapshot {
    pub netstat: Option<Sections>,
    pub snmp: Option<Sections>,
}

impl NetSnapshot {
    /// Reads `/proc/net/netstat` and `/proc/net/snmp` of the calling thread's namespace.
    pub fn now() -> NetSnapshot {
        let read = |p: &str| std::fs::read_to_string(p).ok().map(|t| parse(&t));
        NetSnapshot {
            netstat: read("/proc/net/netstat"),
            snmp: read("/proc/net/snmp"),
        }
    }
}

/// The deltas of `names` under `prefix` between two parses of the same file. None when
/// either snapshot is missing or lacks the section.
pub fn delta(
    before: Option<&Sections>,
    after: Option<&Sections>,
    prefix: &str,
    names: &[&str],
) -> Option<Counters> {
    let b = before?.get(prefix)?;
    let a = after?.get(prefix)?;
    Some(
        names
            .iter()
            .map(|n| {
                let d = b.get(*n).zip(a.get(*n)).map(|(b, a)| a.saturating_sub(*b));
                (n.to_string(), d)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "Ip: Forwarding DefaultTTL InReceives InDiscards\n\
Ip: 1 64 1000 3\n\
Icmp: InMsgs InErrors\n\
Icmp: 5 0\n\
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens InSegs OutSegs RetransSegs\n\
Tcp: 1 200 120000 -1 10 5000 6000 7\n\
Udp: InDatagrams NoPorts InErrors\n\
Udp: 10 2 7\n";

    const NETSTAT: &str = "TcpExt: SyncookiesSent TCPDSACKRecv TCPOFOQueue\n\
TcpExt: 0 4 9\n\
IpExt: InNoRoutes InOctets\n\
IpExt: 0 123456789012\n";

    #[test]
    fn negative_values_are_left_out_not_zero() {
        let s = parse(SNMP);
        assert_eq!(s.value("Tcp", "MaxConn"), None);
        assert_eq!(s.value("Tcp", "InSegs"), Some(5000));
        assert_eq!(s.value("Tcp", "RetransSegs"), Some(7));
        assert_eq!(s.value("Udp", "InErrors"), Some(7));
        assert_eq!(s.value("Ip", "InDiscards"), Some(3));
        let n = parse(NETSTAT);
        assert_eq!(n.value("TcpExt", "TCPOFOQueue"), Some(9));
        assert_eq!(n.value("IpExt", "InOctets"), Some(123_456_789_012));
    }

    #[test]
    fn deltas_over_a_name_list() {
        let a = parse(SNMP);
        let b = parse(&SNMP.replace("5000 6000 7", "5100 6300 6"));
        let d = delta(
            Some(&a),
            Some(&b),
            "Tcp",
            &["InSegs", "OutSegs", "RetransSegs", "Nope"],
        )
        .unwrap();
        assert_eq!(d["InSegs"], Some(100));
        assert_eq!(d["OutSegs"], Some(300));
        // a counter that went backwards is not a negative count
        assert_eq!(d["RetransSegs"], Some(0));
        assert_eq!(d["Nope"], None);
        assert_eq!(delta(None, Some(&b), "Tcp", &["InSegs"]), None);
        assert_eq!(delta(Some(&a), Some(&b), "Absent", &["InSegs"]), None);
    }

    #[test]
    fn truncated_and_garbage_never_panic() {
        let whole = SNMP.find("5000 ").map(|i| i + 5).unwrap_or(0);
        for cut in 0..SNMP.len() {
            let s = parse(&SNMP[..cut]);
            if cut >= whole {
                assert_eq!(s.value("Tcp", "InSegs"), Some(5000), "cut at {cut}");
            }
        }
        let junk = [
            "",
            ":",
            "::\n::",
            "Tcp:\nTcp:",
            "Tcp: a b\nUdp: 1 2\nTcp: 3 4",
            "\u{0}x: y",
        ];
        for j in junk {
            let s = parse(j);
            assert_eq!(s.value("Tcp", "a"), None);
        }
        // names without values, values without names
        let s = parse("Tcp: A B C\nTcp: 1\n");
        assert_eq!(s.value("Tcp", "A"), Some(1));
        assert_eq!(s.value("Tcp", "B"), None);
        let s = parse("Tcp: A\nTcp: 1 2 3\n");
        assert_eq!(s.get("Tcp").map(|m| m.len()), Some(1));
    }

    #[test]
    fn reads_this_machine() {
        let s = NetSnapshot::now();
        let snmp = s.snmp.expect("/proc/net/snmp");
        assert!(snmp.value("Tcp", "InSegs").is_some());
        assert!(snmp.value("Udp", "InDatagrams").is_some());
        let netstat = s.netstat.expect("/proc/net/netstat");
        assert!(netstat.get("TcpExt").is_some_and(|m| !m.is_empty()));
    }
}
