//! docs/controller.md (Node failure): a training pod stuck Terminating on a failed node blocks its fixed-name replacement, so
//! the job hangs in `Restarting`. The companion escalates that existing deletion to grace 0 (as
//! PodGC does for deleted and out-of-service nodes), within the zone brake and the rate limit.

use std::collections::HashMap;

use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::actions::{
    Action, BrakeCounts, EventType, KeyPlan, NodeState, Observation, Reason, Rule, Target, TargetKind,
};
use super::ratelimit::TokenBucket;
use super::{event, fmt_duration, plus, verb};
use crate::controller::config::{NodeFailureMode, PlanConfig};
use crate::controller::facts::{
    DISRUPTION_REASON, JOB_TRACKING_FINALIZER, NodeFacts, PodFacts, PodOwner, PodPhase, ReadyStatus, Str,
};
use crate::controller::snapshot::Snapshot;

/// A node's health at `now`, by docs/controller.md (Node failure) definition of unhealthy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeHealth {
    pub state: NodeState,
    /// Missing, out-of-service, or not Ready for `--node-not-ready-for` with the NoExecute taint.
    pub unhealthy: bool,
    /// When a NotReady node with the taint becomes unhealthy (past or future).
    pub unhealthy_from: Option<Timestamp>,
}

pub fn node_health(node: Option<&NodeFacts>, nodes_listed: bool, now: Timestamp, config: &PlanConfig) -> NodeHealth {
    let health = |state, unhealthy, unhealthy_from| NodeHealth { state, unhealthy, unhealthy_from };
    match node {
        None if nodes_listed => health(NodeState::Missing, true, None),
        None => health(NodeState::Unknown, false, None),
        // Like PodGC: the out-of-service taint counts only on a node that is not Ready.
        Some(n) if n.ready == ReadyStatus::True => health(NodeState::Ready, false, None),
        Some(n) if n.out_of_service => health(NodeState::OutOfService, true, None),
        Some(n) => {
            let state = if n.ready == ReadyStatus::Unknown { NodeState::Unreachable } else { NodeState::NotReady };
            // The taint is the node lifecycle controller's own verdict; without it, wait.
            let from =
                n.no_execute_taint.then_some(n.ready_since).flatten().map(|s| plus(s, config.node_not_ready_for));
            health(state, from.is_some_and(|f| now >= f), from)
        }
    }
}

/// Whether `--node-failure` lets this node state trigger a force delete now.
pub fn trusted(mode: NodeFailureMode, health: &NodeHealth) -> bool {
    match mode {
        NodeFailureMode::NodeUnhealthy => health.unhealthy,
        NodeFailureMode::OutOfService => matches!(health.state, NodeState::Missing | NodeState::OutOfService),
        NodeFailureMode::Off => false,
    }
}

/// When a node not yet trusted will be (a NotReady node reaching its bound), if ever by time alone.
fn trusted_from(mode: NodeFailureMode, health: &NodeHealth) -> Option<Timestamp> {
    match mode {
        NodeFailureMode::NodeUnhealthy => health.unhealthy_from,
        _ => None,
    }
}

/// docs/controller.md (Node failure) step 2: more than 2 nodes unhealthy and at least the fraction of the domain — the node
/// lifecycle controller's own definition of a disrupted zone. The floor keeps small zones working.
pub fn brake_engaged(counts: BrakeCounts, fraction: f64) -> bool {
    counts.unhealthy > 2 && counts.total > 0 && f64::from(counts.unhealthy) / f64::from(counts.total) >= fraction
}

/// Adds the candidate's own node to the counts of the rest of its domain.
pub fn with_node(others: BrakeCounts, unhealthy: bool) -> BrakeCounts {
    BrakeCounts { unhealthy: others.unhealthy + u32::from(unhealthy), total: others.total + 1 }
}

/// Unhealthy/total nodes per zone and for the whole cluster, at one `now`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ZoneHealth {
    zones: HashMap<Str, BrakeCounts>,
    cluster: BrakeCounts,
}

