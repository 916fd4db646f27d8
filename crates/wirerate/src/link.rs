//! What the wire under a run could carry: the link rate (stated with `--link`, else the
//! lab's, else the driver's sysfs speed), the MTU and TCP options actually in use, and the
//! model's goodput for them. What is not known stays null.

use std::net::{IpAddr, SocketAddr};

use wirerate_core::report::SideReport;
use wirerate_core::result::WireSummary;
use wirerate_core::wire::{run_summary, WireParams, WireProto};
use wirerate_core::{Protocol, RunResult, TestSpec};

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

fn is_ipv6(server_addr: &str) -> bool {
    match server_addr.parse::<SocketAddr>().map(|a| a.ip()) {
        Ok(IpAddr::V6(v6)) => v6.to_ipv4_mapped().is_none(),
        _ => false,
    }
}

/// Fills the model goodput and the efficiency of an assembled result.
pub fn fill_wire(r: &mut RunResult, facts: &LinkFacts) {
    let Some(link_bps) = facts.link_bps else {
        return;
    };
    let first = r.streams.first();
    let tcp = first.and_then(|s| s.tcp_sender.as_ref().or(s.tcp_receiver.as_ref()));
    let mtu = facts
        .mtu
        .or_else(|| tcp.and_then(|t| t.pmtu).map(|m| m as u32));
    let Some(mtu) = mtu else {
        return;
    };
    let (proto, payload) = match r.spec.protocol {
        // Linux's snd_mss is the payload per full segment, options excluded
        Protocol::Tcp => (
            WireProto::Tcp,
            tcp.and_then(|t| t.snd_mss).map(|m| m as u32),
        ),
        Protocol::Udp => (WireProto::Udp, u32::try_from(r.spec.len_bytes).ok()),
    };
    let params = WireParams {
        link_bps,
        mtu,
        proto,
        ipv6: is_ipv6(&r.env.server_addr),
        vlan: false,
        tcp_timestamps: tcp.and_then(|t| t.timestamps).unwrap_or(true),
        payload,
    };
    r.summary.wire = run_summary(
        Some(&params),
        facts.source.as_deref(),
        r.summary.goodput_bps,
    );
}
