//! A JobSet recreated after a failure, over and over.

use super::*;

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
        let plans = plans(&objects, 700, &PlanConfig::acting(), &HashMap::new(), &HashMap::new());
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
        let first_failed: FirstSeen = [("uid-t".into(), at(0))].into();
        plans(&objects, 700, &PlanConfig::acting(), &HashMap::new(), &first_failed)
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
