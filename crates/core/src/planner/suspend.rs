//! docs/controller.md (Preemption (suspend)): a preempted (suspended) job whose pods or status never caught up is reported, and
//! with `--stash-ttl-on-stuck-suspend` its TTL is moved aside so the operator can finish the
//! suspension; the TTL is moved back when the job is resumed. Never writes `suspend` or status.

use std::fmt;

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::actions::{Action, EventType, JobPatchKind, KeyPlan, Observation, PlanRule, Reason, Target};
use super::actions::{after_write, event, verb, warning};
use crate::duration::{fmt_duration, plus};
use crate::planner::config::PlanConfig;
use crate::planner::facts::{JobFacts, NsName, STASH_ANNOTATION, SecondsAnnotation, TrainJobFacts, WorkloadFacts};

/// Why a suspended job is not (yet) reconciled. Empty means it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StuckWhy {
    pub(crate) no_suspended_condition: bool,
    pub active: i64,
    pub(crate) live_pods: u32,
}

impl StuckWhy {
    pub fn is_stuck(&self) -> bool {
        self.no_suspended_condition || self.active > 0 || self.live_pods > 0
    }
}

impl fmt::Display for StuckWhy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.no_suspended_condition {
            parts.push("no Suspended=True condition".to_string());
        }
        if self.active > 0 {
            parts.push(format!("{} active in status", self.active));
        }
        if self.live_pods > 0 {
            parts.push(format!("{} pod(s) without deletionTimestamp", self.live_pods));
        }
        f.write_str(&parts.join(", "))
    }
}

/// docs/controller.md (Preemption (suspend)) `stuck` for a v1 job, without the time bound.
pub fn v1_stuck(job: &JobFacts, live_pods: u32) -> StuckWhy {
    if !job.suspend || job.finished.is_some() {
        return StuckWhy::default();
    }
    StuckWhy { no_suspended_condition: job.suspended_condition.is_none(), active: job.active, live_pods }
}

/// "Suspended since", from the objects first, so `plan` and the live controller agree: the
/// Workload's `Evicted=True` time, else the job's `Suspended=True` time, else the controller's
/// memory of first seeing it suspended (which `plan` does not have: no alarm yet).
pub(crate) fn suspended_since(
    workload: Option<&WorkloadFacts>,
    suspended_condition: Option<Option<Timestamp>>,
    first_seen: Option<Timestamp>,
) -> Option<Timestamp> {
    workload.and_then(|w| w.evicted.flatten()).or(suspended_condition.flatten()).or(first_seen)
}

pub(crate) struct SuspendInput<'a> {
    pub(crate) target: &'a Target,
    pub kind: &'static str,
    pub(crate) why: StuckWhy,
    pub(crate) since: Option<Timestamp>,
    pub(crate) first_seen: Option<Timestamp>,
    /// `ttlSecondsAfterFinished` in spec (v1 jobs only).
    pub(crate) ttl: Option<i64>,
    /// The stash remedy applies (v1 jobs only).
    pub(crate) stashable: bool,
}

/// The alarm (and the remedy) once a stuck suspension has lasted `--suspend-stuck-after`.
pub(crate) fn plan(input: SuspendInput<'_>, now: Timestamp, config: &PlanConfig, out: &mut KeyPlan) {
    let SuspendInput { target, kind, why, since, first_seen, ttl, stashable } = input;
    if !why.is_stuck() {
        return;
    }
    let Some(since) = since else { return };
    let due = plus(since, config.suspend_stuck_after);
    if now < due {
        out.push(PlanRule::Suspend, Action::Requeue { target: target.clone(), at: due, why: "suspend-stuck-after" });
        return;
    }
    out.observations.push(Observation::SuspendStuck(kind));
    // One episode per suspension: the live controller's first sighting is fixed for its lifetime.
    let episode = format!("suspended@{}", first_seen.unwrap_or(since));
    let mut message = format!(
        "Suspended since {since} ({} ago) but not reconciled: {why}. The training operator has not finished \
         the suspension, so the queue may not get its quota back",
        fmt_duration(now.duration_since(since))
    );
    if let Some(ttl) = ttl {
        message.push_str(&format!(
            ". This job sets ttlSecondsAfterFinished={ttl}: training operators before v1.8.1 stall on exactly \
             this (their TTL cleanup runs before the suspend status update); upgrade, or run trainguard with \
             --stash-ttl-on-stuck-suspend"
        ));
    }
    out.push(PlanRule::Suspend, warning(config, target, Reason::SuspendNotReconciled, message, episode));
    if let (true, true, Some(ttl)) = (stashable, config.stash_ttl_on_stuck_suspend, ttl) {
        out.push(
            PlanRule::Suspend,
            Action::PatchJob {
                target: target.clone(),
                kind: JobPatchKind::Stash { ttl },
                patch: stash_patch(target, ttl),
            },
        );
        let done = after_write(event(
            config,
            target,
            EventType::Normal,
            Reason::TTLStashedWhileSuspended,
            format!(
                "{} ttlSecondsAfterFinished={ttl} to annotation {STASH_ANNOTATION} so the operator can finish the \
                 suspension; it is moved back when the job is resumed",
                verb(config, "Moved", "Would move")
            ),
            format!("stash@{}", target.resource_version),
        ));
        out.push(PlanRule::Suspend, done);
    }
}

