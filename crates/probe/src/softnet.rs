//! `/proc/net/softnet_stat`: per core, the packets the receive softirq processed, the ones
//! dropped because the core's backlog was full, and the times it ran out of budget with
//! work left (time squeeze).
//!
//! Promise: parsing is pure and never panics; a line with fewer than three hex columns is
//! skipped. The counters are the kernel's 32-bit ones, so deltas wrap at 2^32 as they do.

use wirerate_core::evidence::SoftnetDelta;

/// One core's counters as printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SoftnetLine {
    pub core: u32,
    pub processed: u32,
    pub dropped: u32,
    pub time_squeeze: u32,
}

/// The column that carries the core id on kernels that print it (13 columns or more).
const CORE_COLUMN: usize = 12;

/// Parses the text of `/proc/net/softnet_stat`. The core is column 12 where the kernel
/// prints it, else the line's index (older kernels print only online cores, in order).
pub fn parse(text: &str) -> Vec<SoftnetLine> {
    text.lines()
        .enumerate()
        .filter_map(|(index, line)| {
            let cols: Vec<Option<u32>> = line
                .split_ascii_whitespace()
                .map(|c| u32::from_str_radix(c, 16).ok())
                .collect();
            let at = |i: usize| cols.get(i).copied().flatten();
            let core = if cols.len() > CORE_COLUMN {
                at(CORE_COLUMN)?
            } else {
                u32::try_from(index).ok()?
            };
            Some(SoftnetLine {
                core,
                processed: at(0)?,
                dropped: at(1)?,
                time_squeeze: at(2)?,
            })
        })
        .collect()
}

/// Reads the file now; None where it cannot be read.
pub fn snapshot() -> Option<Vec<SoftnetLine>> {
    std::fs::read_to_string("/proc/net/softnet_stat")
        .ok()
        .map(|t| parse(&t))
}

/// Per-core deltas of the cores present in both snapshots, in the order of `after`.
pub fn delta(before: &[SoftnetLine], after: &[SoftnetLine]) -> Vec<SoftnetDelta> {
    after
        .iter()
        .filter_map(|a| {
            let b = before.iter().find(|b| b.core == a.core)?;
            Some(SoftnetDelta {
                core: a.core,
                processed: u64::from(a.processed.wrapping_sub(b.processed)),
                dropped: u64::from(a.dropped.wrapping_sub(b.dropped)),
                time_squeeze: u64::from(a.time_squeeze.wrapping_sub(b.time_squeeze)),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // a 6.x kernel: 15 columns, the core id in column 12 (core 1 is offline here)
    const NEW: &str = "00156134 00000002 00000003 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n\
001f45ad 00000000 00000010 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000002 00000000 00000000\n";
    // a 4.x kernel: 11 columns, no core id
    const OLD: &str = "0000000a 00000000 00000001 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n\
0000000b 00000001 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n";

    #[test]
    fn core_from_column_twelve_or_line_index() {
        let n = parse(NEW);
        assert_eq!(n.len(), 2);
        assert_eq!(
            n[0],
            SoftnetLine {
                core: 0,
                processed: 0x156134,
                dropped: 2,
                time_squeeze: 3
            }
        );
        assert_eq!(n[1].core, 2);
        assert_eq!(n[1].time_squeeze, 16);
        let o = parse(OLD);
        assert_eq!(o.iter().map(|l| l.core).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(o[1].dropped, 1);
    }

    #[test]
    fn deltas_wrap_like_the_kernels_counters() {
        let b = vec![SoftnetLine {
            core: 3,
            processed: u32::MAX - 1,
            dropped: 5,
            time_squeeze: 0,
        }];
        let a = vec![
            SoftnetLine {
                core: 3,
                processed: 8,
                dropped: 7,
                time_squeeze: 1,
            },
            SoftnetLine {
                core: 4,
                processed: 1,
                dropped: 0,
                time_squeeze: 0,
            },
        ];
        let d = delta(&b, &a);
        assert_eq!(d.len(), 1, "a core not in both snapshots has no delta");
        assert_eq!((d[0].core, d[0].processed, d[0].dropped), (3, 10, 2));
        assert_eq!(d[0].time_squeeze, 1);
    }

    #[test]
    fn garbage_is_skipped() {
        for cut in 0..NEW.len() {
            let _ = parse(&NEW[..cut]);
        }
        assert!(parse("zz 1 2\n\n1 2\n").is_empty());
        assert_eq!(parse("1 2 3\n").len(), 1);
        // a 13-column line whose core column is not hex is dropped, not given core 0
        let bad = "1 2 3 0 0 0 0 0 0 0 0 0 xx\n";
        assert!(parse(bad).is_empty());
    }

    #[test]
    fn reads_this_machine() {
        let lines = snapshot().expect("/proc/net/softnet_stat");
        assert!(!lines.is_empty());
        let d = delta(&lines, &snapshot().unwrap_or_default());
        assert_eq!(d.len(), lines.len());
    }
}
