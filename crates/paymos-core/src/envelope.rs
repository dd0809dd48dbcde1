//! The delivery envelope (interface §1 "Envelope"), parsed from the raw body
//! only after the signature has been verified.
//!
//! Unknown event types are accepted (they are stored and acknowledged, a refusal
//! would only burn the sender's retries); only structurally broken envelopes fail.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::ids::{is_valid_event_id, resource_kind_of, ResourceKind};
use crate::statements::push_json_string;

mod wire;
use wire::{Field, Top};

/// Longest accepted `type` string.
pub const MAX_EVENT_TYPE_LEN: usize = 128;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Envelope {
    pub event_id: String,
    /// The full `<category>.<action>` string.
    pub event_type: String,
    pub category: String,
    pub action: String,
    pub created: i64,
    pub livemode: bool,
    pub resource_id: String,
    /// From `data.id`'s prefix; equals the category's kind when the category is known.
    pub resource_kind: ResourceKind,
    /// `data`'s string fields that a transition records; each `None` if absent, not a
    /// string, or blank ([`given`]). (The rest of `data` is not kept.)
    pub order_ref: Option<String>,
    pub amount: Option<String>,
    pub currency: Option<String>,
}

/// What the consumer decides a delivery from (interface §3), read from its envelope at
/// receipt and carried in its queue message: with them the consumer loads nothing before its
/// transaction, which sees the rest itself (a copy already processed, a delivery gone, a
/// payment waiting for a refund: `statements::delivery_open!`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Facts {
    #[serde(rename = "type")]
    pub event_type: String,
    pub resource_id: String,
    pub livemode: bool,
    /// As the envelope's: a blank one read from a message (data from a queue) is `None`.
    #[serde(
        default,
        deserialize_with = "given_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub order_ref: Option<String>,
    #[serde(
        default,
        deserialize_with = "given_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub amount: Option<String>,
    #[serde(
        default,
        deserialize_with = "given_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub currency: Option<String>,
}

/// Facts longer than this stay out of the message, and the consumer loads the body instead:
/// a queue message holds at most 128 KB, a body may hold more, and a message's bytes are
/// paid for on every delivery of it.
pub const MAX_FACTS_BYTES: usize = 2048;

impl From<&Envelope> for Facts {
    fn from(e: &Envelope) -> Facts {
        Facts {
            event_type: e.event_type.clone(),
            resource_id: e.resource_id.clone(),
            livemode: e.livemode,
            order_ref: e.order_ref.clone(),
            amount: e.amount.clone(),
            currency: e.currency.clone(),
        }
    }
}

impl Facts {
    /// The envelope's facts, if they are short enough to travel ([`MAX_FACTS_BYTES`]).
    pub fn of(e: &Envelope) -> Option<Facts> {
        let facts = Facts::from(e);
        let len = |t: &Option<String>| t.as_ref().map_or(0, String::len);
        let size = facts.event_type.len()
            + facts.resource_id.len()
            + len(&facts.order_ref)
            + len(&facts.amount)
            + len(&facts.currency);
        (size <= MAX_FACTS_BYTES).then_some(facts)
    }

    /// Appends the facts as JSON text, byte for byte as `serde_json::to_string` writes them
    /// (a test holds it so): the receive path writes them into a new delivery's queue
    /// message without compiling serde_json's writer on an isolate's first request.
    pub fn push_json(&self, out: &mut String) {
        out.push_str("{\"type\":");
        push_json_string(out, &self.event_type);
        out.push_str(",\"resource_id\":");
        push_json_string(out, &self.resource_id);
        out.push_str(if self.livemode {
            ",\"livemode\":true"
        } else {
            ",\"livemode\":false"
        });
        for (name, value) in [
            ("order_ref", &self.order_ref),
            ("amount", &self.amount),
            ("currency", &self.currency),
        ] {
            if let Some(v) = value {
                out.push_str(",\"");
                out.push_str(name);
                out.push_str("\":");
                push_json_string(out, v);
            }
        }
        out.push('}');
    }
}

