//! `paymos load`: a closed-loop load generator for benchmarks against a local receiver.
//!
//! Requests are built and signed before the clock starts; each of `concurrency` threads
//! keeps one keep-alive connection and sends back to back until the duration or the
//! request count runs out. Loopback targets only.
//!
//! `e2e` follows each invoice to its fulfilment: by polling the receiver's admin API (the
//! fulfilment recorded), or, with `--orders-url`, by polling a `paymos orders` order system's
//! `GET /received?after=N` every 10 ms from one watcher thread (the fulfilment delivered, 2xx).
//! Closed loop by default (a connection sends its next invoice once the last one's effect is
//! there: the latency at that many in flight); `--open-loop` sends them all as fast as the
//! connections go and then waits for the effects (the rate effects are delivered at).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use paymos_core::Secret;
use serde::Serialize;
use serde_json::{json, Value};

use crate::envelope::{build_envelope, EventSpec};
use crate::error::CliError;
use crate::http::{self, Admin};
use crate::stats::LatencySummary;

/// A signature stays valid 300 s; leave a margin for the slowest request.
pub const MAX_DURATION_SECONDS: u64 = 240;
/// `new` mode without `--requests` pre-signs this many events.
pub const DEFAULT_NEW_POOL: usize = 100_000;
/// `e2e` mode without `--requests` pays this many invoices.
pub const DEFAULT_E2E_INVOICES: usize = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    New,
    Duplicate,
    E2e,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::New => "new",
            Mode::Duplicate => "duplicate",
            Mode::E2e => "e2e",
        }
    }
}

pub struct LoadOptions {
    pub webhook_url: String,
    pub mode: Mode,
    pub concurrency: usize,
    pub duration: Option<u64>,
    pub requests: Option<usize>,
    pub secret: Secret,
    pub admin: Option<Admin>,
    pub effect_timeout: Duration,
    /// e2e: watch this `paymos orders` instead of the admin API.
    pub orders_url: Option<String>,
    /// e2e: do not wait for an invoice's effect before sending the next.
    pub open_loop: bool,
    /// At most this many requests per second in all (request i is sent no earlier than
    /// i / rate seconds after the start); as fast as the connections go when `None`.
    pub rate: Option<f64>,
    pub json: bool,
}

/// The run's bounds after defaults: (duration, request cap).
pub fn bounds(
    mode: Mode,
    duration: Option<u64>,
    requests: Option<usize>,
) -> Result<(Duration, usize), CliError> {
    if let Some(d) = duration {
        if d == 0 || d > MAX_DURATION_SECONDS {
            return Err(CliError::usage(format!(
                "--duration-seconds must be 1 to {MAX_DURATION_SECONDS}: pre-signed requests carry a signature timestamp that the receiver accepts for 300 s"
            )));
        }
    }
    if requests == Some(0) {
        return Err(CliError::usage("--requests must be at least 1"));
    }
    // a request count alone runs until it is done (within the signature's lifetime)
    let secs = duration.unwrap_or(if requests.is_some() {
        MAX_DURATION_SECONDS
    } else {
        10
    });
    let cap = match (mode, requests) {
        (_, Some(n)) => n,
        (Mode::New, None) => DEFAULT_NEW_POOL,
        (Mode::E2e, None) => DEFAULT_E2E_INVOICES,
        (Mode::Duplicate, None) => usize::MAX,
    };
    Ok((Duration::from_secs(secs), cap))
}

struct Prepared {
    event_id: String,
    resource_id: String,
    body: Vec<u8>,
    signature: String,
}

#[derive(Default)]
struct ThreadStats {
    latencies: Vec<f64>,
    effect_latencies: Vec<f64>,
    requests: usize,
    errors: usize,
    non_2xx: usize,
    duplicate_false: usize,
    duplicate_true: usize,
    effects_timed_out: usize,
    last_effect: Option<Instant>,
    first_error: Option<String>,
    statuses: std::collections::BTreeMap<u16, usize>,
}

