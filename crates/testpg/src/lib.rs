//! Throwaway PostgreSQL clusters for tests: `initdb` and `pg_ctl start` in a temporary
//! directory, listening on a Unix socket there and on a free loopback port, stopped
//! (`pg_ctl stop -m immediate`) and removed when dropped. A system-wide cluster is never used
//! or started.
//!
//! - As root the cluster runs as the `postgres` user (initdb refuses root): the directory is
//!   handed to that user and the tools run through `runuser`.
//! - Without the server binaries, [`Cluster::start_or_skip`] prints why and returns None,
//!   unless `WIRERATE_REQUIRE_PG` is set (CI), where a missing server fails the test.
//! - [`Cluster::shared`] gives one cluster per test process; each test takes its own
//!   database from it ([`Cluster::fresh_database`]), so tests run in parallel. A watchdog
//!   process stops that cluster when the test process exits.
//!
//! Local (socket) connections are trusted; TCP asks for the password
//! ([`Cluster::password`]), so authentication failures can be tested too. Processes in other
//! network namespaces reach the cluster through its Unix socket (a path, not an address), or
//! over TCP when it was started with [`Cluster::start_listening_on`] an address they can
//! route to.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

pub use postgres;

/// The superuser of every throwaway cluster.
pub const SUPERUSER: &str = "postgres";

/// A running throwaway cluster.
pub struct Cluster {
    root: PathBuf,
    listen: String,
    bin: PathBuf,
    run_as: Option<String>,
    port: u16,
    password: String,
    stopped: bool,
}

