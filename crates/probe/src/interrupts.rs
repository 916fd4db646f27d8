//! Interrupt work per core: the hardware interrupt lines of the test interfaces
//! (`/proc/interrupts`) and the NET_RX / NET_TX softirqs (`/proc/softirqs`).
//!
//! Promise: parsing is pure and never panics. The header names the CPU columns; a line
//! with fewer counts than CPUs (`ERR:`, `MIS:`) is read as far as it goes. Per-core
//! vectors are indexed by the CPU number of the header, so an offline CPU is a 0 column
//! between online ones rather than a shift.

use std::path::Path;

use wirerate_core::evidence::IrqDelta;

/// CPU numbers at or above this are ignored: the kernel's own limit (NR_CPUS) is 8192,
/// and a garbled header must not size a vector.
const MAX_CPUS: u32 = 1 << 14;

/// One table: `/proc/interrupts` or `/proc/softirqs`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IrqTable {
    /// CPU numbers of the columns, from the header.
    pub cpus: Vec<u32>,
    pub lines: Vec<IrqLine>,
}

/// One line: its label (`38`, `NMI`, `NET_RX`), counts by column, and the text after the
/// counts (chip, type and the handlers' names), whitespace collapsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IrqLine {
    pub label: String,
    pub counts: Vec<u64>,
    pub description: String,
}

/// Parses either file.
pub fn parse(text: &str) -> IrqTable {
    let mut lines = text.lines();
    let cpus: Vec<u32> = lines
        .next()
        .unwrap_or("")
        .split_ascii_whitespace()
        .filter_map(|c| c.strip_prefix("CPU")?.parse().ok())
        .collect();
    let lines = lines
        .filter_map(|line| {
            let (label, rest) = line.split_once(':')?;
            let mut counts = Vec::with_capacity(cpus.len());
            let mut words = rest.split_ascii_whitespace().peekable();
            while counts.len() < cpus.len() {
                match words.peek().and_then(|w| w.parse::<u64>().ok()) {
                    Some(v) => {
                        counts.push(v);
                        words.next();
                    }
                    None => break,
                }
            }
            Some(IrqLine {
                label: label.trim().to_string(),
                counts,
                description: words.collect::<Vec<_>>().join(" "),
            })
        })
        .collect();
    IrqTable { cpus, lines }
}

impl IrqTable {
    /// A line's counts placed at their CPU numbers.
    fn per_cpu(&self, line: &IrqLine) -> Vec<u64> {
        let width = self
            .cpus
            .iter()
            .filter(|c| **c < MAX_CPUS)
            .max()
            .map_or(0, |m| *m as usize + 1);
        let mut v = vec![0; width];
        for (cpu, count) in self.cpus.iter().zip(&line.counts) {
            if let Some(slot) = v.get_mut(*cpu as usize) {
                *slot = *count;
            }
        }
        v
    }

    fn line(&self, label: &str) -> Option<&IrqLine> {
        self.lines.iter().find(|l| l.label == label)
    }
}

/// Elementwise after − before (saturating), over the longer of the two.
fn per_core_delta(before: &[u64], after: &[u64]) -> Vec<u64> {
    (0..after.len().max(before.len()))
        .map(|i| {
            let a = after.get(i).copied().unwrap_or(0);
            a.saturating_sub(before.get(i).copied().unwrap_or(0))
        })
        .collect()
}

/// True when `name` occurs in `text` as a whole word: not preceded or followed by a letter
/// or digit (`eth0` is in `eth0-TxRx-0`, not in `veth0` or `eth01`).
pub fn mentions(text: &str, name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    text.match_indices(name).any(|(at, _)| {
        !alnum(text[..at].chars().next_back()) && !alnum(text[at + name.len()..].chars().next())
    })
}

/// The names an interface's interrupts may carry: the interface's own, and its device's
/// (`/sys/class/net/IF/device` → `virtio2`, or a PCI address such as `0000:00:03.0`).
pub fn irq_names(ifaces: &[String]) -> Vec<String> {
    let mut names = Vec::new();
    for iface in ifaces {
        if iface.is_empty() || iface.contains('/') || iface.starts_with('.') {
            continue;
        }
        names.push(iface.clone());
        let dev = Path::new("/sys/class/net").join(iface).join("device");
        if let Some(base) = std::fs::read_link(&dev)
            .ok()
            .and_then(|t| t.file_name().map(|b| b.to_string_lossy().into_owned()))
        {
            names.push(base);
        }
    }
    names.sort();
    names.dedup();
    names
}

/// The interrupt lines whose description mentions one of `names` and that fired in the
/// window, per core.
pub fn irq_deltas(before: &IrqTable, after: &IrqTable, names: &[String]) -> Vec<IrqDelta> {
    after
        .lines
        .iter()
        .filter(|l| names.iter().any(|n| mentions(&l.description, n)))
        .filter_map(|a| {
            let b = before.line(&a.label)?;
            let per_core = per_core_delta(&before.per_cpu(b), &after.per_cpu(a));
            per_core.iter().any(|v| *v > 0).then(|| IrqDelta {
                irq: a.label.clone(),
                name: a.description.clone(),
                per_core,
            })
        })
        .collect()
}

