//! `wirerate plan run|status|check`: test plans over many agents, worked through a
//! PostgreSQL queue (the work is `wirerate_fleet`'s; docs/fleet.md).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use wirerate_core::units::format_bps;
use wirerate_fleet::queue::PlanStatus;
use wirerate_fleet::runner::{controller_name, run_plan, RunnerConfig};
use wirerate_fleet::{FleetError, Plan};

use crate::exit;

#[derive(clap::Args)]
#[command(
    after_help = "A plan file (TOML) names the agents, one `wirerate serve \
--allow-third-party --third-party-targets RANGE` per host, and a matrix of pairs: `mesh` (every \
ordered pair: 4 hosts make 12 tests), `pairs` or `star`. Every test is a third-party test (the \
agent on FROM tests towards TO); a host takes part in one test at a time. The tests are rows \
of a queue in PostgreSQL (table plan_tests) that any number of `plan run` on the same plan \
and database share, each test run once; results are stored in the same database with the \
label plan:NAME and the group plan:NAME:FROM->TO. See docs/fleet.md."
)]
pub struct Args {
    #[command(subcommand)]
    cmd: PlanCmd,
}

#[derive(clap::Subcommand)]
enum PlanCmd {
    /// Queue the plan's tests (or join its unfinished run) and work them until none is left
    Run(RunArgs),
    /// What ran, what failed and why: the latest run of a plan (text or --json)
    Status(StatusArgs),
    /// Check a plan file and list its tests, without running anything
    Check(CheckArgs),
}

#[derive(clap::Args)]
struct DbArg {
    /// PostgreSQL URL of the queue and the results (postgres://…) [default: the plan's
    /// `db`, else $WIRERATE_DB when it is a PostgreSQL URL]
    #[arg(long, value_name = "URL")]
    db: Option<String>,
}

#[derive(clap::Args)]
struct RunArgs {
    /// The plan file (TOML)
    plan: PathBuf,
    #[command(flatten)]
    db: DbArg,
    /// Tests this controller runs at once [default: half the hosts, at least 1]
    #[arg(long, value_name = "N")]
    workers: Option<usize>,
    /// Seconds an agent may stay silent before its test fails
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    idle_timeout: f64,
    /// Seconds a claim lasts unless renewed: a controller renews its running tests' claims
    /// every third of it, and another controller takes over the tests of one that stopped
    /// once it expires [default: twice the test's time plus 30 s, at most 120 s; at least 3]
    #[arg(long, value_name = "SECONDS")]
    lease: Option<f64>,
    /// Print nothing while running; only the final line
    #[arg(short, long)]
    quiet: bool,
    #[command(flatten)]
    rounds: super::plan_rounds::RoundArgs,
}

