//! docs/controller.md (Node failure): a training pod stuck Terminating on a failed node blocks its fixed-name replacement, so
//! the job hangs in `Restarting`. The companion escalates that existing deletion to grace 0 (as
//! PodGC does for deleted and out-of-service nodes), within the zone brake and the rate limit.

use std::collections::HashMap;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::json;

use super::actions::{
    Action, BrakeCounts, EventType, KeyPlan, NodeState, Observation, PlanRule, Reason, Target, TargetKind,
};
use super::actions::{after_write, event, verb, warning};
use super::ratelimit::TokenBucket;
use crate::duration::{fmt_duration, plus};
use crate::planner::config::{NodeFailureMode, PlanConfig};
use crate::planner::facts::{
    DISRUPTION_REASON, JOB_TRACKING_FINALIZER, KUEUE_FORCE_DELETE_ANNOTATION, NodeFacts, NsName, PodFacts, PodOwner,
    PodPhase, ReadyStatus, Str,
};
use crate::planner::snapshot::Snapshot;

/// A node's health by docs/controller.md (Node failure): what state it is in, and from
/// when each `--node-failure` value counts it as failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeHealth {
    pub state: NodeState,
    /// Kubelet gone: `Ready` Unknown or absent with the `unreachable` NoExecute taint, from the
    /// Ready transition + `--node-not-ready-for` (past or future).
    pub(crate) unreachable_from: Option<Timestamp>,
    /// `Ready` not True with either NoExecute taint (`unreachable` or `not-ready`), from the Ready
    /// transition + `--node-not-ready-for`: what `--node-failure=not-ready` trusts.
    pub(crate) not_ready_from: Option<Timestamp>,
}

pub fn node_health(node: Option<&NodeFacts>, nodes_listed: bool, config: &PlanConfig) -> NodeHealth {
    let health = |state| NodeHealth { state, unreachable_from: None, not_ready_from: None };
    match node {
        None if nodes_listed => health(NodeState::Missing),
        None => health(NodeState::Unknown),
        // Like PodGC: the out-of-service taint counts only on a node that is not Ready.
        Some(n) if n.ready == ReadyStatus::True => health(NodeState::Ready),
        Some(n) if n.out_of_service => health(NodeState::OutOfService),
        Some(n) => {
            let gone = matches!(n.ready, ReadyStatus::Unknown | ReadyStatus::Absent);
            let state = if gone { NodeState::Unreachable } else { NodeState::NotReady };
            // The taint is the node lifecycle controller's own verdict; without it, wait.
            let bound =
                |tainted: bool| tainted.then_some(n.ready_since).flatten().map(|s| plus(s, config.node_not_ready_for));
            NodeHealth {
                state,
                unreachable_from: bound(gone && n.unreachable_taint),
                not_ready_from: bound(n.no_execute_taint),
            }
        }
    }
}

/// From when `--node-failure` lets this node's state trigger a force delete (`Timestamp::MIN`: at
/// once; `None`: not by time alone).
pub(crate) fn trusted_from(mode: NodeFailureMode, health: &NodeHealth) -> Option<Timestamp> {
    let gone = matches!(health.state, NodeState::Missing | NodeState::OutOfService);
    match mode {
        NodeFailureMode::Off => None,
        _ if gone => Some(Timestamp::MIN),
        NodeFailureMode::OutOfService => None,
        NodeFailureMode::Unreachable => health.unreachable_from,
        NodeFailureMode::NotReady => health.not_ready_from,
    }
}

/// Whether `--node-failure` lets this node state trigger a force delete at `now`.
pub fn trusted(mode: NodeFailureMode, health: &NodeHealth, now: Timestamp) -> bool {
    trusted_from(mode, health).is_some_and(|f| now >= f)
}

/// How long Kueue's own force delete waits after a pod's deletion time (FailureRecoveryPolicy).
pub(crate) const KUEUE_FORCE_DELETE_AFTER: SignedDuration = SignedDuration::from_secs(60);
/// How much longer trainguard leaves such a pod to Kueue, so the two never race.
pub(crate) const KUEUE_MARGIN: SignedDuration = SignedDuration::from_secs(30);

