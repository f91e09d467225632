//! Building blocks of the admission fixtures: TrainJobs as the API server stores them, the
//! AdmissionReviews it sends, JobSets and Jobs as `kubectl get -o json` prints them, and the
//! expected verdicts. Shared by `examples/gen_fixtures` (writes the files) and
//! `tests/admission/fixtures_fresh.rs` (checks the committed files are what this code produces).

use serde_json::{Map, Value, json};

pub const NAMESPACE: &str = "ml-team";
pub const NAME: &str = "llama";
pub const TRAINJOB_UID: &str = "7d0f6a2e-5b7c-4e0a-9a51-3f2c1d9e8b44";
pub const DEFAULT_MANAGED_BY: &str = "trainer.kubeflow.org/trainjob-controller";
pub const KUEUE_QUEUE: &str = "team-a";

use crate::fixtures::{ClusterMode, Expect};
pub use trainguard_core::model::OverridesField;

/// Trainer fills `status.jobsStatus` from v2.1 on; v2.0 (podSpecOverrides) leaves it out.
pub fn has_jobs_status(field: OverridesField) -> bool {
    field != OverridesField::PodSpecOverrides
}

/// Which overrides value a TrainJob carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Pinned to H100 nodes.
    H100,
    /// The same as `H100`, spelled differently: numbers as floats, empty lists/maps added,
    /// runtime patches reordered with a fresh `time`. Semantically unchanged (docs/webhook.md §2).
    H100Respelled,
    /// The H100 placement plus a struct behind a pointer that is present but empty (v2.0: a
    /// `serviceAccountName: ""`, v2.1: `affinity: {}`, v2.2+: the patches in another order):
    /// unchanged as JSON text goes, but a change for Trainer's `equality.Semantic`.
    H100PresentButEmpty,
    /// Moved to A100 nodes: a real change.
    A100,
    /// An item without a target (`targetJobs: []` / `manager: ""`): a shape error (docs/webhook.md §5).
    BadShape,
}

fn tolerations(respelled: bool) -> Value {
    let seconds = if respelled { json!(300.0) } else { json!(300) };
    json!([
        {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"},
        {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists",
         "tolerationSeconds": seconds}
    ])
}

fn node_selector(placement: Placement) -> Value {
    let accelerator = if placement == Placement::A100 { "nvidia-a100-80gb" } else { "nvidia-h100-80gb" };
    json!({"cloud.google.com/gke-accelerator": accelerator})
}

/// The overrides value of `field` for `placement`.
pub fn overrides(field: OverridesField, placement: Placement) -> Value {
    let respelled = placement == Placement::H100Respelled;
    let present_but_empty = placement == Placement::H100PresentButEmpty;
    let targets = if placement == Placement::BadShape { json!([]) } else { json!([{"name": "node"}]) };
    match field {
        OverridesField::PodSpecOverrides => {
            let mut item = json!({
                "nodeSelector": node_selector(placement),
                "targetJobs": targets,
                "tolerations": tolerations(respelled),
            });
            if respelled {
                item["volumes"] = json!([]);
                item["initContainers"] = Value::Null;
            }
            if present_but_empty {
                item["serviceAccountName"] = json!("");
            }
            json!([item])
        }
        OverridesField::PodTemplateOverrides => {
            let mut spec = json!({"nodeSelector": node_selector(placement), "tolerations": tolerations(respelled)});
            if respelled {
                spec["schedulingGates"] = json!([]);
                spec["affinity"] = Value::Null;
            }
            if present_but_empty {
                spec["affinity"] = json!({});
            }
            json!([{
                "metadata": {"labels": {"ml-team/placement": "gpu-pool"}},
                "spec": spec,
                "targetJobs": targets,
            }])
        }
        OverridesField::RuntimePatches => {
            let manager = if placement == Placement::BadShape { "" } else { "ml-team.example.com/placement" };
            let time = if respelled { "2025-06-02T09:30:12Z" } else { "2025-06-02T08:14:51Z" };
            let placement_patch = json!({
                "manager": manager,
                "time": time,
                "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{
                    "name": "node",
                    "template": {"spec": {"template": {"spec": {
                        "nodeSelector": node_selector(placement),
                        "tolerations": tolerations(respelled),
                    }}}},
                }]}}},
            });
            let gate_patch = json!({
                "manager": "platform.example.com/gpu-quota",
                "time": time,
                "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{
                    "name": "node",
                    "template": {"spec": {"template": {"metadata": {"labels": {"platform.example.com/tier": "gold"}}}}},
                }]}}},
            });
            // Trainer compares the patches index by index: another order is a change.
            if present_but_empty { json!([gate_patch, placement_patch]) } else { json!([placement_patch, gate_patch]) }
        }
    }
}

