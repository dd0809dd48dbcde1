// The comparison worker: what a careful Cloudflare user would write by hand in JavaScript,
// doing the same work as ours, for `npm run bench` only.
//
// Receive: verify (WebCrypto HMAC over "<t as sent>." + raw body, every v1 against every
// secret, tolerance) → the envelope's checks → INSERT_DELIVERY (insert-or-nothing) → enqueue
// {event_id, generation: 0} → reply, with the same JSON log line as ours.
//
// Consume (the same queues, same settings), per batch as ours: load all the batch's deliveries
// in one query (LOAD_DELIVERIES; ours loads only messages without the envelope's facts, a
// receipt's carrying them since 2026-12-07: bench/README.md, "The consumer's load was the
// gap"), skip those already processed, parse each stored envelope,
// livemode against PAYMOS_MODE and unknown event types (MARK_IGNORED), else the same guarded
// transition statements as ours (the guarded write, history, the effect row with its outbox
// columns, fill, RELEASE_EFFECTS, RECORD_OUTCOME, READ_BACK), all of the batch's statements in
// one D1 batch (one transaction), then the released effect ids to the EFFECTS queue. If that
// fails, message by message (LOAD_DELIVERY, then that message's own D1 batch), as ours. The effects consumer loads the batch's effects in one query (LOAD_EFFECTS_FOR_DISPATCH) and, with
// ORDER_SYSTEM_URL unset as in the benchmark, leaves it pending for the pull feed, as ours
// does. A failed message: RECORD_FAILURE and a retry with the same backoff; the dead-letter
// queues mark the delivery or the effect dead. (No sweeper, no admin API: not benchmarked.)
//
// "The same SQL" is literal: every statement's text, its parameters' order, each event type's
// plan (target state, guard, effect) and the batch itself come from the Rust core, generated
// into bench/statements.json (`cargo run -p paymos-core --example statements_json`) and handed
// to this worker as the STATEMENTS binding by bench/run.mjs. Only the license code's
// encoding is written here, checked against the core's vectors at start.
const enc = new TextEncoder();
const dec = new TextDecoder();
let keys;
let checked;

async function importKeys(env) {
  if (!keys) {
    const secrets = String(env.PAYMOS_WEBHOOK_SECRETS).split(/[\s,]+/).filter(Boolean);
    keys = await Promise.all(
      secrets.map((s) => crypto.subtle.importKey("raw", enc.encode(s), { name: "HMAC", hash: "SHA-256" }, false, ["verify"])),
    );
  }
  return keys;
}

function hexToBytes(hex) {
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) return null;
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) out[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return out;
}

const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
const random = (n) => crypto.getRandomValues(new Uint8Array(n));

/** The core's license code (crates/paymos-core/src/license.rs): 128 bits, 5 at a time, dashed. */
function licenseCode(bytes, f) {
  let n = 0n;
  for (const b of bytes) n = (n << 8n) | BigInt(b);
  let out = "";
  for (let i = 0; i < f.chars; i++) {
    if (i > 0 && i % f.group === 0) out += "-";
    out += f.alphabet[Number((n >> BigInt(5 * (f.chars - 1 - i))) & 31n)];
  }
  return out;
}

function selfCheck(S) {
  if (checked) return;
  for (const v of S.license_code.vectors) {
    const bytes = Uint8Array.from(v.bytes_hex.match(/../g), (h) => parseInt(h, 16));
    if (licenseCode(bytes, S.license_code) !== v.code) throw new Error(`license code differs from the core's for ${v.bytes_hex}`);
  }
  checked = true;
}

const json = (body, status = 200) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
const sql = (env, name) => env.STATEMENTS.statements[name].sql;
const idBody = (s, prefix) => typeof s === "string" && s.startsWith(prefix) && /^[A-Za-z0-9]{1,64}$/.test(s.slice(prefix.length));
const isEventId = (s) => idBody(s, "evt_");
const KINDS = { invoice: "inv_", withdrawal: "wdr_", deposit: "pcd_" };
const typeWord = /^[A-Za-z0-9_-]+$/;

