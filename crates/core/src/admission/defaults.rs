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
