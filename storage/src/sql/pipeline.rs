//! [`Link`]: one PostgreSQL connection (`tokio-postgres`) driven on the calling thread by a
//! runtime of its own, and the changes sent ahead of their answers.
//!
//! Every statement on PostgreSQL is a round trip to the server, and a Command ran about 25
//! of them one after another: the writer's time went to waiting (issue #43). A change whose
//! answer nobody reads (an `INSERT` of an Event, a `RELEASE` of a savepoint) is *sent*
//! ([`Link::send`]): its request is queued now, and its answer is read with the next
//! request's ([`Link::request`]), which travels behind it on the same connection. The server
//! runs them in order, so a later read sees the change; the client reads their answers in
//! order, so the first error among them is the one reported, and it is the request's answer
//! even when the request itself succeeded (a change that failed aborts the transaction, and
//! the job it belonged to must fail). Nothing is acknowledged on a sent change alone: the
//! writer reads every job's answers before it decides the job's outcome (`db.rs`), and a
//! `COMMIT` is a request.
//!
//! The connection is polled only inside [`Link::request`] (as the synchronous `postgres`
//! crate polls its own), so a sent request sits in the client's queue until then and all of
//! them are written together.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tokio_postgres::tls::NoTlsStream;
use tokio_postgres::{AsyncMessage, Client, Socket};

use super::value::{Result, SqlError};

/// A change sent whose answer has not been read.
type Sent = Pin<Box<dyn Future<Output = std::result::Result<(), postgres::Error>> + Send>>;

/// One connection, its runtime, and what was sent on it ahead of a request.
pub(super) struct Link {
    runtime: tokio::runtime::Runtime,
    connection: tokio_postgres::Connection<Socket, NoTlsStream>,
    client: Arc<Client>,
    /// Payloads of `NOTIFY`s received on the channels this connection listens to.
    notifications: VecDeque<String>,
    /// Changes sent, oldest first, whose answers the next request reads, each marked when
    /// it is a transaction-control statement (the writer's savepoints).
    sent: Vec<(Sent, bool)>,
    /// A control statement sent ahead failed since the last [`Link::take_control_failure`].
    control_failed: bool,
}

/// How long what a connection sent may stay unacknowledged before the connection fails
/// (TCP's own limit; ignored on Unix sockets, where the kernel sees the peer end).
const UNACKNOWLEDGED: std::time::Duration = std::time::Duration::from_secs(10);

