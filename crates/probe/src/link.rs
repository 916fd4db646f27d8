//! Link facts the OS knows about an interface: its negotiated speed and its MTU, read from
//! sysfs. Unavailable (no such interface, a virtual device without a speed, a link that is
//! down and reports -1) means None, never 0.

use std::path::Path;

const SYS_CLASS_NET: &str = "/sys/class/net";

/// The interface's link speed in bit/s, from `/sys/class/net/IF/speed` (Mbit/s).
pub fn interface_speed_bps(ifname: &str) -> Option<f64> {
    speed_bps_at(Path::new(SYS_CLASS_NET), ifname)
}

/// The interface's MTU in bytes, from `/sys/class/net/IF/mtu`.
pub fn interface_mtu(ifname: &str) -> Option<u32> {
    mtu_at(Path::new(SYS_CLASS_NET), ifname)
}

/// Reads `root/IF/speed`; a speed that is not a positive number of Mbit/s is unknown.
pub fn speed_bps_at(root: &Path, ifname: &str) -> Option<f64> {
    let mbps: i64 = read_attr(root, ifname, "speed")?.parse().ok()?;
    (mbps > 0).then_some(mbps as f64 * 1e6)
}

/// Reads `root/IF/mtu`; zero or garbage is unknown.
pub fn mtu_at(root: &Path, ifname: &str) -> Option<u32> {
    let mtu: u32 = read_attr(root, ifname, "mtu")?.parse().ok()?;
    (mtu > 0).then_some(mtu)
}

fn read_attr(root: &Path, ifname: &str, attr: &str) -> Option<String> {
    if !valid_ifname(ifname) {
        return None;
    }
    let text = std::fs::read_to_string(root.join(ifname).join(attr)).ok()?;
    Some(text.trim().to_string())
}

/// Interface names are at most 15 bytes and never `.`, `..` or contain `/`; anything else
/// would read outside the interface's directory.
fn valid_ifname(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 15
        && s != "."
        && s != ".."
        && !s.contains('/')
        && !s.bytes().any(|b| b.is_ascii_whitespace() || b == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn fake_sysfs() -> PathBuf {
        let root = std::env::temp_dir().join(format!("wirerate-link-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for (dev, speed, mtu) in [
            ("eth0", "1000\n", "1500\n"),
            ("down0", "-1\n", "9000\n"),
            ("odd0", "fast\n", "0\n"),
        ] {
            std::fs::create_dir_all(root.join(dev)).unwrap();
            std::fs::write(root.join(dev).join("speed"), speed).unwrap();
            std::fs::write(root.join(dev).join("mtu"), mtu).unwrap();
        }
        root
    }

    #[test]
    fn speeds_and_mtus() {
        let root = fake_sysfs();
        assert_eq!(speed_bps_at(&root, "eth0"), Some(1e9));
        assert_eq!(mtu_at(&root, "eth0"), Some(1500));
        assert_eq!(speed_bps_at(&root, "down0"), None);
        assert_eq!(mtu_at(&root, "down0"), Some(9000));
        assert_eq!(speed_bps_at(&root, "odd0"), None);
        assert_eq!(mtu_at(&root, "odd0"), None);
        assert_eq!(speed_bps_at(&root, "absent0"), None);
        for bad in ["", "..", ".", "eth0/../eth0", "a b", "sixteen-chars-xx"] {
            assert_eq!(mtu_at(&root, bad), None, "{bad:?}");
        }
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn loopback_has_an_mtu_but_no_speed() {
        // Loopback exists in every network namespace; its speed file cannot be read.
        if Path::new("/sys/class/net/lo").exists() {
            assert!(interface_mtu("lo").is_some());
            assert_eq!(interface_speed_bps("lo"), None);
        }
    }
}

/// The interface's driver as the kernel names it (ETHTOOL_GDRVINFO): `ixgbe`, `mlx5_core`,
/// `veth`. None where the device does not say (loopback) or the call fails.
pub fn interface_driver(ifname: &str) -> Option<String> {
    const ETHTOOL_GDRVINFO: u32 = 0x0000_0003;
    #[repr(C)]
    struct DrvInfo {
        cmd: u32,
        driver: [u8; 32],
        version: [u8; 32],
        fw_version: [u8; 32],
        bus_info: [u8; 32],
        erom_version: [u8; 32],
        reserved2: [u8; 12],
        n_priv_flags: u32,
        n_stats: u32,
        testinfo_len: u32,
        eedump_len: u32,
        regdump_len: u32,
    }
    #[repr(C)]
    struct IfReq {
        name: [u8; libc::IFNAMSIZ],
        data: *mut DrvInfo,
        _pad: [u8; 16],
    }
    let bytes = ifname.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return None;
    }
    // SAFETY: DrvInfo and IfReq are plain data; the ioctl reads the name and writes at most
    // one DrvInfo through the pointer, which stays valid for the call. The socket is closed.
    unsafe {
        let mut info: DrvInfo = std::mem::zeroed();
        info.cmd = ETHTOOL_GDRVINFO;
        let mut req = IfReq {
            name: [0; libc::IFNAMSIZ],
            data: &mut info,
            _pad: [0; 16],
        };
        req.name[..bytes.len()].copy_from_slice(bytes);
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return None;
        }
        let rc = libc::ioctl(fd, libc::SIOCETHTOOL, &mut req);
        libc::close(fd);
        if rc != 0 {
            return None;
        }
        let end = info
            .driver
            .iter()
            .position(|&c| c == 0)
            .unwrap_or(info.driver.len());
        let name = String::from_utf8_lossy(&info.driver[..end]).into_owned();
        (!name.is_empty()).then_some(name)
    }
}

#[cfg(test)]
mod driver_tests {
    #[test]
    fn loopback_has_no_driver_and_bad_names_are_none() {
        assert_eq!(super::interface_driver("lo"), None);
        assert_eq!(super::interface_driver(""), None);
        assert_eq!(
            super::interface_driver("a-name-far-too-long-for-linux"),
            None
        );
        assert_eq!(super::interface_driver("no-such-if0"), None);
    }
}
