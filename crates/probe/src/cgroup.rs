//! The CPU limit of the cgroup this process runs in, and how often the limit bit: CFS
//! bandwidth quota and throttling, from cgroup v1 (`cpu.cfs_quota_us`, `cpu.stat`
//! `throttled_time`) or v2 (`cpu.max`, `cpu.stat` `throttled_usec`).
//!
//! Promise: the mounts are found from `/proc/self/mountinfo`, never assumed. No cpu
//! controller found → None; a figure that cannot be read → None, never 0. The limit is
//! the tightest quota on the way from this cgroup up to its hierarchy's root, since a
//! parent's quota caps its children. Parsing is pure and never panics.

use std::path::{Path, PathBuf};

use wirerate_core::evidence::CgroupCpu;

/// Which cgroup interface a directory belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// A cgroup directory with the cpu controller, and the root of its hierarchy's mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupDir {
    pub version: Version,
    pub dir: PathBuf,
    pub mount: PathBuf,
}

/// One line of `/proc/self/cgroup`: hierarchy id, controllers, path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    pub hierarchy: u32,
    pub controllers: Vec<String>,
    pub path: String,
}

/// Parses `/proc/self/cgroup` (`4:cpu,cpuacct:/user.slice`, `0::/init.scope`).
pub fn parse_proc_cgroup(text: &str) -> Vec<Membership> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let hierarchy = parts.next()?.parse().ok()?;
            let controllers = parts
                .next()?
                .split(',')
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect();
            let path = parts.next()?.to_string();
            Some(Membership {
                hierarchy,
                controllers,
                path,
            })
        })
        .collect()
}

/// The fields of a `/proc/self/mountinfo` line that matter here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The path inside the filesystem that is mounted (`/` for a whole hierarchy).
    pub root: String,
    pub mount_point: PathBuf,
    pub fstype: String,
    pub super_options: Vec<String>,
}

/// Undoes mountinfo's octal escapes (`\040` is a space).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        match octal {
            Some(b) => {
                out.push(b);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses `/proc/self/mountinfo`: `id parent major:minor root mount-point options
/// [optional fields] - fstype source super-options`.
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (head, tail) = line.split_once(" - ")?;
            let head: Vec<&str> = head.split(' ').collect();
            let mut tail = tail.split(' ');
            let fstype = tail.next()?.to_string();
            let _source = tail.next()?;
            let super_options = tail
                .next()
                .unwrap_or("")
                .split(',')
                .map(str::to_string)
                .collect();
            Some(Mount {
                root: unescape(head.get(3)?),
                mount_point: PathBuf::from(unescape(head.get(4)?)),
                fstype,
                super_options,
            })
        })
        .collect()
}

/// Joins a cgroup path to the mount that shows it. The path is relative to the cgroup
/// namespace's root, as is the mount's root, so the mount's root is taken off first.
fn join(mount: &Mount, path: &str) -> Option<PathBuf> {
    let rel = match path.strip_prefix(mount.root.as_str()) {
        Some(rest) if mount.root != "/" && !rest.is_empty() && !rest.starts_with('/') => {
            return None; // `/a` is not under `/ab`
        }
        Some(rest) => rest,
        // the cgroup lies outside what this mount shows
        None => return None,
    };
    let rel = rel.trim_start_matches('/');
    if rel.split('/').any(|c| c == "..") {
        return None;
    }
    Some(mount.mount_point.join(rel))
}

/// The candidates, best first: the v1 hierarchy carrying the cpu controller, then the v2
/// hierarchy. Which one really has the controller is for [`locate_self`] to check.
pub fn candidates(proc_cgroup: &str, mountinfo: &str) -> Vec<CgroupDir> {
    let members = parse_proc_cgroup(proc_cgroup);
    let mounts = parse_mountinfo(mountinfo);
    let mut out = Vec::new();
    let v1 = members
        .iter()
        .find(|m| m.hierarchy != 0 && m.controllers.iter().any(|c| c == "cpu"));
    if let Some(m) = v1 {
        let mount = mounts
            .iter()
            .find(|mt| mt.fstype == "cgroup" && mt.super_options.iter().any(|o| o == "cpu"));
        if let Some(dir) = mount.and_then(|mt| Some((mt, join(mt, &m.path)?))) {
            out.push(CgroupDir {
                version: Version::V1,
                dir: dir.1,
                mount: dir.0.mount_point.clone(),
            });
        }
    }
    let v2 = members
        .iter()
        .find(|m| m.hierarchy == 0 && m.controllers.is_empty());
    if let Some(m) = v2 {
        let mount = mounts.iter().find(|mt| mt.fstype == "cgroup2");
        if let Some((mt, dir)) = mount.and_then(|mt| Some((mt, join(mt, &m.path)?))) {
            out.push(CgroupDir {
                version: Version::V2,
                dir,
                mount: mt.mount_point.clone(),
            });
        }
    }
    out
}

/// This process's cgroup with the cpu controller, or None. Where this process's own mounts
/// do not show it, another process's do, through its root: `ip netns exec` (how a lab's
/// hosts run) mounts a sysfs of its own over `/sys`, hiding the cgroup mounts below it. The
/// ancestors are asked first (the shell that started `lab exec` has the host's mounts), then
/// the first process, whose root some hosts do not open even to root.
pub fn locate_self() -> Option<CgroupDir> {
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mi = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    candidates(&cg, &mi)
        .into_iter()
        .find(has_cpu_controller)
        .or_else(|| {
            ancestors().chain([1]).find_map(|pid| {
                let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).ok()?;
                let root = PathBuf::from(format!("/proc/{pid}/root"));
                candidates(&cg, &mounts)
                    .into_iter()
                    .map(|c| c.under(&root))
                    .find(has_cpu_controller)
            })
        })
}

