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
        refund_waiting: false,
    }
}

/// A payment's row whose invoice has an unprocessed refund on record.
fn waiting(id: &str, event_type: &str) -> ConsumeRow {
    ConsumeRow {
        refund_waiting: true,
        ..row(id, event_type, false, false)
    }
}

fn draw() -> impl FnMut() -> [u8; 16] {
    let mut n = 0u8;
    move || {
        n = n.wrapping_add(1);
        [n; 16]
    }
}

/// The results a committed transaction gives back: a read-back saying `outcome` for each
/// transition, a released effect for the first.
fn results(b: &[Bound<'_>], outcome: &str, order_ref: &str) -> Vec<Vec<serde_json::Value>> {
    let mut released = false;
    b.iter()
        .map(|s| match s.statement.name {
            "RELEASE_EFFECTS" if !released => {
                released = true;
                vec![json!({"effect_id": "eff_1"})]
            }
            "READ_BACK" => vec![json!({
                "status": "paid", "order_ref": order_ref, "applied": (outcome == "applied") as i64,
                "outcome": outcome
            })],
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
fn a_payment_waits_for_a_refund_on_record_unless_the_batch_decides_the_refund_first() {
    // alone: nothing written, retried on the consumer's ladder, no failure recorded
    let mut b = Batch::new(vec![msg("evt_paid", 2)], settings(Ok(Mode::Test)));
    let _ = b.step();
    b.loaded(vec![waiting("evt_paid", "invoice.paid")], &mut draw());
    let Step::Answer(a) = b.step() else { panic!() };
    assert_eq!(a.replies.len(), 1);
    assert_eq!(a.replies[0].outcome, "waiting_for_refund");
    assert_eq!(a.replies[0].answer, Answer::Retry(20));
    assert!(a.replies[0].detail.as_deref().unwrap().contains("inv_1"));
    assert!(a.released.is_empty());
    assert_eq!(b.step(), Step::Done);

    // the payment first, its refund after it in the batch: the payment waits, the refund applies
    let mut b = Batch::new(
        vec![msg("evt_paid", 1), msg("evt_refund", 1)],
        settings(Ok(Mode::Test)),
    );
    let statements = transitions(
        &mut b,
        vec![
            waiting("evt_paid", "invoice.overpaid"),
            row("evt_refund", "invoice.refunded", false, false),
        ],
        1,
        "the refund's transition only",
    );
    b.applied(results(&statements, "applied", "order_a"));
    let Step::Answer(a) = b.step() else { panic!() };
    let outcomes: Vec<(&str, Answer)> = a.replies.iter().map(|r| (r.outcome, r.answer)).collect();
    assert_eq!(
        outcomes,
        [
            ("waiting_for_refund", Answer::Retry(10)),
            ("applied", Answer::Ack)
        ]
    );

    // the refund decided first in the same transaction: the guard sees it, no wait
    let mut b = Batch::new(
        vec![msg("evt_refund", 1), msg("evt_paid", 1)],
        settings(Ok(Mode::Test)),
    );
    transitions(
        &mut b,
        vec![
            row("evt_refund", "invoice.refunded", false, false),
            waiting("evt_paid", "invoice.paid"),
        ],
        2,
        "both transitions, in order",
    );
}

/// Loads `rows` into a fresh batch `b`, and checks that its transaction holds `n`
/// transitions (a read-back each); its statements.
fn transitions(b: &mut Batch, rows: Vec<ConsumeRow>, n: usize, why: &str) -> Vec<Bound<'static>> {
    let _ = b.step();
    b.loaded(rows, &mut draw());
    let Step::Apply(statements) = b.step() else {
        panic!()
    };
    let read_backs = statements
        .iter()
        .filter(|s| s.statement.name == "READ_BACK");
    assert_eq!(read_backs.count(), n, "{why}");
    statements
}

#[test]
fn a_payment_waits_for_a_refund_on_record_even_after_another_transition_of_its_invoice() {
    // only a refund decided before it lets the payment through: another event of the same
    // invoice earlier in the batch decides nothing about the refund (interface §3)
    for earlier in ["invoice.confirming", "invoice.partially_paid"] {
        let mut b = Batch::new(
            vec![msg("evt_earlier", 1), msg("evt_paid", 1)],
            settings(Ok(Mode::Test)),
        );
        let statements = transitions(
            &mut b,
            vec![
                row("evt_earlier", earlier, false, false),
                waiting("evt_paid", "invoice.paid"),
            ],
            1,
            "the earlier event's transition only",
        );
        b.applied(results(&statements, "applied", "order_a"));
        let Step::Answer(a) = b.step() else { panic!() };
        let outcomes: Vec<(&str, Answer)> =
            a.replies.iter().map(|r| (r.outcome, r.answer)).collect();
        assert_eq!(
            outcomes,
            [
                ("applied", Answer::Ack),
                ("waiting_for_refund", Answer::Retry(10))
            ],
            "after {earlier}"
        );
    }
}