/// How far the old run has got, as the TrainJob's own status tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    /// Pods running: `jobsStatus[node].active = 1` (v2.1+).
    Running,
    /// Suspended and stopped: nothing active.
    Stopped,
    /// Suspended, but the status still counts an active job (the status lags the JobSet).
    StoppingStatusLags,
    /// Finished successfully.
    Completed,
}

fn condition(type_: &str, status: &str, reason: &str, message: &str, time: &str) -> Value {
    json!({"lastTransitionTime": time, "message": message, "reason": reason, "status": status, "type": type_})
}

fn trainjob_status(field: Option<OverridesField>, run: Run) -> Value {
    let t = "2025-06-02T08:20:07Z";
    let conditions = match run {
        Run::Running => vec![condition("Suspended", "False", "Resumed", "TrainJob is resumed", t)],
        Run::Stopped | Run::StoppingStatusLags => {
            vec![condition("Suspended", "True", "Suspended", "TrainJob is suspended", t)]
        }
        Run::Completed => vec![condition("Complete", "True", "JobsCompleted", "TrainJob is completed", t)],
    };
    let mut status = json!({"conditions": conditions});
    if field.is_some_and(has_jobs_status) {
        let (active, ready, succeeded, suspended) = match run {
            Run::Running => (1, 1, 0, 0),
            Run::Stopped => (0, 0, 0, 1),
            Run::StoppingStatusLags => (1, 0, 0, 1),
            Run::Completed => (0, 0, 1, 0),
        };
        status["jobsStatus"] = json!([{
            "active": active, "failed": 0, "name": "node", "ready": ready, "succeeded": succeeded,
            "suspended": suspended,
        }]);
    }
    status
}

/// A TrainJob as the API server stores it (defaults applied, managedFields present), carrying
/// `field` pinned to H100 nodes (or no overrides at all for `None`).
pub fn trainjob(field: Option<OverridesField>, suspended: bool, run: Run) -> Value {
    let mut spec = json!({
        "managedBy": DEFAULT_MANAGED_BY,
        "runtimeRef": {
            "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime", "name": "torch-distributed"
        },
        "suspend": suspended,
        "trainer": {
            "args": ["--model", "meta-llama/Llama-3.1-8B", "--epochs", "3"],
            "command": ["torchrun", "/workspace/finetune.py"],
            "env": [
                {"name": "NCCL_DEBUG", "value": "WARN"},
                {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"key": "token", "name": "hf-credentials"}}}
            ],
            "image": "ghcr.io/example/llm-finetune:2.4.1",
            "numNodes": 2,
            "resourcesPerNode": {
                "limits": {"nvidia.com/gpu": "8"},
                "requests": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"}
            }
        }
    });
    let mut spec_fields = json!({".": {}, "f:runtimeRef": {".": {}, "f:name": {}}, "f:suspend": {}, "f:trainer": {}});
    if let Some(f) = field {
        spec[f.json_name()] = overrides(f, Placement::H100);
        spec_fields[format!("f:{}", f.json_name())] = json!({});
    }
    json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "creationTimestamp": "2025-06-02T08:14:51Z",
            "generation": 3,
            "labels": {"app.kubernetes.io/part-of": "llm-finetune", "team": "ml-team"},
            "managedFields": [
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app.kubernetes.io/part-of": {}, "f:team": {}}},
                                 "f:spec": spec_fields},
                    "manager": "kubectl-client-side-apply",
                    "operation": "Update",
                    "time": "2025-06-02T08:14:51Z"
                },
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:status": {".": {}, "f:conditions": {}}},
                    "manager": "trainer",
                    "operation": "Update",
                    "subresource": "status",
                    "time": "2025-06-02T08:20:07Z"
                }
            ],
            "name": NAME,
            "namespace": NAMESPACE,
            "resourceVersion": "48213907",
            "uid": TRAINJOB_UID
        },
        "spec": spec,
        "status": trainjob_status(field, run),
    })
}

