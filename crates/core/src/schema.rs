//! `validate`'s schema check: a TrainJob against one release's own CRD ([`crate::trainer::crd`]), as the
//! API server applies it before any webhook sees the object: a field the CRD does not have (with
//! kubectl's default strict field validation: 400 `BadRequest`), a value of the wrong type, out of
//! its bounds, enum or pattern, too long or too many, missing where required, a duplicate key in a
//! list map, or refused by the CRD's CEL rules — transition rules included on UPDATE, with the API
//! server's ratcheting (422 `Invalid`). An unknown field gets a hint from the typed model
//! (each release's Go types): the same place in another release, or a near name.

use serde_json::Value;

use crate::admission::errors::quote;
use crate::admission::{ErrorType, FieldError, Rule};
use crate::trainer::TrainerVersion;
use crate::trainer::crd::{self, Kind};
use crate::trainer::model::{Field, Struct, Ty};

/// The rule on schema findings.
const RULE: Rule = Rule::Schema;

/// Checks a TrainJob object against `version`'s CRD: as a CREATE, or as an UPDATE of `old`.
pub fn check(object: &Value, old: Option<&Value>, version: TrainerVersion) -> Vec<FieldError> {
    if !object.is_object() {
        // Not an object: the decoder's to report.
        return Vec::new();
    }
    let verdict = crd::judge(object, old, version);
    let mut errors = Vec::new();
    for path in verdict.unknown {
        let detail = format!("not a field of TrainJob {}{}", version.name(), unknown_hint(version, &path));
        errors.push(FieldError::new(RULE, ErrorType::UnsupportedField, path, detail));
    }
    for mut finding in verdict.errors {
        // A CRD rule on the whole object has no field; the ones at these tags are about the name.
        // A number past its format's range has no field either (the API server says `<nil>`); its
        // message names the field, which is where a reader looks.
        if finding.path.is_empty() {
            finding.path = match finding.range_of() {
                Some(field) => field.to_string(),
                None if finding.detail.contains("metadata.name") => "metadata.name".to_string(),
                None => "metadata".to_string(),
            };
        }
        let kind = error_type(finding.kind());
        errors.push(match &finding.value {
            Some(value) => {
                let rendered = match value {
                    Value::String(s) => quote(s),
                    // kube-openapi names a wrong type's value by its type.
                    Value::Object(_) if kind == ErrorType::TypeInvalid => "\"object\"".to_string(),
                    Value::Array(_) if kind == ErrorType::TypeInvalid => "\"array\"".to_string(),
                    // Otherwise apimachinery shows it as JSON (a duplicate's key fields, the
                    // finalizers, an owner reference), cut like a string.
                    Value::Object(_) | Value::Array(_) => {
                        let json = value.to_string();
                        let mut shown: String = json.chars().take(100).collect();
                        if shown.len() < json.len() {
                            shown.push('…');
                        }
                        shown
                    }
                    other => other.to_string(),
                };
                FieldError::with_value(RULE, kind, finding.path, rendered, finding.detail)
            }
            None => FieldError::new(RULE, kind, finding.path, finding.detail),
        });
    }
    errors
}

/// Drops the webhook's shape errors about a value [`check`] refuses whole (a value of the wrong
/// type, or a field the schema does not have) or about anything inside it. The API server refuses
/// such a value with one error, its own, before any webhook reads it; the shape check would only
/// say it again in other words (`must be a list` beside `must be of type array`).
pub fn drop_restated(rule_errors: &mut Vec<FieldError>, schema_errors: &[FieldError]) {
    let refused: Vec<&str> = schema_errors
        .iter()
        .filter(|e| matches!(e.kind, ErrorType::TypeInvalid | ErrorType::UnsupportedField))
        .map(|e| e.path.as_str())
        .collect();
    rule_errors.retain(|e| e.rule != Rule::Shape || !refused.iter().any(|outer| within(&e.path, outer)));
}

