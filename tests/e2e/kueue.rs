//! Kueue's preemption and re-admission of a TrainJob, with trainguard's webhook and controller in
//! the way: Kueue (built from its module, `plane.sh kueue start`) runs only for these tests.

use std::time::Instant;

use serde_json::Value;

use crate::cluster::{
    Kubectl, act_rbac, audit_now, audit_since, condition_true, event_reasons, eventually, metric_sum, plane,
};
use crate::kinds::{TFJOB, TrainingOperator};

const TRAINGUARD: &str = "admission webhook \"validate.trainjob.trainguard.io\" denied the request";

/// Kueue running for one test, and trainguard's controller restarted with a short
/// `--admitted-suspended-after`; dropping it deletes the test's objects while Kueue still runs
/// (its finalizers), stops Kueue (its webhooks go first) and restarts the controller as shipped.
struct Kueue {
    namespace: String,
}

impl Kueue {
    fn start(namespace: &str) -> Kueue {
        Self::start_with(namespace, &[])
    }

    /// With extra controller arguments; `--controller-mode=act` among them grants the act RBAC.
    fn start_with(namespace: &str, extra: &[&str]) -> Kueue {
        plane().script(&["kueue", "start"]);
        plane().script(&["stop", "controller"]);
        if extra.contains(&"--controller-mode=act") {
            act_rbac(true);
        }
        let mut args = vec!["start", "controller", "--admitted-suspended-after=20s"];
        args.extend_from_slice(extra);
        plane().script(&args);
        Kueue { namespace: namespace.to_string() }
    }
}

impl Drop for Kueue {
    fn drop(&mut self) {
        let k = || plane().kubectl();
        let _ =
            k().args(["-n", &self.namespace, "delete", "trainjobs", "--all", "--wait=true", "--timeout=60s"]).output();
        // A test that failed with Kueue stopped leaves Workloads whose finalizer nobody removes.
        let names = k().args(["-n", &self.namespace, "get", "workloads", "-o", "name"]).output();
        for name in String::from_utf8_lossy(&names.stdout).lines() {
            let _ = k()
                .args([
                    "-n",
                    &self.namespace,
                    "patch",
                    name,
                    "--type=merge",
                    "-p",
                    r#"{"metadata":{"finalizers":null}}"#,
                ])
                .output();
        }
        let _ = k().args(["delete", "namespace", &self.namespace, "--wait=true", "--timeout=60s"]).output();
        let _ = k()
            .args(["delete", "--ignore-not-found", "--wait=false", "clusterqueue/e2e-cq"])
            .args(["resourceflavor/e2e-zone-a", "resourceflavor/e2e-zone-b"])
            .args(["workloadpriorityclass/e2e-low", "workloadpriorityclass/e2e-high"])
            .output();
        let _ = k().args(["delete", "--ignore-not-found", "clusterqueue/e2e-cq-one"]).output();
        plane().script(&["kueue", "stop"]);
        plane().script(&["stop", "controller"]);
        act_rbac(false);
        plane().script(&["start", "controller"]);
    }
}

/// e2e-torch with one node whose container asks for 8 CPUs: what Kueue counts against quota.
fn kueue_runtime() -> String {
    let runtime = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/e2e/manifests/runtimes.yaml"))
        .expect("runtimes.yaml");
    let torch = runtime.split("---").find(|d| d.contains("name: e2e-torch\n")).expect("e2e-torch");
    let out = torch.replace("name: e2e-torch\n", "name: e2e-torch-kueue\n").replace("numNodes: 2", "numNodes: 1").replace(
        "                      image: pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime\n",
        "                      image: pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime\n                      resources: {requests: {cpu: \"8\"}}\n",
    );
    assert!(out.contains("cpu: \"8\"") && out.contains("numNodes: 1"), "{out}");
    out
}

/// Two flavors, one per zone of the kwok nodes, 10 CPUs each: one job fits a flavor, two do not.
/// `whenCanPreempt: MayStopSearch`: a high-priority job preempts in the first flavor instead of
/// moving on to the second, so the low one is re-admitted on the other flavor.
fn queues(ns: &str) -> String {
    format!(
        r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: e2e-zone-a}}
spec: {{nodeLabels: {{topology.kubernetes.io/zone: zone-a}}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: e2e-zone-b}}
spec: {{nodeLabels: {{topology.kubernetes.io/zone: zone-b}}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: e2e-cq}}
spec:
  namespaceSelector: {{}}
  preemption: {{withinClusterQueue: LowerPriority}}
  flavorFungibility: {{whenCanPreempt: MayStopSearch}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: e2e-zone-a
      resources: [{{name: cpu, nominalQuota: "10"}}]
    - name: e2e-zone-b
      resources: [{{name: cpu, nominalQuota: "10"}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: e2e-lq, namespace: {ns}}}
spec: {{clusterQueue: e2e-cq}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {{name: e2e-low}}
value: 100
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {{name: e2e-high}}
value: 1000
"#
    )
}

