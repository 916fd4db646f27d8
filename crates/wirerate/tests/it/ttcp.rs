//! End-to-end tests of `wirerate ttcp` with the real binary over 127.0.0.1: pairs of
//! wirerate ttcp, plain sockets standing in for a classic ttcp at the other end (both
//! directions, TCP and UDP), a file copied byte for byte, and the error paths.
//!
//! Every child is waited for with a deadline and killed by its PID when a test fails.

use std::fs;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(20);

/// A child process that is killed when the guard drops unless it already ended.
struct Proc(Option<Child>);

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

struct Finished {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: String,
}

impl Proc {
    fn start(args: &[&str], stdin: Stdio, stdout: Stdio) -> Proc {
        let child = Command::new(env!("CARGO_BIN_EXE_wirerate"))
            .arg("ttcp")
            .args(args)
            .stdin(stdin)
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn wirerate");
        Proc(Some(child))
    }

    fn piped(args: &[&str]) -> Proc {
        Proc::start(args, Stdio::null(), Stdio::piped())
    }

    /// Waits for the end within the deadline, collecting the output; panics (and so kills
    /// the child in drop) on overrun.
    fn finish(mut self) -> Finished {
        let mut child = self.0.take().expect("child");
        let mut out = child.stdout.take();
        let mut err = child.stderr.take();
        let out_reader = thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(o) = out.as_mut() {
                let _ = o.read_to_end(&mut v);
            }
            v
        });
        let err_reader = thread::spawn(move || {
            let mut s = String::new();
            if let Some(e) = err.as_mut() {
                let _ = e.read_to_string(&mut s);
            }
            s
        });
        let began = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().expect("try_wait") {
                break st;
            }
            if began.elapsed() > DEADLINE {
                let _ = child.kill();
                let _ = child.wait();
                panic!("wirerate ttcp overran {DEADLINE:?}");
            }
            thread::sleep(Duration::from_millis(10));
        };
        Finished {
            status,
            stdout: out_reader.join().unwrap_or_default(),
            stderr: err_reader.join().unwrap_or_default(),
        }
    }
}

/// A port that was free a moment ago, for the given transport.
fn free_port(udp: bool) -> u16 {
    if udp {
        UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    } else {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }
}

/// Waits until the kernel shows a socket on `port` (listening for TCP, bound for UDP).
fn wait_bound(port: u16, udp: bool) {
    let files: &[&str] = if udp {
        &["/proc/net/udp", "/proc/net/udp6"]
    } else {
        &["/proc/net/tcp", "/proc/net/tcp6"]
    };
    let needle = format!(":{port:04X} ");
    let began = Instant::now();
    while began.elapsed() < DEADLINE {
        let found = files.iter().any(|f| {
            fs::read_to_string(f).unwrap_or_default().lines().any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3
                    && format!("{} ", cols[1]).ends_with(&needle)
                    && (udp || cols[3] == "0A")
            })
        });
        if found {
            return;
        }
        thread::sleep(Duration::from_millis(10));
    }
    panic!("nothing bound to port {port}");
}

fn lines_with<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.starts_with(prefix)).collect()
}

/// Checks the shape of the three closing lines of one side and returns the byte count.
fn check_closing_lines(text: &str, p: &str, calls: Option<u64>) -> u64 {
    let rate = lines_with(text, &format!("{p}: "))
        .into_iter()
        .find(|l| l.ends_with(" KB/sec +++"))
        .unwrap_or_else(|| panic!("no rate line in {text}"));
    let words: Vec<&str> = rate.split_whitespace().collect();
    assert_eq!(words[2..4], ["bytes", "in"], "{rate}");
    assert_eq!(words[5..8], ["real", "seconds", "="], "{rate}");
    let bytes: u64 = words[1].parse().expect("bytes");
    for w in [words[4], words[8]] {
        let (_, dec) = w.split_once('.').expect("two decimals");
        assert_eq!(dec.len(), 2, "{rate}");
    }
    let io = lines_with(text, &format!("{p}: "))
        .into_iter()
        .find(|l| l.contains(" I/O calls, msec/call = "))
        .unwrap_or_else(|| panic!("no I/O line in {text}"));
    if let Some(c) = calls {
        assert!(io.starts_with(&format!("{p}: {c} I/O calls, ")), "{io}");
    }
    assert!(io.contains(", calls/sec = "), "{io}");
    let usage = lines_with(text, &format!("{p}: "))
        .into_iter()
        .find(|l| l.contains("user ") && l.ends_with("csw"))
        .unwrap_or_else(|| panic!("no usage line in {text}"));
    let fields: Vec<&str> = usage.split_whitespace().skip(1).collect();
    let suffixes = ["user", "sys", "real", "%", "d", "maxrss", "pf", "csw"];
    assert_eq!(fields.len(), suffixes.len(), "{usage}");
    for (f, s) in fields.iter().zip(suffixes) {
        assert!(f.ends_with(s), "{usage}");
    }
    bytes
}

