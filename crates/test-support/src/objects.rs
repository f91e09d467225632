//! The controller's objects as `kubectl get -o json` prints them, at times given as seconds after
//! T0 = 2025-01-01T00:00:00Z, and the planner run over them with each action rendered as a short
//! line. Shared by the planner's tables (`crates/core/tests/planner/`) and the binary's tests of
//! the executor, the live loop and its bookkeeping (`src/controller/tests/`).

use std::collections::HashMap;

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use trainguard_core::planner::config::PlanConfig;
use trainguard_core::planner::facts::Str;
use trainguard_core::planner::objects::snapshot_from_values;
use trainguard_core::planner::snapshot::Key;
use trainguard_core::planner::{KeyPlan, PlanInput, TokenBucket, plan_all};

/// T0, 2025-01-01T00:00:00Z, in seconds since the epoch.
pub const T0: i64 = 1_735_689_600;

pub fn at(s: i64) -> Timestamp {
    Timestamp::from_second(T0 + s).unwrap()
}

pub fn ts(s: i64) -> String {
    at(s).to_string()
}

/// Sets `value` at a `/`-separated path, creating objects on the way.
pub fn set(mut object: Value, path: &str, value: Value) -> Value {
    let mut cur = &mut object;
    let parts: Vec<String> = path.trim_start_matches('/').split('/').map(|p| p.replace("~1", "/")).collect();
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            cur[part.as_str()] = value;
            break;
        }
        if !cur.get(part.as_str()).is_some_and(Value::is_object) {
            cur[part.as_str()] = json!({});
        }
        cur = &mut cur[part.as_str()];
    }
    object
}

pub fn cond(type_: &str, status: &str, since: Option<i64>) -> Value {
    let mut c = json!({"type": type_, "status": status, "reason": format!("{type_}Reason")});
    if let Some(s) = since {
        c["lastTransitionTime"] = json!(ts(s));
        c["lastUpdateTime"] = json!(ts(s));
    }
    c
}

/// A PyTorchJob in namespace `ml` with uid `uid-<name>` and resourceVersion 100.
pub fn pytorchjob(name: &str) -> Value {
    json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"), "resourceVersion": "100",
                     "creationTimestamp": ts(-3600)},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "None"},
            "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [{"name": "pytorch", "image": "x"}]}}}}
        },
        "status": {"conditions": [cond("Created", "True", Some(-3600)), cond("Running", "True", Some(-3000))]}
    })
}

pub fn with_ttl(job: Value, ttl: i64) -> Value {
    set(job, "/spec/runPolicy/ttlSecondsAfterFinished", json!(ttl))
}

pub fn suspended(job: Value) -> Value {
    set(job, "/spec/runPolicy/suspend", json!(true))
}

pub fn with_conditions(job: Value, conditions: Vec<Value>) -> Value {
    set(job, "/status/conditions", Value::Array(conditions))
}

/// Succeeded at `s` with completionTime.
pub fn succeeded(job: Value, s: i64) -> Value {
    let job = with_conditions(job, vec![cond("Created", "True", Some(-3600)), cond("Succeeded", "True", Some(s))]);
    set(job, "/status/completionTime", json!(ts(s)))
}

/// Failed through the ExitCode path: condition Failed, no completionTime.
pub fn failed_exit_code(job: Value, s: i64) -> Value {
    with_conditions(job, vec![cond("Created", "True", Some(-3600)), cond("Failed", "True", Some(s))])
}

pub fn label(object: Value, key: &str, value: &str) -> Value {
    set(object, &format!("/metadata/labels/{}", key.replace('/', "~1")), json!(value))
}

/// A Workload owned by a job.
pub fn workload(owner: &Value, conditions: Vec<Value>) -> Value {
    let name = owner["metadata"]["name"].as_str().unwrap();
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": format!("{}-{name}", owner["kind"].as_str().unwrap().to_lowercase()), "namespace": owner["metadata"]["namespace"],
                     "uid": format!("wl-{name}"),
                     "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": name,
                                          "uid": owner["metadata"]["uid"], "controller": true}]},
        "status": {"conditions": conditions}
    })
}