/// A TrainJob as a user submits it for creation: no status, no server-set metadata.
pub fn new_trainjob(field: Option<OverridesField>, suspended: bool) -> Value {
    let mut job = trainjob(field, suspended, Run::Stopped);
    let obj = job.as_object_mut().expect("object");
    obj.remove("status");
    let meta = obj["metadata"].as_object_mut().expect("metadata");
    for k in ["generation", "resourceVersion", "uid"] {
        meta.remove(k);
    }
    // The API server stamps these before admission.
    meta["managedFields"] = json!([meta["managedFields"][0].clone()]);
    job
}

/// Small edits of a JSON document by JSON pointer, creating intermediate objects as needed.
pub trait Edit: Sized {
    fn with(self, pointer: &str, value: Value) -> Self;
    fn without(self, pointer: &str) -> Self;
}

impl Edit for Value {
    fn with(mut self, pointer: &str, value: Value) -> Self {
        let (parent, key) = pointer.rsplit_once('/').expect("pointer starts with /");
        let mut at = &mut self;
        for token in parent.split('/').skip(1) {
            at = match at {
                Value::Array(items) => &mut items[token.parse::<usize>().expect("index")],
                Value::Object(map) => map.entry(token.replace("~1", "/")).or_insert(json!({})),
                other => panic!("cannot descend into {other} for {pointer}"),
            };
        }
        match at {
            Value::Array(items) => items[key.parse::<usize>().expect("index")] = value,
            Value::Object(map) => {
                map.insert(key.replace("~1", "/"), value);
            }
            other => panic!("cannot set {pointer} inside {other}"),
        }
        self
    }

    fn without(mut self, pointer: &str) -> Self {
        let (parent, key) = pointer.rsplit_once('/').expect("pointer starts with /");
        if let Some(Value::Object(map)) = self.pointer_mut(parent) {
            map.remove(&key.replace("~1", "/"));
        }
        self
    }
}

/// The user or controller sending a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    /// A person running `kubectl edit` / `apply`.
    Alice,
    /// Kueue's controller manager.
    Kueue,
    /// Kubeflow Trainer's controller manager (status updates).
    Trainer,
    /// A cluster admin (`system:masters`), who may set the opt-out label.
    Admin,
}

impl Actor {
    fn user_info(self) -> Value {
        match self {
            Actor::Alice => json!({
                "extra": {"authentication.kubernetes.io/credential-id": ["X509SHA256=4c1e2f0d9a"]},
                "groups": ["ml-team:editors", "system:authenticated"],
                "username": "alice@example.com"
            }),
            Actor::Kueue => json!({
                "extra": {
                    "authentication.kubernetes.io/pod-name": ["kueue-controller-manager-6d9f8c7b5-x2kq4"],
                    "authentication.kubernetes.io/pod-uid": ["0b6c3b0e-2f1a-4d7e-9c55-1e8e3a7f2d10"]
                },
                "groups": ["system:serviceaccounts", "system:serviceaccounts:kueue-system", "system:authenticated"],
                "uid": "5e0c1a4b-8f3d-4b7e-a2c9-6f1d0e3b9a77",
                "username": "system:serviceaccount:kueue-system:kueue-controller-manager"
            }),
            Actor::Admin => json!({
                "groups": ["system:masters", "system:authenticated"],
                "username": "kubernetes-admin"
            }),
            Actor::Trainer => json!({
                "groups": ["system:serviceaccounts", "system:serviceaccounts:kubeflow-system", "system:authenticated"],
                "uid": "a3d2c1b0-9e8f-4a7b-b6c5-d4e3f2a1b0c9",
                "username": "system:serviceaccount:kubeflow-system:kubeflow-trainer-controller-manager"
            }),
        }
    }

