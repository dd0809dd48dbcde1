// The operators' page: a small client of /admin/api. Every value from the API reaches the page
// through textContent or an attribute set with setAttribute, never as markup.
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

  // ---- token (sessionStorage only: gone when the browser session ends) ----

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

  async function api(method, path, body) {
    const t = token();
    if (!t) {
      signOut("Sign in with the admin token.");
      throw new ApiError(401, "unauthorized", "not signed in");
    }
    const headers = { Authorization: `Bearer ${t}`, Accept: "application/json" };
    const init = { method, headers, cache: "no-store", credentials: "omit", redirect: "error" };
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
      signOut("The token was not accepted. Sign in again.");
      throw new ApiError(401, "unauthorized", "the token was not accepted");
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
    $("sign-out").hidden = false;
  }

  // ---- what the core knows: event types (the type filter) and each kind's states ----

  /** public/admin/machine.json, written from paymos-core by scripts/build.sh. */
  const machine = { event_types: [], states: {} };
  let machineLoaded = null;

  function loadMachine() {
    machineLoaded ??= fetch("/admin/machine.json", { cache: "no-cache", credentials: "omit", redirect: "error" })
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
    $("app").hidden = true;
    $("sign-out").hidden = true;
    $("sign-in").hidden = true;
    $("api-off").hidden = false;
    if (focus) $("api-off-title").focus();
  }

  /**
   * Asks the API whether it is on, before anything else: the deliveries list never answers 404
   * unless the Worker has no ADMIN_TOKEN (then 404, whatever the token); 401 means sign in.
   */
  async function start(ev) {
    const byOperator = !!ev; // "Check again": move focus to the answer; on load, leave it
    $("api-off").hidden = true;
    loadMachine();
    const t = token();
    const headers = { Accept: "application/json" };
    if (t) headers.Authorization = `Bearer ${t}`;
    let res;
    try {
      res = await fetch(`${API}/deliveries?limit=1`, { headers, cache: "no-store", credentials: "omit", redirect: "error" });
      await res.arrayBuffer();
    } catch {
      showSignIn("The Worker could not be reached. Reload to try again.");
      return;
    }
    if (res.status === 404) {
      showOff(byOperator);
    } else if (t && res.ok) {
      showApp();
      loadDeliveries();
    } else {
      if (t) storeToken(null);
      showSignIn(t ? "The token was not accepted. Sign in again." : "");
    }
  }

  function signOut(message) {
    storeToken(null);
    state.seq++;
    $("delivery-rows").replaceChildren();
    $("resource").hidden = true;
    $("reconcile-report").hidden = true;
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
      await api("GET", "/deliveries?limit=1");
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
    $("deliveries-title").focus();
    await loadDeliveries();
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
      processed: ["processed", d.outcome || ""],
      stale: ["stale", "guard refused"],
      dead: ["✖ DEAD", "needs replay"],
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
      el("td", { class: "row-actions" }, replayBtn),
    );
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

  // ---- one resource: state history and effects ----

  const EFFECT_LABELS = {
    fulfilment: "Fulfilment",
    revocation: "Revocation",
    settlement: "Settlement",
    credit: "Ledger credit",
  };

  function fact(name, value) {
    return [el("dt", {}, name), el("dd", {}, value === null || value === undefined || value === "" ? dash() : value)];
  }

  function emptyRow(cols, text) {
    return el("tr", { class: "empty" }, el("td", { colspan: String(cols) }, text));
  }

  function renderResource(r) {
    const kind = String(r.kind || "resource");
    $("resource-title").textContent = `${kind.charAt(0).toUpperCase()}${kind.slice(1)} ${r.id}`;
    const amount = r.amount ? `${r.amount}${r.currency ? " " + r.currency : ""}` : null;
    $("resource-facts").replaceChildren(
      ...fact("Status", el("strong", { class: "state" }, String(r.status))),
      ...fact("Order ref", r.order_ref ? el("code", {}, String(r.order_ref)) : null),
      ...fact("Amount", amount),
      ...fact("Created", time(r.created_at)),
      ...fact("Updated", time(r.updated_at)),
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
              td("Time", null, time(h.at)),
            ),
          )
        : [emptyRow(4, "No transitions recorded.")]),
    );
    const effects = Array.isArray(r.effects) ? r.effects : [];
    $("effect-rows").replaceChildren(
      ...(effects.length
        ? effects.map((f) =>
            el(
              "tr",
              { "data-kind": f.kind },
              td("Effect", null, el("strong", {}, EFFECT_LABELS[f.kind] || String(f.kind))),
              td("License code", null,
                f.license_code ? el("code", { class: "license" }, String(f.license_code)) : dash(),
              ),
              td("Order ref", null, f.order_ref ? el("code", {}, String(f.order_ref)) : dash()),
              td("Amount", null,
                f.amount ? `${f.amount}${f.currency ? " " + f.currency : ""}` : dash(),
              ),
              td("Cause", null, /^evt_/.test(String(f.cause)) ? el("code", {}, String(f.cause)) : String(f.cause ?? "")),
              td("Time", null, time(f.created_at)),
            ),
          )
        : [emptyRow(6, "No effects.")]),
    );
  }

  function renderMissingResource(id) {
    $("resource-title").textContent = `Resource ${id}`;
    $("resource-facts").replaceChildren(
      ...fact("Status", "no state recorded (not processed yet, or only unknown event types)"),
    );
    $("history-rows").replaceChildren(emptyRow(4, "No transitions recorded."));
    $("effect-rows").replaceChildren(emptyRow(6, "No effects."));
  }

  async function openResource(id, opener) {
    state.resourceId = id;
    state.opener = opener || null;
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

  function renderReport(r) {
    const missing = Array.isArray(r.missing) ? r.missing : [];
    const doubled = Array.isArray(r.doubled) ? r.doubled : [];
    const resourceButton = (id) => {
      const b = el("button", { type: "button", class: "link" }, String(id));
      b.addEventListener("click", () => openResource(String(id), b));
      return b;
    };
    const body = $("reconcile-body");
    body.replaceChildren(
      el(
        "dl",
        { class: "facts" },
        ...fact(
          "Result",
          el("strong", { class: r.ok ? "ok-text" : "error-text" }, r.ok ? "✔ consistent" : "✖ problems found"),
        ),
        ...fact("Checked", `${r.checked ?? 0} paid invoice${r.checked === 1 ? "" : "s"} at the provider`),
        ...fact("Pages", String(r.pages ?? 0)),
      ),
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
    );
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
      await loadDeliveries();
    } catch (e) {
      if (e.status !== 401) errorNotice("Reconciliation", e);
    } finally {
      btn.disabled = false;
    }
  }

  // ---- wiring ----

  $("sign-in-form").addEventListener("submit", signIn);
  $("sign-out").addEventListener("click", () => signOut("Signed out."));
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
  $("older").addEventListener("click", older);
  $("newer").addEventListener("click", newer);
  $("reconcile").addEventListener("click", reconcile);
  $("resource-close").addEventListener("click", closeResource);
  $("resource-deliveries").addEventListener("click", resourceDeliveries);
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && !$("resource").hidden) closeResource();
  });

  start();
})();
