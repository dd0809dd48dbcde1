//! Every admin call parsed from a request as the Worker hands it over: a good input for each
//! command, and the error (status, code, message) for each bad input.

use super::*;
use crate::ids::ResourceKind;
use crate::machine::{EffectKind, State};

fn parse(method: &str, path: &str, query: &str, body: &str) -> Result<Command, CommandError> {
    Command::parse(method, path, query, body.as_bytes())
}

fn get(path: &str, query: &str) -> Result<Command, CommandError> {
    parse("GET", path, query, "")
}

fn post(path: &str, body: &str) -> Result<Command, CommandError> {
    parse("POST", path, "", body)
}

/// The 400's code, and its message.
fn refused(r: Result<Command, CommandError>) -> (&'static str, String) {
    match r {
        Err(CommandError::BadRequest { code, message }) => (code, message),
        other => panic!("not a 400: {other:?}"),
    }
}

fn code(r: Result<Command, CommandError>) -> &'static str {
    refused(r).0
}

fn deliveries(query: &str) -> DeliveryQuery {
    match get("deliveries", query) {
        Ok(Command::ListDeliveries(q)) => q,
        other => panic!("{other:?}"),
    }
}

fn effects(query: &str) -> EffectQuery {
    match get("effects", query) {
        Ok(Command::ListEffects(q)) => q,
        other => panic!("{other:?}"),
    }
}

fn bulk(body: &str) -> BulkReplay {
    match post("deliveries/replay", body) {
        Ok(Command::BulkReplay(b)) => b,
        other => panic!("{other:?}"),
    }
}

fn transition(id: &str, body: &str) -> Result<Transition, CommandError> {
    match post(&format!("resources/{id}/transition"), body)? {
        Command::Transition(t) => Ok(t),
        other => panic!("{other:?}"),
    }
}

/// A request each route answers (method, path, body), with what it parses into.
fn samples() -> Vec<(&'static str, &'static str, &'static str, Command)> {
    let id = |s: &str| s.to_string();
    let bulk = BulkReplay {
        filter: ReplayFilter {
            event_type: Some(id("invoice.paid")),
            ..ReplayFilter::default()
        },
        dry_run: false,
        after: None,
    };
    let transition = Transition {
        resource_id: id("inv_1"),
        kind: ResourceKind::Invoice,
        to: State::Paid,
        reason: id("bank statement"),
        order_ref: None,
        amount: None,
        currency: None,
    };
    let json = MetricsFormat::Json;
    vec![
        (
            "GET",
            "deliveries",
            "",
            Command::ListDeliveries(DeliveryQuery::default()),
        ),
        (
            "GET",
            "deliveries/evt_1",
            "",
            Command::GetDelivery {
                event_id: id("evt_1"),
            },
        ),
        (
            "POST",
            "deliveries/evt_1/replay",
            "x",
            Command::ReplayDelivery {
                event_id: id("evt_1"),
            },
        ),
        (
            "POST",
            "deliveries/replay",
            r#"{"type":"invoice.paid"}"#,
            Command::BulkReplay(bulk),
        ),
        (
            "GET",
            "resources/inv_1",
            "",
            Command::GetResource {
                resource_id: id("inv_1"),
            },
        ),
        (
            "POST",
            "resources/inv_1/transition",
            r#"{"to":"paid","reason":"bank statement"}"#,
            Command::Transition(transition),
        ),
        (
            "POST",
            "reconcile",
            "",
            Command::ReconcileNow { full: false },
        ),
        ("GET", "reconcile", "", Command::LatestReconcile),
        (
            "GET",
            "effects",
            "",
            Command::ListEffects(EffectQuery::default()),
        ),
        (
            "POST",
            "effects/eff_1/redeliver",
            "",
            Command::RedeliverEffect {
                effect_id: id("eff_1"),
            },
        ),
        (
            "POST",
            "effects/eff_1/ack",
            "",
            Command::AckEffect {
                effect_id: id("eff_1"),
            },
        ),
        (
            "POST",
            "effects/eff_1/dismiss",
            r#"{"reason":"shipped by hand"}"#,
            Command::DismissEffect {
                effect_id: id("eff_1"),
                reason: "shipped by hand".into(),
            },
        ),
        (
            "POST",
            "deliveries/evt_1/dismiss",
            r#"{"reason":" test event, nothing to do "}"#,
            Command::DismissDelivery {
                event_id: id("evt_1"),
                reason: "test event, nothing to do".into(),
            },
        ),
        ("GET", "metrics", "", Command::Metrics { format: json }),
        (
            "GET",
            "metrics/history",
            "",
            Command::MetricsHistory { hours: 24 },
        ),
        ("GET", "alerts", "", Command::ListAlerts),
        (
            "POST",
            "alerts/alt_1/ack",
            "",
            Command::AckAlert {
                alert_id: id("alt_1"),
            },
        ),
        ("GET", "whoami", "", Command::WhoAmI),
        (
            "GET",
            "audit",
            "",
            Command::ListAudit(AuditQuery::default()),
        ),
        ("GET", "openapi.json", "", Command::OpenApi),
        (
            "POST",
            "archive",
            r#"{"before":"2026-01-01"}"#,
            Command::Archive(Archive {
                before: id("2026-01-01"),
                after: None,
            }),
        ),
    ]
}

