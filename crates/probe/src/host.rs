//! Facts about the host: name, kernel, CPU model, core count.

use wirerate_core::result::HostEnv;

fn first_line(path: &str) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let l = s.lines().next()?.trim().to_string();
    (!l.is_empty()).then_some(l)
}

/// The CPU model from /proc/cpuinfo, if it names one.
pub fn cpu_model() -> Option<String> {
    let s = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    s.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// Hostname, kernel release, CPU model and online cores; interfaces are added by the caller.
pub fn host_env() -> HostEnv {
    HostEnv {
        hostname: first_line("/proc/sys/kernel/hostname"),
        kernel: first_line("/proc/sys/kernel/osrelease"),
        cpu_model: cpu_model(),
        cores: std::thread::available_parallelism()
            .ok()
            .map(|n| n.get() as u32),
        interfaces: Vec::new(),
        socket_buffers: None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn host_has_a_kernel_and_cores() {
        let h = super::host_env();
        assert!(h.kernel.is_some());
        assert!(h.cores.unwrap_or(0) >= 1);
    }
}
