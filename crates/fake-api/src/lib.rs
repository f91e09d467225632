//! One fake Kubernetes API for trainguard's tests and its scale bench: a store of JSON objects
//! keyed by (collection, namespace, name) with resourceVersions, paged lists (`limit`/`continue`),
//! watches, get, create, merge patch (with resourceVersion and UID preconditions), replace, delete
//! (with preconditions), events accepted; every request recorded, with scripted answers and
//! injected faults (status codes, delays, held or stalled requests, watches ended).
//!
//! The same [`FakeApi`] is a tower `Service` (for a `kube::Client` in-process: [`FakeApi::client`])
//! and is served over HTTP/1.1 on loopback ([`FakeApi::serve`], for a binary with a kubeconfig).
//! It models the API server only as far as trainguard's clients need; where the real one matters,
//! the e2e tests pin it.

mod path;
mod store;
#[cfg(test)]
mod tests;
pub mod wait;

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

pub use path::{ApiPath, collection_of, rbac_of};
use store::Store;

/// The body of every answer.
pub type RespBody = UnsyncBoxBody<Bytes, Infallible>;

/// One request the fake saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: String,
    pub content_type: String,
    pub body: Value,
    /// (group, resource[/subresource], verb) as RBAC sees the request.
    pub rbac: (String, String, String),
    /// When the fake received it.
    pub at: Instant,
}

impl Seen {
    /// `METHOD path` for compact assertions.
    pub fn line(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    /// A watch (a GET of a collection with `watch=true`).
    pub fn is_watch(&self) -> bool {
        self.rbac.2 == "watch"
    }

    /// An event (events.k8s.io or core).
    pub fn is_event(&self) -> bool {
        self.rbac.0 == "events.k8s.io" || (self.rbac.0.is_empty() && self.rbac.1 == "events")
    }
}

/// What an injected fault does to a request it matches (after the request is recorded).
#[derive(Debug, Clone)]
pub enum Fault {
    /// Answer this status code with a Kubernetes `Status` body.
    Status(u16),
    /// Wait this long, then answer as usual.
    Delay(Duration),
    /// Wait until the receiver holds `true`, then answer as usual.
    Hold(tokio::sync::watch::Receiver<bool>),
    /// Never answer (a hung call; later requests are still served).
    Stall,
}

type FaultRule = Arc<dyn Fn(&Seen) -> Option<Fault> + Send + Sync>;
type Hook = Arc<dyn Fn(&Seen) + Send + Sync>;
type Routes = HashMap<(String, String), VecDeque<(u16, Value)>>;

/// The fake API server. Clones share everything.
#[derive(Clone, Default)]
pub struct FakeApi {
    routes: Arc<Mutex<Routes>>,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Requests the fake could not answer (neither scripted nor modelled).
    unexpected: Arc<Mutex<Vec<String>>>,
    store: Arc<Mutex<Store>>,
    hook: Arc<Mutex<Option<Hook>>>,
    faults: Arc<Mutex<Vec<FaultRule>>>,
}

/// A Kubernetes `Status` error body.
pub fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": format!("fake: {reason}"), "reason": reason, "code": code})
}

/// A Kubernetes `Status` success body.
pub fn success() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 200})
}

fn respond(code: u16, body: Bytes) -> Response<RespBody> {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(body).boxed_unsync())
        .expect("static response")
}

fn full(code: u16, body: &Value) -> Response<RespBody> {
    respond(code, Bytes::from(serde_json::to_vec(body).expect("JSON")))
}

fn reason_of(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        410 => "Expired",
        422 => "Invalid",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    }
}

impl FakeApi {
    pub fn new() -> Self {
        Self::default()
    }

    /// A fake whose store starts with these objects (their resourceVersions kept).
    pub fn with_objects(objects: impl IntoIterator<Item = Value>) -> Self {
        let api = Self::default();
        for object in objects {
            api.insert(object);
        }
        api
    }

    /// Serves a custom-resource collection even when it is empty (its "CRD" is installed), e.g.
    /// `/apis/jobset.x-k8s.io/v1alpha2/jobsets`. Built-in collections are always served; other
    /// custom resources only while the store holds one.
    pub fn serve_collection(&self, collection: &str) -> &Self {
        self.store.lock().unwrap().served.push(collection.to_string());
        self
    }

