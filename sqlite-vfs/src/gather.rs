//! A commit's WAL writes gathered in memory and written together (issue #15's small publication).
//!
//! SQLite writes each WAL frame with two `xWrite`s (its 24-byte header, then the page), each
//! a `pwrite` of the unix VFS: about 16 system calls for a 4 KiB publication, a fifth of the
//! writer thread's time. A WAL opened through this VFS keeps contiguous writes in memory and
//! hands them to the real `xWrite` together, in as few calls as the unix VFS takes (chunks of
//! [`WRITE_CHUNK`]: one for a small commit), before anything could see the file: the commit's `xSync`, a read, a truncation, a size, a file control, the close,
//! a write elsewhere in the file, or [`PENDING_LIMIT`] bytes gathered. SQLite publishes a
//! commit to other connections (the WAL index) only after its `xSync` returns, so no reader
//! ever looks for a gathered byte, and nothing gathered was synced, so a crash loses only
//! what an unsynced write could lose anyway.
//!
//! That holds on two conditions, which [`check`] asks of a connection before it writes:
//! `synchronous` FULL or EXTRA (under NORMAL a commit is published with no `xSync` at all),
//! and a main file with powersafe overwrite (without it SQLite pads the commit to a sector,
//! writing the padding after its `xSync`, and publishes it unsynced).
//!
//! The hook is asked once per handed-over write, as [`Op::Write`] on [`File::Wal`]: a
//! failure there fails the call that flushed (the commit's `xSync` returns `SQLITE_FULL` or
//! `SQLITE_IOERR_WRITE`, as the write itself would have) and drops what was gathered, which
//! SQLite, rolling back, never reads.

use std::ffi::{c_int, c_void};
use std::sync::MutexGuard;

use rusqlite::ffi;

use crate::{Extra, Op, extra};

/// The most gathered before it goes to the file: a commit larger than this writes in parts.
pub(crate) const PENDING_LIMIT: usize = 4 << 20;

/// The most the unix VFS writes in one call: its `seekAndWriteFd` keeps only the length's low
/// 17 bits, so a longer write comes back short (`SQLITE_FULL`).
const WRITE_CHUNK: usize = 0x1_f000;

/// Contiguous WAL writes not yet handed over: `bytes` belong at `start` in the file. The
/// vector keeps its capacity between commits; `close` frees it.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    start: i64,
    bytes: Vec<u8>,
}

impl Pending {
    /// Where the gathered bytes end in the file.
    fn end(&self) -> i64 {
        self.start
            .saturating_add(i64::try_from(self.bytes.len()).unwrap_or(i64::MAX))
    }
}

/// The method table entries a WAL opened through this VFS gets.
pub(crate) fn hook_wal(methods: &mut ffi::sqlite3_io_methods) {
    methods.xWrite = Some(write);
    methods.xRead = Some(read);
    methods.xFileSize = Some(size);
    methods.xFileControl = Some(control);
    methods.xClose = Some(close);
}

fn pending(extra: &Extra) -> MutexGuard<'_, Pending> {
    // SQLite uses a file from one connection, one call at a time; the lock keeps it sound
    // if that ever changed, and costs an uncontended atomic today.
    extra
        .pending
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether `conn` may write through a WAL that gathers its writes: `Err` names the condition
/// of the module's header that it breaks.
///
/// # Errors
/// `synchronous` below FULL, a main file without powersafe overwrite, or SQLite's failure to
/// answer either question.
pub fn check(conn: &rusqlite::Connection) -> Result<(), String> {
    let synchronous: i64 = conn
        .query_row("PRAGMA synchronous", [], |row| row.get(0))
        .map_err(|error| format!("PRAGMA synchronous: {error}"))?;
    if synchronous < 2 {
        return Err(format!(
            "synchronous is {synchronous}; gathered WAL writes need FULL (2) or EXTRA (3)"
        ));
    }
    let mut psow: c_int = -1;
    // SAFETY: `conn` is open for the call; `SQLITE_FCNTL_POWERSAFE_OVERWRITE` with -1 only
    // writes the current setting into the `c_int` it is given.
    let rc = unsafe {
        ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_POWERSAFE_OVERWRITE,
            (&raw mut psow).cast(),
        )
    };
    match (rc, psow) {
        (ffi::SQLITE_OK, 1) => Ok(()),
        (ffi::SQLITE_OK, _) => Err("the main file has no powersafe overwrite".to_owned()),
        (code, _) => Err(format!(
            "SQLite did not say whether the main file has powersafe overwrite (code {code})"
        )),
    }
}

