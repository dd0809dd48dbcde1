// The archive in R2 (interface §10), against Miniflare's real local R2 bucket and
// D1: processed bodies past a cutoff leave D1 for gzip NDJSON objects (read back here with
// node:zlib and node:crypto, not with the Worker's code), only after each object is written
// and read back; the slim row keeps deduping and answering; a replay reads the body back;
// a failed write removes nothing; no binding, nothing removed; runs bounded by the budget.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { gunzipSync } from "node:zlib";
import { createHash } from "node:crypto";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { startWorker, ROOT, ADMIN_TOKEN } from "./helpers/worker.mjs";
import { deliver, envelope, randomId, admin } from "./helpers/paymos.mjs";

const KEY = /^deliveries\/(\d{4})\/(\d{2})\/(\d{2})\/\d{9}-[0-9a-f]{16}\.ndjson\.gz$/;
const LINE_FIELDS = ["body", "event_id", "event_type", "outcome", "processed_at", "received_at", "resource_id"];

/** A stored time (SQLite's strftime text) `days` ago at `hh:mm:ss` + `ms` UTC. */
function at(days, second = 0) {
  const d = new Date(Date.now() - days * 86_400_000);
  d.setUTCHours(12, 0, 0, 0);
  return new Date(d.getTime() + second * 1000).toISOString();
}

/**
 * Rows as the receiver and the consumer leave them, received `days` ago: `n` deliveries of a
 * fresh invoice each (processed as `outcome`, or unprocessed with `outcome: null`). Returns
 * [{event_id, resource_id, body}].
 */
async function seed(db, { days, n = 3, outcome = "applied", type = "invoice.paid" }) {
  const rows = [];
  for (let i = 0; i < n; i++) {
    const inv = randomId("inv_");
    const env = envelope(type, inv);
    const body = JSON.stringify(env);
    const received = at(days, i);
    await db
      .prepare(
        "INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, received_at, processed_at, outcome) VALUES (?, ?, ?, ?, ?, ?, ?)",
      )
      .bind(env.event_id, inv, type, body, received, outcome ? received.replace(/\.\d{3}Z$/, ".500Z") : null, outcome)
      .run();
    rows.push({ event_id: env.event_id, resource_id: inv, body, received_at: received });
  }
  return rows;
}

/**
 * A delivery's row, with `body` the body D1 still holds for it wherever it is (its own row in
 * delivery_body since migration 0013, or the delivery row's `body` for one received before
 * or restored by a replay), "" when none, and `body_rows` its rows in delivery_body.
 */
async function row(db, id) {
  return db
    .prepare(
      `SELECT d.*, coalesce(nullif(d.body, ''), b.body, '') AS body,
              (SELECT count(*) FROM delivery_body x WHERE x.event_id = d.event_id) AS body_rows
       FROM webhook_delivery d
       LEFT JOIN delivery_body b ON b.received_at = d.received_at AND b.event_id = d.event_id
       WHERE d.event_id = ?`,
    )
    .bind(id)
    .first();
}

/** Every object under deliveries/, each with its bytes, metadata and gunzipped lines. */
async function objects(w) {
  const bucket = await w.mf.getR2Bucket("ARCHIVE");
  const out = [];
  let cursor;
  for (;;) {
    const page = await bucket.list({ prefix: "deliveries/", cursor, include: ["customMetadata"] });
    for (const o of page.objects) {
      const got = await bucket.get(o.key);
      const bytes = Buffer.from(await got.arrayBuffer());
      const text = gunzipSync(bytes).toString("utf8");
      out.push({ key: o.key, bytes, meta: got.customMetadata, text, lines: text.split("\n").filter(Boolean).map((l) => JSON.parse(l)) });
    }
    if (!page.truncated) break;
    cursor = page.cursor;
  }
  return out;
}

const now = () => new Date().toISOString();

let w;
before(async () => {
  w = await startWorker();
});
after(async () => {
  await w?.close();
});

