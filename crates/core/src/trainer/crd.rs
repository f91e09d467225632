//! Each release's TrainJob CRD, applied as the API server applies it to a write.
//!
//! `crd/<tag>.json` is the `openAPIV3Schema` of the release tag's TrainJob CRD (descriptions
//! dropped), written by `make generate` from the tag's Go module. The steps follow the API server's
//! custom-resource handler: prune the fields the schema does not have (kubectl's strict field
//! validation refuses them), drop non-nullable `null`s, apply the schema's defaults, then validate:
//! types (a structural schema's, not JSON Schema's: `integer` takes `2.0`, `x-kubernetes-int-or-string`
//! takes an integer or a string), `enum`, bounds, lengths, `pattern`, kube-openapi's `date-time`,
//! `maxItems`, `required`, list-map and set uniqueness, and the CRD's CEL rules. On UPDATE,
//! validation ratchets (an unchanged value is not re-judged, correlated by key for list maps and by
//! value for sets) and transition rules (`oldSelf`) run only where the old value exists.
//! `e2e/oracle` runs upstream's own code on the same cases (`make oracle`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{LazyLock, OnceLock};

use regex::Regex;
use serde_json::{Map, Value};

use super::TrainerVersion;

/// A CRD that cannot be read: a bug in `make generate`'s output, caught by the tests.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CrdError {
    #[error("{path}: invalid pattern {pattern:?}: {source}")]
    Pattern { path: String, pattern: String, source: regex::Error },
    #[error("{path}: CEL rule {rule:?} does not compile: {detail}")]
    Rule { path: String, rule: String, detail: String },
    #[error("{path}: unsupported schema: {detail}")]
    Unsupported { path: String, detail: String },
    #[error("the CRD is not JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// The JSON types of a structural schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Type {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListType {
    Atomic,
    Set,
    Map(Vec<String>),
}

/// One CEL rule of `x-kubernetes-validations`.
pub(crate) struct CelRule {
    pub(crate) source: String,
    program: cel::Program,
    pub(crate) message: Option<String>,
    /// `messageExpression`: the message, when it evaluates to a non-empty string of one line.
    message_expression: Option<cel::Program>,
    /// The error type of a failure, from the rule's `reason`.
    kind: Kind,
    /// A transition rule: it reads `oldSelf`, so it runs only on UPDATE where the old value exists.
    pub(crate) transition: bool,
    field_path: Option<String>,
}

impl std::fmt::Debug for CelRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CelRule").field("source", &self.source).finish()
    }
}

/// A node of a structural schema.
#[derive(Debug, Default)]
pub(crate) struct Node {
    pub(crate) ty: Option<Type>,
    pub(crate) int_or_string: bool,
    pub(crate) nullable: bool,
    pub(crate) properties: BTreeMap<String, Node>,
    pub(crate) additional: Option<Box<Node>>,
    pub(crate) items: Option<Box<Node>>,
    pub(crate) required: Vec<String>,
    pub(crate) enumeration: Vec<Value>,
    pub(crate) minimum: Option<f64>,
    pub(crate) maximum: Option<f64>,
    pub(crate) min_length: Option<usize>,
    pub(crate) max_length: Option<usize>,
    pub(crate) pattern: Option<Regex>,
    pub(crate) format: Option<String>,
    pub(crate) min_items: Option<usize>,
    pub(crate) max_items: Option<usize>,
    pub(crate) min_properties: Option<usize>,
    pub(crate) max_properties: Option<usize>,
    pub(crate) default: Option<Value>,
    pub(crate) preserve_unknown: bool,
    pub(crate) list: Option<ListType>,
    pub(crate) rules: Vec<CelRule>,
}

// Each release's schema, built on first use. A compiled CEL program is read-only after
// compilation; the schema is shared by threads. (cel::Program holds `Arc`s only.)
static SCHEMAS: [OnceLock<Node>; TrainerVersion::ALL.len()] = [const { OnceLock::new() }; TrainerVersion::ALL.len()];

fn load(text: &str) -> Node {
    // The files are generated and tested (`each_row_has_its_generated_files_and_they_load`); a
    // failure is a build bug.
    parse(text).unwrap_or_else(|e| panic!("a committed CRD schema does not load: {e}"))
}

pub(crate) fn parse(text: &str) -> Result<Node, CrdError> {
    let value: Value = serde_json::from_str(text)?;
    Node::from_json(&value, "")
}

/// The release's TrainJob schema.
pub(crate) fn schema(version: TrainerVersion) -> &'static Node {
    SCHEMAS[version.index()].get_or_init(|| load(version.generated().crd))
}

/// The quantity pattern of `resource.Quantity` in every CRD.
const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

impl Node {
    fn from_json(v: &Value, path: &str) -> Result<Node, CrdError> {
        let unsupported = |detail: &str| CrdError::Unsupported { path: path.to_string(), detail: detail.to_string() };
        let Value::Object(o) = v else { return Err(unsupported("not an object")) };
        let mut node = Node::default();
        for (key, value) in o {
            match key.as_str() {
                "type" => {
                    node.ty = Some(match value.as_str() {
                        Some("object") => Type::Object,
                        Some("array") => Type::Array,
                        Some("string") => Type::String,
                        Some("integer") => Type::Integer,
                        Some("number") => Type::Number,
                        Some("boolean") => Type::Boolean,
                        _ => return Err(unsupported("type")),
                    })
                }
                "properties" => {
                    for (name, child) in value.as_object().ok_or_else(|| unsupported("properties"))? {
                        node.properties.insert(name.clone(), Node::from_json(child, &format!("{path}.{name}"))?);
                    }
                }
                "additionalProperties" => match value {
                    Value::Bool(_) => {}
                    child => node.additional = Some(Box::new(Node::from_json(child, &format!("{path}[*]"))?)),
                },
                "items" => node.items = Some(Box::new(Node::from_json(value, &format!("{path}[*]"))?)),
                "required" => {
                    node.required = value
                        .as_array()
                        .ok_or_else(|| unsupported("required"))?
                        .iter()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect()
                }
                "enum" => node.enumeration = value.as_array().cloned().unwrap_or_default(),
                "minimum" => node.minimum = value.as_f64(),
                "maximum" => node.maximum = value.as_f64(),
                "minLength" => node.min_length = value.as_u64().map(|n| n as usize),
                "maxLength" => node.max_length = value.as_u64().map(|n| n as usize),
                "minItems" => node.min_items = value.as_u64().map(|n| n as usize),
                "maxItems" => node.max_items = value.as_u64().map(|n| n as usize),
                "minProperties" => node.min_properties = value.as_u64().map(|n| n as usize),
                "maxProperties" => node.max_properties = value.as_u64().map(|n| n as usize),
                "pattern" => {
                    let pattern = value.as_str().ok_or_else(|| unsupported("pattern"))?;
                    node.pattern = Some(Regex::new(pattern).map_err(|source| CrdError::Pattern {
                        path: path.to_string(),
                        pattern: pattern.to_string(),
                        source,
                    })?);
                }
                "format" => node.format = value.as_str().map(str::to_string),
                "default" => node.default = Some(value.clone()),
                "nullable" => node.nullable = value.as_bool().unwrap_or(false),
                "x-kubernetes-int-or-string" => node.int_or_string = value.as_bool().unwrap_or(false),
                "x-kubernetes-preserve-unknown-fields" => node.preserve_unknown = value.as_bool().unwrap_or(false),
                "x-kubernetes-list-type" => {
                    node.list = Some(match value.as_str() {
                        Some("atomic") => ListType::Atomic,
                        Some("set") => ListType::Set,
                        // `x-kubernetes-list-map-keys` may come first (the keys are sorted).
                        Some("map") => match node.list.take() {
                            Some(ListType::Map(keys)) => ListType::Map(keys),
                            _ => ListType::Map(Vec::new()),
                        },
                        _ => return Err(unsupported("x-kubernetes-list-type")),
                    })
                }
                "x-kubernetes-list-map-keys" => {
                    let keys =
                        value.as_array().into_iter().flatten().filter_map(|k| k.as_str().map(str::to_string)).collect();
                    if let Some(ListType::Map(k)) = &mut node.list {
                        *k = keys;
                    } else {
                        node.list = Some(ListType::Map(keys));
                    }
                }
                "x-kubernetes-validations" => {
                    for rule in value.as_array().ok_or_else(|| unsupported("x-kubernetes-validations"))? {
                        node.rules.push(CelRule::from_json(rule, path)?);
                    }
                }
                // `anyOf` appears only beside `x-kubernetes-int-or-string` (integer or string);
                // the map type changes merging, not validation.
                "anyOf" | "x-kubernetes-map-type" | "description" | "example" => {}
                other => return Err(unsupported(&format!("keyword {other}"))),
            }
        }
        Ok(node)
    }

