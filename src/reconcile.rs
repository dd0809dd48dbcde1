//! Reconciliation against the provider API (contract §6): a paid invoice with no
//! `invoice.paid` on record is a subscription or firewall problem, reported and brought to
//! paid through the guard; more than one fulfilment is a key problem, reported.

use crate::error::{AppError, AppResult};
use crate::transition::{self, Change};
use crate::{config, log, sql};
use paymos_core::ResourceKind;
use serde::Deserialize;
use serde_json::{json, Value};
use worker::{Env, Fetch, Headers, Method, Request, RequestInit};

/// Stops a misbehaving API from paging forever.
const MAX_PAGES: usize = 1000;

#[derive(Deserialize)]
struct InvoicePage {
    data: Vec<ProviderInvoice>,
    #[serde(default)]
    has_more: bool,
}

#[derive(Deserialize)]
struct ProviderInvoice {
    id: String,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    amount: Option<String>,
    #[serde(default)]
    currency: Option<String>,
    #[serde(default)]
    order_ref: Option<String>,
}

async fn fetch_page(base: &str, key: &str, after: Option<&str>) -> AppResult<InvoicePage> {
    let mut url = format!(
        "{}/v1/invoices?status=paid&limit=100",
        base.trim_end_matches('/')
    );
    if let Some(a) = after {
        url.push_str("&starting_after=");
        url.push_str(a);
    }
    let headers = Headers::new();
    headers.set("Authorization", &format!("Bearer {key}"))?;
    let mut init = RequestInit::new();
    init.with_method(Method::Get).with_headers(headers);
    let provider_error = AppError::Upstream;
    let mut resp = Fetch::Request(Request::new_with_init(&url, &init)?)
        .send()
        .await
        .map_err(|e| provider_error(format!("the provider API could not be reached: {e}")))?;
    if resp.status_code() != 200 {
        return Err(provider_error(format!(
            "the provider API answered {}",
            resp.status_code()
        )));
    }
    resp.json().await.map_err(|_| {
        provider_error("the provider API answered something that is not an invoice page".into())
    })
}

pub async fn run(env: &Env) -> AppResult<Value> {
    let setting = |name: &'static str| {
        config::string(env, name).ok_or_else(|| {
            AppError::NotConfigured(
                "reconciliation_not_configured",
                format!("{name} is not set"),
            )
        })
    };
    let base = setting("PAYMOS_API_BASE")?;
    let key = setting("PAYMOS_API_KEY")?;
    let db = env.d1("DB")?;
    let mut checked = 0usize;
    let mut missing = Vec::new();
    let mut after: Option<String> = None;
    let mut pages = 0usize;
    loop {
        let page = fetch_page(&base, &key, after.as_deref()).await?;
        pages += 1;
        let invoices: Vec<&ProviderInvoice> = page
            .data
            .iter()
            .filter(|i| paymos_core::resource_kind_of(&i.id) == Some(ResourceKind::Invoice))
            .filter(|i| i.status.as_deref().is_none_or(|s| s == "paid"))
            .collect();
        checked += invoices.len();
        let ids: Vec<&str> = invoices.iter().map(|i| i.id.as_str()).collect();
        let without = sql::invoices_without_paid_delivery(&db, &ids).await?;
        for invoice in invoices.iter().filter(|i| without.contains(&i.id)) {
            let result = transition::apply(
                &db,
                &Change {
                    resource_id: &invoice.id,
                    kind: ResourceKind::Invoice,
                    to: "paid",
                    order_ref: invoice.order_ref.as_deref(),
                    amount: invoice.amount.as_deref(),
                    currency: invoice.currency.as_deref(),
                    cause_kind: "reconciliation",
                    cause: "paid at the provider, no invoice.paid delivery on record",
                    delivery: None,
                },
            )
            .await?;
            missing.push(json!({
                "id": invoice.id,
                "order_ref": invoice.order_ref,
                "brought_to_paid": result.applied != 0,
                "status": result.status,
            }));
        }
        after = page.data.last().map(|i| i.id.clone());
        if !page.has_more || after.is_none() || pages >= MAX_PAGES {
            break;
        }
    }
    let doubled = sql::doubled_effects(&db).await?;
    log::line(
        "reconcile",
        "-",
        &format!(
            "checked {checked}, missing {}, doubled {}",
            missing.len(),
            doubled.len()
        ),
        None,
    );
    Ok(json!({
        "checked": checked,
        "pages": pages,
        "missing": missing,
        "doubled": doubled,
        "ok": missing.is_empty() && doubled.is_empty(),
    }))
}
