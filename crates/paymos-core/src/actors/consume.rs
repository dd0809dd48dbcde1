//! The deliveries queue's consumer (interface §3): one queue batch of `{event_id, generation}`
//! messages, each delivery's transition applied exactly once. A [`Batch`] is a state machine
//! its driver asks what to do next:
//!
//! 1. **load**, in one query (`LOAD_DELIVERIES`), the deliveries of the messages that do not
//!    carry their envelope's facts (`envelope::Facts`: the receipt's message carries them, a
//!    replay's or the sweeper's does not); a batch of receipts loads nothing;
//! 2. decide each message from its facts (or its row: already processed or gone, nothing to
//!    do): ignored (a `livemode` that does not match `PAYMOS_MODE`, an unknown event type:
//!    interface §8, §1), or a guarded transition, prepared with its token and license code;
//! 3. **apply** every message's statements in **one D1 batch** (one transaction), in message
//!    order: the guard makes each transition independent of the others', so two messages for
//!    one resource are decided one after the other, as if sequential. The transaction's
//!    delivery gate (`statements::delivery_open!`) writes nothing for a copy already
//!    processed, nor for a payment whose invoice has an `invoice.refunded` on record, not yet
//!    processed, received before it: that payment waits for it (retried), unless the batch
//!    decided that refund before it: a refund can only follow a payment, so goods never ship
//!    for money already returned (§3);
//! 4. **answer**: ack each message, with its log line (or retry a waiting payment); the effects
//!    the transaction released are the driver's to send now that it committed.
//!
//! If the load or the transaction fails (D1, a body that no longer parses, an invalid
//! `PAYMOS_MODE`), a batch of several messages is **split**, message by message, so that one
//! poison message cannot hold back the rest; a batch of one records the failure on the row
//! (best effort: D1 may be what is failing) and is retried after `consumer_retry_delay`,
//! which follows the queue's own count of deliveries, so the delay keeps growing while D1 is
//! down.

use std::ops::Range;

mod drive;
pub use drive::{database_unavailable, drive, Driven, Io};

use crate::actors::transition::{order_ref_disagreement, prepare, Change, PlanFn, Prepared};
use crate::actors::Answer;
use crate::envelope::{parse_envelope, Facts};
use crate::ladder::consumer_retry_delay;
use crate::machine::{target_state, CauseKind, Outcome};
use crate::rows::ConsumeRow;
use crate::statements::{self as st, Arg, Bound};

/// Why a delivery was processed without changing anything, on record in `reason`.
pub const LIVEMODE_MISMATCH: &str = "livemode_mismatch";
pub const UNKNOWN_EVENT_TYPE: &str = "unknown_event_type";

/// `PAYMOS_MODE`: which deliveries may change state (interface §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Live,
    Test,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Live => "live",
            Mode::Test => "test",
        }
    }

    /// Whether an envelope's `livemode` belongs to this deployment. A missing `livemode`
    /// parses as `false`, so it can never change state in a live deployment.
    pub fn accepts(self, livemode: bool) -> bool {
        livemode == (self == Mode::Live)
    }
}

/// The consumer's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `PAYMOS_MODE`, or why it is not a mode: the consumer then refuses to decide (every
    /// message retries, then goes dead, replayable once fixed) rather than guess.
    pub mode: Result<Mode, String>,
    /// Pull mode (no `ORDER_SYSTEM_URL`).
    pub pull: bool,
    /// `QUEUE_RETRY_BASE_SECONDS`.
    pub retry_base: u32,
    /// Test-only: a plan other than the core's (the simulator's teeth).
    pub plan: Option<PlanFn>,
    /// Test-only: rewrites a transition's statements (given its delivery), to try a proposed
    /// fix of the shared statements before it is made.
    pub edit: Option<Edit>,
}

