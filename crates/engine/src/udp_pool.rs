//! UDP flows on data workers: the same pool of threads per side as TCP (`pool.rs`), each
//! running one epoll loop over many UDP streams. A worker holds one send batch and one
//! receive batch for all its flows; each flow keeps its own pacing schedule, sequence and
//! drop accounting, clocks and report ([`UdpTx`], [`UdpRx`], as on a stream thread).
//!
//! Unpaced senders wait on their sockets for room; paced senders are due at absolute times,
//! kept in a heap, and the worker sleeps on one timerfd armed for the earliest; receivers
//! wait on their sockets. The end markers go out from the same heap, [`END_GAP`] apart.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{SocketAddr, UdpSocket};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::epoll;
use wirerate_core::side_report::{Role, StreamReport};
use wirerate_probe::cpu::ThreadTimes;
use wirerate_proto::Token;

use crate::mmsg::{self, RecvBatch, SendBatch};
use crate::pool::{wait_ready, StartError, WorkerTimes, CALLS_PER_WAKE, TICK};
use crate::stream::Plan;
use crate::udp::{TxStep, UdpRx, UdpTx, END_GAP, END_MARKERS};

/// One UDP stream handed to the pool.
pub struct UdpPoolFlow {
    pub plan: Plan,
    pub sock: UdpSocket,
    pub token: Token,
    /// A server receiver's one peer address.
    pub peer: Option<SocketAddr>,
}

/// Starts `threads` workers over `flows` (see [`crate::pool::start`]).
pub fn start(
    flows: Vec<UdpPoolFlow>,
    threads: usize,
    placement: &crate::pool::Placement,
) -> Result<Vec<JoinHandle<Vec<StreamReport>>>, StartError> {
    crate::pool::start_workers(flows, threads, placement, |f| f.plan.id, run_worker)
}

enum State {
    Sending(UdpTx),
    /// The last datagram is out; `sent` end markers too.
    Ending(UdpTx, u32),
    Receiving(UdpRx),
    Done(Box<StreamReport>),
    /// Only while a state is being replaced.
    Gone,
}

struct Flow {
    sock: UdpSocket,
    state: State,
    /// When the flow's entry in the worker's heap is due; an entry of another time is stale.
    next_at: Option<Instant>,
}

/// Paced senders and end markers by the time they are due.
type Due = BinaryHeap<Reverse<(Instant, usize)>>;

impl Flow {
    fn schedule(&mut self, due: &mut Due, at: Instant, i: usize) {
        self.next_at = Some(at);
        due.push(Reverse((at, i)));
    }
}

/// The epoll data of the worker's timer; a flow's is its index.
const TIMER: u64 = u64::MAX;

