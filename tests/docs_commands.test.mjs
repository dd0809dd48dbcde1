// The commands the docs give a user, run as typed (through bash, over HTTP by curl), where no
// other test runs them so: the sandbox and Access stand-ins of .dev.vars.example, the recovery
// runbook's deployed-bucket flow (offline, --local in place of --remote), the simulator's
// command line and the README's before-committing checks. The ones that start `npm start` or
// build through wrangler are in docs_commands_npm_start.test.mjs, which runs alone.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { ROOT, freePort, startWorker } from "./helpers/worker.mjs";
import { admin, deliver, envelope, randomId } from "./helpers/paymos.mjs";
import { background, devVar, docCommands, one, sh } from "./helpers/shell.mjs";

const BIN = process.env.PAYMOS_BIN || path.resolve(ROOT, process.env.CARGO_TARGET_DIR || "target", "release/paymos");

// .dev.vars.example: "`paymos sandbox --port 8790 --api-key sk_test_dev_sandbox` serves the
// provider API locally". Without the key (as the line read before) the sandbox answered the
// receiver's reconciliation with 401: its default key is not .dev.vars's PAYMOS_API_KEY.
test(".dev.vars.example's sandbox command, as written, answers the receiver's reconciliation with .dev.vars's key", async () => {
  assert.ok(existsSync(BIN), `${BIN} is missing`);
  const example = await readFile(path.join(ROOT, ".dev.vars.example"), "utf8");
  const typed = example.match(/`(paymos sandbox [^`]*)`/)?.[1];
  assert.ok(typed, "the example names the sandbox command");
  const port = await freePort();
  const sandbox = await background(`'${BIN}' ${typed.slice("paymos ".length).replace(/--port \d+/, `--port ${port}`)}`, /listening on (http:\/\/127\.0\.0\.1:\d+)/);
  const w = await startWorker({ vars: { PAYMOS_API_BASE: sandbox.match[1], PAYMOS_API_KEY: await devVar("PAYMOS_API_KEY", ".dev.vars.example") } });
  try {
    const r = await admin(w.url, "POST", "/reconcile");
    assert.equal(r.status, 200, `reconciliation against the sandbox as .dev.vars.example starts it: ${JSON.stringify(r.json)}`);
    assert.equal(r.json.ok, true);
  } finally {
    await w.close();
    await sandbox.stop();
  }
});

// docs/deploying.md (and .dev.vars.example): `node tests/helpers/access.mjs --port 8792 --aud
// dev-access-aud` stands in for the team's keys and prints a token and a curl to send (to the
// worker `--worker` names); that curl, run by curl, is admitted as the operator. The worker is
// the harness's, with the two lines .dev.vars.example says to uncomment.
test("deploying.md: the local Access stand-in, as typed, and the curl it prints admit the operator through /admin/api/whoami", async () => {
  const deploying = await readFile(path.join(ROOT, "docs/deploying.md"), "utf8");
  const typed = deploying.match(/`(node tests\/helpers\/access\.mjs [^`]*)`/)?.[1];
  assert.ok(typed);
  const [port, workerPort] = [await freePort(), await freePort()];
  const worker = `http://127.0.0.1:${workerPort}`;
  const stub = await background(`${typed.replace(/--port \d+/, `--port ${port}`)} --worker ${worker}`, /^(curl .*)$/m);
  const aud = typed.match(/--aud (\S+)/)[1];
  const w = await startWorker({ port: workerPort, vars: { ACCESS_TEAM_DOMAIN: `http://127.0.0.1:${port}`, ACCESS_AUD: aud } });
  try {
    assert.equal(w.url, worker);
    const r = await sh(`${stub.match[1]} -s`);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.json, { actor: "operator@example.com", service_token: false, via: "access_header" });
  } finally {
    await w.close();
    await stub.stop();
  }
});

