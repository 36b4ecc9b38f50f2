//! weft's SQLite VFS: a commit's WAL writes gathered into as few as the unix VFS takes (every
//! server, `gather.rs`), and writes a test can fail (issue #15, fault injection).
//!
//! [`register`] wraps the default VFS ("unix" on Linux) under a new name. Every file opens
//! through the default VFS exactly as before; a database's main file and its WAL then get a
//! copy of their real method table in which `xWrite`, `xSync` and `xTruncate` first ask the
//! [`Hook`], if there is one. `None` goes on to the real method; `Some(failure)` returns,
//! without touching the file, the code the unix VFS would have returned had the operating
//! system failed that call with `ENOSPC` or `EIO`. A WAL's writes are gathered in memory and
//! handed to the file before its `xSync` and before anything else could read it (`gather.rs`
//! says when, and on which two conditions, which [`check_gathering`] asks), so the hook sees
//! one write per hand-over there, most often one per commit. Everything else (locks, the WAL's
//! shared memory, the main file's reads) is the real method itself, not a wrapper, so a
//! connection through this VFS behaves as one through the default VFS while nothing is armed.
//!
//! Layout: SQLite allocates `szOsFile` bytes for each open file. This VFS asks for the real
//! VFS's size plus an `Extra` after it. The real file lives at the start, where the real
//! VFS's code expects it, and the file's `pMethods` points at the hooked table, the first
//! field of its own `Extra`, so a hooked call finds its `Extra` from the file alone.
//!
//! A registered VFS is never unregistered (SQLite keeps its pointer for as long as any
//! connection might use it), so each [`register`] leaks one small allocation: a server
//! registers one for the process, each test one of its own; nothing registers in a loop.
//!
//! Why a crate of its own: SQLite's VFS is a C interface and needs `unsafe`, which the rest of
//! the workspace forbids; this crate is the one place that allows it.

use std::ffi::{CString, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::ffi;

mod gather;

pub use gather::check as check_gathering;

/// Which file of a database a write goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum File {
    /// The database file itself: in WAL mode only checkpoints write it.
    Main,
    /// The write-ahead log: every commit writes its frames here and fsyncs it.
    Wal,
}

/// What a hooked call does to its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `xWrite`.
    Write,
    /// `xSync`, the fsync.
    Sync,
    /// `xTruncate`.
    Truncate,
}

/// How a hooked call fails: the `errno` the operating system gave it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The disk is full: `ENOSPC`.
    Full,
    /// The disk failed: `EIO`.
    Io,
}

impl Failure {
    /// The code the unix VFS returns for this failure of `op`: `ENOSPC` is `SQLITE_FULL` only
    /// from a write (its `unixSync` and `unixTruncate` report every error as
    /// `SQLITE_IOERR_FSYNC` and `SQLITE_IOERR_TRUNCATE`); `EIO` is the `SQLITE_IOERR_*` of the
    /// operation.
    pub fn code(self, op: Op) -> c_int {
        match (self, op) {
            (Self::Full, Op::Write) => ffi::SQLITE_FULL,
            (_, Op::Write) => ffi::SQLITE_IOERR_WRITE,
            (_, Op::Sync) => ffi::SQLITE_IOERR_FSYNC,
            (_, Op::Truncate) => ffi::SQLITE_IOERR_TRUNCATE,
        }
    }
}

/// Decides, before each write, fsync or truncation of a database's main file or WAL, whether
/// it fails. Called on SQLite's threads with no lock of this crate held; it must be quick. A
/// panic inside it is caught and fails the call as [`Failure::Io`].
pub trait Hook: Send + Sync + 'static {
    /// `Some` fails this call of `op` on `file`.
    fn before(&self, file: File, op: Op) -> Option<Failure>;
}

/// The registered VFS: SQLite's struct first (SQLite hands its address back to `open`), then
/// what `open` needs. Leaked by [`register`].
#[repr(C)]
struct Shim {
    base: ffi::sqlite3_vfs,
    root: *mut ffi::sqlite3_vfs,
    /// Where a file's `Extra` starts: the real VFS's file size, rounded up to `Extra`'s
    /// alignment.
    offset: usize,
    hook: Option<Arc<dyn Hook>>,
    /// Owns the bytes `base.zName` points at.
    _name: CString,
}

