//! The login exchange (SCRAM-SHA-256 messages and the login states of both sessions) under
//! arbitrary input; the logic is `wirerate_proto::fuzz_login`, which a test also runs on
//! these seeds with stable Rust.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = wirerate_proto::fuzz_login::login_exchange(data);
});
