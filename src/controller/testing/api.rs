//! An in-test fake API server behind kube's `Client` (a `tower-test` mock service). Every request
//! is recorded and checked against the API-call table (`crate::rbac`). Answers come from, in
//! order: scripted responses per (method, path); a small object store (list with label-existence
//! selectors, open watch streams, get, create, merge patch, delete); events are accepted.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use http::{Request, Response};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

type RespBody = UnsyncBoxBody<Bytes, Infallible>;

/// One request the fake saw.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) method: String,
    pub path: String,
    pub(crate) query: String,
    pub(crate) content_type: String,
    pub body: Value,
    /// (group, resource, verb) as RBAC sees it.
    pub(crate) rbac: (String, String, String),
    /// When the fake received it.
    pub(crate) at: std::time::Instant,
}

impl Seen {
    /// `METHOD path` for compact assertions.
    pub(crate) fn line(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

type Routes = HashMap<(String, String), VecDeque<(u16, Value)>>;
/// Called with every request once it is recorded, before it is answered.
type Hook = Arc<dyn Fn(&Seen) + Send + Sync>;

/// An open watch: its collection, namespace (none: every namespace), label selector and stream.
struct Watch {
    collection: String,
    namespace: Option<String>,
    selector: Option<String>,
    tx: mpsc::UnboundedSender<Bytes>,
}

#[derive(Default)]
struct Store {
    objects: Vec<Value>,
    watches: Vec<Watch>,
    resource_version: u64,
    /// Custom-resource collections served even when empty (their "CRD" is installed).
    served: Vec<String>,
}

#[derive(Clone, Default)]
pub(crate) struct FakeApi {
    routes: Arc<Mutex<Routes>>,
    seen: Arc<Mutex<Vec<Seen>>>,
    violations: Arc<Mutex<Vec<String>>>,
    store: Arc<Mutex<Store>>,
    hook: Arc<Mutex<Option<Hook>>>,
    /// `(method, path)` of requests that get no answer at all (an API server that hangs).
    stalled: Arc<Mutex<Vec<(String, String)>>>,
}

/// A Kubernetes `Status` error body.
pub(crate) fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": format!("fake: {reason}"), "reason": reason, "code": code})
}

pub(crate) fn success() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 200})
}

/// Splits an API path into (group, resource[/subresource], verb) the way RBAC sees it.
pub(crate) fn rbac_of(method: &str, path: &str, query: &str) -> (String, String, String) {
    let parsed = parse_path(path);
    let verb = match (method, parsed.name.is_some()) {
        ("GET", true) => "get",
        ("GET", false) if query.contains("watch=true") => "watch",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "?",
    };
    let resource = match parsed.sub {
        Some(sub) => format!("{}/{sub}", parsed.resource),
        None => parsed.resource,
    };
    (parsed.group, resource, verb.to_string())
}

struct ParsedPath {
    group: String,
    /// `/api/v1` or `/apis/<group>/<version>`.
    prefix: String,
    namespace: Option<String>,
    resource: String,
    name: Option<String>,
    sub: Option<String>,
}

impl ParsedPath {
    /// The cluster-wide collection path: where a list of this resource goes.
    fn collection(&self) -> String {
        format!("{}/{}", self.prefix, self.resource)
    }
}

fn parse_path(path: &str) -> ParsedPath {
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
    let (resource, name, sub) = match rest {
        [resource] => (resource.to_string(), None, None),
        [resource, name] => (resource.to_string(), Some(name.to_string()), None),
        [resource, name, sub] => (resource.to_string(), Some(name.to_string()), Some(sub.to_string())),
        _ => ("?".to_string(), None, None),
    };
    ParsedPath { group, prefix, namespace, resource, name, sub }
}

/// The namespace an API path names (`None`: a cluster-scoped object, or every namespace).
pub(crate) fn namespace_of(path: &str) -> Option<String> {
    parse_path(path).namespace
}

