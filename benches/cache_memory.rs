//! Cache cost per JobSet: loads 100,000 JobSets (two replicated jobs each, realistic names)
//! into the webhook's JobSet cache and counts the heap bytes it holds, with a counting global
//! allocator. Budget: 512 bytes per JobSet; exits non-zero above it.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a benchmark: a panic is its failure report")]

mod counting_alloc;

use trainguard::cluster::ClusterCache;
use trainguard_core::model::jobset::JobSetView;

const JOBSETS: usize = 100_000;
const BUDGET_BYTES: f64 = 512.0;

/// Heap bytes per JobSet the cache holds after loading [`JOBSETS`] of them; `owned`: each is
/// controlled by a TrainJob, so the index keeps the controller's facts of it too.
fn per_jobset(owned: bool) -> f64 {
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = trainguard::cluster::metrics::CacheMetrics::register(&mut registry);
    let cache = ClusterCache::new(std::time::Duration::from_secs(60), metrics);
    let namespaces: Vec<String> = (0..200).map(|i| format!("team-{i:03}-ml")).collect();
    let before = counting_alloc::live_bytes();
    for i in 0..JOBSETS {
        // Built and dropped per object, as a watch event is: only what the cache keeps stays.
        let name = format!("llama-finetune-{i:06}");
        let mut metadata = serde_json::json!({"name": name, "namespace": namespaces[i % namespaces.len()]});
        if owned {
            metadata["uid"] = format!("5b3c1f0e-8a1d-4c2e-9f6a-{i:012}").into();
            metadata["creationTimestamp"] = "2026-01-01T00:00:00Z".into();
            metadata["ownerReferences"] = serde_json::json!([{"apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob", "name": name, "uid": format!("0c4d2a1b-7e6f-4a3b-8c9d-{i:012}"), "controller": true}]);
        }
        let js: JobSetView = serde_json::from_value(serde_json::json!({
            "metadata": metadata,
            "status": {"replicatedJobsStatus": [
                {"name": "node", "active": i % 3, "ready": 0, "succeeded": 0, "failed": 0, "suspended": 0},
                {"name": "dataset-initializer", "active": 0, "ready": 0, "succeeded": 1, "failed": 0, "suspended": 0}
            ]}
        }))
        .unwrap();
        cache.apply_jobset(&js);
    }
    let held = (counting_alloc::live_bytes() - before) as f64;
    assert_eq!(cache.jobset_count(), JOBSETS);
    let per = held / JOBSETS as f64;
    let what = if owned { "JobSets of TrainJobs (with the controller's facts)" } else { "JobSets" };
    println!(
        "cache_memory: {JOBSETS} {what} hold {:.1} MiB: {per:.0} bytes per JobSet (budget {BUDGET_BYTES:.0})",
        held / (1024.0 * 1024.0)
    );
    per
}

fn main() {
    let worst = per_jobset(false).max(per_jobset(true));
    if worst > BUDGET_BYTES {
        eprintln!("cache_memory: over budget");
        std::process::exit(1);
    }
}
