//! The login: SCRAM-SHA-256 (RFC 5802, RFC 7677), sans IO. The password never leaves the
//! client: the server keeps a salted verifier (StoredKey, ServerKey) and the client proves
//! it knows the password by a proof over both sides' nonces, which the server checks against
//! StoredKey; the server in turn proves it holds ServerKey. A fresh server nonce makes each
//! exchange unique, so a recorded one cannot be replayed; with TLS, the exchange is also
//! bound to the TLS session (channel binding `tls-exporter`, RFC 9266), so it cannot be
//! relayed through another connection.
//!
//! The messages are SCRAM's own text (`n,,n=user,r=...`), carried in the control frames
//! `login`, `login_challenge`, `login_proof` and `login_ok`.
//!
//! Passwords are taken as their UTF-8 bytes (no SASLprep normalization).

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

pub use crate::auth_error::{AuthError, MAX_ITERATIONS, MIN_ITERATIONS};

type HmacSha256 = Hmac<Sha256>;

/// The TLS exporter label of channel binding `tls-exporter` (RFC 9266), 32 bytes.
pub const CHANNEL_BINDING_LABEL: &[u8] = b"EXPORTER-Channel-Binding";
/// The TLS exporter label of the data streams' token when the control connection is TLS.
pub const DATA_TOKEN_LABEL: &[u8] = b"EXPORTER-wirerate-data-token";
/// The iteration count of new verifiers (`wirerate user add`).
pub const DEFAULT_ITERATIONS: u32 = 100_000;
/// The longest user name.
pub const MAX_USER: usize = 64;
/// Nonces, salts and SCRAM messages longer than this are refused.
const MAX_FIELD: usize = 512;

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    // HMAC takes keys of any length
    let mut m = <HmacSha256 as Mac>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    m.update(data);
    m.finalize().into_bytes().into()
}

fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

fn xor(a: &[u8; 32], b: &[u8; 32]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (o, (x, y)) in out.iter_mut().zip(a.iter().zip(b)) {
        *o = x ^ y;
    }
    out
}

/// Compares without an early exit.
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// SaltedPassword := Hi(Normalize(password), salt, i), PBKDF2 with HMAC-SHA-256. Normalize is
/// SASLprep (RFC 4013), so a password typed in another Unicode form logs in alike; a
/// password SASLprep refuses (it holds a prohibited character) is used as it is, as
/// PostgreSQL does.
pub fn salted_password(password: &str, salt: &[u8], iterations: u32) -> [u8; 32] {
    let prepared = stringprep::saslprep(password).unwrap_or(std::borrow::Cow::Borrowed(password));
    let mut out = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<Sha256>(prepared.as_bytes(), salt, iterations, &mut out);
    out
}

/// What the server keeps of a user: never the password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verifier {
    pub iterations: u32,
    pub salt: Vec<u8>,
    pub stored_key: [u8; 32],
    pub server_key: [u8; 32],
}

impl Verifier {
    /// The verifier of `password` with this salt and iteration count.
    pub fn derive(password: &str, salt: &[u8], iterations: u32) -> Verifier {
        let salted = salted_password(password, salt, iterations);
        Verifier::from_salted(&salted, salt, iterations)
    }

    fn from_salted(salted: &[u8; 32], salt: &[u8], iterations: u32) -> Verifier {
        let client_key = hmac(salted, b"Client Key");
        Verifier {
            iterations,
            salt: salt.to_vec(),
            stored_key: sha256(&client_key),
            server_key: hmac(salted, b"Server Key"),
        }
    }

    /// The users-file form: `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`
    /// (base64), as PostgreSQL writes it.
    pub fn encode(&self) -> String {
        format!(
            "SCRAM-SHA-256${}:{}${}:{}",
            self.iterations,
            B64.encode(&self.salt),
            B64.encode(self.stored_key),
            B64.encode(self.server_key)
        )
    }

