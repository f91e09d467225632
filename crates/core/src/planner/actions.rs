//! What the planner outputs: actions on named objects, each tagged with the rule that asked for
//! it, and their rendering as the JSON lines `trainguard plan` prints (docs/controller.md (`trainguard plan`)).

use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value, json};

use crate::model::kubeflow_v1::{KUBEFLOW_API_VERSION, TrainingKind};
use crate::model::{TRAINJOB_GROUP, TRAINJOB_VERSION};
use crate::planner::config::{Mode, PlanConfig, Propagation};
use crate::planner::facts::{JobFacts, NsName, Str, TrainJobFacts};

/// The controller rule an action serves (the webhook's are [`crate::admission::Rule`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PlanRule {
    Ttl,
    Suspend,
    NodeFailure,
}

impl PlanRule {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            PlanRule::Ttl => "ttl",
            PlanRule::Suspend => "suspend",
            PlanRule::NodeFailure => "node-failure",
        }
    }
}

/// The kind of object an action is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TargetKind {
    Job(TrainingKind),
    TrainJob,
    Pod,
}

impl TargetKind {
    pub fn kind(self) -> &'static str {
        match self {
            TargetKind::Job(k) => k.kind(),
            TargetKind::TrainJob => "TrainJob",
            TargetKind::Pod => "Pod",
        }
    }

    pub fn api_version(self) -> String {
        match self {
            TargetKind::Job(_) => KUBEFLOW_API_VERSION.to_string(),
            TargetKind::TrainJob => format!("{TRAINJOB_GROUP}/{TRAINJOB_VERSION}"),
            TargetKind::Pod => "v1".to_string(),
        }
    }
}

/// An object an action is about, as the planner last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub kind: TargetKind,
    pub id: NsName,
    pub uid: Str,
    pub resource_version: Str,
}

/// Event reasons (docs/controller.md (Events, Metrics and Knobs)). In report mode, those that stand for a write are prefixed `Would`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    TTLExpiredDeleted,
    TTLDeleteFailed,
    TTLNoFinishTime,
    TTLClockSkew,
    SuspendNotReconciled,
    /// Kueue admitted the job's Workload, but the job stayed suspended.
    AdmittedButSuspended,
    /// A Failed TrainJob got a new JobSet after it failed (Trainer's JobSet-TTL loop).
    JobSetRecreatedAfterFailure,
    TTLStashedWhileSuspended,
    TTLRestored,
    /// The stash annotation holds something that is not a TTL; nothing is moved (not in docs/controller.md (Events, Metrics and Knobs)
    /// list: added so a bad annotation is reported instead of silently ignored).
    TTLRestoreFailed,
    /// A TrainJob's `trainguard.io/ttl-seconds-after-finished` is not a whole number of seconds.
    TTLAnnotationInvalid,
    PodStuckTerminating,
    ForceDeletedStuckPod,
    ForceDeleteSuppressed,
    PodBlockedByFinalizers,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::TTLExpiredDeleted => "TTLExpiredDeleted",
            Reason::TTLDeleteFailed => "TTLDeleteFailed",
            Reason::TTLNoFinishTime => "TTLNoFinishTime",
            Reason::TTLClockSkew => "TTLClockSkew",
            Reason::SuspendNotReconciled => "SuspendNotReconciled",
            Reason::AdmittedButSuspended => "AdmittedButSuspended",
            Reason::JobSetRecreatedAfterFailure => "JobSetRecreatedAfterFailure",
            Reason::TTLStashedWhileSuspended => "TTLStashedWhileSuspended",
            Reason::TTLRestored => "TTLRestored",
            Reason::TTLRestoreFailed => "TTLRestoreFailed",
            Reason::TTLAnnotationInvalid => "TTLAnnotationInvalid",
            Reason::PodStuckTerminating => "PodStuckTerminating",
            Reason::ForceDeletedStuckPod => "ForceDeletedStuckPod",
            Reason::ForceDeleteSuppressed => "ForceDeleteSuppressed",
            Reason::PodBlockedByFinalizers => "PodBlockedByFinalizers",
        }
    }

    /// Whether the event reports a write the companion made (so report mode says `Would…`).
    pub(crate) fn stands_for_write(self) -> bool {
        matches!(
            self,
            Reason::TTLExpiredDeleted
                | Reason::TTLStashedWhileSuspended
                | Reason::TTLRestored
                | Reason::ForceDeletedStuckPod
        )
    }

    /// The reason as published: `Would<Reason>` in report mode for a write.
    pub fn published(self, mode: Mode) -> String {
        if mode == Mode::Report && self.stands_for_write() {
            format!("Would{}", self.as_str())
        } else {
            self.as_str().to_string()
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// An event to publish. Deduplicated per (target UID, reason, episode).
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedEvent {
    pub target: Target,
    pub type_: EventType,
    pub reason: Reason,
    /// The reason as published (with `Would` in report mode where it stands for a write).
    pub published_reason: String,
    pub message: String,
    pub episode: String,
    /// Published only if the write before it (same plan, same rule) succeeded.
    pub after_write: bool,
    pub related: Option<Target>,
}

/// Node state as reported in events and the `node_state` metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeState {
    Ready,
    NotReady,
    Unreachable,
    OutOfService,
    Missing,
    /// No node list yet (a file snapshot without nodes): nothing is decided.
    Unknown,
}

impl NodeState {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Ready => "ready",
            NodeState::NotReady => "not-ready",
            NodeState::Unreachable => "unreachable",
            NodeState::OutOfService => "out-of-service",
            NodeState::Missing => "missing",
            NodeState::Unknown => "unknown",
        }
    }
}

