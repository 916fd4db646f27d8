//! `wirerate wire`: the wire-rate calculator. Validates the flags into `WireParams`, asks
//! `wirerate_core::wire::model`, and prints the frame field by field (the way a 10 Mb/s
//! driver's notes add it up) or as JSON. Computes nothing itself.

use std::process::ExitCode;

use serde::Serialize;
use wirerate_core::units::format_bps;
use wirerate_core::wire::{self, WireField, WireModel, WireParams, WireProto};
use wirerate_core::{BitRate, Bytes};

use crate::exit;

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Proto {
    Tcp,
    Udp,
    Raw,
}

#[derive(clap::Args)]
#[command(
    after_help = "Counts per frame: preamble and SFD 8, MAC header 14, 802.1Q tag 4 \
(--vlan), data padded to the 64-byte minimum frame, FCS 4, inter-frame gap 12; IPv4 20 or IPv6 40; \
TCP 20 (+12 timestamps) or UDP 8.\n\
Rates take K, M, G, T as powers of 1000: 10M = 10000000 bit/s.\n\
Sizes (--mtu, --payload) take K, M, G as powers of 1024: 9K = 9216 bytes.\n\n\
Example: wirerate wire --link 10M --no-timestamps   (1230.4 µs per frame, 812.7 frames/s, \
1186606 B/s)"
)]
pub struct Args {
    /// Link bit rate, SI prefixes: 10M = 10 000 000 bit/s. Default: the speed of --dev.
    #[arg(long, value_name = "RATE", allow_hyphen_values = true)]
    link: Option<String>,
    /// Read the link rate (unless --link is given) and the MTU (unless --mtu is given) from
    /// this interface.
    #[arg(long, value_name = "IFNAME")]
    dev: Option<String>,
    /// Largest IP packet in bytes (IEC suffixes: 9K = 9216). Default 1500.
    #[arg(long, value_name = "BYTES", allow_hyphen_values = true)]
    mtu: Option<String>,
    /// What the frames carry.
    #[arg(long, value_enum, default_value = "tcp")]
    proto: Proto,
    /// Application bytes per frame (IEC suffixes). Default: the most that fits the MTU;
    /// TCP fills segments to the MSS, less the timestamps option.
    #[arg(long, value_name = "BYTES", allow_hyphen_values = true)]
    payload: Option<String>,
    /// IPv6 headers (40 bytes) instead of IPv4 (20).
    #[arg(long)]
    ipv6: bool,
    /// An 802.1Q VLAN tag (4 bytes) on every frame.
    #[arg(long)]
    vlan: bool,
    /// TCP without the 12-byte timestamps option (Linux sends it by default).
    #[arg(long)]
    no_timestamps: bool,
    /// Print the model as JSON.
    #[arg(long)]
    json: bool,
}

/// The JSON document: the question and the answer side by side.
#[derive(Serialize)]
struct Report<'a> {
    params: &'a WireParams,
    #[serde(flatten)]
    model: &'a WireModel,
    fields: Vec<WireField>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let params = validate(&args)?;
    let model = match wire::model(&params) {
        Ok(m) => m,
        Err(e) => return exit::usage(e.to_string()),
    };
    let fields = wire::fields(&params, &model);
    let text = if args.json {
        let report = Report {
            params: &params,
            model: &model,
            fields,
        };
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        render(&params, &model, &fields)
    };
    use std::io::Write;
    crate::exit::stdout().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

fn validate(args: &Args) -> anyhow::Result<WireParams> {
    let link_bps = match (&args.link, &args.dev) {
        (Some(s), _) => match BitRate::parse(s) {
            Ok(r) => r.bps(),
            Err(e) => return exit::usage(format!("--link: {e}")),
        },
        (None, Some(dev)) => match wirerate_probe::link::interface_speed_bps(dev) {
            Some(bps) => bps,
            None => anyhow::bail!("the speed of interface '{dev}' is unknown; give --link"),
        },
        (None, None) => {
            return exit::usage("give the link rate with --link RATE (e.g. 10M) or --dev IFNAME")
        }
    };
    let dev_mtu = || {
        args.dev
            .as_deref()
            .and_then(wirerate_probe::link::interface_mtu)
    };
    let mtu = match &args.mtu {
        Some(s) => size_u32("--mtu", s)?,
        None => dev_mtu().unwrap_or(1500),
    };
    let payload = match &args.payload {
        Some(s) => Some(size_u32("--payload", s)?),
        None => None,
    };
    let proto = match args.proto {
        Proto::Tcp => WireProto::Tcp,
        Proto::Udp => WireProto::Udp,
        Proto::Raw => WireProto::Raw,
    };
    Ok(WireParams {
        link_bps,
        mtu,
        proto,
        ipv6: args.ipv6,
        vlan: args.vlan,
        tcp_timestamps: !args.no_timestamps,
        payload,
    })
}

