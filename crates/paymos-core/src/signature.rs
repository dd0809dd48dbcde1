//! `X-Webhook-Signature` parsing, signing and verification (interface §1).
//!
//! `v1 = hex(HMAC-SHA256(key = secret incl. "whsec_", msg = "<t>." + raw body))`.
//! The header may carry several `v1` values (sender-side rotation) and the receiver
//! may hold several secrets (receiver-side rotation): any pair matching is enough.

use std::fmt;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;
use thiserror::Error;

type HmacSha256 = Hmac<Sha256>;

/// Default `PAYMOS_SIGNATURE_TOLERANCE_SECONDS`.
pub const DEFAULT_TOLERANCE_SECONDS: i64 = 300;

/// Longest header we are willing to parse (DoS bound; a real one is ~150 bytes).
pub const MAX_HEADER_LEN: usize = 8 * 1024;

/// Most `v1` values we are willing to try (DoS bound: each costs a compare per secret).
pub const MAX_V1_VALUES: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SignatureError {
    #[error("signature header missing")]
    Missing,
    /// The reason is a fixed string: the header's content is never echoed.
    #[error("signature header malformed: {0}")]
    Malformed(&'static str),
    #[error("signature timestamp outside the allowed tolerance")]
    OutOfTolerance,
    #[error("no signature matches a configured secret")]
    Mismatch,
    #[error("no webhook secrets configured")]
    NoSecretsConfigured,
}

impl SignatureError {
    /// Stable code for JSON error replies.
    pub fn code(&self) -> &'static str {
        match self {
            SignatureError::Missing => "signature_missing",
            SignatureError::Malformed(_) => "signature_malformed",
            SignatureError::OutOfTolerance => "timestamp_out_of_tolerance",
            SignatureError::Mismatch => "signature_mismatch",
            SignatureError::NoSecretsConfigured => "secrets_not_configured",
        }
    }
}

/// An endpoint secret. No `Display`, and `Debug` is redacted, so it cannot leak
/// into logs or error replies by accident.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    pub fn new(secret: impl Into<String>) -> Self {
        Secret(secret.into())
    }

    /// The full secret string (including any `whsec_` prefix); the HMAC key.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([REDACTED])")
    }
}

/// The receiver's configured secrets (`PAYMOS_WEBHOOK_SECRETS`); never empty.
#[derive(Clone)]
pub struct SecretSet(Vec<Secret>);

impl SecretSet {
    /// Splits on commas and/or whitespace, dropping empty pieces.
    pub fn parse(config: &str) -> Result<SecretSet, SignatureError> {
        let secrets: Vec<Secret> = config
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .map(Secret::new)
            .collect();
        if secrets.is_empty() {
            return Err(SignatureError::NoSecretsConfigured);
        }
        Ok(SecretSet(secrets))
    }

    pub fn secrets(&self) -> &[Secret] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false for a parsed set; present for API completeness (and clippy).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for SecretSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretSet([REDACTED; {}])", self.0.len())
    }
}

/// A parsed `X-Webhook-Signature` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureHeader {
    pub timestamp: i64,
    /// `t` exactly as it stands in the header: the MAC covers this text, not a
    /// re-formatted number (a sender that writes `t=01764450000` signed `"01764450000."`).
    pub timestamp_text: String,
    /// Usable candidates (64 hex chars each); unusable `v1` values are dropped.
    pub v1: Vec<[u8; 32]>,
}

impl SignatureHeader {
    /// What the MAC covers before the body: `t` as written, then `.`.
    pub fn signed_prefix(&self) -> String {
        let mut prefix = String::with_capacity(self.timestamp_text.len() + 1);
        prefix.push_str(&self.timestamp_text);
        prefix.push('.');
        prefix
    }

