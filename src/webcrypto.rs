//! HMAC-SHA-256 by the runtime's WebCrypto, for large deliveries: its native SHA-256 is
//! several times faster than the wasm's over tens of kilobytes, while for a small body the
//! wasm's synchronous HMAC costs less than a promise and a copy (bench/README.md, "The receive path's promise chain"). Only
//! the MACs come from here: which one matches, in constant time, is still the core's
//! (`signature::match_macs`). Also RS256 verification, for the Cloudflare Access tokens of the
//! admin surface (`access.rs`).

use paymos_core::Secret;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use worker::js_sys::{self, Array, Promise, Uint8Array};

#[wasm_bindgen]
extern "C" {
    /// `crypto.subtle`, with the two methods used here.
    #[derive(Clone)]
    type Subtle;
    #[wasm_bindgen(method, catch, js_name = importKey)]
    fn import_key(
        this: &Subtle,
        format: &str,
        key: &Uint8Array,
        algorithm: &JsValue,
        extractable: bool,
        usages: &Array,
    ) -> Result<Promise, JsValue>;
    #[wasm_bindgen(method, catch)]
    fn sign(
        this: &Subtle,
        algorithm: &str,
        key: &JsValue,
        data: &Uint8Array,
    ) -> Result<Promise, JsValue>;
}

fn subtle() -> Option<Subtle> {
    let crypto = js_sys::Reflect::get(&js_sys::global(), &"crypto".into()).ok()?;
    let subtle = js_sys::Reflect::get(&crypto, &"subtle".into()).ok()?;
    (subtle.is_object()).then(|| subtle.unchecked_into())
}

/// The secrets imported as HMAC-SHA-256 signing keys, with the `crypto.subtle` that signs
/// with them. Made once per configuration (`config::ReceiveConfig` keeps it).
pub struct HmacKeys {
    subtle: Subtle,
    /// a promise of an array of `CryptoKey`s, in the secrets' order
    keys: Promise,
}

/// The secrets' keys, `None` where the runtime has no WebCrypto.
pub fn import_keys(secrets: &[Secret]) -> Option<HmacKeys> {
    let subtle = subtle()?;
    let algorithm = js_sys::Object::new();
    js_sys::Reflect::set(&algorithm, &"name".into(), &"HMAC".into()).ok()?;
    js_sys::Reflect::set(&algorithm, &"hash".into(), &"SHA-256".into()).ok()?;
    let usages = Array::of1(&"sign".into());
    let keys = Array::new();
    for secret in secrets {
        // the key is the whole secret, `whsec_` included, as its UTF-8 bytes (interface §1)
        let raw = Uint8Array::from(secret.expose().as_bytes());
        let key: JsValue = subtle
            .import_key("raw", &raw, &algorithm, false, &usages)
            .ok()?
            .into();
        keys.push(&key);
    }
    Some(HmacKeys {
        subtle,
        keys: Promise::all(&keys),
    })
}

impl HmacKeys {
    /// Starts the MAC of `prefix` followed by `body` under each key: a promise of an array of
    /// `ArrayBuffer`s, in the keys' order. The bytes are copied into one buffer first
    /// (WebCrypto takes one message); `sign` copies its input when called, so nothing here
    /// outlives the call.
    pub fn sign_all(&self, prefix: &[u8], body: &[u8]) -> JsValue {
        let message = Uint8Array::new_with_length((prefix.len() + body.len()) as u32);
        message.subarray(0, prefix.len() as u32).copy_from(prefix);
        message
            .subarray(prefix.len() as u32, message.length())
            .copy_from(body);
        let subtle = self.subtle.clone();
        crate::settle::settle(&self.keys, move |keys| {
            let keys = match keys {
                Ok(keys) => Array::from(&keys),
                Err(e) => return Promise::reject(&e).into(),
            };
            let signs = Array::new();
            for key in keys.iter() {
                match subtle.sign("HMAC", &key, &message) {
                    Ok(promise) => signs.push(&promise),
                    Err(e) => return Promise::reject(&e).into(),
                };
            }
            Promise::all(&signs).into()
        })
    }
}

