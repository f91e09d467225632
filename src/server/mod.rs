//! The HTTPS admission server: TLS accept loop with handshake and header-read timeouts,
//! HTTP/1.1 keep-alive (HTTP/2 via ALPN when enabled), certificate hot reload, and a graceful
//! shutdown that finishes in-flight requests and closes idle connections. Memory and work are
//! bounded whatever clients do: connections are capped on both listeners, idle ones close, and
//! the bytes of unfinished request bodies share one budget ([`budget`]).

pub mod body;
pub mod budget;
pub mod conn;
pub mod limits;
pub mod reload;
pub mod routes;
pub mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use prometheus_client::registry::Registry;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::admin::{self, CacheStatus, Readiness};
use crate::admission::RulesConfig;
use crate::cluster::ClusterView;
use crate::metrics::WebhookMetrics;

/// Everything the server needs besides the cluster view.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    pub bind: SocketAddr,
    pub admin_bind: SocketAddr,
    pub tls_cert: PathBuf,
    pub tls_key: PathBuf,
    pub http2: bool,
    pub rules: RulesConfig,
    pub max_body_bytes: usize,
    pub tls_handshake_timeout: Duration,
    pub header_read_timeout: Duration,
    pub cert_reload_interval: Duration,
    /// After SIGTERM, keep accepting this long so endpoints can drop the pod first.
    pub drain_delay: Duration,
    /// How long in-flight requests get to finish once accepting stopped.
    pub shutdown_grace: Duration,
    /// Bytes all unfinished request bodies together may hold.
    pub max_inflight_body_bytes: usize,
    /// Open webhook connections at most; beyond, new ones wait in the kernel's backlog.
    pub max_connections: usize,
    /// The same for the admin listener.
    pub max_admin_connections: usize,
    /// A connection with no request for this long is closed (both listeners).
    pub idle_timeout: Duration,
    /// Concurrent streams per HTTP/2 connection.
    pub http2_max_concurrent_streams: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("serving certificate: {0}")]
    Tls(#[from] tls::TlsError),
    #[error("binding {what} to {addr}: {source}")]
    Bind { what: &'static str, addr: SocketAddr, source: std::io::Error },
    #[error(transparent)]
    Budget(#[from] budget::BudgetError),
    #[error("{flag} must be at least 1")]
    Zero { flag: &'static str },
}

/// How a shutdown went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Connections still open when the grace period ended (0 = clean).
    pub connections_cut: usize,
}

/// A started server. Dropping it does not stop it; call [`RunningServer::shutdown`].
pub struct RunningServer {
    pub webhook_addr: SocketAddr,
    pub admin_addr: SocketAddr,
    pub readiness: Arc<Readiness>,
    settings: ServerSettings,
    stop_accepting: CancellationToken,
    stop_rest: CancellationToken,
    accept_loop: JoinHandle<ShutdownReport>,
    admin: JoinHandle<()>,
}

/// Loads the certificate, binds both ports and starts serving. Returns once ready to accept.
pub async fn start(
    settings: ServerSettings,
    cluster: Arc<dyn ClusterView>,
    caches: Option<Arc<dyn CacheStatus>>,
    metrics: WebhookMetrics,
    registry: Arc<Registry>,
) -> Result<RunningServer, ServerError> {
    let body_budget = Arc::new(budget::BodyBudget::new(
        settings.max_inflight_body_bytes,
        settings.max_body_bytes,
        metrics.inflight_body_bytes.clone(),
    )?);
    for (flag, value) in [
        ("--max-connections", settings.max_connections),
        ("--max-admin-connections", settings.max_admin_connections),
        ("--http2-max-concurrent-streams", settings.http2_max_concurrent_streams as usize),
    ] {
        if value == 0 {
            return Err(ServerError::Zero { flag });
        }
    }
    let readiness = Arc::new(Readiness::new(caches));
    let (reloader, _) =
        reload::CertReloader::start(settings.tls_cert.clone(), settings.tls_key.clone(), metrics.clone())?;
    readiness.set_certs_loaded();
    let tls_config = tls::server_config(reloader.live.clone(), settings.http2);

    let listener = TcpListener::bind(settings.bind).await.map_err(|source| ServerError::Bind {
        what: "webhook",
        addr: settings.bind,
        source,
    })?;
    let admin_listener = TcpListener::bind(settings.admin_bind).await.map_err(|source| ServerError::Bind {
        what: "admin",
        addr: settings.admin_bind,
        source,
    })?;
    let webhook_addr =
        listener.local_addr().map_err(|source| ServerError::Bind { what: "webhook", addr: settings.bind, source })?;
    let admin_addr = admin_listener.local_addr().map_err(|source| ServerError::Bind {
        what: "admin",
        addr: settings.admin_bind,
        source,
    })?;

    let stop_accepting = CancellationToken::new();
    let stop_rest = CancellationToken::new();
    tokio::spawn(reloader.run(settings.cert_reload_interval, stop_rest.clone()));

    let admin_router = admin::router(readiness.clone(), registry);
    let admin =
        tokio::spawn(admin_loop(admin_listener, admin_router, settings.clone(), metrics.clone(), stop_rest.clone()));

    let app = routes::webhook_service(routes::AppState::new(
        settings.rules.clone(),
        cluster,
        metrics.clone(),
        settings.max_body_bytes,
        body_budget,
    ));
    let accept_loop =
        tokio::spawn(accept_loop(listener, tls_config, app, settings.clone(), metrics, stop_accepting.clone()));
    readiness.set_listener_up();
    tracing::info!(%webhook_addr, %admin_addr, http2 = settings.http2, "trainguard webhook serving");

    Ok(RunningServer { webhook_addr, admin_addr, readiness, settings, stop_accepting, stop_rest, accept_loop, admin })
}

impl RunningServer {
    /// Readiness false, keep accepting for the drain delay, stop accepting, let in-flight
    /// requests finish (idle keep-alive connections close at once), then stop the rest.
    pub async fn shutdown(self) -> ShutdownReport {
        self.readiness.set_shutting_down();
        tracing::info!(drain_delay = ?self.settings.drain_delay, "shutting down: readiness is now false");
        tokio::time::sleep(self.settings.drain_delay).await;
        self.stop_accepting.cancel();
        let report = self.accept_loop.await.unwrap_or(ShutdownReport { connections_cut: usize::MAX });
        self.stop_rest.cancel();
        let _ = self.admin.await;
        tracing::info!(connections_cut = report.connections_cut, "trainguard webhook stopped");
        report
    }
}

fn conn_settings(settings: &ServerSettings) -> conn::ConnSettings {
    conn::ConnSettings {
        header_read_timeout: settings.header_read_timeout,
        idle_timeout: settings.idle_timeout,
        http2_max_streams: settings.http2_max_concurrent_streams,
    }
}

/// The next connection, once the cap has room: the permit is the connection's slot.
async fn next_connection(
    listener: &TcpListener,
    cap: &Arc<Semaphore>,
    stop: &CancellationToken,
    what: &'static str,
) -> Option<(TcpStream, SocketAddr, OwnedSemaphorePermit)> {
    loop {
        let permit = tokio::select! {
            () = stop.cancelled() => return None,
            permit = cap.clone().acquire_owned() => permit.ok()?,
        };
        tokio::select! {
            () = stop.cancelled() => return None,
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => return Some((tcp, peer, permit)),
                Err(e) => {
                    // EMFILE and friends: back off briefly instead of spinning.
                    tracing::warn!(listener = what, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
}

/// Waits for the connections to finish, at most `grace`: how many were still open.
async fn drain(tracker: TaskTracker, grace: Duration) -> usize {
    tracker.close();
    match tokio::time::timeout(grace, tracker.wait()).await {
        Ok(()) => 0,
        Err(_) => tracker.len().max(1),
    }
}

async fn accept_loop<S, B>(
    listener: TcpListener,
    tls_config: Arc<rustls::ServerConfig>,
    app: S,
    settings: ServerSettings,
    metrics: WebhookMetrics,
    stop: CancellationToken,
) -> ShutdownReport
where
    S: conn::ConnService<B>,
    B: conn::ServedBody,
{
    let acceptor = TlsAcceptor::from(tls_config);
    let tracker = TaskTracker::new();
    let cap = Arc::new(Semaphore::new(settings.max_connections));
    let h2_cap = Arc::new(Semaphore::new(conn::http2::max_connections(settings.max_inflight_body_bytes)));
    let conn_settings = Arc::new(conn_settings(&settings));
    let open = metrics.open_connections("webhook");
    while let Some((tcp, peer, slot)) = next_connection(&listener, &cap, &stop, "webhook").await {
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let service = app.clone();
        let (settings, conn_settings, h2_cap, stop, open) =
            (settings.clone(), conn_settings.clone(), h2_cap.clone(), stop.clone(), open.clone());
        tracker.spawn(async move {
            let _slot = slot;
            open.inc();
            let _open = GaugeGuard(&open);
            let tls = match tokio::time::timeout(settings.tls_handshake_timeout, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let is_h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
            // An HTTP/2 connection may buffer its whole flow-control window outside the body
            // budget, so there are fewer HTTP/2 slots; a client waits for one like for `accept`.
            let _h2_slot = if is_h2 {
                match tokio::time::timeout(settings.tls_handshake_timeout, h2_cap.acquire_owned()).await {
                    Ok(Ok(permit)) => Some(permit),
                    _ => {
                        tracing::warn!(%peer, "closing an HTTP/2 connection: all HTTP/2 connection slots are taken");
                        return;
                    }
                }
            } else {
                None
            };
            conn::serve(TokioIo::new(tls), is_h2, service, &conn_settings, &stop).await;
        });
    }
    drop(listener);
    let open = tracker.len();
    tracing::info!(open_connections = open, grace = ?settings.shutdown_grace, "stopped accepting; draining");
    ShutdownReport { connections_cut: drain(tracker, settings.shutdown_grace).await }
}

/// The admin listener: plain HTTP/1.1 with the webhook's header and idle timeouts and its own
/// connection cap, so a flood of scrapes or probes cannot exhaust memory either.
async fn admin_loop(
    listener: TcpListener,
    router: axum::Router,
    settings: ServerSettings,
    metrics: WebhookMetrics,
    stop: CancellationToken,
) {
    let tracker = TaskTracker::new();
    let cap = Arc::new(Semaphore::new(settings.max_admin_connections));
    let conn_settings = Arc::new(conn_settings(&settings));
    let open = metrics.open_connections("admin");
    let service = TowerToHyperService::new(router);
    while let Some((tcp, _peer, slot)) = next_connection(&listener, &cap, &stop, "admin").await {
        let (service, conn_settings, stop, open) = (service.clone(), conn_settings.clone(), stop.clone(), open.clone());
        tracker.spawn(async move {
            let _slot = slot;
            open.inc();
            let _open = GaugeGuard(&open);
            conn::serve(TokioIo::new(tcp), false, service, &conn_settings, &stop).await;
        });
    }
    drop(listener);
    drain(tracker, settings.shutdown_grace).await;
}

/// Decrements a gauge however the task ends.
struct GaugeGuard<'a>(&'a prometheus_client::metrics::gauge::Gauge);

impl Drop for GaugeGuard<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}