/// The end of Kueue's window for a pod carrying its annotation, if it does.
pub(crate) fn kueue_window_end(pod: &PodFacts, deletion: Timestamp) -> Option<Timestamp> {
    pod.kueue_force_delete.then(|| plus(plus(deletion, KUEUE_FORCE_DELETE_AFTER), KUEUE_MARGIN))
}

/// The earliest a stuck pod's deletion may be escalated, node aside: `--force-delete-after` past
/// its deletion time, and past Kueue's window if Kueue may force-delete it itself.
pub fn escalate_from(pod: &PodFacts, deletion: Timestamp, config: &PlanConfig) -> Timestamp {
    let stuck_at = plus(deletion, config.force_delete_after);
    kueue_window_end(pod, deletion).map_or(stuck_at, |k| k.max(stuck_at))
}

/// docs/controller.md (Node failure) step 2: more than 2 nodes unhealthy and at least the fraction of the domain — the node
/// lifecycle controller's own definition of a disrupted zone. The floor keeps small zones working.
pub(crate) fn brake_engaged(counts: BrakeCounts, fraction: f64) -> bool {
    counts.unhealthy > 2 && counts.total > 0 && f64::from(counts.unhealthy) / f64::from(counts.total) >= fraction
}

/// Whether a node counts as down for the brake: its `Ready` condition is not True, at once (the
/// node lifecycle controller's zone state). The per-pod trigger waits `--node-not-ready-for`; the
/// brake must not, or in a staggered outage the first node's pods go before the nodes that failed a
/// minute later are counted.
pub(crate) fn down_for_brake(node: &NodeFacts) -> bool {
    node.ready != ReadyStatus::True
}

/// Which brake held a force delete back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BrakeTrip {
    /// The candidate's zone (or the cluster, for a node without a zone label).
    Zone { zone: Option<Str>, counts: BrakeCounts },
    /// The whole cluster: failures spread over zones none of which trips on its own.
    Cluster { counts: BrakeCounts },
}

impl BrakeTrip {
    pub(crate) fn counts(&self) -> BrakeCounts {
        match self {
            BrakeTrip::Zone { counts, .. } | BrakeTrip::Cluster { counts } => *counts,
        }
    }

    pub(crate) fn domain(&self) -> String {
        match self {
            BrakeTrip::Zone { zone: Some(z), .. } => format!("zone {z}"),
            BrakeTrip::Zone { zone: None, .. } | BrakeTrip::Cluster { .. } => "the cluster".to_string(),
        }
    }

    /// The `reason` label of `trainguard_force_delete_suppressed_total`.
    pub fn metric_reason(&self) -> &'static str {
        match self {
            BrakeTrip::Zone { zone: Some(_), .. } => "zone-brake",
            _ => "cluster-brake",
        }
    }
}

/// The brake counts of a candidate's node: its zone's and the cluster's, node included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct BrakeView {
    pub zone: BrakeCounts,
    pub(crate) cluster: BrakeCounts,
    pub(crate) zoned: bool,
}

/// The node cache reduced to what the brake reads: for every node its zone and whether it is down
/// (`Ready` not True), and the resulting counts per zone and for the cluster. Time does not enter,
/// so the live controller recomputes it only when a node changes and hands the same value to the
/// executor, which decides on it at execution time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ZoneHealth {
    nodes: HashMap<Str, (Option<Str>, bool)>,
    zones: HashMap<Str, BrakeCounts>,
    cluster: BrakeCounts,
}

impl ZoneHealth {
    pub fn compute(snapshot: &Snapshot) -> Self {
        let mut health = ZoneHealth::default();
        for node in snapshot.nodes() {
            let down = down_for_brake(node);
            health.nodes.insert(node.name.clone(), (node.zone.clone(), down));
            for counts in std::iter::once(&mut health.cluster)
                .chain(node.zone.as_ref().map(|z| health.zones.entry(z.clone()).or_default()))
            {
                counts.total += 1;
                counts.unhealthy += u32::from(down);
            }
        }
        health
    }

