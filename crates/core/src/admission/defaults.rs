//! The mutating (defaulting) webhook of docs/webhook.md §7: adds, never overwrites, never touches the
//! overrides. Returns no patch when there is nothing to add, so it is idempotent under
//! `reinvocationPolicy: IfNeeded`.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use serde_json::{Value, json};

use super::decision::{Decision, Operation};
use super::rule::Rule;
use super::rules::{DecodedInput, missing};
use crate::model::{DEFAULT_MANAGED_BY, TRAINJOB_GROUP, TrainJobView};

pub(crate) const DEFAULT_RUNTIME_KIND: &str = "ClusterTrainingRuntime";

/// The mutating webhook. Only CREATE is defaulted.
pub(crate) fn mutate(input: &DecodedInput<'_, '_>) -> Decision {
    match (input.operation, input.object) {
        (Operation::Create, Some(object)) => with_defaults(object),
        (Operation::Create, None) => missing("object"),
        _ => Decision::allow(Rule::AllowNotCreate),
    }
}

fn with_defaults(object: &TrainJobView<'_>) -> Decision {
    let patch = default_patch(object);
    if patch.0.is_empty() {
        return Decision::allow(Rule::DefaultsPresent);
    }
    let mut decision = Decision::allow(Rule::Defaulted);
    decision.patch = Some(patch);
    decision
}

/// The JSONPatch that adds each missing default.
pub(crate) fn default_patch(object: &TrainJobView<'_>) -> Patch {
    let mut ops = Vec::new();
    let add = |ops: &mut Vec<PatchOperation>, tokens: &[&str], value: Value| {
        ops.push(PatchOperation::Add(AddOperation { path: PointerBuf::from_tokens(tokens.iter().copied()), value }));
    };
    let Some(spec) = object.spec() else {
        add(&mut ops, &["spec"], json!({ "suspend": false, "managedBy": DEFAULT_MANAGED_BY }));
        return Patch(ops);
    };
    if spec.suspend.is_none() {
        add(&mut ops, &["spec", "suspend"], json!(false));
    }
    if spec.managed_by.is_none() {
        add(&mut ops, &["spec", "managedBy"], json!(DEFAULT_MANAGED_BY));
    }
    // runtimeRef without a name is invalid anyway (Trainer says so); defaults go only into a
    // runtimeRef the user wrote.
    if let Some(runtime_ref) = &spec.runtime_ref {
        if runtime_ref.api_group.is_none() {
            add(&mut ops, &["spec", "runtimeRef", "apiGroup"], json!(TRAINJOB_GROUP));
        }
        if runtime_ref.kind.is_none() {
            add(&mut ops, &["spec", "runtimeRef", "kind"], json!(DEFAULT_RUNTIME_KIND));
        }
    }
    Patch(ops)
}

#[cfg(test)]
mod tests {
    use serde_json::value::to_raw_value;
    use serde_json::{Value, json};

    use super::default_patch;
    use crate::model::TrainJobView;
    use crate::trainer::{TrainerVersion, crd};

    /// What the defaulting webhook adds once the API server has decoded `object` with `version`'s
    /// CRD, as it does before any webhook is called (pruning, `null` dropping, schema defaults).
    fn added_after_the_crd(object: &Value, version: TrainerVersion) -> Vec<String> {
        let admitted = to_raw_value(&crd::admitted(object, version)).expect("JSON");
        let view = TrainJobView::decode(&admitted).expect("decodes");
        let patch = serde_json::to_value(default_patch(&view)).expect("JSON");
        patch.as_array().expect("a list").iter().map(|op| op["path"].as_str().expect("path").to_string()).collect()
    }

    /// Every Trainer release's CRD defaults all four fields the webhook fills, to the same values,
    /// in every TrainJob the CRD admits (its `spec.runtimeRef.name` is required): the webhook
    /// adds nothing there, which is why the default install registers none (docs/webhook.md §7).
    /// Schema defaulting is the same on every Kubernetes version trainguard supports. The one
    /// object it adds to, a TrainJob without `spec`, the CRD admits unchanged and the webhook's
    /// patch would not make valid (`spec.runtimeRef` is required inside `spec`).
    #[test]
    fn every_release_crd_defaults_what_the_webhook_adds() {
        let meta = json!({"name": "job", "namespace": "ns"});
        let trainjob = |spec: Option<Value>| {
            let mut o = json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": meta});
            if let Some(spec) = spec {
                o["spec"] = spec;
            }
            o
        };
        // (what, the TrainJob as written, what the webhook still adds)
        let cases: [(&str, Value, &[&str]); 5] = [
            ("bare", trainjob(Some(json!({"runtimeRef": {"name": "torch"}}))), &[]),
            (
                "nulls",
                trainjob(Some(
                    json!({"suspend": null, "managedBy": null, "runtimeRef": {"name": "torch", "kind": null, "apiGroup": null}}),
                )),
                &[],
            ),
            ("suspend set", trainjob(Some(json!({"suspend": true, "runtimeRef": {"name": "torch"}}))), &[]),
            ("no runtimeRef (the CRD refuses it)", trainjob(Some(json!({}))), &[]),
            ("no spec", trainjob(None), &["/spec"]),
        ];
        for version in TrainerVersion::ALL {
            for (what, object, want) in &cases {
                assert_eq!(added_after_the_crd(object, version), *want, "{} {what}", version.tag());
            }
            // The CRD's defaults are the webhook's values.
            let admitted = crd::admitted(&cases[0].1, version);
            let mut patched = cases[0].1.clone();
            let written = to_raw_value(&patched).expect("JSON");
            let patch = default_patch(&TrainJobView::decode(&written).expect("decodes"));
            json_patch::patch(&mut patched, &patch).expect("applies");
            assert_eq!(admitted["spec"], patched["spec"], "{}: the CRD's defaults and the webhook's", version.tag());
        }
    }
}
