//! trainguard's webhook as kube-apiserver calls it, through real kubectl: what a user sees.

use crate::cluster::{
    Answer, Kubectl, answers, assert_golden, eventually, metric_sum, normalise, plane, trainjob, wait_jobset_active,
    wait_no_pods,
};

/// A runtime patch owned by a user, pinning the job's pods to a node pool.
pub(crate) fn patch_entry(manager: &str, pool: &str) -> String {
    format!(
        r#"{{"manager":"{manager}","trainingRuntimeSpec":{{"template":{{"spec":{{"replicatedJobs":[{{"name":"node","template":{{"spec":{{"template":{{"spec":{{"nodeSelector":{{"e2e.trainguard.io/pool":"{pool}"}}}}}}}}}}}}]}}}}}}}}"#
    )
}

pub(crate) fn runtime_patches(entries: &[String]) -> String {
    format!(r#"{{"spec":{{"runtimePatches":[{}]}}}}"#, entries.join(","))
}

pub(crate) const TRAINGUARD: &str = "admission webhook \"validate.trainjob.trainguard.io\" denied the request";
const TRAINER: &str = "admission webhook \"validator.trainjob.trainer.kubeflow.org\" denied the request";

fn kubectl_in(ns: &str) -> Kubectl {
    plane().kubectl().args(["-n", ns])
}

/// A running TrainJob (JobSet active) in a fresh namespace; Trainer's own validator is left out of
/// the namespace when `trainer_webhook` is false, so the text pinned is trainguard's alone.
pub(crate) fn running_job(ns_name: &str, trainer_webhook: bool) -> crate::cluster::Namespace {
    let labels: &[(&str, &str)] = if trainer_webhook { &[] } else { &[("e2e.trainguard.io/trainer-webhook", "off")] };
    let ns = plane().namespace(ns_name, labels);
    let extra = format!("  runtimePatches: [{}]\n", patch_entry("e2e.trainguard.io/user", "pool-a"));
    kubectl_in(&ns.name).apply(&trainjob("running", "e2e-torch", false, &extra));
    wait_jobset_active(&ns.name, "running");
    ns
}

/// A server-side dry run of `patch` must come back denied by `by` with `expected` in the text; the
/// denial's stderr is returned. The plane registers trainguard before any test starts (`plane.sh
/// up` waits until the API server calls it), so an allow is a wrong answer and fails at once. A
/// denial that says something else (trainguard's verdict from a watch cache a moment behind the
/// state the test waited for) is retried, and every such earlier answer is shown.
fn dry_run_denial(ns: &str, patch: &str, by: &str, expected: &str) -> String {
    answers(&format!("a dry-run patch in {ns} denied by {by} ({expected})"), || {
        let out = kubectl_in(ns)
            .args(["patch", "trainjob", "running", "--type=merge", "--dry-run=server", "-p", patch])
            .output();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.success() {
            Answer::Wrong(format!("allowed: {}", String::from_utf8_lossy(&out.stdout)))
        } else if err.contains(by) && err.contains(expected) {
            Answer::Expected(err)
        } else {
            Answer::Earlier(err)
        }
    })
    .0
}

#[test]
fn kubectl_patch_of_a_running_jobs_runtime_patches_prints_trainguards_denial() {
    let ns = running_job("e2e-patch", false);
    let patch = runtime_patches(&[patch_entry("e2e.trainguard.io/user", "pool-b")]);
    dry_run_denial(&ns.name, &patch, TRAINGUARD, "spec.runtimePatches");

    let err = kubectl_in(&ns.name).args(["patch", "trainjob", "running", "--type=merge", "-p", &patch]).fails();
    assert_golden("kubectl-patch-running.txt", &normalise(&err));
}

#[test]
fn kubectl_edit_of_a_running_jobs_runtime_patches_prints_trainguards_denial() {
    let ns = running_job("e2e-edit", false);
    dry_run_denial(
        &ns.name,
        &runtime_patches(&[patch_entry("e2e.trainguard.io/user", "pool-b")]),
        TRAINGUARD,
        "spec.runtimePatches",
    );

    // The user's editor changes the pool in the file kubectl opened; kubectl then prints the
    // denial and keeps the edited copy in a temporary file (named in its message).
    let editor = plane().run_dir().join("edit-pool.sh");
    std::fs::write(&editor, "#!/bin/sh\nsed -i 's/pool-a/pool-b/' \"$1\"\n").expect("write editor");
    std::process::Command::new("chmod").arg("+x").arg(&editor).status().expect("chmod");
    let out = kubectl_in(&ns.name).env("KUBE_EDITOR", &editor).args(["edit", "trainjob", "running"]).output();
    assert!(!out.status.success(), "kubectl edit was allowed: {}", String::from_utf8_lossy(&out.stdout));
    let shown = String::from_utf8_lossy(&out.stderr);
    assert!(shown.contains(TRAINGUARD), "kubectl edit's error is not trainguard's: {shown}");
    assert_golden("kubectl-edit-running.txt", &normalise(&shown));
    // kubectl keeps the rejected edit in the temporary file its message names: remove it.
    if let Some(kept) = shown.split("kubectl replace -f ").nth(1).and_then(|rest| rest.split('`').next()) {
        let _ = std::fs::remove_file(kept.trim());
    }
}

#[test]
fn server_side_dry_run_apply_of_a_running_jobs_patches_is_denied() {
    let ns = running_job("e2e-apply", false);
    dry_run_denial(
        &ns.name,
        &runtime_patches(&[patch_entry("e2e.trainguard.io/user", "pool-b")]),
        TRAINGUARD,
        "spec.runtimePatches",
    );
    let changed = format!("  runtimePatches: [{}]\n", patch_entry("e2e.trainguard.io/user", "pool-b"));
    let out = kubectl_in(&ns.name).args(["apply", "--dry-run=server", "-f", "-"]).output_with(&trainjob(
        "running",
        "e2e-torch",
        false,
        &changed,
    ));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains(TRAINGUARD), "apply --dry-run=server: {err}");
    assert!(err.contains("spec.runtimePatches"), "the denial names no field: {err}");
}

