//! `trainguard serve`: the webhook (and, in a cluster, the caches feeding its JobSet gate) and
//! the companion controller, in one process or, with `--controller=false` / `--webhook=false`,
//! in two Deployments whose availability does not depend on each other.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::builder::BoolishValueParser;
use clap::{ArgAction, Args};
use prometheus_client::registry::Registry;

use super::args::RulesArgs;
use crate::certgen;
use crate::cluster::CacheStatus;
use crate::cluster::{ClusterView, Offline};
use crate::logging::LogFormat;
use crate::server::metrics::WebhookMetrics;
use crate::server::{self, ServerSettings};
use trainguard_core::admission::Endpoint;
use trainguard_core::duration::parse as parse_duration;

const DEFAULT_BIND: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 9443);
const DEFAULT_ADMIN_BIND: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 8080);
const DEV_BIND: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9443);
const DEV_ADMIN_BIND: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8080);

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address of the HTTPS webhook listener [default: 0.0.0.0:9443; 127.0.0.1:9443 with --dev]
    #[arg(long, env = "TRAINGUARD_BIND")]
    pub bind: Option<SocketAddr>,

    /// PEM certificate chain served to the API server; re-read every --cert-reload-interval.
    #[arg(long, env = "TRAINGUARD_TLS_CERT", default_value = "/tls/tls.crt")]
    pub tls_cert: PathBuf,

    /// PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "TRAINGUARD_TLS_KEY", default_value = "/tls/tls.key")]
    pub tls_key: PathBuf,

    /// PEM CA certificate(s): require webhook clients to present a certificate signed by one of
    /// them (the API server presents one when its admission configuration names a kubeconfig
    /// with a client certificate for this webhook). Read at start.
    #[arg(long, env = "TRAINGUARD_CLIENT_CA")]
    pub client_ca: Option<PathBuf>,

    /// Address of the plain-HTTP admin listener (/healthz, /readyz, /metrics)
    /// [default: 0.0.0.0:8080; 127.0.0.1:8080 with --dev]
    #[arg(long, env = "TRAINGUARD_ADMIN_BIND")]
    pub admin_bind: Option<SocketAddr>,

    /// Offer HTTP/2 via ALPN. Off by default, like Kubeflow Trainer since HTTP/2 Rapid Reset.
    #[arg(long, env = "TRAINGUARD_HTTP2", value_parser = BoolishValueParser::new())]
    pub http2: bool,

    /// Serve the admission webhook. false: run the companion controller alone (leader-elected),
    /// with the admin port (/healthz, /readyz, /metrics) and no webhook listener, certificates or
    /// JobSet gate caches; needs a cluster. --controller=false is the other half.
    #[arg(long = "webhook", env = "TRAINGUARD_WEBHOOK", action = ArgAction::Set,
          value_parser = BoolishValueParser::new(), default_value = "true", num_args = 0..=1,
          default_missing_value = "true")]
    pub webhook: bool,

    #[command(flatten)]
    pub rules: RulesArgs,

    #[command(flatten)]
    pub controller: crate::controller::ControllerArgs,

    /// Run without a cluster: the JobSet gate sees only the TrainJob's own status, and allowed
    /// gated changes carry a warning saying so.
    #[arg(long, env = "TRAINGUARD_OFFLINE", conflicts_with = "kubeconfig", value_parser = BoolishValueParser::new())]
    pub(crate) offline: bool,

    /// Kubeconfig to reach the cluster (else KUBECONFIG, else the in-cluster service account).
    #[arg(long, env = "TRAINGUARD_KUBECONFIG")]
    pub(crate) kubeconfig: Option<PathBuf>,

    /// How long a broken watch may last before gated changes are denied as "state unknown".
    #[arg(long, env = "TRAINGUARD_CACHE_STALE_AFTER", default_value = "60s", value_parser = parse_duration)]
    pub(crate) cache_stale_after: Duration,

    /// How often the certificate files are re-read (Secret volumes swap a symlink; no events).
    #[arg(long, env = "TRAINGUARD_CERT_RELOAD_INTERVAL", default_value = "10s", value_parser = parse_duration)]
    pub cert_reload_interval: Duration,

    /// Largest AdmissionReview body accepted; larger ones get HTTP 413.
    #[arg(long, env = "TRAINGUARD_MAX_BODY_BYTES", default_value_t = 7 * 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Bytes that all unfinished request bodies together may hold. Beyond it, reading stops
    /// (back-pressure) and a body that waits 3 s gets a retryable 429. A quarter is kept for
    /// bodies of at most 256 KiB (real reviews), so big uploads never starve them. Must be at
    /// least 4/3 of --max-body-bytes. HTTP/2 connections are capped at this / 4 MiB.
    #[arg(long, env = "TRAINGUARD_MAX_INFLIGHT_BODY_BYTES", default_value_t = 64 * 1024 * 1024)]
    pub max_inflight_body_bytes: usize,

    /// Open connections on the webhook port at most; beyond, new ones wait in the kernel's
    /// backlog until one closes.
    #[arg(long, env = "TRAINGUARD_MAX_CONNECTIONS", default_value_t = 512)]
    pub max_connections: usize,

    /// Open connections on the admin port at most (probes and scrapes).
    #[arg(long, env = "TRAINGUARD_MAX_ADMIN_CONNECTIONS", default_value_t = 64)]
    pub max_admin_connections: usize,

    /// A connection (webhook or admin) with no request for this long is closed. Longer than the
    /// API server's 90 s idle timeout, so that it is the client that closes.
    #[arg(long, env = "TRAINGUARD_IDLE_TIMEOUT", default_value = "120s", value_parser = parse_duration)]
    pub idle_timeout: Duration,

    /// Concurrent streams per HTTP/2 connection (with --http2).
    #[arg(long, env = "TRAINGUARD_HTTP2_MAX_CONCURRENT_STREAMS", default_value_t = 128)]
    pub http2_max_concurrent_streams: u32,

    /// Time a client gets to complete the TLS handshake.
    #[arg(long, env = "TRAINGUARD_TLS_HANDSHAKE_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    pub tls_handshake_timeout: Duration,

    /// Time a client gets to send a request's headers, from their first byte (webhook and admin
    /// ports). A new connection must have sent its first request's headers (or, with HTTP/2,
    /// its preface and first request) within this long; an idle keep-alive connection is not
    /// bound by it (see --idle-timeout).
    #[arg(long, env = "TRAINGUARD_HEADER_READ_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub header_read_timeout: Duration,

    /// Open connections from one client IP address at most, per port; further ones are closed
    /// at once. The API server opens few connections, and a pod has one address, so one noisy
    /// client cannot take the whole --max-connections.
    #[arg(long, env = "TRAINGUARD_MAX_CONNECTIONS_PER_IP", default_value_t = 32)]
    pub max_connections_per_ip: usize,

    /// A request body must have arrived this long after its headers (or by the request's own
    /// ?timeout= deadline, if sooner); else it is answered with a retryable denial and its
    /// budget released. Bounds how long a stalled body holds --max-inflight-body-bytes.
    #[arg(long, env = "TRAINGUARD_BODY_READ_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    pub body_read_timeout: Duration,

    /// A connection whose peer takes none of its answer for this long is dropped (a write
    /// blocked this long fails), and so is one asked to close (idle, or at shutdown) that is still
    /// open this long after with nothing in flight: a client that stops reading gives its slot
    /// and its answer's memory back.
    #[arg(long, env = "TRAINGUARD_WRITE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub write_timeout: Duration,

    /// After SIGTERM, keep serving this long with readiness false, so the Service drops the pod
    /// before the listener closes.
    #[arg(long, env = "TRAINGUARD_DRAIN_DELAY", default_value = "0s", value_parser = parse_duration)]
    pub drain_delay: Duration,

    /// Once accepting stops, how long in-flight requests get to finish.
    #[arg(long, env = "TRAINGUARD_SHUTDOWN_GRACE", default_value = "20s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,

    /// Developer mode: bind 127.0.0.1, generate a CA and a serving certificate for localhost,
    /// stay offline unless --kubeconfig is given, and print a curl line to try it.
    #[arg(long, env = "TRAINGUARD_DEV", value_parser = BoolishValueParser::new())]
    pub(crate) dev: bool,

    /// Where --dev writes its certificates and sample review [default: a new private directory
    /// <temp dir>/trainguard-dev-<pid>-<random>, mode 0700, removed when serve stops]. The key
    /// file is written 0600.
    #[arg(long, env = "TRAINGUARD_DEV_DIR")]
    pub(crate) dev_dir: Option<PathBuf>,
}

