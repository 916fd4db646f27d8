//! What both session state machines keep alike: the state, the frames queued to send, the
//! deadline, both sides' final reports and the peer's report parts.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use wirerate_core::result::Interval;

use super::{ClientState, ServerState};
use crate::frame::ProtoError;
use crate::parts::Parts;

/// The states of a session, as [`Common`] needs them.
pub(super) trait SessionState: Copy + PartialEq {
    const FAILED: Self;
    fn name(self) -> &'static str;
}

impl SessionState for ServerState {
    const FAILED: Self = ServerState::Failed;
    fn name(self) -> &'static str {
        ServerState::name(self)
    }
}

impl SessionState for ClientState {
    const FAILED: Self = ClientState::Failed;
    fn name(self) -> &'static str {
        ClientState::name(self)
    }
}

/// What both sides of a session keep alike: the state, the frames queued to send, the
/// deadline, and whether each side's final report has gone.
#[derive(Debug)]
pub(super) struct Common<S> {
    pub(super) state: S,
    pub(super) out: VecDeque<Vec<u8>>,
    pub(super) deadline: Option<Instant>,
    pub(super) peer_report: bool,
    pub(super) local_report: bool,
    /// The peer's report parts, until its report arrives.
    pub(super) parts: Parts,
}

impl<S: SessionState> Common<S> {
    pub(super) fn new(state: S, out: VecDeque<Vec<u8>>, deadline: Option<Instant>) -> Common<S> {
        Common {
            state,
            out,
            deadline,
            peer_report: false,
            local_report: false,
            parts: Parts::default(),
        }
    }

    /// Takes a part of the peer's report: only while the test runs (the parts are bounded
    /// from its start) and before the report itself. Each part renews a running deadline,
    /// so a long report on a slow path is not taken for a silent peer.
    pub(super) fn take_part(
        &mut self,
        intervals: Vec<Interval>,
        samples: Vec<wirerate_core::evidence::TcpSample>,
        now: Instant,
        idle: Duration,
    ) -> Result<(), ProtoError> {
        if self.peer_report {
            self.state = S::FAILED;
            return Err(ProtoError::Unexpected {
                got: "report_part",
                state: "after the report",
            });
        }
        self.parts
            .add(intervals, samples, now)
            .inspect_err(|_| self.state = S::FAILED)?;
        if self.deadline.is_some() {
            self.deadline = Some(now + idle);
        }
        Ok(())
    }

    pub(super) fn is_finished(&self) -> bool {
        self.peer_report && self.local_report
    }

    /// Fails the session once its deadline has passed.
    pub(super) fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtoError> {
        match self.deadline {
            Some(d) if now >= d => {
                let what = self.state.name();
                self.state = S::FAILED;
                Err(ProtoError::TimedOut(what))
            }
            _ => Ok(()),
        }
    }

    /// A close is fine once both reports have gone; before, it fails the session.
    pub(super) fn handle_close(&mut self) -> Result<(), ProtoError> {
        if self.is_finished() {
            return Ok(());
        }
        let what = self.state.name();
        self.state = S::FAILED;
        Err(ProtoError::Closed(what))
    }
}
