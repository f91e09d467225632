//! "Did the overrides change?" (docs/webhook.md §2) and their shape (docs/webhook.md §5).
//!
//! Equality is semantic (rules in `raw_eq`): absent ≡ null ≡ `[]` for the field; inside items
//! absent, null, `{}`, `[]` and maps of only those are equal; numbers compare by value.
//! `runtimePatches` is a map keyed by `manager`, so its order and each item's `time` do not
//! matter.

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::errors::{ErrorType, FieldError};
use super::raw_eq::{self, JsonType, Tape, ValueRef};
use crate::model::OverridesField;

/// Whether `field` differs between old and new. Byte-identical JSON (the common case: the API
/// server re-serialises the stored object) is decided without reading it; a real difference is
/// compared on the raw text ([`raw_eq`]), without building `Value` trees.
pub fn changed(field: OverridesField, old: Option<&RawValue>, new: Option<&RawValue>) -> bool {
    changed_shape_errors(field, old, new).is_some()
}

/// [`changed`], and when the field changed, the [`shape_errors_raw`] of its new value: `None` when
/// unchanged. The new value is read into a tape once, for both.
pub fn changed_shape_errors(
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
    let Ok(new_tape) = Tape::read(new.map(RawValue::get)) else {
        return Some(shape_errors_parsed(field, new));
    };
    // The old side is read only where its bytes differ from the new side's.
    let equal = raw_eq::equal_to_text(old.map(RawValue::get), &new_tape, field == OverridesField::RuntimePatches);
    (!equal).then(|| shape_errors_tape(field, new_tape.root()))
}

/// Parses a raw field; absent reads as null. RawValue holds valid JSON, but it may be nested
/// deeper than serde_json's recursion limit (128), which `Value` refuses.
pub fn try_parse(raw: Option<&RawValue>) -> Result<Value, serde_json::Error> {
    raw.map_or(Ok(Value::Null), |r| serde_json::from_str(r.get()))
}

/// [`try_parse`], with an unreadable value read as null. Only for callers that have already
/// checked [`shape_errors_raw`] or [`changed`].
pub fn parse(raw: Option<&RawValue>) -> Value {
    try_parse(raw).unwrap_or(Value::Null)
}

/// [`shape_errors`] of a raw field, checked on the raw tape; a value too deeply nested to read is
/// itself a shape error.
pub fn shape_errors_raw(field: OverridesField, raw: Option<&RawValue>) -> Vec<FieldError> {
    match Tape::read(raw.map(RawValue::get)) {
        Ok(tape) => shape_errors_tape(field, tape.root()),
        // The tape refuses what serde_json refuses; serde_json names the problem.
        Err(_) => shape_errors_parsed(field, raw),
    }
}

fn shape_errors_parsed(field: OverridesField, raw: Option<&RawValue>) -> Vec<FieldError> {
    match try_parse(raw) {
        Ok(value) => shape_errors(field, &value),
        Err(e) => {
            let kind = if raw.is_some_and(|r| r.get().starts_with('[')) { "list" } else { "object" };
            // The hot path checks only the structure of raw values (docs/webhook.md, "Decoding").
            let detail = if e.to_string().starts_with("recursion limit exceeded") {
                "is nested more than 128 levels deep, too deep to check".to_string()
            } else {
                format!("is not valid JSON: {e}")
            };
            vec![FieldError::invalid("shape", field.path(), format!("\"{kind}\""), detail)]
        }
    }
}

const MANAGER_REQUIRED: &str = "name the controller that owns this patch, e.g. \"kueue.x-k8s.io/manager\"";
const TARGET_JOBS_REQUIRED: &str = "list at least one replicated job to override, e.g. [{name: node}]";
const NAME_REQUIRED: &str = "name a replicated job of the runtime, e.g. \"node\"";

fn quoted(t: JsonType) -> String {
    let name = match t {
        JsonType::Null => "null",
        JsonType::Boolean => "boolean",
        JsonType::Number => "number",
        JsonType::String => "string",
        JsonType::List => "list",
        JsonType::Object => "object",
    };
    format!("\"{name}\"")
}

/// A member that must be a non-empty string: missing, null or `""` is required, another type
/// is invalid.
fn check_string_tape(
    value: Option<ValueRef<'_, '_>>,
    path: impl FnOnce() -> String,
    required: &str,
) -> Option<FieldError> {
    match value.map(ValueRef::json_type) {
        Some(JsonType::String) if value.is_some_and(ValueRef::is_non_empty_string) => None,
        None | Some(JsonType::Null | JsonType::String) => {
            Some(FieldError::new("shape", ErrorType::Required, path(), required))
        }
        Some(other) => Some(FieldError::invalid("shape", path(), quoted(other), "must be a string")),
    }
}