/// A queued TrainJob (created suspended, as Kueue wants it) with a user's runtime patch whose pod
/// spec is `pod_spec` (flow-style YAML).
fn queued_trainjob(name: &str, priority: &str, pod_spec: &str) -> String {
    format!(
        r#"apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: {name}
  labels: {{kueue.x-k8s.io/queue-name: e2e-lq, kueue.x-k8s.io/priority-class: {priority}}}
spec:
  suspend: true
  runtimeRef: {{name: e2e-torch-kueue}}
  runtimePatches:
  - manager: e2e.trainguard.io/user
    trainingRuntimeSpec:
      template:
        spec:
          replicatedJobs:
          - name: node
            template: {{spec: {{template: {{spec: {pod_spec}}}}}}}
"#
    )
}

/// A user's patch with a field every Trainer release knows (Kueue's older types keep it).
const USER_TOLERATION: &str = r#"{tolerations: [{key: e2e.trainguard.io/user, operator: Exists}]}"#;

fn k(ns: &str) -> Kubectl {
    plane().kubectl().args(["-n", ns])
}

fn trainjob(ns: &str, name: &str) -> Value {
    k(ns).args(["get", "trainjob", name]).get_json().unwrap_or_else(|| panic!("TrainJob {name}"))
}

fn suspended(tj: &Value) -> bool {
    tj["spec"]["suspend"].as_bool().unwrap_or(false)
}

fn patch_entry<'a>(tj: &'a Value, manager: &str) -> Option<&'a Value> {
    tj["spec"]["runtimePatches"].as_array()?.iter().find(|p| p["manager"] == manager)
}

/// The node selector Kueue's runtime patch gives the `node` pods (its flavor's labels).
fn kueue_zone(tj: &Value) -> Option<String> {
    let entry = patch_entry(tj, "kueue.x-k8s.io/manager")?;
    let jobs = entry["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"].as_array()?;
    jobs.iter()
        .find_map(|j| j["template"]["spec"]["template"]["spec"]["nodeSelector"]["topology.kubernetes.io/zone"].as_str())
        .map(String::from)
}

fn user_grace(tj: &Value) -> Option<i64> {
    let entry = patch_entry(tj, "e2e.trainguard.io/user")?;
    entry["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        ["terminationGracePeriodSeconds"]
        .as_i64()
}

fn jobset_active(ns: &str, name: &str) -> i64 {
    k(ns)
        .args(["get", "jobset", name])
        .get_json()
        .and_then(|js| {
            Some(js["status"]["replicatedJobsStatus"].as_array()?.iter().filter_map(|r| r["active"].as_i64()).sum())
        })
        .unwrap_or(0)
}

/// Zones of the nodes the job's running pods are bound to.
fn pod_zones(ns: &str, name: &str) -> Vec<String> {
    let pods = k(ns)
        .args(["get", "pods", "-l", &format!("jobset.sigs.k8s.io/jobset-name={name}")])
        .get_json()
        .unwrap_or_default();
    pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null() && p["status"]["phase"] == "Running")
        .filter_map(|p| p["spec"]["nodeName"].as_str().map(|n| n.split('-').nth(1).unwrap_or_default().to_string()))
        .map(|z| format!("zone-{z}"))
        .collect()
}

