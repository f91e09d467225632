//! The API server's checks of a custom resource's `metadata`, which run beside the CRD's schema
//! (apimachinery's `ValidateObjectMetaAccessor` on CREATE, `ValidateObjectMetaAccessorUpdate` on
//! UPDATE, as apiextensions-apiserver calls them), with apimachinery's wording:
//!
//! - CREATE: `name` (or `generateName`) a lowercase RFC 1123 subdomain, `namespace` an RFC 1123
//!   label, `finalizers` qualified names (not both orphan and foreground);
//! - both: label keys and values, annotation keys and their total size (256 KiB), owner
//!   references (version, kind, name and uid set; one controller at most), managed fields
//!   (manager, subresource) as the field manager leaves them: it replaces a list it cannot decode
//!   before this check runs;
//! - UPDATE: `name`, `namespace`, `uid`, `creationTimestamp`, `deletionTimestamp` and
//!   `deletionGracePeriodSeconds` unchanged where the write sets them (the API server carries the
//!   stored ones over where it leaves them out, and sets `generation` itself), and no new
//!   finalizer once the object is being deleted.
//!
//! The field paths are apimachinery's: a label's error names `metadata.labels`, not the key.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::api_cause::{ApiCause, Kind};

const DNS1123_LABEL: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const LABEL_KEY: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const LABEL_KEY_MSG: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

const TOTAL_ANNOTATION_SIZE: usize = 256 * 1024;
const FIELD_MANAGER_MAX: usize = 128;
const SUBRESOURCE_MAX: usize = 256;
const ORPHAN: &str = "orphan";
const FOREGROUND: &str = "foregroundDeletion";

fn anchored(pattern: &str) -> Regex {
    #[allow(clippy::expect_used, reason = "constant patterns, exercised by the tests below")]
    Regex::new(&format!("^{pattern}$")).expect("a valid constant pattern")
}

static DNS1123_LABEL_RE: LazyLock<Regex> = LazyLock::new(|| anchored(DNS1123_LABEL));
static DNS1123_SUBDOMAIN_RE: LazyLock<Regex> = LazyLock::new(|| anchored(DNS1123_SUBDOMAIN));
static LABEL_KEY_RE: LazyLock<Regex> = LazyLock::new(|| anchored(LABEL_KEY));
static LABEL_VALUE_RE: LazyLock<Regex> = LazyLock::new(|| anchored(LABEL_VALUE));

/// apimachinery's `RegexError`.
fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    // Each example ends in ", " and the next begins with " or ": two spaces, as apimachinery writes it.
    format!("{msg} (e.g. {}regex used for validation is '{re}')", examples.join(" or "))
}

/// The length check, the first of each format: an error when `value` is over `max` bytes.
fn too_long(value: &str, max: usize) -> Vec<String> {
    if value.len() > max { vec![max_len_error(max)] } else { Vec::new() }
}

fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} bytes")
}

fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errors = too_long(value, 253);
    if !DNS1123_SUBDOMAIN_RE.is_match(value) {
        errors.push(regex_error(DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN, &["example.com"]));
    }
    errors
}

fn dns1123_label(value: &str) -> Vec<String> {
    let mut errors = too_long(value, 63);
    if !DNS1123_LABEL_RE.is_match(value) {
        errors.push(if DNS1123_SUBDOMAIN_RE.is_match(value) {
            "must not contain dots".to_string()
        } else {
            regex_error(DNS1123_LABEL_MSG, DNS1123_LABEL, &["my-name", "123-abc"])
        });
    }
    errors
}

/// A generated name's prefix is checked with its trailing dash masked (`maskTrailingDash`).
fn mask_trailing_dash(name: &str) -> String {
    match name.strip_suffix('-') {
        Some(_) if name.len() > 1 => format!("{}a", &name[..name.len() - 2]),
        _ => name.to_string(),
    }
}

