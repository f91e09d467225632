//! Cluster state as the admission gate sees it. The rules read a [`ClusterView`]; serve mode
//! backs it with watch-fed caches ([`ClusterCache`]), `validate`/`review --state` and tests with
//! static objects ([`StaticView`]).

pub mod metrics;
pub(crate) mod reflect;

use std::path::PathBuf;
use std::time::Duration;

pub use reflect::{ClusterCache, IndexEvent, IndexSource};
pub use trainguard_core::view::StateError;
pub use trainguard_core::view::{
    ChildJobState, ClusterView, GateFacts, JobSetState, JobSetWithJobs, Offline, StaticView,
};

#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    #[error("reading kubeconfig {path}: {source}")]
    Kubeconfig { path: String, source: kube::config::KubeconfigError },
    #[error("loading cluster configuration: {0}")]
    Infer(#[from] kube::config::InferConfigError),
    #[error("creating the Kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

/// A client from an explicit kubeconfig, or inferred (KUBECONFIG, then in-cluster).
pub(crate) async fn client(kubeconfig: &Option<PathBuf>) -> Result<kube::Client, ClientError> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|source| ClientError::Kubeconfig { path: path.display().to_string(), source })?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|source| ClientError::Kubeconfig { path: path.display().to_string(), source })?
        }
        None => kube::Config::infer().await?,
    };
    let mut config = with_timeouts(config);
    if let Ok(agent) = http::HeaderValue::from_str(&user_agent(&replica())) {
        config.headers.push((http::header::USER_AGENT, agent));
    }
    Ok(kube::Client::try_from(config)?)
}

/// Server-side length of every watch call: a watch that has said nothing for this long (plus
/// kube's 5 s margin) is restarted, so one that stalled silently (a half-open connection, a proxy
/// that stopped forwarding) is noticed within a minute instead of kube's default ~290 s.
pub(crate) const WATCH_TIMEOUT_SECONDS: u32 = 55;

/// The longest any response may stay silent: kube's client has no read timeout by default, and a
/// hung GET or list would hold its caller (and its shutdown) forever. Longer than a watch call
/// ([`WATCH_TIMEOUT_SECONDS`]), which the API server ends itself.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(70);

/// `config` with a read timeout on every call (counted from the request, not from when a pooled
/// connection went idle).
fn with_timeouts(mut config: kube::Config) -> kube::Config {
    config.read_timeout = Some(READ_TIMEOUT);
    config.reset_reader_on_write = true;
    config
}

/// A watcher configuration whose calls end after [`WATCH_TIMEOUT_SECONDS`].
pub(crate) fn watch_config() -> kube::runtime::watcher::Config {
    kube::runtime::watcher::Config::default().timeout(WATCH_TIMEOUT_SECONDS)
}

/// This replica's name: `POD_NAME`, else the host name, else `trainguard-<pid>`. The controller's
/// Lease identity and every request's User-Agent carry it.
pub(crate) fn replica() -> String {
    std::env::var("POD_NAME")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| format!("trainguard-{}", std::process::id()))
}

/// The User-Agent of every request: kube's client sends none, so an audit log could not tell one
/// replica's writes from another's (both use the same ServiceAccount). `trainguard/<version>
/// (<replica>)`, the replica as in its Lease identity (`POD_NAME`, else the host name); characters
/// a header cannot carry become `_`.
pub(crate) fn user_agent(replica: &str) -> String {
    let replica: String =
        replica.chars().map(|c| if c.is_ascii_graphic() && c != '(' && c != ')' { c } else { '_' }).collect();
    format!("trainguard/{} ({replica})", env!("CARGO_PKG_VERSION"))
}

/// Caches that must have synced once before the webhook is ready (`/readyz`).
pub trait CacheStatus: Send + Sync {
    /// Names of the caches that have not listed their objects yet (a cache whose CRD is absent
    /// counts as synced).
    fn unsynced(&self) -> Vec<&'static str>;
}

#[cfg(test)]
mod timeout_tests {
    use super::*;

    #[test]
    fn every_call_has_a_read_timeout_and_watches_restart_within_a_minute() {
        let config = with_timeouts(kube::Config::new("https://127.0.0.1:6443".parse().unwrap()));
        assert_eq!(config.read_timeout, Some(READ_TIMEOUT));
        assert!(config.reset_reader_on_write);
        assert_eq!(watch_config().timeout, Some(WATCH_TIMEOUT_SECONDS));
        assert!(u64::from(WATCH_TIMEOUT_SECONDS) + 5 <= 60, "kube adds 5 s to notice a silent watch");
        assert!(READ_TIMEOUT > Duration::from_secs(u64::from(WATCH_TIMEOUT_SECONDS) + 5));
    }
}

#[cfg(test)]
mod user_agent_tests {
    #[test]
    fn names_the_version_and_the_replica_in_a_valid_header() {
        let agent = super::user_agent("trainguard-controller-7d9f-x2k");
        assert_eq!(agent, format!("trainguard/{} (trainguard-controller-7d9f-x2k)", env!("CARGO_PKG_VERSION")));
        let odd = super::user_agent("a b(c)\u{e9}");
        assert!(http::HeaderValue::from_str(&odd).is_ok(), "{odd}");
        assert!(odd.ends_with("(a_b_c__)"), "{odd}");
    }
}
