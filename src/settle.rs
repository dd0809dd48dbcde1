//! The receive path's promise chain (`receive.rs`): `settle(promise, f)` is
//! `promise.then(f(Ok), f(Err))`, with `f` kept in a table here under a number and resumed
//! by one function made once per instance (`settle.js`). A wasm-bindgen closure per await
//! cost its creation, two `bind`s and a FinalizationRegistry entry: 2-3 % of a delivery's
//! CPU in paired rounds against the build before, not visible against the JS receiver
//! (bench/README.md, "One resume function for the receive path's chain"). Also the counters'
//! timer (`lib.rs`) and a large body's MACs (`webcrypto.rs`) chain through it.

use wasm_bindgen::prelude::Closure;
use wasm_bindgen::JsValue;

#[wasm_bindgen::prelude::wasm_bindgen(module = "/src/settle.js")]
extern "C" {
    #[wasm_bindgen(js_name = settleThen)]
    fn settle_then(promise: &JsValue, id: u32, resume: &JsValue) -> JsValue;
}

/// A continuation of the chain, waiting for its promise.
type Continuation = Box<dyn FnOnce(Result<JsValue, JsValue>) -> JsValue>;

/// The continuations waiting, at their ids; a freed id is used again.
#[derive(Default)]
struct Waiting {
    slots: Vec<Option<Continuation>>,
    free: Vec<u32>,
}

thread_local! {
    static WAITING: std::cell::RefCell<Waiting> = std::cell::RefCell::default();
    /// `resume` as a JS function, made once per instance: it lives as long as the instance.
    static RESUME: JsValue =
        Closure::<dyn Fn(u32, bool, JsValue) -> JsValue>::new(resume).into_js_value();
}

/// `promise.then(f(Ok), f(Err))`: `f` waits in `WAITING` and runs once, when the promise
/// settles. Returns the chained promise.
pub fn settle(
    promise: &JsValue,
    f: impl FnOnce(Result<JsValue, JsValue>) -> JsValue + 'static,
) -> JsValue {
    let f: Continuation = Box::new(f);
    let id = WAITING.with(|w| {
        let mut w = w.borrow_mut();
        match w.free.pop() {
            Some(id) => {
                w.slots[id as usize] = Some(f);
                id
            }
            None => {
                w.slots.push(Some(f));
                (w.slots.len() - 1) as u32
            }
        }
    });
    RESUME.with(|resume| settle_then(promise, id, resume))
}

/// Runs continuation `id` with its promise's outcome; its slot is free again first, so the
/// continuation can wait on another promise.
fn resume(id: u32, ok: bool, value: JsValue) -> JsValue {
    let f = WAITING.with(|w| {
        let mut w = w.borrow_mut();
        let f = w.slots.get_mut(id as usize).and_then(Option::take);
        if f.is_some() {
            w.free.push(id);
        }
        f
    });
    match f {
        Some(f) => f(if ok { Ok(value) } else { Err(value) }),
        // not reached: a promise resumes the instance that chained it (settle.js), which
        // takes each id once
        None => JsValue::UNDEFINED,
    }
}
