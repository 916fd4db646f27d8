//! TLS 1.3 on the control connection (rustls). The server has one key and a self-signed
//! certificate, made on first start and kept in its state directory, or the operator's own;
//! clients know it by the SHA-256 fingerprint of the certificate, pinned (`--server-
//! fingerprint`) or remembered on first use, as SSH does. No certificate authority and no
//! host name are involved: the fingerprint is the server's identity.
//!
//! Data streams stay plain TCP and UDP: encrypting them would measure the cipher.

use std::io::{self, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::{Digest, Sha256};

pub use crate::tls_error::TlsError;

/// The name in the self-signed certificate and the one clients ask for; never checked.
const NAME: &str = "wirerate";

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The fingerprint of a certificate: SHA-256 of its DER bytes, in lowercase hex.
pub fn fingerprint(cert: &[u8]) -> String {
    Sha256::digest(cert)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A fingerprint as a user may write it: hex with or without colons, any case, and an
/// optional `SHA256:` in front.
pub fn normalize_fingerprint(s: &str) -> Result<String, TlsError> {
    let t = s.trim();
    let t = t.strip_prefix("SHA256:").unwrap_or(t);
    let hex: String = t.chars().filter(|c| *c != ':').collect::<String>();
    if hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(hex.to_ascii_lowercase())
    } else {
        Err(TlsError::NotFingerprint(s.to_string()))
    }
}

/// The server's side: its TLS configuration and the fingerprint clients will see.
#[derive(Clone)]
pub struct ServerTls {
    pub config: Arc<rustls::ServerConfig>,
    pub fingerprint: String,
    /// Clients must present a certificate signed by `--client-ca`; its CN is the user.
    pub client_certs: bool,
    certs: Vec<CertificateDer<'static>>,
    key: Arc<PrivateKeyDer<'static>>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ServerTls({})", self.fingerprint)
    }
}

impl ServerTls {
    /// The operator's certificate (PEM, the server's first) and key (PEM).
    pub fn from_files(cert: &Path, key: &Path) -> Result<ServerTls, TlsError> {
        let certs = CertificateDer::pem_file_iter(cert)
            .map_err(TlsError::file(cert))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(TlsError::file(cert))?;
        let key = PrivateKeyDer::from_pem_file(key).map_err(TlsError::file(key))?;
        ServerTls::new(certs, key)
    }

    /// The key and certificate in `dir` (`tls-key.pem`, `tls-cert.pem`), made there first
    /// when absent. The key file is readable by its owner only.
    pub fn load_or_create(dir: &Path) -> Result<ServerTls, TlsError> {
        let (cert, key) = (dir.join("tls-cert.pem"), dir.join("tls-key.pem"));
        if !cert.exists() || !key.exists() {
            create(dir, &cert, &key)?;
        }
        ServerTls::from_files(&cert, &key)
    }

    fn new(
        certs: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> Result<ServerTls, TlsError> {
        let leaf = certs.first().ok_or(TlsError::NoCertificate)?;
        let fingerprint = fingerprint(leaf);
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| TlsError::Config(e.into()))?
            .with_no_client_auth()
            .with_single_cert(certs.clone(), key.clone_key())
            .map_err(TlsError::KeyAndCertificate)?;
        Ok(ServerTls {
            config: Arc::new(config),
            fingerprint,
            client_certs: false,
            certs,
            key: Arc::new(key),
        })
    }