/// The MACs out of [`HmacKeys::sign_all`]'s result: `None` unless there is one 32-byte MAC per secret.
pub fn macs(result: &JsValue, secrets: usize) -> Option<Vec<[u8; 32]>> {
    let buffers: &Array = result.dyn_ref()?;
    if buffers.length() as usize != secrets {
        return None;
    }
    buffers
        .iter()
        .map(|buffer| {
            let bytes = Uint8Array::new(&buffer);
            let mut mac = [0u8; 32];
            (bytes.length() == 32).then(|| {
                bytes.copy_to(&mut mac);
                mac
            })
        })
        .collect()
}

// ---- RS256 for Cloudflare Access (src/access.rs): the team's keys imported from their JWK
// members, and RSASSA-PKCS1-v1_5 / SHA-256 verification of a token's signing input

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(method, catch, js_name = importKey)]
    fn import_jwk(
        this: &Subtle,
        format: &str,
        key: &js_sys::Object,
        algorithm: &JsValue,
        extractable: bool,
        usages: &Array,
    ) -> Result<Promise, JsValue>;
    #[wasm_bindgen(method, catch)]
    fn verify(
        this: &Subtle,
        algorithm: &str,
        key: &JsValue,
        signature: &Uint8Array,
        data: &Uint8Array,
    ) -> Result<Promise, JsValue>;
}

const RS256: &str = "RSASSA-PKCS1-v1_5";

fn js_error(e: JsValue) -> String {
    e.as_string()
        .or_else(|| {
            js_sys::Reflect::get(&e, &"message".into())
                .ok()?
                .as_string()
        })
        .unwrap_or_else(|| "WebCrypto failed".into())
}

/// `crypto.subtle.importKey('jwk', {kty:'RSA', n, e, alg:'RS256'}, {name:'RSASSA-PKCS1-v1_5',
/// hash:'SHA-256'}, false, ['verify'])`: a `CryptoKey` that only verifies.
pub async fn import_rs256_key(n: &str, e: &str) -> Result<JsValue, String> {
    let subtle = subtle().ok_or("the runtime has no WebCrypto")?;
    let set = |o: &js_sys::Object, k: &str, v: &JsValue| {
        js_sys::Reflect::set(o, &k.into(), v).map_err(js_error)
    };
    let jwk = js_sys::Object::new();
    set(&jwk, "kty", &"RSA".into())?;
    set(&jwk, "n", &n.into())?;
    set(&jwk, "e", &e.into())?;
    set(&jwk, "alg", &"RS256".into())?;
    set(&jwk, "ext", &JsValue::TRUE)?;
    let algorithm = js_sys::Object::new();
    set(&algorithm, "name", &RS256.into())?;
    set(&algorithm, "hash", &"SHA-256".into())?;
    let usages = Array::of1(&"verify".into());
    let promise = subtle
        .import_jwk("jwk", &jwk, &algorithm, false, &usages)
        .map_err(js_error)?;
    worker::wasm_bindgen_futures::JsFuture::from(promise)
        .await
        .map_err(js_error)
}

/// Whether `signature` is the RS256 signature of `data` under `key` (from [`import_rs256_key`]).
pub async fn verify_rs256(key: &JsValue, signature: &[u8], data: &[u8]) -> Result<bool, String> {
    let subtle = subtle().ok_or("the runtime has no WebCrypto")?;
    let promise = subtle
        .verify(
            RS256,
            key,
            &Uint8Array::from(signature),
            &Uint8Array::from(data),
        )
        .map_err(js_error)?;
    let ok = worker::wasm_bindgen_futures::JsFuture::from(promise)
        .await
        .map_err(js_error)?;
    Ok(ok.as_bool() == Some(true))
}
