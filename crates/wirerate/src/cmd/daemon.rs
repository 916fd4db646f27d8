//! `serve -D` and `-I`: run in the background, detached from the terminal, and say the
//! process id in a file.

use std::os::fd::AsRawFd;
use std::path::Path;

use anyhow::Context as _;

/// Writes `pid` and a newline to `path`, replacing what was there.
pub fn write_pidfile(path: &Path, pid: u32) -> anyhow::Result<()> {
    std::fs::write(path, format!("{pid}\n"))
        .with_context(|| format!("cannot write the pid file {}", path.display()))
}

/// Forks: the parent writes the child's id to the pid file and exits 0; the child starts
/// a new session without a terminal and goes on. Standard input, and output unless it goes
/// to a log file, are /dev/null from then on. Call only while the process has one thread.
pub fn detach(pidfile: Option<&Path>, keep_output: bool) -> anyhow::Result<()> {
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .context("cannot open /dev/null")?;
    // SAFETY: the process has a single thread here (nothing has been spawned yet), so the
    // child is a complete copy; both sides only call fork-safe code until they go on.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        anyhow::bail!("cannot fork: {}", std::io::Error::last_os_error());
    }
    if pid > 0 {
        if let Some(p) = pidfile {
            if let Err(e) = write_pidfile(p, pid as u32) {
                eprintln!("wirerate: {e:#}");
                // SAFETY: ends the child we just made, by its id.
                unsafe { libc::kill(pid, libc::SIGTERM) };
                std::process::exit(1);
            }
        }
        std::process::exit(0);
    }
    // SAFETY: setsid has no preconditions; dup2 onto the standard descriptors of a file
    // we hold open.
    unsafe {
        libc::setsid();
        libc::dup2(null.as_raw_fd(), libc::STDIN_FILENO);
        if !keep_output {
            libc::dup2(null.as_raw_fd(), libc::STDOUT_FILENO);
            libc::dup2(null.as_raw_fd(), libc::STDERR_FILENO);
        }
    }
    Ok(())
}
