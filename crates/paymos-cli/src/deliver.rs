//! `paymos send` (one signed POST) and `paymos deliver` (the provider's retry ladder).

use std::io::IsTerminal;
use std::thread;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use paymos_core::Secret;
use serde_json::{json, Value};

use crate::envelope::{build_envelope, Built, EventSpec};
use crate::error::CliError;
use crate::http::{self, Reply};
use crate::ladder::{self, human};

/// Everything `send` and `deliver` share.
pub struct Target {
    /// The delivery URL (with `/webhooks/paymos` added when the given URL had no path).
    pub url: String,
    pub secrets: Vec<Secret>,
    /// The sandbox's base URL, to register a paid invoice with.
    pub sandbox: Option<String>,
    pub json: bool,
}

/// Registers `built`'s invoice as paid with the sandbox (for `invoice.paid`/`invoice.overpaid`).
pub fn register_with_sandbox(sandbox: &str, built: &Built) -> Result<Option<Value>, CliError> {
    if !matches!(
        built.event_type.as_str(),
        "invoice.paid" | "invoice.overpaid"
    ) {
        return Ok(None);
    }
    let v = built.value();
    let invoice = json!({
        "id": built.resource_id,
        "status": "paid",
        "amount": v["data"]["amount"],
        "currency": v["data"]["currency"],
        "order_ref": v["data"]["order_ref"],
        "paid_at": built.created,
    });
    register_invoice(sandbox, &invoice).map(Some)
}

/// `POST <sandbox>/sandbox/invoices`.
pub fn register_invoice(sandbox: &str, invoice: &Value) -> Result<Value, CliError> {
    let url = format!("{sandbox}/sandbox/invoices");
    let started = Instant::now();
    let r = http::agent(http::API_TIMEOUT)
        .post(&url)
        .set("Content-Type", "application/json")
        .send_string(&invoice.to_string());
    let reply = match r {
        Ok(resp) | Err(ureq::Error::Status(_, resp)) => Reply {
            status: resp.status(),
            text: resp.into_string().unwrap_or_default(),
            elapsed: started.elapsed(),
        },
        Err(ureq::Error::Transport(t)) => return Err(http::transport_error(&url, &t).into()),
    };
    if !reply.is_success() {
        return Err(CliError::Failed(format!(
            "the sandbox refused the invoice ({}): {}",
            reply.status,
            http::short(&reply.text)
        )));
    }
    Ok(reply.body_value())
}

fn secrets_note(n: usize) -> &'static str {
    if n > 1 {
        "signed with the new and the old secret (rotation)"
    } else {
        "signed"
    }
}

/// `paymos send`: one POST, exit 0 on 2xx and 1 otherwise; unreachable is an error (exit 2).
pub fn send(t: &Target, spec: &EventSpec) -> Result<i32, CliError> {
    let built = build_envelope(spec)?;
    let sandbox = match &t.sandbox {
        Some(s) => register_with_sandbox(s, &built)?,
        None => None,
    };
    let agent = http::agent(Duration::from_secs(paymos_core::ATTEMPT_TIMEOUT_SECONDS));
    let reply = http::post_delivery(&agent, &t.url, &built, &t.secrets, None, None)?;
    if t.json {
        let out = json!({
            "url": t.url,
            "event_id": built.event_id,
            "event_type": built.event_type,
            "resource_id": built.resource_id,
            "status": reply.status,
            "duplicate": reply.duplicate(),
            "reply": reply.body_value(),
            "elapsed_ms": ms(reply.elapsed),
            "sandbox": sandbox,
        });
        println!("{out}");
    } else {
        println!("POST {}", t.url);
        println!(
            "  {} {} ({}), {}",
            built.event_type,
            built.event_id,
            built.resource_id,
            secrets_note(t.secrets.len())
        );
        if sandbox.is_some() {
            println!(
                "  registered {} as paid with the sandbox",
                built.resource_id
            );
        }
        println!(
            "{} in {} ms: {}",
            reply.status,
            ms(reply.elapsed),
            http::short(&reply.text)
        );
    }
    Ok(if reply.is_success() { 0 } else { 1 })
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e4).round() / 10.0
}

