//! A node dies under a distributed job, on the real node lifecycle controller: fake nodes with a
//! kwok of their own, stopped so their Lease and status stop as when a kubelet dies. The clocks
//! are short (node monitor grace 20s, tolerations 2s in the runtime, grace period 1s, trainguard's
//! `--node-not-ready-for` and `--force-delete-after` 5s) so a story takes well under a minute.
//!
//! The job is a TrainJob whose JobSet restarts after a failure (`failurePolicy.maxRestarts`, the
//! Jobs' `backoffLimit: 0`): the pods evicted from the lost node exceed the Job's backoff limit.
//! Since Kubernetes 1.31 a Job gets its terminal `Failed` condition only when its pods have
//! terminated (it waits in `FailureTarget`), and no kubelet will ever confirm these pods gone: the
//! JobSet never sees a failed Job, never restarts, and the TrainJob hangs.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cluster::{act_rbac, eventually, metric_sum, plane};
use crate::kinds::{KINDS, TFJOB, TrainingOperator, V1Kind};

const CONTROLLER_SA: &str = "system:serviceaccount:trainguard-system:trainguard-controller";

/// Fake nodes for one story, tainted so no other test's pods land on them, with their own kwok
/// (`kwok` = the label value its selector matches). Dropped: the kwok stops, the pods left on the
/// nodes are force-deleted (nothing else would), the nodes and the runtime are deleted.
struct Story {
    pool: String,
    nodes: Vec<String>,
    kwoks: Vec<String>,
    ns: String,
    /// When the story began, for the audit log.
    since: String,
}

impl Story {
    fn new(pool: &str, ns: &str) -> Self {
        let _ = plane()
            .kubectl()
            .args(["delete", "namespace", ns, "--wait=true", "--timeout=60s", "--ignore-not-found"])
            .output();
        Story { pool: pool.into(), nodes: vec![], kwoks: vec![], ns: ns.into(), since: crate::cluster::audit_now() }
    }

    /// Adds a node in `zone`; `kwok` names its own kwok, or `None` for the shared one (type=kwok).
    fn node(&mut self, name: &str, zone: &str, kwok: Option<&str>) {
        self.node_with(name, zone, kwok, "");
    }

