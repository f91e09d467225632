//! `metadata` of the watched views, decoded without what nothing here reads: `managedFields`
//! (often the largest part of an object: a tree of field paths per manager) and the
//! `kubectl.kubernetes.io/last-applied-configuration` annotation (a copy of the whole applied
//! object). Skipped while decoding, so a page of a list never holds them in memory; everything
//! else of `ObjectMeta` is kept as it is.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::{Deserialize, Deserializer};

/// The annotation `kubectl apply` writes: the whole object as last applied.
pub(crate) const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The fields of `ObjectMeta` the views keep; unknown ones (`managedFields`) are skipped unread.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct WatchedMeta {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

/// `#[serde(deserialize_with = "deserialize")]` for a view's `metadata`.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    let m = Option::<WatchedMeta>::deserialize(deserializer)?.unwrap_or_default();
    let mut annotations = m.annotations;
    if let Some(a) = annotations.as_mut() {
        a.remove(LAST_APPLIED_ANNOTATION);
    }
    Ok(ObjectMeta {
        annotations,
        creation_timestamp: m.creation_timestamp,
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        deletion_timestamp: m.deletion_timestamp,
        finalizers: m.finalizers,
        generate_name: m.generate_name,
        generation: m.generation,
        labels: m.labels,
        managed_fields: None,
        name: m.name,
        namespace: m.namespace,
        owner_references: m.owner_references,
        resource_version: m.resource_version,
        self_link: m.self_link,
        uid: m.uid,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::model::pod::PodView;

    use super::LAST_APPLIED_ANNOTATION;

    #[test]
    fn keeps_every_field_but_managed_fields_and_the_last_applied_copy() {
        let cases = [
            (json!({}), None, None),
            (json!({"metadata": null}), None, None),
            (
                json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                    "labels": {"a": "b"}, "annotations": {"x": "y", LAST_APPLIED_ANNOTATION: "{}"},
                    "finalizers": ["f"], "deletionTimestamp": "2025-01-01T00:00:00Z",
                    "deletionGracePeriodSeconds": 30, "generation": 3,
                    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "ju", "controller": true}],
                    "managedFields": [{"manager": "kubelet", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]}}),
                Some("p"),
                Some(1),
            ),
        ];
        for (input, name, annotations) in cases {
            let pod: PodView = serde_json::from_value(input.clone()).unwrap();
            let m = &pod.metadata;
            assert_eq!(m.name.as_deref(), name, "{input}");
            assert!(m.managed_fields.is_none(), "{input}");
            assert_eq!(m.annotations.as_ref().map(|a| a.len()), annotations, "{input}");
            if name.is_some() {
                let full: k8s_openapi::api::core::v1::Pod = serde_json::from_value(input.clone()).unwrap();
                let mut expected = full.metadata;
                expected.managed_fields = None;
                expected.annotations.as_mut().unwrap().remove(LAST_APPLIED_ANNOTATION);
                assert_eq!(*m, expected, "{input}");
            }
        }
    }
}
