//! Rows as the shared statements return them, typed once for both drivers: the Worker reads
//! D1's results into them, the simulator reads SQLite's (through `serde_json`). The actors'
//! step functions (`crate::actors`) take these, never a driver's own row type.

use serde::de::Visitor;
use serde::{Deserialize, Deserializer, Serialize};

/// SQLite has no boolean: a `0`/`1` column (D1 gives a JS number, SQLite an integer, JSON may
/// give either or `true`/`false`).
pub fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(match d.deserialize_any(Column)? {
        None => false,
        Some(Cell::Bool(b)) => b,
        Some(Cell::Int(i)) => i != 0,
        Some(Cell::Float(f)) => f != 0.0,
    })
}

/// An integer column that D1 may hand over as a float (a JS number).
pub fn int<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    Ok(opt_int(d)?.unwrap_or(0))
}

/// An optional integer column, as [`int`].
pub fn opt_int<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    Ok(match d.deserialize_any(Column)? {
        None => None,
        Some(Cell::Int(i)) => Some(i),
        Some(Cell::Float(f)) => Some(f as i64),
        Some(Cell::Bool(_)) => return Err(serde::de::Error::custom("expected a number or null")),
    })
}

/// A numeric or boolean column's value, `None` for null.
enum Cell {
    Bool(bool),
    Int(i64),
    Float(f64),
}

/// Reads a [`Cell`] by the value's own type, in one pass. (An untagged enum would try each
/// type in turn, building an error for each that fails: a row's flags cost more than its
/// strings so.)
struct Column;

impl<'de> Visitor<'de> for Column {
    type Value = Option<Cell>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a number, a boolean or null")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
        Ok(Some(Cell::Bool(b)))
    }

    fn visit_i64<E>(self, i: i64) -> Result<Self::Value, E> {
        Ok(Some(Cell::Int(i)))
    }

    fn visit_u64<E>(self, u: u64) -> Result<Self::Value, E> {
        Ok(Some(
            i64::try_from(u).map_or(Cell::Float(u as f64), Cell::Int),
        ))
    }

    fn visit_f64<E>(self, f: f64) -> Result<Self::Value, E> {
        Ok(Some(Cell::Float(f)))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(Column)
    }
}

/// A delivery as the archive shows it (`delivery_columns!`, and the body where loaded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryRow {
    pub event_id: String,
    pub resource_id: String,
    pub event_type: String,
    pub received_at: String,
    pub processed_at: Option<String>,
    pub outcome: Option<String>,
    /// Failed consumer attempts recorded in this generation (D1 reachable to record them).
    #[serde(deserialize_with = "int")]
    pub attempts: i64,
    pub last_error: Option<String>,
    pub enqueued_at: Option<String>,
    #[serde(deserialize_with = "int")]
    pub replays: i64,
    /// Why it ended as it did when the outcome alone does not say (e.g. `livemode_mismatch`).
    pub reason: Option<String>,
    #[serde(deserialize_with = "int")]
    pub generation: i64,
    /// A dead delivery an operator has handled (interface §5): out of the dead counts and
    /// alerts, still replayable; a replay clears it.
    #[serde(default)]
    pub dismissed_at: Option<String>,
    #[serde(default)]
    pub dismiss_reason: Option<String>,
    /// When its body left D1 for the archive (interface §10), and the object holding it.
    #[serde(default)]
    pub archived_at: Option<String>,
    #[serde(default)]
    pub archive_key: Option<String>,
    /// The raw body; `None` where not loaded, or once archived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

/// A delivery as the consumer decides from it (`LOAD_DELIVERIES`): whether it was processed,
/// and its body. Three columns, not the archive's seventeen: every column of a loaded row is
/// written into JSON by `d1.js` and read back in the wasm, for every delivery.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ConsumeRow {
    pub event_id: String,
    pub processed_at: Option<String>,
    /// The raw body; `None` once archived.
    #[serde(default)]
    pub body: Option<String>,
}

