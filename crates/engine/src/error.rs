//! Errors of the engine.

use wirerate_proto::ProtoError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("cannot connect to {addr}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("cannot listen on {addr}")]
    Listen {
        addr: String,
        source: std::io::Error,
    },
    #[error("{what}")]
    Io {
        what: &'static str,
        source: std::io::Error,
    },
    #[error(transparent)]
    Proto(#[from] ProtoError),
    #[error(transparent)]
    Iperf3(#[from] wirerate_proto::iperf3::Iperf3Error),
    #[error("{0}")]
    Setup(String),
    /// The server's caps or the operator's rules refused the spec; the reason is theirs.
    #[error("refused: {0}")]
    Refused(String),
    /// The server's watchdog ended the running test (`wirerate_server::guard::Stop`).
    #[error(transparent)]
    Stopped(Box<dyn std::error::Error + Send + Sync>),
    /// A stream gave up for want of progress (its error begins with `stream::STALLED`).
    #[error("stalled: {0}")]
    StreamStalled(String),
    /// The caller's interrupt (Ctrl-C) came before the test started: nothing was measured.
    #[error("interrupted before the test started")]
    InterruptedBeforeStart,
    /// The peer's UDP port never answered the first datagrams; the text says whose.
    #[error("{0}")]
    UdpUnanswered(&'static str),
    /// The control connection ended before both sides' results were in.
    #[error("{0}")]
    ResultsMissing(&'static str),
    /// The peer closed the control connection; the text says when.
    #[error("{0}")]
    PeerClosed(&'static str),
    /// The server's TLS alert on the client's certificate, said in words.
    #[error("{0}")]
    ClientCertificate(CertRefusal),
    #[error(
        "cannot start the thread of stream {stream} ({}); the {started} stream thread(s) already started were stopped",
        flow.words()
    )]
    StreamThread {
        stream: u32,
        flow: wirerate_core::spec::Flow,
        started: usize,
        source: std::io::Error,
    },
}

/// Why a server with `--client-ca` refused this client's certificate (its TLS alert).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CertRefusal {
    #[error("the server requires a client certificate (--client-cert FILE --client-key FILE)")]
    Required,
    #[error("the server does not accept this client certificate (not signed by its CA)")]
    NotTrusted,
    #[error("the server refused this client certificate: it has expired")]
    Expired,
}

/// An error and its causes in one line, `context: cause: cause`, each said once (a library
/// error may repeat its own cause as its source).
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    for c in std::iter::successors(Some(e), |c| c.source()) {
        let text = c.to_string();
        if parts.last().is_some_and(|p| p.ends_with(&text)) || text.is_empty() {
            continue;
        }
        parts.push(text);
    }
    parts.join(": ")
}

impl EngineError {
    /// The error with its causes, in one line.
    pub fn full(&self) -> String {
        chain(self)
    }

    pub fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> EngineError {
        move |source| EngineError::Io { what, source }
    }
}
