//! The wire-rate model: what an Ethernet link carries for a protocol, an MTU and a message
//! size. Every frame pays the preamble and start delimiter, the MAC header, an optional
//! 802.1Q tag, the frame check sequence, padding up to the 64-byte minimum frame and the
//! inter-frame gap; inside it sit the IP and transport headers and, last, the application's
//! bytes.
//!
//! Promise: pure arithmetic, no IO. Invalid input (rate, MTU, payload) is a [`WireError`],
//! never a panic, and for every valid input the goodput is at most the link rate.

use serde::{Deserialize, Serialize};

use crate::result::WireSummary;

/// Preamble (7 bytes) and start-of-frame delimiter (1 byte).
pub const PREAMBLE_SFD_BYTES: u32 = 8;
/// Destination and source MAC addresses and the EtherType.
pub const MAC_HEADER_BYTES: u32 = 14;
/// An IEEE 802.1Q tag.
pub const VLAN_TAG_BYTES: u32 = 4;
/// The frame check sequence (CRC-32).
pub const FCS_BYTES: u32 = 4;
/// The shortest frame, MAC header through FCS; shorter ones are padded.
pub const MIN_FRAME_BYTES: u32 = 64;
/// The inter-frame gap: 96 bit times of idle line.
pub const INTER_FRAME_GAP_BYTES: u32 = 12;
/// What a frame costs on the line beyond its MAC header and data: preamble, FCS and gap.
/// This is the figure a shaper must add per packet (the tc `overhead`).
pub const PER_FRAME_OVERHEAD_BYTES: u32 = PREAMBLE_SFD_BYTES + FCS_BYTES + INTER_FRAME_GAP_BYTES;
pub const IPV4_HEADER_BYTES: u32 = 20;
pub const IPV6_HEADER_BYTES: u32 = 40;
pub const TCP_HEADER_BYTES: u32 = 20;
/// The TCP timestamps option as Linux sends it on every segment (10 bytes, padded to 12).
pub const TCP_TIMESTAMPS_BYTES: u32 = 12;
pub const UDP_HEADER_BYTES: u32 = 8;
/// The smallest MTU an IPv4 host must accept (RFC 791).
pub const MIN_MTU_IPV4: u32 = 68;
/// The smallest MTU IPv6 allows (RFC 8200).
pub const MIN_MTU_IPV6: u32 = 1280;
/// The largest MTU the model takes: the IP length fields are 16 bits.
pub const MAX_MTU: u32 = 65_535;

/// What the frames carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WireProto {
    /// TCP segments filled to the MSS (or to `payload` when given).
    Tcp,
    /// One UDP datagram per frame.
    Udp,
    /// Application bytes straight in the Ethernet data field, no IP.
    Raw,
}

impl WireProto {
    pub fn name(self) -> &'static str {
        match self {
            WireProto::Tcp => "tcp",
            WireProto::Udp => "udp",
            WireProto::Raw => "raw",
        }
    }
}

/// The question: a link, an MTU, a protocol stack and a message size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireParams {
    /// Line rate in bits per second.
    pub link_bps: f64,
    /// Largest IP packet (for raw: largest Ethernet data field), bytes.
    pub mtu: u32,
    pub proto: WireProto,
    /// IPv6 instead of IPv4 (ignored for raw).
    pub ipv6: bool,
    /// An 802.1Q tag on every frame.
    pub vlan: bool,
    /// The TCP timestamps option on every segment (ignored unless TCP).
    pub tcp_timestamps: bool,
    /// Application bytes per frame. None: the most that fits the MTU (for TCP, the MSS
    /// less options). For TCP a smaller value models segments sent half-full, as small
    /// writes with Nagle off do.
    pub payload: Option<u32>,
}

impl WireParams {
    /// A 1500-byte MTU TCP/IPv4 link with timestamps, as Linux sends by default.
    pub fn ethernet(link_bps: f64, proto: WireProto) -> WireParams {
        WireParams {
            link_bps,
            mtu: 1500,
            proto,
            ipv6: false,
            vlan: false,
            tcp_timestamps: true,
            payload: None,
        }
    }
}

