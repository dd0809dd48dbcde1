//! Standard Webhooks signing and verification (interface §7: effects to the order system,
//! alerts), so that any Standard Webhooks library verifies what we send. No I/O.
//!
//! - Secret: `whsec_` + standard base64 of the key bytes (padding optional, as the reference
//!   libraries accept it either way). The HMAC key is the decoded bytes, not the string
//!   (unlike the Paymos inbound scheme in [`crate::signature`]).
//! - Headers: `webhook-id`, `webhook-timestamp` (unix seconds), `webhook-signature`.
//! - `webhook-signature` = `v1,<base64 of HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`; a
//!   header may carry several, separated by spaces (`v1,<a> v1,<b>`): any one matching is
//!   enough; entries of other versions are ignored.
//! - The timestamp must lie within the tolerance of now (default 300 s), both ways.
//!
//! As in the reference libraries, the MAC covers the timestamp as the decimal rendering of
//! the parsed integer, and the body as raw bytes.

use std::fmt;

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::{alphabet, Engine};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;
use thiserror::Error;

type HmacSha256 = Hmac<Sha256>;

/// Standard alphabet; `=` padding may be there or not (secrets and signatures alike).
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// What every Standard Webhooks secret starts with.
pub const SECRET_PREFIX: &str = "whsec_";
/// Default tolerance between `webhook-timestamp` and now, either way.
pub const DEFAULT_TOLERANCE_SECONDS: i64 = 300;
pub const HEADER_ID: &str = "webhook-id";
pub const HEADER_TIMESTAMP: &str = "webhook-timestamp";
pub const HEADER_SIGNATURE: &str = "webhook-signature";
/// Longest `webhook-signature` we parse (DoS bound; one entry is 47 bytes).
pub const MAX_SIGNATURE_HEADER_LEN: usize = 8 * 1024;
/// Most `v1` entries we try (DoS bound).
pub const MAX_SIGNATURES: usize = 32;

/// Why a secret string was refused. The secret itself is never part of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SecretError {
    #[error("a Standard Webhooks secret starts with \"whsec_\"")]
    MissingPrefix,
    #[error("the part after \"whsec_\" is not valid base64 (standard alphabet)")]
    BadBase64,
    #[error("the secret's key is empty")]
    EmptyKey,
}

/// A Standard Webhooks signing key (the decoded bytes). No `Display`; `Debug` is redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret {
    key: Vec<u8>,
}

impl WebhookSecret {
    /// Parses `whsec_<base64>`; surrounding whitespace is ignored.
    pub fn parse(s: &str) -> Result<Self, SecretError> {
        let b64 = s
            .trim()
            .strip_prefix(SECRET_PREFIX)
            .ok_or(SecretError::MissingPrefix)?;
        let key = LENIENT.decode(b64).map_err(|_| SecretError::BadBase64)?;
        if key.is_empty() {
            return Err(SecretError::EmptyKey);
        }
        Ok(WebhookSecret { key })
    }

    /// A secret from raw key bytes (e.g. freshly drawn from an RNG by the caller).
    pub fn from_key(key: &[u8]) -> Result<Self, SecretError> {
        if key.is_empty() {
            return Err(SecretError::EmptyKey);
        }
        Ok(WebhookSecret { key: key.to_vec() })
    }

    /// The `whsec_<base64>` form, to hand to the other side. Deliberately not `Display`.
    pub fn to_whsec(&self) -> String {
        format!("{SECRET_PREFIX}{}", STANDARD.encode(&self.key))
    }

    pub fn key_len(&self) -> usize {
        self.key.len()
    }

    fn mac(&self, msg_id: &str, timestamp: i64, body: &[u8]) -> [u8; 32] {
        let mut m = HmacSha256::new_from_slice(&self.key).expect("HMAC accepts keys of any length");
        m.update(msg_id.as_bytes());
        m.update(b".");
        m.update(timestamp.to_string().as_bytes());
        m.update(b".");
        m.update(body);
        m.finalize().into_bytes().into()
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret([REDACTED])")
    }
}

/// `v1,<base64 of HMAC-SHA256(key, "<msg_id>.<timestamp>.<body>")>`: the `webhook-signature`
/// value for one secret.
pub fn sign(secret: &WebhookSecret, msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    format!(
        "v1,{}",
        STANDARD.encode(secret.mac(msg_id, timestamp, body))
    )
}

