use super::*;
use crate::rows::EffectRow;

const T0: i64 = 1_764_450_000; // 2025-11-29T21:00:00Z
fn iso(t: i64) -> String {
    // SQLite's text for unix seconds (time::iso_minute gives the minute; add the seconds)
    format!(
        "{}:{:02}.000Z",
        crate::time::iso_minute(t),
        t.rem_euclid(60)
    )
}

fn effect(kind: &str) -> EffectRow {
    EffectRow {
        seq: 1,
        id: format!("eff_{kind}"),
        kind: kind.into(),
        resource_id: "inv_1".into(),
        created_at: iso(T0),
        license_code: Some("LIC".into()),
        order_ref: Some("order_1".into()),
        amount: None,
        currency: None,
        cause: "evt_1".into(),
        dispatch: "pending".into(),
        attempts: 0,
        rung: 0,
        next_attempt_at: None,
        last_error: None,
        delivered_at: None,
        first_attempt_at: None,
        attempt_started_at: None,
        dead_at: None,
        dismissed_at: None,
        dismiss_reason: None,
        acknowledged_at: None,
        awaiting_order_ref: false,
    }
}

fn row(e: EffectRow) -> DispatchRow {
    DispatchRow {
        effect: e,
        earlier_undelivered: 0,
        earlier_attempt_started_at: None,
    }
}

fn settings() -> Settings {
    Settings {
        scale: 1.0,
        timeout_ms: 10_000,
        mutation: Mutation::default(),
    }
}

#[test]
fn before_any_request() {
    let s = settings();
    let push = Push::To;
    assert_eq!(before(None, &push, &s, T0), Before::Done("missing", None));
    let mut e = effect("fulfilment");
    assert_eq!(before(Some(&row(e.clone())), &push, &s, T0), Before::Start);
    for d in ["delivered", "dead", "cancelled"] {
        e.dispatch = d.into();
        assert_eq!(
            before(Some(&row(e.clone())), &push, &s, T0),
            Before::Done("already_dispatched", Some(d.into()))
        );
    }
    e.dispatch = "pending".into();
    e.awaiting_order_ref = true;
    assert_eq!(
        before(Some(&row(e.clone())), &push, &s, T0),
        Before::Done("awaiting_order_ref", None)
    );
    e.awaiting_order_ref = false;
    assert_eq!(
        before(Some(&row(e.clone())), &Push::Pull, &s, T0),
        Before::Done("pending_pull", None)
    );
    assert_eq!(
        before(
            Some(&row(e.clone())),
            &Push::Unusable("plain http".into()),
            &s,
            T0
        ),
        Before::Done("not_configured", Some("plain http".into()))
    );
    // a scheduled retry: not due 60 s early, due 2 s early (the clocks' slack)
    e.next_attempt_at = Some(iso(T0 + 60));
    assert_eq!(
        before(Some(&row(e.clone())), &push, &s, T0),
        Before::NotDue(58)
    );
    assert_eq!(
        before(Some(&row(e.clone())), &push, &s, T0 + 58),
        Before::Start
    );
    // another copy's attempt may be in flight for the timeout and 5 s more
    e.next_attempt_at = None;
    e.attempt_started_at = Some(iso(T0));
    assert_eq!(
        before(Some(&row(e.clone())), &push, &s, T0 + 14),
        Before::Done("attempt_in_flight", None)
    );
    assert_eq!(
        before(Some(&row(e.clone())), &push, &s, T0 + 15),
        Before::Start
    );
}

