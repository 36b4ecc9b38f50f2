//! Reading a local blob file on the blocking pool, window by window, into buffers that come
//! back when the last holder of their bytes drops them.
//!
//! A verified GET (ART-5) used to read each 1 MiB window into a fresh zeroed buffer on one
//! thread and hash it on another (`hashing::AddressHasher`). A profile of the 1 GiB GET
//! (`perf record -a` over the side-by-side bench, issue #15) put a fifth of the reading
//! thread's time in zeroing those buffers, and the hash read each window back from memory
//! on another core. A hashed read here hashes each window in the task that read it, while
//! the window is still in that core's cache, before it is handed on: the bytes sent are
//! exactly the bytes hashed, and the root is sent once the last window has been read.
//! Buffers are recycled, so none is zeroed after the first few.
//!
//! Memory stays flat: a read holds at most [`DEPTH`] windows ahead of its consumer, and a
//! buffer whose bytes are still held elsewhere (by a hasher, or by hyper writing it) is not
//! reused until they are dropped; one that comes back when the pool is full is freed.

use std::io::Read as _;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use tokio::sync::{mpsc, oneshot};

use crate::error::Error;
use crate::hashing::Root;

/// Bytes per window of a hashed read: small enough that the window is still in the reading
/// core's cache when it is hashed, large enough that the hand-offs cost nothing.
pub(crate) const HASHED_WINDOW: usize = 256 * 1024;

/// A window's bytes; dropping the last holder gives the buffer back to its reader.
struct Recycled {
    buffer: Vec<u8>,
    len: usize,
    home: std::sync::mpsc::SyncSender<Vec<u8>>,
}

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        &self.buffer[..self.len]
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        // A full pool or a finished reader: the buffer is freed instead.
        let _ = self.home.try_send(std::mem::take(&mut self.buffer));
    }
}

/// Reads `file` to its end in windows of `window` bytes. With `hashed`, also the BLAKE3 root
/// of the bytes yielded, computed by the thread that read them (see the module docs); it is
/// never sent if the read fails or the consumer goes away first.
///
/// One blocking task reads ahead while there is room for [`DEPTH`] windows. When there has
/// been none for [`PATIENCE`] (a stalled client) it parks its state and ends, and the
/// consumer starts it again once it has taken half of them: a stalled read holds its
/// windows' memory but no thread. A thread per
/// read, blocked on its full channel, would let a few hundred stalled downloads hold every
/// thread of the blocking pool, which the index's reads share.
pub(super) fn read_file(
    file: std::fs::File,
    window: usize,
    hashed: bool,
) -> (BoxStream<'static, Result<Bytes, Error>>, Option<Root>) {
    let (sender, mut receiver) = mpsc::channel::<Result<Bytes, Error>>(DEPTH);
    let (root_sender, root) = if hashed {
        let (sender, receiver) = oneshot::channel();
        (Some(sender), Some(receiver))
    } else {
        (None, None)
    };
    let (home, spare) = std::sync::mpsc::sync_channel::<Vec<u8>>(DEPTH + 2);
    let reader = Reader {
        runtime: tokio::runtime::Handle::current(),
        finished: Arc::default(),
        file,
        window,
        hasher: root_sender.as_ref().map(|_| blake3::Hasher::new()),
        root_sender,
        sender,
        spare,
        home,
    };
    let parked: Parked = Arc::default();
    let finished = Arc::clone(&reader.finished);
    read_ahead(reader, Arc::clone(&parked));
    let mut ended = false;
    let stream = futures::stream::poll_fn(move |cx| {
        if ended {
            return std::task::Poll::Ready(None);
        }
        let item = receiver.poll_recv(cx);
        // A reader that stopped before the end (its task panicked, or the runtime shutting
        // down dropped it) must not look like a short file: a verified read would take that
        // for bad bytes and quarantine a healthy blob.
        if let std::task::Poll::Ready(None) = &item {
            ended = true;
            if !finished.load(std::sync::atomic::Ordering::Acquire) {
                let stopped = std::io::Error::other("the blob's reader stopped before its end");
                return std::task::Poll::Ready(Some(Err(Error::backend(stopped))));
            }
        }
        // A parked reader goes on once half its windows were taken, so each start reads
        // several (one start per window would cost a blocking-pool hand-off per window
        // whenever the connection is slower than the disk).
        if let std::task::Poll::Ready(Some(_)) = &item
            && receiver.len() <= DEPTH / 2
            && let Some(reader) = lock(&parked).take()
        {
            read_ahead(reader, Arc::clone(&parked));
        }
        item
    });
    (stream.boxed(), root)
}

/// A reader that found no room for its next window, waiting for the consumer.
type Parked = Arc<Mutex<Option<Reader>>>;

