//! The deliveries' dead-letter queue: a message that spent its queue retries. It marks the
//! delivery dead (visible, counted, alerted, replayable) only when the delivery itself keeps
//! failing: at least [`DEAD_AFTER_RECORDED_FAILURES`] failed attempts recorded on its row in
//! this generation. A failure is recorded only while D1 answers, so a message whose retries
//! were spent by a D1 outage (or by a consumer that kept dying before it could record
//! anything) is handed back to the consumer from a fresh message instead: the delivery is
//! processed once D1 is back, with no operator (interface §3, amended). A delivery replayed
//! meanwhile (another generation) is left to its replay.

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
}
