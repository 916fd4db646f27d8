//! Host-wide UDP counters from /proc/net/snmp: the drops the kernel made that no
//! application saw.

use wirerate_core::udp::UdpHostDrops;

/// The `Udp:` section of /proc/net/snmp (read with [`crate::netstat::parse`]).
pub fn parse_udp_snmp(text: &str) -> Option<UdpHostDrops> {
    let sections = crate::netstat::parse(text);
    let get = |name: &str| sections.value("Udp", name);
    Some(UdpHostDrops {
        in_errors: get("InErrors")?,
        rcvbuf_errors: get("RcvbufErrors").unwrap_or(0),
        sndbuf_errors: get("SndbufErrors").unwrap_or(0),
    })
}

pub fn udp_snmp() -> Option<UdpHostDrops> {
    parse_udp_snmp(&std::fs::read_to_string("/proc/net/snmp").ok()?)
}

/// Counters after minus before.
pub fn delta(before: UdpHostDrops, after: UdpHostDrops) -> UdpHostDrops {
    UdpHostDrops {
        in_errors: after.in_errors.saturating_sub(before.in_errors),
        rcvbuf_errors: after.rcvbuf_errors.saturating_sub(before.rcvbuf_errors),
        sndbuf_errors: after.sndbuf_errors.saturating_sub(before.sndbuf_errors),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_udp_lines() {
        let t = "Ip: Forwarding\nIp: 1\nUdp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors\nUdp: 10 2 7 9 5 1 0\nUdpLite: InDatagrams\nUdpLite: 0\n";
        let d = parse_udp_snmp(t).unwrap();
        assert_eq!((d.in_errors, d.rcvbuf_errors, d.sndbuf_errors), (7, 5, 1));
        assert_eq!(parse_udp_snmp("Udp: x\n"), None);
        assert!(udp_snmp().is_some());
    }
}