/// Kueue has preempted the TrainJob `name` at least once: its Workload counts an eviction for
/// preemption (`status.schedulingStats.evictions`, kept after re-admission).
fn preempted(ns: &str, name: &str) -> bool {
    let workloads = k(ns).args(["get", "workloads"]).get_json().unwrap_or_default();
    workloads["items"].as_array().into_iter().flatten().any(|w| {
        let owned = w["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|refs| refs.iter().any(|r| r["kind"] == "TrainJob" && r["name"] == name));
        let evictions = w["status"]["schedulingStats"]["evictions"].as_array();
        owned
            && evictions.is_some_and(|e| {
                e.iter().any(|e| e["reason"] == "Preempted" && e["count"].as_i64().is_some_and(|c| c > 0))
            })
    })
}

/// Running on `zone` as Kueue admitted it: unsuspended, Kueue's patch naming that zone, the
/// JobSet active, and a running pod on a node of that zone.
fn running_on(ns: &str, name: &str, zone: &str) -> Option<()> {
    let tj = k(ns).args(["get", "trainjob", name]).get_json()?;
    (!suspended(&tj)
        && kueue_zone(&tj).as_deref() == Some(zone)
        && jobset_active(ns, name) > 0
        && pod_zones(ns, name).iter().any(|z| z == zone))
    .then_some(())
}

fn controller_metrics() -> String {
    let port = plane().var("TRAINGUARD_CONTROLLER_ADMIN_PORT");
    let out = std::process::Command::new("curl")
        .args(["-sf", "--max-time", "10", &format!("http://127.0.0.1:{port}/metrics")])
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A user's change to the overrides of a running job: one more runtime patch entry.
fn user_patch_denied(ns: &str, name: &str) {
    let patch = r#"[{"op":"add","path":"/spec/runtimePatches/-","value":{"manager":"e2e.trainguard.io/late-edit","trainingRuntimeSpec":{"template":{"metadata":{"labels":{"late":"edit"}}}}}}]"#;
    let said = k(ns).args(["patch", "trainjob", name, "--type=json", "-p", patch]).fails();
    assert!(said.contains(TRAINGUARD), "the edit of running {name} was not denied by trainguard: {said}");
}

/// Kueue admits a low-priority TrainJob on flavor zone-a; a high-priority one preempts it there;
/// Kueue suspends the low one, JobSet tears its pods down, Kueue re-admits it on zone-b (its
/// `runtimePatches` entry rewritten while suspended) and resumes it. Every one of Kueue's writes
/// passes trainguard's webhook, a user's edit of a running job is denied throughout, and the
/// controller raises nothing (no `SuspendNotReconciled`, no `AdmittedButSuspended`) for a
/// preemption that completes.
#[test]
fn kueue_preempts_and_readmits_a_trainjob_through_trainguard() {
    let ns_name = "e2e-kueue";
    // The denial texts pinned below are trainguard's: Trainer's own validator sits out here (both
    // run in parallel and the first denial wins). Kueue's writes pass both or neither alike.
    let ns = plane().namespace(ns_name, &[("e2e.trainguard.io/trainer-webhook", "off")]);
    let _kueue = Kueue::start(&ns.name);
    let out = plane()
        .kubectl()
        .args(["apply", "--server-side", "--force-conflicts", "-f", "-"])
        .output_with(&kueue_runtime());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Kueue's webhooks are picked up asynchronously: retry until the queues are accepted.
    eventually("Kueue's queues applied", || {
        plane().kubectl().args(["apply", "-f", "-"]).output_with(&queues(&ns.name)).status.success().then_some(())
    });
    let since = audit_now();
    let t0 = Instant::now();
    k(&ns.name).apply(&queued_trainjob("low", "e2e-low", USER_TOLERATION));
    eventually("'low' admitted on zone-a and running", || running_on(&ns.name, "low", "zone-a"));
    let admitted = t0.elapsed();
    let low = trainjob(&ns.name, "low");
    assert!(user_tolerates(&low), "the user's patch lost its toleration: {low}");
    user_patch_denied(&ns.name, "low");

    let webhook_calls =
        || metric_sum(&plane().webhook_metrics(), "controller_runtime_webhook_requests_total", &["validate-trainer"]);
    let calls_before = webhook_calls();
    let t1 = Instant::now();
    k(&ns.name).apply(&queued_trainjob("high", "e2e-high", USER_TOLERATION));
    // Kueue may re-admit the low one within a few hundred milliseconds of suspending it (seen
    // once: suspended at +0.2 s, resumed at +0.5 s), faster than a poll sees the suspension, so
    // its Workload's eviction count is the evidence too.
    eventually("'low' suspended by Kueue", || {
        (suspended(&trainjob(&ns.name, "low")) || preempted(&ns.name, "low")).then_some(())
    });
    let suspended_after = t1.elapsed();
    eventually("'low' torn down (no active jobs, no running pods)", || {
        (jobset_active(&ns.name, "low") == 0 && pod_zones(&ns.name, "low").is_empty()).then_some(())
    });
    let torn_down = t1.elapsed();
    eventually("'high' admitted on zone-a and running", || running_on(&ns.name, "high", "zone-a"));
    let high_running = t1.elapsed();
    eventually("'low' re-admitted on zone-b and running", || running_on(&ns.name, "low", "zone-b"));
    let readmitted = t1.elapsed();
    let calls_after = webhook_calls();
    eprintln!(
        "kueue: low admitted+running {:.1}s after create; after high's create: low suspended {:.1}s, torn down {:.1}s, \
         high running {:.1}s, low re-admitted on zone-b and running {:.1}s; trainguard reviews meanwhile {}",
        admitted.as_secs_f64(),
        suspended_after.as_secs_f64(),
        torn_down.as_secs_f64(),
        high_running.as_secs_f64(),
        readmitted.as_secs_f64(),
        calls_after - calls_before
    );
    // Kueue's runtimePatches rewrites reached trainguard (not only suspend-only writes the
    // matchConditions skip), and were allowed.
    assert!(calls_after > calls_before, "trainguard judged none of Kueue's writes");
    user_patch_denied(&ns.name, "low");
    user_patch_denied(&ns.name, "high");

    // No write of Kueue's to a TrainJob was refused (a 409 conflict is a retry, not a refusal).
    let kueue_writes: Vec<Value> = audit_since(&since)
        .into_iter()
        .filter(|e| e["objectRef"]["resource"] == "trainjobs" && e["objectRef"]["namespace"] == ns.name.as_str())
        .filter(|e| e["userAgent"].as_str().is_some_and(|a| a.starts_with("kueue")))
        .filter(|e| e["stage"] == "ResponseComplete")
        .collect();
    assert!(kueue_writes.len() >= 4, "fewer Kueue writes than admit, resume, suspend, re-admit: {kueue_writes:?}");
    let refused: Vec<&Value> = kueue_writes
        .iter()
        .filter(|e| e["responseStatus"]["code"].as_i64().is_some_and(|c| c >= 400 && c != 409))
        .collect();
    assert!(refused.is_empty(), "Kueue's writes refused: {refused:?}");

    // A preemption that completes raises nothing; nor does an admission Kueue resumes.
    for job in ["low", "high"] {
        let reasons = event_reasons(&ns.name, job);
        assert!(
            !reasons.iter().any(|r| r == "SuspendNotReconciled" || r == "AdmittedButSuspended"),
            "{job}: {reasons:?}"
        );
    }

    for job in ["low", "high"] {
        assert!(user_tolerates(&trainjob(&ns.name, job)), "{job}: the user's patch lost its toleration");
    }
}

fn user_tolerates(tj: &Value) -> bool {
    patch_entry(tj, "e2e.trainguard.io/user").is_some_and(|e| {
        e["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
            ["tolerations"][0]["key"]
            == "e2e.trainguard.io/user"
    })
}

/// Kueue v0.19 vendors Trainer v2.2.1's types and writes a TrainJob back whole on admission: a
/// user's v2.3.0 `terminationGracePeriodSeconds` in `runtimePatches` is dropped. Trainer then
/// builds a JobSet pod template without it, which JobSet's webhook refuses for the suspended
/// JobSet (`field is immutable`): the TrainJob is resumed, its JobSet stays suspended, nothing
/// runs while the quota is held. trainguard's webhook lets Kueue's write through (a suspended job,
/// nothing of the old run active; denying it would stall the admission the same way), and its
/// controller raises `AdmittedButSuspended` naming the JobSet.
#[test]
fn kueue_drops_termination_grace_from_runtime_patches_and_the_controller_reports_it() {
    let ns_name = "e2e-kueue-grace";
    let ns = plane().namespace(ns_name, &[("e2e.trainguard.io/trainer-webhook", "off")]);
    let _kueue = Kueue::start(&ns.name);
    let out = plane()
        .kubectl()
        .args(["apply", "--server-side", "--force-conflicts", "-f", "-"])
        .output_with(&kueue_runtime());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    eventually("Kueue's queues applied", || {
        plane().kubectl().args(["apply", "-f", "-"]).output_with(&queues(&ns.name)).status.success().then_some(())
    });
    let since = audit_now();
    let t0 = Instant::now();
    k(&ns.name).apply(&queued_trainjob("grace", "e2e-low", "{terminationGracePeriodSeconds: 7}"));
    eventually("'grace' admitted and resumed by Kueue", || {
        let tj = trainjob(&ns.name, "grace");
        (!suspended(&tj) && kueue_zone(&tj).is_some()).then_some(tj)
    });
    let resumed = t0.elapsed();
    let tj = trainjob(&ns.name, "grace");
    eprintln!("kueue: user's terminationGracePeriodSeconds after Kueue's admission: {:?}", user_grace(&tj));
    assert_eq!(user_grace(&tj), None, "Kueue kept the v2.3.0 field: {tj}");
    // The JobSet keeps the grace period it was created with, stays suspended, and Trainer says why.
    eventually("Trainer's TrainJobResourcesCreationFailed on 'grace'", || {
        event_reasons(&ns.name, "grace").iter().any(|r| r == "TrainJobResourcesCreationFailed").then_some(())
    });
    let js = k(&ns.name).args(["get", "jobset", "grace"]).get_json().expect("JobSet");
    assert_eq!(js["spec"]["suspend"], true, "{js}");
    assert_eq!(
        js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"],
        7
    );
    // Kueue's admission write passed trainguard.
    let refused: Vec<Value> = audit_since(&since)
        .into_iter()
        .filter(|e| e["objectRef"]["resource"] == "trainjobs" && e["objectRef"]["namespace"] == ns.name.as_str())
        .filter(|e| e["userAgent"].as_str().is_some_and(|a| a.starts_with("kueue")) && e["stage"] == "ResponseComplete")
        .filter(|e| e["responseStatus"]["code"].as_i64().is_some_and(|c| c >= 400 && c != 409))
        .collect();
    assert!(refused.is_empty(), "Kueue's writes refused: {refused:?}");
    eventually("AdmittedButSuspended on 'grace'", || {
        event_reasons(&ns.name, "grace").iter().any(|r| r == "AdmittedButSuspended").then_some(())
    });
    let alarm = t0.elapsed();
    let m = controller_metrics();
    assert!(
        metric_sum(&m, "trainguard_admitted_but_suspended_jobs", &["kind=\"TrainJob\""]) >= 1.0,
        "gauge not set:\n{m}"
    );
    assert_eq!(jobset_active(&ns.name, "grace"), 0, "the JobSet ran after all");
    eprintln!(
        "kueue: 'grace' admitted and resumed {:.1}s after create, AdmittedButSuspended {:.1}s after create \
         (--admitted-suspended-after=20s)",
        resumed.as_secs_f64(),
        alarm.as_secs_f64()
    );
}

/// A queued PyTorchJob (one master, 8 CPUs) with a TTL of 3s and `restartPolicy: ExitCode`. kwok
/// completes only pods a Job owns: the test ends this one's pod itself.
fn queued_pytorchjob(name: &str, priority: &str) -> String {
    format!(
        r#"apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: {name}
  labels: {{kueue.x-k8s.io/queue-name: e2e-lq-one, kueue.x-k8s.io/priority-class: {priority}}}
spec:
  runPolicy: {{suspend: true, ttlSecondsAfterFinished: 3}}
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: ExitCode
      template:
        metadata:
        spec:
          containers:
          - name: pytorch
            image: pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime
            resources: {{requests: {{cpu: "8"}}}}
"#
    )
}

/// One flavor only (zone-a, 10 CPUs): a preempted job waits until the quota is free again.
fn one_flavor_queue(ns: &str) -> String {
    format!(
        r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: e2e-cq-one}}
spec:
  namespaceSelector: {{}}
  preemption: {{withinClusterQueue: LowerPriority}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: e2e-zone-a
      resources: [{{name: cpu, nominalQuota: "10"}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: e2e-lq-one, namespace: {ns}}}
spec: {{clusterQueue: e2e-cq-one}}
"#
    )
}

fn pytorchjob_json(ns: &str, name: &str) -> Option<Value> {
    k(ns).args(["get", "pytorchjob", name]).get_json()
}

/// A PyTorchJob with a 3s TTL preempted by Kueue (`kubeflow.org/pytorchjob` integration) stays
/// suspended while the quota is taken — trainguard in act mode, with no TTL grace, never deletes
/// it then (it is not finished) — and once re-admitted it fails through the operator's
/// `ExitCode` path (a non-retryable exit code), which sets `Failed` without `completionTime`: the
/// operator's own TTL cannot fire, so the delete must be trainguard's.
#[test]
#[allow(
    clippy::disallowed_methods,
    reason = "a quiet period past the TTL showing the suspended job is kept (real time)"
)]
fn kueue_preempted_pytorchjob_is_ttl_deleted_only_once_finished() {
    let ns_name = "e2e-kueue-pytorch";
    // Declared before `Kueue`, so it stops after.
    let _operator = TrainingOperator::start(None);
    let ns = plane().namespace(ns_name, &[]);
    let _kueue = Kueue::start_with(&ns.name, &["--controller-mode=act", "--ttl-grace=0s"]);
    eventually("Kueue's queues applied", || {
        let all = format!("{}---\n{}", queues(&ns.name), one_flavor_queue(&ns.name));
        plane().kubectl().args(["apply", "-f", "-"]).output_with(&all).status.success().then_some(())
    });
    let since = audit_now();
    k(&ns.name).apply(&queued_pytorchjob("low", "e2e-low"));
    let running = |name: &str| {
        pytorchjob_json(&ns.name, name)
            .is_some_and(|j| j["spec"]["runPolicy"]["suspend"] == false && condition_true(&j, "Running"))
    };
    eventually("'low' admitted and Running", || running("low").then_some(()));
    k(&ns.name).apply(&queued_pytorchjob("high", "e2e-high"));
    let t_preempt = Instant::now();
    eventually("'low' suspended by Kueue", || {
        pytorchjob_json(&ns.name, "low").is_some_and(|j| j["spec"]["runPolicy"]["suspend"] == true).then_some(())
    });
    let suspended_after = t_preempt.elapsed();
    eventually("'high' Running", || running("high").then_some(()));
    // Suspended far longer than its TTL and the (zero) grace: a quiet period, real time is what
    // is tested here.
    std::thread::sleep(std::time::Duration::from_secs(15));
    let low = pytorchjob_json(&ns.name, "low").expect("the suspended PyTorchJob was deleted");
    assert!(low["metadata"]["deletionTimestamp"].is_null(), "{low}");
    assert_eq!(low["spec"]["runPolicy"]["suspend"], true, "{low}");
    let reasons = event_reasons(&ns.name, "low");
    assert!(!reasons.iter().any(|r| r.contains("TTL")), "{reasons:?}");

    // The quota comes back: 'low' is re-admitted and runs; its container exits with code 1 (as a
    // kubelet would report it), the operator fails the job, and trainguard's TTL deletes it.
    k(&ns.name).args(["delete", "pytorchjob", "high", "--wait=true"]).ok();
    let t_free = Instant::now();
    eventually("'low' resumed", || running("low").then_some(()));
    let resumed_after = t_free.elapsed();
    eventually("low-master-0 Running", || {
        let pod = k(&ns.name).args(["get", "pod", "low-master-0"]).get_json()?;
        (pod["status"]["phase"] == "Running").then_some(())
    });
    k(&ns.name)
        .args([
            "patch",
            "pod",
            "low-master-0",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Failed","containerStatuses":[{"name":"pytorch","image":"pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime","imageID":"","ready":false,"restartCount":0,"state":{"terminated":{"exitCode":1,"reason":"Error"}}}]}}"#,
        ])
        .ok();
    // The operator's ExitCode path: Failed, and no completionTime, so its own TTL cleanup errors
    // ("job completion time is nil") and never deletes.
    let failed = eventually("'low' Failed", || {
        let j = pytorchjob_json(&ns.name, "low")?;
        condition_true(&j, "Failed").then_some(j)
    });
    let finished = t_free.elapsed();
    assert!(failed["status"]["completionTime"].is_null(), "the operator set a completionTime: {failed}");
    eventually("'low' deleted by its TTL", || pytorchjob_json(&ns.name, "low").is_none().then_some(()));
    let deleted_after = t_free.elapsed();
    let reasons = event_reasons(&ns.name, "low");
    assert!(reasons.iter().any(|r| r.contains("Failed")), "deleted without having failed: {reasons:?}");
    let deleter: Vec<String> = audit_since(&since)
        .into_iter()
        .filter(|e| {
            e["verb"] == "delete"
                && e["objectRef"]["resource"] == "pytorchjobs"
                && e["objectRef"]["name"] == "low"
                && e["stage"] == "ResponseComplete"
        })
        .map(|e| format!("{} ({})", e["user"]["username"].as_str().unwrap_or(""), e["responseStatus"]["code"]))
        .collect();
    eprintln!(
        "kueue+pytorchjob: low suspended {:.1}s after high's create; after high's delete: resumed {:.1}s, \
         Failed {:.1}s, deleted {:.1}s; deletes: {deleter:?}",
        suspended_after.as_secs_f64(),
        resumed_after.as_secs_f64(),
        finished.as_secs_f64(),
        deleted_after.as_secs_f64()
    );
    // One delete, trainguard's, and it succeeded: nobody else could have.
    assert_eq!(
        deleter,
        ["system:serviceaccount:trainguard-system:trainguard-controller (200)"],
        "the deletes of 'low' in the audit log"
    );
}

