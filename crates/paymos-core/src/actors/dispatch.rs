//! The effects dispatcher (interface §3, §7): one queue batch of effect ids, delivered to the
//! order system at least once, signed, under each effect's stable id.
//!
//! A [`Batch`] is a small state machine. Its driver asks [`Batch::next`] what to do, does it
//! (a D1 statement or batch, the POSTs), and hands the result back; the order is always:
//!
//! 1. **load** every effect of the batch in one query (`LOAD_EFFECTS_FOR_DISPATCH`);
//! 2. decide each one before any request ([`before`]): nothing to send (already settled,
//!    awaiting its `order_ref`, pull mode), wait for an earlier effect of its resource, a
//!    retry not due yet, or start an attempt;
//! 3. **start** the attempts in one statement (`START_ATTEMPTS`), committed before any
//!    request: an effect cancelled meanwhile by its refund, or whose attempt another copy of
//!    the message already started, is not returned, and is not posted;
//! 4. **post** the started ones (concurrently, each within the timeout);
//! 5. **record** every outcome in one D1 batch ([`after`]: delivered, a retry on the ladder,
//!    or dead once the ladder is spent and 16 hours have passed since the first attempt);
//! 6. **answer** each message: ack, retry, or ack and send a fresh message for a wait.
//!
//! Why the attempt is committed before its request (step 3): a refund's transaction decides
//! from the fulfilment's row whether the order system may hold it. If attempts were counted
//! after the request, a refund committed while a POST was in flight would see none, cancel
//! the fulfilment without revoking it, and the order system would ship goods whose money went
//! back. Committed first, the refund sees every attempt that may be in flight and records the
//! revocation; and an attempt can only start from a pending row, so none starts after the
//! refund cancelled it. A crash between the commit and the request leaves an attempt that
//! never reached the order system: a refund then revokes what was never received, which an
//! order system answers 2xx and ships nothing for (interface §3). Nothing is lost: the
//! message comes back (or the sweeper re-sends it) and the next attempt starts once this one
//! is past its timeout.

use std::borrow::Cow;

mod drive;
pub use drive::{drive, Io, SIMULTANEOUS_POSTS};

use crate::actors::Answer;
use crate::ladder::{effect_retry_delay, wait_for_earlier_delay, EFFECT_RETRY_DELAYS_SECONDS};
use crate::rows::{DispatchRow, EffectRow, StartedAttempt};
use crate::statements::{self as st, Arg, Bound};
use crate::time::unix_of_iso;

/// At least this long from an effect's first attempt before it may go dead (interface §7),
/// scaled like the ladder.
pub const MIN_RETRY_SECONDS: u32 = 16 * 3600;
/// An attempt counts as possibly in flight for the request timeout and this much more.
pub const IN_FLIGHT_MARGIN_SECONDS: i64 = 5;
/// A retry counts as due this early (the queue's clock and D1's may differ by a little).
pub const DUE_SLACK_SECONDS: i64 = 2;
/// The longest delay a queue message may be given (the platform's limit: 12 hours).
pub const MAX_QUEUE_DELAY_SECONDS: u32 = 12 * 3600;

/// Deliberate defects for the simulator's teeth; production passes `Mutation::default()`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mutation {
    /// Record the attempt after its request, as before the fix (the refund cannot see a
    /// request in flight).
    pub attempt_after_request: bool,
    /// Ignore the in-flight window of an earlier, cancelled effect (a revocation may overtake
    /// its fulfilment's last attempt).
    pub ignore_earlier_in_flight: bool,
    /// Let any copy of a message start an attempt (no due time, no in-flight check), and
    /// let the ladder end on its count alone: copies shorten it below 16 hours.
    pub ignore_schedule: bool,
}

/// Where effects go, as the driver finds its configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Push {
    /// `ORDER_SYSTEM_URL` set and usable: effects are posted.
    To,
    /// No URL: effects stay pending in the feed, for the order system to pull (interface §7).
    Pull,
    /// A URL that cannot carry credentials, or no usable secret: said, effects wait.
    Unusable(String),
}

/// The dispatcher's settings.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// `EFFECT_RETRY_SCALE` (1 in production; tests and demos compress the ladder).
    pub scale: f64,
    /// `ORDER_SYSTEM_TIMEOUT_MS`.
    pub timeout_ms: u64,
    pub mutation: Mutation,
}

