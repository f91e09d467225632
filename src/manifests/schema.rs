//! The TrainJob `spec` schema of each Trainer release, as data, and a pure check of a manifest
//! against it: unknown, misplaced and other-version fields, and values of the wrong JSON type.
//! In a cluster the API server rejects or prunes these; `validate` says so before review.
//!
//! Each table lists the JSON paths under `spec` (`[]` marks the items of a list) with their type,
//! taken from `pkg/apis/trainer/v1alpha1/trainjob_types.go` of Kubeflow Trainer at the tag named
//! on the table. Inside the pod-level overrides only the envelope is listed: pod spec contents
//! (containers, volumes, affinity, the runtime spec of a patch) are Kubernetes' to check.

use serde_json::{Map, Value};

use crate::admission::errors::quote;
use crate::admission::{ErrorType, FieldError};

/// The rule id on schema findings.
pub const RULE: &str = "schema";

/// A Trainer release whose TrainJob schema `validate` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum TrainerVersion {
    #[value(name = "v2.0")]
    V2_0,
    #[value(name = "v2.1")]
    V2_1,
    #[value(name = "v2.2")]
    V2_2,
    #[default]
    #[value(name = "v2.3")]
    V2_3,
}

impl TrainerVersion {
    pub const ALL: [TrainerVersion; 4] =
        [TrainerVersion::V2_0, TrainerVersion::V2_1, TrainerVersion::V2_2, TrainerVersion::V2_3];

    pub fn name(self) -> &'static str {
        self.table().name
    }

    fn table(self) -> &'static Table {
        match self {
            TrainerVersion::V2_0 => &V2_0,
            TrainerVersion::V2_1 => &V2_1,
            TrainerVersion::V2_2 => &V2_2,
            TrainerVersion::V2_3 => &V2_3,
        }
    }
}

/// The JSON type a field must have. `null` is always accepted (an unset optional field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    Str,
    Bool,
    Int,
    /// `intstr.IntOrString`.
    IntOrStr,
    /// An object whose fields are listed in the table.
    Object,
    /// `map[string]string`: any keys, string values.
    Map,
    List(&'static Ty),
    /// Not checked here (Kubernetes types inside the overrides, resources).
    Any,
}

impl Ty {
    fn name(self) -> &'static str {
        match self {
            Ty::Str => "string",
            Ty::Bool => "boolean",
            Ty::Int => "integer",
            Ty::IntOrStr => "integer or string",
            Ty::Object | Ty::Any => "object",
            Ty::Map => "map of strings",
            Ty::List(_) => "array",
        }
    }
}

type Fields = &'static [(&'static str, Ty)];

/// One release's schema: its parts together list every path under `spec`.
struct Table {
    name: &'static str,
    parts: &'static [Fields],
}

impl Table {
    fn lookup(&self, path: &str) -> Option<Ty> {
        self.fields().find(|(p, _)| *p == path).map(|(_, ty)| ty)
    }