    /// `node`, with `kwok_arg` for its kwok (`no-pod-delete`: a kubelet that never finishes a
    /// pod's deletion).
    fn node_with(&mut self, name: &str, zone: &str, kwok: Option<&str>, kwok_arg: &str) {
        let (ty, managed) = match kwok {
            Some(k) => ("kwok-story", format!("\n    e2e.trainguard.io/kwok: {k}")),
            None => ("kwok", String::new()),
        };
        plane().kubectl().apply(&format!(
            "apiVersion: v1
kind: Node
metadata:
  name: {name}
  annotations: {{kwok.x-k8s.io/node: fake}}
  labels:
    type: {ty}
    topology.kubernetes.io/zone: {zone}
    kubernetes.io/hostname: {name}
    e2e.trainguard.io/pool: {pool}{managed}
spec:
  taints: [{{key: e2e.trainguard.io/story, value: {pool}, effect: NoSchedule}}]
status:
  allocatable: {{cpu: \"64\", memory: 512Gi, pods: \"110\", nvidia.com/gpu: \"8\"}}
  capacity: {{cpu: \"64\", memory: 512Gi, pods: \"110\", nvidia.com/gpu: \"8\"}}
",
            pool = self.pool
        ));
        self.nodes.push(name.into());
        if let Some(k) = kwok
            && !self.kwoks.iter().any(|x| x == k)
        {
            self.kwoks.push(k.into());
            plane().script(&["kwok", "start", k, &format!("e2e.trainguard.io/kwok={k}"), kwok_arg]);
        }
        eventually(&format!("node {name} Ready"), || node_ready(name).then_some(()));
    }

    /// A ClusterTrainingRuntime whose pods go to this story's nodes, run for an hour, tolerate a
    /// lost node for 2s, and whose JobSet restarts when a Job fails (backoffLimit 0).
    fn runtime(&self, num_nodes: u32) -> String {
        let name = format!("e2e-{}", self.pool);
        plane().kubectl().args(["apply", "--server-side", "-f", "-"]).output_with(&format!(
            "apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: {name}
  labels:
    trainer.kubeflow.org/framework: torch
spec:
  mlPolicy:
    numNodes: {num_nodes}
    torch: {{}}
  template:
    spec:
      failurePolicy:
        maxRestarts: 5
      replicatedJobs:
        - name: node
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: trainer
            spec:
              backoffLimit: 0
              template:
                metadata:
                  annotations:
                    pod-complete.stage.kwok.x-k8s.io/delay: 1h
                    pod-complete.stage.kwok.x-k8s.io/jitter-delay: 1h
                spec:
                  terminationGracePeriodSeconds: 1
                  nodeSelector:
                    e2e.trainguard.io/pool: {pool}
                  tolerations:
                    - {{key: e2e.trainguard.io/story, operator: Exists, effect: NoSchedule}}
                    - {{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 2}}
                    - {{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 2}}
                  containers:
                    - name: node
                      image: pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime
",
            pool = self.pool
        ));
        name
    }

    fn kubectl(&self) -> crate::cluster::Kubectl {
        plane().kubectl().args(["-n", &self.ns])
    }

    fn pods(&self) -> Vec<Value> {
        self.kubectl().args(["get", "pods"]).get_json().and_then(|p| p["items"].as_array().cloned()).unwrap_or_default()
    }
}

impl Drop for Story {
    fn drop(&mut self) {
        for k in &self.kwoks {
            let _ = std::panic::catch_unwind(|| plane().script(&["kwok", "stop", k]));
        }
        let _ =
            self.kubectl().args(["delete", "pods", "--all", "--force", "--grace-period=0", "--wait=false"]).output();
        let _ = plane().kubectl().args(["delete", "namespace", &self.ns, "--wait=false"]).output();
        let _ = plane().kubectl().args(["delete", "clustertrainingruntime", &format!("e2e-{}", self.pool)]).output();
        for n in &self.nodes {
            let _ = plane().kubectl().args(["delete", "node", n, "--wait=false"]).output();
        }
    }
}

/// Restarts the controller with the shipped arguments when the test ends, pass or fail.
struct ShippedController;

impl Drop for ShippedController {
    fn drop(&mut self) {
        plane().script(&["stop", "controller"]);
        // Keep this run's log: the restart below starts a new one.
        let logs = plane().run_dir().join("logs");
        let _ = std::fs::copy(
            logs.join("trainguard-controller.log"),
            logs.join(format!(
                "trainguard-controller.{}.log",
                std::thread::current().name().unwrap_or("test").replace("::", ".")
            )),
        );
        act_rbac(false);
        plane().script(&["start", "controller"]);
    }
}

/// The controller with short node-failure clocks, in `mode`, plus `extra` args.
fn controller(mode: &str, extra: &[&str]) -> ShippedController {
    plane().script(&["stop", "controller"]);
    act_rbac(mode == "act");
    let mode = format!("--controller-mode={mode}");
    let mut args = vec!["start", "controller", &mode, "--node-not-ready-for=5s", "--force-delete-after=5s"];
    args.extend_from_slice(extra);
    plane().script(&args);
    ShippedController
}

fn node_ready(name: &str) -> bool {
    node_condition(name, "Ready").as_deref() == Some("True")
}

fn node_condition(name: &str, kind: &str) -> Option<String> {
    let node = plane().kubectl().args(["get", "node", name]).get_json()?;
    node["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .and_then(|c| c["status"].as_str().map(String::from))
}

fn node_tainted(name: &str, key: &str) -> bool {
    plane().kubectl().args(["get", "node", name]).get_json().is_some_and(|n| {
        n["spec"]["taints"].as_array().is_some_and(|t| t.iter().any(|t| t["key"] == key && t["effect"] == "NoExecute"))
    })
}

fn events(ns: &str) -> Vec<(String, String, String)> {
    let ev = plane().kubectl().args(["-n", ns, "get", "events.events.k8s.io"]).get_json().unwrap_or_default();
    ev["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|e| {
                    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
                    (s(&e["reason"]), s(&e["regarding"]["name"]), s(&e["note"]))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn count_events(ns: &str, reason: &str) -> usize {
    events(ns).iter().filter(|(r, _, _)| r == reason).count()
}

/// Pods on `node` (still there, terminating or not).
fn pods_on(story: &Story, node: &str) -> Vec<Value> {
    story.pods().into_iter().filter(|p| p["spec"]["nodeName"] == node).collect()
}

fn running_on(story: &Story, node: &str, n: usize) -> bool {
    let pods = pods_on(story, node);
    pods.len() == n
        && pods.iter().all(|p| p["status"]["phase"] == "Running" && p["metadata"]["deletionTimestamp"].is_null())
}

fn controller_metrics() -> String {
    let port = plane().var("TRAINGUARD_CONTROLLER_ADMIN_PORT");
    let out = std::process::Command::new("curl")
        .args(["-sf", "--max-time", "10", &format!("http://127.0.0.1:{port}/metrics")])
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Pod deletions in the audit log since `since`: (pod name, user) for each `delete` of a pod in `ns`.
fn audited_pod_deletes(ns: &str, since: &str) -> Vec<(String, String)> {
    crate::cluster::audit_since(since)
        .into_iter()
        .filter(|e| {
            e["verb"] == "delete"
                && e["stage"] == "ResponseComplete"
                && e["objectRef"]["resource"] == "pods"
                && e["objectRef"]["subresource"].is_null()
                && e["objectRef"]["namespace"] == ns
        })
        .map(|e| {
            (
                e["objectRef"]["name"].as_str().unwrap_or_default().to_string(),
                e["user"]["username"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn secs(since: Instant) -> f64 {
    (since.elapsed().as_millis() as f64 / 100.0).round() / 10.0
}

/// The TrainJob story: report mode only reports while the restart hangs; act mode force-deletes
/// exactly the stuck pods after its grace, and the JobSet's restart goes through.
#[test]
#[allow(clippy::disallowed_methods, reason = "a quiet period showing nothing is force-deleted")]
fn node_loss_hangs_a_restarting_trainjob_until_act_mode_force_deletes_its_pods() {
    let mut story = Story::new("story-loss", "e2e-node-loss");
    story.node("tg-loss-0", "zone-loss", Some("loss-0"));
    let runtime = story.runtime(2);
    let _ns = plane().namespace(&story.ns, &[]);
    let _shipped = controller("report", &[]);
    story.kubectl().apply(&crate::cluster::trainjob("ddp", &runtime, false, ""));
    eventually("both pods Running on tg-loss-0", || running_on(&story, "tg-loss-0", 2).then_some(()));
    // A healthy node for the restart, managed by the shared kwok.
    story.node("tg-loss-spare", "zone-loss", None);
    let stuck: Vec<String> =
        pods_on(&story, "tg-loss-0").iter().map(|p| p["metadata"]["name"].as_str().unwrap().to_string()).collect();

    // The kubelet dies.
    let t0 = Instant::now();
    plane().script(&["kwok", "stop", "loss-0"]);
    eventually("tg-loss-0 tainted unreachable:NoExecute", || {
        node_tainted("tg-loss-0", "node.kubernetes.io/unreachable").then_some(())
    });
    let t_taint = Instant::now();
    let taint_after = secs(t0);
    // Evicted, and stuck: the JobSet's restart waits on the Job, which waits on its pods.
    eventually("the pods Terminating", || {
        pods_on(&story, "tg-loss-0").iter().all(|p| !p["metadata"]["deletionTimestamp"].is_null()).then_some(())
    });
    eventually("a WouldForceDeletedStuckPod event per stuck pod (report mode)", || {
        (count_events(&story.ns, "WouldForceDeletedStuckPod") >= 2).then_some(())
    });
    std::thread::sleep(Duration::from_secs(10));
    assert_eq!(pods_on(&story, "tg-loss-0").len(), 2, "report mode: the stuck pods must still be there");
    // Where it hangs on Kubernetes 1.36: the Job reached FailureTarget (backoff limit) but gets its
    // terminal Failed condition only once its pods are gone, so JobSet never sees a failed Job and
    // never starts its restart.
    let js = story.kubectl().args(["get", "jobset", "ddp"]).get_json().expect("JobSet");
    assert_eq!(js["status"]["restarts"].as_i64().unwrap_or(0), 0, "the JobSet restarted while the pods were stuck");
    let job = story.kubectl().args(["get", "job", "ddp-node-0"]).get_json().expect("the child Job");
    let conditions = job["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let has = |t: &str| conditions.iter().any(|c| c["type"] == t && c["status"] == "True");
    assert!(has("FailureTarget") && !has("Failed"), "the Job should wait in FailureTarget: {}", job["status"]);
    assert_eq!(job["status"]["terminating"].as_i64(), Some(2), "{}", job["status"]);
    assert!(
        running_on(&story, "tg-loss-spare", 0)
            && audited_pod_deletes(&story.ns, &story.since).iter().all(|(_, u)| u != CONTROLLER_SA),
        "report mode wrote"
    );

    // Act mode: the stuck pods go (force-deleted after the grace, one token each), the restart
    // completes and the job runs again on the spare node.
    drop(_shipped);
    let t_act = Instant::now();
    let _shipped = controller("act", &[]);
    eventually("the job running again on tg-loss-spare", || running_on(&story, "tg-loss-spare", 2).then_some(()));
    let recovered_after_taint = secs(t_taint);
    let recovered_after_act = secs(t_act);
    let mut deleted: Vec<String> = audited_pod_deletes(&story.ns, &story.since)
        .into_iter()
        .filter(|(_, u)| u == CONTROLLER_SA)
        .map(|(n, _)| n)
        .collect();
    deleted.sort();
    let mut want = stuck.clone();
    want.sort();
    assert_eq!(deleted, want, "trainguard must force-delete exactly the stuck pods");
    assert!(count_events(&story.ns, "ForceDeletedStuckPod") >= 2, "events: {:?}", events(&story.ns));
    let m = controller_metrics();
    assert!(metric_sum(&m, "trainguard_pod_force_deletions_total", &[]) >= 2.0, "metrics:\n{m}");
    let js = story.kubectl().args(["get", "jobset", "ddp"]).get_json().expect("JobSet");
    assert!(js["status"]["restarts"].as_i64().unwrap_or(0) >= 1, "the job came back without a JobSet restart: {js}");
    eprintln!(
        "node loss (TrainJob, JobSet restart): taint {taint_after}s after the kubelet stopped; \
         running again {recovered_after_taint}s after the taint ({recovered_after_act}s after act mode started)"
    );
}

/// One zone's nodes go down together while the other zones stay healthy: the zone brake holds
/// every force delete; the kubelets come back and the job runs again without trainguard.
#[test]
#[allow(clippy::disallowed_methods, reason = "a quiet period showing nothing is force-deleted")]
fn a_zone_outage_trips_the_brake_and_nothing_is_force_deleted() {
    let mut story = Story::new("story-zone", "e2e-zone-brake");
    for i in 0..3 {
        story.node(&format!("tg-zone-{i}"), "zone-brake", Some("zone-brake"));
    }
    let runtime = story.runtime(3);
    let _ns = plane().namespace(&story.ns, &[]);
    let _shipped = controller("act", &[]);
    story.kubectl().apply(&crate::cluster::trainjob("ddp", &runtime, false, ""));
    eventually("3 pods Running", || {
        let pods = story.pods();
        (pods.len() == 3 && pods.iter().all(|p| p["status"]["phase"] == "Running")).then_some(())
    });
    let before =
        metric_sum(&controller_metrics(), "trainguard_force_delete_suppressed_total", &["reason=\"zone-brake\""]);

    let t0 = Instant::now();
    plane().script(&["kwok", "stop", "zone-brake"]);
    eventually("a ForceDeleteSuppressed (zone brake)", || {
        let m = controller_metrics();
        (metric_sum(&m, "trainguard_force_delete_suppressed_total", &["reason=\"zone-brake\""]) > before
            && count_events(&story.ns, "ForceDeleteSuppressed") >= 1)
            .then_some(())
    });
    let braked_after = secs(t0);
    std::thread::sleep(Duration::from_secs(10));
    assert!(
        audited_pod_deletes(&story.ns, &story.since).iter().all(|(_, u)| u != CONTROLLER_SA),
        "a pod was force-deleted through the zone brake"
    );
    assert_eq!(count_events(&story.ns, "ForceDeletedStuckPod"), 0);
    assert_eq!(
        metric_sum(&controller_metrics(), "trainguard_force_delete_suppressed_total", &["reason=\"cluster-brake\""]),
        0.0,
        "the other zones are healthy: only the zone brake may hold"
    );
    // The kubelets come back: they finish the deletions themselves and the restart completes.
    plane().script(&["kwok", "start", "zone-brake", "e2e.trainguard.io/kwok=zone-brake"]);
    eventually("3 pods Running again", || {
        let pods = story.pods();
        (pods.len() == 3
            && pods.iter().all(|p| p["status"]["phase"] == "Running" && p["metadata"]["deletionTimestamp"].is_null()))
        .then_some(())
    });
    eprintln!("zone outage: brake held {braked_after}s after the kubelets stopped; recovered {}s after", secs(t0));
}

/// A node whose kubelet still reports (kwok's not-ready stage: Ready=False, Lease fresh) but does
/// not finish the deletion (its kwok runs without the pod-delete stage): under the default `--node-failure unreachable` the stuck pods are
/// reported (`PodStuckTerminating`) and left alone.
#[test]
#[allow(clippy::disallowed_methods, reason = "a quiet period showing nothing is force-deleted")]
fn a_not_ready_node_that_still_reports_is_left_alone_by_default() {
    let mut story = Story::new("story-notready", "e2e-not-ready");
    story.node_with("tg-notready-0", "zone-notready", Some("notready-0"), "no-pod-delete");
    let runtime = story.runtime(1);
    let _ns = plane().namespace(&story.ns, &[]);
    let _shipped = controller("act", &[]);
    story.kubectl().apply(&crate::cluster::trainjob("ddp", &runtime, false, ""));
    eventually("the pod Running", || running_on(&story, "tg-notready-0", 1).then_some(()));
    plane().kubectl().args(["label", "node", "tg-notready-0", "node-not-ready.stage.kwok.x-k8s.io=true"]).ok();
    eventually("tg-notready-0 Ready=False and tainted not-ready:NoExecute", || {
        (node_condition("tg-notready-0", "Ready").as_deref() == Some("False")
            && node_tainted("tg-notready-0", "node.kubernetes.io/not-ready"))
        .then_some(())
    });
    eventually("a PodStuckTerminating event", || (count_events(&story.ns, "PodStuckTerminating") >= 1).then_some(()));
    std::thread::sleep(Duration::from_secs(15));
    assert_eq!(node_condition("tg-notready-0", "Ready").as_deref(), Some("False"), "the kubelet kept reporting");
    assert!(
        pods_on(&story, "tg-notready-0").iter().any(|p| !p["metadata"]["deletionTimestamp"].is_null()),
        "the stuck pod is gone"
    );
    assert!(
        audited_pod_deletes(&story.ns, &story.since).iter().all(|(_, u)| u != CONTROLLER_SA),
        "trainguard deleted a pod"
    );
    assert_eq!(count_events(&story.ns, "ForceDeletedStuckPod"), 0);
}

/// A job of kind `k` named `ddp` (two replicas, fixed pod names such as `ddp-master-0`,
/// `ddp-worker-0`) on this story's nodes, running for an hour, tolerating a lost node for 2s.
fn v1job(k: &V1Kind, replicas: [&str; 2], pool: &str) -> String {
    let metadata = "
          annotations:
            pod-complete.stage.kwok.x-k8s.io/delay: 1h
            pod-complete.stage.kwok.x-k8s.io/jitter-delay: 1h";
    let pod_spec = format!(
        "          terminationGracePeriodSeconds: 1
          nodeSelector:
            e2e.trainguard.io/pool: {pool}
          tolerations:
            - {{key: e2e.trainguard.io/story, operator: Exists, effect: NoSchedule}}
            - {{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 2}}
            - {{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 2}}
"
    );
    let specs: String = replicas.iter().map(|r| k.replica_yaml(r, "OnFailure", metadata, &pod_spec)).collect();
    k.job_yaml("ddp", "", "{}", &specs)
}

/// The PyTorchJob story (Training Operator v1.9.4): a job whose pods have fixed names cannot get
/// its pods back while the old ones hang Terminating on the lost node; report mode only reports,
/// act mode force-deletes them and the operator recreates them on the spare node.
#[test]
fn node_loss_hangs_a_pytorchjob_until_act_mode_force_deletes_its_pods() {
    let pytorch = KINDS.iter().find(|k| k.kind == "PyTorchJob").expect("PyTorchJob");
    v1_node_loss(pytorch, ["Master", "Worker"], "pt", true);
}

/// The same loss for a TFJob (chief and worker), on the same operator, which takes it
/// differently: it counts a pod that is Running with a `deletionTimestamp` as failed, and a TFJob
/// with a failed replica and no `Restarting` condition (that comes only from a pod in phase
/// `Failed`) is `Failed` at once, `restartPolicy: OnFailure` or not. The job does not come back;
/// its pods still hang Terminating on the lost node, holding their names and their node's
/// resources, until act mode force-deletes them (a finished job does not stop that rule).
#[test]
fn node_loss_fails_a_tfjob_and_act_mode_force_deletes_its_stuck_pods() {
    v1_node_loss(&TFJOB, ["Chief", "Worker"], "tf", false);
}

#[allow(clippy::disallowed_methods, reason = "a quiet period showing nothing replaces the pods (real time)")]
fn v1_node_loss(k: &V1Kind, replicas: [&str; 2], tag: &str, recovers: bool) {
    let _operator = TrainingOperator::start(None);
    let (node, spare, kwok) = (format!("tg-{tag}-0"), format!("tg-{tag}-spare"), format!("{tag}-0"));
    let mut story = Story::new(&format!("story-{tag}"), &format!("e2e-node-loss-{tag}"));
    story.node(&node, &format!("zone-{tag}"), Some(&kwok));
    let _ns = plane().namespace(&story.ns, &[]);
    let _shipped = controller("report", &[]);
    story.kubectl().apply(&v1job(k, replicas, &story.pool));
    eventually(&format!("both pods Running on {node}"), || running_on(&story, &node, 2).then_some(()));
    story.node(&spare, &format!("zone-{tag}"), None);
    let mut stuck: Vec<String> =
        pods_on(&story, &node).iter().map(|p| p["metadata"]["name"].as_str().unwrap().to_string()).collect();
    stuck.sort();
    let mut want: Vec<String> = replicas.iter().map(|r| k.pod("ddp", r)).collect();
    want.sort();
    assert_eq!(stuck, want);
    let uids: Vec<Value> = pods_on(&story, &node).iter().map(|p| p["metadata"]["uid"].clone()).collect();

    let t0 = Instant::now();
    plane().script(&["kwok", "stop", &kwok]);
    eventually(&format!("{node} tainted unreachable:NoExecute"), || {
        node_tainted(&node, "node.kubernetes.io/unreachable").then_some(())
    });
    let t_taint = Instant::now();
    let taint_after = secs(t0);
    eventually("the pods Terminating", || {
        pods_on(&story, &node).iter().all(|p| !p["metadata"]["deletionTimestamp"].is_null()).then_some(())
    });
    eventually("a WouldForceDeletedStuckPod event per stuck pod (report mode)", || {
        (count_events(&story.ns, "WouldForceDeletedStuckPod") >= 2).then_some(())
    });
    let reported_after_taint = secs(t_taint);
    // A quiet period: nothing replaces the pods while their names are taken (real time is what is
    // tested here).
    std::thread::sleep(Duration::from_secs(10));
    assert_eq!(pods_on(&story, &node).len(), 2, "report mode: the stuck pods must still be there");
    assert!(running_on(&story, &spare, 0), "the operator replaced a pod whose name was still taken");
    assert!(audited_pod_deletes(&story.ns, &story.since).iter().all(|(_, u)| u != CONTROLLER_SA), "report mode wrote");
    let m = controller_metrics();
    assert!(metric_sum(&m, "trainguard_pods_stuck_terminating", &["node_state=\"unreachable\""]) >= 2.0, "{m}");

    drop(_shipped);
    let t_act = Instant::now();
    let _shipped = controller("act", &[]);
    if recovers {
        eventually(&format!("the job running again on {spare}"), || running_on(&story, &spare, 2).then_some(()));
    } else {
        eventually(&format!("the stuck pods gone from {node}"), || pods_on(&story, &node).is_empty().then_some(()));
        let job = story.kubectl().args(["get", k.plural, "ddp"]).get_json().expect("the job");
        let failed = job["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Failed" && c["status"] == "True"));
        assert!(failed, "the operator did not fail the {}: {job}", k.kind);
        assert!(running_on(&story, &spare, 0), "the failed {} came back", k.kind);
    }
    let recovered_after_taint = secs(t_taint);
    let recovered_after_act = secs(t_act);
    let mut deleted: Vec<String> = audited_pod_deletes(&story.ns, &story.since)
        .into_iter()
        .filter(|(_, u)| u == CONTROLLER_SA)
        .map(|(n, _)| n)
        .collect();
    deleted.sort();
    assert_eq!(deleted, stuck, "trainguard must force-delete exactly the stuck pods");
    // The same names, new pods.
    let now: Vec<Value> = pods_on(&story, &spare).iter().map(|p| p["metadata"]["uid"].clone()).collect();
    assert!(now.iter().all(|u| !uids.contains(u)), "old pods on the spare node?");
    assert!(count_events(&story.ns, "ForceDeletedStuckPod") >= 2, "events: {:?}", events(&story.ns));
    eprintln!(
        "node loss ({}, Training Operator v1.9.4): taint {taint_after}s after the kubelet stopped; \
         WouldForceDeletedStuckPod {reported_after_taint}s after the taint (report mode); {} \
         {recovered_after_taint}s after the taint ({recovered_after_act}s after act mode started)",
        k.kind,
        if recovers { "running again" } else { "stuck pods force-deleted" }
    );
}
