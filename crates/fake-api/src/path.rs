//! API paths: what a request names (collection, namespace, object, subresource) and what RBAC
//! calls it.

use serde_json::Value;

/// A parsed API path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiPath {
    /// The API group (`""` for the core group).
    pub group: String,
    /// `/api/v1` or `/apis/<group>/<version>`.
    pub prefix: String,
    pub namespace: Option<String>,
    /// The plural resource.
    pub resource: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

impl ApiPath {
    pub fn parse(path: &str) -> Self {
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let (group, prefix, rest) = match parts.as_slice() {
            ["api", version, rest @ ..] => (String::new(), format!("/api/{version}"), rest),
            ["apis", group, version, rest @ ..] => (group.to_string(), format!("/apis/{group}/{version}"), rest),
            _ => ("?".to_string(), String::new(), &parts[..0]),
        };
        let (namespace, rest) = match rest {
            ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
            other => (None, other),
        };
        let (resource, name, subresource) = match rest {
            [resource] => (resource.to_string(), None, None),
            [resource, name] => (resource.to_string(), Some(name.to_string()), None),
            [resource, name, sub] => (resource.to_string(), Some(name.to_string()), Some(sub.to_string())),
            _ => ("?".to_string(), None, None),
        };
        ApiPath { group, prefix, namespace, resource, name, subresource }
    }

    /// The cluster-wide collection: where a list of this resource goes (the store's key).
    pub fn collection(&self) -> String {
        format!("{}/{}", self.prefix, self.resource)
    }
}

/// (group, resource[/subresource], verb) of a request, as RBAC sees it.
pub fn rbac_of(method: &str, path: &str, query: &str) -> (String, String, String) {
    let parsed = ApiPath::parse(path);
    let watch = query.split('&').any(|kv| kv == "watch=true" || kv == "watch=1");
    let verb = match (method, parsed.name.is_some()) {
        ("GET", true) => "get",
        ("GET", false) if watch => "watch",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "?",
    };
    let resource = match parsed.subresource {
        Some(sub) => format!("{}/{sub}", parsed.resource),
        None => parsed.resource,
    };
    (parsed.group, resource, verb.to_string())
}

/// The collection path of an object, from its apiVersion and kind (the plural is the kind in
/// lower case plus `s`, as for every kind trainguard reads).
pub fn collection_of(object: &Value) -> String {
    let api_version = object["apiVersion"].as_str().unwrap_or("");
    let plural = format!("{}s", object["kind"].as_str().unwrap_or("").to_ascii_lowercase());
    if api_version == "v1" { format!("/api/v1/{plural}") } else { format!("/apis/{api_version}/{plural}") }
}

/// A query parameter, percent-decoded as far as API clients encode selectors.
pub(crate) fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| {
            v.replace("%2F", "/")
                .replace("%2f", "/")
                .replace("%3D", "=")
                .replace("%3d", "=")
                .replace("%2C", ",")
                .replace("%2c", ",")
                .replace("%21", "!")
        })
    })
}

/// A label selector of `key`, `!key`, `key=value` and `key!=value` requirements.
#[derive(Debug, Clone, Default)]
pub(crate) struct Selector(Vec<(String, Requirement)>);

#[derive(Debug, Clone)]
enum Requirement {
    Exists,
    Absent,
    Equals(String),
    Differs(String),
}

impl Selector {
    pub(crate) fn parse(selector: Option<&str>) -> Self {
        let Some(selector) = selector.filter(|s| !s.is_empty()) else { return Selector::default() };
        Selector(
            selector
                .split(',')
                .map(|r| {
                    if let Some((k, v)) = r.split_once("!=") {
                        (k.to_string(), Requirement::Differs(v.to_string()))
                    } else if let Some((k, v)) = r.split_once('=') {
                        (k.to_string(), Requirement::Equals(v.trim_start_matches('=').to_string()))
                    } else if let Some(k) = r.strip_prefix('!') {
                        (k.to_string(), Requirement::Absent)
                    } else {
                        (r.to_string(), Requirement::Exists)
                    }
                })
                .collect(),
        )
    }

    pub(crate) fn matches(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        self.0.iter().all(|(key, req)| {
            let value = labels.get(key).and_then(Value::as_str);
            match req {
                Requirement::Exists => value.is_some(),
                Requirement::Absent => value.is_none(),
                Requirement::Equals(v) => value == Some(v.as_str()),
                Requirement::Differs(v) => value != Some(v.as_str()),
            }
        })
    }

    /// Whether the selector requires `label` (for generated collections, which have it).
    pub(crate) fn requires(&self, label: &str) -> bool {
        self.0.iter().any(|(k, r)| k == label && matches!(r, Requirement::Exists | Requirement::Equals(_)))
    }
}
