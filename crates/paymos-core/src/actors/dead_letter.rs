//! The deliveries' dead-letter queue: a message that spent its queue retries. It marks the
//! delivery dead (visible, counted, alerted, replayable) only when the delivery itself keeps
//! failing: at least [`DEAD_AFTER_RECORDED_FAILURES`] failed attempts recorded on its row in
//! this generation. A failure is recorded only while D1 answers, so a message whose retries
//! were spent by a D1 outage (or by a consumer that kept dying before it could record
//! anything) is handed back to the consumer from a fresh message instead: the delivery is
//! processed once D1 is back, with no operator (interface §3, amended). Each hand-back counts
//! as one failure, so a consumer that dies on a delivery every time (its CPU or memory spent)
//! buries it after that many hand-backs, hours after an hour-long outage would have ended,
//! instead of handing it back for ever. A delivery replayed meanwhile (another generation) is
//! left to its replay.

use std::borrow::Cow;

use crate::rows::DeliveryRow;
use crate::statements::{self as st, Arg, Bound};

/// Recorded failures (in this generation) before a dead letter marks a delivery dead.
pub const DEAD_AFTER_RECORDED_FAILURES: i64 = 3;

/// Deliberate defects for the simulator's teeth; production passes the default.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mutation {
    /// What is bound as `MARK_DEAD`'s generation, given the message's.
    pub generation: Option<fn(Option<i64>) -> Option<i64>>,
    /// Mark dead whatever was recorded (an outage's dead letters bury deliveries).
    pub ignore_recorded_failures: bool,
}

/// The first statement: mark it dead if it is a poison message of this generation.
pub fn mark(event_id: &str, generation: Option<i64>, mutation: &Mutation) -> Bound<'static> {
    let generation = match mutation.generation {
        Some(f) => f(generation),
        None => generation,
    };
    let min = if mutation.ignore_recorded_failures {
        0
    } else {
        DEAD_AFTER_RECORDED_FAILURES
    };
    st::MARK_DEAD.bind(vec![
        Arg::Text(Cow::Owned(event_id.to_string())),
        Arg::opt_int(generation),
        Arg::Int(min),
    ])
}

/// What the dead letter came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Marked dead.
    Dead,
    /// Nothing to do: processed meanwhile, replayed (another generation), or gone.
    Superseded(&'static str),
    /// Not a poison message: send it again, as a fresh message of the same generation.
    HandBack { generation: Option<i64> },
}

/// The verdict once `mark` ran: `marked` whether it returned the row; if not, the driver
/// loads the delivery (`LOAD_DELIVERY`) and passes it here.
pub fn verdict(marked: bool, row: Option<&DeliveryRow>, generation: Option<i64>) -> Verdict {
    if marked {
        return Verdict::Dead;
    }
    let Some(row) = row else {
        return Verdict::Superseded("missing");
    };
    if row.processed_at.is_some() {
        return Verdict::Superseded("already_processed");
    }
    if generation.is_some_and(|g| g != row.generation) {
        return Verdict::Superseded("replayed");
    }
    Verdict::HandBack { generation }
}

/// The last error a counted hand-back leaves on a row that has none.
pub const HANDED_BACK: &str =
    "queue retries spent with no failure recorded (D1 unreachable, or the consumer died): handed back";

/// The statement that counts a hand-back as a failure ([`decide`]).
pub fn count_hand_back(event_id: &str, generation: Option<i64>) -> Bound<'static> {
    st::COUNT_HAND_BACK.bind(vec![
        Arg::Text(Cow::Owned(event_id.to_string())),
        Arg::opt_int(generation),
        Arg::text(HANDED_BACK),
    ])
}

