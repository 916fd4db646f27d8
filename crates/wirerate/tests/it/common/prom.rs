//! Helpers of the Prometheus tests: an exporter child, a plain HTTP GET, reading an
//! exposition, and Prometheus' own tools (skipped with a message when missing, unless
//! WIRERATE_REQUIRE_PROMETHEUS is set, as CI sets it after installing them).

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, wait_listening, wr};

pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `wirerate exporter` on a free loopback port.
pub fn exporter(allow: &str, extra: &[&str]) -> (Proc, SocketAddr) {
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let listen = addr.to_string();
    let child = wr()
        .args(["exporter", "--listen", &listen, "--allow", allow])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn exporter");
    let p = Proc(child);
    wait_listening(addr, "exporter");
    (p, addr)
}

/// One GET; the status and the body.
pub fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    // HTTP/1.0: the answer is never chunked, and ends with the connection
    let mut req = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read the answer");
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {out:?}"));
    let body = out
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

/// The value of one series (name and labels as written) in an exposition.
pub fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.parse().expect("a number"))
}

/// The family names an exposition declares.
pub fn families(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect()
}

/// Whether Prometheus' tools are here; false (with a message) when a test should skip.
pub fn have_prometheus(test: &str) -> bool {
    let found = ["promtool", "prometheus"].iter().all(|p| {
        Command::new(p)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok()
    });
    if !found {
        assert!(
            std::env::var_os("WIRERATE_REQUIRE_PROMETHEUS").is_none(),
            "{test}: WIRERATE_REQUIRE_PROMETHEUS is set but promtool or prometheus is missing"
        );
        eprintln!(
            "SKIPPED {test}: Prometheus is not installed (Debian: apt-get install prometheus)"
        );
    }
    found
}

/// `promtool check metrics` over an exposition: its lint findings fail the test.
pub fn promtool_check(text: &str, what: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn promtool");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = super::wait_bounded(child, Duration::from_secs(30));
    assert!(
        out.status.success(),
        "promtool check metrics on {what}: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub const SCRAPE: (&str, &str) = ("X-Prometheus-Scrape-Timeout-Seconds", "10");

pub fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A Prometheus on a free loopback port with its own config and storage in `dir`; ended by
/// its PID when dropped.
pub struct Prometheus {
    pub proc: Proc,
    pub web: SocketAddr,
    log: PathBuf,
}

impl Prometheus {
    pub fn start(dir: &Path, config: &str) -> Prometheus {
        let file = dir.join("prometheus.yml");
        std::fs::write(&file, config).unwrap();
        let web = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let log = dir.join("prometheus.log");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={web}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawn prometheus");
        Prometheus {
            proc: Proc(child),
            web,
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// GETs `path` of Prometheus' API until `done` takes its JSON answer (and returns what
    /// it returned), for at most `limit`; panics with Prometheus' log after that, or when
    /// it exits.
    pub fn wait_for<T>(
        &mut self,
        path: &str,
        limit: Duration,
        done: impl Fn(&serde_json::Value) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + limit;
        let mut last = String::new();
        loop {
            if Instant::now() > deadline {
                panic!(
                    "{path}: not there in {limit:?}: {last}\nits log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(500));
            if let Ok(Some(status)) = self.proc.0.try_wait() {
                panic!("prometheus exited ({status}):\n{}", self.log());
            }
            if TcpStream::connect_timeout(&self.web, Duration::from_millis(200)).is_err() {
                continue;
            }
            let (status, body) = get(self.web, path, &[]);
            last = body;
            if status != 200 {
                continue;
            }
            if let Some(v) = serde_json::from_str(&last).ok().as_ref().and_then(&done) {
                return v;
            }
        }
    }
}
