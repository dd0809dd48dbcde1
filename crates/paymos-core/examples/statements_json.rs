//! Writes, as JSON, every SQL statement the receiver runs and, for each known event type, the
//! transition the consumer applies: its plan (target state, guard, effect) and the exact D1
//! batch [`transition_batch`] builds for it, statement by statement with each argument either
//! a constant or the name of the value the caller fills in. Also the license code's format
//! with test vectors. The benchmark's JavaScript receiver (`bench/js-receiver.js`) runs from
//! this file, so that "the same SQL" is literally the same text, parameters and order;
//! scripts/bench.sh regenerates it before every run:
//!
//!     cargo run -q -p paymos-core --example statements_json -- bench/statements.json
//!
//! Without an argument it prints the JSON to stdout.

use paymos_core::machine::{known_event_types, plan, target_state};
use paymos_core::statements::{transition_batch, Arg, TransitionRequest, ALL};
use paymos_core::{license_code, CauseKind};
use serde_json::{json, Map, Value};

/// Placeholders: a text argument equal to one of these is the caller's value of that name.
const SLOTS: [(&str, &str); 8] = [
    ("resource_id", "\u{1}resource_id"),
    ("order_ref", "\u{1}order_ref"),
    ("amount", "\u{1}amount"),
    ("currency", "\u{1}currency"),
    ("cause", "\u{1}cause"),
    ("token", "\u{1}token"),
    ("license_code", "\u{1}license_code"),
    ("event_id", "\u{1}event_id"),
];

fn slot(name: &str) -> &'static str {
    SLOTS.iter().find(|(n, _)| *n == name).unwrap().1
}

fn arg_json(a: &Arg<'_>) -> Value {
    match a {
        Arg::Null => json!({ "value": null }),
        Arg::Int(i) => json!({ "value": i }),
        Arg::Text(s) => match SLOTS.iter().find(|(_, v)| *v == s.as_ref()) {
            Some((name, _)) => json!({ "slot": name }),
            None => json!({ "value": s }),
        },
    }
}

fn main() {
    let statements: Map<String, Value> = ALL
        .iter()
        .map(|s| {
            (
                s.name.to_string(),
                json!({ "sql": s.sql, "params": s.params }),
            )
        })
        .collect();

    let mut events = Map::new();
    for event_type in known_event_types() {
        let (kind, to) = target_state(event_type).expect("a known event type has a target");
        let p = plan(kind, to).expect("a known event type's target is a state of its kind");
        // The batch depends on which of order_ref, amount, currency the event carries: one
        // variant per combination, keyed by three 0/1 digits in that order, and on pull mode
        // (no ORDER_SYSTEM_URL: no release), keyed with a leading `p`.
        let mut batches = Map::new();
        for (pull, bits) in [false, true]
            .into_iter()
            .flat_map(|pull| (0..8u8).map(move |bits| (pull, bits)))
        {
            let has = |i: u8| bits & (4 >> i) != 0;
            let request = TransitionRequest {
                plan: &p,
                resource_id: slot("resource_id"),
                order_ref: has(0).then(|| slot("order_ref")),
                amount: has(1).then(|| slot("amount")),
                currency: has(2).then(|| slot("currency")),
                cause_kind: CauseKind::Event,
                cause: slot("cause"),
                token: slot("token"),
                license_code: Some(slot("license_code")),
                delivery: Some(slot("event_id")),
                pull,
                actor: None,
            };
            let batch: Vec<Value> = transition_batch(&request)
                .iter()
                .map(|b| {
                    json!({
                        "statement": b.statement.name,
                        "args": b.args.iter().map(arg_json).collect::<Vec<_>>(),
                    })
                })
                .collect();
            let key = format!(
                "{}{}{}{}",
                if pull { "p" } else { "" },
                u8::from(has(0)),
                u8::from(has(1)),
                u8::from(has(2))
            );
            batches.insert(key, Value::Array(batch));
        }
        let effect = p.effect.as_ref().map(|e| {
            json!({
                "kind": e.kind.as_str(),
                "from": e.from.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
                "from_unknown": e.from_unknown,
                "requires": e.requires.map(|r| r.as_str()),
            })
        });
        events.insert(
            event_type.to_string(),
            json!({
                "kind": kind.as_str(),
                "to": to.as_str(),
                "guard": {
                    "from": p.guard.from.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
                },
                "effect": effect,
                "batches": batches,
            }),
        );
    }

    // The license code's format, read off the function itself: 128 bits, most significant
    // first, one alphabet character per 5 bits, a dash every `group` characters.
    let alphabet: String = (0u8..32)
        .map(|v| {
            let mut bytes = [0u8; 16];
            bytes[15] = v;
            license_code(bytes).chars().last().unwrap()
        })
        .collect();
    let sample = license_code([0xff; 16]);
    let group = sample.find('-').unwrap_or(sample.len());
    let vectors: Vec<Value> = [
        [0u8; 16],
        [0xff; 16],
        core::array::from_fn(|i| (i * 17 + 3) as u8),
    ]
    .iter()
    .map(|b| json!({ "bytes_hex": hex(b), "code": license_code(*b) }))
    .collect();

    let doc = json!({
        "generated_by": "cargo run -p paymos-core --example statements_json",
        "statements": Value::Object(statements),
        "batch_variant_key": "order_ref, amount, currency present: three 0/1 digits",
        "events": Value::Object(events),
        "license_code": {
            "alphabet": alphabet,
            "chars": sample.chars().filter(|c| *c != '-').count(),
            "group": group,
            "random_bytes": 16,
            "vectors": vectors,
        },
    });
    let text = serde_json::to_string_pretty(&doc).expect("JSON") + "\n";
    match std::env::args_os().nth(1) {
        Some(path) => {
            if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
                std::fs::write(&path, text).unwrap_or_else(|e| {
                    eprintln!(
                        "statements_json: cannot write {}: {e}",
                        path.to_string_lossy()
                    );
                    std::process::exit(1);
                });
            }
        }
        None => print!("{text}"),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
