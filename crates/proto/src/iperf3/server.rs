//! The server's half of an iperf3 control connection, after the cookie was read: parameters,
//! stream accounting, the end of the test and the results exchange. No socket, no clock.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::json::{encode, Inbox};
use super::params::{spec_from_params, Params};
use super::results::Results;
use super::{state, Iperf3Error, MAX_CLIENT_RESULTS_JSON, MAX_PARAMS_JSON};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    AwaitParams,
    AwaitStreams,
    Running,
    AwaitPeerResults,
    AwaitLocalResults,
    AwaitDone,
    Done,
    Failed,
}

impl St {
    fn name(self) -> &'static str {
        match self {
            St::AwaitParams => "waiting for the test parameters",
            St::AwaitStreams => "waiting for data streams",
            St::Running => "running the test",
            St::AwaitPeerResults => "waiting for the client's results",
            St::AwaitLocalResults => "collecting this side's results",
            St::AwaitDone => "waiting for the client to finish",
            St::Done => "done",
            St::Failed => "failed",
        }
    }
}

/// What the server driver must act on.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerEvent {
    /// Valid parameters arrived and `CREATE_STREAMS` is queued: accept this many streams.
    Params(Box<Params>, usize),
    /// The client ended the test: stop the workers (`EXCHANGE_RESULTS` is queued).
    TestEnd,
    /// The client's results; answer with [`ServerSession::local_results`].
    PeerResults(Box<Results>),
}

#[derive(Debug)]
pub struct ServerSession {
    st: St,
    inbox: Inbox,
    out: VecDeque<Vec<u8>>,
    deadline: Option<Instant>,
    idle: Duration,
    expected: usize,
    attached: usize,
}

impl ServerSession {
    /// Starts after the client's cookie: asks for the parameters.
    pub fn new(now: Instant, idle: Duration) -> ServerSession {
        let mut out = VecDeque::new();
        out.push_back(vec![state::PARAM_EXCHANGE as u8]);
        ServerSession {
            st: St::AwaitParams,
            inbox: Inbox::new(MAX_CLIENT_RESULTS_JSON),
            out,
            deadline: Some(now + idle),
            idle,
            expected: 0,
            attached: 0,
        }
    }

    pub fn handle_input(
        &mut self,
        bytes: &[u8],
        now: Instant,
    ) -> Result<Vec<ServerEvent>, Iperf3Error> {
        if self.st == St::Failed {
            return Err(Iperf3Error::Local("session already failed".into()));
        }
        let r = self.inbox.push(bytes).and_then(|()| self.process(now));
        if r.is_err() && self.st != St::Failed {
            self.st = St::Failed;
        }
        r
    }

    fn process(&mut self, now: Instant) -> Result<Vec<ServerEvent>, Iperf3Error> {
        let mut events = Vec::new();
        loop {
            match self.st {
                St::AwaitParams => {
                    let Some(v) = self.inbox.json(MAX_PARAMS_JSON)? else {
                        break;
                    };
                    match spec_from_params(&v) {
                        Ok(p) => {
                            self.expected = p.spec.streams() as usize;
                            self.out.push_back(vec![state::CREATE_STREAMS as u8]);
                            self.st = St::AwaitStreams;
                            self.deadline = Some(now + self.idle);
                            events.push(ServerEvent::Params(Box::new(p), self.expected));
                        }
                        Err((code, e)) => {
                            self.refuse(code);
                            return Err(e);
                        }
                    }
                }
                St::AwaitPeerResults => {
                    let Some(v) = self.inbox.json(MAX_CLIENT_RESULTS_JSON)? else {
                        break;
                    };
                    events.push(ServerEvent::PeerResults(Box::new(Results::parse(&v)?)));
                    self.st = St::AwaitLocalResults;
                    self.deadline = None;
                }
                St::Done | St::Failed => break,
                st => {
                    let Some(b) = self.inbox.state() else {
                        break;
                    };
                    match (st, b) {
                        (St::Running, state::TEST_END) => {
                            self.out.push_back(vec![state::EXCHANGE_RESULTS as u8]);
                            self.st = St::AwaitPeerResults;
                            self.deadline = Some(now + self.idle);
                            events.push(ServerEvent::TestEnd);
                        }
                        (St::AwaitDone, state::IPERF_DONE) => {
                            self.st = St::Done;
                            self.deadline = None;
                        }
                        (_, state::CLIENT_TERMINATE) => {
                            self.st = St::Failed;
                            return Err(Iperf3Error::ClientTerminated);
                        }
                        (st, got) => {
                            self.st = St::Failed;
                            return Err(Iperf3Error::UnexpectedState {
                                got,
                                state: st.name(),
                            });
                        }
                    }
                }
            }
        }
        Ok(events)
    }