#[test]
fn a_revocation_waits_for_its_fulfilment_and_for_its_last_attempt() {
    let s = settings();
    let mut r = row(effect("revocation"));
    r.earlier_undelivered = 1;
    assert_eq!(before(Some(&r), &Push::To, &s, T0 + 600), Before::Wait(60));
    // the fulfilment was cancelled by the refund, its last attempt started 3 s ago: the
    // revocation goes once that attempt is past its timeout
    r.earlier_undelivered = 0;
    r.earlier_attempt_started_at = Some(iso(T0));
    assert_eq!(before(Some(&r), &Push::To, &s, T0 + 3), Before::Wait(12));
    assert_eq!(before(Some(&r), &Push::To, &s, T0 + 15), Before::Start);
    // the teeth's mutation lets it overtake
    let mut m = settings();
    m.mutation.ignore_earlier_in_flight = true;
    assert_eq!(before(Some(&r), &Push::To, &m, T0 + 3), Before::Start);
}

fn started(rung: i64, first: i64) -> StartedAttempt {
    StartedAttempt {
        effect_id: "eff_fulfilment".into(),
        attempts: rung,
        rung,
        first_attempt_at: Some(iso(first)),
    }
}

#[test]
fn the_ladder_lasts_16_hours_from_the_first_attempt_whatever_the_count() {
    let s = settings();
    let err = Err(PostError::Status(503));
    assert_eq!(after(&started(1, T0), &Ok(()), &s, T0), After::Delivered);
    assert_eq!(
        after(&started(1, T0), &err, &s, T0),
        After::Retry {
            delay: 10,
            error: PostError::Status(503)
        }
    );
    // the count is spent at the 13th attempt; 16 h 18 min in, dead
    let end = T0 + 16 * 3600 + 18 * 60;
    assert!(matches!(
        after(&started(13, T0), &err, &s, end),
        After::Dead { .. }
    ));
    // spent early (rungs skipped): retried until 16 hours have passed
    assert_eq!(
        after(&started(13, T0), &err, &s, T0 + 3600),
        After::Retry {
            delay: 12 * 3600,
            error: PostError::Status(503)
        }
    );
    assert_eq!(
        after(&started(14, T0), &err, &s, T0 + 15 * 3600),
        After::Retry {
            delay: 3600,
            error: PostError::Status(503)
        }
    );
    // scaled: 16 minutes at 1/60
    let fast = Settings {
        scale: 1.0 / 60.0,
        ..s
    };
    assert_eq!(fast.min_retry_seconds(), 960);
    assert!(matches!(
        after(&started(13, T0), &err, &fast, T0 + 960),
        After::Dead { .. }
    ));
    assert!(matches!(
        after(&started(13, T0), &err, &fast, T0 + 959),
        After::Retry { .. }
    ));
    // the teeth's mutation ends the ladder on its count
    let mut m = settings();
    m.mutation.ignore_schedule = true;
    assert!(matches!(
        after(&started(13, T0), &err, &m, T0 + 60),
        After::Dead { .. }
    ));
}

#[test]
fn the_dead_letter_queue_hands_a_pending_effect_back() {
    assert_eq!(dead_letter(None, T0), DeadLetter::Done("missing"));
    let mut e = effect("fulfilment");
    assert_eq!(
        dead_letter(Some(&row(e.clone())), T0),
        DeadLetter::Requeue(1)
    );
    e.next_attempt_at = Some(iso(T0 + 600));
    assert_eq!(
        dead_letter(Some(&row(e.clone())), T0),
        DeadLetter::Requeue(600)
    );
    e.dispatch = "dead".into();
    assert_eq!(
        dead_letter(Some(&row(e)), T0),
        DeadLetter::Done("already_dispatched")
    );
}

fn msg(id: &str, attempts: u32) -> Message {
    Message {
        effect_id: id.into(),
        attempts,
    }
}

