//! `weft migrate` (issue #43): a single-node data directory copied into PostgreSQL and an S3
//! bucket, for several servers (`Store::migrate_into` holds the copy and its checks). The
//! source must be offline (it is held shared, as fsck holds it) and is only read.

use std::path::Path;

use anyhow::bail;

/// Copies `from` into the PostgreSQL database `index` and the bucket `blobs`, then prints
/// what was copied and how the servers take over.
pub(super) async fn run(
    from: &Path,
    index: String,
    blobs: weft_storage::S3Location,
) -> anyhow::Result<()> {
    if !from.join("index.sqlite").exists() {
        bail!("{} holds no weft index", from.display());
    }
    let lock = from.join(crate::serve::LOCK_FILE);
    let _held = match std::fs::OpenOptions::new().read(true).open(&lock) {
        Ok(file) => match file.try_lock_shared() {
            Ok(()) => Some(file),
            Err(std::fs::TryLockError::WouldBlock) => bail!(
                "{} is in use by a running weft serve: stop it first",
                from.display()
            ),
            Err(std::fs::TryLockError::Error(error)) => return Err(error.into()),
        },
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => return Err(error.into()),
    };
    crate::serve::owner_only_from_now();
    let authority = std::sync::Arc::new(crate::serve::authority_key(from)?);
    // The store opened as the source is a copy of its index (its timers and reactions may
    // write; the source is only read), with the source's blobs, read and never written.
    let scratch = std::env::temp_dir().join(format!(
        "weft-migrate-{}-{}",
        std::process::id(),
        chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default()
    ));
    std::fs::create_dir_all(&scratch)?;
    let outcome = copy(from, &scratch, index, blobs, authority).await;
    let _ = std::fs::remove_dir_all(&scratch);
    outcome
}

async fn copy(
    from: &Path,
    scratch: &Path,
    index: String,
    blobs: weft_storage::S3Location,
    authority: std::sync::Arc<ed25519_dalek::SigningKey>,
) -> anyhow::Result<()> {
    let copied = scratch.join("index.sqlite");
    weft_storage::Store::copy_sqlite_index(&from.join("index.sqlite"), &copied)?;
    let mut source = weft_storage::Options::on_disk(from);
    source.index = weft_storage::Location::File(copied);
    source.sweep_staging = false;
    source.authority = std::sync::Arc::clone(&authority);
    let source = weft_storage::Store::open(source).await?;
    let mut target = weft_storage::Options::on_disk(from);
    target.sweep_staging = false;
    target.index = weft_storage::Location::Postgres(index);
    target.blobs = weft_storage::Backend::S3(blobs);
    target.authority = authority;
    let target = weft_storage::Store::open(target).await?;
    let report = source.migrate_into(&target).await?;
    for (table, rows) in &report.tables {
        println!("{table}: {rows} rows");
    }
    println!(
        "copied {} blob files ({} bytes); fsck of the copy: {} blobs, {} manifests, {} events, no problem",
        report.blob_files,
        report.blob_bytes,
        report.fsck.n_blobs,
        report.fsck.n_manifests,
        report.fsck.n_events
    );
    println!(
        "start each server with --index and --blobs as given here, and {}/authority.key and admin.token in its data directory",
        from.display()
    );
    Ok(())
}
