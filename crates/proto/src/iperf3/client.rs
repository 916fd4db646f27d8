//! The client's half of an iperf3 control connection: cookie, parameters, stream set-up,
//! the end of the test, and the results exchange. No socket, no clock.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::json::{encode, Inbox};
use super::results::Results;
use super::{state, Cookie, Iperf3Error, MAX_SERVER_RESULTS_JSON};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    AwaitParamRequest,
    AwaitCreate,
    AwaitStart,
    Running,
    Ending,
    AwaitLocalResults,
    AwaitPeerResults,
    AwaitDisplay,
    Done,
    Failed,
}

impl St {
    fn name(self) -> &'static str {
        match self {
            St::AwaitParamRequest => "waiting for the server to ask for parameters",
            St::AwaitCreate => "waiting for the server to accept the parameters",
            St::AwaitStart => "waiting for the server to start the test",
            St::Running => "running the test",
            St::Ending => "waiting for the server to end the test",
            St::AwaitLocalResults => "collecting this side's results",
            St::AwaitPeerResults => "waiting for the server's results",
            St::AwaitDisplay => "waiting for the server to finish",
            St::Done => "done",
            St::Failed => "failed",
        }
    }
}

/// What the client driver must act on.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// Open the data streams now, each starting with the cookie.
    CreateStreams,
    /// The server started the test: start the streams' workers.
    Start,
    /// The server wants results: stop the workers and call [`ClientSession::local_results`].
    ExchangeResults,
    PeerResults(Box<Results>),
}

#[derive(Debug)]
pub struct ClientSession {
    st: St,
    inbox: Inbox,
    out: VecDeque<Vec<u8>>,
    params: Value,
    deadline: Option<Instant>,
    idle: Duration,
}

impl ClientSession {
    /// Queues the cookie; `params` is sent when the server asks for it.
    pub fn new(cookie: &Cookie, params: Value, now: Instant, idle: Duration) -> ClientSession {
        let mut out = VecDeque::new();
        out.push_back(cookie.bytes().to_vec());
        ClientSession {
            st: St::AwaitParamRequest,
            inbox: Inbox::new(MAX_SERVER_RESULTS_JSON),
            out,
            params,
            deadline: Some(now + idle),
            idle,
        }
    }

    pub fn handle_input(
        &mut self,
        bytes: &[u8],
        now: Instant,
    ) -> Result<Vec<ClientEvent>, Iperf3Error> {
        self.live()?;
        let r = self.inbox.push(bytes).and_then(|()| self.process(now));
        if r.is_err() {
            self.st = St::Failed;
        }
        r
    }

    fn process(&mut self, now: Instant) -> Result<Vec<ClientEvent>, Iperf3Error> {
        let mut events = Vec::new();
        loop {
            match self.st {
                St::Done | St::Failed => break,
                St::AwaitPeerResults => {
                    let Some(v) = self.inbox.json(MAX_SERVER_RESULTS_JSON)? else {
                        break;
                    };
                    events.push(ClientEvent::PeerResults(Box::new(Results::parse(&v)?)));
                    self.st = St::AwaitDisplay;
                    self.deadline = Some(now + self.idle);
                    continue;
                }
                _ => {}
            }
            let Some(b) = self.inbox.peek() else {
                break;
            };
            if b == state::SERVER_ERROR {
                // the two error numbers must be there before the error can be reported
                let Some(d) = self.inbox.raw::<9>() else {
                    break;
                };
                let code = i32::from_be_bytes([d[1], d[2], d[3], d[4]]);
                let os_errno = i32::from_be_bytes([d[5], d[6], d[7], d[8]]);
                return Err(Iperf3Error::ServerError { code, os_errno });
            }
            let _ = self.inbox.state();
            if let Some(e) = self.on_state(b, now)? {
                events.push(e);
            }
        }
        Ok(events)
    }

    fn on_state(&mut self, b: i8, now: Instant) -> Result<Option<ClientEvent>, Iperf3Error> {
        match (self.st, b) {
            (_, state::ACCESS_DENIED) => Err(Iperf3Error::AccessDenied),
            (_, state::SERVER_TERMINATE) => Err(Iperf3Error::ServerTerminated),
            (St::AwaitParamRequest, state::PARAM_EXCHANGE) => {
                self.out.push_back(encode(&self.params));
                self.st = St::AwaitCreate;
                self.deadline = Some(now + self.idle);
                Ok(None)
            }
            (St::AwaitCreate, state::CREATE_STREAMS) => {
                self.st = St::AwaitStart;
                self.deadline = Some(now + self.idle);
                Ok(Some(ClientEvent::CreateStreams))
            }
            (St::AwaitStart, state::TEST_START) => {
                self.st = St::Running;
                // quiet by design while the test runs; the driver ends it
                self.deadline = None;
                Ok(Some(ClientEvent::Start))
            }
            (St::Running | St::Ending, state::TEST_RUNNING) => Ok(None),
            (St::Ending, state::EXCHANGE_RESULTS) => {
                self.st = St::AwaitLocalResults;
                self.deadline = None;
                Ok(Some(ClientEvent::ExchangeResults))
            }
            (St::AwaitDisplay, state::DISPLAY_RESULTS) => {
                self.out.push_back(vec![state::IPERF_DONE as u8]);
                self.st = St::Done;
                self.deadline = None;
                Ok(None)
            }
            (st, got) => Err(Iperf3Error::UnexpectedState {
                got,
                state: st.name(),
            }),
        }
    }

    /// The driver decided the test is over (time, bytes, or a broken stream).
    pub fn end_test(&mut self, now: Instant) {
        if self.st == St::Running {
            self.out.push_back(vec![state::TEST_END as u8]);
            self.st = St::Ending;
            self.deadline = Some(now + self.idle);
        }
    }

    /// This side's results, after `ExchangeResults`.
    pub fn local_results(&mut self, results: &Results, now: Instant) {
        if self.st == St::AwaitLocalResults {
            self.out.push_back(encode(&results.to_json()));
            self.st = St::AwaitPeerResults;
            self.deadline = Some(now + self.idle);
        }
    }

    /// Gives up and tells the server, as iperf3 does on a signal.
    pub fn abort(&mut self) {
        if !matches!(self.st, St::Failed | St::Done | St::AwaitParamRequest) {
            self.out.push_back(vec![state::CLIENT_TERMINATE as u8]);
        }
        self.st = St::Failed;
    }

    fn live(&self) -> Result<(), Iperf3Error> {
        match self.st {
            St::Failed => Err(Iperf3Error::Local("session already failed".into())),
            _ => Ok(()),
        }
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

    pub fn handle_close(&mut self) -> Result<(), Iperf3Error> {
        if self.st == St::Done {
            return Ok(());
        }
        let what = self.st.name();
        self.st = St::Failed;
        Err(Iperf3Error::Closed(what))
    }

    /// True once `IPERF_DONE` is queued: flush, then close.
    pub fn is_finished(&self) -> bool {
        self.st == St::Done
    }

    pub fn is_failed(&self) -> bool {
        self.st == St::Failed
    }

    pub fn is_running(&self) -> bool {
        self.st == St::Running
    }
}