/// One attempt's record.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub n: u32,
    pub offset: Duration,
    pub outcome: Result<Reply, http::TransportError>,
}

impl Attempt {
    fn delivered(&self) -> bool {
        self.outcome.as_ref().is_ok_and(Reply::is_success)
    }

    fn to_json(&self) -> Value {
        match &self.outcome {
            Ok(r) => json!({
                "attempt": self.n,
                "at_ms": ms(self.offset),
                "status": r.status,
                "reply": r.body_value(),
                "elapsed_ms": ms(r.elapsed),
                "error": null,
            }),
            Err(e) => json!({
                "attempt": self.n,
                "at_ms": ms(self.offset),
                "status": null,
                "error": if e.timed_out { "timeout".to_string() } else { e.reason.clone() },
                "detail": e.to_string(),
            }),
        }
    }

    fn line(&self, of: usize, timeout: Duration) -> String {
        let head = format!(
            "attempt {}/{} at +{}:",
            self.n,
            of,
            human_elapsed(self.offset)
        );
        match &self.outcome {
            Ok(r) => format!(
                "{head} {} in {} ms {}",
                r.status,
                ms(r.elapsed),
                http::short(&r.text)
            ),
            Err(e) if e.timed_out => format!("{head} timeout (no reply within {})", human(timeout)),
            Err(e) => format!("{head} error: {e}"),
        }
    }
}

fn human_elapsed(d: Duration) -> String {
    if d < Duration::from_secs(60) {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        let s = d.as_secs();
        format!("{}h{:02}m{:02}s", s / 3600, (s / 60) % 60, s % 60)
    }
}

