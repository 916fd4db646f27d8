//! The delay line: a forwarding process in a lab's middle namespace that joins the two
//! hosts' links at layer 2 and applies the lab's path (delay, jitter, loss, reordering;
//! the rules are in [`crate::path`]). It stands in for the kernel's netem where the kernel
//! has none.
//!
//! It joins one link (two hosts) or, in a bridged lab, each host's link to the bridge.
//! Each of a link's two ports is a raw packet socket (AF_PACKET) bound to one veth end; one
//! thread per direction reads every frame that arrives on its port, decides its fate, holds
//! it in a FIFO until it is due and sends it out of the other port. The wait is `ppoll`
//! with the nanosecond timeout to the next due frame and the thread's timer slack at 1 ns,
//! so frames leave within tens of microseconds of their time. Frames the host itself sends
//! on a port are never read back (PACKET_IGNORE_OUTGOING).
//!
//! Before the delay, each direction has the lab's bottleneck (its rate and queue, see
//! [`Bottleneck`]): the delay line is the lab's shaper, off the hosts, so its queue fills
//! as a router's does. A direction holds at most [`MAX_HELD_BYTES`] in all; a frame beyond
//! that is dropped and counted as `dropped_full`. What each direction did is written to the
//! lab's path file every half second.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::path::{Bottleneck, DirStats, Fate, PathSpec, Scheduler};

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

/// A frame waiting for its time; ordered by that time, then by arrival.
struct Held {
    due_ns: u64,
    seq: u64,
    arrived_ns: u64,
    frame: Vec<u8>,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        (self.due_ns, self.seq) == (other.due_ns, other.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.due_ns, self.seq).cmp(&(other.due_ns, other.seq))
    }
}

/// One direction: frames in at `from`, out at `to`, as `dir` and the bottleneck say.
struct Direction<'a> {
    from: &'a Port,
    to: &'a Port,
    sched: Scheduler,
    start: Instant,
    held: BinaryHeap<Reverse<Held>>,
    spare: Vec<Vec<u8>>,
    held_bytes: u64,
    seq: u64,
    stats: DirStats,
}

impl Direction<'_> {
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Sends every frame that is due.
    fn send_due(&mut self) {
        let now = self.now_ns();
        while self.held.peek().is_some_and(|h| h.0.due_ns <= now) {
            let Some(Reverse(h)) = self.held.pop() else {
                break;
            };
            self.held_bytes -= h.frame.len() as u64;
            if self.to.send(&h.frame) {
                self.stats.forwarded += 1;
                let took_us = self.now_ns().saturating_sub(h.arrived_ns) / 1000;
                self.stats.delay.record(took_us);
            } else {
                self.stats.dropped_full += 1;
            }
            self.spare.push(h.frame);
        }
    }

    /// How long until the next frame is due; None when none is held.
    fn next_wait(&self) -> Option<Duration> {
        let now = self.now_ns();
        self.held
            .peek()
            .map(|h| Duration::from_nanos(h.0.due_ns.saturating_sub(now)))
    }

    /// Reads what has arrived (up to a batch) and decides each frame's fate.
    fn receive(&mut self, frame_max: usize) {
        for _ in 0..READ_BATCH {
            let mut buf = self.spare.pop().unwrap_or_default();
            buf.resize(frame_max, 0);
            let n = match self.from.recv(&mut buf) {
                Ok(Some(n)) => n,
                Ok(None) => {
                    self.spare.push(buf);
                    return;
                }
                Err(e) => {
                    eprintln!("delay line: reading a port failed: {e}");
                    std::thread::sleep(Duration::from_millis(10));
                    self.spare.push(buf);
                    return;
                }
            };
            if n > frame_max {
                // a frame larger than the MTU allows (an offload left on): not forwarded
                self.stats.dropped_full += 1;
                self.spare.push(buf);
                continue;
            }
            buf.truncate(n);
            self.admit(buf);
        }
    }

    fn admit(&mut self, frame: Vec<u8>) {
        let arrived = self.now_ns();
        let n = frame.len() as u64;
        self.stats.packets += 1;
        self.stats.bytes += n;
        match self.sched.fate(arrived, frame.len()) {
            Fate::Lost => {
                self.stats.dropped_loss += 1;
                self.spare.push(frame);
            }
            Fate::QueueFull => {
                self.stats.dropped_queue += 1;
                self.spare.push(frame);
            }
            Fate::Due { at_ns, ahead } => {
                if self.held_bytes + n > MAX_HELD_BYTES {
                    self.stats.dropped_full += 1;
                    self.spare.push(frame);
                    return;
                }
                if ahead && !self.held.is_empty() {
                    self.stats.reordered += 1;
                }
                self.held_bytes += n;
                self.stats.max_held_bytes = self.stats.max_held_bytes.max(self.held_bytes);
                let queued = self.sched.queued_bytes(arrived);
                self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(queued);
                self.seq += 1;
                self.held.push(Reverse(Held {
                    due_ns: at_ns,
                    seq: self.seq,
                    arrived_ns: arrived,
                    frame,
                }));
            }
        }
    }
}

