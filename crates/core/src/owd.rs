//! One-way delay per direction from UDP probes whose two hosts keep their own clocks
//! (`wirerate rpm`). Pure: stamps in, added delays out.
//!
//! A probe carries four times: the client's send, the server's receive and send, the
//! client's receive. `server_recv - client_send` is the upstream delay plus the clocks'
//! offset; `client_recv - server_send` the downstream delay minus it. The offset is unknown
//! and the clocks drift apart, so each direction's base is a line over the test's time: the
//! least-squares fit through its lowest third of samples (the idle phase, and the phases that
//! load the other direction, give them), fitted again on the lowest third of what is left
//! above the line until it settles. What a probe lies above its direction's line is the delay
//! added in that direction (queueing), in the way Crusader separates up and down. A constant
//! offset and a linear drift are removed whole; what stays is relative to the least-delayed
//! probes, never an absolute one-way time.

use serde::{Deserialize, Serialize};

use crate::rpm::percentile;

/// The four times of one probe, in seconds: the client's on its clock, the server's on its.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stamps {
    pub client_send_s: f64,
    pub server_recv_s: f64,
    pub server_send_s: f64,
    pub client_recv_s: f64,
}

/// A line `base_s = a + b · t`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Line {
    a: f64,
    b: f64,
}

impl Line {
    fn at(self, t: f64) -> f64 {
        self.a + self.b * t
    }
}

/// Least squares through `(t, d)`; a flat line through their mean when every t is the same.
fn fit(points: &[(f64, f64)]) -> Option<Line> {
    let n = points.len() as f64;
    if points.is_empty() {
        return None;
    }
    let mt = points.iter().map(|p| p.0).sum::<f64>() / n;
    let md = points.iter().map(|p| p.1).sum::<f64>() / n;
    let stt: f64 = points.iter().map(|p| (p.0 - mt).powi(2)).sum();
    let std: f64 = points.iter().map(|p| (p.0 - mt) * (p.1 - md)).sum();
    let b = if stt > 0.0 { std / stt } else { 0.0 };
    Some(Line { a: md - b * mt, b })
}

/// Rounds of refitting on the lowest third above the previous line.
const ROUNDS: usize = 4;

/// Each point's height above its base line (seconds).
fn above_base(points: &[(f64, f64)]) -> Vec<f64> {
    let Some(lowest) = points.iter().map(|p| p.1).min_by(f64::total_cmp) else {
        return Vec::new();
    };
    let mut line = Line { a: lowest, b: 0.0 };
    let keep = points.len().div_ceil(3).max(2).min(points.len());
    for _ in 0..ROUNDS {
        let mut by_height: Vec<(f64, (f64, f64))> =
            points.iter().map(|&p| (p.1 - line.at(p.0), p)).collect();
        by_height.sort_by(|x, y| x.0.total_cmp(&y.0));
        let low: Vec<(f64, f64)> = by_height[..keep].iter().map(|x| x.1).collect();
        match fit(&low) {
            Some(l) if l == line => break,
            Some(l) => line = l,
            None => break,
        }
    }
    points.iter().map(|p| p.1 - line.at(p.0)).collect()
}

/// The delay each probe's packets met above the base, upstream (client → server) and
/// downstream, in ms, in the order of `stamps`. Probes with a non-finite time are left out
/// of the fit and get NaN.
pub fn added_ms(stamps: &[Stamps]) -> Vec<(f64, f64)> {
    let finite = |s: &Stamps| {
        [
            s.client_send_s,
            s.server_recv_s,
            s.server_send_s,
            s.client_recv_s,
        ]
        .iter()
        .all(|x| x.is_finite())
    };
    let ok: Vec<&Stamps> = stamps.iter().filter(|s| finite(s)).collect();
    let up: Vec<(f64, f64)> = ok
        .iter()
        .map(|s| (s.client_send_s, s.server_recv_s - s.client_send_s))
        .collect();
    let down: Vec<(f64, f64)> = ok
        .iter()
        .map(|s| (s.client_send_s, s.client_recv_s - s.server_send_s))
        .collect();
    let (up, down) = (above_base(&up), above_base(&down));
    let mut k = 0;
    stamps
        .iter()
        .map(|s| {
            if !finite(s) {
                return (f64::NAN, f64::NAN);
            }
            k += 1;
            (up[k - 1] * 1e3, down[k - 1] * 1e3)
        })
        .collect()
}

/// Probes' added delays as `[at_s, up ms, down ms]`, rounded to the microsecond, in time
/// order: `at_s[i]` is when probe `i` of `added` was sent. Probes with a non-finite value
/// are left out.
pub fn series(at_s: &[f64], added: &[(f64, f64)]) -> Vec<[f64; 3]> {
    let round = |x: f64| (x * 1e3).round() / 1e3;
    let mut out: Vec<[f64; 3]> = at_s
        .iter()
        .zip(added)
        .filter(|(t, (u, d))| t.is_finite() && u.is_finite() && d.is_finite())
        .map(|(t, (u, d))| [round(*t), round(*u), round(*d)])
        .collect();
    out.sort_by(|a, b| a[0].total_cmp(&b[0]));
    out
}

/// A phase's added one-way delay per direction (ms over the test's base).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OneWay {
    pub samples: u64,
    pub up_p50_ms: f64,
    pub up_p90_ms: f64,
    pub down_p50_ms: f64,
    pub down_p90_ms: f64,
}

impl OneWay {
    /// The figures of one phase's `(up, down)` added delays; None for none.
    pub fn of(added: &[(f64, f64)]) -> Option<OneWay> {
        let sorted = |f: fn(&(f64, f64)) -> f64| {
            let mut v: Vec<f64> = added.iter().map(f).filter(|x| x.is_finite()).collect();
            v.sort_by(f64::total_cmp);
            v
        };
        let (up, down) = (sorted(|x| x.0), sorted(|x| x.1));
        Some(OneWay {
            samples: up.len() as u64,
            up_p50_ms: percentile(&up, 50.0)?,
            up_p90_ms: percentile(&up, 90.0)?,
            down_p50_ms: percentile(&down, 50.0)?,
            down_p90_ms: percentile(&down, 90.0)?,
        })
    }

    /// Which way the added delay sits, when it is at least `notice_ms`: the direction with
    /// at least twice the other's median, or both.
    pub fn queued(&self, notice_ms: f64) -> Option<QueueDirection> {
        let (up, down) = (self.up_p50_ms.max(0.0), self.down_p50_ms.max(0.0));
        if up.max(down) < notice_ms {
            None
        } else if up >= 2.0 * down {
            Some(QueueDirection::Upstream)
        } else if down >= 2.0 * up {
            Some(QueueDirection::Downstream)
        } else {
            Some(QueueDirection::Both)
        }
    }
}

/// Where one-way delays put a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueDirection {
    /// Client → server.
    Upstream,
    /// Server → client.
    Downstream,
    Both,
}

impl QueueDirection {
    pub fn words(self) -> &'static str {
        match self {
            QueueDirection::Upstream => "upstream (client to server)",
            QueueDirection::Downstream => "downstream (server to client)",
            QueueDirection::Both => "both ways",
        }
    }
}

#[cfg(test)]
#[path = "owd_tests.rs"]
mod tests;
