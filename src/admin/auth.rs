//! Who may call the admin API, and the operators' page (served while the API is on).

use crate::config;
use crate::error::{AppError, AppResult};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use worker::{Env, Method, Request, Response};

/// Compares digests so that neither the content nor the length of the token leaks through timing.
pub fn token_matches(presented: &str, expected: &str) -> bool {
    let a = Sha256::digest(presented.as_bytes());
    let b = Sha256::digest(expected.as_bytes());
    a.ct_eq(&b).into()
}

/// `Ok(())` when the request carries the admin token. Admin is off (404) when no token is set.
pub fn authorize(req: &Request, env: &Env) -> AppResult<()> {
    let Some(expected) = config::admin_token(env) else {
        return Err(AppError::NotFound);
    };
    let header = req.headers().get("Authorization")?.unwrap_or_default();
    // the scheme's name is case-insensitive (RFC 9110 §11.1); the token is compared as sent
    let presented = match header.get(..7) {
        Some(scheme) if scheme.eq_ignore_ascii_case("Bearer ") => &header[7..],
        _ => "",
    };
    if presented.is_empty() || !token_matches(presented, &expected) {
        return Err(AppError::Unauthorized);
    }
    // the token travels in a header a cross-site page cannot set; refuse cross-site writes anyway
    if req.method() != Method::Get
        && req.headers().get("Sec-Fetch-Site")?.as_deref() == Some("cross-site")
    {
        return Err(AppError::Forbidden("cross_site_request"));
    }
    Ok(())
}

/// The operators' page and its files (public/admin, Workers Static Assets, with the headers of
/// public/_headers), through the ASSETS binding while the admin surface is on; with
/// `ADMIN_TOKEN` unset every `/admin` path is 404, the page's too (CONTRACT §4). The page holds
/// no data, so it is served without the token: signing in is the page's own first step.
pub async fn page(req: Request, env: &Env) -> worker::Result<Response> {
    if config::admin_token(env).is_none() {
        // answered as the admin API's 404 is (never cached)
        return crate::admin_reply(Err(AppError::NotFound));
    }
    env.assets("ASSETS")?.fetch_request(req).await
}
