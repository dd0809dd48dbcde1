// The operators' page at /admin (Workers Static Assets from public/, not the Worker), driven in
// headless Chromium (Debian's /usr/bin/chromium through playwright-core) against the built
// worker in Miniflare: the API-off notice, sign-in, the delivery archive with
// filters and cursor paging past 100 rows, a resource's history and effects, replaying a dead
// delivery, reconciliation against a stub provider API, escaping of hostile values, the
// security headers, phone width. Screenshots go to tests/artifacts/admin_page/ (git-ignored).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { mkdir, readFile } from "node:fs/promises";
import path from "node:path";
import { chromium } from "playwright-core";
import { startWorker, eventually, ADMIN_TOKEN, ROOT } from "./helpers/worker.mjs";
import { deliver, envelope, randomId, admin } from "./helpers/paymos.mjs";

const CHROMIUM = "/usr/bin/chromium";
const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
const ARTIFACTS = path.join(ROOT, "tests/artifacts/admin_page");
const PAID_COUNT = 120;
const HOSTILE = "<script>alert(1)</script>";
const HOSTILE_RESOURCE = `inv_<img src=x onerror=alert(2)>${HOSTILE}`;
const HOSTILE_ERROR = `<img src=x onerror=alert(3)>`;

let w;
let provider;
let providerRequests = [];
let providerInvoices = [];
let browser;
let context;
let page;
const dialogs = [];
const pageErrors = [];
const cspViolations = [];
const foreignRequests = [];
const seeded = {};

/** A stub of the provider API (contract §6) on a free loopback port. */
async function startProvider() {
  const server = http.createServer((req, res) => {
    providerRequests.push({ url: req.url, authorization: req.headers.authorization });
    if (req.method === "GET" && req.url.startsWith("/v1/invoices")) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ data: providerInvoices, has_more: false }));
    } else {
      res.writeHead(404, { "content-type": "application/json" });
      res.end('{"error":"not_found"}');
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) };
}

async function mustDeliver(env) {
  const res = await deliver(w.url, env);
  assert.equal(res.status, 200, `delivery of ${env.type} answered ${res.status} ${res.text}`);
  return env;
}

async function allProcessed() {
  await eventually(
    "every delivery to be processed",
    async () => (await w.db.prepare("SELECT count(*) AS n FROM webhook_delivery WHERE processed_at IS NULL").first()).n === 0,
    60000,
    200,
  );
}

