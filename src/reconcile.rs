//! Reconciliation against the provider API (CONTRACT §6): a paid invoice with no
//! `invoice.paid` on record is a subscription or firewall problem, reported and brought to
//! paid through the guard; one whose `invoice.paid` is on record but dead or stuck
//! unprocessed is reported too (nothing shipped); more than one effect of a kind is a key
//! problem, reported.
//!
//! Bounded: a run never does more than one invocation may. It walks pages while its budget
//! (D1 queries + subrequests) lasts, keeps its cursor in `reconciliation_run`, and the next
//! cron invocation continues it. A page that does not move the cursor forward, or a provider
//! error part-way, ends the run `truncated` with what was checked.

use crate::error::{AppError, AppResult};
use crate::transition::{self, Change};
use crate::{config, log, sql};
use paymos_core::{CauseKind, ResourceKind, State};
use serde::Deserialize;
use serde_json::{json, Value};
use worker::{D1Database, Date, Env, Fetch, Headers, Method, Request, RequestInit};

/// How far back a daily (or default manual) run looks: `paid_since` = now − 7 days.
pub const WINDOW_SECONDS: i64 = 7 * 24 * 3600;
/// Queries kept back for closing an invocation's share of a run: the doubled-effects query,
/// the finish write and the report (opening a run is counted when it happens).
const RESERVE: u32 = 4;

/// Why `run` was called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The daily cron: a new run over the last 7 days.
    Daily,
    /// An operator's `POST /admin/api/reconcile`: a new run, the last 7 days or everything.
    Manual { full: bool },
    /// Any other cron: continue an unfinished run, if there is one.
    ContinueOnly,
}

#[derive(Deserialize)]
struct InvoicePage {
    data: Vec<ProviderInvoice>,
    #[serde(default)]
    has_more: bool,
}

#[derive(Deserialize)]
struct ProviderInvoice {
    id: String,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    amount: Option<String>,
    #[serde(default)]
    currency: Option<String>,
    #[serde(default)]
    order_ref: Option<String>,
}

struct Provider {
    base: String,
    key: String,
}

impl Provider {
    /// The API base and key, or why reconciliation cannot run (said in the log and the reply).
    fn from_env(env: &Env) -> AppResult<Provider> {
        let not_configured = |m: String| {
            log::line("reconcile", "-", "not_configured", Some(&m));
            AppError::NotConfigured("reconciliation_not_configured", m)
        };
        let base = config::credential_url(env, "PAYMOS_API_BASE")
            .map_err(|e| not_configured(e.to_string()))?;
        let key = config::string(env, "PAYMOS_API_KEY")
            .ok_or_else(|| not_configured("PAYMOS_API_KEY is not set".into()))?;
        Ok(Provider { base, key })
    }

    async fn page(
        &self,
        after: Option<&str>,
        paid_since: Option<i64>,
    ) -> Result<InvoicePage, String> {
        let mut url = format!(
            "{}/v1/invoices?status=paid&limit=100",
            self.base.trim_end_matches('/')
        );
        if let Some(since) = paid_since {
            url.push_str(&format!("&paid_since={since}"));
        }
        if let Some(a) = after {
            url.push_str("&starting_after=");
            url.push_str(&paymos_core::outbound::encode_query_value(a));
        }
        let send = async {
            let headers = Headers::new();
            headers.set("Authorization", &format!("Bearer {}", self.key))?;
            let mut init = RequestInit::new();
            init.with_method(Method::Get).with_headers(headers);
            Fetch::Request(Request::new_with_init(&url, &init)?)
                .send()
                .await
        };
        let mut resp = send
            .await
            .map_err(|e| format!("the provider API could not be reached: {e}"))?;
        if resp.status_code() != 200 {
            return Err(format!("the provider API answered {}", resp.status_code()));
        }
        resp.json()
            .await
            .map_err(|_| "the provider API answered something that is not an invoice page".into())
    }
}

/// Counts what this invocation has spent.
struct Budget {
    limit: u32,
    used: u32,
}

impl Budget {
    fn left(&self) -> u32 {
        self.limit.saturating_sub(self.used)
    }
    fn spend(&mut self, n: u32) {
        self.used += n;
    }
}