fn check_manager_tape(item: ValueRef<'_, '_>, item_path: impl Fn() -> String, errors: &mut Vec<FieldError>) {
    errors.extend(check_string_tape(item.get("manager"), || format!("{}.manager", item_path()), MANAGER_REQUIRED));
}

fn check_target_jobs_tape(item: ValueRef<'_, '_>, item_path: impl Fn() -> String, errors: &mut Vec<FieldError>) {
    let path = || format!("{}.targetJobs", item_path());
    let targets = item.get("targetJobs");
    match targets.map(ValueRef::json_type) {
        Some(JsonType::List) if targets.is_some_and(|t| !t.is_empty()) => {}
        None | Some(JsonType::Null | JsonType::List) => {
            errors.push(FieldError::new("shape", ErrorType::Required, path(), TARGET_JOBS_REQUIRED));
            return;
        }
        Some(other) => {
            errors.push(FieldError::invalid("shape", path(), quoted(other), "must be a list"));
            return;
        }
    }
    for (j, target) in targets.into_iter().flat_map(ValueRef::elements).enumerate() {
        errors.extend(check_string_tape(target.get("name"), || format!("{}[{j}].name", path()), NAME_REQUIRED));
    }
}

/// [`shape_errors`] on a tape: the same checks and messages, without a `Value` tree.
fn shape_errors_tape(field: OverridesField, value: ValueRef<'_, '_>) -> Vec<FieldError> {
    let path = field.path();
    match value.json_type() {
        JsonType::Null => return Vec::new(),
        JsonType::List => {}
        other => return vec![FieldError::invalid("shape", path, quoted(other), "must be a list")],
    }
    let mut errors = Vec::new();
    for (i, item) in value.elements().enumerate() {
        if item.json_type() != JsonType::Object {
            errors.push(FieldError::invalid(
                "shape",
                format!("{path}[{i}]"),
                quoted(item.json_type()),
                "must be an object",
            ));
            continue;
        }
        // Paths are formatted only for an error: the happy path allocates nothing.
        let item_path = || format!("{path}[{i}]");
        match field {
            OverridesField::RuntimePatches => check_manager_tape(item, item_path, &mut errors),
            _ => check_target_jobs_tape(item, item_path, &mut errors),
        }
    }
    errors
}

/// docs/webhook.md §5 shape: list items need a non-empty `targetJobs` of non-empty names, runtime patches a
/// non-empty `manager`. Several items may target the same job (Kueue appends its own).
pub fn shape_errors(field: OverridesField, value: &Value) -> Vec<FieldError> {
    let path = field.path();
    let items = match value {
        Value::Null => return Vec::new(),
        Value::Array(items) => items,
        other => {
            return vec![FieldError::invalid("shape", path, type_name_quoted(other), "must be a list")];
        }
    };
    let mut errors = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item_path = format!("{path}[{i}]");
        let Value::Object(item) = item else {
            errors.push(FieldError::invalid("shape", item_path, type_name_quoted(item), "must be an object"));
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
            errors.push(FieldError::new("shape", ErrorType::Required, path, MANAGER_REQUIRED))
        }
        Some(other) => errors.push(FieldError::invalid("shape", path, type_name_quoted(other), "must be a string")),
    }
}

fn check_target_jobs(item: &Map<String, Value>, item_path: &str, errors: &mut Vec<FieldError>) {
    let path = format!("{item_path}.targetJobs");
    let targets = match item.get("targetJobs") {
        Some(Value::Array(t)) if !t.is_empty() => t,
        None | Some(Value::Null) | Some(Value::Array(_)) => {
            errors.push(FieldError::new("shape", ErrorType::Required, path, TARGET_JOBS_REQUIRED));
            return;
        }
        Some(other) => {
            errors.push(FieldError::invalid("shape", path, type_name_quoted(other), "must be a list"));
            return;
        }
    };
    for (j, target) in targets.iter().enumerate() {
        let name_path = format!("{path}[{j}].name");
        match target.get("name") {
            Some(Value::String(s)) if !s.is_empty() => {}
            None | Some(Value::Null) | Some(Value::String(_)) => {
                errors.push(FieldError::new("shape", ErrorType::Required, name_path, NAME_REQUIRED))
            }
            Some(other) => {
                errors.push(FieldError::invalid("shape", name_path, type_name_quoted(other), "must be a string"))
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
