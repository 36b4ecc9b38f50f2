//! A panic in a writer's batch outside any job (issue #43): the lane keeps its writer, so the
//! Groups routed to it keep writing.

use super::*;

/// An answer that panics when it is dropped on a writer's thread (its caller gone).
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        let on_writer = std::thread::current()
            .name()
            .is_some_and(|name| name.starts_with("weft-writer"));
        if on_writer && !std::thread::panicking() {
            panic!("an answer dropped on the writer's thread");
        }
    }
}

/// A job commits, but its caller went away: its answer is dropped on the writer's thread,
/// outside the job's own guard, and panics there. The next write is still answered.
#[tokio::test]
async fn a_panic_outside_a_job_leaves_the_lane_its_writer() {
    let db = Arc::new(Db::open(&Location::Memory).expect("open"));
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let (running, started) = tokio::sync::oneshot::channel::<()>();
    let caller = {
        let db = Arc::clone(&db);
        tokio::spawn(async move {
            db.write(move |_tx| {
                let _ = running.send(());
                let _ = wait.recv();
                Ok(Bomb)
            })
            .await
            .map(|_| ())
        })
    };
    started.await.expect("the job runs");
    caller.abort();
    assert!(caller.await.is_err(), "the caller went away");
    go.send(()).expect("the job waits for it");
    let answer = db.write(|_tx| Ok(7)).await;
    assert_eq!(answer.expect("the lane still has its writer"), 7);
}
