//! The D1 calls themselves, on the runtime's own objects, with as few calls between the wasm
//! and JS as the API allows. A statement's arguments are bound from one JSON text (one
//! `JSON.parse`, where a `JsValue` and an `Array.push` per argument cost two calls each), and
//! an answer's rows are read from one `JSON.stringify` text, where serde-wasm-bindgen's walk
//! calls into JS for every row, column and type check. With the consumer's settings kept per
//! isolate, 399 calls into JS per new delivery became 146, and its CPU fell by about a tenth
//! (bench/README.md, "Calls between the wasm and JS").

use paymos_core::statements::{Arg, Bound};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use wasm_bindgen::{JsCast, JsValue};
use worker::worker_sys::{D1Database as DatabaseSys, D1PreparedStatement as StatementSys};
use worker::{js_sys, wasm_bindgen_futures::JsFuture, D1Database};

/// The statement with its arguments bound: `db.prepare(sql).bind(...JSON.parse(args))`, or
/// one by one where they carry a body (`JSON_ARGS_MAX_TEXT`).
pub fn prepare(db: &D1Database, b: &Bound<'_>) -> Result<StatementSys, JsValue> {
    let db: &DatabaseSys = db.as_ref().unchecked_ref();
    let statement = db.prepare(b.statement.sql)?;
    if b.args.is_empty() {
        return Ok(statement);
    }
    let args = if text_bytes(&b.args) > JSON_ARGS_MAX_TEXT {
        b.args.iter().map(js).collect::<js_sys::Array>()
    } else {
        js_sys::JSON::parse(&args_json(&b.args))?.unchecked_into()
    };
    statement.bind(args)
}

/// Up to this many bytes of text the arguments go as one JSON text; beyond (a delivery's body,
/// the receive path's insert) each goes as its own string, which is not escaped by serde_json
/// and parsed again by JSON.parse.
const JSON_ARGS_MAX_TEXT: usize = 256;

fn text_bytes(args: &[Arg<'_>]) -> usize {
    args.iter()
        .map(|a| match a {
            Arg::Text(t) => t.len(),
            _ => 0,
        })
        .sum()
}

fn js(arg: &Arg<'_>) -> JsValue {
    match arg {
        Arg::Null => JsValue::NULL,
        Arg::Int(i) => JsValue::from_f64(*i as f64),
        Arg::Text(s) => JsValue::from_str(s),
    }
}

/// The arguments as a JSON array: integers as the numbers `JsValue::from_f64` made of them
/// (JSON.parse rounds a literal to the nearest double, as `as f64` does), texts escaped by
/// serde_json, which JSON.parse reads back to the same string.
fn args_json(args: &[Arg<'_>]) -> String {
    let mut json = String::with_capacity(16 * args.len() + 2);
    json.push('[');
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        match arg {
            Arg::Null => json.push_str("null"),
            Arg::Int(n) => json.push_str(&n.to_string()),
            Arg::Text(t) => json.push_str(&serde_json::to_string(t.as_ref()).unwrap_or_default()),
        }
    }
    json.push(']');
    json
}

pub async fn all(statement: &StatementSys) -> Result<JsValue, JsValue> {
    JsFuture::from(statement.all()?).await
}

/// The first row, or `null`.
pub async fn first(statement: &StatementSys) -> Result<JsValue, JsValue> {
    JsFuture::from(statement.first(None)?).await
}

pub async fn run(statement: &StatementSys) -> Result<JsValue, JsValue> {
    JsFuture::from(statement.run()?).await
}

/// One D1 batch (one transaction): the array of its statements' answers.
pub async fn batch(db: &D1Database, statements: Vec<StatementSys>) -> Result<JsValue, JsValue> {
    let db: &DatabaseSys = db.as_ref().unchecked_ref();
    let statements: js_sys::Array = statements.into_iter().collect();
    JsFuture::from(db.batch(statements)?).await
}

/// A statement's answer as D1 gives it: its rows and, where asked for, the database's size
/// (`meta.size_after`, in bytes; a number, where workers-rs's `usize` stops at 4 GB on wasm32).
#[derive(Deserialize)]
#[serde(bound = "T: DeserializeOwned")]
pub struct Answer<T> {
    #[serde(default)]
    pub results: Option<Vec<T>>,
    #[serde(default)]
    pub meta: Option<Meta>,
}

#[derive(Deserialize)]
pub struct Meta {
    #[serde(default)]
    pub size_after: Option<f64>,
}

/// A value from the runtime read into `T` through its JSON text: one `JSON.stringify` and
/// one string brought into the wasm, whatever the rows and columns.
pub fn read<T: DeserializeOwned>(value: &JsValue) -> Result<T, String> {
    let text = js_sys::JSON::stringify(value)
        .map_err(|e| format!("the answer is not JSON: {}", crate::error::js_message(e)))?;
    // `undefined` has no JSON text: read as `null`, the absent row
    let text = JsValue::from(text).as_string();
    serde_json::from_str(text.as_deref().unwrap_or("null")).map_err(|e| e.to_string())
}

/// The message a rejected D1 call is reported with: D1's own (`D1_ERROR: …`) and its cause,
/// as workers-rs's `D1Error` gives them; any other error as workers-rs converts it.
pub fn rejection(e: JsValue) -> String {
    if let Some(error) = e.dyn_ref::<js_sys::Error>() {
        let message: String = error.message().into();
        if message.starts_with("D1") {
            let cause = error
                .cause()
                .dyn_into::<js_sys::Error>()
                .map(|c| String::from(c.message()))
                .unwrap_or_else(|_| "unknown error".into());
            return if message.contains(&cause) || cause == "unknown error" {
                message
            } else {
                format!("{message} ({cause})")
            };
        }
    }
    worker::Error::from(e).to_string()
}
