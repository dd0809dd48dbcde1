//! The consumer's driver, written once: the loop that walks a [`Batch`] through its steps over
//! whatever I/O it is given. The Worker gives it D1 (`src/consume.rs`); the simulator gives it
//! SQLite, one call per scheduler step, and checks each transition inside the transaction.
//! A batch that fails comes back as [`Driven::Split`]: each driver then runs its messages as
//! batches of their own (the Worker in turn, the simulator as separate consumers).

use super::{Answered, Batch, Message, Step};
use crate::rows::ConsumeRow;
use crate::statements::Bound;

/// What the consumer's driver does to the world. A failed call's error is the reason the
/// batch records, as the driver words it (`database_unavailable: …`, [`database_unavailable`]).
#[allow(async_fn_in_trait)]
pub trait Io {
    /// 16 random bytes (a transition's token and license code).
    fn draw(&mut self) -> [u8; 16];
    /// `LOAD_DELIVERIES`: the batch's rows.
    async fn load(&mut self, b: Bound<'static>) -> Result<Vec<ConsumeRow>, String>;
    /// The batch's statements as one transaction: each statement's rows. `batch` tells which
    /// statements are whose ([`Batch::items`]; the simulator checks each transition by it).
    async fn apply(
        &mut self,
        statements: Vec<Bound<'static>>,
        batch: &Batch,
    ) -> Result<Vec<Vec<serde_json::Value>>, String>;
    /// A failure on the delivery's row, best effort (D1 may be what is failing).
    async fn record_failure(&mut self, b: Bound<'static>);
}

/// A D1 call's failure as a batch records it.
pub fn database_unavailable(e: impl std::fmt::Display) -> String {
    format!("database_unavailable: {e}")
}

/// How a batch ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Driven {
    /// Answer the messages (acks, retries, lines; the released effects to send).
    Answered(Answered),
    /// The batch failed: run each message as a batch of its own.
    Split(Vec<Message>, String),
}

/// Walks one batch through its steps.
pub async fn drive<I: Io>(batch: &mut Batch, io: &mut I) -> Driven {
    loop {
        match batch.step() {
            Step::Load(b) => match io.load(b).await {
                Ok(rows) => batch.loaded(rows, &mut || io.draw()),
                Err(why) => batch.failed(why),
            },
            Step::Decide => batch.loaded(Vec::new(), &mut || io.draw()),
            Step::Apply(statements) => match io.apply(statements, batch).await {
                Ok(rows) => batch.applied(rows),
                Err(why) => batch.failed(why),
            },
            Step::Split(messages, why) => return Driven::Split(messages, why),
            Step::RecordFailure(b) => io.record_failure(b).await,
            Step::Answer(answered) => return Driven::Answered(answered),
            Step::Done => return Driven::Answered(Answered::default()),
        }
    }
}
