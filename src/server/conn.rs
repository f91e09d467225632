//! Serving one accepted connection, for the webhook and the admin listener alike: the HTTP/1.1
//! and HTTP/2 settings, the connection's deadlines, and the graceful close on shutdown. The
//! connection caps are semaphores taken before `accept`, so a full server stops accepting and new
//! connections wait in the kernel's backlog (back-pressure) instead of costing memory.
//!
//! The deadlines are kept here rather than by hyper, whose HTTP/1 header-read timeout also runs
//! while a keep-alive connection waits for its next request (it would close an idle connection
//! after the header timeout instead of the idle timeout):
//! - a new connection must have sent its first request's headers (HTTP/1.1) or preface and first
//!   HEADERS frame (HTTP/2) within the header timeout;
//! - a request's headers must be complete within the header timeout of their first byte;
//! - a connection with nothing in flight closes after the idle timeout.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::rt::{Read, Write};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::graceful::GracefulConnection;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// hyper's HTTP/1.1 read buffer grows up to this (its default is ~400 KiB). A stalled body keeps
/// at most this much per connection outside the body budget; bigger reads gain nothing.
pub(crate) const HTTP1_MAX_BUF: usize = 64 * 1024;

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
    /// Bytes of an answer h2 buffers per stream beyond what the peer's window lets it send
    /// (hyper's default is 400 KiB). Answers are under 64 KiB.
    pub const MAX_SEND_BUF: usize = 64 * 1024;
    /// Streams a peer may reset before the server accepted them, at once (HTTP/2 Rapid Reset,
    /// CVE-2023-44487); beyond, the connection gets GOAWAY. h2's default, pinned here.
    pub const MAX_PENDING_RESETS: usize = 20;
    /// Streams the server may reset for a peer's protocol errors over a connection's life;
    /// beyond, the connection is closed (CVE-2024-27316 and kin). h2's default is 1024.
    pub const MAX_LOCAL_ERROR_RESETS: usize = 64;
    /// Ping an idle connection this often; close it when the peer does not answer within
    /// [`KEEP_ALIVE_TIMEOUT`] (a peer that vanished without a FIN).
    pub(crate) const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(30);
    pub(crate) const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(10);

    /// HTTP/2 connections allowed at once, from the body budget: each may buffer its connection
    /// window before the budget applies. At least one.
    pub fn max_connections(inflight_body_bytes: usize) -> usize {
        (inflight_body_bytes / CONNECTION_WINDOW as usize).max(1)
    }
}

/// How connections of one listener are served.
#[derive(Debug, Clone)]
pub(crate) struct ConnSettings {
    /// Time to send a request's headers, from their first byte; for the first request of a
    /// connection (and an HTTP/2 preface), from the moment the connection is served.
    pub header_read_timeout: Duration,
    /// A connection with no request in flight and none started for this long is closed.
    pub idle_timeout: Duration,
    /// HTTP/2 streams per connection (the webhook's `--http2-max-concurrent-streams`).
    pub(crate) http2_max_streams: u32,
    /// A write that makes no progress for this long fails and drops the connection; a connection
    /// asked to close (idle, or at shutdown) with nothing in flight is dropped this long after.
    pub(crate) write_timeout: Duration,
}

/// Counts what one connection is doing, for its deadlines: requests started and finished, and
/// whether a byte arrived since the connection went idle. The connection's driver waits on
/// `changed`; a request costs two relaxed increments and two notifications, a read one relaxed
/// load (and a swap on the first byte after an idle spell).
#[derive(Debug, Default)]
pub(crate) struct Activity {
    started: AtomicU64,
    finished: AtomicU64,
    /// Set by the driver while idle; the reader clears it and notifies on the next byte.
    want_byte: AtomicBool,
    changed: Notify,
}

impl Activity {
    fn snapshot(&self) -> (u64, u64) {
        // `finished` first: a request finishing between the loads cannot look like none in flight.
        let finished = self.finished.load(Ordering::Relaxed);
        (self.started.load(Ordering::Relaxed), finished)
    }
}

pin_project_lite::pin_project! {
    /// The connection's IO, telling [`Activity`] when the first byte after an idle spell arrives,
    /// and failing a write that stays blocked for the write timeout (hyper has no write timeout,
    /// and its graceful shutdown waits for a blocked write forever): a peer that stops reading
    /// its answers is dropped, and its slot and buffers come back.
    pub(crate) struct Watched<I> {
        #[pin]
        io: I,
        activity: Arc<Activity>,
        write_timeout: Duration,
        // Armed when a write or flush first returns Pending; cleared by any progress. Boxed:
        // only a blocked connection pays for it.
        stalled: Option<Pin<Box<tokio::time::Sleep>>>,
    }
}

