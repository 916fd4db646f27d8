//! The one control loop. Every control connection — wirerate's client and server, iperf3's
//! client and server — is driven here through `wirerate_proto::Session`: send what the
//! session queued, wait on the connection no longer than the session's deadline and the data
//! side's next tick, feed what arrived, enforce the deadline, and hand each event to the
//! role's [`Handler`]. The handlers hold only what really differs: starting the workers,
//! attaching streams, making reports.

use std::time::{Duration, Instant};

use wirerate_proto::Session;

use crate::control::{Control, Input};
use wirerate_engine::EngineError;

/// The longest a round waits on the control connection when nothing else is due.
pub const ROUND: Duration = Duration::from_millis(20);

/// How a driver's I/O errors name the peer.
pub struct Peer {
    pub write: &'static str,
    pub read: &'static str,
}

/// What one role does with its session's events and its data side.
pub trait Handler<S: Session> {
    /// How I/O errors on the control connection name the peer.
    const PEER: Peer;

    /// How long a write to the control connection may block.
    fn idle(&self) -> Duration;

    /// The longest wait on the control connection in one round.
    fn max_wait(&self) -> Duration {
        ROUND
    }

    /// When the data side next needs attention (an interval tick, the planned end).
    fn wake_at(&self) -> Option<Instant> {
        None
    }

    /// Work from outside the control connection (data streams that arrived) before the
    /// wait. True when it took any: what it queued is then sent before the next wait.
    fn before_read(&mut self, _sess: &mut S) -> Result<bool, EngineError> {
        Ok(false)
    }

    fn on_event(&mut self, sess: &mut S, ev: S::Event) -> Result<(), EngineError>;

    /// After the input and the deadline: the data side (intervals, progress, reports).
    fn after(&mut self, sess: &mut S, now: Instant) -> Result<(), EngineError>;

    /// The test failed: stop the data side before the peer is told.
    fn stop(&mut self) {}

    /// A failed read of the control connection, in words (a TLS alert, say).
    fn read_error(e: std::io::Error) -> EngineError {
        EngineError::io(Self::PEER.read)(e)
    }

    /// What the peer is told when the test fails here.
    fn abort_reason(&self, e: &EngineError) -> String {
        e.full()
    }
}

/// Drives `sess` over `ctl` until it is finished. On failure the data side is stopped, the
/// peer is told (if the connection still takes writes), and the error is returned.
pub fn drive<S, H>(ctl: &mut Control, sess: &mut S, h: &mut H) -> Result<(), EngineError>
where
    S: Session,
    H: Handler<S>,
    EngineError: From<S::Error>,
{
    let Err((e, writable)) = rounds(ctl, sess, h) else {
        return Ok(());
    };
    h.stop();
    sess.abort(&h.abort_reason(&e));
    if writable {
        let _ = ctl.flush(|| sess.poll_transmit(), Duration::from_secs(1));
    }
    Err(e)
}

/// Rounds until the session is finished; an error says whether the peer can still be told.
fn rounds<S, H>(ctl: &mut Control, sess: &mut S, h: &mut H) -> Result<(), (EngineError, bool)>
where
    S: Session,
    H: Handler<S>,
    EngineError: From<S::Error>,
{
    loop {
        if let Err(e) = ctl.flush(|| sess.poll_transmit(), h.idle()) {
            // a peer that refuses at once closes before reading what was sent: its answer,
            // already here, says more than the broken pipe
            match ctl.read(Duration::from_millis(200)) {
                Ok(Input::Bytes(n)) => {
                    if let Err(e) = sess.handle_input(ctl.bytes(n), Instant::now()) {
                        return Err((e.into(), false));
                    }
                }
                // a TLS alert (a server that refused the client's certificate)
                Err(re) => return Err((H::read_error(re), false)),
                _ => {}
            }
            return Err((EngineError::io(H::PEER.write)(e), false));
        }
        if sess.is_finished() {
            return Ok(());
        }
        round(ctl, sess, h).map_err(|e| (e, true))?;
    }
}

/// One wait on the control connection and what follows from it.
fn round<S, H>(ctl: &mut Control, sess: &mut S, h: &mut H) -> Result<(), EngineError>
where
    S: Session,
    H: Handler<S>,
    EngineError: From<S::Error>,
{
    if h.before_read(sess)? {
        return Ok(());
    }
    let now = Instant::now();
    let until = [sess.poll_timeout(), h.wake_at()]
        .into_iter()
        .flatten()
        .fold(now + h.max_wait(), Instant::min);
    let events = match ctl
        .read(until.saturating_duration_since(now))
        .map_err(H::read_error)?
    {
        Input::Bytes(n) => sess.handle_input(ctl.bytes(n), Instant::now())?,
        Input::Closed => {
            sess.handle_close()?;
            Vec::new()
        }
        Input::Nothing => Vec::new(),
    };
    for ev in events {
        h.on_event(sess, ev)?;
    }
    let now = Instant::now();
    sess.handle_timeout(now)?;
    h.after(sess, now)
}

#[cfg(test)]
#[path = "driver_tests.rs"]
mod tests;