fn size_u32(flag: &str, s: &str) -> anyhow::Result<u32> {
    match Bytes::parse(s) {
        Ok(b) => match u32::try_from(b.get()) {
            Ok(n) => Ok(n),
            Err(_) => exit::usage(format!("{flag}: '{s}' is too large")),
        },
        Err(e) => exit::usage(format!("{flag}: {e}")),
    }
}

/// The unit that shows the shortest field (2 bytes) as at least 1, with its scale.
fn time_unit(link_bps: f64) -> (&'static str, f64) {
    let two_bytes_s = 16.0 / link_bps;
    [("s", 1.0), ("ms", 1e3), ("µs", 1e6), ("ns", 1e9)]
        .into_iter()
        .find(|(_, scale)| two_bytes_s * scale >= 1.0)
        .unwrap_or(("ps", 1e12))
}

fn describe(p: &WireParams) -> String {
    let ip = if p.ipv6 { "IPv6" } else { "IPv4" };
    let tag = if p.vlan { ", 802.1Q tagged" } else { "" };
    let what = match p.proto {
        WireProto::Tcp if p.tcp_timestamps => format!("TCP/{ip} with timestamps"),
        WireProto::Tcp => format!("TCP/{ip} without options"),
        WireProto::Udp => format!("UDP/{ip}"),
        WireProto::Raw => "raw Ethernet payload".to_string(),
    };
    format!(
        "{what} on {} Ethernet{tag}, MTU {}",
        format_bps(p.link_bps),
        p.mtu
    )
}

fn render(p: &WireParams, m: &WireModel, fields: &[WireField]) -> String {
    let (unit, scale) = time_unit(p.link_bps);
    let mut out = format!("{}\n\n", describe(p));
    out += &format!(
        "  {:<26} {:>7} {:>9} {:>12}\n",
        "field", "bytes", "bits", "time"
    );
    for f in fields {
        let name = if f.nested {
            format!("  {}", f.name)
        } else {
            f.name.to_string()
        };
        let time = format!("{:.1} {unit}", f.time_s * scale);
        out += &format!("  {name:<26} {:>7} {:>9} {time:>12}\n", f.bytes, f.bits);
    }
    let total = format!("{:.1} {unit}", m.frame_time_s * scale);
    let bits = u64::from(m.wire_bytes_per_frame) * 8;
    out += &format!(
        "  {:<26} {:>7} {bits:>9} {total:>12}\n\n",
        "per frame", m.wire_bytes_per_frame
    );
    // the link rate is given to a few digits: a tenth of a frame per second is plenty
    // (the JSON keeps every digit)
    out += &format!("  frames/s     {:.1}\n", m.frames_per_s);
    out += &format!(
        "  goodput      {} B × {:.1}/s = {:.0} B/s = {}\n",
        m.payload_bytes_per_frame,
        m.frames_per_s,
        m.goodput_bytes_per_s,
        format_bps(m.goodput_bps)
    );
    if p.proto != WireProto::Raw {
        let data = f64::from(m.data_field_bytes) * m.frames_per_s;
        out += &format!(
            "  data field   {} B × {:.1}/s = {:.0} B/s\n",
            m.data_field_bytes, m.frames_per_s, data
        );
    }
    out += &format!("  efficiency   {:.2} % of the link\n", m.efficiency * 100.0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_follow_the_rate() {
        assert_eq!(time_unit(10e6).0, "µs");
        assert_eq!(time_unit(100e6).0, "ns");
        assert_eq!(time_unit(100e9).0, "ps");
        assert_eq!(time_unit(1000.0).0, "ms");
    }

    #[test]
    fn seed_001_breakdown() {
        let p = WireParams {
            tcp_timestamps: false,
            ..WireParams::ethernet(10e6, WireProto::Tcp)
        };
        let m = wire::model(&p).unwrap();
        let text = render(&p, &m, &wire::fields(&p, &m));
        for want in [
            "6.4 µs",
            "1200.0 µs",
            "9.6 µs",
            "1230.4 µs",
            "frames/s     812.7\n",
            "1186606 B/s",
            "1219116 B/s",
        ] {
            assert!(text.contains(want), "{want} missing from\n{text}");
        }
    }
}
