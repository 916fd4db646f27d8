//! The server's side of a control connection before it may claim the test slot: the
//! session is made (with the data token derived from TLS when the connection has it), and,
//! when the server has users, the client logs in. A login runs while the connection still
//! counts as pending, so unauthenticated clients are held to the per-address limit and never
//! hold the slot.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use wirerate_proto::auth::{CHANNEL_BINDING_LABEL, DATA_TOKEN_LABEL};
use wirerate_proto::{ProtoError, ServerEvent, ServerSession, Token};

use crate::control::{Control, Input};
use crate::logline::{Decision, Event, Kind};
use crate::net::random_token;
use crate::server::Shared;

/// A control connection ready to claim the slot.
pub(crate) struct Prepared {
    pub(crate) sess: ServerSession,
    pub(crate) token: Token,
    /// The user the client logged in as.
    pub(crate) user: Option<String>,
}

/// The data token: from the TLS session when there is one (both sides derive it, and it
/// never crosses the wire), else random and sent in `accepted`.
fn data_token(ctl: &Control) -> Result<(Token, bool), String> {
    match &ctl.tls {
        Some(t) => {
            let mut token = [0u8; 16];
            t.export(DATA_TOKEN_LABEL, &mut token)
                .map_err(|e| format!("TLS exporter: {e}"))?;
            Ok((token, true))
        }
        None => random_token().map(|t| (t, false)).map_err(|e| e.full()),
    }
}

/// Makes the session and runs the login, if the server has users. Errors are logged here.
pub(crate) fn prepare(
    ctl: &mut Control,
    shared: &Shared,
    who: &str,
    ip: Option<IpAddr>,
) -> Option<Prepared> {
    let (token, derived) = match data_token(ctl) {
        Ok(t) => t,
        Err(e) => {
            shared.log(format_args!("{e}"));
            return None;
        }
    };
    let mut sess = ServerSession::new(Instant::now(), shared.cfg.idle, token, &shared.cfg.name);
    if derived {
        sess = sess.derived_token();
    }
    let Some(db) = shared.cfg.users.as_ref() else {
        return Some(Prepared {
            sess,
            token,
            user: None,
        });
    };
    sess = sess.require_login();
    let refuse = |ctl: &mut Control, sess: &mut ServerSession, user: Option<String>, why: &str| {
        let _ = ctl.flush(|| sess.poll_transmit(), Duration::from_secs(1));
        let mut ev = Event::new(Kind::Connection, Some(who.into()))
            .decided(Decision::Refused, Some(why.to_string()));
        ev.user = user.clone();
        let user = user.map_or_else(String::new, |u| format!(" as '{u}'"));
        shared.log_rejected(ip, ev, format_args!("refused {who}{user}: {why}"));
    };
    if let Some(wait) = db.blocked(ip, Instant::now()) {
        let why = format!(
            "too many failed logins from this address; retry in {:.0} s",
            wait.as_secs_f64().ceil()
        );
        sess.refuse(&why);
        refuse(ctl, &mut sess, None, &why);
        return None;
    }
    // the client has as long as any silent peer to finish; the per-address pending limit
    // bounds how many may try at once
    let deadline = Instant::now() + shared.cfg.idle;
    let mut user: Option<(String, bool)> = None;
    loop {
        if let Err(e) = ctl.flush(|| sess.poll_transmit(), shared.cfg.idle) {
            let why = format!("login: writing to the client: {e}");
            refuse(ctl, &mut sess, user.map(|u| u.0), &why);
            return None;
        }
        let now = Instant::now();
        if now >= deadline {
            sess.refuse("the login timed out");
            refuse(ctl, &mut sess, user.map(|u| u.0), "the login timed out");
            return None;
        }
        let got = match ctl.read(Duration::from_millis(100).min(deadline - now)) {
            Ok(Input::Bytes(n)) => sess.handle_input(ctl.bytes(n), Instant::now()),
            Ok(Input::Closed) => sess.handle_close().map(|()| Vec::new()),
            Ok(Input::Nothing) => Ok(Vec::new()),
            Err(e) => Err(ProtoError::BadMessage(e.to_string())),
        };
        let events = match got {
            Ok(ev) => ev,
            Err(e) => {
                let name = user.as_ref().map(|u| u.0.clone());
                let why = match (&e, &user) {
                    (ProtoError::Login(_), Some((_, false))) => {
                        db.failed(ip, Instant::now());
                        "login failed: unknown user".to_string()
                    }
                    (ProtoError::Login(wirerate_proto::auth::AuthError::BadProof), _) => {
                        db.failed(ip, Instant::now());
                        "login failed: wrong password".to_string()
                    }
                    (ProtoError::Login(inner), _) => {
                        db.failed(ip, Instant::now());
                        format!("login failed: {inner}")
                    }
                    _ => format!("before login: {e}"),
                };
                refuse(ctl, &mut sess, name, &why);
                return None;
            }
        };
        for ev in events {
            match ev {
                ServerEvent::Login(name) => {
                    let (verifier, known) = db.lookup(&name);
                    user = Some((name, known));
                    let cb = match &ctl.tls {
                        Some(t) => {
                            let mut b = [0u8; 32];
                            match t.export(CHANNEL_BINDING_LABEL, &mut b) {
                                Ok(()) => Some(b),
                                Err(e) => {
                                    shared.log(format_args!("TLS exporter: {e}"));
                                    return None;
                                }
                            }
                        }
                        None => None,
                    };
                    let nonce = match db.nonce() {
                        Ok(n) => n,
                        Err(e) => {
                            shared.log(format_args!("{e}"));
                            return None;
                        }
                    };
                    if let Err(e) = sess.challenge(verifier, &nonce, cb.as_ref().map(|b| &b[..])) {
                        db.failed(ip, Instant::now());
                        let why = format!("login failed: {e}");
                        refuse(ctl, &mut sess, user.map(|u| u.0), &why);
                        return None;
                    }
                }
                ServerEvent::LoggedIn(name) => {
                    return Some(Prepared {
                        sess,
                        token,
                        user: Some(name),
                    });
                }
                // the session lets nothing else through before the login
                _ => {}
            }
        }
    }
}

