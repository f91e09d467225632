//! The executor: performs the planner's actions against the API server, and nothing else. Every
//! write goes through one pipeline, [`Executor::guarded`] (its doc comment is the safety argument):
//! the object read live, the same rule the planner used re-applied to it, the write carrying
//! preconditions from that read, because pod and job names repeat. In report mode it does the
//! reads and publishes `Would…` events, but no writes.
//!
//! One writer: it checks leadership (the token the loop runs under) before every request, and
//! [`run`] drops whatever is still queued once leadership ends, so a former leader stops within the
//! request it has in flight. Force-delete tokens are taken here, when a delete is executed, and the
//! brake is decided here on the node cache as it is at execution time.
//!
//! Every request it makes is listed in `crate::rbac::API_CALLS` (checked over the requests the
//! test kit's fake API recorded, in the executor's tests).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions, PropagationPolicy};
use kube::{Client, Error as KubeError};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::config::{Mode, PlanConfig, Propagation};
use super::events::EventSink;
use super::metrics::Metrics;
use super::state::{Report, SharedBucket, Work, WorkOutcome};
use trainguard_core::duration::plus;
use trainguard_core::model::kubeflow_v1::{TrainingJobView, TrainingKind};
use trainguard_core::model::pod::{NodeView, PodView};
use trainguard_core::model::trainjob_state::TrainJobStateView;
use trainguard_core::planner::facts::{JobFacts, NodeFacts, PodFacts, PodPhase, TrainJobFacts};
use trainguard_core::planner::node_failure::{
    blocking_finalizers, brake_message, escalate_from, finalizers_episode, finalizers_message, node_health, trusted,
};
use trainguard_core::planner::suspend::{RestoreVerdict, restore_patch, restore_verdict, stash_patch, v1_stuck};
use trainguard_core::planner::ttl::{TtlVerdict, delete_failed_message, trainjob_verdict, verdict};
use trainguard_core::planner::{
    Action, EventType, JobPatchKind, NodeState, PlanRule, PlannedEvent, Reason, Target, TargetKind, ZoneHealth,
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
    outcome: WorkOutcome,
    /// The write happened (or in report mode: would have): publish the events that report it.
    wrote: bool,
}

impl Step {
    fn done(wrote: bool) -> Self {
        Step { outcome: WorkOutcome::Done, wrote }
    }
    fn stop(outcome: WorkOutcome) -> Self {
        Step { outcome, wrote: false }
    }
}

