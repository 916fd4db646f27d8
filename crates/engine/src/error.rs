//! Errors of the engine.

use wirerate_proto::ProtoError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: String,
        source: std::io::Error,
    },
    #[error("{what}: {source}")]
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
}

impl EngineError {
    pub fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> EngineError {
        move |source| EngineError::Io { what, source }
    }
}