/// Merge patch moving the TTL into the annotation; the resourceVersion makes it conditional.
pub fn stash_patch(target: &Target, ttl: i64) -> Value {
    json!({
        "metadata": {
            "resourceVersion": &*target.resource_version,
            "annotations": { STASH_ANNOTATION: ttl.to_string() },
        },
        "spec": { "runPolicy": { "ttlSecondsAfterFinished": null } },
    })
}

/// Merge patch moving the stashed TTL back (`None`: the spec has a TTL again; only drop the annotation).
pub fn restore_patch(target: &Target, ttl: Option<i64>) -> Value {
    let mut patch = json!({
        "metadata": {
            "resourceVersion": &*target.resource_version,
            "annotations": { STASH_ANNOTATION: null },
        },
    });
    if let Some(ttl) = ttl {
        patch["spec"] = json!({ "runPolicy": { "ttlSecondsAfterFinished": ttl } });
    }
    patch
}

/// What the restore rule decides for a job carrying the stash annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreVerdict {
    Nothing,
    Restore { ttl: Option<i64> },
    Unreadable(SecondsAnnotation),
}

/// The one marker read back: when the job is no longer suspended, move the TTL back. Runs whether
/// or not `--stash-ttl-on-stuck-suspend` is still on. Also the executor's re-check.
pub fn restore_verdict(job: &JobFacts) -> RestoreVerdict {
    let Some(stashed) = &job.stashed_ttl else { return RestoreVerdict::Nothing };
    if job.suspend {
        return RestoreVerdict::Nothing;
    }
    match stashed {
        // A TTL the user set again while the job was suspended wins over the stashed one.
        SecondsAnnotation::Seconds(_) if job.ttl_seconds.is_some() => RestoreVerdict::Restore { ttl: None },
        SecondsAnnotation::Seconds(ttl) if *ttl >= 0 => RestoreVerdict::Restore { ttl: Some(*ttl) },
        other => RestoreVerdict::Unreadable(other.clone()),
    }
}

pub(crate) fn plan_restore(job: &JobFacts, target: &Target, config: &PlanConfig, out: &mut KeyPlan) {
    match restore_verdict(job) {
        RestoreVerdict::Nothing => {}
        RestoreVerdict::Restore { ttl } => {
            out.push(
                PlanRule::Suspend,
                Action::PatchJob {
                    target: target.clone(),
                    kind: JobPatchKind::Restore { ttl },
                    patch: restore_patch(target, ttl),
                },
            );
            let message = match ttl {
                Some(ttl) => format!(
                    "Job resumed: {} ttlSecondsAfterFinished={ttl} from annotation {STASH_ANNOTATION} back into spec",
                    verb(config, "moved", "would move")
                ),
                None => format!(
                    "Job resumed with a ttlSecondsAfterFinished of its own: {} the stale annotation {STASH_ANNOTATION}",
                    verb(config, "removed", "would remove")
                ),
            };
            let done = after_write(event(
                config,
                target,
                EventType::Normal,
                Reason::TTLRestored,
                message,
                format!("restore@{}", target.resource_version),
            ));
            out.push(PlanRule::Suspend, done);
        }
        RestoreVerdict::Unreadable(value) => out.push(
            PlanRule::Suspend,
            warning(
                config,
                target,
                Reason::TTLRestoreFailed,
                format!(
                    "Annotation {STASH_ANNOTATION}={} is not a TTL in seconds: left in place; set \
                     spec.runPolicy.ttlSecondsAfterFinished and remove the annotation by hand",
                    value.shown()
                ),
                format!("unreadable@{}", value.dedup_key()),
            ),
        ),
    }
}

