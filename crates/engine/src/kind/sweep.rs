//! Message-size sweep (`wirerate sweep`): the client's and the server's loop over one TCP
//! stream, and the client's figures, handed out size by size as progress. A sweep has no
//! intervals.

use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Instant;

use wirerate_core::result::Interval;
use wirerate_core::side_report::{Role, SideReport};
use wirerate_core::sweep::{SweepPoint, SweepSide};

use super::{KindRun, Side, Work};
use crate::rr::SideMsg;
use crate::side::{DataSock, RunContext};
use crate::sweep;
use crate::udp::{run_udp_receiver, run_udp_sender};

pub(crate) struct Sizes {
    /// What the client's worker sends, and where the side takes it in.
    tx: Sender<SideMsg>,
    msgs: Receiver<SideMsg>,
    /// The client's figures so far.
    sweep: Option<SweepSide>,
    /// Sizes handed out as progress.
    given: usize,
}

impl Sizes {
    pub fn new() -> Sizes {
        let (tx, msgs) = mpsc::channel();
        Sizes {
            tx,
            msgs,
            sweep: None,
            given: 0,
        }
    }

    fn drain(&mut self) {
        while let Ok(m) = self.msgs.try_recv() {
            if let SideMsg::Sweep(s) = m {
                self.sweep = Some(s);
            }
        }
    }
}

impl KindRun for Sizes {
    fn worker(&self, role: Role, sock: DataSock, _ctx: &RunContext) -> Work {
        let tx = self.tx.clone();
        match (role, sock) {
            (Role::Sender, DataSock::Tcp(s)) => {
                Box::new(move |plan| sweep::run_client(s, plan, tx))
            }
            (Role::Receiver, DataSock::Tcp(s)) => Box::new(move |plan| sweep::run_server(s, plan)),
            // a sweep runs over TCP (the spec says so); a UDP stream moves bulk data
            (Role::Sender, DataSock::Udp(s, token, _)) => {
                Box::new(move |plan| run_udp_sender(s, token, plan))
            }
            (Role::Receiver, DataSock::Udp(s, token, peer)) => {
                Box::new(move |plan| run_udp_receiver(s, token, peer, plan))
            }
        }
    }

    fn poll(&mut self, _now: Instant, _side: Side<'_>) -> Vec<Interval> {
        Vec::new()
    }

    fn new_sweep_points(&mut self) -> Vec<SweepPoint> {
        self.drain();
        let Some(sw) = &self.sweep else {
            return Vec::new();
        };
        let new = sw.points.get(self.given..).unwrap_or_default().to_vec();
        self.given = sw.points.len();
        new
    }

    fn finish(mut self: Box<Self>, _side: Side<'_>, report: &mut SideReport) {
        self.drain();
        report.sweep = self.sweep.take();
    }
}
