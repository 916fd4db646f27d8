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
