//! `validate`'s schema check: a TrainJob's `spec` against one release's model, everywhere,
//! overrides included. What the API server would refuse before any webhook sees the object:
//! an unknown field (with kubectl's default strict field validation: 400 `BadRequest`), a value
//! of the wrong type, below its minimum, outside its enum or missing where required (422
//! `Invalid`).

use serde_json::{Map, Value};

use super::TrainerVersion;
use super::model::{Field, Struct, Ty};
use super::quantity::Amount;
use crate::admission::errors::quote;
use crate::admission::{ErrorType, FieldError, Rule};

/// The rule on schema findings.
const RULE: Rule = Rule::Schema;

/// Checks the `spec` of a TrainJob object against `version`. Other top-level keys (metadata,
/// status) are not looked at; a `spec` that is not an object is the decoder's to report.
pub(crate) fn check(object: &Value, version: TrainerVersion) -> Vec<FieldError> {
    let mut walk = Walk { version, errors: Vec::new(), keys: Vec::new() };
    match object.get("spec") {
        Some(Value::Object(spec)) => walk.fields(version.spec(), spec, "spec"),
        // No spec at all: runtimeRef, which the CRD requires, is missing.
        None | Some(Value::Null) => walk.fields(version.spec(), &Map::new(), "spec"),
        Some(_) => {}
    }
    walk.errors
}

struct Walk {
    version: TrainerVersion,
    errors: Vec<FieldError>,
    /// The JSON keys from `spec` down to the current field, without list indices.
    keys: Vec<String>,
}

impl Walk {
    fn fields(&mut self, s: &'static Struct, object: &Map<String, Value>, shown: &str) {
        for (key, value) in object {
            let child = format!("{shown}.{key}");
            self.keys.push(key.clone());
            match s.field(key) {
                Some(field) => self.field(field, value, &child),
                None => {
                    let detail = format!("not a field of TrainJob {}{}", self.version.name(), self.hint(s, shown, key));
                    self.errors.push(FieldError::new(RULE, ErrorType::UnsupportedField, child, detail));
                }
            }
            self.keys.pop();
        }
        for field in s.fields.iter().filter(|f| f.required) {
            if object.get(field.json).is_none_or(Value::is_null) {
                self.errors.push(FieldError::new(
                    RULE,
                    ErrorType::Required,
                    format!("{shown}.{}", field.json),
                    format!("required in TrainJob {}", self.version.name()),
                ));
            }
        }
    }

    fn field(&mut self, field: &'static Field, value: &Value, shown: &str) {
        if value.is_null() {
            // The API server drops `null` for fields that are not nullable.
            return;
        }
        self.value(&field.ty, value, shown);
        if let Some(min) = field.min
            && value.as_f64().is_some_and(|n| n < min as f64)
        {
            self.errors.push(FieldError::invalid(
                RULE,
                shown,
                value.to_string(),
                format!("must be greater than or equal to {min}"),
            ));
        }
        if !field.one_of.is_empty()
            && let Some(s) = value.as_str()
            && !field.one_of.contains(&s)
        {
            let supported: Vec<String> = field.one_of.iter().map(|v| quote(v)).collect();
            self.errors.push(FieldError::invalid(
                RULE,
                shown,
                quote(s),
                format!("supported values: {}", supported.join(", ")),
            ));
        }
    }

    fn value(&mut self, ty: &'static Ty, value: &Value, shown: &str) {
        let fits = match (ty, value) {
            (_, Value::Null) => true,
            (Ty::Bool, v) => v.is_boolean(),
            (Ty::Int32, v) => integer(v).is_some_and(|n| i32::try_from(n).is_ok()),
            (Ty::Int64, v) => integer(v).is_some(),
            (Ty::Float64, v) => v.is_number(),
            (Ty::String, v) => v.is_string(),
            (Ty::DateTime, v) => v.as_str().is_some_and(|s| s.parse::<k8s_openapi::jiff::Timestamp>().is_ok()),
            (Ty::IntOrString, v) => integer(v).is_some() || v.is_string(),
            (Ty::Quantity, Value::Number(_)) => true,
            (Ty::Quantity, Value::String(s)) => Amount::parse(s).is_some(),
            (Ty::List(item), Value::Array(items)) => {
                for (i, v) in items.iter().enumerate() {
                    self.value(item, v, &format!("{shown}[{i}]"));
                }
                true
            }
            (Ty::Map(item), Value::Object(map)) => {
                for (key, v) in map {
                    self.value(item, v, &format!("{shown}[{key}]"));
                }
                true
            }
            (Ty::Struct(s), Value::Object(object)) => {
                self.fields(s, object, shown);
                true
            }
            _ => false,
        };
        if !fits {
            let rendered = match value {
                Value::String(s) => quote(s),
                Value::Object(_) => "\"object\"".to_string(),
                Value::Array(_) => "\"array\"".to_string(),
                other => other.to_string(),
            };
            self.errors.push(FieldError::invalid(
                RULE,
                shown,
                rendered,
                format!("must be {} in TrainJob {}", describe(ty), self.version.name()),
            ));
        }
    }