/// Runs (or continues) reconciliation within `budget` D1 queries + subrequests and returns
/// its report; `None` when asked only to continue and no run is open.
pub async fn run(env: &Env, start: Start, budget: u32) -> AppResult<Option<Value>> {
    let db = sql::database(env)?;
    let mut budget = Budget {
        limit: budget.max(RESERVE + 5),
        used: 0,
    };
    let (run, fresh) = match start {
        Start::ContinueOnly => {
            budget.spend(1);
            match sql::open_reconciliation(&db).await? {
                Some(run) => (run, false),
                None => return Ok(None),
            }
        }
        Start::Daily | Start::Manual { .. } => {
            let full = matches!(start, Start::Manual { full: true });
            let now = (Date::now().as_millis() / 1000) as i64;
            let paid_since = (!full).then_some(now - WINDOW_SECONDS);
            // checked before a run is opened: a deployment without the API says so every time
            let _ = Provider::from_env(env)?;
            budget.spend(1);
            (
                sql::start_reconciliation(&db, full, paid_since).await?,
                true,
            )
        }
    };
    let provider = match Provider::from_env(env) {
        Ok(p) => p,
        Err(e) => {
            sql::finish_reconciliation(&db, run.id, "failed", Some(e.code())).await?;
            return Err(e);
        }
    };
    let mut state = walk(&db, &provider, &run, &mut budget, env).await?;
    if state.provider_error.is_some() && fresh && run.pages == 0 && state.pages == 0 {
        // nothing was checked at all: the provider's failure is the answer (502), on record
        let message = state.provider_error.take().unwrap_or_default();
        sql::finish_reconciliation(&db, run.id, "failed", Some(&message)).await?;
        log::line("reconcile", "-", "provider_error", Some(&message));
        return Err(AppError::Upstream(message));
    }
    let (final_state, error) = if let Some(e) = state.provider_error.take() {
        ("truncated", Some(e))
    } else if let Some(e) = state.stuck.take() {
        ("truncated", Some(e))
    } else if state.finished {
        ("done", None)
    } else {
        ("running", None)
    };
    if final_state != "running" {
        sql::finish_reconciliation(&db, run.id, final_state, error.as_deref()).await?;
    }
    let report = report(&db, &run, final_state, error.as_deref()).await?;
    log::line("reconcile", "-", &summary(&report), error.as_deref());
    Ok(Some(report))
}

/// The newest run's report, as far as it got (`GET /admin/api/reconcile`); `None` before any.
pub async fn latest(env: &Env) -> AppResult<Option<Value>> {
    let db = sql::database(env)?;
    let Some(last) = sql::latest_reconciliation(&db).await? else {
        return Ok(None);
    };
    let mut v = report(&db, &last.run, &last.state, last.error.as_deref()).await?;
    v["started_at"] = json!(last.started_at);
    v["finished_at"] = json!(last.finished_at);
    Ok(Some(v))
}

fn summary(report: &Value) -> String {
    let n = |k: &str| report[k].as_array().map_or(0, Vec::len);
    format!(
        "run {} {}: checked {}, pages {}, missing {}, unprocessed {}, doubled {}",
        report["run_id"],
        report["state"].as_str().unwrap_or("-"),
        report["checked"],
        report["pages"],
        n("missing"),
        n("unprocessed"),
        n("doubled")
    )
}

/// The contract's report `{checked, pages, missing, doubled, truncated, ok}` and more.
async fn report(
    db: &D1Database,
    run: &sql::ReconciliationRun,
    state: &str,
    error: Option<&str>,
) -> AppResult<Value> {
    let doubled = sql::doubled_effects(db).await?;
    let found = sql::reconciliation_report(db, run.id).await?;
    let truncated = state != "done";
    let ok = !truncated
        && found.missing.is_empty()
        && found.unprocessed.is_empty()
        && doubled.is_empty();
    Ok(json!({
        "run_id": run.id,
        "full": run.full_walk != 0,
        "paid_since": run.paid_since,
        "checked": found.checked,
        "pages": found.pages,
        "missing": found.missing,
        "unprocessed": found.unprocessed,
        "doubled": doubled,
        "truncated": truncated,
        // an unfinished run goes on in the next cron invocation (every 5 minutes)
        "continues": state == "running",
        "state": state,
        "error": error,
        "ok": ok,
    }))
}

#[derive(Default)]
struct Walked {
    pages: i64,
    finished: bool,
    stuck: Option<String>,
    provider_error: Option<String>,
}

