//! Stored answers of idempotent requests (`Idempotency-Key`, DLV-11): the first answer to a
//! key is kept with the hash of its request, so a retry gets the same answer.
//!
//! **Atomic with the work** (issue #10 finding 8): the answer of a request that changes
//! something is inserted by the same write job, in the same SQLite transaction, as the change
//! itself, so after a crash either both exist or neither, and a retry — from this process or
//! another one on the same index — never redoes the work. How the HTTP layer and the engine
//! meet without threading a parameter through every operation:
//!
//! 1. the idempotency middleware runs the request inside [`with_idempotency`], which puts the
//!    caller's scope, the key and the request hash in a task-local [`Claim`];
//! 2. the handler, before calling the store, names the result type of the write that does its
//!    work and how to render its answer from it ([`answer_with`]);
//! 3. `Db::write` of that result type (and only that one; reads and other writes pass through)
//!    wraps its job: it first looks the key up in the transaction (same hash → the stored
//!    answer is replayed and the work is not done, other hash → `idempotency_key_reused`),
//!    else runs the work, renders the answer from its result and inserts it before the job
//!    ends. The primary key `(scope, key)` makes a concurrent second attempt in another
//!    process fail and roll back its work.
//!
//! Requests that change nothing (refusals) or whose handler does not arm a claim keep the old
//! path: the middleware stores the answer afterwards with [`Engine::store_idempotent_answer`],
//! which is harmless because no work was done.

use std::any::{Any, TypeId};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension as _, params};
use weft_api::ErrorCode;

use crate::clock::format_instant;
use crate::engine::Engine;
use crate::error::{Error, reject};
use crate::events::to32;

/// A stored answer to an idempotent request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredAnswer {
    pub request_hash: [u8; 32],
    pub status: u16,
    pub body: Vec<u8>,
}

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

/// The armed claim of the current task if a write of result type `T` should honour it.
/// Taking it disarms it, so exactly one write per request stores the answer.
pub(crate) fn armed_for<T: Any>() -> Option<(Arc<Claim>, Arc<Renderer>)> {
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
            self.set(Claimed::Replay(stored));
            // Rolls this job back; the middleware answers with the stored answer instead.
            return Err(reject(
                ErrorCode::IdempotencyKeyReused,
                "this Idempotency-Key was already answered",
            ));
        }
        Ok(())
    }

    /// After the work, inside its transaction: stores the rendered answer with it.
    pub(crate) fn store(
        &self,
        conn: &Connection,
        renderer: &Renderer,
        value: &dyn Any,
    ) -> Result<(), Error> {
        let now = self.request.received_at;
        let Some((status, body)) = renderer(value) else {
            return Ok(());
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
        self.set(Claimed::Stored(answer));
        Ok(())
    }
}

pub(crate) fn key_reused() -> Error {
    reject(
        ErrorCode::IdempotencyKeyReused,
        "this Idempotency-Key was used for a different request",
    )
}

