//! Runs the shared statements (`paymos_core::statements`, where every SQL text is defined
//! once) on D1, and reads their rows into types. No SQL text lives here.

use paymos_core::admin::audit::{self, Record};
use paymos_core::admin::AuditQuery;
use paymos_core::rows::flag;
use paymos_core::statements::{self as st, Arg, AuditRow, Bound};
use paymos_core::Envelope;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use wasm_bindgen::JsValue;
use worker::{js_sys, wasm_bindgen_futures, D1Database, D1PreparedStatement, D1Result, Env};

/// D1 failed (unreachable, overloaded, a constraint), a row did not read, or one was missing:
/// the sender or the queue retries (503, `src/error.rs`). Names the statement (a batch's
/// statements) and the kind of failure (`paymos_core::statements::DbError`).
pub use paymos_core::statements::{DbError, Site};

pub type DbResult<T> = Result<T, DbError>;

/// What a runtime error says: D1's own message and its cause, a row's serde error (workers-rs's Display
/// of those is only "wasm-bindgen serialization error"), or the error's Display.
fn message(e: &worker::Error) -> String {
    match e {
        // D1's own message (`D1_ERROR: …`) and its cause, not the wrapper's Debug text
        worker::Error::D1(d1) => {
            let message = String::from(AsRef::<js_sys::Error>::as_ref(d1).message());
            let cause = d1.cause();
            if message.contains(&cause) || cause == "unknown error" {
                message
            } else {
                format!("{message} ({cause})")
            }
        }
        worker::Error::SerdeWasmBindgenError(e) => e.to_string(),
        worker::Error::SerdeJsonError(e) => e.to_string(),
        _ => e.to_string(),
    }
}

/// A D1 call at `at` failed; a row that does not read into its type is `DbError::Row`.
fn failed(at: Site, e: worker::Error) -> DbError {
    let message = message(&e);
    match e {
        worker::Error::SerdeWasmBindgenError(_) | worker::Error::SerdeJsonError(_) => {
            DbError::Row { at, message }
        }
        _ => DbError::Call { at, message },
    }
}

/// A rejected promise of a statement at `at` (a call through `inner()`).
fn rejected(at: Site, e: JsValue) -> DbError {
    failed(at, worker::Error::from(e))
}

/// The `DB` binding; a missing binding is the database being unavailable.
pub fn database(env: &Env) -> DbResult<D1Database> {
    env.d1("DB").map_err(|e| DbError::Binding(message(&e)))
}

fn js(arg: &Arg<'_>) -> JsValue {
    match arg {
        Arg::Null => JsValue::NULL,
        Arg::Int(i) => JsValue::from_f64(*i as f64),
        Arg::Text(s) => JsValue::from_str(s),
    }
}

fn prepare(db: &D1Database, b: &Bound<'_>) -> DbResult<D1PreparedStatement> {
    let args: Vec<JsValue> = b.args.iter().map(js).collect();
    db.prepare(b.statement.sql)
        .bind(&args)
        .map_err(|e| failed(Site::of(b), e))
}

async fn first<T: DeserializeOwned>(db: &D1Database, b: Bound<'_>) -> DbResult<Option<T>> {
    let statement = prepare(db, &b)?;
    statement
        .first(None)
        .await
        .map_err(|e| failed(Site::of(&b), e))
}

async fn all<T: DeserializeOwned>(db: &D1Database, b: Bound<'_>) -> DbResult<Vec<T>> {
    let statement = prepare(db, &b)?;
    let result = statement.all().await.map_err(|e| failed(Site::of(&b), e))?;
    result.results().map_err(|e| failed(Site::of(&b), e))
}

/// Every row a statement returns, read into the core's row type `T`.
pub async fn all_rows<T: DeserializeOwned>(db: &D1Database, b: Bound<'_>) -> DbResult<Vec<T>> {
    all(db, b).await
}

/// Every row a statement returns, and the database's size after it as D1 reports it
/// (`meta.size_after`, in bytes). Read from the result object itself: workers-rs's
/// `D1ResultMeta` holds the size in a `usize`, which on wasm32 cannot hold more than 4 GB.
pub async fn all_with_size<T: DeserializeOwned>(
    db: &D1Database,
    b: Bound<'_>,
) -> DbResult<(Vec<T>, Option<f64>)> {
    let statement = prepare(db, &b)?;
    let promise = statement
        .inner()
        .all()
        .map_err(|e| rejected(Site::of(&b), e))?;
    let result = wasm_bindgen_futures::JsFuture::from(promise)
        .await
        .map_err(|e| rejected(Site::of(&b), e))?;
    let get = |v: &JsValue, k: &str| js_sys::Reflect::get(v, &JsValue::from_str(k)).ok();
    let rows = match get(&result, "results") {
        Some(r) if !r.is_undefined() && !r.is_null() => {
            serde_wasm_bindgen::from_value(r).map_err(|e| DbError::Row {
                at: Site::of(&b),
                message: e.to_string(),
            })?
        }
        _ => Vec::new(),
    };
    let size = get(&result, "meta")
        .and_then(|m| get(&m, "size_after"))
        .and_then(|s| s.as_f64());
    Ok((rows, size))
}

