//! What a path adds to a lab's wire: delay, jitter, random loss and reordering, per
//! direction, and the pure rules of the delay line that applies them (which packet is lost,
//! which is sent early, when each is due). Nothing here touches the system: the delay line's
//! I/O is in `delayline`.
//!
//! The rules, so a run can be reproduced and its figures explained:
//! - Delay: every packet is held `delay` after it arrived at the delay line.
//! - Jitter: a packet's delay moves by a draw from the uniform distribution on
//!   `[-jitter, +jitter]` (never below zero). Packets still leave in the order they came
//!   (a packet is never due before the one ahead of it), unless reordering is asked.
//! - Loss: exactly `loss` of every block of [`BLOCK`] packets is dropped, at positions drawn
//!   from a seeded generator: the share is exact over each block and the pattern random but
//!   the same for the same seed.
//! - Reordering: `reorder` of the packets that are not lost (drawn the same way, exact per
//!   block of them) skip the delay and leave at once, overtaking those held.
//! - Jitter without reordering compresses the spread when packets come closer together
//!   than the jitter: a packet waits for the one ahead of it, so delays skew upwards.

use serde::{Deserialize, Serialize};

/// Packets per block over which loss and reordering shares are exact.
pub const BLOCK: u32 = 10_000;
/// The longest delay a lab path takes, microseconds (10 s).
pub const MAX_DELAY_US: u64 = 10_000_000;

/// One direction of a path: what the delay line does to packets going that way, after its
/// bottleneck (see [`Bottleneck`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PathDir {
    pub delay_us: u64,
    pub jitter_us: u64,
    /// Share of packets dropped, 0 to 1.
    pub loss: f64,
    /// Share of packets sent at once, ahead of those held, 0 to 1.
    pub reorder: f64,
}

impl PathDir {
    /// Whether this direction changes anything.
    pub fn is_plain(&self) -> bool {
        self.delay_us == 0 && self.jitter_us == 0 && self.loss == 0.0 && self.reorder == 0.0
    }

    /// This direction followed by `next` (a bridged lab's two links between two hosts): the
    /// delays and jitters add, a frame gets through only if neither loses it, and it is
    /// sent ahead if either sends it ahead.
    pub fn then(&self, next: &PathDir) -> PathDir {
        PathDir {
            delay_us: self.delay_us + next.delay_us,
            jitter_us: self.jitter_us + next.jitter_us,
            loss: 1.0 - (1.0 - self.loss) * (1.0 - next.loss),
            reorder: 1.0 - (1.0 - self.reorder) * (1.0 - next.reorder),
        }
    }

    /// Checks the figures; the error says which and why.
    pub fn validate(&self) -> Result<(), PathError> {
        if self.delay_us > MAX_DELAY_US {
            return Err(PathError::Delay {
                ms: self.delay_us / 1000,
            });
        }
        if self.jitter_us > self.delay_us {
            return Err(PathError::Jitter {
                jitter_us: self.jitter_us,
                delay_us: self.delay_us,
            });
        }
        for (what, v) in [("loss", self.loss), ("reordering", self.reorder)] {
            if !(v.is_finite() && (0.0..=1.0).contains(&v)) {
                return Err(PathError::Share(what));
            }
        }
        if self.reorder > 0.0 && self.delay_us == 0 {
            return Err(PathError::ReorderWithoutDelay);
        }
        Ok(())
    }
}

/// Both directions of a lab's path: `ab` for packets from the first host to the second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PathSpec {
    pub ab: PathDir,
    pub ba: PathDir,
    /// Seed of the loss, reordering and jitter draws.
    pub seed: u64,
}

impl PathSpec {
    pub fn is_plain(&self) -> bool {
        self.ab.is_plain() && self.ba.is_plain()
    }

    pub fn validate(&self) -> Result<(), PathError> {
        self.ab.validate()?;
        self.ba.validate()
    }
}

/// A duration as users write one: `25ms`, `1.5ms`, `200us`, `0.1s`, or a bare number of
/// milliseconds. Returns microseconds.
pub fn parse_duration_us(s: &str) -> Result<u64, PathError> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix("us").or_else(|| t.strip_suffix("µs")) {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e6)
    } else {
        (t, 1e3)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| PathError::NotDuration(s.to_string()))?;
    if !v.is_finite() || v < 0.0 {
        return Err(PathError::Negative(s.to_string()));
    }
    let us = (v * scale).round();
    if us > MAX_DELAY_US as f64 {
        return Err(PathError::TooLong(s.to_string()));
    }
    Ok(us as u64)
}