/// What the dead-letter driver does to the world. A failed call leaves the message to be
/// retried (nothing was decided).
#[allow(async_fn_in_trait)]
pub trait Io {
    type Error;
    /// `MARK_DEAD`: whether it returned the row.
    async fn mark(&mut self, b: Bound<'static>) -> Result<bool, Self::Error>;
    /// `LOAD_DELIVERY`.
    async fn load(&mut self, event_id: &str) -> Result<Option<DeliveryRow>, Self::Error>;
    /// `COUNT_HAND_BACK`, before the driver sends the message again.
    async fn count(&mut self, b: Bound<'static>) -> Result<(), Self::Error>;
}

/// The dead letter's verdict, written once for both drivers: mark, and if that changed
/// nothing, load the delivery to say why; a hand-back is counted before it is sent.
pub async fn decide<I: Io>(
    io: &mut I,
    event_id: &str,
    generation: Option<i64>,
    mutation: &Mutation,
) -> Result<Verdict, I::Error> {
    let marked = io.mark(mark(event_id, generation, mutation)).await?;
    let row = if marked {
        None
    } else {
        io.load(event_id).await?
    };
    let verdict = verdict(marked, row.as_ref(), generation);
    if let Verdict::HandBack { generation } = verdict {
        io.count(count_hand_back(event_id, generation)).await?;
    }
    Ok(verdict)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(processed: bool, generation: i64, attempts: i64) -> DeliveryRow {
        DeliveryRow {
            event_id: "evt_1".into(),
            resource_id: "inv_1".into(),
            event_type: "invoice.paid".into(),
            received_at: "2026-12-01T00:00:00.000Z".into(),
            processed_at: processed.then(|| "2026-12-01T00:00:01.000Z".into()),
            outcome: processed.then(|| "applied".into()),
            attempts,
            last_error: None,
            enqueued_at: None,
            replays: 0,
            reason: None,
            generation,
            archived_at: None,
            archive_key: None,
            dismissed_at: None,
            dismiss_reason: None,
            body: None,
        }
    }

    #[test]
    fn only_a_delivery_that_keeps_failing_goes_dead() {
        let m = mark("evt_1", Some(2), &Mutation::default());
        assert_eq!(m.statement.name, "MARK_DEAD");
        assert_eq!(m.args[1], Arg::Int(2));
        assert_eq!(m.args[2], Arg::Int(DEAD_AFTER_RECORDED_FAILURES));
        assert_eq!(verdict(true, None, Some(2)), Verdict::Dead);
        // retries spent while D1 was down: nothing recorded, handed back
        assert_eq!(
            verdict(false, Some(&row(false, 2, 0)), Some(2)),
            Verdict::HandBack {
                generation: Some(2)
            }
        );
        assert_eq!(
            verdict(false, Some(&row(false, 3, 0)), Some(2)),
            Verdict::Superseded("replayed")
        );
        assert_eq!(
            verdict(false, Some(&row(true, 2, 5)), Some(2)),
            Verdict::Superseded("already_processed")
        );
        assert_eq!(verdict(false, None, None), Verdict::Superseded("missing"));
        let teeth = Mutation {
            ignore_recorded_failures: true,
            ..Mutation::default()
        };
        assert_eq!(mark("evt_1", None, &teeth).args[2], Arg::Int(0));
    }

    /// Marks nothing (or marks), then loads `row`; logs what was asked.
    struct World {
        marks: bool,
        row: Option<DeliveryRow>,
        asked: Vec<&'static str>,
    }

    impl Io for World {
        type Error = ();
        async fn mark(&mut self, b: Bound<'static>) -> Result<bool, ()> {
            self.asked.push(b.statement.name);
            Ok(self.marks)
        }
        async fn load(&mut self, _: &str) -> Result<Option<DeliveryRow>, ()> {
            self.asked.push("LOAD_DELIVERY");
            Ok(self.row.clone())
        }
        async fn count(&mut self, b: Bound<'static>) -> Result<(), ()> {
            self.asked.push(b.statement.name);
            Ok(())
        }
    }

    #[test]
    fn the_driver_loads_only_what_the_mark_left() {
        let m = Mutation::default();
        let mut marked = World {
            marks: true,
            row: None,
            asked: Vec::new(),
        };
        let v = crate::actors::run_at_once(decide(&mut marked, "evt_1", Some(0), &m));
        assert_eq!((v, marked.asked), (Ok(Verdict::Dead), vec!["MARK_DEAD"]));
        let mut replayed = World {
            marks: false,
            row: Some(row(false, 1, 2)),
            asked: Vec::new(),
        };
        let v = crate::actors::run_at_once(decide(&mut replayed, "evt_1", Some(0), &m));
        assert_eq!(v, Ok(Verdict::Superseded("replayed")));
        assert_eq!(replayed.asked, ["MARK_DEAD", "LOAD_DELIVERY"]);
        // nothing recorded: handed back, and the hand-back counted first
        let mut unrecorded = World {
            marks: false,
            row: Some(row(false, 0, 0)),
            asked: Vec::new(),
        };
        let v = crate::actors::run_at_once(decide(&mut unrecorded, "evt_1", Some(0), &m));
        assert_eq!(
            v,
            Ok(Verdict::HandBack {
                generation: Some(0)
            })
        );
        assert_eq!(
            unrecorded.asked,
            ["MARK_DEAD", "LOAD_DELIVERY", "COUNT_HAND_BACK"]
        );
    }

    /// The delivery's row as `MARK_DEAD` finds it: it returns the row (and marks it dead)
    /// only if the row is unprocessed, of the message's generation, and has at least
    /// `min_failures` failures recorded; logs what was asked.
    struct Table {
        row: DeliveryRow,
        asked: Vec<&'static str>,
    }

    impl Io for Table {
        type Error = ();
        async fn mark(&mut self, b: Bound<'static>) -> Result<bool, ()> {
            self.asked.push(b.statement.name);
            assert!(
                b.statement.sql.contains("AND attempts >= ?3"),
                "the WHERE read below"
            );
            let generation = match b.args[1] {
                Arg::Null => true,
                Arg::Int(g) => g == self.row.generation,
                _ => panic!("{b:?}"),
            };
            let Arg::Int(min_failures) = b.args[2] else {
                panic!("{b:?}")
            };
            Ok(self.row.processed_at.is_none() && generation && self.row.attempts >= min_failures)
        }
        async fn load(&mut self, _: &str) -> Result<Option<DeliveryRow>, ()> {
            self.asked.push("LOAD_DELIVERY");
            Ok(Some(self.row.clone()))
        }
        async fn count(&mut self, b: Bound<'static>) -> Result<(), ()> {
            self.asked.push(b.statement.name);
            Ok(())
        }
    }

    /// docs/decisions.md, "The dead letter": dead only with 3 failures recorded on its row in
    /// this generation; one or two (an outage's hand-back, a consumer that died once or twice)
    /// hand it back.
    #[test]
    fn a_delivery_goes_dead_at_its_third_recorded_failure_not_before() {
        let m = Mutation::default();
        for failures in [1, 2] {
            let mut t = Table {
                row: row(false, 4, failures),
                asked: Vec::new(),
            };
            let v = crate::actors::run_at_once(decide(&mut t, "evt_1", Some(4), &m));
            assert_eq!(
                v,
                Ok(Verdict::HandBack {
                    generation: Some(4)
                }),
                "{failures} failures recorded"
            );
            assert_eq!(t.asked, ["MARK_DEAD", "LOAD_DELIVERY", "COUNT_HAND_BACK"]);
        }
        let mut t = Table {
            row: row(false, 4, 3),
            asked: Vec::new(),
        };
        let v = crate::actors::run_at_once(decide(&mut t, "evt_1", Some(4), &m));
        assert_eq!((v, t.asked), (Ok(Verdict::Dead), vec!["MARK_DEAD"]));
    }
}
