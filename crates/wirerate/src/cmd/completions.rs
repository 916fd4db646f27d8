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
    if let Shell::Bash = shell {
        buf = bash_iperf3_words(&buf);
    }
    write_out(&buf)
}

/// iperf3's `-c HOST` and `-s` name the subcommand (`run`, `serve`) wherever they come
/// among the first options: the bash script completes as if the subcommand's name stood
/// there, through a function around the generated one.
fn bash_iperf3_words(script: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(script)
        .replace("complete -F _wirerate ", "complete -F _wirerate_iperf3 ");
    let wrapper = r#"
# `wirerate -c HOST …` and `wirerate -s …` are `wirerate run HOST …` and `wirerate serve …`
_wirerate_iperf3() {
    local i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${COMP_WORDS[i]}" in
            run|rr|sweep|serve) break ;;
            -c|--client) COMP_WORDS[i]=run; break ;;
            -s|--server) COMP_WORDS[i]=serve; break ;;
        esac
    done
    _wirerate "$@"
}
"#;
    let at = text.find("\nif [[ \"${BASH_VERSINFO").unwrap_or(text.len());
    let mut out = String::with_capacity(text.len() + wrapper.len());
    out.push_str(&text[..at]);
    out.push_str(wrapper);
    out.push_str(&text[at..]);
    out.into_bytes()
}

/// Writes the manual page (roff) of `cmd`: the command, the list of subcommands, then
/// each subcommand's synopsis, description and options as subsections of a section of its
/// own, and the exit status, examples, environment and files. Everything is on this one
/// page: no page per subcommand is installed, so none is referred to.
pub fn man(_args: ManArgs, cmd: clap::Command) -> anyhow::Result<ExitCode> {
    let mut buf = Vec::new();
    let top = clap_mangen::Man::new(cmd.clone()).title("WIRERATE");
    top.render_title(&mut buf)?;
    top.render_name_section(&mut buf)?;
    top.render_synopsis_section(&mut buf)?;
    top.render_description_section(&mut buf)?;
    top.render_options_section(&mut buf)?;
    buf.extend_from_slice(b".SH SUBCOMMANDS\n");
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        let line = format!(
            ".TP\n\\fBwirerate {}\\fR\n{} (section WIRERATE {} below)\n",
            sub.get_name(),
            roff_text(&about),
            sub.get_name().to_uppercase()
        );
        buf.extend_from_slice(line.as_bytes());
    }
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
    buf.extend_from_slice(MAN_TAIL.as_bytes());
    top.render_version_section(&mut buf)?;
    write_out(&buf)
}

/// Text for roff: a backslash doubled, a leading dot or quote kept from reading as a request.
fn roff_text(s: &str) -> String {
    let s = s.replace('\\', "\\\\");
    if s.starts_with('.') || s.starts_with('\'') {
        format!("\\&{s}")
    } else {
        s
    }
}

/// The sections after the subcommands.
const MAN_TAIL: &str = r#".SH "EXIT STATUS"
.TP
\fB0\fR
Success.
.TP
\fB1\fR
The test failed: refused, unreachable or silent peer, a broken stream, a result that
could not be stored.
.TP
\fB2\fR
Bad usage: an option or value that cannot be taken; the error says which.
.TP
\fB3\fR
\fBcompare \-\-fail\-if\-slower\fR found a significant slowdown beyond the threshold.
.TP
\fB130\fR
The test was interrupted (Ctrl\-C); what was measured until then is printed and stored,
marked interrupted.
.SH EXAMPLES
.TP
\fBwirerate run\fR
A 10 s TCP test against an embedded server on loopback.
.TP
\fBwirerate serve\fR
Serve tests on port 5350 (iperf3 clients too).
.TP
\fBwirerate run HOST \-P 4 \-t 30 \-R\fR
Four streams for 30 s, the server sending.
.TP
\fBwirerate \-c HOST \-u \-b 100M\fR
UDP paced at 100 Mbit/s, in iperf3's spelling.
.TP
\fBwirerate run HOST \-\-repeat 10 \-\-label k6.8\fR
Ten runs with their statistics, stored under a label.
.TP
\fBwirerate compare k6.8 k6.9 \-\-fail\-if\-slower 5\fR
Exit 3 when k6.9 is significantly more than 5 % slower than k6.8.
.TP
\fBwirerate rr HOST\fR
TCP_RR: 1\-byte transactions and round\-trip percentiles.
.TP
\fBwirerate sweep HOST \-\-format netpipe\fR
A NetPIPE\-style message\-size sweep.
.SH ENVIRONMENT
.TP
\fBWIRERATE_DB\fR
The results database: a SQLite file path or a postgres:// URL (as \fB\-\-db\fR).
.TP
\fBWIRERATE_PASSWORD\fR
The password for \fB\-\-user\fR, instead of a prompt.
.SH FILES
.TP
\fI$XDG_DATA_HOME/wirerate/results.db\fR
The results database (else \fI~/.local/share/wirerate/results.db\fR).
.TP
\fI~/.config/wirerate/known_servers\fR
Remembered TLS server keys.
"#;

fn write_out(buf: &[u8]) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    out.write_all(buf)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
