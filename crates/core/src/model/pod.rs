//! Slim views of core/v1 `Pod` and `Node`: what the node-failure rule reads (docs/controller.md (Node failure)).
//! `planner/objects/tests.rs` pins them to the full k8s-openapi types.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube_core::{ClusterResourceScope, NamespaceResourceScope};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodView {
    /// Without `managedFields` and the last-applied copy: see [`crate::model::watched_meta`].
    #[serde(default, deserialize_with = "crate::model::watched_meta::deserialize")]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodSpecView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<PodStatusView>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpecView {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) node_name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PodStatusView {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) conditions: Option<Vec<PodConditionView>>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PodConditionView {
    #[serde(rename = "type", default)]
    pub(crate) type_: String,
    #[serde(default)]
    pub(crate) status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl PodView {
    pub(crate) fn node_name(&self) -> Option<&str> {
        self.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty())
    }

    pub fn phase(&self) -> Option<&str> {
        self.status.as_ref().and_then(|s| s.phase.as_deref())
    }

    pub(crate) fn conditions(&self) -> &[PodConditionView] {
        self.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or(&[])
    }
}

static_resource!(PodView, NamespaceResourceScope, group = "", version = "v1", kind = "Pod", plural = "pods");

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    /// Without `managedFields` and the last-applied copy: see [`crate::model::watched_meta`].
    #[serde(default, deserialize_with = "crate::model::watched_meta::deserialize")]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<NodeSpecView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<NodeStatusView>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpecView {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) taints: Option<Vec<TaintView>>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TaintView {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub(crate) effect: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NodeStatusView {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) conditions: Option<Vec<NodeConditionView>>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NodeConditionView {
    #[serde(rename = "type", default)]
    pub(crate) type_: String,
    #[serde(default)]
    pub(crate) status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last_transition_time: Option<Time>,
}

impl NodeView {
    pub(crate) fn taints(&self) -> &[TaintView] {
        self.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or(&[])
    }

    pub(crate) fn conditions(&self) -> &[NodeConditionView] {
        self.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or(&[])
    }
}

static_resource!(NodeView, ClusterResourceScope, group = "", version = "v1", kind = "Node", plural = "nodes");
