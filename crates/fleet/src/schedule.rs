//! Repeating schedules of a plan (pScheduler's and psconfig's way): an ISO 8601 repeating
//! interval (`R/PT4H`: every four hours, for ever; `R6/PT4H`: six times), a random slip
//! (each round starts somewhere in its first `slip`, so a fleet of controllers does not
//! start together), and bounds (`--count`, `--until`). Pure: the clock and the random draw
//! are arguments.
//!
//! Rounds stay on their grid: round k is due at start + k × every (+ its slip). A round that
//! ends after the next one's time makes that one late, not doubled: missed rounds are
//! skipped, never run back to back to catch up.

use crate::FleetError;

/// The longest interval or slip a schedule takes: a year.
pub const MAX_SCHEDULE_S: f64 = 366.0 * 86_400.0;

fn bad(msg: impl Into<String>) -> FleetError {
    FleetError::Plan(msg.into())
}

/// An ISO 8601 duration (`PT4H`, `PT10M`, `P1D`, `P1W`, `PT1.5S`, `P1DT12H`) in seconds.
/// Years and months are refused: their length depends on the calendar.
pub fn parse_duration(s: &str) -> Result<f64, FleetError> {
    let why = |w: &str| {
        bad(format!(
            "'{s}' is not an ISO 8601 duration ({w}; e.g. PT4H, PT10M, P1D)"
        ))
    };
    let rest = s
        .trim()
        .strip_prefix(['P', 'p'])
        .ok_or_else(|| why("it starts with P"))?;
    let (date, time) = match rest.split_once(['T', 't']) {
        Some((_, "")) => return Err(why("a T is followed by hours, minutes or seconds")),
        Some((d, t)) => (d, Some(t)),
        None => (rest, None),
    };
    let mut total = 0.0;
    let mut parts = 0;
    for (in_date, text) in [(true, date), (false, time.unwrap_or(""))] {
        let units: &[(char, f64)] = if in_date {
            &[('W', 604_800.0), ('D', 86_400.0)]
        } else {
            &[('H', 3600.0), ('M', 60.0), ('S', 1.0)]
        };
        let mut text = text;
        let mut next_unit = 0;
        while !text.is_empty() {
            let end = text
                .find(|c: char| c.is_ascii_alphabetic())
                .ok_or_else(|| why("a number without its unit"))?;
            let (num, tail) = text.split_at(end);
            // the unit is one ASCII letter (found above), so slicing after it is safe
            let unit = tail.as_bytes()[0].to_ascii_uppercase() as char;
            if in_date && matches!(unit, 'Y' | 'M') {
                return Err(why(
                    "years and months have no fixed length; use days or weeks",
                ));
            }
            let Some(i) = units[next_unit..].iter().position(|(u, _)| *u == unit) else {
                return Err(why("units W D, then T H M S, in that order"));
            };
            next_unit += i + 1;
            let digits = !num.is_empty()
                && num
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b == b'.' || b == b',');
            let n: f64 = num
                .replace(',', ".")
                .parse()
                .ok()
                .filter(|n: &f64| digits && n.is_finite())
                .ok_or_else(|| why("each part is a number and its unit"))?;
            total += n * units[next_unit - 1].1;
            parts += 1;
            text = &tail[1..];
        }
    }
    if parts == 0 {
        return Err(why("it has no parts"));
    }
    if total > MAX_SCHEDULE_S {
        return Err(bad(format!("'{s}' is longer than a year")));
    }
    Ok(total)
}

/// An ISO 8601 repeating interval without its start: `R/PT4H` (for ever), `R6/PT4H` (six
/// rounds), or a bare duration (`PT4H`, for ever). The interval is above 0.
pub fn parse_repeat(s: &str) -> Result<(Option<u64>, f64), FleetError> {
    let t = s.trim();
    let (count, dur) = match t.strip_prefix(['R', 'r']) {
        Some(rest) => {
            let (n, d) = rest.split_once('/').ok_or_else(|| {
                bad(format!(
                    "'{s}': a repeating interval is R/DURATION or Rn/DURATION"
                ))
            })?;
            let count = match n {
                "" => None,
                n => match n.parse::<u64>() {
                    Ok(c) if c > 0 => Some(c),
                    _ => return Err(bad(format!("'{s}': the count after R is 1 or more"))),
                },
            };
            (count, d)
        }
        None => (None, t),
    };
    let every = parse_duration(dur)?;
    if every <= 0.0 {
        return Err(bad(format!("'{s}': the interval must be above 0")));
    }
    Ok((count, every))
}