#[test]
fn tcp_pair_with_pattern_reports_classic_lines() {
    let port = free_port(false);
    let ps = port.to_string();
    let rx = Proc::piped(&["-r", "-s", "-4", "-p", &ps]);
    wait_bound(port, false);
    let tx = Proc::piped(&["-ts", "-n", "64", "-l4K", "-p", &ps, "127.0.0.1"]).finish();
    let rx = rx.finish();
    assert!(tx.status.success(), "{}", tx.stderr);
    assert!(rx.status.success(), "{}", rx.stderr);
    let tx_out = String::from_utf8_lossy(&tx.stdout);
    let rx_out = String::from_utf8_lossy(&rx.stdout);
    assert!(
        tx_out.starts_with(&format!(
            "ttcp-t: buflen=4096, nbuf=64, align=16384/0, port={port}  tcp  -> 127.0.0.1\n"
        )),
        "{tx_out}"
    );
    assert!(
        rx_out.starts_with(&format!(
            "ttcp-r: buflen=8192, nbuf=2048, align=16384/0, port={port}  tcp\n"
        )),
        "{rx_out}"
    );
    assert_eq!(check_closing_lines(&tx_out, "ttcp-t", Some(64)), 262_144);
    assert_eq!(check_closing_lines(&rx_out, "ttcp-r", None), 262_144);
    assert_eq!(
        lines_with(&tx.stderr, "ttcp-t: "),
        ["ttcp-t: socket", "ttcp-t: connect"]
    );
    assert_eq!(
        lines_with(&rx.stderr, "ttcp-r: "),
        ["ttcp-r: socket", "ttcp-r: accept from 127.0.0.1"]
    );
}

#[test]
fn plain_socket_receiver_gets_only_the_raw_pattern() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let tx = Proc::piped(&[
        "-t",
        "-s",
        "-n",
        "10",
        "-l",
        "1000",
        "-p",
        &port,
        "127.0.0.1",
    ]);
    let (mut conn, _) = listener.accept().unwrap();
    conn.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut got = Vec::new();
    conn.read_to_end(&mut got).unwrap();
    let tx = tx.finish();
    assert!(tx.status.success(), "{}", tx.stderr);
    assert_eq!(
        got.len(),
        10_000,
        "nothing but the data crosses the connection"
    );
    for (i, b) in got.iter().enumerate() {
        assert_eq!(*b, b' ' + ((i % 1000) % 95) as u8, "byte {i}");
    }
}

fn test_bytes(n: usize) -> Vec<u8> {
    // a simple xorshift stream: every byte value, no period near the buffer sizes
    let mut x: u32 = 0x9e37_79b9;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 11) as u8
        })
        .collect()
}

#[test]
fn plain_socket_sender_feeds_receiver_stdout_and_report_goes_to_stderr() {
    let port = free_port(false);
    let ps = port.to_string();
    let rx = Proc::piped(&["-r", "-4", "-p", &ps]);
    wait_bound(port, false);
    let data = test_bytes(100_003);
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    for chunk in data.chunks(7_777) {
        s.write_all(chunk).unwrap();
    }
    s.shutdown(Shutdown::Write).unwrap();
    let rx = rx.finish();
    assert!(rx.status.success(), "{}", rx.stderr);
    assert!(
        rx.stdout == data,
        "stdout must be the data and nothing else"
    );
    assert!(
        rx.stderr.starts_with("ttcp-r: buflen=8192, nbuf=2048"),
        "{}",
        rx.stderr
    );
    assert_eq!(check_closing_lines(&rx.stderr, "ttcp-r", None), 100_003);
}

