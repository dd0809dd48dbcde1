//! Checks `paymos_core::access` against Cloudflare Access tokens minted by PyJWT (an
//! implementation no one here wrote): tests/vectors/make_access_vectors.py, whose verdicts are
//! also PyJWT's own verifier's (but for the rules that are this receiver's, listed in `ours`).
//!
//! The pipeline is the Worker's (src/access.rs): parse (the algorithm decided first), the key
//! by `kid` from the JWKS, the RS256 signature (here the `rsa` crate, a dev-dependency only;
//! the Worker uses WebCrypto), then the claims at the vectors' fixed `now`.
//!
//! The committed access.json is always checked; a fresh set is minted and checked too when a
//! Python with PyJWT is found: the repository's .venv (scripts/setup.sh makes it), then
//! `$PAYMOS_PYTHON`, then `python3`.

use std::path::{Path, PathBuf};
use std::process::Command;

use paymos_core::access::{
    check_claims, parse_jwks, parse_token, AccessConfig, AccessError, AccessSetting, Actor, Jwk,
};
use rsa::{BigUint, Pkcs1v15Sign, RsaPublicKey};
use serde::Deserialize;
use sha2::{Digest, Sha256};

#[derive(Deserialize)]
struct File {
    generator: String,
    now: i64,
    leeway: i64,
    team_domain: String,
    audience: String,
    jwks: serde_json::Value,
    vectors: Vec<Vector>,
}

#[derive(Deserialize)]
struct Vector {
    name: String,
    token: String,
    expect: String,
    actor: Option<ExpectedActor>,
    ours: Option<String>,
    pyjwt: String,
}

#[derive(Deserialize)]
struct ExpectedActor {
    kind: String,
    name: String,
}

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("vectors")
}

fn load(path: &Path) -> File {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {path:?}: {e}"))
}

/// RS256 (RSASSA-PKCS1-v1_5 over SHA-256) by the `rsa` crate.
fn rs256_verifies(key: &Jwk, input: &[u8], signature: &[u8]) -> bool {
    let Ok(public) = RsaPublicKey::new(
        BigUint::from_bytes_be(&key.modulus()),
        BigUint::from_bytes_be(&key.exponent()),
    ) else {
        return false;
    };
    public
        .verify(
            Pkcs1v15Sign::new::<Sha256>(),
            &Sha256::digest(input),
            signature,
        )
        .is_ok()
}

/// What the Worker does with a token, at `now`.
fn admit(token: &str, keys: &[Jwk], config: &AccessConfig, now: i64) -> Result<Actor, AccessError> {
    let parsed = parse_token(token)?;
    let key = keys
        .iter()
        .find(|k| k.kid == parsed.header.kid)
        .ok_or_else(|| AccessError::key_unknown(&parsed.header.kid))?;
    if !rs256_verifies(key, parsed.signing_input(), parsed.signature()) {
        return Err(AccessError::SignatureInvalid);
    }
    check_claims(&parsed.claims, config, now)
}

fn check_file(file: &File) {
    assert_eq!(file.leeway, paymos_core::access::LEEWAY_SECONDS);
    assert!(file.generator.starts_with("PyJWT "), "{}", file.generator);
    let config = match paymos_core::access::setting(Some(&file.team_domain), Some(&file.audience)) {
        AccessSetting::On(c) => c,
        other => panic!("{other:?}"),
    };
    let keys = parse_jwks(&file.jwks.to_string()).expect("the JWKS parses");
    assert_eq!(keys.len(), 2, "the current and the previous key");
    // the document is Cloudflare's shape: the PEM certificates name the same keys
    let cert_kids: Vec<&str> = file.jwks["public_certs"]
        .as_array()
        .expect("public_certs")
        .iter()
        .map(|c| c["kid"].as_str().unwrap())
        .collect();
    assert_eq!(
        cert_kids,
        keys.iter().map(|k| k.kid.as_str()).collect::<Vec<_>>()
    );
    assert!(file.jwks["public_cert"]["cert"]
        .as_str()
        .unwrap()
        .starts_with("-----BEGIN CERTIFICATE-----"));

    let mut seen_codes = std::collections::BTreeSet::new();
    for v in &file.vectors {
        // the receiver's verdict is PyJWT's, but for its own rules (said in the file)
        match &v.ours {
            None => assert_eq!(v.pyjwt, v.expect, "{}: PyJWT's verdict", v.name),
            Some(why) => assert_ne!(v.pyjwt, v.expect, "{}: {why}", v.name),
        }
        let got = admit(&v.token, &keys, &config, file.now);
        match (&got, v.expect.as_str()) {
            (Ok(actor), "ok") => {
                let want = v
                    .actor
                    .as_ref()
                    .unwrap_or_else(|| panic!("{}: actor", v.name));
                let (kind, name) = match actor {
                    Actor::User(n) => ("user", n),
                    Actor::ServiceToken(n) => ("service_token", n),
                };
                assert_eq!(
                    (kind, name.as_str()),
                    (want.kind.as_str(), want.name.as_str()),
                    "{}",
                    v.name
                );
            }
            (Err(e), code) => assert_eq!(e.code(), code, "{}: {e}", v.name),
            (Ok(a), code) => panic!("{}: admitted as {a:?}, expected {code}", v.name),
        }
        seen_codes.insert(v.expect.clone());
    }
    // the file covers what the brief names
    for code in [
        "ok",
        "access_token_expired",
        "access_token_not_yet_valid",
        "access_audience_mismatch",
        "access_issuer_mismatch",
        "access_algorithm_refused",
        "access_key_unknown",
        "access_signature_invalid",
        "access_token_malformed",
        "access_actor_missing",
    ] {
        assert!(seen_codes.contains(code), "no vector for {code}");
    }
    for name in [
        "alg_none",
        "hs256_public_key_as_secret",
        "foreign_key",
        "aud_as_string",
        "garbage",
    ] {
        assert!(
            file.vectors.iter().any(|v| v.name == name),
            "no vector {name}"
        );
    }
}