/// The answer: what one frame costs and what the link carries per second.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireModel {
    /// Everything a frame occupies on the line: preamble through inter-frame gap.
    pub wire_bytes_per_frame: u32,
    /// Application bytes each frame carries.
    pub payload_bytes_per_frame: u32,
    /// Time one frame occupies the line, seconds.
    pub frame_time_s: f64,
    pub frames_per_s: f64,
    /// Application bits per second at full line rate.
    pub goodput_bps: f64,
    /// The same in bytes per second (the seeds' unit).
    pub goodput_bytes_per_s: f64,
    /// Goodput ÷ link rate, 0–1.
    pub efficiency: f64,
    pub link_bps: f64,
    /// The frame from MAC header through FCS, padding included.
    pub frame_bytes: u32,
    /// The Ethernet data field: IP packet (or raw payload) before padding.
    pub data_field_bytes: u32,
    pub preamble_sfd_bytes: u32,
    pub mac_header_bytes: u32,
    pub vlan_tag_bytes: u32,
    pub ip_header_bytes: u32,
    /// Transport header with its options.
    pub transport_header_bytes: u32,
    pub padding_bytes: u32,
    pub fcs_bytes: u32,
    pub inter_frame_gap_bytes: u32,
    /// The most application bytes one frame can carry at this MTU.
    pub max_payload_bytes: u32,
    /// TCP's maximum segment size (MTU less IP and TCP headers, options not deducted).
    pub mss_bytes: Option<u32>,
}

/// Why a question has no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WireError {
    #[error("link rate {0} bit/s must be a positive finite number")]
    BadRate(f64),
    #[error("MTU {mtu} is below the minimum {min} for {what}")]
    MtuTooSmall {
        mtu: u32,
        min: u32,
        what: &'static str,
    },
    #[error("MTU {mtu} is above the maximum {max}")]
    MtuTooLarge { mtu: u32, max: u32 },
    #[error("payload must be at least 1 byte")]
    EmptyPayload,
    #[error("payload {payload} bytes does not fit one frame: at most {max} at MTU {mtu} (fragmentation is not modelled)")]
    PayloadTooLarge { payload: u32, max: u32, mtu: u32 },
}

/// Header bytes inside the Ethernet data field: (IP header, transport header).
fn headers(p: &WireParams) -> (u32, u32) {
    let ip = if p.ipv6 {
        IPV6_HEADER_BYTES
    } else {
        IPV4_HEADER_BYTES
    };
    match p.proto {
        WireProto::Raw => (0, 0),
        WireProto::Udp => (ip, UDP_HEADER_BYTES),
        WireProto::Tcp if p.tcp_timestamps => (ip, TCP_HEADER_BYTES + TCP_TIMESTAMPS_BYTES),
        WireProto::Tcp => (ip, TCP_HEADER_BYTES),
    }
}

fn check_mtu(p: &WireParams) -> Result<(), WireError> {
    let (min, what) = match (p.proto, p.ipv6) {
        (WireProto::Raw, _) => (1, "raw Ethernet"),
        (_, true) => (MIN_MTU_IPV6, "IPv6"),
        (_, false) => (MIN_MTU_IPV4, "IPv4"),
    };
    if p.mtu < min {
        return Err(WireError::MtuTooSmall {
            mtu: p.mtu,
            min,
            what,
        });
    }
    if p.mtu > MAX_MTU {
        return Err(WireError::MtuTooLarge {
            mtu: p.mtu,
            max: MAX_MTU,
        });
    }
    Ok(())
}

/// Works out what the link carries. Errors for a rate that is not a positive finite
/// number, an MTU outside what the protocol allows, and a payload that is empty or does
/// not fit one frame.
pub fn model(p: &WireParams) -> Result<WireModel, WireError> {
    if !(p.link_bps.is_finite() && p.link_bps > 0.0) {
        return Err(WireError::BadRate(p.link_bps));
    }
    check_mtu(p)?;
    let (ip, transport) = headers(p);
    // check_mtu guarantees the MTU covers the headers (68 > 20 + 32, 1280 > 40 + 32).
    let max_payload = p.mtu - ip - transport;
    let payload = match p.payload {
        None => max_payload,
        Some(0) => return Err(WireError::EmptyPayload),
        Some(n) if n > max_payload => {
            return Err(WireError::PayloadTooLarge {
                payload: n,
                max: max_payload,
                mtu: p.mtu,
            })
        }
        Some(n) => n,
    };
    let vlan = if p.vlan { VLAN_TAG_BYTES } else { 0 };
    let data_field = ip + transport + payload;
    let unpadded = MAC_HEADER_BYTES + vlan + data_field + FCS_BYTES;
    let padding = MIN_FRAME_BYTES.saturating_sub(unpadded);
    let frame = unpadded + padding;
    let wire = PREAMBLE_SFD_BYTES + frame + INTER_FRAME_GAP_BYTES;
    let frame_time_s = f64::from(wire) * 8.0 / p.link_bps;
    let frames_per_s = p.link_bps / (f64::from(wire) * 8.0);
    let efficiency = f64::from(payload) / f64::from(wire);
    Ok(WireModel {
        wire_bytes_per_frame: wire,
        payload_bytes_per_frame: payload,
        frame_time_s,
        frames_per_s,
        goodput_bps: p.link_bps * efficiency,
        goodput_bytes_per_s: p.link_bps * efficiency / 8.0,
        efficiency,
        link_bps: p.link_bps,
        frame_bytes: frame,
        data_field_bytes: data_field,
        preamble_sfd_bytes: PREAMBLE_SFD_BYTES,
        mac_header_bytes: MAC_HEADER_BYTES,
        vlan_tag_bytes: vlan,
        ip_header_bytes: ip,
        transport_header_bytes: transport,
        padding_bytes: padding,
        fcs_bytes: FCS_BYTES,
        inter_frame_gap_bytes: INTER_FRAME_GAP_BYTES,
        max_payload_bytes: max_payload,
        mss_bytes: (p.proto == WireProto::Tcp).then(|| p.mtu - ip - TCP_HEADER_BYTES),
    })
}

