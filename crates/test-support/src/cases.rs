//! The fixture table: every row of docs/webhook.md §1–§8, with the verdict each must get. The verdicts are
//! written here by hand from the rules, never computed by trainguard.

use serde_json::{Value, json};

use crate::builders::*;
use crate::fixtures::Expect;

/// Every fixture file, in a stable order.
pub fn all_files() -> Vec<FixtureFile> {
    all_cases().iter().flat_map(Case::files).collect()
}

pub fn all_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for field in OverridesField::ALL {
        cases.extend(field_cases(field));
    }
    cases.extend(general_cases());
    cases.extend(protocol_cases());
    cases.extend(bench_cases());
    cases
}

// Cluster states the gate may see (docs/webhook.md §4), as `kubectl get jobsets,jobs -o json` prints them.

/// The old run is up: the JobSet counts an active job, whose two pods run.
fn running() -> Cluster {
    Cluster::Known(list(vec![jobset(&[("node", 1)], false), child_job("node", 2, Some(0), false)]))
}

/// Suspended and gone: nothing active, nothing terminating.
fn stopped() -> Cluster {
    Cluster::Known(list(vec![jobset(&[("node", 0)], false), child_job("node", 0, Some(0), false)]))
}

/// No JobSet and no child Job (never started, or already deleted).
fn nothing() -> Cluster {
    Cluster::Known(list(vec![]))
}

/// G1 alone: the JobSet's status still counts an active job its Job no longer has.
fn jobset_lags() -> Cluster {
    Cluster::Known(list(vec![jobset(&[("node", 1)], false), child_job("node", 0, Some(0), false)]))
}

/// G3 alone: the child Job is active before the JobSet's status says so.
fn job_ahead() -> Cluster {
    Cluster::Known(list(vec![jobset(&[("node", 0)], false), child_job("node", 2, Some(0), false)]))
}

/// G2: the JobSet is being deleted (foreground), nothing active.
fn jobset_deleting() -> Cluster {
    Cluster::Known(list(vec![jobset(&[("node", 0)], true), child_job("node", 0, Some(0), false)]))
}

/// G5: pods of the old run stuck terminating (e.g. on a dead node).
fn terminating() -> Cluster {
    Cluster::Known(list(vec![jobset(&[("node", 0)], false), child_job("node", 0, Some(2), false)]))
}

/// G5 unknown: a cluster whose Jobs have no `status.terminating` field.
fn terminating_unknown() -> Cluster {
    Cluster::Known(list(vec![jobset(&[("node", 0)], false), child_job("node", 0, None, false)]))
}

/// G5: the child Job itself is being deleted.
fn job_deleting() -> Cluster {
    Cluster::Known(list(vec![jobset(&[("node", 0)], false), child_job("node", 0, Some(0), true)]))
}

fn kueue_labelled(job: Value) -> Value {
    job.with("/metadata/labels/kueue.x-k8s.io~1queue-name", json!(KUEUE_QUEUE))
}