    pub fn parse(header: &str) -> Result<Self, SignatureError> {
        use SignatureError::Malformed;
        if header.len() > MAX_HEADER_LEN {
            return Err(Malformed("header too long"));
        }
        let mut timestamp: Option<(i64, &str)> = None;
        let mut v1 = Vec::new();
        let mut v1_seen = 0usize;
        for element in header.split(',') {
            let element = element.trim();
            let Some((key, value)) = element.split_once('=') else {
                return Err(Malformed("element without '='"));
            };
            match key {
                "t" => {
                    if timestamp.is_some() {
                        return Err(Malformed("more than one t"));
                    }
                    // Digits only: no sign, no '+', no spaces (i64::from_str would take '+').
                    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(Malformed("t is not a decimal integer"));
                    }
                    let t = value.parse().map_err(|_| Malformed("t out of range"))?;
                    timestamp = Some((t, value));
                }
                "v1" => {
                    v1_seen += 1;
                    if v1_seen > MAX_V1_VALUES {
                        return Err(Malformed("too many v1 values"));
                    }
                    let mut mac = [0u8; 32];
                    // Wrong length or non-hex: not a candidate (e.g. a future encoding).
                    if value.len() == 64 && hex::decode_to_slice(value, &mut mac).is_ok() {
                        v1.push(mac);
                    }
                }
                // Future schemes (v2=…, etc.) are ignored by contract.
                _ => {}
            }
        }
        let (timestamp, text) = timestamp.ok_or(Malformed("missing t"))?;
        if v1.is_empty() {
            return Err(Malformed("no usable v1"));
        }
        Ok(SignatureHeader {
            timestamp,
            timestamp_text: text.to_owned(),
            v1,
        })
    }
}

/// What a successful verification established.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifiedSignature {
    pub timestamp: i64,
    /// Index into [`SecretSet::secrets`] of the secret that matched (useful to
    /// notice when an old secret is still in use).
    pub secret_index: usize,
}

fn mac(secret: &Secret, timestamp_text: &str, body: &[u8]) -> [u8; 32] {
    let mut m = HmacSha256::new_from_slice(secret.expose().as_bytes())
        .expect("HMAC accepts keys of any length");
    m.update(timestamp_text.as_bytes());
    m.update(b".");
    m.update(body);
    m.finalize().into_bytes().into()
}

/// Lowercase hex `v1` for `secret`, `timestamp` and the raw `body` bytes.
pub fn sign(secret: &Secret, timestamp: i64, body: &[u8]) -> String {
    sign_text(secret, &timestamp.to_string(), body)
}

/// [`sign`] over a `t` text as written (e.g. with leading zeros).
pub fn sign_text(secret: &Secret, timestamp_text: &str, body: &[u8]) -> String {
    hex::encode(mac(secret, timestamp_text, body))
}

/// A full header value `t=<t>,v1=<hex>[,v1=<hex>…]`, one `v1` per secret, in order.
pub fn signature_header(secrets: &[&Secret], timestamp: i64, body: &[u8]) -> String {
    let mut out = format!("t={timestamp}");
    for s in secrets {
        out.push_str(",v1=");
        out.push_str(&sign(s, timestamp, body));
    }
    out
}

/// Verifies a delivery. `now` and `tolerance_seconds` are unix seconds; the
/// timestamp check is symmetric (stale and future are both refused).
pub fn verify(
    header: Option<&str>,
    body: &[u8],
    secrets: &SecretSet,
    now: i64,
    tolerance_seconds: i64,
) -> Result<VerifiedSignature, SignatureError> {
    let parsed = check(header, secrets, now, tolerance_seconds)?;
    match_macs(&parsed, macs(&parsed, secrets, body))
}

/// The MAC of `parsed`'s [`SignatureHeader::signed_prefix`] and `body` under each secret, in
/// order, computed here (the hmac crate) as [`match_macs`] asks for them: a secret's MAC only
/// if the ones before it matched nothing.
pub fn macs<'a>(
    parsed: &'a SignatureHeader,
    secrets: &'a SecretSet,
    body: &'a [u8],
) -> impl Iterator<Item = [u8; 32]> + 'a {
    secrets
        .secrets()
        .iter()
        .map(move |secret| mac(secret, &parsed.timestamp_text, body))
}