/// One field of a frame as it passes on the line, in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireField {
    pub name: &'static str,
    pub bytes: u32,
    pub bits: u64,
    /// Time the field occupies the line, seconds.
    pub time_s: f64,
    /// Fields nested inside the previous top-level field (the data field's headers).
    pub nested: bool,
}

/// The frame laid out field by field, the way the seed adds it up: preamble, addresses,
/// type, data (with its headers, payload and padding nested), FCS, gap. Zero-byte fields
/// (no tag, no padding) are left out. The top-level fields sum to the whole frame.
pub fn fields(p: &WireParams, m: &WireModel) -> Vec<WireField> {
    let ip_name = if p.ipv6 { "IPv6 header" } else { "IPv4 header" };
    let transport_name = match (p.proto, p.tcp_timestamps) {
        (WireProto::Tcp, true) => "TCP header+timestamps",
        (WireProto::Tcp, false) => "TCP header",
        _ => "UDP header",
    };
    let f = |name, bytes: u32, nested| WireField {
        name,
        bytes,
        bits: u64::from(bytes) * 8,
        time_s: f64::from(bytes) * 8.0 / m.link_bps,
        nested,
    };
    let rows = [
        f("preamble+SFD", m.preamble_sfd_bytes, false),
        f("destination", 6, false),
        f("source", 6, false),
        f("802.1Q tag", m.vlan_tag_bytes, false),
        f("type", 2, false),
        f("data", m.data_field_bytes + m.padding_bytes, false),
        f(ip_name, m.ip_header_bytes, true),
        f(transport_name, m.transport_header_bytes, true),
        f("payload", m.payload_bytes_per_frame, true),
        f("padding", m.padding_bytes, true),
        f("FCS", m.fcs_bytes, false),
        f("inter-frame gap", m.inter_frame_gap_bytes, false),
    ];
    rows.into_iter().filter(|r| r.bytes > 0).collect()
}

/// `summary.wire` for a run that measured `goodput_bps`: the link rate and MTU from
/// `params`, the model's goodput for them, and efficiency = measured goodput ÷ the model's
/// goodput (1.0 means the test carried all the wire can carry for this protocol). `params` is None when the link rate is
/// unknown; then everything is None. A model that has no answer (say, an MTU it refuses)
/// leaves `model_goodput_bps` None and keeps what is known. Never a guess.
pub fn run_summary(
    params: Option<&WireParams>,
    link_source: Option<&str>,
    goodput_bps: f64,
) -> WireSummary {
    let Some(p) = params.filter(|p| p.link_bps.is_finite() && p.link_bps > 0.0) else {
        return WireSummary::default();
    };
    let measured = goodput_bps.is_finite() && goodput_bps >= 0.0;
    let model_bps = model(p).ok().map(|m| m.goodput_bps).filter(|m| *m > 0.0);
    WireSummary {
        link_bps: Some(p.link_bps),
        model_goodput_bps: model_bps,
        efficiency: model_bps.filter(|_| measured).map(|m| goodput_bps / m),
        mtu_bytes: Some(p.mtu),
        link_source: link_source.map(str::to_string),
        path: None,
        path_model: None,
    }
}

