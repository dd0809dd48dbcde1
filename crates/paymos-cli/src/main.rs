//! `paymos`: send, deliver and check Paymos webhooks; a provider sandbox; a load generator.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use paymos_cli::check::{self, CheckOptions};
use paymos_cli::deliver::{self, Target};
use paymos_cli::envelope::{parse_data_arg, EventSpec};
use paymos_cli::error::CliError;
use paymos_cli::http::Admin;
use paymos_cli::load::{self, LoadOptions, Mode};
use paymos_cli::{orders, sandbox, urls, DEFAULT_SECRET};
use paymos_core::Secret;

#[derive(Parser)]
#[command(
    name = "paymos",
    version,
    about = "Send, deliver and check Paymos webhooks against a receiver",
    long_about = "Send, deliver and check Paymos webhooks against a receiver.\n\n\
        Deliveries are built and signed exactly as docs/interface.md §1 says (X-Webhook-Id, \
        X-Webhook-Signature: t=…,v1=…), with the same signer the receiver verifies with.\n\n\
        Exit codes: 0 success; 1 the thing under test failed (a non-2xx reply, a delivery \
        that was never acknowledged, a check step that did not pass); 2 the command could not \
        run (bad arguments, an unreachable URL, a refused admin token).",
    after_help = "Examples:\n  \
        paymos sandbox --port 8790 --api-key sk_test_dev_sandbox\n  \
        paymos send invoice.paid --to http://127.0.0.1:8787\n  \
        paymos deliver invoice.paid --to http://127.0.0.1:8787 --ladder --time-scale 3600\n  \
        paymos check --to http://127.0.0.1:8787 --admin-token dev-admin-token-change-me --sandbox http://127.0.0.1:8790\n  \
        paymos load --to http://127.0.0.1:8787 --mode new --concurrency 8 --duration-seconds 10\n  \
        paymos orders --port 8791 --secret whsec_ZGV2LW9yZGVyLXN5c3RlbS1zZWNyZXQ= --fail-first 2\n\n\
        (the key and the secret are .dev.vars.example's, which `npm start` serves)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build, sign and POST one event; print the status and the reply
    Send(SendArgs),
    /// Deliver one event the way Paymos does: up to 11 attempts on the retry ladder
    Deliver(DeliverArgs),
    /// Run the idempotency proof (the seed's five steps and three more) against a receiver's webhook and admin API
    Check(CheckArgs),
    /// Run a local stand-in for the Paymos invoice API (for reconciliation)
    Sandbox(SandboxArgs),
    /// Generate load against a local receiver and report throughput and latency percentiles
    Load(LoadArgs),
    /// Run a reference order system: receives effects (Standard Webhooks), drops copies, can fail on demand
    Orders(OrdersArgs),
}

#[derive(Args)]
struct EventArgs {
    /// Event type, `<category>.<action>`: invoice.paid, invoice.confirming, withdrawal.completed, deposit.confirmed, …
    #[arg(value_name = "EVENT_TYPE")]
    event_type: String,
    /// The receiver: its origin (`/webhooks/paymos` is added) or the full webhook URL
    #[arg(long, value_name = "URL")]
    to: String,
    /// Resource id in data.id (inv_…, wdr_…, pcd_…); random of the event's kind when absent
    #[arg(long, value_name = "ID")]
    resource: Option<String>,
    /// Event id (evt_…); random when absent. Reuse one (with the same --resource) to send a duplicate
    #[arg(long, value_name = "ID")]
    event_id: Option<String>,
    /// Endpoint secret to sign with (the whole string, whsec_ prefix included)
    #[arg(long, value_name = "S", env = "PAYMOS_WEBHOOK_SECRET", default_value = DEFAULT_SECRET, hide_env_values = true, hide_default_value = true)]
    secret: String,
    /// Also sign with this old secret: the header carries two v1 values, new then old
    #[arg(long, value_name = "OLD")]
    rotate_with: Option<String>,
    /// A JSON object merged into `data`, e.g. '{"amount":"12.50"}'
    #[arg(long, value_name = "JSON")]
    data: Option<String>,
    /// A `paymos sandbox` URL: an invoice.paid is first registered there as paid
    #[arg(long, value_name = "URL")]
    sandbox: Option<String>,
    /// Print one JSON document instead of text
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct SendArgs {
    #[command(flatten)]
    event: EventArgs,
}

#[derive(Args)]
struct DeliverArgs {
    #[command(flatten)]
    event: EventArgs,
    /// Retry on the contract's ladder: 11 attempts at 0, 1, 3, 7, 15, 30 min, 1, 2, 4, 8, 16 h
    #[arg(long)]
    ladder: bool,
    /// Divide the ladder's offsets and the 10 s attempt timeout by N (timeout floor 1 s); 3600 makes 16 h into 16 s
    #[arg(long, value_name = "N", default_value_t = 1.0)]
    time_scale: f64,
}

#[derive(Args)]
struct CheckArgs {
    /// The receiver's origin (its webhook is <URL>/webhooks/paymos, its admin API <URL>/admin/api)
    #[arg(long, value_name = "URL")]
    to: String,
    /// The receiver's ADMIN_TOKEN
    #[arg(
        long,
        value_name = "T",
        env = "PAYMOS_ADMIN_TOKEN",
        hide_env_values = true
    )]
    admin_token: String,
    /// An endpoint secret the receiver holds
    #[arg(long, value_name = "S", env = "PAYMOS_WEBHOOK_SECRET", default_value = DEFAULT_SECRET, hide_env_values = true, hide_default_value = true)]
    secret: String,
    /// The `paymos sandbox` the receiver reconciles against (its PAYMOS_API_BASE); without it step 5 is partial
    #[arg(long, value_name = "URL")]
    sandbox: Option<String>,
    /// The `paymos orders` the receiver delivers effects to (its ORDER_SYSTEM_URL): adds step 9, each fulfilment shipped exactly once, and step 10, nothing sent for a refund that overtook its payment and a revocation after a refunded fulfilment
    #[arg(long, value_name = "URL")]
    orders: Option<String>,
    /// Print one JSON report: {"steps":[{"step","name","pass","evidence"}],"pass"}
    #[arg(long)]
    json: bool,
    /// How long to wait for each delivery to be processed
    #[arg(long, value_name = "N", default_value_t = 30)]
    timeout_seconds: u64,
}