test("archive, then read back: one object per day, bodies verbatim, bodies out of D1, rows still answering", async () => {
  // three real deliveries (through the webhook and the consumer) and older ones on two days
  const sent = [];
  for (let i = 0; i < 3; i++) {
    const env = envelope("invoice.paid", randomId("inv_"), { data: { note: `line\nbreak "${i}" é` } });
    const rawBody = JSON.stringify(env, null, i); // the raw text, whatever its spacing
    assert.equal((await deliver(w.url, env, { rawBody })).status, 200);
    sent.push({ event_id: env.event_id, resource_id: env.data.id, body: rawBody });
  }
  for (const s of sent) await w.processed(s.event_id);
  const old = [...(await seed(w.db, { days: 41, n: 2 })), ...(await seed(w.db, { days: 40, n: 3, outcome: "stale" }))];
  const all = [...old, ...sent];

  const r = await admin(w.url, "POST", "/archive", { before: now() });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  assert.ok(r.json.archived >= all.length, JSON.stringify(r.json));
  assert.equal(r.json.remaining, 0);
  assert.equal(r.json.next_cursor, null);
  assert.equal(r.json.state, "done");

  const objs = await objects(w);
  const lineOf = new Map();
  for (const o of objs) {
    const m = KEY.exec(o.key);
    assert.ok(m, o.key);
    // one received day per object, the day of its key
    const days = new Set(o.lines.map((l) => l.received_at.slice(0, 10)));
    assert.deepEqual([...days], [`${m[1]}-${m[2]}-${m[3]}`], o.key);
    // its metadata says what node:crypto and node:zlib find in it
    assert.equal(o.meta.sha256, createHash("sha256").update(o.bytes).digest("hex"));
    assert.equal(Number(o.meta.lines), o.lines.length);
    assert.equal(o.meta.ndjson_sha256, createHash("sha256").update(o.text).digest("hex"));
    assert.ok(o.text.endsWith("\n"));
    for (const l of o.lines) {
      assert.deepEqual(Object.keys(l).sort(), LINE_FIELDS);
      lineOf.set(l.event_id, { ...l, key: o.key });
    }
  }
  assert.equal(new Set(old.map((x) => KEY.exec(lineOf.get(x.event_id).key).slice(1).join("-"))).size, 2, "two days, two objects");

  for (const d of all) {
    const line = lineOf.get(d.event_id);
    assert.ok(line, `${d.event_id} is in an object`);
    assert.equal(line.body, d.body, "the raw text as received");
    const stored = await row(w.db, d.event_id);
    assert.equal(stored.body, "", "the body left D1");
    assert.equal(stored.body_rows, 0, "its own row deleted, not emptied");
    assert.equal(stored.archive_key, line.key);
    assert.ok(stored.archived_at);
    assert.equal(line.processed_at, stored.processed_at);
    assert.equal(line.outcome, stored.outcome);
    assert.equal(line.received_at, stored.received_at);
    assert.equal(line.resource_id, d.resource_id);
    // GET answers as before, archived: its body read back from the object
    const got = await admin(w.url, "GET", `/deliveries/${d.event_id}`);
    assert.equal(got.status, 200);
    assert.equal(got.json.archived, true);
    assert.equal(got.json.archive_key, line.key);
    assert.deepEqual(got.json.body, JSON.parse(d.body));
    assert.equal(got.json.outcome, stored.outcome);
    assert.equal(got.json.event_type, "invoice.paid");
  }
  // the list shows them too (without reading bodies back: a page would read many objects)
  const list = await admin(w.url, "GET", `/deliveries?resource_id=${sent[0].resource_id}`);
  assert.equal(list.json.data[0].archived, true);
  assert.equal(list.json.data[0].body, null);
  // an object that cannot be read back: the row still answers, its body null, and it is said
  const bucket = await w.mf.getR2Bucket("ARCHIVE");
  const lost = old[0];
  const lostKey = lineOf.get(lost.event_id).key;
  const saved = await (await bucket.get(lostKey)).arrayBuffer();
  const meta = (await bucket.head(lostKey)).customMetadata;
  await bucket.delete(lostKey);
  const missing = await admin(w.url, "GET", `/deliveries/${lost.event_id}`);
  assert.deepEqual([missing.status, missing.json.archived, missing.json.body], [200, true, null]);
  assert.ok(w.logs.some((l) => l.event_id === lost.event_id && l.outcome === "archive_read_failed" && /not in the archive/.test(l.detail)));
  await bucket.put(lostKey, saved, { customMetadata: meta });
  assert.deepEqual((await admin(w.url, "GET", `/deliveries/${lost.event_id}`)).json.body, JSON.parse(lost.body));
  // the run is on record
  const run = await w.db.prepare("SELECT * FROM archive_run ORDER BY id DESC LIMIT 1").first();
  assert.equal(run.state, "done");
  assert.equal(run.started_by, "admin");
  assert.ok(run.archived >= all.length && run.objects === objs.length, JSON.stringify(run));

  // a duplicate of an archived delivery is still a duplicate, and changes nothing
  const env = JSON.parse(sent[0].body);
  const before = await row(w.db, env.event_id);
  const dup = await deliver(w.url, env, { rawBody: sent[0].body });
  assert.equal(dup.status, 200);
  assert.deepEqual(dup.json, { received: true, duplicate: true });
  assert.deepEqual(await row(w.db, env.event_id), before);
  // and nothing is archived twice
  const again = await admin(w.url, "POST", "/archive", { before: now() });
  assert.equal(again.json.archived, 0);
  assert.equal((await objects(w)).length, objs.length);
});