/// Windows read ahead of the consumer.
const DEPTH: usize = 8;
/// How long a reader with no room waits for its consumer before it parks and frees its
/// thread.
const PATIENCE: std::time::Duration = std::time::Duration::from_millis(100);

/// What a read carries while it runs, and while it is parked.
struct Reader {
    runtime: tokio::runtime::Handle,
    /// Set when the reader ends on its own terms (the end of the file, or a read error it
    /// sent), before its sender is dropped.
    finished: Arc<std::sync::atomic::AtomicBool>,
    file: std::fs::File,
    window: usize,
    hasher: Option<blake3::Hasher>,
    root_sender: Option<oneshot::Sender<[u8; 32]>>,
    sender: mpsc::Sender<Result<Bytes, Error>>,
    spare: std::sync::mpsc::Receiver<Vec<u8>>,
    home: std::sync::mpsc::SyncSender<Vec<u8>>,
}

/// Reads (and hashes) windows on the blocking pool while the consumer has room for them.
fn read_ahead(mut reader: Reader, parked: Parked) {
    tokio::task::spawn_blocking(move || {
        loop {
            if reader.sender.capacity() == 0 {
                // A connection a little slower than the disk makes room within microseconds:
                // wait for it here rather than hand the read to a new task for every window.
                let wait = tokio::time::timeout(PATIENCE, reader.sender.reserve());
                match reader.runtime.block_on(wait) {
                    Ok(Ok(_room)) => continue,
                    Ok(Err(_closed)) => return, // the consumer went away
                    Err(_stalled) => {}
                }
                // Stalled: parked under the lock the consumer takes after each take that leaves
                // half the windows or fewer, so either it sees this reader or this check sees
                // the room its takes made (a reader parks only with every window full).
                let mut slot = lock(&parked);
                if reader.sender.capacity() == 0 {
                    *slot = Some(reader);
                    return;
                }
                continue;
            }
            // This task is the only sender, so the room just seen is still there.
            let permit = match reader.sender.try_reserve() {
                Ok(permit) => permit,
                Err(mpsc::error::TrySendError::Closed(())) => return, // the consumer went away
                Err(mpsc::error::TrySendError::Full(())) => continue,
            };
            let mut buffer = reader
                .spare
                .try_recv()
                .unwrap_or_else(|_| vec![0u8; reader.window]);
            let filled = match fill(&mut reader.file, &mut buffer) {
                Ok(filled) => filled,
                Err(error) => {
                    reader
                        .finished
                        .store(true, std::sync::atomic::Ordering::Release);
                    permit.send(Err(Error::backend(error)));
                    return;
                }
            };
            if let Some(hasher) = reader.hasher.as_mut() {
                hasher.update(&buffer[..filled]);
            }
            if filled > 0 {
                permit.send(Ok(Bytes::from_owner(Recycled {
                    buffer,
                    len: filled,
                    home: reader.home.clone(),
                })));
            }
            if filled < reader.window {
                reader
                    .finished
                    .store(true, std::sync::atomic::Ordering::Release);
                // The end: the root before the stream's end (dropping the sender ends it).
                if let (Some(hasher), Some(root_sender)) = (reader.hasher, reader.root_sender) {
                    let _ = root_sender.send(*hasher.finalize().as_bytes());
                }
                return;
            }
        }
    });
}

