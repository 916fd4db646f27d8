//! Ctrl-C during a test. The first SIGINT only sets a flag; the client's control loop sees
//! it, ends the test on both sides and reports what was measured until then. A second
//! SIGINT a second or more after the first ends the process at once; one within that second
//! is the same interrupt delivered twice (a process group's Ctrl-C reaches a wrapper and
//! wirerate both, `timeout -s INT` and shells may resend it) and is ignored, so the result
//! is not lost to it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Exit status of a run cut short by Ctrl-C (128 + SIGINT, as a shell reports it).
pub const EXIT_INTERRUPTED: u8 = 130;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// When the first SIGINT came, in milliseconds of the monotonic clock (0: not yet).
static FIRST_MS: AtomicU64 = AtomicU64::new(0);

/// A SIGINT this soon after the first is the same interrupt, not a second Ctrl-C.
const SAME_INTERRUPT_MS: u64 = 1000;

fn monotonic_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only to the timespec we own, and is async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1000) + ts.tv_nsec as u64 / 1_000_000
}

extern "C" fn on_sigint(_signal: libc::c_int) {
    // only atomics, clock_gettime and _exit here: all async-signal-safe
    let now = monotonic_ms().max(1);
    match FIRST_MS.compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => INTERRUPTED.store(true, Ordering::SeqCst),
        Err(first) if now.saturating_sub(first) >= SAME_INTERRUPT_MS => {
            // SAFETY: _exit ends the process without running anything else, as the default
            // action of a second Ctrl-C would; it is async-signal-safe.
            unsafe { libc::_exit(i32::from(EXIT_INTERRUPTED)) }
        }
        Err(_) => {}
    }
}

/// Installs the handler and returns the flag it sets.
pub fn install() -> &'static AtomicBool {
    // SAFETY: the sigaction struct is zeroed (a valid value: no flags, empty mask) before
    // its fields are set; the handler is an `extern "C"` function that only uses lock-free
    // atomics, clock_gettime and _exit, which are async-signal-safe. SA_RESTART keeps plain
    // blocking calls going; calls with timeouts may still see EINTR, which every loop
    // treats as a retry.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESTART;
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

static SHUTDOWN: AtomicBool = AtomicBool::new(false);

extern "C" fn on_shutdown(_signal: libc::c_int) {
    SHUTDOWN.store(true, Ordering::SeqCst);
}

/// SIGTERM and SIGINT for `serve` with a pid file: the handler only sets the flag it
/// returns; the accept loop sees it and returns, and the pid file is removed on the way out.
pub fn install_shutdown() -> &'static AtomicBool {
    for signal in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: as in `install`: a zeroed sigaction with its fields set, and a handler
        // that only stores to a lock-free atomic.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_shutdown as extern "C" fn(libc::c_int) as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(signal, &sa, std::ptr::null_mut());
        }
    }
    &SHUTDOWN
}
