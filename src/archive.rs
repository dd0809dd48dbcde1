//! The archive in R2 (interface §10): the driver of the core's archiving run
//! (`paymos_core::actors::archive`, where every decision is), the daily cron and its
//! continuation, `POST /admin/api/archive`, the archive's state for the metrics, and the
//! restore a replay makes of an archived body.
//!
//! gzip: the runtime's `CompressionStream` / `DecompressionStream`, not a Rust codec. They are
//! native in workerd (and in Miniflare), so the wasm carries only the few bindings below
//! instead of a deflate implementation (bench/README.md, "Size", measured with `miniz_oxide` too).
//!
//! A replay of an archived delivery reads its body back from its object, checks the object's
//! SHA-256 against the one recorded at the write, and puts the body back in the row in the
//! same D1 batch as the replay's reset (`RESTORE_BODY`, then `RESET_FOR_REPLAY` or
//! `REPLAY_CHUNK`, which leave an archived row alone): the consumer needs no change, and the
//! next archiving run archives it again once it is processed and past retention. A row
//! archived between the replay's look and its batch is not reset (the statements check), so
//! a reset row always has its body: the single replay then tries again; a bulk replay counts
//! it out of `reset`.

use crate::error::{js_message, AppError, AppResult};
use crate::sql::{self, DbError};
use crate::{config, log};
use paymos_core::actors::archive::{
    self as core, ReadBack, Report, Run, RunRow, RunState, Settings, Start, Step, BACKLOG_CAP,
    MIN_SHARE, REMOVED_AT,
};
use paymos_core::actors::sweep::{restore_statements, Claimed, ReplayFilter as SweepFilter};
use paymos_core::admin::audit::{archive_outcome, Outcome, Record};
use paymos_core::admin::Archive;
use paymos_core::statements::{self as st, Arg, Bound};
use paymos_core::time::iso_minute;
use serde::Deserialize;
use serde_json::{json, Value};
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use worker::js_sys::{Promise, Uint8Array};
use worker::wasm_bindgen_futures::JsFuture;
use worker::worker_sys::web_sys;
use worker::{D1Database, Env, Response};

#[wasm_bindgen]
extern "C" {
    type CompressionStream;
    #[wasm_bindgen(constructor, catch)]
    fn new(format: &str) -> Result<CompressionStream, JsValue>;

    type DecompressionStream;
    #[wasm_bindgen(constructor, catch)]
    fn new(format: &str) -> Result<DecompressionStream, JsValue>;

    /// The `ARCHIVE` binding (an `R2Bucket`), with the two methods used here, bound directly:
    /// workers-rs's R2 wrapper (builders, `HashMap`s of metadata) cost the wasm more.
    #[derive(Clone)]
    pub type R2;
    #[wasm_bindgen(method, catch)]
    fn put(this: &R2, key: &str, value: &Uint8Array, options: &JsValue)
        -> Result<Promise, JsValue>;
    #[wasm_bindgen(method, catch)]
    fn get(this: &R2, key: &str) -> Result<Promise, JsValue>;

    /// A `ReadableStream`, with the one method web-sys does not bind here.
    #[wasm_bindgen(js_name = ReadableStream)]
    type Readable;
    #[wasm_bindgen(method, catch, js_name = pipeThrough)]
    fn pipe_through(
        this: &Readable,
        transform: &JsValue,
    ) -> Result<web_sys::ReadableStream, JsValue>;
}

/// `bytes` through a (de)compression stream, read to the end as a `Response` reads it.
async fn through(bytes: &[u8], transform: &JsValue) -> Result<web_sys::Response, String> {
    let input = Uint8Array::from(bytes);
    let source = web_sys::Response::new_with_opt_js_u8_array(Some(&input)).map_err(js_message)?;
    let stream = source.body().ok_or("no body stream")?;
    let piped = stream
        .unchecked_ref::<Readable>()
        .pipe_through(transform)
        .map_err(js_message)?;
    web_sys::Response::new_with_opt_readable_stream(Some(&piped)).map_err(js_message)
}

async fn settle(promise: Result<Promise, JsValue>) -> Result<JsValue, String> {
    JsFuture::from(promise.map_err(js_message)?)
        .await
        .map_err(js_message)
}

