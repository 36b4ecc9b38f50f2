//! A download's body: it carries the download's slot (`limits.rs`) and is cut once its
//! consumer has not asked for bytes for the idle timeout (`--body-idle-timeout-secs`).
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
//! A poll that finds no bytes ready counts as asking: the server is then the slow side (a
//! cold disk, an outboard being rebuilt), and the client is not to blame.

use std::sync::{Arc, Mutex, Weak};
use std::task::Poll;
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

/// What the body and its watcher share.
struct Carried {
    /// The inner body and its slot; `None` once the body ended or was cut.
    live: Option<(Body, DownloadPermit)>,
    /// When the consumer last polled the body.
    last_poll: Instant,
    /// Set by the watcher when it cut the body: its next poll answers `timeout`.
    cut: bool,
}

/// `body`, holding `permit` until the body ends, is dropped, or goes `idle` without a poll.
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
        last_poll: Instant::now(),
        cut: false,
    }));
    let (dropped, watched) = oneshot::channel::<()>();
    runtime.spawn(watch(Arc::downgrade(&shared), watched, idle));
    futures::stream::poll_fn(move |cx| {
        // Dropped with the body, which ends the watcher at once.
        let _dropped = &dropped;
        let mut carried = lock(&shared);
        carried.last_poll = Instant::now();
        if std::mem::take(&mut carried.cut) {
            return Poll::Ready(Some(Err(stalled(idle))));
        }
        let Some((body, _slot)) = carried.live.as_mut() else {
            return Poll::Ready(None);
        };
        let item = body.poll_next_unpin(cx);
        if let Poll::Ready(None) = item {
            // The end: the slot goes back now, not when hyper gets round to dropping us.
            carried.live = None;
        }
        item
    })
    .boxed()
}

/// Cuts the body once it has gone `idle` without a poll; ends when the body is dropped.
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
        if carried.live.is_none() {
            return;
        }
        due = carried.last_poll + idle;
        if due <= Instant::now() {
            let cut = carried.live.take();
            carried.cut = true;
            drop(carried);
            // Outside the lock: dropping the reader may wake other tasks.
            drop(cut);
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

    /// A consumer that keeps polling is never cut, however long the server takes to have
    /// bytes ready; the idle time counts from the last poll.
    #[tokio::test(start_paused = true)]
    async fn a_body_that_is_polled_is_never_cut() {
        let limits = limits();
        let (inner, dropped) = pending_body();
        let mut body = carry(inner, slot(&limits), IDLE);
        for _ in 0..10 {
            let waited = tokio::time::timeout(IDLE - Duration::from_secs(1), body.next()).await;
            assert!(waited.is_err(), "nothing ready, nothing cut");
        }
        assert!(!dropped.load(Ordering::SeqCst));
        tokio::time::sleep(IDLE + Duration::from_secs(1)).await;
        assert!(dropped.load(Ordering::SeqCst), "cut once the polls stopped");
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