    /// The counts around `node_name` with that node as `node` says it is now (`None`: the node is
    /// gone, which counts as down), instead of as the cache last saw it.
    pub(crate) fn view(&self, node_name: &str, node: Option<&NodeFacts>) -> BrakeView {
        let mut zone_counts: HashMap<Option<&Str>, BrakeCounts> = HashMap::new();
        let mut cluster = self.cluster;
        // Take the cached contribution of the node out…
        if let Some((zone, down)) = self.nodes.get(node_name) {
            cluster = minus(cluster, *down);
            if let Some(z) = zone {
                zone_counts.insert(Some(z), minus(self.zones.get(z).copied().unwrap_or_default(), *down));
            }
        }
        // …and put its current state in.
        let zone = node.and_then(|n| n.zone.as_ref());
        let down = node.is_none_or(down_for_brake);
        cluster = with_node(cluster, down);
        let Some(z) = zone else { return BrakeView { zone: cluster, cluster, zoned: false } };
        let base = zone_counts.remove(&Some(z)).unwrap_or_else(|| self.zones.get(z).copied().unwrap_or_default());
        BrakeView { zone: with_node(base, down), cluster, zoned: true }
    }

    /// The brake (docs/controller.md, node failure, step 2) for a force delete on `node_name`:
    /// the zone's rule, then the same rule over the whole cluster.
    pub fn trip(&self, node_name: &str, node: Option<&NodeFacts>, fraction: f64) -> Option<BrakeTrip> {
        let view = self.view(node_name, node);
        if brake_engaged(view.zone, fraction) {
            let zone = if view.zoned { node.and_then(|n| n.zone.clone()) } else { None };
            return Some(BrakeTrip::Zone { zone, counts: view.zone });
        }
        if brake_engaged(view.cluster, fraction) {
            return Some(BrakeTrip::Cluster { counts: view.cluster });
        }
        None
    }
}

fn minus(counts: BrakeCounts, down: bool) -> BrakeCounts {
    BrakeCounts { unhealthy: counts.unhealthy.saturating_sub(u32::from(down)), total: counts.total.saturating_sub(1) }
}

/// Adds one node to counts.
pub(crate) fn with_node(others: BrakeCounts, unhealthy: bool) -> BrakeCounts {
    BrakeCounts { unhealthy: others.unhealthy + u32::from(unhealthy), total: others.total + 1 }
}

/// The training job a terminating pod belongs to, if the companion may act for it.
pub(crate) fn owning_job(pod: &PodFacts, snapshot: &Snapshot) -> Result<Target, &'static str> {
    match &pod.owner {
        PodOwner::V1 { job, uid } => {
            let job = snapshot.job(job).filter(|j| j.uid == *uid).ok_or("owning job not known")?;
            owner_guard((job.deleting, job.managed, job.ignored), V1_OWNER_GUARDS)?;
            Ok(Target::job(job))
        }
        PodOwner::JobSet(id) => {
            // Labels are copied freely (a debug pod, say): only the controller ownerReference
            // chain Pod → batch Job → JobSet → TrainJob makes it ours, each link matched by UID.
            let (job_name, job_uid) = pod.controller_job.as_ref().ok_or("no controller ownerReference to a Job")?;
            let job_id = NsName { namespace: id.namespace.clone(), name: job_name.clone() };
            let job = snapshot
                .batch_job(&job_id)
                .filter(|j| j.uid == *job_uid)
                .ok_or("controlling Job not known, or not controlled by a JobSet")?;
            if job.jobset != id.name {
                return Err("the JobSet label does not match the ownerReference chain");
            }
            let jobset = snapshot
                .jobset(id)
                .filter(|js| js.uid == job.jobset_uid)
                .ok_or("controlling JobSet not known, or not controlled by a TrainJob")?;
            let tj = snapshot.trainjob_of(jobset).ok_or("JobSet not controlled by a known TrainJob")?;
            owner_guard((tj.deleting, tj.managed, tj.ignored), TRAINJOB_OWNER_GUARDS)?;
            Ok(Target::trainjob(tj))
        }
    }
}

