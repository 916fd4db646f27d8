//! The client's side of the login: the session it opens with (a SCRAM login when the config
//! has a user), its channel binding and data token once TLS is up, and the server's TLS
//! verdict on its certificate said in words. The server's side is `wirerate_server::login`.

use std::time::{Duration, Instant};

use wirerate_proto::auth::{CHANNEL_BINDING_LABEL, DATA_TOKEN_LABEL};

use crate::control::Control;

/// A user and password to log in with. The password stays on this side: the login proves
/// it is known (SCRAM-SHA-256).
#[derive(Clone)]
pub struct Login {
    pub user: String,
    pub password: String,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Login({})", self.user)
    }
}

/// A read from the server failed: with mutual TLS, the server's verdict on the client's
/// certificate arrives as a TLS alert after the handshake, and is said in words.
/// The alert is read from the error's type (TLS errors travel inside the io::Error), never
/// from its text.
pub fn read_error(e: std::io::Error) -> wirerate_engine::EngineError {
    use rustls::AlertDescription as Alert;
    let alert = match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(rustls::Error::AlertReceived(alert)) => Some(*alert),
        _ => None,
    };
    use wirerate_engine::{CertRefusal, EngineError};
    let refusal = match alert {
        Some(Alert::CertificateRequired) => CertRefusal::Required,
        Some(Alert::UnknownCA | Alert::BadCertificate) => CertRefusal::NotTrusted,
        Some(Alert::CertificateExpired) => CertRefusal::Expired,
        _ => return EngineError::io("reading from the server")(e),
    };
    EngineError::ClientCertificate(refusal)
}

/// The client's session: with a login when it has one (bound to TLS when `tls` is on).
pub fn client_session(
    spec: &wirerate_core::TestSpec,
    login: Option<&Login>,
    tls: bool,
    idle: Duration,
) -> Result<wirerate_proto::ClientSession, wirerate_engine::EngineError> {
    use wirerate_proto::auth::{nonce_text, Binding, ScramClient};
    use wirerate_proto::ClientSession;
    let now = Instant::now();
    let Some(login) = login else {
        return Ok(ClientSession::new(spec, now, idle));
    };
    let mut b = [0u8; 18];
    wirerate_engine::net::fill_random(&mut b)?;
    let binding = if tls {
        Binding::TlsExporter
    } else {
        Binding::None
    };
    let scram = ScramClient::new(&login.user, &login.password, &nonce_text(&b), binding)
        .map_err(|e| wirerate_engine::EngineError::Setup(e.to_string()))?;
    Ok(ClientSession::with_login(spec, now, idle, scram))
}

/// Once TLS is up: the login's channel binding and the data token, from the TLS session.
pub fn bind_to_tls(
    ctl: &Control,
    sess: &mut wirerate_proto::ClientSession,
) -> Result<(), wirerate_engine::EngineError> {
    let Some(t) = &ctl.tls else { return Ok(()) };
    let setup =
        |e: crate::tls::TlsError| wirerate_engine::EngineError::Setup(format!("TLS exporter: {e}"));
    let mut cb = [0u8; 32];
    t.export(CHANNEL_BINDING_LABEL, &mut cb).map_err(setup)?;
    sess.set_channel_binding(cb.to_vec());
    let mut token = [0u8; 16];
    t.export(DATA_TOKEN_LABEL, &mut token).map_err(setup)?;
    sess.set_data_token(token);
    Ok(())
}
