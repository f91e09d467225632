//! The executor: performs the planner's actions against the API server, and nothing else. Before
//! each destructive action it reads the object live and re-applies the same rule the planner used;
//! deletes carry UID (and, for jobs, resourceVersion) preconditions because pod and job names
//! repeat. In report mode it does the reads and publishes `Would…` events, but no writes.
//!
//! One writer: it checks leadership (the token the loop runs under) before every request, and
//! [`run`] drops whatever is still queued once leadership ends, so a former leader stops within the
//! request it has in flight. Force-delete tokens are taken here, when a delete is executed, and the
//! brake is decided here on the node cache as it is at execution time.
//!
//! Every request it makes is listed in `crate::rbac::API_CALLS` (checked by the mock-API tests).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions, PropagationPolicy};
use kube::{Client, Error as KubeError};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::config::{Mode, PlanConfig, Propagation};
use super::events::EventSink;
use super::metrics::Metrics;
use super::state::{Outcome, Report, SharedBucket, Work};
use trainguard_core::duration::plus;
use trainguard_core::model::kubeflow_v1::{TrainingJobView, TrainingKind};
use trainguard_core::model::pod::{NodeView, PodView};
use trainguard_core::model::trainjob_state::TrainJobStateView;
use trainguard_core::planner::facts::{JobFacts, NodeFacts, PodFacts, PodPhase, TrainJobFacts};
use trainguard_core::planner::node_failure::{
    NodeHealth, blocking_finalizers, brake_message, escalate_from, finalizers_episode, finalizers_message, node_health,
    trusted,
};
use trainguard_core::planner::suspend::{RestoreVerdict, restore_patch, restore_verdict, stash_patch, v1_stuck};
use trainguard_core::planner::ttl::{TtlVerdict, delete_failed_message, trainjob_verdict, verdict};
use trainguard_core::planner::{
    Action, EventType, JobPatchKind, NodeState, PlannedEvent, Reason, Rule, Target, TargetKind, ZoneHealth,
};

/// Field manager of every write.
pub(crate) const FIELD_MANAGER: &str = "trainguard";

/// The `reason` labels of `trainguard_force_delete_suppressed_total`, which are also the episodes
/// of the planner's `ForceDeleteSuppressed` events.
const SUPPRESSED_REASONS: [&str; 3] = ["zone-brake", "cluster-brake", "rate-limit"];

/// Where the executor reads the time: the wall clock in production, a fixed one in tests.
pub(crate) type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

pub(crate) fn system_clock() -> Clock {
    Arc::new(Timestamp::now)
}

/// What the executor shares with the controller loop (and, for the bucket, with later terms).
#[derive(Clone)]
pub struct Shared {
    /// Cancelled when leadership ends or on shutdown: no request after that.
    pub(crate) leading: CancellationToken,
    /// The force-delete budget; tokens are taken when a delete is executed.
    pub(crate) bucket: SharedBucket,
    /// The brake's view of the node cache, as the loop last updated it.
    pub(crate) zones: Arc<ArcSwap<ZoneHealth>>,
}

impl Shared {
    pub fn new(leading: CancellationToken, bucket: SharedBucket) -> Self {
        Shared { leading, bucket, zones: Arc::default() }
    }

    /// A bucket of `per_minute` tokens that starts full (tests, one-shot runs).
    #[cfg(test)]
    pub(crate) fn full_bucket(per_minute: u32) -> SharedBucket {
        Arc::new(std::sync::Mutex::new(trainguard_core::planner::TokenBucket::per_minute(per_minute)))
    }
}

pub struct Executor {
    client: Client,
    shared: Shared,
    config: PlanConfig,
    events: EventSink,
    metrics: Metrics,
    clock: Clock,
    /// Events the executor itself raised (failures, its own brake), deduplicated like the planner's.
    own_events: HashSet<(Arc<str>, Reason, String)>,
}

/// How one write step ended.
struct Step {
    outcome: Outcome,
    /// The write happened (or in report mode: would have): publish the events that report it.
    wrote: bool,
}

impl Step {
    fn done(wrote: bool) -> Self {
        Step { outcome: Outcome::Done, wrote }
    }
    fn stop(outcome: Outcome) -> Self {
        Step { outcome, wrote: false }
    }
}