/// Where the gate's cluster state comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ClusterMode {
    Offline,
    Kubeconfig(Option<PathBuf>),
    InCluster,
}

impl ServeArgs {
    /// Decides the cluster mode without guessing: `--dev` never picks up a default kubeconfig
    /// (it may point at production), and plain `serve` needs some cluster configuration.
    pub(crate) fn cluster_mode(&self) -> anyhow::Result<ClusterMode> {
        if self.offline {
            return Ok(ClusterMode::Offline);
        }
        if let Some(path) = &self.kubeconfig {
            return Ok(ClusterMode::Kubeconfig(Some(path.clone())));
        }
        if self.dev {
            return Ok(ClusterMode::Offline);
        }
        if std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty()) {
            return Ok(ClusterMode::Kubeconfig(None));
        }
        if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
            return Ok(ClusterMode::InCluster);
        }
        anyhow::bail!(
            "no cluster configuration: not running in a pod, no --kubeconfig and no KUBECONFIG. Pass --kubeconfig \
             PATH to use a cluster, --offline to serve without cluster state (gated changes are then allowed with a \
             warning), or --dev to try it on localhost"
        )
    }
}

impl ServeArgs {
    /// Refuses what would run nothing, or a controller with no cluster to act on.
    pub fn check_roles(&self) -> anyhow::Result<()> {
        if !self.webhook && !self.controller.enabled {
            anyhow::bail!(
                "--webhook=false and --controller=false leave nothing to run: --controller=false serves the webhook \
                 alone, --webhook=false runs the companion controller alone, neither runs both"
            );
        }
        if !self.webhook && (self.offline || (self.dev && self.kubeconfig.is_none())) {
            anyhow::bail!(
                "--webhook=false runs only the companion controller, which needs a cluster: pass --kubeconfig PATH \
                 or run it in a pod (--offline, and --dev without --kubeconfig, have no cluster)"
            );
        }
        Ok(())
    }
}

