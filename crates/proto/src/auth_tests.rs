use super::*;

// RFC 7677 §3: user "user", password "pencil".
const C_NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
const C_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
const S_FIRST: &str =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
const C_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
const S_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

fn rfc_verifier() -> Verifier {
    let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    Verifier::derive("pencil", &salt, 4096)
}

#[test]
fn passwords_are_saslprepped_before_hashing() {
    let salt = b"salt";
    // (password, another, whether they hash alike): U+00AA (FEMININE ORDINAL) maps to "a"
    // under NFKC, a non-ASCII space to a space, a soft hyphen to nothing; a control
    // character is refused by SASLprep, and the password used as it is
    for (a, b, alike) in [
        ("\u{aa}bc", "abc", true),
        ("a\u{a0}b", "a b", true),
        ("pen\u{ad}cil", "pencil", true),
        ("abc", "abd", false),
        ("a\u{7}b", "ab", false),
    ] {
        let same = salted_password(a, salt, 4) == salted_password(b, salt, 4);
        assert_eq!(same, alike, "{a:?} and {b:?}");
    }
}

#[test]
fn the_client_computes_rfc7677s_messages() {
    let mut c = ScramClient::new("user", "pencil", C_NONCE, Binding::None).unwrap();
    assert_eq!(c.first(), C_FIRST);
    assert_eq!(c.answer(S_FIRST).unwrap(), C_FINAL);
    c.verify(S_FINAL).unwrap();
    let mut bad = S_FINAL.to_string();
    bad.replace_range(2..3, "7");
    assert_eq!(c.verify(&bad), Err(AuthError::BadServerSignature));
    assert!(matches!(
        c.verify("e=invalid-proof"),
        Err(AuthError::ServerError(_))
    ));
}

#[test]
fn the_server_checks_rfc7677s_proof_and_signs() {
    let first = ClientFirst::parse(C_FIRST).unwrap();
    assert_eq!(first.user, "user");
    let s = ScramServer::start(
        first,
        rfc_verifier(),
        "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        None,
    )
    .unwrap();
    assert_eq!(s.challenge(), S_FIRST);
    assert_eq!(s.finish(C_FINAL).unwrap(), S_FINAL);
}

#[test]
fn a_wrong_password_fails_and_the_server_cannot_tell_it_from_an_unknown_user() {
    let v = rfc_verifier();
    let mut c = ScramClient::new("user", "pencil2", C_NONCE, Binding::None).unwrap();
    let s = ScramServer::start(ClientFirst::parse(&c.first()).unwrap(), v, "abc", None).unwrap();
    let fin = c.answer(s.challenge()).unwrap();
    assert_eq!(s.finish(&fin), Err(AuthError::BadProof));

    // an unknown user's made-up verifier is stable and fails the same way
    let a = fake_verifier(b"secret", "nobody", DEFAULT_ITERATIONS);
    assert_eq!(a, fake_verifier(b"secret", "nobody", DEFAULT_ITERATIONS));
    assert_ne!(
        a.salt,
        fake_verifier(b"secret", "other", DEFAULT_ITERATIONS).salt
    );
    let mut c = ScramClient::new("nobody", "pencil", C_NONCE, Binding::None).unwrap();
    let s = ScramServer::start(ClientFirst::parse(&c.first()).unwrap(), a, "abc", None).unwrap();
    let fin = c.answer(s.challenge()).unwrap();
    assert_eq!(s.finish(&fin), Err(AuthError::BadProof));
}

#[test]
fn a_recorded_exchange_cannot_be_replayed_against_a_new_nonce() {
    let first = ClientFirst::parse(C_FIRST).unwrap();
    // the server picks a fresh nonce: the recorded final message carries the old one
    let s = ScramServer::start(first, rfc_verifier(), "fresh-nonce", None).unwrap();
    assert_eq!(s.finish(C_FINAL), Err(AuthError::Replayed));
    // and a final message edited to carry the new nonce no longer matches its proof
    let forged = C_FINAL.replace("%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", "fresh-nonce");
    assert_eq!(s.finish(&forged), Err(AuthError::BadProof));
}

