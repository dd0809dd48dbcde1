//! The deliveries queue: its message, its binding, the one way to send to it, and the
//! incoming batch read straight from the runtime (workers-rs 0.8 does not expose a
//! message's `attempts`, which the retry backoff needs).

use paymos_core::envelope::{Envelope, Facts};
use paymos_core::statements::push_json_string;
use serde::{Deserialize, Serialize};
use wasm_bindgen::{JsCast, JsValue};
use worker::worker_sys::{Message as MessageSys, MessageBatch as MessageBatchSys};
use worker::{js_sys, Env};

/// The producer binding for new deliveries (wrangler.toml `[[queues.producers]]`).
pub const DELIVERIES: &str = "DELIVERIES";
/// The producer binding for effects to deliver to the order system (interface §7).
pub const EFFECTS: &str = "EFFECTS";

/// A producer binding (`crate::binding`: two calls into JS, not workers-rs's five).
fn binding(env: &Env, name: &str) -> worker::Result<worker::Queue> {
    crate::binding::required(env, name)
}

/// An effect to deliver: only its id; the effect is in D1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EffectMessage {
    pub effect_id: String,
}

/// Sends effect ids, `sendBatch` 100 at a time. How many were sent, and the first failure.
pub async fn enqueue_effects(env: &Env, ids: &[String]) -> (usize, Option<worker::Error>) {
    let queue = match binding(env, EFFECTS) {
        Ok(q) => q,
        Err(e) => return (0, Some(e)),
    };
    let mut sent = 0;
    for chunk in ids.chunks(100) {
        let messages: Vec<EffectMessage> = chunk
            .iter()
            .map(|id| EffectMessage {
                effect_id: id.clone(),
            })
            .collect();
        if let Err(e) = queue.send_batch(messages).await {
            return (sent, Some(e));
        }
        sent += chunk.len();
    }
    (sent, None)
}

/// Sends one effect id to be delivered in `delay_seconds`, as a fresh message: the way an
/// effect waiting for an earlier one is looked at again without spending the queue's retries
/// (which would end in the dead-letter queue however long the wait is legitimate).
pub async fn enqueue_effect_after(
    env: &Env,
    effect_id: &str,
    delay_seconds: u32,
) -> worker::Result<()> {
    let message = worker::MessageBuilder::new(EffectMessage {
        effect_id: effect_id.to_string(),
    })
    .delay_seconds(delay_seconds)
    .build();
    binding(env, EFFECTS)?.send(message).await
}

/// What travels on the queue: only the id and the replay generation it was sent for.
/// The delivery itself is in D1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryMessage {
    pub event_id: String,
    /// `webhook_delivery.generation` when the message was sent. Messages from before
    /// generations existed have none: they match any generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// The receipt's: the envelope's facts, so that the consumer loads nothing. Facts that do
    /// not read leave the message to the load, as a replay's (never unreadable for them).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "facts_or_none"
    )]
    pub facts: Option<Facts>,
}

fn facts_or_none<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Facts>, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    Ok(serde_json::from_value(value).ok())
}

impl DeliveryMessage {
    pub fn new(event_id: impl Into<String>, generation: i64) -> Self {
        DeliveryMessage {
            event_id: event_id.into(),
            generation: Some(generation),
            facts: None,
        }
    }

    /// A new delivery's message, with its envelope's facts when they fit (`Facts::of`).
    pub fn received(envelope: &Envelope) -> Self {
        DeliveryMessage {
            facts: Facts::of(envelope),
            ..DeliveryMessage::new(envelope.event_id.clone(), 0)
        }
    }

    /// The message as JSON text, as serde_json would write it (`generation` and `facts` left
    /// out when `None`), written by hand (`Facts::push_json`): serde's serializers, their
    /// field-name cache and their code were compiled on a fresh isolate's first delivery only
    /// for this (bench/README.md, "Cold start"). The consumer reads it back with serde. The
    /// receive path's JavaScript driver sends it as the wasm wrote it (`receive_check`).
    pub fn json(&self) -> String {
        let mut out = String::with_capacity(160);
        out.push_str("{\"event_id\":");
        push_json_string(&mut out, &self.event_id);
        if let Some(generation) = self.generation {
            out.push_str(",\"generation\":");
            // itoa, not `to_string`: no `core::fmt` on a new delivery's path
            out.push_str(itoa::Buffer::new().format(generation));
        }
        if let Some(facts) = &self.facts {
            out.push_str(",\"facts\":");
            facts.push_json(&mut out);
        }
        out.push('}');
        out
    }

