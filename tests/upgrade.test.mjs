// Upgrading a database that older releases wrote (docs/deploying.md, "Migrations"): the
// state is made with the real wrangler from a prefix of migrations/, filled as those releases
// left their rows, and then the current migrations are applied as a user applies them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { startWorker, ROOT, eventually } from "./helpers/worker.mjs";
import { sh, d1, docCommands, one } from "./helpers/shell.mjs";

const WRANGLER = path.join(ROOT, "node_modules/.bin/wrangler");

/** A project whose migrations are `names` (file name → SQL text), to apply them as wrangler does. */
async function project(names) {
  const dir = await mkdtemp(path.join(tmpdir(), "paymos-upgrade-"));
  await mkdir(path.join(dir, "migrations"));
  await cp(path.join(ROOT, "wrangler.toml"), path.join(dir, "wrangler.toml"));
  for (const [name, sql] of Object.entries(names)) await writeFile(path.join(dir, "migrations", name), sql);
  return dir;
}

const migrations = async () => (await readdir(path.join(ROOT, "migrations"))).filter((f) => f.endsWith(".sql")).sort();
const text = (name) => readFile(path.join(ROOT, "migrations", name), "utf8");

/** `wrangler d1 migrations apply DB --local --persist-to state`, in `cwd`'s project. */
const apply = (cwd, state) => sh(`'${WRANGLER}' d1 migrations apply DB --local --persist-to '${state}'`, { cwd, env: { CI: "true" } });

test("a fulfilment whose invoice was refunded before refunds cancelled it is never sent after the upgrade", async () => {
  const all = await migrations();
  const before = Object.fromEntries(await Promise.all(all.filter((n) => n < "0021").map(async (n) => [n, await text(n)])));
  const old = await project(before);
  const state = await mkdtemp(path.join(tmpdir(), "paymos-upgrade-state-"));
  const posted = [];
  const orders = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      posted.push(JSON.parse(body));
      res.writeHead(200).end("{}");
    });
  });
  await new Promise((r) => orders.listen(0, "127.0.0.1", r));
  try {
    assert.equal((await apply(old, state)).code, 0);
    // as a release before 0006 left them: the refund recorded its revocation and left the
    // fulfilment pending; a second invoice paid and not refunded, its fulfilment pending too
    await d1(
      state,
      `INSERT INTO resource (id, kind, status, order_ref) VALUES ('inv_refundedold', 'invoice', 'refunded', 'order_1'), ('inv_paidold', 'invoice', 'paid', 'order_2');
       INSERT INTO effect (resource_id, kind, license_code, order_ref, cause, effect_id, dispatch) VALUES
         ('inv_refundedold', 'fulfilment', 'CODE-1', 'order_1', 'evt_paidold', 'eff_oldfulfilment', 'pending'),
         ('inv_refundedold', 'revocation', NULL, 'order_1', 'evt_refundold', 'eff_oldrevocation', 'pending'),
         ('inv_paidold', 'fulfilment', 'CODE-2', 'order_2', 'evt_paidold2', 'eff_paidfulfilment', 'pending');`,
    );
    const cancelledBefore = (await d1(state, "SELECT effects_cancelled AS n FROM tally"))[0].n;
    // the upgrade, as a user applies it
    const up = await sh(`'${WRANGLER}' d1 migrations apply DB --local --persist-to '${state}'`, { env: { CI: "true" } });
    assert.equal(up.code, 0, up.stdout + up.stderr);
    const rows = await d1(state, "SELECT effect_id, dispatch, cancelled_at FROM effect ORDER BY effect_id");
    assert.deepEqual(
      rows.map((r) => [r.effect_id, r.dispatch, r.cancelled_at !== null]),
      [
        ["eff_oldfulfilment", "cancelled", true],
        ["eff_oldrevocation", "pending", false],
        ["eff_paidfulfilment", "pending", false],
      ],
    );
    assert.equal((await d1(state, "SELECT effects_cancelled AS n FROM tally"))[0].n, cancelledBefore + 1);
    // the current worker's effects sweeper sends what is pending: the revocation and the
    // other invoice's fulfilment, never the cancelled one
    const w = await startWorker({
      persistDir: state,
      vars: { ORDER_SYSTEM_URL: `http://127.0.0.1:${orders.address().port}/orders`, ORDER_SYSTEM_SECRET: `whsec_${Buffer.from("o".repeat(32)).toString("base64")}`, SWEEP_AFTER_SECONDS: "0" },
    });
    try {
      await w.scheduled("*/5 * * * *");
      await eventually(`the pending effects sent (${JSON.stringify(posted.map((p) => p.id))}, ${JSON.stringify(w.logs.filter((l) => /dispatch|sweep_effects/.test(l.stage)))})`, () => posted.length >= 2, 30000);
      await new Promise((r) => setTimeout(r, 1500));
      assert.deepEqual(posted.map((p) => p.id).sort(), ["eff_oldrevocation", "eff_paidfulfilment"]);
      const m = (await (await fetch(`${w.url}/admin/api/metrics`, { headers: { authorization: "Bearer test-admin-token-0123456789" } })).json());
      assert.equal(m.effects?.by_dispatch?.cancelled, cancelledBefore + 1, JSON.stringify(m));
    } finally {
      await w.close();
    }
  } finally {
    orders.close();
    await rm(old, { recursive: true, force: true });
    await rm(state, { recursive: true, force: true });
  }
});

test("deploying.md: a database that recorded the archive's migration as 0008_archive.sql is repaired as typed (--local)", async () => {
  const all = await migrations();
  // main between 33b3047 and ca2e79d: 0001-0007, then the archive's migration under 0008
  const early = Object.fromEntries(await Promise.all(all.filter((n) => n < "0008").map(async (n) => [n, await text(n)])));
  early["0008_archive.sql"] = await text("0011_archive.sql");
  const old = await project(early);
  const state = await mkdtemp(path.join(tmpdir(), "paymos-upgrade-state-"));
  try {
    assert.equal((await apply(old, state)).code, 0);
    const failed = await apply(ROOT, state);
    assert.notEqual(failed.code, 0);
    assert.match(failed.stdout + failed.stderr, /0011_archive\.sql[\s\S]*duplicate column name: archived_at/);
    const deploying = await docCommands("docs/deploying.md");
    const local = (c) => c.replace("--remote", `--local --persist-to '${state}'`);
    const rename = one(deploying, /d1 execute DB --remote --command "UPDATE d1_migrations/);
    const r = await sh(local(rename).replace(/^npx wrangler/, `'${WRANGLER}'`), { env: { CI: "true" } });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const applied = await apply(ROOT, state);
    assert.equal(applied.code, 0, applied.stdout + applied.stderr);
    const names = (await d1(state, "SELECT name FROM d1_migrations ORDER BY name")).map((x) => x.name);
    assert.deepEqual(names, all);
    // the upgraded database serves
    const w = await startWorker({ persistDir: state });
    try {
      assert.equal((await fetch(`${w.url}/admin/api/metrics`, { headers: { authorization: "Bearer test-admin-token-0123456789" } })).status, 200);
    } finally {
      await w.close();
    }
  } finally {
    await rm(old, { recursive: true, force: true });
    await rm(state, { recursive: true, force: true });
  }
});