/// Messages name the field, never its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum EnvelopeError {
    #[error("body is not a UTF-8 JSON object")]
    NotJson,
    #[error("missing field `{0}`")]
    MissingField(&'static str),
    #[error("invalid field `{0}`")]
    InvalidField(&'static str),
    #[error("malformed event id")]
    InvalidEventId,
    #[error("`data.id` is not a known resource id")]
    InvalidResourceId,
    #[error("`data.id` is not a resource of the event's category")]
    ResourceMismatch,
    #[error("X-Webhook-Id header missing")]
    WebhookIdMissing,
    #[error("X-Webhook-Id does not match the body's event_id")]
    IdMismatch,
}

impl EnvelopeError {
    /// Stable code for JSON error replies.
    pub fn code(&self) -> &'static str {
        match self {
            EnvelopeError::NotJson => "invalid_json",
            EnvelopeError::MissingField(_) => "missing_field",
            EnvelopeError::InvalidField(_) => "invalid_field",
            EnvelopeError::InvalidEventId => "invalid_event_id",
            EnvelopeError::InvalidResourceId => "invalid_resource_id",
            EnvelopeError::ResourceMismatch => "resource_mismatch",
            EnvelopeError::WebhookIdMissing => "webhook_id_missing",
            EnvelopeError::IdMismatch => "id_mismatch",
        }
    }
}

fn required<'f, 'a>(
    field: &'f Option<Field<'a>>,
    name: &'static str,
) -> Result<&'f Field<'a>, EnvelopeError> {
    field.as_ref().ok_or(EnvelopeError::MissingField(name))
}

fn required_str<'f>(
    field: &'f Option<Field<'_>>,
    name: &'static str,
) -> Result<&'f str, EnvelopeError> {
    required(field, name)?
        .as_str()
        .ok_or(EnvelopeError::InvalidField(name))
}

