// The audit log (interface §11) in workerd: every admin write appears in GET /admin/api/audit
// with its actor (the bearer token's `token`, an Access user's email, a service token's
// common_name), its action, target, outcome and the request's fields, never a credential;
// refusals by the guard (applied:false), 404s and 409s are recorded with their outcome, a 400
// is not; the list is newest first, cursor-paged and filtered by actor and action; a manual
// entry in a resource's history names its operator.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { startWorker, ADMIN_TOKEN, SECRET_NEW, SECRET_OLD } from "./helpers/worker.mjs";
import { deliver, envelope, randomId, admin } from "./helpers/paymos.mjs";
import { AUD, EMAIL, SERVICE_TOKEN, newKey, startJwksStub, claims, mint } from "./helpers/access.mjs";

const API_KEY = "sk_test_sandbox";
// every other secret the worker holds, each of its own (what a pasted credential is checked against)
const ORDER_SYSTEM_SECRET = "whsec_b3JkZXItc3lzdGVtLWF1ZGl0LXRlc3Q=";
const ALERT_WEBHOOK_SECRET = "whsec_YWxlcnQtd2ViaG9vay1hdWRpdC10ZXN0";
let w;
let stub;
let key;
let provider;

before(async () => {
  key = await newKey();
  stub = await startJwksStub([key]);
  // the provider API for reconciliation: no paid invoices
  provider = createServer((req, res) => {
    res.writeHead(200, { "content-type": "application/json" }).end('{"data":[],"has_more":false}');
  });
  await new Promise((r) => provider.listen(0, "127.0.0.1", r));
  w = await startWorker({
    vars: {
      ACCESS_TEAM_DOMAIN: stub.url,
      ACCESS_AUD: AUD,
      PAYMOS_API_BASE: `http://127.0.0.1:${provider.address().port}`,
      PAYMOS_API_KEY: API_KEY,
      // pull mode: effects stay pending in the feed, so a refund cancels its fulfilment
      ORDER_SYSTEM_URL: "",
      ORDER_SYSTEM_SECRET,
      ALERT_WEBHOOK_SECRET,
    },
  });
});
after(async () => {
  await w?.close();
  await stub?.close();
  provider?.close();
});

const user = () => mint(key, claims(stub.url));
const service = () => mint(key, claims(stub.url, { email: undefined, sub: "", identity_nonce: undefined, country: undefined, common_name: SERVICE_TOKEN }));

/** An admin call as an Access user (header), or with the bearer token when `jwt` is absent. */
async function call(method, path, { jwt, body } = {}) {
  const headers = {};
  if (jwt) headers["cf-access-jwt-assertion"] = jwt;
  else headers.authorization = `Bearer ${ADMIN_TOKEN}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${w.url}/admin/api${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}

/** Every audit row, newest first, through the cursor (2 a page: the paging is exercised). */
async function auditLog(query = "") {
  const rows = [];
  let cursor = "";
  for (let pages = 0; pages < 200; pages++) {
    const r = await call("GET", `/audit?limit=2${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    assert.equal(r.status, 200, r.text);
    rows.push(...r.json.data);
    if (!r.json.has_more) {
      assert.equal(r.json.next_cursor, null);
      return rows;
    }
    assert.equal(r.json.data.length, 2);
    cursor = r.json.next_cursor;
  }
  throw new Error("the audit log did not end");
}

async function paid(resourceId) {
  const e = envelope("invoice.paid", resourceId);
  assert.equal((await deliver(w.url, e)).status, 200);
  await w.processed(e.event_id);
  return e;
}

/** The newest row. */
async function newest() {
  const r = await call("GET", "/audit?limit=1");
  assert.equal(r.status, 200, r.text);
  return r.json.data[0];
}

