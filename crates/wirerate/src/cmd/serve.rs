//! `wirerate serve`: placeholder until the subcommand lands.

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'wirerate serve' is not built yet")
}