/// Severity for merging outcomes of several steps of one work item.
fn rank(o: WorkOutcome) -> u8 {
    match o {
        WorkOutcome::Done => 0,
        WorkOutcome::Aborted => 1,
        WorkOutcome::Suppressed => 2,
        WorkOutcome::RateLimited(_) => 3,
        WorkOutcome::Conflict => 4,
        WorkOutcome::Failed => 5,
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
        let mut outcome = WorkOutcome::Done;
        let mut published = Vec::new();
        let mut wrote: Option<(PlanRule, bool)> = None;
        let mut stopped: HashSet<PlanRule> = HashSet::new();
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
                outcome = WorkOutcome::Aborted;
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
                    let (propagation, planned_expiry) = (*propagation, *expires_at);
                    match target.kind {
                        TargetKind::Job(kind) => {
                            let ttl = TtlDelete { target, reads: V1Job(kind), propagation, planned_expiry };
                            self.guarded(ttl, &mut published).await
                        }
                        TargetKind::TrainJob => {
                            let ttl = TtlDelete { target, reads: TrainJob, propagation, planned_expiry };
                            self.guarded(ttl, &mut published).await
                        }
                        TargetKind::Pod => Step::stop(WorkOutcome::Aborted),
                    }
                }
                Action::PatchJob { target, kind, .. } => match target.kind {
                    TargetKind::Job(job_kind) => {
                        let patch = JobPatch { target, reads: V1Job(job_kind), kind, live_pods: work.live_pods };
                        self.guarded(patch, &mut published).await
                    }
                    _ => Step::stop(WorkOutcome::Aborted),
                },
                Action::ForceDeletePod { target, job, node, .. } => {
                    let status_patch = status_patch.take();
                    let force = ForceDelete { target, job, node_name: node, status_patch, predicted: &predicted };
                    self.guarded(force, &mut published).await
                }
            };
            wrote = Some((rule, step.wrote));
            if step.outcome != WorkOutcome::Done || !step.wrote {
                stopped.insert(rule);
            }
            if rank(step.outcome) > rank(outcome) {
                outcome = step.outcome;
            }
        }
        Report { key: work.key, outcome, published }
    }

    async fn publish(&self, event: &PlannedEvent, rule: PlanRule) -> bool {
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
    async fn publish_own(&mut self, event: PlannedEvent, rule: PlanRule, published: &mut Published) {
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

    /// The guarded-write pipeline, the one path by which the executor changes the cluster.
    ///
    /// Safety argument. A write happens only if, in this order:
    /// 1. **fetch**: the object is read live (bounded by [`READ_TIMEOUT`], only while leading);
    ///    absent means there is nothing left to do, an unreadable answer stops the rule;
    /// 2. **identity**: the live object has the planned UID (names repeat: a recreated object is
    ///    never touched, it gets its own plan);
    /// 3. **re-check**: the planner's own rule ([`Guarded::recheck`]), run again on the live object
    ///    (and, for a force delete, on the node read live, the brake on fresh counts), says the
    ///    write is still due; it also builds the write from the live object;
    /// 4. **mode and leadership**: not in report mode (which stops here and counts the write it
    ///    would have made) and still leading;
    /// 5. **write** ([`Guarded::write`]), bounded by [`WRITE_TIMEOUT`] and cut when leadership
    ///    ends, carrying preconditions from the live read — a TTL delete UID and resourceVersion,
    ///    a job patch the resourceVersion (that very version of that object), a force delete and
    ///    its status patch the UID (what the re-check read of the pod, its deletion and its node,
    ///    cannot be undone once set) — so that an object replaced, or changed where that matters,
    ///    between the read and the write is refused by the API server (409) rather than written.
    async fn guarded<G: Guarded>(&mut self, action: G, published: &mut Published) -> Step {
        let (target, reads) = (action.target().clone(), action.reads());
        let api = reads.api(self, &target.id.namespace);
        let live = match self.read(api.get_opt(&target.id.name)).await {
            Ok(Some(live)) => live,
            Ok(None) => return action.gone(self),
            Err(e) => {
                warn!(error = %e, object = %target.id, "{}: live GET failed", G::WHAT);
                return Step::stop(WorkOutcome::Failed);
            }
        };
        let Some(facts) = reads.facts(&live) else { return Step::stop(WorkOutcome::Aborted) };
        if G::Read::uid(&facts) != &*target.uid {
            debug!(object = %target.id, "{}: a new object has the name now; leaving it to its own plan", G::WHAT);
            return action.recreated(self);
        }
        let checked = match action.recheck(self, facts, published).await {
            Ok(checked) => checked,
            Err(step) => return step,
        };
        if self.report_mode() {
            return action.would(self);
        }
        if !self.leading() {
            return Step::stop(WorkOutcome::Aborted);
        }
        action.write(self, &api, checked, published).await
    }
}

/// The events a work item published, as the report lists them.
type Published = Vec<(Arc<str>, Reason, String)>;

/// What an action reads live: the API it is read (and written) through, and the planner's
/// facts of it.
trait Read {
    /// The object as read.
    type Live: Clone + DeserializeOwned + std::fmt::Debug;
    /// The planner's facts of it.
    type Facts;
    fn api(&self, ex: &Executor, namespace: &str) -> Api<Self::Live>;
    /// The facts; `None` (unreadable) stops the rule.
    fn facts(&self, live: &Self::Live) -> Option<Self::Facts>;
    fn uid(facts: &Self::Facts) -> &str;
}

/// A Kubeflow v1 job of this kind.
struct V1Job(TrainingKind);

impl Read for V1Job {
    type Live = TrainingJobView;
    type Facts = JobFacts;
    fn api(&self, ex: &Executor, namespace: &str) -> Api<TrainingJobView> {
        ex.job_api(self.0, namespace)
    }
    fn facts(&self, live: &TrainingJobView) -> Option<JobFacts> {
        JobFacts::from_view(self.0, live).ok()
    }
    fn uid(facts: &JobFacts) -> &str {
        &facts.uid
    }
}

/// A TrainJob.
struct TrainJob;

impl Read for TrainJob {
    type Live = TrainJobStateView;
    type Facts = TrainJobFacts;
    fn api(&self, ex: &Executor, namespace: &str) -> Api<TrainJobStateView> {
        Api::namespaced_with(ex.client.clone(), namespace, &())
    }
    fn facts(&self, live: &TrainJobStateView) -> Option<TrainJobFacts> {
        TrainJobFacts::from_view(live).ok()
    }
    fn uid(facts: &TrainJobFacts) -> &str {
        &facts.uid
    }
}

/// A pod.
struct Pod;

impl Read for Pod {
    type Live = PodView;
    type Facts = PodFacts;
    fn api(&self, ex: &Executor, namespace: &str) -> Api<PodView> {
        Api::namespaced(ex.client.clone(), namespace)
    }
    fn facts(&self, live: &PodView) -> Option<PodFacts> {
        PodFacts::from_view(live).ok().flatten()
    }
    fn uid(facts: &PodFacts) -> &str {
        &facts.uid
    }
}

type LiveOf<G> = <<G as Guarded>::Read as Read>::Live;
type FactsOf<G> = <<G as Guarded>::Read as Read>::Facts;

/// One action kind of the [guarded-write pipeline](Executor::guarded): what it reads live, the
/// planner's re-check on it, and the write with preconditions.
trait Guarded {
    type Read: Read;
    /// What the re-check hands to the write (built from the live object).
    type Checked;
    /// For the logs.
    const WHAT: &'static str;

    /// The planned object.
    fn target(&self) -> &Target;
    fn reads(&self) -> &Self::Read;
    /// The object is gone: nothing to write.
    fn gone(&self, _ex: &Executor) -> Step {
        Step::done(false)
    }
    /// Another object has the name now.
    fn recreated(&self, ex: &Executor) -> Step {
        self.gone(ex)
    }
    /// The planner's own rule on the live object: the write still due, or the step to stop at.
    async fn recheck(
        &self,
        ex: &mut Executor,
        facts: FactsOf<Self>,
        published: &mut Published,
    ) -> Result<Self::Checked, Step>;
    /// Report mode: the write that would have been made.
    fn would(&self, _ex: &Executor) -> Step {
        Step::done(true)
    }
    /// The write, with preconditions from the live read, and what its answer means.
    async fn write(
        &self,
        ex: &mut Executor,
        api: &Api<LiveOf<Self>>,
        checked: Self::Checked,
        published: &mut Published,
    ) -> Step;
}

/// How the API server answered a write.
enum Answer<T> {
    Written(T),
    /// 404: the object is gone.
    NotFound,
    /// 409: a precondition failed (the object changed or was replaced since the live read).
    Conflict,
    Failed(KubeError),
}

impl<T> From<Result<T, KubeError>> for Answer<T> {
    fn from(result: Result<T, KubeError>) -> Self {
        match result {
            Ok(written) => Answer::Written(written),
            Err(e) if api_code(&e) == Some(404) => Answer::NotFound,
            Err(e) if api_code(&e) == Some(409) => Answer::Conflict,
            Err(e) => Answer::Failed(e),
        }
    }
}

fn patch_params() -> PatchParams {
    PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() }
}