test("each admin write appears in the audit log with its actor, target, outcome and fields", async () => {
  const inv = randomId("inv_");
  const delivered = await paid(inv);
  const jwt = await user();

  // a manual transition by an Access user: applied, then the same one refused by the guard
  const t1 = await call("POST", `/resources/${inv}/transition`, { jwt, body: { to: "refunded", reason: "  customer asked  ", order_ref: "", extra: "ignored" } });
  assert.equal(t1.status, 200, t1.text);
  assert.deepEqual(t1.json, { applied: true, status: "refunded" });
  let row = await newest();
  assert.equal(row.actor, EMAIL);
  assert.equal(row.action, "transition");
  assert.equal(row.target, inv);
  assert.equal(row.outcome, "applied");
  assert.deepEqual(row.detail, { to: "refunded", reason: "customer asked" });
  assert.match(row.at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  const t2 = await call("POST", `/resources/${inv}/transition`, { body: { to: "refunded", reason: "again" } });
  assert.deepEqual(t2.json, { applied: false, status: "refunded" });
  row = await newest();
  assert.deepEqual([row.actor, row.action, row.outcome], ["token", "transition", "refused"]);

  // the resource's history names the operator of its manual entry, and only of that one
  const resource = await call("GET", `/resources/${inv}`);
  assert.equal(resource.status, 200);
  const manual = resource.json.history.filter((h) => h.cause_kind === "manual");
  assert.equal(manual.length, 1, "the refused transition wrote no history");
  assert.equal(manual[0].actor, EMAIL);
  assert.equal(manual[0].cause, "customer asked");
  assert.ok(resource.json.history.filter((h) => h.cause_kind === "event").every((h) => h.actor === null));

  // a replay (bearer), and one of a delivery that does not exist
  assert.equal((await call("POST", `/deliveries/${delivered.event_id}/replay`)).status, 202);
  row = await newest();
  assert.deepEqual([row.actor, row.action, row.target, row.outcome, row.detail], ["token", "replay", delivered.event_id, "replayed", {}]);
  assert.equal((await call("POST", "/deliveries/evt_nothere/replay", { jwt })).status, 404);
  row = await newest();
  assert.deepEqual([row.actor, row.action, row.target, row.outcome], [EMAIL, "replay", "evt_nothere", "not_found"]);
  await w.processed(delivered.event_id);

  // a bulk replay by a service token: a dry run, then the real one
  const svc = await service();
  const dry = await call("POST", "/deliveries/replay", { jwt: svc, body: { resource_id: inv, dry_run: true } });
  assert.equal(dry.status, 200, dry.text);
  assert.equal(dry.json.matched, 1);
  row = await newest();
  assert.deepEqual([row.actor, row.action, row.target, row.outcome, row.detail], [SERVICE_TOKEN, "bulk_replay", null, "dry_run", { resource_id: inv, dry_run: true }]);
  const bulk = await call("POST", "/deliveries/replay", { jwt: svc, body: { resource_id: inv, status: "unprocessed" } });
  assert.equal(bulk.status, 200, bulk.text);
  row = await newest();
  assert.deepEqual([row.actor, row.action, row.outcome, row.detail], [SERVICE_TOKEN, "bulk_replay", "replayed", { resource_id: inv, status: "received", dry_run: false }]);

  // a refused body (400) changes nothing and is not recorded
  const before400 = (await newest()).id;
  const bad = await call("POST", `/resources/${inv}/transition`, { body: { to: "paid", reason: "" } });
  assert.equal(bad.status, 400);
  assert.equal(bad.json.error, "invalid_reason");
  assert.equal((await newest()).id, before400);

  // reconciliation
  const rec = await call("POST", "/reconcile", { jwt, body: { full: true } });
  assert.equal(rec.status, 200, rec.text);
  row = await newest();
  assert.deepEqual([row.actor, row.action, row.target, row.outcome, row.detail], [EMAIL, "reconcile", null, "ok", { full: true }]);
});

test("a redelivery is recorded redelivered, conflict (409, cancelled) or not_found (404)", async () => {
  const inv = randomId("inv_");
  await paid(inv);
  const feed = await call("GET", `/effects?kind=fulfilment&limit=1000`);
  const fulfilment = feed.json.data.find((e) => e.resource_id === inv);
  assert.ok(fulfilment, "the fulfilment is in the feed");
  assert.equal((await call("POST", `/effects/${fulfilment.id}/redeliver`)).status, 202);
  let row = await newest();
  assert.deepEqual([row.action, row.target, row.outcome], ["redeliver", fulfilment.id, "redelivered"]);

  // refunded before it was delivered: the fulfilment is cancelled, and never sent again
  const refund = envelope("invoice.refunded", inv);
  assert.equal((await deliver(w.url, refund)).status, 200);
  await w.processed(refund.event_id);
  const refused = await call("POST", `/effects/${fulfilment.id}/redeliver`, { jwt: await user() });
  assert.equal(refused.status, 409, refused.text);
  assert.equal(refused.json.error, "cancelled");
  row = await newest();
  assert.deepEqual([row.actor, row.action, row.outcome], [EMAIL, "redeliver", "conflict"]);

  assert.equal((await call("POST", "/effects/eff_none/redeliver")).status, 404);
  row = await newest();
  assert.deepEqual([row.target, row.outcome], ["eff_none", "not_found"]);
});

test("an alert acknowledgement is recorded acknowledged, conflict (409) or not_found (404)", async () => {
  await w.db.batch([
    w.db.prepare("INSERT INTO alert (id, kind, severity, summary, count) VALUES ('alt_audit_open', 'effect_dead', 'critical', 'an effect is dead', 1)"),
    w.db.prepare("INSERT INTO alert (id, kind, severity, summary, count, state, resolved_at) VALUES ('alt_audit_done', 'delivery_dead', 'critical', 'a delivery is dead', 1, 'resolved', '2026-01-01T00:00:00.000Z')"),
  ]);
  const jwt = await user();
  const ack = await call("POST", "/alerts/alt_audit_open/ack", { jwt });
  assert.equal(ack.status, 200, ack.text);
  assert.deepEqual(ack.json, { id: "alt_audit_open", state: "acknowledged" });
  let row = await newest();
  assert.deepEqual([row.actor, row.action, row.target, row.outcome], [EMAIL, "alert_ack", "alt_audit_open", "acknowledged"]);
  const resolved = await call("POST", "/alerts/alt_audit_done/ack");
  assert.equal(resolved.status, 409);
  assert.equal(resolved.json.error, "alert_resolved");
  assert.equal((await newest()).outcome, "conflict");
  assert.equal((await call("POST", "/alerts/alt_audit_none/ack")).status, 404);
  assert.deepEqual([(await newest()).target, (await newest()).outcome], ["alt_audit_none", "not_found"]);
});

test("a pull ack is recorded delivered, already, conflict (409) or not_found (404)", async () => {
  const inv = randomId("inv_");
  await paid(inv);
  const feed = await call("GET", `/effects?kind=fulfilment&dispatch=pending&limit=1000`);
  const fulfilment = feed.json.data.find((e) => e.resource_id === inv);
  assert.ok(fulfilment, "the fulfilment is pending in the feed");
  const jwt = await user();
  const ack = await call("POST", `/effects/${fulfilment.id}/ack`, { jwt });
  assert.equal(ack.status, 200, ack.text);
  assert.deepEqual(ack.json, { id: fulfilment.id, dispatch: "delivered", already: false });
  let row = await newest();
  assert.deepEqual([row.actor, row.action, row.target, row.outcome, row.detail], [EMAIL, "effect_ack", fulfilment.id, "delivered", {}]);
  const again = await call("POST", `/effects/${fulfilment.id}/ack`);
  assert.equal(again.status, 200, again.text);
  assert.equal(again.json.already, true);
  row = await newest();
  assert.deepEqual([row.actor, row.outcome], ["token", "already"]);

  // refunded before it was acknowledged: cancelled, never delivered
  const inv2 = randomId("inv_");
  await paid(inv2);
  const refund = envelope("invoice.refunded", inv2);
  assert.equal((await deliver(w.url, refund)).status, 200);
  await w.processed(refund.event_id);
  const cancelled = (await call("GET", `/effects?kind=fulfilment&dispatch=cancelled&limit=1000`)).json.data.find((e) => e.resource_id === inv2);
  assert.ok(cancelled, "the refund cancelled the fulfilment");
  const refused = await call("POST", `/effects/${cancelled.id}/ack`);
  assert.equal(refused.status, 409, refused.text);
  assert.equal(refused.json.error, "cancelled");
  assert.equal((await newest()).outcome, "conflict");
  assert.equal((await call("POST", "/effects/eff_none/ack")).status, 404);
  row = await newest();
  assert.deepEqual([row.action, row.target, row.outcome], ["effect_ack", "eff_none", "not_found"]);
});

test("a dismissal is recorded dismissed, already, conflict (409) or not_found (404), with its reason", async () => {
  const inv = randomId("inv_");
  const e = await paid(inv);
  // not dead: refused, and recorded so
  const alive = await call("POST", `/deliveries/${e.event_id}/dismiss`, { body: { reason: "a test event" } });
  assert.equal(alive.status, 409, alive.text);
  assert.equal(alive.json.error, "not_dead");
  let row = await newest();
  assert.deepEqual([row.action, row.target, row.outcome, row.detail], ["delivery_dismiss", e.event_id, "conflict", { reason: "a test event" }]);
  // (a dead delivery, set up directly: the queue's retries are another test's)
  await w.db.prepare("UPDATE webhook_delivery SET outcome = 'dead', processed_at = received_at WHERE event_id = ?1").bind(e.event_id).run();
  const jwt = await user();
  const d1 = await call("POST", `/deliveries/${e.event_id}/dismiss`, { jwt, body: { reason: "  a test event  " } });
  assert.equal(d1.status, 200, d1.text);
  assert.equal(d1.json.already, false);
  assert.equal(d1.json.reason, "a test event");
  row = await newest();
  assert.deepEqual([row.actor, row.action, row.outcome, row.detail], [EMAIL, "delivery_dismiss", "dismissed", { reason: "a test event" }]);
  const d2 = await call("POST", `/deliveries/${e.event_id}/dismiss`, { body: { reason: "again" } });
  assert.equal(d2.status, 200, d2.text);
  assert.deepEqual([d2.json.already, d2.json.reason], [true, "a test event"]);
  row = await newest();
  assert.deepEqual([row.outcome, row.detail], ["already", { reason: "again" }]);
  assert.equal((await call("POST", "/deliveries/evt_none/dismiss", { body: { reason: "x" } })).status, 404);
  assert.equal((await newest()).outcome, "not_found");
  // a refused body is not recorded
  const before400 = (await newest()).id;
  assert.equal((await call("POST", `/deliveries/${e.event_id}/dismiss`, { body: { reason: " " } })).status, 400);
  assert.equal((await newest()).id, before400);

  // an effect: pending is not dead; dead, dismissed once
  const fulfilment = (await call("GET", `/effects?kind=fulfilment&limit=1000`)).json.data.find((x) => x.resource_id === inv);
  const pending = await call("POST", `/effects/${fulfilment.id}/dismiss`, { body: { reason: "settled by hand" } });
  assert.equal(pending.status, 409, pending.text);
  assert.deepEqual([(await newest()).action, (await newest()).outcome], ["effect_dismiss", "conflict"]);
  await w.db.prepare("UPDATE effect SET dispatch = 'dead' WHERE effect_id = ?1").bind(fulfilment.id).run();
  const dead = await call("POST", `/effects/${fulfilment.id}/dismiss`, { jwt, body: { reason: "settled by hand" } });
  assert.equal(dead.status, 200, dead.text);
  assert.deepEqual([dead.json.id, dead.json.dismissed, dead.json.already], [fulfilment.id, true, false]);
  row = await newest();
  assert.deepEqual([row.actor, row.action, row.target, row.outcome, row.detail], [EMAIL, "effect_dismiss", fulfilment.id, "dismissed", { reason: "settled by hand" }]);
  assert.equal((await call("POST", "/effects/eff_none/dismiss", { body: { reason: "x" } })).status, 404);
  assert.equal((await newest()).outcome, "not_found");
});

test("the log is newest first, cursor-paged and filtered by actor and action; it holds no credential", async () => {
  const all = await auditLog();
  assert.equal(all.length, 24, "7 writes of the first test, 3 of the second and of the third, 4 of the fourth, 7 of the fifth");
  const ids = all.map((r) => r.id);
  assert.deepEqual(ids, [...ids].sort((a, b) => b - a), "newest first");
  assert.equal(new Set(ids).size, ids.length, "no row twice across pages");
  for (const r of all) {
    assert.deepEqual(Object.keys(r).sort(), ["action", "actor", "at", "detail", "id", "outcome", "target"]);
    assert.equal(typeof r.detail, "object");
  }
  // every write of the first tests, oldest first
  const actions = new Set(all.map((r) => r.action));
  for (const a of ["transition", "replay", "delivery_dismiss", "bulk_replay", "redeliver", "effect_ack", "effect_dismiss", "alert_ack", "reconcile"]) assert.ok(actions.has(a), a);

  const byEmail = await auditLog(`&actor=${encodeURIComponent(EMAIL)}`);
  assert.deepEqual(byEmail.map((r) => r.id), all.filter((r) => r.actor === EMAIL).map((r) => r.id));
  assert.ok(byEmail.length >= 5);
  const replays = await auditLog("&action=replay");
  assert.deepEqual(replays.map((r) => r.id), all.filter((r) => r.action === "replay").map((r) => r.id));
  const both = await auditLog(`&actor=token&action=transition`);
  assert.deepEqual(both.map((r) => r.id), all.filter((r) => r.actor === "token" && r.action === "transition").map((r) => r.id));
  assert.equal(both.length, 1);
  assert.deepEqual((await call("GET", "/audit?actor=nobody%40example.com")).json, { data: [], has_more: false, next_cursor: null });

  // the filters are checked as the other lists' are
  for (const [q, code] of [["action=delete", "invalid_action"], ["cursor=abc", "invalid_cursor"], ["limit=0", "invalid_limit"], [`actor=${"x".repeat(321)}`, "invalid_actor"]]) {
    const r = await call("GET", `/audit?${q}`);
    assert.equal(r.status, 400, q);
    assert.equal(r.json.error, code);
    assert.ok(r.json.message);
  }
  assert.equal((await call("POST", "/audit")).status, 405);

  // nothing a caller authenticated with is kept
  const text = JSON.stringify(all);
  assert.ok(!text.includes(ADMIN_TOKEN), "the bearer token");
  assert.ok(!text.includes("eyJ"), "a JWT");
  assert.ok(!text.includes(API_KEY));
  // rows are never deleted or changed (the schema refuses it)
  await assert.rejects(w.db.prepare("DELETE FROM audit").run(), /never deleted/);
  await assert.rejects(w.db.prepare("UPDATE audit SET actor = 'x'").run(), /never changed/);
  assert.equal((await auditLog()).length, all.length);
});

test("a credential pasted into a write's text is not kept: not in the audit log, the history or the effect", async () => {
  const jwt = await user();
  const inv = randomId("inv_");
  const r = await call("POST", `/resources/${inv}/transition`, {
    jwt,
    // (an Access token is longer than any field takes)
    body: { to: "paid", reason: `pasted Bearer ${ADMIN_TOKEN} and ${SECRET_NEW}`, order_ref: API_KEY },
  });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json, { applied: true, status: "paid" });
  const row = await newest();
  assert.deepEqual([row.action, row.target, row.actor], ["transition", inv, EMAIL]);
  assert.deepEqual(row.detail, { to: "paid", reason: "pasted Bearer [redacted] and [redacted]", order_ref: "[redacted]" });
  const resource = (await call("GET", `/resources/${inv}`)).json;
  const kept = JSON.stringify([row, resource]);
  for (const credential of [ADMIN_TOKEN, SECRET_NEW, jwt, API_KEY]) assert.ok(!kept.includes(credential), credential.slice(0, 12));
  assert.match(resource.history.at(-1).cause, /^pasted Bearer \[redacted\]/);
});

