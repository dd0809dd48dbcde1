//! Each admin call as a typed command, with its inputs validated: what the Worker applies.

use super::audit::{Action, MAX_ACTOR_CHARS};
use super::paging::{
    parse_effect_cursor, parse_limit, parse_seq_cursor, DeliveryCursor, DEFAULT_PAGE,
};
use super::routes::{self, Operation, Resolved};
use super::{bad_request, CommandError};
use crate::ids::{resource_kind_of, ResourceKind};
use crate::machine::{state_of, EffectKind, State};
use crate::time::normalize_iso8601;
use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer as _};
use serde_json::Value;
use std::borrow::Cow;

/// Longest manual reason, in Unicode characters (interface §5).
pub const MAX_REASON_CHARS: usize = 500;
/// Longest order_ref / amount / currency an operator may type.
pub const MAX_FIELD_CHARS: usize = 200;

/// One admin call, its inputs validated. One variant per route ([`routes::ROUTES`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// `GET /deliveries`
    ListDeliveries(DeliveryQuery),
    /// `GET /deliveries/{event_id}`: the id as sent (an unknown one is a 404 of the lookup).
    GetDelivery { event_id: String },
    /// `POST /deliveries/{event_id}/replay`
    ReplayDelivery { event_id: String },
    /// `POST /deliveries/{event_id}/dismiss`: a dead delivery an operator has handled.
    DismissDelivery { event_id: String, reason: String },
    /// `POST /deliveries/replay`
    BulkReplay(BulkReplay),
    /// `GET /resources/{resource_id}`
    GetResource { resource_id: String },
    /// `POST /resources/{resource_id}/transition`
    Transition(Transition),
    /// `POST /reconcile`: the last 7 days, or everything with `{"full":true}`.
    ReconcileNow { full: bool },
    /// `GET /reconcile`: the latest report.
    LatestReconcile,
    /// `GET /effects`
    ListEffects(EffectQuery),
    /// `POST /effects/{effect_id}/redeliver`
    RedeliverEffect { effect_id: String },
    /// `POST /effects/{effect_id}/ack`: pull mode, the order system has it (interface §7).
    AckEffect { effect_id: String },
    /// `POST /effects/{effect_id}/dismiss`: a dead effect an operator has handled.
    DismissEffect { effect_id: String, reason: String },
    /// `GET /metrics`, or `?format=prometheus`.
    Metrics { format: MetricsFormat },
    /// `GET /metrics/history?hours=`: the health charts' hourly series.
    MetricsHistory { hours: u32 },
    /// `GET /alerts`
    ListAlerts,
    /// `POST /alerts/{alert_id}/ack`
    AckAlert { alert_id: String },
    /// `GET /whoami`: who the admission says is asking (interface §11).
    WhoAmI,
    /// `GET /audit`: the audit log, newest first (interface §11).
    ListAudit(AuditQuery),
    /// `GET /openapi.json`: the admin API's OpenAPI 3.1 document (interface §12).
    OpenApi,
    /// `POST /archive` (interface §10)
    Archive(Archive),
}

/// `POST /archive`: archive now, as the daily run does, the processed deliveries received
/// before `before`; `after` continues a previous call (its `next_cursor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archive {
    /// Normalised by [`normalize_iso8601`]; that it is not in the future is the Worker's check
    /// (it has the clock).
    pub before: String,
    pub after: Option<DeliveryCursor>,
}

/// A delivery status filter: `received`, `processed`, or an outcome (the statement reads it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFilter {
    /// Not processed yet; `unprocessed` and `pending` say the same in other words.
    Received,
    Processed,
    Applied,
    Ignored,
    Stale,
    Dead,
}

const STATUS_WORDS: &str = "status is one of received (or unprocessed, pending), processed, \
                            applied, ignored, stale, dead";

impl StatusFilter {
    pub fn parse(status: &str) -> Result<StatusFilter, CommandError> {
        Ok(match status {
            "received" | "unprocessed" | "pending" => StatusFilter::Received,
            "processed" => StatusFilter::Processed,
            "applied" => StatusFilter::Applied,
            "ignored" => StatusFilter::Ignored,
            "stale" => StatusFilter::Stale,
            "dead" => StatusFilter::Dead,
            _ => return Err(bad_request("invalid_status", STATUS_WORDS)),
        })
    }

