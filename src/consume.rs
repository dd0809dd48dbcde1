//! The queue consumer, the dead-letter consumer and the sweeper.

use crate::config::{self, Mode};
use crate::error::{AppError, AppResult};
use crate::queue::{self, DeliveryMessage, Incoming};
use crate::transition::{self, Change};
use crate::{log, sql};
use paymos_core::actors::dead_letter;
use paymos_core::ladder::consumer_retry_delay;
use paymos_core::{is_valid_event_id, machine, parse_envelope, CauseKind, Envelope, Outcome};
use worker::{D1Database, Date, Env};

/// Why a delivery was processed without changing anything, on record in `reason`.
pub const LIVEMODE_MISMATCH: &str = "livemode_mismatch";
pub const UNKNOWN_EVENT_TYPE: &str = "unknown_event_type";

/// What processing one delivery came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Processed {
    Outcome(Outcome),
    /// Ignored, with the reason on record.
    Ignored(&'static str),
    AlreadyProcessed,
    Missing,
}

/// Loads the delivery and applies its transition, once.
pub async fn process_delivery(
    env: &Env,
    db: &D1Database,
    event_id: &str,
    mode: Mode,
) -> AppResult<Processed> {
    let Some(delivery) = sql::load_delivery(db, event_id).await? else {
        return Ok(Processed::Missing);
    };
    if delivery.processed_at.is_some() {
        return Ok(Processed::AlreadyProcessed);
    }
    let body = delivery.body.unwrap_or_default();
    let envelope = parse_envelope(body.as_bytes(), Some(event_id))
        .map_err(|e| AppError::Internal(format!("stored body does not parse: {e}")))?;
    let change = match event_change(&envelope, event_id, mode, config::pull_mode(env)) {
        Ok(change) => change,
        Err(reason) => {
            sql::mark_ignored(db, event_id, reason).await?;
            return Ok(Processed::Ignored(reason));
        }
    };
    let result = transition::apply(db, &change).await?;
    crate::effects::send_released(env, &result.released).await;
    Ok(Processed::Outcome(result.outcome.unwrap_or(Outcome::Stale)))
}

/// The change a stored delivery's event makes, or why it is ignored: a test-mode event never
/// changes a live resource, nor the reverse (CONTRACT §8), and an unknown type changes nothing.
fn event_change<'a>(
    envelope: &'a Envelope,
    event_id: &'a str,
    mode: Mode,
    pull: bool,
) -> Result<Change<'a>, &'static str> {
    if !mode.accepts(envelope.livemode) {
        return Err(LIVEMODE_MISMATCH);
    }
    let (kind, to) = machine::target_state(&envelope.event_type).ok_or(UNKNOWN_EVENT_TYPE)?;
    Ok(Change {
        resource_id: &envelope.resource_id,
        kind,
        to,
        order_ref: envelope.data_str("order_ref"),
        amount: envelope.data_str("amount"),
        currency: envelope.data_str("currency"),
        cause_kind: CauseKind::Event,
        cause: event_id,
        delivery: Some(event_id),
        pull,
    })
}