/// A share as users write one: `0.5%` or a bare percentage (`0.5`). Returns 0 to 1.
pub fn parse_percent(s: &str) -> Result<f64, PathError> {
    let t = s.trim();
    let num = t.strip_suffix('%').unwrap_or(t);
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| PathError::NotPercent(s.to_string()))?;
    if !(v.is_finite() && (0.0..=100.0).contains(&v)) {
        return Err(PathError::PercentRange(s.to_string()));
    }
    Ok(v / 100.0)
}

/// `VALUE` for both directions or `AB/BA` for each: `25ms`, `20ms/5ms`.
pub fn per_direction<T: Copy>(
    s: &str,
    parse: impl Fn(&str) -> Result<T, PathError>,
) -> Result<(T, T), PathError> {
    match s.split_once('/') {
        Some((ab, ba)) => Ok((parse(ab)?, parse(ba)?)),
        None => {
            let v = parse(s)?;
            Ok((v, v))
        }
    }
}

/// Why a path's shape, or a value of it as users write one, cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("a delay of {ms} ms is above 10 s")]
    Delay { ms: u64 },
    #[error("jitter {jitter_us} µs is more than the delay {delay_us} µs it moves")]
    Jitter { jitter_us: u64, delay_us: u64 },
    /// Loss or reordering (named) out of 0 to 1.
    #[error("{0} must be 0 to 100 %")]
    Share(&'static str),
    #[error("reordering sends packets ahead of delayed ones: it needs --delay")]
    ReorderWithoutDelay,
    #[error("'{0}' is not a duration (25ms, 200us, 0.1s)")]
    NotDuration(String),
    #[error("'{0}' must be 0 or more")]
    Negative(String),
    #[error("'{0}' is above 10 s")]
    TooLong(String),
    #[error("'{0}' is not a percentage (0.5%)")]
    NotPercent(String),
    #[error("'{0}' must be 0 to 100 %")]
    PercentRange(String),
}

/// splitmix64: a small, fast, seeded generator; enough for drawing positions and jitter.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// Picks exactly `share` of each block of [`BLOCK`] packets, at random positions.
#[derive(Clone, Debug)]
pub struct BlockPicker {
    per_block: u32,
    rng: Rng,
    marked: Vec<bool>,
    at: u32,
}

impl BlockPicker {
    pub fn new(share: f64, seed: u64) -> BlockPicker {
        let per_block = (share * f64::from(BLOCK))
            .round()
            .clamp(0.0, f64::from(BLOCK)) as u32;
        let mut p = BlockPicker {
            per_block,
            rng: Rng::new(seed),
            marked: vec![false; BLOCK as usize],
            at: 0,
        };
        p.new_block();
        p
    }

    /// Floyd's sampling: `per_block` distinct positions of the block.
    fn new_block(&mut self) {
        self.marked.iter_mut().for_each(|m| *m = false);
        let (n, k) = (u64::from(BLOCK), u64::from(self.per_block));
        for j in (n - k)..n {
            let t = self.rng.below(j + 1) as usize;
            if self.marked[t] {
                self.marked[j as usize] = true;
            } else {
                self.marked[t] = true;
            }
        }
        self.at = 0;
    }

    /// Whether the next packet is one of those picked.
    pub fn pick(&mut self) -> bool {
        if self.per_block == 0 {
            return false;
        }
        if self.at == BLOCK {
            self.new_block();
        }
        let picked = self.marked[self.at as usize];
        self.at += 1;
        picked
    }
}

/// The bottleneck in front of the delay: a link of `rate_bps` that charges each frame what
/// it costs on an Ethernet wire (its length with the MAC header, plus preamble, FCS and
/// gap, at least a minimum frame: the lab's tbf rules), and a FIFO queue of at most
/// `queue_bytes` waiting for it, counted as the wire counts them (the frame being sent
/// included); a frame that would not fit is dropped (tail drop). Off the hosts, so the
/// queue fills as a router's does (a sending host keeps its own queue short).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bottleneck {
    pub rate_bps: f64,
    pub queue_bytes: u64,
    /// Bytes a frame costs beyond its length (with the MAC header), and the least it costs.
    pub overhead_bytes: u32,
    pub min_bytes: u32,
}

impl Bottleneck {
    /// Nanoseconds the link takes for a frame of `len` bytes (MAC header included).
    pub fn wire_ns(&self, len: usize) -> u64 {
        let bytes = (len as u64 + u64::from(self.overhead_bytes)).max(u64::from(self.min_bytes));
        (bytes as f64 * 8e9 / self.rate_bps).round() as u64
    }
}

