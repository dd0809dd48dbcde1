//! Structured logs: one JSON line per event. Never the secret, the signature or the body.

use serde_json::json;
use worker::console_log;

pub fn line(stage: &str, event_id: &str, outcome: &str, detail: Option<&str>) {
    let mut v = json!({ "stage": stage, "event_id": event_id, "outcome": outcome });
    if let Some(d) = detail {
        v["detail"] = json!(d);
    }
    console_log!("{}", v);
}
