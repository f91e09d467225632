//! The companion controller (spec `controller.md`): TTL backstop, suspend report and remedy, and
//! escalation of pod deletions stuck on failed nodes. A pure planner over a compact snapshot, and
//! thin shells around it for watches, execution, events, metrics and leader election.
//!
//! Integration with `serve`: flatten [`config::ControllerArgs`] into the serve flags, create
//! [`metrics::Metrics`] with the registry `/metrics` exposes, then spawn [`run`].

pub mod config;
pub mod events;
pub mod execute;
pub mod health;
pub mod leader;
pub mod live;
pub mod metrics;
pub mod namespaces;
pub mod state;
pub mod watch;

use std::sync::Arc;

use kube::Client;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::cluster::ClusterCache;
pub use config::ControllerArgs;
pub use metrics::Metrics;

/// Errors that stop the controller from starting. Once running it retries everything itself.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("invalid controller configuration: {0}")]
    Config(String),
}

/// Runs the companion controller until `shutdown` is cancelled: behind leader election on the
/// Lease `--lease-name` in `--lease-namespace` unless `--leader-elect=false` (`None` counts as on;
/// `serve` turns it off for `--dev`/`--offline`). Returns at once when `--controller=false`.
pub async fn run(
    client: Client,
    args: ControllerArgs,
    metrics: Metrics,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    run_sharing(client, args, metrics, None, shutdown).await
}

/// [`run`], reading JobSets and their Jobs from the process's cluster index when it has one (the
/// webhook's, in `serve` with both on) instead of watching them a second time.
pub(crate) async fn run_sharing(
    client: Client,
    args: ControllerArgs,
    metrics: Metrics,
    index: Option<Arc<ClusterCache>>,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    if !args.enabled {
        info!("companion controller disabled (--controller=false)");
        return Ok(());
    }
    let config = args.planner.plan_config();
    let namespaces = namespaces::Namespaces::parse(&args.namespaces).map_err(ControllerError::Config)?;
    for warning in args.planner.deprecations() {
        warn!("{warning}");
    }
    if config.force_delete_after.is_negative()
        || config.node_not_ready_for.is_negative()
        || config.suspend_stuck_after.is_negative()
        || config.ttl_grace.is_negative()
        || config.admitted_suspended_after.is_negative()
    {
        return Err(ControllerError::Config("durations must not be negative".into()));
    }
    if !args.leader_elect.unwrap_or(true) {
        let bucket = state::new_bucket(&config);
        live::run_with_bucket(client, config, namespaces, metrics, bucket, index, shutdown).await;
        return Ok(());
    }
    let lease = leader::LeaseConfig::new(args.lease_name.clone(), args.lease_namespace(), crate::cluster::replica());
    info!(lease = %lease.name, namespace = %lease.namespace, identity = %lease.identity, "leader election");
    let lead_client = client.clone();
    let lead_metrics = metrics.clone();
    // One budget for every term of this process: a new term must not start with a fresh burst.
    let bucket = state::new_bucket(&config);
    leader::run_elected(client, lease, metrics, shutdown, move |token| {
        live::run_with_bucket(
            lead_client.clone(),
            config.clone(),
            namespaces.clone(),
            lead_metrics.clone(),
            bucket.clone(),
            index.clone(),
            token,
        )
    })
    .await;
    Ok(())
}

#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;
