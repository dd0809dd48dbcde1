//! Reconciliation against the provider API (interface §6), driven here over D1 and `fetch`;
//! the walk's decisions are the core's (`paymos_core::actors::reconcile::Walk`): one run walks
//! at a time under a lease in D1, page by page within the invocation's budget, a paid invoice
//! with no `invoice.paid` on record that was processed `applied` or `stale` is reported
//! `missing` and brought to paid through the guard, and a page that does not move the walk
//! forward, or a provider error part-way, ends the run `truncated` with what was checked.
//! More than one effect of a kind is a key problem, reported.

use crate::error::{AppError, AppResult};
use crate::transition::{self, Change};
use crate::{config, log, sql};
use futures_util::future::{select, Either};
use paymos_core::actors::reconcile::{
    self, Ended, ProviderInvoice, ProviderPage, Report, RunRow, Walk, CAUSE, PROVIDER_TIMEOUT_MS,
};
use paymos_core::statements::Bound;
use paymos_core::{CauseKind, ResourceKind, State};
use serde::Serialize;
use serde_json::Value;
use std::time::Duration;
use worker::{
    AbortController, D1Database, Delay, Env, Fetch, Headers, Method, Request, RequestInit,
    RequestRedirect,
};

pub use paymos_core::actors::reconcile::Start;

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
        let base = config::api_base(env).map_err(|e| not_configured(e.to_string()))?;
        let key = config::string(env, "PAYMOS_API_KEY")
            .ok_or_else(|| not_configured("PAYMOS_API_KEY is not set".into()))?;
        Ok(Provider { base, key })
    }

    /// One page, within [`PROVIDER_TIMEOUT_MS`].
    async fn page(
        &self,
        after: Option<&str>,
        paid_since: Option<i64>,
    ) -> Result<ProviderPage, String> {
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
        let headers = Headers::new();
        let auth = format!("Bearer {}", self.key);
        headers
            .set("Authorization", &auth)
            .map_err(|e| e.to_string())?;
        let mut init = RequestInit::new();
        // not followed: the API key goes to PAYMOS_API_BASE and nowhere a Location points
        init.with_method(Method::Get)
            .with_headers(headers)
            .with_redirect(RequestRedirect::Manual);
        let request = Request::new_with_init(&url, &init).map_err(|e| e.to_string())?;
        let controller = AbortController::default();
        let signal = controller.signal();
        // the request and its body within one timeout: a provider that sends its headers and
        // then stalls would otherwise hold the cron's every later step
        let answer = async {
            let mut resp = Fetch::Request(request)
                .send_with_signal(&signal)
                .await
                .map_err(|e| format!("the provider API could not be reached: {e}"))?;
            if resp.status_code() != 200 {
                return Err(format!("the provider API answered {}", resp.status_code()));
            }
            page_body(&mut resp).await
        };
        let timeout = Delay::from(Duration::from_millis(PROVIDER_TIMEOUT_MS));
        futures_util::pin_mut!(answer);
        let body = match select(answer, timeout).await {
            Either::Left((body, _)) => body?,
            Either::Right(((), _)) => {
                controller.abort();
                return Err(format!(
                    "the provider API did not answer within {PROVIDER_TIMEOUT_MS} ms"
                ));
            }
        };
        serde_json::from_slice(&body)
            .map_err(|_| "the provider API answered something that is not an invoice page".into())
    }
}

/// The most a page's answer may hold: 100 invoices are some 30 KB; a larger answer is read no
/// further than this (a Worker holds 128 MB).
const MAX_PAGE_BYTES: usize = 1024 * 1024;

