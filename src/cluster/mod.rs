//! Cluster state as the admission gate sees it. The rules read a [`ClusterView`]; serve mode
//! backs it with watch-fed caches ([`ClusterCache`]), `validate`/`review --state` and tests with
//! static objects ([`StaticView`]).

pub(crate) mod reflect;
pub(crate) mod view;

use std::path::PathBuf;

pub use reflect::ClusterCache;
pub use view::StateError;
pub use view::{ChildJobState, ClusterView, GateFacts, JobSetFacts, JobSetState, Offline, StaticView};

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
    Ok(kube::Client::try_from(config)?)
}

/// Caches that must have synced once before the webhook is ready (`/readyz`).
pub trait CacheStatus: Send + Sync {
    /// Names of the caches that have not listed their objects yet (a cache whose CRD is absent
    /// counts as synced).
    fn unsynced(&self) -> Vec<&'static str>;
}