/// Hands what `extra`'s WAL gathered to the file, if anything. The gathered bytes are
/// dropped either way: a failed write leaves them as unwritten as a failed `xWrite` would.
///
/// # Safety
/// `file` must be a file `open` hooked, not yet closed, and `extra` its `Extra`.
pub(crate) unsafe fn flush(file: *mut ffi::sqlite3_file, extra: &Extra) -> c_int {
    let mut pending = pending(extra);
    if pending.bytes.is_empty() {
        return ffi::SQLITE_OK;
    }
    // SAFETY: the caller's promise.
    let rc = unsafe { write_through(file, extra, &pending.bytes, pending.start) };
    pending.bytes.clear();
    rc
}

/// The hook, then the real `xWrite` of `bytes` at `offset`, in chunks the unix VFS takes.
///
/// # Safety
/// As [`flush`].
unsafe fn write_through(
    file: *mut ffi::sqlite3_file,
    extra: &Extra,
    bytes: &[u8],
    offset: i64,
) -> c_int {
    if let Some(failure) = extra.fails(Op::Write) {
        return failure.code(Op::Write);
    }
    // SAFETY: the real VFS's method table lives as long as the VFS.
    let Some(real) = (unsafe { (*extra.real).xWrite }) else {
        return ffi::SQLITE_IOERR_WRITE;
    };
    let mut at = offset;
    for chunk in bytes.chunks(WRITE_CHUNK) {
        let Ok(amount) = c_int::try_from(chunk.len()) else {
            return ffi::SQLITE_IOERR_WRITE;
        };
        // SAFETY: the real method on the real file (which starts at `file`); `chunk` is
        // `amount` readable bytes that outlive the call.
        let rc = unsafe { real(file, chunk.as_ptr().cast(), amount, at) };
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        at = at.saturating_add(i64::from(amount));
    }
    ffi::SQLITE_OK
}

/// Calls `then` after handing the gathered bytes over; a failed hand-over answers `failed`
/// (or the write's own code when `failed` is `None`).
///
/// # Safety
/// `file` must be a file `open` hooked, not yet closed.
unsafe fn flushed(
    file: *mut ffi::sqlite3_file,
    failed: Option<c_int>,
    then: impl FnOnce(&ffi::sqlite3_io_methods) -> c_int,
) -> c_int {
    // SAFETY: the caller's promise.
    let extra = unsafe { extra(file) };
    // SAFETY: as above.
    let rc = unsafe { flush(file, extra) };
    if rc != ffi::SQLITE_OK {
        return failed.unwrap_or(rc);
    }
    // SAFETY: the real VFS's method table lives as long as the VFS.
    then(unsafe { &*extra.real })
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    // SAFETY: SQLite calls a file's methods only on that open file, and `open` gave this
    // table only to WALs it hooked.
    let extra = unsafe { extra(file) };
    let Ok(len) = usize::try_from(amount) else {
        return ffi::SQLITE_IOERR_WRITE;
    };
    // SAFETY: SQLite passes `amount` readable bytes at `data`, alive for the call.
    let data = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) };
    let mut pending = pending(extra);
    let end = pending.end();
    let fits = i64::from(amount) <= end.saturating_sub(offset);
    if !pending.bytes.is_empty() && offset >= pending.start && fits {
        // A frame written again before its commit (SQLite rewrites a page changed twice in
        // one transaction in place): overwrite it where it waits.
        let Ok(at) = usize::try_from(offset - pending.start) else {
            return ffi::SQLITE_IOERR_WRITE;
        };
        pending.bytes[at..at + len].copy_from_slice(data);
        return ffi::SQLITE_OK;
    }
    if !pending.bytes.is_empty() && offset == end && pending.bytes.len() + len <= PENDING_LIMIT {
        return append(&mut pending, data);
    }
    if !pending.bytes.is_empty() {
        // SAFETY: `file` is the hooked file `extra` belongs to.
        let rc = unsafe { write_through(file, extra, &pending.bytes, pending.start) };
        pending.bytes.clear();
        if rc != ffi::SQLITE_OK {
            return rc;
        }
    }
    if len > PENDING_LIMIT {
        drop(pending);
        // SAFETY: as above.
        return unsafe { write_through(file, extra, data, offset) };
    }
    pending.start = offset;
    append(&mut pending, data)
}

