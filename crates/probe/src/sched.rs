//! How often a thread went to sleep: the scheduler's count of voluntary context switches
//! (`/proc/thread-self/status`). A stream thread sleeps only inside its socket calls (a
//! sender on a full send buffer, a receiver on an empty receive queue), so with the
//! thread's run and run-queue times ([`crate::cpu::ThreadTimes`]) it tells where the
//! thread waited and in how many turns.

/// The calling thread's voluntary context switches so far; None where the kernel does not
/// say.
pub fn thread_sleeps() -> Option<u64> {
    parse_voluntary_switches(&std::fs::read_to_string("/proc/thread-self/status").ok()?)
}

/// `voluntary_ctxt_switches` of a `status` file's text.
pub fn parse_voluntary_switches(status: &str) -> Option<u64> {
    status.lines().find_map(|l| {
        l.strip_prefix("voluntary_ctxt_switches:")
            .and_then(|v| v.trim().parse().ok())
    })
}

/// The one CPU the calling thread may run on, when its affinity holds exactly one; None
/// when it may run on more or the kernel does not say.
pub fn thread_pinned_cpu() -> Option<u32> {
    parse_pinned_cpu(&std::fs::read_to_string("/proc/thread-self/status").ok()?)
}

/// The single CPU of a `status` file's `Cpus_allowed_list` ("3", or "3-3"); None for a list
/// of more ("0-1", "0,2").
pub fn parse_pinned_cpu(status: &str) -> Option<u32> {
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
        .trim();
    match list.split_once('-') {
        Some((a, b)) if a == b => a.parse().ok(),
        Some(_) => None,
        None => list.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_allowed_cpu_is_read_as_pinned() {
        let status = |list: &str| {
            format!("Name:\twr-sender-0\nCpus_allowed:\t1\nCpus_allowed_list:\t{list}\n")
        };
        assert_eq!(parse_pinned_cpu(&status("0")), Some(0));
        assert_eq!(parse_pinned_cpu(&status("3-3")), Some(3));
        assert_eq!(parse_pinned_cpu(&status("0-1")), None);
        assert_eq!(parse_pinned_cpu(&status("0,2")), None);
        assert_eq!(parse_pinned_cpu("Name:\tx\n"), None);
    }

    #[test]
    fn voluntary_switches_are_read_by_name() {
        let text = "Name:\twr-sender-0\nState:\tS (sleeping)\n\
                    voluntary_ctxt_switches:\t8123\nnonvoluntary_ctxt_switches:\t41\n";
        assert_eq!(parse_voluntary_switches(text), Some(8123));
        assert_eq!(parse_voluntary_switches("Name:\tx\n"), None);
        assert_eq!(
            parse_voluntary_switches("voluntary_ctxt_switches:\tlots\n"),
            None
        );
        // this thread has a count (the kernel has had it since 2.6.23)
        assert!(thread_sleeps().is_some());
    }
}