fn lock(parked: &Parked) -> std::sync::MutexGuard<'_, Option<Reader>> {
    // Nothing is left half-done under this lock: a poisoned one is still consistent.
    parked
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Reads until `buffer` is full or the file ends; how many bytes were read.
fn fill(file: &mut std::fs::File, buffer: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match file.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use futures::TryStreamExt as _;

    use super::*;

    /// Every length around the window's edges: the bytes come back whole and in order, and
    /// the root is the BLAKE3 digest of exactly them.
    #[tokio::test]
    async fn a_hashed_read_yields_every_byte_and_their_root() {
        let window = 4096;
        for len in [
            0,
            1,
            window - 1,
            window,
            window + 1,
            3 * window,
            5 * window + 7,
        ] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let mut file = tempfile::tempfile().expect("temp file");
            file.write_all(&bytes).expect("write");
            file.sync_all().expect("sync");
            let file = reopened(file);
            let (stream, root) = read_file(file, window, true);
            let chunks: Vec<Bytes> = stream.try_collect().await.expect("read");
            assert!(chunks.iter().all(|c| !c.is_empty() && c.len() <= window));
            assert_eq!(chunks.concat(), bytes, "length {len}");
            let root = root.expect("a hashed read has a root").await.expect("sent");
            assert_eq!(&root, blake3::hash(&bytes).as_bytes(), "length {len}");
        }
    }

    /// Held windows are not overwritten by the windows read after them, however long the
    /// consumer keeps them: a buffer is reused only once every holder dropped it.
    #[tokio::test]
    async fn a_window_still_held_is_never_reused() {
        let window = 1024;
        let bytes: Vec<u8> = (0..window * 64).map(|i| (i / window) as u8).collect();
        let mut file = tempfile::tempfile().expect("temp file");
        file.write_all(&bytes).expect("write");
        let (mut stream, root) = read_file(reopened(file), window, false);
        assert!(root.is_none());
        let mut held = Vec::new();
        while let Some(chunk) = stream.try_next().await.expect("read") {
            // Keep every other window; drop the rest so their buffers come back.
            if held.len() % 2 == 0 || chunk[0] % 2 == 0 {
                held.push(chunk);
            }
        }
        for chunk in &held {
            let index = chunk[0];
            assert!(
                chunk.iter().all(|b| *b == index),
                "window {index} was overwritten"
            );
        }
    }

    /// A read that fails ends the stream with the error, and no root is ever sent, so a
    /// verified read cannot take the bytes before the failure for the whole blob.
    #[tokio::test]
    async fn a_failed_read_ends_with_its_error_and_no_root() {
        let dir = tempfile::tempdir().expect("temp dir");
        // Opening a directory succeeds on Linux; reading it fails (EISDIR).
        let file = std::fs::File::open(dir.path()).expect("open a directory");
        let (stream, root) = read_file(file, 4096, true);
        let items: Vec<Result<Bytes, Error>> = stream.collect().await;
        assert!(
            matches!(items.as_slice(), [Err(_)]),
            "one error and nothing else: {items:?}"
        );
        assert!(
            root.expect("asked for").await.is_err(),
            "no root after a failure"
        );
    }

    /// Reads whose consumers stopped after one window hold no blocking thread: with two
    /// threads in the pool and eight stalled reads, other blocking work still runs. (A
    /// thread per read, blocked on its full channel, held them all; the test then times out.)
    /// Each parked read then goes on where it stopped, to the last byte and the right root.
    #[test]
    fn stalled_reads_hold_no_blocking_thread_and_go_on_when_taken_again() {
        let window = 1024;
        let bytes: Vec<u8> = (0..window * 64).map(|i| (i % 241) as u8).collect();
        let mut file = tempfile::NamedTempFile::new().expect("temp file");
        file.write_all(&bytes).expect("write");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let within = std::time::Duration::from_secs(30);
            let mut stalled = Vec::new();
            for _ in 0..8 {
                let opened = std::fs::File::open(file.path()).expect("open");
                let (mut stream, root) = read_file(opened, window, true);
                let first = tokio::time::timeout(within, stream.next()).await;
                let Ok(Some(Ok(first))) = first else {
                    panic!("no first window: {first:?}");
                };
                stalled.push((first, stream, root));
            }
            let other = tokio::time::timeout(within, tokio::task::spawn_blocking(|| 42)).await;
            assert!(matches!(other, Ok(Ok(42))), "the blocking pool is free");
            for (first, stream, root) in stalled {
                let rest = tokio::time::timeout(within, stream.try_collect::<Vec<Bytes>>()).await;
                let rest = rest.expect("goes on").expect("read");
                assert_eq!([vec![first], rest].concat().concat(), bytes);
                let root = root.expect("asked for").await.expect("sent");
                assert_eq!(&root, blake3::hash(&bytes).as_bytes());
            }
        });
    }

    /// A reader the runtime drops before the end (here: shut down while the read waits for
    /// room) ends its stream with an error, never cleanly: a short clean stream would look
    /// like a truncated blob, and a verified read would quarantine a healthy one.
    #[test]
    fn a_reader_stopped_before_the_end_is_an_error_not_a_short_file() {
        let window = 1024;
        let mut file = tempfile::NamedTempFile::new().expect("temp file");
        file.write_all(&vec![3u8; window * 64]).expect("write");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let opened = std::fs::File::open(file.path()).expect("open");
        let (stream, root) = runtime.block_on(async { read_file(opened, window, true) });
        runtime.shutdown_timeout(std::time::Duration::from_secs(10));
        let items: Vec<Result<Bytes, Error>> = futures::executor::block_on(stream.collect());
        let read: usize = items.iter().flatten().map(Bytes::len).sum();
        assert!(read < window * 64, "the reader cannot have read it all");
        assert!(
            matches!(items.last(), Some(Err(_))),
            "ends with an error after {read} bytes"
        );
        let root = futures::executor::block_on(root.expect("asked for"));
        assert!(root.is_err(), "no root for a read that stopped");
    }

    /// A file handle at offset 0 (`tempfile()` leaves the cursor at the end).
    fn reopened(mut file: std::fs::File) -> std::fs::File {
        use std::io::Seek as _;
        file.seek(std::io::SeekFrom::Start(0)).expect("seek");
        file
    }
}