/// Where the server binaries are: `WIRERATE_PG_BIN`, else the newest
/// `/usr/lib/postgresql/*/bin`, else the directory of `initdb` on `PATH`.
pub fn find_bin() -> Option<PathBuf> {
    let has = |d: &Path| d.join("initdb").is_file() && d.join("pg_ctl").is_file();
    if let Some(d) = std::env::var_os("WIRERATE_PG_BIN").map(PathBuf::from) {
        return has(&d).then_some(d);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            has(&bin).then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .find(|d| has(d))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// The numeric uid and gid of a user, from `id`.
fn ids_of(user: &str) -> Option<(u32, u32)> {
    let id = |flag: &str| -> Option<u32> {
        let o = Command::new("id").args([flag, user]).output().ok()?;
        if !o.status.success() {
            return None;
        }
        String::from_utf8_lossy(&o.stdout).trim().parse().ok()
    };
    Some((id("-u")?, id("-g")?))
}

fn unique() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let us = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    format!(
        "{:x}{:x}{:x}",
        us,
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The started cluster, or None with the reason printed (a panic instead when
/// `WIRERATE_REQUIRE_PG` is set).
fn or_skip<C, E: std::fmt::Display>(test: &str, started: Result<C, E>) -> Option<C> {
    match started {
        Ok(c) => Some(c),
        Err(why) if std::env::var_os("WIRERATE_REQUIRE_PG").is_some() => {
            panic!("{test}: PostgreSQL is required (WIRERATE_REQUIRE_PG) but: {why}")
        }
        Err(why) => {
            eprintln!("skipping {test}: {why}");
            None
        }
    }
}

impl Cluster {
    /// Starts a new cluster listening on loopback; Err says why it could not (no binaries,
    /// initdb failed, …).
    pub fn start() -> Result<Cluster, String> {
        Self::start_listening_on("127.0.0.1")
    }

    /// [`Cluster::start`] with the server's `listen_addresses` (`"*"` for every address of
    /// this network namespace, a comma-separated list otherwise).
    pub fn start_listening_on(listen: &str) -> Result<Cluster, String> {
        Self::start_inner(listen, None)
    }

    /// [`Cluster::start`] with TLS on: the server presents `cert_pem` (with `key_pem`), and
    /// TCP clients must use TLS (`hostssl` only); the Unix socket stays plain.
    pub fn start_with_tls(cert_pem: &str, key_pem: &str) -> Result<Cluster, String> {
        Self::start_inner("127.0.0.1", Some((cert_pem, key_pem)))
    }

    fn start_inner(listen: &str, tls: Option<(&str, &str)>) -> Result<Cluster, String> {
        let bin = find_bin().ok_or_else(|| {
            "PostgreSQL server binaries (initdb, pg_ctl) not found: install postgresql \
             or set WIRERATE_PG_BIN"
                .to_string()
        })?;
        let run_as = if is_root() {
            Some(
                ["postgres", "nobody"]
                    .into_iter()
                    .find(|u| ids_of(u).is_some())
                    .ok_or("running as root, and neither a postgres nor a nobody user exists")?
                    .to_string(),
            )
        } else {
            None
        };
        let root = tempfile::Builder::new()
            .prefix("wrpg")
            .tempdir()
            .map_err(|e| format!("temporary directory: {e}"))?
            .keep();
        let mut c = Cluster {
            root,
            listen: listen.to_string(),
            bin,
            run_as,
            port: 0,
            password: format!("pw{}", unique()),
            stopped: true,
        };
        c.init()?;
        if let Some((cert, key)) = tls {
            c.enable_tls(cert, key)?;
        }
        // a free port can be taken between the probe and the start: try a few
        let mut last = String::new();
        for _ in 0..5 {
            c.port = free_port().map_err(|e| format!("no free loopback port: {e}"))?;
            match c.pg_ctl_start() {
                Ok(()) => {
                    c.stopped = false;
                    c.watchdog();
                    return Ok(c);
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// [`Cluster::start`], or None with the reason printed (and a panic instead when
    /// `WIRERATE_REQUIRE_PG` is set).
    pub fn start_or_skip(test: &str) -> Option<Cluster> {
        or_skip(test, Self::start())
    }

    /// [`Cluster::start_with_tls`], or None with the reason printed (as
    /// [`Cluster::start_or_skip`]).
    pub fn start_with_tls_or_skip(test: &str, cert_pem: &str, key_pem: &str) -> Option<Cluster> {
        or_skip(test, Self::start_with_tls(cert_pem, key_pem))
    }

    /// One cluster for the whole test process, started on first use (None, with the reason
    /// printed, when it cannot be).
    pub fn shared(test: &str) -> Option<&'static Cluster> {
        static SHARED: OnceLock<Result<Cluster, String>> = OnceLock::new();
        or_skip(test, SHARED.get_or_init(Self::start).as_ref())
    }

    fn data(&self) -> PathBuf {
        self.root.join("data")
    }

    fn socket_dir(&self) -> PathBuf {
        self.root.join("sock")
    }

    /// A server tool, run as the cluster's user.
    fn tool(&self, name: &str) -> Command {
        let exe = self.bin.join(name);
        let mut cmd = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        // the tools change into the working directory's parent chain; the test's may be
        // closed to the postgres user
        cmd.current_dir(&self.root).stdin(Stdio::null());
        cmd
    }

    fn init(&self) -> Result<(), String> {
        let pwfile = self.root.join("pw");
        std::fs::write(&pwfile, format!("{}\n", self.password)).map_err(|e| e.to_string())?;
        std::fs::create_dir(self.socket_dir()).map_err(|e| e.to_string())?;
        if let Some(user) = &self.run_as {
            let (uid, gid) = ids_of(user).ok_or("no such user")?;
            for p in [self.root.clone(), pwfile.clone(), self.socket_dir()] {
                std::os::unix::fs::chown(&p, Some(uid), Some(gid))
                    .map_err(|e| format!("chown {}: {e}", p.display()))?;
            }
        }
        let out = self
            .tool("initdb")
            .arg("-D")
            .arg(self.data())
            .args(["-U", SUPERUSER, "-E", "UTF8", "--locale=C", "--no-sync"])
            .args(["--auth-local=trust", "--auth-host=scram-sha-256"])
            .arg(format!("--pwfile={}", pwfile.display()))
            .output()
            .map_err(|e| format!("cannot run initdb: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(())
    }

    /// Writes the server's certificate and key into the data directory, turns `ssl` on and
    /// makes every TCP line of `pg_hba.conf` TLS-only.
    fn enable_tls(&self, cert: &str, key: &str) -> Result<(), String> {
        use std::os::unix::fs::PermissionsExt;
        let data = self.data();
        let files = [("server.crt", cert, 0o644), ("server.key", key, 0o600)];
        for (name, text, mode) in files {
            let path = data.join(name);
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                .map_err(|e| e.to_string())?;
            if let Some(user) = &self.run_as {
                let (uid, gid) = ids_of(user).ok_or("no such user")?;
                std::os::unix::fs::chown(&path, Some(uid), Some(gid))
                    .map_err(|e| format!("chown {}: {e}", path.display()))?;
            }
        }
        let conf = data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).map_err(|e| e.to_string())?;
        text.push_str("\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n");
        std::fs::write(&conf, text).map_err(|e| e.to_string())?;
        let hba = data.join("pg_hba.conf");
        let text = std::fs::read_to_string(&hba).map_err(|e| e.to_string())?;
        let tls_only: Vec<String> = text
            .lines()
            .map(|l| match l.strip_prefix("host ") {
                Some(rest) => format!("hostssl {rest}"),
                None => l.to_string(),
            })
            .collect();
        std::fs::write(&hba, tls_only.join("\n") + "\n").map_err(|e| e.to_string())
    }

    fn pg_ctl_start(&self) -> Result<(), String> {
        let opts = format!(
            "-k {} -p {} -c listen_addresses='{}' -c fsync=off -c max_connections=200 \
             -c shared_buffers=16MB",
            self.socket_dir().display(),
            self.port,
            self.listen
        );
        let log = self.root.join("log");
        let out = self
            .tool("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(&log)
            .args(["-w", "-t", "60", "-o", &opts, "start"])
            .stdout(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run pg_ctl: {e}"))?;
        if out.status.success() {
            return Ok(());
        }
        let tail = std::fs::read_to_string(&log).unwrap_or_default();
        Err(format!(
            "pg_ctl start failed: {} {}",
            String::from_utf8_lossy(&out.stderr).trim(),
            tail.lines().rev().take(3).collect::<Vec<_>>().join(" | ")
        ))
    }

    /// A detached process that stops the cluster and removes its directory once this
    /// process is gone (a static cluster is never dropped).
    fn watchdog(&self) {
        let stop = format!(
            "{} -D '{}' stop -m immediate",
            self.bin.join("pg_ctl").display(),
            self.data().display()
        );
        let stop = match &self.run_as {
            Some(u) => format!("runuser -u {u} -- {stop}"),
            None => stop,
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
             if [ -d '{data}' ]; then {stop} >/dev/null 2>&1; fi; rm -rf '{root}'",
            pid = std::process::id(),
            data = self.data().display(),
            root = self.root.display(),
        );
        let _ = Command::new("sh")
            .args(["-c", &script])
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
    }

    /// The directory holding the server's Unix socket.
    pub fn socket_path(&self) -> PathBuf {
        self.socket_dir()
    }

    /// The loopback TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The superuser's password (asked for over TCP only).
    pub fn password(&self) -> &str {
        &self.password
    }

    /// A URL to database `db` over the Unix socket, as the superuser, with no password.
    pub fn url(&self, db: &str) -> String {
        format!(
            "postgres:///{db}?host={}&port={}&user={SUPERUSER}",
            self.socket_dir().display(),
            self.port
        )
    }

    /// A URL to database `db` over loopback TCP, with the password in it.
    pub fn tcp_url(&self, db: &str, password: &str) -> String {
        self.tcp_url_at("127.0.0.1", db, password)
    }

    /// A URL to database `db` over TCP at `host` (an address the cluster listens on).
    pub fn tcp_url_at(&self, host: &str, db: &str, password: &str) -> String {
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.to_string()
        };
        format!(
            "postgres://{SUPERUSER}:{password}@{host}:{}/{db}",
            self.port
        )
    }

    /// The name of the database a URL from [`Cluster::url`] or [`Cluster::fresh_database`]
    /// names.
    pub fn database_of(url: &str) -> &str {
        let path = url.split(['?', '#']).next().unwrap_or(url);
        path.rsplit('/').next().unwrap_or(path)
    }

    /// A client connected as the superuser to database `db` over the socket.
    pub fn client(&self, db: &str) -> Result<postgres::Client, postgres::Error> {
        postgres::Client::connect(&self.url(db), postgres::NoTls)
    }

    /// Creates a new empty database with a unique name and returns its socket URL.
    pub fn fresh_database(&self) -> String {
        // CREATE DATABASE copies template1; two at once can find it busy
        static CREATE: Mutex<()> = Mutex::new(());
        let _one = CREATE.lock().unwrap_or_else(|p| p.into_inner());
        let name = format!("t{}", unique());
        let mut c = self
            .client("postgres")
            .unwrap_or_else(|e| panic!("connect to the throwaway cluster: {e}"));
        c.batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("CREATE DATABASE {name}: {e}"));
        self.url(&name)
    }

    /// Stops the server at once (as a crash would) but keeps its data: [`Cluster::resume`]
    /// starts it again on the same port, as an outage that ends would.
    pub fn pause(&mut self) {
        if !self.stopped {
            self.stopped = true;
            let _ = self
                .tool("pg_ctl")
                .arg("-D")
                .arg(self.data())
                .args(["stop", "-m", "immediate", "-w"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }

    /// Starts a paused server again.
    pub fn resume(&mut self) -> Result<(), String> {
        if self.stopped {
            self.pg_ctl_start()?;
            self.stopped = false;
        }
        Ok(())
    }

    /// Stops the server at once (as a crash would) and removes its directory.
    pub fn stop(&mut self) {
        if !self.stopped {
            self.stopped = true;
            let _ = self
                .tool("pg_ctl")
                .arg("-D")
                .arg(self.data())
                .args(["stop", "-m", "immediate", "-w"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}
