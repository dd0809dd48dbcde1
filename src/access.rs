//! Who an admin request is (interface §11): the bearer token (`ADMIN_TOKEN`, for scripts), or
//! the JWT that Cloudflare Access asserts for an operator or a service token, checked against
//! the team's keys. The rules are the core's (`paymos_core::access`); this module reads the
//! request, fetches and caches the keys, and verifies RS256 with WebCrypto.
//!
//! - Access is on when `ACCESS_TEAM_DOMAIN` and `ACCESS_AUD` are both set; one without the
//!   other is a configuration warning (log line once per isolate, `/admin/api/metrics`) and
//!   Access stays off. The domain is `https`, or loopback `http` in development (a test's own
//!   JWKS stub); any other `http` is refused, said the same way.
//! - The admin surface is on when `ADMIN_TOKEN` or Access is configured, off (404) when
//!   neither is.
//! - Either credential admits (§11 admits a request by a valid Access token, and the bearer
//!   token keeps working beside it): a valid bearer token first; otherwise the
//!   `Cf-Access-Jwt-Assertion` header, else the `CF_Authorization` cookie, must hold a valid
//!   Access token, whatever else `Authorization` holds (a Basic header of a proxy in front, a
//!   stale token). Refused, the answer is the Access token's code; with no Access token, 401
//!   `unauthorized` when `Authorization` was sent or only the bearer token is configured, else
//!   `access_token_missing`.
//! - A write (any method but GET and HEAD) from a request that carries the cookie needs a
//!   same-origin request (`Sec-Fetch-Site: same-origin`, or an `Origin` equal to the
//!   request's own: either one, interface §11), else 403 `cross_site_request`. This holds when
//!   the header is present too: behind Access, the edge adds the header to every browser
//!   request that carries the cookie, so the header alone does not show that a script sent it.
//!
//! The keys: fetched from `{ACCESS_TEAM_DOMAIN}/cdn-cgi/access/certs` and kept per isolate;
//! when a request uses them, waits for another's fetch, fetches (within 5 s) or is refused is
//! the core's (`paymos_core::access::keys`: at most one fetch a minute for an unknown `kid` or
//! after a failure, again after an hour, a failed refresh keeping the keys held). Keys that
//! cannot be read at all are 401 `access_keys_unavailable`, as every other failure is (§11).

use crate::error::{AppError, AppResult};
use crate::{config, log, webcrypto};
use futures_util::future::{select, Either};
use paymos_core::access::keys::{KeyCache, Step, FETCH_TIMEOUT_MS};
use paymos_core::access::{
    self as rules, AccessConfig, AccessError, AccessSetting, Actor as TokenActor,
};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::cell::{OnceCell, RefCell};
use std::rc::Rc;
use std::time::Duration;
use subtle::ConstantTimeEq;
use wasm_bindgen::JsValue;
use worker::{
    AbortController, Delay, Env, Fetch, Headers, Method, Request, RequestInit, RequestRedirect,
    Response,
};

/// How an admin request was admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `Authorization: Bearer <ADMIN_TOKEN>`
    Token,
    /// the `Cf-Access-Jwt-Assertion` header
    AccessHeader,
    /// the `CF_Authorization` cookie
    AccessCookie,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Token => "token",
            Via::AccessHeader => "access_header",
            Via::AccessCookie => "access_cookie",
        }
    }
}

/// Who made an admin request: `token` for the bearer token, else the Access token's `email`
/// (or `common_name` for a service token). Handlers get it from the admission (the audit log
/// records it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub name: String,
    pub via: Via,
    /// an Access service token rather than a person
    pub service_token: bool,
}

impl Actor {
    fn token() -> Self {
        Actor {
            name: "token".into(),
            via: Via::Token,
            service_token: false,
        }
    }
}

// ---------------------------------------------------------------- configuration

thread_local! {
    static SETTING: OnceCell<Rc<AccessSetting>> = const { OnceCell::new() };
}

/// The two vars, read once per isolate (bindings do not change under a running isolate); a
/// configuration that leaves Access off, or a development domain, is logged then.
fn setting(env: &Env) -> Rc<AccessSetting> {
    if let Some(s) = SETTING.with(|s| s.get().cloned()) {
        return s;
    }
    let read = rules::setting(
        config::string(env, "ACCESS_TEAM_DOMAIN").as_deref(),
        config::string(env, "ACCESS_AUD").as_deref(),
    );
    if let Some(w) = warning_of(&read) {
        log::line("config", "-", "access", Some(&w));
    }
    let read = Rc::new(read);
    SETTING.with(|s| s.get_or_init(|| read).clone())
}

fn warning_of(setting: &AccessSetting) -> Option<String> {
    match setting {
        AccessSetting::Invalid(why) => Some(why.clone()),
        AccessSetting::On(c) if c.development => Some(format!(
            "ACCESS_TEAM_DOMAIN is {}, a loopback development value: a deployed worker needs https://<team>.cloudflareaccess.com",
            c.team_domain
        )),
        _ => None,
    }
}