/// Severity for merging outcomes of several steps of one work item.
fn rank(o: Outcome) -> u8 {
    match o {
        Outcome::Done => 0,
        Outcome::Aborted => 1,
        Outcome::Suppressed => 2,
        Outcome::RateLimited(_) => 3,
        Outcome::Conflict => 4,
        Outcome::Failed => 5,
    }
}

fn api_code(e: &KubeError) -> Option<u16> {
    match e {
        KubeError::Api(status) => Some(status.code),
        _ => None,
    }
}

/// The longest a write (events included) may take. Shorter than the leader's fence margin
/// ([`super::leader::FENCE_MARGIN`]): a write sent just before the fence falls is cut before the
/// lease could expire, so it never lands while another replica may lead. A write in flight is
/// also cut the moment leadership ends.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest a live read (the re-check before a write) may take: kube's client has no read
/// timeout of its own, and a hung GET would hold the loop and its shutdown.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(10);

const _: () = assert!(WRITE_TIMEOUT.as_millis() < super::leader::FENCE_MARGIN.as_millis());

/// A write cut short (timed out, or leadership ended), as a client-side error.
fn write_cut(why: &'static str) -> KubeError {
    KubeError::Service(Box::new(std::io::Error::new(std::io::ErrorKind::TimedOut, why)))
}

impl Executor {
    /// A write: `call` within [`WRITE_TIMEOUT`], and only while leading.
    async fn bounded<T>(&self, call: impl Future<Output = Result<T, KubeError>>) -> Result<T, KubeError> {
        self.bounded_for(WRITE_TIMEOUT, call).await
    }

    /// A live read: `call` within [`READ_TIMEOUT`], and only while leading.
    async fn read<T>(&self, call: impl Future<Output = Result<T, KubeError>>) -> Result<T, KubeError> {
        self.bounded_for(READ_TIMEOUT, call).await
    }

    async fn bounded_for<T>(
        &self,
        limit: Duration,
        call: impl Future<Output = Result<T, KubeError>>,
    ) -> Result<T, KubeError> {
        tokio::select! {
            biased;
            () = self.shared.leading.cancelled() => Err(write_cut("leadership ended during the request")),
            result = tokio::time::timeout(limit, call) => {
                result.unwrap_or_else(|_| Err(write_cut("the request timed out")))
            }
        }
    }

    pub fn new(
        client: Client,
        config: PlanConfig,
        events: EventSink,
        metrics: Metrics,
        clock: Clock,
        shared: Shared,
    ) -> Self {
        Executor { client, shared, config, events, metrics, clock, own_events: HashSet::new() }
    }

    /// Still the leader (or running without election): requests may be made.
    fn leading(&self) -> bool {
        !self.shared.leading.is_cancelled()
    }

    fn report_mode(&self) -> bool {
        self.config.mode == Mode::Report
    }

    /// Executes one work item in order. Events marked `after_write` are published only if the
    /// write before them (same rule) happened; the rest of a rule stops at its first failed step.
    pub(crate) async fn execute(&mut self, work: Work) -> Report {
        let mut outcome = Outcome::Done;
        let mut published = Vec::new();
        let mut wrote: Option<(Rule, bool)> = None;
        let mut stopped: HashSet<Rule> = HashSet::new();
        let mut status_patch: Option<Value> = None;
        // Finalizer warnings the planner already predicted (published after the delete).
        let predicted: HashSet<String> = work
            .actions
            .iter()
            .filter_map(|p| match &p.action {
                Action::Event(e) if e.reason == Reason::PodBlockedByFinalizers => Some(e.episode.clone()),
                _ => None,
            })
            .collect();
        for planned in &work.actions {
            let rule = planned.rule;
            if stopped.contains(&rule) {
                continue;
            }
            if !self.leading() {
                debug!(key = ?work.key, "leadership ended: dropping the rest of this work");
                outcome = Outcome::Aborted;
                break;
            }
            let step = match &planned.action {
                Action::Event(e) => {
                    // A brake or the rate limit that held a force delete back when it was
                    // planned counts like one found at execution (the episode is the reason).
                    if e.reason == Reason::ForceDeleteSuppressed
                        && let Some(reason) = SUPPRESSED_REASONS.iter().find(|r| **r == e.episode)
                    {
                        self.metrics.suppressed(reason);
                    }
                    let write_ok = wrote.is_some_and(|(r, ok)| r == rule && ok);
                    if (!e.after_write || write_ok) && self.publish(e, rule).await {
                        published.push((e.target.uid.clone(), e.reason, e.episode.clone()));
                    }
                    continue;
                }
                Action::Requeue { .. } => continue,
                Action::PatchPodStatus { patch, .. } => {
                    // Sent together with the force delete that follows, after its re-check.
                    status_patch = Some(patch.clone());
                    continue;
                }
                Action::DeleteJob { target, propagation, expires_at, .. } => {
                    self.delete_job(target, *propagation, *expires_at, &mut published).await
                }
                Action::PatchJob { target, kind, .. } => self.patch_job(target, kind, work.live_pods).await,
                Action::ForceDeletePod { target, job, node, .. } => {
                    self.force_delete_pod(target, job, node, status_patch.take(), &predicted, &mut published).await
                }
            };
            wrote = Some((rule, step.wrote));
            if step.outcome != Outcome::Done || !step.wrote {
                stopped.insert(rule);
            }
            if rank(step.outcome) > rank(outcome) {
                outcome = step.outcome;
            }
        }
        Report { key: work.key, outcome, published }
    }