/// apimachinery's `IsQualifiedName` (a label key).
fn qualified_name(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_string());
            } else {
                errors.extend(dns1123_subdomain(prefix).into_iter().map(|m| format!("prefix part {m}")));
            }
            *name
        }
        _ => {
            return vec![format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_MSG, LABEL_KEY, &["MyName", "my.name", "123-abc"])
            )];
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errors.push(format!("name part {}", max_len_error(63)));
    }
    if !LABEL_KEY_RE.is_match(name) {
        errors.push(format!("name part {}", regex_error(LABEL_KEY_MSG, LABEL_KEY, &["MyName", "my.name", "123-abc"])));
    }
    errors
}

fn label_value(value: &str) -> Vec<String> {
    let mut errors = too_long(value, 63);
    if !LABEL_VALUE_RE.is_match(value) {
        errors.push(regex_error(LABEL_VALUE_MSG, LABEL_VALUE, &["MyValue", "my_value", "12345"]));
    }
    errors
}

/// Collects findings at `metadata.*` paths.
struct Check<'a> {
    errors: &'a mut Vec<ApiCause>,
}

impl Check<'_> {
    fn push(&mut self, kind: Kind, path: &str, value: Option<Value>, detail: impl Into<String>) {
        let path = format!("metadata.{path}");
        self.errors.push(ApiCause { kind, path, value, detail: detail.into(), rule: false, range_of: None });
    }

    fn invalid_each(&mut self, path: &str, value: &str, messages: Vec<String>) {
        for message in messages {
            self.push(Kind::Invalid, path, Some(Value::String(value.to_string())), message);
        }
    }

    fn labels(&mut self, meta: &Meta<'_>) {
        for (key, value) in meta.strings("labels") {
            self.invalid_each("labels", key, qualified_name(key));
            self.invalid_each("labels", value, label_value(value));
        }
    }

    fn annotations(&mut self, meta: &Meta<'_>) {
        let mut size = 0;
        for (key, value) in meta.strings("annotations") {
            self.invalid_each("annotations", key, qualified_name(&key.to_lowercase()));
            size += key.len() + value.len();
        }
        if size > TOTAL_ANNOTATION_SIZE {
            self.push(
                Kind::TooLong,
                "annotations",
                None,
                format!("may not be more than {TOTAL_ANNOTATION_SIZE} bytes"),
            );
        }
    }

    fn owner_references(&mut self, meta: &Meta<'_>) {
        let mut first_controller: Option<String> = None;
        for reference in meta.list("ownerReferences") {
            let text = |key: &str| reference.get(key).and_then(Value::as_str).unwrap_or("");
            let (api_version, kind) = (text("apiVersion"), text("kind"));
            // schema.FromAPIVersionAndKind: `group/version` or `version`; anything else has none.
            let (group, version) = match api_version.split('/').collect::<Vec<_>>().as_slice() {
                [version] => ("", *version),
                [group, version] => (*group, *version),
                _ => ("", ""),
            };
            let empty = Value::String(String::new());
            for (key, missing, detail) in [
                ("apiVersion", version.is_empty(), "version must not be empty"),
                ("kind", kind.is_empty(), "must not be empty"),
                ("name", text("name").is_empty(), "must not be empty"),
                ("uid", text("uid").is_empty(), "must not be empty"),
            ] {
                if missing {
                    let value = reference.get(key).cloned().unwrap_or_else(|| empty.clone());
                    self.push(Kind::Invalid, &format!("ownerReferences.{key}"), Some(value), detail);
                }
            }
            if group.is_empty() && version == "v1" && kind == "Event" {
                self.push(
                    Kind::Invalid,
                    "ownerReferences",
                    Some(reference.clone()),
                    "/v1, Kind=Event is disallowed from being an owner",
                );
            }
            if reference.get("controller").and_then(Value::as_bool) == Some(true) {
                let this = format!("{kind}/{}", text("name"));
                match &first_controller {
                    Some(first) => self.push(
                        Kind::Invalid,
                        "ownerReferences",
                        meta.get("ownerReferences").cloned(),
                        format!(
                            "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}"
                        ),
                    ),
                    None => first_controller = Some(this),
                }
            }
        }
    }

    fn finalizers(&mut self, meta: &Meta<'_>) {
        let finalizers: Vec<&str> = meta.list("finalizers").filter_map(Value::as_str).collect();
        for finalizer in &finalizers {
            self.invalid_each("finalizers", finalizer, qualified_name(finalizer));
        }
        if finalizers.contains(&ORPHAN) && finalizers.contains(&FOREGROUND) {
            self.push(
                Kind::Invalid,
                "finalizers",
                meta.get("finalizers").cloned(),
                format!("finalizer {ORPHAN} and {FOREGROUND} cannot be both set"),
            );
        }
    }

    /// The checks of each managed-fields entry the field manager leaves (see [`managed_fields`]):
    /// a decodable entry's `operation` and `fieldsType` are already right.
    fn managed_fields(&mut self, entries: &[Value]) {
        for (i, entry) in entries.iter().enumerate() {
            let text = |key: &str| entry.get(key).and_then(Value::as_str).unwrap_or("");
            let at = |key: &str| format!("managedFields[{i}].{key}");
            let manager = text("manager");
            if manager.len() > FIELD_MANAGER_MAX {
                self.push(
                    Kind::TooLong,
                    &at("manager"),
                    None,
                    format!("may not be more than {FIELD_MANAGER_MAX} bytes"),
                );
            }
            for (position, c) in manager.char_indices().filter(|(_, c)| c.is_control()) {
                self.push(
                    Kind::Invalid,
                    &at("manager"),
                    Some(manager.into()),
                    format!("invalid character U+{:04X} (at position {position})", u32::from(c)),
                );
            }
            if text("subresource").len() > SUBRESOURCE_MAX {
                self.push(
                    Kind::TooLong,
                    &at("subresource"),
                    None,
                    format!("may not be more than {SUBRESOURCE_MAX} bytes"),
                );
            }
        }
    }

    /// What CREATE and UPDATE both check.
    fn common(&mut self, meta: &Meta<'_>, managed: &[Value]) {
        self.labels(meta);
        self.annotations(meta);
        self.owner_references(meta);
        self.managed_fields(managed);
    }
}