/// Whether Access is on.
pub fn enabled(env: &Env) -> bool {
    matches!(*setting(env), AccessSetting::On(_))
}

/// What the Access configuration says is wrong or development-only, for `/admin/api/metrics`.
pub fn warning(env: &Env) -> Option<String> {
    warning_of(&setting(env))
}

/// Whether the admin surface (the API and the page) is on: `ADMIN_TOKEN` or Access.
pub fn admin_enabled(env: &Env) -> bool {
    config::admin_token(env).is_some() || enabled(env)
}

// ---------------------------------------------------------------- admission

/// Compares digests so that neither the content nor the length of the token leaks through timing.
pub fn token_matches(presented: &str, expected: &str) -> bool {
    let a = Sha256::digest(presented.as_bytes());
    let b = Sha256::digest(expected.as_bytes());
    a.ct_eq(&b).into()
}

/// Whether an `Authorization` header carries the bearer token.
fn bearer(header: &str, expected: &str) -> bool {
    // the scheme's name is case-insensitive (RFC 9110 §11.1); the token is compared as sent
    let presented = match header.get(..7) {
        Some(scheme) if scheme.eq_ignore_ascii_case("Bearer ") => &header[7..],
        _ => "",
    };
    !presented.is_empty() && token_matches(presented, expected)
}

/// Any method but GET and HEAD, by its token as sent (workers-rs's `Method` reads a method it
/// does not know as GET).
fn is_write(req: &Request) -> bool {
    !matches!(req.inner().method().as_str(), "GET" | "HEAD")
}

/// Admits an admin request, or answers why not: 404 with the surface off, 401 with the
/// reason's code, 403 for a cross-site write. See the module's documentation for the rules.
pub async fn admit(req: &Request, env: &Env) -> AppResult<Actor> {
    let token = config::admin_token(env);
    let access = setting(env);
    let access = match &*access {
        AccessSetting::On(c) => Some(c),
        _ => None,
    };
    if token.is_none() && access.is_none() {
        return Err(AppError::NotFound);
    }
    let headers = req.headers();
    let authorization = headers
        .get("Authorization")?
        .filter(|a| !a.trim().is_empty());
    if let Some(authorization) = &authorization {
        if token.as_deref().is_some_and(|t| bearer(authorization, t)) {
            // the token travels in a header a cross-site page cannot set; refuse cross-site writes anyway
            if is_write(req) && headers.get("Sec-Fetch-Site")?.as_deref() == Some("cross-site") {
                return Err(AppError::Forbidden("cross_site_request"));
            }
            return Ok(Actor::token());
        }
    }
    let Some(access) = access else {
        return Err(AppError::Unauthorized);
    };
    let (asserted, cookie) = tokens(req)?;
    let (jwt, via) = match (asserted.as_deref(), cookie.as_deref()) {
        (Some(h), _) => (h, Via::AccessHeader),
        (None, Some(c)) => (c, Via::AccessCookie),
        // a wrong bearer token and no Access token: the bearer token's refusal
        (None, None) if authorization.is_some() => return Err(AppError::Unauthorized),
        (None, None) => return Err(AccessError::Missing.into()),
    };
    let actor = verify(jwt, access).await?;
    if cookie.is_some() && is_write(req) {
        let url = req.inner().url();
        let own = rules::origin_of(&url).unwrap_or_default();
        let site = headers.get("Sec-Fetch-Site")?;
        let origin = headers.get("Origin")?;
        if !rules::same_origin_write(site.as_deref(), origin.as_deref(), &own) {
            return Err(AppError::Forbidden("cross_site_request"));
        }
    }
    let (name, service_token) = match actor {
        TokenActor::User(n) => (n, false),
        TokenActor::ServiceToken(n) => (n, true),
    };
    Ok(Actor {
        name,
        via,
        service_token,
    })
}

/// The Access token a request carries in its header (when not blank) and in its cookie.
fn tokens(req: &Request) -> worker::Result<(Option<String>, Option<String>)> {
    let headers = req.headers();
    let cookies = headers.get("Cookie")?.unwrap_or_default();
    let cookie = rules::cookie(&cookies, rules::COOKIE_NAME).map(str::to_string);
    let asserted = headers
        .get(rules::HEADER_NAME)?
        .filter(|h| !h.trim().is_empty());
    Ok((asserted, cookie))
}

/// The Access tokens a request carries, whether or not they admitted it.
pub fn presented(req: &Request) -> Vec<String> {
    tokens(req).map_or_else(|_| Vec::new(), |(h, c)| h.into_iter().chain(c).collect())
}

