// The receive path's driver (src/receive/driver.rs says what it takes): a delivery is read,
// inserted, sent and answered here with the runtime's objects, and every decision about it is
// the wasm's, asked in two calls per delivery with plain values. Each call from the wasm into
// JS cost a crossing of wasm-bindgen's glue: 38 per duplicate, where asked this way it makes 3
// (bench/README.md, "The receive path driven from JavaScript"). Anything this does not take
// (no Content-Length, a body past the limit or large enough for WebCrypto, a configuration
// fault) is left to the wasm's own paths: `receiveDelivery` returns `undefined` for it.

const WEBHOOK_PATH = "/webhooks/paymos";
const RECEIPT_NEW = '{"received":true,"duplicate":false}';
const RECEIPT_DUPLICATE = '{"received":true,"duplicate":true}';
const JSON_REPLY = { status: 200, headers: { "content-type": "application/json" } };
const decoder = new TextDecoder();

/**
 * The wasm's answer to `receive_setup`, once per isolate (the environment it reads does not
 * change): `null` for a configuration fault.
 */
let setup;

/**
 * Reads the setup at the isolate's start, where the environment is importable: the first
 * delivery then neither runs nor compiles the configuration's reading. Without an importable
 * environment, or should it fail, the first delivery reads it as before.
 */
export function prepareReceive(wasm, env) {
  if (env === undefined) return;
  try {
    setup = readSetup(wasm.receive_setup(env));
  } catch {
    // left unset: the first delivery asks again
  }
}

/**
 * The reply to a delivery this driver takes (a promise of it), or `undefined` for a request
 * it leaves to the wasm's `fetch`. `wasm`: the receive path's exports (driver.rs).
 */
export function receiveDelivery(wasm, request, env, ctx) {
  if (request.method !== "POST" || pathOf(request.url) !== WEBHOOK_PATH) return undefined;
  if (setup === undefined) setup = readSetup(wasm.receive_setup(env));
  if (setup === null) return undefined;
  const headers = request.headers;
  const declared = headers.get("content-length");
  // only a plain decimal length, as the wasm's paths read it: anything else is theirs
  if (declared === null || !/^\s*\d+\s*$/.test(declared)) return undefined;
  const length = Number(declared);
  if (length > setup.max_body_bytes || length >= setup.webcrypto_min_bytes) return undefined;
  const head = {
    started: Date.now(),
    id: headers.get("x-webhook-id") ?? undefined,
    attempt: headers.get("x-webhook-attempt") ?? undefined,
    signature: headers.get("x-webhook-signature") ?? undefined,
  };
  return request.arrayBuffer().then(
    (body) => checked(wasm, env, ctx, head, new Uint8Array(body)),
    () => refusal(wasm.receive_unreadable(env, ctx, head.id, head.attempt, head.started, Date.now())),
  );
}

/** The body read: checked by the wasm, then inserted, or refused. */
function checked(wasm, env, ctx, head, body) {
  const verdict = wasm.receive_check(env, ctx, body, head.id, head.attempt, head.signature, head.started, Date.now());
  if (verdict[0] !== "A") return refusal(verdict);
  const [eventId, resourceId, eventType, message] = verdict.slice(1).split("\n");
  const failed = (error) => refusal(wasm.receive_failed(env, head.id, head.attempt, head.started, Date.now(), error));
  const db = env[setup.database];
  if (db === undefined) return failed(undefined);
  let insert;
  try {
    // the wasm accepted the body as JSON, so it is UTF-8
    insert = db.prepare(setup.insert).bind(eventId, resourceId, eventType, decoder.decode(body)).first("event_id");
  } catch (error) {
    return failed(error);
  }
  const done = (duplicate, sent, error) => {
    wasm.receive_done(env, head.id, head.attempt, head.started, Date.now(), duplicate, resourceId, eventType, sent, error);
    return new Response(duplicate ? RECEIPT_DUPLICATE : RECEIPT_NEW, JSON_REPLY);
  };
  return insert.then((column) => {
    if (column === null || column === undefined) return done(true, 0);
    // the row is durable: if this send fails the sweeper enqueues it later, so still 2xx
    const queue = env[setup.queue];
    if (queue === undefined) return done(false, 2);
    let send;
    try {
      // the message carries the envelope's facts: the consumer loads nothing before deciding
      send = queue.send(JSON.parse(message), { contentType: "json" });
    } catch (error) {
      return done(false, 1, error);
    }
    return send.then(
      () => done(false, 0),
      (error) => done(false, 1, error),
    );
  }, failed);
}

/** `receive_setup`'s lines: four values, then the insert's SQL text to the end. */
function readSetup(text) {
  if (text === undefined) return null;
  const lines = text.split("\n");
  return {
    max_body_bytes: Number(lines[0]),
    webcrypto_min_bytes: Number(lines[1]),
    database: lines[2],
    queue: lines[3],
    insert: lines.slice(4).join("\n"),
  };
}

/** A refusal's reply from the wasm's `R<status><reply body>`. */
function refusal(verdict) {
  return new Response(verdict.slice(4), { status: Number(verdict.slice(1, 4)), headers: { "content-type": "application/json" } });
}

/**
 * The path of a serialized WHATWG URL (`Request.url`), as the wasm's `path_of` reads it: the
 * first `/` after the host begins it, and `?` and `#` end it.
 */
function pathOf(url) {
  const host = url.indexOf("://");
  if (host < 0) return url;
  const start = url.indexOf("/", host + 3);
  if (start < 0) return "/";
  let end = url.length;
  for (const mark of ["?", "#"]) {
    const at = url.indexOf(mark, start);
    if (at >= 0 && at < end) end = at;
  }
  return url.slice(start, end);
}
