//! trainguard's controller against the real API server, with the shipped controller
//! ServiceAccount's RBAC (a token, not admin): its Lease, its watches, the TrainJob TTL.

use crate::cluster::{ActMode, condition_true, event_reasons, eventually, plane, trainjob};

pub(crate) fn ttl_job(name: &str, runtime: &str, suspend: bool) -> String {
    trainjob(name, runtime, suspend, "").replacen(
        "metadata:\n",
        "metadata:\n  annotations:\n    trainguard.io/ttl-seconds-after-finished: \"1\"\n",
        1,
    )
}

#[test]
fn the_controller_holds_its_lease_with_its_own_service_account() {
    let lease = eventually("the controller's Lease", || {
        plane().kubectl().args(["-n", "trainguard-system", "get", "lease", "trainguard-controller"]).get_json()
    });
    let holder = lease["spec"]["holderIdentity"].as_str().unwrap_or_default();
    assert!(holder.contains("trainguard-controller"), "Lease holder: {holder}");
    // The audit log shows the Lease written by the controller's ServiceAccount, not by an admin.
    let audit = std::fs::read_to_string(plane().run_dir().join("logs/audit.log")).expect("audit log");
    let sa = "system:serviceaccount:trainguard-system:trainguard-controller";
    assert!(
        audit.lines().any(|l| l.contains("\"resource\":\"leases\"") && l.contains(sa)),
        "no Lease write by {sa} in the audit log"
    );
}

#[test]
fn ttl_reports_in_report_mode_then_deletes_a_finished_trainjob_and_keeps_a_suspended_one() {
    let ns = plane().namespace("e2e-ttl", &[]);
    let k = || plane().kubectl().args(["-n", &ns.name]);
    k().apply(&ttl_job("finished", "e2e-torch-quick", false));
    k().apply(&ttl_job("suspended", "e2e-torch-quick", true));
    // kwok completes the pod, the Job and JobSet complete, Trainer marks the TrainJob Complete.
    eventually("TrainJob finished Complete", || {
        let job = k().args(["get", "trainjob", "finished"]).get_json()?;
        condition_true(&job, "Complete").then_some(())
    });
    // Report mode (as shipped): the deletion is only reported.
    eventually("a WouldTTLExpiredDeleted event", || {
        event_reasons(&ns.name, "finished").iter().any(|r| r == "WouldTTLExpiredDeleted").then_some(())
    });
    assert!(k().args(["get", "trainjob", "finished"]).get_json().is_some(), "report mode deleted a TrainJob");

    // Act mode, no grace: the finished job goes, the suspended one stays.
    let _act = ActMode::start(&["--ttl-grace=0s"]);
    eventually("the finished TrainJob deleted by its TTL", || {
        k().args(["get", "trainjob", "finished"]).get_json().is_none().then_some(())
    });
    let kept = k().args(["get", "trainjob", "suspended"]).get_json();
    assert!(kept.is_some_and(|j| j["metadata"]["deletionTimestamp"].is_null()), "the suspended TrainJob was deleted");
    let audit = std::fs::read_to_string(plane().run_dir().join("logs/audit.log")).expect("audit log");
    assert!(
        audit.lines().any(|l| l.contains("\"verb\":\"delete\"")
            && l.contains("\"name\":\"finished\"")
            && l.contains("system:serviceaccount:trainguard-system:trainguard-controller")),
        "the delete was not made with the controller's ServiceAccount"
    );
}

/// A runtime whose Job fails 2s after it starts (`activeDeadlineSeconds`): the JobSet and then the
/// TrainJob fail.
fn failing_runtime_yaml() -> String {
    let runtime = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/e2e/manifests/runtimes.yaml"))
        .expect("runtimes.yaml");
    let quick = runtime.split("---").find(|d| d.contains("name: e2e-torch-quick")).expect("e2e-torch-quick");
    let failing = quick
        .replace("name: e2e-torch-quick", "name: e2e-torch-fail")
        .replace(
            "            spec:\n              template:",
            "            spec:\n              activeDeadlineSeconds: 2\n              template:",
        )
        .replace("delay: 2s", "delay: 1h")
        .replace("jitter-delay: 1s", "jitter-delay: 1h");
    assert!(failing.contains("activeDeadlineSeconds: 2"), "{failing}");
    failing
}