    fn is_quantity(&self) -> bool {
        self.int_or_string && self.pattern.as_ref().is_some_and(|p| p.as_str() == QUANTITY_PATTERN)
    }

    /// What a value of this node must be, for messages.
    pub(crate) fn describe(&self) -> &'static str {
        if self.is_quantity() {
            return "a quantity such as 500m, 2Gi or 4";
        }
        if self.int_or_string {
            return "of type integer or string";
        }
        match self.ty {
            Some(Type::Object) => "of type object",
            Some(Type::Array) => "of type array",
            Some(Type::String) if self.format.as_deref() == Some("date-time") => "an RFC 3339 date-time string",
            Some(Type::String) => "of type string",
            Some(Type::Integer) => "of type integer",
            Some(Type::Number) => "of type number",
            Some(Type::Boolean) => "of type boolean",
            None => "any value",
        }
    }
}

impl CelRule {
    fn from_json(rule: &Value, path: &str) -> Result<CelRule, CrdError> {
        let source = rule["rule"].as_str().unwrap_or_default().to_string();
        let program = cel::Program::compile(&source).map_err(|e| CrdError::Rule {
            path: path.to_string(),
            rule: source.clone(),
            detail: e.to_string(),
        })?;
        let transition = program.references().has_variable("oldSelf");
        let message_expression = match rule["messageExpression"].as_str() {
            Some(expression) => Some(cel::Program::compile(expression).map_err(|e| CrdError::Rule {
                path: path.to_string(),
                rule: expression.to_string(),
                detail: e.to_string(),
            })?),
            None => None,
        };
        Ok(CelRule {
            // The API server trims the message.
            message: rule["message"].as_str().map(|m| m.trim().to_string()).filter(|m| !m.is_empty()),
            message_expression,
            kind: Kind::of_reason(rule["reason"].as_str()),
            field_path: rule["fieldPath"].as_str().map(str::to_string),
            transition,
            program,
            source,
        })
    }
}

/// What the API server says about a write, before any webhook.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Field paths the schema does not have: pruned, or with strict field validation a 400.
    pub unknown: Vec<String>,
    /// The 422's causes.
    pub errors: Vec<ApiCause>,
}

pub use super::api_cause::{ApiCause, Kind};

/// The fields of `metadata` a custom resource may carry (`metav1.ObjectMeta`).
const OBJECT_META: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Judges `new` (CREATE) or the UPDATE `old` → `new` against `version`'s CRD. `version_name` is for
/// messages.
/// `object` with the name the API server would generate from its `generateName`, when it has no
/// name of its own; `None` when nothing is generated.
pub(crate) fn generated_name(object: &Value) -> Option<Value> {
    let metadata = object.get("metadata")?;
    let has_name = metadata.get("name").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
    let prefix = metadata.get("generateName").and_then(Value::as_str)?;
    if has_name {
        return None;
    }
    let mut named = object.clone();
    // apiserver's names.SimpleNameGenerator: the prefix cut to 58 characters, then 5 random ones.
    let prefix: String = prefix.chars().take(58).collect();
    named["metadata"]["name"] = Value::String(format!("{prefix}bcdfg"));
    Some(named)
}

pub fn judge(new: &Value, old: Option<&Value>, version: TrainerVersion) -> Verdict {
    let schema = schema(version);
    let mut verdict = Verdict::default();
    // A CREATE with only `generateName`: the API server generates the name before any
    // validation, so the CRD's name rules judge a generated name.
    let generated = if old.is_none() { generated_name(new) } else { None };
    let mut new = generated.unwrap_or_else(|| new.clone());
    let mut malformed = Vec::new();
    decode(&mut new, schema, &mut verdict.unknown, &mut malformed);
    let old = old.map(|o| {
        let mut o = o.clone();
        decode(&mut o, schema, &mut Vec::new(), &mut Vec::new());
        o
    });
    // The status subresource: a write to the main resource keeps the old status (none on CREATE).
    for object in std::iter::once(&mut new) {
        if let Value::Object(o) = object {
            o.remove("status");
        }
    }
    let old = old.map(|mut o| {
        if let Value::Object(m) = &mut o {
            m.remove("status");
        }
        o
    });
    let mut walk = Validate { version: version.name(), errors: Vec::new(), rules: Vec::new() };
    // Labels or annotations that are not strings: the API server cannot read the object (400).
    for path in malformed {
        walk.push(Kind::TypeInvalid, &path, None, "must be a map of strings".to_string());
    }
    // ObjectMeta's own checks come first, as the API server lists them.
    let meta = super::object_meta::validate(&new, old.as_ref());
    walk.errors.extend(meta.in_strategy);
    walk.node(&new, old.as_ref(), schema, "", true);
    // List-map and set uniqueness: on UPDATE only when the old object had no duplicate itself.
    let old_duplicates = old.as_ref().is_some_and(|o| {
        let mut found = Vec::new();
        duplicates(o, schema, "", &mut found);
        !found.is_empty()
    });
    if !old_duplicates {
        duplicates(&new, schema, "", &mut walk.errors);
    }
    let blocked = walk.errors.iter().any(|e| e.kind.blocking());
    if !blocked {
        walk.errors.append(&mut walk.rules);
    }
    // Checked before the strategy on UPDATE (they do not block the CEL rules), listed first;
    // the API server repeats the ones the strategy finds again, shown here once.
    let strategy = walk.errors;
    verdict.errors = meta.before_strategy;
    verdict.errors.retain(|f| !strategy.iter().any(|s| s.path == f.path && s.detail == f.detail));
    verdict.errors.extend(strategy);
    verdict
}

/// The object as the API server stores it and a webhook receives it: pruned to `version`'s
/// schema, non-nullable `null`s dropped, defaults applied. (For the differential tests, and the
/// defaulting webhook's tests.)
#[cfg(any(test, feature = "oracle"))]
pub fn admitted(object: &Value, version: TrainerVersion) -> Value {
    let mut object = object.clone();
    decode(&mut object, schema(version), &mut Vec::new(), &mut Vec::new());
    object
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_string() } else { format!("{path}.{key}") }
}

/// Pruning, `null` dropping and defaulting, as the API server decodes a custom resource.
fn decode(object: &mut Value, schema: &Node, unknown: &mut Vec<String>, malformed: &mut Vec<String>) {
    if let Value::Object(o) = object {
        if let Some(Value::Object(meta)) = o.get_mut("metadata") {
            for key in ["labels", "annotations"] {
                let strings = meta
                    .get(key)
                    .is_none_or(|v| v.is_null() || v.as_object().is_some_and(|m| m.values().all(Value::is_string)));
                if !strings {
                    malformed.push(format!("metadata.{key}"));
                }
            }
            meta.retain(|k, _| {
                let known = OBJECT_META.contains(&k.as_str());
                if !known {
                    unknown.push(format!("metadata.{k}"));
                }
                known
            });
        }
        let keys: Vec<String> = o.keys().cloned().collect();
        for key in keys {
            if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            prune_child(o, &key, schema, "", unknown);
        }
    }
    default(object, schema);
    unknown.sort();
}

fn prune_child(o: &mut Map<String, Value>, key: &str, schema: &Node, path: &str, unknown: &mut Vec<String>) {
    let child_path = join(path, key);
    match schema.properties.get(key) {
        Some(child) => {
            let drop = o.get(key).is_some_and(Value::is_null) && !child.nullable && child.default.is_none();
            if drop {
                o.remove(key);
            } else if let Some(value) = o.get_mut(key) {
                prune(value, child, &child_path, unknown);
            }
        }
        None if schema.preserve_unknown => {}
        None => {
            unknown.push(child_path);
            o.remove(key);
        }
    }
}

