//! An owned view of a TrainJob (`trainer.kubeflow.org/v1alpha1`) for the companion controller's
//! watch: metadata, `spec.suspend`, `spec.managedBy` and the status it reads. The admission path
//! keeps its own borrowed view (`trainjob.rs`), which never outlives one request.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_core::DynamicResourceScope;
use serde::Deserialize;

use k8s_openapi::jiff::Timestamp;

use super::condition::{ConditionView, ConditionsStatus, true_since};
use super::jobset::ReplicatedJobStatusView;
use super::kubeflow_v1::FinishKind;
use super::{TRAINJOB_GROUP, TRAINJOB_KIND, TRAINJOB_RESOURCE, TRAINJOB_VERSION};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TrainJobStateView {
    /// Without `managedFields` and the last-applied copy: see [`crate::model::watched_meta`].
    #[serde(deserialize_with = "crate::model::watched_meta::deserialize")]
    pub metadata: ObjectMeta,
    pub spec: TrainJobStateSpec,
    pub(crate) status: Option<TrainJobStateStatus>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TrainJobStateSpec {
    pub suspend: Option<bool>,
    pub managed_by: Option<String>,
    /// Not in any released Trainer (≤ v2.3.0); read so that the field wins once the CRD has it.
    pub(crate) ttl_seconds_after_finished: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct TrainJobStateStatus {
    pub(crate) conditions: Option<Vec<ConditionView>>,
    /// Trainer copies its JobSet's `replicatedJobsStatus` here.
    pub(crate) jobs_status: Option<Vec<ReplicatedJobStatusView>>,
}

impl TrainJobStateView {
    pub(crate) fn conditions(&self) -> &[ConditionView] {
        self.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or(&[])
    }
}

/// How a TrainJob finished: its `Complete` or `Failed` condition is True (`Complete` wins should
/// both be), with that condition's `lastTransitionTime`. The one place "finished" is decided for a
/// TrainJob: the planner's facts and `validate`'s offline U5 read it.
pub(crate) fn finished(conditions: &[ConditionView]) -> Option<(FinishKind, Option<Timestamp>)> {
    [("Complete", FinishKind::Succeeded), ("Failed", FinishKind::Failed)]
        .into_iter()
        .find_map(|(type_, kind)| true_since(conditions, type_).map(|t| (kind, t)))
}

/// Only the conditions of a TrainJob, from an object whose other parts need not decode.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ConditionsOnly {
    status: Option<ConditionsStatus>,
}

impl ConditionsOnly {
    pub(crate) fn conditions(&self) -> &[ConditionView] {
        ConditionsStatus::of(self.status.as_ref())
    }
}

static_resource!(
    TrainJobStateView,
    DynamicResourceScope,
    group = TRAINJOB_GROUP,
    version = TRAINJOB_VERSION,
    kind = TRAINJOB_KIND,
    plural = TRAINJOB_RESOURCE
);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn finished_is_a_true_complete_or_failed_condition() {
        let condition = |type_: &str, status: &str| json!({"type": type_, "status": status});
        // (conditions, how it finished)
        let cases = [
            (json!([]), None),
            (json!([condition("Complete", "True")]), Some(FinishKind::Succeeded)),
            (json!([condition("Failed", "True")]), Some(FinishKind::Failed)),
            (json!([condition("Failed", "True"), condition("Complete", "True")]), Some(FinishKind::Succeeded)),
            (json!([condition("Complete", "False"), condition("Failed", "Unknown")]), None),
            (json!([condition("Complete", "true")]), None),
            (json!([condition("Suspended", "True")]), None),
        ];
        for (conditions, expected) in cases {
            let object: ConditionsOnly = serde_json::from_value(json!({"status": {"conditions": conditions}})).unwrap();
            assert_eq!(finished(object.conditions()).map(|(kind, _)| kind), expected, "{conditions}");
        }
    }
}