/// Unhealthy (`Ready` not True) and total node counts of a brake domain (a zone or the cluster).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BrakeCounts {
    pub(crate) unhealthy: u32,
    pub(crate) total: u32,
}

/// What a job patch does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobPatchKind {
    /// Move `ttlSecondsAfterFinished` (this value) into the stash annotation.
    Stash { ttl: i64 },
    /// Move the stashed value back into spec (None: spec already has a TTL; only drop the annotation).
    Restore { ttl: Option<i64> },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    DeleteJob {
        target: Target,
        propagation: Propagation,
        finish_at: Timestamp,
        expires_at: Timestamp,
    },
    PatchJob {
        target: Target,
        kind: JobPatchKind,
        /// The merge-patch body, with the planner's resourceVersion (the executor uses the live one).
        patch: Value,
    },
    PatchPodStatus {
        target: Target,
        /// The strategic-merge-patch body, `metadata.uid` as precondition.
        patch: Value,
    },
    ForceDeletePod {
        target: Target,
        job: Target,
        node: Str,
        node_state: NodeState,
        stuck_since: Timestamp,
    },
    Event(PlannedEvent),
    Requeue {
        target: Target,
        at: Timestamp,
        why: &'static str,
    },
}

impl Action {
    pub fn name(&self) -> &'static str {
        match self {
            Action::DeleteJob { .. } => "delete-job",
            Action::PatchJob { .. } => "patch-job",
            Action::PatchPodStatus { .. } => "patch-pod-status",
            Action::ForceDeletePod { .. } => "force-delete-pod",
            Action::Event(_) => "event",
            Action::Requeue { .. } => "requeue",
        }
    }

    pub(crate) fn target(&self) -> &Target {
        match self {
            Action::DeleteJob { target, .. }
            | Action::PatchJob { target, .. }
            | Action::PatchPodStatus { target, .. }
            | Action::ForceDeletePod { target, .. }
            | Action::Requeue { target, .. } => target,
            Action::Event(e) => &e.target,
        }
    }

    /// Writes to the cluster other than events.
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            Action::DeleteJob { .. }
                | Action::PatchJob { .. }
                | Action::PatchPodStatus { .. }
                | Action::ForceDeletePod { .. }
        )
    }
}

/// One action and the rule that asked for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub rule: PlanRule,
    pub action: Action,
}