    /// A collection generated on demand (a cluster too large to hold as JSON values): `count`
    /// objects, the `i`-th rendered as JSON by `render`. With `label`, only lists and watches
    /// whose label selector requires that label see it.
    pub fn generate(
        &self,
        collection: &str,
        label: Option<&str>,
        count: usize,
        render: impl Fn(usize, &mut String) + Send + Sync + 'static,
    ) {
        self.store.lock().unwrap().generated.push(store::Generated {
            collection: collection.to_string(),
            label: label.map(str::to_string),
            count,
            render: Arc::new(render),
        });
    }

    /// Lists ignore `limit` and answer everything at once (an API server serving lists from a
    /// watch cache that cannot page).
    pub fn ignore_limit(&self, ignore: bool) {
        self.store.lock().unwrap().ignore_limit = ignore;
    }

    /// The resourceVersion the next write gets is above `rv`.
    pub fn resource_version_at_least(&self, rv: u64) {
        let mut store = self.store.lock().unwrap();
        store.resource_version = store.resource_version.max(rv);
    }

    /// Queues an answer for the next `method path` (the last one repeats once the queue drains).
    pub fn on(&self, method: &str, path: &str, code: u16, body: Value) -> &Self {
        self.routes.lock().unwrap().entry((method.to_string(), path.to_string())).or_default().push_back((code, body));
        self
    }

    /// Calls `hook` with every request as it arrives (after it is recorded, before the answer).
    pub fn on_request(&self, hook: impl Fn(&Seen) + Send + Sync + 'static) {
        *self.hook.lock().unwrap() = Some(Arc::new(hook));
    }

    /// Adds a fault rule: every request is offered to the rules in order, and the first that
    /// returns a fault gets it (a delay or a hold then goes on to the answer).
    pub fn fault(&self, rule: impl Fn(&Seen) -> Option<Fault> + Send + Sync + 'static) {
        self.faults.lock().unwrap().push(Arc::new(rule));
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        self.faults.lock().unwrap().clear();
    }

    /// From now on, requests `method path` are recorded but never answered.
    pub fn stall(&self, method: &str, path: &str) {
        let (method, path) = (method.to_string(), path.to_string());
        self.fault(move |s| (s.method == method && s.path == path).then_some(Fault::Stall));
    }

    /// Ends the open watches of collections whose path starts with `prefix` ("" for all), as a
    /// restarted API server or a dropped connection would.
    pub fn end_watches(&self, prefix: &str) {
        self.store.lock().unwrap().watches.retain(|w| !w.collection.starts_with(prefix));
    }

    /// Ends the open watches of `collection` (e.g. `/api/v1/pods`) in `namespace` with `410 Gone`,
    /// as the API server does once their resourceVersion is compacted: the client relists.
    pub fn expire_watches(&self, collection: &str, namespace: &str) {
        self.store.lock().unwrap().expire_watches(collection, namespace);
    }

    /// Every request so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Whether a request for this path was made.
    pub fn requested(&self, path: &str) -> bool {
        self.seen.lock().unwrap().iter().any(|s| s.path == path)
    }

    /// Requests other than events, as `METHOD path`.
    pub fn calls(&self) -> Vec<String> {
        self.seen().iter().filter(|s| !s.is_event()).map(Seen::line).collect()
    }

    /// Writes (anything but GET), other than events.
    pub fn writes(&self) -> Vec<String> {
        self.seen().iter().filter(|s| !s.is_event() && s.method != "GET").map(Seen::line).collect()
    }

    /// Events published, as their reasons.
    pub fn event_reasons(&self) -> Vec<String> {
        self.seen()
            .iter()
            .filter(|s| s.is_event())
            .map(|s| s.body["reason"].as_str().unwrap_or("").to_string())
            .collect()
    }

    /// Requests neither scripted nor modelled (each answered 500).
    pub fn unexpected(&self) -> Vec<String> {
        self.unexpected.lock().unwrap().clone()
    }

    /// The stored object at an item path, if any.
    pub fn object(&self, path: &str) -> Option<Value> {
        self.store.lock().unwrap().get(&ApiPath::parse(path)).cloned()
    }

    /// Stores an object as it is (its resourceVersion kept), without telling the watches: what a
    /// list shows from now on, and a watch missed.
    pub fn insert(&self, object: Value) {
        self.store.lock().unwrap().insert(object);
    }

    /// Removes an object without telling the watches.
    pub fn forget(&self, object: &Value) {
        self.store.lock().unwrap().forget(object);
    }

    /// The stored objects of a collection (e.g. `/api/v1/pods`), in the API server's order.
    pub fn objects(&self, collection: &str) -> Vec<Value> {
        self.store.lock().unwrap().objects_of(collection)
    }

