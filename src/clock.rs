//! The runtime's clock. `Date.now()` is one call into JS, where workers-rs's `Date::now()`
//! constructs a `Date` and calls its `getTime` (two); the receive path reads the clock four
//! times per delivery (bench/README.md, "One call per D1 query").

use worker::js_sys;

/// Milliseconds since the Unix epoch.
pub fn now_millis() -> u64 {
    js_sys::Date::now() as u64
}

/// Seconds since the Unix epoch.
pub fn now_seconds() -> i64 {
    (now_millis() / 1000) as i64
}
