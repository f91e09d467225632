//! Compact facts: what the planner knows about each object, reduced from the slim views to the
//! few fields its rules read. Strings that repeat (namespaces, node names, finalizers) are shared
//! `Arc<str>`s, so tens of thousands of pods stay small in memory. Pure: no I/O, no clock.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;

use crate::model::condition::true_since;
use crate::model::jobset::{BatchJobView, JOBSET_GROUP, JOBSET_KIND, JOBSET_NAME_LABEL, JobSetView};
use crate::model::kubeflow_v1::{
    JOB_NAME_LABEL, KUBEFLOW_GROUP, TRAINING_OPERATOR_MANAGED_BY, TrainingJobView, TrainingKind,
};
use crate::model::pod::{NodeView, PodView};
use crate::model::trainjob_state::{self, TrainJobStateView};
use crate::model::workload::WorkloadView;
use crate::model::{DEFAULT_MANAGED_BY, TRAINJOB_GROUP, TRAINJOB_KIND};

/// A shared, immutable string.
pub type Str = Arc<str>;

/// Label that opts a training job (v1 job or TrainJob) out of everything the companion does.
pub(crate) const IGNORE_LABEL: &str = "trainguard.io/ignore";
/// Where the opt-in remedy of docs/controller.md (Preemption (suspend)) keeps `ttlSecondsAfterFinished` while a job is suspended.
pub(crate) const STASH_ANNOTATION: &str = "trainguard.io/stashed-ttl-seconds-after-finished";
/// The Job controller's finalizer on pods of `batch/v1` Jobs (JobSet pods carry it).
pub(crate) const JOB_TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
pub(crate) const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
pub(crate) const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
pub(crate) const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
pub(crate) const TAINT_OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";
/// Kueue's opt-in marker for its own force delete (FailureRecoveryPolicy).
pub(crate) const KUEUE_FORCE_DELETE_ANNOTATION: &str = "kueue.x-k8s.io/safe-to-forcefully-delete";
/// Opt-in TTL of a TrainJob, in seconds after it finished (Trainer has none of its own yet).
pub(crate) const TRAINJOB_TTL_ANNOTATION: &str = "trainguard.io/ttl-seconds-after-finished";
/// Reason of the `DisruptionTarget` condition trainguard sets before a force delete.
pub(crate) const DISRUPTION_REASON: &str = "DeletionByTrainguard";

/// An annotation that holds a whole number of seconds, read once when the object is reduced to
/// facts. The snapshot keeps the number, or for a value that is not one a short prefix (for
/// messages) and a hash of the whole (for de-duplicating its events): never the raw text, so the
/// controller's memory does not grow with what users write into annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecondsAnnotation {
    /// A whole number (negative ones included: the rules refuse those themselves).
    Seconds(i64),
    /// Not a whole number.
    Unreadable {
        /// The first [`SecondsAnnotation::SHOWN_CHARS`] characters, `…` when cut.
        shown: Str,
        /// A hash of the whole value: one event per distinct value, in bounded memory.
        digest: u64,
    },
}

impl SecondsAnnotation {
    /// Characters of an unreadable value quoted in messages.
    pub(crate) const SHOWN_CHARS: usize = 64;

    pub(crate) fn parse(raw: &str) -> Self {
        use std::hash::{Hash, Hasher};
        match raw.trim().parse::<i64>() {
            Ok(seconds) => SecondsAnnotation::Seconds(seconds),
            Err(_) => {
                let mut shown: String = raw.chars().take(Self::SHOWN_CHARS).collect();
                if shown.len() < raw.len() {
                    shown.push('…');
                }
                // SipHash with fixed keys: the same value gives the same key in every process.
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                raw.hash(&mut hasher);
                SecondsAnnotation::Unreadable { shown: shown.into(), digest: hasher.finish() }
            }
        }
    }

