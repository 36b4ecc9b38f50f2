//! The task-local idempotency claim of one request (issue #10 finding 8) and the
//! `idempotency` table's rows: what `Db::write` consults to store a request's answer in the
//! transaction of its work. How the pieces meet is told in `idempotency.rs`; this module
//! depends on nothing but errors and the clock format, so the writer (`db.rs`) can use it.

use std::any::{Any, TypeId};
use std::sync::{Arc, Mutex};

use crate::sql::Connection;
use weft_api::ErrorCode;

use crate::error::{Error, reject};

pub use crate::rows::idempotency::StoredAnswer;
pub(crate) use crate::rows::idempotency::{insert, lookup};

/// Who sent an idempotent request, its key and the hash of the request.
#[derive(Clone, Debug)]
pub struct IdempotentRequest {
    pub scope: String,
    pub key: String,
    pub request_hash: [u8; 32],
    /// When the request arrived (`Store::now`), recorded with the answer.
    pub received_at: chrono::DateTime<chrono::Utc>,
}

/// What the engine did with a request's claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claimed {
    /// The work ran and this answer was committed with it.
    Stored(StoredAnswer),
    /// The key was already answered (found inside the write transaction): the work was not
    /// done again; this is the stored answer.
    Replay(StoredAnswer),
}

type Renderer = Box<dyn Fn(&dyn Any) -> Option<(u16, Vec<u8>)> + Send + Sync>;

/// The task-local state of one idempotent request.
pub(crate) struct Claim {
    request: IdempotentRequest,
    /// The result type of the write that does the work, and how to render its answer.
    armed: Mutex<Option<(TypeId, Arc<Renderer>)>>,
    outcome: Mutex<Option<Claimed>>,
}

tokio::task_local! {
    static CLAIM: Arc<Claim>;
}

/// Runs `work` (the handling of one request) with `request` as its idempotency claim, and
/// returns its output with what the engine did with the claim (`None`: no armed write ran).
pub async fn with_idempotency<F: std::future::Future>(
    request: IdempotentRequest,
    work: F,
) -> (F::Output, Option<Claimed>) {
    let claim = Arc::new(Claim {
        request,
        armed: Mutex::new(None),
        outcome: Mutex::new(None),
    });
    let output = CLAIM.scope(Arc::clone(&claim), work).await;
    let outcome = claim
        .outcome
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    (output, outcome)
}

/// Arms the current request's claim: the next write whose result has type `T` stores the
/// answer `render` makes of that result (status, body) in its own transaction (`None`: no
/// answer is stored with the work). A no-op outside [`with_idempotency`] (no key was sent).
pub fn answer_with<T: Any>(render: impl Fn(&T) -> Option<(u16, Vec<u8>)> + Send + Sync + 'static) {
    let renderer: Renderer = Box::new(move |value| value.downcast_ref::<T>().and_then(&render));
    let _ = CLAIM.try_with(|claim| {
        *claim.armed.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((TypeId::of::<T>(), Arc::new(renderer)));
    });
}

/// A request's claim as a write took it, with the renderer of its answer.
pub(crate) type Armed = (Arc<Claim>, Arc<Renderer>);

/// The armed claim of the current task if a write of result type `T` should honour it.
/// Taking it disarms it, so exactly one write per request stores the answer.
pub(crate) fn armed_for<T: Any>() -> Option<Armed> {
    CLAIM
        .try_with(|claim| {
            let mut armed = claim.armed.lock().unwrap_or_else(|p| p.into_inner());
            match armed.as_ref() {
                Some((type_id, _)) if *type_id == TypeId::of::<T>() => armed
                    .take()
                    .map(|(_, renderer)| (Arc::clone(claim), renderer)),
                _ => None,
            }
        })
        .ok()
        .flatten()
}

impl Claim {
    fn set(&self, outcome: Claimed) {
        *self.outcome.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
    }

    /// Before the work, inside its transaction: a stored answer for this key means the work
    /// was done already (replayed, or refused when the request differs).
    pub(crate) fn check(&self, conn: &Connection) -> Result<(), Error> {
        let request = &self.request;
        if let Some(stored) = lookup(conn, &request.scope, &request.key)? {
            if stored.request_hash != request.request_hash {
                return Err(key_reused());
            }
            // Trimmed after the answer horizon (issue #46): said, never done again.
            if stored.status == 0 {
                return Err(reject(
                    ErrorCode::CommandExpired,
                    "this Idempotency-Key was answered longer ago than answers are kept; the request is not done again",
                ));
            }
            self.set(Claimed::Replay(stored));
            // Rolls this job back; the middleware answers with the stored answer instead.
            return Err(reject(
                ErrorCode::IdempotencyKeyReused,
                "this Idempotency-Key was already answered",
            ));
        }
        Ok(())
    }

    /// After the work, inside its transaction: stores the rendered answer with it, and
    /// returns it for [`Claim::committed`] once the transaction is.
    pub(crate) fn store(
        &self,
        conn: &Connection,
        renderer: &Renderer,
        value: &dyn Any,
    ) -> Result<Option<StoredAnswer>, Error> {
        let now = self.request.received_at;
        let Some((status, body)) = renderer(value) else {
            return Ok(None);
        };
        let answer = StoredAnswer {
            request_hash: self.request.request_hash,
            status,
            body,
        };
        insert(
            conn,
            &self.request.scope,
            &self.request.key,
            &answer,
            now,
            false,
        )?;
        Ok(Some(answer))
    }

    /// The answer [`Claim::store`] wrote is durable: the request answers with it. Only after
    /// the commit: a commit that failed (a full disk) must not answer as if the work was done.
    pub(crate) fn committed(&self, answer: StoredAnswer) {
        self.set(Claimed::Stored(answer));
    }
}

pub(crate) fn key_reused() -> Error {
    reject(
        ErrorCode::IdempotencyKeyReused,
        "this Idempotency-Key was used for a different request",
    )
}