/// The rows of docs/webhook.md §3–§5 and §7 that involve the overrides, for one field name.
fn field_cases(f: OverridesField) -> Vec<Case> {
    let dir = format!("fixtures/admission/{}", f.json_name());
    let id = |name: &str| format!("{}/{name}", f.json_name());
    let p = f.path();
    let key = format!("/spec/{}", f.json_name());
    let moved = |v: Value| v.with(&key, overrides(f, Placement::A100));
    let running_job = trainjob(Some(f), false, Run::Running);
    let stopped_job = trainjob(Some(f), true, Run::Stopped);
    let resumed = |v: Value| v.with("/spec/suspend", json!(false));
    let suspended = |v: Value| v.with("/spec/suspend", json!(true));

    let u2_message = format!(
        "{p}: Forbidden: can only be changed while the TrainJob is suspended: set spec.suspend to true (this stops \
         training and loses progress since the last checkpoint), wait until JobSet ml-team/llama has no active jobs \
         (kubectl -n ml-team get jobs -l jobset.sigs.k8s.io/jobset-name=llama), then edit, and set spec.suspend back \
         to false to resume"
    );
    let g1 = format!("{p}: Forbidden: replicated job \"node\" of JobSet ml-team/llama has 1 active job");
    let g3 = format!("{p}: Forbidden: job ml-team/llama-node-0 still has 2 active pods");
    let g4 = format!(
        "{p}: Forbidden: replicated job \"node\" of TrainJob ml-team/llama has 1 active job (status.jobsStatus)"
    );
    let wait_advice = "the old run has not stopped yet; wait until JobSet ml-team/llama has no active jobs, then edit";
    let resume_advice = "keep spec.suspend true for this change, wait until JobSet ml-team/llama has no active or \
                         terminating pods, then resume";
    let offline_warning = "JobSet ml-team/llama was not consulted";
    let shape = match f {
        OverridesField::RuntimePatches => {
            "spec.runtimePatches[0].manager: Required value: name the controller".to_string()
        }
        _ => format!("{p}[0].targetJobs: Required value: list at least one replicated job"),
    };

    let mut cases = Vec::new();
    let mut add = |name: &str, review: Review, cluster: Cluster, expect: Expect| {
        cases.push(Case {
            dir: dir.clone(),
            name: name.to_string(),
            body: Body::Review(Box::new(review)),
            cluster,
            expect,
        });
    };

    // U0: a status update carries changed overrides; the API server ignores spec there.
    let new = moved(running_job.clone()).with("/status/conditions/0/lastTransitionTime", json!("2025-06-02T08:31:40Z"));
    add(
        "u0-status-subresource",
        Review::update(&id("u0"), running_job.clone(), new).status_subresource(),
        running(),
        Expect::allowed("U0"),
    );

    // U1: overrides unchanged; no overrides check and no cluster lookup, even while running.
    let new = running_job
        .clone()
        .with("/metadata/labels/ml-team~1owner", json!("alice"))
        .with("/metadata/annotations", json!({"ml-team/ticket": "MLOPS-4127"}));
    add("u1-metadata-only", Review::update(&id("u1-meta"), running_job.clone(), new), running(), Expect::allowed("U1"));
    let new = running_job.clone().with(&key, overrides(f, Placement::H100Respelled));
    add(
        "u1-respelled",
        Review::update(&id("u1-respelled"), running_job.clone(), new),
        running(),
        Expect::allowed("U1"),
    );
    let no_overrides = trainjob(None, false, Run::Running);
    let new = no_overrides.clone().with(&key, json!([]));
    add(
        "u1-absent-vs-empty-list",
        Review::update(&id("u1-empty"), no_overrides, new),
        running(),
        Expect::allowed("U1"),
    );
    let new = suspended(running_job.clone());
    add(
        "u1-suspend-only",
        Review::update(&id("u1-suspend"), running_job.clone(), new),
        running(),
        Expect::allowed("U1"),
    );

    // U2: changed while running before and after.
    let new = moved(running_job.clone());
    add(
        "u2-change-while-running",
        Review::update(&id("u2"), running_job.clone(), new.clone()),
        Cluster::Offline,
        Expect::denied(403, "U2", &[&u2_message]),
    );
    add(
        "u2-cluster-unknown",
        Review::update(&id("u2-unknown"), running_job.clone(), new),
        Cluster::Unknown,
        Expect::denied(403, "U2", &[&u2_message]),
    );
    let new = running_job.clone().with(&key, overrides(f, Placement::H100PresentButEmpty));
    add(
        "u2-present-but-empty",
        Review::update(&id("u2-empty"), running_job.clone(), new),
        Cluster::Offline,
        Expect::denied(403, "U2", &[&u2_message]),
    );
    let kueue_running = kueue_labelled(running_job.clone());
    add(
        "u2-kueue-job",
        Review::update(&id("u2-kueue"), kueue_running.clone(), moved(kueue_running)),
        Cluster::Offline,
        Expect::denied(
            403,
            "U2",
            &[
                &format!(
                    "{p}: Forbidden: can only be changed while the TrainJob is suspended: the job is queued by Kueue"
                ),
                "(queue \"team-a\")",
                "set spec.active to false on its Workload trainjob-llama-<hash> (kubectl -n ml-team get workloads)",
                "this stops training and loses progress since the last checkpoint",
                "(kubectl -n ml-team get jobs -l jobset.sigs.k8s.io/jobset-name=llama)",
                "then edit, and set the Workload's spec.active back to true to resume",
            ],
        ),
    );

    // U3: changed while suspended before and after: gate G1, G3, G4.
    let changed_suspended = moved(stopped_job.clone());
    let u3 = |case: &str| Review::update(&id(case), stopped_job.clone(), changed_suspended.clone());
    add("u3-no-jobset", u3("u3-nothing"), nothing(), Expect::allowed("allow-gate"));
    add("u3-run-stopped", u3("u3-stopped"), stopped(), Expect::allowed("allow-gate"));
    add("u3-offline", u3("u3-offline"), Cluster::Offline, Expect::allowed("allow-gate").warning(offline_warning));
    add(
        "u3-cluster-unknown",
        u3("u3-unknown"),
        Cluster::Unknown,
        Expect::denied(
            500,
            "cluster-unknown",
            &[&format!("{p}: Internal error: the cluster state is unknown"), "retry"],
        ),
    );
    let kueue_stopped = kueue_labelled(stopped_job.clone());
    add(
        "u3-kueue-restores",
        Review::update(&id("u3-kueue"), moved(kueue_stopped.clone()), kueue_stopped).by(Actor::Kueue),
        stopped(),
        Expect::allowed("allow-gate"),
    );
    let bad_shape = stopped_job.clone().with(&key, overrides(f, Placement::BadShape));
    add(
        "u3-bad-shape",
        Review::update(&id("u3-shape"), stopped_job.clone(), bad_shape),
        stopped(),
        Expect::denied(422, "shape", &[&shape]),
    );

    // U4: change + unsuspend in one request: gate G1–G5, or denied as U2 with --suspend-rule=new.
    let change_and_resume = resumed(changed_suspended.clone());
    let u4 = |case: &str| Review::update(&id(case), stopped_job.clone(), change_and_resume.clone());
    add("u4-either-run-stopped", u4("u4-stopped"), stopped(), Expect::allowed("allow-gate"));
    add(
        "u4-either-offline",
        u4("u4-offline"),
        Cluster::Offline,
        Expect::allowed("allow-gate").warning(offline_warning),
    );
    add(
        "u4-new-denied",
        u4("u4-new"),
        stopped(),
        Expect::denied(
            403,
            "U2",
            &[&format!(
                "{p}: Forbidden: can only be changed while the TrainJob stays suspended (--suspend-rule=new): keep \
                 spec.suspend true for this change"
            )],
        )
        .suspend_rule("new"),
    );

    // U5: suspend + change in one request while the old run is up: G1, G3 (and G4 from v2.1 on).
    let suspend_and_change = suspended(moved(running_job.clone()));
    let (rule, mut expected) = if has_jobs_status(f) { ("G1,G3,G4", vec![g4.clone()]) } else { ("G1,G3", vec![]) };
    expected.extend([
        format!(
            "{g1}: suspending and changing in one update is not enough while the job runs; set spec.suspend to true"
        ),
        g3.clone(),
    ]);
    let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    add(
        "u5-still-running",
        Review::update(&id("u5-running"), running_job.clone(), suspend_and_change),
        running(),
        Expect::denied(403, rule, &expected),
    );
    let completed = trainjob(Some(f), false, Run::Completed);
    add(
        "u5-run-completed",
        Review::update(&id("u5-completed"), completed.clone(), suspended(moved(completed))),
        nothing(),
        Expect::allowed("allow-gate"),
    );

    // G1–G5, one piece of evidence at a time.
    add("g1-jobset-active", u3("g1"), jobset_lags(), Expect::denied(403, "G1", &[&format!("{g1}: {wait_advice}")]));
    add("g2-jobset-deleting-u4", u4("g2"), jobset_deleting(), {
        Expect::denied(
            403,
            "G2",
            &[&format!("{p}: Forbidden: JobSet ml-team/llama is still being deleted"), resume_advice],
        )
    });
    add("g2-ignored-on-u3", u3("g2-u3"), jobset_deleting(), Expect::allowed("allow-gate"));
    add("g3-child-job-active", u3("g3"), job_ahead(), Expect::denied(403, "G3", &[&format!("{g3}: {wait_advice}")]));
    // Trainer v2.0 leaves status.jobsStatus out; the rule reads it whatever the field name.
    let lagging = trainjob(Some(f), true, Run::StoppingStatusLags);
    let lagging = if has_jobs_status(f) {
        lagging
    } else {
        lagging.with(
            "/status/jobsStatus",
            json!([{"active": 1, "failed": 0, "name": "node", "ready": 0, "succeeded": 0, "suspended": 1}]),
        )
    };
    add(
        "g4-trainjob-status-active",
        Review::update(&id("g4"), lagging.clone(), moved(lagging)),
        Cluster::Offline,
        Expect::denied(403, "G4", &[&format!("{g4}: {wait_advice}")]).warning(offline_warning),
    );
    let g5 = format!("{p}: Forbidden: job ml-team/llama-node-0 still has 2 terminating pods");
    add("g5-terminating-pods-u4", u4("g5"), terminating(), Expect::denied(403, "G5", &[&g5]));
    add("g5-ignored-on-u3", u3("g5-u3"), terminating(), Expect::allowed("allow-gate"));
    add("g5-terminating-unknown-u4", u4("g5-unknown"), terminating_unknown(), Expect::allowed("allow-gate"));
    add(
        "g5-job-deleting-u4",
        u4("g5-deleting"),
        job_deleting(),
        Expect::denied(403, "G5", &[&format!("{p}: Forbidden: job ml-team/llama-node-0 is still being deleted")]),
    );

    // CREATE (§5): overrides in any suspend state, no cluster lookup (a leftover JobSet runs).
    add(
        "create-suspended",
        Review::create(&id("create"), new_trainjob(Some(f), true)),
        running(),
        Expect::allowed("allow-create"),
    );
    add(
        "create-unsuspended",
        Review::create(&id("create-run"), new_trainjob(Some(f), false)),
        running(),
        Expect::allowed("allow-create"),
    );
    add(
        "create-bad-shape",
        Review::create(&id("create-shape"), new_trainjob(Some(f), true).with(&key, overrides(f, Placement::BadShape))),
        Cluster::Offline,
        Expect::denied(422, "shape", &[&shape]),
    );

    // Mutating (§7): adds what is absent, never the overrides.
    let bare = new_trainjob(Some(f), false)
        .without("/spec/suspend")
        .without("/spec/managedBy")
        .without("/spec/runtimeRef/apiGroup")
        .without("/spec/runtimeRef/kind");
    add(
        "mutate-defaults-added",
        Review::create(&id("mutate"), bare),
        Cluster::Offline,
        Expect::allowed("defaulted").mutate().with_patch(),
    );
    add(
        "mutate-nothing-to-add",
        Review::create(&id("mutate-none"), new_trainjob(Some(f), false)),
        Cluster::Offline,
        Expect::allowed("defaults-present").mutate(),
    );
    add(
        "mutate-runtimeref-partial",
        Review::create(&id("mutate-partial"), new_trainjob(Some(f), true).without("/spec/runtimeRef/kind")),
        Cluster::Offline,
        Expect::allowed("defaulted").mutate().with_patch(),
    );
    cases
}