    /// A secret of this server's that lasts as long as its TLS key: SHA-256 of the key and
    /// `label`. Unknown users' made-up salts derive from it, so they stay the same across
    /// restarts (a salt that changed would tell a prober the user does not exist).
    pub fn lasting_secret(&self, label: &[u8]) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(b"wirerate server secret\0");
        h.update(label);
        h.update(self.key.secret_der());
        h.finalize().into()
    }

    /// Requires of every client a certificate signed by one of the CA certificates in
    /// `ca` (PEM): mutual TLS. The certificate's subject CN is the client's user. A
    /// certificate that a revocation list of `crls` (PEM, signed by the CA) names is refused.
    pub fn with_client_ca(mut self, ca: &Path, crls: &[PathBuf]) -> Result<ServerTls, TlsError> {
        use rustls::pki_types::CertificateRevocationListDer;
        let mut revoked = Vec::new();
        for path in crls {
            let found = CertificateRevocationListDer::pem_file_iter(path)
                .map_err(TlsError::file(path))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(TlsError::file(path))?;
            if found.is_empty() {
                return Err(TlsError::Empty {
                    path: path.clone(),
                    what: "no certificate revocation list in it",
                });
            }
            revoked.extend(found);
        }
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(ca).map_err(TlsError::file(ca))? {
            let c = c.map_err(TlsError::file(ca))?;
            roots.add(c).map_err(TlsError::file(ca))?;
        }
        if roots.is_empty() {
            return Err(TlsError::Empty {
                path: ca.to_path_buf(),
                what: "no CA certificate",
            });
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider(),
        )
        // a client without a certificate is told so in the control protocol, in words
        .allow_unauthenticated()
        .with_crls(revoked)
        .build()
        .map_err(TlsError::file(ca))?;
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| TlsError::Config(e.into()))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(self.certs.clone(), self.key.clone_key())
            .map_err(TlsError::KeyAndCertificate)?;
        self.config = Arc::new(config);
        self.client_certs = true;
        Ok(self)
    }
}

fn create(dir: &Path, cert: &Path, key: &Path) -> Result<(), TlsError> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(TlsError::file(dir))?;
    let made =
        rcgen::generate_simple_self_signed(vec![NAME.to_string()]).map_err(TlsError::MakeKey)?;
    let write = |path: &Path, mode: u32, text: &str| {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(TlsError::file(path))
    };
    write(key, 0o600, &made.key_pair.serialize_pem())?;
    write(cert, 0o644, &made.cert.pem())
}

/// The default state directory: `$XDG_STATE_HOME/wirerate`, else `~/.local/state/wirerate`.
pub fn default_state_dir() -> Option<PathBuf> {
    match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(d) => Some(PathBuf::from(d).join("wirerate")),
        None => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state/wirerate")),
    }
}

/// Completes the server's side of a handshake by `deadline`.
pub fn accept(sock: &mut TcpStream, tls: &ServerTls, deadline: Instant) -> Result<Tls, TlsError> {
    let conn = rustls::ServerConnection::new(tls.config.clone()).map_err(TlsError::Connection)?;
    let mut conn = Tls::Server(conn);
    handshake(sock, &mut conn, deadline)?;
    Ok(conn)
}

/// Called with the fingerprint of a server met for the first time (no pin): it records it,
/// or says why it cannot, which ends the handshake.
pub type FirstUse = Arc<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// The client's side: which server key it will accept.
#[derive(Clone, Default)]
pub struct ClientTls {
    /// The fingerprint the server must have, and where the pin comes from ("given with
    /// --server-fingerprint"); None accepts any key and tells `first_use`.
    pub pin: Option<(String, String)>,
    pub first_use: Option<FirstUse>,
    /// The fingerprint the server showed, once it has.
    pub seen: Arc<Mutex<Option<String>>>,
    /// The client's certificate chain and key, for a server that asks for one.
    pub client_cert: Option<Arc<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClientTls(pin {:?})", self.pin)
    }
}

