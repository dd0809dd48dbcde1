//! The glue floor (benchmark only): what a request costs in a Rust worker when the handler
//! does as little as ours can — a hand-exported async `fetch` as workers-rs exports one (our
//! general path; deliveries take a promise chain instead, `src/receive.rs`), one header read, the
//! body awaited (not copied into wasm), the receive log line, the fixed receipt — and nothing
//! else (no HMAC, no D1, no queue). The body is read because a reply that leaves it unread
//! makes workerd drop the keep-alive connection: the load's next request on it is reset
//! (before this, half the floor's requests were resets, on both sides).
//! `bench/glue-floor.js` does the same in JavaScript. Their ratio in `npm run bench` is the
//! price of crossing into wasm and back through wasm-bindgen and workers-rs' usual async
//! export, whatever the handler does. With the `chain` feature the export is the deliveries'
//! own shape instead (a synchronous export and one `then`): the floor of the receive path.

use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;
use worker::worker_sys::web_sys;

#[cfg(not(feature = "chain"))]
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
    use worker::IntoResponse;
    let reply = (|| {
        let mut resp = worker::Response::ok(r#"{"received":true,"duplicate":true}"#)?;
        resp.headers_mut().set("Content-Type", "application/json")?;
        resp.into_raw()
            .map_err(|e| worker::Error::RustError(e.into().to_string()))
    })();
    reply.map_err(|e| JsValue::from_str(&e.to_string()))
}

/// With the `chain` feature: the same work in the receiver's delivery shape (`src/receive.rs`,
/// `receive_fast`): a synchronous export whose body is awaited through one `then` with a Rust
/// closure, no future and no executor. The cheapest shape a workers-rs worker has for a
/// request that awaits once: what the receiver's own deliveries pay for the boundary.
#[cfg(feature = "chain")]
#[wasm_bindgen(
    wasm_bindgen = ::worker::wasm_bindgen,
    wasm_bindgen_futures = ::worker::wasm_bindgen_futures,
    js_sys = ::worker::js_sys
)]
pub fn fetch(
    req: web_sys::Request,
    _env: ::worker::Env,
    _ctx: ::worker::worker_sys::Context,
) -> JsValue {
    use wasm_bindgen::prelude::Closure;
    let id = req.headers().get("X-Webhook-Id").ok().flatten();
    let body = match req.array_buffer() {
        Ok(body) => body,
        Err(e) => return e,
    };
    let answer = Closure::once_into_js(move |_: JsValue| -> JsValue {
        let line = format!(
            r#"{{"stage":"receive","event_id":"{}","outcome":"duplicate","status":200}}"#,
            id.as_deref().unwrap_or("")
        );
        web_sys::console::log_1(&line.into());
        let init = web_sys::ResponseInit::new();
        if let Ok(headers) = web_sys::Headers::new() {
            let _ = headers.set("Content-Type", "application/json");
            init.set_headers(&headers);
        }
        web_sys::Response::new_with_opt_str_and_init(
            Some(r#"{"received":true,"duplicate":true}"#),
            &init,
        )
        .map_or_else(|e| e, JsValue::from)
    });
    use wasm_bindgen::JsCast;
    body.unchecked_ref::<Settling>().then1(&answer)
}

#[cfg(feature = "chain")]
#[wasm_bindgen(wasm_bindgen = ::worker::wasm_bindgen)]
extern "C" {
    /// A promise, seen only through its `then`.
    type Settling;
    #[wasm_bindgen(method, js_name = then)]
    fn then1(this: &Settling, on_ok: &JsValue) -> JsValue;
}