/// gzip, by the runtime.
pub async fn gzip(text: &str) -> Result<Vec<u8>, String> {
    let cs: JsValue = CompressionStream::new("gzip").map_err(js_message)?.into();
    let out = through(text.as_bytes(), &cs).await?;
    let buffer = settle(out.array_buffer()).await?;
    Ok(Uint8Array::new(&buffer).to_vec())
}

/// The text a gzip holds, by the runtime (an error for anything that is not gzip, or not UTF-8).
pub async fn gunzip(bytes: &[u8]) -> Result<String, String> {
    let ds: JsValue = DecompressionStream::new("gzip").map_err(js_message)?.into();
    let out = through(bytes, &ds).await?;
    let buffer = settle(out.array_buffer()).await?;
    String::from_utf8(Uint8Array::new(&buffer).to_vec()).map_err(|e| e.to_string())
}

/// A test-only fault of this driver (`ARCHIVE_FAULT`), between the write and the read-back:
/// `drop_put` makes the binding lose the put (as a write that never landed), `corrupt_read`
/// flips a byte of what is read back. The verification that catches them is the real one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    DropPut,
    CorruptRead,
}

fn fault(env: &Env) -> Option<Fault> {
    match config::archive_fault(env)?.trim() {
        "drop_put" => Some(Fault::DropPut),
        "corrupt_read" => Some(Fault::CorruptRead),
        _ => None,
    }
}

/// The `ARCHIVE` R2 bucket, if bound. Without it nothing is archived or removed.
pub fn bucket(env: &Env) -> Option<R2> {
    let b = worker::js_sys::Reflect::get(env, &JsValue::from_str("ARCHIVE")).ok()?;
    b.is_object().then(|| b.unchecked_into())
}

/// `R2Bucket.put`, with the object's content type, custom metadata and SHA-256 (R2 refuses
/// bytes that do not have it).
async fn r2_put(bucket: &R2, object: &core::Object) -> Result<(), String> {
    let set = |o: &JsValue, k: &str, v: &JsValue| {
        worker::js_sys::Reflect::set(o, &JsValue::from_str(k), v).map(|_| ())
    };
    let options: JsValue = worker::js_sys::Object::new().into();
    let http: JsValue = worker::js_sys::Object::new().into();
    let custom: JsValue = worker::js_sys::Object::new().into();
    let built = (|| {
        set(&http, "contentType", &"application/gzip".into())?;
        for (k, v) in &object.metadata {
            set(&custom, k, &JsValue::from_str(v))?;
        }
        set(&options, "httpMetadata", &http)?;
        set(&options, "customMetadata", &custom)?;
        set(&options, "sha256", &JsValue::from_str(&object.sha256))
    })();
    built.map_err(js_message)?;
    let value = Uint8Array::from(object.gzip.as_slice());
    settle(bucket.put(&object.key, &value, &options)).await?;
    Ok(())
}

/// `R2Bucket.get`: the object's bytes and its recorded SHA-256 (custom metadata `sha256`), or
/// `None` when there is no object under the key.
async fn r2_get(bucket: &R2, key: &str) -> Result<Option<(Vec<u8>, Option<String>)>, String> {
    let object = settle(bucket.get(key)).await?;
    if object.is_null() || object.is_undefined() {
        return Ok(None);
    }
    let get = |o: &JsValue, k: &str| worker::js_sys::Reflect::get(o, &JsValue::from_str(k));
    let sha = get(&object, "customMetadata")
        .and_then(|m| get(&m, "sha256"))
        .ok()
        .and_then(|v| v.as_string());
    let read: worker::js_sys::Function = get(&object, "arrayBuffer")
        .map_err(js_message)?
        .dyn_into()
        .map_err(js_message)?;
    let promise = read.call0(&object).map(|p| p.unchecked_into::<Promise>());
    let buffer = settle(promise).await?;
    Ok(Some((Uint8Array::new(&buffer).to_vec(), sha)))
}

