//! Open connections: how many the accept loop keeps, what one past the cap is answered, and
//! how long a connection may stay silent before its first byte.
//!
//! Every connection holds a descriptor, so an unbounded number of idle ones exhausts the
//! open-file limit and `/healthz`, uploads and the index then fail with EMFILE (issue #40).
//! The cap leaves a reserve of descriptors for the server's own work (the index, staged
//! files, stored files read by downloads) and for answering a connection past the cap: up
//! to a small overflow budget of such connections is served one request, `GET /healthz`
//! answered as usual and everything else `503 overloaded`; past that budget a connection is
//! closed at accept.
//!
//! The first-byte wait: hyper's header timer starts only once the protocol has been picked,
//! and the auto builder picks it from the first bytes, so a connection that never sends one
//! was never timed. The accept loop waits for that byte itself, for the header timeout.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, header};
use axum::response::IntoResponse as _;
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt as _;
use weft_api::ErrorCode;

use crate::http::error::HttpError;

/// Descriptors always left beside the connection cap (the index, logs, the overflow answers).
const MIN_RESERVE: u64 = 64;

/// The cap the open-file limit allows: uploads and downloads may each hold a quarter of the
/// descriptors in files (`serve::run`), so sockets get the other half less a reserve of a
/// sixteenth (at least 64).
pub fn cap_for_descriptors(configured: usize, descriptors: Option<u64>) -> usize {
    let Some(descriptors) = descriptors else {
        return configured.max(1);
    };
    let reserve = (descriptors / 16).max(MIN_RESERVE);
    let sockets = (descriptors / 2).saturating_sub(reserve);
    configured
        .min(usize::try_from(sockets).unwrap_or(usize::MAX))
        .max(1)
}

/// The accept loop's admission of connections.
#[derive(Clone, Debug)]
pub struct Gate {
    open: Arc<Semaphore>,
    overflow: Arc<Semaphore>,
}

/// What a new connection gets.
#[derive(Debug)]
pub enum Admission {
    /// Served as usual; the permit is its slot under the cap.
    Admitted(OwnedSemaphorePermit),
    /// Past the cap: one request, `/healthz` answered and anything else `503 overloaded`.
    Overflow(OwnedSemaphorePermit),
    /// Past the overflow budget too: closed at once.
    Refused,
}

impl Gate {
    /// At most `max_connections` served, and a sixteenth of that (1 to 64) answered past it.
    pub fn new(max_connections: usize) -> Self {
        let max_connections = max_connections.clamp(1, Semaphore::MAX_PERMITS);
        Self {
            open: Arc::new(Semaphore::new(max_connections)),
            overflow: Arc::new(Semaphore::new((max_connections / 16).clamp(1, 64))),
        }
    }

    pub fn admit(&self) -> Admission {
        if let Ok(permit) = self.open.clone().try_acquire_owned() {
            return Admission::Admitted(permit);
        }
        match self.overflow.clone().try_acquire_owned() {
            Ok(permit) => Admission::Overflow(permit),
            Err(_) => Admission::Refused,
        }
    }
}

/// The bytes hyper's protocol detection reads before its own header timer starts: the length
/// of the HTTP/2 preface (`PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`).
const PREFACE: usize = 24;

/// Waits up to `timeout` for the peer to send enough to be told apart (the HTTP/2 preface's
/// length, or an HTTP/1 request line ended by a CRLF); false if it sent less, or closed. hyper
/// reads those bytes with no timer of its own, so a peer that sent one byte and stopped would
/// otherwise hold its connection (and its slot under the cap) for ever (issue #40 review). A
/// well-behaved client's first segment holds them, so the first look decides; only a partial
/// one is looked at again, backing off from 2 ms to 200 ms, until the deadline.
pub async fn first_byte_within(stream: &TcpStream, timeout: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut probe = [0u8; PREFACE];
    let mut pause = Duration::from_millis(2);
    loop {
        match tokio::time::timeout_at(deadline, stream.peek(&mut probe)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return false,
            // A line end (a bare LF too, which HTTP/1 parsers accept) ends an HTTP/1 line.
            Ok(Ok(n)) if n >= PREFACE || probe[..n].contains(&b'\n') => {
                return true;
            }
            Ok(Ok(_)) => {
                if tokio::time::Instant::now() >= deadline {
                    return false;
                }
                // Backing off: a stalled peer costs a few wakeups, not hundreds a second.
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(200));
            }
        }
    }
}

/// The answer past the cap: `/healthz` through the router, anything else `503 overloaded`
/// with `Retry-After`, and the connection closed after it.
pub async fn answer_overflow<B>(
    router: Router,
    request: Request<B>,
) -> Result<Response<Body>, std::convert::Infallible>
where
    B: axum::body::HttpBody<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    let mut response = if request.uri().path() == "/healthz" {
        router.oneshot(request.map(Body::new)).await?
    } else {
        HttpError::new(
            ErrorCode::Overloaded,
            "the server has too many open connections; retry later",
        )
        .into_response()
    };
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    Ok(response)
}

