//! The server's side of a control connection before it may claim the test slot: the
//! session is made (with the data token derived from TLS when the connection has it), and,
//! when the server has users, the client logs in. A login runs while the connection still
//! counts as pending, so unauthenticated clients are held to the per-address limit and never
//! hold the slot.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wirerate_proto::auth::{AuthError, CHANNEL_BINDING_LABEL, DATA_TOKEN_LABEL};
use wirerate_proto::{ProtoError, ServerEvent, ServerSession, Token};

use crate::logline::{Decision, Event, Kind};
use crate::server::{Pending, Shared};
use crate::users::UserDb;
use wirerate_control::control::{Control, Input};
use wirerate_engine::net::random_token;

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

/// Makes the session and runs the login, if the server has users (or takes the user from
/// the client's certificate, with mutual TLS). Refusals are logged here. `agent`: the
/// login of a third-party request (`crate::agent`), whose answer starts with an agent
/// preamble.
pub(crate) fn prepare(
    ctl: &mut Control,
    shared: &Shared,
    who: &str,
    ip: Option<IpAddr>,
    agent: bool,
) -> Option<Prepared> {
    match begin(ctl, shared, who, ip, agent, false) {
        Begun::Ready(pre) => Some(pre),
        Begun::Stalled(_) | Begun::Refused => None,
    }
}

/// How far a login got on its first thread.
pub(crate) enum Begun {
    Ready(Prepared),
    /// The client has its challenge and has not answered yet: the connection may wait
    /// without a thread ([`Held`]).
    Stalled(Stalled),
    Refused,
}

/// A login's state while the client's last message is awaited.
pub(crate) struct Stalled {
    sess: ServerSession,
    token: Token,
    user: Option<(String, bool)>,
    deadline: Instant,
}

/// [`prepare`], which may stop (`may_hold`) when a SCRAM client has its challenge and
/// nothing is waiting to be read.
pub(crate) fn begin(
    ctl: &mut Control,
    shared: &Shared,
    who: &str,
    ip: Option<IpAddr>,
    agent: bool,
    may_hold: bool,
) -> Begun {
    let (token, derived) = match data_token(ctl) {
        Ok(t) => t,
        Err(e) => {
            shared.log(format_args!("{e}"));
            return Begun::Refused;
        }
    };
    let mut sess = ServerSession::new(Instant::now(), shared.cfg.idle, token, &shared.cfg.name);
    if derived {
        sess = sess.derived_token();
    }
    if agent {
        sess = sess.for_agent();
    }
    let mut l = Login {
        ctl,
        shared,
        who,
        ip,
        user: None,
        agent,
        counted: false,
    };
    let user = if shared.cfg.tls.as_ref().is_some_and(|t| t.client_certs) {
        match l.user_of_certificate(&mut sess) {
            Some(u) => Some(u),
            None => return Begun::Refused,
        }
    } else if let Some(db) = shared.cfg.users.as_ref() {
        sess = sess.require_login();
        let deadline = Instant::now() + shared.cfg.idle;
        match l.scram(&mut sess, db, deadline, may_hold) {
            Scram::In(u) => Some(u),
            Scram::Refused => return Begun::Refused,
            Scram::Stalled => {
                let user = l.user.take();
                return Begun::Stalled(Stalled {
                    sess,
                    token,
                    user,
                    deadline,
                });
            }
        }
    } else {
        None
    };
    Begun::Ready(Prepared { sess, token, user })
}

/// A control connection whose login waits for the client's last message, held by the
/// waiting room (`crate::waiting`) without a thread: the socket, its TLS state, the
/// session and the login's deadline, which stays the one it had.
pub(crate) struct Held {
    pub(crate) ctl: Control,
    state: Stalled,
    pub(crate) pending: Pending,
    who: String,
}

impl Held {
    pub(crate) fn new(ctl: Control, state: Stalled, pending: Pending, who: &str) -> Held {
        Held {
            ctl,
            state,
            pending,
            who: who.to_string(),
        }
    }

    /// When the login times out.
    pub(crate) fn deadline(&self) -> Instant {
        self.state.deadline
    }
}

/// Hands a stalled login to the waiting room; where the room cannot take it, the login
/// goes on here, without stopping again.
pub(crate) fn hold(held: Held, shared: &Arc<Shared>) {
    if let Err(held) = shared.waiting.hold(shared, Box::new(held)) {
        resume(*held, shared, false);
    }
}

