//! Cloudflare Access in front of `/admin` (interface §11): what the receiver checks in the JWT
//! that Access asserts, as pure functions with `now` as a parameter. The Worker fetches the
//! team's keys and verifies the RS256 signature with WebCrypto (`src/access.rs`); everything
//! else is here, in this order:
//!
//! 1. [`parse_token`]: a compact JWS, three base64url parts (unpadded, RFC 7515 §2). The
//!    header is read first and its `alg` decided before anything else (before any key is
//!    looked at): only `RS256`; `none`, `HS256` and every other value are
//!    [`AccessError::AlgorithmRefused`]. A header without a `kid` is malformed: Access always
//!    names its key, and a token that does not cannot be matched to one.
//! 2. The Worker looks the `kid` up in the team's keys ([`parse_jwks`]) and verifies
//!    [`Token::signing_input`] against [`Token::signature`].
//! 3. [`check_claims`]: `exp` required and not passed, `nbf`/`iat` (when present) not in the
//!    future, each with [`LEEWAY_SECONDS`]; `aud` (a string or an array) contains the
//!    configured audience; `iss` is the team domain; then the actor: `email`, or
//!    `common_name` for an Access service token.
//!
//! The time rules are PyJWT's, so the independent vectors (tests/vectors/
//! make_access_vectors.py) agree to the second: expired when `exp <= now - leeway`, not yet
//! valid when `nbf > now + leeway` or `iat > now + leeway`.

pub mod keys;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::Value;

/// Clock skew allowed each way on `exp`, `nbf` and `iat` (interface §11).
pub const LEEWAY_SECONDS: i64 = 60;

/// The only algorithm admitted: Access signs with RS256 (RSASSA-PKCS1-v1_5, SHA-256).
pub const ALGORITHM: &str = "RS256";

/// The longest token read (a header's worth; Access tokens are about 1 KB). Longer is
/// malformed, not parsed.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// The smallest RSA modulus a team key may have; shorter keys in the JWKS are skipped.
pub const MIN_RSA_BITS: usize = 2048;

/// Where a team's signing keys are served, below the team domain.
pub const CERTS_PATH: &str = "/cdn-cgi/access/certs";

/// The cookie Access sets for a browser session.
pub const COOKIE_NAME: &str = "CF_Authorization";

/// The header Access adds to every request it forwards.
pub const HEADER_NAME: &str = "Cf-Access-Jwt-Assertion";

/// Why an Access token was refused. Each has its own code; each is a 401 on the admin API,
/// [`AccessError::KeysUnavailable`] (the team's keys could not be read) too: interface §11
/// makes every failure 401. Messages never echo the configured audience or team domain, nor
/// the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccessError {
    #[error("no Access token: neither a Cf-Access-Jwt-Assertion header nor a CF_Authorization cookie (nor a bearer token)")]
    Missing,
    #[error("the Access token is malformed: {0}")]
    Malformed(&'static str),
    #[error("the Access token's algorithm {0} is refused: only RS256 is accepted")]
    AlgorithmRefused(String),
    #[error("the Access token was signed by a key (kid {0}) that is not among the team's keys")]
    KeyUnknown(String),
    #[error("the Access token's signature does not verify")]
    SignatureInvalid,
    #[error("the Access token has expired (exp)")]
    Expired,
    #[error("the Access token is not valid yet ({0} is in the future)")]
    NotYetValid(&'static str),
    #[error("the Access token is not for this application (aud does not contain ACCESS_AUD)")]
    AudienceMismatch,
    #[error("the Access token was not issued by this team (iss is not ACCESS_TEAM_DOMAIN)")]
    IssuerMismatch,
    #[error("the Access token names no actor (neither email nor common_name)")]
    ActorMissing,
    #[error("the team's signing keys could not be read: {0}")]
    KeysUnavailable(String),
}

impl AccessError {
    pub fn code(&self) -> &'static str {
        match self {
            AccessError::Missing => "access_token_missing",
            AccessError::Malformed(_) => "access_token_malformed",
            AccessError::AlgorithmRefused(_) => "access_algorithm_refused",
            AccessError::KeyUnknown(_) => "access_key_unknown",
            AccessError::SignatureInvalid => "access_signature_invalid",
            AccessError::Expired => "access_token_expired",
            AccessError::NotYetValid(_) => "access_token_not_yet_valid",
            AccessError::AudienceMismatch => "access_audience_mismatch",
            AccessError::IssuerMismatch => "access_issuer_mismatch",
            AccessError::ActorMissing => "access_actor_missing",
            AccessError::KeysUnavailable(_) => "access_keys_unavailable",
        }
    }

    /// A `kid` not among the team's keys, said as `shown` says what the sender chose.
    pub fn key_unknown(kid: &str) -> Self {
        AccessError::KeyUnknown(shown(kid))
    }

    /// Every code, for tests and documentation.
    pub const CODES: [&'static str; 11] = [
        "access_token_missing",
        "access_token_malformed",
        "access_algorithm_refused",
        "access_key_unknown",
        "access_signature_invalid",
        "access_token_expired",
        "access_token_not_yet_valid",
        "access_audience_mismatch",
        "access_issuer_mismatch",
        "access_actor_missing",
        "access_keys_unavailable",
    ];
}

