//! The archiving run (interface §10): the bodies of processed deliveries received before a
//! cutoff leave D1 for gzip-compressed NDJSON objects in R2, one object per chunk.
//!
//! A [`Run`] is a small state machine, as the dispatcher is ([`super::dispatch`]). Its driver
//! asks [`Run::next`] what to do, does it (a D1 statement or batch, the gzip, the R2 put and
//! get), and hands the result back. Per chunk, the order is always:
//!
//! 1. **select** the next candidates after the cursor (`ARCHIVE_CANDIDATES`: ids, days and
//!    body sizes, no bodies) and cut a chunk: one received day (an object never spans two),
//!    at most [`MAX_LINES`] lines and [`MAX_OBJECT_BYTES`] of bodies (at least one line);
//! 2. **load** the chunk's lines (`ARCHIVE_BODIES`), still processed and still holding their
//!    body, and build the object: one line per delivery, `{event_id, resource_id, event_type,
//!    received_at, processed_at, outcome, body}`, `body` the raw text as received;
//! 3. **compress** it (gzip, by the driver) and **write** it under
//!    `deliveries/<YYYY>/<MM>/<DD>/<HHMMSSmmm>-<hash>.ndjson.gz` (the first line's received
//!    time and the first 16 hex digits of the NDJSON's SHA-256: the name is the content's,
//!    so two runs that happen to write the same chunk write the same bytes under the same key,
//!    and a different chunk never overwrites an object rows already point to);
//! 4. **read it back** and verify it: the SHA-256 of the bytes read equals that of the bytes
//!    written, they gunzip, to as many lines as were written, and to the very text written;
//! 5. only then **remove** the bodies (`DROP_BODY_ROWS` deletes their `delivery_body` rows,
//!    `REMOVE_ARCHIVED_BODIES` marks the rows archived, in one batch with the run's
//!    progress): each row still processed exactly as its line says, so a delivery replayed
//!    meanwhile keeps its body.
//!
//! A failure anywhere before step 5 (a put or get that fails, an object missing, a checksum,
//! a line count or a text that differs, D1 failing) removes nothing of that chunk and ends the
//! run `failed`, with its reason. Chunks verified before it stay archived: each chunk's bodies
//! leave D1 only after its own object was verified, so a failing run never deletes a body
//! that is not safely in R2. An object written but not verified is left in the bucket (no row
//! points to it; its name is its content's, so deleting it could delete an object that rows of
//! another run point to).
//!
//! Bounded: each step costs one D1 query or one subrequest (a batch counts as one, gzip as
//! none), a chunk [`CHUNK_COST`]; a chunk starts only while the invocation's share of the
//! budget still holds it and the closing statements. The daily run keeps its cursor in
//! `archive_run` and the 5-minute cron continues it; an operator's run answers its cursor to
//! post back.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::admin::DeliveryCursor;
use crate::rows::int;
use crate::statements::{self as st, Arg, Bound};

/// Lines in one object at most.
pub const MAX_LINES: usize = 500;
/// Bytes of bodies in one object at most (uncompressed), unless its one line is larger: the
/// Worker holds a chunk several times over (rows, NDJSON, gzip, the read-back and its text),
/// well inside its 128 MB.
pub const MAX_OBJECT_BYTES: i64 = 4 * 1024 * 1024;
/// Where the removal's batch (`Step::Remove`) has REMOVE_ARCHIVED_BODIES, whose returned rows
/// are the bodies removed.
pub const REMOVED_AT: usize = 1;
/// One chunk: the candidates, the bodies, the put, the get, the removal (one batch).
pub const CHUNK_COST: u32 = 5;
/// Kept back for closing the invocation's share: the finish and the remaining count.
pub const CLOSING_COST: u32 = 2;
/// The smallest share of the budget that archives a chunk: open, one chunk, the closing.
pub const MIN_SHARE: u32 = 1 + CHUNK_COST + CLOSING_COST;
/// "Bodies past retention still in D1" is counted up to this many: a bounded read of the
/// partial index on every metrics scrape and alert run, whatever the backlog (an archive
/// left unbound for months); `remaining` of an operator's run is counted the same way. 1,000,
/// not 10,000: the growth benchmark found a cap of 10,000 read on every scrape by a merchant
/// whose day crossing the retention boundary is larger, 56 times the rest of the metrics' reads.
/// "At least 1,000 behind" is what an operator acts on; `oldest_body_received_at` (one index
/// read) says how far behind.
pub const BACKLOG_CAP: i64 = 1_000;
/// Objects a bulk replay's chunk reads back from the archive at most (then it is cut).
pub const MAX_RESTORE_OBJECTS: usize = 4;

