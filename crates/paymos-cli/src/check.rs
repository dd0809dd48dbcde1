//! `paymos check`: the idempotency proof (the seed's five steps, and three more in `edges`),
//! run against any receiver that implements the contract's webhook endpoint and admin API.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use paymos_core::Secret;
use serde_json::{json, Map, Value};

use crate::envelope::{build_envelope, Built, EventSpec};
use crate::error::CliError;
use crate::http::{self, Admin, Reply};
use crate::ids::{random_alphanumeric, random_id};

mod edges;

pub const BURST: usize = 20;
pub const MANUAL_REASON: &str = "paid by hand during outage";

pub struct CheckOptions {
    /// Where deliveries go (`…/webhooks/paymos`).
    pub webhook_url: String,
    pub admin: Admin,
    pub secret: Secret,
    pub sandbox: Option<String>,
    /// A `paymos orders` (the receiver's ORDER_SYSTEM_URL): adds steps 6 and 7.
    pub orders: Option<String>,
    pub timeout: Duration,
    pub json: bool,
}

#[derive(Debug, Clone)]
pub struct StepReport {
    pub step: u8,
    pub name: &'static str,
    pub pass: bool,
    /// Set when the step could only check part of what it is for (step 5 without
    /// `--sandbox`): says, plainly, what was not proved.
    pub not_proved: Option<&'static str>,
    pub reason: Option<String>,
    pub evidence: Map<String, Value>,
}

impl StepReport {
    pub fn to_json(&self) -> Value {
        let mut v = json!({ "step": self.step, "name": self.name, "pass": self.pass, "evidence": self.evidence });
        if let Some(r) = &self.reason {
            v["reason"] = json!(r);
        }
        if let Some(n) = self.not_proved {
            v["partial"] = json!(true);
            v["not_proved"] = json!(n);
        }
        v
    }
}

/// Step 5's name without `--sandbox`.
pub const STEP5_PARTIAL_NAME: &str =
    "reconciliation reports no doubled effects (PARTIAL: missing invoices not checked, no --sandbox)";

/// What step 5 does not prove without `--sandbox`, in its report and in the summary line.
pub const STEP5_NOT_PROVED: &str = "this proved nothing about missing invoices (paid at the provider, never delivered): \
     without --sandbox no invoice was paid at the provider behind the receiver's back, so reconciliation's \
     `missing` was not tested; give --sandbox <the paymos sandbox the receiver reconciles against>";

/// Evidence collected while a step runs; `?` on a `String` error fails the step.
struct Ev(Map<String, Value>);

impl Ev {
    fn put(&mut self, k: &str, v: impl Into<Value>) {
        self.0.insert(k.to_string(), v.into());
    }
}

type StepResult = Result<(), String>;

fn ensure(cond: bool, msg: impl FnOnce() -> String) -> StepResult {
    if cond {
        Ok(())
    } else {
        Err(msg())
    }
}

/// What later steps need from earlier ones.
#[derive(Default)]
struct State {
    step1: Option<(Built, String, Value)>, // envelope, license code, effects
    paid_invoices: Vec<(String, String)>,  // (invoice id, order_ref) the check paid
    extra_paid: Option<(String, String)>,  // step 5's invoice, once brought to paid
    refunded_first: Option<String>,        // step 8's invoice refunded before its payment
    refunded_after: Option<String>,        // step 8's invoice refunded after its payment
}

struct Checker<'a> {
    o: &'a CheckOptions,
    agent: ureq::Agent,
}