/// An object's `metadata`, read leniently: a value of the wrong type is the schema's to report.
struct Meta<'v>(Option<&'v serde_json::Map<String, Value>>);

impl<'v> Meta<'v> {
    fn of(object: &'v Value) -> Self {
        Meta(object.get("metadata").and_then(Value::as_object))
    }

    fn get(&self, key: &str) -> Option<&'v Value> {
        self.0.and_then(|m| m.get(key)).filter(|v| !v.is_null())
    }

    fn text(&self, key: &str) -> &'v str {
        self.get(key).and_then(Value::as_str).unwrap_or("")
    }

    fn strings(&self, key: &str) -> impl Iterator<Item = (&'v String, &'v str)> {
        self.get(key).and_then(Value::as_object).into_iter().flatten().filter_map(|(k, v)| Some((k, v.as_str()?)))
    }

    fn list(&self, key: &str) -> impl Iterator<Item = &'v Value> {
        self.get(key).and_then(Value::as_array).into_iter().flatten()
    }
}

/// The managed fields ObjectMeta's check sees. The API server's field manager runs before it
/// (`decodeLiveOrNew`): a write that resets them (`[]` or `[{}]`) leaves none; a write that
/// leaves them out, or sends a list the field manager cannot decode, gets the stored object's
/// (none on CREATE). So an undecodable entry is never refused: it is replaced.
fn managed_fields<'v>(meta: &Meta<'v>, before: Option<&Meta<'v>>) -> &'v [Value] {
    let list = |m: &Meta<'v>| m.get("managedFields").and_then(Value::as_array).map(Vec::as_slice);
    let stored = || before.and_then(list).filter(|l| l.iter().all(decodable)).unwrap_or_default();
    match list(meta) {
        Some([]) => &[],
        Some([only]) if only.as_object().is_some_and(serde_json::Map::is_empty) => &[],
        Some(entries) if entries.iter().all(decodable) => entries,
        _ => stored(),
    }
}