/// Rows that do not depend on the overrides field name: M1, M2, names, other operations, other
/// kinds, undecodable objects, dry runs, several errors at once.
fn general_cases() -> Vec<Case> {
    let f = OverridesField::PodTemplateOverrides;
    let key = "/spec/podTemplateOverrides";
    let id = |name: &str| format!("general/{name}");
    let running_job = trainjob(Some(f), false, Run::Running);
    let stopped_job = trainjob(Some(f), true, Run::Stopped);
    let multikueue = json!("kueue.x-k8s.io/multikueue");
    let immutable = "field is immutable: a TrainJob cannot move to another controller";

    let mut cases = Vec::new();
    let mut add = |name: &str, body: Body, cluster: Cluster, expect: Expect| {
        cases.push(Case {
            dir: "fixtures/admission/general".to_string(),
            name: name.to_string(),
            body,
            cluster,
            expect,
        });
    };
    let review = |r: Review| Body::Review(Box::new(r));

    // M1: managedBy is immutable on every UPDATE, whatever the suspend state or the cluster.
    let to_multikueue = stopped_job.clone().with("/spec/managedBy", multikueue.clone());
    add(
        "m1-managedby-changed",
        review(Review::update(&id("m1"), stopped_job.clone(), to_multikueue.clone())),
        Cluster::Offline,
        Expect::denied(
            422,
            "M1",
            &[&format!("spec.managedBy: Invalid value: \"kueue.x-k8s.io/multikueue\": {immutable}")],
        ),
    );
    add(
        "m1-cluster-unknown",
        review(Review::update(&id("m1-unknown"), stopped_job.clone(), to_multikueue.clone())),
        Cluster::Unknown,
        Expect::denied(422, "M1", &[immutable]),
    );
    add(
        "m1-managedby-removed",
        review(Review::update(&id("m1-removed"), to_multikueue, stopped_job.clone().without("/spec/managedBy"))),
        Cluster::Offline,
        Expect::denied(422, "M1", &["spec.managedBy: Invalid value: null: field is immutable"]),
    );
    add(
        "m1-absent-reads-as-default",
        review(Review::update(
            &id("m1-absent"),
            running_job.clone(),
            running_job.clone().without("/spec/managedBy").with("/metadata/labels/stage", json!("eval")),
        )),
        Cluster::Offline,
        Expect::allowed("U1"),
    );
    add(
        "m1-and-u2-together",
        review(Review::update(
            &id("m1-u2"),
            running_job.clone(),
            running_job.clone().with("/spec/managedBy", multikueue.clone()).with(key, overrides(f, Placement::A100)),
        )),
        Cluster::Offline,
        Expect::denied(
            422,
            "M1,U2",
            &[
                "[spec.managedBy: Invalid value: \"kueue.x-k8s.io/multikueue\": field is immutable",
                ", spec.podTemplateOverrides: Forbidden: can only be changed while the TrainJob is suspended",
            ],
        ),
    );
    // U0 skips the M rules too.
    add(
        "u0-managedby-differs",
        review(
            Review::update(
                &id("u0-m"),
                running_job.clone(),
                running_job.clone().with("/spec/managedBy", multikueue.clone()),
            )
            .status_subresource(),
        ),
        Cluster::Offline,
        Expect::allowed("U0"),
    );

    // O1: the opt-out label is set or changed only by --opt-out-groups; removing it is free.
    let opt_out = "/metadata/labels/trainguard.io~1webhook";
    let o1_message = "metadata.labels[trainguard.io/webhook]: Forbidden: setting or changing the opt-out label";
    let labelled = |value: &str| running_job.clone().with(opt_out, json!(value));
    add(
        "o1-label-added",
        review(Review::update(&id("o1-added"), running_job.clone(), labelled("disabled"))),
        Cluster::Offline,
        Expect::denied(403, "O1", &[o1_message, "members of \"system:masters\" (--opt-out-groups)"]),
    );
    add(
        "o1-label-value-changed",
        review(Review::update(&id("o1-changed"), labelled("audit"), labelled("disabled"))),
        Cluster::Offline,
        Expect::denied(403, "O1", &[o1_message]),
    );
    add(
        "o1-label-added-by-admin",
        review(Review::update(&id("o1-admin"), running_job.clone(), labelled("disabled")).by(Actor::Admin)),
        Cluster::Offline,
        Expect::allowed("U1"),
    );
    add(
        "o1-label-removed",
        review(Review::update(&id("o1-removed"), labelled("audit"), running_job.clone())),
        Cluster::Offline,
        Expect::allowed("U1"),
    );
    add(
        "o1-label-kept",
        review(Review::update(
            &id("o1-kept"),
            labelled("audit"),
            labelled("audit").with("/metadata/labels/stage", json!("eval")),
        )),
        Cluster::Offline,
        Expect::allowed("U1"),
    );
    add(
        "o1-and-u2-together",
        review(Review::update(
            &id("o1-u2"),
            running_job.clone(),
            labelled("disabled").with(key, overrides(f, Placement::A100)),
        )),
        Cluster::Offline,
        Expect::denied(403, "O1,U2", &[o1_message, "spec.podTemplateOverrides: Forbidden"]),
    );
    add(
        "o1-status-subresource",
        review(Review::update(&id("o1-u0"), running_job.clone(), labelled("disabled")).status_subresource()),
        Cluster::Offline,
        Expect::allowed("U0"),
    );
    add(
        "o1-create-labelled",
        review(Review::create(&id("o1-create"), new_trainjob(Some(f), true).with(opt_out, json!("audit")))),
        Cluster::Offline,
        Expect::allowed("allow-create"),
    );

    // M2: CREATE with a managedBy outside the allowed set; not re-checked on UPDATE.
    let allowed_set = "must be one of \"trainer.kubeflow.org/trainjob-controller\", \"kueue.x-k8s.io/multikueue\"";
    add(
        "m2-create-unknown-controller",
        review(Review::create(
            &id("m2"),
            new_trainjob(Some(f), true).with("/spec/managedBy", json!("example.com/custom-controller")),
        )),
        Cluster::Offline,
        Expect::denied(422, "M2", &["spec.managedBy: Invalid value: \"example.com/custom-controller\": ", allowed_set]),
    );
    add(
        "m2-create-empty-string",
        review(Review::create(&id("m2-empty"), new_trainjob(Some(f), true).with("/spec/managedBy", json!("")))),
        Cluster::Offline,
        Expect::denied(422, "M2", &["spec.managedBy: Invalid value: \"\": must be one of"]),
    );
    add(
        "m2-create-multikueue",
        review(Review::create(&id("m2-mk"), new_trainjob(Some(f), true).with("/spec/managedBy", multikueue.clone()))),
        Cluster::Offline,
        Expect::allowed("allow-create"),
    );
    let legacy = running_job.clone().with("/spec/managedBy", json!("example.com/legacy-scheduler"));
    add(
        "m2-not-rechecked-on-update",
        review(Review::update(&id("m2-update"), legacy.clone(), legacy.with("/metadata/labels/stage", json!("eval")))),
        Cluster::Offline,
        Expect::allowed("U1"),
    );

    // CREATE names (§5).
    let named = |name: &str| new_trainjob(Some(f), true).with("/metadata/name", json!(name));
    add(
        "create-bad-name",
        review(Review::create(&id("name"), named("Llama_3.1"))),
        Cluster::Offline,
        Expect::denied(422, "name", &["metadata.name: Invalid value: \"Llama_3.1\": a DNS-1035 label must consist of"]),
    );
    let long = format!("llama-{}", "x".repeat(58));
    add(
        "create-name-too-long",
        review(Review::create(&id("name-long"), named(&long))),
        Cluster::Offline,
        Expect::denied(
            422,
            "name",
            &[&format!("metadata.name: Invalid value: \"{long}\": must be no more than 63 characters")],
        ),
    );
    add(
        "create-several-errors",
        review(Review::create(
            &id("create-many"),
            named("7b-llama")
                .with("/spec/managedBy", json!("example.com/custom-controller"))
                .with(key, overrides(f, Placement::BadShape)),
        )),
        Cluster::Offline,
        Expect::denied(
            422,
            "M2,name,shape",
            &[
                "[spec.managedBy: Invalid value: \"example.com/custom-controller\"",
                ", metadata.name: Invalid value: \"7b-llama\"",
                ", spec.podTemplateOverrides[0].targetJobs: Required value",
            ],
        ),
    );
    add(
        "create-missing-object",
        review(Review::create(&id("create-null"), Value::Null)),
        Cluster::Offline,
        Expect::denied(400, "bad-object", &["request.object is missing"]),
    );

    // DELETE and CONNECT: allowed without checks.
    add(
        "delete",
        review(Review::delete(&id("delete"), running_job.clone())),
        running(),
        Expect::allowed("allow-delete"),
    );
    let mut connect = Review::update(&id("connect"), Value::Null, Value::Null);
    connect.operation = "CONNECT";
    add("connect", review(connect), Cluster::Offline, Expect::allowed("allow-connect"));

    // dryRun gets the decision it would get otherwise (§8).
    add(
        "dry-run-denied",
        review(
            Review::update(
                &id("dry-denied"),
                running_job.clone(),
                running_job.clone().with(key, overrides(f, Placement::A100)),
            )
            .dry_run(),
        ),
        Cluster::Offline,
        Expect::denied(
            403,
            "U2",
            &["spec.podTemplateOverrides: Forbidden: can only be changed while the TrainJob is suspended"],
        ),
    );
    add(
        "dry-run-allowed",
        review(
            Review::update(
                &id("dry-allowed"),
                stopped_job.clone(),
                stopped_job.clone().with(key, overrides(f, Placement::A100)),
            )
            .dry_run(),
        ),
        stopped(),
        Expect::allowed("allow-gate"),
    );

    // G1: one error per active replicated job, in status order (an MPI runtime: launcher + node).
    let mpi = list(vec![jobset(&[("launcher", 1), ("node", 1)], false)]);
    add(
        "g1-two-replicated-jobs",
        review(Review::update(
            &id("g1-two"),
            stopped_job.clone(),
            stopped_job.clone().with(key, overrides(f, Placement::A100)),
        )),
        Cluster::Known(mpi),
        Expect::denied(
            403,
            "G1",
            &[
                "[spec.podTemplateOverrides: Forbidden: replicated job \"launcher\" of JobSet ml-team/llama has 1 \
                 active job: ",
                ", spec.podTemplateOverrides: Forbidden: replicated job \"node\" of JobSet ml-team/llama has 1 active \
                 job]",
            ],
        ),
    );
    // Every piece of evidence at once, on two overrides fields: the message is cut under 1 KiB.
    let both = trainjob(Some(f), true, Run::StoppingStatusLags)
        .with("/spec/runtimePatches", overrides(OverridesField::RuntimePatches, Placement::H100));
    let both_changed = both
        .clone()
        .with(key, overrides(f, Placement::A100))
        .with("/spec/runtimePatches", overrides(OverridesField::RuntimePatches, Placement::A100))
        .with("/spec/suspend", json!(false));
    let everything = list(vec![
        jobset(&[("launcher", 1), ("node", 1)], true),
        child_job("launcher", 1, Some(0), false),
        child_job("node", 2, Some(2), true),
    ]);
    add(
        "several-errors-truncated",
        review(Review::update(&id("many"), both, both_changed)),
        Cluster::Known(everything),
        Expect::denied(
            403,
            "G1,G2,G3,G4,G5",
            &[
                "[spec.podTemplateOverrides: Forbidden: replicated job \"launcher\" of JobSet ml-team/llama",
                "more errors]",
            ],
        ),
    );

    // Another kind, an unknown operation, an object that does not decode: HTTP 200, code 400 (§8).
    let mut deployment = Review::create(
        &id("deployment"),
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "llama-serving", "namespace": NAMESPACE},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "llama-serving"}},
                     "template": {"metadata": {"labels": {"app": "llama-serving"}},
                                  "spec": {"containers": [
                                      {"image": "ghcr.io/example/llm-serve:1.2.0", "name": "serve"}
                                  ]}}}
        }),
    );
    deployment.kind = ("apps", "v1", "Deployment");
    deployment.resource = ("apps", "v1", "deployments");
    let wrong_kind = "this webhook admits trainer.kubeflow.org/v1alpha1 TrainJob only, got apps/v1 Deployment";
    add(
        "wrong-kind-deployment",
        review(deployment.clone()),
        Cluster::Offline,
        Expect::denied(400, "wrong-kind", &[wrong_kind]),
    );
    deployment.uid = uid_for(&id("deployment-mutate"));
    add(
        "wrong-kind-deployment-mutate",
        review(deployment),
        Cluster::Offline,
        Expect::denied(400, "wrong-kind", &[wrong_kind]).mutate(),
    );
    let mut pytorchjob = Review::update(&id("pytorchjob"), json!({}), json!({}));
    pytorchjob.kind = ("kubeflow.org", "v1", "PyTorchJob");
    pytorchjob.resource = ("kubeflow.org", "v1", "pytorchjobs");
    pytorchjob.old_object = json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}}, "runPolicy": {"suspend": true}}});
    pytorchjob.object = pytorchjob.old_object.clone().with("/spec/runPolicy/suspend", json!(false));
    add(
        "wrong-kind-pytorchjob",
        review(pytorchjob),
        Cluster::Offline,
        Expect::denied(400, "wrong-kind", &["got kubeflow.org/v1 PyTorchJob"]),
    );
    let mut patch_op = Review::update(&id("patch-op"), running_job.clone(), running_job.clone());
    patch_op.operation = "PATCH";
    add(
        "unknown-operation",
        review(patch_op),
        Cluster::Offline,
        Expect::denied(400, "bad-operation", &["unknown request.operation \"PATCH\""]),
    );
    add(
        "bad-object-suspend-string",
        review(Review::update(
            &id("bad-suspend"),
            stopped_job.clone(),
            stopped_job.clone().with("/spec/suspend", json!("yes")),
        )),
        Cluster::Offline,
        Expect::denied(
            400,
            "bad-object",
            &["request.object is not a valid TrainJob at spec.suspend: invalid type: string"],
        ),
    );
    add(
        "bad-oldobject-jobsstatus",
        review(Review::update(
            &id("bad-status"),
            running_job.clone().with("/status/jobsStatus/0/active", json!("1")),
            running_job.clone().with("/metadata/labels/stage", json!("eval")),
        )),
        Cluster::Offline,
        Expect::denied(
            400,
            "bad-object",
            &["request.oldObject is not a valid TrainJob at status.jobsStatus[0].active"],
        ),
    );
    add(
        "bad-object-label-not-string",
        review(Review::create(
            &id("bad-label"),
            new_trainjob(Some(f), true).with("/metadata/labels/replicas", json!(2)),
        )),
        Cluster::Offline,
        Expect::denied(400, "bad-object", &["request.object is not a valid TrainJob at metadata.labels.replicas"]),
    );
    // The objects of an UPDATE name another TrainJob than the request: no API server sends that,
    // and answering would tell a direct caller about another object's JobSet.
    let mut foreign = Review::update(
        &id("foreign"),
        stopped_job.clone(),
        stopped_job.clone().with(key, overrides(f, Placement::A100)),
    );
    foreign.namespace = "other-team".to_string();
    let generic = "request.name and request.namespace must name the TrainJob under review";
    add("bad-object-foreign-namespace", review(foreign), running(), Expect::denied(400, "bad-object", &[generic]));
    // The same with the request's names left empty: the objects' JobSet (running here) is not
    // described, and no other one either.
    let mut unnamed = Review::update(
        &id("unnamed"),
        stopped_job.clone(),
        stopped_job.clone().with(key, overrides(f, Placement::A100)),
    );
    unnamed.namespace = String::new();
    unnamed.name = String::new();
    add("bad-object-unnamed-update", review(unnamed), running(), Expect::denied(400, "bad-object", &[generic]));
    // A CREATE with generateName has no name yet, in the object or the request: judged as usual.
    add(
        "create-generate-name",
        review(Review::create(
            &id("generate-name"),
            new_trainjob(Some(f), true).without("/metadata/name").with("/metadata/generateName", json!("llama-")),
        )),
        running(),
        Expect::allowed("allow-create"),
    );
    add(
        "bad-object-not-an-object",
        review(Review::create(&id("bad-string"), json!("llama"))),
        Cluster::Offline,
        Expect::denied(400, "bad-object", &["request.object is not a valid TrainJob: expected a JSON object"]),
    );

    // Mutating outside CREATE, and without a spec at all.
    add(
        "mutate-update-ignored",
        review(Review::update(&id("mutate-update"), running_job.clone(), running_job.without("/spec/suspend"))),
        Cluster::Offline,
        Expect::allowed("allow-not-create").mutate(),
    );
    let mut no_spec = new_trainjob(None, false);
    no_spec.as_object_mut().expect("object").remove("spec");
    add(
        "mutate-no-spec",
        review(Review::create(&id("mutate-no-spec"), no_spec)),
        Cluster::Offline,
        Expect::allowed("defaulted").mutate().with_patch(),
    );
    add(
        "mutate-bad-object",
        review(Review::create(&id("mutate-bad"), new_trainjob(Some(f), true).with("/spec/suspend", json!("yes")))),
        Cluster::Offline,
        Expect::denied(400, "bad-object", &["spec.suspend"]).mutate(),
    );
    cases
}

