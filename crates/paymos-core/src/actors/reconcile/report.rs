//! A run's report as the operator (`GET`/`POST /admin/api/reconcile`), the metrics and the
//! cron's log line read it (interface §6): the contract's `{checked, pages, missing, doubled,
//! truncated, ok}` and where the run stands. The Worker reads the rows (`RECONCILIATION_TOTALS`,
//! `RECONCILIATION_FINDINGS`, `DOUBLED_EFFECTS`); what they add up to is here.

use serde::{Deserialize, Serialize};

use super::RunRow;
use crate::rows::{flag, int};

/// A run's counts (`RECONCILIATION_TOTALS`): `findings` counts every `missing` finding, however
/// many a report lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct Totals {
    #[serde(deserialize_with = "int")]
    pub checked: i64,
    #[serde(deserialize_with = "int")]
    pub pages: i64,
    #[serde(deserialize_with = "int")]
    pub findings: i64,
}

/// A paid invoice with no `invoice.paid` on record (`RECONCILIATION_FINDINGS`), and whether
/// the run brought it to paid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Missing {
    #[serde(rename(deserialize = "invoice_id"))]
    pub id: String,
    pub order_ref: Option<String>,
    #[serde(deserialize_with = "flag")]
    pub brought_to_paid: bool,
    pub status: Option<String>,
}

/// Two effects of one kind for one resource (`DOUBLED_EFFECTS`): impossible by construction,
/// looked for anyway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Doubled {
    pub resource_id: String,
    pub kind: String,
    #[serde(deserialize_with = "int")]
    pub count: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub run_id: i64,
    pub full: bool,
    pub paid_since: Option<i64>,
    pub checked: i64,
    pub pages: i64,
    /// the first findings (all of them for an operator's run)
    pub missing: Vec<Missing>,
    pub missing_count: i64,
    pub doubled: Vec<Doubled>,
    /// the run did not walk to the end (yet, or at all)
    pub truncated: bool,
    /// an unfinished run goes on in the next cron invocation (every 5 minutes)
    pub continues: bool,
    /// `running`, `done`, `truncated`, `failed` or `superseded`
    pub state: String,
    pub error: Option<String>,
    /// walked to the end with nothing missing and nothing doubled
    pub ok: bool,
}

impl Report {
    pub fn new(
        run: &RunRow,
        state: &str,
        error: Option<&str>,
        totals: Totals,
        missing: Vec<Missing>,
        doubled: Vec<Doubled>,
    ) -> Report {
        let truncated = state != "done";
        Report {
            run_id: run.id,
            full: run.full_walk != 0,
            paid_since: run.paid_since,
            checked: totals.checked,
            pages: totals.pages,
            ok: !truncated && totals.findings == 0 && doubled.is_empty(),
            missing,
            missing_count: totals.findings,
            doubled,
            truncated,
            continues: state == "running",
            state: state.to_string(),
            error: error.map(str::to_string),
        }
    }

    /// The cron's log line.
    pub fn summary(&self) -> String {
        format!(
            "run {} {}: checked {}, pages {}, missing {}, doubled {}",
            self.run_id,
            self.state,
            self.checked,
            self.pages,
            self.missing_count,
            self.doubled.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run() -> RunRow {
        RunRow {
            id: 7,
            full_walk: 0,
            paid_since: Some(1_700_000_000),
            cursor: None,
            pages: 3,
        }
    }

    fn totals(findings: i64) -> Totals {
        Totals {
            checked: 250,
            pages: 3,
            findings,
        }
    }

    #[test]
    fn ok_only_when_walked_to_the_end_with_nothing_missing_or_doubled() {
        let doubled = Doubled {
            resource_id: "in_1".into(),
            kind: "fulfilment".into(),
            count: 2,
        };
        assert!(Report::new(&run(), "done", None, totals(0), vec![], vec![]).ok);
        for state in ["running", "truncated", "failed", "superseded"] {
            let r = Report::new(&run(), state, None, totals(0), vec![], vec![]);
            assert!(!r.ok && r.truncated, "{state}");
            assert_eq!(r.continues, state == "running", "{state}");
        }
        // a finding counted but not listed (the metrics list the first 100) still counts
        assert!(!Report::new(&run(), "done", None, totals(1), vec![], vec![]).ok);
        assert!(!Report::new(&run(), "done", None, totals(0), vec![], vec![doubled]).ok);
    }

    #[test]
    fn reads_the_rows_and_writes_the_contract_s_fields() {
        let missing: Missing = serde_json::from_value(json!({
            "finding": "missing", "invoice_id": "in_9", "order_ref": null,
            "brought_to_paid": 1, "status": "applied", "event_id": null, "outcome": null
        }))
        .unwrap();
        let totals: Totals =
            serde_json::from_value(json!({"checked": 250.0, "pages": 3, "findings": 1})).unwrap();
        let r = Report::new(&run(), "done", None, totals, vec![missing], vec![]);
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({
                "run_id": 7, "full": false, "paid_since": 1_700_000_000, "checked": 250,
                "pages": 3, "missing_count": 1, "doubled": [], "truncated": false,
                "continues": false, "state": "done", "error": null, "ok": false,
                "missing": [{"id": "in_9", "order_ref": null, "brought_to_paid": true,
                             "status": "applied"}]
            })
        );
        assert_eq!(
            r.summary(),
            "run 7 done: checked 250, pages 3, missing 1, doubled 0"
        );
    }
}