/// What the archive needs that is missing or odd, said in `config::warnings`.
pub fn warnings(env: &Env) -> Vec<String> {
    let mut w = Vec::new();
    if bucket(env).is_none() {
        w.push(
            "ARCHIVE (an R2 binding) is not set: no body is archived or removed from D1, which \
             keeps growing"
                .into(),
        );
    }
    if let Some(f) = config::archive_fault(env) {
        w.push(format!(
            "ARCHIVE_FAULT is {:?}: a test setting that makes every archiving run fail",
            f.chars().take(40).collect::<String>()
        ));
    }
    let share = paymos_core::actors::cron::shares(config::invocation_budget(env)).archive;
    if share < MIN_SHARE {
        w.push(format!(
            "INVOCATION_BUDGET leaves the cron {share} operations for archiving, less than a \
             chunk needs ({MIN_SHARE}): only POST /admin/api/archive archives"
        ));
    }
    w
}

/// The retention cutoff now: deliveries received before it are past retention.
pub fn cutoff(env: &Env) -> String {
    let days = i64::from(config::retention_days(env));
    iso_minute(crate::clock::now_seconds() - days * 86_400)
}

// ---------------------------------------------------------------- the run's driver

#[derive(Deserialize)]
struct Removed {}

#[derive(Deserialize)]
struct Bodies {
    #[serde(deserialize_with = "paymos_core::rows::int")]
    bodies: i64,
}

/// One invocation's share of a run: each step the core asks for, done.
pub async fn run(env: &Env, bucket: &R2, db: &D1Database, start: Start, budget: u32) -> Report {
    let mut run = Run::new(start, Settings::new(budget));
    let fault = fault(env);
    let mut step = run.next();
    loop {
        step = match step {
            Step::Compress(text) => run.compressed(gzip(&text).await),
            Step::Write(object) => {
                let read = write_and_read_back(bucket, object, fault).await;
                run.read_back(read)
            }
            Step::Done => break,
            // a failed D1 call is recorded with its statement and kind (`DbError`)
            step => match database_step(db, &mut run, step).await {
                Ok(()) => run.next(),
                Err(e) => run.db_failed(&e),
            },
        };
    }
    run.report()
}

/// A step that is a D1 call: its answer handed to the run.
async fn database_step(db: &D1Database, run: &mut Run, step: Step) -> Result<(), String> {
    let text = |e: DbError| e.to_string();
    match step {
        Step::Open(statements) => {
            let results = sql::run_batch(db, &statements).await.map_err(text)?;
            let last = results.len().saturating_sub(1);
            let rows = sql::rows_of::<RunRow>(&results, last).map_err(text)?;
            run.opened(rows.into_iter().next());
        }
        Step::Candidates(b) => run.candidates(sql::all_rows(db, b).await.map_err(text)?),
        Step::Load(b) => run.loaded(sql::all_rows(db, b).await.map_err(text)?),
        Step::Remove(statements) => {
            let results = sql::run_batch(db, &statements).await.map_err(text)?;
            let removed = sql::rows_of::<Removed>(&results, REMOVED_AT).map_err(text)?;
            run.removed(removed.len());
        }
        Step::Finish(b) => {
            sql::run_batch(db, &[b]).await.map_err(text)?;
            run.finished();
        }
        Step::Remaining(b) => {
            let rows: Vec<Bodies> = sql::all_rows(db, b).await.map_err(text)?;
            run.remaining(rows.first().map_or(0, |r| r.bodies));
        }
        // run() does these itself; never sent here
        Step::Compress(_) | Step::Write(_) | Step::Done => return Err("not a D1 call".into()),
    }
    Ok(())
}

/// Puts the object, gets it back and gunzips what was read.
async fn write_and_read_back(bucket: &R2, object: core::Object, fault: Option<Fault>) -> ReadBack {
    if fault != Some(Fault::DropPut) {
        if let Err(e) = r2_put(bucket, &object).await {
            return ReadBack::Failed(format!("the put failed: {e}"));
        }
    }
    let mut bytes = match r2_get(bucket, &object.key).await {
        Ok(Some((bytes, _))) => bytes,
        Ok(None) => return ReadBack::Missing,
        Err(e) => return ReadBack::Failed(format!("the read-back failed: {e}")),
    };
    if fault == Some(Fault::CorruptRead) {
        let middle = bytes.len() / 2;
        if let Some(b) = bytes.get_mut(middle) {
            *b ^= 0x01;
        }
    }
    let text = gunzip(&bytes).await;
    ReadBack::Read { bytes, text }
}

