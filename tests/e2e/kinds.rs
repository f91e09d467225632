//! Every Training Operator v1 kind trainguard claims, on the real operator (Training Operator
//! v1.9.4 with all six schemes, `plane.sh training-operator start`): one table of kinds, one story
//! run over all of them at once.

use std::time::Instant;

use serde_json::Value;

use crate::cluster::{ActMode, audit_now, audit_since, condition_true, event_reasons, eventually, plane};

const CONTROLLER_SA: &str = "system:serviceaccount:trainguard-system:trainguard-controller";

/// One Training Operator v1 kind: how a job of it is written, and which of its pods ends it.
pub(crate) struct V1Kind {
    pub(crate) kind: &'static str,
    pub(crate) plural: &'static str,
    /// The spec field holding its replica specs.
    pub(crate) specs: &'static str,
    /// The container name the operator looks for (its default container).
    pub(crate) container: &'static str,
    /// The replica whose pod's failure fails the job; MPIJob's launcher is not `<type>-0`.
    pub(crate) replica: &'static str,
    /// Replicas the job has besides `replica` (MPIJob's workers).
    pub(crate) others: &'static [&'static str],
    /// The failing replica's restart policy: `ExitCode` (a non-retryable exit code fails the job)
    /// except MPIJob's launcher, which `ExitCode` would restart.
    pub(crate) restart_policy: &'static str,
    /// Whether v1.9.4 sets `status.completionTime` when that pod fails (its own TTL can then fire).
    pub(crate) completion_time: bool,
}

pub(crate) const TFJOB: V1Kind = V1Kind {
    kind: "TFJob",
    plural: "tfjobs",
    specs: "tfReplicaSpecs",
    container: "tensorflow",
    replica: "Worker",
    others: &[],
    restart_policy: "ExitCode",
    completion_time: true,
};

pub(crate) const KINDS: [V1Kind; 6] = [
    TFJOB,
    V1Kind {
        kind: "PyTorchJob",
        plural: "pytorchjobs",
        specs: "pytorchReplicaSpecs",
        container: "pytorch",
        replica: "Master",
        others: &[],
        restart_policy: "ExitCode",
        completion_time: false,
    },
    V1Kind {
        kind: "MPIJob",
        plural: "mpijobs",
        specs: "mpiReplicaSpecs",
        container: "mpi",
        replica: "Launcher",
        others: &["Worker"],
        restart_policy: "Never",
        completion_time: true,
    },
    V1Kind {
        kind: "XGBoostJob",
        plural: "xgboostjobs",
        specs: "xgbReplicaSpecs",
        container: "xgboost",
        replica: "Master",
        others: &[],
        restart_policy: "ExitCode",
        completion_time: false,
    },
    V1Kind {
        kind: "PaddleJob",
        plural: "paddlejobs",
        specs: "paddleReplicaSpecs",
        container: "paddle",
        replica: "Master",
        others: &[],
        restart_policy: "ExitCode",
        completion_time: false,
    },
    V1Kind {
        kind: "JAXJob",
        plural: "jaxjobs",
        specs: "jaxReplicaSpecs",
        container: "jax",
        replica: "Worker",
        others: &[],
        restart_policy: "ExitCode",
        completion_time: false,
    },
];

impl V1Kind {
    /// The name of the pod the operator creates for `replica` of job `name`.
    pub(crate) fn pod(&self, name: &str, replica: &str) -> String {
        if self.kind == "MPIJob" && replica == "Launcher" {
            format!("{name}-launcher")
        } else {
            format!("{name}-{}-0", replica.to_lowercase())
        }
    }

    /// One replica spec (one pod), its pod template's `spec` extended by `pod_spec` (YAML lines
    /// indented for the pod spec).
    pub(crate) fn replica_yaml(&self, replica: &str, restart_policy: &str, metadata: &str, pod_spec: &str) -> String {
        format!(
            "    {replica}:
      replicas: 1
      restartPolicy: {restart_policy}
      template:
        metadata:{metadata}
        spec:
{pod_spec}          containers:
            - name: {container}
              image: e2e.trainguard.io/{plural}:never-pulled
",
            container = self.container,
            plural = self.plural,
        )
    }

    /// A job of this kind named `name` with `run_policy` (flow style) and the given replicas.
    pub(crate) fn job_yaml(&self, name: &str, labels: &str, run_policy: &str, replicas: &str) -> String {
        format!(
            "apiVersion: kubeflow.org/v1
kind: {kind}
metadata:
  name: {name}
  labels: {{{labels}}}
spec:
  runPolicy: {run_policy}
  {specs}:
{replicas}",
            kind = self.kind,
            specs = self.specs,
        )
    }
}

/// Training Operator v1 at `version` (default: the plane's) for one test; stopped on drop.
pub(crate) struct TrainingOperator;

impl TrainingOperator {
    pub(crate) fn start(version: Option<&str>) -> TrainingOperator {
        let mut args = vec!["training-operator", "start"];
        args.extend(version);
        plane().script(&args);
        TrainingOperator
    }
}

impl Drop for TrainingOperator {
    fn drop(&mut self) {
        plane().script(&["training-operator", "stop"]);
    }
}

fn job(ns: &str, k: &V1Kind, name: &str) -> Option<Value> {
    plane().kubectl().args(["-n", ns, "get", k.plural, name]).get_json()
}