    pub fn decode(s: &str) -> Result<Verifier, VerifierError> {
        use VerifierError as Bad;
        let rest = s.strip_prefix("SCRAM-SHA-256$").ok_or(Bad::Prefix)?;
        let (params, keys) = rest.split_once('$').ok_or(Bad::Shape)?;
        let (iter, salt) = params.split_once(':').ok_or(Bad::NoSalt)?;
        let (stored, server) = keys.split_once(':').ok_or(Bad::NoServerKey)?;
        let iterations: u32 = iter
            .parse()
            .map_err(|_| Bad::IterationCount(iter.to_string()))?;
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(AuthError::Iterations(iterations).into());
        }
        let salt = B64.decode(salt).map_err(Bad::SaltBase64)?;
        if salt.is_empty() || salt.len() > 64 {
            return Err(Bad::SaltLength);
        }
        let key = |what: &'static str, s: &str| -> Result<[u8; 32], VerifierError> {
            let v = B64
                .decode(s)
                .map_err(|source| Bad::KeyBase64 { what, source })?;
            v.try_into().map_err(|_| Bad::KeyLength(what))
        };
        Ok(Verifier {
            iterations,
            salt,
            stored_key: key("StoredKey", stored)?,
            server_key: key("ServerKey", server)?,
        })
    }
}

/// Why a stored verifier (`SCRAM-SHA-256$ITER:SALT$STOREDKEY:SERVERKEY`) cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifierError {
    #[error("a verifier starts with SCRAM-SHA-256$")]
    Prefix,
    #[error("a verifier is SCRAM-SHA-256$ITER:SALT$STOREDKEY:SERVERKEY")]
    Shape,
    #[error("no salt after the iterations")]
    NoSalt,
    #[error("no ServerKey after StoredKey")]
    NoServerKey,
    #[error("iteration count '{0}' is not a number")]
    IterationCount(String),
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error("salt is not base64: {0}")]
    SaltBase64(#[source] base64::DecodeError),
    #[error("the salt must be 1 to 64 bytes")]
    SaltLength,
    #[error("{what} is not base64: {source}")]
    KeyBase64 {
        what: &'static str,
        source: base64::DecodeError,
    },
    #[error("{0} is not 32 bytes (SHA-256)")]
    KeyLength(&'static str),
}

/// A user name wirerate accepts: 1 to 64 of letters, digits and `._@-`, so it needs no
/// quoting in the users file, the limits file or a log line.
pub fn check_user(name: &str) -> Result<(), AuthError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_USER
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._@-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(AuthError::BadUser(format!(
            "user name '{}' must be 1 to {MAX_USER} letters, digits, '.', '_', '@' or '-'",
            name.escape_debug()
        )))
    }
}

/// Channel binding as the client's GS2 header says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// `n`: the client does not bind (no TLS).
    None,
    /// `y`: the client could bind but thinks the server cannot.
    Unused,
    /// `p=tls-exporter`.
    TlsExporter,
}

impl Binding {
    fn header(self) -> &'static str {
        match self {
            Binding::None => "n,,",
            Binding::Unused => "y,,",
            Binding::TlsExporter => "p=tls-exporter,,",
        }
    }
}

/// `saslname` escaping: `,` and `=` become `=2C` and `=3D`.
fn escape_name(s: &str) -> String {
    s.replace('=', "=3D").replace(',', "=2C")
}

fn unescape_name(s: &str) -> Result<String, AuthError> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(AuthError::Malformed("bad escape in the user name".into())),
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A printable nonce: ASCII 0x21..0x7e without `,`.
fn check_nonce(n: &str) -> Result<(), AuthError> {
    if n.is_empty()
        || n.len() > MAX_FIELD
        || !n.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',')
    {
        return Err(AuthError::Malformed("bad nonce".into()));
    }
    Ok(())
}

/// Splits `a=...,b=...` into its attributes, in order.
fn attrs(s: &str) -> Result<Vec<(u8, &str)>, AuthError> {
    if s.len() > 4 * MAX_FIELD {
        return Err(AuthError::Malformed("message too long".into()));
    }
    s.split(',')
        .map(|part| {
            let b = part.as_bytes();
            if b.len() >= 2 && b[1] == b'=' && b[0].is_ascii_alphabetic() {
                Ok((b[0], &part[2..]))
            } else {
                Err(AuthError::Malformed(format!(
                    "attribute '{}'",
                    part.chars().take(20).collect::<String>().escape_debug()
                )))
            }
        })
        .collect()
}