/// Whether `path` is `outer` or a path inside it (`outer.a`, `outer[0]`).
fn within(path: &str, outer: &str) -> bool {
    path.strip_prefix(outer).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

/// The field error type the API server reports a finding as.
fn error_type(kind: Kind) -> ErrorType {
    match kind {
        Kind::Required => ErrorType::Required,
        Kind::TypeInvalid => ErrorType::TypeInvalid,
        Kind::NotSupported => ErrorType::NotSupported,
        Kind::TooLong => ErrorType::TooLong,
        Kind::TooMany => ErrorType::TooMany,
        Kind::Invalid => ErrorType::Invalid,
        Kind::Duplicate => ErrorType::Duplicate,
        Kind::Forbidden => ErrorType::Forbidden,
    }
}

/// What the author likely meant by the unknown field at `path` (`spec.a[0].b`): the same place in
/// other releases, a sibling one edit away, the same name elsewhere in this release, or in another
/// one. Nothing for `metadata`.
fn unknown_hint(version: TrainerVersion, path: &str) -> String {
    let Some(rest) = path.strip_prefix("spec.") else { return String::new() };
    let keys: Vec<String> = rest.split('.').map(|k| k.split('[').next().unwrap_or(k).to_string()).collect();
    let Some((key, parents)) = keys.split_last() else { return String::new() };
    let shown = &path[..path.len() - path.rsplit('.').next().map_or(0, |k| k.len() + 1)];
    let s = if parents.is_empty() {
        Some(version.spec())
    } else {
        resolve(version.spec(), parents).and_then(|f| struct_of(&f.ty))
    };
    hint(version, s, &keys, shown, key)
}

fn hint(version: TrainerVersion, s: Option<&'static Struct>, keys: &[String], shown: &str, key: &str) -> String {
    let others: Vec<&str> = TrainerVersion::ALL
        .iter()
        .filter(|v| **v != version && resolve(v.spec(), keys).is_some())
        .map(|v| v.name())
        .collect();
    if let Some(newest) = others.last() {
        return format!(
            " (a field of TrainJob {}: pass --trainer-version {newest} or set TRAINGUARD_TRAINER_VERSION)",
            others.join(", ")
        );
    }
    if let Some(field) = s.and_then(|s| s.fields.iter().find(|f| one_edit(f.json, key))) {
        return format!(" (did you mean {shown}.{}?)", field.json);
    }
    if let Some(found) = find_by_name(version.spec(), key) {
        return format!(" (did you mean {found}?)");
    }
    for other in TrainerVersion::ALL.iter().rev().filter(|v| **v != version) {
        if let Some(found) = find_by_name(other.spec(), key) {
            return format!(" ({found} is a field of TrainJob {})", other.name());
        }
    }
    String::new()
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

/// Equal but for case, or one insertion, deletion or substitution apart.
fn one_edit(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b) || edit_distance(a, b) <= 1
}

/// Levenshtein distance over chars: how far a name is from the one meant, for "did you mean".
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod edit_tests {
    use super::*;

    #[test]
    fn edit_distances() {
        // (a, b, distance)
        let cases = [
            ("trainjob", "trainjob", 0),
            ("tranjob", "trainjob", 1),
            ("trainjobs", "trainjob", 1),
            ("", "ab", 2),
            ("tfjob", "trainjob", 4),
            ("ab", "ba", 2),
        ];
        for (a, b, d) in cases {
            assert_eq!(edit_distance(a, b), d, "{a} {b}");
            assert_eq!(one_edit(a, b), d <= 1, "{a} {b}");
        }
        assert!(one_edit("NumNodes", "numNodes"));
    }
}

#[cfg(test)]
mod value_tests {
    use serde_json::json;

    use super::*;

    /// A list or an object is shown as JSON, as apimachinery shows it, but for a wrong type,
    /// which kube-openapi names by its type.
    #[test]
    fn composite_values_are_shown_as_json() {
        let job = |metadata: Value, spec: Value| json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": metadata, "spec": spec});
        let cases = [
            (
                job(
                    json!({"name": "job", "namespace": "ns", "finalizers": ["orphan", "foregroundDeletion"]}),
                    json!({"runtimeRef": {"name": "t"}}),
                ),
                "metadata.finalizers: Invalid value: [\"orphan\",\"foregroundDeletion\"]: finalizer orphan and foregroundDeletion cannot be both set",
            ),
            (
                job(
                    json!({"name": "job", "namespace": "ns"}),
                    json!({"runtimeRef": {"name": "t"}, "trainer": {"command": {"a": 1}}}),
                ),
                "spec.trainer.command: Invalid value: \"object\": must be of type array in TrainJob v2.3",
            ),
        ];
        for (object, want) in cases {
            let errors = check(&object, None, TrainerVersion::V2_3);
            let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
            assert!(shown.iter().any(|e| e == want), "{want}\n{shown:#?}");
        }
    }
}

#[cfg(test)]
mod generated_name_tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_create_with_only_generate_name_is_judged_with_a_generated_name() {
        let cases = [
            (json!({"metadata": {"generateName": "llama-"}}), Some("llama-bcdfg")),
            (json!({"metadata": {"generateName": "llama-", "name": ""}}), Some("llama-bcdfg")),
            (json!({"metadata": {"generateName": "llama-", "name": "own"}}), None),
            (json!({"metadata": {"name": "own"}}), None),
        ];
        for (object, want) in cases {
            let got =
                crd::generated_name(&object).map(|o| o["metadata"]["name"].as_str().unwrap_or_default().to_string());
            assert_eq!(got.as_deref(), want, "{object}");
        }
        // And the v2.3 CRD's name rules pass on such a CREATE.
        let create = json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"generateName": "llama-", "namespace": "ml"},
            "spec": {"runtimeRef": {"name": "torch-distributed"}}});
        let errors = check(&create, None, TrainerVersion::V2_3);
        assert!(errors.iter().all(|e| e.path != "metadata.name"), "{errors:?}");
    }
}

#[cfg(test)]
mod restated_tests {
    use serde_json::json;
    use serde_json::value::RawValue;

    use super::*;
    use crate::admission::overrides::shape;
    use crate::model::OverridesField::{self, PodSpecOverrides, PodTemplateOverrides, RuntimePatches};
    use crate::trainer::TrainerVersion;

