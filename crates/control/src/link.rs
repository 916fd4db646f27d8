//! What the wire under a run could carry: the link rate (stated with `--link`, else the
//! lab's, else the driver's sysfs speed), the MTU and TCP options actually in use, and the
//! model's goodput for them. What is not known stays null.

use std::net::IpAddr;

use wirerate_core::result::{PathDirection, WirePath, WireSummary};
use wirerate_core::side_report::SideReport;
use wirerate_core::TestSpec;

/// The link as far as it is known before the result is assembled.
#[derive(Debug, Clone, Default)]
pub struct LinkFacts {
    pub link_bps: Option<f64>,
    pub source: Option<String>,
    pub mtu: Option<u32>,
    pub path: Option<WirePath>,
}

impl LinkFacts {
    pub fn summary(&self) -> WireSummary {
        WireSummary {
            link_bps: self.link_bps,
            link_source: self.source.clone(),
            mtu_bytes: self.mtu,
            path: self.path,
            ..Default::default()
        }
    }
}

/// A lab's delay line as the client's host sees it: out is from this host to its peer. In
/// a bridged lab the peer is the host that has address `peer`, and each way crosses the
/// client's link and the peer's: their sum (unknown without a peer in the lab).
fn lab_path(link: &wirerate_lab::LabLink, peer: Option<IpAddr>) -> Option<WirePath> {
    let spec = link.lab.spec()?;
    if !spec.delayed() {
        return None;
    }
    let me = spec.hosts.iter().position(|h| *h == link.host.name)?;
    let (out, back) = if spec.bridged() {
        let peer = peer?;
        let other = link.lab.hosts.iter().position(|h| {
            h.name != link.host.name
                && [&h.ipv4, &h.ipv6]
                    .iter()
                    .any(|a| wirerate_lab::spec::addr_of(a).parse() == Ok(peer))
        })?;
        // up the sender's link (its ab), then down the receiver's (its ba)
        let (mine, theirs) = (spec.link_path(me), spec.link_path(other));
        (mine.ab.then(&theirs.ba), theirs.ab.then(&mine.ba))
    } else if me == 0 {
        (spec.path.ab, spec.path.ba)
    } else {
        (spec.path.ba, spec.path.ab)
    };
    let words = |d: wirerate_lab::path::PathDir| PathDirection {
        delay_ms: d.delay_us as f64 / 1e3,
        jitter_ms: d.jitter_us as f64 / 1e3,
        loss_percent: d.loss * 100.0,
        reorder_percent: d.reorder * 100.0,
    };
    Some(WirePath {
        client_to_server: words(out),
        server_to_client: words(back),
    })
}

/// Finds the link rate of the client's side of the test, and the lab's path when the
/// client runs on a lab host whose link goes through a delay line (towards `peer`, the
/// server's address, when known).
pub fn link_facts(spec: &TestSpec, local: &SideReport, peer: Option<IpAddr>) -> LinkFacts {
    let lab = wirerate_lab::current_lab();
    LinkFacts {
        path: lab.as_ref().and_then(|l| lab_path(l, peer)),
        ..link_rate(spec, local, lab.as_ref())
    }
}

fn link_rate(
    spec: &TestSpec,
    local: &SideReport,
    lab: Option<&wirerate_lab::LabLink>,
) -> LinkFacts {
    let iface = local.host.interfaces.first();
    let iface_mtu = iface.and_then(|i| i.mtu_bytes);
    if let Some(l) = spec.link_bps {
        return LinkFacts {
            link_bps: Some(l),
            source: Some("--link".into()),
            mtu: iface_mtu,
            ..Default::default()
        };
    }
    if let Some(lab) = lab {
        return LinkFacts {
            link_bps: Some(lab.lab.link_bps),
            source: Some(format!("lab {}", lab.lab.name)),
            mtu: Some(lab.lab.mtu),
            ..Default::default()
        };
    }
    match iface.and_then(|i| i.speed_bps.map(|s| (s, &i.name))) {
        Some((speed, name)) => LinkFacts {
            link_bps: Some(speed),
            source: Some(format!("sysfs speed of {name}")),
            mtu: iface_mtu,
            ..Default::default()
        },
        None => LinkFacts {
            mtu: iface_mtu,
            ..Default::default()
        },
    }
}
