//! Controller speed and memory on a synthetic cluster of 10,000 jobs, 50,000 pods and 1,000 nodes:
//! a full plan, one watch event handled (apply to the snapshot + re-plan of the keys it
//! touches, with and without decoding the pod's JSON), and the snapshot's heap bytes per pod.
//!
//! Run: `cargo bench --bench controller` (figures go to docs/benchmarks.md).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a benchmark: a panic is its failure report")]

mod counting_alloc;

use std::collections::HashMap;
use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group};
use k8s_openapi::jiff::Timestamp;
use serde_json::json;
use trainguard::controller::config::PlanConfig;
use trainguard::controller::state::ControllerState;
use trainguard_core::model::kubeflow_v1::TrainingKind;
use trainguard_core::model::pod::PodView;
use trainguard_core::planner::facts::{
    FinishKind, Finished, JobFacts, JobKey, NodeFacts, NsName, PodFacts, PodOwner, PodPhase, ReadyStatus, Str,
    WorkloadFacts,
};
use trainguard_core::planner::snapshot::{Change, Snapshot};
use trainguard_core::planner::{PlanInput, TokenBucket, plan_all};

const JOBS: usize = 10_000;
const PODS_PER_JOB: usize = 5;
const NODES: usize = 1_000;
const ZONES: usize = 5;
/// Nodes that are down (unreachable for an hour), whose pods are terminating.
const DOWN_NODES: usize = 3;

fn t0() -> Timestamp {
    "2025-01-01T00:00:00Z".parse().unwrap()
}

fn at(s: i64) -> Timestamp {
    Timestamp::from_second(t0().as_second() + s).unwrap()
}

fn uid(kind: &str, i: usize) -> Str {
    format!("{kind}-{i:08}-0000-4000-8000-000000000000").into()
}

fn namespace(i: usize) -> String {
    format!("team-{}", i % 50)
}

fn node_name(i: usize) -> String {
    format!("ip-10-0-{}-{}.eu-west-1.compute.internal", i / 256, i % 256)
}

fn job(i: usize) -> JobFacts {
    let kind = TrainingKind::ALL[i % 6];
    let id = NsName::new(&namespace(i), &format!("job-{i}"));
    // 30% finished with a pending TTL, 10% suspended, the rest running.
    let finished = (i % 10 < 3).then(|| Finished {
        kind: FinishKind::Succeeded,
        completion_time: Some(at(-600)),
        condition_time: Some(at(-600)),
    });
    JobFacts {
        key: JobKey { kind, id },
        uid: uid("job", i),
        resource_version: format!("{}", 100_000 + i).into(),
        deleting: false,
        ignored: false,
        managed: true,
        suspend: i % 10 == 3,
        ttl_seconds: Some(3600),
        stashed_ttl: None,
        finished,
        suspended_condition: (i % 10 == 3).then_some(Some(at(-60))),
        active: if i % 10 >= 4 { PODS_PER_JOB as i64 } else { 0 },
    }
}

fn pod(job: &JobFacts, i: usize, r: usize) -> PodFacts {
    let n = (i * PODS_PER_JOB + r) % NODES;
    let terminating = n < DOWN_NODES;
    PodFacts {
        id: NsName::new(&job.key.id.namespace, &format!("{}-worker-{r}", job.key.id.name)),
        uid: uid("pod", i * PODS_PER_JOB + r),
        owner: PodOwner::V1 { job: job.key.clone(), uid: job.uid.clone() },
        node: Some(node_name(n).into()),
        deletion: terminating.then(|| at(-1200)),
        deletion_grace_seconds: terminating.then_some(30),
        finalizers: Box::new([]),
        phase: PodPhase::Running,
        controller_job: None,
        disruption_target: terminating,
        disrupted_by_trainguard: false,
        kueue_force_delete: false,
    }
}