fn want<'a>(a: &[(u8, &'a str)], i: usize, name: u8) -> Result<&'a str, AuthError> {
    match a.get(i) {
        Some((n, v)) if *n == name => Ok(v),
        _ => Err(AuthError::Malformed(format!(
            "attribute {} expected",
            char::from(name)
        ))),
    }
}

/// The client's first message, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    pub binding: Binding,
    pub user: String,
    pub nonce: String,
    /// `n=...,r=...`: the part that enters the signatures.
    pub bare: String,
}

impl ClientFirst {
    pub fn parse(s: &str) -> Result<ClientFirst, AuthError> {
        let (binding, rest) = if let Some(r) = s.strip_prefix("n,,") {
            (Binding::None, r)
        } else if let Some(r) = s.strip_prefix("y,,") {
            (Binding::Unused, r)
        } else if let Some(r) = s.strip_prefix("p=tls-exporter,,") {
            (Binding::TlsExporter, r)
        } else if s.starts_with("p=") {
            return Err(AuthError::ChannelBinding(
                "only tls-exporter is supported".into(),
            ));
        } else {
            return Err(AuthError::Malformed(
                "the GS2 header must be n,, y,, or p=tls-exporter,, (no authzid)".into(),
            ));
        };
        let a = attrs(rest)?;
        if a.len() != 2 {
            return Err(AuthError::Malformed(
                "client-first is n=USER,r=NONCE (no extensions)".into(),
            ));
        }
        let user = unescape_name(want(&a, 0, b'n')?)?;
        // the name reaches log lines: only names a users file can hold get that far
        check_user(&user)?;
        let nonce = want(&a, 1, b'r')?.to_string();
        check_nonce(&nonce)?;
        Ok(ClientFirst {
            binding,
            user,
            nonce,
            bare: rest.to_string(),
        })
    }
}

/// The server's first message (the challenge), parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFirst {
    pub nonce: String,
    pub salt: Vec<u8>,
    pub iterations: u32,
}

impl ServerFirst {
    pub fn parse(s: &str) -> Result<ServerFirst, AuthError> {
        let a = attrs(s)?;
        if a.first().is_some_and(|(n, _)| *n == b'e') {
            return Err(AuthError::ServerError(a[0].1.to_string()));
        }
        if a.len() != 3 {
            return Err(AuthError::Malformed("server-first is r=,s=,i=".into()));
        }
        let nonce = want(&a, 0, b'r')?.to_string();
        check_nonce(&nonce)?;
        let salt = B64
            .decode(want(&a, 1, b's')?)
            .map_err(|_| AuthError::Malformed("salt is not base64".into()))?;
        if salt.is_empty() || salt.len() > 64 {
            return Err(AuthError::Malformed("salt length".into()));
        }
        let iterations: u32 = want(&a, 2, b'i')?
            .parse()
            .map_err(|_| AuthError::Malformed("iteration count".into()))?;
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(AuthError::Iterations(iterations));
        }
        Ok(ServerFirst {
            nonce,
            salt,
            iterations,
        })
    }

    fn emit(&self) -> String {
        format!(
            "r={},s={},i={}",
            self.nonce,
            B64.encode(&self.salt),
            self.iterations
        )
    }
}

/// The client's final message, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFinal {
    /// The GS2 header and channel binding data, decoded from `c=`.
    pub binding: Vec<u8>,
    pub nonce: String,
    pub proof: [u8; 32],
    /// `c=...,r=...`: the part that enters the signatures.
    pub without_proof: String,
}