#[derive(Debug, Serialize)]
pub struct LoadReport {
    pub mode: &'static str,
    pub url: String,
    pub concurrency: usize,
    /// `--rate`: the pace asked for, requests per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<f64>,
    pub duration_s: f64,
    pub requests: usize,
    pub errors: usize,
    pub non_2xx: usize,
    pub statuses: std::collections::BTreeMap<String, usize>,
    pub duplicate_false: usize,
    pub duplicate_true: usize,
    pub throughput_rps: f64,
    pub latency_ms: Option<LatencySummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effect_latency_ms: Option<LatencySummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effects_seen: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effects_timed_out: Option<usize>,
    /// e2e: where the effect was watched: `admin` (recorded) or `order_system` (delivered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effects_watched_at: Option<&'static str>,
    /// e2e: effects seen ÷ seconds from the first POST to the last effect seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effects_per_second: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
}

fn prepare(secret: &Secret, n: usize) -> Result<Vec<Prepared>, CliError> {
    let t = crate::now_unix();
    (0..n)
        .map(|_| {
            let b = build_envelope(&EventSpec {
                event_type: "invoice.paid".into(),
                ..Default::default()
            })?;
            Ok(Prepared {
                signature: b.signature(std::slice::from_ref(secret), t),
                event_id: b.event_id,
                resource_id: b.resource_id,
                body: b.body,
            })
        })
        .collect()
}

fn has_fulfilment(admin: &Admin, resource_id: &str) -> bool {
    match admin.call("GET", &format!("/resources/{resource_id}"), None) {
        Ok(r) if r.status == 200 => r
            .json()
            .and_then(|v| {
                v["effects"]
                    .as_array()
                    .map(|a| a.iter().any(|e| e["kind"] == "fulfilment"))
            })
            .unwrap_or(false),
        _ => false,
    }
}

/// Fulfilments seen at the order system: resource id → when first seen.
#[derive(Default)]
struct Seen {
    at: HashMap<String, Instant>,
    error: Option<String>,
}

/// How many effects the order system has shipped so far (its `shipped_total`), asked for
/// with a cursor past them all: the watcher starts there, so an order system that has run
/// before (another load, a long demo) is not read from its first shipment.
fn shipped_so_far(orders: &str) -> Result<usize, CliError> {
    let unreachable = |reason: String| CliError::Unreachable {
        url: format!("{orders}/received"),
        reason,
    };
    let v = received_after(&http::agent(Duration::from_secs(5)), orders, usize::MAX)
        .map_err(unreachable)?;
    v["shipped_total"]
        .as_u64()
        .map(|n| n as usize)
        .ok_or_else(|| {
            unreachable("its answer has no shipped_total: is it `paymos orders`?".into())
        })
}

/// `GET {orders}/received?after={after}`, as JSON.
fn received_after(agent: &ureq::Agent, orders: &str, after: usize) -> Result<Value, String> {
    let r = agent
        .get(&format!("{orders}/received?after={after}"))
        .call()
        .map_err(|e| e.to_string())?;
    let text = r.into_string().map_err(|e| e.to_string())?;
    serde_json::from_str(&text).map_err(|e| format!("its answer does not read as JSON: {e}"))
}

/// Polls `GET {orders}/received?after=N` every 10 ms, from `cursor` on, until `stop`; records
/// each fulfilment's resource id when it first appears and wakes the waiting connections.
fn watch_orders(
    orders: String,
    mut cursor: usize,
    seen: Arc<(Mutex<Seen>, Condvar)>,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let agent = http::agent(Duration::from_secs(5));
        let mut failures = 0;
        while !stop.load(Ordering::Relaxed) {
            match received_after(&agent, &orders, cursor) {
                Ok(v) => {
                    failures = 0;
                    let now = Instant::now();
                    let shipped = v["shipped"].as_array().cloned().unwrap_or_default();
                    cursor += shipped.len();
                    if !shipped.is_empty() {
                        let (lock, cv) = &*seen;
                        let mut s = lock.lock().unwrap();
                        for e in shipped.iter().filter(|e| e["kind"] == "fulfilment") {
                            if let Some(r) = e["resource_id"].as_str() {
                                s.at.entry(r.to_string()).or_insert(now);
                            }
                        }
                        cv.notify_all();
                    }
                }
                Err(e) => {
                    failures += 1;
                    if failures >= 50 {
                        let (lock, cv) = &*seen;
                        lock.lock().unwrap().error =
                            Some(format!("the order system at {orders} did not answer: {e}"));
                        cv.notify_all();
                        return;
                    }
                }
            }
            thread::sleep(Duration::from_millis(10));
        }
    })
}

