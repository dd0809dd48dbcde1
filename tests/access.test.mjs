// Cloudflare Access in front of /admin (interface §11), in workerd: the worker fetches the team's
// keys from a local JWKS stub (tests/helpers/access.mjs, keys and tokens made with `jose`) and
// admits what Access would assert, by the Cf-Access-Jwt-Assertion header or the
// CF_Authorization cookie; every other token is 401 with its own code; the keys are cached per
// isolate and fetched again for an unknown kid, or after a failed fetch, at most once a minute;
// keys that cannot be read are 401 too; writes admitted by the cookie need a same-origin request;
// the bearer token keeps working; with neither configured /admin is 404.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { connect } from "node:net";
import { startWorker, ADMIN_TOKEN } from "./helpers/worker.mjs";
import {
  AUD,
  EMAIL,
  SERVICE_TOKEN,
  newKey,
  startJwksStub,
  claims,
  mint,
  mintNone,
  mintHs256WithPublicKey,
} from "./helpers/access.mjs";

let w;
let stub;
let key;
let firstFetchAt;

before(async () => {
  key = await newKey();
  stub = await startJwksStub([key]);
  w = await startWorker({ vars: { ACCESS_TEAM_DOMAIN: stub.url, ACCESS_AUD: AUD } });
});
after(async () => {
  await w?.close();
  await stub?.close();
  await solo?.close();
  await own?.close();
});

/** An admin API call; `jwt` in the header (`via: "header"`), the cookie, or both. */
async function call(path, { jwt, via = "header", method = "GET", headers = {}, body, url = w.url } = {}) {
  const h = { ...headers };
  if (jwt !== undefined && (via === "header" || via === "both")) h["cf-access-jwt-assertion"] = jwt;
  if (jwt !== undefined && (via === "cookie" || via === "both")) h.cookie = `theme=dark; CF_Authorization=${jwt}`;
  if (body !== undefined) h["content-type"] = "application/json";
  const res = await fetch(`${url}/admin/api${path}`, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text, headers: res.headers };
}

const valid = (over = {}, k = key) => mint(k, claims(stub.url, over));

test("a valid Access token is admitted by the header and by the cookie; whoami names the actor", async () => {
  assert.equal(stub.hits.length, 0, "no key fetched before the first Access request");
  const jwt = await valid();
  const byHeader = await call("/whoami", { jwt });
  assert.equal(byHeader.status, 200, byHeader.text);
  assert.deepEqual(byHeader.json, { actor: EMAIL, via: "access_header", service_token: false });
  assert.equal(byHeader.headers.get("cache-control"), "no-store");
  assert.equal(stub.hits.length, 1, "the keys fetched once");
  firstFetchAt = stub.hits[0];

  const byCookie = await call("/whoami", { jwt, via: "cookie" });
  assert.deepEqual(byCookie.json, { actor: EMAIL, via: "access_cookie", service_token: false });
  // behind Access a browser sends both (the edge adds the header): the header is read
  assert.equal((await call("/whoami", { jwt, via: "both" })).json.via, "access_header");
  // the data too, not only whoami
  const list = await call("/deliveries?limit=1", { jwt, via: "cookie" });
  assert.equal(list.status, 200, list.text);
  assert.ok(Array.isArray(list.json.data));

  // an Access service token (scripts): no email, its common_name is the actor
  const service = await valid({ email: undefined, sub: "", identity_nonce: undefined, country: undefined, common_name: SERVICE_TOKEN });
  assert.deepEqual((await call("/whoami", { jwt: service })).json, { actor: SERVICE_TOKEN, via: "access_header", service_token: true });
  // an aud given as a plain string, a trailing slash on iss, clock skew within 60 s
  const now = Math.floor(Date.now() / 1000);
  for (const over of [{ aud: AUD }, { aud: ["another-app", AUD] }, { iss: `${stub.url}/` }, { nbf: now + 30, iat: now + 30 }, { exp: now - 30, iat: now - 600, nbf: now - 600 }]) {
    const r = await call("/whoami", { jwt: await valid(over) });
    assert.equal(r.status, 200, `${JSON.stringify(over)}: ${r.text}`);
  }
  assert.equal(stub.hits.length, 1, "every one of them from the cached keys");
});