fn node(i: usize) -> NodeFacts {
    let down = i < DOWN_NODES;
    NodeFacts {
        name: node_name(i).into(),
        uid: uid("node", i),
        zone: Some(format!("eu-west-1{}", (b'a' + (i % ZONES) as u8) as char).into()),
        ready: if down { ReadyStatus::Unknown } else { ReadyStatus::True },
        ready_since: Some(if down { at(-3600) } else { at(-86_400) }),
        no_execute_taint: down,
        unreachable_taint: down,
        out_of_service: false,
    }
}

fn workload(job: &JobFacts, i: usize) -> WorkloadFacts {
    WorkloadFacts {
        id: NsName::new(&job.key.id.namespace, &format!("workload-{i}")),
        owner_uid: Some(job.uid.clone()),
        finished: job.finished.is_some(),
        evicted: None,
        admitted: None,
    }
}

/// Nodes, jobs and their Workloads.
fn base_changes() -> Vec<Change> {
    let mut base: Vec<Change> = (0..NODES).map(|i| Change::Node(node_name(i).into(), Some(node(i)))).collect();
    for i in 0..JOBS {
        let j = job(i);
        base.push(Change::Workload(NsName::new(&j.key.id.namespace, &format!("workload-{i}")), Some(workload(&j, i))));
        base.push(Change::Job(j.key.clone(), Some(j)));
    }
    base
}

/// 50,000 pods of the running jobs (finished and suspended jobs have none).
fn pod_changes() -> Vec<Change> {
    let running: Vec<usize> = (0..JOBS).filter(|i| i % 10 >= 4).collect();
    (0..JOBS * PODS_PER_JOB)
        .map(|n| {
            let i = running[n % running.len()];
            let p = pod(&job(i), i, n / running.len());
            Change::Pod(p.id.clone(), Some(p))
        })
        .collect()
}

fn cluster() -> (Vec<Change>, Vec<Change>) {
    (base_changes(), pod_changes())
}

fn snapshot() -> Snapshot {
    let (base, pods) = cluster();
    let mut s = Snapshot::new();
    for c in base.into_iter().chain(pods) {
        s.insert(c);
    }
    s.set_nodes_listed(true);
    s
}

/// A pod as a watch event delivers it (managedFields and all), for the decode cost.
fn pod_json(i: usize) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("job-{i}-worker-0"), "namespace": namespace(i), "uid": uid("pod", i * PODS_PER_JOB).to_string(),
            "resourceVersion": "987654", "creationTimestamp": "2024-12-31T23:00:00Z",
            "labels": {"training.kubeflow.org/job-name": format!("job-{i}"), "training.kubeflow.org/operator-name": "pytorchjob-controller",
                       "training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": "0",
                       "kueue.x-k8s.io/queue-name": "team"},
            "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": TrainingKind::ALL[i % 6].kind(), "name": format!("job-{i}"),
                                 "uid": uid("job", i).to_string(), "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2025-01-01T00:00:00Z",
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:conditions": {".": {}, "k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}}}}}}]
        },
        "spec": {"nodeName": node_name(i % NODES), "restartPolicy": "OnFailure", "schedulerName": "default-scheduler",
                 "containers": [{"name": "pytorch", "image": "ghcr.io/example/train:1", "args": ["--epochs", "10"],
                                 "env": [{"name": "MASTER_ADDR", "value": format!("job-{i}-master-0")}, {"name": "WORLD_SIZE", "value": "5"}],
                                 "resources": {"limits": {"nvidia.com/gpu": "8"}, "requests": {"cpu": "32", "memory": "256Gi"}},
                                 "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                 "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]},
        "status": {"phase": "Running", "podIP": "10.1.2.3", "startTime": "2024-12-31T23:00:05Z",
                   "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2024-12-31T23:00:30Z"}],
                   "containerStatuses": [{"name": "pytorch", "ready": true, "restartCount": 0, "image": "ghcr.io/example/train:1",
                                          "imageID": "sha256:0", "containerID": "containerd://0", "state": {"running": {"startedAt": "2024-12-31T23:00:20Z"}}}]}
    }))
    .unwrap()
}

