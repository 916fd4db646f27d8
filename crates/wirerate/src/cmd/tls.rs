//! The command-line side of TLS: the client's pinned or remembered server keys, and the
//! server's key and certificate options.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use wirerate_control::tls::{normalize_fingerprint, ClientTls, ServerTls};

/// `run --tls` and how the server's key is checked.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct ClientTlsArgs {
    /// TLS 1.3 on the control connection (the server runs `serve --tls`)
    #[arg(long)]
    pub tls: bool,
    /// The server's key fingerprint (SHA-256, hex, as `serve --tls` prints it); without
    /// it, the key met first is remembered and a changed one refused
    #[arg(long, value_name = "HEX", requires = "tls")]
    pub server_fingerprint: Option<String>,
    /// Where remembered server keys are kept [default: ~/.config/wirerate/known_servers]
    #[arg(long, value_name = "FILE", requires = "tls")]
    pub known_servers: Option<PathBuf>,
    /// Log in as NAME (the server, or the --from agent, runs `serve --users`): the password
    /// is read from WIRERATE_PASSWORD or asked for on the terminal, and never sent, not even
    /// inside TLS
    #[arg(
        long,
        visible_alias = "username",
        value_name = "NAME",
        requires = "tls",
        conflicts_with = "client_cert"
    )]
    pub user: Option<String>,
    /// A certificate (PEM) to present to a server that requires one (`serve --client-ca`);
    /// its CN is the user
    #[arg(long, value_name = "FILE", requires_all = ["tls", "client_key"])]
    pub client_cert: Option<PathBuf>,
    /// The key of --client-cert (PEM)
    #[arg(long, value_name = "FILE", requires_all = ["tls", "client_cert"])]
    pub client_key: Option<PathBuf>,
    /// How a key remembered on first contact is told (default: a line on stderr).
    #[arg(skip)]
    pub on_first_use: Option<fn(&str)>,
}

fn default_known_servers() -> Option<PathBuf> {
    match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(d) => Some(PathBuf::from(d).join("wirerate/known_servers")),
        None => std::env::var_os("HOME")
            .map(|h| PathBuf::from(h).join(".config/wirerate/known_servers")),
    }
}

/// The fingerprint remembered for `server` ("host:port"), if any. Lines: `server hex`.
fn known(file: &Path, server: &str) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next() == Some(server)).then(|| w.next().map(str::to_string))?
    })
}

fn remember(file: &Path, server: &str, fp: &str, say: Option<fn(&str)>) -> Result<(), String> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .and_then(|mut f| writeln!(f, "{server} {fp}"))
        .map_err(|e| format!("{}: {e}", file.display()))?;
    let line = format!(
        "first contact with {server}: its key SHA256:{fp} is remembered in {}",
        file.display()
    );
    match say {
        Some(say) => say(&line),
        None => eprintln!("wirerate: {}", wirerate_core::text::safe(&line)),
    }
    Ok(())
}

impl ClientTlsArgs {
    /// The user and password to log in with, or None without --user.
    pub fn login(&self, host: &str) -> anyhow::Result<Option<wirerate_control::Login>> {
        let Some(user) = &self.user else {
            return Ok(None);
        };
        wirerate_proto::auth::check_user(user)
            .map_err(|e| crate::exit::UsageError(format!("--user: {e}")))?;
        let password = crate::cmd::user::password(&format!("Password for {user}@{host}: "))?;
        Ok(Some(wirerate_control::Login {
            user: user.clone(),
            password,
        }))
    }

    /// The client's TLS settings for `server` ("host:port"), or None without --tls.
    pub fn client(&self, server: &str) -> anyhow::Result<Option<ClientTls>> {
        let Some(tls) = self.client_pinned(server)? else {
            return Ok(None);
        };
        Ok(Some(match (&self.client_cert, &self.client_key) {
            (Some(c), Some(k)) => tls.with_client_cert(c, k).map_err(anyhow::Error::msg)?,
            _ => tls,
        }))
    }

    fn client_pinned(&self, server: &str) -> anyhow::Result<Option<ClientTls>> {
        if !self.tls {
            return Ok(None);
        }
        if let Some(fp) = &self.server_fingerprint {
            let fp =
                normalize_fingerprint(fp).map_err(|e| crate::exit::UsageError(e.to_string()))?;
            return Ok(Some(ClientTls {
                pin: Some((fp, "the key given with --server-fingerprint".into())),
                ..Default::default()
            }));
        }
        let file = self
            .known_servers
            .clone()
            .or_else(default_known_servers)
            .ok_or_else(|| {
                anyhow::anyhow!("no home directory for known_servers: use --known-servers FILE")
            })?;
        if let Some(fp) = known(&file, server) {
            let from = format!(
                "the key remembered for {server} in {}: the server's key has changed (remove \
                 that line if the change is expected)",
                file.display()
            );
            return Ok(Some(ClientTls {
                pin: Some((fp, from)),
                ..Default::default()
            }));
        }
        let server = server.to_string();
        let say = self.on_first_use;
        Ok(Some(ClientTls {
            first_use: Some(Arc::new(move |fp: &str| remember(&file, &server, fp, say))),
            ..Default::default()
        }))
    }
}

/// `serve --tls` and where its key comes from.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct ServerTlsArgs {
    /// TLS 1.3 on the control connection, required of every wirerate client; the key and
    /// a self-signed certificate are made in --state-dir on first start
    #[arg(long)]
    pub tls: bool,
    /// Where the server keeps its key [default: $XDG_STATE_HOME/wirerate or
    /// ~/.local/state/wirerate]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The operator's own certificate (PEM) instead of the made one
    #[arg(long, value_name = "FILE", requires_all = ["tls", "tls_key"])]
    pub tls_cert: Option<PathBuf>,
    /// The key of --tls-cert (PEM)
    #[arg(long, value_name = "FILE", requires_all = ["tls", "tls_cert"])]
    pub tls_key: Option<PathBuf>,
    /// Mutual TLS: every wirerate client must present a certificate signed by a CA in FILE
    /// (PEM); its subject CN is the user (for --limits and the log). iperf3 clients are then
    /// refused
    #[arg(long, value_name = "FILE", requires = "tls")]
    pub client_ca: Option<PathBuf>,
    /// With --client-ca: certificate revocation lists (PEM, signed by the CA) whose
    /// certificates are refused; read at start (repeat for several files)
    #[arg(long, value_name = "FILE", requires = "client_ca")]
    pub client_crl: Vec<PathBuf>,
}

impl ServerTlsArgs {
    pub fn server(&self) -> anyhow::Result<Option<ServerTls>> {
        if !self.tls {
            return Ok(None);
        }
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(c), Some(k)) => ServerTls::from_files(c, k),
            _ => {
                let dir = self
                    .state_dir
                    .clone()
                    .or_else(wirerate_control::tls::default_state_dir)
                    .ok_or_else(|| anyhow::anyhow!("no home directory: use --state-dir DIR"))?;
                ServerTls::load_or_create(&dir)
            }
        }
        .map_err(anyhow::Error::msg)?;
        let tls = match &self.client_ca {
            Some(ca) => tls
                .with_client_ca(ca, &self.client_crl)
                .map_err(anyhow::Error::msg)?,
            None => tls,
        };
        Ok(Some(tls))
    }
}