impl ClientTls {
    pub fn connect(&self, sock: &mut TcpStream, deadline: Instant) -> Result<Tls, TlsError> {
        let verifier = Pinned {
            pin: self.pin.clone(),
            first_use: self.first_use.clone(),
            seen: self.seen.clone(),
            provider: provider(),
        };
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| TlsError::Config(e.into()))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier));
        let config = match &self.client_cert {
            Some(c) => builder
                .with_client_auth_cert(c.0.clone(), c.1.clone_key())
                .map_err(TlsError::ClientCertificate)?,
            None => builder.with_no_client_auth(),
        };
        let name = ServerName::try_from(NAME).map_err(|e| TlsError::Config(e.into()))?;
        let conn =
            rustls::ClientConnection::new(Arc::new(config), name).map_err(TlsError::Connection)?;
        let mut conn = Tls::Client(conn);
        handshake(sock, &mut conn, deadline)?;
        Ok(conn)
    }

    /// Presents this certificate (PEM, the client's first) and key (PEM) to a server that
    /// asks for one.
    pub fn with_client_cert(mut self, cert: &Path, key: &Path) -> Result<ClientTls, TlsError> {
        let certs = CertificateDer::pem_file_iter(cert)
            .map_err(TlsError::file(cert))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(TlsError::file(cert))?;
        if certs.is_empty() {
            return Err(TlsError::Empty {
                path: cert.to_path_buf(),
                what: "no certificate",
            });
        }
        let key = PrivateKeyDer::from_pem_file(key).map_err(TlsError::file(key))?;
        self.client_cert = Some(Arc::new((certs, key)));
        Ok(self)
    }

    pub fn seen(&self) -> Option<String> {
        self.seen.lock().ok().and_then(|s| s.clone())
    }
}

/// Accepts the server's certificate by its fingerprint alone, and checks that the server
/// holds its key (the handshake signature) as any TLS client does.
struct Pinned {
    pin: Option<(String, String)>,
    first_use: Option<FirstUse>,
    seen: Arc<Mutex<Option<String>>>,
    provider: Arc<CryptoProvider>,
}