async fn run(db: &D1Database, b: Bound<'_>) -> DbResult<()> {
    prepare(db, &b)?
        .run()
        .await
        .map_err(|e| failed(Site::of(&b), e))?;
    Ok(())
}

/// A batch's results, each with the name of the statement that gave it, so that a row that
/// does not read names its statement.
pub struct Results {
    names: Vec<&'static str>,
    results: Vec<D1Result>,
}

impl Results {
    /// How many statements gave results.
    pub fn len(&self) -> usize {
        self.results.len()
    }

    /// The statement at `i`, as a failure names it.
    fn site(&self, i: usize) -> Site {
        Site::in_batch(&self.names, i)
    }

    /// Every row of the statement at `i` (none past the end).
    fn rows<T: DeserializeOwned>(&self, i: usize) -> DbResult<Vec<T>> {
        match self.results.get(i) {
            Some(r) => r.results::<T>().map_err(|e| failed(self.site(i), e)),
            None => Ok(Vec::new()),
        }
    }

    /// A row the statement at `i` must have returned: `what` says which, when it did not.
    fn expect<T: DeserializeOwned>(&self, i: usize, what: &'static str) -> DbResult<T> {
        first_row(self, i)?.ok_or_else(|| DbError::Missing {
            at: self.site(i),
            what,
        })
    }
}

/// One D1 batch: one transaction, all or nothing.
async fn batch(db: &D1Database, bs: &[Bound<'_>]) -> DbResult<Results> {
    let stmts = bs
        .iter()
        .map(|b| prepare(db, b))
        .collect::<DbResult<Vec<_>>>()?;
    let results = db
        .batch(stmts)
        .await
        .map_err(|e| failed(Site::batch(bs), e))?;
    Ok(Results {
        names: bs.iter().map(|b| b.statement.name).collect(),
        results,
    })
}

/// The first row of the `i`-th statement of a batch's results, if any.
fn first_row<T: DeserializeOwned>(results: &Results, i: usize) -> DbResult<Option<T>> {
    Ok(results.rows::<T>(i)?.into_iter().next())
}

/// A row the statement returns only when it wrote something (`RETURNING`): its presence is
/// the answer, its content is not needed.
#[derive(Deserialize)]
struct Present {}

// ---------------------------------------------------------------- deliveries

/// Insert-or-nothing keyed by the event id: the runtime's promise of the returned `event_id`,
/// present when this call created the row, null when the delivery was already on record (one
/// index lookup, nothing written). Not awaited here: the receive path chains it
/// (`receive::after_body`), and reads only that one column, no row deserialised through serde.
pub fn insert_delivery_start(
    db: &D1Database,
    envelope: &Envelope,
    body: &str,
) -> DbResult<JsValue> {
    let bound = st::INSERT_DELIVERY.bind(vec![
        Arg::text(&envelope.event_id),
        Arg::text(&envelope.resource_id),
        Arg::text(&envelope.event_type),
        Arg::text(body),
    ]);
    let statement = prepare(db, &bound)?;
    Ok(statement
        .inner()
        .first(Some("event_id"))
        .map_err(insert_delivery_failed)?
        .into())
}

/// The insert's promise rejected (`insert_delivery_start`), or could not be made.
pub fn insert_delivery_failed(e: JsValue) -> DbError {
    rejected(Site::statement(&st::INSERT_DELIVERY), e)
}

pub use paymos_core::rows::DeliveryRow;

pub async fn load_delivery(db: &D1Database, event_id: &str) -> DbResult<Option<DeliveryRow>> {
    first(db, st::LOAD_DELIVERY.bind(vec![Arg::text(event_id)])).await
}

/// Which deliveries a list shows; every field optional.
#[derive(Debug, Default)]
pub struct DeliveryFilter<'a> {
    pub event_type: Option<&'a str>,
    pub resource_id: Option<&'a str>,
    /// `received`, `processed`, or an outcome (checked by the caller).
    pub status: Option<&'a str>,
    /// Exclusive position to continue from: (received_at, event_id) of the last row seen.
    pub after: Option<(&'a str, &'a str)>,
    pub limit: u32,
}