    /// What the value is called in messages: the number, or the quoted prefix.
    pub(crate) fn shown(&self) -> String {
        match self {
            SecondsAnnotation::Seconds(n) => format!("{:?}", n.to_string()),
            SecondsAnnotation::Unreadable { shown, .. } => format!("{shown:?}"),
        }
    }

    /// A short key for de-duplicating events about this value.
    pub(crate) fn dedup_key(&self) -> String {
        match self {
            SecondsAnnotation::Seconds(n) => n.to_string(),
            SecondsAnnotation::Unreadable { digest, .. } => format!("{digest:016x}"),
        }
    }
}

/// Namespace and name of a namespaced object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NsName {
    pub namespace: Str,
    pub name: Str,
}

impl NsName {
    pub fn new(namespace: &str, name: &str) -> Self {
        NsName { namespace: namespace.into(), name: name.into() }
    }
}

impl std::fmt::Display for NsName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A v1 training job: its kind plus namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobKey {
    pub kind: TrainingKind,
    pub id: NsName,
}

/// What owns a training pod, as far as the companion cares.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PodOwner {
    /// A v1 job: `training.kubeflow.org/job-name` label plus a controller ownerRef to one of the
    /// six kinds; the UID is the ownerRef's.
    V1 { job: JobKey, uid: Str },
    /// A pod labelled `jobset.sigs.k8s.io/jobset-name` (the label only groups it; whether it is a
    /// TrainJob pod is decided by its ownerReference chain, see [`PodFacts::controller_job`]).
    JobSet(NsName),
}

/// A Kubernetes condition status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CondStatus {
    True,
    False,
    Unknown,
}

impl CondStatus {
    fn parse(s: &str) -> Self {
        match s {
            "True" => CondStatus::True,
            "False" => CondStatus::False,
            _ => CondStatus::Unknown,
        }
    }
}

pub use crate::model::kubeflow_v1::FinishKind;

/// A finished job (condition `Succeeded` or `Failed` with status `True`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finished {
    pub kind: FinishKind,
    pub completion_time: Option<Timestamp>,
    /// `lastTransitionTime` of the finishing condition.
    pub condition_time: Option<Timestamp>,
}

/// A `kubeflow.org/v1` job, reduced.
#[derive(Debug, Clone, PartialEq)]
pub struct JobFacts {
    pub key: JobKey,
    pub uid: Str,
    pub resource_version: Str,
    pub deleting: bool,
    /// Label `trainguard.io/ignore: "true"`.
    pub ignored: bool,
    /// Managed by the training operator: `runPolicy.managedBy` unset or the operator's own.
    pub managed: bool,
    /// `spec.runPolicy.suspend == true` (the spec: suspension arrives before status).
    pub suspend: bool,
    pub ttl_seconds: Option<i64>,
    /// The stash annotation, when present, read.
    pub stashed_ttl: Option<SecondsAnnotation>,
    pub finished: Option<Finished>,
    /// `lastTransitionTime` of a `Suspended=True` condition; `Some(None)` when the condition is
    /// True but carries no time.
    pub suspended_condition: Option<Option<Timestamp>>,
    /// Sum of `status.replicaStatuses.*.active`.
    pub active: i64,
}

/// A `trainer.kubeflow.org/v1alpha1` TrainJob, reduced.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainJobFacts {
    pub id: NsName,
    pub uid: Str,
    pub resource_version: Str,
    pub deleting: bool,
    pub ignored: bool,
    /// Managed by Trainer's own controller (`spec.managedBy` unset reads as that), not e.g.
    /// MultiKueue.
    pub managed: bool,
    pub suspend: bool,
    /// Condition `Complete` or `Failed` is True.
    pub finished: bool,
    /// The finishing condition (`Complete` or `Failed`) and its `lastTransitionTime`.
    pub finished_condition: Option<(FinishKind, Option<Timestamp>)>,
    /// `spec.ttlSecondsAfterFinished`, should the CRD gain it (it wins over the annotation).
    pub(crate) spec_ttl: Option<i64>,
    /// Annotation `trainguard.io/ttl-seconds-after-finished`, read.
    pub(crate) ttl_annotation: Option<SecondsAnnotation>,
    pub suspended_condition: Option<Option<Timestamp>>,
    /// Sum of `status.jobsStatus[].active`.
    pub active: i64,
}