// docs/recovery.md, "Against the deployed bucket and database": not runnable offline as typed
// (--remote). Its closest offline run: the same commands with --local --persist-to in place of
// --remote, so `wrangler r2 object get` downloads the day's object from the local bucket, then
// `rebuild-from-archive.mjs --from-dir` and `wrangler d1 execute --file`; then again with
// --with-bodies. (The --local flow is tests/archive.test.mjs's.)
test("recovery.md's deployed-bucket flow, offline: r2 object get → rebuild --from-dir → d1 execute; then --with-bodies", async () => {
  const rec = await docCommands("docs/recovery.md");
  const get = one(rec, /r2 object get .* --remote /);
  const rebuild = one(rec, /rebuild-from-archive\.mjs .*--from-dir/);
  const execute = one(rec, /d1 execute DB --remote --file rebuild\.sql/);
  const dir = await mkdtemp(path.join(tmpdir(), "paymos-fromdir-"));
  const sql = path.join(dir, "rebuild.sql");
  try {
    let sent;
    let key;
    {
      const x = await startWorker({ persistDir: dir });
      try {
        sent = [];
        for (let i = 0; i < 3; i++) {
          const e = envelope("invoice.paid", randomId("inv_"));
          assert.equal((await deliver(x.url, e)).status, 200);
          sent.push(e);
        }
        for (const e of sent) await x.processed(e.event_id);
        assert.equal((await admin(x.url, "POST", "/archive", { before: new Date().toISOString() })).status, 200);
        key = (await admin(x.url, "GET", `/deliveries/${sent[0].event_id}`)).json.archive_key;
        assert.match(key ?? "", /^deliveries\/\d{4}\/\d{2}\/\d{2}\/[^/]+\.ndjson\.gz$/);
        for (const e of sent) await x.db.prepare("DELETE FROM webhook_delivery WHERE event_id = ?").bind(e.event_id).run();
      } finally {
        await x.close();
      }
    }
    const [, y, m, d, name] = key.match(/^deliveries\/(\d{4})\/(\d{2})\/(\d{2})\/(.+)$/);
    const day = `${y}-${m}-${d}`;
    const dayDir = path.join(dir, day);
    await mkdir(dayDir);
    const local = (c) =>
      c
        .replaceAll("2026/01/01", `${y}/${m}/${d}`)
        .replaceAll("2026-01-01", day)
        .replaceAll("<name>", name.replace(/\.ndjson\.gz$/, ""))
        .replaceAll(`./${day}`, dayDir)
        .replaceAll("rebuild.sql", sql)
        .replace("--remote", `--local --persist-to '${dir}'`);
    for (const withBodies of [false, true]) {
      const g = await sh(local(get));
      assert.equal(g.code, 0, g.stdout + g.stderr);
      const r = await sh(local(rebuild) + (withBodies ? " --with-bodies" : ""));
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stderr, new RegExp(`1 objects, 3 lines, 3 deliveries of ${day}`));
      const e = await sh(local(execute));
      assert.equal(e.code, 0, e.stdout + e.stderr);
      const z = await startWorker({ persistDir: dir });
      try {
        for (const s of sent) {
          // read as an operator reads it: GET /admin/api/deliveries/{event_id}
          const row = (await admin(z.url, "GET", `/deliveries/${s.event_id}`)).json;
          assert.equal(row?.outcome, "applied", `${s.event_id} is back`);
          assert.deepEqual(row.body, s, "its body, from D1 or read back from its object");
          if (withBodies) assert.deepEqual([row.archived, row.archive_key], [false, null], "--with-bodies: the body back in D1");
          else assert.deepEqual([row.archived, row.archive_key], [true, key], "slim, pointing to its object");
        }
        assert.deepEqual((await deliver(z.url, sent[0])).json, { received: true, duplicate: true }, "the dedupe answers for it again");
        // lose them again for the --with-bodies round
        for (const s of sent) await z.db.prepare("DELETE FROM webhook_delivery WHERE event_id = ?").bind(s.event_id).run();
      } finally {
        await z.close();
      }
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

// README / crates/paymos-sim/README.md: `npm run sim -- …` (the simulator's command line;
// `cargo test -p paymos-sim` runs its library). With the native builds' profile (scripts/test.sh
// turns LTO off for them), so that it links against what npm test already built.
test("npm run sim: a range of seeds from --from, and one seed replayed with --trace", async () => {
  const env = { CARGO_PROFILE_RELEASE_LTO: "false" };
  const range = await sh("npm run sim -- --seeds 50 --from 20000", { env, timeoutMs: 900000 });
  assert.equal(range.code, 0, range.stdout.slice(-2000) + range.stderr.slice(-2000));
  assert.match(range.stdout + range.stderr, /^ok: no invariant violated$/m);
  const trace = await sh("npm run sim -- --seed 42 --trace", { env, timeoutMs: 900000 });
  assert.equal(trace.code, 0, trace.stderr.slice(-2000));
  assert.match(trace.stdout + trace.stderr, /^seed 42: \d+ steps, \d+ deliveries, /m);
  assert.match(trace.stdout + trace.stderr, /— quiescent: final checks —/);
});

// README "Before committing": `cargo fmt` (checked without changing files: --check) and
// `cargo clippy -p paymos-core`. The wasm's clippy (3 minutes cold) is left to the developer.
test("README's before-committing commands: cargo fmt leaves nothing to change, clippy of the core has no warning", async () => {
  const fmt = await sh("cargo fmt --check");
  assert.equal(fmt.code, 0, fmt.stdout + fmt.stderr);
  const clippy = await sh("cargo clippy -p paymos-core", { timeoutMs: 600000 });
  assert.equal(clippy.code, 0, clippy.stderr.slice(-3000));
  assert.doesNotMatch(clippy.stderr, /^(warning|error)/m, clippy.stderr.slice(-3000));
});