impl Checker<'_> {
    fn post(&self, built: &Built, secrets: &[Secret]) -> Result<Reply, String> {
        http::post_delivery(
            &self.agent,
            &self.o.webhook_url,
            built,
            secrets,
            Some(1),
            None,
        )
        .map_err(|e| e.to_string())
    }

    fn good(&self, built: &Built) -> Result<Reply, String> {
        self.post(built, std::slice::from_ref(&self.o.secret))
    }

    /// Loads the resource, records its status and fulfilment count, and requires exactly one
    /// fulfilment; returns the resource and that fulfilment.
    fn one_fulfilment(&self, resource_id: &str, ev: &mut Ev) -> Result<(Value, Value), String> {
        let res = self.resource(resource_id)?;
        let f = fulfilments(&res);
        ev.put("resource_status", res["status"].clone());
        ev.put("fulfilments", f.len());
        ensure(f.len() == 1, || {
            format!("{} fulfilments, expected exactly 1", f.len())
        })?;
        let fulfilment = f.into_iter().next().unwrap_or(Value::Null);
        Ok((res, fulfilment))
    }

    /// Delivers `built` correctly signed, records the reply as evidence, and requires a 2xx
    /// (and, when given, that `duplicate` in the reply is `duplicate`).
    fn deliver_expecting(
        &self,
        built: &Built,
        ev: &mut Ev,
        what: &str,
        duplicate: Option<bool>,
    ) -> StepResult {
        let r = self.good(built)?;
        ev.put("status", r.status);
        ev.put("reply", r.body_value());
        ensure(r.is_success(), || {
            format!("{what} was answered {}, not 2xx", r.status)
        })?;
        match duplicate {
            Some(d) => ensure(r.duplicate() == Some(d), || {
                format!("{what} was not answered duplicate:{d}")
            }),
            None => Ok(()),
        }
    }

    fn admin(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, String> {
        self.o
            .admin
            .json(method, path, body)
            .map_err(|e| e.to_string())
    }

    fn admin_status(&self, method: &str, path: &str) -> Result<Reply, String> {
        self.o
            .admin
            .call(method, path, None)
            .map_err(|e| e.to_string())
    }

    /// Polls the delivery until `processed_at` is set; returns it and how long that took.
    fn wait_processed(&self, event_id: &str, since: Instant) -> Result<(Value, Duration), String> {
        let deadline = Instant::now() + self.o.timeout;
        let mut last = Value::Null;
        loop {
            let r = self.admin_status("GET", &format!("/deliveries/{event_id}"))?;
            match r.status {
                200 => {
                    last = r.json().unwrap_or(Value::Null);
                    if !last["processed_at"].is_null() {
                        return Ok((last, since.elapsed()));
                    }
                }
                404 => {}
                401 => return Err(http::refused_token().to_string()),
                s => {
                    return Err(format!(
                        "GET /admin/api/deliveries/{event_id} answered {s}: {}",
                        http::short(&r.text)
                    ))
                }
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{event_id} was not processed within {} s (last seen: {})",
                    self.o.timeout.as_secs(),
                    if last.is_null() {
                        "not found".to_string()
                    } else {
                        format!("outcome {}, processed_at null", last["outcome"])
                    }
                ));
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    fn resource(&self, id: &str) -> Result<Value, String> {
        self.admin("GET", &format!("/resources/{id}"), None)
    }

    fn invoice(&self, order_ref: Option<&str>, resource_id: Option<&str>) -> Result<Built, String> {
        build_envelope(&EventSpec {
            event_type: "invoice.paid".into(),
            resource_id: resource_id.map(str::to_string),
            order_ref: order_ref.map(str::to_string),
            ..Default::default()
        })
        .map_err(|e| e.to_string())
    }
}

/// What an effect is, as opposed to how far its delivery got: id, kind, license code,
/// order_ref, cause, creation time.
fn identities(effects: &Value) -> Vec<Value> {
    effects
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    json!([
                        e["id"],
                        e["kind"],
                        e["license_code"],
                        e["order_ref"],
                        e["cause"],
                        e["created_at"]
                    ])
                })
                .collect()
        })
        .unwrap_or_default()
}

