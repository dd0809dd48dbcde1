use super::*;

const NOW: i64 = 1_764_450_000;

fn invoice(id: &str) -> ProviderInvoice {
    ProviderInvoice {
        id: id.into(),
        status: Some("paid".into()),
        amount: Some("10.00".into()),
        currency: Some("USDT".into()),
        order_ref: Some(format!("order_{id}")),
    }
}

fn page(ids: &[&str], has_more: bool) -> ProviderPage {
    ProviderPage {
        data: ids.iter().map(|i| invoice(i)).collect(),
        has_more,
    }
}

fn run(id: i64, pages: i64, cursor: Option<&str>) -> RunRow {
    RunRow {
        id,
        full_walk: 0,
        paid_since: Some(NOW - WINDOW_SECONDS),
        cursor: cursor.map(str::to_string),
        pages,
    }
}

fn seen(ids: &[&str]) -> Vec<Seen> {
    ids.iter().map(|i| Seen { id: (*i).into() }).collect()
}

fn on_record(ids: &[&str], recorded: &[&str]) -> Vec<OnRecord> {
    ids.iter()
        .map(|i| OnRecord {
            id: (*i).into(),
            on_record: recorded.contains(i),
            status: Some("paid".into()),
            // an invoice on record knows what the provider lists
            order_ref: Some(format!("order_{i}")),
            amount: Some("10.00".into()),
            currency: Some("USDT".into()),
            refund_waiting: false,
        })
        .collect()
}