/// Completes an assembled result's wire summary: where the link rate is known (the
/// summary holds the rate, source and MTU the caller knew), the model's goodput for the MTU,
/// protocol and TCP options the streams actually used, and the efficiency.
pub fn complete(r: &mut crate::RunResult) {
    let known = r.summary.wire.clone();
    let Some(link_bps) = known.link_bps else {
        return;
    };
    let first = r.streams.first();
    let tcp = first.and_then(|s| s.tcp_sender.as_ref().or(s.tcp_receiver.as_ref()));
    let Some(mtu) = known
        .mtu_bytes
        .or_else(|| tcp.and_then(|t| t.pmtu).and_then(|m| u32::try_from(m).ok()))
    else {
        return;
    };
    let (proto, payload) = match r.spec.protocol {
        // Linux's snd_mss is the payload per full segment, options excluded
        crate::Protocol::Tcp => (
            WireProto::Tcp,
            tcp.and_then(|t| t.snd_mss)
                .and_then(|m| u32::try_from(m).ok()),
        ),
        crate::Protocol::Udp => (WireProto::Udp, u32::try_from(r.spec.len_bytes).ok()),
    };
    let ipv6 = match r.env.server_addr.parse::<std::net::SocketAddr>() {
        Ok(std::net::SocketAddr::V6(a)) => a.ip().to_ipv4_mapped().is_none(),
        _ => false,
    };
    let params = WireParams {
        link_bps,
        mtu,
        proto,
        ipv6,
        vlan: false,
        tcp_timestamps: tcp.and_then(|t| t.timestamps).unwrap_or(true),
        payload,
    };
    let mut w = WireSummary {
        path: known.path,
        ..run_summary(
            Some(&params),
            known.link_source.as_deref(),
            r.summary.goodput_bps,
        )
    };
    w.path_model = path_model(r, &w);
    r.summary.wire = w;
}

/// TCP's reach on an emulated path: the wire model, the window the senders saw advertised
/// over the round trip, and for a loss-based sender the Mathis bound of the path's loss in
/// the data's direction (one flow: the client's data, or the server's with -R).
pub fn path_model(r: &crate::RunResult, w: &WireSummary) -> Option<crate::result::PathModel> {
    use crate::result::{PathLimit, PathModel};
    let path = w.path?;
    let wire_bps = w.model_goodput_bps?;
    if r.spec.protocol != crate::Protocol::Tcp {
        return None;
    }
    let senders: Vec<&crate::result::TcpInfo> = r
        .streams
        .iter()
        .filter_map(|s| s.tcp_sender.as_ref())
        .collect();
    let streams = senders.len().max(1) as f64;
    let min_rtt_ms = senders
        .iter()
        .filter_map(|t| t.min_rtt_us)
        .min()
        .map(|us| us as f64 / 1e3);
    let rtt_ms = min_rtt_ms.unwrap_or_else(|| path.added_rtt_ms());
    if rtt_ms.is_nan() || rtt_ms <= 0.0 {
        return None;
    }
    let window_bps = senders
        .iter()
        .filter_map(|t| t.snd_wnd)
        .max()
        .map(|wnd| wnd as f64 * 8.0 / (rtt_ms / 1e3) * streams);
    let data_dir = match r.spec.direction {
        crate::spec::Direction::Reverse => path.server_to_client,
        _ => path.client_to_server,
    };
    let loss_based = senders.iter().all(|t| {
        !t.congestion
            .as_deref()
            .is_some_and(|c| c.starts_with("bbr"))
    });
    let mss = senders
        .iter()
        .filter_map(|t| t.snd_mss)
        .max()
        .unwrap_or(1448) as f64;
    let p = data_dir.loss_percent / 100.0;
    let loss_bps = (loss_based && p > 0.0)
        .then(|| mss * 8.0 / (rtt_ms / 1e3 * p.sqrt()) * 1.5f64.sqrt() * streams);
    let mut best = (wire_bps, PathLimit::Wire);
    for (b, limit) in [(window_bps, PathLimit::Window), (loss_bps, PathLimit::Loss)] {
        if let Some(b) = b.filter(|b| b.is_finite() && *b > 0.0 && *b < best.0) {
            best = (b, limit);
        }
    }
    let g = r.summary.goodput_bps;
    Some(PathModel {
        goodput_bps: best.0,
        limit: best.1,
        efficiency: (g.is_finite() && g >= 0.0).then(|| g / best.0),
        rtt_ms,
        window_bps,
        loss_bps,
    })
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