// §11: a request is admitted by the header "or the CF_Authorization cookie": a blank header
// (a proxy that forwards it empty) is no token, and the cookie beside it admits
test("a blank Cf-Access-Jwt-Assertion header beside a valid cookie: the cookie admits", async () => {
  const jwt = await valid();
  const r = await call("/whoami", { headers: { "cf-access-jwt-assertion": "", cookie: `CF_Authorization=${jwt}` } });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json, { actor: EMAIL, via: "access_cookie", service_token: false });
});

let rotated;

test("a key rotation at the team: within the minute after the last fetch, the new kid is unknown however often it is tried", async () => {
  assert.equal(stub.hits.length, 1, "one fetch so far");
  assert.ok(Date.now() - firstFetchAt < 50_000, "this runs well within the minute of the first fetch");
  rotated = await stub.rotate();
  const jwt = await valid({}, rotated);
  for (let i = 0; i < 5; i++) {
    const r = await call("/whoami", { jwt });
    assert.equal(r.status, 401);
    assert.equal(r.json.error, "access_key_unknown");
  }
  assert.equal(stub.hits.length, 1, "no fetch within the minute");
  // the keys held still admit
  assert.equal((await call("/whoami", { jwt: await valid() })).status, 200);
});

test("every other token is 401 with exactly {error: its own code}; why is in the log", async () => {
  const foreign = await newKey();
  const now = Math.floor(Date.now() / 1000);
  const [head, body, sig] = (await valid()).split(".");
  const forgedBody = Buffer.from(JSON.stringify(claims(stub.url, { email: "admin@example.com" }))).toString("base64url");
  const cases = [
    ["expired", await valid({ exp: now - 3600, iat: now - 7200, nbf: now - 7200 }), "access_token_expired"],
    ["expired beyond the leeway", await valid({ exp: now - 90 }), "access_token_expired"],
    ["not valid yet (nbf)", await valid({ nbf: now + 600 }), "access_token_not_yet_valid"],
    ["issued in the future (iat)", await valid({ iat: now + 600 }), "access_token_not_yet_valid"],
    ["wrong audience", await valid({ aud: ["another-application"] }), "access_audience_mismatch"],
    ["no audience", await valid({ aud: undefined }), "access_audience_mismatch"],
    ["wrong issuer", await valid({ iss: "https://another-team.cloudflareaccess.com" }), "access_issuer_mismatch"],
    ["foreign key (kid unknown)", await mint(foreign, claims(stub.url)), "access_key_unknown"],
    ["a known kid, signed by another key", await mint(foreign, claims(stub.url), { kid: key.kid }), "access_signature_invalid"],
    ["payload swapped under a valid signature", `${head}.${forgedBody}.${sig}`, "access_signature_invalid"],
    ["alg none", mintNone(claims(stub.url), key.kid), "access_algorithm_refused"],
    ["HS256 keyed with the public key", await mintHs256WithPublicKey(key, claims(stub.url)), "access_algorithm_refused"],
    ["RS512 under the team's kid", await mint(await newKey("RS512"), claims(stub.url), { kid: key.kid, alg: "RS512" }), "access_algorithm_refused"],
    ["no actor", await valid({ email: undefined }), "access_actor_missing"],
    ["no exp", await valid({ exp: undefined }), "access_token_malformed"],
    ["garbage", "garbage", "access_token_malformed"],
    ["three parts of garbage", "not.a.jwt", "access_token_malformed"],
    ["two parts", `${head}.${body}`, "access_token_malformed"],
  ];
  for (const [what, jwt, code] of cases) {
    for (const via of ["header", "cookie"]) {
      const r = await call("/whoami", { jwt, via });
      assert.equal(r.status, 401, `${what} (${via}): ${r.text}`);
      assert.equal(r.json?.error, code, `${what} (${via})`);
      // §11 gives the body as {"error":"<code>"}, nothing beside it
      assert.deepEqual(r.json, { error: code }, `${what} (${via})`);
      assert.equal(r.headers.get("cache-control"), "no-store");
    }
  }
  // the log says why, echoing neither the audience nor a token
  const why = w.logs.filter((l) => l.stage === "admin" && l.outcome?.startsWith("access_"));
  assert.ok(why.length >= cases.length * 2, `a line per refusal (${why.length})`);
  for (const l of why) {
    assert.equal(typeof l.detail, "string", JSON.stringify(l));
    assert.ok(!l.detail.includes(AUD) && !cases.some(([, jwt]) => l.detail.includes(jwt.slice(0, 40))), l.detail);
  }
  // nothing at all: the code says so
  const none = await call("/deliveries");
  assert.equal(none.status, 401);
  assert.equal(none.json.error, "access_token_missing");
  const emptyCookie = await call("/deliveries", { headers: { cookie: "CF_Authorization=" } });
  assert.equal(emptyCookie.json.error, "access_token_missing");
  // a write is refused the same way before anything is read or changed
  const write = await call("/deliveries/replay", { jwt: "garbage", method: "POST", body: { status: "dead", dry_run: true } });
  assert.equal(write.status, 401);
  assert.equal(stub.hits.length, 1, "a refused algorithm or an unknown kid did not fetch the keys again within the minute");
});