    fn field_manager(self) -> &'static str {
        match self {
            Actor::Alice | Actor::Admin => "kubectl-edit",
            Actor::Kueue => "kueue-admission",
            Actor::Trainer => "trainer",
        }
    }
}

/// An `admission.k8s.io/v1` AdmissionReview as the API server sends it.
#[derive(Debug, Clone)]
pub struct Review {
    pub uid: String,
    pub operation: &'static str,
    pub sub_resource: Option<&'static str>,
    /// `(group, version, kind)`.
    pub kind: (&'static str, &'static str, &'static str),
    /// `(group, version, resource)`.
    pub resource: (&'static str, &'static str, &'static str),
    pub name: String,
    pub namespace: String,
    pub object: Value,
    pub old_object: Value,
    pub dry_run: bool,
    pub actor: Actor,
}

const TRAINJOB_KIND: (&str, &str, &str) = ("trainer.kubeflow.org", "v1alpha1", "TrainJob");
const TRAINJOB_RESOURCE: (&str, &str, &str) = ("trainer.kubeflow.org", "v1alpha1", "trainjobs");

impl Review {
    fn new(case: &str, operation: &'static str, object: Value, old_object: Value) -> Self {
        Review {
            uid: uid_for(case),
            operation,
            sub_resource: None,
            kind: TRAINJOB_KIND,
            resource: TRAINJOB_RESOURCE,
            name: NAME.to_string(),
            namespace: NAMESPACE.to_string(),
            object,
            old_object,
            dry_run: false,
            actor: Actor::Alice,
        }
    }

    pub fn update(case: &str, old: Value, new: Value) -> Self {
        Self::new(case, "UPDATE", new, old)
    }

    pub fn create(case: &str, object: Value) -> Self {
        let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
        Review { name, ..Self::new(case, "CREATE", object, Value::Null) }
    }

    pub fn delete(case: &str, old: Value) -> Self {
        Self::new(case, "DELETE", Value::Null, old)
    }

    pub fn by(mut self, actor: Actor) -> Self {
        self.actor = actor;
        self
    }

    pub fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }

    pub fn status_subresource(mut self) -> Self {
        self.sub_resource = Some("status");
        self.actor = Actor::Trainer;
        self
    }

    fn options(&self) -> Value {
        let kind = match self.operation {
            "CREATE" => "CreateOptions",
            "DELETE" => "DeleteOptions",
            "CONNECT" => return Value::Null,
            _ => "UpdateOptions",
        };
        let mut options = json!({"apiVersion": "meta.k8s.io/v1", "kind": kind});
        if self.operation == "DELETE" {
            options["propagationPolicy"] = json!("Background");
        } else {
            options["fieldManager"] = json!(self.actor.field_manager());
            options["fieldValidation"] = json!("Strict");
        }
        if self.dry_run {
            options["dryRun"] = json!(["All"]);
        }
        options
    }

    pub fn to_value(&self) -> Value {
        let gvk =
            |(group, version, kind): (&str, &str, &str)| json!({"group": group, "kind": kind, "version": version});
        let gvr = |(group, version, resource): (&str, &str, &str)| json!({"group": group, "resource": resource, "version": version});
        let mut request = Map::new();
        request.insert("uid".into(), json!(self.uid));
        request.insert("kind".into(), gvk(self.kind));
        request.insert("resource".into(), gvr(self.resource));
        request.insert("requestKind".into(), gvk(self.kind));
        request.insert("requestResource".into(), gvr(self.resource));
        if let Some(sub) = self.sub_resource {
            request.insert("subResource".into(), json!(sub));
            request.insert("requestSubResource".into(), json!(sub));
        }
        request.insert("name".into(), json!(self.name));
        request.insert("namespace".into(), json!(self.namespace));
        request.insert("operation".into(), json!(self.operation));
        request.insert("userInfo".into(), self.actor.user_info());
        request.insert("object".into(), self.object.clone());
        request.insert("oldObject".into(), self.old_object.clone());
        request.insert("dryRun".into(), json!(self.dry_run));
        request.insert("options".into(), self.options());
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
    }
}

/// A stable, UUID-shaped uid per case, so fixtures do not change between runs.
pub fn uid_for(case: &str) -> String {
    let hash = |seed: u64| case.bytes().fold(seed, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3));
    let (a, b) = (hash(0xcbf2_9ce4_8422_2325), hash(0x8422_2325_cbf2_9ce4));
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        0x8000 | (b >> 48) & 0x3fff,
        b & 0xffff_ffff_ffff
    )
}

