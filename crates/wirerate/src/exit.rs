//! Exit codes and the one-line error report.

use std::process::ExitCode;

/// A mistake in what the user asked for: exit status 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Returns a usage error (exit 2) with this message.
pub fn usage<T>(msg: impl Into<String>) -> anyhow::Result<T> {
    Err(UsageError(msg.into()).into())
}

/// Prints the error chain on one line and picks the exit code.
pub fn finish(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) => {
            if is_closed_stdout(&e) {
                return ExitCode::SUCCESS;
            }
            // the chain may carry a peer's or a file's words
            let chain = wirerate_engine::chain(e.as_ref());
            let line = wirerate_core::text::safe(&chain);
            match hint(&e) {
                Some(h) => eprintln!("wirerate: {line} ({h})"),
                None => eprintln!("wirerate: {line}"),
            }
            if e.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

/// What to do about a peer that said nothing for too long.
const SILENT: &str =
    "the limit is --idle-timeout (10 s by default): raise it for a slow path or a busy peer";

/// What to do about an error whose cause is a common mistake, said after the error itself.
fn hint(e: &anyhow::Error) -> Option<&'static str> {
    use wirerate_engine::EngineError;
    use wirerate_proto::iperf3::Iperf3Error;
    use wirerate_proto::ProtoError;
    e.chain().find_map(|c| {
        if let Some(EngineError::Connect { source, .. }) = c.downcast_ref::<EngineError>() {
            return match source.kind() {
                std::io::ErrorKind::ConnectionRefused => Some(
                    "nothing listens there: start `wirerate serve` on that host, or give its \
                     port with -p; an iperf3 server needs --iperf3",
                ),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => Some(
                    "no answer: check the address and any firewall between, or raise \
                     --connect-timeout",
                ),
                _ => None,
            };
        }
        // the engine carries the protocol's errors transparently: not a cause of its own
        let proto = c
            .downcast_ref::<ProtoError>()
            .or(match c.downcast_ref::<EngineError>() {
                Some(EngineError::Proto(p)) => Some(p),
                _ => None,
            });
        let iperf3_silent = matches!(
            c.downcast_ref::<EngineError>(),
            Some(EngineError::Iperf3(Iperf3Error::TimedOut(_)))
        ) || matches!(c.downcast_ref(), Some(Iperf3Error::TimedOut(_)));
        if iperf3_silent {
            return Some(SILENT);
        }
        match proto {
            Some(ProtoError::TimedOut(_)) => Some(SILENT),
            Some(ProtoError::BadMagic) => Some(
                "another program answers on that port: check the port (-p), or add --iperf3 \
                 for an iperf3 server",
            ),
            _ => None,
        }
    })
}

/// The error as iperf3's `-J` prints one: `{"error": "…"}` on standard output; as its
/// `--json-stream` does (`stream`): an `error` event.
pub fn print_json_error(e: &anyhow::Error, stream: bool) {
    if is_closed_stdout(e) {
        return;
    }
    let chain = wirerate_engine::chain(e.as_ref());
    let text = wirerate_core::text::safe(&chain);
    let doc = if stream {
        format!(
            "{{\"event\":\"error\",\"data\":{}}}",
            serde_json::json!(text)
        )
    } else {
        serde_json::json!({ "error": text }).to_string()
    };
    println!("{doc}");
}

/// Only a reader that went away from our standard output (`| head`) ends the program
/// cleanly: a broken pipe anywhere else (a server that dropped the connection) is a failure.
fn is_closed_stdout(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        let marked = c.downcast_ref::<StdoutError>().or_else(|| {
            c.downcast_ref::<std::io::Error>()?
                .get_ref()?
                .downcast_ref()
        });
        marked.is_some_and(|m| m.0.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// An error writing to standard output, marked so that the exit path can tell it from an
/// error on a socket (both can be a broken pipe).
#[derive(Debug)]
pub struct StdoutError(pub std::io::Error);

impl std::fmt::Display for StdoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("cannot write to standard output")
    }
}

impl std::error::Error for StdoutError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// Standard output whose write errors carry the [`StdoutError`] mark (inside the
/// `io::Error`, so `writeln!(…)?` works as on any writer), and through which no control
/// character reaches the terminal: what is printed may hold a peer's or a file's text
/// ([`wirerate_core::text::safe_lines`]; JSON keeps its meaning).
pub struct Stdout {
    out: std::io::StdoutLock<'static>,
    /// The start of a character cut by the end of the last write.
    partial: Vec<u8>,
}

/// Standard output, locked, with its errors marked and its text made safe.
pub fn stdout() -> Stdout {
    Stdout {
        out: std::io::stdout().lock(),
        partial: Vec::new(),
    }
}

/// `bytes` as text safe for a terminal; bytes that are not UTF-8 are escaped as `\xHH`.
/// Returns how many bytes at the end start a character that the next write completes.
fn push_safe(bytes: &[u8], out: &mut Vec<u8>) -> usize {
    let mut rest = bytes;
    loop {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.extend_from_slice(wirerate_core::text::safe_lines(s).as_bytes());
                return 0;
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                // valid UTF-8 by the check above
                let good = std::str::from_utf8(good).unwrap_or_default();
                out.extend_from_slice(wirerate_core::text::safe_lines(good).as_bytes());
                let Some(n) = e.error_len() else {
                    return bad.len();
                };
                for b in &bad[..n] {
                    out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
                }
                rest = &bad[n..];
            }
        }
    }
}