/// Newest first. Fetches `limit + 1` rows so the caller knows whether another page exists.
pub async fn list_deliveries(
    db: &D1Database,
    f: &DeliveryFilter<'_>,
) -> DbResult<Vec<DeliveryRow>> {
    let (after_at, after_id) = f.after.unzip();
    all(
        db,
        st::LIST_DELIVERIES.bind(vec![
            Arg::opt(f.event_type),
            Arg::opt(f.resource_id),
            Arg::opt(f.status),
            Arg::opt(after_at),
            Arg::opt(after_id),
            Arg::Int(i64::from(f.limit) + 1),
        ]),
    )
    .await
}

/// Runs a statement; whether it returned a row (`RETURNING`: whether it wrote).
pub async fn returned_row(db: &D1Database, b: Bound<'_>) -> DbResult<bool> {
    let row: Option<Present> = first(db, b).await?;
    Ok(row.is_some())
}

/// What an operator's replay's reset found.
pub enum Reset {
    /// Reset, in this new generation (audited `replayed`).
    Done(i64),
    /// No such delivery (audited `not_found`).
    Absent,
    /// Its body is in the archive: nothing changed, nothing audited; the replay restores the
    /// body and resets it in one batch of its own (archive.rs).
    Archived,
}

/// An operator's replay: unprocessed again, in a new generation, with its audit row in the
/// same batch.
pub async fn reset_for_replay(db: &D1Database, event_id: &str, record: &Record) -> DbResult<Reset> {
    #[derive(Deserialize)]
    struct Row {
        generation: i64,
    }
    // the tally, the reset, and the audit row last (`audited_replay_batch`)
    let results = batch(db, &st::audited_replay_batch(event_id, record)).await?;
    let n = results.len();
    if let Some(r) = first_row::<Row>(&results, n.saturating_sub(2))? {
        return Ok(Reset::Done(r.generation));
    }
    // AUDIT_REPLAY writes `not_found` for an absent delivery, and nothing for an archived one
    let audited = first_row::<Present>(&results, n.saturating_sub(1))?.is_some();
    Ok(if audited {
        Reset::Absent
    } else {
        Reset::Archived
    })
}

// ---------------------------------------------------------------- the audit log

/// The outcome an audit statement (`RETURNING outcome`) wrote, the `i`-th of a batch.
fn audit_outcome(results: &Results, i: usize) -> DbResult<audit::Outcome> {
    #[derive(Deserialize)]
    struct Row {
        outcome: String,
    }
    let row: Row = results.expect(i, "the audit row's outcome")?;
    audit::Outcome::parse(&row.outcome).ok_or_else(|| DbError::Unexpected {
        at: results.site(i),
        what: format!("unknown audit outcome `{}`", row.outcome),
    })
}

/// A row whose outcome is known (a dry run, a reconciliation's report), on its own.
pub async fn insert_audit(
    db: &D1Database,
    record: &Record,
    outcome: audit::Outcome,
) -> DbResult<()> {
    run(db, st::insert_audit(record, outcome)).await
}

/// A page of the audit log, newest first: `limit + 1` rows.
pub async fn list_audit(db: &D1Database, q: &AuditQuery) -> DbResult<Vec<AuditRow>> {
    all(db, st::list_audit(q)).await
}

// ---------------------------------------------------------------- dismissals

/// What a dismissal came to (CONTRACT §5), as its audit row says.
pub enum Dismissal {
    /// Dismissed now, or already: when, and the reason on record.
    Dismissed {
        at: String,
        reason: String,
        already: bool,
    },
    /// It is not dead (unprocessed, or processed otherwise; or an effect not dead).
    NotDead(String),
    Missing,
}

#[derive(Deserialize)]
struct DismissedRow {
    dismissed_at: String,
    dismiss_reason: String,
}

/// What is on record of a dismissed (or refused) one: when, why, and its state's word.
pub struct OnRecord {
    pub dismissed_at: Option<String>,
    pub dismiss_reason: Option<String>,
    pub state: String,
}