/// The collection path of an object, from its apiVersion and kind.
fn collection_of(object: &Value) -> String {
    let api_version = object["apiVersion"].as_str().unwrap_or("");
    let kind = object["kind"].as_str().unwrap_or("");
    let plural = match kind {
        "Pod" => "pods",
        "Node" => "nodes",
        "Lease" => "leases",
        "Workload" => "workloads",
        "TrainJob" => "trainjobs",
        "JobSet" => "jobsets",
        other => return format!("/apis/{api_version}/{}s", other.to_ascii_lowercase()),
    };
    if api_version == "v1" { format!("/api/v1/{plural}") } else { format!("/apis/{api_version}/{plural}") }
}

fn has_label(object: &Value, selector: &Option<String>) -> bool {
    match selector {
        None => true,
        Some(key) => object["metadata"]["labels"].get(key).is_some(),
    }
}

fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| v.replace("%2F", "/").replace("%2f", "/"))
    })
}

/// JSON merge patch (RFC 7386); nulls delete.
fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

fn full(code: u16, body: &Value) -> Response<RespBody> {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(body).unwrap())).boxed_unsync())
        .unwrap()
}

impl FakeApi {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// A fake whose store starts with these objects.
    pub(crate) fn with_objects(objects: impl IntoIterator<Item = Value>) -> Self {
        let api = Self::default();
        api.store.lock().unwrap().objects.extend(objects);
        api
    }

    /// Serves an empty custom-resource collection (e.g. `/apis/jobset.x-k8s.io/v1alpha2/jobsets`).
    pub(crate) fn serve(&self, collection: &str) -> &Self {
        self.store.lock().unwrap().served.push(collection.to_string());
        self
    }

    /// Queues a response for the next `method path` (the last one repeats once the queue drains).
    pub(crate) fn on(&self, method: &str, path: &str, code: u16, body: Value) -> &Self {
        self.routes.lock().unwrap().entry((method.to_string(), path.to_string())).or_default().push_back((code, body));
        self
    }

    /// Calls `hook` with every request as it arrives (after it is recorded, before the answer).
    pub(crate) fn on_request(&self, hook: impl Fn(&Seen) + Send + Sync + 'static) {
        *self.hook.lock().unwrap() = Some(Arc::new(hook));
    }

    /// From now on, requests `method path` are recorded but never answered, and later requests
    /// are still served (a hung call, not a dead server).
    pub(crate) fn stall(&self, method: &str, path: &str) {
        self.stalled.lock().unwrap().push((method.to_string(), path.to_string()));
    }

    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Requests other than events, as `METHOD path`.
    pub(crate) fn calls(&self) -> Vec<String> {
        self.seen().iter().filter(|s| s.rbac.0 != "events.k8s.io").map(Seen::line).collect()
    }

    /// Writes (anything but GET), other than events.
    pub(crate) fn writes(&self) -> Vec<String> {
        self.seen().iter().filter(|s| s.rbac.0 != "events.k8s.io" && s.method != "GET").map(Seen::line).collect()
    }

    /// Events published, as their reasons.
    pub(crate) fn event_reasons(&self) -> Vec<String> {
        self.seen()
            .iter()
            .filter(|s| s.rbac.0 == "events.k8s.io")
            .map(|s| s.body["reason"].as_str().unwrap_or("").to_string())
            .collect()
    }

