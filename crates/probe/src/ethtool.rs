//! The NIC driver's own statistics (what `ethtool -S` shows), read with the SIOCETHTOOL
//! ioctl: the count of the `ETH_SS_STATS` string set (ETHTOOL_GSSET_INFO, or the older
//! ETHTOOL_GDRVINFO), the names (ETHTOOL_GSTRINGS) once, the values (ETHTOOL_GSTATS) at
//! each snapshot.
//!
//! Promise: an interface without statistics (loopback), a failed call, a driver claiming
//! more than [`MAX_STATS`] counters, or a count that changed between calls → None, and the
//! interface is left out. Buffers are sized from the count before the call, with room to
//! spare; replies are parsed with length checks and never panic.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use wirerate_core::evidence::{is_rx_drop_name, NicStats};

/// More counters than this and the driver's claim is refused.
pub const MAX_STATS: usize = 4096;
/// Counters kept per interface in [`NicStats`].
pub const MAX_KEPT: usize = 128;

const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;
/// `struct ethtool_drvinfo`: cmd, five 32-byte strings, 12 reserved bytes, n_priv_flags,
/// then n_stats.
const DRVINFO_LEN: usize = 196;
const DRVINFO_N_STATS_AT: usize = 180;
/// `struct ethtool_gstrings` header: cmd, string_set, len.
const GSTRINGS_HEADER: usize = 12;
/// `struct ethtool_stats` header: cmd, n_stats.
const GSTATS_HEADER: usize = 8;

fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(
        buf.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(buf: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(
        buf.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// Room for the kernel's reply when it holds `n` entries of `entry` bytes. The kernel
/// writes as many entries as the driver has *now*, whatever the request said, so the
/// buffer has slack for a count that grew since it was asked (a queue added in between).
fn reply_len(header: usize, n: usize, entry: usize) -> usize {
    header + (2 * n + 64) * entry
}

/// The names of an ETHTOOL_GSTRINGS reply, if it holds `expected` of them.
pub fn parse_strings(buf: &[u8], expected: usize) -> Option<Vec<String>> {
    let len = u32_at(buf, 8)? as usize;
    if len != expected {
        return None;
    }
    let end = len
        .checked_mul(ETH_GSTRING_LEN)?
        .checked_add(GSTRINGS_HEADER)?;
    let body = buf.get(GSTRINGS_HEADER..end)?;
    Some(
        body.chunks_exact(ETH_GSTRING_LEN)
            .map(|raw| {
                let end = raw.iter().position(|c| *c == 0).unwrap_or(raw.len());
                String::from_utf8_lossy(&raw[..end]).into_owned()
            })
            .collect(),
    )
}

/// The values of an ETHTOOL_GSTATS reply, if it holds `expected` of them.
pub fn parse_stats(buf: &[u8], expected: usize) -> Option<Vec<u64>> {
    let n = u32_at(buf, 4)? as usize;
    if n != expected {
        return None;
    }
    (0..n)
        .map(|i| u64_at(buf, i.checked_mul(8)?.checked_add(GSTATS_HEADER)?))
        .collect()
}

/// An AF_INET datagram socket to carry the ioctls, in the calling thread's namespace.
fn control_socket() -> Option<OwnedFd> {
    // SAFETY: socket takes plain integers and returns a new descriptor or -1.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    // SAFETY: a non-negative fd was just created for us and has no other owner.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One SIOCETHTOOL call: `buf` starts with the command's struct (cmd first) and must be
/// large enough for everything the kernel writes back for that command.
fn ioctl(sock: &OwnedFd, iface: &str, buf: &mut [u8]) -> Option<()> {
    let name = iface.as_bytes();
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(&0) || buf.len() < 4 {
        return None;
    }
    // SAFETY: ifreq is plain data (a name and a union of plain fields), all-zero is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name) {
        *dst = *src as libc::c_char;
    }
    req.ifr_ifru.ifru_data = buf.as_mut_ptr().cast::<libc::c_char>();
    // SAFETY: `req` is a valid ifreq whose name is NUL-terminated (zeroed, shorter than
    // IFNAMSIZ) and whose data pointer is `buf`, alive and exclusively borrowed for the
    // call. The callers size `buf` for the reply of the command it carries.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCETHTOOL, &mut req) };
    (rc == 0).then_some(())
}

/// How many ETH_SS_STATS counters the driver has; None when it cannot say.
fn stats_count(sock: &OwnedFd, iface: &str) -> Option<usize> {
    // cmd, reserved, sset_mask, then one u32 per set bit of the mask we asked for
    let mut buf = [0u8; 24];
    buf[..4].copy_from_slice(&ETHTOOL_GSSET_INFO.to_ne_bytes());
    buf[8..16].copy_from_slice(&(1u64 << ETH_SS_STATS).to_ne_bytes());
    let n = if ioctl(sock, iface, &mut buf).is_some() {
        let mask = u64_at(&buf, 8)?;
        if mask & (1 << ETH_SS_STATS) == 0 {
            return None;
        }
        u32_at(&buf, 16)?
    } else {
        let mut info = [0u8; DRVINFO_LEN];
        info[..4].copy_from_slice(&ETHTOOL_GDRVINFO.to_ne_bytes());
        ioctl(sock, iface, &mut info)?;
        u32_at(&info, DRVINFO_N_STATS_AT)?
    };
    let n = n as usize;
    (n > 0 && n <= MAX_STATS).then_some(n)
}

fn names(sock: &OwnedFd, iface: &str, n: usize) -> Option<Vec<String>> {
    let mut buf = vec![0u8; reply_len(GSTRINGS_HEADER, n, ETH_GSTRING_LEN)];
    buf[..4].copy_from_slice(&ETHTOOL_GSTRINGS.to_ne_bytes());
    buf[4..8].copy_from_slice(&ETH_SS_STATS.to_ne_bytes());
    buf[8..12].copy_from_slice(&(n as u32).to_ne_bytes());
    ioctl(sock, iface, &mut buf)?;
    parse_strings(&buf, n)
}

fn values(sock: &OwnedFd, iface: &str, n: usize) -> Option<Vec<u64>> {
    let mut buf = vec![0u8; reply_len(GSTATS_HEADER, n, 8)];
    buf[..4].copy_from_slice(&ETHTOOL_GSTATS.to_ne_bytes());
    buf[4..8].copy_from_slice(&(n as u32).to_ne_bytes());
    ioctl(sock, iface, &mut buf)?;
    parse_stats(&buf, n)
}

/// The names of an interface's statistics, read once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NicNames {
    pub iface: String,
    pub names: Vec<String>,
}

impl NicNames {
    /// None where the interface has no statistics or the calls fail.
    pub fn read(iface: &str) -> Option<NicNames> {
        let sock = control_socket()?;
        let n = stats_count(&sock, iface)?;
        Some(NicNames {
            iface: iface.to_string(),
            names: names(&sock, iface, n)?,
        })
    }

    /// The values now, in the order of the names; None if the count no longer matches.
    pub fn values(&self) -> Option<Vec<u64>> {
        let sock = control_socket()?;
        values(&sock, &self.iface, self.names.len())
    }
}

/// Names kept even when they did not move: they say whether the NIC dropped, missed or
/// failed anything.
pub fn is_trouble_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    is_rx_drop_name(&n)
        || ["err", "drop", "miss", "fifo", "no_buf", "nobuf"]
            .iter()
            .any(|k| n.contains(k))
}

/// The window's counters: the ones that moved and every trouble name, at most
/// [`MAX_KEPT`]. When there are more, receive drops come first, then trouble counters that
/// moved, then the others that moved (largest first), then trouble counters at zero.
pub fn nic_delta(names: &NicNames, before: &[u64], after: &[u64]) -> NicStats {
    let mut ranked: Vec<(u8, u64, &str)> = names
        .names
        .iter()
        .zip(before.iter().zip(after))
        .filter_map(|(name, (b, a))| {
            let d = a.saturating_sub(*b);
            let rank = match (is_rx_drop_name(name), is_trouble_name(name), d > 0) {
                (true, _, _) => 0,
                (_, true, true) => 1,
                (_, false, true) => 2,
                (_, true, false) => 3,
                (_, false, false) => return None,
            };
            Some((rank, d, name.as_str()))
        })
        .collect();
    ranked.sort_by(|x, y| x.0.cmp(&y.0).then(y.1.cmp(&x.1)));
    let mut counters = BTreeMap::new();
    for (_, d, name) in ranked {
        if counters.len() >= MAX_KEPT {
            break;
        }
        // a name the driver repeats keeps its first (highest ranked) value
        counters.entry(name.to_string()).or_insert(d);
    }
    NicStats {
        iface: names.iface.clone(),
        counters,
    }
}

#[cfg(test)]
#[path = "ethtool_tests.rs"]
mod tests;
