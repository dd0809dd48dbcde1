//! Checks `sign`/`verify` against vectors produced by an independent
//! implementation (Python's `hmac`, see tests/vectors/make_vectors.py).

use std::path::PathBuf;
use std::process::Command;

use paymos_core::signature::{sign, signature_header, verify, Secret, SecretSet, SignatureError};
use serde::Deserialize;

#[derive(Deserialize)]
struct Vector {
    secret: String,
    t: i64,
    body: String,
    v1: String,
}

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("vectors")
}

fn load() -> Vec<Vector> {
    let text = std::fs::read_to_string(vectors_dir().join("signatures.json"))
        .expect("read signatures.json");
    let v: Vec<Vector> = serde_json::from_str(&text).expect("parse signatures.json");
    assert!(
        v.len() >= 12,
        "expected at least 12 vectors, got {}",
        v.len()
    );
    v
}

#[test]
fn contract_values_are_in_the_file() {
    let v = load();
    let find = |secret: &str| {
        v.iter()
            .find(|x| {
                x.secret == secret
                    && x.t == 1764450000
                    && x.body.starts_with("{\"event_id\":\"evt_9Kq2xT4mLp\"")
            })
            .map(|x| x.v1.as_str())
    };
    assert_eq!(
        find("whsec_test_new_6f1d2a9c"),
        Some("80ba6d2ac4725a807b1570f1407b0c5efde893bb29315d9861967a9c5afe0c86")
    );
    assert_eq!(
        find("whsec_test_old_03b7e4aa"),
        Some("bc9cc7d8599f46563d7c9bed1f394b9aa7100e35121ccb50ed69aadc3002733b")
    );
}

#[test]
fn file_covers_the_edge_cases() {
    let v = load();
    assert!(v.iter().any(|x| x.body.is_empty()), "empty body");
    assert!(v.iter().any(|x| x.body.len() == 16 * 1024), "16 KiB body");
    assert!(v.iter().any(|x| !x.body.is_ascii()), "unicode body");
    assert!(
        v.iter()
            .any(|x| x.body.contains('"') && x.body.contains('\n')),
        "quotes/newlines"
    );
    assert!(v.iter().any(|x| !x.secret.is_ascii()), "unicode secret");
    assert!(
        v.iter().any(|x| x.secret.len() > 64),
        "secret longer than a SHA-256 block"
    );
}

#[test]
fn sign_matches_python() {
    for (i, x) in load().iter().enumerate() {
        assert_eq!(
            sign(&Secret::new(x.secret.as_str()), x.t, x.body.as_bytes()),
            x.v1,
            "vector {i}"
        );
    }
}

#[test]
fn verify_accepts_python_signatures() {
    for (i, x) in load().iter().enumerate() {
        let set = SecretSet::parse(&x.secret).unwrap();
        assert_eq!(
            set.len(),
            1,
            "vector {i}: secret must survive config parsing intact"
        );
        let body = x.body.as_bytes();
        let header = format!("t={},v1={}", x.t, x.v1);
        let ok = verify(Some(&header), body, &set, x.t, 300)
            .unwrap_or_else(|e| panic!("vector {i}: {e}"));
        assert_eq!((ok.timestamp, ok.secret_index), (x.t, 0));

        // Rotation: the matching value behind a decoy, and an extra configured secret.
        let decoy = sign(&Secret::new("whsec_decoy"), x.t, body);
        let rotated = format!("t={}, v1={decoy}, v1={}", x.t, x.v1.to_uppercase());
        let two = SecretSet::parse(&format!("whsec_decoy_other {}", x.secret)).unwrap();
        assert_eq!(
            verify(Some(&rotated), body, &two, x.t + 300, 300)
                .unwrap()
                .secret_index,
            1,
            "vector {i}"
        );

        // Tampering with the body, the time or the secret breaks it.
        let mut tampered = body.to_vec();
        tampered.push(b' ');
        assert_eq!(
            verify(Some(&header), &tampered, &set, x.t, 300),
            Err(SignatureError::Mismatch)
        );
        let shifted = format!("t={},v1={}", x.t + 1, x.v1);
        assert_eq!(
            verify(Some(&shifted), body, &set, x.t, 300),
            Err(SignatureError::Mismatch)
        );
        let other = SecretSet::parse(&format!("{}x", x.secret)).unwrap();
        assert_eq!(
            verify(Some(&header), body, &other, x.t, 300),
            Err(SignatureError::Mismatch)
        );

        // Our own header builder produces what Python would.
        let s = Secret::new(x.secret.as_str());
        assert_eq!(signature_header(&[&s], x.t, body), header);
    }
}

#[test]
fn python_check_mode_agrees_with_the_file() {
    let script = vectors_dir().join("make_vectors.py");
    let status = match Command::new("python3").arg(&script).arg("--check").status() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("skipping: python3 not available ({e})");
            return;
        }
    };
    assert!(
        status.success(),
        "make_vectors.py --check failed: signatures.json is stale"
    );
}
