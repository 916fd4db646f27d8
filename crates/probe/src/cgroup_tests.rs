use super::*;

const MOUNTINFO_HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

const MOUNTINFO_V2: &str = "\
25 1 0:22 / / rw shared:1 - ext4 /dev/sda1 rw
35 25 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate
";

const MOUNTINFO_DOCKER_V1: &str = "\
700 690 0:40 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid master:20 - cgroup cgroup rw,cpu,cpuacct
701 690 0:41 /docker/abc /sys/fs/cgroup/with\\040space ro - cgroup cgroup rw,memory
";

#[test]
fn hybrid_machine_uses_the_v1_cpu_hierarchy() {
    let cg = "9:name=systemd:/\n2:cpuacct:/\n1:cpu:/\n0::/\n";
    let c = candidates(cg, MOUNTINFO_HYBRID);
    assert_eq!(c.len(), 2);
    assert_eq!(c[0].version, Version::V1);
    assert_eq!(c[0].dir, PathBuf::from("/sys/fs/cgroup/cpu"));
    assert_eq!(c[1].version, Version::V2);
    assert_eq!(c[1].dir, PathBuf::from("/sys/fs/cgroup/unified"));
}

#[test]
fn pure_v2_and_containers() {
    let c = candidates("0::/user.slice/app-1.scope\n", MOUNTINFO_V2);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].version, Version::V2);
    assert_eq!(
        c[0].dir,
        PathBuf::from("/sys/fs/cgroup/user.slice/app-1.scope")
    );
    assert_eq!(c[0].mount, PathBuf::from("/sys/fs/cgroup"));

    // a container without a cgroup namespace: the mount shows only its own subtree
    let c = candidates("4:cpu,cpuacct:/docker/abc\n", MOUNTINFO_DOCKER_V1);
    assert_eq!(c[0].dir, PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"));
    let c = candidates("4:cpu,cpuacct:/docker/abc/sub\n", MOUNTINFO_DOCKER_V1);
    assert_eq!(c[0].dir, PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/sub"));
    // outside the mounted subtree: not visible, not guessed
    assert!(candidates("4:cpu,cpuacct:/docker/abcd\n", MOUNTINFO_DOCKER_V1).is_empty());
    assert!(candidates("4:cpu,cpuacct:/other\n", MOUNTINFO_DOCKER_V1).is_empty());
    assert!(candidates("4:cpu:/../x\n", MOUNTINFO_HYBRID).is_empty());
    // no cpu controller anywhere
    assert!(candidates("4:memory:/\n", MOUNTINFO_HYBRID).is_empty());
    let m = parse_mountinfo(MOUNTINFO_DOCKER_V1);
    assert_eq!(m[1].mount_point, PathBuf::from("/sys/fs/cgroup/with space"));
}

#[test]
fn limits_and_stats() {
    assert_eq!(parse_cpu_max("max 100000\n"), Some(None));
    assert_eq!(parse_cpu_max("20000 100000\n"), Some(Some(0.2)));
    assert_eq!(parse_cpu_max("150000 100000"), Some(Some(1.5)));
    assert_eq!(parse_cpu_max("20000 0"), None);
    assert_eq!(parse_cpu_max("x 1"), None);
    assert_eq!(parse_cpu_max(""), None);
    assert_eq!(parse_cfs("-1\n", "100000\n"), Some(None));
    assert_eq!(parse_cfs("50000\n", "100000\n"), Some(Some(0.5)));
    assert_eq!(parse_cfs("", "100000"), None);
    let v1 = "nr_periods 10\nnr_throttled 4\nthrottled_time 123456\n";
    assert_eq!(parse_stat_key(v1, "nr_throttled"), Some(4));
    assert_eq!(parse_stat_key(v1, "throttled_time"), Some(123_456));
    assert_eq!(parse_stat_key(v1, "throttled_usec"), None);
    assert_eq!(parse_stat_key("nr_throttled x\n", "nr_throttled"), None);
}

#[test]
fn deltas_keep_none_as_none() {
    let b = CgroupSample {
        limit_cores: Some(0.5),
        nr_throttled: Some(3),
        throttled_ns: None,
    };
    let a = CgroupSample {
        limit_cores: Some(0.5),
        nr_throttled: Some(10),
        throttled_ns: Some(5),
    };
    let d = delta(&b, &a);
    assert_eq!(d.limit_cores, Some(0.5));
    assert_eq!(d.nr_throttled, Some(7));
    assert_eq!(d.throttled_s, None);
}

#[test]
fn garbage_never_panics() {
    for text in [MOUNTINFO_HYBRID, MOUNTINFO_V2, MOUNTINFO_DOCKER_V1] {
        for cut in 0..text.len() {
            let _ = candidates("1:cpu:/a\n0::/b\n", &text[..cut]);
        }
    }
    for junk in ["", ":::", "x:y:z", "1:cpu", "\\", "a \\04 b - c d e"] {
        let _ = candidates(junk, junk);
        let _ = parse_mountinfo(junk);
    }
    assert_eq!(unescape("a\\04"), "a\\04");
    assert_eq!(unescape("a\\040b\\"), "a b\\");
}

#[test]
fn the_parent_is_read_past_a_command_with_spaces_and_parentheses() {
    assert_eq!(parse_ppid("4242 (sh) S 17 4242 17 0 -1"), Some(17));
    assert_eq!(parse_ppid("9 (a b) (c)) R 3 9 9"), Some(3));
    assert_eq!(parse_ppid("9 (sh"), None);
    assert_eq!(parse_ppid(""), None);
    let me = std::fs::read_to_string("/proc/self/stat").unwrap();
    assert_eq!(
        parse_ppid(&me),
        Some(std::os::unix::process::parent_id()),
        "{me}"
    );
}

#[test]
fn reads_this_process() {
    // Every Linux host has /proc/self/cgroup; whether a cpu controller is there depends
    // on the host, so only the shape is checked.
    if let Some(dir) = locate_self() {
        let s = dir.sample();
        assert!(
            s.nr_throttled.is_some(),
            "{dir:?}: cpu.stat has nr_throttled"
        );
        let d = delta(&s, &dir.sample());
        assert!(d.limit_cores.is_none_or(|c| c > 0.0));
    } else {
        println!("no cpu controller for this process");
    }
}

/// A child cgroup made for the test; the busy child is killed and the cgroup removed on
/// drop, whatever happened.
struct TestCgroup {
    dir: PathBuf,
    child: Option<std::process::Child>,
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        eprintln!("could not remove {}", self.dir.display());
    }
}