/// One dot-separated word of a type: ASCII letters, digits, `_` or `-`.
fn is_type_word(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Splits `<category>.<action>` at its first dot: two or more words (ASCII letters, digits,
/// `_`, `-`) joined by single dots, at most [`MAX_EVENT_TYPE_LEN`] in all; `None` if it does
/// not have that shape. Every Paymos type is lowercase `word.word`; a versioned
/// `invoice.paid.v2` or a `customer.subscription.created` is an unknown type, stored and
/// acknowledged, not refused (a refusal only burns the sender's retries).
pub fn split_event_type(t: &str) -> Option<(&str, &str)> {
    if t.len() > MAX_EVENT_TYPE_LEN {
        return None;
    }
    let (category, action) = t.split_once('.')?;
    (is_type_word(category) && action.split('.').all(is_type_word)).then_some((category, action))
}

/// A header's value without the spaces and tabs around it, which are not part of it (RFC 9110
/// §5.5) and which the runtime does not strip from a request's headers: the Worker reads
/// `X-Webhook-Id` through it once, for the envelope and the log line alike.
pub fn header_value(raw: &str) -> &str {
    raw.trim_matches([' ', '\t'])
}

/// Parses and checks the envelope. `header_event_id` is `X-Webhook-Id` as read
/// ([`header_value`]), which must be present, well-formed and equal to the body's `event_id`.
pub fn parse_envelope(
    body: &[u8],
    header_event_id: Option<&str>,
) -> Result<Envelope, EnvelopeError> {
    let header_id = header_event_id.ok_or(EnvelopeError::WebhookIdMissing)?;
    if !is_valid_event_id(header_id) {
        return Err(EnvelopeError::InvalidEventId);
    }

    // one pass over the body, for the fields the checks read (`wire`); checked below, in
    // the contract's order
    let top: Top = match wire::scan(body) {
        Some(top) => top,
        None => serde_json::from_slice(body).map_err(|_| EnvelopeError::NotJson)?,
    };

    let event_id = required_str(&top.event_id, "event_id")?;
    if !is_valid_event_id(event_id) {
        return Err(EnvelopeError::InvalidEventId);
    }
    if event_id != header_id {
        return Err(EnvelopeError::IdMismatch);
    }

    let event_type = required_str(&top.event_type, "type")?;
    let (category, action) =
        split_event_type(event_type).ok_or(EnvelopeError::InvalidField("type"))?;

    // Integers only: 1.0, "1" and values beyond i64 are refused.
    let created = match required(&top.created, "created")? {
        Field::Int(i) => *i,
        _ => return Err(EnvelopeError::InvalidField("created")),
    };

    // Optional; an explicit null counts as absent.
    let livemode = match top.livemode {
        None | Some(Field::Null) => false,
        Some(Field::Bool(b)) => b,
        Some(_) => return Err(EnvelopeError::InvalidField("livemode")),
    };

    let data = match top.data {
        None => return Err(EnvelopeError::MissingField("data")),
        Some(Field::Object(d)) => *d,
        Some(_) => return Err(EnvelopeError::InvalidField("data")),
    };
    let resource_id = required_str(&data.id, "id").map_err(|e| match e {
        EnvelopeError::MissingField(_) => EnvelopeError::MissingField("data.id"),
        _ => EnvelopeError::InvalidField("data.id"),
    })?;
    let resource_kind = resource_kind_of(resource_id).ok_or(EnvelopeError::InvalidResourceId)?;
    check_resource(event_type, resource_kind)?;

    Ok(Envelope {
        event_id: event_id.to_owned(),
        event_type: event_type.to_owned(),
        category: category.to_owned(),
        action: action.to_owned(),
        created,
        livemode,
        resource_id: resource_id.to_owned(),
        resource_kind,
        order_ref: given(data.order_ref.and_then(Field::into_string)),
        amount: given(data.amount.and_then(Field::into_string)),
        currency: given(data.currency.and_then(Field::into_string)),
    })
}

/// A fact the provider gave (an `order_ref`, an amount, a currency), as it gave it; blank
/// text (empty, or only whitespace) is none given, as the admin API reads an operator's: a
/// fulfilment sent with an `order_ref` of `""` would ship to no order, and the real one,
/// learned later, could never replace it (a known `order_ref` is never overwritten).
pub fn given(text: Option<String>) -> Option<String> {
    text.filter(|t| !t.trim().is_empty())
}

/// [`given`] for serde: a provider's field, `None` when absent, null or blank.
pub fn given_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    <Option<String> as serde::Deserialize>::deserialize(d).map(given)
}

/// A known event type about another category's resource (`invoice.paid` on a `wdr_` id) is
/// refused: no transition could apply it. An unknown type is never refused, whatever its
/// resource (interface §1): it is stored and ignored as `unknown_event_type`.
fn check_resource(event_type: &str, resource_kind: ResourceKind) -> Result<(), EnvelopeError> {
    match crate::machine::target_state(event_type) {
        Some((kind, _)) if kind != resource_kind => Err(EnvelopeError::ResourceMismatch),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    const CONTRACT_BODY: &str = r#"{"event_id":"evt_9Kq2xT4mLp","type":"invoice.paid","created":1764449990,"livemode":false,"data":{"id":"inv_7Hc3pQ","object":"invoice","status":"paid","amount":"49.00","currency":"USDT","order_ref":"order_1042"}}"#;
    const ID: &str = "evt_9Kq2xT4mLp";

    fn base() -> Value {
        serde_json::from_str(CONTRACT_BODY).unwrap()
    }

    fn parse_v(v: &Value) -> Result<Envelope, EnvelopeError> {
        parse_envelope(v.to_string().as_bytes(), Some(ID))
    }

    fn with(path: &[&str], new: Option<Value>) -> Value {
        let mut v = base();
        let mut cur = &mut v;
        for p in &path[..path.len() - 1] {
            cur = cur.get_mut(*p).unwrap();
        }
        let obj = cur.as_object_mut().unwrap();
        let last = path[path.len() - 1];
        match new {
            Some(x) => {
                obj.insert(last.to_string(), x);
            }
            None => {
                obj.remove(last);
            }
        }
        v
    }

    #[test]
    fn facts_travel_up_to_their_limit() {
        let e = parse_envelope(CONTRACT_BODY.as_bytes(), Some(ID)).unwrap();
        let facts = Facts::of(&e).unwrap();
        assert_eq!(
            serde_json::to_value(&facts).unwrap(),
            json!({"type": "invoice.paid", "resource_id": "inv_7Hc3pQ", "livemode": false,
                   "order_ref": "order_1042", "amount": "49.00", "currency": "USDT"})
        );
        let fits = MAX_FACTS_BYTES - "invoice.paid".len() - "inv_7Hc3pQ".len() - 9;
        for (order_ref, travels) in [(fits, true), (fits + 1, false)] {
            let v = with(&["data", "order_ref"], Some(json!("o".repeat(order_ref))));
            let e = parse_v(&v).unwrap();
            assert_eq!(Facts::of(&e).is_some(), travels, "order_ref of {order_ref}");
        }
        // absent facts stay out of the message's JSON
        let v = with(&["data", "order_ref"], Some(json!(" ")));
        let text = serde_json::to_string(&Facts::of(&parse_v(&v).unwrap())).unwrap();
        assert!(!text.contains("order_ref"), "{text}");
    }

    #[test]
    fn facts_are_written_as_serde_json_writes_them() {
        let texts = ["", "order_1042", "o\n\"\\é\u{1}\u{7f}\u{2028}😀", " x "];
        for (i, text) in texts.iter().enumerate() {
            let some = |k: usize| (i % 2 == k).then(|| (*text).to_string());
            let facts = Facts {
                event_type: format!("invoice.{text}"),
                resource_id: format!("inv_{text}"),
                livemode: i % 2 == 0,
                order_ref: some(0),
                amount: some(1),
                currency: Some((*text).to_string()),
            };
            let mut ours = String::new();
            facts.push_json(&mut ours);
            assert_eq!(ours, serde_json::to_string(&facts).unwrap());
            // read back as written, but a blank field, which a message's reader takes as absent
            let read = Facts {
                order_ref: given(facts.order_ref.clone()),
                amount: given(facts.amount.clone()),
                currency: given(facts.currency.clone()),
                ..facts.clone()
            };
            assert_eq!(serde_json::from_str::<Facts>(&ours).unwrap(), read);
        }
    }

    #[test]
    fn a_message_s_blank_or_null_facts_read_as_absent() {
        let text = r#"{"type":"invoice.paid","resource_id":"inv_1","livemode":false,
            "order_ref":" \t","amount":null,"currency":"USDT"}"#;
        let facts: Facts = serde_json::from_str(text).unwrap();
        assert_eq!(
            (facts.order_ref, facts.amount, facts.currency.as_deref()),
            (None, None, Some("USDT"))
        );
    }

    #[test]
    fn contract_body_parses() {
        let e = parse_envelope(CONTRACT_BODY.as_bytes(), Some(ID)).unwrap();
        assert_eq!(e.event_id, ID);
        assert_eq!(e.event_type, "invoice.paid");
        assert_eq!(e.category, "invoice");
        assert_eq!(e.action, "paid");
        assert_eq!(e.created, 1764449990);
        assert!(!e.livemode);
        assert_eq!(e.resource_id, "inv_7Hc3pQ");
        assert_eq!(e.resource_kind, ResourceKind::Invoice);
        assert_eq!(e.order_ref.as_deref(), Some("order_1042"));
        assert_eq!(e.amount.as_deref(), Some("49.00"));
        assert_eq!(e.currency.as_deref(), Some("USDT"));
    }

    #[test]
    fn data_strings_only_for_strings() {
        let v = with(&["data", "amount"], Some(json!(49)));
        let e = parse_v(&v).unwrap();
        assert_eq!(
            (e.amount, e.order_ref.as_deref()),
            (None, Some("order_1042"))
        );
        let v = with(&["data", "currency"], Some(json!({"currency": "USDT"})));
        assert_eq!(parse_v(&v).unwrap().currency, None);
        let v = with(&["data", "order_ref"], None);
        assert_eq!(parse_v(&v).unwrap().order_ref, None);
    }

    /// A blank `order_ref` (or amount, currency) is none given: the fulfilment waits for the
    /// real one rather than ship to no order; one with text is kept as given, spaces and all.
    #[test]
    fn blank_data_strings_are_none_given() {
        for blank in ["", " ", "\t\n", "\u{3000}"] {
            let mut v = with(&["data", "order_ref"], Some(json!(blank)));
            v["data"]["amount"] = json!(blank);
            let e = parse_v(&v).unwrap();
            assert_eq!((e.order_ref, e.amount), (None, None), "{blank:?}");
        }
        let v = with(&["data", "order_ref"], Some(json!(" order_1 ")));
        assert_eq!(parse_v(&v).unwrap().order_ref.as_deref(), Some(" order_1 "));
    }

    #[test]
    fn escapes_read_as_their_characters() {
        let body = CONTRACT_BODY
            .replace(r#""type""#, r#""typ\u0065""#)
            .replace(r#""order_1042""#, r#""order_\u00e91042\n""#);
        let e = parse_envelope(body.as_bytes(), Some(ID)).unwrap();
        assert_eq!(e.event_type, "invoice.paid");
        assert_eq!(e.order_ref.as_deref(), Some("order_\u{e9}1042\n"));
    }

    /// Of two fields with one name the last counts, as in a `serde_json::Map` (what parsed
    /// the stored bodies before): at the top level, in `data`, and for `data` itself.
    #[test]
    fn the_last_of_two_fields_counts() {
        let twice = |body: &str| parse_envelope(body.as_bytes(), Some(ID));
        let e = twice(&CONTRACT_BODY.replace(
            r#""type":"invoice.paid""#,
            r#""type":"invoice.created","type":"invoice.paid""#,
        ))
        .unwrap();
        assert_eq!(e.event_type, "invoice.paid");
        let e = twice(
            &CONTRACT_BODY.replace(r#""amount":"49.00""#, r#""amount":"1.00","amount":"49.00""#),
        )
        .unwrap();
        assert_eq!(e.amount.as_deref(), Some("49.00"));
        let body = CONTRACT_BODY.replace(
            r#","data":{"#,
            r#","data":{"id":"inv_x","order_ref":"a"},"data":{"#,
        );
        let e = twice(&body).unwrap();
        assert_eq!(
            (e.resource_id.as_str(), e.order_ref.as_deref()),
            ("inv_7Hc3pQ", Some("order_1042"))
        );
        let body = CONTRACT_BODY.replace(r#""livemode":false"#, r#""livemode":false,"livemode":7"#);
        assert_eq!(twice(&body), Err(EnvelopeError::InvalidField("livemode")));
    }

    #[test]
    fn livemode_optional() {
        assert!(!parse_v(&with(&["livemode"], None)).unwrap().livemode);
        assert!(
            !parse_v(&with(&["livemode"], Some(Value::Null)))
                .unwrap()
                .livemode
        );
        assert!(
            parse_v(&with(&["livemode"], Some(json!(true))))
                .unwrap()
                .livemode
        );
        for bad in [json!("true"), json!(1), json!({})] {
            assert_eq!(
                parse_v(&with(&["livemode"], Some(bad))),
                Err(EnvelopeError::InvalidField("livemode"))
            );
        }
    }

    #[test]
    fn unknown_fields_ignored() {
        let mut v = base();
        v["api_version"] = json!("2025-01-01");
        v["extra"] = json!({"nested": [1, 2, 3]});
        assert!(parse_v(&v).is_ok());
    }

    #[test]
    fn not_json() {
        for body in [
            &b""[..],
            b"not json",
            b"[]",
            b"\"string\"",
            b"42",
            b"null",
            b"{\"event_id\":",
            b"\xff\xfe{}",
            b"{} {}",
        ] {
            assert_eq!(
                parse_envelope(body, Some(ID)),
                Err(EnvelopeError::NotJson),
                "{body:?}"
            );
        }
        // Invalid UTF-8 inside a string.
        let mut b = CONTRACT_BODY.as_bytes().to_vec();
        let pos = CONTRACT_BODY.find("USDT").unwrap();
        b[pos] = 0xC3;
        assert_eq!(parse_envelope(&b, Some(ID)), Err(EnvelopeError::NotJson));
    }

    #[test]
    fn missing_fields() {
        for (path, name) in [
            (&["event_id"][..], "event_id"),
            (&["type"][..], "type"),
            (&["created"][..], "created"),
            (&["data"][..], "data"),
            (&["data", "id"][..], "data.id"),
        ] {
            let e = parse_v(&with(path, None)).unwrap_err();
            assert_eq!(e, EnvelopeError::MissingField(name));
            assert_eq!(e.code(), "missing_field");
            assert!(e.to_string().contains(name));
        }
    }

    #[test]
    fn wrong_field_types() {
        for (path, val, name) in [
            (&["event_id"][..], json!(5), "event_id"),
            (&["type"][..], json!(null), "type"),
            (&["created"][..], json!("1764449990"), "created"),
            (&["created"][..], json!(1764449990.0), "created"),
            (&["created"][..], json!(1.5), "created"),
            (&["created"][..], json!(u64::MAX), "created"),
            (&["created"][..], json!(null), "created"),
            (&["data"][..], json!("inv_x"), "data"),
            (&["data"][..], json!([]), "data"),
            (&["data", "id"][..], json!(7), "data.id"),
        ] {
            assert_eq!(
                parse_v(&with(path, Some(val))),
                Err(EnvelopeError::InvalidField(name))
            );
        }
        // Integer forms that are fine.
        assert_eq!(
            parse_v(&with(&["created"], Some(json!(0))))
                .unwrap()
                .created,
            0
        );
        assert_eq!(
            parse_v(&with(&["created"], Some(json!(-5))))
                .unwrap()
                .created,
            -5
        );
        assert_eq!(
            parse_v(&with(&["created"], Some(json!(i64::MAX))))
                .unwrap()
                .created,
            i64::MAX
        );
        // Exponent notation is a float in JSON terms.
        let b = CONTRACT_BODY.replace("1764449990", "1.76444999e9");
        assert_eq!(
            parse_envelope(b.as_bytes(), Some(ID)),
            Err(EnvelopeError::InvalidField("created"))
        );
    }

    #[test]
    fn event_type_shape() {
        for bad in [
            "",
            "invoice",
            "invoice.",
            ".paid",
            "invoice.paid.",
            "invoice paid",
            "invoice..paid",
            "invoice.pa id",
            " invoice.paid",
            "invoice.paid ",
            "inv\u{e9}.paid",
            "invoice/paid",
        ] {
            assert_eq!(
                parse_v(&with(&["type"], Some(json!(bad)))),
                Err(EnvelopeError::InvalidField("type")),
                "{bad:?}"
            );
        }
        let long_ok = format!("invoice.{}", "a".repeat(MAX_EVENT_TYPE_LEN - 8));
        assert_eq!(long_ok.len(), MAX_EVENT_TYPE_LEN);
        assert!(parse_v(&with(&["type"], Some(json!(long_ok)))).is_ok());
        let too_long = format!("invoice.{}", "a".repeat(MAX_EVENT_TYPE_LEN - 7));
        assert_eq!(
            parse_v(&with(&["type"], Some(json!(too_long)))),
            Err(EnvelopeError::InvalidField("type"))
        );
        let e = parse_v(&with(&["type"], Some(json!("invoice.paid_v2_2")))).unwrap();
        assert_eq!(
            (e.category.as_str(), e.action.as_str()),
            ("invoice", "paid_v2_2")
        );
        // other shapes of an unknown type: stored and acknowledged, never refused
        for (odd, category, action) in [
            ("invoice.paid.v2", "invoice", "paid.v2"),
            (
                "customer.subscription.created",
                "customer",
                "subscription.created",
            ),
            ("Invoice.Paid", "Invoice", "Paid"),
            ("invoice.payment-failed", "invoice", "payment-failed"),
        ] {
            let e = parse_v(&with(&["type"], Some(json!(odd)))).expect(odd);
            assert_eq!((e.category.as_str(), e.action.as_str()), (category, action));
        }
    }

    #[test]
    fn unknown_types_accepted() {
        let e = parse_v(&with(&["type"], Some(json!("invoice.disputed")))).unwrap();
        assert_eq!(e.action, "disputed");
        // Unknown category: any known resource prefix is fine.
        let mut v = with(&["type"], Some(json!("payout.sent")));
        v["data"]["id"] = json!("wdr_abc");
        let e = parse_v(&v).unwrap();
        assert_eq!(e.category, "payout");
        assert_eq!(e.resource_kind, ResourceKind::Withdrawal);
        // … but an unknown prefix is not.
        v["data"]["id"] = json!("po_abc");
        assert_eq!(parse_v(&v), Err(EnvelopeError::InvalidResourceId));
    }

    #[test]
    fn resource_ids_checked() {
        for bad in ["", "inv_", "po_123", "inv_a-b", "INV_abc", "evt_abc"] {
            assert_eq!(
                parse_v(&with(&["data", "id"], Some(json!(bad)))),
                Err(EnvelopeError::InvalidResourceId),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_known_type_must_be_about_its_category() {
        for (t, id, ok) in [
            ("invoice.paid", "wdr_1", false),
            ("invoice.paid", "pcd_1", false),
            ("withdrawal.completed", "wdr_1", true),
            ("withdrawal.completed", "inv_1", false),
            ("deposit.confirmed", "pcd_1", true),
            ("deposit.confirmed", "wdr_1", false),
            ("deposit.whatever", "inv_1", true),
            ("invoice.bogus", "wdr_1", true),
            ("withdrawal.refunded", "inv_1", true),
        ] {
            let mut v = with(&["type"], Some(json!(t)));
            v["data"]["id"] = json!(id);
            let r = parse_v(&v);
            if ok {
                assert!(r.is_ok(), "{t} {id}");
            } else {
                assert_eq!(r, Err(EnvelopeError::ResourceMismatch), "{t} {id}");
            }
        }
    }

    #[test]
    fn header_id_rules() {
        let b = CONTRACT_BODY.as_bytes();
        assert_eq!(
            parse_envelope(b, None),
            Err(EnvelopeError::WebhookIdMissing)
        );
        assert_eq!(
            parse_envelope(b, Some("")),
            Err(EnvelopeError::InvalidEventId)
        );
        assert_eq!(
            parse_envelope(b, Some("evt_9Kq2-T4mLp")),
            Err(EnvelopeError::InvalidEventId)
        );
        assert_eq!(
            parse_envelope(b, Some("evt_9Kq2xT4mLq")),
            Err(EnvelopeError::IdMismatch)
        );
        // Ids are case-sensitive.
        assert_eq!(
            parse_envelope(b, Some("evt_9kq2xt4mlp")),
            Err(EnvelopeError::IdMismatch)
        );
        // Header checks come before body checks.
        assert_eq!(
            parse_envelope(b"junk", None),
            Err(EnvelopeError::WebhookIdMissing)
        );
        // Spaces and tabs around a field value are not part of it (RFC 9110 §5.5); inside
        // it, or any other whitespace, they are.
        let id = "evt_9Kq2xT4mLp";
        for padded in [format!("  {id} "), format!("\t{id}\t"), format!(" \t{id}")] {
            let read = header_value(&padded);
            assert_eq!(parse_envelope(b, Some(read)).unwrap().event_id, id);
        }
        for bad in [
            " ",
            "evt_9Kq2x T4mLp",
            "\u{a0}evt_9Kq2xT4mLp",
            "evt_9Kq2xT4mLp\n",
        ] {
            assert_eq!(
                parse_envelope(b, Some(header_value(bad))),
                Err(EnvelopeError::InvalidEventId),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn body_event_id_rules() {
        assert_eq!(
            parse_v(&with(&["event_id"], Some(json!("evt_bad-id")))),
            Err(EnvelopeError::InvalidEventId)
        );
        assert_eq!(
            parse_v(&with(&["event_id"], Some(json!("inv_9Kq2xT4mLp")))),
            Err(EnvelopeError::InvalidEventId)
        );
    }

    #[test]
    fn codes_and_messages() {
        use EnvelopeError::*;
        let all = [
            NotJson,
            MissingField("x"),
            InvalidField("x"),
            InvalidEventId,
            InvalidResourceId,
            ResourceMismatch,
            WebhookIdMissing,
            IdMismatch,
        ];
        let codes: Vec<_> = all.iter().map(|e| e.code()).collect();
        assert_eq!(
            codes,
            [
                "invalid_json",
                "missing_field",
                "invalid_field",
                "invalid_event_id",
                "invalid_resource_id",
                "resource_mismatch",
                "webhook_id_missing",
                "id_mismatch"
            ]
        );
        // Values never echoed.
        let e = parse_envelope(CONTRACT_BODY.as_bytes(), Some("evt_SECRETish")).unwrap_err();
        assert!(!e.to_string().contains("SECRETish"));
        let e = parse_v(&with(&["type"], Some(json!("Bad Value")))).unwrap_err();
        assert!(!e.to_string().contains("Bad Value") && e.to_string().contains("type"));
    }

    #[test]
    fn envelope_serializes() {
        let e = parse_envelope(CONTRACT_BODY.as_bytes(), Some(ID)).unwrap();
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["resource_kind"], "invoice");
        assert_eq!(v["event_type"], "invoice.paid");
    }
}
