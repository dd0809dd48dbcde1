//! Property tests: the parsers never panic on hostile input, and signing
//! round-trips through verification.

use paymos_core::envelope::{parse_envelope, Envelope, EnvelopeError};
use paymos_core::signature::{
    check, match_macs, sign, signature_header, verify, Secret, SecretSet, SignatureError,
    SignatureHeader,
};
use paymos_core::statements::Arg;
use proptest::prelude::*;
use serde_json::{json, Map, Value};

const CASES: u32 = 2000;

/// Header-ish elements: real keys, junk keys, good/bad hex, odd spacing.
fn header_element() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("t".to_string()),
        Just("v1".to_string()),
        Just("v0".to_string()),
        Just("T".to_string()),
        "[a-z0-9 ]{0,4}",
    ];
    let value = prop_oneof![
        "[0-9]{0,20}",
        "-?[0-9]{1,19}",
        "[0-9a-f]{64}",
        "[0-9A-Fa-f]{62,66}",
        "[g-z=,]{0,10}",
        any::<String>(),
    ];
    (key, value, any::<bool>(), "[ \t]{0,2}", "[ \t]{0,2}").prop_map(|(k, v, eq, pre, post)| {
        if eq {
            format!("{pre}{k}={v}{post}")
        } else {
            format!("{pre}{k}{v}{post}")
        }
    })
}