#[test]
fn channel_binding_ties_the_login_to_one_tls_session() {
    let v = rfc_verifier();
    let mut c = ScramClient::new("user", "pencil", C_NONCE, Binding::TlsExporter).unwrap();
    c.set_channel_binding(vec![1; 32]);
    assert!(c.first().starts_with("p=tls-exporter,,"));
    let first = ClientFirst::parse(&c.first()).unwrap();
    // the same session's bytes: accepted
    let s = ScramServer::start(first.clone(), v.clone(), "n1", Some(&[1; 32])).unwrap();
    let fin = c.answer(s.challenge()).unwrap();
    let ok = s.finish(&fin).unwrap();
    c.verify(&ok).unwrap();
    // relayed into another TLS session: refused
    let s = ScramServer::start(first.clone(), v.clone(), "n2", Some(&[2; 32])).unwrap();
    let fin = c.answer(s.challenge()).unwrap();
    assert!(matches!(s.finish(&fin), Err(AuthError::ChannelBinding(_))));
    // binding asked for without TLS, or TLS without binding: refused at once
    assert!(ScramServer::start(first, v.clone(), "n3", None).is_err());
    let plain = ClientFirst::parse(C_FIRST).unwrap();
    assert!(ScramServer::start(plain, v, "n4", Some(&[1; 32])).is_err());
}

#[test]
fn verifiers_round_trip_and_bad_ones_say_why() {
    let v = rfc_verifier();
    assert_eq!(Verifier::decode(&v.encode()).unwrap(), v);
    for bad in [
        "",
        "SCRAM-SHA-256$",
        "SCRAM-SHA-256$100:AAAA$AAAA:AAAA",
        "SCRAM-SHA-256$4096:!!$AAAA:AAAA",
        "SCRAM-SHA-256$4096:AAAA$AAAA:AAAA",
        "MD5$4096:AAAA$AAAA:AAAA",
    ] {
        assert!(Verifier::decode(bad).is_err(), "{bad}");
    }
}

#[test]
fn malformed_messages_are_errors() {
    for bad in [
        "",
        "n,,",
        "n,a=admin,n=user,r=x",
        "p=tls-unique,,n=user,r=x",
        "n,,n=user",
        "n,,r=x,n=user",
        "n,,n=us=ZZer,r=x",
        "n,,n=user,r=a,b",
        "n,,n=user,r=x,m=ext",
    ] {
        assert!(ClientFirst::parse(bad).is_err(), "{bad}");
    }
    assert_eq!(unescape_name("a=2Cb=3Dc").unwrap(), "a,b=c");
    assert_eq!(escape_name("a,b=c"), "a=2Cb=3Dc");
    // names no users file can hold (commas, line breaks) never reach a log line
    assert!(matches!(
        ClientFirst::parse("n,,n=a=2Cb,r=x"),
        Err(AuthError::BadUser(_))
    ));
    assert!(ClientFirst::parse("n,,n=a\nb,r=x").is_err());
    for bad in ["", "c=biws", "c=biws,r=x,p=AAAA", "c=!!,r=x,p=dHzb"] {
        assert!(ClientFinal::parse(bad).is_err(), "{bad}");
    }
    for bad in [
        "r=x,s=AAAA,i=1",
        "r=x,s=AAAA,i=99999999999",
        "r=x,s=,i=4096",
        "r=x,i=4096,s=AAAA",
    ] {
        assert!(ServerFirst::parse(bad).is_err(), "{bad}");
    }
    let mut c = ScramClient::new("user", "pencil", C_NONCE, Binding::None).unwrap();
    // a server nonce that does not extend the client's
    assert_eq!(
        c.answer("r=other,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"),
        Err(AuthError::NonceMismatch)
    );
    assert_eq!(
        c.answer("r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"),
        Err(AuthError::NonceMismatch)
    );
}

#[test]
fn debug_output_does_not_show_the_password() {
    let c = ScramClient::new("user", "pencil", C_NONCE, Binding::None).unwrap();
    assert!(!format!("{c:?}").contains("pencil"));
}

#[test]
fn user_names() {
    assert!(check_user("alice").is_ok());
    assert!(check_user("a.b_c@d-e1").is_ok());
    for bad in ["", "a b", "a,b", "é", &"x".repeat(65)] {
        assert!(check_user(bad).is_err(), "{bad}");
    }
}
