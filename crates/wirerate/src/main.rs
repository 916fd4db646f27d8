//! `wirerate`: measures how fast data really moves between two hosts, what it costs in CPU,
//! how close it comes to what the wire can carry, and why it is not faster.
//!
//! The binary parses arguments with clap, validates them into the types the library crates
//! take, and maps failures to exit codes: 0 success, 1 a runtime or peer failure, 2 bad
//! usage. Every error is printed as one line.

mod cmd;
mod exit;
mod interrupt;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "wirerate",
    version,
    about = "Measure network throughput, its CPU cost, and how close it comes to the wire",
    long_about = "Measure how fast data really moves between two hosts (TCP and UDP), what it \
costs in CPU on both ends, how close it comes to what the wire can carry, and why it is not \
faster.\n\nSizes take K, M, G, T as powers of 1024 (128K = 131072 bytes); rates take K, M, G, \
T as powers of 1000 (10M = 10000000 bit/s)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a test against a wirerate server; with no HOST, against an embedded loopback server
    Run(Box<cmd::run::Args>),
    /// Request/response latency and transaction rate (TCP_RR, TCP_CRR, UDP_RR)
    Rr(Box<cmd::rr::Args>),
    /// Latency under load: idle, download, upload and both, with probes; RPM and the queue
    Rpm(Box<cmd::rpm::Args>),
    /// NetPIPE-style message-size sweep: throughput and one-way latency per size
    Sweep(Box<cmd::sweep::Args>),
    /// Serve tests to wirerate clients
    Serve(Box<cmd::serve::Args>),
    /// Prometheus exporter: /probe runs a test against an allowed server, /metrics its counters
    Exporter(Box<cmd::exporter::Args>),
    /// Users of `serve --users`: add, remove, list (salted verifiers, never passwords)
    User(cmd::user::Args),
    /// The wire-rate model: what a link can carry for a protocol and MTU
    Wire(cmd::wire::Args),
    /// Classic ttcp: its flags, raw-bytes wire protocol and report lines
    Ttcp(cmd::ttcp::Args),
    /// Emulated links: hosts in network namespaces, two on a shaped veth or up to 16 on a
    /// bridge, each link shaped (needs root)
    Lab(cmd::lab::Args),
    /// Test plans over many agents (mesh, pairs, star), worked through a PostgreSQL queue
    Plan(cmd::plan::Args),
    /// List stored runs, or export them as CSV or JSON
    History(cmd::history::Args),
    /// Store saved JSON results in the results database
    Import(cmd::import::Args),
    /// Show one stored run in full
    Show(cmd::show::Args),
    /// Compare two sets of runs: change, confidence interval, p-value and a verdict
    Compare(cmd::compare::Args),
    /// Where the level of goodput (or another figure) shifted in a label's or a host pair's
    /// history: the run, the medians before and after, the change with its interval, p
    Changes(cmd::changes::Args),
    /// One self-contained HTML report of charts from stored runs or saved files
    Report(cmd::report::Args),
    /// Print a shell completion script (bash, zsh, fish)
    Completions(cmd::completions::Args),
    /// Print the manual page (roff)
    Man(cmd::completions::ManArgs),
}

/// iperf3's way in: `wirerate -c HOST …` is `wirerate run HOST …` and `wirerate -s …` is
/// `wirerate serve …` (`--client`, `--server` too). As in iperf3, options may come before
/// `-c`/`-s` (`wirerate -p 5201 -c HOST`): the first `-c HOST` or `-s` among leading options
/// names the subcommand, which is moved to the front.
fn iperf3_argv(mut args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let text = |i: usize| args.get(i).and_then(|a| a.to_str()).unwrap_or_default();
    if !text(1).starts_with('-') {
        return args;
    }
    let found = (1..args.len()).find_map(|i| match text(i) {
        "-c" | "--client" if !text(i + 1).is_empty() && !text(i + 1).starts_with('-') => {
            Some((i, "run"))
        }
        "-s" | "--server" => Some((i, "serve")),
        _ => None,
    });
    if let Some((i, command)) = found {
        args.remove(i);
        args.insert(1, command.into());
    }
    args
}

fn main() -> ExitCode {
    exit::ignore_sigpipe();
    let argv = iperf3_argv(std::env::args_os().collect());
    let cli = match Cli::try_parse_from(argv) {
        Ok(c) => c,
        Err(e) => return exit::clap_error(e),
    };
    // iperf3's -J reports an error as a JSON document too, so a script reading the document
    // learns why there is no result
    let json_errors = matches!(&cli.command, Command::Run(a) if a.json);
    let stream_errors = matches!(&cli.command, Command::Run(a) if a.json_stream);
    let result = match cli.command {
        Command::Run(a) => cmd::run::run(*a),
        Command::Rr(a) => cmd::rr::run(*a),
        Command::Rpm(a) => cmd::rpm::run(*a),
        Command::Sweep(a) => cmd::sweep::run(*a),
        Command::Serve(a) => cmd::serve::run(*a),
        Command::Exporter(a) => cmd::exporter::run(*a),
        Command::User(a) => cmd::user::run(a),
        Command::Wire(a) => cmd::wire::run(a),
        Command::Ttcp(a) => cmd::ttcp::run(a),
        Command::Lab(a) => cmd::lab::run(a),
        Command::Plan(a) => cmd::plan::run(a),
        Command::History(a) => cmd::history::run(a),
        Command::Import(a) => cmd::import::run(a),
        Command::Show(a) => cmd::show::run(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Changes(a) => cmd::changes::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Completions(a) => cmd::completions::run(a, Cli::command()),
        Command::Man(a) => cmd::completions::man(a, Cli::command()),
    };
    if json_errors || stream_errors {
        if let Err(e) = &result {
            exit::print_json_error(e, stream_errors);
        }
    }
    exit::finish(result)
}

#[cfg(test)]
mod tests {
    use super::iperf3_argv;

    fn argv(s: &str) -> Vec<String> {
        let os = iperf3_argv(s.split(' ').map(Into::into).collect());
        os.into_iter().map(|a| a.into_string().unwrap()).collect()
    }

    #[test]
    fn iperf3_spellings_name_the_subcommand_wherever_they_come() {
        assert_eq!(
            argv("wirerate -c h -t 5"),
            ["wirerate", "run", "h", "-t", "5"]
        );
        assert_eq!(
            argv("wirerate -p 5701 -c h"),
            ["wirerate", "run", "-p", "5701", "h"]
        );
        assert_eq!(
            argv("wirerate -p 5201 -s -1"),
            ["wirerate", "serve", "-p", "5201", "-1"]
        );
        assert_eq!(argv("wirerate run -c h"), ["wirerate", "run", "-c", "h"]);
        // `-c` with no host after it is left to clap's error
        assert_eq!(argv("wirerate -t 5 -c"), ["wirerate", "-t", "5", "-c"]);
    }

    #[test]
    fn run_help_states_the_trial_limit_of_find_max() {
        use clap::CommandFactory;
        let mut cmd = super::Cli::command();
        let help = cmd
            .find_subcommand_mut("run")
            .expect("a run subcommand")
            .render_long_help()
            .to_string();
        let limit = format!("{} trials at most", crate::cmd::findmax::MAX_STEPS);
        assert!(help.contains(&limit), "{help}");
    }
}