/// Bodies that are not an AdmissionReview we can answer: HTTP 400 (§1).
fn protocol_cases() -> Vec<Case> {
    let good = Review::update("protocol/base", trainjob(None, true, Run::Stopped), trainjob(None, true, Run::Stopped));
    let good_text = serde_json::to_string(&good.to_value()).expect("serialises");
    let mut cases = Vec::new();
    let mut add = |name: &str, body: Body, message: &str| {
        cases.push(Case {
            dir: "fixtures/admission/protocol".to_string(),
            name: name.to_string(),
            body,
            cluster: Cluster::Offline,
            expect: Expect::protocol_error(&[message]),
        });
    };
    add("not-json", Body::Raw(good_text[..good_text.len() / 2].to_string()), "request body is not valid JSON");
    add(
        "no-request",
        Body::Json(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})),
        "AdmissionReview has no request",
    );
    let mut no_uid = good.to_value();
    no_uid["request"].as_object_mut().expect("request").remove("uid");
    add("no-uid", Body::Json(no_uid), "AdmissionReview request has no uid");
    add("empty-uid", Body::Json(good.to_value().with("/request/uid", json!(""))), "AdmissionReview request has no uid");
    add(
        "v1beta1-envelope",
        Body::Json(good.to_value().with("/apiVersion", json!("admission.k8s.io/v1beta1"))),
        "expected an admission.k8s.io/v1 AdmissionReview, got admission.k8s.io/v1beta1 AdmissionReview",
    );
    add(
        "bare-trainjob",
        Body::Json(trainjob(None, true, Run::Stopped)),
        "expected an admission.k8s.io/v1 AdmissionReview, got trainer.kubeflow.org/v1alpha1 TrainJob",
    );
    cases
}

