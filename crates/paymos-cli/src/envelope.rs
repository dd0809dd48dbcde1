//! Building contract envelopes (interface §1 "Envelope") and signing them.
//!
//! The body is serialised once, with the fields in the contract's order, and those exact
//! bytes are what gets signed and sent on every attempt.

use paymos_core::{resource_kind_of, signature_header, ResourceKind, Secret};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use crate::error::CliError;
use crate::ids::random_id;

/// What to build; `None` fields are filled in (random ids, the current time).
#[derive(Debug, Clone, Default)]
pub struct EventSpec {
    pub event_type: String,
    pub event_id: Option<String>,
    pub resource_id: Option<String>,
    /// Unix seconds; defaults to now.
    pub created: Option<i64>,
    /// Merged into `data` last, so it can override any generated field (but not `id`).
    pub extra_data: Option<Map<String, Value>>,
    /// Invoice objects only: defaults to `order_<resource id without prefix>`.
    pub order_ref: Option<String>,
}

/// A built envelope: its ids and the exact body bytes to sign and send.
#[derive(Debug, Clone)]
pub struct Built {
    pub event_id: String,
    pub event_type: String,
    pub resource_id: String,
    pub created: i64,
    pub body: Vec<u8>,
}

impl Built {
    /// The parsed body (for reading back `data.order_ref`, `data.amount`, …).
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// A string field of `data`.
    pub fn data_str(&self, key: &str) -> Option<String> {
        self.value()["data"][key].as_str().map(str::to_string)
    }

    /// `X-Webhook-Signature` for these bytes at `timestamp`, one `v1` per secret, in order.
    pub fn signature(&self, secrets: &[Secret], timestamp: i64) -> String {
        let refs: Vec<&Secret> = secrets.iter().collect();
        signature_header(&refs, timestamp, &self.body)
    }
}

/// Insertion-ordered JSON object, so bodies read like the contract's examples without
/// switching serde_json's `preserve_order` on for the whole workspace.
struct Ordered(Vec<(String, Value)>);

impl Ordered {
    fn set(&mut self, key: &str, value: Value) {
        match self.0.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key.to_string(), value)),
        }
    }
}

impl Serialize for Ordered {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// Splits `<category>.<action>` with the receiver's own rule (`paymos_core::split_event_type`).
pub fn split_event_type(t: &str) -> Result<(&str, &str), CliError> {
    paymos_core::split_event_type(t).ok_or_else(|| {
            CliError::usage(format!(
                "event type {t:?} is not <category>.<action> (e.g. invoice.paid, withdrawal.completed, deposit.confirmed)"
            ))
        })
}

/// Parses `--data`: it must be a JSON object.
pub fn parse_data_arg(s: &str) -> Result<Map<String, Value>, CliError> {
    match serde_json::from_str::<Value>(s) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(CliError::usage(
            "--data must be a JSON object, e.g. '{\"amount\":\"12.50\"}'",
        )),
        Err(e) => Err(CliError::usage(format!("--data is not valid JSON: {e}"))),
    }
}

/// Builds the envelope for `spec`. Invoice objects carry `amount`, `currency` and
/// `order_ref`; `data.status` is the event's action (`invoice.paid` → `"paid"`).
pub fn build_envelope(spec: &EventSpec) -> Result<Built, CliError> {
    let (category, action) = split_event_type(&spec.event_type)?;
    let kind = ResourceKind::from_category(category);
    let resource_id = resource_id_for(spec, category, kind)?;
    let event_id = event_id_for(spec)?;
    let created = spec.created.unwrap_or_else(crate::now_unix);
    let data = data_object(spec, &resource_id, category, action, kind);
    let head: [(&str, Value); 4] = [
        ("event_id", Value::from(event_id.clone())),
        ("type", Value::from(spec.event_type.clone())),
        ("created", Value::from(created)),
        ("livemode", Value::from(false)),
    ];
    Ok(Built {
        event_id,
        event_type: spec.event_type.clone(),
        resource_id,
        created,
        body: envelope_bytes(&head, &data),
    })
}