test("writes carrying the cookie need a same-origin request, by either header, the Access header beside it or not; a script's header alone does not", async () => {
  const jwt = await valid();
  const write = (via, headers) => call("/deliveries/replay", { jwt, via, method: "POST", headers, body: { status: "dead", dry_run: true } });
  const refused = [
    ["Sec-Fetch-Site: cross-site", { "sec-fetch-site": "cross-site" }],
    ["Sec-Fetch-Site: same-site and another Origin", { "sec-fetch-site": "same-site", origin: "http://127.0.0.1:1" }],
    ["Sec-Fetch-Site: same-site alone", { "sec-fetch-site": "same-site" }],
    ["another Origin", { origin: "https://evil.example" }],
    ["Origin null", { origin: "null" }],
    ["neither header", {}],
  ];
  // behind Access the edge adds the header to every browser request that carries the cookie:
  // the header beside the cookie does not show that a script sent it
  for (const [what, headers] of refused) {
    for (const via of ["cookie", "both"]) {
      const r = await write(via, headers);
      assert.equal(r.status, 403, `${what} (${via}): ${r.text}`);
      assert.equal(r.json.error, "cross_site_request", what);
    }
  }
  // §11: `Sec-Fetch-Site: same-origin`, or an Origin equal to the request's own; either is enough
  for (const [what, headers] of [
    ["Sec-Fetch-Site: same-origin", { "sec-fetch-site": "same-origin" }],
    ["Origin equal to the request's", { origin: w.url }],
    ["Origin equal to the request's beside Sec-Fetch-Site: same-site", { "sec-fetch-site": "same-site", origin: w.url }],
    ["Origin equal to the request's beside Sec-Fetch-Site: cross-site", { "sec-fetch-site": "cross-site", origin: w.url }],
  ]) {
    const r = await write("cookie", headers);
    assert.equal(r.status, 200, `${what}: ${r.text}`);
    assert.equal(r.json.dry_run, true);
  }
  // a script with a service token sends the header and no cookie: no browser, nothing to forge
  for (const [what, headers] of refused) {
    const r = await write("header", headers);
    assert.equal(r.status, 200, `${what} (header): ${r.text}`);
  }
  // reads by the cookie are not writes
  assert.equal((await call("/whoami", { jwt, via: "cookie", headers: { "sec-fetch-site": "cross-site" } })).status, 200);
  // cookies in two header fields (HTTP/2 browsers send them so; the runtime joins them with
  // ", "): still the cookie, still refused cross-site. Raw HTTP/1.1, since fetch and
  // node:http join a cookie array with "; ".
  const body = JSON.stringify({ status: "dead", dry_run: true });
  const { host, port } = new URL(w.url);
  const answer = await new Promise((resolve, reject) => {
    const socket = connect(Number(port), host.split(":")[0], () => {
      socket.end(
        [
          "POST /admin/api/deliveries/replay HTTP/1.1",
          `Host: ${host}`,
          "Content-Type: application/json",
          `Content-Length: ${Buffer.byteLength(body)}`,
          `Cf-Access-Jwt-Assertion: ${jwt}`,
          "Cookie: theme=dark",
          `Cookie: CF_Authorization=${jwt}`,
          "Sec-Fetch-Site: cross-site",
          "Origin: https://evil.example",
          "Connection: close",
          "",
          body,
        ].join("\r\n"),
      );
    });
    let raw = "";
    socket.on("data", (c) => (raw += c));
    socket.on("end", () => resolve(raw));
    socket.on("error", reject);
  });
  assert.match(answer, /^HTTP\/1\.1 403 /, answer.slice(0, 300));
  assert.match(answer, /cross_site_request/);
});

