//! The HTTPS admission server: TLS accept loop with handshake and header-read timeouts,
//! HTTP/1.1 keep-alive (HTTP/2 via ALPN when enabled), certificate hot reload, and a graceful
//! shutdown that finishes in-flight requests and closes idle connections. Memory and work are
//! bounded whatever clients do: connections are capped on both listeners and per peer address
//! ([`peers`]), idle ones close, and the bytes of unfinished request bodies share one budget
//! ([`budget`]). The admin port keeps a few slots for probes only ([`PROBE_SLOTS`]), so a full
//! admin port still answers `/healthz` and `/readyz`.

pub mod admin;
pub mod body;
pub(crate) mod budget;
pub mod conn;
pub mod idle;
pub(crate) mod limits;
pub mod metrics;
pub(crate) mod peers;
pub(crate) mod reload;
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

use crate::cluster::CacheStatus;
use crate::cluster::ClusterView;
use admin::Readiness;
use metrics::WebhookMetrics;
use trainguard_core::admission::RulesConfig;

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
    /// Open connections from one peer IP address at most, per listener; beyond, closed at once.
    pub max_connections_per_ip: usize,
    /// PEM CA certificates: when set, webhook clients must present a certificate they signed.
    pub client_ca: Option<PathBuf>,
    /// A request body must have arrived this long after its headers (or by the request's own
    /// `?timeout=` deadline, if sooner).
    pub body_read_timeout: Duration,
    /// A write the peer takes nothing of for this long drops the connection (both listeners).
    pub write_timeout: Duration,
    /// At `max_connections`, a connection idle between requests this long may be closed to make
    /// room for a new one (`serve` uses [`idle::EVICT_FLOOR`]).
    pub evict_idle_after: Duration,
}

/// Admin connections kept for `/healthz` and `/readyz` when `--max-admin-connections` are all
/// taken. Such a connection answers only the probes, one request, with a short header timeout.
pub(crate) const PROBE_SLOTS: usize = 8;
/// Header and idle timeout of a connection in a probe slot.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

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
    #[error("starting the admin listener's thread: {0}")]
    AdminThread(std::io::Error),
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
    pub(crate) readiness: Arc<Readiness>,
    settings: ServerSettings,
    stop_accepting: CancellationToken,
    stop_rest: CancellationToken,
    accept_loop: JoinHandle<ShutdownReport>,
    admin: AdminThread,
}

/// The admin listener's thread: done when its loop has returned.
struct AdminThread(tokio::sync::oneshot::Receiver<()>);

impl AdminThread {
    async fn join(self) {
        let _ = self.0.await;
    }
}

/// Runs the admin listener on a thread of its own, with a current-thread runtime: the kubelet's
/// probes never wait behind reviews, whatever they cost and however many workers the webhook's
/// runtime has (one, under a 1-CPU limit). docs/operations.md, "Limits", says why.
fn spawn_admin<F>(
    listener: TcpListener,
    run: impl FnOnce(TcpListener) -> F + Send + 'static,
) -> Result<AdminThread, ServerError>
where
    F: Future<Output = ()> + 'static,
{
    let listener = listener.into_std().map_err(ServerError::AdminThread)?;
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(ServerError::AdminThread)?;
    let (done, joined) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("trainguard-admin".into())
        .spawn(move || {
            runtime.block_on(async move {
                match TcpListener::from_std(listener) {
                    Ok(listener) => run(listener).await,
                    Err(e) => tracing::error!(error = %e, "the admin listener could not start"),
                }
            });
            let _ = done.send(());
        })
        .map_err(ServerError::AdminThread)?;
    Ok(AdminThread(joined))
}