/// Marks `metadata` as deleted at `at` in the foreground, as the API server leaves it while the
/// dependents go.
fn foreground_deleted(metadata: &mut Value, at: &str) {
    metadata["deletionTimestamp"] = json!(at);
    metadata["deletionGracePeriodSeconds"] = json!(0);
    metadata["finalizers"] = json!(["foregroundDeletion"]);
}

/// A `jobset.x-k8s.io/v1alpha2` JobSet named like the TrainJob, as `kubectl get -o json` prints it.
/// `active` lists `(replicated job, active child jobs)` in status order.
pub fn jobset(active: &[(&str, i32)], deleting: bool) -> Value {
    let replicated_jobs: Vec<Value> = active
        .iter()
        .map(|(name, _)| {
            json!({
                "name": name,
                "replicas": 1,
                "template": {"spec": {
                    "backoffLimit": 0,
                    "completionMode": "Indexed",
                    "completions": 2,
                    "parallelism": 2,
                    "template": {"spec": {
                        "containers": [{"image": "ghcr.io/example/llm-finetune:2.4.1", "name": "node",
                                        "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
                        "restartPolicy": "OnFailure"
                    }}
                }}
            })
        })
        .collect();
    let statuses: Vec<Value> = active
        .iter()
        .map(|(name, n)| {
            json!({"active": n, "failed": 0, "name": name, "ready": n, "succeeded": 0,
                   "suspended": if *n > 0 { 0 } else { 1 }})
        })
        .collect();
    let mut metadata = json!({
        "creationTimestamp": "2025-06-02T08:14:52Z",
        "generation": 2,
        "labels": {"trainer.kubeflow.org/trainjob-name": NAME},
        "name": NAME,
        "namespace": NAMESPACE,
        "ownerReferences": [{
            "apiVersion": "trainer.kubeflow.org/v1alpha1", "blockOwnerDeletion": true, "controller": true,
            "kind": "TrainJob", "name": NAME, "uid": TRAINJOB_UID
        }],
        "resourceVersion": "48214410",
        "uid": "c1f7e2d3-0a4b-4c5d-8e6f-7a8b9c0d1e2f"
    });
    if deleting {
        foreground_deleted(&mut metadata, "2025-06-02T09:01:44Z");
    }
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": metadata,
        "spec": {
            "network": {"enableDNSHostnames": true, "publishNotReadyAddresses": true, "subdomain": NAME},
            "replicatedJobs": replicated_jobs,
            "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
            "successPolicy": {"operator": "All"},
            "suspend": active.iter().all(|(_, n)| *n == 0)
        },
        "status": {
            "conditions": [{
                "lastTransitionTime": "2025-06-02T08:20:05Z", "message": "jobset is resumed",
                "reason": "ResumeJobs", "status": "False", "type": "Suspended"
            }],
            "replicatedJobsStatus": statuses,
            "restarts": 0
        }
    })
}

