//! Who may call the admin API, and the operators' page (served while the API is on).

use crate::access::Actor;
use crate::error::{AppError, AppResult};
use worker::{Env, Request, Response};

/// The admission (src/access.rs): the bearer token or a Cloudflare Access token, and who the
/// actor is. 404 while the admin surface is off (neither `ADMIN_TOKEN` nor Access configured).
pub async fn authorize(req: &Request, env: &Env) -> AppResult<Actor> {
    crate::access::admit(req, env).await
}

/// The operators' page and its files (public/admin, Workers Static Assets, with the headers of
/// public/_headers), through the ASSETS binding while the admin surface is on; with neither
/// `ADMIN_TOKEN` nor Access configured every `/admin` path is 404, the page's too (interface
/// §4). The page holds no data, so it is served without a credential: signing in (or, behind
/// Access, asking who is signed in) is the page's own first step.
pub async fn page(req: Request, env: &Env) -> worker::Result<Response> {
    if !crate::access::admin_enabled(env) {
        // answered as the admin API's 404 is (never cached)
        return crate::admin_reply(Err(AppError::NotFound));
    }
    env.assets("ASSETS")?.fetch_request(req).await
}