/// The release where the TFJob story happened (kubeflow/trainer#2239, kueue#2923): its TTL cleanup
/// runs for a suspended job too and fails without a `completionTime` (fixed by
/// kubeflow/trainer#2243 in v1.9).
const OPERATOR_WITH_THE_BUG: &str = "v1.8.0";

/// A queued TFJob (one worker, 8 CPUs, a grace period of 1s) with a 5s TTL.
fn queued_tfjob(name: &str, priority: &str) -> String {
    let replicas = TFJOB.replica_yaml("Worker", "Never", "", "          terminationGracePeriodSeconds: 1\n").replace(
        "              image: e2e.trainguard.io/tfjobs:never-pulled\n",
        "              image: e2e.trainguard.io/tfjobs:never-pulled\n              resources: {requests: {cpu: \"8\"}}\n",
    );
    TFJOB.job_yaml(
        name,
        &format!("kueue.x-k8s.io/queue-name: e2e-lq-one, kueue.x-k8s.io/priority-class: {priority}"),
        "{suspend: true, ttlSecondsAfterFinished: 5}",
        &replicas,
    )
}

fn tfjob(ns: &str, name: &str) -> Option<Value> {
    k(ns).args(["get", "tfjob", name]).get_json()
}

const STASH: &str = "trainguard.io/stashed-ttl-seconds-after-finished";

