//! Realistic AdmissionReview payloads for the benchmarks: a ~5 KB TrainJob UPDATE and a
//! ~150 KB one (large env lists and managedFields). Both keep the overrides unchanged (the
//! common case: labels, annotations, status-driven metadata), and `gated` variants change them
//! while suspended, so the gate runs.
#![allow(dead_code)]

use serde_json::{Value, json};

fn env_list(n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| json!({"name": format!("TRAINING_SETTING_{i:04}"), "value": format!("value-{i}-{}", "x".repeat(i % 17))}))
            .collect(),
    )
}

fn managed_fields(n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| {
                json!({
                    "manager": if i % 2 == 0 { "kubectl-client-side-apply" } else { "trainer-controller" },
                    "operation": "Update",
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "time": "2026-11-20T10:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {"f:trainer": {"f:env": {
                        format!("k:{{\"name\":\"TRAINING_SETTING_{i:04}\"}}"): {".": {}, "f:name": {}, "f:value": {}}
                    }}}}
                })
            })
            .collect(),
    )
}

fn trainjob(env: usize, fields: usize, suspend: bool, gpu: &str, rv: &str) -> Value {
    json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": "llama-finetune",
            "namespace": "ml-team",
            "uid": "6f1c1f9e-9a53-4c55-b7c8-0a4d2b6f9d11",
            "resourceVersion": rv,
            "generation": 4,
            "creationTimestamp": "2026-11-20T10:00:00Z",
            "labels": {"kueue.x-k8s.io/queue-name": "team-a", "app.kubernetes.io/part-of": "llm", "team": "nlp"},
            "annotations": {"example.com/owner": "alice", "example.com/cost-center": "4711"},
            "managedFields": managed_fields(fields)
        },
        "spec": {
            "runtimeRef": {"name": "torch-distributed", "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime"},
            "initializer": {
                "dataset": {"storageUri": "hf://tatsu-lab/alpaca"},
                "model": {"storageUri": "hf://meta-llama/Llama-3.2-1B-Instruct"}
            },
            "trainer": {
                "image": "ghcr.io/example/llama-finetune:1.4.2",
                "command": ["torchrun", "/workspace/train.py"],
                "args": ["--epochs", "3", "--lr", "2e-5", "--batch-size", "16"],
                "env": env_list(env),
                "numNodes": 4,
                "numProcPerNode": "auto",
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8", "memory": "512Gi"}, "requests": {"cpu": "64"}}
            },
            "labels": {"team": "nlp"},
            "suspend": suspend,
            "managedBy": "trainer.kubeflow.org/trainjob-controller",
            "podTemplateOverrides": [
                {"targetJobs": [{"name": "node"}],
                 "metadata": {"labels": {"kueue.x-k8s.io/podset": "node"}},
                 "spec": {
                    "nodeSelector": {"cloud.google.com/gke-accelerator": gpu, "topology.kubernetes.io/zone": "us-central1-a"},
                    "tolerations": [
                        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                        {"key": "kueue.x-k8s.io/reserved", "operator": "Equal", "value": "team-a", "effect": "NoSchedule"}
                    ],
                    "schedulingGates": [{"name": "kueue.x-k8s.io/topology"}],
                    "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "200Gi"}}],
                    "containers": [{"name": "node", "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}]
                 }},
                {"targetJobs": [{"name": "dataset-initializer"}, {"name": "model-initializer"}],
                 "spec": {"serviceAccountName": "hf-reader", "imagePullSecrets": [{"name": "ghcr"}]}}
            ]
        },
        "status": {
            "conditions": [{"type": "Created", "status": "True", "reason": "JobSetCreated", "message": "", "lastTransitionTime": "2026-11-20T10:00:05Z"}],
            "jobsStatus": [
                {"name": "dataset-initializer", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0},
                {"name": "model-initializer", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0},
                {"name": "node", "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
            ]
        }
    })
}

fn review(old: Value, new: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "2b9a1c5e-7d0f-4c1a-9e55-3f7d8a4b1c20",
            "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"},
            "resource": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "resource": "trainjobs"},
            "requestKind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"},
            "requestResource": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "resource": "trainjobs"},
            "name": "llama-finetune",
            "namespace": "ml-team",
            "operation": "UPDATE",
            "userInfo": {"username": "system:serviceaccount:kueue-system:kueue-controller-manager", "uid": "0b4f", "groups": ["system:serviceaccounts", "system:authenticated"]},
            "object": new,
            "oldObject": old,
            "dryRun": false,
            "options": {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}
        }
    }))
    .unwrap()
}

/// (env entries, managedFields entries) giving ~5 KB and ~150 KB reviews.
const SMALL: (usize, usize) = (2, 1);
const LARGE: (usize, usize) = (560, 140);

fn unchanged((env, fields): (usize, usize)) -> Vec<u8> {
    review(trainjob(env, fields, false, "nvidia-h100-80gb", "4811"), trainjob(env, fields, false, "nvidia-h100-80gb", "4812"))
}

fn gated((env, fields): (usize, usize)) -> Vec<u8> {
    review(trainjob(env, fields, true, "nvidia-a100-80gb", "4811"), trainjob(env, fields, true, "nvidia-h100-80gb", "4812"))
}

pub fn small_update() -> Vec<u8> {
    unchanged(SMALL)
}

pub fn large_update() -> Vec<u8> {
    unchanged(LARGE)
}

pub fn small_gated() -> Vec<u8> {
    gated(SMALL)
}

pub fn large_gated() -> Vec<u8> {
    gated(LARGE)
}
