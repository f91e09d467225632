//! `status.conditions[]`, whose entries have one shape in every kind trainguard watches (pods,
//! nodes, Training Operator v1 jobs, TrainJobs, Kueue Workloads): only what the rules read of it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;

/// A `status` of which only the conditions are read.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ConditionsStatus {
    pub(crate) conditions: Option<Vec<ConditionView>>,
}

impl ConditionsStatus {
    /// The conditions of an object's `status`, none when either is absent.
    pub(crate) fn of(status: Option<&ConditionsStatus>) -> &[ConditionView] {
        status.and_then(|s| s.conditions.as_deref()).unwrap_or(&[])
    }
}

/// One `status.conditions[]` entry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ConditionView {
    #[serde(rename = "type")]
    pub(crate) type_: String,
    pub(crate) status: String,
    pub reason: Option<String>,
    pub(crate) last_transition_time: Option<Time>,
}

/// `Some(lastTransitionTime)` when condition `type_` (the first of that type) is True.
pub(crate) fn true_since(conditions: &[ConditionView], type_: &str) -> Option<Option<Timestamp>> {
    conditions
        .iter()
        .find(|c| c.type_ == type_)
        .filter(|c| c.status == "True")
        .map(|c| c.last_transition_time.as_ref().map(|t| t.0))
}
