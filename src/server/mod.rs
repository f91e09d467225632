//! The HTTPS admission server: TLS accept loop with handshake and header-read timeouts,
//! HTTP/1.1 keep-alive (HTTP/2 via ALPN when enabled), certificate hot reload, and a graceful
//! shutdown that finishes in-flight requests and closes idle connections.

pub mod limits;
pub mod reload;
pub mod routes;
pub mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

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
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("serving certificate: {0}")]
    Tls(#[from] tls::TlsError),
    #[error("binding {what} to {addr}: {source}")]
    Bind { what: &'static str, addr: SocketAddr, source: std::io::Error },
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
    let admin_stop = stop_rest.clone();
    let admin = tokio::spawn(async move {
        let served =
            axum::serve(admin_listener, admin_router).with_graceful_shutdown(admin_stop.cancelled_owned()).await;
        if let Err(e) = served {
            tracing::error!(error = %e, "admin server failed");
        }
    });

    let app = routes::WebhookService::new(routes::AppState::new(
        settings.rules.clone(),
        cluster,
        metrics,
        settings.max_body_bytes,
    ));
    let accept_loop = tokio::spawn(accept_loop(listener, tls_config, app, settings.clone(), stop_accepting.clone()));
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

async fn accept_loop(
    listener: TcpListener,
    tls_config: Arc<rustls::ServerConfig>,
    app: routes::WebhookService,
    settings: ServerSettings,
    stop: CancellationToken,
) -> ShutdownReport {
    let acceptor = TlsAcceptor::from(tls_config);
    let graceful = GracefulShutdown::new();
    loop {
        let (tcp, peer) = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // EMFILE and friends: back off briefly instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let service = app.clone();
        let watcher = graceful.watcher();
        let settings = settings.clone();
        tokio::spawn(async move {
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
            let io = TokioIo::new(tls);
            let served = if is_h2 {
                let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .timer(TokioTimer::new())
                    .serve_connection(io, service);
                watcher.watch(conn).await
            } else {
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(settings.header_read_timeout)
                    .keep_alive(true)
                    .serve_connection(io, service);
                watcher.watch(conn).await
            };
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    let open = graceful.count();
    tracing::info!(open_connections = open, grace = ?settings.shutdown_grace, "stopped accepting; draining");
    match tokio::time::timeout(settings.shutdown_grace, graceful.shutdown()).await {
        Ok(()) => ShutdownReport { connections_cut: 0 },
        Err(_) => ShutdownReport { connections_cut: open.max(1) },
    }
}
