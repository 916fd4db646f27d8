//! Interval lines as iperf3 users read them: one line per stream and a `[SUM]` line per
//! flow when a test has more than one stream, and the senders' retransmits (`Retr`) and
//! congestion window (`Cwnd`) where this side took them.

use wirerate_core::result::Interval;
use wirerate_core::units::{format_bps, format_bytes};

/// Which columns interval lines carry besides the flow, span, bytes and goodput.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Columns {
    /// The stream column: `[  0]` for a stream's own line, `[SUM]` for the flow's sum.
    pub streams: bool,
    /// Retr and Cwnd of the flow's TCP senders.
    pub tcp: bool,
    /// UDP: the datagrams lost of those expected in the interval (iperf3's Lost/Total).
    pub udp: bool,
}

/// The Cwnd column's width: the widest size (`1023.99 KiB`) and a space more, so a window is
/// never read as the retransmit count's thousands (`1 767.38 KiB`).
const CWND: usize = 12;

/// The column header of interval lines.
pub fn header(c: Columns) -> String {
    let mut h = format!("{:<15}", "flow");
    if c.streams {
        h.push_str(&format!(" {:>5}", "[ ID]"));
    }
    h.push_str(&format!(
        " {:>15} {:>12} {:>15}",
        "interval", "received", "goodput"
    ));
    if c.tcp {
        h.push_str(&format!(" {:>6} {:>CWND$}", "Retr", "Cwnd"));
    }
    if c.udp {
        h.push_str(&format!(
            "  {:>10}  {:>22}",
            "Jitter", "Lost/Total datagrams"
        ));
    }
    h
}

/// One interval line. A flow's sum in a test of many streams shows its retransmits but
/// no window (the streams' windows are on their own lines), as iperf3's `[SUM]` does.
pub fn line(iv: &Interval, c: Columns) -> String {
    let mut l = format!("{:<15}", iv.flow.name());
    if c.streams {
        match iv.stream {
            Some(id) => l.push_str(&format!(" [{id:>3}]")),
            None => l.push_str(" [SUM]"),
        }
    }
    l.push_str(&format!(
        " {:>15} {:>12} {:>15}",
        format!("{:.2}-{:.2} s", iv.start_s, iv.end_s),
        format_bytes(iv.bytes),
        format_bps(iv.bps)
    ));
    if c.tcp {
        let tcp = iv.tcp.as_ref();
        let retr = tcp
            .and_then(|t| t.retransmits)
            .map_or_else(String::new, |r| r.to_string());
        let sum_of_many = c.streams && iv.stream.is_none();
        let cwnd = tcp
            .and_then(|t| t.snd_cwnd_bytes)
            .filter(|_| !sum_of_many)
            .map_or_else(String::new, format_bytes);
        l.push_str(&format!(" {retr:>6} {cwnd:>CWND$}"));
    }
    if let (Some(p), Some(loss)) = (iv.packets, iv.loss_percent) {
        let jitter = iv
            .jitter_ms
            .map_or_else(|| "-".into(), |j| format!("{j:.3} ms"));
        l.push_str(&format!("  {jitter:>10}  {:>22}", lost_total(p, loss)));
    }
    if iv.omitted {
        l.push_str("  (omitted)");
    }
    l.trim_end().to_string()
}

/// Every interval of a stored result, under their header, as `run` printed them (rr
/// intervals as `rr` prints them); empty when the result has none.
pub fn all(r: &wirerate_core::RunResult) -> String {
    let mut o = String::new();
    if r.intervals.is_empty() {
        return o;
    }
    let rr = r.intervals.iter().any(|iv| iv.rr.is_some());
    let c = Columns {
        streams: r.intervals.iter().any(|iv| iv.stream.is_some()),
        tcp: r.intervals.iter().any(|iv| iv.tcp.is_some()),
        udp: r.spec.protocol == wirerate_core::Protocol::Udp,
    };
    o.push_str(&if rr {
        crate::latency::rr_interval_header()
    } else {
        header(c)
    });
    o.push('\n');
    for iv in &r.intervals {
        o.push_str(&if rr {
            crate::text::interval(iv)
        } else {
            line(iv, c)
        });
        o.push('\n');
    }
    o
}