/// docs/controller.md (TTL after finished) at expiry: DELETE with UID + resourceVersion
/// preconditions once the same rule, on the live object, says it expired.
struct TtlDelete<'a, R> {
    target: &'a Target,
    reads: R,
    propagation: Propagation,
    planned_expiry: Timestamp,
}

/// What has a TTL: a Kubeflow v1 job or a TrainJob, each with its planner's verdict.
trait Expires: Read {
    fn verdict(facts: &Self::Facts, now: Timestamp, config: &PlanConfig) -> TtlVerdict;
    fn resource_version(facts: &Self::Facts) -> &str;
}

impl Expires for V1Job {
    fn verdict(facts: &JobFacts, now: Timestamp, config: &PlanConfig) -> TtlVerdict {
        verdict(facts, now, config)
    }
    fn resource_version(facts: &JobFacts) -> &str {
        &facts.resource_version
    }
}

impl Expires for TrainJob {
    fn verdict(facts: &TrainJobFacts, now: Timestamp, config: &PlanConfig) -> TtlVerdict {
        trainjob_verdict(facts, now, config)
    }
    fn resource_version(facts: &TrainJobFacts) -> &str {
        &facts.resource_version
    }
}

/// A TTL delete the re-check confirmed.
struct TtlChecked {
    preconditions: Preconditions,
    expires_at: Timestamp,
    now: Timestamp,
}

