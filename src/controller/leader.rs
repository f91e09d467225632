//! Leader election on a `coordination.k8s.io` Lease (kube-lease-manager: get, create, patch). Only
//! the leader runs the controller; every replica keeps serving admission. Losing the lease — or
//! failing to renew it — stops the controller before anything else happens.
//!
//! Fencing: the lease manager's renewal call has no deadline of its own (the kube client retries
//! and waits on a slow API server), so the leader does not rely on it to learn that its lease is
//! gone. It reads the Lease itself, with a short timeout, and stops acting at the last renewal it
//! has seen plus the lease duration minus [`LeaseConfig::fence_margin`], whatever the renewal call
//! is doing: by then another replica may be about to take over.

use std::future::Future;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::metrics::Metrics;

/// Lease validity after the last renewal, and how long before expiry the holder renews.
pub(crate) const LEASE_DURATION_SECONDS: u64 = 15;
pub(crate) const LEASE_GRACE_SECONDS: u64 = 5;
/// Stop acting this long before the lease could expire (clock skew between replicas, and the
/// time an in-flight write needs to land or be cut).
pub(crate) const FENCE_MARGIN: Duration = Duration::from_secs(3);
const RETRY_MIN: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(30);

pub(crate) struct LeaseConfig {
    pub name: String,
    pub namespace: String,
    /// This replica: `POD_NAME`, else the host name, else a random name.
    pub(crate) identity: String,
    pub(crate) duration_seconds: u64,
    /// Renew this long before expiry (must be less than the duration).
    pub(crate) grace_seconds: u64,
    /// Stop acting this long before the lease could expire (less than the duration).
    /// Must be less than the grace, so that a renewal is seen before the fence falls.
    pub(crate) fence_margin: Duration,
}

impl LeaseConfig {
    pub(crate) fn new(name: String, namespace: String, identity: String) -> Self {
        LeaseConfig {
            name,
            namespace,
            identity,
            duration_seconds: LEASE_DURATION_SECONDS,
            grace_seconds: LEASE_GRACE_SECONDS,
            fence_margin: FENCE_MARGIN,
        }
    }

    fn duration(&self) -> Duration {
        Duration::from_secs(self.duration_seconds.max(2))
    }

    /// Timeout of each lease call made here (start, read, release): a third of the lease.
    fn call_timeout(&self) -> Duration {
        self.duration() / 3
    }

    /// When the lease manager renews a lease renewed at `renewed`, plus a little: the first
    /// time worth reading the Lease back.
    fn next_renewal_check(&self, renewed: SystemTime) -> tokio::time::Instant {
        let grace = Duration::from_secs(self.grace_seconds);
        let due = renewed + self.duration().saturating_sub(grace) + Duration::from_millis(250);
        tokio::time::Instant::now() + due.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO)
    }

    /// How often the Lease is read again while a due renewal has not shown up.
    fn retry_interval(&self) -> Duration {
        let grace = Duration::from_secs(self.grace_seconds);
        (grace.saturating_sub(self.fence_margin) / 4).max(Duration::from_millis(100))
    }

    /// When to stop acting after a renewal at `renewed` (wall clock, as written into the Lease).
    fn fence_at(&self, renewed: SystemTime) -> tokio::time::Instant {
        let expiry = renewed + self.duration().saturating_sub(self.fence_margin);
        let left = expiry.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO);
        tokio::time::Instant::now() + left
    }
}

/// What the leader learns from reading its Lease.
enum Renewal {
    /// Held by this replica, renewed at this time.
    Held(SystemTime),
    /// Held by someone else or by no one.
    NotHeld,
    /// Could not tell (the call failed or timed out).
    Unknown,
}

async fn read_lease(api: &Api<Lease>, lease: &LeaseConfig) -> Renewal {
    match tokio::time::timeout(lease.call_timeout(), api.get(&lease.name)).await {
        Ok(Ok(object)) => {
            let spec = object.spec.unwrap_or_default();
            if spec.holder_identity.as_deref() != Some(lease.identity.as_str()) {
                return Renewal::NotHeld;
            }
            match spec.renew_time.or(spec.acquire_time) {
                Some(t) => {
                    let millis = u64::try_from(t.0.as_millisecond()).unwrap_or(0);
                    Renewal::Held(SystemTime::UNIX_EPOCH + Duration::from_millis(millis))
                }
                None => Renewal::Unknown,
            }
        }
        Ok(Err(e)) => {
            debug!(error = %e, lease = %lease.name, "reading the lease failed");
            Renewal::Unknown
        }
        Err(_) => {
            debug!(lease = %lease.name, "reading the lease timed out");
            Renewal::Unknown
        }
    }
}