/// A batch from the deliveries queue or its dead-letter queue, message by message: one that
/// is not ours, or fails, must not hold back the rest.
pub async fn consume(queue_name: &str, messages: Vec<Incoming>, env: &Env) -> worker::Result<()> {
    let db = match sql::database(env) {
        Ok(db) => db,
        Err(e) => {
            // no database binding: nothing can be processed; the queue retries the batch
            log::line("consume", "-", "error", Some(&e.0));
            for m in &messages {
                m.retry_in(config::retry_base_seconds(env).max(1));
            }
            return Ok(());
        }
    };
    let dead_letter = queue_name == config::dead_letter_queue(env);
    let base = config::retry_base_seconds(env);
    let mode = config::mode(env);
    let mut readable = Vec::with_capacity(messages.len());
    for message in messages {
        match message
            .delivery()
            .filter(|m| is_valid_event_id(&m.event_id))
        {
            Some(m) => readable.push((message, m)),
            None => {
                // retrying cannot make it readable: log it and let it go
                log::line("consume", "-", "unreadable_message", None);
                message.ack();
            }
        }
    }
    if dead_letter {
        for (message, m) in readable {
            dead_letter_one(env, &db, &message, &m, base).await;
        }
        return Ok(());
    }
    // The whole batch in two D1 round trips (one load, one transaction): the guard makes each
    // message's statements independent, and one transaction applies them in order. If that
    // fails, message by message, so one poison message cannot hold back the rest.
    if let (Ok(mode), true) = (&mode, readable.len() > 1) {
        match process_batch(env, &db, &readable, *mode).await {
            Ok(outcomes) => {
                for ((message, m), processed) in readable.iter().zip(outcomes) {
                    log_processed(&m.event_id, &processed);
                    message.ack();
                }
                return Ok(());
            }
            Err(e) => log::line(
                "consume",
                "-",
                "batch_fallback",
                Some(&format!("{}: {}", e.code(), e.detail().unwrap_or(""))),
            ),
        }
    }
    for (message, DeliveryMessage { event_id, .. }) in readable {
        let result = match &mode {
            Ok(mode) => process_delivery(env, &db, &event_id, *mode).await,
            Err(e) => Err(AppError::NotConfigured("invalid_mode", e.to_string())),
        };
        match result {
            Ok(processed) => {
                log_processed(&event_id, &processed);
                message.ack();
            }
            Err(e) => {
                let error = format!("{}: {}", e.code(), e.detail().unwrap_or(""));
                // the delay follows the queue's own count, which keeps growing while D1 is
                // down (a D1 counter would not)
                let attempts = message.attempts();
                let delay = consumer_retry_delay(base, i64::from(attempts));
                // visible in the archive; best effort (D1 may be what is failing)
                let _ = sql::record_failure(&db, &event_id, &error).await;
                log::line(
                    "consume",
                    &event_id,
                    "retry",
                    Some(&format!("{error}; attempt {attempts}; retry in {delay}s")),
                );
                message.retry_in(delay);
            }
        }
    }
    Ok(())
}

fn log_processed(event_id: &str, processed: &Processed) {
    let (outcome, reason) = match processed {
        Processed::Outcome(o) => (o.as_str(), None),
        Processed::Ignored(reason) => ("ignored", Some(*reason)),
        Processed::AlreadyProcessed => ("already_processed", None),
        Processed::Missing => ("missing", None),
    };
    log::line("consume", event_id, outcome, reason);
}

/// Every retry failed: the delivery is marked dead (visible, replayable) if it keeps failing
/// on its own, or handed back to the consumer if its failures were not recorded (D1 was down,
/// or its consumer kept dying); a delivery replayed meanwhile (another generation) is left to
/// its replay (`paymos_core::actors::dead_letter`).
async fn dead_letter_one(
    env: &Env,
    db: &D1Database,
    message: &Incoming,
    m: &DeliveryMessage,
    base: u32,
) {
    let mark = dead_letter::mark(&m.event_id, m.generation, &dead_letter::Mutation::default());
    let verdict = match sql::returned_row(db, mark).await {
        Ok(true) => Ok(dead_letter::verdict(true, None, m.generation)),
        Ok(false) => sql::load_delivery(db, &m.event_id)
            .await
            .map(|row| dead_letter::verdict(false, row.as_ref(), m.generation)),
        Err(e) => Err(e),
    };
    match verdict {
        Ok(dead_letter::Verdict::Dead) => {
            log::line("dead_letter", &m.event_id, "dead", None);
            message.ack();
        }
        Ok(dead_letter::Verdict::Superseded(why)) => {
            log::line(
                "dead_letter",
                &m.event_id,
                "dead_letter_superseded",
                Some(why),
            );
            message.ack();
        }
        Ok(dead_letter::Verdict::HandBack { generation }) => {
            let again = DeliveryMessage {
                event_id: m.event_id.clone(),
                generation,
            };
            match queue::enqueue(env, again).await {
                Ok(()) => {
                    let why = "its failures were not recorded (D1 unreachable?): handed back";
                    log::line("dead_letter", &m.event_id, "handed_back", Some(why));
                    message.ack();
                }
                Err(e) => {
                    log::line("dead_letter", &m.event_id, "error", Some(&e.to_string()));
                    message.retry_in(base.max(1));
                }
            }
        }
        Err(e) => {
            log::line("dead_letter", &m.event_id, "error", Some(&e.0));
            message.retry_in(base.max(1));
        }
    }
}