impl ClientFinal {
    pub fn parse(s: &str) -> Result<ClientFinal, AuthError> {
        let a = attrs(s)?;
        if a.len() != 3 {
            return Err(AuthError::Malformed("client-final is c=,r=,p=".into()));
        }
        let binding = B64
            .decode(want(&a, 0, b'c')?)
            .map_err(|_| AuthError::Malformed("channel binding is not base64".into()))?;
        let nonce = want(&a, 1, b'r')?.to_string();
        check_nonce(&nonce)?;
        let proof: [u8; 32] = B64
            .decode(want(&a, 2, b'p')?)
            .ok()
            .and_then(|v| v.try_into().ok())
            .ok_or_else(|| AuthError::Malformed("the proof is not 32 bytes of base64".into()))?;
        let cut = s.rfind(",p=").unwrap_or(s.len());
        Ok(ClientFinal {
            binding,
            nonce,
            proof,
            without_proof: s[..cut].to_string(),
        })
    }
}

/// The client's side of one login.
#[derive(Clone)]
pub struct ScramClient {
    user: String,
    password: String,
    nonce: String,
    binding: Binding,
    /// The TLS exporter's bytes, once the TLS session exists.
    cb_data: Vec<u8>,
    bare: String,
    /// The ServerSignature the server must send back.
    expect: Option<[u8; 32]>,
}

/// Without the password or the keys, so a session's debug output does not leak them.
impl std::fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ScramClient({}, {:?})", self.user, self.binding)
    }
}

impl ScramClient {
    /// `nonce`: printable, unpredictable (at least 18 random bytes' worth). `binding`:
    /// `TlsExporter` when the control connection is TLS, then call `set_channel_binding`
    /// before the challenge arrives.
    pub fn new(
        user: &str,
        password: &str,
        nonce: &str,
        binding: Binding,
    ) -> Result<ScramClient, AuthError> {
        if user.is_empty() || user.len() > MAX_USER {
            return Err(AuthError::BadUser("user name length".into()));
        }
        check_nonce(nonce)?;
        Ok(ScramClient {
            user: user.to_string(),
            password: password.to_string(),
            nonce: nonce.to_string(),
            binding,
            cb_data: Vec::new(),
            bare: format!("n={},r={nonce}", escape_name(user)),
            expect: None,
        })
    }

    pub fn user(&self) -> &str {
        &self.user
    }

    pub fn binding(&self) -> Binding {
        self.binding
    }

    pub fn set_channel_binding(&mut self, data: Vec<u8>) {
        self.cb_data = data;
    }

    /// client-first-message.
    pub fn first(&self) -> String {
        format!("{}{}", self.binding.header(), self.bare)
    }

    /// Answers the challenge with client-final-message (the key stretching happens here).
    pub fn answer(&mut self, server_first: &str) -> Result<String, AuthError> {
        let sf = ServerFirst::parse(server_first)?;
        if sf.nonce.len() <= self.nonce.len() || !sf.nonce.starts_with(&self.nonce) {
            return Err(AuthError::NonceMismatch);
        }
        let mut cb = self.binding.header().as_bytes().to_vec();
        if self.binding == Binding::TlsExporter {
            cb.extend_from_slice(&self.cb_data);
        }
        let without_proof = format!("c={},r={}", B64.encode(&cb), sf.nonce);
        let auth_message = format!("{},{},{}", self.bare, server_first, without_proof);
        let salted = salted_password(&self.password, &sf.salt, sf.iterations);
        let client_key = hmac(&salted, b"Client Key");
        let stored_key = sha256(&client_key);
        let signature = hmac(&stored_key, auth_message.as_bytes());
        let proof = xor(&client_key, &signature);
        let server_key = hmac(&salted, b"Server Key");
        self.expect = Some(hmac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", B64.encode(proof)))
    }

    /// Checks server-final-message: the server knew the verifier.
    pub fn verify(&self, server_final: &str) -> Result<(), AuthError> {
        let a = attrs(server_final)?;
        match a.first() {
            Some((b'e', why)) => Err(AuthError::ServerError(why.to_string())),
            Some((b'v', sig)) if a.len() == 1 => {
                let got = B64
                    .decode(sig)
                    .map_err(|_| AuthError::Malformed("server signature".into()))?;
                match &self.expect {
                    Some(want) if ct_eq(want, &got) => Ok(()),
                    _ => Err(AuthError::BadServerSignature),
                }
            }
            _ => Err(AuthError::Malformed("server-final is v=SIGNATURE".into())),
        }
    }
}

/// The server's side of one login, after the client's first message.
#[derive(Clone)]
pub struct ScramServer {
    first: ClientFirst,
    verifier: Verifier,
    server_first: String,
    nonce: String,
    /// The GS2 header and channel binding data the client must send back.
    cb_expect: Vec<u8>,
}

impl std::fmt::Debug for ScramServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ScramServer({})", self.first.user)
    }
}