/// A `batch/v1` Job a JobSet controls (other Jobs are not kept): the middle link of the chain
/// Pod → batch Job → JobSet → TrainJob.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchJobFacts {
    pub id: NsName,
    pub uid: Str,
    /// Name and UID of the controlling JobSet.
    pub(crate) jobset: Str,
    pub(crate) jobset_uid: Str,
}

/// A JobSet owned by a TrainJob (other JobSets are not ours and are not kept).
#[derive(Debug, Clone, PartialEq)]
pub struct JobSetFacts {
    pub id: NsName,
    pub uid: Str,
    pub(crate) trainjob: Str,
    pub(crate) trainjob_uid: Str,
    /// Sum of `status.replicatedJobsStatus[].active`.
    pub active: i64,
    /// `metadata.creationTimestamp`.
    pub(crate) created: Option<Timestamp>,
    /// `spec.suspend`.
    pub(crate) suspended: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

impl PodPhase {
    fn parse(s: Option<&str>) -> Self {
        match s {
            Some("Pending") => PodPhase::Pending,
            Some("Running") => PodPhase::Running,
            Some("Succeeded") => PodPhase::Succeeded,
            Some("Failed") => PodPhase::Failed,
            _ => PodPhase::Unknown,
        }
    }
}

/// A training pod, reduced.
#[derive(Debug, Clone, PartialEq)]
pub struct PodFacts {
    pub id: NsName,
    pub uid: Str,
    pub owner: PodOwner,
    pub node: Option<Str>,
    pub deletion: Option<Timestamp>,
    pub deletion_grace_seconds: Option<i64>,
    pub finalizers: Box<[Str]>,
    pub phase: PodPhase,
    /// Name and UID of the controlling `batch/v1` Job (JobSet pods only): the first link of the
    /// ownerReference chain that alone makes a JobSet pod a TrainJob pod.
    pub controller_job: Option<(Str, Str)>,
    /// Condition `DisruptionTarget=True` is present.
    pub disruption_target: bool,
    /// That condition has reason `DeletionByTrainguard`: this pod's deletion was escalated by us.
    pub disrupted_by_trainguard: bool,
    /// Annotation `kueue.x-k8s.io/safe-to-forcefully-delete: "true"`: Kueue may force-delete it itself.
    pub kueue_force_delete: bool,
}

/// A node, reduced.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFacts {
    pub name: Str,
    pub uid: Str,
    pub zone: Option<Str>,
    pub ready: ReadyStatus,
    /// `lastTransitionTime` of the Ready condition, else the node's creation time.
    pub ready_since: Option<Timestamp>,
    /// A NoExecute taint `node.kubernetes.io/unreachable` or `…/not-ready`.
    pub no_execute_taint: bool,
    /// The NoExecute taint `node.kubernetes.io/unreachable` (the kubelet stopped reporting).
    pub unreachable_taint: bool,
    pub out_of_service: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadyStatus {
    True,
    False,
    Unknown,
    Absent,
}

/// A Kueue Workload, reduced to the guards of docs/controller.md (How it decides).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadFacts {
    pub id: NsName,
    /// UID of its controller owner (the job it stands for).
    pub owner_uid: Option<Str>,
    pub finished: bool,
    /// `lastTransitionTime` of `Evicted=True`; `Some(None)` when True without a time.
    pub evicted: Option<Option<Timestamp>>,
    /// `lastTransitionTime` of `Admitted=True`; `Some(None)` when True without a time.
    pub admitted: Option<Option<Timestamp>>,
}

