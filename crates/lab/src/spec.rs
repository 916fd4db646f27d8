//! What a lab is made of, validated, and the names and commands derived from it. Pure:
//! nothing here touches the system, so every rule is unit-tested.

use serde::{Deserialize, Serialize};
use wirerate_core::wire::{
    INTER_FRAME_GAP_BYTES, MAC_HEADER_BYTES, MAX_MTU, MIN_FRAME_BYTES, MIN_MTU_IPV4,
    PER_FRAME_OVERHEAD_BYTES, PREAMBLE_SFD_BYTES,
};

use crate::LabError;

/// Every namespace a lab makes starts with this, then `NAME-HOST`.
pub const NETNS_PREFIX: &str = "wr-";
/// The veth end inside each host's namespace.
pub const IFNAME: &str = "wr0";
/// The lowest and highest link rates the shaper is asked for, bit/s.
pub const MIN_RATE_BPS: f64 = 64e3;
pub const MAX_RATE_BPS: f64 = 100e9;
/// What tbf adds to each packet's length (MAC header included): preamble, FCS and gap.
pub const TBF_OVERHEAD_BYTES: u32 = PER_FRAME_OVERHEAD_BYTES;
/// The least tbf charges a packet: a minimum frame plus preamble and gap.
pub const TBF_MPU_BYTES: u32 = MIN_FRAME_BYTES + PREAMBLE_SFD_BYTES + INTER_FRAME_GAP_BYTES;

/// A lab as asked for: two hosts joined by one full-duplex shaped link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LabSpec {
    pub name: String,
    pub hosts: [String; 2],
    pub link_bps: f64,
    /// Queue limit at each egress, bytes of packets (MAC header included).
    pub buffer_bytes: u64,
    pub mtu: u32,
}

impl LabSpec {
    /// Checks names, rate, MTU and buffer; the error says which and why.
    pub fn validate(&self) -> Result<(), LabError> {
        check_ident("lab name", &self.name, 16)?;
        for h in &self.hosts {
            check_ident("host name", h, 12)?;
        }
        if self.hosts[0] == self.hosts[1] {
            return Err(invalid(format!(
                "host names must differ, both are '{}'",
                self.hosts[0]
            )));
        }
        if !(self.link_bps.is_finite() && (MIN_RATE_BPS..=MAX_RATE_BPS).contains(&self.link_bps)) {
            return Err(invalid(format!(
                "rate {} bit/s is outside {MIN_RATE_BPS} to {MAX_RATE_BPS} bit/s",
                self.link_bps
            )));
        }
        if !(MIN_MTU_IPV4..=MAX_MTU).contains(&self.mtu) {
            return Err(invalid(format!(
                "MTU {} is outside {MIN_MTU_IPV4} to {MAX_MTU}",
                self.mtu
            )));
        }
        let frame = u64::from(self.mtu + MAC_HEADER_BYTES);
        if self.buffer_bytes < frame {
            return Err(invalid(format!(
                "buffer {} bytes cannot hold one {frame}-byte frame at MTU {}",
                self.buffer_bytes, self.mtu
            )));
        }
        if self.buffer_bytes > u64::from(u32::MAX) {
            return Err(invalid(format!(
                "buffer {} bytes is too large",
                self.buffer_bytes
            )));
        }
        Ok(())
    }

    pub fn netns(&self, host_index: usize) -> String {
        netns_name(&self.name, &self.hosts[host_index])
    }

    /// The token bucket: two full frames, or 1 ms of the rate when that is more, so fast
    /// links do not depend on sub-millisecond timers while slow ones stay close to a wire.
    pub fn burst_bytes(&self) -> u64 {
        let frames = 2 * u64::from(self.mtu + MAC_HEADER_BYTES + TBF_OVERHEAD_BYTES);
        let one_ms = (self.link_bps / 8.0 / 1000.0).ceil() as u64;
        frames.max(one_ms)
    }

