//! Report mode: what a write would have done, said as such.

use super::*;

#[test]
fn report_mode_prefixes_write_events_with_would() {
    let report = cfg(|c| c.mode = Mode::Report);
    let done = with_ttl(succeeded(pytorchjob("a"), 0), 60);
    let lines = plan_json(std::slice::from_ref(&done), 90, &report, &HashMap::new());
    assert_eq!(lines[1]["reason"], "WouldTTLExpiredDeleted");
    assert!(lines[1]["message"].as_str().unwrap().starts_with("Would be deleted"));
    let (job, pod, dead) = failed_node_world();
    let lines = plan_json(&[job, pod, dead, node("h1", None)], 420, &report, &HashMap::new());
    assert_eq!(lines[2]["reason"], "WouldForceDeletedStuckPod");
    // Events that stand for no write keep their reason.
    let lines = plan_json(&[with_ttl(succeeded(pytorchjob("b"), 600), 60)], 0, &report, &HashMap::new());
    assert_eq!(lines[0]["reason"], "TTLClockSkew");
}
