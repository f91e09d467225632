//! "Did the overrides change?" (docs/webhook.md, "Which change counts") and their shape
//! (docs/webhook.md, "CREATE").
//!
//! Equality is Kubeflow Trainer's own: `equality.Semantic.DeepEqual` over the release's Go types
//! ([`crate::trainer::equality`]), so a present-but-empty struct behind a pointer is not absent,
//! lists compare index by index, and a runtime patch's `time` is left out.

#[cfg(test)]
use serde_json::Map;
use serde_json::Value;
use serde_json::value::RawValue;

pub(crate) mod shape;

use super::errors::ErrorList;
#[cfg(test)]
use super::errors::{ErrorType, FieldError};
#[cfg(test)]
use super::rule::Rule;
use crate::model::OverridesField;
use crate::trainer::{self, equality};

/// Whether `field` differs between old and new. Byte-identical JSON (the API server re-serialises
/// the stored object) is decided without reading it. (The rules ask [`changed_shape_errors`], which
/// also returns the shape errors; the equality tables and `validate`'s offline U5 prediction ask
/// this.)
pub fn changed(field: OverridesField, old: Option<&RawValue>, new: Option<&RawValue>) -> bool {
    changed_shape_errors(field, old, new).is_some()
}

/// [`changed`], and when the field changed, the shape errors of its new value ([`shape::scan`]):
/// `None` when unchanged. A value holding more than [`shape::MAX_VALUES`] JSON values is not read
/// as a `Value`: such a new value is a change (and a shape error), such an old one differs from
/// any new one.
pub(crate) fn changed_shape_errors(
    field: OverridesField,
    old: Option<&RawValue>,
    new: Option<&RawValue>,
) -> Option<ErrorList> {
    if let (Some(o), Some(n)) = (old, new)
        && o.get() == n.get()
        && !(field == OverridesField::RuntimePatches && repeats_a_manager(n))
    {
        return None;
    }
    if old.is_none() && new.is_none() {
        return None;
    }
    let scanned = shape::scan(field, new);
    if scanned.oversized || shape::oversized(old) {
        return Some(scanned.errors);
    }
    let (Ok(old_value), Ok(new_value)) = (try_parse(old), try_parse(new)) else {
        return Some(scanned.errors);
    };
    let ignored = if field == OverridesField::RuntimePatches { equality::RUNTIME_PATCH_TIME } else { &[] };
    let model = trainer::overrides_field(field);
    let equal = equality::field_equal(model, Some(&old_value), Some(&new_value), ignored)
        && (field != OverridesField::RuntimePatches
            || (equality::unknown_members_equal(&model.ty, Some(&old_value), Some(&new_value), ignored)
                && !restamped(model, &old_value, &new_value)));
    (!equal).then_some(scanned.errors)
}

/// Whether a runtimePatches list may repeat a `manager` (then even a byte-identical list is read:
/// see [`restamped`]). Two `"manager"` keys are needed; a list of one patch is never re-stamped.
fn repeats_a_manager(raw: &RawValue) -> bool {
    raw.get().matches("\"manager\"").nth(1).is_some()
}

/// Whether Trainer's mutating webhook gives a runtime patch a new `time` although the lists are
/// equal without it: it keeps the old time only when the patch equals the *last* old patch of the
/// same `manager`, so with a manager repeated (which the CRD forbids, but an old object that
/// already repeats one keeps being admitted) an unchanged patch is re-stamped and Trainer sees a
/// change.
fn restamped(model: &trainer::model::Field, old: &Value, new: &Value) -> bool {
    let trainer::model::Ty::List(item) = model.ty else { return false };
    let (Some(old), Some(new)) = (old.as_array(), new.as_array()) else { return false };
    let time = |v: Option<&Value>| v.and_then(|p| p.get("time")).filter(|t| !t.is_null()).cloned();
    new.iter().enumerate().any(|(i, patch)| {
        let last = old.iter().rev().find(|o| o.get("manager").is_some() && o.get("manager") == patch.get("manager"));
        // The patch gets the last old patch's time when equal to it, else a new one; either way
        // the lists then differ where that is not the time of the old patch at its index.
        last.is_some_and(|o| {
            !equality::values_equal(item, o, patch, equality::RUNTIME_PATCH_TIME) || time(Some(o)) != time(old.get(i))
        })
    })
}

/// Parses a raw field; absent reads as null. RawValue holds valid JSON, but it may be nested
/// deeper than serde_json's recursion limit (128), which `Value` refuses.
pub fn try_parse(raw: Option<&RawValue>) -> Result<Value, serde_json::Error> {
    raw.map_or(Ok(Value::Null), |r| serde_json::from_str(r.get()))
}

/// The shape errors of a raw field, read as it streams ([`shape::scan`]); a value too deeply
/// nested to read is itself a shape error.
pub(crate) fn shape_errors_raw(field: OverridesField, raw: Option<&RawValue>) -> ErrorList {
    shape::scan(field, raw).errors
}

#[cfg(test)]
use shape::{MANAGER_REQUIRED, NAME_REQUIRED, TARGET_JOBS_REQUIRED};

/// The shape check over a decoded value: the reference [`shape::scan`] is checked against
/// (`raw_shape_check_agrees_with_the_value_one`).
///
/// docs/webhook.md §5 shape: list items need a non-empty `targetJobs` of non-empty names, runtime patches a
/// non-empty `manager`. Several items may target the same job (Kueue appends its own).
#[cfg(test)]
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

#[cfg(test)]
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

#[cfg(test)]
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
#[cfg(test)]
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
#[cfg(test)]
fn type_name_quoted(v: &Value) -> String {
    format!("\"{}\"", type_name(v))
}

#[cfg(test)]
mod tests;
