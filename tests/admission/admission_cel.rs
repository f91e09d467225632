//! The CEL in deploy/, evaluated with a CEL interpreter (the `cel` crate: `has()` on map keys,
//! `in` on map keys, heterogeneous `!=`, a missing key is an error — as in Kubernetes):
//!
//! - the validating webhook's `matchConditions`: every admission fixture whose verdict is a denial
//!   is sent to the webhook; every UPDATE whose judged fields are identical is not, and no
//!   TrainJob makes the expression fail (an error would apply `failurePolicy: Fail`);
//! - the opt-out ValidatingAdmissionPolicy: the same rule as the webhook's O1, also for CREATE.

use crate::payloads;
use crate::support::fixtures as common;

use std::path::Path;

use cel::{Context, Program, Value as CelValue};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use trainguard_core::model::TrainJobView;

const OPT_OUT_LABEL: &str = "trainguard.io/webhook";
const JUDGED_SPEC_FIELDS: [&str; 4] = ["podSpecOverrides", "podTemplateOverrides", "runtimePatches", "managedBy"];

fn repo_file(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn yaml_docs(path: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(&repo_file(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// `line` with every `{{ … }}` template action replaced by `x`.
fn without_actions(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find("{{") {
        let end = rest[start..].find("}}").map_or(rest.len(), |e| start + e + 2);
        out.push_str(&rest[..start]);
        out.push('x');
        rest = &rest[end..];
    }
    out + rest
}

/// The matchConditions of the validating webhook in `path` (kustomize base or Helm template).
fn match_conditions(path: &str) -> Vec<(String, String)> {
    let text = repo_file(path);
    // The Helm template's actions are names inside values (replaced by a placeholder) and lines
    // of actions alone (`if`/`end`, the certificates' includes: dropped); the expressions
    // themselves hold none.
    let text: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("{{"))
        .map(|l| format!("{}\n", without_actions(l)))
        .collect();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    let validating = docs.iter().find(|d| d["kind"] == "ValidatingWebhookConfiguration").expect("validating");
    let conditions = validating["webhooks"][0]["matchConditions"].as_array().expect("matchConditions");
    conditions
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), c["expression"].as_str().unwrap().to_string()))
        .collect()
}

fn compile(name: &str, expression: &str) -> Program {
    Program::compile(expression).unwrap_or_else(|e| panic!("{name} does not compile: {e}\n{expression}"))
}

/// Evaluates `program` with the variables the API server binds; `Err` is an evaluation error.
fn eval(program: &Program, vars: &[(&str, &Value)]) -> Result<bool, String> {
    let mut context = Context::default();
    for (name, value) in vars {
        context.add_variable(*name, cel::to_value(*value).expect("JSON converts")).expect("variable");
    }
    match program.execute(&context) {
        Ok(CelValue::Bool(b)) => Ok(b),
        Ok(other) => Err(format!("not a bool: {other:?}")),
        Err(e) => Err(e.to_string()),
    }
}

/// All matchConditions must hold for the webhook to be called (an error fails the request).
fn called(conditions: &[(String, Program)], request: &Value) -> Result<bool, String> {
    let null = Value::Null;
    let object = request.get("object").unwrap_or(&null);
    let old_object = request.get("oldObject").unwrap_or(&null);
    let mut all = true;
    for (name, program) in conditions {
        let got = eval(program, &[("object", object), ("oldObject", old_object), ("request", request)])
            .map_err(|e| format!("{name}: {e}"))?;
        all &= got;
    }
    Ok(all)
}

/// The reference the expressions must agree with: does an UPDATE change a judged field or the
/// opt-out label (presence included)?
fn judged_fields_differ(old: &Value, new: &Value) -> bool {
    let spec_field = |o: &Value, f: &str| o.get("spec").and_then(|s| s.get(f)).cloned();
    let label = |o: &Value| o.get("metadata").and_then(|m| m.get("labels")).and_then(|l| l.get(OPT_OUT_LABEL)).cloned();
    JUDGED_SPEC_FIELDS.iter().any(|f| spec_field(old, f) != spec_field(new, f)) || label(old) != label(new)
}

