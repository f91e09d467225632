//! The force-delete budget (`--max-force-deletes-per-minute`).

use super::*;

#[test]
fn rate_limit_serves_oldest_first_and_requeues_at_the_next_token() {
    let job = pytorchjob("a");
    let mut objects = vec![job.clone(), unreachable(node("n1", None), 0)];
    objects.extend((0..4).map(|i| node(&format!("h{i}"), None)));
    for (i, deleted_at) in [(0, 300), (1, 290), (2, 310)] {
        objects.push(deleting(v1_pod(&job, &format!("a-worker-{i}"), "n1"), deleted_at));
    }
    let config = cfg(|c| c.max_force_deletes_per_minute = 2);
    let lines = plan_lines(&objects, 1000, &config);
    let deletes: Vec<&String> = lines.iter().filter(|l| l.starts_with("force-delete-pod")).collect();
    assert_eq!(deletes.len(), 2, "{lines:#?}");
    assert!(deletes[0].contains("a-worker-1") && deletes[1].contains("a-worker-0"), "{lines:#?}");
    let tail: Vec<&String> = lines.iter().filter(|l| l.contains("a-worker-2")).collect();
    assert_eq!(
        tail,
        [
            "event Pod ml/a-worker-2 node-failure ForceDeleteSuppressed",
            "requeue Pod ml/a-worker-2 node-failure rate-limit @+1030"
        ]
    );
}
