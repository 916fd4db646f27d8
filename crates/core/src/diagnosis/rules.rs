//! The rules. Placeholder until the rules land: every run is "not determined".

use super::{Bottleneck, Confidence, Diagnosis};
use crate::RunResult;

/// The verdict of one run.
pub fn diagnose(_r: &RunResult) -> Diagnosis {
    Diagnosis {
        bottleneck: Bottleneck::Unknown,
        confidence: Confidence::Low,
        verdict: "not determined".into(),
        evidence: Vec::new(),
        advice: Vec::new(),
        candidates: Vec::new(),
        notes: Vec::new(),
        unseen: Vec::new(),
    }
}

/// Marks each interval's bottleneck where it differs from the previous one's.
pub fn interval_bottlenecks(_r: &mut RunResult) {}

/// How two groups' diagnoses differ. Placeholder until the rules land.
pub fn differences(_a: &[&Diagnosis], _b: &[&Diagnosis]) -> Vec<String> {
    Vec::new()
}
