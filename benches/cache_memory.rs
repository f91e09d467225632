//! Cache cost per JobSet: loads 100,000 JobSets (two replicated jobs each, realistic names)
//! into the webhook's JobSet cache and counts the heap bytes it holds, with a counting global
//! allocator. Budget: 512 bytes per JobSet; exits non-zero above it.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a benchmark: a panic is its failure report")]

mod counting_alloc;

use trainguard::cluster::ClusterCache;
use trainguard_core::model::jobset::JobSetView;

const JOBSETS: usize = 100_000;
const BUDGET_BYTES: f64 = 512.0;

fn main() {
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = trainguard::cluster::metrics::CacheMetrics::register(&mut registry);
    let cache = ClusterCache::new(std::time::Duration::from_secs(60), metrics);
    let namespaces: Vec<String> = (0..200).map(|i| format!("team-{i:03}-ml")).collect();
    let before = counting_alloc::live_bytes();
    for i in 0..JOBSETS {
        // Built and dropped per object, as a watch event is: only what the cache keeps stays.
        let js: JobSetView = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("llama-finetune-{i:06}"), "namespace": namespaces[i % namespaces.len()]},
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
    println!(
        "cache_memory: {JOBSETS} JobSets hold {:.1} MiB: {per:.0} bytes per JobSet (budget {BUDGET_BYTES:.0})",
        held / (1024.0 * 1024.0)
    );
    if per > BUDGET_BYTES {
        eprintln!("cache_memory: over budget");
        std::process::exit(1);
    }
}