/// An object that cannot be reduced to facts (a required field is missing).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {name}: {message}")]
pub struct FactsError {
    pub kind: &'static str,
    pub name: String,
    pub message: String,
}

fn required<'a>(meta: &'a ObjectMeta, kind: &'static str, field: &str) -> Result<&'a str, FactsError> {
    let value = match field {
        "name" => meta.name.as_deref(),
        "uid" => meta.uid.as_deref(),
        _ => None,
    };
    value.filter(|v| !v.is_empty()).ok_or_else(|| FactsError {
        kind,
        name: format!("{}/{}", meta.namespace.as_deref().unwrap_or(""), meta.name.as_deref().unwrap_or("")),
        message: format!("metadata.{field} is missing"),
    })
}

fn ns_name(meta: &ObjectMeta, kind: &'static str) -> Result<NsName, FactsError> {
    let name = required(meta, kind, "name")?;
    Ok(NsName::new(meta.namespace.as_deref().unwrap_or("default"), name))
}

fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

fn ignored(meta: &ObjectMeta) -> bool {
    label(meta, IGNORE_LABEL) == Some("true")
}

fn controller_owner(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references.as_ref()?.iter().find(|o| o.controller == Some(true))
}

/// Whether a `managedBy` value names `own` controller: unset or empty reads as `own`.
fn managed_by(value: Option<&str>, own: &str) -> bool {
    value.is_none_or(|v| v.is_empty() || v == own)
}

fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}

impl JobFacts {
    pub fn from_view(kind: TrainingKind, job: &TrainingJobView) -> Result<Self, FactsError> {
        let meta = &job.metadata;
        let id = ns_name(meta, "job")?;
        let uid = required(meta, "job", "uid")?;
        let policy = job.run_policy();
        let conditions = job.conditions();
        // Succeeded wins over Failed if (oddly) both are True: either way the job is finished.
        let finished = [FinishKind::Succeeded, FinishKind::Failed].into_iter().find_map(|kind| {
            true_since(conditions, kind.as_str()).map(|since| Finished {
                kind,
                completion_time: job.status.as_ref().and_then(|s| s.completion_time.as_ref()).map(|t| t.0),
                condition_time: since,
            })
        });
        let active = job
            .status
            .as_ref()
            .and_then(|s| s.replica_statuses.as_ref())
            .map(|r| r.values().map(|v| v.active.unwrap_or(0).max(0)).sum())
            .unwrap_or(0);
        Ok(JobFacts {
            key: JobKey { kind, id },
            uid: uid.into(),
            resource_version: meta.resource_version.as_deref().unwrap_or("").into(),
            deleting: meta.deletion_timestamp.is_some(),
            ignored: ignored(meta),
            managed: managed_by(policy.and_then(|p| p.managed_by.as_deref()), TRAINING_OPERATOR_MANAGED_BY),
            suspend: policy.and_then(|p| p.suspend).unwrap_or(false),
            ttl_seconds: policy.and_then(|p| p.ttl_seconds_after_finished),
            stashed_ttl: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(STASH_ANNOTATION))
                .map(|v| SecondsAnnotation::parse(v)),
            finished,
            suspended_condition: true_since(conditions, "Suspended"),
            active,
        })
    }
}

impl TrainJobFacts {
    pub fn from_view(job: &TrainJobStateView) -> Result<Self, FactsError> {
        let meta = &job.metadata;
        let conditions = job.conditions();
        let finished = trainjob_state::finished(conditions);
        Ok(TrainJobFacts {
            id: ns_name(meta, "TrainJob")?,
            uid: required(meta, "TrainJob", "uid")?.into(),
            resource_version: meta.resource_version.as_deref().unwrap_or("").into(),
            deleting: meta.deletion_timestamp.is_some(),
            ignored: ignored(meta),
            managed: managed_by(job.spec.managed_by.as_deref(), DEFAULT_MANAGED_BY),
            suspend: job.spec.suspend.unwrap_or(false),
            finished: finished.is_some(),
            finished_condition: finished,
            spec_ttl: job.spec.ttl_seconds_after_finished,
            ttl_annotation: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(TRAINJOB_TTL_ANNOTATION))
                .map(|v| SecondsAnnotation::parse(v)),
            suspended_condition: true_since(conditions, "Suspended"),
            active: job
                .status
                .as_ref()
                .and_then(|s| s.jobs_status.as_ref())
                .map(|j| j.iter().map(|s| i64::from(s.active.unwrap_or(0).max(0))).sum())
                .unwrap_or(0),
        })
    }
}