/// Pages through the provider's paid invoices from the run's cursor while the budget lasts.
async fn walk(
    db: &D1Database,
    provider: &Provider,
    run: &sql::ReconciliationRun,
    budget: &mut Budget,
    env: &Env,
) -> AppResult<Walked> {
    let mut out = Walked::default();
    let mut cursor = run.cursor.clone();
    let stuck_after = config::sweep_after_seconds(env);
    // one page costs a fetch, a lookup and a progress write, plus one batch per missing
    // invoice; a page is entered only with room for at least one of those, so every
    // invocation moves the cursor
    while budget.left() >= RESERVE + 4 {
        budget.spend(1);
        let page = match provider.page(cursor.as_deref(), run.paid_since).await {
            Ok(p) => p,
            Err(e) => {
                out.provider_error = Some(e);
                return Ok(out);
            }
        };
        // A page must move the cursor forward: its last id after `starting_after` (in byte or
        // natural order, `listed_after`). One that does not (the same page again, an empty page
        // that claims more) would walk forever. A page that repeats `starting_after` itself
        // and goes on past it does move forward: the repeated invoice is listed once.
        let last = page.data.last().map(|i| i.id.clone());
        let advances = match (&last, &cursor) {
            (Some(l), Some(c)) => paymos_core::listed_after(l, c),
            (Some(_), None) => true,
            (None, _) => !page.has_more,
        };
        if !advances {
            out.stuck = Some(format!(
                "the provider's page after {} does not move the cursor forward",
                cursor.as_deref().unwrap_or("the start")
            ));
            return Ok(out);
        }
        let invoices: Vec<&ProviderInvoice> = page
            .data
            .iter()
            .filter(|i| paymos_core::resource_kind_of(&i.id) == Some(ResourceKind::Invoice))
            .filter(|i| i.status.as_deref().is_none_or(|s| s == "paid"))
            .collect();
        let ids: Vec<&str> = invoices.iter().map(|i| i.id.as_str()).collect();
        budget.spend(1);
        let on_record = sql::paid_deliveries_on_record(db, &ids, stuck_after).await?;
        let mut findings = Vec::new();
        let mut handled_to: Option<&str> = None;
        let mut checked = 0i64;
        let mut complete = true;
        for invoice in &page.data {
            let looked_up = on_record.iter().find(|r| r.id == invoice.id);
            if looked_up.is_some_and(|r| !r.on_record) {
                // keep one query for the progress write
                if budget.left() < RESERVE + 2 {
                    complete = false;
                    break;
                }
                budget.spend(1);
                let result = transition::apply(
                    db,
                    &Change {
                        resource_id: &invoice.id,
                        kind: ResourceKind::Invoice,
                        to: State::Paid,
                        order_ref: invoice.order_ref.as_deref(),
                        amount: invoice.amount.as_deref(),
                        currency: invoice.currency.as_deref(),
                        cause_kind: CauseKind::Reconciliation,
                        cause: "paid at the provider, no invoice.paid delivery on record",
                        delivery: None,
                        pull: config::pull_mode(env),
                    },
                )
                .await?;
                crate::effects::send_released(env, &result.released).await;
                findings.push(sql::Finding::Missing {
                    invoice_id: invoice.id.clone(),
                    order_ref: invoice.order_ref.clone(),
                    brought_to_paid: result.applied,
                    status: result.status.map(|s| s.as_str().to_string()),
                });
            } else if let Some(r) = looked_up.filter(|r| r.stuck_event_id.is_some()) {
                findings.push(sql::Finding::Unprocessed {
                    invoice_id: invoice.id.clone(),
                    order_ref: invoice.order_ref.clone(),
                    event_id: r.stuck_event_id.clone().unwrap_or_default(),
                    outcome: r.stuck_outcome.clone(),
                    status: r.status.clone(),
                });
            }
            if looked_up.is_some() {
                checked += 1;
            }
            handled_to = Some(&invoice.id);
        }
        let next_cursor = handled_to.map(str::to_string).or(cursor.clone());
        let page_done = complete;
        budget.spend(1);
        // `pages` counts the provider pages fetched and handled, a split one each time
        sql::record_reconciliation_page(db, run.id, next_cursor.as_deref(), 1, checked, &findings)
            .await?;
        out.pages += 1;
        cursor = next_cursor;
        if page_done && !page.has_more {
            out.finished = true;
            return Ok(out);
        }
        if !page_done {
            return Ok(out);
        }
    }
    Ok(out)
}
