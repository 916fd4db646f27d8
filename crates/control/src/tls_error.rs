//! Why TLS could not be set up: a key, certificate or revocation file, the configuration,
//! or the handshake. Each says what failed in the words the operator or user sees.

use std::path::PathBuf;

/// The cause of a file's failure (a PEM parse, a write, a verifier built from it).
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A fingerprint given by the user is not 64 hex digits.
    #[error("'{0}' is not a SHA-256 fingerprint (64 hex digits)")]
    NotFingerprint(String),
    /// A file (PEM or the state directory) could not be read, parsed or written.
    #[error("{}: {source}", path.display())]
    File { path: PathBuf, source: Cause },
    /// A PEM file holds none of what it should (`what` says what is missing).
    #[error("{}: {what}", path.display())]
    Empty { path: PathBuf, what: &'static str },
    #[error("the certificate file holds no certificate")]
    NoCertificate,
    /// rustls refused the protocol versions or the name asked for.
    #[error("{0}")]
    Config(#[source] Cause),
    #[error("the TLS key and certificate: {0}")]
    KeyAndCertificate(#[source] rustls::Error),
    #[error("the client certificate: {0}")]
    ClientCertificate(#[source] rustls::Error),
    #[error("making a TLS key: {0}")]
    MakeKey(#[source] rcgen::Error),
    #[error("TLS: {0}")]
    Connection(#[source] rustls::Error),
    #[error("TLS handshake timed out")]
    HandshakeTimedOut,
    #[error("TLS handshake: the peer closed")]
    HandshakeClosed,
    #[error("TLS handshake: {0}")]
    Handshake(#[source] std::io::Error),
    #[error("timed out")]
    ReadTimedOut,
    #[error("closed")]
    ReadClosed,
    #[error("{0}")]
    Read(#[source] std::io::Error),
    /// Keying material could not be exported from the session.
    #[error("{0}")]
    Export(#[source] rustls::Error),
}

impl TlsError {
    /// A file's failure, with its path.
    pub fn file<E>(path: &std::path::Path) -> impl FnOnce(E) -> TlsError + '_
    where
        E: Into<Cause>,
    {
        move |e| TlsError::File {
            path: path.to_path_buf(),
            source: e.into(),
        }
    }
}