/// Payloads for the benchmarks: UPDATEs that leave the overrides alone (the common case), one
/// small, one large (long env lists, many managedFields entries).
fn bench_cases() -> Vec<Case> {
    let f = OverridesField::RuntimePatches;
    let small_old = trainjob(Some(f), false, Run::Running);
    let small_new = small_old.clone().with("/metadata/labels/stage", json!("eval"));
    let env = |prefix: &str, n: usize| -> Value {
        (0..n)
            .map(|i| json!({"name": format!("{prefix}_{i:03}"), "value": format!("value-{i}-{}", "v".repeat(40))}))
            .collect()
    };
    let env_fields = |i: usize| -> serde_json::Map<String, Value> {
        (0..8)
            .map(|j| {
                (format!("k:{{\"name\":\"TRAINER_{:03}\"}}", i * 2 + j), json!({".": {}, "f:name": {}, "f:value": {}}))
            })
            .collect()
    };
    let managed_fields: Value = (0..60)
        .map(|i| {
            json!({
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:annotations": {format!("f:ml-team/note-{i}"): {}}},
                             "f:spec": {"f:trainer": {"f:env": env_fields(i)}}},
                "manager": format!("pipeline-step-{i}"),
                "operation": "Update",
                "time": "2025-06-02T08:14:51Z"
            })
        })
        .collect();
    let large_old = small_old
        .clone()
        .with("/spec/trainer/env", env("TRAINER", 128))
        .with(
            "/spec/initializer",
            json!({
                "dataset": {"env": env("DATASET", 128), "storageUri": "hf://tatsu-lab/alpaca"},
                "model": {"env": env("MODEL", 128), "storageUri": "hf://meta-llama/Llama-3.1-8B"}
            }),
        )
        .with("/metadata/managedFields", managed_fields);
    let large_new = large_old.clone().with("/metadata/labels/stage", json!("eval"));
    let bench = |name: &str, old: Value, new: Value| Case {
        dir: "fixtures/bench".to_string(),
        name: name.to_string(),
        body: Body::Raw(
            serde_json::to_string(&Review::update(&format!("bench/{name}"), old, new).to_value()).expect("json") + "\n",
        ),
        cluster: Cluster::Offline,
        expect: Expect::allowed("U1"),
    };
    vec![bench("small-update", small_old, small_new), bench("large-update", large_old, large_new)]
}
