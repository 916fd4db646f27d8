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
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            let chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
            eprintln!("wirerate: {}", chain.join(": "));
            if e.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
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
            let text = e.render().to_string();
            let first = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("bad usage");
            eprintln!("wirerate: {}", first.trim_start_matches("error: "));
            ExitCode::from(2)
        }
    }
}

/// A peer that goes away must give EPIPE on write, never kill the process.
pub fn ignore_sigpipe() {
    // SAFETY: setting a signal's disposition to SIG_IGN has no preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// Writes one line to stdout. A reader that went away (`| head`) ends the program cleanly,
/// as a closed pipe should, instead of a panic.
pub fn say(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.write_all(b"\n")) {
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