/// `--resource` when given (for a known event type, an id of the kind its category is about),
/// else a random id of the category's kind; an unknown category needs `--resource`.
fn resource_id_for(
    spec: &EventSpec,
    category: &str,
    kind: Option<ResourceKind>,
) -> Result<String, CliError> {
    match (&spec.resource_id, kind) {
        (Some(id), _) => {
            let Some(id_kind) = resource_kind_of(id) else {
                return Err(CliError::usage(format!(
                    "{id:?} is not a resource id (inv_, wdr_ or pcd_ followed by 1 to 64 letters or digits)"
                )));
            };
            // the receiver's rule: only a known type must be about its category's resource
            if let Some((k, _)) = paymos_core::machine::target_state(&spec.event_type) {
                if k != id_kind {
                    return Err(CliError::usage(format!(
                        "{id} is a {} id but {} events are about {} resources ({}…)",
                        id_kind.as_str(),
                        category,
                        k.as_str(),
                        k.prefix()
                    )));
                }
            }
            Ok(id.clone())
        }
        (None, Some(k)) => Ok(random_id(k.prefix())),
        (None, None) => Err(CliError::usage(format!(
            "{category} is not a category the contract knows (invoice, withdrawal, deposit): pass --resource with an inv_, wdr_ or pcd_ id"
        ))),
    }
}

/// `--event-id` when given and valid, else a random `evt_` id.
fn event_id_for(spec: &EventSpec) -> Result<String, CliError> {
    match &spec.event_id {
        Some(id) if paymos_core::is_valid_event_id(id) => Ok(id.clone()),
        Some(id) => Err(CliError::usage(format!(
            "{id:?} is not an event id (evt_ followed by 1 to 64 letters or digits)"
        ))),
        None => Ok(random_id("evt_")),
    }
}

/// `data`: id, object, status (the action), an invoice's amount, currency and order_ref,
/// then `--data` merged over them (except `id`).
fn data_object(
    spec: &EventSpec,
    resource_id: &str,
    category: &str,
    action: &str,
    kind: Option<ResourceKind>,
) -> Ordered {
    let object = kind.map(|k| k.as_str()).unwrap_or(category);
    let mut data = Ordered(Vec::new());
    data.set("id", Value::from(resource_id));
    data.set("object", Value::from(object));
    data.set("status", Value::from(action));
    if kind == Some(ResourceKind::Invoice) {
        let order_ref = spec
            .order_ref
            .clone()
            .unwrap_or_else(|| format!("order_{}", &resource_id[4..]));
        data.set("amount", Value::from("49.00"));
        data.set("currency", Value::from("USDT"));
        data.set("order_ref", Value::from(order_ref));
    }
    if let Some(extra) = &spec.extra_data {
        for (k, v) in extra {
            if k == "id" {
                continue; // the resource id comes from --resource, so both stay consistent
            }
            data.set(k, v.clone());
        }
    }
    data
}