impl Settings {
    /// How long after its start an attempt may still be in flight.
    pub fn in_flight_seconds(&self) -> i64 {
        let timeout = i64::try_from(self.timeout_ms.div_ceil(1000)).unwrap_or(i64::MAX / 2);
        timeout.saturating_add(IN_FLIGHT_MARGIN_SECONDS)
    }

    /// At least this long from the first attempt before the effect may go dead.
    pub fn min_retry_seconds(&self) -> i64 {
        (f64::from(MIN_RETRY_SECONDS) * self.scale.clamp(0.0, 1.0)).round() as i64
    }
}

/// One message of the batch: the effect id it names and the queue's count of deliveries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub effect_id: String,
    pub attempts: u32,
}

/// What one effect comes to before any request.
#[derive(Debug, Clone, PartialEq)]
pub enum Before {
    /// Start an attempt, then post it if the start committed.
    Start,
    /// Nothing to send now; the message is acknowledged (the outcome logged, and why).
    Done(&'static str, Option<String>),
    /// An earlier effect of the resource is not settled, or its last attempt may be in
    /// flight: deferred (`DEFER_EFFECT`) and looked at again from a fresh message after this
    /// many seconds. Waiting is not a failed attempt and spends none of the queue's retries.
    Wait(u32),
    /// A scheduled retry, not due yet: the message comes back when it is.
    NotDue(u32),
}

/// Why one signed POST failed (the dispatcher's to the order system, the alerts' to their
/// webhook). Its Display is a phrase after the receiver's name ("the order system answered
/// 503"); [`PostError::last_error`] is the order system's, as an effect records it. Every kind
/// is a failed attempt on the ladder; they differ in what reached the order system: nothing
/// (`Request`, `Unreachable`, `NotConfigured`), an answer (`Status`), or perhaps the request
/// with its answer lost (`Timeout`: at least once, the same id again).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PostError {
    /// No answer within the timeout: the request may have been taken.
    #[error("did not answer within {ms} ms")]
    Timeout { ms: u64 },
    /// The connection failed (name resolution, refused, TLS, reset).
    #[error("could not be reached: {0}")]
    Unreachable(String),
    /// An answer, not a 2xx: its status code.
    #[error("answered {0}")]
    Status(u16),
    /// The request could not be built or signed (a header, the URL): nothing was sent.
    #[error("was not posted to: the request could not be built ({0})")]
    Request(String),
    /// No endpoint to post to.
    #[error("is not configured")]
    NotConfigured,
}

impl PostError {
    /// The text an effect's `last_error` records, and the dispatcher's log line says.
    pub fn last_error(&self) -> String {
        format!("the order system {self}")
    }

    /// The kind, as one word.
    pub fn kind(&self) -> &'static str {
        match self {
            PostError::Timeout { .. } => "timeout",
            PostError::Unreachable(_) => "unreachable",
            PostError::Status(_) => "status",
            PostError::Request(_) => "request",
            PostError::NotConfigured => "not_configured",
        }
    }
}

/// What one POST came to.
#[derive(Debug, Clone, PartialEq)]
pub enum After {
    Delivered,
    /// A failed attempt; the queue brings the message back in `delay` seconds.
    Retry {
        delay: u32,
        error: PostError,
    },
    /// The ladder is spent and 16 hours have passed since the first attempt: dead, visible,
    /// counted, alerted, redeliverable.
    Dead {
        error: PostError,
    },
}

