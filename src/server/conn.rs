//! Serving one accepted connection, for the webhook and the admin listener alike: the HTTP/1.1
//! and HTTP/2 settings, the idle timeout, and the graceful close on shutdown. The connection caps
//! are semaphores taken before `accept`, so a full server stops accepting and new connections
//! wait in the kernel's backlog (back-pressure) instead of costing memory.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::rt::{Read, Write};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::graceful::GracefulConnection;
use tokio_util::sync::CancellationToken;

/// hyper's HTTP/1.1 read buffer grows up to this (its default is ~400 KiB). A stalled body keeps
/// at most this much per connection outside the body budget; bigger reads gain nothing.
pub const HTTP1_MAX_BUF: usize = 64 * 1024;

/// HTTP/2 settings for a server that expects a few long-lived, multiplexed API-server
/// connections.
pub mod http2 {
    use std::time::Duration;

    /// Per stream: a 150 KB review fits whole, so it needs no WINDOW_UPDATE round trip.
    pub const STREAM_WINDOW: u32 = 256 * 1024;
    /// Per connection: sixteen such reviews in flight at once. Data inside this window that the
    /// handlers have not read yet is buffered outside the body budget, so HTTP/2 connections
    /// are capped at `max-inflight-body-bytes / CONNECTION_WINDOW` (see [`max_connections`]).
    pub const CONNECTION_WINDOW: u32 = 4 * 1024 * 1024;
    /// Headers of an admission request are well under 1 KiB. hyper's default today, set here so
    /// that a dependency update cannot raise it.
    pub const MAX_HEADER_LIST: u32 = 16 * 1024;
    /// Ping an idle connection this often; close it when the peer does not answer within
    /// [`KEEP_ALIVE_TIMEOUT`] (a peer that vanished without a FIN).
    pub const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(30);
    pub const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(10);

    /// HTTP/2 connections allowed at once, from the body budget: each may buffer its connection
    /// window before the budget applies. At least one.
    pub fn max_connections(inflight_body_bytes: usize) -> usize {
        (inflight_body_bytes / CONNECTION_WINDOW as usize).max(1)
    }
}

/// How connections of one listener are served.
#[derive(Debug, Clone)]
pub struct ConnSettings {
    /// HTTP/1.1: time to send a request's headers.
    pub header_read_timeout: Duration,
    /// A connection with no request in flight and none started for this long is closed.
    pub idle_timeout: Duration,
    /// HTTP/2 streams per connection (the webhook's `--http2-max-concurrent-streams`).
    pub http2_max_streams: u32,
}

/// Counts what one connection is doing, for the idle timeout: requests started and finished.
/// Two relaxed atomic increments per request.
#[derive(Debug, Default)]
pub struct Activity {
    started: AtomicU64,
    finished: AtomicU64,
}

impl Activity {
    fn snapshot(&self) -> (u64, u64) {
        // `finished` first: a request finishing between the loads cannot look like none in flight.
        let finished = self.finished.load(Ordering::Relaxed);
        (self.started.load(Ordering::Relaxed), finished)
    }
}

/// A response body hyper can send on either protocol.
pub trait ServedBody:
    http_body::Body<Data: Send, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + 'static
{
}

impl<B> ServedBody for B where
    B: http_body::Body<Data: Send, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + 'static
{
}

/// A service [`serve`] can run on a connection: cloneable, answering with a [`ServedBody`].
pub trait ConnService<B: ServedBody>:
    hyper::service::Service<
        http::Request<Incoming>,
        Response = http::Response<B>,
        Error = Infallible,
        Future: Send + 'static,
    > + Clone
    + Send
    + Sync
    + 'static
{
}

impl<S, B: ServedBody> ConnService<B> for S where
    S: hyper::service::Service<
            http::Request<Incoming>,
            Response = http::Response<B>,
            Error = Infallible,
            Future: Send + 'static,
        > + Clone
        + Send
        + Sync
        + 'static
{
}

/// A service wrapper that records [`Activity`].
#[derive(Clone)]
pub struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

pub struct Finished(Arc<Activity>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.finished.fetch_add(1, Ordering::Relaxed);
    }
}

impl<S, B> hyper::service::Service<http::Request<Incoming>> for Tracked<S>
where
    S: hyper::service::Service<http::Request<Incoming>, Response = http::Response<B>, Error = Infallible>,
{
    type Response = http::Response<B>;
    type Error = Infallible;
    type Future = TrackedFuture<S::Future>;

    fn call(&self, req: http::Request<Incoming>) -> Self::Future {
        self.activity.started.fetch_add(1, Ordering::Relaxed);
        TrackedFuture { inner: self.inner.call(req), finished: Some(Finished(self.activity.clone())) }
    }
}

pin_project_lite::pin_project! {
    /// The service's future, counting the request finished when it completes or is dropped
    /// (without a second boxing of the future on the hot path).
    pub struct TrackedFuture<F> {
        #[pin]
        inner: F,
        finished: Option<Finished>,
    }
}

impl<F: Future> Future for TrackedFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<F::Output> {
        let this = self.project();
        let out = std::task::ready!(this.inner.poll(cx));
        this.finished.take();
        std::task::Poll::Ready(out)
    }
}

/// Serves one connection until it ends: closes it gracefully (finishing requests in flight)
/// when `stop` fires or when it has been idle for `settings.idle_timeout`.
pub async fn serve<I, S, B>(io: I, h2: bool, service: S, settings: &ConnSettings, stop: &CancellationToken)
where
    I: Read + Write + Unpin + Send + 'static,
    S: ConnService<B>,
    B: ServedBody,
{
    let activity = Arc::new(Activity::default());
    let service = Tracked { inner: service, activity: activity.clone() };
    let result = if h2 {
        let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .initial_stream_window_size(http2::STREAM_WINDOW)
            .initial_connection_window_size(http2::CONNECTION_WINDOW)
            .max_concurrent_streams(settings.http2_max_streams)
            .max_header_list_size(http2::MAX_HEADER_LIST)
            .keep_alive_interval(http2::KEEP_ALIVE_INTERVAL)
            .keep_alive_timeout(http2::KEEP_ALIVE_TIMEOUT)
            .serve_connection(io, service);
        drive(conn, &activity, settings.idle_timeout, stop).await
    } else {
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(settings.header_read_timeout)
            .max_buf_size(HTTP1_MAX_BUF)
            .keep_alive(true)
            .serve_connection(io, service);
        drive(conn, &activity, settings.idle_timeout, stop).await
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// Polls the connection; asks it to close (after the requests in flight) on `stop`, or when a
/// whole `idle` period passed with no request in flight, none started and none finished.
async fn drive<C>(conn: C, activity: &Activity, idle: Duration, stop: &CancellationToken) -> Result<(), C::Error>
where
    C: GracefulConnection,
{
    let mut conn = std::pin::pin!(conn);
    let mut closing = false;
    let mut seen = activity.snapshot();
    let mut check = tokio::time::Instant::now() + idle;
    loop {
        tokio::select! {
            result = conn.as_mut() => return result,
            () = stop.cancelled(), if !closing => {
                conn.as_mut().graceful_shutdown();
                closing = true;
            }
            () = tokio::time::sleep_until(check), if !closing => {
                let now = activity.snapshot();
                if now == seen && now.0 == now.1 {
                    tracing::debug!(?idle, "closing an idle connection");
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                } else {
                    seen = now;
                    check += idle;
                }
            }
        }
    }
}