/// What one message of a batch asks of the transaction.
enum Step<'a> {
    Done(Processed),
    Ignore(&'static str),
    Transition(transition::Prepared, Change<'a>),
}

/// Loads the batch's deliveries in one query and applies all of it in one D1 batch. Any
/// error (a body that does not parse, the batch refused) is returned for the fallback.
async fn process_batch(
    env: &Env,
    db: &D1Database,
    messages: &[(Incoming, DeliveryMessage)],
    mode: Mode,
) -> AppResult<Vec<Processed>> {
    let ids: Vec<&str> = messages.iter().map(|(_, m)| m.event_id.as_str()).collect();
    let pull = config::pull_mode(env);
    let rows = sql::load_deliveries(db, &ids).await?;
    let envelopes: Vec<Option<(&sql::DeliveryRow, paymos_core::Envelope)>> = ids
        .iter()
        .map(|id| {
            let Some(row) = rows.iter().find(|r| r.event_id == *id) else {
                return Ok(None);
            };
            if row.processed_at.is_some() {
                return Ok(Some((row, None)));
            }
            let body = row.body.as_deref().unwrap_or_default();
            parse_envelope(body.as_bytes(), Some(id))
                .map(|e| Some((row, Some(e))))
                .map_err(|e| AppError::Internal(format!("stored body does not parse: {e}")))
        })
        .collect::<AppResult<Vec<_>>>()?
        .into_iter()
        .map(|x| x.and_then(|(row, e)| e.map(|e| (row, e))))
        .collect();
    let mut steps = Vec::with_capacity(ids.len());
    for (i, id) in ids.iter().enumerate() {
        let step = match &envelopes[i] {
            None if rows.iter().any(|r| r.event_id == *id) => {
                Step::Done(Processed::AlreadyProcessed)
            }
            None => Step::Done(Processed::Missing),
            Some((_, envelope)) => match event_change(envelope, id, mode, pull) {
                Ok(change) => Step::Transition(transition::prepare(&change)?, change),
                Err(reason) => Step::Ignore(reason),
            },
        };
        steps.push(step);
    }
    // one list of statements; each transition's slice remembered to read its results back
    let mut statements = Vec::new();
    let mut slices = Vec::with_capacity(steps.len());
    for (i, step) in steps.iter().enumerate() {
        let start = statements.len();
        match step {
            Step::Done(_) => {}
            Step::Ignore(reason) => statements.push(sql::mark_ignored_statement(ids[i], reason)),
            Step::Transition(prepared, change) => statements.extend(
                paymos_core::statements::transition_batch(&prepared.request(change)),
            ),
        }
        slices.push(start..statements.len());
    }
    let results = if statements.is_empty() {
        Vec::new()
    } else {
        sql::run_batch(db, &statements).await?
    };
    let mut out = Vec::with_capacity(steps.len());
    let mut released = Vec::new();
    for (step, range) in steps.iter().zip(slices) {
        out.push(match step {
            Step::Done(p) => p.clone(),
            Step::Ignore(reason) => Processed::Ignored(reason),
            Step::Transition(..) => {
                let r = sql::read_transition(&statements[range.clone()], &results[range])?;
                released.extend(r.released);
                Processed::Outcome(r.outcome.unwrap_or(Outcome::Stale))
            }
        });
    }
    crate::effects::send_released(env, &released).await;
    Ok(out)
}

/// How many rows one sweeper claim takes, and one `sendBatch` sends (the platform's limit).
const SWEEP_CHUNK: u32 = 100;
/// Wall-clock budget of one sweep, well inside a cron invocation's limits.
const SWEEP_MILLIS: u64 = 20_000;

/// Re-enqueues deliveries left unprocessed too long, so a lost enqueue or a crashed consumer
/// never loses a delivery. Loops in chunks of 100 until nothing is left, the time budget is
/// spent, or `budget` (D1 queries + subrequests this sweep may use) is; each chunk costs one
/// claim query and one send.
pub async fn sweep(env: &Env, budget: u32) -> AppResult<usize> {
    let db = sql::database(env)?;
    let started = Date::now().as_millis();
    let older_than = config::sweep_after_seconds(env);
    let max_chunks = (budget / 2).max(1);
    let mut total = 0usize;
    let mut chunks = 0;
    let mut failure = None;
    while chunks < max_chunks && Date::now().as_millis().saturating_sub(started) < SWEEP_MILLIS {
        chunks += 1;
        let claimed = sql::claim_unprocessed(&db, older_than, SWEEP_CHUNK).await?;
        let n = claimed.len();
        if n == 0 {
            break;
        }
        let messages = claimed
            .into_iter()
            .map(|(id, generation)| DeliveryMessage::new(id, generation))
            .collect();
        let (sent, err) = queue::enqueue_all(env, messages).await;
        total += sent;
        if let Some(e) = err {
            // claimed rows wait for the next sweep (their enqueued_at moved): nothing lost
            failure = Some(e.to_string());
            break;
        }
        if n < SWEEP_CHUNK as usize {
            break;
        }
    }
    log::line(
        "sweep",
        "-",
        &format!("requeued {total}"),
        failure.as_deref(),
    );
    Ok(total)
}