#[test]
fn every_route_parses_into_its_own_command_variant() {
    let samples = samples();
    assert_eq!(samples.len(), ROUTES.len());
    for route in ROUTES {
        let matching: Vec<_> = samples
            .iter()
            .filter(|s| s.3.operation() == route.operation)
            .collect();
        assert_eq!(matching.len(), 1, "{:?}: one sample", route.operation);
        let (method, path, body, expected) = matching[0];
        assert_eq!(*method, route.method.as_str());
        let parsed = parse(method, path, "", body).unwrap();
        assert_eq!(&parsed, expected, "{method} {path}");
        assert_eq!(Route::of(parsed.operation()), route);
    }
}

#[test]
fn unknown_paths_and_methods() {
    assert_eq!(get("nothing", ""), Err(CommandError::NotFound));
    assert_eq!(
        parse("DELETE", "deliveries", "", ""),
        Err(CommandError::MethodNotAllowed { allow: "GET" })
    );
    assert_eq!(
        parse("PATCH", "reconcile/", "", ""),
        Err(CommandError::MethodNotAllowed { allow: "GET, POST" })
    );
    assert_eq!(
        get("resources/inv_1/transition", ""),
        Err(CommandError::MethodNotAllowed { allow: "POST" })
    );
    // a 404 or 405 is decided before anything of the request is read
    assert_eq!(
        parse("POST", "nothing", "limit=0", "{"),
        Err(CommandError::NotFound)
    );
}

#[test]
fn delivery_list_filters() {
    let q = deliveries("type=+invoice.paid+&resource_id=inv_1&status=pending&limit=10");
    assert_eq!(q.event_type.as_deref(), Some("invoice.paid"));
    assert_eq!(q.resource_id.as_deref(), Some("inv_1"));
    assert_eq!(q.status, Some(StatusFilter::Received));
    assert_eq!(q.limit, 10);
    assert_eq!(q.after, None);
    // empty filters filter nothing; unknown parameters are ignored; the last of two wins
    let q = deliveries("type=&resource_id=%20&status=&cursor=&other=1");
    assert_eq!((q.event_type, q.resource_id, q.status), (None, None, None));
    assert_eq!((q.limit, q.after), (DEFAULT_PAGE, None));
    // but an empty limit is not a number (the OpenAPI document's integer): refused
    for (path, query) in [
        ("deliveries", "limit="),
        ("deliveries", "limit=%20&type=invoice.paid"),
        ("effects", "limit="),
        ("audit", "limit="),
    ] {
        assert_eq!(code(get(path, query)), "invalid_limit", "{path}?{query}");
    }
    assert_eq!(code(get("metrics/history", "hours=")), "invalid_hours");
    assert_eq!(deliveries("limit=5&limit=7").limit, 7);
    assert_eq!(
        deliveries("resource_id=inv%5F1").resource_id.as_deref(),
        Some("inv_1")
    );
    let q = deliveries("cursor=2026-01-02T03%3A04%3A05.000Z~evt_9");
    assert_eq!(
        q.after,
        Some(DeliveryCursor {
            received_at: "2026-01-02T03:04:05.000Z".into(),
            event_id: "evt_9".into()
        })
    );
}

#[test]
fn delivery_status_words() {
    for (word, status) in [
        ("received", StatusFilter::Received),
        ("unprocessed", StatusFilter::Received),
        ("pending", StatusFilter::Received),
        ("processed", StatusFilter::Processed),
        ("applied", StatusFilter::Applied),
        ("ignored", StatusFilter::Ignored),
        ("stale", StatusFilter::Stale),
        ("dead", StatusFilter::Dead),
    ] {
        assert_eq!(deliveries(&format!("status={word}")).status, Some(status));
    }
    assert_eq!(StatusFilter::Received.as_str(), "received");
    assert_eq!(StatusFilter::Dead.as_str(), "dead");
    let (code, message) = refused(get("deliveries", "status=done"));
    assert_eq!(code, "invalid_status");
    assert_eq!(
        message,
        "status is one of received (or unprocessed, pending), processed, applied, ignored, stale, dead"
    );
    assert_eq!(
        refused(get("deliveries", "status=Received")).0,
        "invalid_status"
    );
}

