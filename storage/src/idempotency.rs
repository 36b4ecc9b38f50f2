//! Stored answers of idempotent requests (`Idempotency-Key`, DLV-11): the first answer to a
//! key is kept with the hash of its request, so a retry gets the same answer.

use rusqlite::{OptionalExtension as _, params};

use crate::clock::format_instant;
use crate::engine::Engine;
use crate::error::Error;
use crate::events::to32;

/// A stored answer to an idempotent request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredAnswer {
    pub request_hash: [u8; 32],
    pub status: u16,
    pub body: Vec<u8>,
}

impl Engine {
    pub(crate) async fn idempotent_answer(
        &self,
        scope: String,
        key: String,
    ) -> Result<Option<StoredAnswer>, Error> {
        self.db
            .read(move |conn| {
                let row: Option<(Vec<u8>, u16, Vec<u8>)> = conn
                    .query_row(
                        "SELECT request_hash, status, body FROM idempotency WHERE scope = ?1 AND key = ?2",
                        params![scope, key],
                        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
                    )
                    .optional()?;
                row.map(|(hash, status, body)| Ok(StoredAnswer { request_hash: to32(hash)?, status, body })).transpose()
            })
            .await
    }

    pub(crate) async fn store_idempotent_answer(
        &self,
        scope: String,
        key: String,
        answer: StoredAnswer,
    ) -> Result<(), Error> {
        let now = self.clock.now();
        self.db
            .write(move |txn| {
                txn.execute(
                    "INSERT OR IGNORE INTO idempotency (scope, key, request_hash, status, body, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![scope, key, &answer.request_hash[..], answer.status, answer.body, format_instant(now)],
                )?;
                Ok(())
            })
            .await
    }
}
