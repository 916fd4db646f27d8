//! `wirerate run -u --find-max`: the highest offered UDP rate whose loss stays within a
//! limit, found by a bisection over rates each judged by the median loss of two or three
//! short trials (RFC 2544's throughput test, for one flow; the rule is `core::search`).
//! Every trial is stored as a run under the search's group and label, as it ends, so
//! `history --label` and `--group` list them.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use wirerate_core::search::{Next, Phase, RateSearch, Step};
use wirerate_core::units::format_bps;
use wirerate_core::TestSpec;
use wirerate_render::export::{exporter, FindMaxResult};
use wirerate_store::{new_group_id, Store, StoredRun};

use super::run::{execute, Format, Silent, Target};
use crate::exit::usage;

const RESOLUTION: f64 = 0.01;
/// Room for the bisection (about 7 rates from the top to 1 %, two or three trials each)
/// and the confirmation of the rate found; said in `run --help`.
pub const MAX_STEPS: usize = 32;

pub fn run(
    t: &Target,
    spec: TestSpec,
    loss_limit: f64,
    format: Format,
    mut store: Option<&mut Store>,
    label: Option<&str>,
) -> anyhow::Result<ExitCode> {
    if !(loss_limit.is_finite() && (0.0..100.0).contains(&loss_limit)) {
        return usage("--loss must be at least 0 and below 100 percent");
    }
    let text = format == Format::Text;
    let upper = spec.link_bps.map(|l| l / f64::from(spec.parallel));
    if text {
        crate::say!(
            "wirerate: searching the highest UDP rate per stream with loss ≤ {loss_limit} % against {} ({} stream(s), {} B datagrams)",
            t.describe(),
            spec.parallel,
            spec.len_bytes
        );
    }
    // the prefix tells a search's trials from a `--repeat` set wherever the group is shown
    let group = format!("find-max-{}", new_group_id());
    let mut search = RateSearch::new(loss_limit, RESOLUTION, MAX_STEPS);
    // each trial's verdict and stored run, beside the search's steps
    let mut why: Vec<Option<wirerate_core::diagnosis::Bottleneck>> = Vec::new();
    let mut ids: Vec<Option<i64>> = Vec::new();
    let mut unstored = 0;
    loop {
        let offered = match search.next(upper) {
            Next::Done => break,
            Next::Unpaced => None,
            Next::Rate(r) => Some(r),
        };
        let trial = TestSpec {
            rate_bps: offered,
            interval_s: 0.0,
            ..spec.clone()
        };
        let (r, _) = execute(t, &trial, &mut Silent, Duration::from_secs(2))?;
        let streams = f64::from(spec.parallel);
        let loss = r.summary.udp.as_ref().map_or(100.0, |u| u.loss_percent);
        let goodput = r.summary.goodput_bps / streams;
        let sent = Some(r.summary.sender_bps / streams).filter(|s| s.is_finite() && *s > 0.0);
        search.record(offered, sent, goodput, loss);
        why.push(r.summary.diagnosis.as_ref().map(|d| d.bottleneck));
        let id = store
            .as_deref_mut()
            .and_then(|s| match s.insert_run(&r, label, Some(&group)) {
                Ok(id) => Some(id),
                Err(e) => {
                    unstored += 1;
                    eprintln!("wirerate: trial not stored: {}", wirerate_engine::chain(&e));
                    None
                }
            });
        ids.push(id);
        if let (true, Some(step)) = (text, search.steps.last()) {
            crate::say!(
                "{}",
                progress(search.steps.len(), step, why.last().copied().flatten())
            );
        }
    }
    let best = search.result();
    let stored = store.is_some() && unstored == 0;
    let doc = FindMaxResult::new(loss_limit, best, &search.steps, &why, &spec).with_search(
        search.confidence(),
        stored.then_some(group.as_str()),
        label,
        &ids,
    );
    let mut out = crate::exit::stdout();
    write!(out, "{}", exporter(format.into()).find_max(&doc)?)?;
    out.flush()?;
    if unstored > 0 {
        eprintln!(
            "wirerate: {unstored} of {} trials not stored",
            search.steps.len()
        );
    }
    Ok(if best.is_some() && unstored == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// One trial's line: "  step  3: offered 5.00 Gbit/s  sent 4.98 Gbit/s  received …  pass".
fn progress(n: usize, s: &Step, why: Option<wirerate_core::diagnosis::Bottleneck>) -> String {
    let verdict = match why {
        _ if s.pass => "pass".to_string(),
        Some(b) => format!("fail ({})", b.words()),
        None => "fail".to_string(),
    };
    format!(
        "  step {n:>2}: offered {:>15}  sent {:>15}  received {:>15}  loss {:>7.3} %  {verdict}{}",
        s.offered_bps.map_or_else(|| "unpaced".into(), format_bps),
        s.sent_bps.map_or_else(|| "-".into(), format_bps),
        format_bps(s.goodput_bps),
        s.loss_percent,
        match s.phase {
            Phase::Confirm => " (confirmation)",
            Phase::Repeat => " (repeat)",
            Phase::Recheck => " (recheck)",
            Phase::Search => "",
        }
    )
}

/// The prefix of a find-max search's repeat group.
const GROUP_PREFIX: &str = "find-max-";

/// Stored runs to compare, with find-max trials cut to those at each search's rate found:
/// its last trial's offered rate (a search that ends by its rule ends on the rate it found)
/// and every trial of the search offered the same. Other runs stay. The words say what was
/// kept (empty when no run is a find-max trial).
pub fn at_found_rates(rows: Vec<StoredRun>) -> (Vec<StoredRun>, String) {
    let search_of = |r: &StoredRun| r.row.group.clone().filter(|g| g.starts_with(GROUP_PREFIX));
    let offered = |r: &StoredRun| r.result().ok().and_then(|x| x.spec.rate_bps);
    let mut found: Vec<(String, Option<f64>)> = Vec::new();
    for r in rows.iter().rev() {
        if let Some(g) = search_of(r) {
            if !found.iter().any(|(s, _)| *s == g) {
                found.push((g, offered(r)));
            }
        }
    }
    if found.is_empty() {
        return (rows, String::new());
    }
    let total = rows.len();
    let kept: Vec<StoredRun> = rows
        .into_iter()
        .filter(|r| match search_of(r) {
            None => true,
            Some(g) => found
                .iter()
                .any(|(s, rate)| *s == g && rate.is_some() && offered(r) == *rate),
        })
        .collect();
    let words = format!(
        " ({} of {total} runs: the trials at the rate found of {} find-max search{})",
        kept.len(),
        found.len(),
        if found.len() == 1 { "" } else { "es" }
    );
    (kept, words)
}