/// Whether the field manager decodes an entry (`DecodeManagedFields`): an `Apply` or `Update`
/// with an apiVersion, `fieldsType: FieldsV1`, and a field set it can read.
fn decodable(entry: &Value) -> bool {
    let text = |key: &str| entry.get(key).and_then(Value::as_str).unwrap_or("");
    matches!(text("operation"), "Apply" | "Update")
        && !text("apiVersion").is_empty()
        && text("fieldsType") == "FieldsV1"
        && entry.get("fieldsV1").is_none_or(field_set)
}

/// structured-merge-diff's `Set.FromJSON`: nested objects (or `null`) whose keys are `.` (the
/// path itself) or `f:` a field name, `k:` a key object, `v:` a value, `i:` an index; another
/// letter before the colon is a newer kind, skipped.
fn field_set(set: &Value) -> bool {
    let Value::Object(children) = set else { return set.is_null() };
    children.iter().all(|(key, child)| {
        if key == "." {
            return true;
        }
        let element_ok = match key.as_bytes() {
            [b'f', b':', ..] => true,
            [b'k', b':', ..] => serde_json::from_str::<Value>(&key[2..]).is_ok_and(|v| v.is_object()),
            [b'v', b':', ..] => serde_json::from_str::<Value>(&key[2..]).is_ok(),
            [b'i', b':', ..] => key[2..].parse::<i64>().is_ok(),
            [_, b':', ..] => return true,
            _ => false,
        };
        element_ok && field_set(child)
    })
}

/// What ObjectMeta's checks find, split by where the API server runs them: on UPDATE,
/// `rest.BeforeUpdate` checks the CREATE rules (with a path-segment name rule) before the
/// strategy, so those findings do not keep the CRD's CEL rules from running; everything else is
/// part of the strategy's own list.
#[derive(Debug, Default)]
pub(crate) struct MetaFindings {
    pub(crate) before_strategy: Vec<ApiCause>,
    pub(crate) in_strategy: Vec<ApiCause>,
}

/// The findings on `new`'s metadata, as a CREATE (`old` is `None`) or an UPDATE of `old`. The
/// namespace defaults as kubectl's does: a manifest without one is created in the current one.
pub(crate) fn validate(new: &Value, old: Option<&Value>) -> MetaFindings {
    let meta = Meta::of(new);
    let mut found = MetaFindings::default();
    match old {
        None => {
            let mut check = Check { errors: &mut found.in_strategy };
            // The CRD strategy's check (a DNS subdomain name); the API server's second,
            // path-segment check runs only when this one passed, and never finds more.
            check.identity(&meta, NameRule::DnsSubdomain, managed_fields(&meta, None));
        }
        Some(old) => {
            let before = Meta::of(old);
            let managed = managed_fields(&meta, Some(&before));
            let mut check = Check { errors: &mut found.before_strategy };
            check.identity(&meta, NameRule::PathSegment, managed);
            check.update(&meta, &before, managed);
            let mut check = Check { errors: &mut found.in_strategy };
            check.update(&meta, &before, managed);
        }
    }
    found
}

/// How `metadata.name` and `generateName` are checked.
#[derive(Clone, Copy)]
enum NameRule {
    /// The CRD strategy's `NameIsDNSSubdomain`.
    DnsSubdomain,
    /// `rest`'s own path-segment check, on UPDATE.
    PathSegment,
}

impl NameRule {
    fn check(self, name: &str, prefix: bool) -> Vec<String> {
        match self {
            NameRule::DnsSubdomain if prefix => dns1123_subdomain(&mask_trailing_dash(name)),
            NameRule::DnsSubdomain => dns1123_subdomain(name),
            NameRule::PathSegment => {
                if !prefix && let Some(bad) = [".", ".."].into_iter().find(|b| name == *b) {
                    return vec![format!("may not be '{bad}'")];
                }
                ["/", "%"].iter().filter(|c| name.contains(**c)).map(|c| format!("may not contain '{c}'")).collect()
            }
        }
    }
}

