//! The deliveries queue's consumer, its dead-letter consumer and the sweeper, driven here
//! over D1 and the queues; the decisions are the core's (`paymos_core::actors::consume`,
//! `::dead_letter`).

use crate::config;
use crate::error::AppResult;
use crate::queue::{self, DeliveryMessage, Incoming};
use crate::{log, sql, transition};
use paymos_core::actors::consume::{self, Batch, Driven};
use paymos_core::actors::sweep::{Chunks, Kind};
use paymos_core::actors::{dead_letter, Answer};
use paymos_core::is_valid_event_id;
use paymos_core::rows::{ConsumeRow, DeliveryRow};
use paymos_core::statements::Bound;
use worker::{D1Database, Env};

fn settings(config: &config::ConsumeConfig) -> consume::Settings {
    consume::Settings {
        mode: config.mode.clone(),
        pull: config.pull,
        retry_base: config.retry_base_seconds,
        plan: None,
        edit: None,
    }
}

/// A batch from the deliveries queue or its dead-letter queue. Messages that are not ours
/// are logged and acknowledged (retrying cannot make them readable).
pub async fn consume(queue_name: &str, messages: Vec<Incoming>, env: &Env) -> worker::Result<()> {
    let config = config::consume_config(env);
    let db = match sql::database(env) {
        Ok(db) => db,
        Err(e) => {
            // no database binding: nothing can be processed; the queue retries the batch
            log::line("consume", "-", "error", Some(&e.to_string()));
            for m in &messages {
                m.retry_in(config.retry_base_seconds.max(1));
            }
            return Ok(());
        }
    };
    let mut readable = Vec::with_capacity(messages.len());
    for message in messages {
        match message
            .delivery()
            .filter(|m| is_valid_event_id(&m.event_id))
        {
            Some(m) => readable.push((message, m)),
            None => {
                log::line("consume", "-", "unreadable_message", None);
                message.ack();
            }
        }
    }
    if queue_name == config.dead_letter_queue {
        let base = config.retry_base_seconds;
        for (message, m) in readable {
            dead_letter_one(env, &db, &message, &m, base).await;
        }
        return Ok(());
    }
    let batch: Vec<_> = readable
        .iter()
        .map(|(message, m)| consume::Message {
            event_id: m.event_id.clone(),
            generation: m.generation,
            attempts: message.attempts(),
            facts: m.facts.clone(),
        })
        .collect();
    let settings = settings(&config);
    let budget = config::invocation_budget(env);
    let mut io = Worker { db: &db, calls: 0 };
    // as many deliveries per load as their bodies allow (`per_load`), driven first to last
    let mut pending: Vec<_> = batch
        .chunks(config.per_load)
        .enumerate()
        .map(|(i, part)| {
            let at = i * config.per_load;
            (Batch::new(part.to_vec(), settings.clone()), at, part.len())
        })
        .rev()
        .collect();
    // a batch that fails is split, message by message, each driven in turn while the
    // invocation's budget lasts; the messages it cannot reach are retried
    while let Some((mut batch, offset, len)) = pending.pop() {
        if io.calls > 0 && io.calls + BATCH_COST > budget {
            let left: Vec<usize> = std::iter::once((offset, len))
                .chain(pending.drain(..).map(|(_, o, n)| (o, n)))
                .flat_map(|(o, n)| o..o + n)
                .collect();
            let why = format!("{} messages retried", left.len());
            log::line("consume", "-", "budget_spent", Some(&why));
            for m in left {
                readable[m].0.retry_in(config.retry_base_seconds.max(1));
            }
            break;
        }
        match consume::drive(&mut batch, &mut io).await {
            Driven::Answered(answered) => {
                io.calls += u32::from(!answered.released.is_empty());
                answer(env, &readable, offset, answered).await
            }
            Driven::Split(messages, why) => {
                log::line("consume", "-", "batch_fallback", Some(&why));
                for (i, m) in messages.into_iter().enumerate().rev() {
                    pending.push((Batch::new(vec![m], settings.clone()), offset + i, 1));
                }
            }
        }
    }
    Ok(())
}

/// What driving one batch (or one message of a split batch) may cost: its load, its
/// transaction or its failure's record, and the send of what it released.
const BATCH_COST: u32 = 3;