/// docs/controller.md (Preemption (suspend)) for a TrainJob: suspended while its JobSet still reports active jobs or has pods.
pub(crate) fn trainjob_stuck(tj: &TrainJobFacts, jobset_active: i64, live_pods: u32) -> StuckWhy {
    if !tj.suspend || tj.finished {
        return StuckWhy::default();
    }
    StuckWhy { no_suspended_condition: false, active: tj.active.max(jobset_active), live_pods }
}

/// What is suspended of a job Kueue admitted: the job itself (`spec.suspend` or
/// `spec.runPolicy.suspend`), or, for a TrainJob, the JobSet it controls.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Suspension<'a> {
    pub(crate) job: bool,
    /// The TrainJob's JobSet when its `spec.suspend` is true.
    pub(crate) jobset: Option<&'a NsName>,
}

impl From<bool> for Suspension<'_> {
    fn from(job: bool) -> Self {
        Suspension { job, jobset: None }
    }
}

/// A Kueue Workload `Admitted=True` for `--admitted-suspended-after` while its job (v1 job or
/// TrainJob) is still suspended, or a resumed TrainJob's JobSet still is: Kueue holds the quota,
/// nothing runs. Version skew between Kueue and Trainer has left jobs exactly so, and nothing
/// upstream reports it. One Warning per admission (its `lastTransitionTime`), and a gauge while it
/// lasts.
pub(crate) fn plan_admitted<'a>(
    target: &Target,
    kind: &'static str,
    suspended: impl Into<Suspension<'a>>,
    workload: Option<&WorkloadFacts>,
    now: Timestamp,
    config: &PlanConfig,
    out: &mut KeyPlan,
) {
    let suspended = suspended.into();
    let Some(workload) = workload else { return };
    // An eviction in progress is Kueue taking the admission back: the suspension is expected.
    if !(suspended.job || suspended.jobset.is_some()) || workload.finished || workload.evicted.is_some() {
        return;
    }
    // Without a time there is nothing to count the bound from: no alarm.
    let Some(Some(admitted_at)) = workload.admitted else { return };
    let due = plus(admitted_at, config.admitted_suspended_after);
    if now < due {
        out.push(
            PlanRule::Suspend,
            Action::Requeue { target: target.clone(), at: due, why: "admitted-suspended-after" },
        );
        return;
    }
    out.observations.push(Observation::AdmittedSuspended(kind));
    let spec_field = if kind == "TrainJob" { "spec.suspend" } else { "spec.runPolicy.suspend" };
    let what = match suspended.jobset {
        Some(jobset) if !suspended.job => format!(
            "this {kind} was resumed but its JobSet {jobset} is still suspended (spec.suspend: true): the queue's \
             quota is held while nothing runs. Trainer could not carry the resume over to the JobSet: look for \
             TrainJobResourcesCreationFailed events on this TrainJob (a JobSet webhook refusing the new pod \
             template, for instance after Kueue rewrote spec.runtimePatches with older Trainer types)"
        ),
        _ => format!(
            "this {kind} is still suspended ({spec_field}: true): the queue's quota is held while nothing runs. \
             Kueue unsuspends the job itself after admission; when it does not, the usual cause is a Kueue \
             version that does not match the job's controller (check both versions and the Kueue controller's logs)"
        ),
    };
    out.push(
        PlanRule::Suspend,
        warning(
            config,
            target,
            Reason::AdmittedButSuspended,
            format!(
                "Kueue admitted Workload {} at {admitted_at} ({} ago), but {what}",
                workload.id,
                fmt_duration(now.duration_since(admitted_at))
            ),
            format!("admitted@{admitted_at}"),
        ),
    );
}