impl std::fmt::Debug for Pinned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pinned({:?})", self.pin)
    }
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let got = fingerprint(end_entity);
        if let Ok(mut s) = self.seen.lock() {
            *s = Some(got.clone());
        }
        match (&self.pin, &self.first_use) {
            (Some((want, _)), _) if *want == got => Ok(ServerCertVerified::assertion()),
            (Some((want, from)), _) => Err(rustls::Error::General(format!(
                "refused: the server's key is SHA256:{got}, not SHA256:{want}, {from}"
            ))),
            (None, Some(record)) => record(&got)
                .map(|()| ServerCertVerified::assertion())
                .map_err(rustls::Error::General),
            (None, None) => Ok(ServerCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        // only TLS 1.3 is offered
        Err(rustls::Error::PeerIncompatible(
            rustls::PeerIncompatible::Tls12NotOffered,
        ))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A control connection's TLS state, either side.
pub enum Tls {
    Server(rustls::ServerConnection),
    Client(rustls::ClientConnection),
}

impl Tls {
    fn is_handshaking(&self) -> bool {
        match self {
            Tls::Server(c) => c.is_handshaking(),
            Tls::Client(c) => c.is_handshaking(),
        }
    }

    /// Whether TLS holds nothing for the reader (no plaintext, no close) and nothing to
    /// send: what has come in is processed first, so a record already read is counted.
    pub fn quiet(&mut self) -> bool {
        fn quiet<D: rustls::SideData>(c: &mut rustls::ConnectionCommon<D>) -> bool {
            match c.process_new_packets() {
                Ok(s) => {
                    s.plaintext_bytes_to_read() == 0
                        && !s.peer_has_closed()
                        && s.tls_bytes_to_write() == 0
                }
                Err(_) => false,
            }
        }
        match self {
            Tls::Server(c) => quiet(c),
            Tls::Client(c) => quiet(c),
        }
    }

    /// Reads plaintext through TLS over `sock`, waiting at most the socket's read timeout
    /// in all (not per read).
    pub fn read(&mut self, sock: &mut TcpStream, buf: &mut [u8]) -> io::Result<usize> {
        let wait = sock
            .read_timeout()?
            .unwrap_or(std::time::Duration::from_secs(86_400));
        self.read_by(sock, buf, Instant::now() + wait)
    }

    /// Reads plaintext through TLS over `sock` by `deadline` (TimedOut after it).
    pub fn read_by(
        &mut self,
        sock: &mut TcpStream,
        buf: &mut [u8],
        deadline: Instant,
    ) -> io::Result<usize> {
        match self {
            Tls::Server(c) => read_by(c, sock, buf, deadline),
            Tls::Client(c) => read_by(c, sock, buf, deadline),
        }
    }

    /// Reads exactly `buf.len()` bytes of plaintext by `deadline`; TLS keeps what follows.
    pub fn read_exact_by(
        &mut self,
        sock: &mut TcpStream,
        buf: &mut [u8],
        deadline: Instant,
    ) -> Result<(), TlsError> {
        let mut got = 0;
        while got < buf.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(TlsError::ReadTimedOut);
            }
            match self.read_by(sock, &mut buf[got..], deadline) {
                Ok(0) => return Err(TlsError::ReadClosed),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(TlsError::Read(e)),
            }
        }
        Ok(())
    }

    /// Writes all of `data` through TLS over `sock`, and what TLS has queued.
    pub fn write_all(&mut self, sock: &mut TcpStream, data: &[u8]) -> io::Result<()> {
        match self {
            Tls::Server(c) => {
                let mut s = rustls::Stream::new(c, sock);
                s.write_all(data)?;
                s.flush()
            }
            Tls::Client(c) => {
                let mut s = rustls::Stream::new(c, sock);
                s.write_all(data)?;
                s.flush()
            }
        }
    }

    /// Whether the client presented a certificate (checked by the handshake).
    pub fn has_peer_cert(&self) -> bool {
        match self {
            Tls::Server(c) => c.peer_certificates().is_some_and(|c| !c.is_empty()),
            Tls::Client(_) => false,
        }
    }

    /// The subject CN of the certificate the client presented (mutual TLS), if any.
    pub fn peer_cn(&self) -> Option<String> {
        match self {
            Tls::Server(c) => c
                .peer_certificates()
                .and_then(|certs| certs.first())
                .and_then(|leaf| subject_cn(leaf)),
            Tls::Client(_) => None,
        }
    }

    /// Writes all of `data` through TLS by `deadline`, taking in (and decrypting into
    /// `stash`) what the peer sends whenever the socket is full, so two ends that write
    /// large frames at once do not wait on each other. `closed` is set when the peer closed.
    pub fn write_all_reading(
        &mut self,
        sock: &TcpStream,
        data: &[u8],
        deadline: Instant,
        stash: &mut std::collections::VecDeque<u8>,
        closed: &mut bool,
    ) -> io::Result<()> {
        match self {
            Tls::Server(c) => write_reading(c, sock, data, deadline, stash, closed),
            Tls::Client(c) => write_reading(c, sock, data, deadline, stash, closed),
        }
    }

    /// Keying material both ends derive from this session alone (RFC 8446 §7.5).
    pub fn export(&self, label: &[u8], out: &mut [u8]) -> Result<(), TlsError> {
        let r = match self {
            Tls::Server(c) => c.export_keying_material(&mut *out, label, None).map(|_| ()),
            Tls::Client(c) => c.export_keying_material(&mut *out, label, None).map(|_| ()),
        };
        r.map_err(TlsError::Export)
    }
}

/// One DER element: its tag, its contents, and what follows it. None when malformed.
fn der(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = b.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |a, &x| a << 8 | usize::from(x));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// The subject's common name (OID 2.5.4.3) of a DER certificate, as UTF-8 or printable text.
pub fn subject_cn(cert: &[u8]) -> Option<String> {
    const SEQ: u8 = 0x30;
    let (SEQ, cert, _) = der(cert)? else {
        return None;
    };
    let (SEQ, tbs, _) = der(cert)? else {
        return None;
    };
    let mut rest = tbs;
    // [0] version, if present
    if rest.first() == Some(&0xa0) {
        rest = der(rest)?.2;
    }
    // serial, signature algorithm, issuer, validity; then the subject
    for _ in 0..4 {
        rest = der(rest)?.2;
    }
    let (SEQ, mut name, _) = der(rest)? else {
        return None;
    };
    while !name.is_empty() {
        let (_, set, next) = der(name)?;
        name = next;
        let mut set = set;
        while !set.is_empty() {
            let (_, atv, next) = der(set)?;
            set = next;
            let (0x06, oid, value) = der(atv)? else {
                continue;
            };
            if oid == [0x55, 0x04, 0x03] {
                let (tag, text, _) = der(value)?;
                // UTF8String, PrintableString, IA5String
                if matches!(tag, 0x0c | 0x13 | 0x16) {
                    return String::from_utf8(text.to_vec()).ok();
                }
            }
        }
    }
    None
}