/// [`verify`]'s checks before any MAC: the header present, well-formed and within the
/// tolerance, and a secret configured. What is left is [`match_macs`] over the MAC of
/// [`SignatureHeader::signed_prefix`] followed by the body, under each secret in order. The
/// Worker computes that MAC itself for a large body (the runtime's native HMAC), and with
/// [`verify`] otherwise: the decision is this module's either way.
pub fn check(
    header: Option<&str>,
    secrets: &SecretSet,
    now: i64,
    tolerance_seconds: i64,
) -> Result<SignatureHeader, SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    let parsed = SignatureHeader::parse(header)?;
    // i128: |i64 - i64| cannot overflow there.
    let skew = (i128::from(now) - i128::from(parsed.timestamp)).abs();
    if skew > i128::from(tolerance_seconds) {
        return Err(SignatureError::OutOfTolerance);
    }
    if secrets.is_empty() {
        return Err(SignatureError::NoSecretsConfigured);
    }
    Ok(parsed)
}

/// The first secret (in `macs`' order, which is the secrets' order) whose MAC equals one of
/// the header's `v1` values, each compared in constant time.
pub fn match_macs(
    parsed: &SignatureHeader,
    macs: impl IntoIterator<Item = [u8; 32]>,
) -> Result<VerifiedSignature, SignatureError> {
    for (secret_index, expected) in macs.into_iter().enumerate() {
        for candidate in &parsed.v1 {
            if bool::from(expected.ct_eq(candidate)) {
                return Ok(VerifiedSignature {
                    timestamp: parsed.timestamp,
                    secret_index,
                });
            }
        }
    }
    Err(SignatureError::Mismatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEW: &str = "whsec_test_new_6f1d2a9c";
    const OLD: &str = "whsec_test_old_03b7e4aa";
    const T: i64 = 1764450000;
    const BODY: &str = r#"{"event_id":"evt_9Kq2xT4mLp","type":"invoice.paid","created":1764449990,"livemode":false,"data":{"id":"inv_7Hc3pQ","object":"invoice","status":"paid","amount":"49.00","currency":"USDT","order_ref":"order_1042"}}"#;
    const V1_NEW: &str = "80ba6d2ac4725a807b1570f1407b0c5efde893bb29315d9861967a9c5afe0c86";
    const V1_OLD: &str = "bc9cc7d8599f46563d7c9bed1f394b9aa7100e35121ccb50ed69aadc3002733b";

    fn set(cfg: &str) -> SecretSet {
        SecretSet::parse(cfg).unwrap()
    }

    fn v(header: &str, secrets: &str) -> Result<VerifiedSignature, SignatureError> {
        verify(
            Some(header),
            BODY.as_bytes(),
            &set(secrets),
            T,
            DEFAULT_TOLERANCE_SECONDS,
        )
    }

    #[test]
    fn contract_vector_sign() {
        assert_eq!(sign(&Secret::new(NEW), T, BODY.as_bytes()), V1_NEW);
        assert_eq!(sign(&Secret::new(OLD), T, BODY.as_bytes()), V1_OLD);
    }

    #[test]
    fn contract_vector_header() {
        let (n, o) = (Secret::new(NEW), Secret::new(OLD));
        assert_eq!(
            signature_header(&[&n, &o], T, BODY.as_bytes()),
            format!("t={T},v1={V1_NEW},v1={V1_OLD}")
        );
        assert_eq!(signature_header(&[], T, b""), format!("t={T}"));
    }

    #[test]
    fn contract_vector_verify_each_secret() {
        let h = format!("t={T},v1={V1_NEW}");
        assert_eq!(
            v(&h, NEW),
            Ok(VerifiedSignature {
                timestamp: T,
                secret_index: 0
            })
        );
        let h = format!("t={T},v1={V1_OLD}");
        assert_eq!(
            v(&h, OLD),
            Ok(VerifiedSignature {
                timestamp: T,
                secret_index: 0
            })
        );
        assert_eq!(v(&h, NEW), Err(SignatureError::Mismatch));
    }

    #[test]
    fn rotation_match_in_first_or_second_position() {
        let both = format!("t={T},v1={V1_NEW},v1={V1_OLD}");
        let swapped = format!("t={T},v1={V1_OLD},v1={V1_NEW}");
        for h in [&both, &swapped] {
            assert!(v(h, NEW).is_ok());
            assert!(v(h, OLD).is_ok());
        }
        // Matching value second, behind a bogus first one.
        let h = format!("t={T},v1={},v1={V1_NEW}", "00".repeat(32));
        assert!(v(&h, NEW).is_ok());
    }

    #[test]
    fn several_configured_secrets_report_index() {
        let h = format!("t={T},v1={V1_OLD}");
        let r = v(&h, &format!("whsec_other, {NEW}\n{OLD}")).unwrap();
        assert_eq!(r.secret_index, 2);
        let h = format!("t={T},v1={V1_NEW},v1={V1_OLD}");
        // First configured secret that matches wins.
        assert_eq!(v(&h, &format!("{OLD},{NEW}")).unwrap().secret_index, 0);
        assert_eq!(v(&h, &format!("{NEW} {OLD}")).unwrap().secret_index, 0);
        assert_eq!(v(&h, "whsec_a whsec_b"), Err(SignatureError::Mismatch));
    }

    #[test]
    fn whitespace_around_elements() {
        let h = format!("  t={T} ,\tv1={V1_NEW} , v1={V1_OLD}\n");
        assert!(v(&h, NEW).is_ok());
        assert!(v(&h, OLD).is_ok());
    }

    #[test]
    fn uppercase_hex_accepted() {
        let h = format!("t={T},v1={}", V1_NEW.to_uppercase());
        assert!(v(&h, NEW).is_ok());
    }

    #[test]
    fn unknown_keys_ignored() {
        let h = format!("v0=abc,t={T},v2=zzzz,v1={V1_NEW},x=");
        assert!(v(&h, NEW).is_ok());
        let h = format!("t={T},v1={V1_NEW},k=a=b");
        assert!(v(&h, NEW).is_ok());
    }

    /// The MAC covers the `t` text as sent (interface §1). The expected value was computed
    /// with Python: hmac.new(b"whsec_test_new_6f1d2a9c", b"01764450000." + body, sha256).
    #[test]
    fn leading_zero_timestamp_text_is_what_is_signed() {
        const V1_ZERO: &str = "2965540a14c0d447a32259318aa012a3222f83c337e0b776799fc1db12524e0e";
        let ok = verify(
            Some(&format!("t=01764450000,v1={V1_ZERO}")),
            BODY.as_bytes(),
            &set(NEW),
            T,
            300,
        )
        .unwrap();
        assert_eq!(ok.timestamp, T);
        // the re-formatted number's MAC does not verify under the zero-padded text
        assert_eq!(
            verify(
                Some(&format!("t=01764450000,v1={V1_NEW}")),
                BODY.as_bytes(),
                &set(NEW),
                T,
                300
            ),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            sign_text(&Secret::new(NEW), "01764450000", BODY.as_bytes()),
            V1_ZERO
        );
        let p = SignatureHeader::parse(&format!("t=01764450000,v1={V1_ZERO}")).unwrap();
        assert_eq!(p.timestamp_text, "01764450000");
    }

    #[test]
    fn parse_structure() {
        let p = SignatureHeader::parse(&format!("t={T},v1={V1_NEW},v1={V1_OLD}")).unwrap();
        assert_eq!(p.timestamp, T);
        assert_eq!(p.v1.len(), 2);
        assert_eq!(hex::encode(p.v1[0]), V1_NEW);
        assert_eq!(hex::encode(p.v1[1]), V1_OLD);
        // t after v1 is fine.
        let p = SignatureHeader::parse(&format!("v1={V1_NEW},t=0")).unwrap();
        assert_eq!(p.timestamp, 0);
    }

    fn malformed(h: &str) {
        match SignatureHeader::parse(h) {
            Err(SignatureError::Malformed(_)) => {}
            other => panic!("{h:?} -> {other:?}"),
        }
    }

    #[test]
    fn duplicate_or_missing_t() {
        malformed(&format!("t={T},t={T},v1={V1_NEW}"));
        malformed(&format!("t={T},v1={V1_NEW},t=1"));
        malformed(&format!("v1={V1_NEW}"));
        malformed(&format!("T={T},v1={V1_NEW}"));
    }

    #[test]
    fn bad_t_values() {
        for t in [
            "",
            "-1",
            "+1",
            "1.5",
            "1e9",
            " 1",
            "0x10",
            "abc",
            "99999999999999999999",
        ] {
            malformed(&format!("t={t},v1={V1_NEW}"));
        }
    }

    #[test]
    fn no_v1() {
        malformed(&format!("t={T}"));
        malformed(&format!("t={T},v2={V1_NEW}"));
        malformed(&format!("t={T},v1="));
    }

    #[test]
    fn garbled_hex_skipped_or_malformed() {
        // Alone: nothing usable.
        malformed(&format!("t={T},v1={}", "zz".repeat(32)));
        malformed(&format!("t={T},v1={}", &V1_NEW[..63]));
        malformed(&format!("t={T},v1={V1_NEW}00"));
        malformed(&format!("t={T},v1=é{}", &V1_NEW[2..]));
        // Next to a good one: skipped.
        let h = format!("t={T},v1={},v1={V1_NEW}", "zz".repeat(32));
        assert_eq!(SignatureHeader::parse(&h).unwrap().v1.len(), 1);
        assert!(v(&h, NEW).is_ok());
    }

    #[test]
    fn elements_without_equals() {
        malformed(&format!("t={T},v1={V1_NEW},"));
        malformed(&format!("t={T},,v1={V1_NEW}"));
        malformed(&format!("t={T},v1={V1_NEW},garbage"));
        malformed(&format!("t={T};v1={V1_NEW}"));
        malformed("");
        malformed("   ");
    }

    #[test]
    fn dos_bounds() {
        let h = format!("t={T}{}", format!(",v1={V1_NEW}").repeat(MAX_V1_VALUES));
        assert!(h.len() < MAX_HEADER_LEN);
        assert_eq!(SignatureHeader::parse(&h).unwrap().v1.len(), MAX_V1_VALUES);
        malformed(&format!("{h},v1={V1_NEW}"));
        // Unusable v1 values count too.
        malformed(&format!(
            "t={T}{},v1={V1_NEW}",
            ",v1=x".repeat(MAX_V1_VALUES)
        ));
        let long = format!("t={T},v1={V1_NEW},x={}", "a".repeat(MAX_HEADER_LEN));
        malformed(&long);
        // the limit itself is allowed, one byte more is not
        let head = format!("t={T},v1={V1_NEW},x=");
        let at_limit = format!("{head}{}", "a".repeat(MAX_HEADER_LEN - head.len()));
        assert_eq!(at_limit.len(), MAX_HEADER_LEN);
        assert_eq!(SignatureHeader::parse(&at_limit).unwrap().v1.len(), 1);
        malformed(&format!("{at_limit}a"));
    }

    #[test]
    fn tolerance_boundaries() {
        let s = set(NEW);
        let body = BODY.as_bytes();
        let h = format!("t={T},v1={V1_NEW}");
        let at = |now: i64| verify(Some(&h), body, &s, now, 300);
        assert!(at(T).is_ok());
        assert!(at(T + 300).is_ok(), "exactly 300 s stale passes");
        assert!(at(T - 300).is_ok(), "exactly 300 s ahead passes");
        assert_eq!(at(T + 301), Err(SignatureError::OutOfTolerance));
        assert_eq!(at(T - 301), Err(SignatureError::OutOfTolerance));
        assert_eq!(at(i64::MAX), Err(SignatureError::OutOfTolerance));
        assert_eq!(at(i64::MIN), Err(SignatureError::OutOfTolerance));
        // Tolerance is configurable.
        assert!(verify(Some(&h), body, &s, T + 1000, 1000).is_ok());
        assert_eq!(
            verify(Some(&h), body, &s, T + 1, 0),
            Err(SignatureError::OutOfTolerance)
        );
        assert!(verify(Some(&h), body, &s, T, 0).is_ok());
    }

    #[test]
    fn extreme_timestamps_do_not_overflow() {
        let s = set(NEW);
        let hmax = signature_header(&[&Secret::new(NEW)], i64::MAX, b"x");
        assert!(verify(Some(&hmax), b"x", &s, i64::MAX, 0).is_ok());
        assert_eq!(
            verify(Some(&hmax), b"x", &s, i64::MIN, i64::MAX),
            Err(SignatureError::OutOfTolerance)
        );
        assert!(verify(Some(&hmax), b"x", &s, 0, i64::MAX).is_ok());
        assert_eq!(
            verify(Some(&hmax), b"x", &s, 0, i64::MIN),
            Err(SignatureError::OutOfTolerance)
        );
    }

    #[test]
    fn timestamp_is_covered_by_the_mac() {
        let h = format!("t={},v1={V1_NEW}", T + 1);
        assert_eq!(v(&h, NEW), Err(SignatureError::Mismatch));
    }

    #[test]
    fn wrong_secret_and_tampered_body() {
        let h = format!("t={T},v1={V1_NEW}");
        assert_eq!(
            v(&h, "whsec_test_new_6f1d2a9d"),
            Err(SignatureError::Mismatch)
        );
        // Key is the full string, prefix included.
        assert_eq!(v(&h, "test_new_6f1d2a9c"), Err(SignatureError::Mismatch));
        let s = set(NEW);
        let tampered = BODY.replace("49.00", "48.00");
        assert_eq!(
            verify(Some(&h), tampered.as_bytes(), &s, T, 300),
            Err(SignatureError::Mismatch)
        );
        // Re-serialised JSON (different bytes, same meaning) does not verify.
        let reser =
            serde_json::to_string(&serde_json::from_str::<serde_json::Value>(BODY).unwrap())
                .unwrap();
        assert_ne!(reser, BODY);
        assert_eq!(
            verify(Some(&h), reser.as_bytes(), &s, T, 300),
            Err(SignatureError::Mismatch)
        );
        let mut trailing = BODY.as_bytes().to_vec();
        trailing.push(b'\n');
        assert_eq!(
            verify(Some(&h), &trailing, &s, T, 300),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn order_of_checks() {
        let s = set(NEW);
        assert_eq!(verify(None, b"", &s, T, 300), Err(SignatureError::Missing));
        // Malformed beats out-of-tolerance.
        assert!(matches!(
            verify(Some("t=1"), b"", &s, T, 300),
            Err(SignatureError::Malformed(_))
        ));
        // Out-of-tolerance beats mismatch.
        let h = format!("t=1,v1={}", "00".repeat(32));
        assert_eq!(
            verify(Some(&h), b"", &s, T, 300),
            Err(SignatureError::OutOfTolerance)
        );
    }

    #[test]
    fn secret_set_parsing() {
        assert_eq!(set("a").len(), 1);
        assert_eq!(set(" a , b\n\tc,,d ").len(), 4);
        let s = set("whsec_x,whsec_y whsec_z");
        let v: Vec<&str> = s.secrets().iter().map(|s| s.expose()).collect();
        assert_eq!(v, ["whsec_x", "whsec_y", "whsec_z"]);
        assert!(!s.is_empty());
        for empty in ["", " ", ",", " , \n,\t"] {
            assert_eq!(
                SecretSet::parse(empty).unwrap_err(),
                SignatureError::NoSecretsConfigured
            );
        }
    }

    #[test]
    fn secrets_are_redacted() {
        let s = Secret::new(NEW);
        assert_eq!(format!("{s:?}"), "Secret([REDACTED])");
        let set = set(&format!("{NEW},{OLD}"));
        let d = format!("{set:?} {:?}", set.secrets());
        assert!(!d.contains("whsec"), "{d}");
        assert!(d.contains("REDACTED"));
    }

    #[test]
    fn error_codes_and_messages() {
        use SignatureError::*;
        let all = [
            Missing,
            Malformed("x"),
            OutOfTolerance,
            Mismatch,
            NoSecretsConfigured,
        ];
        let codes: Vec<_> = all.iter().map(|e| e.code()).collect();
        assert_eq!(
            codes,
            [
                "signature_missing",
                "signature_malformed",
                "timestamp_out_of_tolerance",
                "signature_mismatch",
                "secrets_not_configured"
            ]
        );
        // Messages from real failures never contain header content or expected MACs.
        let s = set(NEW);
        let bogus = format!("t={T},v1={}", "ab".repeat(32));
        let expected = sign(&Secret::new(NEW), T, BODY.as_bytes());
        for h in [
            bogus.as_str(),
            "t=x,v1=y",
            "zzz",
            &format!("t={T},v1={V1_NEW},t=5"),
        ] {
            let e = verify(Some(h), BODY.as_bytes(), &s, T, 300).unwrap_err();
            let msg = e.to_string();
            assert!(
                !msg.contains("abab") && !msg.contains(&expected) && !msg.contains("whsec"),
                "{msg}"
            );
            assert!(!msg.contains(&T.to_string()), "{msg}");
        }
    }
}
