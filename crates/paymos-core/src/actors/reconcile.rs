//! Reconciliation's walk (interface §6): the provider's paid invoices compared with the
//! deliveries on record, page by page, within one invocation's budget, under a lease so that
//! one run walks at a time. A [`Walk`] is a state machine its driver asks what to do next: a
//! D1 statement or batch, a provider page to fetch, an invoice to bring to paid through the
//! guarded transition. The Worker (`src/reconcile.rs`) and the simulator drive it.
//!
//! 1. **take the lease** (`ACQUIRE_LEASE`): held by another invocation, the walk does nothing;
//! 2. **open** the run to walk: a new one (a daily run supersedes unfinished windowed runs
//!    but waits for a full walk in progress; an operator's run supersedes any), or the one to
//!    continue (a full walk in progress first);
//! 3. per page: **fetch** it (`starting_after` the cursor; each `starting_after` is claimed
//!    once per run, and one asked twice ends the run truncated), **look up** its ids (which
//!    were given before in this run, which are on record: an `invoice.paid` processed
//!    `applied` or `stale`), a page none of whose ids is new ends the run truncated; **bring
//!    to paid** each paid invoice not on record (a `missing` finding); **record** the page
//!    (its cursor, the ids handled, its findings, the lease renewed), only while this walk
//!    still holds its run;
//! 4. **finish** the run (done, or truncated with why) unless it goes on in the next
//!    invocation, and let the lease go.

mod drive;
mod report;
pub use drive::{drive, Io};
pub use report::{Doubled, Missing, Report, Totals};

use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

use crate::ids::{resource_kind_of, ResourceKind};
use crate::rows::{flag, int, opt_int};
use crate::statements::{self as st, Arg, Bound};

/// The lease's name.
pub const LEASE: &str = "reconciliation";
/// How long the lease holds without a page recorded (an invocation that dies lets it go).
pub const LEASE_SECONDS: i64 = 300;
/// How far back a daily (or default manual) run looks: `paid_since` = now − 7 days.
pub const WINDOW_SECONDS: i64 = 7 * 24 * 3600;
/// Each provider call times out after this long (interface §6).
pub const PROVIDER_TIMEOUT_MS: u64 = 10_000;
/// Queries kept back for closing an invocation's share of a run: the finish and the report.
pub const RESERVE: u32 = 4;
/// What bringing one invoice to paid (or filling it) spends: the transition's batch, and the
/// queue send of the effects it released.
pub const BRING_TO_PAID_COST: u32 = 2;
/// The least an invocation's walk is given, whatever its share: the lease and the run (2),
/// then a page's fetch, lookup, one invoice brought to paid and its record with the
/// reserve, so that a continuation always moves the cursor (a share too small to fetch
/// left a run `running` for ever).
pub const MIN_BUDGET: u32 = RESERVE + 5 + BRING_TO_PAID_COST;
/// The cause a reconciliation's transition names.
pub const CAUSE: &str = "paid at the provider, no invoice.paid delivery on record";

/// Why the walk was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The daily cron: a new run over the last 7 days.
    Daily,
    /// An operator's `POST /admin/api/reconcile`: a new run, the last 7 days or everything.
    Manual { full: bool },
    /// Any other cron: continue an unfinished run, if there is one.
    ContinueOnly,
}

/// A run as kept in D1 between invocations (`run_columns!`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RunRow {
    #[serde(deserialize_with = "int")]
    pub id: i64,
    #[serde(deserialize_with = "int")]
    pub full_walk: i64,
    #[serde(default, deserialize_with = "opt_int")]
    pub paid_since: Option<i64>,
    pub cursor: Option<String>,
    #[serde(deserialize_with = "int")]
    pub pages: i64,
}

/// One invoice as the provider lists it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ProviderInvoice {
    pub id: String,
    #[serde(default)]
    pub status: Option<String>,
    // a blank fact is none given, as in a delivery's envelope
    #[serde(default, deserialize_with = "crate::envelope::given_text")]
    pub amount: Option<String>,
    #[serde(default, deserialize_with = "crate::envelope::given_text")]
    pub currency: Option<String>,
    #[serde(default, deserialize_with = "crate::envelope::given_text")]
    pub order_ref: Option<String>,
}

/// One page of `GET /v1/invoices?status=paid`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ProviderPage {
    pub data: Vec<ProviderInvoice>,
    #[serde(default)]
    pub has_more: bool,
}