// reads and writes with deadlines, the handshake among them
use io_by::{handshake, read_by, write_reading};

#[path = "tls_io.rs"]
mod io_by;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_common_name_is_read_from_a_certificate() {
        let mut p = rcgen::CertificateParams::new(vec!["x".into()]).unwrap();
        p.distinguished_name
            .push(rcgen::DnType::OrganizationName, "wirerate tests");
        p.distinguished_name
            .push(rcgen::DnType::CommonName, "alice");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        assert_eq!(subject_cn(cert.der()).as_deref(), Some("alice"));
        // no CN, and junk: None, no panic
        let p = rcgen::CertificateParams::new(vec!["x".into()]).unwrap();
        let mut p = p;
        p.distinguished_name = rcgen::DistinguishedName::new();
        let cert = p.self_signed(&key).unwrap();
        assert_eq!(subject_cn(cert.der()), None);
        let der = cert.der().to_vec();
        for cut in 0..der.len() {
            let _ = subject_cn(&der[..cut]);
        }
        assert_eq!(subject_cn(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
    }

    #[test]
    fn fingerprints_are_read_in_the_usual_spellings() {
        let fp = fingerprint(b"x");
        assert_eq!(fp.len(), 64);
        let colons: Vec<String> = fp
            .as_bytes()
            .chunks(2)
            .map(|c| String::from_utf8_lossy(c).to_uppercase())
            .collect();
        assert_eq!(normalize_fingerprint(&colons.join(":")).unwrap(), fp);
        assert_eq!(normalize_fingerprint(&format!("SHA256:{fp}")).unwrap(), fp);
        assert!(normalize_fingerprint("abcd").is_err());
        assert!(normalize_fingerprint(&"g".repeat(64)).is_err());
    }

    #[test]
    fn a_made_key_is_kept_and_found_again() {
        let dir = std::env::temp_dir().join(format!("wr-tls-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let a = ServerTls::load_or_create(&dir).unwrap();
        let b = ServerTls::load_or_create(&dir).unwrap();
        assert_eq!(a.fingerprint, b.fingerprint);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("tls-key.pem"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The cost of a handshake to the server: `cargo test -p wirerate-control --release
    /// handshakes_per_second -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn handshakes_per_second() {
        let dir = std::env::temp_dir().join(format!("wr-tls-rate-{}", std::process::id()));
        let srv = ServerTls::load_or_create(&dir).unwrap();
        let fp = srv.fingerprint.clone();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        const N: u32 = 300;
        let t = std::thread::spawn(move || {
            for _ in 0..N {
                let (mut s, _) = l.accept().unwrap();
                let deadline = Instant::now() + std::time::Duration::from_secs(5);
                accept(&mut s, &srv, deadline).unwrap();
            }
        });
        let client = ClientTls {
            pin: Some((fp, "test".into())),
            ..Default::default()
        };
        let start = Instant::now();
        for _ in 0..N {
            let mut s = TcpStream::connect(addr).unwrap();
            let deadline = Instant::now() + std::time::Duration::from_secs(5);
            client.connect(&mut s, deadline).unwrap();
        }
        t.join().unwrap();
        let rate = f64::from(N) / start.elapsed().as_secs_f64();
        println!("{rate:.0} TLS handshakes/s (client and server on one host)");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