/// The consumer's and the dead-letter consumer's I/O in a Worker: D1, and the platform's
/// CSPRNG. `calls` counts this invocation's D1 calls and sends (its budget).
struct Worker<'a> {
    db: &'a D1Database,
    calls: u32,
}

impl consume::Io for Worker<'_> {
    fn draw(&mut self) -> [u8; 16] {
        transition::draw()
    }

    async fn load(&mut self, b: Bound<'static>) -> Result<Vec<ConsumeRow>, String> {
        self.calls += 1;
        sql::all_rows::<ConsumeRow>(self.db, b)
            .await
            .map_err(consume::database_unavailable)
    }

    async fn apply(
        &mut self,
        statements: Vec<Bound<'static>>,
        _: &Batch,
    ) -> Result<Vec<Vec<serde_json::Value>>, String> {
        self.calls += 1;
        let results = sql::run_batch(self.db, &statements)
            .await
            .map_err(consume::database_unavailable)?;
        Ok(sql::json_rows(results))
    }

    async fn record_failure(&mut self, b: Bound<'static>) {
        // visible in the archive; best effort (D1 may be what is failing)
        self.calls += 1;
        let _ = sql::returned_row(self.db, b).await;
    }
}

impl dead_letter::Io for Worker<'_> {
    type Error = sql::DbError;

    async fn mark(&mut self, b: Bound<'static>) -> sql::DbResult<bool> {
        sql::returned_row(self.db, b).await
    }

    async fn load(&mut self, event_id: &str) -> sql::DbResult<Option<DeliveryRow>> {
        sql::load_delivery(self.db, event_id).await
    }

    async fn count(&mut self, b: Bound<'static>) -> sql::DbResult<()> {
        sql::returned_row(self.db, b).await.map(drop)
    }
}

/// Acks or retries each message as the core said, logs, and sends what the transaction
/// released (it committed).
async fn answer(
    env: &Env,
    messages: &[(Incoming, DeliveryMessage)],
    offset: usize,
    answered: consume::Answered,
) {
    for line in &answered.lines {
        log::line("consume", &line.event_id, line.outcome, Some(&line.detail));
    }
    for r in &answered.replies {
        let Some((message, _)) = messages.get(offset + r.message) else {
            continue;
        };
        log::line("consume", &r.event_id, r.outcome, r.detail.as_deref());
        match r.answer {
            Answer::Ack | Answer::AckAndSendAfter(_) => message.ack(),
            Answer::Retry(delay) => message.retry_in(delay),
        }
    }
    crate::effects::send_released(env, &answered.released).await;
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
    let verdict = dead_letter::decide(
        &mut Worker { db, calls: 0 },
        &m.event_id,
        m.generation,
        &dead_letter::Mutation::default(),
    )
    .await;
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
            // the envelope's facts do not change with the generation
            let again = DeliveryMessage {
                event_id: m.event_id.clone(),
                generation,
                facts: m.facts.clone(),
            };
            match queue::enqueue(env, again).await {
                Ok(()) => {
                    let why = "its failures were not recorded (D1 unreachable, the consumer died, or it waits for a refund): handed back, counted as one unless it waits";
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
            log::line("dead_letter", &m.event_id, "error", Some(&e.to_string()));
            message.retry_in(base.max(1));
        }
    }
}

/// Wall-clock budget of one sweep, well inside a cron invocation's limits.
const SWEEP_MILLIS: u64 = 20_000;

/// Re-enqueues deliveries left unprocessed too long, so a lost enqueue or a crashed consumer
/// never loses a delivery: the core's sweeper (`actors::sweep`), chunks of 100 until nothing
/// is left, the time budget is spent, or `budget` (D1 queries + subrequests: a claim and a
/// send a chunk) is.
pub async fn sweep(env: &Env, budget: u32) -> AppResult<usize> {
    let db = sql::database(env)?;
    let kind = Kind::Deliveries {
        older_than: config::sweep_after_seconds(env),
    };
    let chunks = Chunks::within(kind, budget);
    let done = crate::sweep::drive(
        env,
        &db,
        chunks,
        crate::sweep::Queue::Deliveries,
        Some(SWEEP_MILLIS),
    )
    .await?;
    log::line(
        "sweep",
        "-",
        &format!("requeued {}", done.sent),
        done.failure.as_deref(),
    );
    Ok(done.sent)
}