/// A child `batch/v1` Job `<jobset>-<replicated job>-<index>`. `terminating: None` leaves the
/// field out, as clusters without it print the status.
pub fn child_job(replicated_job: &str, active: i32, terminating: Option<i32>, deleting: bool) -> Value {
    let name = format!("{NAME}-{replicated_job}-0");
    let mut metadata = json!({
        "annotations": {"jobset.sigs.k8s.io/job-index": "0", "jobset.sigs.k8s.io/replicatedjob-replicas": "1"},
        "creationTimestamp": "2025-06-02T08:14:53Z",
        "generation": 1,
        "labels": {
            "jobset.sigs.k8s.io/job-index": "0",
            "jobset.sigs.k8s.io/jobset-name": NAME,
            "jobset.sigs.k8s.io/replicatedjob-name": replicated_job
        },
        "name": name,
        "namespace": NAMESPACE,
        "ownerReferences": [{
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "blockOwnerDeletion": true, "controller": true,
            "kind": "JobSet", "name": NAME, "uid": "c1f7e2d3-0a4b-4c5d-8e6f-7a8b9c0d1e2f"
        }],
        "resourceVersion": "48214502",
        "uid": "e4d3c2b1-a098-4f7e-8d6c-5b4a39281706"
    });
    if deleting {
        foreground_deleted(&mut metadata, "2025-06-02T09:01:45Z");
    }
    let mut status = json!({
        "active": active,
        "ready": active,
        "startTime": "2025-06-02T08:14:53Z",
        "uncountedTerminatedPods": {}
    });
    if let Some(n) = terminating {
        status["terminating"] = json!(n);
    }
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "backoffLimit": 0,
            "completionMode": "Indexed",
            "completions": 2,
            "manualSelector": false,
            "parallelism": 2,
            "podReplacementPolicy": "TerminatingOrFailed",
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "e4d3c2b1-a098-4f7e-8d6c-5b4a39281706"}},
            "suspend": active == 0,
            "template": {
                "metadata": {"labels": {"jobset.sigs.k8s.io/jobset-name": NAME,
                                        "jobset.sigs.k8s.io/replicatedjob-name": replicated_job}},
                "spec": {
                    "containers": [{"image": "ghcr.io/example/llm-finetune:2.4.1", "name": "node",
                                    "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
                    "restartPolicy": "OnFailure",
                    "subdomain": NAME
                }
            }
        },
        "status": status
    })
}

/// A `v1 List` as `kubectl get jobsets,jobs -o json` prints it.
pub fn list(items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}})
}

/// Which [`ClusterView`](trainguard_core::view::ClusterView) a case runs against.
#[derive(Debug, Clone, PartialEq)]
pub enum Cluster {
    Offline,
    /// A static view built from the case's `state.json`.
    Known(Value),
    /// Caches not synced / watch broken too long.
    Unknown,
}

/// The request body of a case: a review to serialise, or raw bytes for protocol failures.
#[derive(Debug, Clone)]
pub enum Body {
    Review(Box<Review>),
    Json(Value),
    Raw(String),
}

/// One fixture: `<dir>/<name>.review.json`, `.expect.json` and, for a known cluster, `.state.json`.
#[derive(Debug, Clone)]
pub struct Case {
    pub dir: String,
    pub name: String,
    pub body: Body,
    pub cluster: Cluster,
    pub expect: Expect,
}

/// A file the generator writes, relative to the crate root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixtureFile {
    pub path: String,
    pub contents: String,
}

/// How fixture JSON is written: pretty, two-space indent, final newline (readable diffs).
pub fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("JSON values serialise");
    s.push('\n');
    s
}

impl Case {
    pub fn files(&self) -> Vec<FixtureFile> {
        let base = format!("{}/{}", self.dir, self.name);
        let review = match &self.body {
            Body::Review(r) => pretty(&r.to_value()),
            Body::Json(v) => pretty(v),
            Body::Raw(s) => s.clone(),
        };
        let mut files = vec![
            FixtureFile { path: format!("{base}.review.json"), contents: review },
            FixtureFile { path: format!("{base}.expect.json"), contents: pretty(&self.expect_file()) },
        ];
        if let Cluster::Known(state) = &self.cluster {
            files.push(FixtureFile { path: format!("{base}.state.json"), contents: pretty(state) });
        }
        files
    }

    /// `<case>.expect.json`: the verdict, with the case's cluster.
    fn expect_file(&self) -> Value {
        let cluster = match self.cluster {
            Cluster::Offline => ClusterMode::Offline,
            Cluster::Known(_) => ClusterMode::Known,
            Cluster::Unknown => ClusterMode::Unknown,
        };
        serde_json::to_value(Expect { cluster, ..self.expect.clone() }).expect("an Expect serialises")
    }
}