fn webhook_conditions() -> Vec<(String, Program)> {
    let base = match_conditions("deploy/base/webhooks.yaml");
    let chart = match_conditions("deploy/helm/trainguard/templates/webhooks.yaml");
    assert_eq!(base, chart, "the kustomize base and the Helm chart carry the same matchConditions");
    assert!(!base.is_empty());
    base.iter().map(|(name, expr)| (name.clone(), compile(name, expr))).collect()
}

#[test]
fn match_conditions_send_every_denial_and_skip_every_unjudged_update() {
    let conditions = webhook_conditions();
    let mut checked_denials = 0;
    let mut checked_skips = 0;
    for case in common::load_cases() {
        if case.expect.endpoint != "validate" || case.expect.http != 200 {
            continue;
        }
        let review: Value = serde_json::from_slice(&case.review).unwrap();
        let request = &review["request"];
        let is_trainjob = request["kind"]["kind"] == "TrainJob";
        // Objects that do not decode as a TrainJob (a string `spec.suspend`, a number as a label
        // value) fail the CRD's schema validation, which the API server runs before validating
        // admission: they never reach the conditions in a cluster.
        let schema_valid = ["object", "oldObject"].iter().all(|k| {
            let o = &request[*k];
            o.is_null() || {
                let raw = RawValue::from_string(o.to_string()).unwrap();
                TrainJobView::decode(&raw).is_ok()
            }
        });
        let got = called(&conditions, request);
        if is_trainjob && schema_valid {
            assert!(got.is_ok(), "{}: a valid TrainJob makes the expression fail: {got:?}", case.name);
        }
        if !case.expect.allowed && is_trainjob && schema_valid {
            // An error would apply failurePolicy Fail: still a rejection, as the verdict says.
            assert!(got.as_ref().is_err() || got == Ok(true), "{}: a denial must reach the webhook", case.name);
            checked_denials += 1;
        }
        if request["operation"] == "UPDATE" && request["oldObject"].is_object() && request["object"].is_object() {
            let differ = judged_fields_differ(&request["oldObject"], &request["object"]);
            if is_trainjob && schema_valid {
                assert_eq!(got, Ok(differ), "{}: called exactly when a judged field differs", case.name);
            }
            if !differ {
                assert_eq!(got, Ok(false), "{}: unjudged update must skip the webhook without error", case.name);
                checked_skips += 1;
            }
        }
        if request["operation"] == "CREATE" && is_trainjob && schema_valid {
            assert_eq!(got, Ok(true), "{}: every CREATE is judged", case.name);
        }
    }
    assert!(checked_denials > 20, "only {checked_denials} denial fixtures");
    assert!(checked_skips > 5, "only {checked_skips} skipped UPDATE fixtures");
}

fn trainjob() -> Value {
    json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "a", "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {
            "suspend": false,
            "runtimeRef": {"name": "torch"},
            "managedBy": "trainer.kubeflow.org/trainjob-controller",
            "podTemplateOverrides": [{"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"a": "b"}}}]
        },
        "status": {"jobsStatus": [{"name": "node", "active": 2}]}
    })
}

fn with(mut o: Value, pointer: &str, value: Option<Value>) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let parent = if parent.is_empty() { &mut o } else { o.pointer_mut(parent).unwrap_or_else(|| panic!("{pointer}")) };
    let map = parent.as_object_mut().unwrap();
    match value {
        Some(v) => map.insert(key.replace("~1", "/"), v),
        None => map.remove(&key.replace("~1", "/")),
    };
    o
}