#[test]
fn committed_pyjwt_vectors() {
    let file = load(&vectors_dir().join("access.json"));
    assert!(file.vectors.len() >= 30, "{} vectors", file.vectors.len());
    check_file(&file);
}

/// Time moves every verdict the way the rules say: the valid token is admitted from 60 s
/// before its `iat`/`nbf` until 60 s after its `exp`, and not a second outside.
#[test]
fn the_valid_token_over_time() {
    let file = load(&vectors_dir().join("access.json"));
    let config = match paymos_core::access::setting(Some(&file.team_domain), Some(&file.audience)) {
        AccessSetting::On(c) => c,
        other => panic!("{other:?}"),
    };
    let keys = parse_jwks(&file.jwks.to_string()).unwrap();
    let valid = file.vectors.iter().find(|v| v.name == "valid").unwrap();
    let claims = parse_token(&valid.token).unwrap().claims;
    let (iat, exp) = (claims.iat.unwrap() as i64, claims.exp.unwrap() as i64);
    let at = |now| {
        admit(&valid.token, &keys, &config, now)
            .map(|_| ())
            .map_err(|e| e.code())
    };
    assert_eq!(at(iat - 61), Err("access_token_not_yet_valid"));
    assert_eq!(at(iat - 60), Ok(()));
    assert_eq!(at(exp + 59), Ok(()));
    assert_eq!(at(exp + 60), Err("access_token_expired"));
    // and only the configured application and team
    let other =
        |domain: &str, aud: &str| match paymos_core::access::setting(Some(domain), Some(aud)) {
            AccessSetting::On(c) => admit(&valid.token, &keys, &c, file.now).map_err(|e| e.code()),
            other => panic!("{other:?}"),
        };
    assert_eq!(
        other(&file.team_domain, "another-aud").unwrap_err(),
        "access_audience_mismatch"
    );
    assert_eq!(
        other("https://another.cloudflareaccess.com", &file.audience).unwrap_err(),
        "access_issuer_mismatch"
    );
    // the team domain as an operator may type it: a bare host, a trailing slash
    let bare = file.team_domain.trim_start_matches("https://").to_string() + "/";
    assert!(other(&bare, &file.audience).is_ok());
}

/// A Python that can run the script: the repository's .venv first.
fn python_with_pyjwt() -> Option<(PathBuf, bool)> {
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    let mut candidates = vec![(venv.clone(), true)];
    if let Some(p) = std::env::var_os("PAYMOS_PYTHON") {
        candidates.push((PathBuf::from(p), true));
    }
    candidates.push((PathBuf::from("python3"), false));
    for (python, required) in candidates {
        if python.is_absolute() && !python.exists() {
            continue;
        }
        let ok = Command::new(&python)
            .args(["-c", "import jwt, cryptography"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if ok {
            return Some((python, required));
        }
        // a .venv that exists but cannot import PyJWT is a broken set-up, not a skip
        assert!(
            !required,
            "{python:?} cannot import jwt and cryptography: run scripts/setup.sh (requirements-dev.txt)"
        );
    }
    None
}

#[test]
fn freshly_minted_pyjwt_vectors() {
    let Some((python, _)) = python_with_pyjwt() else {
        eprintln!(
            "not run: no Python with PyJWT (scripts/setup.sh makes .venv); the committed vectors were checked"
        );
        return;
    };
    let out = std::env::temp_dir().join(format!("paymos-access-{}.json", std::process::id()));
    let status = Command::new(&python)
        .arg(vectors_dir().join("make_access_vectors.py"))
        .arg("--out")
        .arg(&out)
        .status()
        .expect("run make_access_vectors.py");
    assert!(
        status.success(),
        "make_access_vectors.py failed ({python:?})"
    );
    let file = load(&out);
    let _ = std::fs::remove_file(&out);
    // new keys every run: not the committed tokens, the same verdicts
    let committed = load(&vectors_dir().join("access.json"));
    assert_ne!(file.vectors[0].token, committed.vectors[0].token);
    assert_eq!(
        file.vectors
            .iter()
            .map(|v| (&v.name, &v.expect))
            .collect::<Vec<_>>(),
        committed
            .vectors
            .iter()
            .map(|v| (&v.name, &v.expect))
            .collect::<Vec<_>>(),
        "access.json is stale: run make_access_vectors.py"
    );
    check_file(&file);
}
