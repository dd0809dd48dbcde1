// A minimal JavaScript receiver doing the same hot path as ours, for comparison only:
// verify (WebCrypto HMAC over "<t>." + raw body, every v1 against every secret, tolerance) →
// insert-or-nothing into the same webhook_delivery table → enqueue → reply, with the same one
// JSON log line per delivery and per consumed message as ours (its consumer does no D1 work).
const enc = new TextEncoder();
let keys;

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

const json = (body, status = 200) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });

export default {
  async fetch(request, env) {
    const started = Date.now();
    const res = await receive(request, env);
    console.log(JSON.stringify({ stage: "receive", event_id: request.headers.get("x-webhook-id"), status: res.status, duration_ms: Date.now() - started }));
    return res;
  },
  async queue(batch) {
    for (const m of batch.messages) console.log(JSON.stringify({ stage: "consume", event_id: m.body?.event_id, outcome: "acked" }));
    batch.ackAll();
  },
};

async function receive(request, env) {
  if (request.method !== "POST") return json({ error: "method_not_allowed" }, 405);
  const body = new Uint8Array(await request.arrayBuffer());
  if (body.length > 262144) return json({ error: "payload_too_large" }, 413);
  const header = request.headers.get("x-webhook-signature");
  if (!header) return json({ error: "signature_missing" }, 401);
  let t;
  const v1 = [];
  for (const part of header.split(",")) {
    const [k, v] = part.trim().split("=", 2);
    if (k === "t") t = Number(v);
    else if (k === "v1") {
      const b = hexToBytes(v ?? "");
      if (b) v1.push(b);
    }
  }
  if (!Number.isInteger(t) || v1.length === 0) return json({ error: "signature_malformed" }, 401);
  if (Math.abs(Date.now() / 1000 - t) > 300) return json({ error: "timestamp_out_of_tolerance" }, 401);
  const message = new Uint8Array([...enc.encode(`${t}.`), ...body]);
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
  if (!ok) return json({ error: "signature_mismatch" }, 401);
  let env_;
  try {
    env_ = JSON.parse(new TextDecoder().decode(body));
  } catch {
    return json({ error: "invalid_json" }, 400);
  }
  const id = request.headers.get("x-webhook-id");
  if (!env_ || typeof env_.event_id !== "string" || env_.event_id !== id || typeof env_.data?.id !== "string") {
    return json({ error: "invalid_envelope" }, 400);
  }
  const row = await env.DB.prepare(
    "INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, enqueued_at) VALUES (?1, ?2, ?3, ?4, strftime('%Y-%m-%dT%H:%M:%fZ','now')) ON CONFLICT (event_id) DO NOTHING RETURNING event_id",
  )
    .bind(env_.event_id, env_.data.id, env_.type, new TextDecoder().decode(body))
    .first();
  if (row) await env.DELIVERIES.send({ event_id: env_.event_id });
  return json({ received: true, duplicate: !row });
}