test("a replay reads the body back from R2, and changes nothing twice", async () => {
  const inv = randomId("inv_");
  const env = envelope("invoice.paid", inv);
  const rawBody = JSON.stringify(env);
  await deliver(w.url, env, { rawBody });
  assert.equal((await w.processed(env.event_id)).outcome, "applied");
  const effects = async () => (await w.db.prepare("SELECT count(*) AS n FROM effect WHERE resource_id = ?").bind(inv).first()).n;
  assert.equal(await effects(), 1);
  await admin(w.url, "POST", "/archive", { before: now() });
  const archived = await row(w.db, env.event_id);
  assert.equal(archived.body, "");

  const r = await admin(w.url, "POST", `/deliveries/${env.event_id}/replay`);
  assert.equal(r.status, 202, JSON.stringify(r.json));
  // restored in the reset's batch: the consumer reads it as any other
  const restored = await w.processed(env.event_id);
  assert.equal(restored.body, rawBody, "the body is back, byte for byte");
  assert.equal(restored.archived_at, null);
  assert.equal(restored.archive_key, null);
  assert.equal(restored.outcome, "stale", "the guard: already paid");
  assert.equal(restored.replays, 1);
  assert.equal(await effects(), 1, "nothing shipped twice");
  const got = await admin(w.url, "GET", `/deliveries/${env.event_id}`);
  assert.equal(got.json.archived, false);
  assert.equal(got.json.body.event_id, env.event_id);

  // archived again by the next run (its line now says stale), and a replay from there again
  await admin(w.url, "POST", "/archive", { before: now() });
  const second = await row(w.db, env.event_id);
  assert.equal(second.body, "");
  assert.notEqual(second.archive_key, archived.archive_key, "a new object, with the new outcome");
  await admin(w.url, "POST", `/deliveries/${env.event_id}/replay`);
  assert.equal((await w.processed(env.event_id)).outcome, "stale");
  assert.equal(await effects(), 1);
  // each replay of the archived body is one audit row, written in its restoring batch
  const audit = async (q) => (await admin(w.url, "GET", `/audit?${q}`)).json.data;
  const replays = (await audit("action=replay&limit=1000")).filter((a) => a.target === env.event_id);
  assert.deepEqual(replays.map((a) => a.outcome), ["replayed", "replayed"]);
  // and an absent delivery's replay is one not_found row, not one per look
  assert.equal((await admin(w.url, "POST", "/deliveries/evt_archive_absent/replay")).status, 404);
  const absent = (await audit("action=replay&limit=1000")).filter((a) => a.target === "evt_archive_absent");
  assert.deepEqual(absent.map((a) => a.outcome), ["not_found"]);

  // bulk: every archived delivery of a filter restored in its chunk's batch
  const invs = [randomId("inv_"), randomId("inv_")];
  const bodies = {};
  for (const i of invs) {
    const e = envelope("invoice.paid", i);
    bodies[e.event_id] = JSON.stringify(e);
    await deliver(w.url, e, { rawBody: bodies[e.event_id] });
    await w.processed(e.event_id);
  }
  await admin(w.url, "POST", "/archive", { before: now() });
  for (const id of Object.keys(bodies)) assert.equal((await row(w.db, id)).body, "");
  const bulk = await admin(w.url, "POST", "/deliveries/replay", { resource_id: invs[0] });
  assert.equal(bulk.status, 200, JSON.stringify(bulk.json));
  assert.equal(bulk.json.reset, 1);
  const bulk2 = await admin(w.url, "POST", "/deliveries/replay", { resource_id: invs[1] });
  assert.equal(bulk2.json.reset, 1);
  for (const [id, body] of Object.entries(bodies)) {
    const p = await w.processed(id);
    assert.equal(p.body, body);
    assert.equal(p.outcome, "stale");
  }
  for (const i of invs) {
    assert.equal((await w.db.prepare("SELECT count(*) AS n FROM effect WHERE resource_id = ?").bind(i).first()).n, 1);
  }

  // a bulk replay whose chunk needs six objects: cut after four, the next chunk reads the rest
  const spread = [];
  for (let d = 0; d < 6; d++) spread.push(...(await seed(w.db, { days: 70 + d, n: 1, type: "invoice.expired" })));
  await admin(w.url, "POST", "/archive", { before: now() });
  assert.equal(new Set(await Promise.all(spread.map(async (d) => (await row(w.db, d.event_id)).archive_key))).size, 6);
  const wide = await admin(w.url, "POST", "/deliveries/replay", { type: "invoice.expired" });
  assert.equal(wide.status, 200, JSON.stringify(wide.json));
  assert.deepEqual([wide.json.matched, wide.json.reset, wide.json.next_cursor], [6, 6, null]);
  const bulks = await audit("action=bulk_replay&limit=3");
  assert.deepEqual(bulks.map((a) => [a.outcome, a.detail.type ?? a.detail.resource_id]), [
    ["replayed", "invoice.expired"],
    ["replayed", invs[1]],
    ["replayed", invs[0]],
  ]);
  const archives = await audit("action=archive&limit=1000");
  assert.ok(archives.length >= 4, "every POST /archive is audited");
  assert.ok(archives.every((a) => a.outcome === "ok" && typeof a.detail.before === "string"), JSON.stringify(archives));
  for (const d of spread) {
    const p = await w.processed(d.event_id);
    assert.equal(p.body, d.body);
    assert.equal(p.archive_key, null);
  }
});

