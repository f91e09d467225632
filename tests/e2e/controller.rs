//! trainguard's controller against the real API server, with the shipped controller
//! ServiceAccount's RBAC (a token, not admin): its Lease, its watches, the TrainJob TTL.

use crate::cluster::{eventually, plane, trainjob};

/// Switches the controller to act mode as an operator does (the act-mode RBAC from
/// deploy/components/act-rbac, then `--controller-mode=act` and the extra flags); dropping it
/// restarts the controller as shipped (report mode) and takes the write permissions away again.
struct ActMode;

impl ActMode {
    fn start(extra: &[&str]) -> ActMode {
        let rbac = plane().run_dir().join("trainguard-act-rbac.yaml");
        plane().kubectl().args(["apply", "-f"]).args([&rbac]).ok();
        plane().script(&["stop", "controller"]);
        let mut args = vec!["start", "controller", "--controller-mode=act"];
        args.extend_from_slice(extra);
        plane().script(&args);
        ActMode
    }
}

impl Drop for ActMode {
    fn drop(&mut self) {
        plane().script(&["stop", "controller"]);
        let rbac = plane().run_dir().join("trainguard-act-rbac.yaml");
        let _ = plane().kubectl().args(["delete", "--ignore-not-found", "-f"]).args([&rbac]).output();
        plane().script(&["start", "controller"]);
    }
}

fn ttl_job(name: &str, runtime: &str, suspend: bool) -> String {
    trainjob(name, runtime, suspend, "").replacen(
        "metadata:\n",
        "metadata:\n  annotations:\n    trainguard.io/ttl-seconds-after-finished: \"1\"\n",
        1,
    )
}

fn condition_true(obj: &serde_json::Value, kind: &str) -> bool {
    obj["status"]["conditions"].as_array().is_some_and(|c| c.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

fn event_reasons(ns: &str, object: &str) -> Vec<String> {
    let events = plane()
        .kubectl()
        .args(["-n", ns, "get", "events", "--field-selector", &format!("involvedObject.name={object}")])
        .get_json()
        .unwrap_or_default();
    events["items"]
        .as_array()
        .map(|items| items.iter().filter_map(|e| e["reason"].as_str().map(String::from)).collect())
        .unwrap_or_default()
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