/// After the real file in each hooked file's allocation.
#[repr(C)]
struct Extra {
    /// The file's method table: the real one with the writes hooked. First, because the
    /// file's `pMethods` points here and a hooked call casts it back.
    methods: ffi::sqlite3_io_methods,
    real: *const ffi::sqlite3_io_methods,
    file: File,
    shim: *const Shim,
    /// A WAL's writes not yet handed to the real `xWrite` (`gather.rs`); unused on a main file.
    pending: Mutex<gather::Pending>,
}

/// Registers a VFS that opens everything through the default one, gathers a WAL's writes,
/// and asks `hook` (if any) before every write, fsync and truncation of a database's main
/// file and WAL; returns its name, for `Connection::open_with_flags_and_vfs`. It is not made
/// the default VFS.
///
/// # Errors
/// SQLite's code if there is no default VFS or the registration fails.
pub fn register(hook: Option<Arc<dyn Hook>>) -> Result<String, c_int> {
    // SQLite links registered VFSes through their `pNext`, which `sqlite3_vfs_register` writes
    // under its own lock; the copy of the default VFS below reads it, so registrations from
    // several threads (tests run in parallel) take turns here. Nothing else registers a VFS.
    static REGISTERING: Mutex<()> = Mutex::new(());
    let _turn = REGISTERING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!("weft-{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let c_name = CString::new(name.clone()).map_err(|_| ffi::SQLITE_MISUSE)?;
    // SAFETY: with a null name `sqlite3_vfs_find` initializes SQLite if needed and returns
    // the default VFS, or null.
    let root = unsafe { ffi::sqlite3_vfs_find(std::ptr::null()) };
    if root.is_null() {
        return Err(ffi::SQLITE_ERROR);
    }
    // SAFETY: `root` is a registered VFS, which SQLite never frees; the struct is plain data
    // (numbers and function pointers) and is copied, not moved.
    let mut base = unsafe { *root };
    let align = std::mem::align_of::<Extra>();
    let real_size = usize::try_from(base.szOsFile).map_err(|_| ffi::SQLITE_ERROR)?;
    let offset = real_size.div_ceil(align) * align;
    base.szOsFile =
        c_int::try_from(offset + std::mem::size_of::<Extra>()).map_err(|_| ffi::SQLITE_ERROR)?;
    base.pNext = std::ptr::null_mut();
    // The CString's bytes stay where they are when it moves into the Shim below.
    base.zName = c_name.as_ptr();
    base.xOpen = Some(open);
    let shim: &'static mut Shim = Box::leak(Box::new(Shim {
        base,
        root,
        offset,
        hook,
        _name: c_name,
    }));
    // SAFETY: `shim` is leaked, so the VFS outlives every connection that could name it;
    // `0`: not made the default.
    let rc = unsafe { ffi::sqlite3_vfs_register(&raw mut shim.base, 0) };
    if rc != ffi::SQLITE_OK {
        return Err(rc);
    }
    Ok(name)
}

/// `xOpen`: the real VFS opens the file; a main database file or WAL then gets the hooked
/// method table, a WAL with its writes gathered.
unsafe extern "C" fn open(
    vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    // SAFETY: SQLite calls `xOpen` with the VFS it was registered as: `base`, the first field
    // of a leaked `Shim` (`repr(C)`), so the cast finds the whole `Shim`.
    let shim = unsafe { &*vfs.cast::<Shim>() };
    // SAFETY: `root` is a registered VFS; SQLite never frees one.
    let Some(real_open) = (unsafe { (*shim.root).xOpen }) else {
        return ffi::SQLITE_CANTOPEN;
    };
    // SAFETY: `file` points at `szOsFile` bytes of ours, at least the real VFS's own size,
    // which is all the real `xOpen` writes.
    let rc = unsafe { real_open(shim.root, name, file, flags, out_flags) };
    let kind = if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 {
        File::Main
    } else if flags & ffi::SQLITE_OPEN_WAL != 0 {
        File::Wal
    } else {
        return rc;
    };
    // SAFETY: `file` is the struct the real `xOpen` just filled in (or left with null methods
    // if it failed).
    let real = unsafe { (*file).pMethods };
    if rc != ffi::SQLITE_OK || real.is_null() {
        return rc;
    }
    // SAFETY: `real` is the real VFS's method table, which lives as long as the VFS.
    let mut methods = unsafe { *real };
    methods.xWrite = Some(write);
    methods.xSync = Some(sync);
    methods.xTruncate = Some(truncate);
    if kind == File::Wal {
        gather::hook_wal(&mut methods);
    }
    // SAFETY: the allocation holds `offset + size_of::<Extra>()` bytes (`szOsFile`); SQLite
    // allocates files 8-byte aligned and `offset` is a multiple of `Extra`'s alignment (8),
    // so `extra` is in bounds and aligned, and nothing else uses those bytes.
    let extra = unsafe { file.cast::<u8>().add(shim.offset) }.cast::<Extra>();
    // SAFETY: as above; then `pMethods` points at the table inside that `Extra`, which stays
    // where it is until SQLite frees the file after `xClose`.
    unsafe {
        extra.write(Extra {
            methods,
            real,
            file: kind,
            shim,
            pending: Mutex::new(gather::Pending::default()),
        });
        (*file).pMethods = &raw const (*extra).methods;
    }
    rc
}

