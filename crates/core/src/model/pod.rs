//! Slim views of core/v1 `Pod` and `Node`: what the node-failure rule reads (docs/controller.md (Node failure)).
//! `planner/objects/tests.rs` pins them to the full k8s-openapi types.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_core::{ClusterResourceScope, NamespaceResourceScope};
use serde::Deserialize;

use super::condition::{ConditionView, ConditionsStatus};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodView {
    /// Without `managedFields` and the last-applied copy: see [`crate::model::watched_meta`].
    #[serde(deserialize_with = "crate::model::watched_meta::deserialize")]
    pub metadata: ObjectMeta,
    pub spec: Option<PodSpecView>,
    pub(crate) status: Option<PodStatusView>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodSpecView {
    pub(crate) node_name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct PodStatusView {
    pub phase: Option<String>,
    pub(crate) conditions: Option<Vec<ConditionView>>,
}

impl PodView {
    pub(crate) fn node_name(&self) -> Option<&str> {
        self.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty())
    }

    pub fn phase(&self) -> Option<&str> {
        self.status.as_ref().and_then(|s| s.phase.as_deref())
    }

    pub(crate) fn conditions(&self) -> &[ConditionView] {
        self.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or(&[])
    }
}

static_resource!(PodView, NamespaceResourceScope, group = "", version = "v1", kind = "Pod", plural = "pods");

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeView {
    /// Without `managedFields` and the last-applied copy: see [`crate::model::watched_meta`].
    #[serde(deserialize_with = "crate::model::watched_meta::deserialize")]
    pub metadata: ObjectMeta,
    pub spec: Option<NodeSpecView>,
    pub(crate) status: Option<ConditionsStatus>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeSpecView {
    pub(crate) taints: Option<Vec<TaintView>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct TaintView {
    pub key: String,
    pub(crate) effect: String,
}

impl NodeView {
    pub(crate) fn taints(&self) -> &[TaintView] {
        self.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or(&[])
    }

    pub(crate) fn conditions(&self) -> &[ConditionView] {
        ConditionsStatus::of(self.status.as_ref())
    }
}

static_resource!(NodeView, ClusterResourceScope, group = "", version = "v1", kind = "Node", plural = "nodes");