impl Planned {
    /// The JSON line `trainguard plan` prints (docs/controller.md (`trainguard plan`)). In report
    /// mode a write is never printed as one: its action is `would-<action>`.
    pub fn to_line(&self, mode: Mode) -> Value {
        let target = self.action.target();
        let mut line = Map::new();
        if mode == Mode::Report && self.action.is_write() {
            line.insert("action".into(), json!(format!("would-{}", self.action.name())));
        } else {
            line.insert("action".into(), json!(self.action.name()));
        }
        line.insert("kind".into(), json!(target.kind.kind()));
        line.insert("namespace".into(), json!(&*target.id.namespace));
        line.insert("name".into(), json!(&*target.id.name));
        line.insert("uid".into(), json!(&*target.uid));
        line.insert("rule".into(), json!(self.rule.as_str()));
        match &self.action {
            Action::DeleteJob { propagation, finish_at, expires_at, .. } => {
                line.insert("reason".into(), json!("ttl-expired"));
                line.insert("propagation".into(), json!(propagation.as_str()));
                line.insert("finishedAt".into(), json!(finish_at.to_string()));
                line.insert("expiredAt".into(), json!(expires_at.to_string()));
            }
            Action::PatchJob { kind, patch, .. } => {
                let reason = match kind {
                    JobPatchKind::Stash { .. } => "stash-ttl",
                    JobPatchKind::Restore { .. } => "restore-ttl",
                };
                line.insert("reason".into(), json!(reason));
                line.insert("patch".into(), patch.clone());
            }
            Action::PatchPodStatus { patch, .. } => {
                line.insert("reason".into(), json!("mark-failed-before-force-delete"));
                line.insert("patch".into(), patch.clone());
            }
            Action::ForceDeletePod { node, node_state, stuck_since, job, .. } => {
                line.insert("reason".into(), json!(format!("node-{}", node_state.as_str())));
                line.insert("node".into(), json!(&**node));
                line.insert("terminatingSince".into(), json!(stuck_since.to_string()));
                line.insert("gracePeriodSeconds".into(), json!(0));
                line.insert("job".into(), json!(format!("{}/{}", job.kind.kind(), job.id)));
            }
            Action::Event(e) => {
                line.insert("reason".into(), json!(e.published_reason));
                line.insert("type".into(), json!(e.type_.as_str()));
                line.insert("message".into(), json!(e.message));
                if let Some(related) = &e.related {
                    line.insert("related".into(), json!(format!("{}/{}", related.kind.kind(), related.id)));
                }
            }
            Action::Requeue { at, why, .. } => {
                line.insert("reason".into(), json!(why));
                line.insert("at".into(), json!(at.to_string()));
            }
        }
        Value::Object(line)
    }
}

/// Gauge contributions of one key (docs/controller.md (Events, Metrics and Knobs) metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Observation {
    /// A job with a TTL deletion scheduled (`trainguard_ttl_scheduled_jobs{kind}`).
    TtlScheduled(&'static str),
    /// A suspended job stuck past the bound (`trainguard_suspend_not_reconciled_jobs{kind}`).
    SuspendStuck(&'static str),
    /// A job still suspended past `--admitted-suspended-after` while its Workload is Admitted
    /// (`trainguard_admitted_but_suspended_jobs{kind}`).
    AdmittedSuspended(&'static str),
    /// A Failed TrainJob whose JobSet was created after the failure
    /// (`trainguard_jobset_recreated_after_failure_trainjobs`).
    JobSetRecreated,
    /// A pod terminating past `--force-delete-after` on a node that is not Ready
    /// (`trainguard_pods_stuck_terminating{node_state}`).
    PodStuck(NodeState),
}

/// The plan for one key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeyPlan {
    pub actions: Vec<Planned>,
    /// The earliest time a rule of this key can next fire.
    pub wake: Option<Timestamp>,
    pub observations: Vec<Observation>,
}

impl KeyPlan {
    pub(crate) fn push(&mut self, rule: PlanRule, action: Action) {
        if let Action::Requeue { at, .. } = &action {
            self.wake = Some(self.wake.map_or(*at, |w| w.min(*at)));
        }
        self.actions.push(Planned { rule, action });
    }
}

impl Target {
    /// The job a plan acts on, as the executor re-checks it (uid, resourceVersion).
    pub(crate) fn job(job: &JobFacts) -> Target {
        Target {
            kind: TargetKind::Job(job.key.kind),
            id: job.key.id.clone(),
            uid: job.uid.clone(),
            resource_version: job.resource_version.clone(),
        }
    }

    /// The TrainJob a plan acts on.
    pub(crate) fn trainjob(tj: &TrainJobFacts) -> Target {
        Target {
            kind: TargetKind::TrainJob,
            id: tj.id.clone(),
            uid: tj.uid.clone(),
            resource_version: tj.resource_version.clone(),
        }
    }
}

/// An event action (not after a write; callers set `after_write` where it reports one).
pub(crate) fn event(
    config: &PlanConfig,
    target: &Target,
    type_: EventType,
    reason: Reason,
    message: String,
    episode: String,
) -> Action {
    Action::Event(PlannedEvent {
        target: target.clone(),
        type_,
        reason,
        published_reason: reason.published(config.mode),
        message,
        episode,
        after_write: false,
        related: None,
    })
}

/// A Warning event action.
pub(crate) fn warning(
    config: &PlanConfig,
    target: &Target,
    reason: Reason,
    message: String,
    episode: String,
) -> Action {
    event(config, target, EventType::Warning, reason, message, episode)
}

/// The event `action`, published only once the write it reports went through.
pub(crate) fn after_write(mut action: Action) -> Action {
    if let Action::Event(e) = &mut action {
        e.after_write = true;
    }
    action
}

/// The verb of a message: what was done, or in report mode what would be.
pub(crate) fn verb(config: &PlanConfig, act: &'static str, report: &'static str) -> &'static str {
    if config.mode == Mode::Report { report } else { act }
}
