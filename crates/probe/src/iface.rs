//! Network interfaces: which one holds an address, and its counters from sysfs.

use std::net::IpAddr;

use wirerate_core::result::InterfaceDelta;

/// Counter names read from `/sys/class/net/IF/statistics/`.
const COUNTERS: [&str; 10] = [
    "rx_packets",
    "tx_packets",
    "rx_bytes",
    "tx_bytes",
    "rx_dropped",
    "tx_dropped",
    "rx_errors",
    "tx_errors",
    "rx_over_errors",
    "rx_fifo_errors",
];

/// Counters of one interface at one moment; a counter the driver lacks is None.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfaceSnapshot {
    pub name: String,
    pub values: [Option<u64>; 10],
}

fn read_u64(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

impl IfaceSnapshot {
    pub fn read(name: &str) -> Option<IfaceSnapshot> {
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return None;
        }
        let base = format!("/sys/class/net/{name}/statistics");
        if !std::path::Path::new(&base).is_dir() {
            return None;
        }
        let values = COUNTERS.map(|c| read_u64(&format!("{base}/{c}")));
        Some(IfaceSnapshot {
            name: name.to_string(),
            values,
        })
    }

    /// Counters after minus before. A counter that went backwards (reset) is None.
    pub fn delta(&self, before: &IfaceSnapshot) -> InterfaceDelta {
        let d = |i: usize| match (self.values[i], before.values[i]) {
            (Some(a), Some(b)) if a >= b => Some(a - b),
            _ => None,
        };
        InterfaceDelta {
            name: self.name.clone(),
            driver: crate::link::interface_driver(&self.name),
            mtu_bytes: crate::link::interface_mtu(&self.name),
            speed_bps: crate::link::interface_speed_bps(&self.name),
            rx_packets: d(0),
            tx_packets: d(1),
            rx_bytes: d(2),
            tx_bytes: d(3),
            rx_dropped: d(4),
            tx_dropped: d(5),
            rx_errors: d(6),
            tx_errors: d(7),
            rx_over_errors: d(8),
            rx_fifo_errors: d(9),
        }
    }
}

fn in_subnet(addr: IpAddr, net: IpAddr, mask: Option<IpAddr>) -> bool {
    match (addr, net, mask) {
        (IpAddr::V4(a), IpAddr::V4(n), Some(IpAddr::V4(m))) => {
            let m = u32::from(m);
            u32::from(a) & m == u32::from(n) & m
        }
        (IpAddr::V6(a), IpAddr::V6(n), Some(IpAddr::V6(m))) => {
            let m = u128::from(m);
            u128::from(a) & m == u128::from(n) & m
        }
        (a, n, _) => a == n,
    }
}

/// # Safety
/// `sa` must be null or point to a valid sockaddr whose family says how long it is.
unsafe fn sockaddr_ip(sa: *const libc::sockaddr) -> Option<IpAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: `sa` is not null, and the caller promises it points to a valid sockaddr.
    match i32::from(unsafe { (*sa).sa_family }) {
        libc::AF_INET => {
            // SAFETY: the family is AF_INET, so the caller's sockaddr is a sockaddr_in.
            let sin = unsafe { &*(sa as *const libc::sockaddr_in) };
            Some(IpAddr::from(
                u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
            ))
        }
        libc::AF_INET6 => {
            // SAFETY: the family is AF_INET6, so the caller's sockaddr is a sockaddr_in6.
            let sin6 = unsafe { &*(sa as *const libc::sockaddr_in6) };
            Some(IpAddr::from(sin6.sin6_addr.s6_addr))
        }
        _ => None,
    }
}

/// The interface that holds `addr`: an exact address match first, else the subnet that
/// contains it (so 127.0.0.5 maps to `lo`).
pub fn interface_for(addr: IpAddr) -> Option<String> {
    let mut exact = None;
    let mut subnet = None;
    let mut ifap: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we walk read-only and free once below.
    unsafe {
        if libc::getifaddrs(&mut ifap) != 0 {
            return None;
        }
        let mut p = ifap;
        while !p.is_null() {
            let ifa = &*p;
            if let Some(ip) = sockaddr_ip(ifa.ifa_addr) {
                let name = std::ffi::CStr::from_ptr(ifa.ifa_name)
                    .to_string_lossy()
                    .into_owned();
                if ip == addr {
                    exact = Some(name);
                } else if subnet.is_none() && in_subnet(addr, ip, sockaddr_ip(ifa.ifa_netmask)) {
                    subnet = Some(name);
                }
            }
            p = ifa.ifa_next;
        }
        libc::freeifaddrs(ifap);
    }
    let ip6_mapped = match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4),
        _ => None,
    };
    exact
        .or(subnet)
        .or_else(|| ip6_mapped.and_then(interface_for))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_addresses_map_to_lo() {
        assert_eq!(
            interface_for("127.0.0.1".parse().unwrap()).as_deref(),
            Some("lo")
        );
        assert_eq!(
            interface_for("127.0.0.9".parse().unwrap()).as_deref(),
            Some("lo")
        );
    }

    #[test]
    fn lo_counters_move_with_traffic() {
        let before = IfaceSnapshot::read("lo").unwrap();
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..10 {
            s.send_to(b"x", s.local_addr().unwrap()).unwrap();
        }
        let d = IfaceSnapshot::read("lo").unwrap().delta(&before);
        assert!(d.tx_packets.unwrap() >= 10);
        assert!(d.mtu_bytes.is_some());
        assert!(IfaceSnapshot::read("../etc").is_none());
    }
}