/// A write or flush that returned Pending for the write timeout fails with `TimedOut`.
#[allow(clippy::disallowed_methods, reason = "the write-stall timer itself")]
fn write_deadline<T>(
    stalled: &mut Option<Pin<Box<tokio::time::Sleep>>>,
    timeout: Duration,
    cx: &mut Context<'_>,
    poll: Poll<std::io::Result<T>>,
) -> Poll<std::io::Result<T>> {
    match poll {
        Poll::Ready(result) => {
            *stalled = None;
            Poll::Ready(result)
        }
        Poll::Pending => {
            let timer = stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
            match timer.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the peer read nothing for the write timeout",
                ))),
                Poll::Pending => Poll::Pending,
            }
        }
    }
}

impl<I: Read> Read for Watched<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.project();
        // hyper's cursor does not say how much a read filled, so the read goes through a small
        // probe only while a first byte is awaited; otherwise straight into hyper's buffer.
        if !this.activity.want_byte.load(Ordering::Relaxed) {
            return this.io.poll_read(cx, buf);
        }
        let mut probe = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        let mut probe_buf = hyper::rt::ReadBuf::uninit(&mut probe);
        std::task::ready!(this.io.poll_read(cx, probe_buf.unfilled()))?;
        let got = probe_buf.filled().len();
        if got > 0 {
            buf.put_slice(probe_buf.filled());
            if this.activity.want_byte.swap(false, Ordering::Relaxed) {
                this.activity.changed.notify_one();
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<I: Write> Write for Watched<I> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = self.project();
        let poll = this.io.poll_write(cx, buf);
        write_deadline(this.stalled, *this.write_timeout, cx, poll)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.project();
        let poll = this.io.poll_flush(cx);
        write_deadline(this.stalled, *this.write_timeout, cx, poll)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.project();
        let poll = this.io.poll_shutdown(cx);
        write_deadline(this.stalled, *this.write_timeout, cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.project();
        let poll = this.io.poll_write_vectored(cx, bufs);
        write_deadline(this.stalled, *this.write_timeout, cx, poll)
    }
}

/// A trait that stands for its bounds and that every type with them has: the bounds written once
/// rather than on the trait and again on its blanket impl (Rust has no stable trait aliases).
macro_rules! trait_alias {
    ($(#[$doc:meta])* $vis:vis trait $name:ident $(<$param:ident: $param_bound:path>)? = ($($bound:tt)+)) => {
        $(#[$doc])*
        $vis trait $name $(<$param: $param_bound>)?: $($bound)+ {}
        impl<T: $($bound)+ $(, $param: $param_bound)?> $name $(<$param>)? for T {}
    };
}

trait_alias! {
    /// A response body hyper can send on either protocol.
    pub trait ServedBody =
        (http_body::Body<Data: Send, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + 'static)
}

trait_alias! {
    /// A service [`serve`] can run on a connection: cloneable, answering with a [`ServedBody`].
    pub trait ConnService<B: ServedBody> = (
        hyper::service::Service<
            http::Request<Incoming>,
            Response = http::Response<B>,
            Error = Infallible,
            Future: Send + 'static,
        > + Clone + Send + Sync + 'static
    )
}

/// A service wrapper that records [`Activity`].
#[derive(Clone)]
pub(crate) struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

pub struct Finished(Arc<Activity>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.finished.fetch_add(1, Ordering::Relaxed);
        self.0.changed.notify_one();
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
        self.activity.changed.notify_one();
        TrackedFuture { inner: self.inner.call(req), finished: Some(Finished(self.activity.clone())) }
    }
}

pin_project_lite::pin_project! {
    /// The service's future, counting the request finished when it completes or is dropped
    /// (without a second boxing of the future on the hot path).
    pub(crate) struct TrackedFuture<F> {
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
/// when `stop` fires or when it has been idle for `settings.idle_timeout`, and drops it when a
/// request's headers (or the first request) do not arrive within `settings.header_read_timeout`.
pub(crate) async fn serve<I, S, B>(
    io: I,
    h2: bool,
    service: S,
    settings: &ConnSettings,
    stop: &CancellationToken,
    idle: Option<super::idle::IdleHandle>,
) -> Ended
where
    I: Read + Write + Unpin + Send + 'static,
    S: ConnService<B>,
    B: ServedBody,
{
    let activity = Arc::new(Activity::default());
    let service = Tracked { inner: service, activity: activity.clone() };
    let io = Watched { io, activity: activity.clone(), write_timeout: settings.write_timeout, stalled: None };
    let result = if h2 {
        let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .initial_stream_window_size(http2::STREAM_WINDOW)
            .initial_connection_window_size(http2::CONNECTION_WINDOW)
            .max_concurrent_streams(settings.http2_max_streams)
            .max_header_list_size(http2::MAX_HEADER_LIST)
            .max_send_buf_size(http2::MAX_SEND_BUF)
            .max_pending_accept_reset_streams(http2::MAX_PENDING_RESETS)
            .max_local_error_reset_streams(http2::MAX_LOCAL_ERROR_RESETS)
            .keep_alive_interval(http2::KEEP_ALIVE_INTERVAL)
            .keep_alive_timeout(http2::KEEP_ALIVE_TIMEOUT)
            .serve_connection(io, service);
        // HTTP/2 frames (pings, settings) arrive on an idle connection too; a stream's headers
        // are bounded by the header-list limit instead of a per-request timer.
        drive(conn, &activity, settings, false, stop, idle.as_ref()).await
    } else {
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            // Ours (see the module docs): hyper's would cut idle keep-alive connections.
            .header_read_timeout(None)
            .max_buf_size(HTTP1_MAX_BUF)
            .keep_alive(true)
            .serve_connection(io, service);
        drive(conn, &activity, settings, true, stop, idle.as_ref()).await
    };
    match result {
        Ok(Ended::HeaderTimeout) => {
            tracing::debug!("closing a connection: request headers not received in time");
            Ended::HeaderTimeout
        }
        Ok(ended) => ended,
        Err(e) => {
            tracing::debug!(error = %e, "connection ended with an error");
            Ended::Error
        }
    }
}

/// How a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Closed by either side, or idle, or at shutdown.
    Closed,
    /// Dropped: the first request, or a request's headers, did not arrive in time.
    HeaderTimeout,
    /// A protocol or IO error.
    Error,
}

/// Polls the connection and keeps its deadlines: asks it to close (after the requests in
/// flight) on `stop` or after `idle_timeout` with nothing in flight; drops it when the first
/// request, or the headers of a request whose first byte arrived (`header_timer`, HTTP/1.1),
/// are not complete within `header_read_timeout`.
async fn drive<C>(
    conn: C,
    activity: &Activity,
    settings: &ConnSettings,
    header_timer: bool,
    stop: &CancellationToken,
    idle: Option<&super::idle::IdleHandle>,
) -> Result<Ended, C::Error>
where
    C: GracefulConnection,
{
    let mut conn = std::pin::pin!(conn);
    let mut closing = false;
    // The first request must start within the header timeout: covers a client that sends no
    // byte at all after the handshake, and an HTTP/2 client that sends no preface.
    let mut deadline = Instant::now() + settings.header_read_timeout;
    let mut waiting_for_headers = true;
    let mut seen = activity.snapshot();
    let idle_handle = idle;
    let evictable = idle_handle.is_some();
    loop {
        let changed = activity.changed.notified();
        tokio::select! {
            biased;
            result = conn.as_mut() => return result.map(|()| Ended::Closed),
            () = stop.cancelled(), if !closing => {
                conn.as_mut().graceful_shutdown();
                closing = true;
                deadline = Instant::now() + settings.write_timeout;
            }
            () = changed => {
                let now = activity.snapshot();
                let idle = now.0 == now.1;
                if now != seen {
                    seen = now;
                    waiting_for_headers = false;
                    if idle {
                        let wait = if closing { settings.write_timeout } else { settings.idle_timeout };
                        deadline = Instant::now() + wait;
                        if header_timer {
                            activity.want_byte.store(true, Ordering::Relaxed);
                        }
                        if let Some(handle) = idle_handle && !closing {
                            handle.idle();
                        }
                    } else if let Some(handle) = idle_handle {
                        handle.busy();
                    }
                } else if idle && !closing && !waiting_for_headers && header_timer
                    && !activity.want_byte.load(Ordering::Relaxed)
                {
                    // The first byte of the next request: its headers get the header timeout.
                    waiting_for_headers = true;
                    deadline = Instant::now() + settings.header_read_timeout;
                    if let Some(handle) = idle_handle {
                        handle.busy();
                    }
                }
            }
            () = async {
                match idle_handle {
                    Some(handle) => handle.evicted().await,
                    None => std::future::pending().await,
                }
            }, if evictable => {
                // Chosen to make room at the connection cap: close if still between requests.
                let no_byte_yet = !header_timer || activity.want_byte.load(Ordering::Relaxed);
                if seen.0 == seen.1 && !waiting_for_headers && !closing && no_byte_yet {
                    tracing::debug!("closing an idle connection to make room for a new one");
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                    deadline = Instant::now() + settings.write_timeout;
                }
            }
            () = tokio::time::sleep_until(deadline), if seen.0 == seen.1 => {
                if closing {
                    // Asked to close with nothing in flight, and still open: an answer the peer
                    // does not take (an HTTP/2 stream without window), or a close it ignores.
                    tracing::debug!(write_timeout = ?settings.write_timeout, "dropping a connection that does not close");
                    return Ok(Ended::Closed);
                }
                if waiting_for_headers {
                    return Ok(Ended::HeaderTimeout);
                }
                tracing::debug!(idle = ?settings.idle_timeout, "closing an idle connection");
                conn.as_mut().graceful_shutdown();
                closing = true;
                deadline = Instant::now() + settings.write_timeout;
            }
        }
    }
}