/// The three headers for a request: `[(webhook-id, …), (webhook-timestamp, …),
/// (webhook-signature, …)]`, one `v1` entry per secret (several while rotating).
pub fn headers(
    secrets: &[&WebhookSecret],
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> [(&'static str, String); 3] {
    let signature = secrets
        .iter()
        .map(|s| sign(s, msg_id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ");
    [
        (HEADER_ID, msg_id.to_string()),
        (HEADER_TIMESTAMP, timestamp.to_string()),
        (HEADER_SIGNATURE, signature),
    ]
}

/// The three headers of a received request, as found (`None` = absent).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WebhookHeaders<'a> {
    pub id: Option<&'a str>,
    pub timestamp: Option<&'a str>,
    pub signature: Option<&'a str>,
}

impl<'a> WebhookHeaders<'a> {
    /// Picks the three headers out of `(name, value)` pairs, names compared
    /// case-insensitively; the first occurrence wins.
    pub fn from_pairs<I>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        let mut h = WebhookHeaders::default();
        for (name, value) in pairs {
            let slot = if name.eq_ignore_ascii_case(HEADER_ID) {
                &mut h.id
            } else if name.eq_ignore_ascii_case(HEADER_TIMESTAMP) {
                &mut h.timestamp
            } else if name.eq_ignore_ascii_case(HEADER_SIGNATURE) {
                &mut h.signature
            } else {
                continue;
            };
            if slot.is_none() {
                *slot = Some(value);
            }
        }
        h
    }
}

/// Why a request was refused. Fixed messages: header contents are never echoed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum VerifyError {
    #[error("header {0} missing or empty")]
    MissingHeader(&'static str),
    #[error("webhook-timestamp is not a decimal integer")]
    InvalidTimestamp,
    #[error("webhook-timestamp is too old")]
    TooOld,
    #[error("webhook-timestamp is too far in the future")]
    TooNew,
    #[error("webhook-signature has no usable v1 entry")]
    NoSignature,
    #[error("no signature matches")]
    Mismatch,
}

impl VerifyError {
    /// A stable code for JSON error replies.
    pub fn code(&self) -> &'static str {
        match self {
            VerifyError::MissingHeader(HEADER_ID) => "missing_webhook_id",
            VerifyError::MissingHeader(HEADER_TIMESTAMP) => "missing_webhook_timestamp",
            VerifyError::MissingHeader(_) => "missing_webhook_signature",
            VerifyError::InvalidTimestamp => "invalid_timestamp",
            VerifyError::TooOld | VerifyError::TooNew => "timestamp_out_of_tolerance",
            VerifyError::NoSignature => "signature_malformed",
            VerifyError::Mismatch => "signature_mismatch",
        }
    }
}

fn present<'a>(v: Option<&'a str>, name: &'static str) -> Result<&'a str, VerifyError> {
    match v.map(str::trim) {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(VerifyError::MissingHeader(name)),
    }
}

/// Verifies a request: the headers are present, the timestamp within `tolerance` seconds of
/// `now` (either way), and one `v1` entry of `webhook-signature` matches (constant-time
/// compare of the MAC bytes). Returns the timestamp.
pub fn verify(
    secret: &WebhookSecret,
    headers: &WebhookHeaders<'_>,
    body: &[u8],
    now: i64,
    tolerance: i64,
) -> Result<i64, VerifyError> {
    let id = present(headers.id, HEADER_ID)?;
    let ts_text = present(headers.timestamp, HEADER_TIMESTAMP)?;
    let signature = present(headers.signature, HEADER_SIGNATURE)?;
    if ts_text.len() > 19 || !ts_text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(VerifyError::InvalidTimestamp);
    }
    let timestamp: i64 = ts_text.parse().map_err(|_| VerifyError::InvalidTimestamp)?;
    if now.saturating_sub(timestamp) > tolerance {
        return Err(VerifyError::TooOld);
    }
    if timestamp.saturating_sub(now) > tolerance {
        return Err(VerifyError::TooNew);
    }
    if signature.len() > MAX_SIGNATURE_HEADER_LEN {
        return Err(VerifyError::NoSignature);
    }
    let expected = secret.mac(id, timestamp, body);
    let mut usable = 0usize;
    let mut matched = subtle::Choice::from(0u8);
    for entry in signature.split_ascii_whitespace() {
        let Some(("v1", b64)) = entry.split_once(',') else {
            continue;
        };
        let Ok(candidate) = LENIENT.decode(b64) else {
            continue;
        };
        usable += 1;
        if usable > MAX_SIGNATURES {
            break;
        }
        // lengths are public; the bytes are compared in constant time
        matched |= candidate.as_slice().ct_eq(&expected);
    }
    if usable == 0 {
        return Err(VerifyError::NoSignature);
    }
    if bool::from(matched) {
        Ok(timestamp)
    } else {
        Err(VerifyError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    fn s() -> WebhookSecret {
        WebhookSecret::parse(SECRET).unwrap()
    }

    fn h<'a>(id: &'a str, ts: &'a str, sig: &'a str) -> WebhookHeaders<'a> {
        WebhookHeaders {
            id: Some(id),
            timestamp: Some(ts),
            signature: Some(sig),
        }
    }

    #[test]
    fn secrets_parse_and_never_print() {
        let k = s();
        assert_eq!(k.key_len(), 24);
        assert_eq!(k.to_whsec(), SECRET);
        assert_eq!(format!("{k:?}"), "WebhookSecret([REDACTED])");
        assert_eq!(WebhookSecret::parse(&format!("  {SECRET}\n")).unwrap(), k);
        assert_eq!(
            WebhookSecret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            Err(SecretError::MissingPrefix)
        );
        for bad in [
            "whsec_not base64!",
            "whsec_Y",                 // no whole byte
            "whsec_YR==",              // non-zero trailing bits (not canonical)
            "whsec_test_new_6f1d2a9c", // a Paymos inbound secret, not base64
        ] {
            assert_eq!(
                WebhookSecret::parse(bad),
                Err(SecretError::BadBase64),
                "{bad}"
            );
        }
        assert_eq!(WebhookSecret::parse("whsec_"), Err(SecretError::EmptyKey));
        // unpadded base64 is accepted, as the reference libraries do
        let a = WebhookSecret::parse("whsec_YQ").unwrap();
        assert_eq!(a, WebhookSecret::parse("whsec_YQ==").unwrap());
        assert_eq!(a, WebhookSecret::from_key(b"a").unwrap());
        assert_eq!(a.to_whsec(), "whsec_YQ==");
        assert_eq!(WebhookSecret::from_key(&[]), Err(SecretError::EmptyKey));
        let e = WebhookSecret::parse("whsec_c2VjcmV0!!")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("c2VjcmV0"), "{e}");
    }

    #[test]
    fn sign_then_verify_and_tolerance() {
        let body = br#"{"id":"eff_1","kind":"fulfilment"}"#;
        let sig = sign(&s(), "eff_1", 1_700_000_000, body);
        assert!(sig.starts_with("v1,") && sig.len() == 3 + 44, "{sig}");
        let ok = |now| verify(&s(), &h("eff_1", "1700000000", &sig), body, now, 300);
        assert_eq!(ok(1_700_000_000), Ok(1_700_000_000));
        assert_eq!(ok(1_700_000_300), Ok(1_700_000_000));
        assert_eq!(ok(1_699_999_700), Ok(1_700_000_000));
        assert_eq!(ok(1_700_000_301), Err(VerifyError::TooOld));
        assert_eq!(ok(1_699_999_699), Err(VerifyError::TooNew));
        // tampering
        let v = |id, ts, sig: &str, body: &[u8]| {
            verify(&s(), &h(id, ts, sig), body, 1_700_000_000, 300)
        };
        assert_eq!(
            v("eff_2", "1700000000", &sig, body),
            Err(VerifyError::Mismatch)
        );
        assert_eq!(
            v("eff_1", "1700000001", &sig, body),
            Err(VerifyError::Mismatch)
        );
        assert_eq!(
            v("eff_1", "1700000000", &sig, b"{}"),
            Err(VerifyError::Mismatch)
        );
        let other = WebhookSecret::from_key(b"another key").unwrap();
        assert_eq!(
            verify(
                &other,
                &h("eff_1", "1700000000", &sig),
                body,
                1_700_000_000,
                300
            ),
            Err(VerifyError::Mismatch)
        );
    }

    #[test]
    fn signature_lists_versions_and_garbage() {
        let body = b"x";
        let good = sign(&s(), "m", 10, body);
        let decoy = sign(&WebhookSecret::from_key(b"decoy").unwrap(), "m", 10, body);
        let v = |sig: &str| verify(&s(), &h("m", "10", sig), body, 10, 300);
        assert_eq!(v(&format!("{decoy} {good}")), Ok(10));
        assert_eq!(v(&format!("{good} {decoy}")), Ok(10));
        assert_eq!(v(&format!("  v1a,abc   {decoy}\t{good} ")), Ok(10));
        assert_eq!(v(&decoy), Err(VerifyError::Mismatch));
        // another version carrying the right bytes does not count
        assert_eq!(
            v(&good.replacen("v1,", "v2,", 1)),
            Err(VerifyError::NoSignature)
        );
        assert_eq!(v("v1"), Err(VerifyError::NoSignature));
        assert_eq!(v("v1,!!!"), Err(VerifyError::NoSignature));
        // a truncated MAC (valid base64, wrong length) is a mismatch, never a prefix match
        let short = format!(
            "v1,{}",
            STANDARD.encode(&STANDARD.decode(&good[3..]).unwrap()[..16])
        );
        assert_eq!(v(&short), Err(VerifyError::Mismatch));
        // the DoS bounds
        let many = std::iter::repeat_n(decoy.as_str(), MAX_SIGNATURES)
            .chain([good.as_str()])
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(v(&many), Err(VerifyError::Mismatch));
        assert_eq!(v(&"v1,".repeat(4000)), Err(VerifyError::NoSignature));
    }

    #[test]
    fn headers_missing_or_malformed() {
        let sig = sign(&s(), "m", 10, b"");
        let base = h("m", "10", &sig);
        let v = |hd: WebhookHeaders| verify(&s(), &hd, b"", 10, 300);
        assert_eq!(v(base), Ok(10));
        for (hd, code) in [
            (WebhookHeaders { id: None, ..base }, "missing_webhook_id"),
            (
                WebhookHeaders {
                    id: Some(" "),
                    ..base
                },
                "missing_webhook_id",
            ),
            (
                WebhookHeaders {
                    timestamp: None,
                    ..base
                },
                "missing_webhook_timestamp",
            ),
            (
                WebhookHeaders {
                    signature: None,
                    ..base
                },
                "missing_webhook_signature",
            ),
            (
                WebhookHeaders {
                    timestamp: Some("-10"),
                    ..base
                },
                "invalid_timestamp",
            ),
            (
                WebhookHeaders {
                    timestamp: Some("1e3"),
                    ..base
                },
                "invalid_timestamp",
            ),
            (
                WebhookHeaders {
                    timestamp: Some("99999999999999999999"),
                    ..base
                },
                "invalid_timestamp",
            ),
        ] {
            assert_eq!(v(hd).unwrap_err().code(), code, "{hd:?}");
        }
        // a leading zero parses to the same number, signed as the number (as the libraries do)
        assert_eq!(
            v(WebhookHeaders {
                timestamp: Some("010"),
                ..base
            }),
            Ok(10)
        );
    }

    #[test]
    fn headers_round_trip() {
        let a = s();
        let b = WebhookSecret::from_key(b"new key during rotation").unwrap();
        let body = br#"{"a":1}"#;
        let hs = headers(&[&b, &a], "eff_9", 42, body);
        assert_eq!(hs[0], (HEADER_ID, "eff_9".to_string()));
        assert_eq!(hs[1], (HEADER_TIMESTAMP, "42".to_string()));
        assert_eq!(hs[2].1.split(' ').count(), 2);
        let pairs = [
            ("Content-Type", "application/json"),
            ("Webhook-Id", hs[0].1.as_str()),
            ("WEBHOOK-TIMESTAMP", hs[1].1.as_str()),
            ("webhook-signature", hs[2].1.as_str()),
            ("webhook-id", "ignored: the first one wins"),
        ];
        let got = WebhookHeaders::from_pairs(pairs);
        assert_eq!(got.id, Some("eff_9"));
        assert_eq!(verify(&a, &got, body, 42, 300), Ok(42));
        assert_eq!(verify(&b, &got, body, 42, 300), Ok(42));
    }
}