/// The stash remedy's RBAC (deploy/components/ttl-stash-rbac) for one test, as an operator who
/// turns the remedy on installs it; removed on drop.
struct StashRbac;

impl StashRbac {
    fn file() -> &'static str {
        concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/components/ttl-stash-rbac/rbac.yaml")
    }

    fn grant() -> StashRbac {
        plane().kubectl().args(["apply", "-f", Self::file()]).ok();
        StashRbac
    }
}

impl Drop for StashRbac {
    fn drop(&mut self) {
        let _ = plane().kubectl().args(["delete", "--ignore-not-found", "-f", Self::file()]).output();
    }
}

/// The controller restarted for the story: `--suspend-stuck-after=5s` and the stash remedy on.
fn story_controller(mode: &str) {
    plane().script(&["stop", "controller"]);
    act_rbac(mode == "act");
    let mode = format!("--controller-mode={mode}");
    plane().script(&[
        "start",
        "controller",
        "--admitted-suspended-after=20s",
        "--suspend-stuck-after=5s",
        "--stash-ttl-on-stuck-suspend",
        &mode,
    ]);
}

/// The TFJob story on the Training Operator `version`: a TFJob with `ttlSecondsAfterFinished`
/// admitted by Kueue (`kubeflow.org/tfjob` integration, one flavor of 10 CPUs), preempted by a
/// higher-priority one. On v1.8.0 the operator's suspend path runs its TTL cleanup, which fails
/// for want of a completion time ("job completion time is nil, cannot cleanup") before it writes
/// the status: the job never reaches `Suspended`, its replica status keeps `active: 1`, and Kueue
/// (which releases a preempted kubeflow job's quota only once nothing is active) holds the quota,
/// so the high-priority job never runs. trainguard's report mode reports it (`SuspendNotReconciled`,
/// `WouldTTLStashedWhileSuspended`) and writes nothing; in act mode the stash moves the TTL into
/// an annotation, the operator finishes the suspension, the high-priority job runs. Once that
/// one is gone the low one is re-admitted, the stashed TTL comes back (`TTLRestored`), the job
/// succeeds and its TTL deletes it. On v1.9.x the suspension completes and trainguard, in act mode
/// with the remedy on, stays out of the way: no report, no stash, no write.
#[allow(clippy::disallowed_methods, reason = "a quiet period past --suspend-stuck-after (real time)")]
fn tfjob_preempted_with_a_ttl(version: &str) {
    let bug = version == OPERATOR_WITH_THE_BUG;
    let ns_name = if bug { "e2e-kueue-tf-180" } else { "e2e-kueue-tf" };
    // Declared before `Kueue`, so it stops after.
    let _operator = TrainingOperator::start(Some(version));
    let ns = plane().namespace(ns_name, &[]);
    let _stash_rbac = StashRbac::grant();
    let _kueue = Kueue::start(&ns.name);
    story_controller(if bug { "report" } else { "act" });
    eventually("Kueue's queues applied", || {
        let all = format!("{}---\n{}", queues(&ns.name), one_flavor_queue(&ns.name));
        plane().kubectl().args(["apply", "-f", "-"]).output_with(&all).status.success().then_some(())
    });
    let since = audit_now();
    let running = |name: &str| {
        tfjob(&ns.name, name)
            .is_some_and(|j| j["spec"]["runPolicy"]["suspend"] == false && condition_true(&j, "Running"))
    };
    let active = |j: &Value| j["status"]["replicaStatuses"]["Worker"]["active"].as_i64().unwrap_or(0);
    k(&ns.name).apply(&queued_tfjob("low", "e2e-low"));
    eventually("'low' admitted and Running", || running("low").then_some(()));
    k(&ns.name).apply(&queued_tfjob("high", "e2e-high"));
    let t_preempt = Instant::now();
    eventually("'low' suspended by Kueue", || {
        tfjob(&ns.name, "low").is_some_and(|j| j["spec"]["runPolicy"]["suspend"] == true).then_some(())
    });
    let suspended_after = t_preempt.elapsed();
    let operator_log =
        || std::fs::read_to_string(plane().run_dir().join("logs/training-operator.log")).unwrap_or_default();
    let trainguard_writes = |since: &str| -> Vec<String> {
        audit_since(since)
            .into_iter()
            .filter(|e| {
                e["objectRef"]["resource"] == "tfjobs"
                    && e["objectRef"]["namespace"] == ns.name.as_str()
                    && e["stage"] == "ResponseComplete"
                    && e["user"]["username"] == "system:serviceaccount:trainguard-system:trainguard-controller"
                    && matches!(e["verb"].as_str(), Some("patch" | "update" | "delete"))
            })
            .map(|e| format!("{} {} ({})", e["verb"], e["objectRef"]["name"], e["responseStatus"]["code"]))
            .collect()
    };
    let reported_after;
    let unstuck_after;
    if bug {
        // The bug: reported after --suspend-stuck-after, and still there then.
        eventually("SuspendNotReconciled and WouldTTLStashedWhileSuspended on 'low' (report mode)", || {
            let r = event_reasons(&ns.name, "low");
            (r.iter().any(|r| r == "SuspendNotReconciled") && r.iter().any(|r| r == "WouldTTLStashedWhileSuspended"))
                .then_some(())
        });
        reported_after = t_preempt.elapsed();
        let low = tfjob(&ns.name, "low").expect("low");
        assert!(!condition_true(&low, "Suspended"), "v1.8.0 reached Suspended: the bug did not reproduce: {low}");
        assert_eq!(active(&low), 1, "the operator wrote the suspension after all: {low}");
        assert_eq!(low["spec"]["runPolicy"]["ttlSecondsAfterFinished"], 5, "report mode changed the TTL: {low}");
        let high = tfjob(&ns.name, "high").expect("high");
        assert_eq!(high["spec"]["runPolicy"]["suspend"], true, "'high' admitted while 'low' holds the quota: {high}");
        assert!(
            operator_log().contains("job completion time is nil, cannot cleanup"),
            "the operator's TTL cleanup did not fail as in kubeflow/trainer#2239"
        );
        assert_eq!(trainguard_writes(&since), Vec::<String>::new(), "report mode wrote");

        // The remedy: act mode stashes the TTL, the operator finishes the suspension.
        let t_act = Instant::now();
        story_controller("act");
        let low = eventually("'low' Suspended with its TTL stashed", || {
            let j = tfjob(&ns.name, "low")?;
            (condition_true(&j, "Suspended") && active(&j) == 0 && j["metadata"]["annotations"][STASH] == "5")
                .then_some(j)
        });
        assert!(low["spec"]["runPolicy"]["ttlSecondsAfterFinished"].is_null(), "{low}");
        assert!(event_reasons(&ns.name, "low").iter().any(|r| r == "TTLStashedWhileSuspended"));
        eventually("'high' Running", || running("high").then_some(()));
        unstuck_after = t_act.elapsed();
    } else {
        eventually("'low' Suspended", || {
            tfjob(&ns.name, "low").is_some_and(|j| condition_true(&j, "Suspended") && active(&j) == 0).then_some(())
        });
        reported_after = t_preempt.elapsed();
        eventually("'high' Running", || running("high").then_some(()));
        unstuck_after = t_preempt.elapsed();
        // A quiet period past --suspend-stuck-after (5s), the remedy on in act mode: nothing to
        // report or do (real time is what is tested here).
        std::thread::sleep(std::time::Duration::from_secs(10).saturating_sub(t_preempt.elapsed()));
        let low = tfjob(&ns.name, "low").expect("low");
        assert_eq!(low["spec"]["runPolicy"]["ttlSecondsAfterFinished"], 5, "{low}");
        assert!(low["metadata"]["annotations"][STASH].is_null(), "{low}");
        let reasons = event_reasons(&ns.name, "low");
        assert!(!reasons.iter().any(|r| r.contains("SuspendNotReconciled") || r.contains("TTLStashed")), "{reasons:?}");
        assert_eq!(trainguard_writes(&since), Vec::<String>::new(), "trainguard wrote to a job it had no cause to");
    }

    // The preempted run's pod gone first: the operator counts a Running pod with a
    // deletionTimestamp as a failed replica, and a TFJob resumed while one is left is Failed at
    // once (and then deleted by its TTL), on v1.8.0 and v1.9.4 alike.
    eventually("the preempted run's pod of 'low' gone", || {
        let pods = k(&ns.name).args(["get", "pods", "-l", "training.kubeflow.org/job-name=low"]).get_json()?;
        pods["items"].as_array().is_some_and(Vec::is_empty).then_some(())
    });
    // The quota comes back: 'low' is re-admitted, its TTL is in spec again, it runs and succeeds.
    k(&ns.name).args(["delete", "tfjob", "high", "--wait=true"]).ok();
    let t_free = Instant::now();
    let resumed = eventually("'low' resumed and Running with its TTL", || {
        let j = tfjob(&ns.name, "low")?;
        (running("low")
            && j["spec"]["runPolicy"]["ttlSecondsAfterFinished"] == 5
            && j["metadata"]["annotations"][STASH].is_null())
        .then_some(j)
    });
    let resumed_after = t_free.elapsed();
    if bug {
        assert!(event_reasons(&ns.name, "low").iter().any(|r| r == "TTLRestored"), "{resumed}");
    }
    let pod = TFJOB.pod("low", "Worker");
    eventually(&format!("{pod} Running"), || {
        let p = k(&ns.name).args(["get", "pod", &pod]).get_json()?;
        (p["status"]["phase"] == "Running" && p["metadata"]["deletionTimestamp"].is_null()).then_some(())
    });
    let status = serde_json::json!({"status": {"phase": "Succeeded", "containerStatuses": [{
        "name": TFJOB.container, "image": "e2e.trainguard.io/tfjobs:never-pulled", "imageID": "",
        "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}});
    k(&ns.name)
        .args(["patch", "pod", &pod, "--subresource=status", "--type=merge", "-p"])
        .args([status.to_string()])
        .ok();
    eventually("'low' Succeeded", || {
        tfjob(&ns.name, "low").is_some_and(|j| condition_true(&j, "Succeeded")).then_some(())
    });
    let succeeded_after = t_free.elapsed();
    eventually("'low' deleted by its TTL", || tfjob(&ns.name, "low").is_none().then_some(()));
    let deleted_after = t_free.elapsed();
    let deleters: Vec<String> = audit_since(&since)
        .into_iter()
        .filter(|e| {
            e["verb"] == "delete"
                && e["objectRef"]["resource"] == "tfjobs"
                && e["objectRef"]["name"] == "low"
                && e["objectRef"]["namespace"] == ns.name.as_str()
                && e["stage"] == "ResponseComplete"
        })
        .map(|e| format!("{} ({})", e["user"]["username"].as_str().unwrap_or(""), e["responseStatus"]["code"]))
        .collect();
    eprintln!(
        "tfjob story (Training Operator {version}): low suspended {:.1}s after high's create; {} {:.1}s after it; \
         high running {:.1}s after {}; after high's delete: low resumed {:.1}s, Succeeded {:.1}s, deleted {:.1}s; \
         deletes: {deleters:?}",
        suspended_after.as_secs_f64(),
        if bug { "reported" } else { "Suspended" },
        reported_after.as_secs_f64(),
        unstuck_after.as_secs_f64(),
        if bug { "act mode started" } else { "the preemption" },
        resumed_after.as_secs_f64(),
        succeeded_after.as_secs_f64(),
        deleted_after.as_secs_f64(),
    );
    // One successful delete, by the TTL the job carries again: the operator's (it set
    // completionTime; trainguard waits --ttl-grace, 30s, after it). v1.9.4 was seen to send a
    // second delete from a reconcile already under way (404).
    assert_eq!(deleters.iter().filter(|d| d.ends_with("(200)")).count(), 1, "{deleters:?}");
    assert!(
        deleters.iter().all(|d| !d.contains("trainguard") && (d.ends_with("(200)") || d.ends_with("(404)"))),
        "{deleters:?}"
    );
}

/// kubeflow/trainer#2239 on the release where it happened, and trainguard's remedy.
#[test]
fn kueue_preempted_tfjob_with_a_ttl_sticks_on_v1_8_0_until_trainguard_stashes_the_ttl() {
    tfjob_preempted_with_a_ttl(OPERATOR_WITH_THE_BUG);
}

/// The same story on the plane's Training Operator (v1.9.4): fixed upstream, trainguard stays out.
#[test]
fn kueue_preempted_tfjob_with_a_ttl_suspends_on_v1_9_and_trainguard_stays_out() {
    tfjob_preempted_with_a_ttl(plane().var("TRAINING_OPERATOR_VERSION"));
}
