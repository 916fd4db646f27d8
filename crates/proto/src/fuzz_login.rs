//! The login exchange under arbitrary input, for the `login` fuzz target (`fuzz/`) and for
//! a test that feeds it the target's seeds on stable Rust. The first byte picks what is fed:
//! SCRAM's message parsers, a server session that requires a login, a client session that
//! logs in, or a server's check of a proof. Nothing here may panic.

use std::time::{Duration, Instant};

use wirerate_core::TestSpec;

use crate::auth::{
    Binding, ClientFinal, ClientFirst, ScramClient, ScramServer, ServerFirst, Verifier,
};
use crate::{ClientSession, ServerEvent, ServerSession};

fn verifier() -> Verifier {
    // the RFC 7677 example's salt; a low count keeps the fuzzer fast
    Verifier::derive(
        "pencil",
        b"\x5b\x6d\x99\x68\x9d\x12\x35\x8e\xec\xa0\x4b\x14\x12\x36\xfa\x81",
        4096,
    )
}

/// Whether the input got through the whole exchange (a spec heard after a login, a client
/// accepted after checking the server, a proof that checks out), so seeds can be checked to
/// reach the end.
pub fn login_exchange(data: &[u8]) -> bool {
    let Some((&mode, rest)) = data.split_first() else {
        return false;
    };
    let mut through = false;
    let text = String::from_utf8_lossy(rest);
    let now = Instant::now();
    let idle = Duration::from_secs(10);
    match mode % 4 {
        0 => {
            let _ = ClientFirst::parse(&text);
            let _ = ServerFirst::parse(&text);
            let _ = ClientFinal::parse(&text);
            if let Ok(mut c) =
                ScramClient::new("user", "pencil", "rOprNGfwEbeRWgbNEkqO", Binding::None)
            {
                // a challenge with a huge iteration count is refused before any work
                if c.answer(&text).is_ok() {
                    let _ = c.verify(&text);
                }
                through = c.verify(&text).is_ok();
            }
        }
        1 => {
            let Some((&cut, frames)) = rest.split_first() else {
                return false;
            };
            let mut s = ServerSession::new(now, idle, [7; 16], "fuzz").require_login();
            for (i, chunk) in frames.chunks(usize::from(cut).max(1)).enumerate() {
                let t = now + Duration::from_millis(i as u64 * 100);
                if let Ok(events) = s.handle_input(chunk, t) {
                    for ev in events {
                        match ev {
                            ServerEvent::Login(_) => {
                                let cb = (cut % 2 == 0).then_some(&[1u8; 32][..]);
                                let _ = s.challenge(verifier(), "server-nonce", cb);
                            }
                            ServerEvent::Spec(_) => {
                                through = true;
                                s.accept(Vec::new(), t);
                            }
                            _ => {}
                        }
                    }
                }
                let _ = s.handle_timeout(t);
                while s.poll_transmit().is_some() {}
            }
            let _ = s.handle_close();
        }
        2 => {
            let Ok(scram) = ScramClient::new("user", "pencil", "cnonce", Binding::TlsExporter)
            else {
                return false;
            };
            let mut c = ClientSession::with_login(&TestSpec::default(), now, idle, scram);
            c.set_channel_binding(vec![1; 32]);
            c.set_data_token([3; 16]);
            through = c
                .handle_input(rest, now)
                .is_ok_and(|ev| matches!(ev.as_slice(), [crate::ClientEvent::Accepted(..)]));
            while c.poll_transmit().is_some() {}
        }
        _ => {
            let Ok(first) = ClientFirst::parse("n,,n=user,r=rOprNGfwEbeRWgbNEkqO") else {
                return false;
            };
            if let Ok(s) =
                ScramServer::start(first, verifier(), "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", None)
            {
                through = s.finish(&text).is_ok();
            }
        }
    }
    through
}

#[cfg(test)]
mod tests {
    /// Every seed of the fuzz target, on stable Rust.
    #[test]
    fn the_fuzz_seeds_run_without_a_panic() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/login");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).expect("fuzz/seeds/login") {
            let path = e.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            let through = super::login_exchange(&data);
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            // the seeds of whole exchanges do reach the end
            if [
                "server_login_then_spec",
                "client_login_to_accepted",
                "server_checks_rfc_proof",
            ]
            .contains(&name.as_str())
            {
                assert!(through, "{name} does not get through");
            }
            n += 1;
        }
        assert!(n >= 5, "{n} seeds");
        // and some edges
        for data in [
            &b""[..],
            b"\x00",
            b"\x01",
            b"\x01\x00",
            b"\x02\xff\xff\xff\xff",
            b"\x03p=",
        ] {
            super::login_exchange(data);
        }
    }
}