fn prune(value: &mut Value, schema: &Node, path: &str, unknown: &mut Vec<String>) {
    match value {
        Value::Object(o) => {
            if let Some(additional) = &schema.additional {
                // PruneNonNullableNullsWithoutDefaults drops a map's non-nullable `null` values as
                // it drops an object's (`nodeSelector: {a: null}` is stored as `{}`); a list's stay.
                if !additional.nullable && additional.default.is_none() {
                    o.retain(|_, child| !child.is_null());
                }
                for (key, child) in o.iter_mut() {
                    prune(child, additional, &format!("{path}[{key}]"), unknown);
                }
                return;
            }
            if schema.ty != Some(Type::Object) {
                return;
            }
            let keys: Vec<String> = o.keys().cloned().collect();
            for key in keys {
                prune_child(o, &key, schema, path, unknown);
            }
        }
        Value::Array(items) => {
            if let Some(item) = &schema.items {
                for (i, child) in items.iter_mut().enumerate() {
                    prune(child, item, &format!("{path}[{i}]"), unknown);
                }
            }
        }
        _ => {}
    }
}

fn default(value: &mut Value, schema: &Node) {
    match value {
        Value::Object(o) => {
            if let Some(additional) = &schema.additional {
                for child in o.values_mut() {
                    default_null(child, additional);
                    default(child, additional);
                }
                return;
            }
            for (key, child) in &schema.properties {
                if let Some(d) = &child.default {
                    let missing = match o.get(key) {
                        None => true,
                        Some(Value::Null) => !child.nullable,
                        Some(_) => false,
                    };
                    if missing {
                        o.insert(key.clone(), d.clone());
                    }
                }
                if let Some(v) = o.get_mut(key) {
                    default(v, child);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = &schema.items {
                for child in items {
                    default_null(child, item);
                    default(child, item);
                }
            }
        }
        _ => {}
    }
}

/// A non-nullable `null` map value or list item takes the schema's default, as structural
/// defaulting does; without a default a list item stays `null` (and fails validation).
fn default_null(value: &mut Value, schema: &Node) {
    if let (Value::Null, Some(d)) = (&value, &schema.default)
        && !schema.nullable
    {
        *value = d.clone();
    }
}

struct Validate {
    version: &'static str,
    errors: Vec<ApiCause>,
    /// CEL rule failures, reported only when no blocking error was found.
    rules: Vec<ApiCause>,
}

impl Validate {
    fn push(&mut self, kind: Kind, path: &str, value: Option<&Value>, detail: String) {
        self.errors.push(ApiCause {
            kind,
            path: path.to_string(),
            value: value.cloned(),
            detail,
            rule: false,
            range_of: None,
        });
    }

    /// `old` is the correlated old value (UPDATE), if any.
    fn node(&mut self, value: &Value, old: Option<&Value>, s: &Node, path: &str, root: bool) {
        // Ratcheting: an unchanged value is not judged again, but its transition rules still run
        // (they pass on an unchanged value CEL can read).
        // The object itself always counts as changed: a write touches its metadata.
        if !root && old.is_some_and(|o| unchanged(value, o, s)) {
            self.unchanged_transitions(value, s, path);
            return;
        }
        if value.is_null() {
            if !s.nullable {
                let detail = format!("must be {} in TrainJob {}", s.describe(), self.version);
                self.push(Kind::TypeInvalid, path, Some(value), detail);
            }
            return;
        }
        let fits = if s.int_or_string {
            integer(value) || value.is_string()
        } else {
            match s.ty {
                None => true,
                Some(Type::Object) => value.is_object(),
                Some(Type::Array) => value.is_array(),
                Some(Type::String) => value.is_string(),
                Some(Type::Integer) => integer(value),
                Some(Type::Number) => value.is_number(),
                Some(Type::Boolean) => value.is_boolean(),
            }
        };
        if !fits {
            let detail = format!("must be {} in TrainJob {}", s.describe(), self.version);
            self.push(Kind::TypeInvalid, path, Some(value), detail);
            // kube-openapi runs every validator: a number of the wrong type is still checked
            // against its format's range and its bounds (`0.5` for an int64 with `minimum: 1`).
            if let Value::Number(n) = value {
                self.number(n, value, s, path);
            }
            return;
        }
        if !s.enumeration.is_empty() && !s.enumeration.contains(value) {
            // field.NotSupported: each value Go-quoted, a non-string one as its JSON.
            let supported: Vec<String> = s
                .enumeration
                .iter()
                .map(|v| match v {
                    Value::String(_) => v.to_string(),
                    other => Value::String(other.to_string()).to_string(),
                })
                .collect();
            self.push(Kind::NotSupported, path, Some(value), format!("supported values: {}", supported.join(", ")));
        }
        match value {
            Value::String(text) => self.string(text, value, s, path),
            Value::Number(n) => self.number(n, value, s, path),
            Value::Array(items) => self.array(items, old, s, path),
            Value::Object(o) => self.object(o, old, s, path, root),
            _ => {}
        }
        self.rules(value, old, s, path);
    }

    fn number(&mut self, number: &serde_json::Number, value: &Value, s: &Node, path: &str) {
        // An int-or-string's number is judged by its `anyOf` integer branch, which has no format.
        let format = if s.int_or_string { None } else { s.format.as_deref() };
        let integer = s.int_or_string || s.ty == Some(Type::Integer);
        if integer && !in_format_range(number, format) {
            self.errors.push(ApiCause::format_range(path, format));
        }
        let n = number.as_f64().unwrap_or(0.0);
        if let Some(min) = s.minimum
            && n < min
        {
            self.push(Kind::Invalid, path, Some(value), format!("must be greater than or equal to {min}"));
        }
        if let Some(max) = s.maximum
            && n > max
        {
            self.push(Kind::Invalid, path, Some(value), format!("must be less than or equal to {max}"));
        }
    }

    fn array(&mut self, items: &[Value], old: Option<&Value>, s: &Node, path: &str) {
        if let Some(max) = s.max_items
            && items.len() > max
        {
            // field.TooMany: the count as the value.
            let detail = format!("must have at most {max} items");
            self.push(Kind::TooMany, path, Some(&Value::from(items.len())), detail);
        }
        if let Some(min) = s.min_items
            && items.len() < min
        {
            self.push(Kind::Invalid, path, None, format!("must have at least {min} items"));
        }
        if let Some(item) = &s.items {
            let old_items = old.and_then(Value::as_array);
            for (i, child) in items.iter().enumerate() {
                let correlated = old_items.and_then(|o| correlate(s.list.as_ref(), child, o));
                self.node(child, correlated, item, &format!("{path}[{i}]"), false);
            }
        }
    }

    fn object(&mut self, o: &Map<String, Value>, old: Option<&Value>, s: &Node, path: &str, root: bool) {
        let old_object = old.and_then(Value::as_object);
        if let Some(max) = s.max_properties
            && o.len() > max
        {
            // field.TooMany, as for items.
            self.push(Kind::TooMany, path, Some(&Value::from(o.len())), format!("must have at most {max} items"));
        }
        if let Some(min) = s.min_properties
            && o.len() < min
        {
            self.push(Kind::Invalid, path, None, format!("must have at least {min} properties"));
        }
        for key in &s.required {
            if !o.contains_key(key) {
                let detail = format!("required in TrainJob {}", self.version);
                self.push(Kind::Required, &join(path, key), None, detail);
            }
        }
        for (key, child) in o {
            let old_child = old_object.and_then(|m| m.get(key));
            if let Some(additional) = &s.additional {
                self.node(child, old_child, additional, &join(path, key), false);
            } else if let Some(schema) = s.properties.get(key) {
                if root && key == "metadata" {
                    continue;
                }
                self.node(child, old_child, schema, &join(path, key), false);
            }
        }
    }

    fn string(&mut self, text: &str, value: &Value, s: &Node, path: &str) {
        let chars = text.chars().count();
        if let Some(max) = s.max_length
            && chars > max
        {
            // field.TooLong: no value, and "bytes" though kube-openapi counts characters.
            self.push(Kind::TooLong, path, None, format!("may not be more than {max} bytes"));
        }
        if let Some(min) = s.min_length
            && chars < min
        {
            let detail = format!("must be at least {min} characters long in TrainJob {}", self.version);
            self.push(Kind::Invalid, path, Some(value), detail);
        }
        if let Some(pattern) = &s.pattern
            && !pattern.is_match(text)
        {
            let detail = if s.is_quantity() {
                "must be a quantity such as 500m, 2Gi or 4".to_string()
            } else {
                format!("must match the pattern {}", pattern.as_str())
            };
            self.push(Kind::Invalid, path, Some(value), detail);
        }
        if s.format.as_deref() == Some("date-time") && !is_date_time(text) {
            // kube-openapi reports a format as a type.
            let detail = format!("must be an RFC 3339 date-time string in TrainJob {}", self.version);
            self.push(Kind::TypeInvalid, path, Some(value), detail);
        }
    }

    /// The transition rules inside an unchanged value: `self == oldSelf` holds, unless CEL cannot
    /// read the value under its schema (the API server then reports the rule as failed).
    fn unchanged_transitions(&mut self, value: &Value, s: &Node, path: &str) {
        if s.rules.iter().any(|r| r.transition) && !cel_fits(value, s) {
            for rule in s.rules.iter().filter(|r| r.transition) {
                self.rule_failed(rule, path, value, None);
            }
        }
        match value {
            Value::Object(o) => {
                for (key, child) in o {
                    if let Some(additional) = &s.additional {
                        self.unchanged_transitions(child, additional, &join(path, key));
                    } else if let Some(schema) = s.properties.get(key) {
                        self.unchanged_transitions(child, schema, &join(path, key));
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item) = &s.items {
                    for (i, child) in items.iter().enumerate() {
                        self.unchanged_transitions(child, item, &format!("{path}[{i}]"));
                    }
                }
            }
            _ => {}
        }
    }

    /// A failed rule, quoting a scalar value as the API server does. `context` is the rule's own,
    /// for its `messageExpression`.
    fn rule_failed(&mut self, rule: &CelRule, path: &str, value: &Value, context: Option<&cel::Context>) {
        let at = match &rule.field_path {
            Some(field) => format!("{path}{field}"),
            None => path.to_string(),
        };
        // A `messageExpression` that fails, or is empty or several lines, leaves the message.
        let evaluated = rule.message_expression.as_ref().zip(context).and_then(|(program, context)| {
            match program.execute(context) {
                Ok(cel::Value::String(text)) => {
                    let text = text.trim();
                    (!text.is_empty() && !text.contains('\n')).then(|| text.to_string())
                }
                _ => None,
            }
        });
        let detail = evaluated
            .or_else(|| rule.message.clone())
            .unwrap_or_else(|| format!("failed rule: {}", rule.source.trim()));
        let value = (!value.is_object() && !value.is_array() && rule.field_path.is_none()).then(|| value.clone());
        let kind = rule.kind;
        // field.Required and field.Forbidden carry no value; field.Duplicate no detail.
        let (value, detail) = match kind {
            Kind::Required | Kind::Forbidden => (None, detail),
            Kind::Duplicate => (value, String::new()),
            _ => (value, detail),
        };
        self.rules.push(ApiCause { kind, path: at, value, detail, rule: true, range_of: None });
    }

    fn rules(&mut self, value: &Value, old: Option<&Value>, s: &Node, path: &str) {
        // The root's rules read `metadata` as the API server re-encodes it.
        let coerced = path.is_empty().then(|| (coerced_metadata(value), old.map(coerced_metadata)));
        let (seen, old_seen) = match &coerced {
            Some((value, old)) => (value, old.as_ref()),
            None => (value, old),
        };
        for rule in &s.rules {
            if rule.transition && old.is_none() {
                continue;
            }
            // A value CEL cannot read under its schema (`1.0` where an int is expected) fails the rule.
            // CEL reads values lazily: only a rule that compares whole values (`self == oldSelf`)
            // reads every member.
            if rule.transition && (!cel_fits(value, s) || old.is_some_and(|o| !cel_fits(o, s))) {
                self.rule_failed(rule, path, value, None);
                continue;
            }
            let mut context = cel::Context::default();
            context.add_variable_from_value("self", to_cel(seen, Some(s)));
            if let Some(old) = old_seen {
                context.add_variable_from_value("oldSelf", to_cel(old, Some(s)));
            }
            if !matches!(rule.program.execute(&context), Ok(cel::Value::Bool(true))) {
                self.rule_failed(rule, path, value, Some(&context));
            }
        }
    }
}

/// The object as the root's CEL rules read it: the API server decodes `metadata` into ObjectMeta
/// and encodes it again, so its empty members (`name: ""`) are absent (`self.metadata.name` is
/// then an error, which fails the rule).
fn coerced_metadata(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(Value::Object(meta)) = object.get_mut("metadata") {
        meta.retain(|_, v| match v {
            Value::Null => false,
            Value::String(s) => !s.is_empty(),
            Value::Object(m) => !m.is_empty(),
            Value::Array(a) => !a.is_empty(),
            Value::Number(n) => n.as_f64() != Some(0.0),
            Value::Bool(b) => *b,
        });
    }
    object
}

/// A JSON number as the API server decodes it (apimachinery's `utiljson`): an integer literal that
/// fits int64 is an int64, any other number (`2.0`, `1e3`, a literal past int64) a float64.
#[derive(Debug, Clone, Copy, PartialEq)]
enum GoNumber {
    Int(i64),
    Float(f64),
}

fn go_number(n: &serde_json::Number) -> GoNumber {
    match n.as_i64() {
        Some(i) => GoNumber::Int(i),
        None => GoNumber::Float(n.as_f64().unwrap_or(f64::NAN)),
    }
}

/// An integer as a structural schema's `integer` takes it (kube-openapi's type check): an int64,
/// or a float64 that go-openapi's `swag.IsFloat64AJSONInteger` takes — within ±2^53 and whole, or
/// within a relative 1e-9 of a whole number (`2.0` passes; `9223372036854775808`, a float64 past
/// 2^53, does not).
fn integer(v: &Value) -> bool {
    match v {
        Value::Number(n) => match go_number(n) {
            GoNumber::Int(_) => true,
            GoNumber::Float(f) => json_integer(f),
        },
        _ => false,
    }
}

/// go-openapi's `swag.IsFloat64AJSONInteger`.
fn json_integer(f: f64) -> bool {
    const LIMIT: f64 = 9_007_199_254_740_992.0; // 2^53
    if !f.is_finite() || !(-LIMIT..=LIMIT).contains(&f) {
        return false;
    }
    // Go's uint64 conversion of a negative float is not Rust's (which gives 0), but for a negative
    // f both lead to the same answer below: it is whole (int64 round trip) or it is not.
    let g = f as u64 as f64;
    let diff = (f - g).abs();
    if f == g || f == (f as i64) as f64 {
        return true;
    }
    if f == 0.0 || g == 0.0 || diff < f64::from_bits(1) {
        return diff < 1e-9 * f64::from_bits(1);
    }
    diff / (f.abs() + g.abs()).min(f64::MAX) < 1e-9
}

/// kube-openapi's range check of a number against an `integer` schema's format (Kubernetes 1.36's
/// `IsValueValidAgainstRange`): the number as Go prints it (a float64 with its shortest digits,
/// never an exponent: `-9223372036854775809` decodes as -2^63, printed `-9223372036854776000`)
/// must parse as an int32 for `format: int32`, as an int64 otherwise.
fn in_format_range(n: &serde_json::Number, format: Option<&str>) -> bool {
    // Rust's `Display` of an f64 is Go's `FormatFloat(f, 'f', -1, 64)`: shortest round-trip
    // digits, no exponent.
    let text = match go_number(n) {
        GoNumber::Int(i) => i.to_string(),
        GoNumber::Float(f) => f.to_string(),
    };
    match format {
        Some("int32") => text.parse::<i32>().is_ok(),
        _ => text.parse::<i64>().is_ok(),
    }
}

/// Whether the API server's ratcheting takes `value` as unchanged from `old` (`CachedDeepEqual`):
/// equal, with list-map items compared to their correlated old item.
fn unchanged(value: &Value, old: &Value, s: &Node) -> bool {
    match (value, old) {
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter().all(|(k, v)| {
                    let child = s.additional.as_deref().or_else(|| s.properties.get(k));
                    b.get(k).is_some_and(|w| child.map_or(v == w, |c| unchanged(v, w, c)))
                })
        }
        (Value::Array(a), Value::Array(b)) => {
            if matches!(s.list, Some(ListType::Map(_))) {
                // Correlated by key (a repeated key with its first old item), so a reordered list
                // map is unchanged.
                return a.len() == b.len()
                    && a.iter().all(|v| {
                        correlate(s.list.as_ref(), v, b)
                            .is_some_and(|w| s.items.as_deref().map_or(v == w, |item| unchanged(v, w, item)))
                    });
            }
            // Other lists are not correlated: compared whole.
            a == b
        }
        _ => value == old,
    }
}

/// Two items of a list map with the same key but different contents: CEL, which compares a list
/// map item by item through its key, cannot find the list equal even to itself.
fn conflicting_key(items: &[Value], s: &Node) -> bool {
    let Some(ListType::Map(keys)) = &s.list else { return false };
    let key = |v: &Value| -> Vec<Option<Value>> { keys.iter().map(|k| v.get(k).cloned()).collect() };
    items.iter().enumerate().any(|(i, v)| items[..i].iter().any(|w| key(w) == key(v) && w != v))
}

/// Whether CEL can read `value` under `s`: the API server converts it by the schema's types, and
/// a float where an integer is declared (`1.0`), a wrong type, a non-nullable `null` or a list map
/// whose key repeats with different contents fails.
fn cel_fits(value: &Value, s: &Node) -> bool {
    // CEL reads an integer only from an int64 (a float64, even `2.0`, is an error).
    let integer = |n: &serde_json::Number| n.is_i64();
    match value {
        Value::Null => s.nullable,
        Value::Number(n) if s.int_or_string || s.ty == Some(Type::Integer) => integer(n),
        Value::String(_) if s.int_or_string => true,
        _ if s.int_or_string => false,
        Value::Bool(_) => matches!(s.ty, None | Some(Type::Boolean)),
        Value::Number(_) => matches!(s.ty, None | Some(Type::Number)),
        Value::String(_) => matches!(s.ty, None | Some(Type::String)),
        Value::Array(items) => {
            matches!(s.ty, None | Some(Type::Array))
                && !conflicting_key(items, s)
                && s.items.as_deref().is_none_or(|item| items.iter().all(|v| cel_fits(v, item)))
        }
        Value::Object(o) => {
            matches!(s.ty, None | Some(Type::Object))
                && o.iter().all(|(k, v)| match s.additional.as_deref().or_else(|| s.properties.get(k)) {
                    Some(child) => cel_fits(v, child),
                    None => true,
                })
        }
    }
}

/// The old list item correlated with `item`: same key values in a list map; none in a set or an
/// atomic list.
fn correlate<'a>(list: Option<&ListType>, item: &Value, old: &'a [Value]) -> Option<&'a Value> {
    match list {
        // The first old item with the key (a repeated key correlates with its first item). An item
        // that lacks a key field, or whose key is not a scalar, has no key and correlates with
        // nothing (apiserver's `MapList`): it is judged again.
        Some(ListType::Map(keys)) => {
            let key = |v: &'_ Value| -> Option<Vec<Value>> {
                keys.iter()
                    .map(|k| {
                        v.get(k).filter(|k| matches!(k, Value::Bool(_) | Value::Number(_) | Value::String(_))).cloned()
                    })
                    .collect()
            };
            let wanted = key(item)?;
            old.iter().find(|o| key(o).as_ref() == Some(&wanted))
        }
        // Set and atomic list items are not correlated (apiserver's CorrelatedObject).
        _ => None,
    }
}

