//! What `run` prints while a test runs: interval lines (per stream with a `[SUM]` line when
//! streams report their own, and the TCP senders' Retr and Cwnd), and a progress line on a
//! terminal when intervals are off.
//!
//! The bytes of an interval come from the side that receives; the TCP sample of the same
//! span from the side that sends. For the flows the client sends, the server's intervals
//! wait here until the client's own sample of that flow, stream and start is in (both
//! sides cut intervals on the same schedule), so each line is printed whole, at most one
//! interval late. Samples of the flows the server sends come only with its final report:
//! those figures are in the result (`intervals[].tcp`), not on the lines, the last either.

use std::collections::VecDeque;
use std::io::Write;

use wirerate_control::Observer;
use wirerate_core::evidence::TcpSample;
use wirerate_core::result::Interval;
use wirerate_core::spec::Flow;
use wirerate_core::window::{covers, is_tail};
use wirerate_core::{Protocol, RunResult, TestSpec};
use wirerate_render::intervals::{self, Columns};

/// Prints interval lines (text) and a progress line on a terminal.
pub struct Printer {
    text: bool,
    progress: bool,
    total_s: Option<f64>,
    shown_progress: bool,
    /// Said once under the interval header: why some intervals will not come.
    note: Option<String>,
    cols: Columns,
    /// The flows whose lines wait for this side's TCP sample.
    joined: Vec<Flow>,
    pending: VecDeque<Interval>,
    samples: VecDeque<TcpSample>,
    /// The most lines (or samples) of one interval tick: beyond a few ticks' worth, a
    /// line waits no longer.
    per_tick: usize,
    /// The start of the last line printed, per flow: what the final result adds.
    last_start: Vec<(Flow, f64)>,
    /// Lines that end where the test does: the result may fold a tail into them, so they
    /// are printed from it.
    last_lines: Vec<Interval>,
    /// `--json-stream`: the start event's data, until it is printed.
    stream_start: Option<serde_json::Value>,
    /// `--json-stream`: events are printed, one JSON object a line.
    streaming: bool,
    /// Interval lines come (`-i` above 0): the column header is printed.
    intervals: bool,
    /// The flows in the order their lines are printed within an interval (both ways at
    /// once: the same order every interval, whichever side's report comes first).
    order: Vec<Flow>,
    /// Lines of an interval of more than one flow, until each flow's is in.
    tick: Vec<Interval>,
}

/// One `--json-stream` event, on a line of its own and flushed at once.
fn event(name: &str, data: serde_json::Value) {
    // the event's name first, as iperf3 writes it
    let mut out = crate::exit::stdout();
    let written = writeln!(
        out,
        "{{\"event\":{},\"data\":{data}}}",
        serde_json::json!(name)
    )
    .and_then(|()| out.flush());
    if written.is_err() {
        // a reader that went away (`| head`): nothing more to say
        std::process::exit(0);
    }
}

const EPS: f64 = 1e-6;

impl Printer {
    /// `local_samples`: this side sends its TCP samples live (a wirerate server, not an
    /// iperf3 one).
    pub fn new(spec: &TestSpec, text: bool, progress: bool, local_samples: bool) -> Printer {
        let tcp = spec.protocol == Protocol::Tcp && spec.test.is_stream();
        // the flows this side sends, whose TCP samples it takes itself
        let joined: Vec<Flow> = if tcp && local_samples {
            let flows = spec.direction.flows().iter().copied();
            flows.filter(|f| f.sender_is_client()).collect()
        } else {
            Vec::new()
        };
        let streams = spec.per_stream_intervals();
        let per_tick = spec.direction.flows().len()
            * if streams {
                1 + spec.parallel as usize
            } else {
                1
            };
        Printer {
            text,
            progress,
            total_s: spec.send_seconds(),
            shown_progress: false,
            note: None,
            cols: Columns {
                streams,
                tcp: !joined.is_empty(),
                udp: spec.protocol == Protocol::Udp,
            },
            joined,
            pending: VecDeque::new(),
            samples: VecDeque::new(),
            per_tick,
            last_start: Vec::new(),
            last_lines: Vec::new(),
            stream_start: None,
            streaming: false,
            intervals: spec.interval_s > 0.0,
            order: spec.direction.flows().to_vec(),
            tick: Vec::new(),
        }
    }