    async fn publish(&self, event: &PlannedEvent, rule: Rule) -> bool {
        if !self.leading() {
            return false;
        }
        info!(
            reason = %event.published_reason,
            kind = event.target.kind.kind(),
            object = %event.target.id,
            detail = %event.message,
            "event"
        );
        match self.bounded(self.events.publish(event, rule)).await {
            Ok(()) => true,
            Err(e) => {
                warn!(error = %e, reason = %event.published_reason, object = %event.target.id, "could not publish event");
                false
            }
        }
    }

    /// Publishes an event the executor raised itself, once per (UID, reason, episode).
    async fn publish_own(&mut self, event: PlannedEvent, rule: Rule, published: &mut Vec<(Arc<str>, Reason, String)>) {
        let key = (event.target.uid.clone(), event.reason, event.episode.clone());
        if self.own_events.contains(&key) {
            return;
        }
        if self.publish(&event, rule).await {
            // Bounded memory: forgetting only risks one repeated event.
            if self.own_events.len() > 10_000 {
                self.own_events.clear();
            }
            self.own_events.insert(key.clone());
            published.push(key);
        }
    }

    /// An event the executor raises itself (not planned).
    fn own_event(
        &self,
        target: &Target,
        type_: EventType,
        reason: Reason,
        message: String,
        episode: String,
    ) -> PlannedEvent {
        PlannedEvent {
            target: target.clone(),
            type_,
            reason,
            published_reason: reason.published(self.config.mode),
            message,
            episode,
            after_write: false,
            related: None,
        }
    }

    fn job_api(&self, kind: TrainingKind, namespace: &str) -> Api<TrainingJobView> {
        Api::namespaced_with(self.client.clone(), namespace, &kind.api_resource())
    }

    /// docs/controller.md (TTL after finished) at expiry: live GET, re-check, DELETE with UID + resourceVersion preconditions.
    async fn delete_job(
        &mut self,
        target: &Target,
        propagation: Propagation,
        planned_expiry: Timestamp,
        published: &mut Vec<(Arc<str>, Reason, String)>,
    ) -> Step {
        let kind = match target.kind {
            TargetKind::Job(kind) => kind,
            TargetKind::TrainJob => return self.delete_trainjob(target, propagation, planned_expiry, published).await,
            TargetKind::Pod => return Step::stop(Outcome::Aborted),
        };
        let api = self.job_api(kind, &target.id.namespace);
        let live = match self.read(api.get_opt(&target.id.name)).await {
            Ok(Some(live)) => live,
            Ok(None) => return Step::done(false),
            Err(e) => {
                warn!(error = %e, job = %target.id, "TTL: live GET failed");
                return Step::stop(Outcome::Failed);
            }
        };
        let Ok(facts) = JobFacts::from_view(kind, &live) else { return Step::stop(Outcome::Aborted) };
        if facts.uid != target.uid {
            debug!(job = %target.id, "TTL: a new job has the name now; leaving it to its own plan");
            return Step::done(false);
        }
        let now = (self.clock)();
        let TtlVerdict::Expired { expires_at, .. } = verdict(&facts, now, &self.config) else {
            debug!(job = %target.id, "TTL: no longer expired on the live object");
            return Step::stop(Outcome::Aborted);
        };
        if expires_at != planned_expiry {
            debug!(job = %target.id, "TTL: expiry moved since planning; re-checked live, still expired");
        }
        self.ttl_delete(
            &api,
            target,
            kind.kind(),
            &facts.uid,
            &facts.resource_version,
            propagation,
            expires_at,
            now,
            planned_expiry,
            published,
        )
        .await
    }