async function insertRow({ eventId, resourceId, type, body, processedAt = null, outcome = null, attempts = 0, lastError = null }) {
  await w.db
    .prepare(
      "INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, processed_at, outcome, attempts, last_error) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(eventId, resourceId, type, body, processedAt, outcome, attempts, lastError)
    .run();
}

const rowIds = () => page.locator("#delivery-rows tr[data-event-id]").evaluateAll((trs) => trs.map((t) => t.dataset.eventId));
const summary = () => page.locator("#list-summary").textContent();
const shot = (name, fullPage = false) => page.screenshot({ path: path.join(ARTIFACTS, name), fullPage });

/** Elements sticking out past the right edge of the viewport (for assertion messages). */
async function overflowing() {
  return page.evaluate(() => {
    const w = document.documentElement.clientWidth;
    const out = [];
    for (const e of document.querySelectorAll("body *:not(.visually-hidden, .visually-hidden *, thead, thead *)")) {
      const r = e.getBoundingClientRect();
      if (r.width > 0 && r.right > w + 0.5) out.push(`${e.tagName.toLowerCase()}${e.id ? "#" + e.id : ""}.${e.className} right=${Math.round(r.right)}`);
    }
    return { scrollWidth: document.documentElement.scrollWidth, out: out.slice(0, 8) };
  });
}

async function assertNoOverflow(width) {
  const o = await overflowing();
  assert.ok(o.scrollWidth <= width && o.out.length === 0, `horizontal overflow at ${width}px: ${JSON.stringify(o)}`);
}

async function waitForList() {
  await page.waitForFunction(() => !document.getElementById("delivery-table").hasAttribute("aria-busy"));
}

async function applyFilters({ type = "", resource = "", status = "" } = {}) {
  await page.fill("#f-type", type);
  await page.fill("#f-resource", resource);
  await page.selectOption("#f-status", status);
  await page.click("#filters button[type=submit]");
  await waitForList();
}

before(async () => {
  await mkdir(ARTIFACTS, { recursive: true });

  // the provider stub answers with providerInvoices, filled in once the archive is seeded
  seeded.reconMissing = randomId("inv_");
  provider = await startProvider();
  w = await startWorker({ vars: { PAYMOS_API_BASE: provider.url } });

  // 120 real invoice.paid deliveries through the signed endpoint and the queue
  seeded.paid = [];
  for (let i = 0; i < PAID_COUNT; i += 10) {
    const batch = [];
    for (let j = i; j < Math.min(i + 10, PAID_COUNT); j++) batch.push(mustDeliver(envelope("invoice.paid", randomId("inv_"))));
    seeded.paid.push(...(await Promise.all(batch)));
  }
  await allProcessed();

  // one invoice paid then refunded: fulfilment and revocation; a withdrawal and a deposit
  seeded.refundInv = randomId("inv_");
  await mustDeliver(envelope("invoice.confirming", seeded.refundInv));
  await allProcessed();
  await mustDeliver(envelope("invoice.paid", seeded.refundInv));
  await allProcessed();
  await mustDeliver(envelope("invoice.refunded", seeded.refundInv));
  seeded.withdrawal = randomId("wdr_");
  await mustDeliver(envelope("withdrawal.completed", seeded.withdrawal, { data: { amount: "250.00", currency: "USDT" } }));
  seeded.deposit = randomId("pcd_");
  await mustDeliver(envelope("deposit.confirmed", seeded.deposit, { data: { amount: "75.50", currency: "USDT" } }));
  // a duplicate paid for the refunded invoice under another endpoint's id: the guard refuses it
  seeded.stale = await mustDeliver(envelope("invoice.paid", seeded.refundInv));
  await allProcessed();

  // a dead delivery (every consumer attempt failed) whose body is valid: a replay applies it
  seeded.deadInv = randomId("inv_");
  seeded.dead = envelope("invoice.paid", seeded.deadInv);
  await insertRow({
    eventId: seeded.dead.event_id,
    resourceId: seeded.deadInv,
    type: "invoice.paid",
    body: JSON.stringify(seeded.dead),
    processedAt: new Date().toISOString(),
    outcome: "dead",
    attempts: 5,
    lastError: "d1_error: simulated outage",
  });
  // hostile strings in every displayed field a sender or a bad row could control
  seeded.hostileId = randomId("evt_");
  await insertRow({
    eventId: seeded.hostileId,
    resourceId: HOSTILE_RESOURCE,
    type: HOSTILE,
    body: "{}",
    processedAt: new Date().toISOString(),
    outcome: "ignored",
    attempts: 1,
    lastError: HOSTILE_ERROR,
  });

  // the provider reports one invoice we have a delivery for, and one we never heard of
  const known = seeded.paid[0].data;
  providerInvoices = [
    { id: known.id, object: "invoice", status: "paid", amount: known.amount, currency: known.currency, order_ref: known.order_ref, paid_at: 1764449990 },
    { id: seeded.reconMissing, object: "invoice", status: "paid", amount: "19.00", currency: "USDT", order_ref: "order_recon_1", paid_at: 1764449990 },
  ];

  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.on("dialog", (d) => {
    dialogs.push(d.message());
    d.dismiss().catch(() => {});
  });
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  page.on("console", (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) cspViolations.push(m.text());
  });
  page.on("request", (r) => {
    if (!r.url().startsWith(w.url) && !r.url().startsWith("data:")) foreignRequests.push(r.url());
  });
});

after(async () => {
  await browser?.close();
  await w?.close();
  await provider?.close();
});

const SECURITY_HEADERS = {
  "content-security-policy": CSP,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
  "permissions-policy": "camera=(), microphone=(), geolocation=(), payment=()",
};

function assertSecurityHeaders(res, p) {
  for (const [k, v] of Object.entries(SECURITY_HEADERS)) assert.equal(res.headers.get(k), v, `${p}: ${k}`);
}

