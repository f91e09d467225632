//! Slim views of a `jobset.x-k8s.io/v1alpha2` JobSet and a child `batch/v1` Job: only what the
//! admission gate reads. Used by the watch-fed caches and by `--state` files alike.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_core::DynamicResourceScope;
use serde::Deserialize;

pub(crate) const JOBSET_GROUP: &str = "jobset.x-k8s.io";
pub(crate) const JOBSET_VERSION: &str = "v1alpha2";
pub(crate) const JOBSET_KIND: &str = "JobSet";
pub(crate) const JOBSET_PLURAL: &str = "jobsets";
/// Label JobSet puts on its child Jobs and their pods.
pub const JOBSET_NAME_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct JobSetView {
    /// Without `managedFields` and the last-applied copy: see [`crate::model::watched_meta`].
    #[serde(deserialize_with = "crate::model::watched_meta::deserialize")]
    pub metadata: ObjectMeta,
    /// Only `suspend` (the companion controller's admitted-but-suspended check).
    pub(crate) spec: Option<JobSetSpecView>,
    pub(crate) status: Option<JobSetStatusView>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct JobSetSpecView {
    pub(crate) suspend: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct JobSetStatusView {
    pub(crate) replicated_jobs_status: Option<Vec<ReplicatedJobStatusView>>,
}

/// One replicated job's counts, in a JobSet's `replicatedJobsStatus` and a TrainJob's `jobsStatus`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ReplicatedJobStatusView {
    pub name: String,
    pub active: Option<i32>,
}

static_resource!(
    JobSetView,
    DynamicResourceScope,
    group = JOBSET_GROUP,
    version = JOBSET_VERSION,
    kind = JOBSET_KIND,
    plural = JOBSET_PLURAL
);

/// A child `batch/v1` Job, reduced to what G3 and G5 read.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct BatchJobView {
    /// Without `managedFields` and the last-applied copy: see [`crate::model::watched_meta`].
    #[serde(deserialize_with = "crate::model::watched_meta::deserialize")]
    pub metadata: ObjectMeta,
    pub(crate) status: Option<BatchJobStatusView>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct BatchJobStatusView {
    pub active: Option<i32>,
    pub terminating: Option<i32>,
}

impl BatchJobView {
    /// The JobSet this Job belongs to, from its `jobset.sigs.k8s.io/jobset-name` label.
    pub fn jobset_name(&self) -> Option<&str> {
        self.metadata.labels.as_ref()?.get(JOBSET_NAME_LABEL).map(String::as_str)
    }
}

static_resource!(BatchJobView, DynamicResourceScope, group = "batch", version = "v1", kind = "Job", plural = "jobs");