impl JobSetFacts {
    /// `None` for a JobSet that no TrainJob controls: those are not ours.
    pub fn from_view(jobset: &JobSetView) -> Result<Option<Self>, FactsError> {
        let meta = &jobset.metadata;
        let Some(owner) =
            controller_owner(meta).filter(|o| o.kind == TRAINJOB_KIND && group_of(&o.api_version) == TRAINJOB_GROUP)
        else {
            return Ok(None);
        };
        let active = jobset
            .status
            .as_ref()
            .and_then(|s| s.replicated_jobs_status.as_ref())
            .map(|r| r.iter().map(|j| i64::from(j.active.unwrap_or(0).max(0))).sum())
            .unwrap_or(0);
        Ok(Some(JobSetFacts {
            id: ns_name(meta, "JobSet")?,
            uid: required(meta, "JobSet", "uid")?.into(),
            trainjob: owner.name.as_str().into(),
            trainjob_uid: owner.uid.as_str().into(),
            active,
            created: meta.creation_timestamp.as_ref().map(|t| t.0),
            suspended: jobset.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false),
        }))
    }
}

impl BatchJobFacts {
    /// `None` for a Job no JobSet controls: not ours.
    pub fn from_view(job: &BatchJobView) -> Result<Option<Self>, FactsError> {
        let meta = &job.metadata;
        let Some(owner) =
            controller_owner(meta).filter(|o| o.kind == JOBSET_KIND && group_of(&o.api_version) == JOBSET_GROUP)
        else {
            return Ok(None);
        };
        Ok(Some(BatchJobFacts {
            id: ns_name(meta, "Job")?,
            uid: required(meta, "Job", "uid")?.into(),
            jobset: owner.name.as_str().into(),
            jobset_uid: owner.uid.as_str().into(),
        }))
    }
}

impl PodFacts {
    /// Counts for a job's suspend verdict: not terminating, and (for JobSet pods) still running —
    /// a finished initializer or a failed pod its Job keeps is not one the suspension waits for.
    pub(crate) fn counts_as_live(&self) -> bool {
        self.deletion.is_none()
            && match self.owner {
                PodOwner::V1 { .. } => true,
                PodOwner::JobSet(_) => {
                    self.controller_job.is_some() && !matches!(self.phase, PodPhase::Succeeded | PodPhase::Failed)
                }
            }
    }