/// The decision for one loaded effect, before any request.
pub fn before(row: Option<&DispatchRow>, push: &Push, settings: &Settings, now: i64) -> Before {
    let Some(row) = row else {
        return Before::Done("missing", None);
    };
    let e = &row.effect;
    if e.dispatch != "pending" {
        return Before::Done("already_dispatched", Some(e.dispatch.clone()));
    }
    if e.awaiting_order_ref {
        // sent, under the same id, once the order_ref is learned
        return Before::Done("awaiting_order_ref", None);
    }
    match push {
        Push::Pull => return Before::Done("pending_pull", None),
        Push::Unusable(why) => return Before::Done("not_configured", Some(why.clone())),
        Push::To => {}
    }
    if row.earlier_undelivered > 0 {
        // a revocation waits until the fulfilment it revokes is delivered or cancelled
        let waited = unix_of_iso(&e.created_at).map_or(0, |created| now - created);
        return Before::Wait(wait_for_earlier_delay(waited, settings.scale).max(1));
    }
    let in_flight = settings.in_flight_seconds();
    if !settings.mutation.ignore_earlier_in_flight {
        if let Some(left) = seconds_left(row.earlier_attempt_started_at.as_deref(), in_flight, now)
        {
            // the cancelled fulfilment's last attempt may still reach the order system:
            // its revocation goes after it, not before
            return Before::Wait(left);
        }
    }
    if settings.mutation.ignore_schedule {
        return Before::Start;
    }
    if let Some(due) = e.next_attempt_at.as_deref().and_then(unix_of_iso) {
        let left = due - DUE_SLACK_SECONDS - now;
        if left > 0 {
            return Before::NotDue(clamp_delay(left));
        }
    }
    if seconds_left(e.attempt_started_at.as_deref(), in_flight, now).is_some() {
        // another copy of the message holds an attempt; it answers for the effect
        return Before::Done("attempt_in_flight", None);
    }
    Before::Start
}

/// Seconds until an attempt started at `started` is past the in-flight window, if not yet.
fn seconds_left(started: Option<&str>, in_flight: i64, now: i64) -> Option<u32> {
    let started = unix_of_iso(started?)?;
    let left = started + in_flight - now;
    (left > 0).then(|| clamp_delay(left))
}

fn clamp_delay(seconds: i64) -> u32 {
    u32::try_from(seconds.clamp(1, i64::from(MAX_QUEUE_DELAY_SECONDS))).unwrap_or(1)
}

/// What a POST's `result` means for an effect whose attempt `attempt` started.
pub fn after(
    attempt: &StartedAttempt,
    result: &Result<(), PostError>,
    settings: &Settings,
    now: i64,
) -> After {
    let error = match result {
        Ok(()) => return After::Delivered,
        Err(e) => e.clone(),
    };
    // the rung on this ladder (a redelivery starts a fresh one; `attempts` counts them all)
    let failed = u32::try_from(attempt.rung.max(1)).unwrap_or(u32::MAX);
    if let Some(delay) = effect_retry_delay(failed, settings.scale) {
        return After::Retry { delay, error };
    }
    if settings.mutation.ignore_schedule {
        return After::Dead { error };
    }
    // the ladder's count is spent; dead only once 16 hours have passed since the first
    // attempt, however many copies of the message ran meanwhile
    let first = attempt
        .first_attempt_at
        .as_deref()
        .and_then(unix_of_iso)
        .unwrap_or(now);
    let left = first + settings.min_retry_seconds() - now;
    if left > 0 {
        After::Retry {
            delay: clamp_delay(left),
            error,
        }
    } else {
        After::Dead { error }
    }
}

/// The request body (interface §7); fields that do not apply are null.
pub fn body(e: &EffectRow) -> String {
    serde_json::json!({
        "id": e.id,
        "kind": e.kind,
        "resource_id": e.resource_id,
        "order_ref": e.order_ref,
        "license_code": e.license_code,
        "amount": e.amount,
        "currency": e.currency,
        "cause": e.cause,
        "created_at": e.created_at,
    })
    .to_string()
}

/// The delay for a message whose batch failed on D1 (the queue's own count paces it, so the
/// delay keeps growing while D1 is down; the dead-letter queue hands it back, [`dead_letter`]).
pub fn retry_after_db_failure(message_attempts: u32, settings: &Settings) -> u32 {
    effect_retry_delay(message_attempts.max(1), settings.scale)
        .unwrap_or(EFFECT_RETRY_DELAYS_SECONDS[EFFECT_RETRY_DELAYS_SECONDS.len() - 1])
        .max(1)
}