/// This process's parent, its parent's, and so on up to the first process (not included),
/// at most 32 of them.
fn ancestors() -> impl Iterator<Item = u32> {
    let parent = |pid: &u32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        parse_ppid(&stat).filter(|p| *p > 1)
    };
    let first = parse_ppid(&std::fs::read_to_string("/proc/self/stat").unwrap_or_default())
        .filter(|p| *p > 1);
    std::iter::successors(first, parent).take(32)
}

/// The parent's PID from a `/proc/PID/stat` line: the field after the state, which follows
/// the command's closing parenthesis (the command may hold spaces and parentheses).
pub fn parse_ppid(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// v1: the hierarchy has the controller by construction. v2: a non-root cgroup has
/// `cpu.max` when the controller is enabled for it; the root has no `cpu.max`, but lists
/// the controller in `cgroup.controllers`.
fn has_cpu_controller(c: &CgroupDir) -> bool {
    match c.version {
        Version::V1 => c.dir.join("cpu.stat").exists(),
        Version::V2 if c.dir == c.mount => {
            std::fs::read_to_string(c.dir.join("cgroup.controllers"))
                .is_ok_and(|t| t.split_ascii_whitespace().any(|w| w == "cpu"))
        }
        Version::V2 => c.dir.join("cpu.max").exists(),
    }
}

/// `cpu.max` of v2: `max 100000` → Some(None) (unlimited), `20000 100000` → Some(Some(0.2)).
pub fn parse_cpu_max(text: &str) -> Option<Option<f64>> {
    let mut it = text.split_ascii_whitespace();
    let quota = it.next()?;
    let period: u64 = it.next().map_or(Some(100_000), |p| p.parse().ok())?;
    if quota == "max" {
        return Some(None);
    }
    quota_cores(quota.parse().ok()?, period)
}

/// v1 quota and period in microseconds; a negative quota is unlimited.
pub fn parse_cfs(quota: &str, period: &str) -> Option<Option<f64>> {
    let quota: i64 = quota.trim().parse().ok()?;
    let period: u64 = period.trim().parse().ok()?;
    if quota < 0 {
        return Some(None);
    }
    quota_cores(quota.unsigned_abs(), period)
}

fn quota_cores(quota: u64, period: u64) -> Option<Option<f64>> {
    (period > 0).then(|| Some(quota as f64 / period as f64))
}

/// One key of a `cpu.stat` file (`nr_throttled 3`).
pub fn parse_stat_key(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// A cgroup's figures at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CgroupSample {
    /// The tightest quota on the path to the root, in cores; None: unlimited or unread.
    pub limit_cores: Option<f64>,
    pub nr_throttled: Option<u64>,
    /// Time throttled, nanoseconds (v2's microseconds converted).
    pub throttled_ns: Option<u64>,
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

impl CgroupDir {
    /// The same directory seen through another root (`/proc/1/root`).
    pub fn under(self, root: &Path) -> CgroupDir {
        let at = |p: &Path| root.join(p.strip_prefix("/").unwrap_or(p));
        CgroupDir {
            version: self.version,
            dir: at(&self.dir),
            mount: at(&self.mount),
        }
    }

    /// This directory's own quota in cores: Some(None) when unlimited, None when unread.
    fn own_limit(&self, dir: &Path) -> Option<Option<f64>> {
        match self.version {
            Version::V1 => parse_cfs(
                &read(&dir.join("cpu.cfs_quota_us"))?,
                &read(&dir.join("cpu.cfs_period_us"))?,
            ),
            Version::V2 => parse_cpu_max(&read(&dir.join("cpu.max"))?),
        }
    }

    /// Reads the figures now.
    pub fn sample(&self) -> CgroupSample {
        let mut limit: Option<f64> = None;
        let mut dir = Some(self.dir.as_path());
        while let Some(d) = dir.filter(|d| d.starts_with(&self.mount)) {
            if let Some(Some(cores)) = self.own_limit(d) {
                limit = Some(limit.map_or(cores, |l| l.min(cores)));
            }
            dir = d.parent();
        }
        let stat = read(&self.dir.join("cpu.stat"));
        let stat = stat.as_deref();
        let throttled_ns = match self.version {
            Version::V1 => stat.and_then(|s| parse_stat_key(s, "throttled_time")),
            Version::V2 => stat
                .and_then(|s| parse_stat_key(s, "throttled_usec"))
                .map(|us| us.saturating_mul(1000)),
        };
        CgroupSample {
            limit_cores: limit,
            nr_throttled: stat.and_then(|s| parse_stat_key(s, "nr_throttled")),
            throttled_ns,
        }
    }
}

/// The window's figures: the limit at its end, throttling as deltas.
pub fn delta(before: &CgroupSample, after: &CgroupSample) -> CgroupCpu {
    let minus = |a: Option<u64>, b: Option<u64>| a.zip(b).map(|(a, b)| a.saturating_sub(b));
    CgroupCpu {
        limit_cores: after.limit_cores,
        nr_throttled: minus(after.nr_throttled, before.nr_throttled),
        throttled_s: minus(after.throttled_ns, before.throttled_ns).map(|ns| ns as f64 / 1e9),
    }
}

#[cfg(test)]
#[path = "cgroup_tests.rs"]
mod tests;