/// Waits until the watcher has seen `resource_id` or `until` passes; when it was seen.
fn wait_seen(seen: &(Mutex<Seen>, Condvar), resource_id: &str, until: Instant) -> Option<Instant> {
    let (lock, cv) = seen;
    let mut s = lock.lock().unwrap();
    loop {
        if let Some(at) = s.at.get(resource_id) {
            return Some(*at);
        }
        let now = Instant::now();
        if now >= until || s.error.is_some() {
            return None;
        }
        s = cv.wait_timeout(s, until - now).unwrap().0;
    }
}

/// Refuses what cannot run, in this order (the first problem is the one reported); for
/// `--mode e2e` watched through the admin API, checks the admin token first. The run's
/// (duration, request cap).
fn validate(o: &LoadOptions) -> Result<(Duration, usize), CliError> {
    if o.concurrency == 0 || o.concurrency > 1024 {
        return Err(CliError::usage("--concurrency must be 1 to 1024"));
    }
    let (duration, cap) = bounds(o.mode, o.duration, o.requests)?;
    if o.mode == Mode::E2e && o.orders_url.is_none() {
        let admin = o.admin.as_ref().ok_or_else(|| CliError::usage("--mode e2e needs --admin-token (it polls the admin API for each invoice's fulfilment) or --orders-url (it polls the order system)"))?;
        admin.preflight()?;
    }
    if o.mode != Mode::E2e && (o.orders_url.is_some() || o.open_loop) {
        return Err(CliError::usage(
            "--orders-url and --open-loop go with --mode e2e",
        ));
    }
    if o.open_loop && o.orders_url.is_none() {
        return Err(CliError::usage("--open-loop needs --orders-url (one watcher, instead of polling the admin API per invoice)"));
    }
    if o.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        return Err(CliError::usage(
            "--rate must be a positive number of requests per second",
        ));
    }
    Ok((duration, cap))
}

/// Duplicate mode's priming send: once the one event is stored, every copy is a duplicate.
fn prime(url: &str, p: &Prepared) -> Result<(), CliError> {
    let r = http::post_signed(
        &http::agent(Duration::from_secs(10)),
        url,
        &p.event_id,
        &p.body,
        &p.signature,
        None,
        None,
    )?;
    if !r.is_success() {
        return Err(CliError::Failed(format!(
            "the priming delivery was answered {}: {}",
            r.status,
            http::short(&r.text)
        )));
    }
    Ok(())
}

/// The line on stderr before the clock starts (text output only).
fn announce(o: &LoadOptions, duration: Duration, cap: usize) {
    eprintln!(
        "load: mode {}, {} threads, up to {} s{} against {}",
        o.mode.as_str(),
        o.concurrency,
        duration.as_secs(),
        if cap == usize::MAX {
            String::new()
        } else {
            format!(" or {cap} requests")
        },
        o.webhook_url
    );
}

/// What every connection shares: the settings, the pre-signed requests, the next request's
/// index, the stop flag and the order-system watcher's sightings.
struct LoadRun {
    url: String,
    mode: Mode,
    admin: Option<Admin>,
    effect_timeout: Duration,
    /// e2e: effects are watched at the order system (`--orders-url`), not the admin API.
    watching: bool,
    open_loop: bool,
    rate: Option<f64>,
    pool: Vec<Prepared>,
    next: AtomicUsize,
    stop: AtomicBool,
    seen: Arc<(Mutex<Seen>, Condvar)>,
    start: Instant,
    deadline: Instant,
    cap: usize,
}

impl LoadRun {
    /// The clock starts here: the deadline is `duration` from now.
    fn new(
        o: &LoadOptions,
        pool: Vec<Prepared>,
        seen: Arc<(Mutex<Seen>, Condvar)>,
        duration: Duration,
        cap: usize,
    ) -> Self {
        let start = Instant::now();
        LoadRun {
            url: o.webhook_url.clone(),
            mode: o.mode,
            admin: o.admin.clone(),
            effect_timeout: o.effect_timeout,
            watching: o.orders_url.is_some(),
            open_loop: o.open_loop,
            rate: o.rate,
            pool,
            next: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            seen,
            start,
            deadline: start + duration,
            cap,
        }
    }

    /// The index of the next request to send, once it is due under `--rate`; `None` when the
    /// run is over (stopped, past the deadline, the cap reached, or due after the deadline).
    fn next_request(&self) -> Option<usize> {
        if self.stop.load(Ordering::Relaxed) || Instant::now() >= self.deadline {
            return None;
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        if i >= self.cap {
            return None;
        }
        if let Some(rate) = self.rate {
            let due = self.start + Duration::from_secs_f64(i as f64 / rate);
            if due >= self.deadline {
                return None;
            }
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                thread::sleep(wait);
            }
        }
        Some(i)
    }

