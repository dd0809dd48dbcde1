//! The glue floor (benchmark only): what a request costs in a Rust worker when the handler
//! does as little as ours can — a hand-exported async `fetch` as workers-rs exports one (our
//! general path; deliveries take a promise chain instead, `src/receive.rs`), one header read, the
//! body awaited (not copied into wasm), the receive log line, the fixed receipt — and nothing
//! else (no HMAC, no D1, no queue). The body is read because a reply that leaves it unread
//! makes workerd drop the keep-alive connection: the load's next request on it is reset
//! (before this, half the floor's requests were resets, on both sides).
//! `bench/glue-floor.js` does the same in JavaScript. Their ratio in `npm run bench` is the
//! price of crossing into wasm and back through wasm-bindgen and workers-rs' usual async
//! export, whatever the handler does.

use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;
use worker::worker_sys::web_sys;
use worker::IntoResponse;

#[wasm_bindgen(
    wasm_bindgen = ::worker::wasm_bindgen,
    wasm_bindgen_futures = ::worker::wasm_bindgen_futures,
    js_sys = ::worker::js_sys
)]
pub async fn fetch(
    req: web_sys::Request,
    _env: ::worker::Env,
    _ctx: ::worker::worker_sys::Context,
) -> Result<web_sys::Response, JsValue> {
    let id = req.headers().get("X-Webhook-Id").ok().flatten();
    ::worker::wasm_bindgen_futures::JsFuture::from(req.array_buffer()?).await?;
    let line = format!(
        r#"{{"stage":"receive","event_id":"{}","outcome":"duplicate","status":200}}"#,
        id.as_deref().unwrap_or("")
    );
    web_sys::console::log_1(&line.into());
    let reply = (|| {
        let mut resp = worker::Response::ok(r#"{"received":true,"duplicate":true}"#)?;
        resp.headers_mut().set("Content-Type", "application/json")?;
        resp.into_raw()
            .map_err(|e| worker::Error::RustError(e.into().to_string()))
    })();
    reply.map_err(|e| JsValue::from_str(&e.to_string()))
}
