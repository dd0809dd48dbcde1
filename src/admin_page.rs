//! The operators' web page at /admin (static shell; all data comes from /admin/api with the token).
//!
//! Three files, embedded at build time: `index.html`, `admin.css`, `admin.js`. They contain no
//! data and no secret; the page asks for the admin token, keeps it in `sessionStorage` and sends
//! it as `Authorization: Bearer` on every call to /admin/api. The answers carry a strict
//! Content-Security-Policy (no inline script or style, nothing from other origins), so even a
//! hostile string that slipped past the page's escaping could not run.

use crate::config;
use crate::error::{AppError, AppResult};
use worker::{Env, Headers, Method, Request, Response, ResponseBody};

const INDEX_HTML: &str = include_str!("admin_page/index.html");
const ADMIN_CSS: &str = include_str!("admin_page/admin.css");
const ADMIN_JS: &str = include_str!("admin_page/admin.js");

pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
form-action 'self'; frame-ancestors 'none'";

/// The embedded asset at `path`, with its content type.
fn asset(path: &str) -> Option<(&'static str, &'static str)> {
    match path {
        "/admin" | "/admin/" | "/admin/index.html" => {
            Some(("text/html; charset=utf-8", INDEX_HTML))
        }
        "/admin/admin.css" => Some(("text/css; charset=utf-8", ADMIN_CSS)),
        "/admin/admin.js" => Some(("text/javascript; charset=utf-8", ADMIN_JS)),
        _ => None,
    }
}

pub async fn serve(req: Request, env: &Env, path: &str) -> AppResult<Response> {
    // no token configured: the admin surface, page included, does not exist
    if config::admin_token(env).is_none() {
        return Err(AppError::NotFound);
    }
    let (content_type, body) = asset(path).ok_or(AppError::NotFound)?;
    let method = req.method();
    if method != Method::Get && method != Method::Head {
        return Err(AppError::MethodNotAllowed("GET, HEAD"));
    }
    let headers = Headers::new();
    headers.set("Content-Type", content_type)?;
    headers.set("Content-Security-Policy", CONTENT_SECURITY_POLICY)?;
    headers.set("X-Content-Type-Options", "nosniff")?;
    headers.set("Referrer-Policy", "no-referrer")?;
    headers.set("X-Frame-Options", "DENY")?;
    headers.set("Cross-Origin-Opener-Policy", "same-origin")?;
    headers.set("Cross-Origin-Resource-Policy", "same-origin")?;
    headers.set(
        "Permissions-Policy",
        "camera=(), microphone=(), geolocation=(), payment=()",
    )?;
    let bytes = if method == Method::Head {
        Vec::new()
    } else {
        body.as_bytes().to_vec()
    };
    Ok(Response::from_body(ResponseBody::Body(bytes))?.with_headers(headers))
}
