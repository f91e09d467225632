//! An in-test fake API server behind kube's `Client` (a `tower-test` mock service): scripted
//! responses per (method, path), every request recorded and checked against the API-call table
//! (`trainguard::rbac`). Events are accepted by default.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use http::{Request, Response};
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// One request the fake saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: String,
    pub content_type: String,
    pub body: Value,
    /// (group, resource, verb) as RBAC sees it.
    pub rbac: (String, String, String),
}

impl Seen {
    /// `METHOD path` for compact assertions.
    pub fn line(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

type Routes = HashMap<(String, String), VecDeque<(u16, Value)>>;

#[derive(Clone, Default)]
pub struct FakeApi {
    routes: Arc<Mutex<Routes>>,
    seen: Arc<Mutex<Vec<Seen>>>,
    violations: Arc<Mutex<Vec<String>>>,
}

/// A Kubernetes `Status` error body.
pub fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": format!("fake: {reason}"), "reason": reason, "code": code})
}

pub fn success() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 200})
}

/// Splits an API path into (group, resource[/subresource], has name) the way RBAC sees it.
pub fn rbac_of(method: &str, path: &str, query: &str) -> (String, String, String) {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => ("?", &parts[..0]),
    };
    let rest = match rest {
        ["namespaces", _ns, rest @ ..] if !rest.is_empty() => rest,
        other => other,
    };
    let (resource, named) = match rest {
        [resource] => (resource.to_string(), false),
        [resource, _name] => (resource.to_string(), true),
        [resource, _name, sub] => (format!("{resource}/{sub}"), true),
        _ => ("?".to_string(), false),
    };
    let verb = match (method, named) {
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
    (group.to_string(), resource, verb.to_string())
}

impl FakeApi {
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues a response for the next `method path` (responses repeat the last one when drained).
    pub fn on(&self, method: &str, path: &str, code: u16, body: Value) -> &Self {
        self.routes.lock().unwrap().entry((method.to_string(), path.to_string())).or_default().push_back((code, body));
        self
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Requests other than events, as `METHOD path`.
    pub fn calls(&self) -> Vec<String> {
        self.seen().iter().filter(|s| s.rbac.0 != "events.k8s.io").map(Seen::line).collect()
    }

    /// Events published, as their reasons.
    pub fn event_reasons(&self) -> Vec<String> {
        self.seen()
            .iter()
            .filter(|s| s.rbac.0 == "events.k8s.io")
            .map(|s| s.body["reason"].as_str().unwrap_or("").to_string())
            .collect()
    }

    pub fn violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }

    /// A kube `Client` whose requests this fake answers.
    pub fn client(&self) -> (Client, JoinHandle<()>) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let fake = self.clone();
        let task = tokio::spawn(async move {
            while let Some((request, respond)) = handle.next_request().await {
                let (code, body) = fake.answer(request).await;
                let response = Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(Body::from(serde_json::to_vec(&body).unwrap()));
                respond.send_response(response.unwrap());
            }
        });
        (Client::new(service, "default"), task)
    }

    async fn answer(&self, request: Request<Body>) -> (u16, Value) {
        let method = request.method().to_string();
        let path = request.uri().path().to_string();
        let query = request.uri().query().unwrap_or("").to_string();
        let content_type =
            request.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        let bytes = request.into_body().collect_bytes().await.unwrap();
        let body: Value =
            if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap_or(Value::Null) };
        let rbac = rbac_of(&method, &path, &query);
        if !trainguard::rbac::allowed(&rbac.0, &rbac.1, &rbac.2) {
            self.violations.lock().unwrap().push(format!("not in the API-call table: {rbac:?} ({method} {path})"));
        }
        self.seen.lock().unwrap().push(Seen {
            method: method.clone(),
            path: path.clone(),
            query,
            content_type,
            body: body.clone(),
            rbac: rbac.clone(),
        });
        let mut routes = self.routes.lock().unwrap();
        if let Some(queue) = routes.get_mut(&(method.clone(), path.clone())) {
            let answer = if queue.len() > 1 { queue.pop_front().unwrap() } else { queue.front().cloned().unwrap() };
            return answer;
        }
        if rbac.0 == "events.k8s.io" && method == "POST" {
            return (201, body);
        }
        if rbac.0 == "events.k8s.io" && method == "PATCH" {
            return (200, body);
        }
        self.violations.lock().unwrap().push(format!("unscripted request: {method} {path}"));
        (500, status(500, "InternalError"))
    }
}
