//! CPU cycles through `perf_event_open`: one counting (not sampling) event on the calling
//! thread, inherited by the threads and processes it (and they) create after opening, in
//! user and kernel mode (network work is mostly kernel work), hypervisor excluded. Open it
//! on the thread that will spawn the workers, before it spawns them.
//!
//! Promise: where the processor's counters cannot be read (most virtual machines, or
//! `perf_event_paranoid` forbidding it) opening fails and the figure is None, never 0.
//! The file descriptor is closed on drop.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `perf_event_attr` as laid out by the kernel's UAPI, up to the fields of
/// `PERF_ATTR_SIZE_VER5` (112 bytes). The kernel reads `size` to know which fields the
/// caller knows; the ones after it count as zero.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    /// The bitfield: disabled, inherit, pinned, exclusive, exclude_user, exclude_kernel,
    /// exclude_hv, exclude_idle, … (bit 0 first).
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved_2: u16,
}

const PERF_ATTR_SIZE_VER5: u32 = 112;
const _: () = assert!(std::mem::size_of::<PerfEventAttr>() == PERF_ATTR_SIZE_VER5 as usize);

pub const PERF_TYPE_HARDWARE: u32 = 0;
pub const PERF_TYPE_SOFTWARE: u32 = 1;
pub const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
pub const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;

const FLAG_INHERIT: u32 = 1;
const FLAG_EXCLUDE_HV: u32 = 6;

/// A bit of the attr's bitfield: C bitfields fill from the low end on little-endian
/// targets and from the high end on big-endian ones.
const fn flag(bit: u32) -> u64 {
    if cfg!(target_endian = "little") {
        1 << bit
    } else {
        1 << (63 - bit)
    }
}

/// An open counter over this process and the threads it creates from now on.
#[derive(Debug)]
pub struct Counter {
    fd: OwnedFd,
}

impl Counter {
    /// CPU cycles; None where the hardware counter cannot be opened.
    pub fn cycles() -> Option<Counter> {
        Counter::open(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES)
    }

    /// Any counting event of the calling thread (pid 0, any CPU), inherited by the
    /// threads created from it afterwards.
    pub fn open(kind: u32, config: u64) -> Option<Counter> {
        let attr = PerfEventAttr {
            kind,
            size: PERF_ATTR_SIZE_VER5,
            config,
            // a plain read of one u64: inherit may not be combined with PERF_FORMAT_GROUP
            read_format: 0,
            flags: flag(FLAG_INHERIT) | flag(FLAG_EXCLUDE_HV),
            ..Default::default()
        };
        let (pid, cpu, group_fd): (libc::pid_t, libc::c_int, libc::c_int) = (0, -1, -1);
        // SAFETY: the attr is a live, fully initialised struct of the size its `size`
        // field states; the kernel only reads it. The other arguments are plain integers.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                pid,
                cpu,
                group_fd,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        let fd = libc::c_int::try_from(rc).ok().filter(|fd| *fd >= 0)?;
        Some(Counter {
            // SAFETY: the kernel just returned this descriptor to us and nothing else owns it.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// The count so far (the opening thread and its inherited ones, the ones that ended
    /// included); None if the read fails.
    pub fn read(&self) -> Option<u64> {
        let mut buf = [0u8; 8];
        // SAFETY: the buffer is 8 writable bytes and we pass its length; the fd is open
        // for as long as `self` lives.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast::<libc::c_void>(),
                buf.len(),
            )
        };
        (n == 8).then(|| u64::from_ne_bytes(buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin(ms: u128) {
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed().as_millis() < ms {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
    }

    #[test]
    fn cycles_are_none_or_grow() {
        match Counter::cycles() {
            None => println!("no hardware cycle counter here: cycles are None"),
            Some(c) => {
                let a = c.read().expect("read");
                spin(30);
                let b = c.read().expect("read");
                assert!(b > a, "{a} → {b}");
            }
        }
    }

    /// The software task clock exists even in virtual machines, so it proves the attr's
    /// layout and that threads made after opening are counted.
    #[test]
    fn inherited_threads_are_counted() {
        let Some(c) = Counter::open(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK) else {
            println!("skipped: perf_event_open not permitted here");
            return;
        };
        let a = c.read().expect("read");
        let used = std::thread::spawn(|| {
            let t0 = crate::cpu::ThreadTimes::now();
            spin(60);
            let d = crate::cpu::ThreadTimes::now().since(t0);
            d.user_s + d.sys_s
        })
        .join()
        .expect("join");
        let b = c.read().expect("read");
        // task clock counts nanoseconds; this thread mostly waited in join, so the count
        // is the spawned thread's CPU time (getrusage has tick granularity: loose bound)
        let counted_s = b.saturating_sub(a) as f64 / 1e9;
        assert!(
            counted_s > used * 0.5 && counted_s > 0.005,
            "{counted_s} vs {used}"
        );
    }
}