    pub(crate) fn violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }

    /// The stored object at an item path, if any.
    pub(crate) fn object(&self, path: &str) -> Option<Value> {
        let p = parse_path(path);
        let store = self.store.lock().unwrap();
        store.objects.iter().find(|o| self.is_at(o, &p)).cloned()
    }

    /// Replaces (or adds) an object and tells the open watches, as the API server would.
    pub(crate) fn put(&self, object: Value) {
        let mut store = self.store.lock().unwrap();
        let collection = collection_of(&object);
        let (ns, name) = (object["metadata"]["namespace"].clone(), object["metadata"]["name"].clone());
        store.resource_version += 1;
        let mut object = object;
        object["metadata"]["resourceVersion"] = json!(store.resource_version.to_string());
        let existing = store.objects.iter().position(|o| {
            collection_of(o) == collection && o["metadata"]["namespace"] == ns && o["metadata"]["name"] == name
        });
        let kind = match existing {
            Some(i) => {
                store.objects[i] = object.clone();
                "MODIFIED"
            }
            None => {
                store.objects.push(object.clone());
                "ADDED"
            }
        };
        Self::notify(&mut store, kind, &object);
    }

    /// Ends the open watches of `collection` (e.g. `/api/v1/pods`) in `namespace` with the
    /// `410 Gone` a compacted resourceVersion gives, as the API server does: the client relists.
    pub(crate) fn expire_watches(&self, collection: &str, namespace: &str) {
        let mut store = self.store.lock().unwrap();
        let gone = json!({"type": "ERROR", "object": status(410, "Expired")});
        let line = Bytes::from(format!("{gone}\n"));
        store.watches.retain(|w| {
            if w.collection != collection || w.namespace.as_deref() != Some(namespace) {
                return true;
            }
            let _ = w.tx.send(line.clone());
            false
        });
    }

    fn notify(store: &mut Store, kind: &str, object: &Value) {
        let collection = collection_of(object);
        let line = Bytes::from(format!("{}\n", json!({"type": kind, "object": object})));
        let namespace = object["metadata"]["namespace"].as_str();
        store.watches.retain(|w| {
            if w.collection != collection
                || !has_label(object, &w.selector)
                || w.namespace.as_deref().is_some_and(|ns| Some(ns) != namespace)
            {
                return true;
            }
            w.tx.send(line.clone()).is_ok()
        });
    }

    fn is_at(&self, object: &Value, p: &ParsedPath) -> bool {
        collection_of(object) == p.collection()
            && object["metadata"]["name"].as_str() == p.name.as_deref()
            && object["metadata"]["namespace"].as_str() == p.namespace.as_deref()
    }

    /// A kube `Client` whose requests this fake answers.
    pub(crate) fn client(&self) -> (Client, JoinHandle<()>) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<RespBody>>();
        let fake = self.clone();
        let task = tokio::spawn(async move {
            while let Some((request, respond)) = handle.next_request().await {
                let key = (request.method().to_string(), request.uri().path().to_string());
                if fake.stalled.lock().unwrap().contains(&key) {
                    fake.seen.lock().unwrap().push(Seen {
                        method: key.0,
                        path: key.1,
                        query: request.uri().query().unwrap_or("").to_string(),
                        content_type: String::new(),
                        body: Value::Null,
                        rbac: rbac_of(request.method().as_str(), request.uri().path(), ""),
                        at: std::time::Instant::now(),
                    });
                    // Held, never answered, until the client gives up.
                    tokio::spawn(async move {
                        let _respond = respond;
                        std::future::pending::<()>().await;
                    });
                    continue;
                }
                let response = fake.answer(request).await;
                respond.send_response(response);
            }
        });
        (Client::new(service, "default"), task)
    }

    async fn answer(&self, request: Request<Body>) -> Response<RespBody> {
        let method = request.method().to_string();
        let path = request.uri().path().to_string();
        let query = request.uri().query().unwrap_or("").to_string();
        let content_type =
            request.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        let bytes = request.into_body().collect_bytes().await.unwrap();
        let body: Value =
            if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap_or(Value::Null) };
        let rbac = rbac_of(&method, &path, &query);
        if !crate::rbac::allowed(&rbac.0, &rbac.1, &rbac.2) {
            self.violations.lock().unwrap().push(format!("not in the API-call table: {rbac:?} ({method} {path})"));
        }
        let seen = Seen {
            method: method.clone(),
            path: path.clone(),
            query: query.clone(),
            content_type: content_type.clone(),
            body: body.clone(),
            rbac: rbac.clone(),
            at: std::time::Instant::now(),
        };
        self.seen.lock().unwrap().push(seen.clone());
        let hook = self.hook.lock().unwrap().clone();
        if let Some(hook) = hook {
            hook(&seen);
        }
        {
            let mut routes = self.routes.lock().unwrap();
            if let Some(queue) = routes.get_mut(&(method.clone(), path.clone())) {
                let (code, body) =
                    if queue.len() > 1 { queue.pop_front().unwrap() } else { queue.front().cloned().unwrap() };
                return full(code, &body);
            }
        }
        if rbac.0 == "events.k8s.io" && (method == "POST" || method == "PATCH") {
            return full(if method == "POST" { 201 } else { 200 }, &body);
        }
        self.answer_from_store(&method, &path, &query, &content_type, body)
    }

    fn answer_from_store(
        &self,
        method: &str,
        path: &str,
        query: &str,
        content_type: &str,
        body: Value,
    ) -> Response<RespBody> {
        let p = parse_path(path);
        let mut store = self.store.lock().unwrap();
        let index = store.objects.iter().position(|o| p.name.is_some() && self.is_at(o, &p));
        match (method, p.name.is_some(), index) {
            ("GET", false, _) if query.contains("watch=true") => {
                let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
                store.watches.push(Watch {
                    collection: p.collection(),
                    namespace: p.namespace.clone(),
                    selector: query_param(query, "labelSelector"),
                    tx,
                });
                let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (b, rx)) })
                    .map(|b| Ok::<_, Infallible>(Frame::data(b)));
                Response::builder()
                    .status(200)
                    .header("content-type", "application/json")
                    .body(StreamBody::new(stream).boxed_unsync())
                    .unwrap()
            }
            ("GET", false, _) => {
                let selector = query_param(query, "labelSelector");
                let items: Vec<Value> = store
                    .objects
                    .iter()
                    .filter(|o| collection_of(o) == p.collection() && has_label(o, &selector))
                    .filter(|o| p.namespace.is_none() || o["metadata"]["namespace"].as_str() == p.namespace.as_deref())
                    .cloned()
                    .collect();
                if items.is_empty() && !self.served(&store, &p.collection()) {
                    return full(404, &status(404, "NotFound"));
                }
                let rv = store.resource_version.to_string();
                full(
                    200,
                    &json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": rv}, "items": items}),
                )
            }
            ("GET", true, Some(i)) => full(200, &store.objects[i]),
            ("POST", false, _) => {
                let mut object = body;
                if object["metadata"]["namespace"].is_null()
                    && let Some(ns) = &p.namespace
                {
                    object["metadata"]["namespace"] = json!(ns);
                }
                store.resource_version += 1;
                object["metadata"]["resourceVersion"] = json!(store.resource_version.to_string());
                store.objects.push(object.clone());
                Self::notify(&mut store, "ADDED", &object);
                full(201, &object)
            }
            ("PATCH", true, Some(i)) => {
                let mut object = store.objects[i].clone();
                if p.resource == "leases" && content_type == "application/apply-patch+yaml" {
                    let holder = &object["spec"]["holderIdentity"];
                    let wanted = &body["spec"]["holderIdentity"];
                    if !holder.is_null() && holder != wanted {
                        return full(409, &status(409, "Conflict"));
                    }
                }
                if let Some(rv) = body["metadata"]["resourceVersion"].as_str()
                    && object["metadata"]["resourceVersion"].as_str() != Some(rv)
                {
                    return full(409, &status(409, "Conflict"));
                }
                let mut patch = body;
                if let Some(meta) = patch.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove("resourceVersion");
                    meta.remove("uid");
                }
                merge(&mut object, &patch);
                store.resource_version += 1;
                object["metadata"]["resourceVersion"] = json!(store.resource_version.to_string());
                store.objects[i] = object.clone();
                Self::notify(&mut store, "MODIFIED", &object);
                full(200, &object)
            }
            ("DELETE", true, Some(i)) => {
                let object = store.objects.remove(i);
                store.resource_version += 1;
                Self::notify(&mut store, "DELETED", &object);
                full(200, &object)
            }
            (_, true, None) => full(404, &status(404, "NotFound")),
            _ => {
                drop(store);
                self.violations.lock().unwrap().push(format!("unscripted request: {method} {path}?{query}"));
                full(500, &status(500, "InternalError"))
            }
        }
    }

    /// Whether the store serves a collection: built-in kinds always; custom resources only when
    /// the store holds at least one object of that resource (otherwise their "CRD" is absent).
    fn served(&self, store: &Store, collection: &str) -> bool {
        collection.starts_with("/api/v1/")
            || collection.starts_with("/apis/batch/")
            || collection.starts_with("/apis/coordination.k8s.io/")
            || store.served.iter().any(|c| c == collection)
            || store.objects.iter().any(|o| collection_of(o) == collection)
    }
}