fn log_report(stage: &str, r: &Report) {
    let detail = format!(
        "run {}: archived {}, objects {}, bytes {}{}",
        r.run_id.map_or("-".into(), |i| i.to_string()),
        r.archived,
        r.objects,
        r.bytes,
        r.error
            .as_deref()
            .map(|e| format!("; {e}"))
            .unwrap_or_default()
    );
    log::line(stage, "-", r.state.as_str(), Some(&detail));
}

/// The cron's part: the daily cron starts the day's run (now − `RETENTION_DAYS`), every other
/// cron continues an unfinished one. Without an `ARCHIVE` binding nothing is done (the daily
/// cron says so).
pub async fn scheduled(env: &Env, daily: bool, budget: u32) {
    let Some(bucket) = bucket(env) else {
        if daily {
            log::line(
                "archive",
                "-",
                "not_configured",
                Some("ARCHIVE is not bound: nothing is archived"),
            );
        }
        return;
    };
    let db = match sql::database(env) {
        Ok(db) => db,
        Err(e) => {
            log::line("archive", "-", "error", Some(&e.to_string()));
            return;
        }
    };
    let start = if daily {
        Start::Daily {
            before: cutoff(env),
        }
    } else {
        Start::Continue
    };
    let report = run(env, &bucket, &db, start, budget).await;
    if report.state != RunState::NoRun {
        log_report("archive", &report);
    }
}

/// `POST /admin/api/archive`: within this invocation's budget; `{archived, remaining,
/// next_cursor}` (and the run's id, state, objects, bytes). A failed run is a 502
/// `archive_failed` saying why; nothing of its failing chunk was removed.
pub async fn admin(env: &Env, a: &Archive, record: &Record) -> AppResult<Response> {
    // any past time (a time to come would archive what has not happened yet), checked
    // before anything runs: a refusal (400) is not audited, as the other writes'
    if core::unix_of_time(&a.before).is_some_and(|t| t > crate::clock::now_seconds()) {
        return Err(AppError::BadRequest(
            "invalid_time",
            "before is in the future: archive what was received before a past time".into(),
        ));
    }
    let result = archive_now(env, a).await;
    // written after the run, with how it ended, as reconciliation's: the run spans many
    // batches of its own (one per chunk); a row that cannot be written is logged
    let outcome = match &result {
        Ok((state, _)) => archive_outcome(state),
        Err(_) => Outcome::Failed,
    };
    crate::admin::audit::record_after(env, record, outcome).await;
    Ok(Response::from_json(&result?.1)?)
}

/// The operator's run: its state's word and the answer's body.
async fn archive_now(env: &Env, a: &Archive) -> AppResult<(&'static str, serde_json::Value)> {
    let bucket = bucket(env).ok_or_else(|| {
        AppError::NotConfigured(
            "archive_not_configured",
            "ARCHIVE (an R2 binding) is not set: nothing can be archived".into(),
        )
    })?;
    let db = sql::database(env)?;
    let budget = config::admin_budget(env);
    let start = Start::Admin {
        before: a.before.clone(),
        after: a.after.clone(),
    };
    let r = run(env, &bucket, &db, start, budget).await;
    log_report("archive_admin", &r);
    if r.state == RunState::Failed {
        return Err(AppError::Archive(format!(
            "{}; {} archived before it, nothing of the failing chunk removed",
            r.error.as_deref().unwrap_or("the run failed"),
            r.archived
        )));
    }
    Ok((
        r.state.as_str(),
        json!({
            "archived": r.archived,
            "remaining": r.remaining,
            "next_cursor": r.next_cursor,
            "run_id": r.run_id,
            "state": r.state.as_str(),
            "objects": r.objects,
            "bytes": r.bytes,
            "before": r.before,
        }),
    ))
}

// ---------------------------------------------------------------- the archive's state