    /// Request `i`'s pre-signed delivery (duplicate mode sends the one event every time).
    fn prepared(&self, i: usize) -> &Prepared {
        if self.mode == Mode::Duplicate {
            &self.pool[0]
        } else {
            &self.pool[i]
        }
    }
}

impl ThreadStats {
    /// Counts a reply; false when it was not a 2xx (then no effect is followed).
    fn record_reply(&mut self, r: &http::Reply, t0: Instant) -> bool {
        self.latencies.push(t0.elapsed().as_secs_f64() * 1000.0);
        *self.statuses.entry(r.status).or_default() += 1;
        if !r.is_success() {
            self.non_2xx += 1;
            self.first_error
                .get_or_insert_with(|| format!("{} {}", r.status, http::short(&r.text)));
            return false;
        }
        match r.duplicate() {
            Some(false) => self.duplicate_false += 1,
            Some(true) => self.duplicate_true += 1,
            None => {}
        }
        true
    }

    /// Counts a request that got no reply; after 100 failures and no reply at all, stops
    /// every connection instead of spinning.
    fn record_transport_error(&mut self, e: &http::TransportError, stop: &AtomicBool) {
        self.errors += 1;
        self.first_error.get_or_insert_with(|| e.to_string());
        if self.errors >= 100 && self.errors == self.requests {
            stop.store(true, Ordering::Relaxed);
        }
    }

    /// An effect seen at the order system at `seen` (its POST started at `t0`), or not within
    /// the timeout.
    fn record_sighting(&mut self, seen: Option<Instant>, t0: Instant) {
        match seen {
            Some(at) => {
                self.effect_latencies
                    .push(at.duration_since(t0).as_secs_f64() * 1000.0);
                self.last_effect = self.last_effect.max(Some(at));
            }
            None => self.effects_timed_out += 1,
        }
    }

    /// Adds another connection's counts (the first error kept is the earliest thread's).
    fn absorb(&mut self, s: ThreadStats) {
        self.latencies.extend(s.latencies);
        self.effect_latencies.extend(s.effect_latencies);
        self.requests += s.requests;
        self.errors += s.errors;
        self.non_2xx += s.non_2xx;
        self.duplicate_false += s.duplicate_false;
        self.duplicate_true += s.duplicate_true;
        self.effects_timed_out += s.effects_timed_out;
        self.last_effect = self.last_effect.max(s.last_effect);
        if self.first_error.is_none() {
            self.first_error = s.first_error;
        }
        for (k, v) in s.statuses {
            *self.statuses.entry(k).or_default() += v;
        }
    }
}

