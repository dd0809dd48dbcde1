//! Checks `standard_webhooks` against vectors made by an independent implementation
//! (Python's stdlib hmac/hashlib/base64, see tests/vectors/make_standard_webhooks.py, which
//! also cross-checks them with the reference `standardwebhooks` package when installed).

use std::path::PathBuf;
use std::process::Command;

use paymos_core::standard_webhooks::{
    headers, sign, verify, SecretError, VerifyError, WebhookHeaders, WebhookSecret,
    DEFAULT_TOLERANCE_SECONDS,
};
use serde::Deserialize;

#[derive(Deserialize)]
struct Vector {
    secret: String,
    key_hex: String,
    msg_id: String,
    timestamp: i64,
    body: String,
    signature: String,
}

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("vectors")
}

fn load() -> Vec<Vector> {
    let text = std::fs::read_to_string(vectors_dir().join("standard_webhooks.json"))
        .expect("read standard_webhooks.json");
    let v: Vec<Vector> = serde_json::from_str(&text).expect("parse standard_webhooks.json");
    assert!(
        v.len() >= 12,
        "expected at least 12 vectors, got {}",
        v.len()
    );
    v
}

fn hd<'a>(id: &'a str, ts: &'a str, sig: &'a str) -> WebhookHeaders<'a> {
    WebhookHeaders {
        id: Some(id),
        timestamp: Some(ts),
        signature: Some(sig),
    }
}

#[test]
fn the_specification_example_is_in_the_file() {
    let v = load();
    let spec = v
        .iter()
        .find(|x| x.msg_id == "msg_p5jXN8AQM9LWM0D4loKWxJek")
        .expect("spec example");
    assert_eq!(spec.secret, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
    assert_eq!(spec.timestamp, 1614265330);
    assert_eq!(spec.body, r#"{"test": 2432232314}"#);
    assert_eq!(
        spec.signature,
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    );
}

#[test]
fn file_covers_the_edge_cases() {
    let v = load();
    assert!(v.iter().any(|x| x.body.is_empty()), "empty body");
    assert!(v.iter().any(|x| x.body.len() == 16 * 1024), "16 KiB body");
    assert!(v.iter().any(|x| !x.body.is_ascii()), "unicode body");
    assert!(v.iter().any(|x| x.key_hex.len() == 2), "one-byte key");
    assert!(
        v.iter().any(|x| x.key_hex.len() > 128),
        "key longer than a SHA-256 block"
    );
    assert!(
        v.iter()
            .any(|x| !x.secret.ends_with('=') && x.key_hex.len() % 6 != 0),
        "unpadded secret"
    );
    assert!(v.iter().any(|x| x.msg_id.contains('.')), "dots in the id");
}

#[test]
fn secrets_decode_to_python_key_bytes() {
    for (i, x) in load().iter().enumerate() {
        let parsed = WebhookSecret::parse(&x.secret).unwrap_or_else(|e| panic!("vector {i}: {e}"));
        let key = hex::decode(&x.key_hex).unwrap();
        assert_eq!(parsed, WebhookSecret::from_key(&key).unwrap(), "vector {i}");
        assert_eq!(parsed.key_len(), key.len());
        assert_eq!(format!("{parsed:?}"), "WebhookSecret([REDACTED])");
    }
    assert_eq!(
        WebhookSecret::parse("whsec_***"),
        Err(SecretError::BadBase64)
    );
}

#[test]
fn sign_matches_python() {
    for (i, x) in load().iter().enumerate() {
        let s = WebhookSecret::parse(&x.secret).unwrap();
        assert_eq!(
            sign(&s, &x.msg_id, x.timestamp, x.body.as_bytes()),
            x.signature,
            "vector {i}"
        );
        let h = headers(&[&s], &x.msg_id, x.timestamp, x.body.as_bytes());
        assert_eq!(h[2].1, x.signature, "vector {i}");
    }
}

#[test]
fn verify_accepts_python_signatures_and_refuses_tampering() {
    let tol = DEFAULT_TOLERANCE_SECONDS;
    for (i, x) in load().iter().enumerate() {
        let s = WebhookSecret::parse(&x.secret).unwrap();
        let ts = x.timestamp.to_string();
        let body = x.body.as_bytes();
        let ok = |sig: &str, now: i64| verify(&s, &hd(&x.msg_id, &ts, sig), body, now, tol);
        assert_eq!(ok(&x.signature, x.timestamp), Ok(x.timestamp), "vector {i}");
        assert_eq!(ok(&x.signature, x.timestamp + tol), Ok(x.timestamp));
        assert_eq!(
            ok(&x.signature, x.timestamp + tol + 1),
            Err(VerifyError::TooOld)
        );
        assert_eq!(
            ok(&x.signature, x.timestamp - tol - 1),
            Err(VerifyError::TooNew)
        );

        // a rotation list: the matching entry behind a decoy, or in front of it
        let decoy = sign(
            &WebhookSecret::from_key(b"decoy").unwrap(),
            &x.msg_id,
            x.timestamp,
            body,
        );
        assert_eq!(
            ok(&format!("{decoy} {}", x.signature), x.timestamp),
            Ok(x.timestamp)
        );
        assert_eq!(
            ok(&format!("{} {decoy}", x.signature), x.timestamp),
            Ok(x.timestamp)
        );
        assert_eq!(ok(&decoy, x.timestamp), Err(VerifyError::Mismatch));

        // tampering with the body, the id, the time or the key breaks it
        let mut tampered = body.to_vec();
        tampered.push(b' ');
        assert_eq!(
            verify(
                &s,
                &hd(&x.msg_id, &ts, &x.signature),
                &tampered,
                x.timestamp,
                tol
            ),
            Err(VerifyError::Mismatch)
        );
        let other_id = format!("{}x", x.msg_id);
        assert_eq!(
            verify(
                &s,
                &hd(&other_id, &ts, &x.signature),
                body,
                x.timestamp,
                tol
            ),
            Err(VerifyError::Mismatch)
        );
        let ts1 = (x.timestamp + 1).to_string();
        assert_eq!(
            verify(
                &s,
                &hd(&x.msg_id, &ts1, &x.signature),
                body,
                x.timestamp,
                tol
            ),
            Err(VerifyError::Mismatch)
        );
        let mut key = hex::decode(&x.key_hex).unwrap();
        key[0] ^= 1;
        let flipped = WebhookSecret::from_key(&key).unwrap();
        assert_eq!(
            verify(
                &flipped,
                &hd(&x.msg_id, &ts, &x.signature),
                body,
                x.timestamp,
                tol
            ),
            Err(VerifyError::Mismatch)
        );
    }
}

#[test]
fn python_check_mode_agrees_with_the_file() {
    let script = vectors_dir().join("make_standard_webhooks.py");
    let status = match Command::new("python3").arg(&script).arg("--check").status() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("skipping: python3 not available ({e})");
            return;
        }
    };
    assert!(
        status.success(),
        "make_standard_webhooks.py --check failed: standard_webhooks.json is stale (or the standardwebhooks package disagrees)"
    );
}