/// Why a run is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// The daily cron: a new run over the deliveries received before `before` (now −
    /// `RETENTION_DAYS`); an unfinished daily run is superseded by it.
    Daily { before: String },
    /// Any other cron: continue the unfinished daily run, if there is one.
    Continue,
    /// `POST /admin/api/archive`: one run for this call, from `after` (a cursor it answered).
    Admin {
        before: String,
        after: Option<DeliveryCursor>,
    },
}

/// How much a run may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// D1 queries + subrequests this invocation's share allows.
    pub budget: u32,
    pub max_lines: usize,
    pub max_bytes: i64,
}

impl Settings {
    pub fn new(budget: u32) -> Settings {
        Settings {
            budget,
            max_lines: MAX_LINES,
            max_bytes: MAX_OBJECT_BYTES,
        }
    }
}

/// A run as kept in `archive_run` (`archive_run_columns!`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RunRow {
    #[serde(deserialize_with = "int")]
    pub id: i64,
    pub started_by: String,
    /// Stored form: deliveries received before it are archived.
    pub before: String,
    pub cursor_received_at: Option<String>,
    pub cursor_event_id: Option<String>,
    #[serde(deserialize_with = "int")]
    pub archived: i64,
    #[serde(deserialize_with = "int")]
    pub objects: i64,
}

/// A delivery to archive, before its body is loaded (`ARCHIVE_CANDIDATES`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Candidate {
    pub event_id: String,
    pub received_at: String,
    /// The body's size in bytes.
    #[serde(deserialize_with = "int")]
    pub bytes: i64,
}

/// One line of an object, as `ARCHIVE_BODIES` loads it and as it is written, in this order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    pub event_id: String,
    pub resource_id: String,
    pub event_type: String,
    pub received_at: String,
    pub processed_at: Option<String>,
    pub outcome: Option<String>,
    /// The raw text as received.
    pub body: String,
}

/// An object to write (the driver puts it, gets it back, gunzips what it got).
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    pub key: String,
    pub gzip: Vec<u8>,
    /// Lowercase hex SHA-256 of `gzip` (R2 checks it on the put; kept in its metadata).
    pub sha256: String,
    /// Its custom metadata: `lines`, `sha256`, `ndjson_sha256`, `first`, `last`.
    pub metadata: Vec<(&'static str, String)>,
}

/// What reading an object back gave.
#[derive(Debug, Clone, PartialEq)]
pub enum ReadBack {
    /// The bytes read, and their gunzipped text or why they do not gunzip.
    Read {
        bytes: Vec<u8>,
        text: Result<String, String>,
    },
    /// No object under the key.
    Missing,
    /// The put or the get failed.
    Failed(String),
}