/// One direction's thread: frames in at `from`, out at `to`.
fn forward(from: &Port, to: &Port, sched: Scheduler, frame_max: usize, shared: &Mutex<DirStats>) {
    let realtime = timely_thread();
    let mut d = Direction {
        from,
        to,
        sched,
        start: Instant::now(),
        held: BinaryHeap::new(),
        spare: Vec::new(),
        held_bytes: 0,
        seq: 0,
        stats: DirStats {
            realtime,
            ..Default::default()
        },
    };
    let mut published = Instant::now();
    loop {
        d.send_due();
        d.from.wait(d.next_wait());
        d.receive(frame_max);
        if published.elapsed() >= Duration::from_millis(200) {
            if let Ok(mut s) = shared.lock() {
                *s = d.stats.clone();
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
    /// The first link's directions: host a to b and b to a; in a bridged lab, host h1 to
    /// the switch and back (as `links[0]`).
    pub ab: DirStats,
    pub ba: DirStats,
    /// In a bridged lab, every host's link, in the lab's host order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<LinkReport>,
}

/// One host's link to the bridge: `up` from the host to the switch, `down` back.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LinkReport {
    pub host: String,
    pub up: DirStats,
    pub down: DirStats,
}

/// Each link's seed: the lab's for the first (a two-host lab's), a different one for each
/// other, so links do not lose the same frames in step.
fn link_seed(seed: u64, link: usize) -> u64 {
    seed.wrapping_add((link as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// One link of the delay line: port `a` receives what host a (or the link's host) sends,
/// and direction `ab` of `path` goes from `a` to `b`.
#[derive(Clone, Debug)]
pub struct LineLink {
    pub a: String,
    pub b: String,
    /// The link's host, for the report.
    pub host: String,
    pub path: PathSpec,
}

/// Runs the delay line on `links` until the process is ended, writing its report to
/// `report_path` every half second; the hosts fill the report's `links` when there is more
/// than one. Returns only when a port cannot be opened.
pub fn run(
    links: &[LineLink],
    bottleneck: Option<Bottleneck>,
    mtu: u32,
    report_path: &Path,
) -> io::Result<()> {
    // a frame: the MTU, the MAC header and a VLAN tag
    let frame_max = mtu as usize + 18;
    let mut shared = Vec::new();
    for (i, link) in links.iter().enumerate() {
        let (spec, pa, pb) = (&link.path, Port::open(&link.a)?, Port::open(&link.b)?);
        let (pa, pb) = (Arc::new(pa), Arc::new(pb));
        let ab = Arc::new(Mutex::new(DirStats::default()));
        let ba = Arc::new(Mutex::new(DirStats::default()));
        let seed = link_seed(spec.seed, i);
        for (from, to, dir, seed, stats) in [
            (pa.clone(), pb.clone(), spec.ab, seed, ab.clone()),
            (pb, pa, spec.ba, seed ^ 0xba, ba.clone()),
        ] {
            let sched = Scheduler::new(dir, bottleneck, seed);
            std::thread::Builder::new()
                .name("delay-line".into())
                .spawn(move || forward(&from, &to, sched, frame_max, &stats))?;
        }
        shared.push((ab, ba));
    }
    let start = Instant::now();
    let read = |m: &Arc<Mutex<DirStats>>| m.lock().map(|s| s.clone()).unwrap_or_default();
    loop {
        let mut report = PathReport {
            pid: std::process::id(),
            seconds: start.elapsed().as_secs_f64(),
            ..Default::default()
        };
        if let Some((ab, ba)) = shared.first() {
            (report.ab, report.ba) = (read(ab), read(ba));
        }
        if links.len() > 1 {
            report.links = links
                .iter()
                .zip(&shared)
                .map(|(link, (up, down))| LinkReport {
                    host: link.host.clone(),
                    up: read(up),
                    down: read(down),
                })
                .collect();
        }
        if let Ok(text) = serde_json::to_vec(&report) {
            let tmp = report_path.with_extension("tmp");
            if std::fs::write(&tmp, text).is_ok() {
                let _ = std::fs::rename(&tmp, report_path);
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}