/// A dismissal's batch ran: its tally, its audit row (second to last: the outcome, decided in
/// the transaction on the write's own condition) and the write (last: the row when it was
/// dismissed now). The audit's word decides the answer; `on_record` (read after the batch,
/// only when nothing was dismissed now) gives the first dismissal's time and reason, or the
/// state that refused it.
fn dismissal(results: &Results, on_record: Option<OnRecord>) -> DbResult<Dismissal> {
    let audit_at = results.len().saturating_sub(2);
    let outcome = audit_outcome(results, audit_at)?;
    Ok(match (outcome, on_record) {
        (audit::Outcome::Dismissed, _) => {
            let r: DismissedRow =
                results.expect(results.len().saturating_sub(1), "the dismissed one's row")?;
            Dismissal::Dismissed {
                at: r.dismissed_at,
                reason: r.dismiss_reason,
                already: false,
            }
        }
        (audit::Outcome::NotFound, _) | (_, None) => Dismissal::Missing,
        (
            audit::Outcome::Already,
            Some(OnRecord {
                dismissed_at: Some(at),
                dismiss_reason,
                ..
            }),
        ) => Dismissal::Dismissed {
            at,
            reason: dismiss_reason.unwrap_or_default(),
            already: true,
        },
        (audit::Outcome::Already | audit::Outcome::Conflict, Some(r)) => {
            Dismissal::NotDead(r.state)
        }
        (other, _) => {
            return Err(DbError::Unexpected {
                at: results.site(audit_at),
                what: format!("a dismissal recorded as {}", other.as_str()),
            })
        }
    })
}

/// Whether a dismissal's write (the batch's last statement) returned its row.
fn dismissed_now(results: &Results) -> DbResult<bool> {
    Ok(first_row::<DismissedRow>(results, results.len().saturating_sub(1))?.is_some())
}

/// A dead delivery an operator has handled: out of the dead counts and alerts; its audit
/// row in the same batch.
pub async fn dismiss_delivery(
    db: &D1Database,
    event_id: &str,
    reason: &str,
    record: &Record,
) -> DbResult<Dismissal> {
    let batch_ = st::audited_dismiss_delivery_batch(event_id, reason, record);
    let results = batch(db, &batch_).await?;
    let on_record = if dismissed_now(&results)? {
        None
    } else {
        load_delivery(db, event_id).await?.map(|r| OnRecord {
            state: r.outcome.clone().unwrap_or_else(|| "unprocessed".into()),
            dismissed_at: r.dismissed_at,
            dismiss_reason: r.dismiss_reason,
        })
    };
    dismissal(&results, on_record)
}