/// What happens to one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Lost at random, as the path's loss asks.
    Lost,
    /// Dropped at the bottleneck: its queue was full.
    QueueFull,
    /// Sent at this time (nanoseconds of the scheduler's clock); `ahead`: a reordered
    /// packet, which may leave before packets that came earlier.
    Due { at_ns: u64, ahead: bool },
}

/// One direction's rules over time: decides each packet's fate in arrival order.
#[derive(Clone, Debug)]
pub struct Scheduler {
    dir: PathDir,
    bottleneck: Option<Bottleneck>,
    loss: BlockPicker,
    reorder: BlockPicker,
    jitter: Rng,
    /// When the bottleneck's link is free again.
    link_free_ns: u64,
    /// When the last packet in order is due: none leaves before it (no reordering by
    /// jitter).
    last_due_ns: u64,
}

impl Scheduler {
    pub fn new(dir: PathDir, bottleneck: Option<Bottleneck>, seed: u64) -> Scheduler {
        Scheduler {
            dir,
            bottleneck: bottleneck.filter(|b| b.rate_bps.is_finite() && b.rate_bps > 0.0),
            loss: BlockPicker::new(dir.loss, seed ^ 0x1055),
            reorder: BlockPicker::new(dir.reorder, seed ^ 0x0de5),
            jitter: Rng::new(seed ^ 0x7177),
            link_free_ns: 0,
            last_due_ns: 0,
        }
    }

    /// Bytes waiting for the bottleneck's link at `now_ns`.
    pub fn queued_bytes(&self, now_ns: u64) -> u64 {
        match self.bottleneck {
            Some(b) => {
                let ns = self.link_free_ns.saturating_sub(now_ns);
                (ns as f64 * b.rate_bps / 8e9) as u64
            }
            None => 0,
        }
    }

    /// The fate of a frame of `len` bytes that arrived at `now_ns` (a monotonic clock).
    pub fn fate(&mut self, now_ns: u64, len: usize) -> Fate {
        if self.loss.pick() {
            return Fate::Lost;
        }
        let mut departs = now_ns;
        if let Some(b) = self.bottleneck {
            if self.queued_bytes(now_ns) + len as u64 > b.queue_bytes {
                return Fate::QueueFull;
            }
            self.link_free_ns = self.link_free_ns.max(now_ns) + b.wire_ns(len);
            departs = self.link_free_ns;
        }
        if self.reorder.pick() {
            return Fate::Due {
                at_ns: departs,
                ahead: true,
            };
        }
        let mut delay = self.dir.delay_us as i64 * 1000;
        if self.dir.jitter_us > 0 {
            let j = self.dir.jitter_us as i64 * 1000;
            delay += self.jitter.below(2 * j as u64 + 1) as i64 - j;
        }
        let at_ns = (departs as i64 + delay.max(0)) as u64;
        let at_ns = at_ns.max(self.last_due_ns);
        self.last_due_ns = at_ns;
        Fate::Due {
            at_ns,
            ahead: false,
        }
    }
}

/// Delays as they were achieved: a log-linear histogram of microseconds (128 steps per
/// power of two, so a percentile is within about 0.4 % of its bucket's middle), for
/// `lab status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DelayHistogram {
    pub counts: Vec<u64>,
}

const STEPS: u64 = 128;
const STEP_BITS: u64 = 7;

impl DelayHistogram {
    fn bucket(us: u64) -> usize {
        if us < STEPS {
            return us as usize;
        }
        let power = 63 - u64::from(us.leading_zeros()); // 2^power <= us
        let shift = power - STEP_BITS;
        let step = (us >> shift) - STEPS; // 0..STEPS
        (STEPS + shift * STEPS + step) as usize
    }

    fn lower(bucket: usize) -> u64 {
        let b = bucket as u64;
        if b < STEPS {
            return b;
        }
        let shift = (b - STEPS) / STEPS;
        let step = (b - STEPS) % STEPS;
        (STEPS + step) << shift
    }

    pub fn record(&mut self, us: u64) {
        let b = Self::bucket(us);
        if self.counts.len() <= b {
            self.counts.resize(b + 1, 0);
        }
        self.counts[b] += 1;
    }

    pub fn merge(&mut self, other: &DelayHistogram) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The delay at quantile `q` (0 to 1), the middle of its bucket; None when empty.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let lo = Self::lower(i) as f64;
                let hi = Self::lower(i + 1) as f64;
                return Some((lo + hi) / 2.0);
            }
        }
        None
    }
}

