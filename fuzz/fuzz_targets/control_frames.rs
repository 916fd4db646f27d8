//! The control channel's framing as a server reads it: preamble, data hello, then frames
//! fed in pieces of every size.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirerate_proto::frame::{FrameDecoder, Preamble, MAX_CLIENT_FRAME, PREAMBLE_LEN};
use wirerate_proto::DataHello;

fuzz_target!(|data: &[u8]| {
    let _ = Preamble::parse(data);
    if data.len() > PREAMBLE_LEN {
        let _ = DataHello::parse_after_preamble(&data[PREAMBLE_LEN..]);
    }
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let mut dec = FrameDecoder::new(MAX_CLIENT_FRAME);
    for chunk in rest.chunks(usize::from(cut).max(1)) {
        if dec.push(chunk).is_err() {
            return;
        }
        loop {
            match dec.next_msg() {
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
    }
});
