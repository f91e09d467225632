//! Leader election on a `coordination.k8s.io` Lease (kube-lease-manager: get, create, patch). Only
//! the leader runs the controller; every replica keeps serving admission. Losing the lease — or
//! failing to renew it — stops the controller before anything else happens.

use std::future::Future;
use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::metrics::Metrics;

/// Lease validity after the last renewal, and how long before expiry the holder renews.
pub const LEASE_DURATION_SECONDS: u64 = 15;
pub const LEASE_GRACE_SECONDS: u64 = 5;
const RETRY_MIN: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(30);

pub struct LeaseConfig {
    pub name: String,
    pub namespace: String,
    /// This replica: `POD_NAME`, else the host name, else a random name.
    pub identity: String,
    pub duration_seconds: u64,
    /// Renew this long before expiry (must be less than the duration).
    pub grace_seconds: u64,
}

impl LeaseConfig {
    pub fn new(name: String, namespace: String, identity: String) -> Self {
        LeaseConfig {
            name,
            namespace,
            identity,
            duration_seconds: LEASE_DURATION_SECONDS,
            grace_seconds: LEASE_GRACE_SECONDS,
        }
    }
}

/// This replica's identity in the Lease.
pub fn identity() -> String {
    std::env::var("POD_NAME")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| format!("trainguard-{}", std::process::id()))
}

/// Runs `lead` while this replica holds the lease, until `shutdown`. `lead` gets a token that is
/// cancelled when leadership ends; it must return promptly then. The lease is released on
/// shutdown so the next leader does not wait for it to expire.
pub async fn run_elected<F, Fut>(
    client: Client,
    lease: LeaseConfig,
    metrics: Metrics,
    shutdown: CancellationToken,
    lead: F,
) where
    F: Fn(CancellationToken) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut retry = RETRY_MIN;
    metrics.set_leader(&lease.name, false);
    while !shutdown.is_cancelled() {
        let manager = LeaseManagerBuilder::new(client.clone(), &lease.name)
            .with_namespace(&lease.namespace)
            .with_identity(&lease.identity)
            // kube-lease-manager panics unless 0 < grace < duration.
            .with_duration(lease.duration_seconds.max(2))
            .with_grace(lease.grace_seconds.clamp(1, lease.duration_seconds.max(2) - 1))
            .build()
            .await;
        match manager {
            Ok(manager) => {
                let clean = hold(&manager, &lease, &metrics, &shutdown, &lead).await;
                if let Err(e) = manager.release().await {
                    warn!(error = %e, lease = %lease.name, "could not release the lease");
                }
                if clean {
                    retry = RETRY_MIN;
                }
            }
            Err(e) => {
                warn!(error = %e, lease = %lease.name, namespace = %lease.namespace, "lease manager could not start")
            }
        }
        metrics.set_leader(&lease.name, false);
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = tokio::time::sleep(retry) => {}
        }
        retry = (retry * 2).min(RETRY_MAX);
    }
}

/// Follows the lease until shutdown (true) or an error (false), running `lead` while leader.
async fn hold<F, Fut>(
    manager: &LeaseManager,
    lease: &LeaseConfig,
    metrics: &Metrics,
    shutdown: &CancellationToken,
    lead: &F,
) -> bool
where
    F: Fn(CancellationToken) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut running: Option<(CancellationToken, tokio::task::JoinHandle<()>)> = None;
    let result = loop {
        let finished = async {
            match running.as_mut() {
                Some((_, task)) => {
                    let _ = task.await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => break true,
            _ = finished => {
                warn!(lease = %lease.name, "controller stopped on its own; giving up the lease");
                running = None;
                break false;
            }
            changed = manager.changed() => match changed {
                Ok(true) => {
                    info!(lease = %lease.name, identity = %lease.identity, "became leader: starting the controller");
                    metrics.set_leader(&lease.name, true);
                    let token = shutdown.child_token();
                    running = Some((token.clone(), tokio::spawn(lead(token))));
                }
                Ok(false) => {
                    info!(lease = %lease.name, "lost the lease: stopping the controller");
                    stop(running.take()).await;
                    metrics.set_leader(&lease.name, false);
                }
                Err(e) => {
                    warn!(error = %e, lease = %lease.name, "lease error: stepping down");
                    break false;
                }
            },
        }
    };
    stop(running.take()).await;
    metrics.set_leader(&lease.name, false);
    result
}

async fn stop(running: Option<(CancellationToken, tokio::task::JoinHandle<()>)>) {
    if let Some((token, task)) = running {
        token.cancel();
        let _ = task.await;
    }
}