/// What one direction of the delay line did, for `lab status` and a result's wire facts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DirStats {
    pub packets: u64,
    pub bytes: u64,
    /// Dropped as the path's loss asked.
    pub dropped_loss: u64,
    /// Dropped at the bottleneck: its queue was full.
    #[serde(default)]
    pub dropped_queue: u64,
    /// Dropped because the delay line held as much as it may (see `delayline`), or a frame
    /// was larger than the MTU allows, or the outgoing port refused it.
    pub dropped_full: u64,
    pub reordered: u64,
    pub forwarded: u64,
    /// The most bytes held at once (queued and in the delay).
    pub max_held_bytes: u64,
    /// The most bytes waiting in the bottleneck's queue.
    #[serde(default)]
    pub max_queue_bytes: u64,
    /// From arrival to departure: the bottleneck's queue and link, then the delay.
    pub delay: DelayHistogram,
    /// Whether the forwarding thread runs at real-time priority (see `delayline`).
    #[serde(default)]
    pub realtime: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_links_add_their_delays_and_combine_their_losses() {
        let up = PathDir {
            delay_us: 5_000,
            jitter_us: 1_000,
            loss: 0.01,
            reorder: 0.0,
        };
        let down = PathDir {
            delay_us: 3_000,
            loss: 0.02,
            reorder: 0.5,
            ..Default::default()
        };
        let both = up.then(&down);
        assert_eq!((both.delay_us, both.jitter_us), (8_000, 1_000));
        assert!((both.loss - 0.0298).abs() < 1e-12, "{}", both.loss);
        assert!((both.reorder - 0.5).abs() < 1e-12);
        assert!(PathDir::default().then(&PathDir::default()).is_plain());
    }

    #[test]
    fn durations_and_shares_parse_as_written() {
        assert_eq!(parse_duration_us("25ms"), Ok(25_000));
        assert_eq!(parse_duration_us("1.5ms"), Ok(1_500));
        assert_eq!(parse_duration_us("200us"), Ok(200));
        assert_eq!(parse_duration_us("0.1s"), Ok(100_000));
        assert_eq!(parse_duration_us("40"), Ok(40_000));
        assert!(parse_duration_us("-1ms").is_err());
        assert!(parse_duration_us("11s").is_err());
        assert!(parse_duration_us("soon").is_err());
        assert_eq!(parse_percent("0.5%"), Ok(0.005));
        assert_eq!(parse_percent("2"), Ok(0.02));
        assert!(parse_percent("101%").is_err());
        assert_eq!(
            per_direction("20ms/5ms", parse_duration_us),
            Ok((20_000, 5_000))
        );
        assert_eq!(per_direction("7ms", parse_duration_us), Ok((7_000, 7_000)));
    }

    #[test]
    fn loss_is_exact_per_block_random_and_seeded() {
        for share in [0.0, 0.0001, 0.005, 0.01, 0.25] {
            let mut p = BlockPicker::new(share, 42);
            let picked = (0..3 * BLOCK).filter(|_| p.pick()).count() as f64;
            assert_eq!(picked, (share * f64::from(BLOCK)).round() * 3.0, "{share}");
        }
        let a: Vec<bool> = {
            let mut p = BlockPicker::new(0.01, 7);
            (0..BLOCK).map(|_| p.pick()).collect()
        };
        let b: Vec<bool> = {
            let mut p = BlockPicker::new(0.01, 7);
            (0..BLOCK).map(|_| p.pick()).collect()
        };
        let c: Vec<bool> = {
            let mut p = BlockPicker::new(0.01, 8);
            (0..BLOCK).map(|_| p.pick()).collect()
        };
        assert_eq!(a, b, "the same seed, the same losses");
        assert_ne!(a, c, "another seed, other losses");
        // not bunched at the start of the block
        let first_half = a[..BLOCK as usize / 2].iter().filter(|&&x| x).count();
        assert!((20..=80).contains(&first_half), "{first_half}");
    }

    fn due(f: Fate) -> u64 {
        match f {
            Fate::Due {
                at_ns,
                ahead: false,
            } => at_ns,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn jitter_stays_in_its_bounds_and_never_reorders() {
        let dir = PathDir {
            delay_us: 10_000,
            jitter_us: 2_000,
            ..Default::default()
        };
        // packets further apart than the jitter show its whole spread
        let mut s = Scheduler::new(dir, None, 1);
        let mut last = 0;
        let mut spread = (u64::MAX, 0);
        for i in 0..20_000u64 {
            let now = i * 5_000_000;
            let at = due(s.fate(now, 1000));
            assert!(at >= last, "packet {i} would overtake");
            last = at;
            let d = at - now;
            assert!(d <= 12_000_000, "{d}");
            spread = (spread.0.min(d), spread.1.max(d));
        }
        assert!(spread.0 < 8_100_000 && spread.1 > 11_900_000, "{spread:?}");
        // packets closer together than the jitter still leave in order
        let mut s = Scheduler::new(dir, None, 2);
        let mut last = 0;
        for i in 0..20_000u64 {
            let at = due(s.fate(i * 50_000, 1000));
            assert!(at >= last, "packet {i} would overtake");
            last = at;
        }
    }

    #[test]
    fn reordered_packets_leave_at_once_and_lost_ones_never() {
        let dir = PathDir {
            delay_us: 5_000,
            loss: 0.01,
            reorder: 0.02,
            ..Default::default()
        };
        let mut s = Scheduler::new(dir, None, 3);
        let (mut lost, mut ahead, mut held) = (0, 0, 0);
        let mut i = 0u64;
        // one block of packets for the loss, then until a block of survivors
        while lost + ahead + held < BLOCK || ahead + held < BLOCK {
            i += 1;
            match s.fate(i, 100) {
                Fate::Lost => lost += 1,
                Fate::Due { at_ns, ahead: true } => {
                    assert_eq!(at_ns, i);
                    ahead += 1;
                }
                Fate::Due { at_ns, .. } => {
                    assert_eq!(at_ns, i + 5_000_000);
                    held += 1;
                }
                Fate::QueueFull => panic!("no bottleneck"),
            }
        }
        assert_eq!(ahead, 200, "an exact share of the packets not lost");
        assert!((100..=102).contains(&lost), "{lost}");
    }

    #[test]
    fn the_bottleneck_paces_frames_at_wire_cost_and_drops_past_its_queue() {
        let b = Bottleneck {
            rate_bps: 10e6,
            // ten frames as the wire counts them (the one being sent included)
            queue_bytes: 15_380,
            overhead_bytes: 24,
            min_bytes: 84,
        };
        // a 1514-byte frame (MTU 1500 with its MAC header) costs 1538 bytes: 1230.4 µs
        assert_eq!(b.wire_ns(1514), 1_230_400);
        assert_eq!(b.wire_ns(60), 67_200, "at least a minimum frame");
        let dir = PathDir {
            delay_us: 1_000,
            ..Default::default()
        };
        let mut s = Scheduler::new(dir, Some(b), 9);
        // a burst of 20 frames at once: 10 fit the queue (the first starts at once)
        let fates: Vec<Fate> = (0..20).map(|_| s.fate(0, 1514)).collect();
        let kept: Vec<u64> = fates
            .iter()
            .filter_map(|f| match f {
                Fate::Due { at_ns, .. } => Some(*at_ns),
                _ => None,
            })
            .collect();
        assert_eq!(kept.len(), 10, "{fates:?}");
        assert_eq!(fates.iter().filter(|f| **f == Fate::QueueFull).count(), 10);
        for (k, at) in kept.iter().enumerate() {
            assert_eq!(*at, (k as u64 + 1) * 1_230_400 + 1_000_000, "frame {k}");
        }
        // once the link has sent them, the queue takes frames again
        assert!(matches!(s.fate(13_000_000, 1514), Fate::Due { .. }));
        assert_eq!(s.queued_bytes(13_000_000), 1_538);
    }

    #[test]
    fn the_histogram_gives_percentiles_within_its_step() {
        let mut h = DelayHistogram::default();
        for us in 1..=10_000u64 {
            h.record(us);
        }
        for (q, want) in [(0.5, 5_000.0), (0.9, 9_000.0), (0.99, 9_900.0)] {
            let got = h.quantile_us(q).unwrap();
            assert!((got - want).abs() / want < 0.005, "q{q}: {got} vs {want}");
        }
        assert_eq!(h.total(), 10_000);
        assert!(DelayHistogram::default().quantile_us(0.5).is_none());
        for us in [
            0,
            1,
            15,
            16,
            127,
            128,
            129,
            255,
            256,
            1000,
            123_456,
            u32::MAX as u64,
        ] {
            let b = DelayHistogram::bucket(us);
            assert!(
                DelayHistogram::lower(b) <= us && us < DelayHistogram::lower(b + 1),
                "{us}"
            );
        }
    }

    #[test]
    fn bad_paths_are_refused_with_the_reason() {
        let jitter_over = PathDir {
            delay_us: 1_000,
            jitter_us: 2_000,
            ..Default::default()
        };
        assert!(jitter_over
            .validate()
            .unwrap_err()
            .to_string()
            .contains("jitter"));
        let reorder_no_delay = PathDir {
            reorder: 0.01,
            ..Default::default()
        };
        assert!(reorder_no_delay
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--delay"));
    }
}
