//! The delay line: a forwarding process in a lab's middle namespace that joins the two
//! hosts' links at layer 2 and applies the lab's path (delay, jitter, loss, reordering;
//! the rules are in [`crate::path`]). It stands in for the kernel's netem where the kernel
//! has none.
//!
//! Each of the two ports is a raw packet socket (AF_PACKET) bound to one veth end; one
//! thread per direction reads every frame that arrives on its port, decides its fate, holds
//! it in a FIFO until it is due and sends it out of the other port. The wait is `ppoll`
//! with the nanosecond timeout to the next due frame and the thread's timer slack at 1 ns,
//! so frames leave within tens of microseconds of their time. Frames the host itself sends
//! on a port are never read back (PACKET_IGNORE_OUTGOING).
//!
//! A direction holds at most [`MAX_HELD_BYTES`]; a frame beyond that is dropped and counted
//! as `dropped_full` (the path's own queue, the bottleneck's, is the shaper's on the sending
//! host). What each direction did is written to the lab's path file every half second.

use std::collections::VecDeque;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::path::{DirStats, Fate, PathDir, Scheduler};

/// The most bytes one direction holds at once: 1 Gbit/s for 500 ms.
pub const MAX_HELD_BYTES: u64 = 64 << 20;
/// Frames read per wake-up at most, so due frames are not kept waiting behind a burst.
const READ_BATCH: usize = 64;

/// One port: a packet socket bound to an interface.
struct Port {
    fd: OwnedFd,
}

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

impl Port {
    fn open(ifname: &str) -> io::Result<Port> {
        let name = CString::new(ifname).map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: if_nametoindex reads the NUL-terminated string we own.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::last_os_error());
        }
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: socket() takes plain integers; the descriptor it returns is owned below.
        let raw = cvt(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::c_int::from(proto),
            )
        })?;
        // SAFETY: `raw` is a descriptor socket() just returned and nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_ll is plain data, valid when zeroed; its fields are set before
        // bind reads exactly size_of::<sockaddr_ll>() bytes of it.
        unsafe {
            let mut addr: libc::sockaddr_ll = std::mem::zeroed();
            addr.sll_family = libc::AF_PACKET as u16;
            addr.sll_protocol = proto;
            addr.sll_ifindex = ifindex as i32;
            cvt(libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            ))?;
        }
        setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1)?;
        // room for a burst while a thread sends: a failure leaves the default, which works
        let _ = setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 16 << 20);
        let _ = setsockopt(&fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, 16 << 20);
        Ok(Port { fd })
    }

    /// One frame, without waiting: None when nothing is queued.
    fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        // SAFETY: recv writes at most buf.len() bytes into the buffer we own.
        let n = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            };
        }
        Ok(Some(n as usize))
    }

    /// Sends one frame out of the port's interface; a frame the interface refuses (its
    /// peer's backlog full) is dropped, as a wire would.
    fn send(&self, frame: &[u8]) -> bool {
        // SAFETY: send reads frame.len() bytes of the slice we hold; the socket is bound,
        // so no address is needed.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        n == frame.len() as isize
    }

    /// Waits until a frame can be read or `timeout` passes (None: a while).
    fn wait(&self, timeout: Option<Duration>) {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let t = timeout.unwrap_or(Duration::from_millis(200));
        let ts = libc::timespec {
            tv_sec: t.as_secs() as libc::time_t,
            tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
        };
        // SAFETY: ppoll reads one pollfd and the timespec, both ours; no signal mask.
        unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    }
}

