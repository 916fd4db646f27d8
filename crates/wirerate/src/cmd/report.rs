//! `wirerate report`: stored runs (ids, labels) and saved files (wirerate JSON, iperf3
//! `-J`, `--find-max --json`) as one self-contained HTML page of charts, and with `--svg`
//! each chart as an SVG file of its own.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use wirerate_report::{FindMax, Group, Input};
use wirerate_store::Store;

use super::results::{open_existing, read_entries, utc, Operand, DB_HELP};
use crate::exit;

/// Largest find-max file read.
const MAX_FILE_BYTES: u64 = 64 << 20;

#[derive(clap::Args)]
#[command(
    after_help = "Each operand names runs: a label (all runs stored with it), a run id, or a \
saved JSON file (wirerate results as `run --json` or `history --json` write them, iperf3 -J \
output, or a `run -u --find-max --json` search). Prefix with label:, id: or file: to say \
which. Each operand is one group.\n\nOne run gives its goodput, retransmits, RTT and \
congestion window over time, CPU per core, the streams' shares with Jain's fairness index and \
the diagnosis; an rr run gives round-trip percentiles and transactions per second over time \
and their distribution, a sweep throughput and one-way time per message size with Hockney's \
fit, an rpm run latency through its phases, the distribution of connect times idle against \
loaded, and throughput and RPM per phase; several runs or groups give box plots of goodput, CPU and PI with the verdicts \
and p-values of `wirerate compare` (each group against the first), the settings in which \
they differ and the A/B table; a \
find-max search gives loss against offered rate. Every chart has a table of its numbers.\n\n\
--matrix adds a section of goodput per (client host, server host) pair from the database, as \
`compare --matrix` shows it; with --matrix the operands may be left out.\n\n\
The page needs no network and no JavaScript."
)]
pub struct Args {
    /// Runs to report: labels, run ids or saved JSON files
    #[arg(value_name = "RUNS", required_unless_present = "matrix")]
    pub operands: Vec<String>,
    /// Add the host-pair matrix: each (client, server) pair's latest goodput and the change
    /// against the previous period
    #[arg(long)]
    pub matrix: bool,
    #[command(flatten)]
    pub matrix_opts: super::matrix::MatrixOpts,
    /// The HTML file to write ('-' for standard output)
    #[arg(short, long, value_name = "FILE", default_value = "report.html")]
    pub output: PathBuf,
    /// Also write each chart as DIR/NAME.svg (DIR is created when missing)
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,
    #[arg(long, value_name = "PATH|URL", help = DB_HELP)]
    pub db: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let ops = args
        .operands
        .iter()
        .map(|s| Operand::parse(s).map(|o| (s.clone(), o)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    args.matrix_opts.only_with_matrix(args.matrix)?;
    let margs = if args.matrix {
        Some(args.matrix_opts.args()?)
    } else {
        None
    };
    let store = if margs.is_some() || ops.iter().any(|(_, o)| o.needs_db()) {
        Some(open_existing(args.db.clone())?)
    } else {
        None
    };
    let mut input = Input::default();
    if let (Some(margs), Some(store)) = (&margs, &store) {
        let (m, _) = super::matrix::build(store, margs)?;
        if m.cells.is_empty() {
            anyhow::bail!(
                "no runs{} with a goodput in {} for the host-pair matrix",
                super::matrix::described(margs),
                store.location()
            );
        }
        input.matrix = Some((m, super::matrix::described(margs)));
    }
    for (text, op) in &ops {
        if let Operand::File(p) = op {
            if let Some(fm) = find_max(p)? {
                input.find_max.push((file_name(p, text), fm));
                continue;
            }
        }
        input.groups.push(group(text, op, store.as_ref())?);
    }
    let report = wirerate_report::render(&input)?;
    if let Some(dir) = &args.svg {
        write_svgs(dir, &report.charts)?;
    }
    if args.output.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        out.write_all(report.html.as_bytes())?;
        out.flush()?;
    } else {
        std::fs::write(&args.output, &report.html)
            .with_context(|| format!("cannot write {}", args.output.display()))?;
        crate::say!(
            "wirerate: wrote {} ({} chart{})",
            args.output.display(),
            report.charts.len(),
            if report.charts.len() == 1 { "" } else { "s" }
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The runs of one operand, named as the user named them.
fn group(text: &str, op: &Operand, store: Option<&Store>) -> anyhow::Result<Group> {
    let (name, runs) = match op {
        Operand::File(p) => {
            let name = file_name(p, text);
            let runs = read_entries(p)?.into_iter().map(|e| e.result).collect();
            (name, runs)
        }
        Operand::Id(id) => (format!("run {id}"), op.load(store)?.runs),
        Operand::Label(l) => (l.clone(), op.load(store)?.runs),
    };
    let run_names = runs
        .iter()
        .map(|r: &wirerate_core::RunResult| format!("{} UTC", utc(r.started_unix_s)))
        .collect();
    Ok(Group {
        name,
        runs,
        run_names,
    })
}

/// A file's name without its directories, to name its group.
fn file_name(p: &Path, text: &str) -> String {
    p.file_name()
        .map_or_else(|| text.to_string(), |n| n.to_string_lossy().into_owned())
}

/// A `--find-max --json` file, or None for any other file (read then as results).
fn find_max(path: &Path) -> anyhow::Result<Option<FindMax>> {
    let shown = path.display();
    let meta = std::fs::metadata(path).with_context(|| format!("cannot read {shown}"))?;
    if meta.len() > MAX_FILE_BYTES {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {shown}"))?;
    let first = serde_json::Deserializer::from_str(&text)
        .into_iter::<serde_json::Value>()
        .next();
    match first {
        Some(Ok(v)) if v.get("kind").and_then(|k| k.as_str()) == Some("find_max") => {
            let fm = serde_json::from_value(v)
                .with_context(|| format!("{shown}: not a find-max search"))?;
            Ok(Some(fm))
        }
        _ => Ok(None),
    }
}

fn write_svgs(dir: &Path, charts: &[wirerate_report::Chart]) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        return exit::usage(format!("--svg {}: not a directory", dir.display()));
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for c in charts {
        let path = dir.join(format!("{}.svg", c.id));
        let text = format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{}\n", c.svg);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