/// Runs `lead` while this replica holds the lease, until `shutdown`. `lead` gets a token that is
/// cancelled when leadership ends; it must return promptly then. The lease is released on
/// shutdown so the next leader does not wait for it to expire.
#[allow(clippy::disallowed_methods, reason = "waits out the retry period before the next election attempt")]
pub(crate) async fn run_elected<F, Fut>(
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
    let api: Api<Lease> = Api::namespaced(client.clone(), &lease.namespace);
    while !shutdown.is_cancelled() {
        let manager = LeaseManagerBuilder::new(client.clone(), &lease.name)
            .with_namespace(&lease.namespace)
            .with_identity(&lease.identity)
            // kube-lease-manager panics unless 0 < grace < duration.
            .with_duration(lease.duration_seconds.max(2))
            .with_grace(lease.grace_seconds.clamp(1, lease.duration_seconds.max(2) - 1))
            .build();
        match tokio::time::timeout(lease.call_timeout(), manager).await {
            Ok(Ok(manager)) => {
                let clean = hold(&manager, &api, &lease, &metrics, &shutdown, &lead).await;
                match tokio::time::timeout(lease.call_timeout(), manager.release()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => warn!(error = %e, lease = %lease.name, "could not release the lease"),
                    Err(_) => warn!(lease = %lease.name, "releasing the lease timed out"),
                }
                if clean {
                    retry = RETRY_MIN;
                }
            }
            Ok(Err(e)) => {
                warn!(error = %e, lease = %lease.name, namespace = %lease.namespace, "lease manager could not start")
            }
            Err(_) => warn!(lease = %lease.name, namespace = %lease.namespace, "lease manager start timed out"),
        }
        metrics.set_leader(&lease.name, false);
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = tokio::time::sleep(retry) => {}
        }
        retry = (retry * 2).min(RETRY_MAX);
    }
}

/// Follows the lease until shutdown (true) or an error or a fence (false), running `lead` while
/// leader.
async fn hold<F, Fut>(
    manager: &LeaseManager,
    api: &Api<Lease>,
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
    let mut term = Term::default();
    // The lease manager's future and the Lease read are kept across iterations: dropping the
    // manager's future mid-renewal would cancel the renewal.
    let mut changed = Box::pin(manager.changed());
    let mut check: Option<std::pin::Pin<Box<dyn Future<Output = Renewal> + Send + '_>>> = None;
    let result = loop {
        let finished = async {
            match running.as_mut() {
                Some((_, task)) => {
                    let _ = task.await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        let checking = check.is_some();
        let checked = async {
            match check.as_mut() {
                Some(read) => read.await,
                None => std::future::pending().await,
            }
        };
        let fence_at = term.fence.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => break true,
            () = tokio::time::sleep_until(fence_at), if term.leading() => {
                warn!(
                    lease = %lease.name,
                    margin = ?lease.fence_margin,
                    "no lease renewal seen in time: stopping the controller before the lease can expire"
                );
                break false;
            }
            renewal = checked => {
                check = None;
                if !term.read_back(renewal, lease) {
                    warn!(lease = %lease.name, "the lease is no longer ours: stopping the controller");
                    break false;
                }
            }
            () = tokio::time::sleep_until(term.next_check), if term.leading() && !checking => {
                check = Some(Box::pin(read_lease(api, lease)));
            }
            _ = finished => {
                warn!(lease = %lease.name, "controller stopped on its own; giving up the lease");
                running = None;
                break false;
            }
            result = &mut changed => {
                changed = Box::pin(manager.changed());
                match result {
                    Ok(true) => {
                        info!(lease = %lease.name, identity = %lease.identity, "became leader: starting the controller");
                        metrics.set_leader(&lease.name, true);
                        term.acquired(lease);
                        let token = shutdown.child_token();
                        running = Some((token.clone(), tokio::spawn(lead(token))));
                    }
                    Ok(false) => {
                        info!(lease = %lease.name, "lost the lease: stopping the controller");
                        term = Term::default();
                        check = None;
                        stop(running.take()).await;
                        metrics.set_leader(&lease.name, false);
                    }
                    Err(e) => {
                        warn!(error = %e, lease = %lease.name, "lease error: stepping down");
                        break false;
                    }
                }
            }
        }
    };
    // Stop acting first; the manager's future may still hold its state lock.
    drop(check);
    drop(changed);
    stop(running.take()).await;
    metrics.set_leader(&lease.name, false);
    result
}

/// One term as leader, as far as fencing goes: when to stop acting unless a renewal is seen
/// before, the last renewal seen, and when to read the Lease back next. Default: not leading.
#[derive(Debug)]
struct Term {
    fence: Option<tokio::time::Instant>,
    last_renewal: SystemTime,
    next_check: tokio::time::Instant,
}

impl Default for Term {
    fn default() -> Self {
        Term { fence: None, last_renewal: SystemTime::UNIX_EPOCH, next_check: tokio::time::Instant::now() }
    }
}

impl Term {
    fn leading(&self) -> bool {
        self.fence.is_some()
    }

    /// Just acquired: the lease runs from about now; read it back at once, since the Lease says
    /// when it was really acquired.
    fn acquired(&mut self, lease: &LeaseConfig) {
        *self = Term {
            fence: Some(lease.fence_at(SystemTime::now())),
            last_renewal: SystemTime::UNIX_EPOCH,
            next_check: tokio::time::Instant::now(),
        };
    }

    /// A read-back of the Lease: a newer renewal moves the fence; false when the Lease is no
    /// longer ours while leading.
    fn read_back(&mut self, renewal: Renewal, lease: &LeaseConfig) -> bool {
        self.next_check = tokio::time::Instant::now() + lease.retry_interval();
        match renewal {
            Renewal::Held(renewed) if self.leading() && renewed > self.last_renewal => {
                self.last_renewal = renewed;
                self.fence = Some(lease.fence_at(renewed));
                self.next_check = lease.next_renewal_check(renewed);
                true
            }
            Renewal::NotHeld if self.leading() => false,
            _ => true,
        }
    }
}

async fn stop(running: Option<(CancellationToken, tokio::task::JoinHandle<()>)>) {
    if let Some((token, task)) = running {
        token.cancel();
        let _ = task.await;
    }
}