/// A test-only rewrite of a transition's statements, given the delivery it is for.
pub type Edit = fn(Vec<Bound<'static>>, Option<String>) -> Vec<Bound<'static>>;

/// One message of the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub event_id: String,
    pub generation: Option<i64>,
    /// The queue's count of deliveries of this message (1 the first time).
    pub attempts: u32,
    /// The envelope's facts, as the receipt read them: nothing to load.
    pub facts: Option<Facts>,
}

/// What one message asks of the batch's transaction.
#[derive(Debug, Clone)]
pub enum Item {
    /// Nothing to do: `already_processed` (another copy decided it) or `missing`.
    Done(&'static str),
    /// Recorded `ignored`, with the reason.
    Ignore(&'static str),
    Transition(Box<Prepared>),
}

/// What the driver does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Run it; hand its rows to [`Batch::loaded`].
    Load(Bound<'static>),
    /// Nothing to load (every message carries its facts): call [`Batch::loaded`] with no rows.
    Decide,
    /// Run these as one D1 batch; hand each statement's rows to [`Batch::applied`].
    Apply(Vec<Bound<'static>>),
    /// The batch failed: process each of these messages as a batch of its own.
    Split(Vec<Message>, String),
    /// Run it, best effort (its failure changes nothing); then ask for the next step.
    RecordFailure(Bound<'static>),
    /// Answer the messages; send the released effects; log the lines.
    Answer(Answered),
    /// Nothing left.
    Done,
}

/// The batch's answers.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Answered {
    pub replies: Vec<Reply>,
    /// Effect ids the transaction released: sent now that it committed.
    pub released: Vec<String>,
    /// Log lines beside the replies' own (stage `consume`): a disagreeing `order_ref`.
    pub lines: Vec<Line>,
}

/// A message's answer and its log line.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub message: usize,
    pub answer: Answer,
    pub event_id: String,
    pub outcome: &'static str,
    pub detail: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub event_id: String,
    pub outcome: &'static str,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Load,
    Apply,
    Failing(String),
    Answer(Answered),
    Done,
}

/// One consumer invocation's batch (or one message of a split batch).
#[derive(Debug, Clone)]
pub struct Batch {
    messages: Vec<Message>,
    settings: Settings,
    items: Vec<Item>,
    statements: Vec<Bound<'static>>,
    ranges: Vec<Range<usize>>,
    phase: Phase,
}

impl Batch {
    pub fn new(messages: Vec<Message>, settings: Settings) -> Batch {
        let phase = match &settings.mode {
            Ok(_) => Phase::Load,
            Err(why) => Phase::Failing(format!("not_configured: {why}")),
        };
        Batch {
            messages,
            settings,
            items: Vec::new(),
            statements: Vec::new(),
            ranges: Vec::new(),
            phase,
        }
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The items the transaction applies, with their statements' range in it (the simulator
    /// checks each transition against the plan as the statements run).
    pub fn items(&self) -> impl Iterator<Item = (usize, &Item, Range<usize>)> {
        self.items
            .iter()
            .zip(&self.ranges)
            .enumerate()
            .map(|(i, (item, r))| (i, item, r.clone()))
    }

    pub fn step(&mut self) -> Step {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Load => {
                self.phase = Phase::Load;
                // distinct: the load joins from the list, so a copy listed twice would be read
                // (and billed) twice
                let mut ids: Vec<&str> = Vec::with_capacity(self.messages.len());
                for m in self.messages.iter().filter(|m| m.facts.is_none()) {
                    if !ids.contains(&m.event_id.as_str()) {
                        ids.push(&m.event_id);
                    }
                }
                match ids.is_empty() {
                    true => Step::Decide,
                    false => Step::Load(st::LOAD_DELIVERIES.bind(vec![Arg::json_list(&ids)])),
                }
            }
            Phase::Apply => {
                self.phase = Phase::Apply;
                if self.statements.is_empty() {
                    // nothing to write (every message already processed or gone)
                    self.phase = Phase::Answer(self.answers(&[]));
                    return self.step();
                }
                Step::Apply(self.statements.clone())
            }
            Phase::Failing(why) if self.messages.len() > 1 => {
                Step::Split(self.messages.clone(), why)
            }
            Phase::Failing(why) => {
                let m = &self.messages[0];
                self.phase = Phase::Answer(self.retry(&why));
                Step::RecordFailure(
                    st::RECORD_FAILURE
                        .bind(vec![Arg::text(&m.event_id), Arg::text(&why)])
                        .into_owned(),
                )
            }
            Phase::Answer(answered) => Step::Answer(answered),
            Phase::Done => Step::Done,
        }
    }

    /// The rows of the messages without facts (in any order); `draw` gives 16 random bytes
    /// for each token and license code.
    pub fn loaded(&mut self, rows: Vec<ConsumeRow>, draw: &mut dyn FnMut() -> [u8; 16]) {
        let mode = *self
            .settings
            .mode
            .as_ref()
            .expect("a mode, or the batch failed");
        let mut items: Vec<Item> = Vec::with_capacity(self.messages.len());
        for m in &self.messages {
            let decided = match &m.facts {
                Some(facts) => self.decide(facts, &m.event_id, mode, draw),
                None => {
                    self.decide_loaded(rows.iter().find(|r| r.event_id == m.event_id), mode, draw)
                }
            };
            match decided {
                Ok(item) => items.push(item),
                Err(why) => {
                    self.phase = Phase::Failing(why);
                    return;
                }
            }
        }
        self.items = items;
        self.build();
        self.phase = Phase::Apply;
    }

    /// One message's item from its row.
    fn decide_loaded(
        &self,
        row: Option<&ConsumeRow>,
        mode: Mode,
        draw: &mut dyn FnMut() -> [u8; 16],
    ) -> Result<Item, String> {
        let Some(row) = row else {
            return Ok(Item::Done("missing"));
        };
        if row.processed_at.is_some() {
            return Ok(Item::Done("already_processed"));
        }
        let body = row.body.as_deref().unwrap_or_default();
        let envelope = parse_envelope(body.as_bytes(), Some(&row.event_id))
            .map_err(|e| format!("internal_error: stored body does not parse: {e}"))?;
        self.decide(&Facts::from(&envelope), &row.event_id, mode, draw)
    }

    /// One message's item from its envelope's facts.
    fn decide(
        &self,
        facts: &Facts,
        event_id: &str,
        mode: Mode,
        draw: &mut dyn FnMut() -> [u8; 16],
    ) -> Result<Item, String> {
        if !mode.accepts(facts.livemode) {
            return Ok(Item::Ignore(LIVEMODE_MISMATCH));
        }
        let Some((kind, to)) = target_state(&facts.event_type) else {
            return Ok(Item::Ignore(UNKNOWN_EVENT_TYPE));
        };
        let change = Change {
            resource_id: facts.resource_id.clone(),
            kind,
            to,
            // blanks are absent: as the envelope read them, or a message's (`Facts`' reader)
            order_ref: facts.order_ref.clone(),
            amount: facts.amount.clone(),
            currency: facts.currency.clone(),
            cause_kind: CauseKind::Event,
            cause: event_id.to_string(),
            delivery: Some(event_id.to_string()),
            pull: self.settings.pull,
        };
        let prepared = prepare(change, self.settings.plan, draw)
            .map_err(|e| format!("internal_error: {e}"))?;
        Ok(Item::Transition(Box::new(prepared)))
    }

    /// One list of statements; each item's slice remembered to read its results back.
    fn build(&mut self) {
        self.statements.clear();
        self.ranges.clear();
        for (i, item) in self.items.iter().enumerate() {
            let start = self.statements.len();
            match item {
                Item::Done(_) => {}
                // its tally first, in the same transaction (`tally`, migration 0009)
                Item::Ignore(reason) => self.statements.extend(
                    st::mark_ignored_batch(&self.messages[i].event_id, reason)
                        .into_iter()
                        .map(Bound::into_owned),
                ),
                Item::Transition(p) => {
                    let mut statements = p.statements();
                    if let Some(edit) = self.settings.edit {
                        statements = edit(statements, p.change.delivery.clone());
                    }
                    self.statements.extend(statements);
                }
            }
            self.ranges.push(start..self.statements.len());
        }
    }

    /// The transaction committed: each statement's rows, as JSON objects.
    pub fn applied(&mut self, results: Vec<Vec<serde_json::Value>>) {
        let answered = self.answers(&results);
        self.phase = if answered.replies.is_empty() && !self.messages.is_empty() {
            Phase::Failing("internal_error: the batch's results do not read".into())
        } else {
            Phase::Answer(answered)
        };
    }

    fn answers(&self, results: &[Vec<serde_json::Value>]) -> Answered {
        let mut out = Answered::default();
        for (i, (item, range)) in self.items.iter().zip(&self.ranges).enumerate() {
            let m = &self.messages[i];
            let reply = |outcome, detail| Reply {
                message: i,
                answer: Answer::Ack,
                event_id: m.event_id.clone(),
                outcome,
                detail,
            };
            match item {
                Item::Done(outcome) => out.replies.push(reply(outcome, None)),
                Item::Ignore(reason) => out
                    .replies
                    .push(reply("ignored", Some((*reason).to_string()))),
                Item::Transition(p) => {
                    let slice = results.get(range.clone()).unwrap_or_default();
                    let Ok(applied) = Prepared::read(&self.statements[range.clone()], slice) else {
                        return Answered::default();
                    };
                    if let Some(detail) = order_ref_disagreement(&p.change, &applied) {
                        out.lines.push(Line {
                            event_id: m.event_id.clone(),
                            outcome: "order_ref_mismatch",
                            detail,
                        });
                    }
                    out.released.extend(applied.released);
                    out.replies
                        .push(match (applied.held, applied.recorded, applied.outcome) {
                            (true, _, _) => self.wait_for_refund(i, &p.change.resource_id),
                            (false, true, outcome) => {
                                reply(outcome.unwrap_or(Outcome::Stale).as_str(), None)
                            }
                            // another copy recorded it first, or the delivery is gone
                            (false, false, Some(_)) => reply("already_processed", None),
                            (false, false, None) => reply("missing", None),
                        });
                }
            }
        }
        out
    }

    /// The load or the transaction failed (`why`: `<code>: <detail>`, for the row and the
    /// log).
    pub fn failed(&mut self, why: String) {
        self.phase = Phase::Failing(why);
    }

    /// A payment whose invoice has an `invoice.refunded` on record, unprocessed, received
    /// before it and not decided before it in this batch: the transaction wrote nothing for
    /// it; retried after the consumer's delay. The refund makes it stale; the wait records no
    /// failure of its own (only dead-letter hand-backs count: docs/decisions.md, "A payment
    /// waits for a refund on record").
    fn wait_for_refund(&self, i: usize, resource: &str) -> Reply {
        let m = &self.messages[i];
        let delay = consumer_retry_delay(self.settings.retry_base, i64::from(m.attempts));
        Reply {
            message: i,
            answer: Answer::Retry(delay),
            event_id: m.event_id.clone(),
            outcome: "waiting_for_refund",
            detail: Some(format!(
                "an invoice.refunded for {resource} is on record, not yet processed: this \
                 payment waits for it; retry in {delay}s"
            )),
        }
    }

    fn retry(&self, why: &str) -> Answered {
        let m = &self.messages[0];
        let delay = consumer_retry_delay(self.settings.retry_base, i64::from(m.attempts));
        Answered {
            replies: vec![Reply {
                message: 0,
                answer: Answer::Retry(delay),
                event_id: m.event_id.clone(),
                outcome: "retry",
                detail: Some(format!("{why}; attempt {}; retry in {delay}s", m.attempts)),
            }],
            ..Answered::default()
        }
    }
}

#[cfg(test)]
mod tests;