    /// `None` for a pod that is not a training pod: no v1 labels plus controller ownerRef to one
    /// of the six kinds, and no JobSet label.
    pub fn from_view(pod: &PodView) -> Result<Option<Self>, FactsError> {
        let meta = &pod.metadata;
        let id = ns_name(meta, "Pod")?;
        let v1_owner = label(meta, JOB_NAME_LABEL).and_then(|_| {
            let owner = controller_owner(meta).filter(|o| group_of(&o.api_version) == KUBEFLOW_GROUP)?;
            let kind = TrainingKind::from_kind(&owner.kind)?;
            Some(PodOwner::V1 {
                job: JobKey { kind, id: NsName { namespace: id.namespace.clone(), name: owner.name.as_str().into() } },
                uid: owner.uid.as_str().into(),
            })
        });
        let owner = match v1_owner {
            Some(owner) => owner,
            None => match label(meta, JOBSET_NAME_LABEL) {
                Some(jobset) => PodOwner::JobSet(NsName { namespace: id.namespace.clone(), name: jobset.into() }),
                None => return Ok(None),
            },
        };
        let disruption = pod
            .conditions()
            .iter()
            .find(|c| c.type_ == "DisruptionTarget" && CondStatus::parse(&c.status) == CondStatus::True);
        Ok(Some(PodFacts {
            uid: required(meta, "Pod", "uid")?.into(),
            id,
            owner,
            node: pod.node_name().map(Str::from),
            deletion: meta.deletion_timestamp.as_ref().map(|t| t.0),
            deletion_grace_seconds: meta.deletion_grace_period_seconds,
            finalizers: meta.finalizers.iter().flatten().map(|f| Str::from(f.as_str())).collect(),
            phase: PodPhase::parse(pod.phase()),
            controller_job: controller_owner(meta)
                .filter(|o| o.kind == "Job" && group_of(&o.api_version) == "batch")
                .map(|o| (Str::from(o.name.as_str()), Str::from(o.uid.as_str()))),
            disruption_target: disruption.is_some(),
            disrupted_by_trainguard: disruption.is_some_and(|c| c.reason.as_deref() == Some(DISRUPTION_REASON)),
            kueue_force_delete: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(KUEUE_FORCE_DELETE_ANNOTATION))
                .is_some_and(|v| v == "true"),
        }))
    }
}

impl NodeFacts {
    pub fn from_view(node: &NodeView) -> Result<Self, FactsError> {
        let meta = &node.metadata;
        let name = required(meta, "Node", "name")?;
        let ready = node.conditions().iter().find(|c| c.type_ == "Ready");
        let taints = node.taints();
        Ok(NodeFacts {
            name: name.into(),
            uid: meta.uid.as_deref().unwrap_or("").into(),
            zone: label(meta, ZONE_LABEL).map(Str::from),
            ready: match ready.map(|c| CondStatus::parse(&c.status)) {
                Some(CondStatus::True) => ReadyStatus::True,
                Some(CondStatus::False) => ReadyStatus::False,
                Some(CondStatus::Unknown) => ReadyStatus::Unknown,
                None => ReadyStatus::Absent,
            },
            ready_since: ready
                .and_then(|c| c.last_transition_time.as_ref())
                .or(meta.creation_timestamp.as_ref())
                .map(|t| t.0),
            no_execute_taint: taints
                .iter()
                .any(|t| t.effect == "NoExecute" && (t.key == TAINT_UNREACHABLE || t.key == TAINT_NOT_READY)),
            unreachable_taint: taints.iter().any(|t| t.effect == "NoExecute" && t.key == TAINT_UNREACHABLE),
            // PodGC trusts the key alone, whatever the effect.
            out_of_service: taints.iter().any(|t| t.key == TAINT_OUT_OF_SERVICE),
        })
    }
}

impl WorkloadFacts {
    pub fn from_view(workload: &WorkloadView) -> Result<Self, FactsError> {
        let meta = &workload.metadata;
        let conditions = workload.conditions();
        Ok(WorkloadFacts {
            id: ns_name(meta, "Workload")?,
            owner_uid: controller_owner(meta)
                .or_else(|| meta.owner_references.as_ref()?.first())
                .map(|o| Str::from(o.uid.as_str())),
            finished: true_since(conditions, "Finished").is_some(),
            evicted: true_since(conditions, "Evicted"),
            admitted: true_since(conditions, "Admitted"),
        })
    }
}

impl JobFacts {
    /// docs/controller.md (How it decides) first guards for a v1 job: `Some(reason)` when nothing may be done to it.
    pub fn guard(&self) -> Option<&'static str> {
        if self.deleting {
            Some("being deleted")
        } else if !self.managed {
            Some("not managed by the training operator (runPolicy.managedBy)")
        } else if self.ignored {
            Some("opted out (trainguard.io/ignore)")
        } else {
            None
        }
    }
}