/// A pod of a v1 job, on `node`.
pub fn v1_pod(job: &Value, name: &str, node: &str) -> Value {
    let job_name = job["metadata"]["name"].as_str().unwrap();
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name, "namespace": job["metadata"]["namespace"], "uid": format!("uid-{name}"),
            "labels": {"training.kubeflow.org/job-name": job_name, "training.kubeflow.org/operator-name": "pytorchjob-controller",
                       "training.kubeflow.org/replica-type": "master", "training.kubeflow.org/replica-index": "0"},
            "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": job["kind"], "name": job_name,
                                 "uid": job["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {"nodeName": node, "containers": [{"name": "pytorch", "image": "x"}]},
        "status": {"phase": "Running"}
    })
}

/// The pod is being deleted; deletionTimestamp at `s` (what the API server sets: request time +
/// grace period).
pub fn deleting(pod: Value, s: i64) -> Value {
    let pod = set(pod, "/metadata/deletionTimestamp", json!(ts(s)));
    set(pod, "/metadata/deletionGracePeriodSeconds", json!(30))
}

pub fn node(name: &str, zone: Option<&str>) -> Value {
    let mut n = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "creationTimestamp": ts(-86400), "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": ts(-86400), "reason": "KubeletReady"}]}
    });
    if let Some(z) = zone {
        n = label(n, "topology.kubernetes.io/zone", z);
    }
    n
}

/// The kubelet stopped posting status at `s`: Ready=Unknown and the unreachable NoExecute taint.
pub fn unreachable(node: Value, s: i64) -> Value {
    down(node, s, ("Unknown", "NodeStatusUnknown"), "node.kubernetes.io/unreachable")
}

/// The kubelet still reports but the node is not ready since `s`: Ready=False and the not-ready
/// NoExecute taint.
pub fn not_ready(node: Value, s: i64) -> Value {
    down(node, s, ("False", "KubeletNotReady"), "node.kubernetes.io/not-ready")
}

/// A node down since `s`: its Ready condition `(status, reason)`, and `taint` as NoExecute and
/// NoSchedule taints.
fn down(node: Value, s: i64, (ready, reason): (&str, &str), taint: &str) -> Value {
    let ready = json!({"type": "Ready", "status": ready, "lastTransitionTime": ts(s), "reason": reason});
    let node = set(node, "/status/conditions", json!([ready]));
    let tainted = |effect: &str| json!({"key": taint, "effect": effect, "timeAdded": ts(s)});
    set(node, "/spec/taints", json!([tainted("NoExecute"), tainted("NoSchedule")]))
}

/// `n` pods of job `a` stuck terminating (deleted at 300) on the unreachable node n1, and six
/// healthy nodes.
pub fn stuck_pods(n: usize) -> Vec<Value> {
    let job = pytorchjob("a");
    let mut objects = vec![job.clone(), unreachable(node("n1", None), 0)];
    objects.extend((1..=6).map(|i| node(&format!("h{i}"), None)));
    objects.extend((0..n).map(|i| deleting(v1_pod(&job, &format!("a-worker-{i}"), "n1"), 300)));
    objects
}

/// A TrainJob finished at `s` through condition `type_` (`Complete` or `Failed`).
pub fn trainjob_finished(trainjob: Value, type_: &str, s: i64) -> Value {
    set(trainjob, "/status/conditions", json!([cond(type_, "True", Some(s))]))
}

pub fn annotate(object: Value, key: &str, value: &str) -> Value {
    set(object, &format!("/metadata/annotations/{}", key.replace('/', "~1")), json!(value))
}

pub fn add_taint(node: Value, key: &str, effect: &str) -> Value {
    let mut node = node;
    let taints = node["spec"]["taints"].as_array().cloned().unwrap_or_default();
    let mut taints = taints;
    taints.push(json!({"key": key, "effect": effect}));
    node["spec"]["taints"] = Value::Array(taints);
    node
}

/// A TrainJob and its JobSet (controlled by it).
pub fn trainjob(name: &str) -> Value {
    json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"), "resourceVersion": "7"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 2}},
        "status": {"conditions": []}
    })
}

pub fn jobset_of(trainjob: &Value, active: i64) -> Value {
    let name = trainjob["metadata"]["name"].as_str().unwrap();
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "ml", "uid": format!("js-{name}"),
                     "ownerReferences": [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": name,
                                          "uid": trainjob["metadata"]["uid"], "controller": true}]},
        "status": {"replicatedJobsStatus": [{"name": "node", "active": active, "ready": active}]}
    })
}