/// A listener on `addr` (port 0: any free one) and the address it got.
async fn bind(what: &'static str, addr: SocketAddr) -> Result<(TcpListener, SocketAddr), ServerError> {
    let bind_error = |source| ServerError::Bind { what, addr, source };
    let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
    let local = listener.local_addr().map_err(bind_error)?;
    Ok((listener, local))
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
        ("--max-connections-per-ip", settings.max_connections_per_ip),
    ] {
        if value == 0 {
            return Err(ServerError::Zero { flag });
        }
    }
    let readiness = Arc::new(Readiness::new(caches));
    let (reloader, _) =
        reload::CertReloader::start(settings.tls_cert.clone(), settings.tls_key.clone(), metrics.clone())?;
    readiness.set_certs_loaded(reloader.validity.clone());
    let client_auth = settings.client_ca.as_deref().map(tls::client_verifier).transpose()?;
    let tls_config = tls::server_config(reloader.live.clone(), settings.http2, client_auth);

    let (listener, webhook_addr) = bind("webhook", settings.bind).await?;
    let (admin_listener, admin_addr) = bind("admin", settings.admin_bind).await?;

    let stop_accepting = CancellationToken::new();
    let stop_rest = CancellationToken::new();
    tokio::spawn(reloader.run(settings.cert_reload_interval, stop_rest.clone()));

    let admin_router = admin::router(readiness.clone(), registry);
    let probe_router = admin::probe_router(readiness.clone());
    let admin = {
        let (settings, metrics, stop) = (settings.clone(), metrics.clone(), stop_rest.clone());
        spawn_admin(admin_listener, move |listener| {
            admin_loop(listener, admin_router, probe_router, settings, metrics, stop)
        })?
    };

    let connection_share = body_budget.connection_share();
    let state = routes::AppState::new(
        settings.rules.clone(),
        cluster,
        metrics.clone(),
        settings.max_body_bytes,
        settings.body_read_timeout,
        body_budget,
    );
    // Each connection gets its own share of the body budget.
    let app = {
        let readiness = readiness.clone();
        move || {
            let share = Arc::new(budget::ConnShare::new(connection_share));
            routes::connection_service(state.clone(), share, readiness.clone())
        }
    };
    let accept_loop =
        tokio::spawn(accept_loop(listener, tls_config, app, settings.clone(), metrics, stop_accepting.clone()));
    readiness.set_listener_up();
    tracing::info!(%webhook_addr, %admin_addr, http2 = settings.http2, "trainguard webhook serving");

    Ok(RunningServer { webhook_addr, admin_addr, readiness, settings, stop_accepting, stop_rest, accept_loop, admin })
}

/// The admin port alone, for a process that runs no webhook (`serve --webhook=false`): `/healthz`,
/// `/readyz` and `/metrics` with the same limits, and no certificate read, no webhook port bound.
pub(crate) struct RunningAdmin {
    pub(crate) readiness: Arc<Readiness>,
    settings: ServerSettings,
    stop: CancellationToken,
    admin: AdminThread,
}

/// Binds the admin port of `settings` (its webhook and certificate settings are not read) and
/// starts serving it. Returns once ready to accept.
pub(crate) async fn start_admin(
    settings: ServerSettings,
    metrics: WebhookMetrics,
    registry: Arc<Registry>,
) -> Result<RunningAdmin, ServerError> {
    for (flag, value) in [
        ("--max-admin-connections", settings.max_admin_connections),
        ("--max-connections-per-ip", settings.max_connections_per_ip),
    ] {
        if value == 0 {
            return Err(ServerError::Zero { flag });
        }
    }
    let readiness = Arc::new(Readiness::without_webhook());
    let (admin_listener, admin_addr) = bind("admin", settings.admin_bind).await?;
    let stop = CancellationToken::new();
    let admin = {
        let (router, probe_router) =
            (admin::router(readiness.clone(), registry), admin::probe_router(readiness.clone()));
        let (settings, stop) = (settings.clone(), stop.clone());
        spawn_admin(admin_listener, move |listener| {
            admin_loop(listener, router, probe_router, settings, metrics, stop)
        })?
    };
    tracing::info!(%admin_addr, "trainguard admin port serving (no webhook)");
    Ok(RunningAdmin { readiness, settings, stop, admin })
}

impl RunningAdmin {
    /// Readiness false, wait the drain delay, then close the admin port.
    #[allow(
        clippy::disallowed_methods,
        reason = "the drain delay is real time: endpoints must see readiness false before the port closes"
    )]
    pub(crate) async fn shutdown(self) {
        self.readiness.set_shutting_down();
        tokio::time::sleep(self.settings.drain_delay).await;
        self.stop.cancel();
        self.admin.join().await;
        tracing::info!("trainguard admin port stopped");
    }
}