/// The body's bytes: the head fields in the contract's order, then `data`; serialised once,
/// these exact bytes are signed and sent on every attempt.
fn envelope_bytes(head: &[(&str, Value)], data: &Ordered) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    let mut ser = serde_json::Serializer::new(&mut out);
    let mut m = ser.serialize_map(Some(5)).expect("in-memory");
    for (k, v) in head {
        m.serialize_entry(k, v).expect("in-memory");
    }
    m.serialize_entry("data", data).expect("in-memory");
    SerializeMap::end(m).expect("in-memory");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use paymos_core::{parse_envelope, verify, SecretSet};

    const NEW: &str = "whsec_test_new_6f1d2a9c";
    const OLD: &str = "whsec_test_old_03b7e4aa";
    const CONTRACT_BODY: &str = r#"{"event_id":"evt_9Kq2xT4mLp","type":"invoice.paid","created":1764449990,"livemode":false,"data":{"id":"inv_7Hc3pQ","object":"invoice","status":"paid","amount":"49.00","currency":"USDT","order_ref":"order_1042"}}"#;

    fn contract_spec() -> EventSpec {
        EventSpec {
            event_type: "invoice.paid".into(),
            event_id: Some("evt_9Kq2xT4mLp".into()),
            resource_id: Some("inv_7Hc3pQ".into()),
            created: Some(1764449990),
            order_ref: Some("order_1042".into()),
            extra_data: None,
        }
    }

    #[test]
    fn reproduces_the_contract_body_and_vector() {
        let b = build_envelope(&contract_spec()).unwrap();
        assert_eq!(std::str::from_utf8(&b.body).unwrap(), CONTRACT_BODY);
        let h = b.signature(&[Secret::new(NEW)], 1764450000);
        assert_eq!(
            h,
            "t=1764450000,v1=80ba6d2ac4725a807b1570f1407b0c5efde893bb29315d9861967a9c5afe0c86"
        );
    }

    #[test]
    fn rotation_header_carries_new_then_old() {
        let b = build_envelope(&contract_spec()).unwrap();
        let h = b.signature(&[Secret::new(NEW), Secret::new(OLD)], 1764450000);
        assert_eq!(
            h,
            "t=1764450000,v1=80ba6d2ac4725a807b1570f1407b0c5efde893bb29315d9861967a9c5afe0c86,\
             v1=bc9cc7d8599f46563d7c9bed1f394b9aa7100e35121ccb50ed69aadc3002733b"
        );
        // A receiver holding only the old secret, or only the new one, accepts it.
        for held in [NEW, OLD] {
            let set = SecretSet::parse(held).unwrap();
            assert!(verify(Some(&h), &b.body, &set, 1764450000, 300).is_ok());
        }
        let other = SecretSet::parse("whsec_other").unwrap();
        assert!(verify(Some(&h), &b.body, &other, 1764450000, 300).is_err());
    }

    #[test]
    fn generated_envelopes_pass_the_receivers_parser() {
        for t in [
            "invoice.paid",
            "invoice.confirming",
            "withdrawal.completed",
            "deposit.confirmed",
        ] {
            let b = build_envelope(&EventSpec {
                event_type: t.into(),
                ..Default::default()
            })
            .unwrap();
            let e = parse_envelope(&b.body, Some(&b.event_id)).unwrap();
            assert_eq!(e.event_type, t);
            assert_eq!(e.resource_id, b.resource_id);
            // the receiver's parser keeps only the strings a transition records
            assert_eq!(b.data_str("status").as_deref(), t.split('.').nth(1));
            let is_invoice = t.starts_with("invoice.");
            assert_eq!(e.amount.is_some(), is_invoice);
            assert_eq!(e.currency.is_some(), is_invoice);
            if is_invoice {
                assert_eq!(
                    e.order_ref.unwrap(),
                    format!("order_{}", &b.resource_id[4..])
                );
            }
            assert!((crate::now_unix() - b.created).abs() < 5);
        }
    }

    #[test]
    fn data_is_merged_but_id_stays() {
        let extra =
            parse_data_arg(r#"{"amount":"12.50","note":{"a":1},"id":"inv_other"}"#).unwrap();
        let b = build_envelope(&EventSpec {
            event_type: "invoice.overpaid".into(),
            resource_id: Some("inv_abc".into()),
            extra_data: Some(extra),
            ..Default::default()
        })
        .unwrap();
        let s = String::from_utf8(b.body.clone()).unwrap();
        assert!(s.contains(r#""data":{"id":"inv_abc","object":"invoice","status":"overpaid","amount":"12.50","currency":"USDT","order_ref":"order_abc","note":{"a":1}}"#), "{s}");
        assert_eq!(b.data_str("amount").as_deref(), Some("12.50"));
    }

    #[test]
    fn bad_inputs_are_usage_errors() {
        let bad = |spec: EventSpec| build_envelope(&spec).unwrap_err();
        for t in ["invoice", "Invoice.paid", "invoice.", "invoice paid"] {
            assert!(matches!(
                bad(EventSpec {
                    event_type: t.into(),
                    ..Default::default()
                }),
                CliError::Usage(_)
            ));
        }
        let e = bad(EventSpec {
            event_type: "invoice.paid".into(),
            resource_id: Some("wdr_1".into()),
            ..Default::default()
        });
        assert!(e.to_string().contains("withdrawal id"), "{e}");
        let e = bad(EventSpec {
            event_type: "invoice.paid".into(),
            event_id: Some("evt_bad-id".into()),
            ..Default::default()
        });
        assert!(e.to_string().contains("not an event id"), "{e}");
        let e = bad(EventSpec {
            event_type: "payout.sent".into(),
            ..Default::default()
        });
        assert!(e.to_string().contains("--resource"), "{e}");
        // An unknown category with a resource id is fine (the receiver stores and acks it).
        let b = build_envelope(&EventSpec {
            event_type: "payout.sent".into(),
            resource_id: Some("wdr_1".into()),
            ..Default::default()
        })
        .unwrap();
        assert!(parse_envelope(&b.body, Some(&b.event_id)).is_ok());
        // so is an unknown action of a known category about another category's resource
        let b = build_envelope(&EventSpec {
            event_type: "invoice.bogus".into(),
            resource_id: Some("wdr_1".into()),
            ..Default::default()
        })
        .unwrap();
        assert!(parse_envelope(&b.body, Some(&b.event_id)).is_ok());
        assert!(parse_data_arg("[1]").is_err());
        assert!(parse_data_arg("{").is_err());
    }
}
