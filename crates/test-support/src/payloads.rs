//! The benchmark payloads: `fixtures/bench/{small,large}-update.review.json` (~5 KB and
//! ~150 KB TrainJob UPDATEs with unchanged overrides, the common case), and "gated" variants
//! of each that change a nodeSelector while the job stays suspended, so the gate runs (U3), and a
//! "denied" one that changes it while the job runs (U2), and the large update with one
//! managedFields timestamp re-stamped, and the small update whose first runtime patch was
//! re-stamped by its manager (`time` only: allowed as unchanged, U1, after a semantic
//! comparison), and its new object as a CREATE; and the cluster view they are decided against.

use serde_json::Value;
use trainguard_core::view::{JobSetState, StaticView};

/// A cluster view that knows the reviews' JobSet, stopped: gated reviews do a real lookup and
/// are allowed.
pub fn stopped_jobset_view() -> StaticView {
    StaticView::new().with_jobset(
        "ml-team",
        "llama",
        JobSetState { deleting: false, replicated_jobs: vec![("node".into(), 0)] },
    )
}

fn fixture(name: &str) -> Vec<u8> {
    let path = crate::repo_root().join(format!("fixtures/bench/{name}.review.json"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn gated(body: &[u8]) -> Vec<u8> {
    let mut review: Value = serde_json::from_slice(body).unwrap();
    for side in ["object", "oldObject"] {
        review["request"][side]["spec"]["suspend"] = Value::Bool(true);
        // Suspended and stopped: no active jobs left in the TrainJob's own status (G4).
        review["request"][side]["status"] = Value::Null;
    }
    edit_placement(&mut review)
}

/// The new object's accelerator changed in its first runtime patch.
fn edit_placement(review: &mut Value) -> Vec<u8> {
    let selector = review
        .pointer_mut("/request/object/spec/runtimePatches/0/trainingRuntimeSpec/template/spec/replicatedJobs/0/template/spec/template/spec/nodeSelector")
        .expect("bench fixture has a nodeSelector in its first runtime patch");
    selector["cloud.google.com/gke-accelerator"] = Value::String("nvidia-b200".into());
    serde_json::to_vec(&review).unwrap()
}

pub fn small_update() -> Vec<u8> {
    fixture("small-update")
}

pub fn large_update() -> Vec<u8> {
    fixture("large-update")
}

/// The large update as most real updates come: the new object's managedFields differ from the
/// old one's in one timestamp (the last manager's entry re-stamped by the API server), so only
/// the rest of what is skipped is byte-identical on both sides.
pub fn large_update_restamped() -> Vec<u8> {
    let mut review: Value = serde_json::from_slice(&large_update()).unwrap();
    let entries = review
        .pointer_mut("/request/object/metadata/managedFields")
        .and_then(Value::as_array_mut)
        .expect("bench fixture has managedFields");
    let last = entries.last_mut().expect("at least one managedFields entry");
    last["time"] = Value::String("2025-06-02T09:30:00Z".into());
    serde_json::to_vec(&review).unwrap()
}

pub fn small_gated() -> Vec<u8> {
    gated(&small_update())
}

pub fn large_gated() -> Vec<u8> {
    gated(&large_update())
}

/// The small update as its runtime patches' owner re-applies them unchanged: the first patch's
/// `time` re-stamped in the new object, while the job runs. The overrides are no longer
/// byte-identical, so they are compared by meaning (`time` does not count): U1. The webhook's
/// `matchConditions` let this update through (CEL compares the lists whole), unlike the
/// byte-identical small and large updates.
pub fn small_retimed() -> Vec<u8> {
    let mut review: Value = serde_json::from_slice(&small_update()).unwrap();
    let time = review
        .pointer_mut("/request/object/spec/runtimePatches/0/time")
        .expect("bench fixture has a time in its first runtime patch");
    *time = Value::String("2025-06-02T09:30:00Z".into());
    serde_json::to_vec(&review).unwrap()
}

/// The small update's new object as a CREATE (no old object, no status yet): its overrides are
/// shape-checked on every create (allow-create). The API server sends every CREATE.
pub fn small_create() -> Vec<u8> {
    let mut review: Value = serde_json::from_slice(&small_update()).unwrap();
    let request = review["request"].as_object_mut().expect("bench fixture has a request");
    request.insert("operation".into(), Value::String("CREATE".into()));
    request.remove("oldObject");
    request["object"].as_object_mut().expect("bench fixture has an object").remove("status");
    serde_json::to_vec(&review).unwrap()
}

/// The small update with its placement edited while the job runs: denied (U2).
pub fn small_denied() -> Vec<u8> {
    edit_placement(&mut serde_json::from_slice(&small_update()).unwrap())
}

/// A CREATE whose `podSpecOverrides` is `[1,1,…]` with `items` items: one shape error each (the
/// hostile client of `benches/hostile.py`: 3.5 M items fill the 7 MiB body limit).
pub fn create_with_bad_items(items: usize) -> Vec<u8> {
    let mut list = String::with_capacity(items * 2 + 2);
    list.push('[');
    for i in 0..items {
        if i > 0 {
            list.push(',');
        }
        list.push('1');
    }
    list.push(']');
    format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"0c6f8a8e-1d1b-4a7e-9a55-0000000000b1",
        "kind":{{"group":"trainer.kubeflow.org","version":"v1alpha1","kind":"TrainJob"}},
        "resource":{{"group":"trainer.kubeflow.org","version":"v1alpha1","resource":"trainjobs"}},
        "name":"llama","namespace":"ml-team","operation":"CREATE","userInfo":{{"username":"mallory"}},
        "object":{{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob",
        "metadata":{{"name":"llama","namespace":"ml-team"}},
        "spec":{{"runtimeRef":{{"name":"torch"}},"podSpecOverrides":{list}}}}}}}}}"#
    )
    .into_bytes()
}
