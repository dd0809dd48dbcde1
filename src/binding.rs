//! The environment's bindings, looked up without workers-rs's check of the binding's
//! constructor name: `env.d1(…)` and `env.queue(…)` cost five calls into JS each (the lookup,
//! `undefined`'s test, `constructor`, `name` and its string), this costs two, and the receive
//! path looks up two bindings per new delivery. A binding of another kind under the name (a
//! mistake in wrangler.toml) then fails at its first call, with the runtime's TypeError,
//! reported as that binding's failure.

use wasm_bindgen::{JsCast, JsValue};
use worker::{js_sys, Env};

/// The binding `name`, or `None` when the environment has none by that name.
pub fn get<T: JsCast>(env: &Env, name: &str) -> Option<T> {
    let value = js_sys::Reflect::get(env, &JsValue::from_str(name)).ok()?;
    (!value.is_undefined()).then(|| value.unchecked_into())
}

/// The same, as workers-rs's error for a missing binding.
pub fn required<T: JsCast>(env: &Env, name: &str) -> worker::Result<T> {
    get(env, name).ok_or_else(|| worker::Error::from(format!("Binding `{name}` is undefined.")))
}