/// Parses and installs everything, then serves until SIGTERM or SIGINT.
impl ServeArgs {
    /// The HTTPS and admin servers' settings from these flags, listening on `bind` and `admin_bind`.
    pub fn server_settings(&self, bind: SocketAddr, admin_bind: SocketAddr) -> ServerSettings {
        ServerSettings {
            bind,
            admin_bind,
            tls_cert: self.tls_cert.clone(),
            tls_key: self.tls_key.clone(),
            http2: self.http2,
            rules: self.rules.rules_config(),
            max_body_bytes: self.max_body_bytes,
            tls_handshake_timeout: self.tls_handshake_timeout,
            header_read_timeout: self.header_read_timeout,
            cert_reload_interval: self.cert_reload_interval,
            drain_delay: self.drain_delay,
            shutdown_grace: self.shutdown_grace,
            max_inflight_body_bytes: self.max_inflight_body_bytes,
            max_connections: self.max_connections,
            max_admin_connections: self.max_admin_connections,
            idle_timeout: self.idle_timeout,
            http2_max_concurrent_streams: self.http2_max_concurrent_streams,
            max_connections_per_ip: self.max_connections_per_ip,
            client_ca: self.client_ca.clone(),
            body_read_timeout: self.body_read_timeout,
            write_timeout: self.write_timeout,
            evict_idle_after: crate::server::idle::EVICT_FLOOR,
        }
    }
}

/// `serve`'s server settings with every flag at its default (the environment is not read),
/// listening on `bind` and `admin_bind`: what the tests start servers from, with their overrides.
#[allow(clippy::expect_used, reason = "serve's flags all have defaults: parsing no arguments cannot fail")]
pub fn default_server_settings(bind: SocketAddr, admin_bind: SocketAddr) -> ServerSettings {
    #[derive(clap::Parser)]
    struct Serve {
        #[command(flatten)]
        args: ServeArgs,
    }
    let command = <Serve as clap::CommandFactory>::command();
    let command = command.mut_args(|arg| arg.env(None::<&str>));
    let matches = command.try_get_matches_from(["serve"]).expect("serve's flags all have defaults");
    let serve = <Serve as clap::FromArgMatches>::from_arg_matches(&matches).expect("serve's defaults");
    serve.args.server_settings(bind, admin_bind)
}

