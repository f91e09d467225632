//! Scale benchmark of the companion controller: the test kit's fake API (crates/fake-api) on
//! loopback, serving paged lists and watches of a synthetic training cluster, and the release `trainguard` binary in report
//! mode against it. Prints, per cluster size: time to first plan, peak and steady RSS of the
//! trainguard process, and the time from a pod watch event to its planned action (p50/p99) under a
//! churn of pod updates.
//!
//! Run: `make bench-scale` (builds `--release`, then runs the three sizes of docs/benchmarks.md).
//! One size: `target/release/examples/bench_scale --pods 50000 --nodes 2500`.
//!
//! The cluster: half the training pods belong to PyTorchJobs (one master, three workers), half to
//! TrainJobs (TrainJob → JobSet → batch Job → four pods); all Running on Ready nodes, the pods
//! shaped like real ones (managedFields, containers, env, status). Probe pods arrive during the
//! churn on a node that has been unreachable for an hour, terminating for an hour: each is a
//! force-delete the controller plans (in report mode it only reports it). Its latency is measured
//! from the fake API writing the watch event to the controller logging the planned action.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a benchmark: a panic is its failure report")]

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use trainguard_fake_api::FakeApi;

const PODS_PER_JOB: usize = 4;
const NAMESPACES: usize = 50;
const DEAD_NODE: &str = "ip-10-255-0-1.ec2.internal";
const LIST_RV: u64 = 1000;

#[derive(Clone, Debug)]
struct Args {
    pods: usize,
    nodes: usize,
    churn_per_sec: u32,
    churn_secs: u64,
    probes_per_sec: u32,
    /// Ignore `limit`: answer every list with all objects at once (what an API server does for a
    /// list served from its watch cache that cannot page).
    no_paging: bool,
    binary: PathBuf,
    extra: Vec<String>,
}

fn parse_args() -> Args {
    let mut a = Args {
        pods: 10_000,
        nodes: 1_000,
        churn_per_sec: 200,
        churn_secs: 30,
        probes_per_sec: 5,
        no_paging: false,
        binary: PathBuf::from("target/release/trainguard"),
        extra: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--pods" => a.pods = val().parse().expect("--pods N"),
            "--nodes" => a.nodes = val().parse().expect("--nodes N"),
            "--churn" => a.churn_per_sec = val().parse().expect("--churn N"),
            "--churn-secs" => a.churn_secs = val().parse().expect("--churn-secs N"),
            "--probes" => a.probes_per_sec = val().parse().expect("--probes N"),
            "--no-paging" => a.no_paging = true,
            "--binary" => a.binary = PathBuf::from(val()),
            "--" => {
                a.extra = it.by_ref().collect();
                break;
            }
            other => panic!("unknown argument {other}"),
        }
    }
    if let Ok(dir) = std::env::var("CARGO_TARGET_DIR")
        && a.binary.as_os_str() == "target/release/trainguard"
    {
        a.binary = PathBuf::from(dir).join("release/trainguard");
    }
    a
}

// ---------------------------------------------------------------- the synthetic cluster

#[derive(Clone, Copy)]
struct Cluster {
    nodes: usize,
    /// PyTorchJobs (and as many TrainJobs).
    jobs: usize,
}

impl Cluster {
    fn v1_pods(&self) -> usize {
        self.jobs * PODS_PER_JOB
    }
}

fn ns(j: usize) -> String {
    format!("team-{}", j % NAMESPACES)
}

fn node_name(i: usize) -> String {
    format!("ip-10-{}-{}-{}.ec2.internal", i / 65536, (i / 256) % 256, i % 256)
}

fn uid(prefix: &str, i: usize) -> String {
    format!("{prefix:0>8}-{:04x}-4{:03x}-8000-{i:012x}", i % 65536, i % 4096)
}

