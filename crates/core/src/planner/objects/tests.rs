//! The slim views of the controller, pinned to the full k8s-openapi types: a full object serialized
//! by k8s-openapi decodes into the slim view with the same values; unknown fields are tolerated;
//! bad input gets a clear error naming the object and the field.

use std::collections::BTreeMap;

use super::{change_from_value, snapshot_from_values};
use crate::model::kubeflow_v1::TrainingKind;
use crate::model::pod::{NodeView, PodView};
use crate::planner::facts::{NodeFacts, PodFacts, PodOwner, PodPhase, ReadyStatus};
use k8s_openapi::api::core::v1::{
    Container, Node, NodeCondition, NodeSpec, NodeStatus, Pod, PodCondition, PodSpec, PodStatus, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

fn t(s: &str) -> Time {
    Time(s.parse::<Timestamp>().unwrap())
}

fn full_pod() -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("job-master-0".into()),
            namespace: Some("ml".into()),
            uid: Some("pod-uid".into()),
            resource_version: Some("42".into()),
            deletion_timestamp: Some(t("2025-01-01T00:05:00Z")),
            deletion_grace_period_seconds: Some(30),
            finalizers: Some(vec!["batch.kubernetes.io/job-tracking".into(), "example.com/x".into()]),
            labels: Some(BTreeMap::from([
                ("training.kubeflow.org/job-name".to_string(), "job".to_string()),
                ("training.kubeflow.org/replica-type".to_string(), "master".to_string()),
            ])),
            owner_references: Some(vec![OwnerReference {
                api_version: "kubeflow.org/v1".into(),
                kind: "PyTorchJob".into(),
                name: "job".into(),
                uid: "job-uid".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            annotations: Some(BTreeMap::from([("big".to_string(), "x".repeat(10_000))])),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some("node-1".into()),
            containers: vec![Container { name: "pytorch".into(), image: Some("img".into()), ..Container::default() }],
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: Some("DeletionByTaintManager".into()),
                ..PodCondition::default()
            }]),
            ..PodStatus::default()
        }),
    }
}

#[test]
fn pod_view_reads_what_the_full_type_holds() {
    let full = full_pod();
    let json = serde_json::to_value(&full).unwrap();
    let view: PodView = serde_json::from_value(json).unwrap();
    assert_eq!(view.metadata.name, full.metadata.name);
    assert_eq!(view.metadata.deletion_timestamp, full.metadata.deletion_timestamp);
    assert_eq!(view.node_name(), full.spec.as_ref().unwrap().node_name.as_deref());
    assert_eq!(view.phase(), full.status.as_ref().unwrap().phase.as_deref());
    let facts = PodFacts::from_view(&view).unwrap().unwrap();
    assert_eq!(&*facts.uid, "pod-uid");
    assert_eq!(facts.node.as_deref(), Some("node-1"));
    assert_eq!(facts.phase, PodPhase::Running);
    assert!(facts.disruption_target && !facts.disrupted_by_trainguard);
    assert_eq!(facts.deletion, Some("2025-01-01T00:05:00Z".parse().unwrap()));
    assert_eq!(facts.deletion_grace_seconds, Some(30));
    assert_eq!(facts.finalizers.len(), 2);
    match &facts.owner {
        PodOwner::V1 { job, uid } => {
            assert_eq!(job.kind, TrainingKind::PyTorchJob);
            assert_eq!(&*job.id.name, "job");
            assert_eq!(&**uid, "job-uid");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn pods_that_are_not_training_pods_are_not_kept() {
    let mut pod = full_pod();
    // The job-name label without a controller ownerRef to one of the six kinds.
    pod.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: "rs".into(),
        uid: "rs-uid".into(),
        controller: Some(true),
        block_owner_deletion: None,
    }]);
    let view: PodView = serde_json::from_value(serde_json::to_value(&pod).unwrap()).unwrap();
    assert_eq!(PodFacts::from_view(&view).unwrap(), None);
}

#[test]
fn node_view_reads_what_the_full_type_holds() {
    let taint = |key: &str, effect: &str| Taint { key: key.into(), effect: effect.into(), ..Taint::default() };
    let full = Node {
        metadata: ObjectMeta {
            name: Some("node-1".into()),
            uid: Some("node-uid".into()),
            labels: Some(BTreeMap::from([("topology.kubernetes.io/zone".to_string(), "z1".to_string())])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            taints: Some(vec![
                taint("node.kubernetes.io/unreachable", "NoExecute"),
                taint("node.kubernetes.io/out-of-service", "NoSchedule"),
            ]),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            conditions: Some(vec![
                NodeCondition { type_: "MemoryPressure".into(), status: "False".into(), ..NodeCondition::default() },
                NodeCondition {
                    type_: "Ready".into(),
                    status: "Unknown".into(),
                    last_transition_time: Some(t("2025-01-01T00:00:00Z")),
                    ..NodeCondition::default()
                },
            ]),
            ..NodeStatus::default()
        }),
    };
    let view: NodeView = serde_json::from_value(serde_json::to_value(&full).unwrap()).unwrap();
    let facts = NodeFacts::from_view(&view).unwrap();
    assert_eq!(&*facts.name, "node-1");
    assert_eq!(facts.zone.as_deref(), Some("z1"));
    assert_eq!(facts.ready, ReadyStatus::Unknown);
    assert_eq!(facts.ready_since, Some("2025-01-01T00:00:00Z".parse().unwrap()));
    assert!(facts.no_execute_taint);
    assert!(facts.unreachable_taint);
    assert!(facts.out_of_service);
}

#[test]
fn bad_objects_get_errors_naming_object_and_field() {
    let cases = [
        (
            json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "a", "namespace": "ml", "uid": "u"},
                   "spec": {"runPolicy": {"ttlSecondsAfterFinished": "ten"}}}),
            "PyTorchJob ml/a: spec.runPolicy.ttlSecondsAfterFinished: invalid type",
        ),
        (
            json!({"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "a", "namespace": "ml"}}),
            "job ml/a: metadata.uid is missing",
        ),
        (
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "yesterday"}]}}),
            "Node /n: status.conditions[0].lastTransitionTime",
        ),
    ];
    for (object, want) in cases {
        let err = change_from_value(&object).unwrap_err().to_string();
        assert!(err.starts_with(want), "{err}\n  want prefix: {want}");
    }
}

#[test]
fn unknown_kinds_are_ignored_and_unknown_fields_tolerated() {
    let objects = [
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
        json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
               "metadata": {"name": "a", "namespace": "ml", "uid": "u", "managedFields": [{"manager": "x"}]},
               "spec": {"runPolicy": {"ttlSecondsAfterFinished": 10, "somethingNew": {"a": 1}},
                        "pytorchReplicaSpecs": {"Worker": {"replicas": 3}}},
               "status": {"replicaStatuses": {"Worker": {"active": 2, "selector": "x"}}, "futureField": true}}),
    ];
    let (snapshot, loaded) = snapshot_from_values(&objects).unwrap();
    assert_eq!((loaded.used, loaded.ignored), (1, 1));
    let job = snapshot.jobs().next().unwrap();
    assert_eq!(job.ttl_seconds, Some(10));
    assert_eq!(job.active, 2);
}
