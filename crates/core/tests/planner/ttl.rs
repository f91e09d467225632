//! The TTL backstop (docs/controller.md, "TTL"): v1 jobs and TrainJobs, the TTL annotations.

use super::*;

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

/// What users write into the TTL annotations costs the controller the same whatever its size: the
/// facts keep a 64-character prefix and a hash, the event's message quotes the prefix and its
/// de-duplication episode is the hash, so distinct 200 KB values each cost a few bytes.
#[test]
fn invalid_annotations_are_kept_as_a_prefix_and_a_hash() {
    use trainguard_core::planner::actions::Action;
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
            let objects = [annotated];
            let (snapshot, _) = trainguard_core::planner::objects::snapshot_from_values(&objects).expect("decodes");
            let facts = format!("{snapshot:?}");
            assert!(facts.len() < 20_000, "{annotation}: the snapshot keeps {} bytes", facts.len());
            let events: Vec<_> = plans(&objects, 100, &PlanConfig::default(), &HashMap::new(), &HashMap::new())
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