/// A batch walked as a driver walks it: the load, the start, the posts, the record, the
/// answers; the statements are the shared ones, in that order.
#[test]
fn a_batch_starts_before_it_posts_and_answers_every_message() {
    let mut b = Batch::new(
        vec![
            msg("eff_fulfilment", 1),
            msg("eff_settlement", 2),
            msg("eff_fulfilment", 1),
            msg("eff_gone", 1),
        ],
        Push::To,
        settings(),
    );
    assert_eq!(
        b.effect_ids(),
        ["eff_fulfilment", "eff_settlement", "eff_gone"]
    );
    let Step::Load(load) = b.next(T0) else {
        panic!()
    };
    assert_eq!(load.statement.name, "LOAD_EFFECTS_FOR_DISPATCH");
    let mut settlement = effect("settlement");
    settlement.next_attempt_at = Some(iso(T0 + 100));
    b.loaded(vec![row(effect("fulfilment")), row(settlement)], T0);
    let Step::Start(start) = b.next(T0) else {
        panic!()
    };
    assert_eq!(start.statement.name, "START_ATTEMPTS");
    assert_eq!(start.args[0], Arg::json_list(&["eff_fulfilment"]));
    assert_eq!(start.args[1], Arg::text("-15 seconds"));
    // nothing is posted before the start returns it
    b.started(vec![started(1, T0)]);
    let Step::Post(posts) = b.next(T0) else {
        panic!()
    };
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].0, "eff_fulfilment");
    let body: serde_json::Value = serde_json::from_str(&posts[0].1).unwrap();
    assert_eq!(body["license_code"], "LIC");
    b.posted("eff_fulfilment", Err(PostError::Status(500)));
    let Step::Record(record) = b.next(T0 + 1) else {
        panic!()
    };
    let names: Vec<&str> = record.iter().map(|r| r.statement.name).collect();
    assert_eq!(names, ["RECORD_EFFECT_FAILURE"]);
    assert_eq!(
        record[0].args[1],
        Arg::text("the order system answered 500")
    );
    assert_eq!(record[0].args[2], Arg::text("+10 seconds"));
    b.recorded(vec![false]);
    let Step::Answer(replies) = b.next(T0 + 1) else {
        panic!()
    };
    assert_eq!(
        replies[0].detail.as_deref(),
        Some("the order system answered 500; retry in 10s")
    );
    let answers: Vec<(Answer, &str)> = replies.iter().map(|r| (r.answer, r.outcome)).collect();
    assert_eq!(
        answers,
        [
            (Answer::Retry(10), "retry"),
            (Answer::Retry(98), "not_due"),
            (Answer::Ack, "duplicate_message"),
            (Answer::Ack, "missing"),
        ]
    );
    assert_eq!(b.next(T0 + 1), Step::Done);
}

#[test]
fn a_start_that_returns_nothing_posts_nothing() {
    // the refund cancelled the fulfilment between the load and the start
    let mut b = Batch::new(vec![msg("eff_fulfilment", 1)], Push::To, settings());
    let _ = b.next(T0);
    b.loaded(vec![row(effect("fulfilment"))], T0);
    assert!(matches!(b.next(T0), Step::Start(_)));
    b.started(vec![]);
    let Step::Answer(replies) = b.next(T0) else {
        panic!()
    };
    assert_eq!(replies[0].outcome, "not_started");
    assert_eq!(replies[0].answer, Answer::Ack);
}

#[test]
fn a_wait_is_deferred_and_held_by_one_message() {
    let mut r = row(effect("revocation"));
    r.earlier_undelivered = 1;
    let mut b = Batch::new(vec![msg("eff_revocation", 1)], Push::To, settings());
    let _ = b.next(T0);
    b.loaded(vec![r.clone()], T0);
    let Step::Record(record) = b.next(T0) else {
        panic!()
    };
    assert_eq!(record[0].statement.name, "DEFER_EFFECT");
    b.recorded(vec![true]);
    let Step::Answer(replies) = b.next(T0) else {
        panic!()
    };
    assert_eq!(replies[0].answer, Answer::AckAndSendAfter(10));
    // a copy finding the wait held sends nothing
    let mut b = Batch::new(vec![msg("eff_revocation", 1)], Push::To, settings());
    let _ = b.next(T0);
    b.loaded(vec![r], T0);
    let _ = b.next(T0);
    b.recorded(vec![false]);
    let Step::Answer(replies) = b.next(T0) else {
        panic!()
    };
    assert_eq!(replies[0].answer, Answer::Ack);
}