/// What the effects dead-letter queue does with one message: its queue retries were spent by
/// failures of the dispatcher itself (D1 unreachable, crashes), not by the order system, whose
/// failures are the ladder's. So it never marks an effect dead before the ladder would
/// (interface §3: a D1 outage makes no effect dead): a pending effect is handed back to the
/// dispatcher from a fresh message, when its next attempt is due.
#[derive(Debug, Clone, PartialEq)]
pub enum DeadLetter {
    /// Not pending (or gone): nothing to do.
    Done(&'static str),
    /// Send a fresh message after this many seconds.
    Requeue(u32),
}

/// How long a dead letter waits to be tried again when D1 did not answer its load, or its
/// fresh message could not be sent: the effect stays pending meanwhile (the sweeper would
/// send it too).
pub const DEAD_LETTER_RETRY_SECONDS: u32 = 60;

pub fn dead_letter(row: Option<&DispatchRow>, now: i64) -> DeadLetter {
    let Some(row) = row else {
        return DeadLetter::Done("missing");
    };
    if row.effect.dispatch != "pending" {
        return DeadLetter::Done("already_dispatched");
    }
    let due = row
        .effect
        .next_attempt_at
        .as_deref()
        .and_then(unix_of_iso)
        .map_or(0, |due| due - now);
    DeadLetter::Requeue(clamp_delay(due.max(1)))
}

// ---------------------------------------------------------------- the batch, step by step

/// One distinct effect of a batch, as the batch goes along.
#[derive(Debug, Clone)]
struct Item {
    id: String,
    row: Option<DispatchRow>,
    before: Option<Before>,
    /// Set once the start committed (or, under the mutation, once posted).
    started: Option<StartedAttempt>,
    result: Option<Result<(), PostError>>,
    after: Option<After>,
    /// The index of its outcome statement in the record batch.
    statement: Option<usize>,
    /// The record batch's statement returned a row (`DEFER_EFFECT`: this message holds the
    /// wait).
    wrote: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Load,
    Start,
    Post,
    /// Under `attempt_after_request`: the start, after the posts.
    StartLate,
    Record,
    Answer,
    Done,
}

/// What the driver must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Run this query; hand its rows to [`Batch::loaded`].
    Load(Bound<'static>),
    /// Run this statement; hand the rows it returned to [`Batch::started`].
    Start(Bound<'static>),
    /// POST each effect (id, signed body) to the order system, concurrently, within the
    /// timeout; hand each result to [`Batch::posted`].
    Post(Vec<(String, String)>),
    /// Run these statements as one D1 batch; hand whether each returned a row to
    /// [`Batch::recorded`].
    Record(Vec<Bound<'static>>),
    /// Answer the messages (by their index in the batch), and log each line.
    Answer(Vec<Reply>),
    /// Nothing left.
    Done,
}

/// A message's answer and its log line.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub message: usize,
    pub answer: Answer,
    pub effect_id: String,
    pub outcome: &'static str,
    pub detail: Option<String>,
}

/// One dispatcher invocation's batch.
#[derive(Debug, Clone)]
pub struct Batch {
    messages: Vec<Message>,
    items: Vec<Item>,
    push: Push,
    settings: Settings,
    phase: Phase,
}

fn modifier(seconds: i64) -> Arg<'static> {
    Arg::Text(Cow::Owned(format!("{seconds:+} seconds")))
}

impl Batch {
    pub fn new(messages: Vec<Message>, push: Push, settings: Settings) -> Batch {
        let mut items: Vec<Item> = Vec::with_capacity(messages.len());
        for m in &messages {
            // an id twice in one batch (the sweeper's copy beside the original) is one item
            if !items.iter().any(|i| i.id == m.effect_id) {
                items.push(Item {
                    id: m.effect_id.clone(),
                    row: None,
                    before: None,
                    started: None,
                    result: None,
                    after: None,
                    statement: None,
                    wrote: false,
                });
            }
        }
        Batch {
            messages,
            items,
            push,
            settings,
            phase: Phase::Load,
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The batch's effect ids, each once.
    pub fn effect_ids(&self) -> Vec<&str> {
        self.items.iter().map(|i| i.id.as_str()).collect()
    }

    pub fn next(&mut self, now: i64) -> Step {
        match self.phase {
            Phase::Load => {
                let ids = self.effect_ids();
                Step::Load(
                    (st::LOAD_EFFECTS_FOR_DISPATCH.bind(vec![Arg::json_list(&ids)])).into_owned(),
                )
            }
            Phase::Start => match self.start_statement(false) {
                Some(b) => Step::Start(b),
                None => {
                    self.phase = Phase::Post;
                    self.next(now)
                }
            },
            Phase::Post => {
                let posts = self.posts();
                if posts.is_empty() {
                    self.phase = if self.settings.mutation.attempt_after_request {
                        Phase::StartLate
                    } else {
                        Phase::Record
                    };
                    return self.next(now);
                }
                Step::Post(posts)
            }
            Phase::StartLate => match self.start_statement(true) {
                Some(b) => Step::Start(b),
                None => {
                    self.phase = Phase::Record;
                    self.next(now)
                }
            },
            Phase::Record => {
                self.decide_outcomes(now);
                let statements = self.record_statements();
                if statements.is_empty() {
                    self.phase = Phase::Answer;
                    return self.next(now);
                }
                Step::Record(statements)
            }
            Phase::Answer => {
                self.phase = Phase::Done;
                Step::Answer(self.replies())
            }
            Phase::Done => Step::Done,
        }
    }

    /// The load's rows (any order; effects not found are missing).
    pub fn loaded(&mut self, rows: Vec<DispatchRow>, now: i64) {
        for item in &mut self.items {
            item.row = rows.iter().find(|r| r.effect.id == item.id).cloned();
            item.before = Some(before(item.row.as_ref(), &self.push, &self.settings, now));
        }
        self.phase = Phase::Start;
    }

    /// `START_ATTEMPTS` for every effect to start; under `attempt_after_request`, after the
    /// posts, for those posted.
    fn start_statement(&self, late: bool) -> Option<Bound<'static>> {
        let after_request = self.settings.mutation.attempt_after_request;
        if after_request != late {
            return None;
        }
        let ids: Vec<&str> = self
            .items
            .iter()
            .filter(|i| i.before == Some(Before::Start))
            .filter(|i| !late || i.result.is_some())
            .map(|i| i.id.as_str())
            .collect();
        if ids.is_empty() {
            return None;
        }
        let (in_flight, slack) = if self.settings.mutation.ignore_schedule || late {
            // no schedule at all: any copy starts
            (modifier(36_500 * 86_400), modifier(36_500 * 86_400))
        } else {
            (
                modifier(-self.settings.in_flight_seconds()),
                modifier(DUE_SLACK_SECONDS),
            )
        };
        Some((st::START_ATTEMPTS.bind(vec![Arg::json_list(&ids), in_flight, slack])).into_owned())
    }

    /// The rows `START_ATTEMPTS` returned: the attempts that committed.
    pub fn started(&mut self, rows: Vec<StartedAttempt>) {
        let late = self.phase == Phase::StartLate;
        for item in &mut self.items {
            if let Some(s) = rows.iter().find(|r| r.effect_id == item.id) {
                item.started = Some(s.clone());
            }
        }
        self.phase = if late { Phase::Record } else { Phase::Post };
    }

    /// The POSTs still to make: started and not yet posted (under `attempt_after_request`,
    /// every effect to start, before any start).
    fn posts(&self) -> Vec<(String, String)> {
        let after_request = self.settings.mutation.attempt_after_request;
        self.items
            .iter()
            .filter(|i| i.result.is_none())
            .filter(|i| {
                if after_request {
                    i.before == Some(Before::Start)
                } else {
                    i.started.is_some()
                }
            })
            .filter_map(|i| Some((i.id.clone(), body(&i.row.as_ref()?.effect))))
            .collect()
    }

    /// One POST's result.
    pub fn posted(&mut self, effect_id: &str, result: Result<(), PostError>) {
        if let Some(item) = self.items.iter_mut().find(|i| i.id == effect_id) {
            item.result = Some(result);
        }
    }

    /// Every outcome in one batch: each POST's, and the waits' deferrals.
    fn record_statements(&mut self) -> Vec<Bound<'static>> {
        let mut statements = Vec::new();
        // the kept count of delivered effects, first (`TALLY_DELIVERED`: the items are
        // distinct effects, each marked by its own statement below, in this transaction)
        let delivered: Vec<&str> = self
            .items
            .iter()
            .filter(|i| matches!(i.after, Some(After::Delivered)))
            .map(|i| i.id.as_str())
            .collect();
        if !delivered.is_empty() {
            statements.push(
                st::TALLY_DELIVERED
                    .bind(vec![Arg::json_list(&delivered)])
                    .into_owned(),
            );
        }
        for item in &mut self.items {
            let b = match (&item.before, &item.after) {
                (_, Some(After::Delivered)) => {
                    st::MARK_EFFECT_DELIVERED.bind(vec![Arg::text(&item.id)])
                }
                (_, Some(After::Retry { delay, error })) => st::RECORD_EFFECT_FAILURE.bind(vec![
                    Arg::text(&item.id),
                    Arg::Text(Cow::Owned(error.last_error())),
                    modifier(i64::from(*delay)),
                ]),
                (_, Some(After::Dead { error })) => st::MARK_EFFECT_DEAD.bind(vec![
                    Arg::text(&item.id),
                    Arg::Text(Cow::Owned(error.last_error())),
                ]),
                (Some(Before::Wait(delay)), None) => {
                    st::DEFER_EFFECT.bind(vec![Arg::text(&item.id), modifier(i64::from(*delay))])
                }
                _ => continue,
            };
            item.statement = Some(statements.len());
            statements.push((b).into_owned());
        }
        statements
    }