/// The waiting room saw a held login's socket readable, or its deadline pass: the login
/// goes on on a thread of its own.
pub(crate) fn resume_on_thread(held: Held, shared: &Arc<Shared>) {
    let moved = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("wr-login".into())
        .stack_size(256 << 10)
        .spawn(move || resume(held, &moved, true));
    if spawned.is_err() {
        shared.log(format_args!("cannot start a connection thread"));
    }
}

/// Goes on with a held login from where it stopped, then with the connection.
fn resume(held: Held, shared: &Arc<Shared>, may_hold: bool) {
    let Held {
        mut ctl,
        state,
        pending,
        who,
    } = held;
    let Some(db) = shared.cfg.users.as_ref() else {
        return;
    };
    let Stalled {
        mut sess,
        token,
        user,
        deadline,
    } = state;
    let mut l = Login {
        ctl: &mut ctl,
        shared,
        who: &who,
        ip: pending.ip,
        user,
        agent: false,
        counted: false,
    };
    match l.scram_from(&mut sess, db, deadline, may_hold) {
        Scram::In(name) => {
            let pre = Prepared {
                sess,
                token,
                user: Some(name),
            };
            crate::server::after_login(ctl, shared, &who, pending, pre);
        }
        Scram::Stalled => {
            let user = l.user.take();
            let state = Stalled {
                sess,
                token,
                user,
                deadline,
            };
            hold(Held::new(ctl, state, pending, &who), shared);
        }
        Scram::Refused => {}
    }
}

/// Where a SCRAM exchange ended.
enum Scram {
    In(String),
    Stalled,
    Refused,
}

/// Reads the client's spec while the connection still counts as pending, so the test slot
/// is claimed only once a spec is here: a client that opens and goes quiet, before or after
/// its login, holds no slot. It has `--handshake-timeout` from now. The events that came
/// with the spec, in order (the spec among them); None when refused (told and logged).
pub(crate) fn await_spec(
    ctl: &mut Control,
    pre: &mut Prepared,
    shared: &Shared,
    who: &str,
    ip: Option<IpAddr>,
) -> Option<Vec<ServerEvent>> {
    let mut l = Login {
        ctl,
        shared,
        who,
        ip,
        user: pre.user.clone().map(|u| (u, true)),
        agent: false,
        counted: false,
    };
    let sess = &mut pre.sess;
    let wait = shared.cfg.handshake;
    let deadline = Instant::now() + wait;
    loop {
        if let Err(e) = l.ctl.flush(|| sess.poll_transmit(), wait) {
            l.refuse(sess, &format!("writing to the client: {e}"));
            return None;
        }
        let now = Instant::now();
        if now >= deadline {
            let why = format!("no test spec within {} s", wait.as_secs_f64());
            sess.refuse(&why);
            l.refuse(sess, &why);
            return None;
        }
        let got = match l.ctl.read(deadline - now) {
            Ok(Input::Bytes(n)) => sess.handle_input(l.ctl.bytes(n), Instant::now()),
            Ok(Input::Closed) => sess.handle_close().map(|()| Vec::new()),
            Ok(Input::Nothing) => Ok(Vec::new()),
            Err(e) => Err(ProtoError::BadMessage(e.to_string())),
        };
        match got {
            Ok(events) if events.iter().any(|e| matches!(e, ServerEvent::Spec(_))) => {
                return Some(events)
            }
            Ok(_) => {}
            Err(e) => {
                l.refuse(sess, &format!("before the spec: {e}"));
                return None;
            }
        }
    }
}

/// One connection's login, and what its log lines need.
struct Login<'a> {
    ctl: &'a mut Control,
    shared: &'a Shared,
    who: &'a str,
    ip: Option<IpAddr>,
    /// The user the client names, and whether it exists.
    user: Option<(String, bool)>,
    /// The login of a third-party request.
    agent: bool,
    /// A failure has been counted against the address.
    counted: bool,
}

