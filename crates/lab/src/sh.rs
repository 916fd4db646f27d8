//! Running `ip`, `tc` and `ethtool`: arguments passed as a list (never through a shell),
//! output captured, and a failure turned into an error that names the command and quotes
//! what it printed.

use std::io::ErrorKind;
use std::process::{Command, Stdio};

use crate::LabError;

/// Runs `program args…` and returns its standard output.
pub fn run<S: AsRef<str>>(program: &str, args: &[S]) -> Result<String, LabError> {
    let line = command_line(program, args);
    let out = Command::new(program)
        .args(args.iter().map(|a| a.as_ref()))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| spawn_error(program, e))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stderr = stderr.trim();
        Err(LabError::Failed {
            command: line,
            detail: if stderr.is_empty() {
                out.status.to_string()
            } else {
                stderr.replace('\n', "; ")
            },
        })
    }
}

/// Turns a failure to start a program into an error that says what to install.
pub fn spawn_error(program: &str, e: std::io::Error) -> LabError {
    if e.kind() == ErrorKind::NotFound {
        let package = if program == "ethtool" {
            "ethtool"
        } else {
            "iproute2"
        };
        LabError::Missing {
            program: program.to_string(),
            package,
        }
    } else {
        LabError::Spawn {
            program: program.to_string(),
            source: e,
        }
    }
}

fn command_line<S: AsRef<str>>(program: &str, args: &[S]) -> String {
    let mut line = program.to_string();
    for a in args {
        line.push(' ');
        line.push_str(a.as_ref());
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_program_says_what_to_install() {
        let e = run("wirerate-no-such-program", &["x"]).unwrap_err();
        assert!(matches!(e, LabError::Missing { .. }), "{e}");
    }

    #[test]
    fn a_failing_command_is_named() {
        let e = run("sh", &["-c", "echo oops >&2; exit 3"]).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("sh -c") && msg.contains("oops"), "{msg}");
    }

    #[test]
    fn output_is_returned() {
        assert_eq!(run("echo", &["hi"]).unwrap(), "hi\n");
    }
}