    /// The TrainJob TTL at expiry: live GET, the same rule on the live object, DELETE (propagation
    /// Background) with UID + resourceVersion preconditions.
    async fn delete_trainjob(
        &mut self,
        target: &Target,
        propagation: Propagation,
        planned_expiry: Timestamp,
        published: &mut Vec<(Arc<str>, Reason, String)>,
    ) -> Step {
        let api: Api<TrainJobStateView> = Api::namespaced_with(self.client.clone(), &target.id.namespace, &());
        let live = match self.read(api.get_opt(&target.id.name)).await {
            Ok(Some(live)) => live,
            Ok(None) => return Step::done(false),
            Err(e) => {
                warn!(error = %e, trainjob = %target.id, "TTL: live GET failed");
                return Step::stop(Outcome::Failed);
            }
        };
        let Ok(facts) = TrainJobFacts::from_view(&live) else { return Step::stop(Outcome::Aborted) };
        if facts.uid != target.uid {
            debug!(trainjob = %target.id, "TTL: a new TrainJob has the name now; leaving it to its own plan");
            return Step::done(false);
        }
        let now = (self.clock)();
        let TtlVerdict::Expired { expires_at, .. } = trainjob_verdict(&facts, now, &self.config) else {
            debug!(trainjob = %target.id, "TTL: no longer expired on the live object");
            return Step::stop(Outcome::Aborted);
        };
        self.ttl_delete(
            &api,
            target,
            "TrainJob",
            &facts.uid,
            &facts.resource_version,
            propagation,
            expires_at,
            now,
            planned_expiry,
            published,
        )
        .await
    }

