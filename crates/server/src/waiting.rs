//! The waiting room: new connections that have sent nothing yet wait here, all on one
//! thread that polls their sockets, instead of on a thread each. The first bytes (or a
//! close) move a connection on to a thread of its own; silence until the handshake timeout
//! ends it. A flood of connections that say nothing costs the server their sockets alone.
//! A login whose client has its challenge and has not answered waits here too
//! (`crate::login::Held`), and goes on on a thread when its socket turns readable or its
//! deadline passes.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::login::Held;
use crate::logline::{Decision, Event, Kind};
use crate::server::{peer, Pending, Shared};

/// A connection waiting for its first bytes.
pub(crate) struct Parked {
    pub(crate) sock: TcpStream,
    pub(crate) pending: Pending,
    pub(crate) accepted_at: Instant,
}

/// What waits in the room.
enum Waiting {
    New(Parked),
    Login(Box<Held>),
}

impl Waiting {
    fn fd(&self) -> std::os::fd::RawFd {
        match self {
            Waiting::New(p) => p.sock.as_raw_fd(),
            Waiting::Login(h) => h.ctl.sock.as_raw_fd(),
        }
    }

    /// When it stops waiting, readable or not.
    fn until(&self, handshake: Duration) -> Instant {
        match self {
            Waiting::New(p) => p.accepted_at + handshake,
            Waiting::Login(h) => h.deadline(),
        }
    }
}

/// The room's door: connections are handed in through a channel, and a byte on a socket
/// pair wakes the poller so a new one is watched at once.
#[derive(Default)]
pub(crate) struct WaitingRoom {
    door: Mutex<Option<(Sender<Waiting>, UnixStream)>>,
}

impl WaitingRoom {
    /// Parks a connection; the room's thread starts with the first. Hands the connection
    /// back if the thread cannot start.
    pub(crate) fn park(&self, shared: &Arc<Shared>, p: Parked) -> Result<(), Parked> {
        self.enter(shared, Waiting::New(p)).map_err(|w| match w {
            Waiting::New(p) => p,
            Waiting::Login(_) => unreachable!("handed back as it came"),
        })
    }

    /// Holds a login that waits for the client (`crate::login::hold`); hands it back if
    /// the room's thread cannot start.
    pub(crate) fn hold(&self, shared: &Arc<Shared>, h: Box<Held>) -> Result<(), Box<Held>> {
        self.enter(shared, Waiting::Login(h)).map_err(|w| match w {
            Waiting::Login(h) => h,
            Waiting::New(_) => unreachable!("handed back as it came"),
        })
    }

    fn enter(&self, shared: &Arc<Shared>, p: Waiting) -> Result<(), Waiting> {
        let mut door = self.door.lock().unwrap_or_else(|e| e.into_inner());
        if door.is_none() {
            let Ok((bell, wake)) = UnixStream::pair() else {
                return Err(p);
            };
            // neither end blocks: a full pipe already holds a wake-up
            let _ = wake.set_nonblocking(true);
            let _ = bell.set_nonblocking(true);
            let (tx, rx) = mpsc::channel();
            // the thread holds no strong reference: it ends with the server
            let shared = Arc::downgrade(shared);
            let started = std::thread::Builder::new()
                .name("wr-waiting".into())
                .spawn(move || watch(&rx, &wake, &shared));
            if started.is_err() {
                return Err(p);
            }
            *door = Some((tx, bell));
        }
        let Some((tx, bell)) = door.as_mut() else {
            return Err(p);
        };
        tx.send(p).map_err(|e| e.0)?;
        let _ = bell.write(&[1]);
        Ok(())
    }
}

/// The room's thread: polls every parked socket, moves on those with something to read,
/// ends those silent past the handshake timeout.
fn watch(rx: &Receiver<Waiting>, wake: &UnixStream, server: &Weak<Shared>) {
    let mut parked: Vec<Waiting> = Vec::new();
    loop {
        if parked.is_empty() {
            match rx.recv() {
                Ok(p) => parked.push(p),
                Err(_) => return,
            }
        }
        parked.extend(rx.try_iter());
        let Some(shared) = server.upgrade() else {
            return;
        };
        let shared = &shared;
        let mut fds: Vec<libc::pollfd> = parked
            .iter()
            .map(Waiting::fd)
            .chain([wake.as_raw_fd()])
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let until = parked
            .iter()
            .map(|p| p.until(shared.cfg.handshake))
            .min()
            .unwrap_or_else(Instant::now);
        let wait = until.saturating_duration_since(Instant::now());
        let ms = libc::c_int::try_from(wait.as_millis() + 1).unwrap_or(libc::c_int::MAX);
        // SAFETY: `fds` is a live array of `fds.len()` pollfds; poll writes only `revents`.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        let mut sink = [0u8; 64];
        while matches!((&*wake).read(&mut sink), Ok(n) if n > 0) {}
        let now = Instant::now();
        // from the end, so swap_remove leaves the indices still to visit in place
        for i in (0..parked.len()).rev() {
            if fds[i].revents != 0 || now >= parked[i].until(shared.cfg.handshake) {
                let readable = fds[i].revents != 0;
                match parked.swap_remove(i) {
                    Waiting::New(p) if readable => crate::server::start_conn_thread(p, shared),
                    Waiting::New(p) => silent(p, shared),
                    // the login's own loop ends it at its deadline, as on its first thread
                    Waiting::Login(h) => crate::login::resume_on_thread(*h, shared),
                }
            }
        }
    }
}

/// Ends a new connection that said nothing by the handshake timeout.
fn silent(p: Parked, shared: &Shared) {
    let who = peer(&p.sock);
    let reason = "no preamble: peer was silent";
    let ev = Event::new(Kind::Connection, Some(who.clone()))
        .decided(Decision::Refused, Some(reason.into()));
    let ip = p.pending.ip;
    drop(p);
    shared.log_rejected(ip, ev, format_args!("rejected {who}: {reason}"));
}

/// Whether a socket has bytes (or a close) to read now.
pub(crate) fn has_input(sock: &TcpStream) -> bool {
    wirerate_engine::net::wait_readable(sock, Duration::ZERO)
}