#[test]
fn delivery_list_refusals_in_the_order_they_were_checked() {
    assert_eq!(code(get("deliveries", "limit=0")), "invalid_limit");
    assert_eq!(code(get("deliveries", "limit=1001")), "invalid_limit");
    assert_eq!(
        refused(get("deliveries", "cursor=evt_1")),
        (
            "invalid_cursor",
            "the cursor is not one this API gave out".into()
        )
    );
    // parameters one by one as they come; the cursor after all of them
    assert_eq!(
        code(get("deliveries", "cursor=bad&limit=0")),
        "invalid_limit"
    );
    assert_eq!(
        code(get("deliveries", "limit=0&status=bad")),
        "invalid_limit"
    );
    assert_eq!(
        code(get("deliveries", "status=bad&limit=0")),
        "invalid_status"
    );
}

#[test]
fn effect_feed_filters() {
    let q = effects("kind=fulfilment&dispatch=+dead&cursor=12&limit=3");
    assert_eq!(q.kind, Some(EffectKind::Fulfilment));
    assert_eq!(q.dispatch, Some(DispatchFilter::Dead));
    assert_eq!((q.after, q.limit), (Some(12), 3));
    for (word, d) in [
        ("pending", DispatchFilter::Pending),
        ("delivered", DispatchFilter::Delivered),
        ("dead", DispatchFilter::Dead),
    ] {
        assert_eq!(effects(&format!("dispatch={word}")).dispatch, Some(d));
        assert_eq!(d.as_str(), word);
    }
    for kind in ["fulfilment", "revocation", "settlement", "credit"] {
        assert_eq!(
            effects(&format!("kind={kind}"))
                .kind
                .map(EffectKind::as_str),
            Some(kind)
        );
    }
    let q = effects("kind=&dispatch=&cursor=");
    assert_eq!(
        (q.kind, q.dispatch, q.after, q.limit),
        (None, None, None, 50)
    );
}

#[test]
fn effect_feed_refusals() {
    assert_eq!(
        refused(get("effects", "kind=refund")),
        (
            "invalid_kind",
            "kind is one of fulfilment, revocation, settlement, credit".into()
        )
    );
    assert_eq!(
        refused(get("effects", "dispatch=sent")),
        (
            "invalid_dispatch",
            "dispatch is one of pending, delivered, dead, cancelled".into()
        )
    );
    assert_eq!(code(get("effects", "cursor=-1")), "invalid_cursor");
    assert_eq!(code(get("effects", "cursor=2026~evt_1")), "invalid_cursor");
    assert_eq!(code(get("effects", "limit=abc")), "invalid_limit");
    // checked as they come
    assert_eq!(code(get("effects", "cursor=x&kind=y")), "invalid_cursor");
}

#[test]
fn metrics_format() {
    let format = |q| match get("metrics", q) {
        Ok(Command::Metrics { format }) => format,
        other => panic!("{other:?}"),
    };
    assert_eq!(format("format=prometheus"), MetricsFormat::Prometheus);
    assert_eq!(
        format("format=json&format=prometheus"),
        MetricsFormat::Prometheus
    );
    assert_eq!(format("format=%70rometheus"), MetricsFormat::Prometheus);
    assert_eq!(format("format=json"), MetricsFormat::Json);
    assert_eq!(format("format=+prometheus"), MetricsFormat::Json);
    assert_eq!(format("format=Prometheus"), MetricsFormat::Json);
    assert_eq!(format(""), MetricsFormat::Json);
}

#[test]
fn bulk_replay_filters() {
    let b = bulk(
        r#"{"status":" dead ","type":"invoice.paid","resource_id":"inv_1",
            "received_after":"2026-11-30","received_before":"2026-12-01T00:00:00+01:00",
            "dry_run":true,"cursor":"2026-11-30T10:00:00.000Z~evt_7"}"#,
    );
    assert_eq!(b.filter.status, Some(StatusFilter::Dead));
    assert_eq!(b.filter.event_type.as_deref(), Some("invoice.paid"));
    assert_eq!(b.filter.resource_id.as_deref(), Some("inv_1"));
    assert_eq!(
        b.filter.received_after,
        crate::time::normalize_iso8601("2026-11-30")
    );
    assert_eq!(
        b.filter.received_before,
        crate::time::normalize_iso8601("2026-12-01T00:00:00+01:00")
    );
    assert!(b.filter.received_after.is_some() && b.filter.received_before.is_some());
    assert!(b.dry_run);
    assert_eq!(
        b.after,
        Some(DeliveryCursor {
            received_at: "2026-11-30T10:00:00.000Z".into(),
            event_id: "evt_7".into()
        })
    );
    // blank fields and nulls are absent
    let b = bulk("{\"status\":\"pending\",\"type\":\" \",\"resource_id\":null,\"cursor\":\"\"}");
    assert_eq!(b.filter.status, Some(StatusFilter::Received));
    assert_eq!((b.filter.event_type, b.filter.resource_id), (None, None));
    assert_eq!((b.after, b.dry_run), (None, false));
}

