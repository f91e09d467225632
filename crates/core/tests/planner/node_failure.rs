//! Node failure (docs/controller.md, "Node failure"): pods stuck terminating on a failed node, the
//! zone brake, which pods are ours, finalizers.

use super::*;

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