/** The core's parse_envelope checks, in the same order; an error code or the envelope. */
function parseEnvelope(text, headerId, events) {
  if (headerId == null) return { error: "webhook_id_missing" };
  if (!isEventId(headerId)) return { error: "invalid_event_id" };
  let v;
  try {
    v = JSON.parse(text);
  } catch {
    return { error: "invalid_json" };
  }
  if (!v || typeof v !== "object" || Array.isArray(v)) return { error: "invalid_json" };
  if (!("event_id" in v) || v.event_id === null) return { error: "missing_field" };
  if (typeof v.event_id !== "string") return { error: "invalid_field" };
  if (!isEventId(v.event_id)) return { error: "invalid_event_id" };
  if (v.event_id !== headerId) return { error: "id_mismatch" };
  if (v.type == null) return { error: "missing_field" };
  if (typeof v.type !== "string" || v.type.length > 128) return { error: "invalid_field" };
  const dot = v.type.indexOf(".");
  const category = v.type.slice(0, dot);
  if (dot < 0 || !typeWord.test(category) || !v.type.slice(dot + 1).split(".").every((w) => typeWord.test(w))) return { error: "invalid_field" };
  if (v.created == null) return { error: "missing_field" };
  if (!Number.isSafeInteger(v.created)) return { error: "invalid_field" };
  if (v.livemode != null && typeof v.livemode !== "boolean") return { error: "invalid_field" };
  if (v.data == null) return { error: "missing_field" };
  if (typeof v.data !== "object" || Array.isArray(v.data)) return { error: "invalid_field" };
  if (v.data.id == null) return { error: "missing_field" };
  if (typeof v.data.id !== "string") return { error: "invalid_field" };
  const kind = Object.keys(KINDS).find((k) => idBody(v.data.id, KINDS[k]));
  if (!kind) return { error: "invalid_resource_id" };
  // only a known type must be about its own category's resource; an unknown one is never refused
  const known = events[v.type];
  if (known && known.kind !== kind) return { error: "resource_mismatch" };
  return { envelope: v };
}

export default {
  async fetch(request, env) {
    const started = Date.now();
    // spaces and tabs around a value are not part of it (RFC 9110), as ours reads it
    const headerId = request.headers.get("x-webhook-id")?.replace(/^[ \t]+|[ \t]+$/g, "") ?? null;
    const attempt = Number.parseInt(request.headers.get("x-webhook-attempt") ?? "", 10);
    let res;
    let info = {};
    if (new URL(request.url).pathname !== "/webhooks/paymos") res = json({ error: "not_found" }, 404);
    else ({ res, info } = await receive(request, env, headerId));
    console.log(
      JSON.stringify({
        stage: "receive",
        event_id: isEventId(headerId) ? headerId : null,
        event_type: info.event_type ?? null,
        resource_id: info.resource_id ?? null,
        outcome: info.outcome,
        status: res.status,
        attempt: Number.isFinite(attempt) ? attempt : null,
        duration_ms: Date.now() - started,
      }),
    );
    return res;
  },

  async queue(batch, env) {
    selfCheck(env.STATEMENTS);
    const name = batch.queue;
    if (name === (env.EFFECTS_QUEUE ?? "paymos-effects")) return dispatchEffects(batch, env);
    if (name === (env.EFFECTS_DEAD_LETTER_QUEUE ?? "paymos-effects-dlq")) {
      for (const m of batch.messages) {
        await env.DB.prepare(sql(env, "MARK_EFFECT_DEAD")).bind(m.body?.effect_id, "dispatch retries exhausted", 0).first();
        m.ack();
      }
      return;
    }
    const deadLetter = name === (env.DEAD_LETTER_QUEUE ?? "paymos-deliveries-dlq");
    const base = Number(env.QUEUE_RETRY_BASE_SECONDS ?? 10);
    const readable = [];
    for (const m of batch.messages) {
      if (isEventId(m.body?.event_id)) readable.push(m);
      else {
        log("consume", "-", "unreadable_message");
        m.ack();
      }
    }
    if (deadLetter) {
      for (const m of readable) {
        const row = await env.DB.prepare(sql(env, "MARK_DEAD")).bind(m.body.event_id, m.body.generation ?? null).first();
        log("dead_letter", m.body.event_id, row ? "dead" : "dead_letter_superseded");
        m.ack();
      }
      return;
    }
    if (readable.length > 1) {
      try {
        const outcomes = await processBatch(env, readable.map((m) => m.body.event_id));
        readable.forEach((m, i) => {
          log("consume", m.body.event_id, outcomes[i].outcome, outcomes[i].reason);
          m.ack();
        });
        return;
      } catch (e) {
        log("consume", "-", "batch_fallback", `internal: ${e.message}`);
      }
    }
    for (const m of readable) {
      const eventId = m.body.event_id;
      try {
        const outcome = await processDelivery(env, eventId);
        log("consume", eventId, outcome.outcome, outcome.reason);
        m.ack();
      } catch (e) {
        const attempts = m.attempts ?? 1;
        const delay = Math.min(base * 2 ** (Math.min(Math.max(attempts, 1), 16) - 1), 900);
        const error = `internal: ${e.message}`;
        try {
          await env.DB.prepare(sql(env, "RECORD_FAILURE")).bind(eventId, error).first("attempts");
        } catch {
          /* D1 may be what fails */
        }
        log("consume", eventId, "retry", `${error}; attempt ${attempts}; retry in ${delay}s`);
        m.retry({ delaySeconds: delay });
      }
    }
  },
};

