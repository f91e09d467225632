//! Trainer's JobSet-TTL loop: on every released Trainer v2 (up to v2.3.0), a *Failed* TrainJob
//! whose runtime gives the JobSet a `ttlSecondsAfterFinished` gets a new JobSet once that TTL has
//! deleted the old one — restart count reset, for ever (kubeflow/trainer#3779, fixed on master by
//! #3891). trainguard cannot stop the loop (the fix is in the runtime or in Trainer); it reports it.

use super::actions::event;
use super::actions::{EventType, KeyPlan, Observation, Reason, Rule, Target};
use crate::planner::config::PlanConfig;
use crate::planner::facts::{FinishKind, JobSetFacts, TrainJobFacts};

/// A TrainJob with `Failed=True` whose JobSet (owned by it) was created after that condition's
/// `lastTransitionTime` gets one Warning per JobSet UID, and counts in the gauge while it lasts.
pub(crate) fn plan(
    tj: &TrainJobFacts,
    jobset: Option<&JobSetFacts>,
    target: &Target,
    config: &PlanConfig,
    out: &mut KeyPlan,
) {
    let Some((FinishKind::Failed, Some(failed_at))) = tj.finished_condition else { return };
    let Some(jobset) = jobset else { return };
    let Some(created) = jobset.created.filter(|c| *c > failed_at) else { return };
    out.observations.push(Observation::JobSetRecreated);
    out.push(
        Rule::Ttl,
        event(
            config,
            target,
            EventType::Warning,
            Reason::JobSetRecreatedAfterFailure,
            format!(
                "TrainJob failed at {failed_at}, but its JobSet {} was created at {created}, after the failure: \
                 Trainer up to v2.3.0 recreates the JobSet of a Failed TrainJob once the JobSet's \
                 ttlSecondsAfterFinished has deleted it, with the restart count reset, for ever \
                 (kubeflow/trainer#3779). Remove ttlSecondsAfterFinished from the JobSet template of this \
                 TrainJob's runtime, or upgrade Trainer past v2.3.0; delete the TrainJob to stop the loop now",
                jobset.id
            ),
            format!("jobset:{}", jobset.uid),
        ),
    );
}
