//! The deliveries queue's consumer as part of the simulated world: the **core's** driver
//! (`paymos_core::actors::consume::drive` over its `Batch`, the very code the Worker runs) over
//! SQLite, one I/O call per scheduler step, with the platform's faults. The consumer may die
//! before any step (its messages come back), inside its transaction (rolled back), or after
//! the commit before its answers (the queue delivers again). The transaction runs statement
//! by statement so that the checker can hold each transition against the plan
//! (`after_transition`), keeping what it learnt only if the transaction commits.

use paymos_core::actors::consume::{self, Answered, Batch, Driven, Item, Mode};
use paymos_core::actors::Answer;
use paymos_core::rows::ConsumeRow;
use paymos_core::statements::Bound;

use super::{Actor, Msg, Sim, Who, RETRY_BASE_SECONDS};
use crate::coroutine::{Coroutine, Port, Resumed, Returned};
use crate::db::Fault;
use crate::rng::Rng;

/// A batch's items as the driver applies them: whose statements are which.
type Items = Vec<(usize, Item, std::ops::Range<usize>)>;

/// What the core's consumer driver (`consume::drive`) asks of the world, one call at a time.
#[derive(Debug)]
pub(super) enum Call {
    Load(Bound<'static>),
    Apply(Vec<Bound<'static>>, Items),
    RecordFailure(Bound<'static>),
}

pub(super) type Consumer = Coroutine<Call, Driven>;

/// The consumer's I/O in the simulated world: every call goes to the scheduler; its draws
/// (tokens, license codes) come from a stream of their own (`Sim::drng`), so that they move
/// no other stream.
struct Io {
    port: Port<Call>,
    rng: Rng,
}

impl consume::Io for Io {
    fn draw(&mut self) -> [u8; 16] {
        self.rng.bytes16()
    }
    async fn load(&mut self, b: Bound<'static>) -> Result<Vec<ConsumeRow>, String> {
        self.port.call(Call::Load(b)).await
    }
    async fn apply(
        &mut self,
        statements: Vec<Bound<'static>>,
        batch: &Batch,
    ) -> Result<Vec<Vec<serde_json::Value>>, String> {
        let items = batch
            .items()
            .map(|(i, item, r)| (i, item.clone(), r))
            .collect();
        self.port.call(Call::Apply(statements, items)).await
    }
    async fn record_failure(&mut self, b: Bound<'static>) {
        self.port.call::<()>(Call::RecordFailure(b)).await
    }
}

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
            pull: self.pl.on,
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
                facts: m.facts.clone(),
            })
            .collect();
        let driver = self.consumer(messages);
        self.consume(msgs, driver, None);
    }

    /// The core's driver over a new batch of `messages`, as `consume::consume` runs it.
    fn consumer(&mut self, messages: Vec<consume::Message>) -> Box<Consumer> {
        let mut batch = Batch::new(messages, self.consume_settings());
        let rng = self.drng.fork();
        Box::new(Coroutine::new(|port| async move {
            consume::drive(&mut batch, &mut Io { port, rng }).await
        }))
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

    /// One call of a consumer invocation: its driver resumed to the next, executed with the
    /// platform's faults. It may die before any call, or inside its transaction.
    pub(super) fn consume(
        &mut self,
        msgs: Vec<Msg>,
        mut driver: Box<Consumer>,
        returned: Option<Returned>,
    ) {
        let resumed = driver.resume(returned);
        if !matches!(resumed, Resumed::Asks(Call::Apply(..))) && self.crash() {
            return self.consumer_died(msgs, &format!("before {}", call_name(&resumed)));
        }
        let returned: Returned = match resumed {
            Resumed::Asks(Call::Load(b)) => Box::new(self.load(&msgs, &b)),
            Resumed::Asks(Call::Apply(statements, items)) => {
                match self.apply(&msgs, &statements, &items) {
                    Some(applied) => Box::new(applied),
                    None => return self.consumer_died(msgs, "inside its transaction"),
                }
            }
            Resumed::Asks(Call::RecordFailure(b)) => {
                self.record_failure(&msgs, &b);
                // the retry answer follows at once, in the same invocation
                return match driver.resume(Some(Box::new(()))) {
                    Resumed::Done(Driven::Answered(answered)) => self.answer(msgs, answered),
                    _ => unreachable!("a recorded failure is answered at once"),
                };
            }
            Resumed::Done(Driven::Split(messages, why)) => return self.split(msgs, messages, &why),
            Resumed::Done(Driven::Answered(answered)) => return self.answer(msgs, answered),
        };
        self.actors.push(Actor::Consume {
            msgs,
            driver,
            returned: Some(returned),
        });
    }

    /// The batch failed: message by message, here as separate consumers, a superset of the
    /// interleavings of one doing them in turn (as the Worker does).
    fn split(&mut self, msgs: Vec<Msg>, messages: Vec<consume::Message>, why: &str) {
        self.trace(format!(
            "consumer batch [{}] → message by message ({why})",
            self.names(&msgs)
        ));
        self.consumers_busy += msgs.len() - 1;
        for (m, message) in msgs.into_iter().zip(messages) {
            let driver = self.consumer(vec![message]);
            self.actors.push(Actor::Consume {
                msgs: vec![m],
                driver,
                returned: None,
            });
        }
    }

    fn load(&mut self, msgs: &[Msg], b: &Bound<'static>) -> Result<Vec<ConsumeRow>, String> {
        let fault = self.fault_read();
        let rows = self
            .db
            .run(b, fault)
            .result
            .and_then(|r| r[0].to::<ConsumeRow>());
        let rows = rows.map_err(consume::database_unavailable)?;
        self.trace(format!("consumer [{}] loaded", self.names(msgs)));
        Ok(rows)
    }

    /// `RECORD_FAILURE`, best effort (D1 may be what is failing). The failure just happened:
    /// one outside an outage is a real one.
    fn record_failure(&mut self, msgs: &[Msg], b: &Bound<'static>) {
        let m = &msgs[0];
        if !self.in_outage() {
            *self.dm[m.d]
                .failed_outside_outage
                .entry(m.generation.unwrap_or(-1))
                .or_default() += 1;
        }
        self.write_delivery(m.d, Who::Failure, b);
    }

    /// The batch's one transaction, statement by statement, each transition checked against
    /// the plan from the state just before it. It may be rolled back by a fault, a crash
    /// inside it (`None`: the invocation died), or commit while the caller sees an error.
    fn apply(
        &mut self,
        msgs: &[Msg],
        statements: &[Bound<'static>],
        items: &Items,
    ) -> Option<Result<Vec<Vec<serde_json::Value>>, String>> {
        let names = self.names(msgs);
        let decided: Vec<String> = items
            .iter()
            .map(|(i, item, _)| {
                let what = match item {
                    Item::Done(w) => (*w).to_string(),
                    Item::Ignore(r) => format!("ignore ({r})"),
                    Item::Transition(p) => format!("→ {}", p.change.to),
                };
                format!("{} {what}", self.eid(msgs[*i].d))
            })
            .collect();
        self.trace(format!(
            "consumer [{names}] applies: {}",
            decided.join(", ")
        ));
        let crash_inside = self.crash();
        let fault = if crash_inside {
            Fault::At(self.frng.below(statements.len() as u64) as usize)
        } else {
            self.fault_batch(statements.len())
        };
        if fault == Fault::Before {
            return Some(Err(consume::database_unavailable(
                "D1_ERROR: simulated outage",
            )));
        }
        // what the checker records is kept only if the transaction commits
        let saved = (self.rm.clone(), self.dm.clone(), self.stats.clone());
        self.db.begin();
        let mut results: Vec<Vec<serde_json::Value>> = Vec::with_capacity(statements.len());
        let mut failed: Option<String> = None;
        'all: for (i, item, range) in items {
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
                return None;
            }
            return Some(Err(consume::database_unavailable(e)));
        }
        self.db.commit();
        if fault == Fault::AfterCommit {
            self.trace(format!(
                "consumer [{names}] committed, the caller saw an error"
            ));
            return Some(Err(consume::database_unavailable(
                "D1_ERROR: network lost after commit",
            )));
        }
        self.trace(format!("consumer [{names}] committed"));
        Some(Ok(results))
    }

    /// The answers: the released effects sent (the transaction committed), then each message
    /// acked (the queue may deliver it again) or retried.
    fn answer(&mut self, msgs: Vec<Msg>, answered: Answered) {
        self.consumers_busy -= 1;
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
            // every message names a delivery on record, which no one removes (the archive
            // drops bodies, not rows): whether the load or the transaction said `missing`
            if r.outcome == "missing" {
                self.violation(format!(
                    "queue message names {id}, which the consumer answered missing"
                ));
            }
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

fn call_name(resumed: &Resumed<Call, Driven>) -> &'static str {
    match resumed {
        Resumed::Asks(Call::Load(_)) => "its load",
        Resumed::Asks(Call::Apply(..)) => "its transaction",
        Resumed::Asks(Call::RecordFailure(_)) => "recording a failure",
        Resumed::Done(Driven::Split(..)) => "splitting its batch",
        Resumed::Done(Driven::Answered(_)) => "its answers",
    }
}
