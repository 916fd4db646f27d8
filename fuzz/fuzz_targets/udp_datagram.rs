//! The headers a receiver parses from peer datagrams and streams: wirerate's UDP header (and
//! its round trip), iperf3's UDP header in both counter widths, and a sweep trial header.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirerate_proto::datagram::Header;
use wirerate_proto::iperf3::udp as iperf3_udp;
use wirerate_proto::sweep::SweepHeader;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = Header::parse(data) {
        let mut out = vec![0u8; data.len()];
        if h.emit(&mut out) {
            assert_eq!(Header::parse(&out).ok(), Some(h));
        }
    }
    for wide in [false, true] {
        let _ = iperf3_udp::Header::parse(data, wide);
    }
    let _ = iperf3_udp::is_reply(data);
    let _ = SweepHeader::parse(data, 64 << 20, 1 << 20);
});
