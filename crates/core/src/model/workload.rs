//! Slim view of a Kueue `Workload` (`kueue.x-k8s.io`, v1beta2 since Kueue v0.15, v1beta1 before;
//! the conditions read here are the same in both): the owner and the status conditions.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_core::ApiResource;
use serde::Deserialize;

use super::condition::{ConditionView, ConditionsStatus};

pub(crate) const KUEUE_GROUP: &str = "kueue.x-k8s.io";
pub(crate) const WORKLOAD_KIND: &str = "Workload";
pub(crate) const WORKLOAD_PLURAL: &str = "workloads";
/// Served versions, newest first: the controller watches the first one the API server has.
pub const WORKLOAD_VERSIONS: [&str; 2] = ["v1beta2", "v1beta1"];

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WorkloadView {
    /// Without `managedFields` and the last-applied copy: see [`crate::model::watched_meta`].
    #[serde(deserialize_with = "crate::model::watched_meta::deserialize")]
    pub metadata: ObjectMeta,
    pub(crate) status: Option<ConditionsStatus>,
}

impl WorkloadView {
    pub(crate) fn conditions(&self) -> &[ConditionView] {
        ConditionsStatus::of(self.status.as_ref())
    }
}

pub fn workload_api_resource(version: &str) -> ApiResource {
    ApiResource {
        group: KUEUE_GROUP.to_string(),
        version: version.to_string(),
        api_version: format!("{KUEUE_GROUP}/{version}"),
        kind: WORKLOAD_KIND.to_string(),
        plural: WORKLOAD_PLURAL.to_string(),
    }
}

dynamic_resource!(WorkloadView);