/// e2e through the admin API: polls the invoice every 20 ms until its fulfilment is recorded
/// or `timeout` passes; the POST→effect latency in ms (from `t0`) when it was.
fn poll_fulfilment(
    admin: &Admin,
    resource_id: &str,
    t0: Instant,
    timeout: Duration,
) -> Option<f64> {
    let until = Instant::now() + timeout;
    loop {
        if has_fulfilment(admin, resource_id) {
            return Some(t0.elapsed().as_secs_f64() * 1000.0);
        }
        if Instant::now() >= until {
            return None;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// e2e, after a 2xx for request `i` (POST started at `t0`): waits for its invoice's effect,
/// or, open loop, notes it in `posted` to look up once everything is sent.
fn follow_effect(
    run: &LoadRun,
    i: usize,
    t0: Instant,
    st: &mut ThreadStats,
    posted: &mut Vec<(usize, Instant)>,
) {
    let resource_id = &run.prepared(i).resource_id;
    if run.watching {
        if run.open_loop {
            posted.push((i, t0));
        } else {
            let seen = wait_seen(&run.seen, resource_id, Instant::now() + run.effect_timeout);
            st.record_sighting(seen, t0);
        }
    } else {
        let admin = run.admin.as_ref().expect("checked above");
        match poll_fulfilment(admin, resource_id, t0, run.effect_timeout) {
            Some(ms) => st.effect_latencies.push(ms),
            None => st.effects_timed_out += 1,
        }
    }
}

/// One connection: its own keep-alive agent, sending back to back until the run is over;
/// open loop, then each invoice's effect, within one timeout from when sending stopped.
fn connection(run: &LoadRun) -> ThreadStats {
    let agent = http::agent(Duration::from_secs(10));
    let mut st = ThreadStats::default();
    // open loop: (request, POST start) to look up once everything is sent
    let mut posted: Vec<(usize, Instant)> = Vec::new();
    while let Some(i) = run.next_request() {
        let p = run.prepared(i);
        let t0 = Instant::now();
        let r = http::post_signed(
            &agent,
            &run.url,
            &p.event_id,
            &p.body,
            &p.signature,
            None,
            None,
        );
        st.requests += 1;
        match r {
            Ok(r) => {
                if st.record_reply(&r, t0) && run.mode == Mode::E2e {
                    follow_effect(run, i, t0, &mut st, &mut posted);
                }
            }
            Err(e) => st.record_transport_error(&e, &run.stop),
        }
    }
    let until = Instant::now() + run.effect_timeout;
    for (i, t0) in posted {
        st.record_sighting(wait_seen(&run.seen, &run.pool[i].resource_id, until), t0);
    }
    st
}

/// e2e watched at the order system: effects seen ÷ seconds from the first POST to the last
/// effect seen, to one decimal.
fn effects_per_second(o: &LoadOptions, all: &ThreadStats, start: Instant) -> Option<f64> {
    match all.last_effect {
        Some(last)
            if o.mode == Mode::E2e
                && o.orders_url.is_some()
                && !all.effect_latencies.is_empty() =>
        {
            let secs = last.duration_since(start).as_secs_f64();
            (secs > 0.0).then(|| ((all.effect_latencies.len() as f64 / secs) * 10.0).round() / 10.0)
        }
        _ => None,
    }
}

/// The report of a finished run: `all` merged over the connections, `elapsed` seconds from
/// `start` until the last connection finished.
fn report(o: &LoadOptions, all: ThreadStats, start: Instant, elapsed: f64) -> LoadReport {
    let e2e = o.mode == Mode::E2e;
    let effects_per_second = effects_per_second(o, &all, start);
    LoadReport {
        mode: o.mode.as_str(),
        url: o.webhook_url.clone(),
        concurrency: o.concurrency,
        rate_limit: o.rate,
        duration_s: (elapsed * 1000.0).round() / 1000.0,
        requests: all.requests,
        errors: all.errors,
        non_2xx: all.non_2xx,
        statuses: all
            .statuses
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        duplicate_false: all.duplicate_false,
        duplicate_true: all.duplicate_true,
        throughput_rps: if elapsed > 0.0 {
            ((all.requests as f64 / elapsed) * 10.0).round() / 10.0
        } else {
            0.0
        },
        latency_ms: LatencySummary::from_samples(all.latencies),
        effects_seen: e2e.then_some(all.effect_latencies.len()),
        effect_latency_ms: if e2e {
            LatencySummary::from_samples(all.effect_latencies)
        } else {
            None
        },
        effects_timed_out: e2e.then_some(all.effects_timed_out),
        effects_watched_at: e2e.then_some(if o.orders_url.is_some() {
            "order_system"
        } else {
            "admin"
        }),
        effects_per_second,
        open_loop: e2e.then_some(o.open_loop),
        first_error: all.first_error,
    }
}

/// `paymos load`: validates, pre-signs, primes (duplicate mode), runs `concurrency`
/// connections, reports. Exit 0 unless every request failed.
pub fn run(o: &LoadOptions) -> Result<i32, CliError> {
    let (duration, cap) = validate(o)?;
    let seen: Arc<(Mutex<Seen>, Condvar)> = Arc::default();
    let watcher_stop = Arc::new(AtomicBool::new(false));
    let watcher = match &o.orders_url {
        Some(u) => {
            let orders = u.trim_end_matches('/').to_string();
            let cursor = shipped_so_far(&orders)?;
            Some(watch_orders(
                orders,
                cursor,
                seen.clone(),
                watcher_stop.clone(),
            ))
        }
        None => None,
    };
    let pool = match o.mode {
        Mode::New | Mode::E2e => prepare(&o.secret, cap)?,
        Mode::Duplicate => prepare(&o.secret, 1)?,
    };
    if o.mode == Mode::Duplicate {
        prime(&o.webhook_url, &pool[0])?;
    }
    if !o.json {
        announce(o, duration, cap);
    }
    let run = Arc::new(LoadRun::new(o, pool, seen.clone(), duration, cap));
    let stats = run_connections(&run, o.concurrency);
    let elapsed = run.start.elapsed().as_secs_f64();
    watcher_stop.store(true, Ordering::Relaxed);
    if let Some(w) = watcher {
        let _ = w.join();
    }
    if let Some(e) = seen.0.lock().unwrap().error.clone() {
        return Err(CliError::Failed(e));
    }
    let mut all = ThreadStats::default();
    for s in stats {
        all.absorb(s);
    }
    let report = report(o, all, run.start, elapsed);
    if o.json {
        println!("{}", serde_json::to_value(&report).unwrap_or(Value::Null));
    } else {
        print_report(&report);
    }
    if report.errors > 0 && report.errors == report.requests {
        return Err(CliError::Failed(format!(
            "every request failed: {}",
            report.first_error.clone().unwrap_or_default()
        )));
    }
    Ok(0)
}

/// `concurrency` connections, each on its own thread; their counts once all are done.
fn run_connections(run: &Arc<LoadRun>, concurrency: usize) -> Vec<ThreadStats> {
    let handles: Vec<_> = (0..concurrency)
        .map(|_| {
            let run = run.clone();
            thread::spawn(move || connection(&run))
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("load thread"))
        .collect()
}

fn fmt_summary(s: &Option<LatencySummary>) -> String {
    match s {
        Some(s) => format!(
            "p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}  (mean {:.2}, n={})",
            s.p50, s.p90, s.p99, s.max, s.mean, s.count
        ),
        None => "no samples".into(),
    }
}

fn print_report(r: &LoadReport) {
    println!(
        "{} requests in {:.2} s ({} concurrent, mode {}): {:.1} req/s",
        r.requests, r.duration_s, r.concurrency, r.mode, r.throughput_rps
    );
    println!(
        "errors {}, non-2xx {}, statuses {}, duplicate:false {}, duplicate:true {}",
        r.errors,
        r.non_2xx,
        json!(r.statuses),
        r.duplicate_false,
        r.duplicate_true
    );
    println!("POST latency ms:   {}", fmt_summary(&r.latency_ms));
    if let Some(seen) = r.effects_seen {
        println!(
            "POST→effect ms:    {} ({} fulfilments seen{}, {} timed out)",
            fmt_summary(&r.effect_latency_ms),
            seen,
            match r.effects_watched_at {
                Some("order_system") => " at the order system",
                _ => " recorded",
            },
            r.effects_timed_out.unwrap_or(0)
        );
    }
    if let Some(eps) = r.effects_per_second {
        println!("effects delivered: {eps:.1}/s (first POST to last effect seen)");
    }
    if let Some(e) = &r.first_error {
        println!("first error: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_defaults_and_caps() {
        assert_eq!(
            bounds(Mode::New, Some(5), None).unwrap(),
            (Duration::from_secs(5), DEFAULT_NEW_POOL)
        );
        assert_eq!(
            bounds(Mode::New, None, Some(50)).unwrap(),
            (Duration::from_secs(240), 50)
        );
        assert_eq!(
            bounds(Mode::Duplicate, None, None).unwrap(),
            (Duration::from_secs(10), usize::MAX)
        );
        assert_eq!(
            bounds(Mode::E2e, Some(30), None).unwrap().1,
            DEFAULT_E2E_INVOICES
        );
        assert_eq!(
            bounds(Mode::New, Some(240), Some(1)).unwrap(),
            (Duration::from_secs(240), 1)
        );
        let e = bounds(Mode::New, Some(241), None).unwrap_err();
        assert!(e.to_string().contains("300 s"), "{e}");
        assert!(bounds(Mode::New, Some(0), None).is_err());
        assert!(bounds(Mode::New, None, Some(0)).is_err());
    }

    #[test]
    fn prepared_requests_verify() {
        let secret = Secret::new("whsec_x");
        let p = prepare(&secret, 3).unwrap();
        assert_eq!(p.len(), 3);
        assert_ne!(p[0].event_id, p[1].event_id);
        let set = paymos_core::SecretSet::parse("whsec_x").unwrap();
        for r in &p {
            assert!(
                paymos_core::verify(Some(&r.signature), &r.body, &set, crate::now_unix(), 300)
                    .is_ok()
            );
            assert!(paymos_core::parse_envelope(&r.body, Some(&r.event_id)).is_ok());
        }
    }
}