impl<R> TtlDelete<'_, R> {
    fn kind(&self) -> &'static str {
        match self.target.kind {
            TargetKind::Job(kind) => kind.kind(),
            _ => "TrainJob",
        }
    }
}

impl<R: Expires> Guarded for TtlDelete<'_, R> {
    type Read = R;
    type Checked = TtlChecked;
    const WHAT: &'static str = "TTL";

    fn target(&self) -> &Target {
        self.target
    }
    fn reads(&self) -> &R {
        &self.reads
    }

    async fn recheck(&self, ex: &mut Executor, facts: R::Facts, _: &mut Published) -> Result<TtlChecked, Step> {
        let now = (ex.clock)();
        let TtlVerdict::Expired { expires_at, .. } = R::verdict(&facts, now, &ex.config) else {
            debug!(job = %self.target.id, "TTL: no longer expired on the live object");
            return Err(Step::stop(WorkOutcome::Aborted));
        };
        if expires_at != self.planned_expiry {
            debug!(job = %self.target.id, "TTL: expiry moved since planning; re-checked live, still expired");
        }
        let preconditions = Preconditions {
            uid: Some(R::uid(&facts).to_string()),
            resource_version: Some(R::resource_version(&facts).to_string()).filter(|rv| !rv.is_empty()),
        };
        Ok(TtlChecked { preconditions, expires_at, now })
    }

    fn would(&self, ex: &Executor) -> Step {
        ex.metrics.ttl_deletion(self.kind(), "would-delete");
        Step::done(true)
    }

    async fn write(
        &self,
        ex: &mut Executor,
        api: &Api<R::Live>,
        checked: TtlChecked,
        published: &mut Published,
    ) -> Step {
        let (kind, target) = (self.kind(), self.target);
        let params = DeleteParams {
            propagation_policy: Some(match self.propagation {
                Propagation::Background => PropagationPolicy::Background,
                Propagation::Foreground => PropagationPolicy::Foreground,
                Propagation::Orphan => PropagationPolicy::Orphan,
            }),
            preconditions: Some(checked.preconditions),
            ..DeleteParams::default()
        };
        match ex.bounded(api.delete(&target.id.name, &params)).await.into() {
            Answer::Written(_) => {
                info!(job = %target.id, kind, "TTL: deleted");
                ex.metrics.ttl_deletion(kind, "deleted");
                let ttl_expiry = plus(checked.expires_at, -ex.config.ttl_grace);
                let delay = checked.now.duration_since(ttl_expiry).as_secs_f64().max(0.0);
                ex.metrics.ttl_deletion_delay_seconds.observe(delay);
                Step::done(true)
            }
            Answer::NotFound => {
                ex.metrics.ttl_deletion(kind, "not-found");
                Step::done(false)
            }
            Answer::Conflict => {
                // Changed between GET and DELETE: re-evaluate now.
                ex.metrics.ttl_deletion(kind, "conflict");
                Step::stop(WorkOutcome::Conflict)
            }
            Answer::Failed(e) => {
                warn!(error = %e, job = %target.id, "TTL: delete failed");
                ex.metrics.ttl_deletion(kind, "error");
                let episode = format!("delete-failed@{}", self.planned_expiry);
                let message = delete_failed_message(&e.to_string());
                let event = ex.own_event(target, EventType::Warning, Reason::TTLDeleteFailed, message, episode);
                ex.publish_own(event, PlanRule::Ttl, published).await;
                Step::stop(WorkOutcome::Failed)
            }
        }
    }
}

/// docs/controller.md (Preemption (suspend)) remedy and restore: a merge patch carrying the live
/// resourceVersion, once the job is still managed and the stash (or restore) still due.
struct JobPatch<'a> {
    target: &'a Target,
    reads: V1Job,
    kind: &'a JobPatchKind,
    live_pods: u32,
}