/// `lost/expected (loss %)` from an interval's received datagrams and loss; an interval
/// that received none shows only its loss (the count expected is not kept).
pub(crate) fn lost_total(received: u64, loss_percent: f64) -> String {
    if received == 0 {
        return format!("0 received ({loss_percent:.2} %)");
    }
    let expected = (received as f64 * 100.0 / (100.0 - loss_percent)).round() as u64;
    let lost = expected.saturating_sub(received);
    format!("{lost}/{expected} ({loss_percent:.2} %)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirerate_core::evidence::IntervalTcp;
    use wirerate_core::spec::Flow;

    fn iv(stream: Option<u32>) -> Interval {
        Interval {
            flow: Flow::ClientToServer,
            stream,
            start_s: 1.0,
            end_s: 2.0,
            bytes: 1 << 30,
            bps: 8.589934592e9,
            omitted: false,
            packets: None,
            loss_percent: None,
            jitter_ms: None,
            tcp: Some(IntervalTcp {
                retransmits: Some(7),
                snd_cwnd_bytes: Some(3 << 20),
                ..Default::default()
            }),
            bottleneck: None,
            rr: None,
        }
    }

    #[test]
    fn stream_and_sum_lines_as_iperf3_shows_them() {
        let c = Columns {
            streams: true,
            tcp: true,
            udp: false,
        };
        let h = header(c);
        assert!(
            h.contains("[ ID]") && h.ends_with("Retr         Cwnd"),
            "{h}"
        );
        let s = line(&iv(Some(3)), c);
        assert!(s.starts_with("client→server   [  3]"), "{s}");
        assert!(s.ends_with("     7     3.00 MiB"), "{s}");
        let sum = line(&iv(None), c);
        assert!(sum.contains("[SUM]") && sum.ends_with(" 7"), "{sum}");
        // the columns line up
        assert_eq!(h.chars().count(), s.chars().count(), "{h}\n{s}");
    }

    #[test]
    fn a_wide_window_stays_apart_from_the_retransmits() {
        let c = Columns {
            tcp: true,
            ..Default::default()
        };
        for (retr, cwnd) in [(1, 785_797), (999_999, 1_048_565 * 1023), (12, 4096)] {
            let mut one = iv(None);
            one.tcp = Some(IntervalTcp {
                retransmits: Some(retr),
                snd_cwnd_bytes: Some(cwnd),
                ..Default::default()
            });
            let l = line(&one, c);
            let size = format_bytes(cwnd);
            let before = l.strip_suffix(&size).expect(&l);
            let gap = before.len() - before.trim_end().len();
            assert!(
                before.trim_end().ends_with(&format!(" {retr}")) && gap >= 2,
                "{l}"
            );
            assert_eq!(header(c).chars().count(), l.chars().count(), "{l}");
        }
    }

    #[test]
    fn udp_lines_carry_lost_of_total() {
        let mut u = iv(None);
        u.tcp = None;
        u.packets = Some(950);
        u.loss_percent = Some(5.0);
        u.jitter_ms = Some(0.0421);
        let c = Columns {
            udp: true,
            ..Default::default()
        };
        let l = line(&u, c);
        assert!(l.ends_with("  0.042 ms        50/1000 (5.00 %)"), "{l}");
        assert!(header(c).ends_with("    Jitter    Lost/Total datagrams"));
        assert_eq!(header(c).chars().count(), l.chars().count(), "{l}");
        u.packets = Some(0);
        u.loss_percent = Some(100.0);
        assert!(line(&u, c).ends_with("0 received (100.00 %)"));
    }

    #[test]
    fn one_stream_without_samples_keeps_the_plain_line() {
        let mut one = iv(None);
        one.tcp = None;
        let l = line(&one, Columns::default());
        assert_eq!(l, crate::text::interval(&one));
    }
}