    /// The word the delivery statements compare with.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusFilter::Received => "received",
            StatusFilter::Processed => "processed",
            StatusFilter::Applied => "applied",
            StatusFilter::Ignored => "ignored",
            StatusFilter::Stale => "stale",
            StatusFilter::Dead => "dead",
        }
    }
}

/// `GET /deliveries?type=&resource_id=&status=&cursor=&limit=` (newest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryQuery {
    pub event_type: Option<String>,
    pub resource_id: Option<String>,
    pub status: Option<StatusFilter>,
    pub after: Option<DeliveryCursor>,
    pub limit: u32,
}

/// No filter, the default page.
impl Default for DeliveryQuery {
    fn default() -> Self {
        DeliveryQuery {
            event_type: None,
            resource_id: None,
            status: None,
            after: None,
            limit: DEFAULT_PAGE,
        }
    }
}

/// An effect's dispatch state, as the feed filters it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DispatchFilter {
    Pending,
    Delivered,
    Dead,
    /// A fulfilment its refund cancelled before it was delivered (interface §3).
    Cancelled,
}

impl DispatchFilter {
    pub fn as_str(self) -> &'static str {
        match self {
            DispatchFilter::Pending => "pending",
            DispatchFilter::Delivered => "delivered",
            DispatchFilter::Dead => "dead",
            DispatchFilter::Cancelled => "cancelled",
        }
    }
}

/// `GET /effects?kind=&dispatch=&cursor=&limit=` (interface §7: oldest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectQuery {
    pub kind: Option<EffectKind>,
    pub dispatch: Option<DispatchFilter>,
    /// With `dispatch=dead`: only those an operator did (or did not) dismiss.
    pub dismissed: Option<bool>,
    /// The `seq` of the last effect seen.
    pub after: Option<i64>,
    pub limit: u32,
}

/// No filter, the default page.
impl Default for EffectQuery {
    fn default() -> Self {
        EffectQuery {
            kind: None,
            dispatch: None,
            dismissed: None,
            after: None,
            limit: DEFAULT_PAGE,
        }
    }
}

/// Which deliveries a bulk replay resets; at least one field is set (a parsed one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayFilter {
    pub event_type: Option<String>,
    pub resource_id: Option<String>,
    pub status: Option<StatusFilter>,
    /// Normalised by [`normalize_iso8601`].
    pub received_after: Option<String>,
    pub received_before: Option<String>,
}

/// `GET /audit?actor=&action=&cursor=&limit=` (newest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditQuery {
    /// Exactly this actor (trimmed; 1 to [`MAX_ACTOR_CHARS`] characters).
    pub actor: Option<String>,
    pub action: Option<Action>,
    /// The `id` of the last row seen.
    pub after: Option<i64>,
    pub limit: u32,
}

/// No filter, the default page.
impl Default for AuditQuery {
    fn default() -> Self {
        AuditQuery {
            actor: None,
            action: None,
            after: None,
            limit: DEFAULT_PAGE,
        }
    }
}

/// `POST /deliveries/replay` (interface §5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkReplay {
    pub filter: ReplayFilter,
    /// Only count.
    pub dry_run: bool,
    /// Where a previous call stopped (its `next_cursor`), to continue the same replay.
    pub after: Option<DeliveryCursor>,
}

/// `POST /resources/{resource_id}/transition`: an operator's change of a resource's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub resource_id: String,
    pub kind: ResourceKind,
    pub to: State,
    /// Trimmed; 1 to [`MAX_REASON_CHARS`] characters as sent.
    pub reason: String,
    pub order_ref: Option<String>,
    pub amount: Option<String>,
    pub currency: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsFormat {
    Json,
    Prometheus,
}

impl Command {
    /// Parses a request: its method token (`GET`, upper case), its path after `/admin/api`
    /// (not percent-decoded), its query string (without `?`) and its body.
    pub fn parse(
        method: &str,
        path: &str,
        query: &str,
        body: &[u8],
    ) -> Result<Command, CommandError> {
        Command::from_resolved(&routes::resolve(method, path)?, query, body)
    }