test("a replay whose archived body cannot be read back (its object gone) is 502, changes nothing, and is audited failed", async () => {
  const env = envelope("invoice.paid", randomId("inv_"));
  await deliver(w.url, env);
  assert.equal((await w.processed(env.event_id)).outcome, "applied");
  await admin(w.url, "POST", "/archive", { before: now() });
  const archived = await row(w.db, env.event_id);
  assert.equal(archived.body, "");
  await (await w.mf.getR2Bucket("ARCHIVE")).delete(archived.archive_key);

  const r = await admin(w.url, "POST", `/deliveries/${env.event_id}/replay`);
  assert.equal(r.status, 502, JSON.stringify(r.json));
  assert.equal(r.json.error, "archive_failed");
  const after = await row(w.db, env.event_id);
  assert.deepEqual(
    [after.archive_key, after.generation, after.replays, after.outcome],
    [archived.archive_key, archived.generation, archived.replays, "applied"],
    "nothing reset",
  );
  const rows = (await admin(w.url, "GET", "/audit?action=replay&limit=1000")).json.data.filter((a) => a.target === env.event_id);
  assert.deepEqual(rows.map((a) => [a.outcome, a.actor]), [["failed", "token"]]);
});

test("unprocessed deliveries are never archived, nor those after the cutoff", async () => {
  const unprocessed = await seed(w.db, { days: 60, n: 2, outcome: null });
  const recent = await seed(w.db, { days: 10, n: 1 });
  const old = await seed(w.db, { days: 60, n: 1, outcome: "dead" });
  const r = await admin(w.url, "POST", "/archive", { before: at(20) });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  assert.ok(r.json.archived >= 1);
  for (const d of [...unprocessed, ...recent]) {
    const stored = await row(w.db, d.event_id);
    assert.equal(stored.body, d.body, `${d.event_id} keeps its body`);
    assert.equal(stored.archived_at, null);
  }
  assert.equal((await row(w.db, old[0].event_id)).body, "", "a dead one is archived");
  // the database refuses an archived delivery that still holds a body, whoever writes it:
  // marked archived while its body row is there, or given a body once archived
  assert.equal((await row(w.db, recent[0].event_id)).body_rows, 1, "a body in its own row");
  await assert.rejects(
    w.db.prepare("UPDATE webhook_delivery SET archived_at = 'x', archive_key = 'k' WHERE event_id = ?").bind(recent[0].event_id).run(),
    /archived_at and archive_key are set together, and an archived delivery holds no body/,
  );
  await assert.rejects(
    w.db.prepare("UPDATE webhook_delivery SET body = 'x' WHERE event_id = ?").bind(old[0].event_id).run(),
    /an archived delivery holds no body/,
  );
  await assert.rejects(
    w.db.prepare("UPDATE webhook_delivery SET archive_key = NULL WHERE event_id = ?").bind(old[0].event_id).run(),
    /archived_at and archive_key are set together/,
  );
});

test("bad archive requests get a clear error and archive nothing", async () => {
  const cases = [
    [{ before: "yesterday" }, 400, "invalid_time"],
    [{ before: "2999-01-01" }, 400, "invalid_time"],
    [{}, 400, "invalid_json"],
    [{ before: now(), extra: 1 }, 400, "invalid_json"],
    [{ before: now(), cursor: "nope" }, 400, "invalid_cursor"],
  ];
  for (const [body, status, code] of cases) {
    const r = await admin(w.url, "POST", "/archive", body);
    assert.equal(r.status, status, JSON.stringify(body));
    assert.equal(r.json.error, code, JSON.stringify(r.json));
    assert.ok(r.json.message, "a message says why");
  }
  assert.equal((await admin(w.url, "GET", "/archive")).status, 405);
});