/// A value the token's sender chose, fit to be said in a message: printable ASCII, at most
/// 64 characters, in quotes.
fn shown(v: &str) -> String {
    let cut: String = v
        .chars()
        .take(64)
        .map(|c| if c.is_ascii_graphic() { c } else { '?' })
        .collect();
    format!("\"{cut}\"")
}

// ---------------------------------------------------------------- configuration

/// Access as configured: the team domain (normalised, see [`parse_team_domain`]) and the
/// application's audience tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessConfig {
    pub team_domain: String,
    pub audience: String,
    /// `http://` on a loopback host: a development value (interface §4), never deployed.
    pub development: bool,
}

impl AccessConfig {
    /// `{ACCESS_TEAM_DOMAIN}/cdn-cgi/access/certs`.
    pub fn certs_url(&self) -> String {
        format!("{}{CERTS_PATH}", self.team_domain)
    }
}

/// What `ACCESS_TEAM_DOMAIN` and `ACCESS_AUD` make of Access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessSetting {
    /// Neither is set: Access is not used.
    Off,
    On(AccessConfig),
    /// One is set without the other, or the domain cannot be used: Access is off, and this
    /// says why (a configuration warning, never silent).
    Invalid(String),
}

/// Reads the two vars (blank counts as unset).
pub fn setting(team_domain: Option<&str>, audience: Option<&str>) -> AccessSetting {
    fn clean(v: Option<&str>) -> Option<&str> {
        v.map(str::trim).filter(|v| !v.is_empty())
    }
    match (clean(team_domain), clean(audience)) {
        (None, None) => AccessSetting::Off,
        (Some(_), None) => AccessSetting::Invalid(
            "ACCESS_TEAM_DOMAIN is set but ACCESS_AUD is not: Cloudflare Access is off (set both)"
                .into(),
        ),
        (None, Some(_)) => AccessSetting::Invalid(
            "ACCESS_AUD is set but ACCESS_TEAM_DOMAIN is not: Cloudflare Access is off (set both)"
                .into(),
        ),
        (Some(domain), Some(audience)) => match parse_team_domain(domain) {
            Ok((team_domain, development)) => AccessSetting::On(AccessConfig {
                team_domain,
                audience: audience.to_string(),
                development,
            }),
            Err(why) => AccessSetting::Invalid(format!("{why}: Cloudflare Access is off")),
        },
    }
}

/// Normalises a team domain to the origin Access writes in `iss`: `https://<team>.
/// cloudflareaccess.com`, lowercase, no trailing slash. A bare host (`acme.cloudflareaccess.com`)
/// means `https://`; trailing slashes are dropped (`https://acme.cloudflareaccess.com/` is the
/// same domain); a path, query or fragment is refused (the keys live at the origin's
/// `/cdn-cgi/access/certs`). It must be `https`, or plain `http` to a loopback host, a
/// development value where a test serves its own keys (interface §4, §11): keys fetched over
/// plain http from anywhere else could be replaced on the way. Returns the origin and whether
/// it is such a development value.
pub fn parse_team_domain(raw: &str) -> Result<(String, bool), String> {
    let raw = raw.trim();
    let with_scheme = if raw.contains("://") {
        raw.to_string()
    } else {
        format!("https://{raw}")
    };
    let origin = with_scheme.trim_end_matches('/').to_ascii_lowercase();
    let rest = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"))
        .ok_or("ACCESS_TEAM_DOMAIN is not an https URL")?;
    if rest.is_empty() || rest.contains(['/', '?', '#', '@']) || rest.contains(char::is_whitespace)
    {
        return Err(
            "ACCESS_TEAM_DOMAIN is not an origin such as https://<team>.cloudflareaccess.com"
                .into(),
        );
    }
    if !crate::outbound::may_carry_credentials(&origin) {
        return Err(
            "ACCESS_TEAM_DOMAIN is not an https URL (plain http only to a loopback host, in development)"
                .into(),
        );
    }
    if let Some(why) = crate::outbound::malformed(&origin) {
        return Err(format!(
            "ACCESS_TEAM_DOMAIN is not a URL that can be fetched: it {why}"
        ));
    }
    let development = origin.starts_with("http://");
    Ok((origin, development))
}

// ---------------------------------------------------------------- the token

/// The JOSE header, as far as it is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub alg: String,
    pub kid: String,
}

/// The claims this receiver reads; the others are ignored.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Claims {
    /// `aud` as a list (a single string is a list of one)
    pub aud: Option<Vec<String>>,
    pub iss: Option<String>,
    pub exp: Option<f64>,
    pub nbf: Option<f64>,
    pub iat: Option<f64>,
    pub email: Option<String>,
    pub common_name: Option<String>,
}