    /// The command of a resolved route ([`routes::resolve`]): for a caller that reads the
    /// body only when the route has one ([`routes::Route::body`]).
    pub fn from_resolved(
        resolved: &Resolved<'_>,
        query: &str,
        body: &[u8],
    ) -> Result<Command, CommandError> {
        let id = || resolved.id().to_string();
        Ok(match resolved.route.operation {
            Operation::ListDeliveries => Command::ListDeliveries(delivery_query(query)?),
            Operation::GetDelivery => Command::GetDelivery { event_id: id() },
            Operation::ReplayDelivery => Command::ReplayDelivery { event_id: id() },
            Operation::DismissDelivery => Command::DismissDelivery {
                event_id: id(),
                reason: dismiss_reason(body)?,
            },
            Operation::BulkReplay => Command::BulkReplay(bulk_replay(&text(body))?),
            Operation::GetResource => Command::GetResource { resource_id: id() },
            Operation::Transition => Command::Transition(transition(resolved.id(), body)?),
            Operation::ReconcileNow => Command::ReconcileNow {
                full: reconcile_full(&text(body))?,
            },
            Operation::LatestReconcile => Command::LatestReconcile,
            Operation::ListEffects => Command::ListEffects(effect_query(query)?),
            Operation::RedeliverEffect => Command::RedeliverEffect { effect_id: id() },
            Operation::AckEffect => Command::AckEffect { effect_id: id() },
            Operation::DismissEffect => Command::DismissEffect {
                effect_id: id(),
                reason: dismiss_reason(body)?,
            },
            Operation::Metrics => Command::Metrics {
                format: metrics_format(query),
            },
            Operation::MetricsHistory => Command::MetricsHistory {
                hours: history_hours(query)?,
            },
            Operation::ListAlerts => Command::ListAlerts,
            Operation::AckAlert => Command::AckAlert { alert_id: id() },
            Operation::WhoAmI => Command::WhoAmI,
            Operation::ListAudit => Command::ListAudit(audit_query(query)?),
            Operation::OpenApi => Command::OpenApi,
            Operation::Archive => Command::Archive(archive(&text(body))?),
        })
    }

    /// Which operation (and so which route) this command is.
    pub fn operation(&self) -> Operation {
        match self {
            Command::ListDeliveries(_) => Operation::ListDeliveries,
            Command::GetDelivery { .. } => Operation::GetDelivery,
            Command::ReplayDelivery { .. } => Operation::ReplayDelivery,
            Command::DismissDelivery { .. } => Operation::DismissDelivery,
            Command::BulkReplay(_) => Operation::BulkReplay,
            Command::GetResource { .. } => Operation::GetResource,
            Command::Transition(_) => Operation::Transition,
            Command::ReconcileNow { .. } => Operation::ReconcileNow,
            Command::LatestReconcile => Operation::LatestReconcile,
            Command::ListEffects(_) => Operation::ListEffects,
            Command::RedeliverEffect { .. } => Operation::RedeliverEffect,
            Command::AckEffect { .. } => Operation::AckEffect,
            Command::DismissEffect { .. } => Operation::DismissEffect,
            Command::Metrics { .. } => Operation::Metrics,
            Command::MetricsHistory { .. } => Operation::MetricsHistory,
            Command::ListAlerts => Operation::ListAlerts,
            Command::AckAlert { .. } => Operation::AckAlert,
            Command::WhoAmI => Operation::WhoAmI,
            Command::ListAudit(_) => Operation::ListAudit,
            Command::OpenApi => Operation::OpenApi,
            Command::Archive(_) => Operation::Archive,
        }
    }
}

/// The body as workerd's `Request.text()` and `Request.json()` decode it (which the API read
/// it with): UTF-8, an invalid sequence read as U+FFFD, a byte order mark kept (so that JSON
/// starting with one is not JSON), as measured.
fn text(body: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(body)
}

/// The parameters that are numbers (`integer` in the OpenAPI document): an empty one is not a
/// number, and is refused rather than left out.
pub(crate) const NUMBERS: [&str; 2] = ["limit", "hours"];