/// What the metrics show of the database and the archive (interface §10).
#[derive(Debug)]
pub struct Status {
    /// An `ARCHIVE` binding is set.
    pub configured: bool,
    /// The database's size as D1 reports it (`meta.size_after`).
    pub database_bytes: Option<f64>,
    pub size_limit_bytes: u64,
    pub retention_days: u32,
    /// Deliveries received before it are past retention.
    pub cutoff: String,
    /// Bodies of processed deliveries past retention still in D1 (counted up to `BACKLOG_CAP`).
    pub backlog: i64,
    /// The oldest body of a processed delivery still in D1.
    pub oldest_body_received_at: Option<String>,
    /// The latest run.
    pub last_run: Option<LastRun>,
}

/// An archiving run as the metrics show it (`LATEST_ARCHIVE_RUN`).
#[derive(Debug, Deserialize, serde::Serialize)]
pub struct LastRun {
    #[serde(deserialize_with = "paymos_core::rows::int")]
    pub id: i64,
    pub started_by: String,
    pub before: String,
    /// `running` (the cron continues it), `done`, `partial`, `failed` or `superseded`.
    pub state: String,
    #[serde(deserialize_with = "paymos_core::rows::int")]
    pub archived: i64,
    #[serde(deserialize_with = "paymos_core::rows::int")]
    pub objects: i64,
    #[serde(deserialize_with = "paymos_core::rows::int")]
    pub bytes: i64,
    #[serde(deserialize_with = "paymos_core::rows::int")]
    pub invocations: i64,
    pub error: Option<String>,
    pub started_at: String,
    pub updated_at: String,
    pub finished_at: Option<String>,
}

impl Status {
    /// `/admin/api/metrics`'s `database`: the size against the cap.
    pub fn database_json(&self) -> Value {
        json!({
            "bytes": self.database_bytes.map(|b| b as u64),
            "size_limit_bytes": self.size_limit_bytes,
            "used_ratio": self.used_ratio(),
        })
    }

    /// The size over `DATABASE_SIZE_LIMIT_BYTES`, when D1 reported a size.
    pub fn used_ratio(&self) -> Option<f64> {
        self.database_bytes
            .map(|b| b / (self.size_limit_bytes.max(1) as f64))
    }

    /// `/admin/api/metrics`'s `archive`.
    pub fn archive_json(&self) -> Value {
        json!({
            "configured": self.configured,
            "retention_days": self.retention_days,
            "cutoff": self.cutoff,
            "bodies_past_retention": self.backlog,
            "bodies_past_retention_capped": self.backlog >= BACKLOG_CAP,
            "oldest_body_received_at": self.oldest_body_received_at,
            "last_run": self.last_run,
        })
    }

    /// What the `database_size` and `archive` alerts look at.
    pub fn storage_facts(&self) -> paymos_core::alerts::StorageFacts {
        paymos_core::alerts::StorageFacts {
            database_bytes: self.database_bytes.map(|b| b as i64),
            size_limit_bytes: i64::try_from(self.size_limit_bytes).unwrap_or(i64::MAX),
            archive_failed: self
                .last_run
                .as_ref()
                .filter(|r| r.state == "failed")
                .map(|r| (r.id, r.error.clone().unwrap_or_default())),
        }
    }

    /// Whether the last run failed (`None` before the first run).
    pub fn last_run_failed(&self) -> Option<bool> {
        Some(self.last_run.as_ref()?.state == "failed")
    }

