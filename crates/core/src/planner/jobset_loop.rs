//! Trainer's JobSet-TTL loop: on every released Trainer v2 (up to v2.3.0), a *Failed* TrainJob
//! whose runtime gives the JobSet a `ttlSecondsAfterFinished` gets a new JobSet once that TTL has
//! deleted the old one — restart count reset, for ever (kubeflow/trainer#3779, fixed on master by
//! #3891). trainguard cannot stop the loop (the fix is in the runtime or in Trainer); it reports it.

use k8s_openapi::jiff::Timestamp;

use super::actions::{KeyPlan, Observation, Reason, Target};
use super::ttl::push_warning;
use crate::planner::config::PlanConfig;
use crate::planner::facts::{FinishKind, JobSetFacts, TrainJobFacts};
use crate::trainer::Defect;

/// A TrainJob whose JobSet (owned by it) was created after the TrainJob failed gets one Warning
/// per JobSet UID, and counts in the gauge while such a JobSet exists. "Failed" is the earliest of
/// its `Failed=True` condition's `lastTransitionTime` and `first_failed`, the live controller's
/// memory of the first one it saw: Trainer removes the `Failed` condition in the same reconcile
/// that recreates the JobSet, and sets it again (at the new JobSet's failure) once that one fails,
/// so the objects alone show the loop only for the instant between the two writes.
pub(crate) fn plan(
    tj: &TrainJobFacts,
    jobset: Option<&JobSetFacts>,
    first_failed: Option<Timestamp>,
    target: &Target,
    config: &PlanConfig,
    out: &mut KeyPlan,
) {
    let failed_now = match tj.finished_condition {
        Some((FinishKind::Failed, at)) => at,
        // Complete: Trainer never recreates the JobSet of a complete TrainJob.
        Some(_) => return,
        None => None,
    };
    let Some(failed_at) = failed_now.into_iter().chain(first_failed).min() else { return };
    let Some(jobset) = jobset else { return };
    let Some(created) = jobset.created.filter(|c| *c > failed_at) else { return };
    out.observations.push(Observation::JobSetRecreated);
    // The controller does not know the cluster's Trainer: the message names the newest release
    // with the loop.
    let last = Defect::JobSetTtlLoop.last_release().unwrap_or_default().tag();
    push_warning(
        out,
        config,
        target,
        Reason::JobSetRecreatedAfterFailure,
        format!(
            "TrainJob failed at {failed_at}, but its JobSet {} was created at {created}, after the failure: \
             Trainer up to {last} recreates the JobSet of a Failed TrainJob once the JobSet's \
             ttlSecondsAfterFinished has deleted it, with the restart count reset, for ever \
             (kubeflow/trainer#3779). Remove ttlSecondsAfterFinished from the JobSet template of this \
             TrainJob's runtime, or upgrade Trainer past {last}; delete the TrainJob to stop the loop now",
            jobset.id
        ),
        format!("jobset:{}", jobset.uid),
    );
}
