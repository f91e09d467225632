//! The object store behind the fake: objects by (collection, namespace, name), one resourceVersion
//! counter, open watches, and generated collections.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::path::{ApiPath, Selector, collection_of, query_param};
use crate::{RespBody, Seen, status};

type Key = (String, String, String);
type Render = Arc<dyn Fn(usize, &mut String) + Send + Sync>;

/// An open watch: what it watches and its stream.
pub(crate) struct Watch {
    pub(crate) collection: String,
    namespace: Option<String>,
    selector: Selector,
    tx: mpsc::UnboundedSender<Bytes>,
}

/// A collection rendered on demand.
pub(crate) struct Generated {
    pub(crate) collection: String,
    pub(crate) label: Option<String>,
    pub(crate) count: usize,
    pub(crate) render: Render,
}

#[derive(Default)]
pub(crate) struct Store {
    objects: BTreeMap<Key, Value>,
    pub(crate) watches: Vec<Watch>,
    pub(crate) resource_version: u64,
    /// Custom-resource collections served even when empty.
    pub(crate) served: Vec<String>,
    pub(crate) generated: Vec<Generated>,
    pub(crate) ignore_limit: bool,
}

/// What the store answers.
pub(crate) enum Answer {
    Json(u16, Value),
    Watch(RespBody),
    /// A list page with generated objects, rendered off the runtime.
    Page(Page),
    /// Neither scripted nor modelled.
    Unexpected,
}

/// A list page that includes generated objects.
pub(crate) struct Page {
    head: String,
    stored: Vec<Value>,
    generated: Vec<(Render, std::ops::Range<usize>)>,
}

impl Page {
    pub(crate) fn render(self) -> Bytes {
        let mut out = self.head;
        let mut first = true;
        for object in &self.stored {
            if !std::mem::take(&mut first) {
                out.push(',');
            }
            out.push_str(&object.to_string());
        }
        for (render, range) in &self.generated {
            for i in range.clone() {
                if !std::mem::take(&mut first) {
                    out.push(',');
                }
                render(i, &mut out);
            }
        }
        out.push_str("]}");
        Bytes::from(out)
    }
}

fn key_of(object: &Value) -> Key {
    let meta = &object["metadata"];
    let text = |v: &Value| v.as_str().unwrap_or("").to_string();
    (collection_of(object), text(&meta["namespace"]), text(&meta["name"]))
}