    /// The Prometheus families (text format 0.0.4) of the database and the archive. A value
    /// not known yet (no size reported, no run yet) has no sample: a 0 would read as one.
    pub fn prometheus(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let mut gauge = |name: &str, help: &str, value: Option<i64>| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            if let Some(v) = value {
                let _ = writeln!(out, "{name} {v}");
            }
        };
        gauge(
            "paymos_database_bytes",
            "The database's size as D1 reports it (meta.size_after), in bytes.",
            self.database_bytes.map(|b| b as i64),
        );
        gauge(
            "paymos_database_size_limit_bytes",
            "DATABASE_SIZE_LIMIT_BYTES: the database_size alert opens at 80 % of it.",
            i64::try_from(self.size_limit_bytes).ok(),
        );
        gauge(
            "paymos_archive_configured",
            "1 if the ARCHIVE R2 binding is set (without it no body leaves D1).",
            Some(i64::from(self.configured)),
        );
        let help = format!(
            "Bodies of processed deliveries received more than RETENTION_DAYS ago still in D1 (counted up to {BACKLOG_CAP})."
        );
        gauge(
            "paymos_archive_bodies_past_retention",
            &help,
            Some(self.backlog),
        );
        gauge(
            "paymos_archive_last_run_ok",
            "1 unless the last archiving run failed (no sample before the first run).",
            self.last_run_failed().map(|failed| i64::from(!failed)),
        );
        gauge(
            "paymos_archive_last_run_archived",
            "Bodies the last archiving run removed from D1 so far (no sample before the first run).",
            self.last_run.as_ref().map(|r| r.archived),
        );
        out
    }
}

/// The archive's state and the database's size: two bounded queries (the backlog reads the
/// partial index of bodies still in D1, up to `BACKLOG_CAP` entries; the last run is one row).
pub async fn status(env: &Env, db: &D1Database) -> AppResult<Status> {
    #[derive(Deserialize)]
    struct Backlog {
        #[serde(deserialize_with = "paymos_core::rows::int")]
        bodies: i64,
        oldest_received_at: Option<String>,
    }
    let cutoff = cutoff(env);
    let (rows, size) = sql::all_with_size::<Backlog>(
        db,
        st::ARCHIVE_BACKLOG.bind(vec![Arg::text(&cutoff), Arg::Int(BACKLOG_CAP)]),
    )
    .await?;
    let backlog = rows.into_iter().next();
    let last_run: Vec<LastRun> = sql::all_rows(db, st::LATEST_ARCHIVE_RUN.bind(vec![])).await?;
    Ok(Status {
        configured: bucket(env).is_some(),
        database_bytes: size,
        size_limit_bytes: config::database_size_limit_bytes(env),
        retention_days: config::retention_days(env),
        cutoff,
        backlog: backlog.as_ref().map_or(0, |b| b.bodies),
        oldest_body_received_at: backlog.and_then(|b| b.oldest_received_at),
        last_run: last_run.into_iter().next(),
    })
}

// ---------------------------------------------------------------- a replay's restore

#[derive(Deserialize)]
struct ArchivedRow {
    event_id: String,
    archive_key: String,
}

/// The bodies of `rows` read back from their objects: (event id, archive key, body) for a
/// `RESTORE_BODY` each. Each object is read once and checked against the SHA-256 recorded
/// at its write.
async fn read_bodies(
    bucket: &R2,
    rows: &[(String, String)],
) -> AppResult<Vec<(String, String, String)>> {
    let mut out = Vec::with_capacity(rows.len());
    for key in core::objects_to_read(rows) {
        let (bytes, recorded) = r2_get(bucket, key)
            .await
            .map_err(|e| AppError::Archive(format!("{key} could not be read: {e}")))?
            .ok_or_else(|| AppError::Archive(format!("{key} is not in the archive")))?;
        core::check_object(key, &bytes, recorded.as_deref()).map_err(AppError::Archive)?;
        let text = gunzip(&bytes)
            .await
            .map_err(|e| AppError::Archive(format!("{key} does not gunzip: {e}")))?;
        out.extend(core::bodies_of_object(key, &text, rows).map_err(AppError::Archive)?);
    }
    Ok(out)
}

/// An archived delivery's body read back from its object (checked as a replay's restore
/// is), for `GET /deliveries/{event_id}`: it answers for an archived delivery as before
/// (interface §10). `None` without an `ARCHIVE` binding.
pub async fn body_of(env: &Env, event_id: &str, key: &str) -> AppResult<Option<String>> {
    let Some(bucket) = bucket(env) else {
        return Ok(None);
    };
    let mut read = read_bodies(&bucket, &[(event_id.to_string(), key.to_string())]).await?;
    Ok(read.pop().map(|(_, _, body)| body))
}

fn no_bucket() -> AppError {
    AppError::NotConfigured(
        "archive_not_configured",
        "the body is in the archive and ARCHIVE (an R2 binding) is not set: it cannot be read back"
            .into(),
    )
}

