//! docs/webhook.md §7: the defaulting patch applies, adds without overwriting, leaves the overrides alone,
//! escapes its JSON pointers, and is idempotent (reviewing the patched object yields no patch).

use crate::support::fixtures as common;

use proptest::prelude::*;
use serde_json::{Value, json};
use trainguard::cluster::Offline;
use trainguard_core::admission::{Endpoint, RulesConfig, review};

const OVERRIDES: [&str; 3] = ["podSpecOverrides", "podTemplateOverrides", "runtimePatches"];

/// Runs the mutating webhook on `review_json`; returns the wire patch (if any) and the audit rule.
fn mutate(review_json: &Value) -> (Option<json_patch::Patch>, String) {
    let body = serde_json::to_vec(review_json).expect("json");
    let reviewed = review(Endpoint::Mutate, &body, &RulesConfig::default(), &Offline).expect("answered");
    (common::patch_of(&reviewed.body), reviewed.decision.audit_rules())
}

/// Applies the patch, checks every docs/webhook.md §7 promise about it, and returns the patched object.
fn apply_and_check(name: &str, object: &Value, patch: &json_patch::Patch) -> Value {
    let mut patched = object.clone();
    json_patch::patch(&mut patched, patch).unwrap_or_else(|e| panic!("{name}: patch does not apply: {e}"));
    let wire = serde_json::to_value(patch).expect("patch serialises");
    for op in wire.as_array().expect("a JSONPatch is a list") {
        let path = op["path"].as_str().expect("path");
        assert_eq!(op["op"], "add", "{name}: {op} is not an add");
        assert!(object.pointer(path).is_none(), "{name}: {path} overwrites a value that was there");
        assert!(
            OVERRIDES.iter().all(|f| !path.starts_with(&format!("/spec/{f}"))),
            "{name}: {path} touches the overrides"
        );
        assert!(is_escaped_pointer(path), "{name}: {path:?} is not a well-formed JSON pointer");
        // serde_json unescapes ~0/~1 when resolving: the value lands where the path says.
        assert_eq!(patched.pointer(path), Some(&op["value"]), "{name}: {path} does not resolve to its value");
    }
    for f in OVERRIDES {
        assert_eq!(object["spec"].get(f), patched["spec"].get(f), "{name}: {f} changed by the patch");
    }
    patched
}

/// RFC 6901: `/`-separated tokens in which `~` only appears as `~0` or `~1`.
fn is_escaped_pointer(path: &str) -> bool {
    path.starts_with('/')
        && path.split('/').skip(1).all(|token| {
            let mut chars = token.chars();
            while let Some(c) = chars.next() {
                if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
                    return false;
                }
            }
            true
        })
}

#[test]
fn fixture_patches_apply_and_are_idempotent() {
    let cases: Vec<_> =
        common::load_cases().into_iter().filter(|c| c.expect.endpoint == "mutate" && c.expect.patch).collect();
    assert!(cases.len() >= 7, "mutate fixtures with a patch: {}", cases.len());
    for case in cases {
        let reviewed = case.run().expect("answered");
        let patch = common::patch_of(&reviewed.body).expect("fixture expects a patch");
        let mut request: Value = serde_json::from_slice(&case.review).expect("json");
        let patched = apply_and_check(&case.name, &request["request"]["object"], &patch);
        // Each default as docs/webhook.md §7 lists it, or the value that was already there.
        let object = &request["request"]["object"];
        let defaults = [
            ("/spec/suspend", json!(false)),
            ("/spec/managedBy", json!("trainer.kubeflow.org/trainjob-controller")),
            ("/spec/runtimeRef/apiGroup", json!("trainer.kubeflow.org")),
            ("/spec/runtimeRef/kind", json!("ClusterTrainingRuntime")),
        ];
        for (path, default) in defaults {
            if path.starts_with("/spec/runtimeRef") && patched.pointer("/spec/runtimeRef").is_none() {
                continue;
            }
            let expected = object.pointer(path).unwrap_or(&default);
            assert_eq!(patched.pointer(path), Some(expected), "{}: {path}", case.name);
        }
        // Reinvocation (reinvocationPolicy: IfNeeded) sees the patched object: nothing more to add.
        request["request"]["object"] = patched;
        let (again, rule) = mutate(&request);
        assert!(again.is_none(), "{}: second pass patched again: {again:?}", case.name);
        assert_eq!(rule, "defaults-present", "{}", case.name);
    }
}