/// The query's filters: each parameter decoded, its value trimmed, the empty ones left out
/// (an empty filter filters nothing) but for [`NUMBERS`].
fn filters(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.trim().to_string()))
        .filter(|(k, v)| !v.is_empty() || NUMBERS.contains(&k.as_str()))
}

/// A body that must be a JSON object, read into `T`. serde's derived structs also take an
/// array of their fields in order (`[]` a struct of defaults), which the OpenAPI document
/// does not allow and no caller means.
fn object<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    if !text
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('{')
    {
        return Err(de::Error::custom("not a JSON object"));
    }
    serde_json::from_str(text)
}

/// Parameters are read in order (a repeated one: the last wins), each refused as met; the
/// cursor is checked after all of them.
fn delivery_query(query: &str) -> Result<DeliveryQuery, CommandError> {
    let mut q = DeliveryQuery::default();
    let mut cursor = None;
    for (k, v) in filters(query) {
        match k.as_str() {
            "type" => q.event_type = Some(v),
            "resource_id" => q.resource_id = Some(v),
            "status" => q.status = Some(StatusFilter::parse(&v)?),
            "cursor" => cursor = Some(v),
            "limit" => q.limit = parse_limit(&v)?,
            _ => {}
        }
    }
    q.after = cursor.as_deref().map(DeliveryCursor::parse).transpose()?;
    Ok(q)
}

fn effect_query(query: &str) -> Result<EffectQuery, CommandError> {
    let mut q = EffectQuery::default();
    for (k, v) in filters(query) {
        match k.as_str() {
            "kind" => {
                q.kind = Some(EffectKind::from_str_name(&v).ok_or_else(|| {
                    bad_request(
                        "invalid_kind",
                        "kind is one of fulfilment, revocation, settlement, credit",
                    )
                })?)
            }
            "dispatch" => {
                q.dispatch = Some(match v.as_str() {
                    "pending" => DispatchFilter::Pending,
                    "delivered" => DispatchFilter::Delivered,
                    "dead" => DispatchFilter::Dead,
                    "cancelled" => DispatchFilter::Cancelled,
                    _ => {
                        return Err(bad_request(
                            "invalid_dispatch",
                            "dispatch is one of pending, delivered, dead, cancelled",
                        ))
                    }
                })
            }
            "dismissed" => {
                q.dismissed = Some(match v.as_str() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(bad_request(
                            "invalid_dismissed",
                            "dismissed is true or false",
                        ))
                    }
                })
            }
            "cursor" => q.after = Some(parse_effect_cursor(&v)?),
            "limit" => q.limit = parse_limit(&v)?,
            _ => {}
        }
    }
    if q.dismissed.is_some() && q.dispatch != Some(DispatchFilter::Dead) {
        return Err(bad_request(
            "invalid_dismissed",
            "dismissed filters dead effects: give it with dispatch=dead",
        ));
    }
    Ok(q)
}

/// The audit log's filters: `action` one of [`Action`]'s words (a word it does not know is
/// refused, not answered with an empty page), `actor` as recorded.
fn audit_query(query: &str) -> Result<AuditQuery, CommandError> {
    let mut q = AuditQuery::default();
    for (k, v) in filters(query) {
        match k.as_str() {
            "actor" => {
                if v.chars().count() > MAX_ACTOR_CHARS || v.chars().any(char::is_control) {
                    return Err(bad_request(
                        "invalid_actor",
                        format!("actor is 1 to {MAX_ACTOR_CHARS} printable characters"),
                    ));
                }
                q.actor = Some(v)
            }
            "action" => {
                q.action = Some(Action::parse(&v).ok_or_else(|| {
                    let words: Vec<&str> = Action::ALL.iter().map(|a| a.as_str()).collect();
                    bad_request(
                        "invalid_action",
                        format!("action is one of {}", words.join(", ")),
                    )
                })?)
            }
            "cursor" => q.after = Some(parse_seq_cursor(&v)?),
            "limit" => q.limit = parse_limit(&v)?,
            _ => {}
        }
    }
    Ok(q)
}