fn fulfilments(resource: &Value) -> Vec<Value> {
    resource["effects"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|e| e["kind"] == "fulfilment")
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

fn new_order_ref() -> String {
    format!("order_check_{}", random_alphanumeric(10))
}

fn step1(c: &Checker, s: &mut State, ev: &mut Ev) -> StepResult {
    let order_ref = new_order_ref();
    let built = c.invoice(Some(&order_ref), None)?;
    ev.put("event_id", built.event_id.clone());
    ev.put("resource_id", built.resource_id.clone());
    ev.put("order_ref", order_ref.clone());
    let sent = Instant::now();
    c.deliver_expecting(&built, ev, "the new delivery", Some(false))?;
    s.paid_invoices
        .push((built.resource_id.clone(), order_ref.clone()));
    let (d, took) = c.wait_processed(&built.event_id, sent)?;
    ev.put("processed_at", d["processed_at"].clone());
    ev.put("outcome", d["outcome"].clone());
    ev.put("post_to_processed_ms", ms(took));
    ensure(d["outcome"] == "applied", || {
        let hint = if d["reason"] == "livemode_mismatch" {
            " (the check sends test-mode deliveries, livemode false: this receiver is in live mode; check a worker with PAYMOS_MODE=test)"
        } else {
            ""
        };
        format!("outcome is {}, expected \"applied\"{hint}", d["outcome"])
    })?;
    let (res, fulfilment) = c.one_fulfilment(&built.resource_id, ev)?;
    let code = fulfilment["license_code"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    ev.put("license_code", code.clone());
    ev.put("fulfilment_order_ref", fulfilment["order_ref"].clone());
    ensure(!code.is_empty(), || {
        "the fulfilment has no license_code".into()
    })?;
    ensure(fulfilment["order_ref"] == order_ref.as_str(), || {
        format!(
            "the fulfilment's order_ref is {}, expected {order_ref}",
            fulfilment["order_ref"]
        )
    })?;
    s.step1 = Some((built, code, res["effects"].clone()));
    Ok(())
}

fn step2(c: &Checker, s: &mut State, ev: &mut Ev) -> StepResult {
    let Some((built, code, effects)) = &s.step1 else {
        return Err("needs step 1's delivery and fulfilment, which step 1 did not produce".into());
    };
    ev.put("event_id", built.event_id.clone());
    ev.put("resource_id", built.resource_id.clone());
    c.deliver_expecting(built, ev, "the repeated delivery", Some(true))?;
    // A duplicate enqueues nothing; give a misbehaving receiver a moment to show it anyway.
    thread::sleep(Duration::from_millis(500));
    let res = c.resource(&built.resource_id)?;
    let f = fulfilments(&res);
    ev.put("fulfilments", f.len());
    let now_code = f
        .first()
        .and_then(|x| x["license_code"].as_str())
        .unwrap_or_default()
        .to_string();
    ev.put("license_code", now_code.clone());
    // The effects themselves, not their delivery to the order system: a fulfilment sent
    // between step 1's read and this one changes its dispatch state and attempts, which is
    // the outbox at work, not the duplicate.
    let unchanged = identities(&res["effects"]) == identities(effects);
    ev.put("effects_unchanged", unchanged);
    ensure(f.len() == 1, || {
        format!("{} fulfilments after the duplicate, expected 1", f.len())
    })?;
    ensure(now_code == *code, || {
        format!("the license code changed from {code} to {now_code}")
    })?;
    ensure(unchanged, || {
        "the resource's effects changed after a duplicate".into()
    })?;
    Ok(())
}

/// Step 3: `BURST` identical copies at once (one signature, released together by a barrier):
/// exactly one is new, the rest duplicates; one delivery row, one fulfilment.
fn step3(c: &Checker, s: &mut State, ev: &mut Ev) -> StepResult {
    let order_ref = new_order_ref();
    let built = Arc::new(c.invoice(Some(&order_ref), None)?);
    ev.put("event_id", built.event_id.clone());
    ev.put("resource_id", built.resource_id.clone());
    ev.put("copies", BURST);
    // one signature for all copies: identical requests, byte for byte
    let signature = built.signature(std::slice::from_ref(&c.o.secret), crate::now_unix());
    let sent = Instant::now();
    let results = send_together(c, vec![(built.clone(), signature); BURST]);
    ev.put("burst_ms", ms(sent.elapsed()));
    let fresh = tally_burst(&results, ev);
    let ok2xx = results
        .iter()
        .filter(|r| r.as_ref().is_ok_and(Reply::is_success))
        .count();
    ensure(ok2xx == BURST, || {
        format!("{ok2xx} of {BURST} copies were answered 2xx")
    })?;
    s.paid_invoices.push((built.resource_id.clone(), order_ref));
    ensure(fresh == 1, || {
        format!("{fresh} copies were answered duplicate:false, expected exactly 1")
    })?;
    let (d, took) = c.wait_processed(&built.event_id, sent)?;
    ev.put("outcome", d["outcome"].clone());
    ev.put("post_to_processed_ms", ms(took));
    one_delivery_row(c, &built, ev)?;
    let res = c.resource(&built.resource_id)?;
    let f = fulfilments(&res);
    ev.put("fulfilments", f.len());
    ev.put(
        "license_code",
        f.first()
            .map(|x| x["license_code"].clone())
            .unwrap_or(Value::Null),
    );
    ensure(f.len() == 1, || {
        format!("{} fulfilments, expected exactly 1", f.len())
    })?;
    Ok(())
}

/// One thread per request, each with its own connection, all posting at the same moment
/// (a barrier); their replies in order.
fn send_together(
    c: &Checker,
    requests: Vec<(Arc<Built>, String)>,
) -> Vec<Result<Reply, http::TransportError>> {
    let barrier = Arc::new(Barrier::new(requests.len()));
    let handles: Vec<_> = requests
        .into_iter()
        .map(|(built, signature)| {
            let (barrier, url) = (barrier.clone(), c.o.webhook_url.clone());
            thread::spawn(move || {
                let agent = http::agent(Duration::from_secs(30));
                barrier.wait();
                http::post_signed(
                    &agent,
                    &url,
                    &built.event_id,
                    &built.body,
                    &signature,
                    Some(1),
                    None,
                )
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("burst thread"))
        .collect()
}

/// Records the burst's statuses, duplicate counts and transport errors; how many copies
/// were answered `duplicate:false`.
fn tally_burst(results: &[Result<Reply, http::TransportError>], ev: &mut Ev) -> usize {
    let mut statuses: Map<String, Value> = Map::new();
    let (mut fresh, mut dup, mut errors) = (0, 0, Vec::new());
    for r in results {
        match r {
            Ok(r) => {
                let k = r.status.to_string();
                let n = statuses.get(&k).and_then(Value::as_u64).unwrap_or(0);
                statuses.insert(k, json!(n + 1));
                match r.duplicate() {
                    Some(false) => fresh += 1,
                    Some(true) => dup += 1,
                    None => {}
                }
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    ev.put("statuses", Value::Object(statuses));
    ev.put("duplicate_false", fresh);
    ev.put("duplicate_true", dup);
    if !errors.is_empty() {
        ev.put("errors", errors);
    }
    fresh
}

/// The admin API lists exactly one delivery row for the event among its resource's.
fn one_delivery_row(c: &Checker, built: &Built, ev: &mut Ev) -> StepResult {
    let list = c.admin(
        "GET",
        &format!("/deliveries?resource_id={}&limit=100", built.resource_id),
        None,
    )?;
    let rows = list["data"].as_array().cloned().unwrap_or_default();
    let same = rows
        .iter()
        .filter(|r| r["event_id"] == built.event_id.as_str())
        .count();
    ev.put("delivery_rows_for_resource", rows.len());
    ev.put("delivery_rows_for_event", same);
    ensure(same == 1, || {
        format!(
            "GET /admin/api/deliveries?resource_id=… lists {same} rows for {}, expected 1",
            built.event_id
        )
    })
}

fn step4(c: &Checker, s: &mut State, ev: &mut Ev) -> StepResult {
    let order_ref = new_order_ref();
    let built = c.invoice(Some(&order_ref), None)?;
    ev.put("event_id", built.event_id.clone());
    ev.put("resource_id", built.resource_id.clone());
    let unknown = Secret::new(format!("whsec_check_unknown_{}", random_alphanumeric(16)));
    let r = c.post(&built, &[unknown])?;
    ev.put("wrong_secret_status", r.status);
    ev.put("wrong_secret_reply", r.body_value());
    ensure(r.status == 401, || {
        format!(
            "a delivery signed with an unknown secret was answered {}, expected 401",
            r.status
        )
    })?;
    let look = c.admin_status("GET", &format!("/deliveries/{}", built.event_id))?;
    ev.put("refused_delivery_lookup_status", look.status);
    ensure(look.status == 404, || {
        format!(
            "the refused delivery is on record (GET /admin/api/deliveries/{} answered {})",
            built.event_id, look.status
        )
    })?;
    let t = c.admin(
        "POST",
        &format!("/resources/{}/transition", built.resource_id),
        Some(&json!({ "to": "paid", "reason": MANUAL_REASON })),
    )?;
    ev.put("manual_transition", t.clone());
    ensure(t["applied"] == true, || {
        format!("the manual transition to paid answered {t}, expected applied:true")
    })?;
    s.paid_invoices.push((built.resource_id.clone(), order_ref));
    let sent = Instant::now();
    c.deliver_expecting(&built, ev, "the correctly signed delivery", None)?;
    let (d, _) = c.wait_processed(&built.event_id, sent)?;
    ev.put("outcome", d["outcome"].clone());
    ensure(d["outcome"] == "stale", || {
        format!(
            "outcome is {}, expected \"stale\" (the invoice was already paid)",
            d["outcome"]
        )
    })?;
    c.one_fulfilment(&built.resource_id, ev)?;
    Ok(())
}

/// Step 5: every invoice the check paid, and one more (never delivered), is registered paid
/// at the sandbox; reconciliation must report that one as missing, bring it to paid and
/// fulfil it once, and report nothing doubled. Without `--sandbox`, only "nothing doubled".
fn step5(c: &Checker, s: &mut State, ev: &mut Ev) -> StepResult {
    let Some(sandbox) = &c.o.sandbox else {
        return step5_without_sandbox(c, ev);
    };
    ev.put("partial", false);
    let order_ref = new_order_ref();
    let extra = random_id("inv_");
    let registered = register_paid(
        sandbox,
        &s.paid_invoices,
        &(extra.clone(), order_ref.clone()),
    )?;
    ev.put("registered_with_sandbox", registered.clone());
    ev.put("extra_invoice", extra.clone());
    let report = c.admin("POST", "/reconcile", None)?;
    judge_reconcile_report(&report, &registered, &extra, ev)?;
    let res = c.resource(&extra)?;
    let f = fulfilments(&res);
    ev.put("extra_resource_status", res["status"].clone());
    ev.put("extra_fulfilments", f.len());
    ensure(res["status"] == "paid", || {
        format!("{extra} is {}, expected paid", res["status"])
    })?;
    ensure(f.len() == 1, || {
        format!("{extra} has {} fulfilments, expected exactly 1", f.len())
    })?;
    s.extra_paid = Some((extra, order_ref));
    Ok(())
}

/// Step 5, PARTIAL: reconciliation runs and reports nothing doubled.
fn step5_without_sandbox(c: &Checker, ev: &mut Ev) -> StepResult {
    ev.put("partial", true);
    let report = c.admin("POST", "/reconcile", None)?;
    ev.put("doubled", report["doubled"].clone());
    ev.put(
        "missing_count",
        report["missing"].as_array().map(Vec::len).unwrap_or(0),
    );
    ensure(
        report["doubled"].as_array().is_some_and(Vec::is_empty),
        || format!("doubled is not empty: {}", report["doubled"]),
    )
}

/// Registers `paid` and then `extra` (invoice id, order_ref) as paid at the sandbox; the ids
/// registered.
fn register_paid(
    sandbox: &str,
    paid: &[(String, String)],
    extra: &(String, String),
) -> Result<Vec<String>, String> {
    let mut registered = Vec::new();
    for (id, order) in paid.iter().chain(std::iter::once(extra)) {
        crate::deliver::register_invoice(
            sandbox,
            &json!({ "id": id, "status": "paid", "amount": "49.00", "currency": "USDT", "order_ref": order }),
        )
        .map_err(|e| format!("registering {id} with the sandbox: {e}"))?;
        registered.push(id.clone());
    }
    Ok(registered)
}

/// A `missing` entry's invoice id (an object with `id`, or the id itself).
fn missing_id(m: &Value) -> String {
    m["id"]
        .as_str()
        .or(m.as_str())
        .unwrap_or_default()
        .to_string()
}

/// Among the invoices this check registered, the reconcile report lists exactly `extra` as
/// missing (brought to paid), and nothing as doubled. Others' invoices in a shared sandbox
/// are recorded, not judged.
fn judge_reconcile_report(
    report: &Value,
    registered: &[String],
    extra: &str,
    ev: &mut Ev,
) -> StepResult {
    let missing: Vec<Value> = report["missing"].as_array().cloned().unwrap_or_default();
    let ours: Vec<Value> = missing
        .iter()
        .filter(|m| registered.contains(&missing_id(m)))
        .cloned()
        .collect();
    let others: Vec<String> = missing
        .iter()
        .map(missing_id)
        .filter(|id| !registered.contains(id))
        .collect();
    ev.put("missing", Value::Array(ours.clone()));
    if !others.is_empty() {
        // the sandbox is shared: invoices registered by someone else are not this check's concern
        ev.put("missing_not_from_this_check", others);
    }
    ev.put("doubled", report["doubled"].clone());
    ev.put("checked", report["checked"].clone());
    ensure(report["missing"].is_array(), || {
        format!(
            "the reconcile report has no `missing` list: {}",
            http::short(&report.to_string())
        )
    })?;
    ensure(ours.len() == 1 && missing_id(&ours[0]) == extra, || {
        format!(
            "missing lists {:?} among this check's invoices, expected exactly [{extra}]",
            ours.iter().map(missing_id).collect::<Vec<_>>()
        )
    })?;
    // §6: "each `missing` entry is an object {id, order_ref, brought_to_paid, status}"
    let entry = &ours[0];
    ensure(
        ["id", "order_ref", "brought_to_paid", "status"]
            .iter()
            .all(|k| entry.get(k).is_some()),
        || {
            format!(
                "a missing entry is {{id, order_ref, brought_to_paid, status}}; {extra}'s is {entry}"
            )
        },
    )?;
    ensure(entry["brought_to_paid"] == true, || {
        format!("{extra} was reported but not brought to paid: {entry}")
    })?;
    ev.put("ok", report["ok"].clone());
    ensure(report["ok"] == false, || {
        format!(
            "the report says ok: {} with an invoice missing",
            report["ok"]
        )
    })?;
    ensure(
        report["doubled"].as_array().is_some_and(Vec::is_empty),
        || format!("doubled is not empty: {}", report["doubled"]),
    )
}

/// One invoice the check paid, as the receiver records its fulfilment.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpectedShipment {
    pub resource_id: String,
    pub order_ref: String,
    pub license_code: Option<String>,
}

/// Step 9's judgement over `GET /received` of a `paymos orders`: each expected invoice's
/// fulfilment shipped exactly once, with the receiver's license code and the order_ref.
/// `Ok(None)`: everything is there; `Ok(Some(waiting))`: some have not arrived yet (poll
/// again); `Err`: shipped twice, or with the wrong license code or order_ref.
pub fn judge_shipments(
    expected: &[ExpectedShipment],
    received: &Value,
    ev: &mut Map<String, Value>,
) -> Result<Option<Vec<String>>, String> {
    let shipped = received["shipped"].as_array().cloned().unwrap_or_default();
    let mut waiting = Vec::new();
    let mut per_invoice = Map::new();
    let mut problems = Vec::new();
    for e in expected {
        let mine: Vec<&Value> = shipped
            .iter()
            .filter(|x| x["resource_id"] == e.resource_id.as_str() && x["kind"] == "fulfilment")
            .collect();
        per_invoice.insert(e.resource_id.clone(), json!(mine.len()));
        match mine.as_slice() {
            [] => waiting.push(e.resource_id.clone()),
            [one] => {
                if one["order_ref"] != e.order_ref.as_str() {
                    problems.push(format!(
                        "{} shipped with order_ref {}, expected {}",
                        e.resource_id, one["order_ref"], e.order_ref
                    ));
                }
                if let Some(code) = &e.license_code {
                    if one["license_code"] != code.as_str() {
                        problems.push(format!(
                            "{} shipped with license code {}, the receiver recorded {code}",
                            e.resource_id, one["license_code"]
                        ));
                    }
                }
            }
            many => problems.push(format!(
                "{} was shipped {} times (effect ids {}): the order system could not drop the copies",
                e.resource_id,
                many.len(),
                many.iter()
                    .map(|x| x["id"].as_str().unwrap_or("?"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
    ev.insert("shipped_per_invoice".into(), Value::Object(per_invoice));
    for k in ["requests", "duplicates", "rejected", "invalid", "failed"] {
        if let Some(v) = received.get(k) {
            ev.insert(format!("orders_{k}"), v.clone());
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    Ok((!waiting.is_empty()).then_some(waiting))
}

fn step_orders_received(c: &Checker, s: &mut State, ev: &mut Ev) -> StepResult {
    let orders = c.o.orders.as_deref().unwrap_or_default();
    let mut expected = Vec::new();
    for (id, order_ref) in s.paid_invoices.iter().chain(s.extra_paid.iter()) {
        let license_code = c
            .resource(id)
            .ok()
            .and_then(|r| fulfilments(&r).first().cloned())
            .and_then(|f| f["license_code"].as_str().map(str::to_string));
        expected.push(ExpectedShipment {
            resource_id: id.clone(),
            order_ref: order_ref.clone(),
            license_code,
        });
    }
    ev.put(
        "invoices",
        expected
            .iter()
            .map(|e| e.resource_id.clone())
            .collect::<Vec<_>>(),
    );
    ensure(!expected.is_empty(), || {
        "needs invoices paid by the earlier steps, and none was".into()
    })?;
    let url = format!("{}/received", orders.trim_end_matches('/'));
    let started = Instant::now();
    let deadline = started + c.o.timeout;
    loop {
        let r = c
            .agent
            .get(&url)
            .call()
            .map_err(|e| match e {
                ureq::Error::Status(code, _) => format!("GET {url} answered {code}"),
                ureq::Error::Transport(t) => http::transport_error(&url, &t).to_string(),
            })?
            .into_string()
            .map_err(|e| format!("GET {url}: {e}"))?;
        let received: Value = serde_json::from_str(&r)
            .map_err(|_| format!("GET {url} did not answer JSON: is it a `paymos orders`?"))?;
        match judge_shipments(&expected, &received, &mut ev.0)? {
            None => {
                ev.put("all_arrived_ms", ms(started.elapsed()));
                return Ok(());
            }
            Some(waiting) if Instant::now() > deadline => {
                let rejected = received["rejected"].as_u64().unwrap_or(0);
                return Err(format!(
                    "not shipped within {} s: {}{}",
                    c.o.timeout.as_secs(),
                    waiting.join(", "),
                    if rejected > 0 {
                        format!(" (the order system refused {rejected} requests with 401: do the receiver's ORDER_SYSTEM_SECRET and the order system's --secret agree?)")
                    } else {
                        String::new()
                    }
                ));
            }
            Some(_) => thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// Step 10 (with `--orders`): what the order system was sent for step 8's refunds: nothing
/// for the invoice refunded before its payment, and for the one refunded after it, a
/// revocation after each fulfilment it was sent (interface §3, amended).
fn step_refunds_sent(c: &Checker, s: &mut State, ev: &mut Ev) -> StepResult {
    let orders = c.o.orders.as_deref().unwrap_or_default();
    let (Some(before), Some(after)) = (&s.refunded_first, &s.refunded_after) else {
        return Err("needs step 8's refunded invoices, which step 8 did not produce".into());
    };
    // give a wrongly made fulfilment time to arrive, then look
    thread::sleep(Duration::from_secs(2));
    let sent = shipped_kinds(c, orders, before)?;
    ev.put("sent_for_refund_before_payment", sent.clone());
    ensure(sent.is_empty(), || {
        format!("the order system was sent {sent:?} for {before}, refunded before its payment")
    })?;
    let deadline = Instant::now() + c.o.timeout;
    loop {
        let sent = shipped_kinds(c, orders, after)?;
        let fulfilled = sent.iter().filter(|k| *k == "fulfilment").count();
        let revoked = sent.iter().filter(|k| *k == "revocation").count();
        ev.put("sent_for_refund_after_payment", sent.clone());
        ensure(revoked <= 1, || {
            format!("{revoked} revocations were sent for {after}: {sent:?}")
        })?;
        if fulfilled == 0 || (revoked == 1 && sent.last().is_some_and(|k| k == "revocation")) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{after} was refunded after its fulfilment was sent, and no revocation followed within {} s: {sent:?}",
                c.o.timeout.as_secs()
            ));
        }
        thread::sleep(Duration::from_millis(200));
    }
}

/// The kinds of the effects the order system at `orders` lists as shipped for `invoice`,
/// in the order they arrived.
fn shipped_kinds(c: &Checker, orders: &str, invoice: &str) -> Result<Vec<String>, String> {
    let url = format!("{}/received", orders.trim_end_matches('/'));
    let text = c
        .agent
        .get(&url)
        .call()
        .map_err(|e| format!("GET {url}: {e}"))?
        .into_string()
        .map_err(|e| format!("GET {url}: {e}"))?;
    let received: Value =
        serde_json::from_str(&text).map_err(|_| format!("GET {url} did not answer JSON"))?;
    Ok(received["shipped"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|x| x["resource_id"] == invoice)
                .map(|x| x["kind"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default())
}

pub const STEP10_NAME: &str =
    "the order system was sent nothing for the refund that overtook its payment, and a revocation after the fulfilment it was sent for the other";

pub const STEP9_NAME: &str =
    "the order system received each fulfilment exactly once, with its license code and order_ref";

pub const STEP_NAMES: [&str; 10] = [
    "a fresh invoice.paid is processed once, with exactly one fulfilment",
    "the same delivery again is a duplicate and changes nothing",
    "20 concurrent identical copies: one duplicate:false, one row, one fulfilment",
    "refused signature, then paid by hand, then delivered: stale, still one fulfilment",
    "reconciliation finds the invoice paid at the provider but never delivered",
    edges::STEP6_NAME,
    edges::STEP7_NAME,
    edges::STEP8_NAME,
    STEP9_NAME,
    STEP10_NAME,
];

/// Runs the seed's five steps and the three past them, ten with `--orders` (each runs even
/// when an earlier one failed; a step that needs an earlier one's result says so). Exit 0
/// only when every step passes.
pub fn run(o: &CheckOptions) -> Result<i32, CliError> {
    o.admin.preflight()?;
    let c = Checker {
        o,
        agent: http::agent(Duration::from_secs(30)),
    };
    let mut state = State::default();
    let mut steps: Vec<fn(&Checker, &mut State, &mut Ev) -> StepResult> = vec![
        step1,
        step2,
        step3,
        step4,
        step5,
        edges::endpoints,
        edges::door,
        edges::refunds,
    ];
    if o.orders.is_some() {
        steps.push(step_orders_received);
        steps.push(step_refunds_sent);
    }
    if !o.json {
        println!(
            "paymos check: deliveries to {}, admin API at {}",
            o.webhook_url, o.admin.base
        );
    }
    let mut reports = Vec::new();
    for (i, f) in steps.iter().enumerate() {
        let mut ev = Ev(Map::new());
        let started = Instant::now();
        let result = f(&c, &mut state, &mut ev);
        ev.put("duration_ms", ms(started.elapsed()));
        let partial = i == 4 && o.sandbox.is_none();
        let rep = StepReport {
            step: i as u8 + 1,
            name: if partial {
                STEP5_PARTIAL_NAME
            } else {
                STEP_NAMES[i]
            },
            pass: result.is_ok(),
            not_proved: partial.then_some(STEP5_NOT_PROVED),
            reason: result.err(),
            evidence: ev.0,
        };
        if !o.json {
            print!("{}", format_step(&rep));
        }
        let refused = i == 0 && !rep.pass && rep.evidence.get("status") == Some(&json!(401));
        reports.push(rep);
        if refused {
            // the receiver refuses the check's signature: every later step would fail, and
            // step 4 would mark an invoice paid by hand that no delivery then completes
            return Err(CliError::Refused(format!(
                "{} refused the check's signed delivery (401): give it the receiver's secret \
                 with --secret or PAYMOS_WEBHOOK_SECRET; the check stopped after step 1 and \
                 changed nothing by hand",
                o.webhook_url
            )));
        }
    }
    let pass = reports.iter().all(|r| r.pass);
    if o.json {
        let mut doc = json!({ "steps": reports.iter().map(StepReport::to_json).collect::<Vec<_>>(), "pass": pass });
        let partial: Vec<u8> = reports
            .iter()
            .filter(|r| r.not_proved.is_some())
            .map(|r| r.step)
            .collect();
        if !partial.is_empty() {
            doc["partial_steps"] = json!(partial);
        }
        println!("{doc}");
    } else {
        println!("{}", summary(&reports));
    }
    Ok(if pass { 0 } else { 1 })
}

/// The closing line: pass/FAIL, and what partial steps did not prove.
pub fn summary(reports: &[StepReport]) -> String {
    let failed: Vec<String> = reports
        .iter()
        .filter(|r| !r.pass)
        .map(|r| r.step.to_string())
        .collect();
    let mut line = if failed.is_empty() {
        format!("pass: all {} steps passed", reports.len())
    } else {
        format!(
            "FAIL: {} of {} steps failed (step {})",
            failed.len(),
            reports.len(),
            failed.join(", ")
        )
    };
    for r in reports.iter().filter(|r| r.pass && r.not_proved.is_some()) {
        line.push_str(&format!(
            "\nbut step {} was PARTIAL: {}",
            r.step,
            r.not_proved.unwrap_or_default()
        ));
    }
    line
}

/// One step as text: `[pass]`, `[PART]` (passed what it could check) or `[FAIL]`, the name,
/// why it failed, what it did not prove, and the evidence.
pub fn format_step(r: &StepReport) -> String {
    let mark = match (r.pass, r.not_proved.is_some()) {
        (false, _) => "[FAIL]",
        (true, true) => "[PART]",
        (true, false) => "[pass]",
    };
    let mut out = format!("{mark} step {}: {}\n", r.step, r.name);
    if let Some(reason) = &r.reason {
        out.push_str(&format!("       why: {reason}\n"));
    }
    if let Some(n) = r.not_proved {
        out.push_str(&format!("       NOT PROVED: {n}\n"));
    }
    for (k, v) in &r.evidence {
        let v = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        out.push_str(&format!("       {k}: {}\n", http::short(&v)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(step: u8, pass: bool, not_proved: Option<&'static str>) -> StepReport {
        StepReport {
            step,
            name: if not_proved.is_some() {
                STEP5_PARTIAL_NAME
            } else {
                STEP_NAMES[step as usize - 1]
            },
            pass,
            not_proved,
            reason: (!pass).then(|| "the repeated delivery was not answered duplicate:true".into()),
            evidence: Map::new(),
        }
    }

    #[test]
    fn step5_without_sandbox_says_it_proved_nothing_about_missing_invoices() {
        let r = report(5, true, Some(STEP5_NOT_PROVED));
        let text = format_step(&r);
        assert!(text.starts_with("[PART] step 5: "), "{text}");
        assert!(!text.contains("[pass]"), "{text}");
        assert!(
            text.contains("missing invoices not checked, no --sandbox"),
            "{text}"
        );
        assert!(
            text.contains("NOT PROVED: this proved nothing about missing invoices"),
            "{text}"
        );
        let j = r.to_json();
        assert_eq!(j["partial"], true);
        assert!(j["not_proved"]
            .as_str()
            .unwrap()
            .starts_with("this proved nothing about missing invoices"));

        let all: Vec<StepReport> = (1..=4).map(|i| report(i, true, None)).chain([r]).collect();
        let s = summary(&all);
        assert!(s.starts_with("pass: all 5 steps passed\n"), "{s}");
        assert!(
            s.contains("but step 5 was PARTIAL: this proved nothing about missing invoices"),
            "{s}"
        );
    }

    fn exp(id: &str, order_ref: &str, code: &str) -> ExpectedShipment {
        ExpectedShipment {
            resource_id: id.into(),
            order_ref: order_ref.into(),
            license_code: Some(code.into()),
        }
    }

    fn shipped(eff: &str, id: &str, order_ref: &str, code: &str) -> Value {
        json!({ "id": eff, "kind": "fulfilment", "resource_id": id, "order_ref": order_ref, "license_code": code })
    }

    #[test]
    fn step6_judges_what_the_order_system_received() {
        let expected = [exp("inv_a", "o_a", "LA"), exp("inv_b", "o_b", "LB")];
        let mut ev = Map::new();
        // one still on its way: poll again
        let partial = json!({ "shipped": [shipped("eff_1", "inv_a", "o_a", "LA")], "requests": 1, "duplicates": 0 });
        assert_eq!(
            judge_shipments(&expected, &partial, &mut ev),
            Ok(Some(vec!["inv_b".to_string()]))
        );
        assert_eq!(ev["shipped_per_invoice"], json!({"inv_a": 1, "inv_b": 0}));
        // both, once each (a revocation or another invoice's fulfilment is not counted)
        let all = json!({ "shipped": [
            shipped("eff_1", "inv_a", "o_a", "LA"),
            shipped("eff_2", "inv_b", "o_b", "LB"),
            shipped("eff_3", "inv_c", "o_c", "LC"),
            { "id": "eff_4", "kind": "revocation", "resource_id": "inv_a" },
        ], "duplicates": 3 });
        assert_eq!(judge_shipments(&expected, &all, &mut ev), Ok(None));
        assert_eq!(ev["orders_duplicates"], 3);
        // shipped twice under two effect ids: the order system could not tell
        let twice = json!({ "shipped": [
            shipped("eff_1", "inv_a", "o_a", "LA"),
            shipped("eff_9", "inv_a", "o_a", "LA"),
            shipped("eff_2", "inv_b", "o_b", "LB"),
        ] });
        let e = judge_shipments(&expected, &twice, &mut ev).unwrap_err();
        assert!(
            e.contains("inv_a was shipped 2 times (effect ids eff_1, eff_9)"),
            "{e}"
        );
        // wrong order_ref or license code
        let wrong = json!({ "shipped": [
            shipped("eff_1", "inv_a", "o_x", "LA"),
            shipped("eff_2", "inv_b", "o_b", "LX"),
        ] });
        let e = judge_shipments(&expected, &wrong, &mut ev).unwrap_err();
        assert!(
            e.contains("inv_a shipped with order_ref \"o_x\", expected o_a"),
            "{e}"
        );
        assert!(
            e.contains("inv_b shipped with license code \"LX\", the receiver recorded LB"),
            "{e}"
        );
    }

    #[test]
    fn step5_judges_the_reconcile_report() {
        // the report the worker gives: the extra invoice missing, brought to paid, ok false
        let registered = ["inv_a".to_string(), "inv_x".to_string()];
        let entry = |id: &str, brought: bool| json!({ "id": id, "order_ref": "order_x", "brought_to_paid": brought, "status": "paid" });
        let good = json!({ "missing": [entry("inv_x", true)], "doubled": [], "ok": false });
        let judge =
            |r: &Value| judge_reconcile_report(r, &registered, "inv_x", &mut Ev(Map::new()));
        assert_eq!(judge(&good), Ok(()));
        let with = |k: &str, v: Value| {
            let mut r = good.clone();
            r[k] = v;
            judge(&r)
        };
        // ok:true while an invoice was missing
        let e = with("ok", json!(true)).unwrap_err();
        assert!(e.contains("says ok: true with an invoice missing"), "{e}");
        // a doubled invoice
        let e = with("doubled", json!([{ "id": "inv_a" }])).unwrap_err();
        assert!(e.contains("doubled is not empty"), "{e}");
        // reported missing but not brought to paid
        let e = with("missing", json!([entry("inv_x", false)])).unwrap_err();
        assert!(e.contains("not brought to paid"), "{e}");
        // an entry that is not the contract's object: a bare id, or a field left out
        for bare in [
            json!(["inv_x"]),
            json!([{ "id": "inv_x", "brought_to_paid": true }]),
        ] {
            let e = with("missing", bare).unwrap_err();
            assert!(e.contains("a missing entry is {id, order_ref"), "{e}");
        }
        // one of the check's delivered invoices reported missing too, or the extra one absent
        let e = with(
            "missing",
            json!([entry("inv_x", true), entry("inv_a", true)]),
        )
        .unwrap_err();
        assert!(e.contains("expected exactly [inv_x]"), "{e}");
        assert!(with("missing", json!([])).is_err());
        // someone else's invoice in a shared sandbox is not judged
        assert_eq!(
            with(
                "missing",
                json!([entry("inv_x", true), { "id": "inv_other" }])
            ),
            Ok(())
        );
    }

    #[test]
    fn a_full_step5_and_a_failure_read_as_such() {
        let full = report(5, true, None);
        assert!(format_step(&full).starts_with("[pass] step 5: reconciliation finds"));
        assert!(full.to_json().get("partial").is_none());
        let failed = report(2, false, None);
        let text = format_step(&failed);
        assert!(text.starts_with("[FAIL] step 2: the same delivery again is a duplicate"));
        assert!(text.contains("why: the repeated delivery was not answered duplicate:true"));
        let s = summary(&[report(1, true, None), failed, report(3, true, None)]);
        assert_eq!(s, "FAIL: 1 of 3 steps failed (step 2)");
    }
}