    /// The DELETE of a TTL that the live re-check confirmed, and what its answer means.
    #[allow(clippy::too_many_arguments)]
    async fn ttl_delete<K>(
        &mut self,
        api: &Api<K>,
        target: &Target,
        kind: &'static str,
        uid: &str,
        resource_version: &str,
        propagation: Propagation,
        expires_at: Timestamp,
        now: Timestamp,
        planned_expiry: Timestamp,
        published: &mut Vec<(Arc<str>, Reason, String)>,
    ) -> Step
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        if self.report_mode() {
            self.metrics.ttl_deletion(kind, "would-delete");
            return Step::done(true);
        }
        let params = DeleteParams {
            propagation_policy: Some(match propagation {
                Propagation::Background => PropagationPolicy::Background,
                Propagation::Foreground => PropagationPolicy::Foreground,
                Propagation::Orphan => PropagationPolicy::Orphan,
            }),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: Some(resource_version.to_string()).filter(|rv| !rv.is_empty()),
            }),
            ..DeleteParams::default()
        };
        if !self.leading() {
            return Step::stop(Outcome::Aborted);
        }
        match self.bounded(api.delete(&target.id.name, &params)).await {
            Ok(_) => {
                info!(job = %target.id, kind, "TTL: deleted");
                self.metrics.ttl_deletion(kind, "deleted");
                let ttl_expiry = plus(expires_at, -self.config.ttl_grace);
                self.metrics.ttl_deletion_delay_seconds.observe(now.duration_since(ttl_expiry).as_secs_f64().max(0.0));
                Step::done(true)
            }
            Err(e) if api_code(&e) == Some(404) => {
                self.metrics.ttl_deletion(kind, "not-found");
                Step::done(false)
            }
            Err(e) if api_code(&e) == Some(409) => {
                // Changed between GET and DELETE: re-evaluate now.
                self.metrics.ttl_deletion(kind, "conflict");
                Step::stop(Outcome::Conflict)
            }
            Err(e) => {
                warn!(error = %e, job = %target.id, "TTL: delete failed");
                self.metrics.ttl_deletion(kind, "error");
                let episode = format!("delete-failed@{planned_expiry}");
                let event = self.own_event(
                    target,
                    EventType::Warning,
                    Reason::TTLDeleteFailed,
                    delete_failed_message(&e.to_string()),
                    episode,
                );
                self.publish_own(event, Rule::Ttl, published).await;
                Step::stop(Outcome::Failed)
            }
        }
    }

    /// docs/controller.md (Preemption (suspend)) remedy and restore: live GET, re-check, merge patch with the live resourceVersion.
    async fn patch_job(&mut self, target: &Target, kind: &JobPatchKind, live_pods: u32) -> Step {
        let TargetKind::Job(job_kind) = target.kind else { return Step::stop(Outcome::Aborted) };
        let api = self.job_api(job_kind, &target.id.namespace);
        let live = match self.read(api.get_opt(&target.id.name)).await {
            Ok(Some(live)) => live,
            Ok(None) => return Step::done(false),
            Err(e) => {
                warn!(error = %e, job = %target.id, "patch: live GET failed");
                return Step::stop(Outcome::Failed);
            }
        };
        let Ok(facts) = JobFacts::from_view(job_kind, &live) else { return Step::stop(Outcome::Aborted) };
        if facts.uid != target.uid || facts.guard().is_some() {
            return Step::stop(Outcome::Aborted);
        }
        let live_target = Target { resource_version: facts.resource_version.clone(), ..target.clone() };
        let body = match kind {
            JobPatchKind::Stash { ttl } => {
                let still = facts.ttl_seconds == Some(*ttl) && v1_stuck(&facts, live_pods).is_stuck();
                if !still {
                    return Step::stop(Outcome::Aborted);
                }
                stash_patch(&live_target, *ttl)
            }
            JobPatchKind::Restore { ttl } => {
                if restore_verdict(&facts) != (RestoreVerdict::Restore { ttl: *ttl }) {
                    return Step::stop(Outcome::Aborted);
                }
                restore_patch(&live_target, *ttl)
            }
        };
        if self.report_mode() {
            return Step::done(true);
        }
        if !self.leading() {
            return Step::stop(Outcome::Aborted);
        }
        let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() };
        match self.bounded(api.patch(&target.id.name, &params, &Patch::Merge(&body))).await {
            Ok(_) => {
                info!(job = %target.id, patch = %body, "patched job");
                Step::done(true)
            }
            Err(e) if api_code(&e) == Some(404) => Step::done(false),
            Err(e) if api_code(&e) == Some(409) => Step::stop(Outcome::Conflict),
            Err(e) => {
                warn!(error = %e, job = %target.id, "job patch failed");
                Step::stop(Outcome::Failed)
            }
        }
    }

    /// docs/controller.md (Node failure) steps 1–5: live GET of pod and node, re-check, brake, status patch (UID
    /// precondition), DELETE with grace 0 and UID precondition. Finalizers are never touched.
    async fn force_delete_pod(
        &mut self,
        target: &Target,
        job: &Target,
        node_name: &str,
        status_patch: Option<Value>,
        predicted: &HashSet<String>,
        published: &mut Vec<(Arc<str>, Reason, String)>,
    ) -> Step {
        let pods: Api<PodView> = Api::namespaced(self.client.clone(), &target.id.namespace);
        let (pod, deletion) = match self.live_stuck_pod(&pods, target, node_name).await {
            Ok(live) => live,
            Err(step) => return step,
        };
        let (node, health) = match self.live_node_still_failed(target, node_name, &pod, deletion).await {
            Ok(live) => live,
            Err(step) => return step,
        };
        if let Some(step) = self.brake_on_fresh_counts(target, node_name, node.as_ref(), published).await {
            return step;
        }
        if self.report_mode() {
            self.metrics.force_deletion("would-delete");
            return Step::done(true);
        }
        if !self.leading() {
            return Step::stop(Outcome::Aborted);
        }
        if let Some(step) = self.take_force_delete_token(target, published).await {
            return step;
        }
        let step = self
            .status_patch_and_delete(
                &pods,
                target,
                job,
                node_name,
                &pod,
                health.state,
                status_patch,
                predicted,
                published,
            )
            .await;
        if !matches!(step, Step { outcome: Outcome::Done, wrote: true }) {
            self.shared.bucket.lock().unwrap_or_else(|e| e.into_inner()).refund();
        }
        step
    }

    /// Re-check 1: the pod, read live, is the one planned (same UID), still terminating on the same
    /// node, and not already escalated. Gone or recreated is done.
    async fn live_stuck_pod(
        &mut self,
        pods: &Api<PodView>,
        target: &Target,
        node_name: &str,
    ) -> Result<(PodFacts, Timestamp), Step> {
        let live = match self.read(pods.get_opt(&target.id.name)).await {
            Ok(Some(live)) => live,
            Ok(None) => {
                self.metrics.force_deletion("gone");
                return Err(Step::done(false));
            }
            Err(e) => {
                warn!(error = %e, pod = %target.id, "force delete: live GET of the pod failed");
                return Err(Step::stop(Outcome::Failed));
            }
        };
        let Ok(Some(pod)) = PodFacts::from_view(&live) else { return Err(Step::stop(Outcome::Aborted)) };
        if pod.uid != target.uid {
            // Recreated with the same name: the new pod is not ours to touch.
            self.metrics.force_deletion("gone");
            return Err(Step::done(false));
        }
        let Some(deletion) = pod.deletion else { return Err(Step::stop(Outcome::Aborted)) };
        if pod.deletion_grace_seconds == Some(0) {
            return Err(Step::done(false));
        }
        if pod.node.as_deref() != Some(node_name) {
            return Err(Step::stop(Outcome::Aborted));
        }
        Ok((pod, deletion))
    }

    /// Re-check 2: the node, read live, is still one `--node-failure` trusts to be dead, for long
    /// enough.
    async fn live_node_still_failed(
        &self,
        target: &Target,
        node_name: &str,
        pod: &PodFacts,
        deletion: Timestamp,
    ) -> Result<(Option<NodeFacts>, NodeHealth), Step> {
        let nodes: Api<NodeView> = Api::all(self.client.clone());
        let node = match self.read(nodes.get_opt(node_name)).await {
            Ok(Some(n)) => match NodeFacts::from_view(&n) {
                Ok(f) => Some(f),
                Err(_) => return Err(Step::stop(Outcome::Aborted)),
            },
            Ok(None) => None,
            Err(e) => {
                warn!(error = %e, node = node_name, "force delete: live GET of the node failed");
                return Err(Step::stop(Outcome::Failed));
            }
        };
        let now = (self.clock)();
        let health = node_health(node.as_ref(), true, &self.config);
        if !trusted(self.config.node_failure, &health, now) || now < escalate_from(pod, deletion, &self.config) {
            info!(pod = %target.id, node = node_name, state = health.state.as_str(), "force delete: re-check says no");
            return Err(Step::stop(Outcome::Aborted));
        }
        Ok((node, health))
    }

    /// Re-check 3: the brake on fresh counts, the node cache as it is now with this node as just
    /// read. `Some` when it holds the delete back.
    async fn brake_on_fresh_counts(
        &mut self,
        target: &Target,
        node_name: &str,
        node: Option<&NodeFacts>,
        published: &mut Vec<(Arc<str>, Reason, String)>,
    ) -> Option<Step> {
        let zones = self.shared.zones.load_full();
        let trip = zones.trip(node_name, node, self.config.pause_unhealthy_fraction)?;
        self.metrics.suppressed(trip.metric_reason());
        let message = brake_message(
            &trip,
            &self.config,
            &format!(
                "re-checked when the delete was due, on the current node cache and a live read of node {node_name}"
            ),
        );
        let reason = trip.metric_reason().to_string();
        let event = self.own_event(target, EventType::Warning, Reason::ForceDeleteSuppressed, message, reason);
        self.publish_own(event, Rule::NodeFailure, published).await;
        Some(Step::stop(Outcome::Suppressed))
    }

    /// Re-check 4: a token of the force-delete rate limit. Tokens are spent on deletes that are
    /// executed, not on plans (given back when nothing was deleted after all). `Some` when none is
    /// left.
    async fn take_force_delete_token(
        &mut self,
        target: &Target,
        published: &mut Vec<(Arc<str>, Reason, String)>,
    ) -> Option<Step> {
        let now = (self.clock)();
        let next = {
            let mut bucket = self.shared.bucket.lock().unwrap_or_else(|e| e.into_inner());
            if bucket.try_take(now) {
                return None;
            }
            bucket.next_token_at(now, 0)
        };
        self.metrics.suppressed("rate-limit");
        let message = format!(
            "Not force-deleting yet: rate limit of {} force deletes a minute reached",
            self.config.max_force_deletes_per_minute
        );
        let event =
            self.own_event(target, EventType::Warning, Reason::ForceDeleteSuppressed, message, "rate-limit".into());
        self.publish_own(event, Rule::NodeFailure, published).await;
        Some(Step::stop(next.map_or(Outcome::Suppressed, Outcome::RateLimited)))
    }

    /// Steps 3–5 of a force delete whose token is taken.
    #[allow(clippy::too_many_arguments)]
    async fn status_patch_and_delete(
        &mut self,
        pods: &Api<PodView>,
        target: &Target,
        job: &Target,
        node_name: &str,
        pod: &PodFacts,
        state: NodeState,
        status_patch: Option<Value>,
        predicted: &HashSet<String>,
        published: &mut Vec<(Arc<str>, Reason, String)>,
    ) -> Step {
        if let Some(patch) = status_patch.and_then(|p| without_terminal_phase(p, pod)) {
            let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() };
            match self.bounded(pods.patch_status(&target.id.name, &params, &Patch::Strategic(&patch))).await {
                Ok(_) => {}
                // Gone, or the UID precondition failed (another pod has the name): nothing to do.
                Err(e) if matches!(api_code(&e), Some(404 | 409)) => {
                    self.metrics.force_deletion("gone");
                    return Step::done(false);
                }
                Err(e) => {
                    warn!(error = %e, pod = %target.id, "force delete: status patch failed");
                    self.metrics.force_deletion("error");
                    return Step::stop(Outcome::Failed);
                }
            }
        }
        if !self.leading() {
            return Step::stop(Outcome::Aborted);
        }
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions { uid: Some(pod.uid.to_string()), resource_version: None }),
            ..DeleteParams::default()
        };
        match self.bounded(pods.delete(&target.id.name, &params)).await {
            Ok(result) => {
                info!(pod = %target.id, job = %job.id, node = node_name, state = state.as_str(), "force-deleted stuck pod");
                self.metrics.force_deletion("deleted");
                // A finalizer the cache did not show yet: reported now rather than on the next pass.
                if let Some(still) = result.left()
                    && let Ok(Some(still)) = PodFacts::from_view(&still)
                {
                    let blocking = blocking_finalizers(&still);
                    let episode = finalizers_episode(&blocking);
                    if !blocking.is_empty() && !predicted.contains(&episode) {
                        let message = finalizers_message(&blocking, "was");
                        let event = self.own_event(
                            target,
                            EventType::Warning,
                            Reason::PodBlockedByFinalizers,
                            message,
                            episode,
                        );
                        self.publish_own(event, Rule::NodeFailure, published).await;
                    }
                }
                Step::done(true)
            }
            Err(e) if matches!(api_code(&e), Some(404 | 409)) => {
                self.metrics.force_deletion("gone");
                Step::done(false)
            }
            Err(e) => {
                warn!(error = %e, pod = %target.id, "force delete failed");
                self.metrics.force_deletion("error");
                Step::stop(Outcome::Failed)
            }
        }
    }
}

