//! `wirerate completions SHELL` and `wirerate man`: shell completions and the manual page,
//! both generated from the same clap definitions as the parser, so they never drift.

use std::io::Write as _;
use std::process::ExitCode;

use clap_complete::Shell;

#[derive(clap::Args)]
#[command(after_help = "Install, for example:\n  \
wirerate completions bash > /etc/bash_completion.d/wirerate\n  \
wirerate completions zsh > /usr/local/share/zsh/site-functions/_wirerate\n  \
wirerate completions fish > ~/.config/fish/completions/wirerate.fish")]
pub struct Args {
    /// The shell to complete for
    #[arg(value_enum)]
    pub shell: CompletionShell,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

#[derive(clap::Args)]
#[command(after_help = "Install, for example:\n  \
wirerate man > /usr/local/share/man/man1/wirerate.1")]
pub struct ManArgs {}

/// Writes the completion script for `args.shell` of the command `cmd`.
pub fn run(args: Args, mut cmd: clap::Command) -> anyhow::Result<ExitCode> {
    let shell = match args.shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "wirerate", &mut buf);
    write_out(&buf)
}

/// Writes the manual page (roff) of `cmd`: the command, then each subcommand's synopsis,
/// description and options as subsections of a section of its own.
pub fn man(_args: ManArgs, cmd: clap::Command) -> anyhow::Result<ExitCode> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .title("WIRERATE")
        .render(&mut buf)?;
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = sub.get_name();
        let page = clap_mangen::Man::new(sub.clone().bin_name(format!("wirerate {name}")));
        let mut part = Vec::new();
        page.render_synopsis_section(&mut part)?;
        page.render_description_section(&mut part)?;
        page.render_options_section(&mut part)?;
        let part = String::from_utf8_lossy(&part);
        buf.extend_from_slice(format!(".SH \"WIRERATE {}\"\n", name.to_uppercase()).as_bytes());
        for line in part.lines() {
            // the subcommand's own sections become subsections of its section
            let line = match line.strip_prefix(".SH ") {
                Some(title) => format!(".SS {title}"),
                None => line.to_string(),
            };
            buf.extend_from_slice(line.as_bytes());
            buf.push(b'\n');
        }
    }
    write_out(&buf)
}

fn write_out(buf: &[u8]) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    out.write_all(buf)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
