//! What the API server enforces around the webhook: the opt-out ValidatingAdmissionPolicy, the
//! `failurePolicy: Fail` outage, and the defaults: from the shipped CRD alone (the default
//! install), or from the opt-in mutating webhook or MutatingAdmissionPolicy on a CRD without them.

use crate::cluster::{Namespace, eventually, metric_sum, plane, trainjob};
use trainguard_core::admission::Endpoint;

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

/// The fields trainguard's defaulting webhook fills, as paths in the CRD's schema.
const DEFAULTED: &[&str] = &[
    "/properties/spec/properties/suspend",
    "/properties/spec/properties/managedBy",
    "/properties/spec/properties/runtimeRef/properties/kind",
    "/properties/spec/properties/runtimeRef/properties/apiGroup",
];

/// The plane's TrainJob CRD, as JSON, without the schema defaults of the fields trainguard's
/// defaulting webhook fills, and how many it removed: with it only trainguard can fill them (with
/// the shipped CRD the API server's schema defaults fill them first, and trainguard's patch is
/// empty). Other defaults stay: the API server requires one on a list-map key.
fn trainjob_crd_without_defaults() -> (String, usize) {
    let path = std::path::Path::new(plane().var("TRAINER_MODULE_DIR"))
        .join("manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml");
    let text = std::fs::read_to_string(&path).expect("Trainer's TrainJob CRD");
    let mut crd: serde_json::Value = serde_saphyr::from_str(&text).expect("CRD YAML");
    let mut removed = 0;
    for version in crd["spec"]["versions"].as_array_mut().expect("versions") {
        for field in DEFAULTED {
            let schema = version["schema"]["openAPIV3Schema"].pointer_mut(field);
            if schema.and_then(|s| s.as_object_mut()).and_then(|s| s.remove("default")).is_some() {
                removed += 1;
            }
        }
    }
    (crd.to_string(), removed)
}

/// Installs a TrainJob CRD given as JSON and waits until the API server serves it: a dry-run
/// CREATE of a bare TrainJob in a namespace without trainguard's and Trainer's webhooks comes back
/// with `spec.managedBy` set or not, as the CRD's defaults say.
#[allow(clippy::disallowed_methods, reason = "polls the real API server until the CRD is served")]
fn install_crd_json(crd: &str, defaults: bool) {
    let out = plane().kubectl().args(["apply", "--server-side", "--force-conflicts", "-f", "-"]).output_with(crd);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Neither trainguard's webhooks nor Trainer's (whose validator refuses a runtimeRef without
    // the kind the defaults would give) in the probe's namespace: the CRD alone answers.
    let probe_ns = plane().namespace(
        "e2e-defaults-probe",
        &[("trainguard.io/webhook", "disabled"), ("e2e.trainguard.io/trainer-webhook", "off")],
    );
    let bare = "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: probe\nspec:\n  runtimeRef:\n    name: e2e-torch\n  suspend: true\n";
    eventually(&format!("the API server serving the TrainJob CRD with defaults={defaults}"), || {
        let out = plane()
            .kubectl()
            .args(["-n", &probe_ns.name, "create", "--dry-run=server", "-o", "json", "-f", "-"])
            .output_with(bare);
        let stored: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        (stored["spec"]["managedBy"].is_string() == defaults).then_some(())
    });
}

/// Puts the shipped TrainJob CRD back, pass or fail.
struct ShippedCrd(String);

impl Drop for ShippedCrd {
    fn drop(&mut self) {
        install_crd_json(&self.0, true);
    }
}

/// trainguard's defaulting patches (`rule="defaulted"`: a CREATE it added fields to).
fn defaulted() -> f64 {
    metric_sum(&plane().webhook_metrics(), "trainguard_admission_decisions_total", &["rule=\"defaulted\""])
}

/// trainguard's answers on `endpoint` (the mutating one: every answer, patch or not).
fn decisions(endpoint: Endpoint, labels: &[&str]) -> f64 {
    let webhook = format!("webhook=\"{}\"", endpoint.path());
    let labels: Vec<&str> = std::iter::once(webhook.as_str()).chain(labels.iter().copied()).collect();
    metric_sum(&plane().webhook_metrics(), "trainguard_admission_decisions_total", &labels)
}

fn mutate_decisions() -> f64 {
    decisions(Endpoint::Mutate, &[])
}

/// The shipped TrainJob CRD replaced by one without the defaults trainguard's defaulting fills
/// (see `trainjob_crd_without_defaults`), until the guard drops.
fn crd_without_defaults() -> ShippedCrd {
    let path = std::path::Path::new(plane().var("TRAINER_MODULE_DIR"))
        .join("manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml");
    let shipped: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(path).expect("CRD")).expect("CRD YAML");
    let restore = ShippedCrd(shipped.to_string());
    let (crd, removed) = trainjob_crd_without_defaults();
    assert_eq!(removed, DEFAULTED.len(), "the shipped CRD's defaults of the four fields");
    install_crd_json(&crd, false);
    restore
}