fn synced_state() -> ControllerState {
    let (base, pods) = cluster();
    let mut state = ControllerState::new(PlanConfig::acting());
    for c in base.into_iter().chain(pods) {
        state.apply(c, at(0));
    }
    let seen = (0..NODES).map(|i| NsName::new("", &node_name(i))).collect();
    state.apply(Change::Relisted(trainguard_core::planner::snapshot::Source::Nodes, seen), at(0));
    state.set_synced();
    state.plan_dirty(at(0));
    state
}

fn bench(c: &mut Criterion) {
    let config = PlanConfig::acting();
    let snap = snapshot();
    let first_seen = HashMap::new();
    let input = PlanInput {
        snapshot: &snap,
        now: at(0),
        config: &config,
        first_seen_suspended: &first_seen,
        first_failed: &Default::default(),
    };
    let plan = plan_all(&input, &mut TokenBucket::per_minute(1_000_000));
    let keys = plan.len();
    let actions: usize = plan.iter().map(|(_, p)| p.actions.len()).sum();
    eprintln!("full plan: {keys} keys with something to say, {actions} actions");
    c.bench_function("controller/full_plan_10k_jobs_50k_pods_1k_nodes", |b| {
        b.iter(|| black_box(plan_all(&input, &mut TokenBucket::per_minute(1_000_000))))
    });

    let mut state = synced_state();
    let running = job(4);
    let mut flip = false;
    c.bench_function("controller/event_pod_update", |b| {
        b.iter(|| {
            // A running pod's status changes (what most pod watch events are).
            let mut p = pod(&running, 4, 0);
            flip = !flip;
            p.phase = if flip { PodPhase::Running } else { PodPhase::Pending };
            state.apply(Change::Pod(p.id.clone(), Some(p)), at(1));
            black_box(state.plan_dirty(at(1)));
        })
    });
    c.bench_function("controller/event_job_update", |b| {
        b.iter(|| {
            let mut j = job(7);
            flip = !flip;
            j.resource_version = if flip { "1".into() } else { "2".into() };
            state.apply(Change::Job(j.key.clone(), Some(j)), at(1));
            black_box(state.plan_dirty(at(1)));
        })
    });
    c.bench_function("controller/event_node_update_replans_terminating_pods", |b| {
        b.iter(|| {
            let mut n = node(10);
            flip = !flip;
            n.ready_since = Some(if flip { at(-86_400) } else { at(-86_401) });
            state.apply(Change::Node(n.name.clone(), Some(n)), at(1));
            black_box(state.plan_dirty(at(1)));
        })
    });
    let raw = pod_json(4);
    c.bench_function("controller/event_pod_update_with_json_decode", |b| {
        b.iter_batched(
            || raw.clone(),
            |bytes| {
                let view: PodView = serde_json::from_slice(&bytes).unwrap();
                let facts = PodFacts::from_view(&view).unwrap().unwrap();
                state.apply(Change::Pod(facts.id.clone(), Some(facts)), at(1));
                black_box(state.plan_dirty(at(1)));
            },
            BatchSize::SmallInput,
        )
    });
}

/// Heap bytes the snapshot holds per pod: live heap before and after 50,000 pods are created and
/// inserted (the changes themselves are consumed and freed).
fn memory_per_pod() {
    let before = counting_alloc::live_bytes();
    let mut s = Snapshot::new();
    for c in base_changes() {
        s.insert(c);
    }
    let without_pods = counting_alloc::live_bytes();
    let pods = pod_changes();
    let pod_count = pods.len();
    for c in pods {
        s.insert(c);
    }
    let with_pods = counting_alloc::live_bytes();
    let per_pod = (with_pods - without_pods) as f64 / pod_count as f64;
    eprintln!(
        "snapshot heap: {:.1} MiB for {JOBS} jobs + {NODES} nodes + {JOBS} Workloads; +{:.1} MiB for {pod_count} pods \
         = {per_pod:.0} bytes per pod",
        (without_pods - before) as f64 / (1 << 20) as f64,
        (with_pods - without_pods) as f64 / (1 << 20) as f64,
    );
    black_box(&s);
}

criterion_group!(benches, bench);

fn main() {
    memory_per_pod();
    benches();
    criterion::Criterion::default().configure_from_args().final_summary();
}
