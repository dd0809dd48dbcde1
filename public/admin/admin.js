// The operators' page: a static file (Workers Static Assets) and a small client of /admin/api.
// It opens on health (alerts, backlog, dead deliveries and effects, refusals, reconciliation),
// then the delivery archive and the audit log; a resource shows its history (a manual entry
// with its operator), its effects with their dispatch state and a manual transition. Every value from the API reaches the page through textContent
// or an attribute set with setAttribute, never as markup.
"use strict";
(function () {
  const TOKEN_KEY = "paymos-admin-token";
  const API = "/admin/api";
  const STATUSES = ["received", "processed", "stale", "dead"];
  const POLL_EVERY_MS = 700;
  const POLL_TRIES = 30;

  const $ = (id) => document.getElementById(id);

  /** createElement with attributes and children; strings become text nodes. */
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "onclick") e.addEventListener("click", v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  /** A table cell: one wrapper inside, so a stacked (phone) cell lays its content out as one value. */
  const td = (label, attrs, ...children) =>
    el("td", { ...(attrs || {}), "data-label": label }, el("div", { class: "v" }, ...children));

  const dash = () =>
    el("span", { class: "none" }, el("span", { "aria-hidden": "true" }, "—"), el("span", { class: "visually-hidden" }, "none"));

  /** ISO 8601 UTC from the API → "2025-11-29 21:06:30 UTC" in a <time>. */
  function time(iso) {
    if (!iso) return dash();
    const s = String(iso);
    const m = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)/.exec(s);
    if (!m) return el("time", { datetime: s }, s);
    return el("time", { datetime: s, title: s }, el("span", {}, m[1]), " ", el("span", {}, `${m[2]} UTC`));
  }

  // ---- who is signed in: the admin token (sessionStorage only: gone when the browser
  // session ends), or, behind Cloudflare Access, the operator Access signed in (its
  // CF_Authorization cookie, which this page never reads: the browser sends it) ----

  /** What GET /admin/api/whoami said: {actor, via: "token" | "access_header" | "access_cookie"}. */
  const session = { actor: null, via: null };
  const byAccess = () => session.via === "access_header" || session.via === "access_cookie";

  function token() {
    try {
      return sessionStorage.getItem(TOKEN_KEY);
    } catch {
      return null;
    }
  }
  function storeToken(t) {
    try {
      if (t) sessionStorage.setItem(TOKEN_KEY, t);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch {
      /* storage disabled: the token lives for this page only */
    }
  }

  // ---- the API ----

  class ApiError extends Error {
    constructor(status, code, message, body) {
      super(message || code);
      this.status = status;
      this.code = code;
      this.detail = message || "";
      this.body = body;
    }
    describe() {
      const where = this.status ? ` (HTTP ${this.status})` : "";
      return `${this.code}${this.detail && this.detail !== this.code ? ": " + this.detail : ""}${where}`;
    }
  }

  /** Why an admin API 401 happened, for the sign-in form. */
  function refusal(code, hadToken) {
    if (hadToken) return "The token was not accepted. Sign in again.";
    // a 401 like every refusal (interface §11), but the team's keys were unreadable, not the session refused
    if (code === "access_keys_unavailable") {
      return "Cloudflare Access could not be checked (access_keys_unavailable). Reload to try again, or use the admin token.";
    }
    if (code && code.startsWith("access_") && code !== "access_token_missing") {
      return `Cloudflare Access did not admit this session (${code}). Reload the page to sign in through Access again, or use the admin token.`;
    }
    return "";
  }

  async function api(method, path, body) {
    const t = token();
    if (!t && !byAccess()) {
      signOut("Sign in with the admin token.");
      throw new ApiError(401, "unauthorized", "not signed in");
    }
    // the bearer header when there is a token; the Access cookie goes with every same-origin call
    const headers = { Accept: "application/json" };
    if (t) headers.Authorization = `Bearer ${t}`;
    const init = { method, headers, cache: "no-store", credentials: "same-origin", redirect: "error" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(API + path, init);
    } catch {
      throw new ApiError(0, "network_error", "the Worker could not be reached");
    }
    const text = await res.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null;
    }
    if (res.status === 401) {
      const code = (data && typeof data.error === "string" && data.error) || "unauthorized";
      signOut(refusal(code, !!t) || "Sign in with the admin token.");
      throw new ApiError(401, code, t ? "the token was not accepted" : "not signed in");
    }
    if (!res.ok) {
      const code = (data && typeof data.error === "string" && data.error) || `http_${res.status}`;
      const message = data && typeof data.message === "string" ? data.message : "";
      throw new ApiError(res.status, code, message, data);
    }
    return { status: res.status, data };
  }

  // ---- notices (one polite live region for results and errors) ----

  // the live region stays in the page (a hidden region is not announced); its content is a box
  function notice(kind, ...content) {
    const box = el("div", { class: `notice ${kind}` });
    box.append(...content.flat().map((c) => (c instanceof Node ? c : document.createTextNode(String(c)))));
    $("notice").replaceChildren(box);
  }
  const clearNotice = () => $("notice").replaceChildren();
  const errorNotice = (what, e) =>
    notice("error", el("strong", {}, `${what} failed: `), e instanceof ApiError ? e.describe() : String(e));

  // ---- sign in / out ----

  function showSignIn(message) {
    $("api-off").hidden = true;
    $("app").hidden = true;
    $("sections").hidden = true;
    $("sign-out").hidden = true;
    $("sign-in").hidden = false;
    $("sign-in-message").textContent = message || "";
    $("token").focus();
  }

  function showApp() {
    $("api-off").hidden = true;
    $("sign-in").hidden = true;
    $("sign-in-message").textContent = "";
    $("app").hidden = false;
    $("sections").hidden = false;
    $("sign-out").hidden = false;
    showSession();
  }

  /** Who is signed in, in the header: the Access operator (or service token), or the token. */
  function showSession() {
    const who = $("whoami");
    if (!session.via) {
      who.hidden = true;
      who.replaceChildren();
      return;
    }
    who.replaceChildren(
      ...(byAccess()
        ? ["Signed in as ", el("strong", {}, String(session.actor)), " (Cloudflare Access)"]
        : ["Signed in with the admin token"]),
    );
    who.hidden = false;
    // behind Access, signing out is Access's: its logout ends the session for every application
    $("sign-out").textContent = byAccess() ? "Sign out of Access" : "Sign out";
  }

  /** GET /admin/api/whoami as the page is signed in now (the stored token, else the Access cookie). */
  async function whoami() {
    const t = token();
    const headers = { Accept: "application/json" };
    if (t) headers.Authorization = `Bearer ${t}`;
    const res = await fetch(`${API}/whoami`, { headers, cache: "no-store", credentials: "same-origin", redirect: "error" });
    let data = null;
    try {
      data = await res.json();
    } catch {
      data = null;
    }
    return { status: res.status, data, hadToken: !!t };
  }

  // ---- what the core knows: event types (the type filter) and each kind's states ----

  /** public/admin/machine.json, written from paymos-core by scripts/build.sh. */
  const machine = { event_types: [], states: {} };
  let machineLoaded = null;

  function loadMachine() {
    // same-origin credentials: behind Access the page's own files need its cookie too
    machineLoaded ??= fetch("/admin/machine.json", { cache: "no-cache", credentials: "same-origin", redirect: "error" })
      .then((res) => (res.ok ? res.json() : Promise.reject(new Error(`HTTP ${res.status}`))))
      .then((m) => {
        if (m && Array.isArray(m.event_types)) machine.event_types = m.event_types.map(String);
        if (m && m.states && typeof m.states === "object") machine.states = m.states;
        $("event-types").replaceChildren(...machine.event_types.map((t) => el("option", { value: t })));
      })
      .catch(() => {
        machineLoaded = null; // the filters still take any typed value
      });
    return machineLoaded;
  }

  // ---- the admin API off (ADMIN_TOKEN unset): every /admin/api call answers 404 ----

  function showOff(focus = true) {
    state.seq++;
    health.seq++;
    $("app").hidden = true;
    $("sections").hidden = true;
    $("sign-out").hidden = true;
    $("sign-in").hidden = true;
    $("api-off").hidden = false;
    if (focus) $("api-off-title").focus();
  }

  /**
   * Asks the API who is signed in, before anything else: whoami answers 404 only while the
   * Worker has neither ADMIN_TOKEN nor Access; 200 names the actor (by the stored token, or by
   * the Access cookie, with no token prompt at all); 401 means sign in with the token.
   */
  async function start(ev) {
    const byOperator = !!ev; // "Check again": move focus to the answer; on load, leave it
    $("api-off").hidden = true;
    loadMachine();
    let r;
    try {
      r = await whoami();
      // a stored token that is refused (rotated since): forget it, and ask again without it,
      // in case Access signs the operator in
      if (r.status === 401 && r.hadToken) {
        storeToken(null);
        const again = await whoami();
        r = again.status === 401 ? { ...again, hadToken: true } : again;
      }
    } catch {
      showSignIn("The Worker could not be reached. Reload to try again.");
      return;
    }
    if (r.status === 404) {
      showOff(byOperator);
    } else if (r.status === 200 && r.data && typeof r.data.actor === "string") {
      session.actor = r.data.actor;
      session.via = r.data.via;
      showApp();
      openApp(byOperator);
    } else {
      session.actor = session.via = null;
      const code = r.data && typeof r.data.error === "string" ? r.data.error : "";
      showSignIn(r.status === 503 ? `Cloudflare Access could not be checked (${code || "HTTP 503"}). Reload to try again, or use the admin token.` : refusal(code, r.hadToken));
    }
  }

  /** After sign-in (or a reload with the token): health first, the archive under it. */
  function openApp(focus) {
    if (focus) $("health-title").focus();
    return Promise.all([loadHealth(), loadDeliveries(), loadAudit()]);
  }

  function signOut(message) {
    storeToken(null);
    session.actor = session.via = null;
    showSession();
    state.seq++;
    health.seq++;
    bulk.stop = true;
    $("delivery-rows").replaceChildren();
    audit.seq++;
    $("audit-rows").replaceChildren();
    $("audit-summary").textContent = "";
    $("alert-rows").replaceChildren();
    $("tiles").replaceChildren();
    $("chart-list").replaceChildren();
    $("dead-effect-rows").replaceChildren();
    $("health-recon-body").replaceChildren();
    $("storage-body").replaceChildren();
    $("config-warnings").replaceChildren();
    $("signature-list").replaceChildren();
    $("health-error").replaceChildren();
    $("health-updated").textContent = "";
    $("resource").hidden = true;
    $("reconcile-report").hidden = true;
    closeBulk(false);
    clearNotice();
    showSignIn(message);
  }

  async function signIn(ev) {
    ev.preventDefault();
    const input = $("token");
    const t = input.value.trim();
    if (!t) {
      $("sign-in-message").textContent = "Enter the admin token.";
      input.focus();
      return;
    }
    storeToken(t);
    $("sign-in-message").textContent = "Checking…";
    try {
      const { data } = await api("GET", "/whoami");
      session.actor = data && data.actor;
      session.via = data && data.via;
    } catch (e) {
      if (e.status === 404) {
        storeToken(null);
        showOff();
      } else if (e.status !== 401) {
        storeToken(null);
        $("sign-in-message").textContent = `Could not sign in: ${e.describe()}`;
      }
      return;
    }
    input.value = "";
    showApp();
    await openApp(true);
  }

  // ---- deliveries: newest first, cursor paging with a stack for "newer" ----

  const state = {
    filters: { type: "", resource_id: "", status: "", limit: "50" },
    cursor: null, // cursor of the page on screen (null: the newest page)
    offset: 0, // rows before the page on screen
    stack: [], // [{cursor, offset}] of the newer pages
    next: null,
    shown: 0,
    seq: 0,
    resourceId: null,
    opener: null,
  };

  function readFilters() {
    state.filters = {
      type: $("f-type").value.trim(),
      resource_id: $("f-resource").value.trim(),
      status: $("f-status").value,
      limit: $("f-limit").value || "50",
    };
    state.cursor = null;
    state.offset = 0;
    state.stack = [];
  }

  /** The status as a badge (colour) with its words (never colour alone), and the detail under it. */
  function statusBadge(d) {
    const status = STATUSES.includes(d.status) ? d.status : "other";
    const [label, detail] = {
      received: ["received", "not processed yet"],
      // an ignored delivery says why (unknown_event_type, livemode_mismatch)
      processed: ["processed", [d.outcome, d.outcome === "ignored" ? d.reason : null].filter(Boolean).join(": ")],
      stale: ["stale", "guard refused"],
      dead: d.dismissed_at ? ["dead", `dismissed: ${d.dismiss_reason ?? ""}`] : ["✖ DEAD", "needs replay"],
      other: [String(d.status || "unknown"), d.outcome || ""],
    }[status];
    return [
      el("span", { class: `badge badge-${status}` }, label),
      detail ? el("span", { class: "badge-detail" }, el("span", { class: "visually-hidden" }, " · "), detail) : null,
    ];
  }

  function deliveryRow(d) {
    const dead = d.status === "dead";
    const resourceBtn = el(
      "button",
      { type: "button", class: "link", title: "Open this resource's state and effects" },
      String(d.resource_id),
    );
    resourceBtn.addEventListener("click", () => openResource(d.resource_id, resourceBtn));
    const replayBtn = el(
      "button",
      { type: "button", class: dead ? "small danger" : "small secondary", "aria-label": `Replay ${d.event_id}` },
      "Replay",
    );
    replayBtn.addEventListener("click", () => replay(d.event_id, replayBtn));
    const attempts = [String(d.attempts ?? 0)];
    if (d.replays) attempts.push(el("span", { class: "muted" }, ` · ${d.replays} replay${d.replays === 1 ? "" : "s"}`));
    return el(
      "tr",
      { class: dead ? "row-dead" : null, "data-event-id": d.event_id, "data-status": d.status },
      td("Event id", { class: "id" }, el("code", {}, String(d.event_id))),
      td("Type", null, String(d.event_type)),
      td("Resource", { class: "id" }, resourceBtn),
      td("Received", null, time(d.received_at)),
      td("Processed", null, time(d.processed_at)),
      td("Status", null, statusBadge(d)),
      td("Attempts", { class: "num" }, attempts),
      td("Last error", { class: "error-text" }, d.last_error ? String(d.last_error) : dash()),
      el("td", { class: "row-actions" }, replayBtn, dead && !d.dismissed_at ? dismissControl("deliveries", String(d.event_id), () => loadDeliveries()) : null),
    );
  }

  /**
   * "Dismiss…" for a dead delivery or effect an operator has handled (contract §5): a reason
   * (1 to 500 characters) asked inline, then the call; it leaves the dead counts and alerts,
   * and stays replayable. `kind` is "deliveries" or "effects".
   */
  function dismissControl(kind, id, after) {
    const wrap = el("span", { class: "dismiss" });
    const open = el("button", { type: "button", class: "small secondary", "aria-label": `Dismiss ${id}` }, "Dismiss…");
    open.addEventListener("click", () => {
      const input = el("input", { type: "text", class: "dismiss-reason", "aria-label": `Why ${id} needs no replay`, placeholder: "why it is handled" });
      const go = el("button", { type: "button", class: "small danger" }, "Dismiss");
      const cancel = el("button", { type: "button", class: "small secondary" }, "Cancel");
      cancel.addEventListener("click", () => wrap.replaceChildren(open));
      go.addEventListener("click", async () => {
        const reason = input.value;
        if (!reason.trim() || [...reason].length > 500) {
          notice("error", el("strong", {}, "A reason of 1 to 500 characters is required."));
          input.focus();
          return;
        }
        go.disabled = true;
        try {
          // each path written out: tests/openapi.test.mjs checks the page's calls against the document
          const answer =
            kind === "effects"
              ? await api("POST", `/effects/${encodeURIComponent(id)}/dismiss`, { reason })
              : await api("POST", `/deliveries/${encodeURIComponent(id)}/dismiss`, { reason });
          notice("ok", el("strong", {}, `${id} dismissed`), " — out of the dead counts and alerts; it stays replayable.", answerBlock(answer.status, answer.data));
        } catch (e) {
          go.disabled = false;
          if (e.status !== 401) errorNotice(`Dismissing ${id}`, e);
          return;
        }
        await Promise.all([after ? after() : null, loadHealth()]);
      });
      wrap.replaceChildren(input, go, cancel);
      input.focus();
    });
    wrap.append(open);
    return wrap;
  }

  function describeFilters() {
    const f = state.filters;
    const parts = [];
    if (f.type) parts.push(`type ${f.type}`);
    if (f.resource_id) parts.push(`resource ${f.resource_id}`);
    if (f.status) parts.push(`status ${f.status}`);
    return parts.length ? ` · filtered by ${parts.join(", ")}` : "";
  }

  async function loadDeliveries() {
    const seq = ++state.seq;
    const q = new URLSearchParams();
    for (const k of ["type", "resource_id", "status"]) if (state.filters[k]) q.set(k, state.filters[k]);
    q.set("limit", state.filters.limit);
    if (state.cursor) q.set("cursor", state.cursor);
    const table = $("delivery-table");
    table.setAttribute("aria-busy", "true");
    $("older").disabled = true;
    $("newer").disabled = true;
    try {
      const { data } = await api("GET", `/deliveries?${q}`);
      if (seq !== state.seq) return;
      const rows = Array.isArray(data && data.data) ? data.data : [];
      state.next = data.has_more && data.next_cursor ? data.next_cursor : null;
      state.shown = rows.length;
      const body = $("delivery-rows");
      if (rows.length === 0) {
        body.replaceChildren(
          el("tr", { class: "empty" }, el("td", { colspan: "9" }, "No deliveries match these filters.")),
        );
      } else {
        body.replaceChildren(...rows.map(deliveryRow));
      }
      const page = state.stack.length + 1;
      $("page-label").textContent = `Page ${page}`;
      $("list-summary").textContent =
        rows.length === 0
          ? `No rows${describeFilters()}.`
          : `Rows ${state.offset + 1}–${state.offset + rows.length}, newest first${describeFilters()}${state.next ? " · older rows follow" : " · end of list"}.`;
      $("newer").disabled = state.stack.length === 0;
      $("older").disabled = !state.next;
    } catch (e) {
      if (seq !== state.seq || e.status === 401) return;
      // the list never answers 404 unless ADMIN_TOKEN was removed since the page loaded
      if (e.status === 404) return showOff(false);
      $("newer").disabled = state.stack.length === 0;
      errorNotice("Loading deliveries", e);
    } finally {
      if (seq === state.seq) table.removeAttribute("aria-busy");
    }
  }

  function older() {
    if (!state.next) return;
    state.stack.push({ cursor: state.cursor, offset: state.offset });
    state.offset += state.shown;
    state.cursor = state.next;
    return loadDeliveries();
  }

  function newer() {
    const prev = state.stack.pop();
    if (!prev) return;
    state.cursor = prev.cursor;
    state.offset = prev.offset;
    return loadDeliveries();
  }

  // ---- replay ----

  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

  function answerBlock(status, data) {
    return el("pre", { class: "answer", "aria-label": "API answer" }, `HTTP ${status} ${JSON.stringify(data, null, 2)}`);
  }

  async function replay(id, btn) {
    btn.disabled = true;
    notice("info", `Replaying ${id}…`);
    let answer;
    try {
      answer = await api("POST", `/deliveries/${encodeURIComponent(id)}/replay`);
    } catch (e) {
      btn.disabled = false;
      if (e.status !== 401) errorNotice(`Replay of ${id}`, e);
      return;
    }
    const head = el("strong", {}, `Replay of ${id} accepted`);
    notice("info", head, " — waiting for the queue consumer…", answerBlock(answer.status, answer.data));
    await loadDeliveries();
    let final = null;
    for (let i = 0; i < POLL_TRIES; i++) {
      await sleep(POLL_EVERY_MS);
      try {
        const { data } = await api("GET", `/deliveries/${encodeURIComponent(id)}`);
        if (data && data.status !== "received") {
          final = data;
          break;
        }
      } catch (e) {
        if (e.status === 401) return;
        break;
      }
    }
    if (final) {
      const kind = final.status === "dead" ? "error" : final.status === "processed" ? "ok" : "info";
      const outcome = final.outcome && final.outcome !== final.status ? ` (${final.outcome})` : "";
      notice(kind, el("strong", {}, `Replay of ${id}: now ${final.status}${outcome}.`), answerBlock(answer.status, answer.data));
    } else {
      notice(
        "info",
        el("strong", {}, `Replay of ${id} queued; not processed yet.`),
        " Use Refresh to check again.",
        answerBlock(answer.status, answer.data),
      );
    }
    await loadDeliveries();
  }

  // ---- one resource: state, manual transition, history, effects with their dispatch ----

  const EFFECT_LABELS = {
    fulfilment: "Fulfilment",
    revocation: "Revocation",
    settlement: "Settlement",
    credit: "Ledger credit",
  };
  const KIND_OF_PREFIX = { inv_: "invoice", wdr_: "withdrawal", pcd_: "deposit" };
  const MAX_REASON = 500;

  function fact(name, value) {
    return [el("dt", {}, name), el("dd", {}, value === null || value === undefined || value === "" ? dash() : value)];
  }

  function emptyRow(cols, text) {
    return el("tr", { class: "empty" }, el("td", { colspan: String(cols) }, text));
  }

  const money = (amount, currency) => (amount ? `${amount}${currency ? " " + currency : ""}` : null);
  const plural = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

  /** "45 s", "3 min 20 s", "2 h 5 min", "3 d 4 h" from seconds. */
  function age(seconds) {
    const s = Math.max(0, Math.round(Number(seconds)));
    if (!Number.isFinite(s)) return "—";
    if (s < 60) return `${s} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ""}`;
    if (s < 86400) return `${Math.floor(s / 3600)} h${Math.floor((s % 3600) / 60) ? ` ${Math.floor((s % 3600) / 60)} min` : ""}`;
    return `${Math.floor(s / 86400)} d${Math.floor((s % 86400) / 3600) ? ` ${Math.floor((s % 86400) / 3600)} h` : ""}`;
  }

  const DISPATCHES = ["pending", "delivered", "dead"];

  /** An effect's dispatch state: a badge (colour) with words, and what it waits for or what failed. */
  function dispatchCell(f) {
    const d = DISPATCHES.includes(f.dispatch) ? f.dispatch : "other";
    const label = {
      pending: "pending",
      delivered: "✔ delivered",
      dead: f.dismissed_at ? "dead" : "✖ DEAD",
      other: String(f.dispatch ?? "unknown"),
    }[d];
    const details = [];
    if (d === "pending") details.push(f.awaiting_order_ref ? "awaiting order_ref: not sent until it is known" : "to the order system");
    // a dismissed one was handled by an operator: said with its reason, not as a call to act
    if (d === "dead") details.push(f.dismissed_at ? `dismissed: ${f.dismiss_reason ?? ""}` : "not delivered after every retry: redeliver");
    if (d === "delivered" && f.delivered_at) details.push(el("span", {}, "at ", time(f.delivered_at)));
    if (f.last_error && d !== "delivered") details.push(el("span", { class: "error-text" }, `last error: ${f.last_error}`));
    return [
      el("span", { class: `badge dispatch-${d}` }, label),
      ...details.map((x) => el("span", { class: "badge-detail" }, el("span", { class: "visually-hidden" }, " · "), x)),
    ];
  }

  function redeliverButton(f, after) {
    const b = el("button", { type: "button", class: "small danger", "aria-label": `Redeliver ${f.id}` }, "Redeliver");
    b.addEventListener("click", () => redeliver(String(f.id), b, after));
    return b;
  }

  function effectRow(f) {
    const dead = f.dispatch === "dead";
    return el(
      "tr",
      { "data-kind": f.kind, "data-effect-id": f.id ?? null, "data-dispatch": f.dispatch ?? null, class: dead && !f.dismissed_at ? "row-dead" : null },
      td("Effect", { class: "id" },
        el("strong", {}, EFFECT_LABELS[f.kind] || String(f.kind)),
        f.id ? el("code", { class: "effect-id" }, String(f.id)) : null,
      ),
      td("Dispatch", null, dispatchCell(f)),
      td("Attempts", { class: "num" }, String(f.attempts ?? 0)),
      td("License code", null, f.license_code ? el("code", { class: "license" }, String(f.license_code)) : dash()),
      td("Order ref", null, f.order_ref ? el("code", {}, String(f.order_ref)) : dash()),
      td("Amount", null, money(f.amount, f.currency) ?? dash()),
      td("Cause", { class: "cause", title: String(f.cause ?? "") },
        /^evt_/.test(String(f.cause)) ? el("code", {}, String(f.cause)) : el("span", { class: "clamp" }, String(f.cause ?? "")),
      ),
      td("Created", null, time(f.created_at)),
      el("td", { class: "row-actions" }, dead && f.id ? redeliverButton(f, () => reloadResource()) : null),
    );
  }

  function renderResource(r) {
    const kind = String(r.kind || "resource");
    state.resourceKind = kind;
    state.resourceStatus = r.status == null ? null : String(r.status);
    $("resource-title").textContent = `${kind.charAt(0).toUpperCase()}${kind.slice(1)} ${r.id}`;
    const effects = Array.isArray(r.effects) ? r.effects : [];
    const dead = effects.filter((f) => f.dispatch === "dead" && !f.dismissed_at).length;
    $("resource-facts").replaceChildren(
      ...fact("Status", el("strong", { class: "state" }, String(r.status))),
      ...fact("Order ref", r.order_ref ? el("code", {}, String(r.order_ref)) : null),
      ...fact("Amount", money(r.amount, r.currency)),
      ...fact("Created", time(r.created_at)),
      ...fact("Updated", time(r.updated_at)),
      ...(dead ? fact("Effects", el("strong", { class: "error-text" }, `✖ ${plural(dead, "dead effect")}: redeliver below`)) : []),
    );
    const history = Array.isArray(r.history) ? r.history : [];
    $("history-rows").replaceChildren(
      ...(history.length
        ? history.map((h) =>
            el(
              "tr",
              {},
              td("State", null, el("strong", {}, String(h.state))),
              td("From", null, h.from ? String(h.from) : el("span", { class: "muted" }, "(new)")),
              td("Cause", null,
                el("span", { class: "cause-kind" }, String(h.cause_kind)),
                " ",
                h.cause_kind === "event" ? el("code", {}, String(h.cause)) : String(h.cause),
              ),
              // a manual entry names its operator (the audit log's actor)
              td("By", { class: "actor" }, h.actor ? String(h.actor) : dash()),
              td("Time", null, time(h.at)),
            ),
          )
        : [emptyRow(5, "No transitions recorded.")]),
    );
    $("effect-rows").replaceChildren(...(effects.length ? effects.map(effectRow) : [emptyRow(9, "No effects.")]));
    setupTransition(kind, state.resourceStatus);
  }

  function renderMissingResource(id) {
    // a valid id of no recorded resource may still be brought to a state (from unknown)
    const m = /^(inv_|wdr_|pcd_)[A-Za-z0-9]{1,64}$/.exec(String(id));
    const kind = m ? KIND_OF_PREFIX[m[1]] : null;
    state.resourceKind = kind;
    state.resourceStatus = null;
    $("resource-title").textContent = `Resource ${id}`;
    $("resource-facts").replaceChildren(
      ...fact("Status", "no state recorded (not processed yet, or only unknown event types)"),
    );
    $("history-rows").replaceChildren(emptyRow(5, "No transitions recorded."));
    $("effect-rows").replaceChildren(emptyRow(9, "No effects."));
    setupTransition(kind, null);
  }

  /** The transition form for this kind: its states from the core (machine.json). */
  function setupTransition(kind, current) {
    const form = $("transition-form");
    const states = kind && Array.isArray(machine.states[kind]) ? machine.states[kind].map(String) : [];
    form.hidden = !kind;
    if (!kind) return;
    const select = $("t-to");
    const keep = select.value;
    select.replaceChildren(
      el("option", { value: "" }, "— choose —"),
      ...states.map((st) => el("option", { value: st }, st === current ? `${st} (current)` : st)),
    );
    if (states.includes(keep) && form.dataset.resource === state.resourceId) select.value = keep;
    if (form.dataset.resource !== state.resourceId) {
      form.reset();
      $("transition-result").replaceChildren();
      form.dataset.resource = state.resourceId;
    }
    $("t-order-ref-field").hidden = kind !== "invoice";
    $("t-submit").disabled = states.length === 0;
    if (states.length === 0) {
      $("transition-result").replaceChildren(
        el("p", { class: "notice error" }, "The list of states (machine.json) could not be loaded: reload the page."),
      );
    }
    reasonCount();
  }

  /** Unicode characters, as the API counts them (not UTF-16 units). */
  const chars = (s) => [...s].length;

  function reasonCount() {
    const n = chars($("t-reason").value.trim());
    const c = $("t-reason-count");
    c.textContent = `${n} / ${MAX_REASON}`;
    c.classList.toggle("error-text", n > MAX_REASON);
  }

  function transitionResult(kind, ...content) {
    $("transition-result").replaceChildren(el("div", { class: `notice ${kind}` }, ...content));
  }

  async function submitTransition(ev) {
    ev.preventDefault();
    const id = state.resourceId;
    if (!id) return;
    const to = $("t-to").value;
    const reason = $("t-reason").value.trim();
    if (!to) {
      transitionResult("error", "Choose the target state.");
      $("t-to").focus();
      return;
    }
    if (chars(reason) < 1 || chars(reason) > MAX_REASON) {
      transitionResult("error", `A reason of 1 to ${MAX_REASON} characters is required (now ${chars(reason)}).`);
      $("t-reason").focus();
      return;
    }
    const body = { to, reason };
    for (const [k, input] of [["order_ref", "t-order-ref"], ["amount", "t-amount"], ["currency", "t-currency"]]) {
      if ($(input).closest(".field").hidden) continue;
      const v = $(input).value.trim();
      if (v) body[k] = v;
    }
    const btn = $("t-submit");
    btn.disabled = true;
    transitionResult("info", `Applying ${to} to ${id}…`);
    try {
      const { data } = await api("POST", `/resources/${encodeURIComponent(id)}/transition`, body);
      if (state.resourceId !== id) return;
      // the resource as it is now first, then the answer: both show together
      await reloadResource();
      if (state.resourceId !== id) return;
      const status = String(data?.status ?? "unknown");
      if (data && data.applied === true) {
        transitionResult("ok", el("strong", {}, `✔ Applied: ${id} is now ${status}.`), " Recorded with your reason in the history.");
        for (const f of ["t-to", "t-reason", "t-order-ref", "t-amount", "t-currency"]) $(f).value = "";
        reasonCount();
      } else {
        const facts = ["order_ref", "amount", "currency"].filter((k) => body[k]);
        transitionResult(
          "warn",
          el("strong", {}, `✖ Refused by the guard: stale.`),
          ` ${id} may not enter ${to} from where it is; it stays ${status}.`,
          facts.length
            ? ` The ${facts.join(", ")} you gave fill what it lacked (a known value is never overwritten); an effect waiting for its order_ref is sent with it.`
            : " Nothing changed.",
        );
      }
      loadHealth();
    } catch (e) {
      if (e.status === 401) return;
      transitionResult("error", el("strong", {}, "Transition refused: "), e instanceof ApiError ? e.describe() : String(e));
    } finally {
      btn.disabled = false;
    }
  }

  /** Redelivers one effect (same id) and shows the answer; `after` refreshes what listed it. */
  async function redeliver(id, btn, after) {
    btn.disabled = true;
    notice("info", `Redelivering ${id}…`);
    try {
      const answer = await api("POST", `/effects/${encodeURIComponent(id)}/redeliver`);
      const queued = answer.data && answer.data.enqueued;
      notice(
        "ok",
        el("strong", {}, `Redelivery of ${id} accepted`),
        queued ? " — queued for the order system under the same id." : " — the dispatcher will send it (not enqueued now; the sweeper picks it up).",
        answerBlock(answer.status, answer.data),
      );
    } catch (e) {
      btn.disabled = false;
      if (e.status !== 401) errorNotice(`Redelivery of ${id}`, e);
      return;
    }
    await Promise.all([after ? after() : null, loadHealth()]);
  }

  async function reloadResource() {
    const id = state.resourceId;
    if (!id) return;
    try {
      const { data } = await api("GET", `/resources/${encodeURIComponent(id)}`);
      if (state.resourceId === id) renderResource(data);
    } catch (e) {
      if (e.status === 404 && state.resourceId === id) renderMissingResource(id);
      else if (e.status !== 401) errorNotice(`Loading ${id}`, e);
    }
  }

  async function openResource(id, opener) {
    state.resourceId = id;
    state.opener = opener || null;
    await loadMachine();
    try {
      const { data } = await api("GET", `/resources/${encodeURIComponent(id)}`);
      if (state.resourceId !== id) return;
      renderResource(data);
    } catch (e) {
      if (e.status === 401) return;
      if (e.status !== 404) {
        errorNotice(`Loading ${id}`, e);
        return;
      }
      renderMissingResource(id);
    }
    $("resource").hidden = false;
    $("resource-title").focus();
  }

  function closeResource() {
    $("resource").hidden = true;
    const o = state.opener;
    state.resourceId = null;
    state.opener = null;
    if (o && o.isConnected) o.focus();
    else $("deliveries-title").focus();
  }

  function resourceDeliveries() {
    if (!state.resourceId) return;
    $("f-type").value = "";
    $("f-status").value = "";
    $("f-resource").value = state.resourceId;
    readFilters();
    $("resource").hidden = true;
    state.opener = null;
    $("deliveries-title").focus();
    loadDeliveries();
  }

  // ---- reconciliation ----

  function resourceButton(id) {
    const b = el("button", { type: "button", class: "link" }, String(id));
    b.addEventListener("click", () => openResource(String(id), b));
    return b;
  }

  /** A reconciliation report's headline facts (the report card and the health view). */
  function reportFacts(r) {
    const n = (k) => (Array.isArray(r[k]) ? r[k].length : 0);
    const result = r.ok
      ? el("strong", { class: "ok-text" }, "✔ consistent")
      : r.continues
        ? el("strong", { class: "warn-text" }, "… running: continues by cron")
        : el("strong", { class: "error-text" }, "✖ problems found");
    return [
      ...fact("Result", result),
      ...fact("Checked", `${r.checked ?? 0} paid invoice${r.checked === 1 ? "" : "s"} at the provider`),
      ...fact("Pages", String(r.pages ?? 0)),
      ...fact("Found", `missing ${n("missing")} · unprocessed ${n("unprocessed")} · doubled ${n("doubled")}`),
      ...(r.truncated && !r.continues ? fact("Truncated", el("span", { class: "error-text" }, `yes${r.error ? `: ${r.error}` : ""}`)) : []),
      ...(r.started_at ? fact("Started", time(r.started_at)) : []),
      ...(r.finished_at ? fact("Finished", time(r.finished_at)) : []),
    ];
  }

  function renderReport(r) {
    const missing = Array.isArray(r.missing) ? r.missing : [];
    const doubled = Array.isArray(r.doubled) ? r.doubled : [];
    const unprocessed = Array.isArray(r.unprocessed) ? r.unprocessed : [];
    const body = $("reconcile-body");
    const parts = [
      el("dl", { class: "facts" }, ...reportFacts(r)),
      el("h4", {}, `Missing invoice.paid deliveries (${missing.length})`),
      missing.length
        ? el(
            "ul",
            { class: "report-list", id: "reconcile-missing" },
            ...missing.map((m) =>
              el(
                "li",
                {},
                resourceButton(m.id),
                m.order_ref ? [" · order ", el("code", {}, String(m.order_ref))] : "",
                ` · ${m.brought_to_paid ? "brought to paid" : "left unchanged"}`,
                m.status ? ` (now ${m.status})` : "",
              ),
            ),
          )
        : el("p", { class: "muted", id: "reconcile-missing" }, "None."),
      unprocessed.length ? el("h4", {}, `invoice.paid on record but not applied (${unprocessed.length})`) : null,
      unprocessed.length
        ? el(
            "ul",
            { class: "report-list", id: "reconcile-unprocessed" },
            ...unprocessed.map((u) =>
              el(
                "li",
                {},
                resourceButton(u.id),
                u.event_id ? [" · ", el("code", {}, String(u.event_id))] : "",
                ` · ${u.outcome ?? "not processed"}`,
              ),
            ),
          )
        : null,
      el("h4", {}, `Doubled effects (${doubled.length})`),
      doubled.length
        ? el(
            "ul",
            { class: "report-list", id: "reconcile-doubled" },
            ...doubled.map((d) =>
              el("li", {}, resourceButton(d.resource_id), ` · ${d.kind} × ${d.count}`),
            ),
          )
        : el("p", { class: "muted", id: "reconcile-doubled" }, "None."),
    ];
    body.replaceChildren(...parts.filter(Boolean));
    $("reconcile-report").hidden = false;
  }

  async function reconcile() {
    const btn = $("reconcile");
    btn.disabled = true;
    notice("info", "Running reconciliation against the provider API…");
    try {
      const { data } = await api("POST", "/reconcile");
      renderReport(data);
      const missing = Array.isArray(data.missing) ? data.missing.length : 0;
      const doubled = Array.isArray(data.doubled) ? data.doubled.length : 0;
      notice(
        data.ok ? "ok" : "error",
        el("strong", {}, "Reconciliation finished: "),
        `checked ${data.checked ?? 0}, missing ${missing}, doubled ${doubled}${data.ok ? " — all consistent." : "."}`,
      );
      await Promise.all([loadDeliveries(), loadHealth()]);
    } catch (e) {
      if (e.status !== 401) errorNotice("Reconciliation", e);
    } finally {
      btn.disabled = false;
    }
  }

  // ---- health (contract §9): alerts, backlog, dead deliveries and effects, refusals ----

  const health = { seq: 0 };
  const BACKLOG_ALERT_SECONDS = 15 * 60; // the alerts' threshold (contract §9)
  const num = (v) => (Number.isFinite(Number(v)) ? Number(v) : 0);
  const obj = (v) => (v && typeof v === "object" && !Array.isArray(v) ? v : {});

  /**
   * One figure: a title, the number, its words and a tone. The tone is a colour and always
   * a word too ("✔ ok", "⚠ behind", "✖ needs action"), never colour alone.
   */
  function tile({ key, title, value, tone, verdict, details = [], action = null }) {
    return el(
      "div",
      { class: `tile tone-${tone}`, role: "listitem", "data-metric": key },
      el("h3", { class: "tile-title" }, title),
      el("p", { class: "tile-value" }, String(value)),
      el("p", { class: "tile-verdict" }, verdict),
      ...details.map((d) => el("p", { class: "tile-detail" }, d)),
      action,
    );
  }

  const OK = "✔ ok";

  function renderTiles(m) {
    const d = obj(m.deliveries);
    const byOutcome = obj(d.by_outcome);
    const e = obj(m.effects);
    const byDispatch = obj(e.by_dispatch);
    const refused = obj(m.refused_last_hour);
    const unprocessed = num(d.unprocessed);
    const oldest = d.oldest_unprocessed_seconds;
    const deadDeliveries = num(d.dead ?? byOutcome.dead);
    const pending = num(byDispatch.pending);
    const deadEffects = num(byDispatch.dead);
    const awaiting = num(e.awaiting_order_ref);
    const oldestEffect = e.oldest_pending_seconds;
    const refusedTotal = num(refused.total);
    const reasons = Object.entries(obj(refused.by_reason)).filter(([, n]) => num(n) > 0);
    const mismatches = num(d.livemode_mismatches);

    const backlogTone = oldest != null && num(oldest) > BACKLOG_ALERT_SECONDS ? "warn" : "ok";
    const effectsTone = oldestEffect != null && num(oldestEffect) > BACKLOG_ALERT_SECONDS ? "warn" : "ok";
    const showDead = el("button", { type: "button", class: "small danger" }, "Show dead deliveries");
    showDead.addEventListener("click", () => {
      $("f-type").value = "";
      $("f-resource").value = "";
      $("f-status").value = "dead";
      readFilters();
      $("deliveries-title").focus();
      loadDeliveries();
    });
    const showEffects = el("button", { type: "button", class: "small danger" }, "Redeliver below");
    showEffects.addEventListener("click", () => $("dead-effects-title").scrollIntoView({ block: "start" }));

    $("tiles").replaceChildren(
      tile({
        key: "backlog",
        title: "Delivery backlog",
        value: unprocessed,
        tone: backlogTone,
        verdict: backlogTone === "ok" ? (unprocessed ? "✔ moving" : "✔ nothing waiting") : "⚠ behind: older than 15 min",
        details: [unprocessed ? `unprocessed · oldest ${oldest == null ? "—" : age(oldest)}` : "unprocessed"],
      }),
      tile({
        key: "dead-deliveries",
        title: "Dead deliveries",
        value: deadDeliveries,
        tone: deadDeliveries ? "bad" : "ok",
        verdict: deadDeliveries ? "✖ needs replay" : OK,
        details: ["every consumer attempt failed"],
        action: deadDeliveries ? showDead : null,
      }),
      tile({
        key: "effects-pending",
        title: "Effects pending",
        value: pending,
        tone: effectsTone,
        verdict: effectsTone === "ok" ? (pending ? "✔ on their way" : "✔ nothing waiting") : "⚠ behind: older than 15 min",
        details: [
          `oldest ${oldestEffect == null ? "—" : age(oldestEffect)} · ${awaiting} awaiting order_ref`,
          `${num(byDispatch.delivered)} delivered in all`,
        ],
      }),
      tile({
        key: "dead-effects",
        title: "Dead effects",
        value: deadEffects,
        tone: deadEffects ? "bad" : "ok",
        verdict: deadEffects ? "✖ needs redelivery" : OK,
        details: ["the order system never took them"],
        action: deadEffects ? showEffects : null,
      }),
      tile({
        key: "refused",
        title: "Refused, last hour",
        value: refusedTotal,
        tone: refusedTotal ? "warn" : "ok",
        verdict: refusedTotal ? "⚠ requests refused" : OK,
        details: reasons.length ? reasons.map(([r, n]) => `${r}: ${num(n)}`) : ["no 400/401/413"],
      }),
      tile({
        key: "deliveries",
        title: "Deliveries",
        value: ["applied", "stale", "ignored", "dead"].reduce((a, k) => a + num(byOutcome[k]), 0),
        tone: mismatches ? "warn" : "info",
        verdict: mismatches ? `⚠ ${plural(mismatches, "livemode mismatch", "livemode mismatches")}` : "processed in all",
        details: [
          `applied ${num(byOutcome.applied)} · stale ${num(byOutcome.stale)} · ignored ${num(byOutcome.ignored)}`,
          el("span", {}, "last received ", d.last_received_at ? time(d.last_received_at) : "never"),
        ],
      }),
    );
  }

  function renderHealthRecon(r) {
    const body = $("health-recon-body");
    if (!r || typeof r !== "object") {
      body.replaceChildren(el("p", { class: "muted" }, "No reconciliation has run yet."));
      return;
    }
    body.replaceChildren(el("dl", { class: "facts" }, ...reportFacts(r)));
  }

  /** Bytes in decimal units, as D1 counts its 10 GB. */
  function bytesText(n) {
    const units = ["bytes", "kB", "MB", "GB", "TB"];
    let v = num(n);
    let i = 0;
    while (v >= 1000 && i < units.length - 1) {
      v /= 1000;
      i += 1;
    }
    return i === 0 ? `${v} bytes` : `${v.toFixed(v < 10 ? 2 : 1)} ${units[i]}`;
  }

  /** The database's size against DATABASE_SIZE_LIMIT_BYTES, and the archive's state. */
  function renderStorage(m) {
    const db = obj(m.database);
    const ar = obj(m.archive);
    const body = $("storage-body");
    if (db.size_limit_bytes == null) {
      body.replaceChildren(el("p", { class: "muted" }, "Unknown (no database figures)."));
      return;
    }
    const limit = num(db.size_limit_bytes);
    const bytes = db.bytes == null ? null : num(db.bytes);
    const ratio = bytes == null || !limit ? null : bytes / limit;
    const tone = ratio == null ? "muted" : ratio >= 0.8 ? "error-text" : ratio >= 0.6 ? "warn-text" : "ok-text";
    const size =
      bytes == null
        ? el("span", { class: "muted" }, "not reported by D1")
        : el("span", { class: tone }, `${bytesText(bytes)} of ${bytesText(limit)} (${(ratio * 100).toFixed(ratio < 0.1 ? 2 : 1)} %)`);
    const meter =
      bytes == null
        ? null
        : el("meter", { id: "database-meter", min: "0", max: String(limit), low: String(limit * 0.6), high: String(limit * 0.8), optimum: "0", value: String(bytes), "aria-label": "Database size against its cap" });
    const run = ar.last_run && typeof ar.last_run === "object" ? ar.last_run : null;
    const runText = run
      ? el(
          "span",
          { class: run.state === "failed" ? "error-text" : "" },
          `${run.state} · ${plural(num(run.archived), "body", "bodies")} archived in ${plural(num(run.objects), "object")}`,
          run.error ? ` · ${run.error}` : "",
          " · ",
          time(run.finished_at || run.updated_at),
        )
      : el("span", { class: "muted" }, "none yet");
    body.replaceChildren(
      el(
        "dl",
        { class: "facts" },
        ...fact("Size", el("span", {}, size, meter ? " " : "", meter)),
        ...fact(
          "Archive",
          ar.configured
            ? `R2, bodies of processed deliveries older than ${num(ar.retention_days)} days`
            : el("span", { class: "error-text" }, "✖ no ARCHIVE binding: nothing leaves D1"),
        ),
        ...fact("Past retention", `${plural(num(ar.bodies_past_retention), "body", "bodies")}${ar.bodies_past_retention_capped ? " or more" : ""} still in D1`),
        ...fact("Last run", runText),
      ),
    );
  }

  function renderConfig(m) {
    const warnings = Array.isArray(obj(m.config).warnings) ? m.config.warnings : [];
    $("config-warnings").replaceChildren(
      warnings.length
        ? el("ul", { class: "warnings" }, ...warnings.map((w) => el("li", {}, el("strong", {}, "⚠ "), String(w))))
        : el("p", { class: "ok-text" }, "✔ No configuration warning."),
    );
    const sigs = Array.isArray(m.signatures) ? m.signatures : [];
    $("signature-list").replaceChildren(
      sigs.length
        ? el(
            "ul",
            { class: "signatures" },
            ...sigs.map((g) =>
              el(
                "li",
                {},
                el("code", {}, String(g.secret)),
                ` · ${plural(num(g.verified), "delivery", "deliveries")} verified`,
                num(g.verified) === 0 ? el("span", { class: "muted" }, " (unused: safe to remove after a rotation)") : null,
              ),
            ),
          )
        : el("p", { class: "muted" }, "No secret configured."),
    );
  }

  const SEVERITIES = ["critical", "warning", "info"];

  function alertRow(a) {
    const open = a.state === "open";
    const sev = SEVERITIES.includes(a.severity) ? a.severity : "other";
    const stateLabel = { open: "● open", acknowledged: "acknowledged", resolved: "✔ resolved" }[a.state] ?? String(a.state);
    let action = null;
    if (open) {
      action = el("button", { type: "button", class: "small", "aria-label": `Acknowledge ${a.kind} alert ${a.id}` }, "Ack");
      action.addEventListener("click", () => ackAlert(String(a.id), action));
    }
    return el(
      "tr",
      { class: open ? `row-alert sev-${sev}` : "row-quiet", "data-alert-id": a.id, "data-state": a.state },
      td("Severity", null, el("span", { class: `badge sev-${sev}` }, String(a.severity ?? "—"))),
      td("Alert", { class: "summary-cell" }, el("strong", {}, String(a.kind)), el("span", { class: "badge-detail" }, String(a.summary ?? ""))),
      td("Count", { class: "num" }, String(a.count ?? 0)),
      td("First seen", null, time(a.first_seen)),
      td("Last seen", null, time(a.last_seen)),
      td("State", null, el("span", { class: `badge alert-${a.state}` }, stateLabel)),
      el("td", { class: "row-actions" }, action),
    );
  }

  function renderAlerts(list) {
    const rows = Array.isArray(list) ? list : [];
    const open = rows.filter((a) => a.state === "open");
    // open first, as the API orders them; the rest keep the API's order
    const ordered = [...open, ...rows.filter((a) => a.state !== "open")];
    $("alert-rows").replaceChildren(...(ordered.length ? ordered.map(alertRow) : [emptyRow(7, "No alert.")]));
    $("alerts-title").textContent = open.length ? `Alerts (${open.length} open)` : "Alerts";
    $("alerts-summary").textContent = open.length
      ? `${plural(open.length, "open alert")}: acknowledge one to stop its re-sends; it resolves by itself when the condition clears.`
      : rows.length
        ? "✔ No open alert."
        : "✔ No alert raised.";
    $("alerts").classList.toggle("has-open", open.length > 0);
  }

  async function ackAlert(id, btn) {
    btn.disabled = true;
    try {
      const answer = await api("POST", `/alerts/${encodeURIComponent(id)}/ack`);
      notice("ok", el("strong", {}, `Alert ${id} acknowledged.`), answerBlock(answer.status, answer.data));
    } catch (e) {
      btn.disabled = false;
      if (e.status !== 401) errorNotice(`Acknowledging ${id}`, e);
      return;
    }
    await loadHealth();
  }

  /**
   * The dead effects not dismissed, up to `want` of them (`dismissed=false`: the feed reads
   * only those, however many were dismissed), page by page (at most 20).
   */
  async function undismissedDeadEffects(want) {
    const found = [];
    let cursor = null;
    for (let page = 0; page < 20 && found.length < want; page++) {
      const query = `/effects?dispatch=dead&dismissed=false&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
      const feed = obj((await api("GET", query)).data);
      found.push(...(Array.isArray(feed.data) ? feed.data : []));
      cursor = feed.next_cursor;
      if (!feed.has_more || !cursor) break;
    }
    return found;
  }

  /** `list`: the dead effects not dismissed (the resource view still shows the dismissed). */
  function renderDeadEffects(list, total) {
    const rows = Array.isArray(list) ? list : [];
    $("dead-effects").hidden = rows.length === 0 && !total;
    $("dead-effect-rows").replaceChildren(
      ...(rows.length
        ? rows.map((f) =>
            el(
              "tr",
              { class: "row-dead", "data-effect-id": f.id, "data-kind": f.kind },
              td("Effect", { class: "id" }, el("strong", {}, EFFECT_LABELS[f.kind] || String(f.kind)), el("code", { class: "effect-id" }, String(f.id))),
              td("Resource", { class: "id" }, resourceButton(f.resource_id)),
              td("Attempts", { class: "num" }, String(f.attempts ?? 0)),
              td("Last error", { class: "error-text" }, f.last_error ? String(f.last_error) : dash()),
              td("Created", null, time(f.created_at)),
              el(
                "td",
                { class: "row-actions" },
                redeliverButton(f, () => (state.resourceId ? reloadResource() : null)),
                dismissControl("effects", String(f.id), () => (state.resourceId ? reloadResource() : null)),
              ),
            ),
          )
        : [emptyRow(6, total ? `${plural(total, "dead effect")}; the list could not be loaded.` : "No dead effect.")]),
    );
  }

  // ---- health charts (issue #26): the last 24 hours as inline SVG, from /metrics/history ----

  const SVG_NS = "http://www.w3.org/2000/svg";
  const HISTORY_HOURS = 24;

  /** createElementNS for SVG, as el() for HTML: attributes set one by one, text as text nodes. */
  function svg(tag, attrs, ...children) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== null && v !== undefined) e.setAttribute(k, String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  const CHART = { w: 480, h: 150, left: 36, right: 6, top: 10, bottom: 22 };
  const hourOf = (iso) => String(iso).slice(11, 16);
  let chartSeq = 0;

  /**
   * One chart: a bar per hour, its series stacked (or side by side when `grouped`), each
   * value a <rect> carrying data-hour, data-series and data-value and its own <title>; a
   * value of 0 draws nothing, an unknown one (null: no sample that hour) a dashed mark.
   */
  function barChart({ key, caption, buckets, series, grouped = false }) {
    const id = `chart-${key}-${++chartSeq}`;
    const plotW = CHART.w - CHART.left - CHART.right;
    const plotH = CHART.h - CHART.top - CHART.bottom;
    const slot = plotW / Math.max(1, buckets.length);
    const values = buckets.map((b) => series.map((s) => s.value(b)));
    const known = (v) => v !== null && v !== undefined && Number.isFinite(Number(v));
    const height = (vs) => (grouped ? Math.max(0, ...vs.map(num)) : vs.reduce((a, v) => a + num(v), 0));
    const max = Math.max(1, ...values.map(height));
    const y = (v) => CHART.top + plotH - (num(v) / max) * plotH;
    const total = values.flat().filter(known).reduce((a, v) => a + num(v), 0);
    const parts = [
      svg("line", { class: "axis", x1: CHART.left, y1: CHART.top + plotH, x2: CHART.w - CHART.right, y2: CHART.top + plotH }),
      svg("line", { class: "axis", x1: CHART.left, y1: CHART.top, x2: CHART.left, y2: CHART.top + plotH }),
      svg("text", { class: "tick", x: CHART.left - 4, y: CHART.top + 8, "text-anchor": "end" }, String(max)),
      svg("text", { class: "tick", x: CHART.left - 4, y: CHART.top + plotH, "text-anchor": "end" }, "0"),
    ];
    buckets.forEach((b, i) => {
      const x0 = CHART.left + i * slot + slot * 0.125;
      const width = slot * 0.75;
      if (i % 6 === 0 || i === buckets.length - 1) {
        parts.push(svg("text", { class: "tick", x: x0 + width / 2, y: CHART.h - 6, "text-anchor": "middle" }, hourOf(b.hour)));
      }
      const vs = values[i];
      if (!vs.some(known)) {
        // a dashed mark on the axis: unknown, not zero
        parts.push(
          svg("rect", { class: "gap", x: x0, y: CHART.top + plotH - 4, width, height: 4, "data-hour": b.hour, "data-gap": "" }, svg("title", {}, `${hourOf(b.hour)} UTC: no sample`)),
        );
        return;
      }
      let stackTop = 0;
      series.forEach((s, j) => {
        const v = vs[j];
        if (!known(v) || num(v) <= 0) return;
        const w = grouped ? width / series.length : width;
        const x = grouped ? x0 + j * w : x0;
        const from = grouped ? 0 : stackTop;
        const top = y(from + num(v));
        const bottom = y(from);
        stackTop = from + num(v);
        parts.push(
          svg(
            "rect",
            {
              class: `bar ${s.cls}`,
              x: x.toFixed(2),
              y: top.toFixed(2),
              width: Math.max(1, w - (grouped ? 1 : 0)).toFixed(2),
              height: Math.max(0.5, bottom - top).toFixed(2),
              "data-hour": b.hour,
              "data-series": s.key,
              "data-value": num(v),
            },
            svg("title", {}, `${hourOf(b.hour)} UTC · ${s.label}: ${num(v)}`),
          ),
        );
      });
    });
    const first = buckets[0] ? hourOf(buckets[0].hour) : "";
    const sums = series.map((s, j) => values.reduce((a, vs) => a + (known(vs[j]) ? num(vs[j]) : 0), 0));
    const summary = `${caption}, ${buckets.length} hours from ${first} UTC: ${series.map((s, j) => `${s.label} ${sums[j]}`).join(", ")}`;
    return el(
      "figure",
      { class: "chart", "data-chart": key, "data-total": total },
      el("figcaption", { id }, caption),
      svg("svg", { viewBox: `0 0 ${CHART.w} ${CHART.h}`, role: "img", "aria-labelledby": id, preserveAspectRatio: "xMidYMid meet" }, svg("desc", {}, summary), ...parts),
      el(
        "ul",
        { class: "legend" },
        ...series.map((s) => el("li", {}, el("span", { class: `swatch ${s.cls}`, "aria-hidden": "true" }), s.label)),
      ),
    );
  }

  function renderCharts(h) {
    const buckets = Array.isArray(obj(h).buckets) ? h.buckets : [];
    const list = $("chart-list");
    if (!buckets.length) {
      list.replaceChildren(el("p", { class: "muted" }, "No history."));
      return;
    }
    const d = (k) => (b) => num(obj(b.deliveries)[k]);
    const r = (k) => (b) => num(obj(b.refused)[k]);
    const nullable = (v) => (v === null || v === undefined ? null : num(v));
    $("charts-title").textContent = `Last ${buckets.length} hours`;
    list.replaceChildren(
      barChart({
        key: "deliveries",
        caption: "Deliveries per hour, by outcome",
        buckets,
        series: [
          { key: "applied", label: "applied", cls: "s-applied", value: d("applied") },
          { key: "stale", label: "stale", cls: "s-stale", value: d("stale") },
          { key: "ignored", label: "ignored", cls: "s-ignored", value: d("ignored") },
          { key: "dead", label: "dead", cls: "s-dead", value: d("dead") },
          { key: "dismissed", label: "dead, dismissed", cls: "s-dismissed", value: d("dismissed") },
          { key: "unprocessed", label: "unprocessed", cls: "s-unprocessed", value: d("unprocessed") },
        ],
      }),
      barChart({
        key: "refusals",
        caption: "Refused requests per hour",
        buckets,
        series: [
          { key: "401", label: "401 signature", cls: "s-r401", value: r("401") },
          { key: "400", label: "400 envelope", cls: "s-r400", value: r("400") },
          { key: "413", label: "413 too large", cls: "s-r413", value: r("413") },
        ],
      }),
      barChart({
        key: "backlog",
        caption: "Delivery backlog (unprocessed, at each hour's end)",
        buckets,
        series: [{ key: "unprocessed", label: "unprocessed", cls: "s-backlog", value: (b) => nullable(obj(b.backlog).unprocessed) }],
      }),
      barChart({
        key: "effects",
        caption: "Effects: delivered in the hour, pending at its end",
        buckets,
        grouped: true,
        series: [
          { key: "delivered", label: "delivered", cls: "s-delivered", value: (b) => nullable(obj(b.effects).delivered) },
          { key: "pending", label: "pending", cls: "s-pending", value: (b) => nullable(obj(b.effects).pending) },
        ],
      }),
    );
  }

  function healthError(what, e) {
    $("health-error").append(
      el("p", { class: "notice error" }, el("strong", {}, `${what} unavailable: `), e instanceof ApiError ? e.describe() : String(e)),
    );
  }

  /** Metrics, alerts and the dead effects, each on its own: one failing leaves the others. */
  async function loadHealth() {
    const seq = ++health.seq;
    const section = $("health");
    section.setAttribute("aria-busy", "true");
    try {
      await refreshHealth(seq);
    } finally {
      if (seq === health.seq) section.removeAttribute("aria-busy");
    }
  }

  async function refreshHealth(seq) {
    const [m, a, h] = await Promise.allSettled([api("GET", "/metrics"), api("GET", "/alerts"), api("GET", `/metrics/history?hours=${HISTORY_HOURS}`)]);
    if (seq !== health.seq) return;
    $("health-error").replaceChildren();
    if ([m, a, h].some((r) => r.status === "rejected" && r.reason?.status === 401)) return;
    if (h.status === "fulfilled") {
      renderCharts(obj(h.value.data));
    } else {
      $("chart-list").replaceChildren(el("p", { class: "muted" }, "The history could not be loaded."));
      healthError("History", h.reason);
    }
    let deadEffects = 0;
    if (m.status === "fulfilled") {
      const metrics = obj(m.value.data);
      renderTiles(metrics);
      renderHealthRecon(metrics.reconciliation);
      renderStorage(metrics);
      renderConfig(metrics);
      deadEffects = num(obj(obj(metrics.effects).by_dispatch).dead);
    } else {
      $("tiles").replaceChildren();
      $("health-recon-body").replaceChildren(el("p", { class: "muted" }, "Unknown (no metrics)."));
      $("storage-body").replaceChildren(el("p", { class: "muted" }, "Unknown (no metrics)."));
      $("config-warnings").replaceChildren();
      $("signature-list").replaceChildren();
      healthError("Metrics", m.reason);
    }
    if (a.status === "fulfilled") {
      renderAlerts(obj(a.value.data).data);
    } else {
      $("alert-rows").replaceChildren(emptyRow(7, "Alerts could not be loaded."));
      $("alerts-summary").textContent = "";
      healthError("Alerts", a.reason);
    }
    if (deadEffects > 0) {
      try {
        const list = await undismissedDeadEffects(deadEffects);
        if (seq !== health.seq) return;
        renderDeadEffects(list, deadEffects);
      } catch (e) {
        if (seq !== health.seq || e.status === 401) return;
        renderDeadEffects([], deadEffects);
      }
    } else {
      renderDeadEffects([], 0);
    }
    const now = new Date().toISOString();
    $("health-updated").textContent = `updated ${now.slice(11, 19)} UTC`;
  }

  // ---- bulk replay: count first (dry run), confirm, then page through with the cursor ----

  const bulk = { filters: null, matched: 0, stop: false, running: false };
  const BULK_FIELDS = [
    ["type", "b-type"],
    ["resource_id", "b-resource"],
    ["status", "b-status"],
    ["received_after", "b-after"],
    ["received_before", "b-before"],
  ];
  // the shapes the API takes (interface.md, "The admin API's times"): T or a space, and
  // RFC 3339's lower-case t and z; the API says whether the date and offset are real
  const ISO_8601 = /^\d{4}-\d\d-\d\d([Tt ]\d\d:\d\d(:\d\d(\.\d+)?)?([Zz]|[+-]\d\d:\d\d)?)?$/;
  const MAX_BULK_CALLS = 10000;

  function openBulk() {
    // starts from the archive's filters
    $("b-type").value = state.filters.type;
    $("b-resource").value = state.filters.resource_id;
    $("b-status").value = state.filters.status;
    resetBulk();
    $("bulk").hidden = false;
    $("bulk-open").setAttribute("aria-expanded", "true");
    $("bulk-title").focus();
  }

  function closeBulk(focus = true) {
    if (bulk.running) bulk.stop = true;
    $("bulk").hidden = true;
    $("bulk-open").setAttribute("aria-expanded", "false");
    if (focus) $("bulk-open").focus();
  }

  function resetBulk() {
    if (bulk.running) return;
    bulk.filters = null;
    $("bulk-confirm").hidden = true;
    $("bulk-run").hidden = true;
    $("bulk-status").replaceChildren();
  }

  function bulkStatus(kind, ...content) {
    $("bulk-status").replaceChildren(el("div", { class: `notice ${kind}` }, ...content));
  }

  function describeBulk(f) {
    return Object.entries(f)
      .map(([k, v]) => `${k.replace("_", " ")} ${v}`)
      .join(", ");
  }

  async function countBulk(ev) {
    ev.preventDefault();
    if (bulk.running) return;
    resetBulk();
    const filters = {};
    for (const [k, id] of BULK_FIELDS) {
      const v = $(id).value.trim();
      if (v) filters[k] = v;
    }
    if (Object.keys(filters).length === 0) {
      bulkStatus("error", "Choose at least one filter: a bulk replay of the whole archive is not offered.");
      $("b-type").focus();
      return;
    }
    for (const [k, id] of [["received_after", "b-after"], ["received_before", "b-before"]]) {
      if (filters[k] && !ISO_8601.test(filters[k])) {
        bulkStatus("error", `${k.replace("_", " ")} is not an ISO-8601 time (e.g. 2025-11-29T21:00:00Z).`);
        $(id).focus();
        return;
      }
    }
    const btn = $("bulk-count");
    btn.disabled = true;
    bulkStatus("info", "Counting…");
    try {
      const { data } = await api("POST", "/deliveries/replay", { dry_run: true, ...filters });
      const matched = num(obj(data).matched);
      bulk.filters = filters; // the confirmed call sends exactly what was counted
      bulk.matched = matched;
      if (matched === 0) {
        bulkStatus("info", el("strong", {}, "No delivery matches"), ` (${describeBulk(filters)}): nothing to replay.`);
        return;
      }
      $("bulk-status").replaceChildren();
      $("bulk-confirm-text").replaceChildren(
        el("strong", {}, `${plural(matched, "delivery", "deliveries")} ${matched === 1 ? "matches" : "match"}`),
        ` (${describeBulk(filters)}). Replay ${matched === 1 ? "it" : "all of them"}? Each is re-enqueued; the guard keeps any that already applied from shipping twice.`,
      );
      $("bulk-go").textContent = `Replay ${plural(matched, "delivery", "deliveries")}`;
      $("bulk-confirm").hidden = false;
      $("bulk-go").focus();
    } catch (e) {
      if (e.status !== 401) bulkStatus("error", el("strong", {}, "Count failed: "), e instanceof ApiError ? e.describe() : String(e));
    } finally {
      btn.disabled = false;
    }
  }

  function bulkProgress(enqueued, matched, done) {
    const p = $("bulk-progress");
    p.max = Math.max(1, matched);
    p.value = Math.min(enqueued, Math.max(1, matched));
    $("bulk-progress-text").textContent = `${done ? "Done: " : ""}${enqueued} of ${matched} enqueued`;
  }

  async function runBulk() {
    const filters = bulk.filters;
    if (!filters || bulk.running) return;
    bulk.running = true;
    bulk.stop = false;
    $("bulk-confirm").hidden = true;
    $("bulk-run").hidden = false;
    $("bulk-stop").hidden = false;
    $("bulk-count").disabled = true;
    let enqueued = 0;
    let matched = bulk.matched;
    let cursor = null;
    let calls = 0;
    let stopped = false;
    bulkProgress(0, matched, false);
    bulkStatus("info", `Replaying ${describeBulk(filters)}…`);
    try {
      for (;;) {
        const body = cursor ? { ...filters, cursor } : { ...filters };
        const { data } = await api("POST", "/deliveries/replay", body);
        const d = obj(data);
        calls++;
        enqueued += num(d.enqueued);
        if (calls === 1 && d.matched != null) matched = num(d.matched);
        bulkProgress(enqueued, matched, false);
        const next = typeof d.next_cursor === "string" && d.next_cursor ? d.next_cursor : null;
        if (!next) break;
        if (next === cursor || calls >= MAX_BULK_CALLS) throw new ApiError(0, "cursor_stuck", "the replay cursor did not move");
        if (bulk.stop) {
          stopped = true;
          break;
        }
        cursor = next;
      }
      bulkProgress(enqueued, matched, !stopped);
      if (stopped) {
        bulkStatus("error", el("strong", {}, `Stopped: ${enqueued} of ${matched} enqueued.`), " Count again to replay the rest.");
      } else bulkStatus(
        enqueued === matched ? "ok" : "warn",
        el("strong", {}, `Bulk replay done: ${enqueued} of ${matched} enqueued.`),
        enqueued === matched ? " The queue consumer processes them now." : " The rest stay stored; the sweeper re-enqueues unprocessed ones.",
      );
    } catch (e) {
      if (e.status !== 401) {
        bulkStatus("error", el("strong", {}, `Bulk replay failed after ${enqueued} of ${matched}: `), e instanceof ApiError ? e.describe() : String(e));
      }
    } finally {
      bulk.running = false;
      bulk.filters = null;
      $("bulk-stop").hidden = true;
      $("bulk-count").disabled = false;
    }
    await Promise.all([loadDeliveries(), loadHealth()]);
  }

  // ---- the audit log: newest first, cursor paging with a stack for "newer" ----

  const audit = { filters: { actor: "", action: "" }, cursor: null, offset: 0, stack: [], next: null, shown: 0, seq: 0 };
  const AUDIT_PAGE = "50";
  const OUTCOME_CLASS = { applied: "ok", replayed: "ok", redelivered: "ok", acknowledged: "ok", ok: "ok", dry_run: "info", running: "info", refused: "warn", findings: "warn", truncated: "warn", not_found: "warn", conflict: "warn", failed: "error" };

  function readAuditFilters() {
    audit.filters = { actor: $("a-actor").value.trim(), action: $("a-action").value };
    audit.cursor = null;
    audit.offset = 0;
    audit.stack = [];
  }

  function auditTarget(target) {
    if (target === null || target === undefined) return dash();
    const id = String(target);
    // a resource opens its view; other ids (evt_, eff_, alt_) are shown as they are
    if (/^(inv_|wdr_|pcd_)[A-Za-z0-9]{1,64}$/.test(id)) return resourceButton(id);
    return el("code", {}, id);
  }

  function auditRow(a) {
    const fields = a.detail && typeof a.detail === "object" ? a.detail : {};
    const shown = Object.keys(fields).length ? el("code", { class: "audit-detail" }, JSON.stringify(fields)) : dash();
    const outcome = String(a.outcome);
    return el(
      "tr",
      { "data-audit-id": String(a.id), "data-action": String(a.action), "data-outcome": outcome },
      td("Time", null, time(a.at)),
      td("Actor", { class: "actor" }, String(a.actor)),
      td("Action", null, String(a.action).replace("_", " ")),
      td("Target", { class: "id" }, auditTarget(a.target)),
      td("Outcome", null, el("span", { class: `badge badge-outcome-${OUTCOME_CLASS[outcome] || "info"}` }, outcome.replace("_", " "))),
      td("Fields", null, shown),
    );
  }

  async function loadAudit() {
    const seq = ++audit.seq;
    const q = new URLSearchParams();
    for (const k of ["actor", "action"]) if (audit.filters[k]) q.set(k, audit.filters[k]);
    q.set("limit", AUDIT_PAGE);
    if (audit.cursor) q.set("cursor", audit.cursor);
    const table = $("audit-table");
    table.setAttribute("aria-busy", "true");
    $("audit-older").disabled = true;
    $("audit-newer").disabled = true;
    try {
      const { data } = await api("GET", `/audit?${q}`);
      if (seq !== audit.seq) return;
      const rows = Array.isArray(data && data.data) ? data.data : [];
      audit.next = data.has_more && data.next_cursor ? data.next_cursor : null;
      audit.shown = rows.length;
      $("audit-rows").replaceChildren(...(rows.length ? rows.map(auditRow) : [emptyRow(6, "No writes recorded that match.")]));
      $("audit-page-label").textContent = `Page ${audit.stack.length + 1}`;
      const f = [audit.filters.actor && `actor ${audit.filters.actor}`, audit.filters.action && `action ${audit.filters.action}`].filter(Boolean);
      const by = f.length ? ` · filtered by ${f.join(", ")}` : "";
      $("audit-summary").textContent =
        rows.length === 0 ? `No rows${by}.` : `Rows ${audit.offset + 1}–${audit.offset + rows.length}, newest first${by}${audit.next ? " · older rows follow" : " · end of log"}.`;
      $("audit-newer").disabled = audit.stack.length === 0;
      $("audit-older").disabled = !audit.next;
    } catch (e) {
      if (seq !== audit.seq || e.status === 401) return;
      $("audit-newer").disabled = audit.stack.length === 0;
      if (e.status === 400) $("audit-summary").textContent = `Not a filter the log takes: ${e.describe()}`;
      else errorNotice("Loading the audit log", e);
    } finally {
      if (seq === audit.seq) table.removeAttribute("aria-busy");
    }
  }

  function auditOlder() {
    if (!audit.next) return;
    audit.stack.push({ cursor: audit.cursor, offset: audit.offset });
    audit.offset += audit.shown;
    audit.cursor = audit.next;
    return loadAudit();
  }

  function auditNewer() {
    const prev = audit.stack.pop();
    if (!prev) return;
    audit.cursor = prev.cursor;
    audit.offset = prev.offset;
    return loadAudit();
  }

  // ---- wiring ----

  $("sign-in-form").addEventListener("submit", signIn);
  $("sign-out").addEventListener("click", () => {
    // Access's own logout (on this hostname, served by Cloudflare) ends the Access session
    if (byAccess()) window.location.assign("/cdn-cgi/access/logout");
    else signOut("Signed out.");
  });
  $("api-off-retry").addEventListener("click", start);
  $("filters").addEventListener("submit", (ev) => {
    ev.preventDefault();
    readFilters();
    loadDeliveries();
  });
  $("clear-filters").addEventListener("click", () => {
    $("f-type").value = "";
    $("f-resource").value = "";
    $("f-status").value = "";
    readFilters();
    loadDeliveries();
  });
  $("refresh").addEventListener("click", () => loadDeliveries());
  $("audit-filters").addEventListener("submit", (ev) => {
    ev.preventDefault();
    readAuditFilters();
    loadAudit();
  });
  $("audit-clear").addEventListener("click", () => {
    $("a-actor").value = "";
    $("a-action").value = "";
    readAuditFilters();
    loadAudit();
  });
  $("audit-refresh").addEventListener("click", () => loadAudit());
  $("audit-older").addEventListener("click", auditOlder);
  $("audit-newer").addEventListener("click", auditNewer);
  $("older").addEventListener("click", older);
  $("newer").addEventListener("click", newer);
  $("reconcile").addEventListener("click", reconcile);
  $("resource-close").addEventListener("click", closeResource);
  $("resource-deliveries").addEventListener("click", resourceDeliveries);
  $("transition-form").addEventListener("submit", submitTransition);
  $("t-reason").addEventListener("input", reasonCount);
  $("health-refresh").addEventListener("click", () => loadHealth());
  $("bulk-open").addEventListener("click", () => ($("bulk").hidden ? openBulk() : closeBulk()));
  $("bulk-close").addEventListener("click", () => closeBulk());
  $("bulk-form").addEventListener("submit", countBulk);
  $("bulk-form").addEventListener("input", resetBulk);
  $("bulk-go").addEventListener("click", runBulk);
  $("bulk-cancel").addEventListener("click", () => {
    resetBulk();
    bulkStatus("info", "Cancelled: nothing was replayed.");
    $("bulk-count").focus();
  });
  $("bulk-stop").addEventListener("click", () => {
    bulk.stop = true;
    $("bulk-stop").hidden = true;
  });
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && !$("resource").hidden) closeResource();
  });

  start();
})();
