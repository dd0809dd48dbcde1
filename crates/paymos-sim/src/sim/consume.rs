//! The deliveries queue's consumer as part of the simulated world: the **core's** batch
//! (`paymos_core::actors::consume::Batch`, the very state machine the Worker drives) over
//! SQLite, one step per scheduler step, with the platform's faults. The consumer may die
//! before any step (its messages come back), inside its transaction (rolled back), or after
//! the commit before its answers (the queue delivers again). The transaction runs statement
//! by statement so that the checker can hold each transition against the plan
//! (`after_transition`), keeping what it learnt only if the transaction commits.

use paymos_core::actors::consume::{self, Batch, Item, Mode, Step};
use paymos_core::actors::Answer;
use paymos_core::rows::DeliveryRow;
use paymos_core::statements::Bound;

use super::{Actor, Msg, Sim, Who, RETRY_BASE_SECONDS};
use crate::db::Fault;

impl Sim<'_> {
    /// The consumer's settings: the receiver runs in live mode, but for a window in which
    /// `PAYMOS_MODE` is invalid (it then refuses to decide).
    fn consume_settings(&self) -> consume::Settings {
        consume::Settings {
            mode: if self.misconfigured() {
                Err("PAYMOS_MODE is \"staging\", not live or test".into())
            } else {
                Ok(Mode::Live)
            },
            pull: false,
            retry_base: RETRY_BASE_SECONDS,
            plan: self.opts.mutations.plan,
            edit: self.opts.mutations.batch,
        }
    }

    /// A consumer invocation takes `msgs` off the queue.
    pub(super) fn start_consume(&mut self, msgs: Vec<Msg>) {
        let messages = msgs
            .iter()
            .map(|m| consume::Message {
                event_id: self.eid(m.d).to_string(),
                generation: m.generation,
                attempts: m.attempts,
            })
            .collect();
        let batch = Batch::new(messages, self.consume_settings());
        self.consume(msgs, Box::new(batch));
    }

    fn names(&self, msgs: &[Msg]) -> String {
        msgs.iter()
            .map(|m| self.eid(m.d).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Every message of the invocation comes back (it died).
    fn consumer_died(&mut self, msgs: Vec<Msg>, at: &str) {
        self.stats.crashes += 1;
        self.consumers_busy -= 1;
        let names = self.names(&msgs);
        self.trace(format!(
            "consumer [{names}] died ({at}); the messages come back"
        ));
        for m in msgs {
            let delay = self.frng.below(30_000) as i64;
            self.retry(m, delay);
        }
    }

    /// One step of a consumer invocation.
    pub(super) fn consume(&mut self, msgs: Vec<Msg>, mut batch: Box<Batch>) {
        let step = batch.step();
        if !matches!(step, Step::Apply(_)) && self.crash() {
            return self.consumer_died(msgs, &format!("before {}", step_name(&step)));
        }
        match step {
            Step::Load(b) => {
                let fault = self.fault_read();
                let rows = self
                    .db
                    .run(&b, fault)
                    .result
                    .and_then(|r| r[0].to::<DeliveryRow>());
                match rows {
                    Ok(rows) => self.loaded(&msgs, &mut batch, rows),
                    Err(e) => batch.failed(format!("database_unavailable: {e}")),
                }
                self.actors.push(Actor::Consume { msgs, batch });
            }
            Step::Apply(statements) => self.apply(msgs, batch, &statements),
            Step::Split(messages, why) => {
                // message by message: here as separate consumers, a superset of the
                // interleavings of one doing them in turn
                self.trace(format!(
                    "consumer batch [{}] → message by message ({why})",
                    self.names(&msgs)
                ));
                self.consumers_busy += msgs.len() - 1;
                let settings = self.consume_settings();
                for (m, message) in msgs.into_iter().zip(messages) {
                    let batch = Batch::new(vec![message], settings.clone());
                    self.actors.push(Actor::Consume {
                        msgs: vec![m],
                        batch: Box::new(batch),
                    });
                }
            }
            Step::RecordFailure(b) => {
                // the failure just happened: one outside an outage is a real one
                if !self.in_outage() {
                    let m = &msgs[0];
                    *self.dm[m.d]
                        .failed_outside_outage
                        .entry(m.generation.unwrap_or(-1))
                        .or_default() += 1;
                }
                // best effort: D1 may be what is failing
                self.write_delivery(msgs[0].d, Who::Failure, &b);
                // the retry answer follows at once, in the same invocation
                let step = batch.step();
                self.answer(msgs, step);
            }
            step @ (Step::Answer(_) | Step::Done) => self.answer(msgs, step),
        }
    }

    /// The batch's rows: every message names a delivery on record.
    fn loaded(&mut self, msgs: &[Msg], batch: &mut Batch, rows: Vec<DeliveryRow>) {
        for m in msgs {
            let id = self.eid(m.d).to_string();
            if !rows.iter().any(|r| r.event_id == id) {
                self.violation(format!("queue message names {id}, which is not on record"));
            }
        }
        let rng = &mut self.rng;
        batch.loaded(rows, &mut || rng.bytes16());
        let names = self.names(msgs);
        let items: Vec<String> = batch
            .items()
            .map(|(i, item, _)| {
                let what = match item {
                    Item::Done(w) => (*w).to_string(),
                    Item::Ignore(r) => format!("ignore ({r})"),
                    Item::Transition(p) => format!("→ {}", p.change.to),
                };
                format!("{} {what}", self.eid(msgs[i].d))
            })
            .collect();
        self.trace(format!("consumer [{names}] loaded: {}", items.join(", ")));
    }

    /// The batch's one transaction, statement by statement, each transition checked against
    /// the plan from the state just before it. It may be rolled back by a fault, a crash
    /// inside it, or commit while the caller sees an error.
    fn apply(&mut self, msgs: Vec<Msg>, mut batch: Box<Batch>, statements: &[Bound<'static>]) {
        let names = self.names(&msgs);
        let crash_inside = self.crash();
        let fault = if crash_inside {
            Fault::At(self.frng.below(statements.len() as u64) as usize)
        } else {
            self.fault_batch(statements.len())
        };
        if fault == Fault::Before {
            batch.failed("database_unavailable: D1_ERROR: simulated outage".into());
            return self.actors.push(Actor::Consume { msgs, batch });
        }
        // what the checker records is kept only if the transaction commits
        let saved = (self.rm.clone(), self.dm.clone(), self.stats.clone());
        self.db.begin();
        let mut results: Vec<Vec<serde_json::Value>> = Vec::with_capacity(statements.len());
        let mut failed: Option<String> = None;
        let items: Vec<(usize, Item, std::ops::Range<usize>)> = batch
            .items()
            .map(|(i, item, r)| (i, item.clone(), r))
            .collect();
        'all: for (i, item, range) in &items {
            let d = msgs[*i].d;
            let pre = match item {
                Item::Transition(p) => {
                    let r = self.by_resource[&p.change.resource_id];
                    let pre = self.pre(r, Some(d));
                    let decision = p.plan.decide(pre.status, &pre.effects);
                    Some((r, pre, decision))
                }
                _ => None,
            };
            let mut last = None;
            for k in range.clone() {
                if fault == Fault::At(k) {
                    failed = Some("D1_ERROR: simulated failure".into());
                    break 'all;
                }
                match self.db.step(&statements[k]) {
                    Ok(rows) => {
                        results.push(rows.to::<serde_json::Value>().expect("rows as JSON"));
                        last = Some(rows);
                    }
                    Err(e) => {
                        failed = Some(e);
                        break 'all;
                    }
                }
            }
            match (item, pre) {
                (Item::Ignore(_), _) => self.touched_d.push((d, Who::Ignore)),
                (Item::Transition(p), Some((r, pre, decision))) => self.after_transition(
                    r,
                    Some(d),
                    p,
                    &statements[range.clone()],
                    &pre,
                    decision,
                    last.as_ref(),
                ),
                _ => {}
            }
        }
        if let Some(e) = failed {
            self.db.rollback();
            let violations = std::mem::take(&mut self.violations);
            (self.rm, self.dm, self.stats) = saved;
            self.violations = violations;
            self.trace(format!("consumer [{names}] rolled back ({e})"));
            if crash_inside {
                return self.consumer_died(msgs, "inside its transaction");
            }
            batch.failed(format!("database_unavailable: {e}"));
            return self.actors.push(Actor::Consume { msgs, batch });
        }
        self.db.commit();
        if fault == Fault::AfterCommit {
            self.trace(format!(
                "consumer [{names}] committed, the caller saw an error"
            ));
            batch.failed("database_unavailable: D1_ERROR: network lost after commit".into());
        } else {
            self.trace(format!("consumer [{names}] committed"));
            batch.applied(results);
        }
        self.actors.push(Actor::Consume { msgs, batch });
    }

    /// The answers: the released effects sent (the transaction committed), then each message
    /// acked (the queue may deliver it again) or retried.
    fn answer(&mut self, msgs: Vec<Msg>, step: Step) {
        self.consumers_busy -= 1;
        let Step::Answer(answered) = step else {
            return;
        };
        self.fx_send(&answered.released, "the consumer");
        for line in &answered.lines {
            self.trace(format!("consumer: {} {}", line.outcome, line.detail));
        }
        let mut msgs: Vec<Option<Msg>> = msgs.into_iter().map(Some).collect();
        for r in answered.replies {
            let Some(m) = msgs.get_mut(r.message).and_then(Option::take) else {
                continue;
            };
            let id = self.eid(m.d).to_string();
            match r.answer {
                Answer::Retry(delay) => {
                    self.trace(format!(
                        "consumer: {id} {} → retry in {delay}s",
                        r.detail.as_deref().unwrap_or("")
                    ));
                    self.retry(m, i64::from(delay) * 1000);
                }
                Answer::Ack | Answer::AckAndSendAfter(_) => {
                    if self
                        .queue
                        .ack(self.platform(), m, self.now(), &mut self.frng)
                    {
                        self.trace(format!(
                            "consumer: {id} {} acked, but the queue delivers it again",
                            r.outcome
                        ));
                    } else {
                        self.trace(format!("consumer: {id} {} acked", r.outcome));
                    }
                }
            }
        }
    }
}

fn step_name(step: &Step) -> &'static str {
    match step {
        Step::Load(_) => "its load",
        Step::Apply(_) => "its transaction",
        Step::Split(..) => "splitting its batch",
        Step::RecordFailure(_) => "recording a failure",
        Step::Answer(_) | Step::Done => "its answers",
    }
}
