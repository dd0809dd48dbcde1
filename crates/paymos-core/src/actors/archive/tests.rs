use super::*;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use std::io::{Read, Write};

fn gzip(text: &str) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(text.as_bytes()).unwrap();
    e.finish().unwrap()
}

fn gunzip(bytes: &[u8]) -> Result<String, String> {
    let mut s = String::new();
    GzDecoder::new(bytes)
        .read_to_string(&mut s)
        .map_err(|e| e.to_string())?;
    Ok(s)
}

fn candidate(id: &str, at: &str, bytes: i64) -> Candidate {
    Candidate {
        event_id: id.into(),
        received_at: at.into(),
        bytes,
    }
}

fn line(id: &str, at: &str) -> Line {
    Line {
        event_id: id.into(),
        resource_id: "inv_1".into(),
        event_type: "invoice.paid".into(),
        received_at: at.into(),
        processed_at: Some("2026-01-02T00:00:01.000Z".into()),
        outcome: Some("applied".into()),
        body: format!(r#"{{"event_id":"{id}","type":"invoice.paid","note":"a \"quoted\"\nline"}}"#),
    }
}

fn run_row(id: i64, by: &str) -> RunRow {
    RunRow {
        id,
        started_by: by.into(),
        before: "2026-02-01T00:00:00.000Z".into(),
        cursor_received_at: None,
        cursor_event_id: None,
        archived: 0,
        objects: 0,
    }
}

fn admin(budget: u32) -> Run {
    Run::new(
        Start::Admin {
            before: "2026-02-01T00:00:00Z".into(),
            after: None,
        },
        Settings::new(budget),
    )
}

fn names(b: &[Bound<'_>]) -> Vec<&'static str> {
    b.iter().map(|x| x.statement.name).collect()
}

/// Drives a run whose D1 and R2 behave: `days` of `per_day` candidates each, R2 storing
/// what is put; `read` may change what the read-back sees. Returns the run, the statements
/// of every step in order, and the objects written (key, gunzipped text).
struct World {
    candidates: Vec<(Candidate, Line)>,
    steps: Vec<String>,
    objects: Vec<(String, String)>,
    removed: Vec<String>,
}

impl World {
    fn new(days: usize, per_day: usize) -> World {
        let mut candidates = Vec::new();
        for d in 0..days {
            for i in 0..per_day {
                let id = format!("evt_d{d}n{i:04}");
                let at = format!(
                    "2026-01-{:02}T03:{:02}:{:02}.{:03}Z",
                    d + 1,
                    i / 60 % 60,
                    i % 60,
                    i % 1000
                );
                candidates.push((candidate(&id, &at, 100), line(&id, &at)));
            }
        }
        World {
            candidates,
            steps: Vec::new(),
            objects: Vec::new(),
            removed: Vec::new(),
        }
    }

    fn drive(&mut self, run: &mut Run, read: impl Fn(&Object) -> ReadBack) {
        let mut step = run.next();
        for _ in 0..100_000 {
            match step {
                Step::Open(b) => {
                    self.steps.push(format!("open {:?}", names(&b)));
                    run.opened(Some(run_row(7, "admin")));
                }
                Step::Candidates(b) => {
                    self.steps.push("candidates".into());
                    let (at, id) = match (&b.args[1], &b.args[2]) {
                        (Arg::Text(a), Arg::Text(i)) => (a.to_string(), i.to_string()),
                        _ => (String::new(), String::new()),
                    };
                    let limit = match b.args[3] {
                        Arg::Int(n) => n as usize,
                        _ => 0,
                    };
                    let rows = self
                        .candidates
                        .iter()
                        .filter(|(c, _)| !self.removed.contains(&c.event_id))
                        .filter(|(c, _)| {
                            (c.received_at.clone(), c.event_id.clone()) > (at.clone(), id.clone())
                        })
                        .take(limit)
                        .map(|(c, _)| c.clone())
                        .collect();
                    run.candidates(rows);
                }
                Step::Load(b) => {
                    self.steps.push("load".into());
                    let ids: Vec<String> = match &b.args[0] {
                        Arg::Text(t) => serde_json::from_str(t).unwrap(),
                        _ => vec![],
                    };
                    let rows = self
                        .candidates
                        .iter()
                        .filter(|(c, _)| ids.contains(&c.event_id))
                        .map(|(_, l)| l.clone())
                        .collect();
                    run.loaded(rows);
                }
                Step::Compress(text) => {
                    self.steps.push("compress".into());
                    step = run.compressed(Ok(gzip(&text)));
                    continue;
                }
                Step::Write(o) => {
                    self.steps.push(format!("write {}", o.key));
                    self.objects.push((o.key.clone(), gunzip(&o.gzip).unwrap()));
                    step = run.read_back(read(&o));
                    continue;
                }
                Step::Remove(b) => {
                    self.steps.push(format!("remove {:?}", names(&b)));
                    let map: serde_json::Map<String, serde_json::Value> =
                        match &b.args_of(REMOVED_AT)[0] {
                            Arg::Text(t) => serde_json::from_str(t).unwrap(),
                            _ => Default::default(),
                        };
                    let n = map.len();
                    self.removed.extend(map.keys().cloned());
                    run.removed(n);
                }
                Step::Finish(b) => {
                    self.steps.push(format!("finish {:?}", b.args[1]));
                    run.finished();
                }
                Step::Remaining(_) => {
                    self.steps.push("remaining".into());
                    let left = self.candidates.len() - self.removed.len();
                    run.remaining(left as i64);
                }
                Step::Done => return,
            }
            step = run.next();
        }
        panic!("the run does not end");
    }
}

trait ArgsOf {
    fn args_of(&self, i: usize) -> &[Arg<'static>];
}

impl ArgsOf for Vec<Bound<'static>> {
    fn args_of(&self, i: usize) -> &[Arg<'static>] {
        &self[i].args
    }
}

fn faithful(o: &Object) -> ReadBack {
    ReadBack::Read {
        bytes: o.gzip.clone(),
        text: gunzip(&o.gzip),
    }
}

#[test]
fn a_chunk_is_one_day_within_its_lines_and_bytes_and_never_empty() {
    let c = |id: &str, at: &str, b| candidate(id, at, b);
    let day1 = "2026-01-01T23:59:59.999Z";
    let day2 = "2026-01-02T00:00:00.000Z";
    let cs = vec![
        c("evt_a", day1, 10),
        c("evt_b", day1, 10),
        c("evt_c", day2, 10),
    ];
    let ids = |v: Vec<Candidate>| v.into_iter().map(|c| c.event_id).collect::<Vec<_>>();
    assert_eq!(
        ids(pick(&cs, 500, 1000)),
        ["evt_a", "evt_b"],
        "never two days"
    );
    assert_eq!(ids(pick(&cs, 1, 1000)), ["evt_a"]);
    assert_eq!(ids(pick(&cs, 500, 19)), ["evt_a"], "bytes bound");
    // a body larger than the bound still goes, alone
    let big = vec![c("evt_big", day1, 5_000_000), c("evt_b", day1, 10)];
    assert_eq!(ids(pick(&big, 500, 1000)), ["evt_big"]);
    assert!(pick(&[], 500, 1000).is_empty());
}

#[test]
fn keys_name_the_received_day_and_the_content() {
    let sha = sha256_hex(b"x");
    let k = object_key("2026-03-04T05:06:07.089Z", &sha);
    assert_eq!(
        k,
        format!("deliveries/2026/03/04/050607089-{}.ndjson.gz", &sha[..16])
    );
}

#[test]
fn a_line_is_the_delivery_with_its_raw_body_in_the_contract_order() {
    let l = line("evt_1", "2026-01-01T00:00:00.000Z");
    let text = ndjson(&[l.clone(), line("evt_2", "2026-01-01T00:00:00.000Z")]);
    assert_eq!(line_count(&text), 2);
    assert!(text.ends_with('\n'));
    let first = text.lines().next().unwrap();
    let keys: Vec<String> =
        serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(first)
            .unwrap()
            .keys()
            .cloned()
            .collect();
    let mut expected = vec![
        "body",
        "event_id",
        "event_type",
        "outcome",
        "processed_at",
        "received_at",
        "resource_id",
    ];
    expected.sort();
    assert_eq!(keys, expected);
    assert!(first.starts_with(
        r#"{"event_id":"evt_1","resource_id":"inv_1","event_type":"invoice.paid","received_at":"#
    ));
    // the body is the raw text, as a JSON string: its newline escaped, so one line per delivery
    let back: Line = serde_json::from_str(first).unwrap();
    assert_eq!(back.body, l.body);
    assert_eq!(line_count("a\nb"), 2);
    assert_eq!(line_count(""), 0);
}

#[test]
fn archive_then_verify_then_remove_with_the_processed_at_of_each_line() {
    let mut w = World::new(1, 3);
    let mut run = admin(1000);
    w.drive(&mut run, faithful);
    assert_eq!(
        w.steps[..7],
        [
            "open [\"START_ARCHIVE_RUN\"]".to_string(),
            "candidates".into(),
            "load".into(),
            "compress".into(),
            format!("write {}", w.objects[0].0),
            "remove [\"DROP_BODY_ROWS\", \"REMOVE_ARCHIVED_BODIES\", \"RECORD_ARCHIVE_CHUNK\"]"
                .into(),
            "candidates".into(),
        ]
    );
    assert_eq!(w.steps[7], "finish Text(\"done\")");
    assert_eq!(w.steps[8], "remaining");
    let (key, text) = &w.objects[0];
    assert!(key.starts_with("deliveries/2026/01/01/030000000-"), "{key}");
    assert_eq!(text.lines().count(), 3);
    let r = run.report();
    assert_eq!(
        (r.state, r.archived, r.objects, r.remaining),
        (RunState::Done, 3, 1, Some(0))
    );
    assert_eq!(r.next_cursor, None);
    assert!(r.bytes > 0);
}

#[test]
fn the_removal_names_each_line_with_its_processed_at_and_the_key() {
    let mut run = admin(1000);
    run.next();
    run.opened(Some(run_row(7, "admin")));
    run.next();
    let at = "2026-01-01T00:00:00.000Z";
    run.candidates(vec![candidate("evt_a", at, 10), candidate("evt_b", at, 10)]);
    run.next();
    // evt_b was replayed between the selection and the load: not a line, passed
    run.loaded(vec![line("evt_a", at)]);
    let Step::Compress(text) = run.next() else {
        panic!()
    };
    assert_eq!(line_count(&text), 1);
    let Step::Write(o) = run.compressed(Ok(gzip(&text))) else {
        panic!()
    };
    assert_eq!(o.sha256, sha256_hex(&o.gzip));
    assert!(o.metadata.contains(&("lines", "1".into())));
    let Step::Remove(b) = run.read_back(faithful(&o)) else {
        panic!()
    };
    let processed = Arg::Text(r#"{"evt_a":"2026-01-02T00:00:01.000Z"}"#.into());
    // the body rows of the same lines, deleted first
    assert_eq!(b[0].statement.name, "DROP_BODY_ROWS");
    assert_eq!(b[0].args, vec![processed.clone()]);
    assert_eq!(b[REMOVED_AT].statement.name, "REMOVE_ARCHIVED_BODIES");
    assert_eq!(
        b[REMOVED_AT].args,
        vec![processed, Arg::Text(o.key.clone().into())]
    );
    // the cursor passes the whole chunk, the replayed one included
    assert_eq!(b[2].args[1], Arg::text(at));
    assert_eq!(b[2].args[2], Arg::text("evt_b"));
    assert_eq!(b[2].args[3], Arg::Text(r#"["evt_a"]"#.into()));
}

#[test]
fn a_read_back_that_is_not_what_was_written_removes_nothing_and_fails_the_run() {
    let wrong_lines = |o: &Object| {
        // the same object, gunzipped to one line less
        let text = gunzip(&o.gzip).unwrap();
        let cut = text
            .lines()
            .skip(1)
            .map(|l| format!("{l}\n"))
            .collect::<String>();
        ReadBack::Read {
            bytes: o.gzip.clone(),
            text: Ok(cut),
        }
    };
    let flipped = |o: &Object| {
        let mut bytes = o.gzip.clone();
        let i = bytes.len() / 2;
        bytes[i] ^= 1;
        ReadBack::Read {
            text: gunzip(&bytes),
            bytes,
        }
    };
    let same_count_other_text = |o: &Object| {
        let text = gunzip(&o.gzip).unwrap().replace("quoted", "QUOTED");
        ReadBack::Read {
            bytes: o.gzip.clone(),
            text: Ok(text),
        }
    };
    let not_gzip = |o: &Object| ReadBack::Read {
        bytes: o.gzip.clone(),
        text: Err("invalid gzip header".into()),
    };
    type Read = Box<dyn Fn(&Object) -> ReadBack>;
    let cases: Vec<(Read, &str)> = vec![
        (
            Box::new(|_: &Object| ReadBack::Missing),
            "is not there when read back",
        ),
        (
            Box::new(|_: &Object| ReadBack::Failed("put: 500".into())),
            "put: 500",
        ),
        (Box::new(wrong_lines), "read back with 2 lines, written 3"),
        (Box::new(flipped), "read back with SHA-256"),
        (Box::new(same_count_other_text), "gunzips to another text"),
        (Box::new(not_gzip), "does not gunzip"),
    ];
    for (read, said) in cases {
        let mut w = World::new(1, 3);
        let mut run = admin(1000);
        w.drive(&mut run, read);
        assert!(w.removed.is_empty(), "{said}: nothing removed");
        assert!(!w.steps.iter().any(|s| s.starts_with("remove")), "{said}");
        assert_eq!(w.steps.last().unwrap(), "finish Text(\"failed\")", "{said}");
        let r = run.report();
        assert_eq!(r.state, RunState::Failed);
        assert_eq!(r.archived, 0);
        assert!(
            r.error.as_deref().unwrap().contains(said),
            "{said}: {:?}",
            r.error
        );
        assert_eq!(r.remaining, None, "a failed run answers no remaining count");
    }
}

#[test]
fn chunks_verified_before_a_failure_stay_archived_and_the_failing_one_keeps_its_bodies() {
    let mut w = World::new(3, 2);
    let mut run = admin(1000);
    // the second object written is read back wrong
    let n = std::cell::Cell::new(0);
    w.drive(&mut run, |o| {
        n.set(n.get() + 1);
        if n.get() == 2 {
            ReadBack::Missing
        } else {
            faithful(o)
        }
    });
    assert_eq!(w.removed, ["evt_d0n0000", "evt_d0n0001"]);
    let r = run.report();
    assert_eq!((r.state, r.archived, r.objects), (RunState::Failed, 2, 1));
}

#[test]
fn the_budget_bounds_a_run_and_the_cursor_continues_it() {
    // three days, one chunk each; a budget that holds one chunk
    let mut w = World::new(3, 2);
    let mut run = admin(1 + CHUNK_COST + CLOSING_COST);
    w.drive(&mut run, faithful);
    assert!(
        run.spent() <= 1 + CHUNK_COST + CLOSING_COST,
        "spent {}",
        run.spent()
    );
    let r = run.report();
    assert_eq!((r.state, r.archived, r.objects), (RunState::Partial, 2, 1));
    assert_eq!(r.remaining, Some(4));
    let cursor = r.next_cursor.clone().unwrap();
    assert_eq!(cursor, "2026-01-01T03:00:01.001Z~evt_d0n0001");
    // posted back: the next day
    let after = DeliveryCursor::parse(&cursor).unwrap();
    let mut again = Run::new(
        Start::Admin {
            before: "2026-02-01T00:00:00Z".into(),
            after: Some(after),
        },
        Settings::new(1 + CHUNK_COST + CLOSING_COST),
    );
    w.drive(&mut again, faithful);
    assert_eq!(again.report().archived, 2);
    assert_eq!(w.removed.len(), 4);
    // a large budget finishes it, and never spends more than it has
    for budget in [8u32, 9, 13, 14, 50, 1000] {
        let mut w = World::new(4, 3);
        let mut run = admin(budget);
        w.drive(&mut run, faithful);
        assert!(
            run.spent() <= budget,
            "budget {budget}: spent {}",
            run.spent()
        );
    }
    // too small a share for one chunk: nothing selected, nothing removed
    let mut w = World::new(1, 3);
    let mut run = admin(MIN_SHARE - 1);
    w.drive(&mut run, faithful);
    assert!(w.removed.is_empty());
    assert_eq!(run.report().state, RunState::Partial);
}

#[test]
fn the_daily_run_supersedes_and_the_cron_continues_only_a_daily_run() {
    let mut daily = Run::new(
        Start::Daily {
            before: "2026-01-01T03:17".into(),
        },
        Settings::new(100),
    );
    let Step::Open(b) = daily.next() else {
        panic!()
    };
    assert_eq!(names(&b), ["SUPERSEDE_ARCHIVE_RUNS", "START_ARCHIVE_RUN"]);
    assert_eq!(b[1].args[0], Arg::text("daily"));
    // a daily run out of budget stays running (the cron continues it), with no cursor answered
    let mut w = World::new(3, 1);
    let mut run = Run::new(
        Start::Daily {
            before: "2026-02-01T00:00".into(),
        },
        Settings::new(MIN_SHARE),
    );
    w.drive(&mut run, faithful);
    let r = run.report();
    assert_eq!(
        (r.state, r.archived, r.next_cursor, r.remaining),
        (RunState::Running, 1, None, None)
    );
    assert_eq!(w.steps.last().unwrap(), "finish Text(\"running\")");

    let mut cont = Run::new(Start::Continue, Settings::new(100));
    let Step::Open(b) = cont.next() else { panic!() };
    assert_eq!(names(&b), ["OPEN_ARCHIVE_RUN"]);
    cont.opened(None);
    assert_eq!(cont.next(), Step::Done);
    assert_eq!(cont.report().state, RunState::NoRun);
    // a continued run starts from its kept cursor
    let mut cont = Run::new(Start::Continue, Settings::new(100));
    cont.next();
    cont.opened(Some(RunRow {
        cursor_received_at: Some("2026-01-01T00:00:00.000Z".into()),
        cursor_event_id: Some("evt_x".into()),
        ..run_row(3, "daily")
    }));
    let Step::Candidates(b) = cont.next() else {
        panic!()
    };
    assert_eq!(b.args[0], Arg::text("2026-02-01T00:00:00.000Z"));
    assert_eq!(b.args[1], Arg::text("2026-01-01T00:00:00.000Z"));
    assert_eq!(b.args[2], Arg::text("evt_x"));
}

#[test]
fn d1_failing_ends_the_run_failed_without_removing() {
    let mut run = admin(100);
    run.next();
    run.opened(Some(run_row(1, "admin")));
    run.next();
    let Step::Finish(b) = run.db_failed("D1_ERROR: overloaded") else {
        panic!()
    };
    assert_eq!(b.args[1], Arg::text("failed"));
    run.finished();
    assert_eq!(run.next(), Step::Done);
    let r = run.report();
    assert_eq!(r.state, RunState::Failed);
    assert!(r.error.unwrap().contains("overloaded"));
    // failing to open: nothing to record
    let mut run = admin(100);
    run.next();
    assert_eq!(run.db_failed("down"), Step::Done);
    assert_eq!(run.report().run_id, None);
}

#[test]
fn bodies_are_read_back_from_an_object_whose_checksum_holds() {
    let text = ndjson(&[
        line("evt_a", "2026-01-01T00:00:00.000Z"),
        line("evt_b", "2026-01-01T00:00:00.000Z"),
    ]);
    let bodies = bodies_in("k", &text, &["evt_b", "evt_a"]).unwrap();
    assert_eq!(bodies[0], line("evt_b", "x").body);
    assert_eq!(bodies[1], line("evt_a", "x").body);
    assert_eq!(
        bodies_in("k", &text, &["evt_c"]).unwrap_err(),
        "evt_c is not in k"
    );
    assert!(bodies_in("k", "not json\n", &["evt_a"]).is_err());
    let gz = gzip(&text);
    assert!(check_object("k", &gz, Some(&sha256_hex(&gz))).is_ok());
    assert!(check_object("k", &gz, Some(&sha256_hex(b"other"))).is_err());
    assert!(check_object("k", &gz, None).is_err());
}

#[test]
fn a_restore_reads_each_object_once_and_takes_its_own_rows_from_it() {
    let row = |id: &str, key: &str| (id.to_string(), key.to_string());
    let rows = [row("evt_a", "k1"), row("evt_b", "k2"), row("evt_c", "k1")];
    assert_eq!(objects_to_read(&rows), ["k1", "k2"]);
    let text = ndjson(&[
        line("evt_a", "2026-01-01T00:00:00.000Z"),
        line("evt_c", "2026-01-01T00:00:00.000Z"),
    ]);
    let body = |id: &str| line(id, "x").body;
    assert_eq!(
        bodies_of_object("k1", &text, &rows).unwrap(),
        [
            ("evt_a".into(), "k1".into(), body("evt_a")),
            ("evt_c".into(), "k1".into(), body("evt_c"))
        ]
    );
    // a row that names the object and is not in it
    let rows = [row("evt_a", "k1"), row("evt_z", "k1")];
    assert_eq!(
        bodies_of_object("k1", &text, &rows).unwrap_err(),
        "evt_z is not in k1"
    );
}

#[test]
fn a_replay_chunk_is_cut_before_a_fifth_object() {
    let a = |id: &str, key: &str, pos| ArchivedInChunk {
        event_id: id.into(),
        archive_key: key.into(),
        pos,
    };
    let rows = vec![
        a("evt_1", "k1", 1),
        a("evt_2", "k1", 5),
        a("evt_3", "k2", 9),
        a("evt_4", "k3", 20),
        a("evt_5", "k4", 30),
        a("evt_6", "k5", 40),
        a("evt_7", "k1", 50),
    ];
    let (cut, kept) = restore_cut(&rows, 100, 4);
    assert_eq!(
        cut, 39,
        "the row needing a fifth object and those after it wait"
    );
    assert_eq!(kept.len(), 5);
    let (cut, kept) = restore_cut(&rows[..3], 100, 4);
    assert_eq!((cut, kept.len()), (100, 3));
    let (cut, kept) = restore_cut(&[], 100, 4);
    assert_eq!((cut, kept.len()), (100, 0));
    // one object allowed, the first archived row second in the chunk: the chunk moves on
    let (cut, kept) = restore_cut(&[a("evt_1", "k1", 2), a("evt_2", "k2", 3)], 100, 1);
    assert_eq!((cut, kept.len()), (2, 1));
}

#[test]
fn times_as_the_admin_api_takes_them() {
    let t = |s: &str| unix_of_time(s);
    assert_eq!(t("2025-11-29"), Some(1_764_374_400));
    assert_eq!(t("2025-11-29T21:00"), Some(1_764_450_000));
    assert_eq!(t("2025-11-29T21:00:00Z"), Some(1_764_450_000));
    assert_eq!(t("2025-11-29T21:00:05.5Z"), Some(1_764_450_005));
    assert_eq!(t("2025-11-29T23:00:00+02:00"), Some(1_764_450_000));
    assert_eq!(t("2025-11-29T20:30-00:30"), Some(1_764_450_000));
    assert_eq!(t("2025-11-29 21:00"), Some(1_764_450_000));
    assert_eq!(t("soon"), None);
}
