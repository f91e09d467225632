//! The kit's own contract, through kube's `Client` as the tests use it: paging, preconditions,
//! watches, faults and the loopback server answering like the in-process service.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions, WatchEvent, WatchParams};
use serde_json::{Value, json};

use crate::wait::eventually;
use crate::{FakeApi, Fault};

fn pod(name: &str, uid: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "ml", "uid": uid, "resourceVersion": "5", "labels": labels}})
}

fn pods(api: &FakeApi) -> Api<Pod> {
    Api::namespaced(api.client(), "ml")
}

#[tokio::test]
async fn lists_page_with_limit_and_continue_and_filter_by_label() {
    let api = FakeApi::with_objects((0..5).map(|i| pod(&format!("p{i}"), &format!("u{i}"), json!({"app": "x"}))));
    api.insert(pod("other", "u9", json!({"app": "y"})));
    let pods = pods(&api);
    let first = pods.list(&ListParams::default().labels("app=x").limit(2)).await.unwrap();
    let names =
        |l: &kube::api::ObjectList<Pod>| l.items.iter().map(|p| p.metadata.name.clone().unwrap()).collect::<Vec<_>>();
    assert_eq!(names(&first), ["p0", "p1"]);
    let token = first.metadata.continue_.clone().expect("more pages");
    let rest = pods.list(&ListParams::default().labels("app=x").continue_token(&token)).await.unwrap();
    assert_eq!(names(&rest), ["p2", "p3", "p4"]);
    assert!(rest.metadata.continue_.as_deref().unwrap_or("").is_empty());
    api.ignore_limit(true);
    assert_eq!(pods.list(&ListParams::default().limit(2)).await.unwrap().items.len(), 6);
}

#[tokio::test]
async fn deletes_and_patches_check_their_preconditions() {
    let api = FakeApi::with_objects([pod("a", "uid-a", json!({}))]);
    let pods = pods(&api);
    let wrong_uid = DeleteParams {
        preconditions: Some(Preconditions { uid: Some("uid-b".into()), resource_version: None }),
        ..DeleteParams::default()
    };
    let err = pods.delete("a", &wrong_uid).await.unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 409), "{err:?}");
    let stale = json!({"metadata": {"resourceVersion": "4", "labels": {"x": "y"}}});
    let err = pods.patch("a", &PatchParams::default(), &Patch::Merge(&stale)).await.unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 409), "{err:?}");
    let fresh = json!({"metadata": {"resourceVersion": "5", "labels": {"x": "y"}}});
    let patched = pods.patch("a", &PatchParams::default(), &Patch::Merge(&fresh)).await.unwrap();
    assert_eq!(patched.metadata.labels.unwrap()["x"], "y");
    assert_ne!(patched.metadata.resource_version.as_deref(), Some("5"), "a write moves the resourceVersion");
    let right_uid = DeleteParams {
        preconditions: Some(Preconditions { uid: Some("uid-a".into()), resource_version: None }),
        ..DeleteParams::default()
    };
    pods.delete("a", &right_uid).await.unwrap();
    assert!(api.object("/api/v1/namespaces/ml/pods/a").is_none());
    let path = "/api/v1/namespaces/ml/pods/a";
    assert_eq!(
        api.writes(),
        [format!("DELETE {path}"), format!("PATCH {path}"), format!("PATCH {path}"), format!("DELETE {path}")]
    );
    assert!(api.unexpected().is_empty());
}

#[tokio::test]
async fn watches_see_puts_and_removes_that_match_their_selector() {
    let api = FakeApi::new();
    let pods = pods(&api);
    let mut stream = Box::pin(pods.watch(&WatchParams::default().labels("app"), "0").await.unwrap());
    eventually("the watch is open", || api.seen().iter().any(|s| s.is_watch())).await;
    api.put(pod("ignored", "u0", json!({"other": "1"})));
    api.put(pod("a", "u1", json!({"app": "x"})));
    api.remove(&pod("a", "u1", json!({})));
    use futures::StreamExt;
    let kinds: Vec<String> = stream
        .by_ref()
        .take(2)
        .map(|e| match e.unwrap() {
            WatchEvent::Added(p) => format!("ADDED {}", p.metadata.name.unwrap()),
            WatchEvent::Deleted(p) => format!("DELETED {}", p.metadata.name.unwrap()),
            other => format!("{other:?}"),
        })
        .collect()
        .await;
    assert_eq!(kinds, ["ADDED a", "DELETED a"]);
    api.end_watches("");
    assert!(tokio::time::timeout(Duration::from_secs(5), stream.next()).await.unwrap().is_none(), "ended");
}

#[tokio::test]
async fn faults_answer_codes_and_loopback_serves_the_same_store() {
    let api = FakeApi::with_objects([pod("a", "uid-a", json!({}))]);
    api.fault(|seen| (seen.method == "GET" && seen.path.ends_with("/pods/a")).then_some(Fault::Status(503)));
    let err = pods(&api).get("a").await.unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 503), "{err:?}");
    api.clear_faults();
    let served = api.serve().await;
    let over_loopback: Api<Pod> = Api::namespaced(served.client(), "ml");
    assert_eq!(over_loopback.get("a").await.unwrap().metadata.uid.as_deref(), Some("uid-a"));
    assert_eq!(api.seen().len(), 2, "both requests recorded, whichever way they came");
}

#[tokio::test]
async fn generated_collections_are_paged_after_the_stored_objects() {
    let api = FakeApi::new();
    api.generate("/api/v1/pods", Some("gen"), 3, |i, out| {
        out.push_str(&pod(&format!("g{i}"), &format!("g{i}"), json!({"gen": "1"})).to_string());
    });
    api.insert(pod("stored", "s", json!({"gen": "1"})));
    let all = Api::<Pod>::all(api.client());
    let page = all.list(&ListParams::default().labels("gen").limit(3)).await.unwrap();
    let names: Vec<String> = page.items.iter().map(|p| p.metadata.name.clone().unwrap()).collect();
    assert_eq!(names, ["stored", "g0", "g1"]);
    let rest = all
        .list(&ListParams::default().labels("gen").continue_token(page.metadata.continue_.as_deref().unwrap()))
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 1);
    assert!(all.list(&ListParams::default()).await.unwrap().items.len() == 1, "without the label only what is stored");
}