// ---------------------------------------------------------------- resources

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResourceRow {
    pub id: String,
    pub kind: String,
    pub status: String,
    pub order_ref: Option<String>,
    pub amount: Option<String>,
    pub currency: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

pub use paymos_core::rows::EffectRow;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HistoryRow {
    /// The state entered.
    pub state: String,
    pub from: Option<String>,
    pub cause_kind: String,
    pub cause: String,
    pub at: String,
    /// Who made a manual transition (CONTRACT §11); `null` for a delivery's or
    /// reconciliation's.
    pub actor: Option<String>,
}

pub async fn load_resource(db: &D1Database, id: &str) -> DbResult<Option<ResourceRow>> {
    first(db, st::LOAD_RESOURCE.bind(vec![Arg::text(id)])).await
}

pub async fn load_effects(db: &D1Database, id: &str) -> DbResult<Vec<EffectRow>> {
    all(db, st::LOAD_EFFECTS.bind(vec![Arg::text(id)])).await
}

pub async fn load_history(db: &D1Database, id: &str) -> DbResult<Vec<HistoryRow>> {
    all(db, st::LOAD_HISTORY.bind(vec![Arg::text(id)])).await
}

// ---------------------------------------------------------------- the guarded transition

/// Runs statements as one D1 batch (one transaction, all or nothing).
pub async fn run_batch(db: &D1Database, statements: &[Bound<'_>]) -> DbResult<Results> {
    batch(db, statements).await
}

/// Each statement's rows as JSON objects, for the core to read.
pub fn json_rows(results: &Results) -> DbResult<Vec<Vec<serde_json::Value>>> {
    (0..results.len()).map(|i| results.rows(i)).collect()
}

// ---------------------------------------------------------------- the outbox

/// Every outcome of a dispatcher batch in one D1 batch (one transaction). Each statement
/// is guarded by `dispatch = 'pending'`, so an effect an operator changed meanwhile is left
/// as the operator left it.
///
/// Whether each statement returned a row (`DEFER_EFFECT`: whether this message holds the wait).
pub async fn record_dispatch_outcomes(
    db: &D1Database,
    statements: &[Bound<'_>],
) -> DbResult<Vec<bool>> {
    if statements.is_empty() {
        return Ok(Vec::new());
    }
    let results = batch(db, statements).await?;
    (0..statements.len())
        .map(|i| Ok(first_row::<Present>(&results, i)?.is_some()))
        .collect()
}

/// What an operator's redelivery came to.
pub enum Redelivery {
    /// Pending again, a fresh ladder; `true` when it awaits its order_ref (nothing to send yet).
    Pending {
        awaiting_order_ref: bool,
    },
    /// A cancelled fulfilment, or one whose invoice has a revocation: never sent again.
    Refused,
    Missing,
}

/// The redelivery and its audit row in one batch; the row's outcome (decided by the same
/// transaction, after the update) says which it was.
pub async fn redeliver_effect(
    db: &D1Database,
    effect_id: &str,
    record: &Record,
) -> DbResult<Redelivery> {
    #[derive(Deserialize)]
    struct Row {
        #[serde(deserialize_with = "flag")]
        awaiting_order_ref: bool,
    }
    // the tally, the redelivery, and the audit row last (`audited_redeliver_batch`)
    let results = batch(db, &st::audited_redeliver_batch(effect_id, record)).await?;
    let audit_at = results.len().saturating_sub(1);
    match audit_outcome(&results, audit_at)? {
        audit::Outcome::Redelivered => {
            let row: Row =
                results.expect(audit_at.saturating_sub(1), "the redelivered effect's row")?;
            Ok(Redelivery::Pending {
                awaiting_order_ref: row.awaiting_order_ref,
            })
        }
        audit::Outcome::Conflict => Ok(Redelivery::Refused),
        audit::Outcome::NotFound => Ok(Redelivery::Missing),
        other => Err(DbError::Unexpected {
            at: results.site(audit_at),
            what: format!("a redelivery recorded as {}", other.as_str()),
        }),
    }
}

/// What a pull-mode acknowledgement came to (`POST /effects/{id}/ack`).
pub enum EffectAck {
    /// Marked delivered now.
    Delivered,
    /// Delivered already (a repeated ack, or pushed): nothing changed.
    Already,
    /// Cancelled by its refund: never delivered.
    Cancelled,
    /// A fulfilment still awaiting its order_ref: not offered to ship yet.
    AwaitingOrderRef,
    Missing,
}

/// The ack and its audit row in one batch (`audited_ack_effect_batch`: the tally, the row,
/// the ack); the row's outcome says which it was, the effect as on record says why a refused
/// one was.
pub async fn ack_effect(db: &D1Database, effect_id: &str, record: &Record) -> DbResult<EffectAck> {
    let results = batch(db, &st::audited_ack_effect_batch(effect_id, record)).await?;
    let audit_at = results.len().saturating_sub(2);
    Ok(match audit_outcome(&results, audit_at)? {
        audit::Outcome::Delivered => EffectAck::Delivered,
        audit::Outcome::Already => EffectAck::Already,
        audit::Outcome::NotFound => EffectAck::Missing,
        audit::Outcome::Conflict => {
            let row: Option<EffectRow> =
                first(db, st::LOAD_EFFECT.bind(vec![Arg::text(effect_id)])).await?;
            match row {
                None => EffectAck::Missing,
                Some(e) if e.dispatch == "cancelled" => EffectAck::Cancelled,
                Some(_) => EffectAck::AwaitingOrderRef,
            }
        }
        other => {
            return Err(DbError::Unexpected {
                at: results.site(audit_at),
                what: format!("an effect ack recorded as {}", other.as_str()),
            })
        }
    })
}

/// A dead effect an operator has handled: out of the dead counts and alerts; its audit row
/// in the same batch.
pub async fn dismiss_effect(
    db: &D1Database,
    effect_id: &str,
    reason: &str,
    record: &Record,
) -> DbResult<Dismissal> {
    let batch_ = st::audited_dismiss_effect_batch(effect_id, reason, record);
    let results = batch(db, &batch_).await?;
    let on_record = if dismissed_now(&results)? {
        None
    } else {
        let row: Option<EffectRow> =
            first(db, st::LOAD_EFFECT.bind(vec![Arg::text(effect_id)])).await?;
        row.map(|e| OnRecord {
            state: e.dispatch,
            dismissed_at: e.dismissed_at,
            dismiss_reason: e.dismiss_reason,
        })
    };
    dismissal(&results, on_record)
}

/// The effects feed, oldest first; `limit + 1` rows so the caller knows about a next page.
pub async fn list_effects(
    db: &D1Database,
    kind: Option<&str>,
    dispatch: Option<&str>,
    after_seq: Option<i64>,
    limit: u32,
) -> DbResult<Vec<EffectRow>> {
    // filtered by dispatch state (an order system pulling `pending`): a range of the
    // (dispatch, id) index, so a page costs about its rows however long the history
    let statement = if dispatch.is_some() {
        &st::LIST_EFFECTS_BY_DISPATCH
    } else {
        &st::LIST_EFFECTS
    };
    all(
        db,
        statement.bind(vec![
            Arg::opt(kind),
            Arg::opt(dispatch),
            Arg::opt_int(after_seq),
            Arg::Int(i64::from(limit) + 1),
        ]),
    )
    .await
}

// ---------------------------------------------------------------- reconciliation

pub use paymos_core::actors::reconcile::RunRow;

/// The newest run, whatever its state, for `GET /admin/api/reconcile` and the metrics.
pub struct LatestRun {
    pub run: RunRow,
    pub state: String,
    pub error: Option<String>,
    pub started_at: String,
    pub finished_at: Option<String>,
}

pub async fn latest_reconciliation(db: &D1Database) -> DbResult<Option<LatestRun>> {
    #[derive(Deserialize)]
    struct Row {
        #[serde(flatten)]
        run: RunRow,
        state: String,
        error: Option<String>,
        started_at: String,
        finished_at: Option<String>,
    }
    let row: Option<Row> = first(db, st::LATEST_RECONCILIATION.bind(vec![])).await?;
    Ok(row.map(|r| LatestRun {
        run: r.run,
        state: r.state,
        error: r.error,
        started_at: r.started_at,
        finished_at: r.finished_at,
    }))
}

/// The rows of the `i`-th statement of a batch's results, read into the core's row type.
pub fn rows_of<T: DeserializeOwned>(results: &Results, i: usize) -> DbResult<Vec<T>> {
    results.rows(i)
}

/// A run's report as far as it got.
pub struct ReconciliationReport {
    pub checked: i64,
    pub pages: i64,
    pub missing: Vec<serde_json::Value>,
}

pub async fn reconciliation_report(db: &D1Database, run_id: i64) -> DbResult<ReconciliationReport> {
    #[derive(Deserialize)]
    struct Totals {
        checked: i64,
        pages: i64,
    }
    #[derive(Deserialize)]
    struct Row {
        invoice_id: String,
        order_ref: Option<String>,
        brought_to_paid: Option<i64>,
        status: Option<String>,
    }
    let results = batch(
        db,
        &[
            st::RECONCILIATION_TOTALS.bind(vec![Arg::Int(run_id)]),
            st::RECONCILIATION_FINDINGS.bind(vec![Arg::Int(run_id)]),
        ],
    )
    .await?;
    let totals: Totals = results.expect(0, "the reconciliation run's totals")?;
    let rows: Vec<Row> = rows_of(&results, 1)?;
    Ok(ReconciliationReport {
        checked: totals.checked,
        pages: totals.pages,
        missing: rows
            .into_iter()
            .map(|r| {
                serde_json::json!({
                    "id": r.invoice_id,
                    "order_ref": r.order_ref,
                    "brought_to_paid": r.brought_to_paid.unwrap_or(0) != 0,
                    "status": r.status,
                })
            })
            .collect(),
    })
}

#[derive(Debug, Serialize, Deserialize)]
pub struct DoubledEffect {
    pub resource_id: String,
    pub kind: String,
    pub count: i64,
}

/// Resources with more than one effect of a kind, as the checks found them: empty by
/// construction. Reads only what was found (`doubled_effect`), never the effect table.
pub async fn doubled_effects(db: &D1Database) -> DbResult<Vec<DoubledEffect>> {
    all(db, st::DOUBLED_EFFECTS.bind(vec![])).await
}

/// The bounded check (the effects written since the last one), then what every check
/// found, in one transaction.
pub async fn check_doubled_effects(db: &D1Database) -> DbResult<Vec<DoubledEffect>> {
    let results = batch(db, &st::check_doubled_batch()).await?;
    // the last statement's rows (none for an empty batch)
    results.rows(results.len().saturating_sub(1))
}

// ---------------------------------------------------------------- operations

/// Adds an isolate's counts: each into its minute and into the running total.
pub async fn flush_counts(db: &D1Database, rows: &[(&str, &str, &str, u64)]) -> DbResult<()> {
    let mut stmts = Vec::with_capacity(rows.len() * 2);
    let mut totals: std::collections::BTreeMap<(&str, &str), u64> = Default::default();
    for (bucket, name, label, n) in rows {
        stmts.push(st::FLUSH_COUNT.bind(vec![
            Arg::text(bucket),
            Arg::text(name),
            Arg::text(label),
            Arg::Int(*n as i64),
        ]));
        *totals.entry((name, label)).or_insert(0) += n;
    }
    for ((name, label), n) in totals {
        stmts.push(st::FLUSH_COUNT.bind(vec![
            Arg::text("total"),
            Arg::text(name),
            Arg::text(label),
            Arg::Int(n as i64),
        ]));
    }
    batch(db, &stmts).await?;
    Ok(())
}

pub async fn prune_counts(db: &D1Database, before_bucket: &str) -> DbResult<()> {
    run(db, st::PRUNE_COUNTS.bind(vec![Arg::text(before_bucket)])).await
}

/// What the metrics read from D1, in one row.
#[derive(Debug, Default, Deserialize, Serialize)]
pub struct MetricsFacts {
    pub applied: i64,
    pub stale: i64,
    pub ignored: i64,
    /// Dead and not dismissed.
    pub dead: i64,
    /// Dead and dismissed.
    pub dismissed: i64,
    /// When the newest dead delivery not dismissed went dead (unix ms).
    pub dead_mark: Option<i64>,
    pub unprocessed: i64,
    pub oldest_unprocessed_seconds: Option<i64>,
    pub last_received_at: Option<String>,
    pub livemode_mismatches: i64,
    pub livemode_mismatches_recent: i64,
    pub livemode_mark: Option<i64>,
    pub effects_pending: i64,
    pub effects_delivered: i64,
    /// Dead and not dismissed.
    pub effects_dead: i64,
    pub effects_dismissed: i64,
    pub effects_cancelled: i64,
    pub effects_dead_mark: Option<i64>,
    pub effects_awaiting_order_ref: i64,
    pub oldest_pending_effect_seconds: Option<i64>,
    pub alerts_open: i64,
}

/// A flushed counter: `scope` is `hour`, `burst` (15 minutes) or `total`.
#[derive(Debug, Deserialize)]
pub struct CounterRow {
    pub scope: String,
    pub name: String,
    pub label: String,
    pub count: i64,
}

/// The facts and the counters, in one batch.
pub async fn metrics(
    db: &D1Database,
    hour_bucket: &str,
    burst_bucket: &str,
) -> DbResult<(MetricsFacts, Vec<CounterRow>)> {
    let results = batch(
        db,
        &[
            st::METRICS_FACTS.bind(vec![]),
            st::METRICS_COUNTERS.bind(vec![Arg::text(hour_bucket), Arg::text(burst_bucket)]),
        ],
    )
    .await?;
    let facts = first_row::<MetricsFacts>(&results, 0)?.unwrap_or_default();
    let counters = results.rows(1)?;
    Ok((facts, counters))
}

/// An unresolved alert as the cron's decision needs it.
#[derive(Debug, Deserialize)]
pub struct KeptAlert {
    pub id: String,
    pub kind: String,
    pub state: String,
    pub acked_mark: Option<i64>,
    pub sent_at_unix: Option<i64>,
}

pub async fn kept_alerts(db: &D1Database) -> DbResult<Vec<KeptAlert>> {
    all(db, st::KEPT_ALERTS.bind(vec![])).await
}

/// An alert as the admin API and the webhook show it.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct AlertRow {
    pub id: String,
    pub kind: String,
    pub severity: String,
    pub summary: String,
    pub count: i64,
    pub state: String,
    pub first_seen: String,
    pub last_seen: String,
    pub sent_at: Option<String>,
    pub sends: i64,
    pub last_send_error: Option<String>,
    pub acknowledged_at: Option<String>,
    pub resolved_at: Option<String>,
    /// What the last acknowledgement covered (the count it showed).
    pub acked_count: Option<i64>,
    /// Reopened by a new instance after an acknowledgement: the last time, and how often.
    pub reopened_at: Option<String>,
    pub reopens: i64,
}

pub async fn open_alert(
    db: &D1Database,
    id: &str,
    kind: &str,
    severity: &str,
    summary: &str,
    count: i64,
    mark: Option<i64>,
) -> DbResult<()> {
    run(
        db,
        st::OPEN_ALERT.bind(vec![
            Arg::text(id),
            Arg::text(kind),
            Arg::text(severity),
            Arg::text(summary),
            Arg::Int(count),
            Arg::opt_int(mark),
        ]),
    )
    .await
}

/// UPDATE_ALERT, for a batch of the alert run's writes.
pub fn update_alert_statement<'a>(
    id: &'a str,
    summary: &'a str,
    count: i64,
    mark: Option<i64>,
) -> Bound<'a> {
    st::UPDATE_ALERT.bind(vec![
        Arg::text(id),
        Arg::text(summary),
        Arg::Int(count),
        Arg::opt_int(mark),
    ])
}