#[derive(Args)]
struct SandboxArgs {
    /// Port on 127.0.0.1 (0 picks a free one; the URL is printed on start)
    #[arg(long, value_name = "P", default_value_t = sandbox::DEFAULT_PORT)]
    port: u16,
    /// The bearer key GET /v1/invoices requires (the receiver's PAYMOS_API_KEY)
    #[arg(long, value_name = "K", env = "PAYMOS_SANDBOX_API_KEY", default_value = sandbox::DEFAULT_API_KEY, hide_env_values = true)]
    api_key: String,
    /// Do not log requests to stderr
    #[arg(long)]
    quiet: bool,
    /// Fault: every list call answers the first page with has_more:true, whatever
    /// starting_after says (a cursor that never moves forward); also POST /sandbox/control
    #[arg(long)]
    stuck_cursor: bool,
    /// Fault: after N list pages served, every list call answers 500 (a provider failing
    /// part-way through a walk); also POST /sandbox/control
    #[arg(long, value_name = "N")]
    fail_after_pages: Option<u64>,
}

#[derive(Args)]
struct OrdersArgs {
    /// Port on 127.0.0.1 (0 picks a free one; the URL is printed on start)
    #[arg(long, value_name = "P", default_value_t = orders::DEFAULT_PORT)]
    port: u16,
    /// The Standard Webhooks secret effects are signed with: whsec_ + base64 of the key (the receiver's ORDER_SYSTEM_SECRET)
    #[arg(
        long,
        value_name = "S",
        env = "ORDER_SYSTEM_SECRET",
        hide_env_values = true
    )]
    secret: String,
    /// Answer 500 to the first N effect requests
    #[arg(long, value_name = "N", default_value_t = 0)]
    fail_first: u64,
    /// Answer 500 to effect requests with probability F (0 to 1), drawn from --seed
    #[arg(long, value_name = "F", default_value_t = 0.0)]
    fail_rate: f64,
    /// Never answer effect requests (until POST /control {"hang":false}); they are not processed
    #[arg(long)]
    hang: bool,
    /// Seed for --fail-rate (random when absent; printed on start)
    #[arg(long, value_name = "S")]
    seed: Option<u64>,
    /// Accept webhook-timestamp within this many seconds of now
    #[arg(long, value_name = "N", default_value_t = paymos_core::standard_webhooks::DEFAULT_TOLERANCE_SECONDS)]
    tolerance_seconds: i64,
    /// Print each shipped effect as a JSON object instead of a text line
    #[arg(long)]
    json: bool,
    /// Do not log requests to stderr
    #[arg(long)]
    quiet: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    /// Unique invoice.paid events (each a new row)
    New,
    /// One event over and over after one priming send (the dedupe path)
    Duplicate,
    /// Distinct invoices, each followed to its fulfilment (recorded, admin API; or delivered, --orders-url): POST→effect latency
    E2e,
}

