//! A download's body: it carries the download's slot (`limits.rs`) and is cut once its
//! client has taken nothing for the idle timeout (`--body-idle-timeout-secs`).
//!
//! Why a watcher outside the body: hyper polls an HTTP/2 response body only while the stream
//! has flow-control window, so a client that never opens the window stops the polls without
//! stalling the socket. Neither the accept loop's write timeout (nothing waits on the socket)
//! nor a timer inside the body (it runs only when polled) would ever fire, and the body would
//! keep its file, its windows read ahead and its slot for as long as the connection lives.
//! A small task per download notes when the body was last polled; past the timeout it drops
//! the inner stream (the file, the windows, a parked reader) and the slot, and the body's next
//! poll, if one ever comes, ends the response with `timeout` (hyper resets the stream).
//!
//! What counts as the client taking bytes: hyper polls the body again once the previous
//! piece has (mostly) gone out, so the time between polls is a piece's size over the client's
//! rate. The body hands bytes on in pieces of at most [`PIECE`] (slices of the inner chunks,
//! nothing copied), so a client is cut only below 256 KiB per timeout (about 8.5 KiB/s at the
//! default 30 s; raise the timeout for slower links), not below a whole 4 MiB Range window
//! per timeout. Smaller pieces would let slower clients through but cost the verified 1 GiB
//! GET CPU: 64 KiB pieces took about 8 % more server CPU per GiB than none (six interleaved
//! pairs, bench/README stop 37), while 256 KiB is the whole GET's own window, so it is never
//! sliced. And while the inner
//! stream has not answered a poll (a cold disk, an outboard being rebuilt, a busy writer
//! recording a quarantine), the server is the slow side: the body is never cut then.