/// The list maps with two items of the same key, and sets with two equal items, everywhere in
/// `value`.
fn duplicates(value: &Value, s: &Node, path: &str, out: &mut Vec<ApiCause>) {
    match value {
        Value::Array(items) => {
            let Some(item) = &s.items else { return };
            match &s.list {
                Some(ListType::Map(keys)) => {
                    let mut seen: Vec<Vec<Option<&Value>>> = Vec::new();
                    for (i, child) in items.iter().enumerate() {
                        let key: Vec<Option<&Value>> = keys
                            .iter()
                            .map(|k| child.get(k).or_else(|| item.properties.get(k)?.default.as_ref()))
                            .collect();
                        if seen.contains(&key) {
                            // field.Duplicate with the item's key fields as the value.
                            let shown: Map<String, Value> =
                                keys.iter().zip(&key).filter_map(|(k, v)| Some((k.clone(), (*v)?.clone()))).collect();
                            out.push(ApiCause {
                                kind: Kind::Duplicate,
                                path: format!("{path}[{i}]"),
                                value: Some(Value::Object(shown)),
                                detail: String::new(),
                                rule: false,
                                range_of: None,
                            });
                        } else {
                            seen.push(key);
                        }
                    }
                }
                Some(ListType::Set) => {
                    for (i, child) in items.iter().enumerate() {
                        if items[..i].contains(child) {
                            out.push(ApiCause {
                                kind: Kind::Duplicate,
                                path: format!("{path}[{i}]"),
                                value: Some(child.clone()),
                                // field.Duplicate: the value, no detail.
                                detail: String::new(),
                                rule: false,
                                range_of: None,
                            });
                        }
                    }
                }
                _ => {}
            }
            for (i, child) in items.iter().enumerate() {
                duplicates(child, item, &format!("{path}[{i}]"), out);
            }
        }
        Value::Object(o) => {
            for (key, child) in o {
                if let Some(additional) = &s.additional {
                    duplicates(child, additional, &join(path, key), out);
                } else if let Some(schema) = s.properties.get(key) {
                    duplicates(child, schema, &join(path, key), out);
                }
            }
        }
        _ => {}
    }
}

