//! "Did the overrides change?" (docs/webhook.md, "Which change counts") and their shape
//! (docs/webhook.md, "CREATE").
//!
//! Equality is Kubeflow Trainer's own: `equality.Semantic.DeepEqual` over the release's Go types
//! ([`crate::trainer::equality`]), so a present-but-empty struct behind a pointer is not absent,
//! lists compare index by index, and a runtime patch's `time` is left out.

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::Rule;
use super::errors::{ErrorType, FieldError};
use crate::model::OverridesField;
use crate::trainer::{self, equality};

/// Whether `field` differs between old and new. Byte-identical JSON (the API server re-serialises
/// the stored object) is decided without reading it. (The rules ask [`changed_shape_errors`], which
/// also returns the shape errors; the equality tables and `validate`'s offline U5 prediction ask
/// this.)
pub(crate) fn changed(field: OverridesField, old: Option<&RawValue>, new: Option<&RawValue>) -> bool {
    changed_shape_errors(field, old, new).is_some()
}

/// [`changed`], and when the field changed, the [`shape_errors`] of its new value: `None` when
/// unchanged.
pub(crate) fn changed_shape_errors(
    field: OverridesField,
    old: Option<&RawValue>,
    new: Option<&RawValue>,
) -> Option<Vec<FieldError>> {
    if let (Some(o), Some(n)) = (old, new)
        && o.get() == n.get()
    {
        return None;
    }
    if old.is_none() && new.is_none() {
        return None;
    }
    let new_value = match try_parse(new) {
        Ok(value) => value,
        Err(e) => return Some(vec![unreadable(field, new, &e)]),
    };
    // An old value that does not read (nested past serde_json's limit) is unlike any new one.
    let equal = try_parse(old).is_ok_and(|old_value| {
        let ignored = if field == OverridesField::RuntimePatches { equality::RUNTIME_PATCH_TIME } else { &[] };
        equality::field_equal(trainer::overrides_field(field), Some(&old_value), Some(&new_value), ignored)
    });
    (!equal).then(|| shape_errors(field, &new_value))
}

/// Parses a raw field; absent reads as null. RawValue holds valid JSON, but it may be nested
/// deeper than serde_json's recursion limit (128), which `Value` refuses.
pub fn try_parse(raw: Option<&RawValue>) -> Result<Value, serde_json::Error> {
    raw.map_or(Ok(Value::Null), |r| serde_json::from_str(r.get()))
}

/// [`shape_errors`] of a raw field; a value too deeply nested to read is itself a shape error.
pub(crate) fn shape_errors_raw(field: OverridesField, raw: Option<&RawValue>) -> Vec<FieldError> {
    match try_parse(raw) {
        Ok(value) => shape_errors(field, &value),
        Err(e) => vec![unreadable(field, raw, &e)],
    }
}

fn unreadable(field: OverridesField, raw: Option<&RawValue>, e: &serde_json::Error) -> FieldError {
    let kind = if raw.is_some_and(|r| r.get().starts_with('[')) { "list" } else { "object" };
    let detail = if e.to_string().starts_with("recursion limit exceeded") {
        "is nested more than 128 levels deep, too deep to check".to_string()
    } else {
        format!("is not valid JSON: {e}")
    };
    FieldError::invalid(Rule::Shape, field.path(), format!("\"{kind}\""), detail)
}

const MANAGER_REQUIRED: &str = "name the controller that owns this patch, e.g. \"kueue.x-k8s.io/manager\"";
const TARGET_JOBS_REQUIRED: &str = "list at least one replicated job to override, e.g. [{name: node}]";
const NAME_REQUIRED: &str = "name a replicated job of the runtime, e.g. \"node\"";

/// docs/webhook.md §5 shape: list items need a non-empty `targetJobs` of non-empty names, runtime patches a
/// non-empty `manager`. Several items may target the same job (Kueue appends its own).
pub(crate) fn shape_errors(field: OverridesField, value: &Value) -> Vec<FieldError> {
    let path = field.path();
    let items = match value {
        Value::Null => return Vec::new(),
        Value::Array(items) => items,
        other => {
            return vec![FieldError::invalid(Rule::Shape, path, type_name_quoted(other), "must be a list")];
        }
    };
    let mut errors = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item_path = format!("{path}[{i}]");
        let Value::Object(item) = item else {
            errors.push(FieldError::invalid(Rule::Shape, item_path, type_name_quoted(item), "must be an object"));
            continue;
        };
        match field {
            OverridesField::RuntimePatches => check_manager(item, &item_path, &mut errors),
            _ => check_target_jobs(item, &item_path, &mut errors),
        }
    }
    errors
}

fn check_manager(item: &Map<String, Value>, item_path: &str, errors: &mut Vec<FieldError>) {
    let path = format!("{item_path}.manager");
    match item.get("manager") {
        Some(Value::String(s)) if !s.is_empty() => {}
        None | Some(Value::Null) | Some(Value::String(_)) => {
            errors.push(FieldError::new(Rule::Shape, ErrorType::Required, path, MANAGER_REQUIRED))
        }
        Some(other) => errors.push(FieldError::invalid(Rule::Shape, path, type_name_quoted(other), "must be a string")),
    }
}

fn check_target_jobs(item: &Map<String, Value>, item_path: &str, errors: &mut Vec<FieldError>) {
    let path = format!("{item_path}.targetJobs");
    let targets = match item.get("targetJobs") {
        Some(Value::Array(t)) if !t.is_empty() => t,
        None | Some(Value::Null) | Some(Value::Array(_)) => {
            errors.push(FieldError::new(Rule::Shape, ErrorType::Required, path, TARGET_JOBS_REQUIRED));
            return;
        }
        Some(other) => {
            errors.push(FieldError::invalid(Rule::Shape, path, type_name_quoted(other), "must be a list"));
            return;
        }
    };
    for (j, target) in targets.iter().enumerate() {
        let name_path = format!("{path}[{j}].name");
        match target.get("name") {
            Some(Value::String(s)) if !s.is_empty() => {}
            None | Some(Value::Null) | Some(Value::String(_)) => {
                errors.push(FieldError::new(Rule::Shape, ErrorType::Required, name_path, NAME_REQUIRED))
            }
            Some(other) => {
                errors.push(FieldError::invalid(Rule::Shape, name_path, type_name_quoted(other), "must be a string"))
            }
        }
    }
}

/// How a non-conforming value is quoted in a message: its JSON type, never the whole value.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

/// Kubernetes' schema errors quote the JSON type as the value (`Invalid value: "string"`).
fn type_name_quoted(v: &Value) -> String {
    format!("\"{}\"", type_name(v))
}

#[cfg(test)]
mod tests;