#[test]
fn fixture_patch_paths_are_exactly_the_missing_defaults() {
    let all = ["/spec/suspend", "/spec/managedBy", "/spec/runtimeRef/apiGroup", "/spec/runtimeRef/kind"];
    let table: [(&str, &[&str]); 4] = [
        ("podSpecOverrides/mutate-defaults-added", &all),
        ("runtimePatches/mutate-defaults-added", &all),
        ("podTemplateOverrides/mutate-runtimeref-partial", &["/spec/runtimeRef/kind"]),
        ("general/mutate-no-spec", &["/spec"]),
    ];
    let cases = common::load_cases();
    for (name, expected) in table {
        let case = cases.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("fixture {name}"));
        let reviewed = case.run().expect("answered");
        let patch = serde_json::to_value(common::patch_of(&reviewed.body).expect("patch")).expect("json");
        let paths: Vec<&str> = patch.as_array().expect("list").iter().filter_map(|op| op["path"].as_str()).collect();
        assert_eq!(paths, expected, "{name}");
    }
}

/// A TrainJob with each default present (with some value) or absent, plus keys that need
/// escaping in a JSON pointer next to the ones the patch writes.
fn arb_trainjob() -> impl Strategy<Value = Value> {
    let maybe = |values: Vec<Value>| prop::option::of(prop::sample::select(values));
    (
        maybe(vec![json!(true), json!(false)]),
        maybe(vec![json!("trainer.kubeflow.org/trainjob-controller"), json!("kueue.x-k8s.io/multikueue")]),
        prop::option::of((
            maybe(vec![json!("trainer.kubeflow.org"), json!("example.com")]),
            maybe(vec![json!("ClusterTrainingRuntime"), json!("TrainingRuntime")]),
        )),
        prop::sample::select(vec![None, Some("podSpecOverrides"), Some("runtimePatches")]),
    )
        .prop_map(|(suspend, managed_by, runtime_ref, overrides)| {
            let mut spec = json!({"trainer": {"numNodes": 2}, "a/b": {"c~d": 1}});
            let mut put = |key: &str, v: Option<Value>| {
                if let Some(v) = v {
                    spec[key] = v;
                }
            };
            put("suspend", suspend);
            put("managedBy", managed_by);
            if let Some((api_group, kind)) = runtime_ref {
                let mut r = json!({"name": "torch-distributed", "x~/y": true});
                if let Some(g) = api_group {
                    r["apiGroup"] = g;
                }
                if let Some(k) = kind {
                    r["kind"] = k;
                }
                spec["runtimeRef"] = r;
            }
            if let Some(f) = overrides {
                spec[f] = json!([{"targetJobs": [{"name": "node"}], "manager": "m", "nodeSelector": {"a/b~c": "x"}}]);
            }
            json!({
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": "llama", "namespace": "ml-team"},
                "spec": spec,
            })
        })
}

fn create_review(object: &Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "3f1e0c52-77a4-4c1e-9d0b-2b9f7a1c6e11",
            "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"},
            "resource": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "resource": "trainjobs"},
            "name": "llama", "namespace": "ml-team", "operation": "CREATE",
            "userInfo": {"username": "alice@example.com"},
            "object": object, "oldObject": null, "dryRun": false
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn defaulting_adds_only_what_is_missing_and_is_idempotent(object in arb_trainjob()) {
        let (patch, rule) = mutate(&create_review(&object));
        let Some(patch) = patch else {
            // Nothing to add: every default was already there.
            prop_assert_eq!(rule, "defaults-present");
            prop_assert!(object["spec"].get("suspend").is_some() && object["spec"].get("managedBy").is_some());
            if let Some(r) = object["spec"].get("runtimeRef") {
                prop_assert!(r.get("apiGroup").is_some() && r.get("kind").is_some());
            }
            return Ok(());
        };
        prop_assert_eq!(rule, "defaulted");
        let patched = apply_and_check("generated", &object, &patch);
        // What was there before is there after, unchanged.
        for key in ["suspend", "managedBy", "a/b", "trainer"] {
            if let Some(v) = object["spec"].get(key) {
                prop_assert_eq!(Some(v), patched["spec"].get(key));
            }
        }
        for key in ["apiGroup", "kind", "x~/y", "name"] {
            if let Some(v) = object["spec"].get("runtimeRef").and_then(|r| r.get(key)) {
                prop_assert_eq!(Some(v), patched["spec"]["runtimeRef"].get(key));
            }
        }
        let (again, rule) = mutate(&create_review(&patched));
        prop_assert!(again.is_none(), "second pass patched again");
        prop_assert_eq!(rule, "defaults-present");
    }
}

#[test]
fn escaped_pointer_check_is_strict() {
    // The helper above must itself tell good pointers from bad ones.
    for good in ["/spec", "/a~1b", "/c~0d", "/x~0~1y/z"] {
        assert!(is_escaped_pointer(good), "{good}");
    }
    for bad in ["spec", "/a~b", "/c~", "/~2"] {
        assert!(!is_escaped_pointer(bad), "{bad}");
    }
}
