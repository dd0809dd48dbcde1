//! Resources as the admin API reads them: the row, its effects, its history.

use super::Statement;

statement!(
    LOAD_RESOURCE,
    ["id"],
    "SELECT id, kind, status, order_ref, amount, currency, created_at, updated_at \
     FROM resource WHERE id = ?1"
);

statement!(
    LOAD_EFFECTS,
    ["resource_id"],
    "SELECT ",
    effect_columns!(),
    " FROM effect e WHERE e.resource_id = ?1 ORDER BY e.id"
);

statement!(
    LOAD_HISTORY,
    ["resource_id"],
    "SELECT to_status AS state, from_status AS \"from\", cause_kind, cause, at, actor \
     FROM resource_transition WHERE resource_id = ?1 ORDER BY id"
);
