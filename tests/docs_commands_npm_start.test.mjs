// The commands the docs give a user that start `npm start` or build through wrangler's [build],
// run as typed: npm start with the runbooks' calls by curl, `npm run demo`, and each documented
// `wrangler deploy` (offline, --dry-run). wrangler's build may rewrite build/ under other files'
// workers (scripts/build.sh skips a build whose inputs have not changed, but a changed tree
// rebuilds), so this file runs alone, after the others (scripts/test.sh).
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { ROOT, freePort } from "./helpers/worker.mjs";
import { admin, randomId } from "./helpers/paymos.mjs";
import { background, d1, devVar, docCommands, one, npmStart, sh } from "./helpers/shell.mjs";

const BIN = process.env.PAYMOS_BIN || path.resolve(ROOT, process.env.CARGO_TARGET_DIR || "target", "release/paymos");

// README "Two commands" + docs/operations.md: `npm start` with PORT / STATE_DIR and further
// arguments, the daily cron by curl, and every operator call of the runbooks by curl with $W and
// $ADMIN_TOKEN, as typed (the ```sh blocks' text itself, ids filled in; the calls the runbooks
// give in prose, method + path + body, written as curl).
test("npm start, then the runbooks' calls by curl as typed: replay, bulk replay, dismiss, redeliver, ack, transition, reconcile, archive, the daily cron", async () => {
  assert.ok(existsSync(BIN), `${BIN} is missing: cargo build -p paymos-cli --release`);
  const ops = await docCommands("docs/operations.md");
  const dir = await mkdtemp(path.join(tmpdir(), "paymos-runbook-"));
  const [port, inspectorPort, sandboxPort] = [await freePort(), await freePort(), await freePort()];
  const W = `http://127.0.0.1:${port}`;
  const env = { W, ADMIN_TOKEN: await devVar("ADMIN_TOKEN") };
  // the provider API, with the key .dev.vars gives the receiver (see test 2 for the sandbox line
  // of .dev.vars.example as written)
  const sandbox = await background(`'${BIN}' sandbox --port ${sandboxPort} --api-key '${await devVar("PAYMOS_API_KEY")}' --quiet`, /listening on (http:\/\/127\.0\.0\.1:\d+)/);
  // README: `PORT=8788 STATE_DIR=/tmp/paymos-state npm start -- --inspector-port 9230`; further
  // arguments go to wrangler dev (here the sandbox's address instead of .dev.vars's 8790)
  const server = npmStart(port, dir, ["--inspector-port", String(inspectorPort), "--var", `PAYMOS_API_BASE:${sandbox.match[1]}`]);
  try {
    await server.until("the receiver to serve /healthz", async () => (await fetch(`${W}/healthz`).catch(() => null))?.status === 200, 540000, 1000);

    // the daily cron, as operations.md prints it (README: "cron=17+3+*+*+* also reconciles")
    const daily = one(ops, /cron=17\+3\+/).replace("http://127.0.0.1:8787", W);
    const fired = await sh(daily);
    assert.equal(fired.stdout, "Ran scheduled event");
    await server.until("the daily reconciliation's line", () => server.state.logs.find((l) => l.stage === "reconcile" && /^run \d+ done/.test(l.outcome)));
    await server.until("the daily archiving run's line", () => server.state.logs.find((l) => l.stage === "archive"));

    // a delivery, sent as crates/paymos-cli/README.md says
    const evt = randomId("evt_");
    const inv = randomId("inv_");
    const sent = await sh(`'${BIN}' send invoice.paid --to "$W" --event-id ${evt} --resource ${inv} --json`, { env });
    assert.equal(sent.code, 0, sent.stdout + sent.stderr);
    const processed = (id) => server.until(`${id} processed`, async () => (await admin(W, "GET", `/deliveries/${id}`, undefined, env.ADMIN_TOKEN)).json?.processed_at);
    await processed(evt);

    // the metrics, piped to jq as the docs do (jq is not installed by scripts/setup.sh)
    const metrics = await sh(one(ops, /admin\/api\/metrics" \| jq$/), { env });
    assert.equal(metrics.code, 0, metrics.stderr);
    assert.equal(typeof JSON.parse(metrics.stdout).deliveries.unprocessed, "number");

    // "Replay a delivery once its cause is fixed"
    const replay = await sh(one(ops, /deliveries\/evt_…\/replay"$/).replace("evt_…", evt), { env });
    assert.deepEqual([replay.json?.replayed, replay.json?.enqueued], [true, true], replay.stdout);

    // two dead deliveries and a dead effect (set-up, as cron_trigger's row is: by SQL)
    const evt2 = randomId("evt_");
    const inv2 = randomId("inv_");
    assert.equal((await sh(`'${BIN}' send invoice.paid --to "$W" --event-id ${evt2} --resource ${inv2}`, { env })).code, 0);
    await processed(evt2);
    await d1(dir, `UPDATE webhook_delivery SET outcome = 'dead', processed_at = received_at WHERE event_id IN ('${evt}', '${evt2}')`);
    await d1(dir, `UPDATE effect SET dispatch = 'dead' WHERE resource_id = '${inv}'`);

    // runbooks: dismiss a dead delivery and a dead effect, with the docs' reasons
    const dismissDelivery = await sh(one(ops, /deliveries\/evt_…\/dismiss"/).replace("evt_…", evt2), { env });
    assert.deepEqual([dismissDelivery.json?.dismissed, dismissDelivery.json?.reason], [true, "test event sent by support; nothing to ship"], dismissDelivery.stdout);
    const deadEffects = await sh(`curl -s -H "Authorization: Bearer $ADMIN_TOKEN" "$W/admin/api/effects?dispatch=dead"`, { env });
    const eff = deadEffects.json.data.find((e) => e.resource_id === inv)?.id;
    assert.match(eff ?? "", /^eff_/, deadEffects.stdout);
    const dismissEffect = await sh(one(ops, /effects\/eff_…\/dismiss"/).replace("eff_…", eff), { env });
    assert.deepEqual([dismissEffect.json?.dismissed, dismissEffect.json?.reason], [true, "shipped by hand, ticket 4411"], dismissEffect.stdout);
    // effect_dead: "POST /admin/api/effects/{effect_id}/redeliver"
    const redeliver = await sh(`curl -s -w '\\n%{http_code}' -X POST -H "Authorization: Bearer $ADMIN_TOKEN" "$W/admin/api/effects/${eff}/redeliver"`, { env });
    assert.match(redeliver.stdout, /"redelivered":true[\s\S]*\n202$/);

    // bulk replay: count first, then the real run (the docs' -d sends no Content-Type header)
    const dry = await sh(one(ops, /deliveries\/replay" -d '\{"status":"dead","dry_run":true\}'/), { env });
    assert.equal(dry.json?.dry_run, true, dry.stdout);
    assert.equal(dry.json.enqueued, 0);
    assert.ok(dry.json.matched >= 1, dry.stdout);
    const real = await sh(one(ops, /deliveries\/replay" -d '\{"status":"dead"\}'/), { env });
    for (const k of ["matched", "enqueued", "reset", "next_cursor"]) assert.ok(k in (real.json ?? {}), `${k} in ${real.stdout}`);
    assert.equal(real.json.enqueued, dry.json.matched);
    // delivery_dead "Do": the outcome is now applied or stale
    const after = await server.until(`${evt} processed again`, async () => {
      const r = await sh(`curl -s -H "Authorization: Bearer $ADMIN_TOKEN" "$W/admin/api/deliveries/${evt}"`, { env });
      return r.json?.processed_at && r.json.outcome !== "dead" ? r.json : null;
    });
    assert.ok(["applied", "stale"].includes(after.outcome), after.outcome);

    // the runbooks' GETs, as named there
    for (const q of [
      "deliveries?status=dead",
      "deliveries?status=received",
      "deliveries?status=ignored",
      `deliveries?resource_id=${inv}&type=invoice.paid`,
      "effects?dispatch=pending",
      `resources/${inv}`,
      "reconcile",
      "alerts",
      "metrics/history?hours=24",
    ]) {
      const r = await sh(`curl -s -w '\\n%{http_code}' -H "Authorization: Bearer $ADMIN_TOKEN" "$W/admin/api/${q}"`, { env });
      assert.match(r.stdout, /\n200$/, `GET /admin/api/${q}: ${r.stdout}`);
    }
    const prom = await sh(`curl -s -H "Authorization: Bearer $ADMIN_TOKEN" "$W/admin/api/metrics?format=prometheus"`, { env });
    assert.match(prom.stdout, /^# TYPE paymos_deliveries gauge$/m);

    // effects_backlog: a fulfilment made by hand awaits its order_ref; pull mode's ack is 409
    // until the transition with the provider's order_ref fills it, then 200
    const inv3 = randomId("inv_");
    const post = (p, body) => sh(`curl -s -w '\\n%{http_code}' -X POST -H "Authorization: Bearer $ADMIN_TOKEN" "$W/admin/api/${p}"${body ? ` -d '${JSON.stringify(body)}'` : ""}`, { env });
    const split = (r) => {
      const i = r.stdout.lastIndexOf("\n");
      return { status: Number(r.stdout.slice(i + 1)), json: JSON.parse(r.stdout.slice(0, i) || "null") };
    };
    assert.deepEqual(split(await post(`resources/${inv3}/transition`, { to: "paid", reason: "paid by hand during outage" })).json, { applied: true, status: "paid" });
    const pending = (await admin(W, "GET", "/effects?dispatch=pending&limit=1000", undefined, env.ADMIN_TOKEN)).json.data.find((e) => e.resource_id === inv3);
    assert.equal(pending.awaiting_order_ref, true);
    const early = split(await post(`effects/${pending.id}/ack`));
    assert.deepEqual([early.status, early.json.error], [409, "awaiting_order_ref"]);
    const filled = split(await post(`resources/${inv3}/transition`, { to: "paid", reason: "order_ref from the provider", order_ref: "order_runbook_1" }));
    assert.deepEqual(filled.json, { applied: false, status: "paid" }, "stale on a paid invoice, yet it fills the order_ref");
    assert.equal(split(await post(`effects/${pending.id}/ack`)).status, 200);

    // reconciliation: now, and a full walk
    const recon = split(await post("reconcile"));
    assert.deepEqual([recon.status, recon.json.ok, recon.json.full], [200, true, false], JSON.stringify(recon));
    const full = split(await post("reconcile", { full: true }));
    assert.deepEqual([full.status, full.json.full], [200, true], JSON.stringify(full));

    // an alert to acknowledge: the */5 cron opens delivery_dead for what is still dead (none
    // here after the replay, so make one) and "POST /admin/api/alerts/{id}/ack" stops it
    await d1(dir, `UPDATE webhook_delivery SET outcome = 'dead', processed_at = received_at, dismissed_at = NULL WHERE event_id = '${evt}'`);
    assert.equal((await sh(one(ops, /cron=\*\/5\+/).replace("http://127.0.0.1:8787", W))).stdout, "Ran scheduled event");
    const alert = await server.until("an open delivery_dead alert", async () => (await admin(W, "GET", "/alerts", undefined, env.ADMIN_TOKEN)).json?.data?.find((a) => a.kind === "delivery_dead" && a.state === "open"));
    assert.deepEqual(split(await post(`alerts/${alert.id}/ack`)).json, { id: alert.id, state: "acknowledged" });

    // database_size: "POST /admin/api/archive {"before":"<ISO-8601>"}", following next_cursor
    const archived = split(await post("archive", { before: new Date().toISOString() }));
    assert.equal(archived.status, 200, JSON.stringify(archived));
    assert.ok("next_cursor" in archived.json);
  } finally {
    await server.stop();
    await sandbox.stop();
    await rm(dir, { recursive: true, force: true });
  }
});

// README / crates/paymos-cli/README.md: `npm run demo`, as typed, with its documented settings
// (docs/configuration.md: PORT, SANDBOX_PORT, ORDERS_PORT, DEMO_LOAD_SECONDS). It builds through
// wrangler dev's [build] and uses the default .wrangler/state.
test("npm run demo: every paymos command against wrangler dev, end to end, exit 0", async () => {
  const env = { PORT: String(await freePort()), SANDBOX_PORT: String(await freePort()), ORDERS_PORT: String(await freePort()), DEMO_LOAD_SECONDS: "1" };
  const r = await sh("npm run demo", { env, timeoutMs: 900000 });
  assert.equal(r.code, 0, (r.stdout + r.stderr).slice(-4000));
  assert.match(r.stdout, /200 in [\d.]+ ms: \{"received":true,"duplicate":false\}/);
  assert.match(r.stdout, /200 in [\d.]+ ms: \{"received":true,"duplicate":true\}/);
  assert.match(r.stdout, /^shipped eff_\w+ kind=fulfilment resource_id=inv_demo\d+ /m);
  assert.match(r.stdout, /^attempt 11\/11 .*connection refused/m);
  assert.match(r.stdout, /^pass: all \d+ steps passed$/m);
  assert.match(r.stdout, /mode duplicate[\s\S]*duplicate:true [1-9]/);
});

// README "Deploying" and docs/deploying.md: `npx wrangler deploy --var …` cannot run offline;
// its closest offline check is the same command with --dry-run (scripts/test.sh's dry run has no
// --var). Each documented deploy command, with --dry-run --outdir appended.
test("every documented `npx wrangler deploy --var …` passes wrangler's offline --dry-run", async () => {
  const commands = [...(await docCommands("README.md")), ...(await docCommands("docs/deploying.md"))].filter((c) => /^npx wrangler deploy /.test(c));
  assert.ok(commands.length >= 3, JSON.stringify(commands));
  const out = await mkdtemp(path.join(tmpdir(), "paymos-dry-"));
  try {
    for (const c of commands) {
      // placeholders filled; the trailing "# https only" comment dropped before appending flags
      const typed = c.replace(/\s+#.*$/, "").replace("<team>", "team").replace("<the application's audience tag>", "aud-tag");
      const r = await sh(`${typed} --dry-run --outdir '${out}'`, { timeoutMs: 600000 });
      assert.equal(r.code, 0, `${typed}\n${(r.stdout + r.stderr).slice(-3000)}`);
      assert.match(r.stdout + r.stderr, /--dry-run: exiting now\./);
      for (const [, name] of typed.matchAll(/--var (\w+):/g)) assert.match(r.stdout + r.stderr, new RegExp(`env\\.${name} `), `${name} bound`);
    }
  } finally {
    await rm(out, { recursive: true, force: true });
  }
});