/// trainguard's denials of UPDATEs, from its own metrics: `trainguard_admission_decisions_total`
/// with `allowed="false"` on the validating webhook.
fn trainguard_update_denials() -> f64 {
    metric_sum(
        &plane().webhook_metrics(),
        "trainguard_admission_decisions_total",
        &["webhook=\"/validate-", "operation=\"UPDATE\"", "allowed=\"false\""],
    )
}

#[test]
fn with_trainers_webhook_registered_too_trainguard_denies_whichever_message_comes_back() {
    let ns = running_job("e2e-both", true);
    let patch = runtime_patches(&[patch_entry("e2e.trainguard.io/user", "pool-b")]);
    let before = trainguard_update_denials();
    // Validating webhooks run in parallel and the API server returns the first denial: either
    // text may come back. trainguard's own count says whether it denied this one write.
    let out = kubectl_in(&ns.name).args(["patch", "trainjob", "running", "--type=merge", "-p", &patch]).output();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "the change to a running job's patches was allowed");
    let shown = match (err.contains(TRAINGUARD), err.contains(TRAINER)) {
        (true, false) => "trainguard",
        (false, true) => "Trainer",
        _ => panic!("the denial names neither webhook alone: {err}"),
    };
    assert!(err.contains("spec.runtimePatches"), "{err}");
    let denied = trainguard_update_denials() - before;
    assert_eq!(
        denied, 1.0,
        "trainguard denied {denied} UPDATE(s) for this one write (the message shown was {shown}'s)"
    );
    eprintln!("both webhooks registered: the message shown was {shown}'s; trainguard denied the write itself");
}

#[test]
fn a_reorder_of_runtime_patches_on_a_running_job_reaches_trainguard_and_is_denied() {
    let ns = plane().namespace("e2e-reorder", &[("e2e.trainguard.io/trainer-webhook", "off")]);
    let a = patch_entry("e2e.trainguard.io/a", "pool-a");
    let b = patch_entry("e2e.trainguard.io/b", "pool-a");
    kubectl_in(&ns.name).apply(&trainjob("running", "e2e-torch", false, &format!("  runtimePatches: [{a},{b}]\n")));
    wait_jobset_active(&ns.name, "running");
    // A merge patch replaces the list whole: same entries, other order.
    dry_run_denial(&ns.name, &runtime_patches(&[b.clone(), a.clone()]), TRAINGUARD, "spec.runtimePatches");
    // A full update (kubectl replace) with the order swapped.
    let out = kubectl_in(&ns.name).args(["replace", "--dry-run=server", "-f", "-"]).output_with(&trainjob(
        "running",
        "e2e-torch",
        false,
        &format!("  runtimePatches: [{b},{a}]\n"),
    ));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains(TRAINGUARD), "replace with a reorder: {err}");
}

/// The names of the pods in a namespace.
fn pods(ns: &str) -> Vec<String> {
    let list = kubectl_in(ns).args(["get", "pods"]).get_json().unwrap_or_default();
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["metadata"]["name"].as_str().map(String::from))
        .collect()
}