/// A TrainJob with none of the four defaulted fields.
const BARE: &str = "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: bare\nspec:\n  runtimeRef:\n    name: e2e-torch\n";

/// The TrainJob the API server would store for `manifest` in `ns` (a server-side dry-run
/// CREATE: every admission step runs, nothing is stored or started).
fn dry_run_create(ns: &str, manifest: &str) -> serde_json::Value {
    let out =
        plane().kubectl().args(["-n", ns, "create", "--dry-run=server", "-o", "json", "-f", "-"]).output_with(manifest);
    assert!(out.status.success(), "dry-run CREATE failed: {}\n{manifest}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the stored TrainJob")
}

/// One of the opt-in defaulting components `plane.sh up` renders aside (the mutating webhook's
/// configuration, or the MutatingAdmissionPolicy and its binding), applied for one test and
/// deleted when it drops, pass or fail. Only on a CRD without the defaults (`crd_without_defaults`,
/// which must outlive it): that is how it tells when the API server applies it and when no longer,
/// by a dry-run CREATE of a bare TrainJob in a namespace of its own, without Trainer's webhooks
/// (whose validator refuses a runtimeRef without the kind the defaults give).
struct OptIn {
    file: std::path::PathBuf,
    probe: Namespace,
}

impl OptIn {
    /// Applies `file` and waits until the API server applies it: the probe comes back with
    /// `spec.managedBy`.
    fn install(file: &str) -> OptIn {
        let file = plane().run_dir().join(file);
        let probe = plane().namespace("e2e-defaults-opt-in", &[("e2e.trainguard.io/trainer-webhook", "off")]);
        plane().kubectl().args(["apply", "-f", file.to_str().expect("utf-8 path")]).ok();
        let opt_in = OptIn { file, probe };
        eventually(&format!("{} in force", opt_in.file.display()), || {
            dry_run_create(&opt_in.probe.name, BARE)["spec"]["managedBy"].is_string().then_some(())
        });
        opt_in
    }
}

impl Drop for OptIn {
    fn drop(&mut self) {
        plane().kubectl().args(["delete", "--ignore-not-found", "-f", self.file.to_str().expect("utf-8 path")]).ok();
        eventually(&format!("{} no longer in force", self.file.display()), || {
            (!dry_run_create(&self.probe.name, BARE)["spec"]["managedBy"].is_string()).then_some(())
        });
    }
}

#[test]
fn the_mutating_defaults_fill_a_crd_without_schema_defaults_once_and_are_idempotent_on_reapply() {
    let _restore = crd_without_defaults();
    let ns = plane().namespace("e2e-defaults", &[]);
    // The webhook is opt-in (deploy/components/mutating-webhook); the plane registers only the
    // validating one.
    let _webhook = OptIn::install("trainguard-mutating-webhook.yaml");
    let bare = "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: bare\nspec:\n  runtimeRef:\n    name: e2e-torch\n  suspend: true\n";
    let before = defaulted();
    plane().kubectl().args(["-n", &ns.name]).apply(bare);
    let first = plane().kubectl().args(["-n", &ns.name, "get", "trainjob", "bare"]).get_json().expect("stored");
    assert_eq!(first["spec"]["managedBy"], "trainer.kubeflow.org/trainjob-controller", "{first}");
    assert_eq!(first["spec"]["runtimeRef"]["kind"], "ClusterTrainingRuntime", "{first}");
    assert_eq!(first["spec"]["runtimeRef"]["apiGroup"], "trainer.kubeflow.org", "{first}");
    // The fields came from trainguard: the CRD has no defaults, and its count rose by exactly
    // this one CREATE.
    assert_eq!(defaulted() - before, 1.0, "trainguard's defaulting patches for one CREATE");
    // Re-applying the same manifest changes nothing (no new generation), and trainguard is not
    // asked again (the defaulting webhook sees CREATE only).
    plane().kubectl().args(["-n", &ns.name]).apply(bare);
    let second = plane().kubectl().args(["-n", &ns.name, "get", "trainjob", "bare"]).get_json().expect("still there");
    assert_eq!(first["metadata"]["generation"], second["metadata"]["generation"]);
    assert_eq!(first["spec"], second["spec"]);
    assert_eq!(defaulted() - before, 1.0, "a re-apply was defaulted again");
}

