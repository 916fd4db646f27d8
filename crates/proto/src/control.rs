//! The one shape every control session has, whatever its protocol: bytes and the time go in,
//! frames to send and deadlines come out, and events say what the driver must do. The engine
//! drives wirerate's client and server and iperf3's client and server through this trait
//! with one loop; only what each event means (start the workers, attach streams, make a
//! report) is left to a per-role handler.

use std::time::Instant;

/// A sans-IO control session: no socket, no clock.
pub trait Session {
    /// What the driver must act on.
    type Event;
    /// Why the session failed.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Feeds bytes read from the control connection; returns the events they caused.
    fn handle_input(&mut self, bytes: &[u8], now: Instant)
        -> Result<Vec<Self::Event>, Self::Error>;
    /// The peer closed the control connection: the normal end, or a failure.
    fn handle_close(&mut self) -> Result<(), Self::Error>;
    /// The next frame to send, if any.
    fn poll_transmit(&mut self) -> Option<Vec<u8>>;
    /// When the session must hear from its peer, if it waits for it.
    fn poll_timeout(&self) -> Option<Instant>;
    /// Fails the session once `poll_timeout` has passed.
    fn handle_timeout(&mut self, now: Instant) -> Result<(), Self::Error>;
    /// Everything is said: flush what is queued, then close.
    fn is_finished(&self) -> bool;
    /// The session failed; it takes no more input.
    fn is_failed(&self) -> bool;
    /// Gives up, telling the peer in the protocol's own way (a `refused` frame, iperf3's
    /// `CLIENT_TERMINATE` or `SERVER_TERMINATE`); `reason` is sent where the protocol has
    /// room for it.
    fn abort(&mut self, reason: &str);
}

/// Implements the trait by calling the type's own methods of the same names.
macro_rules! session {
    ($ty:ty, $event:ty, $error:ty, |$s:ident, $reason:ident| $abort:expr) => {
        impl Session for $ty {
            type Event = $event;
            type Error = $error;

            fn handle_input(&mut self, bytes: &[u8], now: Instant) -> Result<Vec<$event>, $error> {
                <$ty>::handle_input(self, bytes, now)
            }
            fn handle_close(&mut self) -> Result<(), $error> {
                <$ty>::handle_close(self)
            }
            fn poll_transmit(&mut self) -> Option<Vec<u8>> {
                <$ty>::poll_transmit(self)
            }
            fn poll_timeout(&self) -> Option<Instant> {
                <$ty>::poll_timeout(self)
            }
            fn handle_timeout(&mut self, now: Instant) -> Result<(), $error> {
                <$ty>::handle_timeout(self, now)
            }
            fn is_finished(&self) -> bool {
                <$ty>::is_finished(self)
            }
            fn is_failed(&self) -> bool {
                <$ty>::is_failed(self)
            }
            fn abort(&mut self, reason: &str) {
                let ($s, $reason) = (self, reason);
                $abort
            }
        }
    };
}

session!(
    crate::session::ClientSession,
    crate::session::ClientEvent,
    crate::frame::ProtoError,
    |s, reason| s.abort(reason)
);
session!(
    crate::session::ServerSession,
    crate::session::ServerEvent,
    crate::frame::ProtoError,
    |s, reason| s.refuse(reason)
);
session!(
    crate::iperf3::ClientSession,
    crate::iperf3::ClientEvent,
    crate::iperf3::Iperf3Error,
    // iperf3 has no room for a reason: the server prints its own text
    |s, _reason| s.abort()
);
session!(
    crate::iperf3::ServerSession,
    crate::iperf3::ServerEvent,
    crate::iperf3::Iperf3Error,
    |s, _reason| s.terminate()
);

#[cfg(test)]
#[path = "control_tests.rs"]
mod tests;
