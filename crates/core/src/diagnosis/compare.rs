//! What differs between the verdicts of two groups of runs (for `compare`).

use super::{Bottleneck, Diagnosis};

/// The most common verdict of each group, and the classes one group shows often that the
/// other never does. Empty when the groups agree (or either is empty).
pub fn differences(a: &[&Diagnosis], b: &[&Diagnosis]) -> Vec<String> {
    let (Some(ma), Some(mb)) = (mode(a), mode(b)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if ma != mb {
        out.push(format!(
            "A: {} ({} of {} runs); B: {} ({} of {} runs)",
            describe(ma, a),
            count(a, ma),
            a.len(),
            describe(mb, b),
            count(b, mb),
            b.len()
        ));
    }
    for (name, this, other) in [("A", a, b), ("B", b, a)] {
        for class in classes(this) {
            let n = count(this, class);
            if class != ma && class != mb && count(other, class) == 0 && n * 5 >= this.len() * 2 {
                out.push(format!(
                    "{name}: also {} ({n} of {} runs)",
                    describe(class, this),
                    this.len()
                ));
            }
        }
    }
    out
}

fn count(runs: &[&Diagnosis], class: Bottleneck) -> usize {
    runs.iter().filter(|d| d.bottleneck == class).count()
}

/// The classes of a group, in order of first appearance.
fn classes(runs: &[&Diagnosis]) -> Vec<Bottleneck> {
    let mut out: Vec<Bottleneck> = Vec::new();
    for d in runs {
        if !out.contains(&d.bottleneck) {
            out.push(d.bottleneck);
        }
    }
    out
}

/// The most common class; ties go to the one seen first.
fn mode(runs: &[&Diagnosis]) -> Option<Bottleneck> {
    let cs = classes(runs);
    let best = cs.iter().map(|c| count(runs, *c)).max()?;
    cs.into_iter().find(|c| count(runs, *c) == best)
}

/// The class with the median of its key figure over the runs that had it:
/// "wire-bound", "sender CPU at 98 %", "the receiver's window (rwnd-limited … 62 %)".
fn describe(class: Bottleneck, runs: &[&Diagnosis]) -> String {
    if class == Bottleneck::Wire {
        return "wire-bound".into();
    }
    let key: Vec<(f64, &str, &str)> = runs
        .iter()
        .filter(|d| d.bottleneck == class)
        .filter_map(|d| d.evidence.iter().find(|e| e.supports == class))
        .map(|e| (e.value, e.unit.as_str(), e.what.as_str()))
        .filter(|(v, _, _)| v.is_finite())
        .collect();
    let mut values: Vec<f64> = key.iter().map(|k| k.0).collect();
    values.sort_by(f64::total_cmp);
    let Some(&(_, unit, what)) = key.first() else {
        return class.words().into();
    };
    let median = values.get(values.len() / 2).copied().unwrap_or(0.0);
    let figure = match unit {
        "percent" => format!("{median:.0} %"),
        "ratio" => format!("{:.0} %", median * 100.0),
        "bytes" => super::text::size(median),
        "bit/s" => super::text::rate(median),
        _ => format!("{median:.0}"),
    };
    match class {
        Bottleneck::SenderCpu | Bottleneck::ReceiverCpu | Bottleneck::ReceiverSoftirq
            if unit == "percent" =>
        {
            format!("{} at {figure}", class.words())
        }
        _ => format!("{} ({what} {figure})", class.words()),
    }
}