/// A parsed compact JWS whose algorithm is RS256: what the Worker needs to verify it.
#[derive(Debug, Clone, PartialEq)]
pub struct Token<'a> {
    pub header: Header,
    pub claims: Claims,
    signing_input: &'a str,
    signature: Vec<u8>,
}

impl Token<'_> {
    /// `BASE64URL(header) "." BASE64URL(payload)`, the bytes the signature covers.
    pub fn signing_input(&self) -> &[u8] {
        self.signing_input.as_bytes()
    }

    /// The signature's bytes (base64url-decoded).
    pub fn signature(&self) -> &[u8] {
        &self.signature
    }
}

fn decode_part(part: &str, what: &'static str) -> Result<Vec<u8>, AccessError> {
    URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| AccessError::Malformed(what))
}

/// Parses a compact JWS and applies the algorithm rule. See the module's documentation.
pub fn parse_token(token: &str) -> Result<Token<'_>, AccessError> {
    let token = token.trim();
    if token.is_empty() {
        return Err(AccessError::Missing);
    }
    if token.len() > MAX_TOKEN_BYTES {
        return Err(AccessError::Malformed("longer than 16 KiB"));
    }
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AccessError::Malformed(
            "not three base64url parts separated by dots",
        ));
    };
    let header_bytes = decode_part(h, "the header is not base64url")?;
    let header: Value = serde_json::from_slice(&header_bytes)
        .map_err(|_| AccessError::Malformed("the header is not JSON"))?;
    let header = header
        .as_object()
        .ok_or(AccessError::Malformed("the header is not a JSON object"))?;
    // the algorithm first, before anything is looked up with what the token says
    let alg = match header.get("alg") {
        Some(Value::String(a)) => a.as_str(),
        Some(_) => return Err(AccessError::Malformed("the header's alg is not a string")),
        None => return Err(AccessError::Malformed("the header has no alg")),
    };
    if alg != ALGORITHM {
        return Err(AccessError::AlgorithmRefused(shown(alg)));
    }
    // RFC 7515 §4.1.11: an extension the recipient does not understand must be refused
    if header.contains_key("crit") {
        return Err(AccessError::Malformed(
            "the header has crit extensions, which are not supported",
        ));
    }
    let kid = match header.get("kid") {
        Some(Value::String(k)) if !k.is_empty() => k.clone(),
        Some(Value::String(_)) | None => {
            return Err(AccessError::Malformed("the header has no kid"))
        }
        Some(_) => return Err(AccessError::Malformed("the header's kid is not a string")),
    };
    let claims_bytes = decode_part(p, "the payload is not base64url")?;
    let claims = parse_claims(&claims_bytes)?;
    let signature = decode_part(s, "the signature is not base64url")?;
    if signature.is_empty() {
        return Err(AccessError::Malformed("the signature is empty"));
    }
    Ok(Token {
        header: Header {
            alg: alg.to_string(),
            kid,
        },
        claims,
        signing_input: &token[..h.len() + 1 + p.len()],
        signature,
    })
}

/// The registered claims read from the payload object. Read from the `Value` by hand rather
/// than derived: serde's untagged enum (`aud` is a string or an array, RFC 7519 §4.1.3) and a
/// second pass over the value cost the wasm more than this does.
fn parse_claims(bytes: &[u8]) -> Result<Claims, AccessError> {
    const WRONG_TYPE: AccessError = AccessError::Malformed(
        "a registered claim has the wrong type (exp, nbf, iat numbers; iss, email, common_name strings; aud a string or an array of strings)",
    );
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|_| AccessError::Malformed("the payload is not JSON"))?;
    let Value::Object(map) = value else {
        return Err(AccessError::Malformed("the payload is not a JSON object"));
    };
    let number = |name: &str| match map.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_f64().map(Some).ok_or(WRONG_TYPE),
        Some(_) => Err(WRONG_TYPE),
    };
    let string = |name: &str| match map.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(WRONG_TYPE),
    };
    let aud = match map.get("aud") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(vec![s.clone()]),
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .map(|a| a.as_str().map(str::to_string).ok_or(WRONG_TYPE))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => return Err(WRONG_TYPE),
    };
    Ok(Claims {
        aud,
        iss: string("iss")?,
        exp: number("exp")?,
        nbf: number("nbf")?,
        iat: number("iat")?,
        email: string("email")?,
        common_name: string("common_name")?,
    })
}

/// Who the token speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// a person signed in through the team's identity provider: their `email`
    User(String),
    /// an Access service token (scripts): its `common_name` (the client id)
    ServiceToken(String),
}

impl Actor {
    pub fn name(&self) -> &str {
        match self {
            Actor::User(n) | Actor::ServiceToken(n) => n,
        }
    }
}

