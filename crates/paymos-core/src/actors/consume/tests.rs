use super::*;
use serde_json::json;

fn settings(mode: Result<Mode, String>) -> Settings {
    Settings {
        mode,
        pull: false,
        retry_base: 10,
        plan: None,
        edit: None,
    }
}

fn msg(id: &str, attempts: u32) -> Message {
    Message {
        event_id: id.into(),
        generation: Some(0),
        attempts,
        facts: None,
    }
}

/// A receipt's message: it carries its envelope's facts.
fn receipt(id: &str, event_type: &str, attempts: u32) -> Message {
    Message {
        facts: Some(Facts {
            event_type: event_type.into(),
            resource_id: "inv_1".into(),
            livemode: false,
            order_ref: Some("order_a".into()),
            amount: None,
            currency: None,
        }),
        ..msg(id, attempts)
    }
}

fn row(id: &str, event_type: &str, livemode: bool, processed: bool) -> ConsumeRow {
    let body = json!({
        "event_id": id, "type": event_type, "created": 1764450000, "livemode": livemode,
        "data": {"id": "inv_1", "object": "invoice", "order_ref": "order_a"}
    })
    .to_string();
    ConsumeRow {
        event_id: id.into(),
        processed_at: processed.then(|| "2026-12-01T00:00:01.000Z".into()),
        body: Some(body),
    }
}

fn draw() -> impl FnMut() -> [u8; 16] {
    let mut n = 0u8;
    move || {
        n = n.wrapping_add(1);
        [n; 16]
    }
}

/// The results a committed transaction gives back: each transition's outcome recorded and
/// read back as `outcome`, a released effect for the first.
fn results(b: &[Bound<'_>], outcome: &str, order_ref: &str) -> Vec<Vec<serde_json::Value>> {
    read_backs(b, order_ref, |_| Back::Recorded(outcome))
}

/// What the transaction did with one transition's delivery.
#[derive(Clone, Copy)]
enum Back<'a> {
    /// Recorded this outcome.
    Recorded(&'a str),
    /// Found it recorded already, with this outcome.
    Found(&'a str),
    /// Found no delivery.
    Gone,
    /// Held it: a payment waiting for a refund.
    Held,
}

/// The results of a committed transaction whose `n`th transition's delivery went as `back(n)`.
fn read_backs<'o>(
    b: &[Bound<'_>],
    order_ref: &str,
    back: impl Fn(usize) -> Back<'o>,
) -> Vec<Vec<serde_json::Value>> {
    let mut released = false;
    let mut n = 0;
    b.iter()
        .map(|s| match (s.statement.name, back(n)) {
            ("RELEASE_EFFECTS", Back::Recorded(_)) if !released => {
                released = true;
                vec![json!({"effect_id": "eff_1"})]
            }
            ("RECORD_OUTCOME", Back::Recorded(_)) => vec![json!({"event_id": "evt"})],
            ("READ_BACK", got) => {
                n += 1;
                let (applied, outcome, held) = match got {
                    Back::Recorded(o) => (o == "applied", Some(o), false),
                    Back::Found(o) => (false, Some(o), false),
                    Back::Gone => (false, None, false),
                    Back::Held => (false, None, true),
                };
                vec![json!({
                    "status": "paid", "order_ref": order_ref, "applied": applied as i64,
                    "outcome": outcome, "held": held as i64
                })]
            }
            _ => Vec::new(),
        })
        .collect()
}

#[test]
fn a_batch_loads_once_applies_in_one_transaction_and_acks_every_message() {
    let mut b = Batch::new(
        vec![
            msg("evt_a", 1),
            msg("evt_b", 1),
            msg("evt_c", 1),
            msg("evt_d", 1),
            msg("evt_gone", 1),
        ],
        settings(Ok(Mode::Test)),
    );
    let Step::Load(load) = b.step() else { panic!() };
    assert_eq!(load.statement.name, "LOAD_DELIVERIES");
    b.loaded(
        vec![
            row("evt_a", "invoice.paid", false, false),
            row("evt_b", "invoice.paid", true, false),
            row("evt_c", "invoice.disputed", false, false),
            row("evt_d", "invoice.paid", false, true),
        ],
        &mut draw(),
    );
    let Step::Apply(statements) = b.step() else {
        panic!()
    };
    let names: Vec<&str> = statements.iter().map(|s| s.statement.name).collect();
    assert_eq!(names[0], "GUARDED_UPSERT");
    assert_eq!(names.iter().filter(|n| **n == "MARK_IGNORED").count(), 2);
    assert_eq!(names.iter().filter(|n| **n == "READ_BACK").count(), 1);
    let res = results(&statements, "applied", "order_a");
    b.applied(res);
    let Step::Answer(a) = b.step() else { panic!() };
    let outcomes: Vec<(&str, Option<&str>, Answer)> = a
        .replies
        .iter()
        .map(|r| (r.outcome, r.detail.as_deref(), r.answer))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("applied", None, Answer::Ack),
            ("ignored", Some(LIVEMODE_MISMATCH), Answer::Ack),
            ("ignored", Some(UNKNOWN_EVENT_TYPE), Answer::Ack),
            ("already_processed", None, Answer::Ack),
            ("missing", None, Answer::Ack),
        ]
    );
    assert_eq!(a.released, ["eff_1"]);
    assert!(a.lines.is_empty());
    assert_eq!(b.step(), Step::Done);
}

