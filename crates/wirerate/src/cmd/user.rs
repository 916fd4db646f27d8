//! `wirerate user add|remove|list`: the users file of `serve --users`.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use wirerate_proto::auth::{check_user, DEFAULT_ITERATIONS, MAX_ITERATIONS, MIN_ITERATIONS};
use wirerate_server::users::{new_verifier, Users};

use crate::exit::usage;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "The file holds, per user, the salted SCRAM-SHA-256 verifier of the password \
(iterations, salt, StoredKey, ServerKey), never the password; it is written readable by its \
owner only. The password is read from WIRERATE_PASSWORD, or asked for twice on the terminal.\n\n\
`serve --users FILE` then requires a login of every client (`run --tls --user NAME`); SIGHUP \
reloads the file."
)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Add a user, or set the password of one
    Add {
        /// The user name: 1 to 64 letters, digits, '.', '_', '@' or '-'
        name: String,
        #[command(flatten)]
        file: FileArg,
        /// PBKDF2 iterations of the verifier (4096 at least): each login costs the client
        /// this many HMACs, the server none
        #[arg(long, value_name = "N", default_value_t = DEFAULT_ITERATIONS)]
        iterations: u32,
    },
    /// Remove a user
    Remove {
        name: String,
        #[command(flatten)]
        file: FileArg,
    },
    /// List the users (names and iteration counts)
    List {
        #[command(flatten)]
        file: FileArg,
    },
}

#[derive(clap::Args, Debug)]
pub struct FileArg {
    /// The users file [default: $XDG_STATE_HOME/wirerate/users or
    /// ~/.local/state/wirerate/users]
    #[arg(long, value_name = "FILE")]
    pub users: Option<PathBuf>,
}

impl FileArg {
    fn path(&self) -> anyhow::Result<PathBuf> {
        match &self.users {
            Some(p) => Ok(p.clone()),
            None => wirerate_control::tls::default_state_dir()
                .map(|d| d.join("users"))
                .ok_or_else(|| anyhow::anyhow!("no home directory: use --users FILE")),
        }
    }
}

/// The password: WIRERATE_PASSWORD, else asked for on the terminal without echo.
pub fn password(prompt: &str) -> anyhow::Result<String> {
    if let Some(p) = std::env::var_os("WIRERATE_PASSWORD") {
        return p
            .into_string()
            .map_err(|_| anyhow::anyhow!("WIRERATE_PASSWORD is not UTF-8"));
    }
    if !std::io::stdin().is_terminal() {
        anyhow::bail!("no password: set WIRERATE_PASSWORD or run on a terminal");
    }
    Ok(rpassword::prompt_password(prompt)?)
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    match a.action {
        Action::Add {
            name,
            file,
            iterations,
        } => {
            if let Err(e) = check_user(&name) {
                return usage(e.to_string());
            }
            if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
                return usage(format!(
                    "--iterations must be {MIN_ITERATIONS} to {MAX_ITERATIONS}"
                ));
            }
            let path = file.path()?;
            let mut users = Users::load_or_empty(&path).map_err(anyhow::Error::msg)?;
            let pw = if std::env::var_os("WIRERATE_PASSWORD").is_some() {
                password("")?
            } else {
                let pw = password(&format!("New password for {name}: "))?;
                if password("Again: ")? != pw {
                    anyhow::bail!("the passwords differ; nothing changed");
                }
                pw
            };
            if pw.is_empty() {
                return usage("the password is empty");
            }
            let existed = users.get(&name).is_some();
            let v = new_verifier(&pw, iterations)?;
            users.set(&name, v).map_err(anyhow::Error::msg)?;
            users.save(&path).map_err(anyhow::Error::msg)?;
            eprintln!(
                "wirerate user: {} {name} in {} (SIGHUP reloads a running server)",
                if existed { "changed" } else { "added" },
                path.display()
            );
        }
        Action::Remove { name, file } => {
            let path = file.path()?;
            let mut users = Users::load(&path).map_err(anyhow::Error::msg)?;
            if !users.remove(&name) {
                anyhow::bail!("no user '{name}' in {}", path.display());
            }
            users.save(&path).map_err(anyhow::Error::msg)?;
            eprintln!("wirerate user: removed {name} from {}", path.display());
        }
        Action::List { file } => {
            let path = file.path()?;
            let users = Users::load(&path).map_err(anyhow::Error::msg)?;
            for (name, v) in users.names() {
                println!("{name}\t{} iterations", v.iterations);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