/// RESOLVE_ALERT, for a batch of the alert run's writes.
pub fn resolve_alert_statement(id: &str) -> Bound<'_> {
    st::RESOLVE_ALERT.bind(vec![Arg::text(id)])
}

/// RECORD_SAMPLE, for a batch of the alert run's writes.
pub fn sample_statement<'a>(at: &'a str, f: &MetricsFacts) -> Bound<'a> {
    st::RECORD_SAMPLE.bind(vec![
        Arg::text(at),
        Arg::Int(f.unprocessed),
        Arg::opt_int(f.oldest_unprocessed_seconds),
        Arg::Int(f.dead),
        Arg::Int(f.effects_pending),
        Arg::Int(f.effects_delivered),
        Arg::Int(f.effects_dead),
        Arg::opt_int(f.oldest_pending_effect_seconds),
    ])
}

pub async fn update_alert(
    db: &D1Database,
    id: &str,
    summary: &str,
    count: i64,
    mark: Option<i64>,
) -> DbResult<()> {
    run(
        db,
        st::UPDATE_ALERT.bind(vec![
            Arg::text(id),
            Arg::text(summary),
            Arg::Int(count),
            Arg::opt_int(mark),
        ]),
    )
    .await
}

/// An acknowledged alert with a new instance: open again (and sent by the caller).
pub async fn reopen_alert(
    db: &D1Database,
    id: &str,
    summary: &str,
    count: i64,
    mark: Option<i64>,
) -> DbResult<()> {
    run(
        db,
        st::REOPEN_ALERT.bind(vec![
            Arg::text(id),
            Arg::text(summary),
            Arg::Int(count),
            Arg::opt_int(mark),
        ]),
    )
    .await
}

