//! Helpers for end-to-end tests of the real binary: a free port, a server child that is
//! killed by PID when the test ends, commands bounded in time, and the turn of heavy tests.

pub mod fleet;
pub mod history;
pub mod lab;
pub mod prom;

use std::cell::Cell;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

thread_local! {
    /// Whether this thread holds the heavy tests' turn.
    static HEAVY_HERE: Cell<bool> = const { Cell::new(false) };
}

/// The turn of a heavy test, held until dropped: see [`heavy`].
pub struct Heavy(Option<MutexGuard<'static, ()>>);

/// Waits until no other heavy test of this binary runs. Heavy are the tests that build a lab
/// (flows of two labs measured at once on two shared cores drift from the wire's model) and
/// those whose verdict or timing another test's load would sway: CPU verdicts, idle and
/// handshake timeouts, the breaker, latency under load. The other tests run beside them, as
/// they ran beside each other when every file was a binary of its own. A thread that holds
/// the turn already gets one that holds nothing, so a heavy test may build a lab.
pub fn heavy() -> Heavy {
    static TURN: Mutex<()> = Mutex::new(());
    if HEAVY_HERE.get() {
        return Heavy(None);
    }
    let turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    HEAVY_HERE.set(true);
    Heavy(Some(turn))
}

impl Drop for Heavy {
    fn drop(&mut self) {
        if self.0.is_some() {
            HEAVY_HERE.set(false);
        }
    }
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_wirerate")
}

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A results database private to this test process, so tests never write to the user's.
pub fn test_db() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("results.db")
}

/// The binary as a command that stores into the test database.
pub fn wr() -> Command {
    let mut c = Command::new(bin());
    c.env("WIRERATE_DB", test_db());
    c
}

/// The binary as a command with no database of its own: the test names one (`--db`,
/// `WIRERATE_DB`) or expects none.
pub fn bare() -> Command {
    let mut c = Command::new(bin());
    c.env_remove("WIRERATE_DB");
    c
}

/// Runs the binary with `args`, killing it if it outlives `limit`.
pub fn run(args: &[&str], limit: Duration) -> Output {
    wait_bounded(spawn_piped(args), limit)
}

/// Runs [`bare`] with `args`, no input, killing it if it outlives `limit`.
pub fn run_bare(args: &[&str], limit: Duration) -> Output {
    run_cmd(bare(), args, limit)
}

/// Runs `cmd` (the binary with an environment of the test's choosing) with `args`, no
/// input, its output on pipes, killing it if it outlives `limit`.
pub fn run_cmd(cmd: Command, args: &[&str], limit: Duration) -> Output {
    wait_bounded(spawn_cmd(cmd, args, Stdio::piped), limit)
}

/// A quick test against the server on 127.0.0.1:`port`: 4 MiB, one JSON document.
pub fn quick_test(port: u16) -> Output {
    let p = port.to_string();
    let args = ["run", "127.0.0.1", "-p", &p, "-n", "4M", "--json"];
    run(&args, Duration::from_secs(30))
}

/// Starts the binary with `args`, no input, its output on pipes.
pub fn spawn_piped(args: &[&str]) -> Child {
    spawn_with(args, Stdio::piped)
}

/// Starts the binary with `args`, no input, its output dropped (a client to kill, say).
pub fn spawn_quiet(args: &[&str]) -> Child {
    spawn_with(args, Stdio::null)
}

fn spawn_with(args: &[&str], out: fn() -> Stdio) -> Child {
    spawn_cmd(wr(), args, out)
}

fn spawn_cmd(mut cmd: Command, args: &[&str], out: fn() -> Stdio) -> Child {
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(out())
        .stderr(out())
        .spawn()
        .expect("spawn wirerate")
}