/// kube-openapi's `date-time` check (`strfmt.IsDateTime`): the date before the first `t` (either
/// case), then `hh:mm:ss`, an optional fraction, and `z` or an offset; hours ≤ 23, minutes and
/// seconds ≤ 59 (no leap second).
pub(crate) fn is_date_time(text: &str) -> bool {
    #[allow(clippy::expect_used, reason = "a fixed pattern: it compiles (the date-time tests run it)")]
    static TIME: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$").expect("pattern")
    });
    if text.len() < 4 {
        return false;
    }
    let lower = text.to_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else { return false };
    if !is_date(date) {
        return false;
    }
    let Some(c) = TIME.captures(time) else { return false };
    let num = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<u32>().ok()).unwrap_or(99);
    num(1) <= 23 && num(2) <= 59 && num(3) <= 59
}

/// Go's `time.Parse("2006-01-02", s)`: four-digit year, two-digit month and a day the month has.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| {
        b[r.clone()].iter().all(u8::is_ascii_digit).then(|| s[r].parse::<u32>().ok()).flatten()
    };
    let (Some(year), Some(month), Some(day)) = (digits(0..4), digits(5..7), digits(8..10)) else { return false };
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// A JSON value as CEL sees it under its schema: integers as `int`, list maps and sets in a
/// canonical order (the API server compares them ignoring order).
fn to_cel(value: &Value, s: Option<&Node>) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => {
            let as_int = s.is_some_and(|s| s.int_or_string || s.ty == Some(Type::Integer)) || !n.is_f64();
            match (as_int, n.as_i64(), n.as_f64()) {
                (true, Some(i), _) => cel::Value::Int(i),
                (true, None, Some(f)) if f.fract() == 0.0 && f.abs() < 9.2e18 => cel::Value::Int(f as i64),
                (_, _, Some(f)) => cel::Value::Float(f),
                _ => cel::Value::Null,
            }
        }
        Value::String(text) => cel::Value::String(text.clone().into()),
        Value::Array(items) => {
            let item = s.and_then(|s| s.items.as_deref());
            let mut list: Vec<(String, cel::Value)> = items.iter().map(|v| (canonical(v), to_cel(v, item))).collect();
            if matches!(s.and_then(|s| s.list.as_ref()), Some(ListType::Map(_) | ListType::Set)) {
                list.sort_by(|a, b| a.0.cmp(&b.0));
            }
            cel::Value::List(std::sync::Arc::new(list.into_iter().map(|(_, v)| v).collect()))
        }
        Value::Object(o) => {
            let map: HashMap<String, cel::Value> = o
                .iter()
                .map(|(k, v)| {
                    let child = s.and_then(|s| s.additional.as_deref().or_else(|| s.properties.get(k)));
                    (k.clone(), to_cel(v, child))
                })
                .collect();
            cel::Value::Map(map.into())
        }
    }
}

/// A value's JSON with object keys sorted (serde_json's map is ordered), for sorting.
fn canonical(v: &Value) -> String {
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_time_as_kube_openapi_checks_it() {
        for ok in [
            "2026-01-01T00:00:00Z",
            "2026-01-01t00:00:00z",
            "2026-01-01T00:00:00.1234567890Z",
            "2024-02-29T23:59:59+01:00",
        ] {
            assert!(is_date_time(ok), "{ok}");
        }
        for bad in [
            "2026-01-01 00:00:00Z",
            "2026-01-01T00:00:60Z",
            "2026-02-29T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-1-01T00:00:00Z",
        ] {
            assert!(!is_date_time(bad), "{bad}");
        }
    }
}

