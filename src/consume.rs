//! The queue consumer, the dead-letter consumer and the sweeper.

use crate::error::{AppError, AppResult};
use crate::transition::{self, Change};
use crate::{config, log, sql};
use paymos_core::ladder::consumer_retry_delay;
use paymos_core::{is_valid_event_id, machine, parse_envelope};
use serde::{Deserialize, Serialize};
use worker::{D1Database, Env, MessageBatch, MessageExt, QueueRetryOptionsBuilder};

/// What travels on the queue: only the id. The delivery itself is in D1.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeliveryMessage {
    pub event_id: String,
}

pub const QUEUE_BINDING: &str = "DELIVERIES";

/// What processing one delivery came to.
#[derive(Debug, PartialEq)]
pub enum Processed {
    Outcome(String),
    AlreadyProcessed,
    Missing,
}

/// Loads the delivery and applies its transition, once.
pub async fn process_delivery(db: &D1Database, event_id: &str) -> AppResult<Processed> {
    let Some(delivery) = sql::load_delivery(db, event_id).await? else {
        return Ok(Processed::Missing);
    };
    if delivery.processed_at.is_some() {
        return Ok(Processed::AlreadyProcessed);
    }
    let body = delivery.body.unwrap_or_default();
    let envelope = parse_envelope(body.as_bytes(), Some(event_id))
        .map_err(|e| AppError::Internal(format!("stored body does not parse: {e}")))?;
    let Some((kind, to)) = machine::target_state(&envelope.event_type) else {
        sql::mark_ignored(db, event_id).await?;
        return Ok(Processed::Outcome("ignored".into()));
    };
    let result = transition::apply(
        db,
        &Change {
            resource_id: &envelope.resource_id,
            kind,
            to,
            order_ref: envelope.data_str("order_ref"),
            amount: envelope.data_str("amount"),
            currency: envelope.data_str("currency"),
            cause_kind: "event",
            cause: event_id,
            delivery: Some(event_id),
        },
    )
    .await?;
    Ok(Processed::Outcome(
        result.outcome.unwrap_or_else(|| "stale".into()),
    ))
}

pub async fn consume(batch: MessageBatch<DeliveryMessage>, env: &Env) -> worker::Result<()> {
    let db = env.d1("DB")?;
    let dead_letter = batch.queue().ends_with("-dlq");
    let base = config::retry_base_seconds(env);
    // message by message: one that is not ours must not hold back the rest of the batch
    for message in batch.raw_iter() {
        let event_id = match serde_wasm_bindgen::from_value::<DeliveryMessage>(message.body()) {
            Ok(m) if is_valid_event_id(&m.event_id) => m.event_id,
            _ => {
                // retrying cannot make it readable: log it and let it go
                log::line("consume", "-", "unreadable_message", None);
                message.ack();
                continue;
            }
        };
        if dead_letter {
            // every retry failed: the delivery stays, marked dead, visible and replayable
            match sql::mark_dead(&db, &event_id).await {
                Ok(()) => {
                    log::line("dead_letter", &event_id, "dead", None);
                    message.ack();
                }
                Err(e) => {
                    log::line("dead_letter", &event_id, "error", Some(&e.to_string()));
                    message.retry();
                }
            }
            continue;
        }
        match process_delivery(&db, &event_id).await {
            Ok(processed) => {
                let outcome = match &processed {
                    Processed::Outcome(o) => o.as_str(),
                    Processed::AlreadyProcessed => "already_processed",
                    Processed::Missing => "missing",
                };
                log::line("consume", &event_id, outcome, None);
                message.ack();
            }
            Err(e) => {
                let error = format!("{}: {}", e.code(), e.detail().unwrap_or(""));
                let attempts = sql::record_failure(&db, &event_id, &error)
                    .await
                    .unwrap_or(1);
                let delay = consumer_retry_delay(base, attempts);
                log::line(
                    "consume",
                    &event_id,
                    "retry",
                    Some(&format!("{error}; retry in {delay}s")),
                );
                message.retry_with_options(
                    &QueueRetryOptionsBuilder::new()
                        .with_delay_seconds(delay)
                        .build(),
                );
            }
        }
    }
    Ok(())
}

/// Re-enqueues deliveries left unprocessed too long: a lost enqueue or a crashed consumer
/// never loses a delivery.
pub async fn sweep(env: &Env) -> AppResult<usize> {
    let db = env.d1("DB")?;
    let queue = env.queue(QUEUE_BINDING)?;
    let ids = sql::claim_unprocessed(&db, config::sweep_after_seconds(env), 500).await?;
    for chunk in ids.chunks(100) {
        let messages: Vec<DeliveryMessage> = chunk
            .iter()
            .map(|id| DeliveryMessage {
                event_id: id.clone(),
            })
            .collect();
        queue.send_batch(messages).await?;
    }
    log::line("sweep", "-", &format!("requeued {}", ids.len()), None);
    Ok(ids.len())
}