    /// What the author likely meant by `key` inside `s`: the same place in other releases, a
    /// sibling one edit away, the same name elsewhere in this release, or in another one.
    fn hint(&self, s: &'static Struct, shown: &str, key: &str) -> String {
        let others: Vec<&str> = TrainerVersion::ALL
            .iter()
            .filter(|v| **v != self.version && resolve(v.spec(), &self.keys).is_some())
            .map(|v| v.name())
            .collect();
        if let Some(newest) = others.last() {
            return format!(
                " (a field of TrainJob {}: pass --trainer-version {newest} or set TRAINGUARD_TRAINER_VERSION)",
                others.join(", ")
            );
        }
        if let Some(field) = s.fields.iter().find(|f| one_edit(f.json, key)) {
            return format!(" (did you mean {shown}.{}?)", field.json);
        }
        if let Some(found) = find_by_name(self.version.spec(), key) {
            return format!(" (did you mean {found}?)");
        }
        for other in TrainerVersion::ALL.iter().rev().filter(|v| **v != self.version) {
            if let Some(found) = find_by_name(other.spec(), key) {
                return format!(" ({found} is a field of TrainJob {})", other.name());
            }
        }
        String::new()
    }
}

/// The shallowest field named `key` under `spec` (`spec.a[].b`), down to a few levels: deeper
/// matches inside the embedded Kubernetes types would be guesses, not hints.
fn find_by_name(spec: &'static Struct, key: &str) -> Option<String> {
    let mut level: Vec<(String, &'static Struct)> = vec![("spec".to_string(), spec)];
    for _ in 0..4 {
        let mut next = Vec::new();
        for (path, s) in &level {
            for field in s.fields {
                let child = format!("{path}.{}", field.json);
                if field.json == key {
                    return Some(child);
                }
                if let Some(inner) = struct_of(&field.ty) {
                    let index = if matches!(field.ty, Ty::List(_)) { "[]" } else { "" };
                    next.push((format!("{child}{index}"), inner));
                }
            }
        }
        level = next;
    }
    None
}

/// The struct a field's values are made of (directly, or as list items or map values).
fn struct_of(ty: &'static Ty) -> Option<&'static Struct> {
    match ty {
        Ty::Struct(s) => Some(s),
        Ty::List(item) | Ty::Map(item) => struct_of(item),
        _ => None,
    }
}

/// The field at `keys` under `s`, following structs through lists and maps.
fn resolve(s: &'static Struct, keys: &[String]) -> Option<&'static Field> {
    let (first, rest) = keys.split_first()?;
    let field = s.field(first)?;
    if rest.is_empty() {
        return Some(field);
    }
    resolve(struct_of(&field.ty)?, rest)
}

/// An integer, as the CRD's `type: integer` takes it (`2.0` included).
fn integer(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15).map(|f| f as i64))
}

fn describe(ty: &Ty) -> &'static str {
    match ty {
        Ty::Bool => "of type boolean",
        Ty::Int32 | Ty::Int64 => "of type integer",
        Ty::Float64 => "of type number",
        Ty::String => "of type string",
        Ty::DateTime => "an RFC 3339 date-time string",
        Ty::IntOrString => "of type integer or string",
        Ty::Quantity => "a quantity such as 500m, 2Gi or 4",
        Ty::List(_) => "of type array",
        Ty::Map(_) | Ty::Struct(_) => "of type object",
    }
}

/// Equal but for case, or one insertion, deletion or substitution apart.
fn one_edit(a: &str, b: &str) -> bool {
    if a.eq_ignore_ascii_case(b) {
        return true;
    }
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let (short, long) = if a.len() <= b.len() { (&a, &b) } else { (&b, &a) };
    if long.len() - short.len() > 1 {
        return false;
    }
    let head = short.iter().zip(long.iter()).take_while(|(x, y)| x == y).count();
    if head == short.len() {
        return true;
    }
    if short.len() == long.len() { short[head + 1..] == long[head + 1..] } else { short[head..] == long[head + 1..] }
}
