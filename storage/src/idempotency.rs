//! Stored answers of idempotent requests (`Idempotency-Key`, DLV-11): the first answer to a
//! key is kept with the hash of its request, so a retry gets the same answer.
//!
//! **Atomic with the work** (issue #10 finding 8): the answer of a request that changes
//! something is inserted by the same write job, in the same SQLite transaction, as the change
//! itself, so after a crash either both exist or neither, and a retry — from this process or
//! another one on the same index — never redoes the work. How the HTTP layer and the engine
//! meet without threading a parameter through every operation:
//!
//! 1. the idempotency middleware runs the request inside `claim::with_idempotency`, which puts the
//!    caller's scope, the key and the request hash in a task-local `claim::Claim`;
//! 2. the handler, before calling the store, names the result type of the write that does its
//!    work and how to render its answer from it (`claim::answer_with`);
//! 3. `Db::write` of that result type (and only that one; reads and other writes pass through)
//!    wraps its job: it first looks the key up in the transaction (same hash → the stored
//!    answer is replayed and the work is not done, other hash → `idempotency_key_reused`),
//!    else runs the work, renders the answer from its result and inserts it before the job
//!    ends. The primary key `(scope, key)` makes a concurrent second attempt in another
//!    process fail and roll back its work.
//!
//! Requests that change nothing (refusals) or whose handler does not arm a claim keep the old
//! path: the middleware stores the answer afterwards with `Engine::store_idempotent_answer`,
//! which is harmless because no work was done.

use crate::claim::{StoredAnswer, insert, lookup};
use crate::engine::Engine;
use crate::error::Error;

impl Engine {
    pub(crate) async fn idempotent_answer(
        &self,
        scope: String,
        key: String,
    ) -> Result<Option<StoredAnswer>, Error> {
        self.db.read(move |conn| lookup(conn, &scope, &key)).await
    }

    /// Stores the answer of a request that did no work (a refusal, or a route that arms no
    /// claim); the first answer wins.
    pub(crate) async fn store_idempotent_answer(
        &self,
        scope: String,
        key: String,
        answer: StoredAnswer,
    ) -> Result<(), Error> {
        let now = self.clock.now();
        self.db
            .write(move |txn| insert(txn, &scope, &key, &answer, now, true))
            .await
    }
}