pub fn run(args: ServeArgs, log_format: LogFormat) -> anyhow::Result<ExitCode> {
    args.check_roles()?;
    // Held to the end: dropping it flushes the queued log lines.
    let logging = crate::logging::init(log_format).context("starting the log writer thread")?;
    crate::server::tls::install_default_provider();
    let mode = args.cluster_mode()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    runtime.block_on(serve(args, mode, logging.dropped.clone()))?;
    drop(logging);
    Ok(ExitCode::SUCCESS)
}

/// Everything `/metrics` exports (tests/cli/monitoring.rs checks dashboards and alerts against it).
pub fn metrics_registry(
    log_lines_dropped: crate::logging::writer::DroppedLines,
) -> (Registry, WebhookMetrics, crate::controller::Metrics) {
    let mut registry = Registry::default();
    let metrics = WebhookMetrics::register(&mut registry);
    let controller_metrics = crate::controller::Metrics::register(&mut registry);
    crate::build_info::register(&mut registry);
    crate::server::metrics::LogLinesDropped(log_lines_dropped).register(&mut registry);
    (registry, metrics, controller_metrics)
}

async fn serve(
    mut args: ServeArgs,
    mode: ClusterMode,
    log_lines_dropped: crate::logging::writer::DroppedLines,
) -> anyhow::Result<()> {
    tracing::info!(version = crate::build_info::VERSION, commit = crate::build_info::COMMIT, "trainguard starting");
    let stop = stop_signal();
    // A directory `serve` makes itself is removed when `serve` returns: held until then.
    let (_made_dev_dir, dev_dir) = prepare_dev_dir(&mut args)?;
    let (registry, metrics, controller_metrics) = metrics_registry(log_lines_dropped);
    let shutdown = tokio_util::sync::CancellationToken::new();
    let client = match &mode {
        ClusterMode::Offline => None,
        ClusterMode::Kubeconfig(_) | ClusterMode::InCluster => {
            Some(crate::cluster::client(&mode_kubeconfig(&mode)).await?)
        }
    };
    // The cluster index the gate reads; a controller in this process reads it too.
    let index = match &client {
        Some(client) if args.webhook => Some(cluster_index(client, &args, &metrics, &shutdown)),
        _ => None,
    };
    let controller = match &client {
        Some(client) if args.controller.enabled => {
            Some(ControllerTask::spawn(client, &args, controller_metrics, index.clone(), &shutdown))
        }
        _ => None,
    };

    let settings = args.settings();
    let running = if args.webhook {
        let (cluster, caches) = gate_view(index);
        let running = server::start(settings, cluster, caches, metrics, Arc::new(registry))
            .await
            .map_err(|e| anyhow::anyhow!(start_error_message(&e)))?;
        if let Some(dir) = dev_dir {
            let controller_mode = controller.is_some().then_some(args.controller.planner.mode());
            print!("{}", dev_banner(&dir, running.webhook_addr, running.admin_addr, &mode, controller_mode));
        }
        Running::Webhook(running)
    } else {
        tracing::info!("controller only (--webhook=false): no webhook listener, no certificates");
        Running::AdminOnly(server::start_admin(settings, metrics, Arc::new(registry)).await?)
    };

    // `/healthz` fails when the controller is wedged (never because the API server is down).
    if let Some(controller) = &controller {
        let progress = controller.progress.clone();
        running.readiness().set_liveness(Arc::new(move || progress.problem()));
    }
    run_until_stopped(running, controller, stop, args.webhook, shutdown).await
}

/// With `--dev` and the webhook on: the development certificates in `--dev-dir`, or in a fresh
/// private directory (returned, to be removed when `serve` returns), and the TLS flags pointed at
/// them.
fn prepare_dev_dir(args: &mut ServeArgs) -> anyhow::Result<(Option<MadeDir>, Option<PathBuf>)> {
    let dev_webhook = args.dev && args.webhook;
    let made_dev_dir = (dev_webhook && args.dev_dir.is_none())
        .then(|| fresh_private_dir(&std::env::temp_dir()).map(MadeDir))
        .transpose()?;
    let dev_dir = match (&made_dev_dir, dev_webhook) {
        (Some(made), _) => Some(made.0.clone()),
        (None, true) => args.dev_dir.clone(),
        (None, false) => None,
    };
    if let Some(dir) = &dev_dir {
        write_dev_files(dir)?;
        args.tls_cert = dir.join("tls.crt");
        args.tls_key = dir.join("tls.key");
    }
    Ok((made_dev_dir, dev_dir))
}