use std::sync::{Arc, Mutex, Weak};
use std::task::{Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use tokio::sync::oneshot;
use tokio::time::Instant;
use weft_api::ErrorCode;

use crate::error::{Error, reject};
use crate::limits::DownloadPermit;

type Body = BoxStream<'static, Result<Bytes, Error>>;

/// The most bytes the body hands on per poll (see the module docs).
const PIECE: usize = 256 * 1024;

/// What the body and its watcher share.
struct Carried {
    /// The inner body and its slot; `None` once the body ended or was cut.
    live: Option<(Body, DownloadPermit)>,
    /// What is left of the inner body's last chunk, handed on a piece at a time.
    rest: Bytes,
    /// When the consumer last polled the body.
    last_poll: Instant,
    /// The inner body answered the last poll with `Pending`: the server is the slow side.
    waiting_on_server: bool,
    /// The last poll's waker, woken when the body is cut.
    waker: Option<Waker>,
    /// Set by the watcher when it cut the body: its next poll answers `timeout`.
    cut: bool,
}

/// `body`, holding `permit` until the body ends, is dropped, or its client takes nothing for
/// `idle`.
pub(crate) fn carry(body: Body, permit: DownloadPermit, idle: Duration) -> Body {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        // Nothing to watch from (a served body always has a runtime): still hold the slot.
        return body
            .map(move |item| {
                let _slot = &permit;
                item
            })
            .boxed();
    };
    let shared = Arc::new(Mutex::new(Carried {
        live: Some((body, permit)),
        rest: Bytes::new(),
        last_poll: Instant::now(),
        waiting_on_server: false,
        waker: None,
        cut: false,
    }));
    let (dropped, watched) = oneshot::channel::<()>();
    runtime.spawn(watch(Arc::downgrade(&shared), watched, idle));
    futures::stream::poll_fn(move |cx| {
        // Dropped with the body, which ends the watcher at once.
        let _dropped = &dropped;
        let mut carried = lock(&shared);
        let carried = &mut *carried;
        carried.last_poll = Instant::now();
        if std::mem::take(&mut carried.cut) {
            return Poll::Ready(Some(Err(stalled(idle))));
        }
        if !carried.rest.is_empty() {
            return Poll::Ready(Some(Ok(piece(&mut carried.rest))));
        }
        let Some((body, _slot)) = carried.live.as_mut() else {
            return Poll::Ready(None);
        };
        let item = body.poll_next_unpin(cx);
        carried.waiting_on_server = item.is_pending();
        match item {
            Poll::Pending => {
                match &mut carried.waker {
                    Some(waker) => waker.clone_from(cx.waker()),
                    None => carried.waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            Poll::Ready(Some(Ok(mut chunk))) => {
                let first = piece(&mut chunk);
                carried.rest = chunk;
                Poll::Ready(Some(Ok(first)))
            }
            Poll::Ready(None) => {
                // The end: the slot goes back now, not when hyper gets round to dropping us.
                carried.live = None;
                Poll::Ready(None)
            }
            failed => failed,
        }
    })
    .boxed()
}

/// The first [`PIECE`] bytes of `chunk`, leaving the rest in it (no copy).
fn piece(chunk: &mut Bytes) -> Bytes {
    chunk.split_to(chunk.len().min(PIECE))
}

/// Cuts the body once its client has taken nothing for `idle`; ends when the body is dropped.
async fn watch(shared: Weak<Mutex<Carried>>, mut dropped: oneshot::Receiver<()>, idle: Duration) {
    let mut due = Instant::now() + idle;
    loop {
        tokio::select! {
            _ = &mut dropped => return,
            () = tokio::time::sleep_until(due) => {}
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let mut carried = lock(&shared);
        if carried.live.is_none() && carried.rest.is_empty() {
            return;
        }
        let now = Instant::now();
        due = if carried.waiting_on_server {
            // The consumer is waiting for the server: look again later.
            now + idle
        } else {
            carried.last_poll + idle
        };
        if due <= now {
            let cut = (carried.live.take(), std::mem::take(&mut carried.rest));
            carried.cut = true;
            let waker = carried.waker.take();
            drop(carried);
            // Outside the lock: dropping the reader may wake other tasks, and the consumer
            // may poll at once.
            drop(cut);
            if let Some(waker) = waker {
                waker.wake();
            }
            tracing::debug!(
                idle_secs = idle.as_secs(),
                "cut a download whose client took no bytes"
            );
            return;
        }
    }
}

fn stalled(idle: Duration) -> Error {
    reject(
        ErrorCode::Timeout,
        format!(
            "the client took no bytes for {} s; the download was cut",
            idle.as_secs()
        ),
    )
}

fn lock(shared: &Mutex<Carried>) -> std::sync::MutexGuard<'_, Carried> {
    // Every critical section leaves `Carried` whole: a poisoned lock is still consistent.
    shared
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::limits::{Limits, Settings};

    const IDLE: Duration = Duration::from_secs(30);

    fn limits() -> Limits {
        Limits::new(Settings {
            max_uploads_per_agent: 1,
            max_open_uploads: 1,
            max_unpublished_bytes: 0,
            logins_per_minute: 0,
            commands_per_minute: 0,
            max_open_proposals: 0,
            max_upload_chunks: 1,
            max_downloads_per_agent: 1,
            max_downloads_per_group: 1,
            max_open_downloads: 2,
            download_idle: IDLE,
        })
    }

    /// A body that never has bytes ready and notes when it is dropped.
    struct Pending(Arc<AtomicBool>);

    impl Drop for Pending {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn pending_body() -> (Body, Arc<AtomicBool>) {
        let dropped = Arc::new(AtomicBool::new(false));
        let guard = Pending(Arc::clone(&dropped));
        let body = futures::stream::poll_fn(move |_| {
            let _guard = &guard;
            Poll::<Option<Result<Bytes, Error>>>::Pending
        })
        .boxed();
        (body, dropped)
    }

    fn slot(limits: &Limits) -> DownloadPermit {
        limits
            .admit_download(Some("a"), Some("g"))
            .expect("a free slot")
    }

    /// Stop 37: a body nobody polls (an HTTP/2 stream whose window the client never opens)
    /// is cut after the idle timeout: its inner stream (the file, the windows) and its slot
    /// are freed, and a late poll ends it with `timeout`, never as a clean short body.
    #[tokio::test(start_paused = true)]
    async fn a_body_nobody_polls_is_cut_and_frees_its_slot() {
        let limits = limits();
        let (inner, dropped) = pending_body();
        let mut body = carry(inner, slot(&limits), IDLE);
        tokio::time::sleep(IDLE - Duration::from_secs(1)).await;
        assert!(!dropped.load(Ordering::SeqCst), "not yet");
        let refused = limits
            .admit_download(Some("a"), Some("g"))
            .expect_err("the slot is still held");
        assert_eq!(refused.code(), ErrorCode::TooManyDownloads);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(dropped.load(Ordering::SeqCst), "the inner body was dropped");
        let _again = slot(&limits);
        let late = body.next().await.expect("an item").expect_err("cut");
        assert_eq!(late.code(), ErrorCode::Timeout);
        assert!(body.next().await.is_none(), "and then the end");
    }

    /// A client that takes a piece now and then is not cut, however large the inner chunks
    /// (a Range answers 4 MiB windows): the body hands on at most 256 KiB per poll, so the
    /// idle time counts from the last piece taken. Once it stops taking, it is cut.
    #[tokio::test(start_paused = true)]
    async fn a_client_taking_pieces_is_not_cut() {
        let limits = limits();
        let window = Bytes::from(vec![7u8; 4 * 1024 * 1024]);
        let inner = futures::stream::iter([Ok(window.clone())])
            .chain(futures::stream::pending())
            .boxed();
        let mut body = carry(inner, slot(&limits), IDLE);
        let mut taken = 0;
        while taken < window.len() {
            tokio::time::sleep(IDLE - Duration::from_secs(1)).await;
            let piece = body.next().await.expect("a piece").expect("not cut");
            assert!(piece.len() <= PIECE, "{}", piece.len());
            taken += piece.len();
        }
        assert_eq!(taken, window.len());
        // The client asks again and the inner body has nothing yet: the client now waits on
        // the server, and is not cut however long that lasts.
        let mut asking = Box::pin(body.next());
        assert!(futures::poll!(&mut asking).is_pending());
        tokio::time::sleep(IDLE * 3).await;
        assert!(
            limits.admit_download(Some("a"), Some("g")).is_err(),
            "waiting on the server: the slot is still held"
        );
        assert!(futures::poll!(&mut asking).is_pending(), "not cut");
    }

    /// While the server has nothing ready (a cold disk, an outboard rebuild, a busy writer)
    /// the consumer is waiting for it, not the other way round: the body is not cut however
    /// long that takes, and the bytes arrive.
    #[tokio::test(start_paused = true)]
    async fn a_wait_on_the_server_is_never_cut() {
        let limits = limits();
        let late = futures::stream::once(async {
            tokio::time::sleep(IDLE * 3).await;
            Ok(Bytes::from_static(b"late bytes"))
        })
        .boxed();
        let mut body = carry(late, slot(&limits), IDLE);
        let bytes = body.next().await.expect("an item").expect("not cut");
        assert_eq!(bytes, &b"late bytes"[..]);
        assert!(body.next().await.is_none());
        let _slot = slot(&limits);
    }

    /// A body that ends gives its slot back at its end; one dropped gives it back at once,
    /// and its watcher ends with it (no task left behind per download).
    #[tokio::test(start_paused = true)]
    async fn an_ended_or_dropped_body_frees_its_slot_and_its_watcher() {
        let limits = limits();
        let runtime = tokio::runtime::Handle::current();
        let before = runtime.metrics().num_alive_tasks();
        let chunks = futures::stream::iter([Ok(Bytes::from_static(b"all of it"))]).boxed();
        let mut body = carry(chunks, slot(&limits), IDLE);
        assert_eq!(runtime.metrics().num_alive_tasks(), before + 1);
        assert_eq!(
            body.next().await.expect("a chunk").expect("bytes"),
            &b"all of it"[..]
        );
        assert!(body.next().await.is_none());
        let second = slot(&limits);
        drop(body);
        let (inner, dropped) = pending_body();
        let body = carry(inner, second, IDLE);
        drop(body);
        assert!(dropped.load(Ordering::SeqCst));
        let _third = slot(&limits);
        tokio::task::yield_now().await;
        assert_eq!(
            runtime.metrics().num_alive_tasks(),
            before,
            "both watchers ended"
        );
    }
}
