//! Why a login failed, and the iteration bounds its messages name: the error every control
//! frame can carry (`ProtoError::Login`), kept apart from the SCRAM exchange itself
//! (`crate::auth`, behind the `login` feature) so that a data plane that only parses data
//! frames needs no hash or key-derivation crate.

/// SCRAM's minimum iteration count.
pub const MIN_ITERATIONS: u32 = 4096;
/// Above this a server's challenge is refused: it would make the client spin for minutes.
pub const MAX_ITERATIONS: u32 = 10_000_000;
/// Why a login failed. The client is told only "login failed"; the server's log says which.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("malformed login message: {0}")]
    Malformed(String),
    #[error("the server's nonce does not extend the client's")]
    NonceMismatch,
    #[error("the nonce is not the one of this exchange (a replayed login?)")]
    Replayed,
    #[error("channel binding: {0}")]
    ChannelBinding(String),
    #[error("wrong password or unknown user")]
    BadProof,
    #[error("the server could not prove it knows the user's verifier")]
    BadServerSignature,
    #[error("the server refused the login: {0}")]
    ServerError(String),
    #[error("iteration count {0} is out of range ({MIN_ITERATIONS} to {MAX_ITERATIONS})")]
    Iterations(u32),
    #[error("{0}")]
    BadUser(String),
}