/// A UTC time as RFC 3339 (`2026-11-26T18:00:00Z`, `2026-11-26T19:00:00+01:00`, seconds
/// optional) in Unix seconds.
pub fn parse_instant(s: &str) -> Result<f64, FleetError> {
    let why = || bad(format!("'{s}' is not a time like 2026-11-26T18:00:00Z"));
    let t = s.trim();
    let (date, clock) = t.split_once(['T', 't', ' ']).ok_or_else(why)?;
    let num = |x: &str| {
        x.parse::<i64>()
            .ok()
            .filter(|_| x.bytes().all(|b| b.is_ascii_digit()))
    };
    let d: Vec<i64> = date
        .split('-')
        .map(num)
        .collect::<Option<_>>()
        .ok_or_else(why)?;
    let [y, mo, da] = d[..] else {
        return Err(why());
    };
    let (clock, offset_s) = if let Some(c) = clock.strip_suffix(['Z', 'z']) {
        (c, 0)
    } else {
        let i = clock.rfind(['+', '-']).ok_or_else(why)?;
        let (c, off) = clock.split_at(i);
        let (oh, om) = off[1..].split_once(':').ok_or_else(why)?;
        let (oh, om) = (num(oh).ok_or_else(why)?, num(om).ok_or_else(why)?);
        let sign = if off.starts_with('-') { -1 } else { 1 };
        (c, sign * (oh * 3600 + om * 60))
    };
    let hms: Vec<&str> = clock.split(':').collect();
    let (h, mi, sec) = match hms[..] {
        [h, m] => (num(h), num(m), Some(0.0)),
        [h, m, s] => (
            num(h),
            num(m),
            s.parse::<f64>().ok().filter(|v| v.is_finite()),
        ),
        _ => return Err(why()),
    };
    let (h, mi, sec) = (
        h.ok_or_else(why)?,
        mi.ok_or_else(why)?,
        sec.ok_or_else(why)?,
    );
    let ok = (1..=12).contains(&mo)
        && (1..=days_in_month(y, mo)).contains(&da)
        && (0..24).contains(&h)
        && (0..60).contains(&mi)
        && (0.0..61.0).contains(&sec)
        && (1970..=9999).contains(&y);
    if !ok {
        return Err(why());
    }
    let days = days_from_civil(y, mo, da);
    Ok((days * 86_400 + h * 3600 + mi * 60 - offset_s) as f64 + sec)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// When a plan's rounds start, and how many there are.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    /// Seconds between the starts of rounds (above 0).
    pub every_s: f64,
    /// Each round starts at a uniformly random moment in its first `slip_s` seconds.
    pub slip_s: f64,
    /// At most this many rounds.
    pub count: Option<u64>,
    /// No round starts after this (Unix seconds).
    pub until_unix_s: Option<f64>,
}

impl Schedule {
    /// Checks the slip against the interval: a slip as long as the interval would let a
    /// round start after the next one's time.
    pub fn new(
        every_s: f64,
        slip_s: f64,
        count: Option<u64>,
        until_unix_s: Option<f64>,
    ) -> Result<Schedule, FleetError> {
        if !(every_s.is_finite() && every_s > 0.0 && every_s <= MAX_SCHEDULE_S) {
            return Err(bad(
                "schedule: the interval must be above 0 and at most a year",
            ));
        }
        if !(slip_s.is_finite() && slip_s >= 0.0 && slip_s < every_s) {
            return Err(bad("schedule: the slip must be shorter than the interval"));
        }
        if count == Some(0) {
            return Err(bad("schedule: the count of rounds is 1 or more"));
        }
        Ok(Schedule {
            every_s,
            slip_s,
            count,
            until_unix_s,
        })
    }

    /// When round `k` (from 0) starts for a schedule begun at `t0`, with `u` in [0, 1) the
    /// round's draw of its slip.
    pub fn start_of(&self, t0: f64, k: u64, u: f64) -> f64 {
        t0 + k as f64 * self.every_s + u.clamp(0.0, 1.0) * self.slip_s
    }

    /// The round to run after round `done` ended at `now`: the next whose slot has not
    /// begun yet, or the one whose slot is open now (missed slots are skipped: a late
    /// round does not make the next ones run back to back). None when the end time leaves
    /// none.
    pub fn next_round(&self, t0: f64, done: Option<u64>, now: f64) -> Option<u64> {
        let first = done.map_or(0, |d| d + 1);
        // the slot of round k is [t0 + k·every, t0 + (k+1)·every)
        let current = ((now - t0) / self.every_s).floor();
        let k = if current.is_finite() && current > first as f64 {
            current as u64
        } else {
            first
        };
        let within_time = self
            .until_unix_s
            .is_none_or(|u| self.start_of(t0, k, 0.0) <= u);
        within_time.then_some(k)
    }

    /// Whether another round may run after `ran` rounds.
    pub fn more(&self, ran: u64) -> bool {
        self.count.is_none_or(|c| ran < c)
    }
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
