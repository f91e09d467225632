//! What the API server enforces around the webhook: the opt-out ValidatingAdmissionPolicy, the
//! `failurePolicy: Fail` outage, and the mutating defaults.

use crate::cluster::{eventually, plane, trainjob};

#[test]
fn the_opt_out_label_is_refused_by_the_api_server_for_users_outside_the_opt_out_groups() {
    let ns = plane().namespace("e2e-optout", &[]);
    let labelled = "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: opted-out\n  labels:\n    trainguard.io/webhook: disabled\nspec:\n  suspend: true\n  runtimeRef:\n    name: e2e-torch\n";
    // alice may create TrainJobs in this namespace (RBAC), but is in no opt-out group.
    plane().kubectl().apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: trainjob-writer\n  namespace: {ns}\nrules:\n- apiGroups: [trainer.kubeflow.org]\n  resources: [trainjobs]\n  verbs: [create, update, patch, get]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: alice\n  namespace: {ns}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: trainjob-writer\nsubjects:\n- kind: User\n  name: alice\n  apiGroup: rbac.authorization.k8s.io\n",
        ns = ns.name
    ));
    // An ordinary user (impersonated by the admin, no system:masters) may not set the label...
    let out = plane()
        .kubectl()
        .args([
            "-n",
            &ns.name,
            "--as",
            "alice",
            "--as-group",
            "system:authenticated",
            "create",
            "--dry-run=server",
            "-f",
            "-",
        ])
        .output_with(labelled);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "alice set the opt-out label");
    assert!(err.contains("ValidatingAdmissionPolicy 'trainguard-opt-out'"), "not refused by the policy: {err}");
    // ...a cluster admin may.
    let out = plane().kubectl().args(["-n", &ns.name, "create", "-f", "-"]).output_with(labelled);
    assert!(out.status.success(), "an admin could not opt out: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn with_the_webhook_down_failure_policy_fail_refuses_only_overrides_edits() {
    let ns = plane().namespace("e2e-outage", &[("e2e.trainguard.io/trainer-webhook", "off")]);
    plane().kubectl().args(["-n", &ns.name]).apply(&trainjob("suspended", "e2e-torch", true, ""));
    plane().script(&["stop", "webhook"]);
    let _restart = RestartWebhook;

    let patch = r#"{"spec":{"runtimePatches":[{"manager":"e2e.trainguard.io/user","trainingRuntimeSpec":{}}]}}"#;
    let err =
        plane().kubectl().args(["-n", &ns.name, "patch", "trainjob", "suspended", "--type=merge", "-p", patch]).fails();
    assert!(
        err.contains("failed calling webhook \"validate.trainjob.trainguard.io\""),
        "the API server's outage message is missing: {err}"
    );
    // Writes the matchConditions skip go on: a label, a suspend-only resume.
    plane().kubectl().args(["-n", &ns.name, "label", "trainjob", "suspended", "team=research"]).ok();
    plane()
        .kubectl()
        .args(["-n", &ns.name, "patch", "trainjob", "suspended", "--type=merge", "-p", r#"{"spec":{"suspend":false}}"#])
        .ok();
    // Nothing else in the cluster is affected: a ConfigMap, a Pod-less Job object.
    plane().kubectl().args(["-n", &ns.name, "create", "configmap", "unaffected", "--from-literal=a=b"]).ok();
}

/// Starts trainguard's webhook again when the outage test ends, pass or fail.
struct RestartWebhook;

impl Drop for RestartWebhook {
    fn drop(&mut self) {
        plane().script(&["start", "webhook"]);
    }
}

#[test]
fn the_mutating_defaults_are_applied_once_and_idempotent_on_reapply() {
    let ns = plane().namespace("e2e-defaults", &[]);
    let bare = "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: bare\nspec:\n  runtimeRef:\n    name: e2e-torch\n  suspend: true\n";
    plane().kubectl().args(["-n", &ns.name]).apply(bare);
    let first = eventually("the TrainJob stored", || {
        plane().kubectl().args(["-n", &ns.name, "get", "trainjob", "bare"]).get_json()
    });
    assert_eq!(first["spec"]["managedBy"], "trainer.kubeflow.org/trainjob-controller");
    assert_eq!(first["spec"]["runtimeRef"]["kind"], "ClusterTrainingRuntime");
    assert_eq!(first["spec"]["runtimeRef"]["apiGroup"], "trainer.kubeflow.org");
    // Re-applying the same manifest changes nothing (no new generation).
    plane().kubectl().args(["-n", &ns.name]).apply(bare);
    let second = plane().kubectl().args(["-n", &ns.name, "get", "trainjob", "bare"]).get_json().expect("still there");
    assert_eq!(first["metadata"]["generation"], second["metadata"]["generation"]);
    assert_eq!(first["spec"], second["spec"]);
}
