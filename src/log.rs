//! Structured logs: one JSON line per event. Never the secret, the signature or the body.

use paymos_core::log_line::log_line;
use worker::worker_sys::web_sys;

pub fn line(stage: &str, event_id: &str, outcome: &str, detail: Option<&str>) {
    web_sys::console::log_1(&log_line(stage, event_id, outcome, detail).into());
}