    /// One more data stream presented the cookie. Returns true when it was the last one
    /// expected: `TEST_START` and `TEST_RUNNING` are then queued and the workers may start.
    pub fn attach_stream(&mut self, now: Instant) -> Result<bool, Iperf3Error> {
        if self.st != St::AwaitStreams || self.attached >= self.expected {
            return Err(Iperf3Error::Local(format!(
                "unexpected data stream while {}",
                self.st.name()
            )));
        }
        self.attached += 1;
        if self.attached < self.expected {
            self.deadline = Some(now + self.idle);
            return Ok(false);
        }
        self.out.push_back(vec![state::TEST_START as u8]);
        self.out.push_back(vec![state::TEST_RUNNING as u8]);
        self.st = St::Running;
        // the driver bounds the running test by its length plus the idle timeout
        self.deadline = None;
        Ok(true)
    }

    /// This side's results, after the client's.
    pub fn local_results(&mut self, results: &Results, now: Instant) {
        if self.st == St::AwaitLocalResults {
            self.out.push_back(encode(&results.to_json()));
            self.out.push_back(vec![state::DISPLAY_RESULTS as u8]);
            self.st = St::AwaitDone;
            self.deadline = Some(now + self.idle);
        }
    }

    /// Refuses the test with an iperf3 error number (the client prints its own text).
    pub fn refuse(&mut self, code: i32) {
        if !matches!(self.st, St::Failed | St::Done) {
            let mut b = vec![state::SERVER_ERROR as u8];
            b.extend_from_slice(&code.to_be_bytes());
            b.extend_from_slice(&0i32.to_be_bytes());
            self.out.push_back(b);
        }
        self.st = St::Failed;
    }

    /// Ends a test the server cannot go on with; the client prints what it has.
    pub fn terminate(&mut self) {
        if !matches!(self.st, St::Failed | St::Done | St::AwaitParams) {
            self.out.push_back(vec![state::SERVER_TERMINATE as u8]);
        }
        self.st = St::Failed;
    }

    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.out.pop_front()
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }

    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), Iperf3Error> {
        super::expire(self.deadline, now, &mut self.st, St::Failed, St::name)
    }

    /// The client closed the control connection. After the results were sent that is the
    /// normal end even without `IPERF_DONE`.
    pub fn handle_close(&mut self) -> Result<(), Iperf3Error> {
        match self.st {
            St::Done => Ok(()),
            St::AwaitDone => {
                self.st = St::Done;
                Ok(())
            }
            st => {
                self.st = St::Failed;
                Err(Iperf3Error::Closed(st.name()))
            }
        }
    }

    pub fn is_finished(&self) -> bool {
        self.st == St::Done
    }

    pub fn is_failed(&self) -> bool {
        self.st == St::Failed
    }

    pub fn is_running(&self) -> bool {
        self.st == St::Running
    }

    /// True from `TEST_END` on, until the results are sent.
    pub fn is_ending(&self) -> bool {
        matches!(self.st, St::AwaitPeerResults | St::AwaitLocalResults)
    }
}