/// What the driver must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Run these statements as one batch; hand the first row of the last one's results to
    /// [`Run::opened`].
    Open(Vec<Bound<'static>>),
    /// Run this query; hand its rows to [`Run::candidates`].
    Candidates(Bound<'static>),
    /// Run this query; hand its rows to [`Run::loaded`].
    Load(Bound<'static>),
    /// Gzip this text; hand the bytes (or why not) to [`Run::compressed`].
    Compress(String),
    /// Put the object, get it back, gunzip what was read; hand that to [`Run::read_back`].
    Write(Object),
    /// Run these statements as one batch; hand the number of rows the first returned to
    /// [`Run::removed`].
    Remove(Vec<Bound<'static>>),
    /// Run this statement, then [`Run::finished`].
    Finish(Bound<'static>),
    /// Run this query; hand its `bodies` to [`Run::remaining`].
    Remaining(Bound<'static>),
    /// Over: [`Run::report`].
    Done,
}

/// Where a run stands at the end of an invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    /// Nothing to continue (the 5-minute cron with no unfinished daily run).
    NoRun,
    /// The budget ran out: the cron continues it.
    Running,
    /// An operator's run whose budget ran out: `next_cursor` continues it.
    Partial,
    Done,
    Failed,
}

impl RunState {
    /// As `archive_run.state` keeps it.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::NoRun => "none",
            RunState::Running => "running",
            RunState::Partial => "partial",
            RunState::Done => "done",
            RunState::Failed => "failed",
        }
    }
}

/// What an invocation's share of a run did.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub run_id: Option<i64>,
    pub state: RunState,
    /// Bodies removed from D1 in this invocation.
    pub archived: i64,
    /// Objects written and verified in this invocation.
    pub objects: i64,
    /// Their compressed size.
    pub bytes: i64,
    /// Bodies received before the cutoff still in D1 (counted up to [`BACKLOG_CAP`]), for an
    /// operator's run.
    pub remaining: Option<i64>,
    /// Where to continue (an operator's run that ran out of budget).
    pub next_cursor: Option<String>,
    pub error: Option<String>,
    /// The run's cutoff, stored form.
    pub before: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Open,
    Select,
    Load,
    Compress,
    Write,
    Remove,
    Finish,
    Remaining,
    Done,
}

/// The chunk under way.
#[derive(Debug, Clone, Default)]
struct Chunk {
    /// The chosen candidates (the cursor passes them whatever becomes of them).
    picked: Vec<Candidate>,
    lines: Vec<Line>,
    ndjson: Option<String>,
    ndjson_sha256: String,
    gzip: Option<Vec<u8>>,
    key: String,
    gzip_sha256: String,
    gzip_len: i64,
}

/// One invocation's share of an archiving run.
#[derive(Debug, Clone)]
pub struct Run {
    start: Start,
    settings: Settings,
    phase: Phase,
    /// D1 queries and subrequests asked for so far.
    spent: u32,
    run: Option<RunRow>,
    cursor: Option<(String, String)>,
    chunk: Chunk,
    archived: i64,
    objects: i64,
    bytes: i64,
    /// The state this invocation ends the run in, once decided.
    ending: Option<RunState>,
    error: Option<String>,
    remaining: Option<i64>,
}

fn owned(b: Bound<'_>) -> Bound<'static> {
    b.into_owned()
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The chunk cut from `candidates` (oldest first): the first one's received day, at most
/// `max_lines` lines and `max_bytes` of bodies, and always at least the first.
pub fn pick(candidates: &[Candidate], max_lines: usize, max_bytes: i64) -> Vec<Candidate> {
    let Some(first) = candidates.first() else {
        return Vec::new();
    };
    let day = day_of(&first.received_at);
    let mut bytes = 0i64;
    let mut chunk = Vec::new();
    for c in candidates {
        if chunk.len() >= max_lines.max(1) || day_of(&c.received_at) != day {
            break;
        }
        if !chunk.is_empty() && bytes.saturating_add(c.bytes) > max_bytes {
            break;
        }
        bytes = bytes.saturating_add(c.bytes.max(0));
        chunk.push(c.clone());
    }
    chunk
}

/// `YYYY-MM-DD` of a stored time.
fn day_of(at: &str) -> &str {
    at.get(..10).unwrap_or(at)
}

/// The NDJSON of `lines`: one JSON object per line, each line ended by `\n`.
pub fn ndjson(lines: &[Line]) -> String {
    let mut out = String::new();
    for line in lines {
        out.push_str(&serde_json::to_string(line).expect("a line serialises"));
        out.push('\n');
    }
    out
}

/// The object's key: `deliveries/<YYYY>/<MM>/<DD>/<HHMMSSmmm>-<16 hex>.ndjson.gz`, from the
/// first line's received time (stored form, `YYYY-MM-DDTHH:MM:SS.sssZ`) and the NDJSON's
/// SHA-256.
pub fn object_key(first_received_at: &str, ndjson_sha256: &str) -> String {
    let at = first_received_at;
    let part = |r: std::ops::Range<usize>| at.get(r).unwrap_or("00");
    let time: String = at
        .get(11..)
        .unwrap_or("")
        .chars()
        .filter(char::is_ascii_digit)
        .take(9)
        .collect();
    format!(
        "deliveries/{}/{}/{}/{time:0<9}-{}.ndjson.gz",
        part(0..4),
        part(5..7),
        part(8..10),
        &ndjson_sha256[..16.min(ndjson_sha256.len())]
    )
}

/// Why an object read back is not the one written, if it is not.
pub fn verify(
    key: &str,
    read: &ReadBack,
    gzip_sha256: &str,
    lines: usize,
    ndjson_sha256: &str,
) -> Result<(), String> {
    let (bytes, text) = match read {
        ReadBack::Failed(e) => return Err(format!("{key}: {e}")),
        ReadBack::Missing => {
            return Err(format!("{key} was written but is not there when read back"))
        }
        ReadBack::Read { bytes, text } => (bytes, text),
    };
    let read_sha = sha256_hex(bytes);
    if read_sha != gzip_sha256 {
        return Err(format!(
            "{key} read back with SHA-256 {read_sha}, written {gzip_sha256}"
        ));
    }
    let text = text
        .as_ref()
        .map_err(|e| format!("{key} read back does not gunzip: {e}"))?;
    let read_lines = line_count(text);
    if read_lines != lines {
        return Err(format!(
            "{key} read back with {read_lines} lines, written {lines}"
        ));
    }
    if sha256_hex(text.as_bytes()) != ndjson_sha256 {
        return Err(format!(
            "{key} read back gunzips to another text than written"
        ));
    }
    Ok(())
}

/// Lines of an NDJSON text: its `\n`s, and a last line without one.
pub fn line_count(text: &str) -> usize {
    let n = text.matches('\n').count();
    if text.is_empty() || text.ends_with('\n') {
        n
    } else {
        n + 1
    }
}

impl Run {
    pub fn new(start: Start, settings: Settings) -> Run {
        let cursor = match &start {
            Start::Admin { after: Some(c), .. } => {
                Some((c.received_at.clone(), c.event_id.clone()))
            }
            _ => None,
        };
        Run {
            start,
            settings,
            phase: Phase::Open,
            spent: 0,
            run: None,
            cursor,
            chunk: Chunk::default(),
            archived: 0,
            objects: 0,
            bytes: 0,
            ending: None,
            error: None,
            remaining: None,
        }
    }

    /// An operator's run (`POST /admin/api/archive`), which answers what remains.
    pub fn admin(&self) -> bool {
        matches!(self.start, Start::Admin { .. })
    }

    /// What to do next; every step but `Compress` and `Done` is counted against the budget.
    #[allow(clippy::should_implement_trait)] // not an iterator: each answer changes the run
    pub fn next(&mut self) -> Step {
        let step = self.step();
        self.spent += match &step {
            Step::Compress(_) | Step::Done => 0,
            Step::Write(_) => 2,
            _ => 1,
        };
        step
    }

    fn step(&mut self) -> Step {
        match self.phase {
            Phase::Open => Step::Open(self.open_statements()),
            Phase::Select => self.select(),
            Phase::Load => {
                let ids: Vec<&str> = self
                    .chunk
                    .picked
                    .iter()
                    .map(|c| c.event_id.as_str())
                    .collect();
                Step::Load(owned(st::ARCHIVE_BODIES.bind(vec![Arg::json_list(&ids)])))
            }
            Phase::Compress => Step::Compress(self.chunk.ndjson.take().unwrap_or_default()),
            Phase::Write => Step::Write(self.object()),
            Phase::Remove => Step::Remove(self.remove_statements()),
            Phase::Finish => self.finish(),
            Phase::Remaining => {
                let before = self.run.as_ref().map_or("", |r| r.before.as_str());
                Step::Remaining(owned(
                    st::ARCHIVE_BACKLOG.bind(vec![Arg::text(before), Arg::Int(BACKLOG_CAP)]),
                ))
            }
            Phase::Done => Step::Done,
        }
    }

    /// The next chunk's candidates, or the run's end when a chunk and the closing no longer
    /// fit in what is left of the budget.
    fn select(&mut self) -> Step {
        let left = self.settings.budget.saturating_sub(self.spent);
        if left < CHUNK_COST + CLOSING_COST {
            self.ending = Some(if self.admin() {
                RunState::Partial
            } else {
                RunState::Running
            });
            self.phase = Phase::Finish;
            return self.step();
        }
        let (at, id) = self.cursor.clone().unzip();
        let before = self.run.as_ref().map_or("", |r| r.before.as_str());
        Step::Candidates(owned(st::ARCHIVE_CANDIDATES.bind(vec![
            Arg::text(before),
            Arg::opt(at.as_deref()),
            Arg::opt(id.as_deref()),
            Arg::Int(self.settings.max_lines as i64),
        ])))
    }

    /// The chunk's object: its gzip, and what a reader checks it by (lines, digests, the
    /// first and last event ids) as its metadata.
    fn object(&mut self) -> Object {
        let lines = &self.chunk.lines;
        let (first, last) = match (lines.first(), lines.last()) {
            (Some(f), Some(l)) => (f.event_id.clone(), l.event_id.clone()),
            _ => Default::default(),
        };
        Object {
            key: self.chunk.key.clone(),
            gzip: self.chunk.gzip.take().unwrap_or_default(),
            sha256: self.chunk.gzip_sha256.clone(),
            metadata: vec![
                ("lines", lines.len().to_string()),
                ("sha256", self.chunk.gzip_sha256.clone()),
                ("ndjson_sha256", self.chunk.ndjson_sha256.clone()),
                ("first", first),
                ("last", last),
            ],
        }
    }

    /// The run's row closed with how it ended; no row (it never started): done.
    fn finish(&mut self) -> Step {
        let ending = self.ending.unwrap_or(RunState::Failed);
        match &self.run {
            Some(run) => Step::Finish(owned(st::FINISH_ARCHIVE_RUN.bind(vec![
                Arg::Int(run.id),
                Arg::text(ending.as_str()),
                Arg::opt(self.error.as_deref()),
            ]))),
            None => {
                self.phase = Phase::Done;
                Step::Done
            }
        }
    }

    fn open_statements(&self) -> Vec<Bound<'static>> {
        let start = |by: &str, before: &str, after: Option<&(String, String)>| {
            owned(st::START_ARCHIVE_RUN.bind(vec![
                Arg::text(by),
                Arg::text(before),
                Arg::opt(after.map(|c| c.0.as_str())),
                Arg::opt(after.map(|c| c.1.as_str())),
            ]))
        };
        match &self.start {
            Start::Daily { before } => vec![
                owned(st::SUPERSEDE_ARCHIVE_RUNS.bind(vec![])),
                start("daily", before, None),
            ],
            Start::Continue => vec![owned(st::OPEN_ARCHIVE_RUN.bind(vec![]))],
            Start::Admin { before, .. } => vec![start("admin", before, self.cursor.as_ref())],
        }
    }

    /// The run opened (or found, for `Continue`; `None`: nothing to continue).
    pub fn opened(&mut self, run: Option<RunRow>) {
        let Some(run) = run else {
            self.ending = Some(RunState::NoRun);
            self.phase = Phase::Done;
            return;
        };
        if self.cursor.is_none() {
            self.cursor = run
                .cursor_received_at
                .clone()
                .zip(run.cursor_event_id.clone());
        }
        self.run = Some(run);
        self.phase = Phase::Select;
    }

    /// The candidates after the cursor; none: the run is done.
    pub fn candidates(&mut self, candidates: Vec<Candidate>) {
        let picked = pick(
            &candidates,
            self.settings.max_lines,
            self.settings.max_bytes,
        );
        if picked.is_empty() {
            self.ending = Some(RunState::Done);
            self.phase = Phase::Finish;
            return;
        }
        self.chunk = Chunk {
            picked,
            ..Chunk::default()
        };
        self.phase = Phase::Load;
    }

    /// The chunk's lines as loaded (any order; a candidate that changed meanwhile is not
    /// among them).
    pub fn loaded(&mut self, rows: Vec<Line>) {
        let mut lines: Vec<Line> = self
            .chunk
            .picked
            .iter()
            .filter_map(|c| rows.iter().find(|r| r.event_id == c.event_id).cloned())
            .collect();
        // one day per object, even if a row's time were not its candidate's
        if let Some(day) = lines.first().map(|l| day_of(&l.received_at).to_string()) {
            lines.retain(|l| day_of(&l.received_at) == day);
        }
        if lines.is_empty() {
            // every candidate changed since it was selected (replayed): passed
            self.pass_chunk();
            self.phase = Phase::Select;
            return;
        }
        let text = ndjson(&lines);
        self.chunk.ndjson_sha256 = sha256_hex(text.as_bytes());
        self.chunk.key = object_key(&lines[0].received_at, &self.chunk.ndjson_sha256);
        self.chunk.ndjson = Some(text);
        self.chunk.lines = lines;
        self.phase = Phase::Compress;
    }

    /// The cursor past the chunk's candidates, whatever became of them.
    fn pass_chunk(&mut self) {
        if let Some(last) = self.chunk.picked.last() {
            self.cursor = Some((last.received_at.clone(), last.event_id.clone()));
        }
    }

    /// The gzip of the NDJSON: the object is written next, or the run fails.
    pub fn compressed(&mut self, gzip: Result<Vec<u8>, String>) -> Step {
        match gzip {
            Ok(gzip) => {
                self.chunk.gzip_sha256 = sha256_hex(&gzip);
                self.chunk.gzip_len = gzip.len() as i64;
                self.chunk.gzip = Some(gzip);
                self.phase = Phase::Write;
                self.next()
            }
            Err(e) => self.fail(format!("{} could not be compressed: {e}", self.chunk.key)),
        }
    }

    /// The object as read back: verified, its bodies are removed next; else the run fails.
    pub fn read_back(&mut self, read: ReadBack) -> Step {
        let verified = verify(
            &self.chunk.key,
            &read,
            &self.chunk.gzip_sha256,
            self.chunk.lines.len(),
            &self.chunk.ndjson_sha256,
        );
        match verified {
            Ok(()) => {
                self.phase = Phase::Remove;
                self.next()
            }
            Err(why) => self.fail(why),
        }
    }

    /// DROP_BODY_ROWS, REMOVE_ARCHIVED_BODIES (at [`REMOVED_AT`]), RECORD_ARCHIVE_CHUNK.
    fn remove_statements(&self) -> Vec<Bound<'static>> {
        let lines = &self.chunk.lines;
        // {"evt_…": "<processed_at>", …}, in the lines' order
        let mut processed = String::from("{");
        for (i, l) in lines.iter().enumerate() {
            if i > 0 {
                processed.push(',');
            }
            let text = |s: &str| serde_json::to_string(s).expect("a string serialises");
            processed.push_str(&text(&l.event_id));
            processed.push(':');
            processed.push_str(&l.processed_at.as_deref().map_or("null".into(), text));
        }
        processed.push('}');
        let ids: Vec<&str> = lines.iter().map(|l| l.event_id.as_str()).collect();
        let last = self.chunk.picked.last().expect("a chunk has a line");
        let run = self.run.as_ref().map_or(0, |r| r.id);
        vec![
            owned(st::DROP_BODY_ROWS.bind(vec![Arg::Text(Cow::Owned(processed.clone()))])),
            owned(st::REMOVE_ARCHIVED_BODIES.bind(vec![
                Arg::Text(Cow::Owned(processed)),
                Arg::text(&self.chunk.key),
            ])),
            owned(st::RECORD_ARCHIVE_CHUNK.bind(vec![
                Arg::Int(run),
                Arg::text(&last.received_at),
                Arg::text(&last.event_id),
                Arg::json_list(&ids),
                Arg::text(&self.chunk.key),
                Arg::Int(self.chunk.gzip_len),
            ])),
        ]
    }

    /// The bodies removed (rows `REMOVE_ARCHIVED_BODIES` returned, the batch's statement at
    /// [`REMOVED_AT`]); the next chunk.
    pub fn removed(&mut self, removed: usize) {
        self.archived += removed as i64;
        self.objects += 1;
        self.bytes += self.chunk.gzip_len;
        self.pass_chunk();
        self.chunk = Chunk::default();
        self.phase = Phase::Select;
    }

    /// Ends the run failed, with `why`; nothing of the chunk under way is removed.
    fn fail(&mut self, why: String) -> Step {
        self.error = Some(why);
        self.ending = Some(RunState::Failed);
        self.phase = Phase::Finish;
        self.next()
    }

    /// A D1 call failed: the run ends failed (recorded, if D1 takes the finish).
    pub fn db_failed(&mut self, why: &str) -> Step {
        if matches!(self.phase, Phase::Finish | Phase::Remaining | Phase::Done)
            || self.run.is_none()
        {
            // opening or finishing failed: nothing more can be recorded
            self.error.get_or_insert_with(|| format!("D1: {why}"));
            self.ending = Some(RunState::Failed);
            self.phase = Phase::Done;
            return Step::Done;
        }
        self.fail(format!("D1: {why}"))
    }

    /// The finish was recorded.
    pub fn finished(&mut self) {
        // an operator is told what remains; the cron's run leaves that to the metrics
        self.phase = if self.admin() && self.ending != Some(RunState::Failed) {
            Phase::Remaining
        } else {
            Phase::Done
        };
    }

    /// Bodies received before the cutoff still in D1.
    pub fn remaining(&mut self, bodies: i64) {
        self.remaining = Some(bodies);
        self.phase = Phase::Done;
    }

    /// D1 queries and subrequests asked for so far.
    pub fn spent(&self) -> u32 {
        self.spent
    }

    pub fn report(&self) -> Report {
        let state = self.ending.unwrap_or(RunState::Failed);
        Report {
            run_id: self.run.as_ref().map(|r| r.id),
            state,
            archived: self.archived,
            objects: self.objects,
            bytes: self.bytes,
            remaining: self.remaining,
            next_cursor: match state {
                RunState::Partial => self
                    .cursor
                    .as_ref()
                    .map(|(at, id)| DeliveryCursor::text(at, id)),
                _ => None,
            },
            error: self.error.clone(),
            before: self.run.as_ref().map(|r| r.before.clone()),
        }
    }
}

/// Unix seconds of a time as the admin API takes it ([`crate::time::normalize_iso8601`]: a
/// date, minutes, seconds, a fraction, `Z` or `±HH:MM`), the offset applied; `None` if it is
/// not one. The Worker refuses an archive `before` still to come with it.
pub fn unix_of_time(s: &str) -> Option<i64> {
    let s = crate::time::normalize_iso8601(s)?;
    let b = s.as_bytes();
    let n = |r: std::ops::Range<usize>| s.get(r).and_then(|v| v.parse::<i64>().ok());
    let (hh, mm, ss) = if b.len() >= 16 {
        let ss = if b.get(16) == Some(&b':') {
            n(17..19)?
        } else {
            0
        };
        (n(11..13)?, n(14..16)?, ss)
    } else {
        (0, 0, 0)
    };
    let midnight = crate::time::unix_of_iso(&format!("{}T00:00:00", &s[..10]))?;
    let offset = match s.len().checked_sub(6).map(|i| (i, b[i])) {
        Some((i, b'+' | b'-')) if b.len() > 16 && b[i + 3] == b':' => {
            let sign = if b[i] == b'-' { -1 } else { 1 };
            sign * (n(i + 1..i + 3)? * 3600 + n(i + 4..i + 6)? * 60)
        }
        _ => 0,
    };
    Some(midnight + hh * 3600 + mm * 60 + ss - offset)
}

// ---------------------------------------------------------------- reading bodies back

/// The bodies of `event_ids` in an object's NDJSON text (each id once, in the order asked),
/// or which one is not there.
pub fn bodies_in(key: &str, text: &str, event_ids: &[&str]) -> Result<Vec<String>, String> {
    let mut found: Vec<Option<String>> = vec![None; event_ids.len()];
    for raw in text.lines().filter(|l| !l.trim().is_empty()) {
        let line: Line = serde_json::from_str(raw)
            .map_err(|e| format!("{key} holds a line that is not one: {e}"))?;
        if let Some(i) = event_ids.iter().position(|id| *id == line.event_id) {
            found[i] = Some(line.body);
        }
    }
    found
        .into_iter()
        .zip(event_ids)
        .map(|(body, id)| body.ok_or_else(|| format!("{id} is not in {key}")))
        .collect()
}

/// The objects a restore of `rows` (event id, archive key) reads, each once, in the order
/// of the rows.
pub fn objects_to_read(rows: &[(String, String)]) -> Vec<&str> {
    let mut keys: Vec<&str> = Vec::new();
    for (_, key) in rows {
        if !keys.contains(&key.as_str()) {
            keys.push(key);
        }
    }
    keys
}

/// The bodies of those of `rows` that object `key` holds, as `(event id, key, body)`, from
/// its text (checked with [`check_object`] and gunzipped by the driver).
pub fn bodies_of_object(
    key: &str,
    text: &str,
    rows: &[(String, String)],
) -> Result<Vec<(String, String, String)>, String> {
    let ids: Vec<&str> = rows
        .iter()
        .filter(|(_, k)| k == key)
        .map(|(id, _)| id.as_str())
        .collect();
    let bodies = bodies_in(key, text, &ids)?;
    Ok(ids
        .into_iter()
        .zip(bodies)
        .map(|(id, body)| (id.to_string(), key.to_string(), body))
        .collect())
}

/// An object read back for a restore: the SHA-256 its metadata records must be that of the
/// bytes (an object not written by this receiver, or damaged, is not restored from).
pub fn check_object(key: &str, bytes: &[u8], recorded_sha256: Option<&str>) -> Result<(), String> {
    let sha = sha256_hex(bytes);
    match recorded_sha256 {
        Some(r) if r == sha => Ok(()),
        Some(r) => Err(format!("{key} has SHA-256 {sha}, its metadata records {r}")),
        None => Err(format!("{key} records no SHA-256")),
    }
}

/// An archived row of a bulk replay's chunk (`ARCHIVED_IN_REPLAY_CHUNK`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ArchivedInChunk {
    pub event_id: String,
    pub archive_key: String,
    /// Its 1-based position in the chunk.
    #[serde(deserialize_with = "int")]
    pub pos: i64,
}

/// How much of a replay chunk of `limit` rows to reset when these of its rows are archived:
/// as many rows as come before the first whose object would be the `max_objects + 1`-th to
/// read, and at least the first row (so a replay always moves on). Returns that limit and the
/// archived rows within it.
pub fn restore_cut(
    archived: &[ArchivedInChunk],
    limit: u32,
    max_objects: usize,
) -> (u32, Vec<ArchivedInChunk>) {
    let mut keys: Vec<&str> = Vec::new();
    let mut cut = limit;
    let mut kept = Vec::new();
    for a in archived {
        if !keys.contains(&a.archive_key.as_str()) {
            if keys.len() >= max_objects.max(1) {
                cut = u32::try_from(a.pos - 1).unwrap_or(0).max(1);
                break;
            }
            keys.push(&a.archive_key);
        }
        kept.push(a.clone());
    }
    kept.retain(|a| a.pos <= i64::from(cut));
    (cut, kept)
}

#[cfg(test)]
mod tests;