/// `?format=prometheus` exactly (undecoded values are not trimmed here); anything else, JSON.
fn metrics_format(query: &str) -> MetricsFormat {
    if form_urlencoded::parse(query.as_bytes()).any(|(k, v)| k == "format" && v == "prometheus") {
        MetricsFormat::Prometheus
    } else {
        MetricsFormat::Json
    }
}

/// The health charts' window: 24 hours by default, at most the 8 days the samples and the
/// counter buckets are kept.
pub const DEFAULT_HISTORY_HOURS: u32 = 24;
pub const MAX_HISTORY_HOURS: u32 = 8 * 24;

/// `?hours=N`, 1 to [`MAX_HISTORY_HOURS`]; absent: [`DEFAULT_HISTORY_HOURS`].
fn history_hours(query: &str) -> Result<u32, CommandError> {
    let mut hours = DEFAULT_HISTORY_HOURS;
    for (k, v) in filters(query) {
        if k == "hours" {
            hours = v
                .parse::<u32>()
                .ok()
                .filter(|h| (1..=MAX_HISTORY_HOURS).contains(h))
                .ok_or_else(|| {
                    bad_request(
                        "invalid_hours",
                        format!("hours is a whole number from 1 to {MAX_HISTORY_HOURS}"),
                    )
                })?;
        }
    }
    Ok(hours)
}

const DISMISS_BODY: &str = r#"the body is {"reason":"<why it needs no replay>"}"#;

/// A dismissal's `{"reason": "…"}`: 1 to [`MAX_REASON_CHARS`] characters as sent, blanks
/// alone refused, trimmed, as a manual transition's reason; other keys ignored (read as the
/// transition body is).
fn dismiss_reason(body: &[u8]) -> Result<String, CommandError> {
    let Some([Some(Value::String(reason))]) = fields(body, ["reason"]) else {
        return Err(bad_request("invalid_json", DISMISS_BODY));
    };
    valid_reason(&reason).map(str::to_string)
}

/// A blank, as the API reads a reason or a filter: Unicode's White_Space (Rust's
/// `char::is_whitespace`) and U+FEFF. Exactly the characters the OpenAPI document's
/// "not only blanks" pattern lists, written out (no `\s`: ECMAScript's lacks U+0085 and has
/// U+FEFF, Python's has U+001C..U+001F), so that a client of any regex dialect and the API
/// agree on which texts are blank.
pub fn is_blank(c: char) -> bool {
    c.is_whitespace() || c == '\u{feff}'
}

fn trim_blanks(s: &str) -> &str {
    s.trim_matches(is_blank)
}

