//! The login's part of the session state machines (SCRAM-SHA-256, `auth.rs`): a server that
//! requires it, a client that logs in, and the data token both sides derive from TLS.

use std::time::{Duration, Instant};

use wirerate_core::TestSpec;

use super::{ClientSession, ServerSession, ServerState, LOGIN_FAILED};
use crate::auth::{AuthError, ScramClient, ScramServer, Verifier};
use crate::frame::{encode, ProtoError};
use crate::msg::Msg;
use crate::Token;

impl ServerSession {
    /// Every client must log in before its spec is heard.
    pub fn require_login(mut self) -> ServerSession {
        self.login_required = true;
        self.c.state = ServerState::AwaitLogin;
        self
    }

    /// The login of a third-party request inside TLS (`crate::agent`): the answer starts
    /// with an agent preamble and no welcome, and what follows the login is the agent's
    /// exchange, not a test's.
    pub fn for_agent(mut self) -> ServerSession {
        self.agent = true;
        self.c.out.clear();
        self.c.out.push_back(
            crate::frame::Preamble::new(crate::frame::Channel::Agent)
                .emit()
                .to_vec(),
        );
        self
    }

    /// The data token is one both sides derive from the TLS session: `accepted` does not
    /// carry it.
    pub fn derived_token(mut self) -> ServerSession {
        self.derived_token = true;
        self
    }

    /// Answers the client's login with a challenge: `verifier` is the user's (or a made-up
    /// one), `nonce` fresh and unpredictable, `channel_binding` the TLS exporter's bytes when
    /// the connection is TLS.
    pub fn challenge(
        &mut self,
        verifier: Verifier,
        nonce: &str,
        channel_binding: Option<&[u8]>,
    ) -> Result<(), ProtoError> {
        let first = match (self.c.state, self.login.take()) {
            (ServerState::LoginLookup, Some(f)) => *f,
            _ => {
                return Err(ProtoError::Unexpected {
                    got: "challenge",
                    state: self.c.state.name(),
                })
            }
        };
        match ScramServer::start(first, verifier, nonce, channel_binding) {
            Ok(sc) => {
                self.c.out.push_back(encode(&Msg::LoginChallenge {
                    scram: sc.challenge().to_string(),
                }));
                self.scram = Some(Box::new(sc));
                self.c.state = ServerState::AwaitProof;
                Ok(())
            }
            Err(e) => Err(self.login_failed(e)),
        }
    }

    /// Tells the client its login failed, without saying why (the error value does).
    pub(super) fn login_failed(&mut self, e: AuthError) -> ProtoError {
        if !self.told {
            self.c.out.push_back(encode(&Msg::Refused {
                reason: LOGIN_FAILED.to_string(),
            }));
        }
        self.told = true;
        self.c.state = ServerState::Failed;
        ProtoError::Login(e)
    }
}

impl ClientSession {
    /// Like `new`, but logs in first: the spec goes once the server has proved it knows
    /// the user's verifier.
    pub fn with_login(
        spec: &TestSpec,
        now: Instant,
        idle: Duration,
        login: ScramClient,
    ) -> ClientSession {
        let mut s = ClientSession::new(spec, now, idle);
        s.c.out.pop_back();
        s.c.out.push_back(encode(&Msg::Login {
            scram: login.first(),
        }));
        s.login = Some(Box::new(login));
        s
    }

    /// The TLS session's channel binding bytes, before the server's challenge is handled.
    pub fn set_channel_binding(&mut self, data: Vec<u8>) {
        if let Some(l) = self.login.as_mut() {
            l.set_channel_binding(data);
        }
    }

    /// The data token both sides derive from the TLS session: used when `accepted` carries
    /// none.
    pub fn set_data_token(&mut self, token: Token) {
        self.data_token = Some(token);
    }
}