fn failing_runtime() {
    let out = plane().kubectl().args(["apply", "--server-side", "-f", "-"]).output_with(&failing_runtime_yaml());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
#[allow(clippy::disallowed_methods, reason = "a quiet period showing the later change wins and nothing is deleted")]
fn ttl_deletes_a_failed_trainjob_never_a_running_one_and_a_later_change_wins() {
    failing_runtime();
    let ns = plane().namespace("e2e-ttl-failed", &[]);
    let k = || plane().kubectl().args(["-n", &ns.name]);
    let _act = ActMode::start(&["--ttl-grace=15s"]);
    k().apply(&ttl_job("failed", "e2e-torch-fail", false));
    k().apply(&ttl_job("running", "e2e-torch", false));
    k().apply(&ttl_job("changed", "e2e-torch-quick", false));
    eventually("'changed' Complete", || {
        condition_true(&k().args(["get", "trainjob", "changed"]).get_json()?, "Complete").then_some(())
    });
    // Inside the grace, the owner asks for an hour: the later change wins over the expiry the
    // controller had scheduled.
    k().args(["annotate", "--overwrite", "trainjob", "changed", "trainguard.io/ttl-seconds-after-finished=3600"]).ok();
    eventually("'failed' Failed", || {
        condition_true(&k().args(["get", "trainjob", "failed"]).get_json()?, "Failed").then_some(())
    });
    eventually("the Failed TrainJob deleted by its TTL", || {
        k().args(["get", "trainjob", "failed"]).get_json().is_none().then_some(())
    });
    assert!(event_reasons(&ns.name, "failed").iter().any(|r| r == "TTLExpiredDeleted"));
    // 'changed' finished before 'failed': its old expiry has passed too.
    std::thread::sleep(std::time::Duration::from_secs(5));
    for kept in ["running", "changed"] {
        let job = k().args(["get", "trainjob", kept]).get_json();
        assert!(job.is_some_and(|j| j["metadata"]["deletionTimestamp"].is_null()), "'{kept}' was deleted");
    }
}

/// Trainer ≤ v2.3's JobSet-TTL loop: a runtime whose JobSet template sets
/// `ttlSecondsAfterFinished`, and a job that fails. JobSet deletes the finished JobSet after its
/// TTL, Trainer recreates it for the Failed TrainJob, over and over; trainguard raises
/// `JobSetRecreatedAfterFailure` and its gauge, and `validate` warns about the runtime. Trainer
/// removes `Failed` when it recreates the JobSet and sets it again at the new JobSet's failure: the
/// gauge holds only because the controller remembers the first failure.
#[test]
fn trainers_jobset_ttl_loop_is_reported_and_validate_warns_on_the_runtime() {
    let looping = failing_runtime_yaml().replace("name: e2e-torch-fail", "name: e2e-torch-jobset-ttl").replacen(
        "  template:\n    spec:\n",
        "  template:\n    spec:\n      ttlSecondsAfterFinished: 10\n",
        1,
    );
    assert!(looping.contains("ttlSecondsAfterFinished: 10"), "{looping}");
    let file = plane().run_dir().join("e2e-torch-jobset-ttl.yaml");
    std::fs::write(&file, &looping).expect("write runtime");
    plane().kubectl().args(["apply", "--server-side", "--force-conflicts", "-f", file.to_str().expect("path")]).ok();
    // The same file through `validate`: one warning naming the runtime, its line and the TTL, as
    // a JSON line; the exit status stays 0 (a runtime is no TrainJob to deny), and with no
    // TrainJob in the file `--strict` turns the run into a failure (exit 1).
    let validate = |strict: bool| {
        let mut cmd = std::process::Command::new(plane().var("TRAINGUARD_BIN"));
        cmd.args(["validate", "--trainer-version", "v2.3", "--output", "json"]);
        if strict {
            cmd.arg("--strict");
        }
        cmd.arg(&file).output().expect("run trainguard validate")
    };
    let out = validate(false);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "validate's exit status: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    let warnings: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["warning"].as_str().is_some_and(|w| w.contains("ttlSecondsAfterFinished=10")))
        .collect();
    assert_eq!(warnings.len(), 1, "validate's warnings about the runtime: {stdout}");
    let warning = &warnings[0];
    assert!(
        warning["warning"]
            .as_str()
            .is_some_and(|w| w.contains("e2e-torch-jobset-ttl") && w.contains("kubeflow/trainer#3779")),
        "{warning}"
    );
    assert_eq!(warning["file"], file.to_str().expect("path"), "{warning}");
    assert!(warning["line"].as_u64().is_some_and(|l| l >= 1), "{warning}");
    assert_eq!(validate(true).status.code(), Some(1), "validate --strict passed a file with no TrainJob");

    let ns = plane().namespace("e2e-jobset-ttl", &[]);
    let k = || plane().kubectl().args(["-n", &ns.name]);
    k().apply(&trainjob("loop", "e2e-torch-jobset-ttl", false, ""));
    eventually("'loop' Failed", || {
        condition_true(&k().args(["get", "trainjob", "loop"]).get_json()?, "Failed").then_some(())
    });
    let first = k().args(["get", "jobset", "loop"]).get_json().expect("JobSet")["metadata"]["uid"].clone();
    eventually("the JobSet recreated by Trainer after the failure", || {
        let js = k().args(["get", "jobset", "loop"]).get_json()?;
        (js["metadata"]["uid"] != first).then_some(())
    });
    eventually("a JobSetRecreatedAfterFailure event on the TrainJob", || {
        event_reasons(&ns.name, "loop").iter().any(|r| r == "JobSetRecreatedAfterFailure").then_some(())
    });
    let port = plane().var("TRAINGUARD_CONTROLLER_ADMIN_PORT");
    eventually("trainguard_jobset_recreated_after_failure_trainjobs at 1", || {
        let out = std::process::Command::new("curl")
            .args(["-sf", "--max-time", "10", &format!("http://127.0.0.1:{port}/metrics")])
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (crate::cluster::metric_sum(&text, "trainguard_jobset_recreated_after_failure_trainjobs", &[]) >= 1.0)
            .then_some(())
    });
    let _ = plane().kubectl().args(["delete", "clustertrainingruntime", "e2e-torch-jobset-ttl"]).output();
}

/// The TTL delete's precondition race on a real API server: owners of ten TrainJobs (TTL 5s,
/// no grace) extend the TTL to an hour at moments spread around the expiry, while the controller
/// reads each job live and deletes it with UID and resourceVersion preconditions. Whichever write
/// lands first wins, never both: a TTL change the API server accepted (200) leaves the job in
/// place, and a job the controller deleted refuses the owner's change (404). A delete that loses
/// the race (409) is planned again from the changed job, which no longer expires. The writes land
/// on both sides of the expiry; whether one falls between the controller's live read and its
/// delete (a 409) is luck, and the summary printed says so — the 409 handling itself is pinned
/// against the fake API in the executor's unit tests.
#[test]
#[allow(clippy::disallowed_methods, reason = "the race with the TTL expiry is timed against the real clock")]
fn a_ttl_change_racing_the_expiry_wins_or_loses_whole() {
    let ns = plane().namespace("e2e-ttl-race", &[]);
    let k = || plane().kubectl().args(["-n", &ns.name]);
    let _act = ActMode::start(&["--ttl-grace=0s"]);
    let since = crate::cluster::audit_now();
    // Offsets from the expiry (finish + 5s) at which each owner writes, in milliseconds.
    // kubectl takes 100-200 ms from its start to its request, so the writes land from just before
    // the expiry to just after it; the controller's live read and delete sit in that window.
    let offsets = [-400i64, -220, -200, -180, -160, -140, -120, -100, 0, 200];
    let names: Vec<String> = (0..offsets.len()).map(|i| format!("race-{i}")).collect();
    for n in &names {
        k().apply(&ttl_job(n, "e2e-torch-quick", false).replace("finished: \"1\"", "finished: \"5\""));
    }
    let outcomes: Vec<(String, bool)> = std::thread::scope(|s| {
        let handles: Vec<_> = names
            .iter()
            .zip(offsets)
            .map(|(name, offset)| {
                let k = &k;
                s.spawn(move || {
                    let finished = eventually(&format!("'{name}' Complete"), || {
                        let job = k().args(["get", "trainjob", name]).get_json()?;
                        let c = job["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "Complete")?;
                        (c["status"] == "True").then(|| c["lastTransitionTime"].as_str().map(String::from))?
                    });
                    assert!(
                        k().args(["get", "trainjob", name])
                            .get_json()
                            .is_none_or(|j| j["metadata"]["finalizers"].is_null()),
                        "a finalizer on the TrainJob would change what a patch after the delete answers"
                    );
                    let finished: k8s_openapi::jiff::Timestamp = finished.parse().expect("lastTransitionTime");
                    let at = finished + k8s_openapi::jiff::SignedDuration::from_millis(5000 + offset);
                    let wait = at.duration_since(k8s_openapi::jiff::Timestamp::now());
                    if let Ok(wait) = std::time::Duration::try_from(wait) {
                        std::thread::sleep(wait);
                    }
                    let out = k()
                        .args([
                            "annotate",
                            "--overwrite",
                            "trainjob",
                            name,
                            "trainguard.io/ttl-seconds-after-finished=3600",
                        ])
                        .output();
                    (name.clone(), out.status.success())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("owner thread")).collect()
    });
    // Let a delete that lost the race be planned again, and anything else settle.
    std::thread::sleep(std::time::Duration::from_secs(5));
    let audit = crate::cluster::audit_since(&since);
    let deletes = |name: &str, code: i64| {
        audit
            .iter()
            .filter(|e| {
                e["verb"] == "delete"
                    && e["stage"] == "ResponseComplete"
                    && e["objectRef"]["resource"] == "trainjobs"
                    && e["objectRef"]["name"] == name
                    && e["user"]["username"] == "system:serviceaccount:trainguard-system:trainguard-controller"
                    && e["responseStatus"]["code"] == code
            })
            .count()
    };
    let mut summary = Vec::new();
    for (name, changed) in &outcomes {
        let exists = k().args(["get", "trainjob", name]).get_json().is_some();
        let (deleted, conflicts) = (deletes(name, 200), deletes(name, 409));
        summary.push(format!(
            "{name}: change {}, deleted {deleted}, delete conflicts {conflicts}",
            if *changed { "accepted" } else { "refused" }
        ));
        if *changed {
            assert!(exists && deleted == 0, "{name}: the owner's TTL change was accepted, then the job deleted");
        } else {
            assert!(
                !exists && deleted == 1,
                "{name}: the owner's change was refused but the job was not deleted by the controller"
            );
        }
    }
    eprintln!("ttl race: {}", summary.join("; "));
}