#[test]
fn bulk_replay_json_and_filter_refusals() {
    for empty in ["", "  \n", "{}", r#"{"type":"  ","dry_run":true}"#] {
        assert_eq!(
            refused(post("deliveries/replay", empty)),
            (
                "filter_required",
                "a bulk replay needs at least one of status, type, resource_id, received_after, received_before".into()
            ),
            "{empty:?}"
        );
    }
    // an array of the fields in order is not the object the document describes
    assert_eq!(
        code(post("deliveries/replay", r#"["dead"]"#)),
        "invalid_json"
    );
    assert_eq!(
        refused(post("deliveries/replay", r#"{"types":"x"}"#)),
        (
            "invalid_json",
            "the body is {status?, type?, resource_id?, received_after?, received_before?, dry_run?, cursor?}: \
             unknown field `types`, expected one of `status`, `type`, `resource_id`, `received_after`, \
             `received_before`, `dry_run`, `cursor` at line 1 column 8"
                .into()
        )
    );
    // a byte order mark is read as a character, as the runtime's text() keeps it
    for bad in [
        "[",
        "nope",
        r#"{"dry_run":"yes","type":"x"}"#,
        r#"{"type":1}"#,
        "\u{feff}{\"type\":\"x\"}",
    ] {
        assert_eq!(
            code(post("deliveries/replay", bad)),
            "invalid_json",
            "{bad}"
        );
    }
}

#[test]
fn bulk_replay_field_refusals() {
    assert_eq!(
        code(post("deliveries/replay", r#"{"status":"done"}"#)),
        "invalid_status"
    );
    assert_eq!(
        refused(post(
            "deliveries/replay",
            r#"{"received_after":"yesterday"}"#
        )),
        (
            "invalid_time",
            "received_after is not an ISO-8601 time".into()
        )
    );
    assert_eq!(
        refused(post(
            "deliveries/replay",
            r#"{"received_before":"2026-02-30"}"#
        )),
        (
            "invalid_time",
            "received_before is not an ISO-8601 time".into()
        )
    );
    assert_eq!(
        code(post(
            "deliveries/replay",
            r#"{"type":"x","cursor":"not a cursor"}"#
        )),
        "invalid_cursor"
    );
    // in order: the status, the times, a filter, the cursor
    assert_eq!(
        code(post(
            "deliveries/replay",
            r#"{"status":"x","received_after":"y"}"#
        )),
        "invalid_status"
    );
    assert_eq!(
        code(post("deliveries/replay", r#"{"cursor":"x"}"#)),
        "filter_required"
    );
    assert_eq!(
        code(post(
            "deliveries/replay",
            r#"{"received_after":"y","received_before":"z"}"#
        )),
        "invalid_time"
    );
}

#[test]
fn reconcile_body() {
    let full = |body| match post("reconcile", body) {
        Ok(Command::ReconcileNow { full }) => Ok(full),
        Err(e) => Err(e),
        other => panic!("{other:?}"),
    };
    assert_eq!(full(""), Ok(false));
    assert_eq!(full(" \r\n"), Ok(false));
    assert_eq!(full("{}"), Ok(false));
    assert_eq!(full(r#"{"full":true}"#), Ok(true));
    assert_eq!(full(r#"{"full":false,"other":1}"#), Ok(false));
    for bad in [
        r#"{"full":"yes"}"#,
        "true",
        "{",
        "null",
        "[]",
        "[true]",
        " [false]",
    ] {
        assert_eq!(
            full(bad),
            Err(CommandError::BadRequest {
                code: "invalid_json",
                message: r#"the body is empty or {"full":true|false}"#.into()
            }),
            "{bad}"
        );
    }
}

#[test]
fn transition_good() {
    let t = transition(
        "wdr_9",
        r#"{"to":" completed ","reason":"  paid by hand ","order_ref":" ord-1 ","amount":"10.00","currency":""}"#,
    )
    .unwrap();
    assert_eq!(t.resource_id, "wdr_9");
    assert_eq!(t.kind, ResourceKind::Withdrawal);
    assert_eq!(t.to, State::Completed);
    assert_eq!(t.reason, "paid by hand");
    assert_eq!(t.order_ref.as_deref(), Some("ord-1"));
    assert_eq!(t.amount.as_deref(), Some("10.00"));
    assert_eq!(t.currency, None);
    // the body as JSON.parse read it: the last of a repeated key wins, others are ignored
    // whatever they hold, null optional fields are absent
    let t = transition(
        "pcd_1",
        r#"{"to":5,"to":"confirmed","reason":"x","big":1e400,"deep":{"a":[1,{"b":null}]},"amount":null}"#,
    )
    .unwrap();
    assert_eq!((t.kind, t.to), (ResourceKind::Deposit, State::Confirmed));
    assert_eq!(t.amount, None);
    // escaped keys are the same keys
    let t = transition("inv_1", "{\"t\\u006f\":\"paid\",\"reason\":\"r\"}").unwrap();
    assert_eq!(t.to, State::Paid);
    // 500 characters, not bytes
    let long = "支".repeat(MAX_REASON_CHARS);
    let t = transition("inv_1", &format!(r#"{{"to":"paid","reason":"{long}"}}"#)).unwrap();
    assert_eq!(t.reason.chars().count(), 500);
}

#[test]
fn transition_undecodable_bytes_read_as_replacement_characters() {
    let mut body = br#"{"to":"paid","reason":"caf"#.to_vec();
    body.extend_from_slice(b"\xE9\"}");
    match Command::parse("POST", "resources/inv_1/transition", "", &body) {
        Ok(Command::Transition(t)) => assert_eq!(t.reason, "caf\u{FFFD}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn transition_lone_surrogates_read_as_the_runtime_read_them() {
    // JSON.parse keeps a lone surrogate; the JS-to-Rust string conversion made each one U+FFFD
    let reason = |escaped: &str| {
        transition(
            "inv_1",
            &format!(r#"{{"to":"paid", "reason" : "{escaped}" , "amount" :  null }}"#),
        )
        .map(|t| (t.reason, t.amount))
    };
    assert_eq!(reason(r"cut \ud83d"), Ok(("cut \u{FFFD}".into(), None)));
    assert_eq!(
        reason(r"\udc00x\ud800\ud800"),
        Ok(("\u{FFFD}x\u{FFFD}\u{FFFD}".into(), None))
    );
    assert_eq!(
        reason(r"\ud83d\ude00 \n\u00e9"),
        Ok(("\u{1F600} \n\u{e9}".into(), None))
    );
    assert_eq!(reason(r"a\ud800\n"), Ok(("a\u{FFFD}".into(), None)));
    let t = transition(
        "inv_1",
        r#"{"to":"paid","reason":"r","order_ref":"\ud800 x"}"#,
    )
    .unwrap();
    assert_eq!(t.order_ref.as_deref(), Some("\u{FFFD} x"));
    // an escaped backslash before `u` is text, not an escape; an escaped quote ends nothing
    assert_eq!(reason(r"\\ud800"), Ok((r"\ud800".into(), None)));
    assert_eq!(reason(r#"\"\ud800\\"#), Ok(("\"\u{FFFD}\\".into(), None)));
    assert_eq!(
        reason(r"\uD83D\uDE00\uDBFF"),
        Ok(("\u{1F600}\u{FFFD}".into(), None))
    );
    // a repeated key's earlier value may be anything
    let t = transition(
        "inv_1",
        r#"{"to":{"x":[1]},"reason":true,"to":"paid","reason":"r"}"#,
    );
    assert_eq!(t.map(|t| t.to), Ok(State::Paid));
}

#[test]
fn transition_id_and_json_refusals() {
    let json_message = r#"the body is {"to":"<state>","reason":"<why>"} with optional "order_ref", "amount", "currency""#;
    for id in [
        "evt_1",
        "inv_",
        "inv_a-b",
        "INV_1",
        &format!("inv_{}", "a".repeat(65)),
    ] {
        assert_eq!(
            refused(transition(id, r#"{"to":"paid","reason":"r"}"#).map(Command::Transition)),
            (
                "invalid_resource_id",
                "a resource id is inv_, wdr_ or pcd_ and 1 to 64 letters or digits".into()
            ),
            "{id}"
        );
    }
    // the id is checked before the body
    assert_eq!(
        code(post("resources/nope/transition", "{")),
        "invalid_resource_id"
    );
    for bad in [
        "",
        "{",
        "null",
        r#"["paid","r"]"#,
        r#"{"reason":"r"}"#,
        r#"{"to":"paid"}"#,
        r#"{"to":null,"reason":"r"}"#,
        r#"{"to":"paid","reason":5}"#,
        r#"{"to":"paid","reason":"r","order_ref":7}"#,
        r#"{"to":"paid","reason":"r","amount":{}}"#,
        r#"{"to":"paid","reason":"r","currency":true}"#,
        r#"{"to":"paid","reason":"r"} x"#,
        "\u{feff}{\"to\":\"paid\",\"reason\":\"r\"}",
    ] {
        assert_eq!(
            refused(post("resources/inv_1/transition", bad)),
            ("invalid_json", json_message.into()),
            "{bad}"
        );
    }
}

#[test]
fn transition_reason_refusals() {
    let reason_message = "a reason of 1 to 500 characters is required";
    for reason in ["", "   ", "\\n\\t"] {
        assert_eq!(
            refused(post(
                "resources/inv_1/transition",
                &format!(r#"{{"to":"paid","reason":"{reason}"}}"#)
            )),
            ("invalid_reason", reason_message.into())
        );
    }
    // 501 characters as sent, even if trimming would leave 500
    let long = format!("{} ", "r".repeat(500));
    assert_eq!(
        code(post(
            "resources/inv_1/transition",
            &format!(r#"{{"to":"paid","reason":"{long}"}}"#)
        )),
        "invalid_reason"
    );
}

#[test]
fn transition_field_and_state_refusals() {
    for field in ["order_ref", "amount", "currency"] {
        let message = format!("{field} is 1 to 200 printable characters");
        let too_long = "x".repeat(201);
        for value in [too_long.as_str(), "a\\u0007b", "ord\\n1"] {
            assert_eq!(
                refused(post(
                    "resources/inv_1/transition",
                    &format!(r#"{{"to":"paid","reason":"r","{field}":"{value}"}}"#)
                )),
                ("invalid_field", message.clone()),
                "{field}={value}"
            );
        }
        let ok = "y".repeat(200);
        assert!(transition(
            "inv_1",
            &format!(r#"{{"to":"paid","reason":"r","{field}":" {ok} "}}"#)
        )
        .is_ok());
    }
    assert_eq!(
        refused(post(
            "resources/inv_1/transition",
            r#"{"to":" completed ","reason":"r"}"#
        )),
        (
            "invalid_state",
            "`completed` is not a state of a invoice".into()
        )
    );
    assert_eq!(
        code(post(
            "resources/wdr_1/transition",
            r#"{"to":"Paid","reason":"r"}"#
        )),
        "invalid_state"
    );
    // in order: the reason, the fields, the state
    assert_eq!(
        code(post(
            "resources/inv_1/transition",
            r#"{"to":"x","reason":" ","order_ref":"\u0001"}"#
        )),
        "invalid_reason"
    );
    assert_eq!(
        code(post(
            "resources/inv_1/transition",
            r#"{"to":"x","reason":"r","currency":"\u0001"}"#
        )),
        "invalid_field"
    );
}

#[test]
fn path_ids_are_taken_as_sent() {
    // an unknown or malformed id is the lookup's 404, as before
    assert_eq!(
        get("deliveries/not-an-id/", ""),
        Ok(Command::GetDelivery {
            event_id: "not-an-id".into()
        })
    );
    assert_eq!(
        post("alerts/alt%20x/ack", ""),
        Ok(Command::AckAlert {
            alert_id: "alt%20x".into()
        })
    );
}

fn audit_query(query: &str) -> Result<AuditQuery, CommandError> {
    match get("audit", query)? {
        Command::ListAudit(q) => Ok(q),
        other => panic!("{other:?}"),
    }
}

#[test]
fn audit_log_filters() {
    use super::audit::{Action, MAX_ACTOR_CHARS};
    assert_eq!(audit_query(""), Ok(AuditQuery::default()));
    assert_eq!(
        audit_query("actor=+ada%40example.com+&action=bulk_replay&cursor=42&limit=7"),
        Ok(AuditQuery {
            actor: Some("ada@example.com".into()),
            action: Some(Action::BulkReplay),
            after: Some(42),
            limit: 7,
        })
    );
    // empty filters filter nothing, as on the other lists
    assert_eq!(audit_query("actor=&action="), Ok(AuditQuery::default()));
    let long = "a".repeat(MAX_ACTOR_CHARS);
    assert_eq!(
        audit_query(&format!("actor={long}")).unwrap().actor,
        Some(long.clone())
    );
    assert_eq!(
        refused(get("audit", &format!("actor={long}a"))),
        (
            "invalid_actor",
            "actor is 1 to 320 printable characters".to_string()
        )
    );
    assert_eq!(code(get("audit", "actor=a%0Ab")), "invalid_actor");
    assert_eq!(
        refused(get("audit", "action=Transition")),
        (
            "invalid_action",
            "action is one of transition, replay, delivery_dismiss, bulk_replay, redeliver, \
             effect_ack, effect_dismiss, alert_ack, reconcile, archive"
                .to_string()
        )
    );
    assert_eq!(code(get("audit", "cursor=-3")), "invalid_cursor");
    assert_eq!(
        code(get("audit", "cursor=2026-01-01T00:00:00Z~evt_1")),
        "invalid_cursor"
    );
    assert_eq!(code(get("audit", "limit=0")), "invalid_limit");
}

#[test]
fn archive_body() {
    let archive = |body: &str| match post("archive", body) {
        Ok(Command::Archive(a)) => a,
        other => panic!("{other:?}"),
    };
    let a = archive(r#"{"before":" 2026-01-01T03:17:00Z "}"#);
    assert_eq!(a.before, "2026-01-01T03:17:00Z");
    assert_eq!(a.after, None);
    let a = archive(r#"{"before":"2026-01-01","cursor":"2025-12-01T00:00:00.000Z~evt_1"}"#);
    assert_eq!(
        a.after,
        Some(DeliveryCursor {
            received_at: "2025-12-01T00:00:00.000Z".into(),
            event_id: "evt_1".into()
        })
    );
    assert_eq!(
        archive(r#"{"before":"2026-01-01","cursor":""}"#).after,
        None
    );
    for bad in [
        "",
        "  ",
        "{",
        "[]",
        r#"["2026-01-01"]"#,
        "{}",
        r#"{"before":1}"#,
        r#"{"before":"2026-01-01","dry_run":true}"#,
    ] {
        let (c, m) = refused(post("archive", bad));
        assert_eq!(c, "invalid_json", "{bad}");
        assert!(m.starts_with("the body is {\"before\""), "{m}");
    }
    for bad in ["yesterday", "2026-02-30", "2026-01-01T25:00"] {
        let body = format!(r#"{{"before":"{bad}"}}"#);
        assert_eq!(code(post("archive", &body)), "invalid_time", "{bad}");
    }
    let body = r#"{"before":"2026-01-01","cursor":"nope"}"#;
    assert_eq!(code(post("archive", body)), "invalid_cursor");
    // the time is checked before the cursor
    let body = r#"{"before":"soon","cursor":"nope"}"#;
    assert_eq!(code(post("archive", body)), "invalid_time");
}

#[test]
fn dismiss_body() {
    let dismiss = |body: &str| parse("POST", "deliveries/evt_1/dismiss", "", body);
    let reason = |body: &str| match dismiss(body) {
        Ok(Command::DismissDelivery { reason, .. }) => Ok(reason),
        Ok(other) => panic!("{other:?}"),
        Err(e) => Err(e),
    };
    assert_eq!(reason(r#"{"reason":"ok","other":1}"#), Ok("ok".into()));
    // read as JSON.parse read it, as the transition's body is: the last of a repeated key
    // wins, other keys are ignored whatever they hold (a number beyond a double's range too)
    assert_eq!(
        reason(r#"{"reason":5,"big":1e400,"reason":"last"}"#),
        Ok("last".into())
    );
    let code = |body: &str| match dismiss(body) {
        Err(CommandError::BadRequest { code, .. }) => code,
        other => panic!("{body}: {other:?}"),
    };
    assert_eq!(code(""), "invalid_json");
    assert_eq!(code("[]"), "invalid_json");
    assert_eq!(code(r#"{"reason":5}"#), "invalid_json");
    assert_eq!(code(r#"{"why":"x"}"#), "invalid_json");
    assert_eq!(code(r#"{"reason":"x"} {}"#), "invalid_json");
    assert_eq!(code(r#""reason""#), "invalid_json");
    assert_eq!(code(r#"{"reason":"   "}"#), "invalid_reason");
    assert_eq!(code(r#"{"reason":""}"#), "invalid_reason");
    // characters as sent, not bytes, as the transition's reason
    let long = "退".repeat(MAX_REASON_CHARS);
    assert_eq!(
        reason(&format!(r#"{{"reason":"{long}"}}"#)),
        Ok(long.clone())
    );
    assert_eq!(
        code(&format!(r#"{{"reason":"{long}x"}}"#)),
        "invalid_reason"
    );
    // the effects' dismissal reads the same body
    assert_eq!(
        parse("POST", "effects/eff_1/dismiss", "", r#"{"reason":"a"}"#),
        Ok(Command::DismissEffect {
            effect_id: "eff_1".into(),
            reason: "a".into()
        })
    );
    // a lone surrogate half reads as U+FFFD, as the transition's body does
    assert_eq!(reason(r#"{"reason":"a\ud83d"}"#), Ok("a\u{fffd}".into()));
}

#[test]
fn history_hours() {
    let hours = |q: &str| match get("metrics/history", q) {
        Ok(Command::MetricsHistory { hours }) => Ok(hours),
        Ok(other) => panic!("{other:?}"),
        Err(CommandError::BadRequest { code, .. }) => Err(code),
        Err(e) => panic!("{e:?}"),
    };
    assert_eq!(hours(""), Ok(DEFAULT_HISTORY_HOURS));
    assert_eq!(hours("hours=+6+"), Ok(6));
    assert_eq!(
        hours(&format!("hours={MAX_HISTORY_HOURS}")),
        Ok(MAX_HISTORY_HOURS)
    );
    for bad in [
        "hours=0",
        "hours=-1",
        "hours=1.5",
        "hours=abc",
        "hours=193",
        "hours=",
        "hours=+",
    ] {
        assert_eq!(hours(bad), Err("invalid_hours"), "{bad}");
    }
}

/// The query parameters an empty value of which is refused are exactly the OpenAPI document's
/// integer ones: a parameter made an integer there, and not listed, would accept `name=`.
#[test]
fn empty_numbers_are_the_documents_integers() {
    let doc: serde_json::Value = serde_json::from_str(super::openapi::DOCUMENT).unwrap();
    let mut integers: Vec<String> = Vec::new();
    for op in doc["paths"].as_object().unwrap().values() {
        for method in op.as_object().unwrap().values() {
            for p in method["parameters"].as_array().into_iter().flatten() {
                if p["in"] == "query" && p["schema"]["type"] == "integer" {
                    integers.push(p["name"].as_str().unwrap().to_string());
                }
            }
        }
    }
    integers.sort();
    integers.dedup();
    let mut numbers: Vec<String> = command::NUMBERS.iter().map(|s| s.to_string()).collect();
    numbers.sort();
    assert_eq!(integers, numbers);
}

/// Every "not only blanks" pattern of the OpenAPI document is one class that lists exactly the
/// characters the API takes as blank (`command::is_blank`), checked over all of Unicode: a
/// text the document calls valid is one the API takes, and the reverse.
#[test]
fn the_documents_blanks_are_the_apis() {
    fn patterns(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v.as_str()) {
                        ("pattern", Some(p)) => out.push(p.to_string()),
                        _ => patterns(v, out),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| patterns(v, out)),
            _ => {}
        }
    }
    /// The characters a `[^…]` class of single characters, `\t \n \f \r`, `\uXXXX` and `a-b`
    /// ranges leaves out.
    fn excluded(class: &str) -> Vec<(u32, u32)> {
        let inner = class
            .strip_prefix("[^")
            .and_then(|c| c.strip_suffix(']'))
            .expect(class);
        let mut chars = Vec::new();
        let mut it = inner.chars().peekable();
        while let Some(c) = it.next() {
            let code = match (c, c == '\\') {
                (_, true) => match it.next().unwrap() {
                    't' => 9,
                    'n' => 10,
                    'f' => 12,
                    'r' => 13,
                    'u' => {
                        u32::from_str_radix(&it.by_ref().take(4).collect::<String>(), 16).unwrap()
                    }
                    other => panic!("an escape the test does not read: \\{other}"),
                },
                (c, false) => c as u32,
            };
            chars.push(code);
        }
        // "a-b" read as three characters: fold each '-' between two into a range
        let mut ranges = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            if i + 2 < chars.len() && chars[i + 1] == '-' as u32 {
                ranges.push((chars[i], chars[i + 2]));
                i += 3;
            } else {
                ranges.push((chars[i], chars[i]));
                i += 1;
            }
        }
        ranges
    }
    let doc: serde_json::Value = serde_json::from_str(super::openapi::DOCUMENT).unwrap();
    let mut found = Vec::new();
    patterns(&doc, &mut found);
    let blanks: Vec<&String> = found.iter().filter(|p| p.contains("u0085")).collect();
    assert!(blanks.len() >= 8, "{found:?}");
    for p in blanks {
        let ranges = excluded(p);
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            let listed = ranges.iter().any(|&(a, b)| (a..=b).contains(&(c as u32)));
            assert_eq!(listed, command::is_blank(c), "U+{:04X} in {p}", c as u32);
        }
    }
}