#[derive(Args)]
struct LoadArgs {
    /// The receiver, on a loopback address (127.0.0.1, ::1, localhost)
    #[arg(long, value_name = "URL")]
    to: String,
    /// What to send
    #[arg(long, value_enum, default_value = "new")]
    mode: ModeArg,
    /// Concurrent connections (threads, keep-alive)
    #[arg(long, value_name = "N", default_value_t = 8)]
    concurrency: usize,
    /// Stop after S seconds (at most 240: pre-signed signatures expire after 300 s); default 10, or 240 with --requests
    #[arg(long, value_name = "S")]
    duration_seconds: Option<u64>,
    /// Stop after N requests (new: pre-signs N events, default 100000; e2e: N invoices, default 100)
    #[arg(long, value_name = "N")]
    requests: Option<usize>,
    /// Endpoint secret to sign with
    #[arg(long, value_name = "S", env = "PAYMOS_WEBHOOK_SECRET", default_value = DEFAULT_SECRET, hide_env_values = true, hide_default_value = true)]
    secret: String,
    /// The receiver's ADMIN_TOKEN (required by --mode e2e)
    #[arg(
        long,
        value_name = "T",
        env = "PAYMOS_ADMIN_TOKEN",
        hide_env_values = true
    )]
    admin_token: Option<String>,
    /// e2e: how long to wait for one invoice's fulfilment
    #[arg(long, value_name = "N", default_value_t = 30)]
    effect_timeout_seconds: u64,
    /// e2e: watch this `paymos orders` (GET /received) for each fulfilment delivered, instead of the admin API
    #[arg(long, value_name = "URL")]
    orders_url: Option<String>,
    /// e2e with --orders-url: send every invoice without waiting for its effect, then wait for the effects (effects delivered per second)
    #[arg(long)]
    open_loop: bool,
    /// At most R requests per second in all (paced, open loop); default: as fast as the connections go
    #[arg(long, value_name = "R")]
    rate: Option<f64>,
    /// Print one JSON document instead of text
    #[arg(long)]
    json: bool,
}

fn secret_arg(s: &str) -> Result<Secret, CliError> {
    if s.trim().is_empty() {
        return Err(CliError::usage("the secret is empty"));
    }
    Ok(Secret::new(s.trim()))
}

fn target(e: &EventArgs) -> Result<(Target, EventSpec), CliError> {
    let to = urls::parse("--to", &e.to)?;
    let mut secrets = vec![secret_arg(&e.secret)?];
    if let Some(old) = &e.rotate_with {
        secrets.push(secret_arg(old)?);
    }
    let sandbox = optional_base("--sandbox", e.sandbox.as_deref())?;
    let spec = EventSpec {
        event_type: e.event_type.clone(),
        event_id: e.event_id.clone(),
        resource_id: e.resource.clone(),
        created: None,
        extra_data: e.data.as_deref().map(parse_data_arg).transpose()?,
        order_ref: None,
    };
    Ok((
        Target {
            url: urls::webhook_url(&to),
            secrets,
            sandbox,
            json: e.json,
        },
        spec,
    ))
}

fn run(cli: Cli) -> Result<i32, CliError> {
    match cli.command {
        Command::Send(a) => {
            let (t, spec) = target(&a.event)?;
            deliver::send(&t, &spec)
        }
        Command::Deliver(a) => {
            let (t, spec) = target(&a.event)?;
            deliver::deliver(&t, &spec, a.ladder, a.time_scale)
        }
        Command::Check(a) => run_check(a),
        Command::Sandbox(a) => run_sandbox(a),
        Command::Orders(a) => run_orders(a),
        Command::Load(a) => run_load(a),
    }
}

/// An optional URL flag (`--sandbox`, `--orders`), parsed and reduced to its base.
fn optional_base(flag: &str, value: Option<&str>) -> Result<Option<String>, CliError> {
    value
        .map(|s| urls::parse(flag, s).map(|u| urls::base(&u)))
        .transpose()
}

/// `paymos check`.
fn run_check(a: CheckArgs) -> Result<i32, CliError> {
    let to = urls::parse("--to", &a.to)?;
    let sandbox = optional_base("--sandbox", a.sandbox.as_deref())?;
    let orders = optional_base("--orders", a.orders.as_deref())?;
    if a.timeout_seconds == 0 {
        return Err(CliError::usage("--timeout-seconds must be at least 1"));
    }
    check::run(&CheckOptions {
        webhook_url: urls::webhook_url(&to),
        admin: Admin::new(urls::admin_base(&to), a.admin_token),
        secret: secret_arg(&a.secret)?,
        sandbox,
        orders,
        timeout: Duration::from_secs(a.timeout_seconds),
        json: a.json,
    })
}

/// `paymos sandbox`: serves until the process is stopped.
fn run_sandbox(a: SandboxArgs) -> Result<i32, CliError> {
    if a.api_key.trim().is_empty() {
        return Err(CliError::usage("--api-key is empty"));
    }
    let (server, url) = sandbox::bind(a.port)?;
    let faults = sandbox::Faults {
        stuck_cursor: a.stuck_cursor,
        fail_after_pages: a.fail_after_pages,
    };
    print_sandbox_banner(&url, &a.api_key, &faults);
    sandbox::serve(server, a.api_key, faults, a.quiet);
    Ok(0)
}

