//! The users file and what the server does with it: each line is a user name and the salted
//! SCRAM-SHA-256 verifier of its password (never the password), as `wirerate user add`
//! writes it:
//!
//! ```text
//! # wirerate users
//! alice SCRAM-SHA-256$100000:<salt>$<StoredKey>:<ServerKey>
//! ```
//!
//! The server looks users up for the login (`login.rs`); one that does not exist gets a
//! made-up verifier derived from a secret (the server's TLS key's, so it lasts across
//! restarts), so the answer and the work are the same as for a real one. Failed logins are counted per source address, and a source
//! with too many is refused for a while without a login.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use wirerate_engine::EngineError;
use wirerate_proto::auth::{
    check_user, fake_verifier, nonce_text, AuthError, Verifier, VerifierError, DEFAULT_ITERATIONS,
};

use crate::logline::{Event, Kind};
use wirerate_engine::net::fill_random;

/// The users of a users file, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Users {
    users: BTreeMap<String, Verifier>,
}

impl Users {
    /// Parses a users file's text; errors name the line.
    pub fn parse(text: &str) -> Result<Users, UsersError> {
        let mut users = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut w = line.split_whitespace();
            let (Some(name), Some(verifier), None) = (w.next(), w.next(), w.next()) else {
                return Err(UsersError::Shape { line: n });
            };
            check_user(name).map_err(|source| UsersError::User { line: n, source })?;
            let v = Verifier::decode(verifier)
                .map_err(|source| UsersError::Verifier { line: n, source })?;
            if users.insert(name.to_string(), v).is_some() {
                return Err(UsersError::Twice {
                    line: n,
                    name: name.to_string(),
                });
            }
        }
        Ok(Users { users })
    }

    /// Reads a users file; errors name the file and the line.
    pub fn load(path: &Path) -> Result<Users, UsersError> {
        let text = std::fs::read_to_string(path).map_err(UsersError::file(path))?;
        Users::parse(&text).map_err(|e| UsersError::InFile {
            path: path.to_path_buf(),
            source: Box::new(e),
        })
    }

    /// Like `load`, but a file that does not exist is empty.
    pub fn load_or_empty(path: &Path) -> Result<Users, UsersError> {
        if path.exists() {
            Users::load(path)
        } else {
            Ok(Users::default())
        }
    }

    /// Writes the file readable by its owner only, replacing it whole (a new file renamed
    /// over the old one).
    pub fn save(&self, path: &Path) -> Result<(), UsersError> {
        use std::os::unix::fs::OpenOptionsExt;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(UsersError::file(dir))?;
        }
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".new");
        let tmp = PathBuf::from(tmp);
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(UsersError::file(&tmp))?;
        f.write_all(self.render().as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(UsersError::file(&tmp))?;
        std::fs::rename(&tmp, path).map_err(UsersError::file(path))
    }

    pub fn render(&self) -> String {
        let mut out = String::from(
            "# wirerate users: NAME SCRAM-SHA-256$ITERATIONS:SALT$STOREDKEY:SERVERKEY\n\
             # (salted verifiers, never passwords; `wirerate user add` writes them)\n",
        );
        for (name, v) in &self.users {
            out.push_str(&format!("{name} {}\n", v.encode()));
        }
        out
    }

    /// An iteration count drawn from the file's own mix by `pick`: the count of the
    /// (pick mod N)th user (the default when there are none). Unknown users get one so, so
    /// a user with an unusual count is not told apart by it: other names show it as often.
    pub fn iterations_like_users(&self, pick: u64) -> u32 {
        let n = self.users.len() as u64;
        match n {
            0 => DEFAULT_ITERATIONS,
            _ => self
                .users
                .values()
                .nth((pick % n) as usize)
                .map_or(DEFAULT_ITERATIONS, |v| v.iterations),
        }
    }

    pub fn get(&self, name: &str) -> Option<&Verifier> {
        self.users.get(name)
    }

    /// Adds or replaces a user.
    pub fn set(&mut self, name: &str, v: Verifier) -> Result<(), AuthError> {
        check_user(name)?;
        self.users.insert(name.to_string(), v);
        Ok(())
    }

    pub fn remove(&mut self, name: &str) -> bool {
        self.users.remove(name).is_some()
    }

    pub fn names(&self) -> impl Iterator<Item = (&str, &Verifier)> {
        self.users.iter().map(|(n, v)| (n.as_str(), v))
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

/// A new verifier for `password`: a random 16-byte salt.
pub fn new_verifier(password: &str, iterations: u32) -> Result<Verifier, EngineError> {
    let mut salt = [0u8; 16];
    fill_random(&mut salt)?;
    Ok(Verifier::derive(password, &salt, iterations))
}

/// Failed logins from one source address allowed within `FAIL_WINDOW`; more are refused
/// without a login until the window has passed.
pub const MAX_FAILURES: u32 = crate::strikes::MAX_STRIKES;
pub const FAIL_WINDOW: Duration = crate::strikes::WINDOW;

/// The server's users: the file's, reloaded on SIGHUP, and what a login needs besides.
#[derive(Debug)]
pub struct UserDb {
    path: Option<PathBuf>,
    users: RwLock<Arc<Users>>,
    /// The made-up verifiers of unknown users derive from it.
    secret: [u8; 32],
    failures: crate::strikes::Strikes,
}

impl UserDb {
    /// The users of `path`.
    pub fn load(path: &Path) -> Result<UserDb, UsersError> {
        let users = Users::load(path)?;
        let mut db = UserDb::new(users)?;
        db.path = Some(path.to_path_buf());
        Ok(db)
    }

    /// These users (no file to reload).
    pub fn new(users: Users) -> Result<UserDb, UsersError> {
        let mut secret = [0u8; 32];
        fill_random(&mut secret)?;
        Ok(UserDb {
            path: None,
            users: RwLock::new(Arc::new(users)),
            secret,
            failures: Default::default(),
        })
    }

    /// Unknown users' made-up verifiers derive from `secret` instead of one drawn at start,
    /// so a restart does not change them ([`wirerate_control::tls::ServerTls::lasting_secret`]).
    pub fn with_secret(mut self, secret: [u8; 32]) -> UserDb {
        self.secret = secret;
        self
    }

    pub fn len(&self) -> usize {
        self.current().len()
    }

    pub fn is_empty(&self) -> bool {
        self.current().is_empty()
    }

    fn current(&self) -> Arc<Users> {
        self.users.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The verifier to challenge `user` with, and whether the user exists. Both paths do
    /// the same work. A user who does not exist gets an iteration count drawn (by name,
    /// the same at every attempt) from the counts the file's users have, as often as they
    /// have it, so a user with an unusual count is not told apart by it either.
    pub fn lookup(&self, user: &str) -> (Verifier, bool) {
        let users = self.current();
        let pick = {
            use sha2::{Digest, Sha256};
            let h = Sha256::new()
                .chain_update(self.secret)
                .chain_update(b"wirerate unknown user iterations\0")
                .chain_update(user.as_bytes())
                .finalize();
            u64::from_be_bytes(h[..8].try_into().unwrap_or_default())
        };
        let fake = fake_verifier(&self.secret, user, users.iterations_like_users(pick));
        match users.get(user) {
            Some(v) => (v.clone(), true),
            None => (fake, false),
        }
    }

    /// Reads the file again; a bad file keeps the users in force. The log line.
    pub fn reload(&self) -> Option<(Event, String)> {
        let path = self.path.as_ref()?;
        let ev = Event::new(Kind::Reload, None);
        Some(match Users::load(path) {
            Ok(u) => {
                let text = format!("reloaded {}: {} user(s)", path.display(), u.len());
                *self.users.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(u);
                (ev.reason(text.clone()), text)
            }
            Err(e) => {
                let text = format!("reload failed, the old users stay: {e}");
                let mut ev = ev;
                ev.error = Some(text.clone());
                (ev, text)
            }
        })
    }

    /// None if `ip` may try to log in; else how long until it may.
    pub fn blocked(&self, ip: Option<IpAddr>, now: Instant) -> Option<Duration> {
        self.failures.blocked(ip, now)
    }

    /// Counts a failed login from `ip`.
    pub fn failed(&self, ip: Option<IpAddr>, now: Instant) {
        self.failures.strike(ip, now);
    }

    /// A fresh server nonce.
    pub fn nonce(&self) -> Result<String, EngineError> {
        let mut b = [0u8; 18];
        fill_random(&mut b)?;
        Ok(nonce_text(&b))
    }
}

/// Why the users file cannot be read or written; each names the file or its line.
#[derive(Debug, thiserror::Error)]
pub enum UsersError {
    #[error("line {line}: expected NAME SCRAM-SHA-256$ITER:SALT$STOREDKEY:SERVERKEY")]
    Shape { line: usize },
    #[error("line {line}: {source}")]
    User { line: usize, source: AuthError },
    #[error("line {line}: {source}")]
    Verifier { line: usize, source: VerifierError },
    #[error("line {line}: user '{name}' appears twice")]
    Twice { line: usize, name: String },
    #[error("{}: {source}", path.display())]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    InFile {
        path: PathBuf,
        source: Box<UsersError>,
    },
    /// No random bytes for the server's secret.
    #[error(transparent)]
    Random(#[from] EngineError),
}

impl UsersError {
    fn file(path: &Path) -> impl FnOnce(std::io::Error) -> UsersError + '_ {
        move |source| UsersError::File {
            path: path.to_path_buf(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_logins_count_an_ipv6_64_as_one_address() {
        let db = UserDb::new(Users::default()).unwrap();
        let now = Instant::now();
        for i in 1..=MAX_FAILURES {
            let ip: IpAddr = format!("2001:db8::{i:x}").parse().unwrap();
            assert!(db.blocked(Some(ip), now).is_none());
            db.failed(Some(ip), now);
        }
        let next: IpAddr = "2001:db8::ffff".parse().unwrap();
        assert!(db.blocked(Some(next), now).is_some());
        let other: IpAddr = "2001:db8:0:1::1".parse().unwrap();
        assert!(db.blocked(Some(other), now).is_none());
    }

    #[test]
    fn unknown_users_show_the_files_own_mix_of_iteration_counts() {
        let mut users = Users::default();
        for i in 0..9 {
            let v = Verifier::derive("pw", b"0123456789abcdef", 4096);
            let v = Verifier {
                iterations: 100_000,
                ..v
            };
            users.set(&format!("user{i}"), v).unwrap();
        }
        // one user with an unusual count
        users
            .set("odd", Verifier::derive("pw", b"0123456789abcdef", 5000))
            .unwrap();
        let db = UserDb::new(users).unwrap();
        assert_eq!(db.lookup("odd").0.iterations, 5000);
        let unusual = (0..2000)
            .filter(|i| db.lookup(&format!("nobody{i}")).0.iterations == 5000)
            .count();
        // about one unknown name in ten shows it, as one user in ten has it
        assert!((100..=300).contains(&unusual), "{unusual} of 2000");
        // and a name shows the same count at every attempt
        let a = db.lookup("mallory").0.iterations;
        assert!((0..5).all(|_| db.lookup("mallory").0.iterations == a));
    }

    #[test]
    fn a_lasting_secret_keeps_unknown_users_salts_across_restarts() {
        use wirerate_control::tls::ServerTls;
        let base = std::env::temp_dir().join(format!("wr-secret-{}", std::process::id()));
        let (one, two) = (base.join("one"), base.join("two"));
        for d in [&one, &two] {
            std::fs::create_dir_all(d).unwrap();
        }
        let salt = |t: &ServerTls| {
            let db = UserDb::new(Users::default()).unwrap();
            let db = db.with_secret(t.lasting_secret(b"unknown users"));
            db.lookup("mallory").0.salt
        };
        // a restart reads the same key again: the same made-up salt
        let first = ServerTls::load_or_create(&one).unwrap();
        let again = ServerTls::load_or_create(&one).unwrap();
        assert_eq!(salt(&first), salt(&again));
        // another server's key: another salt
        assert_ne!(
            salt(&first),
            salt(&ServerTls::load_or_create(&two).unwrap())
        );
        // without it, each start draws its own secret
        let fresh = || {
            UserDb::new(Users::default())
                .unwrap()
                .lookup("mallory")
                .0
                .salt
        };
        assert_ne!(fresh(), fresh());
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_users_file_round_trips_and_bad_lines_are_named() {
        let mut u = Users::default();
        u.set("alice", Verifier::derive("pw", b"salt", 4096))
            .unwrap();
        u.set("bob", Verifier::derive("pw2", b"salt2", 4096))
            .unwrap();
        let text = u.render();
        assert!(!text.contains("pw2 "));
        assert_eq!(Users::parse(&text).unwrap(), u);
        let good = format!("alice {}", Verifier::derive("pw", b"s", 4096).encode());
        for (bad, line) in [
            (format!("# c\n\n{good}\nbob\n"), "line 4"),
            (format!("{good}\n{good}\n"), "line 2"),
            (format!("\n{good} extra\n"), "line 2"),
            ("a,b SCRAM-SHA-256$4096:AA$AA:AA\n".to_string(), "line 1"),
            (
                "carol SCRAM-SHA-256$4096:AAAA$AAAA:AAAA\n".to_string(),
                "line 1",
            ),
        ] {
            let e = Users::parse(&bad).unwrap_err().to_string();
            assert!(e.starts_with(line), "{e}");
        }
        assert!(u
            .set("bad name", Verifier::derive("pw", b"s", 4096))
            .is_err());
    }

    #[test]
    fn saved_files_are_for_their_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("wr-users-{}", std::process::id()));
        let path = dir.join("users");
        let mut u = Users::default();
        u.set("alice", Verifier::derive("pw", b"salt", 4096))
            .unwrap();
        u.save(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(Users::load(&path).unwrap(), u);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn unknown_users_get_a_stable_made_up_verifier() {
        let mut u = Users::default();
        u.set("alice", Verifier::derive("pw", b"salt", 4096))
            .unwrap();
        let db = UserDb::new(u).unwrap();
        let (a, known) = db.lookup("alice");
        assert!(known);
        assert_eq!(a.salt, b"salt");
        let (x, known) = db.lookup("mallory");
        assert!(!known);
        assert_eq!(x, db.lookup("mallory").0);
        // the count real users have, not a default that would give it away
        assert_eq!(x.iterations, 4096);
        assert_eq!(
            UserDb::new(Users::default())
                .unwrap()
                .lookup("x")
                .0
                .iterations,
            DEFAULT_ITERATIONS
        );
        assert_eq!(x.salt.len(), 16);
    }

    #[test]
    fn failures_block_a_source_for_a_while() {
        let db = UserDb::new(Users::default()).unwrap();
        let ip = Some(IpAddr::from([127, 0, 0, 9]));
        let t0 = Instant::now();
        for _ in 0..MAX_FAILURES {
            assert_eq!(db.blocked(ip, t0), None);
            db.failed(ip, t0);
        }
        assert!(db.blocked(ip, t0).is_some());
        assert_eq!(db.blocked(Some(IpAddr::from([127, 0, 0, 8])), t0), None);
        assert_eq!(db.blocked(ip, t0 + FAIL_WINDOW), None);
    }
}
