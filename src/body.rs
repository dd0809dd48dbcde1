//! Request bodies: read under a cap, and what a reply leaves unread drained.
//!
//! Why drain: workerd closes a keep-alive connection whose request body was not read to its
//! end, right after the reply. The client has already put that connection back in its pool,
//! so its *next* request on it fails with ECONNRESET: a provider's next delivery, an
//! operator's next admin call. Measured locally: after a 401 or 400 answered without
//! reading the body, 3–8 % of the following requests failed. So every reply that refuses
//! early (a bad resource id, no token, a body over the limit) still reads the rest and throws
//! it away, never buffering it, up to `DRAIN_LIMIT`; past that the connection is let go.

use worker::js_sys::{Reflect, Uint8Array};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::worker_sys::web_sys;

/// Bytes thrown away to keep a connection usable; a body larger than this is not worth it.
pub const DRAIN_LIMIT: u64 = 1024 * 1024;

pub enum ReadError {
    /// The body passed the limit: what was read is dropped, the rest drained.
    TooLarge,
    Unreadable,
}

/// Reads a body of unknown length (chunked) as it streams, refusing it as soon as it passes
/// `max` bytes: nothing past `max` is kept, the rest is drained.
pub async fn read_capped(req: &web_sys::Request, max: usize) -> Result<Vec<u8>, ReadError> {
    // no body at all (e.g. Content-Length: 0): an empty one
    let Some(reader) = reader_of(req) else {
        return Ok(Vec::new());
    };
    let mut body = Vec::new();
    while let Some(chunk) = next_chunk(&reader).await? {
        if body.len() + chunk.length() as usize > max {
            drop(body);
            discard(&reader, DRAIN_LIMIT).await;
            return Err(ReadError::TooLarge);
        }
        let start = body.len();
        body.resize(start + chunk.length() as usize, 0);
        chunk.copy_to(&mut body[start..]);
    }
    Ok(body)
}

/// Drains what a reply left unread: nothing when the body was read (or there is none), the
/// whole body otherwise when it declares at most `DRAIN_LIMIT` bytes or none.
pub async fn drain_unread(req: &web_sys::Request) {
    if req.body_used() {
        return;
    }
    let declared = req
        .headers()
        .get("Content-Length")
        .ok()
        .flatten()
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n == 0 || n > DRAIN_LIMIT) {
        return;
    }
    if let Some(reader) = reader_of(req) {
        discard(&reader, DRAIN_LIMIT).await;
    }
}

fn reader_of(req: &web_sys::Request) -> Option<web_sys::ReadableStreamDefaultReader> {
    req.body()?.get_reader().dyn_into().ok()
}

/// The next chunk, `None` at the end. Chunks stay in JavaScript until copied.
async fn next_chunk(
    reader: &web_sys::ReadableStreamDefaultReader,
) -> Result<Option<Uint8Array>, ReadError> {
    let result = JsFuture::from(reader.read())
        .await
        .map_err(|_| ReadError::Unreadable)?;
    let done =
        Reflect::get(&result, &JsValue::from_str("done")).map_err(|_| ReadError::Unreadable)?;
    if done.is_truthy() {
        return Ok(None);
    }
    let value =
        Reflect::get(&result, &JsValue::from_str("value")).map_err(|_| ReadError::Unreadable)?;
    value
        .dyn_into::<Uint8Array>()
        .map(Some)
        .map_err(|_| ReadError::Unreadable)
}

/// Reads and throws away up to `limit` bytes, never copying them out of JavaScript; past the
/// limit (or on an error) the stream is cancelled and the connection is let go.
async fn discard(reader: &web_sys::ReadableStreamDefaultReader, limit: u64) {
    let mut seen: u64 = 0;
    loop {
        match next_chunk(reader).await {
            Ok(None) => return,
            Ok(Some(chunk)) => {
                seen += u64::from(chunk.length());
                if seen > limit {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    let _ = JsFuture::from(reader.cancel()).await;
}