/// The planned status patch as it may be sent for the pod as read live: a pod that has reached
/// `Succeeded` or `Failed` since planning keeps its phase. `None` when nothing is left to patch.
fn without_terminal_phase(mut patch: Value, live: &PodFacts) -> Option<Value> {
    if matches!(live.phase, PodPhase::Succeeded | PodPhase::Failed)
        && let Some(status) = patch.get_mut("status").and_then(Value::as_object_mut)
    {
        status.remove("phase");
        if status.is_empty() {
            return None;
        }
    }
    Some(patch)
}

/// The executor task: executes work in order until leadership ends or the queue closes. Work still
/// queued when leadership ends is dropped unexecuted — the next leader plans it afresh from its own
/// watches — and the item in progress stops before its next request.
pub async fn run(
    mut executor: Executor,
    mut work: mpsc::UnboundedReceiver<Work>,
    reports: mpsc::UnboundedSender<(Report, Duration)>,
) {
    let leading = executor.shared.leading.clone();
    loop {
        let next = tokio::select! {
            biased;
            _ = leading.cancelled() => None,
            next = work.recv() => next,
        };
        let Some(item) = next else { break };
        let started = Instant::now();
        let progress = executor.metrics.progress.clone();
        progress.started();
        let report = executor.execute(item).await;
        progress.finished();
        if reports.send((report, started.elapsed())).is_err() {
            break;
        }
    }
    work.close();
    let mut dropped = 0usize;
    while work.try_recv().is_ok() {
        dropped += 1;
    }
    if dropped > 0 {
        info!(dropped, "leadership ended: queued work dropped unexecuted");
    }
}