fn update(old: Value, new: Value) -> Value {
    json!({"uid": "u", "operation": "UPDATE", "userInfo": {"username": "alice", "groups": ["dev"]},
           "object": new, "oldObject": old})
}

#[test]
fn match_conditions_table() {
    let conditions = webhook_conditions();
    let label = "/metadata/labels/trainguard.io~1webhook";
    let base = trainjob();
    // (case, old, new, webhook called)
    let cases: Vec<(&str, Value, Value, bool)> = vec![
        (
            "suspend only (Kueue preemption)",
            base.clone(),
            with(base.clone(), "/spec/suspend", Some(json!(true))),
            false,
        ),
        ("resume", with(base.clone(), "/spec/suspend", Some(json!(true))), base.clone(), false),
        ("status only", base.clone(), with(base.clone(), "/status", Some(json!({}))), false),
        ("another label", base.clone(), with(base.clone(), "/metadata/labels/x", Some(json!("y"))), false),
        ("annotations", base.clone(), with(base.clone(), "/metadata/annotations", Some(json!({"a": "b"}))), false),
        ("finalizers", base.clone(), with(base.clone(), "/metadata/finalizers", Some(json!(["f"]))), false),
        ("labels map removed, no opt-out label", base.clone(), with(base.clone(), "/metadata/labels", None), false),
        ("no spec in either", with(base.clone(), "/spec", None), with(base.clone(), "/spec", None), false),
        (
            "overrides changed",
            base.clone(),
            with(base.clone(), "/spec/podTemplateOverrides", Some(json!([{"targetJobs": [{"name": "x"}]}]))),
            true,
        ),
        ("overrides removed", base.clone(), with(base.clone(), "/spec/podTemplateOverrides", None), true),
        ("podSpecOverrides added", base.clone(), with(base.clone(), "/spec/podSpecOverrides", Some(json!([]))), true),
        ("runtimePatches added", base.clone(), with(base.clone(), "/spec/runtimePatches", Some(json!([]))), true),
        (
            "managedBy changed",
            base.clone(),
            with(base.clone(), "/spec/managedBy", Some(json!("kueue.x-k8s.io/multikueue"))),
            true,
        ),
        ("managedBy removed", base.clone(), with(base.clone(), "/spec/managedBy", None), true),
        ("spec removed", base.clone(), with(base.clone(), "/spec", None), true),
        ("opt-out label added", base.clone(), with(base.clone(), label, Some(json!("disabled"))), true),
        (
            "opt-out label value changed",
            with(base.clone(), label, Some(json!("x"))),
            with(base.clone(), label, Some(json!("disabled"))),
            true,
        ),
        ("opt-out label removed", with(base.clone(), label, Some(json!("x"))), base.clone(), true),
        (
            "opt-out label kept",
            with(base.clone(), label, Some(json!("x"))),
            with(base.clone(), label, Some(json!("x"))),
            false,
        ),
        (
            "label added to an object without labels",
            with(base.clone(), "/metadata/labels", None),
            with(with(base.clone(), "/metadata/labels", None), "/metadata/labels", Some(json!({OPT_OUT_LABEL: "x"}))),
            true,
        ),
    ];
    for (name, old, new, want) in cases {
        assert_eq!(judged_fields_differ(&old, &new), want, "{name}: the reference agrees with the table");
        assert_eq!(called(&conditions, &update(old, new)), Ok(want), "{name}");
    }
    // CREATE: oldObject is null and must not be read.
    let create = json!({"uid": "u", "operation": "CREATE", "object": trainjob(), "oldObject": null});
    assert_eq!(called(&conditions, &create), Ok(true), "CREATE");
}