fn mark(e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), StdoutError(e))
}

impl std::io::Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut text = std::mem::take(&mut self.partial);
        text.extend_from_slice(buf);
        let mut safe = Vec::with_capacity(text.len());
        let cut = push_safe(&text, &mut safe);
        self.partial = text[text.len() - cut..].to_vec();
        self.out.write_all(&safe).map_err(mark)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush().map_err(mark)
    }
}

/// Reports a command-line parse failure: help and version as clap prints them (exit 0),
/// help shown for missing arguments in full (exit 2), and every other mistake as one line
/// (exit 2), like the errors of `finish`.
pub fn clap_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(2)
        }
        _ => {
            eprintln!("wirerate: {}", one_line(&e.render().to_string()));
            ExitCode::from(2)
        }
    }
}

/// clap's message in one line: its first paragraph (the error, and the names it lists on the
/// lines below it), without the usage and tips that follow a blank line.
fn one_line(rendered: &str) -> String {
    let mut line = String::new();
    let lines = rendered.lines().skip_while(|l| l.trim().is_empty());
    for l in lines.take_while(|l| !l.trim().is_empty()) {
        let l = l.trim().trim_start_matches("error: ");
        if !line.is_empty() {
            line.push_str(if line.ends_with(':') { " " } else { ", " });
        }
        line.push_str(l);
    }
    if line.is_empty() {
        "bad usage".to_string()
    } else {
        line
    }
}

/// A peer that goes away must give EPIPE on write, never kill the process.
pub fn ignore_sigpipe() {
    // SAFETY: setting a signal's disposition to SIG_IGN has no preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// What output lines start with: `-T`'s title, and with `--timestamps` the wall time.
struct Prefix {
    title: Option<String>,
    timestamps: bool,
}

static PREFIX: std::sync::OnceLock<Prefix> = std::sync::OnceLock::new();

/// Sets the title that starts every line of the text report, and whether live lines start
/// with the time. Once per process.
pub fn set_prefix(title: Option<String>, timestamps: bool) {
    let _ = PREFIX.set(Prefix { title, timestamps });
}

/// The title's part of a line's prefix (`TITLE:  `), or nothing.
pub fn title_prefix() -> String {
    PREFIX
        .get()
        .and_then(|p| p.title.as_deref())
        .map_or_else(String::new, |t| format!("{t}:  "))
}

/// Every line of `text` with the title in front.
pub fn with_title(text: &str) -> String {
    let t = title_prefix();
    if t.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 32);
    for l in text.split_inclusive('\n') {
        out.push_str(&t);
        out.push_str(l);
    }
    out
}

/// The local wall-clock time, `YYYY-MM-DD HH:MM:SS.mmm`.
fn wall_time() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = libc::time_t::try_from(now.as_secs()).unwrap_or(0);
    // SAFETY: localtime_r reads one time_t and fills the tm we own; a zeroed tm is valid.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&secs, &mut tm).is_null() {
            return format!("{secs}.{:03}", now.subsec_millis());
        }
        tm
    };
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        now.subsec_millis()
    )
}

/// Writes one line to stdout. A reader that went away (`| head`) ends the program cleanly,
/// as a closed pipe should, instead of a panic.
pub fn say(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut line = title_prefix();
    if PREFIX.get().is_some_and(|p| p.timestamps) {
        line.push_str(&wall_time());
        line.push(' ');
    }
    let mut out = stdout();
    let written = out
        .write_all(line.as_bytes())
        .and_then(|()| out.write_fmt(args))
        .and_then(|()| out.write_all(b"\n"));
    if let Err(e) = written {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
    }
}

/// `println!` that treats a closed stdout as the end of the program.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => { $crate::exit::say(format_args!($($arg)*)) };
}

#[cfg(test)]
mod tests {
    use super::{one_line, push_safe};

    #[test]
    fn stdout_text_has_no_control_characters_even_when_a_write_cuts_a_character() {
        let text = "host \u{1b}]0;x\u{7} \u{9b}1m ok é\n".as_bytes();
        for cut in 0..text.len() {
            let mut out = Vec::new();
            let held = push_safe(&text[..cut], &mut out);
            assert_eq!(push_safe(&text[cut - held..], &mut out), 0);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                "host \\x1b]0;x\\x07 \\u009b1m ok é\n"
            );
        }
        let mut out = Vec::new();
        assert_eq!(push_safe(b"a\x9bb", &mut out), 0);
        assert_eq!(out, b"a\\x9bb");
    }

    #[test]
    fn clap_messages_keep_the_names_on_their_next_lines() {
        let missing = "error: the following required arguments were not provided:\n  --udp\n  \
                       <HOST>\n\nUsage: wirerate run --udp <HOST>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(missing),
            "the following required arguments were not provided: --udp, <HOST>"
        );
        let unknown = "error: unexpected argument '--x' found\n\n  tip: use '-- --x'\n\nUsage: x\n";
        assert_eq!(one_line(unknown), "unexpected argument '--x' found");
        assert_eq!(one_line("\n\n"), "bad usage");
    }
}