impl Guarded for JobPatch<'_> {
    type Read = V1Job;
    /// The merge patch.
    type Checked = Value;
    const WHAT: &'static str = "patch";

    fn target(&self) -> &Target {
        self.target
    }
    fn reads(&self) -> &V1Job {
        &self.reads
    }
    fn recreated(&self, _: &Executor) -> Step {
        Step::stop(WorkOutcome::Aborted)
    }
    async fn recheck(&self, _: &mut Executor, facts: JobFacts, _: &mut Published) -> Result<Value, Step> {
        if facts.guard().is_some() {
            return Err(Step::stop(WorkOutcome::Aborted));
        }
        let live_target = Target { resource_version: facts.resource_version.clone(), ..self.target.clone() };
        match self.kind {
            JobPatchKind::Stash { ttl }
                if facts.ttl_seconds == Some(*ttl) && v1_stuck(&facts, self.live_pods).is_stuck() =>
            {
                Ok(stash_patch(&live_target, *ttl))
            }
            JobPatchKind::Restore { ttl } if restore_verdict(&facts) == (RestoreVerdict::Restore { ttl: *ttl }) => {
                Ok(restore_patch(&live_target, *ttl))
            }
            _ => Err(Step::stop(WorkOutcome::Aborted)),
        }
    }
    async fn write(&self, ex: &mut Executor, api: &Api<TrainingJobView>, body: Value, _: &mut Published) -> Step {
        let target = self.target;
        match ex.bounded(api.patch(&target.id.name, &patch_params(), &Patch::Merge(&body))).await.into() {
            Answer::Written(_) => {
                info!(job = %target.id, patch = %body, "patched job");
                Step::done(true)
            }
            Answer::NotFound => Step::done(false),
            Answer::Conflict => Step::stop(WorkOutcome::Conflict),
            Answer::Failed(e) => {
                warn!(error = %e, job = %target.id, "job patch failed");
                Step::stop(WorkOutcome::Failed)
            }
        }
    }
}

/// docs/controller.md (Node failure) steps 1–5: the pod and its node read live and re-checked,
/// the brake on fresh counts, a rate-limit token, the planned status patch (UID precondition),
/// DELETE with grace 0 and UID precondition. Finalizers are never touched.
struct ForceDelete<'a> {
    target: &'a Target,
    job: &'a Target,
    node_name: &'a str,
    /// The planned status patch, sent before the delete.
    status_patch: Option<Value>,
    /// Finalizer warnings the planner already predicted (published after the delete).
    predicted: &'a HashSet<String>,
}

/// A force delete the re-check confirmed.
struct ForceChecked {
    pod: PodFacts,
    state: NodeState,
}

impl Guarded for ForceDelete<'_> {
    type Read = Pod;
    type Checked = ForceChecked;
    const WHAT: &'static str = "force delete";

    fn target(&self) -> &Target {
        self.target
    }
    fn reads(&self) -> &Pod {
        &Pod
    }
    fn gone(&self, ex: &Executor) -> Step {
        ex.metrics.force_deletion("gone");
        Step::done(false)
    }

    /// The pod still terminating on the same node and not already escalated; the node, read live,
    /// still one `--node-failure` trusts to be dead, for long enough; the brake on fresh counts.
    async fn recheck(&self, ex: &mut Executor, pod: PodFacts, published: &mut Published) -> Result<ForceChecked, Step> {
        let (target, node_name) = (self.target, self.node_name);
        let Some(deletion) = pod.deletion else { return Err(Step::stop(WorkOutcome::Aborted)) };
        if pod.deletion_grace_seconds == Some(0) {
            return Err(Step::done(false));
        }
        if pod.node.as_deref() != Some(node_name) {
            return Err(Step::stop(WorkOutcome::Aborted));
        }
        let nodes: Api<NodeView> = Api::all(ex.client.clone());
        let node = match ex.read(nodes.get_opt(node_name)).await {
            Ok(Some(n)) => Some(NodeFacts::from_view(&n).map_err(|_| Step::stop(WorkOutcome::Aborted))?),
            Ok(None) => None,
            Err(e) => {
                warn!(error = %e, node = node_name, "force delete: live GET of the node failed");
                return Err(Step::stop(WorkOutcome::Failed));
            }
        };
        let now = (ex.clock)();
        let health = node_health(node.as_ref(), true, &ex.config);
        if !trusted(ex.config.node_failure, &health, now) || now < escalate_from(&pod, deletion, &ex.config) {
            info!(pod = %target.id, node = node_name, state = health.state.as_str(), "force delete: re-check says no");
            return Err(Step::stop(WorkOutcome::Aborted));
        }
        if let Some(step) = ex.brake_on_fresh_counts(target, node_name, node.as_ref(), published).await {
            return Err(step);
        }
        Ok(ForceChecked { pod, state: health.state })
    }

    fn would(&self, ex: &Executor) -> Step {
        ex.metrics.force_deletion("would-delete");
        Step::done(true)
    }

    /// A rate-limit token, then the writes; the token goes back when nothing was deleted.
    async fn write(&self, ex: &mut Executor, pods: &Api<PodView>, c: ForceChecked, published: &mut Published) -> Step {
        if let Some(step) = ex.take_force_delete_token(self.target, published).await {
            return step;
        }
        let step = self.status_patch_and_delete(ex, pods, c, published).await;
        if !matches!(step, Step { outcome: WorkOutcome::Done, wrote: true }) {
            ex.shared.bucket.lock().unwrap_or_else(|e| e.into_inner()).refund();
        }
        step
    }
}

