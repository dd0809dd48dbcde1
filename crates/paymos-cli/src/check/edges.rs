//! The steps past the seed's five: what a receiver must also get right for its idempotency
//! to hold where money moves (interface §1, §2, §3). Two endpoints' copies of one payment at
//! once, and the late events that follow it (the guard, not the dedupe, must catch them); the
//! signature and the envelope read as the contract says; a refund before and after its
//! payment. Each runs whatever the others did.

use super::{
    ensure, fulfilments, new_order_ref, send_together, tally_burst, Checker, Ev, State, StepResult,
};
use crate::envelope::{build_envelope, Built, EventSpec};
use crate::http::{self, Reply};
use crate::ids::random_alphanumeric;
use paymos_core::Secret;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

/// How many endpoints deliver the same payment at once, each under its own `evt_` id (§2:
/// up to 10 per merchant environment).
pub const ENDPOINTS: usize = 4;

pub const STEP6_NAME: &str = "two endpoints at once: the same invoice.paid under 4 ids, then a late confirming and an overpaid: one applied, one fulfilment";
pub const STEP7_NAME: &str = "the signature and envelope as the contract reads them: a rotated v1, the body as sent, an unknown type accepted; unsigned, stale or mismatched refused";
pub const STEP8_NAME: &str = "refunds: one that overtakes its payment ships nothing; one after it cancels or revokes the fulfilment";

/// An event of `event_type` about `resource_id`, with the check's own ids.
fn event(event_type: &str, resource_id: &str) -> Result<Built, String> {
    build_envelope(&EventSpec {
        event_type: event_type.into(),
        resource_id: Some(resource_id.to_string()),
        ..Default::default()
    })
    .map_err(|e| e.to_string())
}

/// Delivers `built` correctly signed, waits until it is processed and requires `outcome`.
fn expect_outcome(c: &Checker, built: &Built, ev: &mut Ev, outcome: &str) -> StepResult {
    let header = built.signature(std::slice::from_ref(&c.o.secret), crate::now_unix());
    let what = format!("{} ({})", built.event_type, built.event_id);
    delivered(c, built, &header, ev, &what, outcome)
}

/// Step 6: the same payment from `ENDPOINTS` endpoints at once (each a new delivery to the
/// dedupe table), then a late `invoice.confirming` and an `invoice.overpaid`: exactly one is
/// applied, everything else is stale, and the invoice has one fulfilment (§2: "the dedupe
/// table cannot catch that, the state-transition guard must").
pub(super) fn endpoints(c: &Checker, _s: &mut State, ev: &mut Ev) -> StepResult {
    let order_ref = new_order_ref();
    let first = c.invoice(Some(&order_ref), None)?;
    let invoice = first.resource_id.clone();
    ev.put("resource_id", invoice.clone());
    let mut copies = vec![first];
    for _ in 1..ENDPOINTS {
        copies.push(c.invoice(Some(&order_ref), Some(&invoice))?);
    }
    let now = crate::now_unix();
    let signed = copies
        .iter()
        .map(|b| {
            let signature = b.signature(std::slice::from_ref(&c.o.secret), now);
            (Arc::new(b.clone()), signature)
        })
        .collect();
    let sent = Instant::now();
    let fresh = tally_burst(&send_together(c, signed), ev);
    ensure(fresh == ENDPOINTS, || {
        format!("{fresh} of {ENDPOINTS} ids were answered duplicate:false: each is a new delivery")
    })?;
    let mut outcomes = Vec::new();
    for b in &copies {
        let (d, _) = c.wait_processed(&b.event_id, sent)?;
        outcomes.push(d["outcome"].as_str().unwrap_or("").to_string());
    }
    ev.put("outcomes", outcomes.clone());
    let applied = outcomes.iter().filter(|o| *o == "applied").count();
    let stale = outcomes.iter().filter(|o| *o == "stale").count();
    ensure(applied == 1 && stale == ENDPOINTS - 1, || {
        format!("outcomes {outcomes:?}: expected one applied and the others stale")
    })?;
    for late in ["invoice.confirming", "invoice.overpaid"] {
        expect_outcome(c, &event(late, &invoice)?, ev, "stale")?;
    }
    let (res, _) = c.one_fulfilment(&invoice, ev)?;
    ensure(res["status"] == "paid", || {
        format!("the invoice is {}, expected paid", res["status"])
    })
}