/// An alert sent while D1 could not be read, put on record (resolved) once it can.
pub async fn record_past_alert(db: &D1Database, a: &AlertRow) -> DbResult<()> {
    run(
        db,
        st::RECORD_PAST_ALERT.bind(vec![
            Arg::text(&a.id),
            Arg::text(&a.kind),
            Arg::text(&a.severity),
            Arg::text(&a.summary),
            Arg::Int(a.count),
            Arg::text(&a.first_seen),
            Arg::text(&a.last_seen),
            Arg::Int(a.sends),
        ]),
    )
    .await
}

pub async fn prune_samples(db: &D1Database, before_minute: &str) -> DbResult<()> {
    run(db, st::PRUNE_SAMPLES.bind(vec![Arg::text(before_minute)])).await
}

/// The health charts' rows, in one batch: deliveries by received hour and what each is now
/// (from `since_hour`), refusals per hour and the cron's samples (from `since_minute`), and
/// the facts now (the current hour's newest sample).
pub async fn history(
    db: &D1Database,
    since_hour: &str,
    since_minute: &str,
) -> DbResult<(paymos_core::history::Rows, MetricsFacts)> {
    let results = batch(
        db,
        &[
            st::HISTORY_DELIVERIES.bind(vec![Arg::text(since_hour)]),
            st::HISTORY_REFUSALS.bind(vec![Arg::text(since_minute)]),
            st::HISTORY_SAMPLES.bind(vec![Arg::text(since_minute)]),
            st::METRICS_FACTS.bind(vec![]),
        ],
    )
    .await?;
    let facts = first_row::<MetricsFacts>(&results, 3)?.unwrap_or_default();
    let rows = paymos_core::history::Rows {
        deliveries: rows_of(&results, 0)?,
        refusals: rows_of(&results, 1)?,
        samples: rows_of(&results, 2)?,
    };
    Ok((rows, facts))
}