/// The claims rule (interface §11), after the signature has been verified. `now` in Unix
/// seconds.
pub fn check_claims(
    claims: &Claims,
    config: &AccessConfig,
    now: i64,
) -> Result<Actor, AccessError> {
    let now = now as f64;
    let leeway = LEEWAY_SECONDS as f64;
    let exp = claims
        .exp
        .ok_or(AccessError::Malformed("the payload has no exp"))?;
    if exp <= now - leeway {
        return Err(AccessError::Expired);
    }
    if claims.nbf.is_some_and(|nbf| nbf > now + leeway) {
        return Err(AccessError::NotYetValid("nbf"));
    }
    if claims.iat.is_some_and(|iat| iat > now + leeway) {
        return Err(AccessError::NotYetValid("iat"));
    }
    let audience_ok = claims
        .aud
        .as_ref()
        .is_some_and(|aud| aud.iter().any(|a| a == &config.audience));
    if !audience_ok {
        return Err(AccessError::AudienceMismatch);
    }
    // Access writes the team domain without a trailing slash; one is tolerated, as the
    // configured value's is, and the scheme and host compare without regard to case
    let issuer_ok = claims.iss.as_deref().is_some_and(|iss| {
        iss.trim_end_matches('/')
            .eq_ignore_ascii_case(&config.team_domain)
    });
    if !issuer_ok {
        return Err(AccessError::IssuerMismatch);
    }
    let present = |v: &Option<String>| {
        v.as_deref()
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    if let Some(email) = present(&claims.email) {
        return Ok(Actor::User(email));
    }
    if let Some(name) = present(&claims.common_name) {
        return Ok(Actor::ServiceToken(name));
    }
    Err(AccessError::ActorMissing)
}

// ---------------------------------------------------------------- the team's keys

/// One RSA public key of the team, as JWK members (base64url, unpadded) for
/// `crypto.subtle.importKey('jwk', …)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jwk {
    pub kid: String,
    pub n: String,
    pub e: String,
}

impl Jwk {
    /// The modulus' bytes, big-endian.
    pub fn modulus(&self) -> Vec<u8> {
        URL_SAFE_NO_PAD.decode(&self.n).unwrap_or_default()
    }

    /// The public exponent's bytes, big-endian.
    pub fn exponent(&self) -> Vec<u8> {
        URL_SAFE_NO_PAD.decode(&self.e).unwrap_or_default()
    }
}

/// Bits in a big-endian unsigned integer.
fn bit_length(bytes: &[u8]) -> usize {
    match bytes.iter().position(|b| *b != 0) {
        Some(i) => (bytes.len() - i) * 8 - bytes[i].leading_zeros() as usize,
        None => 0,
    }
}

/// Parses `{ACCESS_TEAM_DOMAIN}/cdn-cgi/access/certs` as Cloudflare serves it:
/// `{"keys":[{"kid","kty":"RSA","alg":"RS256","use":"sig","e","n"},…],
/// "public_cert":{"kid","cert"}, "public_certs":[{"kid","cert"},…]}`. Only `keys` is read (the
/// PEM certificates say the same keys again); a key is kept when it is RSA, for RS256 (or no
/// `alg`), for signatures (or no `use`), with a `kid`, and a modulus of at least
/// [`MIN_RSA_BITS`]; others are skipped. No usable key at all is an error.
pub fn parse_jwks(text: &str) -> Result<Vec<Jwk>, AccessError> {
    let doc: Value = serde_json::from_str(text).map_err(|_| {
        AccessError::KeysUnavailable("the certs document is not JSON with a keys array".into())
    })?;
    let Some(listed) = doc.get("keys").and_then(Value::as_array) else {
        return Err(AccessError::KeysUnavailable(
            "the certs document is not JSON with a keys array".into(),
        ));
    };
    let str_of = |k: &Value, name: &str| k.get(name).and_then(Value::as_str).map(str::to_string);
    let mut keys = Vec::new();
    for k in listed {
        let usable = str_of(k, "kty").as_deref() == Some("RSA")
            && str_of(k, "alg").is_none_or(|a| a == ALGORITHM)
            && str_of(k, "use").is_none_or(|u| u == "sig");
        let (Some(kid), Some(n), Some(e)) = (str_of(k, "kid"), str_of(k, "n"), str_of(k, "e"))
        else {
            continue;
        };
        if !usable || kid.is_empty() {
            continue;
        }
        let (Ok(n_bytes), Ok(e_bytes)) = (URL_SAFE_NO_PAD.decode(&n), URL_SAFE_NO_PAD.decode(&e))
        else {
            continue;
        };
        if bit_length(&n_bytes) < MIN_RSA_BITS || bit_length(&e_bytes) < 2 {
            continue;
        }
        if keys.iter().any(|have: &Jwk| have.kid == kid) {
            continue;
        }
        keys.push(Jwk { kid, n, e });
    }
    if keys.is_empty() {
        return Err(AccessError::KeysUnavailable(
            "the certs document holds no RSA signing key".into(),
        ));
    }
    Ok(keys)
}