#[test]
fn a_real_quota_throttles() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: making a cgroup needs root");
        return;
    }
    let Some(own) = locate_self() else {
        println!("skipped: no cpu controller");
        return;
    };
    let name = format!("wrprobe-{}", std::process::id());
    let dir = own.mount.join(&name);
    if let Err(e) = std::fs::create_dir(&dir) {
        println!("skipped: cannot make {}: {e}", dir.display());
        return;
    }
    let mut guard = TestCgroup {
        dir: dir.clone(),
        child: None,
    };
    let set = |file: &str, v: &str| std::fs::write(dir.join(file), v);
    match own.version {
        Version::V1 => {
            set("cpu.cfs_period_us", "100000").expect("period");
            set("cpu.cfs_quota_us", "20000").expect("quota");
        }
        Version::V2 => {
            // the controller must be enabled for the root's children
            let _ = std::fs::write(own.mount.join("cgroup.subtree_control"), "+cpu");
            set("cpu.max", "20000 100000").expect("cpu.max");
        }
    }
    let child = std::process::Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .expect("spawn a busy shell");
    let pid = child.id();
    guard.child = Some(child);
    set("cgroup.procs", &pid.to_string()).expect("move the child");
    let cg = CgroupDir {
        version: own.version,
        dir: dir.clone(),
        mount: own.mount.clone(),
    };
    let before = cg.sample();
    std::thread::sleep(std::time::Duration::from_millis(600));
    let d = delta(&before, &cg.sample());
    drop(guard);
    println!("{d:?}");
    let limit = d.limit_cores.expect("a limit");
    assert!((limit - 0.2).abs() < 1e-9, "{limit}");
    assert!(d.nr_throttled.is_some_and(|n| n > 0), "{d:?}");
    assert!(d.throttled_s.is_some_and(|s| s > 0.0), "{d:?}");
    assert!(!dir.exists());
}

#[test]
fn a_cgroup_is_seen_through_another_root() {
    let c = CgroupDir {
        version: Version::V1,
        dir: PathBuf::from("/sys/fs/cgroup/cpu/lab"),
        mount: PathBuf::from("/sys/fs/cgroup/cpu"),
    }
    .under(Path::new("/proc/1/root"));
    assert_eq!(c.dir, PathBuf::from("/proc/1/root/sys/fs/cgroup/cpu/lab"));
    assert_eq!(c.mount, PathBuf::from("/proc/1/root/sys/fs/cgroup/cpu"));
    assert!(c.dir.starts_with(&c.mount));
}
