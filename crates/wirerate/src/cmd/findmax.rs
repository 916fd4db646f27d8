//! `wirerate run -u --find-max`: the highest offered UDP rate whose loss stays within a
//! limit, found by a bisection of short trials (RFC 2544's throughput test, for one flow).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use wirerate_core::search::{Next, RateSearch};
use wirerate_core::units::format_bps;
use wirerate_core::TestSpec;
use wirerate_render::export::{exporter, FindMaxResult};

use super::run::{execute, Format, Silent, Target};
use crate::exit::usage;

const RESOLUTION: f64 = 0.01;
const MAX_STEPS: usize = 16;

pub fn run(
    t: &Target,
    spec: TestSpec,
    loss_limit: f64,
    format: Format,
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
    let mut search = RateSearch::new(loss_limit, RESOLUTION, MAX_STEPS);
    // each trial's verdict, beside the search's steps: where a failing rate lost its excess
    let mut why: Vec<Option<wirerate_core::diagnosis::Bottleneck>> = Vec::new();
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
        let loss = r.summary.udp.as_ref().map_or(100.0, |u| u.loss_percent);
        let goodput = r.summary.goodput_bps / f64::from(spec.parallel);
        search.record(offered, goodput, loss);
        let bottleneck = r.summary.diagnosis.as_ref().map(|d| d.bottleneck);
        why.push(bottleneck);
        if text {
            let step = search.steps.len();
            let pass = match bottleneck {
                _ if loss <= loss_limit => "pass".to_string(),
                Some(b) => format!("fail ({})", b.words()),
                None => "fail".to_string(),
            };
            crate::say!(
                "  step {step:>2}: offered {:>15}  received {:>15}  loss {loss:>7.3} %  {pass}",
                offered.map_or_else(|| "unpaced".into(), format_bps),
                format_bps(goodput)
            );
        }
    }
    let best = search.result();
    let mut out = crate::exit::stdout();
    let doc = FindMaxResult::new(loss_limit, best, &search.steps, &why, &spec);
    write!(out, "{}", exporter(format.into()).find_max(&doc)?)?;
    Ok(if best.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