/// An effect and its place in the outbox (`effect_columns!`: the admin API, the feed, the
/// dispatcher).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectRow {
    /// The feed's position (the row's sequence number), the cursor of `GET /admin/api/effects`.
    #[serde(skip_serializing, deserialize_with = "int")]
    pub seq: i64,
    /// `eff_…`, stable on every attempt and redelivery.
    pub id: String,
    pub kind: String,
    pub resource_id: String,
    pub created_at: String,
    pub license_code: Option<String>,
    pub order_ref: Option<String>,
    pub amount: Option<String>,
    pub currency: Option<String>,
    pub cause: String,
    /// `pending`, `delivered`, `dead` or `cancelled`.
    pub dispatch: String,
    /// Requests started to the order system (each committed before it starts), in all: never
    /// reset, so a refund knows whether the order system may hold the effect.
    #[serde(deserialize_with = "int")]
    pub attempts: i64,
    /// Attempts on the current retry ladder (an operator's redelivery starts a fresh one).
    #[serde(default, deserialize_with = "int")]
    pub rung: i64,
    pub next_attempt_at: Option<String>,
    pub last_error: Option<String>,
    pub delivered_at: Option<String>,
    /// When the first attempt started: the ladder's 16 hours count from it.
    #[serde(default)]
    pub first_attempt_at: Option<String>,
    /// When the attempt in flight started (NULL once its outcome is recorded): it may still
    /// reach the order system until the timeout after it.
    #[serde(default)]
    pub attempt_started_at: Option<String>,
    /// When it went dead (NULL unless dead).
    #[serde(default)]
    pub dead_at: Option<String>,
    /// A dead effect an operator has handled (interface §5); a redelivery clears it.
    #[serde(default)]
    pub dismissed_at: Option<String>,
    #[serde(default)]
    pub dismiss_reason: Option<String>,
    /// When an order system that pulls the feed acknowledged it (`POST /effects/{id}/ack`).
    #[serde(default)]
    pub acknowledged_at: Option<String>,
    /// A fulfilment made before its order_ref was known: not sent until it is.
    #[serde(deserialize_with = "flag")]
    pub awaiting_order_ref: bool,
}

/// An effect as the dispatcher loads it (`LOAD_EFFECTS_FOR_DISPATCH`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DispatchRow {
    #[serde(flatten)]
    pub effect: EffectRow,
    /// Earlier effects of the same resource neither delivered nor cancelled (a revocation is
    /// not sent before the fulfilment it revokes is settled).
    #[serde(deserialize_with = "int")]
    pub earlier_undelivered: i64,
    /// The last attempt started for an earlier, cancelled effect of the resource: it may be
    /// in flight until the timeout has passed (a fulfilment attempted just before its refund).
    #[serde(default)]
    pub earlier_attempt_started_at: Option<String>,
}

/// What `START_ATTEMPTS` returns for an effect whose attempt it committed.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StartedAttempt {
    pub effect_id: String,
    /// Attempts started, this one included.
    #[serde(deserialize_with = "int")]
    pub attempts: i64,
    /// This attempt's rung on the current ladder.
    #[serde(deserialize_with = "int")]
    pub rung: i64,
    /// When the current ladder's first attempt started.
    pub first_attempt_at: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flags_and_integers_read_from_either_driver() {
        #[derive(Deserialize)]
        struct R {
            #[serde(deserialize_with = "flag")]
            f: bool,
            #[serde(deserialize_with = "int")]
            n: i64,
            #[serde(default, deserialize_with = "opt_int")]
            o: Option<i64>,
        }
        for (v, f, n, o) in [
            (json!({"f": 1, "n": 3, "o": null}), true, 3, None),
            (json!({"f": 0.0, "n": 3.0, "o": 2.0}), false, 3, Some(2)),
            (json!({"f": true, "n": -1}), true, -1, None),
            (json!({"f": null, "n": 0}), false, 0, None),
        ] {
            let r: R = serde_json::from_value(v).unwrap();
            assert_eq!((r.f, r.n, r.o), (f, n, o));
        }
        assert!(serde_json::from_value::<R>(json!({"f": "yes", "n": 1})).is_err());
        assert!(serde_json::from_value::<R>(json!({"f": 1, "n": true})).is_err());
        assert!(serde_json::from_value::<R>(json!({"f": 1, "n": "3"})).is_err());
        // from text too (the Worker's rows arrive as JSON text), and past i64 as a float would
        let r: R =
            serde_json::from_str(r#"{"f": 18446744073709551615, "n": 18446744073709551615}"#)
                .unwrap();
        assert_eq!((r.f, r.n, r.o), (true, i64::MAX, None));
    }
}