test("the page is static assets (public/, not the wasm) with strict security headers from public/_headers", async () => {
  for (const [p, type] of [
    ["/admin", "text/html; charset=utf-8"],
    ["/admin/admin.css", "text/css; charset=utf-8"],
    ["/admin/admin.js", "text/javascript; charset=utf-8"],
    ["/admin/machine.json", "application/json"],
  ]) {
    const res = await fetch(`${w.url}${p}`);
    assert.equal(res.status, 200, p);
    assert.equal(res.headers.get("content-type"), type, p);
    assertSecurityHeaders(res, p);
    // served by Workers Static Assets: an ETag, revalidated on every load (a deploy is seen at once)
    assert.match(res.headers.get("etag") ?? "", /^"[0-9a-f]+"$/, `${p}: etag`);
    assert.match(res.headers.get("cache-control") ?? "", /max-age=0, must-revalidate/, p);
    assert.equal(res.headers.get("set-cookie"), null, p);
    await res.arrayBuffer();
  }
  // the wasm holds none of it: the Worker's own routes end at /admin/api
  const wasm = await readFile(path.join(ROOT, "build/index_bg.wasm"));
  for (const marker of ["Skip to content", "paymos-admin-token", "table.data"]) {
    assert.equal(wasm.includes(Buffer.from(marker)), false, `the wasm does not carry "${marker}"`);
  }
  // /admin/ and /admin/index.html redirect to /admin (html_handling = "drop-trailing-slash")
  for (const p of ["/admin/", "/admin/index.html"]) {
    const res = await fetch(`${w.url}${p}`, { redirect: "manual" });
    assert.equal(res.status, 307, p);
    assert.equal(res.headers.get("location"), "/admin", p);
    await res.arrayBuffer();
  }
  // the event types and states come from the core (scripts/build.sh writes machine.json)
  const machine = await (await fetch(`${w.url}/admin/machine.json`)).json();
  assert.ok(machine.event_types.includes("invoice.paid") && machine.event_types.includes("deposit.failed"));
  assert.deepEqual(machine.states.withdrawal, ["created", "processing", "completed", "failed"]);
  const html = await (await fetch(`${w.url}/admin`)).text();
  assert.ok(!html.includes("invoice.partially_paid"), "no event type typed out in the HTML");
  // no data, no token, no inline script, style or handler; nothing from other origins
  assert.ok(!html.includes("evt_") && !html.includes(ADMIN_TOKEN), "the shell carries no data");
  assert.doesNotMatch(html, /<script(?![^>]*\ssrc=)[^>]*>/i, "no inline script");
  assert.doesNotMatch(html, /<style|\sstyle=/i, "no inline style");
  assert.doesNotMatch(html, /\son[a-z]+=/i, "no inline event handler");
  assert.doesNotMatch(html, /(src|href)="(https?:)?\/\//i, "nothing from another origin");
  const js = await (await fetch(`${w.url}/admin/admin.js`)).text();
  assert.ok(!js.includes("innerHTML") && !js.includes("insertAdjacentHTML") && !js.includes("eval("), "the script never parses data as markup");

  const head = await fetch(`${w.url}/admin`, { method: "HEAD" });
  assert.equal(head.status, 200);
  assert.equal(head.headers.get("content-security-policy"), CSP);
  // the _headers file itself is not served; an unknown path under /admin reaches the Worker: 404
  for (const p of ["/_headers", "/admin/nope"]) {
    const res = await fetch(`${w.url}${p}`);
    assert.equal(res.status, 404, p);
    await res.arrayBuffer();
  }
  const post = await fetch(`${w.url}/admin`, { method: "POST" });
  assert.equal(post.status, 405);
  await post.arrayBuffer();
  // the API behind it still wants the token, and is never cached
  const unauth = await fetch(`${w.url}/admin/api/deliveries`);
  assert.equal(unauth.status, 401);
  assert.equal(unauth.headers.get("cache-control"), "no-store");
  // a cross-site write is refused even with the token
  const cross = await fetch(`${w.url}/admin/api/reconcile`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "sec-fetch-site": "cross-site" },
  });
  assert.equal(cross.status, 403);
});