#[test]
fn a_failed_batch_is_split_and_a_failed_message_retries_on_the_queues_count() {
    let mut b = Batch::new(
        vec![msg("evt_a", 1), msg("evt_b", 1)],
        settings(Ok(Mode::Test)),
    );
    let _ = b.step();
    b.failed("database_unavailable: D1_ERROR".into());
    let Step::Split(each, why) = b.step() else {
        panic!()
    };
    assert_eq!(each.len(), 2);
    assert!(why.starts_with("database_unavailable"));
    let mut one = Batch::new(vec![msg("evt_a", 3)], settings(Ok(Mode::Test)));
    let _ = one.step();
    one.failed("database_unavailable: D1_ERROR".into());
    let Step::RecordFailure(record) = one.step() else {
        panic!()
    };
    assert_eq!(record.statement.name, "RECORD_FAILURE");
    let Step::Answer(a) = one.step() else {
        panic!()
    };
    assert_eq!(
        a.replies[0].answer,
        Answer::Retry(40),
        "10 s doubling: the third attempt"
    );
    assert_eq!(
        a.replies[0].detail.as_deref(),
        Some("database_unavailable: D1_ERROR; attempt 3; retry in 40s")
    );
}

#[test]
fn a_body_that_no_longer_parses_and_an_invalid_mode_fail_the_message() {
    let mut b = Batch::new(vec![msg("evt_a", 1)], settings(Ok(Mode::Test)));
    let _ = b.step();
    let mut broken = row("evt_a", "invoice.paid", false, false);
    broken.body = Some(r#"{"event_id":"evt_a","type":"invoice.paid"}"#.into());
    b.loaded(vec![broken], &mut draw());
    let Step::RecordFailure(record) = b.step() else {
        panic!()
    };
    assert!(matches!(&record.args[1], Arg::Text(t) if t.contains("stored body does not parse")));
    let mut b = Batch::new(
        vec![msg("evt_a", 1)],
        settings(Err("PAYMOS_MODE is not live or test".into())),
    );
    let Step::RecordFailure(record) = b.step() else {
        panic!()
    };
    assert!(
        matches!(&record.args[1], Arg::Text(t) if t.starts_with("not_configured: PAYMOS_MODE"))
    );
}

#[test]
fn an_order_ref_that_disagrees_with_the_one_on_record_is_said() {
    let mut b = Batch::new(vec![msg("evt_a", 1)], settings(Ok(Mode::Test)));
    let _ = b.step();
    b.loaded(
        vec![row("evt_a", "invoice.paid", false, false)],
        &mut draw(),
    );
    let Step::Apply(statements) = b.step() else {
        panic!()
    };
    b.applied(results(&statements, "stale", "order_first"));
    let Step::Answer(a) = b.step() else { panic!() };
    assert_eq!(a.replies[0].outcome, "stale");
    assert_eq!(a.lines.len(), 1);
    assert_eq!(a.lines[0].outcome, "order_ref_mismatch");
    assert!(
        a.lines[0].detail.contains("\"order_a\"") && a.lines[0].detail.contains("\"order_first\"")
    );
}

#[test]
fn modes_accept_their_own_livemode() {
    assert!(Mode::Live.accepts(true) && !Mode::Live.accepts(false));
    assert!(Mode::Test.accepts(false) && !Mode::Test.accepts(true));
    assert_eq!(Mode::Live.as_str(), "live");
}

/// An I/O whose load fails, logging what the driver asked.
struct FailingLoad {
    asked: Vec<&'static str>,
}

impl Io for FailingLoad {
    fn draw(&mut self) -> [u8; 16] {
        [7; 16]
    }
    async fn load(&mut self, _: Bound<'static>) -> Result<Vec<ConsumeRow>, String> {
        self.asked.push("load");
        Err(database_unavailable("D1_ERROR"))
    }
    async fn apply(
        &mut self,
        _: Vec<Bound<'static>>,
        _: &Batch,
    ) -> Result<Vec<Vec<serde_json::Value>>, String> {
        unreachable!("nothing loaded, nothing applied")
    }
    async fn record_failure(&mut self, b: Bound<'static>) {
        self.asked.push(b.statement.name);
    }
}

#[test]
fn the_driver_splits_a_failed_batch_and_records_a_single_message_failure() {
    let s = settings(Ok(Mode::Live));
    let mut two = Batch::new(vec![msg("evt_1", 1), msg("evt_2", 1)], s.clone());
    let mut io = FailingLoad { asked: Vec::new() };
    let Driven::Split(messages, why) = crate::actors::run_at_once(drive(&mut two, &mut io)) else {
        panic!("a failed batch of two splits")
    };
    assert_eq!(messages.len(), 2);
    assert_eq!(why, "database_unavailable: D1_ERROR");
    let mut one = Batch::new(vec![messages[0].clone()], s);
    let mut io = FailingLoad { asked: Vec::new() };
    let Driven::Answered(answered) = crate::actors::run_at_once(drive(&mut one, &mut io)) else {
        panic!("a batch of one answers")
    };
    assert_eq!(io.asked, ["load", "RECORD_FAILURE"]);
    assert!(matches!(answered.replies[0].answer, Answer::Retry(_)));
}

#[test]
fn a_batch_of_receipts_loads_nothing_and_the_transaction_says_what_each_found() {
    // every message carries its facts: no load; the transaction's delivery gate sees the rest
    let mut b = Batch::new(
        vec![
            receipt("evt_a", "invoice.paid", 1),
            receipt("evt_b", "invoice.paid", 1),
            receipt("evt_c", "invoice.paid", 1),
            receipt("evt_d", "invoice.disputed", 1),
        ],
        settings(Ok(Mode::Test)),
    );
    assert_eq!(b.step(), Step::Decide);
    b.loaded(Vec::new(), &mut draw());
    let Step::Apply(statements) = b.step() else {
        panic!()
    };
    let gate = |s: &Bound<'_>| s.statement.name == "GUARDED_UPSERT";
    assert_eq!(statements.iter().filter(|s| gate(s)).count(), 3);
    let backs = [
        Back::Recorded("applied"),
        Back::Found("applied"),
        Back::Gone,
    ];
    b.applied(read_backs(&statements, "order_a", |n| backs[n.min(2)]));
    let Step::Answer(a) = b.step() else { panic!() };
    let outcomes: Vec<(&str, Answer)> = a.replies.iter().map(|r| (r.outcome, r.answer)).collect();
    assert_eq!(
        outcomes,
        [
            ("applied", Answer::Ack),
            ("already_processed", Answer::Ack),
            ("missing", Answer::Ack),
            ("ignored", Answer::Ack),
        ]
    );
    assert_eq!(a.released, ["eff_1"]);
}

#[test]
fn only_the_messages_without_facts_are_loaded() {
    let mut b = Batch::new(
        vec![receipt("evt_a", "invoice.paid", 1), msg("evt_replayed", 1)],
        settings(Ok(Mode::Test)),
    );
    let Step::Load(load) = b.step() else { panic!() };
    assert_eq!(load.args[0], Arg::json_list(&["evt_replayed"]));
    b.loaded(
        vec![row("evt_replayed", "invoice.paid", false, true)],
        &mut draw(),
    );
    let Step::Apply(statements) = b.step() else {
        panic!()
    };
    // the receipt's transition only: the replayed delivery was processed meanwhile
    let read_backs = statements
        .iter()
        .filter(|s| s.statement.name == "READ_BACK");
    assert_eq!(read_backs.count(), 1);
}

#[test]
fn a_payment_the_transaction_holds_waits_for_its_refund() {
    // held by the delivery gate: nothing written, retried on the consumer's ladder, no
    // failure recorded, nothing released
    for first in [receipt("evt_paid", "invoice.paid", 2), msg("evt_paid", 2)] {
        let mut b = Batch::new(vec![first], settings(Ok(Mode::Test)));
        match b.step() {
            Step::Decide => b.loaded(Vec::new(), &mut draw()),
            Step::Load(_) => b.loaded(
                vec![row("evt_paid", "invoice.paid", false, false)],
                &mut draw(),
            ),
            other => panic!("{other:?}"),
        }
        let Step::Apply(statements) = b.step() else {
            panic!()
        };
        b.applied(read_backs(&statements, "order_a", |_| Back::Held));
        let Step::Answer(a) = b.step() else { panic!() };
        assert_eq!(a.replies.len(), 1);
        assert_eq!(a.replies[0].outcome, "waiting_for_refund");
        assert_eq!(a.replies[0].answer, Answer::Retry(20));
        assert!(a.replies[0].detail.as_deref().unwrap().contains("inv_1"));
        assert!(a.released.is_empty());
        assert_eq!(b.step(), Step::Done);
    }
}