/// A job of every v1 kind with a 20s TTL, failed through its replica's pod (kwok runs the pods;
/// a container's exit code 1 is written into the pod's status, as a kubelet would report it).
/// The operator fails each job: PyTorchJob, XGBoostJob, PaddleJob and JAXJob through its
/// `ExitCode` path, which sets no `completionTime` (the operator's own TTL cleanup then errors
/// and never deletes); TFJob and MPIJob with a `completionTime`. The operator is then stopped, as
/// when it is down or crash-looping, and trainguard's TTL backstop (act mode, no grace) deletes
/// every one of them once its TTL has run: the audit log shows each delete as trainguard's.
#[test]
fn ttl_backstop_deletes_a_finished_job_of_every_v1_kind() {
    let _operator = TrainingOperator::start(None);
    let ns = plane().namespace("e2e-kinds-ttl", &[]);
    let _act = ActMode::start(&["--ttl-grace=0s"]);
    let since = audit_now();
    let t0 = Instant::now();
    for k in &KINDS {
        let mut replicas = k.replica_yaml(k.replica, k.restart_policy, "", "");
        for other in k.others {
            replicas += &k.replica_yaml(other, "Never", "", "");
        }
        let name = k.kind.to_lowercase();
        plane().kubectl().args(["-n", &ns.name]).apply(&k.job_yaml(
            &name,
            "",
            "{ttlSecondsAfterFinished: 20}",
            &replicas,
        ));
    }
    // Every pod running first, then every one failed: the failures (and the TTLs) start together.
    for k in &KINDS {
        let pod = k.pod(&k.kind.to_lowercase(), k.replica);
        eventually(&format!("{pod} Running"), || {
            let p = plane().kubectl().args(["-n", &ns.name, "get", "pod", &pod]).get_json()?;
            (p["status"]["phase"] == "Running").then_some(())
        });
    }
    let running = t0.elapsed();
    for k in &KINDS {
        let pod = k.pod(&k.kind.to_lowercase(), k.replica);
        let status = serde_json::json!({"status": {"phase": "Failed", "containerStatuses": [{
            "name": k.container, "image": format!("e2e.trainguard.io/{}:never-pulled", k.plural), "imageID": "",
            "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}});
        plane()
            .kubectl()
            .args(["-n", &ns.name, "patch", "pod", &pod, "--subresource=status", "--type=merge", "-p"])
            .args([status.to_string()])
            .ok();
    }
    let mut completion = vec![];
    for k in &KINDS {
        let name = k.kind.to_lowercase();
        let failed = eventually(&format!("{} Failed", k.kind), || {
            let j = job(&ns.name, k, &name)?;
            condition_true(&j, "Failed").then_some(j)
        });
        completion.push((k.kind, !failed["status"]["completionTime"].is_null()));
    }
    let all_failed = t0.elapsed();
    // The operator stops before any TTL has run (20s from the failures just seen).
    plane().script(&["training-operator", "stop"]);
    let stopped = t0.elapsed();
    let expected: Vec<(&str, bool)> = KINDS.iter().map(|k| (k.kind, k.completion_time)).collect();
    assert_eq!(completion, expected, "which kinds' operators set completionTime on the failure");
    for k in &KINDS {
        assert!(job(&ns.name, k, &k.kind.to_lowercase()).is_some(), "{} deleted before its TTL", k.kind);
    }
    for k in &KINDS {
        let name = k.kind.to_lowercase();
        eventually(&format!("{} deleted by its TTL", k.kind), || job(&ns.name, k, &name).is_none().then_some(()));
    }
    let deleted = t0.elapsed();
    let audit = audit_since(&since);
    for k in &KINDS {
        let name = k.kind.to_lowercase();
        let deleters: Vec<String> = audit
            .iter()
            .filter(|e| {
                e["verb"] == "delete"
                    && e["stage"] == "ResponseComplete"
                    && e["objectRef"]["resource"] == k.plural
                    && e["objectRef"]["namespace"] == ns.name.as_str()
                    && e["objectRef"]["name"] == name.as_str()
            })
            .map(|e| format!("{} ({})", e["user"]["username"].as_str().unwrap_or(""), e["responseStatus"]["code"]))
            .collect();
        assert_eq!(deleters, [format!("{CONTROLLER_SA} (200)")], "{}: the deletes in the audit log", k.kind);
        let reasons = event_reasons(&ns.name, &name);
        assert!(reasons.iter().any(|r| r == "TTLExpiredDeleted"), "{}: {reasons:?}", k.kind);
        assert_eq!(
            reasons.iter().any(|r| r == "TTLNoFinishTime"),
            !k.completion_time,
            "{}: TTLNoFinishTime exactly when the operator set no completionTime: {reasons:?}",
            k.kind
        );
    }
    eprintln!(
        "kinds ttl: {} kinds Running {:.1}s after create, Failed at {:.1}s, operator stopped at {:.1}s, all deleted by \
         trainguard at {:.1}s (TTL 20s); completionTime set by: {:?}",
        KINDS.len(),
        running.as_secs_f64(),
        all_failed.as_secs_f64(),
        stopped.as_secs_f64(),
        deleted.as_secs_f64(),
        completion.iter().filter(|(_, c)| *c).map(|(k, _)| *k).collect::<Vec<_>>()
    );
}