#[test]
fn change_and_resume_in_one_request_is_denied_while_the_old_runs_pods_terminate() {
    let ns = running_job("e2e-resume", false);
    let change = patch_entry("e2e.trainguard.io/user", "pool-b");
    let change_only = runtime_patches(std::slice::from_ref(&change));
    let change_and_resume = format!(r#"{{"spec":{{"suspend":false,"runtimePatches":[{change}]}}}}"#);
    // A finalizer holds the old run's pods in Terminating, as a slow shutdown or a lost node does.
    let held = pods(&ns.name);
    assert!(!held.is_empty(), "the running job has no pods");
    for pod in &held {
        kubectl_in(&ns.name)
            .args([
                "patch",
                "pod",
                pod,
                "--type=merge",
                "-p",
                r#"{"metadata":{"finalizers":["e2e.trainguard.io/hold"]}}"#,
            ])
            .ok();
    }
    kubectl_in(&ns.name)
        .args(["patch", "trainjob", "running", "--type=merge", "-p", r#"{"spec":{"suspend":true}}"#])
        .ok();
    // Idle by both accounts the gate reads: the JobSet's counts, and the TrainJob's own
    // status.jobsStatus, which Trainer copies from it a moment later.
    eventually("the old run's pods terminating, the JobSet and the TrainJob's status idle", || {
        let terminating = held.iter().all(|pod| {
            kubectl_in(&ns.name)
                .args(["get", "pod", pod])
                .get_json()
                .is_some_and(|p| !p["metadata"]["deletionTimestamp"].is_null())
        });
        let js = kubectl_in(&ns.name).args(["get", "jobset", "running"]).get_json()?;
        let active: i64 =
            js["status"]["replicatedJobsStatus"].as_array()?.iter().filter_map(|r| r["active"].as_i64()).sum();
        let tj = kubectl_in(&ns.name).args(["get", "trainjob", "running"]).get_json()?;
        let tj_active: i64 = tj["status"]["jobsStatus"]
            .as_array()
            .map_or(0, |jobs| jobs.iter().filter_map(|j| j["active"].as_i64()).sum());
        (terminating && active == 0 && tj_active == 0).then_some(())
    });
    // Change and resume at once (U4): new pods could start beside the terminating ones, so
    // trainguard denies (G5). Trainer looks only at the JobSet's active counts, now zero.
    dry_run_denial(&ns.name, &change_and_resume, TRAINGUARD, "terminating pod");
    // A change that keeps the job suspended (U3) starts nothing, so terminating pods do not block it.
    kubectl_in(&ns.name)
        .args(["patch", "trainjob", "running", "--type=merge", "--dry-run=server", "-p", &change_only])
        .ok();
    // Once the old run is gone, the same change-and-resume is allowed (applied, no dry run).
    for pod in &held {
        kubectl_in(&ns.name)
            .args(["patch", "pod", pod, "--type=json", "-p", r#"[{"op":"remove","path":"/metadata/finalizers"}]"#])
            .ok();
    }
    wait_no_pods(&ns.name);
    // trainguard's pod cache may still hold the pods a moment: its G5 denial may come first
    // (counted); any other answer but the allow is wrong.
    answers("change-and-resume allowed once the old run is gone", || {
        let out = kubectl_in(&ns.name)
            .args(["patch", "trainjob", "running", "--type=merge", "-p", &change_and_resume])
            .output();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.success() {
            Answer::Expected(())
        } else if err.contains(TRAINGUARD) && err.contains("terminating pod") {
            Answer::Earlier(err)
        } else {
            Answer::Wrong(err)
        }
    });
}

#[test]
fn suspended_with_the_jobset_still_active_is_denied() {
    // Suspending and changing in one request (U5): the JobSet is still active when the request
    // arrives, so both webhooks deny it whatever they race to say.
    let ns = running_job("e2e-suspend-change", false);
    let patch = format!(
        r#"{{"spec":{{"suspend":true,"runtimePatches":[{}]}}}}"#,
        patch_entry("e2e.trainguard.io/user", "pool-b")
    );
    dry_run_denial(&ns.name, &patch, TRAINGUARD, "active job");
}

#[test]
fn a_managed_by_change_is_denied_by_the_crd_before_any_webhook() {
    let ns = plane().namespace("e2e-managedby", &[("e2e.trainguard.io/trainer-webhook", "off")]);
    kubectl_in(&ns.name).apply(&trainjob("suspended", "e2e-torch", true, ""));
    let err = kubectl_in(&ns.name)
        .args([
            "patch",
            "trainjob",
            "suspended",
            "--type=merge",
            "-p",
            r#"{"spec":{"managedBy":"kueue.x-k8s.io/multikueue"}}"#,
        ])
        .fails();
    // Trainer's CRD makes managedBy immutable with a CEL rule; the API server answers 422 itself.
    assert!(err.contains("spec.managedBy") && err.contains("immutable"), "{err}");
    assert!(!err.contains("admission webhook"), "a webhook answered, not the CRD: {err}");
}

#[test]
fn only_risky_writes_reach_the_webhook() {
    let ns = running_job("e2e-skip", false);
    dry_run_denial(
        &ns.name,
        &runtime_patches(&[patch_entry("e2e.trainguard.io/user", "pool-b")]),
        TRAINGUARD,
        "spec.runtimePatches",
    );
    let reviews = |m: &str| metric_sum(m, "controller_runtime_webhook_requests_total", &["validate-trainer"]);
    let exclusions = |m: &str| {
        metric_sum(m, "apiserver_admission_match_condition_exclusions_total", &["validate.trainjob.trainguard.io"])
    };
    let (before_tg, before_api) = (reviews(&plane().webhook_metrics()), exclusions(&plane().apiserver_metrics()));

    let writes: &[&[&str]] = &[
        &["label", "trainjob", "running", "team=research"],
        &["annotate", "trainjob", "running", "note=hello"],
        &["patch", "trainjob", "running", "--type=merge", "-p", r#"{"spec":{"suspend":true}}"#],
        &["patch", "trainjob", "running", "--type=merge", "-p", r#"{"spec":{"suspend":false}}"#],
    ];
    for write in writes {
        kubectl_in(&ns.name).args(*write).ok();
    }
    let after_tg = reviews(&plane().webhook_metrics());
    let after_api = exclusions(&plane().apiserver_metrics());
    assert_eq!(after_tg, before_tg, "a label, annotation or suspend-only write reached trainguard");
    // Each UPDATE is excluded by the matchConditions (validating; the mutating webhook sees CREATE only).
    assert!(after_api - before_api >= writes.len() as f64, "exclusions {before_api} -> {after_api}");
}

/// 16 runtime patches (the CRD's maximum), each with a container carrying `env_per_patch` long
/// environment variables, and the last one a node selector: the deepest `!=` comparisons the
/// matchConditions make. (A patch's containers are frozen by the CRD's own transition rule, so
/// the change the test makes is the last patch's node selector.)
fn near_maximum_patches(env_per_patch: usize, pool: &str) -> String {
    let entries: Vec<String> = (0..16)
        .map(|p| {
            let env: Vec<String> = (0..env_per_patch)
                .map(|e| format!(r#"{{"name":"VAR_{p}_{e}","value":"{}"}}"#, "x".repeat(200)))
                .collect();
            let selector = if p == 15 { format!(r#","nodeSelector":{{"e2e.trainguard.io/pool":"{pool}"}}"#) } else { String::new() };
            format!(
                r#"{{"manager":"e2e.trainguard.io/m{p}","trainingRuntimeSpec":{{"template":{{"spec":{{"replicatedJobs":[{{"name":"node","template":{{"spec":{{"template":{{"spec":{{"containers":[{{"name":"node","env":[{}]}}]{selector}}}}}}}}}}}]}}}}}}}}"#,
                env.join(",")
            )
        })
        .collect();
    runtime_patches(&entries)
}

#[test]
fn a_near_maximum_trainjob_stays_inside_the_match_conditions_cost_budget() {
    let ns = plane().namespace("e2e-cost", &[("e2e.trainguard.io/trainer-webhook", "off")]);
    kubectl_in(&ns.name).apply(&trainjob("big", "e2e-torch", true, ""));
    // The patches are too long for a command line: kubectl reads them from a file.
    let file = plane().run_dir().join("near-maximum.json");
    let patch = |pool: &str| {
        std::fs::write(&file, near_maximum_patches(100, pool)).expect("write patch");
        kubectl_in(&ns.name).args(["patch", "trainjob", "big", "--type=merge", "--patch-file"]).args([&file]).ok();
    };
    patch("pool-a");
    let before =
        metric_sum(&plane().webhook_metrics(), "controller_runtime_webhook_requests_total", &["validate-trainer"]);
    // Only the last patch differs: every comparison runs to the end. Were the cost budget
    // exceeded, the condition would error and failurePolicy Fail would refuse the write.
    patch("pool-b");
    let after =
        metric_sum(&plane().webhook_metrics(), "controller_runtime_webhook_requests_total", &["validate-trainer"]);
    assert!(after > before, "the near-maximum update did not reach trainguard ({before} -> {after})");
}
