//! Offline commands on the server's own files, no server needed: `weft fsck` re-checks a data
//! directory, and the hidden `weft hash` digests a file with the server's pipeline.

use std::path::Path;

use anyhow::bail;

/// Exit code of `weft fsck` when it found crash leftovers and no damage.
pub(super) const EXIT_LEFTOVERS: i32 = 2;

/// Exit code of `weft fsck` when a running server holds the directory (nothing was checked).
pub(super) const EXIT_IN_USE: i32 = 3;

/// `weft fsck`: every blob re-hashed, every row, signature and Group chain re-checked. Exits
/// 1 on damage (`PROBLEM` lines) or an error, [`EXIT_LEFTOVERS`] when it found only harmless
/// crash leftovers (`LEFTOVER` lines: unfinished uploads, blob files and outboards with no row;
/// the next server start removes them), [`EXIT_IN_USE`] when a running server holds the
/// directory, 0 when clean. With `json`, the report is one JSON object on stdout.
/// `blobs`: the bucket holding the blobs, when they are not in `data_dir` (`--blobs s3://…`).
pub(super) async fn run(
    data_dir: &Path,
    index: Option<String>,
    blobs: Option<weft_storage::S3Location>,
    json: bool,
) -> anyhow::Result<()> {
    if index.is_none() && !data_dir.join("index.sqlite").exists() {
        bail!("{} holds no weft index", data_dir.display());
    }
    // Offline only: a running server holds the lock, and its uploads in flight would be
    // reported as damage. Held shared while checking, so no server starts meanwhile.
    let lock = data_dir.join(crate::serve::LOCK_FILE);
    let _held = match std::fs::OpenOptions::new().read(true).open(&lock) {
        Ok(file) => match file.try_lock_shared() {
            Ok(()) => Some(file),
            Err(std::fs::TryLockError::WouldBlock) => {
                eprintln!(
                    "error: {} is in use by a running weft serve; fsck checks a data directory offline: stop the server first",
                    data_dir.display()
                );
                std::process::exit(EXIT_IN_USE);
            }
            Err(std::fs::TryLockError::Error(error)) => return Err(error.into()),
        },
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => return Err(error.into()),
    };
    // Opening the index may create its WAL files: owner-only, as the server's (issue #40).
    crate::serve::owner_only_from_now();
    let mut options = weft_storage::Options::on_disk(data_dir);
    options.sweep_staging = false;
    options.build_trees = false;
    if let Some(location) = blobs {
        options.blobs = weft_storage::Backend::S3(location);
    }
    if let Some(url) = index {
        options.index = weft_storage::Location::Postgres(url);
    }
    // Snapshot signatures are checked against the server's own key.
    if data_dir.join("authority.key").exists() {
        options.authority = std::sync::Arc::new(crate::serve::authority_key(data_dir)?);
    }
    let store = weft_storage::Store::open(options).await?;
    let report = store.fsck().await?;
    if json {
        let status = match (report.problems.is_empty(), report.leftovers.is_empty()) {
            (false, _) => "damaged",
            (true, false) => "leftovers",
            (true, true) => "ok",
        };
        let out = serde_json::json!({
            "status": status,
            "blobs": report.n_blobs,
            "bytes": report.n_bytes,
            "manifests": report.n_manifests,
            "events": report.n_events,
            "problems": report.problems,
            "leftovers": report.leftovers,
            "inFlight": report.in_flight,
        });
        println!("{out}");
        drop(store);
        match status {
            "damaged" => std::process::exit(1),
            "leftovers" => std::process::exit(EXIT_LEFTOVERS),
            _ => return Ok(()),
        }
    }
    println!(
        "checked {} blobs ({} bytes), {} manifests, {} events",
        report.n_blobs, report.n_bytes, report.n_manifests, report.n_events
    );
    for problem in &report.problems {
        println!("PROBLEM {problem}");
    }
    for leftover in &report.leftovers {
        println!("LEFTOVER {leftover}");
    }
    if report.in_flight > 0 {
        println!(
            "{} blob objects without a row yet, younger than ten minutes: uploads in flight on other servers",
            report.in_flight
        );
    }
    if !report.problems.is_empty() {
        bail!("{} problems found", report.problems.len())
    }
    if !report.leftovers.is_empty() {
        println!(
            "no damage; {} crash leftovers (each line says what becomes of it)",
            report.leftovers.len()
        );
        drop(store);
        std::process::exit(EXIT_LEFTOVERS);
    }
    println!("ok");
    Ok(())
}

/// `weft hash`: both digests of a file, hashed as the server hashes an upload (a benchmark
/// baseline).
pub(super) async fn hash(file: &Path) -> anyhow::Result<()> {
    let reader = tokio::fs::File::open(file).await?;
    let stream = tokio_util::io::ReaderStream::with_capacity(reader, 1024 * 1024);
    let digests = weft_storage::digest_stream(stream).await?;
    println!("{} {} {}", digests.blake3, digests.sha256, digests.size);
    Ok(())
}
