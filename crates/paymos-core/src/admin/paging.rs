//! Pages of the admin API's lists: the `limit` an operator may ask for, the cursors the API
//! gives out (and takes back only as it gave them), and a page cut from `limit + 1` rows.

use super::{bad_request, CommandError};
use crate::ids::is_valid_event_id;
use crate::time::normalize_iso8601;
use serde::Serialize;

/// Rows in a page when no `limit` is given.
pub const DEFAULT_PAGE: u32 = 50;
/// The largest `limit`.
pub const MAX_PAGE: u32 = 1000;
/// Between the two parts of a delivery cursor: `received_at~event_id`.
pub const CURSOR_SEPARATOR: char = '~';

/// `limit`: 1 to [`MAX_PAGE`].
pub fn parse_limit(v: &str) -> Result<u32, CommandError> {
    v.parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_PAGE).contains(n))
        .ok_or_else(|| bad_request("invalid_limit", format!("limit is 1 to {MAX_PAGE}")))
}

fn invalid_cursor() -> CommandError {
    bad_request("invalid_cursor", "the cursor is not one this API gave out")
}

/// Where a delivery list (newest first) or a bulk replay (oldest first) goes on from: the
/// `received_at` (as stored) and `event_id` of the last row seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryCursor {
    pub received_at: String,
    pub event_id: String,
}

impl DeliveryCursor {
    /// A cursor as this API gives it out, `received_at~event_id` (a time, an event id);
    /// anything else is refused rather than read as the top of the list.
    pub fn parse(c: &str) -> Result<DeliveryCursor, CommandError> {
        c.split_once(CURSOR_SEPARATOR)
            .filter(|(at, id)| normalize_iso8601(at).is_some() && is_valid_event_id(id))
            .map(|(at, id)| DeliveryCursor {
                received_at: at.to_string(),
                event_id: id.to_string(),
            })
            .ok_or_else(invalid_cursor)
    }

    /// The cursor's text, as [`DeliveryCursor::parse`] reads it back.
    pub fn text(received_at: &str, event_id: &str) -> String {
        format!("{received_at}{CURSOR_SEPARATOR}{event_id}")
    }
}

/// An effects feed cursor: the `seq` of the last effect seen, a number `>= 0`.
pub fn parse_effect_cursor(v: &str) -> Result<i64, CommandError> {
    parse_seq_cursor(v)
}

/// A cursor that is a row's integer id (the effects feed's `seq`, the audit log's `id`): a
/// number `>= 0`.
pub fn parse_seq_cursor(v: &str) -> Result<i64, CommandError> {
    v.parse::<i64>()
        .ok()
        .filter(|n| *n >= 0)
        .ok_or_else(invalid_cursor)
}

/// A page as the API answers it: `{"data", "has_more", "next_cursor"}`.
#[derive(Debug, Serialize, PartialEq)]
pub struct Page<T> {
    pub data: Vec<T>,
    pub has_more: bool,
    pub next_cursor: Option<String>,
}

impl<T> Page<T> {
    /// The page of `rows`, fetched as `limit + 1` rows so that one more says another page
    /// exists; `next_cursor` is the last kept row's cursor then, and `None` on the last page.
    pub fn of(mut rows: Vec<T>, limit: u32, cursor: impl Fn(&T) -> String) -> Page<T> {
        let has_more = rows.len() > limit as usize;
        rows.truncate(limit as usize);
        let next_cursor = if has_more {
            rows.last().map(cursor)
        } else {
            None
        };
        Page {
            data: rows,
            has_more,
            next_cursor,
        }
    }

    /// The same page with each row turned into what the reply shows.
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            data: self.data.into_iter().map(f).collect(),
            has_more: self.has_more,
            next_cursor: self.next_cursor,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(e: CommandError) -> &'static str {
        match e {
            CommandError::BadRequest { code, .. } => code,
            other => panic!("not a 400: {other:?}"),
        }
    }

    #[test]
    fn limits() {
        assert_eq!(parse_limit("1"), Ok(1));
        assert_eq!(parse_limit("1000"), Ok(1000));
        for bad in ["0", "1001", "-1", "ten", "", "1.5", "99999999999"] {
            assert_eq!(
                code(parse_limit(bad).unwrap_err()),
                "invalid_limit",
                "{bad}"
            );
        }
        match parse_limit("0").unwrap_err() {
            CommandError::BadRequest { message, .. } => assert_eq!(message, "limit is 1 to 1000"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn delivery_cursors_round_trip_and_refuse_anything_else() {
        let text = DeliveryCursor::text("2026-01-02T03:04:05.678Z", "evt_1");
        assert_eq!(text, "2026-01-02T03:04:05.678Z~evt_1");
        assert_eq!(
            DeliveryCursor::parse(&text),
            Ok(DeliveryCursor {
                received_at: "2026-01-02T03:04:05.678Z".into(),
                event_id: "evt_1".into()
            })
        );
        for bad in [
            "",
            "evt_1",
            "2026-01-02T03:04:05Z",
            "2026-01-02T03:04:05Z~",
            "yesterday~evt_1",
            "2026-01-02T03:04:05Z~inv_1",
            "2026-13-02T03:04:05Z~evt_1",
        ] {
            assert_eq!(
                code(DeliveryCursor::parse(bad).unwrap_err()),
                "invalid_cursor",
                "{bad}"
            );
        }
    }

    #[test]
    fn effect_cursors() {
        assert_eq!(parse_effect_cursor("0"), Ok(0));
        assert_eq!(parse_effect_cursor("42"), Ok(42));
        for bad in ["-1", "x", "", "1e3"] {
            assert_eq!(
                code(parse_effect_cursor(bad).unwrap_err()),
                "invalid_cursor"
            );
        }
    }

    #[test]
    fn pages() {
        let page = Page::of(vec![1, 2, 3], 2, |n| format!("c{n}"));
        assert_eq!(
            page,
            Page {
                data: vec![1, 2],
                has_more: true,
                next_cursor: Some("c2".into())
            }
        );
        let last = Page::of(vec![1, 2], 2, |n| format!("c{n}"));
        assert!(!last.has_more);
        assert_eq!(last.next_cursor, None);
        assert_eq!(last.map(|n| n * 10).data, vec![10, 20]);
        assert_eq!(
            serde_json::to_string(&Page::of(vec![7], 1, |_| unreachable!())).unwrap(),
            r#"{"data":[7],"has_more":false,"next_cursor":null}"#
        );
    }
}