function log(stage, eventId, outcome, detail) {
  const line = { stage, event_id: eventId, outcome };
  if (detail != null) line.detail = detail;
  console.log(JSON.stringify(line));
}

async function receive(request, env, headerId) {
  if (request.method !== "POST") return { res: json({ error: "method_not_allowed" }, 405), info: { outcome: "method_not_allowed" } };
  const refuse = (status, error) => ({ res: json({ error }, status), info: { outcome: error } });
  const max = Number(env.PAYMOS_MAX_BODY_BYTES ?? 262144);
  const declared = Number(request.headers.get("content-length") ?? "NaN");
  if (declared > max) return refuse(413, "payload_too_large");
  const body = new Uint8Array(await request.arrayBuffer());
  if (body.length > max) return refuse(413, "payload_too_large");
  const header = request.headers.get("x-webhook-signature");
  if (!header) return refuse(401, "signature_missing");
  let tText;
  const v1 = [];
  for (const part of header.split(",")) {
    const [k, v] = part.trim().split("=", 2);
    if (k === "t") tText = v;
    else if (k === "v1") {
      const b = hexToBytes(v ?? "");
      if (b) v1.push(b);
    }
  }
  if (!/^\d+$/.test(tText ?? "") || v1.length === 0) return refuse(401, "signature_malformed");
  const tolerance = Number(env.PAYMOS_SIGNATURE_TOLERANCE_SECONDS ?? 300);
  if (Math.abs(Date.now() / 1000 - Number(tText)) > tolerance) return refuse(401, "timestamp_out_of_tolerance");
  const prefix = enc.encode(`${tText}.`);
  const message = new Uint8Array(prefix.length + body.length);
  message.set(prefix);
  message.set(body, prefix.length);
  let ok = false;
  for (const key of await importKeys(env)) {
    for (const sig of v1) {
      // WebCrypto's verify compares in constant time
      if (await crypto.subtle.verify("HMAC", key, sig, message)) {
        ok = true;
        break;
      }
    }
    if (ok) break;
  }
  if (!ok) return refuse(401, "signature_mismatch");
  const text = dec.decode(body);
  const { envelope: e, error } = parseEnvelope(text, headerId, env.STATEMENTS.events);
  if (error) return refuse(400, error);
  let row;
  try {
    row = await env.DB.prepare(sql(env, "INSERT_DELIVERY")).bind(e.event_id, e.data.id, e.type, text).first();
  } catch {
    return refuse(503, "database_unavailable");
  }
  if (row) {
    try {
      // the row is durable: a failed send is left to a sweeper, still 2xx
      await env.DELIVERIES.send({ event_id: e.event_id, generation: 0 });
    } catch {
      /* logged by ours as enqueue_error; nothing else */
    }
  }
  return {
    res: json({ received: true, duplicate: !row }),
    info: { outcome: row ? "accepted" : "duplicate", event_type: e.type, resource_id: e.data.id },
  };
}

/**
 * What one loaded delivery asks of the transaction: nothing (already processed, missing),
 * MARK_IGNORED with a reason, or a transition's statements (`steps` with their `values`).
 */
function plan(env, eventId, row) {
  if (!row) return { done: { outcome: "missing" } };
  if (row.processed_at) return { done: { outcome: "already_processed" } };
  const { envelope: e, error } = parseEnvelope(row.body ?? "", eventId, env.STATEMENTS.events);
  if (error) throw new Error(`stored body does not parse: ${error}`);
  const live = (env.PAYMOS_MODE ?? "live").trim() === "live";
  if ((e.livemode === true) !== live) return { ignore: "livemode_mismatch" };
  const p = env.STATEMENTS.events[e.type];
  if (!p) return { ignore: "unknown_event_type" };
  // a blank text is none given, as ours reads it
  const str = (k) => (typeof e.data[k] === "string" && e.data[k].trim() !== "" ? e.data[k] : null);
  const values = {
    resource_id: e.data.id,
    order_ref: str("order_ref"),
    amount: str("amount"),
    currency: str("currency"),
    cause: eventId,
    event_id: eventId,
    token: hex(random(16)),
    // 128 bits from the platform's CSPRNG, drawn only when the plan may fulfil
    license_code: p.effect?.kind === "fulfilment" ? licenseCode(random(16), env.STATEMENTS.license_code) : null,
  };
  // pull mode (no order system to push to) has its own batches: no release, as ours
  const pull = String(env.ORDER_SYSTEM_URL ?? "").trim() === "" ? "p" : "";
  const key = pull + [values.order_ref, values.amount, values.currency].map((v) => (v === null ? 0 : 1)).join("");
  return { steps: p.batches[key], values };
}