fn key_at(p: &ApiPath) -> Key {
    (p.collection(), p.namespace.clone().unwrap_or_default(), p.name.clone().unwrap_or_default())
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

/// A precondition (`uid` or `resourceVersion`) the stored object does not meet.
fn unmet(object: &Value, field: &str, wanted: &Value) -> bool {
    matches!(wanted.as_str(), Some(w) if !w.is_empty() && object["metadata"][field].as_str() != Some(w))
}

fn conflict() -> Answer {
    Answer::Json(409, status(409, "Conflict"))
}

impl Store {
    /// Adds an object as it is (its resourceVersion kept); watches are not told.
    pub(crate) fn insert(&mut self, object: Value) {
        self.objects.insert(key_of(&object), object);
    }

    pub(crate) fn forget(&mut self, object: &Value) {
        self.objects.remove(&key_of(object));
    }

    pub(crate) fn objects_of(&self, collection: &str) -> Vec<Value> {
        self.objects.iter().filter(|((c, _, _), _)| c == collection).map(|(_, o)| o.clone()).collect()
    }

    pub(crate) fn get(&self, p: &ApiPath) -> Option<&Value> {
        self.objects.get(&key_at(p))
    }

    fn next_rv(&mut self, object: &mut Value) {
        self.resource_version += 1;
        object["metadata"]["resourceVersion"] = json!(self.resource_version.to_string());
    }

    /// Creates or replaces an object with a new resourceVersion and tells the watches.
    pub(crate) fn put(&mut self, mut object: Value) {
        self.next_rv(&mut object);
        let kind = if self.objects.insert(key_of(&object), object.clone()).is_some() { "MODIFIED" } else { "ADDED" };
        self.notify(kind, &object);
    }

    pub(crate) fn remove(&mut self, object: &Value) {
        if let Some(mut gone) = self.objects.remove(&key_of(object)) {
            self.next_rv(&mut gone);
            self.notify("DELETED", &gone);
        }
    }

    /// Ends the open watches of `collection` in `namespace` with the `410 Gone` a compacted
    /// resourceVersion gives: the client relists.
    pub(crate) fn expire_watches(&mut self, collection: &str, namespace: &str) {
        let gone = json!({"type": "ERROR", "object": status(410, "Expired")});
        let line = Bytes::from(format!("{gone}\n"));
        self.watches.retain(|w| {
            if w.collection != collection || w.namespace.as_deref() != Some(namespace) {
                return true;
            }
            let _ = w.tx.send(line.clone());
            false
        });
    }

    fn notify(&mut self, kind: &str, object: &Value) {
        let collection = collection_of(object);
        let namespace = object["metadata"]["namespace"].as_str();
        let line = Bytes::from(format!("{}\n", json!({"type": kind, "object": object})));
        self.watches.retain(|w| {
            let sees = w.collection == collection
                && (w.namespace.is_none() || w.namespace.as_deref() == namespace)
                && w.selector.matches(object);
            !sees || w.tx.send(line.clone()).is_ok()
        });
    }

    /// Built-in collections always; custom resources when declared served, generated or stored.
    fn served(&self, collection: &str) -> bool {
        collection.starts_with("/api/v1/")
            || collection.starts_with("/apis/batch/")
            || collection.starts_with("/apis/coordination.k8s.io/")
            || self.served.iter().any(|c| c == collection)
            || self.generated.iter().any(|g| g.collection == collection)
            || self.objects.keys().any(|(c, _, _)| c == collection)
    }

    pub(crate) fn answer(&mut self, seen: &Seen) -> Answer {
        let p = ApiPath::parse(&seen.path);
        let key = key_at(&p);
        match (seen.method.as_str(), p.name.is_some(), self.objects.contains_key(&key)) {
            ("GET", false, _) if !self.served(&p.collection()) => Answer::Json(404, status(404, "NotFound")),
            ("GET", false, _) if seen.is_watch() => self.watch(&p, &seen.query),
            ("GET", false, _) => self.list(&p, &seen.query),
            ("GET", true, true) => Answer::Json(200, self.objects[&key].clone()),
            ("POST", false, _) => self.create(&p, seen.body.clone()),
            ("PUT", true, true) => {
                let mut object = seen.body.clone();
                if unmet(&self.objects[&key], "resourceVersion", &object["metadata"]["resourceVersion"]) {
                    return conflict();
                }
                self.next_rv(&mut object);
                self.objects.insert(key, object.clone());
                self.notify("MODIFIED", &object);
                Answer::Json(200, object)
            }
            ("PATCH", true, true) => self.patch(key, &p, seen),
            ("DELETE", true, true) => {
                let pre = &seen.body["preconditions"];
                let stored = &self.objects[&key];
                if unmet(stored, "uid", &pre["uid"]) || unmet(stored, "resourceVersion", &pre["resourceVersion"]) {
                    return conflict();
                }
                let mut object = self.objects.remove(&key).expect("present");
                self.next_rv(&mut object);
                self.notify("DELETED", &object);
                Answer::Json(200, object)
            }
            (_, true, false) => Answer::Json(404, status(404, "NotFound")),
            _ => Answer::Unexpected,
        }
    }

    fn watch(&mut self, p: &ApiPath, query: &str) -> Answer {
        let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
        let selector = Selector::parse(query_param(query, "labelSelector").as_deref());
        self.watches.push(Watch { collection: p.collection(), namespace: p.namespace.clone(), selector, tx });
        let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (b, rx)) })
            .map(|b| Ok::<_, Infallible>(Frame::data(b)));
        Answer::Watch(StreamBody::new(stream).boxed_unsync())
    }

    fn list(&self, p: &ApiPath, query: &str) -> Answer {
        let collection = p.collection();
        let selector = Selector::parse(query_param(query, "labelSelector").as_deref());
        let stored: Vec<&Value> = self
            .objects
            .iter()
            .filter(|((c, ns, _), o)| {
                *c == collection && p.namespace.as_ref().is_none_or(|n| n == ns) && selector.matches(o)
            })
            .map(|(_, o)| o)
            .collect();
        let generated: Vec<&Generated> = self
            .generated
            .iter()
            .filter(|g| g.collection == collection && g.label.as_ref().is_none_or(|l| selector.requires(l)))
            .collect();
        let total = stored.len() + generated.iter().map(|g| g.count).sum::<usize>();
        let limit: usize = query_param(query, "limit").and_then(|l| l.parse().ok()).unwrap_or(0);
        let start: usize = query_param(query, "continue").and_then(|c| c.parse().ok()).unwrap_or(0).min(total);
        let end = if limit == 0 || self.ignore_limit { total } else { (start + limit).min(total) };
        let rv = self.resource_version.to_string();
        let mut metadata = json!({"resourceVersion": rv});
        if end < total {
            metadata["continue"] = json!(end.to_string());
        }
        let page_stored: Vec<Value> =
            stored.iter().skip(start).take(end.saturating_sub(start)).map(|o| (*o).clone()).collect();
        if generated.is_empty() {
            return Answer::Json(
                200,
                json!({"apiVersion": "v1", "kind": "List", "metadata": metadata, "items": page_stored}),
            );
        }
        let mut page_generated = Vec::new();
        let mut offset = stored.len();
        for g in generated {
            let (from, to) = (start.max(offset), end.min(offset + g.count));
            if from < to {
                page_generated.push((g.render.clone(), from - offset..to - offset));
            }
            offset += g.count;
        }
        let mut head = String::with_capacity((end - start) * 6 * 1024 + 256);
        let _ = write!(head, r#"{{"apiVersion":"v1","kind":"List","metadata":{metadata},"items":["#);
        Answer::Page(Page { head, stored: page_stored, generated: page_generated })
    }

    fn create(&mut self, p: &ApiPath, mut object: Value) -> Answer {
        if object["metadata"]["namespace"].is_null()
            && let Some(ns) = &p.namespace
        {
            object["metadata"]["namespace"] = json!(ns);
        }
        let key = key_of(&object);
        if self.objects.contains_key(&key) {
            return Answer::Json(409, status(409, "AlreadyExists"));
        }
        self.next_rv(&mut object);
        self.objects.insert(key, object.clone());
        self.notify("ADDED", &object);
        Answer::Json(201, object)
    }

    /// A merge patch (strategic merge and apply patches are treated as merge patches), with the
    /// resourceVersion and UID in the patch's metadata as preconditions. An apply patch of a
    /// Lease another holder holds conflicts, as a field-manager conflict would.
    fn patch(&mut self, key: Key, p: &ApiPath, seen: &Seen) -> Answer {
        let mut object = self.objects[&key].clone();
        let body = &seen.body;
        if p.resource == "leases" && seen.content_type == "application/apply-patch+yaml" {
            let holder = &object["spec"]["holderIdentity"];
            if !holder.is_null() && *holder != body["spec"]["holderIdentity"] {
                return conflict();
            }
        }
        let meta = &body["metadata"];
        if unmet(&object, "resourceVersion", &meta["resourceVersion"]) || unmet(&object, "uid", &meta["uid"]) {
            return conflict();
        }
        let mut patch = body.clone();
        if let Some(meta) = patch.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
            meta.remove("uid");
        }
        merge(&mut object, &patch);
        self.next_rv(&mut object);
        self.objects.insert(key, object.clone());
        self.notify("MODIFIED", &object);
        Answer::Json(200, object)
    }
}