    fn fields(&self) -> impl Iterator<Item = (&'static str, Ty)> + '_ {
        self.parts.iter().flat_map(|part| part.iter().copied())
    }
}

const OBJECTS: Ty = Ty::Object;
const STRINGS: Ty = Ty::Str;
const ANY: Ty = Ty::Any;

/// Fields every release from v2.0.0 to v2.3.0 has, with the same types.
const COMMON: Fields = &[
    ("runtimeRef", Ty::Object),
    ("runtimeRef.name", Ty::Str),
    ("runtimeRef.apiGroup", Ty::Str),
    ("runtimeRef.kind", Ty::Str),
    ("initializer", Ty::Object),
    ("initializer.dataset", Ty::Object),
    ("initializer.dataset.storageUri", Ty::Str),
    ("initializer.dataset.env", Ty::List(&ANY)),
    ("initializer.dataset.secretRef", Ty::Object),
    ("initializer.dataset.secretRef.name", Ty::Str),
    ("initializer.model", Ty::Object),
    ("initializer.model.storageUri", Ty::Str),
    ("initializer.model.env", Ty::List(&ANY)),
    ("initializer.model.secretRef", Ty::Object),
    ("initializer.model.secretRef.name", Ty::Str),
    ("trainer", Ty::Object),
    ("trainer.image", Ty::Str),
    ("trainer.command", Ty::List(&STRINGS)),
    ("trainer.args", Ty::List(&STRINGS)),
    ("trainer.env", Ty::List(&ANY)),
    ("trainer.numNodes", Ty::Int),
    ("trainer.resourcesPerNode", Ty::Any),
    ("trainer.numProcPerNode", Ty::IntOrStr),
    ("labels", Ty::Map),
    ("annotations", Ty::Map),
    ("suspend", Ty::Bool),
    ("managedBy", Ty::Str),
];

/// v2.0: `podSpecOverrides`, pod spec fields directly in each item.
const POD_SPEC_OVERRIDES: Fields = &[
    ("podSpecOverrides", Ty::List(&OBJECTS)),
    ("podSpecOverrides[].targetJobs", Ty::List(&OBJECTS)),
    ("podSpecOverrides[].targetJobs[].name", Ty::Str),
    ("podSpecOverrides[].serviceAccountName", Ty::Str),
    ("podSpecOverrides[].nodeSelector", Ty::Map),
    ("podSpecOverrides[].tolerations", Ty::List(&ANY)),
    ("podSpecOverrides[].volumes", Ty::List(&ANY)),
    ("podSpecOverrides[].initContainers", Ty::List(&ANY)),
    ("podSpecOverrides[].containers", Ty::List(&ANY)),
    ("podSpecOverrides[].schedulingGates", Ty::List(&ANY)),
];

/// v2.1: renamed `podTemplateOverrides`, with pod `metadata` and a pod `spec` in each item.
const POD_TEMPLATE_OVERRIDES: Fields = &[
    ("podTemplateOverrides", Ty::List(&OBJECTS)),
    ("podTemplateOverrides[].targetJobs", Ty::List(&OBJECTS)),
    ("podTemplateOverrides[].targetJobs[].name", Ty::Str),
    ("podTemplateOverrides[].metadata", Ty::Object),
    ("podTemplateOverrides[].metadata.labels", Ty::Map),
    ("podTemplateOverrides[].metadata.annotations", Ty::Map),
    ("podTemplateOverrides[].spec", Ty::Any),
];

/// v2.2 and v2.3: `runtimePatches`, keyed by `manager`.
const RUNTIME_PATCHES: Fields = &[
    ("runtimePatches", Ty::List(&OBJECTS)),
    ("runtimePatches[].manager", Ty::Str),
    ("runtimePatches[].time", Ty::Str),
    ("runtimePatches[].trainingRuntimeSpec", Ty::Any),
];

/// Kubeflow Trainer v2.0.0.
const V2_0: Table = Table { name: "v2.0", parts: &[COMMON, POD_SPEC_OVERRIDES] };
/// Kubeflow Trainer v2.1.0.
const V2_1: Table = Table { name: "v2.1", parts: &[COMMON, POD_TEMPLATE_OVERRIDES] };
/// Kubeflow Trainer v2.2.0.
const V2_2: Table = Table { name: "v2.2", parts: &[COMMON, RUNTIME_PATCHES] };
/// Kubeflow Trainer v2.3.0.
const V2_3: Table = Table { name: "v2.3", parts: &[COMMON, RUNTIME_PATCHES] };

/// Checks the `spec` of a TrainJob object against `version`'s schema. Other top-level keys
/// (metadata, status) are not looked at; a `spec` that is not an object is the decoder's to report.
pub fn check(object: &Value, version: TrainerVersion) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(Value::Object(spec)) = object.get("spec") {
        Walk { version, errors: &mut errors }.object(spec, "", "spec");
    }
    errors
}

struct Walk<'a> {
    version: TrainerVersion,
    errors: &'a mut Vec<FieldError>,
}