    /// Prints `--json-stream` events instead of lines: `start` with `data`, one
    /// `interval` per interval as it comes, and `end` with the whole result.
    pub fn with_json_stream(mut self, data: serde_json::Value) -> Printer {
        self.text = false;
        self.progress = false;
        self.stream_start = Some(data);
        self.streaming = true;
        self
    }

    pub fn with_note(mut self, note: Option<String>) -> Printer {
        self.note = note;
        self
    }

    pub fn clear_progress(&mut self) {
        if self.shown_progress {
            eprint!("\r{:40}\r", "");
            self.shown_progress = false;
        }
    }

    fn print(&mut self, iv: &Interval) {
        if self.total_s.is_some_and(|t| iv.end_s >= t - EPS) && iv.rr.is_none() {
            self.last_lines.push(iv.clone());
            return;
        }
        if self.order.len() < 2 {
            self.show(iv);
            return;
        }
        // both ways at once: an interval's lines wait until every flow's is in (one flow's
        // may come an interval late), then go out in the flows' order
        self.tick.push(iv.clone());
        let same = |x: &Interval| (x.start_s - iv.start_s).abs() < EPS;
        let complete = self.tick.iter().filter(|x| same(x)).count() >= self.per_tick;
        let starts = |t: &[Interval]| {
            let mut v: Vec<f64> = t.iter().map(|x| x.start_s).collect();
            v.dedup_by(|a, b| (*a - *b).abs() < EPS);
            v.len()
        };
        if complete {
            self.flush_tick(Some(iv.start_s));
        } else if starts(&self.tick) > 2 {
            let oldest = self.tick.iter().map(|x| x.start_s).fold(f64::MAX, f64::min);
            self.flush_tick(Some(oldest));
        }
    }

    /// The lines held of intervals up to `upto` (all with None), interval by interval, each
    /// in the flows' order (within a flow, its streams by id, then its sum).
    fn flush_tick(&mut self, upto: Option<f64>) {
        let held = std::mem::take(&mut self.tick);
        let (mut lines, keep): (Vec<Interval>, Vec<Interval>) = held
            .into_iter()
            .partition(|x| upto.is_none_or(|u| x.start_s <= u + EPS));
        self.tick = keep;
        lines.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
        let mut at = 0;
        while at < lines.len() {
            let start = lines[at].start_s;
            let end = (at..lines.len())
                .find(|&i| (lines[i].start_s - start).abs() > EPS)
                .unwrap_or(lines.len());
            self.sort(&mut lines[at..end]);
            at = end;
        }
        for iv in &lines {
            self.show(iv);
        }
    }

    fn sort(&self, lines: &mut [Interval]) {
        let rank = |iv: &Interval| {
            let flow = self.order.iter().position(|f| *f == iv.flow);
            (flow, iv.stream.is_none(), iv.stream)
        };
        lines.sort_by_key(rank);
    }

    fn show(&mut self, iv: &Interval) {
        if self.streaming {
            event("interval", serde_json::to_value(iv).unwrap_or_default());
        } else {
            self.clear_progress();
            // a flow the server sends has its TCP figures in the result only: its lines
            // leave Retr and Cwnd blank, the last one too, though the result has them there
            let mut bare;
            let line_iv = if self.joined.contains(&iv.flow) || iv.tcp.is_none() {
                iv
            } else {
                bare = iv.clone();
                bare.tcp = None;
                &bare
            };
            crate::say!("{}", intervals::line(line_iv, self.cols));
        }
        match self.last_start.iter_mut().find(|(f, _)| *f == iv.flow) {
            Some((_, s)) => *s = iv.start_s,
            None => self.last_start.push((iv.flow, iv.start_s)),
        }
    }