/// The client's session: with a login when the config has one (bound to TLS when on).
pub(crate) fn client_session(
    spec: &wirerate_core::TestSpec,
    cfg: &crate::client::ClientConfig,
) -> Result<wirerate_proto::ClientSession, crate::error::EngineError> {
    use wirerate_proto::auth::{nonce_text, Binding, ScramClient};
    use wirerate_proto::ClientSession;
    let now = Instant::now();
    let Some(login) = &cfg.login else {
        return Ok(ClientSession::new(spec, now, cfg.idle));
    };
    let mut b = [0u8; 18];
    crate::net::fill_random(&mut b)?;
    let binding = if cfg.tls.is_some() {
        Binding::TlsExporter
    } else {
        Binding::None
    };
    let scram = ScramClient::new(&login.user, &login.password, &nonce_text(&b), binding)
        .map_err(|e| crate::error::EngineError::Setup(e.to_string()))?;
    Ok(ClientSession::with_login(spec, now, cfg.idle, scram))
}

/// Once TLS is up: the login's channel binding and the data token, from the TLS session.
pub(crate) fn bind_to_tls(
    ctl: &Control,
    sess: &mut wirerate_proto::ClientSession,
) -> Result<(), crate::error::EngineError> {
    let Some(t) = &ctl.tls else { return Ok(()) };
    let setup = |e: String| crate::error::EngineError::Setup(format!("TLS exporter: {e}"));
    let mut cb = [0u8; 32];
    t.export(CHANNEL_BINDING_LABEL, &mut cb).map_err(setup)?;
    sess.set_channel_binding(cb.to_vec());
    let mut token = [0u8; 16];
    t.export(DATA_TOKEN_LABEL, &mut token).map_err(setup)?;
    sess.set_data_token(token);
    Ok(())
}
