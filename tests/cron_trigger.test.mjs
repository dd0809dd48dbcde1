// The cron trigger as an operator fires it: `npm start` as typed (scripts/start.sh, so wrangler
// dev with [assets] and --test-scheduled, on its own port and its own STATE_DIR), then the curl
// command that start.sh prints and the README shows, run by curl itself. The other tests call
// Miniflare's scheduled() directly, which reaches the Worker by another way: a trigger path that
// answers 500 `exception` under wrangler dev (as /cdn-cgi/handler/scheduled does for a Worker
// with assets in wrangler 4.86, workers-sdk#9882) passed all of them; this one fails on it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { ROOT, freePort } from "./helpers/worker.mjs";
import { d1, npmStart } from "./helpers/shell.mjs";
import { envelope, randomId } from "./helpers/paymos.mjs";

const run = promisify(execFile);
const quote = (s) => `'${String(s).replaceAll("'", "''")}'`;

test("npm start, then the README's curl cron trigger: the sweeper runs and re-enqueues an old unprocessed delivery", async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "paymos-cron-"));
  const port = await freePort();
  const inspectorPort = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const server = npmStart(port, dir, ["--inspector-port", inspectorPort]);
  try {
    // the command start.sh prints for this port, and the README's for the default one: the same
    const printed = await server.until("start.sh to print the cron trigger", () => server.state.out.match(/cron triggers: (curl '[^']+')/)?.[1], 120000, 200);
    // whatever path is documented, it is this server's, for the sweeper's cron; what it does is
    // checked below (so a path that does not reach the Worker fails there, not here)
    assert.match(printed, new RegExp(`^curl '${url}/[^' ]+\\?cron=\\*/5\\+\\*\\+\\*\\+\\*\\+\\*'$`));
    const readme = await readFile(path.join(ROOT, "README.md"), "utf8");
    assert.ok(readme.includes(printed.replace(url, "http://127.0.0.1:8787")), `README.md shows ${printed} for port 8787`);

    // wrangler dev builds the worker first (scripts/build.sh through [build]), then serves
    await server.until(
      "the receiver to serve /healthz",
      async () => {
        try {
          return (await fetch(`${url}/healthz`)).status === 200;
        } catch {
          return false;
        }
      },
      540000,
      1000,
    );
    // start.sh persisted to STATE_DIR, not to the developer's .wrangler/state
    assert.ok(existsSync(path.join(dir, "v3", "d1")), "the local D1 lives under STATE_DIR");

    // A delivery whose enqueue was lost 10 minutes ago: the row as the receiver commits it, with
    // no queue message (the receiver's INSERT_DELIVERY columns; older received_at/enqueued_at).
    // Its livemode matches the mode that .dev.vars gives `npm start`, so it is applied.
    const devVars = await readFile(path.join(ROOT, ".dev.vars"), "utf8");
    const live = /^PAYMOS_MODE="?live"?\s*$/m.test(devVars);
    const inv = randomId("inv_");
    const env = { ...envelope("invoice.paid", inv), livemode: live };
    const tenMinutesAgo = "strftime('%Y-%m-%dT%H:%M:%fZ','now','-10 minutes')";
    await d1(
      dir,
      `INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, received_at, enqueued_at) VALUES (${quote(env.event_id)}, ${quote(inv)}, ${quote(env.type)}, ${quote(JSON.stringify(env))}, ${tenMinutesAgo}, ${tenMinutesAgo})`,
    );
    const select = `SELECT processed_at, outcome FROM webhook_delivery WHERE event_id = ${quote(env.event_id)}`;
    await new Promise((r) => setTimeout(r, 1500));
    assert.deepEqual(await d1(dir, select), [{ processed_at: null, outcome: null }], "nothing processes it before the trigger");
    assert.equal(server.state.logs.filter((l) => l.stage === "sweep").length, 0, "no sweep before the trigger (wrangler dev fires no cron by itself)");

    // the operator's command, run by curl as typed
    const { stdout } = await run("bash", ["-c", printed], { cwd: ROOT });
    assert.equal(stdout, "Ran scheduled event", `the trigger's reply (the whole output so far:\n${server.state.out.slice(-3000)})`);

    const sweep = await server.until("the sweeper's log line", () => server.state.logs.find((l) => l.stage === "sweep"), 30000, 100);
    assert.deepEqual(sweep, { stage: "sweep", event_id: "-", outcome: "requeued 1" });
    const row = await server.until(
      `${env.event_id} to be processed`,
      async () => {
        const [r] = await d1(dir, select);
        return r?.processed_at ? r : null;
      },
      60000,
      1000,
    );
    assert.equal(row.outcome, "applied");
    assert.ok(server.state.logs.some((l) => l.stage === "consume" && l.event_id === env.event_id && l.outcome === "applied"));
    const effects = await d1(dir, `SELECT kind FROM effect WHERE resource_id = ${quote(inv)}`);
    assert.deepEqual(effects, [{ kind: "fulfilment" }], "the swept delivery fulfilled its invoice once");
  } finally {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  }
});