#[cfg(test)]
mod tests {
    use axum::routing::get;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpListener;

    use super::*;
    use crate::serve::{Transport, serve_with};

    /// Serves `/healthz` and `/x` with `max_connections` and `header_timeout`.
    async fn server(max_connections: usize, header_timeout: Duration) -> std::net::SocketAddr {
        let router = Router::new()
            .route("/healthz", get(|| async { "ok\n" }))
            .route("/x", get(|| async { "x" }));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let transport = Transport {
            header_timeout,
            write_idle: Duration::from_secs(30),
            max_connections,
        };
        tokio::spawn(serve_with(
            listener,
            router,
            transport,
            std::future::pending(),
        ));
        address
    }

    /// Sends one request on a new connection and reads the answer until the server closes.
    async fn ask(address: std::net::SocketAddr, path: &str) -> String {
        let mut client = TcpStream::connect(address).await.expect("connect");
        let request = format!("GET {path} HTTP/1.1\r\nhost: weft\r\nconnection: close\r\n\r\n");
        client.write_all(request.as_bytes()).await.expect("send");
        let mut answer = Vec::new();
        let _ = client.read_to_end(&mut answer).await;
        String::from_utf8_lossy(&answer).into_owned()
    }

    /// issue #40: a connection that sends nothing is closed after the header timeout.
    #[tokio::test(start_paused = true)]
    async fn a_connection_that_sends_nothing_is_closed_after_the_header_timeout() {
        let header_timeout = Duration::from_secs(3);
        let address = server(8, header_timeout).await;
        let mut idle = TcpStream::connect(address).await.expect("connect");
        let connected = tokio::time::Instant::now();
        let mut buffer = [0u8; 16];
        let read = tokio::time::timeout(header_timeout * 10, idle.read(&mut buffer))
            .await
            .expect("closed within the timeout");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
        assert!(
            connected.elapsed() >= header_timeout,
            "{:?}",
            connected.elapsed()
        );
        // The slot came back: the server still answers.
        assert!(ask(address, "/x").await.starts_with("HTTP/1.1 200"));
    }

    /// issue #40 (review): a peer that sends the first byte of the HTTP/2 preface and stops,
    /// which hyper's protocol detection would wait on with no timer, is closed after the
    /// header timeout like a silent one, and its slot comes back.
    #[tokio::test]
    async fn a_connection_that_stops_inside_the_preface_is_closed_after_the_header_timeout() {
        let header_timeout = Duration::from_secs(1);
        let address = server(1, header_timeout).await;
        let mut partial = TcpStream::connect(address).await.expect("connect");
        partial.write_all(b"PRI * HTTP").await.expect("write");
        let sent = tokio::time::Instant::now();
        let mut buffer = [0u8; 16];
        let read = tokio::time::timeout(header_timeout * 10, partial.read(&mut buffer))
            .await
            .expect("closed within the timeout");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
        assert!(sent.elapsed() < header_timeout * 5, "{:?}", sent.elapsed());
        // The one slot came back: the server answers again.
        assert!(ask(address, "/x").await.starts_with("HTTP/1.1 200"));
    }

    /// issue #40: past the connection cap a new connection gets 503 `overloaded` with
    /// Retry-After, `/healthz` still answers, and a slot freed by a closed connection serves
    /// again.
    #[tokio::test]
    async fn past_the_cap_a_connection_gets_503_overloaded_and_healthz_still_answers() {
        let cap = 32;
        let address = server(cap, Duration::from_secs(60)).await;
        let mut idle = Vec::new();
        for _ in 0..cap {
            idle.push(TcpStream::connect(address).await.expect("connect"));
        }
        let refused = ask(address, "/x").await;
        assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
        assert!(refused.contains("\"code\":\"overloaded\""), "{refused}");
        assert!(
            refused.to_ascii_lowercase().contains("retry-after: 1"),
            "{refused}"
        );
        let health = ask(address, "/healthz").await;
        assert!(health.starts_with("HTTP/1.1 200"), "{health}");
        assert!(health.ends_with("ok\n"), "{health}");
        drop(idle.pop());
        let mut served = String::new();
        for _ in 0..100 {
            served = ask(address, "/x").await;
            if served.starts_with("HTTP/1.1 200") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(served.starts_with("HTTP/1.1 200"), "{served}");
    }

    /// The cap leaves half the descriptors to files and a reserve beside the sockets.
    #[test]
    fn the_cap_keeps_a_reserve_of_descriptors() {
        assert_eq!(cap_for_descriptors(4096, Some(2048)), 1024 - 128);
        assert_eq!(cap_for_descriptors(4096, Some(256)), 64);
        assert_eq!(cap_for_descriptors(100, Some(1 << 20)), 100);
        assert_eq!(cap_for_descriptors(4096, Some(100)), 1);
        assert_eq!(cap_for_descriptors(7, None), 7);
    }
}