/// A reason of 1 to [`MAX_REASON_CHARS`] characters, counted as sent (not bytes: a
/// 200-character Chinese reason is 600 bytes and valid); blanks alone say nothing. Trimmed.
fn valid_reason(reason: &str) -> Result<&str, CommandError> {
    let trimmed = trim_blanks(reason);
    if trimmed.is_empty() || reason.chars().count() > MAX_REASON_CHARS {
        return Err(bad_request(
            "invalid_reason",
            format!("a reason of 1 to {MAX_REASON_CHARS} characters is required"),
        ));
    }
    Ok(trimmed)
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct BulkReplayRequest {
    status: Option<String>,
    #[serde(rename = "type")]
    event_type: Option<String>,
    resource_id: Option<String>,
    received_after: Option<String>,
    received_before: Option<String>,
    #[serde(default)]
    dry_run: bool,
    cursor: Option<String>,
}

/// A text field of a body: trimmed, empty as absent.
fn clean(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(trim_blanks).filter(|v| !v.is_empty())
}

fn replay_time(v: Option<&str>, name: &'static str) -> Result<Option<String>, CommandError> {
    v.map(|t| {
        normalize_iso8601(t)
            .ok_or_else(|| bad_request("invalid_time", format!("{name} is not an ISO-8601 time")))
    })
    .transpose()
}

const BULK_BODY: &str =
    "{status?, type?, resource_id?, received_after?, received_before?, dry_run?, cursor?}";
const FILTER_REQUIRED: &str = "a bulk replay needs at least one of status, type, resource_id, \
                               received_after, received_before";

/// An empty body (or only blanks) is `{}`; checked in this order: the JSON, the status,
/// the times, that some filter is set, the cursor.
fn bulk_replay(text: &str) -> Result<BulkReplay, CommandError> {
    let text = if text.trim().is_empty() { "{}" } else { text };
    let body: BulkReplayRequest = object(text)
        .map_err(|e| bad_request("invalid_json", format!("the body is {BULK_BODY}: {e}")))?;
    let filter = ReplayFilter {
        status: clean(&body.status).map(StatusFilter::parse).transpose()?,
        received_after: replay_time(clean(&body.received_after), "received_after")?,
        received_before: replay_time(clean(&body.received_before), "received_before")?,
        event_type: clean(&body.event_type).map(str::to_string),
        resource_id: clean(&body.resource_id).map(str::to_string),
    };
    if filter.event_type.is_none()
        && filter.resource_id.is_none()
        && filter.status.is_none()
        && filter.received_after.is_none()
        && filter.received_before.is_none()
    {
        return Err(bad_request("filter_required", FILTER_REQUIRED));
    }
    Ok(BulkReplay {
        after: clean(&body.cursor).map(DeliveryCursor::parse).transpose()?,
        dry_run: body.dry_run,
        filter,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ArchiveRequest {
    before: String,
    cursor: Option<String>,
}

const ARCHIVE_BODY: &str = r#"the body is {"before":"<ISO-8601 time>","cursor"?:"<next_cursor>"}"#;

/// Checked in this order: the JSON, the time, the cursor.
fn archive(text: &str) -> Result<Archive, CommandError> {
    let body: ArchiveRequest =
        object(text).map_err(|e| bad_request("invalid_json", format!("{ARCHIVE_BODY}: {e}")))?;
    let before = normalize_iso8601(&body.before)
        .ok_or_else(|| bad_request("invalid_time", "before is not an ISO-8601 time"))?;
    Ok(Archive {
        before,
        after: clean(&body.cursor).map(DeliveryCursor::parse).transpose()?,
    })
}

#[derive(Deserialize, Default)]
struct ReconcileRequest {
    #[serde(default)]
    full: bool,
}

/// An empty body (or only blanks), or `{"full": true|false}`.
fn reconcile_full(text: &str) -> Result<bool, CommandError> {
    if text.trim().is_empty() {
        return Ok(ReconcileRequest::default().full);
    }
    object::<ReconcileRequest>(text)
        .map(|r| r.full)
        .map_err(|_| {
            bad_request(
                "invalid_json",
                r#"the body is empty or {"full":true|false}"#,
            )
        })
}

/// The named fields of a JSON object body, each the last value given for its key, read as the
/// runtime's `Request.json()` (`JSON.parse`) read these bodies before: an array or a scalar is
/// not an object, and other keys are ignored whatever they hold (a number beyond a double's
/// range too, where a `Value` of the whole body would refuse it). `None`: not a JSON object.
fn fields<const N: usize>(body: &[u8], names: [&str; N]) -> Option<[Option<Value>; N]> {
    let text = text(body);
    let text = replace_lone_surrogates(&text);
    let mut json = serde_json::Deserializer::from_str(&text);
    let values = json.deserialize_map(Named(names)).ok()?;
    json.end().ok()?;
    Some(values)
}

/// [`fields`]' visitor.
struct Named<'n, const N: usize>([&'n str; N]);

impl<'de, const N: usize> Visitor<'de> for Named<'_, N> {
    type Value = [Option<Value>; N];
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut values = [const { None }; N];
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match self.0.iter().position(|name| *name == key) {
                Some(i) => values[i] = Some(map.next_value()?),
                None => drop(map.next_value::<IgnoredAny>()?),
            }
        }
        Ok(values)
    }
}

/// The four hex digits at `at`, if they are.
fn hex4(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 4)?.iter().try_fold(0, |n: u16, &d| {
        Some(n << 4 | char::from(d).to_digit(16)? as u16)
    })
}