impl Link {
    /// Connects to `url` without TLS. Must not run inside another runtime (`off_runtime`).
    pub(super) fn connect(url: &str) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(SqlError::Runtime)?;
        let mut config: tokio_postgres::Config = url.parse()?;
        // A connection whose peer went away without a word (a host lost, a middlebox that
        // dropped it) fails its next request once what it sent stays unacknowledged this
        // long, instead of waiting for an answer for ever: the follower's heartbeat
        // (`db/follow.rs`) then notices. The URL may set its own `tcp_user_timeout`.
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(UNACKNOWLEDGED);
        }
        let (client, connection) = runtime.block_on(config.connect(tokio_postgres::NoTls))?;
        Ok(Self {
            runtime,
            connection,
            client: Arc::new(client),
            notifications: VecDeque::new(),
            sent: Vec::new(),
            control_failed: false,
        })
    }

    /// The client requests are made through (its futures borrow it, or own this handle).
    pub(super) fn client(&self) -> Arc<Client> {
        Arc::clone(&self.client)
    }

    pub(super) fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// Whether changes were sent whose answers are still to be read.
    pub(super) fn has_sent(&self) -> bool {
        !self.sent.is_empty()
    }

    /// Sends `change` now; its answer is read by the next [`Link::request`]. An error found
    /// before it is sent (a value its parameter cannot take) is answered here. `control`: a
    /// transaction-control statement, whose failure is also remembered for
    /// [`Link::take_control_failure`] (its error may be read by a later job's request).
    pub(super) fn send(
        &mut self,
        change: impl Future<Output = std::result::Result<(), postgres::Error>> + Send + 'static,
        control: bool,
    ) -> Result<()> {
        let mut change: Sent = Box::pin(change);
        // The first poll encodes the request and queues it for the connection; the answer
        // waits in its own channel until read.
        match change
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            Poll::Ready(outcome) => {
                self.control_failed |= control && outcome.is_err();
                Ok(outcome?)
            }
            Poll::Pending => {
                self.sent.push((change, control));
                Ok(())
            }
        }
    }

    /// Whether a control statement sent ahead failed since the last call.
    pub(super) fn take_control_failure(&mut self) -> bool {
        std::mem::take(&mut self.control_failed)
    }

    /// Runs `request` behind every change sent before it, in one round trip, and reads all
    /// their answers: the first failed change's error, else the request's answer.
    pub(super) fn request<T>(
        &mut self,
        request: impl Future<Output = std::result::Result<T, postgres::Error>>,
    ) -> std::result::Result<T, postgres::Error> {
        super::meter::count_round_trip();
        self.request_uncounted(request)
    }

    /// [`Link::request`], not counted as a round trip by the meter: a statement's first
    /// preparation on this connection, which later runs do not pay.
    pub(super) fn request_uncounted<T>(
        &mut self,
        request: impl Future<Output = std::result::Result<T, postgres::Error>>,
    ) -> std::result::Result<T, postgres::Error> {
        let sent = std::mem::take(&mut self.sent);
        let mut request = pin!(request);
        // Queued now, behind the changes, before the connection writes any of them.
        let early = request
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()));
        let (failed, control_failed, answer) = self.drive(async move {
            let mut failed = None;
            let mut control_failed = false;
            for (change, control) in sent {
                if let Err(error) = change.await {
                    control_failed |= control;
                    failed.get_or_insert(error);
                }
            }
            let answer = match early {
                Poll::Ready(answer) => answer,
                Poll::Pending => request.await,
            };
            Ok((failed, control_failed, answer))
        })?;
        self.control_failed |= control_failed;
        match failed {
            Some(error) => Err(error),
            None => answer,
        }
    }

    /// Polls the connection and `future` until `future` is done.
    fn drive<T>(
        &mut self,
        future: impl Future<Output = std::result::Result<T, postgres::Error>>,
    ) -> std::result::Result<T, postgres::Error> {
        let mut future = pin!(future);
        let Self {
            runtime,
            connection,
            notifications,
            ..
        } = self;
        runtime.block_on(std::future::poll_fn(|cx| {
            if let Err(error) = pump(connection, notifications, cx) {
                return Poll::Ready(Err(error));
            }
            future.as_mut().poll(cx)
        }))
    }

    /// Waits up to `timeout` for a notification, then takes every one received; their
    /// payloads, in order (none if the connection closed).
    pub(super) fn notifications(&mut self, timeout: std::time::Duration) -> Result<Vec<String>> {
        if self.notifications.is_empty() {
            let Self {
                runtime,
                connection,
                notifications,
                ..
            } = self;
            runtime.block_on(async {
                let mut sleep = pin!(tokio::time::sleep(timeout));
                std::future::poll_fn(|cx| {
                    match pump(connection, notifications, cx) {
                        Err(error) => return Poll::Ready(Err(error)),
                        Ok(true) => return Poll::Ready(Ok(())),
                        Ok(false) if !notifications.is_empty() => return Poll::Ready(Ok(())),
                        Ok(false) => {}
                    }
                    sleep.as_mut().poll(cx).map(Ok)
                })
                .await
            })?;
        }
        Ok(self.notifications.drain(..).collect())
    }
}

impl Link {
    /// Closes the connection politely: with the client gone the connection sends
    /// `Terminate` and ends (waiting at most a second, so a dead server delays nothing
    /// long). Must not run inside another runtime (`off_runtime`).
    pub(super) fn close(self) {
        let Self {
            runtime,
            mut connection,
            client,
            sent,
            ..
        } = self;
        // The changes still queued hold the client too.
        drop(sent);
        drop(client);
        let mut ignored = VecDeque::new();
        let _ = runtime.block_on(async {
            tokio::time::timeout(
                std::time::Duration::from_secs(1),
                std::future::poll_fn(|cx| match pump(&mut connection, &mut ignored, cx) {
                    Ok(false) => Poll::Pending,
                    Ok(true) | Err(_) => Poll::Ready(()),
                }),
            )
            .await
        });
    }
}

/// Lets the connection write what is queued and dispatch what it read; keeps notifications.
/// `true` once it has closed.
fn pump(
    connection: &mut tokio_postgres::Connection<Socket, NoTlsStream>,
    notifications: &mut VecDeque<String>,
    cx: &mut Context<'_>,
) -> std::result::Result<bool, postgres::Error> {
    loop {
        match connection.poll_message(cx) {
            Poll::Ready(Some(Ok(AsyncMessage::Notification(notification)))) => {
                notifications.push_back(notification.payload().to_owned());
            }
            Poll::Ready(Some(Ok(_))) => {}
            Poll::Ready(Some(Err(error))) => return Err(error),
            Poll::Ready(None) => return Ok(true),
            Poll::Pending => return Ok(false),
        }
    }
}