#[test]
fn file_copies_byte_for_byte_through_stdin_and_stdout() {
    let dir = std::env::temp_dir().join(format!("wirerate-ttcp-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let (src, dst): (PathBuf, PathBuf) = (dir.join("in"), dir.join("out"));
    let data = test_bytes(1_234_567);
    fs::write(&src, &data).unwrap();
    let port = free_port(false);
    let ps = port.to_string();
    let rx = Proc::start(
        &["-r", "-p", &ps],
        Stdio::null(),
        Stdio::from(fs::File::create(&dst).unwrap()),
    );
    wait_bound(port, false);
    let tx = Proc::start(
        &["-t", "-l", "5000", "-p", &ps, "127.0.0.1"],
        Stdio::from(fs::File::open(&src).unwrap()),
        Stdio::piped(),
    )
    .finish();
    let rx = rx.finish();
    assert!(
        tx.status.success() && rx.status.success(),
        "{}\n{}",
        tx.stderr,
        rx.stderr
    );
    let copy = fs::read(&dst).unwrap();
    let _ = fs::remove_dir_all(&dir);
    assert!(
        copy == data,
        "copy differs: {} vs {} bytes",
        copy.len(),
        data.len()
    );
    assert_eq!(
        check_closing_lines(&String::from_utf8_lossy(&tx.stdout), "ttcp-t", None),
        1_234_567
    );
    assert_eq!(check_closing_lines(&rx.stderr, "ttcp-r", None), 1_234_567);
}

#[test]
fn udp_transmitter_frames_data_with_sentinels() {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let port = sock.local_addr().unwrap().port().to_string();
    let tx = Proc::piped(&[
        "-t",
        "-u",
        "-s",
        "-n",
        "5",
        "-l",
        "100",
        "-p",
        &port,
        "127.0.0.1",
    ])
    .finish();
    assert!(tx.status.success(), "{}", tx.stderr);
    let mut sizes = Vec::new();
    let mut buf = [0u8; 2048];
    while let Ok(n) = sock.recv(&mut buf) {
        sizes.push(n);
        if sizes.len() == 11 {
            break;
        }
    }
    assert_eq!(sizes, [4, 100, 100, 100, 100, 100, 4, 4, 4, 4, 4]);
    let out = String::from_utf8_lossy(&tx.stdout);
    assert!(out.contains("  udp  -> 127.0.0.1\n"), "{out}");
    // the sentinels are calls too: 1 + 5 + 1 + 4
    assert_eq!(check_closing_lines(&out, "ttcp-t", Some(11)), 500);
}

#[test]
fn udp_receiver_counts_between_sentinels_from_a_plain_socket() {
    let port = free_port(true);
    let ps = port.to_string();
    let rx = Proc::piped(&["-r", "-u", "-s", "-4", "-p", &ps]);
    wait_bound(port, true);
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = ("127.0.0.1", port);
    // data before the start sentinel is counted too, as in classic ttcp
    s.send_to(&[7u8; 50], to).unwrap();
    s.send_to(b"strt", to).unwrap();
    for _ in 0..3 {
        s.send_to(&[1u8; 200], to).unwrap();
    }
    s.send_to(b"end", to).unwrap();
    let rx = rx.finish();
    assert!(rx.status.success(), "{}", rx.stderr);
    let out = String::from_utf8_lossy(&rx.stdout);
    assert!(out.ends_with("csw\n"), "{out}");
    assert_eq!(check_closing_lines(&out, "ttcp-r", Some(6)), 650);
}

#[test]
fn udp_pair_ends_cleanly() {
    let port = free_port(true);
    let ps = port.to_string();
    let rx = Proc::piped(&["-rsu", "-4", "-b", "1M", "-p", &ps]);
    wait_bound(port, true);
    let tx = Proc::piped(&["-tsu", "-n", "20", "-l", "1000", "-p", &ps, "127.0.0.1"]).finish();
    let rx = rx.finish();
    assert!(
        tx.status.success() && rx.status.success(),
        "{}\n{}",
        tx.stderr,
        rx.stderr
    );
    let rx_out = String::from_utf8_lossy(&rx.stdout);
    assert!(rx_out.contains(", sockbufsize=1048576  udp\n"), "{rx_out}");
    assert!(rx.stderr.contains("ttcp-r: rcvbuf\n"), "{}", rx.stderr);
    let got = check_closing_lines(&rx_out, "ttcp-r", None);
    assert!(got <= 20_000 && got.checked_rem(1000) == Some(0), "{got}");
}

#[test]
fn udp_receiver_without_end_sentinel_stops_when_idle() {
    let port = free_port(true);
    let ps = port.to_string();
    let rx = Proc::piped(&["-r", "-u", "-s", "-4", "--udp-idle", "0.3", "-p", &ps]);
    wait_bound(port, true);
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.send_to(b"go!!", ("127.0.0.1", port)).unwrap();
    s.send_to(&[0u8; 300], ("127.0.0.1", port)).unwrap();
    let rx = rx.finish();
    assert_eq!(rx.status.code(), Some(1));
    assert_eq!(
        check_closing_lines(&String::from_utf8_lossy(&rx.stdout), "ttcp-r", Some(2)),
        300
    );
    let last = rx.stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("wirerate: ttcp-r: no end-of-data datagram within 0.3 s"),
        "{}",
        rx.stderr
    );
}

#[test]
fn verbose_prints_an_aligned_buffer_address() {
    for (offset, want) in [("0", 0usize), ("8", 8)] {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port().to_string();
        let tx = Proc::piped(&[
            "-t",
            "-s",
            "-v",
            "-n",
            "1",
            "-O",
            offset,
            "-p",
            &port,
            "127.0.0.1",
        ]);
        let (mut conn, _) = listener.accept().unwrap();
        let _ = conn.read_to_end(&mut Vec::new());
        let tx = tx.finish();
        let out = String::from_utf8_lossy(&tx.stdout);
        assert!(out.contains(" CPU seconds = "), "{out}");
        let addr = out
            .lines()
            .find_map(|l| l.strip_prefix("ttcp-t: buffer address 0x"))
            .and_then(|h| usize::from_str_radix(h, 16).ok())
            .unwrap_or_else(|| panic!("{out}"));
        assert_eq!(addr % 16384, want, "{out}");
    }
}

#[test]
fn vanished_receiver_is_a_one_line_error() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let tx = Proc::piped(&[
        "-t",
        "-s",
        "-n",
        "100000",
        "-l",
        "64K",
        "-p",
        &port,
        "127.0.0.1",
    ]);
    let (conn, _) = listener.accept().unwrap();
    thread::sleep(Duration::from_millis(50));
    drop(conn);
    drop(listener);
    let tx = tx.finish();
    assert_eq!(tx.status.code(), Some(1), "{}", tx.stderr);
    let errors: Vec<&str> = tx
        .stderr
        .lines()
        .filter(|l| l.starts_with("wirerate:"))
        .collect();
    assert_eq!(errors.len(), 1, "{}", tx.stderr);
    assert!(
        errors[0].starts_with("wirerate: ttcp-t: write: "),
        "{}",
        tx.stderr
    );
}