/// Waits for `child`, killing it if it outlives `limit`. Its stdout and stderr are read
/// while it runs: a child that writes more than a pipe holds (64 KiB) would otherwise block
/// on its write while this waits for it to exit.
pub fn wait_bounded(mut child: Child, limit: Duration) -> Output {
    fn drain<R: Read + Send + 'static>(r: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    }
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let start = Instant::now();
    let status = loop {
        match child.try_wait().expect("try_wait") {
            Some(status) => break status,
            None if start.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                let err = err.join().unwrap_or_default();
                panic!(
                    "command exceeded {limit:?}; stderr: {}",
                    String::from_utf8_lossy(&err)
                );
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

/// Parses stdout as JSON.
pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A `wirerate serve` child, killed by PID on drop. Its log (stderr) is read as it comes, so
/// a test can wait for a line the server writes just after its client has the result.
pub struct ServerProc {
    pub child: Child,
    pub port: u16,
    log: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl ServerProc {
    /// A server on a free port. A port found free may be taken before the server binds it
    /// (another test's outgoing connection, or a connect to it that met itself), so a server
    /// that exits instead of listening is started again on another port, 5 times at most.
    pub fn start(extra: &[&str]) -> ServerProc {
        let mut why = String::new();
        for _ in 0..5 {
            match ServerProc::try_start_on(free_port(), extra) {
                Ok(s) => return s,
                Err(e) => why = e,
            }
        }
        panic!("the server did not start on any of 5 free ports: {why}");
    }

    /// A server on a given port (one that a stopped server used, say).
    pub fn start_on(port: u16, extra: &[&str]) -> ServerProc {
        ServerProc::try_start_on(port, extra).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A server on `port`, once it listens there; why not, if it exited first.
    fn try_start_on(port: u16, extra: &[&str]) -> Result<ServerProc, String> {
        let p = port.to_string();
        let mut args = vec!["serve", "-B", "127.0.0.1", "-p", &p];
        args.extend_from_slice(extra);
        let child = wr()
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn server");
        let mut child = child;
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let reader = child.stderr.take().map(|mut err| {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = err.read(&mut buf) {
                    log.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            })
        });
        let s = ServerProc {
            child,
            port,
            log,
            reader,
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut s = s;
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
                // a connect that met itself also succeeds: the server must still be there
                std::thread::sleep(Duration::from_millis(50));
                if s.child.try_wait().ok().flatten().is_none() {
                    return Ok(s);
                }
            }
            if let Ok(Some(status)) = s.child.try_wait() {
                let log = s.stop();
                return Err(format!("server on {addr} exited ({status}): {log}"));
            }
            if Instant::now() >= deadline {
                let log = s.stop();
                return Err(format!("server on {addr} did not start: {log}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends the server SIGHUP (reload its users and limits).
    pub fn hangup(&self) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: sends a signal to our own child, by its id.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
    }

    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// What the server has logged so far.
    pub fn log(&self) -> String {
        String::from_utf8_lossy(&self.log.lock().unwrap()).into_owned()
    }

    /// Stops the server and returns what it logged.
    pub fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        self.log()
    }

    /// Stops the server once its log holds `needle` (5 s at most: the assertion that follows
    /// then says what was missing) and returns what it logged.
    pub fn stop_after(self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.log().contains(needle) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stop()
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits (5 s at most) until something accepts TCP connections at `addr`; `what` names it
/// when the wait fails the test.
pub fn wait_listening(addr: SocketAddr, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
        assert!(Instant::now() < deadline, "{what} on {addr} did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `out`, once it is checked that the command succeeded (its stderr, under `what`, if not).
pub fn succeeded(out: Output, what: &str) -> Output {
    assert!(out.status.success(), "{what}: {}", stderr(&out));
    out
}

/// The stdout of a command that must succeed (its stderr, under `what`, if it did not).
pub fn ok(out: &Output, what: &str) -> String {
    assert!(out.status.success(), "{what}: {}", stderr(out));
    stdout(out)
}

/// `wirerate user add NAME` into the users file (few hash iterations, for speed), with the
/// password from the environment.
pub fn add_user(users: &Path, name: &str, password: &str) {
    let out = wr()
        .args(["user", "add", name, "--users", users.to_str().unwrap()])
        .args(["--iterations", "4096"])
        .env("WIRERATE_PASSWORD", password)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Every line of a JSON log; a line that does not parse fails the test.
pub fn json_lines(log: &str) -> Vec<serde_json::Value> {
    log.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The lines of a JSON log file (none while it does not exist yet).
pub fn log_lines(file: &Path) -> Vec<serde_json::Value> {
    json_lines(&std::fs::read_to_string(file).unwrap_or_default())
}

/// The log file's lines once `pred` holds of them, or whatever it holds after a few seconds
/// (a server writes a test's line just after its client has the result).
pub fn log_until(
    file: &Path,
    pred: impl Fn(&[serde_json::Value]) -> bool,
) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let log = log_lines(file);
        if pred(&log) || Instant::now() > deadline {
            return log;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A JSON number; anything else fails the test, naming what it was.
pub fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A JSON count; anything else fails the test, naming what it was.
pub fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Exit code, stdout, stderr; and a check that nothing panicked.
pub fn outcome(o: &Output) -> (i32, String, String) {
    let (out, err) = (stdout(o), stderr(o));
    assert!(!err.contains("panicked"), "{err}");
    (o.status.code().unwrap_or(-1), out, err)
}

/// The threads of a process we started.
pub fn threads(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

/// A TCP connection to the server on loopback from the address `local`.
pub fn connect_from(local: &str, port: u16) -> TcpStream {
    let local: SocketAddr = format!("{local}:0").parse().unwrap();
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.bind(&local.into()).unwrap();
    let to = SocketAddr::from(([127, 0, 0, 1], port));
    sock.connect_timeout(&to.into(), Duration::from_secs(5))
        .unwrap();
    sock.into()
}