    const V2_0: TrainerVersion = TrainerVersion::V2_0;
    const V2_1: TrainerVersion = TrainerVersion::V2_1;
    const V2_3: TrainerVersion = TrainerVersion::V2_3;

    /// What `validate` reports on an overrides value with the schema check on: the webhook's shape
    /// errors, then the schema's, the restated ones dropped.
    fn merged(version: TrainerVersion, field: OverridesField, value: &Value) -> Vec<String> {
        let raw = RawValue::from_string(value.to_string()).unwrap();
        let mut rule_errors = shape::scan(field, Some(&raw)).errors.errors;
        assert!(!rule_errors.is_empty(), "{value}: the shape check sees it too");
        let mut spec = json!({"runtimeRef": {"name": "torch-distributed"}});
        spec[field.json_name()] = value.clone();
        let object = json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "job", "namespace": "ns"}, "spec": spec});
        let schema_errors = check(&object, None, version);
        drop_restated(&mut rule_errors, &schema_errors);
        rule_errors.iter().chain(&schema_errors).map(ToString::to_string).collect()
    }

    /// A value of the wrong type gets one error, the API server's: the shape check's own words for
    /// it, and for what is inside it, are dropped; its errors about other values stay.
    #[test]
    fn a_wrong_typed_value_gets_one_error() {
        let wrong = |path: &str, value: &str, ty: &str, version: TrainerVersion| {
            format!("{path}: Invalid value: {value}: must be of type {ty} in TrainJob {}", version.name())
        };
        let (patches, templates) = ("spec.runtimePatches", "spec.podTemplateOverrides");
        let targets = "spec.podSpecOverrides[0].targetJobs";
        let manager = "spec.runtimePatches[0].manager";
        let cases: Vec<(TrainerVersion, OverridesField, Value, Vec<String>)> = vec![
            // A list given as an object, a string, a number, a boolean.
            (V2_3, RuntimePatches, json!({}), vec![wrong(patches, "\"object\"", "array", V2_3)]),
            (V2_3, RuntimePatches, json!("x"), vec![wrong(patches, "\"x\"", "array", V2_3)]),
            (V2_3, RuntimePatches, json!(3), vec![wrong(patches, "3", "array", V2_3)]),
            (V2_3, RuntimePatches, json!(true), vec![wrong(patches, "true", "array", V2_3)]),
            (
                V2_1,
                PodTemplateOverrides,
                json!({"targetJobs": []}),
                vec![wrong(templates, "\"object\"", "array", V2_1)],
            ),
            (
                V2_0,
                PodSpecOverrides,
                json!([{"targetJobs": {"name": "a"}}]),
                vec![wrong(targets, "\"object\"", "array", V2_0)],
            ),
            (V2_0, PodSpecOverrides, json!([{"targetJobs": "a"}]), vec![wrong(targets, "\"a\"", "array", V2_0)]),
            // An object given as a list, a string, null.
            (V2_3, RuntimePatches, json!([["a"]]), vec![wrong("spec.runtimePatches[0]", "\"array\"", "object", V2_3)]),
            (V2_3, RuntimePatches, json!(["a"]), vec![wrong("spec.runtimePatches[0]", "\"a\"", "object", V2_3)]),
            (V2_3, RuntimePatches, json!([null]), vec![wrong("spec.runtimePatches[0]", "null", "object", V2_3)]),
            // A string given as a number, an object; a target that is not an object has no name
            // to require.
            (V2_3, RuntimePatches, json!([{"manager": 5}]), vec![wrong(manager, "5", "string", V2_3)]),
            (V2_3, RuntimePatches, json!([{"manager": {}}]), vec![wrong(manager, "\"object\"", "string", V2_3)]),
            (
                V2_0,
                PodSpecOverrides,
                json!([{"targetJobs": [{"name": 5}, "a"]}]),
                vec![
                    wrong(&format!("{targets}[0].name"), "5", "string", V2_0),
                    wrong(&format!("{targets}[1]"), "\"a\"", "object", V2_0),
                ],
            ),
            // The shape check's error about another value stays.
            (
                V2_0,
                PodSpecOverrides,
                json!([{"targetJobs": {"name": "a"}}, {"targetJobs": []}]),
                vec![
                    format!("spec.podSpecOverrides[1].targetJobs: Required value: {}", shape::TARGET_JOBS_REQUIRED),
                    wrong(targets, "\"object\"", "array", V2_0),
                ],
            ),
            // A field this release does not have: the API server refuses it unread.
            (
                V2_3,
                PodSpecOverrides,
                json!({}),
                vec![
                    "spec.podSpecOverrides: Unsupported field: not a field of TrainJob v2.3 (a field of TrainJob \
                     v2.0: pass --trainer-version v2.0 or set TRAINGUARD_TRAINER_VERSION)"
                        .into(),
                ],
            ),
        ];
        for (version, field, value, expected) in cases {
            assert_eq!(merged(version, field, &value), expected, "{} {value}", version.name());
        }
    }
}