impl ScramServer {
    /// Starts the exchange: `verifier` is the user's (or, for an unknown user, a made-up one
    /// that costs the same), `server_nonce` fresh and unpredictable, `cb_data` the TLS
    /// exporter's bytes when the connection is TLS (then the client must bind to it).
    pub fn start(
        first: ClientFirst,
        verifier: Verifier,
        server_nonce: &str,
        cb_data: Option<&[u8]>,
    ) -> Result<ScramServer, AuthError> {
        check_nonce(server_nonce)?;
        let mut cb_expect = first.binding.header().as_bytes().to_vec();
        match (first.binding, cb_data) {
            (Binding::TlsExporter, Some(d)) => cb_expect.extend_from_slice(d),
            (Binding::TlsExporter, None) => {
                return Err(AuthError::ChannelBinding(
                    "the client binds to TLS but the connection has none".into(),
                ))
            }
            (Binding::None | Binding::Unused, Some(_)) => {
                return Err(AuthError::ChannelBinding(
                    "the connection is TLS and the client does not bind to it".into(),
                ))
            }
            (Binding::None | Binding::Unused, None) => {}
        }
        let nonce = format!("{}{server_nonce}", first.nonce);
        let server_first = ServerFirst {
            nonce: nonce.clone(),
            salt: verifier.salt.clone(),
            iterations: verifier.iterations,
        }
        .emit();
        Ok(ScramServer {
            first,
            verifier,
            server_first,
            nonce,
            cb_expect,
        })
    }

    pub fn user(&self) -> &str {
        &self.first.user
    }

    /// server-first-message.
    pub fn challenge(&self) -> &str {
        &self.server_first
    }

    /// Checks client-final-message; on success, server-final-message.
    pub fn finish(&self, client_final: &str) -> Result<String, AuthError> {
        let cf = ClientFinal::parse(client_final)?;
        if cf.nonce != self.nonce {
            return Err(AuthError::Replayed);
        }
        if !ct_eq(&cf.binding, &self.cb_expect) {
            return Err(AuthError::ChannelBinding(
                "the client's binding is not this TLS session's".into(),
            ));
        }
        let auth_message = format!(
            "{},{},{}",
            self.first.bare, self.server_first, cf.without_proof
        );
        let signature = hmac(&self.verifier.stored_key, auth_message.as_bytes());
        let client_key = xor(&cf.proof, &signature);
        if !ct_eq(&sha256(&client_key), &self.verifier.stored_key) {
            return Err(AuthError::BadProof);
        }
        let server_sig = hmac(&self.verifier.server_key, auth_message.as_bytes());
        Ok(format!("v={}", B64.encode(server_sig)))
    }
}

/// A made-up verifier for a user who does not exist, derived from a server secret so it is
/// the same at every attempt (the salt does not give the user away) and costs the server
/// the same work as a real one.
pub fn fake_verifier(secret: &[u8], user: &str, iterations: u32) -> Verifier {
    let mut key = secret.to_vec();
    key.extend_from_slice(b"wirerate unknown user");
    let salt = hmac(&key, format!("salt {user}").as_bytes());
    Verifier {
        iterations,
        salt: salt[..16].to_vec(),
        stored_key: hmac(&key, format!("stored {user}").as_bytes()),
        server_key: hmac(&key, format!("server {user}").as_bytes()),
    }
}

/// Printable text of random bytes, for nonces.
pub fn nonce_text(random: &[u8]) -> String {
    B64.encode(random)
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