/** The D1 statements of a planned delivery. */
function statementsOf(env, eventId, p) {
  if (p.done) return [];
  if (p.ignore) return [env.DB.prepare(sql(env, "MARK_IGNORED")).bind(eventId, p.ignore)];
  return p.steps.map((s) => env.DB.prepare(sql(env, s.statement)).bind(...s.args.map((a) => ("slot" in a ? p.values[a.slot] : a.value))));
}

/** Its outcome from its slice of the batch's results; released effect ids pushed to `released`. */
function outcomeOf(p, results, released) {
  if (p.done) return p.done;
  if (p.ignore) return { outcome: "ignored", reason: p.ignore };
  const release = p.steps.findIndex((s) => s.statement === "RELEASE_EFFECTS");
  if (release >= 0) released.push(...results[release].results.map((r) => r.effect_id));
  return { outcome: results[results.length - 1].results[0]?.outcome ?? "stale" };
}

/** A batch of messages: one load, one D1 batch, one send of what it released. */
async function processBatch(env, ids) {
  const { results: rows } = await env.DB.prepare(sql(env, "LOAD_DELIVERIES")).bind(JSON.stringify(ids)).all();
  const byId = new Map(rows.map((r) => [r.event_id, r]));
  const plans = ids.map((id) => plan(env, id, byId.get(id)));
  const stmts = [];
  const slices = plans.map((p, i) => {
    const start = stmts.length;
    stmts.push(...statementsOf(env, ids[i], p));
    return [start, stmts.length];
  });
  const results = stmts.length ? await env.DB.batch(stmts) : [];
  const released = [];
  const outcomes = plans.map((p, i) => outcomeOf(p, results.slice(...slices[i]), released));
  await sendReleased(env, released);
  return outcomes;
}

/** One message (a batch of one, or the fallback): its load, its own D1 batch. */
async function processDelivery(env, eventId) {
  const row = await env.DB.prepare(sql(env, "LOAD_DELIVERY")).bind(eventId).first();
  const p = plan(env, eventId, row);
  const stmts = statementsOf(env, eventId, p);
  if (p.ignore) await stmts[0].run();
  const results = p.steps ? await env.DB.batch(stmts) : [];
  const released = [];
  const outcome = outcomeOf(p, results, released);
  await sendReleased(env, released);
  return outcome;
}

async function sendReleased(env, released) {
  // as ours: with no order system to push to (pull mode) nothing is sent; the effects wait
  // in the feed and the sweeper hands them over once one is configured
  const orderSystem = String(env.ORDER_SYSTEM_URL ?? "").trim();
  if (released.length && orderSystem) {
    // sent after the commit; a failed send is left to the sweeper (the effects are pending)
    for (let i = 0; i < released.length; i += 100) {
      try {
        await env.EFFECTS.sendBatch(released.slice(i, i + 100).map((id) => ({ body: { effect_id: id } })));
      } catch (err) {
        log("effects", "-", "enqueue_error", String(err));
        break;
      }
    }
  }
}

/** The effects queue, with ORDER_SYSTEM_URL unset as in the benchmark: load, leave pending. */
async function dispatchEffects(batch, env) {
  // per batch, as ours: one LOAD_EFFECTS_FOR_DISPATCH for every effect of the batch
  const readable = [];
  for (const m of batch.messages) {
    const id = m.body?.effect_id;
    if (typeof id !== "string") {
      log("dispatch", "-", "unreadable_message");
      m.ack();
    } else readable.push([m, id]);
  }
  if (!readable.length) return;
  const ids = [...new Set(readable.map(([, id]) => id))];
  const { results } = await env.DB.prepare(sql(env, "LOAD_EFFECTS_FOR_DISPATCH")).bind(JSON.stringify(ids)).all();
  const rows = new Map(results.map((r) => [r.id, r]));
  for (const [m, id] of readable) {
    const row = rows.get(id);
    let outcome;
    if (!row) outcome = "missing";
    else if (row.dispatch !== "pending") outcome = "already_dispatched";
    else if (row.awaiting_order_ref) outcome = "awaiting_order_ref";
    else if (!env.ORDER_SYSTEM_URL) outcome = "pending_pull";
    else outcome = "not_benchmarked"; // the JS receiver does not POST to an order system
    log("dispatch", id, outcome);
    m.ack();
  }
}