fn setsockopt(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the option value is one c_int we own, with its size.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// Timer slack of 1 ns for this thread, so a wait ends when asked, not up to 50 µs later,
/// and the lowest real-time priority, so a busy host (a build, the test's own ends) does not
/// keep a due frame waiting for a core, as netem's softirq work is not kept waiting. The
/// thread sleeps between frames, and the kernel's real-time throttling bounds it anyway.
/// Returns whether the priority was granted.
fn timely_thread() -> bool {
    // SAFETY: PR_SET_TIMERSLACK takes an integer and changes only this thread's slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: sched_setscheduler reads the sched_param we own; pid 0 is this thread.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0 }
}

struct Held {
    due_us: u64,
    arrived_us: u64,
    frame: Vec<u8>,
}

/// One direction: frames in at `from`, out at `to`, as `dir` says.
fn forward(
    from: &Port,
    to: &Port,
    dir: PathDir,
    seed: u64,
    frame_max: usize,
    shared: &Mutex<DirStats>,
) {
    let realtime = timely_thread();
    let start = Instant::now();
    let now_us = || start.elapsed().as_micros() as u64;
    let mut sched = Scheduler::new(dir, seed);
    let mut queue: VecDeque<Held> = VecDeque::new();
    let mut spare: Vec<Vec<u8>> = Vec::new();
    let mut held_bytes = 0u64;
    let mut stats = DirStats {
        realtime,
        ..Default::default()
    };
    let mut published = Instant::now();
    loop {
        // send what is due
        let now = now_us();
        while queue.front().is_some_and(|h| h.due_us <= now) {
            let Some(h) = queue.pop_front() else { break };
            held_bytes -= h.frame.len() as u64;
            if to.send(&h.frame) {
                stats.forwarded += 1;
                stats.delay.record(now_us().saturating_sub(h.arrived_us));
            }
            spare.push(h.frame);
        }
        let timeout = queue
            .front()
            .map(|h| Duration::from_micros(h.due_us.saturating_sub(now_us())));
        from.wait(timeout);
        for _ in 0..READ_BATCH {
            let mut buf = spare.pop().unwrap_or_default();
            buf.resize(frame_max, 0);
            let n = match from.recv(&mut buf) {
                Ok(Some(n)) => n,
                Ok(None) => {
                    spare.push(buf);
                    break;
                }
                Err(e) => {
                    eprintln!("delay line: reading a port failed: {e}");
                    std::thread::sleep(Duration::from_millis(10));
                    spare.push(buf);
                    break;
                }
            };
            if n > frame_max {
                // a frame larger than the MTU allows (an offload left on): not forwarded
                stats.dropped_full += 1;
                spare.push(buf);
                continue;
            }
            buf.truncate(n);
            let arrived = now_us();
            stats.packets += 1;
            stats.bytes += n as u64;
            match sched.fate(arrived) {
                Fate::Drop => {
                    stats.dropped_loss += 1;
                    spare.push(buf);
                }
                Fate::Now => {
                    if !queue.is_empty() {
                        stats.reordered += 1;
                    }
                    if to.send(&buf) {
                        stats.forwarded += 1;
                        stats.delay.record(now_us().saturating_sub(arrived));
                    }
                    spare.push(buf);
                }
                Fate::HoldUntil(due_us) => {
                    if held_bytes + n as u64 > MAX_HELD_BYTES {
                        stats.dropped_full += 1;
                        spare.push(buf);
                        continue;
                    }
                    held_bytes += n as u64;
                    stats.max_held_bytes = stats.max_held_bytes.max(held_bytes);
                    queue.push_back(Held {
                        due_us,
                        arrived_us: arrived,
                        frame: buf,
                    });
                }
            }
        }
        if published.elapsed() >= Duration::from_millis(200) {
            if let Ok(mut s) = shared.lock() {
                *s = stats.clone();
            }
            published = Instant::now();
        }
    }
}

/// What the delay line writes to the lab's path file.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PathReport {
    pub pid: u32,
    /// Seconds the delay line has run.
    pub seconds: f64,
    pub ab: DirStats,
    pub ba: DirStats,
}

/// Runs the delay line between ports `a` and `b` (a's side receives what host a sends)
/// until the process is ended, writing its report to `report_path` every half second.
/// Returns only when a port cannot be opened.
pub fn run(
    a: &str,
    b: &str,
    spec: &crate::path::PathSpec,
    mtu: u32,
    report_path: &Path,
) -> io::Result<()> {
    let pa = Arc::new(Port::open(a)?);
    let pb = Arc::new(Port::open(b)?);
    // a frame: the MTU, the MAC header and a VLAN tag
    let frame_max = mtu as usize + 18;
    let ab = Arc::new(Mutex::new(DirStats::default()));
    let ba = Arc::new(Mutex::new(DirStats::default()));
    for (from, to, dir, seed, stats) in [
        (pa.clone(), pb.clone(), spec.ab, spec.seed, ab.clone()),
        (
            pb.clone(),
            pa.clone(),
            spec.ba,
            spec.seed ^ 0xba,
            ba.clone(),
        ),
    ] {
        std::thread::Builder::new()
            .name("delay-line".into())
            .spawn(move || forward(&from, &to, dir, seed, frame_max, &stats))?;
    }
    let start = Instant::now();
    loop {
        let report = PathReport {
            pid: std::process::id(),
            seconds: start.elapsed().as_secs_f64(),
            ab: ab.lock().map(|s| s.clone()).unwrap_or_default(),
            ba: ba.lock().map(|s| s.clone()).unwrap_or_default(),
        };
        if let Ok(text) = serde_json::to_vec(&report) {
            let tmp = report_path.with_extension("tmp");
            if std::fs::write(&tmp, text).is_ok() {
                let _ = std::fs::rename(&tmp, report_path);
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}