/// The companion controller's task, and its progress for `/healthz`.
struct ControllerTask {
    handle: tokio::task::JoinHandle<Result<(), crate::controller::ControllerError>>,
    progress: Arc<crate::controller::health::Progress>,
}

impl ControllerTask {
    /// The controller runs on the elected leader only (leader election is on by default in a
    /// cluster, off with --dev). Without it (--controller=false) nothing of it starts: no Lease,
    /// and none of its watches (pods, nodes, training jobs).
    fn spawn(
        client: &kube::Client,
        args: &ServeArgs,
        metrics: crate::controller::Metrics,
        index: Option<Arc<crate::cluster::ClusterCache>>,
        shutdown: &tokio_util::sync::CancellationToken,
    ) -> Self {
        let mut controller_args = args.controller.clone();
        controller_args.leader_elect.get_or_insert(!args.dev);
        let progress = metrics.progress.clone();
        let handle = tokio::spawn(crate::controller::run_sharing(
            client.clone(),
            controller_args,
            metrics,
            index,
            shutdown.child_token(),
        ));
        ControllerTask { handle, progress }
    }
}

/// The cluster index: the JobSet and Job watches behind the gate, and the controller's JobSets and
/// Jobs when it runs in the same process.
fn cluster_index(
    client: &kube::Client,
    args: &ServeArgs,
    metrics: &WebhookMetrics,
    shutdown: &tokio_util::sync::CancellationToken,
) -> Arc<crate::cluster::ClusterCache> {
    crate::cluster::ClusterCache::start(client.clone(), args.cache_stale_after, metrics.cache.clone(), shutdown.clone())
}

/// What the admission gate reads: every replica serves admission from its own cluster index;
/// offline, only the TrainJob's own status.
fn gate_view(index: Option<Arc<crate::cluster::ClusterCache>>) -> (Arc<dyn ClusterView>, Option<Arc<dyn CacheStatus>>) {
    match index {
        None => {
            tracing::info!("offline: the JobSet gate reads only the TrainJob's own status");
            (Arc::new(Offline), None)
        }
        Some(cache) => (cache.clone(), Some(cache)),
    }
}

/// Serves until SIGTERM/SIGINT, then drains and stops the controller (releasing its Lease, so
/// another replica takes over at once). The controller alone has nothing else to do: if it stops
/// (a configuration error), so does the process, and the kubelet restarts it.
async fn run_until_stopped(
    running: Running,
    controller: Option<ControllerTask>,
    stop: impl std::future::Future<Output = ()>,
    webhook: bool,
    shutdown: tokio_util::sync::CancellationToken,
) -> anyhow::Result<()> {
    let mut handle = controller.map(|c| c.handle);
    let stopped = match handle.as_mut() {
        Some(task) if !webhook => tokio::select! {
            () = stop => None,
            result = task => Some(result),
        },
        _ => {
            stop.await;
            None
        }
    };
    if let Some(result) = stopped {
        running.shutdown().await;
        shutdown.cancel();
        return match result {
            Ok(Ok(())) => Err(anyhow::anyhow!("the companion controller stopped")),
            Ok(Err(e)) => Err(e).context("companion controller"),
            Err(e) => Err(e).context("companion controller task"),
        };
    }
    let report = running.shutdown().await;
    shutdown.cancel();
    if let Some(handle) = handle {
        match handle.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "companion controller stopped with an error"),
            Err(e) => tracing::error!(error = %e, "companion controller task failed"),
        }
    }
    if report.connections_cut > 0 {
        tracing::warn!(connections = report.connections_cut, "grace period ended with requests still in flight");
    }
    Ok(())
}

impl ServeArgs {
    /// The server's settings from the flags, the bind addresses' defaults depending on `--dev`.
    fn settings(&self) -> ServerSettings {
        let default_bind = |dev: SocketAddr, prod: SocketAddr| if self.dev { dev } else { prod };
        self.server_settings(
            self.bind.unwrap_or_else(|| default_bind(DEV_BIND, DEFAULT_BIND)),
            self.admin_bind.unwrap_or_else(|| default_bind(DEV_ADMIN_BIND, DEFAULT_ADMIN_BIND)),
        )
    }
}