fn run_worker(flows: Vec<UdpPoolFlow>, cpu: Option<u32>) -> Vec<StreamReport> {
    let Some(first) = flows.first() else {
        return Vec::new();
    };
    let (mut clock, mut setup_error) = WorkerTimes::start(&first.plan, cpu);
    let t0 = clock.t0();
    let mut flows: Vec<Flow> = flows
        .into_iter()
        .map(|f| {
            let state = match f.plan.role {
                Role::Sender => State::Sending(UdpTx::new(f.plan, f.token, &f.sock, true)),
                Role::Receiver => {
                    State::Receiving(UdpRx::new(f.plan, f.token, f.peer, &f.sock, true))
                }
            };
            Flow {
                sock: f.sock,
                state,
                next_at: None,
            }
        })
        .collect();
    // one batch of each kind for the worker: its flows share one spec, so one size fits all
    let mut send = flows.iter().find_map(|f| match &f.state {
        State::Sending(tx) => Some(SendBatch::new(tx.batch_count(), &tx.template())),
        _ => None,
    });
    let mut recv = flows.iter().find_map(|f| match &f.state {
        State::Receiving(rx) => Some(RecvBatch::new(mmsg::batch_for(rx.slot()), rx.slot())),
        _ => None,
    });
    let ep = match epoll::create(epoll::CreateFlags::CLOEXEC) {
        Ok(ep) => Some(ep),
        Err(e) => {
            setup_error.get_or_insert(format!("cannot create an epoll set: {e}"));
            None
        }
    };
    let timer = match crate::timer::Timer::new() {
        Ok(t) => Some(t),
        Err(e) => {
            setup_error.get_or_insert(format!("cannot create a timer: {e}"));
            None
        }
    };
    if let (Some(ep), Some(t)) = (&ep, &timer) {
        let data = epoll::EventData::new_u64(TIMER);
        if let Err(e) = epoll::add(ep, t.fd(), data, epoll::EventFlags::IN) {
            setup_error.get_or_insert(format!("cannot wait on a timer: {e}"));
        }
    }
    let mut due = Due::new();
    let now = Instant::now();
    for (i, f) in flows.iter_mut().enumerate() {
        let interest = match &f.state {
            State::Sending(tx) if tx.paced() => None,
            State::Sending(_) => Some(epoll::EventFlags::OUT),
            _ => Some(epoll::EventFlags::IN),
        };
        let paced_at = match &f.state {
            State::Sending(tx) => tx.due_at(),
            _ => None,
        };
        if let (Some(at), None) = (paced_at, &setup_error) {
            f.schedule(&mut due, at.max(now), i);
        }
        let set = match (&setup_error, &ep) {
            (Some(e), _) => Err(e.clone()),
            (None, None) => Err("no epoll set".to_string()),
            (None, Some(ep)) => f
                .sock
                .set_nonblocking(true)
                .map_err(|e| e.to_string())
                .and_then(|()| match interest {
                    Some(fl) => epoll::add(ep, &f.sock, epoll::EventData::new_u64(i as u64), fl)
                        .map_err(|e| format!("cannot wait on a data socket: {e}")),
                    None => Ok(()),
                }),
        };
        if let Err(e) = set {
            f.fail(e, t0);
        }
    }
    let calls = (CALLS_PER_WAKE / flows.len()).max(1);
    let mut lens = [0usize; mmsg::MAX_BATCH];
    let mut live = flows.iter().filter(|f| !f.done()).count();
    let mut events: Vec<epoll::Event> = Vec::with_capacity(1024.min(flows.len() + 1));
    let mut next_sweep = Instant::now();
    let mut armed: Option<Instant> = None;
    while live > 0 {
        let (Some(ep), Some(timer)) = (&ep, &timer) else {
            break;
        };
        let now = Instant::now();
        // the timer fires for the earliest due flow; the wait is bounded by the sweep
        let next_due = due.peek().map(|Reverse((at, _))| *at);
        if let Some(at) = next_due.filter(|&at| at < next_sweep) {
            if armed != Some(at) && timer.arm(at) {
                armed = Some(at);
            }
        }
        let wait = if next_due.is_some_and(|at| at <= now) {
            Duration::ZERO
        } else {
            next_sweep.saturating_duration_since(now).min(TICK)
        };
        match wait_ready(ep, &mut events, wait) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                let msg = format!("waiting on the data sockets: {e}");
                for f in flows.iter_mut().filter(|f| !f.done()) {
                    f.fail(msg.clone(), t0);
                }
                break;
            }
        }
        for ev in &events {
            let data = ev.data.u64();
            if data == TIMER {
                timer.clear();
                armed = None;
                continue;
            }
            let i = data as usize;
            let Some(f) = flows.get_mut(i) else { continue };
            match &mut f.state {
                State::Receiving(rx) => {
                    let Some(batch) = recv.as_mut() else { continue };
                    for _ in 0..calls {
                        match batch.recv(&f.sock) {
                            Ok(got) => {
                                if rx.absorb(batch, got, Instant::now()) {
                                    f.finish(ep, t0, &mut live);
                                    break;
                                }
                            }
                            Err(_) => break,
                        }
                    }
                }
                State::Sending(tx) => {
                    let Some(batch) = send.as_mut() else { continue };
                    for _ in 0..calls {
                        let now = Instant::now();
                        if tx.over(now) {
                            f.end(ep, now, &mut due, i);
                            break;
                        }
                        if tx.send(&f.sock, batch, now, &mut lens) == TxStep::Full {
                            break;
                        }
                    }
                }
                _ => {}
            }
        }
        // paced senders and end markers whose time has come
        let now = Instant::now();
        while let Some(&Reverse((at, i))) = due.peek() {
            if at > now {
                break;
            }
            due.pop();
            let f = &mut flows[i];
            if f.next_at != Some(at) {
                continue;
            }
            f.next_at = None;
            match &mut f.state {
                State::Sending(tx) => {
                    if tx.over(now) {
                        f.end(ep, now, &mut due, i);
                        continue;
                    }
                    tx.catch_up(now);
                    if let Some(batch) = send.as_mut() {
                        // a full socket buffer: the same slot is tried again at the next tick
                        let _ = tx.send(&f.sock, batch, now, &mut lens);
                    }
                    let next = tx.next_wake().unwrap_or(now).max(now);
                    f.schedule(&mut due, next, i);
                }
                State::Ending(tx, sent) => {
                    let _ = f.sock.send(&tx.end_marker());
                    *sent += 1;
                    if *sent >= END_MARKERS {
                        f.finish(ep, t0, &mut live);
                    } else {
                        f.schedule(&mut due, now + END_GAP, i);
                    }
                }
                _ => {}
            }
        }
        clock.at(now);
        if now >= next_sweep {
            next_sweep = now + TICK;
            for (i, f) in flows.iter_mut().enumerate() {
                let over = match &mut f.state {
                    State::Receiving(rx) => rx.error.is_some() || rx.done(now),
                    State::Sending(tx) => tx.over(now),
                    _ => false,
                };
                if over {
                    match f.state {
                        State::Receiving(_) => f.finish(ep, t0, &mut live),
                        _ => f.end(ep, now, &mut due, i),
                    }
                }
            }
        }
    }
    let reports = flows.iter_mut().map(|f| f.take_report(t0)).collect();
    clock.share(reports)
}

