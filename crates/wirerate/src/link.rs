//! What the wire under a run could carry: the link rate (stated with `--link`, else the
//! lab's, else the driver's sysfs speed), the MTU and TCP options actually in use, and the
//! model's goodput for them. What is not known stays null.

use wirerate_core::report::SideReport;
use wirerate_core::result::WireSummary;
use wirerate_core::TestSpec;

/// The link as far as it is known before the result is assembled.
#[derive(Debug, Clone, Default)]
pub struct LinkFacts {
    pub link_bps: Option<f64>,
    pub source: Option<String>,
    pub mtu: Option<u32>,
}

impl LinkFacts {
    pub fn summary(&self) -> WireSummary {
        WireSummary {
            link_bps: self.link_bps,
            link_source: self.source.clone(),
            mtu_bytes: self.mtu,
            ..Default::default()
        }
    }
}

/// Finds the link rate of the client's side of the test.
pub fn link_facts(spec: &TestSpec, local: &SideReport) -> LinkFacts {
    let iface = local.host.interfaces.first();
    let iface_mtu = iface.and_then(|i| i.mtu_bytes);
    if let Some(l) = spec.link_bps {
        return LinkFacts {
            link_bps: Some(l),
            source: Some("--link".into()),
            mtu: iface_mtu,
        };
    }
    if let Some(lab) = wirerate_lab::current_lab() {
        return LinkFacts {
            link_bps: Some(lab.lab.link_bps),
            source: Some(format!("lab {}", lab.lab.name)),
            mtu: Some(lab.lab.mtu),
        };
    }
    match iface.and_then(|i| i.speed_bps.map(|s| (s, &i.name))) {
        Some((speed, name)) => LinkFacts {
            link_bps: Some(speed),
            source: Some(format!("sysfs speed of {name}")),
            mtu: iface_mtu,
        },
        None => LinkFacts {
            mtu: iface_mtu,
            ..Default::default()
        },
    }
}