impl Walk<'_> {
    /// `path`: the schema path (`a[].b`); `shown`: the path as reported (`spec.a[0].b`).
    fn object(&mut self, object: &Map<String, Value>, path: &str, shown: &str) {
        for (key, value) in object {
            let child = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
            let child_shown = format!("{shown}.{key}");
            match self.version.table().lookup(&child) {
                Some(ty) => self.value(ty, value, &child, &child_shown),
                None => self.errors.push(FieldError::new(
                    RULE,
                    ErrorType::UnsupportedField,
                    &child_shown,
                    format!("not a field of TrainJob {}{}", self.version.name(), hint(self.version, path, shown, key)),
                )),
            }
        }
    }

    fn value(&mut self, ty: Ty, value: &Value, path: &str, shown: &str) {
        let fits = match (ty, value) {
            (_, Value::Null) | (Ty::Any, _) => true,
            (Ty::Str, v) => v.is_string(),
            (Ty::Bool, v) => v.is_boolean(),
            (Ty::Int, v) => v.is_i64() || v.is_u64(),
            (Ty::IntOrStr, v) => v.is_i64() || v.is_u64() || v.is_string(),
            (Ty::Object, Value::Object(object)) => {
                self.object(object, path, shown);
                true
            }
            (Ty::Map, Value::Object(map)) => {
                for (key, v) in map {
                    if !(v.is_string() || v.is_null()) {
                        self.mismatch(Ty::Str, v, &format!("{shown}[{key}]"));
                    }
                }
                true
            }
            (Ty::List(item), Value::Array(items)) => {
                for (i, v) in items.iter().enumerate() {
                    self.value(*item, v, &format!("{path}[]"), &format!("{shown}[{i}]"));
                }
                true
            }
            _ => false,
        };
        if !fits {
            self.mismatch(ty, value, shown);
        }
    }

    fn mismatch(&mut self, ty: Ty, value: &Value, shown: &str) {
        let rendered = match value {
            Value::String(s) => quote(s),
            Value::Object(_) => "object".to_string(),
            Value::Array(_) => "array".to_string(),
            other => other.to_string(),
        };
        self.errors.push(FieldError::invalid(
            RULE,
            shown,
            rendered,
            format!("must be of type {} in TrainJob {}", ty.name(), self.version.name()),
        ));
    }
}

/// What the author likely meant by `key` under `parent`: the same place in other releases, the
/// same name elsewhere (in this release, else in another), or a sibling one edit away.
fn hint(version: TrainerVersion, parent: &str, parent_shown: &str, key: &str) -> String {
    let path = if parent.is_empty() { key.to_string() } else { format!("{parent}.{key}") };
    let others: Vec<&str> =
        TrainerVersion::ALL.iter().filter(|v| v.table().lookup(&path).is_some()).map(|v| v.name()).collect();
    if !others.is_empty() {
        return format!(" (a field of TrainJob {})", others.join(", "));
    }
    let same_name = |v: TrainerVersion| v.table().fields().map(|(p, _)| p).find(|p| last_segment(p) == key);
    if let Some(found) = same_name(version) {
        return format!(" (did you mean spec.{found}?)");
    }
    let prefix = if parent.is_empty() { String::new() } else { format!("{parent}.") };
    let sibling = version.table().fields().map(|(p, _)| p).find(|p| {
        p.strip_prefix(prefix.as_str())
            .is_some_and(|rest| !rest.contains('.') && !rest.contains('[') && one_edit(rest, key))
    });
    if let Some(found) = sibling {
        return format!(" (did you mean {parent_shown}.{}?)", last_segment(found));
    }
    for other in TrainerVersion::ALL.iter().rev().filter(|v| **v != version) {
        if let Some(found) = same_name(*other) {
            return format!(" (spec.{found} is a field of TrainJob {})", other.name());
        }
    }
    String::new()
}

fn last_segment(path: &str) -> &str {
    path.rsplit(['.', ']']).next().unwrap_or(path)
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
    if short.len() == long.len() { short[head + 1..] == long[head + 1..] } else { short[head..] == long[head + 1..] }
}