    /// Decides every POST's outcome at `now`, for the record step.
    fn decide_outcomes(&mut self, now: i64) {
        let after_request = self.settings.mutation.attempt_after_request;
        for item in &mut self.items {
            let Some(result) = &item.result else { continue };
            let attempt = match (&item.started, &item.row) {
                (Some(s), _) => s.clone(),
                // under the mutation the start comes after: the row's count plus this one
                (None, Some(row)) if after_request => StartedAttempt {
                    effect_id: item.id.clone(),
                    attempts: row.effect.attempts + 1,
                    rung: row.effect.rung + 1,
                    first_attempt_at: row.effect.first_attempt_at.clone(),
                },
                _ => continue,
            };
            item.after = Some(after(&attempt, result, &self.settings, now));
        }
    }

    /// Whether each record statement returned a row.
    pub fn recorded(&mut self, wrote: Vec<bool>) {
        for item in &mut self.items {
            if let Some(i) = item.statement {
                item.wrote = wrote.get(i).copied().unwrap_or(false);
            }
        }
        self.phase = Phase::Answer;
    }

    /// A D1 call failed: every message back on the ladder of the queue's own count.
    pub fn db_failed(&mut self, why: &str) -> Vec<Reply> {
        self.phase = Phase::Done;
        self.messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let delay = retry_after_db_failure(m.attempts, &self.settings);
                Reply {
                    message: i,
                    answer: Answer::Retry(delay),
                    effect_id: m.effect_id.clone(),
                    outcome: "error",
                    detail: Some(format!("{why}; retry in {delay}s")),
                }
            })
            .collect()
    }

    fn replies(&self) -> Vec<Reply> {
        let mut answered: Vec<&str> = Vec::new();
        let mut replies = Vec::with_capacity(self.messages.len());
        for (i, m) in self.messages.iter().enumerate() {
            let reply = |answer, outcome, detail| Reply {
                message: i,
                answer,
                effect_id: m.effect_id.clone(),
                outcome,
                detail,
            };
            if answered.contains(&m.effect_id.as_str()) {
                // the same effect twice in one batch: it was handled once
                replies.push(reply(Answer::Ack, "duplicate_message", None));
                continue;
            }
            answered.push(&m.effect_id);
            let Some(item) = self.items.iter().find(|it| it.id == m.effect_id) else {
                replies.push(reply(Answer::Ack, "missing", None));
                continue;
            };
            replies.push(match (&item.before, &item.after) {
                (_, Some(After::Delivered)) => reply(Answer::Ack, "delivered", None),
                (_, Some(After::Retry { delay, error })) => reply(
                    Answer::Retry(*delay),
                    "retry",
                    Some(format!("{}; retry in {delay}s", error.last_error())),
                ),
                (_, Some(After::Dead { error })) => {
                    reply(Answer::Ack, "dead", Some(error.last_error()))
                }
                (Some(Before::Wait(delay)), _) if item.wrote => reply(
                    Answer::AckAndSendAfter(*delay),
                    "waiting_for_earlier",
                    Some(format!("looked at again in {delay}s")),
                ),
                (Some(Before::Wait(_)), _) => reply(
                    Answer::Ack,
                    "waiting_for_earlier",
                    Some("another message holds the wait".into()),
                ),
                (Some(Before::NotDue(delay)), _) => reply(
                    Answer::Retry(*delay),
                    "not_due",
                    Some(format!("next attempt in {delay}s")),
                ),
                (Some(Before::Done(outcome, detail)), _) => {
                    reply(Answer::Ack, outcome, detail.clone())
                }
                // to start, but the start returned nothing: cancelled by its refund, or
                // another copy started it first
                (Some(Before::Start), None) => reply(Answer::Ack, "not_started", None),
                (None, _) => reply(Answer::Ack, "missing", None),
            });
        }
        replies
    }
}

#[cfg(test)]
mod tests;