impl RunningServer {
    /// Readiness false, keep accepting for the drain delay, stop accepting, let in-flight
    /// requests finish (idle keep-alive connections close at once), then stop the rest.
    #[allow(
        clippy::disallowed_methods,
        reason = "the drain delay is real time: endpoints must see readiness false before the port closes"
    )]
    pub async fn shutdown(self) -> ShutdownReport {
        self.readiness.set_shutting_down();
        tracing::info!(drain_delay = ?self.settings.drain_delay, "shutting down: readiness is now false");
        tokio::time::sleep(self.settings.drain_delay).await;
        self.stop_accepting.cancel();
        let report = self.accept_loop.await.unwrap_or(ShutdownReport { connections_cut: usize::MAX });
        self.stop_rest.cancel();
        self.admin.join().await;
        tracing::info!(connections_cut = report.connections_cut, "trainguard webhook stopped");
        report
    }
}

fn conn_settings(settings: &ServerSettings) -> conn::ConnSettings {
    conn::ConnSettings {
        header_read_timeout: settings.header_read_timeout,
        idle_timeout: settings.idle_timeout,
        http2_max_streams: settings.http2_max_concurrent_streams,
        write_timeout: settings.write_timeout,
    }
}

/// A connection's place under its listener's cap.
enum Slot {
    /// One of the listener's `--max-…-connections`.
    Main(#[allow(dead_code)] OwnedSemaphorePermit),
    /// An admin probe slot ([`PROBE_SLOTS`]), taken only when the main ones are all in use.
    Probe(#[allow(dead_code)] OwnedSemaphorePermit),
}

/// What bounds one listener's connections.
#[derive(Clone, Copy)]
struct Bounds<'a> {
    /// `--max-connections` (or `--max-admin-connections`).
    cap: &'a Arc<Semaphore>,
    /// The admin port's probe slots ([`PROBE_SLOTS`]).
    reserve: Option<&'a Arc<Semaphore>>,
    /// The webhook port's idle connections, which make room at the cap.
    idle: Option<&'a Arc<idle::IdleConns>>,
    /// `--max-connections-per-ip`.
    peers: &'a Arc<peers::PeerCap>,
}

/// The next connection and its slot under the listener's cap. A connection from a peer that
/// already has `--max-connections-per-ip` connections open is closed at once and counted. At the
/// cap, the accepted connection waits for a slot (the next ones wait in the kernel's backlog:
/// back-pressure); meanwhile, when given, the probe reserve serves it, and `idle` is asked to close
/// the connection idle the longest ([`idle::EVICT_FLOOR`]) to make room.
#[allow(clippy::disallowed_methods, reason = "backs off after a failed accept instead of spinning")]
async fn next_connection(
    listener: &TcpListener,
    bounds: &Bounds<'_>,
    metrics: &WebhookMetrics,
    stop: &CancellationToken,
    what: &'static str,
) -> Option<(TcpStream, SocketAddr, Slot, peers::PeerSlot)> {
    let Bounds { cap, reserve, idle, peers } = *bounds;
    loop {
        let accepted = tokio::select! {
            biased;
            () = stop.cancelled() => return None,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // EMFILE and friends: back off briefly instead of spinning.
                tracing::warn!(listener = what, error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(peer_slot) = peers.try_take(peer.ip()) else {
            tracing::debug!(listener = what, %peer, "closing a connection: its address has --max-connections-per-ip open");
            metrics.refuse_connection(what, "per_ip_cap");
            drop(tcp);
            continue;
        };
        if let Ok(permit) = cap.clone().try_acquire_owned() {
            return Some((tcp, peer, Slot::Main(permit), peer_slot));
        }
        if let Some(permit) = reserve.and_then(|r| r.clone().try_acquire_owned().ok()) {
            return Some((tcp, peer, Slot::Probe(permit), peer_slot));
        }
        let made_room = idle.is_some_and(|idle| idle.evict_one());
        if made_room {
            metrics.refuse_connection(what, "evicted_idle");
        }
        let slot = tokio::select! {
            biased;
            () = stop.cancelled() => return None,
            permit = cap.clone().acquire_owned() => Slot::Main(permit.ok()?),
            permit = async { reserve?.clone().acquire_owned().await.ok() }, if reserve.is_some() => Slot::Probe(permit?),
        };
        return Some((tcp, peer, slot, peer_slot));
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

/// What every webhook connection's task shares.
#[derive(Clone)]
struct WebhookConn {
    acceptor: TlsAcceptor,
    conn_settings: Arc<conn::ConnSettings>,
    h2_cap: Arc<Semaphore>,
    h2_peers: Arc<peers::PeerCap>,
    stop: CancellationToken,
    open: prometheus_client::metrics::gauge::Gauge,
    metrics: WebhookMetrics,
    release_after_handshake: bool,
    tls_handshake_timeout: Duration,
}

/// A connection `accept` let in, with the slots it holds.
struct Accepted {
    tcp: TcpStream,
    peer: SocketAddr,
    slot: Slot,
    peer_slot: peers::PeerSlot,
    idle_handle: idle::IdleHandle,
}

impl WebhookConn {
    /// One connection: the TLS handshake (bounded), an HTTP/2 slot if it speaks HTTP/2, then
    /// requests until it closes or is closed.
    async fn serve<S, B>(self, accepted: Accepted, service: S)
    where
        S: conn::ConnService<B>,
        B: conn::ServedBody,
    {
        let Accepted { tcp, peer, slot, peer_slot, idle_handle } = accepted;
        let _slot = slot;
        let mut peer_slot = Some(peer_slot);
        self.open.inc();
        let _open = GaugeGuard(&self.open);
        let tls = match tokio::time::timeout(self.tls_handshake_timeout, self.acceptor.accept(tcp)).await {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                self.metrics.refuse_connection("webhook", "handshake_timeout");
                return;
            }
        };
        if self.release_after_handshake {
            peer_slot = None;
        }
        let is_h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        // An HTTP/2 connection may buffer its whole flow-control window outside the body
        // budget, so there are fewer HTTP/2 slots; a client waits for one like for `accept`.
        let _h2_slot = if is_h2 {
            // An authenticated client (--client-ca) is never refused for its address.
            let peer_h2_slot = match self.h2_peers.try_take(peer.ip()) {
                Some(slot) => Some(slot),
                None if self.release_after_handshake => None,
                None => {
                    tracing::debug!(%peer, "closing an HTTP/2 connection: its address holds its share of HTTP/2 slots");
                    self.metrics.refuse_connection("webhook", "per_ip_cap");
                    return;
                }
            };
            match tokio::time::timeout(self.tls_handshake_timeout, self.h2_cap.clone().acquire_owned()).await {
                Ok(Ok(permit)) => Some((permit, peer_h2_slot)),
                _ => {
                    tracing::warn!(%peer, "closing an HTTP/2 connection: all HTTP/2 connection slots are taken");
                    return;
                }
            }
        } else {
            None
        };
        let ended =
            conn::serve(TokioIo::new(tls), is_h2, service, &self.conn_settings, &self.stop, Some(idle_handle)).await;
        if ended == conn::Ended::HeaderTimeout {
            self.metrics.refuse_connection("webhook", "header_timeout");
        }
        drop(peer_slot);
    }
}

async fn accept_loop<S, B>(
    listener: TcpListener,
    tls_config: Arc<rustls::ServerConfig>,
    app: impl Fn() -> S,
    settings: ServerSettings,
    metrics: WebhookMetrics,
    stop: CancellationToken,
) -> ShutdownReport
where
    S: conn::ConnService<B>,
    B: conn::ServedBody,
{
    let tracker = TaskTracker::new();
    let cap = Arc::new(Semaphore::new(settings.max_connections));
    let h2_slots = conn::http2::max_connections(settings.max_inflight_body_bytes);
    let peers = peers::PeerCap::new(settings.max_connections_per_ip);
    let idle = idle::IdleConns::new(settings.evict_idle_after);
    let shared = WebhookConn {
        acceptor: TlsAcceptor::from(tls_config),
        conn_settings: Arc::new(conn_settings(&settings)),
        h2_cap: Arc::new(Semaphore::new(h2_slots)),
        // One address may hold a quarter of the HTTP/2 slots (at least one).
        h2_peers: peers::PeerCap::new((h2_slots / 4).max(1)),
        stop: stop.clone(),
        open: metrics.open_connections("webhook"),
        metrics: metrics.clone(),
        // With --client-ca, every connection that finishes the handshake presented a client
        // certificate the CA signed (the API server's): it gives its per-address slot back then,
        // so the cap bounds only connections still handshaking, and never refuses the API
        // server's calls however many come from one address (a konnectivity agent).
        release_after_handshake: settings.client_ca.is_some(),
        tls_handshake_timeout: settings.tls_handshake_timeout,
    };
    while let Some((tcp, peer, slot, peer_slot)) = next_connection(
        &listener,
        &Bounds { cap: &cap, reserve: None, idle: Some(&idle), peers: &peers },
        &metrics,
        &stop,
        "webhook",
    )
    .await
    {
        let idle_handle = idle.register();
        let _ = tcp.set_nodelay(true);
        let accepted = Accepted { tcp, peer, slot, peer_slot, idle_handle };
        tracker.spawn(shared.clone().serve(accepted, app()));
    }
    drop(listener);
    let open = tracker.len();
    tracing::info!(open_connections = open, grace = ?settings.shutdown_grace, "stopped accepting; draining");
    ShutdownReport { connections_cut: drain(tracker, settings.shutdown_grace).await }
}

/// The admin listener: plain HTTP/1.1 with the webhook's header and idle timeouts, its own
/// connection cap and the per-address cap, so a flood of scrapes or probes cannot exhaust memory
/// either. When the cap is full, up to [`PROBE_SLOTS`] more connections are served the probes
/// only, so the kubelet's `/healthz` and `/readyz` are answered whoever holds the rest.
async fn admin_loop(
    listener: TcpListener,
    router: axum::Router,
    probe_router: axum::Router,
    settings: ServerSettings,
    metrics: WebhookMetrics,
    stop: CancellationToken,
) {
    let tracker = TaskTracker::new();
    let cap = Arc::new(Semaphore::new(settings.max_admin_connections));
    let reserve = Arc::new(Semaphore::new(PROBE_SLOTS));
    let conn_settings = Arc::new(conn_settings(&settings));
    let probe_settings = Arc::new(conn::ConnSettings {
        header_read_timeout: settings.header_read_timeout.min(PROBE_TIMEOUT),
        idle_timeout: PROBE_TIMEOUT,
        http2_max_streams: 1,
        write_timeout: settings.write_timeout.min(PROBE_TIMEOUT),
    });
    let open = metrics.open_connections("admin");
    let service = TowerToHyperService::new(router);
    let probe_service = TowerToHyperService::new(probe_router);
    let peers = peers::PeerCap::new(settings.max_connections_per_ip);
    while let Some((tcp, _peer, slot, peer_slot)) = next_connection(
        &listener,
        &Bounds { cap: &cap, reserve: Some(&reserve), idle: None, peers: &peers },
        &metrics,
        &stop,
        "admin",
    )
    .await
    {
        let (service, probe_service, stop, open, metrics) =
            (service.clone(), probe_service.clone(), stop.clone(), open.clone(), metrics.clone());
        let conn_settings = match slot {
            Slot::Main(_) => conn_settings.clone(),
            Slot::Probe(_) => probe_settings.clone(),
        };
        tracker.spawn(async move {
            open.inc();
            let _open = GaugeGuard(&open);
            let io = TokioIo::new(tcp);
            let ended = match slot {
                Slot::Main(_) => conn::serve(io, false, service, &conn_settings, &stop, None).await,
                Slot::Probe(_) => conn::serve(io, false, probe_service, &conn_settings, &stop, None).await,
            };
            if ended == conn::Ended::HeaderTimeout {
                metrics.refuse_connection("admin", "header_timeout");
            }
            drop((slot, peer_slot));
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