fn near_valid_header() -> impl Strategy<Value = String> {
    prop::collection::vec(header_element(), 0..40).prop_map(|els| els.join(","))
}

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        ".{0,12}".prop_map(Value::String),
        "(evt|inv|wdr|pcd|xyz)_[A-Za-z0-9_-]{0,70}".prop_map(Value::String),
        "(invoice|withdrawal|deposit|payout)\\.[a-z_]{0,15}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(".{0,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Envelope-shaped objects where each field is either plausible or random.
fn near_valid_envelope() -> impl Strategy<Value = (Value, Option<String>)> {
    let field = |good: BoxedStrategy<Value>| {
        prop_oneof![
            3 => good.prop_map(Some),
            1 => json_value().prop_map(Some),
            1 => Just(None),
        ]
    };
    let event_id = field("evt_[A-Za-z0-9]{1,64}".prop_map(Value::String).boxed());
    let typ = field(
        "(invoice|withdrawal|deposit|payout)\\.(created|paid|completed|confirmed|[a-z_]{1,8})"
            .prop_map(Value::String)
            .boxed(),
    );
    let created = field(any::<i64>().prop_map(|n| json!(n)).boxed());
    let livemode = field(any::<bool>().prop_map(Value::Bool).boxed());
    let data_id = field(
        "(inv|wdr|pcd)_[A-Za-z0-9]{1,64}"
            .prop_map(Value::String)
            .boxed(),
    );
    let data_extra = prop::collection::btree_map("[a-z_]{1,8}", json_value(), 0..4);
    let header_id = prop_oneof![
        Just(None),
        "evt_[A-Za-z0-9]{1,64}".prop_map(Some),
        ".{0,10}".prop_map(Some),
    ];
    (
        event_id,
        typ,
        created,
        livemode,
        data_id,
        data_extra,
        any::<bool>(),
        header_id,
    )
        .prop_map(
            |(event_id, typ, created, livemode, data_id, extra, header_matches, header_id)| {
                let mut data: Map<String, Value> = extra.into_iter().collect();
                if let Some(id) = data_id {
                    data.insert("id".into(), id);
                }
                let mut obj = Map::new();
                for (k, v) in [
                    ("event_id", event_id.clone()),
                    ("type", typ),
                    ("created", created),
                    ("livemode", livemode),
                ] {
                    if let Some(v) = v {
                        obj.insert(k.into(), v);
                    }
                }
                obj.insert("data".into(), Value::Object(data));
                let header = match (&event_id, header_matches) {
                    (Some(Value::String(s)), true) => Some(s.clone()),
                    _ => header_id,
                };
                (Value::Object(obj), header)
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn header_parse_never_panics_on_any_string(s in any::<String>()) {
        let _ = SignatureHeader::parse(&s);
    }

    #[test]
    fn header_parse_never_panics_on_near_valid(h in near_valid_header()) {
        if let Ok(p) = SignatureHeader::parse(&h) {
            // Whatever parses honours the bounds.
            prop_assert!(!p.v1.is_empty() && p.v1.len() <= 32);
            prop_assert!(p.timestamp >= 0);
        }
    }

    #[test]
    fn verify_never_panics(
        h in prop_oneof![near_valid_header(), any::<String>()],
        body in prop::collection::vec(any::<u8>(), 0..256),
        now in any::<i64>(),
        tol in any::<i64>(),
    ) {
        let set = SecretSet::parse("whsec_a whsec_b").unwrap();
        let r = verify(Some(&h), &body, &set, now, tol);
        // A random header essentially never carries a valid MAC.
        prop_assert!(r.is_err());
    }

    #[test]
    fn envelope_never_panics_on_bytes(
        body in prop::collection::vec(any::<u8>(), 0..512),
        id in prop::option::of(".{0,70}"),
    ) {
        let _ = parse_envelope(&body, id.as_deref());
    }

    #[test]
    fn envelope_never_panics_on_any_json(v in json_value(), id in prop::option::of("evt_[a-z0-9]{1,5}")) {
        let _ = parse_envelope(v.to_string().as_bytes(), id.as_deref());
    }

    #[test]
    fn envelope_near_valid((v, header) in near_valid_envelope()) {
        let body = v.to_string();
        match parse_envelope(body.as_bytes(), header.as_deref()) {
            Ok(e) => {
                // Accepted envelopes are consistent with their inputs.
                prop_assert_eq!(Some(e.event_id.as_str()), header.as_deref());
                prop_assert_eq!(v["type"].as_str(), Some(e.event_type.as_str()));
                prop_assert_eq!(format!("{}.{}", e.category, e.action), e.event_type);
                prop_assert!(e.resource_id.starts_with(e.resource_kind.prefix()));
                prop_assert_eq!(v["created"].as_i64(), Some(e.created));
            }
            Err(e) => {
                prop_assert!(!e.code().is_empty());
                // The message never echoes the header id.
                if let Some(h) = header.as_deref() {
                    if h.len() > 3 {
                        prop_assert!(!e.to_string().contains(h));
                    }
                }
                if header.is_none() {
                    prop_assert_eq!(e, EnvelopeError::WebhookIdMissing);
                }
            }
        }
    }

    #[test]
    fn sign_verify_round_trip(
        // Anything PAYMOS_WEBHOOK_SECRETS can carry as one secret.
        secret in ".{1,80}".prop_filter("no separators", |s| !s.contains(|c: char| c == ',' || c.is_whitespace())),
        body in prop::collection::vec(any::<u8>(), 0..1024),
        t in 0i64..=i64::MAX,
        skew in -300i64..=300,
    ) {
        let s = Secret::new(secret.clone());
        let set = SecretSet::parse(&secret).unwrap();
        prop_assert_eq!(set.len(), 1);
        prop_assert_eq!(set.secrets()[0].expose(), secret.as_str());
        let header = signature_header(&[&s], t, &body);
        let now = t.saturating_add(skew);
        let ok = verify(Some(&header), &body, &set, now, 300).unwrap();
        prop_assert_eq!(ok.timestamp, t);
        prop_assert_eq!(ok.secret_index, 0);
        // Rotation order does not matter.
        let other = Secret::new(format!("{secret}_old"));
        let h2 = signature_header(&[&other, &s], t, &body);
        prop_assert!(verify(Some(&h2), &body, &set, now, 300).is_ok());
        // Flipping any one body bit breaks it.
        if !body.is_empty() {
            let mut b = body.clone();
            let i = (t as usize) % b.len();
            b[i] ^= 1 << (t as u32 % 8);
            prop_assert_eq!(verify(Some(&header), &b, &set, now, 300), Err(SignatureError::Mismatch));
        }
        prop_assert_eq!(sign(&s, t, &body).len(), 64);
    }

    /// The Worker's large-body path (`check`, the MAC of `signed_prefix()` + body under each
    /// secret computed outside the core, `match_macs`) decides exactly as `verify` does: same
    /// result, same error, same secret. The MAC here is the hmac crate's; the Worker's is
    /// the runtime's WebCrypto, checked against node:crypto's signatures in tests/receiver.
    #[test]
    fn check_then_match_macs_is_verify(
        h in prop_oneof![near_valid_header(), any::<String>()],
        signed_by in prop::option::of(0usize..3),
        // the header's t: near `now` (inside or just outside the tolerance), written with a
        // leading zero or not, or no signed header at all
        t_skew in prop::option::of((-400i64..400, any::<bool>())),
        extra_v1 in prop::option::of("[0-9a-f]{64}"),
        body in prop::collection::vec(any::<u8>(), 0..512),
        now in 1_700_000_000i64..1_800_000_000,
        tol in prop_oneof![4 => Just(300i64), 1 => any::<i64>()],
    ) {
        use hmac::{Hmac, Mac};
        let set = SecretSet::parse("whsec_new whsec_old").unwrap();
        // a header signed by one of the secrets (or by none of them: index 2), or a random one
        let header = match (signed_by, t_skew) {
            (Some(i), Some((skew, zero))) => {
                let t = format!("{}{}", if zero { "0" } else { "" }, now + skew);
                let s = Secret::new(["whsec_new", "whsec_old", "whsec_other"][i]);
                let mut h = format!("t={t},v1={}", paymos_core::signature::sign_text(&s, &t, &body));
                if let Some(x) = &extra_v1 {
                    h = format!("t={t},v1={x},{}", &h[h.find("v1=").unwrap()..]);
                }
                h
            }
            _ => h,
        };
        let header = Some(header.as_str());
        let by_verify = verify(header, &body, &set, now, tol);
        let split = check(header, &set, now, tol).and_then(|parsed| {
            let mut message = parsed.signed_prefix().into_bytes();
            message.extend_from_slice(&body);
            let macs = set.secrets().iter().map(|s| {
                let mut m = Hmac::<sha2::Sha256>::new_from_slice(s.expose().as_bytes()).unwrap();
                m.update(&message);
                <[u8; 32]>::from(m.finalize().into_bytes())
            });
            match_macs(&parsed, macs)
        });
        prop_assert_eq!(split, by_verify);
        // the accepted cases are the signed ones within the tolerance
        if let (Some(i), Some((skew, _)), 300) = (signed_by, t_skew, tol) {
            prop_assert_eq!(by_verify.is_ok(), i < 2 && skew.abs() <= 300);
            if let Ok(v) = by_verify {
                prop_assert_eq!(v.secret_index, i);
            }
        }
    }
}

/// The envelope as it was read before `envelope::wire` (a `serde_json::Value` tree of the
/// whole body, a `Map` in which the last of two fields with one name counts): the reference
/// the one-pass reader is held to, result for result.
fn reference_envelope(body: &[u8], header: Option<&str>) -> Result<Envelope, EnvelopeError> {
    use paymos_core::ids::{is_valid_event_id, resource_kind_of};
    use paymos_core::split_event_type;
    let header_id = header.ok_or(EnvelopeError::WebhookIdMissing)?;
    if !is_valid_event_id(header_id) {
        return Err(EnvelopeError::InvalidEventId);
    }
    let value: Value = serde_json::from_slice(body).map_err(|_| EnvelopeError::NotJson)?;
    let Value::Object(mut obj) = value else {
        return Err(EnvelopeError::NotJson);
    };
    let data = obj.get_mut("data").map(Value::take);
    let text = |o: &Map<String, Value>, k: &'static str| match o.get(k) {
        None => Err(EnvelopeError::MissingField(k)),
        Some(v) => v
            .as_str()
            .map(str::to_owned)
            .ok_or(EnvelopeError::InvalidField(k)),
    };
    let event_id = text(&obj, "event_id")?;
    if !is_valid_event_id(&event_id) {
        return Err(EnvelopeError::InvalidEventId);
    }
    if event_id != header_id {
        return Err(EnvelopeError::IdMismatch);
    }
    let event_type = text(&obj, "type")?;
    let (category, action) =
        split_event_type(&event_type).ok_or(EnvelopeError::InvalidField("type"))?;
    let created = obj
        .get("created")
        .ok_or(EnvelopeError::MissingField("created"))?
        .as_i64()
        .ok_or(EnvelopeError::InvalidField("created"))?;
    let livemode = match obj.get("livemode") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(EnvelopeError::InvalidField("livemode")),
    };
    let data = match data {
        None => return Err(EnvelopeError::MissingField("data")),
        Some(Value::Object(m)) => m,
        Some(_) => return Err(EnvelopeError::InvalidField("data")),
    };
    let resource_id = text(&data, "id").map_err(|e| match e {
        EnvelopeError::MissingField(_) => EnvelopeError::MissingField("data.id"),
        _ => EnvelopeError::InvalidField("data.id"),
    })?;
    let resource_kind = resource_kind_of(&resource_id).ok_or(EnvelopeError::InvalidResourceId)?;
    if let Some((expected, _)) = paymos_core::machine::target_state(&event_type) {
        if expected != resource_kind {
            return Err(EnvelopeError::ResourceMismatch);
        }
    }
    // a blank text is none given
    let string = |k: &str| {
        data.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .map(str::to_owned)
    };
    Ok(Envelope {
        event_id: event_id.clone(),
        category: category.to_owned(),
        action: action.to_owned(),
        event_type: event_type.clone(),
        created,
        livemode,
        resource_id,
        resource_kind,
        order_ref: string("order_ref"),
        amount: string("amount"),
        currency: string("currency"),
    })
}

/// An object's text with fields of the given names written twice or more, before or after
/// its own (so either may be the last), each time with another value.
fn with_repeats(
    obj: &Map<String, Value>,
    repeats: &[(usize, Value, bool)],
    names: &[&str],
) -> String {
    let field = |k: &str, v: &Value| format!("{}:{}", Value::from(k), v);
    let mut before = Vec::new();
    let mut after = Vec::new();
    for (i, v, first) in repeats {
        let f = field(names[i % names.len()], v);
        if *first {
            before.push(f)
        } else {
            after.push(f)
        }
    }
    let own = obj.iter().map(|(k, v)| field(k, v));
    let all: Vec<String> = before.into_iter().chain(own).chain(after).collect();
    format!("{{{}}}", all.join(","))
}

fn repeats() -> impl Strategy<Value = Vec<(usize, Value, bool)>> {
    prop::collection::vec((any::<usize>(), json_value(), any::<bool>()), 0..3)
}

/// `data`'s strings that a transition records: a string, any value, or absent.
fn data_strings() -> impl Strategy<Value = Vec<Option<Value>>> {
    let one = prop_oneof![
        2 => ".{0,8}".prop_map(|s| Some(Value::String(s))),
        1 => "[ \t\n\u{3000}]{0,3}".prop_map(|s| Some(Value::String(s))),
        1 => json_value().prop_map(Some),
        1 => Just(None),
    ];
    prop::collection::vec(one, 3)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn envelope_reads_as_the_reference_on_any_json(
        v in json_value(),
        id in prop::option::of("evt_[a-z0-9]{1,5}"),
    ) {
        let body = v.to_string();
        prop_assert_eq!(
            parse_envelope(body.as_bytes(), id.as_deref()),
            reference_envelope(body.as_bytes(), id.as_deref())
        );
    }

    #[test]
    fn envelope_reads_as_the_reference_on_bytes(
        body in prop::collection::vec(any::<u8>(), 0..256),
        id in prop::option::of("evt_[a-z0-9]{1,5}"),
    ) {
        prop_assert_eq!(parse_envelope(&body, id.as_deref()), reference_envelope(&body, id.as_deref()));
    }

    /// Near-valid envelopes, with `data`'s strings and fields repeated at either level.
    #[test]
    fn envelope_reads_as_the_reference_near_valid(
        (v, header) in near_valid_envelope(),
        strings in data_strings(),
        top_repeats in repeats(),
        data_repeats in repeats(),
    ) {
        let Value::Object(mut obj) = v else { unreachable!("an object") };
        let mut data = match obj.remove("data") {
            Some(Value::Object(d)) => d,
            _ => Map::new(),
        };
        for (k, s) in ["order_ref", "amount", "currency"].into_iter().zip(strings) {
            if let Some(s) = s {
                data.insert(k.into(), s);
            }
        }
        let data_names = ["id", "order_ref", "amount", "currency", "object"];
        let data_text = with_repeats(&data, &data_repeats, &data_names);
        obj.insert("data".into(), Value::Null);
        let top_names = ["event_id", "type", "created", "livemode", "data", "api_version"];
        let body = with_repeats(&obj, &top_repeats, &top_names)
            .replace(r#""data":null"#, &format!(r#""data":{data_text}"#));
        let ours = parse_envelope(body.as_bytes(), header.as_deref());
        prop_assert_eq!(&ours, &reference_envelope(body.as_bytes(), header.as_deref()), "{}", body);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// The Worker's arguments as `d1.js` reads them: byte for byte what serde_json writes,
    /// for any string and for strings of the characters that are escaped.
    #[test]
    fn json_strings_as_serde_json_writes_them(
        any_text in any::<String>(),
        escaped in "[\"\\\\\\x00-\\x1f\\x7f a-z\u{e9}\u{2028}\u{1F600}]{0,24}",
        list in prop::collection::vec("[\"\\\\\\x00-\\x1f a-z]{0,6}", 0..4),
    ) {
        for s in [&any_text, &escaped] {
            let mut ours = String::from("x");
            paymos_core::statements::push_json_string(&mut ours, s);
            prop_assert_eq!(&ours[1..], serde_json::to_string(s).unwrap());
        }
        let Arg::Text(ours) = Arg::json_list(&list) else { unreachable!("a text") };
        prop_assert_eq!(ours.as_ref(), serde_json::to_string(&list).unwrap());
    }
}