/// A softirq's per-core delta (`NET_RX`, `NET_TX`); None when either table lacks it.
pub fn softirq_delta(before: &IrqTable, after: &IrqTable, label: &str) -> Option<Vec<u64>> {
    let b = before.line(label)?;
    let a = after.line(label)?;
    Some(per_core_delta(&before.per_cpu(b), &after.per_cpu(a)))
}

/// Reads a table now; None where the file cannot be read.
pub fn snapshot(path: &str) -> Option<IrqTable> {
    std::fs::read_to_string(path).ok().map(|t| parse(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    const IRQ_A: &str = "           CPU0       CPU1       \n\
 26:          0         15  IO-APIC   4-edge      ttyS0\n\
 38:          0       1149 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n\
 39:        900          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0\n\
 50:         10         10  IR-PCI-MSI 1-edge      eth0-TxRx-0\n\
 51:         10         10  IR-PCI-MSI 2-edge      veth0-rx\n\
 52:          5          5  IR-PCI-MSI 3-edge      eth0, eth1\n\
NMI:          0          0   Non-maskable interrupts\n\
ERR:          0\n\
MIS:          0\n";

    const IRQ_B: &str = "           CPU0       CPU1       \n\
 26:          0         15  IO-APIC   4-edge      ttyS0\n\
 38:          0       1300 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n\
 39:        950          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0\n\
 50:         12         10  IR-PCI-MSI 1-edge      eth0-TxRx-0\n\
 51:         20         10  IR-PCI-MSI 2-edge      veth0-rx\n\
 52:          5          5  IR-PCI-MSI 3-edge      eth0, eth1\n\
NMI:          0          0   Non-maskable interrupts\n\
ERR:          3\n\
MIS:          0\n";

    #[test]
    fn short_lines_do_not_break_the_table() {
        let t = parse(IRQ_A);
        assert_eq!(t.cpus, vec![0, 1]);
        let err = t.line("ERR").unwrap();
        assert_eq!(err.counts, vec![0]);
        assert_eq!(err.description, "");
        let l = t.line("38").unwrap();
        assert_eq!(l.counts, vec![0, 1149]);
        assert_eq!(
            l.description,
            "PCI-MSIX-0000:00:03.0 1-edge virtio2-input.0"
        );
    }

    #[test]
    fn keeps_the_interfaces_lines_that_fired() {
        let (a, b) = (parse(IRQ_A), parse(IRQ_B));
        let d = irq_deltas(&a, &b, &["eth0".into(), "virtio2".into()]);
        let got: Vec<(&str, &[u64])> = d
            .iter()
            .map(|d| (d.irq.as_str(), d.per_core.as_slice()))
            .collect();
        // 51 (veth0) is not eth0; 52 mentions eth0 but did not fire
        assert_eq!(
            got,
            vec![
                ("38", &[0u64, 151][..]),
                ("39", &[50, 0][..]),
                ("50", &[2, 0][..])
            ]
        );
        assert!(irq_deltas(&a, &b, &[]).is_empty());
    }

    #[test]
    fn whole_word_matching() {
        assert!(mentions("eth0-TxRx-0", "eth0"));
        assert!(mentions("eth0, eth1", "eth1"));
        assert!(mentions("PCI-MSIX-0000:00:03.0 1-edge", "0000:00:03.0"));
        assert!(!mentions("veth0-rx", "eth0"));
        assert!(!mentions("eth01", "eth0"));
        assert!(!mentions("virtio20-input.0", "virtio2"));
        assert!(!mentions("anything", ""));
        assert!(mentions("é eth0 é", "eth0"));
    }

    #[test]
    fn softirqs_per_core_by_cpu_number() {
        let a = parse("      CPU0  CPU2\n NET_TX: 4 0\n NET_RX: 100 200\n");
        let b = parse("      CPU0  CPU2\n NET_TX: 5 3\n NET_RX: 150 260\n");
        assert_eq!(softirq_delta(&a, &b, "NET_RX"), Some(vec![50, 0, 60]));
        assert_eq!(softirq_delta(&a, &b, "NET_TX"), Some(vec![1, 0, 3]));
        assert_eq!(softirq_delta(&a, &b, "BLOCK"), None);
    }

    #[test]
    fn garbage_never_panics() {
        for text in [IRQ_A, IRQ_B] {
            for cut in 0..text.len() {
                let t = parse(&text[..cut]);
                let _ = irq_deltas(&t, &parse(IRQ_B), &["eth0".into()]);
                let _ = softirq_delta(&t, &t, "NET_RX");
            }
        }
        let huge = parse("CPU4294967295\n X: 1\n");
        // an absurd CPU number is not an absurd allocation
        assert_eq!(softirq_delta(&huge, &huge, "X"), Some(vec![]));
    }

    #[test]
    fn reads_this_machine() {
        let soft = snapshot("/proc/softirqs").expect("/proc/softirqs");
        let rx = softirq_delta(&soft, &soft, "NET_RX").expect("NET_RX");
        assert!(!rx.is_empty() && rx.iter().all(|v| *v == 0));
        let irqs = snapshot("/proc/interrupts").expect("/proc/interrupts");
        assert!(!irqs.cpus.is_empty());
        let _ = irq_deltas(&irqs, &irqs, &irq_names(&["lo".into()]));
    }
}
