//! "Did the overrides change?" (docs/webhook.md §2) and their shape (docs/webhook.md §5).
//!
//! Equality is semantic: absent ≡ null ≡ `[]` for the field; inside items absent, null, `{}` and
//! `[]` are equal; numbers compare by value. `runtimePatches` is a map keyed by `manager`, so its
//! order and each item's `time` do not matter.

use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};

use super::errors::{ErrorType, FieldError};
use crate::model::OverridesField;

/// Whether `field` differs between old and new. Byte-identical JSON (the common case: the API
/// server re-serialises the stored object) is decided without parsing.
pub fn changed(field: OverridesField, old: Option<&RawValue>, new: Option<&RawValue>) -> bool {
    if let (Some(o), Some(n)) = (old, new)
        && o.get() == n.get()
    {
        return false;
    }
    if old.is_none() && new.is_none() {
        return false;
    }
    match (try_parse(old), try_parse(new)) {
        (Ok(old), Ok(new)) => !semantically_equal(field, &old, &new),
        // A value too deeply nested to read is never waved through as unchanged.
        _ => true,
    }
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

/// [`shape_errors`] of a raw field; a value too deeply nested to read is itself a shape error.
pub fn shape_errors_raw(field: OverridesField, raw: Option<&RawValue>) -> Vec<FieldError> {
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

pub fn semantically_equal(field: OverridesField, old: &Value, new: &Value) -> bool {
    match (field, old, new) {
        (OverridesField::RuntimePatches, Value::Array(a), Value::Array(b)) => keyed_equal(a, b),
        _ => sem_eq(old, new, None),
    }
}

/// List-map comparison keyed by `manager`, ignoring each item's `time`.
fn keyed_equal(a: &[Value], b: &[Value]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let key = |v: &Value| v.get("manager").and_then(Value::as_str).map(str::to_owned);
    let mut a: Vec<&Value> = a.iter().collect();
    let mut b: Vec<&Value> = b.iter().collect();
    a.sort_by_key(|v| key(v));
    b.sort_by_key(|v| key(v));
    a.iter().zip(&b).all(|(x, y)| sem_eq(x, y, Some("time")))
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// Semantic equality; `skip_key` is ignored in the top-level object only.
fn sem_eq(a: &Value, b: &Value, skip_key: Option<&str>) -> bool {
    if is_empty(a) && is_empty(b) {
        return true;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => objects_equal(x, y, skip_key),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| sem_eq(p, q, None)),
        (Value::Number(x), Value::Number(y)) => numbers_equal(x, y),
        _ => a == b,
    }
}

fn objects_equal(x: &Map<String, Value>, y: &Map<String, Value>, skip_key: Option<&str>) -> bool {
    let keep = |k: &String| Some(k.as_str()) != skip_key;
    x.iter().filter(|(k, _)| keep(k)).all(|(k, v)| sem_eq(v, y.get(k).unwrap_or(&Value::Null), None))
        && y.iter().filter(|(k, _)| keep(k) && !x.contains_key(*k)).all(|(_, v)| is_empty(v))
}

fn numbers_equal(x: &Number, y: &Number) -> bool {
    if let (Some(p), Some(q)) = (x.as_i64(), y.as_i64()) {
        return p == q;
    }
    if let (Some(p), Some(q)) = (x.as_u64(), y.as_u64()) {
        return p == q;
    }
    match (x.as_f64(), y.as_f64()) {
        (Some(p), Some(q)) => p == q,
        _ => false,
    }
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
        None | Some(Value::Null) | Some(Value::String(_)) => errors.push(FieldError::new(
            "shape",
            ErrorType::Required,
            path,
            "name the controller that owns this patch, e.g. \"kueue.x-k8s.io/manager\"",
        )),
        Some(other) => errors.push(FieldError::invalid("shape", path, type_name_quoted(other), "must be a string")),
    }
}

fn check_target_jobs(item: &Map<String, Value>, item_path: &str, errors: &mut Vec<FieldError>) {
    let path = format!("{item_path}.targetJobs");
    let targets = match item.get("targetJobs") {
        Some(Value::Array(t)) if !t.is_empty() => t,
        None | Some(Value::Null) | Some(Value::Array(_)) => {
            errors.push(FieldError::new(
                "shape",
                ErrorType::Required,
                path,
                "list at least one replicated job to override, e.g. [{name: node}]",
            ));
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
            None | Some(Value::Null) | Some(Value::String(_)) => errors.push(FieldError::new(
                "shape",
                ErrorType::Required,
                name_path,
                "name a replicated job of the runtime, e.g. \"node\"",
            )),
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
