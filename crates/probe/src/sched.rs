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

#[cfg(test)]
mod tests {
    use super::*;

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