/// The benchmark payloads (`crates/test-support/src/payloads.rs`, which `benches/load.py` makes alike) against the
/// shipped conditions: what docs/benchmarks.md says about which rows a cluster sends. The
/// byte-identical updates never reach the webhook; a create, an edit, and a runtime patch
/// re-stamped by its owner (the lists differ to CEL, though trainguard allows it as unchanged) do.
#[test]
fn match_conditions_on_the_benchmark_payloads() {
    let conditions = webhook_conditions();
    // (payload, review, webhook called)
    let cases = [
        ("small", payloads::small_update(), false),
        ("large", payloads::large_update(), false),
        ("restamped", payloads::large_update_restamped(), false),
        ("gated", payloads::small_gated(), true),
        ("denied", payloads::small_denied(), true),
        ("retimed", payloads::small_retimed(), true),
        ("create", payloads::small_create(), true),
    ];
    for (name, body, want) in cases {
        let review: Value = serde_json::from_slice(&body).unwrap();
        let operation = if name == "create" { "CREATE" } else { "UPDATE" };
        assert_eq!(review["request"]["operation"], operation, "{name}");
        assert_eq!(called(&conditions, &review["request"]), Ok(want), "{name}");
    }
}

/// The opt-out ValidatingAdmissionPolicy: its variables, then its validations (all must hold).
struct Policy {
    variables: Vec<(String, Program)>,
    validations: Vec<Program>,
}

impl Policy {
    fn load() -> Policy {
        let docs = yaml_docs("deploy/components/opt-out-policy/policy.yaml");
        let policy = docs.iter().find(|d| d["kind"] == "ValidatingAdmissionPolicy").expect("policy");
        let binding = docs.iter().find(|d| d["kind"] == "ValidatingAdmissionPolicyBinding").expect("binding");
        assert_eq!(binding["spec"]["policyName"], policy["metadata"]["name"]);
        assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]));
        assert_eq!(policy["spec"]["failurePolicy"], "Fail");
        let rules = &policy["spec"]["matchConstraints"]["resourceRules"];
        assert_eq!(rules[0]["resources"], json!(["trainjobs"]), "the main resource only, no subresources");
        assert_eq!(rules[0]["operations"], json!(["CREATE", "UPDATE"]));
        let variables = policy["spec"]["variables"].as_array().expect("variables").iter().map(|v| {
            let name = v["name"].as_str().unwrap().to_string();
            let program = compile(&name, v["expression"].as_str().unwrap());
            (name, program)
        });
        let validations = policy["spec"]["validations"].as_array().expect("validations");
        Policy {
            variables: variables.collect(),
            validations: validations.iter().map(|v| compile("validation", v["expression"].as_str().unwrap())).collect(),
        }
    }

    /// Whether the API server admits `request` (an error counts as a denial: failurePolicy Fail).
    fn admits(&self, request: &Value) -> Result<bool, String> {
        let null = Value::Null;
        let object = request.get("object").unwrap_or(&null);
        let old_object = request.get("oldObject").unwrap_or(&null);
        let base = [("object", object), ("oldObject", old_object), ("request", request)];
        let mut variables = serde_json::Map::new();
        for (name, program) in &self.variables {
            let mut context = Context::default();
            for (n, v) in base {
                context.add_variable(n, cel::to_value(v).unwrap()).unwrap();
            }
            let value = program.execute(&context).map_err(|e| format!("variable {name}: {e}"))?;
            variables.insert(name.clone(), value.json().map_err(|e| e.to_string())?);
        }
        let variables = Value::Object(variables);
        let mut all = true;
        for program in &self.validations {
            let vars = [base[0], base[1], base[2], ("variables", &variables)];
            all &= eval(program, &vars)?;
        }
        Ok(all)
    }
}

fn request(operation: &str, old: Value, new: Value, groups: Value) -> Value {
    json!({"uid": "u", "operation": operation, "userInfo": {"username": "u", "groups": groups},
           "object": new, "oldObject": old})
}