/// `JSON.parse` keeps a lone surrogate escape (a client cutting a string between the two
/// halves of an emoji) where serde_json refuses it, and the runtime's JS-to-Rust string
/// conversion then made each one U+FFFD: so each becomes `\uFFFD` here, in place, before
/// parsing. Nothing else changes (only hex digits inside strings are rewritten).
fn replace_lone_surrogates(json: &str) -> Cow<'_, str> {
    let surrogate = |n: Option<u16>, range: std::ops::RangeInclusive<u16>| {
        n.is_some_and(|n| range.contains(&n))
    };
    let mut b = json.as_bytes().to_vec();
    let (mut i, mut in_string, mut changed) = (0, false, false);
    while i < b.len() {
        match b[i] {
            b'"' => in_string = !in_string,
            b'\\' if in_string && b.get(i + 1) == Some(&b'u') => {
                let n = hex4(&b, i + 2);
                let paired = surrogate(n, 0xD800..=0xDBFF)
                    && b.get(i + 6..i + 8) == Some(b"\\u")
                    && surrogate(hex4(&b, i + 8), 0xDC00..=0xDFFF);
                if paired {
                    i += 12;
                    continue;
                }
                if surrogate(n, 0xD800..=0xDFFF) {
                    b[i + 2..i + 6].copy_from_slice(b"FFFD");
                    changed = true;
                }
                i += 6;
                continue;
            }
            // an escaped quote or backslash is not the string's end or an escape
            b'\\' if in_string => i += 1,
            _ => {}
        }
        i += 1;
    }
    match changed {
        true => Cow::Owned(String::from_utf8(b).unwrap_or_default()),
        false => Cow::Borrowed(json),
    }
}

/// The transition body's fields, of the types they must have.
struct TransitionFields {
    to: String,
    reason: String,
    order_ref: Option<String>,
    amount: Option<String>,
    currency: Option<String>,
}

/// `to` and `reason` strings; the others strings, `null` or absent. `None`: not that.
fn transition_fields(body: &[u8]) -> Option<TransitionFields> {
    let [to, reason, order_ref, amount, currency] =
        fields(body, ["to", "reason", "order_ref", "amount", "currency"])?;
    let required = |v: Option<Value>| match v {
        Some(Value::String(s)) => Some(s),
        _ => None,
    };
    let optional = |v: Option<Value>| match v {
        None | Some(Value::Null) => Some(None),
        Some(Value::String(s)) => Some(Some(s)),
        Some(_) => None,
    };
    Some(TransitionFields {
        to: required(to)?,
        reason: required(reason)?,
        order_ref: optional(order_ref)?,
        amount: optional(amount)?,
        currency: optional(currency)?,
    })
}

/// An optional text field of the transition body: trimmed, empty as absent, bounded.
fn optional_field(value: Option<&str>, name: &'static str) -> Result<Option<String>, CommandError> {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    if v.chars().count() > MAX_FIELD_CHARS || v.chars().any(char::is_control) {
        return Err(bad_request(
            "invalid_field",
            format!("{name} is 1 to {MAX_FIELD_CHARS} printable characters"),
        ));
    }
    Ok(Some(v.to_string()))
}

const TRANSITION_BODY: &str = r#"the body is {"to":"<state>","reason":"<why>"} with optional "order_ref", "amount", "currency""#;

/// Checked in this order: the resource id, the JSON, the reason, order_ref, amount,
/// currency, the state.
fn transition(resource_id: &str, body: &[u8]) -> Result<Transition, CommandError> {
    let kind = resource_kind_of(resource_id).ok_or_else(|| {
        bad_request(
            "invalid_resource_id",
            "a resource id is inv_, wdr_ or pcd_ and 1 to 64 letters or digits",
        )
    })?;
    let body =
        transition_fields(body).ok_or_else(|| bad_request("invalid_json", TRANSITION_BODY))?;
    let reason = valid_reason(&body.reason)?;
    let order_ref = optional_field(body.order_ref.as_deref(), "order_ref")?;
    let amount = optional_field(body.amount.as_deref(), "amount")?;
    let currency = optional_field(body.currency.as_deref(), "currency")?;
    let to = state_of(kind, body.to.trim()).ok_or_else(|| {
        bad_request(
            "invalid_state",
            format!("`{}` is not a state of a {}", body.to.trim(), kind.as_str()),
        )
    })?;
    Ok(Transition {
        resource_id: resource_id.to_string(),
        kind,
        to,
        reason: reason.to_string(),
        order_ref,
        amount,
        currency,
    })
}
