//! Slim views of the six Training Operator v1 job kinds (`kubeflow.org/v1`): only metadata,
//! `spec.runPolicy` and `status`, which is all the companion controller reads. Replica specs and
//! everything else are skipped by serde without being built; unknown fields are tolerated.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube_core::ApiResource;
use serde::Deserialize;

use super::condition::ConditionView;

pub(crate) const KUBEFLOW_GROUP: &str = "kubeflow.org";
pub(crate) const KUBEFLOW_VERSION: &str = "v1";
pub(crate) const KUBEFLOW_API_VERSION: &str = "kubeflow.org/v1";
/// `spec.runPolicy.managedBy` of the training operator itself (unset means the same).
pub(crate) const TRAINING_OPERATOR_MANAGED_BY: &str = "kubeflow.org/training-operator";
/// Label the operator puts on every pod of a job.
pub const JOB_NAME_LABEL: &str = "training.kubeflow.org/job-name";

/// The six job kinds of Training Operator v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TrainingKind {
    TFJob,
    PyTorchJob,
    MPIJob,
    XGBoostJob,
    PaddleJob,
    JAXJob,
}

impl TrainingKind {
    pub const ALL: [TrainingKind; 6] = [
        TrainingKind::TFJob,
        TrainingKind::PyTorchJob,
        TrainingKind::MPIJob,
        TrainingKind::XGBoostJob,
        TrainingKind::PaddleJob,
        TrainingKind::JAXJob,
    ];

    pub fn kind(self) -> &'static str {
        match self {
            TrainingKind::TFJob => "TFJob",
            TrainingKind::PyTorchJob => "PyTorchJob",
            TrainingKind::MPIJob => "MPIJob",
            TrainingKind::XGBoostJob => "XGBoostJob",
            TrainingKind::PaddleJob => "PaddleJob",
            TrainingKind::JAXJob => "JAXJob",
        }
    }

    pub(crate) fn plural(self) -> &'static str {
        match self {
            TrainingKind::TFJob => "tfjobs",
            TrainingKind::PyTorchJob => "pytorchjobs",
            TrainingKind::MPIJob => "mpijobs",
            TrainingKind::XGBoostJob => "xgboostjobs",
            TrainingKind::PaddleJob => "paddlejobs",
            TrainingKind::JAXJob => "jaxjobs",
        }
    }

    pub(crate) fn from_kind(kind: &str) -> Option<Self> {
        TrainingKind::ALL.into_iter().find(|k| k.kind() == kind)
    }

    pub fn api_resource(self) -> ApiResource {
        ApiResource {
            group: KUBEFLOW_GROUP.to_string(),
            version: KUBEFLOW_VERSION.to_string(),
            api_version: KUBEFLOW_API_VERSION.to_string(),
            kind: self.kind().to_string(),
            plural: self.plural().to_string(),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TrainingJobView {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    /// Without `managedFields` and the last-applied copy: see [`crate::model::watched_meta`].
    #[serde(deserialize_with = "crate::model::watched_meta::deserialize")]
    pub metadata: ObjectMeta,
    pub spec: TrainingJobSpecView,
    pub(crate) status: Option<TrainingJobStatusView>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TrainingJobSpecView {
    pub(crate) run_policy: Option<RunPolicyView>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct RunPolicyView {
    pub suspend: Option<bool>,
    pub(crate) ttl_seconds_after_finished: Option<i64>,
    pub managed_by: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct TrainingJobStatusView {
    pub(crate) conditions: Option<Vec<ConditionView>>,
    pub completion_time: Option<Time>,
    pub(crate) replica_statuses: Option<BTreeMap<String, ReplicaStatusView>>,
}

/// How a job finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishKind {
    Succeeded,
    Failed,
}

impl FinishKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FinishKind::Succeeded => "Succeeded",
            FinishKind::Failed => "Failed",
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ReplicaStatusView {
    pub active: Option<i64>,
}

impl TrainingJobView {
    pub(crate) fn run_policy(&self) -> Option<&RunPolicyView> {
        self.spec.run_policy.as_ref()
    }

    pub(crate) fn conditions(&self) -> &[ConditionView] {
        self.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or(&[])
    }
}

dynamic_resource!(TrainingJobView);