fn waiting_bar(show: bool, wait: Duration, next: u32, of: usize) -> ProgressBar {
    let target = if show {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let pb = ProgressBar::with_draw_target(Some(wait.as_millis().max(1) as u64), target);
    pb.set_style(
        ProgressStyle::with_template("  {msg} [{bar:30.cyan/blue}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb.set_message(format!("attempt {next}/{of} in {:.1}s", wait.as_secs_f64()));
    pb
}

/// `paymos deliver`: the ladder (or one attempt), same id and bytes, re-signed each time.
/// Exit 0 once delivered, 1 after the last failure.
pub fn deliver(
    t: &Target,
    spec: &EventSpec,
    use_ladder: bool,
    scale: f64,
) -> Result<i32, CliError> {
    let scale = ladder::validate_scale(scale)?;
    let built = build_envelope(spec)?;
    if let Some(s) = &t.sandbox {
        register_with_sandbox(s, &built)?;
    }
    let d = Delivery {
        t,
        schedule: ladder::schedule(scale, use_ladder),
        built,
        use_ladder,
        scale,
    };
    if !t.json {
        d.announce();
    }
    let agent = http::agent(d.schedule.timeout);
    let start = Instant::now();
    let attempts = d.attempts(&agent, start);
    let delivered = attempts.last().is_some_and(Attempt::delivered);
    if t.json {
        d.print_json(&attempts, start);
    } else {
        print_outcome(&attempts, delivered, start);
    }
    Ok(if delivered { 0 } else { 1 })
}

/// One `paymos deliver`: the event and the ladder it is delivered on.
struct Delivery<'a> {
    t: &'a Target,
    built: Built,
    schedule: ladder::Schedule,
    use_ladder: bool,
    scale: f64,
}

impl Delivery<'_> {
    /// What is sent where, and on which ladder (text output).
    fn announce(&self) {
        let (t, built) = (self.t, &self.built);
        println!("POST {}", t.url);
        println!(
            "  {} {} ({}), {}; {}",
            built.event_type,
            built.event_id,
            built.resource_id,
            secrets_note(t.secrets.len()),
            self.ladder_note()
        );
    }

    /// `up to 11 attempts at 0s, 1m, … (time scale N), 10s timeout each`, or one attempt.
    fn ladder_note(&self) -> String {
        let s = &self.schedule;
        if self.use_ladder {
            format!(
                "up to {} attempts at {} (time scale {}), {} timeout each",
                s.offsets.len(),
                s.offsets
                    .iter()
                    .map(|d| human(*d))
                    .collect::<Vec<_>>()
                    .join(", "),
                self.scale,
                human(s.timeout)
            )
        } else {
            format!("one attempt, {} timeout", human(s.timeout))
        }
    }

    /// Each attempt at its offset from `start`, until one is answered 2xx or the ladder runs
    /// out; each one's line is printed as it ends (text output).
    fn attempts(&self, agent: &ureq::Agent, start: Instant) -> Vec<Attempt> {
        let of = self.schedule.offsets.len();
        let show_bar = !self.t.json && std::io::stderr().is_terminal();
        let mut attempts: Vec<Attempt> = Vec::new();
        for (i, offset) in self.schedule.offsets.iter().enumerate() {
            let n = i as u32 + 1;
            wait_for_attempt(start, *offset, show_bar, n, of);
            let at = start.elapsed();
            let outcome = http::post_delivery(
                agent,
                &self.t.url,
                &self.built,
                &self.t.secrets,
                Some(n),
                Some(self.schedule.timeout),
            );
            let a = Attempt {
                n,
                offset: at,
                outcome,
            };
            if !self.t.json {
                println!("{}", a.line(of, self.schedule.timeout));
            }
            let done = a.delivered();
            attempts.push(a);
            if done {
                break;
            }
        }
        attempts
    }

    /// The whole delivery as one JSON document.
    fn print_json(&self, attempts: &[Attempt], start: Instant) {
        let (t, built) = (self.t, &self.built);
        let delivered = attempts.last().is_some_and(Attempt::delivered);
        println!(
            "{}",
            json!({
                "url": t.url,
                "event_id": built.event_id,
                "event_type": built.event_type,
                "resource_id": built.resource_id,
                "ladder": self.use_ladder,
                "time_scale": self.scale,
                "timeout_ms": ms(self.schedule.timeout),
                "attempts": attempts.iter().map(Attempt::to_json).collect::<Vec<_>>(),
                "result": if delivered { "delivered" } else { "failed" },
                "delivered_on_attempt": if delivered { attempts.last().map(|a| a.n) } else { None },
                "elapsed_ms": ms(start.elapsed()),
            })
        );
    }
}

/// Sleeps until attempt `n` of `of` is due, `offset` after `start`, with a progress bar on
/// stderr when `show_bar` (a terminal, text output).
fn wait_for_attempt(start: Instant, offset: Duration, show_bar: bool, n: u32, of: usize) {
    let now = start.elapsed();
    if offset <= now {
        return;
    }
    let wait = offset - now;
    let pb = waiting_bar(show_bar, wait, n, of);
    let until = Instant::now() + wait;
    while Instant::now() < until {
        let left = until - Instant::now();
        thread::sleep(left.min(Duration::from_millis(100)));
        let left = until.saturating_duration_since(Instant::now());
        pb.set_position((wait - left).as_millis() as u64);
        pb.set_message(format!("attempt {n}/{of} in {:.1}s", left.as_secs_f64()));
    }
    pb.finish_and_clear();
}

/// The closing line (text output): delivered on which attempt, or failed after how many.
fn print_outcome(attempts: &[Attempt], delivered: bool, start: Instant) {
    if delivered {
        println!(
            "delivered on attempt {} after {}",
            attempts.len(),
            human_elapsed(start.elapsed())
        );
    } else {
        println!(
            "failed: {} attempt{} without a 2xx over {}; the provider would mark the event failed (replayable by hand)",
            attempts.len(),
            if attempts.len() == 1 { "" } else { "s" },
            human_elapsed(start.elapsed())
        );
    }
}