#[test]
fn a_d1_failure_retries_every_message_on_the_queues_count() {
    let mut b = Batch::new(vec![msg("eff_a", 1), msg("eff_b", 3)], Push::To, settings());
    let replies = b.db_failed("D1_ERROR: overloaded");
    let answers: Vec<Answer> = replies.iter().map(|r| r.answer).collect();
    assert_eq!(answers, [Answer::Retry(10), Answer::Retry(60)]);
    assert_eq!(b.next(T0), Step::Done);
}

#[test]
fn the_mutation_records_the_attempt_after_the_request() {
    let mut s = settings();
    s.mutation.attempt_after_request = true;
    let mut b = Batch::new(vec![msg("eff_fulfilment", 1)], Push::To, s);
    let _ = b.next(T0);
    b.loaded(vec![row(effect("fulfilment"))], T0);
    // posted first
    let Step::Post(posts) = b.next(T0) else {
        panic!()
    };
    assert_eq!(posts.len(), 1);
    b.posted("eff_fulfilment", Ok(()));
    let Step::Start(start) = b.next(T0) else {
        panic!()
    };
    assert_eq!(start.statement.name, "START_ATTEMPTS");
    b.started(vec![]);
    let Step::Record(record) = b.next(T0) else {
        panic!()
    };
    // the kept count of delivered effects first, for the effects marked below (each once)
    let names: Vec<&str> = record.iter().map(|r| r.statement.name).collect();
    assert_eq!(names, ["TALLY_DELIVERED", "MARK_EFFECT_DELIVERED"]);
    assert_eq!(record[0].args[0], Arg::json_list(&["eff_fulfilment"]));
}

#[test]
fn each_post_failure_says_what_reached_the_order_system() {
    let cases = [
        (
            PostError::Timeout { ms: 10_000 },
            "timeout",
            "the order system did not answer within 10000 ms",
        ),
        (
            PostError::Unreachable("connection refused".into()),
            "unreachable",
            "the order system could not be reached: connection refused",
        ),
        (
            PostError::Status(502),
            "status",
            "the order system answered 502",
        ),
        (
            PostError::Request("Invalid URL".into()),
            "request",
            "the order system was not posted to: the request could not be built (Invalid URL)",
        ),
        (
            PostError::NotConfigured,
            "not_configured",
            "the order system is not configured",
        ),
    ];
    for (e, kind, text) in cases {
        assert_eq!(e.kind(), kind);
        assert_eq!(e.last_error(), text);
    }
    // the alerts' sender words it after its own name
    assert_eq!(
        format!("the alert webhook {}", PostError::Status(500)),
        "the alert webhook answered 500"
    );
}

#[test]
fn a_dead_effect_records_its_last_failure() {
    let s = settings();
    let dead = after(
        &started(13, T0),
        &Err(PostError::Timeout { ms: 500 }),
        &s,
        T0 + 17 * 3600,
    );
    assert_eq!(
        dead,
        After::Dead {
            error: PostError::Timeout { ms: 500 }
        }
    );
}

/// An I/O that answers at once and keeps a log of what the driver asked (the driver's
/// futures never wait on it, so one poll runs them to the end).
#[derive(Default)]
struct Recorder {
    asked: Vec<String>,
    fail_load: bool,
}