test("the bearer token keeps working beside Access; either admits, whatever else Authorization holds", async () => {
  const who = await call("/whoami", { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  assert.deepEqual(who.json, { actor: "token", via: "token", service_token: false });
  const write = await call("/deliveries/replay", { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, body: { status: "dead", dry_run: true } });
  assert.equal(write.status, 200, write.text);
  // §11 admits a request by a valid Access token: an Authorization that is not the bearer
  // token (a proxy's Basic header, a stale token) does not refuse it
  for (const authorization of ["Bearer not-the-token", "Basic dXNlcjpwYXNz", "Negotiate abc"]) {
    for (const via of ["header", "cookie"]) {
      const beside = await call("/whoami", { jwt: await valid(), via, headers: { authorization } });
      assert.equal(beside.status, 200, `${authorization} (${via}): ${beside.text}`);
      assert.equal(beside.json.actor, EMAIL);
    }
  }
  // refused, the Access token's own code; without one, the bearer token's
  const expired = await call("/whoami", { jwt: await valid({ exp: Math.floor(Date.now() / 1000) - 3600 }), headers: { authorization: "Bearer not-the-token" } });
  assert.deepEqual([expired.status, expired.json], [401, { error: "access_token_expired" }]);
  const wrong = await call("/whoami", { headers: { authorization: "Bearer not-the-token" } });
  assert.deepEqual([wrong.status, wrong.json], [401, { error: "unauthorized" }]);
  // the bearer's own cross-site rule holds as before
  const cross = await call("/reconcile", { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "sec-fetch-site": "cross-site" } });
  assert.equal(cross.status, 403);
  // whoami is GET only
  const post = await call("/whoami", { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  assert.equal(post.status, 405);
  assert.equal(post.headers.get("allow"), "GET");
});

test("a method the API does not know is 405 with the path's methods, never read as GET; by the cookie it is a write", async () => {
  const bearer = { authorization: `Bearer ${ADMIN_TOKEN}` };
  for (const [method, p, allow] of [
    ["QUERY", "/deliveries", "GET"],
    ["PURGE", "/whoami", "GET"],
    ["QUERY", "/audit", "GET"],
    // the bulk replay's own path, not the delivery "replay" (OpenAPI: a concrete path first)
    ["PURGE", "/deliveries/replay", "POST"],
    ["GET", "/deliveries/replay", "POST"],
    ["PUT", "/reconcile", "GET, POST"],
  ]) {
    const r = await call(p, { method, headers: bearer });
    assert.equal(r.status, 405, `${method} ${p}: ${r.text}`);
    assert.equal(r.headers.get("allow"), allow, `${method} ${p}`);
    assert.equal(r.json.error, "method_not_allowed");
  }
  // any method but GET and HEAD is a write: by the cookie, it needs the same origin first
  const jwt = await valid();
  const cross = await call("/deliveries", { jwt, via: "cookie", method: "QUERY", headers: { "sec-fetch-site": "cross-site" } });
  assert.equal(cross.status, 403, cross.text);
  assert.equal(cross.json.error, "cross_site_request");
  const same = await call("/deliveries", { jwt, via: "cookie", method: "QUERY", headers: { "sec-fetch-site": "same-origin" } });
  assert.equal(same.status, 405);
});

// A worker with Access alone, whose team domain hangs, then fails, then is back: it recovers a
// minute after its failed fetch, checked by the last test (which waits for the minute anyway).
let own;
let solo;
let soloJwt;
let soloFetchAt;

test("Access alone turns the admin surface on; keys that cannot be read are 401 within the timeout, and not fetched again within the minute", async () => {
  own = await startJwksStub([await newKey()]);
  own.mode = "hang";
  solo = await startWorker({ vars: { ADMIN_TOKEN: "", ACCESS_TEAM_DOMAIN: own.url, ACCESS_AUD: AUD } });
  const page = await fetch(`${solo.url}/admin`);
  assert.equal(page.status, 200, "the page is served with Access configured and no ADMIN_TOKEN");
  await page.arrayBuffer();
  // no bearer token configured: one sent is refused, not ignored
  const bearer = await call("/whoami", { url: solo.url, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  assert.equal(bearer.status, 401);
  assert.equal(bearer.json.error, "unauthorized");
  soloJwt = await mint(own.keys[0], claims(own.url));
  const started = Date.now();
  const hung = await call("/whoami", { url: solo.url, jwt: soloJwt });
  const took = Date.now() - started;
  // §11: any failure is 401 with its code, keys that cannot be read too
  assert.equal(hung.status, 401, hung.text);
  assert.equal(hung.json.error, "access_keys_unavailable");
  assert.deepEqual(hung.json, { error: "access_keys_unavailable" }, "the reply does not name the URL; the log does");
  assert.ok(took >= 4500 && took < 9000, `gave up after the 5 s timeout (${took} ms)`);
  assert.ok(solo.logs.some((l) => l.stage === "access" && l.outcome === "keys_unavailable" && /did not answer within 5000 ms/.test(l.detail)));
  assert.equal(own.hits.length, 1);
  soloFetchAt = own.hits[0];

  // a failing team domain (500) is the same answer: a fresh worker fetches at once
  own.mode = "fail";
  const fresh = await startWorker({ vars: { ADMIN_TOKEN: "", ACCESS_TEAM_DOMAIN: own.url, ACCESS_AUD: AUD } });
  try {
    const failed = await call("/whoami", { url: fresh.url, jwt: soloJwt });
    assert.equal(failed.status, 401, failed.text);
    assert.equal(failed.json.error, "access_keys_unavailable");
    assert.equal(own.hits.length, 2, "its first fetch at once");
    assert.ok(fresh.logs.some((l) => l.stage === "access" && l.outcome === "keys_unavailable" && /answered 500/.test(l.detail)));
  } finally {
    await fresh.close();
  }

  // after a failed fetch the next one waits a minute too (§11), well past the 5 s timeout,
  // failing or back
  const wait = soloFetchAt + 6_000 - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  for (const mode of ["fail", "ok"]) {
    own.mode = mode;
    const r = await call("/whoami", { url: solo.url, jwt: soloJwt });
    assert.equal(r.status, 401, `${mode}: ${r.text}`);
    assert.equal(r.json.error, "access_keys_unavailable");
  }
  assert.equal(own.hits.length, 2, "not fetched again within the minute after the failed fetch");
  assert.ok(Date.now() - soloFetchAt < 50_000, "this runs well within the minute of the failed fetch");
});

test("one of the two vars alone is a configuration warning and leaves Access off", async () => {
  const half = await startWorker({ vars: { ACCESS_TEAM_DOMAIN: stub.url } });
  try {
    const jwt = await valid();
    const r = await call("/whoami", { url: half.url, jwt });
    assert.equal(r.status, 401);
    assert.equal(r.json.error, "unauthorized", "Access is off: only the bearer token admits");
    const m = await call("/metrics", { url: half.url, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    assert.ok(m.json.config.warnings.some((x) => /ACCESS_TEAM_DOMAIN is set but ACCESS_AUD is not/.test(x)), JSON.stringify(m.json.config.warnings));
    assert.ok(half.logs.some((l) => l.stage === "config" && l.outcome === "access" && /ACCESS_AUD is not/.test(l.detail)));
  } finally {
    await half.close();
  }
  // a plain-http team domain that is not loopback is refused the same way (keys must come over https)
  const plain = await startWorker({ vars: { ADMIN_TOKEN: "", ACCESS_TEAM_DOMAIN: "http://acme.cloudflareaccess.com", ACCESS_AUD: AUD } });
  try {
    const r = await call("/whoami", { url: plain.url, jwt: await valid() });
    assert.equal(r.status, 404, "Access off and no token: the admin surface is off");
    assert.ok(plain.logs.some((l) => l.stage === "config" && l.outcome === "access" && /not an https URL/.test(l.detail)));
  } finally {
    await plain.close();
  }
});

test("a development team domain is said in the metrics' warnings", async () => {
  const m = await call("/metrics", { jwt: await valid() });
  assert.equal(m.status, 200, m.text);
  assert.ok(m.json.config.warnings.some((x) => x.includes("loopback development value")), JSON.stringify(m.json.config.warnings));
});

test("with neither ADMIN_TOKEN nor Access configured, everything under /admin is 404", async () => {
  const off = await startWorker({ vars: { ADMIN_TOKEN: "" } });
  try {
    const jwt = await valid();
    for (const p of ["/admin", "/admin/admin.js", "/admin/api/whoami", "/admin/api/deliveries", "/admin/api/metrics"]) {
      for (const headers of [{}, { authorization: `Bearer ${ADMIN_TOKEN}` }, { "cf-access-jwt-assertion": jwt }, { cookie: `CF_Authorization=${jwt}` }]) {
        const res = await fetch(`${off.url}${p}`, { headers });
        assert.equal(res.status, 404, `${p} ${JSON.stringify(Object.keys(headers))}`);
        assert.equal(res.headers.get("cache-control"), "no-store");
        await res.arrayBuffer();
      }
    }
  } finally {
    await off.close();
  }
});

test("a key rotation at the team is picked up a minute after the last fetch, by one fetch, and the next unknown kid waits again", async () => {
  assert.equal(stub.hits.length, 1, "one fetch so far, for the whole file");
  const jwt = await valid({}, rotated);
  const wait = firstFetchAt + 60_000 + 500 - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  const after = await call("/whoami", { jwt });
  assert.equal(after.status, 200, after.text);
  assert.equal(after.json.actor, EMAIL);
  assert.equal(stub.hits.length, 2, "one fetch");
  // the previous key is still served (Access keeps it for 7 days) and still admitted
  assert.equal((await call("/whoami", { jwt: await valid() })).status, 200);
  // and the next unknown kid waits for the next minute again
  const foreign = await newKey();
  for (let i = 0; i < 3; i++) assert.equal((await call("/whoami", { jwt: await mint(foreign, claims(stub.url)) })).json.error, "access_key_unknown");
  assert.equal(stub.hits.length, 2, "rate-limited again");
  assert.equal(w.logs.filter((l) => l.stage === "access" && l.outcome === "keys_fetched").length, 2, "the worker logged both fetches");
});

test("keys that could not be read are fetched again a minute after the failed fetch, and admit", async () => {
  own.mode = "ok";
  const hits = own.hits.length;
  const wait = soloFetchAt + 60_000 + 500 - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  const back = await call("/whoami", { url: solo.url, jwt: soloJwt });
  assert.equal(back.status, 200, back.text);
  assert.deepEqual(back.json, { actor: EMAIL, via: "access_header", service_token: false });
  assert.equal(own.hits.length, hits + 1, "one fetch");
  assert.ok(solo.logs.some((l) => l.stage === "access" && l.outcome === "keys_fetched"));
});