/// Step 7: what §1 asks of the door. Accepted: a header whose first `v1` is another
/// secret's (a rotation), a body with its own whitespace and key order (verified as sent,
/// never re-serialised), an unknown event type (stored, never refused). Refused, and not on
/// record: no signature (401), a timestamp an hour old (401), a header id that is not the
/// body's (400).
pub(super) fn door(c: &Checker, _s: &mut State, ev: &mut Ev) -> StepResult {
    let now = crate::now_unix();
    let other = Secret::new(format!("whsec_check_other_{}", random_alphanumeric(16)));
    let rotated = c.invoice(Some(&new_order_ref()), None)?;
    let header = rotated.signature(&[other, c.o.secret.clone()], now);
    delivered(
        c,
        &rotated,
        &header,
        ev,
        "a header whose second v1 matches (rotation)",
        "applied",
    )?;
    let as_sent = reordered(&c.invoice(Some(&new_order_ref()), None)?);
    let header = as_sent.signature(std::slice::from_ref(&c.o.secret), now);
    delivered(
        c,
        &as_sent,
        &header,
        ev,
        "a body with its own spacing and key order",
        "applied",
    )?;
    // a category the receiver has never heard of: stored and acknowledged all the same
    let unknown = event("payout.check_unknown", &crate::ids::random_id("inv_"))?;
    expect_outcome(c, &unknown, ev, "ignored")?;
    let secret = std::slice::from_ref(&c.o.secret);
    let unsigned = c.invoice(None, None)?;
    refused(
        c,
        &unsigned,
        &unsigned.event_id,
        "",
        401,
        ev,
        "a delivery with no signature",
    )?;
    let old = c.invoice(None, None)?;
    let header = old.signature(secret, now - 3600);
    refused(
        c,
        &old,
        &old.event_id,
        &header,
        401,
        ev,
        "a delivery signed an hour ago",
    )?;
    let mismatched = c.invoice(None, None)?;
    let header = mismatched.signature(secret, now);
    let other_id = crate::ids::random_id("evt_");
    refused(
        c,
        &mismatched,
        &other_id,
        &header,
        400,
        ev,
        "a header id that is not the body's",
    )
}

/// `built` with its top-level keys in reverse order, two spaces of indentation and a final
/// newline: the same envelope, other bytes.
fn reordered(built: &Built) -> Built {
    let Value::Object(map) = built.value() else {
        return built.clone();
    };
    let fields: Vec<String> = map
        .iter()
        .rev()
        .map(|(k, v)| format!("  {} : {}", json!(k), v))
        .collect();
    let text = format!("{{\n{}\n}}\n", fields.join(",\n"));
    Built {
        body: text.into_bytes(),
        ..built.clone()
    }
}

/// Posts `built` with `header`; requires a 2xx `duplicate:false`, then `outcome` once it is
/// processed.
fn delivered(
    c: &Checker,
    built: &Built,
    header: &str,
    ev: &mut Ev,
    what: &str,
    outcome: &str,
) -> StepResult {
    let r = post(c, built, &built.event_id, header)?;
    ev.put(what, r.status);
    ensure(r.is_success() && r.duplicate() == Some(false), || {
        format!("{what} was answered {}: {}", r.status, http::short(&r.text))
    })?;
    let (d, _) = c.wait_processed(&built.event_id, Instant::now())?;
    ensure(d["outcome"] == outcome, || {
        format!("{what} was {}, expected {outcome}", d["outcome"])
    })
}

/// Posts `built` under the header id `id` with `header`; requires `status` and no row.
#[allow(clippy::too_many_arguments)] // each a part of the request, then what it proves
fn refused(
    c: &Checker,
    built: &Built,
    id: &str,
    header: &str,
    status: u16,
    ev: &mut Ev,
    what: &str,
) -> StepResult {
    let r = post(c, built, id, header)?;
    ev.put(what, r.status);
    ensure(r.status == status, || {
        format!("{what} was answered {}, expected {status}", r.status)
    })?;
    // neither the body's id nor the header's (an id mismatch has two) is on record
    let mut ids = vec![built.event_id.as_str()];
    if id != built.event_id {
        ids.push(id);
    }
    for on_record in ids {
        let look = c.admin_status("GET", &format!("/deliveries/{on_record}"))?;
        ensure(look.status == 404, || {
            format!("{what} was refused, yet {on_record} is on record")
        })?;
    }
    Ok(())
}

