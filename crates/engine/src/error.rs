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