/// TrainJob ns/job with `spec`, for the tests below.
#[cfg(test)]
fn job(spec: Value) -> Value {
    serde_json::json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "job", "namespace": "ns"}, "spec": spec})
}

#[cfg(test)]
mod transition_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn transition_rules_refuse_edits_of_immutable_fields() {
        let old = job(json!({"runtimeRef": {"name": "t"}, "trainer": {"image": "a"}}));
        let new = job(json!({"runtimeRef": {"name": "t"}, "trainer": {"image": "b"}}));
        let verdict = judge(&new, Some(&old), TrainerVersion::V2_3);
        let paths: Vec<&str> = verdict.errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["spec.trainer"], "{verdict:?}");
        assert!(judge(&new, Some(&old), TrainerVersion::V2_1).errors.is_empty());
        assert!(judge(&new, None, TrainerVersion::V2_3).errors.is_empty());
    }
}

#[cfg(test)]
mod root_rule_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_name_rules_apply_on_update() {
        let old = json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "Job_1", "namespace": "ns"}, "spec": {"runtimeRef": {"name": "torch"}}});
        let mut new = old.clone();
        new["spec"]["suspend"] = json!(false);
        let verdict = judge(&new, Some(&old), TrainerVersion::V2_1);
        assert_eq!(verdict.errors.len(), 1, "{verdict:?}");
    }
}

#[cfg(test)]
mod coerced_metadata_tests {
    use super::*;
    use serde_json::json;

    /// An empty `metadata.name` is absent to the root's CEL rules, as after the API server's
    /// ObjectMeta round trip: both of v2.3's name rules fail (reading it is an error), not only
    /// the pattern.
    #[test]
    fn an_empty_name_fails_both_name_rules() {
        let object = json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "", "generateName": "job-", "namespace": "ns"}, "spec": {"runtimeRef": {"name": "t"}}});
        let verdict = judge(&object, Some(&object), TrainerVersion::V2_3);
        let rules: Vec<&str> = verdict.errors.iter().filter(|e| e.from_rule()).map(|e| e.detail.as_str()).collect();
        assert_eq!(
            rules,
            ["metadata.name must match RFC 1035 DNS label format", "metadata.name must be no more than 63 characters"],
            "{verdict:?}"
        );
        assert_eq!(coerced_metadata(&object)["metadata"], json!({"generateName": "job-", "namespace": "ns"}));
    }
}

#[cfg(test)]
mod ratchet_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_unchanged_list_over_max_items_is_ratcheted() {
        let patches: Vec<Value> = (0..17).map(|i| json!({"manager": format!("example.com/m{i}")})).collect();
        let old = json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "job", "namespace": "ns"}, "spec": {"runtimeRef": {"name": "t"}, "runtimePatches": patches}});
        let mut new = old.clone();
        new["spec"]["suspend"] = json!(true);
        let verdict = judge(&new, Some(&old), TrainerVersion::V2_3);
        assert!(verdict.errors.is_empty(), "{verdict:?}");
        assert_eq!(judge(&new, None, TrainerVersion::V2_3).errors.len(), 1);
    }
}

#[cfg(test)]
mod correlation_tests {
    use super::*;
    use serde_json::json;

    /// A list-map item is correlated with the old item of the same key, and ratchets when
    /// unchanged; an item that lacks its key field correlates with nothing (apiserver's `MapList`),
    /// so it is judged again even when the old list held the same item.
    #[test]
    fn a_list_map_item_without_its_key_is_judged_again() {
        let job = |env: Value| json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "job", "namespace": "ns"}, "spec": {"runtimeRef": {"name": "t"}, "trainer": {"env": env}}});
        let unkeyed = json!([{"valueFrom": {"configMapKeyRef": {}}}]);
        let keyed = json!([{"name": "A", "valueFrom": {"configMapKeyRef": {}}}]);
        let with_name = |env: &Value| {
            let mut env = env.clone();
            env[0]["valueFrom"]["configMapKeyRef"]["name"] = json!("");
            env
        };
        // (old env, new env, the paths found)
        let cases = [
            (
                &unkeyed,
                with_name(&unkeyed),
                vec!["spec.trainer.env[0].valueFrom.configMapKeyRef.key", "spec.trainer.env[0].name"],
            ),
            (
                &unkeyed,
                unkeyed.clone(),
                vec!["spec.trainer.env[0].valueFrom.configMapKeyRef.key", "spec.trainer.env[0].name"],
            ),
            // `name: ""` is the default: after defaulting the item is unchanged, and ratchets.
            (&keyed, with_name(&keyed), vec![]),
            (&keyed, keyed.clone(), vec![]),
        ];
        for (old, new, want) in cases {
            let verdict = judge(&job(new.clone()), Some(&job(old.clone())), TrainerVersion::V2_1);
            let mut found: Vec<&str> = verdict.errors.iter().map(|e| e.path.as_str()).collect();
            found.sort_unstable();
            let mut want = want;
            want.sort_unstable();
            assert_eq!(found, want, "{old} -> {new}: {verdict:?}");
        }
    }
}

#[cfg(test)]
mod kind_tests {
    use super::*;
    use serde_json::json;

    fn found(verdict: &Verdict) -> Vec<(&str, &'static str, &str)> {
        verdict.errors.iter().map(|e| (e.path.as_str(), e.kind().cause_type(), e.detail.as_str())).collect()
    }

    /// Each check reports the error type the API server gives it, with apimachinery's wording
    /// where the type has one.
    #[test]
    fn each_check_reports_the_api_servers_error_type() {
        let patches: Vec<Value> = (0..17).map(|i| json!({"manager": format!("example.com/m{i}")})).collect();
        let cases = [
            (
                json!({"runtimeRef": {"name": "t"}, "trainer": {"numNodes": "2"}}),
                "spec.trainer.numNodes",
                "FieldValueTypeInvalid",
                None,
            ),
            (
                json!({"runtimeRef": {"name": "t"}, "runtimePatches": [{"manager": "a.b/c", "time": "2026-01-01 00:00:00Z"}]}),
                "spec.runtimePatches[0].time",
                "FieldValueTypeInvalid",
                None,
            ),
            (
                json!({"runtimeRef": {"name": "t"}, "trainer": {"image": "x".repeat(501)}}),
                "spec.trainer.image",
                "FieldValueTooLong",
                Some("may not be more than 500 bytes"),
            ),
            (
                json!({"runtimeRef": {"name": "t"}, "runtimePatches": patches}),
                "spec.runtimePatches",
                "FieldValueTooMany",
                Some("must have at most 16 items"),
            ),
            (json!({"runtimeRef": {"name": "t"}}), "", "", None),
            (json!({"trainer": {}}), "spec.runtimeRef", "FieldValueRequired", None),
            (
                json!({"runtimeRef": {"name": "t"}, "activeDeadlineSeconds": 0}),
                "spec.activeDeadlineSeconds",
                "FieldValueInvalid",
                None,
            ),
            (
                json!({"runtimeRef": {"name": "t"}, "trainer": {"env": [{"name": "A"}, {"name": "A", "value": "b"}]}}),
                "spec.trainer.env[1]",
                "FieldValueDuplicate",
                None,
            ),
            (
                json!({"runtimeRef": {"name": "t"}, "managedBy": "kueue"}),
                "spec.managedBy",
                "FieldValueInvalid",
                Some("ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set"),
            ),
        ];
        for (spec, path, cause, detail) in cases {
            let verdict = judge(&job(spec.clone()), None, TrainerVersion::V2_3);
            let found = found(&verdict);
            if path.is_empty() {
                assert!(found.is_empty(), "{spec}: {found:?}");
                continue;
            }
            assert_eq!(found.len(), 1, "{spec}: {found:?}");
            assert_eq!((found[0].0, found[0].1), (path, cause), "{spec}");
            if let Some(detail) = detail {
                assert_eq!(found[0].2, detail, "{spec}");
            }
        }
    }

