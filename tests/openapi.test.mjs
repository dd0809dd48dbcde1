// The admin API's OpenAPI 3.1 document (interface §12), checked by tools no one here wrote,
// against the live API in workerd:
// - GET /admin/api/openapi.json serves the document kept beside the route table
//   (crates/paymos-core/src/admin/openapi.json; its native tests hold it to the routes);
// - openapi-spec-validator (PyPI, from .venv) finds it valid OpenAPI 3.1, and a broken copy not;
// - the operators' page and the `paymos` CLI call only paths and methods it names;
// - Schemathesis (PyPI, from .venv) generates requests from it, writes included, against a
//   worker of this file's own (disposable state), and checks every answer: no 5xx, status codes
//   and content types documented, bodies matching their schemas, 401 without credentials, 405
//   with an exact Allow for undocumented methods, schema-violating input refused. A copy of the
//   document that misdescribes one answer makes it fail: the run checks what it says it does;
// - answers Schemathesis cannot reach (a replay whose archived body is gone from R2: 502
//   `archive_failed`) are checked against the document by Python's `jsonschema`.
//
// Schemathesis' positive_data_acceptance check (every schema-valid input accepted) is left out
// on purpose: a cursor is opaque (only what the API gave out is taken back), a transition's
// `to` must be a state of the resource id's kind (a path parameter and a body field JSON Schema
// cannot relate), and an ISO-8601 time must name a real day; the document says each in words
// and lists each 400 it answers instead of declaring valid values invalid.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createServer } from "node:http";
import { mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { startWorker, ADMIN_TOKEN, ROOT } from "./helpers/worker.mjs";
import { deliver, envelope, randomId, admin } from "./helpers/paymos.mjs";
import { AUD, newKey, startJwksStub } from "./helpers/access.mjs";

const run = promisify(execFile);
const VENV = path.join(ROOT, ".venv/bin");
const DOC_FILE = path.join(ROOT, "crates/paymos-core/src/admin/openapi.json");
// bounded: about 20 s on 2 cores for the 21 operations (coverage, fuzzing, stateful phases)
const MAX_EXAMPLES = process.env.PAYMOS_SCHEMATHESIS_EXAMPLES ?? "40";
// fixed, so a failure is reproduced by the same run; another seed explores other inputs
const SEED = process.env.PAYMOS_SCHEMATHESIS_SEED ?? "20261130";

let w;
let stub;
let provider;
/** The paid invoices the provider's stub lists (none until the last test). */
let providerLists = [];
let dir;
let served;
let servedFile;

before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "paymos-openapi-"));
  // Access on too (a JWKS stub): a request without the bearer token is read as Access's, and
  // Schemathesis' own values for the Access header and cookie are refused with their codes
  stub = await startJwksStub([await newKey()]);
  provider = createServer((req, res) => {
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ data: providerLists, has_more: false }));
  });
  await new Promise((r) => provider.listen(0, "127.0.0.1", r));
  w = await startWorker({
    vars: {
      ACCESS_TEAM_DOMAIN: stub.url,
      ACCESS_AUD: AUD,
      PAYMOS_API_BASE: `http://127.0.0.1:${provider.address().port}`,
      // pull mode: effects stay pending in the feed (nothing is sent anywhere)
      ORDER_SYSTEM_URL: "",
    },
  });
  // a few of everything, so that the lists, lookups and writes reach their real answers
  const invoice = randomId("inv_");
  const kinds = [
    ["invoice.paid", invoice],
    ["invoice.refunded", invoice],
    ["invoice.paid", randomId("inv_")],
    ["invoice.confirming", randomId("inv_")],
    ["withdrawal.completed", randomId("wdr_")],
    ["deposit.confirmed", randomId("pcd_")],
    ["invoice.disputed", randomId("inv_")],
  ];
  for (const [type, id] of kinds) {
    const e = envelope(type, id);
    assert.equal((await deliver(w.url, e)).status, 200);
    await w.processed(e.event_id);
  }
  const dead = envelope("invoice.paid", randomId("inv_"));
  await w.db.batch([
    w.db
      .prepare("INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, processed_at, outcome, attempts, last_error) VALUES (?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ','now'), 'dead', 3, 'boom')")
      .bind(dead.event_id, dead.data.id, dead.type, JSON.stringify(dead)),
    w.db.prepare("INSERT INTO alert (id, kind, severity, summary, count) VALUES ('alt_openapi_open', 'delivery_dead', 'critical', '1 delivery dead', 1)"),
    w.db.prepare("INSERT INTO alert (id, kind, severity, summary, count, state, resolved_at) VALUES ('alt_openapi_done', 'effect_dead', 'critical', '1 effect dead', 1, 'resolved', '2026-01-01T00:00:00.000Z')"),
  ]);
  assert.equal((await admin(w.url, "POST", "/reconcile")).status, 200);
  assert.equal((await admin(w.url, "POST", `/resources/${invoice}/transition`, { to: "paid", reason: "seen at the bank" })).status, 200);

  const res = await fetch(`${w.url}/admin/api/openapi.json`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  assert.equal(res.status, 200);
  served = await res.json();
  servedFile = path.join(dir, "openapi.json");
  await writeFile(servedFile, JSON.stringify(served, null, 2));
});

