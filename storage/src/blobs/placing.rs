//! Placing staged bytes at their digest's key (`promote`), its outboard first, and taking a
//! blob away again (`remove`): a create-if-absent rename or copy on the local
//! and memory stores, a HEAD and a copy on S3 (`s3.rs`). See `blobs.rs` for the crash story.

use object_store::ObjectStoreExt as _;
use weft_api::ArtifactId;

use super::{Blobs, Staged, blob_path, owner_only_dir, owner_only_file, s3};
use crate::error::Error;

impl Blobs {
    /// Makes staged bytes visible under their digest. Returns `true` if this call stored them,
    /// `false` if an object was already there (the staged copy is then deleted, unless an
    /// upload session owns it: the caller removes that once the blob's row is committed). With
    /// `replace`, an existing object is overwritten: used to repair a quarantined blob.
    ///
    /// On failure nothing new is left under `blobs/` or `outboards/`, and the staged bytes
    /// are deleted (or, a session's, kept for a retry).
    pub(crate) async fn promote(&self, mut staged: Staged, replace: bool) -> Result<bool, Error> {
        let Some(from) = staged.path.take() else {
            return Ok(false);
        };
        let id = staged.digests.blake3;
        let to = blob_path(&id);
        // The outboard first: a crash after it leaves an outboard without a blob (fsck
        // reports it, the next start removes it), never an acknowledged large blob without
        // its outboard.
        let with_outboard = staged.outboard.is_some();
        let placed = match staged.outboard.take() {
            Some(crate::outboard::Built::Memory(outboard)) => {
                self.put_outboard(&id, outboard).await
            }
            Some(crate::outboard::Built::Spilled(file)) if self.local_root.is_some() => {
                self.place_spilled_outboard(&id, &file)
            }
            Some(crate::outboard::Built::Spilled(file)) => {
                self.upload_spilled_outboard(&id, &file).await
            }
            None => Ok(()),
        };
        if let Err(error) = placed {
            staged.path = Some(from); // let Drop clean up
            return Err(error);
        }
        // A resumable upload session's object is linked into place, not moved: it stays until
        // the blob's row (which deletes the session row) has committed, so a crash between
        // the two leaves a session that can still be finished, and only an orphan blob file
        // that the next start removes (found by the crash campaign: a moved object left a
        // session row whose every finish failed).
        let session = staged.session_owned;
        let outcome = if replace {
            if session {
                self.store.copy(&from, &to).await.map(|()| true)
            } else {
                self.store.rename(&from, &to).await.map(|()| true)
            }
        } else {
            let placed = if self.plain_copy {
                s3::place_by_copy(&*self.store, &from, &to, session).await
            } else if session {
                self.store.copy_if_not_exists(&from, &to).await
            } else {
                self.store.rename_if_not_exists(&from, &to).await
            };
            match placed {
                Ok(()) => Ok(true),
                Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
                Err(error) => Err(error),
            }
        };
        match outcome {
            Ok(true) => {
                // object_store creates files and directories with the process umask.
                if let Some(root) = &self.local_root {
                    let file = root.join(to.as_ref());
                    if let Some(shard) = file.parent() {
                        owner_only_dir(shard)?;
                    }
                    owner_only_file(&file)?;
                }
                Ok(true)
            }
            Ok(false) => {
                if staged.session_owned {
                    staged.path = Some(from); // Drop leaves a session's object alone
                } else if let Err(error) = self.store.delete(&from).await {
                    // The bytes are stored: a copy left in `staging/` is only a leftover,
                    // which the next start removes, not a reason to fail the upload.
                    tracing::warn!(%from, %error, "could not delete a redundant staged copy");
                }
                Ok(false)
            }
            Err(error) => {
                // The outboard placed above must not outlive a blob that never appeared.
                if with_outboard
                    && matches!(self.stored_size(&id).await, Ok(None))
                    && let Err(cleanup) = self.remove_outboard(&id).await
                {
                    tracing::warn!(%id, %cleanup, "could not remove the outboard of a failed promotion");
                }
                staged.path = Some(from); // let Drop clean up
                Err(error.into())
            }
        }
    }

    /// Deletes a blob's object and its outboard (the sweep of uncited uploads, after their
    /// rows are gone; the undoing of a failed upload's promotion, when no row names it). An
    /// object already missing is not an error.
    pub(crate) async fn remove(&self, id: &ArtifactId) -> Result<(), Error> {
        match self.store.delete(&blob_path(id)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(error) => return Err(error.into()),
        }
        self.remove_outboard(id).await
    }
}
