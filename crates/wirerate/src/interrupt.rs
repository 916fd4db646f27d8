//! Ctrl-C during a test. The first SIGINT only sets a flag; the client's control loop sees
//! it, ends the test on both sides and reports what was measured until then. The handler
//! is installed with `SA_RESETHAND`, so a second Ctrl-C finds the default action and ends
//! the process at once.

use std::sync::atomic::{AtomicBool, Ordering};

/// Exit status of a run cut short by Ctrl-C (128 + SIGINT, as a shell reports it).
pub const EXIT_INTERRUPTED: u8 = 130;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_signal: libc::c_int) {
    // an atomic store is all a signal handler may safely do here
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Installs the handler and returns the flag it sets.
pub fn install() -> &'static AtomicBool {
    // SAFETY: the sigaction struct is zeroed (a valid value: no flags, empty mask) before
    // its fields are set; the handler is an `extern "C"` function that only stores to a
    // lock-free atomic, which is async-signal-safe. SA_RESTART keeps plain blocking calls
    // going; calls with timeouts may still see EINTR, which every loop treats as a retry.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
    }
    &INTERRUPTED
}

/// Whether Ctrl-C was pressed since [`install`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

static HANGUP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sighup(_signal: libc::c_int) {
    HANGUP.store(true, Ordering::SeqCst);
}

/// SIGHUP for `serve`: the handler only sets the flag it returns; the server's accept loop
/// sees it and reloads its files.
pub fn install_reload() -> &'static AtomicBool {
    // SAFETY: as in `install`: a zeroed sigaction with its fields set, and a handler that
    // only stores to a lock-free atomic. SA_RESTART keeps the running test's blocking calls
    // from seeing EINTR.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sighup as extern "C" fn(libc::c_int) as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGHUP, &sa, std::ptr::null_mut());
    }
    &HANGUP
}