/// The `batch/v1` Job `<jobset>-node-0` the JobSet controls: the link between its pods and it.
pub fn jobset_job(jobset: &str) -> Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": format!("{jobset}-node-0"), "namespace": "ml", "uid": format!("job-{jobset}"),
                     "labels": {"jobset.sigs.k8s.io/jobset-name": jobset, "jobset.sigs.k8s.io/replicatedjob-name": "node"},
                     "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": jobset,
                                          "uid": format!("js-{jobset}"), "controller": true}]},
        "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "x"}]}}},
        "status": {"active": 1}
    })
}

/// A TrainJob with its JobSet (`active` jobs) and the JobSet's one batch Job.
pub fn trainjob_chain(trainjob: &Value, active: i64) -> Vec<Value> {
    let name = trainjob["metadata"]["name"].as_str().unwrap();
    vec![trainjob.clone(), jobset_of(trainjob, active), jobset_job(name)]
}

/// A pod of the JobSet's batch Job `<jobset>-node-0` (controller ownerReference), with the JobSet labels.
pub fn jobset_pod(jobset: &str, name: &str, node: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name, "namespace": "ml", "uid": format!("uid-{name}"),
            "labels": {"jobset.sigs.k8s.io/jobset-name": jobset, "jobset.sigs.k8s.io/replicatedjob-name": "node"},
            "finalizers": ["batch.kubernetes.io/job-tracking"],
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": format!("{jobset}-node-0"),
                                 "uid": format!("job-{jobset}"), "controller": true}]
        },
        "spec": {"nodeName": node, "containers": [{"name": "node", "image": "x"}]},
        "status": {"phase": "Running"}
    })
}

/// A time per job UID: the live controller's memories (when it first saw a job suspended, a
/// TrainJob's earliest `Failed=True`).
pub type FirstSeen = HashMap<Str, Timestamp>;

/// Runs the planner over `objects` at T0+`now` and renders each action as a short line:
/// `action kind ns/name rule reason[ @+seconds]`.
pub fn plan_lines(objects: &[Value], now: i64, config: &PlanConfig) -> Vec<String> {
    plan_lines_with(objects, now, config, &HashMap::new())
}

pub fn plan_lines_with(objects: &[Value], now: i64, config: &PlanConfig, first_seen: &FirstSeen) -> Vec<String> {
    plan_json(objects, now, config, first_seen).iter().map(short).collect()
}

pub fn plan_json(objects: &[Value], now: i64, config: &PlanConfig, first_seen: &FirstSeen) -> Vec<Value> {
    plans(objects, now, config, first_seen, &HashMap::new())
        .into_iter()
        .flat_map(|(_, plan)| plan.actions.into_iter().map(|a| a.to_line(config.mode)))
        .collect()
}

/// Runs the planner over `objects` at T0+`now` with the live controller's memories (`first_seen`:
/// when it first saw each job suspended; `first_failed`: each TrainJob's earliest `Failed=True`;
/// both by UID, both empty for `trainguard plan`) and a full force-delete budget of
/// `config.max_force_deletes_per_minute`: each key's plan, as `plan_all` returns them.
pub fn plans(
    objects: &[Value],
    now: i64,
    config: &PlanConfig,
    first_seen: &FirstSeen,
    first_failed: &FirstSeen,
) -> Vec<(Key, KeyPlan)> {
    let (snapshot, _) = snapshot_from_values(objects).expect("objects decode");
    let input = PlanInput { snapshot: &snapshot, now: at(now), config, first_seen_suspended: first_seen, first_failed };
    let mut bucket = TokenBucket::per_minute(config.max_force_deletes_per_minute);
    plan_all(&input, &mut bucket)
}

pub fn short(line: &Value) -> String {
    let s = |k: &str| line[k].as_str().unwrap_or("").to_string();
    let mut out =
        format!("{} {} {}/{} {} {}", s("action"), s("kind"), s("namespace"), s("name"), s("rule"), s("reason"));
    if let Some(at_) = line["at"].as_str() {
        let t: Timestamp = at_.parse().unwrap();
        out.push_str(&format!(" @+{}", t.as_second() - T0));
    }
    out
}