/// Why the webhook could not start, said once (the error's own text already holds its causes,
/// so no chain), with what to pass when the serving certificate is what is missing.
fn start_error_message(e: &server::ServerError) -> String {
    match e {
        server::ServerError::Tls(_) => format!(
            "{e}. Pass --tls-cert and --tls-key (env TRAINGUARD_TLS_CERT, TRAINGUARD_TLS_KEY) with a PEM \
             certificate and its key (`trainguard certs` makes a pair), or use --dev for a generated localhost \
             certificate"
        ),
        other => other.to_string(),
    }
}

/// A directory `serve --dev` made itself: its key is good for this run only, so it goes when
/// `serve` returns. One given with `--dev-dir` is the user's and stays.
struct MadeDir(PathBuf);

impl Drop for MadeDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            tracing::warn!(dir = %self.0.display(), error = %e, "could not remove the dev certificate directory");
        }
    }
}

/// What `serve` started: the webhook (with its admin port), or the admin port alone.
enum Running {
    Webhook(server::RunningServer),
    AdminOnly(server::RunningAdmin),
}

impl Running {
    fn readiness(&self) -> &crate::server::admin::Readiness {
        match self {
            Running::Webhook(r) => &r.readiness,
            Running::AdminOnly(a) => &a.readiness,
        }
    }

    async fn shutdown(self) -> server::ShutdownReport {
        match self {
            Running::Webhook(running) => running.shutdown().await,
            Running::AdminOnly(running) => {
                running.shutdown().await;
                server::ShutdownReport { connections_cut: 0 }
            }
        }
    }
}

fn mode_kubeconfig(mode: &ClusterMode) -> Option<PathBuf> {
    match mode {
        ClusterMode::Kubeconfig(path) => path.clone(),
        _ => None,
    }
}