fn names(b: &[Bound<'_>]) -> Vec<&'static str> {
    b.iter().map(|s| s.statement.name).collect()
}

/// Takes the lease and opens `r`.
fn opened(start: Start, budget: u32, r: RunRow) -> Walk {
    let mut w = Walk::new(start, "holder1".into(), budget, NOW);
    let Step::Acquire(a) = w.step() else { panic!() };
    assert_eq!(a.statement.name, "ACQUIRE_LEASE");
    w.leased(true);
    let Step::Open(open) = w.step() else { panic!() };
    match start {
        Start::ContinueOnly => assert_eq!(names(&open), ["OPEN_RECONCILIATION"]),
        _ => assert_eq!(
            names(&open),
            [
                "SUPERSEDE_RECONCILIATIONS",
                "START_RECONCILIATION",
                "OPEN_RECONCILIATION"
            ]
        ),
    }
    w.opened(Some(r));
    w
}

#[test]
fn a_walk_over_two_pages_brings_the_missing_to_paid_and_finishes() {
    let mut w = opened(Start::Manual { full: false }, 100, run(7, 0, None));
    let Step::Fetch {
        starting_after,
        paid_since,
    } = w.step()
    else {
        panic!()
    };
    assert_eq!(starting_after, None);
    assert_eq!(paid_since, Some(NOW - WINDOW_SECONDS));
    w.fetched(Ok(page(&["inv_Zq", "inv_a1"], true)));
    let Step::Lookup(lookup) = w.step() else {
        panic!()
    };
    assert_eq!(names(&lookup), ["UNSEEN_IDS", "PAID_ON_RECORD"]);
    w.looked_up(
        seen(&["inv_Zq", "inv_a1"]),
        on_record(&["inv_Zq", "inv_a1"], &["inv_Zq"]),
    );
    let Step::BringToPaid(i) = w.step() else {
        panic!()
    };
    assert_eq!(i.id, "inv_a1");
    w.brought(true, Some("paid".into()));
    let Step::Record(record) = w.step() else {
        panic!()
    };
    assert_eq!(
        names(&record),
        [
            "RECORD_RECONCILIATION_PAGE",
            "MARK_SEEN",
            "INSERT_FINDING",
            "RENEW_LEASE",
            "CLAIM_CURSOR"
        ]
    );
    // the cursor is the page's last id, whatever order ids sort in
    assert_eq!(record[0].args[2], Arg::text("inv_a1"));
    assert_eq!(record[0].args[4], Arg::Int(2), "checked");
    w.recorded(true, true);
    let Step::Fetch { starting_after, .. } = w.step() else {
        panic!()
    };
    assert_eq!(starting_after.as_deref(), Some("inv_a1"));
    w.fetched(Ok(page(&["inv_0b"], false)));
    let _ = w.step();
    w.looked_up(seen(&["inv_0b"]), on_record(&["inv_0b"], &["inv_0b"]));
    let Step::Record(record) = w.step() else {
        panic!()
    };
    assert_eq!(
        names(&record),
        ["RECORD_RECONCILIATION_PAGE", "MARK_SEEN", "RENEW_LEASE"],
        "the last page claims no next cursor"
    );
    w.recorded(true, false);
    let Step::Finish(finish) = w.step() else {
        panic!()
    };
    assert_eq!(
        names(&finish),
        ["FINISH_RECONCILIATION", "FORGET_SEEN", "RELEASE_LEASE"]
    );
    assert_eq!(finish[0].args[2], Arg::text("done"));
    w.finished();
    assert_eq!(
        w.step(),
        Step::Done(Ended::Walked {
            run_id: 7,
            state: "done",
            error: None
        })
    );
}

#[test]
fn the_lease_held_elsewhere_does_nothing() {
    let mut w = Walk::new(Start::ContinueOnly, "h".into(), 100, NOW);
    let _ = w.step();
    w.leased(false);
    assert_eq!(w.step(), Step::Done(Ended::LeaseHeld));
    // a daily run records itself to wait for the walk that holds the lease (a continuation
    // walks it); it lets go no lease, not holding it
    let mut w = Walk::new(Start::Daily, "h".into(), 100, NOW);
    let _ = w.step();
    w.leased(false);
    let Step::Finish(wait) = w.step() else {
        panic!()
    };
    assert_eq!(
        names(&wait),
        ["SUPERSEDE_RECONCILIATIONS", "START_RECONCILIATION"]
    );
    assert_eq!(
        wait[0].args,
        [Arg::Int(1)],
        "a full walk in progress is left"
    );
    assert_eq!(
        wait[1].args,
        [Arg::Int(0), Arg::Int(NOW - WINDOW_SECONDS)],
        "the last 7 days"
    );
    w.finished();
    assert_eq!(w.step(), Step::Done(Ended::LeaseHeld));
    // taken, but nothing to continue: the lease is let go
    let mut w = Walk::new(Start::ContinueOnly, "h".into(), 100, NOW);
    let _ = w.step();
    w.leased(true);
    let _ = w.step();
    w.opened(None);
    let Step::Finish(finish) = w.step() else {
        panic!()
    };
    assert_eq!(names(&finish), ["RELEASE_LEASE"]);
    w.finished();
    assert_eq!(w.step(), Step::Done(Ended::NothingToDo));
}

fn ended_truncated(w: &mut Walk) -> String {
    let Step::Finish(finish) = w.step() else {
        panic!()
    };
    assert_eq!(finish[0].args[2], Arg::text("truncated"));
    w.finished();
    match w.step() {
        Step::Done(Ended::Walked {
            state: "truncated",
            error: Some(e),
            ..
        }) => e,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_page_of_ids_all_given_before_ends_the_run_truncated() {
    let mut w = opened(Start::Daily, 100, run(1, 3, Some("inv_x")));
    let _ = w.step();
    w.fetched(Ok(page(&["inv_p", "inv_q"], true)));
    let _ = w.step();
    w.looked_up(seen(&[]), on_record(&["inv_p", "inv_q"], &[]));
    assert!(ended_truncated(&mut w).contains("given before"));
}

#[test]
fn a_cursor_asked_twice_ends_the_run_truncated() {
    let mut w = opened(Start::Daily, 100, run(1, 0, None));
    let _ = w.step();
    w.fetched(Ok(page(&["inv_p"], true)));
    let _ = w.step();
    w.looked_up(seen(&["inv_p"]), on_record(&["inv_p"], &["inv_p"]));
    let _ = w.step();
    w.recorded(true, false);
    assert!(ended_truncated(&mut w).contains("asked twice"));
}

#[test]
fn an_empty_page_that_claims_more_ends_the_run_truncated() {
    let mut w = opened(Start::Daily, 100, run(1, 0, None));
    let _ = w.step();
    w.fetched(Ok(page(&[], true)));
    assert!(ended_truncated(&mut w).contains("empty"));
}

#[test]
fn the_provider_failing_first_fails_the_run_part_way_truncates_it() {
    let mut w = opened(Start::Manual { full: true }, 100, run(1, 0, None));
    let _ = w.step();
    w.fetched(Err("the provider API answered 500".into()));
    let Step::Finish(finish) = w.step() else {
        panic!()
    };
    assert_eq!(finish[0].args[2], Arg::text("failed"));
    w.finished();
    assert!(matches!(w.step(), Step::Done(Ended::ProviderFailed { .. })));
    // part-way (a continued run): truncated, with what was checked
    let mut w = opened(Start::ContinueOnly, 100, run(1, 4, Some("inv_k")));
    let _ = w.step();
    w.fetched(Err("the provider API answered 500".into()));
    assert!(ended_truncated(&mut w).contains("500"));
}

#[test]
fn a_superseded_run_is_left_as_it_is() {
    let mut w = opened(Start::ContinueOnly, 100, run(1, 4, Some("inv_k")));
    let _ = w.step();
    w.fetched(Ok(page(&["inv_p"], true)));
    let _ = w.step();
    w.looked_up(seen(&["inv_p"]), on_record(&["inv_p"], &["inv_p"]));
    let _ = w.step();
    w.recorded(false, false);
    let Step::Finish(finish) = w.step() else {
        panic!()
    };
    assert_eq!(names(&finish), ["RELEASE_LEASE"], "never marked done");
    w.finished();
    assert!(matches!(
        w.step(),
        Step::Done(Ended::Walked {
            state: "superseded",
            ..
        })
    ));
}

#[test]
fn a_page_that_does_not_fit_the_budget_is_continued_by_the_next_invocation() {
    // budget 10: acquire 1, open 1, fetch 1, lookup 1, then room for 2 transitions before
    // the reserve (4) and the record (1)
    let mut w = opened(Start::Manual { full: false }, 10, run(1, 0, None));
    let _ = w.step();
    w.fetched(Ok(page(&["inv_a", "inv_b", "inv_c", "inv_d"], true)));
    let _ = w.step();
    w.looked_up(
        seen(&["inv_a", "inv_b", "inv_c", "inv_d"]),
        on_record(&["inv_a", "inv_b", "inv_c", "inv_d"], &[]),
    );
    let mut brought = 0;
    let record = loop {
        match w.step() {
            Step::BringToPaid(_) => {
                brought += 1;
                w.brought(true, Some("paid".into()));
            }
            Step::Record(r) => break r,
            other => panic!("{other:?}"),
        }
    };
    assert!(brought < 4, "the page did not fit");
    assert_eq!(
        record[0].args[2],
        Arg::Text(Cow::Owned(format!(
            "inv_{}",
            ["a", "b", "c", "d"][brought - 1]
        )))
    );
    w.recorded(true, true);
    let Step::Finish(finish) = w.step() else {
        panic!()
    };
    assert_eq!(names(&finish), ["RELEASE_LEASE"], "still running");
    w.finished();
    assert!(matches!(
        w.step(),
        Step::Done(Ended::Walked {
            state: "running",
            ..
        })
    ));
    assert!(w.used() <= 10);
}

/// However small an invocation's share (the cron gives reconciliation half of what the
/// archive leaves of `INVOCATION_BUDGET`, 10 at the least), a continuation fetches a page and
/// brings one invoice to paid: a walk that only took the lease and gave it back would stay
/// `running` for ever.
#[test]
fn the_smallest_share_still_walks_a_page() {
    for budget in [0, 4, 9] {
        let mut w = opened(Start::ContinueOnly, budget, run(1, 3, Some("inv_z")));
        let Step::Fetch { starting_after, .. } = w.step() else {
            panic!("budget {budget}: no page fetched")
        };
        assert_eq!(starting_after.as_deref(), Some("inv_z"));
        w.fetched(Ok(page(&["inv_a", "inv_b"], true)));
        let _ = w.step();
        w.looked_up(
            seen(&["inv_a", "inv_b"]),
            on_record(&["inv_a", "inv_b"], &[]),
        );
        assert!(matches!(w.step(), Step::BringToPaid(i) if i.id == "inv_a"));
        w.brought(true, Some("paid".into()));
        let Step::Record(record) = w.step() else {
            panic!("budget {budget}: the page not recorded")
        };
        assert_eq!(record[0].args[2], Arg::Text(Cow::Owned("inv_a".into())));
    }
}

/// The drivers hand each database step's rows (JSON objects, as D1 gives them) to `ran`:
/// the same walk as `leased`/`opened`/`looked_up`/`recorded`/`finished` by hand.
#[test]
fn a_walk_reads_its_database_steps_rows_itself() {
    use serde_json::json;
    let mut w = Walk::new(Start::Manual { full: true }, "holder1".into(), 100, NOW);
    let Step::Acquire(_) = w.step() else { panic!() };
    w.ran(&[vec![json!({"name": LEASE})]]).unwrap();
    let Step::Open(open) = w.step() else { panic!() };
    let mut results = vec![Vec::new(); open.len()];
    *results.last_mut().unwrap() =
        vec![json!({"id": 9.0, "full_walk": 1, "paid_since": null, "cursor": null, "pages": 0})];
    w.ran(&results).unwrap();
    assert_eq!(w.run().map(|r| r.id), Some(9));
    let Step::Fetch { .. } = w.step() else {
        panic!()
    };
    w.fetched(Ok(page(&["inv_a", "inv_b"], true)));
    let Step::Lookup(_) = w.step() else { panic!() };
    w.ran(&[
        vec![json!({"id": "inv_a"}), json!({"id": "inv_b"})],
        vec![
            json!({"id": "inv_a", "on_record": 1, "status": "paid", "order_ref": "order_inv_a",
                "amount": "10.00", "currency": "USDT"}),
            json!({"id": "inv_b", "on_record": 1, "status": "paid", "order_ref": "order_inv_b",
                "amount": "10.00", "currency": "USDT"}),
        ],
    ])
    .unwrap();
    let Step::Record(record) = w.step() else {
        panic!()
    };
    assert_eq!(names(&record).last(), Some(&"CLAIM_CURSOR"));
    // held, and the cursor was claimed before: asked twice, the run ends truncated
    let mut results = vec![vec![json!({"id": 9})]; record.len()];
    *results.last_mut().unwrap() = Vec::new();
    w.ran(&results).unwrap();
    let Step::Finish(finish) = w.step() else {
        panic!()
    };
    assert_eq!(finish[0].args[2], Arg::text("truncated"));
    w.ran(&vec![Vec::new(); finish.len()]).unwrap();
    assert!(matches!(
        w.step(),
        Step::Done(Ended::Walked {
            state: "truncated",
            ..
        })
    ));
    assert!(w.ran(&[]).is_err(), "no database step in progress");
    // rows that do not read are said, not guessed
    let mut w = opened(Start::Manual { full: false }, 100, run(7, 0, None));
    w.fetched(Ok(page(&["inv_a"], false)));
    let Step::Lookup(_) = w.step() else { panic!() };
    assert!(w.ran(&[vec![json!({"id": 3})], Vec::new()]).is_err());
}

#[test]
fn an_invoice_on_record_that_lacks_the_providers_order_ref_is_filled_not_found() {
    let mut w = opened(Start::Manual { full: false }, 100, run(7, 0, None));
    let _ = w.step();
    w.fetched(Ok(page(&["inv_known", "inv_lacks"], false)));
    let _ = w.step();
    let mut records = on_record(&["inv_known", "inv_lacks"], &["inv_known", "inv_lacks"]);
    records[1].order_ref = None;
    w.looked_up(seen(&["inv_known", "inv_lacks"]), records);
    let Step::Fill(i) = w.step() else {
        panic!("the invoice that lacks its order_ref is handed to the transition")
    };
    assert_eq!(
        (i.id.as_str(), i.order_ref.as_deref()),
        ("inv_lacks", Some("order_inv_lacks"))
    );
    w.filled();
    let Step::Record(record) = w.step() else {
        panic!()
    };
    assert_eq!(
        names(&record),
        ["RECORD_RECONCILIATION_PAGE", "MARK_SEEN", "RENEW_LEASE"],
        "a fill is no finding"
    );
    assert_eq!(record[0].args[4], Arg::Int(2), "both checked");
}

#[test]
fn a_fact_the_provider_does_not_know_is_not_asked_for() {
    let mut w = opened(Start::Manual { full: false }, 100, run(7, 0, None));
    let _ = w.step();
    let mut listed = page(&["inv_a"], false);
    listed.data[0].order_ref = None;
    w.fetched(Ok(listed));
    let _ = w.step();
    let mut records = on_record(&["inv_a"], &["inv_a"]);
    records[0].order_ref = None;
    w.looked_up(seen(&["inv_a"]), records);
    let Step::Record(_) = w.step() else {
        panic!("nothing to learn: no transition")
    };
}

/// The provider's blank `order_ref` (or amount, currency) is none given, as a delivery's is.
#[test]
fn a_blank_fact_from_the_provider_is_none_given() {
    let page: ProviderPage = serde_json::from_str(
        r#"{"data":[{"id":"inv_1","status":"paid","amount":" ","currency":"USDT","order_ref":""},
                    {"id":"inv_2","status":"paid","order_ref":null},
                    {"id":"inv_3","status":"paid","order_ref":" order_3"}],"has_more":false}"#,
    )
    .unwrap();
    let facts: Vec<_> = page
        .data
        .iter()
        .map(|i| {
            (
                i.order_ref.as_deref(),
                i.amount.as_deref(),
                i.currency.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        facts,
        [
            (None, None, Some("USDT")),
            (None, None, None),
            (Some(" order_3"), None, None)
        ]
    );
}

#[test]
fn an_invoice_whose_refund_is_on_record_is_neither_brought_to_paid_nor_filled() {
    let mut w = opened(Start::Manual { full: false }, 100, run(7, 0, None));
    let _ = w.step();
    w.fetched(Ok(page(&["inv_missing", "inv_lacks"], false)));
    let _ = w.step();
    let mut rows = on_record(&["inv_missing", "inv_lacks"], &["inv_lacks"]);
    for r in &mut rows {
        r.refund_waiting = true;
        r.status = None;
    }
    // on record but lacking the order_ref the provider knows: would be filled otherwise
    rows[1].order_ref = None;
    w.looked_up(seen(&["inv_missing", "inv_lacks"]), rows);
    let Step::Record(record) = w.step() else {
        panic!("neither brought to paid nor filled")
    };
    let findings: Vec<&Bound<'_>> = record
        .iter()
        .filter(|b| b.statement.name == "INSERT_FINDING")
        .collect();
    assert_eq!(findings.len(), 1, "the missing one is reported");
    assert_eq!(findings[0].args[2], Arg::text("inv_missing"));
    assert_eq!(findings[0].args[4], Arg::Int(0), "not brought to paid");
    assert_eq!(record[0].args[4], Arg::Int(2), "both checked");
}

#[test]
fn an_invoice_on_record_whose_refund_waits_is_not_filled() {
    // paid on record without its order_ref (its fulfilment awaits it), then refunded: the
    // refund is on record, not yet processed. Filling the order_ref would release the
    // fulfilment, shipping goods for money already returned (interface §3)
    let mut w = opened(Start::Manual { full: false }, 100, run(7, 0, None));
    let _ = w.step();
    w.fetched(Ok(page(&["inv_lacks"], false)));
    let _ = w.step();
    let mut rows = on_record(&["inv_lacks"], &["inv_lacks"]);
    rows[0].order_ref = None;
    rows[0].refund_waiting = true;
    assert_eq!(rows[0].status.as_deref(), Some("paid"));
    w.looked_up(seen(&["inv_lacks"]), rows);
    let step = w.step();
    let Step::Record(record) = step else {
        panic!("neither filled nor brought to paid: {step:?}")
    };
    assert_eq!(
        names(&record),
        ["RECORD_RECONCILIATION_PAGE", "MARK_SEEN", "RENEW_LEASE"],
        "on record: no finding"
    );
    assert_eq!(record[0].args[4], Arg::Int(1), "checked");
}
