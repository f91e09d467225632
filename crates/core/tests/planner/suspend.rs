//! Suspend (docs/controller.md, "Suspend"): the report of a suspend not reconciled, the TTL stash
//! and its restore, TrainJobs admitted but left suspended.

use super::*;

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
    let plans = plans(&objects, 400, &PlanConfig::acting(), &HashMap::new(), &HashMap::new());
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
