//! The D1 calls themselves, with as few calls between the wasm and JS as the API allows. A
//! query (a statement, or a batch of them) goes to `d1.js` as one JSON text and its answer
//! comes back as one: one call and one promise, where each `prepare`, `bind`, the batch's
//! array and serde-wasm-bindgen's walk of the answer (a call into JS for every row, column
//! and type check) were calls of their own (bench/README.md, "One call per D1 query"). The
//! receive path's insert alone is prepared here on the runtime's own objects (`prepare`): the
//! fast path chains its promise itself.

use paymos_core::statements::{push_json_string, Arg, Bound, Statement};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::cell::RefCell;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use worker::worker_sys::{D1Database as DatabaseSys, D1PreparedStatement as StatementSys};
use worker::{js_sys, wasm_bindgen_futures::JsFuture, D1Database};

/// The statement with its arguments bound one by one, each its own string or number: the
/// receive path's insert, whose body would otherwise be escaped into JSON and parsed again.
pub fn prepare(db: &D1Database, b: &Bound<'_>) -> Result<StatementSys, JsValue> {
    let db: &DatabaseSys = db.as_ref().unchecked_ref();
    let args = b.args.iter().map(js).collect::<js_sys::Array>();
    db.prepare(b.statement.sql)?.bind(args)
}

fn js(arg: &Arg<'_>) -> JsValue {
    match arg {
        Arg::Null => JsValue::NULL,
        Arg::Int(i) => JsValue::from_f64(*i as f64),
        Arg::Text(s) => JsValue::from_str(s),
    }
}

/// The arguments as a JSON array: integers as the numbers `JsValue::from_f64` would make of
/// them (JSON.parse rounds a literal to the nearest double, as `as f64` does), texts escaped
/// as serde_json escapes them, which JSON.parse reads back to the same string.
fn args_json(args: &[Arg<'_>]) -> String {
    let mut json = String::with_capacity(16 * args.len() + 2);
    json.push('[');
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        match arg {
            Arg::Null => json.push_str("null"),
            Arg::Int(n) => json.push_str(itoa::Buffer::new().format(*n)),
            Arg::Text(t) => push_json_string(&mut json, t),
        }
    }
    json.push(']');
    json
}

#[wasm_bindgen(module = "/src/sql/d1.js")]
extern "C" {
    #[wasm_bindgen(catch, js_name = d1First)]
    fn first_js(db: &DatabaseSys, statements: &str) -> Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch, js_name = d1All)]
    fn all_js(db: &DatabaseSys, statements: &str) -> Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch, js_name = d1Run)]
    fn run_js(db: &DatabaseSys, statements: &str) -> Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch, js_name = d1Batch)]
    fn batch_js(db: &DatabaseSys, statements: &str) -> Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch, js_name = d1Probe)]
    fn probe_js(db: &DatabaseSys, statements: &str) -> Result<js_sys::Promise, JsValue>;
}

type Call = fn(&DatabaseSys, &str) -> Result<js_sys::Promise, JsValue>;

/// One call of `d1.js` with the statements as one JSON text, its answer as one text back.
async fn call(db: &D1Database, call: Call, bs: &[Bound<'_>]) -> Result<String, JsValue> {
    let db: &DatabaseSys = db.as_ref().unchecked_ref();
    let (json, new) = statements_json(bs);
    let promise = call(db, &json)?;
    // d1.js has read the texts by now (it prepares before it returns its promise): from here
    // on these statements cross as their ids alone
    SENT.with(|sent| sent.borrow_mut().extend(new));
    let text = JsFuture::from(promise).await?;
    Ok(text.as_string().unwrap_or_else(|| "null".into()))
}

thread_local! {
    /// The statements whose SQL text `d1.js` holds, each at its id: a text crosses into JS
    /// once per isolate, not with every query (escaping the consumer's 2.4 KB of SQL into
    /// JSON, decoding and parsing it again cost about 1 % of a new delivery's CPU, measured;
    /// bench/README.md, "SQL texts once per isolate").
    static SENT: RefCell<Vec<*const Statement>> = const { RefCell::new(Vec::new()) };
}

/// The statements as `d1.js` reads them: `[[id, [args…]], …]`, with the SQL text as a third
/// element where `d1.js` does not hold it yet; and the statements sent so, in their ids' order,
/// to count as held once the call has returned (a call that threw registered nothing).
fn statements_json(bs: &[Bound<'_>]) -> (String, Vec<*const Statement>) {
    SENT.with(|sent| {
        let sent = sent.borrow();
        let mut new: Vec<*const Statement> = Vec::new();
        let mut json = String::with_capacity(bs.len() * 48);
        json.push('[');
        for (i, b) in bs.iter().enumerate() {
            let key: *const Statement = b.statement;
            // ids run on from the held ones through this call's new ones
            let next = sent.len() + new.len();
            let id = sent
                .iter()
                .chain(&new)
                .position(|s| *s == key)
                .unwrap_or(next);
            let text = id == next;
            if text {
                new.push(key);
            }
            if i > 0 {
                json.push(',');
            }
            json.push('[');
            json.push_str(itoa::Buffer::new().format(id));
            json.push(',');
            json.push_str(&args_json(&b.args));
            if text {
                json.push(',');
                push_json_string(&mut json, b.statement.sql);
            }
            json.push(']');
        }
        json.push(']');
        (json, new)
    })
}

/// A statement's answer (`results`, and `meta.size_after`) as JSON text.
pub async fn all(db: &D1Database, b: &Bound<'_>) -> Result<String, JsValue> {
    call(db, all_js, std::slice::from_ref(b)).await
}

/// The first row as JSON text, `null` when there is none.
pub async fn first(db: &D1Database, b: &Bound<'_>) -> Result<String, JsValue> {
    call(db, first_js, std::slice::from_ref(b)).await
}

pub async fn run(db: &D1Database, b: &Bound<'_>) -> Result<(), JsValue> {
    call(db, run_js, std::slice::from_ref(b)).await.map(drop)
}

/// Whether D1 answered `b` within d1.js's limit (10 s): `ok`, `error` (it refused), or
/// `timeout` (its calls hang).
pub async fn probe(db: &D1Database, b: &Bound<'_>) -> Result<String, JsValue> {
    call(db, probe_js, std::slice::from_ref(b)).await
}

/// One D1 batch (one transaction): each statement's rows, as a JSON array of arrays.
pub async fn batch(db: &D1Database, bs: &[Bound<'_>]) -> Result<String, JsValue> {
    call(db, batch_js, bs).await
}

/// A statement's answer as `d1.js`'s `d1All` passes it on from D1: its rows and, where asked
/// for, the database's size (`meta.size_after`, in bytes; a number, where workers-rs's `usize`
/// stops at 4 GB on wasm32).
#[derive(Deserialize)]
#[serde(bound = "T: DeserializeOwned")]
pub struct Answer<T> {
    #[serde(default)]
    pub results: Option<Vec<T>>,
    #[serde(default)]
    pub meta: Option<Meta>,
}

/// The part of D1's `meta` that `d1All` sends, and no more: a field read here must be added to
/// what `d1All` writes, or it reads as absent.
#[derive(Deserialize)]
pub struct Meta {
    #[serde(default)]
    pub size_after: Option<f64>,
}

/// An answer's JSON text read into `T`.
pub fn read<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
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