    /// ObjectMeta's checks have apimachinery's types too: a size is `TooLong`, a finalizer added
    /// to an object being deleted `Forbidden`, a missing name `Required`.
    #[test]
    fn object_meta_findings_have_apimachinerys_types() {
        let spec = json!({"runtimeRef": {"name": "t"}});
        let with_meta = |metadata: Value| json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": metadata, "spec": spec});
        let big = with_meta(json!({"name": "job", "namespace": "ns", "annotations": {"a": "x".repeat(256 * 1024)}}));
        let unnamed = with_meta(json!({"namespace": "ns"}));
        let deleting = |finalizers: Value| {
            with_meta(
                json!({"name": "job", "namespace": "ns", "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": finalizers}),
            )
        };
        let cases = [
            (big, None, "metadata.annotations", Kind::TooLong),
            (unnamed, None, "metadata.name", Kind::Required),
            (
                deleting(json!(["example.com/a", "example.com/b"])),
                Some(deleting(json!(["example.com/a"]))),
                "metadata.finalizers",
                Kind::Forbidden,
            ),
        ];
        for (new, old, path, kind) in cases {
            let verdict = judge(&new, old.as_ref(), TrainerVersion::V2_3);
            assert!(verdict.errors.iter().any(|e| e.path == path && e.kind() == kind), "{path} {kind:?}: {verdict:?}");
        }
    }

    /// The CEL rules run only when the schema check found no blocking error (too long, too many,
    /// wrong type, not supported, required); a bound, a pattern or a duplicate does not block them.
    #[test]
    fn only_blocking_errors_skip_the_rules() {
        let rule_fails = json!({"runtimeRef": {"name": "t"}, "managedBy": "kueue"});
        let with = |extra: Value| {
            let mut spec = rule_fails.clone();
            for (k, v) in extra.as_object().into_iter().flatten() {
                spec[k] = v.clone();
            }
            let verdict = judge(&job(spec), None, TrainerVersion::V2_3);
            verdict.errors.iter().any(|e| e.path == "spec.managedBy" && e.from_rule())
        };
        assert!(with(json!({})));
        assert!(with(json!({"activeDeadlineSeconds": 0})), "a bound does not block");
        assert!(with(json!({"trainer": {"env": [{"name": "A"}, {"name": "A"}]}})), "a duplicate does not block");
        assert!(!with(json!({"trainer": {"image": "x".repeat(501)}})), "too long blocks");
        assert!(!with(json!({"trainer": {"numNodes": "2"}})), "a wrong type blocks");
        assert!(!with(json!({"runtimeRef": {}})), "a required value blocks");
        for kind in [Kind::NotSupported, Kind::Required, Kind::TooLong, Kind::TooMany, Kind::TypeInvalid] {
            assert!(kind.blocking(), "{kind:?}");
        }
        for kind in [Kind::Invalid, Kind::Duplicate, Kind::Forbidden] {
            assert!(!kind.blocking(), "{kind:?}");
        }
    }

    /// A value outside an `enum` is `NotSupported` with apimachinery's list of Go-quoted values (a
    /// non-string one as its JSON), and blocks the rules. (No spec field at these tags has an enum.)
    #[test]
    fn an_enum_says_its_supported_values() {
        let crd = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "effect": {"type": "string", "enum": ["NoSchedule", "PreferNoSchedule"]},
            "n": {"type": "integer", "enum": [1, 2]},
            "ruled": {"type": "string", "x-kubernetes-validations": [{"rule": "self != 'x'"}]}
        }}}});
        let schema = parse(&crd.to_string()).expect("schema");
        let mut walk = Validate { version: "test", errors: Vec::new(), rules: Vec::new() };
        walk.node(&json!({"spec": {"effect": "Sometimes", "n": 3, "ruled": "x"}}), None, &schema, "", true);
        let found: Vec<(Kind, &str, &str)> =
            walk.errors.iter().map(|f| (f.kind, f.path.as_str(), f.detail.as_str())).collect();
        assert_eq!(
            found,
            [
                (Kind::NotSupported, "spec.effect", "supported values: \"NoSchedule\", \"PreferNoSchedule\""),
                (Kind::NotSupported, "spec.n", "supported values: \"1\", \"2\""),
            ]
        );
        assert!(walk.errors.iter().all(|f| f.kind.blocking()));
        // The walk still finds the rule's failure; judge() drops it when blocked (tested above).
        assert_eq!(walk.rules.len(), 1);
    }

    /// A rule's `reason` sets the error type; `messageExpression` the message.
    #[test]
    fn a_rules_reason_and_message_expression() {
        let crd = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "a": {"type": "string", "x-kubernetes-validations": [
            {"rule": "self != 'x'", "reason": "FieldValueForbidden", "message": "no x"},
            {"rule": "self != 'y'", "messageExpression": "'not ' + self", "message": "fallback"},
            {"rule": "self != 'z'", "messageExpression": "''", "message": "  trimmed  "},
            {"rule": "self != 'w'", "reason": "FieldValueDuplicate"}
        ]}}}}});
        let schema = parse(&crd.to_string()).expect("schema");
        let run = |a: &str| {
            let mut walk = Validate { version: "test", errors: Vec::new(), rules: Vec::new() };
            walk.node(&json!({"spec": {"a": a}}), None, &schema, "", true);
            walk.rules.into_iter().map(|f| (f.kind, f.detail)).collect::<Vec<_>>()
        };
        assert_eq!(run("x"), [(Kind::Forbidden, "no x".to_string())]);
        assert_eq!(run("y"), [(Kind::Invalid, "not y".to_string())]);
        assert_eq!(run("z"), [(Kind::Invalid, "trimmed".to_string())]);
        assert_eq!(run("w"), [(Kind::Duplicate, String::new())]);
        assert!(run("ok").is_empty());
    }
}

#[cfg(test)]
mod null_tests {
    use super::*;
    use serde_json::json;

    /// Structural pruning drops a non-nullable `null` in a map (a map of strings, of quantities, a
    /// template's labels) as it drops an object's member, so the API server stores `{}`; a `null`
    /// list item stays and is a wrong type.
    #[test]
    fn a_null_in_a_map_is_pruned_and_in_a_list_refused() {
        let v2_0 = |pod: Value| {
            let mut item = json!({"targetJobs": [{"name": "node"}]});
            for (k, v) in pod.as_object().into_iter().flatten() {
                item[k] = v.clone();
            }
            json!({"runtimeRef": {"name": "t"}, "podSpecOverrides": [item]})
        };
        let template = json!({"runtimeRef": {"name": "t"}, "podTemplateOverrides": [{"targetJobs": [{"name": "node"}], "metadata": {"labels": {"a": null, "b": "c"}}}]});
        // (release, spec, the stored value at pointer, type errors)
        let cases = [
            (
                TrainerVersion::V2_0,
                v2_0(json!({"nodeSelector": {"a": null}})),
                "/spec/podSpecOverrides/0/nodeSelector",
                json!({}),
                vec![],
            ),
            (TrainerVersion::V2_1, template, "/spec/podTemplateOverrides/0/metadata/labels", json!({"b": "c"}), vec![]),
            (
                TrainerVersion::V2_1,
                json!({"runtimeRef": {"name": "t"}, "labels": {"a": null}}),
                "/spec/labels",
                json!({}),
                vec![],
            ),
            (
                TrainerVersion::V2_3,
                json!({"runtimeRef": {"name": "t"}, "trainer": {"resourcesPerNode": {"limits": {"cpu": null, "memory": "1Gi"}}}}),
                "/spec/trainer/resourcesPerNode/limits",
                json!({"memory": "1Gi"}),
                vec![],
            ),
            (
                TrainerVersion::V2_3,
                json!({"runtimeRef": {"name": "t"}, "trainer": {"command": [null, "x"]}}),
                "/spec/trainer/command",
                json!([null, "x"]),
                vec!["spec.trainer.command[0]"],
            ),
            (
                TrainerVersion::V2_0,
                v2_0(json!({"tolerations": [null]})),
                "/spec/podSpecOverrides/0/tolerations",
                json!([null]),
                vec!["spec.podSpecOverrides[0].tolerations[0]"],
            ),
        ];
        for (version, spec, pointer, stored, type_errors) in cases {
            let object = job(spec.clone());
            let mut decoded = object.clone();
            decode(&mut decoded, schema(version), &mut Vec::new(), &mut Vec::new());
            assert_eq!(decoded.pointer(pointer), Some(&stored), "{} {spec}", version.name());
            let verdict = judge(&object, None, version);
            let found: Vec<(&str, Kind)> = verdict.errors.iter().map(|e| (e.path.as_str(), e.kind())).collect();
            let want: Vec<(&str, Kind)> = type_errors.iter().map(|p| (*p, Kind::TypeInvalid)).collect();
            assert_eq!(found, want, "{} {spec}", version.name());
        }
    }
}