fn lookup(conn: &Connection, scope: &str, key: &str) -> Result<Option<StoredAnswer>, Error> {
    let row: Option<(Vec<u8>, u16, Vec<u8>)> = conn
        .query_row(
            "SELECT request_hash, status, body FROM idempotency WHERE scope = ?1 AND key = ?2",
            params![scope, key],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .optional()?;
    row.map(|(hash, status, body)| {
        Ok(StoredAnswer {
            request_hash: to32(hash)?,
            status,
            body,
        })
    })
    .transpose()
}

fn insert(
    conn: &Connection,
    scope: &str,
    key: &str,
    answer: &StoredAnswer,
    now: chrono::DateTime<chrono::Utc>,
    or_ignore: bool,
) -> Result<(), Error> {
    let verb = if or_ignore {
        "INSERT OR IGNORE"
    } else {
        "INSERT"
    };
    conn.execute(
        &format!(
            "{verb} INTO idempotency (scope, key, request_hash, status, body, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
        ),
        params![
            scope,
            key,
            &answer.request_hash[..],
            answer.status,
            answer.body,
            format_instant(now)
        ],
    )?;
    Ok(())
}

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

#[cfg(test)]
mod tests {
    use weft_api::session::{Membership, Role};
    use weft_api::{ErrorCode, Id};

    use super::*;
    use crate::{Options, Store};

    fn id(text: &str) -> Id {
        Id::parse("id", text).expect("id")
    }

    fn request(store: &Store, key: &str, hash: u8) -> IdempotentRequest {
        IdempotentRequest {
            scope: "admin".into(),
            key: key.into(),
            request_hash: [hash; 32],
            received_at: store.now(),
        }
    }

    fn render(membership: &Membership) -> Option<(u16, Vec<u8>)> {
        Some((200, serde_json::to_vec(membership).expect("json")))
    }

    /// A Group g1 with a registered Agent w1 (Membership epoch 1).
    async fn store_with_member(dir: &std::path::Path) -> Store {
        let store = Store::open(Options::on_disk(dir)).await.expect("open");
        store.create_group(id("g1")).await.expect("group");
        let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]).verifying_key();
        store
            .register_agent(id("w1"), key, "1".into())
            .await
            .expect("agent");
        store
            .set_membership(id("g1"), id("w1"), vec![Role::Worker])
            .await
            .expect("membership");
        store
    }

    async fn set_roles(
        store: &Store,
        request: IdempotentRequest,
        renderer: fn(&Membership) -> Option<(u16, Vec<u8>)>,
    ) -> (Result<Membership, crate::Error>, Option<Claimed>) {
        with_idempotency(request, async {
            answer_with::<Membership>(renderer);
            store
                .set_membership(id("g1"), id("w1"), vec![Role::Reviewer])
                .await
        })
        .await
    }

    /// Issue #10 finding 8 (DLV-11): the stored answer is committed in the transaction of the
    /// work: a failure after the work and before the commit leaves neither the change, its
    /// Event nor the answer; a success leaves all three.
    #[tokio::test]
    async fn the_answer_commits_with_the_work_or_not_at_all() {
        let dir = tempfile::tempdir().expect("dir");
        let store = store_with_member(dir.path()).await;
        let before = store.fingerprint().await.expect("fingerprint");
        let events_before = store.stats().await.expect("stats").events;
        let (outcome, claimed) = set_roles(&store, request(&store, "k1", 1), |_| {
            panic!("the process fails after the work, before the commit")
        })
        .await;
        assert!(outcome.is_err());
        assert_eq!(claimed, None);
        assert_eq!(
            before,
            store.fingerprint().await.expect("fingerprint"),
            "nothing kept"
        );
        assert_eq!(
            store
                .idempotent_answer("admin".into(), "k1".into())
                .await
                .expect("read"),
            None
        );

        let (outcome, claimed) = set_roles(&store, request(&store, "k1", 1), render).await;
        let membership = outcome.expect("the work ran");
        assert_eq!(membership.epoch, 2);
        let stored = store
            .idempotent_answer("admin".into(), "k1".into())
            .await
            .expect("read")
            .expect("the answer is stored with the work");
        assert_eq!(claimed, Some(Claimed::Stored(stored.clone())));
        assert_eq!(stored.body, serde_json::to_vec(&membership).expect("json"));
        assert_eq!(
            store.stats().await.expect("stats").events,
            events_before + 1
        );
    }

    /// Issue #10 finding 8: a second process (here: the store reopened after the first one
    /// stopped right after its commit, before any later step) replays the stored answer and
    /// does not redo the work; the key with another request is refused.
    #[tokio::test]
    async fn another_process_replays_rather_than_redoes() {
        let dir = tempfile::tempdir().expect("dir");
        let first = store_with_member(dir.path()).await;
        let (outcome, claimed) = set_roles(&first, request(&first, "k1", 1), render).await;
        assert_eq!(outcome.expect("work").epoch, 2);
        let Some(Claimed::Stored(answer)) = claimed else {
            panic!("stored with the work: {claimed:?}");
        };
        drop(first);

        let second = Store::open(Options::on_disk(dir.path()))
            .await
            .expect("reopen");
        let before = second.fingerprint().await.expect("fingerprint");
        let (outcome, claimed) = set_roles(&second, request(&second, "k1", 1), render).await;
        assert_eq!(
            outcome.map_err(|e| e.code()),
            Err(ErrorCode::IdempotencyKeyReused)
        );
        assert_eq!(claimed, Some(Claimed::Replay(answer)));
        let (outcome, claimed) = set_roles(&second, request(&second, "k1", 2), render).await;
        assert_eq!(
            outcome.map_err(|e| e.code()),
            Err(ErrorCode::IdempotencyKeyReused)
        );
        assert_eq!(claimed, None, "another request is refused, not replayed");
        assert_eq!(
            before,
            second.fingerprint().await.expect("fingerprint"),
            "not redone"
        );
    }
}