/// components/mutating-policy: the API server fills the four fields itself (no call to trainguard)
/// where the CRD has no defaults for them, leaves every field that is set as it is, and leaves an
/// opted-out TrainJob alone, as the webhook does. Trainer's own webhooks are off in the namespace,
/// so the policy is the only thing that could have set them.
#[test]
fn the_mutating_admission_policy_fills_a_crd_without_schema_defaults_and_leaves_set_fields_alone() {
    let _restore = crd_without_defaults();
    let ns = plane().namespace("e2e-defaults-policy", &[("e2e.trainguard.io/trainer-webhook", "off")]);
    let _policy = OptIn::install("trainguard-mutating-policy.yaml");
    let before = mutate_decisions();

    // JSON is YAML: the spec as written goes in as it is.
    let manifest = |labels: &str, spec: &serde_json::Value| {
        format!(
            "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: job\n{labels}spec: {spec}\n"
        )
    };
    let opted_out = "  labels:\n    trainguard.io/webhook: disabled\n";
    let bare = serde_json::json!({"runtimeRef": {"name": "e2e-torch"}});
    let defaults = serde_json::json!({
        "suspend": false,
        "managedBy": "trainer.kubeflow.org/trainjob-controller",
        "runtimeRef": {"name": "e2e-torch", "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime"},
    });
    let set = serde_json::json!({
        "suspend": true,
        "managedBy": "kueue.x-k8s.io/multikueue",
        "runtimeRef": {"name": "e2e-torch", "apiGroup": "example.com", "kind": "TrainingRuntime"},
    });
    // (what, labels, spec as written, spec as stored)
    let cases = [
        ("nothing set", "", bare.clone(), defaults.clone()),
        ("everything set", "", set.clone(), set),
        (
            "some set",
            "",
            serde_json::json!({"suspend": true, "runtimeRef": {"name": "e2e-torch", "kind": "TrainingRuntime"}}),
            serde_json::json!({
                "suspend": true,
                "managedBy": "trainer.kubeflow.org/trainjob-controller",
                "runtimeRef": {"name": "e2e-torch", "apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime"},
            }),
        ),
        ("opted out", opted_out, bare.clone(), bare),
    ];
    for (what, labels, spec, want) in cases {
        let stored = dry_run_create(&ns.name, &manifest(labels, &spec));
        assert_eq!(stored["spec"], want, "{what}");
    }
    // A real CREATE is stored with the defaults, and a re-apply changes nothing.
    let suspended = manifest("", &serde_json::json!({"suspend": true, "runtimeRef": {"name": "e2e-torch"}}));
    plane().kubectl().args(["-n", &ns.name]).apply(&suspended);
    let first = plane().kubectl().args(["-n", &ns.name, "get", "trainjob", "job"]).get_json().expect("stored");
    assert_eq!(first["spec"]["managedBy"], defaults["managedBy"], "{first}");
    assert_eq!(first["spec"]["runtimeRef"], defaults["runtimeRef"], "{first}");
    plane().kubectl().args(["-n", &ns.name]).apply(&suspended);
    let second = plane().kubectl().args(["-n", &ns.name, "get", "trainjob", "job"]).get_json().expect("still there");
    assert_eq!(
        (&first["metadata"]["generation"], &first["spec"]),
        (&second["metadata"]["generation"], &second["spec"])
    );
    assert_eq!(mutate_decisions(), before, "trainguard's mutating webhook was called");
}

/// Whether the API server serves MutatingAdmissionPolicy in `admissionregistration.k8s.io/v1`
/// (Kubernetes 1.36 and later; the oldest supported minor does not).
fn serves_mutating_admission_policy() -> bool {
    let group = plane().kubectl().args(["get", "--raw", "/apis/admissionregistration.k8s.io/v1"]).ok();
    let group: serde_json::Value = serde_json::from_str(&group).expect("the group's resource list");
    group["resources"].as_array().expect("resources").iter().any(|r| r["name"] == "mutatingadmissionpolicies")
}

/// The default install: neither the mutating webhook nor the policy (where the API server serves
/// the kind) is registered, and a plain TrainJob CREATE on the shipped CRD gets all four fields
/// from the CRD's schema defaults alone, without a call to trainguard's mutating webhook (its
/// decisions do not rise; the validating webhook's do, so the count is live).
#[test]
fn the_default_install_leaves_the_defaults_to_the_shipped_crd_without_a_webhook_call() {
    let ns = plane().namespace("e2e-defaults-crd", &[]);
    let mut registrations = vec!["mutatingwebhookconfiguration/trainguard-mutating"];
    if serves_mutating_admission_policy() {
        registrations.push("mutatingadmissionpolicy/trainguard-defaults");
    }
    for kind in registrations {
        let out = plane().kubectl().args(["get", kind, "--ignore-not-found", "-o", "name"]).ok();
        assert_eq!(out.trim(), "", "{kind} is registered");
    }
    let validate_creates = || decisions(Endpoint::Validate, &["operation=\"CREATE\""]);
    let (mutate_before, validate_before) = (mutate_decisions(), validate_creates());
    plane().kubectl().args(["-n", &ns.name]).apply(BARE);
    let stored = plane().kubectl().args(["-n", &ns.name, "get", "trainjob", "bare"]).get_json().expect("stored");
    assert_eq!(
        stored["spec"],
        serde_json::json!({
            "suspend": false,
            "managedBy": "trainer.kubeflow.org/trainjob-controller",
            "runtimeRef": {"name": "e2e-torch", "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime"},
        }),
        "the CRD's defaults"
    );
    assert_eq!(mutate_decisions(), mutate_before, "trainguard's mutating webhook was called");
    assert_eq!(validate_creates() - validate_before, 1.0, "trainguard's validating webhook judged the CREATE");
}