impl Login<'_> {
    /// Tells the client what the session queued (a refusal) and logs why.
    fn refuse(&mut self, sess: &mut ServerSession, why: &str) {
        let _ = self
            .ctl
            .flush(|| sess.poll_transmit(), Duration::from_secs(1));
        let (who, user) = (self.who, self.user.as_ref().map(|u| u.0.clone()));
        let why = if self.agent {
            format!("third-party: {why}")
        } else {
            why.to_string()
        };
        let mut ev = Event::new(Kind::Connection, Some(who.into()))
            .decided(Decision::Refused, Some(why.clone()));
        ev.user = user.clone();
        let user = user.map_or_else(String::new, |u| format!(" as '{u}'"));
        self.shared
            .log_rejected(self.ip, ev, format_args!("refused {who}{user}: {why}"));
    }

    /// Mutual TLS: the handshake checked the certificate; its CN names the user.
    fn user_of_certificate(&mut self, sess: &mut ServerSession) -> Option<String> {
        let tls = self.ctl.tls.as_ref();
        if !tls.is_some_and(|t| t.has_peer_cert()) {
            let why = "this server requires a client certificate (run --client-cert FILE \
                       --client-key FILE)";
            sess.refuse(why);
            self.refuse(sess, why);
            return None;
        }
        match tls.and_then(|t| t.peer_cn()) {
            Some(u) if wirerate_proto::auth::check_user(&u).is_ok() => Some(u),
            _ => {
                let why = "the client certificate's CN is not a user name";
                sess.refuse(why);
                self.refuse(sess, why);
                None
            }
        }
    }

    /// SCRAM by `deadline`: the user the client proved to be, or Refused (refused and
    /// logged), or Stalled (`may_hold`: the client has its challenge, nothing waits to be
    /// read). A login that got its challenge and went no further (closed, timed out, junk)
    /// counts as a failure against the address, as a wrong proof does: probing names costs
    /// the same as guessing.
    fn scram(
        &mut self,
        sess: &mut ServerSession,
        db: &UserDb,
        deadline: Instant,
        may_hold: bool,
    ) -> Scram {
        if let Some(wait) = db.blocked(self.ip, Instant::now()) {
            let why = format!(
                "too many failed logins from this address; retry in {:.0} s",
                wait.as_secs_f64().ceil()
            );
            sess.refuse(&why);
            self.refuse(sess, &why);
            return Scram::Refused;
        }
        self.scram_from(sess, db, deadline, may_hold)
    }

    /// [`Login::scram`] from where it stands (first or resumed), with its failure counted.
    fn scram_from(
        &mut self,
        sess: &mut ServerSession,
        db: &UserDb,
        deadline: Instant,
        may_hold: bool,
    ) -> Scram {
        let got = self.scram_exchange(sess, db, deadline, may_hold);
        if matches!(got, Scram::Refused) && self.user.is_some() && !self.counted {
            db.failed(self.ip, Instant::now());
        }
        got
    }

    // the client has as long as any silent peer to finish (`deadline`, from the start of the
    // login); the per-address pending limit bounds how many may try at once
    fn scram_exchange(
        &mut self,
        sess: &mut ServerSession,
        db: &UserDb,
        deadline: Instant,
        may_hold: bool,
    ) -> Scram {
        let idle = self.shared.cfg.idle;
        let mut was_quiet = false;
        loop {
            if let Err(e) = self.ctl.flush(|| sess.poll_transmit(), idle) {
                self.refuse(sess, &format!("login: writing to the client: {e}"));
                return Scram::Refused;
            }
            let now = Instant::now();
            if now >= deadline {
                sess.refuse("the login timed out");
                self.refuse(sess, "the login timed out");
                return Scram::Refused;
            }
            // the challenge went out and a short wait brought nothing: the connection
            // waits without a thread, unless something is buffered already
            if may_hold && was_quiet && self.user.is_some() && self.ctl.quiet() {
                return Scram::Stalled;
            }
            let got = match self
                .ctl
                .read(Duration::from_millis(100).min(deadline - now))
            {
                Ok(Input::Bytes(n)) => sess.handle_input(self.ctl.bytes(n), Instant::now()),
                Ok(Input::Closed) => sess.handle_close().map(|()| Vec::new()),
                Ok(Input::Nothing) => Ok(Vec::new()),
                Err(e) => Err(ProtoError::BadMessage(e.to_string())),
            };
            was_quiet = matches!(got.as_deref(), Ok([]));
            let events = match got {
                Ok(ev) => ev,
                Err(e) => {
                    let why = self.why_failed(&e, db);
                    self.refuse(sess, &why);
                    return Scram::Refused;
                }
            };
            for ev in events {
                match ev {
                    ServerEvent::Login(name) => {
                        let Some(()) = self.challenge(sess, db, name) else {
                            return Scram::Refused;
                        };
                    }
                    ServerEvent::LoggedIn(name) => return Scram::In(name),
                    // the session lets nothing else through before the login
                    _ => {}
                }
            }
        }
    }

    /// What the log says of a failed login (the client is told less); a failure counts
    /// against the address.
    fn why_failed(&mut self, e: &ProtoError, db: &UserDb) -> String {
        let ProtoError::Login(inner) = e else {
            return format!("before login: {e}");
        };
        db.failed(self.ip, Instant::now());
        self.counted = true;
        match (inner, &self.user) {
            (_, Some((_, false))) => "login failed: unknown user".into(),
            (AuthError::BadProof, _) => "login failed: wrong password".into(),
            _ => format!("login failed: {inner}"),
        }
    }

    /// Answers the client's first message with the user's (or a made-up) challenge.
    fn challenge(&mut self, sess: &mut ServerSession, db: &UserDb, name: String) -> Option<()> {
        let (verifier, known) = db.lookup(&name);
        self.user = Some((name, known));
        let mut cb = [0u8; 32];
        let bound = match &self.ctl.tls {
            Some(t) => match t.export(CHANNEL_BINDING_LABEL, &mut cb) {
                Ok(()) => Some(&cb[..]),
                Err(e) => {
                    self.shared.log(format_args!("TLS exporter: {e}"));
                    return None;
                }
            },
            None => None,
        };
        let nonce = match db.nonce() {
            Ok(n) => n,
            Err(e) => {
                self.shared.log(format_args!("{}", e.full()));
                return None;
            }
        };
        if let Err(e) = sess.challenge(verifier, &nonce, bound) {
            let why = self.why_failed(&e, db);
            self.refuse(sess, &why);
            return None;
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use wirerate_proto::auth::{
        nonce_text, Binding, ScramClient, Verifier, CHANNEL_BINDING_LABEL, DEFAULT_ITERATIONS,
    };
    use wirerate_proto::frame::PREAMBLE_LEN;
    use wirerate_proto::{Channel, ClientSession, Preamble};

    use crate::users::{UserDb, Users};
    use crate::{Server, ServerConfig};
    use wirerate_control::tls::{ClientTls, ServerTls};

    /// One login over TLS, as a client does it, up to the server's proof checked.
    fn login(addr: std::net::SocketAddr, client: &ClientTls) {
        let mut sock = TcpStream::connect(addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        sock.write_all(&Preamble::new(Channel::TlsControl).emit())
            .unwrap();
        let mut pre = [0u8; PREAMBLE_LEN];
        sock.read_exact(&mut pre).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut tls = client.connect(&mut sock, deadline).unwrap();
        let mut cb = [0u8; 32];
        tls.export(CHANNEL_BINDING_LABEL, &mut cb).unwrap();
        let mut n = [0u8; 18];
        wirerate_engine::net::fill_random(&mut n).unwrap();
        let scram = ScramClient::new("alice", "pw", &nonce_text(&n), Binding::TlsExporter).unwrap();
        let spec = wirerate_core::TestSpec::default();
        let mut sess =
            ClientSession::with_login(&spec, Instant::now(), Duration::from_secs(10), scram);
        sess.set_channel_binding(cb.to_vec());
        let mut out = Vec::new();
        while let Some(f) = sess.poll_transmit() {
            out.extend(f);
        }
        // preamble and login, then the proof; the spec is queued once the server has
        // proved itself
        let mut sent = 0;
        let mut buf = vec![0u8; 65536];
        loop {
            if !out.is_empty() {
                tls.write_all(&mut sock, &out).unwrap();
                out.clear();
                sent += 1;
            }
            let n = tls.read(&mut sock, &mut buf).unwrap();
            assert!(n > 0, "the server closed");
            sess.handle_input(&buf[..n], Instant::now()).unwrap();
            while let Some(f) = sess.poll_transmit() {
                out.extend(f);
            }
            if sent == 2 && !out.is_empty() {
                return;
            }
        }
    }

    /// Logins per second (TLS handshake and SCRAM-SHA-256), client and server on one host:
    /// `cargo test -p wirerate-server --release login_handshakes_per_second -- --ignored
    /// --nocapture` (bench/handshakes.sh).
    #[test]
    #[ignore]
    fn login_handshakes_per_second() {
        let dir = std::env::temp_dir().join(format!("wr-login-rate-{}", std::process::id()));
        let srv_tls = ServerTls::load_or_create(&dir).unwrap();
        let client = ClientTls {
            pin: Some((srv_tls.fingerprint.clone(), "test".into())),
            ..Default::default()
        };
        for iterations in [4096, DEFAULT_ITERATIONS] {
            let t = Instant::now();
            let v = Verifier::derive("pw", b"0123456789abcdef", iterations);
            let pbkdf2 = t.elapsed();
            let mut users = Users::default();
            users.set("alice", v).unwrap();
            let cfg = ServerConfig {
                quiet: true,
                tls: Some(srv_tls.clone()),
                users: Some(Arc::new(UserDb::new(users).unwrap())),
                ..Default::default()
            };
            let s = Server::bind("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
            let addr = s.local_addr().unwrap();
            s.spawn().unwrap();
            const N: u32 = 100;
            let start = Instant::now();
            for _ in 0..N {
                login(addr, &client);
            }
            let rate = f64::from(N) / start.elapsed().as_secs_f64();
            println!(
                "{iterations} iterations: {rate:.0} logins/s over TLS (client and server on one \
                 host, one at a time); the client's PBKDF2 alone takes {:.1} ms",
                pbkdf2.as_secs_f64() * 1e3
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Opens TLS, asks to log in as `user` and reads until the server's challenge or its
    /// refusal; then goes away. What the server said, as text.
    fn probe(addr: std::net::SocketAddr, client: &ClientTls, user: &str) -> String {
        let mut sock = TcpStream::connect(addr).unwrap();
        sock.write_all(&Preamble::new(Channel::TlsControl).emit())
            .unwrap();
        let mut pre = [0u8; PREAMBLE_LEN];
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        sock.read_exact(&mut pre).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut tls = client.connect(&mut sock, deadline).unwrap();
        let scram = ScramClient::new(user, "guess", "nonce", Binding::TlsExporter).unwrap();
        let spec = wirerate_core::TestSpec::default();
        let mut sess =
            ClientSession::with_login(&spec, Instant::now(), Duration::from_secs(5), scram);
        while let Some(f) = sess.poll_transmit() {
            tls.write_all(&mut sock, &f).unwrap();
        }
        let mut said = Vec::new();
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline {
            match tls.read_by(&mut sock, &mut buf, deadline) {
                Ok(0) | Err(_) => break,
                Ok(n) => said.extend_from_slice(&buf[..n]),
            }
            let text = String::from_utf8_lossy(&said);
            if text.contains("login_challenge") || text.contains("refused") {
                break;
            }
        }
        String::from_utf8_lossy(&said).into_owned()
    }

    /// Probes that stop at the challenge count as failed logins: the sixth from an address
    /// is refused at once, as after five wrong passwords.
    #[test]
    fn logins_that_stop_at_the_challenge_count_as_failures() {
        let dir = std::env::temp_dir().join(format!("wr-login-probe-{}", std::process::id()));
        let srv_tls = ServerTls::load_or_create(&dir).unwrap();
        let client = ClientTls {
            pin: Some((srv_tls.fingerprint.clone(), "test".into())),
            ..Default::default()
        };
        let mut users = Users::default();
        users
            .set("alice", Verifier::derive("pw", b"0123456789abcdef", 4096))
            .unwrap();
        let db = Arc::new(UserDb::new(users).unwrap());
        let cfg = ServerConfig {
            quiet: true,
            tls: Some(srv_tls),
            users: Some(db.clone()),
            ..Default::default()
        };
        let s = Server::bind("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
        let addr = s.local_addr().unwrap();
        s.spawn().unwrap();
        for i in 0..crate::users::MAX_FAILURES {
            let said = probe(addr, &client, &format!("name{i}"));
            assert!(said.contains("login_challenge"), "probe {i}: {said:?}");
        }
        // the server counts a probe once it has gone: wait for the last to be counted
        let t0 = Instant::now();
        while db
            .blocked(Some("127.0.0.1".parse().unwrap()), Instant::now())
            .is_none()
        {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "the probes were not counted"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let said = probe(addr, &client, "alice");
        assert!(said.contains("too many failed logins"), "{said:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The ignored benchmark's login, once, so it stays working.
    #[test]
    fn a_login_over_tls_completes() {
        let dir = std::env::temp_dir().join(format!("wr-login-once-{}", std::process::id()));
        let srv_tls = ServerTls::load_or_create(&dir).unwrap();
        let client = ClientTls {
            pin: Some((srv_tls.fingerprint.clone(), "test".into())),
            ..Default::default()
        };
        let mut users = Users::default();
        users
            .set("alice", Verifier::derive("pw", b"0123456789abcdef", 4096))
            .unwrap();
        let cfg = ServerConfig {
            quiet: true,
            tls: Some(srv_tls),
            users: Some(Arc::new(UserDb::new(users).unwrap())),
            ..Default::default()
        };
        let s = Server::bind("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
        let addr = s.local_addr().unwrap();
        s.spawn().unwrap();
        login(addr, &client);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