/// SIGINT or SIGTERM, whichever comes first.
fn stop_signal() -> impl std::future::Future<Output = ()> {
    // Registered now, not when first polled: a SIGTERM that comes while `serve` starts is then a
    // graceful stop, not the default action (the process killed at once).
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let streams = signal(SignalKind::interrupt()).and_then(|int| Ok((int, signal(SignalKind::terminate())?)));
        async move {
            match streams {
                Ok((mut int, mut term)) => tokio::select! {
                    _ = int.recv() => tracing::info!("SIGINT received"),
                    _ = term.recv() => tracing::info!("SIGTERM received"),
                },
                Err(e) => {
                    tracing::warn!(error = %e, "cannot listen for SIGINT and SIGTERM; only Ctrl-C stops the server");
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// An UPDATE that changes the overrides of a running TrainJob: what `make run` shows a newcomer.
pub(crate) const DEV_SAMPLE_REVIEW: &str = include_str!("dev_sample_review.json");

/// A new directory under `parent` that only this user can enter (0700), named uniquely: never
/// one that exists already, so nobody can have planted files or symlinks in it.
fn fresh_private_dir(parent: &Path) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    for attempt in 0..16u32 {
        let dir = parent.join(format!("trainguard-dev-{}-{nanos:08x}{attempt:x}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
        }
    }
    anyhow::bail!("could not create a fresh directory under {}", parent.display())
}

/// Writes `contents` to a new file `dir/name` with `mode`: an existing file or symlink of that
/// name is removed first (not followed), and the file is created exclusively (O_EXCL).
fn write_new(dir: &Path, name: &str, contents: &str, mode: u32) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(name);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("replacing {}", path.display())),
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(contents.as_bytes()).with_context(|| format!("writing {}", path.display()))
}

fn write_dev_files(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let sans = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    let chain = certgen::generate_chain("trainguard dev CA", &sans, Duration::from_secs(7 * 24 * 3600))?;
    write_new(dir, "ca.crt", &chain.ca_cert_pem, 0o644)?;
    write_new(dir, "tls.crt", &chain.cert_pem, 0o644)?;
    write_new(dir, "tls.key", &chain.key_pem, 0o600)?;
    write_new(dir, "sample-review.json", DEV_SAMPLE_REVIEW, 0o644)?;
    Ok(())
}

/// What `serve --dev` prints once it listens: where, against what, and how to try it. `controller`
/// is the controller's mode when one runs (a cluster was given and `--controller` is on).
fn dev_banner(
    dir: &Path,
    webhook: SocketAddr,
    admin: SocketAddr,
    cluster: &ClusterMode,
    controller: Option<crate::controller::config::Mode>,
) -> String {
    use crate::controller::config::Mode;
    let d = dir.display();
    let state = match cluster {
        ClusterMode::Offline => "offline: the gate reads only the TrainJob's own status".to_string(),
        ClusterMode::Kubeconfig(Some(path)) => format!("cluster from {}", path.display()),
        ClusterMode::Kubeconfig(None) => "cluster from $KUBECONFIG".to_string(),
        ClusterMode::InCluster => "in-cluster service account".to_string(),
    };
    let controller = match controller {
        None => String::new(),
        Some(Mode::Report) => "; controller in report mode (no writes)".to_string(),
        Some(Mode::Act) => "; controller in ACT mode: it deletes and force-deletes in that cluster".to_string(),
    };
    let port = webhook.port();
    let path = Endpoint::Validate.path();
    format!(
        "trainguard dev webhook on https://localhost:{port} ({state}{controller}; certificates in {d})\n\
         Try it (an UPDATE that changes the overrides of a running TrainJob, so it is denied):\n  \
         curl -sS --cacert {d}/ca.crt -H 'Content-Type: application/json' --data @{d}/sample-review.json \
         https://localhost:{port}{path}\n\
         Health: http://{admin}/healthz  Ready: http://{admin}/readyz  Metrics: http://{admin}/metrics\n\
         Stop with Ctrl-C.\n"
    )
}

#[cfg(test)]
mod dev_banner_tests {
    use super::*;
    use crate::controller::config::Mode;

    #[test]
    fn the_dev_banner_says_what_runs() {
        let (w, a) = ("127.0.0.1:9443".parse().unwrap(), "127.0.0.1:8080".parse().unwrap());
        let kubeconfig = ClusterMode::Kubeconfig(Some(PathBuf::from("/home/me/.kube/config")));
        // (cluster, controller, must contain, must not contain)
        let cases: &[(ClusterMode, Option<Mode>, &str, &str)] = &[
            (ClusterMode::Offline, None, "(offline: the gate reads only", "controller"),
            (
                kubeconfig.clone(),
                Some(Mode::Report),
                "cluster from /home/me/.kube/config; controller in report mode",
                "offline",
            ),
            (kubeconfig.clone(), Some(Mode::Act), "controller in ACT mode", "offline"),
            (kubeconfig, None, "cluster from /home/me/.kube/config; certificates", "offline"),
        ];
        for (cluster, controller, want, not) in cases {
            let banner = dev_banner(Path::new("/tmp/d"), w, a, cluster, *controller);
            assert!(banner.contains(want), "{cluster:?} {controller:?}: {banner}");
            assert!(!banner.contains(not), "{cluster:?} {controller:?}: {banner}");
            assert!(banner.contains("--cacert /tmp/d/ca.crt"), "{banner}");
        }
    }
}

#[cfg(test)]
mod dev_files_tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn the_default_dev_directory_is_fresh_and_private() {
        let parent = tempfile::tempdir().unwrap();
        let a = fresh_private_dir(parent.path()).unwrap();
        let b = fresh_private_dir(parent.path()).unwrap();
        assert_ne!(a, b, "a new directory each time");
        assert_eq!(mode(&a), 0o700);
        write_dev_files(&a).unwrap();
        assert_eq!(mode(&a.join("tls.key")), 0o600, "the private key is readable by its owner only");
        assert_eq!(mode(&a.join("tls.crt")), 0o644);
    }

    #[test]
    fn a_planted_symlink_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "untouched").unwrap();
        let dev = dir.path().join("dev");
        std::fs::create_dir(&dev).unwrap();
        std::os::unix::fs::symlink(&victim, dev.join("tls.key")).unwrap();
        write_dev_files(&dev).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
        assert!(std::fs::symlink_metadata(dev.join("tls.key")).unwrap().file_type().is_file());
        assert_eq!(mode(&dev.join("tls.key")), 0o600);
    }
}