/// `PAID_ON_RECORD`'s row for one invoice: whether its payment is on record, and what the
/// local invoice is and knows.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct OnRecord {
    pub id: String,
    #[serde(deserialize_with = "flag")]
    pub on_record: bool,
    pub status: Option<String>,
    #[serde(default)]
    pub order_ref: Option<String>,
    #[serde(default)]
    pub amount: Option<String>,
    #[serde(default)]
    pub currency: Option<String>,
    /// An `invoice.refunded` of it on record, not yet processed (interface §3).
    #[serde(default, deserialize_with = "flag")]
    pub refund_waiting: bool,
}

impl OnRecord {
    /// The local invoice, on record, lacks a fact the provider knows (an `order_ref` above
    /// all: a fulfilment waits for it, interface §7).
    fn learns_from(&self, invoice: &ProviderInvoice) -> bool {
        let lacks =
            |local: &Option<String>, theirs: &Option<String>| local.is_none() && theirs.is_some();
        // no local invoice, nothing to fill: a payment on record made one, and a walk that
        // found none is not the one to make it
        self.status.is_some()
            && (lacks(&self.order_ref, &invoice.order_ref)
                || lacks(&self.amount, &invoice.amount)
                || lacks(&self.currency, &invoice.currency))
    }
}

/// A row returned by `UNSEEN_IDS`: an id this run was not given before.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Seen {
    pub id: String,
}