impl ZoneHealth {
    pub fn compute(snapshot: &Snapshot, now: Timestamp, config: &PlanConfig) -> Self {
        let mut health = ZoneHealth::default();
        for node in snapshot.nodes() {
            let unhealthy = node_health(Some(node), true, now, config).unhealthy;
            for counts in std::iter::once(&mut health.cluster)
                .chain(node.zone.as_ref().map(|z| health.zones.entry(z.clone()).or_default()))
            {
                counts.total += 1;
                counts.unhealthy += u32::from(unhealthy);
            }
        }
        health
    }

    /// The counts of the node's brake domain (its zone, else the cluster) without the node itself.
    pub fn others(&self, node: Option<&NodeFacts>, now: Timestamp, config: &PlanConfig) -> BrakeCounts {
        let Some(node) = node else { return self.cluster };
        let domain = node.zone.as_ref().and_then(|z| self.zones.get(z)).copied().unwrap_or(self.cluster);
        let unhealthy = node_health(Some(node), true, now, config).unhealthy;
        BrakeCounts {
            unhealthy: domain.unhealthy.saturating_sub(u32::from(unhealthy)),
            total: domain.total.saturating_sub(1),
        }
    }
}

/// The training job a terminating pod belongs to, if the companion may act for it.
pub fn owning_job(pod: &PodFacts, snapshot: &Snapshot) -> Result<Target, &'static str> {
    match &pod.owner {
        PodOwner::V1 { job, uid } => {
            let job = snapshot.job(job).filter(|j| j.uid == *uid).ok_or("owning job not known")?;
            if job.deleting {
                return Err("owning job is being deleted");
            }
            if !job.managed() {
                return Err("owning job is not managed by the training operator");
            }
            if job.ignored {
                return Err("owning job is opted out");
            }
            Ok(Target {
                kind: TargetKind::Job(job.key.kind),
                id: job.key.id.clone(),
                uid: job.uid.clone(),
                resource_version: job.resource_version.clone(),
            })
        }
        PodOwner::JobSet(id) => {
            let jobset = snapshot.jobset(id).ok_or("JobSet not owned by a known TrainJob")?;
            let tj = snapshot.trainjob_of(jobset).ok_or("JobSet not owned by a known TrainJob")?;
            if tj.deleting {
                return Err("owning TrainJob is being deleted");
            }
            if !tj.managed() {
                return Err("owning TrainJob is not managed by Trainer");
            }
            if tj.ignored {
                return Err("owning TrainJob is opted out");
            }
            Ok(Target {
                kind: TargetKind::TrainJob,
                id: tj.id.clone(),
                uid: tj.uid.clone(),
                resource_version: tj.resource_version.clone(),
            })
        }
    }
}