    /// The message as the object a send takes.
    fn to_js(&self) -> worker::Result<JsValue> {
        Ok(js_sys::JSON::parse(&self.json())?)
    }
}

/// Sends one message. The row it names is already durable: a failed send is logged by the
/// caller and recovered by the sweeper.
pub async fn enqueue(env: &Env, message: DeliveryMessage) -> worker::Result<()> {
    let sent = js_sys::Promise::from(enqueue_start(env, message)?);
    worker::wasm_bindgen_futures::JsFuture::from(sent).await?;
    Ok(())
}

/// The send itself, started: the runtime's promise of it, which the receive fast path chains
/// and `enqueue` awaits. The same message and options as workers-rs's `Queue::send` (a JSON
/// body).
pub fn enqueue_start(env: &Env, message: DeliveryMessage) -> worker::Result<JsValue> {
    let queue: worker::worker_sys::Queue = crate::binding::required(env, DELIVERIES)?;
    let body = message.to_js()?;
    let options = SEND_OPTIONS.with(JsValue::clone);
    Ok(queue.send(body, options)?.into())
}

thread_local! {
    /// `{contentType: "json"}`, made once per isolate.
    static SEND_OPTIONS: JsValue = {
        let options = js_sys::Object::new();
        let _ = js_sys::Reflect::set(&options, &"contentType".into(), &"json".into());
        options.into()
    };
}

/// Sends many, `sendBatch` 100 at a time (the platform's limit). Returns how many were sent
/// before the first failure, and that failure.
pub async fn enqueue_all(
    env: &Env,
    messages: Vec<DeliveryMessage>,
) -> (usize, Option<worker::Error>) {
    let queue = match binding(env, DELIVERIES) {
        Ok(q) => q,
        Err(e) => return (0, Some(e)),
    };
    let mut sent = 0;
    for chunk in messages.chunks(100) {
        if let Err(e) = queue.send_batch(chunk.to_vec()).await {
            return (sent, Some(e));
        }
        sent += chunk.len();
    }
    (sent, None)
}

/// One message of an incoming batch.
pub struct Incoming(MessageSys);

impl Incoming {
    /// The message as a delivery message; `None` for anything else (not ours).
    pub fn delivery(&self) -> Option<DeliveryMessage> {
        self.body()
    }

    /// The message as an effect message; `None` for anything else.
    pub fn effect(&self) -> Option<EffectMessage> {
        self.body()
    }

    /// The body read through its JSON text: one `JSON.stringify` and one string into the
    /// wasm, where serde-wasm-bindgen's walk calls into JS for each key, value and type check
    /// (bench/README.md, "One call per D1 query"). A body JSON cannot hold is not ours.
    fn body<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        let body = self.0.body().ok()?;
        let text = js_sys::JSON::stringify(&body).ok()?.as_string()?;
        serde_json::from_str(&text).ok()
    }

    /// How many times the queue has delivered this message, this one included (1 the first
    /// time). Counted by the queue itself, so it keeps growing while D1 is down.
    pub fn attempts(&self) -> u32 {
        js_sys::Reflect::get(&self.0, &JsValue::from_str("attempts"))
            .ok()
            .and_then(|v| v.as_f64())
            .filter(|n| n.is_finite() && *n >= 1.0)
            .map_or(1, |n| n.min(f64::from(u32::MAX)) as u32)
    }

    pub fn ack(&self) {
        let _ = self.0.ack();
    }

    pub fn retry_in(&self, delay_seconds: u32) {
        let options = js_sys::Object::new();
        let _ = js_sys::Reflect::set(
            &options,
            &JsValue::from_str("delaySeconds"),
            &JsValue::from_f64(f64::from(delay_seconds)),
        );
        let _ = self.0.retry(options.into());
    }
}

/// The queue a batch came from, and its messages.
pub fn read_batch(batch: &MessageBatchSys) -> (String, Vec<Incoming>) {
    let queue = batch.queue().map(String::from).unwrap_or_default();
    let messages = batch
        .messages()
        .map(|array| {
            array
                .iter()
                .map(|m| Incoming(m.unchecked_into::<MessageSys>()))
                .collect()
        })
        .unwrap_or_default();
    (queue, messages)
}