test("a failed write deletes nothing: the read-back does not find what was put", async () => {
  // ARCHIVE_FAULT=drop_put: the binding loses the put (a write that never landed) between the
  // write and the read-back; the Worker's real verification must catch it
  const f = await startWorker({ vars: { ARCHIVE_FAULT: "drop_put" } });
  try {
    const rows = await seed(f.db, { days: 45, n: 4 });
    const r = await admin(f.url, "POST", "/archive", { before: now() });
    assert.equal(r.status, 502, JSON.stringify(r.json));
    assert.equal(r.json.error, "archive_failed");
    assert.match(r.json.message, /was written but is not there when read back.*0 archived/);
    for (const d of rows) {
      const stored = await row(f.db, d.event_id);
      assert.equal(stored.body, d.body);
      assert.equal(stored.archived_at, null);
      assert.equal(stored.archive_key, null);
    }
    const run = await f.db.prepare("SELECT * FROM archive_run ORDER BY id DESC LIMIT 1").first();
    assert.equal(run.state, "failed");
    assert.match(run.error, /not there when read back/);
    assert.equal(run.archived, 0);
    // the daily cron's run fails the same way, recorded, nothing removed
    await f.scheduled("17 3 * * *");
    const daily = await f.db.prepare("SELECT * FROM archive_run ORDER BY id DESC LIMIT 1").first();
    assert.equal(daily.started_by, "daily");
    assert.equal(daily.state, "failed");
    for (const d of rows) assert.equal((await row(f.db, d.event_id)).body, d.body);
    // the same cron's alert run raised the archive alert (interface §10)
    const alert = (await admin(f.url, "GET", "/alerts")).json.data.find((a) => a.kind === "archive");
    assert.equal(alert?.state, "open", JSON.stringify(alert));
    assert.equal(alert.count, daily.id);
    assert.match(alert.summary, new RegExp(`^archiving run ${daily.id} failed and removed nothing of its failing chunk: .*not there when read back`));
    const m = await admin(f.url, "GET", "/metrics");
    assert.ok(m.json.config.warnings.some((x) => /^ARCHIVE_FAULT is "drop_put"/.test(x)), JSON.stringify(m.json.config.warnings));
  } finally {
    await f.close();
  }
  // ARCHIVE_FAULT=corrupt_read: the object is there, but what is read back is not what was
  // written (one byte flipped): the SHA-256 check refuses it
  const c = await startWorker({ vars: { ARCHIVE_FAULT: "corrupt_read" } });
  try {
    const rows = await seed(c.db, { days: 45, n: 2 });
    const r = await admin(c.url, "POST", "/archive", { before: now() });
    assert.equal(r.status, 502);
    assert.match(r.json.message, /read back with SHA-256 [0-9a-f]{64}, written [0-9a-f]{64}/);
    for (const d of rows) assert.equal((await row(c.db, d.event_id)).body, d.body);
    // what was written is intact in the bucket; no row points to it
    const objs = await objects(c);
    assert.equal(objs.length, 1);
    assert.equal(objs[0].lines.length, 2);
    const pointing = await c.db.prepare("SELECT count(*) AS n FROM webhook_delivery WHERE archive_key IS NOT NULL").first();
    assert.equal(pointing.n, 0);
  } finally {
    await c.close();
  }
});

test("without an ARCHIVE binding nothing is removed, and a warning says so", async () => {
  const n = await startWorker({ patch: (o) => delete o.r2Buckets });
  try {
    const rows = await seed(n.db, { days: 90, n: 3 });
    await n.scheduled("17 3 * * *");
    await n.scheduled("*/5 * * * *");
    for (const d of rows) assert.equal((await row(n.db, d.event_id)).body, d.body);
    assert.equal((await n.db.prepare("SELECT count(*) AS n FROM archive_run").first()).n, 0);
    assert.ok(n.logs.some((l) => l.stage === "archive" && l.outcome === "not_configured"));
    const r = await admin(n.url, "POST", "/archive", { before: now() });
    assert.equal(r.status, 503);
    assert.equal(r.json.error, "archive_not_configured");
    const m = await admin(n.url, "GET", "/metrics");
    assert.ok(
      m.json.config.warnings.some((x) => /^ARCHIVE \(an R2 binding\) is not set: no body is archived or removed/.test(x)),
      JSON.stringify(m.json.config.warnings),
    );
    for (const d of rows) assert.equal((await row(n.db, d.event_id)).body, d.body);
  } finally {
    await n.close();
  }
});

