//! The namespace allow-list (`--namespaces`) against the fake API server: every namespaced kind is
//! listed and watched in the listed namespaces only, objects elsewhere are neither read nor acted
//! on, nodes are still watched cluster-wide, and a relist in one namespace keeps the others'.

use crate::controller::testing::RbacChecked;
use trainguard_fake_api::wait::{DEADLINE, within};

use std::collections::BTreeSet;
use std::time::Duration;

use crate::controller::config::PlanConfig;
use crate::controller::live;
use crate::controller::metrics::Metrics;
use crate::controller::namespaces::Namespaces;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use trainguard_fake_api::{ApiPath, FakeApi};
use trainguard_test_support::objects::*;

fn listed(names: &[&str]) -> Namespaces {
    Namespaces::parse(names).unwrap()
}

/// `object`, moved to namespace `ns` (with UIDs of its own there).
fn in_ns(object: Value, ns: &str) -> Value {
    let uid = format!("{}-{ns}", object["metadata"]["uid"].as_str().unwrap_or(""));
    let mut object = set(object, "/metadata/namespace", Value::from(ns));
    object = set(object, "/metadata/uid", Value::from(uid));
    if let Some(owners) = object["metadata"]["ownerReferences"].as_array_mut() {
        for owner in owners {
            owner["uid"] = Value::from(format!("{}-{ns}", owner["uid"].as_str().unwrap_or("")));
        }
    }
    object
}

/// In `ns`: a job whose TTL expired long ago, and a pod of another job stuck terminating on `n1`.
fn work_in(ns: &str) -> Vec<Value> {
    let stuck = pytorchjob("b");
    vec![
        in_ns(with_ttl(succeeded(pytorchjob("a"), 0), 0), ns),
        in_ns(stuck.clone(), ns),
        in_ns(deleting(v1_pod(&stuck, "b-master-0", "n1"), 300), ns),
    ]
}

async fn wait_for(api: &FakeApi, what: &str, check: impl Fn(&FakeApi) -> bool) {
    if !within(DEADLINE, || check(api)).await {
        panic!("timed out waiting for {what}; calls: {:#?}", api.calls());
    }
}

/// Requests for a namespaced resource (events included) outside `allowed`, or cluster-wide.
fn outside(api: &FakeApi, allowed: &[&str]) -> Vec<String> {
    api.seen()
        .iter()
        .filter(|s| !crate::rbac::cluster_scoped(&s.rbac.1) && s.rbac.1 != "leases")
        .filter(|s| ApiPath::parse(&s.path).namespace.is_none_or(|ns| !allowed.contains(&ns.as_str())))
        .map(|s| format!("{} {}?{}", s.method, s.path, s.query))
        .collect()
}

#[tokio::test]
#[allow(clippy::disallowed_methods, reason = "a quiet period showing the unlisted namespace is left alone (real time)")]
async fn only_the_listed_namespaces_are_read_and_acted_on() {
    let mut objects = work_in("ml");
    objects.extend(work_in("other"));
    objects.extend([unreachable(node("n1", None), 0), node("n2", None), node("n3", None)]);
    let api = FakeApi::with_objects(objects);
    let client = api.client();
    let stop = CancellationToken::new();
    let config = PlanConfig { max_force_deletes_per_minute: 60, ..PlanConfig::acting() };
    // "ml2" holds nothing: a listed namespace without work still gets its watches.
    let namespaces = listed(&["ml", "ml2"]);
    let run = tokio::spawn(live::run_in(client, config, namespaces, Metrics::unregistered(), stop.clone()));

    wait_for(&api, "the TTL delete, the force delete and their events in ml", |api| {
        let r = api.event_reasons();
        r.contains(&"TTLExpiredDeleted".to_string()) && r.iter().filter(|r| *r == "ForceDeletedStuckPod").count() == 2
    })
    .await;
    // Give "other" every chance to be (wrongly) handled too: a quiet period, real time.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut writes = api.writes();
    writes.sort();
    assert_eq!(
        writes,
        [
            "DELETE /api/v1/namespaces/ml/pods/b-master-0",
            "DELETE /apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/a",
            "PATCH /api/v1/namespaces/ml/pods/b-master-0/status",
        ]
    );
    assert_eq!(outside(&api, &["ml", "ml2"]), Vec::<String>::new(), "requests outside the listed namespaces");
    assert!(api.object("/apis/kubeflow.org/v1/namespaces/other/pytorchjobs/a").is_some());
    assert!(api.object("/api/v1/namespaces/other/pods/b-master-0").is_some());

    // Every namespaced kind is listed in each listed namespace; nodes cluster-wide.
    let lists: BTreeSet<String> = api.seen().iter().filter(|s| s.rbac.2 == "list").map(|s| s.path.clone()).collect();
    for ns in ["ml", "ml2"] {
        for collection in [
            format!("/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs"),
            format!("/apis/kubeflow.org/v1/namespaces/{ns}/tfjobs"),
            format!("/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs"),
            format!("/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets"),
            format!("/apis/batch/v1/namespaces/{ns}/jobs"),
            format!("/api/v1/namespaces/{ns}/pods"),
            format!("/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads"),
        ] {
            assert!(lists.contains(&collection), "{collection} not listed: {lists:#?}");
        }
    }
    assert!(lists.contains("/api/v1/nodes"), "nodes are cluster-scoped: {lists:#?}");
    assert_eq!(api.violations(), Vec::<String>::new());
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), run).await.expect("stops promptly").unwrap();
}

/// A watch that expires in one namespace relists that namespace only: the objects the other
/// namespaces' watches hold stay, so a pod there is still force-deleted when its node fails.
#[tokio::test]
async fn a_relist_in_one_namespace_keeps_the_objects_of_the_others() {
    let stuck = in_ns(pytorchjob("b"), "ml2");
    let objects = vec![
        stuck.clone(),
        deleting(v1_pod(&stuck, "b-master-0", "n1"), 300),
        node("n1", None),
        node("n2", None),
        node("n3", None),
    ];
    let api = FakeApi::with_objects(objects);
    let client = api.client();
    let stop = CancellationToken::new();
    let config = PlanConfig { max_force_deletes_per_minute: 60, ..PlanConfig::acting() };
    let run = tokio::spawn(live::run_in(client, config, listed(&["ml", "ml2"]), Metrics::unregistered(), stop.clone()));

    let pod_watches = |api: &FakeApi| {
        api.seen().iter().filter(|s| s.path == "/api/v1/namespaces/ml/pods" && s.rbac.2 == "watch").count()
    };
    wait_for(&api, "both pod watches in ml", |api| pod_watches(api) == 2).await;
    api.expire_watches("/api/v1/pods", "ml");
    // The watches of ml start again only after their relist went to the loop, ahead of the node
    // change below.
    wait_for(&api, "the pod watches of ml, relisted", |api| pod_watches(api) == 4).await;
    assert!(api.writes().is_empty(), "n1 is Ready: nothing to do yet: {:#?}", api.writes());

    api.put(unreachable(node("n1", None), 0));
    wait_for(&api, "the force delete in ml2", |api| {
        api.writes().contains(&"DELETE /api/v1/namespaces/ml2/pods/b-master-0".to_string())
    })
    .await;
    assert_eq!(api.violations(), Vec::<String>::new());
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), run).await.expect("stops promptly").unwrap();
}