test("with ADMIN_TOKEN unset (empty) the static page says the API is off, and every API call is 404", async () => {
  const off = await startWorker({ vars: { ADMIN_TOKEN: "" } });
  const offPage = await context.newPage();
  try {
    for (const p of ["/admin/api/deliveries", "/admin/api/metrics", "/admin/api/resources/inv_x"]) {
      for (const auth of ["Bearer ", `Bearer ${ADMIN_TOKEN}`]) {
        const res = await fetch(`${off.url}${p}`, { headers: { authorization: auth } });
        assert.equal(res.status, 404, p);
        await res.arrayBuffer();
      }
    }
    // the shell is a static file: served, with its headers, and empty
    const res = await fetch(`${off.url}/admin`);
    assert.equal(res.status, 200);
    assertSecurityHeaders(res, "/admin");
    await res.arrayBuffer();
    await offPage.goto(`${off.url}/admin`);
    await offPage.waitForSelector("#api-off:not([hidden])");
    assert.equal(await offPage.locator("#api-off-title").textContent(), "The admin API is off (ADMIN_TOKEN unset)");
    assert.equal(await offPage.isVisible("#sign-in"), false);
    assert.equal(await offPage.isVisible("#app"), false);
    await offPage.screenshot({ path: path.join(ARTIFACTS, "desktop-api-off.png") });
    // a token kept from before (the secret was removed since) changes nothing
    await offPage.evaluate((t) => sessionStorage.setItem("paymos-admin-token", t), ADMIN_TOKEN);
    await offPage.click("#api-off-retry");
    await offPage.waitForSelector("#api-off:not([hidden])");
    assert.equal(await offPage.isVisible("#app"), false);
  } finally {
    await offPage.close();
    await off.close();
  }
});

test("sign-in: a wrong token is refused, the right one is kept in sessionStorage only", async () => {
  await page.goto(`${w.url}/admin`);
  await page.waitForSelector("#sign-in:not([hidden])");
  await shot("desktop-sign-in.png");
  await page.fill("#token", "not-the-token");
  await page.click("#sign-in-form button[type=submit]");
  await page.waitForFunction(() => /not accepted/.test(document.getElementById("sign-in-message").textContent));
  assert.equal(await page.isVisible("#app"), false);

  await page.fill("#token", ADMIN_TOKEN);
  await page.click("#sign-in-form button[type=submit]");
  await page.waitForSelector("#app:not([hidden])");
  await waitForList();
  const storage = await page.evaluate(() => ({
    session: sessionStorage.getItem("paymos-admin-token"),
    local: localStorage.length,
    cookie: document.cookie,
  }));
  assert.deepEqual(storage, { session: ADMIN_TOKEN, local: 0, cookie: "" });
  assert.equal(await page.inputValue("#token"), "", "the token field is cleared");
});