    /// Creates or replaces an object and tells the open watches, as the API server would.
    pub fn put(&self, object: Value) {
        self.store.lock().unwrap().put(object);
    }

    /// Deletes an object (by its apiVersion, kind, namespace and name) and tells the watches.
    pub fn remove(&self, object: &Value) {
        self.store.lock().unwrap().remove(object);
    }

    /// A kube `Client` whose requests this fake answers in-process.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.clone(), "default")
    }

    /// Serves this fake over HTTP/1.1 on a loopback port until the returned handle is dropped.
    pub async fn serve(&self) -> Served {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let addr = listener.local_addr().expect("local address");
        let fake = self.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let fake = fake.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let fake = fake.clone();
                        async move { Ok::<_, Infallible>(fake.answer(request).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Served { addr, task }
    }

    /// Records the request, applies the faults and answers it.
    #[allow(clippy::disallowed_methods, reason = "the Delay fault: an API server that answers late")]
    pub async fn answer<B>(&self, request: Request<B>) -> Response<RespBody>
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: std::fmt::Debug,
    {
        let method = request.method().to_string();
        let path = request.uri().path().to_string();
        let query = request.uri().query().unwrap_or("").to_string();
        let content_type =
            request.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        let bytes = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        let body: Value =
            if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap_or(Value::Null) };
        let seen =
            Seen { rbac: rbac_of(&method, &path, &query), method, path, query, content_type, body, at: Instant::now() };
        self.seen.lock().unwrap().push(seen.clone());
        let hook = self.hook.lock().unwrap().clone();
        if let Some(hook) = hook {
            hook(&seen);
        }
        let fault = self.faults.lock().unwrap().iter().find_map(|rule| rule(&seen));
        match fault {
            Some(Fault::Status(code)) => return full(code, &status(code, reason_of(code))),
            Some(Fault::Delay(delay)) => tokio::time::sleep(delay).await,
            Some(Fault::Hold(mut open)) => {
                let _ = open.wait_for(|open| *open).await;
            }
            Some(Fault::Stall) => std::future::pending::<()>().await,
            None => {}
        }
        if let Some((code, body)) = self.scripted(&seen) {
            return full(code, &body);
        }
        if seen.is_event() && matches!(seen.method.as_str(), "POST" | "PATCH") {
            return full(if seen.method == "POST" { 201 } else { 200 }, &seen.body);
        }
        let answer = self.store.lock().unwrap().answer(&seen);
        match answer {
            store::Answer::Json(code, body) => full(code, &body),
            store::Answer::Watch(stream) => Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .body(stream)
                .expect("static response"),
            store::Answer::Page(page) => {
                // Rendering a page of a generated collection is CPU work: off the runtime.
                let body = tokio::task::spawn_blocking(move || page.render()).await.expect("render");
                respond(200, body)
            }
            store::Answer::Unexpected => {
                self.unexpected.lock().unwrap().push(format!("{} {}?{}", seen.method, seen.path, seen.query));
                full(500, &status(500, "InternalError"))
            }
        }
    }

    fn scripted(&self, seen: &Seen) -> Option<(u16, Value)> {
        let mut routes = self.routes.lock().unwrap();
        let queue = routes.get_mut(&(seen.method.clone(), seen.path.clone()))?;
        if queue.len() > 1 { queue.pop_front() } else { queue.front().cloned() }
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The fake as a tower `Service`: what [`FakeApi::client`] puts behind kube's `Client`.
impl<B> tower::Service<Request<B>> for FakeApi
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::fmt::Debug,
{
    type Response = Response<RespBody>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Response<RespBody>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let fake = self.clone();
        Box::pin(async move { Ok(fake.answer(request).await) })
    }
}

/// A fake served on loopback; stops serving when dropped.
pub struct Served {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Served {
    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kube `Client` that reaches the fake over the loopback connection.
    pub fn client(&self) -> kube::Client {
        let config = kube::Config::new(self.url().parse().expect("URL"));
        kube::Client::try_from(config).expect("client")
    }

    /// Writes a kubeconfig pointing at the fake into `dir`; returns its path.
    pub fn kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        let url = self.url();
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: fake, cluster: {{server: \"{url}\"}}}}]\n\
                 users: [{{name: fake, user: {{}}}}]\ncontexts: [{{name: fake, context: {{cluster: fake, user: fake}}}}]\n\
                 current-context: fake\n"
            ),
        )
        .expect("write kubeconfig");
        path
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}