#[cfg(test)]
mod format_range_tests {
    use super::*;
    use serde_json::json;

    /// A finding as (path, cause type, detail).
    type Said = (String, &'static str, String);

    fn found(verdict: &Verdict) -> Vec<Said> {
        verdict.errors.iter().map(|e| (e.path.clone(), e.kind().cause_type(), e.detail.clone())).collect()
    }

    fn checked(format: &str, path: &str) -> Said {
        (
            String::new(),
            "FieldValueInvalid",
            format!("Checked value must be of type integer with format {format} in {path}"),
        )
    }

    fn typed(path: &str) -> Said {
        (path.to_string(), "FieldValueTypeInvalid", String::new())
    }

    /// Kubernetes 1.36 (kube-openapi's `IsValueValidAgainstRange`) refuses a number its integer
    /// format cannot hold, with a cause that has no field; a float64 (a literal past int64
    /// decodes as one) that is not a JSON integer (past 2^53) is a wrong type too, and its bounds
    /// are still checked. The limits themselves pass.
    #[test]
    fn an_integer_past_its_formats_range_is_refused() {
        let nodes = |n: Value| json!({"runtimeRef": {"name": "t"}, "trainer": {"numNodes": n}});
        let deadline = |n: Value| json!({"runtimeRef": {"name": "t"}, "activeDeadlineSeconds": n});
        let past_i64: Value = serde_json::from_str("-9223372036854775809").expect("a number");
        let grace = "spec.podSpecOverrides[0].tolerations[0].tolerationSeconds";
        let mode = "spec.podSpecOverrides[0].volumes[0].configMap.defaultMode";
        let overrides = |pod: Value| {
            let mut item = json!({"targetJobs": [{"name": "node"}]});
            for (k, v) in pod.as_object().into_iter().flatten() {
                item[k] = v.clone();
            }
            json!({"runtimeRef": {"name": "t"}, "podSpecOverrides": [item]})
        };
        let min =
            |path: &str| (path.to_string(), "FieldValueInvalid", "must be greater than or equal to 1".to_string());
        // An int-or-string's number is checked by its integer branch, which has no format.
        let cpu = "spec.trainer.resourcesPerNode.limits.cpu";
        let quantity =
            |n: Value| json!({"runtimeRef": {"name": "t"}, "trainer": {"resourcesPerNode": {"limits": {"cpu": n}}}});
        let any_integer = (
            String::new(),
            "FieldValueInvalid",
            format!("Checked value must be of type integer (default format) in {cpu}"),
        );
        let numbers = "spec.trainer.numNodes";
        let deadlines = "spec.activeDeadlineSeconds";
        // (release, spec, findings: path, cause type, detail — a type error's detail not compared)
        let cases: Vec<(TrainerVersion, Value, Vec<Said>)> = vec![
            (TrainerVersion::V2_3, nodes(json!(2_147_483_647)), vec![]),
            (TrainerVersion::V2_3, nodes(json!(-2_147_483_648)), vec![]),
            (TrainerVersion::V2_3, nodes(json!(2_147_483_648_i64)), vec![checked("int32", numbers)]),
            (TrainerVersion::V2_3, nodes(json!(-2_147_483_649_i64)), vec![checked("int32", numbers)]),
            (TrainerVersion::V2_0, nodes(json!(2_147_483_648_i64)), vec![checked("int32", numbers)]),
            (TrainerVersion::V2_3, nodes(json!(2.0)), vec![]),
            (TrainerVersion::V2_3, nodes(json!(3e9)), vec![checked("int32", numbers)]),
            (TrainerVersion::V2_3, nodes(json!(1.5)), vec![typed(numbers), checked("int32", numbers)]),
            (TrainerVersion::V2_3, deadline(json!(i64::MAX)), vec![]),
            (TrainerVersion::V2_3, deadline(json!(i64::MIN)), vec![min(deadlines)]),
            (
                TrainerVersion::V2_3,
                deadline(json!(9_223_372_036_854_775_808_u64)),
                vec![typed(deadlines), checked("int64", deadlines)],
            ),
            (
                TrainerVersion::V2_3,
                deadline(past_i64),
                vec![typed(deadlines), checked("int64", deadlines), min(deadlines)],
            ),
            (
                TrainerVersion::V2_3,
                deadline(json!(0.5)),
                vec![typed(deadlines), checked("int64", deadlines), min(deadlines)],
            ),
            (TrainerVersion::V2_3, quantity(json!(i64::MAX)), vec![]),
            (TrainerVersion::V2_3, quantity(json!(2.0)), vec![]),
            (TrainerVersion::V2_3, quantity(json!(0.5)), vec![typed(cpu), any_integer.clone()]),
            (TrainerVersion::V2_3, quantity(json!(9_223_372_036_854_775_808_u64)), vec![typed(cpu), any_integer]),
            (
                TrainerVersion::V2_0,
                overrides(json!({"tolerations": [{"key": "k", "tolerationSeconds": 9_223_372_036_854_775_807_i64}]})),
                vec![],
            ),
            (
                TrainerVersion::V2_0,
                overrides(json!({"tolerations": [{"key": "k", "tolerationSeconds": 9_223_372_036_854_775_808_u64}]})),
                vec![typed(grace), checked("int64", grace)],
            ),
            (
                TrainerVersion::V2_0,
                overrides(json!({"volumes": [{"name": "v", "configMap": {"defaultMode": 2_147_483_648_i64}}]})),
                vec![checked("int32", mode)],
            ),
        ];
        for (version, spec, want) in cases {
            let verdict = judge(&job(spec.clone()), None, version);
            let mut got = found(&verdict);
            // A wrong type's detail is trainguard's own words (not compared with the API server's).
            for (_, cause, detail) in &mut got {
                if *cause == "FieldValueTypeInvalid" {
                    detail.clear();
                }
            }
            assert_eq!(got, want, "{} {spec}", version.name());
            // The range finding names its field for `validate`'s output.
            for finding in verdict.errors.iter().filter(|e| e.path.is_empty()) {
                assert!(finding.detail.ends_with(finding.range_of().expect("a range finding")), "{finding:?}");
            }
        }
    }

    /// The range cause is not blocking (the CEL rules still run) and ratchets like any other: an
    /// unchanged value is not judged again on UPDATE.
    #[test]
    fn a_range_finding_lets_the_rules_run_and_ratchets() {
        let spec =
            json!({"runtimeRef": {"name": "t"}, "managedBy": "kueue", "trainer": {"numNodes": 2_147_483_648_i64}});
        let create = judge(&job(spec.clone()), None, TrainerVersion::V2_3);
        let kinds: Vec<(&str, bool)> = create.errors.iter().map(|e| (e.path.as_str(), e.from_rule())).collect();
        assert_eq!(kinds, [("", false), ("spec.managedBy", true)], "{create:?}");
        let mut suspended = spec.clone();
        suspended["managedBy"] = json!("kueue.x-k8s.io/multikueue");
        let old = job(suspended.clone());
        let mut new = old.clone();
        new["spec"]["suspend"] = json!(true);
        let cases = [(json!(2_147_483_648_i64), 0), (json!(2_147_483_649_i64), 1)];
        for (nodes, findings) in cases {
            new["spec"]["trainer"]["numNodes"] = nodes.clone();
            let verdict = judge(&new, Some(&old), TrainerVersion::V2_1);
            assert_eq!(verdict.errors.len(), findings, "{nodes}: {verdict:?}");
        }
    }

    #[test]
    fn json_integers_as_go_openapi_takes_them() {
        let cases = [
            (2.0, true),
            (-2.0, true),
            (0.0, true),
            (1.5, false),
            (-1.5, false),
            (0.5, false),
            // Within a relative 1e-9 of a whole number.
            (2.000_000_000_1, true),
            (9_007_199_254_740_992.0, true),
            (9_007_199_254_740_994.0, false),
            (-9_007_199_254_740_994.0, false),
            (f64::NAN, false),
        ];
        for (f, want) in cases {
            assert_eq!(json_integer(f), want, "{f}");
        }
    }
}