impl Check<'_> {
    /// `ValidateObjectMetaAccessor`: name, generateName, namespace, then the common checks and
    /// the finalizers.
    fn identity(&mut self, meta: &Meta<'_>, rule: NameRule, managed: &[Value]) {
        let generate_name = meta.text("generateName");
        if !generate_name.is_empty() {
            self.invalid_each("generateName", generate_name, rule.check(generate_name, true));
        }
        let name = meta.text("name");
        if name.is_empty() {
            self.push(Kind::Required, "name", None, "name or generateName is required");
        } else {
            self.invalid_each("name", name, rule.check(name, false));
        }
        let namespace = meta.text("namespace");
        if !namespace.is_empty() {
            self.invalid_each("namespace", namespace, dns1123_label(namespace));
        }
        // `generation` is set by the API server (1 on CREATE, the stored one on UPDATE).
        self.common(meta, managed);
        self.finalizers(meta);
    }

    /// `ValidateObjectMetaAccessorUpdate`.
    fn update(&mut self, meta: &Meta<'_>, before: &Meta<'_>, managed: &[Value]) {
        if before.get("deletionTimestamp").is_some() {
            let had: Vec<&str> = before.list("finalizers").filter_map(Value::as_str).collect();
            let mut added: Vec<&str> =
                meta.list("finalizers").filter_map(Value::as_str).filter(|f| !had.contains(f)).collect();
            added.sort_unstable();
            added.dedup();
            if !added.is_empty() {
                let quoted: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
                self.push(
                    Kind::Forbidden,
                    "finalizers",
                    None,
                    format!(
                        "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                        quoted.join(", ")
                    ),
                );
            }
        }
        // rest.BeforeUpdate carries these over from the stored object when the write leaves them
        // out, so only a different value is refused.
        for key in ["name", "namespace", "uid"] {
            let (now, then) = (meta.text(key), before.text(key));
            let carried = key == "uid" && now.is_empty();
            if now != then && !carried {
                self.push(Kind::Invalid, key, Some(now.into()), "field is immutable");
            }
        }
        for key in ["creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"] {
            let (now, then) = (meta.get(key), before.get(key));
            let changed = match key {
                // Replaced by the stored timestamp when there is one.
                "creationTimestamp" | "deletionTimestamp" => then.is_none() && now.is_some(),
                // Carried over only when the write leaves it out.
                _ => now.is_some() && now != then,
            };
            if changed {
                self.push(Kind::Invalid, key, now.cloned(), "field is immutable");
            }
        }
        self.common(meta, managed);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Every finding once, in the API server's order.
    fn findings(new: Value, old: Option<Value>) -> Vec<(String, String)> {
        let found = validate(&new, old.as_ref());
        let mut all: Vec<(String, String)> = Vec::new();
        for f in found.before_strategy.into_iter().chain(found.in_strategy) {
            if !all.contains(&(f.path.clone(), f.detail.clone())) {
                all.push((f.path, f.detail));
            }
        }
        all
    }

    fn object(metadata: Value) -> Value {
        json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": metadata})
    }

    #[test]
    fn create_checks_as_apimachinery_does() {
        let subdomain = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
        // (metadata, expected (path, detail start))
        let cases: Vec<(Value, Vec<(&str, &str)>)> = vec![
            (json!({"name": "job", "namespace": "ns"}), vec![]),
            (json!({"name": "a.b-c"}), vec![]),
            (json!({"name": "Job_1"}), vec![("metadata.name", subdomain)]),
            (json!({"name": "x".repeat(254)}), vec![("metadata.name", "must be no more than 253 bytes")]),
            (json!({}), vec![("metadata.name", "name or generateName is required")]),
            (json!({"generateName": "job-", "name": "job-abcde"}), vec![]),
            (
                json!({"generateName": "Job-", "name": "job"}),
                vec![("metadata.generateName", "a lowercase RFC 1123 subdomain")],
            ),
            (json!({"name": "j", "namespace": "a.b"}), vec![("metadata.namespace", "must not contain dots")]),
            (json!({"name": "j", "namespace": "A"}), vec![("metadata.namespace", "a lowercase RFC 1123 label")]),
            (
                json!({"name": "j", "labels": {"app": "x", "example.com/tier": "", "a/b/c": "v"}}),
                vec![("metadata.labels", "a valid label key")],
            ),
            (json!({"name": "j", "labels": {"-a": "b"}}), vec![("metadata.labels", "name part must consist of")]),
            (json!({"name": "j", "labels": {"/a": "b"}}), vec![("metadata.labels", "prefix part must be non-empty")]),
            (
                json!({"name": "j", "labels": {"Ex.com/a": "b"}}),
                vec![("metadata.labels", "prefix part a lowercase RFC 1123 subdomain")],
            ),
            (
                json!({"name": "j", "labels": {"a": "has space"}}),
                vec![("metadata.labels", "a valid label must be an empty string")],
            ),
            (
                json!({"name": "j", "labels": {"a": "v".repeat(64)}}),
                vec![("metadata.labels", "must be no more than 63 bytes")],
            ),
            // Annotation keys are checked lowercased; values are free.
            (json!({"name": "j", "annotations": {"Example.COM/Note": "any text at all"}}), vec![]),
            (
                json!({"name": "j", "annotations": {"a b": "x"}}),
                vec![("metadata.annotations", "name part must consist of")],
            ),
            (
                json!({"name": "j", "annotations": {"big": "x".repeat(256 * 1024)}}),
                vec![("metadata.annotations", "may not be more than 262144 bytes")],
            ),
            (
                json!({"name": "j", "finalizers": ["example.com/cleanup", "bad finalizer"]}),
                vec![("metadata.finalizers", "name part must consist of")],
            ),
            (
                json!({"name": "j", "finalizers": ["orphan", "foregroundDeletion"]}),
                vec![("metadata.finalizers", "finalizer orphan and foregroundDeletion cannot be both set")],
            ),
            // The API server sets `generation` itself.
            (json!({"name": "j", "generation": -1}), vec![]),
            (
                json!({"name": "j", "ownerReferences": [{"apiVersion": "example.com/", "kind": "", "name": "o", "uid": "u"}]}),
                vec![
                    ("metadata.ownerReferences.apiVersion", "version must not be empty"),
                    ("metadata.ownerReferences.kind", "must not be empty"),
                ],
            ),
            (
                json!({"name": "j", "ownerReferences": [{"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "u"}]}),
                vec![("metadata.ownerReferences", "/v1, Kind=Event is disallowed from being an owner")],
            ),
            (
                json!({"name": "j", "ownerReferences": [
                    {"apiVersion": "v1", "kind": "A", "name": "a", "uid": "1", "controller": true},
                    {"apiVersion": "v1", "kind": "B", "name": "b", "uid": "2", "controller": true}]}),
                vec![(
                    "metadata.ownerReferences",
                    "Only one reference can have Controller set to true. Found \"true\" in references for A/a and B/b",
                )],
            ),
            // The field manager replaces managed fields it cannot decode before this check.
            (
                json!({"name": "j", "managedFields": [{"manager": "m", "operation": "Patch", "fieldsType": "FieldsV2"}]}),
                vec![],
            ),
            (json!({"name": "j", "managedFields": [{"manager": LONG_MANAGER, "operation": "Update"}]}), vec![]),
            (
                json!({"name": "j", "managedFields": [{"manager": LONG_MANAGER, "operation": "Update", "apiVersion": "v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"x:future": 1}}}]}),
                vec![("metadata.managedFields[0].manager", "may not be more than 128 bytes")],
            ),
            (
                json!({"name": "j", "managedFields": [{"manager": LONG_MANAGER, "operation": "Update", "apiVersion": "v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {"spec": {}}}]}),
                vec![],
            ),
        ];
        for (metadata, expected) in cases {
            let found = findings(object(metadata.clone()), None);
            let matches = found.len() == expected.len()
                && found.iter().zip(&expected).all(|((p, d), (ep, ed))| p == ep && d.starts_with(ed));
            assert!(matches, "{metadata}: {found:?}, expected {expected:?}");
        }
    }

    /// One byte past the field manager name's limit.
    const LONG_MANAGER: &str = "mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm";

    #[test]
    fn managed_fields_are_checked_as_the_field_manager_leaves_them() {
        let entry = |manager: &str, operation: &str| json!({"manager": manager, "operation": operation, "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {".": {}}}});
        let stored = json!({"name": "j", "managedFields": [entry(LONG_MANAGER, "Update")]});
        let too_long = vec!["metadata.managedFields[0].manager".to_string()];
        // (new metadata, old metadata, paths found)
        let cases: Vec<(Value, Option<Value>, Vec<String>)> = vec![
            (json!({"name": "j", "managedFields": [entry(LONG_MANAGER, "Apply")]}), None, too_long.clone()),
            (json!({"name": "j", "managedFields": [entry("m", "Patch")]}), None, vec![]),
            // Undecodable or left out on UPDATE: the stored object's are checked.
            (json!({"name": "j", "managedFields": [entry("m", "Patch")]}), Some(stored.clone()), too_long.clone()),
            (json!({"name": "j"}), Some(stored.clone()), too_long.clone()),
            // Reset: none.
            (json!({"name": "j", "managedFields": []}), Some(stored.clone()), vec![]),
            (json!({"name": "j", "managedFields": [{}]}), Some(stored.clone()), vec![]),
            (json!({"name": "j", "managedFields": [entry("m", "Update")]}), Some(stored), vec![]),
        ];
        for (new, old, expected) in cases {
            let found: Vec<String> =
                findings(object(new.clone()), old.map(object)).into_iter().map(|(p, _)| p).collect();
            assert_eq!(found, expected, "{new}");
        }
    }

    #[test]
    fn update_checks_immutables_and_the_name_as_a_path_segment() {
        let old = json!({"name": "Job_1", "namespace": "ns", "uid": "u1", "generation": 3, "finalizers": ["a.io/x"]});
        let deleting = json!({"name": "j", "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["a.io/x"]});
        // (old metadata, new metadata, expected paths)
        let cases: Vec<(Value, Value, Vec<&str>)> = vec![
            // A name the CREATE check would refuse is not checked again.
            (old.clone(), old.clone(), vec![]),
            (
                old.clone(),
                json!({"name": "other", "namespace": "ns", "uid": "u1", "generation": 3}),
                vec!["metadata.name"],
            ),
            (
                old.clone(),
                json!({"name": "Job_1", "namespace": "ns2", "uid": "u2", "generation": 3}),
                vec!["metadata.namespace", "metadata.uid"],
            ),
            // `generation` is the stored one whatever the write says; a left-out uid is carried over.
            (old.clone(), json!({"name": "Job_1", "namespace": "ns", "generation": 2}), vec![]),
            (
                old.clone(),
                json!({"name": "Job_1", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"}),
                vec!["metadata.creationTimestamp"],
            ),
            (
                old.clone(),
                json!({"name": "Job_1", "namespace": "ns", "uid": "u1", "generation": 3, "labels": {"a": "b c"}}),
                vec!["metadata.labels"],
            ),
            // The name is checked as a path segment only; finalizer names as on CREATE, and new
            // ones are refused once the object is being deleted.
            (json!({"name": "a%b"}), json!({"name": "a%b"}), vec!["metadata.name"]),
            (
                old.clone(),
                json!({"name": "Job_1", "namespace": "ns", "uid": "u1", "generation": 3, "finalizers": ["bad one"]}),
                vec!["metadata.finalizers"],
            ),
            (
                deleting.clone(),
                json!({"name": "j", "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["a.io/x", "b.io/y"]}),
                vec!["metadata.finalizers"],
            ),
            (deleting.clone(), json!({"name": "j", "deletionTimestamp": "2026-01-01T00:00:00Z"}), vec![]),
        ];
        for (before, after, expected) in cases {
            let found: Vec<String> =
                findings(object(after.clone()), Some(object(before.clone()))).into_iter().map(|(p, _)| p).collect();
            assert_eq!(found, expected, "{before} -> {after}");
        }
    }

    #[test]
    fn a_generated_name_prefix_is_checked_with_its_dash_masked() {
        // apimachinery replaces the last two characters with "a" when the prefix ends in '-'.
        let cases = [("job-", "joa"), ("a-", "a"), ("-", "-"), ("job", "job")];
        for (prefix, masked) in cases {
            assert_eq!(mask_trailing_dash(prefix), masked, "{prefix}");
        }
    }
}