    /// Prints the waiting lines whose samples are in, in the order they came; a line whose
    /// sample will not come (a later one of its flow is in, or too many wait) goes without.
    fn drain(&mut self) {
        while let Some(head) = self.pending.front() {
            let key = |s: &TcpSample| {
                s.flow == head.flow && s.stream == head.stream && covers(head, s.start_s, s.end_s)
            };
            let found = self.samples.iter().position(key);
            let overtaken = self
                .samples
                .iter()
                .any(|s| s.flow == head.flow && s.start_s >= head.end_s - EPS);
            if found.is_none() && !overtaken && self.pending.len() <= 4 * self.per_tick {
                return;
            }
            let Some(mut iv) = self.pending.pop_front() else {
                return;
            };
            if let Some(s) = found.and_then(|i| self.samples.remove(i)) {
                iv.tcp = Some(s.tcp);
            }
            self.print(&iv);
        }
    }

    /// After the test: the lines still waiting, with the samples the result joined to
    /// them, and the intervals that never came live (the server's last, partial one).
    pub fn finish(&mut self, r: &RunResult) {
        if !self.text && !self.streaming {
            return;
        }
        let joined = |iv: &Interval| {
            r.intervals.iter().find(|x| {
                x.flow == iv.flow && x.stream == iv.stream && (x.start_s - iv.start_s).abs() < EPS
            })
        };
        let period = r.spec.interval_s;
        while let Some(mut iv) = self.pending.pop_front() {
            if iv.tcp.is_none() {
                iv.tcp = joined(&iv).and_then(|x| x.tcp.clone());
            }
            self.print(&iv);
        }
        self.flush_tick(None);
        // the last lines as the result has them, a tail folded in
        let mut last_lines = std::mem::take(&mut self.last_lines);
        self.sort(&mut last_lines);
        for iv in last_lines {
            let mut last = joined(&iv).cloned().unwrap_or(iv);
            if last.tcp.is_none() {
                last.tcp = joined(&last).and_then(|x| x.tcp.clone());
            }
            self.show(&last);
        }
        let last = self.last_start.clone();
        for iv in &r.intervals {
            let seen = last
                .iter()
                .find(|(f, _)| *f == iv.flow)
                .is_some_and(|(_, s)| iv.start_s <= s + EPS);
            // a tail is no rate: a peer that made one has its bytes in the summary
            if !seen && iv.rr.is_none() && !is_tail(iv.end_s - iv.start_s, period) {
                self.show(iv);
            }
        }
        if self.streaming {
            event("end", serde_json::to_value(r).unwrap_or_default());
        }
    }
}

impl Observer for Printer {
    fn started(&mut self) {
        if let Some(data) = self.stream_start.take() {
            event("start", data);
        }
        if self.text && self.intervals {
            crate::say!("{}", intervals::header(self.cols));
            if let Some(note) = &self.note {
                crate::say!("{note}");
            }
        }
    }

    fn interval(&mut self, iv: &Interval) {
        if self.streaming {
            self.print(iv);
            return;
        }
        if !self.text {
            return;
        }
        if self.joined.contains(&iv.flow) {
            self.pending.push_back(iv.clone());
            self.drain();
        } else {
            self.print(iv);
        }
    }

    fn tcp_sample(&mut self, s: &TcpSample) {
        if !self.text || !self.joined.contains(&s.flow) {
            return;
        }
        self.samples.push_back(s.clone());
        while self.samples.len() > 4 * self.per_tick {
            self.samples.pop_front();
        }
        self.drain();
    }

    fn tick(&mut self, elapsed_s: f64) {
        if self.progress {
            let total = self
                .total_s
                .map_or_else(String::new, |t| format!(" of {t:.0} s"));
            eprint!("\r  running: {elapsed_s:.1} s{total}   ");
            let _ = std::io::stderr().flush();
            self.shown_progress = true;
        }
    }
}