test("every secret the worker holds is redacted from a write's text: each webhook secret, the order system's and the alert webhook's", async () => {
  const held = { SECRET_NEW, SECRET_OLD, ORDER_SYSTEM_SECRET, ALERT_WEBHOOK_SECRET, API_KEY, ADMIN_TOKEN };
  for (const [name, secret] of Object.entries(held)) {
    const inv = randomId("inv_");
    const r = await call("POST", `/resources/${inv}/transition`, { body: { to: "paid", reason: `${name} is ${secret}` } });
    assert.equal(r.status, 200, r.text);
    const row = await newest();
    assert.deepEqual([row.action, row.target], ["transition", inv]);
    assert.equal(row.detail.reason, `${name} is [redacted]`, name);
    const resource = (await call("GET", `/resources/${inv}`)).json;
    assert.ok(!JSON.stringify([row, resource]).includes(secret), name);
  }
});

test("the effects feed's dismissed filter: dead effects an operator did or did not dismiss; only with dispatch=dead", async () => {
  const ids = [randomId("inv_"), randomId("inv_"), randomId("inv_")];
  const now = new Date().toISOString();
  await w.db.prepare("INSERT INTO resource (id, kind, status) SELECT value, 'invoice', 'paid' FROM json_each(?)").bind(JSON.stringify(ids)).run();
  await w.db
    .prepare(`INSERT INTO effect (resource_id, kind, license_code, cause, effect_id, dispatch, dead_at, dismissed_at, dismiss_reason) SELECT value, 'fulfilment', 'CODE', 'seed', 'eff_df' || key || '${ids[0].slice(4, 12)}', 'dead', '${now}', CASE WHEN key = 0 THEN '${now}' END, CASE WHEN key = 0 THEN 'handled' END FROM json_each(?)`)
    .bind(JSON.stringify(ids))
    .run();
  const mine = (r) => r.json.data.filter((e) => ids.includes(e.resource_id)).map((e) => e.resource_id);
  const open = await call("GET", "/effects?dispatch=dead&dismissed=false&limit=1000");
  assert.equal(open.status, 200, open.text);
  assert.deepEqual(mine(open), ids.slice(1));
  assert.ok(open.json.data.every((e) => e.dismissed_at === null && e.dispatch === "dead"));
  const handled = await call("GET", "/effects?dispatch=dead&dismissed=true&limit=1000");
  assert.deepEqual(mine(handled), ids.slice(0, 1));
  assert.ok(handled.json.data.every((e) => e.dismissed_at !== null));
  // paged by the same cursor
  const first = await call("GET", "/effects?dispatch=dead&dismissed=false&limit=1");
  assert.equal(first.json.data.length, 1);
  const next = await call("GET", `/effects?dispatch=dead&dismissed=false&limit=1000&cursor=${encodeURIComponent(first.json.next_cursor)}`);
  assert.ok(!next.json.data.some((e) => e.id === first.json.data[0].id));
  for (const q of ["dismissed=false", "dispatch=pending&dismissed=true", "dispatch=dead&dismissed=maybe"]) {
    const r = await call("GET", `/effects?${q}`);
    assert.equal(r.status, 400, q);
    assert.equal(r.json.error, "invalid_dismissed", q);
  }
});