impl ForceDelete<'_> {
    /// Steps 3–5 of a force delete whose token is taken. A 404 or 409 (another pod has the name)
    /// means the planned pod is gone.
    async fn status_patch_and_delete(
        &self,
        ex: &mut Executor,
        pods: &Api<PodView>,
        ForceChecked { pod, state }: ForceChecked,
        published: &mut Published,
    ) -> Step {
        let target = self.target;
        if let Some(patch) = self.status_patch.clone().and_then(|p| without_terminal_phase(p, &pod)) {
            match ex
                .bounded(pods.patch_status(&target.id.name, &patch_params(), &Patch::Strategic(&patch)))
                .await
                .into()
            {
                Answer::Written(_) => {}
                Answer::NotFound | Answer::Conflict => return self.gone(ex),
                Answer::Failed(e) => {
                    warn!(error = %e, pod = %target.id, "force delete: status patch failed");
                    ex.metrics.force_deletion("error");
                    return Step::stop(WorkOutcome::Failed);
                }
            }
        }
        if !ex.leading() {
            return Step::stop(WorkOutcome::Aborted);
        }
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions { uid: Some(pod.uid.to_string()), resource_version: None }),
            ..DeleteParams::default()
        };
        match ex.bounded(pods.delete(&target.id.name, &params)).await.into() {
            Answer::Written(result) => {
                let node = self.node_name;
                info!(pod = %target.id, job = %self.job.id, node, state = state.as_str(), "force-deleted stuck pod");
                ex.metrics.force_deletion("deleted");
                // A finalizer the cache did not show yet: reported now rather than on the next pass.
                if let Some(still) = result.left()
                    && let Ok(Some(still)) = PodFacts::from_view(&still)
                {
                    let blocking = blocking_finalizers(&still);
                    let episode = finalizers_episode(&blocking);
                    if !blocking.is_empty() && !self.predicted.contains(&episode) {
                        let message = finalizers_message(&blocking, "was");
                        let reason = Reason::PodBlockedByFinalizers;
                        let event = ex.own_event(target, EventType::Warning, reason, message, episode);
                        ex.publish_own(event, PlanRule::NodeFailure, published).await;
                    }
                }
                Step::done(true)
            }
            Answer::NotFound | Answer::Conflict => self.gone(ex),
            Answer::Failed(e) => {
                warn!(error = %e, pod = %target.id, "force delete failed");
                ex.metrics.force_deletion("error");
                Step::stop(WorkOutcome::Failed)
            }
        }
    }
}

impl Executor {
    /// Re-check 3: the brake on fresh counts, the node cache as it is now with this node as just
    /// read. `Some` when it holds the delete back.
    async fn brake_on_fresh_counts(
        &mut self,
        target: &Target,
        node_name: &str,
        node: Option<&NodeFacts>,
        published: &mut Published,
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
        self.publish_own(event, PlanRule::NodeFailure, published).await;
        Some(Step::stop(WorkOutcome::Suppressed))
    }

    /// Re-check 4: a token of the force-delete rate limit. Tokens are spent on deletes that are
    /// executed, not on plans (given back when nothing was deleted after all). `Some` when none is
    /// left.
    async fn take_force_delete_token(&mut self, target: &Target, published: &mut Published) -> Option<Step> {
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
        self.publish_own(event, PlanRule::NodeFailure, published).await;
        Some(Step::stop(next.map_or(WorkOutcome::Suppressed, WorkOutcome::RateLimited)))
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
