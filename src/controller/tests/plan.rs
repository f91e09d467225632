//! Planner scenarios (docs/controller.md, "How it decides" through "Node failure"), time-stepped: each case is a set of objects and the
//! exact actions the planner takes at successive instants (seconds after T0).

use crate::controller::testing as controller_support;

use std::collections::HashMap;

use crate::controller::config::{Mode, NodeFailureMode, PlanConfig};
use controller_support::*;
use k8s_openapi::jiff::SignedDuration;
use serde_json::{Value, json};
use trainguard_core::planner::facts::Str;

struct Case {
    name: &'static str,
    objects: Vec<Value>,
    config: PlanConfig,
    /// (now, expected short lines) — one planning pass each, same objects.
    steps: Vec<(i64, Vec<&'static str>)>,
}

fn case(name: &'static str, objects: Vec<Value>, steps: Vec<(i64, Vec<&'static str>)>) -> Case {
    Case { name, objects, config: PlanConfig::acting(), steps }
}

/// A case where the planner never acts, not even long after.
fn quiet(name: &'static str, objects: Vec<Value>) -> Case {
    case(name, objects, vec![(100_000, vec![])])
}

fn run(cases: Vec<Case>) {
    let mut failures = Vec::new();
    for c in &cases {
        for (now, want) in &c.steps {
            let got = plan_lines(&c.objects, *now, &c.config);
            if got != *want {
                failures.push(format!("{} @+{now}:\n  got:  {got:#?}\n  want: {want:#?}", c.name));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn cfg(f: impl FnOnce(&mut PlanConfig)) -> PlanConfig {
    let mut c = PlanConfig::acting();
    f(&mut c);
    c
}

/// The steps of a TTL due at 90: requeued until then, deleted then.
fn due_at_90(requeue: &'static str, deleted: &[&'static str]) -> Vec<(i64, Vec<&'static str>)> {
    vec![(10, vec![requeue]), (89, vec![requeue]), (90, deleted.to_vec())]
}

#[test]
fn ttl_scenarios() {
    let done = with_ttl(succeeded(pytorchjob("a"), 0), 60);
    let deleted = vec!["delete-job PyTorchJob ml/a ttl ttl-expired", "event PyTorchJob ml/a ttl TTLExpiredDeleted"];
    run(vec![
        case(
            "TTL normal: requeue at finish + ttl + grace, delete then",
            vec![done.clone()],
            [due_at_90("requeue PyTorchJob ml/a ttl ttl-expiry @+90", &deleted), vec![(100_000, deleted.clone())]]
                .concat(),
        ),
        quiet("no TTL: nothing", vec![succeeded(pytorchjob("a"), 0)]),
        case("TTL disabled with --ttl=false", vec![done.clone()], vec![]),
        case(
            "the seed bug: a preempted (suspended) job with a TTL is never deleted",
            vec![
                with_conditions(
                    suspended(with_ttl(pytorchjob("a"), 0)),
                    vec![cond("Created", "True", Some(-3600)), cond("Suspended", "True", Some(0))],
                ),
                // Even one that looks finished: suspend in spec wins.
                suspended(with_ttl(succeeded(pytorchjob("b"), 0), 0)),
            ],
            vec![(0, vec![]), (100_000, vec![])],
        ),
        case(
            "ExitCode failure without completionTime: counted from the Failed condition",
            vec![with_ttl(failed_exit_code(pytorchjob("a"), 0), 0)],
            vec![
                (10, vec!["event PyTorchJob ml/a ttl TTLNoFinishTime", "requeue PyTorchJob ml/a ttl ttl-expiry @+30"]),
                (30, deleted.clone()),
            ],
        ),
        case(
            "finished without any time: warned, never deleted",
            vec![with_ttl(
                with_conditions(pytorchjob("a"), vec![json!({"type": "Failed", "status": "True", "reason": "x"})]),
                0,
            )],
            vec![(100_000, vec!["event PyTorchJob ml/a ttl TTLNoFinishTime"])],
        ),
        case(
            "clock skew: finish time 10m ahead is warned and waited for, never clamped",
            vec![with_ttl(succeeded(pytorchjob("a"), 600), 60)],
            vec![
                (0, vec!["event PyTorchJob ml/a ttl TTLClockSkew", "requeue PyTorchJob ml/a ttl ttl-expiry @+690"]),
                (539, vec!["event PyTorchJob ml/a ttl TTLClockSkew", "requeue PyTorchJob ml/a ttl ttl-expiry @+690"]),
                // Within the 60s tolerance: no longer skew.
                (540, vec!["requeue PyTorchJob ml/a ttl ttl-expiry @+690"]),
                (690, deleted.clone()),
            ],
        ),
        quiet(
            "MultiKueue-managed job: untouched",
            vec![set(done.clone(), "/spec/runPolicy/managedBy", json!("kueue.x-k8s.io/multikueue"))],
        ),
        case(
            "the operator's own managedBy value is ours",
            vec![set(done.clone(), "/spec/runPolicy/managedBy", json!("kubeflow.org/training-operator"))],
            vec![(90, deleted.clone())],
        ),
        quiet("opted-out job: untouched", vec![label(done.clone(), "trainguard.io/ignore", "true")]),
        case(
            "ignore label other than \"true\" does not opt out",
            vec![label(done.clone(), "trainguard.io/ignore", "false")],
            vec![(90, deleted.clone())],
        ),
        quiet("job being deleted: nothing", vec![set(done.clone(), "/metadata/deletionTimestamp", json!(ts(50)))]),
        case(
            "Workload Finished: TTL still runs",
            vec![done.clone(), workload(&done, vec![cond("Finished", "True", Some(0))])],
            vec![(90, deleted.clone())],
        ),
    ]
    .into_iter()
    .map(|mut c| {
        if c.name.starts_with("TTL disabled") {
            c.config = cfg(|c| c.ttl = false);
            c.steps = vec![(100_000, vec![])];
        }
        c
    })
    .collect());
}

#[test]
fn ttl_resumed_before_expiry_and_edited() {
    // Time-stepped over changing objects: finished at 0 with ttl 60 …
    let job = with_ttl(succeeded(pytorchjob("a"), 0), 60);
    let c = PlanConfig::acting();
    assert_eq!(plan_lines(std::slice::from_ref(&job), 30, &c), ["requeue PyTorchJob ml/a ttl ttl-expiry @+90"]);
    // … suspended by Kueue at 60: no deletion at expiry …
    let job = suspended(job);
    assert_eq!(plan_lines(std::slice::from_ref(&job), 90, &c), Vec::<String>::new());
    // … resumed and running again: no longer finished, no deletion ever.
    let job = with_conditions(
        set(job, "/spec/runPolicy/suspend", json!(false)),
        vec![cond("Created", "True", Some(-3600)), cond("Running", "True", Some(100))],
    );
    assert_eq!(plan_lines(&[set(job, "/status/completionTime", Value::Null)], 200, &c), Vec::<String>::new());

    // TTL edited: 3600 → requeue far; edited to 60 → expired now.
    let long = with_ttl(succeeded(pytorchjob("b"), 0), 3600);
    assert_eq!(plan_lines(std::slice::from_ref(&long), 100, &c), ["requeue PyTorchJob ml/b ttl ttl-expiry @+3630"]);
    assert_eq!(
        plan_lines(&[with_ttl(long, 60)], 100, &c),
        ["delete-job PyTorchJob ml/b ttl ttl-expired", "event PyTorchJob ml/b ttl TTLExpiredDeleted"]
    );
}

#[test]
fn suspend_scenarios() {
    // Suspended by Kueue, operator stalled: no Suspended condition, pods still running.
    let stuck = suspended(with_ttl(pytorchjob("a"), 600));
    let pod = v1_pod(&stuck, "a-master-0", "n1");
    let evicted = workload(&stuck, vec![cond("Evicted", "True", Some(0)), cond("QuotaReserved", "False", Some(0))]);
    let reconciled = with_conditions(
        suspended(with_ttl(pytorchjob("b"), 600)),
        vec![cond("Created", "True", Some(-3600)), cond("Suspended", "True", Some(0))],
    );
    run(vec![
        case(
            "stuck since the Workload's eviction: requeue at the bound, then alarm",
            vec![stuck.clone(), pod.clone(), evicted.clone(), node("n1", None)],
            vec![
                (119, vec!["requeue PyTorchJob ml/a suspend suspend-stuck-after @+120"]),
                (120, vec!["event PyTorchJob ml/a suspend SuspendNotReconciled"]),
            ],
        ),
        quiet(
            "without Workload or Suspended condition `plan` has no 'first seen': no alarm yet",
            vec![stuck.clone(), pod.clone()],
        ),
        quiet(
            "Suspended=True, no active replicas, no pods: reconciled, nothing",
            vec![reconciled.clone(), workload(&reconciled, vec![cond("Evicted", "True", Some(0))])],
        ),
        case(
            "Suspended=True but replicas still active: stuck since the condition",
            vec![set(reconciled.clone(), "/status/replicaStatuses", json!({"Master": {"active": 1}}))],
            vec![(120, vec!["event PyTorchJob ml/b suspend SuspendNotReconciled"])],
        ),
        quiet(
            "Suspended=True, a pod already terminating: not stuck (it is going away)",
            vec![reconciled.clone(), deleting(v1_pod(&reconciled, "b-master-0", "n1"), 0), node("n1", None)],
        ),
        quiet(
            "Workload Finished: no suspend alarm",
            vec![
                stuck.clone(),
                pod.clone(),
                workload(&stuck, vec![cond("Evicted", "True", Some(0)), cond("Finished", "True", Some(0))]),
            ],
        ),
        quiet(
            "Workload Evicted while suspend is still false: no alarm yet",
            vec![with_ttl(pytorchjob("c"), 600), workload(&pytorchjob("c"), vec![cond("Evicted", "True", Some(0))])],
        ),
        quiet(
            "finished job that is suspended: only TTL rules (none here), no alarm",
            vec![
                suspended(succeeded(pytorchjob("d"), -10)),
                workload(&pytorchjob("d"), vec![cond("Evicted", "True", Some(0))]),
            ],
        ),
        quiet(
            "MultiKueue job: no alarm",
            vec![set(stuck.clone(), "/spec/runPolicy/managedBy", json!("kueue.x-k8s.io/multikueue")), evicted.clone()],
        ),
        quiet("opted out: no alarm", vec![label(stuck.clone(), "trainguard.io/ignore", "true"), evicted.clone()]),
    ]);
}

#[test]
fn suspend_message_names_the_pre_v1_8_1_stall_when_the_job_has_a_ttl() {
    let stuck = suspended(with_ttl(pytorchjob("a"), 600));
    let objects = [stuck.clone(), workload(&stuck, vec![cond("Evicted", "True", Some(0))])];
    let lines = plan_json(&objects, 300, &PlanConfig::acting(), &HashMap::new());
    let message = lines[0]["message"].as_str().unwrap();
    assert!(message.contains("no Suspended=True condition"), "{message}");
    assert!(message.contains("before v1.8.1"), "{message}");
    assert_eq!(lines[0]["type"], "Warning");

    let no_ttl = suspended(pytorchjob("b"));
    let objects = [no_ttl.clone(), workload(&no_ttl, vec![cond("Evicted", "True", Some(0))])];
    let lines = plan_json(&objects, 300, &PlanConfig::acting(), &HashMap::new());
    assert!(!lines[0]["message"].as_str().unwrap().contains("v1.8.1"));
}

#[test]
fn suspend_first_seen_memory_is_the_fallback() {
    let stuck = suspended(pytorchjob("a"));
    let first_seen: HashMap<Str, _> = [(Str::from("uid-a"), at(1000))].into();
    let c = PlanConfig::acting();
    assert_eq!(
        plan_lines_with(std::slice::from_ref(&stuck), 1100, &c, &first_seen),
        ["requeue PyTorchJob ml/a suspend suspend-stuck-after @+1120"]
    );
    assert_eq!(
        plan_lines_with(&[stuck], 1120, &c, &first_seen),
        ["event PyTorchJob ml/a suspend SuspendNotReconciled"]
    );
}

#[test]
fn stash_patch_shape_and_restore_on_resume() {
    let stuck = suspended(with_ttl(pytorchjob("a"), 3600));
    let objects = [stuck.clone(), workload(&stuck, vec![cond("Evicted", "True", Some(0))])];
    let stash = cfg(|c| c.stash_ttl_on_stuck_suspend = true);
    let lines = plan_json(&objects, 120, &stash, &HashMap::new());
    let short_lines: Vec<String> = lines.iter().map(short).collect();
    assert_eq!(
        short_lines,
        [
            "event PyTorchJob ml/a suspend SuspendNotReconciled",
            "patch-job PyTorchJob ml/a suspend stash-ttl",
            "event PyTorchJob ml/a suspend TTLStashedWhileSuspended",
        ]
    );
    assert_eq!(
        lines[1]["patch"],
        json!({
            "metadata": {"resourceVersion": "100",
                         "annotations": {"trainguard.io/stashed-ttl-seconds-after-finished": "3600"}},
            "spec": {"runPolicy": {"ttlSecondsAfterFinished": null}}
        })
    );
    // No TTL in spec: nothing to stash, only the alarm.
    let no_ttl = suspended(pytorchjob("b"));
    assert_eq!(
        plan_lines(&[no_ttl.clone(), workload(&no_ttl, vec![cond("Evicted", "True", Some(0))])], 120, &stash),
        ["event PyTorchJob ml/b suspend SuspendNotReconciled"]
    );

    // After the stash (spec TTL null, annotation set) and a resume: moved back, flag on or off.
    let stashed = set(
        set(
            pytorchjob("a"),
            "/metadata/annotations",
            json!({"trainguard.io/stashed-ttl-seconds-after-finished": "3600"}),
        ),
        "/spec/runPolicy/suspend",
        json!(false),
    );
    for config in [stash.clone(), PlanConfig::acting()] {
        let lines = plan_json(std::slice::from_ref(&stashed), 500, &config, &HashMap::new());
        assert_eq!(
            lines.iter().map(short).collect::<Vec<_>>(),
            ["patch-job PyTorchJob ml/a suspend restore-ttl", "event PyTorchJob ml/a suspend TTLRestored"]
        );
        assert_eq!(
            lines[0]["patch"],
            json!({
                "metadata": {"resourceVersion": "100",
                             "annotations": {"trainguard.io/stashed-ttl-seconds-after-finished": null}},
                "spec": {"runPolicy": {"ttlSecondsAfterFinished": 3600}}
            })
        );
    }
    // Still suspended: the annotation stays (a suspended job is never finished; no TTL is due).
    assert_eq!(plan_lines(&[suspended(stashed.clone())], 500, &stash), Vec::<String>::new());
    // The user set a TTL again meanwhile: theirs wins, only the annotation goes.
    let lines = plan_json(&[with_ttl(stashed.clone(), 5)], 500, &stash, &HashMap::new());
    assert_eq!(lines[0]["patch"]["spec"], Value::Null);
    assert_eq!(
        lines[0]["patch"]["metadata"]["annotations"]["trainguard.io/stashed-ttl-seconds-after-finished"],
        Value::Null
    );
    // A value that is not a TTL is reported and left alone.
    let bad = set(
        stashed.clone(),
        "/metadata/annotations",
        json!({"trainguard.io/stashed-ttl-seconds-after-finished": "soon"}),
    );
    assert_eq!(plan_lines(&[bad], 500, &stash), ["event PyTorchJob ml/a suspend TTLRestoreFailed"]);
    // Finished after the resume: restore first; the TTL applies once it is back in spec.
    let finished = set(
        succeeded(stashed, 400),
        "/metadata/annotations",
        json!({"trainguard.io/stashed-ttl-seconds-after-finished": "0"}),
    );
    assert_eq!(
        plan_lines(&[finished], 500, &stash),
        ["patch-job PyTorchJob ml/a suspend restore-ttl", "event PyTorchJob ml/a suspend TTLRestored"]
    );
}

/// TrainJob t, suspended and Suspended=True since 0.
fn suspended_trainjob() -> Value {
    let tj = set(trainjob("t"), "/spec/suspend", json!(true));
    set(tj, "/status/conditions", json!([cond("Suspended", "True", Some(0))]))
}

#[test]
fn trainjob_suspend_report() {
    let tj = suspended_trainjob();
    run(vec![
        case(
            "TrainJob suspended while its JobSet still reports active jobs",
            vec![tj.clone(), jobset_of(&tj, 2)],
            vec![
                (60, vec!["requeue TrainJob ml/t suspend suspend-stuck-after @+120"]),
                (120, vec!["event TrainJob ml/t suspend SuspendNotReconciled"]),
            ],
        ),
        case(
            "TrainJob suspended with a JobSet pod not yet deleting",
            vec![tj.clone(), jobset_of(&tj, 0), jobset_pod("t", "t-node-0-0-abc", "n1")],
            vec![(120, vec!["event TrainJob ml/t suspend SuspendNotReconciled"])],
        ),
        quiet(
            "TrainJob suspended, nothing active: fine",
            vec![tj.clone(), jobset_of(&tj, 0), deleting(jobset_pod("t", "t-node-0-0-abc", "n1"), 0), node("n1", None)],
        ),
        quiet(
            "MultiKueue TrainJob: untouched",
            vec![set(tj.clone(), "/spec/managedBy", json!("kueue.x-k8s.io/multikueue")), jobset_of(&tj, 2)],
        ),
    ]);
}

/// A job with one pod deleted by the taint manager at 300 on node n1, which became unreachable at 0.
/// What the planner does with the pod of `failed_node_world` once its force delete is due.
const A_FORCE_DELETED: [&str; 4] = [
    "patch-pod-status Pod ml/a-master-0 node-failure mark-failed-before-force-delete",
    "force-delete-pod Pod ml/a-master-0 node-failure node-unreachable",
    "event Pod ml/a-master-0 node-failure ForceDeletedStuckPod",
    "event PyTorchJob ml/a node-failure ForceDeletedStuckPod",
];

fn failed_node_world() -> (Value, Value, Value) {
    let job = pytorchjob("a");
    let pod = deleting(v1_pod(&job, "a-master-0", "n1"), 300);
    (job, pod, unreachable(node("n1", None), 0))
}

#[test]
fn node_failure_scenarios() {
    let (job, pod, dead) = failed_node_world();
    let healthy = || (1..=4).map(|i| node(&format!("h{i}"), None)).collect::<Vec<_>>();
    let world = |extra: Vec<Value>| {
        let mut v = vec![job.clone(), pod.clone()];
        v.extend(healthy());
        v.extend(extra);
        v
    };
    let acts = A_FORCE_DELETED.to_vec();
    run(vec![
        case(
            "NotReady past the bound: status patch, then grace-0 delete",
            world(vec![dead.clone()]),
            vec![
                (100, vec!["requeue Pod ml/a-master-0 node-failure force-delete-after @+420"]),
                (419, vec!["requeue Pod ml/a-master-0 node-failure force-delete-after @+420"]),
                (420, acts.clone()),
            ],
        ),
        case(
            "node NotReady recently: wait for --node-not-ready-for",
            world(vec![unreachable(node("n1", None), 400)]),
            vec![
                (410, vec!["requeue Pod ml/a-master-0 node-failure force-delete-after @+420"]),
                (
                    650,
                    vec![
                        "event Pod ml/a-master-0 node-failure PodStuckTerminating",
                        "requeue Pod ml/a-master-0 node-failure force-delete-after @+700",
                    ],
                ),
                (700, acts.clone()),
            ],
        ),
        case("node Ready again: nothing", world(vec![node("n1", None)]), vec![(420, vec![]), (100_000, vec![])]),
        case(
            "NotReady without the NoExecute taint: reported, never acted on",
            world(vec![set(unreachable(node("n1", None), 0), "/spec/taints", json!([]))]),
            vec![(100_000, vec!["event Pod ml/a-master-0 node-failure PodStuckTerminating"])],
        ),
        case(
            "out-of-service taint on a NotReady node: acts without waiting for the NotReady bound",
            world(vec![add_taint(
                set(unreachable(node("n1", None), 350), "/spec/taints", json!([])),
                "node.kubernetes.io/out-of-service",
                "NoExecute",
            )]),
            vec![(420, acts.iter().map(|s| s.replace("node-unreachable", "node-out-of-service")).map(leak).collect())],
        ),
        quiet(
            "out-of-service taint on a Ready node: nothing (PodGC's rule too)",
            world(vec![add_taint(node("n1", None), "node.kubernetes.io/out-of-service", "NoExecute")]),
        ),
        case(
            "node missing from the node list: acts",
            world(vec![]),
            vec![(420, acts.iter().map(|s| s.replace("node-unreachable", "node-missing")).map(leak).collect())],
        ),
        quiet("no node list at all: nothing decided", vec![job.clone(), pod.clone()]),
        quiet(
            "pod not deleting: nothing",
            world(vec![dead.clone()])
                .into_iter()
                .map(|o| if o["kind"] == "Pod" { v1_pod(&job, "a-master-0", "n1") } else { o })
                .collect(),
        ),
        quiet(
            "pod of an opted-out job: nothing",
            world(vec![dead.clone()])
                .into_iter()
                .map(|o| if o["kind"] == "PyTorchJob" { label(o, "trainguard.io/ignore", "true") } else { o })
                .collect(),
        ),
        quiet(
            "pod of a MultiKueue job: nothing",
            world(vec![dead.clone()])
                .into_iter()
                .map(|o| {
                    if o["kind"] == "PyTorchJob" {
                        set(o, "/spec/runPolicy/managedBy", json!("kueue.x-k8s.io/multikueue"))
                    } else {
                        o
                    }
                })
                .collect(),
        ),
        quiet(
            "pod whose job is unknown (owner UID differs): nothing",
            world(vec![dead.clone()])
                .into_iter()
                .map(|o| if o["kind"] == "PyTorchJob" { set(o, "/metadata/uid", json!("other")) } else { o })
                .collect(),
        ),
        case(
            "already Failed with DisruptionTarget (taint manager's): no status patch, straight to delete",
            vec![
                job.clone(),
                dead.clone(),
                set(
                    pod.clone(),
                    "/status",
                    json!({"phase": "Failed", "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}]}),
                ),
            ],
            vec![(420, acts[1..].to_vec())],
        ),
    ]);
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

#[test]
fn node_failure_status_patch_shape() {
    let (job, pod, dead) = failed_node_world();
    let lines =
        plan_json(&[job, pod, dead, node("h1", None), node("h2", None)], 420, &PlanConfig::acting(), &HashMap::new());
    assert_eq!(
        lines[0]["patch"],
        json!({
            "metadata": {"uid": "uid-a-master-0"},
            "status": {"phase": "Failed", "conditions": [{
                "type": "DisruptionTarget", "status": "True", "reason": "DeletionByTrainguard",
                "message": "trainguard: node n1 is unreachable; force-deleting the stuck pod",
                "lastTransitionTime": ts(420),
            }]}
        })
    );
    assert_eq!(lines[1]["gracePeriodSeconds"], 0);
    assert_eq!(lines[1]["node"], "n1");
    assert_eq!(lines[1]["job"], "PyTorchJob/ml/a");
    assert_eq!(lines[2]["related"], "PyTorchJob/ml/a");
    assert_eq!(lines[3]["related"], "Pod/ml/a-master-0");
}

#[test]
fn node_failure_modes() {
    let (job, pod, dead) = failed_node_world();
    let oos = add_taint(dead.clone(), "node.kubernetes.io/out-of-service", "NoExecute");
    let objects = |n: &Value| vec![job.clone(), pod.clone(), n.clone(), node("h1", None), node("h2", None)];
    let only_oos = cfg(|c| c.node_failure = NodeFailureMode::OutOfService);
    let off = cfg(|c| c.node_failure = NodeFailureMode::Off);
    assert_eq!(
        plan_lines(&objects(&dead), 10_000, &only_oos),
        ["event Pod ml/a-master-0 node-failure PodStuckTerminating"]
    );
    assert_eq!(
        plan_lines(&objects(&oos), 420, &only_oos)[1],
        "force-delete-pod Pod ml/a-master-0 node-failure node-out-of-service"
    );
    assert_eq!(plan_lines(&objects(&oos), 10_000, &off), ["event Pod ml/a-master-0 node-failure PodStuckTerminating"]);
}

#[test]
fn zone_brake_and_small_zone_floor() {
    let job = pytorchjob("a");
    let pod = deleting(v1_pod(&job, "a-master-0", "a1"), 300);
    let down = |name: &str, zone: &str| unreachable(node(name, Some(zone)), 0);
    let up = |name: &str, zone: &str| node(name, Some(zone));
    let verdict = |nodes: Vec<Value>| {
        let mut objects = vec![job.clone(), pod.clone()];
        objects.extend(nodes);
        plan_lines(&objects, 420, &PlanConfig::acting())
            .into_iter()
            .find(|l| l.contains("ForceDeleteSuppressed") || l.contains("force-delete-pod"))
            .unwrap_or_default()
    };
    let braked = "event Pod ml/a-master-0 node-failure ForceDeleteSuppressed";
    let acted = "force-delete-pod Pod ml/a-master-0 node-failure node-unreachable";
    let cases: Vec<(&str, Vec<Value>, &str)> = vec![
        (
            "3 of 3 down in zone a: brake",
            vec![down("a1", "a"), down("a2", "a"), down("a3", "a"), up("b1", "b"), up("b2", "b")],
            braked,
        ),
        ("2 of 2 down in zone a: small-zone floor, acts", vec![down("a1", "a"), down("a2", "a"), up("b1", "b")], acted),
        (
            "3 of 6 down in zone a (0.5 < 0.55): acts",
            vec![down("a1", "a"), down("a2", "a"), down("a3", "a"), up("a4", "a"), up("a5", "a"), up("a6", "a")],
            acted,
        ),
        (
            "4 of 6 down in zone a (0.67): brake",
            vec![down("a1", "a"), down("a2", "a"), down("a3", "a"), down("a4", "a"), up("a5", "a"), up("a6", "a")],
            braked,
        ),
        (
            "other zone's outage does not brake zone a (cluster 4 of 9)",
            vec![
                down("a1", "a"),
                up("a2", "a"),
                up("a3", "a"),
                down("b1", "b"),
                down("b2", "b"),
                down("b3", "b"),
                up("c1", "c"),
                up("c2", "c"),
                up("c3", "c"),
            ],
            acted,
        ),
        (
            "staggered outage: nodes NotReady for 20s already count (3 of 4)",
            vec![down("a1", "a"), unreachable(up("a2", "a"), 400), unreachable(up("a3", "a"), 400), up("a4", "a")],
            braked,
        ),
        (
            "NotReady without the taint yet counts too (Ready is not True)",
            vec![
                down("a1", "a"),
                set(unreachable(up("a2", "a"), 400), "/spec/taints", json!([])),
                set(unreachable(up("a3", "a"), 400), "/spec/taints", json!([])),
                up("a4", "a"),
            ],
            braked,
        ),
        (
            "nodes whose kubelet still reports (Ready=False) count too, whatever --node-failure trusts",
            vec![down("a1", "a"), not_ready(up("a2", "a"), 0), not_ready(up("a3", "a"), 0), up("a4", "a")],
            braked,
        ),
        (
            "cluster brake: spread over small zones none of which trips (5 of 6)",
            vec![down("a1", "a"), up("a2", "a"), down("b1", "b"), down("b2", "b"), down("c1", "c"), down("c2", "c")],
            braked,
        ),
        (
            "cluster floor: 2 down in all, whatever the fraction",
            vec![down("a1", "a"), down("b1", "b"), up("c1", "c")],
            acted,
        ),
    ];
    for (name, nodes, want) in cases {
        assert_eq!(verdict(nodes), want, "{name}");
    }
    // No zone labels: the cluster is the domain.
    let pod = deleting(v1_pod(&job, "a-master-0", "n1"), 300);
    let unzoned = |down_count: usize, total: usize| {
        let mut objects = vec![job.clone(), pod.clone()];
        for i in 1..=total {
            let n = node(&format!("n{i}"), None);
            objects.push(if i <= down_count { unreachable(n, 0) } else { n });
        }
        plan_lines(&objects, 420, &PlanConfig::acting()).join("|")
    };
    assert!(unzoned(3, 4).contains("ForceDeleteSuppressed"));
    assert!(unzoned(2, 5).contains("force-delete-pod"));
}

#[test]
fn rate_limit_serves_oldest_first_and_requeues_at_the_next_token() {
    let job = pytorchjob("a");
    let mut objects = vec![job.clone(), unreachable(node("n1", None), 0)];
    objects.extend((0..4).map(|i| node(&format!("h{i}"), None)));
    for (i, deleted_at) in [(0, 300), (1, 290), (2, 310)] {
        objects.push(deleting(v1_pod(&job, &format!("a-worker-{i}"), "n1"), deleted_at));
    }
    let config = cfg(|c| c.max_force_deletes_per_minute = 2);
    let lines = plan_lines(&objects, 1000, &config);
    let deletes: Vec<&String> = lines.iter().filter(|l| l.starts_with("force-delete-pod")).collect();
    assert_eq!(deletes.len(), 2, "{lines:#?}");
    assert!(deletes[0].contains("a-worker-1") && deletes[1].contains("a-worker-0"), "{lines:#?}");
    let tail: Vec<&String> = lines.iter().filter(|l| l.contains("a-worker-2")).collect();
    assert_eq!(
        tail,
        [
            "event Pod ml/a-worker-2 node-failure ForceDeleteSuppressed",
            "requeue Pod ml/a-worker-2 node-failure rate-limit @+1030"
        ]
    );
}

#[test]
fn finalizers_after_the_force_delete() {
    let tj = trainjob("t");
    let ours = |finalizers: Value| {
        let pod = deleting(jobset_pod("t", "t-node-0-0-x", "n1"), 300);
        let pod = set(pod, "/metadata/deletionGracePeriodSeconds", json!(0));
        let pod = set(pod, "/metadata/finalizers", finalizers);
        set(
            pod,
            "/status",
            json!({"phase": "Failed", "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTrainguard"}]}),
        )
    };
    let world = |pod: Value| {
        let mut objects = trainjob_chain(&tj, 0);
        objects.extend([pod, unreachable(node("n1", None), 0), node("h1", None)]);
        objects
    };
    let c = PlanConfig::acting();
    // The Job controller's job-tracking finalizer is expected: wait, never warn.
    assert_eq!(plan_lines(&world(ours(json!(["batch.kubernetes.io/job-tracking"]))), 10_000, &c), Vec::<String>::new());
    // Any other finalizer is reported; trainguard never strips it.
    assert_eq!(
        plan_lines(&world(ours(json!(["batch.kubernetes.io/job-tracking", "example.com/keep"]))), 10_000, &c),
        ["event Pod ml/t-node-0-0-x node-failure PodBlockedByFinalizers"]
    );
}

#[test]
fn trainjob_pods_handled_and_unrelated_jobset_pods_ignored() {
    let tj = trainjob("t");
    let dead = unreachable(node("n1", None), 0);
    let ours = deleting(jobset_pod("t", "t-node-0-0-x", "n1"), 300);
    let theirs = deleting(jobset_pod("other", "other-w-0-0-y", "n1"), 300);
    let unrelated_jobset = json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "other", "namespace": "ml", "uid": "js-other"}});
    let objects = vec![
        tj.clone(),
        jobset_of(&tj, 0),
        jobset_job("t"),
        unrelated_jobset,
        jobset_job("other"),
        ours,
        theirs,
        dead,
        node("h1", None),
        node("h2", None),
    ];
    let lines = plan_lines(&objects, 420, &PlanConfig::acting());
    assert_eq!(
        lines,
        [
            "patch-pod-status Pod ml/t-node-0-0-x node-failure mark-failed-before-force-delete",
            "force-delete-pod Pod ml/t-node-0-0-x node-failure node-unreachable",
            "event Pod ml/t-node-0-0-x node-failure ForceDeletedStuckPod",
            "event TrainJob ml/t node-failure ForceDeletedStuckPod",
        ]
    );
    // A MultiKueue TrainJob's pods are not ours either.
    let mut objects = objects;
    objects[0] = set(tj, "/spec/managedBy", json!("kueue.x-k8s.io/multikueue"));
    assert_eq!(plan_lines(&objects, 420, &PlanConfig::acting()), Vec::<String>::new());
}

#[test]
fn report_mode_prefixes_write_events_with_would() {
    let report = cfg(|c| c.mode = Mode::Report);
    let done = with_ttl(succeeded(pytorchjob("a"), 0), 60);
    let lines = plan_json(std::slice::from_ref(&done), 90, &report, &HashMap::new());
    assert_eq!(lines[1]["reason"], "WouldTTLExpiredDeleted");
    assert!(lines[1]["message"].as_str().unwrap().starts_with("Would be deleted"));
    let (job, pod, dead) = failed_node_world();
    let lines = plan_json(&[job, pod, dead, node("h1", None)], 420, &report, &HashMap::new());
    assert_eq!(lines[2]["reason"], "WouldForceDeletedStuckPod");
    // Events that stand for no write keep their reason.
    let lines = plan_json(&[with_ttl(succeeded(pytorchjob("b"), 600), 60)], 0, &report, &HashMap::new());
    assert_eq!(lines[0]["reason"], "TTLClockSkew");
}

/// Sets `field` of the object's first ownerReference.
fn owner_ref(mut object: Value, field: &str, value: Value) -> Value {
    object["metadata"]["ownerReferences"][0][field] = value;
    object
}

#[test]
fn only_pods_proven_ours_by_the_owner_reference_chain() {
    let tj = trainjob("t");
    let pod = || deleting(jobset_pod("t", "t-node-0-0-x", "n1"), 300);
    let batch_job = || jobset_job("t");
    let rest = || vec![unreachable(node("n1", None), 0), node("h1", None), node("h2", None)];
    let acts = "force-delete-pod Pod ml/t-node-0-0-x node-failure node-unreachable";
    // (name, objects, force-deleted?)
    let cases: Vec<(&str, Vec<Value>, bool)> = vec![
        (
            "full chain: Pod → batch Job → JobSet → TrainJob",
            vec![tj.clone(), jobset_of(&tj, 0), batch_job(), pod()],
            true,
        ),
        (
            "labels copied onto a debug pod, no ownerReference",
            vec![tj.clone(), jobset_of(&tj, 0), batch_job(), set(pod(), "/metadata/ownerReferences", json!([]))],
            false,
        ),
        (
            "ownerReference to the Job, but not as controller",
            vec![tj.clone(), jobset_of(&tj, 0), batch_job(), owner_ref(pod(), "controller", json!(false))],
            false,
        ),
        (
            "controller ownerReference to a Job of another UID (a recreated Job)",
            vec![tj.clone(), jobset_of(&tj, 0), batch_job(), owner_ref(pod(), "uid", json!("job-old"))],
            false,
        ),
        (
            "the batch Job is not in the snapshot: not proven, not touched",
            vec![tj.clone(), jobset_of(&tj, 0), pod()],
            false,
        ),
        (
            "the batch Job is controlled by another JobSet than the pod's label says",
            vec![tj.clone(), jobset_of(&tj, 0), owner_ref(batch_job(), "name", json!("other")), pod()],
            false,
        ),
        (
            "the batch Job points at a JobSet of another UID",
            vec![tj.clone(), jobset_of(&tj, 0), owner_ref(batch_job(), "uid", json!("js-old")), pod()],
            false,
        ),
        ("the JobSet is not in the snapshot", vec![tj.clone(), batch_job(), pod()], false),
        (
            "the JobSet is controlled by no TrainJob",
            vec![tj.clone(), set(jobset_of(&tj, 0), "/metadata/ownerReferences", json!([])), batch_job(), pod()],
            false,
        ),
        ("the TrainJob is not in the snapshot", vec![jobset_of(&tj, 0), batch_job(), pod()], false),
        (
            "the TrainJob is managed by MultiKueue",
            vec![
                set(tj.clone(), "/spec/managedBy", json!("kueue.x-k8s.io/multikueue")),
                jobset_of(&tj, 0),
                batch_job(),
                pod(),
            ],
            false,
        ),
        (
            "the TrainJob opted out",
            vec![label(tj.clone(), "trainguard.io/ignore", "true"), jobset_of(&tj, 0), batch_job(), pod()],
            false,
        ),
    ];
    for (name, mut objects, want) in cases {
        objects.extend(rest());
        let lines = plan_lines(&objects, 420, &PlanConfig::acting());
        assert_eq!(lines.iter().any(|l| l == acts), want, "{name}: {lines:#?}");
        if !want {
            assert!(!lines.iter().any(|l| l.contains("t-node-0-0-x")), "{name}: not even an event: {lines:#?}");
        }
    }
}

#[test]
fn trainjob_suspend_counts_only_running_pods() {
    let tj = suspended_trainjob();
    let phase = |name: &str, phase: &str| set(jobset_pod("t", name, "n1"), "/status/phase", json!(phase));
    let alarm = vec!["event TrainJob ml/t suspend SuspendNotReconciled"];
    let world = |pods: Vec<Value>| {
        let mut objects = trainjob_chain(&tj, 0);
        objects.extend(pods);
        objects.push(node("n1", None));
        objects
    };
    run(vec![
        case(
            "a finished dataset initializer and a failed pod the Job keeps: no alarm",
            world(vec![phase("t-dataset-initializer-0-0-a", "Succeeded"), phase("t-node-0-0-b", "Failed")]),
            vec![(120, vec![]), (100_000, vec![])],
        ),
        case(
            "a pod still running: alarm after the bound",
            world(vec![phase("t-dataset-initializer-0-0-a", "Succeeded"), phase("t-node-0-0-b", "Running")]),
            vec![(60, vec!["requeue TrainJob ml/t suspend suspend-stuck-after @+120"]), (120, alarm.clone())],
        ),
        case("a pending pod counts too", world(vec![phase("t-node-0-0-b", "Pending")]), vec![(120, alarm.clone())]),
        quiet(
            "a running pod that only copied the labels does not count",
            world(vec![set(phase("t-debug", "Running"), "/metadata/ownerReferences", json!([]))]),
        ),
    ]);
}

#[test]
fn finalizer_warning_is_predicted_with_the_force_delete() {
    let (job, pod, dead) = failed_node_world();
    let held = set(pod, "/metadata/finalizers", json!(["example.com/keep-logs"]));
    let lines = plan_lines(&[job, held, dead, node("h1", None)], 420, &PlanConfig::acting());
    assert_eq!(
        lines,
        [
            "patch-pod-status Pod ml/a-master-0 node-failure mark-failed-before-force-delete",
            "force-delete-pod Pod ml/a-master-0 node-failure node-unreachable",
            "event Pod ml/a-master-0 node-failure ForceDeletedStuckPod",
            "event PyTorchJob ml/a node-failure ForceDeletedStuckPod",
            "event Pod ml/a-master-0 node-failure PodBlockedByFinalizers",
        ]
    );
    // The Job controller's own finalizer is expected: no warning.
    let (job, pod, dead) = failed_node_world();
    let tracked = set(pod, "/metadata/finalizers", json!(["batch.kubernetes.io/job-tracking"]));
    let lines = plan_lines(&[job, tracked, dead, node("h1", None)], 420, &PlanConfig::acting());
    assert!(!lines.iter().any(|l| l.contains("PodBlockedByFinalizers")), "{lines:#?}");
}

#[test]
fn terminal_phases_stay() {
    let (job, pod, dead) = failed_node_world();
    let disrupted = json!([{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}]);
    // (phase, DisruptionTarget already there, the status the patch sets: None = no patch)
    let cases: Vec<(&str, bool, Option<Value>)> = vec![
        ("Running", false, Some(json!({"phase": "Failed", "conditions": [{"type": "DisruptionTarget"}]}))),
        ("Running", true, Some(json!({"phase": "Failed"}))),
        ("Pending", false, Some(json!({"phase": "Failed", "conditions": [{"type": "DisruptionTarget"}]}))),
        ("Succeeded", false, Some(json!({"conditions": [{"type": "DisruptionTarget"}]}))),
        ("Succeeded", true, None),
        ("Failed", false, Some(json!({"conditions": [{"type": "DisruptionTarget"}]}))),
        ("Failed", true, None),
    ];
    for (phase, has_condition, want) in cases {
        let mut status = json!({"phase": phase});
        if has_condition {
            status["conditions"] = disrupted.clone();
        }
        let objects = [job.clone(), set(pod.clone(), "/status", status), dead.clone(), node("h1", None)];
        let lines = plan_json(&objects, 420, &PlanConfig::acting(), &HashMap::new());
        let patch = lines.iter().find(|l| l["action"] == "patch-pod-status").map(|l| l["patch"]["status"].clone());
        assert!(lines.iter().any(|l| l["action"] == "force-delete-pod"), "{phase}/{has_condition}: {lines:#?}");
        match (patch, want) {
            (None, None) => {}
            (Some(got), Some(want)) => {
                assert_eq!(got.get("phase"), want.get("phase"), "{phase}/{has_condition}: {got}");
                assert_eq!(
                    got.get("conditions").map(|c| c[0]["type"].clone()),
                    want.get("conditions").map(|c| c[0]["type"].clone()),
                    "{phase}/{has_condition}: {got}"
                );
            }
            (got, want) => panic!("{phase}/{has_condition}: patch {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn node_failure_values() {
    let job = pytorchjob("a");
    let pod = deleting(v1_pod(&job, "a-master-0", "n1"), 300);
    let healthy: Vec<Value> = (1..=4).map(|i| node(&format!("h{i}"), None)).collect();
    let absent_ready = set(unreachable(node("n1", None), 0), "/status/conditions", json!([]));
    let nodes: Vec<(&str, Option<Value>)> = vec![
        ("unreachable", Some(unreachable(node("n1", None), 0))),
        ("Ready absent + unreachable taint", Some(absent_ready)),
        ("not-ready", Some(not_ready(node("n1", None), 0))),
        (
            "out-of-service",
            Some(add_taint(
                set(not_ready(node("n1", None), 0), "/spec/taints", json!([])),
                "node.kubernetes.io/out-of-service",
                "NoExecute",
            )),
        ),
        ("missing", None),
    ];
    use NodeFailureMode::*;
    // Which node kinds each value acts on (at +10000, long past every bound).
    let table: Vec<(NodeFailureMode, [bool; 5])> = vec![
        (Unreachable, [true, true, false, true, true]),
        (NotReady, [true, true, true, true, true]),
        (OutOfService, [false, false, false, true, true]),
        (Off, [false, false, false, false, false]),
    ];
    for (mode, acts) in table {
        for ((what, n), want) in nodes.iter().zip(acts) {
            let mut objects = vec![job.clone(), pod.clone()];
            objects.extend(healthy.clone());
            objects.extend(n.clone());
            let lines = plan_lines(&objects, 10_000, &cfg(|c| c.node_failure = mode));
            let acted = lines.iter().any(|l| l.starts_with("force-delete-pod"));
            assert_eq!(acted, want, "{mode:?} on {what}: {lines:#?}");
            if !want {
                assert_eq!(lines, ["event Pod ml/a-master-0 node-failure PodStuckTerminating"], "{mode:?} on {what}");
            }
        }
    }
    // The default leaves a node whose kubelet still reports alone, and says why.
    let mut objects = vec![job.clone(), pod.clone(), not_ready(node("n1", None), 0)];
    objects.extend(healthy);
    let lines = plan_json(&objects, 10_000, &PlanConfig::acting(), &HashMap::new());
    let message = lines[0]["message"].as_str().unwrap();
    assert!(message.contains("kubelet still reports") && message.contains("--node-failure=not-ready"), "{message}");
    // not-ready still waits --node-not-ready-for (5m) from the Ready transition: at 400 → due at 700.
    let mut objects = vec![job.clone(), pod.clone(), not_ready(node("n1", None), 400)];
    objects.extend((1..=4).map(|i| node(&format!("h{i}"), None)));
    let not_ready_mode = cfg(|c| c.node_failure = NotReady);
    assert_eq!(
        plan_lines(&objects, 650, &not_ready_mode),
        [
            "event Pod ml/a-master-0 node-failure PodStuckTerminating",
            "requeue Pod ml/a-master-0 node-failure force-delete-after @+700"
        ]
    );
    assert!(plan_lines(&objects, 700, &not_ready_mode)[1].starts_with("force-delete-pod"));
}

#[test]
fn kueue_force_delete_window() {
    let (job, pod, dead) = failed_node_world();
    let marked = annotate(pod.clone(), "kueue.x-k8s.io/safe-to-forcefully-delete", "true");
    let quick = cfg(|c| c.force_delete_after = SignedDuration::from_secs(30));
    let world = |p: &Value| vec![job.clone(), p.clone(), dead.clone(), node("h1", None)];
    let acts = A_FORCE_DELETED.to_vec();
    run(vec![
        Case {
            name: "annotated: left to Kueue for deletion + 1m + 30s, then acted on",
            objects: world(&marked),
            config: quick.clone(),
            steps: vec![
                (329, vec!["requeue Pod ml/a-master-0 node-failure force-delete-after @+330"]),
                (
                    330,
                    vec![
                        "event Pod ml/a-master-0 node-failure PodStuckTerminating",
                        "requeue Pod ml/a-master-0 node-failure force-delete-after @+390",
                    ],
                ),
                (
                    389,
                    vec![
                        "event Pod ml/a-master-0 node-failure PodStuckTerminating",
                        "requeue Pod ml/a-master-0 node-failure force-delete-after @+390",
                    ],
                ),
                (390, acts.clone()),
            ],
        },
        Case {
            name: "not annotated: --force-delete-after alone",
            objects: world(&pod),
            config: quick.clone(),
            steps: vec![(330, acts.clone())],
        },
        Case {
            name: "annotation other than \"true\": not Kueue's",
            objects: world(&annotate(pod.clone(), "kueue.x-k8s.io/safe-to-forcefully-delete", "false")),
            config: quick.clone(),
            steps: vec![(330, acts.clone())],
        },
        Case {
            name: "annotated, default --force-delete-after (2m) is past Kueue's window already",
            objects: world(&marked),
            config: PlanConfig::acting(),
            steps: vec![(420, acts.clone())],
        },
    ]);
    let inside = plan_json(&world(&marked), 330, &quick, &HashMap::new());
    let message = inside[0]["message"].as_str().unwrap();
    assert!(message.contains("left to Kueue's own force delete until"), "{message}");
    let past = plan_json(&world(&marked), 390, &quick, &HashMap::new());
    let message = past[2]["message"].as_str().unwrap();
    assert!(message.contains("Kueue had not force-deleted it by"), "{message}");
    let plain = plan_json(&world(&pod), 390, &quick, &HashMap::new());
    assert!(!plain[2]["message"].as_str().unwrap().contains("Kueue"), "{}", plain[2]["message"]);
}

#[test]
fn trainjob_ttl() {
    let ttl = |tj: Value, v: &str| annotate(tj, "trainguard.io/ttl-seconds-after-finished", v);
    let complete = ttl(trainjob_finished(trainjob("t"), "Complete", 0), "60");
    let deleted = vec!["delete-job TrainJob ml/t ttl ttl-expired", "event TrainJob ml/t ttl TTLExpiredDeleted"];
    let invalid = vec!["event TrainJob ml/t ttl TTLAnnotationInvalid"];
    run(vec![
        case(
            "Complete: due at the condition's time + ttl + grace",
            vec![complete.clone()],
            due_at_90("requeue TrainJob ml/t ttl ttl-expiry @+90", &deleted),
        ),
        case(
            "Failed: the same",
            vec![ttl(trainjob_finished(trainjob("t"), "Failed", 0), "60")],
            vec![(90, deleted.clone())],
        ),
        case(
            "ttl 0: due after the grace alone",
            vec![ttl(trainjob_finished(trainjob("t"), "Complete", 0), "0")],
            vec![(29, vec!["requeue TrainJob ml/t ttl ttl-expiry @+30"]), (30, deleted.clone())],
        ),
        quiet("no annotation: nothing", vec![trainjob_finished(trainjob("t"), "Complete", 0)]),
        quiet("not finished: nothing", vec![ttl(trainjob("t"), "60")]),
        quiet(
            "Complete=False: not finished",
            vec![set(complete.clone(), "/status/conditions", json!([cond("Complete", "False", Some(0))]))],
        ),
        quiet("suspended: never, finished or not", vec![set(complete.clone(), "/spec/suspend", json!(true))]),
        case(
            "bad annotation: a warning, nothing else",
            vec![ttl(complete.clone(), "1h")],
            vec![(10, invalid.clone()), (100_000, invalid.clone())],
        ),
        case("negative annotation: a warning", vec![ttl(complete.clone(), "-5")], vec![(100_000, invalid.clone())]),
        case("fraction: a warning", vec![ttl(complete.clone(), "1.5")], vec![(100_000, invalid.clone())]),
        case(
            "a TTL beyond 32 bits is still a TTL",
            vec![ttl(complete.clone(), "5000000000")],
            vec![(100_000, vec!["requeue TrainJob ml/t ttl ttl-expiry @+5000000030"])],
        ),
        case(
            "bad annotation on an unfinished TrainJob: warned at once",
            vec![ttl(trainjob("t"), "soon")],
            vec![(0, invalid.clone())],
        ),
        case(
            "spec.ttlSecondsAfterFinished wins over the annotation",
            vec![set(ttl(complete.clone(), "3600"), "/spec/ttlSecondsAfterFinished", json!(10))],
            vec![(39, vec!["requeue TrainJob ml/t ttl ttl-expiry @+40"]), (40, deleted.clone())],
        ),
        case(
            "the field wins over a bad annotation too: no warning",
            vec![set(ttl(complete.clone(), "x"), "/spec/ttlSecondsAfterFinished", json!(10))],
            vec![(40, deleted.clone())],
        ),
        case(
            "finished condition without a time: warned, never deleted",
            vec![set(
                complete.clone(),
                "/status/conditions",
                json!([{"type": "Complete", "status": "True", "reason": "x"}]),
            )],
            vec![(100_000, vec!["event TrainJob ml/t ttl TTLNoFinishTime"])],
        ),
        quiet("opted out: nothing", vec![label(complete.clone(), "trainguard.io/ignore", "true")]),
        quiet(
            "MultiKueue-managed: nothing",
            vec![set(complete.clone(), "/spec/managedBy", json!("kueue.x-k8s.io/multikueue"))],
        ),
        quiet("being deleted: nothing", vec![set(complete.clone(), "/metadata/deletionTimestamp", json!(ts(50)))]),
        case(
            "Workload Finished: the TTL still runs",
            vec![complete.clone(), workload(&complete, vec![cond("Finished", "True", Some(0))])],
            vec![(90, deleted.clone())],
        ),
    ]);
    let lines = plan_json(std::slice::from_ref(&complete), 90, &PlanConfig::acting(), &HashMap::new());
    assert_eq!(lines[0]["propagation"], "Background");
    assert_eq!(lines[0]["finishedAt"], ts(0));
    assert_eq!(lines[0]["expiredAt"], ts(90));
    let message = lines[1]["message"].as_str().unwrap();
    assert!(message.contains("trainguard.io/ttl-seconds-after-finished=60"), "{message}");
    // --ttl=false turns it off too.
    assert_eq!(plan_lines(&[complete], 100_000, &cfg(|c| c.ttl = false)), Vec::<String>::new());
}

#[test]
fn admitted_but_suspended() {
    // A v1 job Kueue admitted at 0 that stays suspended (reconciled: Suspended=True, no pods).
    let job = with_conditions(
        suspended(pytorchjob("a")),
        vec![cond("Created", "True", Some(-3600)), cond("Suspended", "True", Some(-600))],
    );
    let admitted = |owner: &Value, conditions: Vec<Value>| {
        let mut c = vec![cond("QuotaReserved", "True", Some(0))];
        c.extend(conditions);
        workload(owner, c)
    };
    let tj = set(trainjob("t"), "/spec/suspend", json!(true));
    let alarm_v1 = vec!["event PyTorchJob ml/a suspend AdmittedButSuspended"];
    let wait_v1 = vec!["requeue PyTorchJob ml/a suspend admitted-suspended-after @+300"];
    let mut cases = vec![
        case(
            "v1 job: requeue at admission + 5m, then one Warning",
            vec![job.clone(), admitted(&job, vec![cond("Admitted", "True", Some(0))])],
            vec![(299, wait_v1.clone()), (300, alarm_v1.clone()), (100_000, alarm_v1.clone())],
        ),
        case(
            "TrainJob: the same",
            vec![tj.clone(), admitted(&tj, vec![cond("Admitted", "True", Some(0))])],
            vec![
                (10, vec!["requeue TrainJob ml/t suspend admitted-suspended-after @+300"]),
                (300, vec!["event TrainJob ml/t suspend AdmittedButSuspended"]),
            ],
        ),
        quiet(
            "started (not suspended): nothing",
            vec![set(job.clone(), "/spec/runPolicy/suspend", json!(false)), {
                let j = set(job.clone(), "/spec/runPolicy/suspend", json!(false));
                admitted(&j, vec![cond("Admitted", "True", Some(0))])
            }],
        ),
        quiet("not admitted: nothing", vec![job.clone(), admitted(&job, vec![cond("Admitted", "False", Some(0))])]),
        quiet(
            "admitted without a time: nothing to count from",
            vec![job.clone(), admitted(&job, vec![json!({"type": "Admitted", "status": "True", "reason": "x"})])],
        ),
        quiet(
            "evicted meanwhile: Kueue is taking the admission back",
            vec![
                job.clone(),
                admitted(&job, vec![cond("Admitted", "True", Some(0)), cond("Evicted", "True", Some(100))]),
            ],
        ),
        quiet(
            "Workload finished: nothing",
            vec![
                job.clone(),
                admitted(&job, vec![cond("Admitted", "True", Some(0)), cond("Finished", "True", Some(100))]),
            ],
        ),
        quiet("no Workload: nothing", vec![job.clone()]),
        // Kueue v0.19 resumed the TrainJob, but Trainer could not update its suspended JobSet (the
        // JobSet webhook refused the pod template Kueue's rewrite of runtimePatches produced).
        case(
            "TrainJob resumed, its JobSet still suspended: the same alarm",
            {
                let resumed = set(tj.clone(), "/spec/suspend", json!(false));
                vec![
                    resumed.clone(),
                    set(jobset_of(&resumed, 0), "/spec", json!({"suspend": true})),
                    admitted(&resumed, vec![cond("Admitted", "True", Some(0))]),
                ]
            },
            vec![
                (10, vec!["requeue TrainJob ml/t suspend admitted-suspended-after @+300"]),
                (300, vec!["event TrainJob ml/t suspend AdmittedButSuspended"]),
            ],
        ),
        quiet("TrainJob resumed, its JobSet resumed too: nothing", {
            let resumed = set(tj.clone(), "/spec/suspend", json!(false));
            vec![
                resumed.clone(),
                set(jobset_of(&resumed, 1), "/spec", json!({"suspend": false})),
                admitted(&resumed, vec![cond("Admitted", "True", Some(0))]),
            ]
        }),
        quiet(
            "opted out: nothing",
            vec![
                label(job.clone(), "trainguard.io/ignore", "true"),
                admitted(&job, vec![cond("Admitted", "True", Some(0))]),
            ],
        ),
    ];
    let mut quick = case(
        "--admitted-suspended-after=1m",
        vec![job.clone(), admitted(&job, vec![cond("Admitted", "True", Some(0))])],
        vec![(59, vec!["requeue PyTorchJob ml/a suspend admitted-suspended-after @+60"]), (60, alarm_v1.clone())],
    );
    quick.config = cfg(|c| c.admitted_suspended_after = SignedDuration::from_secs(60));
    cases.push(quick);
    run(cases);

    // One Warning per admission: the episode is the admission time, the message names the Workload.
    let objects = [job.clone(), admitted(&job, vec![cond("Admitted", "True", Some(0))])];
    let lines = plan_json(&objects, 400, &PlanConfig::acting(), &HashMap::new());
    let message = lines[0]["message"].as_str().unwrap();
    assert!(message.contains("Workload ml/pytorchjob-a") && message.contains("6m40s ago"), "{message}");
    assert!(message.contains("spec.runPolicy.suspend: true"), "{message}");
    let (snapshot, _) = trainguard_core::planner::objects::snapshot_from_values(&objects).unwrap();
    let first_seen = HashMap::new();
    let input = trainguard_core::planner::PlanInput {
        snapshot: &snapshot,
        now: at(400),
        config: &PlanConfig::acting(),
        first_seen_suspended: &first_seen,
        first_failed: &Default::default(),
    };
    let mut bucket = trainguard_core::planner::TokenBucket::per_minute(20);
    let plans = trainguard_core::planner::plan_all(&input, &mut bucket);
    let observations: Vec<_> = plans.iter().flat_map(|(_, p)| p.observations.clone()).collect();
    assert_eq!(observations, [trainguard_core::planner::Observation::AdmittedSuspended("PyTorchJob")]);
    match &plans[0].1.actions[0].action {
        trainguard_core::planner::Action::Event(e) => assert_eq!(e.episode, format!("admitted@{}", ts(0))),
        other => panic!("{other:?}"),
    }
    // The resumed TrainJob's message names the suspended JobSet and where Trainer said why.
    let resumed = set(tj.clone(), "/spec/suspend", json!(false));
    let objects = [
        resumed.clone(),
        set(jobset_of(&resumed, 0), "/spec", json!({"suspend": true})),
        admitted(&resumed, vec![cond("Admitted", "True", Some(0))]),
    ];
    let lines = plan_json(&objects, 400, &PlanConfig::acting(), &HashMap::new());
    let message = lines[0]["message"].as_str().unwrap();
    assert!(message.contains("its JobSet ml/t is still suspended"), "{message}");
    assert!(message.contains("TrainJobResourcesCreationFailed"), "{message}");
}

#[test]
fn jobset_recreated_after_failure() {
    let failed = trainjob_finished(trainjob("t"), "Failed", 0);
    let created = |js: Value, s: i64| set(js, "/metadata/creationTimestamp", json!(ts(s)));
    let warned = vec!["event TrainJob ml/t ttl JobSetRecreatedAfterFailure"];
    run(vec![
        case(
            "Failed at 0, JobSet created at 600: the loop",
            vec![failed.clone(), created(jobset_of(&failed, 0), 600)],
            vec![(700, warned.clone()), (100_000, warned.clone())],
        ),
        quiet("JobSet from before the failure: nothing", vec![failed.clone(), created(jobset_of(&failed, 0), -3600)]),
        quiet(
            "created at the very instant it failed: not after",
            vec![failed.clone(), created(jobset_of(&failed, 0), 0)],
        ),
        quiet(
            "Complete, not Failed: nothing",
            vec![
                trainjob_finished(trainjob("t"), "Complete", 0),
                created(jobset_of(&trainjob_finished(trainjob("t"), "Complete", 0), 0), 600),
            ],
        ),
        quiet(
            "Failed without a time: nothing to compare",
            vec![
                set(failed.clone(), "/status/conditions", json!([{"type": "Failed", "status": "True", "reason": "x"}])),
                created(jobset_of(&failed, 0), 600),
            ],
        ),
        quiet("no JobSet: nothing", vec![failed.clone()]),
        quiet(
            "a JobSet of another TrainJob with the name: nothing",
            vec![
                failed.clone(),
                created(
                    {
                        let mut js = jobset_of(&failed, 0);
                        js["metadata"]["ownerReferences"][0]["uid"] = json!("other");
                        js
                    },
                    600,
                ),
            ],
        ),
        quiet(
            "opted out: nothing",
            vec![label(failed.clone(), "trainguard.io/ignore", "true"), created(jobset_of(&failed, 0), 600)],
        ),
    ]);
    // Once per JobSet UID, naming the Trainer issue and both fixes; a gauge observation.
    let episode = |jobset_uid: &str| {
        let objects = [failed.clone(), created(set(jobset_of(&failed, 0), "/metadata/uid", json!(jobset_uid)), 600)];
        let (snapshot, _) = trainguard_core::planner::objects::snapshot_from_values(&objects).unwrap();
        let first_seen = HashMap::new();
        let config = PlanConfig::acting();
        let input = trainguard_core::planner::PlanInput {
            snapshot: &snapshot,
            now: at(700),
            config: &config,
            first_seen_suspended: &first_seen,
            first_failed: &Default::default(),
        };
        let mut bucket = trainguard_core::planner::TokenBucket::per_minute(20);
        let plans = trainguard_core::planner::plan_all(&input, &mut bucket);
        assert_eq!(plans[0].1.observations, [trainguard_core::planner::Observation::JobSetRecreated]);
        match &plans[0].1.actions[0].action {
            trainguard_core::planner::Action::Event(e) => {
                assert!(e.message.contains("kubeflow/trainer#3779"), "{}", e.message);
                assert!(e.message.contains("Remove ttlSecondsAfterFinished from the JobSet template"), "{}", e.message);
                assert!(e.message.contains("upgrade Trainer past v2.3.0"), "{}", e.message);
                e.episode.clone()
            }
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(episode("js-1"), "jobset:js-1");
    assert_ne!(episode("js-1"), episode("js-2"));
    // The live controller's memory of the first failure: Trainer removed Failed when it recreated
    // the JobSet (no condition), or set it again at the new JobSet's failure (after its creation).
    let remembered = |trainjob: Value| {
        let objects = [trainjob.clone(), created(jobset_of(&trainjob, 0), 600)];
        let (snapshot, _) = trainguard_core::planner::objects::snapshot_from_values(&objects).unwrap();
        let first_failed: HashMap<_, _> = [("uid-t".into(), at(0))].into();
        let config = PlanConfig::acting();
        let input = trainguard_core::planner::PlanInput {
            snapshot: &snapshot,
            now: at(700),
            config: &config,
            first_seen_suspended: &HashMap::new(),
            first_failed: &first_failed,
        };
        let mut bucket = trainguard_core::planner::TokenBucket::per_minute(20);
        trainguard_core::planner::plan_all(&input, &mut bucket)
            .into_iter()
            .flat_map(|(_, p)| p.observations)
            .collect::<Vec<_>>()
    };
    let seen = [trainguard_core::planner::Observation::JobSetRecreated];
    assert_eq!(remembered(trainjob("t")), seen, "Failed removed by Trainer");
    assert_eq!(remembered(trainjob_finished(trainjob("t"), "Failed", 650)), seen, "Failed again, later");
    assert_eq!(remembered(trainjob_finished(trainjob("t"), "Complete", 650)), [], "Complete never loops");
    // Without the memory (`trainguard plan`), the same objects show nothing.
    assert_eq!(
        plan_lines(
            &[trainjob_finished(trainjob("t"), "Failed", 650), created(jobset_of(&failed, 0), 600)],
            700,
            &PlanConfig::acting()
        ),
        Vec::<String>::new()
    );
    // With the TTL annotation too, the TTL still runs alongside.
    let both = annotate(failed.clone(), "trainguard.io/ttl-seconds-after-finished", "60");
    assert_eq!(
        plan_lines(&[both, created(jobset_of(&failed, 0), 600)], 700, &PlanConfig::acting()),
        [
            "delete-job TrainJob ml/t ttl ttl-expired",
            "event TrainJob ml/t ttl TTLExpiredDeleted",
            "event TrainJob ml/t ttl JobSetRecreatedAfterFailure"
        ]
    );
}

/// What users write into the TTL annotations costs the controller the same whatever its size: the
/// facts keep a 64-character prefix and a hash, the event's message quotes the prefix and its
/// de-duplication episode is the hash, so distinct 200 KB values each cost a few bytes.
#[test]
fn invalid_annotations_are_kept_as_a_prefix_and_a_hash() {
    use trainguard_core::planner::actions::Action;
    use trainguard_core::planner::{PlanInput, TokenBucket, plan_all};
    let huge = |c: char| c.to_string().repeat(200_000);
    let cases = [
        ("trainguard.io/ttl-seconds-after-finished", trainjob_finished(trainjob("t"), "Complete", 0)),
        (
            "trainguard.io/stashed-ttl-seconds-after-finished",
            set(pytorchjob("a"), "/spec/runPolicy/suspend", json!(false)),
        ),
    ];
    for (annotation, object) in cases {
        let mut episodes = Vec::new();
        for c in ['x', 'y'] {
            let annotated = annotate(object.clone(), annotation, &huge(c));
            let (snapshot, _) = trainguard_core::planner::objects::snapshot_from_values(&[annotated]).expect("decodes");
            let facts = format!("{snapshot:?}");
            assert!(facts.len() < 20_000, "{annotation}: the snapshot keeps {} bytes", facts.len());
            let input = PlanInput {
                snapshot: &snapshot,
                now: at(100),
                config: &PlanConfig::default(),
                first_seen_suspended: &HashMap::new(),
                first_failed: &Default::default(),
            };
            let mut bucket = TokenBucket::per_minute(10);
            let events: Vec<_> = plan_all(&input, &mut bucket)
                .into_iter()
                .flat_map(|(_, plan)| plan.actions)
                .filter_map(|a| match a.action {
                    Action::Event(e) => Some(e),
                    _ => None,
                })
                .collect();
            assert_eq!(events.len(), 1, "{annotation}: {events:?}");
            assert!(events[0].message.len() < 512, "{annotation}: {}", events[0].message);
            assert!(events[0].episode.len() < 64, "{annotation}: episode {}", events[0].episode);
            episodes.push(events[0].episode.clone());
        }
        assert_ne!(episodes[0], episodes[1], "{annotation}: distinct values are distinct episodes");
    }
}