// (after the count above: these add rows of their own)

// §6/§11: a reconcile refused because another invocation walks a run (409) is recorded
// `conflict`, as the other writes' 409s are, not `failed`
test("a reconcile refused while another invocation holds the walk's lease is recorded conflict", async () => {
  // a walk in progress elsewhere: its run open, its lease held
  await w.db.batch([
    w.db.prepare("INSERT INTO reconciliation_run (state, full_walk) VALUES ('running', 1)"),
    w.db.prepare("INSERT OR REPLACE INTO lease (name, holder, until) VALUES ('reconciliation', 'someone-else', strftime('%Y-%m-%dT%H:%M:%fZ','now','+300 seconds'))"),
  ]);
  try {
    const r = await call("POST", "/reconcile", { body: { full: true } });
    assert.equal(r.status, 409, r.text);
    assert.equal(r.json.error, "reconciliation_running");
    const row = await newest();
    assert.deepEqual([row.action, row.outcome, row.detail], ["reconcile", "conflict", { full: true }]);
  } finally {
    await w.db.prepare("DELETE FROM lease WHERE name = 'reconciliation'").run();
  }
});

// §5: a refusal says why in its message ({"error","message"}), the 409s too: which state the
// thing is in, what to do
test("a 409 answer carries a message saying why", async () => {
  const e = await paid(randomId("inv_"));
  const r = await call("POST", `/deliveries/${e.event_id}/dismiss`, { body: { reason: "not dead yet" } });
  assert.equal(r.status, 409, r.text);
  assert.equal(r.json.error, "not_dead");
  assert.match(r.json.message ?? "", /only a dead one can be dismissed/);
});
