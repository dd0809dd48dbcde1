//! Pure logic of the Paymos webhook receiver: ids, signatures, envelopes, state
//! machines, license codes and the sender's retry ladder. No I/O, no RNG, no
//! `worker` dependency, so everything here is testable natively.

pub mod access;
pub mod actors;
pub mod admin;
pub mod alerts;
pub mod envelope;
pub mod history;
pub mod ids;
pub mod ladder;
pub mod license;
pub mod log_line;
pub mod machine;
pub mod outbound;
pub mod receive_log;
pub mod rows;
pub mod setting;
pub mod signature;
pub mod standard_webhooks;
pub mod statements;
pub mod time;

pub use envelope::{header_value, parse_envelope, split_event_type, Envelope, EnvelopeError};
pub use ids::{is_valid_event_id, listed_after, resource_kind_of, ResourceKind};
pub use ladder::{offset_of_attempt, ATTEMPT_OFFSETS_SECONDS, ATTEMPT_TIMEOUT_SECONDS};
pub use license::license_code;
pub use machine::{
    decide, decide_event, effect_on_entry, guard, plan, state_of, states, target_state, CauseKind,
    Decision, EffectKind, EffectPlan, Existing, Guard, Outcome, State, TransitionPlan,
};
pub use signature::{
    sign, sign_text, signature_header, verify, Secret, SecretSet, SignatureError, SignatureHeader,
    VerifiedSignature, DEFAULT_TOLERANCE_SECONDS,
};
