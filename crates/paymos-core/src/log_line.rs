//! The Worker's structured log line (docs/operations.md): one JSON object a line, with the
//! keys `stage`, `event_id`, `outcome` and, where there is one, `detail`. Written here byte
//! for byte as `serde_json` writes the map of them (keys in sorted order), without building
//! the map: the consumer and the dispatcher write one or two lines a delivery.

use crate::statements::push_json_string;

/// The line's text, e.g. `{"event_id":"evt_1","outcome":"applied","stage":"consume"}`.
pub fn log_line(stage: &str, event_id: &str, outcome: &str, detail: Option<&str>) -> String {
    let size = stage.len() + event_id.len() + outcome.len() + detail.map_or(0, str::len);
    let mut line = String::with_capacity(size + 64);
    line.push('{');
    if let Some(detail) = detail {
        line.push_str("\"detail\":");
        push_json_string(&mut line, detail);
        line.push(',');
    }
    line.push_str("\"event_id\":");
    push_json_string(&mut line, event_id);
    line.push_str(",\"outcome\":");
    push_json_string(&mut line, outcome);
    line.push_str(",\"stage\":");
    push_json_string(&mut line, stage);
    line.push('}');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What `src/log.rs` wrote before: the `json!` map, displayed.
    fn as_serde_json_writes_it(
        stage: &str,
        id: &str,
        outcome: &str,
        detail: Option<&str>,
    ) -> String {
        let mut v = json!({ "stage": stage, "event_id": id, "outcome": outcome });
        if let Some(d) = detail {
            v["detail"] = json!(d);
        }
        v.to_string()
    }

    #[test]
    fn the_line_is_byte_for_byte_serde_json_s_map() {
        let texts = [
            "",
            "consume",
            "evt_1",
            "a \"quoted\" \\ path",
            "tab\there\nnew\u{1}",
            "é ✓ 😀",
        ];
        for stage in texts {
            for id in texts {
                for detail in [
                    None,
                    Some("retry in 4s; \"x\""),
                    Some(""),
                    Some("\u{7f}\u{1f}"),
                ] {
                    assert_eq!(
                        log_line(stage, id, "applied", detail),
                        as_serde_json_writes_it(stage, id, "applied", detail)
                    );
                }
            }
        }
    }
}