#[derive(clap::Args)]
struct StatusArgs {
    /// The plan file (its name and database); or give --plan
    #[arg(required_unless_present = "name", conflicts_with = "name")]
    plan: Option<PathBuf>,
    /// The plan's name, instead of its file
    #[arg(long = "plan", value_name = "NAME")]
    name: Option<String>,
    #[command(flatten)]
    db: DbArg,
    /// This run of the plan (1, 2, …) instead of the latest
    #[arg(long, value_name = "N")]
    run: Option<i32>,
    /// Print the status as JSON
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct CheckArgs {
    /// The plan file (TOML)
    plan: PathBuf,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    match a.cmd {
        PlanCmd::Run(a) => run_cmd(a),
        PlanCmd::Status(a) => status(a),
        PlanCmd::Check(a) => check(a),
    }
}

fn load(path: &std::path::Path) -> anyhow::Result<Plan> {
    match Plan::load(path) {
        Ok(p) => Ok(p),
        Err(e) => exit::usage(e.to_string()),
    }
}

/// The queue's database: --db, the plan's, or $WIRERATE_DB; PostgreSQL only.
fn db_url(arg: &DbArg, plan: Option<&Plan>) -> anyhow::Result<String> {
    let env = std::env::var("WIRERATE_DB")
        .ok()
        .filter(|u| wirerate_store::pg::is_url(u));
    let Some(url) = arg
        .db
        .clone()
        .or_else(|| plan.and_then(|p| p.db.clone()))
        .or(env)
    else {
        return exit::usage(
            "plans need a PostgreSQL database for their queue: --db postgres://… or db = \
             \"postgres://…\" in the plan",
        );
    };
    if !wirerate_store::pg::is_url(&url) {
        return exit::usage(format!(
            "plans keep their queue in PostgreSQL: '{}' is not a postgres:// URL",
            wirerate_store::pg::redact(&url)
        ));
    }
    Ok(url)
}

/// How the controller reaches each agent, from the plan's `[auth]`: the password is read
/// once (WIRERATE_PASSWORD, or asked for on the terminal).
fn agent_auth(
    plan: &Plan,
) -> anyhow::Result<std::collections::BTreeMap<String, wirerate_server::agent::CallerAuth>> {
    let auth = &plan.auth;
    let mut out = std::collections::BTreeMap::new();
    if !auth.tls {
        return Ok(out);
    }
    let login = match &auth.user {
        Some(user) => Some(wirerate_control::Login {
            user: user.clone(),
            password: crate::cmd::user::password(&format!(
                "Password for {user} on the agents of plan {}: ",
                plan.name
            ))?,
        }),
        None => None,
    };
    for (name, addr) in &plan.hosts {
        let args = crate::cmd::tls::ClientTlsArgs {
            tls: true,
            server_fingerprint: auth.fingerprint_of(name).map(str::to_string),
            known_servers: auth.known_servers.clone(),
            ..Default::default()
        };
        let tls = args
            .client(addr)
            .map_err(|e| anyhow::anyhow!("plan: agent '{name}': {e:#}"))?;
        out.insert(
            name.clone(),
            wirerate_server::agent::CallerAuth {
                tls,
                login: login.clone(),
            },
        );
    }
    Ok(out)
}

fn run_cmd(a: RunArgs) -> anyhow::Result<ExitCode> {
    let plan = load(&a.plan)?;
    let db_url = db_url(&a.db, Some(&plan))?;
    if !(a.idle_timeout.is_finite() && a.idle_timeout > 0.0 && a.idle_timeout <= 3600.0) {
        return exit::usage("--idle-timeout takes seconds above 0, at most 3600");
    }
    let workers = match a.workers {
        Some(n) if !(1..=64).contains(&n) => return exit::usage("--workers takes 1 to 64"),
        Some(n) => n,
        None => (plan.hosts.len() / 2).clamp(1, 64),
    };
    if let Some(l) = a.lease {
        let min = wirerate_fleet::plan::MIN_LEASE_S;
        if !(l.is_finite() && (min..=86_400.0).contains(&l)) {
            return exit::usage(format!("--lease takes {min} to 86400 seconds"));
        }
    }
    // checked before the password is asked for
    let schedule = a.rounds.schedule(&plan)?;
    let cfg = RunnerConfig {
        lease_s: a.lease,
        db_url,
        workers,
        me: controller_name(),
        idle: Duration::from_secs_f64(a.idle_timeout),
        poll: Duration::from_secs(1),
        auth: agent_auth(&plan)?,
        stop: None,
    };
    let quiet = a.quiet;
    let say = move |line: String| {
        if !quiet {
            use std::io::Write as _;
            // a closed pipe must not stop the plan: its lines are only progress
            let _ = writeln!(std::io::stdout(), "{line}");
        }
    };
    if let Some(schedule) = schedule {
        return super::plan_rounds::run(&plan, &cfg, &schedule, &say);
    }
    let report = run_plan(&plan, &cfg, &say).map_err(fleet_err)?;
    let p = &report.progress;
    println!(
        "plan {} run {}: {} done, {} failed ({} run here, {} of them failed); \
         see: wirerate plan status --plan {} --db URL",
        plan.name, report.epoch, p.done, p.failed, report.ran, report.failed, plan.name
    );
    Ok(if p.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

pub(super) fn fleet_err(e: FleetError) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

fn status(a: StatusArgs) -> anyhow::Result<ExitCode> {
    let plan = a.plan.as_deref().map(load).transpose()?;
    let name = match (&plan, &a.name) {
        (Some(p), _) => p.name.clone(),
        (None, Some(n)) => n.clone(),
        (None, None) => return exit::usage("give a plan file or --plan NAME"),
    };
    let url = db_url(&a.db, plan.as_ref())?;
    let mut c = wirerate_store::pg::connect(&url)?;
    let Some(st) = wirerate_fleet::queue::status(&mut c, &name, a.run).map_err(fleet_err)? else {
        anyhow::bail!(
            "plan '{name}'{} has not run in {}",
            a.run.map_or(String::new(), |r| format!(" run {r}")),
            wirerate_store::pg::redact(&url)
        );
    };
    if a.json {
        crate::say!("{}", serde_json::to_string_pretty(&st)?);
    } else {
        use std::io::Write as _;
        write!(crate::exit::stdout(), "{}", status_text(&st))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn status_text(st: &PlanStatus) -> String {
    let p = &st.progress;
    let mut out = format!(
        "plan {} run {}: {} test(s): {} done, {} failed, {} running, {} queued\n",
        st.plan,
        st.epoch,
        st.tests.len(),
        p.done,
        p.failed,
        p.running,
        p.queued
    );
    out += &format!(
        "  {:>4} {:>4}  {:<24} {:<8} {:>14} {:>8}  {}\n",
        "run", "rep", "from -> to", "status", "goodput", "attempts", "result / error"
    );
    for t in &st.tests {
        let pair = format!("{} -> {}", t.from, t.to);
        let goodput = t.goodput_bps.map_or("-".to_string(), format_bps);
        let note = match (&t.error, t.result_id) {
            (Some(e), _) => e.clone(),
            (None, Some(id)) => format!("result {id}"),
            (None, None) => t.claimed_by.clone().unwrap_or_default(),
        };
        out += &format!(
            "  {:>4} {:>4}  {:<24} {:<8} {:>14} {:>8}  {}\n",
            t.run + 1,
            t.rep + 1,
            pair,
            t.status,
            goodput,
            t.attempts,
            note
        );
    }
    out
}

fn check(a: CheckArgs) -> anyhow::Result<ExitCode> {
    let plan = load(&a.plan)?;
    crate::say!(
        "plan {}: {} host(s), {} pair(s), {} repetition(s), {} run(s){}{}",
        plan.name,
        plan.hosts.len(),
        plan.pairs.len(),
        plan.repeat,
        plan.runs,
        if plan.runs > 1 {
            format!(" every {} min", plan.every_s / 60.0)
        } else {
            String::new()
        },
        if plan.window.is_some() {
            " within its window (UTC)"
        } else {
            ""
        }
    );
    if let Some(r) = &plan.rounds {
        crate::say!("  {}", super::plan_rounds::describe(r));
    }
    for (name, addr) in &plan.hosts {
        crate::say!("  host {name:<12} agent {addr}");
    }
    for (from, to) in &plan.pairs {
        crate::say!("  test {from} -> {to}");
    }
    Ok(ExitCode::SUCCESS)
}
