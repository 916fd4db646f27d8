//! The loop against a toy session over a real loopback connection: events reach the handler,
//! deadlines are kept whatever the handler's wait, and a failure stops the data side and
//! tells the peer.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use super::*;

#[derive(Debug, thiserror::Error)]
enum ToyError {
    #[error("peer silent while {0}")]
    Silent(&'static str),
    #[error("peer closed")]
    Closed,
    #[error("peer aborted")]
    Aborted,
}

impl From<ToyError> for EngineError {
    fn from(e: ToyError) -> EngineError {
        EngineError::Setup(e.to_string())
    }
}

/// Each byte `g` from the peer is an event; `q` makes the session finished; `x` fails it.
struct Toy {
    out: Vec<Vec<u8>>,
    deadline: Option<Instant>,
    done: bool,
    failed: bool,
}

impl Toy {
    fn new(deadline: Option<Instant>) -> Toy {
        Toy {
            out: vec![b"hello\n".to_vec()],
            deadline,
            done: false,
            failed: false,
        }
    }
}

impl Session for Toy {
    type Event = u8;
    type Error = ToyError;

    fn handle_input(&mut self, bytes: &[u8], _now: Instant) -> Result<Vec<u8>, ToyError> {
        let mut ev = Vec::new();
        for &b in bytes {
            match b {
                b'q' => self.done = true,
                b'x' => {
                    self.failed = true;
                    return Err(ToyError::Aborted);
                }
                b => ev.push(b),
            }
        }
        Ok(ev)
    }
    fn handle_close(&mut self) -> Result<(), ToyError> {
        self.failed = !self.done;
        if self.done {
            Ok(())
        } else {
            Err(ToyError::Closed)
        }
    }
    fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        (!self.out.is_empty()).then(|| self.out.remove(0))
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }
    fn handle_timeout(&mut self, now: Instant) -> Result<(), ToyError> {
        match self.deadline {
            Some(d) if now >= d => {
                self.failed = true;
                Err(ToyError::Silent("waiting"))
            }
            _ => Ok(()),
        }
    }
    fn is_finished(&self) -> bool {
        self.done
    }
    fn is_failed(&self) -> bool {
        self.failed
    }
    fn abort(&mut self, reason: &str) {
        self.out.push(format!("abort: {reason}\n").into_bytes());
        self.failed = true;
    }
}

/// Answers each event with `ack <byte>`; fails on `!`.
#[derive(Default)]
struct Echo {
    seen: Vec<u8>,
    afters: usize,
    stopped: bool,
}

impl Handler<Toy> for Echo {
    const PEER: Peer = Peer {
        write: "writing to the toy peer",
        read: "reading from the toy peer",
    };
    fn idle(&self) -> Duration {
        Duration::from_secs(2)
    }
    fn max_wait(&self) -> Duration {
        // far longer than any deadline here: the session's own deadline must cut it short
        Duration::from_secs(60)
    }
    fn on_event(&mut self, sess: &mut Toy, ev: u8) -> Result<(), EngineError> {
        if ev == b'!' {
            return Err(EngineError::Setup("the handler gave up".into()));
        }
        self.seen.push(ev);
        sess.out.push(vec![b'a', ev]);
        Ok(())
    }
    fn after(&mut self, _sess: &mut Toy, _now: Instant) -> Result<(), EngineError> {
        self.afters += 1;
        Ok(())
    }
    fn stop(&mut self) {
        self.stopped = true;
    }
}

fn pair() -> (Control, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (mine, _) = l.accept().unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    (Control::new(mine), peer)
}

fn read_all(mut peer: TcpStream) -> String {
    let mut got = Vec::new();
    let _ = peer.read_to_end(&mut got);
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn events_reach_the_handler_and_answers_go_out_until_finished() {
    let (mut ctl, mut peer) = pair();
    peer.write_all(b"gh").unwrap();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        peer.write_all(b"iq").unwrap();
        peer
    });
    let mut sess = Toy::new(None);
    let mut h = Echo::default();
    drive(&mut ctl, &mut sess, &mut h).expect("finished");
    let peer = writer.join().unwrap();
    assert_eq!(h.seen, b"ghi");
    assert!(h.afters >= 1 && !h.stopped);
    drop(ctl);
    assert_eq!(read_all(peer), "hello\nagahai");
}

#[test]
fn the_sessions_deadline_cuts_the_wait_short() {
    let (mut ctl, peer) = pair();
    let t0 = Instant::now();
    let mut sess = Toy::new(Some(t0 + Duration::from_millis(150)));
    let mut h = Echo::default();
    let e = drive(&mut ctl, &mut sess, &mut h).unwrap_err();
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_millis(150), "{waited:?}");
    // the handler would have waited a minute in one read
    assert!(waited < Duration::from_secs(30), "{waited:?}");
    assert_eq!(e.full(), "peer silent while waiting");
    assert!(h.stopped);
    drop(ctl);
    assert_eq!(read_all(peer), "hello\nabort: peer silent while waiting\n");
}

#[test]
fn a_handler_error_stops_the_data_side_and_tells_the_peer() {
    let (mut ctl, mut peer) = pair();
    peer.write_all(b"g!").unwrap();
    let mut sess = Toy::new(None);
    let mut h = Echo::default();
    let e = drive(&mut ctl, &mut sess, &mut h).unwrap_err();
    assert_eq!(e.full(), "the handler gave up");
    assert!(h.stopped && sess.is_failed());
    drop(ctl);
    // the answer to `g` was queued before the failure and goes out first
    assert_eq!(read_all(peer), "hello\nagabort: the handler gave up\n");
}

#[test]
fn a_close_before_the_end_is_an_error_and_after_it_is_not() {
    let (mut ctl, peer) = pair();
    drop(peer);
    let mut h = Echo::default();
    let e = drive(&mut ctl, &mut Toy::new(None), &mut h).unwrap_err();
    assert_eq!(e.full(), "peer closed");
    assert!(h.stopped);

    let (mut ctl, mut peer) = pair();
    peer.write_all(b"q").unwrap();
    drive(&mut ctl, &mut Toy::new(None), &mut Echo::default()).expect("finished");
}

#[test]
fn a_peer_error_is_reported_as_the_peer_said_it() {
    let (mut ctl, mut peer) = pair();
    peer.write_all(b"x").unwrap();
    let mut h = Echo::default();
    let e = drive(&mut ctl, &mut Toy::new(None), &mut h).unwrap_err();
    assert_eq!(e.full(), "peer aborted");
    assert!(h.stopped);
}