/// Adds `data` to what is gathered; no memory for it is SQLite's `SQLITE_IOERR_NOMEM`, not an
/// abort.
fn append(pending: &mut Pending, data: &[u8]) -> c_int {
    if pending.bytes.try_reserve(data.len()).is_err() {
        return ffi::SQLITE_IOERR_NOMEM;
    }
    pending.bytes.extend_from_slice(data);
    ffi::SQLITE_OK
}

unsafe extern "C" fn read(
    file: *mut ffi::sqlite3_file,
    data: *mut c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    // SAFETY: as in `write`; then the real method with SQLite's own arguments.
    unsafe {
        flushed(file, Some(ffi::SQLITE_IOERR_READ), |real| {
            match real.xRead {
                Some(read) => read(file, data, amount, offset),
                None => ffi::SQLITE_IOERR_READ,
            }
        })
    }
}

unsafe extern "C" fn size(file: *mut ffi::sqlite3_file, size: *mut ffi::sqlite3_int64) -> c_int {
    // SAFETY: as in `read`.
    unsafe {
        flushed(file, Some(ffi::SQLITE_IOERR_FSTAT), |real| {
            match real.xFileSize {
                Some(file_size) => file_size(file, size),
                None => ffi::SQLITE_IOERR_FSTAT,
            }
        })
    }
}

unsafe extern "C" fn control(file: *mut ffi::sqlite3_file, op: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: as in `read`.
    unsafe {
        flushed(file, None, |real| match real.xFileControl {
            Some(control) => control(file, op, arg),
            None => ffi::SQLITE_NOTFOUND,
        })
    }
}

/// Hands the gathered bytes over, drops the file's `pending` (SQLite frees the file's memory
/// after `xClose` without running destructors), then closes the real file.
unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: as in `write`.
    let extra = unsafe { extra(file) };
    // SAFETY: as above.
    let flushed = unsafe { flush(file, extra) };
    // SAFETY: the real VFS's method table lives as long as the VFS.
    let real = unsafe { (*extra.real).xClose };
    // SAFETY: `shim` was leaked by `register` and is never freed.
    let offset = unsafe { (*extra.shim).offset };
    // SAFETY: `open` wrote this file's `Extra` `offset` bytes into SQLite's allocation for
    // `file` (as `open` finds it, from the pointer SQLite owns); `extra` is not used again, no
    // guard of `pending` is alive, and SQLite calls no method of a file after `xClose`, so it
    // is dropped once, here.
    unsafe {
        let own = file.cast::<u8>().add(offset).cast::<Extra>();
        std::ptr::drop_in_place(&raw mut (*own).pending);
    }
    let Some(real) = real else {
        return ffi::SQLITE_IOERR_CLOSE;
    };
    // SAFETY: the real method on the real file; nothing of ours is used after it.
    let rc = unsafe { real(file) };
    if flushed != ffi::SQLITE_OK {
        flushed
    } else {
        rc
    }
}
