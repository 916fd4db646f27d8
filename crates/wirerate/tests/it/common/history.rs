//! A stored history with a known step, put in through the real `wirerate import`: the seeds'
//! ttcp Tx regression (1110 KB/s, then 821 KB/s: 26 % slower) on the pair alpha -> beta,
//! and a flat pair gamma -> beta beside it.

use std::path::Path;
use std::process::{Command, Output};

use wirerate_core::synth::{self, Noise};
use wirerate_core::RunResult;

/// The seeds' rates: ttcp's KB/s (1024 bytes) as bit/s.
pub const BEFORE_BPS: f64 = 1110.21 * 1024.0 * 8.0;
pub const AFTER_BPS: f64 = 821.05 * 1024.0 * 8.0;

/// The run that began the lower level: the 21st of alpha -> beta.
pub const STEP_RUN: u64 = 20;

pub fn wirerate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wirerate"))
        .args(args)
        .env_remove("WIRERATE_DB")
        .output()
        .unwrap()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// When the run that began the lower level started.
pub fn step_started_unix_s() -> f64 {
    synth::run(STEP_RUN, 1.0, 1).started_unix_s
}

/// The history of [`tx_history`], every run started `shift_s` seconds later.
pub fn tx_history_shifted(dir: &Path, db: &str, shift_s: f64) -> i64 {
    store(dir, db, shift_s)
}

/// 40 runs alpha -> beta, the level dropping at the 21st (n = 20), and 12 flat runs
/// gamma -> beta; written newest first (so storing order is not time order) and imported
/// with the label "tx". Returns the stored id of the run n = 20.
pub fn tx_history(dir: &Path, db: &str) -> i64 {
    store(dir, db, 0.0)
}

fn store(dir: &Path, db: &str, shift_s: f64) -> i64 {
    let mut noise = Noise::new(27);
    let mut runs: Vec<RunResult> = (0..40u64)
        .map(|n| {
            let level = if n < STEP_RUN { BEFORE_BPS } else { AFTER_BPS };
            synth::run(n, noise.normal(level, level * 0.01), 3)
        })
        .collect();
    for n in 0..12u64 {
        let mut r = synth::run(100 + n, noise.normal(BEFORE_BPS, BEFORE_BPS * 0.02), 3);
        r.env.client.hostname = Some("gamma".into());
        runs.push(r);
    }
    runs.reverse();
    for r in &mut runs {
        r.started_unix_s += shift_s;
    }
    let file = dir.join("runs.json");
    std::fs::write(&file, serde_json::to_string(&runs).unwrap()).unwrap();
    let out = wirerate(&[
        "import",
        file.to_str().unwrap(),
        "--label",
        "tx",
        "--ids",
        "--db",
        db,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // `ID new` per run, in the file's order
    let ids: Vec<i64> = text(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(" new")?.parse().ok())
        .collect();
    assert_eq!(ids.len(), runs.len(), "{}", text(&out.stdout));
    let at = runs
        .iter()
        .position(|r| r.started_unix_s == step_started_unix_s() + shift_s)
        .unwrap();
    ids[at]
}