impl Flow {
    fn done(&self) -> bool {
        matches!(self.state, State::Done(_))
    }

    /// The report of a flow that is not done yet.
    fn take_report(&mut self, t0: ThreadTimes) -> StreamReport {
        match std::mem::replace(&mut self.state, State::Gone) {
            State::Sending(tx) | State::Ending(tx, _) => tx.report(t0),
            State::Receiving(rx) => rx.report(t0),
            State::Done(r) => *r,
            State::Gone => unreachable!("a state is always put back"),
        }
    }

    /// Ends the flow at once with an error (before it has moved anything).
    fn fail(&mut self, msg: String, t0: ThreadTimes) {
        let mut r = self.take_report(t0);
        r.error.get_or_insert(msg);
        self.state = State::Done(Box::new(r));
    }

    /// The flow is over: its report is taken and its socket leaves the epoll set.
    fn finish(&mut self, ep: &rustix::fd::OwnedFd, t0: ThreadTimes, live: &mut usize) {
        if self.done() {
            return;
        }
        let _ = epoll::delete(ep, &self.sock);
        self.state = State::Done(Box::new(self.take_report(t0)));
        *live -= 1;
    }

    /// A sender has sent its last datagram: its end markers start now.
    fn end(&mut self, ep: &rustix::fd::OwnedFd, now: Instant, due: &mut Due, i: usize) {
        let State::Sending(tx) = &self.state else {
            return;
        };
        if !tx.paced() {
            let _ = epoll::delete(ep, &self.sock);
        }
        if let State::Sending(tx) = std::mem::replace(&mut self.state, State::Gone) {
            self.state = State::Ending(tx, 0);
        }
        self.schedule(due, now, i);
    }
}