#[test]
fn refused_connection_is_a_one_line_error() {
    let port = free_port(false).to_string();
    let tx = Proc::piped(&["-t", "-s", "-p", &port, "127.0.0.1"]).finish();
    assert_eq!(tx.status.code(), Some(1));
    let last = tx.stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("wirerate: ttcp-t: connect: "),
        "{}",
        tx.stderr
    );
}

#[test]
fn bad_usage_exits_2_with_one_line() {
    let cases: &[&[&str]] = &[
        &["-l", "x"],
        &["-r", "-f", "q"],
        &["-t"],
        &["-r", "somehost"],
        &["-r", "-l", "0"],
        &["-tu", "-l", "100K", "127.0.0.1"],
        &["-r", "-4", "-6"],
        &["-r", "-p", "70000"],
        &["-r", "-Z"],
    ];
    for args in cases {
        let f = Proc::piped(args).finish();
        assert_eq!(f.status.code(), Some(2), "{args:?}: {}", f.stderr);
        assert_eq!(f.stderr.lines().count(), 1, "{args:?}: {}", f.stderr);
        assert!(f.stderr.starts_with("wirerate: "), "{args:?}: {}", f.stderr);
        assert!(f.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn ipv6_loopback_pair_when_available() {
    if UdpSocket::bind("[::1]:0").is_err() {
        eprintln!("skipped: no IPv6 loopback on this host");
        return;
    }
    let port = free_port(false);
    let ps = port.to_string();
    let rx = Proc::piped(&["-r", "-s", "-6", "-p", &ps]);
    wait_bound(port, false);
    let tx = Proc::piped(&["-t", "-s", "-6", "-n", "16", "-p", &ps, "::1"]).finish();
    let rx = rx.finish();
    assert!(
        tx.status.success() && rx.status.success(),
        "{}\n{}",
        tx.stderr,
        rx.stderr
    );
    assert!(
        rx.stderr.contains("ttcp-r: accept from ::1\n"),
        "{}",
        rx.stderr
    );
    assert_eq!(
        check_closing_lines(&String::from_utf8_lossy(&rx.stdout), "ttcp-r", None),
        131_072
    );
}

#[test]
fn full_block_reads_count_every_partial_read() {
    // 3 × 300 bytes with pauses, read into 450-byte buffers: with -B the reads are
    // 300+150, 150+300, then end of file: 5 calls; the data arrives whole.
    let port = free_port(false);
    let ps = port.to_string();
    let rx = Proc::piped(&["-r", "-B", "-4", "-l", "450", "-p", &ps]);
    wait_bound(port, false);
    let data = test_bytes(900);
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_nodelay(true).unwrap();
    for chunk in data.chunks(300) {
        s.write_all(chunk).unwrap();
        thread::sleep(Duration::from_millis(100));
    }
    drop(s);
    let rx = rx.finish();
    assert!(rx.status.success(), "{}", rx.stderr);
    assert!(rx.stdout == data);
    assert_eq!(check_closing_lines(&rx.stderr, "ttcp-r", Some(5)), 900);
}

#[test]
fn a_real_wirerate_run_renders_as_ttcp_lines() {
    let child = Command::new(env!("CARGO_BIN_EXE_wirerate"))
        .args([
            "run",
            "--blocks",
            "64",
            "-l",
            "8K",
            "--json",
            "-p",
            &free_port(false).to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn wirerate run");
    let run = Proc(Some(child)).finish();
    assert!(run.status.success(), "{}", run.stderr);
    let result: wirerate_core::RunResult =
        serde_json::from_slice(&run.stdout).expect("result JSON");
    let text = wirerate_render::ttcp::run_result_lines(&result);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("ttcp-t: buflen=8192, nbuf=64, align=0/0, port="),
        "{text}"
    );
    assert!(lines[0].contains("  tcp  -> "), "{text}");
    assert!(lines[1].starts_with("ttcp-t: 524288 bytes in "), "{text}");
    assert!(
        lines[2].starts_with("ttcp-t: 64 I/O calls, msec/call = "),
        "{text}"
    );
    let r_head = lines
        .iter()
        .position(|l| l.starts_with("ttcp-r: buflen=8192, nbuf=64"))
        .expect("receiver block");
    assert!(
        lines[r_head + 1].starts_with("ttcp-r: 524288 bytes in "),
        "{text}"
    );
    // usage lines, where present, have the System V form
    for l in lines.iter().filter(|l| l.contains("user ")) {
        assert!(
            l.ends_with('%') && l.contains("sys ") && l.contains("real "),
            "{l}"
        );
    }
}