impl Io for Recorder {
    type Error = String;
    fn now(&self) -> i64 {
        T0
    }
    async fn load(&mut self, b: Bound<'static>) -> Result<Vec<DispatchRow>, String> {
        self.asked.push(b.statement.name.into());
        if self.fail_load {
            return Err("D1_ERROR".into());
        }
        let Arg::Text(ids) = &b.args[0] else { panic!() };
        let ids: Vec<String> = serde_json::from_str(ids).unwrap();
        Ok(ids
            .iter()
            .map(|id| {
                let mut e = effect("settlement");
                e.id = id.clone();
                e.resource_id = format!("wd_{id}");
                row(e)
            })
            .collect())
    }
    async fn start(&mut self, b: Bound<'static>) -> Result<Vec<StartedAttempt>, String> {
        self.asked.push(b.statement.name.into());
        let Arg::Text(ids) = &b.args[0] else { panic!() };
        let ids: Vec<String> = serde_json::from_str(ids).unwrap();
        Ok(ids
            .into_iter()
            .map(|effect_id| StartedAttempt {
                effect_id,
                ..started(1, T0)
            })
            .collect())
    }
    async fn post(&mut self, wave: &[(String, String)]) -> Vec<Result<(), PostError>> {
        self.asked.push(format!("POST x{}", wave.len()));
        wave.iter().map(|_| Ok(())).collect()
    }
    async fn record(&mut self, statements: Vec<Bound<'static>>) -> Result<Vec<bool>, String> {
        self.asked.push(format!("record x{}", statements.len()));
        Ok(statements.iter().map(|_| false).collect())
    }
}

#[test]
fn the_driver_posts_in_waves_of_six_after_the_start() {
    let ids: Vec<String> = (0..8).map(|i| format!("eff_{i}")).collect();
    let messages = ids.iter().map(|id| msg(id, 1)).collect();
    let mut b = Batch::new(messages, Push::To, settings());
    let mut io = Recorder::default();
    let replies = crate::actors::run_at_once(drive(&mut b, &mut io)).unwrap();
    assert_eq!(
        io.asked,
        [
            "LOAD_EFFECTS_FOR_DISPATCH",
            "START_ATTEMPTS",
            "POST x6",
            "POST x2",
            // eight outcomes and the kept count of deliveries
            "record x9"
        ]
    );
    assert_eq!(replies.len(), 8);
    assert!(replies.iter().all(|r| r.answer == Answer::Ack));
}

#[test]
fn the_driver_stops_at_a_failed_call() {
    let mut b = Batch::new(vec![msg("eff_1", 1)], Push::To, settings());
    let mut io = Recorder {
        fail_load: true,
        ..Recorder::default()
    };
    assert_eq!(
        crate::actors::run_at_once(drive(&mut b, &mut io)),
        Err("D1_ERROR".to_string())
    );
    assert_eq!(io.asked, ["LOAD_EFFECTS_FOR_DISPATCH"]);
    let replies = b.db_failed("D1_ERROR");
    assert!(matches!(replies[0].answer, Answer::Retry(_)));
}

#[test]
fn a_redelivered_effect_that_fails_climbs_a_fresh_ladder_from_its_first_rung() {
    // dead after 13 attempts, then redelivered by an operator: rung 0 and a fresh ladder,
    // `attempts` kept (REDELIVER_EFFECT); its next attempts start 20 hours after the first
    let redelivered = T0 + 20 * 3600;
    let attempt = |attempts: i64, rung: i64| StartedAttempt {
        attempts,
        rung,
        ..started(rung, redelivered)
    };
    let err = Err(PostError::Status(503));
    let s = settings();
    assert_eq!(
        after(&attempt(14, 1), &err, &s, redelivered),
        After::Retry {
            delay: 10,
            error: PostError::Status(503)
        },
        "the ladder's first delay, not its end"
    );
    assert_eq!(
        after(&attempt(15, 2), &err, &s, redelivered + 10),
        After::Retry {
            delay: 30,
            error: PostError::Status(503)
        }
    );
    let half = Settings { scale: 0.5, ..s };
    assert_eq!(
        after(&attempt(14, 1), &err, &half, redelivered),
        After::Retry {
            delay: 5,
            error: PostError::Status(503)
        }
    );
}