/// The `Extra` of a file `open` hooked.
///
/// # Safety
/// `file` must be a file `open` hooked, not yet closed.
unsafe fn extra<'a>(file: *mut ffi::sqlite3_file) -> &'a Extra {
    // SAFETY: the caller's promise: `pMethods` points at `Extra::methods`, the first field of
    // a `repr(C)` `Extra` that lives as long as the file.
    unsafe { &*(*file).pMethods.cast::<Extra>() }
}

impl Extra {
    /// The hook's answer for `op` on this file; a panicking hook fails the call.
    fn fails(&self, op: Op) -> Option<Failure> {
        // SAFETY: `shim` was leaked by `register` and is never freed.
        let shim = unsafe { &*self.shim };
        let hook = shim.hook.as_ref()?;
        catch_unwind(AssertUnwindSafe(|| hook.before(self.file, op))).unwrap_or(Some(Failure::Io))
    }
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    // SAFETY: SQLite calls a file's methods only on that open file, and `open` gave this
    // table only to files it hooked.
    let extra = unsafe { extra(file) };
    if let Some(failure) = extra.fails(Op::Write) {
        return failure.code(Op::Write);
    }
    // SAFETY: the real VFS's method table lives as long as the VFS.
    let Some(real) = (unsafe { (*extra.real).xWrite }) else {
        return ffi::SQLITE_IOERR_WRITE;
    };
    // SAFETY: the real method on the real file (which starts at `file`), with SQLite's own
    // arguments.
    unsafe { real(file, data, amount, offset) }
}

unsafe extern "C" fn sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    // SAFETY: as in `write`.
    let extra = unsafe { extra(file) };
    // SAFETY: as above; the WAL's gathered writes go to the file before it is synced.
    let rc = unsafe { gather::flush(file, extra) };
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    if let Some(failure) = extra.fails(Op::Sync) {
        return failure.code(Op::Sync);
    }
    // SAFETY: the real VFS's method table lives as long as the VFS.
    let Some(real) = (unsafe { (*extra.real).xSync }) else {
        return ffi::SQLITE_IOERR_FSYNC;
    };
    // SAFETY: the real method on the real file (which starts at `file`), with SQLite's own
    // arguments.
    unsafe { real(file, flags) }
}

unsafe extern "C" fn truncate(file: *mut ffi::sqlite3_file, size: ffi::sqlite3_int64) -> c_int {
    // SAFETY: as in `write`.
    let extra = unsafe { extra(file) };
    // SAFETY: as above; what was gathered lands before the file is cut.
    let rc = unsafe { gather::flush(file, extra) };
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    if let Some(failure) = extra.fails(Op::Truncate) {
        return failure.code(Op::Truncate);
    }
    // SAFETY: the real VFS's method table lives as long as the VFS.
    let Some(real) = (unsafe { (*extra.real).xTruncate }) else {
        return ffi::SQLITE_IOERR_TRUNCATE;
    };
    // SAFETY: the real method on the real file (which starts at `file`), with SQLite's own
    // arguments.
    unsafe { real(file, size) }
}

#[cfg(test)]
mod tests;