test("deliveries are listed newest first, hostile values render as text", async () => {
  const ids = await rowIds();
  assert.equal(ids.length, 50, "the default page is 50 rows");
  const api = await admin(w.url, "GET", "/deliveries?limit=50");
  assert.deepEqual(ids, api.json.data.map((d) => d.event_id), "same order as the API: newest first");
  assert.equal(ids[0], seeded.hostileId, "the newest row first");

  const hostileRow = page.locator(`#delivery-rows tr[data-event-id="${seeded.hostileId}"]`);
  assert.equal(await hostileRow.locator('td[data-label="Type"]').textContent(), HOSTILE);
  assert.equal(await hostileRow.locator('td[data-label="Resource"] button').textContent(), HOSTILE_RESOURCE);
  assert.equal(await hostileRow.locator('td[data-label="Last error"]').textContent(), HOSTILE_ERROR);
  assert.equal(await page.locator("#delivery-rows script, #delivery-rows img").count(), 0, "no element was created from data");

  // a seeded real row shows its times, status and attempts
  const real = page.locator(`#delivery-rows tr[data-event-id="${seeded.stale.event_id}"]`);
  assert.match(await real.locator('td[data-label="Received"]').textContent(), /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
  assert.match(await real.locator('td[data-label="Processed"]').textContent(), /UTC$/);
  assert.match(await real.locator('td[data-label="Status"]').textContent(), /stale/);

  // the dead delivery stands out by colour and by a text label
  const dead = page.locator(`#delivery-rows tr[data-event-id="${seeded.dead.event_id}"]`);
  assert.match(await dead.getAttribute("class"), /row-dead/);
  assert.match(await dead.locator('td[data-label="Status"]').textContent(), /DEAD/);
  assert.equal(await dead.locator('td[data-label="Attempts"]').textContent(), "5");
  assert.equal(await dead.locator('td[data-label="Last error"]').textContent(), "d1_error: simulated outage");
  const bg = await dead.evaluate((tr) => getComputedStyle(tr).backgroundColor);
  assert.notEqual(bg, "rgba(0, 0, 0, 0)", "the dead row is tinted");

  // opening the hostile resource: a 404 rendered as text
  await hostileRow.locator('td[data-label="Resource"] button').click();
  await page.waitForSelector("#resource:not([hidden])");
  assert.equal(await page.locator("#resource-title").textContent(), `Resource ${HOSTILE_RESOURCE}`);
  assert.match(await page.locator("#resource-facts").textContent(), /no state recorded/);
  await page.click("#resource-close");
  const fits = await page.evaluate(() => {
    const wrap = document.querySelector("#deliveries .table-wrap");
    return { scroll: wrap.scrollWidth, client: wrap.clientWidth };
  });
  assert.ok(fits.scroll <= fits.client, `the table fits 1280px without scrolling (${fits.scroll} > ${fits.client})`);
  await shot("desktop-deliveries.png");
  assert.deepEqual(dialogs, [], "no dialog fired");
});

test("filters: by event type, by status dead, by resource", async () => {
  await applyFilters({ type: "invoice.refunded" });
  let ids = await rowIds();
  assert.equal(ids.length, 1);
  assert.match(await summary(), /filtered by type invoice\.refunded/);

  await applyFilters({ status: "dead" });
  ids = await rowIds();
  assert.deepEqual(ids, [seeded.dead.event_id]);

  await applyFilters({ status: "stale" });
  assert.deepEqual(await rowIds(), [seeded.stale.event_id]);

  await applyFilters({ resource: seeded.refundInv });
  assert.equal((await rowIds()).length, 4, "confirming, paid, refunded and the stale paid");

  await applyFilters({ type: "invoice.paid", status: "received" });
  assert.equal(await page.locator("#delivery-rows tr.empty").count(), 1, "an empty result says so");

  await page.click("#clear-filters");
  await waitForList();
  assert.equal((await rowIds()).length, 50);
});

test("cursor paging goes past 100 rows with Older → and back with ← Newer", async () => {
  const all = (await admin(w.url, "GET", "/deliveries?limit=1000")).json.data.map((d) => d.event_id);
  assert.ok(all.length > 120, `seeded ${all.length} rows`);
  assert.equal(await page.isDisabled("#newer"), true);

  const page1 = await rowIds();
  await page.click("#older");
  await waitForList();
  const page2 = await rowIds();
  await page.click("#older");
  await waitForList();
  const page3 = await rowIds();
  assert.deepEqual(page1, all.slice(0, 50));
  assert.deepEqual(page2, all.slice(50, 100));
  assert.deepEqual(page3, all.slice(100, 150), "rows 101 and on are reachable");
  assert.match(await summary(), new RegExp(`^Rows 101–${all.length}`));
  assert.equal(await page.locator("#page-label").textContent(), "Page 3");
  assert.equal(await page.isDisabled("#older"), true, "the last page has no older one");
  await shot("desktop-page-3.png");

  await page.click("#newer");
  await waitForList();
  assert.deepEqual(await rowIds(), page2);
  await page.click("#newer");
  await waitForList();
  assert.deepEqual(await rowIds(), page1);
  assert.equal(await page.isDisabled("#newer"), true);

  // 100 per page: the second page starts at row 101
  await page.selectOption("#f-limit", "100");
  await page.click("#filters button[type=submit]");
  await waitForList();
  assert.deepEqual(await rowIds(), all.slice(0, 100));
  await page.click("#older");
  await waitForList();
  assert.deepEqual(await rowIds(), all.slice(100, 200));
  await page.selectOption("#f-limit", "50");
  await page.click("#filters button[type=submit]");
  await waitForList();
});

test("a resource shows its state history and its effects with the license code", async () => {
  await applyFilters({ resource: seeded.refundInv });
  await page.locator('#delivery-rows td[data-label="Resource"] button').first().click();
  await page.waitForSelector("#resource:not([hidden])");
  assert.equal(await page.evaluate(() => document.activeElement.id), "resource-title", "focus moves to the resource");
  assert.equal(await page.locator("#resource-title").textContent(), `Invoice ${seeded.refundInv}`);
  assert.match(await page.locator("#resource-facts").textContent(), /refunded/);

  const history = await page.locator("#history-rows tr").evaluateAll((trs) =>
    trs.map((tr) => [...tr.cells].map((c) => c.textContent)),
  );
  assert.deepEqual(history.map((h) => h[0]), ["confirming", "paid", "refunded"]);
  assert.deepEqual(history.map((h) => h[1]), ["(new)", "confirming", "paid"]);
  assert.match(history[1][2], /^event evt_/);

  const effects = await w.db.prepare("SELECT kind, license_code, order_ref FROM effect WHERE resource_id = ? ORDER BY id").bind(seeded.refundInv).all();
  const fulfilment = effects.results.find((e) => e.kind === "fulfilment");
  assert.ok(fulfilment?.license_code);
  const row = page.locator('#effect-rows tr[data-kind="fulfilment"]');
  assert.equal(await row.locator('td[data-label="License code"]').textContent(), fulfilment.license_code);
  assert.equal(await row.locator('td[data-label="Order ref"]').textContent(), fulfilment.order_ref);
  assert.equal(await page.locator('#effect-rows tr[data-kind="revocation"]').count(), 1);
  await shot("desktop-resource.png", true);

  // Escape closes it and focus returns to the button that opened it
  await page.keyboard.press("Escape");
  assert.equal(await page.isVisible("#resource"), false);
  assert.equal(await page.evaluate(() => document.activeElement.classList.contains("link")), true);

  // a withdrawal's settlement and a deposit's credit
  await applyFilters({ resource: seeded.withdrawal });
  await page.locator('#delivery-rows td[data-label="Resource"] button').first().click();
  await page.waitForSelector('#effect-rows tr[data-kind="settlement"]');
  await page.click("#resource-close");
  await applyFilters({ resource: seeded.deposit });
  await page.locator('#delivery-rows td[data-label="Resource"] button').first().click();
  await page.waitForSelector('#effect-rows tr[data-kind="credit"]');
  await page.click("#resource-close");
  await page.click("#clear-filters");
  await waitForList();
});

test("replaying the dead delivery shows the API's answer, then it becomes processed", async () => {
  await applyFilters({ status: "dead" });
  const row = page.locator(`#delivery-rows tr[data-event-id="${seeded.dead.event_id}"]`);
  await row.getByRole("button", { name: `Replay ${seeded.dead.event_id}` }).click();
  await page.waitForFunction(() => /"replayed": true/.test(document.getElementById("notice").textContent));
  await page.waitForFunction(
    (id) => new RegExp(`Replay of ${id}: now processed \\(applied\\)`).test(document.getElementById("notice").textContent),
    seeded.dead.event_id,
    { timeout: 30000 },
  );
  assert.equal(await page.getAttribute("#notice", "role"), "status");
  assert.equal(await page.getAttribute("#notice", "aria-live"), "polite");
  assert.match(await page.locator("#notice").textContent(), /HTTP 202/);
  // the list refreshed: no dead delivery is left
  await page.waitForSelector("#delivery-rows tr.empty");
  const row2 = await w.db.prepare("SELECT outcome, processed_at FROM webhook_delivery WHERE event_id = ?").bind(seeded.dead.event_id).first();
  assert.equal(row2.outcome, "applied");
  assert.equal((await w.db.prepare("SELECT count(*) AS n FROM effect WHERE resource_id = ? AND kind = 'fulfilment'").bind(seeded.deadInv).first()).n, 1);
  await shot("desktop-replayed.png");

  await applyFilters({ resource: seeded.deadInv });
  const status = await page.locator(`#delivery-rows tr[data-event-id="${seeded.dead.event_id}"] td[data-label="Status"]`).textContent();
  assert.match(status, /processed · applied/);
  assert.match(await page.locator(`#delivery-rows tr[data-event-id="${seeded.dead.event_id}"] td[data-label="Attempts"]`).textContent(), /1 replay/);
  await page.click("#clear-filters");
  await waitForList();
});

test("reconciliation runs from the page and shows its report", async () => {
  providerRequests = [];
  await page.click("#reconcile");
  await page.waitForSelector("#reconcile-report:not([hidden])");
  await page.waitForFunction(() => /Reconciliation finished/.test(document.getElementById("notice").textContent));
  const report = await page.locator("#reconcile-report").textContent();
  assert.match(report, /Checked2 paid invoices/);
  assert.match(report, /problems found/);
  assert.match(await page.locator("#reconcile-missing").textContent(), new RegExp(`${seeded.reconMissing} · order order_recon_1 · brought to paid \\(now paid\\)`));
  assert.equal(await page.locator("#reconcile-doubled").textContent(), "None.");
  assert.match(await page.locator("#notice").textContent(), /checked 2, missing 1, doubled 0/);
  assert.ok(providerRequests.length >= 1 && providerRequests.every((r) => r.authorization === "Bearer sk_test_sandbox"));
  await shot("desktop-reconcile.png");

  // the reported invoice opens from the report: paid by reconciliation, fulfilled once
  await page.locator("#reconcile-missing button").click();
  await page.waitForSelector("#resource:not([hidden])");
  assert.match(await page.locator("#history-rows").textContent(), /reconciliation/);
  assert.equal(await page.locator('#effect-rows tr[data-kind="fulfilment"]').count(), 1);
  await page.click("#resource-close");

  // a second run still reports the invoice (no invoice.paid delivery is on record: the
  // subscription problem remains), but the guard leaves it alone and nothing ships twice
  await page.click("#reconcile");
  await page.waitForFunction(() => /checked 2, missing 1, doubled 0/.test(document.getElementById("notice").textContent));
  assert.match(await page.locator("#reconcile-missing").textContent(), /left unchanged \(now paid\)/);
  assert.equal((await w.db.prepare("SELECT count(*) AS n FROM effect WHERE resource_id = ?").bind(seeded.reconMissing).first()).n, 1);
});

test("keyboard focus is visible", async () => {
  await page.focus("#refresh");
  await page.keyboard.press("Tab");
  const outline = await page.evaluate(() => getComputedStyle(document.activeElement).outlineStyle);
  assert.equal(outline, "solid");
});

test("phone width: the table becomes stacked cards without horizontal scrolling", async () => {
  await page.setViewportSize({ width: 820, height: 1000 });
  await waitForList();
  await assertNoOverflow(820);
  await shot("tablet-deliveries.png");
  await page.setViewportSize({ width: 375, height: 812 });
  await page.reload();
  await page.waitForSelector("#app:not([hidden])", { timeout: 10000 });
  await waitForList();
  assert.equal((await rowIds()).length, 50, "still signed in after a reload (sessionStorage)");
  const layout = await page.evaluate(() => ({
    scroll: document.documentElement.scrollWidth,
    td: getComputedStyle(document.querySelector("#delivery-rows td")).display,
    thead: document.querySelector("#delivery-table thead").getBoundingClientRect().height,
    label: getComputedStyle(document.querySelector("#delivery-rows td"), "::before").content,
  }));
  assert.ok(layout.scroll <= 375, `no horizontal scroll (${layout.scroll}px)`);
  assert.notEqual(layout.td, "table-cell");
  assert.ok(layout.thead <= 1, "the header row is visually hidden");
  assert.equal(layout.label, '"Event id"');
  await shot("phone-deliveries.png");
  await applyFilters({ type: "invoice.paid", status: "processed" });
  await shot("phone-filtered.png");
  await applyFilters({ resource: seeded.refundInv });
  await page.locator('#delivery-rows td[data-label="Resource"] button').first().click();
  await page.waitForSelector("#resource:not([hidden])");
  await assertNoOverflow(375);
  await shot("phone-resource.png");
  await page.evaluate(() => document.getElementById("effects-title").scrollIntoView());
  await shot("phone-resource-effects.png");
  await page.click("#resource-close");

  // signing out forgets the token
  await page.click("#sign-out");
  await page.waitForSelector("#sign-in:not([hidden])");
  assert.equal(await page.evaluate(() => sessionStorage.getItem("paymos-admin-token")), null);
  await shot("phone-sign-in.png");
});

test("no dialog, script error, CSP violation or foreign request happened", () => {
  assert.deepEqual(dialogs, []);
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(cspViolations, []);
  assert.deepEqual(foreignRequests, []);
});