pub fn pod_target(pod: &PodFacts) -> Target {
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

/// docs/controller.md (Node failure) for one pod at `now`.
pub fn plan(
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
        // Already escalated. Ours and still held by a finalizer the Job controller will not remove?
        let blocking = blocking_finalizers(pod);
        if pod.disrupted_by_trainguard && !blocking.is_empty() {
            out.push(
                Rule::NodeFailure,
                event(
                    config,
                    &target,
                    EventType::Warning,
                    Reason::PodBlockedByFinalizers,
                    format!(
                        "Pod was force-deleted by trainguard but is still held by finalizer(s) {}: trainguard never \
                         removes finalizers; the job cannot recreate this pod until they are removed",
                        blocking.join(", ")
                    ),
                    format!("finalizers:{}", blocking.join(",")),
                ),
            );
        }
        return;
    }

    let node = snapshot.node(node_name);
    let health = node_health(node, snapshot.nodes_listed(), now, config);
    if matches!(health.state, NodeState::Ready | NodeState::Unknown) {
        // A node that is Ready again cancels everything: the kubelet finishes the deletion itself.
        return;
    }
    let stuck_at = plus(deletion, config.force_delete_after);
    let past = now >= stuck_at;
    if past {
        out.observations.push(Observation::PodStuck(health.state));
    }
    let fire_from = if trusted(config.node_failure, &health) {
        Some(stuck_at)
    } else {
        trusted_from(config.node_failure, &health).map(|f| f.max(stuck_at))
    };
    let stuck_for = fmt_duration(now.duration_since(deletion));
    let node_state = health.state.as_str();

    if fire_from.is_none_or(|f| now < f) {
        if past {
            let why = match (config.node_failure, fire_from) {
                (NodeFailureMode::Off, _) => "--node-failure=off".to_string(),
                (_, Some(f)) => {
                    format!("its deletion is escalated at {f}, once the node has been unhealthy long enough")
                }
                (NodeFailureMode::OutOfService, None) => {
                    "--node-failure=out-of-service acts only on deleted or out-of-service nodes".to_string()
                }
                (NodeFailureMode::NodeUnhealthy, None) => {
                    "the node has no node.kubernetes.io/unreachable or not-ready NoExecute taint yet".to_string()
                }
            };
            out.push(
                Rule::NodeFailure,
                event(
                    config,
                    &target,
                    EventType::Warning,
                    Reason::PodStuckTerminating,
                    format!(
                        "Pod has been terminating for {stuck_for} on node {node_name} ({node_state}); not \
                         force-deleted: {why}"
                    ),
                    "stuck".to_string(),
                ),
            );
        }
        let wake = if past { fire_from } else { Some(stuck_at) };
        if let Some(at) = wake {
            out.push(Rule::NodeFailure, Action::Requeue { target, at, why: "force-delete-after" });
        }
        return;
    }

    let others = zones.others(node, now, config);
    let counts = with_node(others, true);
    if brake_engaged(counts, config.pause_unhealthy_fraction) {
        let domain = node.and_then(|n| n.zone.as_deref()).map_or("the cluster".to_string(), |z| format!("zone {z}"));
        out.push(
            Rule::NodeFailure,
            event(
                config,
                &target,
                EventType::Warning,
                Reason::ForceDeleteSuppressed,
                format!(
                    "Not force-deleting: {} of {} nodes in {domain} are unhealthy (>2 and >= {}), which looks like a \
                     zone outage or a network partition, not a node failure; re-evaluated on every node change",
                    counts.unhealthy, counts.total, config.pause_unhealthy_fraction
                ),
                "zone-brake".to_string(),
            ),
        );
        return;
    }
    if !budget.bucket.try_take(now) {
        let next = budget.bucket.next_token_at(now, budget.waiting);
        budget.waiting += 1;
        out.push(
            Rule::NodeFailure,
            event(
                config,
                &target,
                EventType::Warning,
                Reason::ForceDeleteSuppressed,
                format!(
                    "Not force-deleting yet: rate limit of {} force deletes a minute reached",
                    config.max_force_deletes_per_minute
                ),
                "rate-limit".to_string(),
            ),
        );
        if let Some(at) = next {
            out.push(Rule::NodeFailure, Action::Requeue { target, at, why: "rate-limit" });
        }
        return;
    }

    if pod.phase != PodPhase::Failed || !pod.disruption_target {
        let mut status = json!({ "phase": "Failed" });
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
        out.push(Rule::NodeFailure, Action::PatchPodStatus { target: target.clone(), patch });
    }
    out.push(
        Rule::NodeFailure,
        Action::ForceDeletePod {
            target: target.clone(),
            job: job.clone(),
            node: node_name.clone(),
            node_state: health.state,
            stuck_since: deletion,
            brake: others,
        },
    );
    let message = format!(
        "{} pod {} (grace period 0): node {node_name} is {node_state}, pod terminating since {deletion} ({stuck_for})",
        verb(config, "Force-deleted", "Would force-delete"),
        pod.id
    );
    for (on, related) in [(&target, &job), (&job, &target)] {
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
        out.push(Rule::NodeFailure, done);
    }
}