/// A page's body, read as it streams and refused past [`MAX_PAGE_BYTES`].
async fn page_body(resp: &mut worker::Response) -> Result<Vec<u8>, String> {
    use futures_util::StreamExt;
    let mut stream = resp.stream().map_err(|e| e.to_string())?;
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| format!("the provider API's answer broke off: {e}"))?;
        if body.len() + chunk.len() > MAX_PAGE_BYTES {
            return Err(format!(
                "the provider API answered more than {MAX_PAGE_BYTES} bytes for one page"
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Runs (or continues) reconciliation within `budget` D1 queries + subrequests and returns
/// its report; `None` when asked only to continue and no run is open (or another invocation
/// walks one right now).
pub async fn run(env: &Env, start: Start, budget: u32) -> AppResult<Option<Report>> {
    let db = sql::database(env)?;
    // checked before a run is opened: a deployment without the API says so every time
    let provider = match start {
        Start::ContinueOnly => None,
        _ => Some(Provider::from_env(env)?),
    };
    let holder = transition::hex(&transition::random_bytes::<16>()?);
    let mut walk = Walk::new(start, holder, budget, crate::clock::now_seconds());
    let mut io = Worker {
        env,
        db: &db,
        provider,
    };
    let ended = reconcile::drive(&mut walk, &mut io).await?;
    match ended {
        Ended::NothingToDo => Ok(None),
        Ended::LeaseHeld => {
            let why = match start {
                Start::Daily => "another invocation walks a run: the daily run waits for it",
                _ => "another invocation walks a run",
            };
            log::line("reconcile", "-", "lease_held", Some(why));
            match start {
                Start::ContinueOnly | Start::Daily => Ok(None),
                Start::Manual { .. } => Err(AppError::Conflict(
                    "reconciliation_running",
                    "a reconciliation walk is in progress in another invocation; its report: \
                     GET /admin/api/reconcile"
                        .into(),
                )),
            }
        }
        Ended::ProviderFailed { error, .. } => {
            log::line("reconcile", "-", "provider_error", Some(&error));
            Err(AppError::Upstream(error))
        }
        Ended::Walked { state, error, .. } => {
            let run = walk.run().expect("walked").clone();
            // the doubled-effects check, bounded: the effects written since it last ran (the
            // report reads what every check found)
            sql::check_doubled_effects(&db).await?;
            // the operator's answer lists every finding; the cron's run only logs its counts
            let listed = match start {
                Start::Manual { .. } => None,
                _ => Some(LISTED),
            };
            let report = report(&db, &run, state, error.as_deref(), listed).await?;
            log::line("reconcile", "-", &report.summary(), error.as_deref());
            Ok(Some(report))
        }
    }
}

/// The walk's I/O in a Worker: D1, the provider's API, the guarded transition.
struct Worker<'a> {
    env: &'a Env,
    db: &'a D1Database,
    /// Checked before a run is opened; a continuation finds it at its first page.
    provider: Option<Provider>,
}

impl reconcile::Io for Worker<'_> {
    type Error = AppError;

    async fn statement(&mut self, b: Bound<'static>) -> AppResult<Vec<Value>> {
        Ok(sql::all_rows::<Value>(self.db, b).await?)
    }

    async fn batch(&mut self, statements: Vec<Bound<'static>>) -> AppResult<Vec<Vec<Value>>> {
        let results = sql::run_batch(self.db, &statements).await?;
        Ok(sql::json_rows(results))
    }

    async fn fetch(
        &mut self,
        starting_after: Option<String>,
        paid_since: Option<i64>,
    ) -> Result<ProviderPage, String> {
        if self.provider.is_none() {
            // a continuation: the API must still be there
            let p = Provider::from_env(self.env)
                .map_err(|e| e.message().unwrap_or_else(|| e.code().to_string()))?;
            self.provider = Some(p);
        }
        let p = self.provider.as_ref().expect("just set");
        p.page(starting_after.as_deref(), paid_since).await
    }

    async fn bring_to_paid(
        &mut self,
        invoice: &ProviderInvoice,
    ) -> AppResult<(bool, Option<String>)> {
        let change = Change {
            resource_id: invoice.id.clone(),
            kind: ResourceKind::Invoice,
            to: State::Paid,
            order_ref: invoice.order_ref.clone(),
            amount: invoice.amount.clone(),
            currency: invoice.currency.clone(),
            cause_kind: CauseKind::Reconciliation,
            cause: CAUSE.to_string(),
            delivery: None,
            pull: config::pull_mode(self.env),
        };
        let result = transition::apply(self.db, change).await?;
        crate::effects::send_released(self.env, &result.released).await;
        Ok((
            result.applied,
            result.status.map(|s| s.as_str().to_string()),
        ))
    }

    fn unreadable(why: String) -> AppError {
        AppError::Internal(why)
    }
}

/// How many findings the metrics and the cron's own reports list (`missing_count` counts
/// them all): a run that found tens of thousands is not read whole every 5 minutes.
pub const LISTED: u32 = 100;

/// The newest run's report, as far as it got, and when it started and finished.
#[derive(Serialize)]
pub struct Latest {
    #[serde(flatten)]
    pub report: Report,
    pub started_at: String,
    pub finished_at: Option<String>,
}

/// The newest run's report; `None` before any. `GET /admin/api/reconcile` lists every finding
/// (`listed` None), the metrics the first [`LISTED`].
pub async fn latest(env: &Env, listed: Option<u32>) -> AppResult<Option<Latest>> {
    let db = sql::database(env)?;
    let Some(last) = sql::latest_reconciliation(&db).await? else {
        return Ok(None);
    };
    let report = report(&db, &last.run, &last.state, last.error.as_deref(), listed).await?;
    Ok(Some(Latest {
        report,
        started_at: last.started_at,
        finished_at: last.finished_at,
    }))
}

async fn report(
    db: &D1Database,
    run: &RunRow,
    state: &str,
    error: Option<&str>,
    listed: Option<u32>,
) -> AppResult<Report> {
    let doubled = sql::doubled_effects(db).await?;
    let (totals, missing) = sql::reconciliation_report(db, run.id, listed).await?;
    Ok(Report::new(run, state, error, totals, missing, doubled))
}