/// The policy's group list is the webhook's default `--opt-out-groups`.
#[test]
fn opt_out_policy_groups_are_the_flag_default() {
    let policy = Policy::load();
    let (_, program) = policy.variables.iter().find(|(n, _)| n == "optOutGroups").expect("optOutGroups");
    let groups = program.execute(&Context::default()).expect("a constant").json().expect("JSON");
    assert_eq!(groups, json!(trainguard_core::model::DEFAULT_OPT_OUT_GROUPS));
}

#[test]
fn opt_out_policy_table() {
    let policy = Policy::load();
    let label = "/metadata/labels/trainguard.io~1webhook";
    let plain = trainjob();
    let labelled = |v: &str| with(trainjob(), label, Some(json!(v)));
    let alice = json!(["ml-team:editors", "system:authenticated"]);
    let admin = json!(["system:masters", "system:authenticated"]);
    // (case, operation, old, new, groups, admitted)
    let cases: Vec<(&str, &str, Value, Value, Value, bool)> = vec![
        ("create without the label", "CREATE", Value::Null, plain.clone(), alice.clone(), true),
        ("create labelled by a user", "CREATE", Value::Null, labelled("disabled"), alice.clone(), false),
        ("create labelled by an admin", "CREATE", Value::Null, labelled("disabled"), admin.clone(), true),
        (
            "create without labels map",
            "CREATE",
            Value::Null,
            with(trainjob(), "/metadata/labels", None),
            alice.clone(),
            true,
        ),
        ("update adds the label", "UPDATE", plain.clone(), labelled("disabled"), alice.clone(), false),
        ("update changes the value", "UPDATE", labelled("x"), labelled("disabled"), alice.clone(), false),
        (
            "update keeps the value",
            "UPDATE",
            labelled("disabled"),
            with(labelled("disabled"), "/spec/suspend", Some(json!(true))),
            alice.clone(),
            true,
        ),
        ("update removes the label", "UPDATE", labelled("disabled"), plain.clone(), alice.clone(), true),
        (
            "update, no label either side",
            "UPDATE",
            plain.clone(),
            with(plain.clone(), "/spec/suspend", Some(json!(true))),
            alice.clone(),
            true,
        ),
        ("admin adds the label", "UPDATE", plain.clone(), labelled("disabled"), admin.clone(), true),
        ("no groups sent", "UPDATE", plain.clone(), labelled("disabled"), Value::Null, false),
        (
            "old object without labels map",
            "UPDATE",
            with(trainjob(), "/metadata/labels", None),
            labelled("disabled"),
            alice.clone(),
            false,
        ),
    ];
    for (name, operation, old, new, groups, want) in cases {
        let mut req = request(operation, old, new, groups.clone());
        if groups.is_null() {
            req["userInfo"].as_object_mut().unwrap().remove("groups");
        }
        assert_eq!(policy.admits(&req), Ok(want), "{name}");
    }
}

/// On every UPDATE fixture the policy and the webhook's rule O1 agree: the policy denies exactly
/// the updates the webhook denies with O1.
#[test]
fn opt_out_policy_agrees_with_rule_o1_on_every_fixture() {
    let policy = Policy::load();
    let mut compared = 0;
    for case in common::load_cases() {
        if case.expect.endpoint != "validate" || case.expect.http != 200 {
            continue;
        }
        let review: Value = serde_json::from_slice(&case.review).unwrap();
        let request = &review["request"];
        let valid = ["object", "oldObject"].iter().all(|k| {
            request[*k].is_object()
                && TrainJobView::decode(&RawValue::from_string(request[*k].to_string()).unwrap()).is_ok()
        });
        if request["operation"] != "UPDATE"
            || request["kind"]["kind"] != "TrainJob"
            || !request["subResource"].is_null()
            || !valid
        {
            continue;
        }
        let o1 = case.expect.rule.split(',').any(|r| r == "O1");
        assert_eq!(policy.admits(request), Ok(!o1), "{}: the policy and O1 agree", case.name);
        compared += 1;
    }
    assert!(compared > 50, "only {compared} UPDATE fixtures compared");
}
