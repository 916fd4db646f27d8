//! Plausibility checks on a result document that came from a file, not from a measurement:
//! what `import` refuses to store. A live result passes them by construction.

use crate::result::{RunResult, SCHEMA_VERSION};

fn rate(name: &str, v: f64) -> Result<(), String> {
    // faster than any link a spec may state is not a measurement
    if v.is_finite() && (0.0..=crate::spec::limits::MAX_LINK_BPS).contains(&v) {
        Ok(())
    } else {
        Err(format!("{name} {v} is not a possible rate"))
    }
}

fn seconds(name: &str, v: f64) -> Result<(), String> {
    if v.is_finite() && (0.0..=10.0 * crate::spec::limits::MAX_SECONDS).contains(&v) {
        Ok(())
    } else {
        Err(format!("{name} {v} is not a possible duration"))
    }
}

impl RunResult {
    /// Checks what `history` and `compare` rely on: a known schema, a valid spec, and rates,
    /// times and loss a measurement can produce.
    pub fn check_plausible(&self) -> Result<(), String> {
        if self.schema_version != SCHEMA_VERSION {
            return Err(format!(
                "schema_version {} is not one this wirerate reads ({SCHEMA_VERSION})",
                self.schema_version
            ));
        }
        self.spec
            .validate()
            .map_err(|e| format!("the spec is not valid: {e}"))?;
        if !(self.started_unix_s.is_finite() && self.started_unix_s >= 0.0) {
            return Err("started_unix_s is not a time".into());
        }
        let s = &self.summary;
        rate("goodput_bps", s.goodput_bps)?;
        rate("sender_bps", s.sender_bps)?;
        seconds("seconds", s.seconds)?;
        seconds("sender_seconds", s.sender_seconds)?;
        for f in &s.flows {
            rate("a flow's goodput_bps", f.goodput_bps)?;
            rate("a flow's sender_bps", f.sender_bps)?;
            seconds("a flow's seconds", f.seconds)?;
        }
        if let Some(u) = &s.udp {
            if !(u.loss_percent.is_finite() && (0.0..=100.0).contains(&u.loss_percent)) {
                return Err(format!("loss {} % is outside 0-100", u.loss_percent));
            }
        }
        for i in &self.intervals {
            rate("an interval's bps", i.bps)?;
            seconds("an interval's start_s", i.start_s)?;
            seconds("an interval's end_s", i.end_s)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::synth;

    #[test]
    fn impossible_values_are_caught() {
        let good = synth::run(1, 1e9, 3);
        good.check_plausible().unwrap();
        let mut r = good.clone();
        r.summary.goodput_bps = -5.0;
        assert!(r.check_plausible().unwrap_err().contains("goodput"));
        let mut r = good.clone();
        r.summary.goodput_bps = 1e308;
        assert!(r.check_plausible().is_err());
        let mut r = good.clone();
        r.schema_version = 999;
        assert!(r.check_plausible().unwrap_err().contains("schema_version"));
        let mut r = good;
        r.spec.parallel = 0;
        assert!(r.check_plausible().unwrap_err().contains("parallel"));
    }
}