/// Why the companion may not act for the pod of a v1 job, by [`owner_guard`].
const V1_OWNER_GUARDS: [&str; 3] =
    ["owning job is being deleted", "owning job is not managed by the training operator", "owning job is opted out"];

/// Why the companion may not act for the pod of a TrainJob, by [`owner_guard`].
const TRAINJOB_OWNER_GUARDS: [&str; 3] =
    ["owning TrainJob is being deleted", "owning TrainJob is not managed by Trainer", "owning TrainJob is opted out"];

/// The guards an owning job must pass, `(deleting, managed, ignored)`, in that order: the first it
/// fails names why the companion may not act.
fn owner_guard((deleting, managed, ignored): (bool, bool, bool), why: [&'static str; 3]) -> Result<(), &'static str> {
    match (deleting, managed, ignored) {
        (true, _, _) => Err(why[0]),
        (_, false, _) => Err(why[1]),
        (_, _, true) => Err(why[2]),
        _ => Ok(()),
    }
}

pub(crate) fn pod_target(pod: &PodFacts) -> Target {
    Target { kind: TargetKind::Pod, id: pod.id.clone(), uid: pod.uid.clone(), resource_version: "".into() }
}

/// The force-delete budget of one planning pass.
pub struct Budget<'a> {
    pub bucket: &'a mut TokenBucket,
    /// Candidates already told to wait for a token in this pass.
    pub waiting: u32,
}

/// Finalizers other than the Job controller's job-tracking one, which is expected and removed by
/// the Job controller once the pod is terminal.
pub fn blocking_finalizers(pod: &PodFacts) -> Vec<&str> {
    pod.finalizers.iter().map(|f| &**f).filter(|f| *f != JOB_TRACKING_FINALIZER).collect()
}

/// docs/controller.md (Node failure) for one pod at `now`: each step returns early when it decides.
pub(crate) fn plan(
    pod: &PodFacts,
    snapshot: &Snapshot,
    zones: &ZoneHealth,
    budget: &mut Budget<'_>,
    now: Timestamp,
    config: &PlanConfig,
    out: &mut KeyPlan,
) {
    let (Some(deletion), Some(node_name)) = (pod.deletion, pod.node.as_ref()) else { return };
    let Ok(job) = owning_job(pod, snapshot) else { return };
    let target = pod_target(pod);
    if pod.deletion_grace_seconds == Some(0) {
        plan_escalated(pod, &target, config, out);
        return;
    }
    let node = snapshot.node(node_name);
    let health = node_health(node, snapshot.nodes_listed(), config);
    if matches!(health.state, NodeState::Ready | NodeState::Unknown) {
        // A node that is Ready again cancels everything: the kubelet finishes the deletion itself.
        return;
    }
    let stuck = Stuck { pod, target, job, node_name, health, deletion, now, config };
    if stuck.plan_not_yet(out) || stuck.braked(node, zones, budget, out) {
        return;
    }
    stuck.plan_force_delete(out);
}

/// Already escalated (grace period 0). Ours and still held by a finalizer the Job controller will
/// not remove? Say so.
fn plan_escalated(pod: &PodFacts, target: &Target, config: &PlanConfig, out: &mut KeyPlan) {
    let blocking = blocking_finalizers(pod);
    if pod.disrupted_by_trainguard && !blocking.is_empty() {
        out.push(
            PlanRule::NodeFailure,
            warning(
                config,
                target,
                Reason::PodBlockedByFinalizers,
                finalizers_message(&blocking, "was"),
                finalizers_episode(&blocking),
            ),
        );
    }
}

/// A pod terminating on a node that is not Ready: what the steps after the guards share.
struct Stuck<'a> {
    pod: &'a PodFacts,
    target: Target,
    job: Target,
    node_name: &'a Str,
    health: NodeHealth,
    deletion: Timestamp,
    now: Timestamp,
    config: &'a PlanConfig,
}