after(async () => {
  await w?.close();
  await stub?.close();
  provider?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** `{ code, stdout, stderr }` of a command, whatever its exit code. */
async function exec(file, args, opts = {}) {
  try {
    const { stdout, stderr } = await run(file, args, { maxBuffer: 64 << 20, ...opts });
    return { code: 0, stdout, stderr };
  } catch (e) {
    if (typeof e.code !== "number") throw e;
    return { code: e.code, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
  }
}

/** Does an OpenAPI path template (`/deliveries/{event_id}`) match a path? */
function matches(template, p) {
  const t = template.split("/").filter(Boolean);
  const s = p.split("/").filter(Boolean);
  return t.length === s.length && t.every((seg, i) => seg.startsWith("{") || seg === s[i]);
}

/** The document's operation for a call, by OpenAPI's rule (a concrete path first). */
function operationOf(method, p) {
  const templates = Object.keys(served.paths).filter((t) => matches(t, p));
  const params = (t) => (t.match(/\{/g) ?? []).length;
  const fewest = Math.min(...templates.map(params));
  const t = templates.find((x) => params(x) === fewest && served.paths[x][method.toLowerCase()]);
  return t ? served.paths[t][method.toLowerCase()] : undefined;
}

test("GET /admin/api/openapi.json serves the document kept beside the route table, behind the same admission", async () => {
  assert.deepEqual(served, JSON.parse(await readFile(DOC_FILE, "utf8")));
  const res = await fetch(`${w.url}/admin/api/openapi.json`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  assert.match(res.headers.get("content-type"), /^application\/json/);
  assert.equal(res.headers.get("cache-control"), "no-store");
  const anonymous = await fetch(`${w.url}/admin/api/openapi.json`);
  assert.equal(anonymous.status, 401);
  assert.equal((await anonymous.json()).error, "access_token_missing");
  const post = await admin(w.url, "POST", "/openapi.json");
  assert.equal(post.status, 405);
  assert.equal(served.openapi, "3.1.0");
  const operations = Object.values(served.paths).flatMap((item) => Object.values(item));
  assert.equal(operations.length, 21);
  assert.equal(new Set(operations.map((o) => o.operationId)).size, operations.length);
});

test("openapi-spec-validator finds the served document valid OpenAPI 3.1, and a broken copy not", async () => {
  const ok = await exec(path.join(VENV, "openapi-spec-validator"), ["--schema", "3.1", servedFile]);
  assert.equal(ok.code, 0, ok.stdout + ok.stderr);
  assert.match(ok.stdout, /: OK\s*$/);
  // nor does the kept file name a key twice in one object (every parser keeps one of the two)
  const unique = await exec(path.join(VENV, "python"), ["-c", NO_DUPLICATE_KEYS, DOC_FILE]);
  assert.equal(unique.code, 0, unique.stdout + unique.stderr);
  // the validator does check: a response without its description, and a $ref to nothing
  const broken = structuredClone(served);
  delete broken.paths["/audit"].get.responses["200"].description;
  broken.paths["/whoami"].get.responses["401"] = { $ref: "#/components/responses/Nothing" };
  const brokenFile = path.join(dir, "broken.json");
  await writeFile(brokenFile, JSON.stringify(broken));
  const refused = await exec(path.join(VENV, "openapi-spec-validator"), ["--schema", "3.1", "--validation-errors", "all", brokenFile]);
  assert.notEqual(refused.code, 0, refused.stdout);
  assert.match(refused.stdout + refused.stderr, /description/);
});

const NO_DUPLICATE_KEYS = `
import json, sys
def pairs(items):
    keys = [k for k, _ in items]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        sys.exit(f"a key twice in one object: {twice}")
    return dict(items)
json.load(open(sys.argv[1]), object_pairs_hook=pairs)
`;

test("the resource id pattern the document gives is the API's rule, on its edges", async () => {
  const op = served.paths["/resources/{resource_id}/transition"].post;
  const pattern = new RegExp(op.parameters.find((p) => p.name === "resource_id").schema.pattern);
  const body = "a".repeat(64);
  const ids = ["inv_1", `wdr_${body}`, `pcd_${body}a`, "inv_", "evt_1", "inv_a-b", "INV_1", "pcd_Z9", `inv_${"é"}`];
  for (const id of ids) {
    const r = await admin(w.url, "POST", `/resources/${encodeURIComponent(id)}/transition`, { to: "nonsense", reason: "edge" });
    assert.equal(r.status, 400, id);
    // a valid id gets as far as the state; an invalid one is refused for the id
    assert.equal(r.json.error === "invalid_resource_id", !pattern.test(id), `${id}: ${r.json.error}`);
  }
});

/** `api("GET", `/deliveries/${…}`)` and the like in a source, as (method, path) pairs. */
function callsIn(source, rx) {
  const calls = [];
  for (const m of source.matchAll(rx)) {
    const p = m[2]
      .replace(/\$\{[^}]*\}/g, "x") // a JS template's value
      .replace(/\{[^}]*\}/g, "x") // a Rust format! argument
      .split("?")[0];
    calls.push([m[1], p]);
  }
  return calls;
}

test("the operators' page and the paymos CLI call only what the document names", async () => {
  const page = await readFile(path.join(ROOT, "public/admin/admin.js"), "utf8");
  const pageCalls = callsIn(page, /\bapi\(\s*"(GET|POST)",\s*[`"]([^`"]+)[`"]/g);
  // the page's whoami is a plain fetch (it asks before it knows how it is signed in)
  assert.match(page, /fetch\(`\$\{API\}\/whoami`/);
  pageCalls.push(["GET", "/whoami"]);
  assert.ok(pageCalls.length >= 15, `${pageCalls.length} calls found in admin.js`);

  const cliDir = path.join(ROOT, "crates/paymos-cli/src");
  let cli = "";
  for (const f of await readdir(cliDir)) if (f.endsWith(".rs")) cli += await readFile(path.join(cliDir, f), "utf8");
  const cliCalls = callsIn(cli, /\b(?:admin|admin_status|call|json)\(\s*"(GET|POST)",\s*(?:&format!\(\s*)?"(\/[^"]*)"/g);
  assert.ok(cliCalls.length >= 6, `${cliCalls.length} admin calls found in the CLI: ${JSON.stringify(cliCalls)}`);

  const used = new Set();
  for (const [who, calls] of [["admin.js", pageCalls], ["paymos CLI", cliCalls]]) {
    for (const [method, p] of calls) {
      const op = operationOf(method, p);
      assert.ok(op, `${who}: ${method} ${p} is not in the document`);
      used.add(op.operationId);
    }
  }
  // and between them they use most of the API (the rest is for scripts: metrics, audit pages…)
  assert.ok(used.size >= 12, [...used].join(", "));
});

/** Runs Schemathesis on `file` against the live API; `{ code, out }`. */
async function schemathesis(file, extra = []) {
  const args = [
    "run",
    file,
    "--url",
    `${w.url}/admin/api`,
    "--header",
    `Authorization: Bearer ${ADMIN_TOKEN}`,
    "--checks",
    "all",
    "--exclude-checks",
    "positive_data_acceptance",
    "--max-examples",
    MAX_EXAMPLES,
    "--seed",
    SEED,
    "--workers",
    "1",
    "--request-timeout",
    "30",
    ...extra,
  ];
  // its own working directory: its cache (.hypothesis, .schemathesis) stays out of the tree
  const r = await exec(path.join(VENV, "schemathesis"), args, { cwd: dir, env: { ...process.env, NO_COLOR: "1", SCHEMATHESIS_TELEMETRY: "false" }, timeout: 170_000 });
  return { code: r.code, out: r.stdout + r.stderr };
}

test("Schemathesis: every generated request's answer is documented and matches its schema, with no 5xx", { timeout: 200_000 }, async (t) => {
  const { code, out } = await schemathesis(servedFile);
  assert.equal(code, 0, out.slice(-6000));
  assert.match(out, /Operations:\s+21 selected \/ 21 total/);
  assert.match(out, /Tested:\s+21/);
  const counts = /(\d+) generated, (\d+) passed/.exec(out);
  assert.ok(counts, out.slice(-3000));
  assert.equal(counts[1], counts[2], "every generated case passed");
  assert.ok(Number(counts[1]) >= 500, `${counts[1]} cases only`);
  t.diagnostic(`schemathesis: ${counts[1]} cases, seed ${SEED}, at most ${MAX_EXAMPLES} examples an operation`);
  for (const phase of ["Coverage", "Fuzzing", "Stateful"]) assert.match(out, new RegExp(`✅ ${phase}`), phase);
  // the API was still whole afterwards: Schemathesis' writes were answered, not crashed on
  const audit = await admin(w.url, "GET", "/audit?limit=1000");
  assert.equal(audit.status, 200);
  assert.ok(audit.json.data.length > 10, "Schemathesis' writes are in the audit log");
});

test("Schemathesis fails the run when the document misdescribes an answer", { timeout: 120_000 }, async () => {
  const wrong = structuredClone(served);
  // whoami says `via` is one of token, access_header, access_cookie; claim it is never `token`
  wrong.paths["/whoami"].get.responses["200"].content["application/json"].schema.properties.via = { enum: ["access_header", "access_cookie"] };
  const wrongFile = path.join(dir, "wrong.json");
  await writeFile(wrongFile, JSON.stringify(wrong));
  const { code, out } = await schemathesis(wrongFile, ["--include-operation-id", "whoAmI"]);
  assert.notEqual(code, 0, out.slice(-3000));
  assert.match(out, /Response violates schema/i);
  assert.match(out, /GET \/whoami/);
});

// An answer checked against the served document by Python's `jsonschema` (Draft 2020-12, as
// OpenAPI 3.1's schemas are): its status documented for the operation, its body valid against
// that response's schema (the document's own `$ref`s resolved within it).
const VALIDATE_ANSWER = `
import json, sys
from jsonschema import Draft202012Validator
doc = json.load(open(sys.argv[1]))
method, path, status = sys.argv[2], sys.argv[3], sys.argv[4]
body = json.load(sys.stdin)
def esc(s): return s.replace("~", "~0").replace("/", "~1").replace("{", "%7B").replace("}", "%7D")
pointer = f"/paths/{esc(path)}/{method}/responses/{status}"
response = doc["paths"].get(path, {}).get(method, {}).get("responses", {}).get(status)
if response is None:
    sys.exit(f"{method.upper()} {path}: {status} is not documented")
while "$ref" in response:
    pointer = response["$ref"][1:]
    response = doc
    for part in pointer.split("/")[1:]:
        response = response[part.replace("~1", "/").replace("~0", "~")]
root = dict(doc, **{"$ref": f"#{pointer}/content/application~1json/schema"})
errors = [f"{'/'.join(map(str, e.absolute_path)) or '(body)'}: {e.message}" for e in Draft202012Validator(root).iter_errors(body)]
if errors:
    sys.exit("\\n".join(errors))
print("ok")
`;

/** Checks `answer` ({status, json}) of `method template` against the served document. */
async function assertDocumented(method, template, answer) {
  const child = execFile(path.join(VENV, "python"), ["-c", VALIDATE_ANSWER, servedFile, method.toLowerCase(), template, String(answer.status)]);
  child.stdin.end(JSON.stringify(answer.json));
  let out = "";
  child.stdout.on("data", (c) => (out += c));
  child.stderr.on("data", (c) => (out += c));
  const code = await new Promise((resolve) => child.on("close", resolve));
  assert.equal(code, 0, `${method} ${template} ${answer.status} ${JSON.stringify(answer.json)}: ${out}`);
}

test("a replay whose archived body cannot be read back answers 502 archive_failed, as the document says", async () => {
  // last in the file: archiving every processed delivery changes what Schemathesis would meet
  const e = envelope("invoice.paid", randomId("inv_"));
  assert.equal((await deliver(w.url, e)).status, 200);
  await w.processed(e.event_id);
  const archived = await admin(w.url, "POST", "/archive", { before: new Date().toISOString() });
  assert.equal(archived.status, 200, JSON.stringify(archived.json));
  const { archive_key: key } = await w.db.prepare("SELECT archive_key FROM webhook_delivery WHERE event_id = ?").bind(e.event_id).first();
  assert.ok(key, "the body is in the archive");
  // its object gone from R2 (an operator's mistake, a lifecycle rule): the body cannot be read back
  await (await w.mf.getR2Bucket("ARCHIVE")).delete(key);

  const single = await admin(w.url, "POST", `/deliveries/${e.event_id}/replay`);
  assert.equal(single.status, 502, JSON.stringify(single.json));
  assert.equal(single.json.error, "archive_failed");
  assert.match(single.json.message, /is not in the archive/);
  await assertDocumented("POST", "/deliveries/{event_id}/replay", single);
  // an admin write that changed nothing is on record all the same (§11), as failed
  const [audited] = (await admin(w.url, "GET", "/audit?action=replay&limit=1")).json.data;
  assert.deepEqual([audited.target, audited.outcome], [e.event_id, "failed"]);

  const bulk = await admin(w.url, "POST", "/deliveries/replay", { resource_id: e.data.id });
  assert.equal(bulk.status, 502, JSON.stringify(bulk.json));
  assert.equal(bulk.json.error, "archive_failed");
  await assertDocumented("POST", "/deliveries/replay", bulk);
  // nothing was reset: the row still points to the archive
  const row = await w.db.prepare("SELECT archive_key, processed_at FROM webhook_delivery WHERE event_id = ?").bind(e.event_id).first();
  assert.equal(row.archive_key, key);
  assert.ok(row.processed_at);

  // the metrics, with an archiving run and a reconciliation on record (null before them, as
  // Schemathesis mostly meets them), match the document's schema field by field
  // (a paid invoice the receiver never heard of: one `missing` finding, brought to paid)
  const unheard = randomId("inv_");
  providerLists = [{ id: unheard, object: "invoice", status: "paid", amount: "5.00", currency: "USDT", order_ref: "order_unheard", paid_at: Math.floor(Date.now() / 1000) }];
  const report = await admin(w.url, "POST", "/reconcile", {});
  assert.equal(report.status, 200, JSON.stringify(report.json));
  assert.deepEqual(report.json.missing, [{ id: unheard, order_ref: "order_unheard", brought_to_paid: true, status: "paid" }]);
  await assertDocumented("POST", "/reconcile", report);
  const metrics = await admin(w.url, "GET", "/metrics");
  assert.equal(metrics.status, 200);
  assert.equal(metrics.json.archive.last_run.state, "done");
  assert.equal(metrics.json.reconciliation.missing_count, 1);
  await assertDocumented("GET", "/metrics", metrics);
});