    /// Arguments to `tc` that shape one egress like an Ethernet wire of this rate.
    pub fn tbf_args(&self, netns: &str) -> Vec<String> {
        let rate = format!("{}bit", self.link_bps.round() as u64);
        [
            "-n",
            netns,
            "qdisc",
            "add",
            "dev",
            IFNAME,
            "root",
            "tbf",
            "rate",
            &rate,
            "burst",
            &self.burst_bytes().to_string(),
            "limit",
            &self.buffer_bytes.to_string(),
            "overhead",
            &TBF_OVERHEAD_BYTES.to_string(),
            "mpu",
            &TBF_MPU_BYTES.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }
}

/// Host `i`'s IPv4 address with its prefix. Each lab is its own pair of namespaces, so
/// every lab can use the same private addresses without meeting another.
pub fn ipv4_cidr(host_index: usize) -> String {
    format!("10.77.0.{}/24", host_index + 1)
}

/// Host `i`'s IPv6 address (unique local range) with its prefix.
pub fn ipv6_cidr(host_index: usize) -> String {
    format!("fd77::{}/64", host_index + 1)
}

/// The address part of a `addr/prefix` string.
pub fn addr_of(cidr: &str) -> &str {
    cidr.split('/').next().unwrap_or(cidr)
}

pub fn netns_name(lab: &str, host: &str) -> String {
    format!("{NETNS_PREFIX}{lab}-{host}")
}

/// Splits `wr-LAB-HOST` into (LAB, HOST); None for names this crate did not make.
pub fn parse_netns(ns: &str) -> Option<(&str, &str)> {
    let rest = ns.strip_prefix(NETNS_PREFIX)?;
    let (lab, host) = rest.split_once('-')?;
    let ok = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    (ok(lab) && ok(host)).then_some((lab, host))
}

fn check_ident(what: &str, s: &str, max: usize) -> Result<(), LabError> {
    let ok = !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "{what} '{s}' must be 1 to {max} lowercase letters or digits"
        )))
    }
}

fn invalid(msg: String) -> LabError {
    LabError::Invalid(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> LabSpec {
        LabSpec {
            name: "t1".into(),
            hosts: ["a".into(), "b".into()],
            link_bps: 10e6,
            buffer_bytes: 65536,
            mtu: 1500,
        }
    }

    #[test]
    fn overhead_is_preamble_fcs_and_gap() {
        assert_eq!(TBF_OVERHEAD_BYTES, 24);
        assert_eq!(TBF_MPU_BYTES, 84);
    }

    #[test]
    fn tbf_arguments() {
        let s = spec();
        assert_eq!(s.burst_bytes(), 3076);
        assert_eq!(
            s.tbf_args("wr-t1-a").join(" "),
            "-n wr-t1-a qdisc add dev wr0 root tbf rate 10000000bit burst 3076 limit 65536 \
             overhead 24 mpu 84"
        );
        let fast = LabSpec {
            link_bps: 10e9,
            ..spec()
        };
        assert_eq!(fast.burst_bytes(), 1_250_000);
    }

    #[test]
    fn names_round_trip() {
        let s = spec();
        assert_eq!(s.netns(1), "wr-t1-b");
        assert_eq!(parse_netns("wr-t1-b"), Some(("t1", "b")));
        for other in [
            "t1-b",
            "wr-",
            "wr-t1",
            "wr-t1-",
            "wr-T1-b",
            "wr-t1-b-c",
            "wrx-t1-b",
        ] {
            assert_eq!(parse_netns(other), None, "{other}");
        }
        assert_eq!(addr_of(&ipv4_cidr(0)), "10.77.0.1");
        assert_eq!(addr_of(&ipv6_cidr(1)), "fd77::2");
    }

    #[test]
    fn bad_specs_are_refused() {
        let bad = [
            LabSpec {
                name: "".into(),
                ..spec()
            },
            LabSpec {
                name: "a-b".into(),
                ..spec()
            },
            LabSpec {
                name: "x".repeat(17),
                ..spec()
            },
            LabSpec {
                hosts: ["a".into(), "a".into()],
                ..spec()
            },
            LabSpec {
                hosts: ["a".into(), "B".into()],
                ..spec()
            },
            LabSpec {
                link_bps: 0.0,
                ..spec()
            },
            LabSpec {
                link_bps: f64::NAN,
                ..spec()
            },
            LabSpec {
                link_bps: 1e12,
                ..spec()
            },
            LabSpec { mtu: 67, ..spec() },
            LabSpec {
                mtu: 70_000,
                ..spec()
            },
            LabSpec {
                buffer_bytes: 1000,
                ..spec()
            },
        ];
        for s in bad {
            assert!(s.validate().is_err(), "{s:?}");
        }
        assert!(spec().validate().is_ok());
    }
}