pub async fn alert_sent(db: &D1Database, id: &str) -> DbResult<()> {
    run(db, st::ALERT_SENT.bind(vec![Arg::text(id)])).await
}

pub async fn alert_send_failed(db: &D1Database, id: &str, error: &str) -> DbResult<()> {
    run(
        db,
        st::ALERT_SEND_FAILED.bind(vec![Arg::text(id), Arg::text(error)]),
    )
    .await
}

/// The acknowledgement and its audit row in one batch: `Acknowledged` (it exists and is not
/// resolved), `Conflict` (resolved already) or `NotFound`, as the row records it.
pub async fn ack_alert(db: &D1Database, id: &str, record: &Record) -> DbResult<audit::Outcome> {
    let results = batch(
        db,
        &[
            st::ACK_ALERT.bind(vec![Arg::text(id)]),
            st::audit_after(&st::AUDIT_ALERT_ACK, record),
        ],
    )
    .await?;
    audit_outcome(&results, 1)
}

pub async fn load_alert(db: &D1Database, id: &str) -> DbResult<Option<AlertRow>> {
    first(db, st::LOAD_ALERT.bind(vec![Arg::text(id)])).await
}

pub async fn list_alerts(db: &D1Database, limit: u32) -> DbResult<Vec<AlertRow>> {
    all(db, st::LIST_ALERTS.bind(vec![Arg::Int(i64::from(limit))])).await
}
