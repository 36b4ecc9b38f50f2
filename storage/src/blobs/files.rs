//! The local files under the blob store: owner-only modes (0700 directories, 0600 files)
//! emptying a staging directory, and the guard that removes a spilled outboard's file. A
//! leaf: it knows nothing of the store.

use crate::error::Error;

/// Removes everything in `dir` (only weft writes there; a directory can only be a leftover
/// too); how many entries.
pub(super) fn remove_all_in(dir: &std::path::Path) -> Result<usize, Error> {
    let mut n_removed = 0;
    for entry in std::fs::read_dir(dir).map_err(Error::backend)? {
        let path = entry.map_err(Error::backend)?.path();
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.map_err(Error::backend)?;
        n_removed += 1;
    }
    Ok(n_removed)
}

/// Removes every file or directory in `dir` last modified before `before`; returns how many.
/// One that goes meanwhile is not an error.
pub(super) fn remove_older_in(
    dir: &std::path::Path,
    before: std::time::SystemTime,
) -> Result<usize, Error> {
    let mut n_removed = 0;
    for entry in std::fs::read_dir(dir).map_err(Error::backend)? {
        let entry = entry.map_err(Error::backend)?;
        let modified = match entry.metadata().and_then(|meta| meta.modified()) {
            Ok(modified) => modified,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => return Err(Error::backend(error)),
        };
        if modified >= before {
            continue;
        }
        let path = entry.path();
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        match removed {
            Ok(()) => n_removed += 1,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(Error::backend(error)),
        }
    }
    Ok(n_removed)
}

/// Sets a directory's mode to 0700 (unix only; elsewhere a no-op).
pub(crate) fn owner_only_dir(path: &std::path::Path) -> Result<(), Error> {
    set_mode(path, 0o700).map_err(Error::backend)
}

/// Sets a file's mode to 0600 if it exists (unix only; elsewhere a no-op).
pub(crate) fn owner_only_file(path: &std::path::Path) -> Result<(), Error> {
    match set_mode(path, 0o600) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other.map_err(Error::backend),
    }
}

/// Makes every directory under `root` (and `root`) 0700 and every file 0600.
pub(super) fn owner_only_tree(root: &std::path::Path) -> Result<(), Error> {
    owner_only_dir(root)?;
    for entry in std::fs::read_dir(root).map_err(Error::backend)? {
        let path = entry.map_err(Error::backend)?.path();
        if path.is_dir() {
            owner_only_tree(&path)?;
        } else {
            owner_only_file(&path)?;
        }
    }
    Ok(())
}

#[cfg(unix)]
fn set_mode(path: &std::path::Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_path: &std::path::Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

/// A spilled outboard's file, removed when dropped unless disarmed (`.0 = None`).
pub(crate) struct SpillGuard(pub(crate) Option<std::path::PathBuf>);

impl Drop for SpillGuard {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}