fn node_json(i: usize, out: &mut String) {
    let name = node_name(i);
    let zone = format!("eu-west-1{}", ["a", "b", "c"][i % 3]);
    let _ = write!(
        out,
        r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{name}","uid":"{uid}","resourceVersion":"{rv}","creationTimestamp":"2025-01-01T00:00:00Z","labels":{{"kubernetes.io/hostname":"{name}","topology.kubernetes.io/zone":"{zone}","node.kubernetes.io/instance-type":"p5.48xlarge","nvidia.com/gpu.count":"8"}}}},"spec":{{"providerID":"aws:///{zone}/i-{i:017x}"}},"status":{{"capacity":{{"cpu":"192","memory":"2097152Mi","nvidia.com/gpu":"8","pods":"110"}},"allocatable":{{"cpu":"191","memory":"2000000Mi","nvidia.com/gpu":"8","pods":"110"}},"conditions":[{{"type":"MemoryPressure","status":"False","lastHeartbeatTime":"2025-01-01T00:00:00Z","lastTransitionTime":"2025-01-01T00:00:00Z","reason":"KubeletHasSufficientMemory","message":"kubelet has sufficient memory available"}},{{"type":"DiskPressure","status":"False","lastHeartbeatTime":"2025-01-01T00:00:00Z","lastTransitionTime":"2025-01-01T00:00:00Z","reason":"KubeletHasNoDiskPressure","message":"kubelet has no disk pressure"}},{{"type":"Ready","status":"True","lastHeartbeatTime":"2025-01-01T00:00:00Z","lastTransitionTime":"2025-01-01T00:00:00Z","reason":"KubeletReady","message":"kubelet is posting ready status"}}],"nodeInfo":{{"kubeletVersion":"v1.33.1","containerRuntimeVersion":"containerd://1.7.27","osImage":"Amazon Linux 2023","kernelVersion":"6.1.0"}}}}}}"#,
        uid = uid("node", i),
        rv = LIST_RV,
    );
}

fn dead_node_json(out: &mut String) {
    let _ = write!(
        out,
        r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{DEAD_NODE}","uid":"{uid}","resourceVersion":"{LIST_RV}","labels":{{"topology.kubernetes.io/zone":"eu-west-1a"}}}},"spec":{{"taints":[{{"key":"node.kubernetes.io/unreachable","effect":"NoExecute","timeAdded":"2025-01-01T00:00:00Z"}},{{"key":"node.kubernetes.io/unreachable","effect":"NoSchedule","timeAdded":"2025-01-01T00:00:00Z"}}]}},"status":{{"conditions":[{{"type":"Ready","status":"Unknown","lastHeartbeatTime":"2025-01-01T00:00:00Z","lastTransitionTime":"2025-01-01T00:00:00Z","reason":"NodeStatusUnknown","message":"Kubelet stopped posting node status."}}]}}}}"#,
        uid = uid("deadnode", 0),
    );
}

/// What distinguishes one pod from another in the template.
struct PodShape<'a> {
    namespace: &'a str,
    name: &'a str,
    uid: &'a str,
    rv: u64,
    node: &'a str,
    labels: &'a str,
    owner: &'a str,
    deletion: &'a str,
    job_name: &'a str,
}