/// A single replay's reset (`RESET_FOR_REPLAY`, a new generation), its body first restored
/// from the archive in the same batch when it is archived. `None`: no such delivery.
pub async fn reset_for_replay(
    env: &Env,
    db: &D1Database,
    event_id: &str,
    record: &Record,
) -> AppResult<Option<i64>> {
    #[derive(Deserialize)]
    struct Generation {
        #[serde(deserialize_with = "paymos_core::rows::int")]
        generation: i64,
    }
    // the common case, one batch: a row whose body is in D1
    match sql::reset_for_replay(db, event_id, record).await? {
        sql::Reset::Done(g) => return Ok(Some(g)),
        sql::Reset::Absent => return Ok(None),
        sql::Reset::Archived => {}
    }
    // archived: restored and reset in one batch (once more if it was archived again between)
    for _ in 0..2 {
        let archived: Vec<ArchivedRow> = sql::all_rows(
            db,
            st::ARCHIVED_AMONG.bind(vec![Arg::json_list(&[event_id])]),
        )
        .await?;
        let Some(row) = archived.into_iter().next() else {
            // restored by another replay meanwhile (or deleted): as the common case
            match sql::reset_for_replay(db, event_id, record).await? {
                sql::Reset::Done(g) => return Ok(Some(g)),
                sql::Reset::Absent => return Ok(None),
                sql::Reset::Archived => continue,
            }
        };
        let bucket = bucket(env).ok_or_else(no_bucket)?;
        let restored = read_bodies(&bucket, &[(row.event_id, row.archive_key)]).await?;
        let mut statements = restore_statements(&restored);
        // the tally, the reset and its audit row, after the restore (`audited_replay_batch`)
        statements.extend(st::audited_replay_batch(event_id, record));
        let results = sql::run_batch(db, &statements).await?;
        // a row that does not read is a 500 here, as it was (not the database's outage)
        let reset = sql::rows_of::<Generation>(&results, results.len() - 2)
            .map_err(|e| AppError::Internal(e.to_string()))?
            .into_iter()
            .next();
        if let Some(r) = reset {
            log::line("replay", event_id, "restored_from_archive", None);
            return Ok(Some(r.generation));
        }
    }
    Err(AppError::Conflict(
        "archive_busy",
        "the delivery was archived again while its body was being restored: replay it again".into(),
    ))
}

/// A bulk replay's count (`COUNT_REPLAY`): the deliveries its filter matches, and how many of
/// them have their body in the archive (none: its chunks need not look).
pub async fn count_replay(db: &D1Database, f: &SweepFilter) -> AppResult<(i64, i64)> {
    #[derive(Deserialize)]
    struct Count {
        #[serde(deserialize_with = "paymos_core::rows::int")]
        matched: i64,
        #[serde(default, deserialize_with = "paymos_core::rows::int")]
        archived: i64,
    }
    let rows: Vec<Count> = sql::all_rows(db, f.count()).await?;
    Ok(rows.first().map_or((0, 0), |c| (c.matched, c.archived)))
}

/// A restoring bulk replay's claim (`actors::sweep`): the bodies of `archived` read back from
/// their objects, put back (`RESTORE_BODY`) in one batch with the claim (`TALLY_REPLAY_CHUNK`
/// and `REPLAY_CHUNK`, which resets them), and `first` (the replay's audit row) after the claim when this is its first;
/// the claim's rows.
pub async fn restore_and_claim(
    env: &Env,
    db: &D1Database,
    archived: &[(String, String)],
    claim: Vec<Bound<'static>>,
    first: Option<Bound<'_>>,
) -> AppResult<Vec<Claimed>> {
    let bucket = bucket(env).ok_or_else(no_bucket)?;
    let restored = read_bodies(&bucket, archived).await?;
    let mut statements = restore_statements(&restored);
    // the claim: its tally, then the chunk, whose rows are its last statement's
    statements.extend(claim);
    let at = statements.len() - 1;
    statements.extend(first);
    let results = sql::run_batch(db, &statements).await?;
    Ok(sql::rows_of(&results, at)?)
}