impl Stuck<'_> {
    fn stuck_for(&self) -> String {
        fmt_duration(self.now.duration_since(self.deletion))
    }

    /// Not escalated yet (too early, the node not trusted dead, Kueue's window, or off): a
    /// Warning once it is stuck past `--force-delete-after`, and a requeue when something may
    /// change. True when it decided.
    fn plan_not_yet(&self, out: &mut KeyPlan) -> bool {
        let Stuck { pod, deletion, now, config, .. } = *self;
        let stuck_at = plus(deletion, config.force_delete_after);
        let past = now >= stuck_at;
        if past {
            out.observations.push(Observation::PodStuck(self.health.state));
        }
        let node_from = trusted_from(config.node_failure, &self.health);
        let fire_from = node_from.map(|f| f.max(escalate_from(pod, deletion, config)));
        if fire_from.is_some_and(|f| now >= f) {
            return false;
        }
        if past {
            let why = self.not_yet_because(node_from, fire_from);
            out.push(
                PlanRule::NodeFailure,
                warning(
                    config,
                    &self.target,
                    Reason::PodStuckTerminating,
                    format!(
                        "Pod has been terminating for {} on node {} ({}); not force-deleted: {why}",
                        self.stuck_for(),
                        self.node_name,
                        self.health.state.as_str()
                    ),
                    "stuck".to_string(),
                ),
            );
        }
        let wake = if past { fire_from } else { Some(stuck_at) };
        if let Some(at) = wake {
            out.push(
                PlanRule::NodeFailure,
                Action::Requeue { target: self.target.clone(), at, why: "force-delete-after" },
            );
        }
        true
    }

    /// Why a pod stuck past `--force-delete-after` is not force-deleted yet.
    fn not_yet_because(&self, node_from: Option<Timestamp>, fire_from: Option<Timestamp>) -> String {
        let kueue_until = kueue_window_end(self.pod, self.deletion);
        match (self.config.node_failure, node_from, fire_from) {
            (NodeFailureMode::Off, _, _) => "--node-failure=off".to_string(),
            (_, Some(n), Some(f)) if kueue_until == Some(f) && n < f => {
                format!("the pod carries {KUEUE_FORCE_DELETE_ANNOTATION}: left to Kueue's own force delete until {f}")
            }
            (_, _, Some(f)) => {
                format!("its deletion is escalated at {f}, once the node has been unhealthy long enough")
            }
            (NodeFailureMode::OutOfService, _, None) => {
                "--node-failure=out-of-service acts only on deleted or out-of-service nodes".to_string()
            }
            (NodeFailureMode::Unreachable, _, None) if self.health.state == NodeState::NotReady => {
                "its kubelet still reports (Ready=False), so it can finish the deletion itself; \
                 --node-failure=unreachable acts only on nodes whose kubelet is gone, deleted or out-of-service \
                 nodes (--node-failure=not-ready would act)"
                    .to_string()
            }
            (NodeFailureMode::Unreachable, _, None) => {
                "the node has no node.kubernetes.io/unreachable NoExecute taint yet".to_string()
            }
            (_, _, None) => {
                "the node has no node.kubernetes.io/unreachable or not-ready NoExecute taint yet".to_string()
            }
        }
    }

    /// The brakes: the zone's (or cluster's) share of unhealthy nodes, then the rate limit. True
    /// when one holds the force delete back.
    fn braked(&self, node: Option<&NodeFacts>, zones: &ZoneHealth, budget: &mut Budget<'_>, out: &mut KeyPlan) -> bool {
        let Stuck { config, now, .. } = *self;
        if let Some(trip) = zones.trip(self.node_name, node, config.pause_unhealthy_fraction) {
            let message = brake_message(&trip, config, "re-evaluated on every node change");
            self.suppressed(out, message, trip.metric_reason().to_string());
            return true;
        }
        if budget.bucket.try_take(now) {
            return false;
        }
        let next = budget.bucket.next_token_at(now, budget.waiting);
        budget.waiting += 1;
        let message = format!(
            "Not force-deleting yet: rate limit of {} force deletes a minute reached",
            config.max_force_deletes_per_minute
        );
        self.suppressed(out, message, "rate-limit".to_string());
        if let Some(at) = next {
            out.push(PlanRule::NodeFailure, Action::Requeue { target: self.target.clone(), at, why: "rate-limit" });
        }
        true
    }

    /// The Warning that a brake holds the force delete back.
    fn suppressed(&self, out: &mut KeyPlan, message: String, episode: String) {
        out.push(
            PlanRule::NodeFailure,
            warning(self.config, &self.target, Reason::ForceDeleteSuppressed, message, episode),
        );
    }

    /// The force delete: the status patch before it, the delete, and the events after it.
    fn plan_force_delete(&self, out: &mut KeyPlan) {
        let Stuck { pod, deletion, now, config, node_name, .. } = *self;
        let (target, job) = (&self.target, &self.job);
        let node_state = self.health.state.as_str();
        // A terminal phase is never changed (PodGC and Kueue leave it too): a pod that Succeeded
        // before its node died must not be counted as a failure.
        let terminal = matches!(pod.phase, PodPhase::Succeeded | PodPhase::Failed);
        if !terminal || !pod.disruption_target {
            let mut status = json!({});
            if !terminal {
                status["phase"] = json!("Failed");
            }
            if !pod.disruption_target {
                status["conditions"] = json!([{
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": DISRUPTION_REASON,
                    "message": format!("trainguard: node {node_name} is {node_state}; force-deleting the stuck pod"),
                    "lastTransitionTime": now.to_string(),
                }]);
            }
            let patch = json!({ "metadata": { "uid": &*pod.uid }, "status": status });
            out.push(PlanRule::NodeFailure, Action::PatchPodStatus { target: target.clone(), patch });
        }
        out.push(
            PlanRule::NodeFailure,
            Action::ForceDeletePod {
                target: target.clone(),
                job: job.clone(),
                node: node_name.clone(),
                node_state: self.health.state,
                stuck_since: deletion,
            },
        );
        let mut message = format!(
            "{} pod {} (grace period 0): node {node_name} is {node_state}, pod terminating since {deletion} ({})",
            verb(config, "Force-deleted", "Would force-delete"),
            pod.id,
            self.stuck_for()
        );
        if let Some(until) = kueue_window_end(pod, deletion) {
            message.push_str(&format!(
                "; the pod carries {KUEUE_FORCE_DELETE_ANNOTATION}, but Kueue had not force-deleted it by {until}"
            ));
        }
        for (on, related) in [(target, job), (job, target)] {
            let mut done = event(
                config,
                on,
                EventType::Normal,
                Reason::ForceDeletedStuckPod,
                message.clone(),
                format!("pod:{}", pod.uid),
            );
            if let Action::Event(e) = &mut done {
                e.after_write = true;
                e.related = Some(related.clone());
            }
            out.push(PlanRule::NodeFailure, done);
        }
        // Predicted with the force delete (so `plan` shows it), published once the delete went through.
        let blocking = blocking_finalizers(pod);
        if !blocking.is_empty() {
            out.push(
                PlanRule::NodeFailure,
                after_write(warning(
                    config,
                    target,
                    Reason::PodBlockedByFinalizers,
                    finalizers_message(&blocking, verb(config, "was", "would be")),
                    finalizers_episode(&blocking),
                )),
            );
        }
    }
}

/// The `ForceDeleteSuppressed` text for a brake: which domain, the counts, the rule, and `when`
/// (what re-checks it).
pub fn brake_message(trip: &BrakeTrip, config: &PlanConfig, when: &str) -> String {
    let counts = trip.counts();
    format!(
        "Not force-deleting: {} of {} nodes in {} are not Ready (>2 and >= {}), which looks like a zone outage or \
         a network partition, not a node failure; {when}",
        counts.unhealthy,
        counts.total,
        trip.domain(),
        config.pause_unhealthy_fraction
    )
}

/// `was` is "was" once the force delete happened, "would be" for a prediction in report mode.
pub fn finalizers_message(blocking: &[&str], was: &str) -> String {
    format!(
        "Pod {was} force-deleted by trainguard but is held by finalizer(s) {}: trainguard never removes finalizers; \
         the job cannot recreate this pod until they are removed",
        blocking.join(", ")
    )
}

pub fn finalizers_episode(blocking: &[&str]) -> String {
    format!("finalizers:{}", blocking.join(","))
}