/// The sandbox's routes and faults on stdout, flushed (a test waits for the URL line).
fn print_sandbox_banner(url: &str, api_key: &str, faults: &sandbox::Faults) {
    println!("paymos sandbox listening on {url} (API key: {api_key})");
    println!("  GET  {url}/v1/invoices?status=paid&limit=100&starting_after=inv_…   (Authorization: Bearer <key>)");
    println!("  POST {url}/sandbox/invoices   {{\"id\":\"inv_…\",\"order_ref\":\"…\",\"paid_at\":…}} or an array   (registers paid invoices)");
    println!("  POST {url}/sandbox/control    {{\"stuck_cursor\":false,\"fail_after_pages\":null}}   (faults)");
    if faults.stuck_cursor {
        println!("  fault: stuck cursor (every page is the first, has_more:true)");
    }
    if let Some(n) = faults.fail_after_pages {
        println!("  fault: list calls answer 500 after {n} pages");
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
}

/// `--seed`, or a random one (printed on start, so a run can be replayed).
fn seed_or_random(seed: Option<u64>) -> u64 {
    seed.unwrap_or_else(|| {
        let mut b = [0u8; 8];
        getrandom::fill(&mut b).expect("the operating system's RNG is available");
        u64::from_le_bytes(b)
    })
}

/// `paymos orders`: serves until the process is stopped.
fn run_orders(a: OrdersArgs) -> Result<i32, CliError> {
    let secret = paymos_core::standard_webhooks::WebhookSecret::parse(&a.secret)
        .map_err(|e| CliError::usage(format!("--secret: {e}")))?;
    if !(0.0..=1.0).contains(&a.fail_rate) {
        return Err(CliError::usage("--fail-rate must be between 0 and 1"));
    }
    if a.tolerance_seconds < 1 {
        return Err(CliError::usage("--tolerance-seconds must be at least 1"));
    }
    let seed = seed_or_random(a.seed);
    let failures = orders::Failures {
        fail_first: a.fail_first,
        fail_rate: a.fail_rate,
        hang: a.hang,
    };
    let (server, url) = orders::bind(a.port)?;
    print_orders_banner(&url, seed, &failures);
    let system = orders::OrderSystem::new(secret, a.tolerance_seconds, failures, seed);
    orders::serve(
        std::sync::Arc::new(server),
        orders::Shared::new(system),
        orders::Output {
            json: a.json,
            quiet: a.quiet,
        },
    );
    Ok(0)
}

/// The order system's routes, seed and failure mode on stdout, flushed.
fn print_orders_banner(url: &str, seed: u64, failures: &orders::Failures) {
    println!("paymos orders listening on {url} (seed {seed})");
    println!(
        "  POST {url}/   an effect, signed the Standard Webhooks way, Idempotency-Key = its id"
    );
    println!("  GET  {url}/received   what arrived;   POST {url}/control {{\"fail_first\":N,\"fail_rate\":F,\"hang\":bool}}");
    if *failures != orders::Failures::default() {
        println!(
            "  failing: fail_first {}, fail_rate {}, hang {}",
            failures.fail_first, failures.fail_rate, failures.hang
        );
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
}

/// `paymos load`: loopback targets only.
fn run_load(a: LoadArgs) -> Result<i32, CliError> {
    let to = urls::parse("--to", &a.to)?;
    if !urls::is_loopback(&to) {
        return Err(CliError::usage(format!(
            "paymos load only targets loopback addresses (127.0.0.1, ::1, localhost), not {}: it is a benchmark tool, not a way to flood someone else's endpoint",
            to.host_str().unwrap_or("")
        )));
    }
    let mode = match a.mode {
        ModeArg::New => Mode::New,
        ModeArg::Duplicate => Mode::Duplicate,
        ModeArg::E2e => Mode::E2e,
    };
    load::run(&LoadOptions {
        webhook_url: urls::webhook_url(&to),
        mode,
        concurrency: a.concurrency,
        duration: a.duration_seconds,
        requests: a.requests,
        secret: secret_arg(&a.secret)?,
        admin: a.admin_token.map(|t| Admin::new(urls::admin_base(&to), t)),
        effect_timeout: Duration::from_secs(a.effect_timeout_seconds.max(1)),
        orders_url: a.orders_url,
        open_loop: a.open_loop,
        rate: a.rate,
        json: a.json,
    })
}

fn main() -> ExitCode {
    // Rust ignores SIGPIPE, so a write to a closed pipe (`paymos … | head`) panicked with a
    // backtrace and exit 134; with the default, the process ends quietly, as other tools do
    #[cfg(unix)]
    // SAFETY: at the start of main, before any thread: sets a signal's disposition only
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            eprintln!("paymos: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}