fn post(c: &Checker, built: &Built, id: &str, header: &str) -> Result<Reply, String> {
    http::post_signed(
        &c.agent,
        &c.o.webhook_url,
        id,
        &built.body,
        header,
        Some(1),
        None,
    )
    .map_err(|e| e.to_string())
}

/// Step 8: a refund that overtakes its payment (created, refunded, paid) leaves the invoice
/// refunded with no fulfilment; a refund after the payment leaves it refunded with its
/// fulfilment cancelled or revoked (§3, amended). `--orders` then checks what was sent.
pub(super) fn refunds(c: &Checker, s: &mut State, ev: &mut Ev) -> StepResult {
    let first = build_envelope(&EventSpec {
        event_type: "invoice.created".into(),
        order_ref: Some(new_order_ref()),
        ..Default::default()
    })
    .map_err(|e| e.to_string())?;
    let before = first.resource_id.clone();
    ev.put("refunded_before_payment", before.clone());
    s.refunded_first = Some(before.clone());
    let outcomes = deliver_refund_before_payment(c, &first, ev)?;
    ev.put("outcomes", outcomes.clone());
    let want = [
        ("invoice.created", "applied"),
        ("invoice.refunded", "applied"),
        ("invoice.paid", "stale"),
    ];
    for (got, (t, o)) in outcomes.iter().zip(want) {
        ensure(got[1] == o, || format!("{t} was {}, expected {o}", got[1]))?;
    }
    let res = c.resource(&before)?;
    ensure(res["status"] == "refunded", || {
        format!("{before} is {}, expected refunded", res["status"])
    })?;
    ensure(fulfilments(&res).is_empty(), || {
        format!("{before}: a fulfilment was made for money that went back")
    })?;
    let paid = c.invoice(Some(&new_order_ref()), None)?;
    let after = paid.resource_id.clone();
    ev.put("refunded_after_payment", after.clone());
    s.refunded_after = Some(after.clone());
    expect_outcome(c, &paid, ev, "applied")?;
    expect_outcome(c, &event("invoice.refunded", &after)?, ev, "applied")?;
    let res = c.resource(&after)?;
    ev.put("effects_after_refund", res["effects"].clone());
    ensure(res["status"] == "refunded", || {
        format!("{after} is {}, expected refunded", res["status"])
    })?;
    // the fulfilment made at payment stays on record, cancelled or revoked: with none left,
    // "every fulfilment is cancelled" would hold of a receiver that deleted it
    let made = fulfilments(&res);
    ensure(made.len() == 1, || {
        format!(
            "{after} was paid, then refunded: {} fulfilments on record, expected the 1 made at \
             payment (cancelled or revoked, never removed)",
            made.len()
        )
    })?;
    let effects = res["effects"].as_array().cloned().unwrap_or_default();
    let revoked = effects.iter().any(|e| e["kind"] == "revocation");
    let cancelled = made.iter().all(|f| f["dispatch"] == "cancelled");
    ensure(revoked || cancelled, || {
        format!("{after} was refunded after its payment, yet its fulfilment is neither cancelled nor revoked")
    })
}

/// Delivers `first` (an invoice.created), then a refund and a payment of the same invoice,
/// each waited on until processed; `[event type, outcome]` of each.
fn deliver_refund_before_payment(
    c: &Checker,
    first: &Built,
    ev: &mut Ev,
) -> Result<Vec<Value>, String> {
    let mut outcomes = Vec::new();
    for event_type in ["invoice.created", "invoice.refunded", "invoice.paid"] {
        let built = if event_type == "invoice.created" {
            first.clone()
        } else {
            build_envelope(&EventSpec {
                event_type: event_type.into(),
                resource_id: Some(first.resource_id.clone()),
                ..Default::default()
            })
            .map_err(|e| e.to_string())?
        };
        c.deliver_expecting(&built, ev, event_type, Some(false))?;
        let (d, _) = c.wait_processed(&built.event_id, Instant::now())?;
        outcomes.push(json!([event_type, d["outcome"]]));
    }
    Ok(outcomes)
}