test("a run larger than the budget continues: next_cursor for an operator, the cron for the daily run", async () => {
  // INVOCATION_BUDGET 10: an operator's call holds one chunk (open, candidates, bodies, put,
  // get, removal, finish, remaining); ten days of three deliveries are ten chunks
  const s = await startWorker({ vars: { INVOCATION_BUDGET: "10" } });
  try {
    const rows = [];
    for (let d = 0; d < 10; d++) rows.push(...(await seed(s.db, { days: 40 + d, n: 3 })));
    const m = await admin(s.url, "GET", "/metrics");
    assert.ok(m.json.config.warnings.some((x) => /only POST \/admin\/api\/archive archives/.test(x)), JSON.stringify(m.json.config.warnings));
    let cursor;
    const calls = [];
    for (let i = 0; i < 20; i++) {
      const r = await admin(s.url, "POST", "/archive", { before: now(), ...(cursor ? { cursor } : {}) });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      calls.push(r.json);
      cursor = r.json.next_cursor;
      if (!cursor) break;
    }
    assert.ok(calls.every((c) => c.archived <= 3), JSON.stringify(calls));
    assert.equal(calls[0].state, "partial");
    assert.equal(calls[0].remaining, 27);
    assert.equal(calls.at(-1).state, "done");
    assert.equal(calls.reduce((n, c) => n + c.archived, 0), 30);
    assert.ok(calls.length >= 10, `${calls.length} calls`);
    for (const d of rows) assert.equal((await row(s.db, d.event_id)).body, "");
    assert.equal((await objects(s)).length, 10);
  } finally {
    await s.close();
  }
  // INVOCATION_BUDGET 40: the cron's share (8) holds one chunk; the daily cron starts the run,
  // each 5-minute cron continues it
  const c = await startWorker({ vars: { INVOCATION_BUDGET: "40" } });
  try {
    for (let d = 0; d < 4; d++) await seed(c.db, { days: 35 + d, n: 2 });
    const recent = await seed(c.db, { days: 5, n: 1 });
    const archivedCount = async () => (await c.db.prepare("SELECT count(*) AS n FROM webhook_delivery WHERE archived_at IS NOT NULL").first()).n;
    await c.scheduled("17 3 * * *");
    assert.equal(await archivedCount(), 2, "one chunk in the daily invocation");
    let run = await c.db.prepare("SELECT * FROM archive_run ORDER BY id DESC LIMIT 1").first();
    assert.equal(run.state, "running");
    assert.equal(run.started_by, "daily");
    const counts = [];
    for (let i = 0; i < 10 && run.state === "running"; i++) {
      await c.scheduled("*/5 * * * *");
      counts.push(await archivedCount());
      run = await c.db.prepare("SELECT * FROM archive_run ORDER BY id DESC LIMIT 1").first();
    }
    assert.deepEqual(counts, [4, 6, 8, 8], "one chunk per invocation, then done");
    assert.equal(run.state, "done");
    assert.equal(run.archived, 8);
    assert.equal(run.objects, 4);
    assert.equal(run.invocations, 5);
    // within RETENTION_DAYS (30): kept
    assert.equal((await row(c.db, recent[0].event_id)).body, recent[0].body);
    // a further cron finds nothing to continue
    await c.scheduled("*/5 * * * *");
    assert.equal((await c.db.prepare("SELECT count(*) AS n FROM archive_run").first()).n, 1);
  } finally {
    await c.close();
  }
});

test("RETENTION_DAYS below 7 is raised to 7 and said", async () => {
  const r = await startWorker({ vars: { RETENTION_DAYS: "3" } });
  try {
    const eight = await seed(r.db, { days: 8, n: 1 });
    const six = await seed(r.db, { days: 6, n: 1 });
    await r.scheduled("17 3 * * *");
    assert.equal((await row(r.db, eight[0].event_id)).body, "", "past 7 days: archived");
    assert.equal((await row(r.db, six[0].event_id)).body, six[0].body, "within 7 days: kept");
    const m = await admin(r.url, "GET", "/metrics");
    assert.ok(m.json.config.warnings.includes('RETENTION_DAYS is "3", outside 7 to 36500: 7 is used'), JSON.stringify(m.json.config.warnings));
  } finally {
    await r.close();
  }
});