/// What the driver does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Run it; hand whether it returned a row to [`Walk::leased`].
    Acquire(Bound<'static>),
    /// Run these as one batch; hand the last statement's row (the run to walk) to
    /// [`Walk::opened`].
    Open(Vec<Bound<'static>>),
    /// Fetch this page from the provider (within [`PROVIDER_TIMEOUT_MS`]); hand the page, or
    /// why not, to [`Walk::fetched`].
    Fetch {
        starting_after: Option<String>,
        paid_since: Option<i64>,
    },
    /// Run these as one batch: `UNSEEN_IDS`'s rows, then `PAID_ON_RECORD`'s, to
    /// [`Walk::looked_up`].
    Lookup(Vec<Bound<'static>>),
    /// Bring this invoice to paid through the guarded transition (cause [`CAUSE`], the
    /// provider's `order_ref`, amount, currency); hand whether it applied and the status
    /// after it to [`Walk::brought`].
    BringToPaid(ProviderInvoice),
    /// This invoice's payment is on record but the provider knows facts it lacks: the same
    /// guarded transition, which the guard refuses and which fills them (a waiting
    /// fulfilment is then released with its `order_ref`); then [`Walk::filled`]. No finding.
    Fill(ProviderInvoice),
    /// Run these as one batch; hand whether the first and the last statement returned a row
    /// to [`Walk::recorded`].
    Record(Vec<Bound<'static>>),
    /// Run these as one batch; then [`Walk::finished`].
    Finish(Vec<Bound<'static>>),
    /// Over: what this invocation did.
    Done(Ended),
}

/// How a walk's invocation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Asked only to continue, and no run is unfinished.
    NothingToDo,
    /// Another invocation walks a run right now.
    LeaseHeld,
    /// The provider failed before this fresh run checked anything: the run is failed, the
    /// answer is the provider's error (502).
    ProviderFailed { run_id: i64, error: String },
    /// The run as far as this invocation took it: `running` (the next cron continues it),
    /// `done`, `truncated` (with why), or superseded meanwhile by a newer run.
    Walked {
        run_id: i64,
        state: &'static str,
        error: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Acquire,
    Open,
    Fetch,
    Lookup,
    Handle,
    Record,
    Finish,
    Done,
}

/// One invocation's part of a run.
#[derive(Debug, Clone)]
pub struct Walk {
    start: Start,
    holder: String,
    now: i64,
    budget: u32,
    used: u32,
    phase: Phase,
    run: Option<RunRow>,
    fresh: bool,
    cursor: Option<String>,
    page: Option<ProviderPage>,
    on_record: Vec<OnRecord>,
    /// The next invoice of the page to handle.
    at: usize,
    /// The last invoice of the page handled.
    handled_to: Option<String>,
    checked: i64,
    findings: Vec<Finding>,
    pages_this_invocation: i64,
    /// Set when the run ends: its final state and why (`superseded`: not this walk's to end).
    end: Option<(&'static str, Option<String>)>,
    provider_error: Option<String>,
    /// Set when the walk did nothing: no lease, or nothing to continue.
    idle: Option<Ended>,
    /// The record batch in progress ends with `CLAIM_CURSOR`.
    claims_cursor: bool,
    /// A daily run that found the lease held: recorded to wait, walked by a continuation.
    waits: bool,
}

/// A `missing` finding: paid at the provider, no `invoice.paid` on record that brought it
/// to paid here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub invoice_id: String,
    pub order_ref: Option<String>,
    pub brought_to_paid: bool,
    pub status: Option<String>,
}

fn text(s: &str) -> Arg<'static> {
    Arg::Text(Cow::Owned(s.to_string()))
}

fn modifier(seconds: i64) -> Arg<'static> {
    Arg::Text(Cow::Owned(format!("{seconds:+} seconds")))
}

impl Walk {
    /// `holder`: a random token of this invocation; `budget`: the D1 queries and subrequests
    /// it may spend; `now`: unix seconds.
    pub fn new(start: Start, holder: String, budget: u32, now: i64) -> Walk {
        Walk {
            start,
            holder,
            now,
            budget: budget.max(MIN_BUDGET),
            used: 0,
            phase: Phase::Acquire,
            run: None,
            fresh: false,
            cursor: None,
            page: None,
            on_record: Vec::new(),
            at: 0,
            handled_to: None,
            checked: 0,
            findings: Vec::new(),
            pages_this_invocation: 0,
            end: None,
            provider_error: None,
            idle: None,
            claims_cursor: false,
            waits: false,
        }
    }

    /// The run walked, once opened.
    pub fn run(&self) -> Option<&RunRow> {
        self.run.as_ref()
    }

    /// Budget spent so far (a D1 batch counts once, a provider call once).
    pub fn used(&self) -> u32 {
        self.used
    }

    fn left(&self) -> u32 {
        self.budget.saturating_sub(self.used)
    }

    fn spend(&mut self) {
        self.used += 1;
    }

    pub fn step(&mut self) -> Step {
        match self.phase {
            Phase::Acquire => {
                self.spend();
                Step::Acquire(
                    (st::ACQUIRE_LEASE.bind(vec![
                        Arg::text(LEASE),
                        text(&self.holder),
                        modifier(LEASE_SECONDS),
                    ]))
                    .into_owned(),
                )
            }
            Phase::Open => {
                self.spend();
                Step::Open(self.open_statements())
            }
            Phase::Fetch => {
                // the fetch, the lookup, one invoice and the page's record
                if self.left() < RESERVE + 3 + BRING_TO_PAID_COST {
                    // the next invocation goes on from the cursor
                    return self.close();
                }
                self.spend();
                let run = self.run.as_ref().expect("opened");
                Step::Fetch {
                    starting_after: self.cursor.clone(),
                    paid_since: run.paid_since,
                }
            }
            Phase::Lookup => {
                self.spend();
                let run_id = self.run.as_ref().expect("opened").id;
                let page = self.page.as_ref().expect("fetched");
                let all: Vec<&str> = page.data.iter().map(|i| i.id.as_str()).collect();
                let paid: Vec<&str> = self.paid_invoices().map(|i| i.id.as_str()).collect();
                Step::Lookup(vec![
                    (st::UNSEEN_IDS.bind(vec![Arg::Int(run_id), Arg::json_list(&all)]))
                        .into_owned(),
                    (st::PAID_ON_RECORD.bind(vec![Arg::json_list(&paid)])).into_owned(),
                ])
            }
            Phase::Handle => self.handle(),
            Phase::Record => {
                self.spend();
                let b = self.record_statements();
                self.claims_cursor = b
                    .last()
                    .is_some_and(|b| std::ptr::eq(b.statement, &st::CLAIM_CURSOR));
                Step::Record(b)
            }
            Phase::Finish => {
                self.spend();
                Step::Finish(self.finish_statements())
            }
            Phase::Done => Step::Done(self.ended()),
        }
    }

    /// The run's end, if this walk ends it, and the lease let go either way.
    fn finish_statements(&self) -> Vec<Bound<'static>> {
        if self.waits {
            // not this walk's lease: nothing to let go
            return self.start_statements();
        }
        let mut b = Vec::new();
        if let (Some(run), Some((state, error))) = (&self.run, &self.end) {
            if *state != "superseded" {
                b.push(
                    (st::FINISH_RECONCILIATION.bind(vec![
                        Arg::Int(run.id),
                        text(&self.holder),
                        Arg::text(state),
                        Arg::opt(error.as_deref()),
                    ]))
                    .into_owned(),
                );
                b.push((st::FORGET_SEEN.bind(vec![Arg::Int(run.id)])).into_owned());
            }
        }
        b.push((st::RELEASE_LEASE.bind(vec![Arg::text(LEASE), text(&self.holder)])).into_owned());
        b
    }

    fn open_statements(&self) -> Vec<Bound<'static>> {
        let mut b = self.start_statements();
        b.push((st::OPEN_RECONCILIATION.bind(vec![])).into_owned());
        b
    }

    /// A new run's start, if this walk starts one: the unfinished runs it supersedes, and
    /// its row.
    fn start_statements(&self) -> Vec<Bound<'static>> {
        if self.start == Start::ContinueOnly {
            return Vec::new();
        }
        let full = matches!(self.start, Start::Manual { full: true });
        let paid_since = (!full).then_some(self.now - WINDOW_SECONDS);
        vec![
            (st::SUPERSEDE_RECONCILIATIONS
                .bind(vec![Arg::Int(i64::from(self.start == Start::Daily))]))
            .into_owned(),
            (st::START_RECONCILIATION
                .bind(vec![Arg::Int(i64::from(full)), Arg::opt_int(paid_since)]))
            .into_owned(),
        ]
    }

    /// What the database step in progress ([`Step::Acquire`], [`Step::Open`],
    /// [`Step::Lookup`], [`Step::Record`], [`Step::Finish`]) returned: each statement's rows
    /// as JSON objects, in order. Read here, once for both drivers, and handed on to
    /// [`Walk::leased`], [`Walk::opened`], [`Walk::looked_up`], [`Walk::recorded`] or
    /// [`Walk::finished`].
    pub fn ran(&mut self, results: &[Vec<Value>]) -> Result<(), String> {
        fn parse<T: DeserializeOwned>(rows: &[Value]) -> Result<Vec<T>, String> {
            rows.iter()
                .map(|r| serde_json::from_value(r.clone()).map_err(|e| e.to_string()))
                .collect()
        }
        let rows = |i: usize| results.get(i).map_or(&[][..], Vec::as_slice);
        let last = results.len().saturating_sub(1);
        match self.phase {
            Phase::Acquire => self.leased(!rows(0).is_empty()),
            Phase::Open => self.opened(parse(rows(last))?.into_iter().next()),
            Phase::Lookup => self.looked_up(parse(rows(0))?, parse(rows(1))?),
            Phase::Record => {
                let claimed = self.claims_cursor && !rows(last).is_empty();
                self.recorded(!rows(0).is_empty(), claimed);
            }
            Phase::Finish => self.finished(),
            _ => return Err("no database step of the walk is in progress".into()),
        }
        Ok(())
    }

    /// Whether the lease was taken.
    pub fn leased(&mut self, taken: bool) {
        if taken {
            self.phase = Phase::Open;
            return;
        }
        self.idle = Some(Ended::LeaseHeld);
        // a daily run waits for the walk that holds the lease (interface §6): its row is
        // recorded now, and the next continuation walks it; an operator's run is answered
        // 409 instead, and a continuation has nothing to record
        self.waits = self.start == Start::Daily;
        self.phase = if self.waits {
            Phase::Finish
        } else {
            Phase::Done
        };
    }

    /// The run to walk (the open batch's last row), if any.
    pub fn opened(&mut self, run: Option<RunRow>) {
        self.fresh = self.start != Start::ContinueOnly;
        match run {
            Some(run) => {
                // a daily run that waits behind a full walk continues the full walk
                self.fresh = self.fresh && run.pages == 0 && run.cursor.is_none();
                self.cursor = run.cursor.clone();
                self.run = Some(run);
                self.phase = Phase::Fetch;
            }
            None => {
                // nothing to walk: let the lease go
                self.run = None;
                self.idle = Some(Ended::NothingToDo);
                self.phase = Phase::Finish;
            }
        }
    }

    /// The invoices of the page that reconciliation checks: invoice ids, listed paid.
    fn paid_invoices(&self) -> impl Iterator<Item = &ProviderInvoice> {
        self.page.iter().flat_map(|p| &p.data).filter(|i| {
            resource_kind_of(&i.id) == Some(ResourceKind::Invoice)
                && i.status.as_deref().is_none_or(|s| s == "paid")
        })
    }

    /// The provider's page, or why not.
    pub fn fetched(&mut self, page: Result<ProviderPage, String>) {
        match page {
            Err(e) => {
                // part-way, what was checked is reported; before anything, the run failed
                let nothing_yet =
                    self.fresh && self.pages_this_invocation == 0 && self.run_pages() == 0;
                let state = if nothing_yet { "failed" } else { "truncated" };
                self.provider_error = Some(e.clone());
                self.end = Some((state, Some(e)));
                self.phase = Phase::Finish;
            }
            Ok(page) if page.data.is_empty() && page.has_more => {
                self.end = Some((
                    "truncated",
                    Some(format!(
                        "the provider's page after {} is empty but claims more",
                        self.cursor.as_deref().unwrap_or("the start")
                    )),
                ));
                self.phase = Phase::Finish;
            }
            Ok(page) => {
                self.page = Some(page);
                self.phase = Phase::Lookup;
            }
        }
    }

    fn run_pages(&self) -> i64 {
        self.run.as_ref().map_or(0, |r| r.pages)
    }

    /// The page's ids this run had not been given before, and the on-record rows.
    pub fn looked_up(&mut self, new_ids: Vec<Seen>, on_record: Vec<OnRecord>) {
        let page = self.page.as_ref().expect("fetched");
        if !page.data.is_empty() && new_ids.is_empty() {
            self.end = Some((
                "truncated",
                Some(format!(
                    "every id on the provider's page after {} was given before in this run: \
                     the page does not move the cursor forward",
                    self.cursor.as_deref().unwrap_or("the start")
                )),
            ));
            self.phase = Phase::Finish;
            return;
        }
        self.on_record = on_record;
        self.at = 0;
        self.handled_to = None;
        self.checked = 0;
        self.findings.clear();
        self.phase = Phase::Handle;
    }

    /// The page's invoices in order: each not on record is brought to paid
    /// (`BRING_TO_PAID_COST` each, one kept for the record); the page may end early, the
    /// cursor kept there.
    fn handle(&mut self) -> Step {
        let page = self.page.clone().expect("fetched");
        while self.at < page.data.len() {
            let invoice = &page.data[self.at];
            let looked_up = self.on_record.iter().find(|r| r.id == invoice.id);
            let missing = looked_up.is_some_and(|r| !r.on_record);
            if let Some(waiting) = looked_up.filter(|r| r.refund_waiting) {
                // its refund is on record, not yet processed: the money went back, so it is
                // neither brought to paid nor given the order_ref that would ship its goods;
                // reported as missing, not brought (interface §3)
                let (status, id) = (waiting.status.clone(), invoice.id.clone());
                match missing {
                    true => self.brought(false, status),
                    false => self.handled(id),
                }
                continue;
            }
            if missing || looked_up.is_some_and(|r| r.learns_from(invoice)) {
                // this invoice, then the page's record
                if self.left() < RESERVE + BRING_TO_PAID_COST + 1 {
                    break;
                }
                self.used += BRING_TO_PAID_COST;
                let invoice = invoice.clone();
                return if missing {
                    Step::BringToPaid(invoice)
                } else {
                    Step::Fill(invoice)
                };
            }
            if looked_up.is_some() {
                self.checked += 1;
            }
            self.handled_to = Some(invoice.id.clone());
            self.at += 1;
        }
        self.phase = Phase::Record;
        self.step()
    }

    /// The invoice being handled was brought to paid (`applied`) or not, `status` after it.
    pub fn brought(&mut self, applied: bool, status: Option<String>) {
        let invoice = self.page.as_ref().expect("fetched").data[self.at].clone();
        self.findings.push(Finding {
            invoice_id: invoice.id.clone(),
            order_ref: invoice.order_ref,
            brought_to_paid: applied,
            status,
        });
        self.handled(invoice.id);
    }

    /// The invoice being handled was given the facts it lacked.
    pub fn filled(&mut self) {
        let id = self.page.as_ref().expect("fetched").data[self.at]
            .id
            .clone();
        self.handled(id);
    }

    fn handled(&mut self, id: String) {
        self.checked += 1;
        self.handled_to = Some(id);
        self.at += 1;
    }

    fn page_complete(&self) -> bool {
        self.page.as_ref().is_some_and(|p| self.at >= p.data.len())
    }

    /// Where the next page starts: after the last invoice handled.
    fn next_cursor(&self) -> Option<String> {
        self.handled_to.clone().or_else(|| self.cursor.clone())
    }

    /// Whether the walk goes on after this page (in this invocation or the next).
    fn goes_on(&self) -> bool {
        !self.page_complete() || self.page.as_ref().is_some_and(|p| p.has_more)
    }

    fn record_statements(&self) -> Vec<Bound<'static>> {
        let run_id = self.run.as_ref().expect("opened").id;
        let cursor = self.next_cursor();
        let mut b = vec![(st::RECORD_RECONCILIATION_PAGE.bind(vec![
            Arg::Int(run_id),
            text(&self.holder),
            Arg::opt(cursor.as_deref()),
            // pages fetched and handled: a page split between invocations counts each time
            Arg::Int(1),
            Arg::Int(self.checked),
        ]))
        .into_owned()];
        let page = self.page.as_ref().expect("fetched");
        let handled: Vec<&str> = page.data[..self.at].iter().map(|i| i.id.as_str()).collect();
        b.push((st::MARK_SEEN.bind(vec![Arg::Int(run_id), Arg::json_list(&handled)])).into_owned());
        for f in &self.findings {
            b.push(
                (st::INSERT_FINDING.bind(vec![
                    Arg::Int(run_id),
                    text(&self.holder),
                    text(&f.invoice_id),
                    Arg::opt(f.order_ref.as_deref()),
                    Arg::Int(i64::from(f.brought_to_paid)),
                    Arg::opt(f.status.as_deref()),
                ]))
                .into_owned(),
            );
        }
        b.push(
            (st::RENEW_LEASE.bind(vec![
                Arg::text(LEASE),
                text(&self.holder),
                modifier(LEASE_SECONDS),
            ]))
            .into_owned(),
        );
        if let (true, Some(c)) = (self.goes_on(), cursor.as_deref()) {
            // the next page's starting_after, claimed now: asked twice, the run is stuck
            b.push((st::CLAIM_CURSOR.bind(vec![Arg::Int(run_id), text(c)])).into_owned());
        }
        b
    }

    /// The record batch ran: whether this walk still held its run (the first statement's
    /// row), and whether the next cursor was claimed for the first time (the last's).
    pub fn recorded(&mut self, held: bool, cursor_new: bool) {
        self.pages_this_invocation += 1;
        if !held {
            // superseded by a newer run (or the lease lost): stop, change nothing more
            self.end = Some(("superseded", None));
            self.phase = Phase::Finish;
            return;
        }
        let cursor = self.next_cursor();
        self.cursor = cursor.clone();
        if !self.goes_on() {
            self.end = Some(("done", None));
            self.phase = Phase::Finish;
        } else if cursor.is_some() && !cursor_new {
            self.end = Some((
                "truncated",
                Some(format!(
                    "starting_after {} was asked twice in this run: the provider's pages do \
                     not move the cursor forward",
                    cursor.as_deref().unwrap_or_default()
                )),
            ));
            self.phase = Phase::Finish;
        } else if !self.page_complete() {
            // the page did not fit: the next invocation goes on from the invoice reached
            self.phase = Phase::Finish;
        } else {
            self.page = None;
            self.phase = Phase::Fetch;
        }
    }

    /// Ends this invocation's share: the run stays running (continued by the next cron).
    fn close(&mut self) -> Step {
        self.phase = Phase::Finish;
        self.step()
    }

    pub fn finished(&mut self) {
        self.phase = Phase::Done;
    }

    fn ended(&self) -> Ended {
        if let Some(idle) = &self.idle {
            return idle.clone();
        }
        let run = self.run.as_ref().expect("a walked run");
        match &self.end {
            Some(("failed", Some(e))) if self.provider_error.is_some() => Ended::ProviderFailed {
                run_id: run.id,
                error: e.clone(),
            },
            Some((state, error)) => Ended::Walked {
                run_id: run.id,
                state,
                error: error.clone(),
            },
            None => Ended::Walked {
                run_id: run.id,
                state: "running",
                error: None,
            },
        }
    }
}

#[cfg(test)]
mod tests;