/// A Running training pod as the API server returns it (about 5 KB of JSON).
fn pod_json(p: &PodShape<'_>, out: &mut String) {
    let PodShape { namespace, name, uid, rv, node, labels, owner, deletion, job_name } = p;
    let _ = write!(
        out,
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"{namespace}","uid":"{uid}","resourceVersion":"{rv}","creationTimestamp":"2025-01-01T00:00:00Z",{deletion}"labels":{{{labels}}},"annotations":{{"sidecar.istio.io/inject":"false","kubectl.kubernetes.io/default-container":"trainer"}},"ownerReferences":[{owner}],"managedFields":[{{"manager":"training-operator","operation":"Update","apiVersion":"v1","time":"2025-01-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{{"f:metadata":{{"f:labels":{{".":{{}},"f:app":{{}},"f:team":{{}}}},"f:ownerReferences":{{".":{{}},"k:{{\"uid\":\"x\"}}":{{}}}}}},"f:spec":{{"f:containers":{{"k:{{\"name\":\"trainer\"}}":{{".":{{}},"f:command":{{}},"f:env":{{".":{{}},"k:{{\"name\":\"MASTER_ADDR\"}}":{{".":{{}},"f:name":{{}},"f:value":{{}}}},"k:{{\"name\":\"WORLD_SIZE\"}}":{{".":{{}},"f:name":{{}},"f:value":{{}}}}}},"f:image":{{}},"f:imagePullPolicy":{{}},"f:name":{{}},"f:resources":{{".":{{}},"f:limits":{{".":{{}},"f:nvidia.com/gpu":{{}}}}}}}}}},"f:dnsPolicy":{{}},"f:restartPolicy":{{}},"f:schedulerName":{{}}}}}}}},{{"manager":"kubelet","operation":"Update","apiVersion":"v1","time":"2025-01-01T00:01:00Z","fieldsType":"FieldsV1","fieldsV1":{{"f:status":{{"f:conditions":{{"k:{{\"type\":\"Ready\"}}":{{".":{{}},"f:lastProbeTime":{{}},"f:lastTransitionTime":{{}},"f:status":{{}},"f:type":{{}}}}}},"f:containerStatuses":{{}},"f:hostIP":{{}},"f:phase":{{}},"f:podIP":{{}},"f:startTime":{{}}}}}},"subresource":"status"}}]}},"spec":{{"volumes":[{{"name":"dshm","emptyDir":{{"medium":"Memory"}}}},{{"name":"kube-api-access","projected":{{"sources":[{{"serviceAccountToken":{{"expirationSeconds":3607,"path":"token"}}}},{{"configMap":{{"name":"kube-root-ca.crt","items":[{{"key":"ca.crt","path":"ca.crt"}}]}}}}],"defaultMode":420}}}}],"containers":[{{"name":"trainer","image":"registry.example.com/ml/llm-pretrain:2025.01.3","command":["torchrun","--nnodes=4","--nproc-per-node=8","train.py","--config=/etc/train/config.yaml"],"env":[{{"name":"MASTER_ADDR","value":"{job_name}-master-0"}},{{"name":"MASTER_PORT","value":"23456"}},{{"name":"WORLD_SIZE","value":"4"}},{{"name":"PYTHONUNBUFFERED","value":"1"}},{{"name":"NCCL_DEBUG","value":"WARN"}}],"resources":{{"limits":{{"nvidia.com/gpu":"8","memory":"1000Gi"}},"requests":{{"cpu":"90","nvidia.com/gpu":"8","memory":"1000Gi"}}}},"volumeMounts":[{{"name":"dshm","mountPath":"/dev/shm"}},{{"name":"kube-api-access","readOnly":true,"mountPath":"/var/run/secrets/kubernetes.io/serviceaccount"}}],"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}}],"restartPolicy":"Never","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","serviceAccountName":"default","nodeName":"{node}","securityContext":{{}},"schedulerName":"default-scheduler","tolerations":[{{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}},{{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}},{{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}}],"priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority"}},"status":{{"phase":"Running","conditions":[{{"type":"PodReadyToStartContainers","status":"True","lastTransitionTime":"2025-01-01T00:00:30Z"}},{{"type":"Initialized","status":"True","lastTransitionTime":"2025-01-01T00:00:05Z"}},{{"type":"Ready","status":"True","lastTransitionTime":"2025-01-01T00:01:00Z"}},{{"type":"ContainersReady","status":"True","lastTransitionTime":"2025-01-01T00:01:00Z"}},{{"type":"PodScheduled","status":"True","lastTransitionTime":"2025-01-01T00:00:00Z"}}],"hostIP":"10.0.1.2","podIP":"10.1.2.3","podIPs":[{{"ip":"10.1.2.3"}}],"startTime":"2025-01-01T00:00:00Z","containerStatuses":[{{"name":"trainer","state":{{"running":{{"startedAt":"2025-01-01T00:01:00Z"}}}},"lastState":{{}},"ready":true,"restartCount":0,"image":"registry.example.com/ml/llm-pretrain:2025.01.3","imageID":"registry.example.com/ml/llm-pretrain@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","containerID":"containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","started":true}}],"qosClass":"Burstable"}}}}"#
    );
}

/// Pod `i` of the v1 half (`jobset == false`) or the TrainJob half, at resourceVersion `rv`.
fn training_pod(c: &Cluster, jobset: bool, i: usize, rv: u64, out: &mut String) {
    let j = i / PODS_PER_JOB;
    let k = i % PODS_PER_JOB;
    let namespace = ns(j);
    let global = if jobset { c.v1_pods() + i } else { i };
    let node = node_name(global % c.nodes);
    if jobset {
        let job = format!("tj-{j}");
        let batch = format!("{job}-node-0");
        let name = format!("{batch}-{k}-{:05x}", i % 0xfffff);
        let labels = format!(
            r#""jobset.sigs.k8s.io/jobset-name":"{job}","jobset.sigs.k8s.io/replicatedjob-name":"node","jobset.sigs.k8s.io/job-index":"0","batch.kubernetes.io/job-name":"{batch}","batch.kubernetes.io/job-completion-index":"{k}","trainer.kubeflow.org/trainjob-ancestor-step":"trainer""#
        );
        let owner = format!(
            r#"{{"apiVersion":"batch/v1","kind":"Job","name":"{batch}","uid":"{}","controller":true,"blockOwnerDeletion":true}}"#,
            uid("batch", j)
        );
        let uid = uid("jspod", i);
        pod_json(
            &PodShape {
                namespace: &namespace,
                name: &name,
                uid: &uid,
                rv,
                node: &node,
                labels: &labels,
                owner: &owner,
                deletion: "",
                job_name: &job,
            },
            out,
        );
    } else {
        let job = format!("pt-{j}");
        let (rtype, idx) = if k == 0 { ("master", 0) } else { ("worker", k - 1) };
        let name = format!("{job}-{rtype}-{idx}");
        let labels = format!(
            r#""training.kubeflow.org/job-name":"{job}","training.kubeflow.org/operator-name":"pytorchjob-controller","training.kubeflow.org/replica-type":"{rtype}","training.kubeflow.org/replica-index":"{idx}""#
        );
        let owner = format!(
            r#"{{"apiVersion":"kubeflow.org/v1","kind":"PyTorchJob","name":"{job}","uid":"{}","controller":true,"blockOwnerDeletion":true}}"#,
            uid("ptjob", j)
        );
        let uid = uid("v1pod", i);
        pod_json(
            &PodShape {
                namespace: &namespace,
                name: &name,
                uid: &uid,
                rv,
                node: &node,
                labels: &labels,
                owner: &owner,
                deletion: "",
                job_name: &job,
            },
            out,
        );
    }
}

/// A pod of PyTorchJob `j` on the dead node, terminating for an hour: a force-delete candidate.
fn probe_pod(n: usize, j: usize, rv: u64, out: &mut String) {
    let job = format!("pt-{j}");
    let name = format!("probe-{n}");
    let labels = format!(r#""training.kubeflow.org/job-name":"{job}","training.kubeflow.org/replica-type":"worker""#);
    let owner = format!(
        r#"{{"apiVersion":"kubeflow.org/v1","kind":"PyTorchJob","name":"{job}","uid":"{}","controller":true,"blockOwnerDeletion":true}}"#,
        uid("ptjob", j)
    );
    let namespace = ns(j);
    let uid = uid("probe", n);
    pod_json(
        &PodShape {
            namespace: &namespace,
            name: &name,
            uid: &uid,
            rv,
            node: DEAD_NODE,
            labels: &labels,
            owner: &owner,
            deletion: r#""deletionTimestamp":"2025-01-01T00:00:00Z","deletionGracePeriodSeconds":30,"#,
            job_name: &job,
        },
        out,
    );
}

fn pytorchjob_json(j: usize, out: &mut String) {
    let _ = write!(
        out,
        r#"{{"apiVersion":"kubeflow.org/v1","kind":"PyTorchJob","metadata":{{"name":"pt-{j}","namespace":"{ns}","uid":"{uid}","resourceVersion":"{LIST_RV}","creationTimestamp":"2025-01-01T00:00:00Z"}},"spec":{{"runPolicy":{{"cleanPodPolicy":"None","ttlSecondsAfterFinished":86400}},"pytorchReplicaSpecs":{{"Master":{{"replicas":1,"restartPolicy":"OnFailure","template":{{"spec":{{"containers":[{{"name":"pytorch","image":"registry.example.com/ml/llm-pretrain:2025.01.3"}}]}}}}}},"Worker":{{"replicas":3,"restartPolicy":"OnFailure","template":{{"spec":{{"containers":[{{"name":"pytorch","image":"registry.example.com/ml/llm-pretrain:2025.01.3"}}]}}}}}}}}}},"status":{{"conditions":[{{"type":"Created","status":"True","lastTransitionTime":"2025-01-01T00:00:00Z"}},{{"type":"Running","status":"True","lastTransitionTime":"2025-01-01T00:01:00Z"}}],"replicaStatuses":{{"Master":{{"active":1}},"Worker":{{"active":3}}}},"startTime":"2025-01-01T00:00:00Z"}}}}"#,
        ns = ns(j),
        uid = uid("ptjob", j),
    );
}

fn trainjob_json(j: usize, out: &mut String) {
    let _ = write!(
        out,
        r#"{{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","metadata":{{"name":"tj-{j}","namespace":"{ns}","uid":"{uid}","resourceVersion":"{LIST_RV}","creationTimestamp":"2025-01-01T00:00:00Z"}},"spec":{{"runtimeRef":{{"name":"torch-distributed","kind":"ClusterTrainingRuntime","apiGroup":"trainer.kubeflow.org"}},"trainer":{{"numNodes":4,"image":"registry.example.com/ml/llm-pretrain:2025.01.3"}}}},"status":{{"jobsStatus":[{{"name":"node","ready":4,"active":4,"succeeded":0,"failed":0,"suspended":0}}]}}}}"#,
        ns = ns(j),
        uid = uid("tjob", j),
    );
}

fn jobset_json(j: usize, out: &mut String) {
    let _ = write!(
        out,
        r#"{{"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet","metadata":{{"name":"tj-{j}","namespace":"{ns}","uid":"{uid}","resourceVersion":"{LIST_RV}","creationTimestamp":"2025-01-01T00:00:00Z","labels":{{"trainer.kubeflow.org/trainjob-name":"tj-{j}"}},"ownerReferences":[{{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","name":"tj-{j}","uid":"{tuid}","controller":true,"blockOwnerDeletion":true}}]}},"spec":{{"replicatedJobs":[{{"name":"node","replicas":1,"template":{{"spec":{{"parallelism":4,"completions":4,"template":{{"spec":{{"containers":[{{"name":"node","image":"registry.example.com/ml/llm-pretrain:2025.01.3"}}]}}}}}}}}}}]}},"status":{{"replicatedJobsStatus":[{{"name":"node","ready":1,"active":1,"succeeded":0,"failed":0,"suspended":0}}]}}}}"#,
        ns = ns(j),
        uid = uid("jobset", j),
        tuid = uid("tjob", j),
    );
}

fn batch_job_json(j: usize, out: &mut String) {
    let _ = write!(
        out,
        r#"{{"apiVersion":"batch/v1","kind":"Job","metadata":{{"name":"tj-{j}-node-0","namespace":"{ns}","uid":"{uid}","resourceVersion":"{LIST_RV}","creationTimestamp":"2025-01-01T00:00:00Z","labels":{{"jobset.sigs.k8s.io/jobset-name":"tj-{j}","jobset.sigs.k8s.io/replicatedjob-name":"node"}},"ownerReferences":[{{"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet","name":"tj-{j}","uid":"{juid}","controller":true,"blockOwnerDeletion":true}}]}},"spec":{{"parallelism":4,"completions":4,"completionMode":"Indexed","template":{{"spec":{{"containers":[{{"name":"node","image":"registry.example.com/ml/llm-pretrain:2025.01.3"}}]}}}}}},"status":{{"active":4,"ready":4,"startTime":"2025-01-01T00:00:00Z"}}}}"#,
        ns = ns(j),
        uid = uid("batch", j),
        juid = uid("jobset", j),
    );
}

// ---------------------------------------------------------------- the fake API server

/// The test kit's fake API serving the cluster: every collection generated on demand (pods by the
/// label selector the controller lists them with), paged unless `--no-paging`.
fn fake_api(c: Cluster, no_paging: bool) -> FakeApi {
    let api = FakeApi::new();
    api.ignore_limit(no_paging);
    api.resource_version_at_least(LIST_RV);
    let jobs = c.jobs;
    api.generate("/api/v1/pods", Some("training.kubeflow.org/job-name"), c.v1_pods(), move |i, out| {
        training_pod(&c, false, i, LIST_RV, out);
    });
    api.generate("/api/v1/pods", Some("jobset.sigs.k8s.io/jobset-name"), c.v1_pods(), move |i, out| {
        training_pod(&c, true, i, LIST_RV, out);
    });
    api.generate("/api/v1/nodes", None, c.nodes + 1, move |i, out| {
        if i == c.nodes { dead_node_json(out) } else { node_json(i, out) }
    });
    api.generate("/apis/kubeflow.org/v1/pytorchjobs", None, jobs, pytorchjob_json);
    api.generate("/apis/trainer.kubeflow.org/v1alpha1/trainjobs", None, jobs, trainjob_json);
    api.generate("/apis/jobset.x-k8s.io/v1alpha2/jobsets", None, jobs, jobset_json);
    api.generate("/apis/batch/v1/jobs", None, jobs, batch_job_json);
    // Served but empty: the other five kubeflow.org/v1 kinds.
    for kind in ["tfjobs", "mpijobs", "xgboostjobs", "paddlejobs", "jaxjobs"] {
        api.serve_collection(&format!("/apis/kubeflow.org/v1/{kind}"));
    }
    api
}

// ---------------------------------------------------------------- measuring the process

fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[idx]
}

fn spawn_trainguard(args: &Args, kubeconfig: &std::path::Path, dir: &std::path::Path) -> Child {
    let mut cmd = Command::new(&args.binary);
    cmd.args(["serve", "--dev", "--kubeconfig"])
        .arg(kubeconfig)
        .arg("--dev-dir")
        .arg(dir.join("dev"))
        .args([
            "--bind",
            "127.0.0.1:0",
            "--admin-bind",
            "127.0.0.1:0",
            "--controller-mode=report",
            "--max-force-deletes-per-minute=100000",
        ])
        .args(&args.extra)
        .env("RUST_LOG", "info,trainguard::controller::live=debug")
        .env_remove("KUBECONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e} (build it with `cargo build --release`)", args.binary.display()))
}

#[allow(clippy::disallowed_methods, reason = "a benchmark samples RSS over real time")]
fn main() {
    let args = parse_args();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let cluster = Cluster { nodes: args.nodes, jobs: args.pods / 2 / PODS_PER_JOB };
    let fake = fake_api(cluster, args.no_paging);
    let served = runtime.block_on(fake.serve());
    // When each probe's watch event was written, by probe number.
    let probes_sent: Arc<Mutex<HashMap<usize, Instant>>> = Arc::default();

    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = served.kubeconfig(dir.path());

    println!(
        "cluster: {} training pods ({} PyTorchJobs, {} TrainJobs, 4 pods each) on {} nodes; paging {}",
        cluster.v1_pods() * 2,
        cluster.jobs,
        cluster.jobs,
        cluster.nodes,
        if args.no_paging { "off" } else { "on" }
    );
    let started = Instant::now();
    let mut child = spawn_trainguard(&args, &kubeconfig, dir.path());
    let pid = child.id();

    // The log lines: when the first sync happened, and when each probe was planned.
    let (line_tx, line_rx) = std::sync::mpsc::channel::<(Instant, String)>();
    for stream in [
        Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().expect("stderr")),
    ] {
        let tx = line_tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if tx.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
    }
    let synced: Arc<Mutex<Option<Instant>>> = Arc::default();
    let planned: Arc<Mutex<HashMap<usize, Instant>>> = Arc::default();
    {
        let (synced, planned) = (synced.clone(), planned.clone());
        let verbose = std::env::var_os("BENCH_SCALE_LOG").is_some();
        std::thread::spawn(move || {
            for (at, line) in line_rx {
                if verbose {
                    eprintln!("{line}");
                }
                if line.contains("all watches listed") {
                    synced.lock().unwrap().get_or_insert(at);
                } else if line.contains("dispatching")
                    && let Some(rest) = line.split("probe-").nth(1)
                {
                    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                    if let Ok(n) = digits.parse() {
                        planned.lock().unwrap().entry(n).or_insert(at);
                    }
                } else if line.contains("ERROR") || line.contains("WARN") {
                    eprintln!("trainguard: {line}");
                }
            }
        });
    }

    // Until the first plan: sample RSS.
    let deadline = started + Duration::from_secs(600);
    let first_plan = loop {
        std::thread::sleep(Duration::from_millis(20));
        if let Some(at) = *synced.lock().unwrap() {
            break at - started;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("trainguard exited during the initial list: {status}");
        }
        assert!(Instant::now() < deadline, "no first plan within 10 minutes");
    };
    let (_, hwm_at_sync) = rss_kib(pid).expect("rss");
    let lists = fake.seen().iter().filter(|s| s.rbac.2 == "list").count();
    println!("first plan after {:.1} s ({lists} list requests)", first_plan.as_secs_f64());
    std::thread::sleep(Duration::from_secs(5));
    let (rss_after_sync, hwm) = rss_kib(pid).expect("rss");

    // Churn: pod updates at a fixed rate, a few of them probes.
    let churn = {
        let (fake, probes_sent) = (fake.clone(), probes_sent.clone());
        let (rate, probes, secs) = (args.churn_per_sec, args.probes_per_sec.max(1), args.churn_secs);
        runtime.spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1) / rate.max(1));
            let every = (rate / probes).max(1) as u64;
            let mut rv = LIST_RV + 1;
            let mut probe = 0usize;
            let end = Instant::now() + Duration::from_secs(secs);
            let mut rng = 0x9e3779b97f4a7c15u64;
            while Instant::now() < end {
                tick.tick().await;
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let mut obj = String::with_capacity(6 * 1024);
                let jobset = rng.is_multiple_of(2);
                let is_probe = rv.is_multiple_of(every);
                if is_probe {
                    probe_pod(probe, (rng as usize / 2) % cluster.jobs, rv, &mut obj);
                } else {
                    training_pod(&cluster, jobset, (rng as usize / 2) % cluster.v1_pods(), rv, &mut obj);
                }
                let object: serde_json::Value = serde_json::from_str(&obj).expect("rendered pod");
                let now = Instant::now();
                if is_probe {
                    probes_sent.lock().unwrap().insert(probe, now);
                    probe += 1;
                }
                // Stored and sent to the open watches of pods (the fake gives it the next resourceVersion).
                fake.put(object);
                rv += 1;
            }
        })
    };
    let mut peak_churn_rss = 0;
    while !churn.is_finished() {
        std::thread::sleep(Duration::from_millis(100));
        if let Some((rss, _)) = rss_kib(pid) {
            peak_churn_rss = peak_churn_rss.max(rss);
        }
    }
    std::thread::sleep(Duration::from_secs(2));
    let (steady, hwm_end) = rss_kib(pid).expect("rss");
    let _ = child.kill();
    let _ = child.wait();

    let sent = probes_sent.lock().unwrap().clone();
    let planned = planned.lock().unwrap().clone();
    let mut lat: Vec<Duration> =
        sent.iter().filter_map(|(n, at)| planned.get(n).map(|p| p.saturating_duration_since(*at))).collect();
    lat.sort();
    println!(
        "peak RSS {:.0} MiB (at first plan {:.0} MiB; after churn {:.0} MiB); RSS 5 s after first plan {:.0} MiB; steady RSS under churn max {:.0} MiB, at end {:.0} MiB",
        mib(hwm.max(hwm_end)),
        mib(hwm_at_sync),
        mib(hwm_end),
        mib(rss_after_sync),
        mib(peak_churn_rss),
        mib(steady)
    );
    println!(
        "churn {} pod updates/s for {} s: {} probes planned of {} sent; event → planned action p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        args.churn_per_sec,
        args.churn_secs,
        lat.len(),
        sent.len(),
        percentile(&lat, 0.50).as_secs_f64() * 1e3,
        percentile(&lat, 0.99).as_secs_f64() * 1e3,
        lat.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
    );
    runtime.shutdown_background();
}