test("a lost day is rebuilt from the archive (docs/recovery.md), and rebuilding twice changes nothing", async () => {
  const run = promisify(execFile);
  const dir = await mkdtemp(path.join(tmpdir(), "paymos-rebuild-"));
  const sqlFile = path.join(dir, "rebuild.sql");
  try {
    let lost, kept, day;
    {
      const x = await startWorker({ persistDir: dir });
      try {
        lost = await seed(x.db, { days: 50, n: 4 });
        kept = await seed(x.db, { days: 49, n: 2 });
        day = lost[0].received_at.slice(0, 10);
        assert.equal((await admin(x.url, "POST", "/archive", { before: now() })).status, 200);
        // the day is lost from D1 (a bad DELETE, a restore to before it was received...)
        await x.db.prepare("DELETE FROM webhook_delivery WHERE received_at LIKE ?").bind(`${day}%`).run();
        for (const d of lost) assert.equal(await row(x.db, d.event_id), null);
      } finally {
        await x.close();
      }
    }
    // the documented commands, against the local state
    const script = path.join(ROOT, "scripts/rebuild-from-archive.mjs");
    const made = await run("node", [script, "--day", day, "--local", "--persist-to", dir, "--out", sqlFile], { cwd: ROOT });
    assert.match(made.stderr, new RegExp(`1 objects, 4 lines, 4 deliveries of ${day}`));
    const text = await readFile(sqlFile, "utf8");
    const sqlLines = text.trim().split("\n");
    assert.equal(sqlLines.length, 5, "an insert per delivery, then the recount");
    assert.match(sqlLines[4], /^UPDATE tally SET /);
    const execute = () =>
      run(path.join(ROOT, "node_modules/.bin/wrangler"), ["d1", "execute", "DB", "--local", "--persist-to", dir, "--file", sqlFile], {
        cwd: ROOT,
        env: { ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false" },
      });
    await execute();
    const y = await startWorker({ persistDir: dir });
    try {
      for (const d of lost) {
        const r = await row(y.db, d.event_id);
        assert.ok(r, `${d.event_id} is back`);
        assert.equal(r.body, "", "slim, as it was once archived");
        assert.match(r.archive_key, new RegExp(`^deliveries/${day.replaceAll("-", "/")}/`));
        assert.equal(r.outcome, "applied");
        assert.equal(r.received_at, d.received_at);
      }
      // the kept counts say what is on record (the metrics read them), lost rows back included
      const counted = async () => {
        const m = (await admin(y.url, "GET", "/metrics")).json;
        const full = await y.db.prepare("SELECT count(*) AS n FROM webhook_delivery WHERE outcome = 'applied'").first();
        return [m.deliveries.by_outcome.applied, full.n];
      };
      const [applied, onRecord] = await counted();
      assert.equal(applied, onRecord, "the metrics' applied count is a full count after the rebuild");
      assert.ok(onRecord >= lost.length + kept.length, `${onRecord} applied on record`);
      const snapshot = await y.db.prepare("SELECT * FROM webhook_delivery ORDER BY event_id").all();
      // the dedupe answers for it again
      const env = JSON.parse(lost[0].body);
      const dup = await deliver(y.url, env, { rawBody: lost[0].body });
      assert.deepEqual(dup.json, { received: true, duplicate: true });
      // rebuilding again: every insert is a no-op by the primary key
      await execute();
      assert.deepEqual((await y.db.prepare("SELECT * FROM webhook_delivery ORDER BY event_id").all()).results, snapshot.results);
      assert.deepEqual(await counted(), [applied, onRecord], "and counted once");
      for (const d of kept) assert.equal((await row(y.db, d.event_id)).body, "");
      // and a replay reads the body back from the object the rebuilt row points to
      assert.equal((await admin(y.url, "POST", `/deliveries/${lost[1].event_id}/replay`)).status, 202);
      assert.equal((await y.processed(lost[1].event_id)).body, lost[1].body);
    } finally {
      await y.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("the database's size and the archive's state in /admin/api/metrics, JSON and Prometheus", async () => {
  const m = await startWorker({ vars: { DATABASE_SIZE_LIMIT_BYTES: "1000000" } });
  try {
    const metrics = async () => (await admin(m.url, "GET", "/metrics")).json;
    const prometheus = async () => {
      const res = await fetch(`${m.url}/admin/api/metrics?format=prometheus`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      const text = await res.text();
      const sample = (name) => {
        assert.match(text, new RegExp(`^# TYPE ${name} gauge$`, "m"), name);
        const line = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
        return line ? Number(line[1]) : undefined;
      };
      return sample;
    };
    const sizeAlert = async () => (await admin(m.url, "GET", "/alerts")).json.data.find((a) => a.kind === "database_size" && a.state === "open");
    await m.scheduled("*/5 * * * *");
    const first = await metrics();
    assert.equal(first.database.size_limit_bytes, 1_000_000);
    assert.ok(first.database.bytes < 800_000, `a fresh database is below 80 % of 1 MB (${first.database.bytes})`);
    assert.equal(await sizeAlert(), undefined, "below 80 %: no alert");
    assert.ok(Number.isInteger(first.database.bytes) && first.database.bytes > 0, JSON.stringify(first.database));
    assert.equal(first.archive.configured, true);
    assert.equal(first.archive.retention_days, 30);
    assert.equal(first.archive.bodies_past_retention, 0);
    assert.equal(first.archive.last_run, null);
    let p = await prometheus();
    assert.equal(p("paymos_database_bytes"), first.database.bytes);
    assert.equal(p("paymos_database_size_limit_bytes"), 1_000_000);
    assert.equal(p("paymos_archive_bodies_past_retention"), 0);
    assert.equal(p("paymos_archive_last_run_ok"), undefined, "no sample before the first run");

    // 300 bodies of 4 KB past retention: D1 says it grew, the metrics count them
    const big = "x".repeat(4000);
    for (let i = 0; i < 300; i += 50) {
      const rows = Array.from({ length: 50 }, (_, j) => {
        const e = envelope("invoice.paid", randomId("inv_"), { data: { pad: big } });
        return [e.event_id, e.data.id, JSON.stringify(e), at(40, i + j)];
      });
      await m.db.batch(
        rows.map((r) =>
          m.db
            .prepare("INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, received_at, processed_at, outcome) VALUES (?, ?, 'invoice.paid', ?, ?, ?, 'applied')")
            .bind(r[0], r[1], r[2], r[3], r[3]),
        ),
      );
    }
    const grown = await metrics();
    assert.ok(grown.database.bytes >= first.database.bytes + 300 * 4000, `${first.database.bytes} -> ${grown.database.bytes}`);
    assert.ok(grown.database.used_ratio > 1, "past the (small) cap");
    // the 80 % alert, from the size D1 reports
    await m.scheduled("*/5 * * * *");
    const opened = await sizeAlert();
    assert.ok(opened, "database_size is open");
    assert.ok(opened.count >= 100, JSON.stringify(opened));
    assert.equal(opened.severity, "warning");
    assert.match(opened.summary, /^the database is [\d.]+ MB of its 1\.0 MB cap \(\d+ %\)/);
    assert.equal(grown.archive.bodies_past_retention, 300);
    assert.ok(grown.archive.oldest_body_received_at.startsWith(at(40).slice(0, 10)));

    await m.scheduled("17 3 * * *");
    const after = await metrics();
    assert.equal(after.archive.bodies_past_retention, 0);
    assert.equal(after.archive.last_run.state, "done");
    assert.equal(after.archive.last_run.started_by, "daily");
    assert.equal(after.archive.last_run.archived, 300);
    assert.ok(after.archive.last_run.objects >= 1);
    p = await prometheus();
    assert.equal(p("paymos_archive_last_run_ok"), 1);
    assert.equal(p("paymos_archive_last_run_archived"), 300);
    assert.equal(p("paymos_archive_configured"), 1);
  } finally {
    await m.close();
  }
});

test("a delivery aged in the seed's table alone (received_at edited in place) is read, archived by the daily cron and replayed", async () => {
  const x = await startWorker();
  try {
    const sent = [];
    for (let i = 0; i < 2; i++) {
      const env = envelope("invoice.paid", randomId("inv_"));
      const rawBody = JSON.stringify(env);
      await deliver(x.url, env, { rawBody });
      assert.equal((await x.processed(env.event_id)).outcome, "applied");
      sent.push({ id: env.event_id, rawBody });
    }
    // as a script or a test would age them: webhook_delivery only, in two of SQLite's formats
    const age = ["strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-40 days')", "datetime('now', '-40 days')"];
    for (const [i, d] of sent.entries()) {
      await x.db.prepare(`UPDATE webhook_delivery SET received_at = ${age[i]} WHERE event_id = ?`).bind(d.id).run();
      const got = await admin(x.url, "GET", `/deliveries/${d.id}`);
      assert.equal(got.json.body?.event_id, d.id, "still answered with its body");
    }
    assert.equal((await admin(x.url, "GET", "/metrics")).json.archive.bodies_past_retention, 2, "both counted past retention");
    await x.scheduled("17 3 * * *");
    const bucket = await x.mf.getR2Bucket("ARCHIVE");
    for (const d of sent) {
      const got = await admin(x.url, "GET", `/deliveries/${d.id}`);
      assert.equal(got.json.archived, true, `${d.id} archived by the daily cron: ${JSON.stringify(got.json)}`);
      const object = await bucket.get(got.json.archive_key);
      const lines = gunzipSync(Buffer.from(await object.arrayBuffer())).toString("utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
      assert.equal(lines.find((l) => l.event_id === d.id)?.body, d.rawBody, "its body in the object, verbatim");
    }
    assert.equal((await admin(x.url, "POST", `/deliveries/${sent[0].id}/replay`)).status, 202);
    const replayed = await x.processed(sent[0].id);
    assert.equal(replayed.outcome, "stale", `read back and decided again, not dead: ${replayed.last_error}`);
  } finally {
    await x.close();
  }
});

// §11: every admin write is audited, the archive's too, and one that fails is on record as
// failed (the audit row is written after the run, with how it ended)
test("a POST /archive that fails (502) is in the audit log, outcome failed", async () => {
  const f = await startWorker({ vars: { ARCHIVE_FAULT: "drop_put" } });
  try {
    await seed(f.db, { days: 45, n: 2 });
    const before = now();
    const r = await admin(f.url, "POST", "/archive", { before });
    assert.equal(r.status, 502, JSON.stringify(r.json));
    const [row] = (await admin(f.url, "GET", "/audit?action=archive&limit=1")).json.data;
    assert.ok(row, "the failed archive run is audited");
    assert.deepEqual([row.actor, row.action, row.outcome, row.detail.before], ["token", "archive", "failed", before]);
  } finally {
    await f.close();
  }
});

// §10: alert `archive` is for an archiving run that fails; one that did not fail (an
// operator's run cut by the budget, `partial`, answered with next_cursor) is not one
test("an archiving run that did not fail (partial, to be continued) raises no archive alert", async () => {
  const c = await startWorker({ vars: { INVOCATION_BUDGET: "10" } });
  try {
    for (let d = 0; d < 3; d++) await seed(c.db, { days: 40 + d, n: 1 });
    const r = await admin(c.url, "POST", "/archive", { before: now() });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.state, "partial");
    await c.scheduled("*/5 * * * *");
    const run = await c.db.prepare("SELECT state FROM archive_run ORDER BY id DESC LIMIT 1").first();
    assert.equal(run.state, "partial");
    const alerts = (await admin(c.url, "GET", "/alerts")).json.data;
    assert.deepEqual(alerts.filter((a) => a.kind === "archive"), [], JSON.stringify(alerts));
  } finally {
    await c.close();
  }
});
