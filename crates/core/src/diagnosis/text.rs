//! Figures as the evidence lines print them: rates in SI units, sizes in IEC units,
//! percentages and durations, all safe on NaN and infinity.

use crate::units::{format_bps, format_bytes};

/// A percentage: "98 %", "5.6 %", "0.04 %".
pub(super) fn pct(x: f64) -> String {
    if !x.is_finite() {
        return "? %".into();
    }
    let a = x.abs();
    if a >= 10.0 || a == 0.0 {
        format!("{x:.0} %")
    } else if a >= 0.1 {
        format!("{x:.1} %")
    } else {
        format!("{x:.2} %")
    }
}

/// A bit rate, SI.
pub(super) fn rate(bps: f64) -> String {
    if bps.is_finite() && bps >= 0.0 {
        format_bps(bps)
    } else {
        "? bit/s".into()
    }
}

/// A size, IEC.
pub(super) fn size(bytes: f64) -> String {
    if bytes.is_finite() && bytes >= 0.0 {
        format_bytes(bytes.round() as u64)
    } else {
        "? B".into()
    }
}

/// A duration given in microseconds: "25 µs", "1.0 ms", "120 ms".
pub(super) fn micros(us: f64) -> String {
    if !us.is_finite() || us < 0.0 {
        "? ms".into()
    } else if us < 1_000.0 {
        format!("{us:.0} µs")
    } else if us < 100_000.0 {
        format!("{:.1} ms", us / 1_000.0)
    } else if us < 1_000_000.0 {
        format!("{:.0} ms", us / 1_000.0)
    } else {
        format!("{:.1} s", us / 1e6)
    }
}

/// A size as the `-w` flag takes it: the next power of two at or above `bytes`, at least
/// 64 KiB, written with an IEC suffix ("256K", "4M").
pub(super) fn flag_size(bytes: f64) -> String {
    let want = if bytes.is_finite() {
        bytes.max(65_536.0)
    } else {
        65_536.0
    };
    let want = want.min((1u64 << 30) as f64) as u64;
    let n = want.next_power_of_two();
    if n >= 1 << 20 {
        format!("{}M", n >> 20)
    } else {
        format!("{}K", n >> 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_print_with_units() {
        assert_eq!(pct(98.2), "98 %");
        assert_eq!(pct(5.62), "5.6 %");
        assert_eq!(pct(0.042), "0.04 %");
        assert_eq!(pct(f64::NAN), "? %");
        assert_eq!(micros(25.0), "25 µs");
        assert_eq!(micros(1_000.0), "1.0 ms");
        assert_eq!(micros(10_000_000.0), "10.0 s");
        assert_eq!(flag_size(128_000.0), "128K");
        assert_eq!(flag_size(3e6), "4M");
        assert_eq!(flag_size(f64::NAN), "64K");
        assert_eq!(rate(1e9), "1.00 Gbit/s");
        assert_eq!(size(5734.0), "5.60 KiB");
    }
}