// ---------------------------------------------------------------- the request

/// The value of cookie `name` in a `Cookie` header (RFC 6265 §4.2.1: `name=value` pairs
/// separated by `;`), the first non-empty one; quotes around the value are removed. A `,`
/// separates too: a request whose cookies came in two header fields reaches the Worker with
/// them joined by `, ` (a cookie's value holds no comma, §4.1.1), and a cookie missed there
/// let a cross-site write through as if no cookie had come.
pub fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header
        .split([';', ','])
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(k, _)| k.trim() == name)
        .map(|(_, v)| {
            let v = v.trim();
            v.strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v)
        })
        .find(|v| !v.is_empty())
}

/// The origin (`scheme://host[:port]`, lowercase) of an absolute URL.
pub fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    if scheme.is_empty() || authority.is_empty() {
        return None;
    }
    Some(format!("{scheme}://{authority}").to_ascii_lowercase())
}

/// Whether a write admitted by the Access cookie comes from this origin's own page (interface
/// §11): `Sec-Fetch-Site: same-origin` (`same-site` is another origin), or an `Origin` equal to
/// the request's own; either one is enough, as §11 says. Neither: refused.
pub fn same_origin_write(sec_fetch_site: Option<&str>, origin: Option<&str>, own: &str) -> bool {
    let site = sec_fetch_site.is_some_and(|s| s.trim().eq_ignore_ascii_case("same-origin"));
    site || origin.is_some_and(|o| o.trim().trim_end_matches('/').eq_ignore_ascii_case(own))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(v: &str) -> String {
        URL_SAFE_NO_PAD.encode(v)
    }

    fn token(header: &str, payload: &str) -> String {
        format!("{}.{}.{}", b64(header), b64(payload), b64("sig"))
    }

    fn config() -> AccessConfig {
        AccessConfig {
            team_domain: "https://acme.cloudflareaccess.com".into(),
            audience: "aud-tag".into(),
            development: false,
        }
    }

    const NOW: i64 = 1_764_450_000;

    fn claims() -> Claims {
        Claims {
            aud: Some(vec!["aud-tag".into()]),
            iss: Some("https://acme.cloudflareaccess.com".into()),
            exp: Some((NOW + 600) as f64),
            nbf: Some(NOW as f64),
            iat: Some(NOW as f64),
            email: Some("ops@example.com".into()),
            common_name: None,
        }
    }

    #[test]
    fn codes_are_distinct_snake_case_and_listed() {
        let all = [
            AccessError::Missing,
            AccessError::Malformed("x"),
            AccessError::AlgorithmRefused("x".into()),
            AccessError::KeyUnknown("x".into()),
            AccessError::SignatureInvalid,
            AccessError::Expired,
            AccessError::NotYetValid("nbf"),
            AccessError::AudienceMismatch,
            AccessError::IssuerMismatch,
            AccessError::ActorMissing,
            AccessError::KeysUnavailable("x".into()),
        ];
        let codes: Vec<&str> = all.iter().map(AccessError::code).collect();
        assert_eq!(codes, AccessError::CODES);
        // what the sender chose is said printable and cut short
        assert_eq!(
            AccessError::key_unknown(&format!("k\n{}", "x".repeat(100))),
            AccessError::KeyUnknown(format!("\"k?{}\"", "x".repeat(62)))
        );
        let mut unique = codes.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), codes.len());
        assert!(codes
            .iter()
            .all(|c| c.starts_with("access_")
                && c.chars().all(|c| c.is_ascii_lowercase() || c == '_')));
    }

    #[test]
    fn malformed_tokens_each_say_why() {
        let rs = r#"{"alg":"RS256","kid":"k1"}"#;
        let ok_payload = r#"{"exp":1}"#;
        let cases: Vec<(String, AccessError)> = vec![
            ("".into(), AccessError::Missing),
            ("   ".into(), AccessError::Missing),
            (
                "garbage".into(),
                AccessError::Malformed("not three base64url parts separated by dots"),
            ),
            (
                "a.b".into(),
                AccessError::Malformed("not three base64url parts separated by dots"),
            ),
            (
                "a.b.c.d".into(),
                AccessError::Malformed("not three base64url parts separated by dots"),
            ),
            (
                "!!.b.c".into(),
                AccessError::Malformed("the header is not base64url"),
            ),
            // padding is not base64url as JWS uses it (RFC 7515 §2)
            (
                format!("{}=.{}.{}", b64(rs), b64(ok_payload), b64("s")),
                AccessError::Malformed("the header is not base64url"),
            ),
            (
                format!("{}.{}.{}", b64("not json"), b64(ok_payload), b64("s")),
                AccessError::Malformed("the header is not JSON"),
            ),
            (
                format!("{}.{}.{}", b64("[1]"), b64(ok_payload), b64("s")),
                AccessError::Malformed("the header is not a JSON object"),
            ),
            (
                token(r#"{"kid":"k1"}"#, ok_payload),
                AccessError::Malformed("the header has no alg"),
            ),
            (
                token(r#"{"alg":7,"kid":"k1"}"#, ok_payload),
                AccessError::Malformed("the header's alg is not a string"),
            ),
            (
                token(r#"{"alg":"RS256"}"#, ok_payload),
                AccessError::Malformed("the header has no kid"),
            ),
            (
                token(r#"{"alg":"RS256","kid":""}"#, ok_payload),
                AccessError::Malformed("the header has no kid"),
            ),
            (
                token(r#"{"alg":"RS256","kid":5}"#, ok_payload),
                AccessError::Malformed("the header's kid is not a string"),
            ),
            (
                token(r#"{"alg":"RS256","kid":"k","crit":["b64"]}"#, ok_payload),
                AccessError::Malformed("the header has crit extensions, which are not supported"),
            ),
            (
                format!("{}.{}.{}", b64(rs), "***", b64("s")),
                AccessError::Malformed("the payload is not base64url"),
            ),
            (
                token(rs, "nope"),
                AccessError::Malformed("the payload is not JSON"),
            ),
            (
                token(rs, "[]"),
                AccessError::Malformed("the payload is not a JSON object"),
            ),
            (
                format!("{}.{}.", b64(rs), b64(ok_payload)),
                AccessError::Malformed("the signature is empty"),
            ),
            (
                format!("{}.{}.%%", b64(rs), b64(ok_payload)),
                AccessError::Malformed("the signature is not base64url"),
            ),
            (
                "x".repeat(MAX_TOKEN_BYTES + 1),
                AccessError::Malformed("longer than 16 KiB"),
            ),
        ];
        for (t, want) in cases {
            assert_eq!(parse_token(&t).map(|_| ()), Err(want.clone()), "{t:.60}");
        }
        for bad in [
            r#"{"exp":"soon"}"#,
            r#"{"aud":5}"#,
            r#"{"aud":["a",1]}"#,
            r#"{"iss":1}"#,
            r#"{"email":true}"#,
        ] {
            assert!(
                matches!(parse_token(&token(rs, bad)), Err(AccessError::Malformed(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn only_rs256_is_accepted_and_decided_first() {
        for alg in [
            "none", "None", "HS256", "RS384", "RS512", "ES256", "PS256", "EdDSA", "rs256", "",
        ] {
            // no kid and a payload that is not even JSON: the algorithm is refused before
            let t = format!(
                "{}.{}.",
                b64(&format!(r#"{{"alg":"{alg}"}}"#)),
                b64("not json")
            );
            assert_eq!(
                parse_token(&t).map(|_| ()),
                Err(AccessError::AlgorithmRefused(format!("\"{alg}\""))),
                "{alg}"
            );
        }
        // what the sender chose is said cut short and printable only
        let long = format!(
            "{}.{}.",
            b64(&format!(r#"{{"alg":"{}\n"}}"#, "A".repeat(100))),
            b64("{}")
        );
        match parse_token(&long) {
            Err(AccessError::AlgorithmRefused(shown)) => {
                assert_eq!(shown, format!("\"{}\"", "A".repeat(64)));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_good_token_exposes_what_webcrypto_verifies() {
        let header = r#"{"alg":"RS256","kid":"k1","typ":"JWT"}"#;
        let payload = r#"{"aud":"aud-tag","iss":"https://acme.cloudflareaccess.com","exp":1.5e9,"email":"a@b.c","extra":{"x":1}}"#;
        let t = token(header, payload);
        let padded = format!(" {t}\n");
        let parsed = parse_token(&padded).unwrap();
        assert_eq!(
            parsed.header,
            Header {
                alg: "RS256".into(),
                kid: "k1".into()
            }
        );
        assert_eq!(
            parsed.signing_input(),
            format!("{}.{}", b64(header), b64(payload)).as_bytes()
        );
        assert_eq!(parsed.signature(), b"sig");
        assert_eq!(parsed.claims.aud, Some(vec!["aud-tag".to_string()]));
        assert_eq!(parsed.claims.exp, Some(1.5e9));
        assert_eq!(parsed.claims.email.as_deref(), Some("a@b.c"));
    }

    #[test]
    fn the_time_rules_have_60_seconds_of_leeway_each_way() {
        let c = config();
        let at = |f: &dyn Fn(&mut Claims)| {
            let mut cl = claims();
            f(&mut cl);
            check_claims(&cl, &c, NOW)
        };
        assert_eq!(at(&|_| {}), Ok(Actor::User("ops@example.com".into())));
        assert!(at(&|cl| cl.exp = Some((NOW - 59) as f64)).is_ok());
        assert_eq!(
            at(&|cl| cl.exp = Some((NOW - 60) as f64)),
            Err(AccessError::Expired)
        );
        assert_eq!(
            at(&|cl| cl.exp = Some((NOW - 3600) as f64)),
            Err(AccessError::Expired)
        );
        assert_eq!(
            at(&|cl| cl.exp = None),
            Err(AccessError::Malformed("the payload has no exp"))
        );
        assert!(at(&|cl| cl.nbf = Some((NOW + 60) as f64)).is_ok());
        assert_eq!(
            at(&|cl| cl.nbf = Some((NOW + 61) as f64)),
            Err(AccessError::NotYetValid("nbf"))
        );
        assert!(at(&|cl| cl.iat = Some((NOW + 60) as f64)).is_ok());
        assert_eq!(
            at(&|cl| cl.iat = Some((NOW + 61) as f64)),
            Err(AccessError::NotYetValid("iat"))
        );
        // nbf and iat are optional
        assert!(at(&|cl| {
            cl.nbf = None;
            cl.iat = None
        })
        .is_ok());
    }

    #[test]
    fn audience_issuer_and_actor() {
        let c = config();
        let at = |f: &dyn Fn(&mut Claims)| {
            let mut cl = claims();
            f(&mut cl);
            check_claims(&cl, &c, NOW)
        };
        assert!(at(&|cl| cl.aud = Some(vec!["other".into(), "aud-tag".into()])).is_ok());
        assert_eq!(
            at(&|cl| cl.aud = Some(vec!["other".into()])),
            Err(AccessError::AudienceMismatch)
        );
        assert_eq!(
            at(&|cl| cl.aud = Some(vec![])),
            Err(AccessError::AudienceMismatch)
        );
        assert_eq!(
            at(&|cl| cl.aud = Some(vec!["AUD-TAG".into()])),
            Err(AccessError::AudienceMismatch)
        );
        assert_eq!(at(&|cl| cl.aud = None), Err(AccessError::AudienceMismatch));
        assert!(at(&|cl| cl.iss = Some("https://acme.cloudflareaccess.com/".into())).is_ok());
        assert!(at(&|cl| cl.iss = Some("https://ACME.cloudflareaccess.com".into())).is_ok());
        for iss in [
            "https://evil.cloudflareaccess.com",
            "http://acme.cloudflareaccess.com",
            "https://acme.cloudflareaccess.com.evil",
            "https://acme.cloudflareaccess.com/x",
            "",
        ] {
            assert_eq!(
                at(&|cl| cl.iss = Some(iss.into())),
                Err(AccessError::IssuerMismatch),
                "{iss}"
            );
        }
        assert_eq!(at(&|cl| cl.iss = None), Err(AccessError::IssuerMismatch));
        assert_eq!(
            at(&|cl| {
                cl.email = Some(" ".into());
                cl.common_name = Some("abc.access".into())
            }),
            Ok(Actor::ServiceToken("abc.access".into()))
        );
        assert_eq!(
            at(&|cl| {
                cl.email = None;
                cl.common_name = None
            }),
            Err(AccessError::ActorMissing)
        );
    }

    #[test]
    fn the_two_vars_turn_access_on_only_together() {
        assert_eq!(setting(None, None), AccessSetting::Off);
        assert_eq!(setting(Some(" "), Some("")), AccessSetting::Off);
        assert!(
            matches!(setting(Some("https://a.cloudflareaccess.com"), None), AccessSetting::Invalid(w) if w.contains("ACCESS_AUD is not"))
        );
        assert!(
            matches!(setting(None, Some("aud")), AccessSetting::Invalid(w) if w.contains("ACCESS_TEAM_DOMAIN is not"))
        );
        assert_eq!(
            setting(Some(" https://Acme.cloudflareaccess.com/ "), Some(" aud ")),
            AccessSetting::On(AccessConfig {
                team_domain: "https://acme.cloudflareaccess.com".into(),
                audience: "aud".into(),
                development: false,
            })
        );
        match setting(Some("http://127.0.0.1:9999"), Some("aud")) {
            AccessSetting::On(c) => {
                assert!(c.development);
                assert_eq!(c.certs_url(), "http://127.0.0.1:9999/cdn-cgi/access/certs");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn team_domains() {
        let ok = |raw: &str| parse_team_domain(raw).map(|(d, _)| d);
        assert_eq!(
            ok("acme.cloudflareaccess.com"),
            Ok("https://acme.cloudflareaccess.com".into())
        );
        assert_eq!(
            ok("https://acme.cloudflareaccess.com//"),
            Ok("https://acme.cloudflareaccess.com".into())
        );
        assert_eq!(
            ok("http://localhost:8799/"),
            Ok("http://localhost:8799".into())
        );
        assert_eq!(ok("http://[::1]:8799"), Ok("http://[::1]:8799".into()));
        for bad in [
            "http://acme.cloudflareaccess.com",
            "ftp://acme.example",
            "https://",
            "https://acme.cloudflareaccess.com/path",
            "https://a.example?x",
            "https://user@acme.example",
            "https://a b.example",
            "http://127.0.0.1@evil.example",
            "https://acme.cloudflareaccess.com:99999",
            "https://[zz]",
        ] {
            assert!(parse_team_domain(bad).is_err(), "{bad}");
        }
        assert!(parse_team_domain("http://acme.cloudflareaccess.com")
            .unwrap_err()
            .contains("not an https URL"));
    }

    fn jwk(kid: &str, bits: usize) -> Value {
        let mut n = vec![0u8; bits / 8];
        n[0] = 0x80;
        serde_json::json!({"kid": kid, "kty": "RSA", "alg": "RS256", "use": "sig", "e": "AQAB", "n": URL_SAFE_NO_PAD.encode(n)})
    }

    #[test]
    fn jwks_as_cloudflare_serves_it() {
        let doc = serde_json::json!({
            "keys": [
                jwk("k1", 2048),
                jwk("k2", 4096),
                jwk("short", 1024),
                {"kid": "ec", "kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"},
                {"kid": "enc", "kty": "RSA", "use": "enc", "e": "AQAB", "n": jwk("x", 2048)["n"]},
                {"kid": "ps", "kty": "RSA", "alg": "PS256", "e": "AQAB", "n": jwk("x", 2048)["n"]},
                {"kty": "RSA", "e": "AQAB", "n": jwk("x", 2048)["n"]},
                {"kid": "bad-n", "kty": "RSA", "e": "AQAB", "n": "***"},
                jwk("k1", 2048),
                {"kid": "no-alg", "kty": "RSA", "e": "AQAB", "n": jwk("x", 2048)["n"]},
            ],
            "public_cert": {"kid": "k2", "cert": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"},
            "public_certs": [
                {"kid": "k1", "cert": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"},
                {"kid": "k2", "cert": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}
            ]
        });
        let keys = parse_jwks(&doc.to_string()).unwrap();
        let kids: Vec<&str> = keys.iter().map(|k| k.kid.as_str()).collect();
        assert_eq!(kids, ["k1", "k2", "no-alg"]);
        assert_eq!(keys[0].exponent(), [1, 0, 1]);
        assert_eq!(keys[0].modulus().len(), 256);
        for bad in [
            "",
            "[]",
            "{}",
            r#"{"keys":{}}"#,
            r#"{"keys":[]}"#,
            r#"{"keys":[{"kty":"EC"}]}"#,
        ] {
            assert!(
                matches!(parse_jwks(bad), Err(AccessError::KeysUnavailable(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn cookies_origins_and_same_origin_writes() {
        assert_eq!(cookie("CF_Authorization=abc", COOKIE_NAME), Some("abc"));
        assert_eq!(
            cookie("a=1; CF_Authorization=x.y.z; b=2", COOKIE_NAME),
            Some("x.y.z")
        );
        assert_eq!(
            cookie("CF_Authorization=; CF_Authorization=\"q\"", COOKIE_NAME),
            Some("q")
        );
        assert_eq!(
            cookie("CF_AuthorizationX=abc; cf_authorization=abc", COOKIE_NAME),
            None
        );
        assert_eq!(cookie("", COOKIE_NAME), None);
        // two Cookie fields, joined by the runtime with ", "
        assert_eq!(
            cookie("a=1, CF_Authorization=x.y.z", COOKIE_NAME),
            Some("x.y.z")
        );
        assert_eq!(
            origin_of("http://127.0.0.1:8787/admin/api/x?y#z"),
            Some("http://127.0.0.1:8787".into())
        );
        assert_eq!(
            origin_of("https://Ops.Example.com"),
            Some("https://ops.example.com".into())
        );
        assert_eq!(origin_of("/relative"), None);
        let own = "https://ops.example.com";
        assert!(same_origin_write(Some("same-origin"), None, own));
        assert!(same_origin_write(
            Some("same-origin"),
            Some("https://evil.example"),
            own
        ));
        // either one is enough (§11): a matching Origin beside another Sec-Fetch-Site
        assert!(same_origin_write(Some("same-site"), Some(own), own));
        assert!(same_origin_write(Some("cross-site"), Some(own), own));
        assert!(!same_origin_write(Some("same-site"), None, own));
        assert!(!same_origin_write(
            Some("same-site"),
            Some("https://evil.example"),
            own
        ));
        assert!(!same_origin_write(Some("none"), None, own));
        assert!(same_origin_write(
            None,
            Some("https://ops.example.com"),
            own
        ));
        assert!(same_origin_write(
            None,
            Some("HTTPS://OPS.EXAMPLE.COM"),
            own
        ));
        assert!(!same_origin_write(None, Some("https://evil.example"), own));
        assert!(!same_origin_write(None, Some("null"), own));
        assert!(!same_origin_write(None, None, own));
    }
}