/// `GET /admin/api/whoami`: who the admission says is asking, `{"actor", "via",
/// "service_token"}` (`via`: `token`, `access_header` or `access_cookie`). The page asks it
/// first, without a token, to learn whether Access signed the operator in.
pub fn whoami(actor: &Actor) -> AppResult<Response> {
    Ok(Response::from_json(&json!({
        "actor": actor.name,
        "via": actor.via.as_str(),
        "service_token": actor.service_token,
    }))?)
}

/// A token checked: the algorithm, the key by `kid`, the RS256 signature, then the claims.
async fn verify(jwt: &str, config: &AccessConfig) -> Result<TokenActor, AccessError> {
    let token = rules::parse_token(jwt)?;
    let key = key_for(config, &token.header.kid).await?;
    let ok = webcrypto::verify_rs256(&key, token.signature(), token.signing_input())
        .await
        .map_err(|e| {
            log::line("access", "-", "verify_error", Some(&e));
            AccessError::SignatureInvalid
        })?;
    if !ok {
        return Err(AccessError::SignatureInvalid);
    }
    let now = crate::clock::now_seconds();
    rules::check_claims(&token.claims, config, now)
}

// ---------------------------------------------------------------- the team's keys

/// How often a request waiting for another's fetch looks again.
const WAIT_STEP_MS: u64 = 25;

thread_local! {
    /// The team's keys, per isolate; when to use, wait, fetch or refuse is the core's
    /// (`paymos_core::access::keys`).
    static KEYS: RefCell<KeyCache<JsValue>> = RefCell::new(KeyCache::default());
}

/// The team's key named `kid`, as a WebCrypto `CryptoKey`.
async fn key_for(config: &AccessConfig, kid: &str) -> Result<JsValue, AccessError> {
    let give_up = crate::clock::now_millis() + FETCH_TIMEOUT_MS + 2_000;
    loop {
        let now = crate::clock::now_millis();
        match KEYS.with(|c| c.borrow_mut().step(&config.team_domain, kid, now)) {
            Step::Use(key) => return Ok(key),
            Step::Refuse(e) => return Err(e),
            Step::Wait if now < give_up => {
                Delay::from(Duration::from_millis(WAIT_STEP_MS)).await;
            }
            Step::Wait => {
                return Err(AccessError::KeysUnavailable(
                    "another request's fetch of the keys did not finish".into(),
                ))
            }
            Step::Fetch => {
                let fetched = fetch_keys(config).await;
                match &fetched {
                    Ok(keys) => {
                        let what = format!("{} keys from {}", keys.len(), config.certs_url());
                        log::line("access", "-", "keys_fetched", Some(&what));
                    }
                    Err(e) => log::line("access", "-", "keys_unavailable", Some(e)),
                }
                let now = crate::clock::now_millis();
                return KEYS.with(|c| c.borrow_mut().settle(fetched, kid, now));
            }
        }
    }
}

/// Fetches the certs document, within [`FETCH_TIMEOUT_MS`], and imports its RSA keys.
async fn fetch_keys(config: &AccessConfig) -> Result<Vec<(String, JsValue)>, String> {
    let url = config.certs_url();
    let headers = Headers::new();
    headers
        .set("Accept", "application/json")
        .map_err(|e| e.to_string())?;
    let mut init = RequestInit::new();
    // not followed: keys served wherever a Location points would be trusted for admission
    init.with_method(Method::Get)
        .with_headers(headers)
        .with_redirect(RequestRedirect::Manual);
    let request = Request::new_with_init(&url, &init).map_err(|e| e.to_string())?;
    let controller = AbortController::default();
    let signal = controller.signal();
    let fetch = Fetch::Request(request);
    let read = async {
        let mut resp = fetch
            .send_with_signal(&signal)
            .await
            .map_err(|e| format!("{url} could not be reached: {e}"))?;
        let status = resp.status_code();
        if status != 200 {
            return Err(format!("{url} answered {status}"));
        }
        resp.text()
            .await
            .map_err(|e| format!("{url} could not be read: {e}"))
    };
    let timeout = Delay::from(Duration::from_millis(FETCH_TIMEOUT_MS));
    futures_util::pin_mut!(read);
    let text = match select(read, timeout).await {
        Either::Left((result, _)) => result?,
        Either::Right(((), _)) => {
            controller.abort();
            return Err(format!("{url} did not answer within {FETCH_TIMEOUT_MS} ms"));
        }
    };
    let jwks = rules::parse_jwks(&text).map_err(|e| format!("{url}: {e}"))?;
    let mut keys = Vec::with_capacity(jwks.len());
    for jwk in jwks {
        match webcrypto::import_rs256_key(&jwk.n, &jwk.e).await {
            Ok(key) => keys.push((jwk.kid, key)),
            Err(e) => log::line(
                "access",
                "-",
                "key_skipped",
                Some(&format!("kid {}: {e}", jwk.kid)),
            ),
        }
    }
    if keys.is_empty() {
        return Err(format!("{url}: no key could be imported"));
    }
    Ok(keys)
}
